//! Changing a registered region: `ibv_rereg_mr`.
//!
//! The region changes in place in the device's region table, keeping its
//! keys (as a NIC's re-registration does): a new address range
//! (`IBV_REREG_MR_CHANGE_TRANSLATION`), protection domain
//! (`IBV_REREG_MR_CHANGE_PD`) or rights (`IBV_REREG_MR_CHANGE_ACCESS`).
//! Work posted earlier with the old range or against the old PD then
//! fails its protection checks, as on hardware. A refused call leaves the
//! region as it was and answers `IBV_REREG_MR_ERR_INPUT` (-1) with
//! `errno` set, rdma-core's "old MR is valid" answer.

use std::os::raw::{c_int, c_void};
use std::sync::Arc;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::MrChange;
use verbs_emu::verbs::AccessFlags;

use crate::objects::ShimMr;
use crate::records::{rec, ShimPd};
use crate::{fail, set_errno};

/// `IBV_REREG_MR_CHANGE_TRANSLATION` (`enum ibv_rereg_mr_flags`).
const CHANGE_TRANSLATION: c_int = 1 << 0;
/// `IBV_REREG_MR_CHANGE_PD`.
const CHANGE_PD: c_int = 1 << 1;
/// `IBV_REREG_MR_CHANGE_ACCESS`.
const CHANGE_ACCESS: c_int = 1 << 2;
/// `IBV_REREG_MR_ERR_INPUT`: the old MR stays valid.
const ERR_INPUT: c_int = -1;

/// Refuse with `errno` `e`, the region unchanged.
fn refuse(e: c_int) -> c_int {
    set_errno(e);
    ERR_INPUT
}

#[no_mangle]
unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    // SAFETY: the export contract: an MR of ours, or null.
    let Some(m) = (unsafe { rec::<ShimMr, _>(mr) }) else {
        return refuse(libc::EINVAL);
    };
    let all = CHANGE_TRANSLATION | CHANGE_PD | CHANGE_ACCESS;
    if flags == 0 || flags & !all != 0 {
        return refuse(libc::EINVAL);
    }
    if access != 0 && flags & CHANGE_ACCESS == 0 {
        return refuse(libc::EINVAL);
    }
    let range = if flags & CHANGE_TRANSLATION != 0 {
        if addr.is_null() || length == 0 {
            return refuse(libc::EINVAL);
        }
        Some((addr.cast::<u8>(), length))
    } else {
        None
    };
    let new_pd = if flags & CHANGE_PD != 0 {
        // SAFETY: a PD of ours, or null.
        match unsafe { rec::<ShimPd, _>(pd) } {
            Some(p) if Arc::ptr_eq(&p.backend, &m.backend) => Some(p.handle),
            _ => return refuse(libc::EINVAL),
        }
    } else {
        None
    };
    let access = (flags & CHANGE_ACCESS != 0)
        .then_some(AccessFlags(access as u32 & !IBV_ACCESS_OPTIONAL_RANGE));
    let change = MrChange {
        range,
        pd: new_pd,
        access,
    };
    // SAFETY: the program promises a new range stays valid while
    // registered, as it does to ibv_reg_mr.
    if let Err(e) = unsafe { m.backend.rereg_mr(m.handle, change) } {
        return refuse(fail(&e));
    }
    // SAFETY: the program's MR struct, which it does not use concurrently
    // with this call (rdma-core's contract); rdma-core updates the same
    // fields.
    unsafe {
        if new_pd.is_some() {
            (*mr).pd = pd;
        }
        if range.is_some() {
            (*mr).addr = addr;
            (*mr).length = length;
        }
    }
    0
}
