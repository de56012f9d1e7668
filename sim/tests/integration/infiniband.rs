//! InfiniBand's link layer: credit-based flow control per virtual lane
//! (`fabric.link_layer = "infiniband"`).

use super::support::run_text;
use sim::results::RunResult;

/// One WRITE of `size` to h0 through a chain of `switches` switches, from
/// the host on the last (h1 beside h0 when there is one switch), every link `rate` with a
/// `delay` of cable, on InfiniBand with `ib` in `[fabric.infiniband]`.
fn one_flow(switches: u32, rate: &str, delay: &str, size: &str, ib: &str) -> RunResult {
    run_text(&format!(
        r#"
name = "ib-one-flow"
seed = 1
duration = "100ms"
[topology]
name = "chain"
defaults = {{ rate = "{rate}", delay = "{delay}", mtu = 4096 }}
generator = {{ kind = "chain", switches = {switches}, hosts_per_switch = {per} }}
[fabric]
link_layer = "infiniband"
[fabric.infiniband]
{ib}
[record]
flows = true
[[workload]]
kind = "incast"
receiver = "h0"
senders = ["h{last}"]
size = "{size}"
op = "write"
priority = 3
"#,
        per = if switches == 1 { 2 } else { 1 },
        last = switches.max(2) - 1
    ))
}

/// Wire bytes of a full frame of the 4096-byte MTU, and its blocks of
/// 64 B: 66 (4,224 B of credit).
const FRAME_WIRE: f64 = 4178.0;
const FRAME_BLOCKS: u64 = 66;

/// The credit round trip of one link of `delay_us` at 100 Gbit/s with
/// FCPs sent at once: the frame's serialisation, the frame's propagation
/// to the switch (which forwards it at once, freeing its blocks), and
/// the FCP's propagation back.
fn credit_rtt_us(delay_us: f64) -> f64 {
    FRAME_WIRE * 8.0 / 100e3 + 2.0 * delay_us
}

/// Closed form: a lane whose credit limit is short of the credit round
/// trip carries `credits x 64 B / round trip` (credits counted in whole
/// frames: a frame is sent only when all its blocks fit), and one whose
/// limit covers it runs at line rate; its transmitter's idle wait is
/// `PortXmitWait`.
#[test]
fn a_lane_short_of_credits_carries_its_credits_per_round_trip() {
    let delay_us = 5.0; // 1 km of cable
    let rtt = credit_rtt_us(delay_us);
    let frames = 3907.0; // 16 MB in 4096-byte payloads
    for k in [1u64, 2, 4, 8] {
        let bytes = k * FRAME_BLOCKS * 64;
        let r = one_flow(
            1,
            "100Gbps",
            "5us",
            "16MB",
            &format!("vl_buffer = \"{bytes}B\"\nfc_period = \"1ns\""),
        );
        assert_eq!(r.summary.drops, 0);
        assert_eq!(r.summary.pause_frames_sent, 0, "no PFC on InfiniBand");
        let fct_us = r.flows[0].fct_ps.expect("finished") as f64 / 1e6;
        // k frames a round trip; the first round trip also carries the
        // data to the receiver, so the flow takes frames / k of them.
        let want = frames / k as f64 * rtt;
        assert!(
            (fct_us / want - 1.0).abs() < 0.02,
            "{k} frames of credit: FCT {fct_us} us, closed form {want} us"
        );
        let gbps = k as f64 * FRAME_BLOCKS as f64 * 64.0 * 8.0 / rtt / 1e3;
        eprintln!("{bytes} B of credit: {gbps:.1} Gbit/s of credit, FCT {fct_us:.0} us");
        // The sender's port waited for credits nearly all the time it
        // did not send: ticks of one block at 100 Gbit/s (5.12 ns).
        let h1 = r.ports.iter().find(|p| p.node == "h1").unwrap();
        let wait_us = h1.infiniband.as_ref().unwrap().xmit_wait as f64 * 5.12e-3;
        let sending_us = frames * FRAME_WIRE * 8.0 / 100e3;
        assert!(
            wait_us > 0.9 * (fct_us - sending_us) && wait_us < fct_us - sending_us + 1.0,
            "PortXmitWait {wait_us} us against {} us idle",
            fct_us - sending_us
        );
    }
    // A limit above the round trip's 129 KB, bar the 128 KiB the 12-bit
    // counters allow: close to line rate, no wait to speak of.
    let r = one_flow(
        1,
        "100Gbps",
        "5us",
        "16MB",
        "vl_buffer = \"128KiB\"\nfc_period = \"1ns\"",
    );
    let fct_us = r.flows[0].fct_ps.unwrap() as f64 / 1e6;
    let line_us = frames * FRAME_WIRE * 8.0 / 100e3;
    assert!(
        fct_us < 1.02 * (line_us + rtt),
        "{fct_us} against {line_us}"
    );
}

