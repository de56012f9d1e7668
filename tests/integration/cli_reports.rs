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
fn parse_auto_json_shows_the_fabric_tools_values() {
    let o = rocelab(&[
        "parse",
        "auto",
        &fixture("corpus/iblinkinfo_two_hcas_back_to_back.txt"),
        "--json",
    ]);
    assert!(o.status.success(), "{o:?}");
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["kind"], "devinfo");
    assert_eq!(v["data"][1]["tool"], "iblinkinfo");
    assert_eq!(
        v["data"][1]["ports"][0]["attributes"]["port guid"],
        "0x0002c90300002f79"
    );
    assert_eq!(v["data"][1]["ports"][0]["lane_bps"], 5_000_000_000u64);
    let o = rocelab(&[
        "parse",
        "nvue",
        &fixture("corpus/switch_sdk_prio_pause_duration.txt"),
    ]);
    assert!(o.status.success(), "{o:?}");
    let out = stdout(&o);
    assert!(
        out.contains("ethtool") && out.contains("rx_prio3_pause_duration: 85558"),
        "{out}"
    );
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
        &fixture("perftest/write_bw_mtu1024.txt"),
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.contains("perftest vs perftest: ib_write_bw")
            && text.contains("0.902")
            && text.contains("close"),
        "{text}"
    );
    assert!(
        text.contains("note: MTUs differ: A 4096 B, B 1024 B"),
        "{text}"
    );
    let o = rocelab(&[
        "compare",
        &fixture("perftest/write_bw_client.txt"),
        &fixture("perftest/write_bw_mtu1024.txt"),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v[0]["rows"][0]["size"], 65536);
    assert_eq!(v[0]["rows"][0]["ratio_permille"], 902);
    let o = rocelab(&[
        "compare",
        &fixture("topo/topo_m_new.txt"),
        &fixture("sim/results.json"),
    ]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn compare_refuses_a_perftest_output_next_to_a_fabric_run() {
    let o = rocelab(&[
        "compare",
        &fixture("perftest/write_bw_client.txt"),
        &fixture("sim/results.json"),
    ]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(o.stdout.is_empty(), "no table: {o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("is a fabric run (variants: lossless, lossy")
            && err.contains("ib_write_bw")
            && err.contains("rocelab twin"),
        "{err}"
    );
}

#[test]
fn compare_picks_the_workload_named_when_results_hold_several() {
    let dir = scratch("compare-workload");
    let record = |group: &str, qps: u32| {
        serde_json::json!({
            "group": format!("{group}-65536"), "test": "write_bw", "size": 65536,
            "qps": qps, "bidirectional": false, "tx_depth": 128, "cq_mod": 1,
            "inline": 0, "timed": false, "messages": 5000, "bytes": 327_680_000u64,
            "start_ps": 0, "finish_ps": 27_000_000_000u64, "completed": true,
            "limit": "wire", "bound_bps": 0, "unloaded_latency_ps": 0,
        })
    };
    let doc = serde_json::json!({
        "scenario": "perftest", "seed": 1,
        "variants": [{
            "summary": { "variant": "lossless", "goodput_bps": 97e9 },
            "flows": [],
            "perftest": [record("one", 1), record("eight", 8)],
        }],
    });
    let results = dir.join("results.json");
    std::fs::write(&results, doc.to_string()).unwrap();
    let real = fixture("perftest/write_bw_client.txt");
    let o = rocelab(&["compare", &real, results.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("2 perftest workloads of write_bw (one, eight)"),
        "{err}"
    );
    let o = rocelab(&[
        "compare",
        &real,
        results.to_str().unwrap(),
        "--workload",
        "eight",
    ]);
    assert!(o.status.success(), "{o:?}");
    let text = stdout(&o);
    assert!(
        text.contains("perftest workload eight (write_bw)")
            && text.contains("qps differ: A 1, B 8")
            && text.contains("wire"),
        "{text}"
    );
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-clirep-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn report_renders_html_and_markdown_next_to_the_results() {
    let dir = scratch("report");
    let run = rocelab(&[
        "run",
        &fixture("render/tiny-incast.toml"),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(run.status.success(), "{run:?}");
    let results = dir.join("results.json");
    let from_run = std::fs::read_to_string(dir.join("report.html")).unwrap();
    std::fs::remove_file(dir.join("report.html")).unwrap();
    // Default: HTML next to the results, identical to what `run` wrote.
    let o = rocelab(&["report", results.to_str().unwrap()]);
    assert!(o.status.success(), "{o:?}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert_eq!(html, from_run);
    assert!(stdout(&o).contains(&format!("({} bytes)", html.len())));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let drops = json["variants"][1]["summary"]["drops"].as_u64().unwrap();
    assert!(drops > 0);
    assert!(html.contains(&format!(
        "data-row=\"drops\" data-variant=\"lossy\" data-value=\"{drops}\">{drops}</td>"
    )));
    // Markdown, default name, and an explicit output file.
    let o = rocelab(&["report", results.to_str().unwrap(), "--format", "md"]);
    assert!(o.status.success(), "{o:?}");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains(&format!("| drops | 0 | {drops} |")), "{md}");
    let other = dir.join("elsewhere.html");
    let o = rocelab(&[
        "report",
        results.to_str().unwrap(),
        "--out",
        other.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{o:?}");
    assert_eq!(std::fs::read_to_string(&other).unwrap(), html);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn report_rejects_a_malformed_results_file_naming_it() {
    let dir = scratch("bad");
    let f = dir.join("results.json");
    std::fs::write(
        &f,
        "{\"scenario\": \"x\", \"seed\": \"one\", \"variants\": []}",
    )
    .unwrap();
    let o = rocelab(&["report", f.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains(f.to_str().unwrap()), "{err}");
    assert!(
        err.contains("seed") || err.contains("invalid type"),
        "{err}"
    );
    assert!(!dir.join("report.html").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn help_lists_the_report_command() {
    let o = rocelab(&["--help"]);
    assert!(o.status.success());
    let help = stdout(&o);
    assert!(
        help.lines()
            .any(|l| l.trim_start().starts_with("report ") && l.contains("results.json")),
        "{help}"
    );
}

/// `--out_json` reports, of Debian's perftest and of perftest 6.x: `parse`
/// reads them as perftest (auto and named), `doctor` takes them and says
/// that results without counters are not enough to diagnose.
#[test]
fn parse_and_doctor_read_perftests_out_json_reports() {
    for (file, avg_bps) in [
        (
            "perftest/out_json_debian45_write_bw_client.json",
            9_996_704_154u64,
        ),
        ("perftest/out_json_v6_write_bw.json", 92_530_121_114),
    ] {
        for kind in ["auto", "perftest"] {
            let o = rocelab(&["parse", kind, &fixture(file), "--json"]);
            assert!(o.status.success(), "{file}: {o:?}");
            let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
            assert_eq!(v["kind"], "perftest", "{file}");
            assert_eq!(v["data"]["runs"][0]["bw"][0]["bytes"], 65536, "{file}");
            assert_eq!(v["data"]["runs"][0]["bw"][0]["avg_bps"], avg_bps, "{file}");
        }
        let o = rocelab(&["parse", "auto", &fixture(file)]);
        assert!(o.status.success(), "{file}: {o:?}");
        assert!(stdout(&o).contains("65536 B x"), "{}", stdout(&o));
        let o = rocelab(&["doctor", &fixture(file)]);
        let out = stdout(&o);
        assert!(o.status.success(), "{file}: {o:?}");
        assert!(out.contains(": perftest"), "{out}");
        assert!(
            out.contains("Not enough data") && out.contains("no NIC counters"),
            "{out}"
        );
    }
    // A broken report: the file, the line, the key and what was expected.
    let dir = std::env::temp_dir().join(format!("rocelab-out-json-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.json");
    let good = std::fs::read_to_string(fixture("perftest/out_json_v6_write_bw.json")).unwrap();
    std::fs::write(
        &bad,
        good.replace("\"MsgRate\": 0.176487", "\"MsgRate\": -1"),
    )
    .unwrap();
    let o = rocelab(&["parse", "auto", bad.to_str().unwrap()]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        e.contains(
            "bad.json: as perftest: line 28: expected results.MsgRate: a message rate in Mpps"
        ),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
