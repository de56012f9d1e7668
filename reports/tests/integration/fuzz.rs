//! No parser, detector or the doctor panics on arbitrary text.

use proptest::prelude::*;
use reports::doctor::{diagnose, Input, Options};
use reports::realnic::{self, ibdiag, qos, Kind};

/// Fragments of every format, so that random lines reach deep parser
/// states, not only the "unknown format" exit.
const FRAGMENTS: &[&str] = &[
    "NIC statistics:",
    "     rx_prio3_pause: 12",
    "     tx_prio3_pause_duration: 99999999999999999999",
    "     rx_bytes: -1",
    "# host: h1",
    "     rx_prio3_bytes: 18446744073709551615",
    "     tx_prio3_bytes: 18446744073709551615",
    "     rx_prio3_pause_duration: 18446744073709551615",
    "     rx_vport_rdma_unicast_bytes: 18446744073709551615",
    "     tx_vport_rdma_unicast_bytes: 18446744073709551615",
    "     rx_priority_3_xoff.nic: 18446744073709551615",
    "     rx_pfc_ena_frames_pri3: 18446744073709551615",
    "link mlx5_1/1 np_cnp_sent 18446744073709551615 out_of_sequence 18446744073709551615",
    "link mlx5_2/1 np_cnp_sent 18446744073709551615 packet_seq_err 18446744073709551615",
    "link mlx5_0/1 cntn 4 qp-type RC pid 77 comm ib_write_bw optional-counters",
    " #bytes #iterations    t_min[cycles]    t_max[cycles]  t_typical[cycles]",
    "ésumé：★ 65536 5000",
    "# time: 1.5",
    "# time_ps: 18446744073709551615",
    "1764693600",
    "link mlx5_0/1 out_of_sequence 3 np_cnp_sent",
    "link mlx5_0/x",
    "    rx_write_requests 1 np_ecn_marked_roce_packets 2",
    "/sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence:7",
    "Port 1 hw counters:",
    "                    RDMA_Write BW Test",
    " Mtu             : 4096[B]",
    " Number of qps   : 1\t\tTransport type : IB",
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]",
    " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]",
    " #bytes        #iterations       t_avg[usec]    tps average",
    " 65536      5000             97.41              97.39 \t\t     0.185757",
    " 2 1000 0.91 3.52 0.94 0.95",
    " local address: LID 0000 QPN 0x0128 PSN 0x9c1a2e RKey",
    " GID: 00:00:00:00:00:00:00:00:00:00:255:255:10:00:00:999",
    " Failed status-x (: wr_id syndrom 0x",
    "---------------------------------------------------------------------------------------",
    "> > ",
    "\tGPU0\tGPU1\tNIC0",
    "GPU0\tX\tNV18\tPIX",
    "NIC Legend:",
    "  NIC0: mlx5_0",
    "hca_id:\tmlx5_0",
    "\t\tport:\t1",
    "\t\t\tactive_speed:\t\t25.0 Gbps (32)",
    "\t\t\tactive_width:\t\t4X (2)",
    "CA 'mlx5_1'",
    "\t\tRate: 100",
    "Priority trust state: dscp",
    "\tprio:3 dscp:31,30,29,28,27,26,25,24,",
    "\tenabled     0   0   0   1   0   0   0   0",
    "tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%",
    "mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1\tv2\teth0",
    "n_gids_found=4",
    "h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [x]; OOB",
    "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/3(5)/GDRDMA",
    "h:1:1 [0] NCCL WARN NET/IB : Got completion from peer with status=",
    "{\"variants\":[{\"summary\":{\"goodput_bps\":1e400}}]}",
    "{\"variants\":[{\"summary\":{\"goodput_bps\":1,\"variant\":\"v\",\"sim_time_ps\":18446744073709551615},\"ports\":[{\"node\":\"leaf0\",\"port\":9,\"peer\":\"leaf0\",\"is_nic\":false,\"rx_discards\":18446744073709551615,\"prio\":[{\"tx_pause\":5,\"rx_pause\":18446744073709551615,\"rx_pause_duration_ps\":18446744073709551615}]}],\"flows\":[{\"id\":1,\"src\":\"a\",\"dst\":\"b\"}],\"nics\":[{\"node\":\"h0\",\"out_of_sequence\":4}]}]}",
    "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
    "     1048576        262144     float     sum      -1    28.15   37.25   65.19      0    27.52   38.10   66.67      0",
    "           8             2     float     sum      -1    42.56    0.00",
    "#  Rank  0 Group  0 Pid  28307 on      gpu59 device  0 [0x16] NVIDIA GeForce RTX 4090",
    "# Avg bus bandwidth    : 99999999999999999999.9",
    "      QUEUE    STATUS    STORM DETECTED/RESTORED      TX OK/DROP    RX OK/DROP    TX LAST OK/DROP    RX LAST OK/DROP",
    "Ethernet0:3   stormed          18446744073709551615/0   1/2   3/4",
    "  Port Rx    PFC0    PFC1    PFC2    PFC3",
    "  Port Tx    PFC0    PFC1    PFC2    PFC3",
    "Ethernet0       0       0       0   12,345,678,901,234,567,890",
    "     Port    TxQ    Counter/pkts    Counter/bytes    Drop/pkts    Drop/bytes",
    "Ethernet0    UC3           1,234           5,678           N/A           9",
    "3b:00.0 Ethernet controller: Mellanox Technologies MT28908 Family [ConnectX-6]",
    "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16",
    "\t\tLnkSta:\tSpeed 2.5GT/s (downgraded), Width x99999999999999999999 (downgraded)",
    "Settings for enp59s0f0:",
    "\tSupported link modes:   100000baseCR4/Full 99999999999999999999999baseX",
    "\tSpeed: 25000Mb/s",
    "\tLink detected: no",
    "Pause parameters for eth0:",
    "RX:\t\ton",
    "[compute001:31180:0:31180] ib_mlx5_log.c:143  Transport retry count exceeded on mlx5_0:1/RoCE (synd 0x15",
    "mlx5_core 0000:3b:00.0 enp59s0f0: Link down",
    "ice 0000:5e:00.0: PCIe Bus Error: severity=Corrected",
    "Infiniband device 'mlx5_0' port 1 status:",
    "        rate:            99999999999999999999 Gb/sec (4X EDR)",
    "        state:           4: ACTIVE",
    "        phys state:      :",
    "# Port info: Lid 2 DR path slid 65535; dlid 65535; 0,8 port 2",
    "# Port info: port",
    "Peer PortInfo:",
    "LinkWidthSupported:..............1X or 99999999999X",
    "LinkSpeedExtActive:..............14.0625 Gbps",
    "LinkSpeedSupported:..............Gbps or 1e9 Gbps",
    "LinkState:.......................Active",
    "CA: n02 HCA-1:",
    "Switch: 0x506b4b0300820910 MF0;SB7700:MSB7700/U1:",
    "           2   17[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       4    1[  ] \"n02 HCA-1\" (Could be 12X Could be 99999999999999999999 Gbps)",
    "  ==(  )==> \" [ \" ( ",
    ")==> ==( / [",
    "0x1 \"a\" 1 99999999999[ ] ==( Down/ Polling)==> [  ] \"\" ( )",
    "link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev",
    "link mlx5_0/99999999999 subnet_prefix fe80:0000:0000:0000 lid 13 state",
    "0: mlx5_0: node_type ca fw 20.31.1014 node_guid",
    "Device #1:",
    "Device:             c2:00.0",
    "Configurations:                                          Default             Current         Next Boot",
    "*        SRIOV_EN                                    False(0)        True(1)         True(1)",
    "         NUM_OF_VFS",
    "# Port extended counters: Lid 21 port 99999999999 (CapMask: 0x1600",
    "PortXmitData:....................18446744073709551615",
    "PortSelect:......................99999999999",
    "CounterSelect:...................0xzz",
    "cumulus@switch:~$ nv show interface swp1 counters qos",
    "    switch-priority  rx-pause-frames  rx-pause-duration  tx-pause-frames  tx-pause-duration",
    "    3                18446744073709551615                0                  0                0",
    "    Counter             Receive  Transmit",
    "    pause-frames        n/a        18446744073709551615",
    "    priority-group  rx-frames  rx-buffer-discards  rx-shared-buffer-discards",
    "    255               0          0 Bytes             0 Bytes",
    "     HwIfInPfc3Pkt: 18446744073709551615",
    "     HwIfOutPfc9Pkt: 1",
    "node1: DEV\tPORT\tINDEX\tGID\tIPv4\tVER\tDEV",
    "node1: mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a00:0001\t10.0.0.1\tv2\teth0",
    "==> node2 <==",
    "[root@node1 ~]# show_gids",
    "$ ssh show_gids",
    "host: ",
    "Port 0x10500 - IEEE 802.3 Counters Group",
    "Port  - Counters Group",
    "Prio 3",
    "Prio 99999999999",
    "rx_pause_duration = 18446744073709551615",
    "rx_pause = 0xffffffffffffffffff",
    "==================================================",
    "Hostname          Interface                 HwIfInPfc0Pkt        HwIfInPfc3Pkt        Last Updated",
    "leaf01            swp50                     0                    18446744073709551615 Tue Apr 28 22:09:25 2020",
    "leaf01            swp50",
    "root@node2$ mlxconfig -d /dev/mst/mt4123_pciconf5 q | grep -e NUM_OF_VFS",
    "mstconfig q -d",
    "         NUM_OF_VFS                          8",
];

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(FRAGMENTS).prop_map(str::to_string),
        1 => "\\PC{0,40}",
        1 => "[ \\t:>#0-9a-z_./\\[\\]-]{0,40}",
    ]
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(line(), 0..40).prop_map(|v| v.join("\n")),
        "\\PC{0,400}",
        ".{0,400}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn no_parser_panics(input in text()) {
        let _ = realnic::detect(&input);
        for kind in Kind::ALL {
            let _ = realnic::parse(Some(kind), &input);
        }
        // Every parser of a kind that runs several, on its own.
        let _ = ibdiag::parse_ibstatus(&input);
        let _ = ibdiag::parse_ibportstate(&input);
        let _ = ibdiag::parse_iblinkinfo(&input);
        let _ = ibdiag::parse_rdma_link(&input);
        let _ = ibdiag::parse_mlxconfig(&input);
        let _ = qos::parse_show_gids(&input);
        if let Ok(parsed) = realnic::parse(None, &input) {
            let _ = serde_json::to_string(&parsed);
            let d = diagnose(&[Input { name: "x".into(), parsed }], &Options::default());
            let _ = d.render_text();
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        let input = String::from_utf8_lossy(&bytes);
        for kind in Kind::ALL {
            let _ = realnic::parse(Some(kind), &input);
        }
        let _ = ibdiag::parse_ibstatus(&input);
        let _ = ibdiag::parse_ibportstate(&input);
        let _ = ibdiag::parse_iblinkinfo(&input);
        let _ = ibdiag::parse_rdma_link(&input);
        let _ = ibdiag::parse_mlxconfig(&input);
        let loaded = reports::doctor::load(&[std::path::PathBuf::from("-")], &mut bytes.as_slice());
        let d = diagnose(&loaded.inputs, &Options::default());
        let _ = d.render_text();
    }

    #[test]
    fn doctor_never_panics_on_pairs(a in text(), b in text()) {
        let inputs: Vec<Input> = [a, b]
            .iter()
            .filter_map(|t| realnic::parse(None, t).ok())
            .map(|parsed| Input { name: "x".into(), parsed })
            .collect();
        let d = diagnose(&inputs, &Options { interval: Some(roce::time::Duration::from_ps(1)) });
        let _ = d.render_text();
    }
}

