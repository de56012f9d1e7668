//! The transport engine over the lossy pair harness.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use roce::cc::CcConfig;
use roce::time::{Duration, Instant, Rate};
use roce::transport::pair::{ConnectAttrs, DriveError, Limits, Loss, LossScope, Pair, WireConfig};
use roce::transport::*;
use roce::wire::{Lkey, Opcode, Qpn, Rkey};

const BASE: u64 = 0x10_0000;
const REGION: u64 = 4 << 20;

struct Setup {
    pair: Pair<ByteMemory>,
    a: Registration,
    b: Registration,
}

fn setup(
    attrs: ConnectAttrs,
    ab: WireConfig,
    ba: WireConfig,
    tweak: impl Fn(&mut QpConfig),
) -> Setup {
    let mut ma = ByteMemory::new();
    let mut mb = ByteMemory::new();
    let a = ma.register(BASE, REGION, AccessFlags::ALL).unwrap();
    let b = mb.register(BASE, REGION, AccessFlags::ALL).unwrap();
    let mut ca = QpConfig::new(Qpn::new(0x11));
    let mut cb = QpConfig::new(Qpn::new(0x22));
    tweak(&mut ca);
    tweak(&mut cb);
    let pair = Pair::connect(ca, ma, cb, mb, attrs, ab, ba).unwrap();
    Setup { pair, a, b }
}

fn link() -> WireConfig {
    WireConfig::clean(Rate::from_gbps(100), Duration::from_us(2))
}

fn fill(mem: &mut ByteMemory, key: Lkey, addr: u64, len: u64, seed: u64) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.fill(mem.bytes_mut(key, addr, len).unwrap());
}

#[test]
fn send_write_read_and_atomics_deliver_intact_on_a_clean_wire() {
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    let (ka, kb) = (s.a.lkey, s.b.lkey);
    fill(&mut s.pair.a.mem, ka, BASE, 100_000, 7);
    fill(&mut s.pair.b.mem, kb, BASE + 200_000, 50_000, 8);
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 100,
            sges: SgeList::one(BASE, 20_000, kb),
        })
        .unwrap();
    let sge = |addr, len| Sge {
        addr,
        length: len,
        lkey: ka,
    };
    let qp = &mut s.pair.a.qp;
    qp.post_send(SendWr::new(1, SendOp::Send, sge(BASE, 10_000)))
        .unwrap();
    qp.post_send(SendWr::new(
        2,
        SendOp::Write {
            remote_addr: BASE + 100_000,
            rkey: s.b.rkey,
        },
        sge(BASE + 10_000, 30_000),
    ))
    .unwrap();
    qp.post_send(SendWr::new(
        3,
        SendOp::Read {
            remote_addr: BASE + 200_000,
            rkey: s.b.rkey,
        },
        sge(BASE + 500_000, 50_000),
    ))
    .unwrap();
    qp.post_send(SendWr::new(
        4,
        SendOp::FetchAdd {
            remote_addr: BASE + 300_000,
            rkey: s.b.rkey,
            add: 5,
        },
        sge(BASE + 600_000, 8),
    ))
    .unwrap();
    qp.post_send(SendWr::new(
        5,
        SendOp::CompareSwap {
            remote_addr: BASE + 300_000,
            rkey: s.b.rkey,
            compare: 5,
            swap: 77,
        },
        sge(BASE + 600_008, 8),
    ))
    .unwrap();
    s.pair
        .run_until(Limits::default(), |p| {
            p.a.completions.len() == 5 && p.b.completions.len() == 1
        })
        .unwrap();
    for c in &s.pair.a.completions {
        assert_eq!(c.status, WcStatus::Success, "{c:?}");
    }
    let ids: Vec<u64> = s.pair.a.completions.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    let a = &s.pair.a.mem;
    let b = &s.pair.b.mem;
    assert_eq!(
        b.bytes(kb, BASE, 10_000).unwrap(),
        a.bytes(ka, BASE, 10_000).unwrap()
    );
    assert_eq!(s.pair.b.completions[0].byte_len, 10_000);
    assert_eq!(
        b.bytes(kb, BASE + 100_000, 30_000).unwrap(),
        a.bytes(ka, BASE + 10_000, 30_000).unwrap()
    );
    assert_eq!(
        a.bytes(ka, BASE + 500_000, 50_000).unwrap(),
        b.bytes(kb, BASE + 200_000, 50_000).unwrap()
    );
    assert_eq!(a.bytes(ka, BASE + 600_000, 8).unwrap(), 0u64.to_ne_bytes());
    assert_eq!(a.bytes(ka, BASE + 600_008, 8).unwrap(), 5u64.to_ne_bytes());
    assert_eq!(b.bytes(kb, BASE + 300_000, 8).unwrap(), 77u64.to_ne_bytes());
}

/// What one work request should have done, for the final check.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Bytes at A[src..src+len] must appear at B[dst..] (SEND or WRITE).
    AtoB { src: u64, dst: u64, len: u64 },
    /// Bytes at B[src..] must appear at A[dst..] (READ).
    BtoA { src: u64, dst: u64, len: u64 },
    /// The fetch-and-add result landed at A[dst] and must equal `orig`.
    Fetch { dst: u64, orig: u64 },
}

/// Post a random mix of every operation, with SGE lists, and check
/// exactly-once, in-order delivery with intact bytes.
fn random_workload(
    seed: u64,
    loss: f64,
    psn_start: u32,
    n_wr: usize,
    tweak: fn(&mut QpConfig),
) -> Pair<ByteMemory> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let wire = |s: u64| WireConfig {
        loss: Loss::Random(loss),
        reorder: 0.02,
        reorder_delay: Duration::from_us(3),
        duplicate: 0.01,
        seed: s,
        ..link()
    };
    let mtu = [Mtu::Mtu256, Mtu::Mtu1024, Mtu::Mtu4096][(seed % 3) as usize];
    let attrs = ConnectAttrs {
        mtu,
        timeout: 5,
        retry_cnt: 7,
        psn_a: psn_start,
        psn_b: psn_start.wrapping_add(0x1234),
        max_rd_atomic: 4,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, wire(seed * 2 + 1), wire(seed * 2 + 2), tweak);
    let (ka, kb, rkb) = (s.a.lkey, s.b.lkey, s.b.rkey);
    fill(&mut s.pair.a.mem, ka, BASE, REGION / 2, seed ^ 0xA);
    fill(
        &mut s.pair.b.mem,
        kb,
        BASE + REGION / 2,
        REGION / 2,
        seed ^ 0xB,
    );
    let counter = BASE + REGION - 8; // in B, for atomics
    s.pair.b.mem.bytes_mut(kb, counter, 8).unwrap().fill(0);
    let mut a_next = BASE; // A source region cursor
    let mut a_dst = BASE + REGION / 2; // A READ destination cursor
    let mut b_src = BASE + REGION / 2; // B READ source cursor
    let mut b_dst = BASE; // B SEND/WRITE destination cursor
    let mut expects = Vec::new();
    let mut recv_expect = Vec::new(); // (wr_id, byte_len, imm)
    let mut sum = 0u64;
    for i in 0..n_wr as u64 {
        let kind = rng.gen_range(0..7);
        let len = if rng.gen_bool(0.1) {
            0
        } else {
            rng.gen_range(1..12_000u64)
        };
        // Split the local buffer into up to 3 SGEs.
        let mk_sges = |base: u64, len: u64, rng: &mut ChaCha8Rng| {
            let cuts = if len > 2 { rng.gen_range(0..3) } else { 0 };
            let mut points: Vec<u64> = (0..cuts).map(|_| rng.gen_range(1..len)).collect();
            points.sort();
            points.dedup();
            let mut v = Vec::new();
            let mut prev = 0;
            for p in points.into_iter().chain([len]) {
                v.push(Sge {
                    addr: base + prev,
                    length: (p - prev) as u32,
                    lkey: ka,
                });
                prev = p;
            }
            SgeList::from_slice(&v).unwrap()
        };
        let imm = rng.gen::<u32>();
        let (op, sges) = match kind {
            0..=2 => {
                let op = match kind {
                    0 => SendOp::Send,
                    1 => SendOp::SendWithImm(imm),
                    _ => SendOp::Write {
                        remote_addr: b_dst,
                        rkey: rkb,
                    },
                };
                let sg = mk_sges(a_next, len, &mut rng);
                expects.push(Expect::AtoB {
                    src: a_next,
                    dst: b_dst,
                    len,
                });
                if kind < 2 {
                    s.pair
                        .b
                        .qp
                        .post_recv(RecvWr {
                            wr_id: 1000 + i,
                            sges: SgeList::one(b_dst, len as u32 + 16, kb),
                        })
                        .unwrap();
                    recv_expect.push((
                        1000 + i,
                        len as u32,
                        if kind == 1 { Some(imm) } else { None },
                    ));
                }
                a_next += len;
                b_dst += len + 16;
                (op, sg)
            }
            3 => {
                let op = SendOp::WriteWithImm {
                    remote_addr: b_dst,
                    rkey: rkb,
                    imm,
                };
                let sg = mk_sges(a_next, len, &mut rng);
                expects.push(Expect::AtoB {
                    src: a_next,
                    dst: b_dst,
                    len,
                });
                s.pair
                    .b
                    .qp
                    .post_recv(RecvWr {
                        wr_id: 1000 + i,
                        sges: SgeList::new(),
                    })
                    .unwrap();
                recv_expect.push((1000 + i, len as u32, Some(imm)));
                a_next += len;
                b_dst += len;
                (op, sg)
            }
            4 => {
                let op = SendOp::Read {
                    remote_addr: b_src,
                    rkey: rkb,
                };
                let sg = mk_sges(a_dst, len, &mut rng);
                expects.push(Expect::BtoA {
                    src: b_src,
                    dst: a_dst,
                    len,
                });
                b_src += len;
                a_dst += len;
                (op, sg)
            }
            _ => {
                let add = rng.gen_range(1..1000u64);
                let op = if kind == 5 {
                    SendOp::FetchAdd {
                        remote_addr: counter,
                        rkey: rkb,
                        add,
                    }
                } else {
                    // A compare-and-swap that always succeeds keeps the
                    // expected value computable: compare with the running sum.
                    SendOp::CompareSwap {
                        remote_addr: counter,
                        rkey: rkb,
                        compare: sum,
                        swap: sum + add,
                    }
                };
                let dst = (a_dst + 7) & !7;
                expects.push(Expect::Fetch { dst, orig: sum });
                sum += add;
                a_dst = dst + 8;
                (op, SgeList::one(dst, 8, ka))
            }
        };
        let flags = if rng.gen_bool(0.7) {
            SendFlags::SIGNALED
        } else {
            SendFlags::EMPTY
        };
        let flags = if rng.gen_bool(0.1) {
            flags | SendFlags::FENCE
        } else {
            flags
        };
        let flags = if rng.gen_bool(0.2) {
            flags | SendFlags::SOLICITED
        } else {
            flags
        };
        s.pair
            .a
            .qp
            .post_send(SendWr {
                wr_id: i,
                op,
                sges,
                flags,
                ud: None,
            })
            .unwrap();
    }
    let signaled_last = n_wr as u64 - 1;
    // Make the last WR signaled so that completion of everything is visible.
    let limits = Limits {
        max_time: Instant::from_ps(Duration::from_secs(5).as_ps()),
        stall: Duration::from_ms(50),
        ..Limits::default()
    };
    let n_recv = recv_expect.len();
    let res = s.pair.run_until(limits, |p| {
        p.a.qp.send_queue_len() == 0 && p.b.completions.len() == n_recv
    });
    if let Err(e) = res {
        let failed: Vec<_> = s
            .pair
            .a
            .completions
            .iter()
            .filter(|c| c.status != WcStatus::Success && c.status != WcStatus::WrFlushErr)
            .map(|c| (c.wr_id, c.status, c.opcode))
            .collect();
        panic!(
            "seed {seed} loss {loss}: {e}; A failed {failed:?}; A {:?} B {:?} sq {} a-state {} b-state {} ab {:?}",
            s.pair.a.qp.stats(),
            s.pair.b.qp.stats(),
            s.pair.a.qp.send_queue_len(),
            s.pair.a.qp.state(),
            s.pair.b.qp.state(),
            s.pair.ab.stats()
        );
    }
    let _ = signaled_last;
    // Requester: every signaled WR succeeded, in order.
    let mut last = None;
    for c in &s.pair.a.completions {
        assert_eq!(
            c.status,
            WcStatus::Success,
            "seed {seed} loss {loss}: {c:?}"
        );
        if let Some(l) = last {
            assert!(c.wr_id > l, "completions out of order");
        }
        last = Some(c.wr_id);
    }
    // Responder: one completion per receive, in order, with the right length and imm.
    let got: Vec<(u64, u32, Option<u32>)> = s
        .pair
        .b
        .completions
        .iter()
        .map(|c| (c.wr_id, c.byte_len, c.imm_data))
        .collect();
    assert_eq!(
        got, recv_expect,
        "seed {seed} loss {loss}: receive completions"
    );
    for c in &s.pair.b.completions {
        assert_eq!(c.status, WcStatus::Success);
    }
    // Memory.
    let (ma, mb) = (&s.pair.a.mem, &s.pair.b.mem);
    for e in &expects {
        match *e {
            Expect::AtoB { src, dst, len } => assert_eq!(
                ma.bytes(ka, src, len).unwrap(),
                mb.bytes(kb, dst, len).unwrap(),
                "seed {seed} loss {loss}: {e:?}"
            ),
            Expect::BtoA { src, dst, len } => assert_eq!(
                mb.bytes(kb, src, len).unwrap(),
                ma.bytes(ka, dst, len).unwrap(),
                "seed {seed} loss {loss}: {e:?}"
            ),
            Expect::Fetch { dst, orig } => assert_eq!(
                ma.bytes(ka, dst, 8).unwrap(),
                orig.to_ne_bytes(),
                "seed {seed} loss {loss}: {e:?}"
            ),
        }
    }
    assert_eq!(
        mb.bytes(kb, counter, 8).unwrap(),
        sum.to_ne_bytes(),
        "atomics ran exactly once"
    );
    s.pair
}

