//! Workload generators, flow-size CDFs and flow ordering.

use std::collections::BTreeMap;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roce::time::{Duration, Instant, Rate};
use sim::topology::NodeId;
use sim::workload::generate::{
    all_to_all, derangement, incast, permutation, poisson, ring_allreduce, FlowBuilder,
    FlowTemplate,
};
use sim::workload::{finish, DependencyError, FlowSizeCdf};

fn hosts(n: u32) -> Vec<NodeId> {
    (0..n).map(NodeId).collect()
}

#[test]
fn derangement_has_no_fixed_point_and_is_seed_deterministic() {
    for n in 2..60 {
        for seed in 0..20u64 {
            let d = derangement(n, &mut ChaCha8Rng::seed_from_u64(seed));
            assert!(
                d.iter().enumerate().all(|(i, &j)| i != j),
                "n={n} seed={seed}"
            );
            let mut sorted = d.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..n).collect::<Vec<_>>(), "a permutation");
            assert_eq!(d, derangement(n, &mut ChaCha8Rng::seed_from_u64(seed)));
        }
    }
    let a = derangement(128, &mut ChaCha8Rng::seed_from_u64(1));
    let b = derangement(128, &mut ChaCha8Rng::seed_from_u64(2));
    assert_ne!(a, b, "different seeds, different derangements");
}

#[test]
fn permutation_sends_and_receives_once_per_host() {
    let mut b = FlowBuilder::new();
    permutation(
        &mut b,
        &hosts(128),
        &FlowTemplate::default(),
        &mut ChaCha8Rng::seed_from_u64(1),
    );
    let flows = b.finish().unwrap();
    assert_eq!(flows.len(), 128);
    let mut rx = vec![0; 128];
    for f in &flows {
        assert_ne!(f.src, f.dst);
        rx[f.dst.0 as usize] += 1;
    }
    assert!(rx.iter().all(|&c| c == 1));
}

#[test]
fn incast_and_all_to_all_counts_and_qp_split() {
    let t = FlowTemplate {
        size: 1_000_001,
        qps_per_pair: 4,
        ..FlowTemplate::default()
    };
    let mut b = FlowBuilder::new();
    incast(&mut b, &hosts(17)[1..], NodeId(0), &t);
    let flows = b.finish().unwrap();
    assert_eq!(flows.len(), 16 * 4);
    assert!(flows.iter().all(|f| f.dst == NodeId(0)));
    // Each pair's bytes split over its 4 QPs, remainder first.
    let pair: Vec<_> = flows.iter().filter(|f| f.src == NodeId(1)).collect();
    assert_eq!(pair.iter().map(|f| f.size).sum::<u64>(), 1_000_001);
    assert_eq!(
        pair.iter().map(|f| f.qp_index).collect::<Vec<_>>(),
        [0, 1, 2, 3]
    );
    assert_eq!(pair[0].size, 250_001);
    assert_eq!(
        flows.iter().map(|f| f.id).collect::<Vec<_>>(),
        (0..64).collect::<Vec<_>>()
    );

    let mut b = FlowBuilder::new();
    all_to_all(&mut b, &hosts(9), &FlowTemplate::default());
    assert_eq!(b.finish().unwrap().len(), 9 * 8);
}

#[test]
fn ring_allreduce_steps_wait_for_the_previous_chunk() {
    let n = 8u32;
    let t = FlowTemplate {
        size: 8_000_003,
        ..FlowTemplate::default()
    };
    let mut b = FlowBuilder::new();
    let group = ring_allreduce(&mut b, &hosts(n), &t);
    let flows = b.finish().unwrap();
    assert_eq!(flows.len() as u32, 2 * (n - 1) * n);
    assert!(flows.iter().all(|f| f.group == Some(group)));
    // The first step waits for nothing, every later one for two flows:
    // the chunk from the previous host and its own previous send.
    let first = flows.iter().filter(|f| f.after.is_empty()).count() as u32;
    assert_eq!(first, n);
    for f in &flows {
        assert!(f.after.iter().all(|&a| a < f.id), "dependencies sort first");
        if !f.after.is_empty() {
            assert_eq!(f.after.len(), 2);
            let srcs: Vec<NodeId> = f.after.iter().map(|&a| flows[a as usize].src).collect();
            let prev = NodeId((f.src.0 + n - 1) % n);
            assert!(srcs.contains(&prev) && srcs.contains(&f.src), "{f:?}");
        }
        assert_eq!(f.dst.0, (f.src.0 + 1) % n);
    }
    // Each host sends 2(N-1) chunks: 2(N-1)/N of the buffer, give or take
    // the remainder bytes.
    let mut sent = BTreeMap::new();
    for f in &flows {
        *sent.entry(f.src).or_insert(0u64) += f.size;
    }
    let ideal = 2 * (u64::from(n) - 1) * t.size / u64::from(n);
    for (&h, &s) in &sent {
        assert!(s.abs_diff(ideal) <= 16, "{h:?}: {s} vs {ideal}");
    }
}

