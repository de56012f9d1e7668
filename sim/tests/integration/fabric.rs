//! Basic fabric behaviour: one flow, one switch.

use roce::time::{Duration, Rate};
use sim::config::SimConfig;
use sim::run::{simulate, RunOptions};

use crate::support::{star, write};

#[test]
fn one_write_crosses_a_switch_at_line_rate() {
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_us(1));
    let flows = vec![write(0, 1, 2, 1_000_000)];
    let (res, _) = simulate(
        &t,
        &r,
        &SimConfig::default(),
        &flows,
        &RunOptions::default(),
    )
    .unwrap();
    let s = &res.summary;
    assert_eq!(s.flows_completed, 1, "{s:?}");
    assert_eq!(s.drops, 0);
    assert_eq!(s.pause_frames_sent, 0);
    // 1 MB plus 245 packets of 62 B headers at 100 Gbps is 81.2 us; the
    // last ACK adds about 4.7 us (two hops each way at 1 us plus
    // serialisation).
    let fct = res.flows[0].fct_ps.unwrap();
    assert!((85_000_000..87_000_000).contains(&fct), "fct {fct}");
    assert_eq!(s.sim_time_ps, fct, "the run ends with the last ACK");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_us(1));
    // A flow to a switch.
    let mut f = write(0, 1, 0, 1000);
    let e = simulate(
        &t,
        &r,
        &SimConfig::default(),
        &[f.clone()],
        &RunOptions::default(),
    );
    assert!(e.unwrap_err().to_string().contains("not a host"));
    f.dst = sim::topology::NodeId(1);
    let e = simulate(&t, &r, &SimConfig::default(), &[f], &RunOptions::default());
    assert!(e.unwrap_err().to_string().contains("same host"));
    // A fault on a link that does not exist.
    let mut cfg = SimConfig::default();
    cfg.faults.push(sim::config::FaultConfig {
        from: Some("h0".into()),
        to: Some("h1".into()),
        loss: Some(0.1),
        drop_every: None,
        ..Default::default()
    });
    let e = simulate(
        &t,
        &r,
        &cfg,
        &[write(0, 1, 2, 1000)],
        &RunOptions::default(),
    );
    assert!(e.unwrap_err().to_string().contains("no link from h0 to h1"));
}

#[test]
fn dwrr_shares_the_egress_by_weight_and_strict_serves_the_highest_first() {
    use roce::time::Size;
    use sim::config::SchedulerConfig;
    let (t, r) = star(3, Rate::from_gbps(100), Duration::from_us(1));
    let mut low = write(1, 3, 1, 2_000_000);
    low.priority = 1;
    let flows = vec![write(0, 2, 1, 2_000_000), low];
    let mut cfg = SimConfig::default();
    cfg.nic.window = Some(1024);
    cfg.fabric.scheduler = SchedulerConfig::Dwrr {
        weights: [1, 1, 1, 3, 1, 1, 1, 1],
        quantum: Size::from_bytes(4096),
    };
    let (res, _) = simulate(&t, &r, &cfg, &flows, &RunOptions::default()).unwrap();
    assert_eq!(res.summary.flows_completed, 2);
    // Priority 3 gets 3/4 of the link while both are backlogged.
    let wire = 2_000_000.0 + 489.0 * 62.0;
    let expect = wire * 8.0 / 75e9 * 1e12;
    let fct3 = res.flows[0].fct_ps.unwrap() as f64;
    assert!(
        (fct3 / expect - 1.0).abs() < 0.05,
        "prio 3 fct {fct3}, expected {expect}"
    );
    // Strict priority: priority 3 as if alone.
    cfg.fabric.scheduler = SchedulerConfig::Strict;
    let (res, _) = simulate(&t, &r, &cfg, &flows, &RunOptions::default()).unwrap();
    let alone = wire * 8.0 / 100e9 * 1e12;
    let fct3 = res.flows[0].fct_ps.unwrap() as f64;
    assert!(
        (fct3 / alone - 1.0).abs() < 0.05,
        "strict prio 3 fct {fct3}, alone {alone}"
    );
    assert!(res.flows[1].fct_ps.unwrap() as f64 > 1.9 * alone);
}

#[test]
fn percentiles_over_no_finished_flow_are_absent_not_zero() {
    let (t, r) = star(2, Rate::from_gbps(100), Duration::from_us(1));
    let flows = [write(0, 2, 1, 1_000_000)];
    let opts = RunOptions {
        duration: Some(Duration::from_us(20)),
        ..RunOptions::default()
    };
    let res = simulate(&t, &r, &SimConfig::default(), &flows, &opts)
        .unwrap()
        .0;
    let s = &res.summary;
    assert_eq!((s.flows_completed, s.stop_reason.as_str()), (0, "duration"));
    assert_eq!(
        (s.fct_p50_ps, s.fct_p99_ps, s.max_fct_ps),
        (None, None, None)
    );
    let json: serde_json::Value = serde_json::from_str(&res.to_json()).unwrap();
    for k in ["fct_p50_ps", "fct_p99_ps", "max_fct_ps"] {
        assert!(json["summary"][k].is_null(), "{k}: {}", json["summary"][k]);
    }
    // With one finished flow they are that flow's FCT.
    let res = simulate(
        &t,
        &r,
        &SimConfig::default(),
        &flows,
        &RunOptions::default(),
    )
    .unwrap()
    .0;
    let fct = res.flows[0].fct_ps;
    assert!(fct.is_some());
    assert_eq!(res.summary.fct_p50_ps, fct);
    assert_eq!(res.summary.max_fct_ps, fct);
}
