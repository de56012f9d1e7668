//! Topology generators, files and ECMP routes.

use std::path::Path;

use roce::time::Rate;
use sim::topology::file::from_str;
use sim::topology::generate::{chain, dumbbell, fat_tree, leaf_spine, LeafSpine};
use sim::topology::{host_index_of_ip, host_ip, LinkProps, NodeId, NodeKind, Routes, Topology};

fn props() -> LinkProps {
    LinkProps::default()
}

/// Number of distinct shortest paths from `from` to host `dest`, following
/// the route table.
fn paths(t: &Topology, r: &Routes, from: NodeId, dest: u32, hops: &mut Vec<usize>) -> u64 {
    let target = r.host_node(dest).unwrap();
    fn walk(
        t: &Topology,
        r: &Routes,
        at: NodeId,
        target: NodeId,
        dest: u32,
        depth: usize,
        hops: &mut Vec<usize>,
    ) -> u64 {
        if at == target {
            hops.push(depth);
            return 1;
        }
        let mut n = 0;
        for &p in r.next_hops(at, dest) {
            n += walk(t, r, t.peer(at, p).node, target, dest, depth + 1, hops);
        }
        n
    }
    walk(t, r, from, target, dest, 0, hops)
}

#[test]
fn fat_tree_counts_match_k_cubed_over_four() {
    for k in [4u32, 8, 16] {
        let t = fat_tree(k, props(), props()).unwrap();
        assert_eq!(t.host_count() as u32, k * k * k / 4, "k={k}");
        assert_eq!(t.switch_count() as u32, 5 * k * k / 4, "k={k}");
        assert_eq!(t.links.len() as u32, 3 * k * k * k / 4, "k={k}");
        for n in &t.nodes {
            let want = if n.kind == NodeKind::Host {
                1
            } else {
                k as usize
            };
            assert_eq!(n.ports.len(), want, "{} in k={k}", n.name);
        }
        // Hosts first: host i is node i and is named h{i}.
        assert_eq!(t.node(NodeId(5)).name, "h5");
        t.check().unwrap();
    }
    assert!(fat_tree(5, props(), props()).is_err());
}

#[test]
fn leaf_spine_dumbbell_and_chain_counts() {
    let p = LeafSpine {
        leaves: 4,
        spines: 2,
        hosts_per_leaf: 8,
        host_link: props(),
        fabric_link: props(),
        oversubscription: Some(2.0),
    };
    let t = leaf_spine(&p).unwrap();
    assert_eq!(
        (t.host_count(), t.switch_count(), t.links.len()),
        (32, 6, 40)
    );
    // 8 x 100G down, 2 uplinks, 2:1 -> 200G each.
    let up = t
        .link_between(t.find("leaf0").unwrap(), t.find("spine1").unwrap())
        .unwrap();
    assert_eq!(t.link(up).rate, Rate::from_gbps(200));
    let d = dumbbell(3, 5, props(), props()).unwrap();
    assert_eq!((d.host_count(), d.switch_count(), d.links.len()), (8, 2, 9));
    let c = chain(4, 2, props(), props()).unwrap();
    assert_eq!(
        (c.host_count(), c.switch_count(), c.links.len()),
        (8, 4, 11)
    );
}

