//! `rocelab validate FILE [--set K=V] [--seed N] [--variant NAME]`: check a
//! scenario or topology file without running it: what `run` would load,
//! and every point of its `[sweep]` as `sweep` would load it.

use std::path::PathBuf;
use std::process::ExitCode;

use sim::scenario::{check_file_with, CheckedFile};

use crate::cmd_run::Changes;

/// Arguments of `rocelab validate`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario or topology file (TOML).
    pub file: PathBuf,
    /// Changes to the scenario, checked as `run` would apply them.
    #[command(flatten)]
    pub changes: Changes,
}
use sim::topology::Topology;

fn describe(t: &Topology) -> String {
    format!(
        "{} hosts, {} switches, {} links",
        t.host_count(),
        t.switch_count(),
        t.links.len()
    )
}

/// Check `file` (with the changes `run` would make); print what it holds,
/// or the error (file, line, key, expectation) on stderr.
pub fn run(args: &Args) -> ExitCode {
    let file = &args.file;
    let overrides = match args.changes.overrides() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    match check_file_with(file, &overrides) {
        Ok(CheckedFile::Scenario(s)) => {
            println!("{}: scenario {:?}, seed {}", file.display(), s.name, s.seed);
            for v in &s.variants {
                let topo = &s.topologies[v.topology];
                let mem = sim::run::memory_estimate(topo, &v.flows, v.config.record.flows);
                println!(
                    "  variant {:<12} {} flows on {}; about {} of memory",
                    v.name,
                    v.flows.len(),
                    describe(topo),
                    crate::cmd_run::megabytes(mem)
                );
            }
            // Every point of a [sweep] loads as its single run would.
            match sim::sweep::check_points(file, &overrides) {
                Ok(0) => {}
                Ok(n) => println!("  sweep: {n} points, each checked"),
                Err(e) => {
                    eprintln!("error: {e}");
                    return ExitCode::FAILURE;
                }
            }
            println!("ok");
            ExitCode::SUCCESS
        }
        Ok(CheckedFile::Topology(t)) => {
            println!("{}: topology, {}", file.display(), describe(&t));
            println!("ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
