//! The UDP emulation under a hostile peer: packets built byte by byte in
//! this file (BTH, RETH, AtomicETH, IETH, DETH, payload, pad, ICRC) and
//! sent from plain UDP sockets on loopback, never by the engine. Each case
//! checks the documented NAK or silent drop, the target memory, the
//! counter that recorded it, and that the victim works afterwards.
//!
//! The victim device's datagram path is wrapped in a gate: while it is
//! held the device receives nothing, so that a burst sent meanwhile is
//! handled in one receive batch, as a NIC sees back-to-back packets.

use crate::mr_bytes::{bytes, edit};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use verbs_emu::backend::io::{DatagramIo, IoStats, SocketIo};
use verbs_emu::backend::sys::{RxBatch, TxBatch};
use verbs_emu::backend::udp::{UdpBackend, UdpConfig};
use verbs_emu::backend::AsyncEvent;
use verbs_emu::transport::QpStats;
use verbs_emu::verbs::{
    AccessFlags, AhAttr, CompletionQueue, Context, Endpoint, Gid, MemoryRegion, Mtu, PostError,
    ProtectionDomain, QpAttr, QpState, QpType, QueuePair, RecvWr, SendFlags, SendOp, SendWr, Sge,
    VerbsError, WcStatus,
};
use verbs_emu::wire::icrc::{Icrc, IpEncap, UdpEncap};

use super::ALL;
/// The QPN the victim believes its peer has.
const PEER_QPN: u32 = 0x99;
/// The first PSN the victim expects.
const RQ_PSN: u32 = 1000;
const LEN: usize = 4096;

/// A datagram path that receives nothing while `held`, and loses what it
/// receives while `dropping`.
struct Gate {
    inner: SocketIo,
    held: Arc<AtomicBool>,
    dropping: Arc<AtomicBool>,
}

impl DatagramIo for Gate {
    fn local_addr(&self) -> SocketAddrV4 {
        self.inner.local_addr()
    }
    fn gso(&self) -> bool {
        self.inner.gso()
    }
    fn send(&mut self, batch: &TxBatch) -> io::Result<()> {
        self.inner.send(batch)
    }
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        if self.held.load(Ordering::SeqCst) {
            return Ok(0);
        }
        let n = self.inner.recv(batch)?;
        if self.dropping.load(Ordering::SeqCst) {
            return Ok(0);
        }
        Ok(n)
    }
    fn stats(&self) -> IoStats {
        self.inner.stats()
    }
}

struct Victim {
    backend: Arc<UdpBackend>,
    _ctx: Context,
    _pd: ProtectionDomain,
    /// A second PD with a region of its own, fully remote-accessible.
    _pd2: ProtectionDomain,
    cq: CompletionQueue,
    mr: MemoryRegion,
    other: MemoryRegion,
    qp: QueuePair,
    gate: Arc<AtomicBool>,
    dropping: Arc<AtomicBool>,
    addr: SocketAddrV4,
}

/// The peer the victim is connected to: a plain socket on 127.<net>.0.1.
struct Peer {
    sock: UdpSocket,
    addr: SocketAddrV4,
}

fn victim_cfg(ip: Ipv4Addr, tweak: impl FnOnce(&mut UdpConfig)) -> (Victim, Peer) {
    let held = Arc::new(AtomicBool::new(false));
    let mut cfg = UdpConfig::new(SocketAddrV4::new(ip, 4791));
    tweak(&mut cfg);
    let dropping = Arc::new(AtomicBool::new(false));
    let (gate, drop2) = (held.clone(), dropping.clone());
    let backend = Arc::new(
        UdpBackend::open_with(cfg, move |inner| {
            Ok(Box::new(Gate {
                inner,
                held: gate,
                dropping: drop2,
            }))
        })
        .expect("bind"),
    );
    let ctx = Context::from_backend(backend.clone());
    let pd = ctx.alloc_pd().unwrap();
    let pd2 = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64).unwrap();
    let mr = pd.alloc_mr(LEN, ALL).unwrap();
    let other = pd2.alloc_mr(LEN, ALL).unwrap();
    for (i, b) in edit(&mr).iter_mut().enumerate() {
        *b = i as u8;
    }
    edit(&other).fill(0x5A);
    let o = ip.octets();
    let peer_ip = Ipv4Addr::new(o[0], o[1], o[2], 1);
    let sock = UdpSocket::bind(SocketAddrV4::new(peer_ip, 0)).unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let peer_addr = match sock.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        _ => unreachable!(),
    };
    let qp = qp_of(&pd, &cq, QpType::Rc);
    let v = Victim {
        backend,
        _ctx: ctx,
        _pd: pd,
        _pd2: pd2,
        cq,
        mr,
        other,
        qp,
        gate: held,
        dropping,
        addr: SocketAddrV4::new(ip, 4791),
    };
    (
        v,
        Peer {
            sock,
            addr: peer_addr,
        },
    )
}

fn victim(ip: Ipv4Addr, qp_type: QpType) -> (Victim, Peer) {
    let (mut v, p) = victim_cfg(ip, |_| {});
    if qp_type != QpType::Rc {
        v.qp = qp_of(&v._pd, &v.cq, qp_type);
    }
    (v, p)
}

/// A QP of `qp_type` in `pd` on `cq`, 16 WRs deep each way.
fn qp_of(pd: &ProtectionDomain, cq: &CompletionQueue, qp_type: QpType) -> QueuePair {
    pd.qp_builder(qp_type)
        .cq(cq)
        .max_send_wr(16)
        .max_recv_wr(16)
        .build()
        .unwrap()
}

/// Two victims on 127.<net>.0.1 and 127.<net>.0.2, not connected yet.
fn two_victims(net: u8) -> (Victim, Victim) {
    let (a, _) = victim_cfg(Ipv4Addr::new(127, net, 0, 1), |_| {});
    let (b, _) = victim_cfg(Ipv4Addr::new(127, net, 0, 2), |_| {});
    (a, b)
}

/// Connect QP `a` (PSN 10, region `am`) and QP `b` (PSN 20, region `bm`)
/// to each other with verbs `connect`; their endpoints.
fn connect_qps(
    a: &QueuePair,
    b: &QueuePair,
    am: &MemoryRegion,
    bm: &MemoryRegion,
) -> (Endpoint, Endpoint) {
    let ea = a.endpoint(10, 0, Some(am)).unwrap();
    let eb = b.endpoint(20, 0, Some(bm)).unwrap();
    a.connect(ea.psn, &eb, Mtu::Mtu1024, ALL).unwrap();
    b.connect(eb.psn, &ea, Mtu::Mtu1024, ALL).unwrap();
    (ea, eb)
}

