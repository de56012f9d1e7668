//! The twin's inference and writer against real perftest outputs (the
//! parsers' fixtures and corpus) and small made-up bad inputs.

use std::path::Path;

use sim::config::NicModel;
use sim::workload::perftest::PerftestTest;

use super::*;
use crate::realnic::perftest::Side;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");

fn fixture(rel: &str) -> String {
    let path = Path::new(FIXTURES).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Infer from fixture files (named by their path under the fixtures).
fn twin_of(files: &[&str]) -> Result<TwinSetup, TwinError> {
    let texts: Vec<(String, String)> = files.iter().map(|f| (f.to_string(), fixture(f))).collect();
    infer_texts(&texts)
}

/// Infer from made-up texts.
fn twin_of_texts(files: &[(&str, &str)]) -> Result<TwinSetup, TwinError> {
    let texts: Vec<(String, String)> = files
        .iter()
        .map(|(f, t)| (f.to_string(), t.to_string()))
        .collect();
    infer_texts(&texts)
}

fn assumed(t: &TwinSetup) -> Vec<&'static str> {
    t.assumptions.iter().map(|a| a.what).collect()
}

/// Every field left to a default names its assumption; fields read from
/// an input name none.
fn assert_defaults_listed(t: &TwinSetup) {
    let a = assumed(t);
    let optional = [
        ("nic_model", t.nic_model.is_none()),
        ("pcie", t.pcie.is_none()),
        ("max_payload", t.max_payload.is_none()),
        ("max_read_request", t.max_read_request.is_none()),
        ("pfc_priorities", t.pfc_priorities.is_none()),
        ("priority", t.priority.is_none()),
        ("trust", t.trust.is_none()),
        ("roce_v2", t.roce_v2.is_none()),
        ("cnps", t.cnps.is_none()),
    ];
    for (what, missing) in optional {
        if missing {
            assert!(
                a.contains(&what),
                "{what} is defaulted but not listed: {a:?}"
            );
        }
    }
    for what in ["back_to_back", "cable", "switch"] {
        assert!(a.contains(&what), "{what} not listed: {a:?}");
    }
    assert!(
        t.iters.is_some() != t.duration_s.is_some(),
        "one of iters and duration"
    );
    assert!(!t.real.is_empty());
    assert_eq!(t.sizes.len(), t.real.len());
    for a in &t.assumptions {
        assert!(!a.value.is_empty() && !a.why.is_empty(), "{a:?}");
    }
}

/// A line-level check of the TOML the writer emits: blank, comment,
/// table header, or `key = value` with a value of the shapes it writes;
/// returns the keys per table (`table.key`).
fn toml_keys(text: &str) -> Vec<String> {
    let mut table = String::new();
    let mut keys = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') {
            continue;
        }
        if let Some(t) = l.strip_prefix("[[").and_then(|t| t.strip_suffix("]]")) {
            table = t.to_string();
            continue;
        }
        if let Some(t) = l.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            table = t.to_string();
            continue;
        }
        let (key, rest) = l
            .split_once(" = ")
            .unwrap_or_else(|| panic!("not TOML: {line}"));
        let value = rest.split(" #").next().unwrap().trim();
        let ok = (value.starts_with('"') && value.ends_with('"') && value.len() >= 2)
            || value.parse::<f64>().is_ok()
            || value == "true"
            || value == "false"
            || (value.starts_with('[') && value.ends_with(']'))
            || (value.starts_with('{') && value.ends_with('}'));
        assert!(ok, "not a TOML value: {line}");
        assert!(
            key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "key: {line}"
        );
        keys.push(if table.is_empty() {
            key.to_string()
        } else {
            format!("{table}.{key}")
        });
    }
    keys
}

/// The value of `key` (dotted, as [`toml_keys`] names it) and whether its
/// line is marked assumed.
fn toml_value(text: &str, dotted: &str) -> Option<(String, bool)> {
    let (table, key) = dotted.rsplit_once('.').unwrap_or(("", dotted));
    let mut cur = String::new();
    for line in text.lines() {
        let l = line.trim();
        if let Some(t) = l
            .strip_prefix("[[")
            .and_then(|t| t.strip_suffix("]]"))
            .or_else(|| l.strip_prefix('[').and_then(|t| t.strip_suffix(']')))
        {
            cur = t.to_string();
            continue;
        }
        if cur != table || l.starts_with('#') {
            continue;
        }
        if let Some(rest) = l.strip_prefix(&format!("{key} = ")) {
            let value = rest.split(" #").next().unwrap().trim().to_string();
            return Some((value, rest.contains("# assumed: ")));
        }
    }
    None
}

