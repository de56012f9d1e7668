//! Parsers on fixtures written from the documented formats.

use reports::realnic::{
    self, detect, devinfo, ethtool, nccl, perftest, perftest_json, qos, rdma, topo, Kind,
};

use crate::fixture;

const MIB_BITS: u128 = 8 * 1_048_576;

/// `v` MiB/s given as hundredths, in bit/s, rounded like the parser.
fn mib(hundredths: u128) -> u64 {
    let num = hundredths * MIB_BITS;
    u64::try_from((num + 50) / 100).unwrap()
}

#[test]
fn perftest_write_bw_header_addresses_and_row() {
    let r = perftest::parse(&fixture("perftest/write_bw_client.txt")).unwrap();
    assert_eq!(r.runs.len(), 1);
    let run = &r.runs[0];
    assert_eq!(run.title.as_deref(), Some("RDMA_Write BW Test"));
    assert_eq!(run.verb.as_deref(), Some("RDMA_Write"));
    assert_eq!(run.kind, perftest::TestKind::Bandwidth);
    assert_eq!(run.side, perftest::Side::Client);
    assert_eq!(run.device.as_deref(), Some("mlx5_0"));
    assert_eq!(run.qps, Some(1));
    assert_eq!(run.connection.as_deref(), Some("RC"));
    assert_eq!(run.tx_depth, Some(128));
    assert_eq!(run.mtu_bytes, Some(4096));
    assert_eq!(run.link_type.as_deref(), Some("Ethernet"));
    assert_eq!(run.gid_index, Some(3));
    assert!(run
        .fields
        .iter()
        .any(|(k, v)| k == "Using Enhanced Reorder" && v == "OFF"));
    assert!(run
        .fields
        .iter()
        .any(|(k, v)| k == "rdma_cm QPs" && v == "OFF"));
    assert_eq!(run.local[0].qpn, Some(0x0128));
    assert_eq!(run.local[0].psn, Some(0x9c1a2e));
    assert_eq!(run.local[0].lid, Some(0));
    assert_eq!(run.local[0].rkey, Some(0x1fff00));
    assert_eq!(run.local[0].vaddr, Some(0x007f3e5c400000));
    assert_eq!(run.local[0].gid_ipv4.as_deref(), Some("10.0.0.1"));
    assert_eq!(run.remote[0].gid_ipv4.as_deref(), Some("10.0.0.2"));
    let row = &run.bw[0];
    assert_eq!((row.bytes, row.iterations), (65536, 5000));
    assert_eq!(row.peak_bps, mib(1_151_236));
    assert_eq!(row.avg_bps, mib(1_149_782));
    assert_eq!(row.avg_bps, 96_450_704_835);
    assert_eq!(row.msg_rate_per_s, Some(183_965));
    assert!(!run.truncated);
}

#[test]
fn perftest_report_gbits_all_sizes() {
    let r = perftest::parse(&fixture("perftest/write_bw_all_gbits.txt")).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.bw.len(), 23, "sizes 2 .. 2^23");
    let sizes: Vec<u64> = run.bw.iter().map(|b| b.bytes).collect();
    assert_eq!(sizes, (1..=23).map(|i| 1u64 << i).collect::<Vec<_>>());
    assert_eq!(
        run.bw[0].avg_bps, 67_031_000,
        "6-decimal form below 0.1 Gb/s"
    );
    assert_eq!(run.bw[0].peak_bps, 67_861_000);
    assert_eq!(run.bw[22].avg_bps, 97_660_000_000);
    assert_eq!(run.headline_bw().unwrap().bytes, 8_388_608);
    assert_eq!(run.device.as_deref(), Some("mlx5_1"));
}

#[test]
fn perftest_old_release_mb_label_without_msgrate() {
    let r = perftest::parse(&fixture("perftest/read_bw_old_mb.txt")).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.verb.as_deref(), Some("RDMA_Read"));
    assert_eq!(run.link_type.as_deref(), Some("IB"));
    assert_eq!(run.mtu_bytes, Some(2048));
    assert_eq!(run.local[0].lid, Some(3));
    assert_eq!(run.local[0].out_reads, Some(16));
    assert_eq!(run.remote[0].lid, Some(5));
    // "MB/sec" was always MiB/s.
    assert_eq!(run.bw[0].avg_bps, mib(324_290));
    assert_eq!(run.bw[0].msg_rate_per_s, None);
}

#[test]
fn perftest_both_ends_in_one_file_duration_mode() {
    let r = perftest::parse(&fixture("perftest/send_bw_duration_both_ends.txt")).unwrap();
    assert_eq!(r.runs.len(), 2);
    let (srv, cli) = (&r.runs[0], &r.runs[1]);
    assert_eq!(srv.side, perftest::Side::Server);
    assert_eq!(cli.side, perftest::Side::Client);
    assert_eq!(srv.tx_depth, None);
    for run in [srv, cli] {
        assert!(run.duration_mode);
        assert!(!run.peak_measured);
        assert_eq!(run.bw[0].peak_bps, 0);
    }
    assert_eq!(srv.bw[0].iterations, 1_843_290);
    assert_eq!(cli.bw[0].avg_bps, mib(1_152_066));
    assert_eq!(srv.local[0].gid_ipv4.as_deref(), Some("10.0.0.2"));
    assert_eq!(r.warnings.len(), 2);
}