#[test]
fn cdf_means_match_the_published_values_and_sampling() {
    // VALIDATION.md: trapezoid means of the HPCC artifact's CDFs.
    for (name, mean) in [
        ("websearch", 1_711_250.0),
        ("fb_hadoop", 120_420.75),
        ("alistorage2019", 40_869.8),
    ] {
        let cdf = FlowSizeCdf::builtin(name).unwrap();
        assert!((cdf.mean() - mean).abs() < 0.5, "{name}: {}", cdf.mean());
        let mut rng = ChaCha8Rng::seed_from_u64(42);
        let n = 300_000;
        let sum: u64 = (0..n).map(|_| cdf.sample(&mut rng)).sum();
        let sampled = sum as f64 / n as f64;
        assert!(
            (sampled / mean - 1.0).abs() < 0.02,
            "{name}: sampled mean {sampled} vs {mean}"
        );
    }
}

#[test]
fn poisson_arrivals_hit_the_target_load() {
    let cdf = FlowSizeCdf::builtin("fb_hadoop").unwrap();
    let h = hosts(16);
    let rates = vec![Rate::from_gbps(100); 16];
    let window = Duration::from_ms(5);
    let mut b = FlowBuilder::new();
    let t = FlowTemplate::default();
    poisson(
        &mut b,
        &h,
        &rates,
        &cdf,
        0.3,
        window,
        &t,
        &mut ChaCha8Rng::seed_from_u64(3),
    );
    let flows = b.finish().unwrap();
    // Mean gap = mean size * 8 / (100G * 0.3) = 32.1 us (VALIDATION.md).
    let gap_us = cdf.mean() * 8.0 / 30e9 * 1e6;
    assert!((gap_us - 32.1).abs() < 0.1, "{gap_us}");
    // WebSearch at 30%: 456 us per host (VALIDATION.md HPCC-1).
    let ws = FlowSizeCdf::builtin("websearch").unwrap().mean() * 8.0 / 30e9 * 1e6;
    assert!((ws - 456.3).abs() < 0.5, "{ws}");
    let expected = 16.0 * 5000.0 / gap_us;
    let got = flows.len() as f64;
    assert!(
        (got / expected - 1.0).abs() < 0.05,
        "{got} flows, expected about {expected}"
    );
    let end = Instant::ZERO + window;
    assert!(flows.iter().all(|f| f.start < end && f.src != f.dst));
    assert!(
        flows.windows(2).all(|w| w[0].start <= w[1].start),
        "sorted by start"
    );
    let bytes: u64 = flows.iter().map(|f| f.size).sum();
    let load = bytes as f64 * 8.0 / (16.0 * 100e9 * 0.005);
    assert!((load - 0.3).abs() < 0.05, "offered load {load}");
}

#[test]
fn finish_orders_dependencies_first_and_rejects_cycles() {
    let mut b = FlowBuilder::new();
    let t = FlowTemplate::default();
    // Flow 0 waits for flow 1, which starts later: it must sort after it.
    let late = FlowTemplate {
        start: Instant::from_ps(5_000_000),
        ..t
    };
    b.pair(NodeId(0), NodeId(1), 10, Instant::ZERO, &t, None, &[1]);
    b.pair(NodeId(2), NodeId(3), 10, late.start, &late, None, &[]);
    let flows = b.finish().unwrap();
    assert_eq!(flows[0].src, NodeId(2));
    assert_eq!(flows[1].after, vec![0]);

    let mut cyc = FlowBuilder::new();
    cyc.pair(NodeId(0), NodeId(1), 10, Instant::ZERO, &t, None, &[1]);
    cyc.pair(NodeId(1), NodeId(0), 10, Instant::ZERO, &t, None, &[0]);
    assert!(matches!(
        finish(cyc.flows().to_vec()),
        Err(DependencyError::Cycle { .. })
    ));
}
