//! Device memory: `ibv_alloc_dm` and `ibv_free_dm` (the `verbs_context`
//! slots `alloc_dm` and `free_dm`), the `memcpy_to_dm` / `memcpy_from_dm`
//! functions of `struct ibv_dm` that the inline `ibv_memcpy_to_dm` and
//! `ibv_memcpy_from_dm` call, and `ibv_reg_dm_mr` (the `reg_dm_mr` slot).
//!
//! The memory is the backend's own ([`Backend::alloc_dm`]): its
//! `max_dm_size` bytes, allocated, copied and registered there, never in
//! the program's address space, as a NIC's on-chip memory is not. Copies
//! follow the rules rdma-core's ConnectX provider applies, which the
//! suite holds a device to: a range past the allocation is `EFAULT`, and
//! an offset or length that is not a multiple of 4 bytes is `EINVAL`. A
//! region over device memory is zero-based (`IBV_ACCESS_ZERO_BASED` is
//! required, as rdma-core requires it): its `addr` is NULL and local SGEs
//! and remote peers both address it by offset; `ibv_dereg_mr` releases it.

use std::os::raw::{c_int, c_uint, c_void};
use std::ptr;
use std::sync::Arc;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::{Backend, DmHandle};
use verbs_emu::verbs::AccessFlags;

use crate::objects::ShimMr;
use crate::records::{rec, ShimContext, ShimPd};
use crate::{fail, set_errno};

/// An allocation of device memory: the C struct first.
#[repr(C)]
pub(crate) struct ShimDm {
    pub dm: ibv_dm,
    pub handle: DmHandle,
    pub backend: Arc<dyn Backend>,
    /// The length the program asked for: every access stays inside it.
    pub length: u64,
}

/// Device memory is reached in 4-byte words (the ConnectX rule rdma-core's
/// provider enforces and the suite checks).
const WORD: u64 = 4;

