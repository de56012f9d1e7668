//! Settings that must agree between hosts, compared across the dumps of
//! several hosts: the RoCEv2 GID index and the RoCE version behind the
//! index in use (`show_gids`), the active RoCE MTU (`ibv_devinfo` /
//! `ibstat`), the priority trust mode, the PFC priorities and the
//! priority the job's `NCCL_IB_TC` lands on (`mlnx_qos -i`).
//!
//! A file stands for one host: [`host_from_path`] takes the host from the
//! file name without its extensions and the tool's name
//! (`node1.show_gids.txt`, `node1-ibv_devinfo.txt` -> `node1`), or from
//! its folder when the file is named after the tool only
//! (`node1/show_gids.txt` -> `node1`). Contract: one finding per setting
//! that differs, naming every host with its value (hosts grouped by
//! value, the most common value first); nothing when fewer than two hosts
//! give the setting.

use std::collections::{BTreeMap, BTreeSet};

use super::context::Context;
use super::finding::{Finding, Severity, Symptom};
use super::names::host_from_path;
use super::wording::mtu_cost;
use crate::realnic::hca::HcaInfo;
use crate::realnic::qos::GidEntry;

/// Run these checks.
pub(super) fn run(ctx: &Context, out: &mut Vec<Finding>) {
    gid_layout(ctx, out);
    gid_tables(ctx, out);
    mtu(ctx, out);
    qos(ctx, out);
}

/// Hosts grouped by the value they show: `value -> hosts`, most hosts
/// first. `None` when fewer than two hosts or all agree.
fn differing(per_host: &BTreeMap<String, String>) -> Option<Vec<(String, Vec<String>)>> {
    if per_host.len() < 2 {
        return None;
    }
    let mut by: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (h, v) in per_host {
        by.entry(v.as_str()).or_default().push(h.clone());
    }
    if by.len() < 2 {
        return None;
    }
    let mut groups: Vec<(String, Vec<String>)> =
        by.into_iter().map(|(v, h)| (v.to_string(), h)).collect();
    groups.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(&b.0)));
    Some(groups)
}

/// `v1 on h1, h2 but v2 on h3`.
fn describe(groups: &[(String, Vec<String>)]) -> String {
    let parts: Vec<String> = groups
        .iter()
        .map(|(v, h)| format!("{v} on {}", h.join(", ")))
        .collect();
    match parts.split_first() {
        Some((first, rest)) if !rest.is_empty() => format!("{first} but {}", rest.join(", ")),
        Some((first, _)) => first.clone(),
        None => String::new(),
    }
}

fn finding(
    sev: Severity,
    symptom: Symptom,
    groups: &[(String, Vec<String>)],
    files: &BTreeMap<String, String>,
) -> Finding {
    let mut f = Finding::new(sev, symptom, "hosts");
    // The odd hosts out first: they are the ones to fix.
    f.affects = groups
        .iter()
        .rev()
        .flat_map(|(_, h)| h.iter().cloned())
        .collect();
    f.subject = f.affects.first().cloned().unwrap_or_else(|| "hosts".into());
    for (v, hosts) in groups {
        for h in hosts {
            f.evidence.push(format!(
                "{h} ({}): {v}",
                files.get(h).map(String::as_str).unwrap_or("?")
            ));
        }
    }
    f
}

