//! The `[[workload]]` tables of a scenario file.
//!
//! One table per workload; `kind` selects the generator and decides which
//! other keys are allowed:
//!
//! | kind | keys (besides the common ones) |
//! |---|---|
//! | `incast` | `receiver` (required), `senders` (default: every other host) |
//! | `permutation` | `hosts` (default all), `seed` |
//! | `all-to-all` | `hosts` |
//! | `ring-allreduce` | `hosts` (ring order) |
//! | `nccl-tests` | `collective` (required), `hosts` (rank order; rank 0 is the root), `min_bytes` (required), `max_bytes`, `step_factor`; on GPU servers `servers`, `gpus`, `channels` instead of `hosts`; `algo`, `proto` (`NCCL_ALGO`, `NCCL_PROTO`) |
//! | `poisson` | `hosts`, `cdf` (built-in name) or `cdf_file`, `load` (0-1], `window` (required), `seed` |
//! | `perftest` | `src`, `dst` (required); `test` and with it `all`, `iters`, `duration`, `tx_depth`, `bidirectional`, `inline`, `cq_mod` |
//! | `hpcc-flows` | `path` (required), `shift` |
//! | `htsim` | `path` (required) |
//!
//! Common keys: `name` (reported with the workload's step time; default
//! its kind and index, `ring-allreduce-0`; names must differ), `op`
//! (`write`, `send`, `read`; default `write`), `size`
//! (bytes per pair, required for generated kinds except `poisson`),
//! `message_size`, `qps_per_pair` (default `nic.qps_per_pair`), `start`
//! (default 0), `priority` (default `nic.priority`), `cc`. `hpcc-flows` and
//! `htsim` take their sizes, times and priorities from the file and accept
//! only `op` and `cc` of the common keys.
//!
//! `cc` (any kind) gives the workload's flows congestion control of their
//! own: a table shaped like `[nic.cc]` (`algorithm`, `preset`, `dcqcn`;
//! keys left out take `[nic.cc]`'s defaults, not the hosts'), in force at
//! both ends of the flows' queue pairs instead of the hosts' `nic.cc`.
//! Such flows never share a queue pair with flows of other settings.
//!
//! Hosts are named (`"h3"`) or given by host index (`3`). A host set is
//! `"all"`, a count `N` (the first N hosts, skipping an incast's
//! receiver) or a list. Each workload draws from its own random stream:
//! ChaCha8 seeded with `seed` (default: the scenario's) on stream
//! `index + 1`, so adding a workload does not change the others.

use std::fmt;
use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use roce::time::{Duration, Instant, Size};
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

use crate::config::SimConfig;
use crate::input::{read_file, FileError};
use crate::nccl_model::Enabled;
use crate::topology::{GpuServers, NodeId, NodeKind, Topology};
use crate::workload::collectives::Ranks;
use crate::workload::generate::{self, FlowBuilder, FlowTemplate};
use crate::workload::perftest::{self as pt, PerftestSpec, PerftestTest};
use crate::workload::{self as wl, FlowOp, FlowSizeCdf, FlowSpec, GroupSpec};

