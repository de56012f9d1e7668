//! PFC deadlocks: the ring of scenarios/faults/deadlock-ring.toml and the
//! leaf-spine bounce routes of scenarios/faults/deadlock-bounce.toml
//! deadlock and the cycle is reported live; the watchdog breaks it; runs
//! on fat trees and leaf-spines with up-down routes never report one.

use std::path::Path;

use roce::time::Duration;
use sim::results::{DeadlockRecord, PfcwdEvent, RunResult};
use sim::run::{simulate, RunOptions};
use sim::scenario::{self, Scenario};
use sim::topology::Routes;

/// The scenario `scenarios/faults/NAME`.
fn faults_scenario(name: &str) -> Scenario {
    let f = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/faults")
        .join(name);
    scenario::load(&f).unwrap()
}

/// The five ring queues a ring deadlock holds, as (node, peer).
const RING_QUEUES: [(&str, &str); 5] = [
    ("s0", "s1"),
    ("s1", "s2"),
    ("s2", "s3"),
    ("s3", "s4"),
    ("s4", "s0"),
];

fn ring() -> Scenario {
    faults_scenario("deadlock-ring.toml")
}

fn bounce() -> Scenario {
    faults_scenario("deadlock-bounce.toml")
}

fn run(s: &Scenario, variant: &str, until: Duration) -> RunResult {
    run_on(s, variant, until, false)
}

/// `run`, on InfiniBand's credits instead of PFC when `ib`.
fn run_on(s: &Scenario, variant: &str, until: Duration, ib: bool) -> RunResult {
    let v = s.variants.iter().find(|v| v.name == variant).unwrap();
    let t = &s.topologies[v.topology];
    let r = Routes::compute(t);
    let opts = RunOptions {
        variant: v.name.clone(),
        seed: s.seed,
        duration: Some(until),
        ..RunOptions::default()
    };
    let mut cfg = v.config.clone();
    if ib {
        cfg.fabric.link_layer = sim::config::LinkLayer::Infiniband;
    }
    simulate(t, &r, &cfg, &v.flows, &opts).unwrap().0
}

/// The one deadlock `r` reports: on priority 3, detected within a
/// millisecond of forming. Returns it with its members as (node, peer).
fn one_deadlock(r: &RunResult) -> (&DeadlockRecord, Vec<(&str, &str)>) {
    assert_eq!(r.deadlocks.len(), 1, "{:?}", r.deadlocks);
    let d = &r.deadlocks[0];
    assert_eq!(d.priority, 3);
    assert!(d.detected_ps >= d.formed_ps);
    assert!(
        d.detected_ps - d.formed_ps <= 1_000_000_000,
        "formed {} detected {}",
        d.formed_ps,
        d.detected_ps
    );
    let members = d
        .members
        .iter()
        .map(|m| (m.node.as_str(), m.peer.as_str()))
        .collect();
    (d, members)
}

/// `later`, a longer run of the variant that deadlocked in `first`, is
/// stuck: the same deadlock reported once, nothing more delivered, no
/// flow completed.
fn assert_stuck(first: &RunResult, later: &RunResult) {
    assert_eq!(later.deadlocks, first.deadlocks, "reported once");
    assert_eq!(later.summary.bytes_delivered, first.summary.bytes_delivered);
    assert_eq!(later.summary.flows_completed, 0);
}

/// The watchdog's storm detections in `r`.
fn storms(r: &RunResult) -> Vec<&PfcwdEvent> {
    r.pfcwd_events
        .iter()
        .filter(|e| e.event == "storm_detected")
        .collect()
}

#[test]
fn ring_deadlocks_and_the_cycle_is_reported_within_a_millisecond() {
    let s = ring();
    let a = run(&s, "deadlock", Duration::from_ms(3));
    let (d, members) = one_deadlock(&a);
    assert_eq!(members, RING_QUEUES);
    // Throughput to zero: nothing more is delivered after the report.
    let b = run(&s, "deadlock", Duration::from_ms(6));
    assert_stuck(&a, &b);
    assert_eq!(b.summary.drops, 0);
    // Stop at the report.
    let c = run(&s, "deadlock-stop", Duration::from_ms(6));
    assert_eq!(c.summary.stop_reason, "deadlock");
    assert_eq!(c.summary.sim_time_ps, d.detected_ps);
    assert_eq!(c.deadlocks, a.deadlocks);
}

