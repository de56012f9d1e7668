//! Memory windows in the engine: binds and local invalidations on the
//! send queue, remote access through a window's key (range, rights, the
//! QP a type 2 window belongs to), remote invalidation, and the rules of
//! the region table (ROCEV2.md §5.10, IBA 10.6.7).

use roce::time::{Duration, Rate};
use roce::transport::pair::{ConnectAttrs, Limits, Pair, WireConfig};
use roce::transport::*;
use roce::wire::{Lkey, Qpn, Rkey};

const BASE: u64 = 0x10_0000;
const REGION: u64 = 1 << 20;
/// The window: 8 KiB from 4 KiB into B's window region.
const WIN: u64 = BASE + 4096;
const WIN_LEN: u64 = 8192;

struct Setup {
    pair: Pair<ByteMemory>,
    /// A's plain region (all rights).
    a: Registration,
    /// B's region windows are bound to (LOCAL_WRITE | MW_BIND, no remote
    /// rights of its own).
    b: Registration,
    /// B's window, unbound.
    w: Rkey,
}

fn setup(mw_type: MwType, region_access: AccessFlags) -> Setup {
    let mut ma = ByteMemory::new();
    let mut mb = ByteMemory::new();
    let a = ma.register(BASE, REGION, AccessFlags::ALL).unwrap();
    let b = mb.register(BASE, REGION, region_access).unwrap();
    let w = mb.alloc_window(mw_type).unwrap();
    let link = WireConfig::clean(Rate::from_gbps(100), Duration::from_us(2));
    let pair = Pair::connect(
        QpConfig::new(Qpn::new(0x11)),
        ma,
        QpConfig::new(Qpn::new(0x22)),
        mb,
        ConnectAttrs::default(),
        link,
        link,
    )
    .unwrap();
    Setup { pair, a, b, w }
}

fn mw_region() -> AccessFlags {
    AccessFlags::LOCAL_WRITE | AccessFlags::MW_BIND
}

/// ibv_inc_rkey.
fn inc(k: Rkey) -> Rkey {
    Rkey::new((k.value() & !0xFF) | (k.value().wrapping_add(1) & 0xFF))
}

fn local(wr_id: u64, op: SendOp) -> SendWr {
    SendWr {
        wr_id,
        op,
        sges: SgeList::new(),
        flags: SendFlags::SIGNALED,
        ud: None,
    }
}

fn bind(rkey: Rkey, lkey: Lkey, addr: u64, len: u64, access: AccessFlags) -> SendOp {
    SendOp::BindMw {
        rkey,
        lkey,
        addr,
        len,
        access,
    }
}

/// B binds its window over `[WIN, WIN + WIN_LEN)` with `access` through its
/// QP; the bind's completion.
fn bind_on_b(s: &mut Setup, access: AccessFlags) -> (Rkey, Completion) {
    let key = inc(s.w);
    let n = s.pair.b.completions.len();
    s.pair
        .b
        .qp
        .post_send(local(900, bind(key, s.b.lkey, WIN, WIN_LEN, access)))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| p.b.completions.len() > n)
        .unwrap();
    (key, s.pair.b.completions[n])
}

/// A writes `len` bytes of its region at `remote_addr` through `rkey`; the
/// completion's status.
fn write_from_a(s: &mut Setup, rkey: Rkey, remote_addr: u64, len: u32) -> WcStatus {
    let n = s.pair.a.completions.len();
    s.pair
        .a
        .qp
        .post_send(SendWr::new(
            1,
            SendOp::Write { remote_addr, rkey },
            Sge {
                addr: BASE,
                length: len,
                lkey: s.a.lkey,
            },
        ))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| p.a.completions.len() > n)
        .unwrap();
    s.pair.a.completions[n].status
}

#[test]
fn a_bound_type2_window_grants_its_range_and_rights_only() {
    let mut s = setup(MwType::Type2, mw_region());
    let (key, c) = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    assert_eq!(
        (c.status, c.opcode, c.wr_id),
        (WcStatus::Success, WcOpcode::BindMw, 900)
    );
    s.pair
        .a
        .mem
        .bytes_mut(s.a.lkey, BASE, 64)
        .unwrap()
        .copy_from_slice(&[0xAB; 64]);
    assert_eq!(write_from_a(&mut s, key, WIN + 100, 64), WcStatus::Success);
    assert_eq!(
        s.pair.b.mem.bytes(s.b.lkey, WIN + 100, 64).unwrap(),
        &[0xAB; 64]
    );
    // The window's last byte is in; one past it is not.
    assert_eq!(
        write_from_a(&mut s, key, WIN + WIN_LEN - 64, 64),
        WcStatus::Success
    );
    assert_eq!(
        write_from_a(&mut s, key, WIN + WIN_LEN - 63, 64),
        WcStatus::RemAccessErr
    );
}

