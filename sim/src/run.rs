//! The entry point: run one variant of a scenario.
//!
//! [`simulate`] builds the model from a topology, routes, a configuration
//! and a flow list, runs the event loop until the network is idle, the
//! duration is reached or the event budget is spent, and returns the
//! deterministic [`RunResult`] together with wall-clock [`RunStats`].
//!
//! `options.fidelity` picks the packet model or fluid mode (flows as
//! max-min fair rates; see the fabric's `fluid` module).
//!
//! Flows are posted at their `start`, or, when they wait for other flows
//! ([`FlowSpec::after`]), at the later of `start` and the completion of
//! the last flow they wait for (see [`crate::workload`]).

use crate::config::SimConfig;
pub use crate::options::{Fidelity, Progress, ProgressFn, RunOptions, SimError};
use crate::results::{RunResult, RunStats};
use crate::topology::{Routes, Topology};
use crate::workload::FlowSpec;

/// Run one variant: build the model, run it, collect the results.
pub fn simulate(
    topology: &Topology,
    routes: &Routes,
    config: &SimConfig,
    flows: &[FlowSpec],
    options: &RunOptions,
) -> Result<(RunResult, RunStats), SimError> {
    let world = crate::fabric::World::build(topology, routes, config, flows, options)?;
    match options.fidelity {
        Fidelity::Packet => world.run(),
        Fidelity::Fluid => world.run_fluid(),
    }
}
