//! rocelab's write latency and bandwidth against this host's raw UDP limits,
//! measured in the same run.
//!
//! `cargo bench -p verbs-emu --bench udp` prints:
//!
//! * raw UDP: busy-poll ping-pong RTT of 64-byte datagrams, and the rate of
//!   4 KiB segments streamed with GSO and received with GRO;
//! * raw UDP streaming the datagrams write_bw 64 KiB sends (the FIRST packet
//!   alone, longer by its RETH, then the other 15 packets as one GSO run),
//!   payload rate: the share of the raw stream that RoCE's packet
//!   boundaries leave before any protocol work;
//! * rocelab perftest write_lat (8 B, t_typical) and write_bw (64 KiB and
//!   1 MiB), server and client in two threads of this process over
//!   loopback;
//! * the ratios against the targets: write_lat <= 1.2 x half the raw RTT,
//!   write_bw >= 80 % of the raw streaming rate;
//! * write_bw 64 KiB with DCQCN on (`--cc dcqcn`, firmware preset at the
//!   100 Gbit/s line rate loopback gets) against DCQCN off, the two run
//!   back to back with their order alternating across rounds: the cost of
//!   congestion control on an uncongested path (target >= 0.95 x); and
//!   DCQCN held at a 4 Gbit/s line rate, the payload rate against what
//!   4 Gbit/s of wire leaves (the pacer's precision).
//!
//! * small messages (`--only small`): rocelab write_bw 8 B (message rate,
//!   target >= 1 M messages/s) and write_lat 8 B (t_typical), beside UCX's
//!   `ucx_perftest` over TCP in the same round (`tag_bw` and `tag_lat`,
//!   8 B, `UCX_TLS=tcp,self`, where installed): the ratios write_lat /
//!   tag_lat (target <= 0.8) and write_bw's rate / tag_bw's. write_lat
//!   runs between two processes, as UCX's does and as perftest's users run
//!   it (the server is this bench re-executed with `--perftest-server`);
//!   beside it, the raw UDP floor of RC's hop (the WRITE and the ACK of
//!   the peer's in one GSO run) and what rocelab adds above it.
//!
//! The parts run in rounds (`--rounds N`, default 3; `--quick`: one short
//! round): each round measures the baselines right before the figures they
//! scale, a table shows every round, and the verdicts take the median of
//! the rounds' ratios, so that a host whose speed drifts between minutes
//! moves both sides of a ratio. `--only raw,lat,bw64,bw1m,dcqcn` picks
//! parts (each with the baseline it is scaled by).

use std::net::Ipv4Addr;
use std::time::Duration;

use verbs_emu::bench::{
    load_average, median, raw_pingpong, raw_pingpong_shape, raw_stream, raw_stream_of,
    ucx_perftest_tcp,
};
use verbs_emu::cc::CcSpec;
use verbs_emu::perftest::{self, Config, ResultRow, Test};
use verbs_emu::wire::{bth, icrc, reth};

fn perftest_pair(test: Test, port: u16, size: u64, iters: u64) -> ResultRow {
    perftest_pair_cc(test, port, size, iters, CcSpec::default())
}

/// The server side's configuration of `test` on `port`: `size` bytes,
/// `iters` iterations, Gbit/s units (the client's adds the server).
fn server_config(test: Test, port: u16, size: u64, iters: u64) -> Config {
    let mut c = Config::new(test);
    c.port = port;
    c.size = Some(size);
    c.iters = Some(iters);
    c.report_gbits = true;
    c
}

/// Both sides with the congestion control `cc`.
fn perftest_pair_cc(test: Test, port: u16, size: u64, iters: u64, cc: CcSpec) -> ResultRow {
    let mut server = server_config(test, port, size, iters);
    server.cc = cc;
    let mut client = server.clone();
    client.server = Some("127.70.0.1".into());
    // Named threads, so that a profile tells the two sides apart.
    let s = std::thread::Builder::new()
        .name("perftest-server".into())
        .spawn(move || perftest::run(&server))
        .expect("spawn server");
    std::thread::sleep(Duration::from_millis(200));
    let c = std::thread::Builder::new()
        .name("perftest-client".into())
        .spawn(move || perftest::run(&client))
        .expect("spawn client");
    let rows = c.join().expect("client thread").expect("perftest client");
    s.join().expect("server thread").expect("perftest server");
    rows.into_iter().next().expect("one result row")
}

