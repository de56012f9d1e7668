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
    let server = spawn(&[]);
    std::thread::sleep(Duration::from_millis(200));
    let client = spawn(&[server_ip]);
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
        .position(|l| l.starts_with(" #bytes     #iterations    BW peak[MiB/sec]"))
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
    assert!(lines.contains(&" Dual-port       : OFF\t\tDevice         : udp_lo"));
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
    assert_eq!(*lines.last().unwrap(), dash);
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
    assert!(
        String::from_utf8_lossy(&c.stderr).contains("same flags"),
        "{}",
        text(&c)
    );
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
