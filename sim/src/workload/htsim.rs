//! Import of htsim connection matrices.
//!
//! Format (htsim `sim/datacenter/connection_matrix.cpp` and the generators
//! in `connection_matrices/`): header lines `Nodes N`, `Connections C` and
//! optionally `Triggers T`; one line per flow
//! `src->dst [id k] [start <us>] size <bytes> [trigger T]
//! [send_done_trigger T] [recv_done_trigger T] [priority P]`; and trigger
//! lines `trigger id T oneshot|multishot|barrier N`.
//!
//! `src` and `dst` are host indices (htsim numbers hosts 0..N). A flow
//! with `trigger T` waits (see [`FlowSpec::after`]) for the flows that
//! activate `T` through `send_done_trigger` or `recv_done_trigger`: for a
//! `barrier` all of them (their count must match), for `oneshot` and
//! `multishot` exactly one (rocelab dependencies wait for all listed
//! flows, so "whichever finishes first" cannot be expressed). A triggered
//! flow's `start`, when given, is a lower bound. `failure` lines are not
//! supported yet and are refused. Flows are WRITEs of one message on QP 0
//! at priority 3 unless `priority` (0-7) says otherwise.

use std::collections::BTreeMap;
use std::path::Path;

use roce::time::{Duration, Instant};

use super::{FlowOp, FlowSpec};
use crate::input::FileError;
use crate::topology::NodeId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TriggerKind {
    OneShot,
    MultiShot,
    Barrier(u32),
}

