//! Go-back-N goodput under random loss (VALIDATION.md AN-7) and the
//! go-back-0 livelock (AN-8), at fabric level: the losses happen on a
//! link, the transport is the shared engine.

use roce::time::{Duration, Rate};
use sim::config::{FaultConfig, RetransmitMode, SimConfig};
use sim::results::RunResult;
use sim::run::{simulate, RunOptions};
use sim::workload::FlowSpec;

use crate::support::{star, write};

/// h1 -> sw -> h0 at 100 Gbps; 2.3 us per link makes the loss-detection
/// RTT about 10 us.
fn run(cfg: &SimConfig, flow: FlowSpec, until: Option<Duration>, seed: u64) -> RunResult {
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_ns(2_300));
    let opts = RunOptions {
        seed,
        duration: until,
        ..RunOptions::default()
    };
    simulate(&t, &r, cfg, &[flow], &opts).unwrap().0
}

fn lossy(loss: Option<f64>, every: Option<u64>) -> SimConfig {
    let mut cfg = SimConfig::default();
    cfg.nic.ack_timeout = 4; // 65.5 us: tail losses cost little
    cfg.nic.retry_cnt = 7;
    cfg.faults.push(FaultConfig {
        from: Some("h1".into()),
        to: Some("sw".into()),
        loss,
        drop_every: every,
        ..Default::default()
    });
    cfg
}

/// Packets per loss-detection RTT: the base RTT at line rate, in frames.
fn window() -> f64 {
    let frame = 4158.0;
    let ser = |b: f64| b * 8.0 / 100e9;
    let rtt = 4.0 * 2.3e-6 + 2.0 * ser(frame) + 2.0 * ser(66.0);
    rtt * 100e9 / 8.0 / frame
}

fn flow(size: u64, message: u64) -> FlowSpec {
    let mut f = write(0, 2, 1, size);
    f.message_size = message;
    f
}

fn efficiency(p: f64, seed: u64) -> f64 {
    let size = 200_000_000;
    let clean = run(&SimConfig::default(), flow(size, 4 << 20), None, seed);
    let hit = run(&lossy(Some(p), None), flow(size, 4 << 20), None, seed);
    assert_eq!(hit.summary.flows_completed, 1);
    assert!(hit.summary.retransmitted_packets > 0);
    clean.flows[0].fct_ps.unwrap() as f64 / hit.flows[0].fct_ps.unwrap() as f64
}

#[test]
fn an7_go_back_n_goodput_follows_the_arq_formula() {
    let w = window();
    for p in [1e-2, 1e-3] {
        let expected = (1.0 - p) / (1.0 + (w - 1.0) * p);
        let got = efficiency(p, 3);
        assert!(
            (got - expected).abs() <= 0.03,
            "p={p}: goodput/C {got:.4}, formula {expected:.4} (W={w:.1})"
        );
    }
}

#[test]
fn an7_tail_loss_costs_one_retransmission_timeout() {
    // 100 packets (AckReq on the 64th and the last); the 100th frame on the
    // link (the last packet) is lost and only the ACK timer can recover
    // it. The resend covers packets 65-100 and loses nothing.
    let size = 100 * 4096;
    let clean = run(&SimConfig::default(), flow(size, size), None, 1);
    let cfg = lossy(None, Some(100));
    let hit = run(&cfg, flow(size, size), None, 1);
    assert_eq!(hit.summary.flows_completed, 1);
    assert_eq!(hit.summary.drops, 1);
    let added = hit.flows[0].fct_ps.unwrap() - clean.flows[0].fct_ps.unwrap();
    let rto = 4_096_000u64 << 4; // 4.096 us * 2^4
    assert!(
        added >= rto && added <= rto + clean.flows[0].fct_ps.unwrap(),
        "added {added} ps, RTO {rto} ps"
    );
    assert_eq!(hit.nics[1].local_ack_timeout_err, 1);
}

