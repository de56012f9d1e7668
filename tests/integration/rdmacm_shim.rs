//! Unmodified Debian rdma_cm programs over rocelab's librdmacm.so.1 and
//! libibverbs.so.1 (`rocelab exec` links both): `rping`, `rdma_server` /
//! `rdma_client`, `udaddy` and perftest's `ib_write_bw -R`, server and
//! client as two processes on loopback with
//! their default flags. rping's client must print its ten pings with the
//! bytes rping writes (the server RDMA-reads them and RDMA-writes them
//! back); perftest must report a bandwidth above zero on both sides.
//!
//! The programs come from Debian's `rdmacm-utils` and `perftest`; without
//! them the tests skip with a message, except under CI, where a missing
//! program fails (see `ibverbs_shim`).

use std::process::Output;
use std::time::Duration;

use super::ibverbs_shim::{
    assert_default_bw_row, exec, output_within, pair, program, server_and_client,
};
use super::testbed::text;

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

/// Run `server` with `server_args` and then `client` with `client_args`
/// over the shims; the client is retried while its output contains
/// `early` (it came before the server's `rdma_listen`). Returns (server,
/// client) outputs, or `None` when a program is missing (skip).
fn cm_pair(
    server: &str,
    server_args: &[&str],
    client: &str,
    client_args: &[&str],
    early: &str,
) -> Option<(Output, Output)> {
    let (server_prog, client_prog) = (program(server)?, program(client)?);
    Some(server_and_client(
        exec(&server_prog, server_args),
        || exec(&client_prog, client_args),
        early,
        Duration::from_secs(10),
    ))
}

#[test]
fn rping_server_and_client_run() {
    let client_args = ["-c", "-v", "-C", "10"];
    let Some((s, client)) = cm_pair("rping", &["-s"], "rping", &client_args, "REJECTED") else {
        return;
    };
    let t = text(&client);
    assert!(client.status.success(), "rping client: {t}");
    let pings: Vec<&str> = t.lines().filter(|l| l.starts_with("ping data: ")).collect();
    assert_eq!(pings.len(), 10, "ten pings: {t}");
    for (n, line) in pings.iter().enumerate() {
        let want = format!("ping data: rdma-ping-{n}: {}", rping_payload(n, 64));
        assert_eq!(*line, want, "ping {n}: {t}");
    }
    let ts = text(&s);
    assert!(s.status.success(), "rping server: {ts}");
    assert!(ts.contains("server DISCONNECT EVENT"), "rping server: {ts}");
}

/// rdmacm-utils' `rdma_server` and `rdma_client` use synchronous ids:
/// `rdma_create_ep`, `rdma_get_request`, blocking accept, connect and
/// disconnect, and the CQs and PD the CM makes for an endpoint. Each sends
/// one message and checks the other's arrived (`end 0`).
#[test]
fn rdma_server_and_client_run() {
    let Some((s, client)) = cm_pair("rdma_server", &[], "rdma_client", &[], "rdma_connect") else {
        return;
    };
    for (side, o) in [("rdma_server", &s), ("rdma_client", &client)] {
        let t = text(o);
        assert!(o.status.success(), "{side}: {t}");
        assert!(t.contains(&format!("{side}: end 0")), "{side}: {t}");
    }
}

/// rdmacm-utils' `udaddy`: UD port-space ids, a SIDR-style exchange (the
/// client's ESTABLISHED event carries the server's QPN, Q_Key and an
/// address vector), then UD sends both ways.
#[test]
fn udaddy_server_and_client_run() {
    let client_args = ["-s", "127.0.0.1"];
    let Some((s, client)) = cm_pair("udaddy", &[], "udaddy", &client_args, "REJECTED") else {
        return;
    };
    for (side, o) in [("server", &s), ("client", &client)] {
        let t = text(o);
        assert!(o.status.success(), "udaddy {side}: {t}");
        assert!(t.contains("data transfers complete"), "udaddy {side}: {t}");
        assert!(t.contains("return status 0"), "udaddy {side}: {t}");
    }
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
        assert_default_bw_row(&t, &format!("ib_write_bw -R {side}"));
    }
}

/// A C program (compiled against the installed `<rdma/rdma_cma.h>`) that
/// first feeds its own listener malformed CM messages over plain TCP, then
/// connects to itself twice through the CM on 127.0.0.1:PORT: once
/// rejected, once accepted without QPs (the program's own QP numbers), and
/// prints what each side's events carry: private data both ways, the
/// connection parameters, reject status, and the disconnect events.
const CM_EXCHANGE_C: &str = r#"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <unistd.h>
#include <sys/socket.h>
#include <rdma/rdma_cma.h>

static struct rdma_cm_event *expect(struct rdma_event_channel *ch, int want) {
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ch, &ev)) { perror("rdma_get_cm_event"); exit(2); }
    if (ev->event != want) {
        printf("unexpected %s (status %d), wanted %s\n", rdma_event_str(ev->event),
               ev->status, rdma_event_str(want));
        exit(3);
    }
    return ev;
}

