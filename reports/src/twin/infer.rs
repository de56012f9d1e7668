//! Inferring a [`TwinSetup`] from parsed inputs: which perftest run is
//! the twin's ([`pick_run`]), the test and its parameters from the run's
//! header and table, then the host ([`super::host`]) and the QoS settings
//! ([`super::qos`]) from the other dumps.
//!
//! perftest's defaults, where the header does not print a value (from its
//! `perftest_parameters.h`): 5000 iterations for `ib_write_bw`, 1000 for
//! every other test; TX depth 128 for bandwidth, 1 for latency; CQ
//! moderation 100 (at most the TX depth); no inline data for bandwidth
//! tests and READs, 220 B (WRITE) and 236 B (SEND) for the latency tests
//! on ConnectX; `-D` runs 5 s; `-a` runs 2 B to 8 MiB.

use sim::workload::perftest::PerftestTest;

use crate::realnic::perftest::{PerftestReport, PerftestRun, Side, TestKind};
use crate::realnic::Parsed;

use super::evidence::{bytes, end, read, title, Inference};
use super::types::{RealRow, TwinError, TwinSetup};
use super::{host, qos};

/// perftest's `-a` sizes: 2 B to 8 MiB.
const ALL_LARGEST: u64 = 8 << 20;

/// Infer the twin of the perftest run among `inputs` (file name, parsed
/// text). Exactly one run is modelled: a file (or two files) holding both
/// ends of one test is fine (the client's table is used); two tests, or
/// two clients, are [`TwinError::TwoRuns`].
pub fn infer(inputs: &[(String, Parsed)]) -> Result<TwinSetup, TwinError> {
    let mut inf = Inference::new(inputs)?;
    let pick = pick_run(&mut inf)?;
    check_infiniband(&inf, &pick)?;
    let device = field_any(&pick, "Device").map(str::to_string);
    host::check_link_layer(&inf, device.as_deref())?;
    let test = test_of(&mut inf, &pick)?;
    check_rows(&inf, &pick)?;

    let real = real_rows(pick.run);
    let (sizes, all) = sizes_of(&mut inf, &pick, &real);
    let (iters, duration_s) = timing(&mut inf, &pick, test, &real);
    let header = header_params(&mut inf, &pick, test);
    let perftest_mtu = pick
        .run
        .mtu_bytes
        .map(|m| (pick.input, m))
        .or_else(|| pick.other.and_then(|(i, o)| o.mtu_bytes.map(|m| (i, m))));
    let mtu = host::mtu(&mut inf, device.as_deref(), perftest_mtu);
    let measured = measured_bps(&real, header.bidirectional);
    let link_gbps = host::link_gbps(&mut inf, device.as_deref(), measured);
    let nic_model = host::nic_model(&mut inf, device.as_deref());
    let pci = host::pcie(&mut inf, device.as_deref(), nic_model);
    let gid_index = pick
        .run
        .gid_index
        .or_else(|| pick.other.and_then(|(_, o)| o.gid_index));
    let q = qos::infer(&mut inf, device.as_deref(), gid_index);
    fabric_assumptions(&mut inf);
    describe_run(&mut inf, &pick, test, &sizes, all);

    Ok(TwinSetup {
        test,
        sizes,
        all,
        iters,
        duration_s,
        qps: header.qps,
        tx_depth: header.tx_depth,
        bidirectional: header.bidirectional,
        inline: header.inline,
        cq_mod: header.cq_mod,
        mtu,
        link_gbps,
        nic_model,
        pcie: pci.link,
        max_payload: pci.max_payload,
        max_read_request: pci.max_read_request,
        pfc_priorities: q.pfc_priorities,
        priority: q.priority,
        trust: q.trust,
        roce_v2: q.roce_v2,
        cnps: q.cnps,
        back_to_back: false,
        real,
        side: pick.run.side,
        understood: inf.understood(),
        assumptions: inf.assumptions,
    })
}

/// Read each `(file name, text)` ([`read`]) and infer the twin.
pub fn infer_texts(files: &[(String, String)]) -> Result<TwinSetup, TwinError> {
    let parsed = files
        .iter()
        .map(|(f, t)| read(f, t).map(|p| (f.clone(), p)))
        .collect::<Result<Vec<_>, _>>()?;
    infer(&parsed)
}

