//! The data path: `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` (the
//! context's ops table points here) and the shared receive queue verbs
//! (`ibv_create_srq` to `ibv_destroy_srq`, and `ibv_post_srq_recv`, which
//! the ops table also points at). An SRQ's WRs wait in its pool, which
//! lends them to its QPs (the `srq_pool` module says how).

use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::ibverbs::work::{decode_send_op, wc_to_raw};
use verbs_emu::transport::MAX_SGE;
use verbs_emu::verbs::{RecvWr, SendFlags, SendWr, Sge, UdDest, WcStatus, WorkCompletion};
use verbs_emu::wire::{Lkey, Qpn};

use crate::records::{rec, ShimAh, ShimContext, ShimCq, ShimPd, ShimQp, ShimSrq};
use crate::srq_pool::SrqPool;
use crate::{errno_of, fail, lock, set_errno};

/// The SGEs of a C work request, copied into `out`; `None` when there are
/// more than the engine takes or the count is negative.
///
/// # Safety
///
/// `sg_list` points at `num_sge` SGEs (rdma-core's contract).
unsafe fn sges(
    sg_list: *const ibv_sge,
    num_sge: c_int,
    out: &mut [Sge; MAX_SGE],
) -> Option<&[Sge]> {
    let n = usize::try_from(num_sge).ok().filter(|&n| n <= MAX_SGE)?;
    if n > 0 && sg_list.is_null() {
        return None;
    }
    for (i, slot) in out.iter_mut().enumerate().take(n) {
        // SAFETY: i < num_sge.
        let s = unsafe { *sg_list.add(i) };
        *slot = Sge {
            addr: s.addr,
            length: s.length,
            lkey: Lkey::new(s.lkey),
        };
    }
    Some(&out[..n])
}

const EMPTY_SGE: Sge = Sge {
    addr: 0,
    length: 0,
    lkey: Lkey::new(0),
};

/// Whether the SGEs of an `IBV_SEND_INLINE` WR can be read now: each with
/// data has a non-null address and does not run past the end of the address
/// space. Inline data is copied from these addresses while `ibv_post_send`
/// runs, with no lkey to check them against a region.
fn inline_readable(sg_list: &[Sge]) -> bool {
    sg_list.iter().all(|s| {
        s.length == 0 || (s.addr != 0 && s.addr.checked_add(u64::from(s.length)).is_some())
    })
}

/// `ibv_context_ops.post_send`.
///
/// # Safety
///
/// rdma-core's contract: `qp` is a live QP of this library; `wr` heads a
/// list of valid `ibv_send_wr`s, each `sg_list` pointing at `num_sge`
/// SGEs; `bad_wr` is null or writable. For a WR without `IBV_SEND_INLINE`,
/// each SGE names memory registered under its lkey, which the program
/// leaves alone until the completion (the device reads or writes it
/// later). For a WR with `IBV_SEND_INLINE`, the lkeys are ignored and the
/// data is read from each SGE's `addr` for `length` bytes before this
/// returns, so those bytes must be readable now (registered or not) and
/// may be reused as soon as it returns. A null address with data, or a
/// range past the end of the address space, is refused with `EINVAL`
/// rather than read; any other unreadable range is the program's fault,
/// as on a NIC whose driver copies inline data.
pub(crate) unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    let set_bad = |w: *mut ibv_send_wr| {
        if !bad_wr.is_null() {
            // SAFETY: caller's output.
            unsafe { *bad_wr = w };
        }
    };
    // SAFETY: the export contract.
    let Some(q) = (unsafe { rec::<ShimQp, _>(qp) }) else {
        set_bad(wr);
        return libc::EINVAL;
    };
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a WR of the program's list.
        let w = unsafe { &*cur };
        // SAFETY: a WR of the program's list; a bind names objects of ours.
        let op = match unsafe { crate::windows::local_op(w) } {
            Some(Ok(op)) => Some(op),
            Some(Err(e)) => {
                set_bad(cur);
                return e;
            }
            None => decode_send_op(w),
        };
        let Some(op) = op else {
            set_bad(cur);
            return libc::EINVAL;
        };
        let mut buf = [EMPTY_SGE; MAX_SGE];
        // SAFETY: the WR's SGE array.
        let Some(sg_list) = (unsafe { sges(w.sg_list, w.num_sge, &mut buf) }) else {
            set_bad(cur);
            return libc::EINVAL;
        };
        if w.send_flags & IBV_SEND_INLINE != 0 && !inline_readable(sg_list) {
            set_bad(cur);
            return libc::EINVAL;
        }
        let ud = if q.qp.qp_type == IBV_QPT_UD {
            // SAFETY: UD WRs carry the `ud` view of the union.
            let u = unsafe { w.wr.ud };
            // SAFETY: an AH of ours, or null.
            let Some(ah) = (unsafe { rec::<ShimAh, _>(u.ah) }) else {
                set_bad(cur);
                return libc::EINVAL;
            };
            Some(UdDest {
                ah: ah.handle,
                remote_qpn: Qpn::new(u.remote_qpn & 0xFF_FFFF),
                remote_qkey: u.remote_qkey,
            })
        } else {
            None
        };
        let swr = SendWr {
            wr_id: w.wr_id,
            sg_list,
            op,
            flags: SendFlags(w.send_flags),
            ud,
        };
        // SAFETY: the program's buffers stay valid and untouched until the
        // completion, as libibverbs requires of it.
        if let Err(e) = unsafe { q.backend.post_send(q.handle, &[swr]) } {
            set_bad(cur);
            return fail(&e.error);
        }
        cur = w.next;
    }
    0
}

