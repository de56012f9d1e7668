//! Which snapshots belong together: counter snapshots of every input,
//! grouped into sources (one host NIC port or switch port each) whose
//! first and last snapshot make a delta.
//!
//! Contract. A snapshot is keyed by its run variant (scope), its kind
//! (port or RDMA counters), its folder, and its name: the host or port the
//! text itself names (`# host:`, an `ethtool -S IFACE` command line, a
//! switch table's port), else the file's name without snapshot words
//! ([`counter_file_name`]: `snap1.txt` and `snap2.txt` are one source,
//! `ethtool_before.txt` and `ethtool_after.txt` too). A file whose name
//! names only a tool sits in a per-host folder and is named by it
//! (`node1/ethtool_before.txt` is host `node1`): snapshots of different
//! folders never pair, so one host's counters are never subtracted from
//! another's. Single snapshots of one folder left after that are paired by
//! **content** when it is unambiguous: the same kind of port with the same
//! counters, the same named port when both name one, not taken at the same
//! time, and every counter of one at least its value in the other with
//! some grown (counters only grow): exactly one such partner each. The
//! group says how it was paired ([`Group::paired_by`]).

use std::collections::{BTreeMap, BTreeSet};

use super::counters::{Entity, Snap};
use super::names::{counter_file_name, folder_of, host_folder};

/// One snapshot as read, before grouping.
#[derive(Debug, Clone)]
pub(super) struct Raw {
    /// The run variant, when the file sits in a run folder.
    pub scope: Option<String>,
    /// The input's name (its path).
    pub file: String,
    /// Port counters (`false`) or RDMA counters (`true`).
    pub rdma: bool,
    /// The host, interface or port the text names, when it does.
    pub named: Option<String>,
    /// What it is a port of.
    pub entity: Entity,
    /// The snapshot.
    pub snap: Snap,
}

/// Snapshots of one source.
#[derive(Debug, Clone)]
pub(super) struct Group {
    /// The run variant.
    pub scope: Option<String>,
    /// RDMA counters.
    pub rdma: bool,
    /// Display name of the source.
    pub name: String,
    /// The node (host or switch) when the inputs say it; `""` to derive
    /// it from the name.
    pub node: String,
    /// What it is a port of.
    pub entity: Entity,
    /// Input files, in reading order, without repeats.
    pub files: Vec<String>,
    /// Snapshots, in reading order.
    pub snaps: Vec<Snap>,
    /// How several snapshots were put together.
    pub paired_by: Option<String>,
}

/// The node of switch ports whose switch the capture does not name.
pub(super) const UNNAMED_SWITCH: &str = "switch";

/// Grouping key: scope, kind, folder, name from the text, name from the
/// file.
type Key = (Option<String>, bool, String, Option<String>, String);