#[test]
fn fat_tree_routes_are_all_shortest_paths() {
    for k in [4u32, 8] {
        let t = fat_tree(k, props(), props()).unwrap();
        let r = Routes::compute(&t);
        let half = k / 2;
        let per_pod = half * half;
        let edge = |pod: u32, j: u32| t.find(&format!("edge{pod}_{j}")).unwrap();
        let agg = |pod: u32, j: u32| t.find(&format!("agg{pod}_{j}")).unwrap();
        // Next-hop counts: up k/2 ways, down exactly one way.
        assert_eq!(r.next_hops(edge(0, 0), 0).len(), 1);
        assert_eq!(
            r.next_hops(edge(0, 0), half).len() as u32,
            half,
            "other edge, same pod"
        );
        assert_eq!(
            r.next_hops(edge(0, 0), per_pod).len() as u32,
            half,
            "other pod"
        );
        assert_eq!(r.next_hops(agg(0, 0), 0).len(), 1);
        assert_eq!(r.next_hops(agg(0, 0), per_pod).len() as u32, half);
        assert_eq!(r.next_hops(t.find("core0").unwrap(), 0).len(), 1);
        assert_eq!(r.next_hops(NodeId(0), 1), &[0]);
        assert!(r.next_hops(NodeId(0), 0).is_empty(), "no route to itself");
        // Path counts and lengths: same edge 1 path of 2 links, same pod
        // k/2 paths of 4, other pod (k/2)^2 paths of 6.
        for (dest, count, len) in [(1, 1, 2), (half, half, 4), (per_pod, half * half, 6)] {
            let mut hops = Vec::new();
            assert_eq!(
                paths(&t, &r, NodeId(0), dest, &mut hops),
                u64::from(count),
                "k={k} dest={dest}"
            );
            assert!(
                hops.iter().all(|&h| h == len),
                "k={k} dest={dest}: {hops:?}"
            );
        }
        // Sets are shared: the table stays small.
        assert!(
            r.distinct_sets() < 4 * t.nodes.len(),
            "{}",
            r.distinct_sets()
        );
    }
}

/// Next hops by the definition: one breadth-first search from each
/// destination host through switches, keeping at each node every port
/// whose neighbour is one hop closer (and forwards: a switch, or the
/// destination itself).
fn reference_hops(t: &Topology, down: &[bool]) -> Vec<Vec<Vec<u16>>> {
    let n = t.nodes.len();
    let up = |l: sim::topology::LinkId| !down.get(l.0 as usize).copied().unwrap_or(false);
    let is_switch = |v: usize| t.nodes[v].kind == NodeKind::Switch;
    let hosts = t.hosts();
    let mut out = vec![vec![Vec::new(); hosts.len()]; n];
    for (d, &dest) in hosts.iter().enumerate() {
        let mut dist = vec![u32::MAX; n];
        dist[dest.0 as usize] = 0;
        let mut queue = std::collections::VecDeque::from([dest]);
        while let Some(u) = queue.pop_front() {
            if u != dest && !is_switch(u.0 as usize) {
                continue;
            }
            for (p, &l) in t.node(u).ports.iter().enumerate() {
                let v = t.peer(u, p as u16).node;
                if up(l) && dist[v.0 as usize] == u32::MAX {
                    dist[v.0 as usize] = dist[u.0 as usize] + 1;
                    queue.push_back(v);
                }
            }
        }
        for u in 0..n {
            let du = dist[u];
            if du == 0 || du == u32::MAX {
                continue;
            }
            let at = NodeId(u as u32);
            for (p, &l) in t.node(at).ports.iter().enumerate() {
                let v = t.peer(at, p as u16).node;
                let forwards = is_switch(v.0 as usize) || v == dest;
                if up(l) && forwards && dist[v.0 as usize] == du - 1 {
                    out[u][d].push(p as u16);
                }
            }
        }
    }
    out
}

#[test]
fn routes_by_attachment_class_equal_one_search_per_destination() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../topologies");
    let mut topos: Vec<(String, Topology)> = Vec::new();
    for e in std::fs::read_dir(&root).unwrap() {
        let path = e.unwrap().path();
        let t = sim::topology::file::load(&path).unwrap();
        if t.host_count() <= 256 {
            topos.push((path.display().to_string(), t));
        }
    }
    // Hosts linked to each other and to two switches, parallel links,
    // a host on a switch alone: classes of one, and neighbours that are
    // hosts.
    let mut odd = Topology::new();
    let h: Vec<NodeId> = (0..5)
        .map(|i| odd.add_node(format!("h{i}"), NodeKind::Host))
        .collect();
    let s: Vec<NodeId> = (0..3)
        .map(|i| odd.add_node(format!("s{i}"), NodeKind::Switch))
        .collect();
    for (a, b) in [
        (h[0], s[0]),
        (h[0], s[1]),
        (h[1], s[0]),
        (h[1], s[1]),
        (h[1], s[1]),
        (h[2], s[1]),
        (h[2], h[3]),
        (h[3], s[2]),
        (h[4], s[2]),
        (s[0], s[2]),
        (s[1], s[2]),
    ] {
        odd.add_link(a, b, props()).unwrap();
    }
    topos.push(("hand-built".into(), odd));
    assert!(topos.len() >= 8, "{} topologies", topos.len());
    for (name, t) in &topos {
        // Healthy, then with every seventh link down, from three offsets.
        let mut downs = vec![Vec::new()];
        for off in 0..3 {
            downs.push(
                (0..t.links.len())
                    .map(|l| l % 7 == off)
                    .collect::<Vec<bool>>(),
            );
        }
        for down in &downs {
            let r = Routes::compute_avoiding(t, down);
            let want = reference_hops(t, down);
            for (u, row) in want.iter().enumerate() {
                for (d, set) in row.iter().enumerate() {
                    assert_eq!(
                        r.next_hops(NodeId(u as u32), d as u32),
                        &set[..],
                        "{name}: node {} to host {d}, {} links down",
                        t.nodes[u].name,
                        down.iter().filter(|&&x| x).count()
                    );
                }
            }
        }
    }
}

