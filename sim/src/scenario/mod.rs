//! Scenario files: one experiment as data.
//!
//! A scenario file (TOML) names a topology, the model settings
//! ([`crate::config`]: `[fabric]`, `[nic]`, `[record]`, `[[faults]]`,
//! and `[[override]]` for single switches, ports and hosts), the
//! workloads, how long to run and the seed, and optionally variants that
//! change some of those settings and run side by side:
//!
//! ```toml
//! name = "incast-lossless-vs-lossy"   # default: the file name
//! description = "..."
//! seed = 1                            # root seed (default 1)
//! duration = "10ms"                   # stop time (default: until idle)
//! max_events = 2_000_000_000          # runaway guard (default 2e9)
//! fidelity = "packet"                 # or "fluid": flows as rates
//! fidelity_check = false              # fluid: also run packets, state the error
//! topology = "../topologies/leaf-spine-4x2.toml"   # relative to this file
//! # or an inline topology table ([topology] with [topology.generator] ...)
//! # or an import: topology = { format = "hpcc", path = "topo.txt" }
//!
//! [fabric.pfc]                        # sim::config::FabricConfig
//! threshold = { mode = "static", xoff = "320KB", xon = "200KB" }
//! [nic]                               # sim::config::NicConfig
//! mtu = 4096
//! [[faults]]                          # sim::faults::FaultConfig
//! from = "spine0"
//! to = "leaf0"
//! loss = 0.001
//!
//! [[workload]]
//! kind = "incast"                     # see WorkloadDoc
//! receiver = "h0"
//! senders = 16
//! size = "1MB"
//!
//! [[variant]]
//! name = "lossless"
//! [[variant]]
//! name = "lossy"
//! fabric.pfc.enabled = false          # any key above, merged over the base
//!
//! [sweep]                             # crate::sweep: `rocelab sweep` runs
//! seeds = [1, 2]                      # every point; a single run ignores it
//! grid = { "fabric.buffer.size" = ["4MB", "8MB"] }
//! ```
//!
//! Each `[[variant]]` is merged over the base document (tables merge key by
//! key, other values and arrays are replaced) and the result is checked
//! as a whole; without variants the base runs once as variant `default`.
//! Every mistake is a [`FileError`] naming the file, the key (dotted path,
//! `variant[1].fabric.pfc.enabled`), and what was expected; the line and
//! column come with it whenever the mistake is in the base document.
//!
//! Loading builds everything a run needs except routes (which
//! [`crate::topology::Routes::compute`] derives from the topology): no
//! model code runs, so [`load`] is also the validation of a file.

mod changes;
pub mod diagnosis;
pub mod hpcc_config;
mod workload;

use std::path::{Path, PathBuf};

use roce::time::Duration;
use serde::{Deserialize, Serialize};

use crate::config::{FabricConfig, FaultConfig, NicConfig, RecordConfig, SimConfig};
use crate::faults::FaultPlan;
use crate::input::{decode_str, decode_value, read_file, FileError};
use crate::options::{Fidelity, RunOptions};
use crate::overrides::OverrideDoc;
use crate::results::RunResult;
use crate::topology::{self, NodeId, NodeKind, Topology};
use crate::workload::{FlowSpec, GroupSpec};

pub use changes::Overrides;
pub(crate) use changes::{merge, parse_key};
pub use diagnosis::{Diagnosis, Role};
pub use workload::{HostRef, HostSet, OpDoc, WorkloadDoc, WorkloadKind};

/// Default runaway guard: events per variant.
pub const DEFAULT_MAX_EVENTS: u64 = 2_000_000_000;

