//! Who paused whom, drawn on the topology: one map per variant.
//!
//! Nodes and links come from the run's port records (`record.ports`, on
//! by default) and its PAUSE series. Hosts (nodes with a NIC port) form
//! the bottom row; every other node sits in the row of its hop distance
//! from the nearest host (leaves, then spines, ...), in the order the
//! results list them. Links are thin grey lines; a PAUSE is an arrow from
//! the node that sent it to the transmitter it held, as wide as its share
//! of the longest held time in the variant, with a hover title giving the
//! port, priorities and held time. Positions depend only on the results,
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
    let rows = tier.iter().max().copied().unwrap_or(0) + 1;
    let widest_row = (0..rows)
        .map(|t| tier.iter().filter(|&&x| x == t).count())
        .max()
        .unwrap_or(1);
    let longest = nodes.iter().map(|n| n.chars().count()).max().unwrap_or(1) as f64;
    let margin = CHAR_PX * longest / 2.0 + 8.0;
    let width =
        (widest_row as f64 * (CHAR_PX * longest + 8.0) + 2.0 * margin).clamp(480.0, MAX_WIDTH);
    let row_h = 80.0;
    let height = 50.0 + row_h * rows as f64 + 20.0;
    let mut pos = vec![(0.0, 0.0); nodes.len()];
    let mut crowded = false;
    for t in 0..rows {
        let members: Vec<usize> = (0..nodes.len()).filter(|&i| tier[i] == t).collect();
        let n = members.len() as f64;
        let step = (width - 2.0 * margin) / n.max(1.0);
        crowded |= step < CHAR_PX * longest + 4.0;
        let y = 50.0 + row_h * (rows - 1 - t) as f64 + 16.0;
        for (k, &i) in members.iter().enumerate() {
            pos[i] = (margin + step * (k as f64 + 0.5), y);
        }
    }
    // Held time per (PAUSE sender, held node), over ports and priorities.
    let mut held: Vec<(usize, usize, u64, Vec<String>)> = Vec::new();
    for p in &r.pauses {
        let (Some(to), Some(from)) = (
            nodes.iter().position(|n| *n == p.node),
            nodes.iter().position(|n| *n == p.peer),
        ) else {
            continue;
        };
        let ps: u64 = p.intervals.iter().map(|iv| iv.1.saturating_sub(iv.0)).sum();
        let what = format!("port {} p{}", p.port, p.priority);
        match held.iter_mut().find(|h| h.0 == from && h.1 == to) {
            Some(h) => {
                h.2 += ps;
                h.3.push(what);
            }
            None => held.push((from, to, ps, vec![what])),
        }
    }
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
            escape(n)
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
    let note = match (held.is_empty(), crowded) {
        (true, _) => "no PAUSE: no transmitter was held off".to_string(),
        (false, false) => "arrow: PAUSE sender to the transmitter it held; width: held time".into(),
        (false, true) => {
            "arrow: PAUSE sender to the transmitter it held; host names left out (hover a node)"
                .into()
        }
    };
    let _ = write!(
        s,
        "<text class=\"key\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text></svg>",
        width / 2.0,
        height - 6.0,
        escape(&note)
    );
    Some(s)
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
