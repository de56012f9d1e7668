//! `rocelab compare A B [--json] [--workload NAME]`: like next to like,
//! with ratios and a verdict per row: a perftest output next to the
//! results of a perftest workload of the same test (or another perftest
//! output of it), two results.json, or two counter dumps of one tool.
//! Anything else is refused on standard error with why and what would
//! compare (exit status 2).

use std::path::PathBuf;
use std::process::ExitCode;

use reports::{compare, realnic};

/// Arguments of `compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Side A (format detected).
    pub a: PathBuf,
    /// Side B (format detected).
    pub b: PathBuf,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// The perftest workload of results.json to compare with, when it
    /// holds several of the perftest output's test.
    #[arg(long)]
    pub workload: Option<String>,
}

fn load(p: &PathBuf) -> Result<realnic::Parsed, String> {
    let b = std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()))?;
    let text = String::from_utf8_lossy(&b);
    realnic::parse(None, &text).map_err(|e| format!("{}: {e}", p.display()))
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    let (a, b) = match (load(&args.a), load(&args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("rocelab compare: {e}");
            return ExitCode::from(2);
        }
    };
    let options = compare::Options {
        workload: args.workload.clone(),
    };
    let tables = match compare::compare_with(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
        &options,
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("rocelab compare: {e}");
            return ExitCode::from(2);
        }
    };
    if args.json {
        match serde_json::to_string_pretty(&tables) {
            Ok(s) => println!("{s}"),
            Err(e) => {
                eprintln!("rocelab compare: {e}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        print!("{}", compare::render_text(&tables));
    }
    ExitCode::SUCCESS
}
