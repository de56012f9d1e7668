//! Faults and per-element settings: each scenario of `scenarios/faults/`
//! runs and leaves its counter signature; bad entries name file, line,
//! key and what is missing.

use std::path::{Path, PathBuf};

use roce::time::Rate;
use sim::results::{PortRecord, RunResult};
use sim::run::simulate;
use sim::scenario::{self, Scenario};
use sim::stats::ethtool_dump;
use sim::topology::Routes;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn load(name: &str) -> Scenario {
    scenario::load(&repo().join("scenarios/faults").join(name)).unwrap()
}

/// Run every variant of a loaded scenario.
fn run_all(s: &Scenario) -> Vec<RunResult> {
    s.variants
        .iter()
        .map(|v| {
            let topo = &s.topologies[v.topology];
            let routes = Routes::compute(topo);
            let opts = v.run_options();
            simulate(topo, &routes, &v.config, &v.flows, &opts)
                .unwrap()
                .0
        })
        .collect()
}

fn run(name: &str) -> Vec<RunResult> {
    run_all(&load(name))
}

fn port<'a>(r: &'a RunResult, node: &str, p: u16) -> &'a PortRecord {
    r.ports
        .iter()
        .find(|x| x.node == node && x.port == p)
        .unwrap_or_else(|| panic!("no port {node}:{p}"))
}

fn ports_of<'a>(r: &'a RunResult, node: &'a str) -> impl Iterator<Item = &'a PortRecord> {
    r.ports.iter().filter(move |x| x.node == node)
}

fn all_done(r: &RunResult) {
    assert_eq!(
        r.summary.flows_completed, r.summary.flows_total,
        "{}: {:?}",
        r.summary.variant, r.summary
    );
}

#[test]
fn slow_receiver_pauses_with_duty_cycle_one_minus_r_over_c() {
    let mut s = load("slow-receiver.toml");
    for gbps in [25u64, 50, 75] {
        for v in &mut s.variants {
            v.config.faults[0].rate = Some(Rate::from_gbps(gbps));
        }
        let res = run_all(&s);
        let (shallow, deep) = (&res[0], &res[1]);
        for r in [shallow, deep] {
            all_done(r);
            assert_eq!(r.summary.drops, 0);
            let nic = port(r, "h0", 0);
            let fct = r.flows[0].fct_ps.unwrap() as f64;
            let duty = nic.prio[3].tx_pause_duration_ps as f64 / fct;
            let want = 1.0 - gbps as f64 / 100.0;
            assert!(
                (duty - want).abs() < 0.05,
                "{gbps}G {}: PAUSE duty {duty:.3}, expected {want:.3}",
                r.summary.variant
            );
            // The ToR is held off exactly as long as the NIC asked.
            let tor = port(r, "sw0", 0);
            assert_eq!(
                tor.prio[3].rx_pause_duration_ps,
                nic.prio[3].tx_pause_duration_ps
            );
        }
        // Upstream PAUSE only where the ToR's ingress reaches its XOFF:
        // 200 KB is reached, 8 MB never is (4 MB flow).
        assert!(port(shallow, "sw0", 1).prio[3].tx_pause > 0, "{gbps}G");
        assert_eq!(port(deep, "sw0", 1).prio[3].tx_pause, 0, "{gbps}G");
        assert_eq!(port(deep, "h1", 0).prio[3].rx_pause_duration_ps, 0);
    }
}

#[test]
fn a_pause_storm_holds_the_tor_off_for_the_whole_storm_and_spreads_upstream() {
    let r = &run("pause-storm.toml")[0];
    all_done(r);
    let storm = 950_000_000u64; // 50 us .. 1 ms
    let nic = port(r, "h0", 0).prio[3].clone();
    let tor = port(r, "sw0", 0).prio[3].clone();
    assert!(
        nic.tx_pause_duration_ps.abs_diff(storm) < storm / 50,
        "{nic:?}"
    );
    assert!(
        tor.rx_pause_duration_ps.abs_diff(storm) < storm / 50,
        "{tor:?}"
    );
    // Refreshed every half pause time (335.5 us at 100G): XOFFs plus XON.
    assert!(nic.tx_pause >= 4, "{nic:?}");
    // h1's traffic piles up at sw0 until its ingress pauses h1.
    assert!(port(r, "sw0", 1).prio[3].tx_pause > 0);
    // h2 -> h3 shares nothing with the storm: about 2 MB at line rate.
    let f = r.flows.iter().find(|f| f.src == "h2").unwrap();
    assert!(f.fct_ps.unwrap() < 200_000_000, "{f:?}");
    let g = r.flows.iter().find(|f| f.src == "h1").unwrap();
    assert!(g.finish_ps.unwrap() > 1_000_000_000, "{g:?}");
    assert_eq!(r.summary.drops, 0);
}

