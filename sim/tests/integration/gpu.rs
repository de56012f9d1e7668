//! GPU servers: NVLink inside a server, rails between servers, GPUDirect
//! on and off, and the nccl-tests workload's ranks on them.

use std::path::Path;

use sim::results::RunResult;
use sim::run::simulate;
use sim::scenario;
use sim::topology::Routes;

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
    let s = scenario::from_str(Path::new("t.toml"), text).unwrap_or_else(|e| panic!("{e}"));
    let v = &s.variants[0];
    let topo = &s.topologies[v.topology];
    simulate(
        topo,
        &Routes::compute(topo),
        &v.config,
        &v.flows,
        &v.run_options(),
    )
    .unwrap()
    .0
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
    let w = "collective = \"all_reduce\"\nmin_bytes = \"64MiB\"";
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
/// (below the 400G NIC) a two-server ring's network hops slow to PCIe's
/// rate; with GPUDirect the NIC reads GPU memory at its own rate.
#[test]
fn without_gpudirect_the_payload_crosses_pcie() {
    let gen = "servers = 2\nservers_per_leaf = 2\nspines = 1\nrail_optimised = true";
    let w = "collective = \"all_reduce\"\nmin_bytes = \"64MiB\"";
    let on = run(&text("gpus = 8\nnics = 8\npcie_rate = \"256Gbps\"", gen, w));
    let off = run(&text(
        "gpus = 8\nnics = 8\npcie_rate = \"256Gbps\"\ngpudirect = false",
        gen,
        w,
    ));
    let (a, b) = (busbw(&on), busbw(&off));
    // A copy out, the send, a copy in, one after the other on each hop:
    // 1/32 + 1/50 + 1/32 ns per byte against 1/50.
    assert!(b < 0.6 * a, "gpudirect {a:.1} GB/s, without {b:.1}");
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
