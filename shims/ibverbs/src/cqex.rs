//! Extended CQs: `ibv_create_cq_ex` (the `verbs_context.create_cq_ex`
//! slot) and the `ibv_start_poll` / `ibv_next_poll` / `ibv_end_poll` API
//! with its `ibv_wc_read_*` readers.
//!
//! An extended CQ is a plain CQ of ours whose record continues with the
//! `ibv_cq_ex` fields (`ShimCq::ex`); `ibv_cq_ex_to_cq` is the same
//! pointer. `start_poll` and `next_poll` take one completion through the
//! ordinary `poll_cq` (so SRQ bookkeeping is the same), put its `status`
//! and `wr_id` in the `ibv_cq_ex` and keep the rest for the readers until
//! the next poll; an empty CQ answers `ENOENT`. Completion fields the
//! device cannot give (timestamps, CVLAN, flow tag, tag matching) are
//! refused when the CQ is created (`EOPNOTSUPP`), so a reader is never
//! asked for a value that does not exist.

use std::collections::HashMap;
use std::os::raw::{c_int, c_uint};
use std::ptr;
use std::sync::Mutex;

use verbs_emu::backend::ibverbs::ffi::*;

use crate::objects::ibv_create_cq;
use crate::post::poll_cq;
use crate::{lock, set_errno};

/// The completion each extended CQ last polled, by CQ address (from a
/// successful `start_poll` to `end_poll`).
static CURRENT: Mutex<Option<HashMap<usize, ibv_wc>>> = Mutex::new(None);

/// The current completion of `cq` (zeroes outside a poll: the readers
/// are only defined inside one).
fn current(cq: *mut ibv_cq_ex) -> ibv_wc {
    lock(&CURRENT)
        .as_ref()
        .and_then(|m| m.get(&(cq as usize)).copied())
        .unwrap_or_default()
}

/// Poll one completion into `cq`'s current one: 0, `ENOENT` when empty,
/// or the errno of a failed poll.
///
/// # Safety
///
/// `cq` is an extended CQ of ours.
unsafe fn poll_one(cq: *mut ibv_cq_ex) -> c_int {
    let mut wc = ibv_wc::default();
    // SAFETY: an ibv_cq_ex of ours begins with its ibv_cq; one entry.
    let n = unsafe { poll_cq(cq.cast(), 1, &mut wc) };
    if n < 0 {
        return -n;
    }
    if n == 0 {
        return libc::ENOENT;
    }
    // SAFETY: the caller's contract; `status` and `wr_id` are the fields
    // the program reads directly after the call.
    unsafe {
        (*cq).ops.status = wc.status;
        (*cq).ops.wr_id = wc.wr_id;
    }
    lock(&CURRENT)
        .get_or_insert_with(HashMap::new)
        .insert(cq as usize, wc);
    0
}

unsafe extern "C" fn start_poll(cq: *mut ibv_cq_ex, attr: *mut ibv_poll_cq_attr) -> c_int {
    // SAFETY: the program's attribute struct, or null.
    if !attr.is_null() && unsafe { (*attr).comp_mask } != 0 {
        return libc::EINVAL;
    }
    // SAFETY: only extended CQs of ours point here.
    unsafe { poll_one(cq) }
}

unsafe extern "C" fn next_poll(cq: *mut ibv_cq_ex) -> c_int {
    // SAFETY: as above.
    unsafe { poll_one(cq) }
}

unsafe extern "C" fn end_poll(cq: *mut ibv_cq_ex) {
    if let Some(m) = lock(&CURRENT).as_mut() {
        m.remove(&(cq as usize));
    }
}

unsafe extern "C" fn read_opcode(cq: *mut ibv_cq_ex) -> u32 {
    current(cq).opcode
}

unsafe extern "C" fn read_vendor_err(cq: *mut ibv_cq_ex) -> u32 {
    current(cq).vendor_err
}

unsafe extern "C" fn read_byte_len(cq: *mut ibv_cq_ex) -> u32 {
    current(cq).byte_len
}

/// Big-endian, as `ibv_wc.imm_data`.
unsafe extern "C" fn read_imm_data(cq: *mut ibv_cq_ex) -> u32 {
    current(cq).imm_data
}

