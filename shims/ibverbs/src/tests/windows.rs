//! Memory windows driven as a C program drives them: `ibv_alloc_mw`,
//! `ibv_bind_mw` and `ibv_dealloc_mw` through the context's ops table (as
//! `verbs.h`'s inline verbs call them), type 2 binds and local
//! invalidations as send work requests, and RDMA WRITEs through a
//! window's key between two contexts.

use std::os::raw::{c_int, c_uint};
use std::ptr;
use std::time::{Duration, Instant};

use verbs_emu::backend::ibverbs::ffi::*;

use super::*;

/// `struct ibv_mw`.
#[repr(C)]
struct Mw {
    context: *mut ibv_context,
    pd: *mut ibv_pd,
    rkey: u32,
    handle: u32,
    mw_type: u32,
}

/// `struct ibv_mw_bind`.
#[repr(C)]
struct MwBind {
    wr_id: u64,
    send_flags: c_uint,
    bind_info: ibv_mw_bind_info,
}

type AllocMw = unsafe extern "C" fn(*mut ibv_pd, c_uint) -> *mut Mw;
type DeallocMw = unsafe extern "C" fn(*mut Mw) -> c_int;
type BindMw = unsafe extern "C" fn(*mut ibv_qp, *mut Mw, *mut MwBind) -> c_int;

const IBV_ACCESS_MW_BIND: u32 = 1 << 4;
const IBV_WR_LOCAL_INV: u32 = 7;
const IBV_WR_BIND_MW: u32 = 8;
const IBV_DEVICE_MEM_WINDOW: u32 = 1 << 17;
const IBV_DEVICE_MEM_WINDOW_TYPE_2B: u32 = 1 << 24;

/// The inline `ibv_alloc_mw`.
unsafe fn alloc_mw(pd: *mut ibv_pd, t: c_uint) -> *mut Mw {
    // SAFETY: the slot holds our alloc_mw, of this C type.
    unsafe {
        let f: AllocMw = std::mem::transmute((*(*pd).context).ops.alloc_mw.unwrap());
        f(pd, t)
    }
}

/// The inline `ibv_dealloc_mw`.
unsafe fn dealloc_mw(mw: *mut Mw) -> c_int {
    // SAFETY: as above.
    unsafe {
        let f: DeallocMw = std::mem::transmute((*(*mw).context).ops.dealloc_mw.unwrap());
        f(mw)
    }
}

/// The inline `ibv_bind_mw` (its type check left to the slot).
unsafe fn bind_mw(qp: *mut ibv_qp, mw: *mut Mw, b: &mut MwBind) -> c_int {
    // SAFETY: as above.
    unsafe {
        let f: BindMw = std::mem::transmute((*(*mw).context).ops.bind_mw.unwrap());
        f(qp, mw, b)
    }
}

/// Post `wr` on `s`'s QP and wait for one completion on its CQ.
unsafe fn post_and_wait(s: &Side, wr: &mut ibv_send_wr) -> ibv_wc {
    // SAFETY (whole body): posts and polls on live objects.
    unsafe {
        let ops = &(*s.ctx).ops;
        let mut bad = ptr::null_mut();
        assert_eq!((ops.post_send.unwrap())(s.qp, wr, &mut bad), 0);
        wait_wc(s)
    }
}

/// The next completion on `s`'s CQ.
unsafe fn wait_wc(s: &Side) -> ibv_wc {
    // SAFETY: polls a live CQ into a stack completion.
    unsafe {
        let ops = &(*s.ctx).ops;
        let mut wc = ibv_wc::default();
        let start = Instant::now();
        while (ops.poll_cq.unwrap())(s.cq, 1, &mut wc) == 0 {
            assert!(start.elapsed() < Duration::from_secs(10), "no completion");
            std::thread::yield_now();
        }
        wc
    }
}

