//! `rocelab twin FILES...`: read real dumps of one perftest setup, write
//! its twin (a scenario and a topology a user can edit), run it, and print
//! real and model side by side per size with the model's limit and what a
//! gap means.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use reports::twin::{self, Assumption, TwinSetup};
use sim::hostmodel::PathShape;
use sim::run::simulate;
use sim::scenario;
use sim::topology::Routes;
use sim::workload::perftest::PerftestTest;

/// Arguments of `twin`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Real dumps of one setup: a perftest output (the client's, or both
    /// ends), and where you have them ibv_devinfo, ethtool, ethtool -S,
    /// lspci -vv, mlnx_qos, show_gids; a folder stands for every file in it.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Where to write the twin (twin.toml, topology.toml, results.json,
    /// the model's perftest output, twin.md, twin.json). Default: out/twin.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Print Markdown instead of the table.
    #[arg(long)]
    pub markdown: bool,
    /// The hosts are cabled to each other (no switch between them).
    #[arg(long)]
    pub back_to_back: bool,
    /// The test, when the output does not say (an excerpt without its
    /// title): write_bw, read_bw, send_bw, write_lat, read_lat, send_lat.
    #[arg(long)]
    pub test: Option<String>,
    /// A setting no dump says, as `KEY=VALUE` in the scenario's keys
    /// (`nic.host.pcie_width=4`, `nic.host.model=connectx-7`); written into
    /// the twin as its variant `told`. Repeatable.
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = sim::scenario::Overrides::parse_set)]
    pub set: Vec<(String, toml::Value)>,
    /// Run the real iteration count at every size (slow for -a); by
    /// default large sizes run fewer iterations, enough for the steady
    /// state.
    #[arg(long)]
    pub full: bool,
}

/// Run the subcommand.
pub fn run(args: Args) -> ExitCode {
    match twin_of(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocelab twin: {e}");
            ExitCode::from(2)
        }
    }
}

/// Every file named, folders expanded (sorted), as (name, text).
fn read_inputs(files: &[PathBuf]) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for f in files {
        let mut paths = Vec::new();
        let folder = f.is_dir();
        if folder {
            let entries = std::fs::read_dir(f).map_err(|e| format!("{}: {e}", f.display()))?;
            for e in entries.filter_map(Result::ok) {
                if e.path().is_file() {
                    paths.push(e.path());
                }
            }
            paths.sort();
        } else {
            paths.push(f.clone());
        }
        for p in paths {
            let bytes = std::fs::read(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let name = p.display().to_string();
            let text = String::from_utf8_lossy(&bytes).into_owned();
            // In a folder, a file in no tool's format (notes, a README)
            // is passed over, and said so; a file named is always read.
            if folder && twin::read(&name, &text).is_err() {
                eprintln!("rocelab twin: skipped {name}: not a tool output the twin reads");
                continue;
            }
            out.push((name, text));
        }
    }
    Ok(out)
}

/// Iterations the model runs at the real run's largest size: enough for
/// the steady state (four times the outstanding work requests, and at
/// least 256 MiB moved), never more than the real run; latency tests run
/// 200 round trips (the model has no jitter to average). Duration runs
/// are cut to 20 ms per size. The change is an assumption.
fn shorten(setup: &mut TwinSetup) {
    if let Some(d) = setup.duration_s {
        if d > 0.02 {
            setup.duration_s = Some(0.02);
            setup.assumptions.push(Assumption {
                what: "duration_s",
                value: "0.02 s per size".into(),
                why: format!(
                    "the real run took {d} s per size; the model has no jitter, 20 ms reach its steady state (--full runs the real duration)"
                ),
            });
        }
        return;
    }
    let Some(real) = setup.iters else { return };
    let largest = setup.sizes.iter().copied().max().unwrap_or(2).max(1);
    let want = if setup.test.is_bw() {
        let window = 4 * u64::from(setup.tx_depth.max(1)) * u64::from(setup.qps.max(1));
        window.max((256u64 << 20).div_ceil(largest)).max(100)
    } else {
        200
    };
    if want < real {
        setup.iters = Some(want);
        setup.assumptions.push(Assumption {
            what: "iters",
            value: format!("{want} per size"),
            why: format!(
                "the real run did {real}; the model's steady state needs fewer (--full runs them all)"
            ),
        });
    }
}