#[test]
fn a_window_refuses_rights_it_does_not_grant_and_the_region_below_it() {
    let mut s = setup(MwType::Type2, mw_region());
    let (key, c) = bind_on_b(&mut s, AccessFlags::REMOTE_READ);
    assert_eq!(c.status, WcStatus::Success);
    assert_eq!(write_from_a(&mut s, key, WIN, 8), WcStatus::RemAccessErr);
    // Inside the region but before the window.
    let mut s = setup(MwType::Type2, mw_region());
    let (key, _) = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    assert_eq!(
        write_from_a(&mut s, key, WIN - 8, 8),
        WcStatus::RemAccessErr
    );
    // The region's own key grants nothing remote: the window's rights are
    // the window's.
    let mut s = setup(MwType::Type2, mw_region());
    let _ = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    let rkey = s.b.rkey;
    assert_eq!(write_from_a(&mut s, rkey, WIN, 8), WcStatus::RemAccessErr);
}

#[test]
fn the_old_key_of_a_window_and_an_unbound_window_name_nothing() {
    let mut s = setup(MwType::Type2, mw_region());
    let first = s.w;
    assert_eq!(write_from_a(&mut s, first, WIN, 8), WcStatus::RemAccessErr);
    let mut s = setup(MwType::Type2, mw_region());
    let first = s.w;
    let _ = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    assert_eq!(write_from_a(&mut s, first, WIN, 8), WcStatus::RemAccessErr);
}

#[test]
fn local_invalidation_ends_a_type2_window_in_send_queue_order() {
    let mut s = setup(MwType::Type2, mw_region());
    let (key, _) = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    assert_eq!(write_from_a(&mut s, key, WIN, 8), WcStatus::Success);
    // A WRITE from B, then the invalidation: completions in posting order.
    let n = s.pair.b.completions.len();
    s.pair
        .b
        .qp
        .post_send(SendWr::new(
            5,
            SendOp::Write {
                remote_addr: BASE,
                rkey: s.a.rkey,
            },
            Sge {
                addr: BASE,
                length: 10_000,
                lkey: s.b.lkey,
            },
        ))
        .unwrap();
    s.pair
        .b
        .qp
        .post_send(local(6, SendOp::LocalInv(key)))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| p.b.completions.len() == n + 2)
        .unwrap();
    let got: Vec<_> = s.pair.b.completions[n..]
        .iter()
        .map(|c| (c.wr_id, c.status, c.opcode))
        .collect();
    assert_eq!(
        got,
        [
            (5, WcStatus::Success, WcOpcode::RdmaWrite),
            (6, WcStatus::Success, WcOpcode::LocalInv)
        ]
    );
    assert_eq!(write_from_a(&mut s, key, WIN, 8), WcStatus::RemAccessErr);
}

#[test]
fn a_peers_send_with_invalidate_ends_a_type2_window() {
    let mut s = setup(MwType::Type2, mw_region());
    let (key, _) = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 77,
            sges: SgeList::one(BASE, 64, s.b.lkey),
        })
        .unwrap();
    let n = s.pair.b.completions.len();
    s.pair
        .a
        .qp
        .post_send(SendWr::new(
            2,
            SendOp::SendWithInv(key),
            Sge {
                addr: BASE,
                length: 16,
                lkey: s.a.lkey,
            },
        ))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| {
            p.b.completions.len() > n && !p.a.completions.is_empty()
        })
        .unwrap();
    let r = s.pair.b.completions[n];
    assert_eq!((r.wr_id, r.status), (77, WcStatus::Success));
    assert_eq!(r.invalidated_rkey, Some(key));
    assert_eq!(write_from_a(&mut s, key, WIN, 8), WcStatus::RemAccessErr);
}