#[test]
fn perftest_quoted_spaces_and_interleaved_warnings() {
    let r = perftest::parse(&fixture("perftest/write_bw_quoted_noisy.txt")).unwrap();
    assert_eq!(r.runs.len(), 1);
    let run = &r.runs[0];
    assert_eq!(
        run.device.as_deref(),
        Some("mlx5_2"),
        "space-separated columns"
    );
    assert_eq!(run.qps, Some(1));
    assert_eq!(
        run.bw.len(),
        1,
        "CPU frequency lines inside the table are skipped"
    );
    assert_eq!(run.bw[0].avg_bps, mib(1_118_802));
    assert_eq!(r.warnings.len(), 4);
    assert!(r
        .warnings
        .iter()
        .any(|(_, w)| w.starts_with("Conflicting CPU frequency")));
}

#[test]
fn perftest_excerpt_cut_mid_table() {
    let r = perftest::parse(&fixture("perftest/write_bw_truncated.txt")).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.title, None);
    assert_eq!(run.kind, perftest::TestKind::Bandwidth);
    assert_eq!(run.bw.len(), 2, "the cut third row is not invented");
    assert!(run.truncated);
    assert_eq!(run.bw[1].avg_bps, 130_000_000);
}

#[test]
fn perftest_latency_tables() {
    let r = perftest::parse(&fixture("perftest/write_lat.txt")).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.kind, perftest::TestKind::Latency);
    let l = &run.lat[0];
    assert_eq!((l.bytes, l.iterations), (2, 1000));
    assert_eq!(
        (l.min_ns, l.max_ns, l.typical_ns, l.avg_ns),
        (910, 3520, 940, 950)
    );
    assert_eq!(
        (l.stdev_ns, l.p99_ns, l.p999_ns),
        (Some(40), Some(1020), Some(3520))
    );

    let r = perftest::parse(&fixture("perftest/read_lat_duration.txt")).unwrap();
    let run = &r.runs[0];
    assert!(run.duration_mode);
    assert!(run.lat.is_empty());
    let d = &run.lat_duration[0];
    assert_eq!(
        (d.bytes, d.iterations, d.avg_ns, d.tps),
        (2, 2_753_911, 1090, 918_034)
    );
}

#[test]
fn perftest_atomic_sl_and_cpu_columns() {
    let r = perftest::parse(&fixture("perftest/atomic_bw.txt")).unwrap();
    assert_eq!(r.runs[0].verb.as_deref(), Some("Atomic"));
    assert_eq!(r.runs[0].bw[0].bytes, 8);
    assert_eq!(r.runs[0].bw[0].msg_rate_per_s, Some(8_928_461));

    let r = perftest::parse(&fixture("perftest/write_bw_sl_cpu_util.txt")).unwrap();
    let row = &r.runs[0].bw[0];
    assert_eq!(row.sl, Some(3));
    assert_eq!(row.bytes, 65536);
    assert_eq!(row.avg_bps, 96_120_000_000);
    assert_eq!(row.msg_rate_per_s, Some(183_340));
}

#[test]
fn perftest_completion_errors_old_and_new() {
    let r = perftest::parse(&fixture("perftest/write_bw_retry_exceeded_old.txt")).unwrap();
    let e = &r.errors[0];
    assert_eq!((e.status, e.vendor_err), (Some(12), Some(0x81)));
    assert_eq!(e.at.as_deref(), Some("client"));
    assert!(r.runs[0].bw.is_empty());

    let r = perftest::parse(&fixture("perftest/send_bw_retry_exceeded_new.txt")).unwrap();
    let e = &r.errors[0];
    assert_eq!(e.status, Some(12));
    assert_eq!(
        e.status_text.as_deref(),
        Some("transport retry counter exceeded")
    );
    assert_eq!(e.vendor_err, Some(0x81));
}

#[test]
fn perftest_errors_name_the_line() {
    let e = perftest::parse("hello\nworld\n").unwrap_err();
    assert_eq!(e.line, 1);
    let text = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n 65536 5000 1.0 1.0 0.1 7 8\n";
    let e = perftest::parse(text).unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.to_string().contains("line 2"), "{e}");
}

#[test]
fn ethtool_mlx5_single_dump_with_command_line() {
    let s = ethtool::parse(&fixture("ethtool/mlx5_single.txt")).unwrap();
    assert_eq!(s.len(), 1);
    let d = &s[0];
    assert_eq!(d.host.as_deref(), Some("enp65s0f0np0"));
    assert_eq!(d.vendor, ethtool::Vendor::Mlx5);
    assert_eq!(d.get("rx_prio3_pause"), Some(52012));
    assert_eq!(d.get("rx_prio3_pause_duration"), Some(310_455));
    assert_eq!(d.get("tx_prio3_pause"), Some(1803));
    assert_eq!(
        d.get("rx_prio0_pause"),
        None,
        "PFC rows only for PFC priorities"
    );
    assert_eq!(d.get("tx_pause_storm_error_events"), Some(0));
    assert_eq!(d.get("rx_bits_phy"), Some(30_504_000_000_000));
}

#[test]
fn ethtool_two_dumps_in_one_file() {
    let s = ethtool::parse(&fixture("ethtool/mlx5_two_dumps_date.txt")).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].time_ns, Some(1_764_693_600_000_000_000));
    assert_eq!(s[1].time_ns, Some(1_764_693_610_000_000_000));
    assert_eq!(s[1].label.as_deref(), Some("Tue Dec  2 16:40:10 UTC 2025"));
    assert_eq!(
        s[1].get("rx_prio3_bytes").unwrap() - s[0].get("rx_prio3_bytes").unwrap(),
        92_000_000_000
    );
    // Without headers: a repeated name starts the next dump.
    let s = ethtool::parse(&fixture("ethtool/mlx5_two_dumps_noheader.txt")).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].raw.len(), s[1].raw.len());
}