fn twin_of(args: &Args) -> Result<(), String> {
    let inputs = read_inputs(&args.files)?;
    let mut setup = twin::infer_texts(&inputs).map_err(|e| e.to_string())?;
    if args.back_to_back {
        setup.cabled_back_to_back();
    }
    if let Some(t) = &args.test {
        let test = PerftestTest::from_name(t).ok_or_else(|| {
            format!("--test {t:?}: expected write_bw, read_bw, send_bw, write_lat, read_lat or send_lat")
        })?;
        let table_bw = setup.real.iter().any(|r| r.bw_avg_bps.is_some());
        if table_bw != test.is_bw() {
            return Err(format!(
                "--test {}: the real table is a {} table",
                test.name(),
                if table_bw { "bandwidth" } else { "latency" }
            ));
        }
        setup.told_test(test);
    }
    for (k, v) in &args.set {
        setup.told_setting(k, &v.to_string());
    }
    let real_setup = setup.clone();
    if !args.full {
        shorten(&mut setup);
    }
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| Path::new("out").join("twin"));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let file = out.join("twin.toml");
    let write =
        |p: &Path, text: &str| std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()));
    let mut text = setup.scenario_toml("twin");
    if !args.set.is_empty() {
        // What the user told, as a variant over the inferred settings.
        text.push_str("\n# Told on the command line (--set).\n[[variant]]\nname = \"told\"\n");
        for (k, v) in &args.set {
            text.push_str(&format!("{k} = {v}\n"));
        }
    }
    write(&file, &text)?;
    write(&out.join(twin::TOPOLOGY_FILE), &setup.topology_toml())?;

    // Run it as `rocelab run` would: what the file says, nothing else.
    let s = scenario::load(&file).map_err(|e| e.to_string())?;
    let v = &s.variants[0];
    let topo = &s.topologies[v.topology];
    let routes = Routes::compute(topo);
    let (result, _) = simulate(topo, &routes, &v.config, &v.flows, &v.run_options())
        .map_err(|e| format!("{}: {e}", file.display()))?;
    let host = v.config.nic.host.as_ref().map(|h| h.resolve());
    let path = path_of(topo, &setup);
    // Compare with the real table as it was (the model's shorter runs
    // are in the assumptions).
    let mut shown = setup.clone();
    shown.iters = real_setup.iters;
    shown.duration_s = real_setup.duration_s;
    let report = twin::compare(&shown, &result.perftest, host.as_ref(), &path);

    let mtu = v.config.nic.mtu.bytes() as u32;
    let recs: Vec<_> = result.perftest.iter().collect();
    for side in reports::simperf::sides(&recs, "sim0", mtu) {
        write(&out.join(format!("model-{}.txt", side.side)), &side.text)?;
    }
    // The model's results, so that `rocelab compare REAL results.json`
    // and `rocelab report` read the twin as any run.
    let doc = scenario::ScenarioResults {
        scenario: s.name.clone(),
        seed: s.seed,
        variants: vec![result.clone()],
    };
    write(&out.join("results.json"), &doc.to_json())?;
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    write(&out.join("twin.json"), &(json.clone() + "\n"))?;
    let md = twin::render_markdown(&report);
    write(&out.join("twin.md"), &md)?;
    if args.json {
        println!("{json}");
    } else if args.markdown {
        print!("{md}");
    } else {
        print!("{}", twin::render_text(&report));
        println!(
            "\nwrote {} (edit and `rocelab run` it), {}, results.json, the model's perftest output and twin.md/twin.json in {}",
            file.display(),
            twin::TOPOLOGY_FILE,
            out.display()
        );
    }
    Ok(())
}

/// The twin's path between client and server, from its topology.
fn path_of(topo: &sim::topology::Topology, setup: &TwinSetup) -> PathShape {
    let link = topo
        .find("client")
        .and_then(|c| topo.node(c).ports.first().copied())
        .map(|l| topo.link(l));
    PathShape {
        rate: link.map_or(roce::time::Rate::from_gbps(setup.link_gbps), |l| l.rate),
        links: if setup.back_to_back { 1 } else { 2 },
        delay: link.map_or(roce::time::Duration::ZERO, |l| l.delay),
        mtu: setup.mtu,
    }
}