/// The document of a scenario file (and of each merged variant).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioDoc {
    /// Name (default: the file name without extension).
    #[serde(default)]
    pub name: Option<String>,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// Root seed.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Stop time; `None`: until the network is idle.
    #[serde(default)]
    pub duration: Option<Duration>,
    /// Event budget per variant.
    #[serde(default)]
    pub max_events: Option<u64>,
    /// `packet` (default) or `fluid`.
    #[serde(default)]
    pub fidelity: Fidelity,
    /// In fluid mode, also run the packet model and state fluid mode's
    /// error in results.json (`fluid.check`).
    #[serde(default)]
    pub fidelity_check: bool,
    /// Topology: a path, an inline table or an import table.
    pub topology: toml::Value,
    /// Switch settings.
    #[serde(default)]
    pub fabric: FabricConfig,
    /// NIC settings.
    #[serde(default)]
    pub nic: NicConfig,
    /// What to record.
    #[serde(default)]
    pub record: RecordConfig,
    /// Faults (links, ports, NICs).
    #[serde(default)]
    pub faults: Vec<FaultConfig>,
    /// Settings of single switches, ports and hosts.
    #[serde(default, rename = "override")]
    pub overrides: Vec<OverrideDoc>,
    /// Workloads.
    #[serde(default, rename = "workload")]
    pub workloads: Vec<WorkloadDoc>,
    /// Variants (raw tables with their place in the file; merged over
    /// the base document).
    #[serde(default, rename = "variant")]
    pub variants: Vec<toml::Spanned<toml::Table>>,
    /// The `[sweep]` table ([`crate::sweep`]): checked when loading, run
    /// by `rocelab sweep`; a single run ignores it.
    #[serde(default)]
    pub sweep: Option<toml::Value>,
    /// The ground truth ([`diagnosis`]): what the scenario injects.
    #[serde(default)]
    pub diagnosis: Option<Diagnosis>,
}

fn default_seed() -> u64 {
    1
}

/// A loaded scenario: every variant resolved and checked.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The scenario's name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// The file it came from.
    pub file: PathBuf,
    /// The base document's root seed.
    pub seed: u64,
    /// Distinct topologies the variants use (most scenarios have one).
    pub topologies: Vec<Topology>,
    /// The variants, in file order.
    pub variants: Vec<Variant>,
}

/// One runnable variant.
#[derive(Debug, Clone)]
pub struct Variant {
    /// Variant name (`default` without `[[variant]]` tables).
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// Index into [`Scenario::topologies`].
    pub topology: usize,
    /// Model settings.
    pub config: SimConfig,
    /// The flows, final (sorted, dense ids).
    pub flows: Vec<FlowSpec>,
    /// The groups of the dependent workloads; flows' `group` index it.
    pub groups: Vec<GroupSpec>,
    /// Workload names in file order; flows' `workload` index it.
    pub workloads: Vec<String>,
    /// Root seed of the run.
    pub seed: u64,
    /// Stop time.
    pub duration: Option<Duration>,
    /// Event budget.
    pub max_events: u64,
    /// Frames or rates.
    pub fidelity: Fidelity,
    /// Fluid mode checked against the packet model.
    pub fidelity_check: bool,
    /// The variant's ground truth, when the scenario states one.
    pub diagnosis: Option<Diagnosis>,
}

impl Variant {
    /// The workloads (indices into `workloads`) that are training jobs,
    /// in file order.
    pub fn training_jobs(&self) -> Vec<u32> {
        let mut jobs: Vec<u32> = Vec::new();
        for g in &self.groups {
            let Some(t) = &g.training else { continue };
            if let Some(w) = self.workloads.iter().position(|n| *n == t.job) {
                if !jobs.contains(&(w as u32)) {
                    jobs.push(w as u32);
                }
            }
        }
        jobs.sort_unstable();
        jobs
    }

    /// This variant with its faults taken out: the same fabric, settings
    /// and flows, what the job would have done without them.
    pub fn without_faults(&self) -> Variant {
        let mut v = self.clone();
        v.config.faults.clear();
        v
    }

