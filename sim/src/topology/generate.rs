//! Topology generators: dumbbell, chain, leaf-spine, 3-tier fat tree and
//! leaf-spines of GPU servers (rail-optimised or plain).
//!
//! Every generator puts the hosts first (host `i` is `NodeId(i)` and is
//! named `h{i}`), then the switches, and adds links bottom-up, so a host's
//! only port is 0 and switch ports count from the hosts upwards. [`planes`]
//! makes any of them a multi-plane fabric, where host port `k` is plane
//! `k`'s.

use roce::time::Rate;

use super::{LinkProps, NodeId, NodeKind, Topology, TopologyError};

/// Two switches joined by one bottleneck link, `left` hosts on one and
/// `right` hosts on the other. Switches `left` and `right`.
pub fn dumbbell(
    left: u32,
    right: u32,
    host_link: LinkProps,
    bottleneck: LinkProps,
) -> Result<Topology, TopologyError> {
    positive("left", left)?;
    positive("right", right)?;
    let mut t = Topology::new();
    for i in 0..left + right {
        t.add_node(format!("h{i}"), NodeKind::Host);
    }
    let sl = t.add_node("left", NodeKind::Switch);
    let sr = t.add_node("right", NodeKind::Switch);
    for i in 0..left + right {
        let sw = if i < left { sl } else { sr };
        t.add_link(NodeId(i), sw, host_link)?;
    }
    t.add_link(sl, sr, bottleneck)?;
    Ok(t)
}

/// `switches` switches in a line (`s0 - s1 - ... `), each with
/// `hosts_per_switch` hosts: the multi-hop setting where PAUSE spreads
/// upstream hop by hop.
pub fn chain(
    switches: u32,
    hosts_per_switch: u32,
    host_link: LinkProps,
    fabric_link: LinkProps,
) -> Result<Topology, TopologyError> {
    positive("switches", switches)?;
    positive("hosts_per_switch", hosts_per_switch)?;
    let mut t = Topology::new();
    let hosts = switches * hosts_per_switch;
    for i in 0..hosts {
        t.add_node(format!("h{i}"), NodeKind::Host);
    }
    let first = hosts;
    for s in 0..switches {
        t.add_node(format!("s{s}"), NodeKind::Switch);
    }
    for i in 0..hosts {
        t.add_link(NodeId(i), NodeId(first + i / hosts_per_switch), host_link)?;
    }
    for s in 1..switches {
        t.add_link(NodeId(first + s - 1), NodeId(first + s), fabric_link)?;
    }
    Ok(t)
}

/// Parameters of a two-tier leaf-spine (folded Clos).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LeafSpine {
    /// Number of leaf (top-of-rack) switches.
    pub leaves: u32,
    /// Number of spine switches; every leaf links to every spine.
    pub spines: u32,
    /// Hosts under each leaf.
    pub hosts_per_leaf: u32,
    /// Host links.
    pub host_link: LinkProps,
    /// Leaf-spine links. With `oversubscription` set their rate is
    /// derived instead (see there).
    pub fabric_link: LinkProps,
    /// Downlink to uplink bandwidth ratio of a leaf (1.0: non-blocking,
    /// 3.0: 3:1). When set, each uplink's rate is
    /// `host rate * hosts_per_leaf / (spines * oversubscription)`, rounded
    /// to whole bits per second.
    pub oversubscription: Option<f64>,
}

/// A leaf-spine: hosts `h*`, leaves `leaf*`, spines `spine*`.
pub fn leaf_spine(p: &LeafSpine) -> Result<Topology, TopologyError> {
    positive("leaves", p.leaves)?;
    positive("spines", p.spines)?;
    positive("hosts_per_leaf", p.hosts_per_leaf)?;
    let fabric = uplink(
        p.host_link,
        p.fabric_link,
        p.hosts_per_leaf,
        p.spines,
        p.oversubscription,
    )?;
    let mut t = Topology::new();
    let hosts = p.leaves * p.hosts_per_leaf;
    for i in 0..hosts {
        t.add_node(format!("h{i}"), NodeKind::Host);
    }
    let leaf0 = hosts;
    for l in 0..p.leaves {
        t.add_node(format!("leaf{l}"), NodeKind::Switch);
    }
    let spine0 = leaf0 + p.leaves;
    for s in 0..p.spines {
        t.add_node(format!("spine{s}"), NodeKind::Switch);
    }
    for i in 0..hosts {
        t.add_link(NodeId(i), NodeId(leaf0 + i / p.hosts_per_leaf), p.host_link)?;
    }
    for l in 0..p.leaves {
        for s in 0..p.spines {
            t.add_link(NodeId(leaf0 + l), NodeId(spine0 + s), fabric)?;
        }
    }
    Ok(t)
}

