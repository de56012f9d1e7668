//! `rocelab validate` and `rocelab run` on scenario files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rocelab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .current_dir(repo())
        .args(args)
        .output()
        .expect("run rocelab")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
    assert!(stderr.contains("expected `go-back-n`"), "{stderr}");
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
    let out = rocelab(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("== variant lossless =="), "{stdout}");
    assert!(
        stdout.contains("events/s") && stdout.contains("peak memory"),
        "{stdout}"
    );
    let text = std::fs::read_to_string(out_dir.join("results.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["scenario"], "tiny");
    assert_eq!(json["seed"], 3);
    let variants = json["variants"].as_array().unwrap();
    assert_eq!(variants.len(), 2);
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
    let nic = std::fs::read_to_string(out_dir.join("counters/lossless/h1.ethtool.txt")).unwrap();
    assert!(nic.starts_with("NIC statistics:"), "{nic}");
    // Same file, same seed: the same bytes.
    let again = dir.join("again");
    let out = rocelab(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        again.to_str().unwrap(),
    ]);
    assert!(out.status.success());
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