    /// This variant with workload `w`'s flows only (renumbered densely in
    /// the same order, their dependencies kept), on the same fabric and
    /// settings: what that workload does alone. The groups stay; those of
    /// other workloads have no flows.
    pub fn alone(&self, w: u32) -> Variant {
        let mut map = vec![u32::MAX; self.flows.len()];
        let mut flows = Vec::new();
        for f in &self.flows {
            if f.workload != w {
                continue;
            }
            map[f.id as usize] = flows.len() as u32;
            let mut g = f.clone();
            g.id = flows.len() as u32;
            // A workload's flows wait only for its own.
            g.after = f
                .after
                .iter()
                .map(|&a| map[a as usize])
                .filter(|&a| a != u32::MAX)
                .collect();
            flows.push(g);
        }
        Variant {
            flows,
            ..self.clone()
        }
    }

    /// The options that run this variant as the file says: its name,
    /// seed, stop time, event budget, groups and workload names (no
    /// progress observer).
    pub fn run_options(&self) -> RunOptions {
        RunOptions {
            variant: self.name.clone(),
            seed: self.seed,
            duration: self.duration,
            max_events: self.max_events,
            progress: None,
            groups: self.groups.clone(),
            workloads: self.workloads.clone(),
            fidelity: self.fidelity,
            stop: None,
        }
    }
}

/// What `results.json` holds: the scenario, its seed and one entry per
/// variant (each a [`RunResult`]: `summary`, `groups`, `flows`, `ports`,
/// `nics`, `queues`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioResults {
    /// Scenario name.
    pub scenario: String,
    /// Root seed of the base document.
    pub seed: u64,
    /// One result per variant, in file order.
    pub variants: Vec<RunResult>,
}

/// The `schema` field of `results.json`.
pub const RESULTS_SCHEMA: &str = "rocelab-results";
/// The `version` field of `results.json`: 2 since the file names its
/// schema and holds `ports` only on request (files without the fields are
/// version 1 and read the same).
pub const RESULTS_VERSION: u32 = 2;

/// [`ScenarioResults`] as written: `schema` and `version` first.
#[derive(Serialize)]
struct Versioned<'a> {
    schema: &'static str,
    version: u32,
    #[serde(flatten)]
    doc: &'a ScenarioResults,
}

impl ScenarioResults {
    /// Pretty JSON with stable field order (same inputs, same bytes),
    /// opened by `"schema": "rocelab-results"` and `"version"`
    /// ([`RESULTS_VERSION`]).
    pub fn to_json(&self) -> String {
        // Plain structs of numbers and strings always serialise.
        let mut s = serde_json::to_string_pretty(&Versioned {
            schema: RESULTS_SCHEMA,
            version: RESULTS_VERSION,
            doc: self,
        })
        .unwrap_or_default();
        s.push('\n');
        s
    }
}

/// Load, resolve and check a scenario file.
pub fn load(path: &Path) -> Result<Scenario, FileError> {
    load_with(path, &Overrides::default())
}

/// Load, resolve and check a scenario file with command-line changes.
pub fn load_with(path: &Path, overrides: &Overrides) -> Result<Scenario, FileError> {
    let text = read_file(path)?;
    if hpcc_config::looks_like(&text) {
        // The HPCC artifact's run file: as the scenario it describes.
        let doc = hpcc_config::to_scenario(path, &text)?;
        return from_str_with(path, &doc, overrides);
    }
    from_str_with(path, &text, overrides)
}

/// Load a scenario from the text of the file at `path` (relative paths in
/// it resolve against `path`'s directory).
pub fn from_str(path: &Path, text: &str) -> Result<Scenario, FileError> {
    from_str_with(path, text, &Overrides::default())
}

/// [`from_str`] with command-line changes. Every error carries a line and
/// column: its own, or that of its key (or the nearest enclosing key)
/// in `text`.
pub fn from_str_with(path: &Path, text: &str, ov: &Overrides) -> Result<Scenario, FileError> {
    load_text(path, text, ov).map_err(|e| e.locate(text))
}

