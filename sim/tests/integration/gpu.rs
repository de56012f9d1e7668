//! GPU servers: NVLink inside a server, rails between servers, GPUDirect
//! on and off, and the nccl-tests workload's ranks on them.

use std::path::Path;

use sim::nccl_model::{Algo, Func, Proto};
use sim::results::RunResult;
use sim::scenario;
use sim::workload::collectives::Ranks;
use sim::workload::nccl_tests::Collective;

/// A scenario of one nccl-tests workload on an inline GPU topology.
fn text(gpu: &str, generator: &str, workload: &str) -> String {
    format!(
        "name = \"t\"\nseed = 1\n[record]\nports = true\n\
         [topology.defaults]\nrate = \"400Gbps\"\ndelay = \"1us\"\nmtu = 4096\n\
         [topology.gpu]\n{gpu}\n[topology.generator]\nkind = \"gpu-leaf-spine\"\n{generator}\n\
         [[workload]]\nkind = \"nccl-tests\"\nname = \"w\"\n{workload}\n"
    )
}

fn run(text: &str) -> RunResult {
    crate::support::run_text(text)
}

/// busbw (GB/s) of the one size a run swept.
fn busbw(r: &RunResult) -> f64 {
    let g = &r.groups[0];
    let t = g.step_time_ps.expect("the collective completed") as f64 * 1e-12;
    let n = f64::from(g.ranks.unwrap());
    let alg = g.bytes.unwrap() as f64 / t / 1e9;
    alg * 2.0 * (n - 1.0) / n
}

/// One server, eight GPUs behind an NVSwitch: the all-reduce never
/// touches a NIC and its bus bandwidth is NVLink's rate (a GPU sends
/// 2(n-1)/n of the buffer over its one NVLink egress), less the 14
/// steps' latency.
#[test]
fn inside_one_server_an_allreduce_runs_at_nvlinks_rate() {
    let r = run(&text(
        "gpus = 8\nnics = 8\nnvlink_rate = \"3600Gbps\"\nnvlink_latency = \"1us\"",
        "servers = 1\nservers_per_leaf = 1\nspines = 1\nrail_optimised = false",
        "collective = \"all_reduce\"\nmin_bytes = \"256MiB\"",
    ));
    let bw = busbw(&r);
    // 450 GB/s; 14 steps of 1 us latency on about 1 ms.
    assert!(bw > 0.97 * 450.0 && bw <= 450.0, "busbw {bw:.1} GB/s");
    let nic_bytes: u64 = r
        .ports
        .iter()
        .filter(|p| p.is_nic)
        .flat_map(|p| &p.prio)
        .map(|c| c.tx_bytes)
        .sum();
    assert_eq!(nic_bytes, 0, "no byte of an NVLink ring reaches a NIC");
    assert_eq!(r.summary.flows_completed, r.groups[0].flows);
}

/// Four servers: on a rail-optimised fabric every ring channel stays on
/// its rail (no spine carries a byte) and the all-reduce runs at the
/// eight NICs' payload rate less the ring's step latency; on a plain
/// fabric with two servers per leaf half of the hops cross a spine.
#[test]
fn rails_keep_ring_channels_off_the_spines() {
    let gpu = "gpus = 8\nnics = 8";
    let w =
        "collective = \"all_reduce\"\nmin_bytes = \"64MiB\"\nalgo = \"ring\"\nproto = \"Simple\"";
    let rail = run(&text(
        gpu,
        "servers = 4\nservers_per_leaf = 4\nspines = 2\nrail_optimised = true",
        w,
    ));
    let plain = run(&text(
        gpu,
        "servers = 4\nservers_per_leaf = 2\nspines = 2\nrail_optimised = false",
        w,
    ));
    let spine_bytes = |r: &RunResult| -> u64 {
        r.ports
            .iter()
            .filter(|p| p.node.starts_with("spine"))
            .flat_map(|p| &p.prio)
            .map(|c| c.tx_bytes)
            .sum()
    };
    assert_eq!(spine_bytes(&rail), 0);
    assert!(spine_bytes(&plain) > 0);
    // Every inter-server byte crosses exactly one NIC: 8 channels x 4
    // hops x 2(n-1) steps x (64 MiB / 8 / 32) bytes, plus headers.
    let payload: u64 = 8 * 4 * 62 * ((64 << 20) / 8 / 32);
    let sent: u64 = rail
        .ports
        .iter()
        .filter(|p| p.is_nic)
        .flat_map(|p| &p.prio)
        .map(|c| c.tx_bytes)
        .sum();
    assert!(
        sent > payload && (sent as f64) < payload as f64 * 1.03,
        "{sent} vs {payload}"
    );
    // Eight 400G NICs' payload rate: 4096-byte packets with 62 bytes of
    // RoCE framing and headers, about 393 GB/s; 62 steps of a few
    // microseconds of latency each on 64 MiB cost up to a third.
    let wire = 8.0 * 50.0 * 4096.0 / (4096.0 + 62.0 + 20.0);
    let bw = busbw(&rail);
    assert!(bw < wire && bw > 0.6 * wire, "busbw {bw:.1} of {wire:.1}");
}

