//! `rocelab doctor FILE... [--interval 10s] [--json]`: findings from NIC
//! counter captures and inventory files.

use std::path::PathBuf;
use std::process::ExitCode;

use reports::doctor::{self, Options, Severity};
use roce::time::Duration;

/// Arguments of `doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Captures: ethtool -S and rdma statistic dumps (two snapshots of one
    /// source make a delta), topo -m, ibv_devinfo/ibstat, mlnx_qos,
    /// show_gids, perftest, NCCL logs, a simulation's results.json. The
    /// format is detected. A directory stands for every file below it
    /// (files not recognised are listed as skipped); `-` reads standard
    /// input.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Time between consecutive snapshots, e.g. `10s`.
    #[arg(long)]
    pub interval: Option<Duration>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Exit with status 1 when a finding reaches this severity
    /// (info, warning, error, critical).
    #[arg(long)]
    pub fail_on: Option<String>,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let fail_on = match args.fail_on.as_deref() {
        None => None,
        Some("info") => Some(Severity::Info),
        Some("warning") => Some(Severity::Warning),
        Some("error") => Some(Severity::Error),
        Some("critical") => Some(Severity::Critical),
        Some(other) => {
            eprintln!(
                "rocelab doctor: --fail-on {other:?}: expected info, warning, error or critical"
            );
            return ExitCode::from(2);
        }
    };
    let loaded = doctor::load(&args.files, &mut std::io::stdin().lock());
    if loaded.inputs.is_empty() {
        for k in &loaded.skipped {
            eprintln!("rocelab doctor: skipped {}: {}", k.path, k.reason);
        }
        eprintln!("rocelab doctor: nothing to diagnose: no input was recognised");
        return ExitCode::from(2);
    }
    let mut diagnosis = doctor::diagnose(
        &loaded.inputs,
        &Options {
            interval: args.interval,
        },
    );
    diagnosis.skipped = loaded.skipped;
    if args.json {
        match serde_json::to_string_pretty(&diagnosis) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("rocelab doctor: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", diagnosis.render_text());
    }
    match fail_on {
        Some(level) if !diagnosis.findings.is_empty() && diagnosis.worst() >= level => {
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}
