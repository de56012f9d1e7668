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
    let _ = (Instant::ZERO, Rkey::new(0), CcConfig::None, Loss::None);
    let _: Option<DriveError> = None;
}
