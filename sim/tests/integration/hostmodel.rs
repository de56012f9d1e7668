//! The NIC's host side (`[nic.host]`) and the perftest workload against
//! their closed forms: the PCIe bound from the TLP arithmetic, the
//! message-rate plateau, the window bound, min(wire, PCIe) at large sizes
//! and the latency tests' unloaded latency.

use std::path::Path;

use roce::time::{Duration, Rate};
use sim::hostmodel::{self, PathShape};
use sim::results::{PerftestRecord, RunResult};
use sim::run::{simulate, RunOptions};
use sim::scenario;
use sim::topology::Routes;
use sim::workload::perftest::PerftestTest;

/// Run a scenario given as text (client and server through one switch,
/// links of `rate` and `delay`) and return its result.
fn run(rate: &str, delay: &str, nic: &str, workload: &str) -> RunResult {
    let text = format!(
        "name = \"t\"\n\
         [topology]\nname = \"pair\"\nhosts = [\"client\", \"server\"]\nswitches = [\"sw0\"]\n\
         [topology.defaults]\nrate = \"{rate}\"\ndelay = \"{delay}\"\nmtu = 4096\n\
         [[topology.link]]\na = \"client\"\nb = \"sw0\"\n\
         [[topology.link]]\na = \"server\"\nb = \"sw0\"\n\
         [nic]\n{nic}\n\
         [[workload]]\nkind = \"perftest\"\nsrc = \"client\"\ndst = \"server\"\n{workload}\n"
    );
    let s = scenario::from_str(Path::new("t.toml"), &text).unwrap_or_else(|e| panic!("{e}"));
    let v = &s.variants[0];
    let topo = &s.topologies[v.topology];
    let opts = RunOptions {
        groups: v.groups.clone(),
        workloads: v.workloads.clone(),
        ..v.run_options()
    };
    simulate(topo, &Routes::compute(topo), &v.config, &v.flows, &opts)
        .unwrap()
        .0
}

fn bw(r: &PerftestRecord) -> f64 {
    r.bw_bps().expect("a measured bandwidth")
}

fn within(got: f64, want: f64, tol: f64, what: &str) {
    let err = (got - want).abs() / want;
    assert!(
        err <= tol,
        "{what}: got {got:.4e}, want {want:.4e} ({:.2} % off)",
        err * 100.0
    );
}

/// The params the scenario's `[nic.host]` resolves to.
fn params(nic: &str) -> sim::config::HostParams {
    let doc: toml::Value = toml::from_str(nic).unwrap();
    let host: sim::config::HostConfig = doc["host"].clone().try_into().unwrap();
    host.resolve()
}

fn path(rate: Rate, delay: Duration) -> PathShape {
    PathShape {
        rate,
        links: 2,
        delay,
        mtu: 4096,
    }
}

#[test]
fn pcie_bound_follows_the_tlp_arithmetic() {
    // Gen3: 8 GT/s x 128/130 per lane; Gen4: 16 GT/s. A memory write of
    // MPS 256 bytes costs a 16-byte header, 8 bytes of framing, sequence
    // number and LCRC and 4 bytes of DLLPs; completions a 12-byte header.
    for (gen, width, gt) in [(3u8, 8u8, 8e9), (4, 16, 16e9)] {
        let nic = format!(
            "[host]\nmodel = \"connectx-5\"\npcie_gen = {gen}\npcie_width = {width}\nmax_payload = \"256B\"\nread_completion = \"256B\""
        );
        let p = params(&nic);
        let link = gt * 128.0 / 130.0 * f64::from(width);
        let write = link * 256.0 / (256.0 + 16.0 + 8.0 + 4.0);
        let read = link * 256.0 / (256.0 + 12.0 + 8.0 + 4.0);
        within(p.write_bound_bps(), write, 1e-9, "write bound");
        within(p.read_bound_bps(), read, 1e-9, "read bound");
        if gen == 3 {
            // 56.8 Gbit/s: below a 100G link's payload rate.
            within(write, 56.80e9, 0.001, "Gen3 x8 write bound");
            let r = run(
                "100Gbps",
                "5ns",
                &format!("mtu = 4096\n{}", nic.replace("[host]", "[nic.host]")),
                "test = \"write_bw\"\nsize = \"1MiB\"\niters = 200",
            );
            within(
                bw(&r.perftest[0]),
                write.min(read),
                0.02,
                "Gen3 x8 1 MiB write_bw",
            );
        } else {
            within(write, 227.0e9, 0.005, "Gen4 x16 write bound");
        }
    }
}