/// The GID index of the RoCEv2 IPv4 entries, and the RoCE version at the
/// index the job uses (`NCCL_IB_GID_INDEX`, perftest `-x`), per host.
fn gid_layout(ctx: &Context, out: &mut Vec<Finding>) {
    let mut v2_index: BTreeMap<String, String> = BTreeMap::new();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut tables: BTreeMap<String, Vec<&GidEntry>> = BTreeMap::new();
    // `ibv_devinfo -v` lists the same table as `GID[  N]` port attributes.
    let from_devinfo: Vec<(String, Vec<GidEntry>)> = ctx
        .devinfo
        .iter()
        .map(|(file, devs)| (file.clone(), devinfo_gids(devs)))
        .filter(|(_, g)| !g.is_empty())
        .collect();
    // A row names its own host when the file holds several (pdsh prefixes,
    // `==> host <==` headers); otherwise the file stands for one host.
    for (file, gids) in ctx.gids.iter().chain(from_devinfo.iter()) {
        let from_file = host_from_path(file);
        for g in gids {
            let host = g.host.clone().unwrap_or_else(|| from_file.clone());
            files.entry(host.clone()).or_insert_with(|| file.clone());
            tables.entry(host).or_default().push(g);
        }
    }
    for (host, t) in &tables {
        let idx: BTreeSet<u32> = t
            .iter()
            .filter(|g| g.is_rocev2_ipv4())
            .map(|g| g.index)
            .collect();
        if !idx.is_empty() {
            let list: Vec<String> = idx.iter().map(u32::to_string).collect();
            v2_index.insert(host.clone(), format!("index {}", list.join(", ")));
        }
    }
    // The index in use, when the job says.
    let chosen: BTreeSet<u32> = ctx
        .nccl
        .iter()
        .filter_map(|(_, n)| n.env.get("NCCL_IB_GID_INDEX")?.parse().ok())
        .chain(
            ctx.perftest
                .iter()
                .flat_map(|(_, p)| p.runs.iter().filter_map(|r| r.gid_index)),
        )
        .collect();
    for idx in &chosen {
        let mut kind: BTreeMap<String, String> = BTreeMap::new();
        for (host, t) in &tables {
            if let Some(g) = t.iter().find(|g| g.index == *idx) {
                kind.insert(
                    host.clone(),
                    format!(
                        "index {idx} is RoCE {}{}",
                        g.version,
                        g.ipv4
                            .as_deref()
                            .map(|a| format!(" {a}"))
                            .unwrap_or_else(|| " (no IPv4: link-local or IPv6)".into())
                    ),
                );
            }
        }
        // Compare the kind only (version and family), not the address.
        let class: BTreeMap<String, String> = tables
            .iter()
            .filter_map(|(h, t)| {
                let g = t.iter().find(|g| g.index == *idx)?;
                Some((
                    h.clone(),
                    format!(
                        "RoCE {} {}",
                        g.version,
                        if g.ipv4.is_some() { "IPv4" } else { "non-IPv4" }
                    ),
                ))
            })
            .collect();
        let Some(groups) = differing(&class) else {
            continue;
        };
        let mut f = finding(Severity::Error, Symptom::GidMisconfigured, &groups, &files);
        f.evidence = kind
            .iter()
            .map(|(h, v)| {
                format!(
                    "{h} ({}): {v}",
                    files.get(h).map(String::as_str).unwrap_or("?")
                )
            })
            .collect();
        f.title = format!(
            "GID index {idx}, the one in use, means different RoCE versions on different hosts: {}",
            describe(&groups)
        );
        f.impact = "the hosts on the other kind of GID send RoCEv1 (not routable) or address a GID their peers do not answer on: QPs between the two groups never complete a transfer and the job fails with retry exceeded (status 12) at its first collective".into();
        f.check_first = "show_gids on every host: set the index of the RoCE v2 IPv4 entry of the RoCE netdev per host (NCCL_IB_GID_INDEX, perftest -x), or leave it to NCCL's automatic choice; the same index only works where the GID tables line up".into();
        f.why = "a GID index is a row of each host's own GID table; the rows depend on the order addresses and VLAN devices were added, so one index can be RoCE v2 on one host and v1 (or link-local) on another".into();
        out.push(f);
    }
    if let Some(groups) = differing(&v2_index) {
        let mut f = finding(
            Severity::Warning,
            Symptom::GidMisconfigured,
            &groups,
            &files,
        );
        f.title = format!(
            "the RoCE v2 IPv4 GID sits at different indices on different hosts: {}",
            describe(&groups)
        );
        f.impact = "one NCCL_IB_GID_INDEX (or perftest -x) for all hosts picks a RoCE v1 or link-local GID on some of them: their QPs never connect (retry exceeded, status 12)".into();
        f.check_first = "set the GID index per host to its RoCE v2 IPv4 row, or leave NCCL_IB_GID_INDEX unset so NCCL chooses; on hosts with the odd layout, the addresses or VLAN devices of the RoCE netdev".into();
        f.why = "show_gids lists each host's own table; a job passing one index everywhere needs the RoCE v2 IPv4 entry at that index on every host".into();
        out.push(f);
    }
}

