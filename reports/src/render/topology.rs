//! Who paused whom, drawn on the topology: one map per variant.
//!
//! Nodes and links come from the run's port records (`record.ports`, on
//! by default) and its PAUSE series. Hosts (nodes with a NIC port) form
//! the bottom row; every other node sits in the row of its hop distance
//! from the nearest host (leaves, then spines, ...), in the order the
//! results list them. Links are thin grey lines; a PAUSE is an arrow from
//! the node that sent it to the transmitter it held, as wide as its share
//! of the longest held time in the variant, with a hover title giving the
//! port, priorities and held time. Past [`MAX_NODES`] nodes (a k=16 fat
//! tree has 1,344) one circle per node is a smear: the map then draws one
//! node per tier and pod (a pod: a connected part of the fabric below its
//! top tier; the top tier is one group), sums the held time between
//! groups, and says so in its key. Positions depend only on the results,
//! so the same results give the same bytes.

use std::collections::VecDeque;
use std::fmt::Write as _;

use sim::results::RunResult;

use super::format::fmt_time;
use super::svg::escape;

/// Pixels per character of an 11 px label (estimate).
const CHAR_PX: f64 = 6.5;
/// Widest map, px (the page is at most 1200 px wide).
const MAX_WIDTH: f64 = 1100.0;

