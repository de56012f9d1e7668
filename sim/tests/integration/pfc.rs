//! PAUSE semantics (VALIDATION.md AN-5) and headroom sufficiency (AN-4).

use roce::time::{Duration, Rate, Size};
use sim::config::{HeadroomConfig, PfcThreshold, SimConfig};
use sim::results::RunResult;
use sim::run::{simulate, RunOptions};
use sim::workload::FlowSpec;

use crate::support::{star, write};

fn run(
    n_hosts: usize,
    delay: Duration,
    cfg: &SimConfig,
    flows: &[FlowSpec],
    until: Option<Duration>,
) -> RunResult {
    let (t, r) = star(n_hosts, Rate::from_gbps(100), delay);
    let opts = RunOptions {
        duration: until,
        ..RunOptions::default()
    };
    simulate(&t, &r, cfg, flows, &opts).unwrap().0
}

/// A receiver draining at 10 Gbps behind a 100 Gbps link, short pause
/// quanta (1000 quanta = 5.12 us).
fn slow_receiver() -> SimConfig {
    let mut cfg = SimConfig::default();
    cfg.nic.rx_drain_rate = Some(Rate::from_gbps(10));
    cfg.fabric.pfc.quanta = 1000;
    cfg.fabric.pfc.threshold = PfcThreshold::Static {
        xoff: Size::from_bytes(100_000),
        xon: Size::from_bytes(80_000),
    };
    cfg
}

#[test]
fn an5_refreshed_pause_holds_a_slow_receiver_without_gaps() {
    let cfg = slow_receiver();
    let m = 2_000_000;
    let res = run(2, Duration::from_us(1), &cfg, &[write(0, 2, 1, m)], None);
    let s = &res.summary;
    assert_eq!(s.flows_completed, 1);
    assert_eq!(
        s.drops, 0,
        "a refreshed XOFF never lets the receive buffer overflow"
    );
    // The sender settles at the drain rate (frames with headers at 10G).
    let wire = m + m.div_ceil(4096) * 62 + 16;
    let drain_ps = wire as f64 * 8.0 / 10e9 * 1e12;
    let fct = res.flows[0].fct_ps.unwrap() as f64;
    assert!(
        (fct / drain_ps - 1.0).abs() < 0.02,
        "fct {fct} vs drain {drain_ps}"
    );
    let nic = res.ports.iter().find(|p| p.node == "h0").unwrap();
    // Far more PAUSE frames than XOFF episodes: the refreshes.
    assert!(nic.prio[3].tx_pause > 100, "{:?}", nic.prio[3]);
    let sw = res
        .ports
        .iter()
        .find(|p| p.node == "sw" && p.peer == "h0")
        .unwrap();
    assert_eq!(sw.prio[3].rx_pause, nic.prio[3].tx_pause);
    // The switch was held off for most of the run (it can send 10 of
    // every 100 Gbit).
    let held = sw.prio[3].rx_pause_duration_ps as f64 / fct;
    assert!(held > 0.8, "held {held}");
}

#[test]
fn an5_unrefreshed_pause_expires_and_the_peer_resumes() {
    let mut cfg = slow_receiver();
    cfg.fabric.pfc.refresh = Some(Duration::from_secs(1));
    let res = run(
        2,
        Duration::from_us(1),
        &cfg,
        &[write(0, 2, 1, 2_000_000)],
        None,
    );
    let sw = res
        .ports
        .iter()
        .find(|p| p.node == "sw" && p.peer == "h0")
        .unwrap();
    // Each pause lasted exactly its 5.12 us of quanta, then the switch sent
    // again into a full buffer.
    assert!(sw.prio[3].rx_pause_transition > 0);
    assert!(
        res.summary.drops > 0,
        "expiry without refresh must overflow the receiver"
    );
    let nic = res.ports.iter().find(|p| p.node == "h0").unwrap();
    assert!(nic.rx_discards > 0);
}

