//! Collectives as NCCL runs them, as flows with dependencies: rings,
//! chains and point-to-point exchanges between ranks, where a rank is a
//! host (one rank per host) or a GPU of a GPU server ([`Ranks`]).
//!
//! # What a hop is
//!
//! One rank handing bytes to another ([`Ranks::hop`]):
//!
//! * GPUs of one server: one NVLink copy (a [`LocalPath`] on the sending
//!   GPU's NVLink egress through an NVSwitch, or on the pair's own link
//!   point to point);
//! * ranks on different servers: an RDMA WRITE between NICs over the
//!   fabric, so PFC, ECN, DCQCN and faults act on it. What waits for it
//!   goes when its data has landed in the receiver's memory (NCCL's
//!   receiver polls its buffer), not when the sender sees the ACK. A ring channel
//!   sends and receives on its rail's NIC at both ends (NCCL's rings use
//!   one NIC per channel); other hops use the NIC beside each GPU. With
//!   GPUDirect off the payload is copied GPU to host memory over the
//!   sender's PCIe first and host memory to GPU at the receiver after.
//!
//! # Channels
//!
//! On GPU servers a ring collective runs `channels` rings at once, each
//! over its own share of the buffer (NCCL splits the buffer by channel).
//! Channel `c` uses rail `c mod nics`; inside a server its ring enters at
//! the GPU beside that rail's NIC and visits the server's GPUs in order
//! from there, so consecutive servers meet on the same rail (what a
//! rail-optimised fabric is built for).
//!
//! # Steps
//!
//! In every ring step, rank `i`'s send waits for its own previous send
//! and for the chunk rank `i-1` sent it then. Each step's chunk moves
//! whole (no pipelining inside a step).

use roce::time::Rate;

use super::builder::{FlowBuilder, FlowTemplate};
use super::nccl_tests::{Collective, NcclRow, Sweep, ELEMENT_BYTES};
use super::{GroupSpec, LocalPath, RingShape};
use crate::topology::{GpuServers, NodeId, Topology};

/// Where a rank lives: its server (an index into the collective's
/// servers) and GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// Server index (dense, in the order the servers were given).
    pub server: u32,
    /// GPU of the server (0 for a plain host).
    pub gpu: u32,
}

/// The ranks of a collective and what joins them.
#[derive(Debug, Clone)]
pub struct Ranks {
    /// Ranks in rank order.
    ranks: Vec<Rank>,
    /// Per server: its NICs by rail.
    nics: Vec<Vec<NodeId>>,
    /// The servers' hardware (`None`: plain hosts).
    gpu: Option<GpuServers>,
    /// Rings run at once (1 on plain hosts).
    channels: u32,
    /// Fabric hops release what waits for them when their data lands
    /// ([`super::FlowSpec::landing`]); else at the sender's completion.
    landing: bool,
}

impl Ranks {
    /// One rank per host, in the order given; one ring.
    pub fn hosts(hosts: &[NodeId]) -> Ranks {
        Ranks {
            ranks: (0..hosts.len() as u32)
                .map(|server| Rank { server, gpu: 0 })
                .collect(),
            nics: hosts.iter().map(|&h| vec![h]).collect(),
            gpu: None,
            channels: 1,
            landing: true,
        }
    }

    /// The same ranks with fabric hops that release their waiters only
    /// at the sender's completion (the `ring-allreduce` workload's rule).
    pub fn released_at_completion(self) -> Ranks {
        Ranks {
            landing: false,
            ..self
        }
    }

    /// GPUs `0..gpus` of each of `servers` (server indices of the
    /// topology's GPU servers), server-major: rank `k * gpus + g` is GPU
    /// `g` of the `k`-th server listed. `channels` rings at once.
    /// `None` when the topology has no GPU servers, a server or GPU does
    /// not exist, or `channels` is 0.
    pub fn gpus(topo: &Topology, servers: &[u32], gpus: u32, channels: u32) -> Option<Ranks> {
        let g = topo.gpu?;
        if gpus == 0 || gpus > g.gpus || channels == 0 {
            return None;
        }
        let hosts = topo.hosts();
        let mut nics = Vec::with_capacity(servers.len());
        let mut ranks = Vec::with_capacity(servers.len() * gpus as usize);
        for (k, &s) in servers.iter().enumerate() {
            if s >= g.servers {
                return None;
            }
            nics.push(
                (0..g.nics)
                    .map(|r| hosts[g.host_index(s, r) as usize])
                    .collect(),
            );
            ranks.extend((0..gpus).map(|gpu| Rank {
                server: k as u32,
                gpu,
            }));
        }
        Some(Ranks {
            ranks,
            nics,
            gpu: Some(GpuServers { gpus, ..g }),
            channels,
            landing: true,
        })
    }

