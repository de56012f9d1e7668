//! The CM against hostile or slow peers: fake peers written here speak
//! the wire protocol over TCP to ids driven through the exported
//! functions. Tests that need a device load rocelab's `libibverbs.so`
//! from beside the test binary (built by the workspace) and skip, saying
//! so, when it is not there.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{mpsc, Arc, Once};
use std::time::{Duration, Instant};

use super::*;
use crate::id::{read_loop, IdShared};
use crate::wire::{read_msg, write_msg};
use crate::SendPtr;

/// An asynchronous TCP port-space id on a fresh channel whose descriptor
/// is non-blocking.
fn async_id() -> (*mut rdma_event_channel, *mut rdma_cm_id) {
    // SAFETY: the exports, as a program calls them.
    unsafe {
        let ch = rdma_create_event_channel();
        assert!(!ch.is_null());
        libc::fcntl((*ch).fd, libc::F_SETFL, libc::O_NONBLOCK);
        let mut id = ptr::null_mut();
        assert_eq!(rdma_create_id(ch, &mut id, ptr::null_mut(), RDMA_PS_TCP), 0);
        (ch, id)
    }
}

fn shared(id: *mut rdma_cm_id) -> Arc<IdShared> {
    // SAFETY: a live id of ours.
    unsafe { IdRec::from_ptr(id) }.unwrap().sh.clone()
}

/// The next event of `ch` within `wait`: (event, status, id), acknowledged.
fn next_event(
    ch: *mut rdma_event_channel,
    wait: Duration,
) -> Option<(c_int, c_int, *mut rdma_cm_id)> {
    let end = Instant::now() + wait;
    loop {
        let mut ev = ptr::null_mut();
        // SAFETY: our channel; the event is acknowledged once.
        unsafe {
            if rdma_get_cm_event(ch, &mut ev) == 0 {
                let r = ((*ev).event, (*ev).status, (*ev).id);
                rdma_ack_cm_event(ev);
                return Some(r);
            }
        }
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A connected pair on loopback: (ours, the peer's).
fn tcp_pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let peer = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    let (ours, _) = l.accept().unwrap();
    (ours, peer)
}

fn set_buf(s: &TcpStream, opt: c_int, bytes: c_int) {
    // SAFETY: an int option on our socket.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            ptr::from_ref(&bytes).cast(),
            std::mem::size_of::<c_int>() as libc::socklen_t,
        )
    };
    assert_eq!(r, 0);
}

fn mapped(ip: Ipv4Addr) -> [u8; 16] {
    ip.to_ipv6_mapped().octets()
}

/// A REQ or REP body naming `gid`.
fn conn(gid: [u8; 16]) -> Conn {
    Conn {
        gid,
        qpn: 0x42,
        psn: 0x1234,
        qp_type: 2,
        mtu: 3,
        responder_resources: 1,
        initiator_depth: 1,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        flow_control: 0,
        private: Vec::new(),
    }
}

/// Run `f` on another thread; its result if it returns within `wait`.
fn within<T: Send + 'static>(wait: Duration, f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(wait).ok()
}

/// Load rocelab's libibverbs (beside the test binary) before anything
/// opens the devices; false (the test skips) without it.
fn emulated_devices() -> bool {
    static LOAD: Once = Once::new();
    LOAD.call_once(|| {
        let Some(dir) = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|p| p.to_owned()))
        else {
            return;
        };
        let lib = dir.join("libibverbs.so");
        if !lib.is_file() {
            return;
        }
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(lib.as_os_str().as_bytes()).unwrap();
        // SAFETY: loading the emulation's libibverbs; its soname is the one
        // devices() opens, so the loader hands that copy back.
        unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
    });
    let ok = crate::devices::devices()
        .is_ok_and(|d| d.list.first().is_some_and(|dev| dev.ip().is_loopback()));
    if !ok {
        eprintln!("skipping: rocelab's libibverbs.so is not built beside the test binary");
    }
    ok
}

/// A listening id on 0.0.0.0 (no device needed) with `backlog`; its port.
fn listener(backlog: c_int) -> (*mut rdma_event_channel, *mut rdma_cm_id, u16) {
    let (ch, id) = async_id();
    // SAFETY: plain data; all-zero is valid.
    let mut any: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    write_sockaddr(&mut any, SocketAddr::from(([0, 0, 0, 0], 0)));
    // SAFETY: our id and address.
    unsafe {
        assert_eq!(rdma_bind_addr(id, ptr::from_mut(&mut any).cast()), 0);
        assert_eq!(rdma_listen(id, backlog), 0);
    }
    let port = lock(&shared(id).st).src.unwrap().port();
    (ch, id, port)
}

