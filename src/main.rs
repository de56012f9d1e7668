//! `rocelab`: the one command-line binary. It parses arguments and calls the
//! libraries; no logic lives here. One module per subcommand.

mod cmd_validate;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A software RDMA lab: RoCEv2 fabric simulator, userspace verbs emulation,
/// and tools to read and compare real NICs' output.
#[derive(Debug, Parser)]
#[command(name = "rocelab", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the version and the crates it is built from.
    Version,
    /// Check a scenario or topology file without running it.
    Validate {
        /// The scenario or topology file (TOML).
        file: PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("rocelab {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Validate { file } => cmd_validate::run(&file),
    }
}