#[test]
fn ethtool_ice_and_bnxt_names_map_to_mlx5() {
    let s = ethtool::parse(&fixture("ethtool/ice.txt")).unwrap();
    let d = &s[0];
    assert_eq!(d.vendor, ethtool::Vendor::Ice);
    assert_eq!(d.get("rx_prio3_pause"), Some(1251));
    assert_eq!(d.get("tx_prio3_pause"), Some(17));
    assert_eq!(d.get("rx_prio3_pause_transition"), Some(1220));
    assert_eq!(d.get("rx_crc_errors_phy"), Some(4));
    assert_eq!(
        d.get("rx_priority_3_xoff.nic"),
        Some(1251),
        "raw names stay"
    );

    let s = ethtool::parse(&fixture("ethtool/bnxt.txt")).unwrap();
    let d = &s[0];
    assert_eq!(d.vendor, ethtool::Vendor::Bnxt);
    assert_eq!(d.get("rx_prio3_pause"), Some(5120));
    assert_eq!(d.get("tx_prio3_pause"), Some(64));
    assert_eq!(d.get("rx_prio3_pause_transition"), Some(2510));
    assert_eq!(d.get("rx_crc_errors_phy"), Some(2));
    assert_eq!(d.get("q1_rx_ucast_packets"), Some(40_987_654));
}

#[test]
fn ethtool_reads_the_simulator_format() {
    let s = ethtool::parse(&fixture("ethtool/sim_dump.txt")).unwrap();
    assert_eq!(s[0].host.as_deref(), Some("leaf0-h3"));
    assert_eq!(s[0].time_ns, Some(2_000_000), "time_ps 2e9 = 2 ms");
    assert_eq!(s[0].get("rx_prio3_pause_duration"), Some(248));
    assert_eq!(s[0].get("rx_prio3_bytes"), Some(245_760_000));
}

#[test]
fn ethtool_bad_value_names_line_and_counter() {
    let e = ethtool::parse(&fixture("ethtool/mlx5_bad_value.txt")).unwrap_err();
    assert_eq!(e.line, 3);
    assert!(e.expected.contains("rx_bytes"), "{e}");
    assert_eq!(ethtool::parse("").unwrap_err().line, 0);
}

#[test]
fn rdma_statistic_forms_agree() {
    let one = rdma::parse(&fixture("rdma/statistic_show.txt")).unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].links.len(), 2);
    assert_eq!(one[0].links[0].device, "mlx5_0");
    assert_eq!(one[0].links[0].port, 1);
    assert_eq!(one[0].links[0].counters["out_of_sequence"], 12);
    assert_eq!(one[0].links[1].counters["out_of_sequence"], 0);
    assert_eq!(one[0].total("np_cnp_sent"), Some(2 * 91_230));

    let pretty = rdma::parse(&fixture("rdma/statistic_pretty.txt")).unwrap();
    let sysfs = rdma::parse(&fixture("rdma/sysfs_grep.txt")).unwrap();
    let listing = rdma::parse(&fixture("rdma/show_counters.txt")).unwrap();
    let first = &one[0].links[0].counters;
    assert_eq!(&pretty[0].links[0].counters, first);
    assert_eq!(sysfs[0].links[0].device, "mlx5_2");
    assert_eq!(sysfs[0].links[0].counters["lifespan"], 12);
    for (k, v) in first {
        assert_eq!(sysfs[0].links[0].counters.get(k), Some(v), "{k}");
        assert_eq!(listing[0].links[0].counters.get(k), Some(v), "{k}");
    }
}

#[test]
fn rdma_snapshots_and_bnxt_names() {
    let s = rdma::parse(&fixture("rdma/two_snapshots.txt")).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[0].time_ns, Some(100_000_000_000));
    assert_eq!(
        s[1].total("rx_write_requests").unwrap() - s[0].total("rx_write_requests").unwrap(),
        21_800_000
    );
    let b = rdma::parse(&fixture("rdma/bnxt_re.txt")).unwrap();
    let c = &b[0].links[0].counters;
    assert_eq!(c["np_cnp_sent"], 812);
    assert_eq!(c["rp_cnp_handled"], 790);
    assert_eq!(c["np_ecn_marked_roce_packets"], 9120);
    assert_eq!(c["local_ack_timeout_err"], 6);
    assert_eq!(c["packet_seq_err"], 21);
    assert_eq!(c["out_of_sequence"], 40);
    let e = rdma::parse(&fixture("rdma/bad_value.txt")).unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.expected.contains("packet_seq_err"));
}

