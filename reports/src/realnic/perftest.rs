//! perftest output (`ib_write_bw`, `ib_read_bw`, `ib_send_bw`,
//! `ib_atomic_bw`, `ib_*_lat`): header block, address lines, result tables
//! and completion errors.
//!
//! Accepted input (lenient): full-verbosity output of one or both ends
//! (a file holding server and client output gives two [`PerftestRun`]s),
//! TABs or spaces between header columns, `> ` quote prefixes, stderr
//! warnings interleaved anywhere, excerpts that start at the table header or
//! stop in the middle of a table (the run is then marked `truncated`).
//! Tables are read by their column headers, so old (`[MB/sec]`, no
//! MsgRate), new (`[MiB/sec]`), `--report_gbits` (`[Gb/sec]`), `#sl`,
//! `CPU_Util[%]` and per-port columns are all understood.
//!
//! Units (exact, integer): bandwidth in bits per second (perftest's
//! "MB/sec" was always MiB/s = 2^20 bytes; "Gb/sec" is 10^9 bits), message
//! rate in messages per second, latencies in nanoseconds, sizes in bytes.

use serde::Serialize;

use verbs_emu::perftest::report::COUNTERS_TITLE;

use super::text::{self, chunks, hex, lines, scaled_decimal, Line, ParseError};

/// Everything understood in one perftest output file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PerftestReport {
    /// One run per header block or table found (both ends in one file give
    /// two).
    pub runs: Vec<PerftestRun>,
    /// Completion errors (`Completion with error`, `Failed status ...`).
    pub errors: Vec<CompletionError>,
    /// Warning lines seen (kept verbatim, trimmed), with line numbers.
    pub warnings: Vec<(usize, String)>,
}

/// Which end printed a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// Printed after the `Waiting for client to connect` banner.
    Server,
    /// Printed with a TX depth and no server banner.
    Client,
    /// Could not tell.
    #[default]
    Unknown,
}

/// Bandwidth or latency test.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TestKind {
    /// `... BW Test`.
    Bandwidth,
    /// `... Latency Test`.
    Latency,
    /// Title missing (excerpt).
    #[default]
    Unknown,
}

/// One header block with its result table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PerftestRun {
    /// Line number where the run starts.
    pub line: usize,
    /// Test title as printed, e.g. `RDMA_Write BW Test`.
    pub title: Option<String>,
    /// The verb: `Send`, `RDMA_Write`, `RDMA_Read`, `Atomic`, ...
    pub verb: Option<String>,
    /// Bandwidth or latency.
    pub kind: TestKind,
    /// `Bidirectional` in the title.
    pub bidirectional: bool,
    /// Which end printed it.
    pub side: Side,
    /// `Device`.
    pub device: Option<String>,
    /// `Number of qps`.
    pub qps: Option<u32>,
    /// `Connection type` (RC, UC, UD, ...).
    pub connection: Option<String>,
    /// `TX depth`.
    pub tx_depth: Option<u32>,
    /// Negotiated `Mtu` in bytes.
    pub mtu_bytes: Option<u32>,
    /// `Link type` (`Ethernet` = RoCE, `IB`).
    pub link_type: Option<String>,
    /// `GID index`.
    pub gid_index: Option<u32>,
    /// Every `key : value` pair of the header, in order.
    pub fields: Vec<(String, String)>,
    /// `local address` lines.
    pub local: Vec<Address>,
    /// `remote address` lines.
    pub remote: Vec<Address>,
    /// Bandwidth rows.
    pub bw: Vec<BwRow>,
    /// Latency rows (iteration mode).
    pub lat: Vec<LatRow>,
    /// Latency rows of duration mode (`t_avg` and `tps average` only).
    pub lat_duration: Vec<LatDurationRow>,
    /// Peak bandwidth is measured (false with `-D` and the other cases
    /// where perftest warns that it is not).
    pub peak_measured: bool,
    /// Duration mode (`-D`) detected.
    pub duration_mode: bool,
    /// The excerpt stopped before the table's closing line.
    pub truncated: bool,
    /// The latency table is in CPU cycles (`-C`): its rows are not
    /// converted (cycles are not time without the CPU frequency) and are
    /// left out.
    pub latency_in_cycles: bool,
    /// The end-of-run counter block `rocelab perftest` prints after its
    /// results, when there is one.
    pub counters: Option<CounterBlock>,
}