/// A credit loop deadlocks as a PFC loop does: the same ring on
/// InfiniBand's credits freezes with nothing dropped and no PAUSE sent,
/// and the detector reports the five ring queues, each waiting for
/// credits the next switch returns only as its own stuck frames leave.
#[test]
fn a_credit_loop_deadlocks_on_infiniband_and_is_reported() {
    let s = ring();
    let a = run_on(&s, "deadlock", Duration::from_ms(3), true);
    let (_, members) = one_deadlock(&a);
    assert_eq!(members, RING_QUEUES);
    assert_eq!(a.summary.pause_frames_sent, 0);
    let b = run_on(&s, "deadlock", Duration::from_ms(6), true);
    assert_stuck(&a, &b);
    assert_eq!(b.summary.drops, 0);
    // The ring ports wait on credits from the report on.
    for m in &b.deadlocks[0].members {
        let p = b
            .ports
            .iter()
            .find(|p| p.node == m.node && p.port == m.port)
            .unwrap();
        assert!(p.infiniband.as_ref().unwrap().xmit_wait > 0, "{p:?}");
    }
}

#[test]
fn the_watchdog_breaks_the_deadlock_and_traffic_resumes() {
    let s = ring();
    let stuck = run(&s, "deadlock", Duration::from_ms(6));
    let wd = run(&s, "watchdog", Duration::from_ms(6));
    assert!(
        !wd.deadlocks.is_empty(),
        "it deadlocks before the watchdog acts"
    );
    let first = wd.deadlocks[0].detected_ps;
    let storms = storms(&wd);
    assert!(!storms.is_empty());
    assert!(storms
        .iter()
        .all(|e| e.node.starts_with('s') && e.peer.starts_with('s')));
    assert!(storms[0].time_ps > first);
    // Forward: the stormed ring queues send despite PAUSE.
    assert!(
        wd.pfcwd_stats.iter().all(|q| q.tx_ok > 1000),
        "{:?}",
        wd.pfcwd_stats
    );
    assert!(
        wd.summary.bytes_delivered > 2 * stuck.summary.bytes_delivered,
        "watchdog {} stuck {}",
        wd.summary.bytes_delivered,
        stuck.summary.bytes_delivered
    );
}

#[test]
fn bounce_routes_after_link_failures_deadlock_a_leaf_spine() {
    let s = bounce();
    // Before the failures (200 us) the four flows run at line rate.
    let before = run(&s, "deadlock", Duration::from_us(200));
    assert!(before.deadlocks.is_empty());
    // 4 flows x 100 Gbit/s for 200 us is 10 MB; at least 40% arrives
    // (the first RTTs and the message granularity take the rest).
    assert!(
        before.summary.bytes_delivered > 4_000_000,
        "{}",
        before.summary.bytes_delivered
    );
    let a = run(&s, "deadlock", Duration::from_ms(1));
    let (d, members) = one_deadlock(&a);
    // The cycle: two leaf uplinks and the two spine downlinks to the
    // bounce leaves (l0 and l1).
    assert_eq!(
        members,
        [("l0", "s1"), ("l1", "s0"), ("s0", "l0"), ("s1", "l1")]
    );
    // It forms after convergence (250 us) and is found within 1 ms.
    assert!(d.formed_ps > 250_000_000, "formed {}", d.formed_ps);
    // Throughput zero after the onset, through ACK timeouts (about 1 ms)
    // that would otherwise recover the frames lost at the failure.
    let b = run(&s, "deadlock", Duration::from_ms(4));
    assert_stuck(&a, &b);
    // Frames were lost only when the links failed.
    assert_eq!(b.summary.drops, a.summary.drops);

    // The PFC watchdog breaks the cycle: its queues are in a PAUSE storm,
    // it makes them ignore PAUSE, and traffic moves again.
    let wd = run(&s, "watchdog", Duration::from_ms(4));
    assert_eq!(
        wd.deadlocks, a.deadlocks,
        "it deadlocks before the watchdog acts"
    );
    let stormed: Vec<(&str, &str)> = storms(&wd)
        .iter()
        .map(|e| (e.node.as_str(), e.peer.as_str()))
        .collect();
    for m in &members {
        assert!(stormed.contains(m), "{m:?} not stormed: {stormed:?}");
    }
    assert!(wd.pfcwd_events.iter().all(|e| e.time_ps > d.detected_ps));
    // Traffic resumes: several times what was delivered before the stall.
    assert!(
        wd.summary.bytes_delivered > 3 * b.summary.bytes_delivered,
        "watchdog {} stuck {}",
        wd.summary.bytes_delivered,
        b.summary.bytes_delivered
    );
}