/// A single flow across a chain of three switches reaches line rate when
/// each lane's limit covers its link's credit round trip (64 KiB against
/// 2 x 1 us of cable and a frame: 29 KB), with the default FCP period.
#[test]
fn a_flow_through_a_chain_of_switches_reaches_line_rate_when_the_limit_suffices() {
    let r = one_flow(3, "100Gbps", "1us", "16MB", "vl_buffer = \"64KiB\"");
    assert_eq!(r.summary.drops, 0);
    let fct_us = r.flows[0].fct_ps.unwrap() as f64 / 1e6;
    // Line rate for the frames, plus the path's latency: 4 links.
    let want = 3907.0 * FRAME_WIRE * 8.0 / 100e3 + 4.0 * (1.0 + FRAME_WIRE * 8.0 / 100e3);
    assert!(
        (fct_us / want - 1.0).abs() < 0.01,
        "FCT {fct_us} us, line rate {want} us"
    );
    for p in &r.ports {
        let ib = p.infiniband.as_ref().expect("every port runs credits");
        assert!(ib.max_blocks_held <= ib.blocks_per_lane, "{p:?}");
    }
}

/// Credits never let a frame in that the receiver has no buffer for: a
/// 16:1 incast and a permutation drop nothing, where the same fabric
/// without PFC drops (the lossy incast) and every flow still completes.
#[test]
fn credits_drop_nothing_under_incast_and_permutation() {
    let lossy = super::support::lossy_incast("buffer = { size = \"1MB\" }", "");
    assert!(lossy.summary.drops > 0, "the Ethernet baseline drops");
    let ib = super::support::lossy_incast(
        "buffer = { size = \"1MB\" }\nlink_layer = \"infiniband\"",
        "",
    );
    assert_eq!(ib.summary.drops, 0);
    assert_eq!(ib.summary.flows_completed, 16);
    assert_eq!(ib.summary.retransmitted_packets, 0);
    // The congested port is the receiver's leaf downlink; its upstream
    // ports wait for credits, the leaf's downlink itself never does.
    let waiting: u64 = ib
        .ports
        .iter()
        .filter_map(|p| p.infiniband.as_ref())
        .map(|i| i.xmit_wait)
        .sum();
    assert!(waiting > 0);
    for p in &ib.ports {
        let i = p.infiniband.as_ref().unwrap();
        assert!(i.max_blocks_held <= i.blocks_per_lane, "{p:?}");
    }
    // A permutation, with per-flow ECMP and with the adaptive routing
    // some InfiniBand switches do (the least-queued next hop per frame).
    for lb in ["ecmp", "adaptive"] {
        let perm = run_text(&format!(
            r#"
name = "ib-permutation"
seed = 3
duration = "100ms"
[topology]
name = "ft"
defaults = {{ rate = "100Gbps", delay = "1us", mtu = 4096 }}
generator = {{ kind = "fat-tree", k = 4 }}
[fabric]
link_layer = "infiniband"
load_balancing = {{ mode = "{lb}" }}
[nic]
retransmit = "selective-repeat"
[[workload]]
kind = "permutation"
size = "4MB"
op = "write"
priority = 3
"#
        ));
        assert_eq!(perm.summary.drops, 0, "{lb}");
        assert_eq!(
            perm.summary.flows_completed, perm.summary.flows_total,
            "{lb}"
        );
    }
}