/// A peer that floods DREQs and never reads filled the socket; the CM
/// thread's DREP write blocked holding the id's lock, and
/// `rdma_disconnect` hung behind it. Now the first DREQ alone is
/// answered, no write waits, and the call returns at once.
#[test]
fn a_dreq_flood_never_blocks_disconnect() {
    let (ch, id) = async_id();
    let sh = shared(id);
    let (ours, mut peer) = tcp_pair();
    set_buf(&ours, libc::SO_SNDBUF, 4096);
    set_buf(&peer, libc::SO_RCVBUF, 4096);
    {
        let mut st = lock(&sh.st);
        st.phase = Phase::Connected;
        st.stream = Some(ours.try_clone().unwrap());
    }
    let reader_sh = sh.clone();
    std::thread::spawn(move || read_loop(&reader_sh, ours));
    let flood_peer = peer.try_clone().unwrap();
    std::thread::spawn(move || {
        let mut p = flood_peer;
        let dreq = Msg::Dreq.encode().unwrap();
        let mut burst = Vec::new();
        for _ in 0..1024 {
            burst.extend_from_slice(&dreq);
        }
        for _ in 0..2000 {
            if p.write_all(&burst).is_err() {
                return;
            }
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let idp = SendPtr(id);
    let r = within(Duration::from_secs(3), move || {
        let idp = idp;
        // SAFETY: a live id of ours.
        unsafe { rdma_disconnect(idp.0) }
    });
    assert_eq!(r, Some(0), "rdma_disconnect returned promptly");
    let ev = next_event(ch, Duration::from_secs(2));
    assert_eq!(ev.map(|e| e.0), Some(RDMA_CM_EVENT_DISCONNECTED));
    // The peer got one DREP for all its DREQs, and nothing else.
    peer.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n @ 1..) = peer.read(&mut buf) {
        got.extend_from_slice(&buf[..n]);
    }
    assert_eq!(got, Msg::Drep.encode().unwrap());
    // SAFETY: ours, destroyed once.
    unsafe {
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
    }
}

/// 64 connections that never send their REQ filled the listener's
/// waiting slots, and every later connection was closed unanswered. Now
/// a peer's REQ is served whatever others do.
#[test]
fn silent_connections_do_not_lock_a_listener_out() {
    let devs = emulated_devices();
    let (ch, id, port) = listener(0);
    let to = SocketAddr::from(([127, 0, 0, 1], port));
    let silent: Vec<TcpStream> = (0..100).map(|_| TcpStream::connect(to).unwrap()).collect();
    // And one that sends a byte now and then.
    let mut slow = TcpStream::connect(to).unwrap();
    slow.write_all(b"R").unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut good = TcpStream::connect(to).unwrap();
    let src = match good.local_addr().unwrap().ip() {
        IpAddr::V4(a) => a,
        IpAddr::V6(_) => unreachable!(),
    };
    write_msg(&mut good, &Msg::Req(conn(mapped(src)))).unwrap();
    good.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    if devs {
        let ev = next_event(ch, Duration::from_secs(3));
        assert_eq!(ev.map(|e| e.0), Some(RDMA_CM_EVENT_CONNECT_REQUEST));
        // SAFETY: the request's id, ours.
        unsafe { rdma_destroy_id(ev.unwrap().2) };
    } else {
        // Without a device the request is answered with a REJ.
        let m = read_msg(&mut good);
        assert!(matches!(m, Ok(Some(Msg::Rej(_)))), "{m:?}");
    }
    drop(silent);
    drop(slow);
    // SAFETY: ours, destroyed once.
    unsafe {
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
    }
}

/// A REP naming a GID that is not its TCP peer's (and not on this host)
/// was taken as the QP's destination. Now the connect is rejected
/// (IB_CM_REJ_INVALID_GID) and the peer gets a REJ; a loopback peer may
/// name its own loopback device address.
#[test]
fn a_rep_must_name_the_gid_it_comes_from() {
    for (gid, want) in [
        (Ipv4Addr::new(10, 1, 2, 3), RDMA_CM_EVENT_REJECTED),
        (Ipv4Addr::new(127, 0, 9, 9), RDMA_CM_EVENT_CONNECT_RESPONSE),
    ] {
        let (ch, id) = async_id();
        let sh = shared(id);
        let (ours, mut peer) = tcp_pair();
        {
            let mut st = lock(&sh.st);
            st.phase = Phase::Connecting;
            st.req_qp_type = 2;
            st.stream = Some(ours.try_clone().unwrap());
        }
        let reader_sh = sh.clone();
        std::thread::spawn(move || read_loop(&reader_sh, ours));
        write_msg(&mut peer, &Msg::Rep(conn(mapped(gid)))).unwrap();
        let ev = next_event(ch, Duration::from_secs(3)).unwrap();
        assert_eq!(ev.0, want, "GID {gid}");
        if want == RDMA_CM_EVENT_REJECTED {
            assert_eq!(ev.1, crate::id::REJ_INVALID_GID);
            peer.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            assert!(matches!(read_msg(&mut peer), Ok(Some(Msg::Rej(_)))));
        }
        // SAFETY: ours, destroyed once.
        unsafe {
            rdma_destroy_id(id);
            rdma_destroy_event_channel(ch);
        }
    }
}

/// Take every event that arrives within `wait`: (event, status, id).
fn drain(ch: *mut rdma_event_channel, wait: Duration) -> Vec<(c_int, c_int, *mut rdma_cm_id)> {
    let mut out = Vec::new();
    while let Some(e) = next_event(ch, wait) {
        out.push(e);
    }
    out
}

/// Whether the listener answered `s` with a REJ within `wait` (false: no
/// answer yet).
fn rejected(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    matches!(read_msg(s), Ok(Some(Msg::Rej(_))))
}

/// A REQ from 127.0.0.1 that names `gid`.
fn send_req(port: u16, gid: Ipv4Addr) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    write_msg(&mut s, &Msg::Req(conn(mapped(gid)))).unwrap();
    s
}

/// A REQ naming a GID other than its connection's address (another
/// host's, or another loopback device's) was reported and its GID became
/// the QP's destination. Now it is refused with a REJ and never reported.
#[test]
fn a_req_must_name_the_gid_it_comes_from() {
    if !emulated_devices() {
        return;
    }
    let (ch, id, port) = listener(0);
    for bad in [Ipv4Addr::new(10, 1, 2, 3), Ipv4Addr::new(127, 0, 9, 9)] {
        let mut s = send_req(port, bad);
        assert!(rejected(&mut s, Duration::from_secs(3)), "GID {bad}");
    }
    assert!(next_event(ch, Duration::from_millis(300)).is_none());
    let _good = send_req(port, Ipv4Addr::LOCALHOST);
    let ev = next_event(ch, Duration::from_secs(3)).unwrap();
    assert_eq!(ev.0, RDMA_CM_EVENT_CONNECT_REQUEST);
    // SAFETY: ours, destroyed once.
    unsafe {
        rdma_destroy_id(ev.2);
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
    }
}

/// `rdma_listen`'s backlog was ignored. Now it bounds the connect
/// requests reported and not yet taken: one more is refused, and taking
/// one makes room.
#[test]
fn the_backlog_bounds_requests_not_yet_taken() {
    if !emulated_devices() {
        return;
    }
    let (ch, id, port) = listener(2);
    let mut first = vec![
        send_req(port, Ipv4Addr::LOCALHOST),
        send_req(port, Ipv4Addr::LOCALHOST),
    ];
    std::thread::sleep(Duration::from_millis(300));
    let mut third = send_req(port, Ipv4Addr::LOCALHOST);
    assert!(
        rejected(&mut third, Duration::from_secs(3)),
        "over the backlog"
    );
    for s in &mut first {
        assert!(
            !rejected(s, Duration::from_millis(100)),
            "within the backlog"
        );
    }
    let taken = next_event(ch, Duration::from_secs(1)).unwrap();
    assert_eq!(taken.0, RDMA_CM_EVENT_CONNECT_REQUEST);
    let mut fourth = send_req(port, Ipv4Addr::LOCALHOST);
    assert!(
        !rejected(&mut fourth, Duration::from_millis(500)),
        "room again"
    );
    let rest = drain(ch, Duration::from_millis(300));
    assert_eq!(rest.len(), 2, "the second and the fourth");
    // SAFETY: ours, destroyed once.
    unsafe {
        for e in rest.iter().chain([&taken]) {
            rdma_destroy_id(e.2);
        }
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
    }
}

/// The active side connected from wherever the kernel chose (127.0.0.1
/// on loopback) while its REQ named its device's 127.0.H.L, so no REQ
/// could be checked against its connection. Now the connection comes from
/// the device's address, the REQ's GID.
#[test]
fn a_connection_comes_from_the_gid_its_req_names() {
    if !emulated_devices() {
        return;
    }
    let fake = TcpListener::bind("127.0.0.1:0").unwrap();
    let dst = fake.local_addr().unwrap();
    let (ch, id) = async_id();
    // SAFETY: plain data; all-zero is valid.
    let mut to: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    write_sockaddr(&mut to, dst);
    let mut p = rdma_conn_param::EMPTY;
    p.qp_num = 0x123;
    // SAFETY: our id and arguments.
    unsafe {
        assert_eq!(
            rdma_resolve_addr(id, ptr::null_mut(), ptr::from_mut(&mut to).cast(), 1000),
            0
        );
        assert_eq!(
            next_event(ch, Duration::from_secs(1)).unwrap().0,
            RDMA_CM_EVENT_ADDR_RESOLVED
        );
        assert_eq!(rdma_resolve_route(id, 1000), 0);
        assert_eq!(
            next_event(ch, Duration::from_secs(1)).unwrap().0,
            RDMA_CM_EVENT_ROUTE_RESOLVED
        );
        assert_eq!(rdma_connect(id, &mut p), 0);
    }
    let (mut s, from) = fake.accept().unwrap();
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let Ok(Some(Msg::Req(req))) = read_msg(&mut s) else {
        panic!("no REQ");
    };
    let dev_ip = crate::devices::devices().unwrap().list[0].ip();
    assert_eq!(from.ip(), IpAddr::V4(dev_ip));
    assert_eq!(req.gid, mapped(dev_ip));
    assert!(crate::id::gid_admitted(&req.gid, from.ip(), false));
    drop(s);
    // SAFETY: ours, destroyed once.
    unsafe {
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
    }
}

#[test]
fn the_gid_rule() {
    use crate::id::gid_admitted;
    let g = |a: [u8; 4]| mapped(Ipv4Addr::from(a));
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    // A REQ: exactly its connection's address (IPv4 or IPv4-mapped).
    assert!(gid_admitted(&g([10, 0, 0, 1]), ip("10.0.0.1"), false));
    assert!(gid_admitted(
        &g([10, 0, 0, 1]),
        ip("::ffff:10.0.0.1"),
        false
    ));
    assert!(!gid_admitted(&g([10, 0, 0, 2]), ip("10.0.0.1"), false));
    assert!(!gid_admitted(&g([127, 0, 1, 2]), ip("127.0.0.1"), false));
    // ... except over IPv6 loopback, where a loopback GID is this host.
    assert!(gid_admitted(&g([127, 0, 1, 2]), ip("::1"), false));
    assert!(!gid_admitted(&g([10, 0, 0, 1]), ip("::1"), false));
    // A REP over loopback may name any loopback GID, never another host.
    assert!(gid_admitted(&g([127, 0, 1, 2]), ip("127.0.0.1"), true));
    assert!(!gid_admitted(&g([10, 0, 0, 1]), ip("127.0.0.1"), true));
    assert!(!gid_admitted(&g([10, 0, 0, 1]), ip("10.0.0.2"), true));
    assert!(gid_admitted(&g([10, 0, 0, 2]), ip("10.0.0.2"), true));
    // Not an IPv4-mapped GID at all.
    let mut odd = g([10, 0, 0, 1]);
    odd[0] = 0xfe;
    assert!(!gid_admitted(&odd, ip("10.0.0.1"), true));
}

/// The wait for a REQ was per read: a peer sending a byte now and then
/// held its connection (and a waiting slot) for ever. Now the whole REQ
/// must be in by a deadline, however the bytes trickle in.
#[test]
fn a_trickling_req_is_dropped_at_its_deadline() {
    let (ch, id, port) = listener(0);
    let mut slow = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let bytes = Msg::Req(conn(mapped(Ipv4Addr::LOCALHOST)))
        .encode()
        .unwrap();
    let start = Instant::now();
    let mut closed = false;
    for b in &bytes[..bytes.len() - 1] {
        if slow.write_all(std::slice::from_ref(b)).is_err() {
            closed = true;
            break;
        }
        slow.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let mut x = [0u8; 1];
        let gone = match slow.read(&mut x) {
            Ok(n) => n == 0,
            Err(e) => !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
        };
        if gone {
            closed = true;
            break;
        }
    }
    let took = start.elapsed();
    assert!(closed, "still open after {took:?}");
    assert!(
        took < crate::id::REQ_WAIT + Duration::from_secs(2),
        "{took:?}"
    );
    assert!(next_event(ch, Duration::from_millis(100)).is_none());
    // SAFETY: ours, destroyed once.
    unsafe {
        rdma_destroy_id(id);
        rdma_destroy_event_channel(ch);
    }
}