#[test]
fn windows_bind_grant_and_invalidate_through_the_c_api() {
    // SAFETY (whole body): the C calling sequence on objects this test
    // creates and destroys in order.
    unsafe {
        let list = ibv_get_device_list(ptr::null_mut());
        let a = side(*list);
        let mut b = side(*list);
        ibv_free_device_list(list);
        connect(&a, &b);
        connect(&b, &a);

        let mut attr = ibv_device_attr::default();
        assert_eq!(ibv_query_device(b.ctx, &mut attr), 0);
        assert!(attr.max_mw > 0);
        let caps = IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
        assert_eq!(attr.device_cap_flags & caps, caps);

        // No type 3; a window needs a PD of ours.
        assert!(alloc_mw(b.pd, 3).is_null());
        assert_eq!(errno(), libc::EINVAL);

        // A second MR over b's buffer that windows may be bound to.
        let access = (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND) as c_int;
        let wmr = ibv_reg_mr(b.pd, b.buf.as_mut_ptr().cast(), b.buf.len(), access);
        assert!(!wmr.is_null());
        let info = |len: u64| ibv_mw_bind_info {
            mr: wmr,
            addr: b.buf.as_ptr() as u64 + 256,
            length: len,
            mw_access_flags: IBV_ACCESS_REMOTE_WRITE,
        };

        // Type 2: bound by a send WR under the key the program picks.
        let mw2 = alloc_mw(b.pd, 2);
        assert!(!mw2.is_null());
        assert_eq!((*mw2).mw_type, 2);
        let key2 = ((*mw2).rkey & !0xFF) | ((*mw2).rkey.wrapping_add(1) & 0xFF);
        let mut wr = ibv_send_wr {
            wr_id: 21,
            opcode: IBV_WR_BIND_MW,
            send_flags: IBV_SEND_SIGNALED,
            ..Default::default()
        };
        wr.ext.bind_mw = ibv_send_wr_bind_mw {
            mw: mw2.cast(),
            rkey: key2,
            bind_info: info(256),
        };
        let wc = post_and_wait(&b, &mut wr);
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (21, IBV_WC_SUCCESS, IBV_WC_BIND_MW)
        );
        let wc = write_wc(&a, &b, b"through the window", 300, 1, key2);
        assert_eq!(wc.status, IBV_WC_SUCCESS);
        assert_eq!(&b.buf[300..318], b"through the window");
        // A key naming another window is refused at posting.
        wr.ext.bind_mw.rkey = key2 ^ 0x100;
        let mut bad = ptr::null_mut();
        assert_eq!(
            ((*b.ctx).ops.post_send.unwrap())(b.qp, &mut wr, &mut bad),
            libc::EINVAL
        );

        // Type 1: ibv_bind_mw, which moves mw->rkey to the new key.
        let mw1 = alloc_mw(b.pd, 1);
        let old = (*mw1).rkey;
        let mut bind = MwBind {
            wr_id: 22,
            send_flags: IBV_SEND_SIGNALED,
            bind_info: info(128),
        };
        assert_eq!(bind_mw(b.qp, mw1, &mut bind), 0);
        assert_ne!((*mw1).rkey, old);
        let wc = wait_wc(&b);
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (22, IBV_WC_SUCCESS, IBV_WC_BIND_MW)
        );
        let wc = write_wc(&a, &b, b"type one", 260, 2, (*mw1).rkey);
        assert_eq!(wc.status, IBV_WC_SUCCESS);
        assert_eq!(&b.buf[260..268], b"type one");
        // ibv_bind_mw is for type 1 only.
        assert_eq!(bind_mw(b.qp, mw2, &mut bind), libc::EINVAL);
        // The region under bound windows stays registered.
        assert_eq!(ibv_dereg_mr(wmr), libc::EBUSY);

        // Local invalidation of the type 2 window, then a WRITE through it
        // is a remote access error.
        let mut inv = ibv_send_wr {
            wr_id: 23,
            opcode: IBV_WR_LOCAL_INV,
            send_flags: IBV_SEND_SIGNALED,
            imm_data: key2,
            ..Default::default()
        };
        let wc = post_and_wait(&b, &mut inv);
        assert_eq!(
            (wc.wr_id, wc.status, wc.opcode),
            (23, IBV_WC_SUCCESS, IBV_WC_LOCAL_INV)
        );
        let wc = write_wc(&a, &b, b"too late", 300, 3, key2);
        assert_eq!(wc.status, IBV_WC_REM_ACCESS_ERR);

        assert_eq!(dealloc_mw(mw1), 0);
        assert_eq!(dealloc_mw(mw2), 0);
        assert_eq!(ibv_dereg_mr(wmr), 0);
        close_side(&a);
        close_side(&b);
        b.buf.clear();
    }
}