/// GPUDirect off: every byte sent is copied to host memory over the
/// GPU's PCIe link and back at the receiver. With PCIe at 256 Gbit/s
/// (32 GB/s, below the 400G NIC's 50) the copies pipeline with the sends
/// and PCIe sets the pace of a two-server ring: its bus bandwidth falls
/// to about 32/50 of what GPUDirect gives (same algorithm and protocol).
#[test]
fn without_gpudirect_the_payload_crosses_pcie() {
    let gen = "servers = 2\nservers_per_leaf = 2\nspines = 1\nrail_optimised = true";
    let w =
        "collective = \"all_reduce\"\nmin_bytes = \"64MiB\"\nalgo = \"ring\"\nproto = \"Simple\"";
    let on = run(&text("gpus = 8\nnics = 8\npcie_rate = \"256Gbps\"", gen, w));
    let off = run(&text(
        "gpus = 8\nnics = 8\npcie_rate = \"256Gbps\"\ngpudirect = false",
        gen,
        w,
    ));
    let (a, b) = (busbw(&on), busbw(&off));
    let ratio = b / a;
    assert!(
        (ratio - 32.0 / 50.0).abs() < 0.05,
        "gpudirect {a:.1} GB/s, without {b:.1}: x{ratio:.3}"
    );
    assert!(off.groups[0].flows > on.groups[0].flows);
}

/// nccl-tests on GPU servers: ranks are GPUs, chosen by server and GPU
/// count; hosts, unknown servers, too many GPUs and GPU keys on a plain
/// topology are refused with the key.
#[test]
fn gpu_ranks_are_chosen_by_server_and_bad_choices_name_the_key() {
    let gen = "servers = 2\nservers_per_leaf = 2\nspines = 1";
    let ok = |w: &str| {
        let t = text("gpus = 4\nnics = 2", gen, w);
        scenario::from_str(Path::new("t.toml"), &t).map(|s| s.variants[0].groups.clone())
    };
    let g = ok("collective = \"all_reduce\"\nmin_bytes = \"1MiB\"\nservers = [1, 0]\ngpus = 2")
        .unwrap();
    assert_eq!(g[0].nccl.unwrap().ranks, 4);
    for (w, key, says) in [
        ("servers = [2]", "workload[0].servers", "servers 0-1"),
        (
            "servers = [\"h0\"]",
            "workload[0].servers",
            "server indices",
        ),
        ("gpus = 5", "workload[0].gpus", "1 to 4"),
        (
            "hosts = [\"h0\", \"h1\"]",
            "workload[0].hosts",
            "ranks are GPUs",
        ),
        ("channels = 0", "workload[0].channels", "1 to 64"),
    ] {
        let e = ok(&format!(
            "collective = \"all_reduce\"\nmin_bytes = \"1MiB\"\n{w}"
        ))
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some(key), "{w}: {e}");
        assert!(e.to_string().contains(says), "{w}: {e}");
    }
    // GPU keys on a topology without GPU servers.
    let plain = "name = \"t\"\n[topology.generator]\nkind = \"leaf-spine\"\nleaves = 1\nspines = 1\nhosts_per_leaf = 4\n\
                 [[workload]]\nkind = \"nccl-tests\"\ncollective = \"all_reduce\"\nmin_bytes = \"1MiB\"\ngpus = 2\n";
    let e = scenario::from_str(Path::new("t.toml"), plain).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("workload[0].gpus"), "{e}");
    // The generator needs the [gpu] table, and the hosts must make whole
    // servers.
    let no_gpu = "name = \"t\"\n[topology.generator]\nkind = \"gpu-leaf-spine\"\nservers = 2\nservers_per_leaf = 1\nspines = 1\n\
                  [[workload]]\nkind = \"nccl-tests\"\ncollective = \"all_reduce\"\nmin_bytes = \"1MiB\"\n";
    let e = scenario::from_str(Path::new("t.toml"), no_gpu).unwrap_err();
    assert!(e.to_string().contains("[gpu]"), "{e}");
    let odd = "name = \"t\"\nhosts = [\"a\", \"b\", \"c\"]\nswitches = [\"s\"]\n[gpu]\ngpus = 2\nnics = 2\n\
               [[link]]\na = \"a\"\nb = \"s\"\n[[link]]\na = \"b\"\nb = \"s\"\n[[link]]\na = \"c\"\nb = \"s\"\n";
    let e = sim::topology::file::from_str(Path::new("t.toml"), odd).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("gpu.nics"), "{e}");
}

