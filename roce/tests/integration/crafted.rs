//! The engine fed hand-made packets: one QP of a connected pair driven
//! directly, so that a test controls exactly what arrives and when, and
//! reads every packet the QP sends back.

use roce::cc::CcConfig;
use roce::time::{Duration, Instant, Rate};
use roce::transport::pair::{ConnectAttrs, Pair, WireConfig};
use roce::transport::*;
use roce::wire::{
    AethRepr, AethSyndrome, AtomicEthRepr, BthRepr, Ecn, NakCode, Opcode, Psn, Qpn, RethRepr, Rkey,
    RoceHeaders,
};

const BASE: u64 = 0x10_0000;
const LEN: u64 = 1 << 20;
/// B's connected peer (A) as B's AV names it.
const PEER_OF_B: AddressHandle = AddressHandle(1);
const QPN_A: u32 = 0x11;
const QPN_B: u32 = 0x22;

/// A connected pair and B's region at [`BASE`].
fn connected(
    attrs: ConnectAttrs,
    tweak: impl Fn(&mut QpConfig),
) -> (Pair<ByteMemory>, Registration) {
    let mut ma = ByteMemory::new();
    let mut mb = ByteMemory::new();
    ma.register(BASE, LEN, AccessFlags::ALL).unwrap();
    let rb = mb.register(BASE, LEN, AccessFlags::ALL).unwrap();
    let mut ca = QpConfig::new(Qpn::new(QPN_A));
    let mut cb = QpConfig::new(Qpn::new(QPN_B));
    tweak(&mut ca);
    tweak(&mut cb);
    let wire = WireConfig::clean(Rate::from_gbps(100), Duration::from_us(2));
    (
        Pair::connect(ca, ma, cb, mb, attrs, wire, wire).unwrap(),
        rb,
    )
}

fn bth(opcode: Opcode, dest: u32, psn: u32) -> BthRepr {
    BthRepr {
        opcode,
        solicited: false,
        migreq: false,
        pad_count: 0,
        tver: 0,
        pkey: 0xFFFF,
        fecn: false,
        becn: false,
        dest_qp: Qpn::new(dest),
        ack_req: true,
        psn: Psn::new(psn),
    }
}

fn headers(bth: BthRepr) -> RoceHeaders {
    RoceHeaders {
        bth,
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
    }
}

fn read_request(psn: u32, rkey: Rkey, va: u64, len: u32) -> RoceHeaders {
    let mut h = headers(bth(Opcode::RcReadRequest, QPN_B, psn));
    h.reth = Some(RethRepr {
        va,
        rkey,
        dma_len: len,
    });
    h
}

fn fetch_add(psn: u32, rkey: Rkey, va: u64, add: u64) -> RoceHeaders {
    let mut h = headers(bth(Opcode::RcFetchAdd, QPN_B, psn));
    h.atomic_eth = Some(AtomicEthRepr {
        va,
        rkey,
        swap_add: add,
        compare: 0,
    });
    h
}

fn deliver(qp: &mut Qp, mem: &mut ByteMemory, now: Instant, h: RoceHeaders, src: AddressHandle) {
    let rx = Received {
        headers: h,
        ecn: Ecn::Ect0,
        payload: Payload::Len(0),
        grh: None,
        src,
    };
    qp.handle_packet(now, &rx, mem);
}

/// Everything the QP sends now, as (opcode, PSN, AETH, original value of
/// an atomic ACK, payload bytes).
type Sent = (Opcode, u32, Option<AethRepr>, Option<u64>, u32);

fn drain(qp: &mut Qp, mem: &ByteMemory, now: Instant) -> Vec<Sent> {
    let mut out = Vec::new();
    while let Some(t) = qp.poll_transmit(now, mem) {
        let h = t.headers;
        out.push((
            h.bth.opcode,
            h.bth.psn.value(),
            h.aeth,
            h.atomic_ack_eth.map(|a| a.orig),
            t.payload.len(),
        ));
        assert!(out.len() < 1_000_000, "the QP never stops sending");
    }
    out
}