#[test]
fn write_bw_all_alone_reads_the_test_and_lists_every_assumption() {
    let t = twin_of(&["perftest/write_bw_all_gbits.txt"]).unwrap();
    assert_eq!(t.test, PerftestTest::WriteBw);
    assert!(t.all);
    assert_eq!(t.sizes.len(), 23);
    assert_eq!((t.sizes[0], t.sizes[22]), (2, 8 << 20));
    assert_eq!(t.iters, Some(5000));
    assert_eq!(t.duration_s, None);
    assert_eq!(
        (t.qps, t.tx_depth, t.inline, t.cq_mod),
        (1, 128, 0, Some(1))
    );
    assert!(!t.bidirectional);
    assert_eq!(t.mtu, 4096);
    assert_eq!(t.side, Side::Client);
    // 97.66 Gb/s measured: the next standard rate, assumed.
    assert_eq!(t.link_gbps, 100);
    let row = t.real.iter().find(|r| r.bytes == 65536).unwrap();
    assert_eq!(row.bw_avg_bps, Some(97_390_000_000));
    assert_eq!(row.bw_peak_bps, Some(97_410_000_000));
    assert_eq!(row.msg_rate_per_s, Some(185_757));
    let a = assumed(&t);
    for what in [
        "link_gbps",
        "nic_model",
        "pcie",
        "max_payload",
        "max_read_request",
        "pfc_priorities",
        "priority",
        "trust",
        "roce_v2",
        "cnps",
    ] {
        assert!(a.contains(&what), "{what} missing from {a:?}");
    }
    for read in [
        "test",
        "iters",
        "qps",
        "tx_depth",
        "inline",
        "cq_mod",
        "mtu",
        "bidirectional",
    ] {
        assert!(!a.contains(&read), "{read} was read, not assumed: {a:?}");
    }
    assert_defaults_listed(&t);
    assert_eq!(t.understood.len(), 1);
    assert!(
        t.understood[0].contains("ib_write_bw -a"),
        "{:?}",
        t.understood
    );
}

#[test]
fn both_ends_in_one_file_use_the_clients_table_and_say_so() {
    let t = twin_of(&["perftest/send_bw_duration_both_ends.txt"]).unwrap();
    assert_eq!(t.test, PerftestTest::SendBw);
    assert_eq!(t.side, Side::Client);
    assert_eq!(t.real.len(), 1);
    assert_eq!(t.real[0].iterations, 1_843_302);
    assert!(
        t.understood[0].contains("server end of the same test"),
        "{:?}",
        t.understood
    );
    // -D: an achieved count with the peak unmeasured; 1843302 / 184330
    // messages per second = 10 s.
    assert_eq!(t.iters, None);
    assert_eq!(t.duration_s, Some(10.0));
    assert!(assumed(&t).contains(&"duration_s"));
    assert_eq!(t.real[0].bw_peak_bps, None);
    assert_defaults_listed(&t);
}

#[test]
fn server_and_client_in_two_files_are_one_run() {
    let both = fixture("perftest/send_bw_duration_both_ends.txt");
    let (server, client) = both.split_at(both.find("---\n---").unwrap() + 4);
    let t = twin_of_texts(&[("server.txt", server), ("client.txt", client)]).unwrap();
    assert_eq!(t.side, Side::Client);
    assert!(t.understood[0].starts_with("server.txt"));
    assert!(t.understood[0].contains("server end"), "{:?}", t.understood);
}

#[test]
fn a_cut_table_uses_the_rows_read_and_says_where_it_stops() {
    let t = twin_of(&["perftest/write_bw_truncated.txt"]).unwrap();
    // No title: the verb is assumed; the rows 2 and 4 B doubling are -a.
    assert_eq!(t.test, PerftestTest::WriteBw);
    assert!(assumed(&t).contains(&"test"));
    assert_eq!(t.sizes, vec![2, 4]);
    assert!(t.all);
    assert!(
        t.understood[0].contains("cut after the 4 B row"),
        "{:?}",
        t.understood
    );
    // Header lines missing: their defaults are listed.
    for what in [
        "qps",
        "tx_depth",
        "inline",
        "cq_mod",
        "mtu",
        "bidirectional",
    ] {
        assert!(assumed(&t).contains(&what), "{what}");
    }
    assert_defaults_listed(&t);
}

