//! The transport engine over the lossy pair harness.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use verbs_emu::cc::CcConfig;
use verbs_emu::time::{Duration, Instant, Rate};
use verbs_emu::transport::pair::{ConnectAttrs, DriveError, Limits, Loss, Pair, WireConfig};
use verbs_emu::transport::*;
use verbs_emu::wire::{Lkey, Qpn, Rkey};

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
    let a = ma.register(BASE, REGION, Access::ALL).unwrap();
    let b = mb.register(BASE, REGION, Access::ALL).unwrap();
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
fn random_workload(seed: u64, loss: f64, psn_start: u32, n_wr: usize) -> Pair<ByteMemory> {
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
    let mut s = setup(attrs, wire(seed * 2 + 1), wire(seed * 2 + 2), |_| {});
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
            0 | 1 | 2 => {
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
            SendFlags::NONE
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
        panic!(
            "seed {seed} loss {loss}: {e}; A {:?} B {:?} sq {} a-state {} b-state {} ab {:?}",
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
            let p = random_workload(seed + 100 * li as u64, loss, psn, 100);
            retransmits += p.a.qp.stats().tx_retransmits;
        }
        // Reordering alone forces some retransmissions; loss forces many.
        assert!(retransmits > 0, "loss {loss}: the faults were exercised");
    }
}

#[test]
fn psn_wraps_around_2_pow_24_mid_message() {
    let p = random_workload(4242, 1e-2, 0xFF_FFFE, 80);
    let next = p.a.qp.next_psn().value();
    assert!(next < 0x10_0000, "the PSN wrapped: next {next:#x}");
}
