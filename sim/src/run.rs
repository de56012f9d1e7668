//! The entry point: run one variant of a scenario.
//!
//! [`simulate`] builds the model from a topology, routes, a configuration
//! and a flow list, runs the event loop until the network is idle, the
//! duration is reached or the event budget is spent, and returns the
//! deterministic [`RunResult`] together with wall-clock [`RunStats`].
//!
//! Flows are posted at their `start`, or, when they wait for other flows
//! ([`FlowSpec::after`]), at the later of `start` and the completion of
//! the last flow they wait for (see [`crate::workload`]).

use roce::time::Duration;

use crate::config::{ConfigError, SimConfig};
use crate::results::{RunResult, RunStats};
use crate::topology::{Routes, Topology};
use crate::workload::{FlowSpec, GroupSpec};

/// How long to run and what to call the run.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// Draw a progress bar on stderr when it is a terminal and the run
    /// takes more than about two seconds.
    pub progress: bool,
    /// Groups of flows to report step times for (`results.groups`), by
    /// group id: a flow with `group == Some(g)` belongs to `groups[g]`.
    /// Flows of a group id not listed here are not reported as a group.
    pub groups: Vec<GroupSpec>,
    /// Workload names by [`FlowSpec::workload`] index, for the flow
    /// records; an index without a name is called `workload-<index>`.
    pub workloads: Vec<String>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            variant: "default".to_string(),
            seed: 1,
            duration: None,
            max_events: 2_000_000_000,
            progress: false,
            groups: Vec::new(),
            workloads: Vec::new(),
        }
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

/// Run one variant: build the model, run it, collect the results.
pub fn simulate(
    topology: &Topology,
    routes: &Routes,
    config: &SimConfig,
    flows: &[FlowSpec],
    options: &RunOptions,
) -> Result<(RunResult, RunStats), SimError> {
    crate::fabric::World::build(topology, routes, config, flows, options)?.run()
}
