//! The doctor given the dumps of several hosts: settings that must agree
//! (GID index and RoCE version, RoCE MTU, trust mode, PFC priorities) are
//! compared host by host; each mismatch is one finding naming the hosts
//! and their values, hosts named by file or folder.

use reports::doctor::{diagnose, Diagnosis, Finding, Input, Options, Severity, Symptom};
use reports::realnic::{self, Kind};

fn input(name: &str, kind: Kind, text: &str) -> Input {
    Input {
        name: name.into(),
        parsed: realnic::parse(Some(kind), text).unwrap_or_else(|e| panic!("{name}: {e}")),
    }
}

fn run(inputs: &[Input]) -> Diagnosis {
    diagnose(inputs, &Options::default())
}

fn find<'a>(d: &'a Diagnosis, symptom: Symptom, words: &[&str]) -> &'a Finding {
    d.findings
        .iter()
        .find(|f| f.symptom == symptom && words.iter().all(|w| f.title.contains(w)))
        .unwrap_or_else(|| panic!("no {symptom:?} with {words:?}:\n{}", d.render_text()))
}

/// A `show_gids` table of one host: the RoCE v2 IPv4 GID at `v2_index`,
/// RoCE v1 entries (link-local and IPv4) at the other indices 0..=3.
fn gids(ip_last: u8, v2_index: u32) -> String {
    let mut s = String::from(
        "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n",
    );
    for i in 0..4u32 {
        let (gid, ip, ver) = if i == v2_index {
            (
                format!("0000:0000:0000:0000:0000:ffff:0a00:00{ip_last:02x}"),
                format!("10.0.0.{ip_last}"),
                "v2",
            )
        } else if i % 2 == 0 {
            (
                "fe80:0000:0000:0000:966d:aeff:fe47:5a2e".to_string(),
                String::new(),
                "v1",
            )
        } else {
            (
                format!("0000:0000:0000:0000:0000:ffff:0a00:00{ip_last:02x}"),
                format!("10.0.0.{ip_last}"),
                "v1",
            )
        };
        s.push_str(&format!(
            "mlx5_0\t1\t{i}\t{gid}\t{ip}  \t{ver}\tenp65s0f0np0\n"
        ));
    }
    s.push_str("n_gids_found=4\n");
    s
}

#[test]
fn a_gid_index_that_is_rocev2_on_some_hosts_only_is_named_with_its_hosts() {
    let nccl = "node1:101:101 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n";
    let d = run(&[
        input("case/node1/show_gids.txt", Kind::ShowGids, &gids(1, 3)),
        input("case/node2/show_gids.txt", Kind::ShowGids, &gids(2, 3)),
        input("case/node3/show_gids.txt", Kind::ShowGids, &gids(3, 1)),
        input("case/job.log", Kind::Nccl, nccl),
    ]);
    // The index in use: v2 on node1 and node2, v1 on node3.
    let f = find(
        &d,
        Symptom::GidMisconfigured,
        &["GID index 3", "node1, node2", "node3"],
    );
    assert_eq!(f.severity, Severity::Error, "{}", d.render_text());
    assert!(
        f.title
            .contains("RoCE v2 IPv4 on node1, node2 but RoCE v1 IPv4 on node3"),
        "{}",
        f.title
    );
    assert_eq!(f.affects, ["node3", "node1", "node2"], "the odd host first");
    assert_eq!(f.subject, "node3");
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("node3 (case/node3/show_gids.txt): index 3 is RoCE v1 10.0.0.3")),
        "{:?}",
        f.evidence
    );
    // The layout: the RoCE v2 entry at index 3 on two hosts, 1 on one.
    let g = find(&d, Symptom::GidMisconfigured, &["different indices"]);
    assert_eq!(g.severity, Severity::Warning);
    assert!(
        g.title
            .contains("index 3 on node1, node2 but index 1 on node3"),
        "{}",
        g.title
    );
    // Hosts that agree give nothing.
    let same = run(&[
        input("node1.show_gids.txt", Kind::ShowGids, &gids(1, 3)),
        input("node2.show_gids.txt", Kind::ShowGids, &gids(2, 3)),
        input("job.log", Kind::Nccl, nccl),
    ]);
    assert!(
        same.findings
            .iter()
            .all(|f| f.symptom != Symptom::GidMisconfigured),
        "{}",
        same.render_text()
    );
}

