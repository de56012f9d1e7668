//! Workloads: who sends what to whom, and when.
//!
//! Generators ([`generate`]) and imports ([`hpcc`], [`htsim`]) produce a list
//! of [`FlowSpec`]s; [`finish`] sorts them by start time (ties keep the
//! order they were generated in) and numbers them densely, so ids are
//! `0..n` in list order. The NIC model turns each flow into work requests
//! on queue pairs.
//!
//! # Dependencies (what the NIC model must honour)
//!
//! A flow whose [`FlowSpec::after`] is not empty is posted at the later of
//! its `start` and the moment the last of the listed flows *completes*: the
//! instant its requester sees the completion of its last work request
//! (the flow's recorded `finish`), or for a flow marked
//! [`FlowSpec::landing`], the instant its last message landed in the
//! destination's memory. The simulator has global knowledge, so
//! the waiting flow's host need not be the one that saw the completion.
//! A flow whose dependency never completes (it failed, or the run ended
//! first) is never posted and counts as not completed. Listed ids are
//! always smaller than the flow's own id (they sort earlier), so
//! dependencies never form a cycle. A ring all-reduce uses this: step
//! `k+1` of host `i` waits for step `k`'s chunk from host `i-1` (and for
//! its own step-`k` send).
//!
//! The flows of one dependent workload share a [`FlowSpec::group`], an
//! index into the [`GroupSpec`] list of the workload; the group's *step
//! time* is the last finish minus the first post of its flows.

mod builder;
pub mod cdf;
pub mod collectives;
pub mod generate;
pub mod hpcc;
pub mod htsim;
pub mod nccl_tests;
mod op;
pub mod perftest;
pub mod training;

use roce::time::Instant;

use crate::topology::NodeId;

pub use cdf::FlowSizeCdf;
pub use op::FlowOp;

/// One flow: a message (or series of messages) between two hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    /// Unique, dense id (0..n).
    pub id: u32,
    /// Requester host.
    pub src: NodeId,
    /// Responder host.
    pub dst: NodeId,
    /// Bytes to move.
    pub size: u64,
    /// When the first work request is posted.
    pub start: Instant,
    /// Operation.
    pub op: FlowOp,
    /// Message size the flow is split into (`size` when one message).
    pub message_size: u64,
    /// Which queue pair of the (src, dst) pair carries it (0-based; the
    /// pair has `qps_per_pair` QPs).
    pub qp_index: u32,
    /// Priority (traffic class, 0-7) the flow uses.
    pub priority: u8,
    /// Group of a dependent workload (all flows of one ring all-reduce
    /// share it): an index into the workload's [`GroupSpec`] list.
    pub group: Option<u32>,
    /// Flows that must have been delivered before this one is posted (see
    /// the module docs); ids smaller than `id`. Empty: start at `start`.
    pub after: Vec<u32>,
    /// Index of the workload that made it (a scenario's `[[workload]]`
    /// tables in order; 0 for flows built in code), named in results by
    /// [`crate::options::RunOptions::workloads`].
    pub workload: u32,
    /// How the application posts its messages (perftest's loops);
    /// `None`: the NIC model keeps a fixed number of work requests posted.
    pub post: Option<PostLoop>,
    /// A copy inside a GPU server (NVLink, PCIe) instead of RDMA over the
    /// fabric: `src` and `dst` name the NICs of the two GPUs' server and
    /// no queue pair carries it (see [`LocalPath`]). `None`: a fabric flow.
    pub local: Option<LocalPath>,
    /// Flows waiting for this one are posted when its last message has
    /// landed in the destination's memory (what a receiver polling its
    /// buffer sees, as NCCL's ranks do), not when the requester sees the
    /// completion half a round trip later. WRITE and SEND flows only.
    pub landing: bool,
    /// Posted this long after it may go (its `start`, or the release by
    /// the last flow it waits for): the sender's own latency before the
    /// bytes move (a collective protocol's per-step cost).
    pub delay: roce::time::Duration,
}

/// A copy that never reaches the fabric: GPU to GPU over NVLink, or GPU
/// to host memory over PCIe.
///
/// Contract: copies on one `resource` (a GPU's NVLink or PCIe egress,
/// numbered by the workload) are serialised in the order they are
/// posted, each taking `size / rate`; a copy completes `latency` after
/// its last byte left. Copies on different resources do not interact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalPath {
    /// The egress the copy occupies (dense, 0-based).
    pub resource: u32,
    /// Its rate.
    pub rate: roce::time::Rate,
    /// Time from the last byte leaving to the copy's completion.
    pub latency: roce::time::Duration,
    /// What carries it.
    pub link: LocalLink,
    /// The GPU (index within its server) whose egress `resource` is:
    /// the sender over NVLink, the GPU whose PCIe link it is over PCIe.
    /// Names the resource in results.
    pub gpu: u16,
}

