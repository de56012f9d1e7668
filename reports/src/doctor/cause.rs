//! From symptoms to root causes: the checks report what each source shows;
//! this pass turns them into one finding per cause within one scope.
//!
//! Rules, in order:
//! 1. **PAUSE** findings (rx/tx pause of every port) become one finding per
//!    origin. A node (host, or switch with its `-pN` ports) that sends
//!    PAUSE while itself held less than half as long is an origin; nodes
//!    that both receive and send pass it on; nodes that only receive are
//!    victims. When the topology is known (a `results.json`'s port peers),
//!    the spread is followed link by link from the origin. When no node in
//!    the capture sends PAUSE, the one finding says the origin is beyond
//!    the capture. A host whose NIC sends PAUSE is thereby named as its
//!    ToR's cause.
//! 2. **Loss**: port drops are grouped per node (one finding per dropping
//!    node). Transport consequences (out-of-sequence, NAK sequence
//!    errors, ACK timeouts, retransmissions, unfinished or failed flows of
//!    a simulated run) are folded into the most important loss cause of
//!    the scope (drops, corruption, MTU drops, link flaps) instead of
//!    being reported again; with no such cause in the capture, they stay
//!    one finding per symptom.
//! 3. Everything else: findings of one symptom and title are merged, their
//!    subjects listed in `affects`.

use std::collections::{BTreeMap, BTreeSet};

use super::context::Context;
use super::counters::UNNAMED_HOST;
use super::counters::{prio_names, tags};
use super::finding::{Finding, Severity, Symptom};
use super::names::node_of;
use super::sim::{SimPort, SimVariant};
use super::sources::UNNAMED_SWITCH;
use super::wording::{pct, SENDS_NO_PAUSE};

/// Most evidence lines kept in one merged finding.
const MAX_EVIDENCE: usize = 12;

/// Consolidate the raw findings of one scope.
pub(super) fn consolidate(raw: Vec<Finding>, ctx: &Context) -> Vec<Finding> {
    let (pause, rest): (Vec<Finding>, Vec<Finding>) = raw
        .into_iter()
        .partition(|f| matches!(f.symptom, Symptom::RxPause | Symptom::TxPause));
    let mut out = pause_causes(pause, ctx);
    // A receiver taking most ECN marks is the congestion point of the
    // pause cause when there is one: evidence, not a second cause.
    let (slow, rest): (Vec<Finding>, Vec<Finding>) = rest
        .into_iter()
        .partition(|f| f.symptom == Symptom::SlowReceiver);
    let (loss, rest) = loss_causes(rest, ctx);
    out.extend(loss);
    for s in slow {
        match out.first_mut() {
            Some(p) => p.evidence.extend(s.evidence),
            None => out.push(s),
        }
    }
    out.extend(merge_alike(rest));
    fold_pause_into_origin(&mut out);
    fold_host_pause_into_storm_events(&mut out);
    fold_no_marks_into_kmin(&mut out);
    fold_tc_into_host_mismatch(&mut out);
    fold_into_deadlock(&mut out);
    fold_gid_choice_into_gid_table(&mut out);
    fold_no_marks_into_host(&mut out);
    cap_no_marks_under_fan_in(&mut out);
    fold_fan_in_into_missing_cnps(&mut out);
    out
}

/// Move finding `j` into finding `i` as evidence (`consequence: TITLE`
/// and its lines); returns the index `i` now has.
fn fold(out: &mut Vec<Finding>, i: usize, j: usize, raise: bool) -> usize {
    let e = out.remove(j);
    let i = if j < i { i - 1 } else { i };
    let f = &mut out[i];
    if raise {
        f.severity = f.severity.max(e.severity);
    }
    f.evidence.push(format!("consequence: {}", e.title));
    f.evidence.extend(e.evidence);
    cap_evidence(&mut f.evidence);
    for a in e.affects {
        if !f.affects.contains(&a) {
            f.affects.push(a);
        }
    }
    i
}

/// A deadlock found from the counters: the storm findings of the same
/// scope (ports pausing with nothing moving, a switch watchdog's stormed
/// queues) are its symptoms, folded in; a deadlock the run's own detector
/// reported (results.json) takes the counters' one in.
fn fold_into_deadlock(out: &mut Vec<Finding>) {
    let Some(mut i) = out
        .iter()
        .position(|f| f.symptom == Symptom::PfcDeadlock && f.title.contains("no origin outside"))
    else {
        return;
    };
    while let Some(j) = out
        .iter()
        .position(|f| f.symptom == Symptom::PfcStorm && !f.title.starts_with("host "))
    {
        i = fold(out, i, j, true);
    }
    // Nothing moves, so no queue is marked: no ECN marks are expected.
    if let Some(j) = out
        .iter()
        .position(|f| f.symptom == Symptom::EcnNotMarking && f.origin.is_none())
    {
        i = fold(out, i, j, false);
    }
    if let Some(j) = out
        .iter()
        .position(|f| f.symptom == Symptom::PfcDeadlock && !f.title.contains("no origin outside"))
    {
        // The detector names the cycle's members exactly: they stay the
        // affected ports.
        let members = out[j].affects.clone();
        let j = fold(out, j, i, true);
        out[j].affects = members;
    }
}

/// "The GID index in use is not the routable RoCEv2 IPv4 entry" (the
/// job's index against one `show_gids`) is the GID table finding's cause
/// seen from the job: one finding, the table's.
fn fold_gid_choice_into_gid_table(out: &mut Vec<Finding>) {
    let Some(mut i) = out
        .iter()
        .position(|f| f.symptom == Symptom::GidMisconfigured)
    else {
        return;
    };
    while let Some(j) = out.iter().position(|f| {
        f.symptom == Symptom::AckTimeout && f.title.starts_with("the GID index in use is not")
    }) {
        i = fold(out, i, j, true);
    }
}

/// A host whose NIC counted storm events (the firmware's stall
/// watermarks: its receive path stopped) is a pause storm, whatever its
/// PAUSE looked like between stalls: the slow-receiver reading of the
/// same host's PAUSE is evidence of the storm finding, not a second
/// cause that would contradict it.
fn fold_host_pause_into_storm_events(out: &mut Vec<Finding>) {
    while let Some((i, j)) = out.iter().enumerate().find_map(|(j, slow)| {
        if slow.symptom != Symptom::SlowReceiver {
            return None;
        }
        let node = slow.origin.as_deref().unwrap_or(&slow.subject);
        out.iter()
            .position(|f| f.symptom == Symptom::PfcStorm && f.subject == node)
            .map(|i| (i, j))
    }) {
        fold(out, i, j, false);
    }
}

