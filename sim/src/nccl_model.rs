//! NCCL's tuning model (`src/graph/tuning.cc`, NCCL 2.2x master): for
//! each collective, algorithm and protocol, the latency and bus
//! bandwidth NCCL predicts from its topology graphs, the time it
//! predicts for a message, and the choice it makes (the fastest enabled
//! pair), with `NCCL_ALGO` / `NCCL_PROTO` parsed as NCCL parses them.
//!
//! What it covers: the Ring, Tree and PAT algorithms with the LL, LL128
//! and Simple protocols, NCCL's default tuner constants (base and
//! hardware latencies, the LL and LL128 bandwidth caps per GPU
//! generation), its model refinements (LL halving, LL128's 120/128,
//! tree's 0.92 and per-channel caps), the tree correction factors and the
//! ring's plateau. Left out: CollNet (needs a SHARP network) and NVLS /
//! NVLS tree (need NVLink SHARP), which score 0 (never chosen), as NCCL
//! scores them without that hardware.
//!
//! Units: latencies and times in microseconds, bandwidths in GB/s
//! (NCCL's `bw` numbers: 10^9 bytes per second), sizes in bytes. The
//! graphs' numbers ([`Graph`]) are what NCCL's topology search finds:
//! per-channel bandwidth inside a node and across the network, channel
//! count, link types.

use std::fmt;

/// A collective NCCL tunes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Func {
    /// `ncclBroadcast`.
    Broadcast,
    /// `ncclReduce`.
    Reduce,
    /// `ncclAllGather`.
    AllGather,
    /// `ncclReduceScatter`.
    ReduceScatter,
    /// `ncclAllReduce`.
    AllReduce,
}

impl Func {
    /// Every function, in NCCL's order.
    pub const ALL: [Func; 5] = [
        Func::Broadcast,
        Func::Reduce,
        Func::AllGather,
        Func::ReduceScatter,
        Func::AllReduce,
    ];

    /// NCCL's name (`ncclFuncStr`), as `NCCL_ALGO` prefixes use it.
    pub fn name(self) -> &'static str {
        match self {
            Func::Broadcast => "Broadcast",
            Func::Reduce => "Reduce",
            Func::AllGather => "AllGather",
            Func::ReduceScatter => "ReduceScatter",
            Func::AllReduce => "AllReduce",
        }
    }
}

/// An algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Algo {
    /// Double binary tree.
    Tree,
    /// Ring.
    Ring,
    /// CollNet direct (SHARP): not modelled, never chosen.
    CollNetDirect,
    /// CollNet chain (SHARP): not modelled, never chosen.
    CollNetChain,
    /// NVLink SHARP: not modelled, never chosen.
    Nvls,
    /// NVLink SHARP with a tree between nodes: not modelled, never chosen.
    NvlsTree,
    /// PAT (one GPU per node, all-gather and reduce-scatter).
    Pat,
}

impl Algo {
    /// Every algorithm, in NCCL's order.
    pub const ALL: [Algo; 7] = [
        Algo::Tree,
        Algo::Ring,
        Algo::CollNetDirect,
        Algo::CollNetChain,
        Algo::Nvls,
        Algo::NvlsTree,
        Algo::Pat,
    ];

    /// NCCL's name (`ncclAlgoStr`), as `NCCL_ALGO` lists it.
    pub fn name(self) -> &'static str {
        match self {
            Algo::Tree => "Tree",
            Algo::Ring => "Ring",
            Algo::CollNetDirect => "CollnetDirect",
            Algo::CollNetChain => "CollnetChain",
            Algo::Nvls => "NVLS",
            Algo::NvlsTree => "NVLSTree",
            Algo::Pat => "PAT",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// A protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Proto {
    /// LL: 8 bytes of data and a flag per 16-byte line.
    Ll,
    /// LL128: 120 bytes of data and a flag per 128-byte line.
    Ll128,
    /// Simple: bulk copies and fences.
    Simple,
}

impl Proto {
    /// Every protocol, in NCCL's order.
    pub const ALL: [Proto; 3] = [Proto::Ll, Proto::Ll128, Proto::Simple];

