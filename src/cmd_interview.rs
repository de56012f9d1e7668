//! `rocelab interview [--seed N] [--fault NAME] [--out DIR] [--answer A,B]
//! [--json]`: the counter interview. A hidden fault scenario of
//! `scenarios/faults/` is run and the user gets nothing but its counter
//! dumps; two multiple-choice questions follow (what the training job
//! feels, what to touch first), then the answer: the fault as it was
//! injected, and what the doctor made of the same dumps.
//!
//! With `--job` the fault is hidden inside a 32-GPU training job
//! instead: one variant of `scenarios/interview/training-job.toml` other
//! than the healthy one, its `[variant.diagnosis]` the written answer.
//! Besides the dumps the user gets the job's step times as its training
//! log prints them, with the same job's step on a healthy day (the run
//! without the fault), in `DIR/job-steps.txt`.
//!
//! # Contract
//!
//! * The fault files and the topology files they name are built into the
//!   binary, as the lessons are: no checkout is needed.
//! * The seed picks the fault (unless `--fault NAME` names one: a file
//!   name of `scenarios/faults/` without `.toml`), is the simulation's
//!   root seed and orders the options, so the same seed (and fault) gives
//!   byte-identical questions, options and dumps. Without `--seed` the
//!   seed comes from the clock and is printed.
//! * The fault runs its first variant only (the broken one; the others are
//!   its fixes). Its capture goes to `DIR/dumps/` as
//!   [`sim::stats::write_capture`] writes it: the counter dumps of every
//!   host and switch port, each host's `mlnx_qos -i` and `ethtool IFACE`,
//!   each switch's `mmuconfig -l` and `ecnconfig -l`, as an operator
//!   collects them beside the counters; all named by node only (nothing
//!   names the scenario or the fault). Each counter dump opens
//!   with `# time_ps:`, so one snapshot is a count over the simulated time.
//! * The answers are written with the faults, never derived from rocelab's
//!   output: each fault file's `[diagnosis]` (`sim::scenario::Diagnosis`,
//!   as its first variant sees it) states its `cause`, what the job
//!   `feels` and what to touch `first`. Question 1's correct option is the
//!   fault's `feels`, question 2's its `first`. The distractors are the
//!   same texts of other faults (in an order the seed draws) whose causes
//!   differ from the fault's and from each other's, and are not of the
//!   same physical-link family ([`LINK_FAMILY`]: their first move is the
//!   same, so one would be the right answer in other words).
//! * After the answers the doctor is scored, not trusted: the interview
//!   shows the doctor's first finding on exactly the files of `DIR/dumps/`
//!   and whether it names the written cause (and at which rank, if not
//!   first). A doctor that finds nothing is reported as such.
//! * Only after the answers does `DIR/answer/` get the run's
//!   `results.json`, `report.html` and `counters/` (as `rocelab run`
//!   writes them), which name the fault.
//! * Answers come from `--answer A,B` or, without it, from two lines of
//!   standard input. `--json` prints one JSON document (seed, dumps,
//!   questions with options, the cause of each option, correct index,
//!   answer and verdict; the fault with its written cause; the doctor's
//!   first finding, `doctor_rank`: the 1-based rank of its first finding
//!   with the written cause's id or null, `doctor_named_cause`: whether
//!   that rank is 1; the report) and nothing else.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use reports::doctor::{self, Diagnosis, Options};
use sim::engine::splitmix;
use sim::scenario::{Overrides, Scenario, ScenarioResults};

/// One fault scenario, built in: a file of `scenarios/faults/` (its
/// first variant), or one variant of the training job's faults.
#[derive(Clone)]
struct Fault {
    /// The folder of the file (`scenarios/faults`).
    dir: &'static str,
    /// File name in `dir`.
    file: &'static str,
    /// The file's text.
    text: &'static str,
    /// The variant to play (`None`: the file's first).
    variant: Option<String>,
}

macro_rules! fault {
    ($file:literal) => {
        Fault {
            dir: "scenarios/faults",
            file: $file,
            text: include_str!(concat!("../scenarios/faults/", $file)),
            variant: None,
        }
    };
}

