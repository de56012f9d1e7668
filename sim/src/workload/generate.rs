//! Workload generators.
//!
//! Generators append flows to a [`FlowBuilder`], which hands out unique
//! ids and splits each (source, destination) pair's bytes over its queue
//! pairs; [`FlowBuilder::finish`] gives the final, sorted list. Random
//! choices take the caller's RNG (a seeded `ChaCha8Rng`), so the same seed
//! gives the same flows.

use rand::seq::SliceRandom;
use rand::Rng;
use roce::time::{Duration, Rate};

pub use super::builder::{FlowBuilder, FlowTemplate};
pub use super::collectives::{nccl_tests, ring_allreduce};
use super::perftest::{PerftestRow, PerftestSpec};
use super::{FlowOp, FlowShape, FlowSizeCdf, GroupSpec, PostLoop};
use crate::topology::NodeId;

/// N:1 incast: every sender sends `t.size` bytes to `receiver`.
pub fn incast(b: &mut FlowBuilder, senders: &[NodeId], receiver: NodeId, t: &FlowTemplate) {
    for &s in senders {
        if s != receiver {
            b.pair(s, receiver, t.size, t.start, t, None, &[]);
        }
    }
}

/// A uniformly random derangement of `0..n` (a permutation without fixed
/// points), by rejection of Fisher-Yates shuffles (e tries on average).
/// `n < 2` has none: returns the identity for 0 and 1.
pub fn derangement<R: Rng + ?Sized>(n: usize, rng: &mut R) -> Vec<usize> {
    let mut p: Vec<usize> = (0..n).collect();
    if n < 2 {
        return p;
    }
    loop {
        p.shuffle(rng);
        if p.iter().enumerate().all(|(i, &v)| i != v) {
            return p;
        }
    }
}

/// Permutation traffic: host `i` sends to host `d(i)` for a random
/// derangement `d`; every host sends once and receives once.
pub fn permutation<R: Rng + ?Sized>(
    b: &mut FlowBuilder,
    hosts: &[NodeId],
    t: &FlowTemplate,
    rng: &mut R,
) {
    let d = derangement(hosts.len(), rng);
    if hosts.len() < 2 {
        return;
    }
    for (i, &j) in d.iter().enumerate() {
        b.pair(hosts[i], hosts[j], t.size, t.start, t, None, &[]);
    }
}

/// All-to-all: every ordered pair of distinct hosts.
pub fn all_to_all(b: &mut FlowBuilder, hosts: &[NodeId], t: &FlowTemplate) {
    for &s in hosts {
        for &d in hosts {
            if s != d {
                b.pair(s, d, t.size, t.start, t, None, &[]);
            }
        }
    }
}

/// Poisson arrivals: each host in `hosts` starts flows at exponential
/// intervals of mean `mean_size * 8 / (rate * load)` (its link rate
/// `rates[i]`, `load` counting payload bytes as the HPCC artifact does),
/// from `t.start` until `t.start + window`; each flow goes to a uniformly
/// chosen other host with a size drawn from `cdf`. `t.size` is ignored.
#[allow(clippy::too_many_arguments)]
pub fn poisson<R: Rng + ?Sized>(
    b: &mut FlowBuilder,
    hosts: &[NodeId],
    rates: &[Rate],
    cdf: &FlowSizeCdf,
    load: f64,
    window: Duration,
    t: &FlowTemplate,
    rng: &mut R,
) {
    if hosts.len() < 2 || load.is_nan() || load <= 0.0 {
        return;
    }
    let end = t.start.saturating_add(window);
    let mean_bits = cdf.mean() * 8.0;
    for (i, &src) in hosts.iter().enumerate() {
        let rate = rates.get(i).map_or(0, |r| r.bps()) as f64;
        if rate <= 0.0 {
            continue;
        }
        // Mean gap in picoseconds.
        let mean_gap_ps = mean_bits / (rate * load) * 1e12;
        let mut now = t.start;
        loop {
            let u: f64 = rng.gen::<f64>();
            let gap = -(1.0 - u).ln() * mean_gap_ps;
            now = now.saturating_add(Duration::from_ps(gap.round() as u64));
            if now >= end {
                break;
            }
            let mut j = rng.gen_range(0..hosts.len() - 1);
            if j >= i {
                j += 1;
            }
            let size = cdf.sample(rng);
            b.pair(src, hosts[j], size, now, t, None, &[]);
        }
    }
}