fn load_text(path: &Path, text: &str, ov: &Overrides) -> Result<Scenario, FileError> {
    let mut raw: toml::Table = text.parse().map_err(|e: toml::de::Error| {
        let err = FileError::new(path, "", e.message().trim_end().to_string());
        match e.span() {
            Some(s) => err.at(text, s.start),
            None => err,
        }
    })?;
    // The base document alone first: its errors carry line and column.
    let mut base: ScenarioDoc = decode_str(path, text)?;
    crate::sweep::Sweep::from_text(path, text)?;
    if !ov.set.is_empty() {
        // Then with the command line's changes (variants keep their place
        // in the file for their errors).
        ov.set_all(path, &mut raw)?;
        let mut changed = raw.clone();
        changed.remove("variant");
        let variants = std::mem::take(&mut base.variants);
        base = decode_value(path, toml::Value::Table(changed), "").map_err(|e| FileError {
            message: format!("{} (with the changes set on the command line)", e.message),
            ..e
        })?;
        base.variants = variants;
    }
    let name = base.name.clone().unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "scenario".to_string())
    });
    let mut scenario = Scenario {
        name,
        description: base.description.clone(),
        file: path.to_path_buf(),
        seed: base.seed,
        topologies: Vec::new(),
        variants: Vec::new(),
    };
    let mut topo_values: Vec<toml::Value> = Vec::new();
    let mut loss_faults: Vec<(usize, Vec<FaultConfig>)> = Vec::new();
    let spans: Spans = toml::from_str(text).unwrap_or_default();
    let offsets = |v: &[toml::Spanned<toml::Table>]| -> Vec<usize> {
        v.iter().map(|s| s.span().start).collect()
    };
    let (fault_spans, override_spans) = (offsets(&spans.faults), offsets(&spans.overrides));
    let mut docs: Vec<(String, Option<String>, ScenarioDoc, String, toml::Table)> = Vec::new();
    if let Some(want) = &ov.variant {
        let names: Vec<String> = if base.variants.is_empty() {
            vec!["default".to_string()]
        } else {
            base.variants
                .iter()
                .filter_map(|v| v.get_ref().get("name")?.as_str().map(str::to_string))
                .collect()
        };
        if !names.contains(want) {
            return Err(FileError::new(
                path,
                "variant",
                format!("{want:?}: no such variant; expected one of {names:?}"),
            ));
        }
    }
    let wanted = |name: &str| ov.variant.as_deref().map_or(true, |w| w == name);
    if base.variants.is_empty() {
        docs.push((
            "default".to_string(),
            None,
            base,
            String::new(),
            raw.clone(),
        ));
    } else {
        let mut seen: Vec<String> = Vec::new();
        for (i, spanned) in base.variants.iter().enumerate() {
            let prefix = format!("variant[{i}]");
            let at = |e: FileError| e.at(text, spanned.span().start);
            let mut v = spanned.get_ref().clone();
            let vname = match v.remove("name") {
                Some(toml::Value::String(s)) if !s.is_empty() => s,
                Some(other) => {
                    return Err(at(FileError::new(
                        path,
                        &format!("{prefix}.name"),
                        format!("{other}: expected a non-empty string"),
                    )))
                }
                None => {
                    return Err(at(FileError::new(
                        path,
                        &format!("{prefix}.name"),
                        "missing: expected a name for every variant",
                    )))
                }
            };
            if seen.contains(&vname) {
                return Err(at(FileError::new(
                    path,
                    &format!("{prefix}.name"),
                    format!("{vname:?} is used twice: expected unique variant names"),
                )));
            }
            seen.push(vname.clone());
            let vdesc = match v.remove("description") {
                Some(toml::Value::String(s)) => Some(s),
                Some(other) => {
                    return Err(FileError::new(
                        path,
                        &format!("{prefix}.description"),
                        format!("{other}: expected a string"),
                    ))
                }
                None => None,
            };
            if v.contains_key("sweep") {
                return Err(at(FileError::new(
                    path,
                    &format!("{prefix}.sweep"),
                    "a sweep applies to the whole file: expected [sweep] at the top level",
                )));
            }
            if v.contains_key("variant") || v.contains_key("name") {
                return Err(FileError::new(
                    path,
                    &format!("{prefix}.variant"),
                    "variants cannot nest: expected settings only",
                ));
            }
            if !wanted(&vname) {
                continue;
            }
            let mut merged = raw.clone();
            merged.remove("variant");
            let keys: Vec<String> = v.keys().cloned().collect();
            merge(&mut merged, v);
            ov.set_all(path, &mut merged)?;
            let doc: ScenarioDoc = decode_value(path, toml::Value::Table(merged.clone()), "")
                .map_err(|e| {
                    let top = e
                        .key
                        .as_deref()
                        .and_then(|k| k.split(['.', '[']).next())
                        .map(str::to_string);
                    match top {
                        Some(t) if keys.contains(&t) => at(e.under(&prefix)),
                        _ => e,
                    }
                    .with_variant(&vname)
                })?;
            docs.push((vname, vdesc, doc, prefix, merged));
        }
    }
    for (vname, vdesc, doc, prefix, doc_raw) in docs {
        // Positions of `[[faults]]` and `[[override]]` entries hold when
        // the entries are the base document's.
        let own = |k: &str, sp: &[usize]| {
            if doc_raw.get(k) == raw.get(k) {
                sp.to_vec()
            } else {
                Vec::new()
            }
        };
        let (fspans, ospans) = (
            own("faults", &fault_spans),
            own("override", &override_spans),
        );
        let t = match topo_values.iter().position(|v| *v == doc.topology) {
            Some(t) => t,
            None => {
                let topo = resolve_topology(path, &doc.topology)
                    .map_err(|e| e.with_variant_if(&prefix, &vname))?;
                topo_values.push(doc.topology.clone());
                scenario.topologies.push(topo.0);
                // Imported link errors become faults of every variant using it.
                if !topo.1.is_empty() {
                    loss_faults.push((scenario.topologies.len() - 1, topo.1));
                }
                scenario.topologies.len() - 1
            }
        };
        let topo = &scenario.topologies[t];
        let mut faults = doc.faults.clone();
        if let Some((_, extra)) = loss_faults.iter().find(|(i, _)| *i == t) {
            faults.extend(extra.iter().cloned());
        }
        let mut config = SimConfig {
            fabric: doc.fabric.clone(),
            nic: doc.nic.clone(),
            record: doc.record.clone(),
            faults,
            overrides: Vec::new(),
            workload_cc: doc.workloads.iter().map(|w| w.cc.clone()).collect(),
        };
        if doc.duration == Some(Duration::ZERO) {
            return Err(FileError::new(
                path,
                "duration",
                "0: expected a positive stop time (leave it out to run until idle)",
            )
            .with_variant_if(&prefix, &vname));
        }
        check_config(path, text, &fspans, topo, &config)
            .map_err(|e| e.with_variant_if(&prefix, &vname))?;
        if let Some(d) = &doc.diagnosis {
            d.check().map_err(|m| {
                FileError::new(path, "diagnosis.cause", m).with_variant_if(&prefix, &vname)
            })?;
        }
        config.overrides =
            crate::overrides::resolve(path, text, &ospans, &doc_raw, &doc.overrides, topo, &config)
                .map_err(|e| e.with_variant_if(&prefix, &vname))?;
        let (flows, groups, workloads) =
            workload::build(path, topo, &doc.workloads, doc.seed, &config)
                .map_err(|e| e.with_variant_if(&prefix, &vname))?;
        check_fidelity(path, &doc, &config, &flows)
            .map_err(|e| e.with_variant_if(&prefix, &vname))?;
        scenario.variants.push(Variant {
            name: vname,
            description: vdesc,
            topology: t,
            config,
            flows,
            groups,
            workloads,
            seed: doc.seed,
            duration: doc.duration,
            max_events: doc.max_events.unwrap_or(DEFAULT_MAX_EVENTS),
            fidelity: doc.fidelity,
            fidelity_check: doc.fidelity_check,
            diagnosis: doc.diagnosis.clone(),
        });
    }
    Ok(scenario)
}

