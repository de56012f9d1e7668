//! Unmodified Debian rdma_cm programs over rocelab's librdmacm.so.1 and
//! libibverbs.so.1 (`rocelab exec` links both): `rping` and perftest's
//! `ib_write_bw -R`, server and client as two processes on loopback with
//! their default flags. rping's client must print its ten pings with the
//! bytes rping writes (the server RDMA-reads them and RDMA-writes them
//! back); perftest must report a bandwidth above zero on both sides.
//!
//! The programs come from Debian's `rdmacm-utils` and `perftest`; without
//! them the tests skip with a message, except under CI, where a missing
//! program fails (see `ibverbs_shim`).

use std::process::Stdio;
use std::time::{Duration, Instant};

use super::ibverbs_shim::{exec, output_within, pair, program, result_row, text, Server};

/// The payload rping puts after `rdma-ping-N: ` in ping `n` of a
/// `size`-byte buffer: letters from `A` + n, cycling through `A`..=`z`,
/// up to the terminating NUL.
fn rping_payload(n: usize, size: usize) -> String {
    let prefix = format!("rdma-ping-{n}: ");
    let mut c = b'A' + (n % 58) as u8;
    let mut out = String::new();
    for _ in prefix.len()..size - 1 {
        out.push(c as char);
        c = if c >= b'z' { b'A' } else { c + 1 };
    }
    out
}

#[test]
fn rping_payload_matches_rpings_pattern() {
    // The first and the tenth line of a real run (64-byte buffer).
    assert_eq!(
        rping_payload(0, 64),
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr"
    );
    assert_eq!(
        rping_payload(9, 64),
        "JKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyzA"
    );
}

#[test]
fn rping_server_and_client_run() {
    let Some(rping) = program("rping") else {
        return;
    };
    let server = exec(&rping, &["-s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut server = Server(Some(server));
    let start = Instant::now();
    let client = loop {
        let out = output_within(
            exec(&rping, &["-c", "-v", "-C", "10"]),
            Duration::from_secs(60),
        );
        // A client that came before the server's rdma_listen is rejected.
        let early = text(&out).contains("RDMA_CM_EVENT_REJECTED");
        if out.status.success() || !early || start.elapsed() > Duration::from_secs(10) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let t = text(&client);
    assert!(client.status.success(), "rping client: {t}");
    let pings: Vec<&str> = t.lines().filter(|l| l.starts_with("ping data: ")).collect();
    assert_eq!(pings.len(), 10, "ten pings: {t}");
    for (n, line) in pings.iter().enumerate() {
        let want = format!("ping data: rdma-ping-{n}: {}", rping_payload(n, 64));
        assert_eq!(*line, want, "ping {n}: {t}");
    }
    let mut s = server.0.take().unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while s.try_wait().unwrap().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = s.kill();
    let s = s.wait_with_output().unwrap();
    let ts = text(&s);
    assert!(s.status.success(), "rping server: {ts}");
    assert!(ts.contains("server DISCONNECT EVENT"), "rping server: {ts}");
}

#[test]
fn ib_write_bw_over_rdma_cm_runs() {
    let Some((s, c)) = pair("ib_write_bw", &["-R"]) else {
        return;
    };
    for (side, o) in [("server", &s), ("client", &c)] {
        let t = text(o);
        assert!(o.status.success(), "ib_write_bw -R {side}: {t}");
        assert!(
            t.contains("rdma_cm QPs\t : ON"),
            "ib_write_bw -R {side}: {t}"
        );
        // #bytes #iterations BW-peak BW-average MsgRate
        let row = result_row(&t);
        assert!(row.len() >= 5, "ib_write_bw -R {side}: no result row: {t}");
        assert_eq!(row[0], 65536.0, "ib_write_bw -R {side}: {t}");
        assert!(
            row[1] >= 1000.0 && row[3] > 0.0 && row[4] > 0.0,
            "ib_write_bw -R {side}: {row:?}: {t}"
        );
    }
}