#[test]
fn after_a_link_goes_down_flows_move_after_convergence_and_all_complete() {
    let res = run("link-down.toml");
    let mut lost = Vec::new();
    for r in &res {
        all_done(r);
        let (a, b) = (port(r, "leaf0", 2), port(r, "spine0", 0));
        assert_eq!(a.peer, "spine0");
        for p in [a, b] {
            assert_eq!(p.errors.link_down_events, 1, "{p:?}");
            assert!(p.errors.tx_discards > 0, "{p:?}");
        }
        let total: u64 = r.ports.iter().map(|p| p.errors.tx_discards).sum();
        assert_eq!(total, r.summary.drops, "only the link loses frames");
        lost.push(a.errors.tx_discards);
        // Once routes converge nothing is sent towards the dead link: at
        // most the queue it held plus line rate over the convergence time.
        let conv_ps = if r.summary.variant == "default" {
            50_000_000u64
        } else {
            200_000_000
        };
        let line = conv_ps / 334; // 4,174-byte frames at 100 Gbit/s: 334 ns
        assert!(a.errors.tx_discards <= line + 150, "{a:?}");
    }
    assert!(lost[1] > lost[0], "longer convergence loses more: {lost:?}");
}

#[test]
fn a_flapping_link_counts_every_flap_and_every_flow_completes() {
    let r = &run("link-flap.toml")[0];
    all_done(r);
    for (n, p) in [("leaf0", 2), ("spine0", 0)] {
        assert_eq!(port(r, n, p).errors.link_down_events, 10);
    }
    assert!(r.summary.retransmitted_packets > 0);
}

#[test]
fn corruption_is_counted_as_fcs_errors_at_the_receiver_not_as_loss() {
    let r = &run("corruption.toml")[0];
    all_done(r);
    let sent = port(r, "sw0", 0).prio[3].tx_packets;
    let h0 = port(r, "h0", 0);
    assert_eq!(h0.errors.rx_crc_errors, sent / 100);
    assert!(h0.errors.rx_crc_errors > 0);
    assert_eq!(h0.prio[3].rx_packets, sent - sent / 100);
    assert_eq!(r.summary.drops, h0.errors.rx_crc_errors);
    assert!(r
        .ports
        .iter()
        .all(|p| p.fault_drops == 0 && p.rx_discards == 0));
    assert!(r.summary.retransmitted_packets > 0);
    let dump = ethtool_dump(h0, &[3]);
    assert!(
        dump.contains(&format!("     rx_crc_errors_phy: {}\n", sent / 100)),
        "{dump}"
    );
}

#[test]
fn random_link_loss_is_counted_at_the_sender_not_at_the_receiver() {
    let r = &run("link-loss.toml")[0];
    all_done(r);
    let lost = port(r, "sw0", 0).fault_drops;
    assert!(lost > 0);
    assert_eq!(r.summary.drops, lost);
    assert_eq!(port(r, "h0", 0).errors, Default::default());
}

#[test]
fn an_mtu_mismatch_is_counted_as_oversize_at_the_port() {
    let res = run("mtu-mismatch.toml");
    let (bad, fixed) = (&res[0], &res[1]);
    let p1 = port(bad, "sw0", 1);
    // Every frame h1 sent is a 4 KB data frame, every one refused.
    assert_eq!(p1.errors.rx_oversize, port(bad, "h1", 0).prio[3].tx_packets);
    assert!(p1.errors.rx_oversize > 0);
    assert_eq!(p1.rx_discards, 0, "not a buffer drop");
    assert!(bad.flows[0].failed);
    assert_eq!(bad.nics.iter().map(|n| n.req_cqe_error).sum::<u64>(), 1);
    all_done(fixed);
    assert_eq!(port(fixed, "sw0", 1).errors.rx_oversize, 0);
    let dump = ethtool_dump(p1, &[3]);
    assert!(dump.contains(&format!(
        "     rx_oversize_pkts_phy: {}\n",
        p1.errors.rx_oversize
    )));
}