#[test]
fn a_read_failing_its_per_packet_rkey_check_keeps_the_atomic_ack_queued_behind_it() {
    let (mut p, rb) = connected(ConnectAttrs::default(), |_| {});
    let b = &mut p.b;
    // A second region for the READ, so that it can go away mid-response
    // while the atomic's region stays.
    let read_mr = b.mem.register(0x100_0000, 8192, AccessFlags::ALL).unwrap();
    let now = Instant::ZERO;
    let atomic_va = BASE + 64;
    b.mem
        .bytes_mut(rb.lkey, atomic_va, 8)
        .unwrap()
        .copy_from_slice(&40u64.to_ne_bytes());
    // READ of 4 packets (PSN 0..=3), then a FetchAdd (PSN 4) that runs at
    // once; the READ's responses are still queued before its ACK.
    deliver(
        &mut b.qp,
        &mut b.mem,
        now,
        read_request(0, read_mr.rkey, 0x100_0000, 4096),
        PEER_OF_B,
    );
    deliver(
        &mut b.qp,
        &mut b.mem,
        now,
        fetch_add(4, rb.rkey, atomic_va, 2),
        PEER_OF_B,
    );
    assert_eq!(b.qp.stats().atomics_executed, 1);
    let first = b.qp.poll_transmit(now, &b.mem).unwrap();
    assert_eq!(first.headers.bth.opcode, Opcode::RcReadResponseFirst);
    // The READ's region goes away: its next response fails the R_Key check.
    b.mem.deregister(read_mr.lkey).unwrap();
    let sent = drain(&mut b.qp, &b.mem, now);
    assert_eq!(
        sent,
        vec![
            (
                Opcode::RcAcknowledge,
                1,
                Some(AethRepr {
                    syndrome: AethSyndrome::Nak(NakCode::RemoteAccessError),
                    msn: roce::wire::Msn::new(1),
                }),
                None,
                0
            ),
            (
                Opcode::RcAtomicAcknowledge,
                4,
                Some(AethRepr {
                    syndrome: AethSyndrome::Ack { credits: 31 },
                    msn: roce::wire::Msn::new(2),
                }),
                Some(40),
                0
            ),
        ],
        "the NAK of the READ, then the ACK of the atomic that ran"
    );
    assert_eq!(b.qp.state(), QpState::Err);
}

fn cnp(dest: u32, pkey: u16) -> RoceHeaders {
    let mut b = bth(Opcode::Cnp, dest, 0);
    b.becn = true;
    b.ack_req = false;
    b.pkey = pkey;
    headers(b)
}