#[test]
fn every_operation_is_delivered_exactly_once_in_order_under_loss_reorder_and_duplication() {
    for (li, loss) in [0.0, 1e-3, 1e-2, 5e-2].into_iter().enumerate() {
        let mut retransmits = 0;
        for seed in 0..30u64 {
            // A third of the runs start just below the PSN wrap.
            let psn = if seed % 3 == 0 {
                0xFF_FFF0
            } else {
                (seed * 7919) as u32 & 0xFF_FFFF
            };
            let p = random_workload(seed + 100 * li as u64, loss, psn, 100, |_| {});
            retransmits += p.a.qp.stats().tx_retransmits;
        }
        // Reordering alone forces some retransmissions; loss forces many.
        assert!(retransmits > 0, "loss {loss}: the faults were exercised");
    }
}

#[test]
fn held_out_of_order_writes_keep_every_operation_exactly_once_and_in_order() {
    // The same mix with a reorder window: selective repeat, and go-back-N
    // over a responder that places out of order. Bytes, completions and
    // atomics must come out as they do in order, across the PSN wrap.
    fn sr(c: &mut QpConfig) {
        c.retransmit = RetransmitMode::SelectiveRepeat;
        c.reorder_window = 256;
        c.write_reth_every_packet = true;
    }
    fn sr_one_reth(c: &mut QpConfig) {
        c.retransmit = RetransmitMode::SelectiveRepeat;
        c.reorder_window = 256;
    }
    fn ooo(c: &mut QpConfig) {
        c.reorder_window = 64;
        c.write_reth_every_packet = true;
    }
    for (name, tweak) in [
        ("selective repeat", sr as fn(&mut QpConfig)),
        ("selective repeat, one RETH per WRITE", sr_one_reth),
        ("go-back-n", ooo),
    ] {
        let (mut held, mut sacks, mut resent, mut read_placed) = (0, 0, 0, 0);
        for (li, loss) in [0.0, 1e-2, 5e-2].into_iter().enumerate() {
            for seed in 0..20u64 {
                let psn = if seed % 3 == 0 {
                    0xFF_FFF0
                } else {
                    (seed * 7919) as u32 & 0xFF_FFFF
                };
                let p = random_workload(seed + 1000 * li as u64, loss, psn, 100, tweak);
                let (a, b) = (p.a.qp.stats(), p.b.qp.stats());
                held += b.rx_ooo_held;
                sacks += a.rx_sacks;
                resent += a.sr_retransmits;
                read_placed += a.rx_read_ooo_placed;
                assert_eq!(
                    a.rx_ooo_held, 0,
                    "{name}: nothing flows B to A but responses"
                );
            }
        }
        eprintln!(
            "{name}: held {held}, selective acks {sacks}, holes resent {resent}, \
             READ responses placed out of order {read_placed}"
        );
        assert!(held > 0, "{name}: the reorder window was used");
        if name.starts_with("selective repeat") {
            assert!(
                sacks > 0 && resent > 0,
                "{name}: holes were reported and resent"
            );
            assert!(read_placed > 0, "{name}: READ responses placed past a gap");
        } else {
            assert_eq!(sacks + resent, 0, "{name}: no selective acknowledgements");
            assert_eq!(read_placed, 0, "{name}: READ responses in order only");
        }
    }
}

#[test]
fn psn_wraps_around_2_pow_24_mid_message() {
    let p = random_workload(4242, 1e-2, 0xFF_FFFE, 80, |_| {});
    let next = p.a.qp.next_psn().value();
    assert!(next < 0x10_0000, "the PSN wrapped: next {next:#x}");
}

fn one_send(s: &mut Setup, wr_id: u64, len: u32) {
    let sge = Sge {
        addr: BASE,
        length: len,
        lkey: s.a.lkey,
    };
    s.pair
        .a
        .qp
        .post_send(SendWr::new(wr_id, SendOp::Send, sge))
        .unwrap();
}

fn short_limits() -> Limits {
    Limits {
        max_time: Instant::from_ps(Duration::from_secs(2).as_ps()),
        stall: Duration::from_secs(1),
        ..Limits::default()
    }
}

#[test]
fn retry_exhaustion_gives_retry_exc_err_after_exactly_retry_cnt_retransmissions() {
    for retry_cnt in [0u8, 3, 7] {
        let dead = WireConfig {
            loss: Loss::Random(1.0),
            ..link()
        };
        let attrs = ConnectAttrs {
            timeout: 1,
            retry_cnt,
            ..ConnectAttrs::default()
        };
        let mut s = setup(attrs, dead, link(), |_| {});
        one_send(&mut s, 1, 100);
        one_send(&mut s, 2, 100);
        s.pair
            .run_until(short_limits(), |p| p.a.completions.len() == 2)
            .unwrap();
        let st: Vec<WcStatus> = s.pair.a.completions.iter().map(|c| c.status).collect();
        assert_eq!(st, [WcStatus::RetryExcErr, WcStatus::WrFlushErr]);
        let stats = s.pair.a.qp.stats();
        assert_eq!(stats.tx_requests, 2);
        // Each retry resends both outstanding packets.
        assert_eq!(
            stats.tx_retransmits,
            2 * retry_cnt as u64,
            "retry_cnt {retry_cnt}"
        );
        assert_eq!(stats.timeouts, retry_cnt as u64 + 1);
        assert_eq!(s.pair.a.qp.state(), QpState::Err);
        // Posting after the error flushes at once.
        one_send(&mut s, 3, 1);
        assert_eq!(
            s.pair.a.qp.poll_completion().unwrap().status,
            WcStatus::WrFlushErr
        );
    }
}