    /// Number of ranks.
    pub fn len(&self) -> usize {
        self.ranks.len()
    }

    /// True with no ranks.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
    }

    /// Rank `i`'s location.
    pub fn rank(&self, i: usize) -> Rank {
        self.ranks[i]
    }

    /// The NIC beside rank `i`'s GPU.
    fn own_nic(&self, i: usize) -> NodeId {
        let r = self.ranks[i];
        let rail = self.gpu.map_or(0, |g| g.rail_of(r.gpu));
        self.nics[r.server as usize][rail as usize]
    }

    /// The rings a ring collective runs: per channel, the ranks in ring
    /// order and the rail its inter-server hops use (see the module docs).
    pub fn rings(&self) -> Vec<(Vec<usize>, Option<u32>)> {
        let Some(g) = self.gpu else {
            return vec![((0..self.ranks.len()).collect(), None)];
        };
        let per = g.gpus as usize;
        (0..self.channels)
            .map(|c| {
                let rail = c % g.nics;
                // The first GPU beside the rail's NIC.
                let first = (0..g.gpus).find(|&x| g.rail_of(x) == rail).unwrap_or(0) as usize;
                let order = (0..self.nics.len())
                    .flat_map(|k| (0..per).map(move |j| k * per + (first + j) % per))
                    .collect();
                (order, Some(rail))
            })
            .collect()
    }

    /// Rings run at once.
    pub fn channels(&self) -> u32 {
        self.channels
    }

    /// Rank `from` hands `bytes` to rank `to` (see the module docs), after
    /// `after`; a ring channel's inter-server hop uses `rail` at both
    /// ends. Returns the flows whose completion means the bytes are in
    /// `to`'s memory (none for 0 bytes).
    #[allow(clippy::too_many_arguments)]
    pub fn hop(
        &self,
        b: &mut FlowBuilder,
        from: usize,
        to: usize,
        rail: Option<u32>,
        bytes: u64,
        t: &FlowTemplate,
        group: u32,
        after: &[u32],
    ) -> Vec<u32> {
        if bytes == 0 {
            return Vec::new();
        }
        let (a, z) = (self.ranks[from], self.ranks[to]);
        let Some(g) = self.gpu else {
            let ids = b.pair(
                self.own_nic(from),
                self.own_nic(to),
                bytes,
                t.start,
                t,
                Some(group),
                after,
            );
            if self.landing {
                b.set_landing(&ids);
            }
            return ids;
        };
        let (src_nic, dst_nic) = (self.own_nic(from), self.own_nic(to));
        let res = Resources::new(&g, self.nics.len() as u32);
        if a.server == z.server {
            let path = res.nvlink(a.server, a.gpu, z.gpu);
            return vec![b.local(src_nic, dst_nic, bytes, t.start, path, Some(group), after)];
        }
        let nic = |r: Rank, own: NodeId| match rail {
            Some(rail) => self.nics[r.server as usize][rail as usize],
            None => own,
        };
        let (sn, dn) = (nic(a, src_nic), nic(z, dst_nic));
        if g.gpudirect {
            let ids = b.pair(sn, dn, bytes, t.start, t, Some(group), after);
            if self.landing {
                b.set_landing(&ids);
            }
            return ids;
        }
        let d2h = b.local(
            sn,
            sn,
            bytes,
            t.start,
            res.pcie(a.server, a.gpu, false),
            Some(group),
            after,
        );
        let sent = b.pair(sn, dn, bytes, t.start, t, Some(group), &[d2h]);
        if self.landing {
            b.set_landing(&sent);
        }
        let h2d = b.local(
            dn,
            dn,
            bytes,
            t.start,
            res.pcie(z.server, z.gpu, true),
            Some(group),
            &sent,
        );
        vec![h2d]
    }
}