/// The training job `--job` hides its faults in: every variant but the
/// healthy one is a fault, its `[variant.diagnosis]` the answer.
const JOB: (&str, &str) = (
    "training-job.toml",
    include_str!("../scenarios/interview/training-job.toml"),
);

/// The faults of [`JOB`], one per variant with a cause other than
/// healthy, in file order.
fn job_faults() -> Result<Vec<Fault>, String> {
    let file = Path::new("scenarios/interview").join(JOB.0);
    let scenario = sim::scenario::from_str_with(&file, JOB.1, &Overrides::default())
        .map_err(|e| e.to_string())?;
    Ok(scenario
        .variants
        .iter()
        .filter(|v| v.diagnosis.as_ref().is_some_and(|d| !d.is_healthy()))
        .map(|v| Fault {
            dir: "scenarios/interview",
            file: JOB.0,
            text: JOB.1,
            variant: Some(v.name.clone()),
        })
        .collect())
}

/// The faults an interview draws from: every fault of `scenarios/faults/`.
/// Each runs in well under a second.
const FAULTS: [Fault; 14] = [
    fault!("buffer-too-small.toml"),
    fault!("corruption.toml"),
    fault!("deadlock-bounce.toml"),
    fault!("deadlock-ring.toml"),
    fault!("ecn-off-switch.toml"),
    fault!("headroom-too-small.toml"),
    fault!("link-down.toml"),
    fault!("link-flap.toml"),
    fault!("link-loss.toml"),
    fault!("mtu-mismatch.toml"),
    fault!("pause-storm.toml"),
    fault!("pfc-off-port.toml"),
    fault!("priority-mismatch.toml"),
    fault!("slow-receiver.toml"),
];

/// The topology files the faults name (`topology = "../../topologies/F"`),
/// built in and handed to the loader as inline tables.
const TOPOLOGIES: [(&str, &str); 3] = [
    ("star-4.toml", include_str!("../topologies/star-4.toml")),
    (
        "leaf-spine-4x2-1.toml",
        include_str!("../topologies/leaf-spine-4x2-1.toml"),
    ),
    ("ring-5.toml", include_str!("../topologies/ring-5.toml")),
];

/// Causes of one family: a fault of the physical link (damaged,
/// lossy, flapping or failed). Their first move is the same (that link's
/// error counters, cable and optics), so none stands as a distractor where
/// another is the answer, nor beside another.
const LINK_FAMILY: [&str; 4] = ["corruption", "packet-loss", "link-degraded", "link-down"];

/// Options per question: the correct one and this many less one
/// distractors.
const OPTIONS: usize = 4;

/// The two questions, in order.
const QUESTIONS: [&str; 2] = [
    "What does the training job feel?",
    "What do you touch first?",
];

/// Arguments of `rocelab interview`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seed: picks the fault, seeds its run and orders the options; the
    /// same seed asks the same question (default: from the clock, printed).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    pub seed: Option<u64>,
    /// Play this fault (a file name of scenarios/faults/ without .toml,
    /// e.g. pause-storm; with --job a variant of the training job's
    /// faults, e.g. storm) instead of the one the seed picks.
    #[arg(long, value_name = "NAME")]
    pub fault: Option<String>,
    /// Output directory (default: out/interview-<seed>). Its `dumps/` and
    /// `answer/` are replaced.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The answers, one letter per question (e.g. `A,C`), instead of
    /// reading two lines from standard input.
    #[arg(long, value_name = "A,B")]
    pub answer: Option<String>,
    /// Print one JSON document (questions, options and their causes,
    /// correct index, answers, verdict, the fault's written cause, the
    /// doctor's first finding and whether it names that cause, the report)
    /// and nothing else.
    #[arg(long)]
    pub json: bool,
    /// Hide the fault inside a 32-GPU training job instead (the faults
    /// of scenarios/interview/training-job.toml); its step times are
    /// among the clues.
    #[arg(long)]
    pub job: bool,
}

/// A fault's written answer: its first variant's `[diagnosis]`.
struct Written {
    /// The finding id of the cause.
    cause: String,
    /// Where the cause is, when the file says.
    at: Option<String>,
    /// The cause in one sentence, when the file says.
    summary: Option<String>,
    /// What the job feels: question 1's answer.
    feels: String,
    /// What to touch first: question 2's answer.
    first: String,
}

