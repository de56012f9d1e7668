//! Device memory and parent domains driven as a C program drives them:
//! through the `verbs_context` slots and the `ibv_dm` function pointers
//! that `verbs.h`'s inline verbs call, with RDMA WRITE and READ between two
//! contexts reaching a region over device memory.

use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use verbs_emu::backend::ibverbs::ffi::*;

use super::*;

/// The tests of this file share the device's memory (contexts of one
/// device share its backend): one at a time, so accounting checks hold.
static DEVICE_MEMORY: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    DEVICE_MEMORY.lock().unwrap_or_else(|p| p.into_inner())
}

/// The `verbs_context` around a context (`verbs_get_ctx`).
unsafe fn vctx(ctx: *mut ibv_context) -> *mut verbs_context {
    let off = std::mem::offset_of!(verbs_context, context);
    // SAFETY: contexts of ours sit at the end of a verbs_context.
    unsafe { ctx.cast::<u8>().sub(off).cast() }
}

/// The inline `ibv_alloc_dm`.
unsafe fn alloc_dm(ctx: *mut ibv_context, length: usize, log_align: u32, mask: u32) -> *mut ibv_dm {
    let mut a = ibv_alloc_dm_attr {
        length,
        log_align_req: log_align,
        comp_mask: mask,
    };
    // SAFETY: the slot, called as the inline verb calls it.
    unsafe {
        let slot = (*vctx(ctx)).alloc_dm.expect("alloc_dm slot");
        std::mem::transmute::<unsafe extern "C" fn(), alloc_dm_fn>(slot)(ctx, &mut a)
    }
}

/// The inline `ibv_free_dm`.
unsafe fn free_dm(dm: *mut ibv_dm) -> c_int {
    // SAFETY: as above.
    unsafe {
        let slot = (*vctx((*dm).context)).free_dm.expect("free_dm slot");
        std::mem::transmute::<unsafe extern "C" fn(), free_dm_fn>(slot)(dm)
    }
}

/// The inline `ibv_reg_dm_mr`.
unsafe fn reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    off: u64,
    len: usize,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: as above.
    unsafe {
        let slot = (*vctx((*pd).context)).reg_dm_mr.expect("reg_dm_mr slot");
        std::mem::transmute::<unsafe extern "C" fn(), reg_dm_mr_fn>(slot)(pd, dm, off, len, access)
    }
}

/// The inline `ibv_memcpy_to_dm`.
unsafe fn to_dm(dm: *mut ibv_dm, off: u64, data: &[u8]) -> c_int {
    // SAFETY: the DM's own function, with a readable source.
    unsafe { ((*dm).memcpy_to_dm.unwrap())(dm, off, data.as_ptr().cast(), data.len()) }
}

/// The inline `ibv_memcpy_from_dm`.
unsafe fn from_dm(dm: *mut ibv_dm, off: u64, out: &mut [u8]) -> c_int {
    // SAFETY: the DM's own function, with a writable destination.
    unsafe { ((*dm).memcpy_from_dm.unwrap())(out.as_mut_ptr().cast(), dm, off, out.len()) }
}

/// The inline `ibv_query_device_ex`'s `max_dm_size`.
unsafe fn max_dm_size(ctx: *mut ibv_context) -> u64 {
    let mut attr = ibv_device_attr_ex::default();
    // SAFETY: the slot, with a full-sized output struct.
    unsafe {
        let slot = (*vctx(ctx)).query_device_ex.expect("query_device_ex slot");
        let f = std::mem::transmute::<unsafe extern "C" fn(), query_device_ex_fn>(slot);
        assert_eq!(
            f(ctx, ptr::null(), &mut attr, std::mem::size_of_val(&attr)),
            0
        );
    }
    attr.max_dm_size
}

