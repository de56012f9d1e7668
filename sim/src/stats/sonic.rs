//! A switch's buffer and ECN configuration as SONiC's own tools list them,
//! from the switch's effective settings, so that a capture holds what an
//! operator collects from a real switch besides its counters:
//!
//! * [`mmuconfig`]: `mmuconfig -l` (also `show buffer configuration`):
//!   one `Pool: NAME` and one `Profile: NAME` block each, a two-column
//!   table of `key  value` rows (keys sorted) between two dash rules as
//!   wide as the columns. Pools: `ingress_lossless_pool` (the shared pool
//!   in bytes: buffer less reserves and headroom; `mode` `dynamic` for the
//!   dynamic threshold, `static` for fixed XOFF bytes; `xoff` the headroom
//!   carved for the lossless priorities) and `egress_lossy_pool`.
//!   Profiles: one `pg_lossless_<speed Mbit/s>_<cable>m_profile` per
//!   distinct (speed, cable, headroom) of the switch's lossless ports,
//!   SONiC's naming (`xoff` its headroom, `size` the reserve, `dynamic_th`
//!   the threshold's alpha as a power of two or `static_th` the XOFF
//!   bytes, `xon` or `xon_offset`), then `egress_lossy_profile`.
//! * [`ecnconfig`]: `ecnconfig -l` (one `Profile: NAME` block per WRED
//!   profile: `ecn` `ecn_all`, `green_min_threshold` and
//!   `green_max_threshold` in bytes, `green_drop_probability` in percent,
//!   `wred_green_enable`), then, per priority, what `ecnconfig -q N`
//!   prints: `ECN status:` and `queue N: on|off`.
//!
//! Units: bytes, percent; speeds in Mbit/s as SONiC writes them.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::config::{PfcThreshold, SimConfig};
use crate::fabric::switch::Mmu;
use crate::results::{EcnSetting, PortRecord};
use crate::topology::Topology;

/// One `Pool: NAME` / `Profile: NAME` block: the title, then the rows
/// between dash rules as wide as each column, two spaces between.
fn block(out: &mut String, title: &str, rows: &[(&str, String)]) {
    let kw = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    let vw = rows.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let rule = format!("{}  {}", "-".repeat(kw), "-".repeat(vw));
    // Writing to a String cannot fail.
    let _ = writeln!(out, "{title}\n{rule}");
    for (k, v) in rows {
        let _ = writeln!(out, "{k:<kw$}  {v}");
    }
    let _ = writeln!(out, "{rule}\n");
}

/// `alpha` as SONiC's `dynamic_th`: the nearest power of two, as its
/// exponent (1/8 is `-3`, 1 is `0`).
fn dynamic_th(alpha: f64) -> i32 {
    if alpha > 0.0 && alpha.is_finite() {
        alpha.log2().round().clamp(-8.0, 8.0) as i32
    } else {
        0
    }
}