/// Parameters of a leaf-spine of GPU servers ([`gpu_leaf_spine`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuLeafSpine {
    /// GPU servers.
    pub servers: u32,
    /// NICs per server (rails).
    pub nics: u32,
    /// Servers under one leaf (rail-optimised: under each of a group's
    /// `nics` leaves).
    pub servers_per_leaf: u32,
    /// Spine switches; every leaf links to every spine.
    pub spines: u32,
    /// Rail-optimised: NIC `r` of every server of a group goes to the
    /// group's rail-`r` leaf. Else all of a server's NICs go to one leaf.
    pub rail_optimised: bool,
    /// Host (NIC) links.
    pub host_link: LinkProps,
    /// Leaf-spine links (rate derived when `oversubscription` is set).
    pub fabric_link: LinkProps,
    /// Downlink to uplink ratio of a leaf, as [`LeafSpine::oversubscription`].
    pub oversubscription: Option<f64>,
}

/// A leaf-spine of GPU servers: hosts `h{s * nics + r}` (NIC `r` of
/// server `s`), then the leaves, then spines `spine{j}`. Servers come in
/// groups of `servers_per_leaf`; rail-optimised, group `g` has leaves
/// `rail{r}-leaf{g}`, one per rail, each with the group's NICs of that
/// rail (GPU `i` of every server of the group meets the others' GPU `i`
/// one switch away); plain, group `g` has one leaf `leaf{g}` with all
/// its servers' NICs.
pub fn gpu_leaf_spine(p: &GpuLeafSpine) -> Result<Topology, TopologyError> {
    positive("servers", p.servers)?;
    positive("servers_per_leaf", p.servers_per_leaf)?;
    positive("spines", p.spines)?;
    positive("gpu.nics", p.nics)?;
    if p.servers % p.servers_per_leaf != 0 {
        return Err(TopologyError::BadParameter {
            param: "servers_per_leaf",
            value: p.servers_per_leaf.to_string(),
            expected: "a divisor of servers",
        });
    }
    let groups = p.servers / p.servers_per_leaf;
    let (leaves, down) = if p.rail_optimised {
        (groups * p.nics, p.servers_per_leaf)
    } else {
        (groups, p.servers_per_leaf * p.nics)
    };
    let fabric = uplink(
        p.host_link,
        p.fabric_link,
        down,
        p.spines,
        p.oversubscription,
    )?;
    let mut t = Topology::new();
    let hosts = p.servers * p.nics;
    for i in 0..hosts {
        t.add_node(format!("h{i}"), NodeKind::Host);
    }
    let leaf0 = hosts;
    for g in 0..groups {
        if p.rail_optimised {
            for r in 0..p.nics {
                t.add_node(format!("rail{r}-leaf{g}"), NodeKind::Switch);
            }
        } else {
            t.add_node(format!("leaf{g}"), NodeKind::Switch);
        }
    }
    let spine0 = leaf0 + leaves;
    for j in 0..p.spines {
        t.add_node(format!("spine{j}"), NodeKind::Switch);
    }
    for i in 0..hosts {
        let (server, rail) = (i / p.nics, i % p.nics);
        let group = server / p.servers_per_leaf;
        let leaf = if p.rail_optimised {
            group * p.nics + rail
        } else {
            group
        };
        t.add_link(NodeId(i), NodeId(leaf0 + leaf), p.host_link)?;
    }
    for l in 0..leaves {
        for j in 0..p.spines {
            t.add_link(NodeId(leaf0 + l), NodeId(spine0 + j), fabric)?;
        }
    }
    Ok(t)
}