static void show(const char *who, struct rdma_cm_event *ev) {
    struct rdma_conn_param *p = &ev->param.conn;
    printf("%s %s status=%d private=%.*s resp=%u init=%u retry=%u rnr=%u qpn=%#x\n", who,
           rdma_event_str(ev->event), ev->status, p->private_data_len,
           p->private_data ? (const char *)p->private_data : "", p->responder_resources,
           p->initiator_depth, p->retry_count, p->rnr_retry_count, p->qp_num);
}

#define CHECK(x) do { if (x) { perror(#x); exit(4); } } while (0)

static struct rdma_cm_id *dial(struct rdma_event_channel *ch, struct sockaddr_in *sin) {
    struct rdma_cm_id *id;
    CHECK(rdma_create_id(ch, &id, NULL, RDMA_PS_TCP));
    CHECK(rdma_resolve_addr(id, NULL, (struct sockaddr *)sin, 2000));
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ADDR_RESOLVED));
    CHECK(rdma_resolve_route(id, 2000));
    rdma_ack_cm_event(expect(ch, RDMA_CM_EVENT_ROUTE_RESOLVED));
    return id;
}

int main(int argc, char **argv) {
    struct rdma_event_channel *srv = rdma_create_event_channel();
    struct rdma_event_channel *cli = rdma_create_event_channel();
    struct rdma_cm_id *listen_id, *a, *child;
    struct rdma_cm_event *ev;
    struct sockaddr_in sin = { .sin_family = AF_INET };
    struct rdma_conn_param c = { 0 };
    sin.sin_port = htons(atoi(argv[1]));
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    CHECK(rdma_create_id(srv, &listen_id, NULL, RDMA_PS_TCP));
    CHECK(rdma_bind_addr(listen_id, (struct sockaddr *)&sin));
    CHECK(rdma_listen(listen_id, 1));
    printf("src port %u\n", ntohs(rdma_get_src_port(listen_id)));

    /* Hostile peers: a header claiming a huge body, then plain garbage.
       The listener drops both and keeps serving. */
    {
        const char *junk[] = { "RLCM\x01\x01\xff\xffxxxx", "GET / HTTP/1.0\r\n\r\n" };
        for (int i = 0; i < 2; i++) {
            int s = socket(AF_INET, SOCK_STREAM, 0);
            CHECK(connect(s, (struct sockaddr *)&sin, sizeof sin));
            CHECK(write(s, junk[i], strlen(junk[i])) < 0);
            close(s);
        }
    }

    /* Rejected. */
    a = dial(cli, &sin);
    c.private_data = "hello"; c.private_data_len = 5;
    c.responder_resources = 2; c.initiator_depth = 3; c.retry_count = 5;
    c.rnr_retry_count = 6; c.qp_num = 0x123;
    CHECK(rdma_connect(a, &c));
    ev = expect(srv, RDMA_CM_EVENT_CONNECT_REQUEST);
    show("server", ev);
    child = ev->id;
    printf("listen id matches %d\n", ev->listen_id == listen_id);
    rdma_ack_cm_event(ev);
    CHECK(rdma_reject(child, "nope", 4));
    ev = expect(cli, RDMA_CM_EVENT_REJECTED);
    show("client", ev);
    rdma_ack_cm_event(ev);
    rdma_destroy_id(child);
    rdma_destroy_id(a);

    /* Accepted, the program's own QP numbers, then disconnected. */
    a = dial(cli, &sin);
    c.private_data = "again"; c.qp_num = 0x456;
    CHECK(rdma_connect(a, &c));
    ev = expect(srv, RDMA_CM_EVENT_CONNECT_REQUEST);
    show("server", ev);
    child = ev->id;
    rdma_ack_cm_event(ev);
    memset(&c, 0, sizeof c);
    c.private_data = "welcome"; c.private_data_len = 7;
    c.responder_resources = 3; c.initiator_depth = 2; c.rnr_retry_count = 7; c.qp_num = 0x789;
    CHECK(rdma_accept(child, &c));
    ev = expect(cli, RDMA_CM_EVENT_CONNECT_RESPONSE);
    show("client", ev);
    rdma_ack_cm_event(ev);
    CHECK(rdma_establish(a));
    ev = expect(srv, RDMA_CM_EVENT_ESTABLISHED);
    show("server", ev);
    rdma_ack_cm_event(ev);
    printf("dst port matches %d\n", rdma_get_dst_port(a) == sin.sin_port);
    CHECK(rdma_disconnect(a));
    rdma_ack_cm_event(expect(srv, RDMA_CM_EVENT_DISCONNECTED));
    rdma_ack_cm_event(expect(cli, RDMA_CM_EVENT_DISCONNECTED));
    printf("disconnected\n");
    /* Too much private data for a REQ is refused. */
    rdma_destroy_id(a);
    a = dial(cli, &sin);
    {
        char big[57] = { 0 };
        c.private_data = big; c.private_data_len = sizeof big;
        printf("oversized connect %d\n", rdma_connect(a, &c));
    }
    rdma_destroy_id(a);
    rdma_destroy_id(child);
    rdma_destroy_id(listen_id);
    rdma_destroy_event_channel(srv);
    rdma_destroy_event_channel(cli);
    printf("done\n");
    return 0;
}
"#;