/// Fluid mode moves flows as rates: what needs frames is refused here,
/// so that what `validate` accepts, `run` runs.
fn check_fidelity(
    path: &Path,
    doc: &ScenarioDoc,
    config: &SimConfig,
    flows: &[FlowSpec],
) -> Result<(), FileError> {
    if doc.fidelity_check && doc.fidelity != Fidelity::Fluid {
        return Err(FileError::new(
            path,
            "fidelity_check",
            "true: expected it only with fidelity = \"fluid\" (it runs the packet model beside fluid mode)",
        ));
    }
    if doc.fidelity != Fidelity::Fluid {
        return Ok(());
    }
    let why = Fidelity::fluid_refusal(config, flows);
    match why {
        Some(w) => Err(FileError::new(
            path,
            "fidelity",
            format!("\"fluid\": {w}; expected \"packet\" for this scenario"),
        )),
        None => Ok(()),
    }
}

impl FileError {
    /// Say which variant the error is in (when there are variants).
    fn with_variant(mut self, name: &str) -> FileError {
        self.message = format!("{} (in variant {name:?})", self.message);
        self
    }

    fn with_variant_if(self, prefix: &str, name: &str) -> FileError {
        if prefix.is_empty() {
            self
        } else {
            self.with_variant(name)
        }
    }
}