/// The run the twin models, and the other end's run of the same test.
struct Picked<'a> {
    input: usize,
    report: &'a PerftestReport,
    run: &'a PerftestRun,
    other: Option<(usize, &'a PerftestRun)>,
}

/// Choose the run: every run among the inputs must be of one test, with at
/// most one client and one server; the client's run is used unless only
/// the server's has rows.
fn pick_run<'a>(inf: &mut Inference<'a>) -> Result<Picked<'a>, TwinError> {
    let runs: Vec<(usize, &PerftestReport, &PerftestRun)> = inf
        .ev
        .perftest
        .iter()
        .flat_map(|&(i, r)| r.runs.iter().map(move |run| (i, r, run)))
        .collect();
    let Some(&(first_input, first_report, first)) = runs.first() else {
        if let Some(&(i, r)) = inf.ev.perftest.first() {
            return Err(TwinError::NoRows {
                file: inf.file(i).to_string(),
                run: "the perftest run".to_string(),
                why: failure(r).unwrap_or_else(|| "no header or table was found".to_string()),
                understood: inf.so_far(),
            });
        }
        return Err(TwinError::NoPerftest {
            understood: inf.so_far(),
        });
    };
    let two =
        |inf: &Inference<'_>, a: (usize, &PerftestRun), b: (usize, &PerftestRun), why: &str| {
            TwinError::TwoRuns {
                first: run_ref(inf.file(a.0), a.1),
                second: run_ref(inf.file(b.0), b.1),
                why: why.to_string(),
                understood: inf.so_far(),
            }
        };
    if let Some(&(i, _, run)) = runs[1..].iter().find(|r| !same_test(first, r.2)) {
        return Err(two(inf, (first_input, first), (i, run), "different tests"));
    }
    let (servers, clients): (Vec<_>, Vec<_>) =
        runs.iter().copied().partition(|r| r.2.side == Side::Server);
    if let [a, b, ..] = clients[..] {
        let why = "two client runs, or runs that do not say which end printed them";
        return Err(two(inf, (a.0, a.2), (b.0, b.2), why));
    }
    if let [a, b, ..] = servers[..] {
        return Err(two(inf, (a.0, a.2), (b.0, b.2), "two server runs"));
    }
    let client = clients.first().copied();
    let server = servers.first().copied();
    let (chosen, other) = match (client, server) {
        (Some(c), Some(s)) if !has_rows(c.2) && has_rows(s.2) => (s, Some(c)),
        (Some(c), s) => (c, s),
        (None, s) => (s.unwrap_or((first_input, first_report, first)), None),
    };
    if let Some((oi, _, o)) = other {
        let why = if chosen.2.side == Side::Server {
            "the client's has no rows, so the server's table is used"
        } else {
            "its table is not used: the client's is"
        };
        inf.took(
            oi,
            format!(
                "the {} end of the same test (line {}): {why}",
                end(o.side),
                o.line
            ),
        );
    }
    Ok(Picked {
        input: chosen.0,
        report: chosen.1,
        run: chosen.2,
        other: other.map(|(i, _, r)| (i, r)),
    })
}

fn has_rows(r: &PerftestRun) -> bool {
    !r.bw.is_empty() || !r.lat.is_empty() || !r.lat_duration.is_empty()
}

/// Whether two runs are the same test (so possibly its two ends).
fn same_test(a: &PerftestRun, b: &PerftestRun) -> bool {
    let squash = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    match (&a.title, &b.title) {
        (Some(x), Some(y)) => squash(x) == squash(y),
        _ => {
            let kinds =
                a.kind == b.kind || a.kind == TestKind::Unknown || b.kind == TestKind::Unknown;
            let verbs = a.verb.is_none() || b.verb.is_none() || a.verb == b.verb;
            kinds && verbs
        }
    }
}

/// `FILE line N: TITLE (END)`.
fn run_ref(file: &str, run: &PerftestRun) -> String {
    format!(
        "{file} line {}: {} ({})",
        run.line,
        title(run),
        end(run.side)
    )
}