#[test]
fn topo_matrix_new_and_old_drivers() {
    let t = topo::parse(&fixture("topo/topo_m_new.txt")).unwrap();
    assert_eq!(t.devices, ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1"]);
    assert_eq!(t.link("GPU0", "GPU1"), Some(&topo::TopoLink::NvLink(18)));
    assert_eq!(t.link("GPU0", "NIC0"), Some(&topo::TopoLink::Pix));
    assert_eq!(t.link("GPU3", "NIC0"), Some(&topo::TopoLink::Sys));
    assert_eq!(t.nic_legend["NIC1"], "mlx5_1");
    assert_eq!(t.cpu_affinity["GPU2"], "48-95,144-191");
    let near = t.nearest_nics();
    assert_eq!(near.len(), 4);
    assert_eq!(near[1].link, topo::TopoLink::Pxb);
    assert_eq!(near[2].nic_device.as_deref(), Some("mlx5_1"));
    assert!(near.iter().all(|g| g.link.gdr_by_default()));

    let t = topo::parse(&fixture("topo/topo_m_old_driver.txt")).unwrap();
    assert_eq!(t.devices[4], "mlx5_0");
    assert_eq!(t.link("GPU1", "mlx5_0"), Some(&topo::TopoLink::Node));
    assert!(t.nearest_nics().iter().all(|g| !g.link.gdr_by_default()));

    let e = topo::parse(&fixture("topo/not_topo.txt")).unwrap_err();
    assert_eq!(e.line, 2);
}

#[test]
fn devinfo_and_ibstat() {
    let d = devinfo::parse(&fixture("devinfo/ibv_devinfo_v.txt")).unwrap();
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].name, "mlx5_0");
    assert_eq!(d[0].part_id, Some(4129));
    assert_eq!(d[0].fw_ver.as_deref(), Some("28.39.1002"));
    let p = &d[0].ports[0];
    assert!(p.active);
    assert_eq!((p.max_mtu, p.active_mtu), (Some(4096), Some(4096)));
    assert_eq!(p.link_layer.as_deref(), Some("Ethernet"));
    assert_eq!((p.width_lanes, p.lane_bps), (Some(4), Some(25_000_000_000)));
    assert_eq!(p.rate_bps, Some(100_000_000_000));
    assert_eq!(d[1].ports[0].rate_bps, Some(100_000_000_000), "2X x 50G");

    let s = devinfo::parse(&fixture("devinfo/ibstat.txt")).unwrap();
    assert_eq!(s[0].part_id, Some(4125));
    assert_eq!(s[0].ports[0].rate_bps, Some(100_000_000_000));
    assert!(s[0].ports[0].active);
    assert!(!s[1].ports[0].active);
    assert_eq!(s[1].ports[0].phys_state.as_deref(), Some("Disabled"));
}

#[test]
fn mlnx_qos_and_show_gids() {
    let q = qos::parse_mlnx_qos(&fixture("qos/mlnx_qos_dscp.txt")).unwrap();
    assert_eq!(q.trust.as_deref(), Some("dscp"));
    assert_eq!(q.dscp2prio[&26], 3);
    assert_eq!(q.dscp2prio[&48], 6);
    assert_eq!(q.dscp2prio.len(), 64);
    assert_eq!(q.pfc_priorities(), vec![3]);
    assert_eq!(q.buffer_bytes, vec![130_944, 130_944, 0, 0, 0, 0, 0, 0]);
    assert_eq!(q.cable_len, Some(7));
    assert_eq!(q.tcs.len(), 3);
    assert_eq!(q.tcs[1].priorities, vec![3]);
    assert_eq!(q.tcs[1].bw_percent, Some(50));
    assert_eq!(q.tcs[2].tsa.as_deref(), Some("strict"));
    let e = qos::parse_mlnx_qos(&fixture("qos/mlnx_qos_bad_pfc.txt")).unwrap_err();
    assert_eq!(e.line, 4);

    let g = qos::parse_show_gids(&fixture("qos/show_gids.txt")).unwrap();
    assert_eq!(g.len(), 4);
    assert_eq!(g[1].ipv4, None);
    assert_eq!(g[3].ipv4.as_deref(), Some("10.0.0.1"));
    assert_eq!(g[3].netdev.as_deref(), Some("enp65s0f0np0"));
    let v2: Vec<u32> = g
        .iter()
        .filter(|e| e.is_rocev2_ipv4())
        .map(|e| e.index)
        .collect();
    assert_eq!(v2, vec![3]);
}

#[test]
fn nccl_logs() {
    let n = nccl::parse(&fixture("nccl/nccl_gdr.txt")).unwrap();
    assert_eq!(n.version.as_deref(), Some("2.21.5+cuda12.4"));
    assert_eq!(n.network.as_deref(), Some("IB"));
    assert_eq!(n.net_devs.len(), 2);
    assert_eq!(n.net_devs[1].device, "mlx5_1");
    assert_eq!(n.net_devs[1].link, "RoCE");
    assert!(n.relaxed_ordering);
    assert_eq!(n.env["NCCL_IB_GID_INDEX"], "3");
    assert_eq!(n.env["NCCL_IB_TC"], "106");
    let net: Vec<_> = n.net_channels().collect();
    assert_eq!(net.len(), 4);
    assert!(net.iter().all(|c| c.gdr && c.transport == "NET/IB"));
    assert_eq!(net[1].net_dev, Some(1));
    assert_eq!((net[2].from_rank, net[2].to_rank), (Some(7), Some(8)));
    assert_eq!(net[2].direction.as_deref(), Some("send"));
    assert_eq!(n.channels[0].transport, "P2P/CUMEM");

    let n = nccl::parse(&fixture("nccl/nccl_no_gdr.txt")).unwrap();
    assert!(n.net_channels().all(|c| !c.gdr));

    let n = nccl::parse(&fixture("nccl/nccl_retry_exceeded.txt")).unwrap();
    assert_eq!(n.errors.len(), 2);
    assert!(n
        .errors
        .iter()
        .all(|e| e.status == Some(12) && e.vendor_err == Some(129)));
    assert_eq!(n.warn_lines, 2);

    let n = nccl::parse(&fixture("nccl/nccl_socket_fallback.txt")).unwrap();
    assert!(n.no_ib_device);
    assert_eq!(n.network.as_deref(), Some("Socket"));
}