/// RESET -> INIT -> RTR -> RTS towards `peer`, with 2 responder resources.
fn connect(v: &Victim, peer: SocketAddrV4) {
    let qp = &v.qp;
    qp.modify(&QpAttr::new().with_state(QpState::Reset))
        .unwrap();
    let mut av = AhAttr::to_gid(Gid::from_ip((*peer.ip()).into()));
    av.dport = Some(peer.port());
    let init = QpAttr::new()
        .with_state(QpState::Init)
        .with_pkey_index(0)
        .with_port(1);
    if qp.qp_type() == QpType::Ud {
        qp.modify(&init.with_qkey(0x1111_1111)).unwrap();
        qp.modify(&QpAttr::new().with_state(QpState::Rtr)).unwrap();
        qp.modify(&QpAttr::new().with_state(QpState::Rts).with_sq_psn(5000))
            .unwrap();
        return;
    }
    qp.modify(&init.with_access_flags(ALL)).unwrap();
    let rtr = QpAttr::new()
        .with_state(QpState::Rtr)
        .with_av(av)
        .with_path_mtu(Mtu::Mtu1024)
        .with_dest_qpn(verbs_emu::wire::Qpn::new(PEER_QPN))
        .with_rq_psn(RQ_PSN);
    let rts = QpAttr::new().with_state(QpState::Rts).with_sq_psn(5000);
    if qp.qp_type() == QpType::Rc {
        qp.modify(&rtr.with_max_dest_rd_atomic(2).with_min_rnr_timer(1))
            .unwrap();
        qp.modify(
            &rts.with_timeout(14)
                .with_retry_cnt(7)
                .with_rnr_retry(7)
                .with_max_rd_atomic(2),
        )
        .unwrap();
    } else {
        qp.modify(&rtr).unwrap();
        qp.modify(&rts).unwrap();
    }
}

/// One packet, byte by byte: BTH, the extension headers as given, the
/// payload, the pad, and the ICRC over the IPv4/UDP header the victim's
/// receive path assumes (identification 0, DF).
#[allow(clippy::too_many_arguments)]
fn packet(
    from: SocketAddrV4,
    to: SocketAddrV4,
    opcode: u8,
    pkey: u16,
    dest_qp: u32,
    psn: u32,
    ack_req: bool,
    ext: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    let pad = (4 - payload.len() % 4) % 4;
    let mut b = vec![opcode, (pad as u8) << 4];
    b.extend_from_slice(&pkey.to_be_bytes());
    b.push(0);
    b.extend_from_slice(&dest_qp.to_be_bytes()[1..]);
    b.push(if ack_req { 0x80 } else { 0 });
    b.extend_from_slice(&psn.to_be_bytes()[1..]);
    b.extend_from_slice(ext);
    b.extend_from_slice(payload);
    b.extend(std::iter::repeat(0).take(pad));
    let crc = Icrc::for_udp_payload(&encap(from, to), &b).unwrap();
    b.extend_from_slice(&crc.to_le_bytes());
    b
}

/// The IPv4/UDP header the victim's receive path assumes for a datagram
/// from `from` to `to` (identification 0, DF), as the ICRC covers it.
fn encap(from: SocketAddrV4, to: SocketAddrV4) -> UdpEncap {
    UdpEncap {
        ip: IpEncap::V4 {
            src: *from.ip(),
            dst: *to.ip(),
            identification: 0,
            dont_fragment: true,
        },
        src_port: from.port(),
        dst_port: to.port(),
    }
}

/// A request from the peer to the victim's QP under the default P_Key.
fn request(
    v: &Victim,
    p: &Peer,
    opcode: u8,
    psn: u32,
    ack_req: bool,
    ext: &[u8],
    payload: &[u8],
) -> Vec<u8> {
    packet(
        p.addr,
        v.addr,
        opcode,
        0xFFFF,
        v.qp.qpn().value(),
        psn,
        ack_req,
        ext,
        payload,
    )
}

/// An RDMA WRITE ONLY of `data` from `from` into the victim's region at
/// `off`, under P_Key `pkey`: RC asking for an ACK, or (`uc`) UC.
fn write_only(
    v: &Victim,
    from: SocketAddrV4,
    uc: bool,
    pkey: u16,
    psn: u32,
    off: u64,
    data: &[u8],
) -> Vec<u8> {
    let (opcode, ack_req) = if uc { (0x2A, false) } else { (0x0A, true) };
    let ext = reth(v.mr.addr() + off, v.mr.rkey().value(), data.len() as u32);
    packet(
        from,
        v.addr,
        opcode,
        pkey,
        v.qp.qpn().value(),
        psn,
        ack_req,
        &ext,
        data,
    )
}

fn reth(va: u64, rkey: u32, len: u32) -> Vec<u8> {
    let mut e = va.to_be_bytes().to_vec();
    e.extend_from_slice(&rkey.to_be_bytes());
    e.extend_from_slice(&len.to_be_bytes());
    e
}

fn atomic_eth(va: u64, rkey: u32, add: u64) -> Vec<u8> {
    let mut e = va.to_be_bytes().to_vec();
    e.extend_from_slice(&rkey.to_be_bytes());
    e.extend_from_slice(&add.to_be_bytes());
    e.extend_from_slice(&0u64.to_be_bytes());
    e
}

/// A response as the peer reads it: opcode, PSN, AETH syndrome (if any),
/// and what follows the AETH.
#[derive(Debug)]
struct Resp {
    opcode: u8,
    pkey: u16,
    psn: u32,
    syndrome: Option<u8>,
    rest: Vec<u8>,
}

fn recv(sock: &UdpSocket) -> Option<Resp> {
    let mut buf = [0u8; 9000];
    let n = sock.recv(&mut buf).ok()?;
    let b = &buf[..n];
    let opcode = b[0];
    let psn = u32::from_be_bytes([0, b[9], b[10], b[11]]);
    let has_aeth = matches!(opcode, 0x0D | 0x0F | 0x10 | 0x11 | 0x12);
    let body = &b[12..n - 4];
    let (syndrome, rest) = if has_aeth {
        (Some(body[0]), body[4..].to_vec())
    } else {
        (None, body.to_vec())
    };
    Some(Resp {
        opcode,
        pkey: u16::from_be_bytes([b[2], b[3]]),
        psn,
        syndrome,
        rest,
    })
}

fn stats(v: &Victim) -> QpStats {
    v.backend.qp_stats(v.qp.handle()).unwrap()
}

fn send(sock: &UdpSocket, to: SocketAddrV4, pkt: &[u8]) {
    sock.send_to(pkt, to).unwrap();
}

/// A legitimate WRITE from the peer at `psn`: ACKed, and the bytes land.
fn write_works(v: &Victim, p: &Peer, psn: u32, fill: u8) {
    let pkt = write_only(v, p.addr, false, 0xFFFF, psn, 100, &[fill; 32]);
    send(&p.sock, v.addr, &pkt);
    let r = recv(&p.sock).expect("an ACK");
    assert_eq!((r.opcode, r.psn, r.syndrome), (0x11, psn, Some(0x1F)));
    assert_eq!(&bytes(&v.mr)[100..132], &[fill; 32]);
}

fn pattern() -> Vec<u8> {
    (0..LEN).map(|i| i as u8).collect()
}

