//! The InfiniBand diagnostics, device configuration, switch pause and
//! multi-host GID parsers, on the real corpus outputs and on the other
//! shapes the same tools print.

use reports::realnic::{self, detect, devinfo, ethtool, qos, rdma, Kind, Parsed};

use crate::fixture;

fn devices(text: &str) -> Vec<devinfo::HcaInfo> {
    match realnic::parse(None, text).unwrap_or_else(|e| panic!("{e}")) {
        Parsed::Devinfo(d) => d,
        other => panic!("expected devinfo, got {:?}", other.kind()),
    }
}

#[test]
fn ibstatus_ports_state_rate_and_gid() {
    let d = devices(&fixture("corpus/ibstatus_roce_edr_gdr.txt"));
    assert_eq!(d.len(), 2);
    assert!(d.iter().all(|x| x.tool == "ibstatus"));
    let p = &d[1].ports[0];
    assert_eq!((d[1].name.as_str(), p.port), ("mlx5_1", 1));
    assert_eq!(p.state.as_deref(), Some("ACTIVE"));
    assert!(p.active);
    assert_eq!(p.phys_state.as_deref(), Some("LinkUp"));
    assert_eq!(p.rate_bps, Some(100_000_000_000));
    assert_eq!(p.width_lanes, Some(4));
    assert_eq!(p.link_layer.as_deref(), Some("Ethernet"));
    assert_eq!(
        p.attributes["default gid"],
        "fe80:0000:0000:0000:8ae9:a4ff:fe9c:7f1b"
    );
}

#[test]
fn ibportstate_width_speed_against_capability_and_peers() {
    let d = devices(&fixture("corpus/ibportstate_exadata_peer_qdr.txt"));
    let local = d.iter().find(|x| x.name == "Lid 2").unwrap();
    let p = &local.ports[0];
    assert_eq!(p.port, 9);
    assert_eq!((p.width_lanes, p.max_width_lanes), (Some(4), Some(4)));
    assert_eq!(
        (p.lane_bps, p.max_lane_bps),
        (Some(10_000_000_000), Some(10_000_000_000))
    );
    assert_eq!(p.rate_bps, Some(40_000_000_000));
    let peer = d
        .iter()
        .find(|x| x.name == "Lid 2 DR path slid 65535; dlid 65535; 0,9")
        .unwrap();
    assert_eq!(peer.ports[0].attributes["peer of"], "Lid 2 port 9");

    let d = devices(&fixture("corpus/ibportstate_exadata_ports_disabled.txt"));
    let ports: Vec<u32> = d[0].ports.iter().map(|p| p.port).collect();
    assert_eq!(ports, vec![24, 25, 26]);
    assert!(d[0].ports.iter().all(|p| !p.active));
    // Running SDR on a QDR-capable port: below capability.
    assert_eq!(d[0].ports[0].lane_bps, Some(2_500_000_000));
    assert_eq!(d[0].ports[0].max_lane_bps, Some(10_000_000_000));

    // The extended speed replaces `Extended speed`; ibstat in the same
    // file keeps its own devices.
    let d = devices(&fixture("corpus/ibportstate_then_ibstat_mlx4.txt"));
    let ps = d.iter().find(|x| x.tool == "ibportstate").unwrap();
    assert_eq!(ps.ports[0].lane_bps, Some(14_062_500_000));
    assert_eq!(ps.ports[0].attributes["Lid"], "38");
    let st = d.iter().find(|x| x.tool == "ibstat").unwrap();
    assert_eq!(st.ports.len(), 2);
    assert!(st.ports[0]
        .attributes
        .keys()
        .all(|k| !k.starts_with("LinkWidth") && !k.starts_with("LinkSpeed")));
}