/// Every GID table given, per host: `show_gids` rows and `ibv_devinfo
/// -v` GIDs, with the file each host's first table came from.
fn gid_tables_by_host(
    ctx: &Context,
) -> (BTreeMap<String, Vec<GidEntry>>, BTreeMap<String, String>) {
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    let mut tables: BTreeMap<String, Vec<GidEntry>> = BTreeMap::new();
    let from_devinfo: Vec<(String, Vec<GidEntry>)> = ctx
        .devinfo
        .iter()
        .map(|(file, devs)| (file.clone(), devinfo_gids(devs)))
        .filter(|(_, g)| !g.is_empty())
        .collect();
    for (file, gids) in ctx.gids.iter().chain(from_devinfo.iter()) {
        let from_file = host_from_path(file);
        for g in gids {
            let host = g.host.clone().unwrap_or_else(|| from_file.clone());
            files.entry(host.clone()).or_insert_with(|| file.clone());
            tables.entry(host).or_default().push(g.clone());
        }
    }
    (tables, files)
}

/// Whether a GID routes beyond the L2 segment: IPv4-mapped, or a global
/// IPv6 address (not link-local `fe80::`, not all zeros).
fn routable(g: &GidEntry) -> bool {
    let gid = g.gid.to_ascii_lowercase();
    let zero = gid.chars().all(|c| matches!(c, '0' | ':'));
    g.ipv4.is_some() || !(zero || gid.starts_with("fe80"))
}