/// Parse a connection matrix; `hosts` maps host indices to nodes.
pub fn parse(file: &Path, text: &str, hosts: &[NodeId]) -> Result<Vec<FlowSpec>, FileError> {
    let bad = |line: usize, msg: String| FileError {
        file: file.to_path_buf(),
        position: Some((line, 1)),
        key: None,
        message: msg,
    };
    let mut nodes: Option<u32> = None;
    let mut connections: Option<(usize, usize)> = None;
    let mut triggers: BTreeMap<u32, (usize, TriggerKind)> = BTreeMap::new();
    let mut flows: Vec<FlowSpec> = Vec::new();
    // Per flow: its trigger (if any), and per trigger its activators.
    let mut waits: Vec<Option<(usize, u32)>> = Vec::new();
    let mut activators: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let ln = i + 1;
        let line = raw.split('#').next().unwrap_or("").trim();
        let w: Vec<&str> = line.split_whitespace().collect();
        let Some(&first) = w.first() else { continue };
        let num = |s: Option<&&str>, what: &str| -> Result<u64, FileError> {
            s.and_then(|s| s.parse::<u64>().ok())
                .ok_or_else(|| bad(ln, format!("{what}: expected a whole number")))
        };
        match first.trim_end_matches(':') {
            "Nodes" => nodes = Some(num(w.get(1), "Nodes")? as u32),
            "Connections" => connections = Some((ln, num(w.get(1), "Connections")? as usize)),
            "Triggers" | "Grp" => {}
            "Failures" | "failure" => {
                return Err(bad(ln, "link failures in connection matrices are not supported: expected flows and triggers only".into()))
            }
            "trigger" => {
                if w.get(1) != Some(&"id") {
                    return Err(bad(ln, format!("{line:?}: expected `trigger id T oneshot|multishot|barrier N`")));
                }
                let id = num(w.get(2), "trigger id")? as u32;
                let kind = match w.get(3).copied() {
                    Some("oneshot") => TriggerKind::OneShot,
                    Some("multishot") => TriggerKind::MultiShot,
                    Some("barrier") => TriggerKind::Barrier(num(w.get(4), "barrier count")? as u32),
                    other => {
                        return Err(bad(ln, format!("trigger kind {other:?}: expected oneshot, multishot or barrier N")))
                    }
                };
                triggers.insert(id, (ln, kind));
            }
            _ => {
                let Some((s, d)) = first.split_once("->") else {
                    return Err(bad(ln, format!("{line:?}: expected a header (`Nodes`, `Connections`), a flow `src->dst ...` or `trigger id ...`")));
                };
                let host = |s: &str| -> Result<NodeId, FileError> {
                    let idx: usize = s
                        .parse()
                        .map_err(|_| bad(ln, format!("host {s:?}: expected a host index")))?;
                    hosts.get(idx).copied().ok_or_else(|| {
                        bad(ln, format!("host {idx}: the topology has {} hosts", hosts.len()))
                    })
                };
                let (src, dst) = (host(s)?, host(d)?);
                if src == dst {
                    return Err(bad(ln, format!("flow {first} to itself: expected two different hosts")));
                }
                let mut start: Option<Instant> = None;
                let mut size: Option<u64> = None;
                let mut trigger: Option<u32> = None;
                let mut priority = 3u8;
                let id = flows.len() as u32;
                let mut k = 1;
                while k < w.len() {
                    let value = w.get(k + 1);
                    match w[k] {
                        "id" => {
                            num(value, "id")?;
                        }
                        "start" => {
                            let v = value.ok_or_else(|| bad(ln, "start: expected microseconds".into()))?;
                            let d: Duration = format!("{v}us").parse().map_err(|_| {
                                bad(ln, format!("start {v:?}: expected microseconds"))
                            })?;
                            start = Some(Instant::ZERO + d);
                        }
                        "size" => size = Some(num(value, "size")?),
                        "trigger" => trigger = Some(num(value, "trigger")? as u32),
                        "send_done_trigger" | "recv_done_trigger" => {
                            let t = num(value, w[k])? as u32;
                            activators.entry(t).or_default().push(id);
                        }
                        "priority" => {
                            priority = num(value, "priority")?
                                .try_into()
                                .ok()
                                .filter(|&p: &u8| p < 8)
                                .ok_or_else(|| bad(ln, "priority: expected 0-7".into()))?;
                        }
                        other => {
                            return Err(bad(ln, format!("flow attribute {other:?}: expected id, start, size, trigger, send_done_trigger, recv_done_trigger or priority")))
                        }
                    }
                    k += 2;
                }
                let size = size
                    .filter(|&s| s > 0)
                    .ok_or_else(|| bad(ln, "missing or zero `size`: expected the flow's bytes".into()))?;
                if start.is_none() && trigger.is_none() {
                    return Err(bad(ln, "neither `start` nor `trigger`: expected one of them".into()));
                }
                waits.push(trigger.map(|t| (ln, t)));
                flows.push(FlowSpec {
                    id,
                    src,
                    dst,
                    size,
                    start: start.unwrap_or(Instant::ZERO),
                    op: FlowOp::Write,
                    message_size: size,
                    qp_index: 0,
                    priority,
                    group: None,
                    after: Vec::new(),
                    workload: 0,
                    post: None,
                    local: None,
                    landing: false,
                    delay: roce::time::Duration::ZERO,
                });
            }
        }
    }
    if let Some(n) = nodes {
        if n as usize > hosts.len() {
            return Err(bad(
                1,
                format!("Nodes {n}: the topology has only {} hosts", hosts.len()),
            ));
        }
    }
    if let Some((ln, c)) = connections {
        if c != flows.len() {
            return Err(bad(
                ln,
                format!("Connections {c}: the file lists {} flows", flows.len()),
            ));
        }
    }
    for (f, wait) in flows.iter_mut().zip(&waits) {
        let Some((ln, t)) = *wait else { continue };
        let (_, kind) = triggers.get(&t).ok_or_else(|| {
            bad(
                ln,
                format!("trigger {t} is not declared: expected a `trigger id {t} ...` line"),
            )
        })?;
        let acts = activators.get(&t).cloned().unwrap_or_default();
        match *kind {
            TriggerKind::Barrier(n) if n as usize != acts.len() => {
                return Err(bad(ln, format!("barrier trigger {t} counts {n}: {} flows activate it", acts.len())))
            }
            TriggerKind::OneShot | TriggerKind::MultiShot if acts.len() != 1 => {
                return Err(bad(ln, format!("trigger {t} is activated by {} flows: expected exactly one (use a barrier to wait for several)", acts.len())))
            }
            _ => {}
        }
        f.after = acts;
    }
    Ok(flows)
}