#[test]
fn pfc_off_on_one_port_drops_that_ports_traffic_only() {
    let res = run("pfc-off-port.toml");
    let (bad, healthy) = (&res[0], &res[1]);
    all_done(bad);
    let p1 = port(bad, "sw0", 1);
    assert!(p1.prio[3].rx_discards > 0);
    assert_eq!(p1.prio[3].rx_buf_discard, 0, "lossy there: plain drops");
    assert_eq!(p1.prio[3].tx_pause, 0, "no PAUSE from a port without PFC");
    for p in [2, 3] {
        let x = port(bad, "sw0", p);
        assert_eq!(x.rx_discards, 0);
        assert!(x.prio[3].tx_pause > 0);
    }
    assert_eq!(healthy.summary.drops, 0);
    // Each port records the PFC priorities in force, and its dump prints
    // pause rows for those only: none on the port with PFC off.
    assert_eq!(p1.pfc_priorities.as_deref(), Some(&[][..]));
    assert_eq!(
        port(bad, "sw0", 2).pfc_priorities.as_deref(),
        Some(&[3u8][..])
    );
    assert_eq!(
        port(bad, "h1", 0).pfc_priorities.as_deref(),
        Some(&[3u8][..])
    );
    assert_eq!(
        port(healthy, "sw0", 1).pfc_priorities.as_deref(),
        Some(&[3u8][..])
    );
    let dir = std::env::temp_dir().join(format!("rocelab-pfc-off-{}", std::process::id()));
    sim::stats::write_counter_dumps(&dir, bad, &[3]).unwrap();
    let switches = std::fs::read_to_string(dir.join(sim::stats::SWITCHES_FILE)).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let sections = sim::stats::bundle_sections(&switches).expect("a bundle of dumps");
    let dump = |name: &str| {
        sections
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.clone())
            .unwrap_or_else(|| panic!("no {name} in {}", sim::stats::SWITCHES_FILE))
    };
    let (p1_dump, p2_dump) = (dump("sw0-p1.ethtool.txt"), dump("sw0-p2.ethtool.txt"));
    assert!(!p1_dump.contains("prio3_pause"), "{p1_dump}");
    assert!(p2_dump.contains("\n     tx_prio3_pause: "), "{p2_dump}");
}

#[test]
fn roce_on_the_unprotected_priority_drops_under_incast_while_the_protected_does_not() {
    let res = run("priority-mismatch.toml");
    let (bad, healthy) = (&res[0], &res[1]);
    all_done(bad);
    let p1 = port(bad, "sw0", 1);
    assert!(p1.prio[0].rx_discards > 0, "{p1:?}");
    assert!(p1.prio[3].rx_packets > 0, "h1 marked priority 3");
    assert!(port(bad, "sw0", 0).prio[0].tx_packets > 0);
    for p in ports_of(bad, "sw0") {
        assert_eq!(p.prio[3].rx_discards, 0, "{p:?}");
    }
    assert_eq!(bad.summary.drops, p1.prio[0].rx_discards);
    assert_eq!(healthy.summary.drops, 0);
}

#[test]
fn ecn_off_on_one_switch_silences_it_and_pfc_does_the_work() {
    let res = run("ecn-off-switch.toml");
    let (bad, healthy) = (&res[0], &res[1]);
    all_done(bad);
    let marks = |r: &RunResult| ports_of(r, "leaf0").map(|p| p.ecn_marked).sum::<u64>();
    assert_eq!(marks(bad), 0);
    assert!(marks(healthy) > 0);
    // The switches' effective ECN settings after the override: none on
    // leaf0 in the faulty variant, the scenario's prio3 thresholds
    // elsewhere and in `healthy`.
    let ecn = |r: &RunResult, node: &str| port(r, node, 0).ecn.clone().unwrap();
    assert!(ecn(bad, "leaf0").is_empty());
    let on = ecn(bad, "leaf1");
    assert_eq!(on.len(), 1);
    assert_eq!(
        (on[0].priority, on[0].kmin_bytes, on[0].kmax_bytes),
        (3, 20_000, 200_000)
    );
    assert_eq!(ecn(healthy, "leaf0"), on);
    assert_eq!(port(bad, "h0", 0).ecn, None, "NICs do not mark");
    assert!(bad.summary.pause_frames_sent > healthy.summary.pause_frames_sent);
    assert!(bad.summary.cnps_sent < healthy.summary.cnps_sent);
}