#[test]
fn iblinkinfo_default_line_and_switch_forms() {
    let d = devices(&fixture("corpus/iblinkinfo_two_hcas_back_to_back.txt"));
    assert_eq!(d.len(), 2);
    let p = &d[1].ports[0];
    assert_eq!(d[1].name, "hostname mlx4_0");
    assert_eq!(p.attributes["port guid"], "0x0002c90300002f79");
    assert_eq!((p.attributes["lid"].as_str(), p.port), ("3", 1));
    assert_eq!(
        p.attributes["peer"],
        "MT25408 ConnectX Mellanox Technologies"
    );
    assert_eq!(
        (
            p.attributes["peer lid"].as_str(),
            p.attributes["peer port"].as_str()
        ),
        ("4", "1")
    );
    assert_eq!((p.width_lanes, p.lane_bps), (Some(4), Some(5_000_000_000)));
    assert_eq!(p.rate_bps, Some(20_000_000_000));

    let sw = "Switch: 0x506b4b0300820910 MF0;SB7700:MSB7700/U1:\n           2    1[  ] ==(                Down/ Polling)==>             [  ] \"\" ( )\n           2   17[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       4    1[  ] \"n02 HCA-1\" ( )\n";
    let d = devices(sw);
    assert_eq!(d[0].name, "MF0;SB7700:MSB7700/U1");
    assert_eq!(d[0].attributes["node guid"], "0x506b4b0300820910");
    assert_eq!(d[0].attributes["node type"], "Switch");
    let (down, up) = (&d[0].ports[0], &d[0].ports[1]);
    assert_eq!(
        (down.port, down.state.as_deref(), down.phys_state.as_deref()),
        (1, Some("Down"), Some("Polling"))
    );
    assert!(!down.attributes.contains_key("peer"));
    assert_eq!(up.port, 17);
    assert_eq!(up.lane_bps, Some(25_781_250_000));
    assert_eq!(up.attributes["peer"], "n02 HCA-1");

    let line = "0x0000000000200002 \"               hxa-su1-leaf-r1\"      4    1[  ] ==( 4X           2.5 Gbps Active/  LinkUp)==>  0x0000000000100002      5    1[  ] \"hxa-gpu01 mlx5_0\" (Could be 12X Could be 10.0 Gbps)\n";
    let d = devices(line);
    let p = &d[0].ports[0];
    assert_eq!(d[0].name, "hxa-su1-leaf-r1");
    assert_eq!(d[0].attributes["node guid"], "0x0000000000200002");
    assert_eq!(p.attributes["peer guid"], "0x0000000000100002");
    assert_eq!(p.attributes["peer"], "hxa-gpu01 mlx5_0");
    assert_eq!(
        (p.max_width_lanes, p.max_lane_bps),
        (Some(12), Some(10_000_000_000))
    );
    let fdr10 = "  223   33[  ] ==( 4X  10.0 Gbps (FDR10) Active/  LinkUp)==>     145    1[  ] \"gpfs-a4-005-p HCA-1\" ( )\n";
    assert_eq!(devices(fdr10)[0].ports[0].attributes["speed name"], "FDR10");
}

#[test]
fn rdma_link_and_dev_show() {
    let d = devices(&fixture("corpus/rdma_link_show_cx6dx_p1p.txt"));
    assert_eq!(d.len(), 2);
    assert_eq!(d[0].ports[0].attributes["netdev"], "p1p1");
    assert!(d[0].ports[0].active);
    let ib = "link mlx5_0/1 subnet_prefix fe80:0000:0000:0000 lid 13 sm_lid 1 lmc 0 state ACTIVE physical_state LINK_UP\n0: mlx5_0: node_type ca fw 20.31.1014 node_guid 1070:fd03:00e5:f1e6 sys_image_guid 1070:fd03:00e5:f1e6\n";
    assert_eq!(detect(ib), Some(Kind::Devinfo));
    let d = devices(ib);
    let link = d.iter().find(|x| x.tool == "rdma link").unwrap();
    assert_eq!(link.ports[0].attributes["lid"], "13");
    assert_eq!(link.ports[0].phys_state.as_deref(), Some("LINK_UP"));
    let dev = d.iter().find(|x| x.tool == "rdma dev").unwrap();
    assert_eq!(dev.fw_ver.as_deref(), Some("20.31.1014"));
    assert_eq!(dev.attributes["node_guid"], "1070:fd03:00e5:f1e6");
    // `rdma statistic` lines stay counters.
    assert_eq!(
        detect("link mlx5_0/1 rx_write_requests 0 out_of_sequence 3\n"),
        Some(Kind::Rdma)
    );
}

