//! Equal-cost shortest-path routes.
//!
//! [`Routes::compute`] keeps, at every node and for each destination host,
//! each port whose neighbour is one hop closer to the destination (hop
//! count metric; hosts never forward, so paths go through switches only).
//!
//! It does not search once per destination. Two hosts attached to the same
//! set of switches (the hosts under one edge switch, or one server's NICs
//! on the same rails) are reached the same way from every node that is not
//! their direct neighbour: a node's distance to such a host is one more
//! than its distance to the nearest of those switches. So hosts are
//! grouped into **attachment classes** by that set; one breadth-first
//! search per class, started at the class's switches, gives the next hops
//! of every node not adjacent to the destination, and each host keeps its
//! own short list for its neighbours (the ports of the links to it). A
//! k-ary fat tree has `k²/2` classes for `k³/4` hosts: 512 searches and a
//! 19 MB table at k=32 (8,192 hosts) instead of 8,192 searches and an
//! all-pairs table of 310 MB. Cost: O(classes x links).
//!
//! Storage is compact: most (node, class) pairs share a port set (every
//! non-local destination of an edge switch uses the same uplinks), so sets
//! are interned once and the table holds a `u32` per pair.

use std::collections::HashMap;

use super::{NodeId, NodeKind, Topology};

/// Equal-cost next hops: for each node and each destination host, the
/// egress ports on shortest paths (empty when unreachable or at the host
/// itself). Ports are in ascending order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    /// Number of hosts.
    hosts: u32,
    /// Attachment class of each host (by host index).
    class_of: Vec<u32>,
    /// `table[class * nodes + node]`: index of the port set from `node`
    /// towards the hosts of `class`, for nodes not adjacent to the host.
    /// Class major, so computing one class's column writes memory in order.
    table: Vec<u32>,
    /// Per host, its entries in `attach`: `attach[attach_start[h]..
    /// attach_start[h + 1]]`.
    attach_start: Vec<u32>,
    /// (neighbour node, port set): the ports of each of a host's
    /// neighbours that lead straight to it.
    attach: Vec<(u32, u32)>,
    /// Port sets, flattened; set `i` is `ports[offsets[i]..offsets[i + 1]]`.
    ports: Vec<u16>,
    /// Offsets into `ports`, one more than there are sets.
    offsets: Vec<u32>,
    /// Host index of each node (`None` for switches).
    host_index: Vec<Option<u32>>,
    /// Node of each host index.
    host_nodes: Vec<NodeId>,
}

/// Port sets interned once: set 0 is the empty set.
struct Interner {
    ports: Vec<u16>,
    offsets: Vec<u32>,
    ids: HashMap<Vec<u16>, u32>,
}

impl Interner {
    fn new() -> Interner {
        let mut ids = HashMap::new();
        ids.insert(Vec::new(), 0);
        Interner {
            ports: Vec::new(),
            offsets: vec![0, 0],
            ids,
        }
    }

    fn get(&self, id: u32) -> &[u16] {
        let i = id as usize;
        &self.ports[self.offsets[i] as usize..self.offsets[i + 1] as usize]
    }

    /// The id of `set` (ascending ports), adding it when new.
    fn intern(&mut self, set: &[u16]) -> u32 {
        if let Some(&id) = self.ids.get(set) {
            return id;
        }
        let id = (self.offsets.len() - 1) as u32;
        self.ports.extend_from_slice(set);
        self.offsets.push(self.ports.len() as u32);
        self.ids.insert(set.to_vec(), id);
        id
    }
}

impl Routes {
    /// Compute all shortest-path next hops of `topo`.
    pub fn compute(topo: &Topology) -> Routes {
        Routes::compute_avoiding(topo, &[])
    }

