//! Checks that compare the switches of one run with each other: a switch
//! that never marks ECN while the others do.
//!
//! Facts come from a rocelab `results.json` (per switch port: the
//! switch's effective `ecn` thresholds after overrides, `ecn_marked`,
//! `max_queue_bytes`, per-priority bytes). Contract: a finding names the
//! switch (`origin`), the priority, its deepest queue against the
//! thresholds the other switches mark at, and the marks on both sides;
//! sizes are bytes.

use std::collections::BTreeMap;

use super::context::Context;
use super::finding::{Finding, Severity, Symptom};
use super::sim::{SimEcn, SimPort, SimVariant};

/// Run these checks.
pub(super) fn run(ctx: &Context, out: &mut Vec<Finding>) {
    for v in &ctx.sim {
        ecn_off_switch(v, out);
    }
}

/// What one switch of a run shows about ECN.
struct SwitchEcn<'a> {
    name: &'a str,
    /// Marking settings after overrides (`None`: the file does not say).
    settings: Option<&'a [SimEcn]>,
    /// Frames it marked, all ports.
    marked: u64,
    /// Its port with the deepest egress queue.
    hot: &'a SimPort,
    /// Bytes it sent per priority.
    tx_bytes: [u64; 8],
}

impl SwitchEcn<'_> {
    fn marks(&self, prio: u8) -> Option<&SimEcn> {
        self.settings?.iter().find(|e| e.priority == prio)
    }
}

fn switches(v: &SimVariant) -> Vec<SwitchEcn<'_>> {
    let mut by: BTreeMap<&str, Vec<&SimPort>> = BTreeMap::new();
    for p in v.ports.iter().filter(|p| !p.is_nic) {
        by.entry(p.node.as_str()).or_default().push(p);
    }
    by.into_iter()
        .filter_map(|(name, ports)| {
            let hot = *ports.iter().max_by_key(|p| (p.max_queue_bytes, p.port))?;
            let mut tx_bytes = [0u64; 8];
            for p in &ports {
                for (i, b) in tx_bytes.iter_mut().enumerate() {
                    *b = b.saturating_add(
                        p.counters
                            .get(&format!("tx_prio{i}_bytes"))
                            .copied()
                            .unwrap_or(0),
                    );
                }
            }
            Some(SwitchEcn {
                name,
                settings: ports.iter().find_map(|p| p.ecn.as_deref()),
                marked: ports
                    .iter()
                    .fold(0u64, |a, p| a.saturating_add(p.ecn_marked)),
                hot,
                tx_bytes,
            })
        })
        .collect()
}