/// NCCL's tuning model for the ranks of a GPU topology, as the workload
/// builds it.
fn model_latency(text: &str, f: Func, a: Algo, p: Proto) -> f64 {
    let s = scenario::from_str(Path::new("t.toml"), text).unwrap();
    let topo = &s.topologies[0];
    let g = topo.gpu.unwrap();
    let servers: Vec<u32> = (0..g.servers).collect();
    let ranks = Ranks::gpus(topo, &servers, g.gpus, g.nics)
        .unwrap()
        .on(topo);
    ranks.comm().model().latency(f, a, p)
}

/// With the bandwidth term zeroed (links 10x and NVLink 1000x faster
/// than the usual, 64 KiB moving in nanoseconds) the simulated time of a small collective is the
/// latency NCCL's model gives for the same topology, for each algorithm
/// and protocol, within 10 %: its base latency once, its step latency
/// inside a server (NVLink) and between servers (NIC, fabric) on each
/// step of the path the data takes. The ring's data crosses servers
/// 2 x nodes times where the model counts 2 x (nodes - 1), the one
/// difference (a few percent here).
#[test]
fn small_collectives_take_the_latency_of_ncclss_model() {
    let gpu = "gpus = 8\nnics = 8\nnvlink_rate = \"1000000Gbps\"\nnvlink_latency = \"100ns\"";
    let gen = "servers = 4\nservers_per_leaf = 4\nspines = 1\nrail_optimised = true\n\
               host_link = { rate = \"4000Gbps\", delay = \"250ns\" }";
    let cases = [
        (Collective::AllReduce, Func::AllReduce, Algo::Ring),
        (Collective::AllReduce, Func::AllReduce, Algo::Tree),
        (Collective::AllGather, Func::AllGather, Algo::Ring),
        (Collective::ReduceScatter, Func::ReduceScatter, Algo::Ring),
        (Collective::Broadcast, Func::Broadcast, Algo::Ring),
        (Collective::Reduce, Func::Reduce, Algo::Ring),
    ];
    let mut seen = Vec::new();
    for (c, f, a) in cases {
        for p in [Proto::Ll, Proto::Ll128, Proto::Simple] {
            let w = format!(
                "collective = \"{}\"\nmin_bytes = \"64KiB\"\nalgo = \"{}\"\nproto = \"{}\"",
                c.name(),
                a.name(),
                p.name()
            );
            let t = text(gpu, gen, &w);
            let r = run(&t);
            let g = &r.groups[0];
            assert_eq!(g.algorithm.as_deref(), Some(a.name()));
            assert_eq!(g.protocol.as_deref(), Some(p.name()));
            let sim = g.step_time_ps.unwrap() as f64 / 1e6;
            let model = model_latency(&t, f, a, p);
            let err = (sim - model) / model;
            seen.push(format!(
                "{c:?} {a:?} {p:?}: sim {sim:.1} us, model {model:.1} us"
            ));
            assert!(err.abs() < 0.10, "{}", seen.join("\n"));
        }
    }
    eprintln!("{}", seen.join("\n"));
}

