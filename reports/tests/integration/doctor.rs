//! The doctor on one capture set per playbook symptom: the first finding
//! must be that symptom; a healthy set has nothing above info.

use reports::doctor::{diagnose, Diagnosis, Entity, Finding, Input, Options, Severity, Symptom};
use reports::realnic;
use roce::time::Duration;

use crate::{fixture, fixture_path};

/// Every file of a doctor fixture directory, in the order a shell glob
/// gives (so `*_after` comes before `*_before`).
fn inputs(dir: &str) -> Vec<Input> {
    let path = fixture_path(&format!("doctor/{dir}"));
    let mut names: Vec<String> = std::fs::read_dir(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|n| {
            let rel = format!("doctor/{dir}/{n}");
            let parsed =
                realnic::parse(None, &fixture(&rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
            Input { name: n, parsed }
        })
        .collect()
}

fn run(dir: &str, interval: Option<Duration>) -> Diagnosis {
    diagnose(&inputs(dir), &Options { interval })
}

/// `text` parsed as whatever it is, as the input named `name`.
fn input(name: &str, text: &str) -> Input {
    Input {
        name: name.into(),
        parsed: realnic::parse(None, text).unwrap_or_else(|e| panic!("{name}: {e}")),
    }
}

/// The doctor with default options.
fn doctor(inputs: &[Input]) -> Diagnosis {
    diagnose(inputs, &Options::default())
}

fn assert_first(
    dir: &str,
    interval: Option<Duration>,
    symptom: Symptom,
    severity: Severity,
) -> Diagnosis {
    let d = run(dir, interval);
    let first = d
        .findings
        .first()
        .unwrap_or_else(|| panic!("{dir}: no findings"));
    assert_eq!(
        (first.symptom, first.severity),
        (symptom, severity),
        "{dir}:\n{}",
        d.render_text()
    );
    assert_eq!(first.playbook, symptom.number());
    assert!(!first.evidence.is_empty() && !first.impact.is_empty());
    assert!(!first.check_first.is_empty() && !first.why.is_empty());
    d
}

#[test]
fn healthy_pair_has_nothing_above_info() {
    let d = run("healthy", None);
    assert_eq!(d.worst(), Severity::Info, "{}", d.render_text());
    assert!(d.findings.iter().any(|f| f.symptom == Symptom::Healthy));
    // The small pause is still reported, as info, with its share of time.
    let p = d
        .findings
        .iter()
        .find(|f| f.symptom == Symptom::RxPause)
        .unwrap();
    assert!(p.evidence[0].contains("0.000%"), "{:?}", p.evidence);
    assert!(d
        .sources
        .iter()
        .all(|s| !s.since_boot && s.interval_ps == Some(10_000_000_000_000)));
}

#[test]
fn s01_rx_pause_is_held_by_the_peer() {
    let d = assert_first("s01_rx_pause", None, Symptom::RxPause, Severity::Error);
    let f = &d.findings[0];
    assert!(
        f.evidence[0].contains("25.000% of the interval"),
        "{:?}",
        f.evidence
    );
    assert!(f.title.contains("held by the peer"));
    assert_eq!(f.subject, "ethtool prio3", "source named after the files");
}

#[test]
fn s02_tx_pause_means_we_cannot_drain() {
    // One file holding two dumps separated by `date +%s` lines. A host
    // whose NIC sends PAUSE, releasing it each time, is a slow receiver
    // (playbook #2), named as such.
    let d = run("s02_tx_pause", None);
    let f = &d.findings[0];
    assert_eq!(
        (f.symptom, f.severity, f.playbook),
        (Symptom::SlowReceiver, Severity::Error, Some(2)),
        "{}",
        d.render_text()
    );
    assert!(f.title.contains("cannot drain") && f.title.contains("slow receiver"));
    assert!(f.evidence[0].contains("31.000%"));
    assert!(f
        .evidence
        .iter()
        .any(|e| e.contains("outbound_pci_stalled_wr +120000")));
}

#[test]
fn s03_pfc_storm_with_interval_from_the_command_line() {
    let d = assert_first(
        "s03_pfc_storm",
        Some(Duration::from_secs(10)),
        Symptom::PfcStorm,
        Severity::Critical,
    );
    assert!(d.findings[0].evidence.iter().any(|e| e.contains("98.000%")));
    // Given newest first by the glob: detected and said.
    assert!(d.findings.iter().any(|f| f.symptom == Symptom::CounterNote));
    // Without an interval the storm events alone still make it critical.
    let d = run("s03_pfc_storm", None);
    assert_eq!(d.findings[0].symptom, Symptom::PfcStorm);
}

#[test]
fn s04_ecn_not_marking_while_pfc_does_the_work() {
    let d = assert_first(
        "s04_ecn_not_marking",
        None,
        Symptom::EcnNotMarking,
        Severity::Error,
    );
    assert!(d
        .findings
        .iter()
        .any(|f| f.symptom == Symptom::RxPause && f.severity == Severity::Warning));
}

#[test]
fn s05_cnps_sent_but_not_handled() {
    let d = assert_first(
        "s05_cnp_not_handled",
        None,
        Symptom::CnpNotHandled,
        Severity::Error,
    );
    let ev = d.findings[0].evidence.join("\n");
    assert!(ev.contains("rx-node07: np_cnp_sent +41000"), "{ev}");
    assert!(ev.contains("tx-node02: rp_cnp_handled +0"), "{ev}");
}

#[test]
fn s06_drops_on_the_lossless_priority_and_retransmissions() {
    let d = assert_first(
        "s06_packet_loss",
        None,
        Symptom::PacketLoss,
        Severity::Critical,
    );
    assert!(d.findings[0].evidence[0].contains("rx_prio3_discards +18000"));
    // The retransmissions are the drop's consequence, folded into it.
    assert!(d.findings[0]
        .evidence
        .iter()
        .any(|e| e.ends_with("out_of_sequence +18234")));
    assert_eq!(
        d.findings
            .iter()
            .filter(|f| f.symptom == Symptom::PacketLoss)
            .count(),
        1,
        "one cause, reported once:\n{}",
        d.render_text()
    );
}

#[test]
fn s07_ack_timeouts_with_retry_exceeded() {
    let d = assert_first(
        "s07_ack_timeout",
        None,
        Symptom::AckTimeout,
        Severity::Critical,
    );
    let ev = d.findings[0].evidence.join("\n");
    assert!(ev.contains("local_ack_timeout_err +14"), "{ev}");
    assert!(ev.contains("status=12"), "{ev}");
}

#[test]
fn s08_link_downshift_and_flaps() {
    let d = assert_first(
        "s08_link_degraded",
        None,
        Symptom::LinkDegraded,
        Severity::Error,
    );
    let all: Vec<&str> = d
        .findings
        .iter()
        .filter(|f| f.symptom == Symptom::LinkDegraded)
        .flat_map(|f| f.evidence.iter().map(String::as_str))
        .collect();
    assert!(all.iter().any(|e| e.contains("link_down_events_phy +3")));
    assert!(all
        .iter()
        .any(|e| e.contains("mlx5_1/1 at 50 Gb/s (width 2X)")));
}

#[test]
fn s09_mtu_mismatch() {
    let d = assert_first(
        "s09_mtu_mismatch",
        None,
        Symptom::MtuMismatch,
        Severity::Error,
    );
    let mtu: Vec<_> = d
        .findings
        .iter()
        .filter(|f| f.symptom == Symptom::MtuMismatch)
        .collect();
    assert_eq!(
        mtu.len(),
        3,
        "oversize counters, devinfo active_mtu, perftest Mtu"
    );
}

#[test]
fn s10_roce_on_a_lossy_priority() {
    let d = assert_first(
        "s10_lossy_priority",
        None,
        Symptom::LossyPriority,
        Severity::Error,
    );
    assert_eq!(d.findings[0].subject, "ethtool prio0");
    assert!(d.findings[0]
        .evidence
        .iter()
        .any(|e| e.contains("PFC is enabled on no priority")));
}

#[test]
fn s11_gpudirect_not_used() {
    let d = assert_first(
        "s11_gdr_not_used",
        None,
        Symptom::GdrNotUsed,
        Severity::Warning,
    );
    assert!(d.findings[0].evidence[0].contains("4 of 4 NET/IB"));
    assert!(d
        .findings
        .iter()
        .any(|f| f.evidence.iter().any(|e| e.contains("is SYS"))));
}

#[test]
fn s12_corruption() {
    let d = assert_first("s12_corruption", None, Symptom::Corruption, Severity::Error);
    assert!(d.findings[0].evidence[0].contains("rx_crc_errors_phy +412"));
}

#[test]
fn every_playbook_symptom_has_a_capture_set() {
    let sets = [
        "s01_rx_pause",
        "s02_tx_pause",
        "s03_pfc_storm",
        "s04_ecn_not_marking",
        "s05_cnp_not_handled",
        "s06_packet_loss",
        "s07_ack_timeout",
        "s08_link_degraded",
        "s09_mtu_mismatch",
        "s10_lossy_priority",
        "s11_gdr_not_used",
        "s12_corruption",
    ];
    for (i, dir) in sets.iter().enumerate() {
        let d = run(dir, Some(Duration::from_secs(10)));
        assert_eq!(
            d.findings[0].playbook,
            Some(i as u8 + 1),
            "{dir}:\n{}",
            d.render_text()
        );
        assert!(d.worst() > Severity::Info);
    }
}

#[test]
fn single_snapshot_is_since_boot_and_capped() {
    let text = fixture("doctor/s06_packet_loss/ethtool_after.txt");
    let d = doctor(&[input("one", &text)]);
    assert!(d.sources[0].since_boot);
    assert!(d.findings.iter().any(|f| f.symptom == Symptom::SinceBoot));
    assert!(d.worst() <= Severity::Warning, "{}", d.render_text());
    assert!(d.render_text().contains("totals since boot"));
}

#[test]
fn simulator_dump_reads_like_a_real_one() {
    let text = fixture("ethtool/sim_dump.txt");
    let later = text
        .replace("time_ps: 2000000000", "time_ps: 4000000000")
        .replace(
            "rx_prio3_pause_duration: 248",
            "rx_prio3_pause_duration: 1248",
        )
        .replace("rx_prio3_pause: 17", "rx_prio3_pause: 117");
    let d = doctor(&[input("t0", &text), input("t1", &later)]);
    assert_eq!(d.sources[0].source, "leaf0-h3");
    assert_eq!(d.sources[0].interval_ps, Some(2_000_000_000));
    let f = &d.findings[0];
    // 1000 us of pause in 2 ms of simulated time.
    assert_eq!((f.symptom, f.severity), (Symptom::RxPause, Severity::Error));
    assert!(f.evidence[0].contains("50.000%"), "{:?}", f.evidence);
}

#[test]
fn json_output_is_stable_and_complete() {
    let d = run("s01_rx_pause", None);
    let v = serde_json::to_value(&d).unwrap();
    let f = &v["findings"][0];
    assert_eq!(f["id"], "rx-pause");
    assert_eq!(f["severity"], "error");
    assert_eq!(f["playbook"], 1);
    assert!(f["check_first"].as_str().unwrap().contains("switch port"));
}

#[test]
fn traffic_class_mapped_to_a_priority_without_pfc() {
    let d = assert_first(
        "extra_tc_mapping",
        None,
        Symptom::LossyPriority,
        Severity::Error,
    );
    let ev = &d.findings[0].evidence[0];
    assert!(ev.contains("NCCL_IB_TC=106 -> DSCP 26 -> prio3"), "{ev}");
    assert!(ev.contains("PFC is on [4]"), "{ev}");
}

#[test]
fn wrong_gid_index_is_named_with_the_right_one() {
    // One cause, reported once: the GID table's finding, with the job's
    // choice of index folded in.
    let d = run("extra_wrong_gid", None);
    let f = &d.findings[0];
    assert_eq!(
        (f.symptom, f.severity),
        (Symptom::GidMisconfigured, Severity::Error),
        "{}",
        d.render_text()
    );
    assert!(
        d.findings.iter().all(|g| g.symptom != Symptom::AckTimeout),
        "{}",
        d.render_text()
    );
    let ev = f.evidence.join("\n");
    assert!(
        ev.contains("index 1 on mlx5_0 is v2 (link-local, no IPv4)"),
        "{ev}"
    );
    assert!(ev.contains("RoCEv2 IPv4 entries: [3]"), "{ev}");
}

#[test]
fn slow_perftest_latency_is_flagged_and_healthy_is_not() {
    for (file, slow) in [
        ("perftest/write_lat_slow.txt", true),
        ("perftest/write_lat.txt", false),
    ] {
        let d = doctor(&[input(file, &fixture(file))]);
        let flagged = d
            .findings
            .iter()
            .any(|f| f.symptom == Symptom::SlowPerftest);
        assert_eq!(flagged, slow, "{file}: {}", d.render_text());
    }
}

#[test]
fn saturated_counters_do_not_overflow() {
    let max = u64::MAX;
    let text = format!(
        "NIC statistics:\n     rx_prio3_bytes: {max}\n     tx_prio3_bytes: {max}\n     rx_prio3_pause: {max}\n     rx_prio3_pause_duration: {max}\n     rx_vport_rdma_unicast_bytes: {max}\n     tx_vport_rdma_unicast_bytes: {max}\n     rx_symbol_err_phy: {max}\n     rx_crc_errors_phy: {max}\n"
    );
    let rdma = format!("link mlx5_0/1 np_cnp_sent {max} out_of_sequence {max}\nlink mlx5_1/1 np_cnp_sent {max} packet_seq_err {max}\n");
    let d = diagnose(
        &[input("e", &text), input("r", &rdma)],
        &Options {
            interval: Some(Duration::from_ps(1)),
        },
    );
    assert!(d.findings.iter().any(|f| f.symptom == Symptom::Corruption));
}

#[test]
fn other_completion_statuses_are_explained() {
    let log = fixture("nccl/nccl_retry_exceeded.txt")
        .replace("status=12", "status=4")
        .replace("error 12", "error 13");
    let d = doctor(&[input("nccl", &log)]);
    let ids: Vec<(Symptom, &str)> = d
        .findings
        .iter()
        .map(|f| (f.symptom, f.subject.as_str()))
        .collect();
    assert!(
        ids.contains(&(Symptom::CompletionError, "status 4")),
        "{ids:?}"
    );
    assert!(
        ids.contains(&(Symptom::CompletionError, "status 13")),
        "{ids:?}"
    );
    assert!(!ids.iter().any(|(s, _)| *s == Symptom::AckTimeout));
}

#[test]
fn file_names_name_the_sources() {
    use reports::doctor::source_from_file_name as src;
    assert_eq!(src("out/counters/h3.ethtool.txt"), "h3");
    assert_eq!(src("h3.rdma.txt"), "h3");
    assert_eq!(src("leaf0-p3.ethtool.txt"), "leaf0-p3");
    assert_eq!(src("caps/ethtool_before.txt"), "ethtool");
    assert_eq!(src("ethtool_after.txt"), "ethtool");
    assert_eq!(src("node7-t1.log"), "node7");
    assert_eq!(src("after.txt"), "");
}

/// The simulator's own dump writers, read back by the parsers and the
/// doctor: the contract between the two crates.
#[test]
fn simulator_counter_dumps_feed_the_doctor() {
    use sim::results::{NicRecord, PortRecord, PrioCounters};
    use sim::stats::{ethtool_dump, rdma_statistic};

    let sim_time_ps = 10_000_000_000u64; // 10 ms
    let port = |node: &str, is_nic: bool, c3: PrioCounters| {
        let mut prio = vec![PrioCounters::default(); 8];
        prio[3] = c3;
        PortRecord {
            node: node.into(),
            port: 1,
            peer: "sw0".into(),
            is_nic,
            prio,
            rx_discards: 0,
            fault_drops: 0,
            ecn_marked: 0,
            max_queue_bytes: 0,
            max_headroom_bytes: 0,
            tx_pause_storm_warning_events: 0,
            tx_pause_storm_error_events: 0,
            errors: Default::default(),
            pfc_priorities: Some(vec![3]),
            ecn: None,
            load_balancing: None,
            infiniband: None,
        }
    };
    // A sender held off 60 % of the run; the switch port facing it sends
    // the pause; the receiver is fine.
    let sender = port(
        "h1",
        true,
        PrioCounters {
            tx_packets: 2_000_000,
            tx_bytes: 8_400_000_000,
            rx_pause: 40_000,
            rx_pause_duration_ps: 6_000_000_000,
            rx_pause_transition: 20_000,
            ..PrioCounters::default()
        },
    );
    let receiver = port(
        "h0",
        true,
        PrioCounters {
            rx_packets: 2_000_000,
            rx_bytes: 8_400_000_000,
            ..PrioCounters::default()
        },
    );
    let switch = port(
        "sw0",
        false,
        PrioCounters {
            tx_pause: 40_000,
            tx_pause_duration_ps: 6_000_000_000,
            ..PrioCounters::default()
        },
    );
    let text = ethtool_dump(&sender, &[3]);
    let snaps = reports::realnic::ethtool::parse(&text).unwrap();
    assert_eq!(
        snaps[0].get("rx_prio3_pause_duration"),
        Some(6000),
        "microseconds"
    );
    assert_eq!(snaps[0].get("rx_prio3_pause"), Some(40_000));

    let nic = |node: &str| NicRecord {
        node: node.into(),
        rx_write_requests: 1_000_000,
        ..NicRecord::default()
    };
    let results = serde_json::json!({ "summary": { "variant": "lossless", "sim_time_ps": sim_time_ps, "goodput_bps": 6.7e9 } });
    let mut inputs = vec![Input {
        name: "results.json".into(),
        parsed: realnic::Parsed::SimResults(results),
    }];
    for (name, text) in [
        ("counters/h0.ethtool.txt", ethtool_dump(&receiver, &[3])),
        ("counters/h1.ethtool.txt", ethtool_dump(&sender, &[3])),
        ("counters/sw0-p1.ethtool.txt", ethtool_dump(&switch, &[3])),
        ("counters/h0.rdma.txt", rdma_statistic("mlx5_0", &nic("h0"))),
        ("counters/h1.rdma.txt", rdma_statistic("mlx5_0", &nic("h1"))),
    ] {
        inputs.push(input(name, &text));
    }
    let d = doctor(&inputs);
    let names: Vec<&str> = d.sources.iter().map(|s| s.source.as_str()).collect();
    assert_eq!(names, ["h0", "h1", "sw0-p1", "h0", "h1"]);
    assert!(d
        .sources
        .iter()
        .all(|s| !s.since_boot && s.interval_ps == Some(sim_time_ps)));
    // The switch sends the PAUSE that holds h1: it is the origin, and h1's
    // port is listed as held, with its share of simulated time.
    let first = &d.findings[0];
    assert_eq!(
        (first.symptom, first.severity, first.subject.as_str()),
        (Symptom::SwitchCongestion, Severity::Error, "sw0"),
        "{}",
        d.render_text()
    );
    assert!(
        first.affects.contains(&"h1".to_string()),
        "{:?}",
        first.affects
    );
    assert!(
        first
            .evidence
            .iter()
            .any(|e| e.starts_with("h1 rx_prio3_pause +40000") && e.contains("held 60.000%")),
        "{:?}",
        first.evidence
    );
    assert!(
        first.evidence[0].contains("of simulated time"),
        "{:?}",
        first.evidence
    );
    assert_eq!(
        d.findings
            .iter()
            .filter(|f| matches!(
                f.symptom,
                Symptom::TxPause | Symptom::RxPause | Symptom::SwitchCongestion
            ))
            .count(),
        1,
        "one pause cause"
    );
    assert!(d
        .findings
        .iter()
        .any(|f| f.symptom == Symptom::EcnNotMarking));
    assert!(!d.findings.iter().any(|f| f.symptom == Symptom::SinceBoot));
}

#[test]
fn simulated_time_metadata_makes_one_snapshot_a_delta() {
    let d = doctor(&[input("x", &fixture("ethtool/sim_dump.txt"))]);
    // 248 us of pause in 2 ms of simulated time.
    assert_eq!(d.sources[0].interval_ps, Some(2_000_000_000));
    let f = d
        .findings
        .iter()
        .find(|f| f.symptom == Symptom::RxPause)
        .unwrap();
    assert_eq!(f.severity, Severity::Error);
    assert!(f.evidence[0].contains("12.400%"), "{:?}", f.evidence);
}

/// A rocelab run folder of the tiny incast (results.json and
/// counters/<variant>/), its counters written as `rocelab run` writes them,
/// in a fresh temporary folder named after `tag`.
pub fn tiny_run_folder(tag: &str) -> std::path::PathBuf {
    let doc = crate::render::tiny();
    let dir = std::env::temp_dir().join(format!("rocelab-doctor-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("results.json"), doc.to_json()).unwrap();
    for r in &doc.variants {
        let prios: &[u8] = if r.summary.variant == "lossless" {
            &[3]
        } else {
            &[]
        };
        sim::stats::write_counter_dumps(&dir.join("counters").join(&r.summary.variant), r, prios)
            .unwrap();
    }
    dir
}

#[test]
fn a_run_folder_is_diagnosed_per_variant_with_the_drop_first() {
    let dir = tiny_run_folder("folder");
    let html = reports::render::html(crate::render::tiny());
    std::fs::write(dir.join("report.html"), html).unwrap();
    let loaded = reports::doctor::load(std::slice::from_ref(&dir), &mut std::io::empty());
    assert_eq!(loaded.skipped.len(), 1, "{:?}", loaded.skipped);
    assert!(loaded.skipped[0].path.ends_with("report.html"));
    let d = doctor(&loaded.inputs);
    let text = d.render_text();
    let first = &d.findings[0];
    // Drops of RoCE on a priority without PFC: a lossy priority (#10).
    assert_eq!(first.symptom, Symptom::LossyPriority, "{text}");
    assert_eq!(first.scope.as_deref(), Some("lossy"), "{text}");
    assert_eq!(first.subject, "leaf0", "{text}");
    assert!(first.title.contains("PFC off"), "{text}");
    // Every variant's counters stay apart: one source per node and variant.
    assert!(d.sources.iter().all(|s| s.snapshots == 1), "{text}");
    // No cause twice: one finding per (scope, symptom) for loss and pause.
    let mut seen = std::collections::BTreeSet::new();
    for f in &d.findings {
        if matches!(
            f.symptom,
            Symptom::PacketLoss | Symptom::TxPause | Symptom::RxPause | Symptom::AckTimeout
        ) {
            assert!(
                seen.insert((f.scope.clone(), f.symptom)),
                "{:?} twice in {:?}:\n{text}",
                f.symptom,
                f.scope
            );
        }
    }
    // The lossless variant's pause is one cause at its origin switch.
    let pause = d
        .findings
        .iter()
        .find(|f| {
            f.scope.as_deref() == Some("lossless")
                && matches!(
                    f.symptom,
                    Symptom::SwitchCongestion | Symptom::BufferTooSmall
                )
        })
        .unwrap_or_else(|| panic!("{text}"));
    assert_eq!(pause.origin.as_deref(), Some("leaf0"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn results_json_alone_reports_drops_and_unfinished_flows() {
    let doc = crate::render::tiny();
    let d = doctor(&[input("results.json", &doc.to_json())]);
    let lossy = &doc
        .variants
        .iter()
        .find(|v| v.summary.variant == "lossy")
        .unwrap()
        .summary;
    assert!(lossy.drops > 0);
    let first = &d.findings[0];
    // The lossy variant drops RoCE on a priority without PFC (#10), with
    // the run's drops and unfinished flows as its evidence.
    assert_eq!(first.symptom, Symptom::LossyPriority, "{}", d.render_text());
    assert!(first.severity >= Severity::Error);
    assert!(
        first
            .evidence
            .iter()
            .any(|e| e.contains(&format!("drops {}", lossy.drops))),
        "{:?}",
        first.evidence
    );
}

#[test]
fn stdin_and_missing_paths_are_inputs_or_skipped_never_fatal() {
    let text = fixture("ethtool/mlx5_single.txt");
    let loaded = reports::doctor::load(
        &[
            std::path::PathBuf::from("-"),
            std::path::PathBuf::from("/nonexistent/rocelab-doctor"),
        ],
        &mut text.as_bytes(),
    );
    assert_eq!(loaded.inputs.len(), 1);
    assert_eq!(loaded.inputs[0].name, "-");
    assert_eq!(loaded.skipped.len(), 1);
    assert!(loaded.skipped[0].path.contains("nonexistent"));
}

#[test]
fn a_gid_kind_mismatch_between_the_two_ends_is_an_addressing_error() {
    let text = fixture("perftest/write_bw_client.txt").replace(
        " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:02",
        " GID: 254:128:00:00:00:00:00:00:02:66:74:255:254:203:190:206",
    );
    let d = doctor(&[input("perftest.txt", &text)]);
    let f = d
        .findings
        .iter()
        .find(|f| f.title.contains("GID index or RoCE version mismatch"))
        .unwrap_or_else(|| panic!("{}", d.render_text()));
    assert_eq!(f.severity, Severity::Error);
    assert!(f.evidence[0].contains("IPv4-mapped") && f.evidence[0].contains("link-local"));
    // The unmodified run (both ends IPv4-mapped) has no such finding.
    let client = fixture("perftest/write_bw_client.txt");
    let d = doctor(&[input("perftest.txt", &client)]);
    assert!(!d.findings.iter().any(|f| f.title.contains("mismatch")));
}

/// One port of a synthetic results.json: where it is, its prio3
/// counters ([`c3`]), the frames it marked ECN and its deepest queue.
struct Port<'a> {
    node: &'a str,
    port: u16,
    peer: &'a str,
    is_nic: bool,
    c3: serde_json::Value,
    marked: u64,
    queue: u64,
}

/// A switch port.
fn sw<'a>(
    node: &'a str,
    port: u16,
    peer: &'a str,
    c3: serde_json::Value,
    marked: u64,
    queue: u64,
) -> Port<'a> {
    Port {
        node,
        port,
        peer,
        is_nic: false,
        c3,
        marked,
        queue,
    }
}

/// A NIC's port 0: no ECN marks, no queue.
fn nic<'a>(node: &'a str, peer: &'a str, c3: serde_json::Value) -> Port<'a> {
    Port {
        node,
        port: 0,
        peer,
        is_nic: true,
        c3,
        marked: 0,
        queue: 0,
    }
}

/// A results.json of one variant, 1 ms long, with the given ports. `ecn`
/// lists the switches whose ECN settings the file records, each with its
/// `(kmin, kmax)` list on prio3 (empty: marking off); the ports of other
/// nodes carry none (NICs, or switches of an older file).
fn results_json(ecn: &[(&str, &[(u64, u64)])], ports: &[Port<'_>]) -> Input {
    let ports: Vec<serde_json::Value> = ports
        .iter()
        .map(|port| {
            let mut prio = vec![serde_json::json!({}); 8];
            prio[3] = port.c3.clone();
            let mut p = serde_json::json!({
                "node": port.node, "port": port.port, "peer": port.peer, "is_nic": port.is_nic,
                "prio": prio, "rx_discards": 0, "fault_drops": 0,
                "ecn_marked": port.marked, "max_queue_bytes": port.queue, "max_headroom_bytes": 0,
                "pfc_priorities": [3],
            });
            if let Some((_, e)) = ecn.iter().find(|(node, _)| *node == port.node) {
                p["ecn"] = e
                    .iter()
                    .map(|(kmin, kmax)| {
                        serde_json::json!({"priority": 3, "kmin_bytes": kmin, "kmax_bytes": kmax, "pmax": 0.1})
                    })
                    .collect();
            }
            p
        })
        .collect();
    let doc = serde_json::json!({
        "scenario": "synthetic",
        "variants": [{
            "summary": {"variant": "v", "sim_time_ps": 1_000_000_000u64, "goodput_bps": 1e9,
                        "flows_total": 1, "flows_completed": 1},
            "flows": [], "ports": ports, "nics": [],
        }]
    });
    Input {
        name: "run/results.json".into(),
        parsed: realnic::parse(Some(realnic::Kind::SimResults), &doc.to_string()).unwrap(),
    }
}

/// prio3 counters: `tx` PAUSE sent for `tx_us`, `rx` received for
/// `rx_us`, and `bytes` sent.
fn c3(tx_us: u64, rx_us: u64, bytes: u64) -> serde_json::Value {
    serde_json::json!({
        "tx_bytes": bytes, "tx_packets": bytes / 4096,
        "tx_pause": u64::from(tx_us > 0) * 10, "tx_pause_duration_ps": tx_us * 1_000_000,
        "rx_pause": u64::from(rx_us > 0) * 10, "rx_pause_duration_ps": rx_us * 1_000_000,
    })
}

#[test]
fn a_switch_without_ecn_that_queues_past_kmax_is_the_cause_of_its_pause() {
    let on: &[(u64, u64)] = &[(20_000, 200_000)];
    let off: &[(u64, u64)] = &[];
    let d = doctor(&[results_json(
        &[("leaf0", off), ("leaf1", on)],
        &[
            sw("leaf0", 0, "h0", c3(0, 0, 4_000_000), 0, 460_000),
            sw("leaf0", 1, "leaf1", c3(300, 0, 0), 0, 0),
            sw("leaf1", 0, "leaf0", c3(0, 300, 4_000_000), 50, 150_000),
            sw("leaf1", 1, "h1", c3(0, 0, 0), 0, 0),
            nic("h0", "leaf0", c3(0, 0, 0)),
        ],
    )]);
    let text = d.render_text();
    let f = &d.findings[0];
    assert_eq!(f.symptom, Symptom::EcnNotMarking, "{text}");
    assert_eq!(f.origin.as_deref(), Some("leaf0"));
    assert_eq!(f.severity, Severity::Error, "{text}");
    assert!(
        f.title
            .contains("ECN marking is off at switch leaf0 on prio3 while leaf1 marks")
            && f.title.contains("460000 bytes (past Kmax 200000 bytes)"),
        "{text}"
    );
    // leaf0's PAUSE (30 % of the run) is its consequence, not a second cause.
    assert!(
        f.evidence
            .iter()
            .any(|e| e.starts_with("consequence: PAUSE starts at switch leaf0")),
        "{text}"
    );
    assert!(
        !d.findings.iter().any(|g| g.symptom == Symptom::TxPause),
        "{text}"
    );
    assert!(
        f.affects.contains(&"leaf1-p0".to_string()),
        "{:?}",
        f.affects
    );
    // With marking on at leaf0 too, no such finding.
    let d = doctor(&[results_json(
        &[("leaf0", on), ("leaf1", on)],
        &[
            sw("leaf0", 0, "h0", c3(0, 0, 4_000_000), 30, 460_000),
            sw("leaf1", 0, "leaf0", c3(0, 0, 4_000_000), 50, 150_000),
        ],
    )]);
    assert!(
        d.findings
            .iter()
            .all(|g| g.symptom != Symptom::EcnNotMarking),
        "{}",
        d.render_text()
    );
}

/// A 3:1 incast at sw0: ports p1-p3 pause h1-h3 for `held_us` of the
/// 1 ms run; sw0's deepest queue `q` against its Kmin `kmin`.
fn incast(held_us: u64, q: u64, kmin: u64) -> Diagnosis {
    let e: &[(u64, u64)] = &[(kmin, kmin * 4)];
    let mut ports = vec![sw("sw0", 0, "h0", c3(0, 0, 3_000_000), 10, q)];
    for (i, h) in ["h1", "h2", "h3"].iter().enumerate() {
        ports.push(sw("sw0", i as u16 + 1, h, c3(held_us, 0, 0), 0, 0));
        ports.push(nic(h, "sw0", c3(0, held_us, 1_000_000)));
    }
    doctor(&[results_json(&[("sw0", e)], &ports)])
}

#[test]
fn an_incast_held_to_its_fan_in_share_is_a_warning_and_beyond_it_an_error() {
    // 1 - 1/3 = 66.7 %: held 65 % is the incast's own share.
    let d = incast(650, 300_000, 20_000);
    let f = &d.findings[0];
    assert_eq!(f.symptom, Symptom::SwitchCongestion, "{}", d.render_text());
    assert_eq!(f.severity, Severity::Warning, "{}", d.render_text());
    assert!(
        f.title.starts_with("3:1 fan-in at switch sw0"),
        "{}",
        f.title
    );
    assert!(
        f.title.contains("65.000%") && f.title.contains("66.666%"),
        "{}",
        f.title
    );
    assert!(f.impact.contains("2.857x"), "1 / (1 - 0.65): {}", f.impact);
    // Held 80 %: more than the fan-in explains, capacity lost: error.
    let d = incast(800, 300_000, 20_000);
    let f = &d.findings[0];
    assert_eq!(f.severity, Severity::Error, "{}", d.render_text());
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("more than the 1 - 1/3 = 66.666%")),
        "{:?}",
        f.evidence
    );
    // Paused before the queue reached Kmin: the buffer is too small for
    // the thresholds, an error whatever the fan-in.
    let d = incast(650, 90_000, 400_000);
    let f = &d.findings[0];
    assert_eq!(
        (f.symptom, f.severity),
        (Symptom::BufferTooSmall, Severity::Error),
        "{}",
        d.render_text()
    );
    assert!(
        f.title.contains("before its queue reaches ECN's Kmin")
            && f.title.contains("90000 bytes, below Kmin 400000 bytes"),
        "{}",
        f.title
    );
}

#[test]
fn a_port_that_drops_without_pausing_while_its_peers_pause_is_named() {
    // sw0-p1 has no PFC rows (PFC off there) and drops prio3; p2 and p3
    // pause on prio3.
    let dump = |rows: &str| {
        format!("# time_ps: 1000000000\nNIC statistics:\n     rx_packets_phy: 1000\n{rows}")
    };
    let p1 = dump(
        "     rx_discards_phy: 100\n     rx_prio3_discards: 100\n     rx_prio3_packets: 1000\n",
    );
    let p2 = dump("     rx_prio3_packets: 1000\n     tx_prio3_pause: 28\n     tx_prio3_pause_duration: 50\n     rx_prio3_pause: 0\n     rx_prio3_pause_duration: 0\n");
    let p3 = p2.replace("tx_prio3_pause: 28", "tx_prio3_pause: 54");
    let d = doctor(&[
        input("sw0-p1.ethtool.txt", &p1),
        input("sw0-p2.ethtool.txt", &p2),
        input("sw0-p3.ethtool.txt", &p3),
    ]);
    let f = &d.findings[0];
    // PFC off on one port of a lossless fabric: RoCE on a lossy priority
    // there (#10), a misconfiguration rather than congestion loss.
    assert_eq!(f.symptom, Symptom::LossyPriority, "{}", d.render_text());
    assert_eq!(
        f.title,
        "sw0-p1 drops prio3 frames and sends no PAUSE while sw0-p2 (+28), sw0-p3 (+54) pause on prio3: PFC off on that port, RoCE runs lossy there"
    );
    // 10 % of the frames received were dropped: goodput 1 / (1 + 0.1 x 32).
    assert!(
        f.impact.contains("10.000% of the frames")
            && f.impact.contains("23.809%")
            && f.impact.contains("4.200x"),
        "{}",
        f.impact
    );
}

#[test]
fn without_recorded_settings_a_switch_that_never_marks_under_the_same_load_is_named() {
    // Older results files: no `ecn` on the ports; compared by marks.
    let d = doctor(&[results_json(
        &[],
        &[
            sw("leaf0", 0, "h0", c3(0, 0, 4_000_000), 0, 300_000),
            sw("leaf1", 0, "h1", c3(0, 0, 4_000_000), 40, 150_000),
        ],
    )]);
    let f = d
        .findings
        .iter()
        .find(|f| f.symptom == Symptom::EcnNotMarking)
        .unwrap_or_else(|| panic!("{}", d.render_text()));
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(
        f.title,
        "switch leaf0 never marks ECN while leaf1 under the same load does: ECN looks off there"
    );
    // A switch that marks nothing because its queue stayed shallow is fine.
    let d = doctor(&[results_json(
        &[],
        &[
            sw("leaf0", 0, "h0", c3(0, 0, 4_000_000), 0, 10_000),
            sw("leaf1", 0, "h1", c3(0, 0, 4_000_000), 40, 150_000),
        ],
    )]);
    assert!(
        d.findings
            .iter()
            .all(|f| f.symptom != Symptom::EcnNotMarking),
        "{}",
        d.render_text()
    );
}

/// A `rocelab perftest` client output ending in its counter block.
fn perftest_with_counters(counters: &[(&str, u64)]) -> String {
    let c: Vec<(String, u64)> = counters.iter().map(|(n, v)| (n.to_string(), *v)).collect();
    format!(
        "{}\n                    RDMA_Write BW Test\n TX depth        : 128\n{}\n{}\n 65536      1000             1000.00            999.00   \t\t     0.015984\n{}\n{}",
        verbs_emu::perftest::report::RESULT_LINE,
        verbs_emu::perftest::report::RESULT_LINE,
        verbs_emu::perftest::report::BW_HEADER_MIB,
        verbs_emu::perftest::report::RESULT_LINE,
        verbs_emu::perftest::report::counter_block("udp_lo", 0.5, &c),
    )
}

#[test]
fn perftests_counter_block_is_parsed_and_read_as_a_delta_over_the_run() {
    let text = perftest_with_counters(&[
        ("out_of_sequence", 0),
        ("packet_seq_err", 12),
        ("roce_adp_retrans", 480),
        ("rx_icrc_encapsulated", 3),
        ("tx_packets", 17000),
    ]);
    let client = input("client.txt", &text);
    let realnic::Parsed::Perftest(p) = &client.parsed else {
        panic!("not perftest: {:?}", client.parsed);
    };
    assert_eq!(p.runs.len(), 1);
    assert_eq!(p.runs[0].bw.len(), 1);
    let block = p.runs[0].counters.as_ref().expect("the counter block");
    assert_eq!(block.device.as_deref(), Some("udp_lo"));
    assert_eq!(block.duration_ns, Some(500_000_000));
    assert_eq!(block.counters.len(), 5);
    assert_eq!(block.counters["roce_adp_retrans"], 480);
    let d = doctor(&[client]);
    let src = d
        .sources
        .iter()
        .find(|s| s.source == "udp_lo (client)")
        .unwrap_or_else(|| panic!("{:?}", d.sources));
    assert!(src.run_delta && !src.since_boot);
    assert_eq!(src.interval_ps, Some(500_000_000_000));
    // A measured delta: nothing is capped as a since-boot total.
    let loss = d
        .findings
        .iter()
        .find(|f| f.symptom == Symptom::PacketLoss)
        .expect("packet loss");
    assert_eq!(loss.severity, Severity::Error);
    assert!(loss.evidence.contains(&"packet_seq_err +12".to_string()));
    assert!(loss.evidence.contains(&"roce_adp_retrans +480".to_string()));
    let bad = d
        .findings
        .iter()
        .find(|f| f.symptom == Symptom::Corruption)
        .expect("ICRC errors");
    assert_eq!(
        bad.evidence,
        vec!["rx_icrc_encapsulated +3 in the 500ms of one run".to_string()]
    );
    assert!(d.render_text().contains("a run's delta over 500ms"));
}

#[test]
fn rdma_counters_in_an_ethtool_dump_are_read_as_rdma_counters() {
    let dump = |t: u32, oos: u64, marked: u64| {
        format!(
            "# host: udp_lo\n# time: {t}\nNIC statistics:\n     out_of_sequence: {oos}\n     np_ecn_marked_roce_packets: {marked}\n     np_cnp_sent: 0\n     rx_packets: 100\n"
        )
    };
    let d = doctor(&[
        input("dev_t0.txt", &dump(100, 5, 0)),
        input("dev_t1.txt", &dump(110, 905, 70)),
    ]);
    let kinds: Vec<realnic::Kind> = d.sources.iter().map(|s| s.kind).collect();
    assert_eq!(kinds, vec![realnic::Kind::Ethtool, realnic::Kind::Rdma]);
    let loss = d
        .findings
        .iter()
        .find(|f| f.symptom == Symptom::PacketLoss)
        .expect("loss from out_of_sequence");
    assert!(loss.evidence.contains(&"out_of_sequence +900".to_string()));
    // CE marks without CNPs: the notification point is not answering.
    assert!(d.findings.iter().any(|f| f
        .evidence
        .iter()
        .any(|e| e.contains("np_ecn_marked_roce_packets +70"))));
}

#[test]
fn a_counter_block_that_says_unavailable_is_no_source() {
    let mut text = perftest_with_counters(&[]);
    text = text.replace(
        ", 0.500000 s\nNIC statistics:\n",
        ": counters unavailable: hardware counters: /sys/x: gone, really (none here)\n",
    );
    let client = input("client.txt", &text);
    let realnic::Parsed::Perftest(p) = &client.parsed else {
        panic!("not perftest: {:?}", client.parsed);
    };
    assert_eq!(p.runs[0].counters, None, "{text}");
    let d = doctor(&[client]);
    assert!(d.sources.is_empty(), "{:?}", d.sources);
}

// ---- Round 3: who is who, snapshots, own outputs, the simulator's faults.

/// SONiC `show pfc counters`: every port `Ethernet{4i}` with `tx` PFC3
/// frames, `rx` none.
fn sonic_pfc(tx3: u64) -> String {
    let head = "    Port Rx    PFC0    PFC1    PFC2    PFC3    PFC4    PFC5    PFC6    PFC7\n-----------  ------  ------  ------  ------  ------  ------  ------  ------\n";
    let row = |i: usize, v: u64| {
        format!(
            "Ethernet{:<3}       0       0       0 {:>11}       0       0       0       0\n",
            i * 4,
            if v == 0 {
                "0".to_string()
            } else {
                // SONiC groups thousands with commas.
                let s = v.to_string();
                let mut out = String::new();
                for (n, c) in s.chars().enumerate() {
                    if n > 0 && (s.len() - n) % 3 == 0 {
                        out.push(',');
                    }
                    out.push(c);
                }
                out
            }
        )
    };
    let mut s = String::from("admin@sonic:~$ show pfc counters\n");
    s.push_str(head);
    for i in 0..4 {
        s.push_str(&row(i, 0));
    }
    s.push('\n');
    s.push_str(&head.replace("Port Rx", "Port Tx"));
    for i in 0..4 {
        s.push_str(&row(i, tx3 + i as u64 * 1000));
    }
    s
}

fn all_text(d: &Diagnosis) -> String {
    d.findings
        .iter()
        .map(|f| {
            format!(
                "{} | {} | {} | {} | {}",
                f.title,
                f.evidence.join(" / "),
                f.impact,
                f.check_first,
                f.why
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn sonic_switch_ports_that_send_pause_are_a_congested_switch_never_a_host() {
    // Two snapshots 30 s apart, about 900,000 PFC frames per port between.
    let before = input("pfc_before.txt", &sonic_pfc(1_200_000));
    let after = input("pfc_after.txt", &sonic_pfc(2_100_000));
    for interval in [None, Some(Duration::from_secs(30))] {
        let d = diagnose(&[before.clone(), after.clone()], &Options { interval });
        let text = all_text(&d);
        let first = &d.findings[0];
        assert!(
            matches!(first.symptom, Symptom::SwitchCongestion | Symptom::TxPause),
            "{}",
            d.render_text()
        );
        assert!(first.title.contains("switch"), "{}", first.title);
        assert!(
            !text.contains("host ") && !text.contains("PCIe") && !text.contains("cannot drain"),
            "a switch port's PAUSE read as a host's:\n{}",
            d.render_text()
        );
        assert!(d.sources.iter().all(|s| s.entity == Entity::SwitchPort));
        assert!(d.findings.iter().all(|f| f.symptom != Symptom::Healthy));
        if interval.is_some() {
            // SONiC prints no duration: the share is estimated, and says so.
            assert!(first.severity >= Severity::Error, "{}", d.render_text());
            assert!(
                text.contains("an estimate") && text.contains("65535 quanta"),
                "{text}"
            );
            assert!(!text.contains(" 0.000%"), "{text}");
        }
    }
}

#[test]
fn snapshots_named_snap1_and_snap2_pair_and_take_the_interval() {
    let a = fixture("doctor/s01_rx_pause/ethtool_before.txt");
    let b = fixture("doctor/s01_rx_pause/ethtool_after.txt");
    let d = diagnose(
        &[input("snap1.txt", &a), input("snap2.txt", &b)],
        &Options {
            interval: Some(Duration::from_secs(10)),
        },
    );
    assert_eq!(d.sources.len(), 1, "{:?}", d.sources);
    assert_eq!(d.sources[0].snapshots, 2);
    assert_eq!(d.sources[0].interval_ps, Some(10_000_000_000_000));
    assert!(!d.sources[0].since_boot);
    assert_eq!(d.findings[0].symptom, Symptom::RxPause);
}

#[test]
fn per_host_folders_stay_per_host_and_never_subtract_across_hosts() {
    let a = fixture("doctor/s01_rx_pause/ethtool_before.txt");
    let b = fixture("doctor/s01_rx_pause/ethtool_after.txt");
    // node2 has seen more link-down events in its life than node1.
    let flaps = |t: &str, n: u32| {
        t.replace(
            "link_down_events_phy: 1",
            &format!("link_down_events_phy: {n}"),
        )
    };
    let node2 = flaps(&b, 7);
    let node1_before = flaps(&a, 2);
    let node1_after = flaps(&b, 2);
    let inputs = [
        input("case/node1/ethtool_after.txt", &node1_after),
        input("case/node1/ethtool_before.txt", &node1_before),
        input("case/node2/ethtool_after.txt", &node2),
    ];
    let d = diagnose(&inputs, &Options::default());
    let by: Vec<(&str, usize)> = d
        .sources
        .iter()
        .map(|s| (s.source.as_str(), s.snapshots))
        .collect();
    assert!(
        by.iter().any(|(s, n)| s.starts_with("node1") && *n == 2),
        "{by:?}"
    );
    assert!(
        by.iter().any(|(s, n)| s.starts_with("node2") && *n == 1),
        "{by:?}"
    );
    assert!(
        d.findings
            .iter()
            .all(|f| !matches!(f.symptom, Symptom::LinkDegraded | Symptom::LinkDown)),
        "a false link flap:\n{}",
        d.render_text()
    );
}

#[test]
fn a_lone_snapshot_ranks_no_lifetime_total_as_a_live_fault() {
    let text = "NIC statistics:\n     rx_packets_phy: 91234567\n     tx_packets_phy: 81234567\n     rx_discards_phy: 0\n     link_down_events_phy: 1\n     rx_prio3_pause: 12\n     rx_prio3_pause_duration: 40\n     tx_prio3_pause: 0\n     tx_prio3_pause_duration: 0\n";
    let d = doctor(&[input("ethtool.txt", text)]);
    let r = d.render_text();
    assert_eq!(d.findings[0].symptom, Symptom::SinceBoot, "{r}");
    assert!(d.worst() == Severity::Info, "{r}");
    for f in &d.findings {
        assert!(
            !matches!(
                f.symptom,
                Symptom::LinkDegraded | Symptom::LinkDown | Symptom::RxPause | Symptom::TxPause
            ),
            "a since-boot total ranked as a fault: {r}"
        );
        assert!(!f.title.contains("deadlock"), "{r}");
    }
    // No contradiction: "pausing us" and "healthy" are never both said.
    let pausing = d.findings.iter().any(|f| f.title.contains("pausing"));
    let healthy = d.findings.iter().any(|f| f.symptom == Symptom::Healthy);
    assert!(!(pausing && healthy), "{r}");
    // The totals are still shown, as totals.
    assert!(
        r.contains("link_down_events_phy 1") && r.contains("rx_prio3_pause 12"),
        "{r}"
    );
}

#[test]
fn an_interval_that_cannot_be_applied_is_said() {
    let text = fixture("doctor/s06_packet_loss/ethtool_after.txt");
    let d = diagnose(
        &[input("h1.txt", &text)],
        &Options {
            interval: Some(Duration::from_secs(60)),
        },
    );
    let note = d
        .findings
        .iter()
        .find(|f| f.symptom == Symptom::CounterNote && f.title.contains("--interval"))
        .unwrap_or_else(|| panic!("{}", d.render_text()));
    assert!(
        note.evidence[0].contains("one snapshot"),
        "{:?}",
        note.evidence
    );
}

#[test]
fn a_run_folder_is_read_through_results_and_counters_never_its_prose() {
    let dir = tiny_run_folder("prose");
    // rocelab's own prose: a report and the copied scenario, with words a
    // kernel-log reader would take for driver lines.
    std::fs::write(
        dir.join("report.md"),
        "# Report\n\nmlx5_core 0000:3b:00.0 enp59s0f0: PFC pause storm detected on prio 3\nmlx5_core 0000:3b:00.0 enp59s0f0: Link down\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("07-slow-receiver-and-pause-storm.toml"),
        "# mlx5_core 0000:3b:00.0: tx pause storm detected\nname = \"x\"\n",
    )
    .unwrap();
    let loaded = reports::doctor::load(std::slice::from_ref(&dir), &mut std::io::empty());
    let skipped: Vec<&str> = loaded.skipped.iter().map(|s| s.path.as_str()).collect();
    assert!(
        skipped.iter().any(|p| p.ends_with("report.md")),
        "{skipped:?}"
    );
    assert!(skipped.iter().any(|p| p.ends_with(".toml")), "{skipped:?}");
    assert!(loaded
        .inputs
        .iter()
        .all(|i| i.name.ends_with("results.json") || i.name.contains("/counters/")));
    let d = diagnose(&loaded.inputs, &Options::default());
    assert!(
        d.findings.iter().all(|f| !f.title.contains("driver")),
        "{}",
        d.render_text()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each variant of a fault scenario, simulated, its counter dumps written
/// as `rocelab run` writes them and read back by the doctor alone (no
/// results.json).
fn fault_dumps(name: &str) -> Vec<(String, Diagnosis)> {
    use sim::run::simulate;
    use sim::topology::Routes;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/faults")
        .join(format!("{name}.toml"));
    let sc = sim::scenario::load(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
    let dir = std::env::temp_dir().join(format!("rocelab-fault-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut out = Vec::new();
    for v in &sc.variants {
        let topo = &sc.topologies[v.topology];
        let opts = v.run_options();
        let r = simulate(topo, &Routes::compute(topo), &v.config, &v.flows, &opts)
            .unwrap()
            .0;
        let pfc = &v.config.fabric.pfc;
        let prios: &[u8] = if pfc.enabled { &pfc.priorities } else { &[] };
        let vdir = dir.join(&v.name);
        sim::stats::write_counter_dumps(&vdir, &r, prios).unwrap();
        let loaded = reports::doctor::load(std::slice::from_ref(&vdir), &mut std::io::empty());
        out.push((
            v.name.clone(),
            diagnose(&loaded.inputs, &Options::default()),
        ));
    }
    let _ = std::fs::remove_dir_all(&dir);
    out
}

/// The first finding of the scenario's first (faulty) variant.
fn first_of_fault(name: &str) -> (Finding, String) {
    let (_, d) = fault_dumps(name).swap_remove(0);
    (d.findings[0].clone(), d.render_text())
}

#[test]
fn a_slow_receivers_dumps_name_a_slow_receiver() {
    let (f, r) = first_of_fault("slow-receiver");
    assert_eq!(f.symptom, Symptom::SlowReceiver, "{r}");
    assert!(
        f.title.contains("h0") && f.title.contains("slow receiver"),
        "{r}"
    );
}

#[test]
fn a_pause_storms_dumps_name_a_storm_from_the_stuck_host() {
    let (f, r) = first_of_fault("pause-storm");
    assert_eq!(f.symptom, Symptom::PfcStorm, "{r}");
    assert!(f.title.contains("h0"), "{r}");
}

#[test]
fn a_pfc_deadlocks_dumps_rank_the_deadlock_first() {
    for name in ["deadlock-ring", "deadlock-bounce"] {
        let (f, r) = first_of_fault(name);
        assert_eq!(f.symptom, Symptom::PfcDeadlock, "{name}: {r}");
        assert!(f.title.contains("cycle"), "{name}: {r}");
    }
}

#[test]
fn drops_on_a_lossless_priority_that_pauses_are_short_headroom() {
    let (f, r) = first_of_fault("headroom-too-small");
    assert_eq!(f.symptom, Symptom::HeadroomShort, "{r}");
    assert!(f.title.contains("headroom"), "{r}");
    // The arithmetic, and what the capture lacks to finish it.
    let ev = f.evidence.join("\n");
    assert!(
        ev.contains("2 x cable length") && ev.contains("Missing"),
        "{ev}"
    );
}

#[test]
fn link_down_discards_on_a_pfc_port_are_the_link_going_down() {
    let (f, r) = first_of_fault("link-down");
    assert_eq!(f.symptom, Symptom::LinkDown, "{r}");
    assert!(
        !r.contains("drops frames with PFC off"),
        "link-down discards read as PFC-off drops: {r}"
    );
    // Both ends of the one link are one cause.
    assert_eq!(
        r.matches("] link-down").count(),
        1,
        "one finding per link: {r}"
    );
}

/// One unnamed NIC (`before.txt`, `after.txt`) whose firmware counted
/// storm events and whose PAUSE, between stalls, came and went: one
/// cause, the storm, with the slow-receiver reading as its evidence; never
/// a storm and a slow receiver side by side for the same host, and never
/// "host capture".
#[test]
fn storm_events_and_a_slow_receivers_pause_on_one_host_are_one_storm() {
    let before = fixture("doctor/s03_pfc_storm/ethtool_before.txt");
    let after = fixture("doctor/s03_pfc_storm/ethtool_after.txt");
    let d = diagnose(
        &[input("before.txt", &before), input("after.txt", &after)],
        &Options {
            interval: Some(Duration::from_secs(30)),
        },
    );
    let first = &d.findings[0];
    assert_eq!(first.symptom, Symptom::PfcStorm, "{}", d.render_text());
    assert!(
        d.findings
            .iter()
            .all(|f| f.symptom != Symptom::SlowReceiver),
        "{}",
        d.render_text()
    );
    assert!(
        first
            .evidence
            .iter()
            .any(|e| e.contains("this host is a slow receiver")),
        "{}",
        d.render_text()
    );
    assert!(
        !d.render_text().contains("host capture"),
        "{}",
        d.render_text()
    );
}

/// A leaf whose host ports run at 400G and uplinks at 1600G lists a
/// lossless profile per speed. Its pool is judged per Gbit/s of the
/// slower ports: counted at 1600G each, a 21 MB pool for 20 ports reads
/// as 663 bytes per Gbit/s, too small; at 400G it is 2,654, a normal
/// buffer. With only the fast profile the rule still fires.
#[test]
fn a_mixed_speed_switch_is_not_judged_at_its_fastest_ports() {
    let profile = |speed: u32| {
        format!(
            "Profile: pg_lossless_{speed}_200m_profile\n----------  ---------------------\ndynamic_th  -3\npool        ingress_lossless_pool\nsize        4000\nxoff        304391\nxon_offset  3000\n----------  ---------------------\n\n"
        )
    };
    let mmu = |speeds: &[u32]| {
        let mut t = String::from(
            "Pool: ingress_lossless_pool\n----  --------\nmode  dynamic\nsize  21235488\ntype  ingress\nxoff  9740512\n----  --------\n\n",
        );
        for &s in speeds {
            t.push_str(&profile(s));
        }
        t
    };
    let port = "# time_ps: 1000000000\nNIC statistics:\n     rx_packets_phy: 1000\n     rx_prio3_packets: 1000\n     tx_prio3_pause: 0\n     tx_prio3_pause_duration: 0\n";
    let run = |speeds: &[u32]| {
        let mut inputs = vec![input("leaf0.mmuconfig.txt", &mmu(speeds))];
        for p in 0..20 {
            inputs.push(input(&format!("leaf0-p{p}.ethtool.txt"), port));
        }
        doctor(&inputs)
    };
    let small = |d: &Diagnosis| {
        d.findings
            .iter()
            .any(|f| f.symptom == Symptom::BufferTooSmall)
    };
    let d = run(&[1600000]);
    assert!(small(&d), "{}", d.render_text());
    let d = run(&[400000, 1600000]);
    assert!(!small(&d), "{}", d.render_text());
}
