//! Multi-plane fabrics, multipath transport and packet trimming, Ultra
//! Ethernet's and the Multipath Reliable Connection's answers to loss. The
//! `planes` generator builds independent copies joined only at the hosts'
//! NICs, a multipath QP spreads its packets over every plane, and with one
//! of P planes dead the fabric delivers (P-1)/P of the healthy rate once
//! the QPs have found the dead paths, losing nothing. A trimming switch
//! forwards the headers of what it would drop, and the receiver NAKs them
//! at once.

use sim::results::RunResult;
use sim::topology::{generate, LinkProps, NodeKind, Routes};

use crate::support::{lossy_incast, run_text};

/// A permutation of `size` per host on a 4-plane leaf-spine (4 leaves of
/// 4 hosts, 2 spines per plane), PFC off, no congestion control (the
/// fabric is non-blocking: what a QP learns is about paths, not rates),
/// selective repeat with 16 paths per QP; with `dead`, plane 1's spines
/// lose every link from the start.
fn planes_run(size: &str, dead: bool) -> RunResult {
    let mut faults = String::new();
    if dead {
        for leaf in 0..4 {
            for spine in 0..2 {
                faults.push_str(&format!(
                    "[[faults]]\nkind = \"link-down\"\nfrom = \"p1-leaf{leaf}\"\nto = \"p1-spine{spine}\"\n"
                ));
            }
        }
    }
    run_text(&format!(
        r#"
name = "planes"
seed = 1
duration = "50ms"
[topology]
name = "ls-4-planes"
defaults = {{ rate = "100Gbps", delay = "1us", mtu = 4096 }}
generator = {{ kind = "leaf-spine", leaves = 4, spines = 2, hosts_per_leaf = 4, oversubscription = 1.0, planes = 4 }}
[fabric.pfc]
enabled = false
[nic]
retransmit = "selective-repeat"
cc = {{ algorithm = "none" }}
[nic.multipath]
paths = 16
[record]
flows = true
[[workload]]
kind = "permutation"
size = "{size}"
priority = 3
{faults}"#
    ))
}

/// Every flow completed and delivered all its bytes; the mean finish
/// (ps) of the flows whose ends are on different leaves (4 hosts each).
fn all_delivered_cross_rack_end(r: &RunResult) -> u64 {
    let leaf = |h: &str| h[1..].parse::<u32>().unwrap() / 4;
    let (mut sum, mut n) = (0, 0);
    for f in &r.flows {
        assert!(
            !f.failed && f.bytes_acked == f.size && f.finish_ps.is_some(),
            "{} -> {}: failed {}, {} of {} bytes",
            f.src,
            f.dst,
            f.failed,
            f.bytes_acked,
            f.size
        );
        if leaf(&f.src) != leaf(&f.dst) {
            sum += f.finish_ps.unwrap();
            n += 1;
        }
    }
    assert!(n > 0, "the permutation has flows between racks");
    sum / n
}

#[test]
fn planes_generator_copies_the_switches_and_gives_each_host_a_port_per_plane() {
    let base = generate::leaf_spine(&generate::LeafSpine {
        leaves: 2,
        spines: 2,
        hosts_per_leaf: 2,
        host_link: LinkProps::default(),
        fabric_link: LinkProps::default(),
        oversubscription: None,
    })
    .unwrap();
    let t = generate::planes(base.clone(), 3).unwrap();
    assert_eq!(t.hosts().len(), 4);
    assert_eq!(t.nodes.len(), 4 + 3 * 4);
    assert_eq!(t.links.len(), 3 * base.links.len());
    for h in t.hosts() {
        let n = t.node(h);
        assert_eq!(n.ports.len(), 3, "{}", n.name);
        // Port k reaches plane k's leaf.
        for (k, l) in n.ports.iter().enumerate() {
            let link = t.link(*l);
            let other = if link.a.node == h { link.b } else { link.a };
            assert!(
                t.node(other.node).name.starts_with(&format!("p{k}-leaf")),
                "{} port {k}: {}",
                n.name,
                t.node(other.node).name
            );
        }
    }
    // No switch links to another plane's.
    for l in &t.links {
        let (a, b) = (t.node(l.a.node), t.node(l.b.node));
        if a.kind == NodeKind::Switch && b.kind == NodeKind::Switch {
            assert_eq!(a.name[..3], b.name[..3], "{} - {}", a.name, b.name);
        }
    }
    // Every host reaches every other through each plane's switches.
    let r = Routes::compute(&t);
    let leaf0 = t.find("p2-leaf0").unwrap();
    assert!(!r.next_hops(leaf0, 3).is_empty());
    assert_eq!(generate::planes(base.clone(), 1).unwrap(), base);
    for bad in [0, 17] {
        let e = generate::planes(base.clone(), bad).unwrap_err().to_string();
        assert!(e.contains("planes"), "{e}");
    }
}