/// A 3-tier k-ary fat tree of GPU servers with `nics` NICs each
/// (`k^3/4` NICs, `k^3/(4 nics)` servers): hosts `h{s * nics + r}`, the
/// switches named as [`fat_tree`]'s. Each pod holds `k^2/(4 nics)`
/// servers. Rail-optimised (needs `nics = k/2`): NIC `r` of every server
/// of a pod goes to the pod's edge switch `r`, so GPU `i` of the pod's
/// servers meet one switch away and rails meet at the aggregation layer.
/// Plain: a server's NICs fill edge ports in order.
pub fn gpu_fat_tree(
    k: u32,
    nics: u32,
    rail_optimised: bool,
    host_link: LinkProps,
    fabric_link: LinkProps,
) -> Result<Topology, TopologyError> {
    check_k(k)?;
    let half = k / 2;
    positive("gpu.nics", nics)?;
    let per_pod = half * half;
    if per_pod % nics != 0 || (rail_optimised && nics != half) {
        return Err(TopologyError::BadParameter {
            param: "gpu.nics",
            value: nics.to_string(),
            expected: if rail_optimised {
                "k/2 NICs per server for a rail-optimised fat tree (one edge switch per rail in each pod)"
            } else {
                "a divisor of a pod's (k/2)^2 host ports"
            },
        });
    }
    let servers_per_pod = per_pod / nics;
    let edge_of = |i: u32| {
        if rail_optimised {
            // Host i is NIC r of server s: edge r of the server's pod.
            let (s, r) = (i / nics, i % nics);
            (s / servers_per_pod) * half + r
        } else {
            i / half
        }
    };
    fat_tree_with(k, host_link, fabric_link, edge_of)
}

/// The leaf-spine link of a leaf with `down` host links under `spines`
/// spines: `fabric` as given, or with its rate derived from
/// `oversubscription` (`host rate x down / (spines x ratio)`).
fn uplink(
    host: LinkProps,
    fabric: LinkProps,
    down: u32,
    spines: u32,
    oversubscription: Option<f64>,
) -> Result<LinkProps, TopologyError> {
    let Some(o) = oversubscription else {
        return Ok(fabric);
    };
    if !(o.is_finite() && o > 0.0) {
        return Err(TopologyError::BadParameter {
            param: "oversubscription",
            value: o.to_string(),
            expected: "a positive ratio such as 1.0 or 3.0",
        });
    }
    let bps = host.rate.bps() as f64 * f64::from(down) / (f64::from(spines) * o);
    Ok(LinkProps {
        rate: Rate::from_bps(bps.round() as u64),
        ..fabric
    })
}

/// A 3-tier k-ary fat tree (Al-Fares et al.): `k` pods of `k/2` edge and
/// `k/2` aggregation switches, `(k/2)^2` core switches, `k^3/4` hosts
/// (`k/2` per edge switch). Aggregation switch `j` of every pod links to
/// core switches `j*k/2 .. (j+1)*k/2 - 1`. Names: `h{i}`, `edge{pod}_{j}`,
/// `agg{pod}_{j}`, `core{c}`. `k` must be even, 2..=64.
pub fn fat_tree(
    k: u32,
    host_link: LinkProps,
    fabric_link: LinkProps,
) -> Result<Topology, TopologyError> {
    check_k(k)?;
    fat_tree_with(k, host_link, fabric_link, |i| i / (k / 2))
}

fn check_k(k: u32) -> Result<(), TopologyError> {
    if k < 2 || k % 2 != 0 || k > 64 {
        return Err(TopologyError::BadParameter {
            param: "k",
            value: k.to_string(),
            expected: "an even number from 2 to 64",
        });
    }
    Ok(())
}

