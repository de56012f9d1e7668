//! Smoke tests of the fabric: one flow, one switch.

use sim::config::SimConfig;
use sim::run::{simulate, RunOptions};
use verbs_emu::time::{Duration, Rate};

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
    // 1 MB at 100 Gbps is 80 us plus headers and about 4 us of RTT.
    let fct = res.flows[0].fct_ps.unwrap();
    assert!(fct > 80_000_000 && fct < 90_000_000, "fct {fct}");
}

#[test]
fn print_incast() {
    let (t, r) = star(9, Rate::from_gbps(100), Duration::from_us(1));
    let flows: Vec<_> = (0..8)
        .map(|i| write(i, i as usize + 2, 1, 1_000_000))
        .collect();
    let mut cfg = SimConfig::default();
    cfg.fabric.pfc.threshold = sim::config::PfcThreshold::Static {
        xoff: verbs_emu::time::Size::from_bytes(100_000),
        xon: verbs_emu::time::Size::from_bytes(80_000),
    };
    let (res, st) = simulate(&t, &r, &cfg, &flows, &RunOptions::default()).unwrap();
    println!("{}", serde_json::to_string_pretty(&res.summary).unwrap());
    for f in &res.flows {
        println!("{:?}", f);
    }
    println!("{st:?}");
}