/// Byte offsets of the `[[faults]]` and `[[override]]` entries of a file.
#[derive(Debug, Default, Deserialize)]
struct Spans {
    #[serde(default)]
    faults: Vec<toml::Spanned<toml::Table>>,
    #[serde(default, rename = "override")]
    overrides: Vec<toml::Spanned<toml::Table>>,
}

/// The topology a scenario's `topology` value names, and the link losses
/// an import brought (as faults).
fn resolve_topology(
    file: &Path,
    value: &toml::Value,
) -> Result<(Topology, Vec<FaultConfig>), FileError> {
    let dir = file.parent().unwrap_or(Path::new(""));
    let exists = |p: &Path, key: &str| {
        if p.is_file() {
            Ok(())
        } else {
            Err(FileError::new(
                file,
                key,
                format!("{} does not exist: expected a topology file (paths are relative to the scenario file)", p.display()),
            ))
        }
    };
    match value {
        toml::Value::String(p) => {
            let p = dir.join(p);
            exists(&p, "topology")?;
            Ok((topology::file::load(&p)?, Vec::new()))
        }
        toml::Value::Table(t) if t.contains_key("path") || t.contains_key("format") => {
            let r: TopologyRef = decode_value(file, value.clone(), "topology")?;
            let p = dir.join(&r.path);
            exists(&p, "topology.path")?;
            match r.format {
                TopologyFormat::Rocelab => Ok((topology::file::load(&p)?, Vec::new())),
                TopologyFormat::Hpcc => {
                    let imported = topology::hpcc::load(&p)?;
                    let t = imported.topology;
                    let mut faults = Vec::new();
                    for (link, p) in imported.link_loss {
                        let l = t.link(link);
                        let (a, b) = (&t.node(l.a.node).name, &t.node(l.b.node).name);
                        for (from, to) in [(a, b), (b, a)] {
                            faults.push(FaultConfig::loss(from, to, p));
                        }
                    }
                    Ok((t, faults))
                }
            }
        }
        toml::Value::Table(_) => Ok((
            topology::file::from_value(file, value.clone(), "topology")?,
            Vec::new(),
        )),
        other => Err(FileError::new(
            file,
            "topology",
            format!(
                "{}: expected a file path, an inline topology table or {{ format = \"hpcc\", path = \"...\" }}",
                other.type_str()
            ),
        )),
    }
}