/// No ECN marks anywhere while a host's NIC pauses: expected, since a
/// NIC's PAUSE is no switch queue ECN could mark; evidence of the host
/// cause, not a second cause.
fn fold_no_marks_into_host(out: &mut Vec<Finding>) {
    let Some(i) = out.iter().position(|f| {
        matches!(f.symptom, Symptom::SlowReceiver | Symptom::PfcStorm)
            && (f.title.starts_with("host ") || f.title.starts_with("this host"))
    }) else {
        return;
    };
    if let Some(j) = out
        .iter()
        .position(|f| f.symptom == Symptom::EcnNotMarking && f.origin.is_none())
    {
        fold(out, i, j, false);
    }
}

/// No ECN marks while the only PAUSE is a fan-in held to its own share:
/// the incast costs what its bytes cost at the receiver's rate whatever
/// ECN does, so the missing marks are worth a warning, no more.
fn cap_no_marks_under_fan_in(out: &mut [Finding]) {
    if !only_fan_in_pauses(out) {
        return;
    }
    for f in out
        .iter_mut()
        .filter(|f| f.symptom == Symptom::EcnNotMarking && f.origin.is_none())
    {
        if f.severity > Severity::Warning {
            f.severity = Severity::Warning;
            f.evidence.push("the only PAUSE is a fan-in held to its senders' share of the egress: the incast runs at the receiver's line rate either way, so the missing marks cost the victims on the held ports, not the incast".into());
        }
    }
}

/// A finding about PAUSE: a port's, a host's, or a switch queue's.
fn is_pause(f: &Finding) -> bool {
    matches!(
        f.symptom,
        Symptom::TxPause | Symptom::SwitchCongestion | Symptom::RxPause
    )
}

/// There is PAUSE, and all of it is a fan-in held to its senders' share.
fn only_fan_in_pauses(out: &[Finding]) -> bool {
    let mut pauses = out.iter().filter(|f| is_pause(f)).peekable();
    pauses.peek().is_some() && pauses.all(|f| f.title.contains("fan-in at switch"))
}

/// Switches mark ECN, no receiver answers with CNPs, and the only PAUSE
/// is a fan-in: the senders never learn of the queue the marks show
/// standing, so it grows to XOFF, which DCQCN would have held below (a
/// 2:1 fan-in with any DCQCN preset pauses nothing; without CNPs it
/// pauses 30 % of the time). The missing notification point is what to
/// touch first; the fan-in's PAUSE is its consequence.
fn fold_fan_in_into_missing_cnps(out: &mut Vec<Finding>) {
    let Some(mut i) = out.iter().position(|f| f.symptom == Symptom::CnpNotHandled) else {
        return;
    };
    if !only_fan_in_pauses(out) {
        return;
    }
    while let Some(j) = out.iter().position(is_pause) {
        i = fold(out, i, j, true);
    }
}

/// "The job's traffic class lands on a priority without PFC" (per
/// `mlnx_qos` file) is the same cause as the hosts mapping that traffic
/// class differently, when both are found: one finding, naming the hosts.
fn fold_tc_into_host_mismatch(out: &mut Vec<Finding>) {
    let is_hosts = |f: &Finding| {
        f.symptom == Symptom::LossyPriority
            && f.title.starts_with("the job's traffic class NCCL_IB_TC=")
    };
    let Some(i) = out.iter().position(is_hosts) else {
        return;
    };
    while let Some(j) = out.iter().position(|f| {
        f.symptom == Symptom::LossyPriority && f.subject.starts_with("NCCL_IB_TC=") && !is_hosts(f)
    }) {
        let e = out.remove(j);
        let i = if j < i { i - 1 } else { i };
        let f = &mut out[i];
        f.severity = f.severity.max(e.severity);
        f.evidence.push(format!("consequence: {}", e.title));
        f.evidence.extend(e.evidence);
        cap_evidence(&mut f.evidence);
    }
}

/// "No ECN marks anywhere" is the consequence of a switch that pauses
/// before its queue reaches Kmin, whose buffer is too small, or whose
/// ECN is off: one cause, reported once.
fn fold_no_marks_into_kmin(out: &mut Vec<Finding>) {
    let Some(i) = out.iter().position(|f| {
        (f.symptom == Symptom::BufferTooSmall
            && f.title.contains("before its queue reaches ECN's Kmin"))
            || (is_switch_config_cause(f)
                && f.symptom != Symptom::EcnTooEarly
                && f.severity >= Severity::Error)
    }) else {
        return;
    };
    let Some(j) = out
        .iter()
        .position(|f| f.symptom == Symptom::EcnNotMarking && f.origin.is_none())
    else {
        return;
    };
    let e = out.remove(j);
    let i = if j < i { i - 1 } else { i };
    let f = &mut out[i];
    f.severity = f.severity.max(e.severity);
    f.evidence.push(format!("consequence: {}", e.title));
    f.evidence
        .extend(e.evidence.into_iter().filter(|l| l.starts_with("np_")));
    cap_evidence(&mut f.evidence);
}

/// A switch's misconfiguration named as a cause, with the switch as its
/// origin: ECN off or Kmin beyond the pause point there, a buffer too
/// small, ECN marking too early.
fn is_switch_config_cause(f: &Finding) -> bool {
    f.origin.is_some()
        && matches!(
            f.symptom,
            Symptom::EcnNotMarking | Symptom::BufferTooSmall | Symptom::EcnTooEarly
        )
}

/// A misconfigured switch named as a cause (ECN off there, its buffer too
/// small), confirmed by the counters (error or worse), that is also the
/// origin of the scope's PAUSE: the pause is its consequence, folded in
/// as evidence (severity, affected ports, what the job feels), not
/// reported as a second cause.
fn fold_pause_into_origin(out: &mut Vec<Finding>) {
    let mut i = 0;
    while i < out.len() {
        let origin = out[i].origin.clone();
        // A configuration cause the counters confirm (error or worse)
        // takes in the PAUSE it explains; a possible one stays beside it.
        let is_cause = is_switch_config_cause(&out[i]) && out[i].severity >= Severity::Error;
        let pause = out.iter().enumerate().position(|(j, p)| {
            is_cause
                && j != i
                && matches!(
                    p.symptom,
                    Symptom::TxPause | Symptom::SwitchCongestion | Symptom::BufferTooSmall
                )
                && p.origin == origin
        });
        if let Some(j) = pause {
            let p = out.remove(j);
            if j < i {
                i -= 1;
            }
            let f = &mut out[i];
            f.severity = f.severity.max(p.severity);
            f.evidence.push(format!("consequence: {}", p.title));
            f.evidence.extend(p.evidence);
            cap_evidence(&mut f.evidence);
            for a in p.affects {
                if !f.affects.contains(&a) {
                    f.affects.push(a);
                }
            }
            f.impact = format!("{}; {}", f.impact, p.impact);
        }
        i += 1;
    }
}

