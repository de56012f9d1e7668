//! Training jobs: steps of compute phases and collectives per GPU, as a
//! data-, tensor-, pipeline- and expert-parallel job runs them, and
//! what a step cost ([`steps`]).
//!
//! # Layout
//!
//! A job's ranks are GPUs `0..gpus` of each of its servers, server-major
//! (rank `k * gpus + g`). Pipeline parallelism (`pp`) is outermost: the
//! servers split into `pp` consecutive runs, stage `s` holding the
//! `s`-th run and layers `s L / pp .. (s+1) L / pp`. Tensor parallelism
//! (`tp`) is innermost: GPUs `q*tp .. q*tp + tp` of a server form a
//! tensor-parallel group, and the GPUs with the same index in their
//! group (`g mod tp`), on every server of a stage, form a data-parallel
//! group; a mixture-of-experts layer's all-to-all runs in the
//! data-parallel group (expert parallelism across it). Between two
//! stages, GPU `g` of a stage's `k`-th server sends to GPU `g` of the
//! next stage's `k`-th server.
//!
//! # A step, per rank
//!
//! A stage runs the forward and the backward of each of `microbatches`
//! microbatches, in the one-forward-one-backward order (PipeDream-Flush,
//! Megatron's default schedule): `pp - s - 1` forwards to fill the
//! pipeline, then a forward and a backward in turn, then the backwards
//! left. Without pipeline stages that is forward, backward per
//! microbatch (gradient accumulation).
//!
//! 1. **A forward**, layer by layer: the layer's compute in two halves
//!    (attention, MLP), each followed by a tensor-parallel all-reduce of
//!    `tp_bytes` when `tp > 1` (Megatron's two per layer); on a MoE
//!    layer (`moe_bytes > 0`) an all-to-all before and after the MLP
//!    half's compute (dispatch, combine). A stage after the first
//!    starts it when the stage before has sent the microbatch's
//!    activations (`pp_bytes` per rank); a stage before the last sends
//!    its own once it ends, without waiting for the transfer.
//! 2. **A backward**, the layers in reverse, the same collectives,
//!    after the gradients of the stage after it (`pp_bytes`), sending
//!    its own to the stage before. In the last microbatch's backward the
//!    gradients fill `buckets` buckets as layers finish (bucket `k` is
//!    ready after the backward of the stage's layers up to
//!    `(k+1) L_s / buckets`), and each ready bucket's all-reduce
//!    (`grad_bytes / buckets`) runs on the data-parallel communicator's
//!    own stream: after the bucket's compute and the bucket before it,
//!    overlapping the backward compute that follows (PyTorch DDP's
//!    overlap, with the earlier microbatches accumulating locally).
//! 3. **Optimizer**: after the last backward and every bucket's
//!    all-reduce.
//!
//! The next step's forwards start after the optimizer. Compute phases
//! are durations: a rank's `forward` and `backward` per step split
//! evenly over its layers, their halves and the microbatches, and the
//! `optimizer`; collectives are the collectives module's, NCCL's
//! algorithms and protocols on the simulated fabric and NVLink. Every
//! compute phase, collective call and transfer between stages is a
//! group (all ranks' part of it, or one stage's), tagged with its step,
//! part and stage.
//!
//! # The overlap rule
//!
//! Each rank runs its compute phases one after another; the time between
//! one phase's end and the next one's start is time it waited, and is
//! **exposed** communication of what that phase waited for: the blocking
//! collectives and transfers between stages issued since the phase
//! before, and for the optimizer also the step's bucket all-reduces
//! (split in issue order, each up to its finish). A transfer from
//! another stage counts only from when it was posted: the wait before
//! it is the pipeline's **bubble** (the other stage still computing). A
//! bucket's all-reduce that ends while the backward still computes is
//! hidden: nothing waits for it. A step's record is the rank that
//! finished it last, over its span from its previous step's end: step
//! time = compute + the exposed parts + the bubble, exactly, contention
//! or not.

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
    /// A rank's forward compute in a step: its layers (all of them, or
    /// its stage's), every microbatch.
    pub forward: Duration,
    /// A rank's backward compute in a step, as `forward`.
    pub backward: Duration,
    /// Optimizer compute of a step.
    pub optimizer: Duration,
    /// Gradient bytes per rank the data-parallel all-reduce reduces in a
    /// step (0: no data-parallel all-reduce).
    pub grad_bytes: u64,
    /// Gradient buckets per rank (1 to the layers of a stage).
    pub buckets: u32,
    /// Bytes of each tensor-parallel all-reduce (activations).
    pub tp_bytes: u64,
    /// Bytes each rank sends in a MoE layer's all-to-all (0: no MoE).
    pub moe_bytes: u64,
    /// Pipeline-parallel stages (1: none); each holds whole servers and
    /// its share of the layers.
    pub pp: u32,
    /// Microbatches per step (the pipeline's schedule; with `pp = 1`,
    /// gradient accumulation).
    pub microbatches: u32,
    /// Bytes a rank sends the next stage per microbatch (activations),
    /// and the stage before it back (gradients).
    pub pp_bytes: u64,
}