/// `mmuconfig -l` of switch node `ni` of `topo` under `config` (see the
/// module docs), or `None` when the switch's settings give no buffer
/// (the run would have rejected them).
pub fn mmuconfig(topo: &Topology, config: &SimConfig, ni: usize) -> Option<String> {
    let mmu: Mmu = crate::fabric::switch_mmu(topo, config, ni).ok()?;
    let node = &topo.nodes[ni];
    let lossless: Vec<u8> = (0..node.ports.len())
        .map(|p| {
            (0u8..8)
                .filter(|q| mmu.is_lossless(p as u16, *q))
                .fold(0u8, |m, q| m | (1 << q))
        })
        .collect();
    let carved: u64 = mmu
        .headroom
        .iter()
        .zip(&lossless)
        .map(|(h, m)| h.saturating_mul(u64::from(m.count_ones())))
        .fold(0, u64::saturating_add);
    let mut out = String::new();
    let mode = match mmu.threshold {
        PfcThreshold::Static { .. } => "static",
        PfcThreshold::Dynamic { .. } => "dynamic",
    };
    block(
        &mut out,
        "Pool: ingress_lossless_pool",
        &[
            ("mode", mode.to_string()),
            ("size", mmu.shared_size.to_string()),
            ("type", "ingress".to_string()),
            ("xoff", carved.to_string()),
        ],
    );
    block(
        &mut out,
        "Pool: egress_lossy_pool",
        &[
            ("mode", "dynamic".to_string()),
            ("size", mmu.shared_size.to_string()),
            ("type", "egress".to_string()),
        ],
    );
    // One lossless profile per (speed, cable, headroom) of lossless ports.
    let mut seen: BTreeSet<(u64, u64, u64)> = BTreeSet::new();
    for (pi, link) in node.ports.iter().enumerate() {
        if lossless.get(pi).copied().unwrap_or(0) == 0 {
            continue;
        }
        let link = &topo.links[link.0 as usize];
        let cable = link
            .cable_m
            .map(u64::from)
            .unwrap_or(link.delay.as_ps() / 5_000);
        let key = (link.rate.bps() / 1_000_000, cable, mmu.headroom[pi]);
        if !seen.insert(key) {
            continue;
        }
        let mut rows = vec![("pool", "ingress_lossless_pool".to_string())];
        match &mmu.threshold {
            PfcThreshold::Static { xoff, xon } => {
                rows.push(("static_th", xoff.bytes().to_string()));
                rows.push(("xon", xon.bytes().to_string()));
            }
            PfcThreshold::Dynamic {
                alpha,
                resume_offset,
            } => {
                rows.push(("dynamic_th", dynamic_th(*alpha).to_string()));
                rows.push(("xon_offset", resume_offset.bytes().to_string()));
            }
        }
        rows.push(("size", mmu.reserve.to_string()));
        rows.push(("xoff", key.2.to_string()));
        rows.sort_by(|a, b| a.0.cmp(b.0));
        block(
            &mut out,
            &format!("Profile: pg_lossless_{}_{}m_profile", key.0, key.1),
            &rows,
        );
    }
    let mut rows = vec![("pool", "egress_lossy_pool".to_string())];
    match mmu.lossy_limit {
        u64::MAX => rows.push(("dynamic_th", dynamic_th(mmu.lossy_alpha).to_string())),
        limit => rows.push(("static_th", limit.to_string())),
    }
    rows.push(("size", "0".to_string()));
    rows.sort_by(|a, b| a.0.cmp(b.0));
    block(&mut out, "Profile: egress_lossy_profile", &rows);
    Some(out)
}