/// The device's counter delta over one run, as `rocelab perftest` prints
/// it after the results: a title line (`Counter delta of this run:
/// device DEV, S s`), then an `ethtool -S` dump (`NIC statistics:`, then
/// `     name: value` per counter) of mlx5-named counters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CounterBlock {
    /// Line of the block's title (or of its `NIC statistics:` line).
    pub line: usize,
    /// The device the counters are of.
    pub device: Option<String>,
    /// How long the run the delta covers took, in nanoseconds.
    pub duration_ns: Option<u64>,
    /// The counters (what each counted during the run).
    pub counters: std::collections::BTreeMap<String, u64>,
}

/// One `local address` / `remote address` line (with its `GID:` line).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Address {
    /// LID (0 on RoCE).
    pub lid: Option<u32>,
    /// QP number.
    pub qpn: Option<u32>,
    /// Starting PSN.
    pub psn: Option<u32>,
    /// Remote key (READ/WRITE).
    pub rkey: Option<u32>,
    /// Virtual address (READ/WRITE).
    pub vaddr: Option<u64>,
    /// Outstanding reads (READ).
    pub out_reads: Option<u32>,
    /// GID bytes as printed (16 decimal bytes).
    pub gid: Option<Vec<u8>>,
    /// The GID's IPv4 address when it is IPv4-mapped (RoCEv2 over IPv4).
    pub gid_ipv4: Option<String>,
}

/// One bandwidth table row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BwRow {
    /// 1-based line number.
    pub line: usize,
    /// `#sl` when present.
    pub sl: Option<u32>,
    /// Message size in bytes.
    pub bytes: u64,
    /// Iterations (achieved count in duration mode).
    pub iterations: u64,
    /// Peak bandwidth in bit/s (0 when not measured).
    pub peak_bps: u64,
    /// Average bandwidth in bit/s.
    pub avg_bps: u64,
    /// Message rate in messages/s (absent in perftest 1.x).
    pub msg_rate_per_s: Option<u64>,
}

/// One latency table row (iteration mode). Times in nanoseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LatRow {
    /// 1-based line number.
    pub line: usize,
    /// Message size in bytes.
    pub bytes: u64,
    /// Iterations.
    pub iterations: u64,
    /// `t_min`.
    pub min_ns: u64,
    /// `t_max`.
    pub max_ns: u64,
    /// `t_typical` (the median).
    pub typical_ns: u64,
    /// `t_avg`.
    pub avg_ns: u64,
    /// `t_stdev`.
    pub stdev_ns: Option<u64>,
    /// `99% percentile`.
    pub p99_ns: Option<u64>,
    /// `99.9% percentile`.
    pub p999_ns: Option<u64>,
}

/// One latency row in duration mode.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct LatDurationRow {
    /// 1-based line number.
    pub line: usize,
    /// Message size in bytes.
    pub bytes: u64,
    /// Iterations achieved.
    pub iterations: u64,
    /// `t_avg` in ns.
    pub avg_ns: u64,
    /// `tps average`, transactions per second (rounded).
    pub tps: u64,
}

/// A work completion with error.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CompletionError {
    /// Line of the `Failed status` line.
    pub line: usize,
    /// `client` / `server` from the preceding `Completion with error at`.
    pub at: Option<String>,
    /// Numeric `ibv_wc_status` (12 = retry exceeded).
    pub status: Option<u32>,
    /// Status text (`transport retry counter exceeded`).
    pub status_text: Option<String>,
    /// Vendor syndrome (`syndrom 0x81`).
    pub vendor_err: Option<u32>,
}

