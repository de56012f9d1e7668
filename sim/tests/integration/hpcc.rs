//! HPCC (Li et al., SIGCOMM 2019) over the fabric's in-band telemetry:
//! under a 2:1 and a 16:1 incast the bottleneck runs at the target
//! utilisation η (0.95) with a queue near empty, where DCQCN holds
//! hundreds of kilobytes (VALIDATION.md HPCC, the paper's incast
//! results).

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
