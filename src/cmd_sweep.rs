//! `rocelab sweep FILE [--out DIR] [--shard I/N] [--jobs N] [--emit slurm|k8s]`:
//! run every point of a scenario's `[sweep]` (see `sim::sweep`).
//!
//! Each point runs as `rocelab run FILE --set K=V ... --seed S` would (the
//! same loader, [`crate::cmd_run::run_variant`] and
//! [`crate::cmd_run::write_outputs`]), on `--jobs` threads (default: every
//! core). A shard writes `DIR/shard-I-of-N/`: `manifest.json` and
//! `points/<point>/` with the run's files and its table rows. A local
//! sweep (no shard) is shard 1 of 1 and also writes the table:
//! `DIR/sweep.csv`, `DIR/sweep.jsonl`, `DIR/sweep.html`, as `rocelab merge`
//! does for shards. `--emit` writes a scheduler's job file instead of
//! running.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use sim::input::read_file;
use sim::scenario::{self, Overrides, ScenarioResults};
use sim::sweep::{self, Manifest, Point, Shard, Sweep};
use sim::topology::Routes;

use crate::cmd_run::{run_variant, write_outputs, Changes};

/// Arguments of `rocelab sweep`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file (TOML) with a `[sweep]` table.
    pub file: PathBuf,
    /// Output directory (default: out/<scenario name>-sweep).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Changes to the scenario, applied at every point before its values.
    #[command(flatten)]
    pub changes: Changes,
    /// Run only shard I of N (1 <= I <= N; point p is shard p % N + 1).
    /// Without it the shard comes from SLURM_ARRAY_TASK_ID (less
    /// SLURM_ARRAY_TASK_MIN) or JOB_COMPLETION_INDEX when they are set.
    #[arg(long, value_name = "I/N", value_parser = Shard::parse)]
    pub shard: Option<Shard>,
    /// Number of shards: for --emit (default: one per point), and the N
    /// of a shard taken from the environment.
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,
    /// Points run at once (default: the number of cores).
    #[arg(long, short, value_name = "N")]
    pub jobs: Option<usize>,
    /// Write a job file for a scheduler into DIR instead of running:
    /// `slurm` (DIR/sweep.sbatch, an array job) or `k8s`
    /// (DIR/sweep-job.yaml, an Indexed Job).
    #[arg(long, value_name = "SCHEDULER")]
    pub emit: Option<Emit>,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Schedulers `--emit` writes for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Emit {
    /// An sbatch array script, one task per shard.
    Slurm,
    /// A Kubernetes Indexed Job manifest, one completion per shard.
    K8s,
}