#[test]
fn large_messages_reach_min_of_wire_and_pcie() {
    // Gen4 x16 under a 100G link: the wire sets it. Gen3 x8 under 100G:
    // PCIe does.
    for (gen, width) in [(4u8, 16u8), (3, 8)] {
        let nic = format!("mtu = 4096\n[nic.host]\nmodel = \"connectx-6-dx\"\npcie_gen = {gen}\npcie_width = {width}");
        let r = run(
            "100Gbps",
            "5ns",
            &nic,
            "test = \"write_bw\"\nsize = \"4MiB\"\niters = 60",
        );
        let p = params(
            &nic.replace("mtu = 4096\n", "")
                .replace("[nic.host]", "[host]"),
        );
        let l = hostmodel::bw_limits(
            Some(&p),
            PerftestTest::WriteBw,
            4 << 20,
            (1, 128, false),
            false,
            &path(Rate::from_gbps(100), Duration::from_ns(5)),
        );
        let want = l.wire_bps.min(l.pcie_bps.unwrap());
        within(bw(&r.perftest[0]), want, 0.02, "4 MiB write_bw");
        let expect = if gen == 4 {
            hostmodel::Limit::Wire
        } else {
            hostmodel::Limit::Pcie
        };
        assert_eq!(l.limit, expect);
    }
}

#[test]
fn small_messages_plateau_at_the_message_rate() {
    // One QP: its rate (ConnectX-5's default, 4 M/s). Sixteen QPs of a NIC limited to 40 M messages/s:
    // the NIC's.
    for (qps, nic_mpps, want) in [(1u32, 200.0, 4.0e6), (16, 40.0, 40e6)] {
        let nic = format!("[nic.host]\nmodel = \"connectx-5\"\nnic_mpps = {nic_mpps}");
        let r = run(
            "100Gbps",
            "5ns",
            &nic,
            &format!("test = \"write_bw\"\nsize = \"8B\"\niters = 4000\ntx_depth = 512\ncq_mod = 1\nqps_per_pair = {qps}"),
        );
        let rate = r.perftest[0].msg_rate().unwrap();
        within(rate, want, 0.03, &format!("8 B message rate, {qps} QPs"));
        let p = params(&nic.replace("[nic.host]", "[host]"));
        let l = hostmodel::bw_limits(
            Some(&p),
            PerftestTest::WriteBw,
            8,
            (qps, 512, true),
            false,
            &path(Rate::from_gbps(100), Duration::from_ns(5)),
        );
        assert_eq!(l.limit, hostmodel::Limit::MessageRate);
        within(l.msg_bps.unwrap() / 64.0, want, 1e-9, "closed-form rate");
    }
}

#[test]
fn a_shallow_queue_is_bound_by_its_window() {
    // 64 KiB, a few WRs in flight over 10 us cables: depth x size / RTT,
    // far below the wire and PCIe.
    for depth in [1u32, 4] {
        let nic = "[nic.host]\nmodel = \"connectx-5\"".to_string();
        let r = run(
            "100Gbps",
            "10us",
            &nic,
            &format!("test = \"write_bw\"\nsize = \"64KiB\"\niters = 300\ntx_depth = {depth}\ncq_mod = 1"),
        );
        let p = params(&nic.replace("[nic.host]", "[host]"));
        let l = hostmodel::bw_limits(
            Some(&p),
            PerftestTest::WriteBw,
            65536,
            (1, depth, false),
            false,
            &path(Rate::from_gbps(100), Duration::from_us(10)),
        );
        assert_eq!(l.limit, hostmodel::Limit::Window, "{l:?}");
        within(
            bw(&r.perftest[0]),
            l.window_bps,
            0.02,
            &format!("window, depth {depth}"),
        );
    }
}

