//! Congestion control beside DCQCN. HPCC (Li et al., SIGCOMM 2019) over
//! the fabric's in-band telemetry: under a 2:1 and a 16:1 incast the
//! bottleneck runs at the target utilisation η (0.95) with a queue near
//! empty, where DCQCN holds hundreds of kilobytes (VALIDATION.md HPCC,
//! the paper's incast results), also through the artifact's own run
//! file. Swift (Kumar et al., SIGCOMM 2020): the queue settles at its
//! delay budget.

use sim::results::RunResult;

use crate::support::run_text;

/// `n` hosts on other leaves WRITE `size` each to h0, 100 Gbit/s links of
/// 1 us, 1 KB MTU (the artifact's payload), under `cc`.
fn incast(n: usize, size: &str, cc: &str) -> RunResult {
    let senders: Vec<String> = (0..n).map(|i| format!("\"h{}\"", 8 + i)).collect();
    run_text(&format!(
        r#"
name = "hpcc-incast"
duration = "50ms"
[topology]
name = "ls"
defaults = {{ rate = "100Gbps", delay = "1us", mtu = 4096 }}
generator = {{ kind = "leaf-spine", leaves = 4, spines = 2, hosts_per_leaf = 8, oversubscription = 1.0 }}
[fabric.pfc]
enabled = true
priorities = [3]
[nic]
mtu = 1024
cc = {cc}
[record]
interval = "1us"
queues = [{{ node = "leaf0", port = 0 }}]
flow_rates = true
flow_rate_interval = "10us"
[[workload]]
kind = "incast"
receiver = "h0"
senders = [{}]
size = "{size}"
op = "write"
priority = 3
"#,
        senders.join(", ")
    ))
}

/// Over the middle half of the run: the bottleneck's mean queue (bytes)
/// and its utilisation (wire bytes over capacity; payload is 1024 of every
/// 1128-byte frame: 62 bytes of headers and 42 of INT with HPCC, 1086
/// without).
fn steady(r: &RunResult, frame: f64) -> (f64, f64) {
    let end = r.summary.makespan_ps;
    let (a, b) = (end / 4, end * 3 / 4);
    let q: Vec<f64> = r.queues[0]
        .samples
        .iter()
        .filter(|&&(t, _)| t >= a && t < b)
        .map(|&(_, v)| v as f64)
        .collect();
    let mean_q = q.iter().sum::<f64>() / q.len() as f64;
    let mut bits = 0.0;
    let mut slots = 0;
    for f in &r.flow_rates {
        for &(t, bps) in &f.samples {
            if t > a && t <= b {
                bits += bps as f64;
            }
        }
    }
    for &(t, _) in &r.flow_rates[0].samples {
        if t > a && t <= b {
            slots += 1;
        }
    }
    let payload_bps = bits / f64::from(slots.max(1));
    (mean_q, payload_bps * frame / 1024.0 / 100e9)
}