#[test]
fn local_ack_timeout_follows_4096ns_times_2_pow_timeout() {
    assert_eq!(local_ack_timeout(0), None);
    assert_eq!(local_ack_timeout(1), Some(Duration::from_ps(8_192_000)));
    assert_eq!(local_ack_timeout(14), Some(Duration::from_ns(4096 << 14)));
    assert_eq!(rnr_timer(0), Duration::from_us(655_360));
    assert_eq!(rnr_timer(1), Duration::from_us(10));
    assert_eq!(rnr_timer(25), Duration::from_us(61_440));
    assert_eq!(rnr_timer(31), Duration::from_us(491_520));
    // The first timeout fires exactly one Local ACK Timeout after the send.
    let dead = WireConfig {
        loss: Loss::Random(1.0),
        ..link()
    };
    let attrs = ConnectAttrs {
        timeout: 3,
        retry_cnt: 0,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, dead, link(), |_| {});
    one_send(&mut s, 1, 8);
    s.pair
        .run_until(short_limits(), |p| !p.a.completions.is_empty())
        .unwrap();
    assert_eq!(s.pair.now, Instant::from_ps(4096 * 8 * 1000));
}

#[test]
fn rnr_exhaustion_gives_rnr_retry_exc_err_and_rnr_retry_7_waits_forever() {
    let attrs = ConnectAttrs {
        rnr_retry: 2,
        min_rnr_timer: 1,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, link(), link(), |_| {});
    one_send(&mut s, 1, 100);
    s.pair
        .run_until(short_limits(), |p| !p.a.completions.is_empty())
        .unwrap();
    assert_eq!(s.pair.a.completions[0].status, WcStatus::RnrRetryExcErr);
    assert_eq!(s.pair.b.qp.stats().tx_rnr_naks, 3);
    assert_eq!(s.pair.a.qp.stats().tx_retransmits, 2);
    // The responder is not harmed by RNR (Class B).
    assert_eq!(s.pair.b.qp.state(), QpState::Rts);

    let attrs = ConnectAttrs {
        rnr_retry: 7,
        min_rnr_timer: 14,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, link(), link(), |_| {});
    one_send(&mut s, 1, 100);
    let t = Instant::from_ps(Duration::from_ms(20).as_ps());
    let err = s.pair.run_until(short_limits(), |p| p.now >= t);
    assert!(err.is_ok());
    assert!(s.pair.a.completions.is_empty());
    let naks = s.pair.b.qp.stats().tx_rnr_naks;
    // 1.28 ms between tries: about 16 tries in 20 ms.
    assert!((14..=17).contains(&naks), "{naks} RNR NAKs");
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 9,
            sges: SgeList::one(BASE, 100, s.b.lkey),
        })
        .unwrap();
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 1)
        .unwrap();
    assert_eq!(s.pair.a.completions[0].status, WcStatus::Success);
    assert_eq!(s.pair.b.completions[0].byte_len, 100);
}

/// Sends in flight behind an RNR-NAKed one reach a responder that still
/// expects the NAKed PSN: it answers the first of them with a sequence
/// NAK for that PSN. The requester is already waiting to resend from there,
/// so that NAK asks for nothing new and must not use up `retry_cnt`: with
/// `rnr_retry` 7 a receiver short of receives for many RNR rounds never
/// fails its peer's sends (an SRQ that runs dry under load).
#[test]
fn sequence_naks_during_an_rnr_wait_do_not_use_up_retry_cnt() {
    let attrs = ConnectAttrs {
        retry_cnt: 1,
        rnr_retry: 7,
        min_rnr_timer: 1,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, link(), link(), |_| {});
    one_send(&mut s, 1, 100);
    one_send(&mut s, 2, 100);
    let t = Instant::from_ps(Duration::from_ms(2).as_ps());
    let run = s.pair.run_until(short_limits(), |p| {
        p.now >= t || !p.a.completions.is_empty()
    });
    assert!(
        s.pair.a.completions.is_empty(),
        "{:?}",
        s.pair.a.completions
    );
    assert!(run.is_ok(), "{run:?}");
    let b = s.pair.b.qp.stats();
    assert!(b.tx_rnr_naks >= 10, "{} RNR NAKs", b.tx_rnr_naks);
    for wr_id in [8, 9] {
        s.pair
            .b
            .qp
            .post_recv(RecvWr {
                wr_id,
                sges: SgeList::one(BASE, 100, s.b.lkey),
            })
            .unwrap();
    }
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 2)
        .unwrap();
    let st: Vec<WcStatus> = s.pair.a.completions.iter().map(|c| c.status).collect();
    assert_eq!(st, [WcStatus::Success, WcStatus::Success]);
}

#[test]
fn bad_rkey_gives_rem_access_err_and_leaves_memory_untouched() {
    for (name, op) in [
        (
            "bad key",
            SendOp::Write {
                remote_addr: BASE,
                rkey: Rkey::new(0x999),
            },
        ),
        (
            "out of bounds",
            SendOp::Write {
                remote_addr: BASE + REGION - 100,
                rkey: Rkey::new(0),
            },
        ),
        (
            "read out of bounds",
            SendOp::Read {
                remote_addr: BASE + REGION - 100,
                rkey: Rkey::new(0),
            },
        ),
    ] {
        let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
        fill(&mut s.pair.a.mem, s.a.lkey, BASE, 8192, 3);
        let op = match op {
            SendOp::Write { remote_addr, rkey } if rkey.value() == 0 => SendOp::Write {
                remote_addr,
                rkey: s.b.rkey,
            },
            SendOp::Read { remote_addr, .. } => SendOp::Read {
                remote_addr,
                rkey: s.b.rkey,
            },
            op => op,
        };
        let sge = Sge {
            addr: BASE,
            length: 4096,
            lkey: s.a.lkey,
        };
        s.pair.a.qp.post_send(SendWr::new(1, op, sge)).unwrap();
        one_send(&mut s, 2, 10);
        s.pair
            .run_until(short_limits(), |p| p.a.completions.len() == 2)
            .unwrap();
        let st: Vec<WcStatus> = s.pair.a.completions.iter().map(|c| c.status).collect();
        assert_eq!(st, [WcStatus::RemAccessErr, WcStatus::WrFlushErr], "{name}");
        assert!(s
            .pair
            .b
            .mem
            .bytes(s.b.lkey, BASE, REGION)
            .unwrap()
            .iter()
            .all(|&b| b == 0));
        assert_eq!(s.pair.a.qp.state(), QpState::Err);
        assert_eq!(
            s.pair.b.qp.state(),
            QpState::Err,
            "{name}: the responder goes to ERR too"
        );
    }
}

#[test]
fn atomics_run_once_under_duplicated_requests_and_lost_acks() {
    let ab = WireConfig {
        duplicate: 1.0,
        ..link()
    };
    let ba = WireConfig {
        loss: Loss::Random(0.3),
        seed: 9,
        ..link()
    };
    let attrs = ConnectAttrs {
        timeout: 2,
        max_rd_atomic: 4,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, ab, ba, |_| {});
    let n = 50u64;
    for i in 0..n {
        let sge = Sge {
            addr: BASE + 8 * i,
            length: 8,
            lkey: s.a.lkey,
        };
        let op = SendOp::FetchAdd {
            remote_addr: BASE + 4096,
            rkey: s.b.rkey,
            add: 1,
        };
        s.pair.a.qp.post_send(SendWr::new(i, op, sge)).unwrap();
    }
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == n as usize)
        .unwrap();
    assert!(s
        .pair
        .a
        .completions
        .iter()
        .all(|c| c.status == WcStatus::Success));
    let b = s.pair.b.qp.stats();
    assert_eq!(b.atomics_executed, n);
    assert!(b.rx_duplicates >= n, "every request arrived at least twice");
    assert_eq!(
        s.pair.b.mem.bytes(s.b.lkey, BASE + 4096, 8).unwrap(),
        n.to_ne_bytes()
    );
    for i in 0..n {
        let v = s.pair.a.mem.bytes(s.a.lkey, BASE + 8 * i, 8).unwrap();
        assert_eq!(v, i.to_ne_bytes(), "fetch {i} saw the value before it");
    }
}

#[test]
fn send_with_invalidate_of_a_plain_mr_is_class_j_and_the_mr_survives() {
    // A peer may invalidate memory windows and fast-registration MRs only.
    // Against a plain MR: no ACK of any kind, the receive completes in
    // error, the responder goes to ERR, the key stays valid.
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    let (ka, kb) = (s.a.lkey, s.b.lkey);
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 7,
            sges: SgeList::one(BASE, 64, kb),
        })
        .unwrap();
    let sge = Sge {
        addr: BASE,
        length: 16,
        lkey: ka,
    };
    s.pair
        .a
        .qp
        .post_send(SendWr::new(1, SendOp::SendWithInv(s.b.rkey), sge))
        .unwrap();
    s.pair
        .run_until(short_limits(), |p| !p.a.completions.is_empty())
        .unwrap();
    let b = &s.pair.b;
    assert_eq!(b.completions[0].wr_id, 7);
    assert_eq!(b.completions[0].status, WcStatus::RemInvReqErr);
    assert_eq!(b.completions[0].invalidated_rkey, None);
    assert_eq!(b.qp.state(), QpState::Err);
    assert_eq!(b.qp.stats().rx_bad_invalidate, 1);
    assert_eq!(b.qp.stats().tx_responses, 0, "no ACK and no NAK");
    // The requester hears nothing and gives up after its retries.
    assert_eq!(s.pair.a.qp.stats().rx_naks, 0);
    assert_eq!(s.pair.a.completions[0].status, WcStatus::RetryExcErr);
    // The region is still registered and usable.
    assert!(b
        .mem
        .check(
            MemKey::Remote(s.b.rkey),
            BASE,
            64,
            AccessFlags::REMOTE_WRITE
        )
        .is_ok());
}

#[test]
fn receive_buffer_too_small_is_loc_len_err_here_and_rem_inv_req_err_there() {
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 7,
            sges: SgeList::one(BASE, 100, s.b.lkey),
        })
        .unwrap();
    one_send(&mut s, 1, 3000);
    s.pair
        .run_until(short_limits(), |p| !p.a.completions.is_empty())
        .unwrap();
    assert_eq!(s.pair.a.completions[0].status, WcStatus::RemInvReqErr);
    assert_eq!(s.pair.b.completions[0].status, WcStatus::LocLenErr);
    assert!(s
        .pair
        .b
        .mem
        .bytes(s.b.lkey, BASE + 100, 3000)
        .unwrap()
        .iter()
        .all(|&b| b == 0));
}