/// Group snapshots into sources (see the module docs).
pub(super) fn group(raws: Vec<Raw>) -> Vec<Group> {
    let mut by: BTreeMap<Key, Group> = BTreeMap::new();
    let mut order: Vec<Key> = Vec::new();
    for r in raws {
        let (file_name, generic) = counter_file_name(&r.file);
        let folder = folder_of(&r.file).to_string();
        let host_dir = host_folder(&r.file).filter(|_| generic);
        // A switch table or a NetQ row names `HOST:PORT` or the port only.
        let (named_node, named) = match r.named.as_deref() {
            Some(n) if r.entity == Entity::SwitchPort => match n.split_once(':') {
                Some((h, p)) if !h.is_empty() && !p.is_empty() => {
                    (Some(h.to_string()), Some(p.to_string()))
                }
                _ => (None, Some(n.to_string())),
            },
            Some(n) => (None, Some(n.to_string())),
            None => (None, None),
        };
        let key: Key = (
            r.scope.clone(),
            r.rdma,
            folder,
            named.clone(),
            if named.is_some() && r.entity == Entity::SwitchPort {
                // Switch ports of one table: the file names the switch.
                file_name.clone()
            } else if named.is_some() {
                String::new()
            } else {
                file_name.clone()
            },
        );
        let g = by.entry(key.clone()).or_insert_with(|| {
            order.push(key.clone());
            let node = match r.entity {
                Entity::SwitchPort => named_node
                    .clone()
                    .or_else(|| host_dir.clone())
                    .or_else(|| {
                        (!generic && !file_name.is_empty() && Some(&file_name) != named.as_ref())
                            .then(|| file_name.clone())
                    })
                    .unwrap_or_else(|| {
                        if named.is_some() {
                            UNNAMED_SWITCH.to_string()
                        } else {
                            String::new()
                        }
                    }),
                _ => host_dir.clone().unwrap_or_default(),
            };
            let name = match (&named, r.entity) {
                (Some(p), Entity::SwitchPort) => format!("{node}/{p}"),
                (Some(n), _) => match &host_dir {
                    Some(h) if h != n => format!("{h}/{n}"),
                    _ => n.clone(),
                },
                (None, _) => host_dir.clone().unwrap_or_else(|| file_name.clone()),
            };
            Group {
                scope: r.scope.clone(),
                rdma: r.rdma,
                name,
                node,
                entity: r.entity,
                files: Vec::new(),
                snaps: Vec::new(),
                paired_by: None,
            }
        });
        if !g.files.contains(&r.file) {
            g.files.push(r.file.clone());
        }
        g.snaps.push(r.snap);
    }
    let mut groups: Vec<Group> = order.into_iter().filter_map(|k| by.remove(&k)).collect();
    for g in &mut groups {
        if g.snaps.len() > 1 {
            g.paired_by = Some(
                if g.files.len() == 1 {
                    "one file"
                } else if g.files.iter().all(|f| host_folder(f).is_some())
                    && counter_file_name(&g.files[0]).1
                {
                    "folder"
                } else {
                    "file name"
                }
                .to_string(),
            );
        }
    }
    pair_by_content(groups)
}

/// Pair single real snapshots of one folder by content (module docs).
fn pair_by_content(mut groups: Vec<Group>) -> Vec<Group> {
    let single = |g: &Group| {
        g.snaps.len() == 1
            && !g.snaps[0].simulated
            && !g.snaps[0].run_delta
            && !g.snaps[0].counters.is_empty()
    };
    let idx: Vec<usize> = (0..groups.len()).filter(|i| single(&groups[*i])).collect();
    let mut partners: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (n, &a) in idx.iter().enumerate() {
        for &b in &idx[n + 1..] {
            if compatible(&groups[a], &groups[b]) {
                partners.entry(a).or_default().push(b);
                partners.entry(b).or_default().push(a);
            }
        }
    }
    let mut gone: BTreeSet<usize> = BTreeSet::new();
    for (&a, ps) in &partners {
        let [b] = ps.as_slice() else { continue };
        if a > *b || gone.contains(&a) || gone.contains(b) {
            continue;
        }
        if partners.get(b).map(Vec::len) != Some(1) {
            continue;
        }
        let (a, b) = (a, *b);
        // Earlier first: by time when both carry one, else by growth.
        let (first, second) = match (groups[a].snaps[0].time_ns, groups[b].snaps[0].time_ns) {
            (Some(x), Some(y)) if y < x => (b, a),
            (Some(_), Some(_)) => (a, b),
            _ if dominates(&groups[a].snaps[0], &groups[b].snaps[0]) => (b, a),
            _ => (a, b),
        };
        let later = groups[second].clone();
        let g = &mut groups[first];
        g.snaps.extend(later.snaps);
        g.files.extend(later.files.iter().cloned());
        g.paired_by = Some(format!(
            "content: {} then {} (same counters, every counter grew or stayed)",
            g.files[0],
            later.files.first().cloned().unwrap_or_default()
        ));
        if g.name.is_empty() {
            g.name = later.name;
        }
        gone.insert(second);
    }
    groups
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !gone.contains(i))
        .map(|(_, g)| g)
        .collect()
}

