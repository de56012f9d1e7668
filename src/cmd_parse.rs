//! `rocelab parse KIND FILE [--json]`: print what a parser understood.

use std::path::PathBuf;
use std::process::ExitCode;

use reports::realnic::{self, Kind};

/// Arguments of `parse`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Format: auto, perftest, ethtool, rdma, topo, devinfo (or ibstat),
    /// mlnx-qos, show-gids, nccl, sim-results.
    pub kind: String,
    /// The file to read.
    pub file: PathBuf,
    /// Print everything as JSON instead of a summary.
    #[arg(long)]
    pub json: bool,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let kind = if args.kind == "auto" {
        None
    } else {
        match args.kind.parse::<Kind>() {
            Ok(k) => Some(k),
            Err(e) => {
                eprintln!("rocelab parse: {e}");
                return ExitCode::from(2);
            }
        }
    };
    let text = match std::fs::read(&args.file) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            eprintln!("rocelab parse: {}: {e}", args.file.display());
            return ExitCode::from(2);
        }
    };
    match realnic::parse(kind, &text) {
        Ok(parsed) => {
            if args.json {
                match serde_json::to_string_pretty(&parsed) {
                    Ok(s) => println!("{s}"),
                    Err(e) => {
                        eprintln!("rocelab parse: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            } else {
                println!("{}: {}", args.file.display(), parsed.kind());
                print!("{}", realnic::summary::summarize(&parsed));
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("rocelab parse: {}: {e}", args.file.display());
            ExitCode::FAILURE
        }
    }
}
