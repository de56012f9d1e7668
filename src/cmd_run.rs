//! `rocelab run FILE [--out DIR]`: run every variant of a scenario, write
//! `DIR/results.json`, `DIR/counters/<variant>/`, `DIR/report.html` and
//! the captured links' `DIR/pcap/<variant>/<from>-<to>.pcap`,
//! print a table per variant and the wall-clock figures (which never go
//! into the files). A variant that left flows unfinished says so first in
//! its table (how many, of which workloads, why the run stopped), and its
//! FCT percentiles and makespan carry the count of flows they cover;
//! `--fail-on-unfinished` then exits with [`UNFINISHED_EXIT`]. Ctrl-C ends
//! the variant in progress: its results as they stand (`stop_reason`
//! `interrupted`) and those of the variants before it are written, and
//! the command exits with [`INTERRUPTED_EXIT`]; a second Ctrl-C quits at
//! once.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use reports::render::unfinished::{pause_sum_note, Unfinished};
use roce::time::Duration;
use sim::results::{GroupRecord, RunResult, RunStats};
use sim::run::{simulate, RunOptions};
use sim::scenario::{self, Overrides, ScenarioResults};
use sim::topology::Routes;

/// Arguments of `rocelab run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The scenario file (TOML).
    pub file: PathBuf,
    /// Output directory (default: out/<scenario name>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Changes to the scenario.
    #[command(flatten)]
    pub changes: Changes,
    /// Print nothing but errors: no progress bar, no tables.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Arguments of the `rocelab run` command: [`Args`] (shared with the
/// commands that run a scenario for the user) and what only `run` offers.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The run.
    #[command(flatten)]
    pub run: Args,
    /// Exit with status 3 when any variant leaves flows unfinished (its
    /// files are still written): for CI, where a run that finishes nothing
    /// must not pass.
    #[arg(long)]
    pub fail_on_unfinished: bool,
}

/// Exit status of `rocelab run --fail-on-unfinished` when a variant left
/// flows unfinished (1 stays for errors).
pub const UNFINISHED_EXIT: u8 = 3;

/// A run expected to need this much memory or more says so before it
/// starts ([`sim::run::memory_estimate`]).
const LARGE_RUN_BYTES: u64 = 1 << 30;

/// `N MB` or `N.N GB`.
pub(crate) fn megabytes(b: u64) -> String {
    if b >= 1_000_000_000 {
        format!("{:.1} GB", b as f64 / 1e9)
    } else {
        format!("{} MB", b.div_ceil(1_000_000))
    }
}

/// Memory this machine has available now (`MemAvailable`), when the OS
/// tells.
fn available_memory() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = s.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Exit status of `rocelab run` ended by Ctrl-C after writing what it
/// measured (the shell's 128 + SIGINT).
pub const INTERRUPTED_EXIT: u8 = 130;

/// Command-line changes to a scenario, shared by `run` and `validate`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct Changes {
    /// Root seed (as `--set seed=N`; wins over the file and its variants).
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Set any dotted key of the scenario document, as a variant would
    /// (`fabric.pfc.enabled=false`, `nic.cc.algorithm=dcqcn`); the value is
    /// TOML, a bare word is a string. Repeatable; applied over every variant.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Overrides::parse_set)]
    pub set: Vec<(String, toml::Value)>,
    /// Run only this variant.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
}

impl Changes {
    /// The overrides the scenario loader applies, or why the seed cannot
    /// be one.
    pub fn overrides(&self) -> Result<Overrides, String> {
        let mut set = self.set.clone();
        if let Some(seed) = self.seed {
            let v = i64::try_from(seed)
                .map_err(|_| format!("--seed {seed}: expected at most {}", i64::MAX))?;
            set.push(("seed".to_string(), toml::Value::Integer(v)));
        }
        Ok(Overrides {
            set,
            variant: self.variant.clone(),
        })
    }
}

