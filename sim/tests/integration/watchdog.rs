//! PFC watchdogs: the switch storm watchdog (SONiC `pfcwd` semantics) and
//! the NIC's PAUSE storm prevention (ConnectX stall watermarks).

use roce::time::{Duration, Rate};
use sim::config::{PfcWatchdogAction, SimConfig};
use sim::results::RunResult;
use sim::run::{simulate, RunOptions};
use sim::stats::ethtool_dump;

use crate::support::{star, write};

/// 65535 quanta at 100 Gbit/s.
const PAUSE_PS: u64 = 335_539_200;

/// h1 WRITEs 20 MB to h0 through one switch; every NIC drains what it
/// receives at 1 Mbit/s: h0's receive pipeline is stalled and it holds
/// XOFF from the first few frames on.
fn stalled(cfg: &SimConfig, until: Duration) -> RunResult {
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_us(1));
    let opts = RunOptions {
        duration: Some(until),
        ..RunOptions::default()
    };
    simulate(&t, &r, cfg, &[write(0, 2, 1, 20_000_000)], &opts)
        .unwrap()
        .0
}

fn stall_config() -> SimConfig {
    let mut cfg = SimConfig::default();
    cfg.nic.rx_drain_rate = Some(Rate::from_bps(1_000_000));
    cfg.nic.pause_storm.enabled = false;
    cfg.fabric.pfc.watchdog.enabled = true;
    cfg.fabric.pfc.watchdog.detection_time = Duration::from_ms(1);
    cfg.fabric.pfc.watchdog.restoration_time = Duration::from_ms(1);
    cfg.fabric.pfc.watchdog.poll_interval = Duration::from_us(500);
    cfg
}

/// When the switch port towards h0 was first held off.
fn storm_onset(res: &RunResult) -> u64 {
    let p = res
        .pauses
        .iter()
        .find(|p| p.node == "sw" && p.peer == "h0" && p.priority == 3)
        .expect("the switch port to h0 is paused");
    p.intervals[0].0
}

#[test]
fn storm_is_detected_within_detection_time_plus_one_poll_and_drop_counts() {
    let cfg = stall_config();
    let res = stalled(&cfg, Duration::from_ms(4));
    let ev = &res.pfcwd_events;
    assert_eq!(ev.len(), 1, "{ev:?}");
    let e = &ev[0];
    assert_eq!((e.node.as_str(), e.peer.as_str()), ("sw", "h0"));
    assert_eq!(
        (e.event.as_str(), e.action.as_str(), e.priority),
        ("storm_detected", "drop", 3)
    );
    let onset = storm_onset(&res);
    let (det, poll) = (1_000_000_000u64, 500_000_000u64);
    assert!(
        e.time_ps >= onset + det && e.time_ps <= onset + det + poll,
        "onset {onset} detected {}",
        e.time_ps
    );
    assert_eq!(e.time_ps % poll, 0, "polls fall on the poll grid");
    // Drop: the queue's frames and every later frame for it are dropped
    // and counted in the watchdog's table and in the summary.
    let st = &res.pfcwd_stats;
    assert_eq!(st.len(), 1);
    let s = &st[0];
    assert_eq!(s.status, "stormed");
    assert_eq!((s.storms_detected, s.storms_restored), (1, 0));
    assert!(s.tx_drop > 10, "{s:?}");
    assert_eq!(s.tx_last_drop, s.tx_drop);
    assert_eq!(s.tx_ok, 0, "a dropping queue sends nothing");
    assert!(res.summary.drops >= s.tx_drop + s.rx_drop);
    // The sender is no longer held: the switch takes its frames (and
    // drops them) instead of pausing it.
    let sender = res.ports.iter().find(|p| p.node == "h1").unwrap();
    assert!(sender.prio[3].tx_packets > 3 * s.tx_drop / 4, "{sender:?}");
}

