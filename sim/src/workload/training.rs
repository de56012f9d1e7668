//! Training jobs: steps of compute phases and collectives per GPU, as a
//! data-, tensor- and expert-parallel job runs them, and what a step
//! cost ([`steps`]).
//!
//! # Layout
//!
//! A job's ranks are GPUs `0..gpus` of each of its servers, server-major
//! (rank `k * gpus + g`). Tensor parallelism (`tp`) is innermost: GPUs
//! `q*tp .. q*tp + tp` of a server form a tensor-parallel group, and the
//! GPUs with the same index in their group (`g mod tp`), on every server,
//! form a data-parallel group; a mixture-of-experts layer's all-to-all
//! runs in the data-parallel group (expert parallelism across it).
//!
//! # A step, per rank
//!
//! 1. **Forward**, layer by layer: the layer's compute in two halves
//!    (attention, MLP), each followed by a tensor-parallel all-reduce of
//!    `tp_bytes` when `tp > 1` (Megatron's two per layer); on a MoE
//!    layer (`moe_bytes > 0`) an all-to-all before and after the MLP
//!    half's compute (dispatch, combine).
//! 2. **Backward**, the layers in reverse, the same collectives; the
//!    gradients fill `buckets` buckets as layers finish (bucket `k` is
//!    ready after the backward of layers up to `(k+1) L / buckets`), and
//!    each ready bucket's all-reduce (`grad_bytes / buckets`) runs on the
//!    data-parallel communicator's own stream: after the bucket's
//!    compute and the bucket before it, overlapping the backward compute
//!    that follows (PyTorch DDP's overlap).
//! 3. **Optimizer**: after the backward and every bucket's all-reduce.
//!
//! The next step's forward starts after the optimizer. Compute phases
//! are durations (the given `forward`, `backward` and `optimizer` per
//! step, split evenly over layers and halves); collectives are the
//! collectives module's, NCCL's algorithms and protocols on the
//! simulated fabric and NVLink. Every compute phase and collective call
//! is a group (all ranks' part of it), tagged with its step and part.
//!
//! # The overlap rule
//!
//! A step starts at its first forward compute and ends when its last
//! optimizer compute does. Its compute time is the compute phases'
//! union; a collective's **exposed** time is the part of its span
//! (first post to last finish, over all ranks) that neither a compute
//! phase of the step nor an earlier collective's exposed part covers:
//! with no contention, step time = compute + the exposed parts.

use roce::time::Duration;

use super::builder::{FlowBuilder, FlowTemplate};
use super::collectives::{Communicator, Ranks};
use super::nccl_tests::Collective;
use super::{GroupSpec, PartKind, TrainingPart};
use crate::nccl_model::Enabled;
use crate::results::{GroupRecord, StepRecord, TrainingRecord};
use crate::topology::Topology;

/// A training job's shape: what each step computes and communicates.
#[derive(Debug, Clone, PartialEq)]
pub struct Training {
    /// Steps run back to back.
    pub steps: u32,
    /// Transformer layers (each one forward and one backward phase).
    pub layers: u32,
    /// Tensor-parallel degree: GPUs of a server per group (divides the
    /// job's GPUs per server).
    pub tp: u32,
    /// Forward compute of a step, all layers.
    pub forward: Duration,
    /// Backward compute of a step, all layers.
    pub backward: Duration,
    /// Optimizer compute of a step.
    pub optimizer: Duration,
    /// Gradient bytes per rank the data-parallel all-reduce reduces in a
    /// step (0: no data-parallel all-reduce).
    pub grad_bytes: u64,
    /// Gradient buckets (1 to `layers`).
    pub buckets: u32,
    /// Bytes of each tensor-parallel all-reduce (activations).
    pub tp_bytes: u64,
    /// Bytes each rank sends in a MoE layer's all-to-all (0: no MoE).
    pub moe_bytes: u64,
}

