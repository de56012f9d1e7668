//! What a run is asked to do and how it can fail: the options every
//! layer of a run reads ([`RunOptions`]), the progress it reports while it
//! runs ([`Progress`]) and why it may not start ([`SimError`]). These sit
//! below both the entry point ([`crate::run`]) and the model it builds
//! ([`crate::fabric`]), so neither imports the other for them.

use core::fmt;
use std::sync::Arc;

use roce::time::{Duration, Instant};

use crate::config::{ConfigError, OverrideSetting, SimConfig};
use crate::workload::{FlowSpec, GroupSpec};

/// How far a run has got: what a progress observer is handed.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    /// The variant being run.
    pub variant: &'a str,
    /// Wall-clock time since the event loop started.
    pub wall: std::time::Duration,
    /// Simulated time now.
    pub now: Instant,
    /// The simulated time the run stops at, if it has a duration.
    pub end: Option<Instant>,
    /// Flows finished (completed, failed or never to be posted).
    pub flows_done: usize,
    /// Flows in the run (0 for runs driven by time alone).
    pub flows_total: usize,
    /// Events processed so far.
    pub events: u64,
}

/// A progress observer: called from the event loop, so it must be cheap.
pub type ProgressFn = Arc<dyn Fn(&Progress<'_>) + Send + Sync>;

/// How a run moves its flows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fidelity {
    /// Frame by frame through queues, PFC and the transport engine (the
    /// default).
    #[default]
    Packet,
    /// Flows as max-min fair rates over their paths, for large sweeps
    /// (see `crate::fabric` fluid mode for what it leaves out).
    Fluid,
}

impl Fidelity {
    /// Why `flows` under `config` cannot run as rates, if they cannot:
    /// what needs frames or time-driven state. The one check both the
    /// scenario loader (so `validate` refuses it) and fluid mode itself
    /// apply.
    pub fn fluid_refusal(config: &SimConfig, flows: &[FlowSpec]) -> Option<&'static str> {
        let host_model = config.nic.host.is_some()
            || config
                .overrides
                .iter()
                .any(|o| matches!(&o.setting, OverrideSetting::Nic(n) if n.host.is_some()));
        if !config.faults.is_empty() {
            Some("faults act on frames and links in time")
        } else if config.overrides.iter().any(|o| !o.window.always()) {
            Some("timed overrides change elements during the run")
        } else if flows.iter().any(|f| f.post.is_some()) {
            Some("perftest's posting loops are per message")
        } else if host_model {
            Some("a host model (nic.host) paces frames through PCIe")
        } else if !config.record.pcap.is_empty() {
            Some("captures (record.pcap) need frames")
        } else if config.fabric.link_layer == crate::config::LinkLayer::Infiniband {
            Some("InfiniBand's credits act per frame and lane")
        } else if config.fabric.load_balancing != crate::config::LoadBalancingConfig::Ecmp
            || config.overrides.iter().any(|o| {
                matches!(&o.setting, OverrideSetting::Fabric(f)
                    if f.load_balancing != crate::config::LoadBalancingConfig::Ecmp)
            })
        {
            Some("load balancing other than ECMP picks a path per frame")
        } else {
            None
        }
    }
}

/// How long to run and what to call the run.
#[derive(Clone)]
pub struct RunOptions {
    /// Variant name written into the summary.
    pub variant: String,
    /// Root seed; every component derives its own stream from it.
    pub seed: u64,
    /// Stop at this simulated time (`None`: run until every flow has
    /// completed or failed, or nothing is left to do).
    pub duration: Option<Duration>,
    /// Stop after this many events (a guard against runaway runs).
    pub max_events: u64,
    /// Told how far the run has got, about every 2^18 events (`None`:
    /// nobody asks). The simulator draws nothing itself: the CLI turns
    /// these calls into a progress bar.
    pub progress: Option<ProgressFn>,
    /// Groups of flows to report step times for (`results.groups`), by
    /// group id: a flow with `group == Some(g)` belongs to `groups[g]`.
    /// Flows of a group id not listed here are not reported as a group.
    pub groups: Vec<GroupSpec>,
    /// Workload names by [`FlowSpec::workload`](crate::workload::FlowSpec::workload) index, for the flow
    /// records; an index without a name is called `workload-<index>`.
    pub workloads: Vec<String>,
    /// Frames or rates.
    pub fidelity: Fidelity,
    /// Set from outside (the CLI's Ctrl-C) to end the run at its next
    /// check, within 2^14 events: the results are collected as they
    /// stand, with `stop_reason` `interrupted` (`None`: nobody can).
    pub stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
}

impl RunOptions {
    /// True once [`RunOptions::stop`] has been set.
    pub fn stopped(&self) -> bool {
        self.stop
            .as_ref()
            .is_some_and(|s| s.load(std::sync::atomic::Ordering::Relaxed))
    }
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            variant: "default".to_string(),
            seed: 1,
            duration: None,
            max_events: 2_000_000_000,
            progress: None,
            groups: Vec::new(),
            workloads: Vec::new(),
            fidelity: Fidelity::Packet,
            stop: None,
        }
    }
}

impl fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunOptions")
            .field("variant", &self.variant)
            .field("seed", &self.seed)
            .field("duration", &self.duration)
            .field("max_events", &self.max_events)
            .field("progress", &self.progress.is_some())
            .field("groups", &self.groups)
            .field("workloads", &self.workloads)
            .field("fidelity", &self.fidelity)
            .field("stop", &self.stopped())
            .finish()
    }
}

/// Why a run could not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SimError {
    /// The configuration breaks a rule.
    #[error("configuration: {0}")]
    Config(#[from] ConfigError),
    /// The topology is unusable (dangling link, host without a port ...).
    #[error("topology: {0}")]
    Topology(String),
    /// A flow names something that does not exist or is not allowed.
    #[error("flow {id}: {message}")]
    Flow {
        /// Flow id.
        id: u32,
        /// What is wrong.
        message: String,
    },
    /// A fault or record selector names a node or link that is not there.
    #[error("{key}: {message}")]
    Selector {
        /// Dotted key in the configuration.
        key: String,
        /// What is wrong.
        message: String,
    },
}
