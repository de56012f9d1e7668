//! The counter doctor: reads captures (ethtool -S, rdma statistic, topo,
//! devinfo/ibstat, mlnx_qos, perftest, NCCL logs), turns counters into
//! deltas, and ranks findings from the diagnosis playbook.
//!
//! # Inputs and snapshots
//!
//! Counter captures are grouped by **source** (`sources.rs`): one host NIC
//! port or switch port, named by what the text says (`# host: NAME`, an
//! `ethtool -S IFACE` command line, a switch table's port), else by the
//! file name without snapshot words, else by its folder; snapshots of
//! different folders never pair, lone snapshots of one folder pair by
//! content when unambiguous. Each source's view ([`CounterView`]) knows
//! its entity ([`Entity`]), its time base and its provenance (files, how
//! they paired). All snapshots of one source form its series; the first
//! and last make the delta. With one snapshot the counters are totals
//! since boot (or since the simulation started) and the report says so;
//! severities are then capped at `warning`, and no total is ranked as a
//! live fault, because a total cannot say whether the problem is still
//! happening. Simulated counters
//! are the exception: they start at zero at time zero, so a single
//! snapshot with `# time_ps:` metadata, or any single snapshot when the
//! inputs include a `results.json` of one run (its `sim_time_ps`), is a
//! delta over the simulated time.
//!
//! When every snapshot of a source carries time metadata they are put in
//! time order; otherwise, when more counters fell than rose between the
//! first and the last, the order is taken as reversed (counters only grow)
//! and the report says so.
//!
//! The interval is, in order: `interval` per gap between consecutive
//! snapshots from [`Options`], else the difference of the first and last
//! snapshot's `time`/`time_ps` metadata, else unknown (pause time cannot
//! then be judged as a fraction of wall time). Where `interval` cannot be
//! applied (one snapshot, simulated counters, a run's delta) a
//! `counter-note` finding says which sources and why.
//!
//! # Findings
//!
//! Each [`Finding`] has a severity, the playbook symptom it belongs to
//! ([`Symptom`]), the numbers it rests on, what a training job feels, what
//! to check first and why. Findings are sorted by severity, then by the
//! playbook's triage order (drops on a lossless priority, storm,
//! retransmissions, pause time, ECN/CNP balance, link and MTU sanity,
//! GPUDirect), then by source. A healthy capture yields only `info`.
//!
//! # Layout
//!
//! Dependencies point one way, down: this file (`diagnose`, the report)
//! -> `sources.rs` (which snapshots are one source), `cause.rs` (one
//! finding per root cause) and `checks.rs` (the
//! playbook checks; they also run those of `platform.rs`, `fabric.rs`,
//! `hosts.rs` and `switchcfg.rs`) -> `context.rs` (what the checks of one scope see) ->
//! `counters.rs` (snapshots and counter views: entity, time base,
//! measured or estimated pause share), `sim.rs` (a
//! `results.json`'s facts), `finding.rs` (findings, severities,
//! symptoms), `names.rs` (source, scope, host and node names) and
//! `wording.rs` (how evidence states numbers). `inputs.rs` turns paths
//! into inputs.

mod cause;
mod checks;
mod context;
mod counters;
mod fabric;
mod finding;
mod hosts;
pub mod inputs;
mod names;
mod platform;
pub mod sim;
mod sources;
mod switchcfg;
mod wording;

use std::collections::BTreeMap;

use roce::time::Duration;
use serde::Serialize;

use crate::realnic::{self, Kind, Parsed};
use context::Context;
use counters::{Snap, TimeBase};

pub use counters::{CounterView, Entity};
pub use finding::{Finding, Severity, Symptom};
pub use inputs::{load, Input, Loaded, Skipped};
pub use names::{scope_from_path, source_from_file_name};

/// Doctor options.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Options {
    /// Time between consecutive snapshots (overrides file metadata).
    pub interval: Option<Duration>,
}

/// How the counters of one source were read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SourceSummary {
    /// Source name (`""` for the unnamed source).
    pub source: String,
    /// `ethtool` or `rdma`.
    pub kind: Kind,
    /// Number of snapshots.
    pub snapshots: usize,
    /// Delta interval in picoseconds, when known.
    pub interval_ps: Option<u64>,
    /// True when the view is since-boot totals (one snapshot).
    pub since_boot: bool,
    /// True when the one snapshot is a measured delta over one run
    /// (perftest's end-of-run counter block).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub run_delta: bool,
    /// What the source is a port of (`host-port`, `switch-port`).
    pub entity: Entity,
    /// The input files its snapshots came from.
    pub files: Vec<String>,
    /// How several snapshots were paired (`file name`, `folder`, `one
    /// file`, `content: ...`), when there are several.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub paired_by: Option<String>,
}