fn dcqcn_rate(qp: &Qp) -> Rate {
    match qp.cc() {
        roce::cc::AnyCc::Dcqcn(d) => d.current_rate(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_cnp_is_admitted_only_from_the_connected_peer_and_in_its_partition() {
    let line = Rate::from_gbps(100);
    let (mut p, _) = connected(ConnectAttrs::default(), |c| {
        c.cc = CcConfig::Dcqcn(roce::cc::DcqcnParams::paper(line));
    });
    let a = &mut p.a;
    let peer_of_a = AddressHandle(2);
    let full = dcqcn_rate(&a.qp);
    let mut now = Instant::ZERO;
    // A stranger's CNPs, and the peer's in another partition, change
    // nothing: they are dropped at admission, counted by cause.
    for k in 0..100u64 {
        now = Instant::from_ps(k * Duration::from_us(60).as_ps());
        deliver(
            &mut a.qp,
            &mut a.mem,
            now,
            cnp(QPN_A, 0xFFFF),
            AddressHandle(7),
        );
        deliver(&mut a.qp, &mut a.mem, now, cnp(QPN_A, 0x8001), peer_of_a);
    }
    assert_eq!(dcqcn_rate(&a.qp), full, "a stranger throttled the QP");
    assert_eq!(a.qp.stats().rx_bad_source, 100);
    assert_eq!(a.qp.stats().rx_bad_pkey, 100);
    // The peer's CNP in the QP's partition cuts the rate.
    deliver(&mut a.qp, &mut a.mem, now, cnp(QPN_A, 0xFFFF), peer_of_a);
    assert!(dcqcn_rate(&a.qp) < full);
    assert_eq!(a.qp.stats().rx_cnps - a.qp.stats().rx_cnps_ignored, 1);
}

/// A retry counts as retransmissions only the PSNs that went out before:
/// the rest of the started message, never sent, are first sends. (The
/// retry itself may still send the whole started message past the window,
/// as it always has: see the note on `rewind`.)
#[test]
fn a_retry_counts_only_what_was_sent_before_as_retransmitted() {
    let (mut p, rb) = connected(ConnectAttrs::default(), |c| c.max_unacked_psns = 128);
    let a = &mut p.a;
    // 512 packets of 1 KiB; the window lets 128 go unacknowledged.
    post_512_packet_write(a, rb.rkey);
    let now = Instant::ZERO;
    let first: Vec<u32> = drain(&mut a.qp, &a.mem, now).iter().map(|s| s.1).collect();
    assert_eq!(first, (0..128).collect::<Vec<u32>>());
    assert_eq!(a.qp.stats().tx_requests, 128);
    // No ACK comes: the Local ACK timeout resends from PSN 0. Of what goes
    // out, the 128 PSNs sent before are retransmissions; the others are
    // first sends, and once sent, they count as resent on the next retry.
    let t = a.qp.poll_timeout().expect("the ACK timer runs");
    a.qp.handle_timeout(t);
    let again: Vec<u32> = drain(&mut a.qp, &a.mem, t).iter().map(|s| s.1).collect();
    assert_eq!(again.first(), Some(&0));
    let sent = again.len() as u64;
    assert!(sent >= 128, "{sent}");
    assert_eq!(a.qp.stats().tx_retransmits, 128);
    assert_eq!(a.qp.stats().tx_requests, sent);
    let t = a.qp.poll_timeout().expect("the ACK timer runs");
    a.qp.handle_timeout(t);
    let third = drain(&mut a.qp, &a.mem, t).len() as u64;
    assert_eq!(a.qp.stats().tx_retransmits, 128 + third.min(sent));
}

#[test]
fn duplicate_reads_restart_the_one_response_instead_of_queueing_more() {
    let (mut p, rb) = connected(ConnectAttrs::default(), |_| {});
    let b = &mut p.b;
    let now = Instant::ZERO;
    // A 1 MiB READ (1024 responses of 1 KiB, PSN 0..=1023), then 100
    // duplicates of it before any response has gone.
    for _ in 0..101 {
        deliver(
            &mut b.qp,
            &mut b.mem,
            now,
            read_request(0, rb.rkey, BASE, 1 << 20),
            PEER_OF_B,
        );
    }
    let sent = drain(&mut b.qp, &b.mem, now);
    let bytes: u64 = sent.iter().map(|s| s.4 as u64).sum();
    assert_eq!(bytes, 1 << 20, "one response's worth, not 101");
    assert_eq!(sent.len(), 1024);
    // Half-way through, a duplicate asking from PSN 700 (the rest of the
    // READ) restarts the response there: 324 more packets, not a second
    // response queued behind the first.
    for _ in 0..3 {
        deliver(
            &mut b.qp,
            &mut b.mem,
            now,
            read_request(0, rb.rkey, BASE, 1 << 20),
            PEER_OF_B,
        );
    }
    let head = drain_n(&mut b.qp, &b.mem, now, 500);
    assert_eq!(head.last().unwrap().1, 499);
    for _ in 0..50 {
        deliver(
            &mut b.qp,
            &mut b.mem,
            now,
            read_request(700, rb.rkey, BASE + 700 * 1024, (1 << 20) - 700 * 1024),
            PEER_OF_B,
        );
    }
    let rest: Vec<u32> = drain(&mut b.qp, &b.mem, now).iter().map(|s| s.1).collect();
    assert_eq!(rest, (700..1024).collect::<Vec<u32>>());
}

/// The first `n` packets the QP sends now.
fn drain_n(qp: &mut Qp, mem: &ByteMemory, now: Instant, n: usize) -> Vec<Sent> {
    (0..n)
        .map(|_| {
            let t = qp.poll_transmit(now, mem).expect("more to send");
            (
                t.headers.bth.opcode,
                t.headers.bth.psn.value(),
                t.headers.aeth,
                None,
                t.payload.len(),
            )
        })
        .collect()
}

/// An ATOMIC WRITE request (a RETH and 8 bytes) at `psn`.
fn atomic_write(psn: u32, rkey: Rkey, va: u64) -> RoceHeaders {
    let mut h = headers(bth(Opcode::RcAtomicWrite, QPN_B, psn));
    h.reth = Some(RethRepr {
        va,
        rkey,
        dma_len: 8,
    });
    h
}

/// ATOMIC WRITE (IBTA 1.5) is executed once and answered as a READ of
/// nothing: an RDMA READ RESPONSE ONLY without payload at its PSN, with an
/// ACK syndrome. A duplicate is answered again from the responder's
/// resource and not executed again (the bytes changed since stay); a
/// misaligned one is an invalid request.
#[test]
fn atomic_write_is_answered_as_an_empty_read_and_never_executed_twice() {
    let (mut p, rb) = connected(ConnectAttrs::default(), |_| {});
    let b = &mut p.b;
    let now = Instant::ZERO;
    let value = 0xA1B2_C3D4_E5F6_0718u64.to_le_bytes();
    let send = |b: &mut roce::transport::pair::Endpoint<ByteMemory>, h| {
        let rx = Received {
            headers: h,
            ecn: Ecn::Ect0,
            payload: Payload::Bytes(&value),
            grh: None,
            src: PEER_OF_B,
        };
        b.qp.handle_packet(now, &rx, &mut b.mem);
    };
    send(b, atomic_write(0, rb.rkey, BASE + 8));
    let sent = drain(&mut b.qp, &b.mem, now);
    assert_eq!(sent.len(), 1, "{sent:?}");
    let (op, psn, aeth, _, len) = sent[0];
    assert_eq!((op, psn, len), (Opcode::RcReadResponseOnly, 0, 0));
    assert!(matches!(
        aeth.map(|a| a.syndrome),
        Some(AethSyndrome::Ack { .. })
    ));
    assert_eq!(b.mem.bytes(rb.lkey, BASE + 8, 8).unwrap(), value);
    // The duplicate: answered, not written again.
    b.mem
        .bytes_mut(rb.lkey, BASE + 8, 8)
        .unwrap()
        .copy_from_slice(&[0; 8]);
    send(b, atomic_write(0, rb.rkey, BASE + 8));
    let again = drain(&mut b.qp, &b.mem, now);
    assert_eq!(
        again.iter().map(|s| (s.0, s.1, s.4)).collect::<Vec<_>>(),
        [(Opcode::RcReadResponseOnly, 0, 0)]
    );
    assert_eq!(b.mem.bytes(rb.lkey, BASE + 8, 8).unwrap(), [0; 8]);
    // Misaligned: an invalid request NAK, nothing written.
    send(b, atomic_write(1, rb.rkey, BASE + 12));
    let nak = drain(&mut b.qp, &b.mem, now);
    assert!(
        nak.iter().any(|s| s.0 == Opcode::RcAcknowledge
            && matches!(
                s.2.map(|a| a.syndrome),
                Some(AethSyndrome::Nak(NakCode::InvalidRequest))
            )),
        "{nak:?}"
    );
    assert_eq!(b.mem.bytes(rb.lkey, BASE + 8, 16).unwrap(), [0; 16]);
}

/// The audit's finding: a go-back-N retry resent every PSN of the message
/// it had started, past `max_unacked_psns` (512 packets where the first
/// try sent 128). A retry resends the window and waits for ACKs like a
/// first try, in both worlds.
#[test]
fn a_retry_stays_within_the_window() {
    let (mut p, rb) = connected(ConnectAttrs::default(), |c| {
        c.max_unacked_psns = 128;
    });
    let a = &mut p.a;
    post_512_packet_write(a, rb.rkey);
    let first = drain(&mut a.qp, &a.mem, Instant::ZERO).len();
    assert_eq!(first, 128);
    let t = a.qp.poll_timeout().expect("the ACK timer runs");
    a.qp.handle_timeout(t);
    let again: Vec<u32> = drain(&mut a.qp, &a.mem, t).iter().map(|s| s.1).collect();
    assert_eq!(again, (0..128).collect::<Vec<u32>>());
}

/// Post, on A, a WRITE of 512 KiB (512 packets of 1 KiB) to B's region
/// at [`BASE`], from a region of its own.
fn post_512_packet_write(a: &mut roce::transport::pair::Endpoint<ByteMemory>, rkey: Rkey) {
    let lkey = a
        .mem
        .register(0x200_0000, 512 * 1024, AccessFlags::ALL)
        .unwrap()
        .lkey;
    let op = SendOp::Write {
        remote_addr: BASE,
        rkey,
    };
    let sge = Sge {
        addr: 0x200_0000,
        length: 512 * 1024,
        lkey,
    };
    a.qp.post_send(SendWr::new(1, op, sge)).unwrap();
}