#[test]
fn an8_go_back_0_livelocks_under_one_in_256_drops() {
    // 4 MB messages are 1024 packets: every attempt loses one.
    let mut cfg = lossy(None, Some(256));
    cfg.nic.retransmit = RetransmitMode::GoBack0;
    let res = run(&cfg, flow(16 << 20, 4 << 20), Some(Duration::from_ms(3)), 1);
    let s = &res.summary;
    assert_eq!(s.flows_completed, 0);
    assert_eq!(res.flows[0].bytes_acked, 0, "goodput is zero");
    // ... while the link ran near line rate.
    let sent: u64 = res
        .ports
        .iter()
        .filter(|p| p.node == "h1")
        .map(|p| p.prio[3].tx_bytes)
        .sum();
    let util = sent as f64 * 8.0 / (100e9 * 3e-3);
    assert!(util > 0.8, "link utilisation {util}");
}

#[test]
fn an8_go_back_n_survives_the_same_drops() {
    let w = window();
    let expected = 255.0 / (256.0 + w - 1.0);
    let size = 64 << 20;
    let clean = run(&SimConfig::default(), flow(size, 4 << 20), None, 1);
    let hit = run(&lossy(None, Some(256)), flow(size, 4 << 20), None, 1);
    assert_eq!(hit.summary.flows_completed, 1);
    let got = clean.flows[0].fct_ps.unwrap() as f64 / hit.flows[0].fct_ps.unwrap() as f64;
    assert!(
        (got - expected).abs() <= 0.03,
        "goodput/C {got:.4}, expected {expected:.4} (W={w:.1})"
    );
}

/// The NIC counters come from the engine's mlx5 counter table, the one the
/// emulator's devices report: dropped WRITE packets are `out_of_sequence`
/// at the responder and `packet_seq_err` (its NAKs) at the requester;
/// dropped READ responses are `implied_nak_seq_err` at the requester, as
/// on a ConnectX port (the simulator used to leave that one at zero).
#[test]
fn losses_show_in_the_counters_real_nics_use() {
    let nic =
        |res: &RunResult, name: &str| res.nics.iter().find(|n| n.node == name).cloned().unwrap();
    let cfg = lossy(None, Some(256));
    // A WRITE from h1 to h0 across the lossy h1 -> sw link.
    let w = run(&cfg, flow(4 << 20, 1 << 20), None, 1);
    assert_eq!(w.summary.flows_completed, 1);
    let (req, resp) = (nic(&w, "h1"), nic(&w, "h0"));
    assert!(resp.out_of_sequence > 0, "{resp:?}");
    assert!(req.packet_seq_err > 0, "{req:?}");
    assert!(
        req.packet_seq_err <= resp.out_of_sequence,
        "{req:?} {resp:?}"
    );
    assert_eq!(req.implied_nak_seq_err, 0, "{req:?}");
    // A READ by h0 from h1: its responses cross the lossy link.
    let mut read = flow(4 << 20, 1 << 20);
    read.op = sim::workload::FlowOp::Read;
    (read.src, read.dst) = (read.dst, read.src);
    let r = run(&cfg, read, None, 1);
    assert_eq!(r.summary.flows_completed, 1);
    let req = nic(&r, "h0");
    assert!(req.implied_nak_seq_err > 0, "{req:?}");
}

fn selective(loss: Option<f64>, every: Option<u64>) -> SimConfig {
    let mut cfg = lossy(loss, every);
    cfg.nic.retransmit = RetransmitMode::SelectiveRepeat;
    cfg
}

