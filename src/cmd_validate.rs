//! `rocelab validate FILE`: check a scenario or topology file without
//! running it.

use std::path::Path;
use std::process::ExitCode;

use sim::scenario::{check_file, CheckedFile};
use sim::topology::Topology;

fn describe(t: &Topology) -> String {
    format!(
        "{} hosts, {} switches, {} links",
        t.host_count(),
        t.switch_count(),
        t.links.len()
    )
}

/// Check `file`; print what it holds, or the error (file, line, key,
/// expectation) on stderr.
pub fn run(file: &Path) -> ExitCode {
    match check_file(file) {
        Ok(CheckedFile::Scenario(s)) => {
            println!("{}: scenario {:?}, seed {}", file.display(), s.name, s.seed);
            for v in &s.variants {
                println!(
                    "  variant {:<12} {} flows on {}",
                    v.name,
                    v.flows.len(),
                    describe(&s.topologies[v.topology])
                );
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