#[test]
fn an5_pause_stops_only_the_priorities_it_names() {
    let cfg = slow_receiver();
    let bulk = 2_000_000;
    let mut lossy = write(1, 2, 3, 200_000);
    lossy.priority = 0;
    let res = run(
        3,
        Duration::from_us(1),
        &cfg,
        &[write(0, 2, 1, bulk), lossy],
        None,
    );
    let s = &res.summary;
    assert_eq!(s.flows_completed, 2, "{s:?}");
    let f3 = res.flows[0].fct_ps.unwrap();
    let f0 = res.flows[1].fct_ps.unwrap();
    // The priority-0 flow drains at its receiver's 10 Gbps (about 165 us)
    // while priority 3 of the same sender sits paused for 1.6 ms.
    assert!(f0 < 200_000_000, "priority 0 held back: {f0} ps");
    assert!(f3 > 1_500_000_000);
    let sender = res.ports.iter().find(|p| p.node == "h1").unwrap();
    assert!(sender.prio[3].rx_pause > 0);
    assert_eq!(sender.prio[0].rx_pause, 0);
}

/// One sender into a switch whose egress is held by a receiver that does
/// not drain; XOFF at `xoff`. Returns the headroom used at the sender's
/// ingress and the drops.
fn headroom_run(xoff: u64, headroom: Option<u64>, t_resp: Duration) -> (u64, u64) {
    let mut cfg = SimConfig::default();
    cfg.nic.rx_drain_rate = Some(Rate::from_bps(1_000_000));
    cfg.fabric.pfc.response_time = t_resp;
    cfg.fabric.pfc.threshold = PfcThreshold::Static {
        xoff: Size::from_bytes(xoff),
        xon: Size::from_bytes(xoff - 20_000),
    };
    cfg.fabric.pfc.headroom = match headroom {
        Some(h) => HeadroomConfig::Fixed {
            size: Size::from_bytes(h),
        },
        None => HeadroomConfig::Fixed {
            size: Size::from_bytes(1_000_000),
        },
    };
    // 100 m of cable: 500 ns.
    let res = run(
        2,
        Duration::from_ns(500),
        &cfg,
        &[write(0, 2, 1, 4_000_000)],
        Some(Duration::from_us(300)),
    );
    let ing = res
        .ports
        .iter()
        .find(|p| p.node == "sw" && p.peer == "h1")
        .unwrap();
    (ing.max_headroom_bytes, res.summary.drops)
}

#[test]
fn an4_smallest_zero_drop_headroom_lies_in_the_first_principles_band() {
    let c = 100e9 / 8.0;
    let frame = 4096.0 + 62.0;
    let xoff = 150_000;
    let mut worst_excess = 0.0;
    let mut worst = (0, Duration::ZERO);
    // Sweep the peer response time across one frame time (333 ns) so that
    // the PAUSE lands at every phase of the sender's frame.
    for k in 0..12 {
        let t_resp = Duration::from_ns(500 + 28 * k);
        let base = c * (2.0 * 500e-9 + t_resp.as_ps() as f64 * 1e-12);
        let (lo, hi) = (base + frame, base + 2.0 * frame + 64.0);
        let (used, drops) = headroom_run(xoff, None, t_resp);
        assert_eq!(drops, 0);
        assert!(
            used as f64 >= lo && used as f64 <= hi,
            "t_resp {t_resp}: headroom used {used}, band [{lo}, {hi}]"
        );
        if used as f64 - base > worst_excess {
            worst_excess = used as f64 - base;
            worst = (used, t_resp);
        }
    }
    // The adversarial phase needs nearly the whole band.
    assert!(worst_excess > 1.9 * frame, "worst excess {worst_excess}");
    // Exactly that much headroom is enough, one byte less is not.
    let (h, t_resp) = worst;
    assert_eq!(headroom_run(xoff, Some(h), t_resp).1, 0);
    assert!(headroom_run(xoff, Some(h - 1), t_resp).1 > 0);
    // And it is within the vendor value, which carries margin (mlx5, 100G,
    // 100 m, MTU 4096).
    assert!(h <= sim::config::mlx5_headroom(Rate::from_gbps(100), 100, 4096));
}