/// `ibv_devinfo` of one host whose only port runs `mtu`.
fn devinfo(mtu: u32) -> String {
    let code = match mtu {
        1024 => 3,
        2048 => 4,
        _ => 5,
    };
    format!(
        "hca_id:\tmlx5_0\n\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n\tphys_port_cnt:\t\t\t1\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tmax_mtu:\t\t4096 (5)\n\t\t\tactive_mtu:\t\t{mtu} ({code})\n\t\t\tlink_layer:\t\tEthernet\n\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t25.0 Gbps (32)\n\t\t\tphys_state:\t\tLINK_UP (5)\n"
    )
}

#[test]
fn hosts_with_different_roce_mtus_are_named_with_the_cost_in_numbers() {
    let d = run(&[
        input("gpu01-ibv_devinfo.txt", Kind::Devinfo, &devinfo(4096)),
        input("gpu02-ibv_devinfo.txt", Kind::Devinfo, &devinfo(4096)),
        input("gpu03-ibv_devinfo.txt", Kind::Devinfo, &devinfo(1024)),
    ]);
    let f = find(&d, Symptom::MtuMismatch, &["different RoCE MTUs"]);
    assert!(
        f.title
            .contains("active MTU 4096 on gpu01, gpu02 but active MTU 1024 on gpu03"),
        "{}",
        f.title
    );
    assert_eq!(f.affects[0], "gpu03");
    // RoCEv2 over IPv4 takes 82 bytes of link time besides the payload:
    // 1024/1106 = 92.585 %, 4096/4178 = 98.037 %.
    assert!(
        f.impact.contains("92.585%") && f.impact.contains("98.037%"),
        "{}",
        f.impact
    );
    // Not reported a second time without the hosts.
    assert!(
        !d.findings
            .iter()
            .any(|f| f.title == "ports run different RoCE MTUs"),
        "{}",
        d.render_text()
    );
}

/// `mlnx_qos -i` of one host: `trust`, PFC on `prio`.
fn qos(trust: &str, prio: usize) -> String {
    let mut bits = ["0"; 8];
    bits[prio] = "1";
    format!(
        "DCBX mode: OS controlled\nPriority trust state: {trust}\nCable len: 7\nPFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n\tenabled     {}\n\tbuffer      0   0   0   1   0   0   0   0\n",
        bits.join("   ")
    )
}

#[test]
fn hosts_with_different_trust_or_pfc_priorities_are_named() {
    let d = run(&[
        input("a/mlnx_qos.txt", Kind::MlnxQos, &qos("dscp", 3)),
        input("b/mlnx_qos.txt", Kind::MlnxQos, &qos("dscp", 3)),
        input("c/mlnx_qos.txt", Kind::MlnxQos, &qos("pcp", 4)),
    ]);
    let t = find(&d, Symptom::LossyPriority, &["different fields"]);
    assert_eq!(t.severity, Severity::Error);
    assert!(
        t.title.contains("trust dscp on a, b but trust pcp on c"),
        "{}",
        t.title
    );
    let p = find(&d, Symptom::LossyPriority, &["PFC on different priorities"]);
    assert!(
        p.title
            .contains("PFC on prio3 on a, b but PFC on prio4 on c"),
        "{}",
        p.title
    );
    assert_eq!(p.affects, ["c", "a", "b"]);
    assert!(
        p.evidence
            .iter()
            .any(|e| e == "c (c/mlnx_qos.txt): PFC on prio4"),
        "{:?}",
        p.evidence
    );
}

#[test]
fn the_gid_tables_of_ibv_devinfo_are_compared_too() {
    let table = |v2_at: u32| {
        let mut s = devinfo(4096);
        for i in 0..4u32 {
            let line = if i == v2_at {
                format!("\t\t\tGID[  {i}]:\t\t::ffff:10.0.0.{v2_at}, RoCE v2\n")
            } else {
                format!("\t\t\tGID[  {i}]:\t\tfe80:0000:0000:0000:966d:aeff:fe47:5a2e, RoCE v1\n")
            };
            s.push_str(&line);
        }
        s
    };
    let nccl = "node1:101:101 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 3.\n";
    let d = run(&[
        input("n1/ibv_devinfo.txt", Kind::Devinfo, &table(3)),
        input("n2/ibv_devinfo.txt", Kind::Devinfo, &table(1)),
        input("job.log", Kind::Nccl, nccl),
    ]);
    let f = find(&d, Symptom::GidMisconfigured, &["GID index 3"]);
    assert!(
        f.title.contains("RoCE v1 non-IPv4 on n2") && f.title.contains("RoCE v2 IPv4 on n1"),
        "{}",
        f.title
    );
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("n1 (n1/ibv_devinfo.txt): index 3 is RoCE v2 10.0.0.3")),
        "{:?}",
        f.evidence
    );
}