/// Run the scenario; the exit status says whether every variant ran and
/// the files were written, and, with `--fail-on-unfinished`, whether
/// every flow finished ([`UNFINISHED_EXIT`] when not); after Ctrl-C,
/// [`INTERRUPTED_EXIT`].
pub fn run(args: &RunArgs) -> ExitCode {
    let Some((out, unfinished)) = execute_with(&args.run, None) else {
        return ExitCode::FAILURE;
    };
    if crate::progress::interrupted() {
        eprintln!(
            "interrupted: {} holds what was measured until then (stop_reason \"interrupted\"); variants after it did not run",
            out.join("results.json").display()
        );
        return ExitCode::from(INTERRUPTED_EXIT);
    }
    if args.fail_on_unfinished && !unfinished.is_empty() {
        eprintln!(
            "error: --fail-on-unfinished: flows left unfinished: {}",
            unfinished.join("; ")
        );
        return ExitCode::from(UNFINISHED_EXIT);
    }
    ExitCode::SUCCESS
}

/// Run the scenario of `args.file`, read from disk, or, when `text` is
/// given, from that text (errors and relative paths still name
/// `args.file`). Prints the tables unless quiet and any error on stderr;
/// returns the output directory it wrote, or `None` after an error.
pub fn execute(args: &Args, text: Option<&str>) -> Option<PathBuf> {
    execute_with(args, text).map(|(out, _)| out)
}

/// As [`execute`], and what each variant left unfinished: one
/// `variant: N of M flows did not finish (...)` per variant that did.
fn execute_with(args: &Args, text: Option<&str>) -> Option<(PathBuf, Vec<String>)> {
    let t0 = Instant::now();
    let (scenario, doc) = simulate_all(args, text)?;
    let unfinished: Vec<String> = doc
        .variants
        .iter()
        .filter_map(|r| {
            Unfinished::of(r).map(|u| format!("{}: {}", r.summary.variant, u.headline()))
        })
        .collect();
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join(&scenario.name));
    // The scenario file's header comment is the report's narrative.
    let narrative = match text {
        Some(t) => reports::render::narrative_of(t),
        None => std::fs::read_to_string(&args.file)
            .map(|t| reports::render::narrative_of(&t))
            .unwrap_or_default(),
    };
    let tw = Instant::now();
    if let Err(e) = write_outputs(&out, doc, &scenario, narrative) {
        eprintln!("error: writing {}: {e}", out.display());
        return None;
    }
    if args.quiet {
        return Some((out, unfinished));
    }
    let (write, total) = (tw.elapsed().as_secs_f64(), t0.elapsed().as_secs_f64());
    println!(
        "wrote {}, {} and {} in {write:.3} s ({:.1}% of {total:.3} s wall clock)",
        out.join("results.json").display(),
        out.join("report.html").display(),
        out.join("counters").display(),
        100.0 * write / total.max(1e-9)
    );
    Some((out, unfinished))
}

/// Load the scenario (as [`execute`]) and simulate every variant, writing
/// nothing: the scenario and its results, or `None` after an error (on
/// stderr). Prints the tables unless quiet.
pub fn simulate_all(
    args: &Args,
    text: Option<&str>,
) -> Option<(scenario::Scenario, ScenarioResults)> {
    let t0 = Instant::now();
    let overrides = match args.changes.overrides() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return None;
        }
    };
    let loaded = match text {
        Some(text) => scenario::from_str_with(&args.file, text, &overrides),
        None => scenario::load_with(&args.file, &overrides),
    };
    let scenario = match loaded {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: {e}");
            return None;
        }
    };
    let load_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let routes: Vec<Routes> = scenario.topologies.iter().map(Routes::compute).collect();
    let routes_secs = t1.elapsed().as_secs_f64();
    let quiet = args.quiet;
    if !quiet {
        println!(
            "scenario {} (seed {}): {} variant(s); loaded in {:.3} s, routes in {:.3} s",
            scenario.name,
            scenario.seed,
            scenario.variants.len(),
            load_secs,
            routes_secs
        );
    }
    let mut results: Vec<RunResult> = Vec::new();
    for v in &scenario.variants {
        let topo = &scenario.topologies[v.topology];
        let need = sim::run::memory_estimate(topo, &v.flows, v.config.record.flows);
        if need >= LARGE_RUN_BYTES {
            // A very large run: say what it will take before it starts.
            let free = available_memory();
            eprintln!(
                "variant {}: {} flows, expect about {} of memory{}",
                v.name,
                v.flows.len(),
                megabytes(need),
                match free {
                    Some(f) if f < need => format!(
                        "; this machine has {} available: expect swapping or an out-of-memory kill (fewer steps, sizes or `record.flows = false` need less)",
                        megabytes(f)
                    ),
                    Some(f) => format!(" ({} available)", megabytes(f)),
                    None => String::new(),
                }
            );
        }
        match run_variant(&scenario, &routes, v, !quiet, crate::progress::interrupt()) {
            Ok((result, stats)) => {
                if !quiet {
                    print_variant(&result, &stats, load_secs + routes_secs);
                }
                results.push(result);
                if crate::progress::interrupted() {
                    // Ctrl-C: the variants so far are what there is.
                    break;
                }
            }
            Err(e) => {
                eprintln!("error: {}: variant {:?}: {e}", args.file.display(), v.name);
                return None;
            }
        }
    }
    if results.len() > 1 && !quiet {
        print_comparison(&results);
    }
    let doc = ScenarioResults {
        scenario: scenario.name.clone(),
        seed: scenario.seed,
        variants: results,
    };
    Some((scenario, doc))
}