#[test]
fn mlxconfig_header_and_every_parameter() {
    let d = devices(&fixture("corpus/mlxconfig_set_cx6_boot_vlan.txt"));
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].name, "c2:00.0");
    assert_eq!(d[0].attributes["Device type"], "ConnectX6");
    assert_eq!(d[0].config.len(), 4);
    assert_eq!(d[0].config[0].values["Next Boot"], "1");
    assert_eq!(d[0].config[0].values["New"], "0");
    let three = "Device #1:\n----------\n\nDevice type:    ConnectX5\nDevice:         0000:3b:00.0\n\nConfigurations:                                      Default         Current         Next Boot\n         NUM_OF_VFS                                  0               16              16\n*        SRIOV_EN                                    False(0)        True(1)         True(1)\n         PHY_FEC_OVERRIDE_P1                         DEVICE_DEFAULT(0) DEVICE_DEFAULT(0) DEVICE_DEFAULT(0)\nThe '*' shows parameters with next value different from default/current value.\n";
    let d = devices(three);
    let c = &d[0].config;
    assert_eq!(c.len(), 3);
    assert_eq!(
        (c[0].name.as_str(), c[0].current()),
        ("NUM_OF_VFS", Some("16"))
    );
    assert_eq!(c[0].values["Default"], "0");
    assert!(c[1].modified && !c[0].modified);
    assert_eq!(c[2].values["Next Boot"], "DEVICE_DEFAULT(0)");
    let array = "Configurations:                              Next Boot\n        MODULE_SPLIT_M0[0]                  1\n        MODULE_SPLIT_M0[1]                  1\n";
    let d = devices(array);
    assert_eq!(d[0].config[1].name, "MODULE_SPLIT_M0[1]");
}

#[test]
fn perfquery_blocks_per_port_and_snapshots() {
    let s = rdma::parse(&fixture("corpus/perfquery_x_busy_port.txt")).unwrap();
    let l = &s[0].links[0];
    assert_eq!((l.device.as_str(), l.port), ("Lid 21", 1));
    assert_eq!(l.raw["PortRcvData"], 2_341_975_277_576);
    assert!(!l.raw.contains_key("CounterSelect") && !l.raw.contains_key("PortSelect"));
    let two = "# Port counters: Lid 5 port 1 (CapMask: 0x1400)\nPortSelect:......................1\nPortXmitWait:....................100\n# Port counters: Lid 5 port 2 (CapMask: 0x1400)\nPortSelect:......................2\nPortXmitWait:....................7\n# Port counters: Lid 5 port 1 (CapMask: 0x1400)\nPortXmitWait:....................160\n";
    assert_eq!(detect(two), Some(Kind::Rdma));
    let s = rdma::parse(two).unwrap();
    assert_eq!(s.len(), 2, "port 1 seen again starts a second snapshot");
    assert_eq!(s[0].links.len(), 2);
    assert_eq!(s[0].links[1].raw["PortXmitWait"], 7);
    assert_eq!(s[1].links[0].raw["PortXmitWait"], 160);
    // Without a header, PortSelect names the port.
    let bare = "PortSelect:......................3\nSymbolErrorCounter:..............12\n";
    assert_eq!(rdma::parse(bare).unwrap()[0].links[0].port, 3);
}

#[test]
fn cumulus_and_nvue_pause_counters_use_mlx5_names() {
    let s = ethtool::parse(&fixture("corpus/nvue_qos_counters_swp1.txt")).unwrap();
    assert_eq!(s.len(), 1, "one NVUE dump is one snapshot");
    assert_eq!(s[0].host.as_deref(), Some("swp1"));
    assert_eq!(s[0].vendor, ethtool::Vendor::Cumulus);
    assert_eq!(s[0].get("rx_prio3_pause"), Some(0));
    assert_eq!(s[0].get("tx_prio7_pause_duration"), Some(0));
    assert_eq!(s[0].raw.len(), 8 * 3 + 8 * 4 + 8 * 4 + 4);
    let pfc = "cumulus@leaf01:mgmt:~$ nv show interface swp7 counters qos pfc-stats\nswitch-priority  rx-pause-frames  rx-pause-duration  tx-pause-frames  tx-pause-duration\n---------------  ---------------  -----------------  ---------------  -----------------\n0                0                0                  0                0\n3                1200             5400               17               80\n";
    assert_eq!(detect(pfc), Some(Kind::Ethtool));
    let s = ethtool::parse(pfc).unwrap();
    assert_eq!(s[0].host.as_deref(), Some("swp7"));
    assert_eq!(s[0].get("rx_prio3_pause"), Some(1200));
    assert_eq!(s[0].get("rx_prio3_pause_duration"), Some(5400));
    assert_eq!(s[0].get("tx_prio3_pause"), Some(17));
    let eth = "cumulus@switch:~$ sudo ethtool -S swp3 | grep Pfc\n     HwIfInPfc3Pkt: 981\n     HwIfOutPfc3Pkt: 12\n     HwIfInPausePkt: 0\n";
    let s = ethtool::parse(eth).unwrap();
    assert_eq!(s[0].host.as_deref(), Some("swp3"));
    assert_eq!(
        (s[0].get("rx_prio3_pause"), s[0].get("tx_prio3_pause")),
        (Some(981), Some(12))
    );
    assert_eq!(s[0].vendor, ethtool::Vendor::Cumulus);
}

