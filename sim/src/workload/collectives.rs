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

use std::collections::HashMap;

use petgraph::algo::dijkstra;
use petgraph::graph::NodeIndex;
use roce::time::{Duration, Rate};

use super::builder::{FlowBuilder, FlowTemplate};
use super::nccl_tests::{Collective, NcclRow, Sweep, ELEMENT_BYTES};
use super::{GroupSpec, LocalLink, LocalPath, RingShape};
use crate::nccl_model::{Algo, Comm, Cpu, Enabled, Func, Gpu, Graph, Model, PathType, Proto};
use crate::topology::{GpuServers, NodeId, Topology};

/// Where a rank lives: its server (an index into the collective's
/// servers) and GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rank {
    /// Server index (dense, in the order the servers were given).
    pub server: u32,
    /// GPU of the server, as the topology numbers them (0 for a plain
    /// host).
    pub gpu: u32,
}

/// The ranks of a collective and what joins them.
#[derive(Debug, Clone)]
pub struct Ranks {
    /// Ranks in rank order.
    ranks: Vec<Rank>,
    /// Per server: its NICs by rail.
    nics: Vec<Vec<NodeId>>,
    /// Per server: its index among the topology's GPU servers (names
    /// the NVLink and PCIe resources, which every communicator on the
    /// server shares).
    server_ids: Vec<u32>,
    /// The GPUs of each server that are ranks, ascending (the same on
    /// every server).
    members: Vec<u32>,
    /// The servers' hardware (`None`: plain hosts).
    gpu: Option<GpuServers>,
    /// Rings run at once (1 on plain hosts).
    channels: u32,
    /// Fabric hops release what waits for them when their data lands
    /// ([`super::FlowSpec::landing`]); else at the sender's completion.
    landing: bool,
    /// Per NIC (node id) of the ranks: the unloaded one-way latency to
    /// every node (link delays along the fastest path); empty until
    /// [`Ranks::on`].
    reach: HashMap<u32, Vec<Duration>>,
    /// The slowest NIC link of the ranks (`Rate::from_bps(0)` until [`Ranks::on`]).
    nic_rate: Rate,
}