/// The map of variant `r` (index `idx` on the page, for unique marker
/// ids) in `color`; `None` when the run recorded no ports and no pauses.
pub fn pause_map(r: &RunResult, idx: usize, color: &str) -> Option<String> {
    let mut nodes: Vec<&str> = Vec::new();
    let mut links: Vec<(usize, usize)> = Vec::new();
    let mut hosts: Vec<bool> = Vec::new();
    let pairs = r
        .ports
        .iter()
        .map(|p| (p.node.as_str(), p.peer.as_str(), p.is_nic))
        .chain(
            r.pauses
                .iter()
                .map(|p| (p.node.as_str(), p.peer.as_str(), false)),
        );
    for (a, b, nic) in pairs {
        let i = index(&mut nodes, &mut hosts, a);
        let j = index(&mut nodes, &mut hosts, b);
        hosts[i] |= nic;
        let l = (i.min(j), i.max(j));
        if i != j && !links.contains(&l) {
            links.push(l);
        }
    }
    if nodes.is_empty() {
        return None;
    }
    // Without port records (`record.ports` off) nothing says which nodes
    // are hosts: take rocelab's host names (`h<N>`) for them.
    if !hosts.contains(&true) {
        for (h, n) in hosts.iter_mut().zip(&nodes) {
            *h = n
                .strip_prefix('h')
                .is_some_and(|d| !d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()));
        }
    }
    // Hop distance from the nearest host; nodes no host reaches go on top.
    let mut tier: Vec<Option<usize>> = hosts.iter().map(|&h| h.then_some(0)).collect();
    let mut queue: VecDeque<usize> = (0..nodes.len()).filter(|&i| hosts[i]).collect();
    while let Some(i) = queue.pop_front() {
        for &(a, b) in &links {
            let j = if a == i {
                b
            } else if b == i {
                a
            } else {
                continue;
            };
            if tier[j].is_none() {
                tier[j] = tier[i].map(|t| t + 1);
                queue.push_back(j);
            }
        }
    }
    let top = tier.iter().flatten().max().copied().unwrap_or(0);
    let tier: Vec<usize> = tier.iter().map(|t| t.unwrap_or(top + 1)).collect();
    // Past MAX_NODES, one drawn node per tier and pod (see the module
    // docs); else one per node.
    let g = if nodes.len() > MAX_NODES {
        groups(&nodes, &hosts, &links, &tier)
    } else {
        Groups {
            of: (0..nodes.len()).collect(),
            names: nodes.iter().map(|n| n.to_string()).collect(),
            members: vec![1; nodes.len()],
            tiers: tier.clone(),
        }
    };
    let drawn = g.names.len();
    let aggregated = drawn < nodes.len();
    let mut dhost = vec![false; drawn];
    for i in 0..nodes.len() {
        dhost[g.of[i]] |= hosts[i];
    }
    let dtier = g.tiers.clone();
    let mut dlinks: Vec<(usize, usize)> = Vec::new();
    for &(a, b) in &links {
        let (a, b) = (g.of[a], g.of[b]);
        let l = (a.min(b), a.max(b));
        if a != b && !dlinks.contains(&l) {
            dlinks.push(l);
        }
    }
    let (hosts, tier, links) = (dhost, dtier, dlinks);
    let rows = tier.iter().max().copied().unwrap_or(0) + 1;
    let widest_row = (0..rows)
        .map(|t| tier.iter().filter(|&&x| x == t).count())
        .max()
        .unwrap_or(1);
    let longest = g.names.iter().map(|n| n.chars().count()).max().unwrap_or(1) as f64;
    let margin = CHAR_PX * longest / 2.0 + 8.0;
    let width =
        (widest_row as f64 * (CHAR_PX * longest + 8.0) + 2.0 * margin).clamp(480.0, MAX_WIDTH);
    let row_h = 80.0;
    let height = 50.0 + row_h * rows as f64 + 20.0;
    let mut pos = vec![(0.0, 0.0); drawn];
    let mut crowded = false;
    for t in 0..rows {
        let members: Vec<usize> = (0..drawn).filter(|&i| tier[i] == t).collect();
        let n = members.len() as f64;
        let step = (width - 2.0 * margin) / n.max(1.0);
        crowded |= step < CHAR_PX * longest + 4.0;
        let y = 50.0 + row_h * (rows - 1 - t) as f64 + 16.0;
        for (k, &i) in members.iter().enumerate() {
            pos[i] = (margin + step * (k as f64 + 0.5), y);
        }
    }
    // Held time per (PAUSE sender, held node), over ports and priorities
    // (and, aggregated, over the members of each group).
    let mut held: Vec<(usize, usize, u64, Vec<String>)> = Vec::new();
    for p in &r.pauses {
        let (Some(to), Some(from)) = (
            nodes.iter().position(|n| *n == p.node),
            nodes.iter().position(|n| *n == p.peer),
        ) else {
            continue;
        };
        let (from, to) = (g.of[from], g.of[to]);
        if from == to {
            continue;
        }
        let ps: u64 = p.intervals.iter().map(|iv| iv.1.saturating_sub(iv.0)).sum();
        let what = if aggregated {
            format!("{} port {} p{}", p.node, p.port, p.priority)
        } else {
            format!("port {} p{}", p.port, p.priority)
        };
        match held.iter_mut().find(|h| h.0 == from && h.1 == to) {
            Some(h) => {
                h.2 += ps;
                if h.3.len() < 8 {
                    h.3.push(what);
                }
            }
            None => held.push((from, to, ps, vec![what])),
        }
    }
    let nodes = &g.names;
    let max_held = held.iter().map(|h| h.2).max().unwrap_or(0).max(1) as f64;
    let title = format!("{}: who paused whom", r.summary.variant);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot map\" width=\"{width:.0}\" \
         height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" \
         font-size=\"11\" role=\"img\"><title>{}</title>\
         <defs><marker id=\"pause-arrow-{idx}\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
         markerWidth=\"5\" markerHeight=\"5\" orient=\"auto-start-reverse\">\
         <path d=\"M0,0 L10,5 L0,10 z\" fill=\"{}\"/></marker></defs>\
         <rect x=\"0\" y=\"0\" width=\"{width:.0}\" height=\"{height:.0}\" fill=\"#fff\"/>\
         <text x=\"{:.1}\" y=\"14\" class=\"t\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>",
        escape(&title),
        escape(color),
        width / 2.0,
        escape(&title)
    );
    for &(a, b) in &links {
        let _ = write!(
            s,
            "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#ccc\"/>",
            pos[a].0, pos[a].1, pos[b].0, pos[b].1
        );
    }
    for (from, to, ps, what) in &held {
        let ((x0, y0), (x1, y1)) = (pos[*from], pos[*to]);
        // Stop short of the held node's circle so the arrowhead shows.
        let (dx, dy) = (x1 - x0, y1 - y0);
        let len = (dx * dx + dy * dy).sqrt().max(1.0);
        let (ex, ey) = (x1 - dx / len * 9.0, y1 - dy / len * 9.0);
        let w = 1.5 + 5.0 * (*ps as f64 / max_held);
        let _ = write!(
            s,
            "<line class=\"pz\" x1=\"{x0:.1}\" y1=\"{y0:.1}\" x2=\"{ex:.1}\" y2=\"{ey:.1}\" \
             stroke=\"{}\" stroke-width=\"{w:.1}\" stroke-opacity=\"0.8\" \
             marker-end=\"url(#pause-arrow-{idx})\"><title>{}</title></line>",
            escape(color),
            escape(&format!(
                "{} paused {} ({}) for {} in all",
                nodes[*from],
                nodes[*to],
                what.join(", "),
                fmt_time(*ps)
            ))
        );
    }
    for (i, n) in nodes.iter().enumerate() {
        let (x, y) = pos[i];
        let _ = write!(
            s,
            "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"6\" fill=\"{}\" stroke=\"#555\"><title>{}</title></circle>",
            if hosts[i] { "#fff" } else { "#ddd" },
            escape(&if g.members[i] > 1 {
                format!("{n}: {} nodes", g.members[i])
            } else {
                n.clone()
            })
        );
        if !crowded || !hosts[i] {
            let _ = write!(
                s,
                "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                y + 20.0,
                escape(n)
            );
        }
    }
    let mut note = match (held.is_empty(), crowded) {
        (true, _) => "no PAUSE: no transmitter was held off".to_string(),
        (false, false) => "arrow: PAUSE sender to the transmitter it held; width: held time".into(),
        (false, true) => {
            "arrow: PAUSE sender to the transmitter it held; host names left out (hover a node)"
                .into()
        }
    };
    if aggregated {
        note = format!(
            "{} nodes drawn as {drawn} groups by tier and pod; {note}",
            g.of.len()
        );
    }
    let _ = write!(
        s,
        "<text class=\"key\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></svg>",
        width / 2.0,
        height - 6.0,
        escape(&note)
    );
    Some(s)
}

