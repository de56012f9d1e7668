//! `rocelab compare A B [--json]`: a simulated result next to a real one
//! (perftest vs results.json, or two counter dumps), with ratios and a
//! verdict per row.

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
    let tables = match compare::compare(
        &args.a.display().to_string(),
        &a,
        &args.b.display().to_string(),
        &b,
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
