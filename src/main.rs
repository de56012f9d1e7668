//! `rocelab`: the one command-line binary. It parses arguments and calls the
//! libraries; no logic lives here. One module per subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_devices;
mod cmd_perftest;

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
    /// List RDMA devices, emulated and real, like ibv_devices.
    Devices(cmd_devices::DevicesArgs),
    /// perftest-compatible benchmarks: rocelab perftest write_bw [SERVER].
    Perftest(Box<cmd_perftest::PerftestArgs>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("rocelab {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Devices(a) => cmd_devices::run(a),
        Command::Perftest(a) => cmd_perftest::run(*a),
    }
}