/// Run one variant of a loaded scenario (`routes`: one per topology):
/// what `run` does for each variant, and `sweep` for each point's.
pub(crate) fn run_variant(
    scenario: &scenario::Scenario,
    routes: &[Routes],
    v: &scenario::Variant,
    progress: bool,
    stop: Option<std::sync::Arc<std::sync::atomic::AtomicBool>>,
) -> Result<(RunResult, RunStats), sim::run::SimError> {
    let bar = crate::progress::RunBar::new(progress);
    let opts = RunOptions {
        progress: bar.as_ref().map(crate::progress::RunBar::observer),
        stop: stop.clone(),
        ..v.run_options()
    };
    let topo = &scenario.topologies[v.topology];
    let (mut result, stats) = simulate(topo, &routes[v.topology], &v.config, &v.flows, &opts)?;
    if opts.stopped() {
        // What was measured so far, without the comparison runs.
        return Ok((result, stats));
    }
    if v.fidelity_check && v.fidelity == sim::run::Fidelity::Fluid {
        // The same variant frame by frame: fluid mode's error, stated.
        let packet_opts = RunOptions {
            fidelity: sim::run::Fidelity::Packet,
            stop,
            ..v.run_options()
        };
        let (packet, pst) = simulate(topo, &routes[v.topology], &v.config, &v.flows, &packet_opts)?;
        let check =
            sim::results::FluidCheck::compare(&result, &packet, stats.run_secs, pst.run_secs);
        if let Some(fl) = result.fluid.as_mut() {
            fl.check = Some(check);
        }
    }
    // A variant derived from this one (without its faults, one job
    // alone), run on the same fabric as its file says.
    let run_other = |o: &scenario::Variant| {
        simulate(
            topo,
            &routes[v.topology],
            &o.config,
            &o.flows,
            &o.run_options(),
        )
        .map(|r| r.0)
    };
    let jobs = v.training_jobs();
    if !jobs.is_empty() && !v.config.faults.is_empty() {
        // What the faults cost each step: the same jobs without them.
        let r = run_other(&v.without_faults())?;
        for t in &mut result.training {
            if let Some(h) = r.training.iter().find(|x| x.job == t.job) {
                sim::workload::training::set_healthy(t, h);
            }
        }
    }
    if jobs.len() >= 2 {
        // How much the jobs slow each other: each alone on the same
        // fabric, for its baseline.
        for w in jobs {
            let r = run_other(&v.alone(w))?;
            let job = &v.workloads[w as usize];
            if let (Some(t), Some(a)) = (
                result.training.iter_mut().find(|x| x.job == *job),
                r.training.iter().find(|x| x.job == *job),
            ) {
                sim::workload::training::set_alone(t, a);
            }
        }
    }
    Ok((result, stats))
}