/// One `[[workload]]` table.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadDoc {
    /// Which generator or import.
    pub kind: WorkloadKind,
    /// Name in results (default: kind and index, `ring-allreduce-0`).
    #[serde(default)]
    pub name: Option<String>,
    /// Operation.
    #[serde(default)]
    pub op: Option<OpDoc>,
    /// Bytes per pair.
    #[serde(default)]
    pub size: Option<Size>,
    /// Message size.
    #[serde(default)]
    pub message_size: Option<Size>,
    /// QPs per pair.
    #[serde(default)]
    pub qps_per_pair: Option<u32>,
    /// Post time.
    #[serde(default)]
    pub start: Option<Duration>,
    /// Priority 0-7.
    #[serde(default)]
    pub priority: Option<u8>,
    /// Hosts taking part.
    #[serde(default)]
    pub hosts: Option<HostSet>,
    /// Incast senders.
    #[serde(default)]
    pub senders: Option<HostSet>,
    /// Incast receiver.
    #[serde(default)]
    pub receiver: Option<HostRef>,
    /// Perftest requester.
    #[serde(default)]
    pub src: Option<HostRef>,
    /// Perftest responder.
    #[serde(default)]
    pub dst: Option<HostRef>,
    /// Built-in flow-size CDF name.
    #[serde(default)]
    pub cdf: Option<String>,
    /// Flow-size CDF file (relative to the scenario file).
    #[serde(default)]
    pub cdf_file: Option<String>,
    /// Offered load, fraction of each host's link rate (payload bytes).
    #[serde(default)]
    pub load: Option<f64>,
    /// Arrival window.
    #[serde(default)]
    pub window: Option<Duration>,
    /// Seed override.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Imported file (relative to the scenario file).
    #[serde(default)]
    pub path: Option<String>,
    /// Time subtracted from imported start times.
    #[serde(default)]
    pub shift: Option<Duration>,
    /// Perftest: which program (`write_bw`, `read_bw`, `send_bw`,
    /// `write_lat`, `read_lat`, `send_lat`); absent: one flow of `size`.
    #[serde(default)]
    pub test: Option<PerftestTest>,
    /// Perftest: every size from 2 bytes to 8 MiB (`-a`).
    #[serde(default)]
    pub all: Option<bool>,
    /// Perftest: iterations per size (`-n`).
    #[serde(default)]
    pub iters: Option<u64>,
    /// Perftest: run each size this long (`-D`).
    #[serde(default)]
    pub duration: Option<Duration>,
    /// Perftest: outstanding work requests per QP (`-t`).
    #[serde(default)]
    pub tx_depth: Option<u32>,
    /// Perftest: both directions (`-b`).
    #[serde(default)]
    pub bidirectional: Option<bool>,
    /// Perftest: largest inline payload (`-I`).
    #[serde(default)]
    pub inline: Option<Size>,
    /// Perftest: a completion every this many work requests (`-Q`).
    #[serde(default)]
    pub cq_mod: Option<u32>,
    /// nccl-tests: the collective (`all_reduce`, `all_gather`,
    /// `reduce_scatter`, `alltoall`, `broadcast`, `reduce`, `sendrecv`,
    /// `gather`, `scatter`).
    #[serde(default)]
    pub collective: Option<crate::workload::nccl_tests::Collective>,
    /// nccl-tests: the smallest size (`-b`).
    #[serde(default)]
    pub min_bytes: Option<Size>,
    /// nccl-tests: the largest size (`-e`; default `min_bytes`).
    #[serde(default)]
    pub max_bytes: Option<Size>,
    /// nccl-tests: the factor between sizes (`-f`; default 2).
    #[serde(default)]
    pub step_factor: Option<u64>,
    /// nccl-tests: the algorithms NCCL may use, as `NCCL_ALGO` gives
    /// them (`"ring"`, `"tree"`, `"^tree"`, ...; default: its model's
    /// choice among all).
    #[serde(default)]
    pub algo: Option<String>,
    /// nccl-tests: the protocols, as `NCCL_PROTO` gives them (`"LL"`,
    /// `"LL128"`, `"Simple"`, `"^LL128"`, ...).
    #[serde(default)]
    pub proto: Option<String>,
    /// nccl-tests on GPU servers: which servers (`"all"`, the first N,
    /// or a list of server indices).
    #[serde(default)]
    pub servers: Option<HostSet>,
    /// nccl-tests on GPU servers: GPUs per server taking part (`-g`;
    /// default all).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// nccl-tests on GPU servers: rings (trees) run at once (default: two
    /// per NIC of a server, as NCCL duplicates them on NVLink systems).
    #[serde(default)]
    pub channels: Option<u32>,
    /// Congestion control of this workload's flows (a whole `[nic.cc]`
    /// table: keys left out take `[nic.cc]`'s defaults), in place of
    /// their hosts'; any kind.
    #[serde(default)]
    pub cc: Option<crate::config::CcConfig>,
    /// training: how its servers are picked when `servers` is a count
    /// (`packed`, `spread`, `random`; default packed), among the servers
    /// no earlier training job holds.
    #[serde(default)]
    pub placement: Option<Placement>,
    /// training: steps run back to back (default 1).
    #[serde(default)]
    pub steps: Option<u32>,
    /// training: transformer layers (default 1).
    #[serde(default)]
    pub layers: Option<u32>,
    /// training: tensor-parallel degree, GPUs of a server per group
    /// (default 1).
    #[serde(default)]
    pub tp: Option<u32>,
    /// training: forward compute of a step.
    #[serde(default)]
    pub forward: Option<Duration>,
    /// training: backward compute of a step.
    #[serde(default)]
    pub backward: Option<Duration>,
    /// training: optimizer compute of a step (default 0).
    #[serde(default)]
    pub optimizer: Option<Duration>,
    /// training: floating-point operations per GPU in a step's forward
    /// and backward (instead of `forward` and `backward`).
    #[serde(default)]
    pub step_flops: Option<f64>,
    /// training: what a GPU sustains, FLOP/s (with `step_flops`).
    #[serde(default)]
    pub gpu_flops: Option<f64>,
    /// training: gradient bytes per rank the data-parallel all-reduce
    /// reduces each step (default 0: none).
    #[serde(default)]
    pub grad_bytes: Option<Size>,
    /// training: gradient buckets (default 1).
    #[serde(default)]
    pub buckets: Option<u32>,
    /// training: bytes of each tensor-parallel all-reduce.
    #[serde(default)]
    pub tp_bytes: Option<Size>,
    /// training: bytes each rank sends in a MoE layer's all-to-all
    /// (default 0: no MoE).
    #[serde(default)]
    pub moe_bytes: Option<Size>,
    /// training: pipeline-parallel stages (default 1: none).
    #[serde(default)]
    pub pp: Option<u32>,
    /// training: microbatches per step (default 1).
    #[serde(default)]
    pub microbatches: Option<u32>,
    /// training: bytes a rank sends the next pipeline stage per
    /// microbatch (and receives back as gradients).
    #[serde(default)]
    pub pp_bytes: Option<Size>,
}

/// How a training job's servers are picked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// The first free servers, in order (neighbours share leaves).
    Packed,
    /// Free servers evenly spaced over the free ones.
    Spread,
    /// Free servers drawn at random (the workload's `seed`).
    Random,
}

/// Workload kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// N:1 incast.
    Incast,
    /// Random derangement.
    Permutation,
    /// Every ordered pair.
    AllToAll,
    /// One ring all-reduce.
    RingAllreduce,
    /// nccl-tests' sweep of one collective over sizes.
    NcclTests,
    /// Poisson arrivals with a flow-size CDF.
    Poisson,
    /// One flow.
    Perftest,
    /// A training job's steps on GPU servers.
    Training,
    /// HPCC ns-3 flow file.
    HpccFlows,
    /// htsim connection matrix.
    Htsim,
}

/// Operation as written in files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpDoc {
    /// RDMA WRITE.
    Write,
    /// SEND.
    Send,
    /// RDMA READ.
    Read,
}

impl From<OpDoc> for FlowOp {
    fn from(o: OpDoc) -> FlowOp {
        match o {
            OpDoc::Write => FlowOp::Write,
            OpDoc::Send => FlowOp::Send,
            OpDoc::Read => FlowOp::Read,
        }
    }
}

/// A host: by name or host index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostRef {
    /// Host index (position among hosts).
    Index(u32),
    /// Node name.
    Name(String),
}

/// A set of hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSet {
    /// Every host.
    All,
    /// The first N hosts (skipping an incast's receiver).
    Count(u32),
    /// These hosts, in this order.
    List(Vec<HostRef>),
}

