//! Unmodified Debian ibverbs programs over rocelab's libibverbs.so.1
//! (`rocelab exec`): the device tools, the `ibv_*_pingpong` examples and
//! perftest, server and client as two processes on loopback with their
//! default flags (each pair on its own TCP port, so that the tests run in
//! parallel). Each must exit 0 and print sane results: the pingpongs their
//! byte and iteration counts, perftest a bandwidth above zero or a latency
//! row.
//!
//! The programs come from Debian's `ibverbs-utils` and `perftest`. Without
//! them the tests skip with a message, except under CI (`CI` set and not
//! `false`/`0`, as `.ci/run` sets it), where a missing program fails.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::testbed::{text, Netns};
use super::wire::under_ci;

/// The shim the tests load: the `libibverbs.so` cargo built for this test
/// run (a dev-dependency), beside the test binaries.
fn shim() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_rocelab"));
    let lib = exe.parent().unwrap().join("deps").join("libibverbs.so");
    assert!(lib.is_file(), "{} was not built", lib.display());
    lib
}

/// `program`'s path, or `None` (after saying why) when the test should skip.
pub(super) fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(p) = std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
    {
        return Some(p);
    }
    assert!(
        !under_ci(),
        "{name} is required under CI (apt-get install ibverbs-utils perftest rdmacm-utils)"
    );
    eprintln!(
        "skipping: {name} is not installed (apt-get install ibverbs-utils perftest rdmacm-utils)"
    );
    None
}

/// `rocelab exec --lib SHIM -- program args...`.
pub(super) fn exec(program: &PathBuf, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocelab"));
    c.arg("exec")
        .arg("--lib")
        .arg(shim())
        .arg("--")
        .arg(program);
    c.args(args);
    c.env_remove("ROCELAB_IBV_DEVICES");
    c
}

/// Kills the server when a test fails before it exits.
struct Server(Option<Child>);

impl Server {
    /// Start `cmd` with its stdout and stderr piped.
    fn spawn(mut cmd: Command) -> Server {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        Server(Some(child))
    }