/// One host's GID tables, each port on its own: no routable RoCE v2 GID,
/// a table that does not start at index 0 (a container's view), one
/// address at several RoCE v2 indices on different netdevs, and the index
/// the job uses (NCCL, perftest, UCX) not a routable RoCE v2 entry.
/// Contract: one finding per problem and host, naming the device, the
/// indices and the entry to use instead.
fn gid_tables(ctx: &Context, out: &mut Vec<Finding>) {
    let (tables, files) = gid_tables_by_host(ctx);
    let in_use: Vec<(String, u32)> = ctx
        .nccl
        .iter()
        .filter_map(|(f, n)| Some((format!("{f}: NCCL GID index"), n.gid_index?)))
        .chain(ctx.perftest.iter().flat_map(|(f, p)| {
            p.runs
                .iter()
                .filter(|r| r.link_type.as_deref() == Some("Ethernet"))
                .filter_map(move |r| Some((format!("{f}: perftest GID index"), r.gid_index?)))
        }))
        .chain(ctx.events.iter().flat_map(|(f, es)| {
            es.iter()
                .filter_map(move |e| Some((format!("{f} line {}: UCX sgix", e.line), e.gid_index?)))
        }))
        .collect();
    // Indices whose kind differs between hosts.
    let split_hosts: BTreeSet<u32> = in_use
        .iter()
        .map(|(_, i)| *i)
        .filter(|i| {
            let kinds: BTreeSet<(String, bool)> = tables
                .values()
                .filter_map(|t| t.iter().find(|g| g.index == *i))
                .map(|g| {
                    (
                        g.version.to_ascii_lowercase(),
                        routable(g) && g.ipv4.is_some(),
                    )
                })
                .collect();
            kinds.len() > 1
        })
        .collect();
    for (host, t) in &tables {
        let file = files.get(host).map(String::as_str).unwrap_or("?");
        let mut ports: BTreeMap<(String, u32), Vec<&GidEntry>> = BTreeMap::new();
        for g in t {
            ports.entry((g.device.clone(), g.port)).or_default().push(g);
        }
        for ((dev, port), rows) in &ports {
            let place = if *port == 0 {
                format!("{host} {dev}")
            } else {
                format!("{host} {dev} port {port}")
            };
            let place = place.trim().to_string();
            let v2: Vec<&&GidEntry> = rows
                .iter()
                .filter(|g| g.version.eq_ignore_ascii_case("v2") && routable(g))
                .collect();
            let good: Vec<String> = v2
                .iter()
                .map(|g| {
                    format!(
                        "{}{}",
                        g.index,
                        g.ipv4
                            .as_deref()
                            .map(|a| format!(" ({a})"))
                            .unwrap_or_default()
                    )
                })
                .collect();
            if v2.is_empty() {
                let mut f =
                    Finding::new(Severity::Warning, Symptom::GidMisconfigured, place.clone());
                f.origin = Some(host.clone());
                f.title =
                    format!("{place}: no routable RoCE v2 GID: only link-local or RoCE v1 entries");
                f.evidence = rows.iter().map(|g| gid_row(file, g)).collect();
                f.impact = "RoCE from this port can only use RoCE v1 or link-local GIDs: traffic does not cross a router, and a job needing RoCE v2 cannot connect (retry exceeded, status 12)".into();
                f.check_first = "an IPv4 address on the RoCE netdev (or on the VLAN/macvlan interface the job uses): the driver adds the IPv4-mapped GIDs when the address is added".into();
                f.why = "the GID table lists one entry per address of the port's netdevs and RoCE version; without an IPv4 or global IPv6 address there is no routable v2 entry".into();
                out.push(f);
            }
            let lowest = rows.iter().map(|g| g.index).min().unwrap_or(0);
            if lowest > 0 && *port != 0 {
                let mut f =
                    Finding::new(Severity::Warning, Symptom::GidMisconfigured, place.clone());
                f.origin = Some(host.clone());
                f.title = format!(
                    "{place}: the GID table starts at index {lowest}: indices 0-{} belong to netdevs this namespace does not see",
                    lowest - 1
                );
                f.evidence = rows.iter().take(6).map(|g| gid_row(file, g)).collect();
                if !good.is_empty() {
                    f.evidence.push(format!(
                        "routable RoCE v2 entries here: index {}",
                        good.join(", ")
                    ));
                }
                f.impact = "a fixed GID index from another host (or the default 0) names an entry that is empty here: reading its type fails or the QP gets an empty address, and connections fail".into();
                f.check_first = "set the GID index per pod/host to its own RoCE v2 IPv4 entry, or let the library pick it by address family (NCCL_IB_ADDR_FAMILY, UCX_IB_GID_INDEX unset)".into();
                f.why = "in a container with a macvlan or VF interface, the port's GID table holds the host's entries too; those of other namespaces read as empty".into();
                out.push(f);
            }
            // One address at several v2 indices on different netdevs.
            let mut by_addr: BTreeMap<&str, Vec<&&GidEntry>> = BTreeMap::new();
            for g in &v2 {
                if let Some(a) = g.ipv4.as_deref() {
                    by_addr.entry(a).or_default().push(g);
                }
            }
            for (addr, gs) in by_addr {
                let netdevs: BTreeSet<&str> =
                    gs.iter().filter_map(|g| g.netdev.as_deref()).collect();
                if gs.len() < 2 || netdevs.len() < 2 {
                    continue;
                }
                let mut f =
                    Finding::new(Severity::Warning, Symptom::GidMisconfigured, place.clone());
                f.origin = Some(host.clone());
                let list: Vec<String> = gs
                    .iter()
                    .map(|g| format!("{} on {}", g.index, g.netdev.as_deref().unwrap_or("?")))
                    .collect();
                f.title = format!(
                    "{place}: address {addr} is RoCE v2 at several indices on different netdevs ({}): an automatic choice can take the wrong one",
                    list.join(", ")
                );
                f.evidence = gs.iter().map(|g| gid_row(file, g)).collect();
                f.impact = "a library that picks the GID by address may take the entry of the other netdev (a VXLAN or VLAN device instead of the bond): traffic leaves with that device's encapsulation or priority, or not at all".into();
                f.check_first = "pass the index of the entry on the netdev the fabric expects (NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX, perftest -x) per host, or remove the address from the other netdev".into();
                f.why = "each netdev carrying the address contributes its own GID entries; the table does not say which one RoCE should use".into();
                out.push(f);
            }
            // The index the job uses (when hosts disagree on it,
            // `gid_layout` names them all in one finding).
            for (what, idx) in &in_use {
                if split_hosts.contains(idx) {
                    continue;
                }
                let entry = rows.iter().find(|g| g.index == *idx);
                let bad = match entry {
                    Some(g) => !(g.version.eq_ignore_ascii_case("v2") && routable(g)),
                    None => rows.iter().any(|g| g.index > *idx) || lowest > *idx,
                };
                if !bad {
                    continue;
                }
                let mut f = Finding::new(Severity::Error, Symptom::GidMisconfigured, place.clone());
                f.origin = Some(host.clone());
                f.title = match entry {
                    Some(g) => format!(
                        "{place}: GID index {idx}, the one in use, is RoCE {} {}: not a routable RoCE v2 address",
                        g.version,
                        if g.gid.to_ascii_lowercase().starts_with("fe80") {
                            "link-local"
                        } else if g.ipv4.is_some() {
                            "IPv4"
                        } else {
                            "without an address"
                        }
                    ),
                    None => format!("{place}: GID index {idx}, the one in use, does not exist in this table"),
                };
                f.evidence.push(format!("{what} {idx}"));
                if let Some(g) = entry {
                    f.evidence.push(gid_row(file, g));
                }
                f.evidence.push(if good.is_empty() {
                    "no routable RoCE v2 entry on this port".into()
                } else {
                    format!("routable RoCE v2 entries: index {}", good.join(", "))
                });
                f.impact = "QPs address the peer with a RoCE v1 or link-local GID (or none): packets do not cross routers or are dropped, connections time out (ibv_modify_qp to RTR fails, or retry exceeded, status 12) at the first transfer".into();
                f.check_first = format!(
                    "set the GID index to {} on this host (NCCL_IB_GID_INDEX, UCX_IB_GID_INDEX, perftest -x), or leave it unset so the library picks the RoCE v2 IPv4 entry",
                    if good.is_empty() { "a RoCE v2 IPv4 entry".to_string() } else { good.join(" or ") }
                );
                f.why = "the GID index picks the source address and RoCE version of every packet; only a RoCE v2 entry with an IPv4 or global IPv6 address routes across the fabric".into();
                out.push(f);
            }
        }
    }
}