#[test]
fn device_memory_is_allocated_copied_bounds_checked_and_runs_out() {
    let _one = serial();
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let ctx = ibv_open_device(*list);
        ibv_free_device_list(list);
        let max = max_dm_size(ctx);
        assert_eq!(max, 256 * 1024, "a ConnectX's on-chip memory");

        // Refusals: a comp_mask, more than the device has, nothing.
        assert!(alloc_dm(ctx, 64, 0, 1).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(alloc_dm(ctx, max as usize + 1, 0, 0).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(alloc_dm(ctx, 0, 0, 0).is_null());
        assert_eq!(errno(), libc::EINVAL);

        // Copies in and out, 4-byte words inside the allocation.
        let dm = alloc_dm(ctx, 100, 12, 0);
        assert!(!dm.is_null());
        assert_eq!((*dm).context, ctx);
        assert_eq!((*dm).comp_mask, IBV_DM_MASK_HANDLE);
        let data: Vec<u8> = (0..100u8).collect();
        assert_eq!(to_dm(dm, 0, &data), 0);
        let mut back = [0u8; 96];
        assert_eq!(from_dm(dm, 4, &mut back), 0);
        assert_eq!(back[..], data[4..]);
        assert_eq!(to_dm(dm, 3, &data[..4]), libc::EINVAL, "unaligned offset");
        assert_eq!(to_dm(dm, 4, &data[..3]), libc::EINVAL, "unaligned length");
        assert_eq!(to_dm(dm, 0, &[0; 104]), libc::EFAULT, "past the end");
        assert_eq!(from_dm(dm, 100, &mut [0; 4]), libc::EFAULT);
        assert_eq!(from_dm(dm, 3, &mut [0; 4]), libc::EINVAL);

        // A region over it: zero-based only, inside the allocation, and it
        // holds the allocation until deregistered.
        let pd = ibv_alloc_pd(ctx);
        let local = IBV_ACCESS_LOCAL_WRITE;
        assert!(reg_dm_mr(pd, dm, 0, 100, local).is_null());
        assert_eq!(errno(), libc::EINVAL);
        assert!(reg_dm_mr(pd, dm, 0, 104, local | IBV_ACCESS_ZERO_BASED).is_null());
        assert!(reg_dm_mr(pd, dm, 8, 96, local | IBV_ACCESS_ZERO_BASED).is_null());
        let mr = reg_dm_mr(pd, dm, 8, 92, local | IBV_ACCESS_ZERO_BASED);
        assert!(!mr.is_null());
        assert!((*mr).addr.is_null(), "rdma-core hides the DM's address");
        assert_eq!((*mr).length, 92);
        assert_eq!(free_dm(dm), libc::EBUSY);
        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(free_dm(dm), 0);

        // Accounted against the device's size: two halves fill it.
        let h1 = alloc_dm(ctx, max as usize / 2, 0, 0);
        let h2 = alloc_dm(ctx, max as usize / 2, 0, 0);
        assert!(!h1.is_null() && !h2.is_null());
        assert!(alloc_dm(ctx, 4, 0, 0).is_null());
        assert_eq!(errno(), libc::ENOMEM);
        assert_eq!(free_dm(h1), 0);
        // Freed memory is reused, and comes back zeroed.
        let h3 = alloc_dm(ctx, 64, 6, 0);
        assert!(!h3.is_null());
        let mut z = [0xFFu8; 64];
        assert_eq!(from_dm(h3, 0, &mut z), 0);
        assert_eq!(z, [0u8; 64]);
        assert_eq!(free_dm(h3), 0);
        assert_eq!(free_dm(h2), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}

/// Post one signalled WR on `s` and wait for its completion.
unsafe fn post_wait(s: &Side, wr: &mut ibv_send_wr) -> ibv_wc {
    // SAFETY (whole body): posts and polls on live objects; the caller's
    // SGEs name registered memory.
    unsafe {
        let ops = &(*s.ctx).ops;
        let mut bad = ptr::null_mut();
        assert_eq!((ops.post_send.unwrap())(s.qp, wr, &mut bad), 0);
        let mut wc = ibv_wc::default();
        let start = Instant::now();
        while (ops.poll_cq.unwrap())(s.cq, 1, &mut wc) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no completion");
            std::thread::yield_now();
        }
        wc
    }
}

/// Let `qp` (in RTS) serve remote READs and WRITEs.
unsafe fn allow_remote(qp: *mut ibv_qp) {
    let mut a = ibv_qp_attr {
        qp_access_flags: IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ,
        ..Default::default()
    };
    // SAFETY: a live QP, stack attributes.
    assert_eq!(unsafe { ibv_modify_qp(qp, &mut a, IBV_QP_ACCESS_FLAGS) }, 0);
}

#[test]
fn rdma_write_and_read_reach_a_device_memory_region() {
    let _one = serial();
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order; SGEs name registered memory.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let a = side(*list);
        let b = side(*list);
        ibv_free_device_list(list);
        connect(&a, &b);
        connect(&b, &a);
        allow_remote(b.qp);
        allow_remote(a.qp);

        let dm = alloc_dm(b.ctx, 4096, 0, 0);
        assert!(!dm.is_null());
        let access = IBV_ACCESS_ZERO_BASED
            | IBV_ACCESS_LOCAL_WRITE
            | IBV_ACCESS_REMOTE_WRITE
            | IBV_ACCESS_REMOTE_READ;
        let dmr = reg_dm_mr(b.pd, dm, 1024, 2048, access);
        assert!(!dmr.is_null());

        // a WRITEs into b's device memory: remote addresses are offsets
        // into the region (which starts 1024 bytes into the allocation).
        let msg = b"into device memory!!";
        ptr::copy_nonoverlapping(msg.as_ptr(), a.buf.as_ptr().cast_mut(), msg.len());
        let mut sge = ibv_sge {
            addr: a.buf.as_ptr() as u64,
            length: msg.len() as u32,
            lkey: (*a.mr).lkey,
        };
        let mut wr = ibv_send_wr {
            wr_id: 1,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 64,
            rkey: (*dmr).rkey,
        };
        let wc = post_wait(&a, &mut wr);
        assert_eq!((wc.status, wc.opcode), (IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE));
        let mut got = [0u8; 20];
        assert_eq!(from_dm(dm, 1024 + 64, &mut got), 0);
        assert_eq!(&got, msg);

        // a READs what b put there.
        assert_eq!(to_dm(dm, 1024 + 512, b"read from the device"), 0);
        let mut sge = ibv_sge {
            addr: a.buf.as_ptr() as u64 + 256,
            length: 20,
            lkey: (*a.mr).lkey,
        };
        let mut wr = ibv_send_wr {
            wr_id: 2,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_READ,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 512,
            rkey: (*dmr).rkey,
        };
        let wc = post_wait(&a, &mut wr);
        assert_eq!((wc.status, wc.opcode), (IBV_WC_SUCCESS, IBV_WC_RDMA_READ));
        assert_eq!(&a.buf[256..276], b"read from the device");

        // b WRITEs from its device memory: local SGEs are offsets too.
        let mut sge = ibv_sge {
            addr: 64,
            length: 20,
            lkey: (*dmr).lkey,
        };
        let mut wr = ibv_send_wr {
            wr_id: 3,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: a.buf.as_ptr() as u64 + 1000,
            rkey: (*a.mr).rkey,
        };
        let wc = post_wait(&b, &mut wr);
        assert_eq!((wc.status, wc.opcode), (IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE));
        assert_eq!(&a.buf[1000..1020], msg);

        // Past the region's 2048 bytes: a remote access error, not memory
        // beyond it.
        let mut sge = ibv_sge {
            addr: a.buf.as_ptr() as u64,
            length: 8,
            lkey: (*a.mr).lkey,
        };
        let mut wr = ibv_send_wr {
            wr_id: 4,
            sg_list: &mut sge,
            num_sge: 1,
            opcode: IBV_WR_RDMA_WRITE,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.wr.rdma = ibv_send_wr_rdma {
            remote_addr: 2044,
            rkey: (*dmr).rkey,
        };
        let wc = post_wait(&a, &mut wr);
        assert_eq!(wc.status, IBV_WC_REM_ACCESS_ERR);

        assert_eq!(ibv_dereg_mr(dmr), 0);
        assert_eq!(free_dm(dm), 0);
        close_side(&a);
        close_side(&b);
    }
}

// ------------------------------------------------------------ parent domain

/// One allocator call: ("alloc" or "free", pointer, size, alignment,
/// resource type).
type Call = (&'static str, usize, usize, usize, u64);

/// What the test allocator does and saw.
struct Recorder {
    /// 0: allocate; 1: answer NULL; 2: answer IBV_ALLOCATOR_USE_DEFAULT.
    mode: Mutex<u8>,
    calls: Mutex<Vec<Call>>,
}

unsafe extern "C" fn rec_alloc(
    _pd: *mut ibv_pd,
    ctx: *mut c_void,
    size: usize,
    align: usize,
    resource: u64,
) -> *mut c_void {
    // SAFETY: the pd_context the test passed: a live Recorder.
    let r = unsafe { &*ctx.cast::<Recorder>() };
    let p = match *r.mode.lock().unwrap() {
        1 => ptr::null_mut(),
        2 => IBV_ALLOCATOR_USE_DEFAULT,
        _ => {
            let mut p = ptr::null_mut();
            // SAFETY: posix_memalign into a local.
            assert_eq!(unsafe { libc::posix_memalign(&mut p, align, size) }, 0);
            p
        }
    };
    r.calls
        .lock()
        .unwrap()
        .push(("alloc", p as usize, size, align, resource));
    p
}

unsafe extern "C" fn rec_free(_pd: *mut ibv_pd, ctx: *mut c_void, p: *mut c_void, resource: u64) {
    // SAFETY: as in rec_alloc.
    let r = unsafe { &*ctx.cast::<Recorder>() };
    r.calls
        .lock()
        .unwrap()
        .push(("free", p as usize, 0, 0, resource));
    // SAFETY: a pointer rec_alloc got from posix_memalign.
    unsafe { libc::free(p) };
}

#[test]
fn parent_domain_allocators_give_and_take_back_queue_buffers() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order; the recorder outlives the domain.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let ctx = ibv_open_device(*list);
        ibv_free_device_list(list);
        let v = vctx(ctx);
        let alloc_td: alloc_td_fn = std::mem::transmute((*v).alloc_td.unwrap());
        let dealloc_td: dealloc_td_fn = std::mem::transmute((*v).dealloc_td.unwrap());
        let alloc_pad: alloc_parent_domain_fn =
            std::mem::transmute((*v).alloc_parent_domain.unwrap());
        let create_cq_ex: create_cq_ex_fn = std::mem::transmute((*v).create_cq_ex.unwrap());

        let pd = ibv_alloc_pd(ctx);
        let td = alloc_td(ctx, &mut ibv_td_init_attr { comp_mask: 0 });
        assert!(!td.is_null());
        let recorder = Recorder {
            mode: Mutex::new(0),
            calls: Mutex::new(Vec::new()),
        };
        let mut attr = ibv_parent_domain_init_attr {
            pd,
            td,
            comp_mask: IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS
                | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT,
            alloc: Some(rec_alloc),
            free: None,
            pd_context: ptr::from_ref(&recorder).cast_mut().cast(),
        };
        // Allocators announced but one missing; an unknown mask bit.
        assert!(alloc_pad(ctx, &mut attr).is_null());
        assert_eq!(errno(), libc::EINVAL);
        attr.free = Some(rec_free);
        attr.comp_mask |= 1 << 5;
        assert!(alloc_pad(ctx, &mut attr).is_null());
        attr.comp_mask &= !(1 << 5);
        let parent = alloc_pad(ctx, &mut attr);
        assert!(!parent.is_null());
        assert_eq!((*parent).context, ctx);

        // A CQ under the parent domain: its buffer from the allocator.
        let mut cq_attr = ibv_cq_init_attr_ex {
            cqe: 100,
            cq_context: ptr::null_mut(),
            channel: ptr::null_mut(),
            comp_vector: 0,
            wc_flags: IBV_WC_STANDARD_FLAGS,
            comp_mask: IBV_CQ_INIT_ATTR_MASK_PD,
            flags: 0,
            parent_domain: pd,
        };
        assert!(create_cq_ex(ctx, &mut cq_attr).is_null(), "a plain PD");
        assert_eq!(errno(), libc::EINVAL);
        cq_attr.parent_domain = parent;
        let cq = create_cq_ex(ctx, &mut cq_attr);
        assert!(!cq.is_null());
        // A QP and an SRQ under it, and a region: it is a PD.
        let mut srq_init = ibv_srq_init_attr {
            srq_context: ptr::null_mut(),
            attr: ibv_srq_attr {
                max_wr: 64,
                max_sge: 1,
                srq_limit: 0,
            },
        };
        let srq = ibv_create_srq(parent, &mut srq_init);
        assert!(!srq.is_null());
        let mut qp_init = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: cq.cast(),
            recv_cq: cq.cast(),
            srq: ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 32,
                max_recv_wr: 32,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
        };
        let qp = ibv_create_qp(parent, &mut qp_init);
        assert!(!qp.is_null());
        assert_eq!((*qp).pd, parent);
        let mut buf = vec![0u8; 256];
        let mr = ibv_reg_mr(parent, buf.as_mut_ptr().cast(), buf.len(), 1);
        assert!(!mr.is_null());

        let page = libc::sysconf(libc::_SC_PAGESIZE) as usize;
        let calls = recorder.calls.lock().unwrap().clone();
        let types: Vec<u64> = calls.iter().map(|c| c.4).collect();
        assert_eq!(types, [5, 4, 1], "CQ, SRQ, QP buffers, in order");
        for c in &calls {
            assert_eq!(c.0, "alloc");
            assert_eq!(c.3, page, "page-aligned queue buffers");
            assert_eq!(c.1 % page, 0);
        }
        assert!(calls[0].2 >= 100 * 64, "64-byte CQEs");
        assert!(calls[2].2 >= 32 * 64 + 32 * 16, "send and receive WQEs");

        // While queues live, the domains are busy.
        assert_eq!(ibv_dealloc_pd(parent), libc::EBUSY);
        assert_eq!(ibv_dealloc_pd(pd), libc::EBUSY);
        assert_eq!(dealloc_td(td), libc::EBUSY);

        // NULL from the allocator: no QP (ENOMEM); the provider's own
        // memory: a QP, and nothing for `free` later.
        *recorder.mode.lock().unwrap() = 1;
        assert!(ibv_create_qp(parent, &mut qp_init).is_null());
        assert_eq!(errno(), libc::ENOMEM);
        *recorder.mode.lock().unwrap() = 2;
        let qp2 = ibv_create_qp(parent, &mut qp_init);
        assert!(!qp2.is_null());

        recorder.calls.lock().unwrap().clear();
        assert_eq!(ibv_destroy_qp(qp2), 0);
        assert_eq!(ibv_destroy_qp(qp), 0);
        assert_eq!(ibv_destroy_srq(srq), 0);
        assert_eq!(ibv_destroy_cq(cq.cast()), 0);
        let freed = recorder.calls.lock().unwrap().clone();
        let want: Vec<_> = [(calls[2].1, 1), (calls[1].1, 4), (calls[0].1, 5)]
            .into_iter()
            .map(|(p, t)| ("free", p, 0, 0, t))
            .collect();
        assert_eq!(freed, want, "each buffer back once, with its type");

        assert_eq!(ibv_dereg_mr(mr), 0);
        assert_eq!(ibv_dealloc_pd(parent), 0);
        assert_eq!(dealloc_td(td), 0);
        assert_eq!(ibv_dealloc_pd(pd), 0);
        assert_eq!(ibv_close_device(ctx), 0);
    }
}