/// A header field of the run, else of the other end's run.
fn field_any<'a>(pick: &Picked<'a>, key: &str) -> Option<&'a str> {
    field(pick.run, key).or_else(|| pick.other.and_then(|(_, o)| field(o, key)))
}

fn field<'a>(run: &'a PerftestRun, key: &str) -> Option<&'a str> {
    run.fields
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(key))
        .map(|(_, v)| v.as_str())
}

/// The leading integer of a header value (`0[B]`, `128`).
fn number(v: &str) -> Option<u32> {
    let digits: String = v.trim().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// perftest's `Link type : IB`, on either end.
fn check_infiniband(inf: &Inference<'_>, pick: &Picked<'_>) -> Result<(), TwinError> {
    let ends = std::iter::once((pick.input, pick.run)).chain(pick.other);
    for (i, run) in ends {
        if let Some(l) = run
            .link_type
            .as_deref()
            .filter(|l| l.eq_ignore_ascii_case("IB"))
        {
            return Err(TwinError::InfiniBand {
                file: inf.file(i).to_string(),
                evidence: format!("perftest's header, line {}: Link type : {l}", run.line),
                understood: inf.so_far(),
            });
        }
    }
    Ok(())
}

/// The program, from the title's verb and the table's kind.
fn test_of(inf: &mut Inference<'_>, pick: &Picked<'_>) -> Result<PerftestTest, TwinError> {
    let run = pick.run;
    let unsupported = |inf: &Inference<'_>, what: String| TwinError::Unsupported {
        file: inf.file(pick.input).to_string(),
        what,
        understood: inf.so_far(),
    };
    if let Some(c) = run
        .connection
        .as_deref()
        .filter(|c| !c.eq_ignore_ascii_case("RC"))
    {
        return Err(unsupported(inf, format!("connection type {c}")));
    }
    let kind = match run.kind {
        TestKind::Unknown => pick.other.map_or(TestKind::Unknown, |(_, o)| o.kind),
        k => k,
    };
    let verb = run
        .verb
        .as_deref()
        .or_else(|| pick.other.and_then(|(_, o)| o.verb.as_deref()));
    let name = |op: &str| match kind {
        TestKind::Latency => format!("{op}_lat"),
        _ => format!("{op}_bw"),
    };
    let op = match verb {
        Some("RDMA_Write") => "write",
        Some("RDMA_Read") => "read",
        Some("Send") => "send",
        Some(_) => return Err(unsupported(inf, title(run))),
        None => {
            let value = name("write");
            inf.assume(
                "test",
                value.clone(),
                format!(
                    "the table has no title saying the verb: taken as ib_{value}, the usual one"
                ),
            );
            "write"
        }
    };
    if kind == TestKind::Unknown {
        // No table: `check_rows` says so.
        return Ok(PerftestTest::WriteBw);
    }
    PerftestTest::from_name(&name(op)).ok_or_else(|| unsupported(inf, title(run)))
}

/// The run must have rows: else say why (failed, cut, cycles).
fn check_rows(inf: &Inference<'_>, pick: &Picked<'_>) -> Result<(), TwinError> {
    let run = pick.run;
    if has_rows(run) {
        return Ok(());
    }
    let why = if run.latency_in_cycles {
        "its latencies are in CPU cycles (-C), which are no time without the CPU's clock: run it without -C".to_string()
    } else if let Some(f) = failure(pick.report) {
        f
    } else if run.truncated {
        "the output stops before the first row".to_string()
    } else {
        "the output has no result table".to_string()
    };
    Err(TwinError::NoRows {
        file: inf.file(pick.input).to_string(),
        run: format!("{} ({}, line {})", title(run), end(run.side), run.line),
        why,
        understood: inf.so_far(),
    })
}

/// A failed run: its first completion error.
fn failure(report: &PerftestReport) -> Option<String> {
    let e = report.errors.first()?;
    let status = match (&e.status_text, e.status) {
        (Some(t), Some(s)) => format!("{t} ({s})"),
        (Some(t), None) => t.clone(),
        (None, Some(s)) => format!("status {s}"),
        (None, None) => "an error".to_string(),
    };
    let at =
        e.at.as_deref()
            .map(|a| format!(" at {a}"))
            .unwrap_or_default();
    Some(format!(
        "the run failed: work completion with {status}{at} (line {})",
        e.line
    ))
}

