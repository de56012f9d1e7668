//! Memory windows: `ibv_alloc_mw`, `ibv_dealloc_mw` and `ibv_bind_mw`
//! (the `ibv_context_ops` slots that `verbs.h`'s inline verbs call), and
//! the window work requests of `ibv_post_send` and the `ibv_wr_*` API
//! (`IBV_WR_BIND_MW`, `IBV_WR_LOCAL_INV`).
//!
//! A window is the backend's (`Backend::alloc_mw`): an R_Key naming a
//! sub-range of a region with rights of its own, checked by the engine's
//! region table (`roce::transport::memory`). The `ibv_mw` the program
//! holds is the first field of our record. A type 1 window is bound by
//! `ibv_bind_mw`, which posts the bind on the QP under the next key
//! (`ibv_inc_rkey`) and, once posted, stores that key in `mw->rkey` as
//! rdma-core's providers do; a type 2 window is bound by a send work
//! request carrying the key the program chose (which must keep the
//! window's upper 24 bits), and `mw->rkey` is left alone. Either bind
//! completes in order on the send CQ (`IBV_WC_BIND_MW`), or with
//! `IBV_WC_MW_BIND_ERR` when the device refuses it (a region without
//! `IBV_ACCESS_MW_BIND`, a range outside it, rights it cannot back).
//! Malformed calls (a null or foreign object, a window of the wrong type
//! for the call, a key naming another window) are refused at once with
//! `EINVAL`, nothing posted.

use std::os::raw::{c_int, c_uint};
use std::ptr;
use std::sync::Arc;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::Backend;
use verbs_emu::verbs::{AccessFlags, SendFlags, SendOp, SendWr};
use verbs_emu::wire::{Lkey, Rkey};

use crate::objects::ShimMr;
use crate::records::{rec, ShimPd, ShimQp};
use crate::{fail, set_errno};

/// `IBV_WR_LOCAL_INV` (`enum ibv_wr_opcode`).
pub(crate) const IBV_WR_LOCAL_INV: u32 = 7;
/// `IBV_WR_BIND_MW`.
pub(crate) const IBV_WR_BIND_MW: u32 = 8;
/// `IBV_MW_TYPE_1` (`enum ibv_mw_type`).
const IBV_MW_TYPE_1: u32 = 1;
/// `IBV_MW_TYPE_2`.
const IBV_MW_TYPE_2: u32 = 2;
/// `IBV_DEVICE_MEM_WINDOW` (`enum ibv_device_cap_flags`).
const IBV_DEVICE_MEM_WINDOW: u32 = 1 << 17;
/// `IBV_DEVICE_MEM_WINDOW_TYPE_2B`: type 2 windows are tied to a QP and
/// its protection domain (IBA 10.6.7.2.2), which the engine checks.
const IBV_DEVICE_MEM_WINDOW_TYPE_2B: u32 = 1 << 24;

/// The `device_cap_flags` of memory windows (types 1 and 2B).
pub(crate) const CAP_FLAGS: u32 = IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B;
/// `max_mw`: what `ibv_query_device` reports (the table holds more).
pub(crate) const MAX_MW: c_int = 1 << 16;

/// `struct ibv_mw`.
#[repr(C)]
struct MwFields {
    context: *mut ibv_context,
    pd: *mut ibv_pd,
    rkey: u32,
    handle: u32,
    /// `enum ibv_mw_type`.
    mw_type: u32,
}

/// A memory window: the C struct first.
#[repr(C)]
struct ShimMw {
    mw: MwFields,
    backend: Arc<dyn Backend>,
}

/// `struct ibv_mw_bind`: `ibv_bind_mw`'s argument.
#[repr(C)]
pub(crate) struct IbvMwBind {
    wr_id: u64,
    send_flags: c_uint,
    bind_info: ibv_mw_bind_info,
}

/// The C type of the `alloc_mw` slot.
pub(crate) type AllocMwFn = unsafe extern "C" fn(*mut ibv_pd, c_uint) -> *mut ibv_mw;
/// The C type of the `dealloc_mw` slot.
pub(crate) type DeallocMwFn = unsafe extern "C" fn(*mut ibv_mw) -> c_int;
/// The C type of the `bind_mw` slot.
pub(crate) type BindMwFn = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_mw, *mut IbvMwBind) -> c_int;

/// `ibv_inc_rkey`: the same window, the next 8-bit tag.
pub(crate) const fn inc_rkey(rkey: u32) -> u32 {
    (rkey & 0xFFFF_FF00) | (rkey.wrapping_add(1) & 0xFF)
}

/// Fill the window slots of a new context's function table.
pub(crate) fn install(ops: &mut ibv_context_ops) {
    // SAFETY (all three): each slot's C type is the one named by the
    // transmuted fn type (verbs.h's `ibv_context_ops`); `unused_fn` only
    // stands in for it in the mirror, and the inline verbs call the slots
    // with exactly those arguments.
    ops.alloc_mw =
        Some(unsafe { std::mem::transmute::<AllocMwFn, unsafe extern "C" fn()>(alloc_mw) });
    ops.dealloc_mw =
        Some(unsafe { std::mem::transmute::<DeallocMwFn, unsafe extern "C" fn()>(dealloc_mw) });
    ops.bind_mw = Some(unsafe { std::mem::transmute::<BindMwFn, unsafe extern "C" fn()>(bind_mw) });
}