/// Write a run's files into `out`: the counter dumps of each variant under
/// `counters/<variant>/`, its captures under `pcap/<variant>/`, then
/// `results.json`, `report.html` and the report's context (`narrative`:
/// the scenario file's header comment). The dumps print every port;
/// `results.json` holds `ports` only for variants with `record.ports`, and
/// the report is rendered from what `results.json` holds, so `rocelab
/// report` of it gives the same page.
pub fn write_outputs(
    out: &Path,
    mut doc: ScenarioResults,
    scenario: &scenario::Scenario,
    narrative: Vec<String>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    clear_stale(out)?;
    for (v, r) in scenario.variants.iter().zip(&doc.variants) {
        let pfc = &v.config.fabric.pfc;
        let prios: &[u8] = if pfc.enabled { &pfc.priorities } else { &[] };
        sim::stats::write_counter_dumps(&out.join("counters").join(&v.name), r, prios)?;
        if !r.perftest.is_empty() {
            // perftest's own output of each side, per perftest workload.
            let dir = out.join("perftest").join(&v.name);
            std::fs::create_dir_all(&dir)?;
            let mtu = v.config.nic.mtu.bytes() as u32;
            for (name, recs) in reports::simperf::by_workload(&r.perftest) {
                for side in reports::simperf::sides(&recs, PERFTEST_DEVICE, mtu) {
                    std::fs::write(dir.join(format!("{name}-{}.txt", side.side)), side.text)?;
                }
            }
        }
        let nccl = reports::nccl_tests::tables(&r.groups);
        if !nccl.is_empty() {
            // nccl-tests' table of each collective, for `rocelab parse`
            // and `rocelab compare` beside a real nccl-tests output.
            let dir = out.join("nccl-tests").join(&v.name);
            std::fs::create_dir_all(&dir)?;
            for (name, t) in nccl {
                std::fs::write(
                    dir.join(format!("{name}.txt")),
                    reports::nccl_tests::write_table(&t),
                )?;
            }
        }
        if !r.captures.is_empty() {
            let dir = out.join("pcap").join(&v.name);
            std::fs::create_dir_all(&dir)?;
            for c in &r.captures {
                std::fs::write(dir.join(format!("{}.pcap", c.name)), &c.pcap)?;
            }
        }
    }
    for (v, r) in scenario.variants.iter().zip(&mut doc.variants) {
        if !v.config.record.ports {
            r.ports = Vec::new();
        }
    }
    let ctx = reports::render::Context {
        narrative,
        thresholds: scenario
            .variants
            .iter()
            .map(|v| thresholds(&v.config))
            .collect(),
        // Each variant's ground truth, so that the report names the
        // baseline, the fix and the victim as the scenario does.
        diagnoses: scenario
            .variants
            .iter()
            .map(|v| v.diagnosis.clone())
            .collect(),
    };
    std::fs::write(
        out.join("report.html"),
        reports::render::html_with(&doc, &ctx),
    )?;
    let ctx_json = serde_json::to_string_pretty(&ctx).map_err(std::io::Error::other)?;
    std::fs::write(out.join(reports::render::CONTEXT_FILE), ctx_json + "\n")?;
    std::fs::write(out.join("results.json"), doc.to_json())
}

/// Prepare the output folder: remove the counters and captures an earlier
/// run into `out` left (`counters/<v>/`, `pcap/<v>/`: of other variants,
/// as after `--variant X`, and of this run's, rewritten below), so that
/// the folder holds this run only and the doctor never reads an earlier
/// run's counters as this one's. Only folders holding nothing but what
/// rocelab writes there are removed (counter dumps and bundles as `.txt`,
/// `.pcap` files); a folder holding anything else is left alone.
fn clear_stale(out: &Path) -> std::io::Result<()> {
    let ours = |dir: &Path, pcap: bool| -> bool {
        std::fs::read_dir(dir).is_ok_and(|entries| {
            entries.filter_map(Result::ok).all(|e| {
                let n = e.file_name().to_string_lossy().into_owned();
                e.path().is_file()
                    && if pcap {
                        n.ends_with(".pcap")
                    } else {
                        n.ends_with(".txt")
                    }
            })
        })
    };
    for (sub, pcap) in [
        ("counters", false),
        ("pcap", true),
        ("perftest", false),
        ("nccl-tests", false),
    ] {
        let Ok(entries) = std::fs::read_dir(out.join(sub)) else {
            continue;
        };
        for e in entries.filter_map(Result::ok) {
            let path = e.path();
            if path.is_dir() && ours(&path, pcap) {
                std::fs::remove_dir_all(&path)?;
            }
        }
    }
    Ok(())
}