/// Most nodes drawn one by one; a larger fabric is drawn as groups.
pub const MAX_NODES: usize = 64;

/// Drawn nodes: each node's group, and per group its name and size.
struct Groups {
    /// Group of each node, by node index.
    of: Vec<usize>,
    /// Name of each group.
    names: Vec<String>,
    /// Nodes in each group.
    members: Vec<usize>,
    /// Tier (row) of each group.
    tiers: Vec<usize>,
}

/// One group per tier and pod. A pod is what a switch's name says
/// (`edge3_1`, `agg3_0`: pod 3, as rocelab's fat tree names them; a host
/// takes the pod of the switch it links to), else a connected part of the
/// fabric below its top tier (a leaf and its hosts in a leaf-spine); the
/// top tier is one group. Nodes of one name prefix share the lowest tier
/// any of them has (with PAUSE links alone, tiers seen from the hosts are
/// partial). A group is named for its members' name prefix, its pod and
/// its size: `edge p3 x8`.
fn groups(nodes: &[&str], hosts: &[bool], links: &[(usize, usize)], tier: &[usize]) -> Groups {
    let prefix = |i: usize| -> String {
        let p: String = nodes[i]
            .chars()
            .take_while(|c| !c.is_ascii_digit())
            .collect();
        match (p.is_empty(), hosts[i]) {
            (false, _) => p,
            (true, true) => "hosts".into(),
            (true, false) => "switches".into(),
        }
    };
    let prefixes: Vec<String> = (0..nodes.len()).map(prefix).collect();
    let tier: Vec<usize> = (0..nodes.len())
        .map(|i| {
            (0..nodes.len())
                .filter(|&j| prefixes[j] == prefixes[i])
                .map(|j| tier[j])
                .min()
                .unwrap_or(tier[i])
        })
        .collect();
    let top = tier.iter().max().copied().unwrap_or(0);
    let neighbours = |i: usize| {
        links.iter().filter_map(move |&(a, b)| {
            if a == i {
                Some(b)
            } else if b == i {
                Some(a)
            } else {
                None
            }
        })
    };
    // Pods named by the switches (`X<pod>_<n>`), hosts after their switch.
    let named = |n: &str| -> Option<usize> {
        let rest = n.trim_start_matches(|c: char| !c.is_ascii_digit());
        let (pod, idx) = rest.split_once('_')?;
        idx.bytes().all(|c| c.is_ascii_digit()).then_some(())?;
        pod.parse().ok()
    };
    let mut pod: Vec<Option<usize>> = nodes.iter().map(|n| named(n)).collect();
    if pod.iter().any(Option::is_some) {
        for i in 0..nodes.len() {
            if hosts[i] && pod[i].is_none() {
                pod[i] = neighbours(i).find_map(|j| named(nodes[j]));
            }
        }
    } else {
        // Connected parts below the top tier.
        let below = |i: usize| tier[i] < top || top == 0;
        let mut pods = 0;
        for start in 0..nodes.len() {
            if pod[start].is_some() || !below(start) {
                continue;
            }
            pod[start] = Some(pods);
            let mut stack = vec![start];
            while let Some(i) = stack.pop() {
                for j in neighbours(i) {
                    if pod[j].is_none() && below(j) {
                        pod[j] = Some(pods);
                        stack.push(j);
                    }
                }
            }
            pods += 1;
        }
    }
    let mut keys: Vec<(usize, Option<usize>, &str)> = Vec::new();
    let mut of = Vec::with_capacity(nodes.len());
    let mut members: Vec<usize> = Vec::new();
    for i in 0..nodes.len() {
        let key = (tier[i], pod[i], prefixes[i].as_str());
        let k = match keys.iter().position(|k| *k == key) {
            Some(k) => k,
            None => {
                keys.push(key);
                members.push(0);
                keys.len() - 1
            }
        };
        members[k] += 1;
        of.push(k);
    }
    let names = keys
        .iter()
        .zip(&members)
        .map(|(&(_, p, prefix), &n)| match p {
            Some(p) => format!("{prefix} p{p} x{n}"),
            None => format!("{prefix} x{n}"),
        })
        .collect();
    Groups {
        of,
        names,
        members,
        tiers: keys.iter().map(|k| k.0).collect(),
    }
}

