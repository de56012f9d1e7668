//! Workload generators.
//!
//! Generators append flows to a [`FlowBuilder`], which hands out unique
//! ids and splits each (source, destination) pair's bytes over its queue
//! pairs; [`FlowBuilder::finish`] gives the final, sorted list. Random
//! choices take the caller's RNG (a seeded `ChaCha8Rng`), so the same seed
//! gives the same flows.

use rand::seq::SliceRandom;
use rand::Rng;
use roce::time::{Duration, Instant, Rate};

use super::nccl_tests::{Collective, NcclRow, Sweep, ELEMENT_BYTES};
use super::perftest::{PerftestRow, PerftestSpec};
use super::{
    finish, DependencyError, FlowOp, FlowShape, FlowSizeCdf, FlowSpec, GroupSpec, PostLoop,
    RingShape,
};
use crate::topology::NodeId;

/// What every flow of a workload shares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowTemplate {
    /// Operation.
    pub op: FlowOp,
    /// Bytes per (source, destination) pair.
    pub size: u64,
    /// Message size (`None`: one message per flow).
    pub message_size: Option<u64>,
    /// Queue pairs per pair; the pair's bytes are split evenly over them
    /// (the first QPs take the remainder), one flow per QP.
    pub qps_per_pair: u32,
    /// When flows are posted.
    pub start: Instant,
    /// Priority (0-7).
    pub priority: u8,
}

impl Default for FlowTemplate {
    /// One 1 MB WRITE on one QP at time zero, priority 3.
    fn default() -> Self {
        FlowTemplate {
            op: FlowOp::Write,
            size: 1_000_000,
            message_size: None,
            qps_per_pair: 1,
            start: Instant::ZERO,
            priority: 3,
        }
    }
}

/// Collects flows with unique ids, and the groups they belong to.
#[derive(Debug, Clone, Default)]
pub struct FlowBuilder {
    flows: Vec<FlowSpec>,
    groups: Vec<GroupSpec>,
}

impl FlowBuilder {
    /// An empty builder.
    pub fn new() -> FlowBuilder {
        FlowBuilder::default()
    }

    /// Flows so far (ids are provisional until [`finish`](Self::finish)).
    pub fn flows(&self) -> &[FlowSpec] {
        &self.flows
    }

    /// Register a group; returns its id (its index in [`groups`](Self::groups)).
    pub fn new_group(&mut self, spec: GroupSpec) -> u32 {
        self.groups.push(spec);
        self.groups.len() as u32 - 1
    }

    /// The groups so far, by id. Group ids do not change in
    /// [`finish`](Self::finish).
    pub fn groups(&self) -> &[GroupSpec] {
        &self.groups
    }

    /// Group `id`, to rename it.
    pub fn group_mut(&mut self, id: u32) -> Option<&mut GroupSpec> {
        self.groups.get_mut(id as usize)
    }

    /// Add the flows of one pair: `size` bytes from `src` to `dst` split
    /// over `t.qps_per_pair` QPs, posted at `start` and after `after`.
    /// Returns the provisional ids (none when `size` is zero).
    #[allow(clippy::too_many_arguments)]
    pub fn pair(
        &mut self,
        src: NodeId,
        dst: NodeId,
        size: u64,
        start: Instant,
        t: &FlowTemplate,
        group: Option<u32>,
        after: &[u32],
    ) -> Vec<u32> {
        let q = u64::from(t.qps_per_pair.max(1));
        let mut ids = Vec::with_capacity(q as usize);
        for i in 0..q {
            let part = size / q + u64::from(i < size % q);
            if part == 0 {
                continue;
            }
            let id = self.flows.len() as u32;
            self.flows.push(FlowSpec {
                id,
                src,
                dst,
                size: part,
                start,
                op: t.op,
                message_size: t.message_size.unwrap_or(part).clamp(1, part),
                qp_index: i as u32,
                priority: t.priority,
                group,
                after: after.to_vec(),
                workload: 0,
                post: None,
            });
            ids.push(id);
        }
        ids
    }