#[test]
fn detection_picks_the_right_parser_for_every_fixture() {
    let cases: &[(&str, Kind)] = &[
        ("perftest/write_bw_client.txt", Kind::Perftest),
        ("perftest/write_bw_truncated.txt", Kind::Perftest),
        ("perftest/write_bw_quoted_noisy.txt", Kind::Perftest),
        ("perftest/read_lat_duration.txt", Kind::Perftest),
        ("ethtool/mlx5_single.txt", Kind::Ethtool),
        ("ethtool/mlx5_two_dumps_noheader.txt", Kind::Ethtool),
        ("ethtool/ice.txt", Kind::Ethtool),
        ("ethtool/bnxt.txt", Kind::Ethtool),
        ("ethtool/sim_dump.txt", Kind::Ethtool),
        ("rdma/statistic_show.txt", Kind::Rdma),
        ("rdma/statistic_pretty.txt", Kind::Rdma),
        ("rdma/sysfs_grep.txt", Kind::Rdma),
        ("rdma/show_counters.txt", Kind::Rdma),
        ("topo/topo_m_new.txt", Kind::Topo),
        ("topo/topo_m_old_driver.txt", Kind::Topo),
        ("devinfo/ibv_devinfo_v.txt", Kind::Devinfo),
        ("devinfo/ibstat.txt", Kind::Devinfo),
        ("qos/mlnx_qos_dscp.txt", Kind::MlnxQos),
        ("qos/show_gids.txt", Kind::ShowGids),
        ("nccl/nccl_gdr.txt", Kind::Nccl),
        ("nccl/nccl_socket_fallback.txt", Kind::Nccl),
        ("sim/results.json", Kind::SimResults),
    ];
    for (path, kind) in cases {
        let text = fixture(path);
        assert_eq!(detect(&text), Some(*kind), "{path}");
        let parsed = realnic::parse(None, &text).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(parsed.kind(), *kind);
    }
    assert_eq!(detect("just some words\nand more"), None);
    assert!(matches!(
        realnic::parse(None, "nothing here"),
        Err(realnic::Error::Undetected)
    ));
}

#[test]
fn rdma_per_qp_metadata_is_skipped_not_misread() {
    let text = "link mlx5_0/1 cntn 4 qp-type RC pid 30489 comm ib_write_bw lqpn 296 out_of_sequence 5 packet_seq_err 1\n";
    let s = rdma::parse(text).unwrap();
    let c = &s[0].links[0].counters;
    assert_eq!(c.len(), 2, "{c:?}");
    assert_eq!((c["out_of_sequence"], c["packet_seq_err"]), (5, 1));
}

#[test]
fn perftest_cycle_tables_are_not_read_as_time() {
    let text = "                    RDMA_Write Latency Test\n #bytes #iterations    t_min[cycles]    t_max[cycles]  t_typical[cycles]    t_avg[cycles]    t_stdev[cycles]   99% percentile[cycles]   99.9% percentile[cycles] \n 2       1000          2003           8123         2145     \t       2160        \t90   \t\t2400    \t\t8123   \n";
    let r = perftest::parse(text).unwrap();
    assert!(r.runs[0].latency_in_cycles);
    assert!(r.runs[0].lat.is_empty());
}

/// The doctor over one text, detected as a paste.
fn doctor_on(name: &str, text: &str) -> reports::doctor::Diagnosis {
    let parsed = realnic::parse(None, text).unwrap_or_else(|e| panic!("{name}: {e}"));
    reports::doctor::diagnose(
        &[reports::doctor::Input {
            name: name.into(),
            parsed,
        }],
        &reports::doctor::Options::default(),
    )
}

#[test]
fn kernel_log_after_a_prompt_line_is_read_with_its_host() {
    let text = "[root@gpu07 ~]# dmesg | grep mlx5\n\
[    2.101] mlx5_core 0000:3b:00.0: firmware version: 22.36.1010\n\
[    2.102] mlx5_core 0000:3b:00.0: 126.016 Gb/s available PCIe bandwidth, limited by 8.0 GT/s PCIe x16 link at 0000:3a:00.0 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)\n";
    assert_eq!(detect(text), Some(Kind::Events));
    let realnic::Parsed::Events(es) = realnic::parse(None, text).unwrap() else {
        panic!("not events")
    };
    assert_eq!(es.len(), 1);
    assert_eq!(es[0].host.as_deref(), Some("gpu07"));
    let p = es[0].pcie.as_ref().unwrap();
    assert_eq!(
        (p.available_mbps, p.capable_mbps),
        (Some(126_016), Some(252_048))
    );
    assert_eq!(
        (p.speed_mts, p.capable_speed_mts),
        (Some(8000), Some(16000))
    );
    let d = doctor_on("dmesg.txt", text);
    assert_eq!(d.findings[0].id, "pcie-degraded", "{}", d.render_text());
    assert!(
        d.findings[0].title.contains("126.016 Gb/s"),
        "{}",
        d.findings[0].title
    );
    // A healthy notice (no `limited by`) is no finding, and no event line
    // is no error either way.
    let ok = "$ dmesg\n[ 2.1] mlx5_core 0000:3b:00.0: 252.048 Gb/s available PCIe bandwidth (16.0 GT/s PCIe x16 link)\n";
    assert!(doctor_on("ok.txt", ok).findings.is_empty());
}

#[test]
fn kernel_driver_failures_flaps_and_prose() {
    let probe = "user@n1:~$ dmesg | grep mlx5\n[ 5.5] mlx5_core 0000:01:00.0: handle_hca_cap failed\n[ 5.6] mlx5_core: probe of 0000:01:00.0 failed with error -22\n";
    let d = doctor_on("probe.txt", probe);
    assert_eq!(d.findings[0].id, "driver-failure", "{}", d.render_text());
    // A link that goes down and up once at boot is no finding; three
    // times is a flapping link.
    let once = "[ 5.1] mlx5_core 0000:01:00.0 ens1f0: Link down\n[ 9.2] mlx5_core 0000:01:00.0 ens1f0: Link up\n";
    assert!(doctor_on("once.txt", once).findings.is_empty());
    let flaps = once.repeat(3);
    let d = doctor_on("flaps.txt", &flaps);
    assert_eq!(d.findings[0].id, "link-degraded", "{}", d.render_text());
    assert!(
        d.findings[0].title.contains("3 times"),
        "{}",
        d.findings[0].title
    );
    // Prose about a storm is not a kernel line.
    let prose = "The NIC driver logged a PFC pause storm and the link went down.\n";
    assert!(realnic::parse(Some(Kind::Events), prose).is_err());
}