#[test]
fn modify_checks_transitions_and_attribute_masks() {
    let mut qp = Qp::new(QpConfig::new(Qpn::new(5)));
    let attr = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    let e = qp.modify(&attr, QpAttrMask::STATE).unwrap_err();
    assert_eq!(
        e,
        ModifyError::InvalidTransition {
            from: QpState::Reset,
            to: QpState::Rtr
        }
    );
    assert_eq!(e.to_string(), "invalid QP transition RESET -> RTR");
    let init = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: AccessFlags::ALL,
        ..QpAttr::default()
    };
    let e = qp
        .modify(&init, QpAttrMask::STATE | QpAttrMask::PORT)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "QP transition RESET -> INIT requires attributes ACCESS_FLAGS|PKEY_INDEX"
    );
    let e = qp
        .modify(
            &init,
            QpAttrMask::STATE
                | QpAttrMask::PORT
                | QpAttrMask::PKEY_INDEX
                | QpAttrMask::ACCESS_FLAGS
                | QpAttrMask::SQ_PSN,
        )
        .unwrap_err();
    assert!(
        matches!(e, ModifyError::UnexpectedAttributes { unexpected, .. } if unexpected == QpAttrMask::SQ_PSN)
    );
    assert_eq!(
        qp.state(),
        QpState::Reset,
        "a refused modify changes nothing"
    );
    let err = QpAttr {
        qp_state: QpState::Err,
        ..QpAttr::default()
    };
    assert!(matches!(
        qp.modify(&err, QpAttrMask::STATE),
        Err(ModifyError::InvalidTransition { .. })
    ));
    qp.modify(
        &init,
        QpAttrMask::STATE | QpAttrMask::PORT | QpAttrMask::PKEY_INDEX | QpAttrMask::ACCESS_FLAGS,
    )
    .unwrap();
    assert_eq!(
        qp.post_send(SendWr::new(1, SendOp::Send, Sge::default())),
        Err(PostError::BadState(QpState::Init))
    );
    qp.post_recv(RecvWr {
        wr_id: 4,
        sges: SgeList::new(),
    })
    .unwrap();
    let rtr = QpAttr {
        qp_state: QpState::Rtr,
        ..QpAttr::default()
    };
    let e = qp
        .modify(
            &rtr,
            QpAttrMask::STATE | QpAttrMask::AV | QpAttrMask::PATH_MTU,
        )
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "QP transition INIT -> RTR requires attributes RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"
    );
    // Going to ERR flushes the receive queue.
    qp.modify(&err, QpAttrMask::STATE).unwrap();
    let c = qp.poll_completion().unwrap();
    assert_eq!(
        (c.wr_id, c.status, c.is_recv),
        (4, WcStatus::WrFlushErr, true)
    );
    let reset = QpAttr {
        qp_state: QpState::Reset,
        ..QpAttr::default()
    };
    qp.modify(&reset, QpAttrMask::STATE).unwrap();
    assert_eq!(qp.state(), QpState::Reset);
}

#[test]
fn rts_to_sqd_drains_and_reports_it() {
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    for i in 0..2 {
        s.pair
            .b
            .qp
            .post_recv(RecvWr {
                wr_id: i,
                sges: SgeList::one(BASE, 8192, s.b.lkey),
            })
            .unwrap();
    }
    one_send(&mut s, 1, 8000);
    one_send(&mut s, 2, 10);
    s.pair.step();
    let sqd = QpAttr {
        qp_state: QpState::Sqd,
        ..QpAttr::default()
    };
    s.pair.a.qp.modify(&sqd, QpAttrMask::STATE).unwrap();
    s.pair
        .run_until(short_limits(), |p| !p.a.completions.is_empty())
        .unwrap();
    assert_eq!(s.pair.a.qp.poll_event(), Some(QpEvent::SqDrained));
    assert_eq!(
        s.pair.a.qp.send_queue_len(),
        1,
        "the second WR did not start"
    );
    let rts = QpAttr {
        qp_state: QpState::Rts,
        ..QpAttr::default()
    };
    s.pair.a.qp.modify(&rts, QpAttrMask::STATE).unwrap();
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 2)
        .unwrap();
}

#[test]
fn uc_drops_damaged_messages_and_delivers_the_rest() {
    let ab = WireConfig {
        loss: Loss::EveryNth { n: 10, phase: 5 },
        ..link()
    };
    let mut s = setup(ConnectAttrs::default(), ab, link(), |c| {
        c.qp_type = QpType::Uc
    });
    fill(&mut s.pair.a.mem, s.a.lkey, BASE, 100_000, 5);
    for i in 0..20u64 {
        s.pair
            .b
            .qp
            .post_recv(RecvWr {
                wr_id: i,
                sges: SgeList::one(BASE + i * 4096, 4096, s.b.lkey),
            })
            .unwrap();
        one_send(&mut s, i, 3000); // 3 packets each
    }
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 20)
        .unwrap();
    let limits = Limits {
        stall: Duration::from_ms(1),
        ..short_limits()
    };
    let _ = s.pair.run_until(limits, |_| false);
    assert!(s
        .pair
        .a
        .completions
        .iter()
        .all(|c| c.status == WcStatus::Success));
    // 60 packets, 6 lost, each in a different message: 14 messages arrive.
    assert_eq!(s.pair.b.completions.len(), 14);
    for c in &s.pair.b.completions {
        assert_eq!(c.byte_len, 3000);
    }
    let first = s.pair.b.completions[0].wr_id;
    assert_eq!(
        s.pair
            .b
            .mem
            .bytes(s.b.lkey, BASE + first * 4096, 3000)
            .unwrap(),
        s.pair.a.mem.bytes(s.a.lkey, BASE, 3000).unwrap()
    );
}

#[test]
fn ud_sends_carry_deth_and_land_after_a_grh_area() {
    let mut s = setup(ConnectAttrs::default(), link(), link(), |c| {
        c.qp_type = QpType::Ud
    });
    fill(&mut s.pair.a.mem, s.a.lkey, BASE, 1000, 5);
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 1,
            sges: SgeList::one(BASE, 2000, s.b.lkey),
        })
        .unwrap();
    let mut wr = SendWr::new(
        1,
        SendOp::SendWithImm(0xabcd),
        Sge {
            addr: BASE,
            length: 1000,
            lkey: s.a.lkey,
        },
    );
    wr.ud = Some(UdDest {
        ah: AddressHandle(2),
        remote_qpn: Qpn::new(0x22),
        remote_qkey: 0x1111_1111,
    });
    s.pair.a.qp.post_send(wr).unwrap();
    // A wrong Q_Key is dropped.
    wr.ud = Some(UdDest {
        ah: AddressHandle(2),
        remote_qpn: Qpn::new(0x22),
        remote_qkey: 5,
    });
    s.pair.a.qp.post_send(wr).unwrap();
    let too_big = SendWr {
        sges: SgeList::one(BASE, 5000, s.a.lkey),
        ..wr
    };
    assert!(matches!(
        s.pair.a.qp.post_send(too_big),
        Err(PostError::Invalid(_))
    ));
    s.pair
        .run_until(short_limits(), |p| {
            p.b.completions.len() == 1 && p.a.completions.len() == 2
        })
        .unwrap();
    // Let the second datagram arrive too.
    assert!(matches!(
        s.pair.run_until(short_limits(), |_| false),
        Err(DriveError::Idle(_))
    ));
    assert_eq!(s.pair.b.completions.len(), 1);
    let c = s.pair.b.completions[0];
    assert_eq!(
        (c.byte_len, c.grh, c.src_qp, c.imm_data),
        (1040, true, Some(Qpn::new(0x11)), Some(0xabcd))
    );
    assert_eq!(
        s.pair.b.mem.bytes(s.b.lkey, BASE + 40, 1000).unwrap(),
        s.pair.a.mem.bytes(s.a.lkey, BASE, 1000).unwrap()
    );
    assert_eq!(s.pair.b.qp.stats().rx_dropped, 1);
}

/// One long flow of WRITEs over a 40 Gb/s link with RTT about 10 µs and
/// losses on data packets only; returns (goodput as a fraction of the link's
/// packet slots, W in packets per loss-detection RTT, messages completed).
fn long_flow(
    mode: RetransmitMode,
    loss: Loss,
    msg_len: u32,
    n_msgs: u64,
    limits: Limits,
) -> (f64, f64, u64, Result<(), DriveError>) {
    let rate = Rate::from_gbps(40);
    let latency = Duration::from_ns(5_085);
    let ab = WireConfig {
        loss,
        loss_scope: roce::transport::pair::LossScope::Data,
        seed: 77,
        ..WireConfig::clean(rate, latency)
    };
    let ba = WireConfig::clean(rate, latency);
    let mut ma = LengthMemory::new();
    let mut mb = LengthMemory::new();
    let ra = ma.register(0, msg_len as u64, AccessFlags::ALL).unwrap();
    let rb = mb.register(0, msg_len as u64, AccessFlags::ALL).unwrap();
    let mut ca = QpConfig::new(Qpn::new(1));
    ca.retransmit = mode;
    ca.max_send_wr = n_msgs as u32 + 1;
    let mut cb = QpConfig::new(Qpn::new(2));
    cb.retransmit = mode;
    if mode == RetransmitMode::SelectiveRepeat {
        // The responder's bitmap covers the window.
        cb.reorder_window = ca.max_unacked_psns;
    }
    let attrs = ConnectAttrs {
        timeout: 4,
        retry_cnt: 7,
        ..ConnectAttrs::default()
    };
    let mut pair = Pair::connect(ca, ma, cb, mb, attrs, ab, ba).unwrap();
    pair.collect = false;
    for i in 0..n_msgs {
        let op = SendOp::Write {
            remote_addr: 0,
            rkey: rb.rkey,
        };
        let mut wr = SendWr::new(
            i,
            op,
            Sge {
                addr: 0,
                length: msg_len,
                lkey: ra.lkey,
            },
        );
        wr.flags = SendFlags::SIGNALED;
        pair.a.qp.post_send(wr).unwrap();
    }
    let res = pair.run_until(limits, |p| p.a.completed == n_msgs);
    // One 1 KB data packet: 1024 + BTH 12 + 46 bytes of Ethernet/IP/UDP/ICRC.
    let slot = rate.serialization_time(1024 + 12 + 46).as_ps() as f64;
    let pkts = pair.a.completed as f64 * (msg_len / 1024) as f64;
    let goodput = pkts * slot / pair.now.as_ps() as f64;
    // Packets sent from a loss until the NAK comes back: the gap packet
    // reaches the responder one slot after the lost one, the NAK returns.
    let ack = rate.serialization_time(12 + 4 + 46).as_ps() as f64;
    let w = (2.0 * latency.as_ps() as f64 + 2.0 * slot + ack) / slot;
    (goodput, w, pair.a.completed, res)
}