/// `file: DEV port P index I GID ADDR VER NETDEV`.
fn gid_row(file: &str, g: &GidEntry) -> String {
    format!(
        "{file}{}: {} index {} {} {} RoCE {}{}",
        if g.line > 0 {
            format!(" line {}", g.line)
        } else {
            String::new()
        },
        g.device,
        g.index,
        g.gid,
        g.ipv4.as_deref().unwrap_or("-"),
        g.version,
        g.netdev
            .as_deref()
            .map(|n| format!(" on {n}"))
            .unwrap_or_default()
    )
}

/// The GID table `ibv_devinfo -v` prints per port (`GID[  3]:
/// ::ffff:10.0.0.1, RoCE v2`), as `show_gids` rows.
fn devinfo_gids(devs: &[HcaInfo]) -> Vec<GidEntry> {
    let mut out = Vec::new();
    for d in devs {
        // A grepped excerpt keeps the GIDs on the device (port unknown: 0).
        let loose = (0u32, &d.attributes);
        let ports = d.ports.iter().map(|p| (p.port, &p.attributes));
        for (port, attributes) in std::iter::once(loose).chain(ports) {
            for (k, v) in attributes {
                let Some(idx) = k
                    .trim()
                    .strip_prefix("GID[")
                    .and_then(|r| r.strip_suffix(']'))
                    .and_then(|n| n.trim().parse::<u32>().ok())
                else {
                    continue;
                };
                let (gid, kind) = v.split_once(',').unwrap_or((v.as_str(), ""));
                let version = if kind.contains("v2") {
                    "v2"
                } else if kind.contains("v1") {
                    "v1"
                } else {
                    continue;
                };
                out.push(GidEntry {
                    device: d.name.clone(),
                    port,
                    index: idx,
                    gid: gid.trim().to_string(),
                    ipv4: ipv4_of_gid(gid.trim()),
                    version: version.into(),
                    netdev: None,
                    ..GidEntry::default()
                });
            }
        }
    }
    out
}