#[test]
fn lspci_link_summaries_behind_pdsh_prefixes_are_read() {
    // `pdsh -w node[1-2] 'lspci -vv -s 3b:00.0 | grep Lnk'`: interleaved,
    // one host's link narrower than its capability without any
    // `(downgraded)` marker (older lspci).
    let text = "node1:\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n\
node2:\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM not supported\n\
node1:\t\tLnkSta:\tSpeed 16GT/s, Width x16, TrErr- Train- SlotClk+\n\
node2:\t\tLnkSta:\tSpeed 16GT/s, Width x8, TrErr- Train- SlotClk+\n";
    assert_eq!(detect(text), Some(Kind::Lspci));
    let realnic::Parsed::Lspci(links) = realnic::parse(None, text).unwrap() else {
        panic!("not lspci")
    };
    assert_eq!(links.len(), 2, "{links:?}");
    assert_eq!(links[1].sta_width, Some(8));
    assert!(!links[0].degraded() && links[1].degraded());
    let plain = realnic::paste::normalise(text);
    assert!(plain.starts_with("# host: node1\n"), "{plain}");
}

#[test]
fn switch_queue_counters_after_prompts_are_one_finding_on_the_switch_port() {
    let text = "admin@leaf1:~$ show queue counters Ethernet8\n\
     Port    TxQ    Counter/pkts    Counter/bytes    Drop/pkts    Drop/bytes\n\
---------  -----  --------------  ---------------  -----------  ------------\n\
Ethernet8    UC0             100             9000            0             0\n\
Ethernet8    UC3          500000        500000000        12000      12000000\n\
Ethernet8    MC8              10              900            0             0\n\
admin@leaf1:~$ show pfc counters\n";
    assert_eq!(detect(text), Some(Kind::Switch));
    let realnic::Parsed::Switch(r) = realnic::parse(None, text).unwrap() else {
        panic!("not switch")
    };
    assert_eq!(r.queues.len(), 3, "the prompt lines are no rows: {r:?}");
    let d = doctor_on("leaf1.txt", text);
    let f = &d.findings[0];
    assert_eq!(
        (f.id, f.severity),
        ("switch-congestion", reports::doctor::Severity::Warning),
        "{}",
        d.render_text()
    );
    assert!(
        f.affects.iter().any(|a| a == "Ethernet8 UC3"),
        "{:?}",
        f.affects
    );
    assert_eq!(f.origin.as_deref(), Some("Ethernet8"));
    assert!(f.title.contains("switch port Ethernet8"), "{}", f.title);
    let text = d.render_text();
    assert!(
        !text.contains("cannot drain") && !text.contains("PCIe") && !text.contains("PFC off"),
        "{text}"
    );
}

#[test]
fn nccl_tests_rows_are_read_by_their_header_with_tags_and_extra_columns() {
    let text = "[1,0]<stdout>:#                                                              out-of-place                       in-place\n\
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
[1,0]<stdout>:#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n\
[1,0]<stdout>:   134217728      33554432     float     sum      -1   1530.2   87.71  164.46      0   1524.9   88.02  165.03      0   graph=1\n\
[1,0]<stdout>:# Avg bus bandwidth    : 164.7\n";
    assert_eq!(detect(text), Some(Kind::NcclTests));
    let realnic::Parsed::NcclTests(t) = realnic::parse(None, text).unwrap() else {
        panic!("not nccl-tests")
    };
    let r = &t.rows[0];
    assert_eq!(
        (r.bytes, r.dtype.as_str(), r.redop.as_str()),
        (134_217_728, "float", "sum")
    );
    assert_eq!(
        (r.oop_busbw_mbps, r.ip_busbw_mbps),
        (Some(164_460), Some(165_030))
    );
    assert_eq!((r.oop_wrong, r.ip_wrong), (Some(0), Some(0)));
    assert_eq!(t.avg_busbw_mbps, Some(164_700));
    // In-place printed first, only its columns filled.
    let ip_first = "#   in-place   out-of-place\n#  size  count  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong\n  1048576  262144  28.1  37.25  65.19  0\n";
    let realnic::Parsed::NcclTests(t) = realnic::parse(None, ip_first).unwrap() else {
        panic!("not nccl-tests")
    };
    assert_eq!(
        (t.rows[0].ip_busbw_mbps, t.rows[0].oop_busbw_mbps),
        (Some(65_190), None)
    );
}

#[test]
fn topo_matrix_with_nv_rows_after_a_prompt_is_read() {
    let text = "\u{1b}[32muser@dgx:~$\u{1b}[0m nvidia-smi topo -m\r\n\
\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\r\n\
GPU0\t X \tNV12\tSYS\t0-31\t0\r\n\
GPU1\tNV12\t X \tSYS\t0-31\t0\r\n\
NIC0\tSYS\tSYS\t X \r\n\
\r\n\
NIC Legend:\r\n\
\r\n\
  NIC0: mlx5_0\r\n";
    assert_eq!(detect(text), Some(Kind::Topo));
    let realnic::Parsed::Topo(t) = realnic::parse(None, text).unwrap() else {
        panic!("not topo")
    };
    assert_eq!(
        t.link("GPU0", "GPU1"),
        Some(&topo::TopoLink::NvLink(12)),
        "{t:?}"
    );
    // GPUs whose nearest NIC is across the CPU interconnect.
    let d = doctor_on("topo.txt", text);
    assert_eq!(d.findings[0].id, "gdr-not-used", "{}", d.render_text());
}

