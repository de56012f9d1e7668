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
        Symptom::AckTimeout,
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
    let g = find(&d, Symptom::AckTimeout, &["different indices"]);
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
            .all(|f| f.symptom != Symptom::AckTimeout),
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
    let f = find(&d, Symptom::AckTimeout, &["GID index 3"]);
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