/// Known column names, longest first where one is a prefix of another.
const COLUMNS: &[&str] = &[
    "#sl",
    "#bytes",
    "#iterations",
    "BW peak",
    "BW average",
    "BW Port1",
    "BW Port2",
    "MsgRate Port1",
    "MsgRate Port2",
    "MsgRate",
    "t_min",
    "t_max",
    "t_typical",
    "t_avg",
    "t_stdev",
    "99.9% percentile",
    "99% percentile",
    "tps average",
    "CPU_Util",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BwUnit {
    MiB,
    Gb,
}

#[derive(Debug, Clone)]
struct Table {
    cols: Vec<(&'static str, Option<BwUnit>)>,
    cycles: bool,
}

impl Table {
    fn parse_header(s: &str) -> Option<Table> {
        if !s.trim_start().starts_with("#bytes") && !s.trim_start().starts_with("#sl") {
            return None;
        }
        let mut cols = Vec::new();
        let mut i = 0;
        while i < s.len() {
            if !s.is_char_boundary(i) {
                i += 1;
                continue;
            }
            let rest = &s[i..];
            // Some builds print `iterations` without its `#`.
            if rest.starts_with("iterations") {
                cols.push(("#iterations", None));
                i += "iterations".len();
                continue;
            }
            // Shortened percentile headers (`99%[usec]`), as tables are
            // often re-typed in posts.
            let short = [("99.9%[", "99.9% percentile"), ("99%[", "99% percentile")];
            if let Some((tag, name)) = short.iter().find(|(t, _)| rest.starts_with(t)) {
                cols.push((name, None));
                i += tag.len();
                continue;
            }
            if let Some(name) = COLUMNS.iter().find(|c| rest.starts_with(**c)) {
                let after = &rest[name.len()..];
                let unit = if after.starts_with("[Gb/sec]") {
                    Some(BwUnit::Gb)
                } else if after.starts_with("[MB/sec]") || after.starts_with("[MiB/sec]") {
                    Some(BwUnit::MiB)
                } else {
                    None
                };
                cols.push((*name, unit));
                i += name.len();
            } else {
                i += 1;
            }
        }
        if cols.len() < 3 {
            return None;
        }
        Some(Table {
            cols,
            cycles: s.contains("[cycles]"),
        })
    }

    fn kind(&self) -> TableKind {
        let has = |n: &str| self.cols.iter().any(|(c, _)| *c == n);
        if has("BW average") {
            TableKind::Bw
        } else if has("t_min") || has("t_typical") {
            TableKind::Lat
        } else if has("tps average") || has("t_avg") {
            TableKind::LatDuration
        } else {
            TableKind::Unknown
        }
    }

    fn get<'a>(&self, toks: &[&'a str], name: &str) -> Option<(&'a str, Option<BwUnit>)> {
        let idx = self.cols.iter().position(|(c, _)| *c == name)?;
        Some((toks.get(idx)?, self.cols[idx].1))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TableKind {
    Bw,
    Lat,
    LatDuration,
    Unknown,
}

fn is_dash_line(s: &str) -> bool {
    let t = s.trim();
    t.len() >= 20 && t.bytes().all(|b| b == b'-')
}

fn is_numeric_row(s: &str) -> bool {
    let mut any = false;
    for tok in s.split_whitespace() {
        any = true;
        if !tok.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
            return false;
        }
    }
    any
}

fn bw_bps(tok: &str, unit: Option<BwUnit>) -> Option<u64> {
    match unit.unwrap_or(BwUnit::MiB) {
        BwUnit::MiB => scaled_decimal(tok, 8 * 1_048_576, 1),
        BwUnit::Gb => scaled_decimal(tok, 1_000_000_000, 1),
    }
}

fn usec_ns(tok: &str) -> Option<u64> {
    scaled_decimal(tok, 1000, 1)
}

/// Parse a perftest output file (its `--out_json` report is
/// [`super::perftest_json`]'s; [`super::parse`] takes either). Errors only when the text holds no test
/// title and no result table, or when a table row has more numbers than the
/// table has columns (naming that line).
pub fn parse(input: &str) -> Result<PerftestReport, ParseError> {
    let all = lines(input);
    let mut report = PerftestReport::default();
    let mut cur: Option<PerftestRun> = None;
    let mut table: Option<(Table, usize)> = None;
    let mut server_banner = false;
    let mut pending_error_at: Option<String> = None;
    let mut last_addr_remote: Option<bool> = None;
    // Inside the dump of an end-of-run counter block.
    let mut in_counters = false;

    fn finish(report: &mut PerftestReport, run: Option<PerftestRun>) {
        if let Some(mut run) = run {
            if run.side == Side::Unknown && run.tx_depth.is_some() {
                run.side = Side::Client;
            }
            report.runs.push(run);
        }
    }

    for Line { number, text: s } in all.iter().copied() {
        let t = s.trim();
        if t.is_empty() {
            continue;
        }
        // Noise first: warnings and CPU frequency messages anywhere.
        if t.contains("WARNING") || t.starts_with("Conflicting CPU frequency") {
            if t.contains("BW peak won't be measured") {
                if let Some(run) = cur.as_mut() {
                    run.peak_measured = false;
                    run.duration_mode = true;
                }
            }
            report.warnings.push((number, t.to_string()));
            continue;
        }
        if t.contains("Waiting for client to connect") {
            finish(&mut report, cur.take());
            table = None;
            server_banner = true;
            continue;
        }
        if let Some(rest) = t.strip_prefix("Completion with error at") {
            pending_error_at = Some(rest.trim().to_string());
            continue;
        }
        if t.starts_with("Failed status") {
            report
                .errors
                .push(parse_failed_status(number, t, pending_error_at.take()));
            continue;
        }
        // Inside a table?
        if let Some((tab, _)) = table.as_ref() {
            if is_dash_line(t) {
                table = None;
                continue;
            }
            if is_numeric_row(t) {
                let toks: Vec<&str> = t.split_whitespace().collect();
                if toks.len() > tab.cols.len() {
                    return Err(ParseError::new(
                        number,
                        format!("a table row with at most {} numbers", tab.cols.len()),
                        t,
                    ));
                }
                let run = cur.get_or_insert_with(|| PerftestRun {
                    line: number,
                    peak_measured: true,
                    ..PerftestRun::default()
                });
                if toks.len() < tab.cols.len() {
                    // Row cut mid-way by the excerpt.
                    run.truncated = true;
                    continue;
                }
                if tab.cycles {
                    continue;
                }
                match add_row(run, tab, &toks, number) {
                    Some(()) => {}
                    None => run.truncated = true,
                }
                continue;
            }
            // Any other line inside a table is interleaved noise, unless it
            // starts a new run.
            if !is_title(t) && Table::parse_header(s).is_none() {
                continue;
            }
            table = None;
        }
        if is_title(t) {
            finish(&mut report, cur.take());
            let kind = if t.contains("Latency Test") {
                TestKind::Latency
            } else {
                TestKind::Bandwidth
            };
            let head = t
                .split(" BW Test")
                .next()
                .unwrap_or(t)
                .split(" Latency Test")
                .next()
                .unwrap_or(t);
            let verb = head.split_whitespace().next().map(str::to_string);
            cur = Some(PerftestRun {
                line: number,
                title: Some(t.to_string()),
                verb,
                kind,
                bidirectional: t.contains("Bidirectional"),
                side: if server_banner {
                    Side::Server
                } else {
                    Side::Unknown
                },
                peak_measured: true,
                ..PerftestRun::default()
            });
            server_banner = false;
            last_addr_remote = None;
            in_counters = false;
            continue;
        }
        if let Some(tab) = Table::parse_header(s) {
            let run = cur.get_or_insert_with(|| PerftestRun {
                line: number,
                peak_measured: true,
                ..PerftestRun::default()
            });
            if tab.kind() == TableKind::LatDuration {
                run.duration_mode = true;
            }
            if tab.cycles {
                run.latency_in_cycles = true;
            }
            if run.kind == TestKind::Unknown {
                run.kind = match tab.kind() {
                    TableKind::Bw => TestKind::Bandwidth,
                    TableKind::Lat | TableKind::LatDuration => TestKind::Latency,
                    TableKind::Unknown => TestKind::Unknown,
                };
            }
            table = Some((tab, number));
            continue;
        }
        let Some(run) = cur.as_mut() else {
            continue;
        };
        if let Some(rest) = t.strip_prefix(COUNTERS_TITLE) {
            in_counters = false;
            if let Some(block) = counter_title(number, rest) {
                run.counters = Some(block);
            }
            continue;
        }
        if t == "NIC statistics:" {
            run.counters.get_or_insert_with(|| CounterBlock {
                line: number,
                ..CounterBlock::default()
            });
            in_counters = true;
            continue;
        }
        if in_counters {
            if let (Some((name, v)), Some(block)) = (text::counter_pair(t), run.counters.as_mut()) {
                block.counters.insert(name.to_string(), v);
                continue;
            }
            in_counters = false;
        }
        if let Some(rest) = t
            .strip_prefix("local address:")
            .map(|r| (false, r))
            .or_else(|| t.strip_prefix("remote address:").map(|r| (true, r)))
        {
            let (remote, body) = rest;
            let addr = parse_address(body);
            if remote {
                run.remote.push(addr);
            } else {
                run.local.push(addr);
            }
            last_addr_remote = Some(remote);
            continue;
        }
        if let Some(body) = t.strip_prefix("GID:").or_else(|| t.strip_prefix("MGID:")) {
            let gid = parse_gid(body);
            let target = match last_addr_remote {
                Some(true) => run.remote.last_mut(),
                Some(false) => run.local.last_mut(),
                None => None,
            };
            if let (Some(a), Some(g)) = (target, gid) {
                a.gid_ipv4 = ipv4_of(&g);
                a.gid = Some(g);
            }
            continue;
        }
        if is_dash_line(t) || t.starts_with('*') {
            continue;
        }
        for (k, v) in header_pairs(s) {
            apply_field(run, &k, &v);
            run.fields.push((k, v));
        }
    }
    if let Some((_, _)) = table {
        if let Some(run) = cur.as_mut() {
            run.truncated = true;
        }
    }
    finish(&mut report, cur);
    if report.runs.is_empty() && report.errors.is_empty() {
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "a perftest title (`... BW Test` / `... Latency Test`) or a `#bytes` table header",
            first.map_or("", |l| l.text),
        ));
    }
    Ok(report)
}

