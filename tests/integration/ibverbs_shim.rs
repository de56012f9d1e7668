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

fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The shim the tests load: the `libibverbs.so` cargo built for this test
/// run (a dev-dependency), beside the test binaries.
fn shim() -> PathBuf {
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_rocelab"));
    let lib = exe.parent().unwrap().join("deps").join("libibverbs.so");
    assert!(lib.is_file(), "{} was not built", lib.display());
    lib
}

/// `program`'s path, or `None` (after saying why) when the test should skip.
fn program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    if let Some(p) = std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
    {
        return Some(p);
    }
    assert!(
        !under_ci(),
        "{name} is required under CI (apt-get install ibverbs-utils perftest)"
    );
    eprintln!("skipping: {name} is not installed (apt-get install ibverbs-utils perftest)");
    None
}

/// `rocelab exec --lib SHIM -- program args...`.
fn exec(program: &PathBuf, args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocelab"));
    c.arg("exec")
        .arg("--lib")
        .arg(shim())
        .arg("--")
        .arg(program);
    c.args(args);
    c.env_remove("ROCELAB_IBV_DEVICES");
    c.env("ROCELAB_IBV_QUIET", "1");
    c
}

fn text(o: &Output) -> String {
    format!(
        "exit: {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status,
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Kills the server when a test fails before it exits.
struct Server(Option<Child>);

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(c) = &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Run `name` as server (`args`) and client (`args` + `localhost`); return
/// both outputs. The client retries while the server is not listening yet.
fn pair(name: &str, args: &[&str]) -> Option<(Output, Output)> {
    let prog = program(name)?;
    let server = exec(&prog, args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server(Some(server));
    let start = Instant::now();
    let client = loop {
        let mut client_args = args.to_vec();
        client_args.push("localhost");
        let out = exec(&prog, &client_args).output().unwrap();
        let refused = String::from_utf8_lossy(&out.stderr).contains("Couldn't connect")
            || String::from_utf8_lossy(&out.stdout).contains("Couldn't connect");
        if out.status.success() || !refused || start.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let s = server.0.take().unwrap().wait_with_output().unwrap();
    Some((s, client))
}

#[test]
fn ibv_devices_lists_the_emulated_device() {
    let Some(p) = program("ibv_devices") else {
        return;
    };
    let out = exec(&p, &[]).output().unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("rocelab0"), "{t}");
    assert!(t.contains("02007f00000012b7"), "node GUID column: {t}");
}

#[test]
fn ibv_devinfo_reports_an_active_roce_port() {
    let Some(p) = program("ibv_devinfo") else {
        return;
    };
    let out = exec(&p, &[]).output().unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    for want in [
        "hca_id:\trocelab0",
        "PORT_ACTIVE (4)",
        "link_layer:\t\tEthernet",
    ] {
        assert!(t.contains(want), "missing {want:?}: {t}");
    }
    let out = exec(&p, &["-v"]).output().unwrap();
    let t = text(&out);
    assert!(out.status.success(), "{t}");
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

fn assert_perftest(name: &str, port: &str) {
    let Some((s, c)) = pair(name, &["-p", port]) else {
        return;
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
        // #bytes #iterations t_min t_max t_typical t_avg t_stdev p99 p99.9
        assert!(row.len() >= 9, "{name}: no latency row: {tc}");
        let (min, max, typical) = (row[2], row[3], row[4]);
        assert!(
            min > 0.0 && min <= typical && typical <= max,
            "{name}: {row:?}: {tc}"
        );
    }
}

#[test]
fn ib_write_bw_runs() {
    assert_perftest("ib_write_bw", "18621");
}

#[test]
fn ib_write_lat_runs() {
    assert_perftest("ib_write_lat", "18622");
}

#[test]
fn ib_read_bw_runs() {
    assert_perftest("ib_read_bw", "18623");
}

#[test]
fn ib_read_lat_runs() {
    assert_perftest("ib_read_lat", "18624");
}

#[test]
fn ib_send_bw_runs() {
    assert_perftest("ib_send_bw", "18625");
}

#[test]
fn ib_send_lat_runs() {
    assert_perftest("ib_send_lat", "18626");
}

#[test]
fn ib_atomic_bw_runs() {
    assert_perftest("ib_atomic_bw", "18627");
}

#[test]
fn ib_atomic_lat_runs() {
    assert_perftest("ib_atomic_lat", "18628");
}
