//! Small topologies built in code, with their routes, for the tests.

use sim::topology::{Endpoint, Link, LinkId, Node, NodeId, NodeKind, Routes, Topology};
use sim::workload::{FlowOp, FlowSpec};
use verbs_emu::time::{Duration, Instant, Rate};

/// A star: switch `sw` (node 0) and hosts `h0..h{n-1}` (nodes 1..=n), host
/// i on switch port i. Every link `rate` and `delay`.
pub fn star(n: usize, rate: Rate, delay: Duration) -> (Topology, Routes) {
    let mut t = Topology::default();
    t.nodes.push(Node {
        name: "sw".into(),
        kind: NodeKind::Switch,
        ports: vec![],
    });
    for i in 0..n {
        t.nodes.push(Node {
            name: format!("h{i}"),
            kind: NodeKind::Host,
            ports: vec![],
        });
        add_link(&mut t, 0, i + 1, rate, delay);
    }
    let routes = shortest_routes(&t);
    (t, routes)
}

/// A chain host `a` - switch `s1` - switch `s2` - host `b` ... used for
/// tests that need a switch-to-switch hop.
pub fn add_link(t: &mut Topology, a: usize, b: usize, rate: Rate, delay: Duration) {
    let id = LinkId(t.links.len() as u32);
    let pa = t.nodes[a].ports.len() as u16;
    let pb = t.nodes[b].ports.len() as u16;
    t.nodes[a].ports.push(id);
    t.nodes[b].ports.push(id);
    t.links.push(Link {
        a: Endpoint {
            node: NodeId(a as u32),
            port: pa,
        },
        b: Endpoint {
            node: NodeId(b as u32),
            port: pb,
        },
        rate,
        delay,
        cable_m: None,
        mtu: 4200,
    });
}

/// All equal-cost shortest next hops by BFS from every host.
pub fn shortest_routes(t: &Topology) -> Routes {
    let n = t.nodes.len();
    let mut host_index = vec![None; n];
    let mut hosts = Vec::new();
    for (i, node) in t.nodes.iter().enumerate() {
        if node.kind == NodeKind::Host {
            host_index[i] = Some(hosts.len() as u32);
            hosts.push(i);
        }
    }
    let peer = |node: usize, port: usize| {
        let l = &t.links[t.nodes[node].ports[port].0 as usize];
        if l.a.node.0 as usize == node && l.a.port as usize == port {
            l.b.node.0 as usize
        } else {
            l.a.node.0 as usize
        }
    };
    let mut next_hops = vec![vec![Vec::new(); hosts.len()]; n];
    for (hi, &h) in hosts.iter().enumerate() {
        let mut dist = vec![usize::MAX; n];
        dist[h] = 0;
        let mut q = std::collections::VecDeque::from([h]);
        while let Some(x) = q.pop_front() {
            // Hosts do not forward.
            if x != h && t.nodes[x].kind == NodeKind::Host {
                continue;
            }
            for p in 0..t.nodes[x].ports.len() {
                let y = peer(x, p);
                if dist[y] == usize::MAX {
                    dist[y] = dist[x] + 1;
                    q.push_back(y);
                }
            }
        }
        for x in 0..n {
            if x == h || dist[x] == usize::MAX {
                continue;
            }
            for p in 0..t.nodes[x].ports.len() {
                let y = peer(x, p);
                if dist[y] != usize::MAX && dist[y] + 1 == dist[x] {
                    next_hops[x][hi].push(p as u16);
                }
            }
        }
    }
    Routes {
        next_hops,
        host_index,
    }
}

/// A WRITE flow of `size` bytes from node `src` to node `dst` at time 0.
pub fn write(id: u32, src: usize, dst: usize, size: u64) -> FlowSpec {
    FlowSpec {
        id,
        src: NodeId(src as u32),
        dst: NodeId(dst as u32),
        size,
        start: Instant::ZERO,
        op: FlowOp::Write,
        message_size: size,
        qp_index: 0,
        priority: 3,
        group: None,
    }
}