impl Written {
    /// The answer to question `q` (0: feels, 1: first).
    fn answer(&self, q: usize) -> &str {
        if q == 0 {
            &self.feels
        } else {
            &self.first
        }
    }

    /// The family the cause belongs to: [`LINK_FAMILY`] or its own.
    fn family(&self) -> &str {
        if LINK_FAMILY.contains(&self.cause.as_str()) {
            LINK_FAMILY[0]
        } else {
            &self.cause
        }
    }
}

/// A fault's run: the scenario, its results and the doctor's reading of
/// the dumps it wrote.
struct Run {
    scenario: Scenario,
    /// The fault file's header comment: the answer report's narrative.
    narrative: Vec<String>,
    results: ScenarioResults,
    diagnosis: Diagnosis,
}

/// One question as asked.
struct Question {
    text: &'static str,
    options: Vec<String>,
    /// The cause of each option, in option order.
    causes: Vec<String>,
    correct: usize,
}

/// `rocelab interview`.
pub fn run(args: Args) -> ExitCode {
    match interview(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The fault's name: its variant's, else its file name's stem
/// (`pause-storm`).
fn stem(fault: &Fault) -> &str {
    match &fault.variant {
        Some(v) => v,
        None => fault.file.strip_suffix(".toml").unwrap_or(fault.file),
    }
}

fn interview(args: &Args) -> Result<(), String> {
    let seed = match args.seed {
        Some(s) => s,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|e| format!("reading the clock for a seed: {e}"))?
            .as_secs(),
    };
    // Answers given on the command line are checked before anything runs.
    let given = match &args.answer {
        Some(a) => Some(parse_answers(a)?),
        None => None,
    };
    let faults: Vec<Fault> = if args.job {
        job_faults()?
    } else {
        FAULTS.to_vec()
    };
    let pick = match &args.fault {
        Some(name) => faults.iter().position(|f| stem(f) == name).ok_or_else(|| {
            let names: Vec<&str> = faults.iter().map(stem).collect();
            format!("--fault {name:?}: expected one of {}", names.join(", "))
        })?,
        None => (splitmix(seed) % faults.len() as u64) as usize,
    };
    let written: Vec<Written> = faults.iter().map(written).collect::<Result<_, _>>()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join(format!("interview-{seed}")));
    let dumps = out.join("dumps");
    let answer_dir = out.join("answer");
    for d in [&dumps, &answer_dir] {
        if d.exists() {
            std::fs::remove_dir_all(d).map_err(|e| format!("removing {}: {e}", d.display()))?;
        }
    }
    let main = run_fault(&faults[pick], seed, &dumps)?;
    // With --job, the job's own clue: its step times, as its training
    // log prints them, beside its usual step.
    let job_log = if args.job {
        job_log(&main.results)
    } else {
        Vec::new()
    };
    if !job_log.is_empty() {
        let f = out.join("job-steps.txt");
        std::fs::write(&f, job_log.join("\n") + "\n")
            .map_err(|e| format!("writing {}: {e}", f.display()))?;
    }
    let truth = &written[pick];
    let distractors = draw_distractors(seed, pick, &written)?;
    let questions: Vec<Question> = QUESTIONS
        .iter()
        .enumerate()
        .map(|(q, text)| {
            let all: Vec<&Written> = std::iter::once(truth)
                .chain(distractors.iter().map(|&i| &written[i]))
                .collect();
            let order = shuffle(all.len(), splitmix(seed ^ splitmix(q as u64 + 1)));
            Question {
                text,
                options: order
                    .iter()
                    .map(|&i| all[i].answer(q).to_string())
                    .collect(),
                causes: order.iter().map(|&i| all[i].cause.clone()).collect(),
                correct: order.iter().position(|&i| i == 0).unwrap_or(0),
            }
        })
        .collect();
    let mut names: Vec<String> = std::fs::read_dir(&dumps)
        .map_err(|e| format!("reading {}: {e}", dumps.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    if !args.json {
        println!(
            "rocelab interview, seed {seed} (`rocelab interview --seed {seed}{}` asks it again)",
            args.fault
                .as_deref()
                .map(|f| format!(" --fault {f}"))
                .unwrap_or_default()
        );
        println!();
        println!(
            "A training job on this fabric runs badly. All you get are its counters, in {}:",
            dumps.display()
        );
        for chunk in names.chunks(6) {
            println!("  {}", chunk.join("  "));
        }
        println!(
            "(ethtool -S of every host and switch port, rdma statistic, mlnx_qos -i and ethtool IFACE \
             of every host, mmuconfig -l and ecnconfig -l of every switch; \
             `# time_ps:` is the time the counts cover)"
        );
        if !job_log.is_empty() {
            println!();
            println!(
                "And the job's own log ({}):",
                out.join("job-steps.txt").display()
            );
            for l in &job_log {
                println!("  {l}");
            }
        }
    }
    let mut stdin = std::io::stdin().lock();
    let mut answers = Vec::new();
    for (i, q) in questions.iter().enumerate() {
        if !args.json {
            println!();
            println!("Question {}: {}", i + 1, q.text);
            for (j, o) in q.options.iter().enumerate() {
                println!("  {}) {o}", letter(j));
            }
        }
        let a = match &given {
            Some(g) => g[i],
            None => {
                if !args.json {
                    println!("Your answer ({}-{}):", letter(0), letter(OPTIONS - 1));
                }
                let mut line = String::new();
                let n = stdin
                    .read_line(&mut line)
                    .map_err(|e| format!("reading the answer from standard input: {e}"))?;
                if n == 0 {
                    return Err(format!(
                        "no answer to question {} on standard input: expected a letter {}-{} (or --answer A,B)",
                        i + 1,
                        letter(0),
                        letter(OPTIONS - 1)
                    ));
                }
                parse_letter(line.trim())?
            }
        };
        answers.push(a);
    }
    let scenario = &main.scenario;
    crate::cmd_run::write_outputs(
        &answer_dir,
        main.results.clone(),
        scenario,
        main.narrative.clone(),
    )
    .map_err(|e| format!("writing {}: {e}", answer_dir.display()))?;
    let report = answer_dir.join("report.html");
    let all_right = questions.iter().zip(&answers).all(|(q, a)| q.correct == *a);
    let findings = &main.diagnosis.findings;
    let doctor_first = findings.first();
    // The doctor's rank of the written cause: 1-based, among its findings.
    let rank = findings
        .iter()
        .position(|f| f.id == truth.cause)
        .map(|i| i + 1);
    let variant = main
        .results
        .variants
        .first()
        .map(|v| v.summary.variant.clone());
    if args.json {
        let qs: Vec<serde_json::Value> = questions
            .iter()
            .zip(&answers)
            .map(|(q, a)| {
                serde_json::json!({
                    "question": q.text,
                    "options": q.options,
                    "causes": q.causes,
                    "correct": q.correct,
                    "answer": a,
                    "verdict": verdict(q.correct == *a),
                })
            })
            .collect();
        let doc = serde_json::json!({
            "seed": seed,
            "dumps": dumps.display().to_string(),
            "questions": qs,
            "verdict": verdict(all_right),
            "fault": {
                "name": stem(&faults[pick]),
                "scenario": scenario.name,
                "description": scenario.description,
                "variant": variant,
                "cause": truth.cause,
                "at": truth.at,
                "summary": truth.summary,
            },
            "job_steps": job_log,
            "doctor": doctor_first,
            "doctor_rank": rank,
            "doctor_named_cause": rank == Some(1),
            "report": report.display().to_string(),
        });
        let s = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        println!("{s}");
        return Ok(());
    }
    println!();
    println!("== The answer ==");
    for (i, (q, a)) in questions.iter().zip(&answers).enumerate() {
        if q.correct == *a {
            println!("Question {}: you said {}: correct.", i + 1, letter(*a));
        } else {
            println!(
                "Question {}: you said {}: wrong; the answer is {}.",
                i + 1,
                letter(*a),
                letter(q.correct)
            );
        }
    }
    println!();
    println!(
        "The fault: {}{}",
        scenario.name,
        scenario
            .description
            .as_deref()
            .map(|d| format!(" ({d})"))
            .unwrap_or_default()
    );
    if let Some(s) = &truth.summary {
        println!("What was injected: {s}");
    }
    println!(
        "The cause: {}{}",
        truth.cause,
        truth
            .at
            .as_deref()
            .map(|a| format!(" at {a}"))
            .unwrap_or_default()
    );
    println!();
    let verdict_line = match (doctor_first, rank) {
        (None, _) => "the doctor found nothing on these dumps".to_string(),
        (Some(f), Some(1)) => format!(
            "the doctor's first finding is {} ({}): it names the cause",
            f.id, f.title
        ),
        (Some(f), Some(r)) => format!(
            "the doctor's first finding is {} ({}): not the cause, which it ranks {r}",
            f.id, f.title
        ),
        (Some(f), None) => format!(
            "the doctor's first finding is {} ({}): it does not name the cause",
            f.id, f.title
        ),
    };
    println!(
        "Scoring the doctor (`rocelab doctor {}`): {verdict_line}.",
        dumps.display()
    );
    if !findings.is_empty() {
        println!();
        print!("{}", main.diagnosis.render_text());
    }
    println!();
    println!("report: {}", report.display());
    Ok(())
}

fn verdict(right: bool) -> &'static str {
    if right {
        "correct"
    } else {
        "wrong"
    }
}

/// A training job's step times as its training log shows them, with
/// the same job's step on a healthy day (the run's fault-free
/// baseline): the clue a user of the job has. Empty without a job.
fn job_log(results: &ScenarioResults) -> Vec<String> {
    let Some(job) = results.variants.first().and_then(|v| v.training.first()) else {
        return Vec::new();
    };
    let ms = |ps: u64| format!("{:.3} ms", ps as f64 / 1e9);
    let mut out = vec![format!("training log of job {:?}: time per step", job.job)];
    for s in &job.steps {
        out.push(match s.time_ps {
            Some(t) => format!("step {}: {}", s.step, ms(t)),
            None => format!("step {}: no progress (the step never finished)", s.step),
        });
    }
    if let Some(h) = job.healthy_mean_step_ps {
        out.push(format!("(the same job's step on a healthy day: {})", ms(h)));
    }
    out
}

/// `A`, `B`, ... for option `i`.
fn letter(i: usize) -> char {
    char::from(b'A' + i as u8)
}

/// One answer letter (`A`-`D`, either case) as an option index.
fn parse_letter(s: &str) -> Result<usize, String> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => {
            let i = (c.to_ascii_uppercase() as u8 - b'A') as usize;
            if i < OPTIONS {
                return Ok(i);
            }
        }
        _ => {}
    }
    Err(format!(
        "answer {s:?}: expected one letter {}-{}",
        letter(0),
        letter(OPTIONS - 1)
    ))
}

