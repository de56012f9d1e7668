//! On-demand paging (`IBV_ACCESS_ON_DEMAND`) on the UDP backend: an
//! access to pages of an ODP region that cannot be faulted in fails as a
//! NIC's unresolvable page fault does (an error completion for the
//! program's own work, a NAK for a peer's request) and the process carries
//! on; the implicit region, the whole address space, carries WRITE and
//! READ to ordinary memory; `advise_mr` answers rdma-core's errors.
//!
//! The pages that cannot be faulted in are the test's own (a page without
//! access rights, a file page past the end of the file) or page 0, which
//! no process may map (`vm.mmap_min_addr`), so that no other test's
//! mapping can land where these tests expect a fault.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use verbs_emu::backend::udp::{UdpBackend, UdpConfig};
use verbs_emu::backend::{MrAdvice, OdpCaps};
use verbs_emu::verbs::{
    AccessFlags, CompletionQueue, Context, MemoryRegion, Mtu, ProtectionDomain, QpType, QueuePair,
    RecvWr, SendFlags, SendOp, SendWr, Sge, VerbsError, WcStatus,
};
use verbs_emu::wire::Lkey;

use super::ALL;

/// Every right, on demand.
const ODP: AccessFlags = AccessFlags(ALL.0 | AccessFlags::ON_DEMAND.0);

fn page() -> usize {
    // SAFETY: sysconf has no memory effects.
    unsafe { libc::sysconf(libc::_SC_PAGESIZE) as usize }
}

/// Two pages of this test's own: the first ordinary memory, the second
/// mapped but impossible to fault in. Unmapped on drop.
struct Pages {
    ptr: *mut u8,
}

impl Pages {
    /// Anonymous memory, the second page without access rights.
    fn inaccessible_second() -> Pages {
        // SAFETY: a fresh anonymous mapping the kernel places.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                2 * page(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        let ptr = p.cast::<u8>();
        // SAFETY: the second page of the mapping made above.
        let rc = unsafe { libc::mprotect(ptr.add(page()).cast(), page(), libc::PROT_NONE) };
        assert_eq!(rc, 0);
        Pages { ptr }
    }

    /// A shared mapping of a one-page memory file: the second page lies
    /// past the end of the file (an access there is SIGBUS).
    fn past_eof_second() -> Pages {
        // SAFETY: a new memory file, sized, mapped, then its descriptor
        // closed (the mapping keeps the file).
        unsafe {
            let fd = libc::memfd_create(c"odp-test".as_ptr(), libc::MFD_CLOEXEC);
            assert!(fd >= 0);
            assert_eq!(libc::ftruncate(fd, page() as libc::off_t), 0);
            let p = libc::mmap(
                std::ptr::null_mut(),
                2 * page(),
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                0,
            );
            libc::close(fd);
            assert_ne!(p, libc::MAP_FAILED);
            Pages { ptr: p.cast() }
        }
    }

    fn addr(&self, offset: usize) -> u64 {
        self.ptr as u64 + offset as u64
    }

    /// The byte at `offset` of the first page.
    fn byte(&self, offset: usize) -> u8 {
        assert!(offset < page());
        // SAFETY: inside the first, accessible page; the device is idle
        // (every completion was polled).
        unsafe { self.ptr.add(offset).read_volatile() }
    }
}

impl Drop for Pages {
    fn drop(&mut self) {
        // SAFETY: the mapping made at construction, registered no more
        // (the regions over it were dropped first).
        unsafe { libc::munmap(self.ptr.cast(), 2 * page()) };
    }
}

/// One device with an RC QP.
struct Side {
    cq: CompletionQueue,
    qp: QueuePair,
    pd: ProtectionDomain,
    ctx: Context,
}

fn side(ip: Ipv4Addr) -> Side {
    let cfg = UdpConfig::new(SocketAddrV4::new(ip, 4791));
    let ctx = Context::from_backend(Arc::new(UdpBackend::open(cfg).expect("bind")));
    let pd = ctx.alloc_pd().unwrap();
    let cq = ctx.create_cq(64).unwrap();
    let qp = pd
        .qp_builder(QpType::Rc)
        .cq(&cq)
        .max_send_wr(16)
        .max_recv_wr(16)
        .build()
        .unwrap();
    Side { cq, qp, pd, ctx }
}

/// Two devices on 127.<net>.0.1 and .2.
fn pair(net: u8) -> (Side, Side) {
    let a = side(Ipv4Addr::new(127, net, 0, 1));
    let b = side(Ipv4Addr::new(127, net, 0, 2));
    (a, b)
}

