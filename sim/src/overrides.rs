//! Per-element settings: `[[override]]` entries of a scenario file, which
//! give single switches, switch ports or hosts settings of their own.
//!
//! ```toml
//! [[override]]
//! nodes = "leaf1"                 # a name, a pattern ("h1*", "leaf?"), or a list of those
//! ports = [2]                     # optional: only these ports of those switches
//! fabric.pfc.enabled = false      # any [fabric] key
//!
//! [[override]]
//! nodes = ["h3", "h4"]
//! nic.rx_drain_rate = "40Gbps"    # any [nic] key
//! start = "100us"                 # optional window
//! end = "300us"
//! ```
//!
//! One truth: an override is a partial `[fabric]` or `[nic]` table merged
//! over the scenario's own (tables key by key, other values replaced) and
//! decoded as the same [`FabricConfig`] / [`NicConfig`], so every key,
//! unit and rule is the global one's. Overrides without a window apply in
//! file order (a later one merges over an earlier one on the same
//! element); a port override merges over its switch's settings. An
//! override with `start`/`end` merges over the element's settings without
//! a window, applies in its window only, and may not overlap another timed
//! override of the same element.
//!
//! What is per element: per switch, everything in `[fabric]` except the
//! PFC frame timing (`pfc.quanta`, `pfc.refresh`, `pfc.response_time`) and
//! `scheduler`, which are the same on every switch; per port, `pfc.enabled`,
//! `pfc.priorities`, `pfc.headroom` and `qos`; per host, everything in
//! `[nic]` but `priority` and `qps_per_pair` (workloads apply those).
//! During a run (a timed override) only what a device changes live may
//! change: `pfc.enabled`, `pfc.priorities`, `ecn` and `qos` of a switch or
//! port, `pfc.threshold`, `buffer.lossy_alpha` and
//! `buffer.lossy_queue_limit` of a switch, `rx_drain_rate`, `rx_buffer`,
//! `rx_xoff`, `rx_xon` of a NIC (buffer size, reserves and headroom are
//! carved once, at the start).
//!
//! [`resolve`] turns the entries into [`ElementOverride`]s, each the full
//! settings of one element (and its window), which the fabric applies.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use roce::time::Duration;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

pub use crate::config::{ElementOverride, OverrideSetting};
use crate::config::{FabricConfig, NicConfig, SimConfig};
use crate::faults::Window;
use crate::input::{decode_value, FileError};
use crate::topology::{NodeKind, Topology};

/// One `[[override]]` entry as the file writes it (its `fabric`/`nic`
/// tables are decoded here for their keys and units; [`resolve`] merges
/// the raw tables).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverrideDoc {
    /// Which nodes: a name, a pattern with `*` (any run of characters) and
    /// `?` (one character), or a list of those.
    pub nodes: NamePatterns,
    /// Only these ports of the switches (fabric settings only).
    #[serde(default)]
    pub ports: Option<Vec<u16>>,
    /// Start of the window (default: time zero).
    #[serde(default)]
    pub start: Option<Duration>,
    /// End of the window (default: never).
    #[serde(default)]
    pub end: Option<Duration>,
    /// Fabric settings (switches, ports).
    #[serde(default)]
    pub fabric: Option<FabricConfig>,
    /// NIC settings (hosts).
    #[serde(default)]
    pub nic: Option<NicConfig>,
}

/// Node names or patterns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamePatterns(pub Vec<String>);

