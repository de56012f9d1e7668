//! The records behind the C objects the verb files share: the opened
//! device, PD, CQ, QP, AH and SRQ.
//!
//! Each record puts the `verbs.h` struct first (`#[repr(C)]`), so the
//! pointer handed to the program is also a pointer to the record, and keeps
//! the backend handle and what the verbs need of the opened device. The
//! verb files (`context`, `objects`, `post`) create, read and free these
//! records; this file uses none of their items. Records only one verb file
//! touches (device list entry, MR, completion channel) stay in that file.

use std::mem::offset_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::raw::c_int;
use std::sync::{Arc, Mutex};

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::{AhHandle, Backend, CqHandle, PdHandle, QpHandle};

use crate::srq_pool::SrqPool;

/// Borrow the record behind a C object pointer.
///
/// # Safety
///
/// `p` is null or points at a live `T` this library created, whose first
/// field is the C struct `p` was typed as.
pub(crate) unsafe fn rec<'a, T, C>(p: *mut C) -> Option<&'a T> {
    // SAFETY: the caller's contract.
    (!p.is_null()).then(|| unsafe { &*p.cast::<T>() })
}

/// An open device: `verbs_context` (which ends with the `ibv_context` the
/// program sees) first.
#[repr(C)]
pub(crate) struct ShimContext {
    pub vctx: verbs_context,
    pub backend: Arc<dyn Backend>,
    pub local: SocketAddrV4,
    pub guid: u64,
    /// The write end of the asynchronous event pipe (`async_fd` reads it).
    pub async_wfd: c_int,
}

impl ShimContext {
    /// The record behind a context pointer this library handed out.
    ///
    /// # Safety
    ///
    /// `ctx` is null or was returned by `ibv_open_device` and not closed.
    pub unsafe fn from_ptr<'a>(ctx: *mut ibv_context) -> Option<&'a ShimContext> {
        if ctx.is_null() {
            return None;
        }
        let off = offset_of!(verbs_context, context);
        // SAFETY: ctx is the `context` field of a ShimContext's vctx, which
        // is the record's first field (repr(C)).
        Some(unsafe { &*(ctx.cast::<u8>().sub(off).cast::<ShimContext>()) })
    }
}

/// A protection domain.
#[repr(C)]
pub(crate) struct ShimPd {
    pub pd: ibv_pd,
    pub handle: PdHandle,
    pub backend: Arc<dyn Backend>,
    pub local: Ipv4Addr,
}

/// A completion queue.
#[repr(C)]
pub(crate) struct ShimCq {
    pub cq: ibv_cq,
    /// The rest of `ibv_cq_ex` (so `cq` plus this is an `ibv_cq_ex`):
    /// filled by `ibv_create_cq_ex`, zero for a plain CQ.
    pub ex: ibv_cq_ex_ops,
    pub handle: CqHandle,
    pub backend: Arc<dyn Backend>,
    /// The SRQs of QPs receiving into this CQ (their receive completions
    /// return lent WRs).
    pub srqs: Mutex<Vec<Arc<SrqPool>>>,
}

/// A queue pair.
#[repr(C)]
pub(crate) struct ShimQp {
    pub qp: ibv_qp,
    /// The rest of `ibv_qp_ex` (so `qp` plus this is an `ibv_qp_ex`):
    /// filled by `ibv_create_qp_ex` with send ops, zero otherwise.
    pub ex: ibv_qp_ex_ops,
    pub handle: QpHandle,
    pub backend: Arc<dyn Backend>,
    pub local: Ipv4Addr,
    pub init_cap: ibv_qp_cap,
    pub sq_sig_all: c_int,
    /// Every attribute applied so far (`ibv_query_qp`).
    pub attr: Mutex<ibv_qp_attr>,
    /// The SRQ the QP receives from, if any.
    pub srq: Option<Arc<SrqPool>>,
}

/// An address handle.
#[repr(C)]
pub(crate) struct ShimAh {
    pub ah: ibv_ah,
    pub handle: AhHandle,
    pub backend: Arc<dyn Backend>,
}

/// A shared receive queue.
#[repr(C)]
pub(crate) struct ShimSrq {
    pub srq: ibv_srq,
    /// Its WRs and its armed limit.
    pub pool: Arc<SrqPool>,
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