#[test]
fn non_rdma_text_is_rejected_with_a_clear_message() {
    for text in [
        "Hello, this is a letter.\nBest regards: Anna\n",
        "name: rocelab\nversion: 3\nauthors: 2\n",
        "fn main() {\n    println!(\"hi\");\n}\n",
        "<!doctype html><html><body>report</body></html>",
        "",
    ] {
        let e = realnic::parse(None, text).unwrap_err().to_string();
        assert!(e.starts_with("not RDMA tool output"), "{text:?}: {e}");
        assert!(e.contains("ethtool -S") && e.contains("nccl-tests"), "{e}");
    }
}

/// A reader of `len` bytes of noise (no NUL, so it is not told apart as
/// binary at once) that counts what was read from it.
struct Noise {
    left: u64,
    state: u64,
    read: std::rc::Rc<std::cell::Cell<u64>>,
}

impl std::io::Read for Noise {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        for b in &mut buf[..n] {
            self.state = self
                .state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            *b = (self.state >> 33) as u8 | 1;
        }
        self.left -= n as u64;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

#[test]
fn a_gigabyte_of_noise_on_standard_input_is_refused_in_bounded_time_and_memory() {
    let read = std::rc::Rc::new(std::cell::Cell::new(0));
    let mut noise = Noise {
        left: 1 << 30,
        state: 7,
        read: read.clone(),
    };
    let t = std::time::Instant::now();
    let loaded = reports::doctor::load(&[std::path::PathBuf::from("-")], &mut noise);
    assert!(loaded.inputs.is_empty());
    assert_eq!(loaded.skipped.len(), 1);
    assert!(
        loaded.skipped[0].reason.contains("larger than"),
        "{:?}",
        loaded.skipped
    );
    // Read no further than the cap (and one byte to know it is over).
    assert_eq!(read.get(), reports::doctor::inputs::MAX_FILE_BYTES + 1);
    assert!(t.elapsed() < std::time::Duration::from_secs(60));
}

#[test]
fn a_huge_sparse_file_is_skipped_unread() {
    let dir = std::env::temp_dir().join(format!("rocelab-fuzz-sparse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("huge.txt");
    // 1 GB that takes no disk: a sparse file.
    std::fs::File::create(&f).unwrap().set_len(1 << 30).unwrap();
    let t = std::time::Instant::now();
    let loaded = reports::doctor::load(std::slice::from_ref(&f), &mut std::io::empty());
    assert!(loaded.inputs.is_empty());
    assert!(
        loaded.skipped[0].reason.contains("limit"),
        "{:?}",
        loaded.skipped
    );
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn megabytes_of_noise_text_are_not_rdma_tool_output_and_parse_in_bounded_time() {
    // Printable noise in lines: the parsers' worst case is text, not
    // binary (which is refused on its first NUL).
    let mut state = 11u64;
    let mut text = String::with_capacity(4 << 20);
    while text.len() < 4 << 20 {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let c = (b' ' + ((state >> 33) % 95) as u8) as char;
        text.push(if (state >> 20) % 61 == 0 { '\n' } else { c });
    }
    let t = std::time::Instant::now();
    let loaded = reports::doctor::load(&[std::path::PathBuf::from("-")], &mut text.as_bytes());
    let d = diagnose(&loaded.inputs, &Options::default());
    let _ = d.render_text();
    assert!(
        loaded.inputs.is_empty(),
        "noise parsed as {:?}",
        loaded.inputs.first().map(|i| i.parsed.kind())
    );
    assert!(
        loaded.skipped[0].reason.starts_with("not RDMA tool output"),
        "{:?}",
        loaded.skipped
    );
    assert!(
        t.elapsed() < std::time::Duration::from_secs(60),
        "{:?}",
        t.elapsed()
    );
}