/// The link a [`LocalPath`] copy crosses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalLink {
    /// GPU to GPU inside a server.
    NvLink,
    /// GPU to host memory over PCIe.
    PcieToHost,
    /// Host memory to GPU over PCIe.
    PcieFromHost,
}

impl LocalLink {
    /// The link's kind as results name it: `nvlink` or `pcie`.
    pub fn kind(self) -> &'static str {
        match self {
            LocalLink::NvLink => "nvlink",
            LocalLink::PcieToHost | LocalLink::PcieFromHost => "pcie",
        }
    }

    /// What a copy on it crosses, in words (`NVLink out`,
    /// `PCIe to host memory`, `PCIe from host memory`).
    pub fn text(self) -> &'static str {
        match self {
            LocalLink::NvLink => "NVLink out",
            LocalLink::PcieToHost => "PCIe to host memory",
            LocalLink::PcieFromHost => "PCIe from host memory",
        }
    }
}

/// The shape of one flow [`generate::FlowBuilder::push_flow`] adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowShape {
    /// Operation.
    pub op: FlowOp,
    /// Bytes.
    pub size: u64,
    /// Message size.
    pub message_size: u64,
    /// QP index of the pair.
    pub qp_index: u32,
    /// Post time (or later, after its dependencies).
    pub start: Instant,
    /// Priority.
    pub priority: u8,
}

/// An application's posting loop for one flow (see [`perftest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostLoop {
    /// Work requests outstanding at most (perftest's `-t`).
    pub depth: u32,
    /// The application sees a completion every this many work requests
    /// (and for the last); it posts more only when it sees one.
    pub moderation: u32,
    /// Payloads travel inline in the WQE (no payload fetch).
    pub inline: bool,
    /// Ping-pong: the flow whose messages landing at this flow's source
    /// let it post. Message `k` goes when `k` (with `lead`) or `k + 1`
    /// (without) of the partner's messages have landed.
    pub partner: Option<u32>,
    /// This flow starts the ping-pong.
    pub lead: bool,
    /// Stop posting this long after the flow's first post (perftest's
    /// `-D`); the flow ends when what it posted completes.
    pub deadline: Option<roce::time::Duration>,
    /// Keep the post time of every message (latency samples).
    pub record_posts: bool,
}

/// A named group of flows reported together (a collective, or an import
/// whose flows wait for each other): its step time is the last finish
/// minus the first post of its flows. A flow's [`FlowSpec::group`] is the
/// index of its group in the list the groups come in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSpec {
    /// Name in results (the workload's name, or its kind and index).
    pub name: String,
    /// Workload kind (`ring-allreduce`, `htsim`).
    pub kind: String,
    /// For a ring all-reduce: hosts in the ring and bytes reduced per
    /// host, from which the bandwidth bound follows.
    pub ring: Option<RingShape>,
    /// For one size of a perftest run: what it measures.
    pub perftest: Option<perftest::PerftestRow>,
    /// For one size of an nccl-tests sweep, or one collective call of a
    /// training job: what it moves.
    pub nccl: Option<nccl_tests::NcclRow>,
    /// For a part of a training job's step: which.
    pub training: Option<TrainingPart>,
}

/// What a group of a training job is: a compute phase or a collective
/// call of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrainingPart {
    /// The job (its workload's name).
    pub job: String,
    /// Step, from 0.
    pub step: u32,
    /// Part label (`forward L0 attention`, `dp all_reduce bucket 1`).
    pub label: String,
    /// What it is.
    pub kind: PartKind,
    /// The pipeline stage whose ranks run it (0 without pipeline
    /// parallelism); a transfer between stages belongs to the stage
    /// that receives it.
    pub stage: u32,
}

/// What a part of a training step is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PartKind {
    /// A compute phase of this duration per rank.
    Compute(roce::time::Duration),
    /// A collective the compute that follows waits for (tensor-parallel
    /// all-reduce, MoE all-to-all).
    Blocking,
    /// A collective on its own stream, overlapping compute (the
    /// data-parallel all-reduce of a bucket).
    Background,
    /// What a pipeline stage receives from the one before (activations)
    /// or after (gradients): the compute that follows waits for it,
    /// and the wait before the sender posted it is the pipeline's
    /// bubble, not communication.
    Recv,
}