/// [`fat_tree`] with host `i` on edge switch `edge_of(i)` (a global edge
/// index, `pod * k/2 + j`; each edge must get `k/2` hosts).
fn fat_tree_with(
    k: u32,
    host_link: LinkProps,
    fabric_link: LinkProps,
    edge_of: impl Fn(u32) -> u32,
) -> Result<Topology, TopologyError> {
    let half = k / 2;
    let hosts = k * k * k / 4;
    let mut t = Topology::new();
    for i in 0..hosts {
        t.add_node(format!("h{i}"), NodeKind::Host);
    }
    let edge0 = hosts;
    for pod in 0..k {
        for j in 0..half {
            t.add_node(format!("edge{pod}_{j}"), NodeKind::Switch);
        }
    }
    let agg0 = edge0 + k * half;
    for pod in 0..k {
        for j in 0..half {
            t.add_node(format!("agg{pod}_{j}"), NodeKind::Switch);
        }
    }
    let core0 = agg0 + k * half;
    for c in 0..half * half {
        t.add_node(format!("core{c}"), NodeKind::Switch);
    }
    for i in 0..hosts {
        t.add_link(NodeId(i), NodeId(edge0 + edge_of(i)), host_link)?;
    }
    for pod in 0..k {
        for e in 0..half {
            for a in 0..half {
                t.add_link(
                    NodeId(edge0 + pod * half + e),
                    NodeId(agg0 + pod * half + a),
                    fabric_link,
                )?;
            }
        }
    }
    for pod in 0..k {
        for a in 0..half {
            for c in 0..half {
                t.add_link(
                    NodeId(agg0 + pod * half + a),
                    NodeId(core0 + a * half + c),
                    fabric_link,
                )?;
            }
        }
    }
    Ok(t)
}

/// `planes` independent copies of `base`'s switches and links, with each
/// host linked to all of them: host port `k` attaches where the host's
/// one link attached, in plane `k` (a multi-plane fabric: one NIC port
/// per plane, the planes never joined). Hosts keep their names; plane
/// `k`'s switches are named `p{k}-{name}`. Every host of `base` must have
/// exactly one link; `planes` is 1 to 16 (1 gives `base` back).
pub fn planes(base: Topology, planes: u32) -> Result<Topology, TopologyError> {
    if !(1..=16).contains(&planes) {
        return Err(TopologyError::BadParameter {
            param: "planes",
            value: planes.to_string(),
            expected: "a number of planes from 1 to 16",
        });
    }
    if planes == 1 {
        return Ok(base);
    }
    if let Some(h) = base
        .nodes
        .iter()
        .find(|n| n.kind == NodeKind::Host && n.ports.len() != 1)
    {
        return Err(TopologyError::BadParameter {
            param: "planes",
            value: format!("{planes} (host {} has {} links)", h.name, h.ports.len()),
            expected: "hosts with one link each in the plane the generator builds",
        });
    }
    let mut t = Topology::new();
    // Node ids: the hosts first, as in `base`, then each plane's switches.
    let mut id_in = vec![Vec::with_capacity(base.nodes.len()); planes as usize];
    let hosts: Vec<usize> = (0..base.nodes.len())
        .filter(|&i| base.nodes[i].kind == NodeKind::Host)
        .collect();
    let mut host_id = vec![NodeId(u32::MAX); base.nodes.len()];
    for &i in &hosts {
        host_id[i] = t.add_node(base.nodes[i].name.clone(), NodeKind::Host);
    }
    for (k, ids) in id_in.iter_mut().enumerate() {
        for (i, n) in base.nodes.iter().enumerate() {
            ids.push(match n.kind {
                NodeKind::Host => host_id[i],
                NodeKind::Switch => t.add_node(format!("p{k}-{}", n.name), NodeKind::Switch),
            });
        }
    }
    for ids in &id_in {
        for l in &base.links {
            let props = LinkProps {
                rate: l.rate,
                delay: l.delay,
                cable_m: l.cable_m,
                mtu: l.mtu,
            };
            t.add_link(ids[l.a.node.0 as usize], ids[l.b.node.0 as usize], props)?;
        }
    }
    t.gpu = base.gpu;
    Ok(t)
}

fn positive(param: &'static str, v: u32) -> Result<(), TopologyError> {
    if v == 0 {
        Err(TopologyError::BadParameter {
            param,
            value: "0".into(),
            expected: "at least 1",
        })
    } else {
        Ok(())
    }
}