/// Per node: the largest share of time (ppm; frames when no duration is
/// known) it was held (rx) and it held a peer (tx).
#[derive(Debug, Clone, Copy, Default)]
struct NodePause {
    rx: u64,
    tx: u64,
    rx_ppm: Option<u64>,
    tx_ppm: Option<u64>,
}

fn pause_causes(found: Vec<Finding>, ctx: &Context) -> Vec<Finding> {
    if found.is_empty() {
        return found;
    }
    let mut nodes: BTreeMap<String, NodePause> = BTreeMap::new();
    let mut switch_nodes: BTreeSet<String> = BTreeSet::new();
    // Port (source) -> held share, for the victims' list.
    let mut held: Vec<(String, String, u64, String)> = Vec::new();
    for v in &ctx.eth {
        let node = v.node();
        if node != v.label() || v.is_switch_port() {
            switch_nodes.insert(node.clone());
        }
        for tag in tags() {
            let (rx, rxd, tx, txd) = prio_names(&tag);
            let np = nodes.entry(node.clone()).or_default();
            for (is_rx, n, d) in [(true, &rx, &rxd), (false, &tx, &txd)] {
                let frames = v.get(n);
                if frames == 0 {
                    continue;
                }
                let share = v.pause_share(n, d);
                let ppm = share.as_ref().map(|s| s.ppm);
                let about = if share.as_ref().is_some_and(|s| s.estimated.is_some()) {
                    "about "
                } else {
                    ""
                };
                let weight = ppm.unwrap_or(frames);
                if is_rx {
                    np.rx = np.rx.max(weight);
                    np.rx_ppm = np.rx_ppm.max(ppm);
                    held.push((
                        v.label(),
                        node.clone(),
                        weight,
                        format!(
                            "{} {n} +{frames}{}{}",
                            v.label(),
                            if v.has(d) {
                                format!(", {d} +{} us", v.get(d))
                            } else {
                                String::new()
                            },
                            ppm.map(|p| format!(" (held {about}{})", pct(p)))
                                .unwrap_or_default()
                        ),
                    ));
                } else {
                    np.tx = np.tx.max(weight);
                    np.tx_ppm = np.tx_ppm.max(ppm);
                }
            }
        }
    }
    for v in &ctx.sim {
        for p in &v.ports {
            if !p.is_nic {
                switch_nodes.insert(p.node.clone());
            }
        }
    }
    let severity = found
        .iter()
        .map(|f| f.severity)
        .max()
        .unwrap_or(Severity::Info);
    let senders: Vec<(&String, &NodePause)> = nodes.iter().filter(|(_, p)| p.tx > 0).collect();
    let mut origins: Vec<String> = senders
        .iter()
        .filter(|(_, p)| p.rx.saturating_mul(2) < p.tx)
        .map(|(n, _)| (*n).clone())
        .collect();
    let looped = origins.is_empty() && !senders.is_empty();
    if looped {
        if let Some((n, _)) = senders.iter().max_by_key(|(_, p)| p.tx) {
            origins.push((*n).clone());
        }
    }
    held.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    // Who pauses whom, when the links are known: the peer of a held port
    // is the node that sent it PAUSE.
    let peer: BTreeMap<String, String> = ctx
        .sim
        .iter()
        .flat_map(|v| v.ports.iter())
        .map(|p| (p.source.clone(), p.peer.clone()))
        .collect();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (port, node, _, _) in &held {
        if let Some(p) = peer.get(port) {
            edges.entry(p.clone()).or_default().insert(node.clone());
        }
    }
    let mut out = Vec::new();
    if origins.is_empty() {
        // Only receivers in the capture: the origin is beyond it; one
        // finding per priority, every held port listed.
        let mut merged = merge_alike(found);
        for f in &mut merged {
            f.severity = severity;
            f.impact = impact_of_hold(held.first(), &ctx.sim);
        }
        return merged;
    }
    // The node of a finding's subject (`SOURCE TAG`), as its view says.
    let view_node: BTreeMap<String, String> =
        ctx.eth.iter().map(|v| (v.label(), v.node())).collect();
    let node_of_subject = |subject: &str| -> String {
        let src = subject_source(subject);
        view_node.get(src).cloned().unwrap_or_else(|| node_of(src))
    };
    for origin in &origins {
        let np = nodes.get(origin).copied().unwrap_or_default();
        let is_switch = switch_nodes.contains(origin);
        let mut f = found
            .iter()
            .find(|f| f.symptom == Symptom::TxPause && node_of_subject(&f.subject) == *origin)
            .cloned()
            .unwrap_or_else(|| found[0].clone());
        f.symptom = Symptom::TxPause;
        f.id = Symptom::TxPause.id();
        f.playbook = Symptom::TxPause.number();
        f.severity = severity;
        f.subject = origin.clone();
        f.origin = Some(origin.clone());
        // Evidence: the origin's own PAUSE, then the most-held ports.
        let mut ev: Vec<String> = found
            .iter()
            .filter(|g| g.symptom == Symptom::TxPause && node_of_subject(&g.subject) == *origin)
            .flat_map(|g| {
                g.evidence
                    .iter()
                    .map(move |e| format!("{}: {e}", g.subject))
            })
            .filter(|e| !e.contains("other source(s) show"))
            .collect();
        cap_evidence(&mut ev);
        // Spread: breadth first from the origin along known links.
        let mut reach: Vec<String> = Vec::new();
        let mut seen: BTreeSet<String> = BTreeSet::from([origin.clone()]);
        let mut frontier = vec![origin.clone()];
        let mut chain = Vec::new();
        while !frontier.is_empty() {
            let mut next = Vec::new();
            for n in &frontier {
                if let Some(vs) = edges.get(n) {
                    let new: Vec<String> = vs
                        .iter()
                        .filter(|x| seen.insert((*x).clone()))
                        .cloned()
                        .collect();
                    if !new.is_empty() {
                        chain.push(format!("{n} pauses {}", new.join(", ")));
                        reach.extend(new.iter().cloned());
                        next.extend(new);
                    }
                }
            }
            frontier = next;
        }
        if !chain.is_empty() {
            ev.push(format!("PAUSE spreads: {}", chain.join("; ")));
        }
        let victims = held.len();
        ev.extend(held.iter().take(6).map(|h| h.3.clone()));
        if victims > 6 {
            ev.push(format!("... and {} more held ports", victims - 6));
        }
        f.evidence = ev;
        f.affects = std::iter::once(origin.clone())
            .chain(held.iter().map(|h| h.0.clone()))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let share = np
            .tx_ppm
            .map(|p| format!(" {} of the time", pct(p)))
            .unwrap_or_default();
        if looped {
            f.title = format!("PAUSE circulates: every node that sends it is also held; {origin} sends the most{share}");
        } else if is_switch {
            f.title = format!(
                "PAUSE starts at {} (its buffer crosses XOFF{share}){}",
                switch_name(origin),
                if victims == 0 {
                    " on the ports it pauses; the devices it holds are outside the capture"
                        .to_string()
                } else {
                    format!(" and spreads to {victims} port(s)")
                }
            );
            let hot = ctx
                .sim
                .iter()
                .flat_map(|v| v.ports.iter())
                .filter(|p| p.node == *origin)
                .max_by_key(|p| p.max_queue_bytes)
                .filter(|p| p.max_queue_bytes > 0);
            f.check_first = match hot {
                Some(p) => format!(
                    "what converges on {origin}'s egress towards {} (its queue reached {} bytes): an incast or an oversubscribed link; then ECN/DCQCN marking below the XOFF threshold so senders slow down before PFC acts",
                    p.peer, p.max_queue_bytes
                ),
                None => format!("the congested egress of {} (which traffic converges there: incast, oversubscription), and whether that egress is itself held by PAUSE from downstream; ECN marking thresholds below XOFF so DCQCN acts before PFC; the victims' paths share the paused priority", switch_name(origin)),
            };
            f.why = "a switch sends PAUSE on an ingress when the buffer it holds for that ingress and priority crosses XOFF; the upstream ports then stop the whole priority, so flows that never touch the congested egress wait too (head-of-line blocking) and, when the upstream switch fills in turn, the pause climbs tier by tier".into();
            if let Some((q, kmin)) = below_kmin(origin, ctx) {
                f.title = format!(
                    "PAUSE starts at switch {origin} before its queue reaches ECN's Kmin: its buffer crosses XOFF{share} while the deepest queue stays at {q} bytes, below Kmin {kmin} bytes (buffer too small for its thresholds); spreads to {victims} port(s)"
                );
                f.evidence.insert(
                    0,
                    format!(
                        "results.json: {origin}'s deepest egress queue {q} bytes < its ECN Kmin {kmin} bytes on the paused priority: XOFF is reached first, so ECN never marks there"
                    ),
                );
                f.check_first = format!(
                    "{origin}'s buffer size and PFC thresholds against its ECN Kmin/Kmax: XOFF must sit above Kmin so that ECN marks first; give the switch the buffer its thresholds assume, or lower Kmin/Kmax to fit the buffer it has"
                );
                f.why = "ECN marks only on queues deeper than Kmin, PFC pauses when the ingress buffer crosses XOFF; with XOFF reached before the queue gets to Kmin, DCQCN never hears of the congestion and PFC does all the work (Zhu et al., SIGCOMM 2015: Kmin must be below the PFC threshold)".into();
            }
        } else {
            f.title = format!(
                "{}'s NIC sends PAUSE{share}: it cannot drain what arrives, and is the cause of its ToR's pause",
                host_name(origin)
            );
            f.why = "a NIC sends PAUSE when its own receive buffer for the priority crosses XOFF, so the bottleneck is inside this host (PCIe, memory, a receiver that does not keep up); the switch then holds traffic for it and pauses its own upstream".into();
        }
        f.impact = impact_of_hold(held.first(), &ctx.sim);
        if is_switch && !looped && below_kmin(origin, ctx).is_none() {
            fan_in(&mut f, origin, &held, ctx);
            by_design(&mut f, origin, &held, ctx);
        }
        // The cause the origin's PAUSE names.
        let cause = if looped {
            deadlock_suspect(&nodes, &switch_nodes)
                .map(|(sev, loop_nodes)| describe_deadlock(&mut f, sev, &loop_nodes))
                .unwrap_or(Symptom::TxPause)
        } else if is_switch && below_kmin(origin, ctx).is_some() {
            Symptom::BufferTooSmall
        } else if is_switch {
            Symptom::SwitchCongestion
        } else {
            host_cause(&mut f, origin, ctx)
        };
        f.symptom = cause;
        f.id = cause.id();
        // A host whose NIC sends PAUSE is the playbook's #2 whatever it
        // is named.
        f.playbook = cause.number().or(Some(2).filter(|_| !is_switch && !looped));
        out.push(f);
    }
    out
}

