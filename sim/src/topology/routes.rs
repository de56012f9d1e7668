//! Equal-cost shortest-path routes.
//!
//! [`Routes::compute`] runs one breadth-first search per destination host
//! (hop count metric; hosts never forward, so paths go through switches
//! only) and keeps, at every node, each port whose neighbour is one hop
//! closer to the destination. Cost: O(hosts x links), about 20 ms for a
//! 1024-host k=16 fat tree in release builds.
//!
//! Storage is compact: most (node, destination) pairs share a port set
//! (every non-local destination of an edge switch uses the same uplinks),
//! so sets are interned once and the table holds a `u32` per pair.

use std::collections::HashMap;

use super::{NodeId, NodeKind, Topology};

/// Equal-cost next hops: for each node and each destination host, the
/// egress ports on shortest paths (empty when unreachable or at the host
/// itself). Ports are in ascending order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    /// Number of hosts.
    hosts: u32,
    /// `table[dest * nodes + node]`: index of the port set. Destination
    /// major, so computing one destination's column writes memory in order.
    table: Vec<u32>,
    /// Port sets, flattened; set `i` is `ports[offsets[i]..offsets[i + 1]]`.
    ports: Vec<u16>,
    /// Offsets into `ports`, one more than there are sets.
    offsets: Vec<u32>,
    /// Host index of each node (`None` for switches).
    host_index: Vec<Option<u32>>,
    /// Node of each host index.
    host_nodes: Vec<NodeId>,
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
        let hosts = host_nodes.len();
        // Set 0 is the empty set.
        let mut offsets = vec![0u32, 0u32];
        let mut ports: Vec<u16> = Vec::new();
        let mut interned: HashMap<Vec<u16>, u32> = HashMap::new();
        interned.insert(Vec::new(), 0);
        let mut table = vec![0u32; n * hosts];
        let mut dist = vec![u32::MAX; n];
        let mut queue = Vec::with_capacity(n);
        let mut scratch: Vec<u16> = Vec::new();
        // The last set each node was given: consecutive destinations share
        // sets, and comparing a slice is cheaper than hashing it.
        let mut last: Vec<u32> = vec![0; n];
        for (d, &dest) in host_nodes.iter().enumerate() {
            adj.bfs(dest, &mut dist, &mut queue);
            for u in 0..n {
                let du = dist[u];
                if du == u32::MAX || du == 0 {
                    continue;
                }
                scratch.clear();
                for &(port, v) in adj.of(u) {
                    if dist[v as usize] == du - 1 && adj.forwards(v, dest) {
                        scratch.push(port);
                    }
                }
                let prev = last[u] as usize;
                let set =
                    if ports[offsets[prev] as usize..offsets[prev + 1] as usize] == scratch[..] {
                        last[u]
                    } else {
                        let next = (offsets.len() - 1) as u32;
                        let id = *interned.entry(scratch.clone()).or_insert(next);
                        if id == next {
                            ports.extend_from_slice(&scratch);
                            offsets.push(ports.len() as u32);
                        }
                        id
                    };
                last[u] = set;
                table[d * n + u] = set;
            }
        }
        Routes {
            hosts: hosts as u32,
            table,
            ports,
            offsets,
            host_index,
            host_nodes,
        }
    }

    /// Routes from explicit tables (hand-built topologies in tests):
    /// `next_hops[node][dest_host]` lists egress ports, `host_index[node]`
    /// the host index of each node. Port lists are sorted here.
    pub fn from_next_hops(next_hops: Vec<Vec<Vec<u16>>>, host_index: Vec<Option<u32>>) -> Routes {
        let n = next_hops.len();
        let hosts = host_index.iter().flatten().count();
        let mut host_nodes = vec![NodeId(0); hosts];
        for (i, h) in host_index.iter().enumerate() {
            if let Some(slot) = h.and_then(|h| host_nodes.get_mut(h as usize)) {
                *slot = NodeId(i as u32);
            }
        }
        let mut offsets = vec![0u32, 0u32];
        let mut ports: Vec<u16> = Vec::new();
        let mut interned: HashMap<Vec<u16>, u32> = HashMap::new();
        interned.insert(Vec::new(), 0);
        let mut table = vec![0u32; n * hosts];
        for (u, row) in next_hops.into_iter().enumerate() {
            for (d, mut set) in row.into_iter().enumerate().take(hosts) {
                set.sort_unstable();
                let next = (offsets.len() - 1) as u32;
                let id = *interned.entry(set.clone()).or_insert(next);
                if id == next {
                    ports.extend_from_slice(&set);
                    offsets.push(ports.len() as u32);
                }
                table[d * n + u] = id;
            }
        }
        Routes {
            hosts: hosts as u32,
            table,
            ports,
            offsets,
            host_index,
            host_nodes,
        }
    }

    /// Egress ports of `node` on shortest paths to the host with index
    /// `dest_host`, ascending; empty at the destination itself, when it is
    /// unreachable, or for ids out of range.
    pub fn next_hops(&self, node: NodeId, dest_host: u32) -> &[u16] {
        if dest_host >= self.hosts {
            return &[];
        }
        let n = self.host_index.len();
        if node.0 as usize >= n {
            return &[];
        }
        let Some(&set) = self.table.get(dest_host as usize * n + node.0 as usize) else {
            return &[];
        };
        let set = set as usize;
        &self.ports[self.offsets[set] as usize..self.offsets[set + 1] as usize]
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

    /// Whether traffic for `dest` may be handed to `v`: switches forward,
    /// hosts only accept their own traffic.
    fn forwards(&self, v: u32, dest: NodeId) -> bool {
        self.is_switch[v as usize] || v == dest.0
    }

    /// Breadth-first search from `root`; only switches (and the root) are
    /// expanded.
    fn bfs(&self, root: NodeId, dist: &mut [u32], queue: &mut Vec<u32>) {
        dist.fill(u32::MAX);
        queue.clear();
        dist[root.0 as usize] = 0;
        queue.push(root.0);
        let mut head = 0;
        while head < queue.len() {
            let u = queue[head];
            head += 1;
            if u != root.0 && !self.is_switch[u as usize] {
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
