//! Fabric benchmarks: the reference setup of the issue (3-tier k-ary fat
//! tree, 100 Gbit/s links with 1 us latency, one 2 MB WRITE per sender
//! starting at 0, PFC only with static per-ingress XOFF 320 KB / XON
//! 200 KB, ECMP per flow), as permutation (random derangement, seed 1) and
//! incast (every other host to host 0). Also the event cost of DCQCN
//! against PFC-only on the same run.
//!
//! `cargo bench -p sim --bench fabric [-- k8|k16|dcqcn]`. Prints wall
//! time, events per second, simulated time per wall second, setup time and
//! peak memory; ratios are against the PFC-only run of the same size.

use std::collections::VecDeque;
use std::time::Instant as WallInstant;

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use sim::config::{CcAlgorithm, PfcThreshold, SimConfig};
use sim::run::{simulate, RunOptions};
use sim::topology::{Endpoint, Link, LinkId, Node, NodeId, NodeKind, Routes, Topology};
use sim::workload::{FlowOp, FlowSpec};
use verbs_emu::time::{Duration, Instant, Rate, Size};

/// A 3-tier k-ary fat tree: hosts first (k^3/4), then edge, aggregation
/// and core switches.
fn fat_tree(k: usize) -> Topology {
    let half = k / 2;
    let hosts = k * k * k / 4;
    let mut t = Topology::default();
    let mut add = |t: &mut Topology, name: String, kind| {
        t.nodes.push(Node {
            name,
            kind,
            ports: Vec::new(),
        });
        t.nodes.len() - 1
    };
    for h in 0..hosts {
        add(&mut t, format!("h{h}"), NodeKind::Host);
    }
    let edge: Vec<usize> = (0..k * half)
        .map(|i| add(&mut t, format!("edge{i}"), NodeKind::Switch))
        .collect();
    let agg: Vec<usize> = (0..k * half)
        .map(|i| add(&mut t, format!("agg{i}"), NodeKind::Switch))
        .collect();
    let core: Vec<usize> = (0..half * half)
        .map(|i| add(&mut t, format!("core{i}"), NodeKind::Switch))
        .collect();
    let link = |t: &mut Topology, a: usize, b: usize| {
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
            rate: Rate::from_gbps(100),
            delay: Duration::from_us(1),
            cable_m: None,
            mtu: 4200,
        });
    };
    for (e, &sw) in edge.iter().enumerate() {
        for j in 0..half {
            link(&mut t, sw, e * half + j);
        }
    }
    for pod in 0..k {
        for i in 0..half {
            for j in 0..half {
                link(&mut t, edge[pod * half + i], agg[pod * half + j]);
            }
        }
        for j in 0..half {
            for c in 0..half {
                link(&mut t, agg[pod * half + j], core[j * half + c]);
            }
        }
    }
    t
}

/// ECMP routes by BFS from every host; host rows left empty (NICs use
/// their only port).
fn routes(t: &Topology) -> Routes {
    let n = t.nodes.len();
    let peers: Vec<Vec<usize>> = t
        .nodes
        .iter()
        .enumerate()
        .map(|(i, node)| {
            node.ports
                .iter()
                .map(|l| {
                    let l = &t.links[l.0 as usize];
                    if l.a.node.0 as usize == i {
                        l.b.node.0 as usize
                    } else {
                        l.a.node.0 as usize
                    }
                })
                .collect()
        })
        .collect();
    let mut host_index = vec![None; n];
    let mut hosts = Vec::new();
    for (i, node) in t.nodes.iter().enumerate() {
        if node.kind == NodeKind::Host {
            host_index[i] = Some(hosts.len() as u32);
            hosts.push(i);
        }
    }
    let mut next_hops = vec![vec![Vec::new(); hosts.len()]; n];
    for row in next_hops.iter_mut().take(hosts.len()) {
        row.clear();
        row.resize(hosts.len(), Vec::new());
    }
    let mut dist = vec![u32::MAX; n];
    let mut q = VecDeque::new();
    for (hi, &h) in hosts.iter().enumerate() {
        dist.iter_mut().for_each(|d| *d = u32::MAX);
        dist[h] = 0;
        q.push_back(h);
        while let Some(x) = q.pop_front() {
            if x != h && t.nodes[x].kind == NodeKind::Host {
                continue;
            }
            for &y in &peers[x] {
                if dist[y] == u32::MAX {
                    dist[y] = dist[x] + 1;
                    q.push_back(y);
                }
            }
        }
        for x in 0..n {
            if t.nodes[x].kind == NodeKind::Host || dist[x] == u32::MAX {
                continue;
            }
            let hops: Vec<u16> = peers[x]
                .iter()
                .enumerate()
                .filter(|&(_, &y)| dist[y] != u32::MAX && dist[y] + 1 == dist[x])
                .map(|(p, _)| p as u16)
                .collect();
            next_hops[x][hi] = hops;
        }
    }
    Routes {
        next_hops,
        host_index,
    }
}

