//! Same inputs and seed, same bytes.

use roce::time::{Duration, Rate, Size};
use sim::config::{FaultConfig, PfcThreshold, SimConfig};
use sim::run::{simulate, RunOptions};
use sim::topology::NodeKind;

use crate::support::{add_link, shortest_routes, write};

/// Two leaves joined by two spines (ECMP), 4 hosts per leaf.
fn two_tier() -> (sim::topology::Topology, sim::topology::Routes) {
    use sim::topology::{Node, Topology};
    let mut t = Topology::default();
    let mut node = |name: String, kind| {
        t.nodes.push(Node {
            name,
            kind,
            ports: vec![],
        });
        t.nodes.len() - 1
    };
    let leaves = [
        node("leaf0".into(), NodeKind::Switch),
        node("leaf1".into(), NodeKind::Switch),
    ];
    let spines = [
        node("spine0".into(), NodeKind::Switch),
        node("spine1".into(), NodeKind::Switch),
    ];
    let hosts: Vec<usize> = (0..8)
        .map(|i| node(format!("h{i}"), NodeKind::Host))
        .collect();
    let r = Rate::from_gbps(100);
    let d = Duration::from_us(1);
    for (i, &h) in hosts.iter().enumerate() {
        add_link(&mut t, leaves[i / 4], h, r, d);
    }
    for &l in &leaves {
        for &s in &spines {
            add_link(&mut t, l, s, r, d);
        }
    }
    let routes = shortest_routes(&t);
    (t, routes)
}

#[test]
fn same_seed_gives_byte_identical_results() {
    let (t, r) = two_tier();
    let hosts: Vec<usize> = (4..12).collect();
    let flows: Vec<_> = (0..4)
        .map(|i| write(i as u32, hosts[i], hosts[4 + (i + 1) % 4], 300_000))
        .chain((4..8).map(|i| write(i as u32, hosts[i], hosts[0], 200_000)))
        .collect();
    let mut cfg = SimConfig::default();
    cfg.fabric.pfc.threshold = PfcThreshold::Static {
        xoff: Size::from_bytes(60_000),
        xon: Size::from_bytes(40_000),
    };
    cfg.nic.ack_timeout = 8;
    cfg.faults.push(FaultConfig {
        from: Some("leaf0".into()),
        to: Some("spine0".into()),
        loss: Some(0.01),
        drop_every: None,
        ..Default::default()
    });
    cfg.record.queues.push(sim::config::QueueSelector {
        node: "leaf1".into(),
        port: 0,
        priority: Some(3),
    });
    let run = |seed| {
        let opts = RunOptions {
            seed,
            ..RunOptions::default()
        };
        simulate(&t, &r, &cfg, &flows, &opts).unwrap().0.to_json()
    };
    let a = run(7);
    let b = run(7);
    assert_eq!(a, b);
    assert!(a.contains("\"flows_completed\": 8"), "{a}");
    // The seed reaches the loss stream and the UDP source ports.
    let c = run(8);
    assert_ne!(a, c);
}
