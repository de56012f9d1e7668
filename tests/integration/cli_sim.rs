//! `rocelab validate` and `rocelab run` on scenario files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub(crate) fn rocelab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("run rocelab")
}

pub(crate) fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The stdout of a run that must have succeeded (its stderr in the
/// failure).
pub(crate) fn ok(o: &Output) -> String {
    let stdout = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    stdout
}

/// `rocelab run SCENARIO --out OUT`, which must succeed; its stdout.
fn run_ok(scenario: &Path, out: &Path) -> String {
    ok(&rocelab(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]))
}

/// The dump `name` of a counter bundle (`counters/<variant>/nics.txt`).
fn section(bundle: &Path, name: &str) -> String {
    let text = std::fs::read_to_string(bundle).unwrap();
    sim::stats::bundle_sections(&text)
        .unwrap_or_else(|| panic!("{}: not a bundle", bundle.display()))
        .into_iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name} not in {}", bundle.display()))
        .1
}

/// `rocelab run SCENARIO --out OUT --quiet EXTRA...`, then `rocelab doctor
/// --json OUT`: the doctor's JSON. Both must succeed (`label` names the
/// case in a failure).
fn run_then_doctor(label: &str, scenario: &Path, out: &Path, extra: &[&str]) -> serde_json::Value {
    let mut args = vec![
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend(extra);
    let o = rocelab(&args);
    assert!(
        o.status.success(),
        "{label}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = rocelab(&["doctor", "--json", out.to_str().unwrap()]);
    assert!(
        o.status.success(),
        "{label}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).expect("doctor JSON")
}

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            toml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

#[test]
fn validate_accepts_every_scenario_and_topology_file() {
    let mut files = Vec::new();
    toml_files(&repo().join("scenarios"), &mut files);
    toml_files(&repo().join("topologies"), &mut files);
    assert!(files.len() >= 15);
    for f in files {
        let out = rocelab(&["validate", f.to_str().unwrap()]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {}",
            f.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.trim_end().ends_with("ok"), "{stdout}");
    }
}

#[test]
fn validate_rejects_a_bad_file_naming_file_key_and_expectation() {
    let dir = scratch("validate");
    let f = dir.join("bad.toml");
    std::fs::write(
        &f,
        "topology = { generator = { kind = \"fat-tree\", k = 4 } }\n[nic]\nretransmit = \"sometimes\"\n[[workload]]\nkind = \"incast\"\nreceiver = 0\nsize = \"1MB\"\n",
    )
    .unwrap();
    let out = rocelab(&["validate", f.to_str().unwrap()]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.toml:3:"), "{stderr}");
    assert!(stderr.contains("nic.retransmit"), "{stderr}");
    assert!(
        stderr.contains("expected") && stderr.contains("`go-back-n`"),
        "{stderr}"
    );
}

#[test]
fn run_writes_results_json_with_summaries_and_counter_dumps() {
    let dir = scratch("run");
    let scenario = dir.join("tiny.toml");
    std::fs::write(
        &scenario,
        r#"
name = "tiny"
seed = 3
duration = "50ms"
[topology]
hosts = ["h0", "h1", "h2", "h3"]
switches = ["sw0"]
link = [{ a = "h0", b = "sw0" }, { a = "h1", b = "sw0" }, { a = "h2", b = "sw0" }, { a = "h3", b = "sw0" }]
[[workload]]
kind = "incast"
receiver = "h0"
size = "100KB"
[[variant]]
name = "lossless"
[[variant]]
name = "lossy"
fabric.pfc.enabled = false
"#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    let stdout = run_ok(&scenario, &out_dir);
    assert!(stdout.contains("== variant lossless =="), "{stdout}");
    assert!(
        stdout.contains("events/s") && stdout.contains("peak memory"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(out_dir.join("results.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["scenario"], "tiny");
    assert_eq!(json["seed"], 3);
    // The file names its format first.
    assert!(
        text.starts_with("{\n  \"schema\": \"rocelab-results\",\n  \"version\": 2,\n"),
        "{}",
        &text[..80]
    );
    let variants = json["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
    // Per-port counters only on request (they are in the dumps anyway).
    assert_eq!(variants[0]["ports"].as_array().map(Vec::len), Some(0));
    let with_ports = dir.join("with-ports");
    let o = rocelab(&[
        "run",
        scenario.to_str().unwrap(),
        "--set",
        "record.ports=true",
        "--quiet",
        "--out",
        with_ports.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let full: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(with_ports.join("results.json")).unwrap())
            .unwrap();
    let ports = full["variants"][0]["ports"].as_array().unwrap();
    assert_eq!(ports.len(), 8, "4 NIC ports and 4 switch ports");
    assert!(stdout.contains("% of "), "output time is printed: {stdout}");
    for (v, name) in variants.iter().zip(["lossless", "lossy"]) {
        let s = &v["summary"];
        assert_eq!(s["variant"], name);
        for field in [
            "sim_time_ps",
            "events",
            "flows_completed",
            "flows_total",
            "goodput_bps",
            "drops",
            "pause_frames_sent",
            "pause_time_ps",
            "ecn_marked",
            "cnps_sent",
            "retransmitted_packets",
            "fct_p50_ps",
            "fct_p99_ps",
            "max_fct_ps",
        ] {
            assert!(
                s.get(field).is_some_and(|x| x.is_number()),
                "{name}: {field} in {s}"
            );
        }
        assert_eq!(s["flows_total"], 3);
        assert_eq!(s["flows_completed"], 3);
        assert!(v["flows"].is_array());
    }
    // Wall-clock figures stay out of the file.
    assert!(
        !text.contains("events_per_sec") && !text.contains("peak"),
        "{text}"
    );
    // Counter dumps per variant, named as the real tools name them.
    // Each opens with the end of the run (the duration, 50 ms) in ps.
    // All NICs' dumps are in one bundle, each under its file name.
    let nic = section(
        &out_dir.join("counters/lossless/nics.txt"),
        "h1.ethtool.txt",
    );
    assert!(
        nic.starts_with("# time_ps: 50000000000\nNIC statistics:\n"),
        "{nic}"
    );
    let rdma = section(&out_dir.join("counters/lossless/nics.txt"), "h1.rdma.txt");
    let sw = section(
        &out_dir.join("counters/lossless/switches.txt"),
        "sw0-p0.ethtool.txt",
    );
    assert!(
        sw.starts_with("# time_ps: 50000000000\nNIC statistics:\n"),
        "{sw}"
    );
    let files: Vec<String> = std::fs::read_dir(out_dir.join("counters/lossless"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(files.len(), 2, "one file per kind: {files:?}");
    assert!(
        rdma.starts_with("# time_ps: 50000000000\nlink mlx5_0/1 "),
        "{rdma}"
    );
    // Same file, same seed: the same bytes.
    let again = dir.join("again");
    run_ok(&scenario, &again);
    assert_eq!(
        std::fs::read_to_string(again.join("results.json")).unwrap(),
        text
    );
    // The report is written beside the results, the same bytes each time.
    let report = std::fs::read_to_string(out_dir.join("report.html")).unwrap();
    assert!(report.starts_with("<!DOCTYPE html>"), "{report}");
    assert!(report.contains("<th>lossless</th><th>lossy</th>"));
    assert_eq!(
        std::fs::read_to_string(again.join("report.html")).unwrap(),
        report
    );
}

#[test]
fn run_reports_ring_allreduce_step_time_and_doctor_reads_one_dump_over_the_run() {
    let dir = scratch("ring");
    let scenario = dir.join("ring.toml");
    std::fs::write(
        &scenario,
        r#"
name = "ring"
[topology]
hosts = ["h0", "h1", "h2", "h3"]
switches = ["sw0"]
link = [{ a = "h0", b = "sw0" }, { a = "h1", b = "sw0" }, { a = "h2", b = "sw0" }, { a = "h3", b = "sw0" }]
[[workload]]
kind = "ring-allreduce"
name = "grads"
size = "400KB"
"#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    let stdout = run_ok(&scenario, &out_dir);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let v = &json["variants"][0];
    let g = &v["groups"][0];
    assert_eq!(g["name"], "grads");
    assert_eq!(g["kind"], "ring-allreduce");
    assert_eq!(g["flows"], 24, "2(N-1) steps of N flows");
    assert_eq!(g["flows_completed"], 24);
    // 2 x 3/4 x 400 kB x 8 at 100 Gbit/s.
    assert_eq!(g["ideal_ps"], 48_000_000);
    // Six steps of a 100 kB chunk (25 frames, 62 B of headers each, 16 B
    // RETH) at 80 ps per byte, plus the last frame's second hop, the ACK's
    // two hops back and four 1 us link delays: latency dominates small
    // chunks.
    let per_step = (100_000 + 25 * 62 + 16) * 80 + (4096 + 62) * 80 + 2 * 66 * 80 + 4_000_000;
    let step = g["step_time_ps"].as_u64().unwrap();
    let expected = 6 * per_step;
    assert!(
        step > 48_000_000 && step.abs_diff(expected) < expected / 50,
        "step {step}, expected {expected}"
    );
    let line = format!("step time grads: {}", roce::time::Duration::from_ps(step));
    assert!(stdout.contains(&line), "{line:?} in {stdout}");
    // Steps run one after the other: a later step is posted after time 0.
    let flows = v["flows"].as_array().unwrap();
    let late = flows
        .iter()
        .filter(|f| f["posted_ps"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(late, 20, "every flow but the first step's four waits");

    // The NICs' bundle alone: each dump counts over the simulated run,
    // not since boot.
    let end = v["summary"]["sim_time_ps"].as_u64().unwrap();
    let dump = out_dir.join("counters/default/nics.txt");
    let out = rocelab(&["doctor", dump.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // The parser keeps nanoseconds.
    let interval = roce::time::Duration::from_ps(end / 1000 * 1000);
    assert!(
        text.contains(&format!(
            "counters (ethtool counts over {interval} of simulated time from zero): default/h0, default/h1,"
        )),
        "{text}"
    );
    assert!(!text.contains("since boot"), "{text}");
}

/// An ideal ring all-reduce (one switch, nothing else on the links) at a
/// large size: nccl-tests' bus bandwidth, as the run prints it and writes
/// it under nccl-tests/, reaches the NIC's payload rate (100 Gbit/s less
/// RoCE's framing of 4 KiB packets) within 2 %, and `rocelab parse` reads
/// the file as nccl-tests output.
#[test]
fn an_ideal_ring_allreduce_reaches_the_nics_payload_rate_in_nccl_tests_terms() {
    let dir = scratch("ring-busbw");
    let scenario = dir.join("ring.toml");
    std::fs::write(
        &scenario,
        r#"
name = "ring-busbw"
[topology]
hosts = ["h0", "h1", "h2", "h3"]
switches = ["sw0"]
link = [{ a = "h0", b = "sw0" }, { a = "h1", b = "sw0" }, { a = "h2", b = "sw0" }, { a = "h3", b = "sw0" }]
[nic]
mtu = 4096
[[workload]]
kind = "ring-allreduce"
name = "grads"
size = "64MB"
"#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    let stdout = run_ok(&scenario, &out_dir);
    let file = out_dir.join("nccl-tests/default/grads.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        stdout.contains("nccl-tests grads (all_reduce_perf):"),
        "{stdout}"
    );
    for l in text.lines() {
        assert!(stdout.contains(l), "{l:?} printed");
    }
    // The row: size, count, type, redop, root, blank out-of-place
    // columns, then time, algbw, busbw and N/A.
    let row = text.lines().find(|l| !l.starts_with('#')).unwrap();
    let f: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(
        &f[..5],
        ["64000000", "16000000", "float", "sum", "-1"],
        "{row}"
    );
    assert_eq!(f[8], "N/A");
    let (algbw, busbw): (f64, f64) = (f[6].parse().unwrap(), f[7].parse().unwrap());
    assert!(
        (busbw / algbw - 1.5).abs() < 0.01,
        "2(n-1)/n at 4 ranks: {row}"
    );
    // Each step sends a 16 MB chunk as WRITEs of 4 KiB packets.
    let payload_gbs = payload_gbs(100e9, 16_000_000);
    assert!(
        (busbw - payload_gbs).abs() / payload_gbs < 0.02,
        "busbw {busbw} GB/s against the payload rate {payload_gbs:.3} GB/s"
    );
    let parsed = rocelab(&["parse", "--json", "auto", file.to_str().unwrap()]);
    let json: serde_json::Value = serde_json::from_str(&ok(&parsed)).unwrap();
    let s = json.to_string();
    assert!(s.contains("\"bytes\":64000000"), "{s}");
    assert!(
        s.contains(&format!(
            "\"ip_busbw_mbps\":{}",
            (busbw * 1000.0).round() as u64
        )),
        "{s}"
    );
}

/// Four hosts on one switch, 4 KiB path MTU, and `workload` (a TOML
/// table body) as an `nccl-tests` workload named `sweep`.
fn nccl_tests_scenario(dir: &Path, workload: &str) -> PathBuf {
    let f = dir.join("sweep.toml");
    std::fs::write(
        &f,
        format!(
            r#"name = "sweep"
[topology]
hosts = ["h0", "h1", "h2", "h3"]
switches = ["sw0"]
link = [{{ a = "h0", b = "sw0" }}, {{ a = "h1", b = "sw0" }}, {{ a = "h2", b = "sw0" }}, {{ a = "h3", b = "sw0" }}]
[nic]
mtu = 4096
[[workload]]
kind = "nccl-tests"
name = "sweep"
{workload}
"#
        ),
    )
    .unwrap();
    f
}

/// The rows of an nccl-tests file: (size, count, redop, time, algbw,
/// busbw), read with the programs' layout (blank out-of-place columns).
fn nccl_rows(text: &str) -> Vec<(u64, u64, String, f64, f64, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 9, "{l:?}");
            assert_eq!((f[2], f[8]), ("float", "N/A"), "{l:?}");
            assert!(f[4] == "-1" || f[4] == "0", "root: {l:?}");
            (
                f[0].parse().unwrap(),
                f[1].parse().unwrap(),
                f[3].to_string(),
                f[5].parse().unwrap(),
                f[6].parse().unwrap(),
                f[7].parse().unwrap(),
            )
        })
        .collect()
}

/// An nccl-tests sweep in the simulator: one line per size with
/// nccl-tests' sizes, counts and root, busbw = algbw x the program's
/// factor, bus bandwidth rising with size to the NIC's payload rate
/// (for the pipelined chains of broadcast and reduce, to the closed form
/// of a chain of 512 KiB chunks: the buffer plus two chunks' pipeline
/// fill at that rate): at 16 MB on four ranks within 3 % for the
/// point-to-point collectives, within 15 % below it for those NCCL
/// tunes (they pay its protocol's step latency), for every collective;
/// the file parses as nccl-tests output.
#[test]
fn an_nccl_tests_sweep_prints_the_programs_table_and_reaches_the_payload_rate() {
    for (coll, factor, redop, sizes) in [
        (
            "all_reduce",
            1.5,
            "sum",
            vec![64_000u64, 1_024_000, 16_384_000],
        ),
        (
            "all_gather",
            0.75,
            "none",
            vec![64_000, 1_024_000, 16_384_000],
        ),
        (
            "reduce_scatter",
            0.75,
            "sum",
            vec![64_000, 1_024_000, 16_384_000],
        ),
        (
            "alltoall",
            0.75,
            "none",
            vec![64_000, 1_024_000, 16_384_000],
        ),
        ("sendrecv", 1.0, "none", vec![64_000, 1_024_000, 16_384_000]),
        (
            "broadcast",
            1.0,
            "none",
            vec![64_000, 1_024_000, 16_384_000],
        ),
        ("reduce", 1.0, "sum", vec![64_000, 1_024_000, 16_384_000]),
        ("gather", 0.75, "none", vec![64_000, 1_024_000, 16_384_000]),
        ("scatter", 0.75, "none", vec![64_000, 1_024_000, 16_384_000]),
    ] {
        let dir = scratch(&format!("nccl-{coll}"));
        let f = nccl_tests_scenario(
            &dir,
            &format!(
                "collective = \"{coll}\"\nmin_bytes = \"64KB\"\nmax_bytes = \"16384KB\"\nstep_factor = 16"
            ),
        );
        let out_dir = dir.join("out");
        let stdout = run_ok(&f, &out_dir);
        let program = format!("{coll}_perf");
        assert!(
            stdout.contains(&format!("nccl-tests sweep ({program}):")),
            "{stdout}"
        );
        let file = out_dir.join("nccl-tests/default/sweep.txt");
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.ends_with(&format!("# Collective test concluded: {program}\n")));
        let rows = nccl_rows(&text);
        assert_eq!(rows.len(), 3, "{text}");
        let mut last_busbw = 0.0;
        for (k, (size, count, op, _, algbw, busbw)) in rows.iter().enumerate() {
            // Sizes as the programs round them: shares of 16 bytes.
            assert_eq!(*size, sizes[k], "{coll}: {text}");
            let per_rank = if matches!(
                coll,
                "all_gather" | "reduce_scatter" | "alltoall" | "gather" | "scatter"
            ) {
                size / 4
            } else {
                *size
            };
            assert_eq!(*count, per_rank / 4, "{coll}: {text}");
            assert_eq!(op, redop);
            assert!((busbw / algbw - factor).abs() < 0.02, "{coll}: {text}");
            assert!(*busbw > last_busbw, "{coll}: busbw rises with size: {text}");
            last_busbw = *busbw;
        }
        // The largest size: what each rank sends per step, against the
        // NIC's payload rate at that message size.
        let (step_bytes, fill) = match coll {
            "sendrecv" => (16_384_000, 1.0),
            // Four ranks: three hops, two chunks of fill.
            "broadcast" | "reduce" => (
                512 * 1024,
                16_384_000.0 / (16_384_000.0 + 2.0 * 512.0 * 1024.0),
            ),
            _ => (16_384_000 / 4, 1.0),
        };
        let want = payload_gbs(100e9, step_bytes) * fill;
        // The collectives NCCL tunes pay its protocol's latency on every
        // step of their chain (Simple's 14 us between nodes here) on top
        // of the wire time: at 16 MB on 4 ranks about a tenth. The
        // point-to-point ones pay none and reach the rate within 3 %.
        let tuned = matches!(
            coll,
            "all_reduce" | "all_gather" | "reduce_scatter" | "broadcast" | "reduce"
        );
        let (lo, hi) = if tuned { (0.85, 1.0) } else { (0.97, 1.03) };
        assert!(
            last_busbw >= want * lo && last_busbw <= want * hi,
            "{coll}: busbw {last_busbw} GB/s against the payload rate {want:.3}: {text}"
        );
        let parsed = rocelab(&["parse", "--json", "auto", file.to_str().unwrap()]);
        let json: serde_json::Value = serde_json::from_str(&ok(&parsed)).unwrap();
        assert_eq!(json["kind"], "nccl_tests", "{json}");
        assert_eq!(json["data"]["rows"].as_array().unwrap().len(), 3, "{json}");
    }
}

/// Congestion acts on collectives. One rank behind a slow receiver (50
/// Gbit/s behind a 100 Gbit/s link) holds the whole ring to its rate:
/// every step waits for the chunk into the slow host, so the ring takes
/// the healthy ring's time plus the extra wire time of every chunk at
/// 50 Gbit/s instead of 100 (closed form, within 2 %; the protocol's
/// step latency is the same in both). And a 64-rank
/// all-to-all on a k=8 fat tree whose switches pause at 100 KB sends
/// PAUSE and gets less bus bandwidth than the same fabric with buffer
/// enough never to pause; its results name the ports PAUSE held off,
/// and by whom, and the fabric link ECMP overloaded as the limit.
#[test]
fn a_slow_rank_holds_the_ring_to_its_rate_and_pause_costs_an_all_to_all() {
    let busbw = |text: &str| nccl_rows(text)[0].5;
    let dir = scratch("nccl-slow");
    let f = nccl_tests_scenario(
        &dir,
        &format!(
            r#"collective = "all_reduce"
min_bytes = "16MiB"
{SLOW_H2}"#
        ),
    );
    let out_dir = dir.join("out");
    run_ok(&f, &out_dir);
    let read = |v: &str| {
        std::fs::read_to_string(out_dir.join(format!("nccl-tests/{v}/sweep.txt"))).unwrap()
    };
    let (healthy, slow) = (busbw(&read("healthy")), busbw(&read("slow")));
    let chunk = (16u64 << 20) / 4;
    let (fast_rate, slow_rate) = (payload_gbs(100e9, chunk), payload_gbs(50e9, chunk));
    // The healthy ring: the wire at 100 Gbit/s plus NCCL's step latency
    // (Simple's 14 us a step here), a little under the payload rate.
    assert!(
        healthy > 0.85 * fast_rate && healthy < fast_rate,
        "healthy busbw {healthy} GB/s against {fast_rate:.3}"
    );
    // The slow rank adds exactly its wire time: busbw is 2(n-1)/n x S
    // over the time, so 1/busbw grows by 1/slow_rate - 1/fast_rate.
    let want = 1.0 / (1.0 / healthy + 1.0 / slow_rate - 1.0 / fast_rate);
    assert!(
        (slow - want).abs() / want < 0.02,
        "slow busbw {slow} GB/s against {want:.3} GB/s (healthy {healthy})"
    );

    let dir = scratch("nccl-a2a");
    let f = dir.join("a2a.toml");
    std::fs::write(
        &f,
        format!(
            r#"name = "a2a"
topology = "{}"
[nic]
mtu = 4096
[fabric.pfc]
enabled = true
priorities = [3]
threshold = {{ mode = "static", xoff = "100KB", xon = "50KB" }}
[[workload]]
kind = "nccl-tests"
name = "a2a"
collective = "alltoall"
hosts = 64
min_bytes = "4MiB"
priority = 3
[[variant]]
name = "pfc"
[[variant]]
name = "deep"
fabric.buffer.size = "1GB"
fabric.pfc.threshold = {{ mode = "static", xoff = "500MB", xon = "400MB" }}
"#,
            repo().join("topologies/fat-tree-k8.toml").display()
        ),
    )
    .unwrap();
    let out_dir = dir.join("out");
    run_ok(&f, &out_dir);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("results.json")).unwrap())
            .unwrap();
    let pauses = |i: usize| {
        json["variants"][i]["summary"]["pause_frames_sent"]
            .as_u64()
            .unwrap()
    };
    assert!(
        pauses(0) > 0 && pauses(1) == 0,
        "{} {}",
        pauses(0),
        pauses(1)
    );
    let read =
        |v: &str| std::fs::read_to_string(out_dir.join(format!("nccl-tests/{v}/a2a.txt"))).unwrap();
    let (paused, deep) = (busbw(&read("pfc")), busbw(&read("deep")));
    assert!(
        paused < deep,
        "busbw with PAUSE {paused} against {deep} GB/s"
    );
    // The results say why, and where. ECMP hashed more all-to-all bytes
    // onto one fabric link than any NIC sends: that link, not PAUSE, sets
    // the time in both variants (PAUSE costs the paused one a little
    // more), and the counters agree that it carried the most.
    let group = |i: usize| &json["variants"][i]["groups"][0];
    let held = group(0)["paused"].as_array().cloned().unwrap_or_default();
    assert!(
        !held.is_empty() && held[0].as_str().unwrap().contains(" by "),
        "{}",
        group(0)
    );
    assert!(group(1).get("paused").is_none(), "{}", group(1));
    for i in 0..2 {
        assert_eq!(group(i)["limit"], "congestion", "{}", group(i));
    }
    let at = group(1)["bottleneck"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(group(0)["bottleneck"], at.as_str(), "{}", group(0));
    let (port, peer) = at.split_once(" -> ").unwrap();
    let (node, num) = port.split_once(':').unwrap();
    assert!(!node.starts_with('h') && !peer.starts_with('h'), "{at}");
    let tx = |file: &str| -> Vec<(String, u64)> {
        let text = std::fs::read_to_string(out_dir.join("counters/deep").join(file)).unwrap();
        let mut out = Vec::new();
        let mut name = String::new();
        for l in text.lines() {
            if let Some(n) = l.strip_prefix("==> ") {
                name = n
                    .trim_end_matches(" <==")
                    .trim_end_matches(".ethtool.txt")
                    .into();
            } else if let Some(v) = l.trim().strip_prefix("tx_bytes_phy: ") {
                out.push((name.clone(), v.parse().unwrap()));
            }
        }
        out
    };
    let link = tx("switches.txt")
        .into_iter()
        .find(|(n, _)| *n == format!("{node}-p{num}"))
        .unwrap()
        .1;
    let nic_max = tx("nics.txt").into_iter().map(|x| x.1).max().unwrap();
    assert!(
        link > nic_max,
        "{at}: {link} bytes against a NIC's {nic_max}"
    );
    assert!(group(0)["last_host"].as_str().is_some(), "{}", group(0));
}

/// `rocelab compare TABLE.txt results.json`: an nccl-tests output beside
/// the simulator's workload of the same program in a results file (here
/// the run's own table, so the two agree to the table's rounding), per
/// size busbw and time with the model's limiting factor: on one 8-GPU
/// server, NCCL's latency at 1 MiB and NVLink at 64 MiB (nothing else is
/// in the way); notes name what the model ran. Results without such a
/// workload are refused with what to add.
#[test]
fn compare_puts_a_real_nccl_tests_run_beside_the_model_with_its_limit() {
    let dir = scratch("nccl-real");
    let f = dir.join("gpu.toml");
    std::fs::write(
        &f,
        r#"name = "gpu"
[topology.defaults]
rate = "400Gbps"
[topology.gpu]
gpus = 8
nics = 8
[topology.generator]
kind = "gpu-leaf-spine"
servers = 1
servers_per_leaf = 1
spines = 1
[[workload]]
kind = "nccl-tests"
name = "ar"
collective = "all_reduce"
min_bytes = "1MiB"
max_bytes = "64MiB"
step_factor = 64
"#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    run_ok(&f, &out_dir);
    let real = out_dir.join("nccl-tests/default/ar.txt");
    let results = out_dir.join("results.json");
    let out = rocelab(&[
        "compare",
        "--json",
        real.to_str().unwrap(),
        results.to_str().unwrap(),
    ]);
    let json: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let text = json.to_string();
    let t = &json[0];
    assert!(
        t["title"].as_str().unwrap().contains("all_reduce_perf"),
        "{text}"
    );
    let rows = t["rows"].as_array().unwrap();
    let limit = |size: u64| {
        rows.iter()
            .find(|r| r["size"] == size && r["metric"] == "busbw")
            .and_then(|r| r["limit"].as_str())
            .unwrap_or_else(|| panic!("{text}"))
            .to_string()
    };
    assert_eq!(limit(1 << 20), "latency", "{text}");
    assert_eq!(limit(64 << 20), "nvlink", "{text}");
    // results.json says where: one GPU's NVLink egress.
    let res: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let big = res["variants"][0]["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["size"] == 64u64 << 20)
        .unwrap();
    let at = big["bottleneck"].as_str().unwrap_or_default();
    assert!(
        at.starts_with("server 0 GPU ") && at.ends_with(" NVLink out"),
        "{big}"
    );
    let notes = t["notes"].to_string();
    assert!(notes.contains("the model ran"), "{text}");
    // The table is the run's: the two sides agree.
    for r in rows {
        let ratio = r["ratio_permille"].as_u64().unwrap();
        assert!((990..=1010).contains(&ratio), "{text}");
    }
    // Results without an all-reduce workload do not compare.
    let other = dir.join("a2a.toml");
    std::fs::write(
        &other,
        std::fs::read_to_string(&f)
            .unwrap()
            .replace("all_reduce", "alltoall"),
    )
    .unwrap();
    let out2 = dir.join("out2");
    run_ok(&other, &out2);
    let refused = rocelab(&[
        "compare",
        real.to_str().unwrap(),
        out2.join("results.json").to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&refused.stderr)
            .contains("no nccl-tests workload of all_reduce_perf"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

/// `rocelab compare` puts two nccl-tests tables of one program side by
/// side, size by size (bus bandwidth and time, B/A), saying which result
/// each side printed; two different programs are refused with the
/// reason (exit 2).
#[test]
fn compare_puts_two_nccl_tests_tables_side_by_side_and_refuses_two_programs() {
    let dir = scratch("nccl-compare");
    let f = nccl_tests_scenario(
        &dir,
        &format!(
            r#"collective = "all_reduce"
min_bytes = "1MiB"
max_bytes = "4MiB"
step_factor = 4
[[workload]]
kind = "nccl-tests"
name = "a2a"
collective = "alltoall"
min_bytes = "1MiB"
# After the sweep: the two do not share the fabric.
start = "50ms"
{SLOW_H2}"#
        ),
    );
    let out_dir = dir.join("out");
    run_ok(&f, &out_dir);
    let file = |v: &str, w: &str| {
        out_dir
            .join(format!("nccl-tests/{v}/{w}.txt"))
            .to_string_lossy()
            .into_owned()
    };
    let out = rocelab(&[
        "compare",
        "--json",
        &file("healthy", "sweep"),
        &file("slow", "sweep"),
    ]);
    let json: serde_json::Value = serde_json::from_str(&ok(&out)).unwrap();
    let text = json.to_string();
    let rows = json[0]["rows"]
        .as_array()
        .unwrap_or_else(|| panic!("{text}"));
    let busbw: Vec<&serde_json::Value> = rows.iter().filter(|r| r["metric"] == "busbw").collect();
    assert_eq!(busbw.len(), 2, "{text}");
    assert_eq!(busbw[0]["size"], 1 << 20, "{text}");
    // About half the rate behind the slow rank, at the larger size: the
    // wire time doubles, the protocol's per-step latency (the same in
    // both) does not, so a little over half.
    let ratio = busbw[1]["ratio_permille"].as_u64().unwrap();
    assert!((500..=600).contains(&ratio), "{text}");
    assert!(text.contains("reports in-place results"), "{text}");
    let refused = rocelab(&[
        "compare",
        &file("healthy", "sweep"),
        &file("healthy", "a2a"),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("all_reduce_perf") && stderr.contains("alltoall_perf"),
        "{stderr}"
    );
}

/// GB/s of payload that `rate` (bit/s) of wire carries in 4 KiB-MTU
/// WRITEs of `chunk` bytes (RoCE's framing, as the fabric counts it).
fn payload_gbs(rate: f64, chunk: u64) -> f64 {
    let wire = sim::hostmodel::wire_bytes(sim::workload::FlowOp::Write, chunk, 4096);
    rate / 8.0 * chunk as f64 / wire as f64 / 1e9
}

/// Two variants for a four-host scenario: `healthy`, and `slow` with h2
/// taking received frames at 50 Gbit/s behind its 100 Gbit/s link.
const SLOW_H2: &str = r#"[[variant]]
name = "healthy"
[[variant]]
name = "slow"
[[variant.faults]]
kind = "slow-receiver"
node = "h2"
rate = "50Gbps""#;

/// Bad nccl-tests workloads: each error names the file and line, the key
/// and what was expected.
#[test]
fn a_bad_nccl_tests_workload_is_an_error_naming_the_key() {
    let dir = scratch("nccl-bad");
    for (body, key, expected) in [
        (
            "min_bytes = \"1MB\"",
            "collective",
            "missing: expected one of all_reduce",
        ),
        (
            "collective = \"bcast\"\nmin_bytes = \"1MB\"",
            "collective",
            "unknown variant `bcast`",
        ),
        (
            "collective = \"all_gather\"\nmin_bytes = \"32B\"",
            "min_bytes",
            "expected at least 64 bytes for all_gather on 4 ranks",
        ),
        (
            "collective = \"all_reduce\"\nmin_bytes = \"1MB\"\nmax_bytes = \"1KB\"",
            "max_bytes",
            "expected at least min_bytes",
        ),
        (
            "collective = \"all_reduce\"\nmin_bytes = \"1MB\"\nsize = \"1MB\"",
            "size",
            "",
        ),
        (
            "collective = \"all_reduce\"\nmin_bytes = \"1MB\"\nstep_factor = 1",
            "step_factor",
            "expected at least 2",
        ),
        // The ring-allreduce kind, in the same file: 3 bytes over 4 hosts
        // would leave a chunk with nothing to send.
        (
            "collective = \"all_reduce\"\nmin_bytes = \"1MB\"\n[[workload]]\nkind = \"ring-allreduce\"\nsize = \"3B\"",
            "size",
            "3 bytes: expected at least 4 (one per host",
        ),
    ] {
        let f = nccl_tests_scenario(&dir, body);
        let out = rocelab(&["validate", f.to_str().unwrap()]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{body}: {stderr}");
        assert!(stderr.contains("sweep.toml:"), "{body}: {stderr}");
        assert!(stderr.contains(key), "{body}: {stderr}");
        assert!(stderr.contains(expected), "{body}: {stderr}");
    }
}

#[test]
fn run_takes_set_seed_variant_and_quiet_and_writes_the_captures() {
    let dir = scratch("overrides");
    let scenario = dir.join("small.toml");
    std::fs::write(
        &scenario,
        r#"
name = "small"
seed = 3
[topology]
hosts = ["h0", "h1", "h2"]
switches = ["sw0"]
link = [{ a = "h0", b = "sw0" }, { a = "h1", b = "sw0" }, { a = "h2", b = "sw0" }]
[record]
pcap = [{ from = "sw0", to = "h0" }]
[[workload]]
kind = "incast"
receiver = "h0"
size = "50KB"
[[variant]]
name = "lossless"
[[variant]]
name = "lossy"
fabric.pfc.enabled = false
"#,
    )
    .unwrap();
    let out = dir.join("out");
    let o = rocelab(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
        "--seed",
        "9",
        "--variant",
        "lossless",
        "--set",
        "nic.cc.algorithm=dcqcn",
        "--set",
        "workload[0].size=\"20KB\"",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(o.status.success(), "{stdout}\n{stderr}");
    assert!(
        stdout.is_empty() && stderr.is_empty(),
        "quiet: {stdout}{stderr}"
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(json["seed"], 9);
    let variants = json["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 1, "only the chosen variant runs");
    assert_eq!(variants[0]["summary"]["variant"], "lossless");
    let flows = variants[0]["flows"].as_array().unwrap();
    assert!(flows.iter().all(|f| f["size"] == 20_000), "{flows:?}");
    // The capture of sw0 -> h0: a pcap holding at least the data frames.
    let pcap = std::fs::read(out.join("pcap/lossless/sw0-h0.pcap")).unwrap();
    let frames = roce::wire::PcapReader::new(&pcap).unwrap().count();
    assert!(frames >= 2 * 20_000 / 4096, "{frames} frames");

    // `--set` over a variant's own key wins; validate checks what run runs.
    let o = rocelab(&[
        "validate",
        scenario.to_str().unwrap(),
        "--set",
        "fabric.pfc.enabled=sometimes",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("key `fabric.pfc.enabled`") && stderr.contains("expected a boolean"),
        "{stderr}"
    );
    let o = rocelab(&["run", scenario.to_str().unwrap(), "--variant", "nope"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("\"nope\": no such variant") && stderr.contains("\"lossy\""),
        "{stderr}"
    );
}

/// Every fault scenario, run and handed to the doctor as a whole run folder:
/// the first finding names the injected fault from its counter signature
/// (what a real dump of the same fault shows), not from the scenario's name.
#[test]
fn doctor_ranks_each_injected_fault_first() {
    // (scenario, words the first finding's title must hold); the finding
    // id it must have is the scenario's own written cause
    // (`[diagnosis] cause`), never one chosen here.
    let cases: &[(&str, &[&str])] = &[
        ("buffer-too-small", &["sw0"]),
        ("corruption", &["corrupted"]),
        ("deadlock-bounce", &["deadlock", "cycle"]),
        ("deadlock-ring", &["deadlock", "cycle"]),
        ("ecn-off-switch", &["ECN", "off", "leaf0", "Kmax"]),
        ("headroom-too-small", &["headroom"]),
        ("link-down", &["went down", "lost"]),
        ("link-flap", &["went down", "lost"]),
        ("link-loss", &["lost"]),
        ("mtu-mismatch", &["MTU"]),
        ("pause-storm", &["h0", "PAUSE"]),
        ("pfc-off-port", &["sw0-p1"]),
        ("priority-mismatch", &["prio0"]),
        ("slow-receiver", &["h0"]),
    ];
    // Every scenario in scenarios/faults/ is covered.
    let mut listed: Vec<String> = std::fs::read_dir(repo().join("scenarios/faults"))
        .unwrap()
        .filter_map(|e| {
            let p = e.ok()?.path();
            if p.extension()? != "toml" {
                return None;
            }
            Some(p.file_stem()?.to_string_lossy().into_owned())
        })
        .collect();
    listed.sort();
    let covered: Vec<String> = cases.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(listed, covered, "every fault scenario needs a case");
    let base = scratch("doctor-faults");
    let mut wrong = Vec::new();
    for (name, words) in cases {
        let out = base.join(name);
        let scenario = repo().join(format!("scenarios/faults/{name}.toml"));
        let doc: toml::Value = toml::from_str(&std::fs::read_to_string(&scenario).unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let id = doc["diagnosis"]["cause"]
            .as_str()
            .unwrap_or_else(|| panic!("{name}: no [diagnosis] cause"));
        let j = run_then_doctor(name, &scenario, &out, &[]);
        let first = &j["findings"][0];
        // It belongs to the faulty variant, listed first in each file, not
        // to a repaired one ("healthy", "fixed", "computed").
        let results: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap())
                .unwrap();
        let variants = results["variants"].as_array().map_or(0, Vec::len);
        let faulty = &results["variants"][0]["summary"]["variant"];
        if variants > 1 && first["scope"] != *faulty {
            wrong.push(format!(
                "{name}: first finding is about variant {}, not {faulty}",
                first["scope"]
            ));
        }
        let got_id = first["id"].as_str().unwrap_or("");
        let title = first["title"].as_str().unwrap_or("");
        if got_id != id || !words.iter().all(|w| title.contains(w)) {
            wrong.push(format!(
                "{name}: want {id} with {words:?}, got {got_id}: {title}"
            ));
        }
        // Each affected port or host is named once.
        let names: Vec<&str> = first["affects"]
            .as_array()
            .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
            .unwrap_or_default();
        let distinct: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        if distinct.len() != names.len() {
            wrong.push(format!("{name}: affects names a subject twice: {names:?}"));
        }
        // The deadlock names its members from results.json.
        if *name == "deadlock-ring" {
            let affects = first["affects"].as_array().map_or(0, Vec::len);
            assert_eq!(affects, 5, "{name}: ring of five switches: {first}");
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// `rocelab doctor OUT/` on the run folder of every scenario outside
/// scenarios/faults/ (which `doctor_ranks_each_injected_fault_first`
/// covers): it succeeds and says something; on the healthy lessons and
/// imports nothing is above info. The lessons under scenarios/lessons/
/// each show a failure on purpose (lossy RoCE, PFC without congestion
/// control, a fault and its fix) and must only be read; any other new
/// scenario has to be put on one side. The k16
/// benchmarks take about a minute each in a debug build and run cut
/// short (`--set duration=20us`): the doctor must still read them.
#[test]
fn doctor_reads_every_scenario_and_healthy_lessons_stay_at_info() {
    let healthy = [
        "allreduce-ring",
        "imports/htsim-import",
        "nccl-tests-allreduce",
        "nccl-tests-gpu-rails",
        "training-pipeline",
    ];
    // Runs the model's default NIC (no congestion control) under switches
    // that mark ECN: the marks go unanswered, which the doctor must name
    // (cnp-not-handled, a warning: the same setting as lesson 4's no-cc
    // variant) and nothing worse.
    let no_cc = ["imports/hpcc-import"];
    // Contrasts lossless with lossy on purpose: its lossy variant drops.
    // Fluid mode's check runs cases chosen to pause under PFC beside
    // clean ones (its counters are fluid mode's: no PAUSE, no marks).
    // IRN's comparison runs lossy RoCE on purpose too.
    let contrast = ["websearch-poisson", "fluid-check", "irn-comparison"];
    let mut all = Vec::new();
    for dir in [
        "scenarios",
        "scenarios/imports",
        "scenarios/lessons",
        "scenarios/bench",
    ] {
        let mut names: Vec<String> = std::fs::read_dir(repo().join(dir))
            .unwrap()
            .filter_map(|e| {
                let p = e.ok()?.path();
                if p.extension()? != "toml" {
                    return None;
                }
                let stem = p.file_stem()?.to_string_lossy().into_owned();
                Some(match dir.strip_prefix("scenarios/") {
                    Some(sub) => format!("{sub}/{stem}"),
                    None => stem,
                })
            })
            .collect();
        names.sort();
        all.extend(names);
    }
    for n in all
        .iter()
        .filter(|n| !n.starts_with("bench/") && !n.starts_with("lessons/"))
    {
        assert!(
            healthy.contains(&n.as_str())
                || no_cc.contains(&n.as_str())
                || contrast.contains(&n.as_str()),
            "{n}: a healthy scenario outside lessons/ and bench/ (or a new kind to classify)"
        );
    }
    let base = scratch("doctor-every");
    let mut wrong = Vec::new();
    for n in &all {
        let out = base.join(n.replace('/', "-"));
        let scenario = repo().join(format!("scenarios/{n}.toml"));
        let extra: &[&str] = if n.contains("k16") {
            &["--set", "duration=20us"]
        } else {
            &[]
        };
        let j = run_then_doctor(n, &scenario, &out, extra);
        let findings = j["findings"].as_array().cloned().unwrap_or_default();
        if findings.is_empty() {
            wrong.push(format!("{n}: no findings at all"));
        }
        if no_cc.contains(&n.as_str()) {
            let first = &findings[0];
            if first["id"] != "cnp-not-handled" || first["severity"] != "warning" {
                wrong.push(format!(
                    "{n}: want a cnp-not-handled warning first, got {} {}: {}",
                    first["severity"], first["id"], first["title"]
                ));
            }
            for f in findings
                .iter()
                .filter(|f| f["severity"] == "error" || f["severity"] == "critical")
            {
                wrong.push(format!(
                    "{n}: {} {}: {}",
                    f["severity"], f["id"], f["title"]
                ));
            }
        }
        if healthy.contains(&n.as_str()) {
            for f in findings.iter().filter(|f| f["severity"] != "info") {
                wrong.push(format!(
                    "{n}: {} {} ({}): {}",
                    f["severity"], f["id"], f["scope"], f["title"]
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&base);
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// A run that leaves flows unfinished says so first, in the console and
/// in both report forms: how many, of which workload, why the run
/// stopped; its FCT percentiles and makespan carry the count they cover;
/// a summed PAUSE time longer than the run says it sums over ports; and
/// `--fail-on-unfinished` exits 3 (the files still written).
#[test]
fn a_run_that_leaves_flows_unfinished_says_so_first_and_can_fail() {
    let dir = scratch("unfinished");
    let lesson = repo().join("scenarios/lessons/02-pfc-head-of-line-blocking.toml");
    let out = dir.join("lossy");
    let args = |extra: &[&str]| {
        let mut a = vec![
            "run".to_string(),
            lesson.to_str().unwrap().to_string(),
            "--out".into(),
            out.to_str().unwrap().to_string(),
            "--variant".into(),
            "lossy".into(),
        ];
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    let plain = rocelab(&args(&[]).iter().map(String::as_str).collect::<Vec<_>>());
    let stdout = ok(&plain);
    let first = stdout
        .find("  UNFINISHED         14 of 15 flows did not finish (incast: 14 of 14)\n")
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(first < stdout.find("flows completed").unwrap(), "{stdout}");
    assert!(
        stdout.contains("the run stopped when its duration ran out, at 100.0 ms"),
        "{stdout}"
    );
    assert!(
        stdout.contains("FCT p50            658.207us (over 1 of 15 flows)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("makespan           3.658ms (over 1 of 15 flows)"),
        "{stdout}"
    );
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let section = html.find("<section id=\"unfinished\">").expect("section");
    assert!(section < html.find("id=\"summary\"").unwrap());
    assert!(html.contains(
        "<li>lossy: 14 of 15 flows did not finish (incast: 14 of 14); the run stopped when \
         its duration ran out, at 100.0 ms. FCT percentiles and makespan cover the 1 finished \
         flow only.</li>"
    ));
    assert!(
        html.contains(">658.2 us (over 1 of 15 flows)</td>"),
        "{html}"
    );
    ok(&rocelab(&[
        "report",
        out.join("results.json").to_str().unwrap(),
        "--format",
        "md",
        "--out",
        dir.join("report.md").to_str().unwrap(),
    ]));
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    let m = md.find("### Flows left unfinished").expect("md section");
    assert!(m < md.find("## Summary").unwrap(), "{md}");
    assert!(
        md.contains("| FCT p50 | 658.2 us (over 1 of 15 flows) |"),
        "{md}"
    );
    // For CI: a non-zero status, and the files are there.
    std::fs::remove_dir_all(&out).unwrap();
    let failing = rocelab(
        &args(&["--fail-on-unfinished", "--quiet"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert_eq!(failing.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&failing.stderr)
        .contains("--fail-on-unfinished: flows left unfinished: lossy: 14 of 15 flows"));
    assert!(out.join("report.html").exists());
    // Every flow finished: the flag changes nothing.
    let lossless = rocelab(&[
        "run",
        lesson.to_str().unwrap(),
        "--out",
        dir.join("lossless").to_str().unwrap(),
        "--variant",
        "lossless",
        "--fail-on-unfinished",
    ]);
    let stdout = ok(&lossless);
    assert!(!stdout.contains("UNFINISHED"), "{stdout}");
    // 138.4 ms held in all over a 9.104 ms run: the sum over ports.
    assert!(
        stdout.contains(
            "pause time (sum)   138.404ms (summed over ports and priorities, so longer than the run)"
        ),
        "{stdout}"
    );
}

/// Ctrl-C during a long run: the variant in progress ends, its results
/// as they stand are written with `stop_reason` `interrupted`, the
/// variants after it do not run, and the command exits 130.
#[test]
fn ctrl_c_writes_what_was_measured_so_far() {
    let dir = scratch("ctrl-c");
    let file = dir.join("long.toml");
    let topo = repo().join("topologies/fat-tree-k16.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"long\"\nseed = 1\ntopology = {:?}\n[nic]\nmtu = 4096\n\
             [[workload]]\nkind = \"permutation\"\nsize = \"64MB\"\nop = \"write\"\npriority = 3\n\
             [[variant]]\nname = \"first\"\n[[variant]]\nname = \"second\"\n",
            topo.to_str().unwrap()
        ),
    )
    .unwrap();
    let out = dir.join("out");
    let child = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args([
            "run",
            file.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Well into the first variant (64 MB per host takes minutes).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let v = j["variants"].as_array().unwrap();
    assert_eq!(v.len(), 1, "the second variant did not run");
    assert_eq!(v[0]["summary"]["stop_reason"], "interrupted");
    assert!(v[0]["summary"]["flows_completed"].as_u64().unwrap() < 1024);
    assert!(out.join("report.html").exists() && out.join("counters/first").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

/// `validate` states the memory a run will need; against what the run
/// then reports as its peak (a 64-GPU MoE training job of 73 K flows,
/// where flows dominate) it lies between 0.7 and 1.4 times it.
#[test]
fn validate_estimates_the_memory_a_run_takes() {
    let dir = scratch("memory-estimate");
    let text = std::fs::read_to_string(repo().join("scenarios/scale/training-64x8.toml"))
        .unwrap()
        .replace("servers = 64", "servers = 8")
        .replace("servers_per_leaf = 32", "servers_per_leaf = 4")
        .replace("spines = 16", "spines = 4")
        .replace("steps = 10", "steps = 2");
    let file = dir.join("job.toml");
    std::fs::write(&file, text).unwrap();
    let v = ok(&rocelab(&["validate", file.to_str().unwrap()]));
    let mb = |s: &str, after: &str| -> f64 {
        let at = s.find(after).unwrap_or_else(|| panic!("{after:?} in {s}")) + after.len();
        s[at..]
            .split(" MB")
            .next()
            .and_then(|x| x.trim().parse().ok())
            .unwrap_or_else(|| panic!("a size in MB after {after:?}: {s}"))
    };
    let estimate = mb(&v, "about ");
    let out = dir.join("out");
    let r = ok(&rocelab(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]));
    let peak = mb(&r, "peak memory ");
    assert!(
        estimate > 0.7 * peak && estimate < 1.4 * peak,
        "estimate {estimate} MB against a peak of {peak} MB"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
