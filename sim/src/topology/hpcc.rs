//! Import of the HPCC ns-3 simulator's topology files.
//!
//! Format (`simulation/mix/topology.txt`, `fat.txt`): the first line is
//! `N_nodes N_switches N_links`, the second lists the switch node ids, then
//! one line per link: `src dst rate delay error_rate` (`100Gbps`,
//! `0.001ms`, `0`). Hosts are the ids that are not switches.
//!
//! The import keeps node ids: node `i` of the file is `NodeId(i)`, named
//! `n{i}`, so HPCC flow files (which use node ids) apply unchanged. Host
//! indices follow node order among the hosts. A link's error rate becomes
//! a random-loss fault on both directions ([`HpccTopology::link_loss`]).
//! Links get MTU 4096 (the file does not carry one).

use std::path::Path;

use roce::time::{Duration, Rate};

use super::{LinkId, LinkProps, NodeId, NodeKind, Topology};
use crate::input::FileError;

/// A topology read from an HPCC file.
#[derive(Debug, Clone, PartialEq)]
pub struct HpccTopology {
    /// The nodes and links.
    pub topology: Topology,
    /// Links whose error rate is not zero, with that rate (the probability
    /// a packet is lost).
    pub link_loss: Vec<(LinkId, f64)>,
}

/// Parse the text of an HPCC topology file named `file`.
pub fn parse(file: &Path, text: &str) -> Result<HpccTopology, FileError> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.split('#').next().unwrap_or("").trim()))
        .filter(|(_, l)| !l.is_empty());
    let bad = |line: usize, msg: String| FileError {
        file: file.to_path_buf(),
        position: Some((line, 1)),
        key: None,
        message: msg,
    };
    let (hl, header) = lines.next().ok_or_else(|| {
        bad(
            1,
            "empty file: expected `N_nodes N_switches N_links`".into(),
        )
    })?;
    let nums: Vec<u32> = header
        .split_whitespace()
        .map(|w| w.parse::<u32>())
        .collect::<Result<_, _>>()
        .map_err(|_| {
            bad(
                hl,
                format!("{header:?}: expected `N_nodes N_switches N_links`"),
            )
        })?;
    let [n_nodes, n_switches, n_links] = nums[..] else {
        return Err(bad(
            hl,
            format!("{header:?}: expected three numbers `N_nodes N_switches N_links`"),
        ));
    };
    if n_switches > n_nodes || n_nodes > 1_000_000 {
        return Err(bad(hl, format!("{n_switches} switches among {n_nodes} nodes: expected at most as many switches as nodes (and at most 1000000 nodes)")));
    }
    let mut is_switch = vec![false; n_nodes as usize];
    if n_switches > 0 {
        let (sl, ids) = lines
            .next()
            .ok_or_else(|| bad(hl + 1, "missing the line of switch ids".into()))?;
        let ids: Vec<&str> = ids.split_whitespace().collect();
        if ids.len() != n_switches as usize {
            return Err(bad(
                sl,
                format!("{} switch ids: expected {n_switches}", ids.len()),
            ));
        }
        for w in ids {
            let id: u32 = w
                .parse()
                .map_err(|_| bad(sl, format!("switch id {w:?}: expected a node id")))?;
            if id >= n_nodes {
                return Err(bad(sl, format!("switch id {id}: expected below {n_nodes}")));
            }
            is_switch[id as usize] = true;
        }
    }
    let mut topology = Topology::new();
    for (i, &s) in is_switch.iter().enumerate() {
        let kind = if s { NodeKind::Switch } else { NodeKind::Host };
        topology.add_node(format!("n{i}"), kind);
    }
    let mut link_loss = Vec::new();
    let mut count = 0u32;
    for (ln, line) in lines {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() != 5 {
            return Err(bad(
                ln,
                format!("{line:?}: expected `src dst rate delay error_rate`"),
            ));
        }
        let node = |s: &str| -> Result<NodeId, FileError> {
            match s.parse::<u32>() {
                Ok(v) if v < n_nodes => Ok(NodeId(v)),
                _ => Err(bad(ln, format!("node id {s:?}: expected 0..{n_nodes}"))),
            }
        };
        let (a, b) = (node(w[0])?, node(w[1])?);
        let rate: Rate = w[2].parse().map_err(|e| bad(ln, format!("rate: {e}")))?;
        let delay: Duration = w[3].parse().map_err(|e| bad(ln, format!("delay: {e}")))?;
        let error: f64 = match w[4].parse::<f64>() {
            Ok(p) if (0.0..=1.0).contains(&p) => p,
            _ => {
                return Err(bad(
                    ln,
                    format!("error rate {:?}: expected a probability in [0, 1]", w[4]),
                ))
            }
        };
        let props = LinkProps {
            rate,
            delay,
            cable_m: None,
            mtu: 4096,
        };
        let id = topology
            .add_link(a, b, props)
            .map_err(|e| bad(ln, e.to_string()))?;
        if error > 0.0 {
            link_loss.push((id, error));
        }
        count += 1;
    }
    if count != n_links {
        return Err(bad(
            hl,
            format!("{count} links listed: expected {n_links} as the header says"),
        ));
    }
    topology
        .check()
        .map_err(|e| FileError::new(file, "", e.to_string()))?;
    Ok(HpccTopology {
        topology,
        link_loss,
    })
}

/// Read and parse an HPCC topology file.
pub fn load(path: &Path) -> Result<HpccTopology, FileError> {
    let text = crate::input::read_file(path)?;
    parse(path, &text)
}