fn flow(id: u32, src: usize, dst: usize) -> FlowSpec {
    FlowSpec {
        id,
        src: NodeId(src as u32),
        dst: NodeId(dst as u32),
        size: 2_000_000,
        start: Instant::ZERO,
        op: FlowOp::Write,
        message_size: 2_000_000,
        qp_index: 0,
        priority: 3,
        group: None,
    }
}

fn permutation(hosts: usize) -> Vec<FlowSpec> {
    // A random derangement (seed 1): shuffle until no fixed point.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut p: Vec<usize> = (0..hosts).collect();
    loop {
        p.shuffle(&mut rng);
        if p.iter().enumerate().all(|(i, &d)| i != d) {
            break;
        }
    }
    p.iter()
        .enumerate()
        .map(|(i, &d)| flow(i as u32, i, d))
        .collect()
}

fn incast(hosts: usize) -> Vec<FlowSpec> {
    (1..hosts).map(|i| flow(i as u32 - 1, i, 0)).collect()
}

fn config() -> SimConfig {
    let mut cfg = SimConfig::default();
    cfg.fabric.pfc.threshold = PfcThreshold::Static {
        xoff: Size::from_bytes(320_000),
        xon: Size::from_bytes(200_000),
    };
    cfg.fabric.ecn.clear();
    cfg.record.ports = false;
    cfg
}

struct Outcome {
    events: u64,
}

fn bench(name: &str, k: usize, pattern: &str, cfg: &SimConfig) -> Outcome {
    let t0 = WallInstant::now();
    let t = fat_tree(k);
    let r = routes(&t);
    let hosts = k * k * k / 4;
    let flows = if pattern == "permutation" {
        permutation(hosts)
    } else {
        incast(hosts)
    };
    let topo_secs = t0.elapsed().as_secs_f64();
    let opts = RunOptions {
        variant: name.to_string(),
        seed: 1,
        progress: true,
        ..RunOptions::default()
    };
    let t1 = WallInstant::now();
    let (res, st) = simulate(&t, &r, cfg, &flows, &opts).expect("bench scenario runs");
    let total = t1.elapsed().as_secs_f64();
    let s = &res.summary;
    println!(
        "{name:<28} wall {total:7.3} s  events {:>11}  {:6.2} M ev/s  sim {:8.3} ms ({:.4} sim s/s)  \
         setup {:.3} s (+{topo_secs:.3} s topology+routes)  peak {:.0} MB  flows {}/{}  makespan {:.3} ms  drops {}  pauses {}",
        st.events,
        st.events_per_sec / 1e6,
        s.sim_time_ps as f64 / 1e9,
        st.sim_secs_per_wall_sec,
        st.setup_secs,
        st.peak_rss_bytes.unwrap_or(0) as f64 / 1e6,
        s.flows_completed,
        s.flows_total,
        s.makespan_ps as f64 / 1e9,
        s.drops,
        s.pause_frames_sent,
    );
    Outcome { events: st.events }
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |s: &str| filter.is_empty() || filter.iter().any(|f| s.contains(f.as_str()));
    let pfc = config();
    let mut dcqcn = config();
    dcqcn.nic.cc.algorithm = CcAlgorithm::Dcqcn;
    dcqcn.fabric.ecn = vec![sim::config::EcnConfig::default()];
    for k in [8usize, 16] {
        for pattern in ["permutation", "incast"] {
            let name = format!("k{k}-{pattern}");
            if !want(&name) {
                continue;
            }
            let base = bench(&name, k, pattern, &pfc);
            let dname = format!("k{k}-{pattern}-dcqcn");
            if want("dcqcn") || want(&dname) {
                let d = bench(&dname, k, pattern, &dcqcn);
                println!(
                    "{dname:<28} events ratio DCQCN / PFC-only: {:.2}",
                    d.events as f64 / base.events as f64
                );
            }
        }
    }
}