/// Runs on fat trees and leaf-spines (up-down routing: no cyclic buffer
/// dependency exists) with random seeds, workloads and PFC thresholds,
/// `runs` of them, seeds `first..`. Returns how many of them paused.
fn random_fabric_runs(first: u64, runs: u64) -> u64 {
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use roce::time::{Instant, Rate, Size};
    use sim::config::{PfcThreshold, SimConfig};
    use sim::topology::generate::{fat_tree, leaf_spine, LeafSpine};
    use sim::topology::{LinkProps, NodeId, NodeKind};
    use sim::workload::generate::{self, FlowBuilder, FlowTemplate};

    let lp = LinkProps::default();
    let ft = fat_tree(4, lp, lp).unwrap();
    let ls = leaf_spine(&LeafSpine {
        leaves: 4,
        spines: 2,
        hosts_per_leaf: 4,
        host_link: lp,
        fabric_link: LinkProps {
            rate: Rate::from_gbps(100),
            ..lp
        },
        oversubscription: Some(2.0),
    })
    .unwrap();
    let topos = [(Routes::compute(&ft), ft), (Routes::compute(&ls), ls)];
    let mut paused = 0;
    for seed in first..first + runs {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let (routes, t) = &topos[rng.gen_range(0..2)];
        let hosts: Vec<NodeId> = (0..t.nodes.len() as u32)
            .map(NodeId)
            .filter(|n| t.nodes[n.0 as usize].kind == NodeKind::Host)
            .collect();
        let tpl = FlowTemplate {
            size: rng.gen_range(50_000..400_000),
            message_size: Some(16_384),
            ..FlowTemplate::default()
        };
        let mut b = FlowBuilder::new();
        match rng.gen_range(0..3) {
            0 => generate::permutation(&mut b, &hosts, &tpl, &mut rng),
            1 => {
                let r = hosts[rng.gen_range(0..hosts.len())];
                let n = rng.gen_range(2..hosts.len());
                let senders: Vec<NodeId> =
                    hosts.iter().copied().filter(|&h| h != r).take(n).collect();
                generate::incast(&mut b, &senders, r, &tpl);
            }
            _ => {
                for _ in 0..rng.gen_range(4..24) {
                    let s = hosts[rng.gen_range(0..hosts.len())];
                    let d = hosts[rng.gen_range(0..hosts.len())];
                    if s != d {
                        let at = Instant::from_ps(rng.gen_range(0..20_000_000));
                        let size = rng.gen_range(20_000..400_000);
                        b.pair(s, d, size, at, &tpl, None, &[]);
                    }
                }
            }
        }
        let flows = b.finish().unwrap();
        let mut cfg = SimConfig::default();
        cfg.fabric.ecn.clear();
        cfg.record.ports = false;
        cfg.record.flows = false;
        let xoff = rng.gen_range(20_000..200_000);
        cfg.fabric.pfc.threshold = PfcThreshold::Static {
            xoff: Size::from_bytes(xoff),
            xon: Size::from_bytes(xoff / 2),
        };
        cfg.fabric.pfc.deadlock.check_interval = Duration::from_us(rng.gen_range(1..50));
        let opts = RunOptions {
            seed,
            duration: Some(Duration::from_ms(2)),
            ..RunOptions::default()
        };
        let res = simulate(t, routes, &cfg, &flows, &opts).unwrap().0;
        assert!(res.deadlocks.is_empty(), "seed {seed}: {:?}", res.deadlocks);
        if res.summary.pause_frames_sent > 0 {
            paused += 1;
        }
    }
    paused
}

#[test]
fn random_runs_on_fat_trees_and_leaf_spines_report_no_deadlock() {
    let runs = 200;
    let paused = random_fabric_runs(1, runs);
    assert!(paused * 2 > runs, "only {paused} of {runs} runs paused");
}