#[test]
fn show_gids_of_several_hosts_keeps_each_host() {
    let row = |i: u32, ip: &str, v: &str| {
        format!("mlx5_bond_0\t1\t{i}\t0000:0000:0000:0000:0000:ffff:1e99:0aaf\t{ip}\t{v}\tbond1")
    };
    let header = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV";
    let forms = [
        // pdsh / clush: every line prefixed with the host.
        format!(
            "node1: {header}\nnode1: {}\nnode2: {header}\nnode2: {}\n",
            row(3, "30.153.10.175", "v2"),
            row(5, "30.153.10.176", "v2")
        ),
        // tail -n +1 of one file per host.
        format!(
            "==> node1 <==\n{header}\n{}\n\n==> node2 <==\n{header}\n{}\n",
            row(3, "30.153.10.175", "v2"),
            row(5, "30.153.10.176", "v2")
        ),
        // host: lines between the tables.
        format!(
            "host: node1\n{header}\n{}\nhost: node2\n{header}\n{}\n",
            row(3, "30.153.10.175", "v2"),
            row(5, "30.153.10.176", "v2")
        ),
        // prompts and ssh.
        format!(
            "[root@node1 ~]# show_gids\n{header}\n{}\n$ ssh root@node2 show_gids\n{header}\n{}\n",
            row(3, "30.153.10.175", "v2"),
            row(5, "30.153.10.176", "v2")
        ),
    ];
    for text in &forms {
        assert_eq!(detect(text), Some(Kind::ShowGids), "{text}");
        let g = qos::parse_show_gids(text).unwrap();
        assert_eq!(g.len(), 2, "{text}");
        assert_eq!(
            (g[0].host.as_deref(), g[0].index),
            (Some("node1"), 3),
            "{text}"
        );
        assert_eq!(
            (g[1].host.as_deref(), g[1].index),
            (Some("node2"), 5),
            "{text}"
        );
        assert_eq!(g[1].ipv4.as_deref(), Some("30.153.10.176"));
        assert_eq!(g[1].netdev.as_deref(), Some("bond1"));
    }
}

#[test]
fn explicit_kind_names_of_the_new_tools() {
    for (name, kind) in [
        ("ibstatus", Kind::Devinfo),
        ("ibportstate", Kind::Devinfo),
        ("iblinkinfo", Kind::Devinfo),
        ("rdma-link", Kind::Devinfo),
        ("mlxconfig", Kind::Devinfo),
        ("perfquery", Kind::Rdma),
        ("nvue", Kind::Ethtool),
    ] {
        assert_eq!(name.parse::<Kind>().unwrap(), kind, "{name}");
    }
    let e = devinfo::parse("nothing of the kind\n").unwrap_err();
    assert_eq!(e.line, 1);
    assert!(e.expected.contains("ibstatus") && e.expected.contains("mlxconfig"));
}

#[test]
fn switch_sdk_dump_per_priority_pause_and_duration() {
    let s = ethtool::parse(&fixture("corpus/switch_sdk_prio_pause_duration.txt")).unwrap();
    assert_eq!(
        s.len(),
        1,
        "both counter groups of one port are one snapshot"
    );
    assert_eq!(s[0].vendor, ethtool::Vendor::SwitchSdk);
    assert_eq!(s[0].host.as_deref(), Some("0x10500"));
    assert_eq!(s[0].get("rx_prio3_pause"), Some(1234));
    assert_eq!(s[0].get("rx_prio3_pause_duration"), Some(85_558));
    assert_eq!(s[0].raw["a_octets_received_ok"], 78_976);
    let two = "Port 0x10500 - IEEE 802.3 Counters Group\n====\na_frames_received_ok = 1\n\nPort 0x10700 - IEEE 802.3 Counters Group\n====\na_frames_received_ok = 2\nPrio 4\n----\ntx_pause = 9\ntx_pause_duration = 0x10\n";
    assert_eq!(detect(two), Some(Kind::Ethtool));
    let s = ethtool::parse(two).unwrap();
    assert_eq!(s.len(), 2);
    assert_eq!(s[1].host.as_deref(), Some("0x10700"));
    assert_eq!(s[1].get("tx_prio4_pause"), Some(9));
    assert_eq!(s[1].get("tx_prio4_pause_duration"), Some(16));
    let bad = "Port 0x10500 - IEEE 802.3 Counters Group\nrx_pause = many\n";
    let e = ethtool::parse(bad).unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.expected.contains("rx_pause"));
}