/// A cycle of paused queues, from counters alone: every node that sends
/// PAUSE is also held (no origin outside them), at least two of them are
/// switches, and each of those both sends and is held half the time or
/// more (measured durations). `(severity, the switches)`: critical when
/// one is held 90 % of the time or more (nothing moves), else error (a
/// watchdog or a route change broke it now and then).
fn deadlock_suspect(
    nodes: &BTreeMap<String, NodePause>,
    switch_nodes: &BTreeSet<String>,
) -> Option<(Severity, Vec<String>)> {
    let looping: Vec<(&String, &NodePause)> = nodes
        .iter()
        .filter(|(n, p)| {
            switch_nodes.contains(*n)
                && p.tx_ppm.is_some_and(|t| t >= 500_000)
                && p.rx_ppm.is_some_and(|r| r >= 500_000)
        })
        .collect();
    if looping.len() < 2 {
        return None;
    }
    let top = looping
        .iter()
        .filter_map(|(_, p)| p.tx_ppm.min(p.rx_ppm))
        .max()
        .unwrap_or(0);
    let sev = if top >= 900_000 {
        Severity::Critical
    } else {
        Severity::Error
    };
    Some((sev, looping.iter().map(|(n, _)| (*n).clone()).collect()))
}

/// Turn a circulating-PAUSE finding into the deadlock it is.
fn describe_deadlock(f: &mut Finding, sev: Severity, loop_nodes: &[String]) -> Symptom {
    f.severity = f.severity.max(sev);
    f.title = format!(
        "PFC deadlock: switches {} each send PAUSE and are held by it most of the time, with no origin outside them: a cycle of paused queues that does not drain by itself",
        loop_nodes.join(", ")
    );
    f.impact = "traffic on the priority stops and stays stopped: throughput drops to zero with no drops and no errors while the PAUSE counters keep climbing; the job hangs until timeouts or a restart (a PFC watchdog breaks the cycle by dropping)".into();
    f.check_first = "the routes through these switches: which paused queues wait on each other in a loop (traffic going down to a leaf and up again, a ring, routes not in up-down order, stale routes after a link failure); make routing deadlock-free. A PFC watchdog breaks a deadlock that has formed, not its cause".into();
    f.why = "PFC holds a queue until the next hop drains it; when every paused queue waits on another paused queue, none can drain (a cyclic buffer dependency: Hu et al., HotNets 2016); a PAUSE with an origin outside the loop (a host, a congested egress) would show a sender that is not held".into();
    Symptom::PfcDeadlock
}