#[test]
fn cm_events_carry_private_data_parameters_and_rejects() {
    use super::wire::under_ci;
    if !std::path::Path::new("/usr/include/rdma/rdma_cma.h").is_file() {
        assert!(
            !under_ci(),
            "<rdma/rdma_cma.h> is required under CI (librdmacm-dev)"
        );
        eprintln!("skipping: <rdma/rdma_cma.h> is not installed (apt-get install librdmacm-dev)");
        return;
    }
    let dir = std::env::temp_dir().join(format!("rocelab-cm-exchange-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (src, exe) = (dir.join("cm.c"), dir.join("cm"));
    std::fs::write(&src, CM_EXCHANGE_C).unwrap();
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let built = std::process::Command::new(&cc)
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .args(["-lrdmacm", "-libverbs"])
        .output()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    assert!(built.status.success(), "{cc}: {}", text(&built));
    let out = output_within(exec(&exe, &["18751"]), Duration::from_secs(60));
    let t = text(&out);
    std::fs::remove_dir_all(&dir).ok();
    assert!(out.status.success(), "{t}");
    for want in [
        "src port 18751\n",
        // The request as the passive side sees it: depths swapped.
        "server RDMA_CM_EVENT_CONNECT_REQUEST status=0 private=hello resp=3 init=2 retry=5 rnr=6 qpn=0x123\n",
        "listen id matches 1\n",
        "client RDMA_CM_EVENT_REJECTED status=28 private=nope ",
        "server RDMA_CM_EVENT_CONNECT_REQUEST status=0 private=again resp=3 init=2 retry=5 rnr=6 qpn=0x456\n",
        // The reply: its depths swapped, the passive side keeps the
        // request's retry count.
        "client RDMA_CM_EVENT_CONNECT_RESPONSE status=0 private=welcome resp=2 init=3 retry=5 rnr=7 qpn=0x789\n",
        "server RDMA_CM_EVENT_ESTABLISHED status=0 ",
        "dst port matches 1\n",
        "disconnected\n",
        "oversized connect -1\n",
        "done\n",
    ] {
        assert!(t.contains(want), "missing {want:?}:\n{t}");
    }
}

/// Hostile peers against a real `rping -s`: a REQ naming another host's
/// GID is refused (a REJ) before rping sees it, and 300 connections that
/// never send a REQ (one sending a byte now and then) do not lock the
/// listener out: a real `rping -c` still connects and pings. Before, the
/// bogus REQ became rping's one client, and connections past the 64th
/// were closed unanswered.
#[test]
fn rping_server_withstands_bogus_and_silent_peers() {
    use rdmacm::wire::{read_msg, write_msg, Conn, Msg};
    use std::io::Write as _;
    use std::net::TcpStream;
    use std::time::Instant;

    const PORT: u16 = 18762;
    let (Some(server), Some(client)) = (program("rping"), program("rping")) else {
        return;
    };
    let port = PORT.to_string();
    let mut hostile: Vec<TcpStream> = Vec::new();
    let (s, c) = server_and_client(
        exec(&server, &["-s", "-a", "127.0.0.1", "-p", &port]),
        || {
            if hostile.is_empty() {
                let start = Instant::now();
                let mut bogus = loop {
                    match TcpStream::connect(("127.0.0.1", PORT)) {
                        Ok(s) => break s,
                        Err(e) if start.elapsed() < Duration::from_secs(10) => {
                            let _ = e;
                            std::thread::sleep(Duration::from_millis(50));
                        }
                        Err(e) => panic!("rping -s never listened: {e}"),
                    }
                };
                let mut gid = [0u8; 16];
                gid[10..].copy_from_slice(&[0xff, 0xff, 10, 1, 2, 3]);
                let req = Conn {
                    gid,
                    qpn: 0x42,
                    psn: 1,
                    qp_type: 2,
                    mtu: 3,
                    responder_resources: 1,
                    initiator_depth: 1,
                    retry_count: 7,
                    rnr_retry_count: 7,
                    srq: 0,
                    flow_control: 0,
                    private: vec![0; 56],
                };
                write_msg(&mut bogus, &Msg::Req(req)).unwrap();
                bogus
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                let m = read_msg(&mut bogus);
                assert!(matches!(m, Ok(Some(Msg::Rej(_)))), "bogus GID: {m:?}");
                for _ in 0..300 {
                    hostile.push(TcpStream::connect(("127.0.0.1", PORT)).unwrap());
                }
                let _ = hostile[0].write_all(b"R");
            }
            exec(
                &client,
                &["-c", "-a", "127.0.0.1", "-p", &port, "-C", "3", "-v"],
            )
        },
        "REJECTED",
        Duration::from_secs(10),
    );
    drop(hostile);
    let t = text(&c);
    assert!(c.status.success(), "rping client: {t}");
    let pings = t.lines().filter(|l| l.starts_with("ping data: ")).count();
    assert_eq!(pings, 3, "three pings: {t}");
    let ts = text(&s);
    assert!(s.status.success(), "rping server: {ts}");
}