#[test]
fn ice_pfc_counters_flattened_onto_one_line_map_onto_mlx5_names() {
    let text = "# ethtool -S enp175s0f0 | grep prio tx_priority_3_xon.nic: 1 tx_priority_3_xoff.nic: 6434 rx_priority_3_xon.nic: 0 rx_priority_3_xoff.nic: 0";
    assert_eq!(detect(text), Some(Kind::Ethtool));
    let realnic::Parsed::Ethtool(s) = realnic::parse(None, text).unwrap() else {
        panic!("not ethtool")
    };
    assert_eq!(s[0].host.as_deref(), Some("enp175s0f0"));
    assert_eq!(s[0].vendor, ethtool::Vendor::Ice);
    assert_eq!(s[0].counters.get("tx_prio3_pause"), Some(&6434));
    // The printed name is kept beside the mapped one.
    assert_eq!(s[0].raw.get("tx_priority_3_xoff.nic"), Some(&6434));
}

#[test]
fn pasted_shapes_read_like_the_tool_output() {
    let table = "DEV     PORT    INDEX   GID                                     IPv4            VER     DEV\n\
---     ----    -----   ---                                     ------------    ---     ---\n\
mlx5_0  1       3       0000:0000:0000:0000:0000:ffff:0a00:0001 10.0.0.1        v2      eth2\n";
    let want = qos::parse_show_gids(table).unwrap();
    // CRLF, colours, a fence and a prompt around the same table.
    let pasted = format!(
        "```\r\nroot@n1:~# show_gids\r\n{}```\r\n",
        table
            .lines()
            .map(|l| format!("\u{1b}[0m{l}\r\n"))
            .collect::<String>()
    );
    assert_eq!(detect(&pasted), Some(Kind::ShowGids));
    let realnic::Parsed::ShowGids(got) = realnic::parse(None, &pasted).unwrap() else {
        panic!("not show_gids")
    };
    assert_eq!(got.len(), want.len());
    assert_eq!(got[0].ipv4.as_deref(), Some("10.0.0.1"));
    assert_eq!(got[0].host.as_deref(), Some("n1"));
    // `==> file <==` headers name the host of each dump that follows.
    let two = "==> node1/ethtool.txt <==\nNIC statistics:\n     rx_prio3_pause: 5\n==> node2/ethtool.txt <==\nNIC statistics:\n     rx_prio3_pause: 7\n";
    let realnic::Parsed::Ethtool(s) = realnic::parse(None, two).unwrap() else {
        panic!("not ethtool")
    };
    let hosts: Vec<_> = s
        .iter()
        .map(|x| x.host.clone().unwrap_or_default())
        .collect();
    assert_eq!(hosts, ["node1", "node2"]);
    // Interleaved pdsh output is regrouped per host.
    let pdsh = "n1: NIC statistics:\nn2: NIC statistics:\nn1:      rx_prio3_pause: 5\nn2:      rx_prio3_pause: 9\n";
    let realnic::Parsed::Ethtool(s) = realnic::parse(None, pdsh).unwrap() else {
        panic!("not ethtool")
    };
    let got: Vec<_> = s
        .iter()
        .map(|x| {
            (
                x.host.clone().unwrap_or_default(),
                x.counters["rx_prio3_pause"],
            )
        })
        .collect();
    assert_eq!(got, [("n1".to_string(), 5), ("n2".to_string(), 9)]);
}

#[test]
fn perftest_latency_table_with_shortened_percentile_headers() {
    // A table re-typed in a post: no stdev column, `99%[usec]` for
    // `99% percentile[usec]`.
    let text = "#bytes #iterations  t_min[usec]  t_max[usec]  t_typical[usec]  t_avg[usec]  99%[usec]  99.9%[usec]\n\
                8       10000        0.93         3.52         0.99             1.00         1.15       1.40\n";
    let r = perftest::parse(text).unwrap();
    let row = &r.runs[0].lat[0];
    assert_eq!((row.bytes, row.iterations), (8, 10000));
    assert_eq!(row.typical_ns, 990);
    assert_eq!(row.avg_ns, 1000);
    assert_eq!(row.stdev_ns, None);
    assert_eq!((row.p99_ns, row.p999_ns), (Some(1150), Some(1400)));
}