#[test]
fn go_back_n_goodput_matches_the_arq_formula_under_iid_loss() {
    // VALIDATION.md AN-7: eta = (1-p)/(1+(W-1)p), 40G, 1 KB MTU, RTT 10 us.
    for (p, n_msgs) in [(1e-3, 2500u64), (1e-2, 1500)] {
        let (eta, w, done, res) = long_flow(
            RetransmitMode::GoBackN,
            Loss::Random(p),
            64 * 1024,
            n_msgs,
            Limits::default(),
        );
        res.unwrap();
        assert_eq!(done, n_msgs);
        eprintln!("AN-7 p={p}: goodput {eta:.4} W {w:.1}");
        let expect = (1.0 - p) / (1.0 + (w - 1.0) * p);
        assert!((48.0..50.0).contains(&w), "W = {w}");
        assert!(
            (eta - expect).abs() < 0.03,
            "p {p}: goodput {eta:.3}, formula {expect:.3} (W {w:.1})"
        );
    }
}

#[test]
fn selective_repeat_goodput_is_one_minus_p_under_iid_loss() {
    // VALIDATION.md AN-7: eta_SR = 1 - p where go-back-N falls to
    // (1-p)/(1+(W-1)p); same link, same loss draws.
    for (p, n_msgs) in [(1e-3, 2500u64), (1e-2, 1500)] {
        let (eta, w, done, res) = long_flow(
            RetransmitMode::SelectiveRepeat,
            Loss::Random(p),
            64 * 1024,
            n_msgs,
            Limits::default(),
        );
        res.unwrap();
        assert_eq!(done, n_msgs);
        let gbn = (1.0 - p) / (1.0 + (w - 1.0) * p);
        eprintln!("AN-7 selective repeat p={p}: goodput {eta:.4} (go-back-N formula {gbn:.4})");
        assert!(
            (eta - (1.0 - p)).abs() < 0.03,
            "p {p}: goodput {eta:.3}, 1 - p = {:.3}",
            1.0 - p
        );
    }
}

#[test]
fn go_back_0_livelocks_on_4mb_messages_and_go_back_n_completes_them() {
    // VALIDATION.md AN-8: deterministic 1-in-256 drop, 4 MB messages.
    let drop = Loss::EveryNth { n: 256, phase: 255 };
    let limits = Limits {
        max_time: Instant::from_ps(Duration::from_ms(40).as_ps()),
        stall: Duration::from_ms(20),
        ..Limits::default()
    };
    let (eta0, _, done0, res0) = long_flow(RetransmitMode::GoBack0, drop, 4 << 20, 2, limits);
    assert_eq!(done0, 0, "go-back-0 completes nothing");
    assert_eq!(eta0, 0.0);
    assert!(
        matches!(res0, Err(DriveError::NoProgress { .. })),
        "{res0:?}"
    );

    let (eta, w, done, res) =
        long_flow(RetransmitMode::GoBackN, drop, 4 << 20, 4, Limits::default());
    res.unwrap();
    assert_eq!(done, 4);
    // The drop counter runs over every packet offered, wasted ones
    // included (as the IP-ID does), so each period of 256 packets holds one
    // loss and W packets of waste: eta = (256 - W)/256. VALIDATION.md's
    // 255/(256 + W - 1) is the i.i.d. approximation, which counts losses
    // per useful packet only; it lies about 3 points higher.
    let exact = (256.0 - w) / 256.0;
    eprintln!("AN-8 go-back-N: goodput {eta:.4} W {w:.1}");
    let approx = 255.0 / (256.0 + w - 1.0);
    assert!(
        (eta - exact).abs() < 0.03,
        "goodput {eta:.3}, expected {exact:.3} (W {w:.1})"
    );
    assert!(
        (eta - approx).abs() < 0.04,
        "goodput {eta:.3}, approximation {approx:.3}"
    );
}

#[test]
fn ce_marks_make_at_most_one_cnp_per_interval_and_dcqcn_slows_the_sender() {
    let rate = Rate::from_gbps(40);
    let ab = WireConfig {
        ce: 1.0,
        ..WireConfig::clean(rate, Duration::from_us(2))
    };
    let ba = WireConfig::clean(rate, Duration::from_us(2));
    let mut ma = LengthMemory::new();
    let mut mb = LengthMemory::new();
    let ra = ma.register(0, 1 << 20, AccessFlags::ALL).unwrap();
    let rb = mb.register(0, 1 << 20, AccessFlags::ALL).unwrap();
    let mut ca = QpConfig::new(Qpn::new(1));
    ca.cc = CcConfig::Dcqcn(roce::cc::DcqcnParams::paper(rate));
    ca.max_send_wr = 4096;
    let mut cb = QpConfig::new(Qpn::new(2));
    cb.min_time_between_cnps = Some(Duration::from_us(50));
    let mut pair = Pair::connect(ca, ma, cb, mb, ConnectAttrs::default(), ab, ba).unwrap();
    pair.collect = false;
    for i in 0..2000 {
        let op = SendOp::Write {
            remote_addr: 0,
            rkey: rb.rkey,
        };
        pair.a
            .qp
            .post_send(SendWr::new(
                i,
                op,
                Sge {
                    addr: 0,
                    length: 65536,
                    lkey: ra.lkey,
                },
            ))
            .unwrap();
    }
    let end = Instant::from_ps(Duration::from_us(1000).as_ps());
    pair.run_until(Limits::default(), |p| p.now >= end).unwrap();
    let cnps = pair.b.qp.stats().tx_cnps;
    assert!(cnps <= 1000 / 50 + 1, "{cnps} CNPs in 1 ms");
    // Every packet is marked, and each CNP halves the rate (alpha stays 1),
    // so packets, and with them CNPs, thin out as the rate falls.
    assert!(cnps >= 10, "{cnps} CNPs in 1 ms");
    assert_eq!(pair.a.qp.stats().rx_cnps, cnps);
    let sent = pair.ab.stats().wire_bytes as f64 * 8.0;
    let util = sent / (40e9 * 1e-3);
    assert!(
        util < 0.5,
        "DCQCN held the sender well below line rate: {util:.2}"
    );
    match pair.a.qp.cc() {
        roce::cc::AnyCc::Dcqcn(d) => assert!(d.current_rate() < rate),
        other => panic!("{other:?}"),
    }
}

#[test]
fn pacing_holds_packets_and_reports_the_deadline() {
    let rate = Rate::from_gbps(10);
    let mut params = roce::cc::DcqcnParams::paper(rate);
    params.line_rate = rate;
    let mut s = setup(ConnectAttrs::default(), link(), link(), |c| {
        c.cc = CcConfig::Dcqcn(params);
    });
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 1,
            sges: SgeList::one(BASE, 4096, s.b.lkey),
        })
        .unwrap();
    one_send(&mut s, 1, 3000); // 3 packets of 1 KB
    let qp = &mut s.pair.a.qp;
    let now = Instant::ZERO;
    let first = qp.poll_transmit(now, &s.pair.a.mem).unwrap();
    assert_eq!(first.headers.bth.opcode, roce::wire::Opcode::RcSendFirst);
    assert!(
        qp.poll_transmit(now, &s.pair.a.mem).is_none(),
        "the rate limiter holds"
    );
    // 1024 + 12 + 46 bytes at 10 Gb/s.
    let gap = rate.serialization_time(1024 + 12 + 46);
    assert_eq!(qp.poll_timeout(), Some(now + gap));
    qp.handle_timeout(now + gap);
    assert!(qp.poll_transmit(now + gap, &s.pair.a.mem).is_some());
}

#[test]
fn an_idle_qp_has_no_deadline() {
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    assert_eq!(s.pair.a.qp.poll_timeout(), None);
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 1,
            sges: SgeList::one(BASE, 4096, s.b.lkey),
        })
        .unwrap();
    one_send(&mut s, 1, 3000);
    s.pair.step();
    assert!(
        s.pair.a.qp.poll_timeout().is_some(),
        "the ACK timer runs while PSNs are outstanding"
    );
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 1)
        .unwrap();
    assert_eq!(s.pair.a.qp.poll_timeout(), None);
    assert_eq!(s.pair.b.qp.poll_timeout(), None);
    assert!(matches!(
        s.pair.run_until(short_limits(), |_| false),
        Err(DriveError::Idle(_))
    ));
}

#[test]
fn a_bad_receive_sge_is_rem_op_err_there_and_loc_prot_err_here() {
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    let bad = Lkey::new(s.b.lkey.value() + 0x100);
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 1,
            sges: SgeList::one(BASE, 4096, bad),
        })
        .unwrap();
    one_send(&mut s, 1, 100);
    s.pair
        .run_until(short_limits(), |p| !p.a.completions.is_empty())
        .unwrap();
    assert_eq!(s.pair.a.completions[0].status, WcStatus::RemOpErr);
    assert_eq!(s.pair.b.completions[0].status, WcStatus::LocProtErr);
}