#[test]
fn hpcc_holds_the_bottleneck_at_eta_with_a_near_empty_queue() {
    for (n, size) in [(2, "16MB"), (16, "4MB")] {
        let r = incast(n, size, r#"{ algorithm = "hpcc" }"#);
        assert_eq!(r.summary.flows_completed, n as u64);
        assert_eq!(r.summary.drops, 0);
        assert_eq!(r.summary.pause_frames_sent, 0, "{n}:1 never reaches XOFF");
        let (q, util) = steady(&r, 1128.0);
        eprintln!("HPCC {n}:1: mean queue {q:.0} B, utilisation {util:.3}");
        assert!(q < 10_000.0, "{n}:1: mean queue {q} B");
        assert!((0.92..=0.99).contains(&util), "{n}:1: utilisation {util}");
        // The ACKs brought the telemetry back: rates were set from it.
        assert!(r.summary.cnps_sent == 0);
    }
    // The same 16:1 under DCQCN (the artifact's preset) queues far more.
    let d = incast(16, "4MB", r#"{ algorithm = "dcqcn", preset = "hpcc" }"#);
    let (q, util) = steady(&d, 1086.0);
    eprintln!("DCQCN 16:1: mean queue {q:.0} B, utilisation {util:.3}");
    assert!(q > 100_000.0, "DCQCN 16:1: mean queue {q} B");
}

/// Write an HPCC artifact layout under `dir` (`mix/config.txt` naming
/// `mix/topology.txt` and `mix/flow.txt` relative to `dir`, as the
/// artifact's simulator directory does) for `senders` hosts each sending
/// `size` bytes to host 0 at 2.0 s; returns the run file's path.
fn artifact(dir: &std::path::Path, cc_mode: u32, senders: u32, size: u64) -> std::path::PathBuf {
    let mix = dir.join("mix");
    std::fs::create_dir_all(&mix).unwrap();
    // Hosts 0-16; ToR n17 (host 0, a 400G uplink), core n19 (400G only),
    // ToR n18 (hosts 1-16, a 400G uplink).
    let mut topo = String::from("20 3 19\n17 18 19\n0 17 100Gbps 0.001ms 0\n");
    for h in 1..=16 {
        topo += &format!("{h} 18 100Gbps 0.001ms 0\n");
    }
    topo += "17 19 400Gbps 0.001ms 0\n19 18 400Gbps 0.001ms 0\n";
    std::fs::write(mix.join("topology.txt"), topo).unwrap();
    let mut flows = format!("{senders}\n");
    for h in 1..=senders {
        flows += &format!("{h} 0 3 100 {size} 2.000000000\n");
    }
    std::fs::write(mix.join("flow.txt"), flows).unwrap();
    let config = format!(
        "ENABLE_QCN 1\nUSE_DYNAMIC_PFC_THRESHOLD 1\n\nPACKET_PAYLOAD_SIZE 1000\n\n\
         TOPOLOGY_FILE mix/topology.txt\nFLOW_FILE mix/flow.txt\nTRACE_FILE mix/trace.txt\n\
         TRACE_OUTPUT_FILE mix/mix.tr\nFCT_OUTPUT_FILE mix/fct.txt\nPFC_OUTPUT_FILE mix/pfc.txt\n\n\
         SIMULATOR_STOP_TIME 2.1\n\nCC_MODE {cc_mode}\nALPHA_RESUME_INTERVAL 1\nRATE_DECREASE_INTERVAL 4\n\
         CLAMP_TARGET_RATE 0\nRP_TIMER 900 \nEWMA_GAIN 0.00390625\nFAST_RECOVERY_TIMES 1\n\
         RATE_AI 50Mb/s\nRATE_HAI 100Mb/s\nMIN_RATE 100Mb/s\nDCTCP_RATE_AI 1000Mb/s\n\n\
         ERROR_RATE_PER_LINK 0.0000\nL2_CHUNK_SIZE 4000\nL2_ACK_INTERVAL 1\nL2_BACK_TO_ZERO 0\n\n\
         HAS_WIN 1\nGLOBAL_T 1\nVAR_WIN 1\nFAST_REACT 1\nU_TARGET 0.95\nMI_THRESH 0\nINT_MULTI 1\n\
         MULTI_RATE 1\nSAMPLE_FEEDBACK 0\n\nRATE_BOUND 1\n\nACK_HIGH_PRIO 0\n\nLINK_DOWN 0 0 0\n\n\
         ENABLE_TRACE 1\n\nKMAX_MAP 3 25000000000 400 50000000000 800 100000000000 1600\n\
         KMIN_MAP 3 25000000000 100 50000000000 200 100000000000 400\n\
         PMAX_MAP 3 25000000000 0.2 50000000000 0.2 100000000000 0.2\nBUFFER_SIZE 32\n\
         QLEN_MON_FILE mix/qlen.txt\nQLEN_MON_START 2000000000\nQLEN_MON_END 2010000000\n"
    );
    let path = mix.join("config.txt");
    std::fs::write(&path, config).unwrap();
    path
}

/// HPCC-1: the artifact's run file, unchanged, selects HPCC with its
/// parameters, the switches' buffer and ECN rows, and under a 2:1 and a
/// 16:1 incast the bottleneck (n17 towards host 0) runs near η with its
/// queue near empty.
#[test]
fn the_artifacts_run_file_runs_unchanged_with_hpcc_selected() {
    use roce::time::{Duration, Rate, Size};
    use sim::config::CcAlgorithm;
    use sim::scenario::{self, Overrides};

    let base = std::env::temp_dir().join(format!("rocelab-hpcc-artifact-{}", std::process::id()));
    for (senders, size) in [(2u32, 8_000_000u64), (16, 2_000_000)] {
        let dir = base.join(format!("n{senders}"));
        let path = artifact(&dir, 3, senders, size);
        let ov = Overrides {
            set: vec![Overrides::parse_set(r#"record.queues=[{node="n17", port=0}]"#).unwrap()],
            variant: None,
        };
        let s = scenario::load_with(&path, &ov).unwrap_or_else(|e| panic!("{e}"));
        let v = &s.variants[0];
        let c = &v.config;
        assert_eq!(c.nic.cc.algorithm, CcAlgorithm::Hpcc);
        assert_eq!(c.nic.cc.hpcc.eta, 0.95);
        assert_eq!(c.nic.cc.hpcc.max_stage, 0);
        assert_eq!(c.nic.cc.hpcc.ai, Rate::from_bps(50_000_000));
        assert_eq!(c.nic.mtu, Size::from_bytes(1024));
        assert_eq!(c.fabric.buffer.size, Size::from_bytes(32_000_000));
        assert_eq!(c.fabric.ecn[0].kmax, Size::from_bytes(1_600_000));
        assert_eq!(v.flows.len(), senders as usize);
        let topo = &s.topologies[v.topology];
        let (r, _) = sim::run::simulate(
            topo,
            &sim::topology::Routes::compute(topo),
            c,
            &v.flows,
            &v.run_options(),
        )
        .unwrap();
        assert_eq!(r.summary.flows_completed, u64::from(senders));
        assert_eq!(r.summary.drops + r.summary.pause_frames_sent, 0);
        assert_eq!(r.summary.cnps_sent, 0);
        // Utilisation of host 0's link from the first start to the last
        // finish: payload in 1024-byte packets of 1128 wire bytes.
        let start = 2_000_000_000_000u64;
        let span = (r.summary.makespan_ps - start) as f64 * 1e-12;
        let wire = (u64::from(senders) * size) as f64 * 1128.0 / 1024.0 * 8.0;
        let util = wire / 100e9 / span;
        let q = &r.queues[0].samples;
        let (a, b) = (
            start + (r.summary.makespan_ps - start) / 4,
            start + (r.summary.makespan_ps - start) * 3 / 4,
        );
        let mid: Vec<f64> = q
            .iter()
            .filter(|s| s.0 >= a && s.0 < b)
            .map(|s| s.1 as f64)
            .collect();
        let mean_q = mid.iter().sum::<f64>() / mid.len() as f64;
        eprintln!("artifact {senders}:1: utilisation {util:.3}, mean queue {mean_q:.0} B");
        assert!(
            (0.88..=0.99).contains(&util),
            "{senders}:1 utilisation {util}"
        );
        assert!(mean_q < 10_000.0, "{senders}:1 mean queue {mean_q}");
    }
    // CC_MODE 1 is DCQCN with the artifact's parameters; TIMELY is refused
    // at its line.
    let dir = base.join("dcqcn");
    let s = scenario::load(&artifact(&dir, 1, 2, 1_000_000)).unwrap();
    let c = &s.variants[0].config.nic.cc;
    assert_eq!(c.algorithm, CcAlgorithm::Dcqcn);
    assert_eq!(c.dcqcn.rate_increase_timer, Some(Duration::from_us(900)));
    let dir = base.join("timely");
    let e = scenario::load(&artifact(&dir, 7, 2, 1_000_000)).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("CC_MODE"));
    assert_eq!(e.position.map(|p| p.0), Some(15), "{e}");
    let _ = std::fs::remove_dir_all(&base);
}

/// Swift (delay-based, SIGCOMM 2020) on the same incasts: the queue at
/// the bottleneck settles near the queueing budget of the target delay
/// (10 us at 100 Gbit/s: 125 KB), the link stays busy, and nothing needs
/// PFC.
#[test]
fn swift_holds_the_queue_near_its_delay_budget() {
    for (n, size) in [(2, "16MB"), (16, "4MB")] {
        let r = incast(n, size, r#"{ algorithm = "swift" }"#);
        assert_eq!(r.summary.flows_completed, n as u64);
        assert_eq!(r.summary.drops, 0);
        let (q, util) = steady(&r, 1086.0);
        eprintln!("Swift {n}:1: mean queue {q:.0} B, utilisation {util:.3}");
        // The budget: 10 us at 100 Gbit/s is 125 KB.
        assert!(
            (62_500.0..187_500.0).contains(&q),
            "{n}:1: mean queue {q} B against 125 KB"
        );
        assert!(util > 0.9, "{n}:1: utilisation {util}");
        assert_eq!(r.summary.pause_frames_sent, 0, "{n}:1 stays below XOFF");
    }
}

#[test]
fn timely_keeps_the_rtt_between_its_thresholds() {
    // TIMELY grows below T_low (50 us) and cuts above T_high (500 us);
    // between them it follows the gradient, so the queue settles anywhere
    // in that band (its fixed point is not unique: Zhu et al., CoNEXT
    // 2016). At 100 Gbit/s the band is about 0.5 MB to 6.2 MB of queue
    // on top of a base RTT of about 8 us.
    for (n, size) in [(2, "16MB"), (16, "4MB")] {
        let r = incast(n, size, r#"{ algorithm = "timely" }"#);
        assert_eq!(r.summary.flows_completed, n as u64);
        assert_eq!(r.summary.drops, 0);
        let (q, util) = steady(&r, 1086.0);
        eprintln!("TIMELY {n}:1: mean queue {q:.0} B, utilisation {util:.3}");
        let (low, high) = (42e-6 * 12.5e9, 492e-6 * 12.5e9);
        assert!(
            (low * 0.8..high).contains(&q),
            "{n}:1: mean queue {q} B against the band {low:.0}-{high:.0} B"
        );
        assert!(util > 0.9, "{n}:1: utilisation {util}");
    }
}