/// `--out_json` reports of Debian's perftest 4.5 (`ib_write_bw` and
/// `ib_send_lat` over rocelab's libibverbs: unquoted keys and words,
/// trailing commas, `TX_depth : N`) read into the text parser's records.
#[test]
fn perftest_out_json_of_debians_perftest() {
    let text = fixture("perftest/out_json_debian45_write_bw_client.json");
    assert_eq!(detect(&text), Some(Kind::Perftest));
    let r = perftest_json::parse(&text).unwrap();
    assert_eq!(r.runs.len(), 1);
    let run = &r.runs[0];
    assert_eq!(run.title.as_deref(), Some("RDMA_Write_BW_Test"));
    assert_eq!(run.verb.as_deref(), Some("RDMA_Write"));
    assert_eq!(run.kind, perftest::TestKind::Bandwidth);
    assert_eq!(run.side, perftest::Side::Client);
    assert_eq!(run.device.as_deref(), Some("rocelab0"));
    assert_eq!(
        (run.qps, run.tx_depth, run.mtu_bytes, run.gid_index),
        (Some(1), Some(128), Some(4096), Some(0))
    );
    assert_eq!(run.connection.as_deref(), Some("RC"));
    assert_eq!(run.link_type.as_deref(), Some("Ethernet"));
    assert!(run.fields.contains(&("CQ_Moderation".into(), "1".into())));
    assert_eq!(run.bw.len(), 1);
    let row = &run.bw[0];
    assert_eq!((row.bytes, row.iterations), (65536, 200));
    assert_eq!(row.peak_bps, mib(136305));
    assert_eq!(row.avg_bps, mib(119170));
    assert_eq!(row.msg_rate_per_s, Some(19067));
    assert_eq!(row.line, 21, "the line of `results: {{`");
    assert!(run.counters.is_none());

    let r =
        perftest_json::parse(&fixture("perftest/out_json_debian45_send_lat_server.json")).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.kind, perftest::TestKind::Latency);
    assert_eq!(run.verb.as_deref(), Some("Send"));
    // perftest's server writes no TX depth.
    assert_eq!(run.side, perftest::Side::Unknown);
    let l = &run.lat[0];
    assert_eq!((l.bytes, l.iterations), (2, 200));
    assert_eq!(
        (l.min_ns, l.max_ns, l.typical_ns, l.avg_ns),
        (10_110, 111_380, 11_380, 23_450)
    );
    assert_eq!(
        (l.stdev_ns, l.p99_ns, l.p999_ns),
        (Some(22_380), Some(109_550), Some(111_380))
    );
}

/// rocelab perftest's `--out_json` report: perftest 4.5's shape with the
/// run's counter delta (`counters_seconds`, `counters`), which becomes
/// the run's counter block as in the text output.
#[test]
fn perftest_out_json_of_rocelab_with_its_counter_delta() {
    let text = fixture("perftest/out_json_rocelab_write_bw_client.json");
    assert_eq!(detect(&text), Some(Kind::Perftest));
    let r = perftest_json::parse(&text).unwrap();
    let run = &r.runs[0];
    let row = &run.bw[0];
    assert_eq!((row.bytes, row.iterations), (65536, 200));
    assert_eq!((row.peak_bps, row.avg_bps), (mib(199647), mib(155038)));
    assert_eq!(row.msg_rate_per_s, Some(24806));
    let c = run.counters.as_ref().expect("the counter delta");
    assert_eq!(c.device.as_deref(), Some("rocelab0"));
    assert_eq!(c.duration_ns, Some(8_886_000));
    assert_eq!(c.counters.len(), 27);
    assert_eq!(c.counters["tx_packets"], 3200);
    assert_eq!(c.counters["rx_packets"], 14);
    assert_eq!(c.counters["out_of_sequence"], 0);
}

/// perftest 6.x's report (`perftest_parameters.c`'s format strings:
/// quoted keys and strings, no trailing commas, valid JSON) is perftest,
/// not the simulator's results.json; a sequence of objects, the later
/// ones with a `results` array and no `test_info`, continues one run.
#[test]
fn perftest_out_json_of_perftest_6_and_sequences() {
    let text = fixture("perftest/out_json_v6_write_bw.json");
    assert!(serde_json::from_str::<serde_json::Value>(&text).is_ok());
    assert_eq!(detect(&text), Some(Kind::Perftest));
    let r = perftest_json::parse(&text).unwrap();
    let run = &r.runs[0];
    assert_eq!(run.device.as_deref(), Some("mlx5_0"));
    assert_eq!((run.qps, run.gid_index), (Some(2), Some(3)));
    let row = &run.bw[0];
    assert_eq!((row.bytes, row.iterations), (65536, 5000));
    assert_eq!((row.peak_bps, row.avg_bps), (mib(1103078), mib(1103045)));
    assert_eq!(row.msg_rate_per_s, Some(176_487));

    let r = perftest_json::parse(&fixture("perftest/out_json_v6_sequence_lat.json")).unwrap();
    assert_eq!(r.runs.len(), 1);
    let sizes: Vec<(u64, u64, u64)> = r.runs[0]
        .lat
        .iter()
        .map(|l| (l.bytes, l.typical_ns, l.p999_ns.unwrap()))
        .collect();
    assert_eq!(sizes, [(2, 1840, 9650), (4, 1860, 7120), (8, 1880, 6900)]);
}

/// A malformed report names the line, the key path and what was wanted.
#[test]
fn perftest_out_json_errors_name_line_key_and_expectation() {
    let good = fixture("perftest/out_json_debian45_write_bw_client.json");
    let bad = good.replace("BW_average: 1191.70,", "BW_average: fast,");
    let e = perftest_json::parse(&bad).unwrap_err();
    assert_eq!(e.line, 25, "{e}");
    assert!(
        e.to_string()
            .contains("results.BW_average: a bandwidth in MB/sec"),
        "{e}"
    );
    assert_eq!(e.found, "fast");
    let e = perftest_json::parse(&good.replace("MsgSize: 65536,", "")).unwrap_err();
    assert!(e.to_string().contains("results.MsgSize"), "{e}");
    let e = perftest_json::parse(&good.replace("n_iterations: 200,", "n_iterations: 2.5,"))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("results.n_iterations: an iteration count"),
        "{e}"
    );
    let cut = &good[..good.find("MsgRate").unwrap()];
    let e = perftest_json::parse(cut).unwrap_err();
    assert!(e.to_string().contains("closing '}'"), "{e}");
    let e = perftest_json::parse("{\nfoo: 1,\n}\n").unwrap_err();
    assert!(e.to_string().contains("test_info or results"), "{e}");
    let e = realnic::parse(
        Some(Kind::Perftest),
        &good.replace("Device: \"rocelab0\"", "Device: \"rocelab0"),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("line 5") && e.to_string().contains("closing '\"'"),
        "{e}"
    );
}