/// `--answer A,B`: one letter per question.
fn parse_answers(s: &str) -> Result<Vec<usize>, String> {
    let parts: Vec<&str> = s.split(',').map(str::trim).collect();
    if parts.len() != QUESTIONS.len() {
        return Err(format!(
            "--answer {s:?}: expected {} letters separated by a comma, e.g. A,C",
            QUESTIONS.len()
        ));
    }
    parts
        .iter()
        .map(|p| parse_letter(p).map_err(|e| format!("--answer: {e}")))
        .collect()
}

/// A permutation of `0..n` drawn from `seed` (Fisher-Yates over
/// SplitMix64).
fn shuffle(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut state = seed;
    for i in (1..n).rev() {
        state = splitmix(state);
        let j = (state % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// `OPTIONS - 1` other faults, in an order drawn from `seed`, whose causes
/// (and families) differ from the picked fault's and from each other's,
/// and whose texts differ from every other option's: indices into
/// `written`.
fn draw_distractors(seed: u64, pick: usize, written: &[Written]) -> Result<Vec<usize>, String> {
    let mut others: Vec<usize> = (0..written.len()).filter(|&i| i != pick).collect();
    others.sort_by_key(|&i| (splitmix(seed ^ splitmix(0x1000 + i as u64)), i));
    let mut chosen: Vec<usize> = Vec::new();
    for i in others {
        if chosen.len() == OPTIONS - 1 {
            break;
        }
        let w = &written[i];
        let clash = std::iter::once(pick)
            .chain(chosen.iter().copied())
            .any(|j| {
                let g = &written[j];
                g.cause == w.cause
                    || g.family() == w.family()
                    || (0..QUESTIONS.len()).any(|q| g.answer(q) == w.answer(q))
            });
        if !clash {
            chosen.push(i);
        }
    }
    if chosen.len() < OPTIONS - 1 {
        return Err(format!(
            "only {} other cause(s) among the faults: expected {} distractors",
            chosen.len(),
            OPTIONS - 1
        ));
    }
    Ok(chosen)
}

/// The overrides that load `fault` as the interview runs it: its built-in
/// topology (files name one under `topologies/`) and its first variant
/// only.
fn overrides(fault: &Fault) -> Result<Overrides, String> {
    let file = Path::new(fault.dir).join(fault.file);
    let doc: toml::Table = fault
        .text
        .parse()
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let mut set = Vec::new();
    if let Some(toml::Value::String(p)) = doc.get("topology") {
        let name = p.rsplit('/').next().unwrap_or(p);
        let Some((_, text)) = TOPOLOGIES.iter().find(|(n, _)| *n == name) else {
            return Err(format!(
                "{}: topology {p:?} is not built in",
                file.display()
            ));
        };
        let table: toml::Table = text
            .parse()
            .map_err(|e| format!("topologies/{name}: {e}"))?;
        set.push(("topology".to_string(), toml::Value::Table(table)));
    }
    let variant = fault.variant.clone().or_else(|| {
        doc.get("variant")
            .and_then(|v| v.as_array())
            .and_then(|a| a.first())
            .and_then(|v| v.get("name"))
            .and_then(|n| n.as_str())
            .map(str::to_string)
    });
    Ok(Overrides { set, variant })
}

/// The written answer of `fault`: its first variant's `[diagnosis]`, which
/// must state a cause, `feels` and `first`.
fn written(fault: &Fault) -> Result<Written, String> {
    let file = Path::new(fault.dir).join(fault.file);
    let ov = overrides(fault)?;
    let scenario =
        sim::scenario::from_str_with(&file, fault.text, &ov).map_err(|e| e.to_string())?;
    let d = scenario
        .variants
        .first()
        .and_then(|v| v.diagnosis.clone())
        .ok_or_else(|| {
            format!(
                "{}: no [diagnosis]: the interview needs the fault's written cause",
                file.display()
            )
        })?;
    let need = |v: Option<String>, key: &str| {
        v.filter(|s| !s.trim().is_empty()).ok_or_else(|| {
            format!(
                "{}: [diagnosis] has no `{key}`: the interview needs the fault's written answer",
                file.display()
            )
        })
    };
    Ok(Written {
        feels: need(d.feels, "feels")?,
        first: need(d.first, "first")?,
        cause: d.cause,
        at: d.at,
        summary: d.summary,
    })
}

/// Run the first variant of `fault` with root seed `seed`, write its
/// capture into `dir` and diagnose exactly those files.
fn run_fault(fault: &Fault, seed: u64, dir: &Path) -> Result<Run, String> {
    let ov = overrides(fault)?;
    let args = crate::cmd_run::Args {
        file: Path::new(fault.dir).join(fault.file),
        out: None,
        changes: crate::cmd_run::Changes {
            seed: Some(seed),
            set: ov.set,
            variant: ov.variant,
        },
        quiet: true,
    };
    let (scenario, results) = crate::cmd_run::simulate_all(&args, Some(fault.text))
        .ok_or_else(|| format!("running {}", fault.file))?;
    let (Some(v), Some(r)) = (scenario.variants.first(), results.variants.first()) else {
        return Err(format!("{}: no variant ran", fault.file));
    };
    sim::stats::write_capture(dir, r, &v.config, &scenario.topologies[v.topology])
        .map_err(|e| format!("writing {}: {e}", dir.display()))?;
    let loaded = doctor::load(&[dir.to_path_buf()], &mut std::io::empty());
    let diagnosis = doctor::diagnose(&loaded.inputs, &Options::default());
    Ok(Run {
        narrative: reports::render::narrative_of(fault.text),
        scenario,
        results,
        diagnosis,
    })
}