/// One row per size, in the table's order; repeated sizes
/// (`--run_infinitely`) averaged.
fn real_rows(run: &PerftestRun) -> Vec<RealRow> {
    let mut rows: Vec<RealRow> = Vec::new();
    let mut sums: Vec<[u128; 4]> = Vec::new();
    for r in &run.bw {
        let k = match rows.iter().position(|x| x.bytes == r.bytes) {
            Some(k) => k,
            None => {
                rows.push(RealRow {
                    bytes: r.bytes,
                    ..RealRow::default()
                });
                sums.push([0; 4]);
                rows.len() - 1
            }
        };
        let s = &mut sums[k];
        s[0] += u128::from(r.iterations);
        s[1] += u128::from(r.avg_bps);
        s[2] += u128::from(r.peak_bps);
        s[3] += u128::from(r.msg_rate_per_s.unwrap_or(0));
        let row = &mut rows[k];
        row.repeats += 1;
        let n = u128::from(row.repeats);
        let mean = |v: u128| u64::try_from((v + n / 2) / n).unwrap_or(u64::MAX);
        row.iterations = mean(s[0]);
        row.bw_avg_bps = Some(mean(s[1]));
        row.bw_peak_bps = (run.peak_measured && s[2] > 0).then(|| mean(s[2]));
        row.msg_rate_per_s = r.msg_rate_per_s.map(|_| mean(s[3]));
    }
    for r in &run.lat {
        if let Some(row) = rows.iter_mut().find(|x| x.bytes == r.bytes) {
            row.repeats += 1;
            continue;
        }
        rows.push(RealRow {
            bytes: r.bytes,
            iterations: r.iterations,
            t_min_ns: Some(r.min_ns),
            t_typical_ns: Some(r.typical_ns),
            t_avg_ns: Some(r.avg_ns),
            t_max_ns: Some(r.max_ns),
            p99_ns: r.p99_ns,
            p999_ns: r.p999_ns,
            repeats: 1,
            ..RealRow::default()
        });
    }
    for r in &run.lat_duration {
        if let Some(row) = rows.iter_mut().find(|x| x.bytes == r.bytes) {
            row.repeats += 1;
            continue;
        }
        rows.push(RealRow {
            bytes: r.bytes,
            iterations: r.iterations,
            t_avg_ns: Some(r.avg_ns),
            tps: Some(r.tps),
            repeats: 1,
            ..RealRow::default()
        });
    }
    rows
}

/// The sizes, and whether the run was `-a`: two or more sizes doubling
/// from a power of two.
fn sizes_of(inf: &mut Inference<'_>, pick: &Picked<'_>, real: &[RealRow]) -> (Vec<u64>, bool) {
    let sizes: Vec<u64> = real.iter().map(|r| r.bytes).collect();
    let all = sizes.len() >= 2
        && sizes[0].is_power_of_two()
        && sizes.windows(2).all(|w| w[1] == w[0].saturating_mul(2));
    let last = sizes.last().copied().unwrap_or(0);
    if pick.run.truncated {
        inf.took(
            pick.input,
            format!(
                "the table is cut after the {} row: the {} row(s) read are compared",
                bytes(last),
                real.len()
            ),
        );
    } else if all && last < ALL_LARGEST {
        inf.took(
            pick.input,
            format!("-a run whose table ends at {}", bytes(last)),
        );
    }
    if sizes.len() > 1 && !all {
        inf.assume(
            "sizes",
            format!("{} B only", sizes[0]),
            "the table's sizes are not perftest -a's doubling series: the twin runs the first",
        );
    }
    (sizes, all)
}