#[test]
fn routes_for_a_1024_host_fat_tree_are_quick() {
    let t = fat_tree(16, props(), props()).unwrap();
    let t0 = std::time::Instant::now();
    let r = Routes::compute(&t);
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(r.host_count(), 1024);
    assert_eq!(r.next_hops(NodeId(0), 1023), &[0]);
    // Release builds take well under a second; this allows for debug.
    assert!(secs < 10.0, "{secs} s");
}

#[test]
fn hosts_get_addresses_from_their_index() {
    assert_eq!(host_ip(0).to_string(), "10.0.0.1");
    assert_eq!(host_ip(1).to_string(), "10.0.1.1");
    assert_eq!(host_ip(257).to_string(), "10.1.1.1");
    for i in [0, 1, 255, 256, 1023, 65535] {
        assert_eq!(host_index_of_ip(host_ip(i)), Some(i));
    }
}

#[test]
fn topology_files_resolve_link_layers_and_reject_mistakes() {
    let f = Path::new("t.toml");
    let t = from_str(
        f,
        r#"
        hosts = ["a", "b"]
        switches = ["s"]
        [defaults]
        rate = "25Gbps"
        delay = "2us"
        [[link]]
        a = "a"
        b = "s"
        [[link]]
        a = "b"
        b = "s"
        cable_m = 100
        "#,
    )
    .unwrap();
    assert_eq!(t.links[0].rate, Rate::from_gbps(25));
    assert_eq!(t.links[0].delay.as_ps(), 2_000_000);
    // A cable length without a delay sets the delay (5 ns/m).
    assert_eq!(t.links[1].delay.as_ps(), 500_000);
    assert_eq!(t.links[1].cable_m, Some(100));

    let cases = [
        ("hosts = [\"a\"]\nswitches = [\"s\"]\n[[link]]\na = \"a\"\nb = \"x\"\n", "link[0].b", "unknown node"),
        ("hosts = [\"a\", \"a\"]\n", "hosts", "duplicate"),
        ("hosts = [\"a\", \"b\"]\nswitches = [\"s\"]\n[[link]]\na = \"a\"\nb = \"s\"\n", "link", "cannot reach"),
        ("[generator]\nkind = \"fat-tree\"\nk = 3\n", "generator.k", "even"),
        ("[generator]\nkind = \"fat-tree\"\nk = 4\nradix = 2\n", "generator.radix", "unknown field"),
        ("[generator]\nkind = \"leaf-spine\"\nleaves = 2\nspines = 1\nhosts_per_leaf = 1\noversubscription = 2.0\nfabric_link = { rate = \"10G\" }\n", "generator.oversubscription", "one of them"),
        ("[defaults]\nrate = \"fast\"\n", "defaults.rate", "rate"),
    ];
    for (text, key, msg) in cases {
        let e = from_str(f, text).unwrap_err();
        assert_eq!(e.key.as_deref(), Some(key), "{text}: {e}");
        assert!(e.to_string().contains(msg), "{text}: {e}");
        assert!(e.to_string().starts_with("t.toml"), "{e}");
    }
}