/// A switch that carries traffic on a priority the other switches mark
/// ECN on, but has no marking there itself (known from its settings), or
/// (files without settings) marks nothing while queueing at least as deep
/// as a switch that marks.
fn ecn_off_switch(v: &SimVariant, out: &mut Vec<Finding>) {
    let sw = switches(v);
    if sw.len() < 2 {
        return;
    }
    let known = sw.iter().all(|s| s.settings.is_some());
    for s in &sw {
        let q = s.hot.max_queue_bytes;
        let others: Vec<&SwitchEcn<'_>> = sw.iter().filter(|o| o.name != s.name).collect();
        let (prio, kmin, kmax, markers) = if known {
            // The first priority the others mark on, that this switch
            // carries and does not mark.
            let found = (0u8..8).find_map(|p| {
                let m: Vec<&SwitchEcn<'_>> = others
                    .iter()
                    .copied()
                    .filter(|o| o.marks(p).is_some())
                    .collect();
                (s.marks(p).is_none() && !m.is_empty() && s.tx_bytes[usize::from(p)] > 0)
                    .then_some((p, m))
            });
            let Some((p, m)) = found else { continue };
            let kmin = m
                .iter()
                .filter_map(|o| o.marks(p))
                .map(|e| e.kmin_bytes)
                .min();
            let kmax = m
                .iter()
                .filter_map(|o| o.marks(p))
                .map(|e| e.kmax_bytes)
                .min();
            (Some(p), kmin, kmax, m)
        } else {
            // No settings: compare with the switches that did mark.
            let m: Vec<&SwitchEcn<'_>> = others.iter().copied().filter(|o| o.marked > 0).collect();
            let shallowest = m.iter().map(|o| o.hot.max_queue_bytes).min();
            match shallowest {
                Some(min_q) if s.marked == 0 && q >= min_q && q > 0 => (None, None, None, m),
                _ => continue,
            }
        };
        let sev = match (kmin, kmax) {
            (_, Some(kx)) if q >= kx => Severity::Error,
            (Some(kn), _) if q >= kn => Severity::Warning,
            (None, None) => Severity::Warning,
            _ => Severity::Info,
        };
        let on = prio.map(|p| format!(" on prio{p}")).unwrap_or_default();
        let mut f = Finding::new(sev, Symptom::EcnNotMarking, s.name);
        f.origin = Some(s.name.to_string());
        f.affects = vec![s.name.to_string()];
        let names: Vec<&str> = markers.iter().map(|o| o.name).collect();
        f.title = match kmax {
            Some(kx) => format!(
                "ECN marking is off at switch {}{on} while {} mark{}: its queue reached {q} bytes ({}Kmax {kx} bytes) without a mark",
                s.name,
                list_names(&names),
                if names.len() == 1 { "s" } else { "" },
                if q >= kx { "past " } else { "below " }
            ),
            None => format!(
                "switch {} never marks ECN while {} under the same load do{}: ECN looks off there",
                s.name,
                list_names(&names),
                if names.len() == 1 { "es" } else { "" }
            ),
        };
        match prio {
            Some(p) => f.evidence.push(format!(
                "results.json {}: {} has no ECN marking on prio{p} after overrides (its `ecn` lists {}), while {} mark prio{p} from Kmin {} to Kmax {} bytes",
                v.name,
                s.name,
                describe(s.settings.unwrap_or_default()),
                list_names(&names),
                kmin.unwrap_or(0),
                kmax.unwrap_or(0)
            )),
            None => f.evidence.push(format!(
                "results.json {}: no ECN settings recorded; compared by marks",
                v.name
            )),
        }
        f.evidence.push(format!(
            "{}: ecn_marked {} over its ports; deepest egress queue {} bytes on {} (towards {}); prio{} sent {} bytes",
            s.name,
            s.marked,
            q,
            s.hot.source,
            s.hot.peer,
            prio.unwrap_or(3),
            s.tx_bytes[usize::from(prio.unwrap_or(3))]
        ));
        for o in markers.iter().take(4) {
            f.evidence.push(format!(
                "{}: ecn_marked {}, deepest egress queue {} bytes on {}",
                o.name, o.marked, o.hot.max_queue_bytes, o.hot.source
            ));
        }
        f.impact = format!(
            "DCQCN cannot slow the flows that converge on {}: its queue grows to the PFC XOFF point and PAUSE does the work ECN should, holding the upstream ports (congestion spreading, victim flows on the priority); the CNPs come only from the switches that mark, later and fewer",
            s.name
        );
        f.check_first = format!(
            "the ECN/WRED profile of {}'s RoCE queue{on}: marking enabled, with Kmin/Kmax below the PFC XOFF threshold, as on {}",
            s.name,
            list_names(&names)
        );
        f.why = "a switch marks CE on ECN-capable frames leaving a queue deeper than Kmin, with rising probability up to Kmax and every frame beyond; a switch whose queue went past the Kmax at which its peers mark, with not one mark, has marking off for that priority (DCQCN, Zhu et al., SIGCOMM 2015: ECN must mark below XOFF so that senders slow down before PFC acts)".into();
        out.push(f);
    }
}

fn describe(e: &[SimEcn]) -> String {
    if e.is_empty() {
        return "no priority".into();
    }
    let v: Vec<String> = e.iter().map(|x| format!("prio{}", x.priority)).collect();
    v.join(", ")
}

fn list_names(n: &[&str]) -> String {
    match n {
        [] => "no other switch".into(),
        [a] => (*a).to_string(),
        _ => format!("{} and {}", n[..n.len() - 1].join(", "), n[n.len() - 1]),
    }
}