/// The server side of [`perftest_pair_procs`], run in a child process of
/// this bench: `--perftest-server TEST PORT SIZE ITERS`.
fn perftest_server_child(args: &[String]) -> ! {
    let [test, port, size, iters] = args else {
        panic!("--perftest-server TEST PORT SIZE ITERS, got {args:?}");
    };
    let server = server_config(
        test.parse().expect("a perftest test"),
        port.parse().expect("a port"),
        size.parse().expect("a size"),
        iters.parse().expect("an iteration count"),
    );
    match perftest::run(&server) {
        Ok(_) => std::process::exit(0),
        Err(e) => {
            eprintln!("perftest server: {e}");
            std::process::exit(1)
        }
    }
}

/// `test` between two processes, as perftest's users and UCX's
/// `ucx_perftest` run: the server in a child process of this bench, the
/// client here.
fn perftest_pair_procs(test: Test, port: u16, size: u64, iters: u64) -> ResultRow {
    let exe = std::env::current_exe().expect("this bench's path");
    let mut child = std::process::Command::new(exe)
        .arg("--perftest-server")
        .args([
            test.name().to_string(),
            port.to_string(),
            size.to_string(),
            iters.to_string(),
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("spawn the perftest server");
    std::thread::sleep(Duration::from_millis(300));
    let mut client = server_config(test, port, size, iters);
    client.server = Some("127.70.0.1".into());
    let rows = perftest::run(&client).expect("perftest client");
    let status = child.wait().expect("perftest server");
    assert!(status.success(), "perftest server: {status}");
    rows.into_iter().next().expect("one result row")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(i) = args.iter().position(|a| a == "--perftest-server") {
        perftest_server_child(&args[i + 1..]);
    }
    let quick = args.iter().any(|a| a == "--quick");
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    // `--only PART[,PART...]` (raw, lat, bw64, bw1m, dcqcn, small) runs those parts
    // with their baselines, for profiling; the others say "not measured".
    let only = value("--only");
    let run = |part: &str| {
        only.as_deref()
            .map_or(true, |o| o.split(',').any(|p| p == part))
    };
    // `--rounds N`: each round measures every part once, baseline next to
    // the figure it scales, so that a host whose speed drifts (a shared
    // VM) shifts both; the verdict takes the median of the rounds' ratios.
    let rounds: usize = value("--rounds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { 1 } else { 3 })
        .max(1);
    println!("load average before: {}", load_average());
    let a = Ipv4Addr::new(127, 71, 0, 1);
    let b = Ipv4Addr::new(127, 71, 0, 2);
    let mut table: Vec<Round> = Vec::new();
    for round in 0..rounds {
        let port = 18760 + 4 * round as u16;
        let mut r = Round::default();
        if run("raw") || run("lat") {
            let mut rtts =
                raw_pingpong(a, b, 64, if quick { 2000 } else { 10000 }).expect("raw ping-pong");
            r.rtt_us = median(&mut rtts) as f64 / 1000.0;
        }
        if run("lat") {
            r.lat_us =
                match perftest_pair(Test::WriteLat, port, 8, if quick { 2000 } else { 10000 }) {
                    ResultRow::Lat { stats, .. } => stats.typical,
                    _ => f64::NAN,
                };
        }
        if run("raw") || run("bw64") || run("bw1m") {
            r.raw_gbps =
                raw_stream(a, b, 4096, Duration::from_secs(1)).expect("raw stream") * 8.0 / 1e9;
        }
        if run("bw64") {
            // The same stream cut as write_bw 64 KiB cuts it at a 4 KiB
            // MTU: the FIRST packet (with its RETH) alone, the 14 MIDDLE
            // packets and the LAST in one GSO run; payload bytes only.
            let middle = bth::HEADER_LEN + 4096 + icrc::ICRC_LEN;
            let first = middle + reth::HEADER_LEN;
            let shape = [(0, first), (middle, 15 * middle)].repeat(4);
            let wire_bytes = (first + 15 * middle) as f64;
            r.shape64_gbps = raw_stream_of(a, b, &shape, Duration::from_secs(1))
                .expect("raw stream in 64 KiB shape")
                * 65536.0
                / wire_bytes
                * 8.0
                / 1e9;
            r.bw64 = bw(perftest_pair(
                Test::WriteBw,
                port + 1,
                65536,
                if quick { 2000 } else { 20000 },
            ));
        }
        if run("bw1m") {
            r.bw1m = bw(perftest_pair(
                Test::WriteBw,
                port + 2,
                1 << 20,
                if quick { 200 } else { 2000 },
            ));
        }
        if run("dcqcn") {
            let iters = if quick { 2000 } else { 20000 };
            let dcqcn = CcSpec::parse("dcqcn").expect("preset");
            // Alternate which side of the ratio runs first.
            for on in [round % 2 == 1, round % 2 == 0] {
                let cc = if on { dcqcn } else { CcSpec::default() };
                let g = bw(perftest_pair_cc(Test::WriteBw, port + 3, 65536, iters, cc));
                if on {
                    r.bw64_dcqcn = g;
                } else {
                    r.bw64_off = g;
                }
            }
            let mut paced = dcqcn;
            paced.set_param("line_rate=4Gbps").expect("a rate");
            r.bw64_paced = bw(perftest_pair_cc(
                Test::WriteBw,
                port + 3,
                65536,
                iters / 4,
                paced,
            ));
        }
        if run("small") {
            let iters = if quick { 20000 } else { 100000 };
            let t = Duration::from_secs(120);
            let ucx_port = 13400 + 2 * round as u16;
            if let Some(u) = ucx_perftest_tcp("tag_lat", 8, iters / 5, ucx_port, t) {
                r.ucx_lat_us = u.median_us;
            }
            if r.rtt_us.is_nan() {
                // The floor of any latency over UDP sockets on this host.
                let mut rtts = raw_pingpong(a, b, 64, iters as usize / 10).expect("raw ping-pong");
                r.rtt_us = median(&mut rtts) as f64 / 1000.0;
            }
            // RC's shape of a ping-pong hop: the 8-byte WRITE and the
            // ACK of the peer's in one GSO run.
            let wa = bth::HEADER_LEN + reth::HEADER_LEN + 8 + icrc::ICRC_LEN;
            let ack = bth::HEADER_LEN + 4 + icrc::ICRC_LEN;
            let mut rtts = raw_pingpong_shape(a, b, &[(wa, wa + ack)], iters as usize / 10)
                .expect("raw ping-pong in RC's shape");
            r.rc_floor_us = median(&mut rtts) as f64 / 2000.0;
            r.small_lat_us = match perftest_pair_procs(Test::WriteLat, port + 3, 8, iters / 5) {
                ResultRow::Lat { stats, .. } => stats.typical,
                _ => f64::NAN,
            };
            if let Some(u) = ucx_perftest_tcp("tag_bw", 8, iters, ucx_port + 1, t) {
                r.ucx_rate = u.msg_rate;
            }
            r.small_rate = match perftest_pair(Test::WriteBw, port + 3, 8, iters) {
                ResultRow::Bw { msg_rate, .. } => msg_rate * 1e6,
                _ => f64::NAN,
            };
        }
        table.push(r);
    }

    println!();
    println!("load average after: {}", load_average());
    println!(
        "{:>5} {:>9} {:>10} {:>11} {:>9} {:>14} {:>14} {:>14}",
        "round",
        "raw RTT",
        "write_lat",
        "raw stream",
        "lat/half",
        "64K shape",
        "write_bw 64K",
        "write_bw 1M"
    );
    for (i, r) in table.iter().enumerate() {
        println!(
            "{:>5} {:>6.2} us {:>7.2} us {:>6.2} Gb/s {:>8.3}x {:>6.2} = {:>4.1}% {:>6.2} = {:>4.1}% {:>6.2} = {:>4.1}%",
            i + 1,
            r.rtt_us,
            r.lat_us,
            r.raw_gbps,
            r.lat_ratio(),
            r.shape64_gbps,
            r.shape64_gbps / r.raw_gbps * 100.0,
            r.bw64,
            r.bw64 / r.raw_gbps * 100.0,
            r.bw1m,
            r.bw1m / r.raw_gbps * 100.0
        );
    }
    let med = |f: &dyn Fn(&Round) -> f64| median_f64(table.iter().map(f).collect());
    let rtt_us = med(&|r| r.rtt_us);
    let gbps = med(&|r| r.raw_gbps);
    println!("medians of {rounds} round(s):");
    println!(
        "raw UDP busy-poll ping-pong, 64 B: RTT median {rtt_us:.2} us (half: {:.2} us)",
        rtt_us / 2.0
    );
    println!("raw UDP 4 KiB GSO+GRO stream: {gbps:.2} Gbit/s");
    let ratio_lat = med(&|r| r.lat_ratio());
    println!(
        "rocelab write_lat 8 B t_typical: {:.2} us = {ratio_lat:.3} x half raw RTT (target <= 1.20) {}",
        med(&|r| r.lat_us),
        verdict(ratio_lat, ratio_lat <= 1.2)
    );
    let ceiling = med(&|r| r.shape64_gbps / r.raw_gbps);
    println!(
        "raw UDP in write_bw 64 KiB's datagrams (FIRST alone, then a 15-packet run): {:.2} Gbit/s = {:.1} % of raw stream (what the packet boundaries alone leave)",
        med(&|r| r.shape64_gbps),
        ceiling * 100.0
    );
    if run("dcqcn") {
        println!(
            "{:>5} {:>14} {:>14} {:>8} {:>16}",
            "round", "write_bw off", "DCQCN on", "on/off", "paced at 4 Gb/s"
        );
        for (i, r) in table.iter().enumerate() {
            println!(
                "{:>5} {:>9.2} Gb/s {:>9.2} Gb/s {:>7.3}x {:>11.3} Gb/s",
                i + 1,
                r.bw64_off,
                r.bw64_dcqcn,
                r.bw64_dcqcn / r.bw64_off,
                r.bw64_paced
            );
        }
    }
    let ratio_cc = med(&|r| r.bw64_dcqcn / r.bw64_off);
    println!(
        "rocelab write_bw 64 KiB with DCQCN on, uncongested: {:.2} Gbit/s against {:.2} off = {ratio_cc:.3} x (target >= 0.95) {}",
        med(&|r| r.bw64_dcqcn),
        med(&|r| r.bw64_off),
        verdict(ratio_cc, ratio_cc >= 0.95)
    );
    // 64 KiB of payload take 16 packets at a 4 KiB MTU, as the pacer
    // counts them: a BTH each, a RETH on the first, and 46 B of Ethernet,
    // IPv4, UDP and ICRC (transport::WIRE_OVERHEAD).
    let wire64 = 65536.0 + 16.0 * (12.0 + 46.0) + 16.0;
    let want = 4.0 * 65536.0 / wire64;
    let paced = med(&|r| r.bw64_paced);
    println!(
        "rocelab write_bw 64 KiB with DCQCN at a 4 Gbit/s line rate: {paced:.3} Gbit/s of payload = {:.1} % of the {want:.3} Gbit/s 4 Gbit/s of wire carries",
        paced / want * 100.0
    );
    if run("small") {
        println!(
            "{:>5} {:>14} {:>14} {:>8} {:>16} {:>16} {:>8}",
            "round", "write_lat 8B", "UCX tag_lat", "ratio", "write_bw 8B", "UCX tag_bw", "ratio"
        );
        for (i, r) in table.iter().enumerate() {
            println!(
                "{:>5} {:>11.2} us {:>11.2} us {:>7.3}x {:>10.3} Mmsg/s {:>10.3} Mmsg/s {:>7.3}x",
                i + 1,
                r.small_lat_us,
                r.ucx_lat_us,
                r.small_lat_us / r.ucx_lat_us,
                r.small_rate / 1e6,
                r.ucx_rate / 1e6,
                r.small_rate / r.ucx_rate
            );
        }
        let lat = med(&|r| r.small_lat_us / r.ucx_lat_us);
        println!(
            "rocelab write_lat 8 B t_typical: {:.2} us = {lat:.3} x UCX tag_lat over TCP ({:.2} us) (target <= 0.80) {}",
            med(&|r| r.small_lat_us),
            med(&|r| r.ucx_lat_us),
            if lat.is_nan() { "not measured (ucx_perftest missing?)" } else { verdict(lat, lat <= 0.8) }
        );
        let floor = med(&|r| r.rtt_us / 2.0 / r.ucx_lat_us);
        println!(
            "raw UDP busy-poll half RTT (64 B, no RoCE): {:.2} us = {floor:.3} x UCX tag_lat over TCP: the floor of any emulation over UDP sockets on this host",
            med(&|r| r.rtt_us / 2.0),
        );
        let rc_floor = med(&|r| r.rc_floor_us / r.ucx_lat_us);
        println!(
            "raw UDP busy-poll half RTT of RC's hop (8-byte WRITE + ACK, one GSO run, no RoCE processing): {:.2} us = {rc_floor:.3} x UCX tag_lat; rocelab's processing per hop above it: {:.2} us",
            med(&|r| r.rc_floor_us),
            med(&|r| r.small_lat_us - r.rc_floor_us),
        );
        let rate = med(&|r| r.small_rate);
        println!(
            "rocelab write_bw 8 B: {:.3} M messages/s = {:.2} x UCX tag_bw over TCP ({:.3} M/s) (target >= 1 M/s) {}",
            rate / 1e6,
            med(&|r| r.small_rate / r.ucx_rate),
            med(&|r| r.ucx_rate) / 1e6,
            verdict(rate, rate >= 1e6)
        );
    }
    type Pick = fn(&Round) -> f64;
    let parts: [(&str, Pick); 2] = [("64 KiB", |r| r.bw64), ("1 MiB", |r| r.bw1m)];
    for (name, pick) in parts {
        let ratio = med(&|r| pick(r) / r.raw_gbps);
        println!(
            "rocelab write_bw {name}: {:.2} Gbit/s = {:.1} % of raw stream (target >= 80 %) {}",
            med(&|r| pick(r)),
            ratio * 100.0,
            verdict(ratio, ratio >= 0.8)
        );
    }
}

/// One round's figures; NaN where a part was skipped.
struct Round {
    rtt_us: f64,
    lat_us: f64,
    raw_gbps: f64,
    /// Raw UDP in write_bw 64 KiB's datagram shape, payload Gbit/s.
    shape64_gbps: f64,
    bw64: f64,
    bw1m: f64,
    /// write_bw 64 KiB, DCQCN off and on (the cc part's pair).
    bw64_off: f64,
    bw64_dcqcn: f64,
    /// write_bw 64 KiB with DCQCN at a 4 Gbit/s line rate.
    bw64_paced: f64,
    /// write_lat 8 B t_typical (the small part), microseconds.
    small_lat_us: f64,
    /// write_bw 8 B, messages per second.
    small_rate: f64,
    /// UCX tag_lat 8 B over TCP, median one-way latency, microseconds.
    ucx_lat_us: f64,
    /// Raw UDP busy-poll half RTT of RC's hop shape (an 8-byte WRITE and
    /// an ACK in one GSO run), microseconds.
    rc_floor_us: f64,
    /// UCX tag_bw 8 B over TCP, messages per second.
    ucx_rate: f64,
}

impl Default for Round {
    fn default() -> Self {
        Round {
            rtt_us: f64::NAN,
            lat_us: f64::NAN,
            raw_gbps: f64::NAN,
            shape64_gbps: f64::NAN,
            bw64: f64::NAN,
            bw1m: f64::NAN,
            bw64_off: f64::NAN,
            bw64_dcqcn: f64::NAN,
            bw64_paced: f64::NAN,
            small_lat_us: f64::NAN,
            small_rate: f64::NAN,
            ucx_lat_us: f64::NAN,
            rc_floor_us: f64::NAN,
            ucx_rate: f64::NAN,
        }
    }
}

impl Round {
    fn lat_ratio(&self) -> f64 {
        self.lat_us / (self.rtt_us / 2.0)
    }
}

fn bw(row: ResultRow) -> f64 {
    match row {
        ResultRow::Bw { avg, .. } => avg,
        _ => f64::NAN,
    }
}

/// Median of the figures that were measured (NaN when none was).
fn median_f64(mut v: Vec<f64>) -> f64 {
    v.retain(|x| !x.is_nan());
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
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
