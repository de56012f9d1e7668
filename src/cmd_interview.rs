//! `rocelab interview [--seed N] [--out DIR] [--answer A,B] [--json]`: the
//! counter interview. A hidden fault scenario of `scenarios/faults/` is run
//! and the user gets nothing but its counter dumps; two multiple-choice
//! questions follow (what the training job feels, what to touch first),
//! then the answer with the doctor's reasoning and the run's report.
//!
//! # Contract
//!
//! * The fault files and the topology files they name are built into the
//!   binary, as the lessons are: no checkout is needed.
//! * The seed picks the fault, is the simulation's root seed and orders the
//!   options, so the same seed gives byte-identical questions, options and
//!   dumps. Without `--seed` the seed comes from the clock and is printed.
//! * The fault runs its first variant only (the broken one; the others are
//!   its fixes). Its dumps go to `DIR/dumps/`, one file per host and
//!   switch port, named by node only: `H.ethtool.txt` (`ethtool -S`),
//!   `H.rdma.txt` (`rdma statistic`), `H.mlnx_qos.txt` (`mlnx_qos -i`),
//!   `SW-pN.ethtool.txt`, `SW.pfcwd.txt` where the watchdog ran. Each
//!   counter dump opens with `# time_ps:`, so one snapshot is a count over
//!   the simulated time.
//! * The correct options are the doctor's first finding on exactly the
//!   files of `DIR/dumps/` (its `impact` for question 1, its `check_first`
//!   for question 2). The distractors are the first findings of other
//!   faults (run the same way with the same seed, in an order the seed
//!   draws) whose symptom differs from the correct one and from each
//!   other's; no answer text is written by hand here.
//! * Only after the answers does `DIR/answer/` get the run's
//!   `results.json`, `report.html` and `counters/` (as `rocelab run`
//!   writes them), which name the fault.
//! * Answers come from `--answer A,B` or, without it, from two lines of
//!   standard input. `--json` prints one JSON document (seed, dumps,
//!   questions with options, correct index, answer and verdict, the
//!   fault, the doctor's first finding, the report) and nothing else.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use reports::doctor::{self, Diagnosis, Finding, Options};
use sim::config::SimConfig;
use sim::engine::splitmix;
use sim::scenario::{Scenario, ScenarioResults};

/// One fault scenario of `scenarios/faults/`, built in.
struct Fault {
    /// File name under `scenarios/faults/`.
    file: &'static str,
    /// The file's text.
    text: &'static str,
}