/// The device name the simulator's perftest output shows.
const PERFTEST_DEVICE: &str = "sim0";

fn ps(v: u64) -> String {
    Duration::from_ps(v).to_string()
}

/// A percentile of FCTs, or why there is none.
fn fct(v: Option<u64>) -> String {
    v.map_or_else(|| "none finished".to_string(), ps)
}

fn gbps(bps: f64) -> String {
    format!("{:.2} Gbit/s", bps / 1e9)
}

fn print_variant(r: &RunResult, st: &RunStats, pre_secs: f64) {
    let s = &r.summary;
    println!();
    println!("== variant {} ==", s.variant);
    // Flows left open come first: the numbers below cover only the
    // finished ones.
    let open = Unfinished::of(r);
    if let Some(u) = &open {
        println!("  UNFINISHED         {}", u.headline());
        println!("                     {}", u.why());
    }
    let over = |v: String| match &open {
        Some(u) if s.flows_completed > 0 => format!("{v} ({})", u.over()),
        _ => v,
    };
    let makespan = if s.flows_completed == 0 && s.flows_total > 0 {
        "none finished".to_string()
    } else {
        over(ps(s.makespan_ps))
    };
    let pause_time = match pause_sum_note(r) {
        Some(note) => format!("{} ({note})", ps(s.pause_time_ps)),
        None => ps(s.pause_time_ps),
    };
    let rows: [(&str, String); 14] = [
        (
            "flows completed",
            format!("{} / {}", s.flows_completed, s.flows_total),
        ),
        ("simulated time", ps(s.sim_time_ps)),
        ("makespan", makespan),
        ("goodput", gbps(s.goodput_bps)),
        ("drops", s.drops.to_string()),
        ("pause frames sent", s.pause_frames_sent.to_string()),
        ("pause time (sum)", pause_time),
        ("ECN marked", s.ecn_marked.to_string()),
        ("CNPs sent", s.cnps_sent.to_string()),
        ("retransmitted", s.retransmitted_packets.to_string()),
        ("FCT p50", over(fct(s.fct_p50_ps))),
        ("FCT p99", over(fct(s.fct_p99_ps))),
        ("FCT max", over(fct(s.max_fct_ps))),
        ("stopped by", s.stop_reason.clone()),
    ];
    for (k, v) in rows {
        println!("  {k:<18} {v}");
    }
    if let Some(fl) = &r.fluid {
        println!(
            "  fidelity           fluid (flows as max-min rates; no buffers, PFC, ECN or loss)"
        );
        if let Some(c) = &fl.check {
            println!(
                "  against packets    mean FCT {:+.1} %, p99 FCT {:+.1} %, makespan {:+.1} %; {:.0}x faster ({:.3} s against {:.3} s)",
                c.fct_mean_error * 100.0,
                c.fct_p99_error * 100.0,
                c.makespan_error * 100.0,
                c.speedup,
                c.fluid_wall_s,
                c.packet_wall_s
            );
            println!("                     {}", c.verdict);
        }
    }
    for g in r
        .groups
        .iter()
        .filter(|g| g.kind != "perftest" && g.kind != "training")
    {
        println!("  step time {}: {}", g.name, step_time(g));
    }
    for job in &r.training {
        // A training job: each step's time as compute plus what the
        // overlap rule exposed, and the collective exposed longest.
        println!("  training {}:", job.job);
        for st in &job.steps {
            let time = st.time_ps.map_or("did not finish".to_string(), ps);
            let critical = match st
                .collectives
                .iter()
                .find(|c| Some(&c.label) == st.critical.as_ref())
            {
                Some(c) => {
                    let at = match (&c.limit, &c.bottleneck) {
                        (Some(l), Some(b)) => format!(", {l} at {b}"),
                        (Some(l), None) => format!(", {l}"),
                        _ => String::new(),
                    };
                    format!("; most exposed: {} ({}{at})", c.label, ps(c.exposed_ps))
                }
                None => String::new(),
            };
            let cost = match st.fault_cost_ps {
                Some(c) if c >= 0 => format!("; the faults cost it {}", ps(c as u64)),
                Some(c) => format!("; {} faster than without the faults", ps(c.unsigned_abs())),
                None => String::new(),
            };
            let bubble = if st.bubble_ps > 0 {
                format!(" + pipeline bubble {}", ps(st.bubble_ps))
            } else {
                String::new()
            };
            println!(
                "    step {}: {time} = compute {} + exposed {}{bubble}{critical}{cost}",
                st.step,
                ps(st.compute_ps),
                ps(st.exposed_ps)
            );
        }
        if let Some(m) = job.mean_step_ps {
            match job.healthy_mean_step_ps {
                Some(h) => println!("    mean step {} ({} without the faults)", ps(m), ps(h)),
                None => println!("    mean step {}", ps(m)),
            }
        }
    }
    for (name, t) in reports::nccl_tests::tables(&r.groups) {
        // nccl-tests' table for the collective, as its program prints it
        // (the file under nccl-tests/ has the same lines).
        println!("  nccl-tests {name} ({}):", t.program);
        for l in reports::nccl_tests::write_table(&t).lines() {
            println!("  {l}");
        }
    }
    for (name, recs) in reports::simperf::by_workload(&r.perftest) {
        // The client's table, as perftest prints it.
        println!("  perftest {name} ({}, client):", recs[0].test.name());
        if let Some(client) = reports::simperf::sides(&recs, PERFTEST_DEVICE, 0).first() {
            let table = client.text.lines().skip_while(|l| !l.contains("#bytes"));
            for l in table {
                println!("  {l}");
            }
        }
    }
    for d in &r.deadlocks {
        let members: Vec<String> = d
            .members
            .iter()
            .map(|m| format!("{} port {} (to {})", m.node, m.port, m.peer))
            .collect();
        println!(
            "  PFC DEADLOCK       priority {}, formed at {}, found at {}: {}",
            d.priority,
            ps(d.formed_ps),
            ps(d.detected_ps),
            members.join(", ")
        );
    }
    let storms = r
        .pfcwd_events
        .iter()
        .filter(|e| e.event == "storm_detected")
        .count();
    if storms > 0 {
        println!(
            "  PFC watchdog       {storms} storm(s) detected, {} restored (pfcwd_events)",
            r.pfcwd_events.len() - storms
        );
    }
    for c in &r.captures {
        let cut = if c.frames_not_written > 0 {
            format!(
                " ({} more past max_frames not written)",
                c.frames_not_written
            )
        } else {
            String::new()
        };
        println!("  pcap {}: {} frames{cut}", c.name, c.frames);
    }
    let mem = st
        .peak_rss_bytes
        .map_or("n/a".to_string(), |b| format!("{:.1} MB", b as f64 / 1e6));
    println!(
        "  wall clock: setup {:.3} s (load + routes {:.3} s, model {:.3} s), run {:.3} s, \
         {:.2} M events/s, {:.4} simulated s per wall s, peak memory {}",
        pre_secs + st.setup_secs,
        pre_secs,
        st.setup_secs,
        st.run_secs,
        st.events_per_sec / 1e6,
        st.sim_secs_per_wall_sec,
        mem
    );
}