/// The counter block's title after [`COUNTERS_TITLE`]: `device DEV, S s`.
/// `None` for the form that says the counters were unavailable.
fn counter_title(line: usize, rest: &str) -> Option<CounterBlock> {
    let rest = rest.trim().strip_prefix("device ")?;
    let (device, secs) = rest.rsplit_once(", ")?;
    let duration_ns = scaled_decimal(secs.strip_suffix(" s")?, 1_000_000_000, 1)?;
    Some(CounterBlock {
        line,
        device: Some(device.trim().to_string()),
        duration_ns: Some(duration_ns),
        counters: std::collections::BTreeMap::new(),
    })
}

fn is_title(t: &str) -> bool {
    (t.ends_with("BW Test") || t.ends_with("Latency Test")) && !t.contains(':')
}

fn add_row(run: &mut PerftestRun, tab: &Table, toks: &[&str], line: usize) -> Option<()> {
    let bytes = tab.get(toks, "#bytes")?.0.parse().ok()?;
    let iterations = tab.get(toks, "#iterations")?.0.parse().ok()?;
    match tab.kind() {
        TableKind::Bw => {
            let (peak, pu) = tab.get(toks, "BW peak")?;
            let (avg, au) = tab.get(toks, "BW average")?;
            let msg_rate = tab
                .get(toks, "MsgRate")
                .and_then(|(v, _)| scaled_decimal(v, 1_000_000, 1));
            run.bw.push(BwRow {
                line,
                sl: tab.get(toks, "#sl").and_then(|(v, _)| v.parse().ok()),
                bytes,
                iterations,
                peak_bps: bw_bps(peak, pu)?,
                avg_bps: bw_bps(avg, au)?,
                msg_rate_per_s: msg_rate,
            });
        }
        TableKind::Lat => {
            let f = |n: &str| tab.get(toks, n).and_then(|(v, _)| usec_ns(v));
            run.lat.push(LatRow {
                line,
                bytes,
                iterations,
                min_ns: f("t_min")?,
                max_ns: f("t_max")?,
                typical_ns: f("t_typical")?,
                avg_ns: f("t_avg")?,
                stdev_ns: f("t_stdev"),
                p99_ns: f("99% percentile"),
                p999_ns: f("99.9% percentile"),
            });
        }
        TableKind::LatDuration => {
            run.lat_duration.push(LatDurationRow {
                line,
                bytes,
                iterations,
                avg_ns: usec_ns(tab.get(toks, "t_avg")?.0)?,
                tps: scaled_decimal(tab.get(toks, "tps average")?.0, 1, 1)?,
            });
        }
        TableKind::Unknown => return None,
    }
    Some(())
}

