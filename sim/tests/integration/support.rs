//! Small topologies built in code, with their routes, for the tests.

use roce::time::{Duration, Instant, Rate};
use sim::topology::{Endpoint, Link, LinkId, Node, NodeId, NodeKind, Routes, Topology};
use sim::workload::{FlowOp, FlowSpec};

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

/// All equal-cost shortest next hops.
pub fn shortest_routes(t: &Topology) -> Routes {
    Routes::compute(t)
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
        after: Vec::new(),
        workload: 0,
        post: None,
        local: None,
        landing: false,
        delay: roce::time::Duration::ZERO,
    }
}

/// Run the first variant of the scenario `text` (as file `t.toml`, on
/// its own routes) and return its result; a scenario that does not load
/// panics with the loader's error.
pub fn run_text(text: &str) -> sim::results::RunResult {
    let s = sim::scenario::from_str(std::path::Path::new("t.toml"), text)
        .unwrap_or_else(|e| panic!("{e}"));
    let v = &s.variants[0];
    let topo = &s.topologies[v.topology];
    sim::run::simulate(
        topo,
        &Routes::compute(topo),
        &v.config,
        &v.flows,
        &v.run_options(),
    )
    .unwrap()
    .0
}

/// A lossy 16:1 incast: hosts h8-h23 (two other racks of a 4-leaf,
/// 2-spine leaf-spine at 100 Gbit/s) each WRITE 1 MB to h0 at once, PFC
/// off, flows recorded; `fabric` and `nic` are TOML lines added to those
/// tables (the switch buffer, the transport, congestion control).
pub fn lossy_incast(fabric: &str, nic: &str) -> sim::results::RunResult {
    run_text(&format!(
        r#"
name = "incast"
seed = 1
duration = "300ms"
[topology]
name = "ls"
defaults = {{ rate = "100Gbps", delay = "1us", mtu = 4096 }}
generator = {{ kind = "leaf-spine", leaves = 4, spines = 2, hosts_per_leaf = 8, oversubscription = 1.0 }}
[fabric]
{fabric}
[fabric.pfc]
enabled = false
[nic]
{nic}
[record]
flows = true
[[workload]]
kind = "incast"
receiver = "h0"
senders = ["h8", "h9", "h10", "h11", "h12", "h13", "h14", "h15",
           "h16", "h17", "h18", "h19", "h20", "h21", "h22", "h23"]
size = "1MB"
op = "write"
priority = 3
"#
    ))
}