#[test]
fn a_table_cut_before_its_first_row_is_refused() {
    let text = "                    RDMA_Write BW Test\n Number of qps   : 1\n TX depth        : 128\n Link type       : Ethernet\n---------------------------------------------------------------------------------------\n #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n";
    let e = twin_of_texts(&[("cut.txt", text)]).unwrap_err();
    assert!(matches!(e, TwinError::NoRows { .. }), "{e}");
    let m = e.to_string();
    assert!(
        m.contains("cut.txt") && m.contains("stops before the first row"),
        "{m}"
    );
    assert!(m.contains("RDMA_Write BW Test"), "{m}");
}

#[test]
fn a_failed_run_is_refused_naming_the_completion_status() {
    let e = twin_of(&["perftest/send_bw_retry_exceeded_new.txt"]).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("transport retry counter exceeded (12)") && m.contains("at client"),
        "{m}"
    );
    let e = twin_of(&["corpus/perftest_zero_gid_container_rtr_fail.txt"]).unwrap_err();
    assert!(matches!(e, TwinError::NoRows { .. }), "{e}");
    assert!(e.to_string().contains("no result table"), "{e}");
}

#[test]
fn two_different_tests_are_refused_naming_both() {
    let e = twin_of(&["perftest/write_bw_client.txt", "perftest/write_lat.txt"]).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, TwinError::TwoRuns { .. }), "{m}");
    assert!(m.contains("different tests"), "{m}");
    assert!(
        m.contains("write_bw_client.txt line 2: RDMA_Write BW Test (client)"),
        "{m}"
    );
    assert!(
        m.contains("write_lat.txt line 2: RDMA_Write Latency Test (client)"),
        "{m}"
    );
    // What was understood of each file comes with it.
    assert!(m.contains("understood so far:"), "{m}");
}

#[test]
fn a_server_and_a_client_of_different_tests_in_one_file_are_refused() {
    let server = fixture("perftest/send_bw_duration_both_ends.txt");
    let server = &server[..server.find("---\n---").unwrap() + 4];
    let text = format!("{server}{}", fixture("perftest/write_bw_client.txt"));
    let e = twin_of_texts(&[("both.txt", &text)]).unwrap_err();
    let m = e.to_string();
    assert!(m.contains("different tests"), "{m}");
    assert!(
        m.contains("Send BW Test (server)") && m.contains("RDMA_Write BW Test (client)"),
        "{m}"
    );
}

#[test]
fn two_clients_of_one_test_are_refused() {
    let one = fixture("perftest/write_bw_client.txt");
    let text = format!("{one}\n{one}");
    let e = twin_of_texts(&[("two.txt", &text)]).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, TwinError::TwoRuns { .. }), "{m}");
    assert!(m.contains("two client runs"), "{m}");
}

#[test]
fn a_foreign_file_is_refused_naming_it_and_the_formats_expected() {
    let e = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_client.txt")),
        (
            "notes.txt",
            "Dear team,\nthe benchmark ran fine yesterday.\n",
        ),
    ])
    .unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, TwinError::Foreign { .. }), "{m}");
    assert!(
        m.starts_with("notes.txt: not a format the twin reads"),
        "{m}"
    );
    assert!(m.contains("ib_write_bw") && m.contains("lspci -vv"), "{m}");
}

#[test]
fn a_format_with_nothing_for_the_twin_is_refused() {
    let nccl = "node1:1234:1234 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\nnode1:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE\n";
    let e = twin_of_texts(&[("nccl.log", nccl)]).unwrap_err();
    assert!(matches!(e, TwinError::Unused { .. }), "{e}");
    assert!(
        e.to_string().starts_with("nccl.log: read as nccl output"),
        "{e}"
    );
}

#[test]
fn inputs_without_perftest_are_refused_with_what_they_said() {
    let e = twin_of(&["devinfo/ibv_devinfo_v.txt"]).unwrap_err();
    let m = e.to_string();
    assert!(matches!(e, TwinError::NoPerftest { .. }), "{m}");
    assert!(m.contains("give the ib_*_bw or ib_*_lat output"), "{m}");
    assert!(
        m.contains("devinfo/ibv_devinfo_v.txt: ibv_devinfo (mlx5_0, mlx5_1)"),
        "{m}"
    );
}

