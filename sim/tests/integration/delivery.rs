//! What flows deliver: `bytes_acked` and goodput count the bytes the
//! receiver acknowledged (not only completed messages), per-flow rate
//! series on request, and congestion control per workload.

use roce::time::{Duration, Rate, Size};
use sim::config::{CcAlgorithm, CcConfig, EcnConfig, SimConfig};
use sim::results::RunResult;
use sim::run::{simulate, RunOptions};
use sim::workload::FlowSpec;

use crate::support::{star, write};

/// Payload bytes per wire byte of a full 4096 B WRITE packet (Ethernet,
/// IPv4, UDP, BTH, ICRC and FCS: 62 B of headers).
const PAYLOAD_SHARE: f64 = 4096.0 / 4158.0;

fn run(n: usize, cfg: &SimConfig, flows: &[FlowSpec], opts: &RunOptions) -> RunResult {
    let (t, r) = star(n, Rate::from_gbps(100), Duration::from_us(1));
    simulate(&t, &r, cfg, flows, opts).unwrap().0
}

#[test]
fn a_flow_cut_off_mid_message_reports_the_bytes_the_receiver_acknowledged() {
    // h0 -> h1, 10 MB in 4 MB messages, stopped at 500 us: the first
    // message (4 MB, ~330 us at 100 Gbit/s) completed, the second is
    // under way.
    let mut f = write(0, 1, 2, 10_000_000);
    f.message_size = 4_000_000;
    let until = Duration::from_us(500);
    let opts = RunOptions {
        duration: Some(until),
        ..RunOptions::default()
    };
    let res = run(2, &SimConfig::default(), &[f], &opts);
    let fr = &res.flows[0];
    assert_eq!(fr.finish_ps, None, "the duration cuts the flow off");
    assert_eq!(res.summary.stop_reason, "duration");
    let completed = 4_000_000u64;
    let sent_wire = res
        .ports
        .iter()
        .find(|p| p.node == "h0")
        .map(|p| p.prio[3].tx_bytes)
        .unwrap();
    assert!(
        fr.bytes_acked > completed && fr.bytes_acked < sent_wire,
        "acked {} B: expected between the completed messages ({completed} B) and the bytes sent ({sent_wire} B)",
        fr.bytes_acked
    );
    // The message in progress counts whole packets of one path MTU: the
    // ACKed PSNs times the payload per packet.
    assert_eq!((fr.bytes_acked - completed) % 4096, 0, "{}", fr.bytes_acked);
    // Close form: the link carries payload at 100 Gbit/s x 4096/4158 from
    // the start, less about one round trip (a few us) still unacknowledged.
    let ideal = 100e9 / 8.0 * until.as_secs_f64() * PAYLOAD_SHARE;
    let got = fr.bytes_acked as f64;
    assert!(
        got > 0.97 * ideal && got < ideal,
        "acked {got} B, line rate gives {ideal:.0} B"
    );
    assert_eq!(res.summary.bytes_delivered, fr.bytes_acked);
    let goodput = fr.bytes_acked as f64 * 8.0 / until.as_secs_f64();
    assert!((res.summary.goodput_bps - goodput).abs() < 1.0);
}

#[test]
fn completed_flows_count_exactly_their_size() {
    let mut f = write(0, 1, 2, 1_000_000);
    f.message_size = 300_000;
    let res = run(2, &SimConfig::default(), &[f], &RunOptions::default());
    assert_eq!(res.flows[0].bytes_acked, 1_000_000);
    assert_eq!(res.summary.bytes_delivered, 1_000_000);
}

#[test]
fn flow_rates_of_two_flows_sharing_a_bottleneck_sum_to_its_rate() {
    // h0 -> h2 and h1 -> h2: the switch port to h2 is the bottleneck.
    // 64 KB messages: the receiver acknowledges at least every 16 packets
    // (each message's last asks for an ACK), so a flow's acknowledged
    // bytes move in steps of at most 64 KB.
    let mut flows = [write(0, 1, 3, 40_000_000), write(1, 2, 3, 40_000_000)];
    for f in &mut flows {
        f.message_size = 65_536;
    }
    let plain = run(3, &SimConfig::default(), &flows, &RunOptions::default());
    assert!(plain.flow_rates.is_empty(), "no series unless asked for");
    assert!(!plain.to_json().contains("flow_rates"));
    let mut cfg = SimConfig::default();
    cfg.record.flow_rates = true;
    cfg.record.flow_rate_interval = Some(Duration::from_us(100));
    let res = run(3, &cfg, &flows, &RunOptions::default());
    assert_eq!(res.summary.flows_completed, 2);
    assert_eq!(
        res.summary.events,
        plain.summary.events + res.flow_rates[0].samples.len() as u64,
        "sampling adds its own events only"
    );
    assert_eq!(res.flows, plain.flows, "sampling changes nothing else");
    assert_eq!(res.flow_rates.len(), 2);
    let (a, b) = (&res.flow_rates[0], &res.flow_rates[1]);
    assert_eq!((a.id, b.id), (0, 1));
    assert_eq!(a.interval_ps, 100_000_000);
    assert_eq!(a.samples.len(), b.samples.len());
    // The samples add up to what the flow delivered, but for the part
    // after the last sample (less than one interval at line rate, 1.25 MB,
    // plus one step).
    for (s, f) in res.flow_rates.iter().zip(&res.flows) {
        let bits: u128 = s.samples.iter().map(|&(_, r)| u128::from(r)).sum();
        let bytes = (bits * 100 / 1_000_000 / 8) as u64;
        assert!(bytes <= f.bytes_acked, "{bytes} > {}", f.bytes_acked);
        assert!(
            f.bytes_acked - bytes < 1_250_000 + 65_536,
            "{bytes} of {}",
            f.bytes_acked
        );
    }
    // Converged (from 200 us) and before the first flow finishes, the two
    // rates add up to the bottleneck's payload rate: each sample within
    // the two flows' acknowledgement steps (2 x 64 KB per 100 us, 10.5
    // Gbit/s), their mean within 2 %.
    let end = res.flows.iter().filter_map(|f| f.finish_ps).min().unwrap();
    let bottleneck = 100e9 * PAYLOAD_SHARE;
    let step = 2.0 * 65_536.0 * 8.0 / 100e-6;
    let mut sums = Vec::new();
    for (&(t, ra), &(tb, rb)) in a.samples.iter().zip(&b.samples) {
        assert_eq!(t, tb);
        if t < 200_000_000 || t > end {
            continue;
        }
        let sum = (ra + rb) as f64;
        assert!(
            (sum - bottleneck).abs() <= step,
            "at {t} ps: {ra} + {rb} = {sum} bit/s, bottleneck {bottleneck}"
        );
        assert!(ra > 0 && rb > 0, "both flows move at {t} ps");
        sums.push(sum);
    }
    assert!(sums.len() >= 50, "{} converged samples", sums.len());
    let mean = sums.iter().sum::<f64>() / sums.len() as f64;
    assert!(
        (mean - bottleneck).abs() < 0.02 * bottleneck,
        "mean {mean} bit/s, bottleneck {bottleneck}"
    );
}