/// Run the sweep (or emit its job file).
pub fn run(args: &Args) -> ExitCode {
    match sweep_cmd(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn sweep_cmd(args: &Args) -> Result<(), String> {
    let t0 = Instant::now();
    let base = args.changes.overrides()?;
    let file = &args.file;
    let text = read_file(file).map_err(|e| e.to_string())?;
    let sweep = Sweep::from_text(file, &text)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "{}: no [sweep] table: expected one (a single run is `rocelab run`)",
                file.display()
            )
        })?;
    let name = scenario::from_str_with(file, &text, &base)
        .map_err(|e| e.to_string())?
        .name;
    let points = sweep.points();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join(format!("{name}-sweep")));
    if let Some(emit) = args.emit {
        let shards = args.shards.unwrap_or(points.len()).clamp(1, points.len());
        return emit_job(args, emit, &name, &out, shards, points.len());
    }
    let env = |k: &str| std::env::var(k).ok();
    let shard = match args.shard {
        Some(s) => s,
        None => Shard::from_env(&env, args.shards)?.unwrap_or(Shard::ALL),
    };
    let shard_dir = out.join(shard.dir_name());
    // A shard's folder is its own: rows of an earlier run (perhaps of an
    // edited sweep) must not stand in for points this run did not finish.
    match std::fs::remove_dir_all(shard_dir.join("points")) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("clearing {}: {e}", shard_dir.display()))
        }
        _ => {}
    }
    std::fs::create_dir_all(&shard_dir)
        .map_err(|e| format!("creating {}: {e}", shard_dir.display()))?;
    let manifest = Manifest::new(&name, file, &sweep, shard);
    let mtext = serde_json::to_string_pretty(&manifest).map_err(|e| e.to_string())? + "\n";
    sweep::write_atomic(&shard_dir.join("manifest.json"), mtext.as_bytes())
        .map_err(|e| format!("writing {}: {e}", shard_dir.display()))?;
    let mine: Vec<&Point> = points.iter().filter(|p| shard.owns(p.index)).collect();
    let jobs = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, mine.len().max(1));
    if !args.quiet {
        println!(
            "sweep {name}: {} points; shard {}/{}: {} points on {jobs} thread(s) into {}",
            points.len(),
            shard.index,
            shard.count,
            mine.len(),
            shard_dir.display()
        );
    }
    let next = AtomicUsize::new(0);
    let errors: Mutex<Vec<(usize, String)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = mine.get(i) else { break };
                let t = Instant::now();
                let r = run_point(file, &text, &sweep, p, &base, &shard_dir);
                if !args.quiet {
                    let status = if r.is_ok() { "done" } else { "FAILED" };
                    // A closed stdout (`| head`) must not stop the sweep.
                    let _ = writeln!(
                        std::io::stdout().lock(),
                        "  point {} ({}) {status} in {:.2} s",
                        p.index,
                        p.label(),
                        t.elapsed().as_secs_f64()
                    );
                }
                if let Err(e) = r {
                    if let Ok(mut v) = errors.lock() {
                        v.push((p.index, e));
                    }
                }
            });
        }
    });
    let mut errors = errors.into_inner().unwrap_or_default();
    errors.sort();
    if let Some((_, first)) = errors.first() {
        return Err(format!(
            "{} of {} points failed; the first: {first}",
            errors.len(),
            mine.len()
        ));
    }
    if shard != Shard::ALL || args.shard.is_some() {
        if !args.quiet {
            println!(
                "shard {}/{} done in {:.2} s; when every shard is done: rocelab merge {}",
                shard.index,
                shard.count,
                t0.elapsed().as_secs_f64(),
                out.display()
            );
        }
        return Ok(());
    }
    let table = sweep::merge(&[shard_dir]).map_err(|e| e.to_string())?;
    crate::cmd_merge::write_table(&out, &table)?;
    if !args.quiet {
        println!(
            "wrote {} ({} rows), {} and {} in {:.2} s",
            out.join("sweep.csv").display(),
            table.csv.lines().count().saturating_sub(1),
            out.join("sweep.jsonl").display(),
            out.join("sweep.html").display(),
            t0.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// Run one point as a single `rocelab run` of it would, write its files
/// into its folder, then its rows (last, atomically).
fn run_point(
    file: &Path,
    text: &str,
    sweep: &Sweep,
    p: &Point,
    base: &Overrides,
    shard_dir: &Path,
) -> Result<(), String> {
    let scenario = scenario::from_str_with(file, text, &p.overrides(base))
        .map_err(|e| sweep::point_error(sweep, p, text, e).to_string())?;
    let routes: Vec<Routes> = scenario.topologies.iter().map(Routes::compute).collect();
    let mut results = Vec::new();
    for v in &scenario.variants {
        let (r, _) = run_variant(&scenario, &routes, v, false, None).map_err(|e| {
            format!(
                "{}: point {} ({}): variant {:?}: {e}",
                file.display(),
                p.index,
                p.label(),
                v.name
            )
        })?;
        results.push(r);
    }
    let doc = ScenarioResults {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        variants: results,
    };
    let dir = sweep::point_dir(shard_dir, p.index);
    let summaries: Vec<(u64, &sim::results::Summary)> = scenario
        .variants
        .iter()
        .zip(&doc.variants)
        .map(|(v, r)| (v.seed, &r.summary))
        .collect();
    let (header, csv, jsonl) = sweep::rows(&sweep.keys, p, &summaries);
    // Each point's report tells the scenario's story, as a single run's does.
    let narrative = reports::render::narrative_of(text);
    write_outputs(&dir, doc, &scenario, narrative)
        .map_err(|e| format!("writing {}: {e}", dir.display()))?;
    let write = |name: &str, data: String| {
        sweep::write_atomic(&dir.join(name), data.as_bytes())
            .map_err(|e| format!("writing {}: {e}", dir.join(name).display()))
    };
    write("rows.jsonl", jsonl)?;
    write("rows.csv", format!("{header}{csv}"))
}

/// A word for a POSIX shell: single-quoted.
fn sh(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// An absolute form of `p` (job files run elsewhere than here).
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The sweep's command line for a job file, less the shard: rocelab,
/// `sweep`, the file, `--out` and the command line's changes.
fn command_words(args: &Args, out: &Path) -> Vec<String> {
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "rocelab".to_string());
    let mut w = vec![
        exe,
        "sweep".to_string(),
        absolute(&args.file).display().to_string(),
        "--out".to_string(),
        absolute(out).display().to_string(),
        "--quiet".to_string(),
    ];
    for (k, v) in &args.changes.set {
        w.push("--set".to_string());
        w.push(format!("{k}={v}"));
    }
    if let Some(s) = args.changes.seed {
        w.extend(["--seed".to_string(), s.to_string()]);
    }
    if let Some(v) = &args.changes.variant {
        w.extend(["--variant".to_string(), v.clone()]);
    }
    w
}

fn emit_job(
    args: &Args,
    emit: Emit,
    name: &str,
    out: &Path,
    shards: usize,
    points: usize,
) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("creating {}: {e}", out.display()))?;
    let words = command_words(args, out);
    let outs = absolute(out).display().to_string();
    let (path, body) = match emit {
        Emit::Slurm => {
            let cmd: Vec<String> = words.iter().map(|w| sh(w)).collect();
            let job: String = name
                .chars()
                .map(|c| {
                    if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                        c
                    } else {
                        '-'
                    }
                })
                .collect();
            (
                out.join("sweep.sbatch"),
                format!(
                    "#!/bin/bash\n\
                     # rocelab sweep of {name:?}: {points} points in {shards} shards, one per array task.\n\
                     # Submit: sbatch {script}\n\
                     # When every task is done: rocelab merge {outq}\n\
                     # A task that died re-runs alone: sbatch --array=I {script}\n\
                     #SBATCH --job-name=rocelab-{job}\n\
                     #SBATCH --array=1-{shards}\n\
                     #SBATCH --ntasks=1\n\
                     #SBATCH --cpus-per-task=1\n\
                     #SBATCH --output={outs}/slurm-%A_%a.out\n\
                     set -eu\n\
                     exec {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{shards}\" --jobs \"${{SLURM_CPUS_PER_TASK:-1}}\"\n",
                    cmd.join(" "),
                    script = sh(&absolute(&out.join("sweep.sbatch")).display().to_string()),
                    outq = sh(&outs),
                ),
            )
        }
        Emit::K8s => {
            let q = |s: &str| serde_json::Value::String(s.to_string()).to_string();
            let mut cmd: Vec<String> = words.iter().map(|w| q(w)).collect();
            // Inside the image rocelab is on the PATH.
            cmd[0] = q("rocelab");
            cmd.extend([q("--shards"), q(&shards.to_string())]);
            let mut job: String = format!("rocelab-sweep-{name}")
                .to_ascii_lowercase()
                .chars()
                .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
                .collect();
            job.truncate(63);
            let job = job.trim_end_matches('-').to_string();
            (
                out.join("sweep-job.yaml"),
                format!(
                    "# rocelab sweep of {name:?}: {points} points in {shards} shards, one per completion index.\n\
                     # The image must hold rocelab and the scenario at the same path; {outs}\n\
                     # must be a volume all pods share (here the claim rocelab-out).\n\
                     # When every index is done: rocelab merge {outs}\n\
                     apiVersion: batch/v1\n\
                     kind: Job\n\
                     metadata:\n  name: {job}\n\
                     spec:\n  completionMode: Indexed\n  completions: {shards}\n  parallelism: {shards}\n  backoffLimit: {retries}\n\
                     \x20 template:\n    spec:\n      restartPolicy: Never\n      containers:\n\
                     \x20     - name: rocelab\n        image: rocelab:latest\n\
                     \x20       command: [{}]\n\
                     \x20       volumeMounts:\n        - name: out\n          mountPath: {}\n\
                     \x20     volumes:\n      - name: out\n        persistentVolumeClaim:\n          claimName: rocelab-out\n",
                    cmd.join(", "),
                    q(&outs),
                    retries = shards.min(6),
                ),
            )
        }
    };
    std::fs::write(&path, body).map_err(|e| format!("writing {}: {e}", path.display()))?;
    if !args.quiet {
        println!("wrote {}", path.display());
    }
    Ok(())
}