#[test]
fn an_infiniband_run_is_refused() {
    for f in [
        "perftest/read_bw_old_mb.txt",
        "corpus/perftest_write_bw_quoted_cut_row.txt",
        "corpus/perftest_read_bw_ib_all_sizes.txt",
    ] {
        let e = twin_of(&[f]).unwrap_err();
        assert!(matches!(e, TwinError::InfiniBand { .. }), "{f}: {e}");
        let m = e.to_string();
        assert!(
            m.contains("Link type : IB") && m.contains("RoCE (Ethernet) only"),
            "{m}"
        );
    }
    // perftest says Ethernet but the device dump says InfiniBand.
    let devinfo = fixture("devinfo/ibv_devinfo_v.txt")
        .replace("link_layer:\t\tEthernet", "link_layer:\t\tInfiniBand");
    let e = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_client.txt")),
        ("devinfo.txt", &devinfo),
    ])
    .unwrap_err();
    assert!(matches!(e, TwinError::InfiniBand { .. }), "{e}");
    assert!(
        e.to_string()
            .contains("mlx5_0 port 1: link layer InfiniBand"),
        "{e}"
    );
}

#[test]
fn atomics_and_unreliable_connections_are_refused() {
    let e = twin_of(&["perftest/atomic_bw.txt"]).unwrap_err();
    assert!(matches!(e, TwinError::Unsupported { .. }), "{e}");
    assert!(
        e.to_string().contains("Atomic FETCH_AND_ADD BW Test"),
        "{e}"
    );
    let ud = fixture("perftest/write_bw_client.txt")
        .replace("Connection type : RC", "Connection type : UD");
    let e = twin_of_texts(&[("ud.txt", &ud)]).unwrap_err();
    assert!(e.to_string().contains("connection type UD"), "{e}");
}

#[test]
fn device_dumps_fill_the_host_link_and_qos() {
    let t = twin_of(&[
        "perftest/write_bw_client.txt",
        "devinfo/ibv_devinfo_v.txt",
        "corpus/lspci_mlx5_cx4lx_healthy_gen3x8.txt",
        "qos/mlnx_qos_dscp.txt",
        "qos/show_gids.txt",
    ])
    .unwrap();
    // ibv_devinfo: mlx5_0 is part 4129 (ConnectX-7), 4X at 25 Gb/s.
    assert_eq!(t.nic_model, Some(NicModel::ConnectX7));
    assert_eq!(t.link_gbps, 100);
    // lspci -vv: LnkSta 8 GT/s x8, DevCtl MPS and MRRS 512 B.
    assert_eq!(t.pcie, Some((3, 8)));
    assert_eq!((t.max_payload, t.max_read_request), (Some(512), Some(512)));
    // mlnx_qos: PFC on 3 only, trust dscp; show_gids: GID 3 is RoCE v2.
    assert_eq!(t.pfc_priorities, Some(1 << 3));
    assert_eq!(t.priority, Some(3));
    assert_eq!(t.trust.as_deref(), Some("dscp"));
    assert_eq!(t.roce_v2, Some(true));
    let a = assumed(&t);
    for read in [
        "link_gbps",
        "nic_model",
        "pcie",
        "max_payload",
        "max_read_request",
        "pfc_priorities",
        "trust",
        "roce_v2",
    ] {
        assert!(!a.contains(&read), "{read} was read, not assumed: {a:?}");
    }
    // The traffic's priority is taken as the one PFC priority.
    assert!(a.contains(&"priority"));
    assert_defaults_listed(&t);
    assert_eq!(t.understood.len(), 5);
    assert!(
        t.understood[1].contains("PCI device id 4129, ConnectX-7"),
        "{:?}",
        t.understood
    );
    assert!(
        t.understood[2].contains("PCIe Gen3 x8"),
        "{:?}",
        t.understood
    );
    assert!(
        t.understood[3].contains("PFC on priority 3"),
        "{:?}",
        t.understood
    );
    assert!(
        t.understood[4].contains("GID index 3: RoCE v2"),
        "{:?}",
        t.understood
    );
}