/// A topology in another file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct TopologyRef {
    /// File format.
    #[serde(default)]
    format: TopologyFormat,
    /// Path, relative to the scenario file.
    path: String,
}

/// Formats a scenario's topology can be read from.
#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
enum TopologyFormat {
    /// rocelab's TOML topology file.
    #[default]
    Rocelab,
    /// The HPCC ns-3 simulator's `N_nodes N_switches N_links` file.
    Hpcc,
}

/// The configuration's own rules, plus names that must exist in the
/// topology (fault targets, recorded queues). `fault_spans`: byte offset
/// of each `[[faults]]` entry in `text`, when known.
fn check_config(
    file: &Path,
    text: &str,
    fault_spans: &[usize],
    topo: &Topology,
    c: &SimConfig,
) -> Result<(), FileError> {
    let at_fault = |i: usize, e: FileError| match fault_spans.get(i) {
        Some(&off) => e.at(text, off),
        None => e,
    };
    for (i, f) in c.faults.iter().enumerate() {
        let key = format!("faults[{i}]");
        let (plan, _) = f
            .plan(&key)
            .map_err(|e| at_fault(i, FileError::new(file, &e.key, e.message)))?;
        let find = |name: &str, k: &str| {
            topo.find(name).ok_or_else(|| {
                at_fault(
                    i,
                    FileError::new(
                        file,
                        &format!("{key}.{k}"),
                        format!("{name:?}: expected the name of a node in the topology"),
                    ),
                )
            })
        };
        let link = |a: &str, b: &str| -> Result<(), FileError> {
            let (x, y) = (find(a, "from")?, find(b, "to")?);
            if topo.link_between(x, y).is_none() {
                return Err(at_fault(
                    i,
                    FileError::new(
                        file,
                        &format!("{key}.to"),
                        format!("no link joins {a:?} and {b:?}: expected the two ends of a link"),
                    ),
                ));
            }
            Ok(())
        };
        let host = |name: &str| -> Result<(), FileError> {
            let n = find(name, "node")?;
            if topo.node(n).kind != NodeKind::Host {
                return Err(at_fault(
                    i,
                    FileError::new(
                        file,
                        &format!("{key}.node"),
                        format!("{name:?} is a switch: expected a host (this fault is a NIC's)"),
                    ),
                ));
            }
            Ok(())
        };
        let kind = |name: &str, k: &str, want: NodeKind| -> Result<NodeId, FileError> {
            let n = find(name, k)?;
            if topo.node(n).kind != want {
                let (is, expected) = match want {
                    NodeKind::Host => ("switch", "a host"),
                    NodeKind::Switch => ("host", "a switch"),
                };
                return Err(at_fault(
                    i,
                    FileError::new(
                        file,
                        &format!("{key}.{k}"),
                        format!("{name:?} is a {is}: expected {expected}"),
                    ),
                ));
            }
            Ok(n)
        };
        match &plan {
            FaultPlan::StaticRoute { node, dest, via } => {
                let sw = kind(node, "node", NodeKind::Switch)?;
                kind(dest, "dest", NodeKind::Host)?;
                let v = find(via, "via")?;
                if topo.link_between(sw, v).is_none() {
                    return Err(at_fault(
                        i,
                        FileError::new(
                            file,
                            &format!("{key}.via"),
                            format!(
                                "{via:?} is not linked to {node:?}: expected a neighbour of it"
                            ),
                        ),
                    ));
                }
            }
            FaultPlan::Wire { from, to, .. } => link(from, to)?,
            FaultPlan::LinkDown { a, b, .. } => link(a, b)?,
            FaultPlan::Receiver { node, .. } => host(node)?,
            FaultPlan::Mtu { node, port, .. } => {
                let n = find(node, "node")?;
                let ports = topo.node(n).ports.len();
                if usize::from(*port) >= ports {
                    return Err(at_fault(
                        i,
                        FileError::new(
                            file,
                            &format!("{key}.port"),
                            format!("{port}: {node:?} has ports 0-{}", ports.saturating_sub(1)),
                        ),
                    ));
                }
            }
        }
    }
    c.validate()
        .map_err(|e| FileError::new(file, &e.key, e.message))?;
    for (i, q) in c.record.queues.iter().enumerate() {
        let key = format!("record.queues[{i}]");
        let node = topo.find(&q.node).ok_or_else(|| {
            FileError::new(
                file,
                &format!("{key}.node"),
                format!("{:?}: expected the name of a node in the topology", q.node),
            )
        })?;
        let ports = topo.node(node).ports.len();
        if usize::from(q.port) >= ports {
            return Err(FileError::new(
                file,
                &format!("{key}.port"),
                format!(
                    "{}: {:?} has ports 0-{}",
                    q.port,
                    q.node,
                    ports.saturating_sub(1)
                ),
            ));
        }
    }
    for (i, sel) in c.record.pcap.iter().enumerate() {
        sel.resolve(topo).map_err(|(k, message)| {
            FileError::new(file, &format!("record.pcap[{i}].{k}"), message)
        })?;
    }
    // Propagation along any path is at most the sum of all link delays;
    // time is u64 picoseconds, so that sum must fit.
    let mut total = Duration::ZERO;
    for l in &topo.links {
        total = total.checked_add(l.delay).ok_or_else(|| {
            FileError::new(
                file,
                "topology",
                format!(
                    "link {:?}-{:?}: the link delays add up past {}: expected delays that fit in picoseconds",
                    topo.node(l.a.node).name,
                    topo.node(l.b.node).name,
                    Duration::MAX
                ),
            )
        })?;
    }
    // The switches' buffers: the carving `run` builds (one function).
    for (ni, n) in topo.nodes.iter().enumerate() {
        if n.kind == NodeKind::Switch {
            crate::fabric::switch_mmu(topo, c, ni).map_err(|e| {
                // At the buffer size if written, else at what sized the
                // headroom: its setting, or the topology's links.
                let err = FileError::new(file, &e.key, e.message);
                ["fabric.buffer.size", "fabric.pfc.headroom", "topology"]
                    .iter()
                    .find_map(|k| crate::input::key_offset(text, k))
                    .map_or(err.clone(), |off| err.at(text, off))
            })?;
        }
    }
    if topo.nodes.iter().all(|n| n.kind != NodeKind::Host) {
        return Err(FileError::new(
            file,
            "topology",
            "no hosts: expected at least two",
        ));
    }
    Ok(())
}

