//! rocelab's write latency and bandwidth against this host's raw UDP limits,
//! measured in the same run.
//!
//! `cargo bench -p verbs-emu --bench udp` prints:
//!
//! * raw UDP: busy-poll ping-pong RTT of 64-byte datagrams, and the rate of
//!   4 KiB segments streamed with GSO and received with GRO;
//! * rocelab perftest write_lat (8 B, t_typical) and write_bw (64 KiB and
//!   1 MiB), server and client in two threads of this process over
//!   loopback;
//! * the ratios against the targets: write_lat <= 1.2 x half the raw RTT,
//!   write_bw >= 80 % of the raw streaming rate.

use std::net::Ipv4Addr;
use std::time::Duration;

use verbs_emu::bench::{load_average, median, raw_pingpong, raw_stream};
use verbs_emu::perftest::{self, Config, ResultRow, Test};

fn perftest_pair(test: Test, port: u16, size: u64, iters: u64) -> ResultRow {
    let mut server = Config::new(test);
    server.port = port;
    server.size = Some(size);
    server.iters = Some(iters);
    server.report_gbits = true;
    let mut client = server.clone();
    client.server = Some("127.70.0.1".into());
    let s = std::thread::spawn(move || perftest::run(&server));
    std::thread::sleep(Duration::from_millis(200));
    let rows = perftest::run(&client).expect("perftest client");
    s.join().expect("server thread").expect("perftest server");
    rows.into_iter().next().expect("one result row")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    // `--only PART[,PART...]` (raw, lat, bw64, bw1m) runs those parts
    // alone, for profiling; a ratio that needs a skipped part says so.
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1).cloned());
    let run = |part: &str| {
        only.as_deref()
            .map_or(true, |o| o.split(',').any(|p| p == part))
    };
    println!("load average before: {}", load_average());
    let a = Ipv4Addr::new(127, 71, 0, 1);
    let b = Ipv4Addr::new(127, 71, 0, 2);
    let (mut rtt_us, mut gbps) = (f64::NAN, f64::NAN);
    if run("raw") {
        let mut rtts =
            raw_pingpong(a, b, 64, if quick { 2000 } else { 20000 }).expect("raw ping-pong");
        rtt_us = median(&mut rtts) as f64 / 1000.0;
        gbps = raw_stream(a, b, 4096, Duration::from_secs(if quick { 1 } else { 3 }))
            .expect("raw stream")
            * 8.0
            / 1e9;
    }

    let lat = run("lat")
        .then(|| perftest_pair(Test::WriteLat, 18760, 8, if quick { 2000 } else { 20000 }));
    let bw64 = run("bw64").then(|| {
        perftest_pair(
            Test::WriteBw,
            18761,
            65536,
            if quick { 2000 } else { 20000 },
        )
    });
    let bw1m = run("bw1m").then(|| {
        perftest_pair(
            Test::WriteBw,
            18762,
            1 << 20,
            if quick { 200 } else { 2000 },
        )
    });
    let typical = match lat {
        Some(ResultRow::Lat { stats, .. }) => stats.typical,
        _ => f64::NAN,
    };
    let avg = |r: &Option<ResultRow>| match r {
        Some(ResultRow::Bw { avg, .. }) => *avg,
        _ => f64::NAN,
    };
    println!();
    println!("load average after: {}", load_average());
    println!(
        "raw UDP busy-poll ping-pong, 64 B: RTT median {rtt_us:.2} us (half: {:.2} us)",
        rtt_us / 2.0
    );
    println!("raw UDP 4 KiB GSO+GRO stream: {gbps:.2} Gbit/s");
    let ratio_lat = typical / (rtt_us / 2.0);
    println!(
        "rocelab write_lat 8 B t_typical: {typical:.2} us = {ratio_lat:.3} x half raw RTT (target <= 1.20) {}",
        verdict(ratio_lat, ratio_lat <= 1.2)
    );
    for (name, r) in [("64 KiB", &bw64), ("1 MiB", &bw1m)] {
        let g = avg(r);
        let ratio = g / gbps;
        println!(
            "rocelab write_bw {name}: {g:.2} Gbit/s = {:.1} % of raw stream (target >= 80 %) {}",
            ratio * 100.0,
            verdict(ratio, ratio >= 0.8)
        );
    }
}

/// MET or MISSED, or why there is no ratio (a part skipped with `--only`).
fn verdict(ratio: f64, met: bool) -> &'static str {
    if ratio.is_nan() {
        "not measured (--only)"
    } else if met {
        "MET"
    } else {
        "MISSED"
    }
}