/// `ibv_context_ops.alloc_mw`.
unsafe extern "C" fn alloc_mw(pd: *mut ibv_pd, mw_type: c_uint) -> *mut ibv_mw {
    // SAFETY: the export contract: a PD of ours, or null.
    let Some(p) = (unsafe { rec::<ShimPd, _>(pd) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    match p.backend.alloc_mw(p.handle, mw_type) {
        Ok(rkey) => {
            let b = Box::new(ShimMw {
                mw: MwFields {
                    context: p.pd.context,
                    pd,
                    rkey,
                    handle: rkey >> 8,
                    mw_type,
                },
                backend: p.backend.clone(),
            });
            Box::into_raw(b).cast()
        }
        Err(e) => {
            set_errno(fail(&e));
            ptr::null_mut()
        }
    }
}

/// `ibv_context_ops.dealloc_mw`.
unsafe extern "C" fn dealloc_mw(mw: *mut ibv_mw) -> c_int {
    // SAFETY: the export contract: a window of ours, or null.
    let Some(m) = (unsafe { rec::<ShimMw, _>(mw) }) else {
        return libc::EINVAL;
    };
    if let Err(e) = m.backend.dealloc_mw(m.mw.rkey) {
        return fail(&e);
    }
    // SAFETY: `mw` came from Box::into_raw in alloc_mw, and the program
    // gives it up here.
    drop(unsafe { Box::from_raw(mw.cast::<ShimMw>()) });
    0
}

/// The bind of `m` under `rkey` that `info` describes.
///
/// # Safety
///
/// `info.mr` is null or a live MR of ours.
unsafe fn bind_op(m: &ShimMw, rkey: u32, info: &ibv_mw_bind_info) -> Result<SendOp, c_int> {
    if rkey >> 8 != m.mw.rkey >> 8 {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    let lkey = match unsafe { rec::<ShimMr, _>(info.mr) } {
        Some(mr) if Arc::ptr_eq(&mr.backend, &m.backend) => mr.mr.lkey,
        Some(_) => return Err(libc::EINVAL),
        None if info.length != 0 || info.addr != 0 => return Err(libc::EINVAL),
        None => 0,
    };
    Ok(SendOp::BindMw {
        rkey: Rkey::new(rkey),
        lkey: Lkey::new(lkey),
        addr: info.addr,
        len: info.length,
        access: AccessFlags(info.mw_access_flags),
    })
}

/// `ibv_context_ops.bind_mw`: bind a type 1 window through `qp`.
unsafe extern "C" fn bind_mw(qp: *mut ibv_qp, mw: *mut ibv_mw, mw_bind: *mut IbvMwBind) -> c_int {
    // SAFETY: the export contract: a QP and a window of ours, or null.
    let (Some(q), Some(m)) = (unsafe { rec::<ShimQp, _>(qp) }, unsafe {
        rec::<ShimMw, _>(mw)
    }) else {
        return libc::EINVAL;
    };
    if mw_bind.is_null() || m.mw.mw_type != IBV_MW_TYPE_1 {
        return libc::EINVAL;
    }
    // SAFETY: the program's bind description, valid for this call.
    let b = unsafe { &*mw_bind };
    let rkey = inc_rkey(m.mw.rkey);
    // SAFETY: the MR in the bind is null or one of ours (the contract).
    let op = match unsafe { bind_op(m, rkey, &b.bind_info) } {
        Ok(op) => op,
        Err(e) => return e,
    };
    let wr = SendWr {
        wr_id: b.wr_id,
        sg_list: &[],
        op,
        flags: SendFlags(b.send_flags),
        ud: None,
    };
    // SAFETY: a bind carries no SGEs: no memory of the program is named.
    if let Err(e) = unsafe { q.backend.post_send(q.handle, &[wr]) } {
        return fail(&e.error);
    }
    // SAFETY: the program's window, which it does not use concurrently
    // with this call; rdma-core's providers update the same field.
    unsafe { (*mw.cast::<MwFields>()).rkey = rkey };
    0
}

/// The operation of an `IBV_WR_BIND_MW` or `IBV_WR_LOCAL_INV` send work
/// request: `None` for other opcodes, `Some(Err(errno))` for a malformed
/// one (a bind of a window that is not ours or not of type 2, or under a
/// key naming another window).
///
/// # Safety
///
/// `w` is a valid `ibv_send_wr` whose bind view, for a bind, names a
/// window and an MR of ours (or null).
pub(crate) unsafe fn local_op(w: &ibv_send_wr) -> Option<Result<SendOp, c_int>> {
    match w.opcode {
        // `invalidate_rkey` shares the union with `imm_data`.
        IBV_WR_LOCAL_INV => Some(Ok(SendOp::LocalInv(Rkey::new(w.imm_data)))),
        IBV_WR_BIND_MW => {
            // SAFETY: a bind WR carries the `bind_mw` view of the union.
            let b = unsafe { w.ext.bind_mw };
            // SAFETY: the caller's contract.
            Some(unsafe { bind_type2(b.mw, b.rkey, &b.bind_info) })
        }
        _ => None,
    }
}

/// The bind of the type 2 window `mw` under `rkey` (`IBV_WR_BIND_MW`,
/// `ibv_wr_bind_mw`).
///
/// # Safety
///
/// `mw` is null or a window of ours; `info.mr` null or an MR of ours.
pub(crate) unsafe fn bind_type2(
    mw: *mut ibv_mw,
    rkey: u32,
    info: &ibv_mw_bind_info,
) -> Result<SendOp, c_int> {
    // SAFETY: the caller's contract.
    let Some(m) = (unsafe { rec::<ShimMw, _>(mw) }) else {
        return Err(libc::EINVAL);
    };
    if m.mw.mw_type != IBV_MW_TYPE_2 {
        return Err(libc::EINVAL);
    }
    // SAFETY: the caller's contract.
    unsafe { bind_op(m, rkey, info) }
}
