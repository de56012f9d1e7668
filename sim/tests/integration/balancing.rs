//! Load balancing in switches: per-flow ECMP against per-packet
//! spraying, round robin, flowlets and adaptive routing, on the uplinks
//! of one leaf of a two-tier leaf-spine, with go-back-N receivers that
//! see reordered frames as sequence errors.

use std::path::Path;

use sim::results::RunResult;
use sim::scenario;

/// Two leaves of 8 hosts, 4 spines, 100G everywhere; `senders` hosts
/// of leaf 0 each WRITE 2 MB to the host 8 above it on leaf 1, lossless,
/// no congestion control, under `lb` (a `[fabric.load_balancing]` body).
fn run(senders: usize, lb: &str) -> RunResult {
    let mut text = format!(
        "name = \"lb\"\nseed = 3\n\
         [topology.defaults]\nrate = \"100Gbps\"\ndelay = \"1us\"\nmtu = 4096\n\
         [topology.generator]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 4\nhosts_per_leaf = 8\n\
         [nic]\nmtu = 4096\ncc = {{ algorithm = \"none\" }}\n\
         [fabric]\necn = []\nload_balancing = {{ {lb} }}\n"
    );
    for i in 0..senders {
        text += &format!(
            "[[workload]]\nkind = \"incast\"\nreceiver = \"h{}\"\nsenders = [\"h{i}\"]\nsize = \"2MB\"\nop = \"write\"\npriority = 3\n",
            i + 8
        );
    }
    crate::support::run_text(&text)
}

/// Bytes leaf 0 sent to each spine.
fn uplinks(r: &RunResult) -> Vec<u64> {
    let mut v: Vec<(String, u64)> = r
        .ports
        .iter()
        .filter(|p| p.node == "leaf0" && p.peer.starts_with("spine"))
        .map(|p| (p.peer.clone(), p.prio.iter().map(|c| c.tx_bytes).sum()))
        .collect();
    v.sort();
    v.into_iter().map(|x| x.1).collect()
}

/// Frames the receivers saw out of sequence, and frames resent.
fn reordering(r: &RunResult) -> (u64, u64) {
    let oos = r.nics.iter().map(|n| n.out_of_sequence).sum();
    let resent = r.nics.iter().map(|n| n.retransmitted_packets).sum();
    (oos, resent)
}

fn spread(v: &[u64]) -> f64 {
    let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
    v.iter()
        .map(|&x| (x as f64 - mean).abs() / mean)
        .fold(0.0, f64::max)
}

/// Per-frame schemes load every uplink alike, where ECMP puts each
/// queue pair on one uplink and here stacks three flows on two uplinks
/// and one on the others. Round robin and adaptive routing keep frames
/// nearly in order on these equal paths and finish close to the
/// balanced bound; random spraying reorders frames, which go-back-N
/// receivers count as out of sequence and the senders resend, and ends
/// far later than ECMP's collisions. A flowlet gap shorter than any
/// gap between frames is random spraying; one longer than the run keeps
/// each queue pair on one path, in order.
#[test]
fn per_frame_schemes_balance_the_uplinks_and_random_spraying_reorders() {
    let ecmp = run(8, "mode = \"ecmp\"");
    let total: u64 = uplinks(&ecmp).iter().sum();
    assert!(total > 8 * 2_000_000, "{:?}", uplinks(&ecmp));
    assert_eq!(reordering(&ecmp), (0, 0));
    // ECMP: each flow's bytes on one uplink, a multiple of a flow's.
    let per_flow = total / 8;
    for b in uplinks(&ecmp) {
        let flows = (b as f64 / per_flow as f64).round();
        assert!(
            (b as f64 - flows * per_flow as f64).abs() < 0.01 * per_flow as f64,
            "{:?}",
            uplinks(&ecmp)
        );
    }
    let ecmp_end = ecmp.summary.makespan_ps;
    // Every flow's bytes over the four uplinks at 100 Gb/s.
    let bound = total * 8 * 1000 / 400;
    for lb in ["mode = \"spray_round_robin\"", "mode = \"adaptive\""] {
        let r = run(8, lb);
        let u = uplinks(&r);
        assert!(spread(&u) <= 0.005, "{lb}: {u:?}");
        let end = r.summary.makespan_ps;
        assert!(
            end < ecmp_end && (end as f64) < 1.1 * bound as f64,
            "{lb}: {end} ps against ECMP's {ecmp_end} and the bound {bound}"
        );
    }
    let spray = run(8, "mode = \"spray\"");
    assert!(spread(&uplinks(&spray)) <= 0.05, "{:?}", uplinks(&spray));
    let (oos, resent) = reordering(&spray);
    assert!(
        oos > 1000 && resent > 1000,
        "{oos} out of sequence, {resent} resent"
    );
    assert_eq!(spray.summary.flows_completed, 8);
    assert!(spray.summary.makespan_ps > ecmp_end);
    let short = run(8, "mode = \"flowlet\", gap = \"1ns\"");
    assert_eq!(uplinks(&short), uplinks(&spray));
    assert_eq!(reordering(&short), reordering(&spray));
    let long = run(8, "mode = \"flowlet\", gap = \"1ms\"");
    assert_eq!(reordering(&long), (0, 0));
    for b in uplinks(&long) {
        assert_eq!(b % per_flow, 0, "{:?}", uplinks(&long));
    }
}

/// On an idle fabric adaptive routing keeps to the flow's ECMP choice
/// (ties go to the hash order): one flow alone takes the same uplink and
/// arrives in order.
#[test]
fn adaptive_routing_on_an_idle_fabric_is_ecmp() {
    let e = run(1, "mode = \"ecmp\"");
    let a = run(1, "mode = \"adaptive\"");
    assert_eq!(uplinks(&e), uplinks(&a));
    assert_eq!(reordering(&a), (0, 0));
}

/// A flowlet gap of 0 is refused naming the key; fluid mode refuses
/// per-frame paths.
#[test]
fn bad_balancing_is_refused_naming_the_key() {
    let base = "name = \"x\"\n[topology.generator]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2\n";
    let wl = "[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\n";
    let e = scenario::from_str(
        Path::new("x.toml"),
        &format!("{base}[fabric]\nload_balancing = {{ mode = \"flowlet\", gap = \"0s\" }}\n{wl}"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("fabric.load_balancing.gap"), "{e}");
    let e = scenario::from_str(
        Path::new("x.toml"),
        &format!(
            "fidelity = \"fluid\"\n{base}[fabric]\nload_balancing = {{ mode = \"spray\" }}\n{wl}"
        ),
    )
    .unwrap_err();
    assert!(e.to_string().contains("per frame"), "{e}");
}