#[test]
fn headroom_too_small_drops_on_the_lossless_priority() {
    let res = run("headroom-too-small.toml");
    let (bad, healthy) = (&res[0], &res[1]);
    all_done(bad);
    for p in 1..=3 {
        let x = port(bad, "sw0", p);
        assert!(x.prio[3].rx_buf_discard > 0, "{x:?}");
        assert_eq!(x.prio[3].rx_buf_discard, x.prio[3].rx_discards);
        assert!(x.max_headroom_bytes <= 2_000);
        let dump = ethtool_dump(x, &[3]);
        assert!(dump.contains(&format!(
            "     rx_prio3_buf_discard: {}\n",
            x.prio[3].rx_buf_discard
        )));
    }
    assert_eq!(healthy.summary.drops, 0);
    assert!(ports_of(healthy, "sw0").all(|p| p.prio[3].rx_buf_discard == 0));
}

#[test]
fn a_buffer_too_small_pauses_at_once_without_drops() {
    let res = run("buffer-too-small.toml");
    let (bad, healthy) = (&res[0], &res[1]);
    all_done(bad);
    assert_eq!(bad.summary.drops, 0);
    assert!(
        bad.summary.pause_frames_sent > 10 * healthy.summary.pause_frames_sent.max(1),
        "{} vs {}",
        bad.summary.pause_frames_sent,
        healthy.summary.pause_frames_sent
    );
    assert!(port(bad, "sw0", 0).max_queue_bytes < port(healthy, "sw0", 0).max_queue_bytes);
}

