//! The data path: `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` (the
//! context's ops table points here) and shared receive queues.
//!
//! # Shared receive queues
//!
//! The transport engine has per-QP receive queues only, so an SRQ is a pool
//! that lends its receive WRs to the QPs attached to it: each WR posted to
//! the SRQ goes to the attached QP (in a state that accepts receives) that
//! holds the fewest lent WRs, and a receive completion returns the lent WR
//! of its QP. A message for a QP that holds none meets an RNR NAK and is
//! retried, as with an SRQ that ran dry; programs keep an SRQ deep enough
//! for that never to matter (`ibv_srq_pingpong` posts 500 for 16 QPs).

use std::collections::VecDeque;
use std::os::raw::c_int;
use std::ptr;
use std::sync::{Arc, Mutex};

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::ibverbs::work::{decode_send_op, wc_to_raw};
use verbs_emu::backend::{Backend, QpHandle};
use verbs_emu::transport::MAX_SGE;
use verbs_emu::verbs::{RecvWr, SendFlags, SendWr, Sge, UdDest, WorkCompletion};
use verbs_emu::wire::{Lkey, Qpn};

use crate::objects::{rec, ShimAh, ShimCq, ShimPd, ShimQp};
use crate::{errno_of, fail, set_errno};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

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

/// `ibv_context_ops.post_send`.
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
        let Some(op) = decode_send_op(w) else {
            set_bad(cur);
            return libc::EINVAL;
        };
        let mut buf = [EMPTY_SGE; MAX_SGE];
        // SAFETY: the WR's SGE array.
        let Some(sg_list) = (unsafe { sges(w.sg_list, w.num_sge, &mut buf) }) else {
            set_bad(cur);
            return libc::EINVAL;
        };
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
            for (i, c) in buf[..k].iter().enumerate() {
                // SAFETY: the caller's array holds n >= k entries.
                unsafe { *wc.add(i) = wc_to_raw(c) };
                if c.opcode.value() & IBV_WC_RECV != 0 {
                    for s in srqs.iter() {
                        s.completed(c.qp_num.value());
                    }
                }
            }
            k as c_int
        }
        Err(e) => -errno_of(&e),
    }
}

// ---------------------------------------------------------------- SRQ

/// A WR waiting in an SRQ.
struct Pending {
    wr_id: u64,
    sges: Vec<Sge>,
}

/// A QP attached to an SRQ and how many of its WRs it holds.
struct Lent {
    qp: usize,
    qpn: u32,
    handle: QpHandle,
    backend: Arc<dyn Backend>,
    lent: u32,
}

/// The receive WRs of one SRQ (see the module docs).
pub(crate) struct SrqPool {
    pub max_wr: u32,
    pub max_sge: u32,
    state: Mutex<(VecDeque<Pending>, Vec<Lent>)>,
}

impl SrqPool {
    /// A QP starts receiving from this SRQ.
    pub fn attach(&self, qp: usize, qpn: u32, handle: QpHandle, backend: Arc<dyn Backend>) {
        lock(&self.state).1.push(Lent {
            qp,
            qpn,
            handle,
            backend,
            lent: 0,
        });
        self.refill();
    }

    /// A QP is destroyed; what it held is flushed with it.
    pub fn detach(&self, qp: usize) {
        lock(&self.state).1.retain(|l| l.qp != qp);
    }

    /// A receive completed on QP `qpn`.
    pub fn completed(&self, qpn: u32) {
        let mut g = lock(&self.state);
        if let Some(l) = g.1.iter_mut().find(|l| l.qpn == qpn) {
            l.lent = l.lent.saturating_sub(1);
        }
    }

    /// Lend waiting WRs to the QPs that hold the fewest.
    pub fn refill(&self) {
        let mut g = lock(&self.state);
        let (pending, qps) = &mut *g;
        let mut refused = vec![false; qps.len()];
        while let Some(p) = pending.front() {
            let Some(i) = (0..qps.len())
                .filter(|&i| !refused[i])
                .min_by_key(|&i| qps[i].lent)
            else {
                return;
            };
            let l = &mut qps[i];
            let wr = RecvWr {
                wr_id: p.wr_id,
                sg_list: &p.sges,
            };
            // SAFETY: the program posted these buffers to the SRQ under the
            // same contract as a QP's receives.
            match unsafe { l.backend.post_recv(l.handle, &[wr]) } {
                Ok(()) => {
                    l.lent += 1;
                    pending.pop_front();
                }
                // A QP in RESET (or full) takes nothing now; another may.
                Err(_) => refused[i] = true,
            }
        }
    }
}

#[repr(C)]
struct ShimSrq {
    srq: ibv_srq,
    pool: Arc<SrqPool>,
    limit: Mutex<u32>,
}

/// The pool of an SRQ pointer of ours (`None` for null).
///
/// # Safety
///
/// `srq` is null or an SRQ this library created and not destroyed.
pub(crate) unsafe fn srq_pool(srq: *mut ibv_srq) -> Option<Arc<SrqPool>> {
    // SAFETY: the caller's contract.
    unsafe { rec::<ShimSrq, _>(srq) }.map(|s| s.pool.clone())
}

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
    {
        let mut g = lock(&s.pool.state);
        while !cur.is_null() {
            // SAFETY: a WR of the program's list.
            let w = unsafe { &*cur };
            let mut buf = [EMPTY_SGE; MAX_SGE];
            // SAFETY: the WR's SGE array.
            let sg = unsafe { sges(w.sg_list, w.num_sge, &mut buf) };
            let full = g.0.len() + g.1.iter().map(|l| l.lent as usize).sum::<usize>()
                >= s.pool.max_wr as usize;
            let Some(sg) = sg.filter(|sg| sg.len() <= s.pool.max_sge as usize && !full) else {
                drop(g);
                set_bad(cur);
                s.pool.refill();
                return if full { libc::ENOMEM } else { libc::EINVAL };
            };
            g.0.push_back(Pending {
                wr_id: w.wr_id,
                sges: sg.to_vec(),
            });
            cur = w.next;
        }
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
    // SAFETY: ibv_srq is pointers, integers and pthread objects (set
    // below); zero is valid.
    let mut raw: ibv_srq = unsafe { std::mem::zeroed() };
    raw.context = p.pd.context;
    raw.srq_context = ia.srq_context;
    raw.pd = pd;
    raw.mutex = libc::PTHREAD_MUTEX_INITIALIZER;
    raw.cond = libc::PTHREAD_COND_INITIALIZER;
    Box::into_raw(Box::new(ShimSrq {
        srq: raw,
        pool: Arc::new(SrqPool {
            max_wr: ia.attr.max_wr,
            max_sge: ia.attr.max_sge,
            state: Mutex::new((VecDeque::new(), Vec::new())),
        }),
        limit: Mutex::new(ia.attr.srq_limit),
    }))
    .cast()
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
        *lock(&s.limit) = unsafe { (*attr).srq_limit };
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
            srq_limit: *lock(&s.limit),
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
    if !lock(&s.pool.state).1.is_empty() {
        return libc::EBUSY;
    }
    // SAFETY: allocated by ibv_create_srq; no QP uses it.
    drop(unsafe { Box::from_raw(srq.cast::<ShimSrq>()) });
    0
}
