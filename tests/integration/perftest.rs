//! `rocelab perftest` as two processes on loopback, as a user runs it.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn rocelab() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocelab"))
}

fn wait(mut c: Child, limit: Duration) -> Output {
    let end = Instant::now() + limit;
    loop {
        if c.try_wait().unwrap().is_some() {
            return c.wait_with_output().unwrap();
        }
        if Instant::now() > end {
            let _ = c.kill();
            let o = c.wait_with_output().unwrap();
            panic!(
                "timed out\nstdout:\n{}\nstderr:\n{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Run server and client with the same flags; the client targets
/// `server_ip`. Returns both outputs.
fn run_pair(test: &str, tcp_port: u16, server_ip: &str, flags: &[&str]) -> (Output, Output) {
    run_pair_with(test, tcp_port, server_ip, flags, &[], &[])
}

/// [`run_pair`] with flags of the server's and the client's own.
fn run_pair_with(
    test: &str,
    tcp_port: u16,
    server_ip: &str,
    flags: &[&str],
    server_flags: &[&str],
    client_flags: &[&str],
) -> (Output, Output) {
    let spawn = |extra: &[&str]| {
        rocelab()
            .arg("perftest")
            .arg(test)
            .args(["-p", &tcp_port.to_string()])
            .args(flags)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let server = spawn(server_flags);
    std::thread::sleep(Duration::from_millis(200));
    let client = spawn(&[client_flags, &[server_ip]].concat());
    let c = wait(client, Duration::from_secs(120));
    let s = wait(server, Duration::from_secs(30));
    (s, c)
}

fn text(o: &Output) -> String {
    format!(
        "{}\n--- stderr ---\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The numbers of the result row after the table header.
fn bw_row(out: &str) -> (u64, u64, f64, f64, f64) {
    let lines: Vec<&str> = out.lines().collect();
    let h = lines
        .iter()
        .position(|l| l.starts_with(" #bytes     #iterations    BW peak[MB/sec]"))
        .unwrap_or_else(|| panic!("no BW header in:\n{out}"));
    let row = lines[h + 1..]
        .iter()
        .find(|l| !l.starts_with(" WARNING"))
        .unwrap();
    let f: Vec<&str> = row.split_whitespace().collect();
    (
        f[0].parse().unwrap(),
        f[1].parse().unwrap(),
        f[2].parse().unwrap(),
        f[3].parse().unwrap(),
        f[4].parse().unwrap(),
    )
}

#[test]
fn bandwidth_tests_verify_every_byte_under_loss_reorder_and_duplication() {
    for (i, test) in ["write_bw", "send_bw", "read_bw"].into_iter().enumerate() {
        let ip = format!("127.61.{i}.1");
        let (s, c) = run_pair(
            test,
            18620 + i as u16,
            &ip,
            &[
                "-s",
                "16384",
                "-n",
                "300",
                "--loss",
                "0.02",
                "--reorder",
                "0.01",
                "--duplicate",
                "0.01",
                "--verify",
                "--seed",
                "3",
            ],
        );
        assert!(s.status.success(), "{test} server failed:\n{}", text(&s));
        assert!(c.status.success(), "{test} client failed:\n{}", text(&c));
        let (size, iters, _peak, avg, rate) = bw_row(&String::from_utf8_lossy(&c.stdout));
        assert_eq!((size, iters), (16384, 300), "{test}");
        assert!(avg > 0.0 && rate > 0.0, "{test}: {}", text(&c));
        // The server prints a table too.
        let (ssize, siters, ..) = bw_row(&String::from_utf8_lossy(&s.stdout));
        assert_eq!((ssize, siters), (16384, 300));
        // The side that checks says how much it checked; the other says
        // who checks.
        let checker = if test == "read_bw" { &c } else { &s };
        assert!(
            String::from_utf8_lossy(&checker.stdout).contains(&format!(
                " Verified: 300 messages, {} bytes checked byte for byte",
                300 * 16384
            )),
            "{test}: {}",
            text(checker)
        );
        // Each side injected faults on what it sent and says what. The
        // data moves client -> server for WRITE and SEND (server -> client
        // for READ): its sender lost packets. The client, the requester,
        // says that its transport retransmitted (requests, or READs whose
        // responses were lost).
        let number_after = |side: &Output, prefix: &str| -> u64 {
            let out = String::from_utf8_lossy(&side.stdout);
            let l = out
                .lines()
                .find_map(|l| l.strip_prefix(prefix))
                .unwrap_or_else(|| panic!("{test}: no {prefix:?} in:\n{out}"));
            l.split([' ', ','])
                .find(|w| !w.is_empty())
                .and_then(|n| n.parse().ok())
                .unwrap_or_else(|| panic!("{test}: no number after {prefix:?} in {l}"))
        };
        let data_sender = if test == "read_bw" { &s } else { &c };
        let dropped = number_after(data_sender, " Faults injected (packets sent): dropped ");
        assert!(dropped > 0, "{test}: {}", text(data_sender));
        for side in [&s, &c] {
            number_after(side, " Faults injected (packets sent): dropped ");
        }
        let retrans = number_after(&c, " Transport: ");
        let out = String::from_utf8_lossy(&c.stdout);
        let line = out.lines().find(|l| l.starts_with(" Transport:")).unwrap();
        assert!(
            line.contains(" packets retransmitted (roce_adp_retrans)"),
            "{line}"
        );
        assert!(retrans > 0, "{test}: {line}");
    }
}

#[test]
fn latency_tests_print_perftest_tables() {
    for (i, test) in ["write_lat", "send_lat", "read_lat", "atomic_lat"]
        .into_iter()
        .enumerate()
    {
        let ip = format!("127.62.{i}.1");
        let (s, c) = run_pair(
            test,
            18640 + i as u16,
            &ip,
            &["-n", "200", "-s", "64", "--verify"],
        );
        assert!(s.status.success(), "{test} server:\n{}", text(&s));
        assert!(c.status.success(), "{test} client:\n{}", text(&c));
        let out = String::from_utf8_lossy(&c.stdout);
        let lines: Vec<&str> = out.lines().collect();
        let h = lines
            .iter()
            .position(|l| l.starts_with(" #bytes #iterations    t_min[usec]"))
            .unwrap_or_else(|| panic!("{test}: no latency header:\n{out}"));
        let f: Vec<f64> = lines[h + 1]
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        assert_eq!(f.len(), 9, "{test}: {}", lines[h + 1]);
        let size = if test == "atomic_lat" { 8.0 } else { 64.0 };
        assert_eq!((f[0], f[1]), (size, 200.0));
        // min <= typical <= max, min <= p99 <= p99.9 <= max.
        assert!(
            f[2] <= f[4] && f[4] <= f[3] && f[2] <= f[7] && f[7] <= f[8] && f[8] <= f[3],
            "{test}: {f:?}"
        );
    }
}

#[test]
fn header_block_and_addresses_follow_perftest() {
    let (s, c) = run_pair(
        "write_bw",
        18660,
        "127.63.0.1",
        &["-n", "50", "--report_gbits", "-F"],
    );
    assert!(c.status.success(), "{}", text(&c));
    let out = String::from_utf8_lossy(&c.stdout);
    let lines: Vec<&str> = out.lines().collect();
    let dash = "-".repeat(87);
    assert_eq!(lines[0], dash);
    assert_eq!(lines[1], "                    RDMA_Write BW Test");
    assert!(lines.contains(&" Dual-port       : OFF\t\tDevice         : rocelab0"));
    assert!(lines.contains(&" Connection type : RC\t\tUsing SRQ      : OFF"));
    assert!(lines.contains(&" TX depth        : 128"));
    assert!(lines.contains(&" Link type       : Ethernet"));
    assert!(lines
        .iter()
        .any(|l| l.starts_with(" local address: LID 0000 QPN 0x")));
    assert!(lines.contains(&" GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:63:00:02"));
    assert!(lines.contains(&" GID: 00:00:00:00:00:00:00:00:00:00:255:255:127:63:00:01"));
    assert!(lines
        .iter()
        .any(|l| l.starts_with(" #bytes     #iterations    BW peak[Gb/sec]")));
    // perftest's output ends with the closing line; rocelab's counter
    // block of the run follows it, to the end.
    let block = lines
        .iter()
        .position(|l| l.starts_with(" Counter delta of this run: device rocelab0, "))
        .unwrap_or_else(|| panic!("no counter block:\n{out}"));
    assert_eq!(lines[block - 1], dash);
    assert_eq!(lines[block + 1], "NIC statistics:");
    assert!(lines[block + 2..].iter().all(|l| l.starts_with("     ")));
    let sout = String::from_utf8_lossy(&s.stdout);
    assert!(sout
        .starts_with("************************************\n* Waiting for client to connect... *"));
}

#[test]
fn mismatched_flags_fail_both_sides_with_a_reason() {
    let server = rocelab()
        .args(["perftest", "write_bw", "-p", "18670", "-s", "1024"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let client = rocelab()
        .args([
            "perftest",
            "write_bw",
            "-p",
            "18670",
            "-s",
            "2048",
            "127.64.0.1",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let c = wait(client, Duration::from_secs(30));
    let s = wait(server, Duration::from_secs(30));
    assert!(!c.status.success() && !s.status.success());
    let e = String::from_utf8_lossy(&c.stderr);
    assert!(e.contains("same flags"), "{}", text(&c));
    // The flag that differs, in words: no dump of a Rust struct.
    assert!(
        e.contains("message size (-s): 2048 here, 1024 on the peer"),
        "{}",
        text(&c)
    );
    for side in [&s, &c] {
        let e = String::from_utf8_lossy(&side.stderr);
        assert!(!e.contains("Hello {") && !e.contains("sizes:"), "{e}");
    }
}

#[test]
fn ud_multi_qp_duration_and_all_sizes_run() {
    let cases: [(&str, &[&str]); 4] = [
        (
            "send_bw",
            &["-c", "UD", "-s", "1024", "-n", "200", "--verify"],
        ),
        (
            "write_bw",
            &["-q", "4", "-s", "8192", "-n", "100", "--verify"],
        ),
        ("read_bw", &["-D", "1", "-s", "4096"]),
        ("write_bw", &["-a", "-n", "20"]),
    ];
    for (i, (test, flags)) in cases.into_iter().enumerate() {
        let ip = format!("127.65.{i}.1");
        let (s, c) = run_pair(test, 18680 + i as u16, &ip, flags);
        assert!(s.status.success(), "{test} {flags:?} server:\n{}", text(&s));
        assert!(c.status.success(), "{test} {flags:?} client:\n{}", text(&c));
        let out = String::from_utf8_lossy(&c.stdout);
        let rows = out
            .lines()
            .skip_while(|l| !l.starts_with(" #bytes"))
            .skip(1)
            .filter(|l| l.starts_with(' ') && l.trim().starts_with(|ch: char| ch.is_ascii_digit()))
            .count();
        let want = if flags.contains(&"-a") { 23 } else { 1 };
        assert_eq!(rows, want, "{test} {flags:?}:\n{out}");
        if flags.contains(&"-D") {
            assert!(out.contains("WARNING: BW peak won't be measured in this run."));
        }
    }
}

/// A server asked for the hardware backend opens its device before it
/// waits for a client: on a host without RDMA hardware it fails at once
/// with the backend's reason, instead of sitting on the TCP port.
#[test]
fn ibverbs_server_without_a_device_fails_before_waiting_for_a_client() {
    let devices = rocelab().args(["devices", "--long"]).output().unwrap();
    let listing = String::from_utf8_lossy(&devices.stdout);
    if listing
        .lines()
        .any(|l| l.split('\t').nth(2) == Some("ibverbs"))
    {
        // A real device would open, and the server would then wait for a
        // client as it should: nothing to check on this host.
        return;
    }
    let t0 = Instant::now();
    let server = rocelab()
        .args([
            "perftest",
            "write_bw",
            "--backend",
            "ibverbs",
            "-p",
            "18590",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait(server, Duration::from_secs(20));
    let out = text(&o);
    assert!(!o.status.success(), "{out}");
    assert!(
        out.contains("no RDMA devices") || out.contains("libibverbs.so.1 not found"),
        "{out}"
    );
    assert!(
        !out.contains("Waiting for client"),
        "the server waited for a client before opening the device:\n{out}"
    );
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

/// The numbers of every BW row of `out` (after the table header).
fn bw_rows(out: &str) -> Vec<Vec<f64>> {
    out.lines()
        .skip_while(|l| !l.starts_with(" #bytes     #iterations    BW peak"))
        .skip(1)
        .map(|l| {
            l.split_whitespace()
                .map_while(|w| w.parse::<f64>().ok())
                .collect::<Vec<f64>>()
        })
        .filter(|r| r.len() == 5)
        .collect()
}

#[test]
fn bidirectional_bandwidth_is_the_sum_of_both_directions() {
    for (i, test) in ["write_bw", "read_bw"].into_iter().enumerate() {
        let ip = format!("127.63.{i}.1");
        let (s, c) = run_pair(test, 18700 + i as u16, &ip, &["-b", "-n", "500"]);
        assert!(s.status.success(), "{test} -b server:\n{}", text(&s));
        assert!(c.status.success(), "{test} -b client:\n{}", text(&c));
        for (side, o) in [("server", &s), ("client", &c)] {
            let t = String::from_utf8_lossy(&o.stdout);
            assert!(t.contains("Bidirectional BW Test"), "{side}: {t}");
            assert!(t.contains(" TX depth        : 128"), "{side}: {t}");
            let rows = bw_rows(&t);
            assert_eq!(rows.len(), 1, "{side}: {t}");
            assert!(rows[0][3] > 0.0 && rows[0][4] > 0.0, "{side}: {t}");
        }
        // Both sides print the same sum (each adds the other's result).
        let rs = bw_rows(&String::from_utf8_lossy(&s.stdout));
        let rc = bw_rows(&String::from_utf8_lossy(&c.stdout));
        let rel = (rs[0][3] - rc[0][3]).abs() / rc[0][3];
        assert!(rel < 0.01, "{test}: server {rs:?} client {rc:?}");
    }
}

#[test]
fn post_list_batches_and_moderates_completions() {
    let (s, c) = run_pair(
        "write_bw",
        18702,
        "127.63.2.1",
        &["-l", "8", "-n", "800", "--verify"],
    );
    assert!(s.status.success(), "server:\n{}", text(&s));
    assert!(c.status.success(), "client:\n{}", text(&c));
    let t = String::from_utf8_lossy(&c.stdout);
    assert!(t.contains("RDMA_Write Post List BW Test"), "{t}");
    assert!(t.contains(" Post List       : 8"), "{t}");
    assert!(t.contains(" CQ Moderation   : 8"), "{t}");
    assert_eq!(bw_row(&t).1, 800);
    // perftest's rule: the iterations are a multiple of the list.
    let o = rocelab()
        .args(["perftest", "write_bw", "-l", "3", "-n", "1000"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("multiple of post list"),
        "{}",
        text(&o)
    );
}

/// The IP TOS bytes of every RoCEv2 packet this side sent in `pcap`.
fn sent_tos(pcap: &std::path::Path, src: [u8; 4]) -> Vec<u8> {
    let data = std::fs::read(pcap).unwrap();
    let r = roce::wire::pcap::PcapReader::new(&data).unwrap();
    assert_eq!(r.link_type(), roce::wire::pcap::LINKTYPE_ETHERNET);
    r.map(|rec| rec.unwrap().data.to_vec())
        .filter(|f| f.len() > 34 && f[26..30] == src)
        .map(|f| f[15])
        .collect()
}

#[test]
fn traffic_class_service_level_and_timeout_reach_the_qp() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let pcap = dir.join(format!("tclass-{}.pcap", std::process::id()));
    let flags = ["-n", "200", "-T", "104", "-S", "3", "-u", "10"];
    let mut client_flags = flags.to_vec();
    client_flags.extend(["--pcap", pcap.to_str().unwrap()]);
    let spawn = |extra: &[&str]| {
        rocelab()
            .args(["perftest", "write_bw", "-p", "18703", "--bind"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let server = spawn(&[&["127.63.3.1"][..], &flags[..]].concat());
    std::thread::sleep(Duration::from_millis(200));
    let client = spawn(&[&["127.63.3.2"][..], &client_flags[..], &["127.63.3.1"][..]].concat());
    let c = wait(client, Duration::from_secs(60));
    let s = wait(server, Duration::from_secs(30));
    assert!(s.status.success(), "server:\n{}", text(&s));
    assert!(c.status.success(), "client:\n{}", text(&c));
    // -T 104 is DSCP 26 (AF31) << 2: every packet the client sent carries
    // it; the ECN bits stay the device's (ECT(0)).
    let tos = sent_tos(&pcap, [127, 63, 3, 2]);
    assert!(tos.len() >= 200, "{} packets", tos.len());
    assert!(tos.iter().all(|&t| t == 104 | 2), "{tos:?}");
    // Out-of-range values are refused as perftest refuses them.
    let o = rocelab()
        .args(["perftest", "write_bw", "-S", "16"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("0..=15"),
        "{}",
        text(&o)
    );
    let _ = std::fs::remove_file(pcap);
}

#[test]
fn run_infinitely_prints_a_row_per_interval_until_stopped() {
    use std::io::{BufRead, BufReader};
    let spawn = |extra: &[&str]| {
        rocelab()
            .args([
                "perftest",
                "write_bw",
                "-p",
                "18704",
                "--run_infinitely",
                "-D",
                "1",
            ])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut server = spawn(&[]);
    std::thread::sleep(Duration::from_millis(200));
    let mut client = spawn(&["127.63.4.1"]);
    let lines = BufReader::new(client.stdout.take().unwrap()).lines();
    let start = Instant::now();
    let mut rows = Vec::new();
    for l in lines {
        let l = l.unwrap();
        let r: Vec<f64> = l
            .split_whitespace()
            .map_while(|w| w.parse::<f64>().ok())
            .collect();
        if r.len() == 5 {
            rows.push((Instant::now(), r));
        }
        if rows.len() == 3 || start.elapsed() > Duration::from_secs(30) {
            break;
        }
    }
    let _ = client.kill();
    let _ = client.wait();
    let _ = server.kill();
    let _ = server.wait();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (_, r) in &rows {
        assert_eq!(r[0], 65536.0);
        assert!(r[1] > 0.0 && r[3] > 0.0 && r[4] > 0.0, "{r:?}");
    }
    // One interval (1 s) apart, give or take scheduling.
    let gap = rows[2].0 - rows[1].0;
    assert!(
        gap > Duration::from_millis(700) && gap < Duration::from_millis(1800),
        "{gap:?}"
    );
}

#[test]
fn out_json_writes_perftests_report() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    for (i, test) in ["write_bw", "send_lat"].into_iter().enumerate() {
        // One file per side: both print a result, so both write one.
        let file = |side: &str| dir.join(format!("{test}-{side}-{}.json", std::process::id()));
        let (fs, fc) = (file("server"), file("client"));
        let port = (18705 + i).to_string();
        let spawn = |f: &std::path::Path, extra: &[&str]| {
            rocelab()
                .args(["perftest", test, "-p", &port, "-n", "200", "--out_json"])
                .arg("--out_json_file")
                .arg(f)
                .args(extra)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let server = spawn(&fs, &[]);
        std::thread::sleep(Duration::from_millis(200));
        let client = spawn(&fc, &[&format!("127.63.{}.1", 5 + i)]);
        let c = wait(client, Duration::from_secs(60));
        let s = wait(server, Duration::from_secs(30));
        assert!(s.status.success(), "{test} server:\n{}", text(&s));
        assert!(c.status.success(), "{test} client:\n{}", text(&c));
        let (title, keys): (&str, &[&str]) = if test == "write_bw" {
            (
                "test: RDMA_Write_BW_Test,",
                &[
                    "MsgSize: 65536,",
                    "n_iterations: 200,",
                    "BW_peak: ",
                    "BW_average: ",
                    "MsgRate: ",
                ],
            )
        } else {
            (
                "test: Send_Latency_Test,",
                &[
                    "MsgSize: 2,",
                    "n_iterations: 200,",
                    "t_min: ",
                    "t_typical: ",
                    "percentile_99.9: ",
                ],
            )
        };
        for (side, f) in [("server", &fs), ("client", &fc)] {
            let j = std::fs::read_to_string(f).unwrap();
            assert!(j.starts_with("{\ntest_info: {\n"), "{side}: {j}");
            assert!(j.contains(title), "{side}: {j}");
            assert!(
                j.contains("\nresults: {\n") && j.ends_with("},\n}\n"),
                "{side}: {j:?}"
            );
            for k in keys {
                assert!(j.contains(k), "{side}: {k}: {j}");
            }
            // perftest prints the TX depth on the client only.
            assert_eq!(j.contains("TX_depth : "), side == "client", "{side}: {j}");
            let _ = std::fs::remove_file(f);
        }
    }
}

#[test]
fn size_suffixes_and_missing_devices_follow_perftest() {
    let (s, c) = run_pair("write_bw", 18707, "127.63.7.1", &["-s", "64K", "-n", "100"]);
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    assert_eq!(bw_row(&String::from_utf8_lossy(&c.stdout)).0, 65536);
    let (s, c) = run_pair("read_bw", 18708, "127.63.8.1", &["-s", "1M", "-n", "20"]);
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    assert_eq!(bw_row(&String::from_utf8_lossy(&c.stdout)).0, 1 << 20);
    // A device that is not there: an error at once, before any waiting.
    let start = Instant::now();
    let o = rocelab()
        .args(["perftest", "write_bw", "-p", "18709", "-d", "mlx5_9"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        e.contains("IB device mlx5_9 not found") && e.contains("rocelab0"),
        "{e}"
    );
    assert!(start.elapsed() < Duration::from_secs(5));
    let o = rocelab()
        .args(["perftest", "write_bw", "-s", "64Q"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("K or M"),
        "{}",
        text(&o)
    );
}

/// A stand-in for perftest's server that follows its exchange up to the
/// key records, then answers with `key` (108 bytes); returns what rocelab
/// printed.
fn against_fake_perftest_server(port: u16, key: [u8; 108], sys: [u8; 8]) -> Output {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let fake = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 108];
        // Version, cycle buffer, cache line, MTU: read the client's, answer.
        s.read_exact(&mut buf[..16]).unwrap();
        assert_eq!(&buf[..5], b"6.06\0", "the version record");
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(b"6.06");
        s.write_all(&v).unwrap();
        for (n, answer) in [(4, &sys[..4]), (4, &sys[4..]), (2, &b"3\0"[..])] {
            s.read_exact(&mut buf[..n]).unwrap();
            s.write_all(answer).unwrap();
        }
        s.read_exact(&mut buf).unwrap();
        let text = String::from_utf8_lossy(&buf[..107]).into_owned();
        s.write_all(&key).unwrap();
        // Hold the connection until the client gives up.
        let _ = s.read(&mut buf);
        text
    });
    let o = rocelab()
        .args(["perftest", "write_bw", "-p", &port.to_string(), "127.0.0.1"])
        .output()
        .unwrap();
    let ours = fake.join().unwrap();
    // The client's own key record has perftest's layout.
    let f: Vec<&str> = ours.split(':').collect();
    assert_eq!(f.len(), 24, "{ours}");
    assert_eq!(
        f.iter().map(|x| x.len()).collect::<Vec<_>>()[..7],
        [4, 4, 6, 6, 8, 16, 2]
    );
    o
}

#[test]
fn a_perftest_peers_records_are_checked_field_by_field() {
    let good = "0001:0010:000011:000001:00000101:0000000000001000:00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01:00000000:";
    let key = |text: &str| {
        let mut k = [0u8; 108];
        k[..text.len()].copy_from_slice(text.as_bytes());
        k
    };
    let sys = |cycle: u32, line: u32| {
        let mut s = [0u8; 8];
        s[..4].copy_from_slice(&cycle.to_be_bytes());
        s[4..].copy_from_slice(&line.to_be_bytes());
        s
    };
    // A QPN that is not hex.
    let bad_qpn = good.replacen("000011", "0000zz", 1);
    let o = against_fake_perftest_server(18710, key(&bad_qpn), sys(4096, 64));
    assert!(!o.status.success());
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("key record field QPN"), "{e}");
    // A link-local GID (not RoCEv2 over IPv4).
    let v6 = good.replacen(
        "00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01",
        "fe:80:00:00:00:00:00:00:00:00:00:00:00:00:00:01",
        1,
    );
    let o = against_fake_perftest_server(18711, key(&v6), sys(4096, 64));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("IPv4-mapped"),
        "{}",
        text(&o)
    );
    // A buffer that wraps the address space.
    let wrap = good.replacen("0000000000001000", "fffffffffffff000", 1);
    let o = against_fake_perftest_server(18712, key(&wrap), sys(4096, 64));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("wraps"),
        "{}",
        text(&o)
    );
    assert!(!o.status.success());
}

/// The counter lines of perftest's end-of-run block, by name.
fn counter_block(out: &str) -> std::collections::BTreeMap<String, u64> {
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with(" Counter delta of this run: device "));
    assert!(lines.next().is_some(), "no counter block in:\n{out}");
    assert_eq!(lines.next(), Some("NIC statistics:"), "{out}");
    lines
        .map_while(|l| {
            let (name, v) = l.strip_prefix("     ")?.split_once(": ")?;
            Some((name.to_string(), v.parse().ok()?))
        })
        .collect()
}

#[test]
fn the_end_of_run_counters_go_through_parse_and_doctor() {
    let dir = std::env::temp_dir().join(format!("rocelab-counters-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("client.json");
    let (s, c) = run_pair_with(
        "write_bw",
        18760,
        "127.66.0.1",
        &[
            "-s",
            "16384",
            "-n",
            "200",
            "--loss",
            "0.02",
            "--ce-mark",
            "0.05",
            "--seed",
            "5",
        ],
        &[],
        &["--out_json", "--out_json_file", json.to_str().unwrap()],
    );
    assert!(s.status.success(), "server:\n{}", text(&s));
    assert!(c.status.success(), "client:\n{}", text(&c));
    let (so, co) = (
        String::from_utf8_lossy(&s.stdout).into_owned(),
        String::from_utf8_lossy(&c.stdout).into_owned(),
    );
    let (sc, cc) = (counter_block(&so), counter_block(&co));
    // The data flows client -> server over a lossy, marking path: the
    // client (requester) retransmits, the server (responder) sees the
    // gaps and the CE marks and answers with CNPs, which the client counts
    // (ignored or handled, depending on its congestion control).
    assert!(cc["roce_adp_retrans"] > 0, "{cc:?}");
    assert!(
        cc["packet_seq_err"] + cc["local_ack_timeout_err"] > 0,
        "{cc:?}"
    );
    assert!(
        cc["fault_dropped"] > 0 && cc["fault_ce_marked"] > 0,
        "{cc:?}"
    );
    assert!(sc["out_of_sequence"] > 0, "{sc:?}");
    assert_eq!(sc["roce_adp_retrans"], 0, "{sc:?}");
    let marked = sc["np_ecn_marked_roce_packets"];
    assert!(
        marked > 0 && marked <= cc["fault_ce_marked"],
        "{sc:?} {cc:?}"
    );
    assert!(
        sc["np_cnp_sent"] > 0 && sc["np_cnp_sent"] <= marked,
        "{sc:?}"
    );
    assert!(
        cc["rp_cnp_handled"] + cc["rp_cnp_ignored"] <= sc["np_cnp_sent"],
        "{sc:?} {cc:?}"
    );
    // --out_json carries the same block.
    let j = std::fs::read_to_string(&json).unwrap();
    assert!(j.contains("\ncounters: {\n"), "{j}");
    assert!(
        j.contains(&format!(
            "\nroce_adp_retrans: {},\n",
            cc["roce_adp_retrans"]
        )),
        "{j}"
    );
    // rocelab parse reads the block.
    let (sf, cf) = (dir.join("server.txt"), dir.join("client.txt"));
    std::fs::write(&sf, &so).unwrap();
    std::fs::write(&cf, &co).unwrap();
    let parsed = rocelab()
        .args(["parse", "auto", "--json"])
        .arg(&sf)
        .output()
        .unwrap();
    assert!(parsed.status.success(), "{}", text(&parsed));
    let v: serde_json::Value = serde_json::from_slice(&parsed.stdout).unwrap();
    assert_eq!(v["kind"], "perftest");
    let block = &v["data"]["runs"][0]["counters"];
    assert_eq!(block["device"], "rocelab0");
    assert_eq!(block["counters"]["out_of_sequence"], sc["out_of_sequence"]);
    assert!(block["duration_ns"].as_u64().unwrap() > 0);
    // rocelab doctor names the counters that moved, on the side that
    // counted them.
    let doc = rocelab()
        .args(["doctor", "--json"])
        .args([&sf, &cf])
        .output()
        .unwrap();
    let d: serde_json::Value =
        serde_json::from_slice(&doc.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&doc)));
    let findings = d["findings"].as_array().unwrap();
    let evidence = |id: &str| -> Vec<String> {
        findings
            .iter()
            .filter(|f| f["id"] == id)
            .flat_map(|f| f["evidence"].as_array().unwrap().clone())
            .map(|e| e.as_str().unwrap().to_string())
            .collect()
    };
    let loss = evidence("packet-loss");
    let oos = format!("out_of_sequence +{}", sc["out_of_sequence"]);
    let retrans = format!("roce_adp_retrans +{}", cc["roce_adp_retrans"]);
    assert!(loss.iter().any(|e| e.ends_with(&oos)), "{loss:?}");
    assert!(loss.iter().any(|e| e.ends_with(&retrans)), "{loss:?}");
    let affected: Vec<&serde_json::Value> = findings
        .iter()
        .filter(|f| f["id"] == "packet-loss")
        .flat_map(|f| f["affects"].as_array().unwrap())
        .collect();
    for side in ["rocelab0 (server)", "rocelab0 (client)"] {
        assert!(affected.iter().any(|a| *a == side), "{affected:?}");
    }
    // Both sides' paths mark (the server's ACKs too): the balance sums
    // both blocks.
    let both = |n: &str| sc[n] + cc[n];
    let ecn = evidence("ecn-balance");
    let balance = format!(
        "np_ecn_marked_roce_packets +{}, np_cnp_sent +{}, rp_cnp_handled +{}, rp_cnp_ignored +{}",
        both("np_ecn_marked_roce_packets"),
        both("np_cnp_sent"),
        both("rp_cnp_handled"),
        both("rp_cnp_ignored")
    );
    assert!(ecn.contains(&balance), "{ecn:?} vs {balance}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn congestion_control_flags_are_checked_and_name_what_they_expect() {
    for (flags, want) in [
        (
            &["--cc", "cubic"][..],
            "--cc \"cubic\": expected none, dcqcn, dcqcn:paper, dcqcn:firmware, swift or timely",
        ),
        (
            &["--cc", "hpcc"][..],
            "HPCC needs INT telemetry from every switch",
        ),
        (
            &["--cc", "timely", "--cc-param", "t_low=1ms"][..],
            "--cc timely: t_low = 1ms: expected less than t_high (500us)",
        ),
        (
            &["--cc", "swift", "--cc-param", "rate_ai=40Mbps"][..],
            "unknown Swift parameter \"rate_ai\": expected one of queueing, ai",
        ),
        (&["--cc", "dcqcn:hpcc"][..], "unknown DCQCN preset \"hpcc\""),
        (
            &["--cc", "dcqcn", "--cc-param", "rate_ai=fast"][..],
            "--cc-param \"rate_ai=fast\": rate_ai = \"fast\": invalid rate",
        ),
        (
            &["--cc", "dcqcn", "--cc-param", "alpha=1"][..],
            "unknown DCQCN parameter \"alpha\": expected one of g, initial_alpha",
        ),
        (
            &["--cc", "dcqcn", "--cc-param", "g"][..],
            "expected KEY=VALUE",
        ),
        (
            &["--cnp-interval", "4"][..],
            "--cnp-interval \"4\": expected a duration with a unit, e.g. 4us",
        ),
        (
            &["--cc", "none", "--cc-param", "rate_ai=40Mbps"][..],
            "need dcqcn congestion control",
        ),
    ] {
        let o = rocelab()
            .args(["perftest", "write_bw", "-p", "18741"])
            .args(flags)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{flags:?} ran");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.contains(want), "{flags:?}: {e}");
    }
}

#[test]
fn write_bw_runs_with_dcqcn_on_both_sides() {
    let (s, c) = run_pair(
        "write_bw",
        18742,
        "127.63.42.1",
        &[
            "--cc",
            "dcqcn:paper",
            "--cc-param",
            "rate_ai=80Mbps",
            "--cnp-interval",
            "8us",
            "-n",
            "300",
            "--verify",
        ],
    );
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    let (bytes, iters, _, avg, _) = bw_row(&String::from_utf8_lossy(&c.stdout));
    assert_eq!((bytes, iters), (65536, 300));
    assert!(avg > 0.0);
}

#[test]
fn write_bw_verify_for_a_duration_runs_past_the_iteration_count() {
    // -D with --verify: the receiving side checks as many messages as the
    // sender sent in the time, not -n of them (it used to stop at -n and
    // leave the sender retrying into a closed QP).
    let (s, c) = run_pair(
        "write_bw",
        18761,
        "127.67.0.1",
        &["-D", "2", "-n", "100", "-s", "4096", "--verify"],
    );
    assert!(s.status.success(), "{}", text(&s));
    assert!(c.status.success(), "{}", text(&c));
    let (_, iters, _, avg, _) = bw_row(&String::from_utf8_lossy(&c.stdout));
    assert!(
        iters > 100,
        "the client ran {iters} messages:\n{}",
        text(&c)
    );
    assert!(avg > 0.0);
    let (_, server_iters, ..) = bw_row(&String::from_utf8_lossy(&s.stdout));
    assert!(server_iters > 100, "{}", text(&s));
}

/// A stand-in for a rocelab client: it mirrors the server's version
/// record and every JSON line (hello, endpoints, barriers), and after the
/// first size barrier sends `extra`; returns the server's output.
fn against_fake_rocelab_client(port: u16, server_flags: &[&str], extra: &str) -> Output {
    use std::io::{BufRead, BufReader, Read, Write};
    let server = rocelab()
        .args(["perftest", "-p", &port.to_string()])
        .args(server_flags)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let mut s = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(e) => panic!("no server: {e}"),
        }
    };
    let mut v = [0u8; 16];
    v[..12].copy_from_slice(b"6.06\0rocelab");
    s.write_all(&v).unwrap();
    s.read_exact(&mut v).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    // The server may hang up first (that is what the test wants to see):
    // a failed write ends the exchange, the server's verdict follows.
    // The fake answers each line with the same line, as a peer running the
    // same test does; after the last synchronisation before traffic (the
    // send tests': receives posted, or the ping-pong ready) it sends
    // `extra`, where a peer's end-of-run counts would come.
    while r.read_line(&mut line).unwrap_or(0) > 0 {
        if s.write_all(line.as_bytes()).is_err() {
            break;
        }
        let last_sync = line.contains("pingpong ready") || line.contains("recvs posted");
        if last_sync && s.write_all(extra.as_bytes()).is_err() {
            break;
        }
        line.clear();
    }
    wait(server, Duration::from_secs(30))
}

#[test]
fn a_short_posted_message_from_the_peer_is_an_error_not_a_crash() {
    for (i, (flags, extra)) in [
        (&["send_lat", "-D", "2"][..], "{\"Posted\":[]}\n"),
        (&["send_bw", "-D", "2", "-q", "2"][..], "{\"Posted\":[7]}\n"),
    ]
    .into_iter()
    .enumerate()
    {
        let o = against_fake_rocelab_client(18762 + i as u16, flags, extra);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{flags:?}: {}", text(&o));
        assert!(!err.contains("panicked"), "{flags:?}: {}", text(&o));
        assert!(
            err.contains("end-of-run message counts"),
            "{flags:?}: {}",
            text(&o)
        );
    }
}

#[test]
fn the_device_is_named_as_under_exec_and_the_old_name_still_opens_it() {
    for (i, dev) in ["rocelab0", "udp_lo"].into_iter().enumerate() {
        let (s, c) = run_pair(
            "write_bw",
            18764 + i as u16,
            &format!("127.67.{}.1", i + 1),
            &["-n", "20", "-s", "4096", "-d", dev],
        );
        assert!(s.status.success() && c.status.success(), "{}", text(&c));
        let out = String::from_utf8_lossy(&c.stdout);
        assert!(
            out.contains("Device         : rocelab0\n"),
            "-d {dev}:\n{out}"
        );
    }
}

/// Every flag of Debian's perftest 4.5 (`ib_{write,read,send,atomic}_{bw,lat}
/// --help`), with a value where it takes one.
const PERFTEST_FLAGS: &[&[&str]] = &[
    &["-a"],
    &["-b"],
    &["-c", "RC"],
    &["-D", "1"],
    &["-f", "2"],
    &["-F"],
    &["-i", "1"],
    &["-I", "64"],
    &["-l", "1"],
    &["-L", "64"],
    &["-m", "1024"],
    &["-n", "100"],
    &["-N"],
    &["-O"],
    &["-p", "18515"],
    &["-q", "1"],
    &["-Q", "1"],
    &["-R"],
    &["-s", "64"],
    &["-S", "0"],
    &["-t", "128"],
    &["-T", "0"],
    &["-u", "14"],
    &["-w", "1"],
    &["-W", "counters/port_xmit_data"],
    &["-x", "0"],
    &["-y", "1"],
    &["-z"],
    &["-A", "FETCH_AND_ADD"],
    &["-C"],
    &["-H"],
    &["-U"],
    &["-e"],
    &["-o", "4"],
    &["-X", "0"],
    &["-g"],
    &["-M", "ff0e::1"],
    &["-r", "512"],
    &["--out_json"],
    &["--out_json_file=x.json"],
    &["--cpu_util"],
    &["--dlid", "1"],
    &["--dont_xchg_versions"],
    &["--force-link=Ethernet"],
    &["--ipv6"],
    &["--source_ip", "127.0.0.1"],
    &["--mmap=f"],
    &["--mmap-offset=0"],
    &["--mr_per_qp"],
    &["--odp"],
    &["--output=bandwidth"],
    &["--use_old_post_send"],
    &["--perform_warm_up"],
    &["--pkey_index=0"],
    &["--report-both"],
    &["--report_gbits"],
    &["--report-per-port"],
    &["--reversed"],
    &["--run_infinitely"],
    &["--retry_count=7"],
    &["--tclass=0"],
    &["--use_hugepages"],
    &["--wait_destroy=0"],
    &["--disable_pcie_relaxed"],
    &["--recv_post_list=1"],
    &["--burst_size=1"],
    &["--typical_pkt_size=1"],
    &["--rate_limit=1"],
    &["--rate_units=g"],
    &["--rate_limit_type=SW"],
    &["--log_dci_streams=0"],
    &["--log_active_dci_streams=0"],
    &["--aes_xts"],
    &["--encrypt_on_tx"],
    &["--sig_before"],
    &["--aes_block_size=512"],
    &["--data_enc_keys_number=1"],
    &["--kek_path=k"],
    &["--credentials_path=c"],
    &["--data_enc_key_app_path=a"],
    &["--inline_recv=0"],
    &["--latency_gap=0"],
    &["--use-srq"],
    &["--tos", "0"],
    &["-V"],
    &["-h"],
];

#[test]
fn every_flag_perftest_documents_is_accepted() {
    for flag in PERFTEST_FLAGS {
        // A missing device fails at once after the flags are read: a flag
        // that is accepted reaches it (or says why it cannot apply).
        let o = rocelab()
            .args(["perftest", "write_bw", "-d", "mlx5_9"])
            .args(*flag)
            .output()
            .unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(
            !e.contains("unexpected argument") && !e.contains("error: invalid value"),
            "{flag:?} was rejected:\n{}",
            text(&o)
        );
        assert!(
            !e.contains("panicked") && o.status.code().is_some_and(|c| c <= 1),
            "{flag:?}:\n{}",
            text(&o)
        );
    }
    let o = rocelab().args(["perftest", "-V"]).output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout), "Version: 6.06\n");
    // A flag that cannot apply says so in one line and the run goes on.
    let o = rocelab()
        .args(["perftest", "write_bw", "-R", "-d", "mlx5_9"])
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.starts_with(" Note: -R: "), "{}", text(&o));
    assert_eq!(out.lines().count(), 1, "{}", text(&o));
    assert!(String::from_utf8_lossy(&o.stderr).contains("IB device mlx5_9 not found"));
    // One whose effect is missing would give a wrong result: refused.
    let o = rocelab()
        .args(["perftest", "write_bw", "-O"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("one port"),
        "{}",
        text(&o)
    );
}

#[test]
fn no_peak_histograms_limits_and_both_directions_follow_perftest() {
    // -N: no peak, perftest's warning.
    let (s, c) = run_pair("write_bw", 18766, "127.67.3.1", &["-n", "50", "-N"]);
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    let out = String::from_utf8_lossy(&c.stdout);
    assert!(
        out.contains(" WARNING: BW peak won't be measured in this run."),
        "{out}"
    );
    let (_, _, peak, avg, _) = bw_row(&out);
    assert_eq!(peak, 0.0);
    assert!(avg > 0.0);
    // -U (implies -H): the samples in order taken, then sorted.
    let (s, c) = run_pair("send_lat", 18767, "127.67.4.1", &["-n", "20", "-U", "-e"]);
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    let out = String::from_utf8_lossy(&c.stdout);
    let lists: Vec<Vec<f64>> = out
        .split("#, usec\n")
        .skip(1)
        .map(|block| {
            block
                .lines()
                .map_while(|l| l.split_once(", "))
                .enumerate()
                .map(|(i, (n, v))| {
                    assert_eq!(n, (i + 1).to_string());
                    v.parse::<f64>().unwrap()
                })
                .collect()
        })
        .collect();
    assert_eq!(lists.len(), 2, "{out}");
    assert_eq!(lists[0].len(), 19, "{out}");
    let mut sorted = lists[0].clone();
    sorted.sort_by(f64::total_cmp);
    assert_eq!(lists[1], sorted);
    // --limit_bw above what is reached: the test fails and says so.
    let (_, c) = run_pair(
        "write_bw",
        18768,
        "127.67.5.1",
        &["-n", "50", "--limit_bw", "1e12"],
    );
    assert!(!c.status.success());
    assert!(
        String::from_utf8_lossy(&c.stderr).contains("below the limit --limit_bw"),
        "{}",
        text(&c)
    );
    // --report-both with -b: a block per direction instead of the sum.
    let (s, c) = run_pair(
        "write_bw",
        18769,
        "127.67.6.1",
        &["-n", "200", "-b", "--report-both"],
    );
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    let out = String::from_utf8_lossy(&c.stdout);
    assert!(out.contains("\n Local results: \n"), "{out}");
    assert!(out.contains("\n Remote results: \n"), "{out}");
    // -o: the outstanding reads of the header.
    let (s, c) = run_pair("read_bw", 18770, "127.67.7.1", &["-n", "50", "-o", "4"]);
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    assert!(String::from_utf8_lossy(&c.stdout).contains(" Outstand reads  : 4\n"));
}

/// Flags that change what both sides do, given to one side only: each
/// side names the flag, its value and the peer's, and fails.
#[test]
fn one_sided_bidirectional_unit_and_infinite_flags_are_named_on_both_sides() {
    let cases: [(&str, &str, &str, &str); 3] = [
        (
            "-b",
            "bidirectional (-b): on here, off on the peer",
            "bidirectional (-b): off here, on on the peer",
            "127.68.1.1",
        ),
        (
            "--report_gbits",
            "bandwidth unit (--report_gbits): Gb/sec here, MB/sec on the peer",
            "bandwidth unit (--report_gbits): MB/sec here, Gb/sec on the peer",
            "127.68.2.1",
        ),
        (
            "--run_infinitely",
            "--run_infinitely: on here, off on the peer",
            "--run_infinitely: off here, on on the peer",
            "127.68.3.1",
        ),
    ];
    for (i, (flag, server_says, client_says, ip)) in cases.into_iter().enumerate() {
        let (s, c) = run_pair_with(
            "write_bw",
            18870 + i as u16,
            ip,
            &["-n", "50"],
            &[flag],
            &[],
        );
        for (side, says) in [(&s, server_says), (&c, client_says)] {
            let e = String::from_utf8_lossy(&side.stderr);
            assert_eq!(side.status.code(), Some(1), "{flag}: {}", text(side));
            assert!(
                e.contains(says) && e.contains("same flags"),
                "{flag}: {}",
                text(side)
            );
            assert!(
                !e.contains("Hello {") && !e.contains("synchronisation"),
                "{e}"
            );
        }
    }
}

/// A stand-in for perftest's server (`-q 2`) facing a rocelab client
/// with `-q 1`: it answers the client's key record, then, where the
/// client's handshake wants its first record again, sends the record of
/// its second QP, as perftest's server does. Returns what rocelab printed.
fn against_fake_two_qp_perftest_server(port: u16) -> Output {
    use std::io::{Read, Write};
    let l = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let record = |qpn: &str| {
        let text = format!("0001:0001:{qpn}:000001:00000101:0000000000001000:00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01:00000000:");
        let mut k = [0u8; 108];
        k[..text.len()].copy_from_slice(text.as_bytes());
        k
    };
    let (first, second) = (record("000011"), record("000012"));
    let fake = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 108];
        s.read_exact(&mut buf[..16]).unwrap();
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(b"6.06");
        s.write_all(&v).unwrap();
        let sys = [0, 0, 16, 0, 0, 0, 0, 64];
        for (n, answer) in [(4, &sys[..4]), (4, &sys[4..]), (2, &b"3\0"[..])] {
            s.read_exact(&mut buf[..n]).unwrap();
            s.write_all(answer).unwrap();
        }
        for answer in [first, second] {
            if s.read_exact(&mut buf).is_err() || s.write_all(&answer).is_err() {
                return;
            }
        }
        let _ = s.read(&mut buf);
    });
    let o = rocelab()
        .args(["perftest", "write_bw", "-p", &port.to_string(), "-q", "1"])
        .arg("127.0.0.1")
        .output()
        .unwrap();
    fake.join().unwrap();
    o
}

#[test]
fn a_perftest_peer_with_more_qps_is_named_not_dumped() {
    let o = against_fake_two_qp_perftest_server(18873);
    let e = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        e.contains("Number of QPs mismatch: this side runs -q 1, the peer (perftest) runs more")
            && e.contains("QPN 0x0012")
            && e.contains("same -q"),
        "{}",
        text(&o)
    );
    assert!(!e.contains("KeyRecord {") && !e.contains("Gid("), "{e}");
}

/// What `rocelab perftest --out_json` writes, `rocelab parse` reads back
/// (the row and the counter delta) and `rocelab doctor` diagnoses from
/// the delta as it does from the text output.
#[test]
fn out_json_reports_go_through_parse_and_doctor() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let f = dir.join(format!("out-json-parse-{}.json", std::process::id()));
    let (s, c) = run_pair_with(
        "write_bw",
        18876,
        "127.68.6.1",
        &["-n", "100", "-s", "4096"],
        &[],
        &["--out_json", "--out_json_file", f.to_str().unwrap()],
    );
    assert!(s.status.success() && c.status.success(), "{}", text(&c));
    let (size, iters, peak, avg, _) = bw_row(&String::from_utf8_lossy(&c.stdout));
    let o = rocelab()
        .args(["parse", "auto", "--json"])
        .arg(&f)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["kind"], "perftest");
    let run = &v["data"]["runs"][0];
    assert_eq!(run["bw"][0]["bytes"], size);
    assert_eq!(run["bw"][0]["iterations"], iters);
    let mib_s = |bps: &serde_json::Value| bps.as_u64().unwrap() as f64 / 8.0 / 1_048_576.0;
    assert!(
        (mib_s(&run["bw"][0]["avg_bps"]) - avg).abs() < 0.006,
        "{run}"
    );
    assert!(
        (mib_s(&run["bw"][0]["peak_bps"]) - peak).abs() < 0.006,
        "{run}"
    );
    assert!(run["counters"]["counters"]["tx_packets"].as_u64().unwrap() >= 100);
    assert!(run["counters"]["duration_ns"].as_u64().unwrap() > 0);
    let o = rocelab().arg("doctor").arg(&f).output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    assert!(out.contains("a run's delta"), "{out}");
    assert!(!out.contains("totals since boot"), "{out}");
    let _ = std::fs::remove_file(&f);
}

/// A rocelab server and Debian's `ib_write_bw` (over the shim) given a
/// different `-q`, `-s` or `-n`: perftest's exchange carries no flags, so
/// the server reads them from the peer's key records and result, names
/// both values and fails (with a different `-q` it used to wait forever).
/// Skips where perftest is not installed.
#[test]
fn a_perftest_client_with_other_flags_is_named_by_the_rocelab_server() {
    use super::ibverbs_shim::{exec, program};
    let Some(prog) = program("ib_write_bw") else {
        return;
    };
    let cases: [(&[&str], &[&str], &str); 3] = [
        (
            &["-q", "2"],
            &["-q", "1"],
            "Number of QPs mismatch: this side runs -q 2, the peer (perftest) runs -q 1",
        ),
        (
            &["-s", "8192", "-n", "100"],
            &["-s", "4096", "-n", "100"],
            "Message size mismatch: this side runs -s 8192, the peer (perftest) ran -s 4096",
        ),
        (
            &["-n", "200"],
            &["-n", "100"],
            "Number of iterations mismatch: this side runs -n 200, the peer (perftest) ran -n 100",
        ),
    ];
    for (i, (ours, theirs, says)) in cases.into_iter().enumerate() {
        let port = (18877 + i as u16).to_string();
        let bind = format!("127.68.{}.1", 10 + i);
        let server = rocelab()
            .args(["perftest", "write_bw", "-p", &port, "--bind", &bind])
            .args(ours)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let client = exec(
            &prog,
            &[&["-p", port.as_str()], theirs, &["localhost"]].concat(),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let s = wait(server, Duration::from_secs(30));
        let _ = wait(client, Duration::from_secs(30));
        let e = String::from_utf8_lossy(&s.stderr);
        assert_eq!(s.status.code(), Some(1), "{ours:?}: {}", text(&s));
        assert!(e.contains(says), "{ours:?}: {}", text(&s));
        assert!(!e.contains("KeyRecord {"), "{e}");
    }
}