    /// The output of a server that should be exiting: killed after `limit`
    /// (a server whose client gave up would wait for it forever).
    fn finish(mut self, limit: Duration) -> Output {
        let mut child = self.0.take().unwrap();
        exited_by(&mut child, Instant::now() + limit);
        let _ = child.kill();
        child.wait_with_output().unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Wait until `child` exits or `end` comes; whether it exited.
fn exited_by(child: &mut Child, end: Instant) -> bool {
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}

/// Run `cmd` to its end, killing it after `limit`.
pub(super) fn output_within(mut cmd: Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if !exited_by(&mut child, Instant::now() + limit) {
        let _ = child.kill();
        let o = child.wait_with_output().unwrap();
        panic!("timed out after {limit:?}\n{}", text(&o));
    }
    child.wait_with_output().unwrap()
}

/// Start `server`, then run `client()` to its end (60 s at most), again
/// while it fails saying `early` (it came before the server listened)
/// and `patience` has not passed since the server started; then wait for
/// the server, which ends by itself after one client (killed 30 s on).
/// Returns (server, client) outputs.
pub(super) fn server_and_client(
    server: Command,
    client: impl FnMut() -> Command,
    early: &str,
    patience: Duration,
) -> (Output, Output) {
    server_and_client_within(server, client, early, patience, Duration::from_secs(60))
}

/// [`server_and_client`] with each client run killed after `limit`.
fn server_and_client_within(
    server: Command,
    mut client: impl FnMut() -> Command,
    early: &str,
    patience: Duration,
    limit: Duration,
) -> (Output, Output) {
    let server = Server::spawn(server);
    let start = Instant::now();
    let client = loop {
        let out = output_within(client(), limit);
        if out.status.success() || !text(&out).contains(early) || start.elapsed() > patience {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    (server.finish(Duration::from_secs(30)), client)
}

/// What perftest's clients say before their server listens.
const NOT_YET: &str = "Couldn't connect";

/// Run `name` as server (`args`) and client (`args` + `localhost`); return
/// both outputs. The client retries while the server is not listening yet.
pub(super) fn pair(name: &str, args: &[&str]) -> Option<(Output, Output)> {
    let prog = program(name)?;
    let mut client_args = args.to_vec();
    client_args.push("localhost");
    Some(server_and_client(
        exec(&prog, args),
        || exec(&prog, &client_args),
        NOT_YET,
        Duration::from_secs(10),
    ))
}

/// `program args...` over the shim, which must exit 0; its [`text`].
fn exec_ok(program: &PathBuf, args: &[&str]) -> String {
    let out = exec(program, args).output().unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    t
}

#[test]
fn ibv_devices_lists_the_emulated_device() {
    let Some(p) = program("ibv_devices") else {
        return;
    };
    let t = exec_ok(&p, &[]);
    assert!(t.contains("rocelab0"), "{t}");
    assert!(t.contains("02007f00000012b7"), "node GUID column: {t}");
}

#[test]
fn ibv_devinfo_reports_an_active_roce_port() {
    let Some(p) = program("ibv_devinfo") else {
        return;
    };
    let t = exec_ok(&p, &[]);
    for want in [
        "hca_id:\trocelab0",
        "PORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
    ] {
        assert!(t.contains(want), "missing {want:?}: {t}");
    }
    let t = exec_ok(&p, &["-v"]);
    for want in [
        "atomic_cap:\t\t\tATOMIC_HCA (1)",
        "max_qp_rd_atom:\t\t\t16",
        "GID[  0]:",
        "::ffff:127.0.",
        "RoCE v2",
    ] {
        assert!(t.contains(want), "missing {want:?}: {t}");
    }
}

/// `bytes in S seconds` and `iters in` lines from both sides.
fn assert_pingpong(name: &str, args: &[&str]) {
    let Some((s, c)) = pair(name, args) else {
        return;
    };
    for (side, o) in [("server", &s), ("client", &c)] {
        let t = text(o);
        assert!(o.status.success(), "{name} {side}: {t}");
        assert!(t.contains("remote address: LID 0x"), "{name} {side}: {t}");
        let line = t
            .lines()
            .find(|l| l.contains(" bytes in ") && l.contains("Mbit/sec"))
            .unwrap_or_else(|| panic!("{name} {side}: no throughput line: {t}"));
        let bytes: u64 = line.split_whitespace().next().unwrap().parse().unwrap();
        assert!(bytes > 0, "{line}");
        assert!(t.contains("iters in"), "{name} {side}: {t}");
    }
}

#[test]
fn ibv_rc_pingpong_runs() {
    assert_pingpong("ibv_rc_pingpong", &["-p", "18611"]);
}

#[test]
fn ibv_rc_pingpong_with_completion_events_runs() {
    assert_pingpong("ibv_rc_pingpong", &["-p", "18612", "-e"]);
}

#[test]
fn ibv_rc_pingpong_with_gids_runs() {
    assert_pingpong("ibv_rc_pingpong", &["-p", "18613", "-g", "0"]);
}

#[test]
fn ibv_uc_pingpong_runs() {
    assert_pingpong("ibv_uc_pingpong", &["-p", "18614"]);
}

#[test]
fn ibv_ud_pingpong_runs() {
    assert_pingpong("ibv_ud_pingpong", &["-p", "18615"]);
}

#[test]
fn ibv_srq_pingpong_runs() {
    assert_pingpong("ibv_srq_pingpong", &["-p", "18616"]);
}

/// The numbers of perftest's result row (the line after the `#bytes`
/// header).
fn result_row(t: &str) -> Vec<f64> {
    let mut lines = t
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"));
    lines.next();
    lines
        .next()
        .unwrap_or("")
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect()
}

/// The result row in `t` of a bandwidth test run with perftest's default
/// size and count: 65536-byte messages, at least 1000 of them, and a
/// bandwidth and message rate above zero (`what` names the run).
pub(super) fn assert_default_bw_row(t: &str, what: &str) {
    // #bytes #iterations BW-peak BW-average MsgRate
    let row = result_row(t);
    assert!(row.len() >= 5, "{what}: no result row: {t}");
    assert_eq!(row[0], 65536.0, "{what}: {t}");
    assert!(
        row[1] >= 1000.0 && row[3] > 0.0 && row[4] > 0.0,
        "{what}: {row:?}: {t}"
    );
}

/// A latency test's result `row` (from the output `t`): a minimum above
/// zero, at most the typical latency, itself at most the maximum.
fn assert_latency_row(row: &[f64], what: &str, t: &str) {
    // #bytes #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9
    assert!(row.len() >= 9, "{what}: no latency row: {t}");
    let (min, max, typical) = (row[2], row[3], row[4]);
    assert!(
        min > 0.0 && min <= typical && typical <= max,
        "{what}: {row:?}: {t}"
    );
}

fn assert_perftest(name: &str, port: &str) {
    assert_perftest_with(name, &["-p", port]);
}

/// [`assert_perftest`] with perftest flags; returns the client's result
/// row (empty where the programs are not installed).
fn assert_perftest_with(name: &str, args: &[&str]) -> Vec<f64> {
    let Some((s, c)) = pair(name, args) else {
        return Vec::new();
    };
    let (ts, tc) = (text(&s), text(&c));
    assert!(s.status.success(), "{name} server: {ts}");
    assert!(c.status.success(), "{name} client: {tc}");
    let row = result_row(&tc);
    if name.ends_with("_bw") {
        // #bytes #iterations BW-peak BW-average MsgRate
        assert!(row.len() >= 5, "{name}: no result row: {tc}");
        assert!(
            row[1] > 0.0 && row[3] > 0.0,
            "{name}: bandwidth {row:?}: {tc}"
        );
        assert!(row[4] > 0.0, "{name}: message rate {row:?}: {tc}");
    } else {
        assert_latency_row(&row, name, &tc);
    }
    row
}

#[test]
fn ib_write_bw_runs() {
    assert_perftest("ib_write_bw", "18721");
}

#[test]
fn ib_write_lat_runs() {
    assert_perftest("ib_write_lat", "18722");
}

#[test]
fn ib_read_bw_runs() {
    assert_perftest("ib_read_bw", "18723");
}

#[test]
fn ib_read_lat_runs() {
    assert_perftest("ib_read_lat", "18724");
}

#[test]
fn ib_send_bw_runs() {
    assert_perftest("ib_send_bw", "18725");
}

#[test]
fn ib_send_lat_runs() {
    assert_perftest("ib_send_lat", "18726");
}

/// UD: perftest sizes `ib_send_bw`'s messages to the port's active MTU
/// (4096 on loopback), which a UD QP must carry in one packet although it
/// has no path MTU attribute of its own.
#[test]
fn ib_send_bw_and_lat_run_over_ud() {
    let row = assert_perftest_with("ib_send_bw", &["-p", "18752", "-c", "UD"]);
    if let Some(bytes) = row.first() {
        assert_eq!(*bytes, 4096.0, "{row:?}");
    }
    assert_perftest_with("ib_send_lat", &["-p", "18753", "-c", "UD"]);
}

#[test]
fn ib_atomic_bw_runs() {
    assert_perftest("ib_atomic_bw", "18727");
}

#[test]
fn ib_atomic_lat_runs() {
    assert_perftest("ib_atomic_lat", "18728");
}

/// `rocelab perftest TEST ARGS...` over rocelab's own UDP backend.
fn rocelab_perftest(test: &str, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocelab"));
    c.arg("perftest").arg(test).args(args);
    c
}

/// Debian's `ib_TEST` (over the shim) and `rocelab perftest TEST` against
/// each other, perftest's default flags on TCP `port`; `debian_serves`
/// picks the server. Returns (server, client) outputs.
fn interop(test: &str, port: &str, debian_serves: bool) -> Option<(Output, Output)> {
    let prog = program(&format!("ib_{test}"))?;
    // rocelab's side gets its own device address, derived from the TCP
    // port, so that tests running at once never share 127.0.0.1:4791.
    let p: u16 = port.parse().unwrap();
    let bind = format!("127.92.{}.{}", p >> 8, (p & 0xff) % 250 + 1);
    let side = |serve: bool, debian: bool| {
        let mut args = vec!["-p", port];
        if !serve {
            args.push("localhost");
        }
        if debian {
            exec(&prog, &args)
        } else {
            args.extend(["--bind", bind.as_str()]);
            rocelab_perftest(test, &args)
        }
    };
    Some(server_and_client(
        side(true, debian_serves),
        || side(false, !debian_serves),
        NOT_YET,
        Duration::from_secs(10),
    ))
}

/// Both sides exit 0 and print a sane result row: a bandwidth above zero
/// (the server prints the client's result) or a latency row.
fn assert_interop(test: &str, port: &str, debian_serves: bool) {
    let Some((s, c)) = interop(test, port, debian_serves) else {
        return;
    };
    let who = if debian_serves {
        "perftest server, rocelab client"
    } else {
        "rocelab server, perftest client"
    };
    for (side, o) in [("server", &s), ("client", &c)] {
        let t = text(o);
        assert!(o.status.success(), "{test} {who}: {side}: {t}");
        let what = format!("{test} {who}: {side}");
        if test.ends_with("_bw") {
            assert_default_bw_row(&t, &what);
        } else {
            let row = result_row(&t);
            assert_latency_row(&row, &what, &t);
            assert_eq!((row[0], row[1]), (2.0, 1000.0), "{what}: {t}");
        }
    }
}

#[test]
fn perftest_write_bw_server_with_rocelab_client() {
    assert_interop("write_bw", "18631", true);
}

#[test]
fn rocelab_write_bw_server_with_perftest_client() {
    assert_interop("write_bw", "18632", false);
}

#[test]
fn perftest_read_bw_server_with_rocelab_client() {
    assert_interop("read_bw", "18633", true);
}

#[test]
fn rocelab_read_bw_server_with_perftest_client() {
    assert_interop("read_bw", "18634", false);
}

#[test]
fn perftest_send_lat_server_with_rocelab_client() {
    assert_interop("send_lat", "18635", true);
}

#[test]
fn rocelab_send_lat_server_with_perftest_client() {
    assert_interop("send_lat", "18636", false);
}

/// CRC-32 (IEEE 802.3, reflected, bit by bit): an implementation of the
/// ICRC's CRC independent of the one that emitted the packets.
fn crc32_bitwise(bytes: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in bytes {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0xEDB8_8320
            } else {
                c >> 1
            };
        }
    }
    !c
}

/// The ICRC of a RoCEv2 IPv4 packet (`ip` from the IP header to the end,
/// ICRC included), computed from the specification: 8 bytes of ones for
/// the LRH, then the packet with the variant fields masked to ones (IP
/// TOS, TTL and header checksum, UDP checksum, the BTH's reserved byte),
/// CRC-32 over all of it, sent least significant byte first.
fn icrc_of(ip: &[u8]) -> u32 {
    let ihl = usize::from(ip[0] & 0x0F) * 4;
    let mut m = vec![0xFFu8; 8];
    m.extend_from_slice(&ip[..ip.len() - 4]);
    let at = |i: usize| 8 + i;
    m[at(1)] = 0xFF; // TOS
    m[at(8)] = 0xFF; // TTL
    m[at(10)] = 0xFF; // header checksum
    m[at(11)] = 0xFF;
    m[at(ihl + 6)] = 0xFF; // UDP checksum
    m[at(ihl + 7)] = 0xFF;
    m[at(ihl + 8 + 4)] = 0xFF; // BTH byte 4 (reserved)
    crc32_bitwise(&m)
}

#[test]
fn icrc_reference_matches_a_known_packet() {
    // The CRC-32 check value of the standard ("123456789").
    assert_eq!(crc32_bitwise(b"123456789"), 0xCBF4_3926);
    // A frame the emitter wrote, checked by the reference.
    use roce::wire::samples::{samples, SampleContent};
    let all = samples();
    let v4: Vec<_> = all
        .iter()
        .filter(|s| matches!(s.content, SampleContent::Roce { .. }) && s.frame[12..14] == [8, 0])
        .collect();
    assert!(!v4.is_empty());
    for s in v4 {
        let ip = &s.frame[14..];
        let n = ip.len();
        assert_eq!(
            icrc_of(ip),
            u32::from_le_bytes(ip[n - 4..].try_into().unwrap())
        );
    }
}

#[test]
fn live_capture_of_ib_write_bw_is_roce_with_valid_icrcs() {
    let Some(prog) = program("ib_write_bw") else {
        return;
    };
    if super::wire::tshark().is_none() {
        return;
    }
    let name = format!("rocelab-cap-{}", std::process::id());
    let ns = match Netns::create(&name) {
        Ok(ns) => ns,
        Err(why) => {
            assert!(
                !under_ci(),
                "the live capture needs a network namespace under CI: {why}"
            );
            eprintln!("skipping the live capture: no network namespace ({why})");
            return;
        }
    };
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let pcap = dir.join(format!("{name}.pcap"));
    let _ = std::fs::remove_file(&pcap);
    // A 32 MiB capture buffer: now that the receiver solves for the
    // identification of the segments the kernel cuts (no ICRC drops, no
    // retransmissions), the run, about 1.7 MB on the wire, takes
    // milliseconds, and with the default 2 MiB one run on a busy host
    // captured 335 of its 400 WRITE packets.
    let mut dumpcap = Command::new("dumpcap");
    dumpcap
        .args([
            "-q",
            "-P",
            "-B",
            "32",
            "-i",
            "lo",
            "-f",
            "udp port 4791",
            "-w",
        ])
        .arg(&pcap);
    let cap = ns
        .exec(&dumpcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut cap = Server(Some(cap));
    // dumpcap writes the file's header once it is capturing.
    let start = Instant::now();
    while std::fs::metadata(&pcap).map_or(true, |m| m.len() < 24) {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "dumpcap did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let args = ["-p", "18740", "-n", "100", "-s", "16384"];
    let mut client_args = args.to_vec();
    client_args.push("localhost");
    let (s, client) = server_and_client(
        ns.exec(&exec(&prog, &args)),
        || ns.exec(&exec(&prog, &client_args)),
        NOT_YET,
        Duration::from_secs(20),
    );
    assert!(client.status.success(), "client: {}", text(&client));
    assert!(s.status.success(), "server: {}", text(&s));
    // Stop the capture as a user would (SIGINT), so that it flushes.
    let c = cap.0.take().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(c.id() as i32, libc::SIGINT) };
    let o = c.wait_with_output().unwrap();
    // Its summary: packets captured, received and dropped.
    let dumpcap_said = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(
        o.status.success(),
        "dumpcap: {}",
        String::from_utf8_lossy(&o.stderr)
    );

    // tshark: every frame is RoCE, nothing malformed, no expert error. The
    // UDP checksums are left unchecked: loopback offloads them, so the
    // capture holds the partial sum a NIC would complete (the ICRC below
    // covers every byte of the packet).
    let bad = super::wire::tshark_flagged_frames(&pcap, false);
    assert!(bad.trim().is_empty(), "tshark flagged frames:\n{bad}");
    let ib = super::wire::run_tshark(
        &pcap,
        &["-Y", "infiniband", "-T", "fields", "-e", "frame.number"],
    );
    // The ICRC of every frame against the reference computation.
    let data = std::fs::read(&pcap).unwrap();
    let reader = roce::wire::pcap::PcapReader::new(&data).unwrap();
    assert_eq!(reader.link_type(), roce::wire::pcap::LINKTYPE_ETHERNET);
    let mut frames = 0usize;
    let mut writes = 0usize;
    for (i, rec) in reader.enumerate() {
        let f = rec.unwrap().data;
        assert_eq!(&f[12..14], &[0x08, 0x00], "frame {}: IPv4", i + 1);
        let ip = &f[14..];
        let n = ip.len();
        let got = u32::from_le_bytes(ip[n - 4..].try_into().unwrap());
        assert_eq!(icrc_of(ip), got, "frame {}: ICRC", i + 1);
        // One RoCE packet per datagram: at most a 4096-byte payload.
        assert!(
            n <= 20 + 8 + 12 + 16 + 4096 + 4,
            "frame {}: {n} bytes",
            i + 1
        );
        // RDMA WRITE FIRST/MIDDLE/LAST/ONLY opcodes (RC).
        if (6..=10).contains(&ip[28]) {
            writes += 1;
        }
        frames += 1;
    }
    assert_eq!(
        ib.lines().count(),
        frames,
        "every frame decodes as InfiniBand"
    );
    // 100 messages of 16 KiB, 4 packets each at a 4096-byte MTU (more
    // with perftest's warm-up).
    assert!(
        writes >= 400,
        "{writes} RDMA WRITE packets of {frames}; dumpcap: {dumpcap_said}"
    );
    drop(ns);
    let _ = std::fs::remove_file(&pcap);
}

#[test]
fn rocelab_says_which_tests_follow_perftests_exchange() {
    let Some(prog) = program("ib_write_lat") else {
        return;
    };
    let server = Server::spawn(rocelab_perftest("write_lat", &["-p", "18637"]));
    std::thread::sleep(Duration::from_millis(300));
    let c = output_within(
        exec(&prog, &["-p", "18637", "localhost"]),
        Duration::from_secs(60),
    );
    let s = server.finish(Duration::from_secs(30));
    assert!(!s.status.success(), "{}", text(&s));
    assert!(!c.status.success(), "{}", text(&c));
    let e = String::from_utf8_lossy(&s.stderr);
    assert!(
        e.contains("perftest's programs") && e.contains("write_bw, read_bw and send_lat"),
        "{e}"
    );
}

/// `ROCELAB_IBV_CC` names the devices' congestion control: a good value
/// leaves the device list as it was, a bad one leaves no devices and says
/// why, naming the variable and what it expects.
#[test]
fn rocelab_ibv_cc_is_read_and_checked() {
    let Some(p) = program("ibv_devices") else {
        return;
    };
    let good = exec(&p, &[])
        .env(
            "ROCELAB_IBV_CC",
            "dcqcn:paper,rate_ai=40Mbps,min_time_between_cnps=8us",
        )
        .output()
        .unwrap();
    let t = text(&good);
    assert!(good.status.success() && t.contains("rocelab0"), "{t}");
    let bad = exec(&p, &[])
        .env("ROCELAB_IBV_CC", "dcqcn:paper,rate_ai=fast")
        .output()
        .unwrap();
    let t = text(&bad);
    assert!(!t.contains("rocelab0"), "{t}");
    assert!(
        t.contains("ROCELAB_IBV_CC: \"rate_ai=fast\": rate_ai = \"fast\": invalid rate"),
        "{t}"
    );
}

/// A Python with rdma-core's bindings (pyverbs): the `python3` on the
/// path, or the system one Debian's `python3-pyverbs` installs for; `None`
/// (after saying why) when neither has them: they are optional, also under
/// CI.
fn pyverbs() -> Option<PathBuf> {
    let on_path = program("python3")?;
    let system = PathBuf::from("/usr/bin/python3");
    let found = [on_path, system].into_iter().find(|py| {
        Command::new(py)
            .args(["-c", "import pyverbs.device"])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if found.is_none() {
        eprintln!("skipping: pyverbs is not installed (apt-get install python3-pyverbs)");
    }
    found
}

#[test]
fn refused_verbs_print_nothing_the_errno_is_the_answer() {
    let Some(py) = pyverbs() else {
        return;
    };
    // A program probing the inline limit with a growing max_inline_data
    // until a QP is refused: the refusal is expected, and a library only
    // returns it.
    let script = "\
from pyverbs.device import Context
from pyverbs.pd import PD
from pyverbs.cq import CQ
from pyverbs.qp import QPInitAttr, QPCap, QP
from pyverbs.pyverbs_error import PyverbsRDMAError
import pyverbs.enums as e
ctx = Context(name='rocelab0')
pd = PD(ctx)
cq = CQ(ctx, 16)
for inline in [0, 64, 256, 1024, 4096, 1 << 16, 1 << 20, 1 << 24]:
    try:
        QP(pd, QPInitAttr(qp_type=e.IBV_QPT_RC, scq=cq, rcq=cq,
                          cap=QPCap(max_inline_data=inline))).close()
    except PyverbsRDMAError as x:
        print('refused', inline, x.error_code)
        break
";
    let cmd = exec(&py, &["-c", script]);
    let out = output_within(cmd, Duration::from_secs(30));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout.contains("refused 65536 22"), "{stdout}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "stderr");
}

/// `ib_write_bw -a`: every message size from 2 bytes to 8 MiB, 5,000
/// iterations each (about 40 GiB), both sides unmodified perftest. It
/// must end with all 23 rows, each with a bandwidth above zero. It holds
/// the machine alone: it keeps two cores busy for about a minute.
#[test]
fn ib_write_bw_all_sizes_completes() {
    let Some(prog) = program("ib_write_bw") else {
        return;
    };
    let _alone = super::testbed::exclusive();
    let (server, client) = server_and_client_within(
        exec(&prog, &["-a", "-p", "18729"]),
        || exec(&prog, &["-a", "-p", "18729", "localhost"]),
        NOT_YET,
        Duration::from_secs(10),
        Duration::from_secs(600),
    );
    let tc = text(&client);
    assert!(client.status.success(), "client: {tc}");
    assert!(server.status.success(), "server: {}", text(&server));
    let rows: Vec<Vec<f64>> = String::from_utf8_lossy(&client.stdout)
        .lines()
        .map(|l| {
            l.split_whitespace()
                .map_while(|w| w.parse::<f64>().ok())
                .collect::<Vec<f64>>()
        })
        .filter(|r| r.len() >= 5 && r[1] == 5000.0)
        .collect();
    let sizes: Vec<u64> = rows.iter().map(|r| r[0] as u64).collect();
    let want: Vec<u64> = (1..=23).map(|k| 1u64 << k).collect();
    assert_eq!(sizes, want, "{tc}");
    assert!(rows.iter().all(|r| r[3] > 0.0), "{tc}");
}