/// Ranks that run one collective call, and their global rank numbers.
struct Group {
    ranks: Ranks,
    global: Vec<usize>,
}

/// Build `spec`'s steps on GPUs `0..gpus` of `servers` (indices of
/// `topo`'s GPU servers), `channels` rings per communicator (`None`: two
/// per NIC its GPUs use), NCCL picking among `enabled`. Groups are named
/// `NAME/step S/LABEL`. Fails naming what does not fit.
#[allow(clippy::too_many_arguments)]
pub fn training(
    b: &mut FlowBuilder,
    topo: &Topology,
    servers: &[u32],
    gpus: u32,
    channels: Option<u32>,
    spec: &Training,
    t: &FlowTemplate,
    name: &str,
    enabled: &Enabled,
) -> Result<(), String> {
    let per = gpus as usize;
    let n = servers.len() * per;
    let tp = spec.tp.max(1) as usize;
    let g = topo
        .gpu
        .ok_or("the topology has no GPU servers: a training job's ranks are GPUs")?;
    let channels_for = |nics: usize| channels.unwrap_or((2 * nics as u32).min(64));
    let members = |list: &[u32], on: &[u32]| {
        let mut rails: Vec<u32> = list.iter().map(|&x| g.rail_of(x)).collect();
        rails.dedup();
        Ranks::members(topo, on, list, channels_for(rails.len()))
            .map(|r| r.on(topo))
            .ok_or_else(|| format!("GPUs {list:?} of servers {on:?}: not in the topology"))
    };
    // Data-parallel groups: GPU index j mod tp, on every server.
    let mut dp = Vec::new();
    if n / tp >= 2 {
        for j in 0..tp {
            let list: Vec<u32> = (j..per).step_by(tp).map(|x| x as u32).collect();
            let ranks = members(&list, servers)?;
            let global = (0..servers.len())
                .flat_map(|k| list.iter().map(move |&x| k * per + x as usize))
                .collect();
            dp.push(Group { ranks, global });
        }
    }
    // Tensor-parallel groups: tp consecutive GPUs of a server.
    let mut tpg = Vec::new();
    if tp >= 2 {
        for (k, &s) in servers.iter().enumerate() {
            for q in 0..per / tp {
                let list: Vec<u32> = ((q * tp)..(q + 1) * tp).map(|x| x as u32).collect();
                let ranks = members(&list, &[s])?;
                let global = list.iter().map(|&x| k * per + x as usize).collect();
                tpg.push(Group { ranks, global });
            }
        }
    }
    let dp_comms: Vec<Communicator<'_>> = dp
        .iter()
        .map(|d| Communicator::new(&d.ranks, enabled))
        .collect();
    let tp_comms: Vec<Communicator<'_>> = tpg
        .iter()
        .map(|d| Communicator::new(&d.ranks, enabled))
        .collect();
    let layers = spec.layers.max(1);
    let buckets = spec.buckets.clamp(1, layers);
    let marker_ranks = dp
        .first()
        .or(tpg.first())
        .map(|x| &x.ranks)
        .ok_or("a training job needs at least two GPUs")?;
    // Per rank: what its compute stream waits for next, and what its
    // data-parallel stream's next all-reduce waits for.
    let mut cur: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut dpq: Vec<Vec<u32>> = vec![Vec::new(); n];
    let tag = |step: u32, label: String, kind: PartKind| GroupSpec {
        name: format!("{name}/step {step}/{label}"),
        kind: "training".into(),
        ring: None,
        perftest: None,
        nccl: None,
        training: Some(TrainingPart {
            job: name.to_string(),
            step,
            label,
            kind,
        }),
    };
    // A compute phase of `d` on every rank, after what each waits for.
    let compute = |b: &mut FlowBuilder, cur: &mut Vec<Vec<u32>>, step, label: String, d| {
        let gid = b.new_group(tag(step, label, PartKind::Compute(d)));
        for c in cur.iter_mut() {
            let m = marker_ranks.marker(b, t, gid, c, d);
            *c = vec![m];
        }
    };
    // One call of `c` (`size`, nccl-tests' meaning) in every group of
    // `comms`; each rank's part after `wait[rank]`, the flows it must
    // see finished after it returned by rank.
    let collective = |b: &mut FlowBuilder,
                      comms: &[Communicator<'_>],
                      groups: &[Group],
                      (c, size): (Collective, u64),
                      (step, label, kind): (u32, String, PartKind),
                      wait: &[Vec<u32>]|
     -> Result<Vec<Vec<u32>>, String> {
        let gid = b.new_group(tag(step, label, kind));
        let mut out = vec![Vec::new(); n];
        for (comm, grp) in comms.iter().zip(groups) {
            let done: Vec<Vec<u32>> = grp.global.iter().map(|&r| wait[r].clone()).collect();
            let next = comm.call_in(b, c, size, t, gid, &done)?;
            for (i, ids) in next.into_iter().enumerate() {
                out[grp.global[i]] = ids;
            }
        }
        Ok(out)
    };
    let half = |d: Duration| Duration::from_ps(d.as_ps() / u64::from(2 * layers));
    let moe = spec.moe_bytes > 0 && !dp.is_empty();
    for step in 0..spec.steps {
        for (phase, total) in [("forward", spec.forward), ("backward", spec.backward)] {
            let order: Vec<u32> = if phase == "forward" {
                (0..layers).collect()
            } else {
                (0..layers).rev().collect()
            };
            for (idx, &l) in order.iter().enumerate() {
                for part in ["attention", "mlp"] {
                    if part == "mlp" && moe {
                        cur = collective(
                            b,
                            &dp_comms,
                            &dp,
                            (Collective::AllToAll, spec.moe_bytes),
                            (
                                step,
                                format!("{phase} L{l} moe alltoall dispatch"),
                                PartKind::Blocking,
                            ),
                            &cur,
                        )?;
                    }
                    compute(
                        b,
                        &mut cur,
                        step,
                        format!("{phase} L{l} {part}"),
                        half(total),
                    );
                    if part == "mlp" && moe {
                        cur = collective(
                            b,
                            &dp_comms,
                            &dp,
                            (Collective::AllToAll, spec.moe_bytes),
                            (
                                step,
                                format!("{phase} L{l} moe alltoall combine"),
                                PartKind::Blocking,
                            ),
                            &cur,
                        )?;
                    }
                    if tp >= 2 && spec.tp_bytes > 0 {
                        cur = collective(
                            b,
                            &tp_comms,
                            &tpg,
                            (Collective::AllReduce, spec.tp_bytes),
                            (
                                step,
                                format!("{phase} L{l} {part} tp all_reduce"),
                                PartKind::Blocking,
                            ),
                            &cur,
                        )?;
                    }
                }
                // A gradient bucket fills as the backward passes it.
                let idx = idx as u64 + 1;
                let (bk, ly) = (u64::from(buckets), u64::from(layers));
                if phase == "backward"
                    && spec.grad_bytes > 0
                    && !dp.is_empty()
                    && idx * bk / ly != (idx - 1) * bk / ly
                {
                    let k = (idx * bk / ly - 1) as u32;
                    let size = bucket_bytes(spec.grad_bytes, buckets, k);
                    let wait: Vec<Vec<u32>> = (0..n)
                        .map(|r| cur[r].iter().chain(&dpq[r]).copied().collect())
                        .collect();
                    dpq = collective(
                        b,
                        &dp_comms,
                        &dp,
                        (Collective::AllReduce, size),
                        (
                            step,
                            format!("dp all_reduce bucket {k}"),
                            PartKind::Background,
                        ),
                        &wait,
                    )?;
                }
            }
        }
        for (c, q) in cur.iter_mut().zip(dpq.iter_mut()) {
            c.append(q);
        }
        compute(b, &mut cur, step, "optimizer".into(), spec.optimizer);
    }
    Ok(())
}

/// Bucket `k`'s bytes of `total` over `buckets`, in whole 16-byte units
/// (nccl-tests' sizes), the first buckets taking the remainder.
fn bucket_bytes(total: u64, buckets: u32, k: u32) -> u64 {
    let units = total.div_ceil(16);
    let per = units / u64::from(buckets);
    let extra = u64::from(u64::from(k) < units % u64::from(buckets));
    ((per + extra) * 16).max(16)
}

/// The steps of every training job among `specs` (the run's groups,
/// `records` their results in the same order), by job in the order the
/// jobs first appear; see the module docs for the overlap rule.
pub fn steps(specs: &[GroupSpec], records: &[GroupRecord]) -> Vec<TrainingRecord> {
    let mut jobs: Vec<TrainingRecord> = Vec::new();
    // Per job and step: its groups' parts and results.
    let mut parts: Vec<Vec<Vec<(&TrainingPart, &GroupRecord)>>> = Vec::new();
    for (s, r) in specs.iter().zip(records) {
        let Some(p) = &s.training else { continue };
        let j = match jobs.iter().position(|x| x.job == p.job) {
            Some(j) => j,
            None => {
                jobs.push(TrainingRecord {
                    job: p.job.clone(),
                    steps: Vec::new(),
                    mean_step_ps: None,
                    critical: None,
                    alone_mean_step_ps: None,
                    slowdown: None,
                    shared_links: Vec::new(),
                    paused: Vec::new(),
                });
                parts.push(Vec::new());
                jobs.len() - 1
            }
        };
        let st = p.step as usize;
        if parts[j].len() <= st {
            parts[j].resize_with(st + 1, Vec::new);
        }
        parts[j][st].push((p, r));
    }
    for (job, steps) in jobs.iter_mut().zip(parts) {
        for (i, groups) in steps.into_iter().enumerate() {
            job.steps.push(step_record(i as u32, &groups));
        }
        let done: Vec<u64> = job.steps.iter().filter_map(|s| s.time_ps).collect();
        if done.len() == job.steps.len() && !done.is_empty() {
            job.mean_step_ps = Some(done.iter().sum::<u64>() / done.len() as u64);
        }
        // The collective exposed longest over all steps (by label).
        let mut total: Vec<(&str, u64)> = Vec::new();
        for c in job.steps.iter().flat_map(|s| &s.collectives) {
            match total.iter_mut().find(|x| x.0 == c.label) {
                Some(x) => x.1 += c.exposed_ps,
                None => total.push((&c.label, c.exposed_ps)),
            }
        }
        job.critical = total
            .iter()
            .filter(|x| x.1 > 0)
            .fold(None::<(&str, u64)>, |best, &x| match best {
                Some(b) if b.1 >= x.1 => Some(b),
                _ => Some(x),
            })
            .map(|x| x.0.to_string());
    }
    jobs
}

/// Fill `together`'s baseline from the same job's record when it ran
/// alone (`alone`): its mean step time there and the slowdown.
pub fn set_alone(together: &mut TrainingRecord, alone: &TrainingRecord) {
    together.alone_mean_step_ps = alone.mean_step_ps;
    together.slowdown = match (together.mean_step_ps, alone.mean_step_ps) {
        (Some(t), Some(a)) if a > 0 => Some(t as f64 / a as f64),
        _ => None,
    };
}

/// One step's record from its groups (in the order they were built):
/// blocking collectives are exposed where compute does not cover them,
/// background ones where neither compute nor a blocking collective nor
/// an earlier exposed part does (see the module docs).
fn step_record(step: u32, groups: &[(&TrainingPart, &GroupRecord)]) -> StepRecord {
    let span = |r: &GroupRecord| r.start_ps.zip(r.finish_ps);
    let complete = groups.iter().all(|(_, r)| r.step_time_ps.is_some());
    let spans_of = |want: fn(PartKind) -> bool| -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = groups
            .iter()
            .filter(|(p, _)| want(p.kind))
            .filter_map(|(_, r)| span(r))
            .collect();
        v.sort_unstable();
        merge(v)
    };
    let mut covered = spans_of(|k| matches!(k, PartKind::Compute(_)));
    let start = groups.iter().filter_map(|(_, r)| r.start_ps).min();
    let finish = groups.iter().filter_map(|(_, r)| r.finish_ps).max();
    // Exposed parts, by group index: blocking collectives first (they
    // hold the compute stream), then the background ones.
    let mut exposed = vec![0u64; groups.len()];
    for pass in [PartKind::Blocking, PartKind::Background] {
        for (i, (p, r)) in groups.iter().enumerate() {
            if p.kind != pass {
                continue;
            }
            let Some((a, z)) = span(r) else { continue };
            exposed[i] = uncovered((a, z), &covered);
            covered.push((a, z));
            covered.sort_unstable();
            covered = merge(std::mem::take(&mut covered));
        }
    }
    let mut collectives = Vec::new();
    for (i, (p, r)) in groups.iter().enumerate() {
        if matches!(p.kind, PartKind::Compute(_)) {
            continue;
        }
        let Some((a, z)) = span(r) else { continue };
        collectives.push(crate::results::StepCollective {
            label: p.label.clone(),
            time_ps: z - a,
            exposed_ps: exposed[i],
            limit: r.limit.clone(),
            bottleneck: r.bottleneck.clone(),
            last_host: r.last_host.clone(),
        });
    }
    let compute_ps: u64 = groups
        .iter()
        .filter_map(|(p, _)| match p.kind {
            PartKind::Compute(d) => Some(d.as_ps()),
            _ => None,
        })
        .sum();
    let time = match (start, finish) {
        (Some(a), Some(z)) if complete => Some(z - a),
        _ => None,
    };
    let critical = collectives
        .iter()
        .max_by_key(|c| c.exposed_ps)
        .filter(|c| c.exposed_ps > 0)
        .map(|c| c.label.clone());
    StepRecord {
        step,
        start_ps: start,
        finish_ps: finish,
        time_ps: time,
        compute_ps,
        exposed_ps: collectives.iter().map(|c| c.exposed_ps).sum(),
        critical,
        collectives,
    }
}

