//! Imports of the HPCC ns-3 simulator's and htsim's input files.

use std::path::{Path, PathBuf};

use roce::time::{Duration, Rate};
use sim::scenario;
use sim::topology::generate::fat_tree;
use sim::topology::{hpcc, LinkProps, NodeId, NodeKind};
use sim::workload;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

const TOPO: &str = "\
7 3 6
4 5 6
0 4 100Gbps 0.001ms 0
1 4 100Gbps 0.001ms 0
2 5 100Gbps 0.001ms 0
3 5 100Gbps 0.001ms 0.001
4 6 400Gbps 0.001ms 0
5 6 400Gbps 0.0005ms 0
";

#[test]
fn hpcc_topology_keeps_node_ids_rates_and_error_rates() {
    let t = hpcc::parse(Path::new("topo.txt"), TOPO).unwrap();
    let topo = &t.topology;
    assert_eq!(
        (topo.nodes.len(), topo.host_count(), topo.links.len()),
        (7, 4, 6)
    );
    assert_eq!(topo.node(NodeId(5)).kind, NodeKind::Switch);
    assert_eq!(topo.node(NodeId(3)).kind, NodeKind::Host);
    assert_eq!(topo.links[4].rate, Rate::from_gbps(400));
    assert_eq!(topo.links[0].delay, Duration::from_us(1));
    assert_eq!(topo.links[5].delay, Duration::from_ns(500));
    assert_eq!(t.link_loss.len(), 1);
    assert_eq!(t.link_loss[0].1, 0.001);

    for (text, line, words) in [
        ("7 3\n", 1, "three numbers"),
        ("3 1 2\n2\n0 2 100Gbps 0.001ms 0\n", 1, "expected 2"),
        (
            "3 1 2\n2\n0 2 100Gbps 0.001ms 0\n1 9 100Gbps 0.001ms 0\n",
            4,
            "node id",
        ),
        (
            "3 1 2\n2\n0 2 100Gbps 0.001ms 0\n1 2 fast 0.001ms 0\n",
            4,
            "rate",
        ),
        (
            "3 1 2\n2\n0 2 100Gbps 0.001ms 0\n1 2 100Gbps 0.001ms 7\n",
            4,
            "probability",
        ),
    ] {
        let e = hpcc::parse(Path::new("topo.txt"), text).unwrap_err();
        assert_eq!(e.position.map(|p| p.0), Some(line), "{text:?}: {e}");
        assert!(e.to_string().contains(words), "{text:?}: {e}");
    }
}

#[test]
fn hpcc_flows_keep_exact_start_times_and_priorities() {
    let t = hpcc::parse(Path::new("topo.txt"), TOPO).unwrap().topology;
    let text = "3\n0 2 3 100 1000000 2.000000001\n1 3 3 100 20000 2.0005\n3 0 1 100 5 2\n";
    let flows =
        workload::hpcc::parse(Path::new("flow.txt"), text, &t, Duration::from_secs(2)).unwrap();
    assert_eq!(flows.len(), 3);
    assert_eq!(flows[0].start.as_ps(), 1_000);
    assert_eq!(flows[1].start.as_ps(), 500_000_000);
    assert_eq!(
        (flows[0].src, flows[0].dst, flows[0].size),
        (NodeId(0), NodeId(2), 1_000_000)
    );
    assert_eq!(flows[2].priority, 1);
    for (bad, words) in [
        ("2\n0 2 3 100 1000 2.0\n", "expected 2"),
        ("1\n0 4 3 100 1000 2.0\n", "expected a host"),
        ("1\n0 2 9 100 1000 2.0\n", "priority"),
        ("1\n0 2 3 100 1000 1.0\n", "shift"),
        ("1\n0 2 3 100\n", "expected `src dst pg dport size start_s`"),
    ] {
        let e = workload::hpcc::parse(Path::new("flow.txt"), bad, &t, Duration::from_secs(2))
            .unwrap_err();
        assert!(e.to_string().contains(words), "{bad:?}: {e}");
        assert!(e.to_string().starts_with("flow.txt:"), "{e}");
    }
}