#[test]
fn a_link_slower_than_the_run_is_not_the_tested_one() {
    let ethtool = "Settings for eno1:\n\tSpeed: 25000Mb/s\n\tDuplex: Full\n\tLink detected: yes\n";
    let t = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_client.txt")),
        ("ethtool.txt", ethtool),
    ])
    .unwrap();
    // 11497.82 MiB/s = 96.45 Gb/s cannot cross 25 Gb/s.
    assert_eq!(t.link_gbps, 100);
    assert!(assumed(&t).contains(&"link_gbps"));
    assert!(
        t.understood[1].contains("not the tested link"),
        "{:?}",
        t.understood
    );
    let fast = ethtool.replace("25000", "100000");
    let t = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_client.txt")),
        ("ethtool.txt", &fast),
    ])
    .unwrap();
    assert_eq!(t.link_gbps, 100);
    assert!(!assumed(&t).contains(&"link_gbps"));
    assert!(
        t.understood[1].contains("the link rate: eno1: Speed 100000 Mb/s"),
        "{:?}",
        t.understood
    );
}

#[test]
fn counters_give_the_pfc_and_roce_priority() {
    let counters = "NIC statistics:\n     rx_prio0_bytes: 1000\n     tx_prio0_bytes: 2000\n     rx_prio4_bytes: 90000000\n     tx_prio4_bytes: 80000000000\n     rx_prio4_pause: 12\n     tx_prio4_pause: 0\n";
    let t = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_client.txt")),
        ("ethtool-S.txt", counters),
    ])
    .unwrap();
    assert_eq!(t.pfc_priorities, Some(1 << 4));
    assert_eq!(t.priority, Some(4));
    let a = assumed(&t);
    assert!(
        a.contains(&"pfc_priorities") && !a.contains(&"priority"),
        "{a:?}"
    );
    assert!(
        t.understood[1].contains("totals since boot"),
        "{:?}",
        t.understood
    );
    assert_defaults_listed(&t);
    // The scenario protects and marks priority 4 and runs the workload on it.
    let s = t.scenario_toml("twin");
    assert_eq!(toml_value(&s, "fabric.pfc.priorities").unwrap().0, "[4]");
    assert_eq!(toml_value(&s, "fabric.ecn.priority").unwrap().0, "4");
    assert_eq!(
        toml_value(&s, "workload.priority"),
        Some(("4".into(), false))
    );
}

#[test]
fn global_pause_and_plain_lspci_are_understood() {
    let pause = "Pause parameters for enp1s0f0np0:\nAutonegotiate:\toff\nRX:\t\ton\nTX:\t\ton\n";
    let lspci = "host:~ # lspci\n0000:00:08.0 VGA compatible controller: Microsoft Corporation Hyper-V virtual VGA\n98da:00:02.0 Ethernet controller: Mellanox Technologies MT27710 Family [ConnectX-4 Lx Virtual Function]\n";
    let t = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_mtu1024.txt")),
        ("pause.txt", pause),
        ("lspci.txt", lspci),
    ])
    .unwrap();
    assert_eq!(t.mtu, 1024);
    assert_eq!(t.nic_model, Some(NicModel::ConnectX4Lx));
    assert!(!assumed(&t).contains(&"nic_model"));
    assert!(t.pcie.is_none() && assumed(&t).contains(&"pcie"));
    let pfc = t.assumption("pfc_priorities").unwrap();
    assert!(pfc.why.contains("global pause"), "{pfc:?}");
    assert!(
        t.understood[1].contains("global pause (802.3x) RX on TX on"),
        "{:?}",
        t.understood
    );
    assert!(
        t.understood[2].contains("ConnectX-4 Lx Virtual Function"),
        "{:?}",
        t.understood
    );
    assert_defaults_listed(&t);
}

#[test]
fn a_nic_without_a_model_of_its_own_takes_the_nearest_and_says_so() {
    let devinfo = fixture("devinfo/ibv_devinfo_v.txt").replace("4129", "4127");
    let t = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_client.txt")),
        ("devinfo.txt", &devinfo),
    ])
    .unwrap();
    assert_eq!(t.nic_model, Some(NicModel::ConnectX6Dx));
    let a = t.assumption("nic_model").unwrap();
    assert!(
        a.why.contains("ConnectX-6 Lx has no model of its own"),
        "{a:?}"
    );
}