#[test]
fn rdma_statistic_wrapped_by_a_mail_client_is_one_link() {
    // `rdma stat show` as pasted into a patch mail, wrapped at 72 columns.
    let text = "[leonro@server ~]$ rdma stat show\nlink mlx5_0/1 rx_write_requests 0 rx_read_requests 0 rx_atomic_requests\n0 out_of_buffer 0 duplicate_request 0 rnr_nak_retry_err 0 packet_seq_err\n0 implied_nak_seq_err 0 local_ack_timeout_err 0 resp_local_length_error\n0 resp_cqe_error 0 req_cqe_error 0 req_remote_invalid_request 0\nreq_remote_access_errors 0 resp_remote_access_errors 0\nresp_cqe_flush_error 0 req_cqe_flush_error 0 rp_cnp_ignored 0\nrp_cnp_handled 0 np_ecn_marked_roce_packets 7 np_cnp_sent 5\n\n[leonro@server ~]$ rdma stat show -p\nlink mlx5_0/1\n\trx_write_requests 0\n\tnp_cnp_sent 6\n";
    assert_eq!(detect(text), Some(Kind::Rdma));
    let s = rdma::parse(text).unwrap();
    assert_eq!(
        s.len(),
        2,
        "the -p dump repeats the link: a second snapshot"
    );
    let l = &s[0].links[0];
    assert_eq!(l.raw.len(), 21, "{:?}", l.raw.keys().collect::<Vec<_>>());
    assert_eq!(l.raw["np_ecn_marked_roce_packets"], 7);
    assert_eq!(l.raw["np_cnp_sent"], 5);
    assert_eq!(l.raw["resp_local_length_error"], 0);
    assert_eq!(s[1].links[0].raw["np_cnp_sent"], 6);
}

#[test]
fn perfquery_other_counter_groups_name_their_link() {
    let text = "# PortXmitDataSL counters: Lid 7 port 3\nXmtDataSL0:......................100\nXmtDataSL3:......................25\n";
    assert_eq!(detect(text), Some(Kind::Rdma));
    let s = rdma::parse(text).unwrap();
    let l = &s[0].links[0];
    assert_eq!((l.device.as_str(), l.port), ("Lid 7", 3));
    assert_eq!(l.raw["XmtDataSL3"], 25);
}

#[test]
fn netq_ethtool_stats_tables_per_switch_port() {
    // `netq leaf01 show ethtool-stats port swp50 tx extended` and `rx
    // extended`, as NetQ prints them (columns trimmed to the PFC ones).
    let text = "cumulus@switch:~$ netq leaf01 show ethtool-stats port swp50 tx extended\n\nMatching ethtool_stats records:\nHostname          Interface                 HwIfOutPfc0Pkt       HwIfOutPfc3Pkt       HwIfOutWredDrops     Last Updated\n----------------- ------------------------- -------------------- -------------------- -------------------- ------------------------\nleaf01            swp50                     0                    412                  0                    Tue Apr 28 22:09:57 2020\n\ncumulus@switch:~$ netq leaf01 show ethtool-stats port swp50 rx extended\n\nMatching ethtool_stats records:\nHostname          Interface                 HwIfInPfc0Pkt        HwIfInPfc3Pkt        Last Updated\n----------------- ------------------------- -------------------- -------------------- ------------------------\nleaf01            swp50                     0                    17                   Tue Apr 28 22:09:25 2020\nleaf02            swp49                     0                    3                    Tue Apr 28 22:09:25 2020\n";
    assert_eq!(detect(text), Some(Kind::Ethtool));
    let s = ethtool::parse(text).unwrap();
    assert_eq!(s.len(), 2, "tx and rx tables of one port are one snapshot");
    assert_eq!(s[0].host.as_deref(), Some("leaf01:swp50"));
    assert_eq!(s[0].vendor, ethtool::Vendor::Cumulus);
    assert_eq!(
        (s[0].get("tx_prio3_pause"), s[0].get("rx_prio3_pause")),
        (Some(412), Some(17))
    );
    assert_eq!(s[0].raw["HwIfOutWredDrops"], 0);
    assert_eq!(s[1].host.as_deref(), Some("leaf02:swp49"));
    assert_eq!(s[1].get("rx_prio3_pause"), Some(3));
}