/// The IPv4 address of an IPv4-mapped GID, written `::ffff:a.b.c.d` or
/// as eight groups ending `ffff:0a00:0001`.
fn ipv4_of_gid(gid: &str) -> Option<String> {
    let g = gid.to_ascii_lowercase();
    if let Some(v4) = g.strip_prefix("::ffff:").filter(|r| r.contains('.')) {
        return Some(v4.to_string());
    }
    let groups: Vec<&str> = g.split(':').collect();
    if groups.len() != 8
        || groups[..5]
            .iter()
            .any(|x| u16::from_str_radix(x, 16) != Ok(0))
        || groups[5] != "ffff"
    {
        return None;
    }
    let hi = u16::from_str_radix(groups[6], 16).ok()?;
    let lo = u16::from_str_radix(groups[7], 16).ok()?;
    Some(format!(
        "{}.{}.{}.{}",
        hi >> 8,
        hi & 0xff,
        lo >> 8,
        lo & 0xff
    ))
}

/// The active RoCE MTU per host.
fn mtu(ctx: &Context, out: &mut Vec<Finding>) {
    let mut per: BTreeMap<String, BTreeSet<u32>> = BTreeMap::new();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    for (file, devs) in &ctx.devinfo {
        let host = host_from_path(file);
        for p in devs
            .iter()
            .flat_map(|d| d.ports.iter())
            .filter(|p| p.active)
        {
            if let Some(m) = p.active_mtu {
                per.entry(host.clone()).or_default().insert(m);
            }
        }
        files.insert(host, file.clone());
    }
    let smallest = per.values().filter_map(|m| m.iter().next()).min().copied();
    let vals: BTreeMap<String, String> = per
        .into_iter()
        .map(|(h, m)| {
            let list: Vec<String> = m.iter().map(u32::to_string).collect();
            (h, format!("active MTU {}", list.join(", ")))
        })
        .collect();
    let Some(groups) = differing(&vals) else {
        return;
    };
    let mut f = finding(Severity::Warning, Symptom::MtuMismatch, &groups, &files);
    f.title = format!("the hosts run different RoCE MTUs: {}", describe(&groups));
    f.impact = format!(
        "a QP between two of these hosts runs at the smaller MTU or, where one side uses the larger path MTU, its large packets are dropped on the way (retransmit timeouts){}",
        smallest
            .map(|m| format!("; {}", mtu_cost(m)))
            .unwrap_or_default()
    );
    f.check_first = "the netdev MTU of the RoCE interface on the odd hosts (RoCE MTU is the largest IB MTU that fits: 1500 -> 1024, 4200 or more -> 4096) and the switch ports on their path".into();
    f.why = "ibv_devinfo's active_mtu is the RoCE MTU the port runs; every host of a job should show the same".into();
    out.push(f);
}