impl<'de> Deserialize<'de> for HostRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HostRef, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = HostRef;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a host name such as \"h3\" or a host index such as 3")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<HostRef, E> {
                Ok(HostRef::Name(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<HostRef, E> {
                u32::try_from(v)
                    .map(HostRef::Index)
                    .map_err(|_| E::custom(format!("{v}: expected a host index 0 or above")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HostRef, E> {
                u32::try_from(v)
                    .map(HostRef::Index)
                    .map_err(|_| E::custom(format!("{v}: expected a smaller host index")))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for HostSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<HostSet, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = HostSet;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("\"all\", a host count, or a list of host names or indices")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<HostSet, E> {
                if v == "all" {
                    Ok(HostSet::All)
                } else {
                    Err(E::custom(format!(
                        "{v:?}: expected \"all\", a host count, or a list of hosts"
                    )))
                }
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<HostSet, E> {
                u32::try_from(v)
                    .map(HostSet::Count)
                    .map_err(|_| E::custom(format!("{v}: expected a host count 0 or above")))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<HostSet, E> {
                u32::try_from(v)
                    .map(HostSet::Count)
                    .map_err(|_| E::custom(format!("{v}: expected a smaller host count")))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<HostSet, A::Error> {
                let mut v = Vec::new();
                while let Some(h) = seq.next_element::<HostRef>()? {
                    v.push(h);
                }
                Ok(HostSet::List(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// Keys each kind accepts besides `kind`.
fn allowed(kind: WorkloadKind) -> &'static [&'static str] {
    match kind {
        WorkloadKind::Incast => &[
            "op",
            "size",
            "message_size",
            "qps_per_pair",
            "start",
            "priority",
            "receiver",
            "senders",
        ],
        WorkloadKind::Permutation => &[
            "op",
            "size",
            "message_size",
            "qps_per_pair",
            "start",
            "priority",
            "hosts",
            "seed",
        ],
        WorkloadKind::AllToAll | WorkloadKind::RingAllreduce => &[
            "op",
            "size",
            "message_size",
            "qps_per_pair",
            "start",
            "priority",
            "hosts",
        ],
        WorkloadKind::Poisson => &[
            "op",
            "message_size",
            "qps_per_pair",
            "start",
            "priority",
            "hosts",
            "cdf",
            "cdf_file",
            "load",
            "window",
            "seed",
        ],
        WorkloadKind::Perftest => &[
            "op",
            "size",
            "message_size",
            "qps_per_pair",
            "start",
            "priority",
            "src",
            "dst",
            "test",
            "all",
            "iters",
            "duration",
            "tx_depth",
            "bidirectional",
            "inline",
            "cq_mod",
        ],
        WorkloadKind::NcclTests => &[
            "op",
            "qps_per_pair",
            "start",
            "priority",
            "hosts",
            "collective",
            "min_bytes",
            "max_bytes",
            "step_factor",
            "servers",
            "gpus",
            "channels",
            "algo",
            "proto",
        ],
        WorkloadKind::Training => &[
            "qps_per_pair",
            "start",
            "priority",
            "servers",
            "gpus",
            "channels",
            "algo",
            "proto",
            "seed",
            "placement",
            "steps",
            "layers",
            "tp",
            "forward",
            "backward",
            "optimizer",
            "step_flops",
            "gpu_flops",
            "grad_bytes",
            "buckets",
            "tp_bytes",
            "moe_bytes",
            "pp",
            "microbatches",
            "pp_bytes",
        ],
        WorkloadKind::HpccFlows => &["op", "path", "shift"],
        WorkloadKind::Htsim => &["op", "path"],
    }
}

impl WorkloadDoc {
    /// The keys given in this table (besides `kind`).
    fn given(&self) -> Vec<&'static str> {
        let mut g = Vec::new();
        let mut add = |k: &'static str, present: bool| {
            if present {
                g.push(k);
            }
        };
        add("op", self.op.is_some());
        add("size", self.size.is_some());
        add("message_size", self.message_size.is_some());
        add("qps_per_pair", self.qps_per_pair.is_some());
        add("start", self.start.is_some());
        add("priority", self.priority.is_some());
        add("hosts", self.hosts.is_some());
        add("senders", self.senders.is_some());
        add("receiver", self.receiver.is_some());
        add("src", self.src.is_some());
        add("dst", self.dst.is_some());
        add("cdf", self.cdf.is_some());
        add("cdf_file", self.cdf_file.is_some());
        add("load", self.load.is_some());
        add("window", self.window.is_some());
        add("seed", self.seed.is_some());
        add("path", self.path.is_some());
        add("shift", self.shift.is_some());
        add("test", self.test.is_some());
        add("all", self.all.is_some());
        add("iters", self.iters.is_some());
        add("duration", self.duration.is_some());
        add("tx_depth", self.tx_depth.is_some());
        add("bidirectional", self.bidirectional.is_some());
        add("inline", self.inline.is_some());
        add("cq_mod", self.cq_mod.is_some());
        add("collective", self.collective.is_some());
        add("min_bytes", self.min_bytes.is_some());
        add("max_bytes", self.max_bytes.is_some());
        add("step_factor", self.step_factor.is_some());
        add("servers", self.servers.is_some());
        add("gpus", self.gpus.is_some());
        add("channels", self.channels.is_some());
        add("algo", self.algo.is_some());
        add("proto", self.proto.is_some());
        add("placement", self.placement.is_some());
        add("steps", self.steps.is_some());
        add("layers", self.layers.is_some());
        add("tp", self.tp.is_some());
        add("forward", self.forward.is_some());
        add("backward", self.backward.is_some());
        add("optimizer", self.optimizer.is_some());
        add("step_flops", self.step_flops.is_some());
        add("gpu_flops", self.gpu_flops.is_some());
        add("grad_bytes", self.grad_bytes.is_some());
        add("buckets", self.buckets.is_some());
        add("tp_bytes", self.tp_bytes.is_some());
        add("moe_bytes", self.moe_bytes.is_some());
        add("pp", self.pp.is_some());
        add("microbatches", self.microbatches.is_some());
        add("pp_bytes", self.pp_bytes.is_some());
        g
    }
}

/// What [`build`] makes: the flows, the groups of the dependent
/// workloads, and the workload names (flows' `workload` index them).
pub(super) type Built = (Vec<FlowSpec>, Vec<GroupSpec>, Vec<String>);

/// Build the flows of every workload of a document (its `workloads`, its
/// root `seed`) on `topo`, with the groups of the dependent workloads
/// (ring all-reduce, htsim imports with triggers).
pub(super) fn build(
    file: &Path,
    topo: &Topology,
    workloads: &[WorkloadDoc],
    seed: u64,
    config: &SimConfig,
) -> Result<Built, FileError> {
    let hosts = topo.hosts();
    let mut b = FlowBuilder::new();
    let mut names: Vec<String> = Vec::with_capacity(workloads.len());
    // GPU servers the training jobs so far hold.
    let mut held: Vec<u32> = Vec::new();
    if workloads.is_empty() {
        return Err(FileError::new(
            file,
            "workload",
            "no workloads: expected at least one [[workload]] table",
        ));
    }
    for (i, w) in workloads.iter().enumerate() {
        let key = format!("workload[{i}]");
        let first_flow = b.len();
        let err = |k: &str, msg: String| FileError::new(file, &format!("{key}.{k}"), msg);
        let ok = allowed(w.kind);
        if let Some(k) = w.given().into_iter().find(|k| !ok.contains(k)) {
            return Err(err(
                k,
                format!(
                    "not used by kind {:?}: expected one of name, {}",
                    kind_name(w.kind),
                    ok.join(", ")
                ),
            ));
        }
        let name = match &w.name {
            Some(n) if n.trim().is_empty() => {
                return Err(err(
                    "name",
                    "empty: expected a name such as \"grads\"".into(),
                ))
            }
            Some(n) => n.clone(),
            None => format!("{}-{i}", kind_name(w.kind)),
        };
        if let Some(j) = names.iter().position(|x| *x == name) {
            return Err(err(
                "name",
                format!("{name:?} is also the name of workload[{j}]: expected distinct names"),
            ));
        }
        names.push(name.clone());
        let host = |k: &str, r: &HostRef| -> Result<NodeId, FileError> {
            match r {
                HostRef::Index(i) => hosts.get(*i as usize).copied().ok_or_else(|| {
                    err(
                        k,
                        format!(
                            "host index {i}: the topology has hosts 0-{}",
                            hosts.len().saturating_sub(1)
                        ),
                    )
                }),
                HostRef::Name(n) => match topo.find(n) {
                    Some(id) if topo.node(id).kind == NodeKind::Host => Ok(id),
                    Some(_) => Err(err(k, format!("{n:?} is a switch: expected a host"))),
                    None => Err(err(
                        k,
                        format!("{n:?}: expected the name of a host in the topology"),
                    )),
                },
            }
        };
        let set = |k: &str,
                   s: &Option<HostSet>,
                   skip: Option<NodeId>|
         -> Result<Vec<NodeId>, FileError> {
            let pool: Vec<NodeId> = hosts.iter().copied().filter(|&h| Some(h) != skip).collect();
            let v = match s {
                None | Some(HostSet::All) => pool,
                Some(HostSet::Count(n)) => {
                    if *n as usize > pool.len() {
                        return Err(err(
                            k,
                            format!("{n} hosts: only {} are available", pool.len()),
                        ));
                    }
                    pool[..*n as usize].to_vec()
                }
                Some(HostSet::List(l)) => {
                    let mut v = Vec::with_capacity(l.len());
                    for (j, r) in l.iter().enumerate() {
                        let h = host(&format!("{k}[{j}]"), r)?;
                        if v.contains(&h) {
                            return Err(err(
                                &format!("{k}[{j}]"),
                                format!(
                                    "{:?} is listed twice: expected distinct hosts",
                                    topo.node(h).name
                                ),
                            ));
                        }
                        v.push(h);
                    }
                    v
                }
            };
            Ok(v)
        };
        let priority = w.priority.unwrap_or(config.nic.priority);
        if priority > 7 {
            return Err(err("priority", format!("{priority}: expected 0-7")));
        }
        let qps = w.qps_per_pair.unwrap_or(config.nic.qps_per_pair);
        if qps == 0 {
            return Err(err("qps_per_pair", "0: expected at least 1".into()));
        }
        let needs_size = !matches!(
            w.kind,
            WorkloadKind::Poisson
                | WorkloadKind::HpccFlows
                | WorkloadKind::Htsim
                | WorkloadKind::NcclTests
                | WorkloadKind::Training
        ) && w.test.is_none();
        let size = match w.size {
            Some(s) if s.bytes() == 0 => {
                return Err(err("size", "0: expected a positive size".into()))
            }
            Some(s) => s.bytes(),
            None if needs_size => {
                return Err(err(
                    "size",
                    "missing: expected the bytes per pair, e.g. \"1MB\"".into(),
                ))
            }
            None => 0,
        };
        if let Some(m) = w.message_size {
            if m.bytes() == 0 {
                return Err(err("message_size", "0: expected a positive size".into()));
            }
        }
        let t = FlowTemplate {
            op: w.op.map_or(FlowOp::Write, FlowOp::from),
            size,
            message_size: w.message_size.map(|m| m.bytes()),
            qps_per_pair: qps,
            start: Instant::ZERO + w.start.unwrap_or(Duration::ZERO),
            priority,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(w.seed.unwrap_or(seed));
        rng.set_stream(i as u64 + 1);
        let dir = file.parent().unwrap_or(Path::new(""));
        let two = |k: &str, v: &[NodeId]| {
            if v.len() < 2 {
                Err(err(k, format!("{} hosts: expected at least 2", v.len())))
            } else {
                Ok(())
            }
        };
        match w.kind {
            WorkloadKind::Incast => {
                let r = w.receiver.as_ref().ok_or_else(|| {
                    err("receiver", "missing: expected the receiving host".into())
                })?;
                let r = host("receiver", r)?;
                let senders = set("senders", &w.senders, Some(r))?;
                if let Some(j) = senders.iter().position(|&s| s == r) {
                    return Err(err(
                        &format!("senders[{j}]"),
                        "the receiver is also a sender: expected other hosts".into(),
                    ));
                }
                if senders.is_empty() {
                    return Err(err("senders", "no senders: expected at least one".into()));
                }
                generate::incast(&mut b, &senders, r, &t);
            }
            WorkloadKind::Permutation => {
                let h = set("hosts", &w.hosts, None)?;
                two("hosts", &h)?;
                generate::permutation(&mut b, &h, &t, &mut rng);
            }
            WorkloadKind::AllToAll => {
                let h = set("hosts", &w.hosts, None)?;
                two("hosts", &h)?;
                generate::all_to_all(&mut b, &h, &t);
            }
            WorkloadKind::RingAllreduce => {
                let h = set("hosts", &w.hosts, None)?;
                two("hosts", &h)?;
                if size < h.len() as u64 {
                    // A chunk of 0 bytes has no flow, and the steps after
                    // it would not wait for anything.
                    return Err(err(
                        "size",
                        format!(
                            "{size} bytes: expected at least {} (one per host: each of the ring's chunks must have a byte to send)",
                            h.len()
                        ),
                    ));
                }
                let g = generate::ring_allreduce(&mut b, &h, &t);
                if let Some(spec) = b.group_mut(g) {
                    spec.name = name;
                }
            }
            WorkloadKind::NcclTests => {
                let ranks = match topo.gpu {
                    None => {
                        if let Some(k) = [
                            ("servers", w.servers.is_some()),
                            ("gpus", w.gpus.is_some()),
                            ("channels", w.channels.is_some()),
                        ]
                        .iter()
                        .find_map(|&(k, given)| given.then_some(k))
                        {
                            return Err(err(
                                k,
                                "the topology has no GPU servers: expected a topology with a [gpu] table, or hosts as ranks".into(),
                            ));
                        }
                        let h = set("hosts", &w.hosts, None)?;
                        two("hosts", &h)?;
                        Ranks::hosts(&h)
                    }
                    Some(g) => gpu_ranks(w, topo, &g).map_err(|(k, m)| err(k, m))?,
                };
                let spec = nccl_tests_spec(w, ranks.len()).map_err(|(k, m)| err(k, m))?;
                let enabled =
                    Enabled::from_env(w.algo.as_deref(), w.proto.as_deref()).map_err(|e| {
                        let k = if e.var == "NCCL_ALGO" {
                            "algo"
                        } else {
                            "proto"
                        };
                        err(k, format!("{:?}: {}", e.value, e.why))
                    })?;
                let ranks = ranks.on(topo);
                generate::nccl_tests(&mut b, &ranks, &spec, &t, &name, &enabled).map_err(|m| {
                    let k = match (&w.algo, &w.proto) {
                        (Some(_), _) => "algo",
                        _ => "proto",
                    };
                    err(k, m)
                })?;
            }
            WorkloadKind::Training => {
                let g = topo.gpu.ok_or_else(|| {
                    err(
                        "kind",
                        "\"training\" needs GPU servers: expected a topology with a [gpu] table"
                            .into(),
                    )
                })?;
                let servers = job_servers(w, &g, &held, &mut rng).map_err(|(k, m)| err(k, m))?;
                held.extend_from_slice(&servers);
                let spec = training_spec(w).map_err(|(k, m)| err(k, m))?;
                let gpus = w.gpus.unwrap_or(g.gpus);
                if gpus == 0 || gpus > g.gpus {
                    return Err(err(
                        "gpus",
                        format!("{gpus}: expected 1 to {} (the GPUs of a server)", g.gpus),
                    ));
                }
                if gpus % spec.tp != 0 {
                    return Err(err(
                        "tp",
                        format!("{}: expected a divisor of the job's {gpus} GPUs per server (tensor-parallel groups stay inside a server)", spec.tp),
                    ));
                }
                if servers.len() % spec.pp as usize != 0 {
                    return Err(err(
                        "pp",
                        format!("{}: expected a divisor of the job's {} servers (a pipeline stage is whole servers)", spec.pp, servers.len()),
                    ));
                }
                let stage = servers.len() / spec.pp as usize;
                if stage * (gpus as usize) / (spec.tp as usize) < 2
                    && (spec.grad_bytes > 0 || spec.moe_bytes > 0)
                {
                    return Err(err(
                        "servers",
                        format!("{stage} server(s) a stage of {gpus} GPUs with tp = {}: a data-parallel group of 1 has no all-reduce or all-to-all; expected more servers or GPUs", spec.tp),
                    ));
                }
                if servers.len() * (gpus as usize) < 2 {
                    return Err(err("gpus", "1 GPU: expected at least 2 ranks".into()));
                }
                if let Some(c) = w.channels.filter(|&c| c == 0 || c > 64) {
                    return Err(err("channels", format!("{c}: expected 1 to 64")));
                }
                let enabled =
                    Enabled::from_env(w.algo.as_deref(), w.proto.as_deref()).map_err(|e| {
                        let k = if e.var == "NCCL_ALGO" {
                            "algo"
                        } else {
                            "proto"
                        };
                        err(k, format!("{:?}: {}", e.value, e.why))
                    })?;
                wl::training::training(
                    &mut b, topo, &servers, gpus, w.channels, &spec, &t, &name, &enabled,
                )
                .map_err(|m| {
                    let k = match (&w.algo, &w.proto) {
                        (Some(_), _) => "algo",
                        (None, Some(_)) => "proto",
                        _ => "servers",
                    };
                    err(k, m)
                })?;
            }
            WorkloadKind::Poisson => {
                let h = set("hosts", &w.hosts, None)?;
                two("hosts", &h)?;
                let cdf = match (&w.cdf, &w.cdf_file) {
                    (Some(name), None) => FlowSizeCdf::builtin(name).ok_or_else(|| {
                        let names: Vec<&str> = wl::cdf::BUILTIN.iter().map(|(n, _)| *n).collect();
                        err(
                            "cdf",
                            format!("{name:?}: expected one of {}", names.join(", ")),
                        )
                    })?,
                    (None, Some(p)) => {
                        let path = dir.join(p);
                        if !path.is_file() {
                            return Err(err("cdf_file", format!("{} does not exist: expected a CDF file (paths are relative to the scenario file)", path.display())));
                        }
                        let text = read_file(&path)?;
                        FlowSizeCdf::parse(&text).map_err(|e| FileError {
                            file: path.clone(),
                            position: Some((e.line, 1)),
                            key: None,
                            message: e.message,
                        })?
                    }
                    _ => {
                        return Err(err(
                            "cdf",
                            "expected exactly one of `cdf` (a built-in name) and `cdf_file`".into(),
                        ))
                    }
                };
                let load = match w.load {
                    Some(l) if l > 0.0 && l <= 1.0 => l,
                    Some(l) => {
                        return Err(err("load", format!("{l}: expected a fraction in (0, 1]")))
                    }
                    None => {
                        return Err(err(
                            "load",
                            "missing: expected the offered load, e.g. 0.3".into(),
                        ))
                    }
                };
                let window = w.window.filter(|d| *d > Duration::ZERO).ok_or_else(|| {
                    err(
                        "window",
                        "missing or zero: expected how long flows arrive, e.g. \"10ms\"".into(),
                    )
                })?;
                let rates: Vec<_> = h
                    .iter()
                    .map(|&n| {
                        let ports = &topo.node(n).ports;
                        ports
                            .first()
                            .map_or(Default::default(), |&l| topo.link(l).rate)
                    })
                    .collect();
                generate::poisson(&mut b, &h, &rates, &cdf, load, window, &t, &mut rng);
            }
            WorkloadKind::Perftest => {
                let s = w
                    .src
                    .as_ref()
                    .ok_or_else(|| err("src", "missing: expected the requester host".into()))?;
                let d = w
                    .dst
                    .as_ref()
                    .ok_or_else(|| err("dst", "missing: expected the responder host".into()))?;
                let (s, d) = (host("src", s)?, host("dst", d)?);
                if s == d {
                    return Err(err(
                        "dst",
                        "the same host as src: expected another host".into(),
                    ));
                }
                match w.test {
                    None => {
                        for k in [
                            "all",
                            "iters",
                            "duration",
                            "tx_depth",
                            "bidirectional",
                            "inline",
                            "cq_mod",
                        ] {
                            if w.given().contains(&k) {
                                return Err(err(
                                    k,
                                    "needs `test`: expected a perftest program, e.g. test = \"write_bw\"".into(),
                                ));
                            }
                        }
                        generate::single(&mut b, s, d, &t);
                    }
                    Some(test) => {
                        let spec = perftest_spec(w, test, qps).map_err(|(k, m)| err(k, m))?;
                        generate::perftest(&mut b, s, d, &spec, &t, &name);
                    }
                }
            }
            WorkloadKind::HpccFlows | WorkloadKind::Htsim => {
                let p = w
                    .path
                    .as_ref()
                    .ok_or_else(|| err("path", "missing: expected the file to import".into()))?;
                let path = dir.join(p);
                if !path.is_file() {
                    return Err(err("path", format!("{} does not exist: expected a file (paths are relative to the scenario file)", path.display())));
                }
                let text = read_file(&path)?;
                let mut flows = if w.kind == WorkloadKind::HpccFlows {
                    wl::hpcc::parse(&path, &text, topo, w.shift.unwrap_or(Duration::ZERO))?
                } else {
                    wl::htsim::parse(&path, &text, &hosts)?
                };
                if let Some(op) = w.op {
                    for f in &mut flows {
                        f.op = op.into();
                    }
                }
                if flows.iter().any(|f| !f.after.is_empty()) {
                    let g = b.new_group(GroupSpec {
                        name,
                        kind: kind_name(w.kind).to_string(),
                        ring: None,
                        perftest: None,
                        nccl: None,
                        training: None,
                    });
                    for f in &mut flows {
                        f.group = Some(g);
                    }
                }
                b.extend(flows);
            }
        }
        b.set_workload(first_flow, i as u32);
    }
    let groups = b.groups().to_vec();
    let flows = b.finish().map_err(|e| {
        FileError::new(
            file,
            "workload",
            format!("{e}: expected dependencies without cycles"),
        )
    })?;
    Ok((flows, groups, names))
}

/// A training workload's shape, with its defaults; errors name the key.
fn training_spec(w: &WorkloadDoc) -> Result<wl::training::Training, (&'static str, String)> {
    let positive = |k: &'static str, v: Option<u32>, default: u32| match v {
        Some(0) => Err((k, "0: expected at least 1".to_string())),
        Some(x) => Ok(x),
        None => Ok(default),
    };
    let layers = positive("layers", w.layers, 1)?;
    let pp = positive("pp", w.pp, 1)?;
    if pp > layers {
        return Err((
            "pp",
            format!("{pp}: expected at most the {layers} layers (a stage holds at least one)"),
        ));
    }
    let buckets = positive("buckets", w.buckets, 1)?;
    if buckets > layers / pp {
        return Err((
            "buckets",
            format!(
                "{buckets}: expected at most the {} layers of a stage (a bucket fills as layers finish)",
                layers / pp
            ),
        ));
    }
    let pp_bytes = w.pp_bytes.map_or(0, |s| s.bytes());
    if pp > 1 && pp_bytes == 0 {
        return Err((
            "pp_bytes",
            "missing or 0: expected the bytes a rank sends the next pipeline stage per microbatch"
                .into(),
        ));
    }
    if pp == 1 && w.pp_bytes.is_some() {
        return Err((
            "pp_bytes",
            "given with pp = 1: expected pp of 2 or more".into(),
        ));
    }
    let (forward, backward) = match (w.forward, w.backward, w.step_flops, w.gpu_flops) {
        (Some(f), Some(b), None, None) => (f, b),
        (None, None, Some(fl), Some(rate)) => {
            if !(fl.is_finite() && fl > 0.0) {
                return Err(("step_flops", format!("{fl}: expected a positive number of FLOPs")));
            }
            if !(rate.is_finite() && rate > 0.0) {
                return Err(("gpu_flops", format!("{rate}: expected a positive FLOP/s rate")));
            }
            // The backward pass does twice the forward's work.
            let ps = fl / rate * 1e12;
            if ps > 1e18 {
                return Err(("step_flops", format!("{fl} FLOPs at {rate} FLOP/s: over 11 days a step")));
            }
            let f = Duration::from_ps((ps / 3.0).round() as u64);
            (f, Duration::from_ps((ps * 2.0 / 3.0).round() as u64))
        }
        (Some(_), _, Some(_), _)
        | (_, Some(_), Some(_), _)
        | (Some(_), _, _, Some(_))
        | (_, Some(_), _, Some(_)) => {
            return Err((
                "step_flops",
                "given with forward or backward: expected the durations or the FLOPs, not both".into(),
            ))
        }
        (_, _, Some(_), None) => {
            return Err(("gpu_flops", "missing: expected a GPU's sustained FLOP/s with step_flops".into()))
        }
        (_, _, None, Some(_)) => {
            return Err(("step_flops", "missing: expected the FLOPs per GPU of a step with gpu_flops".into()))
        }
        (None, _, _, _) => {
            return Err(("forward", "missing: expected a step's forward compute, e.g. \"20ms\" (or step_flops and gpu_flops)".into()))
        }
        (_, None, _, _) => {
            return Err(("backward", "missing: expected a step's backward compute, e.g. \"40ms\"".into()))
        }
    };
    let tp = positive("tp", w.tp, 1)?;
    let tp_bytes = w.tp_bytes.map_or(0, |s| s.bytes());
    if tp > 1 && tp_bytes == 0 && w.tp_bytes.is_some() {
        return Err((
            "tp_bytes",
            "0: expected the bytes of a tensor-parallel all-reduce".into(),
        ));
    }
    if tp == 1 && tp_bytes > 0 {
        return Err((
            "tp_bytes",
            "given with tp = 1: expected tp of 2 or more".into(),
        ));
    }
    Ok(wl::training::Training {
        steps: positive("steps", w.steps, 1)?,
        layers,
        tp,
        forward,
        backward,
        optimizer: w.optimizer.unwrap_or(Duration::ZERO),
        grad_bytes: w.grad_bytes.map_or(0, |s| s.bytes()),
        buckets,
        tp_bytes,
        moe_bytes: w.moe_bytes.map_or(0, |s| s.bytes()),
        pp,
        microbatches: positive("microbatches", w.microbatches, 1)?,
        pp_bytes,
    })
}

/// The servers of a training job: `servers` as a list (each free), or a
/// count placed by `placement` among the servers `held` by no earlier
/// job; default all free servers.
fn job_servers(
    w: &WorkloadDoc,
    g: &GpuServers,
    held: &[u32],
    rng: &mut ChaCha8Rng,
) -> Result<Vec<u32>, (&'static str, String)> {
    use rand::seq::SliceRandom;
    let free: Vec<u32> = (0..g.servers).filter(|s| !held.contains(s)).collect();
    let n = match &w.servers {
        None | Some(HostSet::All) => free.len() as u32,
        Some(HostSet::Count(n)) => *n,
        Some(HostSet::List(l)) => {
            if w.placement.is_some() {
                return Err((
                    "placement",
                    "given with a list of servers: expected a server count to place".into(),
                ));
            }
            let mut v = Vec::with_capacity(l.len());
            for r in l {
                match r {
                    HostRef::Index(i) if *i >= g.servers => {
                        return Err(("servers", format!("server {i}: the topology has servers 0-{}", g.servers - 1)))
                    }
                    HostRef::Index(i) if v.contains(i) => {
                        return Err(("servers", format!("server {i} is listed twice: expected distinct servers")))
                    }
                    HostRef::Index(i) if held.contains(i) => {
                        return Err(("servers", format!("server {i} belongs to an earlier training job: expected free servers")))
                    }
                    HostRef::Index(i) => v.push(*i),
                    HostRef::Name(n) => {
                        return Err(("servers", format!("{n:?}: expected server indices (server s owns hosts s*nics to s*nics+nics-1)")))
                    }
                }
            }
            return Ok(v);
        }
    };
    if n == 0 || n as usize > free.len() {
        return Err((
            "servers",
            format!(
                "{n} servers: {} of the topology's {} are free of earlier training jobs",
                free.len(),
                g.servers
            ),
        ));
    }
    let k = n as usize;
    Ok(match w.placement.unwrap_or(Placement::Packed) {
        Placement::Packed => free[..k].to_vec(),
        Placement::Spread => (0..k).map(|i| free[i * free.len() / k]).collect(),
        Placement::Random => {
            let mut v: Vec<u32> = free.choose_multiple(rng, k).copied().collect();
            v.sort_unstable();
            v
        }
    })
}

fn gpu_ranks(
    w: &WorkloadDoc,
    topo: &Topology,
    g: &GpuServers,
) -> Result<Ranks, (&'static str, String)> {
    if w.hosts.is_some() {
        return Err((
            "hosts",
            "on GPU servers the ranks are GPUs: expected servers (and gpus) instead".into(),
        ));
    }
    let servers: Vec<u32> = match &w.servers {
        None | Some(HostSet::All) => (0..g.servers).collect(),
        Some(HostSet::Count(n)) => {
            if *n > g.servers || *n == 0 {
                return Err((
                    "servers",
                    format!("{n} servers: expected 1 to {}", g.servers),
                ));
            }
            (0..*n).collect()
        }
        Some(HostSet::List(l)) => {
            let mut v = Vec::with_capacity(l.len());
            for r in l {
                match r {
                    HostRef::Index(i) if *i < g.servers && !v.contains(i) => v.push(*i),
                    HostRef::Index(i) if *i < g.servers => {
                        return Err(("servers", format!("server {i} is listed twice: expected distinct servers")))
                    }
                    HostRef::Index(i) => {
                        return Err((
                            "servers",
                            format!("server {i}: the topology has servers 0-{}", g.servers - 1),
                        ))
                    }
                    HostRef::Name(n) => {
                        return Err((
                            "servers",
                            format!("{n:?}: expected server indices (server s owns hosts s*nics to s*nics+nics-1)"),
                        ))
                    }
                }
            }
            v
        }
    };
    let gpus = w.gpus.unwrap_or(g.gpus);
    if gpus == 0 || gpus > g.gpus {
        return Err((
            "gpus",
            format!("{gpus}: expected 1 to {} (the GPUs of a server)", g.gpus),
        ));
    }
    // NCCL's search finds a channel per NIC and doubles them on fast
    // NVLink (ncclTopoPostset's duplicated channels).
    let channels = w.channels.unwrap_or((2 * g.nics).min(64));
    if channels == 0 || channels > 64 {
        return Err(("channels", format!("{channels}: expected 1 to 64")));
    }
    if servers.len() * (gpus as usize) < 2 {
        return Err((
            "servers",
            format!(
                "{} rank(s): expected at least 2",
                servers.len() * gpus as usize
            ),
        ));
    }
    Ranks::gpus(topo, &servers, gpus, channels)
        .ok_or_else(|| ("servers", "expected servers of the topology".to_string()))
}

/// The sizes and collective of an `nccl-tests` workload, or the key that
/// is wrong and why.
fn nccl_tests_spec(
    w: &WorkloadDoc,
    ranks: usize,
) -> Result<wl::nccl_tests::Sweep, (&'static str, String)> {
    use wl::nccl_tests::Collective;
    let names = || {
        Collective::ALL
            .iter()
            .map(|c| c.name())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let c = w.collective.ok_or_else(|| {
        (
            "collective",
            format!("missing: expected one of {}", names()),
        )
    })?;
    let min = w
        .min_bytes
        .ok_or_else(|| {
            (
                "min_bytes",
                "missing: expected the smallest size, e.g. \"1MB\"".to_string(),
            )
        })?
        .bytes();
    let max = w.max_bytes.map_or(min, |m| m.bytes());
    if max < min {
        return Err((
            "max_bytes",
            format!("{max} bytes: expected at least min_bytes ({min} bytes)"),
        ));
    }
    let factor = w.step_factor.unwrap_or(2);
    if factor < 2 {
        return Err(("step_factor", format!("{factor}: expected at least 2")));
    }
    let n = ranks as u32;
    // Every rank must move at least one byte per step: nccl-tests' shares
    // of a split buffer are whole 16-byte units, an all-reduce's chunk is
    // a rank's part of the buffer.
    let least = wl::nccl_tests::smallest_size(c, wl::nccl_tests::ELEMENT_BYTES, n);
    if min < least {
        return Err((
            "min_bytes",
            format!(
                "{min} bytes: expected at least {least} bytes for {} on {ranks} ranks (below that a rank has nothing to send in a step, which the simulator cannot time)",
                c.name()
            ),
        ));
    }
    let mut sizes = Vec::new();
    let mut s = min;
    while s <= max {
        sizes.push(s);
        if sizes.len() > 64 {
            return Err((
                "max_bytes",
                format!("{max} bytes: more than 64 sizes from {min} by x{factor}: expected fewer"),
            ));
        }
        s = match s.checked_mul(factor) {
            Some(v) => v,
            None => break,
        };
    }
    Ok(wl::nccl_tests::Sweep {
        collective: c,
        sizes,
    })
}

fn perftest_spec(
    w: &WorkloadDoc,
    test: PerftestTest,
    qps: u32,
) -> Result<PerftestSpec, (&'static str, String)> {
    if w.op.is_some() {
        return Err((
            "op",
            format!("the test {:?} sets the verb: leave `op` out", test.name()),
        ));
    }
    if w.message_size.is_some() {
        return Err((
            "message_size",
            "a perftest message is `size`: leave `message_size` out".into(),
        ));
    }
    let sizes = match (w.all, w.size) {
        (Some(true), Some(_)) => {
            return Err((
                "all",
                "with `size`: expected one of `all = true` (every size) and `size`".into(),
            ))
        }
        (Some(true), None) => pt::all_sizes(),
        (_, Some(s)) => vec![s.bytes()],
        (_, None) => vec![test.default_size()],
    };
    if sizes.iter().any(|&s| s > 1 << 30) {
        return Err(("size", "expected at most 1 GiB per message".into()));
    }
    if w.iters.is_some() && w.duration.is_some() {
        return Err((
            "duration",
            "with `iters`: expected one of `iters` (-n) and `duration` (-D)".into(),
        ));
    }
    if w.iters == Some(0) {
        return Err(("iters", "0: expected at least 1 iteration".into()));
    }
    if w.duration == Some(Duration::ZERO) {
        return Err(("duration", "0: expected a positive duration".into()));
    }
    let tx_depth = if test.is_bw() {
        w.tx_depth.unwrap_or(128)
    } else {
        if w.tx_depth.is_some_and(|d| d != 1) {
            return Err((
                "tx_depth",
                "a latency test keeps one message in flight: expected 1 or nothing".into(),
            ));
        }
        1
    };
    if tx_depth == 0 || tx_depth > 16384 {
        return Err(("tx_depth", format!("{tx_depth}: expected 1-16384")));
    }
    let cq_mod = w.cq_mod.unwrap_or(100).min(tx_depth);
    if cq_mod == 0 {
        return Err(("cq_mod", "0: expected at least 1".into()));
    }
    if w.bidirectional == Some(true) && !test.is_bw() {
        return Err((
            "bidirectional",
            "a latency test runs both ways already: expected a bandwidth test".into(),
        ));
    }
    let inline = match w.inline {
        Some(s) if s.bytes() > 1024 => {
            return Err(("inline", format!("{s}: expected at most 1024 bytes")))
        }
        Some(s) => s.bytes() as u32,
        None => test.default_inline(),
    };
    Ok(PerftestSpec {
        test,
        sizes,
        iters: w.iters.unwrap_or(test.default_iters()),
        duration: w.duration,
        qps: if test.is_bw() { qps } else { 1 },
        tx_depth,
        bidirectional: w.bidirectional.unwrap_or(false),
        inline,
        cq_mod,
    })
}

fn kind_name(k: WorkloadKind) -> &'static str {
    match k {
        WorkloadKind::Incast => "incast",
        WorkloadKind::Permutation => "permutation",
        WorkloadKind::AllToAll => "all-to-all",
        WorkloadKind::RingAllreduce => "ring-allreduce",
        WorkloadKind::NcclTests => "nccl-tests",
        WorkloadKind::Training => "training",
        WorkloadKind::Poisson => "poisson",
        WorkloadKind::Perftest => "perftest",
        WorkloadKind::HpccFlows => "hpcc-flows",
        WorkloadKind::Htsim => "htsim",
    }
}