#[test]
fn a_bad_local_sge_on_send_is_loc_prot_err() {
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    let sge = Sge {
        addr: BASE + REGION,
        length: 10,
        lkey: s.a.lkey,
    };
    s.pair
        .a
        .qp
        .post_send(SendWr::new(1, SendOp::Send, sge))
        .unwrap();
    one_send(&mut s, 2, 10);
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 2)
        .unwrap();
    let st: Vec<WcStatus> = s.pair.a.completions.iter().map(|c| c.status).collect();
    assert_eq!(st, [WcStatus::LocProtErr, WcStatus::WrFlushErr]);
    assert_eq!(
        s.pair.a.qp.stats().tx_requests,
        0,
        "nothing went on the wire"
    );
}

#[test]
fn acks_can_advertise_credits() {
    assert_eq!(credit_code(0), 0);
    assert_eq!(credit_code(5), 4);
    assert_eq!(credit_code(6), 5);
    assert_eq!(credit_code(100_000), 30);
    assert_eq!(credits_from_code(13), Some(96));
    assert_eq!(credits_from_code(31), None);
    let mut s = setup(ConnectAttrs::default(), link(), link(), |c| {
        c.advertise_credits = true
    });
    for i in 0..10 {
        s.pair
            .b
            .qp
            .post_recv(RecvWr {
                wr_id: i,
                sges: SgeList::one(BASE, 64, s.b.lkey),
            })
            .unwrap();
    }
    one_send(&mut s, 1, 10);
    s.pair
        .run_until(short_limits(), |p| !p.a.completions.is_empty())
        .unwrap();
    // Nine receive WQEs left: the largest table entry not above 9 is 8.
    assert_eq!(s.pair.a.qp.peer_credits(), Some(8));
}

#[test]
fn random_packets_never_panic_the_engine() {
    use roce::wire::{
        AethRepr, AethSyndrome, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn, Msn,
        NakCode, Opcode, Psn, RethRepr, RoceHeaders,
    };
    let mut rng = ChaCha8Rng::seed_from_u64(99);
    for round in 0..20u64 {
        let mut s = setup(
            ConnectAttrs {
                psn_a: 0xFF_FF00,
                psn_b: 5,
                ..ConnectAttrs::default()
            },
            link(),
            link(),
            |c| c.min_time_between_cnps = Some(Duration::from_us(1)),
        );
        for i in 0..4 {
            s.pair
                .b
                .qp
                .post_recv(RecvWr {
                    wr_id: i,
                    sges: SgeList::one(BASE, 5000, s.b.lkey),
                })
                .unwrap();
            s.pair
                .a
                .qp
                .post_recv(RecvWr {
                    wr_id: i,
                    sges: SgeList::one(BASE, 5000, s.a.lkey),
                })
                .unwrap();
        }
        one_send(&mut s, 1, 5000);
        let rd = SendOp::Read {
            remote_addr: BASE,
            rkey: s.b.rkey,
        };
        s.pair
            .a
            .qp
            .post_send(SendWr::new(
                2,
                rd,
                Sge {
                    addr: BASE,
                    length: 3000,
                    lkey: s.a.lkey,
                },
            ))
            .unwrap();
        let buf = vec![0xA5u8; 5000];
        for k in 0..2000u64 {
            let now = Instant::from_ps(k * 1_000_000 + round);
            let op = Opcode::ALL[rng.gen_range(0..Opcode::ALL.len())];
            let near = |rng: &mut ChaCha8Rng, base: u32| {
                Psn::new(base.wrapping_add(rng.gen_range(0..40)).wrapping_sub(20))
            };
            let side_a = rng.gen_bool(0.5);
            let base = if side_a { 0xFF_FF00 } else { 5 };
            let rkey = if rng.gen_bool(0.5) {
                s.b.rkey
            } else {
                Rkey::new(rng.gen())
            };
            let va = if rng.gen_bool(0.5) {
                BASE + rng.gen_range(0..REGION)
            } else {
                rng.gen()
            };
            let syndrome = match rng.gen_range(0..4) {
                0 => AethSyndrome::Ack {
                    credits: rng.gen_range(0..32),
                },
                1 => AethSyndrome::RnrNak {
                    timer: rng.gen_range(0..32),
                },
                2 => AethSyndrome::Nak(match rng.gen_range(0..6) {
                    0 => NakCode::PsnSequenceError,
                    1 => NakCode::InvalidRequest,
                    2 => NakCode::RemoteAccessError,
                    3 => NakCode::RemoteOperationalError,
                    4 => NakCode::InvalidRdRequest,
                    _ => NakCode::Reserved(rng.gen_range(5..32)),
                }),
                _ => AethSyndrome::Reserved(rng.gen_range(0..32)),
            };
            let h = RoceHeaders {
                bth: BthRepr {
                    opcode: op,
                    solicited: rng.gen(),
                    migreq: false,
                    pad_count: 0,
                    tver: 0,
                    pkey: 0xFFFF,
                    fecn: false,
                    becn: rng.gen(),
                    dest_qp: if side_a {
                        Qpn::new(0x11)
                    } else {
                        Qpn::new(0x22)
                    },
                    ack_req: rng.gen(),
                    psn: near(&mut rng, base),
                },
                deth: op.has_deth().then(|| DethRepr {
                    qkey: rng.gen(),
                    src_qp: Qpn::new(rng.gen()),
                }),
                reth: op.has_reth().then(|| RethRepr {
                    va,
                    rkey,
                    dma_len: rng.gen_range(0..9000),
                }),
                atomic_eth: op.has_atomic_eth().then(|| AtomicEthRepr {
                    va,
                    rkey,
                    swap_add: rng.gen(),
                    compare: rng.gen(),
                }),
                aeth: (op.has_aeth() && rng.gen_bool(0.95)).then(|| AethRepr {
                    syndrome,
                    msn: Msn::new(rng.gen()),
                }),
                atomic_ack_eth: op
                    .has_atomic_ack_eth()
                    .then(|| AtomicAckEthRepr { orig: rng.gen() }),
                immdt: op.has_immdt().then(|| rng.gen()),
                ieth: op.has_ieth().then(|| Rkey::new(rng.gen())),
            };
            let len = [0usize, 1, 100, 1024, 1025, 4096, 5000][rng.gen_range(0..7)];
            let rx = Received {
                headers: h,
                ecn: if rng.gen_bool(0.2) {
                    Ecn::Ce
                } else {
                    Ecn::Ect0
                },
                payload: Payload::Bytes(&buf[..len]),
                grh: None,
                // Mostly from the connected peer (A's is 2, B's is 1), so
                // that the packets reach the transport logic; sometimes
                // from a third address, which admission must drop.
                src: match (rng.gen_bool(0.1), side_a) {
                    (true, _) => AddressHandle(3),
                    (false, true) => AddressHandle(2),
                    (false, false) => AddressHandle(1),
                },
            };
            let ep = if side_a { &mut s.pair.a } else { &mut s.pair.b };
            ep.qp.handle_packet(now, &rx, &mut ep.mem);
            while ep.qp.poll_transmit(now, &ep.mem).is_some() {}
            if ep.qp.poll_timeout().is_some_and(|t| t <= now) {
                ep.qp.handle_timeout(now);
            }
            while ep.qp.poll_completion().is_some() {}
        }
    }
}

#[test]
fn a_lost_middle_packet_gets_one_nak_and_go_back_n_from_it() {
    let ab = WireConfig {
        loss: Loss::EveryNth { n: 1000, phase: 5 },
        ..link()
    };
    let mut s = setup(ConnectAttrs::default(), ab, link(), |_| {});
    fill(&mut s.pair.a.mem, s.a.lkey, BASE, 20 * 1024, 1);
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 1,
            sges: SgeList::one(BASE, 20 * 1024, s.b.lkey),
        })
        .unwrap();
    one_send(&mut s, 1, 20 * 1024);
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 1)
        .unwrap();
    assert_eq!(s.pair.a.completions[0].status, WcStatus::Success);
    assert_eq!(s.pair.b.qp.stats().tx_nak_seq, 1, "one NAK per gap");
    assert_eq!(
        s.pair.a.qp.stats().tx_retransmits,
        15,
        "resent from the lost PSN on"
    );
    assert_eq!(s.pair.a.qp.stats().timeouts, 0);
    assert_eq!(
        s.pair.b.mem.bytes(s.b.lkey, BASE, 20 * 1024).unwrap(),
        s.pair.a.mem.bytes(s.a.lkey, BASE, 20 * 1024).unwrap()
    );
}

#[test]
fn a_lost_ack_is_recovered_by_timeout_and_a_duplicate_re_ack() {
    let ba = WireConfig {
        loss: Loss::EveryNth { n: 1000, phase: 0 },
        ..link()
    };
    let attrs = ConnectAttrs {
        timeout: 2,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, link(), ba, |_| {});
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 1,
            sges: SgeList::one(BASE, 4096, s.b.lkey),
        })
        .unwrap();
    one_send(&mut s, 1, 3000);
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 1)
        .unwrap();
    let (a, b) = (s.pair.a.qp.stats(), s.pair.b.qp.stats());
    assert_eq!(a.timeouts, 1);
    assert_eq!(
        a.tx_retransmits, 3,
        "the whole unacknowledged message went again"
    );
    assert_eq!(b.rx_duplicates, 3);
    assert_eq!(s.pair.b.completions.len(), 1, "delivered once");
}

#[test]
fn a_lost_read_response_is_retried_for_the_missing_part_only() {
    // B -> A: drop the 4th packet (the 4th READ response).
    let ba = WireConfig {
        loss: Loss::EveryNth { n: 1000, phase: 3 },
        ..link()
    };
    let mut s = setup(ConnectAttrs::default(), link(), ba, |_| {});
    fill(&mut s.pair.b.mem, s.b.lkey, BASE, 10 * 1024, 2);
    let rd = SendOp::Read {
        remote_addr: BASE,
        rkey: s.b.rkey,
    };
    s.pair
        .a
        .qp
        .post_send(SendWr::new(
            1,
            rd,
            Sge {
                addr: BASE + 65536,
                length: 10 * 1024,
                lkey: s.a.lkey,
            },
        ))
        .unwrap();
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 1)
        .unwrap();
    assert_eq!(s.pair.a.completions[0].status, WcStatus::Success);
    assert_eq!(
        s.pair.a.qp.stats().tx_retransmits,
        1,
        "one partial READ request"
    );
    // The responder streamed 10 responses, then 7 again from the gap.
    assert_eq!(s.pair.b.qp.stats().tx_responses, 17);
    assert_eq!(
        s.pair
            .a
            .mem
            .bytes(s.a.lkey, BASE + 65536, 10 * 1024)
            .unwrap(),
        s.pair.b.mem.bytes(s.b.lkey, BASE, 10 * 1024).unwrap()
    );
}

