//! `rocelab doctor FILE... [--interval 10s] [--json]`: findings from NIC
//! counter captures and inventory files.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use reports::doctor::{self, Input, Options, Severity};
use reports::realnic;
use verbs_emu::time::Duration;

/// Arguments of `doctor`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Captures: ethtool -S and rdma statistic dumps (two snapshots of one
    /// source make a delta), topo -m, ibv_devinfo/ibstat, mlnx_qos,
    /// show_gids, perftest, NCCL logs, a simulation's results.json. The
    /// format is detected. A directory stands for every file below it.
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
    let mut inputs = Vec::new();
    let mut files = Vec::new();
    for f in &args.files {
        expand(f, &mut files);
    }
    for f in &files {
        let text = match std::fs::read(f) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => {
                eprintln!("rocelab doctor: {}: {e}", f.display());
                return ExitCode::from(2);
            }
        };
        match realnic::parse(None, &text) {
            Ok(parsed) => inputs.push(Input {
                name: f.display().to_string(),
                parsed,
            }),
            Err(e) => {
                eprintln!("rocelab doctor: {}: {e}", f.display());
                return ExitCode::from(2);
            }
        }
    }
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
    let diagnosis = doctor::diagnose(
        &inputs,
        &Options {
            interval: args.interval,
        },
    );
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

/// A file stands for itself; a directory (e.g. a simulation's output with
/// its `counters/`) for every file below it, sorted by path.
fn expand(path: &Path, out: &mut Vec<PathBuf>) {
    match std::fs::read_dir(path) {
        Ok(dir) => {
            let mut inner: Vec<PathBuf> = dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
            inner.sort();
            for p in inner {
                expand(&p, out);
            }
        }
        Err(_) => out.push(path.to_path_buf()),
    }
}