/// (Re)connect the two QPs: a QP in ERR after a failed request starts
/// again from RESET.
fn connect(a: &Side, b: &Side) {
    let ea = a.qp.endpoint(10, 0, None).unwrap();
    let eb = b.qp.endpoint(20, 0, None).unwrap();
    a.qp.connect(ea.psn, &eb, Mtu::Mtu1024, ALL).unwrap();
    b.qp.connect(eb.psn, &ea, Mtu::Mtu1024, ALL).unwrap();
}

/// Register `len` bytes at `addr` in `s`'s PD with `access`.
///
/// # Safety
///
/// As for [`ProtectionDomain::register_raw`] (on demand: the pages need
/// not be mapped).
unsafe fn reg(s: &Side, addr: *mut u8, len: usize, access: AccessFlags) -> MemoryRegion {
    // SAFETY: forwarded.
    unsafe { s.pd.register_raw(addr, len, access) }.unwrap()
}

fn sge(addr: u64, length: u32, mr: &MemoryRegion) -> Sge {
    Sge {
        addr,
        length,
        lkey: mr.lkey(),
    }
}

/// Post one signaled `op` over `sg` on `s`'s QP; its completion status.
fn run(s: &Side, wr_id: u64, sg: Sge, op: SendOp) -> WcStatus {
    let sg = [sg];
    let wr = SendWr {
        wr_id,
        sg_list: &sg,
        op,
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    // SAFETY: the SGE names a registered region of the test that outlives
    // the completion waited for here (or pages that fail the access).
    unsafe { s.qp.post_send(&[wr]) }.unwrap();
    let wc = s.cq.poll_n(1, Duration::from_secs(10)).unwrap()[0];
    assert_eq!(wc.wr_id, wr_id);
    wc.status
}

#[test]
fn the_device_claims_odp_for_what_it_carries() {
    let (a, _b) = pair(171);
    let caps = a.ctx.backend().odp_caps();
    assert_eq!(
        caps.general_caps,
        OdpCaps::SUPPORT | OdpCaps::SUPPORT_IMPLICIT
    );
    let rc = OdpCaps::SEND
        | OdpCaps::RECV
        | OdpCaps::WRITE
        | OdpCaps::READ
        | OdpCaps::ATOMIC
        | OdpCaps::SRQ_RECV;
    assert_eq!(caps.rc, rc);
    assert_eq!(
        caps.ud & (OdpCaps::WRITE | OdpCaps::READ | OdpCaps::ATOMIC),
        0
    );
}

/// Every way the device touches an ODP region, aimed at `bad` (a page of
/// `pages` that cannot be faulted in): each fails with the status a NIC
/// gives, and the same regions then carry a good WRITE.
fn unresolvable_pages_fail_each_access(net: u8, pages: fn() -> Pages) {
    let (a, b) = pair(net);
    let (pa, pb) = (pages(), pages());
    let p = page();
    // SAFETY: the test's own mappings, which outlive the regions
    // (declared first, dropped last); on demand, the second page of each
    // may be unmapped.
    let (ma, mb) = unsafe { (reg(&a, pa.ptr, 2 * p, ODP), reg(&b, pb.ptr, 2 * p, ODP)) };
    let (good_a, bad_a) = (pa.addr(64), pa.addr(p + 64));
    let (good_b, bad_b) = (pb.addr(64), pb.addr(p + 64));
    let rkey = mb.rkey();

    // A peer's WRITE or READ of the bad page: NAKed, a remote access error.
    connect(&a, &b);
    let write = |to| SendOp::Write {
        remote_addr: to,
        rkey,
    };
    let read = |from| SendOp::Read {
        remote_addr: from,
        rkey,
    };
    assert_eq!(
        run(&a, 1, sge(good_a, 32, &ma), write(bad_b)),
        WcStatus::RemAccessErr
    );
    connect(&a, &b);
    assert_eq!(
        run(&a, 2, sge(good_a, 32, &ma), read(bad_b)),
        WcStatus::RemAccessErr
    );
    connect(&a, &b);
    let add = SendOp::FetchAdd {
        remote_addr: bad_b,
        rkey,
        add: 1,
    };
    assert_eq!(run(&a, 3, sge(good_a, 8, &ma), add), WcStatus::RemAccessErr);
    // A WRITE that starts in the good page and ends in the bad one fails
    // as a whole.
    connect(&a, &b);
    assert_eq!(
        run(&a, 4, sge(good_a, 128, &ma), write(pb.addr(p - 64))),
        WcStatus::RemAccessErr
    );

    // The program's own SGE on the bad page: a local protection error, as
    // for a READ landing there.
    connect(&a, &b);
    assert_eq!(
        run(&a, 5, sge(bad_a, 32, &ma), write(good_b)),
        WcStatus::LocProtErr
    );
    connect(&a, &b);
    assert_eq!(
        run(&a, 6, sge(bad_a, 32, &ma), read(good_b)),
        WcStatus::LocProtErr
    );

    // A receive on the bad page: the SEND that meets it fails it.
    connect(&a, &b);
    let rsg = [sge(bad_b, 32, &mb)];
    // SAFETY: a registered (on-demand) region that outlives the receive.
    unsafe {
        b.qp.post_recv(&[RecvWr {
            wr_id: 7,
            sg_list: &rsg,
        }])
    }
    .unwrap();
    assert_ne!(
        run(&a, 8, sge(good_a, 32, &ma), SendOp::Send),
        WcStatus::Success
    );
    let wc = b.cq.poll_n(1, Duration::from_secs(10)).unwrap()[0];
    assert_eq!((wc.wr_id, wc.status), (7, WcStatus::LocProtErr));

    // The process carries on, and the good pages of the same regions
    // carry traffic.
    connect(&a, &b);
    // SAFETY: the first page of a's own mapping; the device is idle.
    unsafe { std::ptr::write_bytes(pa.ptr.add(64), 0xA5, 32) };
    assert_eq!(
        run(&a, 9, sge(good_a, 32, &ma), write(good_b)),
        WcStatus::Success
    );
    assert_eq!(pb.byte(64 + 31), 0xA5);
    drop((ma, mb));
}

#[test]
fn accesses_to_pages_without_rights_fail_and_the_process_survives() {
    unresolvable_pages_fail_each_access(172, Pages::inaccessible_second);
}

#[test]
fn accesses_past_the_end_of_a_mapped_file_fail_and_the_process_survives() {
    unresolvable_pages_fail_each_access(173, Pages::past_eof_second);
}

/// `vm.mmap_min_addr`: the pages below it no process can map.
fn mmap_min_addr() -> u64 {
    std::fs::read_to_string("/proc/sys/vm/mmap_min_addr")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

/// The bytes of `buf` as they are now, read volatile: a device wrote them
/// behind the compiler's back.
fn volatile_copy(buf: &[u8]) -> Vec<u8> {
    buf.iter()
        // SAFETY: each byte of a live buffer, read through its reference.
        .map(|b| unsafe { std::ptr::read_volatile(b) })
        .collect()
}

#[test]
fn the_implicit_region_carries_write_and_read_to_ordinary_memory() {
    let (a, b) = pair(174);
    let mut src = vec![0u8; 4096];
    let mut dst = vec![0u8; 4096];
    for (i, x) in src.iter_mut().enumerate() {
        *x = (i * 7) as u8;
    }
    // SAFETY: `src` outlives the region; nothing else touches it while
    // traffic is in flight.
    let ma = unsafe { reg(&a, src.as_mut_ptr(), src.len(), ALL) };
    // The whole address space of b, as rdma-core registers it.
    // SAFETY: on demand: each access resolves its pages first.
    let implicit = unsafe { reg(&b, std::ptr::null_mut(), usize::MAX, ODP) };
    assert!(!implicit.pinned());
    connect(&a, &b);
    let rkey = implicit.rkey();
    let to = dst.as_mut_ptr() as u64;
    let op = SendOp::Write {
        remote_addr: to + 100,
        rkey,
    };
    assert_eq!(
        run(&a, 1, sge(src.as_ptr() as u64, 3000, &ma), op),
        WcStatus::Success
    );
    // b's device wrote `dst` (the WRITE was acknowledged after it landed).
    let landed = volatile_copy(&dst);
    assert_eq!(&landed[100..3100], &src[..3000]);
    // READ it back into the other half of `src`, then check the bytes.
    let op = SendOp::Read {
        remote_addr: to + 100,
        rkey,
    };
    let back = src.as_ptr() as u64 + 3000;
    assert_eq!(run(&a, 2, sge(back, 1000, &ma), op), WcStatus::Success);
    let got = volatile_copy(&src);
    assert_eq!(&got[3000..4000], &landed[100..1100]);
    // An atomic through the implicit key.
    let word = dst.as_mut_ptr() as u64 + 8;
    let op = SendOp::FetchAdd {
        remote_addr: word,
        rkey,
        add: 5,
    };
    assert_eq!(run(&a, 3, sge(back, 8, &ma), op), WcStatus::Success);
    if mmap_min_addr() >= 16 {
        // Page 0 is in the implicit region and never mapped: a fault
        // there is a NAK, not a signal.
        let op = SendOp::Write {
            remote_addr: 8,
            rkey,
        };
        assert_eq!(run(&a, 4, sge(back, 8, &ma), op), WcStatus::RemAccessErr);
    }
    drop((ma, implicit));
    drop((src, dst));
}

#[test]
fn the_implicit_region_is_the_whole_address_space_only() {
    let (a, _b) = pair(175);
    // SAFETY: the call is refused before anything is registered.
    let r = unsafe { a.pd.register_raw(std::ptr::null_mut(), usize::MAX, ALL) };
    assert!(r.is_err(), "a null address without ON_DEMAND is refused");
    // SAFETY: as above.
    let r = unsafe { a.pd.register_raw(std::ptr::null_mut(), 1 << 20, ODP) };
    assert!(r.is_err(), "a null address is implicit only with SIZE_MAX");
}

/// The errno of an `advise_mr` refusal.
fn errno(r: Result<(), VerbsError>) -> i32 {
    match r {
        Err(VerbsError::Os { source, .. }) => source.raw_os_error().unwrap_or(0),
        other => panic!("not an OS error: {other:?}"),
    }
}

#[test]
fn advise_mr_prefetches_odp_ranges_and_refuses_as_rdma_core_does() {
    let a = side(Ipv4Addr::new(127, 176, 0, 1));
    let pages = Pages::inaccessible_second();
    let p = page();
    let mut plain = vec![0u8; 64];
    // SAFETY: the test's own memory, which outlives the regions.
    let (odp, ro, plain_mr) = unsafe {
        (
            reg(&a, pages.ptr, 2 * p, ODP),
            reg(
                &a,
                pages.ptr,
                p,
                AccessFlags(AccessFlags::ON_DEMAND.0 | AccessFlags::REMOTE_READ.0),
            ),
            reg(&a, plain.as_mut_ptr(), plain.len(), ALL),
        )
    };
    let dev = a.ctx.backend();
    let pd = a.pd.handle();
    let good = [
        sge(pages.addr(0), 128, &odp),
        sge(pages.addr(512), 64, &odp),
    ];
    for advice in [
        MrAdvice::Prefetch,
        MrAdvice::PrefetchWrite,
        MrAdvice::PrefetchNoFault,
    ] {
        for flush in [true, false] {
            assert!(
                dev.advise_mr(pd, advice, flush, &good).is_ok(),
                "{advice:?}"
            );
        }
    }
    let write = MrAdvice::PrefetchWrite;
    // No SGE.
    assert_eq!(errno(dev.advise_mr(pd, write, true, &[])), libc::EINVAL);
    // A key that names no region, a plain region, another PD's region, a
    // write prefetch of a read-only region: ENOENT, or EINVAL unflushed.
    let unknown = Sge {
        lkey: Lkey::new(odp.lkey().value() ^ 0x5A_5A00),
        ..good[0]
    };
    let pd2 = a.ctx.alloc_pd().unwrap();
    let other_pd = pd2.handle();
    let plain_sge = sge(plain.as_ptr() as u64, 8, &plain_mr);
    for (pd, sg) in [(pd, unknown), (pd, plain_sge), (other_pd, good[0])] {
        assert_eq!(errno(dev.advise_mr(pd, write, true, &[sg])), libc::ENOENT);
        assert_eq!(errno(dev.advise_mr(pd, write, false, &[sg])), libc::EINVAL);
    }
    let ro_sge = sge(pages.addr(0), 8, &ro);
    assert_eq!(
        errno(dev.advise_mr(pd, write, true, &[ro_sge])),
        libc::ENOENT
    );
    assert!(dev
        .advise_mr(pd, MrAdvice::Prefetch, true, &[ro_sge])
        .is_ok());
    // Outside the region, or on pages that cannot be faulted in: EFAULT
    // when flushed; an unflushed prefetch reports bad keys only.
    let outside = sge(pages.addr(2 * p - 8), 16, &odp);
    let bad_page = sge(pages.addr(p), 8, &odp);
    for sg in [outside, bad_page] {
        for advice in [MrAdvice::Prefetch, write] {
            assert_eq!(
                errno(dev.advise_mr(pd, advice, true, &[good[0], sg])),
                libc::EFAULT
            );
            assert!(dev.advise_mr(pd, advice, false, &[sg]).is_ok());
        }
    }
    // Faulting nothing in, the page that cannot be faulted is no error.
    assert!(dev
        .advise_mr(pd, MrAdvice::PrefetchNoFault, true, &[bad_page])
        .is_ok());
    assert_eq!(
        errno(dev.advise_mr(pd, MrAdvice::PrefetchNoFault, true, &[outside])),
        libc::EFAULT
    );
    drop((odp, ro, plain_mr));
}