#[test]
fn a_fenced_send_waits_for_the_read_before_it() {
    for fence in [false, true] {
        let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
        s.pair
            .b
            .qp
            .post_recv(RecvWr {
                wr_id: 9,
                sges: SgeList::one(BASE, 64, s.b.lkey),
            })
            .unwrap();
        let rd = SendOp::Read {
            remote_addr: BASE,
            rkey: s.b.rkey,
        };
        let big = Sge {
            addr: BASE + 65536,
            length: 256 * 1024,
            lkey: s.a.lkey,
        };
        s.pair.a.qp.post_send(SendWr::new(1, rd, big)).unwrap();
        let mut send = SendWr::new(
            2,
            SendOp::Send,
            Sge {
                addr: BASE,
                length: 8,
                lkey: s.a.lkey,
            },
        );
        send.flags = SendFlags::SIGNALED | SendFlags::SOLICITED;
        if fence {
            send.flags |= SendFlags::FENCE;
        }
        s.pair.a.qp.post_send(send).unwrap();
        let mut read_done = None;
        let mut recv_done = None;
        s.pair
            .run_until(short_limits(), |p| {
                if read_done.is_none() && !p.a.completions.is_empty() {
                    read_done = Some(p.now);
                }
                if recv_done.is_none() && !p.b.completions.is_empty() {
                    recv_done = Some(p.now);
                }
                p.a.completions.len() == 2
            })
            .unwrap();
        assert!(s.pair.b.completions[0].solicited);
        let (r, v) = (read_done.unwrap(), recv_done.unwrap());
        if fence {
            assert!(v > r, "the fenced SEND arrived after the READ completed");
        } else {
            assert!(v < r, "without a fence the SEND overtakes the long READ");
        }
    }
}

#[test]
fn duplicate_and_stale_acks_change_nothing() {
    let ba = WireConfig {
        duplicate: 1.0,
        ..link()
    };
    let mut s = setup(ConnectAttrs::default(), link(), ba, |_| {});
    for i in 0..20 {
        s.pair
            .b
            .qp
            .post_recv(RecvWr {
                wr_id: i,
                sges: SgeList::one(BASE, 4096, s.b.lkey),
            })
            .unwrap();
        one_send(&mut s, i, 3000);
    }
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 20)
        .unwrap();
    assert!(matches!(
        s.pair.run_until(short_limits(), |_| false),
        Err(DriveError::Idle(_))
    ));
    assert_eq!(s.pair.a.completions.len(), 20);
    assert!(s
        .pair
        .a
        .completions
        .iter()
        .all(|c| c.status == WcStatus::Success));
    assert!(
        s.pair.a.qp.stats().stale_responses >= 20,
        "every duplicate ACK was ignored"
    );
    assert_eq!(s.pair.a.qp.stats().tx_retransmits, 0);
}

#[test]
fn rxe_compatible_retry_cnt_7_never_gives_up() {
    let dead = WireConfig {
        loss: Loss::Random(1.0),
        ..link()
    };
    let attrs = ConnectAttrs {
        timeout: 1,
        retry_cnt: 7,
        ..ConnectAttrs::default()
    };
    let mut s = setup(attrs, dead, link(), |c| c.rxe_retry_cnt7_infinite = true);
    one_send(&mut s, 1, 100);
    let end = Instant::from_ps(Duration::from_ms(1).as_ps());
    s.pair.run_until(short_limits(), |p| p.now >= end).unwrap();
    assert!(s.pair.a.completions.is_empty());
    assert!(s.pair.a.qp.stats().timeouts > 20, "well past 7 retries");
    assert_eq!(s.pair.a.qp.state(), QpState::Rts);
}

/// The engine's pacer with a burst (the UDP backend's setting): a caller
/// that comes by every few microseconds gets several packets per call,
/// and over every 1 ms the wire bytes stay within 2 % of the rate; a late
/// caller is made up to with the catch-up.
#[test]
fn pacing_with_a_burst_sends_what_the_rate_allows_per_call() {
    let rate = Rate::from_gbps(10);
    let params = roce::cc::DcqcnParams::connectx(rate);
    let mut s = setup(ConnectAttrs::default(), link(), link(), |c| {
        c.cc = CcConfig::Dcqcn(params);
        c.pacing_burst = Duration::from_us(10);
        c.pacing_catch_up = Duration::from_ms(1);
        c.max_unacked_psns = 1 << 14;
    });
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 1,
            sges: SgeList::one(BASE, 4 << 20, s.b.lkey),
        })
        .unwrap();
    one_send(&mut s, 1, 4 << 20); // 4096 packets of 1 KiB
    let qp = &mut s.pair.a.qp;
    // The QP idled for 100 µs: its bucket is full, no more.
    let start = Instant::ZERO + Duration::from_us(100);
    let mut now = start;
    let mut sends: Vec<(Instant, u64)> = Vec::new();
    let mut per_call = Vec::new();
    while now < Instant::ZERO + Duration::from_us(3000) {
        if qp.poll_timeout().is_some_and(|t| t <= now) {
            qp.handle_timeout(now);
        }
        let mut n = 0;
        while let Some(t) = qp.poll_transmit(now, &s.pair.a.mem) {
            let wire = t.headers.header_len() as u64
                + u64::from(t.payload.len())
                + u64::from(t.headers.bth.pad_count)
                + u64::from(roce::transport::WIRE_OVERHEAD);
            sends.push((now, wire));
            n += 1;
        }
        per_call.push(n);
        // One stall of 200 µs at 2 ms, else a call every 3 µs.
        let stall = now >= Instant::ZERO + Duration::from_us(2000)
            && now < Instant::ZERO + Duration::from_us(2003);
        now += Duration::from_us(if stall { 200 } else { 3 });
    }
    // 1082 wire bytes per packet at 10 Gb/s: 0.87 µs each, 10 µs of burst.
    let pkt = rate.serialization_time(1024 + 12 + 46);
    let burst = (Duration::from_us(10).as_ps() / pkt.as_ps()) as usize;
    assert!(
        (burst..=burst + 1).contains(&per_call[0]),
        "a full bucket first: {}",
        per_call[0]
    );
    assert!(
        per_call[1..100].iter().all(|&n| (3..=4).contains(&n)),
        "3 µs of tokens per call: {:?}",
        &per_call[1..100]
    );
    let w = Duration::from_ms(1);
    let want = rate.bytes_in(w) as f64;
    for (i, &(t, _)) in sends.iter().enumerate() {
        if t + w > Instant::ZERO + Duration::from_us(2000) {
            break;
        }
        let got: u64 = sends[i..]
            .iter()
            .take_while(|&&(u, _)| u < t + w)
            .map(|&(_, b)| b)
            .sum();
        let err = (got as f64 - want) / want;
        assert!(err.abs() <= 0.02, "window at {t}: {got} B ({err:+.4})");
    }
    // The stall is made up for: over the whole run, the rate's bytes.
    let total: u64 = sends.iter().map(|&(_, b)| b).sum();
    let span = now - start;
    let want = rate.bytes_in(span) as f64;
    let err = (total as f64 - want) / want;
    assert!(err.abs() <= 0.01, "{total} B in {span} ({err:+.4})");
}

/// A receiver that reads its packets in batches hands each its own
/// arrival time, as a NIC stamps it: every CE mark past the CNP interval
/// then owes a CNP, even when several are handled before the engine sends.
/// Handed one time for the whole batch, they are worth one CNP.
#[test]
fn ce_marks_handled_in_one_batch_owe_a_cnp_per_interval_of_their_arrival_times() {
    use roce::wire::Ecn;
    let cnps_for = |spacing: Duration| {
        let rate = Rate::from_gbps(1);
        let mut ma = LengthMemory::new();
        let mut mb = LengthMemory::new();
        let ra = ma.register(0, 1 << 20, AccessFlags::ALL).unwrap();
        let rb = mb.register(0, 1 << 20, AccessFlags::ALL).unwrap();
        let ca = QpConfig::new(Qpn::new(1));
        let mut cb = QpConfig::new(Qpn::new(2));
        cb.min_time_between_cnps = Some(Duration::from_us(4));
        let wire = WireConfig::clean(rate, Duration::from_us(2));
        let mut pair = Pair::connect(ca, ma, cb, mb, ConnectAttrs::default(), wire, wire).unwrap();
        let op = SendOp::Write {
            remote_addr: 0,
            rkey: rb.rkey,
        };
        let sge = Sge {
            addr: 0,
            length: 8 * 1024,
            lkey: ra.lkey,
        };
        pair.a.qp.post_send(SendWr::new(1, op, sge)).unwrap();
        let mut sent = Vec::new();
        while let Some(t) = pair.a.qp.poll_transmit(Instant::ZERO, &pair.a.mem) {
            sent.push(t);
        }
        assert_eq!(sent.len(), 8, "one WRITE of 8 packets");
        // The batch: packets 8.6 us apart on a 1 Gbit/s wire, all CE.
        for (i, t) in sent.iter().enumerate() {
            let rx = Received {
                headers: t.headers,
                ecn: Ecn::Ce,
                payload: Payload::Len(t.payload.len()),
                grh: None,
                src: AddressHandle(1),
            };
            let at = Instant::from_ps(spacing.as_ps() * (i as u64 + 1));
            pair.b.qp.handle_packet(at, &rx, &mut pair.b.mem);
        }
        let end = Instant::from_ps(spacing.as_ps() * 9);
        let mut cnps = 0;
        while let Some(t) = pair.b.qp.poll_transmit(end, &pair.b.mem) {
            if t.headers.bth.opcode == roce::wire::Opcode::Cnp {
                cnps += 1;
            }
        }
        assert_eq!(pair.b.qp.stats().tx_cnps, cnps);
        cnps
    };
    assert_eq!(cnps_for(Duration::from_ns(8600)), 8);
    // Every other mark falls within the 4 us interval of the one before.
    assert_eq!(cnps_for(Duration::from_ns(3000)), 4);
    assert_eq!(cnps_for(Duration::ZERO), 1);
}