/// A group's step time, with its bandwidth bound when it has one, or why
/// there is none.
fn step_time(g: &GroupRecord) -> String {
    let Some(step) = g.step_time_ps else {
        return format!(
            "incomplete ({} of {} flows completed)",
            g.flows_completed, g.flows
        );
    };
    match g.ideal_ps {
        Some(ideal) if ideal > 0 => format!(
            "{} (ideal {}, x{:.3}; {} flows)",
            ps(step),
            ps(ideal),
            step as f64 / ideal as f64,
            g.flows
        ),
        _ => format!("{} ({} flows)", ps(step), g.flows),
    }
}

/// A side-by-side FCT cell: marked `*` when it covers finished flows
/// only (some did not finish).
fn partial(r: &RunResult, v: String) -> String {
    let s = &r.summary;
    if s.flows_completed > 0 && s.flows_completed < s.flows_total {
        format!("{v}*")
    } else {
        v
    }
}

/// A row of the side-by-side table: its name and how to show one variant.
type Row = (&'static str, fn(&RunResult) -> String);

fn print_comparison(results: &[RunResult]) {
    println!();
    print!("{:<18}", "side by side");
    for r in results {
        print!(" {:>16}", r.summary.variant);
    }
    println!();
    let rows: [Row; 8] = [
        ("flows completed", |r| {
            format!("{}/{}", r.summary.flows_completed, r.summary.flows_total)
        }),
        ("drops", |r| r.summary.drops.to_string()),
        ("pause frames sent", |r| {
            r.summary.pause_frames_sent.to_string()
        }),
        ("retransmitted", |r| {
            r.summary.retransmitted_packets.to_string()
        }),
        ("goodput", |r| gbps(r.summary.goodput_bps)),
        ("FCT p50", |r| partial(r, fct(r.summary.fct_p50_ps))),
        ("FCT p99", |r| partial(r, fct(r.summary.fct_p99_ps))),
        ("FCT max", |r| partial(r, fct(r.summary.max_fct_ps))),
    ];
    for (name, f) in rows {
        print!("{name:<18}");
        for r in results {
            print!(" {:>16}", f(r));
        }
        println!();
    }
    let open: Vec<String> = results
        .iter()
        .filter(|r| r.summary.flows_completed > 0)
        .filter_map(|r| Unfinished::of(r).map(|u| format!("{}: {}", r.summary.variant, u.over())))
        .collect();
    if !open.is_empty() {
        println!(
            "* over finished flows only ({}); the rest did not finish",
            open.join(", ")
        );
    }
}

/// The queue thresholds of one variant that its report draws: ECN's Kmin
/// and Kmax per marking priority, and PFC's static XOFF and XON per
/// lossless priority (a dynamic threshold has no fixed byte value).
fn thresholds(c: &sim::config::SimConfig) -> Vec<reports::render::Threshold> {
    use reports::render::Threshold;
    let mut out = Vec::new();
    for e in &c.fabric.ecn {
        for (name, size) in [("Kmin", e.kmin), ("Kmax", e.kmax)] {
            out.push(Threshold {
                name: name.into(),
                bytes: size.bytes(),
                priority: Some(e.priority),
            });
        }
    }
    let pfc = &c.fabric.pfc;
    if let (true, sim::config::PfcThreshold::Static { xoff, xon }) = (pfc.enabled, &pfc.threshold) {
        for &p in &pfc.priorities {
            for (name, size) in [("XOFF", xoff), ("XON", xon)] {
                out.push(Threshold {
                    name: name.into(),
                    bytes: size.bytes(),
                    priority: Some(p),
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::clear_stale;

    #[test]
    fn an_earlier_runs_counters_and_captures_are_cleared_and_other_files_kept() {
        let out = std::env::temp_dir().join(format!("rocelab-clear-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let old = out.join("counters/other-variant");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::write(old.join("nics.txt"), "==> h0.ethtool.txt <==\n").unwrap();
        let pcap = out.join("pcap/other-variant");
        std::fs::create_dir_all(&pcap).unwrap();
        std::fs::write(pcap.join("h0.pcap"), [0u8; 4]).unwrap();
        // A folder holding something rocelab does not write stays.
        let mine = out.join("counters/notes");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(mine.join("notes.md"), "mine").unwrap();
        clear_stale(&out).unwrap();
        assert!(!old.exists() && !pcap.exists());
        assert!(mine.join("notes.md").exists());
        let _ = std::fs::remove_dir_all(&out);
    }
}