/// Settings the 12-bit credit counters or the link layer cannot honour are
/// refused, naming the key and what was expected.
#[test]
fn infiniband_settings_are_checked() {
    let load = |fabric: &str| {
        let text = format!(
            "name = \"x\"\n[topology]\nname = \"c\"\ngenerator = {{ kind = \"chain\", switches = 2, hosts_per_switch = 1 }}\n[fabric]\nlink_layer = \"infiniband\"\n{fabric}\n[[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsenders = [\"h1\"]\nsize = \"1MB\"\n"
        );
        sim::scenario::from_str(std::path::Path::new("t.toml"), &text).map(|_| ())
    };
    load("").unwrap();
    let e = load("infiniband = { vl_buffer = \"256KiB\" }")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("fabric.infiniband.vl_buffer") && e.contains("2048 blocks"),
        "{e}"
    );
    let e = load("infiniband = { vl_buffer = \"2KiB\" }")
        .unwrap_err()
        .to_string();
    assert!(e.contains("a full 4 KiB frame"), "{e}");
    let e = load("infiniband = { fc_period = \"0ns\" }")
        .unwrap_err()
        .to_string();
    assert!(e.contains("fabric.infiniband.fc_period"), "{e}");
    let e = load("[fabric.infiniband.arbitration]\nlow = [{ vl = 9, weight = 1 }]")
        .unwrap_err()
        .to_string();
    assert!(e.contains("arbitration.vl") && e.contains("0-7"), "{e}");
    let e = load("trim = {}").unwrap_err().to_string();
    assert!(
        e.contains("fabric.trim") && e.contains("never drops"),
        "{e}"
    );
}

/// Lesson 21's variant `name`, run with its configuration changed by
/// `tweak`.
fn lesson21(
    name: &str,
    tweak: impl FnOnce(&mut sim::config::SimConfig),
) -> Result<RunResult, sim::options::SimError> {
    let f = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/lessons/21-credits-against-pfc.toml");
    let s = sim::scenario::load(&f).unwrap();
    let v = s.variants.iter().find(|v| v.name == name).unwrap();
    let t = &s.topologies[v.topology];
    let mut cfg = v.config.clone();
    tweak(&mut cfg);
    sim::run::simulate(
        t,
        &sim::topology::Routes::compute(t),
        &cfg,
        &v.flows,
        &v.run_options(),
    )
    .map(|r| r.0)
}

/// The FCT in microseconds of lesson 21's victim (h15 -> h1) in `r`.
fn victim_us(r: &RunResult) -> f64 {
    let f = r.flows.iter().find(|f| f.src == "h15").unwrap();
    f.fct_ps.unwrap() as f64 / 1e6
}

/// The SL-to-VL map decides which credits a flow uses: lesson 21's victim
/// on service level 1 passes the incast on its own lane; mapped onto the
/// incast's lane 3, it waits behind it as on a shared priority.
#[test]
fn the_sl_to_vl_map_decides_whose_credits_a_flow_waits_for() {
    let on_lane = |lane: u8| {
        let r = lesson21("infiniband-victim-own-vl", |c| {
            c.fabric.infiniband.sl_to_vl[1] = lane
        })
        .unwrap();
        assert_eq!(r.summary.drops, 0);
        victim_us(&r)
    };
    let own = on_lane(1);
    let shared = on_lane(3);
    assert!(own < 1000.0, "own lane: {own} us");
    assert!(
        shared > 3.0 * own,
        "lane 3 shared: {shared} us against {own}"
    );
    // A lane outside the data lanes is refused.
    let e = lesson21("infiniband-victim-own-vl", |c| {
        c.fabric.infiniband.sl_to_vl[2] = 15
    })
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("sl_to_vl") && e.contains("VL15"), "{e}");
    // A lane no arbitration entry serves would never send: refused.
    let e = lesson21("infiniband-victim-own-vl", |c| {
        c.fabric.infiniband.arbitration = Some(sim::config::VlArbitration {
            high: vec![],
            low: vec![sim::config::VlWeight { vl: 3, weight: 8 }],
            high_limit: 255,
        })
    })
    .err()
    .map(|e| e.to_string())
    .unwrap_or_default();
    assert!(e.contains("lane 1") && e.contains("never be sent"), "{e}");
}

/// Two 8 MB flows from h1, to h0 on service level 1 and to h2 on 3 (two
/// QPs sharing h1's port), under the VL
/// arbitration `arb` (TOML of `[fabric.infiniband.arbitration]`): each
/// flow's FCT in microseconds, (SL 1, SL 3).
fn two_lanes(arb: &str) -> (f64, f64) {
    let r = run_text(&format!(
        r#"
name = "ib-arbitration"
seed = 1
duration = "100ms"
[topology]
name = "chain"
defaults = {{ rate = "100Gbps", delay = "1us", mtu = 4096 }}
generator = {{ kind = "chain", switches = 1, hosts_per_switch = 3 }}
[fabric]
link_layer = "infiniband"
[fabric.infiniband.arbitration]
{arb}
[record]
flows = true
[[workload]]
name = "sl1"
kind = "incast"
receiver = "h0"
senders = ["h1"]
size = "8MB"
op = "write"
priority = 1
[[workload]]
name = "sl3"
kind = "incast"
receiver = "h2"
senders = ["h1"]
size = "8MB"
op = "write"
priority = 3
"#
    ));
    assert_eq!(r.summary.drops, 0);
    let fct = |w: &str| {
        let f = r.flows.iter().find(|f| f.workload == w).unwrap();
        f.fct_ps.unwrap() as f64 / 1e6
    };
    (fct("sl1"), fct("sl3"))
}