/// Two single snapshots that can be one port's before and after.
fn compatible(a: &Group, b: &Group) -> bool {
    let (x, y) = (&a.snaps[0], &b.snaps[0]);
    let same_place = a.scope == b.scope
        && a.rdma == b.rdma
        && a.entity == b.entity
        && a.files.first().map(|f| folder_of(f)) == b.files.first().map(|f| folder_of(f));
    if !same_place || a.name == b.name {
        return false;
    }
    if matches!((x.time_ns, y.time_ns), (Some(s), Some(t)) if s == t) {
        return false;
    }
    // A file named after a host (not after a tool or a snapshot) is that
    // host: two of them are two hosts, never one's before and after.
    let named = |g: &Group| !g.name.is_empty() && !counter_file_name(&g.files[0]).1;
    if named(a) || named(b) {
        return false;
    }
    let ka: BTreeSet<&String> = x.counters.keys().collect();
    let kb: BTreeSet<&String> = y.counters.keys().collect();
    let common = ka.intersection(&kb).count();
    let union = ka.union(&kb).count();
    if union == 0 || common * 10 < union * 9 || common < 4 {
        return false;
    }
    dominates(x, y) || dominates(y, x)
}

/// Every shared counter of `a` at least that of `b`, one strictly more.
fn dominates(a: &Snap, b: &Snap) -> bool {
    let mut more = false;
    for (k, va) in &a.counters {
        if let Some(vb) = b.counters.get(k) {
            if va < vb {
                return false;
            }
            more |= va > vb;
        }
    }
    more
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(file: &str, named: Option<&str>, vals: &[(&str, u64)]) -> Raw {
        Raw {
            scope: None,
            file: file.into(),
            rdma: false,
            named: named.map(str::to_string),
            entity: Entity::HostPort,
            snap: Snap {
                counters: vals.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
                ..Snap::default()
            },
        }
    }

    const A: &[(&str, u64)] = &[("a", 1), ("b", 2), ("c", 3), ("d", 4)];
    const B: &[(&str, u64)] = &[("a", 5), ("b", 2), ("c", 9), ("d", 4)];
    const C: &[(&str, u64)] = &[("a", 9), ("b", 1), ("c", 9), ("d", 4)];

    #[test]
    fn per_host_folders_stay_per_host() {
        let g = group(vec![
            raw("x/node1/ethtool_before.txt", Some("eth0"), A),
            raw("x/node2/ethtool_after.txt", Some("eth0"), B),
            raw("x/node1/ethtool_after.txt", Some("eth0"), B),
        ]);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].name.as_str(), g[0].snaps.len()), ("node1/eth0", 2));
        assert_eq!((g[1].name.as_str(), g[1].snaps.len()), ("node2/eth0", 1));
        assert_eq!(g[0].node, "node1");
    }

    #[test]
    fn snapshots_pair_by_name_or_by_content() {
        let g = group(vec![raw("snap1.txt", None, A), raw("snap2.txt", None, B)]);
        assert_eq!(g.len(), 1);
        // One dump names its interface, the other does not.
        let g = group(vec![
            raw("x/ethtool.txt", Some("eth0"), A),
            raw("x/stats.txt", None, B),
        ]);
        assert_eq!(g.len(), 1, "{g:?}");
        assert!(g[0].paired_by.as_deref().unwrap().starts_with("content"));
        // Counters that fell: two ports, not two snapshots.
        let g = group(vec![
            raw("x/ethtool.txt", Some("eth0"), A),
            raw("x/stats.txt", None, C),
        ]);
        assert_eq!(g.len(), 2);
        // Hosts named by their files never pair by content.
        let g = group(vec![raw("h1.txt", None, A), raw("h2.txt", None, B)]);
        assert_eq!(g.len(), 2);
    }
}