#[test]
fn the_jobs_traffic_class_landing_on_different_priorities_is_named() {
    // Host c maps DSCP 26 to priority 0; a and b to 3 (the default 26 >> 3).
    let odd = qos("dscp", 3).replace(
        "Cable len: 7\n",
        "dscp2prio mapping:\n\tprio:0 dscp:26,\n\tprio:3 dscp:31,30,29,28,27,25,24,\nCable len: 7\n",
    );
    let nccl = "a:1:1 [0] NCCL INFO NCCL_IB_TC set by environment to 106.\n";
    let d = run(&[
        input("a/mlnx_qos.txt", Kind::MlnxQos, &qos("dscp", 3)),
        input("b/mlnx_qos.txt", Kind::MlnxQos, &qos("dscp", 3)),
        input("c/mlnx_qos.txt", Kind::MlnxQos, &odd),
        input("job.log", Kind::Nccl, nccl),
    ]);
    let f = find(&d, Symptom::LossyPriority, &["NCCL_IB_TC=106 (DSCP 26)"]);
    assert!(
        f.title.ends_with("prio3 on a, b but prio0 on c"),
        "{}",
        f.title
    );
    // c's PFC bit is on prio3 only, so the job is lossy there: the same
    // cause, folded in rather than reported again.
    assert!(
        f.evidence
            .iter()
            .any(|e| e.contains("lands on prio0, which has no PFC")),
        "{:?}",
        f.evidence
    );
    assert_eq!(
        d.findings
            .iter()
            .filter(|g| g.symptom == Symptom::LossyPriority)
            .count(),
        1,
        "{}",
        d.render_text()
    );
}

/// `ibv_devinfo` of one host with `n` active 100 Gb/s (4x EDR) ports.
fn devinfo_nics(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "hca_id:\tmlx5_{i}\n\tfw_ver:\t\t\t\t20.31.1014\n\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n\t\t\tactive_mtu:\t\t4096 (5)\n\t\t\tactive_width:\t\t4X (2)\n\t\t\tactive_speed:\t\t25.0 Gbps (32)\n\t\t\tlink_layer:\t\tEthernet\n"
            )
        })
        .collect()
}

#[test]
fn the_nccl_tests_bound_is_one_hosts_nics_and_its_numbers_agree() {
    // Two hosts with two 100 Gb/s NICs each: the bound is 2 x 100 / 8 =
    // 25 GB/s (one host's NICs), never the 50 GB/s of all four.
    let tests = "# Collective test starting: all_reduce_perf\n\
#  Rank  0 Group  0 Pid 11 on     host1 device  0 [0x07] NVIDIA H100\n\
#  Rank  1 Group  0 Pid 12 on     host2 device  0 [0x07] NVIDIA H100\n\
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
  1073741824     268435456     float     sum      -1    70733   15.18   15.18      0    70720   15.18   15.18      0\n\
# Avg bus bandwidth    : 15.181\n";
    let d = run(&[
        input("host1/ibv_devinfo.txt", Kind::Devinfo, &devinfo_nics(2)),
        input("host2/ibv_devinfo.txt", Kind::Devinfo, &devinfo_nics(2)),
        input("all_reduce.txt", Kind::NcclTests, tests),
    ]);
    let f = find(&d, Symptom::SlowCollective, &["busbw"]);
    let text = d.render_text();
    assert!(!text.contains("Some("), "{text}");
    assert!(
        f.title
            .contains("all_reduce_perf peak busbw 15.18 GB/s is 60.720% of the 25.00 GB/s"),
        "{}",
        f.title
    );
    assert!(
        f.evidence[0].starts_with(
            "bound = NICs of one host x link rate / 8 = 2 x 100 Gbit/s / 8 = 25.00 GB/s"
        ),
        "{:?}",
        f.evidence
    );
    assert!(
        f.evidence[1].contains("avg busbw 15181 MB/s"),
        "{:?}",
        f.evidence
    );
    // all_reduce of 2 ranks: factor 2(n-1)/n = 1, so 1 GB takes
    // 1000 MB / 15.18 GB/s = 65 ms, and 40 ms at the 25 GB/s bound.
    assert!(f.impact.contains("2(n-1)/n = 2x1/2"), "{}", f.impact);
    assert!(
        f.impact.contains("about 65 ms") && f.impact.contains("40 ms"),
        "{}",
        f.impact
    );
}