/// A scenario in a scratch directory with the star topology.
fn scratch_scenario(tag: &str, text: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-faults-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(repo().join("topologies/star-4.toml"), dir.join("star.toml")).unwrap();
    let path = dir.join("s.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn a_timed_nic_override_slows_the_receiver_only_inside_its_window() {
    let path = scratch_scenario(
        "timed",
        "topology = \"star.toml\"\n\
         [[override]]\nnodes = \"h0\"\nnic.rx_drain_rate = \"25Gbps\"\nstart = \"100us\"\nend = \"200us\"\n\
         [[workload]]\nkind = \"perftest\"\nsrc = \"h1\"\ndst = \"h0\"\nsize = \"4MB\"\n",
    );
    let s = scenario::load(&path).unwrap();
    let r = &run_all(&s)[0];
    all_done(r);
    let held = r
        .pauses
        .iter()
        .find(|p| p.node == "sw0" && p.port == 0)
        .expect("sw0 was paused by h0");
    assert!(!held.intervals.is_empty());
    for &(a, b) in &held.intervals {
        assert!(a >= 100_000_000, "{a}");
        // The buffer filled in the window drains at line rate after it.
        assert!(b <= 210_000_000, "{b}");
    }
}

#[test]
fn a_timed_switch_threshold_stops_pausing_only_inside_its_window() {
    // 3:1 incast with XOFF at 100 KB per ingress; from 100 us to 300 us
    // the switch allows 2 MB, more than an ingress gathers in 200 us
    // (100 - 33 Gbit/s for 200 us: 1.7 MB).
    let path = scratch_scenario(
        "threshold",
        "topology = \"star.toml\"\n\
         [fabric.pfc]\nthreshold = { mode = \"static\", xoff = \"100KB\", xon = \"50KB\" }\n\
         [[override]]\nnodes = \"sw0\"\n\
         fabric.pfc.threshold = { mode = \"static\", xoff = \"2MB\", xon = \"1900KB\" }\n\
         start = \"100us\"\nend = \"300us\"\n\
         [[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsize = \"4MB\"\n",
    );
    let s = scenario::load(&path).unwrap();
    let r = &run_all(&s)[0];
    all_done(r);
    assert_eq!(r.summary.drops, 0);
    let held: Vec<(u64, u64)> = r
        .pauses
        .iter()
        .filter(|p| p.peer == "sw0" && ["h1", "h2", "h3"].contains(&p.node.as_str()))
        .flat_map(|p| p.intervals.iter().copied())
        .collect();
    assert!(held.iter().any(|&(a, _)| a < 100_000_000), "paused before");
    assert!(held.iter().any(|&(a, _)| a >= 300_000_000), "paused after");
    for &(a, b) in &held {
        // Held ingresses resume at their next departure after 100 us (plus
        // the PFC response time); none pauses again before 300 us.
        assert!(b <= 105_000_000 || a >= 300_000_000, "held {a}..{b} ps");
    }
}

#[test]
fn overrides_layer_and_patterns_select_elements() {
    let path = scratch_scenario(
        "layers",
        "topology = \"star.toml\"\n\
         [fabric.buffer]\nsize = \"4MB\"\n\
         [[override]]\nnodes = \"sw*\"\nfabric.pfc.threshold = { mode = \"static\", xoff = \"100KB\", xon = \"50KB\" }\n\
         [[override]]\nnodes = \"sw0\"\nports = [2, 3]\nfabric.pfc.enabled = false\n\
         [[override]]\nnodes = [\"h1*\", \"h2\"]\nnic.rx_drain_rate = \"10Gbps\"\n\
         [[workload]]\nkind = \"perftest\"\nsrc = \"h1\"\ndst = \"h0\"\nsize = \"4KB\"\n",
    );
    let s = scenario::load(&path).unwrap();
    let o = &s.variants[0].config.overrides;
    use sim::config::OverrideSetting;
    let fabric = |node: &str, port: Option<u16>| {
        o.iter()
            .find_map(|e| match &e.setting {
                OverrideSetting::Fabric(f) if e.node == node && e.port == port => Some(f),
                _ => None,
            })
            .unwrap()
    };
    // The switch override keeps the global buffer; the port override
    // keeps the switch's threshold.
    let sw = fabric("sw0", None);
    assert_eq!(sw.buffer.size.bytes(), 4_000_000);
    let p2 = fabric("sw0", Some(2));
    assert!(!p2.pfc.enabled);
    assert_eq!(p2.pfc.threshold, sw.pfc.threshold);
    let hosts: Vec<&str> = o
        .iter()
        .filter(|e| matches!(e.setting, OverrideSetting::Nic(_)))
        .map(|e| e.node.as_str())
        .collect();
    assert_eq!(hosts, ["h1", "h2"]);
}

#[test]
fn bad_fault_and_override_entries_name_file_line_and_key() {
    let base = "topology = \"star.toml\"\n";
    let w = "[[workload]]\nkind = \"perftest\"\nsrc = \"h1\"\ndst = \"h0\"\nsize = \"4KB\"\n";
    let cases: Vec<(String, &str, &str, usize)> = vec![
        // (text, key, words, line)
        (format!("{base}[[faults]]\nkind = \"link-dwn\"\n{w}"), "faults[0].kind", "expected one of", 3),
        (format!("{base}[[faults]]\nkind = \"link-down\"\nfrom = \"sw0\"\nto = \"h9\"\n{w}"), "faults[0].to", "\"h9\"", 2),
        (format!("{base}[[faults]]\nkind = \"link-down\"\nfrom = \"h1\"\nto = \"h2\"\n{w}"), "faults[0].to", "no link joins", 2),
        (format!("{base}{w}[[faults]]\nkind = \"pause-storm\"\nnode = \"h0\"\nrate = \"1Gbps\"\n"), "faults[0].rate", "not a key of a `pause-storm` fault", 7),
        (format!("{base}[[faults]]\nkind = \"slow-receiver\"\nnode = \"sw0\"\nrate = \"1Gbps\"\n{w}"), "faults[0].node", "expected a host", 2),
        (format!("{base}[[faults]]\nkind = \"mtu\"\nnode = \"sw0\"\nport = 7\nmtu = 1500\n{w}"), "faults[0].port", "has ports 0-3", 2),
        (format!("{base}[[faults]]\nkind = \"mtu\"\nnode = \"nope\"\nmtu = 1500\n{w}"), "faults[0].node", "\"nope\"", 2),
        (format!("{base}[[faults]]\nkind = \"link-flap\"\nfrom = \"sw0\"\nto = \"h0\"\nperiod = \"10us\"\ndown_for = \"1us\"\n{w}"), "faults[0].end", "needs `end`", 2),
        (format!("{base}[[faults]]\nkind = \"corruption\"\nfrom = \"sw0\"\nto = \"h0\"\nprobability = 1.5\n{w}"), "faults[0].probability", "probability", 2),
        (format!("{base}[[faults]]\nfrom = \"sw0\"\nto = \"h0\"\nloss = 0.1\nstart = \"2us\"\nend = \"1us\"\n{w}"), "faults[0].end", "expected end > start", 2),
        (format!("{base}[[faults]]\nkind = \"static-route\"\nnode = \"sw0\"\ndest = \"h9\"\nvia = \"h1\"\n{w}"), "faults[0].dest", "\"h9\": expected the name of a node", 2),
        (format!("{base}[[faults]]\nkind = \"static-route\"\nnode = \"sw0\"\ndest = \"h1\"\nvia = \"nope\"\n{w}"), "faults[0].via", "\"nope\"", 2),
        (format!("{base}[[faults]]\nkind = \"static-route\"\nnode = \"h0\"\ndest = \"h1\"\nvia = \"sw0\"\n{w}"), "faults[0].node", "expected a switch", 2),
        (format!("{base}[[faults]]\nkind = \"static-route\"\nnode = \"sw0\"\ndest = \"sw0\"\nvia = \"h1\"\n{w}"), "faults[0].dest", "expected a host", 2),
        (format!("{base}[[faults]]\nkind = \"static-route\"\nnode = \"sw0\"\ndest = \"h1\"\nvia = \"sw0\"\n{w}"), "faults[0].via", "expected a neighbour", 2),
        (format!("{base}{w}[[faults]]\nkind = \"static-route\"\nnode = \"sw0\"\ndest = \"h1\"\n"), "faults[0].via", "needs `via`", 7),
        (format!("{base}[[override]]\nnodes = \"leaf*\"\nfabric.pfc.enabled = false\n{w}"), "override[0].nodes", "\"leaf*\"", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nfabric.pfc.enabeld = false\n{w}"), "override[0].fabric.pfc.enabeld", "unknown field", 4),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nfabric.buffer.size = \"lots\"\n{w}"), "override[0].fabric.buffer.size", "expected", 4),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nports = [9]\nfabric.pfc.enabled = false\n{w}"), "override[0].ports", "has ports 0-3", 2),
        (format!("{base}[[override]]\nnodes = \"h0\"\nfabric.pfc.enabled = false\n{w}"), "override[0].nodes", "is a host", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nnic.mtu = 1024\n{w}"), "override[0].nodes", "is a switch", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\n{w}"), "override[0]", "exactly one of `fabric` and `nic`", 2),
        (format!("{base}[[override]]\nnodes = \"h0\"\nnic.rx_xon = \"300KB\"\n{w}"), "override[0].nic.rx_xoff", "rx_xon <= rx_xoff", 2),
        (format!("{base}[[override]]\nnodes = \"h0\"\nnic.mtu = 1024\nstart = \"1us\"\n{w}"), "override[0].nic", "during a run", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nports = [1]\nfabric.buffer.size = \"1MB\"\n{w}"), "override[0].fabric.buffer", "whole switch", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nfabric.buffer.size = \"1MB\"\nstart = \"1us\"\n{w}"), "override[0].fabric.buffer", "carved once", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nfabric.pfc.headroom = {{ mode = \"fixed\", size = \"10KB\" }}\nstart = \"1us\"\n{w}"), "override[0].fabric.pfc.headroom", "during a run", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nports = [1]\nfabric.pfc.threshold = {{ mode = \"static\", xoff = \"1MB\", xon = \"1KB\" }}\n{w}"), "override[0].fabric.pfc.threshold", "whole switch", 2),
        (format!("{base}[[override]]\nnodes = \"sw0\"\nfabric.pfc.quanta = 100\n{w}"), "override[0].fabric.pfc.quanta", "every switch", 2),
        (format!("{base}[[override]]\nnodes = \"h1\"\nnic.priority = 1\n{w}"), "override[0].nic.priority", "workload", 2),
        (format!("{base}[[override]]\nnodes = \"h0\"\nnic.rx_drain_rate = \"1Gbps\"\nstart = \"1us\"\nend = \"5us\"\n[[override]]\nnodes = \"h0\"\nnic.rx_drain_rate = \"2Gbps\"\nstart = \"4us\"\n{w}"), "override[1].start", "overlaps override[0]", 7),
    ];
    for (i, (text, key, words, line)) in cases.iter().enumerate() {
        let path = scratch_scenario(&format!("bad{i}"), text);
        let e = scenario::load(&path).unwrap_err();
        let shown = e.to_string();
        assert_eq!(e.key.as_deref(), Some(*key), "case {i}: {shown}");
        assert!(shown.contains(words), "case {i}: {shown}");
        assert_eq!(e.position.map(|p| p.0), Some(*line), "case {i}: {shown}");
        assert!(
            shown.starts_with(&format!("{}:{line}:", path.display())),
            "case {i}: {shown}"
        );
    }
}