/// The cause behind a host whose NIC sends PAUSE: a NIC that keeps PAUSE
/// asserted with few, long pauses (each frame refreshing the last, about
/// half a pause quantum apart, never released) is a pause storm from a
/// stuck receive path; a NIC that pauses and releases again and again
/// (short pauses) drains slower than its link delivers: a slow receiver.
/// Without duration counters the two cannot be told apart: a slow
/// receiver, said as such.
fn host_cause(f: &mut Finding, origin: &str, ctx: &Context) -> Symptom {
    // (share ppm, microseconds per PAUSE frame) of the most-pausing tag.
    let mut best: Option<(u64, u64, String)> = None;
    for v in ctx
        .eth
        .iter()
        .filter(|v| v.node() == origin && !v.is_switch_port())
    {
        for tag in tags() {
            let (_, _, tx, txd) = prio_names(&tag);
            let frames = v.get(&tx);
            if frames == 0 || !v.has(&txd) {
                continue;
            }
            let Some(ppm) = v.ppm_of_interval(v.get(&txd)) else {
                continue;
            };
            let per = v.get(&txd) / frames;
            if best.as_ref().map_or(true, |b| ppm > b.0) {
                best = Some((ppm.min(1_000_000), per, tag));
            }
        }
    }
    match best {
        Some((ppm, per, tag)) if ppm >= STORM_SHARE_PPM && per >= STORM_US_PER_FRAME => {
            f.title = format!(
                "{}'s NIC keeps PAUSE asserted on {tag} {} of the time, about {per} us per PAUSE frame (refreshed, not released): a pause storm from a stuck receive path, and the cause of its ToR's pause",
                host_name(origin),
                pct(ppm)
            );
            f.evidence.push(format!(
                "{per} us of pause per PAUSE frame: a NIC that drains releases PAUSE within microseconds (XON), one that is stuck refreshes it before it expires"
            ));
            f.impact = "everything sent to the stuck host stops, and so do healthy senders that share a switch buffer with it: their other flows stall for as long as the storm lasts".into();
            f.check_first = "the PFC watchdog on the switch ports facing hosts (it stops honouring a port that pauses without end), then the host whose NIC sends the PAUSE: its driver, firmware and health (kernel log); reset the stuck NIC".into();
            f.why = "a NIC sends PAUSE when its receive buffer for the priority crosses XOFF and releases it once it drains; PAUSE held nearly all the time in long, refreshed frames means nothing drains: a stuck NIC, driver or receiver, not congestion".into();
            Symptom::PfcStorm
        }
        other => {
            let how = other
                .map(|(ppm, per, _)| {
                    format!(
                        " {} of the time and releases it again after about {per} us each time",
                        pct(ppm)
                    )
                })
                .unwrap_or_default();
            f.title = format!(
                "{} is a slow receiver: its NIC sends PAUSE{how}: it cannot drain what arrives as fast as its link delivers it, and is the cause of its ToR's pause",
                host_name(origin)
            );
            f.check_first = format!("{}'s side: PCIe width and speed (lspci LnkSta against LnkCap, outbound_pci_stalled_*), NUMA placement of the NIC and the buffers, memory bandwidth and CPU load, receive buffers posted (rx_out_of_buffer); `mlnx_qos` buffer sizes and cable_len", host_name(origin));
            Symptom::SlowReceiver
        }
    }
}

/// `host NAME`, or `this host` when the capture does not name it (one
/// unnamed NIC's counters, e.g. `before.txt` and `after.txt`).
fn host_name(node: &str) -> String {
    if node == UNNAMED_HOST {
        "this host".to_string()
    } else {
        format!("host {node}")
    }
}

/// `switch NAME`, or `the switch` when the capture does not name it.
fn switch_name(node: &str) -> String {
    if node == UNNAMED_SWITCH {
        "the switch".to_string()
    } else {
        format!("switch {node}")
    }
}

/// Share of time (ppm) from which a host's PAUSE may be a storm.
const STORM_SHARE_PPM: u64 = 500_000;

/// Microseconds of pause per PAUSE frame from which a host's PAUSE is
/// held rather than cycled: a quarter of the longest pause (65535 quanta
/// of 512 bit times, 335 us at 100 Gbit/s), well above the few
/// microseconds of an XOFF/XON cycle of a draining receiver.
const STORM_US_PER_FRAME: u64 = 50;

/// A switch of a simulated run that paused while its deepest egress queue
/// stayed below the ECN Kmin of the priorities it paused on: `(queue,
/// Kmin)` in bytes. None without the facts (real captures, older files).
fn below_kmin(origin: &str, ctx: &Context) -> Option<(u64, u64)> {
    let ports: Vec<&SimPort> = ctx
        .sim
        .iter()
        .flat_map(|v| v.ports.iter())
        .filter(|p| p.node == origin && !p.is_nic)
        .collect();
    let paused: BTreeSet<u8> = ports
        .iter()
        .flat_map(|p| {
            (0u8..8).filter(|i| {
                p.counters
                    .get(&format!("tx_prio{i}_pause"))
                    .copied()
                    .unwrap_or(0)
                    > 0
            })
        })
        .collect();
    let kmin = ports
        .iter()
        .find_map(|p| p.ecn.as_ref())?
        .iter()
        .filter(|e| paused.contains(&e.priority))
        .map(|e| e.kmin_bytes)
        .min()?;
    let q = ports.iter().map(|p| p.max_queue_bytes).max()?;
    (q < kmin).then_some((q, kmin))
}

/// Tolerance (ppm) of the fan-in share: the held share may exceed
/// 1 - 1/k by this much and still be the incast's own arithmetic.
const FAN_IN_TOLERANCE_PPM: u64 = 50_000;