/// `ecnconfig -l` and `ecnconfig -q N` of one switch: `ports` are its
/// port records (their `ecn`: the switch's marking at the end of the run,
/// after overrides), `config` the run's settings. A priority's queue is
/// `on` when every port of the switch marks on it, with the thresholds of
/// its first port; a WRED profile is listed for every priority some
/// switch of the run marks on (the switch's own thresholds, else the
/// fabric-wide ones: a profile switched off on a queue stays defined), named
/// `AZURE_LOSSLESS` when there is one, `AZURE_LOSSLESS_<N>` per priority
/// otherwise. Queues are listed for the lossless and the marking
/// priorities.
pub fn ecnconfig(ports: &[&PortRecord], config: &SimConfig) -> String {
    let own = |p: u8| -> Option<&EcnSetting> {
        let mut it = ports.iter().map(|r| {
            r.ecn
                .as_ref()
                .and_then(|e| e.iter().find(|s| s.priority == p))
        });
        let first = it.next()??;
        it.all(|x| x.is_some()).then_some(first)
    };
    let global = |p: u8| config.fabric.ecn.iter().find(|e| e.priority == p);
    let mut prios: BTreeSet<u8> = config.fabric.ecn.iter().map(|e| e.priority).collect();
    for r in ports {
        prios.extend(r.ecn.iter().flatten().map(|e| e.priority));
        if let Some(l) = &r.pfc_priorities {
            prios.extend(l.iter().copied());
        }
    }
    if config.fabric.pfc.enabled {
        prios.extend(config.fabric.pfc.priorities.iter().copied());
    }
    let profiles: Vec<(u8, u64, u64, f64)> = prios
        .iter()
        .filter_map(|&p| match own(p) {
            Some(e) => Some((p, e.kmin_bytes, e.kmax_bytes, e.pmax)),
            None => global(p).map(|e| (p, e.kmin.bytes(), e.kmax.bytes(), e.pmax)),
        })
        .collect();
    let mut out = String::new();
    let single = profiles.len() == 1;
    for (p, kmin, kmax, pmax) in &profiles {
        let name = if single {
            "AZURE_LOSSLESS".to_string()
        } else {
            format!("AZURE_LOSSLESS_{p}")
        };
        let percent = (pmax * 100.0).round().clamp(0.0, 100.0) as u64;
        block(
            &mut out,
            &format!("Profile: {name}"),
            &[
                ("ecn", "ecn_all".to_string()),
                ("green_drop_probability", percent.to_string()),
                ("green_max_threshold", kmax.to_string()),
                ("green_min_threshold", kmin.to_string()),
                ("wred_green_enable", "true".to_string()),
            ],
        );
    }
    for p in &prios {
        let on = if own(*p).is_some() { "on" } else { "off" };
        let _ = writeln!(out, "ECN status:\nqueue {p}: {on}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PrioCounters;

    fn port(ecn: Option<Vec<EcnSetting>>) -> PortRecord {
        PortRecord {
            node: "sw0".into(),
            port: 0,
            peer: "h0".into(),
            is_nic: false,
            prio: vec![PrioCounters::default(); 8],
            rx_discards: 0,
            fault_drops: 0,
            ecn_marked: 0,
            max_queue_bytes: 0,
            max_headroom_bytes: 0,
            tx_pause_storm_warning_events: 0,
            tx_pause_storm_error_events: 0,
            errors: Default::default(),
            pfc_priorities: Some(vec![3]),
            ecn,
            load_balancing: None,
            infiniband: None,
        }
    }

    #[test]
    fn ecnconfig_lists_the_profile_and_the_queue_state() {
        let config = SimConfig::default();
        let on = port(Some(vec![EcnSetting {
            priority: 3,
            kmin_bytes: 1000,
            kmax_bytes: 5000,
            pmax: 1.0,
        }]));
        let s = ecnconfig(&[&on], &config);
        assert!(s.starts_with("Profile: AZURE_LOSSLESS\n----------------------  -------\n"));
        assert!(s.contains("\ngreen_min_threshold     1000\n"), "{s}");
        assert!(s.contains("\ngreen_drop_probability  100\n"), "{s}");
        assert!(s.ends_with("ECN status:\nqueue 3: on\n"), "{s}");
        // ECN off at this switch: the fabric's profile stays listed, the
        // queue is off.
        let off = port(Some(Vec::new()));
        let s = ecnconfig(&[&off], &config);
        assert!(s.contains("\ngreen_min_threshold     400000\n"), "{s}");
        assert!(s.ends_with("ECN status:\nqueue 3: off\n"), "{s}");
    }

    #[test]
    fn mmuconfig_blocks_have_sonic_rules_and_profile_names() {
        let mut topo = Topology::new();
        let sw = topo.add_node("sw0", crate::topology::NodeKind::Switch);
        for h in ["h0", "h1"] {
            let n = topo.add_node(h, crate::topology::NodeKind::Host);
            topo.add_link(
                sw,
                n,
                crate::topology::LinkProps {
                    rate: roce::time::Rate::from_gbps(100),
                    delay: roce::time::Duration::from_ns(25),
                    mtu: 4096,
                    cable_m: Some(5),
                },
            )
            .unwrap();
        }
        let config = SimConfig::default();
        let s = mmuconfig(&topo, &config, sw.0 as usize).unwrap();
        assert!(
            s.starts_with("Pool: ingress_lossless_pool\n----  --------\nmode  dynamic\nsize  "),
            "{s}"
        );
        assert!(
            s.contains("\nProfile: pg_lossless_100000_5m_profile\n"),
            "{s}"
        );
        assert!(s.contains("\ndynamic_th  -3\n"), "{s}");
        assert!(s.contains("\nProfile: egress_lossy_profile\n"), "{s}");
    }
}