#[test]
fn latency_tests_match_the_unloaded_path() {
    let nic = "[nic.host]\nmodel = \"connectx-5\"".to_string();
    let p = params(&nic.replace("[nic.host]", "[host]"));
    let shape = path(Rate::from_gbps(100), Duration::from_ns(5));
    for (test, size, inline) in [
        (PerftestTest::WriteLat, 2u64, true),
        (PerftestTest::SendLat, 2, true),
        (PerftestTest::ReadLat, 2, false),
        (PerftestTest::WriteLat, 65536, false),
        (PerftestTest::ReadLat, 65536, false),
    ] {
        let r = run(
            "100Gbps",
            "5ns",
            &nic,
            &format!("test = \"{}\"\nsize = \"{size}B\"\niters = 50", test.name()),
        );
        let rec = &r.perftest[0];
        assert_eq!(rec.latency_samples_ps.len(), 49);
        let mut s = rec.latency_samples_ps.clone();
        s.sort_unstable();
        let typical = s[s.len() / 2] as f64 / f64::from(test.rtt_factor());
        let want = hostmodel::latency(Some(&p), test, size, inline, &shape).as_ps() as f64;
        within(typical, want, 0.02, &format!("{} {size} B", test.name()));
    }
    // Without a host model the latency is the wire's alone.
    let r = run("100Gbps", "5ns", "", "test = \"write_lat\"\niters = 20");
    let mut s = r.perftest[0].latency_samples_ps.clone();
    s.sort_unstable();
    let want = hostmodel::latency(None, PerftestTest::WriteLat, 2, true, &shape).as_ps() as f64;
    within(
        s[s.len() / 2] as f64 / 2.0,
        want,
        0.02,
        "write_lat without a host model",
    );
}

#[test]
fn perftest_keys_are_checked() {
    let text = |w: &str| {
        format!(
            "name = \"t\"\n[topology]\nname = \"p\"\nhosts = [\"a\", \"b\"]\nswitches = [\"s\"]\n\
             [[topology.link]]\na = \"a\"\nb = \"s\"\n[[topology.link]]\na = \"b\"\nb = \"s\"\n\
             [[workload]]\nkind = \"perftest\"\nsrc = \"a\"\ndst = \"b\"\n{w}\n"
        )
    };
    for (w, key) in [
        (
            "test = \"write_bw\"\nall = true\nsize = \"2B\"",
            "workload[0].all",
        ),
        (
            "test = \"write_bw\"\niters = 5\nduration = \"1ms\"",
            "workload[0].duration",
        ),
        ("size = \"1KB\"\niters = 5", "workload[0].iters"),
        (
            "test = \"write_lat\"\nbidirectional = true",
            "workload[0].bidirectional",
        ),
        ("test = \"write_bw\"\ntx_depth = 0", "workload[0].tx_depth"),
    ] {
        let e = scenario::from_str(Path::new("t.toml"), &text(w)).unwrap_err();
        assert_eq!(e.key.as_deref(), Some(key), "{w}: {e}");
    }
    let e = scenario::from_str(
        Path::new("t.toml"),
        &text("test = \"write_bw\"")
            .replace("[[workload]]", "[nic.host]\npcie_gen = 7\n[[workload]]"),
    )
    .unwrap_err();
    assert!(e.to_string().contains("pcie_gen"), "{e}");
}

#[test]
fn a_duration_run_stops_posting_at_its_deadline() {
    let r = run(
        "100Gbps",
        "5ns",
        "[nic.host]\nmodel = \"connectx-5\"",
        "test = \"write_bw\"\nsize = \"64KiB\"\nduration = \"200us\"",
    );
    let rec = &r.perftest[0];
    assert!(rec.completed);
    let secs = rec.seconds().unwrap();
    assert!((200e-6..230e-6).contains(&secs), "{secs}");
    // About 97 Gbit/s for 200 us: some 37 000 000 bytes.
    within(bw(rec), 97e9, 0.05, "write_bw -D");
}