/// The doctor's report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Diagnosis {
    /// Findings, most important first: one per root cause. First in the
    /// JSON too, so that a reader of `--json` meets it before the inputs.
    pub findings: Vec<Finding>,
    /// The inputs, with their detected kinds.
    pub inputs: Vec<(String, Kind)>,
    /// How each counter source was read.
    pub sources: Vec<SourceSummary>,
    /// Paths given that were not used, and why (filled by the caller that
    /// read the paths, see [`load`]).
    pub skipped: Vec<Skipped>,
}

impl Diagnosis {
    /// The most severe finding's severity (`Info` when there is none).
    pub fn worst(&self) -> Severity {
        self.findings
            .iter()
            .map(|f| f.severity)
            .max()
            .unwrap_or(Severity::Info)
    }

    /// Plain-text rendering for people: the inputs in one paragraph
    /// (counted by kind), the skipped paths, then the findings.
    pub fn render_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let mut kinds: BTreeMap<Kind, usize> = BTreeMap::new();
        for (_, k) in &self.inputs {
            *kinds.entry(*k).or_default() += 1;
        }
        let kinds: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} {k}")).collect();
        let _ = writeln!(
            s,
            "rocelab doctor: {} input(s): {}",
            self.inputs.len(),
            kinds.join(", ")
        );
        if self.inputs.len() <= 12 {
            for (name, kind) in &self.inputs {
                let _ = writeln!(s, "  {name}: {kind}");
            }
        }
        for k in &self.skipped {
            let _ = writeln!(s, "  skipped {}: {}", k.path, k.reason);
        }
        // Counter sources, grouped by how they were read.
        let mut how: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for src in &self.sources {
            let name = if src.source.is_empty() {
                "(unnamed source)".to_string()
            } else {
                src.source.clone()
            };
            let h = if src.since_boot {
                "1 snapshot: totals since boot, not a rate".to_string()
            } else {
                match src.interval_ps {
                    Some(ps) if src.run_delta => {
                        format!("a run's delta over {}", Duration::from_ps(ps))
                    }
                    // One snapshot that is not since boot: simulated
                    // counters, which start at zero at time zero.
                    Some(ps) if src.snapshots == 1 => format!(
                        "counts over {} of simulated time from zero",
                        Duration::from_ps(ps)
                    ),
                    Some(ps) => format!(
                        "{} snapshots: deltas over {}",
                        src.snapshots,
                        Duration::from_ps(ps)
                    ),
                    None => format!(
                        "{} snapshots: deltas over an unknown interval",
                        src.snapshots
                    ),
                }
            };
            let what = match src.entity {
                Entity::HostPort => String::new(),
                e => format!(" {}s", e.describe()),
            };
            how.entry(format!("{}{what} {h}", src.kind))
                .or_default()
                .push(name);
        }
        for src in &self.sources {
            if let Some(p) = src
                .paired_by
                .as_deref()
                .filter(|p| p.starts_with("content"))
            {
                let _ = writeln!(s, "  paired {}: {p}", src.source);
            }
        }
        for (h, names) in &how {
            let _ = writeln!(s, "  counters ({h}): {}", list(names, 8));
        }
        let _ = writeln!(s);
        if self.findings.is_empty() {
            let _ = writeln!(s, "No findings.");
        }
        for (i, f) in self.findings.iter().enumerate() {
            let num = f.playbook.map(|n| format!(" #{n}")).unwrap_or_default();
            let scope = f
                .scope
                .as_deref()
                .map(|s| format!("{s}: "))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                "{}. [{}] {}{} ({scope}{}): {}",
                i + 1,
                f.severity.to_string().to_uppercase(),
                f.id,
                num,
                f.subject,
                f.title
            );
            if f.affects.len() > 1 {
                let _ = writeln!(
                    s,
                    "     affects ({}): {}",
                    f.affects.len(),
                    list(&f.affects, 12)
                );
            }
            for e in &f.evidence {
                let _ = writeln!(s, "     evidence: {e}");
            }
            if !f.impact.is_empty() {
                let _ = writeln!(s, "     the job feels: {}", f.impact);
            }
            if !f.check_first.is_empty() {
                let _ = writeln!(s, "     check first: {}", f.check_first);
            }
            if !f.why.is_empty() {
                let _ = writeln!(s, "     why: {}", f.why);
            }
        }
        s
    }
}