#[test]
fn a_type2_window_serves_only_the_qp_that_bound_it() {
    // Bound by another QP of B's (0x99): B's QP 0x22 takes it for no key,
    // for access and for remote invalidation alike.
    let mut s = setup(MwType::Type2, mw_region());
    let key = inc(s.w);
    let b = WindowBind {
        rkey: key,
        lkey: s.b.lkey,
        addr: WIN,
        len: WIN_LEN,
        access: AccessFlags::REMOTE_WRITE,
    };
    s.pair.b.mem.bind_window(&b, Qpn::new(0x99)).unwrap();
    assert_eq!(s.pair.b.mem.window_qp(key), Some(Qpn::new(0x99)));
    assert_eq!(write_from_a(&mut s, key, WIN, 8), WcStatus::RemAccessErr);

    let mut s = setup(MwType::Type2, mw_region());
    s.pair.b.mem.bind_window(&b, Qpn::new(0x99)).unwrap();
    s.pair
        .b
        .qp
        .post_recv(RecvWr {
            wr_id: 78,
            sges: SgeList::one(BASE, 64, s.b.lkey),
        })
        .unwrap();
    s.pair
        .a
        .qp
        .post_send(SendWr::new(
            3,
            SendOp::SendWithInv(key),
            Sge {
                addr: BASE,
                length: 16,
                lkey: s.a.lkey,
            },
        ))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| !p.b.completions.is_empty())
        .unwrap();
    assert_eq!(s.pair.b.completions[0].status, WcStatus::RemInvReqErr);
    // The window is still bound to 0x99.
    assert_eq!(s.pair.b.mem.window_qp(key), Some(Qpn::new(0x99)));
}

#[test]
fn binds_the_device_refuses_complete_with_mw_bind_err() {
    // A region without MW_BIND.
    let mut s = setup(MwType::Type2, AccessFlags::LOCAL_WRITE);
    let (_, c) = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    assert_eq!(
        (c.status, c.opcode),
        (WcStatus::MwBindErr, WcOpcode::BindMw)
    );
    assert_eq!(s.pair.b.qp.state(), QpState::Err);
    // Remote write over a region without LOCAL_WRITE.
    let mut s = setup(MwType::Type2, AccessFlags::MW_BIND);
    let (_, c) = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    assert_eq!(c.status, WcStatus::MwBindErr);
    // ... while remote read over it is fine.
    let mut s = setup(MwType::Type2, AccessFlags::MW_BIND);
    let (_, c) = bind_on_b(&mut s, AccessFlags::REMOTE_READ);
    assert_eq!(c.status, WcStatus::Success);
    // A range past the region's end.
    let mut s = setup(MwType::Type2, mw_region());
    let n = s.pair.b.completions.len();
    let op = bind(
        inc(s.w),
        s.b.lkey,
        BASE + REGION - 8,
        16,
        AccessFlags::REMOTE_READ,
    );
    s.pair.b.qp.post_send(local(901, op)).unwrap();
    s.pair
        .run_until(Limits::default(), |p| p.b.completions.len() > n)
        .unwrap();
    assert_eq!(s.pair.b.completions[n].status, WcStatus::MwBindErr);
    // A bound type 2 window is invalidated before it is bound again.
    let mut s = setup(MwType::Type2, mw_region());
    let (key, _) = bind_on_b(&mut s, AccessFlags::REMOTE_READ);
    let n = s.pair.b.completions.len();
    let op = bind(inc(key), s.b.lkey, WIN, 8, AccessFlags::REMOTE_READ);
    s.pair.b.qp.post_send(local(902, op)).unwrap();
    s.pair
        .run_until(Limits::default(), |p| p.b.completions.len() > n)
        .unwrap();
    assert_eq!(s.pair.b.completions[n].status, WcStatus::MwBindErr);
    // A local invalidation of a plain region's key.
    let mut s = setup(MwType::Type2, mw_region());
    let rkey = s.b.rkey;
    s.pair
        .b
        .qp
        .post_send(local(903, SendOp::LocalInv(rkey)))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| !p.b.completions.is_empty())
        .unwrap();
    let c = s.pair.b.completions[0];
    assert_eq!(
        (c.status, c.opcode),
        (WcStatus::MwBindErr, WcOpcode::LocalInv)
    );
}

#[test]
fn a_type1_window_rebinds_under_a_new_key_and_is_never_invalidated() {
    let mut s = setup(MwType::Type1, mw_region());
    let (k1, c) = bind_on_b(&mut s, AccessFlags::REMOTE_WRITE);
    assert_eq!(c.status, WcStatus::Success);
    assert_eq!(s.pair.b.mem.window_qp(k1), None, "type 1: no QP");
    assert_eq!(write_from_a(&mut s, k1, WIN, 8), WcStatus::Success);
    // Rebind while bound: zero length, a new key.
    let k2 = inc(k1);
    let n = s.pair.b.completions.len();
    s.pair
        .b
        .qp
        .post_send(local(904, bind(k2, s.b.lkey, WIN, 0, AccessFlags::EMPTY)))
        .unwrap();
    s.pair
        .run_until(Limits::default(), |p| p.b.completions.len() > n)
        .unwrap();
    assert_eq!(s.pair.b.completions[n].status, WcStatus::Success);
    assert_eq!(
        s.pair.b.mem.invalidate(k2),
        Err(MemError::BadKey(k2.value()))
    );
    assert_eq!(write_from_a(&mut s, k1, WIN, 8), WcStatus::RemAccessErr);
}

