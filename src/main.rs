//! `rocelab`: the one command-line binary. It parses arguments and calls the
//! libraries; no logic lives here. One module per subcommand.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd_compare;
mod cmd_devices;
mod cmd_doctor;
mod cmd_exec;
mod cmd_interview;
mod cmd_lessons;
mod cmd_merge;
mod cmd_parse;
mod cmd_perftest;
mod cmd_report;
mod cmd_run;
mod cmd_sweep;
mod cmd_twin;
mod cmd_validate;
mod cmd_wire;
mod progress;

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
    /// Run every variant of a scenario; write results.json, counter dumps and report.html.
    Run(cmd_run::RunArgs),
    /// List the lessons: number, title and the question each answers.
    Lessons,
    /// Run lesson N (as `run` runs its file) and say where its report is.
    Lesson(cmd_lessons::Args),
    /// The counter interview: a hidden fault's counter dumps, two questions,
    /// then the doctor's answer and the report. `--seed N` repeats one.
    Interview(cmd_interview::Args),
    /// Run every point of a scenario's [sweep] on the local cores (or one
    /// shard of them); write the sweep table, or a scheduler's job file.
    Sweep(cmd_sweep::Args),
    /// Combine the folders of a sweep's shards into the sweep table.
    Merge(cmd_merge::Args),
    /// Render a results.json as report.html (SVG plots, explanation) or Markdown.
    Report(cmd_report::Args),
    /// Check a scenario or topology file without running it.
    Validate(cmd_validate::Args),
    /// RoCEv2 wire format: write sample captures, decode pcap files.
    Wire(cmd_wire::WireArgs),
    /// List RDMA devices, emulated and real, like `ibv_devices`.
    Devices(cmd_devices::Args),
    /// Parse a real tool's output (or `auto`-detect it) and print what was understood.
    Parse(cmd_parse::Args),
    /// Diagnose NIC counter captures and inventory files; findings ranked by severity.
    Doctor(cmd_doctor::Args),
    /// Put two results side by side (perftest vs results.json, two nccl-tests outputs, or two counter dumps).
    Compare(cmd_compare::Args),
    /// Model a real perftest run like for like: infer the setup from its
    /// dumps, write and run the twin scenario, print real beside model.
    Twin(cmd_twin::Args),
    /// perftest-compatible benchmarks: rocelab perftest write_bw [SERVER].
    Perftest(Box<cmd_perftest::PerftestArgs>),
    /// Run an unmodified ibverbs program over the emulation: rocelab exec -- ib_write_bw.
    Exec(cmd_exec::ExecArgs),
    /// Print the settings `exec` uses, for a shell or a CI file: eval "$(rocelab env)".
    Env(cmd_exec::EnvArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Version => {
            println!("rocelab {}", env!("CARGO_PKG_VERSION"));
            ExitCode::SUCCESS
        }
        Command::Run(args) => cmd_run::run(&args),
        Command::Lessons => cmd_lessons::list(),
        Command::Lesson(args) => cmd_lessons::run(args),
        Command::Interview(args) => cmd_interview::run(args),
        Command::Sweep(args) => cmd_sweep::run(&args),
        Command::Merge(args) => cmd_merge::run(&args),
        Command::Report(args) => cmd_report::run(&args),
        Command::Validate(args) => cmd_validate::run(&args),
        Command::Wire(args) => cmd_wire::run(args),
        Command::Devices(args) => cmd_devices::run(&args),
        Command::Parse(args) => cmd_parse::run(args),
        Command::Doctor(args) => cmd_doctor::run(args),
        Command::Compare(args) => cmd_compare::run(args),
        Command::Twin(args) => cmd_twin::run(args),
        Command::Perftest(a) => cmd_perftest::run(*a),
        Command::Exec(a) => cmd_exec::run_exec(a),
        Command::Env(a) => cmd_exec::run_env(&a),
    }
}