unsafe extern "C" fn read_qp_num(cq: *mut ibv_cq_ex) -> u32 {
    current(cq).qp_num
}

unsafe extern "C" fn read_src_qp(cq: *mut ibv_cq_ex) -> u32 {
    current(cq).src_qp
}

unsafe extern "C" fn read_wc_flags(cq: *mut ibv_cq_ex) -> c_uint {
    current(cq).wc_flags
}

unsafe extern "C" fn read_slid(cq: *mut ibv_cq_ex) -> u32 {
    u32::from(current(cq).slid)
}

unsafe extern "C" fn read_sl(cq: *mut ibv_cq_ex) -> u8 {
    current(cq).sl
}

unsafe extern "C" fn read_dlid_path_bits(cq: *mut ibv_cq_ex) -> u8 {
    current(cq).dlid_path_bits
}

/// The function table of an extended CQ.
fn ops() -> ibv_cq_ex_ops {
    ibv_cq_ex_ops {
        start_poll: Some(start_poll),
        next_poll: Some(next_poll),
        end_poll: Some(end_poll),
        read_opcode: Some(read_opcode),
        read_vendor_err: Some(read_vendor_err),
        read_byte_len: Some(read_byte_len),
        read_imm_data: Some(read_imm_data),
        read_qp_num: Some(read_qp_num),
        read_src_qp: Some(read_src_qp),
        read_wc_flags: Some(read_wc_flags),
        read_slid: Some(read_slid),
        read_sl: Some(read_sl),
        read_dlid_path_bits: Some(read_dlid_path_bits),
        ..Default::default()
    }
}

/// `verbs_context.create_cq_ex`: a CQ from extended attributes. The
/// standard completion fields (`IBV_WC_STANDARD_FLAGS`) and the single
/// threaded / ignore overrun hints are understood, and a parent domain
/// (`IBV_CQ_INIT_ATTR_MASK_PD`: it must be a parent domain of this
/// context, else `EINVAL`, and its allocator gives the CQ's buffer); any
/// other field is `EOPNOTSUPP`. Size and completion vector are checked as
/// `ibv_create_cq` checks them (`EINVAL`).
pub(crate) unsafe extern "C" fn create_cq_ex(
    ctx: *mut ibv_context,
    attr: *mut ibv_cq_init_attr_ex,
) -> *mut ibv_cq_ex {
    if attr.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: the caller's input struct.
    let a = unsafe { &*attr };
    let hints = IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN;
    let flags = if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS != 0 {
        a.flags
    } else {
        0
    };
    if a.comp_mask & !(IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD) != 0
        || flags & !hints != 0
        || a.wc_flags & !IBV_WC_STANDARD_FLAGS != 0
    {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    let (Ok(cqe), Ok(vector)) = (c_int::try_from(a.cqe), c_int::try_from(a.comp_vector)) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    let qbuf = if a.comp_mask & IBV_CQ_INIT_ATTR_MASK_PD != 0 {
        match crate::domain::parent_of(a.parent_domain) {
            Some(d) if d.base.pd.context == ctx => {}
            _ => {
                set_errno(libc::EINVAL);
                return ptr::null_mut();
            }
        }
        let size = crate::domain::cq_buffer_size(a.cqe as usize);
        match crate::domain::queue_buffer(a.parent_domain, crate::domain::RES_TYPE_CQ, size) {
            Ok(b) => b,
            Err(e) => {
                set_errno(e);
                return ptr::null_mut();
            }
        }
    } else {
        None
    };
    // SAFETY: the program's context and channel, checked there.
    let cq = unsafe { ibv_create_cq(ctx, cqe, a.cq_context, a.channel, vector) };
    if cq.is_null() {
        // Any buffer goes back to the allocator here, keeping the errno.
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        drop(qbuf);
        set_errno(errno);
        return ptr::null_mut();
    }
    crate::domain::keep(cq as usize, qbuf);
    let cx = cq.cast::<ibv_cq_ex>();
    // SAFETY: a CQ record of ours, just created and not yet shared:
    // `ShimCq` holds `ibv_cq` then `ibv_cq_ex_ops`, the layout of
    // `ibv_cq_ex`.
    unsafe { (*cx).ops = ops() };
    cx
}