/// The index of node `n`, added (as not a host) when new.
fn index<'a>(nodes: &mut Vec<&'a str>, hosts: &mut Vec<bool>, n: &'a str) -> usize {
    match nodes.iter().position(|x| *x == n) {
        Some(i) => i,
        None => {
            nodes.push(n);
            hosts.push(false);
            nodes.len() - 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leaf-spine of `leaves` leaves with `per` hosts each and 2 spines,
    /// every leaf pausing spine0 and spine0 pausing leaf0.
    fn fabric(leaves: usize, per: usize) -> RunResult {
        let mut ports = Vec::new();
        let mut port = |node: String, peer: String, nic: bool| {
            ports.push(
                serde_json::json!({"node": node, "port": 0, "peer": peer, "is_nic": nic,
                "prio": [], "rx_discards": 0, "fault_drops": 0, "ecn_marked": 0,
                "max_queue_bytes": 0, "max_headroom_bytes": 0, "errors": {"rx_crc_errors": 0,
                "rx_oversize": 0, "tx_discards": 0, "link_down_events": 0}}),
            );
        };
        let mut pauses = Vec::new();
        for l in 0..leaves {
            for h in 0..per {
                port(format!("h{}", l * per + h), format!("leaf{l}"), true);
            }
            for s in 0..2 {
                port(format!("leaf{l}"), format!("spine{s}"), false);
            }
            pauses.push(
                serde_json::json!({"node": "spine0", "port": l, "peer": format!("leaf{l}"),
                "priority": 3, "intervals": [[0, 1000]], "dropped_intervals": 0}),
            );
        }
        pauses.push(
            serde_json::json!({"node": "leaf0", "port": 9, "peer": "spine0",
            "priority": 3, "intervals": [[0, 5000]], "dropped_intervals": 0}),
        );
        serde_json::from_value(serde_json::json!({
            "summary": {"variant": "v", "sim_time_ps": 1, "events": 1, "flows_completed": 0,
                "flows_total": 0, "goodput_bps": 0.0, "drops": 0, "pause_frames_sent": 1,
                "pause_time_ps": 1, "ecn_marked": 0, "cnps_sent": 0, "retransmitted_packets": 0,
                "fct_p50_ps": null, "fct_p99_ps": null, "max_fct_ps": null, "makespan_ps": 0,
                "bytes_delivered": 0, "frames_sent": 0, "stop_reason": "idle"},
            "flows": [], "groups": [], "ports": ports, "nics": [], "queues": [],
            "pauses": pauses}))
        .unwrap()
    }

    #[test]
    fn a_large_fabric_is_drawn_by_tier_and_pod_and_says_so() {
        let small = pause_map(&fabric(4, 8), 0, "#000").unwrap();
        assert_eq!(small.matches("<circle").count(), 4 * 8 + 4 + 2);
        assert!(!small.contains("groups by tier and pod"));
        // 16 leaves of 16 hosts: 274 nodes, drawn as a host group and a
        // leaf per pod (rack) and one spine group.
        let big = pause_map(&fabric(16, 16), 0, "#000").unwrap();
        assert_eq!(big.matches("<circle").count(), 16 * 2 + 1, "{big}");
        assert!(
            big.contains("274 nodes drawn as 33 groups by tier and pod"),
            "{big}"
        );
        assert!(big.contains("<title>h p0 x16: 16 nodes</title>"), "{big}");
        // One arrow per (sender, held) group pair: spine group to each
        // leaf, and leaf0 back to the spines.
        assert_eq!(big.matches("class=\"pz\"").count(), 17, "{big}");
        assert!(big.contains("spine x2 paused leaf p0 x1"), "{big}");
    }
}