    /// Add one flow with an application posting loop (perftest's);
    /// returns its provisional id.
    pub fn push_flow(
        &mut self,
        src: NodeId,
        dst: NodeId,
        shape: FlowShape,
        group: Option<u32>,
        after: &[u32],
        post: PostLoop,
    ) -> u32 {
        let id = self.flows.len() as u32;
        self.flows.push(FlowSpec {
            id,
            src,
            dst,
            size: shape.size,
            start: shape.start,
            op: shape.op,
            message_size: shape.message_size.clamp(1, shape.size.max(1)),
            qp_index: shape.qp_index,
            priority: shape.priority,
            group,
            after: after.to_vec(),
            workload: 0,
            post: Some(post),
        });
        id
    }

    /// Make flow `id`'s posting wait for `partner`'s messages (a
    /// ping-pong; see [`PostLoop::partner`]).
    pub fn set_partner(&mut self, id: u32, partner: u32) {
        if let Some(p) = self
            .flows
            .get_mut(id as usize)
            .and_then(|f| f.post.as_mut())
        {
            p.partner = Some(partner);
        }
    }

    /// Add already built flows (from an import); their ids and `after`
    /// lists are shifted past the flows already here. Their `group` is kept
    /// as given (register it with [`new_group`](Self::new_group)).
    pub fn extend(&mut self, flows: Vec<FlowSpec>) {
        let base = self.flows.len() as u32;
        let mut flows = flows;
        let min = flows.iter().map(|f| f.id).min().unwrap_or(0);
        for f in &mut flows {
            f.id = f.id - min + base;
            for a in &mut f.after {
                *a = a.wrapping_sub(min).wrapping_add(base);
            }
            if let Some(p) = f.post.as_mut().and_then(|p| p.partner.as_mut()) {
                *p = p.wrapping_sub(min).wrapping_add(base);
            }
        }
        self.flows.extend(flows);
    }

    /// Flows added so far.
    pub fn len(&self) -> usize {
        self.flows.len()
    }

    /// True before any flow was added.
    pub fn is_empty(&self) -> bool {
        self.flows.is_empty()
    }

    /// Mark the flows added since the first `from` as made by workload
    /// `index`.
    pub fn set_workload(&mut self, from: usize, index: u32) {
        for f in self.flows.iter_mut().skip(from) {
            f.workload = index;
        }
    }

    /// The final list: sorted, ids dense (see [`super::finish`]).
    pub fn finish(self) -> Result<Vec<FlowSpec>, DependencyError> {
        finish(self.flows)
    }
}

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

/// One ring all-reduce of `t.size` bytes per host over `hosts` in ring
/// order: `2(N-1)` steps; at step `s` host `i` sends chunk `(i - s) mod N`
/// (`size / N` bytes, the first `size % N` chunks one byte more) to host
/// `i+1`. Step `s > 0` of host `i` waits for step `s-1` of host `i-1`
/// (the chunk it forwards) and of itself. All flows share one group, named
/// `ring-allreduce` (rename it with [`FlowBuilder::group_mut`]). Returns
/// the group id.
pub fn ring_allreduce(b: &mut FlowBuilder, hosts: &[NodeId], t: &FlowTemplate) -> u32 {
    let n = hosts.len();
    let group = b.new_group(GroupSpec {
        name: "ring-allreduce".to_string(),
        kind: "ring-allreduce".to_string(),
        ring: Some(RingShape {
            hosts: n as u32,
            bytes: t.size,
        }),
        perftest: None,
        nccl: None,
    });
    if n < 2 {
        return group;
    }
    let first = vec![Vec::new(); n];
    ring_steps(
        b,
        hosts,
        2 * (n - 1),
        allreduce_chunk(t.size, n),
        t,
        group,
        &first,
    );
    group
}