/// `ibv_context_ops.post_recv`.
pub(crate) unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let set_bad = |w: *mut ibv_recv_wr| {
        if !bad_wr.is_null() {
            // SAFETY: caller's output.
            unsafe { *bad_wr = w };
        }
    };
    // SAFETY: the export contract.
    let Some(q) = (unsafe { rec::<ShimQp, _>(qp) }) else {
        set_bad(wr);
        return libc::EINVAL;
    };
    if q.srq.is_some() {
        // Receives of a QP with an SRQ are posted to the SRQ.
        set_bad(wr);
        return libc::EINVAL;
    }
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a WR of the program's list.
        let w = unsafe { &*cur };
        let mut buf = [EMPTY_SGE; MAX_SGE];
        // SAFETY: the WR's SGE array.
        let Some(sg_list) = (unsafe { sges(w.sg_list, w.num_sge, &mut buf) }) else {
            set_bad(cur);
            return libc::EINVAL;
        };
        let rwr = RecvWr {
            wr_id: w.wr_id,
            sg_list,
        };
        // SAFETY: as for post_send.
        if let Err(e) = unsafe { q.backend.post_recv(q.handle, &[rwr]) } {
            set_bad(cur);
            return fail(&e.error);
        }
        cur = w.next;
    }
    0
}

/// `ibv_context_ops.poll_cq`.
pub(crate) unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the export contract.
    let Some(q) = (unsafe { rec::<ShimCq, _>(cq) }) else {
        return -libc::EINVAL;
    };
    if n <= 0 {
        return 0;
    }
    if wc.is_null() {
        return -libc::EINVAL;
    }
    let mut buf = [WorkCompletion::empty(); 32];
    let want = (n as usize).min(buf.len());
    match q.backend.poll_cq(q.handle, &mut buf[..want]) {
        Ok(k) => {
            let srqs = lock(&q.srqs);
            let mut out = 0;
            for c in &buf[..k] {
                if c.opcode.value() & IBV_WC_RECV != 0 && !srqs.is_empty() {
                    let flushed = c.status == WcStatus::WrFlushErr;
                    let qpn = c.qp_num.value();
                    // A flushed WR the pool lent goes back to it (and to
                    // another QP), never to the program. One pool at most
                    // knows the QPN.
                    if srqs.iter().any(|s| s.completed(qpn, c.wr_id, flushed)) {
                        continue;
                    }
                }
                // SAFETY: the caller's array holds n >= k > out entries.
                unsafe { *wc.add(out) = wc_to_raw(c) };
                out += 1;
            }
            for s in srqs.iter() {
                s.refill();
                if let Some(srq) = s.limit_reached() {
                    crate::events::raise(srq, crate::events::event_type::SRQ_LIMIT_REACHED);
                }
            }
            out as c_int
        }
        Err(e) => -errno_of(&e),
    }
}

// ---------------------------------------------------------------- SRQ

/// The C type of `ibv_context_ops.post_srq_recv`.
pub(crate) type PostSrqRecvFn =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;