#[test]
fn latency_runs_read_their_table() {
    let t = twin_of(&["perftest/write_lat.txt"]).unwrap();
    assert_eq!(t.test, PerftestTest::WriteLat);
    assert_eq!(t.sizes, vec![2]);
    assert!(!t.all);
    assert_eq!(
        (t.iters, t.tx_depth, t.cq_mod, t.inline),
        (Some(1000), 1, None, 0)
    );
    let r = &t.real[0];
    assert_eq!(
        (r.t_min_ns, r.t_typical_ns, r.p99_ns),
        (Some(910), Some(940), Some(1020))
    );
    assert_eq!(r.bw_avg_bps, None);
    // A 2 B latency bounds no link rate.
    let a = t.assumption("link_gbps").unwrap();
    assert!(a.value.starts_with("100"), "{a:?}");
    assert_defaults_listed(&t);

    let t = twin_of(&["perftest/read_lat_duration.txt"]).unwrap();
    assert_eq!(t.test, PerftestTest::ReadLat);
    // 2753911 transactions at 918034 per second: 3 s.
    assert_eq!((t.iters, t.duration_s), (None, Some(3.0)));
    assert_eq!(t.real[0].tps, Some(918_034));
    assert_eq!(t.inline, 0);
    assert!(!assumed(&t).contains(&"inline"), "READs never inline");
    assert_defaults_listed(&t);
}

#[test]
fn run_infinitely_rows_are_one_size_averaged() {
    let one = fixture("perftest/write_bw_sl_cpu_util.txt");
    let row = " 3      65536      1834221          0.00               96.12  \t\t     0.183340         12.47\n";
    let more = one.replace(
        row,
        &format!(
            "{row}{}",
            row.replace("96.12", "96.14").replace("1834221", "1834321")
        ),
    );
    let t = twin_of_texts(&[("inf.txt", &more)]).unwrap();
    assert_eq!(t.sizes, vec![65536]);
    assert_eq!(t.real[0].repeats, 2);
    assert_eq!(t.real[0].bw_avg_bps, Some(96_130_000_000));
    assert_eq!(t.real[0].iterations, 1_834_271);
    assert_eq!(t.duration_s, Some(10.0));
    assert!(t
        .assumption("duration_s")
        .unwrap()
        .why
        .contains("--run_infinitely"));
}

#[test]
fn post_lists_are_listed_as_not_modelled() {
    let t = twin_of(&["corpus/perftest_write_bw_post_list.txt"]).unwrap();
    assert_eq!((t.tx_depth, t.cq_mod), (256, Some(128)));
    assert!(t
        .assumption("post_list")
        .unwrap()
        .why
        .contains("lists of 128"));
    // 224958464 iterations at 7.498617 Mpps: a 30 s timed run.
    assert_eq!(t.duration_s, Some(30.0));
    // 0.48 Gb/s of 8 B messages: the smallest standard rate above it.
    assert_eq!(t.link_gbps, 1);
}

#[test]
fn a_quoted_noisy_paste_reads_like_the_tool() {
    let t = twin_of(&["perftest/write_bw_quoted_noisy.txt"]).unwrap();
    assert_eq!(t.test, PerftestTest::WriteBw);
    assert_eq!(t.real[0].bw_avg_bps, Some(93_851_914_076));
    assert!(
        t.understood[0].contains("device mlx5_2"),
        "{:?}",
        t.understood
    );
}

