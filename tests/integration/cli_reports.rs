//! Smoke tests of `rocelab parse`, `rocelab doctor` and `rocelab compare`.

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(rel: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("reports/tests/fixtures")
        .join(rel)
        .display()
        .to_string()
}

fn rocelab(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(args)
        .output()
        .expect("run rocelab")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn parse_auto_json_reports_kind_and_units() {
    let o = rocelab(&[
        "parse",
        "auto",
        &fixture("perftest/write_bw_client.txt"),
        "--json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["kind"], "perftest");
    assert_eq!(v["data"]["runs"][0]["bw"][0]["avg_bps"], 96_450_704_835u64);
    assert_eq!(v["data"]["runs"][0]["mtu_bytes"], 4096);
}

#[test]
fn parse_explicit_kind_and_errors() {
    let o = rocelab(&["parse", "ibstat", &fixture("devinfo/ibstat.txt")]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("mlx5_1"));
    let o = rocelab(&["parse", "ethtool", &fixture("ethtool/mlx5_bad_value.txt")]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("line 3") && err.contains("rx_bytes"), "{err}");
    let o = rocelab(&["parse", "nonsense", &fixture("devinfo/ibstat.txt")]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn doctor_ranks_findings_and_speaks_json() {
    let dir = "doctor/s01_rx_pause";
    let o = rocelab(&[
        "doctor",
        &fixture(&format!("{dir}/ethtool_before.txt")),
        &fixture(&format!("{dir}/ethtool_after.txt")),
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(text.contains("1. [ERROR] rx-pause #1"), "{text}");
    assert!(
        text.contains("the job feels:") && text.contains("check first:"),
        "{text}"
    );

    let o = rocelab(&[
        "doctor",
        "--json",
        "--interval",
        "10s",
        &fixture("doctor/s03_pfc_storm/ethtool_before.txt"),
        &fixture("doctor/s03_pfc_storm/ethtool_after.txt"),
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["findings"][0]["id"], "pfc-storm");
    assert_eq!(v["sources"][0]["interval_ps"], 10_000_000_000_000u64);

    let o = rocelab(&[
        "doctor",
        "--fail-on",
        "warning",
        &fixture("doctor/healthy/ethtool_before.txt"),
        &fixture("doctor/healthy/ethtool_after.txt"),
    ]);
    assert!(
        o.status.success(),
        "healthy pair passes --fail-on warning: {}",
        stdout(&o)
    );
    let o = rocelab(&[
        "doctor",
        "--fail-on",
        "error",
        &fixture("doctor/s07_ack_timeout/nccl.txt"),
    ]);
    assert_eq!(o.status.code(), Some(1));
}

#[test]
fn compare_prints_ratios_and_verdicts() {
    let o = rocelab(&[
        "compare",
        &fixture("perftest/write_bw_client.txt"),
        &fixture("sim/results.json"),
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.contains("variant lossless") && text.contains("1.006") && text.contains("agree"),
        "{text}"
    );
    assert!(text.contains("differs"), "{text}");
    let o = rocelab(&[
        "compare",
        &fixture("topo/topo_m_new.txt"),
        &fixture("sim/results.json"),
    ]);
    assert_eq!(o.status.code(), Some(2));
}
