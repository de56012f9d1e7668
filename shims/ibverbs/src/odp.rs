//! On-demand paging at the C boundary: the `odp_caps` that
//! `ibv_query_device_ex` reports, and `verbs_context.advise_mr`, what the
//! inline `ibv_advise_mr` calls.
//!
//! Registration needs nothing of its own here: `ibv_reg_mr` (and
//! `ibv_reg_mr_iova2`, which rdma-core's `ibv_reg_mr` macro calls when
//! the access flags are not a constant) hands `IBV_ACCESS_ON_DEMAND` to the
//! device, and the implicit region (`NULL`, `SIZE_MAX`) with it.

use std::os::raw::c_int;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::{Backend, MrAdvice};
use verbs_emu::verbs::Sge;
use verbs_emu::wire::Lkey;

use crate::errno_of;
use crate::records::{rec, ShimPd};

/// `IBV_ADVISE_MR_FLAG_FLUSH` (`enum ibv_advise_mr_flags`): return only
/// when the advice has been acted on.
const FLAG_FLUSH: u32 = 1 << 0;

/// The C type of `verbs_context.advise_mr`.
pub(crate) type AdviseMrFn =
    unsafe extern "C" fn(*mut ibv_pd, u32, u32, *mut ibv_sge, u32) -> c_int;

/// The `odp_caps` of `ibv_query_device_ex`: what the device says it
/// serves.
pub(crate) fn odp_caps(backend: &dyn Backend) -> ibv_odp_caps {
    let c = backend.odp_caps();
    ibv_odp_caps {
        general_caps: c.general_caps,
        per_transport_caps: [c.rc, c.uc, c.ud],
    }
}

/// `verbs_context.advise_mr`: `ibv_advise_mr(pd, advice, flags, sg_list,
/// num_sge)`. Answers 0 or an errno, as the kernel's verbs do: `EINVAL`
/// for flags other than `IBV_ADVISE_MR_FLAG_FLUSH` or an empty list,
/// `EOPNOTSUPP` for an advice rdma-core does not define, and the device's
/// answers for the SGEs (`ENOENT`/`EINVAL` for a key that names no
/// on-demand region of `pd`, `EFAULT` for a range outside it).
pub(crate) unsafe extern "C" fn advise_mr(
    pd: *mut ibv_pd,
    advice: u32,
    flags: u32,
    sg_list: *mut ibv_sge,
    num_sge: u32,
) -> c_int {
    // SAFETY: the export contract: a PD this library allocated.
    let Some(p) = (unsafe { rec::<ShimPd, _>(pd) }) else {
        return libc::EINVAL;
    };
    if flags & !FLAG_FLUSH != 0 || num_sge == 0 || sg_list.is_null() {
        return libc::EINVAL;
    }
    let Some(advice) = MrAdvice::from_raw(advice) else {
        return libc::EOPNOTSUPP;
    };
    // SAFETY: the caller's array of `num_sge` SGEs.
    let raw = unsafe { std::slice::from_raw_parts(sg_list, num_sge as usize) };
    let sges: Vec<Sge> = raw
        .iter()
        .map(|s| Sge {
            addr: s.addr,
            length: s.length,
            lkey: Lkey::new(s.lkey),
        })
        .collect();
    match p
        .backend
        .advise_mr(p.handle, advice, flags & FLAG_FLUSH != 0, &sges)
    {
        Ok(()) => 0,
        Err(e) => errno_of(&e),
    }
}