#[test]
fn workloads_run_their_own_congestion_control() {
    // h0 -> h2 (workload 0, DCQCN) and h1 -> h2 (workload 1, none) share
    // the marking port to h2; the hosts' own setting is DCQCN.
    let mut cfg = SimConfig::default();
    cfg.nic.cc.algorithm = CcAlgorithm::Dcqcn;
    cfg.fabric.ecn = vec![EcnConfig {
        priority: 3,
        kmin: Size::from_bytes(5_000),
        kmax: Size::from_bytes(200_000),
        pmax: 0.01,
    }];
    let mut flows = [write(0, 1, 3, 400_000_000), write(1, 2, 3, 400_000_000)];
    flows[1].workload = 1;
    let opts = RunOptions {
        duration: Some(Duration::from_us(2_000)),
        workloads: vec!["dcqcn".into(), "blind".into()],
        ..RunOptions::default()
    };
    let both = run(3, &cfg, &flows, &opts);
    let host = |r: &RunResult, h: &str| r.nics.iter().find(|n| n.node == h).unwrap().clone();
    assert!(host(&both, "h0").rp_cnp_handled > 0);
    assert!(host(&both, "h1").rp_cnp_handled > 0);

    cfg.workload_cc = vec![
        None,
        Some(CcConfig {
            algorithm: CcAlgorithm::None,
            ..CcConfig::default()
        }),
    ];
    cfg.validate().unwrap();
    let mixed = run(3, &cfg, &flows, &opts);
    let (d, blind) = (&mixed.flows[0], &mixed.flows[1]);
    assert_eq!(
        (d.workload.as_str(), blind.workload.as_str()),
        ("dcqcn", "blind")
    );
    // The DCQCN flow's receiver marks and notifies; its sender cuts.
    assert!(host(&mixed, "h0").rp_cnp_handled > 0);
    // Without DCQCN neither end of the other flow's QPs takes part: no
    // CNP is sent for it and none is acted on.
    assert_eq!(host(&mixed, "h1").rp_cnp_handled, 0);
    assert_eq!(
        host(&mixed, "h2").np_cnp_sent,
        host(&mixed, "h0").rp_cnp_handled
    );
    // The flow that ignores congestion takes the larger share.
    assert!(
        blind.bytes_acked as f64 > 1.3 * d.bytes_acked as f64,
        "blind {} B, DCQCN {} B",
        blind.bytes_acked,
        d.bytes_acked
    );
    // The same flow under the hosts' DCQCN got less.
    assert!(
        blind.bytes_acked > both.flows[1].bytes_acked,
        "blind {} B, under DCQCN {} B",
        blind.bytes_acked,
        both.flows[1].bytes_acked
    );
}

/// More flows on one queue pair than its send queue holds (64 work
/// requests), all posted at once: the ones that find the queue full post
/// as it drains, in order, and every flow completes; the link stays busy
/// (the bytes at line rate, within a few microseconds).
#[test]
fn flows_beyond_a_full_send_queue_wait_for_room_and_all_complete() {
    let flows: Vec<FlowSpec> = (0..200u32).map(|i| write(i, 1, 2, 64_000)).collect();
    let res = run(3, &SimConfig::default(), &flows, &RunOptions::default());
    assert_eq!(
        res.summary.flows_completed, 200,
        "{:?}",
        res.summary.stop_reason
    );
    let wire = 200.0 * 64_000.0 / PAYLOAD_SHARE * 8.0 / 100e9;
    let took = res.summary.makespan_ps as f64 * 1e-12;
    assert!(took < wire * 1.02 + 10e-6, "{took} s for {wire} s of wire");
    // In post order: each flow finishes after the one before it.
    let mut last = 0;
    for f in &res.flows {
        let t = f.finish_ps.unwrap();
        assert!(t >= last, "flow {} finished before its predecessor", f.id);
        last = t;
    }
}