/// Numbering of the local-copy resources of `servers` servers: per
/// server and GPU, NVLink egresses (per peer when point to point), then
/// PCIe to host memory, then PCIe from it.
struct Resources {
    g: GpuServers,
    servers: u32,
}

impl Resources {
    fn new(g: &GpuServers, servers: u32) -> Resources {
        Resources { g: *g, servers }
    }

    fn nvlink(&self, server: u32, from: u32, to: u32) -> LocalPath {
        let gpus = self.g.gpus;
        let nv = self.g.nvlink;
        let (resource, rate) = if nv.switched {
            ((server * gpus + from) * gpus, nv.rate)
        } else {
            (
                (server * gpus + from) * gpus + to,
                Rate::from_bps(nv.rate.bps() / u64::from(gpus.max(2) - 1)),
            )
        };
        LocalPath {
            resource,
            rate,
            latency: nv.latency,
        }
    }

    fn pcie(&self, server: u32, gpu: u32, inbound: bool) -> LocalPath {
        let gpus = self.g.gpus;
        let base = self.servers * gpus * gpus;
        let per_dir = self.servers * gpus;
        LocalPath {
            resource: base + u32::from(inbound) * per_dir + server * gpus + gpu,
            rate: self.g.pcie,
            latency: self.g.pcie_latency,
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
    let ranks = Ranks::hosts(hosts).released_at_completion();
    let first = vec![Vec::new(); n];
    let (order, rail) = &ranks.rings()[0];
    ring_steps(
        b,
        &ranks,
        order,
        *rail,
        2 * (n - 1),
        allreduce_chunk(t.size, n),
        t,
        group,
        &first,
    );
    group
}

/// The bytes ring all-reduce step `s` of ring position `i` sends when
/// `bytes` are reduced over `n` ranks: the chunk it forwards, `bytes /
/// n`, the first `bytes % n` chunks one byte more.
fn allreduce_chunk(bytes: u64, n: usize) -> impl Fn(usize, usize) -> u64 {
    let k = n as u64;
    move |s, i| {
        let c = ((i + 2 * n - s % n) % n) as u64;
        bytes / k + u64::from(c < bytes % k)
    }
}

/// Add `steps` ring steps to group `g` over the ring `order` (ranks by
/// ring position): in step `s`, position `i` sends `chunk(s, i)` bytes to
/// position `i+1`, after its own send of step `s-1` and the chunk
/// position `i-1` sent it then; in the first step, after `first[rank]`
/// (what the rank had to finish before). Returns the last step's flows,
/// by sending rank.
#[allow(clippy::too_many_arguments)]
fn ring_steps(
    b: &mut FlowBuilder,
    ranks: &Ranks,
    order: &[usize],
    rail: Option<u32>,
    steps: usize,
    chunk: impl Fn(usize, usize) -> u64,
    t: &FlowTemplate,
    g: u32,
    first: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    let n = order.len();
    let mut prev: Vec<Vec<u32>> = Vec::new();
    for s in 0..steps {
        let mut cur = Vec::with_capacity(n);
        for i in 0..n {
            let after = if s == 0 {
                first[order[i]].clone()
            } else {
                let mut a = prev[(i + n - 1) % n].clone();
                a.extend_from_slice(&prev[i]);
                a
            };
            let ids = ranks.hop(
                b,
                order[i],
                order[(i + 1) % n],
                rail,
                chunk(s, i),
                t,
                g,
                &after,
            );
            cur.push(ids);
        }
        prev = cur;
    }
    let mut by_rank = vec![Vec::new(); ranks.len()];
    for (i, ids) in prev.into_iter().enumerate() {
        by_rank[order[i]] = ids;
    }
    by_rank
}

/// The chunk a rooted chain (broadcast, reduce) forwards at a time: NCCL's
/// Simple buffer (4 MiB) over its 8 steps, one step per chunk
/// (`BROADCAST_CHUNKSTEPS`, `REDUCE_CHUNKSTEPS`).
const ROOTED_CHUNK: u64 = (4 << 20) / NCCL_STEPS as u64;
/// NCCL's steps per connection buffer (`NCCL_STEPS`): chunks a sender may
/// have in flight on one hop.
const NCCL_STEPS: usize = 8;

/// `total` bytes split over `parts`: part `c`'s share, in whole elements
/// (the first parts take the remainder).
fn share(total: u64, parts: u32, c: u32) -> u64 {
    let elems = total / ELEMENT_BYTES;
    let p = u64::from(parts.max(1));
    let mine = elems / p + u64::from(u64::from(c) < elems % p);
    mine * ELEMENT_BYTES + if c == 0 { total % ELEMENT_BYTES } else { 0 }
}

/// nccl-tests' sweep `spec` over `ranks`: one group per size, named
/// `NAME-SIZE` (the table's size), each size's flows posted by rank as
/// that rank finishes the size before (its last sends and receives), as
/// each rank of nccl-tests moves on when its own collective completes.
/// The collectives, as NCCL's ring runs them step by step:
///
/// * `all_reduce`: 2(N-1) steps of the buffer's N chunks around each
///   channel's ring (as [`ring_allreduce`]), the buffer split by channel;
/// * `reduce_scatter`, `all_gather`: N-1 steps of one rank's share;
/// * `alltoall`: every rank sends its share to every other at once;
/// * `sendrecv`: every rank sends the buffer to the next;
/// * `broadcast`, `reduce`: a chain from (to) the root, rank 0, pipelined
///   in NCCL's 512 KiB chunks;
/// * `gather`, `scatter`: every other rank's share to (from) the root.
///
/// Returns the groups in size order.
pub fn nccl_tests(
    b: &mut FlowBuilder,
    ranks: &Ranks,
    spec: &Sweep,
    t: &FlowTemplate,
    name: &str,
) -> Vec<u32> {
    let n = ranks.len();
    let c = spec.collective;
    let rings = ranks.rings();
    let nch = rings.len() as u32;
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
        let mut p2p = |b: &mut FlowBuilder, src: usize, dst: usize, bytes: u64, after: &[u32]| {
            let ids = ranks.hop(b, src, dst, None, bytes, t, g, after);
            next[src].extend_from_slice(&ids);
            next[dst].extend_from_slice(&ids);
        };
        match c {
            Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather => {
                let mut ends: Vec<Vec<u32>> = vec![Vec::new(); n];
                for (ch, (order, rail)) in rings.iter().enumerate() {
                    let part = share(counts.param, nch, ch as u32);
                    let last = if c == Collective::AllReduce {
                        ring_steps(
                            b,
                            ranks,
                            order,
                            *rail,
                            2 * (n - 1),
                            allreduce_chunk(part, n),
                            t,
                            g,
                            &done,
                        )
                    } else {
                        ring_steps(b, ranks, order, *rail, n - 1, |_, _| part, t, g, &done)
                    };
                    ring_ends(order, &last, &mut ends);
                }
                next = ends;
            }
            Collective::AllToAll | Collective::SendRecv => {
                for (i, before) in done.iter().enumerate() {
                    let peers: Vec<usize> = if c == Collective::SendRecv {
                        vec![(i + 1) % n]
                    } else {
                        (0..n).filter(|&j| j != i).collect()
                    };
                    for j in peers {
                        p2p(b, i, j, counts.param, before);
                    }
                }
            }
            Collective::Broadcast | Collective::Reduce => {
                // A chain, pipelined in NCCL's chunks: broadcast from the
                // root (rank 0) down the ranks, reduce up them to the root
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
                        let ids = ranks.hop(b, src, dst, None, len, t, g, &after);
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
                    p2p(b, src, dst, counts.param, &done[src]);
                }
            }
        }
        done = next;
    }
    groups
}

/// What each rank must see finished after a ring's `last` step (by
/// sending rank; `order` is the ring): its own send and the one it
/// received, added to `next`.
fn ring_ends(order: &[usize], last: &[Vec<u32>], next: &mut [Vec<u32>]) {
    let n = order.len();
    for (i, &r) in order.iter().enumerate() {
        next[r].extend_from_slice(&last[r]);
        next[order[(i + 1) % n]].extend_from_slice(&last[r]);
    }
}
