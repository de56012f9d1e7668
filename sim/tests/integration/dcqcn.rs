//! DCQCN through the fabric: both parameter sets of VALIDATION.md DCQCN-0
//! are accepted, switches mark, receivers send CNPs, senders react, and
//! the fabric pauses less than with PFC alone.

use roce::time::{Duration, Rate, Size};
use sim::config::{CcAlgorithm, DcqcnPreset, EcnConfig, PfcThreshold, SimConfig};
use sim::run::{simulate, RunOptions};

use crate::support::{star, write};

fn incast(cfg: &SimConfig) -> sim::results::RunResult {
    let (t, r) = star(9, Rate::from_gbps(100), Duration::from_us(1));
    let flows: Vec<_> = (0..8)
        .map(|i| write(i, i as usize + 2, 1, 4_000_000))
        .collect();
    simulate(&t, &r, cfg, &flows, &RunOptions::default())
        .unwrap()
        .0
}

fn base() -> SimConfig {
    let mut cfg = SimConfig::default();
    cfg.fabric.pfc.threshold = PfcThreshold::Static {
        xoff: Size::from_bytes(400_000),
        xon: Size::from_bytes(300_000),
    };
    // DCQCN paper marking: Kmin 5 KB, Kmax 200 KB, Pmax 1% (< XOFF).
    cfg.fabric.ecn = vec![EcnConfig {
        priority: 3,
        kmin: Size::from_bytes(5_000),
        kmax: Size::from_bytes(200_000),
        pmax: 0.01,
    }];
    cfg
}

#[test]
fn dcqcn_presets_mark_notify_react_and_pause_less_than_pfc_alone() {
    let pfc_only = incast(&base());
    assert_eq!(pfc_only.summary.cnps_sent, 0);
    for preset in [DcqcnPreset::Paper, DcqcnPreset::Firmware, DcqcnPreset::Hpcc] {
        let mut cfg = base();
        cfg.nic.cc.algorithm = CcAlgorithm::Dcqcn;
        cfg.nic.cc.preset = preset;
        cfg.validate().unwrap();
        let res = incast(&cfg);
        let s = &res.summary;
        assert_eq!(s.flows_completed, 8, "{preset:?}");
        assert_eq!(s.drops, 0);
        assert!(s.ecn_marked > 0 && s.cnps_sent > 0, "{preset:?}: {s:?}");
        let handled: u64 = res.nics.iter().map(|n| n.rp_cnp_handled).sum();
        assert_eq!(handled, s.cnps_sent, "every CNP reaches its sender");
        assert!(
            s.pause_frames_sent < pfc_only.summary.pause_frames_sent,
            "{preset:?}: {} pauses vs {} with PFC alone",
            s.pause_frames_sent,
            pfc_only.summary.pause_frames_sent
        );
    }
}
