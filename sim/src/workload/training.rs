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
//! Each rank runs its compute phases one after another; the time between
//! one phase's end and the next one's start is time it waited, and is
//! **exposed** communication of what that phase waited for: the blocking
//! collectives issued since the phase before, and for the optimizer also
//! the step's bucket all-reduces (split in issue order, each up to its
//! finish). A bucket's all-reduce that ends while the backward still
//! computes is hidden: nothing waits for it. A step's record is the rank
//! that finished it last, over its span from its previous step's end:
//! step time = compute + the exposed parts, exactly, contention or not.

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
    // Where each rank's compute markers go: its server's first NIC and
    // its GPU.
    let hosts = topo.hosts();
    let at: Vec<(crate::topology::NodeId, u32)> = (0..n)
        .map(|r| {
            let s = servers[r / per];
            (hosts[g.host_index(s, 0) as usize], (r % per) as u32)
        })
        .collect();
    // A compute phase of `d` on every rank, after what each waits for.
    let compute = |b: &mut FlowBuilder, cur: &mut Vec<Vec<u32>>, step, label: String, d| {
        let gid = b.new_group(tag(step, label, PartKind::Compute(d)));
        for (r, c) in cur.iter_mut().enumerate() {
            let m = marker_ranks.marker_on(b, t, gid, at[r], c, d);
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
        compute(b, &mut cur, step, OPTIMIZER.into(), spec.optimizer);
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

/// When each rank ran one compute phase: per rank (its key: the
/// topology's GPU number, `server * gpus + gpu`), the phase's release
/// and end, picoseconds.
pub type ComputeTimes = Vec<(u64, u64, u64)>;

/// The steps of every training job among `specs` (the run's groups,
/// `records` their results in the same order, `times` each compute
/// group's per-rank times by group index), by job in the order the jobs
/// first appear; see the module docs for the overlap rule.
pub fn steps(
    specs: &[GroupSpec],
    records: &[GroupRecord],
    times: &std::collections::HashMap<u32, ComputeTimes>,
) -> Vec<TrainingRecord> {
    let mut names: Vec<&str> = Vec::new();
    for s in specs {
        if let Some(p) = &s.training {
            if !names.contains(&p.job.as_str()) {
                names.push(&p.job);
            }
        }
    }
    names
        .into_iter()
        .map(|job| {
            let groups: Vec<(u32, &TrainingPart, &GroupRecord)> = specs
                .iter()
                .zip(records)
                .enumerate()
                .filter_map(|(i, (s, r))| {
                    let p = s.training.as_ref().filter(|p| p.job == job)?;
                    Some((i as u32, p, r))
                })
                .collect();
            job_record(job, &groups, times)
        })
        .collect()
}

/// One rank's time line: its compute phases and the gaps between them,
/// each gap split over the collectives it waited for, end to end; and
/// the end of its optimizer in each step.
#[derive(Default, Clone)]
struct RankLine {
    /// (from, to, `None` for compute or `Some(position)` of the
    /// collective the time was exposed to), picoseconds.
    spans: Vec<(u64, u64, Option<usize>)>,
    /// Per step: when its optimizer ended.
    ends: Vec<Option<u64>>,
}

/// A job's record from its groups (index, part, result) in build order.
///
/// Per rank, the compute phases run one after another; the gap before a
/// phase (from the end of the one before, or the job's start) is time
/// the rank waited, split over what the phase waited for in issue
/// order: the blocking collectives issued since the phase before, and
/// for the optimizer also the step's background all-reduces; each takes
/// the gap up to its finish, the last the rest. Step `s` ends when the
/// last rank's optimizer does (`T_s`); its time is `T_s - T_{s-1}` (the
/// first from the job's start), broken down along the rank that ended it
/// last: its compute and exposed spans inside that window, which tile
/// it.
fn job_record(
    job: &str,
    groups: &[(u32, &TrainingPart, &GroupRecord)],
    times: &std::collections::HashMap<u32, ComputeTimes>,
) -> TrainingRecord {
    use std::collections::BTreeMap;
    let steps_n = groups.iter().map(|g| g.1.step + 1).max().unwrap_or(0) as usize;
    let mut lines: BTreeMap<u64, RankLine> = BTreeMap::new();
    for (gi, p, _) in groups {
        if matches!(p.kind, PartKind::Compute(_)) {
            for &(k, _, _) in times.get(gi).map(Vec::as_slice).unwrap_or(&[]) {
                lines.entry(k).or_insert_with(|| RankLine {
                    spans: Vec::new(),
                    ends: vec![None; steps_n],
                });
            }
        }
    }
    let job_start = groups
        .iter()
        .filter(|g| matches!(g.1.kind, PartKind::Compute(_)))
        .find_map(|g| times.get(&g.0))
        .and_then(|t| t.iter().map(|x| x.1).min())
        .unwrap_or(0);
    for (&key, line) in lines.iter_mut() {
        let mut prev_end = job_start;
        let mut pending: Vec<usize> = Vec::new();
        let mut background: Vec<usize> = Vec::new();
        for (pos, (gi, p, _)) in groups.iter().enumerate() {
            match p.kind {
                PartKind::Blocking => pending.push(pos),
                PartKind::Background => background.push(pos),
                PartKind::Compute(_) => {
                    let mine = times
                        .get(gi)
                        .and_then(|t| t.iter().find(|x| x.0 == key))
                        .map(|x| (x.1, x.2));
                    // A phase that never ran: the rest of the line is
                    // unknown.
                    let Some((rel, end)) = mine else { break };
                    let optimizer = p.label == OPTIMIZER;
                    let mut waited = std::mem::take(&mut pending);
                    if optimizer {
                        waited.append(&mut background);
                    }
                    let mut cursor = prev_end;
                    let last = waited.len().saturating_sub(1);
                    for (i, &w) in waited.iter().enumerate() {
                        let until = if i == last {
                            rel
                        } else {
                            groups[w].2.finish_ps.unwrap_or(rel).clamp(cursor, rel)
                        };
                        if until > cursor {
                            line.spans.push((cursor, until, Some(w)));
                        }
                        cursor = cursor.max(until);
                    }
                    if rel > cursor {
                        // Waiting on nothing it issued (a late start).
                        line.spans.push((cursor, rel, Some(UNATTRIBUTED)));
                    }
                    // The phase's duration; the marker's own few
                    // picoseconds after it are nobody's.
                    let d = match p.kind {
                        PartKind::Compute(d) => d.as_ps(),
                        _ => 0,
                    };
                    let done = (rel + d).min(end);
                    line.spans.push((rel, done, None));
                    if end > done {
                        line.spans.push((done, end, Some(UNATTRIBUTED)));
                    }
                    prev_end = end;
                    if optimizer {
                        line.ends[p.step as usize] = Some(end);
                    }
                }
            }
        }
    }
    let mut steps = Vec::with_capacity(steps_n);
    let mut t_prev = Some(job_start);
    for s in 0..steps_n {
        // The rank that ended the step last (ties: the lowest key).
        let all_done = !lines.is_empty() && lines.values().all(|l| l.ends[s].is_some());
        let last = lines
            .iter()
            .filter_map(|(&k, l)| Some((l.ends[s]?, std::cmp::Reverse(k))))
            .max();
        let window = match (t_prev, last) {
            (Some(a), Some((z, _))) if all_done => Some((a, z)),
            _ => None,
        };
        let mut exposed = vec![0u64; groups.len()];
        let mut compute_ps = 0u64;
        let mut unattributed = 0u64;
        if let (Some((a, z)), Some((_, k))) = (window, last) {
            for &(x, y, what) in &lines[&k.0].spans {
                let d = y.min(z).saturating_sub(x.max(a));
                match what {
                    Some(UNATTRIBUTED) => unattributed += d,
                    Some(pos) => exposed[pos] += d,
                    None => compute_ps += d,
                }
            }
        } else {
            // Unfinished: the compute the step holds.
            compute_ps = groups
                .iter()
                .filter(|g| g.1.step as usize == s)
                .filter_map(|g| match g.1.kind {
                    PartKind::Compute(d) => Some(d.as_ps()),
                    _ => None,
                })
                .sum();
        }
        // A collective's exposed time counts in the step it belongs to
        // when the window caught it (a rank behind still finishing the
        // step before counts there).
        let collectives: Vec<crate::results::StepCollective> = groups
            .iter()
            .enumerate()
            .filter(|(_, g)| g.1.step as usize == s && !matches!(g.1.kind, PartKind::Compute(_)))
            .map(|(i, &(_, p, r))| crate::results::StepCollective {
                label: p.label.clone(),
                time_ps: r.step_time_ps.unwrap_or(0),
                exposed_ps: exposed[i],
                limit: r.limit.clone(),
                bottleneck: r.bottleneck.clone(),
                last_host: r.last_host.clone(),
            })
            .collect();
        // Exposed time of another step's collectives inside this window.
        let carried: u64 = exposed
            .iter()
            .enumerate()
            .filter(|(i, _)| groups[*i].1.step as usize != s)
            .map(|(_, &e)| e)
            .sum();
        let critical = collectives
            .iter()
            .max_by_key(|c| c.exposed_ps)
            .filter(|c| c.exposed_ps > 0)
            .map(|c| c.label.clone());
        steps.push(StepRecord {
            step: s as u32,
            start_ps: window.map(|w| w.0),
            finish_ps: window.map(|w| w.1),
            time_ps: window.map(|(a, z)| z - a),
            compute_ps,
            exposed_ps: collectives.iter().map(|c| c.exposed_ps).sum::<u64>()
                + carried
                + unattributed,
            critical,
            collectives,
            healthy_time_ps: None,
            fault_cost_ps: None,
        });
        t_prev = window.map(|w| w.1);
    }
    let mut rec = TrainingRecord {
        job: job.to_string(),
        steps,
        mean_step_ps: None,
        critical: None,
        alone_mean_step_ps: None,
        slowdown: None,
        shared_links: Vec::new(),
        paused: Vec::new(),
        healthy_mean_step_ps: None,
    };
    let done: Vec<u64> = rec.steps.iter().filter_map(|s| s.time_ps).collect();
    if done.len() == rec.steps.len() && !done.is_empty() {
        rec.mean_step_ps = Some(done.iter().sum::<u64>() / done.len() as u64);
    }
    // The collective exposed longest over all steps (by label).
    let mut total: Vec<(&str, u64)> = Vec::new();
    for c in rec.steps.iter().flat_map(|s| &s.collectives) {
        match total.iter_mut().find(|x| x.0 == c.label) {
            Some(x) => x.1 += c.exposed_ps,
            None => total.push((&c.label, c.exposed_ps)),
        }
    }
    rec.critical = total
        .iter()
        .filter(|x| x.1 > 0)
        .fold(None::<(&str, u64)>, |best, &x| match best {
            Some(b) if b.1 >= x.1 => Some(b),
            _ => Some(x),
        })
        .map(|x| x.0.to_string());
    rec
}

/// The position standing for waiting on nothing the rank issued.
const UNATTRIBUTED: usize = usize::MAX;

/// The optimizer phase's label.
const OPTIMIZER: &str = "optimizer";

/// Fill `together`'s baseline from the same job's record when it ran
/// alone (`alone`): its mean step time there and the slowdown.
pub fn set_alone(together: &mut TrainingRecord, alone: &TrainingRecord) {
    together.alone_mean_step_ps = alone.mean_step_ps;
    together.slowdown = match (together.mean_step_ps, alone.mean_step_ps) {
        (Some(t), Some(a)) if a > 0 => Some(t as f64 / a as f64),
        _ => None,
    };
}

/// Fill `faulty`'s fault-free baseline from `healthy`, the same job
/// in the same variant with its faults taken out: each step's time
/// there and what the faults cost it.
pub fn set_healthy(faulty: &mut TrainingRecord, healthy: &TrainingRecord) {
    faulty.healthy_mean_step_ps = healthy.mean_step_ps;
    for (s, h) in faulty.steps.iter_mut().zip(&healthy.steps) {
        s.healthy_time_ps = h.time_ps;
        s.fault_cost_ps = match (s.time_ps, h.time_ps) {
            (Some(t), Some(b)) => Some(t as i64 - b as i64),
            _ => None,
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