/// `ibv_context_ops.post_srq_recv`.
pub(crate) unsafe extern "C" fn post_srq_recv(
    srq: *mut ibv_srq,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    let set_bad = |w: *mut ibv_recv_wr| {
        if !bad_wr.is_null() {
            // SAFETY: caller's output.
            unsafe { *bad_wr = w };
        }
    };
    // SAFETY: the export contract.
    let Some(s) = (unsafe { rec::<ShimSrq, _>(srq) }) else {
        set_bad(wr);
        return libc::EINVAL;
    };
    let mut cur = wr;
    while !cur.is_null() {
        // SAFETY: a WR of the program's list.
        let w = unsafe { &*cur };
        let mut buf = [EMPTY_SGE; MAX_SGE];
        // SAFETY: the WR's SGE array.
        let sg = unsafe { sges(w.sg_list, w.num_sge, &mut buf) };
        if let Err(e) = s.pool.queue(w.wr_id, sg) {
            set_bad(cur);
            s.pool.refill();
            return e;
        }
        cur = w.next;
    }
    s.pool.refill();
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_create_srq(pd: *mut ibv_pd, init: *mut ibv_srq_init_attr) -> *mut ibv_srq {
    // SAFETY: the export contract.
    let (Some(p), false) = ((unsafe { rec::<ShimPd, _>(pd) }), init.is_null()) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // SAFETY: caller's input/output.
    let ia = unsafe { &mut *init };
    if ia.attr.max_wr == 0 || ia.attr.max_wr > 16384 || ia.attr.max_sge as usize > MAX_SGE {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    ia.attr.max_sge = ia.attr.max_sge.max(1);
    // Under a parent domain, its allocator gives the queue's buffer.
    let size = crate::domain::srq_buffer_size(ia.attr.max_wr, ia.attr.max_sge);
    let qbuf = match crate::domain::queue_buffer(pd, crate::domain::RES_TYPE_SRQ, size) {
        Ok(b) => b,
        Err(e) => {
            set_errno(e);
            return ptr::null_mut();
        }
    };
    // SAFETY: ibv_srq is pointers, integers and pthread objects (set
    // below); zero is valid.
    let mut raw: ibv_srq = unsafe { std::mem::zeroed() };
    raw.context = p.pd.context;
    raw.srq_context = ia.srq_context;
    raw.pd = pd;
    raw.mutex = libc::PTHREAD_MUTEX_INITIALIZER;
    raw.cond = libc::PTHREAD_COND_INITIALIZER;
    let pool = Arc::new(SrqPool::new(ia.attr.max_wr, ia.attr.max_sge));
    let b = Box::into_raw(Box::new(ShimSrq { srq: raw, pool }));
    crate::domain::keep(b as usize, qbuf);
    // SAFETY: just allocated.
    let s = unsafe { &*b };
    // The limit is armed by ibv_modify_srq only (the verbs spec).
    let _ = s.pool.arm(0, b as usize);
    // SAFETY: the PD's context is a live context of ours.
    if let Some(c) = unsafe { ShimContext::from_ptr(p.pd.context) } {
        crate::events::register(
            crate::events::backend_id(&*c.backend),
            crate::events::Kind::Srq,
            b as usize,
            c.async_wfd,
            false,
        );
    }
    b.cast()
}

#[no_mangle]
unsafe extern "C" fn ibv_modify_srq(
    srq: *mut ibv_srq,
    attr: *mut ibv_srq_attr,
    mask: c_int,
) -> c_int {
    // SAFETY: the export contract.
    let (Some(s), false) = ((unsafe { rec::<ShimSrq, _>(srq) }), attr.is_null()) else {
        return libc::EINVAL;
    };
    if mask & IBV_SRQ_MAX_WR != 0 {
        // Resizing an SRQ is an optional capability (no
        // IBV_DEVICE_SRQ_RESIZE in the device's flags).
        return libc::EOPNOTSUPP;
    }
    if mask & IBV_SRQ_LIMIT != 0 {
        // SAFETY: caller's input.
        let limit = unsafe { (*attr).srq_limit };
        if let Err(e) = s.pool.arm(limit, srq as usize) {
            return e;
        }
        // Already below it: the event fires now, as on a NIC.
        if let Some(e) = s.pool.limit_reached() {
            crate::events::raise(e, crate::events::event_type::SRQ_LIMIT_REACHED);
        }
    }
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int {
    // SAFETY: the export contract.
    let (Some(s), false) = ((unsafe { rec::<ShimSrq, _>(srq) }), attr.is_null()) else {
        return libc::EINVAL;
    };
    // SAFETY: caller's output.
    unsafe {
        *attr = ibv_srq_attr {
            max_wr: s.pool.max_wr,
            max_sge: s.pool.max_sge,
            srq_limit: s.pool.limit(),
        }
    };
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_srq(srq: *mut ibv_srq) -> c_int {
    // SAFETY: the export contract.
    let Some(s) = (unsafe { rec::<ShimSrq, _>(srq) }) else {
        return libc::EINVAL;
    };
    if s.pool.in_use() {
        return libc::EBUSY;
    }
    crate::events::unregister(srq as usize);
    crate::domain::release(srq as usize);
    // SAFETY: allocated by ibv_create_srq; no QP uses it.
    drop(unsafe { Box::from_raw(srq.cast::<ShimSrq>()) });
    0
}