    /// Compute the next hops of `topo` without the links marked in `down`
    /// (indexed by link id; missing entries are up): the routes the
    /// switches converge to after a link failure.
    pub fn compute_avoiding(topo: &Topology, down: &[bool]) -> Routes {
        let n = topo.nodes.len();
        let host_nodes = topo.hosts();
        let mut host_index = vec![None; n];
        for (i, h) in host_nodes.iter().enumerate() {
            host_index[h.0 as usize] = Some(i as u32);
        }
        let adj = Adjacency::new(topo, down);
        let mut sets = Interner::new();
        // Classes: hosts by the set of switches they are linked to.
        let mut class_ids: HashMap<Vec<u32>, u32> = HashMap::new();
        let mut class_roots: Vec<Vec<u32>> = Vec::new();
        let mut class_of = Vec::with_capacity(host_nodes.len());
        let mut attach_start = Vec::with_capacity(host_nodes.len() + 1);
        let mut attach = Vec::new();
        let mut scratch: Vec<u16> = Vec::new();
        for &h in &host_nodes {
            let mut key: Vec<u32> = adj
                .of(h.0 as usize)
                .iter()
                .map(|&(_, v)| v)
                .filter(|&v| adj.is_switch[v as usize])
                .collect();
            key.sort_unstable();
            key.dedup();
            let next = class_roots.len() as u32;
            let c = *class_ids.entry(key.clone()).or_insert(next);
            if c == next {
                class_roots.push(key);
            }
            class_of.push(c);
            // Each neighbour's ports straight to this host.
            attach_start.push(attach.len() as u32);
            let mut nbrs: Vec<u32> = adj.of(h.0 as usize).iter().map(|&(_, v)| v).collect();
            nbrs.sort_unstable();
            nbrs.dedup();
            for u in nbrs {
                scratch.clear();
                scratch.extend(
                    adj.of(u as usize)
                        .iter()
                        .filter(|&&(_, v)| v == h.0)
                        .map(|&(p, _)| p),
                );
                attach.push((u, sets.intern(&scratch)));
            }
        }
        attach_start.push(attach.len() as u32);
        let mut table = vec![0u32; n * class_roots.len()];
        let mut dist = vec![u32::MAX; n];
        let mut queue = Vec::with_capacity(n);
        // The last set each node was given: consecutive classes share
        // sets, and comparing a slice is cheaper than hashing it.
        let mut last: Vec<u32> = vec![0; n];
        for (c, roots) in class_roots.iter().enumerate() {
            adj.bfs_from(roots, &mut dist, &mut queue);
            for u in 0..n {
                let du = dist[u];
                // Unreachable, or a neighbour of the class's hosts (their
                // own lists answer for those).
                if du == u32::MAX || du <= 1 {
                    continue;
                }
                scratch.clear();
                for &(port, v) in adj.of(u) {
                    if dist[v as usize] == du - 1 && adj.is_switch[v as usize] {
                        scratch.push(port);
                    }
                }
                let set = if sets.get(last[u]) == &scratch[..] {
                    last[u]
                } else {
                    sets.intern(&scratch)
                };
                last[u] = set;
                table[c * n + u] = set;
            }
        }
        Routes {
            hosts: host_nodes.len() as u32,
            class_of,
            table,
            attach_start,
            attach,
            ports: sets.ports,
            offsets: sets.offsets,
            host_index,
            host_nodes,
        }
    }

    /// Routes from explicit tables (hand-built topologies in tests):
    /// `next_hops[node][dest_host]` lists egress ports, `host_index[node]`
    /// the host index of each node. Port lists are sorted here. Each host
    /// is its own class.
    pub fn from_next_hops(next_hops: Vec<Vec<Vec<u16>>>, host_index: Vec<Option<u32>>) -> Routes {
        let n = next_hops.len();
        let hosts = host_index.iter().flatten().count();
        let mut host_nodes = vec![NodeId(0); hosts];
        for (i, h) in host_index.iter().enumerate() {
            if let Some(slot) = h.and_then(|h| host_nodes.get_mut(h as usize)) {
                *slot = NodeId(i as u32);
            }
        }
        let mut sets = Interner::new();
        let mut table = vec![0u32; n * hosts];
        for (u, row) in next_hops.into_iter().enumerate() {
            for (d, mut set) in row.into_iter().enumerate().take(hosts) {
                set.sort_unstable();
                table[d * n + u] = sets.intern(&set);
            }
        }
        Routes {
            hosts: hosts as u32,
            class_of: (0..hosts as u32).collect(),
            table,
            attach_start: vec![0; hosts + 1],
            attach: Vec::new(),
            ports: sets.ports,
            offsets: sets.offsets,
            host_index,
            host_nodes,
        }
    }

    /// Egress ports of `node` on shortest paths to the host with index
    /// `dest_host`, ascending; empty at the destination itself, when it is
    /// unreachable, or for ids out of range.
    pub fn next_hops(&self, node: NodeId, dest_host: u32) -> &[u16] {
        let set = self.set_id(node, dest_host) as usize;
        &self.ports[self.offsets[set] as usize..self.offsets[set + 1] as usize]
    }