    /// NCCL's name (`ncclProtoStr`), as `NCCL_PROTO` lists it.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Ll => "LL",
            Proto::Ll128 => "LL128",
            Proto::Simple => "Simple",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The GPU generation, by compute capability (`minCompCap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gpu {
    /// Volta (7.x).
    Volta,
    /// Ampere (8.x).
    Ampere,
    /// Hopper (9.x).
    Hopper,
    /// Blackwell (10.x).
    Blackwell,
}

impl Gpu {
    /// NCCL's index (`NCCL_*_COMPCAP_IDX`).
    fn index(self) -> usize {
        self as usize
    }
}

/// The host CPU, which sets the network post overhead and the LL caps
/// between nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cpu {
    /// x86, Intel.
    Intel,
    /// x86, AMD.
    Amd,
    /// Anything else (ARM, ...).
    Other,
}

/// Path types between GPUs and NICs (`PATH_*` of NCCL's `graph.h`), best
/// first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PathType {
    /// Same device.
    Loc,
    /// NVLink.
    Nvl,
    /// NVLink through an intermediate GPU.
    Nvb,
    /// Chip-to-chip.
    C2c,
    /// At most one PCIe bridge.
    Pix,
    /// Several PCIe bridges, not through the CPU.
    Pxb,
    /// Through a C2C-attached CPU to a PCIe device.
    P2c,
    /// Through another GPU's NIC (PXN).
    Pxn,
    /// Through a PCIe host bridge (the CPU).
    Phb,
    /// Across CPU sockets.
    Sys,
    /// Through the network.
    Net,
}

/// One algorithm's graph, as NCCL's topology search leaves it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Graph {
    /// Channels.
    pub n_channels: u32,
    /// Per-channel bandwidth inside a node, GB/s.
    pub bw_intra: f64,
    /// Per-channel bandwidth between nodes, GB/s.
    pub bw_inter: f64,
    /// How GPUs connect inside a node (NVLink or PCIe).
    pub type_intra: PathType,
    /// How GPUs reach their NICs.
    pub type_inter: PathType,
    /// Network latency the graph adds, µs (`latencyInter`, 0 unless a
    /// plugin reports one).
    pub latency_inter: f64,
    /// Whether the channels are duplicates (ring broadcast and reduce
    /// then pay one hop's latency, not one per step).
    pub same_channels: bool,
}

/// The communicator NCCL tunes for.
#[derive(Debug, Clone, PartialEq)]
pub struct Comm {
    /// Ranks.
    pub n_ranks: u32,
    /// Nodes (hosts).
    pub n_nodes: u32,
    /// GPU generation (the lowest in the communicator).
    pub gpu: Gpu,
    /// Host CPU.
    pub cpu: Cpu,
    /// The tree graph.
    pub tree: Graph,
    /// The ring graph.
    pub ring: Graph,
    /// The PAT graph (NCCL uses the ring's).
    pub pat: Graph,
    /// `NCCL_NET_OVERHEAD` in µs, when set.
    pub net_overhead_us: Option<f64>,
    /// `maxTreePattern == NCCL_TOPO_PATTERN_TREE` (a plain tree rather
    /// than a split or balanced one): tree bandwidth x 0.85.
    pub plain_tree_pattern: bool,
}

/// Predicted latency (µs) and bus bandwidth (GB/s) of every collective,
/// algorithm and protocol; a bandwidth of 0 means NCCL never picks it.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    latency: [[[f64; 3]; 7]; 5],
    bandwidth: [[[f64; 3]; 7]; 5],
    n_channels: u32,
    n_ranks: u32,
    n_nodes: u32,
    gpu: Gpu,
}

// NCCL's default tuner constants (`ncclTunerConstantsDefaults`).
/// Base latency per algorithm and protocol (LL, LL128, Simple), µs.
const BASE_LAT: [[f64; 3]; 7] = [
    [6.8, 14.0, 8.4],
    [6.6, 14.0, 8.4],
    [0.0; 3],
    [0.0; 3],
    [0.0; 3],
    [0.0; 3],
    [8.0, 8.0, 8.0],
];
/// Hardware latency: NVLink, PCI, network; per algorithm and protocol.
const HW_LAT: [[[f64; 3]; 7]; 3] = [
    [
        [0.6, 1.25, 4.0],
        [0.6, 1.9, 3.4],
        [0.0, 0.0, 3.7],
        [0.0, 0.0, 2.8],
        [0.0, 0.0, 25.0],
        [0.0, 0.0, 25.0],
        [0.0, 0.0, 4.0],
    ],
    [
        [1.0, 1.9, 4.0],
        [1.0, 2.5, 5.7],
        [0.0, 0.0, 3.7],
        [0.0, 0.0, 2.8],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0],
        [0.0, 0.0, 4.0],
    ],
    [
        [5.0, 8.5, 14.0],
        [2.7, 4.0, 14.0],
        [0.0, 0.0, 31.0],
        [0.0, 0.0, 30.0],
        [0.0, 0.0, 18.0],
        [0.0, 0.0, 20.9],
        [0.0, 0.0, 14.0],
    ],
];
const HW_NVLINK: usize = 0;
const HW_PCI: usize = 1;
const HW_NET: usize = 2;
/// LL's bandwidth cap: [GPU on one node | Intel | AMD][1, 2, more nodes].
const LL_MAX_BW: [[f64; 3]; 4] = [
    [39.0, 39.0, 20.4],
    [87.7, 22.5, 19.0],
    [141.0, 45.0, 35.0],
    [282.0, 90.0, 70.0],
];
/// Per-channel caps by GPU generation and 1, 2, more nodes.
const PER_CH_MAX_RING_LL128_BW: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 36.7],
    [40.0, 40.0, 40.0],
];
const PER_CH_MAX_TREE_LL128_BW: [[f64; 3]; 4] = [
    [20.0, 20.0, 20.0],
    [20.0, 20.0, 20.0],
    [36.7, 36.7, 29.0],
    [55.6, 31.67, 20.0],
];
const PER_CH_MAX_TREE_BW: [[f64; 3]; 4] = [
    [26.5, 18.5, 10.0],
    [24.0, 23.6, 17.8],
    [38.7, 41.4, 36.0],
    [70.0, 42.8, 24.0],
];
/// Trees' static correction per protocol, for sizes 64 B x 2^k.
const TREE_CORRECTION: [[f64; 24]; 3] = [
    [
        1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.7, 0.7, 0.7, 0.7, 0.6, 0.5, 0.4, 0.4, 0.5, 0.6, 0.7, 0.8,
        0.9, 1.0, 1.0, 1.0, 1.0, 1.0,
    ],
    [
        1.0, 1.0, 1.0, 1.0, 1.0, 0.9, 0.8, 0.8, 0.8, 0.7, 0.6, 0.6, 0.6, 0.6, 0.6, 0.6, 0.8, 0.9,
        0.9, 0.9, 0.9, 1.0, 1.0, 1.0,
    ],
    [
        0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9, 0.8, 0.7, 0.6, 0.6, 0.5, 0.5, 0.5, 0.5, 0.6, 0.7, 0.8,
        0.7, 0.7, 0.8, 0.9, 0.9, 0.9,
    ],
];

fn log2i(n: u64) -> i32 {
    if n == 0 {
        -1
    } else {
        63 - n.leading_zeros() as i32
    }
}

impl Comm {
    fn graph(&self, a: Algo) -> Option<&Graph> {
        match a {
            Algo::Tree => Some(&self.tree),
            Algo::Ring => Some(&self.ring),
            Algo::Pat => Some(&self.pat),
            _ => None,
        }
    }

    fn net_overhead(&self) -> f64 {
        self.net_overhead_us.unwrap_or(match self.cpu {
            Cpu::Intel => 1.0,
            Cpu::Amd => 2.0,
            Cpu::Other => 1.0,
        })
    }

    /// NCCL's model for this communicator (`ncclTopoTuneModel`), every
    /// protocol enabled that NCCL enables by default.
    pub fn model(&self) -> Model {
        let mut m = Model {
            latency: [[[0.0; 3]; 7]; 5],
            bandwidth: [[[0.0; 3]; 7]; 5],
            n_channels: self.ring.n_channels,
            n_ranks: self.n_ranks,
            n_nodes: self.n_nodes,
            gpu: self.gpu,
        };
        let (n_ranks, n_nodes) = (self.n_ranks.max(1), self.n_nodes.max(1));
        if n_ranks <= 1 {
            return m;
        }
        let cc = self.gpu.index();
        let index2 = if n_nodes <= 2 {
            n_nodes as usize - 1
        } else {
            2
        };
        let index1 = if n_nodes == 1 {
            cc
        } else if self.cpu == Cpu::Amd {
            1
        } else {
            0
        };
        let ll_max_bw = LL_MAX_BW[index1][index2];
        let per_ch_tree = PER_CH_MAX_TREE_BW[cc][index2];
        let per_ch_ring_ll128 = PER_CH_MAX_RING_LL128_BW[cc][index2];
        let per_ch_tree_ll128 = PER_CH_MAX_TREE_LL128_BW[cc][index2];
        for (f, func) in Func::ALL.iter().enumerate() {
            let nsteps = match func {
                Func::AllReduce => 2 * (n_ranks - 1),
                Func::ReduceScatter | Func::AllGather => n_ranks - 1,
                _ => n_ranks,
            } as f64;
            for algo in Algo::ALL {
                let Some(g) = self.graph(algo) else { continue };
                let a = algo.index();
                if matches!(func, Func::Broadcast | Func::Reduce) && algo != Algo::Ring {
                    continue;
                }
                if matches!(func, Func::ReduceScatter | Func::AllGather)
                    && !matches!(algo, Algo::Pat | Algo::Ring)
                {
                    continue;
                }
                if *func == Func::AllReduce && algo == Algo::Pat {
                    continue;
                }
                let intra_hw = if g.type_intra == PathType::Nvl {
                    HW_NVLINK
                } else {
                    HW_PCI
                };
                let hw = if n_nodes == 1 { intra_hw } else { HW_NET };
                for proto in Proto::ALL {
                    let p = proto.index();
                    // PAT: Simple only, one GPU per node.
                    if algo == Algo::Pat && (proto != Proto::Simple || n_nodes != n_ranks) {
                        continue;
                    }
                    let bw = if n_nodes <= 2 { g.bw_intra } else { g.bw_inter };
                    let nch = f64::from(g.n_channels);
                    let mut bus = nch * bw;
                    if algo == Algo::Ring && proto == Proto::Ll {
                        bus = ll_max_bw.min(bus * 0.5);
                    }
                    if algo == Algo::Ring && proto == Proto::Ll128 {
                        bus = (bus * 0.92).min(nch * per_ch_ring_ll128);
                    }
                    if algo == Algo::Tree && *func == Func::AllReduce {
                        bus = (bus * 0.92).min(nch * per_ch_tree);
                    }
                    if algo == Algo::Tree && proto == Proto::Ll {
                        bus = (bus / 3.8).min(ll_max_bw);
                    }
                    if algo == Algo::Tree && proto == Proto::Ll128 {
                        let f = if n_nodes == 1 {
                            7.0 / 9.0
                        } else {
                            120.0 / 128.0
                        };
                        bus = (bus * f).min(nch * per_ch_tree_ll128);
                    }
                    if algo == Algo::Tree && self.plain_tree_pattern {
                        bus *= 0.85;
                    }
                    if algo == Algo::Pat {
                        bus *= 0.75;
                    }
                    // Bus bandwidth to algorithm bandwidth.
                    if !(algo != Algo::Ring
                        && matches!(func, Func::AllGather | Func::ReduceScatter))
                    {
                        let ratio = if algo == Algo::Ring {
                            n_ranks as f64 / nsteps
                        } else {
                            0.5
                        };
                        bus *= ratio;
                    }
                    let sl = self.step_latency_of(*func, algo, proto, g, intra_hw, hw);
                    let mut lat = sl.base;
                    match algo {
                        Algo::Ring => {
                            if matches!(func, Func::Reduce | Func::Broadcast) {
                                lat += if g.same_channels {
                                    sl.inter
                                } else {
                                    nsteps * sl.inter
                                };
                            } else {
                                let inter_steps = if n_nodes == 1 {
                                    0
                                } else if *func == Func::AllReduce {
                                    2 * (n_nodes - 1)
                                } else {
                                    n_nodes - 1
                                } as f64;
                                lat += (nsteps - inter_steps) * sl.intra + inter_steps * sl.inter;
                            }
                        }
                        Algo::Tree if *func == Func::AllReduce => {
                            let local = (n_ranks / n_nodes) as f64 - 1.0;
                            lat += 2.0
                                * (local * sl.intra
                                    + f64::from(log2i(u64::from(n_nodes))) * sl.inter);
                        }
                        Algo::Pat if matches!(func, Func::AllGather | Func::ReduceScatter) => {
                            lat += f64::from(log2i(u64::from(n_nodes))) * (sl.inter / 3.5)
                                + n_ranks as f64 * 2.8;
                        }
                        _ => {}
                    }
                    // LL128 by default only over short enough paths,
                    // between GPUs of one generation from Volta on.
                    let ll128_ok = {
                        let inter_ok = if matches!(self.gpu, Gpu::Hopper | Gpu::Blackwell) {
                            g.type_inter <= PathType::Pxn
                        } else {
                            g.type_inter <= PathType::Pxb
                        };
                        inter_ok && g.type_intra <= PathType::Nvb
                    };
                    if proto == Proto::Ll128 && !ll128_ok {
                        bus = 0.0;
                    }
                    m.latency[f][a][p] = lat;
                    m.bandwidth[f][a][p] = bus;
                }
            }
        }
        m
    }
}

/// What NCCL's model charges one algorithm and protocol for latency
/// (µs): `base` once per collective, `intra` per step between GPUs of
/// one node, `inter` per step between nodes. Ring broadcast and reduce
/// charge every step `inter` (the hardware latency of the path the
/// collective crosses: the network's between nodes, NVLink's or PCI's
/// inside one).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLatency {
    /// Once per collective.
    pub base: f64,
    /// Per step inside a node.
    pub intra: f64,
    /// Per step between nodes.
    pub inter: f64,
}

impl Comm {
    /// The per-step latencies NCCL's model charges `f` with `a` and `p`
    /// on this communicator (what [`Comm::model`]'s latency sums).
    pub fn step_latency(&self, f: Func, a: Algo, p: Proto) -> StepLatency {
        let g = self.graph(a).unwrap_or(&self.ring);
        let intra_hw = if g.type_intra == PathType::Nvl {
            HW_NVLINK
        } else {
            HW_PCI
        };
        let hw = if self.n_nodes.max(1) == 1 {
            intra_hw
        } else {
            HW_NET
        };
        self.step_latency_of(f, a, p, g, intra_hw, hw)
    }

    fn step_latency_of(
        &self,
        func: Func,
        algo: Algo,
        proto: Proto,
        g: &Graph,
        intra_hw: usize,
        hw: usize,
    ) -> StepLatency {
        let (a, p) = (algo.index(), proto.index());
        let n_nodes = self.n_nodes.max(1);
        let ppn = f64::from(self.n_ranks.max(1)) / f64::from(n_nodes);
        let base = BASE_LAT[a][p];
        let mut intra = HW_LAT[intra_hw][a][p];
        // With one rank per node the latencies are fully exposed: the
        // tree's network latency.
        let mut inter = if ppn == 1.0 {
            HW_LAT[HW_NET][Algo::Tree.index()][p]
        } else {
            HW_LAT[HW_NET][a][p]
        };
        inter += g.latency_inter;
        if proto == Proto::Simple {
            inter += g.latency_inter;
        }
        if algo == Algo::Ring {
            if matches!(func, Func::Reduce | Func::Broadcast) {
                let mut hw_lat = HW_LAT[hw][a][p];
                if !g.same_channels && proto == Proto::Simple {
                    hw_lat = HW_LAT[hw][Algo::Tree.index()][p];
                }
                return StepLatency {
                    base,
                    intra: hw_lat,
                    inter: hw_lat,
                };
            }
            let mut net_overhead = 0.0;
            if n_nodes > 1 {
                net_overhead = self.net_overhead();
                if proto == Proto::Simple {
                    net_overhead *= 3.0;
                }
            }
            intra = intra.max(net_overhead);
        }
        StepLatency { base, intra, inter }
    }
}

impl Model {
    /// Predicted latency, µs.
    pub fn latency(&self, f: Func, a: Algo, p: Proto) -> f64 {
        self.latency[f as usize][a.index()][p.index()]
    }

    /// Predicted bandwidth as NCCL's table holds it, GB/s: the bus
    /// bandwidth converted to the algorithm's (x ranks / steps for the
    /// ring, x 0.5 for the tree; unconverted for PAT's all-gather and
    /// reduce-scatter); 0: never chosen.
    pub fn bandwidth(&self, f: Func, a: Algo, p: Proto) -> f64 {
        self.bandwidth[f as usize][a.index()][p.index()]
    }

    /// NCCL's predicted time for one collective of `bytes`
    /// (`ncclTopoGetAlgoTime`, one operation in the pipeline), µs;
    /// `None` when the pair is disabled.
    pub fn time(&self, f: Func, a: Algo, p: Proto, bytes: u64) -> Option<f64> {
        let mut bw = self.bandwidth(f, a, p);
        let mut lat = self.latency(f, a, p);
        if bw == 0.0 {
            return None;
        }
        let log_size = log2i(bytes >> 6);
        if a == Algo::Tree && f == Func::AllReduce && (0..23).contains(&log_size) {
            bw *= TREE_CORRECTION[p.index()][log_size as usize];
        }
        if a == Algo::Ring
            && p == Proto::Simple
            && self.n_nodes > 1
            && f == Func::AllReduce
            && bytes / u64::from(self.n_channels.max(1) * self.n_ranks.max(1)) >= 64
        {
            // The ring's plateau.
            lat *= if self.gpu == Gpu::Volta { 1.9 } else { 1.4 };
        }
        Some(lat + bytes as f64 / (1000.0 * bw))
    }

    /// What NCCL picks for `bytes` among the pairs `enabled` allows: the
    /// fastest, the first in NCCL's order on a tie. `None` when nothing
    /// is enabled.
    pub fn choose(&self, f: Func, bytes: u64, enabled: &Enabled) -> Option<Choice> {
        let mut best: Option<Choice> = None;
        for a in Algo::ALL {
            if !enabled.algo(f, a) {
                continue;
            }
            for p in Proto::ALL {
                if !enabled.proto(f, p) {
                    continue;
                }
                let Some(t) = self.time(f, a, p, bytes) else {
                    continue;
                };
                if best.map_or(true, |b| t < b.time_us) {
                    best = Some(Choice {
                        algo: a,
                        proto: p,
                        time_us: t,
                    });
                }
            }
        }
        best
    }
}

/// An algorithm and protocol NCCL picked, with its predicted time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Choice {
    /// Algorithm.
    pub algo: Algo,
    /// Protocol.
    pub proto: Proto,
    /// Predicted time, µs.
    pub time_us: f64,
}

/// Which algorithms and protocols each function may use (`NCCL_ALGO`,
/// `NCCL_PROTO`; everything by default).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enabled {
    algos: [[bool; 7]; 5],
    protos: [[bool; 3]; 5],
}

impl Default for Enabled {
    fn default() -> Self {
        Enabled {
            algos: [[true; 7]; 5],
            protos: [[true; 3]; 5],
        }
    }
}

/// A malformed `NCCL_ALGO` or `NCCL_PROTO` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListError {
    /// The variable (`NCCL_ALGO`).
    pub var: &'static str,
    /// The value given.
    pub value: String,
    /// What was wrong.
    pub why: String,
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}={:?}: {}", self.var, self.value, self.why)
    }
}

impl std::error::Error for ListError {}

impl Enabled {
    /// Whether `f` may use algorithm `a`.
    pub fn algo(&self, f: Func, a: Algo) -> bool {
        self.algos[f as usize][a.index()]
    }

    /// Forbid algorithm `a` to every function.
    pub fn disable_algo(&mut self, a: Algo) {
        for f in &mut self.algos {
            f[a.index()] = false;
        }
    }

    /// Whether `f` may use protocol `p`.
    pub fn proto(&self, f: Func, p: Proto) -> bool {
        self.protos[f as usize][p.index()]
    }

    /// Apply `NCCL_ALGO` (`algo`) and `NCCL_PROTO` (`proto`) as NCCL
    /// parses them: `;`-separated entries, each an optional
    /// `Function:` prefix (only the first entry may go without) and a
    /// `,`-separated list, `^` in front meaning "all but". Names are
    /// case-insensitive.
    pub fn from_env(algo: Option<&str>, proto: Option<&str>) -> Result<Enabled, ListError> {
        let mut e = Enabled::default();
        if let Some(v) = algo {
            let names: Vec<&str> = Algo::ALL.iter().map(|a| a.name()).collect();
            parse_list("NCCL_ALGO", v, &names, |f, i, on| e.algos[f][i] = on)?;
        }
        if let Some(v) = proto {
            let names: Vec<&str> = Proto::ALL.iter().map(|p| p.name()).collect();
            parse_list("NCCL_PROTO", v, &names, |f, i, on| e.protos[f][i] = on)?;
        }
        Ok(e)
    }
}

/// NCCL's `parseList`: for each entry, every element of the matching
/// functions is first set to the opposite of the entry's sense, then the
/// listed ones to it.
fn parse_list(
    var: &'static str,
    value: &str,
    elems: &[&str],
    mut set: impl FnMut(usize, usize, bool),
) -> Result<(), ListError> {
    let err = |why: String| ListError {
        var,
        value: value.to_string(),
        why,
    };
    for (k, entry) in value.split(';').filter(|s| !s.is_empty()).enumerate() {
        let (prefix, list) = match entry.split_once(':') {
            Some((p, l)) => (Some(p), l),
            None if k == 0 => (None, entry),
            None => {
                return Err(err(format!(
                    "entry {entry:?} has no function prefix: only the first entry may go without"
                )))
            }
        };
        let (on, list) = match list.strip_prefix('^') {
            Some(rest) => (false, rest),
            None => (true, list),
        };
        let funcs: Vec<usize> = match prefix {
            None => (0..Func::ALL.len()).collect(),
            Some(p) => {
                let f = Func::ALL
                    .iter()
                    .position(|f| f.name().eq_ignore_ascii_case(p))
                    .ok_or_else(|| {
                        err(format!(
                            "unknown function {p:?}: expected one of Broadcast, Reduce, AllGather, ReduceScatter, AllReduce"
                        ))
                    })?;
                vec![f]
            }
        };
        let mut picked = Vec::new();
        for name in list.split(',').filter(|s| !s.is_empty()) {
            let i = elems
                .iter()
                .position(|e| e.eq_ignore_ascii_case(name))
                .ok_or_else(|| {
                    err(format!(
                        "unknown element {name:?}: expected one of {}",
                        elems.join(", ")
                    ))
                })?;
            picked.push(i);
        }
        for &f in &funcs {
            for i in 0..elems.len() {
                set(f, i, !on);
            }
            for &i in &picked {
                set(f, i, on);
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2 nodes x 8 H100 over NVLink, 4 NICs, Intel hosts: the ring and
    /// tree graphs NCCL's search typically finds there (16 channels; per
    /// channel 20 GB/s inside a node, 12.5 GB/s between nodes).
    fn h100_2x8() -> Comm {
        let g = Graph {
            n_channels: 16,
            bw_intra: 20.0,
            bw_inter: 12.5,
            type_intra: PathType::Nvl,
            type_inter: PathType::Pxb,
            latency_inter: 0.0,
            same_channels: false,
        };
        Comm {
            n_ranks: 16,
            n_nodes: 2,
            gpu: Gpu::Hopper,
            cpu: Cpu::Intel,
            tree: g,
            ring: g,
            pat: g,
            net_overhead_us: None,
            plain_tree_pattern: false,
        }
    }

    /// The all-reduce entries worked out by hand from tuning.cc for
    /// h100_2x8 (30 ring steps, 2 of them over the network; 8 ranks per
    /// node, so the ring's own network latencies):
    /// * ring LL: 6.6 + 28 x max(0.6 NVLink, 1.0 Intel post overhead) +
    ///   2 x 2.7 = 40.0 us; min(39, the LL cap of 2 Intel nodes,
    ///   16 x 20 x 0.5) x 16/30 GB/s;
    /// * ring Simple: 8.4 + 28 x max(3.4, 3 x 1.0) + 2 x 14.0 = 131.6 us;
    ///   16 x 20 x 16/30 GB/s.
    #[test]
    fn ring_allreduce_latency_and_bandwidth_follow_tuning_cc() {
        let m = h100_2x8().model();
        let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
        let f = Func::AllReduce;
        assert!(close(
            m.latency(f, Algo::Ring, Proto::Ll),
            6.6 + 28.0 * 1.0 + 2.0 * 2.7
        ));
        assert!(close(
            m.bandwidth(f, Algo::Ring, Proto::Ll),
            39.0 * 16.0 / 30.0
        ));
        assert!(close(
            m.latency(f, Algo::Ring, Proto::Simple),
            8.4 + 28.0 * 3.4 + 2.0 * 14.0
        ));
        assert!(close(
            m.bandwidth(f, Algo::Ring, Proto::Simple),
            320.0 * 16.0 / 30.0
        ));
        // LL128: 14.0 + 28 x max(1.9, 1.0) + 2 x 4.0; min(320 x 0.92,
        // 16 x 36.7) x 16/30.
        assert!(close(
            m.latency(f, Algo::Ring, Proto::Ll128),
            14.0 + 28.0 * 1.9 + 2.0 * 4.0
        ));
        assert!(close(
            m.bandwidth(f, Algo::Ring, Proto::Ll128),
            (320.0f64 * 0.92).min(16.0 * 36.7) * 16.0 / 30.0
        ));
        // Tree Simple: 8.4 + 2 x (7 x 4.0 + log2(2) x 14.0); bandwidth
        // min(320 x 0.92, 16 x 41.4) x 0.5.
        assert!(close(
            m.latency(f, Algo::Tree, Proto::Simple),
            8.4 + 2.0 * (7.0 * 4.0 + 14.0)
        ));
        assert!(close(
            m.bandwidth(f, Algo::Tree, Proto::Simple),
            (320.0f64 * 0.92).min(16.0 * 41.4) * 0.5
        ));
        // Not modelled: never chosen.
        assert_eq!(m.bandwidth(f, Algo::Nvls, Proto::Simple), 0.0);
        assert_eq!(m.bandwidth(f, Algo::Pat, Proto::Simple), 0.0);
    }

    /// The time formula: latency plus bytes over bandwidth, the ring's
    /// plateau for Simple between nodes, the tree's correction.
    #[test]
    fn time_adds_the_plateau_and_the_tree_correction() {
        let m = h100_2x8().model();
        let f = Func::AllReduce;
        let bytes = 1u64 << 20;
        let ring = m.time(f, Algo::Ring, Proto::Simple, bytes).unwrap();
        let want = m.latency(f, Algo::Ring, Proto::Simple) * 1.4
            + bytes as f64 / (1000.0 * m.bandwidth(f, Algo::Ring, Proto::Simple));
        assert!((ring - want).abs() < 1e-9);
        // 1 MiB = 64 B x 2^14: Simple's factor 0.5.
        let tree = m.time(f, Algo::Tree, Proto::Simple, bytes).unwrap();
        let want = m.latency(f, Algo::Tree, Proto::Simple)
            + bytes as f64 / (1000.0 * m.bandwidth(f, Algo::Tree, Proto::Simple) * 0.5);
        assert!((tree - want).abs() < 1e-9);
    }

    /// The choice NCCL is known for: LL at small sizes, Simple at large
    /// ones; on many nodes the tree wins small all-reduces and the ring
    /// large ones; NCCL_ALGO and NCCL_PROTO restrict it.
    #[test]
    fn the_choice_moves_from_ll_to_simple_and_follows_the_env() {
        let m = h100_2x8().model();
        let all = Enabled::default();
        let small = m.choose(Func::AllReduce, 1024, &all).unwrap();
        assert_eq!(small.proto, Proto::Ll);
        let large = m.choose(Func::AllReduce, 1 << 30, &all).unwrap();
        assert_eq!(large.proto, Proto::Simple);
        let mut many = h100_2x8();
        many.n_nodes = 64;
        many.n_ranks = 512;
        let m = many.model();
        assert_eq!(
            m.choose(Func::AllReduce, 64 << 10, &all).unwrap().algo,
            Algo::Tree
        );
        let ring_only = Enabled::from_env(Some("Ring"), None).unwrap();
        assert_eq!(
            m.choose(Func::AllReduce, 64 << 10, &ring_only)
                .unwrap()
                .algo,
            Algo::Ring
        );
        let no_ll = Enabled::from_env(None, Some("^LL")).unwrap();
        let c = m.choose(Func::AllReduce, 1024, &no_ll).unwrap();
        assert_ne!(c.proto, Proto::Ll);
        // All-gather has no tree.
        let c = m.choose(Func::AllGather, 1 << 20, &all).unwrap();
        assert_eq!(c.algo, Algo::Ring);
    }

    /// NCCL_ALGO / NCCL_PROTO parse as NCCL's parseList parses them.
    #[test]
    fn env_lists_parse_as_nccl_parses_them() {
        let e = Enabled::from_env(
            Some("ring,tree;allreduce:tree"),
            Some("^LL128;AllReduce:LL128"),
        )
        .unwrap();
        assert!(e.algo(Func::Broadcast, Algo::Ring) && e.algo(Func::Broadcast, Algo::Tree));
        assert!(!e.algo(Func::Broadcast, Algo::Pat));
        assert!(e.algo(Func::AllReduce, Algo::Tree) && !e.algo(Func::AllReduce, Algo::Ring));
        assert!(e.proto(Func::Reduce, Proto::Ll) && !e.proto(Func::Reduce, Proto::Ll128));
        assert!(e.proto(Func::AllReduce, Proto::Ll128) && !e.proto(Func::AllReduce, Proto::Simple));
        let bad = Enabled::from_env(Some("Ring;Tree"), None).unwrap_err();
        assert!(bad.to_string().contains("no function prefix"), "{bad}");
        let bad = Enabled::from_env(None, Some("LL,Fast")).unwrap_err();
        assert!(
            bad.to_string().contains("unknown element \"Fast\""),
            "{bad}"
        );
        let bad = Enabled::from_env(Some("Gather:Ring"), None).unwrap_err();
        assert!(bad.to_string().contains("unknown function"), "{bad}");
    }
}
