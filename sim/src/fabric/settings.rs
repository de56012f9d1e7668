//! The settings of one element of the fabric: a switch's, a switch
//! port's or a host's, its untimed `[[override]]` entries over the
//! global ones, and what the models make of them (PFC priority masks, ECN
//! and classification tables, forwarding tables, the buffer's carving).

use super::event::NONE;
use super::switch::Mmu;
use crate::config::{
    mlx5_headroom, ConfigError, EcnConfig, FabricConfig, HeadroomConfig, NicConfig,
    OverrideSetting, SimConfig,
};
use crate::topology::{NodeId, Routes, Topology};

/// The fabric settings of switch `node` (port `port`) without windows:
/// the last untimed override entry for exactly that element, else (for a
/// port) its switch's, else the global ones. Returns the entry index too
/// (`NONE` for the global settings or the switch's).
pub(crate) fn static_fabric<'c>(
    cfg: &'c SimConfig,
    node: &str,
    port: Option<u16>,
) -> (&'c FabricConfig, u32) {
    let find = |p: Option<u16>| {
        cfg.overrides.iter().enumerate().rev().find_map(|(i, o)| {
            match (
                &o.setting,
                o.window.always() && o.node == node && o.port == p,
            ) {
                (OverrideSetting::Fabric(f), true) => Some((&**f, i as u32)),
                _ => None,
            }
        })
    };
    if let Some(x) = find(port) {
        return x;
    }
    if port.is_some() {
        if let Some((f, _)) = find(None) {
            return (f, NONE);
        }
    }
    (&cfg.fabric, NONE)
}

/// The NIC settings of host `node` without windows, and their entry.
pub(crate) fn static_nic<'c>(cfg: &'c SimConfig, node: &str) -> (&'c NicConfig, u32) {
    cfg.overrides
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, o)| match &o.setting {
            OverrideSetting::Nic(n) if o.window.always() && o.node == node => {
                Some((&**n, i as u32))
            }
            _ => None,
        })
        .unwrap_or((&cfg.nic, NONE))
}

/// PFC priorities of a fabric configuration as a bit set.
pub(crate) fn pfc_mask(f: &FabricConfig) -> u8 {
    if f.pfc.enabled {
        f.pfc.priorities.iter().fold(0u8, |m, &p| m | (1 << p))
    } else {
        0
    }
}

/// ECN settings per priority.
pub(crate) fn ecn_table(f: &FabricConfig) -> [Option<EcnConfig>; 8] {
    let mut ecn: [Option<EcnConfig>; 8] = Default::default();
    for e in &f.ecn {
        ecn[usize::from(e.priority)] = Some(e.clone());
    }
    ecn
}

/// The union of the lossless priorities a switch port ever has (its
/// settings without windows and every timed override of it or its
/// switch): the priorities its headroom is carved for.
pub(crate) fn pfc_mask_union(cfg: &SimConfig, node: &str, port: u16) -> u8 {
    let mut m = pfc_mask(static_fabric(cfg, node, Some(port)).0);
    for o in &cfg.overrides {
        if let OverrideSetting::Fabric(f) = &o.setting {
            if o.node == node && (o.port.is_none() || o.port == Some(port)) {
                m |= pfc_mask(f);
            }
        }
    }
    m
}

/// A switch's ingress classification, per port the priority a frame
/// marked `p` is queued in: empty when every port maps each priority to
/// itself (the common case), so that arrivals skip the lookup.
pub(crate) fn classify_table(maps: Vec<[u8; 8]>) -> Vec<[u8; 8]> {
    const IDENTITY: [u8; 8] = [0, 1, 2, 3, 4, 5, 6, 7];
    if maps.iter().all(|m| *m == IDENTITY) {
        Vec::new()
    } else {
        maps
    }
}

/// One switch's forwarding table from `routes`: per destination host an
/// (offset, count) into the flat list of egress ports, where each distinct
/// port set appears once (a k=32 fat tree's edge switch has 8,192
/// destinations and three sets).
pub(crate) fn switch_table(
    routes: &Routes,
    node: u32,
    n_hosts: usize,
) -> (Vec<(u32, u16)>, Vec<u16>) {
    let mut route = Vec::with_capacity(n_hosts);
    let mut hops = Vec::new();
    // The entry of each set seen, by the routes' set id.
    let mut seen: std::collections::HashMap<u32, (u32, u16)> = Default::default();
    let mut last = (u32::MAX, (0, 0));
    for d in 0..n_hosts as u32 {
        let id = routes.set_id(NodeId(node), d);
        let entry = if id == last.0 {
            last.1
        } else {
            *seen.entry(id).or_insert_with(|| {
                let h = routes.next_hops(NodeId(node), d);
                let e = (hops.len() as u32, h.len() as u16);
                hops.extend_from_slice(h);
                e
            })
        };
        last = (id, entry);
        route.push(entry);
    }
    (route, hops)
}

/// The memory management unit of switch node `ni` under `cfg` (its own
/// settings, overrides without windows over the global ones). The one
/// place the buffer's carving is decided: [`super::World::build`] builds
/// with it and the scenario checker calls it, so both reject the same
/// files. Errors (under `fabric.buffer.size`) when reserves and headroom
/// do not fit the buffer.
pub(crate) fn switch_mmu(topo: &Topology, cfg: &SimConfig, ni: usize) -> Result<Mmu, ConfigError> {
    let node = &topo.nodes[ni];
    let fab = static_fabric(cfg, &node.name, None).0;
    let headroom: Vec<u64> = (0..node.ports.len())
        .map(|pi| {
            let own = static_fabric(cfg, &node.name, Some(pi as u16)).0;
            match own.pfc.headroom {
                HeadroomConfig::Fixed { size } => size.bytes(),
                HeadroomConfig::Computed => {
                    let link = &topo.links[node.ports[pi].0 as usize];
                    let cable = link
                        .cable_m
                        .map(u64::from)
                        .unwrap_or(link.delay.as_ps() / 5_000);
                    mlx5_headroom(link.rate, cable, u64::from(link.mtu) + 18)
                }
            }
        })
        .collect();
    // Headroom is carved for every priority a port is ever lossless on
    // (timed overrides included).
    let carve: Vec<u8> = (0..node.ports.len())
        .map(|pi| pfc_mask_union(cfg, &node.name, pi as u16))
        .collect();
    Mmu::with_port_priorities(
        fab.buffer.size.bytes(),
        fab.buffer.reserve_per_port.bytes(),
        headroom,
        carve,
        fab.pfc.threshold.clone(),
        fab.buffer.lossy_alpha,
        fab.buffer.lossy_queue_limit.map(|s| s.bytes()),
    )
    .map_err(|m| ConfigError {
        key: "fabric.buffer.size".into(),
        message: format!("switch {}: {m}", node.name),
    })
}