/// The finding that says where `--interval` could not be applied, and why.
fn interval_note(d: Duration, unapplied: &[String]) -> Finding {
    let mut f = Finding::new(Severity::Info, Symptom::CounterNote, "--interval");
    f.title = format!(
        "--interval {d} was not applied to {} source(s): it is the time between two snapshots of one port",
        unapplied.len()
    );
    f.evidence = unapplied.iter().take(11).cloned().collect();
    if unapplied.len() > 11 {
        f.evidence
            .push(format!("... and {} more sources", unapplied.len() - 11));
    }
    f.why = "a rate needs two snapshots of the same port: files pair by the host or port they name, by their folder, by a file name that differs only by a snapshot word (before/after, snap1/snap2), or by content (the same counters, all grown); see `rocelab doctor --help`".into();
    f
}

/// `a, b, c and N more`.
fn list(items: &[String], max: usize) -> String {
    if items.len() <= max {
        items.join(", ")
    } else {
        format!("{} and {} more", items[..max].join(", "), items.len() - max)
    }
}

/// Run the doctor over parsed inputs.
///
/// Inputs are partitioned by scope ([`scope_from_path`]; a `results.json`
/// variant is the scope of its name, or no scope when it is the only
/// variant and no counters are scoped); each scope is diagnosed on its
/// own, then the findings of all scopes are ranked together. Counter
/// snapshots are grouped into sources by `sources.rs` (name, folder,
/// content).
pub fn diagnose(inputs: &[Input], opts: &Options) -> Diagnosis {
    let mut raws: Vec<sources::Raw> = Vec::new();
    let mut ctxs: BTreeMap<Option<String>, Context> = BTreeMap::new();
    let mut sim_times: Vec<u64> = Vec::new();
    let mut variants: Vec<sim::SimVariant> = Vec::new();
    for input in inputs {
        let scope = scope_from_path(&input.name);
        let file_key = || source_from_file_name(&input.name);
        let ctx = ctxs.entry(scope.clone()).or_default();
        let raw = |rdma: bool, named: Option<String>, entity: Entity, snap: Snap| sources::Raw {
            scope: scope.clone(),
            file: input.name.clone(),
            rdma,
            named,
            entity,
            snap,
        };
        match &input.parsed {
            Parsed::Ethtool(snaps) => {
                for s in snaps {
                    let entity = match s.vendor {
                        realnic::ethtool::Vendor::Cumulus | realnic::ethtool::Vendor::SwitchSdk => {
                            Entity::SwitchPort
                        }
                        _ => Entity::HostPort,
                    };
                    // RDMA hardware counters in an ethtool-style dump
                    // (`rocelab devices --counters`, a hw_counters listing
                    // under `NIC statistics:`) are read as the RDMA
                    // counters they are; the rest as port counters.
                    let (hw, port): (BTreeMap<String, u64>, BTreeMap<String, u64>) = s
                        .counters
                        .iter()
                        .map(|(n, v)| (n.clone(), *v))
                        .partition(|(n, _)| realnic::is_rdma_counter(n));
                    let snap = |counters| Snap {
                        time_ns: s.time_ns,
                        simulated: s.simulated,
                        counters,
                        run_delta: false,
                    };
                    if !hw.is_empty() {
                        raws.push(raw(true, s.host.clone(), Entity::HostPort, snap(hw)));
                    }
                    if port.is_empty() && !s.counters.is_empty() {
                        continue;
                    }
                    raws.push(raw(false, s.host.clone(), entity, snap(port)));
                }
            }
            Parsed::Rdma(snaps) => {
                for s in snaps {
                    raws.push(raw(
                        true,
                        s.host.clone(),
                        Entity::HostPort,
                        Snap {
                            time_ns: s.time_ns,
                            simulated: s.simulated,
                            counters: s.totals(),
                            run_delta: false,
                        },
                    ));
                }
            }
            Parsed::Perftest(p) => {
                // Each end-of-run counter block is a measured delta of
                // its device over the run: a source of its own, named by
                // the device and the file (and the side when one file
                // holds both).
                let blocks: Vec<_> = p
                    .runs
                    .iter()
                    .filter_map(|r| Some((r.side, r.counters.as_ref()?)))
                    .filter(|(_, b)| !b.counters.is_empty())
                    .collect();
                for (side, b) in &blocks {
                    let device = b.device.clone().unwrap_or_else(|| "perftest".into());
                    let file = file_key();
                    let side = format!("{side:?}").to_ascii_lowercase();
                    let key = match (file.is_empty(), blocks.len() > 1) {
                        (true, false) => device,
                        (true, true) => format!("{device} ({side})"),
                        (false, false) => format!("{device} ({file})"),
                        (false, true) => format!("{device} ({file}, {side})"),
                    };
                    raws.push(raw(
                        true,
                        Some(key),
                        Entity::HostPort,
                        Snap {
                            time_ns: b.duration_ns,
                            simulated: false,
                            counters: b.counters.clone(),
                            run_delta: true,
                        },
                    ));
                }
                ctx.perftest.push((input.name.clone(), p.clone()));
            }
            Parsed::Topo(t) => ctx.topo.push((input.name.clone(), t.clone())),
            Parsed::Devinfo(d) => ctx.devinfo.push((input.name.clone(), d.clone())),
            Parsed::MlnxQos(q) => ctx.qos.push((input.name.clone(), q.clone())),
            Parsed::ShowGids(g) => ctx.gids.push((input.name.clone(), g.clone())),
            Parsed::Nccl(n) => ctx.nccl.push((input.name.clone(), n.clone())),
            Parsed::NcclTests(n) => ctx.nccl_tests.push((input.name.clone(), n.clone())),
            Parsed::Lspci(p) => ctx.lspci.push((input.name.clone(), p.clone())),
            Parsed::EthtoolLink(e) => ctx.links.push((input.name.clone(), e.clone())),
            Parsed::Events(e) => ctx.events.push((input.name.clone(), e.clone())),
            Parsed::MmuConfig(m) => ctx.mmu.push((input.name.clone(), m.clone())),
            Parsed::EcnConfig(e) => ctx.ecncfg.push((input.name.clone(), e.clone())),
            Parsed::Switch(r) => {
                ctx.switch.push((input.name.clone(), r.clone()));
                // PFC frame counts per switch port join the counter views,
                // under the names the NIC dumps use, as switch ports.
                for p in &r.pfc {
                    let mut c = BTreeMap::new();
                    for (dir, vals) in [("rx", &p.rx), ("tx", &p.tx)] {
                        for (i, v) in vals.iter().enumerate().take(8) {
                            if let Some(v) = v {
                                c.insert(format!("{dir}_prio{i}_pause"), *v);
                            }
                        }
                    }
                    raws.push(raw(
                        false,
                        Some(p.port.clone()),
                        Entity::SwitchPort,
                        Snap {
                            time_ns: None,
                            simulated: false,
                            counters: c,
                            run_delta: false,
                        },
                    ));
                }
            }
            Parsed::SimResults(j) => {
                sim_times.extend(crate::compare::sim_times_ps(j));
                variants.extend(sim::variants(j));
            }
        }
    }
    // Sources, with the entity a `<switch>-pN` name implies.
    let mut groups = sources::group(raws);
    for g in &mut groups {
        if g.entity == Entity::HostPort && !g.rdma && names::node_of(&g.name) != g.name {
            g.entity = Entity::SwitchPort;
        }
    }
    type Key = (Option<String>, String);
    let mut eth: BTreeMap<Key, sources::Group> = BTreeMap::new();
    let mut rdma: BTreeMap<Key, sources::Group> = BTreeMap::new();
    for g in groups {
        let map = if g.rdma { &mut rdma } else { &mut eth };
        let mut key = (g.scope.clone(), g.name.clone());
        // Two sources that came out with one name stay apart.
        let mut n = 2;
        while map.contains_key(&key) {
            key.1 = format!("{} ({n})", g.name);
            n += 1;
        }
        map.insert(key, g);
    }
    sim_times.sort_unstable();
    sim_times.dedup();
    // One simulated run alongside: single snapshots are its counters.
    let sim_time_ps = match sim_times.as_slice() {
        [t] if *t > 0 => Some(*t),
        _ => None,
    };
    // Each variant of a results file joins its scope; its ports and NICs
    // stand in for counter dumps when the scope has none.
    let single = variants.len() == 1;
    for v in variants {
        let named = Some(v.name.clone());
        let scoped = eth.keys().chain(rdma.keys()).any(|(s, _)| *s == named);
        let scope = if single && !scoped { None } else { named };
        let has_eth = eth.keys().any(|(s, _)| *s == scope);
        let has_rdma = rdma.keys().any(|(s, _)| *s == scope);
        let group =
            |name: &str, is_nic: bool, rdma: bool, c: &BTreeMap<String, u64>| sources::Group {
                scope: scope.clone(),
                rdma,
                name: name.to_string(),
                node: String::new(),
                entity: if is_nic {
                    Entity::HostPort
                } else {
                    Entity::SwitchPort
                },
                files: vec!["results.json".to_string()],
                snaps: vec![Snap {
                    time_ns: Some(v.sim_time_ps / 1000),
                    simulated: true,
                    counters: c.clone(),
                    run_delta: false,
                }],
                paired_by: None,
            };
        if !has_eth {
            for p in &v.ports {
                eth.entry((scope.clone(), p.source.clone()))
                    .or_insert_with(|| group(&p.source, p.is_nic, false, &p.counters));
            }
        }
        if !has_rdma {
            for (host, c) in &v.nics {
                rdma.entry((scope.clone(), host.clone()))
                    .or_insert_with(|| group(host, true, true, c));
            }
        }
        ctxs.entry(scope).or_default().sim.push(v);
    }
    let mut sources = Vec::new();
    let mut unapplied: Vec<String> = Vec::new();
    let mut view = |kind: Kind,
                    map: BTreeMap<Key, sources::Group>|
     -> BTreeMap<Option<String>, Vec<CounterView>> {
        let mut out: BTreeMap<Option<String>, Vec<CounterView>> = BTreeMap::new();
        for ((scope, name), g) in map {
            let mut v = CounterView::from_series(name, &g.snaps, opts.interval, sim_time_ps);
            v.scope = scope.clone();
            v.entity = g.entity;
            v.node_name = g.node;
            v.files = g.files;
            v.paired_by = g.paired_by;
            if opts.interval.is_some() {
                let why = match v.time_base() {
                    TimeBase::SinceBoot => Some(
                        "one snapshot: totals since boot, no gap to apply it to (give a before and an after snapshot of the same port)",
                    ),
                    TimeBase::FromZero(_) => Some(
                        "simulated counters from zero: the interval is the simulated time",
                    ),
                    TimeBase::RunDelta(_) => Some("a measured delta over one run: the interval is the run's length"),
                    TimeBase::Delta(_) => None,
                };
                if let Some(why) = why {
                    unapplied.push(format!(
                        "{} ({}): {why}",
                        v.label_full(),
                        v.files.join(", ")
                    ));
                }
            }
            sources.push(SourceSummary {
                source: v.label_full(),
                kind,
                snapshots: g.snaps.len(),
                interval_ps: v.interval_ps,
                since_boot: v.since_boot,
                run_delta: v.run_delta,
                entity: v.entity,
                files: v.files.clone(),
                paired_by: v.paired_by.clone(),
            });
            out.entry(scope).or_default().push(v);
        }
        out
    };
    for (scope, views) in view(Kind::Ethtool, eth) {
        ctxs.entry(scope).or_default().eth = views;
    }
    for (scope, views) in view(Kind::Rdma, rdma) {
        ctxs.entry(scope).or_default().rdma = views;
    }
    let mut findings = Vec::new();
    for (scope, ctx) in &ctxs {
        let raw = checks::run(ctx);
        let mut merged = cause::consolidate(raw, ctx);
        for f in &mut merged {
            f.scope = scope.clone();
            if f.affects.is_empty() {
                f.affects.push(f.subject.clone());
            }
        }
        findings.extend(merged);
    }
    if let (Some(d), false) = (opts.interval, unapplied.is_empty()) {
        findings.push(interval_note(d, &unapplied));
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(a.triage().cmp(&b.triage()))
            .then(b.affects.len().cmp(&a.affects.len()))
            .then(a.symptom.cmp(&b.symptom))
            .then(a.scope.cmp(&b.scope))
            .then(a.subject.cmp(&b.subject))
    });
    Diagnosis {
        inputs: inputs
            .iter()
            .map(|i| (i.name.clone(), i.parsed.kind()))
            .collect(),
        sources,
        findings,
        skipped: Vec::new(),
    }
}