impl Ranks {
    /// One rank per host, in the order given; one ring.
    pub fn hosts(hosts: &[NodeId]) -> Ranks {
        Ranks {
            ranks: (0..hosts.len() as u32)
                .map(|server| Rank { server, gpu: 0 })
                .collect(),
            nics: hosts.iter().map(|&h| vec![h]).collect(),
            server_ids: (0..hosts.len() as u32).collect(),
            members: vec![0],
            gpu: None,
            channels: 1,
            landing: true,
            reach: HashMap::new(),
            nic_rate: Rate::from_bps(0),
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
        let list: Vec<u32> = (0..gpus).collect();
        Ranks::members(topo, servers, &list, channels)
    }

    /// GPUs `gpus` (the same on every server, ascending, distinct) of
    /// each of `servers`, server-major: rank `k * gpus.len() + j` is GPU
    /// `gpus[j]` of the `k`-th server listed (a data-parallel group of a
    /// job whose tensor-parallel groups fill each server). `channels`
    /// rings at once, spread over the rails of those GPUs' NICs. `None`
    /// as for [`Ranks::gpus`], or when `gpus` is empty, unsorted or
    /// repeats a GPU.
    pub fn members(topo: &Topology, servers: &[u32], gpus: &[u32], channels: u32) -> Option<Ranks> {
        let g = topo.gpu?;
        if gpus.is_empty()
            || gpus.windows(2).any(|w| w[0] >= w[1])
            || gpus.iter().any(|&x| x >= g.gpus)
            || channels == 0
        {
            return None;
        }
        let hosts = topo.hosts();
        let mut nics = Vec::with_capacity(servers.len());
        let mut ranks = Vec::with_capacity(servers.len() * gpus.len());
        for (k, &s) in servers.iter().enumerate() {
            if s >= g.servers {
                return None;
            }
            nics.push(
                (0..g.nics)
                    .map(|r| hosts[g.host_index(s, r) as usize])
                    .collect(),
            );
            ranks.extend(gpus.iter().map(|&gpu| Rank {
                server: k as u32,
                gpu,
            }));
        }
        Some(Ranks {
            ranks,
            nics,
            server_ids: servers.to_vec(),
            members: gpus.to_vec(),
            gpu: Some(g),
            channels,
            landing: true,
            reach: HashMap::new(),
            nic_rate: Rate::from_bps(0),
        })
    }

    /// The rails the member GPUs' NICs are on, ascending (`[0]` on plain
    /// hosts).
    fn rails(&self) -> Vec<u32> {
        let Some(g) = self.gpu else {
            return vec![0];
        };
        let mut r: Vec<u32> = self.members.iter().map(|&x| g.rail_of(x)).collect();
        r.dedup();
        r
    }

    /// The same ranks, measured on `topo` (which holds their NICs): the
    /// unloaded latency between NICs and the NICs' rate, which NCCL's
    /// model ([`Ranks::comm`]) and the protocols' step latencies use.
    pub fn on(mut self, topo: &Topology) -> Ranks {
        let g = topo.graph();
        let mut rate = None::<Rate>;
        for &nic in self.nics.iter().flatten() {
            if let Some(&l) = topo.node(nic).ports.first() {
                let r = topo.link(l).rate;
                rate = Some(rate.map_or(r, |x| x.min(r)));
            }
            if self.reach.contains_key(&nic.0) {
                continue;
            }
            let dist = dijkstra(&g, NodeIndex::new(nic.0 as usize), None, |e| {
                topo.link(*e.weight()).delay.as_ps()
            });
            let mut v = vec![Duration::MAX; topo.nodes.len()];
            for (n, d) in dist {
                v[n.index()] = Duration::from_ps(d);
            }
            self.reach.insert(nic.0, v);
        }
        self.nic_rate = rate.unwrap_or(Rate::from_bps(0));
        self
    }

    /// The communicator NCCL's tuning model sees for these ranks: ranks,
    /// servers (nodes), Hopper GPUs on Intel hosts, and ring and tree
    /// graphs of `channels` channels whose per-channel bandwidths are
    /// the servers' NVLink and NICs shared by the channels.
    pub fn comm(&self) -> Comm {
        let gbs = |r: Rate| r.bps() as f64 / 8e9;
        let nch = f64::from(self.channels.max(1));
        let nic = gbs(self.nic_rate);
        let (bw_intra, bw_inter, type_intra, type_inter) = match self.gpu {
            None => (nic / nch, nic / nch, PathType::Pix, PathType::Pix),
            Some(g) => {
                let inter = nic * self.rails().len() as f64 / nch;
                let intra = gbs(g.nvlink.rate) / nch;
                let ty = if !g.gpudirect {
                    PathType::Phb
                } else if g.gpus <= g.nics {
                    PathType::Pix
                } else {
                    PathType::Pxb
                };
                (intra, inter, PathType::Nvl, ty)
            }
        };
        let graph = Graph {
            n_channels: self.channels.max(1),
            bw_intra,
            bw_inter,
            type_intra,
            type_inter,
            latency_inter: 0.0,
            same_channels: false,
        };
        Comm {
            n_ranks: self.ranks.len() as u32,
            n_nodes: self.nics.len() as u32,
            gpu: Gpu::Hopper,
            cpu: Cpu::Intel,
            tree: graph,
            ring: graph,
            pat: graph,
            net_overhead_us: None,
            plain_tree_pattern: false,
        }
    }

    /// What the protocol adds before rank `from` hands a step to `to`:
    /// the step latency `plan` charges (inside a server or between
    /// servers) less what the simulation already spends on the way (an
    /// NVLink copy's latency; the fabric's unloaded one-way latency and,
    /// without GPUDirect, the two PCIe copies' latency), never below 0.
    /// Unloaded, a step then takes the latency NCCL's model gives; the
    /// queueing the fabric adds comes on top.
    fn step_delay(&self, plan: &Plan, from: usize, to: usize, rail: Option<u32>) -> Duration {
        let (a, z) = (self.ranks[from], self.ranks[to]);
        if let Some(g) = self.gpu {
            if a.server == z.server {
                return plan.intra.saturating_sub(g.nvlink.latency);
            }
        }
        let (sn, dn) = match (rail, self.gpu) {
            (Some(r), Some(_)) => (
                self.nics[a.server as usize][r as usize],
                self.nics[z.server as usize][r as usize],
            ),
            _ => (self.own_nic(from), self.own_nic(to)),
        };
        let mut spent = self
            .reach
            .get(&sn.0)
            .and_then(|v| v.get(dn.0 as usize).copied())
            .filter(|&d| d != Duration::MAX)
            .unwrap_or(Duration::ZERO);
        if let Some(g) = self.gpu.filter(|g| !g.gpudirect) {
            spent += g.pcie_latency + g.pcie_latency;
        }
        plan.inter.saturating_sub(spent)
    }

    /// A marker in group `g`: a copy that moves nothing, on a resource no
    /// transfer uses, posted `delay` after every flow of `after` has
    /// finished; what waits for it waits for all of them and `delay`
    /// more (a barrier between collectives, a compute phase). Returns
    /// its flow.
    pub fn marker(
        &self,
        b: &mut FlowBuilder,
        t: &FlowTemplate,
        g: u32,
        after: &[u32],
        delay: Duration,
    ) -> u32 {
        let at = self.nics[0][0];
        let id = b.local(at, at, 1, t.start, self.barrier_path(), Some(g), after);
        b.set_delay(&[id], delay);
        id
    }

    /// A [`Ranks::marker`] that names a GPU: on `node` (a NIC of the
    /// GPU's server) with its path's `gpu` set, so results can tell whose
    /// it is (a compute phase of one GPU).
    #[allow(clippy::too_many_arguments)]
    pub fn marker_on(
        &self,
        b: &mut FlowBuilder,
        t: &FlowTemplate,
        g: u32,
        (node, gpu): (NodeId, u32),
        after: &[u32],
        delay: Duration,
    ) -> u32 {
        let path = LocalPath {
            gpu: gpu as u16,
            ..self.barrier_path()
        };
        let id = b.local(node, node, 1, t.start, path, Some(g), after);
        b.set_delay(&[id], delay);
        id
    }

    /// A copy that costs nothing, on a resource no transfer uses: the
    /// marker a barrier between collectives waits on.
    fn barrier_path(&self) -> LocalPath {
        let resource = match self.gpu {
            Some(g) => Resources::new(&g).end(),
            None => 0,
        };
        LocalPath {
            resource,
            rate: Rate::from_bps(u64::MAX),
            latency: Duration::ZERO,
            link: LocalLink::NvLink,
            gpu: 0,
        }
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
        let per = self.members.len();
        let rails = self.rails();
        (0..self.channels)
            .map(|c| {
                let rail = rails[c as usize % rails.len()];
                // The first member GPU beside the rail's NIC.
                let first = self
                    .members
                    .iter()
                    .position(|&x| g.rail_of(x) == rail)
                    .unwrap_or(0);
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
    /// `after` and `delay` more; a ring channel's inter-server hop uses
    /// `rail` at both ends. Returns the flows whose release means the
    /// bytes are in `to`'s memory (none for 0 bytes).
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
        delay: Duration,
    ) -> Vec<u32> {
        if bytes == 0 {
            return Vec::new();
        }
        // RDMA between two NICs (its waiters go when the data lands, with
        // `landing`) and a copy inside a server; `delay` goes on the
        // hop's first flow, the sender's latency before it.
        let rdma = |b: &mut FlowBuilder, src, dst, after: &[u32], delay| {
            let ids = b.pair(src, dst, bytes, t.start, t, Some(group), after);
            if self.landing {
                b.set_landing(&ids);
            }
            b.set_delay(&ids, delay);
            ids
        };
        let copy = |b: &mut FlowBuilder, src, dst, path, after: &[u32], delay| {
            let id = b.local(src, dst, bytes, t.start, path, Some(group), after);
            b.set_delay(&[id], delay);
            id
        };
        let (src_nic, dst_nic) = (self.own_nic(from), self.own_nic(to));
        let Some(g) = self.gpu else {
            return rdma(b, src_nic, dst_nic, after, delay);
        };
        let (a, z) = (self.ranks[from], self.ranks[to]);
        let res = Resources::new(&g);
        let (sa, sz) = (
            self.server_ids[a.server as usize],
            self.server_ids[z.server as usize],
        );
        if a.server == z.server {
            let path = res.nvlink(sa, a.gpu, z.gpu);
            return vec![copy(b, src_nic, dst_nic, path, after, delay)];
        }
        let nic = |r: Rank, own: NodeId| match rail {
            Some(rail) => self.nics[r.server as usize][rail as usize],
            None => own,
        };
        let (sn, dn) = (nic(a, src_nic), nic(z, dst_nic));
        if g.gpudirect {
            return rdma(b, sn, dn, after, delay);
        }
        let d2h = copy(b, sn, sn, res.pcie(sa, a.gpu, false), after, delay);
        let sent = rdma(b, sn, dn, &[d2h], Duration::ZERO);
        let h2d = copy(b, dn, dn, res.pcie(sz, z.gpu, true), &sent, Duration::ZERO);
        vec![h2d]
    }
}

/// Numbering of the local-copy resources of the topology's GPU servers
/// (by their index there, so that every communicator on a server shares
/// them): per server and GPU, NVLink egresses (per peer when point to
/// point), then PCIe to host memory, then PCIe from it.
struct Resources {
    g: GpuServers,
    servers: u32,
}

impl Resources {
    fn new(g: &GpuServers) -> Resources {
        Resources {
            g: *g,
            servers: g.servers,
        }
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
            link: LocalLink::NvLink,
            gpu: from as u16,
        }
    }

    /// The first number past every resource.
    fn end(&self) -> u32 {
        self.servers * self.g.gpus * self.g.gpus + 2 * self.servers * self.g.gpus
    }

    fn pcie(&self, server: u32, gpu: u32, inbound: bool) -> LocalPath {
        let gpus = self.g.gpus;
        let base = self.servers * gpus * gpus;
        let per_dir = self.servers * gpus;
        LocalPath {
            resource: base + u32::from(inbound) * per_dir + server * gpus + gpu,
            rate: self.g.pcie,
            latency: self.g.pcie_latency,
            link: if inbound {
                LocalLink::PcieFromHost
            } else {
                LocalLink::PcieToHost
            },
            gpu: gpu as u16,
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
        training: None,
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
                Duration::ZERO,
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

/// How one size of a collective runs: the algorithm and protocol NCCL's
/// tuning model picks (or the workload forces), and what they cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Plan {
    /// Algorithm (Ring or Tree).
    pub algo: Algo,
    /// Protocol.
    pub proto: Proto,
    /// Latency charged once, before the first step.
    pub base: Duration,
    /// Latency of a step between GPUs of one server.
    pub intra: Duration,
    /// Latency of a step between servers.
    pub inter: Duration,
    /// NCCL's predicted time for the collective, µs.
    pub model_us: f64,
    /// Its latency term alone, µs.
    pub model_latency_us: f64,
    /// The most data one channel's step moves (NCCL's `chunkSize`).
    pub chunk: u64,
    /// Chunks a connection holds in flight (NCCL's 8 buffer steps over
    /// the steps of a chunk).
    pub slots: usize,
}

impl Plan {
    /// The plan NCCL's model of `comm` (`model`, [`Comm::model`]) gives
    /// collective `f` of `bytes` (NCCL's `nBytes`) among `enabled`;
    /// `None` when nothing is enabled.
    pub fn choose(
        comm: &Comm,
        model: &Model,
        f: Func,
        bytes: u64,
        enabled: &Enabled,
    ) -> Option<Plan> {
        let c = model.choose(f, bytes, enabled)?;
        let sl = comm.step_latency(f, c.algo, c.proto);
        let us = |x: f64| Duration::from_ps((x * 1e6).round() as u64);
        let (chunk, slots) = chunking(comm, f, c.algo, c.proto, bytes);
        Some(Plan {
            algo: c.algo,
            proto: c.proto,
            base: us(sl.base),
            intra: us(sl.intra),
            inter: us(sl.inter),
            model_us: c.time_us,
            model_latency_us: model.latency(f, c.algo, c.proto),
            chunk,
            slots,
        })
    }

    /// Bytes on the link for `data` bytes: LL carries 8 bytes of data
    /// and a flag per 16-byte line, LL128 120 bytes per 128, Simple the
    /// data alone.
    pub fn wire_bytes(&self, data: u64) -> u64 {
        match self.proto {
            Proto::Ll => data.div_ceil(8) * 16,
            Proto::Ll128 => data.div_ceil(120) * 128,
            Proto::Simple => data,
        }
    }

    fn chunk_max(&self) -> u64 {
        self.chunk
    }

    fn slots(&self) -> usize {
        self.slots
    }
}

/// NCCL's chunk size and chunks in flight for `f` of `bytes` with `a`
/// and `p` (`enqueue.cc`'s `calcCollChunking`): the protocol's connection
/// buffer (Simple 4 MiB, LL 512 KiB of 16-byte lines, LL128 4,915,200
/// bytes of 128-byte lines) over NCCL's 8 steps is a step; a chunk is 4
/// steps for the Simple ring's all-reduce, all-gather and reduce-scatter
/// and 1 step otherwise, holding half its lines in data with LL and
/// 120/128 with LL128; the tree's LL128 chunk halves while the buffer
/// would give each channel too few chunks to fill the tree's pipeline.
fn chunking(comm: &Comm, f: Func, a: Algo, p: Proto, bytes: u64) -> (u64, usize) {
    let buff: u64 = match p {
        Proto::Simple => 4 << 20,
        Proto::Ll => 8 * 512 * NCCL_STEPS as u64 * 16,
        Proto::Ll128 => 120 * 640 * NCCL_STEPS as u64 * 8,
    };
    let step = buff / NCCL_STEPS as u64;
    let chunk_steps = if p == Proto::Simple
        && a == Algo::Ring
        && matches!(f, Func::AllReduce | Func::AllGather | Func::ReduceScatter)
    {
        NCCL_STEPS / 2
    } else {
        1
    };
    let mut chunk = step * chunk_steps as u64;
    match p {
        Proto::Ll => chunk /= 2,
        Proto::Ll128 => chunk = chunk / 16 * 15,
        Proto::Simple => {}
    }
    if a == Algo::Tree && p == Proto::Ll128 {
        let nodes = comm.n_nodes.max(1);
        let ppn = f64::from(comm.n_ranks.max(1)) / f64::from(nodes);
        let nsteps = 1.0 + f64::from(63 - u64::from(nodes).leading_zeros() as i32) + 0.1 * ppn;
        let nch = u64::from(comm.ring.n_channels.max(1));
        let per = |c: u64| (bytes / (nch * c)) as f64;
        while per(chunk) < nsteps * 64.0 / ppn && chunk > 131_072 {
            chunk /= 2;
        }
        while per(chunk) < nsteps * 16.0 / ppn && chunk > 32_768 {
            chunk /= 2;
        }
    }
    (chunk, NCCL_STEPS / chunk_steps)
}

/// Whether `spec` has a size after `size`.
fn sizes_left(spec: &Sweep, size: u64) -> bool {
    spec.sizes.last().is_some_and(|&l| l != size)
}

/// NCCL's steps per connection buffer (`NCCL_STEPS`).
const NCCL_STEPS: usize = 8;

/// The NCCL function a collective is tuned as; `None` for the
/// point-to-point ones.
fn func_of(c: Collective) -> Option<Func> {
    match c {
        Collective::AllReduce => Some(Func::AllReduce),
        Collective::AllGather => Some(Func::AllGather),
        Collective::ReduceScatter => Some(Func::ReduceScatter),
        Collective::Broadcast => Some(Func::Broadcast),
        Collective::Reduce => Some(Func::Reduce),
        _ => None,
    }
}

/// `total` bytes split over `parts`: part `c`'s share, in whole elements
/// (the first parts take the remainder).
fn share(total: u64, parts: u32, c: u32) -> u64 {
    let elems = total / ELEMENT_BYTES;
    let p = u64::from(parts.max(1));
    let mine = elems / p + u64::from(u64::from(c) < elems % p);
    mine * ELEMENT_BYTES + if c == 0 { total % ELEMENT_BYTES } else { 0 }
}

/// What every hop of one size shares.
struct Ctx<'a> {
    ranks: &'a Ranks,
    t: &'a FlowTemplate,
    group: u32,
    plan: Plan,
}

impl Ctx<'_> {
    /// Rank `from` sends `data` bytes of step data to `to` (see
    /// [`Ranks::hop`]) after `after`, with the protocol's step latency
    /// (and `extra`) before it and its line format on the wire.
    fn send(
        &self,
        b: &mut FlowBuilder,
        (from, to): (usize, usize),
        rail: Option<u32>,
        data: u64,
        after: &[u32],
        extra: Duration,
    ) -> Vec<u32> {
        let delay = self.ranks.step_delay(&self.plan, from, to, rail) + extra;
        let bytes = self.plan.wire_bytes(data);
        self.ranks
            .hop(b, from, to, rail, bytes, self.t, self.group, after, delay)
    }
}

/// One channel's ring: `rounds` passes of `steps` ring steps over
/// `order` (ranks by ring position), NCCL's loop over a buffer larger
/// than one pass holds. In round `r`, step `s`, position `i` sends
/// `bytes(r, s, i)` to position `i+1`: after the data it forwards (what
/// position `i-1` sent it in step `s-1` of the round; a round's first
/// send, which forwards nothing, after a free slot in the receiver's
/// buffer: the rank's send `slots` sends earlier has landed), and its
/// first `slots` sends after `first[rank]`, what the rank had to finish
/// first.
/// A sender's buffer credits are not modelled beyond that: NCCL's
/// per-step latencies, which every send carries, are fitted end to end
/// and hold its credit stalls. The first send of each rank carries the
/// base latency.
/// Returns, by rank, the sends that end a round on it (the last step of
/// each round, which it sends or receives): no later send waits for
/// them, and a later round's may finish before them, so the collective
/// is over for the rank when all of them are.
fn ring_run(
    b: &mut FlowBuilder,
    cx: &Ctx<'_>,
    (order, rail): (&[usize], Option<u32>),
    (rounds, steps): (usize, usize),
    bytes: impl Fn(usize, usize, usize) -> u64,
    first: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    let n = order.len();
    let slots = cx.plan.slots();
    // hist[q % (slots + 1)][i]: the flows of send q of position i.
    let mut hist: Vec<Vec<Vec<u32>>> = vec![vec![Vec::new(); n]; slots + 1];
    let total = rounds * steps;
    let mut ends = vec![Vec::new(); cx.ranks.len()];
    for q in 0..total {
        let (r, s) = (q / steps, q % steps);
        let mut cur = Vec::with_capacity(n);
        for i in 0..n {
            let rank = order[i];
            // What the rank finished before, for its first sends; later
            // sends wait only for their data (see `ring_run`'s docs).
            let mut after = if q < slots {
                first[rank].clone()
            } else {
                Vec::new()
            };
            if s == 0 && r > 0 && q >= slots {
                // A new round's first send needs a free buffer slot on
                // its connection: the send `slots` earlier has landed.
                after.extend_from_slice(&hist[(q - slots) % (slots + 1)][i]);
            }
            if s > 0 {
                after.extend_from_slice(&hist[(q - 1) % (slots + 1)][(i + n - 1) % n]);
            }
            let extra = if q == 0 { cx.plan.base } else { Duration::ZERO };
            let ids = cx.send(
                b,
                (rank, order[(i + 1) % n]),
                rail,
                bytes(r, s, i),
                &after,
                extra,
            );
            if s + 1 == steps {
                ends[rank].extend_from_slice(&ids);
                ends[order[(i + 1) % n]].extend_from_slice(&ids);
            }
            cur.push(ids);
        }
        hist[q % (slots + 1)] = cur;
    }
    ends
}

/// One channel of NCCL's tree all-reduce over `order` (ranks
/// server-major, each server's GPUs from the one beside the channel's
/// rail: the first is the server's head): within a server the GPUs form
/// a chain to the head, and the heads a binary tree over the servers
/// (server `k` at heap position `k`, or mirrored, `mirror`, for the
/// second tree of NCCL's double binary tree). `part` bytes move in
/// chunks of the plan's size: up the chains and the tree (each rank
/// sends once it has its children's chunk), then down; a hop's chunk
/// waits for a free slot (its chunk `slots` earlier landed; the first
/// ones for what the rank finished before). Returns, by rank,
/// the flows of the last chunk it sent or received and of the last
/// `slots` chunks it sent on each hop (nothing later waits for those).
fn tree_allreduce(
    b: &mut FlowBuilder,
    cx: &Ctx<'_>,
    (order, rail): (&[usize], Option<u32>),
    (servers, per): (usize, usize),
    mirror: bool,
    part: u64,
    first: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    let n = order.len();
    let cmax = cx.plan.chunk_max();
    let chunks = part.div_ceil(cmax).max(1) as usize;
    let slots = cx.plan.slots();
    // Position of server k's GPU j in `order`; the heap label of server k.
    let at = |k: usize, j: usize| k * per + j;
    let label = |k: usize| if mirror { servers - 1 - k } else { k };
    let server_of = |l: usize| if mirror { servers - 1 - l } else { l };
    let parent = |k: usize| {
        let l = label(k);
        (l > 0).then(|| server_of((l - 1) / 2))
    };
    let children = |k: usize| {
        let l = label(k);
        [2 * l + 1, 2 * l + 2]
            .into_iter()
            .filter(|&c| c < servers)
            .map(server_of)
            .collect::<Vec<_>>()
    };
    // Per directed hop (from position, to position): its sends by chunk.
    let mut sent: HashMap<(usize, usize), Vec<Vec<u32>>> = HashMap::new();
    let mut ends = vec![Vec::new(); cx.ranks.len()];
    for j in 0..chunks {
        let len = cmax.min(part - (j as u64 * cmax).min(part));
        // Up: chain tails first, then each chain toward its head, then
        // the heads from the leaves of the tree to the root.
        let mut up_in: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut hop = |b: &mut FlowBuilder,
                       from: usize,
                       to: usize,
                       data_in: &[u32],
                       up_in: &mut Vec<Vec<u32>>| {
            let key = (from, to);
            let past = sent.entry(key).or_default();
            // A free slot in the receiver's buffer: this hop's chunk
            // `slots` earlier has landed (before that, what the rank had
            // to finish first).
            let mut after = if j < slots {
                first[order[from]].clone()
            } else {
                past[j - slots].clone()
            };
            after.extend_from_slice(data_in);
            // The base latency once, before the sends that start the
            // collective (no data to wait for).
            let extra = if j == 0 && data_in.is_empty() {
                cx.plan.base
            } else {
                Duration::ZERO
            };
            let ids = cx.send(b, (order[from], order[to]), rail, len, &after, extra);
            past.push(ids.clone());
            up_in[to].extend_from_slice(&ids);
            ids
        };
        for k in 0..servers {
            for m in (1..per).rev() {
                let data = up_in[at(k, m)].clone();
                hop(b, at(k, m), at(k, m - 1), &data, &mut up_in);
            }
        }
        // Heads in decreasing heap label: children before parents.
        let mut by_label: Vec<usize> = (0..servers).collect();
        by_label.sort_by_key(|&k| std::cmp::Reverse(label(k)));
        for &k in &by_label {
            if let Some(p) = parent(k) {
                let data = up_in[at(k, 0)].clone();
                hop(b, at(k, 0), at(p, 0), &data, &mut up_in);
            }
        }
        // Down: from the root through the tree, then along each chain.
        let mut down_in: Vec<Vec<u32>> = vec![Vec::new(); n];
        by_label.reverse();
        for &k in &by_label {
            let head = at(k, 0);
            let data = if parent(k).is_some() {
                down_in[head].clone()
            } else {
                up_in[head].clone()
            };
            for c in children(k) {
                hop(b, head, at(c, 0), &data, &mut down_in);
            }
            for m in 1..per {
                let data = if m == 1 {
                    data.clone()
                } else {
                    down_in[at(k, m - 1)].clone()
                };
                hop(b, at(k, m - 1), at(k, m), &data, &mut down_in);
            }
        }
        if j + 1 == chunks {
            for p in 0..n {
                ends[order[p]].extend(up_in[p].iter().chain(&down_in[p]).copied());
            }
        }
    }
    // A rank's own last sends on each hop, too: the last `slots` chunks
    // of a hop wait for nothing later (earlier ones hold the slots they
    // free).
    for ((from, _), past) in &sent {
        for ids in &past[past.len().saturating_sub(slots)..] {
            ends[order[*from]].extend_from_slice(ids);
        }
    }
    ends
}

/// One call of collective `c` moving `param` bytes per rank (NCCL's
/// count times the element size) on `ranks` with `plan` (`None`: a
/// point-to-point collective, no protocol costs), its flows in group
/// `g`, each rank's first sends after `done[rank]`. Returns, by rank,
/// the flows it must see finished before its next call.
fn call(
    b: &mut FlowBuilder,
    ranks: &Ranks,
    (c, param): (Collective, u64),
    plan: Option<Plan>,
    t: &FlowTemplate,
    g: u32,
    done: &[Vec<u32>],
) -> Vec<Vec<u32>> {
    let n = ranks.len();
    let rings = ranks.rings();
    let nch = rings.len() as u32;
    let servers = ranks.nics.len();
    let per = n / servers.max(1);
    let mut next: Vec<Vec<u32>> = vec![Vec::new(); n];
    let cx = Ctx {
        ranks,
        t,
        group: g,
        // The point-to-point collectives pay no protocol costs.
        plan: plan.unwrap_or(Plan {
            algo: Algo::Ring,
            proto: Proto::Simple,
            base: Duration::ZERO,
            intra: Duration::ZERO,
            inter: Duration::ZERO,
            model_us: 0.0,
            model_latency_us: 0.0,
            chunk: u64::MAX,
            slots: NCCL_STEPS,
        }),
    };
    match c {
        Collective::AllReduce if cx.plan.algo == Algo::Tree => {
            for (ch, (order, rail)) in rings.iter().enumerate() {
                let part = share(param, nch, ch as u32);
                let ends = tree_allreduce(
                    b,
                    &cx,
                    (order, *rail),
                    (servers, per),
                    // NCCL's double binary tree: the second half of
                    // the channels runs the mirrored tree, so with
                    // two channels per NIC each rail carries both.
                    nch >= 2 && ch as u32 >= nch / 2,
                    part,
                    done,
                );
                for (r, e) in ends.into_iter().enumerate() {
                    next[r].extend(e);
                }
            }
        }
        Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather => {
            let cmax = cx.plan.chunk_max();
            for (ch, (order, rail)) in rings.iter().enumerate() {
                let part = share(param, nch, ch as u32);
                let ends = if c == Collective::AllReduce {
                    // Each round reduces up to n chunks of cmax.
                    let per_round = cmax * n as u64;
                    let rounds = part.div_ceil(per_round).max(1) as usize;
                    let round_bytes =
                        move |r: usize| per_round.min(part - (r as u64 * per_round).min(part));
                    ring_run(
                        b,
                        &cx,
                        (order, *rail),
                        (rounds, 2 * (n - 1)),
                        move |r, s, i| allreduce_chunk(round_bytes(r), n)(s, i),
                        done,
                    )
                } else {
                    let rounds = part.div_ceil(cmax).max(1) as usize;
                    ring_run(
                        b,
                        &cx,
                        (order, *rail),
                        (rounds, n - 1),
                        move |r, _, _| cmax.min(part - (r as u64 * cmax).min(part)),
                        done,
                    )
                };
                for (r, e) in ends.into_iter().enumerate() {
                    next[r].extend(e);
                }
            }
        }
        Collective::AllToAll | Collective::SendRecv => {
            for (i, before) in done.iter().enumerate() {
                let peers: Vec<usize> = if c == Collective::SendRecv {
                    vec![(i + 1) % n]
                } else {
                    (0..n).filter(|&j| j != i).collect()
                };
                for j in peers {
                    let ids = cx.send(b, (i, j), None, param, before, Duration::ZERO);
                    next[i].extend_from_slice(&ids);
                    next[j].extend_from_slice(&ids);
                }
            }
        }
        Collective::Broadcast | Collective::Reduce => {
            // A chain in chunks: broadcast from the root (rank 0)
            // down the ranks, reduce up them to the root (ranks 1,
            // 2, ..., N-1, then 0). A rank forwards a chunk once it
            // has it; a hop holds the protocol's slots in flight.
            let order: Vec<usize> = if c == Collective::Broadcast {
                (0..n).collect()
            } else {
                (1..n).chain([0]).collect()
            };
            let p = param;
            // One NCCL step per chunk (BROADCAST_CHUNKSTEPS,
            // REDUCE_CHUNKSTEPS), 8 in flight.
            let chunk = cx.plan.chunk_max();
            let chunks = p.div_ceil(chunk).max(1) as usize;
            let mut sent: Vec<Vec<Vec<u32>>> = vec![Vec::with_capacity(chunks); n - 1];
            for j in 0..chunks {
                let len = chunk.min(p - (j as u64 * chunk).min(p));
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
                    let extra = if j == 0 && h == 0 {
                        cx.plan.base
                    } else {
                        Duration::ZERO
                    };
                    let ids = cx.send(b, (src, dst), None, len, &after, extra);
                    if j + 1 == chunks {
                        next[src].extend_from_slice(&ids);
                        next[dst].extend_from_slice(&ids);
                    }
                    sent[h].push(ids);
                }
            }
        }
        Collective::Gather | Collective::Scatter => {
            for i in 1..n {
                let (src, dst) = if c == Collective::Gather {
                    (i, 0)
                } else {
                    (0, i)
                };
                let ids = cx.send(b, (src, dst), None, param, &done[src], Duration::ZERO);
                next[src].extend_from_slice(&ids);
                next[dst].extend_from_slice(&ids);
            }
        }
    }
    next
}

/// nccl-tests' sweep `spec` over `ranks`: one group per size, named
/// `NAME-SIZE` (the table's size), each size's flows posted once every
/// rank has finished the size before (nccl-tests times each size on its
/// own, over many iterations after a warm-up).
///
/// All-reduce, all-gather, reduce-scatter, broadcast and reduce run with
/// the algorithm and protocol NCCL's tuning model picks for the size on
/// these ranks ([`Ranks::comm`]) among `enabled`: its per-step latency
/// before each send (less what the simulation already spends on the
/// way, [`Ranks::step_delay`]), its base latency before a rank's first
/// send, its line format on the wire, its chunk size and buffer slots:
///
/// * Ring: each channel's ring over its share of the buffer, in rounds
///   of at most the protocol's chunk per rank; all-reduce 2(N-1) steps
///   a round, all-gather and reduce-scatter N-1;
/// * Tree (all-reduce): each channel up and down a chain per server and
///   a binary tree of servers (mirrored on the second half of the
///   channels: the double binary tree), chunk by chunk;
/// * broadcast, reduce: a chain from (to) the root, rank 0, in chunks;
///
/// and the rest as NCCL's point-to-point operations, without a
/// protocol's costs: `alltoall` every rank to every other at once,
/// `sendrecv` each rank to the next, `gather` (`scatter`) every other
/// rank's share to (from) the root. PAT is never picked (not
/// simulated). Fails naming the size when `enabled` leaves NCCL nothing
/// to run a collective with. Returns the groups in size order.
pub fn nccl_tests(
    b: &mut FlowBuilder,
    ranks: &Ranks,
    spec: &Sweep,
    t: &FlowTemplate,
    name: &str,
    enabled: &Enabled,
) -> Result<Vec<u32>, String> {
    let n = ranks.len();
    let comm = Communicator::new(ranks, enabled);
    let mut groups = Vec::new();
    // Per rank: the flows it must see finished before its next size.
    let mut done: Vec<Vec<u32>> = vec![Vec::new(); n];
    for &size in &spec.sizes {
        let label = |bytes: u64| format!("{name}-{bytes}");
        let (g, next) = comm.call(b, spec.collective, size, t, (&label, "nccl-tests"), &done)?;
        groups.push(g);
        done = next;
        if sizes_left(spec, size) {
            // nccl-tests times each size on its own (after warm-up, over
            // many iterations): the next size starts when every rank has
            // finished this one, through one marker copy that waits for
            // all of them.
            let mut all: Vec<u32> = done.iter().flatten().copied().collect();
            all.sort_unstable();
            all.dedup();
            done = vec![vec![ranks.marker(b, t, g, &all, Duration::ZERO)]; n];
        }
    }
    Ok(groups)
}

/// A communicator: ranks, NCCL's tuning model of them, and the
/// algorithms and protocols it may pick from (PAT never: not simulated).
pub struct Communicator<'a> {
    ranks: &'a Ranks,
    comm: Comm,
    model: Model,
    enabled: Enabled,
}