/// The choice follows the model: at a size where NCCL picks the tree
/// the simulated tree is faster than the simulated ring, and at one where
/// it picks the ring the ring is faster; each group says what ran.
#[test]
fn the_ring_and_tree_choice_follows_ncclss_model() {
    let gpu = "gpus = 8\nnics = 8";
    let gen = "servers = 4\nservers_per_leaf = 4\nspines = 1\nrail_optimised = true";
    let time = |size: &str, algo: Option<&str>| {
        let mut w = format!("collective = \"all_reduce\"\nmin_bytes = \"{size}\"");
        if let Some(a) = algo {
            w.push_str(&format!("\nalgo = \"{a}\""));
        }
        let r = run(&text(gpu, gen, &w));
        let g = &r.groups[0];
        (g.algorithm.clone().unwrap(), g.step_time_ps.unwrap())
    };
    let (small, _) = time("256KiB", None);
    assert_eq!(small, "Tree");
    let (_, tree) = time("256KiB", Some("tree"));
    let (_, ring) = time("256KiB", Some("ring"));
    assert!(tree < ring, "256 KiB: tree {tree} ps, ring {ring} ps");
    let (large, _) = time("256MiB", None);
    assert_eq!(large, "Ring");
    let (_, tree) = time("256MiB", Some("tree"));
    let (_, ring) = time("256MiB", Some("ring"));
    assert!(ring < tree, "256 MiB: tree {tree} ps, ring {ring} ps");
}

/// A fat tree of GPU servers: rail-optimised, NIC `r` of every server of
/// a pod is on the pod's edge `r`, so a ring over one pod's servers never
/// leaves its edge switches; plain, each server's NICs share one edge and
/// the same ring climbs to the aggregation layer.
#[test]
fn a_rail_optimised_fat_tree_keeps_a_pods_rings_on_its_edges() {
    let topo = |rail: bool| {
        format!(
            "name = \"t\"\n[gpu]\ngpus = 4\nnics = 4\n[generator]\nkind = \"gpu-fat-tree\"\nk = 8\nrail_optimised = {rail}\n"
        )
    };
    let t = sim::topology::file::from_str(Path::new("t.toml"), &topo(true)).unwrap();
    assert_eq!((t.host_count(), t.gpu.unwrap().servers), (128, 32));
    // h9 is NIC 1 of server 2 (pod 0): edge0_1. h17: NIC 1 of server 4,
    // the first of pod 1: edge1_1.
    for (h, edge) in [("h9", "edge0_1"), ("h17", "edge1_1"), ("h0", "edge0_0")] {
        let n = t.find(h).unwrap();
        let peer = t.peer(n, 0).node;
        assert_eq!(t.node(peer).name, edge, "{h}");
    }
    let plain = sim::topology::file::from_str(Path::new("t.toml"), &topo(false)).unwrap();
    let n = plain.find("h9").unwrap();
    assert_eq!(plain.node(plain.peer(n, 0).node).name, "edge0_2");
    let bad =
        "name = \"t\"\n[gpu]\ngpus = 8\nnics = 8\n[generator]\nkind = \"gpu-fat-tree\"\nk = 8\n";
    let e = sim::topology::file::from_str(Path::new("t.toml"), bad).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("gpu.nics"), "{e}");

    let agg_bytes = |rail: bool| {
        let text = format!(
            "name = \"t\"\nseed = 1\n[record]\nports = true\n[topology]\n{}\n[[workload]]\nkind = \"nccl-tests\"\nname = \"w\"\ncollective = \"all_reduce\"\nmin_bytes = \"4MiB\"\nservers = 4\nalgo = \"ring\"\n",
            topo(rail)
                .replace("[gpu]", "[topology.gpu]")
                .replace("[generator]", "[topology.generator]")
                .replace("name = \"t\"\n", "")
        );
        let r = run(&text);
        assert_eq!(r.summary.flows_completed, r.groups[0].flows);
        r.ports
            .iter()
            .filter(|p| p.node.starts_with("agg") || p.node.starts_with("core"))
            .flat_map(|p| &p.prio)
            .map(|c| c.tx_bytes)
            .sum::<u64>()
    };
    assert_eq!(agg_bytes(true), 0);
    assert!(agg_bytes(false) > 0);
}