/// A switch that pauses k >= 2 of its ports converges k ingresses on one
/// egress (an incast): while the incast lasts, each sender's fair share of
/// that egress is 1/k of line rate, so PFC holds it about 1 - 1/k of the
/// time by design and the receiver's link still runs full. When the
/// most-held port is held no more than that (plus
/// [`FAN_IN_TOLERANCE_PPM`]), the pause is congestion, not lost capacity:
/// at most `warning`, and the finding says what the incast and its
/// victims feel. A share beyond it is capacity lost to PAUSE and keeps the
/// thresholds of the share of time.
fn fan_in(f: &mut Finding, origin: &str, held: &[(String, String, u64, String)], ctx: &Context) {
    let k = ctx
        .eth
        .iter()
        .filter(|v| v.node() == origin && v.label() != origin)
        .filter(|v| {
            tags().any(|t| {
                let (_, _, tx, _) = prio_names(&t);
                v.get(&tx) > 0
            })
        })
        .count() as u64;
    let Some((port, _, w, line)) = held.first() else {
        return;
    };
    if k < 2 || !line.contains("(held ") {
        return;
    }
    let fair = 1_000_000 - 1_000_000 / k;
    if *w > fair + FAN_IN_TOLERANCE_PPM {
        f.evidence.push(format!(
            "{port} is held {}, more than the 1 - 1/{k} = {} a {k}:1 fan-in at {origin} explains: capacity is lost to PAUSE",
            pct(*w),
            pct(fair)
        ));
        return;
    }
    f.severity = f.severity.min(Severity::Warning);
    f.title = format!(
        "{k}:1 fan-in at {} (an incast): PFC holds the senders to their share of the congested egress (most-held port {} of the time, 1 - 1/{k} = {})",
        switch_name(origin),
        pct(*w),
        pct(fair)
    );
    f.evidence.push(format!(
        "{k} ports of {origin} send PAUSE; the most-held port, {port}, is held {}, within {} of the 1 - 1/{k} = {} that a {k}:1 fan-in leaves each sender",
        pct(*w),
        pct(FAN_IN_TOLERANCE_PPM),
        pct(fair)
    ));
    f.impact = format!(
        "the incast's senders share one egress: each gets about 1/{k} of line rate while the receiver's link runs full, so the incast takes as long as its bytes at the receiver's line rate whatever PFC does; the cost of the PAUSE falls on victims: any other flow on the held ports and priority waits the same {} of the time (head-of-line blocking; a ring all-reduce step through such a port takes {}x as long)",
        pct(*w),
        ratio_1_over_1_minus(*w)
    );
}

/// Held share (ppm) below which PAUSE beside a working DCQCN is the
/// backstop of the first round trips, not lost capacity: 50 %.
const BACKSTOP_PPM: u64 = 500_000;

/// Share of line rate (ppm) from which a congested egress runs full: 90 %.
const FULL_LINK_PPM: u64 = 900_000;

/// Congestion that PFC and ECN handle as designed is worth a warning, no
/// more: either DCQCN is at work (receivers send CNPs and senders act on
/// them) and no port is held half the time or more, so PFC only catches
/// the first round trips of a burst; or the host behind the origin's
/// busiest egress (the one that received what that port sent) received
/// at least [`FULL_LINK_PPM`] of its link speed (its `ethtool IFACE`)
/// over the interval, so PFC shares a full link among its senders and the
/// congestion costs what the load costs. The finding says which.
fn by_design(f: &mut Finding, origin: &str, held: &[(String, String, u64, String)], ctx: &Context) {
    if f.severity <= Severity::Warning {
        return;
    }
    let (sent, handled) = ctx.rdma.iter().fold((0u64, 0u64), |(s, h), r| {
        (
            s.saturating_add(r.get("np_cnp_sent")),
            h.saturating_add(r.get("rp_cnp_handled")),
        )
    });
    let top = held.first().map_or(0, |h| h.2);
    let measured = held.first().is_some_and(|h| h.3.contains("(held "));
    if sent > 0 && handled > 0 && measured && top < BACKSTOP_PPM {
        f.severity = Severity::Warning;
        f.evidence.push(format!(
            "DCQCN is at work (np_cnp_sent +{sent}, rp_cnp_handled +{handled}) and no port is held {} of the time or more: PFC catches the first round trips of the burst while the senders slow down, congestion control as designed",
            pct(BACKSTOP_PPM)
        ));
        return;
    }
    // The origin's busiest egress, and the host behind it: the host
    // whose received bytes are what that port sent (within 1 %).
    let Some(egress) = ctx
        .eth
        .iter()
        .filter(|v| v.is_switch_port() && v.node() == origin)
        .max_by_key(|v| v.get("tx_bytes_phy"))
    else {
        return;
    };
    let sent = egress.get("tx_bytes_phy");
    let Some(host) = ctx.eth.iter().find(|v| {
        let got = v.get("rx_bytes_phy");
        !v.is_switch_port() && sent > 0 && got.abs_diff(sent) * 100 <= sent
    }) else {
        return;
    };
    // Its link speed, from its `ethtool IFACE`.
    let Some(mbps) = ctx
        .links
        .iter()
        .filter(|(file, _)| super::names::host_from_path(file) == host.label())
        .flat_map(|(_, l)| l.iter().filter_map(|e| e.speed_mbps))
        .max()
    else {
        return;
    };
    let Some(ps) = host.interval_ps.filter(|p| *p > 0) else {
        return;
    };
    let bps = u128::from(host.get("rx_bytes_phy")) * 8 * 1_000_000_000_000 / u128::from(ps);
    let ppm =
        u64::try_from(bps * 1_000_000 / (u128::from(mbps) * 1_000_000).max(1)).unwrap_or(u64::MAX);
    if ppm >= FULL_LINK_PPM {
        f.severity = Severity::Warning;
        f.evidence.push(format!(
            "{}, {origin}'s busiest egress, feeds {}: it received at {} of its {} link {} (rx_bytes_phy against the speed `ethtool` gives): the congested link runs full, so PFC is sharing it among its senders, not losing capacity",
            egress.label(),
            host.label(),
            pct(ppm.min(1_000_000)),
            super::counters::format_bps(mbps.saturating_mul(1_000_000)),
            host.how()
        ));
    }
}

/// 1 / (1 - share) as `a.bcd`, share in ppm.
fn ratio_1_over_1_minus(ppm: u64) -> String {
    let keep = 1_000_000u64.saturating_sub(ppm).max(1);
    let milli = 1_000_000_000u64 / keep;
    format!("{}.{:03}", milli / 1000, milli % 1000)
}

/// The source part of a subject like `h3 prio3`.
fn subject_source(subject: &str) -> &str {
    subject.split(' ').next().unwrap_or(subject)
}

/// What the most-held port's share costs a bandwidth-bound collective.
fn impact_of_hold(top: Option<&(String, String, u64, String)>, sim: &[SimVariant]) -> String {
    let mut s = String::new();
    if let Some((port, _, w, line)) = top {
        if line.contains("(held ") && *w < 1_000_000 {
            let keep = 1_000_000 - *w;
            // Step time of a bandwidth-bound ring all-reduce scales as
            // 1 / (available share of line rate).
            let factor_milli = 1_000_000_000u64 / keep.max(1);
            s = format!(
                "the most-held port, {port}, could send at most {} of line rate; a bandwidth-bound all-reduce step over it takes {}.{:03}x as long (step time ~ 2(n-1)/n x S / B, B reduced by the paused share); flows sharing the paused priority wait although their own path is not congested",
                pct(keep),
                factor_milli / 1000,
                factor_milli % 1000
            );
        }
    }
    for v in sim {
        for (g, step, ideal) in &v.groups {
            if let (Some(st), Some(id)) = (step, ideal) {
                if *id > 0 {
                    s.push_str(&format!(
                        "; {g}: step {} vs ideal {} ({}.{:02}x)",
                        roce::time::Duration::from_ps(*st),
                        roce::time::Duration::from_ps(*id),
                        st / id,
                        (st % id) * 100 / id
                    ));
                }
            }
        }
    }
    if s.is_empty() {
        s = "senders on the paused priority stall in bursts; collectives run at the pace of the most-held link: step time inflates and jitters, with no error anywhere".into();
    }
    s
}