#[test]
fn a_long_read_that_loses_one_response_resumes_from_it_and_completes() {
    // 128 MiB at 100 Gbit/s streams for about 11 ms, longer than the
    // requester's whole retry budget (timeout 8: 1 ms, 7 retries). One
    // response lost early: the requester asks for the rest from the lost
    // PSN (one partial READ), the responder restarts there, and the READ
    // completes with that single retry.
    let ba = WireConfig {
        loss: Loss::EveryNth {
            n: 1 << 40,
            phase: 10,
        },
        ..link()
    };
    let mut ma = LengthMemory::new();
    let mut mb = LengthMemory::new();
    let len = 128u64 << 20;
    let ra = ma.register(0, len, AccessFlags::ALL).unwrap();
    let rb = mb.register(0, len, AccessFlags::ALL).unwrap();
    let attrs = ConnectAttrs {
        mtu: Mtu::Mtu4096,
        ..ConnectAttrs::default()
    };
    let mut pair = Pair::connect(
        QpConfig::new(Qpn::new(1)),
        ma,
        QpConfig::new(Qpn::new(2)),
        mb,
        attrs,
        link(),
        ba,
    )
    .unwrap();
    let rd = SendOp::Read {
        remote_addr: 0,
        rkey: rb.rkey,
    };
    let sge = Sge {
        addr: 0,
        length: len as u32,
        lkey: ra.lkey,
    };
    pair.a.qp.post_send(SendWr::new(1, rd, sge)).unwrap();
    pair.run_until(Limits::default(), |p| p.a.completions.len() == 1)
        .unwrap();
    assert_eq!(pair.a.completions[0].status, WcStatus::Success);
    assert_eq!(pair.ba.stats().dropped, 1);
    assert_eq!(pair.a.qp.stats().tx_retransmits, 1, "one partial READ");
    assert_eq!(pair.a.qp.stats().timeouts, 0);
    // Every response once, the lost one and those in flight behind it
    // again: far fewer than a second full stream.
    let responses = pair.b.qp.stats().tx_responses;
    assert!(
        (32768..32768 + 100).contains(&responses),
        "{responses} responses"
    );
}

/// ATOMIC WRITE (IBTA 1.5): one RC ATOMIC_WRITE packet, a RETH and 8
/// bytes, writes them and completes as ATOMIC_WRITE. It needs remote write
/// access on the region (a read-only one gives a remote access error and
/// keeps its bytes), and a length other than 8 or a misaligned remote
/// address is refused at post.
#[test]
fn atomic_write_writes_eight_bytes_and_needs_remote_write_access() {
    let value = 0x1122_3344_5566_7788u64;
    let mut s = setup(ConnectAttrs::default(), link(), link(), |_| {});
    s.pair
        .a
        .mem
        .bytes_mut(s.a.lkey, BASE, 8)
        .unwrap()
        .copy_from_slice(&value.to_le_bytes());
    let lkey = s.a.lkey;
    let sge = |length| Sge {
        addr: BASE,
        length,
        lkey,
    };
    let at = |remote_addr| SendOp::AtomicWrite {
        remote_addr,
        rkey: s.b.rkey,
    };
    for (op, len) in [(at(BASE + 64), 16), (at(BASE + 64), 4), (at(BASE + 68), 8)] {
        assert!(
            matches!(
                s.pair.a.qp.post_send(SendWr::new(9, op, sge(len))),
                Err(PostError::Invalid(_))
            ),
            "{op:?} with {len} bytes"
        );
    }
    s.pair
        .a
        .qp
        .post_send(SendWr::new(1, at(BASE + 64), sge(8)))
        .unwrap();
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 1)
        .unwrap();
    let c = s.pair.a.completions[0];
    assert_eq!(
        (c.wr_id, c.status, c.opcode),
        (1, WcStatus::Success, WcOpcode::AtomicWrite)
    );
    assert_eq!(
        s.pair.b.mem.bytes(s.b.lkey, BASE + 64, 8).unwrap(),
        value.to_le_bytes()
    );
    assert_eq!(Opcode::RcAtomicWrite.ext_header_len(), 16);
    // A region the peer may only read.
    let ro = 0x4000_0000;
    let r = s
        .pair
        .b
        .mem
        .register(
            ro,
            4096,
            AccessFlags::LOCAL_WRITE | AccessFlags::REMOTE_READ,
        )
        .unwrap();
    let op = SendOp::AtomicWrite {
        remote_addr: ro,
        rkey: r.rkey,
    };
    s.pair.a.qp.post_send(SendWr::new(2, op, sge(8))).unwrap();
    s.pair
        .run_until(short_limits(), |p| p.a.completions.len() == 2)
        .unwrap();
    assert_eq!(s.pair.a.completions[1].status, WcStatus::RemAccessErr);
    assert!(s
        .pair
        .b
        .mem
        .bytes(r.lkey, ro, 8)
        .unwrap()
        .iter()
        .all(|&b| b == 0));
}

#[test]
fn selective_repeat_asks_again_only_for_the_read_responses_it_missed() {
    // A 1 MiB READ whose responses lose one packet in 50: under selective
    // repeat the requester places what follows each gap and asks again
    // for the missing runs only; go-back-N asks again for everything from
    // each gap. Both deliver the same bytes.
    const LEN: u32 = 1 << 20;
    fn sr(c: &mut QpConfig) {
        c.retransmit = RetransmitMode::SelectiveRepeat;
        c.reorder_window = 4096;
        c.max_unacked_psns = 4096;
    }
    fn gbn(c: &mut QpConfig) {
        c.max_unacked_psns = 4096;
    }
    let mut sent = Vec::new();
    for (name, tweak) in [
        ("selective repeat", sr as fn(&mut QpConfig)),
        ("go-back-n", gbn),
    ] {
        let lossy = WireConfig {
            loss: Loss::EveryNth { n: 50, phase: 7 },
            loss_scope: LossScope::Data,
            ..link()
        };
        let attrs = ConnectAttrs {
            timeout: 8,
            ..ConnectAttrs::default()
        };
        let mut s = setup(attrs, link(), lossy, tweak);
        let (ka, kb) = (s.a.lkey, s.b.lkey);
        fill(&mut s.pair.b.mem, kb, BASE, u64::from(LEN), 11);
        let op = SendOp::Read {
            remote_addr: BASE,
            rkey: s.b.rkey,
        };
        let sge = Sge {
            addr: BASE + u64::from(LEN),
            length: LEN,
            lkey: ka,
        };
        s.pair.a.qp.post_send(SendWr::new(9, op, sge)).unwrap();
        s.pair
            .run_until(short_limits(), |p| p.a.completions.len() == 1)
            .unwrap();
        assert_eq!(s.pair.a.completions[0].status, WcStatus::Success, "{name}");
        assert_eq!(
            s.pair
                .a
                .mem
                .bytes(ka, BASE + u64::from(LEN), u64::from(LEN))
                .unwrap(),
            s.pair.b.mem.bytes(kb, BASE, u64::from(LEN)).unwrap(),
            "{name}: the bytes READ"
        );
        let (a, b) = (s.pair.a.qp.stats(), s.pair.b.qp.stats());
        let packets = u64::from(LEN.div_ceil(s.pair.a.qp.attr().path_mtu.bytes()));
        eprintln!(
            "{name}: {} response packets for {packets}, {} placed out of order, {} READ requests resent",
            b.tx_responses, a.rx_read_ooo_placed, a.tx_retransmits
        );
        sent.push(b.tx_responses);
        if name == "selective repeat" {
            assert!(a.rx_read_ooo_placed > 0);
            // One in 50 lost (and one in 50 of the resends): about 2 %
            // more than the READ's packets.
            assert!(
                b.tx_responses <= packets * 105 / 100,
                "{} responses for {packets}",
                b.tx_responses
            );
            // One request per run lost, and no timeout waited for.
            assert!(
                a.tx_retransmits <= 2 * (b.tx_responses - packets).max(1),
                "{} READ requests resent for {} responses lost",
                a.tx_retransmits,
                b.tx_responses - packets
            );
            assert_eq!(a.timeouts, 0);
        } else {
            assert_eq!(a.rx_read_ooo_placed, 0);
        }
    }
    assert!(
        sent[1] > 2 * sent[0],
        "go-back-N resends far more: {sent:?}"
    );
}

/// A delay-based window smaller than the stretch between ACK requests (the
/// emulator asks for one every 128 packets) must not wait for the ACK
/// timer: the packet that fills the window asks for the ACK that opens it.
#[test]
fn a_swift_window_below_the_ack_request_stride_asks_for_its_ack() {
    let swift = roce::cc::SwiftSettings {
        max_cwnd: 4,
        ..Default::default()
    };
    let mut s = setup(ConnectAttrs::default(), link(), link(), |c| {
        c.ack_req_every = 128;
        c.cc = CcConfig::Swift(swift.params(Rate::from_gbps(100), Duration::ZERO, 1100));
    });
    let len = 64 * 1024;
    s.pair
        .a
        .qp
        .post_send(SendWr::new(
            1,
            SendOp::Write {
                remote_addr: BASE,
                rkey: s.b.rkey,
            },
            Sge {
                addr: BASE,
                length: len,
                lkey: s.a.lkey,
            },
        ))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| p.a.completions.len() == 1)
        .unwrap();
    assert_eq!(s.pair.a.completions[0].status, WcStatus::Success);
    let st = s.pair.a.qp.stats();
    assert_eq!((st.timeouts, st.tx_retransmits), (0, 0));
    // 64 packets of 1 KiB, 4 a round trip of about 4 us: 16 round trips,
    // far below one ACK timeout.
    let took = s.pair.now.saturating_duration_since(Instant::ZERO);
    assert!(took < Duration::from_us(200), "{took}");
}