/// The bytes ring all-reduce step `s` of rank `i` sends when `bytes` are
/// reduced over `n` ranks: the chunk it forwards, `bytes / n`, the first
/// `bytes % n` chunks one byte more.
fn allreduce_chunk(bytes: u64, n: usize) -> impl Fn(usize, usize) -> u64 {
    let k = n as u64;
    move |s, i| {
        let c = ((i + 2 * n - s % n) % n) as u64;
        bytes / k + u64::from(c < bytes % k)
    }
}

/// Add `steps` ring steps over `hosts` to group `g`: in step `s`, rank `i`
/// sends `chunk(s, i)` bytes to rank `i+1`, after its own send of step
/// `s-1` and the chunk rank `i-1` sent it then; in the first step, after
/// `first[i]` (what rank `i` had to finish before). Returns the last
/// step's flows, by sending rank.
fn ring_steps(
    b: &mut FlowBuilder,
    hosts: &[NodeId],
    steps: usize,
    chunk: impl Fn(usize, usize) -> u64,
    t: &FlowTemplate,
    g: u32,
    first: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    let n = hosts.len();
    let mut prev: Vec<Vec<u32>> = Vec::new();
    for s in 0..steps {
        let mut cur = Vec::with_capacity(n);
        for i in 0..n {
            let after = if s == 0 {
                first[i].clone()
            } else {
                let mut a = prev[(i + n - 1) % n].clone();
                a.extend_from_slice(&prev[i]);
                a
            };
            let ids = b.pair(
                hosts[i],
                hosts[(i + 1) % n],
                chunk(s, i),
                t.start,
                t,
                Some(g),
                &after,
            );
            cur.push(ids);
        }
        prev = cur;
    }
    prev
}

/// The chunk a rooted chain (broadcast, reduce) forwards at a time: NCCL's
/// Simple buffer (4 MiB) over its 8 steps, one step per chunk
/// (`BROADCAST_CHUNKSTEPS`, `REDUCE_CHUNKSTEPS`).
const ROOTED_CHUNK: u64 = (4 << 20) / NCCL_STEPS as u64;
/// NCCL's steps per connection buffer (`NCCL_STEPS`): chunks a sender may
/// have in flight on one hop.
const NCCL_STEPS: usize = 8;