fn is_loss_cause(f: &Finding) -> bool {
    f.origin.is_some()
        && matches!(
            f.symptom,
            Symptom::PacketLoss
                | Symptom::Corruption
                | Symptom::MtuMismatch
                | Symptom::LinkDegraded
                | Symptom::LinkDown
                | Symptom::HeadroomShort
        )
}

fn is_consequence(f: &Finding) -> bool {
    (f.symptom == Symptom::PacketLoss && f.origin.is_none())
        || (f.symptom == Symptom::AckTimeout && f.subject != "job log" && !f.title.contains("GID"))
}

fn loss_causes(found: Vec<Finding>, ctx: &Context) -> (Vec<Finding>, Vec<Finding>) {
    let (mut causes, rest): (Vec<Finding>, Vec<Finding>) =
        found.into_iter().partition(is_loss_cause);
    let (consequences, rest): (Vec<Finding>, Vec<Finding>) =
        rest.into_iter().partition(is_consequence);
    // One cause per node and symptom; buffer drops (packet-loss) of a
    // scope are one cause, named after the node that drops the most.
    let mut drops: BTreeMap<String, u64> = BTreeMap::new();
    for f in causes.iter().filter(|f| f.symptom == Symptom::PacketLoss) {
        *drops
            .entry(f.origin.clone().unwrap_or_default())
            .or_default() += drops_in(f);
    }
    let worst_node = drops
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(n, _)| n.clone());
    causes.sort_by_key(|f| (f.origin != worst_node, std::cmp::Reverse(drops_in(f))));
    // Both ends of a link that went down are one cause.
    let link_node = causes
        .iter()
        .filter(|f| f.symptom == Symptom::LinkDown)
        .max_by_key(|f| drops_in(f))
        .and_then(|f| f.origin.clone());
    let mut by_node: BTreeMap<(Symptom, String), Finding> = BTreeMap::new();
    for f in causes.drain(..) {
        let node = if f.symptom == Symptom::PacketLoss {
            worst_node.clone().unwrap_or_default()
        } else if f.symptom == Symptom::LinkDown {
            link_node.clone().unwrap_or_default()
        } else {
            f.origin.clone().unwrap_or_default()
        };
        let key = (f.symptom, node);
        match by_node.get_mut(&key) {
            Some(g) => absorb(g, f),
            None => {
                let mut g = f;
                g.affects = vec![g.subject.clone()];
                let subj = g.subject.clone();
                for e in &mut g.evidence {
                    if !e.starts_with(&subj) {
                        *e = format!("{subj}: {e}");
                    }
                }
                g.subject = key.1.clone();
                g.origin = Some(key.1.clone());
                by_node.insert(key, g);
            }
        }
    }
    let mut causes: Vec<Finding> = by_node.into_values().collect();
    for f in &mut causes {
        cap_evidence(&mut f.evidence);
        if f.symptom == Symptom::PacketLoss {
            let pfc_off = !f.evidence.iter().any(|e| e.contains("lossless"));
            let node = f.subject.clone();
            let others: BTreeSet<String> = f
                .affects
                .iter()
                .map(|a| node_of(a))
                .filter(|n| *n != node)
                .collect();
            let also = if others.is_empty() {
                String::new()
            } else {
                format!(
                    " (and {} further dropping node(s): {})",
                    others.len(),
                    others.into_iter().collect::<Vec<_>>().join(", ")
                )
            };
            let prios: BTreeSet<String> = f
                .evidence
                .iter()
                .filter_map(|e| e.split_whitespace().find(|w| w.starts_with("rx_prio")))
                .filter_map(|w| w.strip_prefix("rx_").and_then(|w| w.split('_').next()))
                .map(str::to_string)
                .collect();
            let has_prio = !prios.is_empty();
            let on = if prios.is_empty() {
                String::new()
            } else {
                format!(" on {}", prios.into_iter().collect::<Vec<_>>().join(", "))
            };
            // A port that drops without pausing while its peers pause.
            let silent = f.evidence.iter().find_map(|e| {
                let (port, rest) = e.split_once(SENDS_NO_PAUSE)?;
                let prio = rest.split_whitespace().next()?;
                let (_, tail) = rest.split_once(" while ")?;
                let (who, _) = tail.split_once(" pause on ")?;
                let port = port.rsplit(": ").next().unwrap_or(port);
                Some((port.to_string(), prio.to_string(), who.to_string()))
            });
            // Drops on a priority without PFC where PFC runs on other
            // priorities or ports: RoCE on a lossy priority (#10), a
            // misconfiguration, not congestion loss.
            let pfc_elsewhere = ctx.eth.iter().any(|v| !v.pfc_prios().is_empty());
            if pfc_off && (silent.is_some() || pfc_elsewhere || has_prio) {
                f.symptom = Symptom::LossyPriority;
                f.id = Symptom::LossyPriority.id();
                f.playbook = Symptom::LossyPriority.number();
                f.check_first = "PFC and the priority mapping on the dropping port against the others: PFC enabled on the lossless priority on every switch port and NIC, the trust mode (dscp/pcp) and DSCP-to-priority map, so that RoCE lands on a priority that pauses; the per-priority discard counters show the port that drops what the others pause".into();
            }
            f.title = match (silent, pfc_off) {
                (Some((port, prio, who)), true) => format!(
                    "{port} drops {prio} frames and sends no PAUSE while {who} pause on {prio}: PFC off on that port, RoCE runs lossy there{also}"
                ),
                (Some((port, prio, who)), false) => format!(
                    "{port} drops {prio} frames although PFC is on: it sends no PAUSE while {who} pause on {prio}{also}"
                ),
                (None, true) => {
                    format!("{node} drops frames{on} with PFC off: RoCE runs lossy there{also}")
                }
                (None, false) => {
                    format!("{node} drops frames{on} although PFC is on (lossless priority){also}")
                }
            };
        }
    }
    // The simulated run's flow outcomes.
    let mut sim_ev = Vec::new();
    let mut unfinished = 0usize;
    for v in &ctx.sim {
        sim_ev.extend(sim_facts(v));
        unfinished += v.unfinished.len();
    }
    let mut out = Vec::new();
    if causes.is_empty() {
        let mut merged = merge_alike(consequences);
        if !sim_ev.is_empty() {
            if let Some(first) = merged.first_mut() {
                first.evidence.extend(sim_ev);
                if unfinished > 0 {
                    first.severity = first.severity.max(Severity::Critical);
                }
            } else if unfinished > 0 {
                let mut f = Finding::new(Severity::Error, Symptom::CompletionError, "run");
                f.title = format!("{unfinished} flow(s) did not finish");
                f.evidence = sim_ev;
                f.impact = "the transfers never complete: a training step waiting on them hangs until its timeout".into();
                f.check_first = "the flows' paths: pause that never ends (storm, deadlock), a link down, or retries exhausted".into();
                f.why = "a flow that neither completes nor fails by the end of the run is stuck behind something".into();
                merged.push(f);
            }
        }
        out.extend(merged);
        return (out, rest);
    }
    causes.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(drops_in(b).cmp(&drops_in(a)))
    });
    let top = &mut causes[0];
    let mut conseq_lines = Vec::new();
    let mut hosts = BTreeSet::new();
    for c in &consequences {
        hosts.insert(c.subject.clone());
        for e in c.evidence.iter().filter(|e| e.contains('+')) {
            conseq_lines.push(format!("{}: {e}", c.subject));
        }
    }
    cap_evidence(&mut conseq_lines);
    top.evidence.extend(sim_ev);
    if !conseq_lines.is_empty() {
        top.evidence.push(format!(
            "consequence on {} host(s): go-back-N retransmissions and timeouts",
            hosts.len()
        ));
        top.evidence.extend(conseq_lines);
    }
    for h in hosts {
        if !top.affects.contains(&h) {
            top.affects.push(h);
        }
    }
    if unfinished > 0 {
        top.severity = Severity::Critical;
    }
    if let Some(imp) = loss_impact(ctx) {
        top.impact = imp;
    }
    out.extend(causes);
    (out, rest)
}

