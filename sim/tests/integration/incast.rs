//! N:1 incast under PFC (VALIDATION.md AN-1) and lossless versus lossy.

use roce::time::{Duration, Rate, Size};
use sim::config::{PfcThreshold, SimConfig};
use sim::results::RunResult;
use sim::run::{simulate, RunOptions};

use crate::support::{star, write};

const C: u64 = 100_000_000_000;

/// N senders (h1..hN) to h0 on one switch, M bytes each, PMTU `mtu`.
fn incast(n: usize, m: u64, cfg: &SimConfig) -> RunResult {
    let (t, r) = star(n + 1, Rate::from_bps(C), Duration::from_us(1));
    let flows: Vec<_> = (0..n).map(|i| write(i as u32, i + 2, 1, m)).collect();
    simulate(&t, &r, cfg, &flows, &RunOptions::default())
        .unwrap()
        .0
}

fn pfc_config(mtu: u64) -> SimConfig {
    let mut cfg = SimConfig::default();
    cfg.nic.mtu = Size::from_bytes(mtu);
    // Line rate: a window well above the BDP, so that PFC, not the
    // window, holds the senders back.
    cfg.nic.window = Some(1024);
    cfg.fabric.pfc.threshold = PfcThreshold::Static {
        xoff: Size::from_bytes(100_000),
        xon: Size::from_bytes(80_000),
    };
    cfg
}

fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    s * s / (x.len() as f64 * s2)
}

fn check_an1(n: usize) {
    let m = 1_000_000u64;
    let mtu = 1024u64;
    let res = incast(n, m, &pfc_config(mtu));
    let s = &res.summary;
    assert_eq!(s.flows_completed, n as u64);
    assert_eq!(s.drops, 0, "lossless: zero drops");
    // Closed form: every byte of every frame crosses the bottleneck once,
    // then one base RTT (first frame in, last ACK out).
    let packets = m.div_ceil(mtu);
    let wire_per_flow = m + packets * 62 + 16;
    let drain_ps = (n as u64 * wire_per_flow * 8) as f64 * 1e12 / C as f64;
    let base_rtt_ps = 4.0 * 1e6 + 2.0 * (1086.0 + 64.0) * 8.0 * 10.0;
    let expected = drain_ps + base_rtt_ps;
    let got = s.makespan_ps as f64;
    assert!(
        (got / expected - 1.0).abs() <= 0.02,
        "N={n}: completion {got} ps, expected {expected} ps"
    );
    // Bottleneck utilisation after the first RTT (the window is known to
    // a frame time, hence the small allowance above 1).
    let bottleneck = res
        .ports
        .iter()
        .find(|p| p.node == "sw" && p.peer == "h0")
        .unwrap();
    let bytes: u64 = bottleneck.prio.iter().map(|c| c.tx_bytes).sum();
    let util = bytes as f64 * 8.0 / (C as f64 * (got - base_rtt_ps) * 1e-12);
    assert!((0.99..=1.005).contains(&util), "N={n}: utilisation {util}");
    // Per-sender throughput C/N +-5% and Jain >= 0.99.
    let thr: Vec<f64> = res
        .flows
        .iter()
        .map(|f| f.size as f64 * 8.0 / (f.fct_ps.unwrap() as f64 * 1e-12))
        .collect();
    let fair = C as f64 * m as f64 / wire_per_flow as f64 / n as f64;
    for (i, x) in thr.iter().enumerate() {
        assert!(
            (x / fair - 1.0).abs() <= 0.05,
            "N={n}: sender {i} at {x} bps, fair {fair}"
        );
    }
    assert!(jain(&thr) >= 0.99, "N={n}: Jain {}", jain(&thr));
    // Every sender was paused; the receiver never paused anyone.
    for p in res.ports.iter().filter(|p| p.is_nic && p.node != "h0") {
        assert!(p.prio[3].rx_pause > 0, "{} never paused", p.node);
    }
    let recv = res.ports.iter().find(|p| p.node == "h0").unwrap();
    assert_eq!(recv.prio[3].tx_pause, 0);
    assert!(s.pause_frames_sent > 0);
}

#[test]
fn an1_incast_2_to_1_under_pfc_matches_the_closed_form() {
    check_an1(2);
}

#[test]
fn an1_incast_8_to_1_under_pfc_matches_the_closed_form() {
    check_an1(8);
}

#[test]
fn an1_incast_32_to_1_under_pfc_matches_the_closed_form() {
    check_an1(32);
}

#[test]
fn lossy_incast_drops_and_retransmits_where_lossless_pauses() {
    let n = 16;
    let m = 256_000;
    let mut lossless = pfc_config(4096);
    lossless.fabric.buffer.size = Size::from_bytes(2_000_000);
    lossless.nic.ack_timeout = 10; // 4.2 ms
    let mut lossy = lossless.clone();
    lossy.fabric.pfc.enabled = false;
    let a = incast(n, m, &lossless);
    let b = incast(n, m, &lossy);
    let (sa, sb) = (&a.summary, &b.summary);
    assert_eq!(sa.flows_completed, n as u64);
    assert_eq!(sb.flows_completed, n as u64);
    assert_eq!(sa.drops, 0);
    assert!(sa.pause_frames_sent > 0);
    assert_eq!(sa.retransmitted_packets, 0);
    assert!(sb.drops > 0, "{sb:?}");
    assert_eq!(sb.pause_frames_sent, 0);
    assert!(sb.retransmitted_packets > 0);
    assert!(
        sa.fct_p99_ps.is_some() && sb.fct_p99_ps > sa.fct_p99_ps && sb.max_fct_ps > sa.max_fct_ps,
        "lossless p99 {:?} max {:?}, lossy p99 {:?} max {:?}",
        sa.fct_p99_ps,
        sa.max_fct_ps,
        sb.fct_p99_ps,
        sb.max_fct_ps
    );
    // The drops show up where an operator would look.
    let discards: u64 = b.ports.iter().map(|p| p.rx_discards).sum();
    assert_eq!(discards, sb.drops);
    let seq_err: u64 = b
        .nics
        .iter()
        .map(|x| x.packet_seq_err + x.local_ack_timeout_err)
        .sum();
    assert!(seq_err > 0);
}