macro_rules! fault {
    ($file:literal) => {
        Fault {
            file: $file,
            text: include_str!(concat!("../scenarios/faults/", $file)),
        }
    };
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

/// Options per question: the correct one and this many less one
/// distractors.
const OPTIONS: usize = 4;

/// The field of a finding that answers a question.
type Answer = fn(&Finding) -> &str;

/// The two questions, in order, with the finding field that answers each.
const QUESTIONS: [(&str, Answer); 2] = [
    ("What does the training job feel?", |f| &f.impact),
    ("What do you touch first?", |f| &f.check_first),
];

/// Arguments of `rocelab interview`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seed: picks the fault, seeds its run and orders the options; the
    /// same seed asks the same question (default: from the clock, printed).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(..=i64::MAX as u64))]
    pub seed: Option<u64>,
    /// Output directory (default: out/interview-<seed>). Its `dumps/` and
    /// `answer/` are replaced.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The answers, one letter per question (e.g. `A,C`), instead of
    /// reading two lines from standard input.
    #[arg(long, value_name = "A,B")]
    pub answer: Option<String>,
    /// Print one JSON document (questions, options, correct index,
    /// answers, verdict, the doctor's first finding, the report) and
    /// nothing else.
    #[arg(long)]
    pub json: bool,
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
    let pick = (splitmix(seed) % FAULTS.len() as u64) as usize;
    let main = run_fault(&FAULTS[pick], seed, &dumps)?;
    let Some(first) = main.diagnosis.findings.first() else {
        return Err(format!(
            "the doctor found nothing in {} (seed {seed}): no question to ask",
            dumps.display()
        ));
    };
    let distractors = draw_distractors(seed, pick, first)?;
    let questions: Vec<Question> = QUESTIONS
        .iter()
        .enumerate()
        .map(|(q, (text, field))| {
            let mut options: Vec<String> = vec![field(first).to_string()];
            options.extend(distractors.iter().map(|f| field(f).to_string()));
            let order = shuffle(options.len(), splitmix(seed ^ splitmix(q as u64 + 1)));
            Question {
                text,
                options: order.iter().map(|&i| options[i].clone()).collect(),
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
            "rocelab interview, seed {seed} (`rocelab interview --seed {seed}` asks it again)"
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
            "(ethtool -S of every host and switch port, rdma statistic and mlnx_qos -i of every host; \
             `# time_ps:` is the time the counts cover)"
        );
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
    if args.json {
        let qs: Vec<serde_json::Value> = questions
            .iter()
            .zip(&answers)
            .map(|(q, a)| {
                serde_json::json!({
                    "question": q.text,
                    "options": q.options,
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
                "scenario": scenario.name,
                "description": scenario.description,
                "variant": main.results.variants.first().map(|v| v.summary.variant.clone()),
            },
            "doctor": first,
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
    println!(
        "The doctor's reasoning (`rocelab doctor {}`; the answers are its first finding):",
        dumps.display()
    );
    println!();
    print!("{}", main.diagnosis.render_text());
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

/// The first findings of other faults, in an order drawn from `seed`, whose
/// symptoms differ from `correct`'s and from each other's: `OPTIONS - 1`
/// of them.
fn draw_distractors(seed: u64, pick: usize, correct: &Finding) -> Result<Vec<Finding>, String> {
    let mut others: Vec<usize> = (0..FAULTS.len()).filter(|&i| i != pick).collect();
    others.sort_by_key(|&i| (splitmix(seed ^ splitmix(0x1000 + i as u64)), i));
    let tmp = std::env::temp_dir().join(format!("rocelab-interview-{}", std::process::id()));
    let mut found: Vec<Finding> = Vec::new();
    let mut result = Ok(());
    for i in others {
        if found.len() == OPTIONS - 1 {
            break;
        }
        let dir = tmp.join(i.to_string());
        match run_fault(&FAULTS[i], seed, &dir) {
            Ok(r) => {
                if let Some(f) = r.diagnosis.findings.into_iter().next() {
                    // A distractor of the same symptom would be a second
                    // right answer; one with the same text, no choice.
                    let seen = std::iter::once(correct).chain(&found).any(|g| {
                        g.symptom == f.symptom
                            || QUESTIONS.iter().any(|(_, field)| field(g) == field(&f))
                    });
                    if !seen {
                        found.push(f);
                    }
                }
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    result?;
    if found.len() < OPTIONS - 1 {
        return Err(format!(
            "only {} other symptom(s) among the faults: expected {} distractors",
            found.len(),
            OPTIONS - 1
        ));
    }
    Ok(found)
}

/// Run the first variant of `fault` with root seed `seed`, write its dumps
/// into `dir` and diagnose exactly those files.
fn run_fault(fault: &Fault, seed: u64, dir: &Path) -> Result<Run, String> {
    let file = Path::new("scenarios/faults").join(fault.file);
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
    let first_variant = doc
        .get("variant")
        .and_then(|v| v.as_array())
        .and_then(|a| a.first())
        .and_then(|v| v.get("name"))
        .and_then(|n| n.as_str())
        .map(str::to_string);
    let args = crate::cmd_run::Args {
        file,
        out: None,
        changes: crate::cmd_run::Changes {
            seed: Some(seed),
            set,
            variant: first_variant,
        },
        quiet: true,
    };
    let (scenario, results) = crate::cmd_run::simulate_all(&args, Some(fault.text))
        .ok_or_else(|| format!("running {}", fault.file))?;
    let (Some(v), Some(r)) = (scenario.variants.first(), results.variants.first()) else {
        return Err(format!("{}: no variant ran", fault.file));
    };
    let pfc = &v.config.fabric.pfc;
    let prios: &[u8] = if pfc.enabled { &pfc.priorities } else { &[] };
    let write = || -> std::io::Result<()> {
        sim::stats::write_counter_dumps(dir, r, prios)?;
        let qos = mlnx_qos(&v.config);
        for n in &r.nics {
            std::fs::write(dir.join(format!("{}.mlnx_qos.txt", n.node)), &qos)?;
        }
        Ok(())
    };
    write().map_err(|e| format!("writing {}: {e}", dir.display()))?;
    let loaded = doctor::load(&[dir.to_path_buf()], &mut std::io::empty());
    let diagnosis = doctor::diagnose(&loaded.inputs, &Options::default());
    Ok(Run {
        narrative: reports::render::narrative_of(fault.text),
        scenario,
        results,
        diagnosis,
    })
}

/// What `mlnx_qos -i` prints for a host NIC of a run with `config`: trust
/// DSCP with the default DSCP-to-priority map (the NICs mark DSCP), PFC
/// on the fabric's lossless priorities, one receive buffer of
/// `nic.rx_buffer` for every priority, one traffic class per priority.
fn mlnx_qos(config: &SimConfig) -> String {
    use std::fmt::Write as _;
    let pfc = &config.fabric.pfc;
    let lossless = |p: u8| pfc.enabled && pfc.priorities.contains(&p);
    let mut s = String::from("DCBX mode: OS controlled\nPriority trust state: dscp\n");
    s.push_str("dscp2prio mapping:\n");
    for p in 0u8..8 {
        let dscps: Vec<String> = (0u8..8)
            .rev()
            .map(|d| format!("{:02},", p * 8 + d))
            .collect();
        let _ = writeln!(s, "\tprio:{p} dscp:{}", dscps.concat());
    }
    let _ = writeln!(
        s,
        "Receive buffer size (bytes): {},0,0,0,0,0,0,0,",
        config.nic.rx_buffer.bytes()
    );
    s.push_str("PFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n\tenabled  ");
    for p in 0u8..8 {
        let _ = write!(s, "   {}", u8::from(lossless(p)));
    }
    s.push_str("\n\tbuffer      0   0   0   0   0   0   0   0\n");
    for p in 0u8..8 {
        let _ = writeln!(
            s,
            "tc: {p} ratelimit: unlimited, tsa: vendor\n\t priority:  {p}"
        );
    }
    s
}