#[test]
fn the_region_table_keeps_windows_and_regions_apart() {
    let mut m = ByteMemory::new();
    let r = m.register(BASE, REGION, mw_region()).unwrap();
    let w1 = m.alloc_window(MwType::Type1).unwrap();
    let w2 = m.alloc_window(MwType::Type2).unwrap();
    assert_ne!(w1.value() & WINDOW_KEY_BIT, 0);
    assert_eq!(r.rkey.value() & WINDOW_KEY_BIT, 0);
    let b = |rkey| WindowBind {
        rkey,
        lkey: r.lkey,
        addr: WIN,
        len: WIN_LEN,
        access: AccessFlags::REMOTE_READ | AccessFlags::REMOTE_WRITE,
    };
    m.bind_window(&b(inc(w1)), Qpn::new(1)).unwrap();
    m.bind_window(&b(inc(w2)), Qpn::new(1)).unwrap();
    // A window key is an R_Key only.
    assert!(m
        .check(
            MemKey::Local(Lkey::new(inc(w1).value())),
            WIN,
            8,
            AccessFlags::EMPTY
        )
        .is_err());
    assert!(m
        .check(MemKey::Remote(inc(w1)), WIN, 8, AccessFlags::REMOTE_READ)
        .is_ok());
    // A type 1 window is not invalidated; a type 2 window is.
    assert_eq!(
        m.invalidate(inc(w1)),
        Err(MemError::NotInvalidatable(inc(w1).value()))
    );
    assert_eq!(m.invalidate_local(inc(w2)), Ok(()));
    assert!(m
        .check(MemKey::Remote(inc(w2)), WIN, 8, AccessFlags::REMOTE_READ)
        .is_err());
    // A region under a bound window is not deregistered; once the window
    // is gone it is.
    assert_eq!(
        m.deregister(r.lkey),
        Err(MemError::WindowsBound(r.lkey.value()))
    );
    m.dealloc_window(w1).unwrap();
    assert!(m
        .check(MemKey::Remote(inc(w1)), WIN, 8, AccessFlags::REMOTE_READ)
        .is_err());
    assert!(m.dealloc_window(w1).is_err(), "twice");
    m.deregister(r.lkey).unwrap();
    // Rights a window cannot grant.
    let r = m.register(BASE, REGION, mw_region()).unwrap();
    let w = m.alloc_window(MwType::Type1).unwrap();
    let mut bad = b(inc(w));
    bad.lkey = r.lkey;
    bad.access = AccessFlags::MW_BIND;
    assert!(matches!(
        m.bind_window(&bad, Qpn::new(1)),
        Err(MemError::WindowRefused(_))
    ));
}

#[test]
fn hostile_window_keys_never_panic_and_name_nothing() {
    let mut m = ByteMemory::new();
    let r = m.register(BASE, REGION, mw_region()).unwrap();
    let w = m.alloc_window(MwType::Type2).unwrap();
    m.bind_window(
        &WindowBind {
            rkey: w,
            lkey: r.lkey,
            addr: WIN,
            len: WIN_LEN,
            access: AccessFlags::REMOTE_WRITE | AccessFlags::ZERO_BASED,
        },
        Qpn::new(1),
    )
    .unwrap();
    // Zero-based: offsets into the window.
    assert!(m
        .check(MemKey::Remote(w), 0, WIN_LEN, AccessFlags::REMOTE_WRITE)
        .is_ok());
    assert!(m
        .check(MemKey::Remote(w), 1, WIN_LEN, AccessFlags::REMOTE_WRITE)
        .is_err());
    let mut x: u32 = 0x9E37_79B9;
    for i in 0..20_000u32 {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        let key = Rkey::new(x | if i % 2 == 0 { WINDOW_KEY_BIT } else { 0 });
        let addr = u64::from(x).wrapping_mul(0x1_0001) ^ u64::from(i);
        for len in [0, 1, 8, u64::MAX] {
            let ok = m
                .check(MemKey::Remote(key), addr, len, AccessFlags::REMOTE_WRITE)
                .is_ok();
            if ok {
                assert_eq!(key, w, "only the bound key");
            }
        }
        let _ = m.invalidate(key);
        let _ = m.window_qp(key);
        let _ = m.write(MemKey::Remote(key), addr, Payload::Len(8));
    }
}

#[test]
fn a_bind_fits_in_the_work_request_an_atomic_already_takes() {
    // The engine and the simulator copy send WRs around; the window ops
    // must not make every one of them larger.
    assert!(std::mem::size_of::<SendOp>() <= 32);
}