/// nccl-tests' sweep `spec` over `hosts` (rank order): one group per
/// size, named `NAME-SIZE` (the table's size), each size's flows posted
/// by rank as that rank finishes the size before (its last send and last
/// receive), as each rank of nccl-tests moves on when its own collective
/// completes. The collectives, one rank per host, as NCCL's ring runs
/// them step by step (each step's chunk whole: no pipelining within a
/// step):
///
/// * `all_reduce`: 2(N-1) steps of the buffer's N chunks around the ring
///   (as [`ring_allreduce`]);
/// * `reduce_scatter`, `all_gather`: N-1 steps of one rank's share;
/// * `alltoall`: every rank sends its share to every other at once;
/// * `sendrecv`: every rank sends the buffer to the next;
/// * `broadcast`, `reduce`: a chain from (to) the root, rank 0, pipelined
///   in NCCL's 512 KiB chunks;
/// * `gather`, `scatter`: every other rank's share to (from) the root.
///
/// In every ring step, rank i's send waits for its own previous send and
/// for the chunk rank i-1 sent it. Returns the groups in size order.
pub fn nccl_tests(
    b: &mut FlowBuilder,
    hosts: &[NodeId],
    spec: &Sweep,
    t: &FlowTemplate,
    name: &str,
) -> Vec<u32> {
    let n = hosts.len();
    let c = spec.collective;
    let mut groups = Vec::new();
    // Per rank: the flows it must see finished before its next size.
    let mut done: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &size in &spec.sizes {
        let counts = c.byte_counts(size, ELEMENT_BYTES, n as u32);
        let g = b.new_group(GroupSpec {
            name: format!("{name}-{}", counts.size()),
            kind: "nccl-tests".into(),
            ring: None,
            perftest: None,
            nccl: Some(NcclRow {
                collective: c,
                ranks: n as u32,
                size: counts.size(),
                count: counts.param / ELEMENT_BYTES,
                param: counts.param,
            }),
        });
        groups.push(g);
        let mut next: Vec<Vec<u32>> = vec![Vec::new(); n];
        match c {
            Collective::AllReduce => {
                let last = ring_steps(
                    b,
                    hosts,
                    2 * (n - 1),
                    allreduce_chunk(counts.param, n),
                    t,
                    g,
                    &done,
                );
                ring_ends(&last, &mut next);
            }
            Collective::ReduceScatter | Collective::AllGather => {
                let p = counts.param;
                let last = ring_steps(b, hosts, n - 1, |_, _| p, t, g, &done);
                ring_ends(&last, &mut next);
            }
            Collective::AllToAll | Collective::SendRecv => {
                for i in 0..n {
                    let peers: Vec<usize> = if c == Collective::SendRecv {
                        vec![(i + 1) % n]
                    } else {
                        (0..n).filter(|&j| j != i).collect()
                    };
                    for j in peers {
                        let ids = b.pair(
                            hosts[i],
                            hosts[j],
                            counts.param,
                            t.start,
                            t,
                            Some(g),
                            &done[i],
                        );
                        next[i].extend_from_slice(&ids);
                        next[j].extend_from_slice(&ids);
                    }
                }
            }
            Collective::Broadcast | Collective::Reduce => {
                // A chain, pipelined in NCCL's chunks: broadcast from the
                // root (rank 0) down the ring, reduce up it to the root
                // (ranks 1, 2, ..., N-1, then 0). A rank forwards a chunk
                // once it has it, in order.
                let order: Vec<usize> = if c == Collective::Broadcast {
                    (0..n).collect()
                } else {
                    (1..n).chain([0]).collect()
                };
                let p = counts.param;
                let chunks = p.div_ceil(ROOTED_CHUNK).max(1) as usize;
                // sent[h][j]: hop h's flows of chunk j. A hop has at most
                // NCCL's 8 steps in flight: chunk j waits for chunk j-8 of
                // the same hop (its buffer slot), not for each ACK.
                let mut sent: Vec<Vec<Vec<u32>>> = vec![Vec::with_capacity(chunks); n - 1];
                for j in 0..chunks {
                    let len = ROOTED_CHUNK.min(p - j as u64 * ROOTED_CHUNK);
                    for h in 0..n - 1 {
                        let (src, dst) = (order[h], order[h + 1]);
                        let mut after = if j < NCCL_STEPS {
                            done[src].clone()
                        } else {
                            sent[h][j - NCCL_STEPS].clone()
                        };
                        if h > 0 {
                            after.extend_from_slice(&sent[h - 1][j]);
                        }
                        let ids = b.pair(hosts[src], hosts[dst], len, t.start, t, Some(g), &after);
                        if j + 1 == chunks {
                            next[src].extend_from_slice(&ids);
                            next[dst].extend_from_slice(&ids);
                        }
                        sent[h].push(ids);
                    }
                }
            }
            Collective::Gather | Collective::Scatter => {
                // Point to point with the root (rank 0), as NCCL runs
                // them: every other rank's share to it, or from it.
                for i in 1..n {
                    let (src, dst) = if c == Collective::Gather {
                        (i, 0)
                    } else {
                        (0, i)
                    };
                    let ids = b.pair(
                        hosts[src],
                        hosts[dst],
                        counts.param,
                        t.start,
                        t,
                        Some(g),
                        &done[src],
                    );
                    next[src].extend_from_slice(&ids);
                    next[dst].extend_from_slice(&ids);
                }
            }
        }
        done = next;
    }
    groups
}

/// What each rank must see finished after a ring's `last` step: its own
/// send and the one it received.
fn ring_ends(last: &[Vec<u32>], next: &mut [Vec<u32>]) {
    let n = last.len();
    for (i, ids) in last.iter().enumerate() {
        next[i].extend_from_slice(ids);
        next[(i + 1) % n].extend_from_slice(ids);
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