#[test]
fn multipath_needs_selective_repeat() {
    let text = r#"
name = "t"
[topology]
name = "d"
generator = { kind = "dumbbell", left = 1, right = 1 }
[nic.multipath]
paths = 4
[[workload]]
kind = "permutation"
size = "1MB"
"#;
    let e = sim::scenario::from_str(std::path::Path::new("t.toml"), text)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("nic.multipath") && e.contains("selective-repeat"),
        "{e}"
    );
}

#[test]
fn a_dead_plane_costs_a_quarter_of_the_rate_and_nothing_else() {
    // The rate after detection, free of the start and of the detection:
    // the extra time 16 MB more per flow takes, healthy and with plane 1
    // dead from the start.
    let small = (planes_run("8MB", false), planes_run("8MB", true));
    let large = (planes_run("24MB", false), planes_run("24MB", true));
    let healthy =
        (all_delivered_cross_rack_end(&large.0) - all_delivered_cross_rack_end(&small.0)) as f64;
    let dead =
        (all_delivered_cross_rack_end(&large.1) - all_delivered_cross_rack_end(&small.1)) as f64;
    let ratio = healthy / dead;
    eprintln!(
        "16 MB more: healthy {:.1} us, plane 1 dead {:.1} us: goodput ratio {ratio:.3}",
        healthy / 1e6,
        dead / 1e6
    );
    assert!(
        (ratio - 0.75).abs() <= 0.75 * 0.05,
        "goodput with a dead plane {ratio:.3} of the healthy one, expected 3/4"
    );
    // The healthy fabric runs every NIC's four ports: 16 MB (10^6 bytes)
    // at 400 Gbit/s is 320 us of payload, a little more with headers.
    let us = healthy / 1e6;
    assert!((320.0..320.0 * 1.05).contains(&us), "healthy: {us} us");
    for (r, _) in [&small, &large] {
        assert_eq!(r.summary.drops, 0);
        assert_eq!(r.summary.retransmitted_packets, 0);
        assert!(r.nics.iter().all(|n| n.path_failovers == 0));
    }
    for (_, r) in [&small, &large] {
        // Each QP between racks finds its four plane-1 paths dead, once,
        // and resends about what was dropped.
        let failovers: u64 = r.nics.iter().map(|n| n.path_failovers).sum();
        let cross = r
            .flows
            .iter()
            .filter(|f| {
                f.src[1..].parse::<u32>().unwrap() / 4 != f.dst[1..].parse::<u32>().unwrap() / 4
            })
            .count() as u64;
        assert_eq!(failovers, 4 * cross, "path failovers");
        assert!(r.summary.drops > 0);
        assert!(
            r.summary.retransmitted_packets <= r.summary.drops * 3 / 2,
            "{} resent for {} drops",
            r.summary.retransmitted_packets,
            r.summary.drops
        );
    }
}

/// A 16:1 incast of 1 MB WRITEs through 1 MB switch buffers, PFC off,
/// selective repeat with a window of 32 packets (more than the
/// bottleneck's share: the queue overflows), with or without trimming.
fn incast_run(trim: bool) -> RunResult {
    let fabric = if trim {
        "buffer = { size = \"1MB\" }\ntrim = {}"
    } else {
        "buffer = { size = \"1MB\" }"
    };
    lossy_incast(fabric, "retransmit = \"selective-repeat\"\nwindow = 32")
}

#[test]
fn trimming_turns_drops_into_headers_the_receiver_naks_at_once() {
    let (drop, trim) = (incast_run(false), incast_run(true));
    let timeouts = |r: &RunResult| r.nics.iter().map(|n| n.local_ack_timeout_err).sum::<u64>();
    for r in [&drop, &trim] {
        for f in &r.flows {
            assert!(
                !f.failed && f.bytes_acked == f.size,
                "{} -> {}",
                f.src,
                f.dst
            );
        }
    }
    assert!(drop.summary.drops > 0);
    assert_eq!(drop.summary.trimmed, 0);
    // Every overflow became a trimmed header, which reached the receiver
    // and was answered at once: nothing dropped, every trimmed PSN resent.
    assert_eq!(trim.summary.drops, 0);
    assert!(trim.summary.trimmed > 0);
    let received: u64 = trim.nics.iter().map(|n| n.rx_trimmed).sum();
    assert_eq!(received, trim.summary.trimmed);
    assert!(trim.summary.retransmitted_packets >= trim.summary.trimmed);
    // A lost tail no longer waits for the retransmission timeout.
    eprintln!(
        "timeouts: {} dropping, {} trimming; trimmed {}, resent {}",
        timeouts(&drop),
        timeouts(&trim),
        trim.summary.trimmed,
        trim.summary.retransmitted_packets
    );
    assert!(timeouts(&drop) >= 10 && timeouts(&trim) * 4 <= timeouts(&drop));
}