    /// The id of the port set [`Routes::next_hops`] returns: equal ids,
    /// equal sets (0 is the empty set).
    pub fn set_id(&self, node: NodeId, dest_host: u32) -> u32 {
        let n = self.host_index.len();
        let d = dest_host as usize;
        if dest_host >= self.hosts || node.0 as usize >= n || self.host_nodes[d] == node {
            return 0;
        }
        let near = &self.attach[self.attach_start[d] as usize..self.attach_start[d + 1] as usize];
        if let Some(&(_, set)) = near.iter().find(|&&(u, _)| u == node.0) {
            return set;
        }
        let c = self.class_of[d] as usize;
        self.table
            .get(c * n + node.0 as usize)
            .copied()
            .unwrap_or(0)
    }

    /// Host index of `node`, or `None` for a switch.
    pub fn host_index(&self, node: NodeId) -> Option<u32> {
        self.host_index.get(node.0 as usize).copied().flatten()
    }

    /// The node of the host with index `index`.
    pub fn host_node(&self, index: u32) -> Option<NodeId> {
        self.host_nodes.get(index as usize).copied()
    }

    /// Number of nodes the routes were computed for.
    pub fn node_count(&self) -> usize {
        self.host_index.len()
    }

    /// Number of hosts.
    pub fn host_count(&self) -> u32 {
        self.hosts
    }

    /// Number of distinct port sets stored (a measure of table size).
    pub fn distinct_sets(&self) -> usize {
        self.offsets.len() - 1
    }
}

/// Hop distances from `from` to every node, through switches only
/// (`u32::MAX` when unreachable).
pub(crate) fn distances_from(topo: &Topology, from: NodeId) -> Vec<u32> {
    let adj = Adjacency::new(topo, &[]);
    let mut dist = vec![u32::MAX; topo.nodes.len()];
    let mut queue = Vec::new();
    adj.bfs(from, &mut dist, &mut queue);
    dist
}

/// Neighbours of every node as (port, neighbour) pairs, flattened.
struct Adjacency {
    start: Vec<u32>,
    edges: Vec<(u16, u32)>,
    is_switch: Vec<bool>,
}

impl Adjacency {
    fn new(topo: &Topology, down: &[bool]) -> Adjacency {
        let mut start = Vec::with_capacity(topo.nodes.len() + 1);
        let mut edges = Vec::with_capacity(topo.links.len() * 2);
        for (i, node) in topo.nodes.iter().enumerate() {
            start.push(edges.len() as u32);
            for (port, &l) in node.ports.iter().enumerate() {
                if down.get(l.0 as usize).copied().unwrap_or(false) {
                    continue;
                }
                let link = topo.link(l);
                let peer = if link.a.node.0 as usize == i && link.a.port as usize == port {
                    link.b.node
                } else {
                    link.a.node
                };
                edges.push((port as u16, peer.0));
            }
        }
        start.push(edges.len() as u32);
        let is_switch = topo
            .nodes
            .iter()
            .map(|n| n.kind == NodeKind::Switch)
            .collect();
        Adjacency {
            start,
            edges,
            is_switch,
        }
    }

    fn of(&self, u: usize) -> &[(u16, u32)] {
        &self.edges[self.start[u] as usize..self.start[u + 1] as usize]
    }

    /// Breadth-first search from the switches `roots`, all at distance 1
    /// (the neighbours of a class's hosts); only switches are expanded.
    fn bfs_from(&self, roots: &[u32], dist: &mut [u32], queue: &mut Vec<u32>) {
        dist.fill(u32::MAX);
        queue.clear();
        for &r in roots {
            dist[r as usize] = 1;
            queue.push(r);
        }
        self.spread(dist, queue, None);
    }

    /// Breadth-first search from `root`; only switches (and the root) are
    /// expanded.
    fn bfs(&self, root: NodeId, dist: &mut [u32], queue: &mut Vec<u32>) {
        dist.fill(u32::MAX);
        queue.clear();
        dist[root.0 as usize] = 0;
        queue.push(root.0);
        self.spread(dist, queue, Some(root.0));
    }

    /// Run a search whose seeds are in `queue` with their distances:
    /// expand switches, and `host` (the root) even though it is a host.
    fn spread(&self, dist: &mut [u32], queue: &mut Vec<u32>, host: Option<u32>) {
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head];
            head += 1;
            if Some(u) != host && !self.is_switch[u as usize] {
                continue;
            }
            let du = dist[u as usize];
            for &(_, v) in self.of(u as usize) {
                if dist[v as usize] == u32::MAX {
                    dist[v as usize] = du + 1;
                    queue.push(v);
                }
            }
        }
    }
}