#[test]
fn the_scenario_marks_every_assumed_line() {
    let t = twin_of(&["perftest/write_bw_all_gbits.txt"]).unwrap();
    let s = t.scenario_toml("twin-write");
    let keys = toml_keys(&s);
    for k in [
        "name",
        "description",
        "topology",
        "nic.mtu",
        "nic.host.model",
        "workload.kind",
        "workload.test",
        "workload.src",
        "workload.dst",
        "workload.all",
        "workload.iters",
        "workload.qps_per_pair",
        "workload.tx_depth",
        "workload.bidirectional",
        "workload.inline",
        "workload.cq_mod",
    ] {
        assert!(keys.contains(&k.to_string()), "{k} missing:\n{s}");
    }
    assert_eq!(
        toml_value(&s, "topology"),
        Some(("\"topology.toml\"".into(), false))
    );
    assert_eq!(
        toml_value(&s, "workload.test"),
        Some(("\"write_bw\"".into(), false))
    );
    assert_eq!(
        toml_value(&s, "workload.iters"),
        Some(("5000".into(), false))
    );
    assert_eq!(toml_value(&s, "workload.cq_mod"), Some(("1".into(), false)));
    assert_eq!(
        toml_value(&s, "workload.inline"),
        Some(("\"0B\"".into(), false))
    );
    assert_eq!(toml_value(&s, "nic.mtu"), Some(("4096".into(), false)));
    assert_eq!(
        toml_value(&s, "nic.host.model"),
        Some(("\"connectx-5\"".into(), true))
    );
    // Left at the model's default, shown commented out with why.
    assert!(s.contains("# pcie_gen = 3"), "{s}");
    assert!(
        s.contains("# assumed: no lspci -vv of the NIC given"),
        "{s}"
    );
    assert!(s.contains("# priorities = [3]"), "{s}");
    assert!(
        !keys.iter().any(|k| k.starts_with("nic.host.pcie")),
        "{keys:?}"
    );
    // Every assumption is in the header.
    for a in &t.assumptions {
        assert!(
            s.contains(&format!("#   {}: ", a.what)),
            "{} not in the header:\n{s}",
            a.what
        );
    }

    let topo = t.topology_toml();
    assert!(topo.contains("rate = \"100Gbps\""), "{topo}");
    assert!(toml_value(&topo, "defaults.rate").unwrap().1);
    assert_eq!(
        toml_value(&topo, "defaults.cable_m"),
        Some(("1".into(), true))
    );
    let net = sim::topology::file::from_str(Path::new("topology.toml"), &topo).unwrap();
    assert_eq!(net.hosts().len(), 2);
}

#[test]
fn the_scenario_writes_what_was_read_without_marks() {
    let t = twin_of(&[
        "perftest/write_bw_client.txt",
        "devinfo/ibv_devinfo_v.txt",
        "corpus/lspci_mlx5_cx4lx_healthy_gen3x8.txt",
        "qos/mlnx_qos_dscp.txt",
    ])
    .unwrap();
    let s = t.scenario_toml("twin");
    toml_keys(&s);
    assert_eq!(
        toml_value(&s, "nic.host.model"),
        Some(("\"connectx-7\"".into(), false))
    );
    assert_eq!(
        toml_value(&s, "nic.host.pcie_gen"),
        Some(("3".into(), false))
    );
    assert_eq!(
        toml_value(&s, "nic.host.pcie_width"),
        Some(("8".into(), false))
    );
    assert_eq!(
        toml_value(&s, "nic.host.max_payload"),
        Some(("\"512B\"".into(), false))
    );
    assert_eq!(
        toml_value(&s, "fabric.pfc.enabled"),
        Some(("true".into(), false))
    );
    assert_eq!(
        toml_value(&s, "fabric.pfc.priorities"),
        Some(("[3]".into(), false))
    );
    assert_eq!(
        toml_value(&s, "workload.size"),
        Some(("\"65536B\"".into(), false))
    );
    // The traffic's priority is an assumption even with PFC known.
    assert_eq!(
        toml_value(&s, "workload.priority"),
        Some(("3".into(), true))
    );
    let topo = t.topology_toml();
    assert_eq!(
        toml_value(&topo, "defaults.rate"),
        Some(("\"100Gbps\"".into(), false))
    );
}

#[test]
fn a_timed_run_writes_a_duration_and_back_to_back_has_no_switch() {
    let mut t = twin_of(&["perftest/send_bw_duration_both_ends.txt"]).unwrap();
    let s = t.scenario_toml("timed");
    assert_eq!(
        toml_value(&s, "workload.duration"),
        Some(("\"10s\"".into(), true))
    );
    assert!(toml_value(&s, "workload.iters").is_none());
    t.cabled_back_to_back();
    assert!(t.assumption("back_to_back").is_none());
    assert!(t.understood.last().unwrap().contains("back to back"));
    let topo = t.topology_toml();
    toml_keys(&topo);
    assert!(topo.contains("switches = []"), "{topo}");
    let net = sim::topology::file::from_str(Path::new("topology.toml"), &topo).unwrap();
    assert_eq!(net.hosts().len(), 2);
}

