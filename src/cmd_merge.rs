//! `rocelab merge DIR... [--out DIR]`: combine the folders of a sweep's
//! shards into the sweep's table (`sweep.csv`, `sweep.jsonl`,
//! `sweep.html`), byte for byte the table a local `rocelab sweep` writes.
//! Each DIR is a shard folder (`shard-I-of-N`) or a folder of them; points
//! no folder has are named with the shard to run again.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use sim::sweep::{self, MergeError, Table};

/// Arguments of `rocelab merge`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Shard folders, or folders holding them (a sweep's --out).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
    /// Where the table goes (default: the first DIR).
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// Merge the shards and write the table.
pub fn run(args: &Args) -> ExitCode {
    let table = match sweep::merge(&args.dirs) {
        Ok(t) => t,
        Err(e @ MergeError::Missing { .. }) => {
            eprintln!("error: {e}");
            eprintln!(
                "run the shards again (each alone: rocelab sweep FILE --shard I/N --out DIR), then merge"
            );
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let out = args.out.clone().unwrap_or_else(|| args.dirs[0].clone());
    match write_table(&out, &table) {
        Ok(()) => {
            println!(
                "wrote {} ({} rows of {} points), {} and {}",
                out.join("sweep.csv").display(),
                table.csv.lines().count().saturating_sub(1),
                table.manifest.points.len(),
                out.join("sweep.jsonl").display(),
                out.join("sweep.html").display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Write `sweep.csv`, `sweep.jsonl` and the report `sweep.html` into `out`.
pub fn write_table(out: &Path, table: &Table) -> Result<(), String> {
    let files = [
        ("sweep.csv", table.csv.clone()),
        ("sweep.jsonl", table.jsonl.clone()),
        ("sweep.html", reports::render::sweep::html(table)),
    ];
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    for (name, data) in files {
        let p = out.join(name);
        std::fs::write(&p, data).map_err(|e| format!("writing {}: {e}", p.display()))?;
    }
    Ok(())
}