/// `verbs_context.alloc_dm`: `attr.length` bytes of the device's memory,
/// aligned to `2^attr.log_align_req` in the device's address space.
/// `EINVAL` for a non-zero `comp_mask` or a length above `max_dm_size`,
/// `ENOMEM` when the device memory is full.
pub(crate) unsafe extern "C" fn alloc_dm(
    ctx: *mut ibv_context,
    attr: *mut ibv_alloc_dm_attr,
) -> *mut ibv_dm {
    // SAFETY: objects only ever carry contexts this library opened.
    let Some(c) = (unsafe { ShimContext::from_ptr(ctx) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    if attr.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: the caller's input struct.
    let a = unsafe { *attr };
    if a.comp_mask != 0 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    if c.backend.dm_size() == 0 {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    let handle = match c.backend.alloc_dm(a.length as u64, a.log_align_req) {
        Ok(h) => h,
        Err(e) => {
            set_errno(fail(&e));
            return ptr::null_mut();
        }
    };
    let b = Box::new(ShimDm {
        dm: ibv_dm {
            context: ctx,
            memcpy_to_dm: Some(memcpy_to_dm),
            memcpy_from_dm: Some(memcpy_from_dm),
            comp_mask: IBV_DM_MASK_HANDLE,
            handle: handle.0 as u32,
        },
        handle,
        backend: c.backend.clone(),
        length: a.length as u64,
    });
    Box::into_raw(b).cast()
}

/// `verbs_context.free_dm`: `EBUSY` while memory regions cover it.
pub(crate) unsafe extern "C" fn free_dm(dm: *mut ibv_dm) -> c_int {
    // SAFETY: the verb's contract: a DM of ours, or null.
    let Some(d) = (unsafe { rec::<ShimDm, _>(dm) }) else {
        return libc::EINVAL;
    };
    if let Err(e) = d.backend.free_dm(d.handle) {
        return fail(&e);
    }
    // SAFETY: allocated by alloc_dm; the backend released it.
    drop(unsafe { Box::from_raw(dm.cast::<ShimDm>()) });
    0
}

/// The errno of an access of `length` bytes at `offset` of `d`: `EFAULT`
/// past the allocation, then `EINVAL` off the 4-byte grid, as rdma-core's
/// ConnectX provider checks.
fn check_access(d: &ShimDm, offset: u64, length: usize) -> Result<(), c_int> {
    let length = length as u64;
    match offset.checked_add(length) {
        Some(end) if end <= d.length => {}
        _ => return Err(libc::EFAULT),
    }
    if offset % WORD != 0 || length % WORD != 0 {
        return Err(libc::EINVAL);
    }
    Ok(())
}

/// The checks both copies make, in rdma-core's order: the DM (`EINVAL`),
/// the range ([`check_access`]), then, for a non-empty copy, the host
/// pointer (`EFAULT`). `None` for an empty copy, which does nothing.
///
/// # Safety
///
/// `dm` is null or a DM this library allocated and has not freed.
unsafe fn copy_target<'a>(
    dm: *mut ibv_dm,
    offset: u64,
    length: usize,
    host_null: bool,
) -> Result<Option<&'a ShimDm>, c_int> {
    // SAFETY: the caller's contract.
    let d = unsafe { rec::<ShimDm, _>(dm) }.ok_or(libc::EINVAL)?;
    check_access(d, offset, length)?;
    if length == 0 {
        return Ok(None);
    }
    if host_null {
        return Err(libc::EFAULT);
    }
    Ok(Some(d))
}

/// `ibv_dm.memcpy_to_dm`: copy `length` bytes from `host` to the device
/// memory at `offset`; 0 or an errno.
unsafe extern "C" fn memcpy_to_dm(
    dm: *mut ibv_dm,
    offset: u64,
    host: *const c_void,
    length: usize,
) -> c_int {
    // SAFETY: the inline verb passes the DM it was called with.
    let d = match unsafe { copy_target(dm, offset, length, host.is_null()) } {
        Ok(Some(d)) => d,
        Ok(None) => return 0,
        Err(e) => return e,
    };
    // SAFETY: the caller promises `length` readable bytes at `host`
    // (ibv_memcpy_to_dm's contract); they are host memory, not the
    // device's, so the slice aliases nothing the backend writes.
    let data = unsafe { std::slice::from_raw_parts(host.cast::<u8>(), length) };
    match d.backend.memcpy_to_dm(d.handle, offset, data) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

/// `ibv_dm.memcpy_from_dm`: copy `length` bytes of the device memory at
/// `offset` to `host`; 0 or an errno.
unsafe extern "C" fn memcpy_from_dm(
    host: *mut c_void,
    dm: *mut ibv_dm,
    offset: u64,
    length: usize,
) -> c_int {
    // SAFETY: as in memcpy_to_dm.
    let d = match unsafe { copy_target(dm, offset, length, host.is_null()) } {
        Ok(Some(d)) => d,
        Ok(None) => return 0,
        Err(e) => return e,
    };
    // SAFETY: the caller promises `length` writable bytes at `host`
    // (ibv_memcpy_from_dm's contract), which it does not touch during the
    // call.
    let out = unsafe { std::slice::from_raw_parts_mut(host.cast::<u8>(), length) };
    match d.backend.memcpy_from_dm(d.handle, offset, out) {
        Ok(()) => 0,
        Err(e) => fail(&e),
    }
}

/// `verbs_context.reg_dm_mr`: `length` bytes of `dm` from `offset` as a
/// zero-based region of `pd` (a protection or parent domain). `EINVAL`
/// without `IBV_ACCESS_ZERO_BASED`, for a range past the allocation, or a
/// DM of another device.
pub(crate) unsafe extern "C" fn reg_dm_mr(
    pd: *mut ibv_pd,
    dm: *mut ibv_dm,
    offset: u64,
    length: usize,
    access: c_uint,
) -> *mut ibv_mr {
    // SAFETY: the verb's contract: a PD and a DM of ours, or null.
    let (Some(p), Some(d)) = (unsafe { (rec::<ShimPd, _>(pd), rec::<ShimDm, _>(dm)) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // rdma-core refuses this before asking the device: the DM's address is
    // hidden from the program, so only offsets can name it.
    if access & IBV_ACCESS_ZERO_BASED == 0 || !Arc::ptr_eq(&p.backend, &d.backend) {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let flags = AccessFlags(access & !IBV_ACCESS_OPTIONAL_RANGE);
    match p
        .backend
        .reg_dm_mr(p.handle, d.handle, offset, length as u64, flags)
    {
        Ok(keys) => {
            let b = Box::new(ShimMr {
                mr: ibv_mr {
                    context: p.pd.context,
                    pd,
                    // rdma-core's: a DM region has no host address.
                    addr: ptr::null_mut(),
                    length,
                    handle: keys.handle.0 as u32,
                    lkey: keys.lkey.value(),
                    rkey: keys.rkey.value(),
                },
                handle: keys.handle,
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

/// Fill the device-memory slots of a new context.
pub(crate) fn install(vctx: &mut verbs_context) {
    // SAFETY: the slot's C type is `alloc_dm_fn`; `unused_fn` only stands
    // in for it in the mirror, and the inline `ibv_alloc_dm` calls it with
    // that type.
    vctx.alloc_dm =
        Some(unsafe { std::mem::transmute::<alloc_dm_fn, unsafe extern "C" fn()>(alloc_dm) });
    // SAFETY: as above, for `free_dm_fn` and the inline `ibv_free_dm`.
    vctx.free_dm =
        Some(unsafe { std::mem::transmute::<free_dm_fn, unsafe extern "C" fn()>(free_dm) });
    // SAFETY: as above, for `reg_dm_mr_fn` and the inline `ibv_reg_dm_mr`.
    vctx.reg_dm_mr =
        Some(unsafe { std::mem::transmute::<reg_dm_mr_fn, unsafe extern "C" fn()>(reg_dm_mr) });
}
