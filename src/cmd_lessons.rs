//! `rocelab lessons` and `rocelab lesson N`: the lesson library of
//! `scenarios/lessons/`, built into the binary so that it works from any
//! directory, without the source checkout.
//!
//! Each lesson is one scenario file `NN-name.toml` with an inline topology
//! (nothing else to find on disk). Its header comment is the narrative and
//! opens with two lines the listing reads:
//!
//! ```text
//! # Lesson N: <title>
//! # Question: <the question the lesson answers>
//! ```
//!
//! `rocelab lesson N` is `rocelab run` of that file (same options, same
//! output folder `out/<scenario name>`, same bytes), writes the lesson
//! file itself beside the results so it can be edited and run again, and
//! says where the report is.

use std::path::Path;
use std::process::ExitCode;

/// One lesson of the library: its file name under `scenarios/lessons/` and
/// the file's text.
pub struct Lesson {
    /// File name, `NN-name.toml`.
    pub file: &'static str,
    /// The scenario file's text.
    pub text: &'static str,
}

macro_rules! lesson {
    ($file:literal) => {
        Lesson {
            file: $file,
            text: include_str!(concat!("../scenarios/lessons/", $file)),
        }
    };
}

/// The library, in lesson order (lesson N is `LESSONS[N - 1]`).
pub const LESSONS: [Lesson; 21] = [
    lesson!("01-incast-lossless-vs-lossy.toml"),
    lesson!("02-pfc-head-of-line-blocking.toml"),
    lesson!("03-congestion-spreading-and-pfc-unfairness.toml"),
    lesson!("04-dcqcn-two-flows-converging.toml"),
    lesson!("05-ecn-thresholds.toml"),
    lesson!("06-pfc-headroom.toml"),
    lesson!("07-slow-receiver-and-pause-storm.toml"),
    lesson!("08-pfc-deadlock-after-link-failure.toml"),
    lesson!("09-dscp-pcp-trust-mismatch.toml"),
    lesson!("10-go-back-n-vs-go-back-0.toml"),
    lesson!("11-why-my-nic-does-not-reach-line-rate.toml"),
    lesson!("12-allreduce-bus-bandwidth-and-its-ceiling.toml"),
    lesson!("13-one-slow-nic-drags-the-job.toml"),
    lesson!("14-moe-alltoall-is-an-incast.toml"),
    lesson!("15-ecmp-collisions-rails-against-plain.toml"),
    lesson!("16-two-jobs-who-pays-for-whose-incast.toml"),
    lesson!("17-ecmp-collisions-against-spraying.toml"),
    lesson!("18-lossy-selective-repeat-vs-lossless-pfc.toml"),
    lesson!("19-hpcc-against-dcqcn.toml"),
    lesson!("20-a-failed-plane.toml"),
    lesson!("21-credits-against-pfc.toml"),
];

impl Lesson {
    /// The text after `# <label>: ` on the first header line that has it.
    fn header(&self, label: &str) -> Option<&'static str> {
        let text: &'static str = self.text;
        text.lines()
            .take_while(|l| l.starts_with('#'))
            .find_map(|l| {
                l.strip_prefix("# ")?
                    .strip_prefix(label)?
                    .strip_prefix(": ")
            })
            .map(str::trim)
    }

    /// The lesson's title (`# Lesson N: <title>`).
    pub fn title(&self) -> &'static str {
        self.header(&format!("Lesson {}", self.number()))
            .unwrap_or(self.file)
    }

    /// The question the lesson answers (`# Question: ...`).
    pub fn question(&self) -> &'static str {
        self.header("Question").unwrap_or("")
    }

    /// The lesson's number, from its file name.
    pub fn number(&self) -> usize {
        self.file
            .split('-')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }
}

/// Arguments of `rocelab lesson`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The lesson's number (`rocelab lessons` lists them).
    pub number: usize,
    /// Output directory (default: out/<scenario name>, as `run`).
    #[arg(long)]
    pub out: Option<std::path::PathBuf>,
    /// Changes to the lesson's scenario, as `run` takes them.
    #[command(flatten)]
    pub changes: crate::cmd_run::Changes,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// `rocelab lessons`: one line per lesson: number, title and question.
pub fn list() -> ExitCode {
    for l in &LESSONS {
        println!("{:>2}  {}: {}", l.number(), l.title(), l.question());
    }
    println!();
    println!("Run one with `rocelab lesson N`; its file explains what to look at.");
    ExitCode::SUCCESS
}

/// `rocelab lesson N`: run lesson N as `rocelab run` runs its file.
pub fn run(args: Args) -> ExitCode {
    let Some(lesson) = LESSONS.iter().find(|l| l.number() == args.number) else {
        eprintln!(
            "error: no lesson {}: expected 1 to {} (`rocelab lessons` lists them)",
            args.number,
            LESSONS.len()
        );
        return ExitCode::FAILURE;
    };
    let run_args = crate::cmd_run::Args {
        file: Path::new("scenarios/lessons").join(lesson.file),
        out: args.out,
        changes: args.changes,
        quiet: args.quiet,
    };
    if !args.quiet {
        println!("lesson {}: {}", lesson.number(), lesson.title());
        println!("question: {}", lesson.question());
    }
    let Some(out) = crate::cmd_run::execute(&run_args, Some(lesson.text)) else {
        return ExitCode::FAILURE;
    };
    let copy = out.join(lesson.file);
    if let Err(e) = std::fs::write(&copy, lesson.text) {
        eprintln!("error: writing {}: {e}", copy.display());
        return ExitCode::FAILURE;
    }
    if !args.quiet {
        println!(
            "report: {} (the lesson's answer is in {}; edit it and `rocelab run` it)",
            out.join("report.html").display(),
            copy.display()
        );
    }
    ExitCode::SUCCESS
}