/// Trust mode and PFC priorities per host (`mlnx_qos -i`).
fn qos(ctx: &Context, out: &mut Vec<Finding>) {
    let mut trust: BTreeMap<String, String> = BTreeMap::new();
    let mut pfc: BTreeMap<String, String> = BTreeMap::new();
    let mut roce_prio: BTreeMap<String, String> = BTreeMap::new();
    let mut files: BTreeMap<String, String> = BTreeMap::new();
    // The job's traffic class, when a log says: where RoCE lands per host.
    let tc: Option<u8> = ctx
        .nccl
        .iter()
        .find_map(|(_, n)| n.env.get("NCCL_IB_TC")?.parse().ok());
    for (file, q) in &ctx.qos {
        let host = host_from_path(file);
        if let (Some(tc), Some("dscp")) = (tc, q.trust.as_deref()) {
            roce_prio.insert(host.clone(), format!("prio{}", q.prio_of_tclass(tc)));
        }
        if let Some(t) = &q.trust {
            trust.insert(host.clone(), format!("trust {t}"));
        }
        if q.pfc_enabled.is_some() {
            let p: Vec<String> = q
                .pfc_priorities()
                .iter()
                .map(|p| format!("prio{p}"))
                .collect();
            pfc.insert(
                host.clone(),
                if p.is_empty() {
                    "PFC on no priority".into()
                } else {
                    format!("PFC on {}", p.join(", "))
                },
            );
        }
        files.insert(host, file.clone());
    }
    if let Some(groups) = differing(&trust) {
        let mut f = finding(Severity::Error, Symptom::LossyPriority, &groups, &files);
        f.title = format!(
            "the hosts classify RoCE by different fields: {}",
            describe(&groups)
        );
        f.impact = "the same packet lands on different priorities on different hosts: RoCE from or to the odd hosts rides a priority without PFC (drops, go-back-N) or a different queue than the fabric expects".into();
        f.check_first = "`mlnx_qos -i` on the odd hosts: set the trust mode the fabric uses (`--trust dscp` for RoCEv2 in routed fabrics), then dscp2prio and the PFC bits".into();
        f.why = "with trust pcp the NIC maps the VLAN priority bits, with trust dscp the IP DSCP; untagged RoCEv2 traffic under trust pcp falls to priority 0".into();
        out.push(f);
    }
    if let (Some(tc), Some(groups)) = (tc, differing(&roce_prio)) {
        let mut f = finding(Severity::Error, Symptom::LossyPriority, &groups, &files);
        f.title = format!(
            "the job's traffic class NCCL_IB_TC={tc} (DSCP {}) lands on different priorities on different hosts: {}",
            tc >> 2,
            describe(&groups)
        );
        f.impact = "RoCE of the odd hosts travels on another priority than the rest: if that priority has no PFC it is lossy there (drops, go-back-N), and the switches queue it apart from the job's other traffic".into();
        f.check_first = "`mlnx_qos -i` dscp2prio on the odd hosts (`--dscp2prio set,DSCP,PRIO`) so the job's DSCP maps to the PFC priority everywhere".into();
        f.why = "under trust dscp each NIC maps the DSCP (the upper six bits of the traffic class) to a priority with its own dscp2prio table".into();
        out.push(f);
    }
    if let Some(groups) = differing(&pfc) {
        let mut f = finding(Severity::Error, Symptom::LossyPriority, &groups, &files);
        f.title = format!(
            "the hosts enable PFC on different priorities: {}",
            describe(&groups)
        );
        f.impact = "RoCE on the priority the others protect is lossy on the odd hosts: under congestion their NICs drop instead of pausing (or never pause their switch), costing go-back-N windows".into();
        f.check_first = "`mlnx_qos -i` PFC bits on the odd hosts against the RoCE priority (and the switch's PFC priorities); NCCL_IB_TC's DSCP must map to that priority everywhere".into();
        f.why = "PFC protects a priority only where both ends of every link enable it; a host without the bit neither sends nor honours PAUSE on it".into();
        out.push(f);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ipv4_mapped_gids_give_their_address() {
        use super::ipv4_of_gid;
        assert_eq!(ipv4_of_gid("::ffff:10.0.0.1").as_deref(), Some("10.0.0.1"));
        assert_eq!(
            ipv4_of_gid("0000:0000:0000:0000:0000:ffff:0a00:0102").as_deref(),
            Some("10.0.1.2")
        );
        assert_eq!(ipv4_of_gid("fe80:0000:0000:0000:966d:aeff:fe47:5a2e"), None);
        assert_eq!(ipv4_of_gid("fe80::966d:aeff:fe47:5a2e"), None);
    }
}