/// Ranks that run one collective call, and their global rank numbers.
struct Group {
    ranks: Ranks,
    global: Vec<usize>,
}

/// One pipeline stage's operation in a step: the forward (`true`) or
/// backward of a microbatch.
type Op = (bool, usize);

/// A communicator per group, by stage.
fn comms<'a>(groups: &'a [Vec<Group>], enabled: &Enabled) -> Vec<Vec<Communicator<'a>>> {
    groups
        .iter()
        .map(|v| {
            v.iter()
                .map(|d| Communicator::new(&d.ranks, enabled))
                .collect()
        })
        .collect()
}

/// Stage `s` of `pp`'s operations in a step of `m` microbatches, in
/// the one-forward-one-backward order (PipeDream-Flush, Megatron's
/// default): `min(pp - s - 1, m)` forwards to fill the pipeline, then a
/// forward and a backward in turn, then the backwards left.
fn one_f_one_b(pp: usize, s: usize, m: usize) -> Vec<Op> {
    let warm = (pp - s - 1).min(m);
    let mut ops: Vec<Op> = (0..warm).map(|i| (true, i)).collect();
    for i in 0..m - warm {
        ops.push((true, warm + i));
        ops.push((false, i));
    }
    ops.extend((m - warm..m).map(|i| (false, i)));
    ops
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
    let pp = spec.pp.max(1) as usize;
    let mbs = spec.microbatches.max(1) as usize;
    let layers = spec.layers.max(1) as usize;
    let g = topo
        .gpu
        .ok_or("the topology has no GPU servers: a training job's ranks are GPUs")?;
    if servers.len() % pp != 0 {
        return Err(format!(
            "{} servers in {pp} pipeline stages: a stage is whole servers, expected a multiple of {pp}",
            servers.len()
        ));
    }
    if layers < pp {
        return Err(format!(
            "{layers} layers in {pp} pipeline stages: expected at least a layer per stage"
        ));
    }
    if pp > 1 && spec.pp_bytes == 0 {
        return Err("pipeline stages with no bytes between them: expected pp_bytes".into());
    }
    // Servers per stage; stage `s` holds servers `s*k .. (s+1)*k` of the
    // list and ranks `s*k*per .. (s+1)*k*per`.
    let k = servers.len() / pp;
    let stage_ranks = |s: usize| s * k * per..(s + 1) * k * per;
    let stage_layers = |s: usize| s * layers / pp..(s + 1) * layers / pp;
    let channels_for = |nics: usize| channels.unwrap_or((2 * nics as u32).min(64));
    let members = |list: &[u32], on: &[u32]| {
        let mut rails: Vec<u32> = list.iter().map(|&x| g.rail_of(x)).collect();
        rails.dedup();
        Ranks::members(topo, on, list, channels_for(rails.len()))
            .map(|r| r.on(topo))
            .ok_or_else(|| format!("GPUs {list:?} of servers {on:?}: not in the topology"))
    };
    // Per stage: its data-parallel groups (GPU index j mod tp, on every
    // server of the stage) and tensor-parallel groups (tp consecutive
    // GPUs of a server).
    let mut dp: Vec<Vec<Group>> = Vec::with_capacity(pp);
    let mut tpg: Vec<Vec<Group>> = Vec::with_capacity(pp);
    for s in 0..pp {
        let on = &servers[s * k..(s + 1) * k];
        let base = s * k * per;
        let mut d = Vec::new();
        if k * per / tp >= 2 {
            for j in 0..tp {
                let list: Vec<u32> = (j..per).step_by(tp).map(|x| x as u32).collect();
                let ranks = members(&list, on)?;
                let global = (0..k)
                    .flat_map(|q| list.iter().map(move |&x| base + q * per + x as usize))
                    .collect();
                d.push(Group { ranks, global });
            }
        }
        dp.push(d);
        let mut tg = Vec::new();
        if tp >= 2 {
            for (q, &srv) in on.iter().enumerate() {
                for c in 0..per / tp {
                    let list: Vec<u32> = ((c * tp)..(c + 1) * tp).map(|x| x as u32).collect();
                    let ranks = members(&list, &[srv])?;
                    let global = list.iter().map(|&x| base + q * per + x as usize).collect();
                    tg.push(Group { ranks, global });
                }
            }
        }
        tpg.push(tg);
    }
    // Per stage boundary (stage s to s + 1): one pair of ranks per
    // position in a stage, the same GPU of the k-th server of each.
    let mut pairs: Vec<Vec<Ranks>> = Vec::with_capacity(pp.saturating_sub(1));
    for s in 0..pp.saturating_sub(1) {
        let mut v = Vec::with_capacity(k * per);
        for q in 0..k {
            let two = [servers[s * k + q], servers[(s + 1) * k + q]];
            for j in 0..gpus {
                v.push(
                    Ranks::members(topo, &two, &[j], 1).ok_or_else(|| {
                        format!("GPU {j} of servers {two:?}: not in the topology")
                    })?,
                );
            }
        }
        pairs.push(v);
    }
    let dp_comms = comms(&dp, enabled);
    let tp_comms = comms(&tpg, enabled);
    let marker_ranks = dp
        .iter()
        .chain(&tpg)
        .flatten()
        .map(|x| &x.ranks)
        .chain(pairs.iter().flatten())
        .next()
        .ok_or("a training job needs at least two GPUs")?;
    // Per rank: what its compute stream waits for next, and what its
    // data-parallel stream's next all-reduce waits for.
    let mut cur: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut dpq: Vec<Vec<u32>> = vec![Vec::new(); n];
    let tag = |step: u32, label: String, kind: PartKind, stage: usize| GroupSpec {
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
            stage: stage as u32,
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
    // A compute phase of `d` on every rank of stage `s`, after what each
    // waits for.
    let compute = |b: &mut FlowBuilder, cur: &mut Vec<Vec<u32>>, s: usize, step, label, d| {
        let gid = b.new_group(tag(step, label, PartKind::Compute(d), s));
        for r in stage_ranks(s) {
            let m = marker_ranks.marker_on(b, t, gid, at[r], &cur[r], d);
            cur[r] = vec![m];
        }
    };
    // One call of `c` (`size`, nccl-tests' meaning) in every group of
    // stage `s`'s `comms`; each rank's part after `wait[rank]`. Returns
    // by global rank the flows it must see finished after it.
    let collective = |b: &mut FlowBuilder,
                      (comms, groups): (&[Communicator<'_>], &[Group]),
                      (c, size): (Collective, u64),
                      (step, label, kind, s): (u32, String, PartKind, usize),
                      wait: &[Vec<u32>]|
     -> Result<Vec<(usize, Vec<u32>)>, String> {
        let gid = b.new_group(tag(step, label, kind, s));
        let mut out = Vec::new();
        for (comm, grp) in comms.iter().zip(groups) {
            let done: Vec<Vec<u32>> = grp.global.iter().map(|&r| wait[r].clone()).collect();
            let next = comm.call_in(b, c, size, t, gid, &done)?;
            out.extend(grp.global.iter().copied().zip(next));
        }
        Ok(out)
    };
    let moe = spec.moe_bytes > 0 && dp.iter().all(|d| !d.is_empty());
    // The label prefix of microbatch `i`'s parts (none with one).
    let mb_label = |i: usize| {
        if mbs > 1 {
            format!("mb {i} ")
        } else {
            String::new()
        }
    };
    // The forward or backward of microbatch `i` on stage `s`: its
    // layers in order (reversed backward), each in two halves with the
    // tensor-parallel and MoE collectives around them; the last
    // microbatch's backward fills the gradient buckets and starts their
    // data-parallel all-reduces.
    let op = |b: &mut FlowBuilder,
              cur: &mut Vec<Vec<u32>>,
              dpq: &mut Vec<Vec<u32>>,
              step: u32,
              s: usize,
              (fwd, i): Op|
     -> Result<(), String> {
        let (phase, total) = if fwd {
            ("forward", spec.forward)
        } else {
            ("backward", spec.backward)
        };
        let range = stage_layers(s);
        let ls = range.len();
        let half = Duration::from_ps(total.as_ps() / (2 * ls * mbs) as u64);
        let order: Vec<usize> = if fwd {
            range.collect()
        } else {
            range.rev().collect()
        };
        let mb = mb_label(i);
        let st = if pp > 1 {
            format!("stage {s} ")
        } else {
            String::new()
        };
        let buckets = (spec.buckets as usize).clamp(1, ls);
        let (dpc, dpg) = (&dp_comms[s][..], &dp[s][..]);
        for (idx, &l) in order.iter().enumerate() {
            for part in ["attention", "mlp"] {
                let blocking = |b: &mut FlowBuilder,
                                cur: &mut Vec<Vec<u32>>,
                                (comms, groups): (&[Communicator<'_>], &[Group]),
                                call: (Collective, u64),
                                label: String|
                 -> Result<(), String> {
                    let ids = collective(
                        b,
                        (comms, groups),
                        call,
                        (step, label, PartKind::Blocking, s),
                        cur,
                    )?;
                    for (r, x) in ids {
                        cur[r] = x;
                    }
                    Ok(())
                };
                let a2a = (Collective::AllToAll, spec.moe_bytes);
                if part == "mlp" && moe {
                    let label = format!("{mb}{phase} L{l} moe alltoall dispatch");
                    blocking(b, cur, (dpc, dpg), a2a, label)?;
                }
                let label = format!("{mb}{phase} L{l} {part}");
                compute(b, cur, s, step, label, half);
                if part == "mlp" && moe {
                    let label = format!("{mb}{phase} L{l} moe alltoall combine");
                    blocking(b, cur, (dpc, dpg), a2a, label)?;
                }
                if tp >= 2 && spec.tp_bytes > 0 {
                    let label = format!("{mb}{phase} L{l} {part} tp all_reduce");
                    let call = (Collective::AllReduce, spec.tp_bytes);
                    blocking(b, cur, (&tp_comms[s][..], &tpg[s][..]), call, label)?;
                }
            }
            // A gradient bucket fills as the last microbatch's backward
            // passes it.
            let idx = idx + 1;
            if !fwd
                && i + 1 == mbs
                && spec.grad_bytes > 0
                && !dpg.is_empty()
                && idx * buckets / ls != (idx - 1) * buckets / ls
            {
                let kb = (idx * buckets / ls - 1) as u32;
                let size = bucket_bytes(spec.grad_bytes, buckets as u32, kb);
                let wait: Vec<Vec<u32>> = (0..n)
                    .map(|r| cur[r].iter().chain(&dpq[r]).copied().collect())
                    .collect();
                let ids = collective(
                    b,
                    (dpc, dpg),
                    (Collective::AllReduce, size),
                    (
                        step,
                        format!("{st}dp all_reduce bucket {kb}"),
                        PartKind::Background,
                        s,
                    ),
                    &wait,
                )?;
                for (r, x) in ids {
                    dpq[r] = x;
                }
            }
        }
        Ok(())
    };
    let schedule: Vec<Vec<Op>> = (0..pp).map(|s| one_f_one_b(pp, s, mbs)).collect();
    for step in 0..spec.steps {
        // Build order follows each stage's schedule; a stage's next
        // operation is built once what it receives is (the stage before
        // has built that microbatch's forward, the one after its
        // backward), and its receive group just before it, so that
        // every rank's groups come in the order it runs them.
        let mut next = vec![0usize; pp];
        // Per stage and microbatch: the flows after which each of its
        // ranks (by position in the stage) has the forward's output
        // (`out_f`) or the backward's gradients (`out_b`) to send.
        let mut out_f: Vec<Vec<Option<Vec<Vec<u32>>>>> = vec![vec![None; mbs]; pp];
        let mut out_b = out_f.clone();
        loop {
            let mut moved = false;
            for s in 0..pp {
                while let Some(&(fwd, i)) = schedule[s].get(next[s]) {
                    let from = match fwd {
                        true if s > 0 => Some(s - 1),
                        false if s + 1 < pp => Some(s + 1),
                        _ => None,
                    };
                    if let Some(from) = from {
                        let outs = if fwd { &mut out_f } else { &mut out_b };
                        let Some(sent) = outs[from][i].take() else {
                            break;
                        };
                        let what = if fwd { "activations" } else { "gradients" };
                        let label = format!("{}pp {what} {from}->{s}", mb_label(i));
                        let gid = b.new_group(tag(step, label, PartKind::Recv, s));
                        let (src, dst) = if fwd { (0, 1) } else { (1, 0) };
                        let base = s * k * per;
                        for (pos, pair) in pairs[s.min(from)].iter().enumerate() {
                            let ids = pair.hop(
                                b,
                                src,
                                dst,
                                None,
                                spec.pp_bytes,
                                t,
                                gid,
                                &sent[pos],
                                Duration::ZERO,
                            );
                            cur[base + pos].extend(ids);
                        }
                    }
                    op(b, &mut cur, &mut dpq, step, s, (fwd, i))?;
                    let ready = || Some(cur[stage_ranks(s)].to_vec());
                    if fwd && s + 1 < pp {
                        out_f[s][i] = ready();
                    } else if !fwd && s > 0 {
                        out_b[s][i] = ready();
                    }
                    next[s] += 1;
                    moved = true;
                }
            }
            if next.iter().zip(&schedule).all(|(x, o)| *x == o.len()) {
                break;
            }
            if !moved {
                return Err("the pipeline schedule waits on itself".into());
            }
        }
        for s in 0..pp {
            for r in stage_ranks(s) {
                cur[r].append(&mut dpq[r]);
            }
            compute(b, &mut cur, s, step, OPTIMIZER.into(), spec.optimizer);
        }
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
    /// Its pipeline stage.
    stage: u32,
    /// (from, to, `None` for compute or `Some(position)` of the
    /// collective the time was exposed to, [`UNATTRIBUTED`] or
    /// [`BUBBLE`]), picoseconds.
    spans: Vec<(u64, u64, Option<usize>)>,
    /// Per step: when its optimizer ended.
    ends: Vec<Option<u64>>,
}

/// A job's record from its groups (index, part, result) in build order.
///
/// Per rank, its stage's compute phases run one after another (a rank's
/// stage is that of the compute phases it appears in; groups of other
/// stages are not its own); the gap before a phase (from the end of the
/// one before, or the job's start) is time the rank waited, split over
/// what the phase waited for in issue order: the blocking collectives
/// and transfers from other stages issued since the phase before, and
/// for the optimizer also the step's background all-reduces; each takes
/// the gap up to its finish, the last the rest, and a transfer's share
/// before it was posted is bubble. Step `s` ends when the last rank's
/// optimizer does (`T_s`); its time is `T_s - T_{s-1}` (the first from
/// the job's start), broken down along the rank that ended it last: its
/// compute, exposed and bubble spans inside that window, which tile it.
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
                    stage: p.stage,
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
            if p.stage != line.stage {
                continue;
            }
            match p.kind {
                PartKind::Blocking | PartKind::Recv => pending.push(pos),
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
                        // Before the sender posted it, the stage
                        // waited on the pipeline, not on the wire.
                        let (_, wp, wr) = groups[w];
                        if wp.kind == PartKind::Recv {
                            let posted = wr.start_ps.unwrap_or(until).clamp(cursor, until);
                            if posted > cursor {
                                line.spans.push((cursor, posted, Some(BUBBLE)));
                                cursor = posted;
                            }
                        }
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
        let mut bubble_ps = 0u64;
        if let (Some((a, z)), Some((_, k))) = (window, last) {
            for &(x, y, what) in &lines[&k.0].spans {
                let d = y.min(z).saturating_sub(x.max(a));
                match what {
                    Some(UNATTRIBUTED) => unattributed += d,
                    Some(BUBBLE) => bubble_ps += d,
                    Some(pos) => exposed[pos] += d,
                    None => compute_ps += d,
                }
            }
        } else {
            // Unfinished: the compute the step holds for a rank (the
            // busiest stage's).
            let mut by_stage: BTreeMap<u32, u64> = BTreeMap::new();
            for g in groups.iter().filter(|g| g.1.step as usize == s) {
                if let PartKind::Compute(d) = g.1.kind {
                    *by_stage.entry(g.1.stage).or_default() += d.as_ps();
                }
            }
            compute_ps = by_stage.into_values().max().unwrap_or(0);
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
            bubble_ps,
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

/// The position standing for a pipeline bubble: waiting for another
/// stage to send what this one receives.
const BUBBLE: usize = usize::MAX - 1;

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