/// Sorted intervals merged where they touch or overlap.
fn merge(v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, z) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(z),
            _ => out.push((a, z)),
        }
    }
    out
}

/// The length of `(a, z)` that no interval of `covered` (sorted,
/// disjoint) covers.
fn uncovered((a, z): (u64, u64), covered: &[(u64, u64)]) -> u64 {
    let hidden: u64 = covered
        .iter()
        .map(|&(x, y)| y.min(z).saturating_sub(x.max(a)))
        .sum();
    (z - a).saturating_sub(hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Intervals merge where they meet; the uncovered part of a span is
    /// what no merged interval covers.
    #[test]
    fn exposed_time_is_what_compute_does_not_cover() {
        let m = merge(vec![(0, 10), (5, 20), (20, 25), (30, 40)]);
        assert_eq!(m, vec![(0, 25), (30, 40)]);
        assert_eq!(uncovered((20, 35), &m), 5);
        assert_eq!(uncovered((26, 29), &m), 3);
        assert_eq!(uncovered((0, 40), &m), 5);
    }

    /// Buckets split the gradients in 16-byte units, the first taking
    /// the remainder, and never go below one unit.
    #[test]
    fn buckets_split_the_gradients_in_whole_units() {
        let total: u64 = (0..3).map(|k| bucket_bytes(1600, 3, k)).sum();
        assert_eq!(total, 1600);
        assert_eq!(bucket_bytes(1600, 3, 0), 544);
        assert_eq!(bucket_bytes(1600, 3, 2), 528);
        assert_eq!(bucket_bytes(16, 4, 3), 16);
    }
}