/// What a checked file turned out to be.
#[derive(Debug, Clone)]
pub enum CheckedFile {
    /// A scenario, fully resolved.
    Scenario(Scenario),
    /// A topology file, built and checked.
    Topology(Topology),
}

/// Check a scenario or topology file without running anything: a file
/// with a top-level `topology` key is a scenario, any other a topology.
pub fn check_file(path: &Path) -> Result<CheckedFile, FileError> {
    check_file_with(path, &Overrides::default())
}

/// [`check_file`] with command-line changes (scenario files only: a
/// topology file with overrides is an error).
pub fn check_file_with(path: &Path, ov: &Overrides) -> Result<CheckedFile, FileError> {
    let text = read_file(path)?;
    if hpcc_config::looks_like(&text) {
        return load_with(path, ov).map(CheckedFile::Scenario);
    }
    let table: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            let e: toml::de::Error = e;
            let err = FileError::new(path, "", e.message().trim_end().to_string());
            return Err(match e.span() {
                Some(s) => err.at(&text, s.start),
                None => err,
            });
        }
    };
    if table.contains_key("topology") || table.contains_key("workload") {
        from_str_with(path, &text, ov).map(CheckedFile::Scenario)
    } else if *ov != Overrides::default() {
        Err(FileError::new(
            path,
            "",
            "--set, --seed and --variant apply to scenario files: expected a scenario (it has a `topology` key)",
        ))
    } else {
        topology::file::from_str(path, &text).map(CheckedFile::Topology)
    }
}