#[test]
fn forward_ignores_pause_and_restores_after_the_storm_stops() {
    // The NIC's own prevention ends the storm: at its critical watermark
    // (2 ms) it stops sending PAUSE. The switch then sees no PFC frame and
    // restores the queue after the restoration time.
    let mut cfg = stall_config();
    cfg.fabric.pfc.watchdog.action = PfcWatchdogAction::Forward;
    cfg.nic.pause_storm.enabled = true;
    cfg.nic.pause_storm.critical = Duration::from_ms(2);
    let res = stalled(&cfg, Duration::from_ms(6));
    let ev: Vec<(&str, u64)> = res
        .pfcwd_events
        .iter()
        .map(|e| (e.event.as_str(), e.time_ps))
        .collect();
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(ev[0].0, "storm_detected");
    assert_eq!(ev[1].0, "storm_restored");
    // The last PFC frame reached the switch one pause time before its
    // held-off interval ended.
    let p = res
        .pauses
        .iter()
        .find(|p| p.node == "sw" && p.peer == "h0")
        .unwrap();
    let last_pfc = p.intervals.last().unwrap().1 - PAUSE_PS;
    let (rest, poll) = (1_000_000_000u64, 500_000_000u64);
    assert!(
        ev[1].1 >= last_pfc + rest && ev[1].1 <= last_pfc + rest + poll,
        "last PFC frame {last_pfc}, restored {}",
        ev[1].1
    );
    let s = &res.pfcwd_stats[0];
    assert_eq!(s.status, "operational");
    assert_eq!((s.storms_detected, s.storms_restored), (1, 1));
    // Forward: the queue kept sending to the stalled NIC despite PAUSE.
    assert!(s.tx_ok > 10 && s.tx_drop == 0, "{s:?}");
    assert_eq!(s.tx_last_ok, s.tx_ok);
}

#[test]
fn with_the_default_prevention_a_stalled_nic_pauses_long_enough_for_sonics_watchdog() {
    // A ConnectX's default critical watermark (8 s) outlasts SONiC's
    // default detection (200 ms, polled every 200 ms): the switch sees the
    // storm. With the driver's `auto` (100 ms) the NIC gives up first and
    // the watchdog never does.
    let mut cfg = SimConfig::default();
    cfg.nic.rx_drain_rate = Some(Rate::from_bps(1_000_000));
    cfg.fabric.pfc.watchdog.enabled = true;
    cfg.fabric.pfc.watchdog.detection_time = Duration::from_ms(200);
    cfg.fabric.pfc.watchdog.restoration_time = Duration::from_ms(200);
    cfg.fabric.pfc.watchdog.poll_interval = Duration::from_ms(200);
    let res = stalled(&cfg, Duration::from_ms(450));
    let h0 = res.ports.iter().find(|p| p.node == "h0").unwrap();
    assert_eq!(h0.tx_pause_storm_error_events, 0);
    let ev: Vec<&str> = res.pfcwd_events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(ev, ["storm_detected"]);
    cfg.nic.pause_storm.critical = Duration::from_ms(100);
    let res = stalled(&cfg, Duration::from_ms(450));
    let h0 = res.ports.iter().find(|p| p.node == "h0").unwrap();
    assert_eq!(h0.tx_pause_storm_error_events, 1);
    assert!(res.pfcwd_events.is_empty(), "{:?}", res.pfcwd_events);
}

#[test]
fn alert_only_records_and_a_slow_receiver_is_no_storm() {
    let mut cfg = stall_config();
    cfg.fabric.pfc.watchdog.action = PfcWatchdogAction::Alert;
    let res = stalled(&cfg, Duration::from_ms(3));
    assert_eq!(res.pfcwd_events.len(), 1);
    let s = &res.pfcwd_stats[0];
    assert_eq!((s.tx_ok, s.tx_drop, s.rx_drop), (0, 0, 0), "{s:?}");
    assert_eq!(s.status, "stormed");
    // A receiver draining at 10 Gbit/s pauses and resumes over and over:
    // every poll interval sees an XON, so there is no storm.
    let mut cfg = stall_config();
    cfg.nic.rx_drain_rate = Some(Rate::from_gbps(10));
    let res = stalled(&cfg, Duration::from_ms(3));
    assert!(res.summary.pause_frames_sent > 20);
    assert!(res.pfcwd_events.is_empty(), "{:?}", res.pfcwd_events);
    assert!(res.pfcwd_stats.is_empty());
}