/// A single perftest-like flow.
pub fn single(b: &mut FlowBuilder, src: NodeId, dst: NodeId, t: &FlowTemplate) {
    b.pair(src, dst, t.size, t.start, t, None, &[]);
}

/// Add the flows of perftest run `spec` (see [`super::perftest`]) from
/// `client` to `server`, starting at
/// `t.start` with priority `t.priority`; returns the groups, one per
/// size, in order.
pub fn perftest(
    b: &mut FlowBuilder,
    client: NodeId,
    server: NodeId,
    spec: &PerftestSpec,
    t: &FlowTemplate,
    name: &str,
) -> Vec<u32> {
    let mut groups = Vec::new();
    let mut prev: Vec<u32> = Vec::new();
    for &size in &spec.sizes {
        let g = b.new_group(GroupSpec {
            name: format!("{name}-{size}"),
            kind: "perftest".into(),
            ring: None,
            nccl: None,
            perftest: Some(PerftestRow {
                test: spec.test,
                size,
                qps: spec.qps,
                bidirectional: spec.bidirectional && spec.test.is_bw(),
                tx_depth: spec.tx_depth,
                cq_mod: spec.cq_mod,
                inline: spec.inline,
                timed: spec.duration.is_some(),
            }),
            training: None,
        });
        groups.push(g);
        let inline = size <= u64::from(spec.inline) && spec.test.op() != FlowOp::Read;
        let msgs = match spec.duration {
            // Bounded by the deadline; enough that it is never the limit.
            Some(_) => u64::from(u32::MAX),
            None => spec.iters.max(1),
        };
        let deadline = spec.duration;
        let mut ids = Vec::new();
        if spec.test.is_bw() {
            let dirs: &[(NodeId, NodeId)] = if spec.bidirectional {
                &[(client, server), (server, client)]
            } else {
                &[(client, server)]
            };
            for &(s, d) in dirs {
                for q in 0..spec.qps.max(1) {
                    let id = b.push_flow(
                        s,
                        d,
                        FlowShape {
                            op: spec.test.op(),
                            size: msgs * size,
                            message_size: size,
                            qp_index: q,
                            start: t.start,
                            priority: t.priority,
                        },
                        Some(g),
                        &prev,
                        PostLoop {
                            depth: spec.tx_depth.max(1),
                            moderation: spec.cq_mod.clamp(1, spec.tx_depth.max(1)),
                            inline,
                            partner: None,
                            lead: false,
                            deadline,
                            record_posts: false,
                        },
                    );
                    ids.push(id);
                }
            }
        } else {
            let shape = || FlowShape {
                op: spec.test.op(),
                size: msgs * size,
                message_size: size,
                qp_index: 0,
                start: t.start,
                priority: t.priority,
            };
            let lp = PostLoop {
                depth: 1,
                moderation: 1,
                inline,
                partner: None,
                lead: true,
                deadline,
                record_posts: true,
            };
            let ping = b.push_flow(client, server, shape(), Some(g), &prev, lp);
            ids.push(ping);
            if spec.test.op() != FlowOp::Read {
                let pong = b.push_flow(
                    server,
                    client,
                    shape(),
                    Some(g),
                    &prev,
                    PostLoop {
                        lead: false,
                        record_posts: false,
                        partner: Some(ping),
                        ..lp
                    },
                );
                b.set_partner(ping, pong);
                ids.push(pong);
            }
        }
        prev = ids;
    }
    groups
}