/// Wait until the victim's engine has counted `n` received packets.
fn until_received(v: &Victim, n: u64) {
    wait_until(
        || stats(v).rx_packets >= n,
        || "victim got no packets".into(),
    );
}

/// Wait up to 5 s for `done`; fail with `what()` if it never holds.
fn wait_until(mut done: impl FnMut() -> bool, what: impl Fn() -> String) {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    while !done() {
        assert!(std::time::Instant::now() < end, "{}", what());
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Post one work request of `op` over `sge` on `qp` (no UD destination).
///
/// # Safety
///
/// As for [`QueuePair::post_send`]: the memory the SGEs name (unless sent
/// inline) stays registered and untouched until the WR completes.
unsafe fn post_one(
    qp: &QueuePair,
    wr_id: u64,
    sge: &[Sge],
    op: SendOp,
    flags: SendFlags,
) -> Result<(), PostError> {
    let wr = SendWr {
        wr_id,
        sg_list: sge,
        op,
        flags,
        ud: None,
    };
    // SAFETY: forwarded from the caller's contract.
    unsafe { qp.post_send(&[wr]) }
}

/// Post one receive of `sge` on `qp`.
///
/// # Safety
///
/// As for [`QueuePair::post_recv`]: the memory stays registered and
/// untouched until the receive completes.
unsafe fn post_recv_one(qp: &QueuePair, wr_id: u64, sge: &[Sge]) -> Result<(), PostError> {
    // SAFETY: forwarded from the caller's contract.
    unsafe {
        qp.post_recv(&[RecvWr {
            wr_id,
            sg_list: sge,
        }])
    }
}

fn spoofed_source_is_dropped(net: u8, qp_type: QpType) {
    let (v, p) = victim(Ipv4Addr::new(127, net, 0, 2), qp_type);
    connect(&v, p.addr);
    let third_addr = SocketAddrV4::new(Ipv4Addr::new(127, net, 0, 3), 4791);
    let third = UdpSocket::bind(third_addr).unwrap();
    third
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    // The right QPN, PSN, P_Key and R_Key, from a third address.
    let uc = qp_type != QpType::Rc;
    let pkt = write_only(&v, third_addr, uc, 0xFFFF, RQ_PSN, 0, &[0xEE; 64]);
    send(&third, v.addr, &pkt);
    until_received(&v, 1);
    let s = stats(&v);
    assert_eq!((s.rx_bad_source, s.rx_dropped), (1, 1));
    assert_eq!(bytes(&v.mr), &pattern()[..], "target untouched");
    assert!(recv(&third).is_none(), "no answer to the spoofer");
    if qp_type == QpType::Rc {
        // The spoofed packet took no PSN: the real peer's WRITE at the
        // same PSN is executed, not taken as a duplicate.
        write_works(&v, &p, RQ_PSN, 0x42);
    } else {
        let pkt = write_only(&v, p.addr, true, 0xFFFF, RQ_PSN, 8, &[0x42; 16]);
        send(&p.sock, v.addr, &pkt);
        until_received(&v, 2);
        assert_eq!(&bytes(&v.mr)[8..24], &[0x42; 16]);
        assert_eq!(stats(&v).rx_dropped, 1);
    }
}

#[test]
fn rc_request_from_a_spoofed_source_is_dropped_and_takes_no_psn() {
    spoofed_source_is_dropped(130, QpType::Rc);
}

#[test]
fn uc_request_from_a_spoofed_source_is_dropped() {
    spoofed_source_is_dropped(131, QpType::Uc);
}

#[test]
fn p_keys_follow_the_membership_rules() {
    let (v, p) = victim(Ipv4Addr::new(127, 132, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    // Another partition (full member), and the two invalid P_Keys.
    for (i, pkey) in [0x9234u16, 0x1234, 0x0000, 0x8000].into_iter().enumerate() {
        let pkt = write_only(&v, p.addr, false, pkey, RQ_PSN, 0, &[0xEE; 64]);
        send(&p.sock, v.addr, &pkt);
        until_received(&v, i as u64 + 1);
    }
    assert_eq!(stats(&v).rx_bad_pkey, 4);
    assert_eq!(bytes(&v.mr), &pattern()[..]);
    // A limited member of our partition talks to a full member.
    let pkt = write_only(&v, p.addr, false, 0x7FFF, RQ_PSN, 0, &[0xEE; 64]);
    send(&p.sock, v.addr, &pkt);
    let r = recv(&p.sock).expect("the first answer is the limited member's ACK");
    assert_eq!((r.opcode, r.psn, r.syndrome), (0x11, RQ_PSN, Some(0x1F)));
    assert_eq!(r.pkey, 0xFFFF, "the victim sends its own P_Key");
    assert_eq!(&bytes(&v.mr)[..64], &[0xEE; 64]);
    assert_eq!(stats(&v).rx_bad_pkey, 4);

    // A limited member does not hear another limited member.
    let (lv, lp) = victim_cfg(Ipv4Addr::new(127, 132, 1, 2), |c| {
        c.pkey_table = [0x7FFF, 0, 0, 0];
    });
    connect(&lv, lp.addr);
    let pkt = |pkey| write_only(&lv, lp.addr, false, pkey, RQ_PSN, 0, &[0xEE; 64]);
    send(&lp.sock, lv.addr, &pkt(0x7FFF));
    until_received(&lv, 1);
    assert_eq!(stats(&lv).rx_bad_pkey, 1);
    assert_eq!(bytes(&lv.mr), &pattern()[..]);
    send(&lp.sock, lv.addr, &pkt(0xFFFF));
    let r = recv(&lp.sock).expect("a full member is heard");
    assert_eq!((r.opcode, r.psn, r.syndrome), (0x11, RQ_PSN, Some(0x1F)));
    assert_eq!(r.pkey, 0x7FFF);
    assert_eq!(&bytes(&lv.mr)[..64], &[0xEE; 64]);
    // A pkey_index naming an empty entry is refused at modify.
    let e = lv
        .qp
        .modify(&QpAttr::new().with_state(QpState::Rts).with_pkey_index(2));
    assert!(e.is_err(), "{e:?}");
}

#[test]
fn ud_drops_a_wrong_q_key_and_delivers_the_right_one() {
    let (v, p) = victim(Ipv4Addr::new(127, 133, 0, 2), QpType::Ud);
    connect(&v, p.addr);
    let sge = [v.mr.sge(0, 1024).unwrap()];
    // SAFETY: the region stays registered and untouched until the
    // completion is polled.
    unsafe { post_recv_one(&v.qp, 9, &sge) }.unwrap();
    let deth = |qkey: u32| {
        let mut e = qkey.to_be_bytes().to_vec();
        e.extend_from_slice(&[0, 0, 0, 0x33]);
        e
    };
    let pkt = |qkey| request(&v, &p, 0x64, 7, false, &deth(qkey), &[0xAB; 100]);
    send(&p.sock, v.addr, &pkt(0x2222_2222));
    until_received(&v, 1);
    let s = stats(&v);
    assert_eq!((s.rx_bad_qkey, s.rx_dropped), (1, 1));
    assert_eq!(bytes(&v.mr), &pattern()[..]);
    // The GRH area holds the IPv4 header as it arrived: a TTL of our
    // choosing shows it is not made up.
    p.sock.set_ttl(33).unwrap();
    send(&p.sock, v.addr, &pkt(0x1111_1111));
    let wc = v.cq.poll_n(1, Duration::from_secs(5)).unwrap()[0];
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (9, WcStatus::Success, 140)
    );
    assert_eq!(&bytes(&v.mr)[40..140], &[0xAB; 100]);
    let grh = &bytes(&v.mr)[..40];
    assert_eq!(&grh[..20], &[0; 20]);
    let ip = &grh[20..];
    assert_eq!((ip[0], ip[8], ip[9]), (0x45, 33, 17));
    assert_eq!(
        u16::from_be_bytes([ip[2], ip[3]]),
        20 + 8 + 12 + 8 + 100 + 4
    );
    assert_eq!(&ip[12..16], &p.addr.ip().octets());
    assert_eq!(&ip[16..20], &v.addr.ip().octets());
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    sum = (sum & 0xFFFF) + (sum >> 16);
    assert_eq!(sum, 0xFFFF, "a valid header checksum");
}

#[test]
fn an_rkey_of_another_pd_is_a_remote_access_error_for_write_read_and_atomic() {
    let (v, p) = victim(Ipv4Addr::new(127, 134, 0, 2), QpType::Rc);
    let other_rkey = v.other.rkey().value();
    let other_addr = v.other.addr();
    let cases: [(u8, Vec<u8>, Vec<u8>); 3] = [
        (0x0A, reth(other_addr, other_rkey, 64), vec![0xEE; 64]),
        (0x0C, reth(other_addr, other_rkey, 64), vec![]),
        (0x14, atomic_eth(other_addr, other_rkey, 5), vec![]),
    ];
    for (round, (op, ext, payload)) in cases.into_iter().enumerate() {
        connect(&v, p.addr);
        let pkt = request(&v, &p, op, RQ_PSN, true, &ext, &payload);
        send(&p.sock, v.addr, &pkt);
        let r = recv(&p.sock).expect("a NAK");
        assert_eq!(
            (r.opcode, r.psn, r.syndrome),
            (0x11, RQ_PSN, Some(0x62)),
            "opcode {op:#x}: NAK remote access error"
        );
        assert!(r.rest.is_empty(), "no data leaves the other PD");
        assert_eq!(bytes(&v.other), &[0x5A; LEN][..], "other PD untouched");
        assert_eq!(v.qp.state().unwrap(), QpState::Err);
        assert_eq!(stats(&v).tx_nak_remote_access, 1, "round {round}");
        // Reset and reconnect: the QP works again.
        connect(&v, p.addr);
        write_works(&v, &p, RQ_PSN, round as u8 + 1);
    }
}

#[test]
fn send_with_invalidate_of_a_registered_mr_is_class_j() {
    let (v, p) = victim(Ipv4Addr::new(127, 135, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    let sge = [v.mr.sge(2048, 1024).unwrap()];
    // SAFETY: as above.
    unsafe { post_recv_one(&v.qp, 5, &sge) }.unwrap();
    let rkey = v.mr.rkey().value();
    let pkt = request(&v, &p, 0x17, RQ_PSN, true, &rkey.to_be_bytes(), &[0x11; 16]);
    send(&p.sock, v.addr, &pkt);
    let wc = v.cq.poll_n(1, Duration::from_secs(5)).unwrap()[0];
    assert_eq!((wc.wr_id, wc.status), (5, WcStatus::RemInvReqErr));
    assert!(recv(&p.sock).is_none(), "no ACK and no NAK");
    assert_eq!(v.qp.state().unwrap(), QpState::Err);
    assert_eq!(stats(&v).rx_bad_invalidate, 1);
    // The region is still registered: after a reconnect, a WRITE with the
    // same R_Key lands.
    connect(&v, p.addr);
    write_works(&v, &p, RQ_PSN, 0x77);
    assert_eq!(&bytes(&v.mr)[..100], &pattern()[..100]);
}

/// Hold the gate, run `f` (which sends a burst), give the datagrams time to
/// queue, then release it so that the burst is one receive batch.
fn burst(v: &Victim, f: impl FnOnce()) {
    v.gate.store(true, Ordering::SeqCst);
    f();
    std::thread::sleep(Duration::from_millis(20));
    v.gate.store(false, Ordering::SeqCst);
}

#[test]
fn a_read_flood_beyond_max_dest_rd_atomic_is_an_invalid_request() {
    let (v, p) = victim(Ipv4Addr::new(127, 136, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    let rkey = v.mr.rkey().value();
    burst(&v, || {
        for i in 0..4u32 {
            let ext = reth(v.mr.addr() + 64 * u64::from(i), rkey, 64);
            let pkt = request(&v, &p, 0x0C, RQ_PSN + i, true, &ext, &[]);
            send(&p.sock, v.addr, &pkt);
        }
    });
    // Two READs fit the two responder resources and are answered; the
    // third is a class C error; the fourth finds the QP in ERR.
    for i in 0..2u32 {
        let r = recv(&p.sock).expect("a READ response");
        assert_eq!(
            (r.opcode, r.psn, r.syndrome),
            (0x10, RQ_PSN + i, Some(0x1F))
        );
        let off = 64 * i as usize;
        assert_eq!(&r.rest[..], &pattern()[off..off + 64]);
    }
    let r = recv(&p.sock).expect("a NAK");
    assert_eq!(
        (r.opcode, r.psn, r.syndrome),
        (0x11, RQ_PSN + 2, Some(0x61))
    );
    assert!(recv(&p.sock).is_none());
    let s = stats(&v);
    assert_eq!((s.rx_rd_atomic_overflow, s.tx_nak_invalid_request), (1, 1));
    assert_eq!(bytes(&v.mr), &pattern()[..]);
    connect(&v, p.addr);
    write_works(&v, &p, RQ_PSN, 0x31);
}

#[test]
fn responses_owed_before_a_fatal_request_in_the_same_burst_are_sent() {
    let (v, p) = victim(Ipv4Addr::new(127, 137, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    let (rkey, base) = (v.mr.rkey().value(), v.mr.addr());
    let before = u64::from_ne_bytes(bytes(&v.mr)[8..16].try_into().unwrap());
    burst(&v, || {
        let read = request(
            &v,
            &p,
            0x0C,
            RQ_PSN,
            true,
            &reth(base + 256, rkey, 100),
            &[],
        );
        let add = request(
            &v,
            &p,
            0x14,
            RQ_PSN + 1,
            true,
            &atomic_eth(base + 8, rkey, 5),
            &[],
        );
        // Out of the region: fatal.
        let bad = write_only(
            &v,
            p.addr,
            false,
            0xFFFF,
            RQ_PSN + 2,
            LEN as u64,
            &[0xEE; 64],
        );
        for pkt in [read, add, bad] {
            send(&p.sock, v.addr, &pkt);
        }
    });
    let r = recv(&p.sock).expect("the READ response");
    assert_eq!((r.opcode, r.psn, r.syndrome), (0x10, RQ_PSN, Some(0x1F)));
    assert_eq!(&r.rest[..100], &pattern()[256..356]);
    let r = recv(&p.sock).expect("the atomic ACK");
    assert_eq!(
        (r.opcode, r.psn, r.syndrome),
        (0x12, RQ_PSN + 1, Some(0x1F))
    );
    assert_eq!(u64::from_be_bytes(r.rest[..8].try_into().unwrap()), before);
    let r = recv(&p.sock).expect("the NAK, last");
    assert_eq!(
        (r.opcode, r.psn, r.syndrome),
        (0x11, RQ_PSN + 2, Some(0x62))
    );
    let after = u64::from_ne_bytes(bytes(&v.mr)[8..16].try_into().unwrap());
    assert_eq!(after, before.wrapping_add(5), "the atomic ran once");
    let mut expect = pattern();
    expect[8..16].copy_from_slice(&after.to_ne_bytes());
    assert_eq!(bytes(&v.mr), &expect[..], "nothing else changed");
    assert_eq!(stats(&v).tx_nak_remote_access, 1);
    connect(&v, p.addr);
    write_works(&v, &p, RQ_PSN, 0x55);
}

// ----------------------------------------------------------------------
// A careless application: the device must not lose or corrupt data.
// ----------------------------------------------------------------------

/// Two victims connected to each other (verbs `connect`), a on .1, b on .2.
fn verbs_pair(net: u8, max_send_wr: u32, cqe: u32) -> (Victim, Victim) {
    let (mut a, b) = two_victims(net);
    a.cq = a._ctx.create_cq(cqe).unwrap();
    a.qp = a
        ._pd
        .qp_builder(QpType::Rc)
        .cq(&a.cq)
        .max_send_wr(max_send_wr)
        .max_recv_wr(4)
        .max_inline_data(64)
        .build()
        .unwrap();
    connect_qps(&a.qp, &b.qp, &a.mr, &b.mr);
    (a, b)
}

fn inline_write(a: &Victim, b: &Victim, id: u64, off: u64, data: &[u8]) -> Result<(), String> {
    let sge = [Sge {
        addr: data.as_ptr() as u64,
        length: data.len() as u32,
        lkey: verbs_emu::wire::Lkey::new(0),
    }];
    let op = SendOp::Write {
        remote_addr: b.mr.addr() + off,
        rkey: b.mr.rkey(),
    };
    let flags = SendFlags::SIGNALED | SendFlags::INLINE;
    // SAFETY: inline data is copied at post time; no lkey applies.
    unsafe { post_one(&a.qp, id, &sge, op, flags) }.map_err(|e| e.to_string())
}

#[test]
fn a_refused_inline_post_leaves_pending_inline_data_alone() {
    let (a, b) = verbs_pair(138, 2, 16);
    // b loses the first transmissions: the WRITEs stay pending at a and
    // go again after the ACK timeout, from a's inline slots.
    b.dropping.store(true, Ordering::SeqCst);
    inline_write(&a, &b, 1, 0, &[0xAA; 48]).unwrap();
    inline_write(&a, &b, 2, 64, &[0xBB; 48]).unwrap();
    let e = inline_write(&a, &b, 3, 128, &[0xCC; 48]).unwrap_err();
    assert!(e.contains("queue full"), "{e}");
    std::thread::sleep(Duration::from_millis(20));
    b.dropping.store(false, Ordering::SeqCst);
    let wcs = a.cq.poll_n(2, Duration::from_secs(10)).unwrap();
    assert!(wcs.iter().all(|w| w.status == WcStatus::Success), "{wcs:?}");
    assert!(stats(&a).tx_retransmits > 0, "the data went again");
    assert_eq!(&bytes(&b.mr)[..48], &[0xAA; 48]);
    assert_eq!(&bytes(&b.mr)[64..112], &[0xBB; 48]);
    assert_eq!(&bytes(&b.mr)[128..176], &pattern()[128..176]);
}

#[test]
fn a_cq_overrun_is_a_cq_error_and_an_async_event() {
    let (a, b) = verbs_pair(139, 8, 2);
    for i in 0..4u64 {
        inline_write(&a, &b, i, 64 * i, &[i as u8 + 1; 16]).unwrap();
    }
    // Wait for the four ACKs (the data lands at b), then poll.
    wait_until(|| bytes(&b.mr)[192..208] == [4u8; 16], String::new);
    let mut events = Vec::new();
    let end = std::time::Instant::now() + Duration::from_secs(5);
    let mut wc = [verbs_emu::verbs::WorkCompletion::default(); 8];
    let err = loop {
        if let Err(e) = a.cq.poll(&mut wc) {
            break e;
        }
        assert!(std::time::Instant::now() < end, "no overrun reported");
    };
    assert!(
        matches!(err, VerbsError::CqOverrun { capacity: 2, .. }),
        "{err}"
    );
    while let Some(ev) = a._ctx.poll_async_event() {
        events.push(ev);
    }
    assert_eq!(
        events,
        vec![
            AsyncEvent::CqErr(a.cq.handle()),
            AsyncEvent::QpFatal(a.qp.handle())
        ]
    );
    assert_eq!(a.qp.state().unwrap(), QpState::Err);
}

#[test]
fn zero_based_regions_take_offsets_remotely_and_addresses_locally() {
    // The same rule as the engine's ByteMemory and LengthMemory: the peer
    // names a ZERO_BASED region by offset, its owner's SGEs by address.
    let (a, b) = verbs_pair(140, 8, 16);
    let zb = AccessFlags(ALL.0 | AccessFlags::ZERO_BASED.0);
    let src = a._pd.alloc_mr(LEN, zb).unwrap();
    let dst = b._pd.alloc_mr(LEN, zb).unwrap();
    edit(&src)[..256].copy_from_slice(&pattern()[..256]);
    let remote = dst.remote();
    assert_eq!(remote.addr, 0);
    let sge = [src.sge(0, 256).unwrap()];
    // SAFETY: both regions stay registered and untouched until the
    // completion is polled.
    let op = SendOp::Write {
        remote_addr: remote.addr + 512,
        rkey: dst.rkey(),
    };
    unsafe { post_one(&a.qp, 1, &sge, op, SendFlags::SIGNALED) }.unwrap();
    let wc = a.cq.poll_n(1, Duration::from_secs(5)).unwrap()[0];
    assert_eq!(wc.status, WcStatus::Success);
    assert_eq!(&bytes(&dst)[512..768], &pattern()[..256]);
    assert_eq!(&bytes(&dst)[..512], &[0; 512][..]);
}

// ----------------------------------------------------------------------
// Random verbs call sequences over two connected contexts.
// ----------------------------------------------------------------------

mod sequences {
    use super::*;
    use proptest::prelude::*;

    /// Which region of device b a remote operation names.
    #[derive(Debug, Clone, Copy)]
    enum Target {
        /// b1's region, in b1's PD: allowed.
        Own,
        /// The bystander QP b2's region, in another PD: must never change.
        Bystander,
        /// A spare region in b1's PD that may have been deregistered.
        Spare,
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write { off: u16, len: u16, target: Target },
        Read { off: u16, len: u16, target: Target },
        Send { len: u16 },
        Recv { len: u16 },
        Poll,
        ErrorA,
        Reconnect,
        DeregSpare,
        RecreateA,
    }

    fn op() -> impl Strategy<Value = Op> {
        let target = prop_oneof![
            Just(Target::Own),
            Just(Target::Bystander),
            Just(Target::Spare)
        ];
        prop_oneof![
            4 => (0u16..4096, 0u16..2048, target.clone())
                .prop_map(|(off, len, target)| Op::Write { off, len, target }),
            3 => (0u16..4096, 0u16..2048, target)
                .prop_map(|(off, len, target)| Op::Read { off, len, target }),
            2 => (0u16..3000).prop_map(|len| Op::Send { len }),
            2 => (0u16..3000).prop_map(|len| Op::Recv { len }),
            4 => Just(Op::Poll),
            1 => Just(Op::ErrorA),
            1 => Just(Op::Reconnect),
            1 => Just(Op::DeregSpare),
            1 => Just(Op::RecreateA),
        ]
    }

    struct World {
        a: Victim,
        b: Victim,
        /// b2: a QP of b in b's second PD, connected to a2; idle.
        _b2: QueuePair,
        _a2: QueuePair,
        spare: Option<MemoryRegion>,
        spare_rkey: verbs_emu::wire::Rkey,
        spare_addr: u64,
    }

    /// Reset both QPs and connect them to each other. A packet of the
    /// pair's previous connection still on its way can put a QP in ERR
    /// while it waits in RTR, as it would a NIC's (CI saw `b` refuse RTS
    /// from ERR once); an application then resets and connects again, and
    /// so does this, after letting such packets drain.
    fn connect_pair(a: &QueuePair, b: &QueuePair, am: &MemoryRegion, bm: &MemoryRegion) {
        let mut last = None;
        for attempt in 0..3u32 {
            for q in [a, b] {
                let _ = q.modify(&QpAttr::new().with_state(QpState::Reset));
            }
            let connected = (|| {
                let ea = a.endpoint(10, 0, Some(am))?;
                let eb = b.endpoint(20, 0, Some(bm))?;
                a.connect(ea.psn, &eb, Mtu::Mtu1024, ALL)?;
                b.connect(eb.psn, &ea, Mtu::Mtu1024, ALL)
            })();
            match connected {
                Ok(()) => return,
                Err(e) => last = Some(e),
            }
            std::thread::sleep(Duration::from_millis(2 << attempt));
        }
        panic!("the pair does not connect from RESET: {last:?}");
    }

    fn world() -> World {
        let (a, b) = two_victims(141);
        connect_pair(&a.qp, &b.qp, &a.mr, &b.mr);
        let a2 = qp_of(&a._pd2, &a.cq, QpType::Rc);
        let b2 = qp_of(&b._pd2, &b.cq, QpType::Rc);
        connect_pair(&a2, &b2, &a.other, &b.other);
        let spare = b._pd.alloc_mr(LEN, ALL).unwrap();
        let (spare_rkey, spare_addr) = (spare.rkey(), spare.addr());
        World {
            a,
            b,
            _b2: b2,
            _a2: a2,
            spare: Some(spare),
            spare_rkey,
            spare_addr,
        }
    }

    fn target(w: &World, t: Target) -> (u64, verbs_emu::wire::Rkey) {
        match t {
            Target::Own => (w.b.mr.addr(), w.b.mr.rkey()),
            Target::Bystander => (w.b.other.addr(), w.b.other.rkey()),
            Target::Spare => (w.spare_addr, w.spare_rkey),
        }
    }

    fn run(w: &mut World, op: &Op) {
        let a = &w.a;
        let lsge = |off: u16, len: u16| {
            let off = usize::from(off) % LEN;
            let len = u32::from(len).min((LEN - off) as u32);
            [a.mr.sge(off, len).unwrap()]
        };
        match *op {
            Op::Write {
                off,
                len,
                target: t,
            }
            | Op::Read {
                off,
                len,
                target: t,
            } => {
                let (base, rkey) = target(w, t);
                let sge = lsge(0, len);
                let remote_addr = base + u64::from(off);
                let op = if matches!(op, Op::Write { .. }) {
                    SendOp::Write { remote_addr, rkey }
                } else {
                    SendOp::Read { remote_addr, rkey }
                };
                // SAFETY: a's region lives as long as the world; the
                // device checks every key and range.
                let _ = unsafe { post_one(&a.qp, 1, &sge, op, SendFlags::SIGNALED) };
            }
            Op::Send { len } => {
                let sge = lsge(0, len);
                // SAFETY: as above.
                let _ = unsafe { post_one(&a.qp, 2, &sge, SendOp::Send, SendFlags::SIGNALED) };
            }
            Op::Recv { len } => {
                let len = u32::from(len).min(LEN as u32);
                let sge = [w.b.mr.sge(0, len).unwrap()];
                // SAFETY: b's region lives as long as the world.
                let _ = unsafe { post_recv_one(&w.b.qp, 3, &sge) };
            }
            Op::Poll => {
                let mut wc = [verbs_emu::verbs::WorkCompletion::default(); 16];
                for _ in 0..20 {
                    let _ = w.a.cq.poll(&mut wc);
                    let _ = w.b.cq.poll(&mut wc);
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            Op::ErrorA => {
                let _ = a.qp.modify(&QpAttr::new().with_state(QpState::Err));
            }
            Op::Reconnect => connect_pair(&w.a.qp, &w.b.qp, &w.a.mr, &w.b.mr),
            Op::DeregSpare => w.spare = None,
            Op::RecreateA => {
                w.a.qp = qp_of(&w.a._pd, &w.a.cq, QpType::Rc);
                connect_pair(&w.a.qp, &w.b.qp, &w.a.mr, &w.b.mr);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        #[test]
        fn random_verbs_sequences_never_panic_nor_touch_another_qps_memory(
            ops in proptest::collection::vec(op(), 1..24)
        ) {
            let mut w = world();
            for op in &ops {
                run(&mut w, op);
            }
            run(&mut w, &Op::Poll);
            // The bystander QPs' regions (another PD on each device) are
            // byte-identical to how they started.
            prop_assert!(bytes(&w.b.other).iter().all(|&b| b == 0x5A));
            prop_assert!(bytes(&w.a.other).iter().all(|&b| b == 0x5A));
        }
    }
}

#[test]
fn poll_n_keeps_what_it_took_when_it_times_out() {
    let (a, b) = verbs_pair(142, 8, 16);
    inline_write(&a, &b, 77, 0, &[1; 8]).unwrap();
    let e = a.cq.poll_n(2, Duration::from_millis(300)).unwrap_err();
    assert!(matches!(e, VerbsError::Timeout { .. }), "{e}");
    let wc = a.cq.poll_n(1, Duration::from_secs(1)).unwrap();
    assert_eq!((wc[0].wr_id, wc[0].status), (77, WcStatus::Success));
}

/// The victim posts `rounds` SENDs, one at a time, and waits for each
/// completion as an application does (`poll_n`); the peer answers the
/// first transmission of each with an RNR NAK of timer `code` and measures
/// how long the victim takes to send it again, then ACKs it.
fn rnr_resend_delays(v: &Victim, p: &Peer, code: u8, rounds: u64) -> Vec<Duration> {
    let sock = p.sock.try_clone().unwrap();
    let (peer, to, qpn) = (p.addr, v.addr, v.qp.qpn().value());
    let responder = std::thread::spawn(move || {
        let mut delays = Vec::new();
        for _ in 0..rounds {
            let first = recv(&sock).expect("the SEND");
            assert_eq!(first.opcode, 0x04, "RC SEND ONLY");
            let aeth = [0x20 | code, 0, 0, 0];
            let nak = packet(peer, to, 0x11, 0xFFFF, qpn, first.psn, false, &aeth, &[]);
            // The clock starts before the NAK leaves: a peer preempted
            // right after sending must not see the wait as shorter.
            let t0 = std::time::Instant::now();
            send(&sock, to, &nak);
            let again = recv(&sock).expect("the SEND again");
            delays.push(t0.elapsed());
            assert_eq!((again.opcode, again.psn), (0x04, first.psn));
            let ack = packet(
                peer,
                to,
                0x11,
                0xFFFF,
                qpn,
                first.psn,
                false,
                &[0x1F, 0, 0, 1],
                &[],
            );
            send(&sock, to, &ack);
        }
        delays
    });
    for i in 0..rounds {
        let sge = [v.mr.sge(0, 8).unwrap()];
        // SAFETY: the region outlives the send, which completes below.
        unsafe { post_one(&v.qp, i, &sge, SendOp::Send, SendFlags::SIGNALED) }.unwrap();
        let wc = v.cq.poll_n(1, Duration::from_secs(5)).unwrap()[0];
        assert_eq!((wc.wr_id, wc.status), (i, WcStatus::Success));
    }
    responder.join().unwrap()
}

#[test]
fn an_rnr_resend_follows_the_rnr_timer_not_a_millisecond_later() {
    let (v, p) = victim(Ipv4Addr::new(127, 150, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    // Timer code 4 asks for 0.04 ms (ROCEV2.md §5.6). The best of five
    // rounds, so that one preempted round on a busy host does not decide.
    let d = rnr_resend_delays(&v, &p, 4, 5);
    let best = *d.iter().min().unwrap();
    assert!(
        best >= Duration::from_micros(40),
        "sooner than asked: {d:?}"
    );
    assert!(
        best < Duration::from_micros(500),
        "the resend waited {d:?}, not the 40 us the RNR NAK asked for"
    );
    let s = stats(&v);
    assert_eq!((s.rx_rnr_naks, s.retries), (5, 5));
    // The device's counters, from the Context, under mlx5's names.
    assert_eq!(v._ctx.counter("rnr_nak_retry_err").unwrap(), Some(5));
    assert_eq!(v._ctx.counter("roce_adp_retrans").unwrap(), Some(5));
    assert_eq!(v._ctx.counter("local_ack_timeout_err").unwrap(), Some(0));
}

#[test]
fn a_read_response_that_cannot_be_placed_ends_the_read_at_once() {
    let (v, p) = victim(Ipv4Addr::new(127, 151, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    let before = bytes(&v.mr);
    let sge = [v.mr.sge(512, 8).unwrap()];
    let op = SendOp::Read {
        remote_addr: 0x1000,
        rkey: verbs_emu::wire::Rkey::new(0x77),
    };
    // SAFETY: the region outlives the READ, which completes below.
    unsafe { post_one(&v.qp, 9, &sge, op, SendFlags::SIGNALED) }.unwrap();
    let req = recv(&p.sock).expect("the READ request");
    assert_eq!(req.opcode, 0x0C);
    // READ RESPONSE ONLY with 16 bytes for an 8-byte READ.
    let resp = request(&v, &p, 0x10, req.psn, false, &[0x1F, 0, 0, 1], &[0xEE; 16]);
    let t0 = std::time::Instant::now();
    send(&p.sock, v.addr, &resp);
    let wc = v.cq.poll_n(1, Duration::from_secs(5)).unwrap()[0];
    // rxe's do_read(): LOC_PROT_ERR at once, not after retry_cnt timeouts
    // of 67 ms (timeout 14) each.
    assert_eq!((wc.wr_id, wc.status), (9, WcStatus::LocProtErr));
    assert!(
        t0.elapsed() < Duration::from_millis(50),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(bytes(&v.mr), before, "nothing was placed");
    assert_eq!(v.qp.state().unwrap(), QpState::Err);
    let s = stats(&v);
    assert_eq!((s.rx_read_overruns, s.timeouts, s.retries), (1, 0, 0));
}

/// Wait until the victim device's counters satisfy `done`.
fn until_device(v: &Victim, done: impl Fn(&verbs_emu::backend::udp::UdpStats) -> bool) {
    wait_until(
        || done(&v.backend.stats()),
        || format!("{:?}", v.backend.stats()),
    );
}

#[test]
fn a_bad_icrc_is_an_icrc_error_whatever_it_hit_and_garbage_is_malformed() {
    let (v, p) = victim(Ipv4Addr::new(127, 152, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    let write = |psn: u32| write_only(&v, p.addr, false, 0xFFFF, psn, 100, &[0x42; 32]);
    // Corruption in the payload, and in the opcode (which leaves a header
    // that does not even parse): both are ICRC errors, as on a NIC.
    let mut in_payload = write(RQ_PSN);
    in_payload[40] ^= 0x01;
    let mut in_opcode = write(RQ_PSN);
    in_opcode[0] = 0x15; // a reserved opcode
    send(&p.sock, v.addr, &in_payload);
    send(&p.sock, v.addr, &in_opcode);
    until_device(&v, |s| s.rx_icrc_encapsulated == 2);
    // The same reserved opcode under a correct ICRC is malformed.
    let mut garbage = write(RQ_PSN);
    garbage.truncate(garbage.len() - 4);
    garbage[0] = 0x15;
    let crc = Icrc::for_udp_payload(&encap(p.addr, v.addr), &garbage).unwrap();
    garbage.extend_from_slice(&crc.to_le_bytes());
    send(&p.sock, v.addr, &garbage);
    until_device(&v, |s| s.rx_malformed == 1);
    let s = v.backend.stats();
    assert_eq!((s.rx_icrc_encapsulated, s.rx_malformed), (2, 1));
    assert_eq!(v._ctx.counter("rx_icrc_encapsulated").unwrap(), Some(2));
    assert_eq!(&bytes(&v.mr)[..], &pattern()[..], "nothing landed");
    assert!(recv_quiet(&p.sock).is_none(), "no response to any of them");
    // The QP saw none of them and still works.
    assert_eq!(stats(&v).rx_packets, 0);
    write_works(&v, &p, RQ_PSN, 0x42);
}

/// `recv` with a short timeout, for "nothing came back" checks.
fn recv_quiet(sock: &UdpSocket) -> Option<Resp> {
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let r = recv(sock);
    sock.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    r
}

/// A signaled WRITE of `data` from `a` into `b`'s region at `off`, to
/// completion.
fn write_to(a: &Victim, b: &Victim, off: usize, data: &[u8]) -> WcStatus {
    a.mr.write(0, data).unwrap();
    let sge = [a.mr.sge(0, data.len() as u32).unwrap()];
    let op = SendOp::Write {
        remote_addr: b.mr.addr() + off as u64,
        rkey: b.mr.rkey(),
    };
    // SAFETY: the region outlives the WRITE, which completes below.
    unsafe { post_one(&a.qp, 1, &sge, op, SendFlags::SIGNALED) }.unwrap();
    a.cq.poll_n(1, Duration::from_secs(5)).unwrap()[0].status
}

#[test]
fn query_qp_reports_everything_and_a_qp_in_err_reconnects_with_new_attributes() {
    let (a, b) = two_victims(153);
    let (_, eb) = connect_qps(&a.qp, &b.qp, &a.mr, &b.mr);
    let q = a.qp.query().unwrap();
    assert_eq!(q.qp_state, QpState::Rts);
    assert_eq!(q.path_mtu, Mtu::Mtu1024);
    assert_eq!(
        (q.timeout, q.retry_cnt, q.rnr_retry, q.min_rnr_timer),
        (14, 7, 7, 12)
    );
    assert_eq!((q.max_rd_atomic, q.max_dest_rd_atomic), (16, 16));
    assert_eq!(q.qp_access_flags, ALL);
    assert_eq!(q.dest_qp_num, b.qp.qpn());
    assert_eq!(q.ah_attr.dgid, eb.gid);
    assert_eq!(q.ah_attr.dport, Some(eb.udp_port));
    assert_eq!((q.sq_psn, q.rq_psn), (10, 20));
    assert_eq!(write_to(&a, &b, 64, &[7; 8]), WcStatus::Success);
    // The PSNs are where they are now: one WRITE later, one further.
    assert_eq!(a.qp.query().unwrap().sq_psn, 11);
    assert_eq!(b.qp.query().unwrap().rq_psn, 11);

    // ERR, then back with other attributes: connect_with resets first.
    a.qp.modify(&QpAttr::new().with_state(QpState::Err))
        .unwrap();
    assert_eq!(write_to(&a, &b, 64, &[8; 8]), WcStatus::WrFlushErr);
    let mut attr = verbs_emu::verbs::ConnectAttr::new(500, Mtu::Mtu2048, ALL);
    attr.timeout = 10;
    attr.retry_cnt = 3;
    attr.rnr_retry = 2;
    attr.max_rd_atomic = 4;
    let ea = a.qp.endpoint(500, 0, Some(&a.mr)).unwrap();
    a.qp.connect_with(&eb, &attr).unwrap();
    // b is in RTS: connect_with resets it too, towards a's new PSN.
    b.qp.connect_with(
        &ea,
        &verbs_emu::verbs::ConnectAttr::new(700, Mtu::Mtu2048, ALL),
    )
    .unwrap();
    let q = a.qp.query().unwrap();
    assert_eq!(q.qp_state, QpState::Rts);
    assert_eq!(
        (q.timeout, q.retry_cnt, q.rnr_retry, q.max_rd_atomic),
        (10, 3, 2, 4)
    );
    assert_eq!((q.path_mtu, q.sq_psn), (Mtu::Mtu2048, 500));
    // b expects a's new first PSN, and a's WRITE lands.
    assert_eq!(b.qp.query().unwrap().rq_psn, 500);
    assert_eq!(write_to(&a, &b, 64, &[9; 8]), WcStatus::Success);
    let mut got = [0u8; 8];
    b.mr.read(64, &mut got).unwrap();
    assert_eq!(got, [9; 8]);
}

/// A peer on another UDP port than RoCEv2's is an emulated device that
/// shares its address with others (several on one loopback address): only
/// its port tells it apart, so a request from its IP but another port is
/// a spoofed source, dropped and counted, taking no PSN. A peer on 4791
/// is a RoCEv2 device as a NIC sees it: its source port is entropy, and
/// any port from its address is admitted (ROCEV2.md §1.4).
#[test]
fn source_port_is_checked_for_a_peer_off_the_roce_port_only() {
    let (v, p) = victim(Ipv4Addr::new(127, 211, 0, 2), QpType::Rc);
    connect(&v, p.addr);
    assert_ne!(p.addr.port(), 4791);
    let same_ip = UdpSocket::bind(SocketAddrV4::new(*p.addr.ip(), 0)).unwrap();
    same_ip
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let same_ip_addr = match same_ip.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        _ => unreachable!(),
    };
    let pkt = write_only(&v, same_ip_addr, false, 0xFFFF, RQ_PSN, 0, &[0xEE; 64]);
    send(&same_ip, v.addr, &pkt);
    until_received(&v, 1);
    let s = stats(&v);
    assert_eq!((s.rx_bad_source, s.rx_dropped), (1, 1));
    assert_eq!(bytes(&v.mr), &pattern()[..], "target untouched");
    assert!(recv(&same_ip).is_none(), "no answer to the spoofer");
    write_works(&v, &p, RQ_PSN, 0x42);

    // The same victim towards a peer on 4791: the peer's packets may come
    // from any source port.
    let (v, _) = victim(Ipv4Addr::new(127, 212, 0, 2), QpType::Rc);
    let nic = SocketAddrV4::new(Ipv4Addr::new(127, 212, 0, 1), 4791);
    connect(&v, nic);
    let entropy = UdpSocket::bind(SocketAddrV4::new(*nic.ip(), 0)).unwrap();
    let from = match entropy.local_addr().unwrap() {
        std::net::SocketAddr::V4(a) => a,
        _ => unreachable!(),
    };
    let pkt = write_only(&v, from, false, 0xFFFF, RQ_PSN, 8, &[0x42; 16]);
    send(&entropy, v.addr, &pkt);
    until_received(&v, 1);
    assert_eq!(&bytes(&v.mr)[8..24], &[0x42; 16]);
    assert_eq!(stats(&v).rx_bad_source, 0);
}