#[test]
fn nic_counts_stall_watermarks_and_stops_pausing_past_critical() {
    let mut cfg = stall_config();
    cfg.fabric.pfc.watchdog.enabled = false;
    cfg.nic.pause_storm.enabled = true;
    cfg.nic.pause_storm.critical = Duration::from_ms(1);
    assert_eq!(
        cfg.nic.pause_storm.minor_watermark(),
        Duration::from_us(850)
    );
    // h0 starts holding XOFF about 13 us in: the warning comes 850 us
    // later, the error 1 ms later.
    let events = |until_us: u64| {
        let res = stalled(&cfg, Duration::from_us(until_us));
        let h0 = res.ports.iter().find(|p| p.node == "h0").unwrap();
        (
            h0.tx_pause_storm_warning_events,
            h0.tx_pause_storm_error_events,
        )
    };
    assert_eq!(events(850).0, 0);
    assert_eq!(events(870).0, 1);
    assert_eq!(events(1000).1, 0);
    assert_eq!(events(1020).1, 1);
    let res = stalled(&cfg, Duration::from_ms(5));
    let h0 = res.ports.iter().find(|p| p.node == "h0").unwrap();
    assert_eq!(h0.tx_pause_storm_warning_events, 1);
    assert_eq!(h0.tx_pause_storm_error_events, 1);
    // XOFF held exactly up to the critical watermark, refreshed every
    // half pause time (167.8 us) until then, never again after.
    assert_eq!(h0.prio[3].tx_pause_duration_ps, 1_000_000_000);
    assert_eq!(h0.prio[3].tx_pause, 6, "{:?}", h0.prio[3]);
    // The switch resumes when the last pause expires and the stalled
    // NIC's buffer overflows instead.
    assert!(h0.rx_discards > 0);
    let dump = ethtool_dump(h0, &[3]);
    assert!(
        dump.contains("\n     tx_pause_storm_warning_events: 1\n"),
        "{dump}"
    );
    assert!(dump.contains("\n     tx_pause_storm_error_events: 1\n"));
    // Without prevention the NIC pauses the switch for the whole run.
    cfg.nic.pause_storm.enabled = false;
    let res = stalled(&cfg, Duration::from_ms(5));
    let h0 = res.ports.iter().find(|p| p.node == "h0").unwrap();
    assert_eq!(h0.tx_pause_storm_error_events, 0);
    assert!(h0.prio[3].tx_pause_duration_ps > 4_900_000_000);
    assert_eq!(h0.rx_discards, 0);
}

#[test]
fn watchdog_and_watermark_keys_are_validated() {
    let mut cfg = SimConfig::default();
    cfg.fabric.pfc.watchdog.poll_interval = Duration::from_ms(300);
    let e = cfg.validate().unwrap_err();
    assert_eq!(e.key, "fabric.pfc.watchdog.poll_interval");
    let mut cfg = SimConfig::default();
    cfg.nic.pause_storm.minor = Some(Duration::from_ms(8001));
    assert_eq!(cfg.validate().unwrap_err().key, "nic.pause_storm.minor");
    let mut cfg = SimConfig::default();
    cfg.fabric.pfc.deadlock.check_interval = Duration::ZERO;
    assert_eq!(
        cfg.validate().unwrap_err().key,
        "fabric.pfc.deadlock.check_interval"
    );
    // A ConnectX's default: 8 s critical, 6.8 s minor (not the driver's
    // `auto`, 100 ms, which gives up before a 200 ms switch watchdog).
    let d = SimConfig::default();
    assert_eq!(d.nic.pause_storm.critical, Duration::from_secs(8));
    assert_eq!(d.nic.pause_storm.minor_watermark(), Duration::from_ms(6800));
    let auto: SimConfig = toml::from_str("[nic.pause_storm]\ncritical = \"100ms\"").unwrap();
    assert_eq!(
        auto.nic.pause_storm.minor_watermark(),
        Duration::from_ms(85)
    );
    let parsed: SimConfig = toml::from_str(
        "[fabric.pfc.watchdog]\nenabled = true\naction = \"forward\"\n[nic.pause_storm]\ncritical = \"8s\"",
    )
    .unwrap();
    assert_eq!(
        parsed.fabric.pfc.watchdog.action,
        PfcWatchdogAction::Forward
    );
    assert_eq!(
        parsed.nic.pause_storm.minor_watermark(),
        Duration::from_ms(6800)
    );
    assert!(toml::from_str::<SimConfig>("[fabric.pfc.watchdog]\naction = \"shutdown\"").is_err());
}
