//! UCX over the emulated device: Debian's unmodified `ucx_perftest`
//! (ucx-utils) runs a UCP test between a server and a client process on
//! loopback, each under `rocelab exec`, over UCX's verbs transports:
//! `rc_verbs` (with `ud_verbs` as the auxiliary transport that carries
//! the RC wire-up, UCX's `rc_v`) and `ud_verbs` alone. Both must exit 0,
//! the client must print its `Final:` row, and UCX's own log must show
//! the lane it picked on the device (so that a fall-back to another
//! transport cannot pass).
//!
//! Without `ucx_perftest` the tests skip with a message, except under CI,
//! where it fails.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use super::ibverbs_shim::{exec, program, server_and_client};
use super::testbed::text;

/// What `ucx_perftest`'s client says before its server listens.
const NOT_YET: &str = "Connection refused";

/// `ucx_perftest -p port -t test ...` under `rocelab exec` with `tls`.
fn perftest(prog: &PathBuf, tls: &str, test: &str, port: u16, peer: Option<&str>) -> Command {
    let port = port.to_string();
    let mut args = vec!["-p", port.as_str(), "-t", test, "-n", "2000", "-s", "8"];
    args.extend(peer);
    let mut c = exec(prog, &args);
    c.env("UCX_TLS", format!("{tls},self"))
        .env("UCX_NET_DEVICES", "rocelab0:1")
        .env("UCX_LOG_LEVEL", "info")
        .env("UCX_WARN_UNUSED_ENV_VARS", "n");
    c
}

/// Run one test between two processes; both outputs.
fn run(tls: &str, test: &str, port: u16) -> Option<(Output, Output)> {
    let prog = program("ucx_perftest")?;
    let _alone = super::testbed::exclusive();
    Some(server_and_client(
        perftest(&prog, tls, test, port, None),
        || perftest(&prog, tls, test, port, Some("127.0.0.1")),
        NOT_YET,
        Duration::from_secs(10),
    ))
}

/// The checks every case makes; `lane` is the transport UCX must name.
fn check(tls: &str, test: &str, port: u16, lane: &str) {
    let Some((server, client)) = run(tls, test, port) else {
        return;
    };
    let (s, c) = (text(&server), text(&client));
    assert!(client.status.success(), "{tls} {test} client:\n{c}");
    assert!(server.status.success(), "{tls} {test} server:\n{s}");
    let last = c
        .lines()
        .find(|l| l.starts_with("Final:"))
        .unwrap_or_else(|| panic!("{tls} {test}: no Final row\n{c}"));
    // Final: iterations, then latency and bandwidth figures, all positive.
    let numbers: Vec<f64> = last
        .split_whitespace()
        .skip(1)
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(numbers.first(), Some(&2000.0), "{last}");
    assert!(numbers.iter().skip(1).all(|&x| x > 0.0), "{last}");
    let picked = format!("{lane}/rocelab0:1");
    assert!(
        c.lines()
            .any(|l| l.contains("ep_cfg[") && l.contains(&picked)),
        "{tls} {test}: UCX did not pick {picked}\n{c}"
    );
}

#[test]
fn ucx_tag_lat_over_rc_verbs() {
    check("rc_v", "tag_lat", 18791, "rc_verbs");
}

#[test]
fn ucx_put_bw_over_rc_verbs() {
    check("rc_v", "ucp_put_bw", 18792, "rc_verbs");
}

#[test]
fn ucx_tag_lat_over_ud_verbs() {
    check("ud_verbs", "tag_lat", 18793, "ud_verbs");
}

#[test]
fn ucx_put_bw_over_ud_verbs() {
    check("ud_verbs", "ucp_put_bw", 18794, "ud_verbs");
}