/// Shape of a ring all-reduce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingShape {
    /// Hosts in the ring (N).
    pub hosts: u32,
    /// Bytes reduced per host (the workload's `size`).
    pub bytes: u64,
}

impl RingShape {
    /// The bandwidth-only bound of the all-reduce in picoseconds (rounded
    /// down): every host sends `2(N-1)/N x bytes`, at `rate`, the slowest
    /// host link of the ring. `None` for a zero rate or fewer than 2 hosts.
    pub fn ideal_ps(&self, rate: roce::time::Rate) -> Option<u64> {
        let n = u128::from(self.hosts);
        if n < 2 || rate.bps() == 0 {
            return None;
        }
        let bits = 2 * (n - 1) * u128::from(self.bytes) * 8;
        let ps = bits * 1_000_000_000_000 / (n * u128::from(rate.bps()));
        u64::try_from(ps).ok()
    }
}

/// Put `flows` in their final order and number them densely: sorted by
/// *effective start* (a flow's `start`, raised to the effective start of
/// every flow it waits for), then by dependency depth, then by the order
/// given; `after` lists are rewritten to the new ids (sorted, deduplicated),
/// so every dependency has a smaller id than its dependent. Input ids must
/// be unique. Fails naming a flow (by its input id) when an `after` entry
/// names no flow or the dependencies form a cycle.
pub fn finish(mut flows: Vec<FlowSpec>) -> Result<Vec<FlowSpec>, DependencyError> {
    let n = flows.len();
    let mut by_id: Vec<(u32, usize)> = flows.iter().enumerate().map(|(i, f)| (f.id, i)).collect();
    by_id.sort_unstable();
    let index_of = |id: u32| {
        by_id
            .binary_search_by_key(&id, |&(o, _)| o)
            .ok()
            .map(|i| by_id[i].1)
    };
    // Dependencies as indices.
    let mut deps: Vec<Vec<usize>> = Vec::with_capacity(n);
    for f in &flows {
        let mut d = Vec::with_capacity(f.after.len());
        for &a in &f.after {
            d.push(index_of(a).ok_or(DependencyError::Unknown {
                flow: f.id,
                after: a,
            })?);
        }
        deps.push(d);
    }
    // Effective start and depth, by an iterative depth-first search.
    const UNSEEN: u8 = 0;
    const ACTIVE: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![UNSEEN; n];
    let mut eff: Vec<Instant> = flows.iter().map(|f| f.start).collect();
    let mut depth = vec![0u32; n];
    for root in 0..n {
        if state[root] != UNSEEN {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = ACTIVE;
        while let Some(&mut (u, ref mut next)) = stack.last_mut() {
            if let Some(&v) = deps[u].get(*next) {
                *next += 1;
                match state[v] {
                    UNSEEN => {
                        state[v] = ACTIVE;
                        stack.push((v, 0));
                    }
                    ACTIVE => return Err(DependencyError::Cycle { flow: flows[v].id }),
                    _ => {}
                }
            } else {
                for &v in &deps[u] {
                    eff[u] = eff[u].max(eff[v]);
                    depth[u] = depth[u].max(depth[v] + 1);
                }
                state[u] = DONE;
                stack.pop();
            }
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| (eff[i], depth[i], i));
    let mut new_id = vec![0u32; n];
    for (pos, &i) in order.iter().enumerate() {
        new_id[i] = pos as u32;
    }
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = new_id[i];
        let mut after: Vec<u32> = deps[i].iter().map(|&d| new_id[d]).collect();
        after.sort_unstable();
        after.dedup();
        f.after = after;
    }
    // Ping-pong partners by the new ids (`f.id` is already the new id).
    let mut partners = Vec::with_capacity(n);
    for f in &flows {
        let p = match f.post.and_then(|p| p.partner) {
            Some(a) => Some(
                new_id[index_of(a).ok_or(DependencyError::Unknown {
                    flow: f.id,
                    after: a,
                })?],
            ),
            None => None,
        };
        partners.push(p);
    }
    for (f, p) in flows.iter_mut().zip(partners) {
        if let Some(lp) = &mut f.post {
            lp.partner = p;
        }
    }
    flows.sort_by_key(|f| f.id);
    Ok(flows)
}

/// Dependencies that cannot be honoured.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DependencyError {
    /// An `after` entry names no flow.
    #[error("flow {flow} waits for flow {after}, which does not exist")]
    Unknown {
        /// The waiting flow.
        flow: u32,
        /// The missing id.
        after: u32,
    },
    /// Flows wait for each other in a circle.
    #[error("flow {flow} waits for itself through a cycle of dependencies")]
    Cycle {
        /// A flow on the cycle.
        flow: u32,
    },
}