/// VL arbitration at the sender's port: weights share the link, the high
/// table goes first, and its limit lets the low table through.
#[test]
fn vl_arbitration_shares_the_link_by_weight_and_priority() {
    let frame_us = FRAME_WIRE * 8.0 / 100e3;
    let frames = 1954.0; // 8 MB in 4096-byte payloads
                         // Weights 64 and 192 (1:3): SL 3 runs at 3/4 of the link until done;
                         // SL 1 finishes when both are, at the link's rate.
    let (sl1, sl3) = two_lanes("low = [{ vl = 1, weight = 64 }, { vl = 3, weight = 192 }]");
    let both = 2.0 * frames * frame_us;
    assert!(
        (sl3 / (frames / 0.75 * frame_us) - 1.0).abs() < 0.03,
        "SL 3: {sl3} us"
    );
    assert!((sl1 / both - 1.0).abs() < 0.03, "SL 1: {sl1} us");
    // Lane 1 high, no limit: it runs alone first.
    let (sl1, sl3) =
        two_lanes("high = [{ vl = 1, weight = 255 }]\nlow = [{ vl = 3, weight = 255 }]");
    assert!(
        (sl1 / (frames * frame_us) - 1.0).abs() < 0.03,
        "SL 1: {sl1} us"
    );
    assert!((sl3 / both - 1.0).abs() < 0.03, "SL 3: {sl3} us");
    // Limit 0: one high frame, then a low one: an even share.
    let (sl1, sl3) = two_lanes(
        "high = [{ vl = 1, weight = 255 }]\nlow = [{ vl = 3, weight = 255 }]\nhigh_limit = 0",
    );
    assert!(
        (sl1 / both - 1.0).abs() < 0.03 && (sl3 / both - 1.0).abs() < 0.03,
        "{sl1} {sl3}"
    );
}

/// InfiniBand congestion control on lesson 21's shared-lane incast:
/// leaf0 marks FECN on frames leaving a queue above 32 KB, h0 returns
/// BECNs, and each sender's index into its delay table climbs until the
/// fan-in fits h0's link. The congestion tree shrinks: far less
/// PortXmitWait upstream and the victim on the incast's lane finishes
/// much sooner.
#[test]
fn ib_congestion_control_shrinks_the_credit_tree() {
    let run = |cc: bool| {
        lesson21("infiniband", |cfg| {
            if cc {
                cfg.nic.cc.algorithm = sim::config::CcAlgorithm::IbCc;
                // Four table steps per BECN: fourteen senders reach their
                // share within a few hundred microseconds (one step reacts
                // over milliseconds: the victim gains 40 %, not 6x).
                cfg.nic.cc.ib_cc.ccti_increase = 4;
                // FECN where a lane's egress queue passes 32 KB: credits
                // hold a switch's queue for one port to its ingress
                // buffers (here 2 x 64 KiB), far below Ethernet's marking
                // thresholds.
                cfg.fabric.ecn = vec![sim::config::EcnConfig {
                    priority: 3,
                    kmin: roce::time::Size::from_bytes(32_000),
                    kmax: roce::time::Size::from_bytes(32_000),
                    pmax: 1.0,
                }];
            }
        })
        .unwrap()
    };
    let (off, on) = (run(false), run(true));
    let wait = |r: &RunResult| -> u64 {
        r.ports
            .iter()
            .filter(|p| p.node.starts_with("spine"))
            .map(|p| p.infiniband.as_ref().unwrap().xmit_wait)
            .sum()
    };
    eprintln!(
        "victim {} -> {} us, spine PortXmitWait {} -> {}, CNPs {}",
        victim_us(&off),
        victim_us(&on),
        wait(&off),
        wait(&on),
        on.summary.cnps_sent
    );
    assert_eq!(on.summary.drops, 0);
    assert_eq!(on.summary.flows_completed, on.summary.flows_total);
    assert!(on.summary.cnps_sent > 0, "BECNs returned");
    // Measured: 5.51 ms -> 0.88 ms, and 12 times less waiting.
    assert!(victim_us(&on) < 0.3 * victim_us(&off));
    assert!(wait(&on) * 5 < wait(&off));
}