/// AN-7 for selective repeat: the same link and loss as go-back-N above,
/// goodput 1 - p; the responder holds what follows each gap and only the
/// lost packets go again.
#[test]
fn an7_selective_repeat_goodput_is_one_minus_p() {
    let size = 200_000_000;
    let clean = run(&SimConfig::default(), flow(size, 4 << 20), None, 3);
    let w = window();
    for p in [1e-2, 1e-3] {
        let hit = run(&selective(Some(p), None), flow(size, 4 << 20), None, 3);
        assert_eq!(hit.summary.flows_completed, 1);
        let got = clean.flows[0].fct_ps.unwrap() as f64 / hit.flows[0].fct_ps.unwrap() as f64;
        let gbn = (1.0 - p) / (1.0 + (w - 1.0) * p);
        eprintln!("AN-7 selective repeat p={p}: goodput/C {got:.4} (go-back-N: {gbn:.4})");
        assert!(
            (got - (1.0 - p)).abs() <= 0.03,
            "p={p}: goodput/C {got:.4}, expected {:.4}",
            1.0 - p
        );
        let (req, resp) = (&hit.nics[1], &hit.nics[0]);
        assert_eq!((req.node.as_str(), resp.node.as_str()), ("h1", "h0"));
        // Only holes go again: about one resend per drop, where go-back-N
        // resends a window per drop.
        let drops = hit.summary.drops;
        assert!(
            req.retransmitted_packets >= drops && req.retransmitted_packets < drops * 3 / 2 + 8,
            "p={p}: {} resent for {drops} drops",
            req.retransmitted_packets
        );
        assert_eq!(req.selective_retransmits, req.retransmitted_packets);
        assert!(resp.rx_ooo_placed > 0 && resp.tx_sacks == resp.rx_ooo_placed);
    }
}

/// A lost last packet has nothing behind it to reveal the gap: only the
/// timer recovers it, and under selective repeat that is one of IRN's two
/// timeouts, not the Local ACK Timeout: RTO_low (100 us) while at most
/// three PSNs are unacknowledged, RTO_high (320 us) otherwise. ACKs are
/// coalesced (AckReq on message ends and every 64th packet), so the tail
/// of a 100-packet message waits RTO_high, a 3-packet message RTO_low.
#[test]
fn an7_selective_repeat_recovers_a_tail_loss_after_irn_timeouts() {
    for (packets, rto) in [(100u64, 320_000_000u64), (3, 100_000_000)] {
        let size = packets * 4096;
        let clean = run(&SimConfig::default(), flow(size, size), None, 1);
        let mut cfg = selective(None, Some(packets));
        cfg.nic.ack_timeout = 20; // 4.3 s: were it used, the run would show it
        let hit = run(&cfg, flow(size, size), None, 1);
        assert_eq!(hit.summary.flows_completed, 1);
        // Nothing was acknowledged before the tail, so the timeout resends
        // the message's unacknowledged packets; for 3 packets the third
        // frame after it (the tail again) is dropped too, and a second
        // timeout, with one PSN left, resends only that.
        let drops = hit.summary.drops;
        assert_eq!(drops, if packets == 3 { 2 } else { 1 });
        let added = hit.flows[0].fct_ps.unwrap() - clean.flows[0].fct_ps.unwrap();
        assert!(
            added >= drops * rto && added <= drops * (rto + clean.flows[0].fct_ps.unwrap()),
            "{packets} packets: added {added} ps, expected {drops} x the {rto} ps timeout"
        );
        assert_eq!(hit.nics[1].local_ack_timeout_err, drops);
    }
}

#[test]
fn a_timeout_whose_resends_the_rate_holds_uses_no_retry() {
    // A lossy 16:1 incast under DCQCN with selective repeat and no window:
    // DCQCN cuts the senders so far that a resend cannot leave within
    // IRN's 320 us timeout. A timeout that finds its resends still held by
    // the rate is no retry (the transport waited, it did not retry), so
    // every flow completes instead of ending in retry exceeded.
    let r = crate::support::lossy_incast(
        "buffer = { size = \"12MB\" }",
        "retransmit = \"selective-repeat\"\ncc = { algorithm = \"dcqcn\" }",
    );
    let timeouts: u64 = r.nics.iter().map(|n| n.local_ack_timeout_err).sum();
    assert!(timeouts > 0, "the timeouts the rate holds up happen");
    for f in &r.flows {
        assert!(
            !f.failed && f.bytes_acked == f.size,
            "{} -> {}: failed {}",
            f.src,
            f.dst,
            f.failed
        );
    }
}