impl<'a> Communicator<'a> {
    /// NCCL's model of `ranks`, picking among `enabled`.
    pub fn new(ranks: &'a Ranks, enabled: &Enabled) -> Communicator<'a> {
        let comm = ranks.comm();
        let model = comm.model();
        let mut enabled = enabled.clone();
        enabled.disable_algo(Algo::Pat);
        Communicator {
            ranks,
            comm,
            model,
            enabled,
        }
    }

    /// Its ranks.
    pub fn ranks(&self) -> &Ranks {
        self.ranks
    }

    /// One call of collective `c` at nccl-tests' size `size` (see
    /// [`Collective::byte_counts`]), as [`nccl_tests`] runs each size:
    /// in a new group named `name(bytes)` (NCCL's byte count) of kind
    /// `kind`, each rank's first sends after `done[rank]`. Returns the
    /// group and, by rank, the flows it must see finished before its
    /// next call; fails naming the size when the algorithms and
    /// protocols enabled leave NCCL nothing to run it with.
    pub fn call(
        &self,
        b: &mut FlowBuilder,
        c: Collective,
        size: u64,
        t: &FlowTemplate,
        (name, kind): (&dyn Fn(u64) -> String, &str),
        done: &[Vec<u32>],
    ) -> Result<(u32, Vec<Vec<u32>>), String> {
        let counts = c.byte_counts(size, ELEMENT_BYTES, self.ranks.len() as u32);
        let g = b.new_group(GroupSpec {
            name: name(counts.size()),
            kind: kind.into(),
            ring: None,
            perftest: None,
            nccl: None,
            training: None,
        });
        let next = self.call_in(b, c, size, t, g, done)?;
        Ok((g, next))
    }

    /// [`Communicator::call`] in group `g`, which it describes (its
    /// collective, ranks, sizes and NCCL's choice) unless another
    /// communicator's call did first: several communicators' calls of
    /// one step of a job (every tensor-parallel group's) share a group.
    pub fn call_in(
        &self,
        b: &mut FlowBuilder,
        c: Collective,
        size: u64,
        t: &FlowTemplate,
        g: u32,
        done: &[Vec<u32>],
    ) -> Result<Vec<Vec<u32>>, String> {
        let n = self.ranks.len();
        let counts = c.byte_counts(size, ELEMENT_BYTES, n as u32);
        let plan = match func_of(c) {
            None => None,
            Some(f) => Some(
                Plan::choose(&self.comm, &self.model, f, counts.size(), &self.enabled)
                    .ok_or_else(|| {
                        format!(
                            "{} of {} bytes: the algorithms and protocols enabled leave NCCL nothing to run it with",
                            c.name(),
                            counts.size()
                        )
                    })?,
            ),
        };
        if let Some(spec) = b.group_mut(g).filter(|s| s.nccl.is_none()) {
            spec.nccl = Some(NcclRow {
                collective: c,
                ranks: n as u32,
                size: counts.size(),
                count: counts.param / ELEMENT_BYTES,
                param: counts.param,
                algorithm: plan.map(|p| p.algo.name()),
                protocol: plan.map(|p| p.proto.name()),
                model_ps: plan.map(|p| (p.model_us * 1e6).round() as u64),
                model_latency_ps: plan.map(|p| (p.model_latency_us * 1e6).round() as u64),
            });
        }
        Ok(call(b, self.ranks, (c, counts.param), plan, t, g, done))
    }
}