impl<'de> Deserialize<'de> for NamePatterns {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NamePatterns, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = NamePatterns;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a node name, a pattern such as \"h1*\", or a list of those")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<NamePatterns, E> {
                Ok(NamePatterns(vec![v.to_string()]))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<NamePatterns, A::Error> {
                let mut out = Vec::new();
                while let Some(x) = s.next_element::<String>()? {
                    out.push(x);
                }
                if out.is_empty() {
                    return Err(de::Error::custom("empty list: expected at least one name"));
                }
                Ok(NamePatterns(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Whether `name` matches `pattern` (`*`: any run, `?`: one character).
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative wildcard match with backtracking to the last star.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Which section an override sets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Section {
    Fabric,
    Nic,
}

impl Section {
    fn key(self) -> &'static str {
        match self {
            Section::Fabric => "fabric",
            Section::Nic => "nic",
        }
    }
}

/// Resolve the `[[override]]` entries of one document against its
/// topology. `raw` is the document as a table (after variant merging),
/// `docs` its decoded entries, `spans` the byte offset of each entry in
/// `text` when known (errors then carry its line and column), `base` the
/// document's global settings.
pub fn resolve(
    file: &Path,
    text: &str,
    spans: &[usize],
    raw: &toml::Table,
    docs: &[OverrideDoc],
    topo: &Topology,
    base: &SimConfig,
) -> Result<Vec<ElementOverride>, FileError> {
    let raw_entries: Vec<&toml::Table> = match raw.get("override") {
        Some(toml::Value::Array(a)) => a.iter().filter_map(|v| v.as_table()).collect(),
        _ => Vec::new(),
    };
    let empty = toml::Table::new();
    let base_raw = |s: Section| match raw.get(s.key()) {
        Some(toml::Value::Table(t)) => t.clone(),
        _ => empty.clone(),
    };
    // (node, port, section) -> untimed entries and timed entries, in order.
    type Key = (u32, Option<u16>, Section);
    let mut untimed: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    let mut timed: BTreeMap<Key, Vec<usize>> = BTreeMap::new();
    let mut windows = Vec::with_capacity(docs.len());
    for (i, d) in docs.iter().enumerate() {
        let key = format!("override[{i}]");
        let at = |e: FileError| match spans.get(i) {
            Some(&off) => e.at(text, off),
            None => e,
        };
        let fail = |k: &str, m: String| at(FileError::new(file, &format!("{key}{k}"), m));
        let section = match (&d.fabric, &d.nic) {
            (Some(_), None) => Section::Fabric,
            (None, Some(_)) => Section::Nic,
            _ => {
                return Err(fail(
                    "",
                    "expected exactly one of `fabric` and `nic` settings".into(),
                ))
            }
        };
        let start = d.start.unwrap_or(Duration::ZERO);
        if let Some(end) = d.end {
            if end <= start {
                return Err(fail(
                    ".end",
                    format!("{end} is not after start {start}: expected end > start"),
                ));
            }
        }
        let window = Window { start, end: d.end };
        windows.push(window);
        if d.ports.is_some() && section == Section::Nic {
            return Err(fail(
                ".ports",
                "ports select switch ports: expected `fabric` settings with them".into(),
            ));
        }
        let mut nodes = Vec::new();
        for pat in &d.nodes.0 {
            let found: Vec<u32> = topo
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| matches(pat, &n.name))
                .map(|(k, _)| k as u32)
                .collect();
            if found.is_empty() {
                return Err(fail(
                    ".nodes",
                    format!("{pat:?}: no node of the topology has this name or matches it"),
                ));
            }
            nodes.extend(found);
        }
        nodes.sort_unstable();
        nodes.dedup();
        for &n in &nodes {
            let node = &topo.nodes[n as usize];
            let want = match section {
                Section::Fabric => NodeKind::Switch,
                Section::Nic => NodeKind::Host,
            };
            if node.kind != want {
                return Err(fail(
                    ".nodes",
                    format!(
                        "{:?} is a {}: `{}` settings apply to {}",
                        node.name,
                        if node.kind == NodeKind::Host {
                            "host"
                        } else {
                            "switch"
                        },
                        section.key(),
                        if want == NodeKind::Host {
                            "hosts"
                        } else {
                            "switches"
                        }
                    ),
                ));
            }
            let ports: Vec<Option<u16>> = match &d.ports {
                None => vec![None],
                Some(ps) => {
                    let mut v = Vec::new();
                    for &p in ps {
                        if usize::from(p) >= node.ports.len() {
                            return Err(fail(
                                ".ports",
                                format!(
                                    "{p}: {:?} has ports 0-{}",
                                    node.name,
                                    node.ports.len().saturating_sub(1)
                                ),
                            ));
                        }
                        v.push(Some(p));
                    }
                    v
                }
            };
            for p in ports {
                let map = if window.always() {
                    &mut untimed
                } else {
                    &mut timed
                };
                map.entry((n, p, section)).or_default().push(i);
            }
        }
    }
    let partial = |i: usize, s: Section| -> toml::Table {
        match raw_entries.get(i).and_then(|t| t.get(s.key())) {
            Some(toml::Value::Table(t)) => t.clone(),
            _ => toml::Table::new(),
        }
    };
    // Decode and check one merged table for entry `i`.
    let decode = |i: usize, s: Section, t: toml::Table| -> Result<OverrideSetting, FileError> {
        let prefix = format!("override[{i}].{}", s.key());
        let at = |e: FileError| match spans.get(i) {
            Some(&off) => e.at(text, off),
            None => e,
        };
        let v = toml::Value::Table(t);
        let mut whole = base.clone();
        let setting = match s {
            Section::Fabric => {
                let f: FabricConfig = decode_value(file, v, &prefix).map_err(at)?;
                whole.fabric = f.clone();
                OverrideSetting::Fabric(Box::new(f))
            }
            Section::Nic => {
                let n: NicConfig = decode_value(file, v, &prefix).map_err(at)?;
                whole.nic = n.clone();
                OverrideSetting::Nic(Box::new(n))
            }
        };
        whole.validate().map_err(|e| {
            let k = e
                .key
                .strip_prefix(s.key())
                .map_or(e.key.clone(), |rest| format!("{prefix}{rest}"));
            at(FileError::new(file, &k, e.message))
        })?;
        Ok(setting)
    };
    let refuse = |i: usize, k: &str, m: &str| {
        let e = FileError::new(file, &format!("override[{i}].{k}"), m.to_string());
        match spans.get(i) {
            Some(&off) => e.at(text, off),
            None => e,
        }
    };
    // The merged table of an element without windows.
    let static_table = |n: u32, p: Option<u16>, s: Section| -> toml::Table {
        let mut t = base_raw(s);
        let mut layers: Vec<usize> = untimed.get(&(n, None, s)).cloned().unwrap_or_default();
        if p.is_some() {
            layers.extend(untimed.get(&(n, p, s)).cloned().unwrap_or_default());
        }
        for i in layers {
            crate::scenario::merge(&mut t, partial(i, s));
        }
        t
    };
    let mut out = Vec::new();
    let mut elements: Vec<Key> = untimed.keys().chain(timed.keys()).copied().collect();
    elements.sort_unstable();
    elements.dedup();
    for (n, p, s) in elements {
        let name = topo.nodes[n as usize].name.clone();
        let table = static_table(n, p, s);
        let own: Vec<usize> = untimed.get(&(n, p, s)).cloned().unwrap_or_default();
        let last = own.last().copied();
        let static_setting = match last {
            Some(i) => Some(decode(i, s, table.clone())?),
            None => None,
        };
        // What the element has without its own layers: its switch's
        // settings for a port, the global ones for a node.
        let above = match (s, p) {
            (Section::Fabric, Some(_)) => decode_plain(file, &static_table(n, None, s), s, base),
            (Section::Fabric, None) => OverrideSetting::Fabric(Box::new(base.fabric.clone())),
            (Section::Nic, _) => OverrideSetting::Nic(Box::new(base.nic.clone())),
        };
        if let (Some(i), Some(setting)) = (last, &static_setting) {
            check_scope(setting, &above, p, false, base).map_err(|(k, m)| refuse(i, &k, &m))?;
            out.push(ElementOverride {
                node: name.clone(),
                port: p,
                window: Window::default(),
                setting: setting.clone(),
            });
        }
        let reference = static_setting.unwrap_or(above);
        let mine = timed.get(&(n, p, s)).cloned().unwrap_or_default();
        for (x, &i) in mine.iter().enumerate() {
            for &j in &mine[..x] {
                if windows[i].overlaps(&windows[j]) {
                    return Err(refuse(
                        i,
                        "start",
                        &format!(
                            "overlaps override[{j}] on {name:?}: expected disjoint windows for one element"
                        ),
                    ));
                }
            }
            let mut t = table.clone();
            crate::scenario::merge(&mut t, partial(i, s));
            let setting = decode(i, s, t)?;
            check_scope(&setting, &reference, p, true, base).map_err(|(k, m)| refuse(i, &k, &m))?;
            out.push(ElementOverride {
                node: name.clone(),
                port: p,
                window: windows[i],
                setting,
            });
        }
    }
    Ok(out)
}

/// Decode a merged table whose layers were already checked (a switch's
/// settings under a port override); the global settings if it fails.
fn decode_plain(file: &Path, t: &toml::Table, s: Section, base: &SimConfig) -> OverrideSetting {
    match s {
        Section::Fabric => OverrideSetting::Fabric(Box::new(
            decode_value(file, toml::Value::Table(t.clone()), "fabric")
                .unwrap_or_else(|_| base.fabric.clone()),
        )),
        Section::Nic => OverrideSetting::Nic(Box::new(
            decode_value(file, toml::Value::Table(t.clone()), "nic")
                .unwrap_or_else(|_| base.nic.clone()),
        )),
    }
}

/// Check that an override changes only what its element (and, for timed
/// ones, a running device) can change. `Err((key, message))`.
fn check_scope(
    setting: &OverrideSetting,
    reference: &OverrideSetting,
    port: Option<u16>,
    live: bool,
    base: &SimConfig,
) -> Result<(), (String, String)> {
    let differs = |k: &str, why: &str| Err((k.to_string(), why.to_string()));
    match setting {
        OverrideSetting::Fabric(f) => {
            let g = &base.fabric;
            if f.pfc.quanta != g.pfc.quanta {
                return differs(
                    "fabric.pfc.quanta",
                    "the same on every switch: expected it only in [fabric]",
                );
            }
            if f.pfc.refresh != g.pfc.refresh {
                return differs(
                    "fabric.pfc.refresh",
                    "the same on every switch: expected it only in [fabric]",
                );
            }
            if f.pfc.response_time != g.pfc.response_time {
                return differs(
                    "fabric.pfc.response_time",
                    "the same on every switch: expected it only in [fabric]",
                );
            }
            if f.scheduler != g.scheduler {
                return differs(
                    "fabric.scheduler",
                    "the same on every switch: expected it only in [fabric]",
                );
            }
            if f.link_layer != g.link_layer || f.infiniband != g.infiniband {
                return differs(
                    "fabric.link_layer",
                    "the whole fabric's, with its [fabric.infiniband]: expected it only in [fabric]",
                );
            }
            let OverrideSetting::Fabric(r) = reference else {
                return Ok(());
            };
            let whole = "a setting of the whole switch: expected no `ports` with it";
            if port.is_some() && f.buffer != r.buffer {
                return differs("fabric.buffer", whole);
            }
            if port.is_some() && f.pfc.threshold != r.pfc.threshold {
                return differs("fabric.pfc.threshold", whole);
            }
            if live
                && (f.buffer.size != r.buffer.size
                    || f.buffer.reserve_per_port != r.buffer.reserve_per_port)
            {
                return differs(
                    "fabric.buffer",
                    "the buffer is carved once: during a run a switch changes only \
                     buffer.lossy_alpha and buffer.lossy_queue_limit, expected no start/end \
                     with size or reserve_per_port",
                );
            }
            let why = if live {
                "a switch cannot change it during a run: expected no start/end with it"
            } else {
                "a setting of the whole switch: expected no `ports` with it"
            };
            if port.is_some() && f.ecn != r.ecn {
                return differs("fabric.ecn", why);
            }
            if live && f.pfc.headroom != r.pfc.headroom {
                return differs("fabric.pfc.headroom", why);
            }
        }
        OverrideSetting::Nic(n) => {
            // Workloads turn these into flows with the global values.
            if n.priority != base.nic.priority {
                return differs(
                    "nic.priority",
                    "flows take it from their workload: expected it in [nic] or a workload's `priority`",
                );
            }
            if n.qps_per_pair != base.nic.qps_per_pair {
                return differs(
                    "nic.qps_per_pair",
                    "flows take it from their workload: expected it in [nic] or a workload's `qps_per_pair`",
                );
            }
            if !live {
                return Ok(());
            }
            let OverrideSetting::Nic(r) = reference else {
                return Ok(());
            };
            let mut a = (**n).clone();
            a.rx_drain_rate = r.rx_drain_rate;
            a.rx_buffer = r.rx_buffer;
            a.rx_xoff = r.rx_xoff;
            a.rx_xon = r.rx_xon;
            if a != **r {
                return differs(
                    "nic",
                    "a NIC changes only rx_drain_rate, rx_buffer, rx_xoff and rx_xon during a run: expected no start/end with other keys",
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_names_with_stars_and_marks() {
        assert!(matches("h1*", "h1"));
        assert!(matches("h1*", "h12"));
        assert!(!matches("h1*", "h21"));
        assert!(matches("leaf?", "leaf3"));
        assert!(!matches("leaf?", "leaf10"));
        assert!(matches("*", "anything"));
        assert!(matches("s*p*", "spine0p"));
        assert!(matches("h3", "h3"));
        assert!(!matches("h3", "h33"));
    }
}