fn drops_in(f: &Finding) -> u64 {
    f.evidence
        .iter()
        .flat_map(|e| e.split_whitespace())
        .filter_map(|w| w.strip_prefix('+').and_then(|n| n.parse::<u64>().ok()))
        .fold(0u64, u64::saturating_add)
}

/// Flow outcomes of a simulated run, as evidence lines.
fn sim_facts(v: &SimVariant) -> Vec<String> {
    let mut ev = Vec::new();
    if !v.unfinished.is_empty() {
        let failed = v.unfinished.iter().filter(|f| f.failed).count();
        let sample: Vec<String> = v
            .unfinished
            .iter()
            .take(4)
            .map(|f| {
                format!(
                    "flow {} {}->{} {} of {} bytes acked{}",
                    f.id,
                    f.src,
                    f.dst,
                    f.acked,
                    f.size,
                    if f.failed { ", failed" } else { "" }
                )
            })
            .collect();
        ev.push(format!(
            "results.json {}: {} of {} flows did not complete ({failed} failed) by the end of the run ({}, stop reason {}): {}{}",
            v.name,
            v.unfinished.len(),
            v.flows_total,
            roce::time::Duration::from_ps(v.sim_time_ps),
            if v.stop_reason.is_empty() { "?" } else { &v.stop_reason },
            sample.join("; "),
            if v.unfinished.len() > 4 { "; ..." } else { "" }
        ));
    }
    if v.drops > 0 || v.retransmitted_packets > 0 {
        let share = if v.frames_sent > 0 {
            format!(
                " ({} of the {} frames sent)",
                pct(u64::try_from(
                    u128::from(v.retransmitted_packets) * 1_000_000 / u128::from(v.frames_sent)
                )
                .unwrap_or(u64::MAX)),
                v.frames_sent
            )
        } else {
            String::new()
        };
        ev.push(format!(
            "results.json {}: drops {}, retransmitted_packets {}{share}, goodput {:.2} Gbit/s",
            v.name,
            v.drops,
            v.retransmitted_packets,
            v.goodput_bps / 1e9
        ));
    }
    ev
}

/// What the loss costs, in numbers from the simulated run when given.
fn loss_impact(ctx: &Context) -> Option<String> {
    let v = ctx
        .sim
        .iter()
        .find(|v| v.drops > 0 || !v.unfinished.is_empty())?;
    Some(format!(
        "go-back-N resends the whole window after each loss, so the link carries retransmissions instead of progress: {} packets resent, goodput {:.2} Gbit/s, {} of {} flows unfinished after {}; in a collective, every rank waits for the slowest flow, so the step time is set by these",
        v.retransmitted_packets,
        v.goodput_bps / 1e9,
        v.unfinished.len(),
        v.flows_total,
        roce::time::Duration::from_ps(v.sim_time_ps)
    ))
}

/// Merge `f` into `into`: severity max, evidence appended (deduplicated),
/// subject added to `affects`.
fn absorb(into: &mut Finding, f: Finding) {
    into.severity = into.severity.max(f.severity);
    if !into.affects.contains(&f.subject) {
        into.affects.push(f.subject.clone());
    }
    for e in f.evidence {
        let line = if e.starts_with(&f.subject) {
            e
        } else {
            format!("{}: {e}", f.subject)
        };
        if !into.evidence.contains(&line) {
            into.evidence.push(line);
        }
    }
}

/// One finding per (symptom, title): the same symptom on several ports
/// is reported once with every port in `affects`.
pub(super) fn merge_alike(found: Vec<Finding>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let mut merged: Vec<bool> = Vec::new();
    for f in found {
        match out
            .iter_mut()
            .enumerate()
            .find(|(_, g)| g.symptom == f.symptom && g.title == f.title && g.severity == f.severity)
        {
            Some((i, g)) => {
                merged[i] = true;
                if g.affects.is_empty() {
                    g.affects.push(g.subject.clone());
                    let subj = g.subject.clone();
                    for e in &mut g.evidence {
                        if !e.starts_with(&subj) {
                            *e = format!("{subj}: {e}");
                        }
                    }
                }
                absorb(g, f);
            }
            None => {
                out.push(f);
                merged.push(false);
            }
        }
    }
    for (f, m) in out.iter_mut().zip(merged) {
        if m && f.affects.len() > 1 {
            f.subject = format!("{} and {} more", f.affects[0], f.affects.len() - 1);
        }
        cap_evidence(&mut f.evidence);
    }
    out
}

fn cap_evidence(ev: &mut Vec<String>) {
    if ev.len() > MAX_EVIDENCE {
        let more = ev.len() - (MAX_EVIDENCE - 1);
        ev.truncate(MAX_EVIDENCE - 1);
        ev.push(format!("... and {more} more lines like these"));
    }
}