#[test]
fn a_job_gid_index_that_is_link_local_or_missing_is_named_with_the_one_to_use() {
    // `ibv_devinfo -v` excerpt: index 1 is the link-local v2 entry, 3 the
    // IPv4 one; the job runs NCCL_IB_GID_INDEX=1.
    let table = "_ibv_devinfo -d mlx5_bond_0 -v_\n\n\t\t\tGID[  0]:\t\tfe80:0000:0000:0000:0ac0:ebff:feda:1cfb, RoCE v1\n\t\t\tGID[  1]:\t\tfe80::ac0:ebff:feda:1cfb, RoCE v2\n\t\t\tGID[  2]:\t\t0000:0000:0000:0000:0000:ffff:c800:d106, RoCE v1\n\t\t\tGID[  3]:\t\t::ffff:200.0.209.6, RoCE v2\n";
    let nccl = "n1:1:1 [0] NCCL INFO NCCL_IB_GID_INDEX set by environment to 1.\n";
    let d = run(&[
        input("n1/ibv_devinfo.txt", Kind::Devinfo, table),
        input("n1/job.log", Kind::Nccl, nccl),
    ]);
    let f = &d.findings[0];
    assert_eq!(
        (f.symptom, f.severity),
        (Symptom::GidMisconfigured, Severity::Error),
        "{}",
        d.render_text()
    );
    assert!(
        f.title.contains("GID index 1") && f.title.contains("link-local"),
        "{}",
        f.title
    );
    assert!(
        f.check_first
            .contains("set the GID index to 3 (200.0.209.6)"),
        "{}",
        f.check_first
    );
    // The table alone, without the index in use, is no finding.
    let alone = run(&[input("n1/ibv_devinfo.txt", Kind::Devinfo, table)]);
    assert!(
        alone
            .findings
            .iter()
            .all(|f| f.symptom != Symptom::GidMisconfigured),
        "{}",
        alone.render_text()
    );
    // A pod's table that starts at index 4 and an address at two v2
    // indices on different netdevs are named.
    let pod = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n\
mlx5_0\t1\t4\tfe80:0000:0000:0000:a4ed:ccff:fe8b:1994\t\t\tv1\tnet1\n\
mlx5_0\t1\t5\t0000:0000:0000:0000:0000:ffff:0a98:000c\t10.152.0.12  \tv2\tnet1\n\
mlx5_0\t1\t6\t0000:0000:0000:0000:0000:ffff:0a98:000c\t10.152.0.12  \tv2\tvxlan9\n";
    let d = run(&[input("pod/show_gids.txt", Kind::ShowGids, pod)]);
    find(&d, Symptom::GidMisconfigured, &["starts at index 4"]);
    find(
        &d,
        Symptom::GidMisconfigured,
        &["10.152.0.12", "5 on net1", "6 on vxlan9"],
    );
}

#[test]
fn ucx_and_nccl_logs_say_which_transport_and_whether_gpudirect() {
    let ucx = "[1679582609.300318] [node68:178019:0]      ucp_worker.c:1783 UCX  INFO    ep_cfg[0]: tag(tcp/eno1) stream(tcp/eno1)\n";
    let d = run(&[input("ucx.log", Kind::Events, ucx)]);
    let f = find(&d, Symptom::SocketFallback, &["TCP only"]);
    assert_eq!(f.origin.as_deref(), Some("node68"));
    let rdma = "[1.0] [jazz30:1:0]  wireup.c:825  UCX  INFO  ep_cfg[2]: tag(rc_mlx5/mlx5_0:1 rc_mlx5/mlx5_2:1);\n";
    assert!(run(&[input("ucx.log", Kind::Events, rdma)])
        .findings
        .is_empty());
    let nccl = "h1:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [RO]; OOB eth0:10.0.0.1<0>\n\
h1:1:2 [0] NCCL INFO Using network IB\n\
h1:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n";
    let d = run(&[input("h1.log", Kind::Nccl, nccl)]);
    let f = find(&d, Symptom::GdrNotUsed, &["mlx5_0"]);
    assert!(
        f.check_first.contains("nvidia-peermem"),
        "{}",
        f.check_first
    );
}