#[test]
fn htsim_matrices_turn_triggers_into_dependencies() {
    let t = fat_tree(4, LinkProps::default(), LinkProps::default()).unwrap();
    let hosts = t.hosts();
    let text = repo().join("scenarios/imports/htsim-matrix.cm");
    let text = std::fs::read_to_string(text).unwrap();
    let flows = workload::htsim::parse(Path::new("m.cm"), &text, &hosts).unwrap();
    assert_eq!(flows.len(), 4);
    assert_eq!(flows[2].after, vec![0, 1], "waits for both barrier members");
    assert_eq!(flows[3].start.as_ps(), 10_500_000, "10.5 us");
    let done = workload::finish(flows).unwrap();
    let triggered = done.iter().find(|f| f.src == NodeId(5)).unwrap();
    assert!(triggered.after.iter().all(|&a| a < triggered.id));

    for (bad, line, words) in [
        ("Nodes 16\nConnections 1\n0->1 id 1 start 0 size 10 colour 3\n", 3, "flow attribute"),
        ("Nodes 16\nConnections 1\n0->99 id 1 start 0 size 10\n", 3, "hosts"),
        ("Nodes 16\nConnections 2\n0->1 id 1 start 0 size 10\n", 2, "lists 1 flows"),
        ("Nodes 16\nConnections 2\n0->1 start 0 size 10 send_done_trigger 1\n1->2 trigger 1 size 5\ntrigger id 1 barrier 2\n", 4, "barrier"),
        ("Nodes 16\nConnections 1\n0->1 trigger 4 size 5\n", 3, "not declared"),
        ("Nodes 16\nConnections 1\n0->1 size 5\n", 3, "start"),
    ] {
        let e = workload::htsim::parse(Path::new("m.cm"), bad, &hosts).unwrap_err();
        assert_eq!(e.position.map(|p| p.0), Some(line), "{bad:?}: {e}");
        assert!(e.to_string().contains(words), "{bad:?}: {e}");
    }
}

#[test]
fn import_scenarios_load_and_error_rates_become_faults() {
    let s = scenario::load(&repo().join("scenarios/imports/hpcc-import.toml")).unwrap();
    let v = &s.variants[0];
    assert_eq!(v.flows.len(), 3);
    assert_eq!(
        v.flows[2].start.as_ps(),
        10_000_000,
        "2.00001 s shifted by 2 s"
    );
    let s = scenario::load(&repo().join("scenarios/imports/htsim-import.toml")).unwrap();
    let v = &s.variants[0];
    assert_eq!(v.flows.len(), 4);
    // A matrix with triggers is one group, reported by its kind and index.
    assert_eq!(v.groups.len(), 1);
    assert_eq!(
        (v.groups[0].name.as_str(), v.groups[0].kind.as_str()),
        ("htsim-0", "htsim")
    );
    assert!(v.groups[0].ring.is_none());
    assert!(v.flows.iter().all(|f| f.group == Some(0)));
    // Run it: the triggered flow is posted when the later of the barrier's
    // two flows completes.
    let routes = sim::topology::Routes::compute(&s.topologies[v.topology]);
    let opts = sim::run::RunOptions {
        groups: v.groups.clone(),
        ..sim::run::RunOptions::default()
    };
    let (res, _) = sim::run::simulate(
        &s.topologies[v.topology],
        &routes,
        &v.config,
        &v.flows,
        &opts,
    )
    .unwrap();
    let waiting = v.flows.iter().find(|f| !f.after.is_empty()).unwrap();
    let ready = waiting
        .after
        .iter()
        .map(|&a| res.flows[a as usize].finish_ps.unwrap())
        .max()
        .unwrap();
    assert_eq!(res.flows[waiting.id as usize].posted_ps, Some(ready));
    let g = &res.groups[0];
    assert_eq!((g.flows, g.flows_completed), (4, 4));
    assert_eq!(g.start_ps, Some(0));
    assert_eq!(g.step_time_ps, g.finish_ps);
    assert_eq!(g.ideal_ps, None);

    let dir = std::env::temp_dir().join(format!("rocelab-imp-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("topo.txt"), TOPO).unwrap();
    std::fs::write(dir.join("flows.txt"), "1\n0 3 3 100 1000 2\n").unwrap();
    std::fs::write(
        dir.join("s.toml"),
        "topology = { format = \"hpcc\", path = \"topo.txt\" }\n[[workload]]\nkind = \"hpcc-flows\"\npath = \"flows.txt\"\n",
    )
    .unwrap();
    let s = scenario::load(&dir.join("s.toml")).unwrap();
    let faults = &s.variants[0].config.faults;
    assert_eq!(faults.len(), 2, "both directions of the lossy link");
    assert!(faults.iter().all(|f| f.loss == Some(0.001)));
    assert_eq!(
        (
            faults[0].from.as_deref().unwrap_or(""),
            faults[0].to.as_deref().unwrap_or("")
        ),
        ("n3", "n5")
    );
}