#[test]
fn names_and_comments_cannot_break_the_toml() {
    let mut t = twin_of(&["perftest/write_bw_client.txt"]).unwrap();
    t.understood
        .push("odd\nname: \"quoted\" \\ back".to_string());
    let s = t.scenario_toml("a \"name\"\nwith a newline");
    let keys = toml_keys(&s);
    assert!(keys.contains(&"name".to_string()));
    assert!(
        s.contains("name = \"a \\\"name\\\"\\u000Awith a newline\""),
        "{s}"
    );
}

#[test]
fn pcie_sizes_are_devctls_not_devcaps() {
    let lspci = fixture("corpus/lspci_mlx5_cx4lx_healthy_gen3x8.txt").replace(
        "MaxPayload 512 bytes, MaxReadReq 512 bytes",
        "MaxPayload 256 bytes, MaxReadReq 4096 bytes",
    );
    let t = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_mtu1024.txt")),
        ("lspci.txt", &lspci),
    ])
    .unwrap();
    // DevCap says 512 B; DevCtl, in force, 256 B and 4096 B.
    assert_eq!((t.max_payload, t.max_read_request), (Some(256), Some(4096)));
    // No ibv_devinfo: the model is lspci's device name.
    assert_eq!(t.nic_model, Some(NicModel::ConnectX4Lx));
    assert_eq!(t.pcie, Some((3, 8)));
    assert_defaults_listed(&t);
}

/// Load a written twin with the simulator's own scenario loader (the
/// topology written beside it in a folder of its own).
fn load_twin(t: &TwinSetup, tag: &str) -> Result<sim::scenario::Scenario, String> {
    let dir = std::env::temp_dir().join(format!("rocelab-twin-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    std::fs::write(dir.join(TOPOLOGY_FILE), t.topology_toml()).map_err(|e| e.to_string())?;
    let path = dir.join("twin.toml");
    let loaded =
        sim::scenario::from_str(&path, &t.scenario_toml("twin")).map_err(|e| e.to_string());
    let _ = std::fs::remove_dir_all(&dir);
    loaded
}

#[test]
fn the_simulator_loads_every_twin_written() {
    let cases: &[(&str, &[&str])] = &[
        ("all", &["perftest/write_bw_all_gbits.txt"]),
        ("timed", &["perftest/send_bw_duration_both_ends.txt"]),
        ("lat", &["perftest/write_lat.txt"]),
        ("readlat", &["perftest/read_lat_duration.txt"]),
        ("cut", &["perftest/write_bw_truncated.txt"]),
        (
            "full",
            &[
                "perftest/write_bw_client.txt",
                "devinfo/ibv_devinfo_v.txt",
                "corpus/lspci_mlx5_cx4lx_healthy_gen3x8.txt",
                "qos/mlnx_qos_dscp.txt",
                "qos/show_gids.txt",
            ],
        ),
    ];
    for (tag, files) in cases {
        let t = twin_of(files).unwrap();
        if let Err(e) = load_twin(&t, tag) {
            panic!("{tag}: {e}\n{}", t.scenario_toml("twin"));
        }
    }
    // PFC and ECN moved to priority 4, back to back.
    let counters = "NIC statistics:\n     tx_prio4_bytes: 80000000000\n     rx_prio4_pause: 12\n";
    let mut t = twin_of_texts(&[
        ("client.txt", &fixture("perftest/write_bw_client.txt")),
        ("ethtool-S.txt", counters),
    ])
    .unwrap();
    t.cabled_back_to_back();
    if let Err(e) = load_twin(&t, "prio4") {
        panic!("prio4: {e}\n{}", t.scenario_toml("twin"));
    }
}

#[test]
fn every_fixture_alone_and_beside_a_run_gives_a_twin_or_an_error() {
    let mut files = Vec::new();
    let mut dirs = vec![Path::new(FIXTURES).to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "txt") {
                files.push(p);
            }
        }
    }
    files.sort();
    assert!(files.len() > 50, "{}", files.len());
    let run = fixture("perftest/write_bw_client.txt");
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let name = f.display().to_string();
        let alone = infer_texts(&[(name.clone(), text.clone())]);
        if let Err(e) = &alone {
            assert!(!e.to_string().is_empty());
        }
        let beside = infer_texts(&[("run.txt".to_string(), run.clone()), (name, text)]);
        if let Ok(t) = beside {
            assert_defaults_listed(&t);
            toml_keys(&t.scenario_toml("twin"));
            toml_keys(&t.topology_toml());
        }
    }
}