/// `-n` (iteration mode) or `-D` (duration mode). perftest prints neither:
/// a timed run shows in a duration table, in repeated sizes
/// (`--run_infinitely`) or in an iteration count no one would type
/// (not a multiple of 100) where the peak was not measured.
fn timing(
    inf: &mut Inference<'_>,
    pick: &Picked<'_>,
    test: PerftestTest,
    real: &[RealRow],
) -> (Option<u64>, Option<f64>) {
    let run = pick.run;
    let repeated = real.iter().any(|r| r.repeats > 1);
    // Bandwidth rows without a peak (0.00 printed, or not measured).
    let odd_count = !run.bw.is_empty()
        && real
            .iter()
            .all(|r| r.bw_peak_bps.is_none() && r.iterations % 100 != 0);
    let timed = !run.lat_duration.is_empty() || repeated || (real.len() == 1 && odd_count);
    if !timed {
        let mut counts: Vec<u64> = real.iter().map(|r| r.iterations).collect();
        counts.sort_unstable();
        counts.dedup();
        if let [n] = counts[..] {
            return (Some(n), None);
        }
        let n = test_default_iters(test);
        inf.assume(
            "iters",
            n.to_string(),
            format!(
                "the rows' iteration counts differ ({}): perftest's default -n for ib_{}",
                counts
                    .iter()
                    .map(u64::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                test.name()
            ),
        );
        return (Some(n), None);
    }
    let estimate = real.iter().find_map(|r| {
        let per_s = r
            .msg_rate_per_s
            .or(r.tps)
            .map(|m| m as f64)
            .or_else(|| r.bw_avg_bps.map(|b| b as f64 / (r.bytes as f64 * 8.0)))?;
        (per_s > 0.0).then(|| r.iterations as f64 / per_s)
    });
    let how = if repeated {
        "a --run_infinitely run (one row per period)"
    } else if !run.lat_duration.is_empty() {
        "a timed (-D) run: the table is perftest's duration table"
    } else {
        "a timed (-D) run: the peak was not measured and the iteration count is no round -n"
    };
    match estimate {
        Some(s) => {
            let secs = s.round().max(1.0);
            inf.assume(
                "duration_s",
                format!("{secs} s"),
                format!(
                    "{how}; perftest does not print -D: estimated as iterations / rate = {s:.2} s"
                ),
            );
            (None, Some(secs))
        }
        None => {
            inf.assume(
                "duration_s",
                "5 s",
                format!("{how}; perftest does not print -D and the table gives no rate: perftest's default -D"),
            );
            (None, Some(5.0))
        }
    }
}

/// perftest's default `-n`: 5000 for `ib_write_bw`, 1000 otherwise.
fn test_default_iters(test: PerftestTest) -> u64 {
    if test == PerftestTest::WriteBw {
        5000
    } else {
        1000
    }
}

/// The header's settings.
struct Header {
    qps: u32,
    tx_depth: u32,
    bidirectional: bool,
    inline: u32,
    cq_mod: Option<u32>,
}

/// QPs, TX depth, direction, inline size and CQ moderation from the
/// header (either end), else perftest's defaults.
fn header_params(inf: &mut Inference<'_>, pick: &Picked<'_>, test: PerftestTest) -> Header {
    let run = pick.run;
    let bw = test.is_bw();
    let qps = run
        .qps
        .or_else(|| pick.other.and_then(|(_, o)| o.qps))
        .unwrap_or_else(|| {
            inf.assume(
                "qps",
                "1",
                "the header's Number of qps line is missing: perftest's default -q",
            );
            1
        });
    let default_depth = if bw { 128 } else { 1 };
    let tx_depth = run
        .tx_depth
        .or_else(|| pick.other.and_then(|(_, o)| o.tx_depth))
        .unwrap_or_else(|| {
            inf.assume(
                "tx_depth",
                default_depth.to_string(),
                "the header has no TX depth line (only the client prints it): perftest's default -t",
            );
            default_depth
        });
    let bidirectional = match (&run.title, pick.other.and_then(|(_, o)| o.title.as_ref())) {
        (Some(_), _) => run.bidirectional,
        (None, Some(t)) => t.contains("Bidirectional"),
        (None, None) => {
            if bw {
                inf.assume(
                    "bidirectional",
                    "false",
                    "the table has no title saying Bidirectional",
                );
            }
            false
        }
    };
    let inline = inline_size(inf, pick, test);
    let cq_mod = bw.then(|| {
        field_any(pick, "CQ Moderation")
            .and_then(number)
            .unwrap_or_else(|| {
                let v = 100.min(tx_depth);
                inf.assume(
                    "cq_mod",
                    v.to_string(),
                    "the header's CQ Moderation line is missing: perftest's default -Q (at most the TX depth)",
                );
                v
            })
    });
    for (key, what) in [("Using SRQ", "srq"), ("Dual-port", "dual_port")] {
        if field_any(pick, key).is_some_and(|v| v.eq_ignore_ascii_case("ON")) {
            inf.assume(
                what,
                "off",
                format!("the run had {key} ON, which the twin does not model"),
            );
        }
    }
    if let Some(n) = field_any(pick, "Post List")
        .and_then(number)
        .filter(|&n| n > 1)
    {
        inf.assume(
            "post_list",
            "1",
            format!("the run posted lists of {n} work requests; the twin posts them one by one"),
        );
    }
    Header {
        qps,
        tx_depth,
        bidirectional,
        inline,
        cq_mod,
    }
}

/// `Max inline data`, else perftest's default for the test.
fn inline_size(inf: &mut Inference<'_>, pick: &Picked<'_>, test: PerftestTest) -> u32 {
    if let Some(v) = field_any(pick, "Max inline data").and_then(number) {
        return v;
    }
    let (value, why) = match test {
        // perftest never inlines READs; its header then prints
        // `Outstand reads` instead.
        PerftestTest::ReadBw | PerftestTest::ReadLat => return 0,
        PerftestTest::WriteLat => (220, "perftest's default for ib_write_lat on ConnectX"),
        PerftestTest::SendLat => (
            236,
            "perftest's default for ib_send_lat over RC on ConnectX",
        ),
        _ => (0, "perftest's default for the bandwidth tests"),
    };
    inf.assume(
        "inline",
        format!("{value} B"),
        format!("the header's Max inline data line is missing: {why}"),
    );
    value
}

/// The best one-direction rate the table shows, bit/s: bandwidth, or for
/// latency the serialisation bound of messages of 64 KiB and more.
fn measured_bps(real: &[RealRow], bidirectional: bool) -> Option<u64> {
    // The average: a peak can pass the link rate by a rounding.
    let bw =
        real.iter()
            .filter_map(|r| r.bw_avg_bps)
            .max()
            .map(|b| if bidirectional { b / 2 } else { b });
    bw.or_else(|| {
        real.iter()
            .filter(|r| r.bytes >= 65536)
            .filter_map(|r| {
                let t = r.t_min_ns.or(r.t_avg_ns).filter(|&t| t > 0)?;
                u64::try_from(u128::from(r.bytes) * 8 * 1_000_000_000 / u128::from(t)).ok()
            })
            .max()
    })
}

/// The switch and cabling, which no input gives.
fn fabric_assumptions(inf: &mut Inference<'_>) {
    inf.assume(
        "back_to_back",
        "client and server through one switch",
        "no input says how the hosts are cabled",
    );
    inf.assume("cable", "1 m (5 ns)", "cable lengths are in no input");
    inf.assume(
        "switch",
        "the simulator's default switch (32 MB shared buffer, ECN marking on the RoCE priority)",
        "no switch configuration given",
    );
}

/// What was taken from the run's own input.
fn describe_run(
    inf: &mut Inference<'_>,
    pick: &Picked<'_>,
    test: PerftestTest,
    sizes: &[u64],
    all: bool,
) {
    let run = pick.run;
    let span = match (sizes.first(), sizes.last()) {
        (Some(a), Some(b)) if a != b => format!("{} .. {}", bytes(*a), bytes(*b)),
        (Some(a), _) => bytes(*a),
        _ => "no size".to_string(),
    };
    let mut s = format!(
        "the run at line {} is the twin's: ib_{}{}, {} size(s) {span}",
        run.line,
        test.name(),
        if all { " -a" } else { "" },
        sizes.len()
    );
    if let Some(d) = field_any(pick, "Device") {
        s.push_str(&format!(", device {d}"));
    }
    inf.took(pick.input, s);
}