/// Split a header line into `(key, value)` pairs (two columns per line,
/// separated by TABs or runs of spaces).
fn header_pairs(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut pending: Option<String> = None;
    for c in chunks(s) {
        if let Some(v) = c.strip_prefix(':') {
            if let Some(k) = pending.take() {
                out.push((k, v.trim().to_string()));
            }
        } else if let Some((k, v)) = c.split_once(':') {
            let k = match pending.take() {
                Some(p) => format!("{p} {}", k.trim()),
                None => k.trim().to_string(),
            };
            out.push((k, v.trim().to_string()));
        } else {
            pending = Some(match pending.take() {
                Some(p) => format!("{p} {c}"),
                None => c.to_string(),
            });
        }
    }
    out
}

fn leading_uint(v: &str) -> Option<u32> {
    let digits: String = v.trim().chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

fn apply_field(run: &mut PerftestRun, k: &str, v: &str) {
    match k.to_ascii_lowercase().as_str() {
        "device" => run.device = Some(v.to_string()),
        "number of qps" => run.qps = leading_uint(v),
        "connection type" => run.connection = Some(v.to_string()),
        "tx depth" => run.tx_depth = leading_uint(v),
        "mtu" => run.mtu_bytes = leading_uint(v),
        "link type" => run.link_type = Some(v.to_string()),
        "gid index" => run.gid_index = leading_uint(v),
        _ => {}
    }
}

fn parse_address(body: &str) -> Address {
    let toks: Vec<&str> = body.split_whitespace().collect();
    let mut a = Address::default();
    let mut i = 0;
    while i + 1 < toks.len() {
        let v = toks[i + 1];
        let used = match toks[i] {
            "LID" => {
                a.lid = hex(v).and_then(|x| u32::try_from(x).ok());
                true
            }
            "QPN" => {
                a.qpn = hex(v).and_then(|x| u32::try_from(x).ok());
                true
            }
            "PSN" => {
                a.psn = hex(v).and_then(|x| u32::try_from(x).ok());
                true
            }
            "RKey" => {
                a.rkey = hex(v).and_then(|x| u32::try_from(x).ok());
                true
            }
            "VAddr" => {
                a.vaddr = hex(v);
                true
            }
            "OUT" => {
                a.out_reads = hex(v).and_then(|x| u32::try_from(x).ok());
                true
            }
            _ => false,
        };
        i += if used { 2 } else { 1 };
    }
    a
}

fn parse_gid(body: &str) -> Option<Vec<u8>> {
    let bytes: Option<Vec<u8>> = body
        .trim()
        .split(':')
        .map(|p| p.trim().parse::<u8>().ok())
        .collect();
    bytes.filter(|b| b.len() == 16)
}

fn ipv4_of(gid: &[u8]) -> Option<String> {
    if gid.len() == 16 && gid[..10].iter().all(|&b| b == 0) && gid[10] == 255 && gid[11] == 255 {
        Some(format!("{}.{}.{}.{}", gid[12], gid[13], gid[14], gid[15]))
    } else {
        None
    }
}

fn parse_failed_status(line: usize, t: &str, at: Option<String>) -> CompletionError {
    let rest = t
        .trim_start_matches("Failed status")
        .trim_start_matches(['-', ' ']);
    let mut e = CompletionError {
        line,
        at,
        ..CompletionError::default()
    };
    // New form: "<text> (<n>): wr_id ..."; old form: "<n>: wr_id ...".
    let head = rest.split(':').next().unwrap_or("");
    if let (Some(open), Some(close)) = (head.rfind('('), head.rfind(')')) {
        if open < close {
            e.status = head[open + 1..close].trim().parse().ok();
            let txt = head[..open].trim();
            if !txt.is_empty() {
                e.status_text = Some(txt.to_string());
            }
        }
    } else {
        e.status = head.trim().parse().ok();
    }
    if let Some(pos) = t.find("syndrom") {
        let after = t[pos..]
            .trim_start_matches("syndrome")
            .trim_start_matches("syndrom");
        e.vendor_err = after
            .split_whitespace()
            .next()
            .and_then(text::hex)
            .and_then(|x| u32::try_from(x).ok());
    }
    e
}

impl PerftestRun {
    /// The largest-size bandwidth row (the headline number of a run).
    pub fn headline_bw(&self) -> Option<&BwRow> {
        self.bw.iter().max_by_key(|r| (r.bytes, r.line))
    }

    /// The largest-size latency row.
    pub fn headline_lat(&self) -> Option<&LatRow> {
        self.lat.iter().max_by_key(|r| (r.bytes, r.line))
    }
}
