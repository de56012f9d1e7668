//! Extended QPs: `ibv_create_qp_ex` (the `verbs_context.create_qp_ex`
//! slot), `ibv_qp_to_qp_ex` and the `ibv_wr_*` post API of `ibv_qp_ex`.
//!
//! A QP created with `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS` is a plain QP of
//! ours whose record continues with the `ibv_qp_ex` function table
//! (`ShimQp::ex`). Between `wr_start` and `wr_complete` the `wr_*` calls
//! build work requests in a batch of the QP's own; `wr_complete` posts the
//! whole batch through the backend as `ibv_post_send` would, and
//! `wr_abort` drops it. Inline data is copied when it is set, so the
//! program may reuse its buffer on return, as rdma-core promises. An
//! operation the device cannot do (TSO, atomic write, XRC) marks the
//! batch failed: nothing of it is posted and `wr_complete` returns
//! `EOPNOTSUPP`; a malformed memory window bind (`windows`) fails it with
//! `EINVAL`. A QP asking at
//! creation for a send op outside what the device does is refused with
//! `EOPNOTSUPP`, before anything is created.
//!
//! The program serializes `wr_start` .. `wr_complete` per QP (rdma-core's
//! contract); the batches sit behind one lock all the same, so a program
//! that does not cannot corrupt them.

use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::Mutex;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::verbs::{SendFlags, SendOp, SendWr, Sge, UdDest};
use verbs_emu::wire::{Lkey, Qpn, Rkey};

use crate::objects::ibv_create_qp;
use crate::records::{rec, ShimAh, ShimQp};
use crate::{fail, lock, set_errno};

/// The send ops the device does, per `IBV_QP_EX_WITH_*` bit.
const SUPPORTED_OPS: u64 = IBV_QP_EX_WITH_RDMA_WRITE
    | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
    | IBV_QP_EX_WITH_SEND
    | IBV_QP_EX_WITH_SEND_WITH_IMM
    | IBV_QP_EX_WITH_RDMA_READ
    | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
    | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD
    | IBV_QP_EX_WITH_ATOMIC_WRITE
    | IBV_QP_EX_WITH_SEND_WITH_INV
    | IBV_QP_EX_WITH_BIND_MW
    | IBV_QP_EX_WITH_LOCAL_INV;

/// The send ops a transport allows (IBTA 3.7.2, Table 6).
fn ops_of_type(qp_type: u32) -> u64 {
    match qp_type {
        IBV_QPT_UD => IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM,
        IBV_QPT_UC => {
            IBV_QP_EX_WITH_SEND
                | IBV_QP_EX_WITH_SEND_WITH_IMM
                | IBV_QP_EX_WITH_RDMA_WRITE
                | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
                | IBV_QP_EX_WITH_SEND_WITH_INV
                | IBV_QP_EX_WITH_BIND_MW
                | IBV_QP_EX_WITH_LOCAL_INV
        }
        _ => SUPPORTED_OPS,
    }
}

/// What a batch's work request sends from.
enum Payload {
    /// The program's registered buffers.
    Sges(Vec<Sge>),
    /// A copy of inline data, posted with `IBV_SEND_INLINE`.
    Inline(Vec<u8>),
}

/// One work request of a batch.
struct ExWr {
    wr_id: u64,
    flags: u32,
    op: SendOp,
    payload: Payload,
    ud: Option<UdDest>,
}

/// The work requests built since `wr_start`, and the first error.
#[derive(Default)]
struct Batch {
    wrs: Vec<ExWr>,
    err: c_int,
}

/// The open batches, by QP address (present from `wr_start` to
/// `wr_complete` or `wr_abort`).
static BATCHES: Mutex<Option<HashMap<usize, Batch>>> = Mutex::new(None);

/// Run `f` on the open batch of `qp`; without one (no `wr_start`), nothing
/// happens: there is nothing to post the request into.
fn with_batch(qp: *mut ibv_qp_ex, f: impl FnOnce(&mut Batch)) {
    let mut g = lock(&BATCHES);
    if let Some(b) = g.get_or_insert_with(HashMap::new).get_mut(&(qp as usize)) {
        f(b);
    }
}

/// Mark the open batch of `qp` failed with `err` (the first error wins).
fn fail_batch(qp: *mut ibv_qp_ex, err: c_int) {
    with_batch(qp, |b| {
        if b.err == 0 {
            b.err = err;
        }
    });
}

/// Start a new work request of `op` with the id and flags the program put
/// in the `ibv_qp_ex`.
///
/// # Safety
///
/// `qp` is an extended QP of ours.
unsafe fn push(qp: *mut ibv_qp_ex, op: SendOp) {
    // SAFETY: the caller's contract; the program writes these fields
    // before the call, from its own thread.
    let (wr_id, flags) = unsafe { ((*qp).ops.wr_id, (*qp).ops.wr_flags) };
    with_batch(qp, |b| {
        b.wrs.push(ExWr {
            wr_id,
            flags,
            op,
            payload: Payload::Sges(Vec::new()),
            ud: None,
        })
    });
}

/// Apply `f` to the batch's last work request; none yet is a misuse that
/// fails the batch with `EINVAL`.
fn with_last(qp: *mut ibv_qp_ex, f: impl FnOnce(&mut ExWr)) {
    with_batch(qp, |b| match b.wrs.last_mut() {
        Some(w) => f(w),
        None => {
            if b.err == 0 {
                b.err = libc::EINVAL;
            }
        }
    });
}

unsafe extern "C" fn wr_start(qp: *mut ibv_qp_ex) {
    lock(&BATCHES)
        .get_or_insert_with(HashMap::new)
        .insert(qp as usize, Batch::default());
}

unsafe extern "C" fn wr_abort(qp: *mut ibv_qp_ex) {
    if let Some(m) = lock(&BATCHES).as_mut() {
        m.remove(&(qp as usize));
    }
}

unsafe extern "C" fn wr_complete(qp: *mut ibv_qp_ex) -> c_int {
    let batch = lock(&BATCHES)
        .as_mut()
        .and_then(|m| m.remove(&(qp as usize)));
    let Some(batch) = batch else {
        return libc::EINVAL;
    };
    if batch.err != 0 {
        return batch.err;
    }
    // SAFETY: an extended QP of ours (only its table points here).
    let Some(q) = (unsafe { rec::<ShimQp, _>(qp.cast::<ibv_qp>()) }) else {
        return libc::EINVAL;
    };
    let is_ud = q.qp.qp_type == IBV_QPT_UD;
    let mut inline_sges = Vec::with_capacity(batch.wrs.len());
    for w in &batch.wrs {
        if is_ud && w.ud.is_none() {
            // A UD send needs wr_set_ud_addr.
            return libc::EINVAL;
        }
        inline_sges.push(match &w.payload {
            Payload::Inline(data) => Some(Sge {
                addr: data.as_ptr() as u64,
                length: data.len() as u32,
                lkey: Lkey::new(0),
            }),
            Payload::Sges(_) => None,
        });
    }
    let wrs: Vec<SendWr<'_>> = batch
        .wrs
        .iter()
        .zip(&inline_sges)
        .map(|(w, inl)| {
            let (sg_list, flags): (&[Sge], u32) = match (&w.payload, inl) {
                (Payload::Inline(_), Some(s)) => {
                    (std::slice::from_ref(s), w.flags | SendFlags::INLINE.bits())
                }
                (Payload::Sges(v), _) => (v.as_slice(), w.flags),
                (Payload::Inline(_), None) => (&[], w.flags),
            };
            SendWr {
                wr_id: w.wr_id,
                sg_list,
                op: w.op,
                flags: SendFlags(flags),
                ud: if is_ud { w.ud } else { None },
            }
        })
        .collect();
    // SAFETY: the SGEs name the program's registered buffers, which it
    // keeps valid until the completions, as libibverbs requires; inline
    // payloads are our copies, which the backend copies at post time.
    match unsafe { q.backend.post_send(q.handle, &wrs) } {
        Ok(()) => 0,
        Err(e) => fail(&e.error),
    }
}

unsafe extern "C" fn wr_send(qp: *mut ibv_qp_ex) {
    // SAFETY: an extended QP of ours.
    unsafe { push(qp, SendOp::Send) };
}

unsafe extern "C" fn wr_send_imm(qp: *mut ibv_qp_ex, imm_be: u32) {
    // SAFETY: as above.
    unsafe { push(qp, SendOp::SendWithImm(u32::from_be(imm_be))) };
}

unsafe extern "C" fn wr_send_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: as above.
    unsafe { push(qp, SendOp::SendWithInv(Rkey::new(rkey))) };
}

unsafe extern "C" fn wr_rdma_write(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    let op = SendOp::Write {
        remote_addr,
        rkey: Rkey::new(rkey),
    };
    // SAFETY: as above.
    unsafe { push(qp, op) };
}

unsafe extern "C" fn wr_rdma_write_imm(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64, imm: u32) {
    let op = SendOp::WriteWithImm {
        remote_addr,
        rkey: Rkey::new(rkey),
        imm: u32::from_be(imm),
    };
    // SAFETY: as above.
    unsafe { push(qp, op) };
}

unsafe extern "C" fn wr_rdma_read(qp: *mut ibv_qp_ex, rkey: u32, remote_addr: u64) {
    let op = SendOp::Read {
        remote_addr,
        rkey: Rkey::new(rkey),
    };
    // SAFETY: as above.
    unsafe { push(qp, op) };
}

unsafe extern "C" fn wr_atomic_cmp_swp(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    compare: u64,
    swap: u64,
) {
    let op = SendOp::CompareSwap {
        remote_addr,
        rkey: Rkey::new(rkey),
        compare,
        swap,
    };
    // SAFETY: as above.
    unsafe { push(qp, op) };
}

unsafe extern "C" fn wr_atomic_fetch_add(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    add: u64,
) {
    let op = SendOp::FetchAdd {
        remote_addr,
        rkey: Rkey::new(rkey),
        add,
    };
    // SAFETY: as above.
    unsafe { push(qp, op) };
}

unsafe extern "C" fn wr_bind_mw(
    qp: *mut ibv_qp_ex,
    mw: *mut ibv_mw,
    rkey: u32,
    info: *const ibv_mw_bind_info,
) {
    if info.is_null() {
        fail_batch(qp, libc::EINVAL);
        return;
    }
    // SAFETY: the program's window (type 2) and bind description, with an
    // MR of ours or null, valid for this call.
    match unsafe { crate::windows::bind_type2(mw, rkey, &*info) } {
        // SAFETY: an extended QP of ours (the slot's contract).
        Ok(op) => unsafe { push(qp, op) },
        Err(e) => fail_batch(qp, e),
    }
}

unsafe extern "C" fn wr_local_inv(qp: *mut ibv_qp_ex, rkey: u32) {
    // SAFETY: an extended QP of ours (the slot's contract).
    unsafe { push(qp, SendOp::LocalInv(Rkey::new(rkey))) };
}

unsafe extern "C" fn wr_send_tso(qp: *mut ibv_qp_ex, _hdr: *mut c_void, _sz: u16, _mss: u16) {
    fail_batch(qp, libc::EOPNOTSUPP);
}

unsafe extern "C" fn wr_set_xrc_srqn(qp: *mut ibv_qp_ex, _srqn: u32) {
    fail_batch(qp, libc::EOPNOTSUPP);
}

unsafe extern "C" fn wr_atomic_write(
    qp: *mut ibv_qp_ex,
    rkey: u32,
    remote_addr: u64,
    data: *const c_void,
) {
    if data.is_null() {
        fail_batch(qp, libc::EINVAL);
        return;
    }
    // SAFETY: `ibv_wr_atomic_write`'s contract: `data` points at the 8
    // bytes to write, read now (the program may reuse them at once).
    let bytes = unsafe { std::ptr::read_unaligned(data.cast::<[u8; 8]>()) };
    let op = SendOp::AtomicWrite {
        remote_addr,
        rkey: Rkey::new(rkey),
    };
    // SAFETY: an extended QP of ours (the slot's contract).
    unsafe { push(qp, op) };
    with_last(qp, |w| w.payload = Payload::Inline(bytes.to_vec()));
}

unsafe extern "C" fn wr_set_ud_addr(qp: *mut ibv_qp_ex, ah: *mut ibv_ah, qpn: u32, qkey: u32) {
    // SAFETY: an AH of ours, or null (the export contract).
    let Some(a) = (unsafe { rec::<ShimAh, _>(ah) }) else {
        fail_batch(qp, libc::EINVAL);
        return;
    };
    let dest = UdDest {
        ah: a.handle,
        remote_qpn: Qpn::new(qpn & 0xFF_FFFF),
        remote_qkey: qkey,
    };
    with_last(qp, |w| w.ud = Some(dest));
}

unsafe extern "C" fn wr_set_sge(qp: *mut ibv_qp_ex, lkey: u32, addr: u64, length: u32) {
    let sge = Sge {
        addr,
        length,
        lkey: Lkey::new(lkey),
    };
    with_last(qp, |w| w.payload = Payload::Sges(vec![sge]));
}

unsafe extern "C" fn wr_set_sge_list(qp: *mut ibv_qp_ex, n: usize, list: *const ibv_sge) {
    if n > 0 && list.is_null() {
        fail_batch(qp, libc::EINVAL);
        return;
    }
    let sges: Vec<Sge> = (0..n)
        .map(|i| {
            // SAFETY: the program's array of `n` SGEs.
            let s = unsafe { *list.add(i) };
            Sge {
                addr: s.addr,
                length: s.length,
                lkey: Lkey::new(s.lkey),
            }
        })
        .collect();
    with_last(qp, |w| w.payload = Payload::Sges(sges));
}

/// Copy `n` pieces of inline data into one buffer; `None` when a piece is
/// null with a length, or the total overflows.
///
/// # Safety
///
/// `bufs` points at `n` `ibv_data_buf`s, each naming readable memory.
unsafe fn gather(n: usize, bufs: *const ibv_data_buf) -> Option<Vec<u8>> {
    if n > 0 && bufs.is_null() {
        return None;
    }
    let mut out = Vec::new();
    for i in 0..n {
        // SAFETY: the caller's contract.
        let b = unsafe { *bufs.add(i) };
        if b.length == 0 {
            continue;
        }
        if b.addr.is_null() {
            return None;
        }
        out.try_reserve(b.length).ok()?;
        // SAFETY: the program's readable buffer of `length` bytes.
        out.extend_from_slice(unsafe { std::slice::from_raw_parts(b.addr.cast::<u8>(), b.length) });
    }
    Some(out)
}

unsafe extern "C" fn wr_set_inline_data(qp: *mut ibv_qp_ex, addr: *mut c_void, length: usize) {
    let one = ibv_data_buf { addr, length };
    // SAFETY: one piece, the program's buffer.
    unsafe { wr_set_inline_data_list(qp, 1, &one) };
}

unsafe extern "C" fn wr_set_inline_data_list(
    qp: *mut ibv_qp_ex,
    n: usize,
    bufs: *const ibv_data_buf,
) {
    // SAFETY: the program's list of `n` buffers.
    match unsafe { gather(n, bufs) } {
        Some(data) => with_last(qp, |w| w.payload = Payload::Inline(data)),
        None => fail_batch(qp, libc::EINVAL),
    }
}

/// The function table of an extended QP.
fn ops() -> ibv_qp_ex_ops {
    ibv_qp_ex_ops {
        comp_mask: 0,
        wr_id: 0,
        wr_flags: 0,
        wr_atomic_cmp_swp: Some(wr_atomic_cmp_swp),
        wr_atomic_fetch_add: Some(wr_atomic_fetch_add),
        wr_bind_mw: Some(wr_bind_mw),
        wr_local_inv: Some(wr_local_inv),
        wr_rdma_read: Some(wr_rdma_read),
        wr_rdma_write: Some(wr_rdma_write),
        wr_rdma_write_imm: Some(wr_rdma_write_imm),
        wr_send: Some(wr_send),
        wr_send_imm: Some(wr_send_imm),
        wr_send_inv: Some(wr_send_inv),
        wr_send_tso: Some(wr_send_tso),
        wr_set_ud_addr: Some(wr_set_ud_addr),
        wr_set_xrc_srqn: Some(wr_set_xrc_srqn),
        wr_set_inline_data: Some(wr_set_inline_data),
        wr_set_inline_data_list: Some(wr_set_inline_data_list),
        wr_set_sge: Some(wr_set_sge),
        wr_set_sge_list: Some(wr_set_sge_list),
        wr_start: Some(wr_start),
        wr_complete: Some(wr_complete),
        wr_abort: Some(wr_abort),
        wr_atomic_write: Some(wr_atomic_write),
    }
}

/// `verbs_context.create_qp_ex`: a QP from extended attributes. Beyond the
/// PD, only send ops and empty create flags are understood; anything else
/// (XRC, RSS, TSO, source QPN) is `EOPNOTSUPP`.
pub(crate) unsafe extern "C" fn create_qp_ex(
    _ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    if attr.is_null() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    // SAFETY: the caller's input/output struct.
    let a = unsafe { &mut *attr };
    let known =
        IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS;
    if a.comp_mask & IBV_QP_INIT_ATTR_PD == 0 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let flags_used = a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS != 0 && a.create_flags != 0;
    if a.comp_mask & !known != 0 || flags_used {
        set_errno(libc::EOPNOTSUPP);
        return ptr::null_mut();
    }
    let extended = a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS != 0;
    if extended {
        if a.send_ops_flags & !SUPPORTED_OPS != 0 {
            set_errno(libc::EOPNOTSUPP);
            return ptr::null_mut();
        }
        if a.send_ops_flags & !ops_of_type(a.qp_type) != 0 {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
    }
    let mut init = ibv_qp_init_attr {
        qp_context: a.qp_context,
        send_cq: a.send_cq,
        recv_cq: a.recv_cq,
        srq: a.srq,
        cap: a.cap,
        qp_type: a.qp_type,
        sq_sig_all: a.sq_sig_all,
    };
    // SAFETY: the program's PD and CQs, checked there as for ibv_create_qp.
    let qp = unsafe { ibv_create_qp(a.pd, &mut init) };
    if qp.is_null() {
        return qp;
    }
    a.cap = init.cap;
    if extended {
        // SAFETY: a QP record of ours, just created and not yet shared:
        // `ShimQp` holds `ibv_qp` then `ibv_qp_ex_ops`, the layout of
        // `ibv_qp_ex`.
        unsafe { (*qp.cast::<ibv_qp_ex>()).ops = ops() };
    }
    qp
}

/// `ibv_qp_to_qp_ex`: the `ibv_qp_ex` of a QP created with send ops,
/// otherwise null (as rdma-core).
#[no_mangle]
unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut ibv_qp_ex {
    // SAFETY: the export contract: a QP of ours, or null.
    match unsafe { rec::<ShimQp, _>(qp) } {
        Some(q) if q.ex.wr_start.is_some() => qp.cast(),
        _ => ptr::null_mut(),
    }
}

/// Fill the extended-verbs slots of a new context: `create_qp_ex` and
/// `create_cq_ex`.
pub(crate) fn install(vctx: &mut verbs_context) {
    // SAFETY: the slot's C type is `create_qp_ex_fn`; `unused_fn` only
    // stands in for it in the mirror, and the inline `ibv_create_qp_ex`
    // calls it with that type.
    vctx.create_qp_ex = Some(unsafe {
        std::mem::transmute::<create_qp_ex_fn, unsafe extern "C" fn()>(create_qp_ex)
    });
    // SAFETY: as above, for `create_cq_ex_fn`.
    vctx.create_cq_ex = Some(unsafe {
        std::mem::transmute::<create_cq_ex_fn, unsafe extern "C" fn()>(crate::cqex::create_cq_ex)
    });
}

#[cfg(test)]
mod tests {
    //! Extended QPs and CQs driven as the inline functions of `verbs.h`
    //! drive them: through the `verbs_context` slots and the function
    //! tables, two contexts of the default device connected by LID.

    use std::os::raw::{c_int, c_void};
    use std::ptr;
    use std::time::{Duration, Instant};

    use verbs_emu::backend::ibverbs::ffi::*;

    extern "C" {
        fn ibv_get_device_list(n: *mut c_int) -> *mut *mut ibv_device;
        fn ibv_free_device_list(l: *mut *mut ibv_device);
        fn ibv_open_device(d: *mut ibv_device) -> *mut ibv_context;
        fn ibv_close_device(c: *mut ibv_context) -> c_int;
        fn ibv_query_port(c: *mut ibv_context, port: u8, a: *mut ibv_port_attr) -> c_int;
        fn ibv_alloc_pd(c: *mut ibv_context) -> *mut ibv_pd;
        fn ibv_dealloc_pd(p: *mut ibv_pd) -> c_int;
        fn ibv_reg_mr(p: *mut ibv_pd, a: *mut c_void, l: usize, acc: c_int) -> *mut ibv_mr;
        fn ibv_dereg_mr(m: *mut ibv_mr) -> c_int;
        fn ibv_destroy_cq(c: *mut ibv_cq) -> c_int;
        fn ibv_destroy_qp(q: *mut ibv_qp) -> c_int;
        fn ibv_qp_to_qp_ex(q: *mut ibv_qp) -> *mut ibv_qp_ex;
    }

    struct Side {
        ctx: *mut ibv_context,
        pd: *mut ibv_pd,
        cq: *mut ibv_cq_ex,
        qp: *mut ibv_qp,
        qpx: *mut ibv_qp_ex,
        mr: *mut ibv_mr,
        buf: Vec<u8>,
        lid: u16,
    }

    /// The `verbs_context` around a context (`verbs_get_ctx`).
    unsafe fn vctx(ctx: *mut ibv_context) -> *mut verbs_context {
        let off = std::mem::offset_of!(verbs_context, context);
        // SAFETY: contexts of ours sit at the end of a verbs_context.
        unsafe { ctx.cast::<u8>().sub(off).cast() }
    }

    unsafe fn create_cq_ex(ctx: *mut ibv_context, a: &mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex {
        // SAFETY: the slot, called as the inline ibv_create_cq_ex calls it.
        unsafe {
            let slot = (*vctx(ctx)).create_cq_ex.expect("create_cq_ex slot");
            let f: create_cq_ex_fn = std::mem::transmute(slot);
            f(ctx, a)
        }
    }

    unsafe fn create_qp_ex(ctx: *mut ibv_context, a: &mut ibv_qp_init_attr_ex) -> *mut ibv_qp {
        // SAFETY: as above, for ibv_create_qp_ex.
        unsafe {
            let slot = (*vctx(ctx)).create_qp_ex.expect("create_qp_ex slot");
            let f: create_qp_ex_fn = std::mem::transmute(slot);
            f(ctx, a)
        }
    }

    fn cq_attr(wc_flags: u64) -> ibv_cq_init_attr_ex {
        ibv_cq_init_attr_ex {
            cqe: 32,
            cq_context: ptr::null_mut(),
            channel: ptr::null_mut(),
            comp_vector: 0,
            wc_flags,
            comp_mask: 0,
            flags: 0,
            parent_domain: ptr::null_mut(),
        }
    }

    fn qp_attr(pd: *mut ibv_pd, cq: *mut ibv_cq_ex, ops: u64) -> ibv_qp_init_attr_ex {
        ibv_qp_init_attr_ex {
            qp_context: ptr::null_mut(),
            send_cq: cq.cast(),
            recv_cq: cq.cast(),
            srq: ptr::null_mut(),
            cap: ibv_qp_cap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 2,
                max_recv_sge: 1,
                max_inline_data: 64,
            },
            qp_type: IBV_QPT_RC,
            sq_sig_all: 0,
            comp_mask: IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            pd,
            xrcd: ptr::null_mut(),
            create_flags: 0,
            max_tso_header: 0,
            rwq_ind_tbl: ptr::null_mut(),
            rx_hash_conf: [0; 3],
            source_qpn: 0,
            send_ops_flags: ops,
        }
    }

    unsafe fn side(dev: *mut ibv_device) -> Side {
        // SAFETY (whole body): the calls a C program makes, on objects
        // just created.
        unsafe {
            let ctx = ibv_open_device(dev);
            assert!(!ctx.is_null());
            let mut port = ibv_port_attr::default();
            assert_eq!(ibv_query_port(ctx, 1, &mut port), 0);
            let pd = ibv_alloc_pd(ctx);
            let cq = create_cq_ex(ctx, &mut cq_attr(IBV_WC_STANDARD_FLAGS));
            assert!(!cq.is_null());
            let mut buf = vec![0u8; 4096];
            let access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
            let mr = ibv_reg_mr(pd, buf.as_mut_ptr().cast(), buf.len(), access as c_int);
            let ops = IBV_QP_EX_WITH_RDMA_WRITE
                | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
                | IBV_QP_EX_WITH_SEND
                | IBV_QP_EX_WITH_RDMA_READ;
            let qp = create_qp_ex(ctx, &mut qp_attr(pd, cq, ops));
            assert!(!qp.is_null());
            let qpx = ibv_qp_to_qp_ex(qp);
            assert_eq!(qpx.cast::<ibv_qp>(), qp);
            Side {
                ctx,
                pd,
                cq,
                qp,
                qpx,
                mr,
                buf,
                lid: port.lid,
            }
        }
    }

    unsafe fn connect(s: &Side, peer: &Side) {
        let access = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
        // SAFETY: both QPs are live.
        unsafe { crate::tests::connect_qp(s.qp, peer.qp, peer.lid, access, None) }
    }

    /// One completion through `ibv_start_poll`, as (wr_id, status, opcode,
    /// byte_len, imm_data in host order, qp_num, wc_flags).
    unsafe fn poll_ex(cq: *mut ibv_cq_ex) -> (u64, u32, u32, u32, u32, u32, u32) {
        // SAFETY (whole body): an extended CQ of ours, its table.
        unsafe {
            let o = (*cq).ops;
            let mut attr = ibv_poll_cq_attr::default();
            let start = Instant::now();
            loop {
                match (o.start_poll.unwrap())(cq, &mut attr) {
                    0 => break,
                    e => assert_eq!(e, libc::ENOENT),
                }
                assert!(start.elapsed() < Duration::from_secs(10), "no completion");
                std::thread::yield_now();
            }
            let r = (
                (*cq).ops.wr_id,
                (*cq).ops.status,
                (o.read_opcode.unwrap())(cq),
                (o.read_byte_len.unwrap())(cq),
                u32::from_be((o.read_imm_data.unwrap())(cq)),
                (o.read_qp_num.unwrap())(cq),
                (o.read_wc_flags.unwrap())(cq),
            );
            // Nothing more queued: next_poll answers ENOENT.
            assert_eq!((o.next_poll.unwrap())(cq), libc::ENOENT);
            (o.end_poll.unwrap())(cq);
            r
        }
    }

    #[test]
    fn wr_api_posts_batches_and_cq_ex_reads_them() {
        // SAFETY (whole body): the C calling sequence on objects this test
        // creates and destroys in order.
        unsafe {
            let mut n = 0;
            let list = ibv_get_device_list(&mut n);
            assert!(n >= 1);
            let mut a = side(*list);
            let mut b = side(*list);
            ibv_free_device_list(list);
            connect(&a, &b);
            connect(&b, &a);
            let o = (*a.qpx).ops;

            // A batch of two: a WRITE gathering two SGEs, then a WRITE
            // with immediate from inline data, which the program may
            // overwrite as soon as the call returns.
            a.buf[..4].copy_from_slice(b"abcd");
            a.buf[8..12].copy_from_slice(b"efgh");
            let recv_sge = ibv_sge {
                addr: b.buf.as_mut_ptr() as u64 + 2048,
                length: 64,
                lkey: (*b.mr).lkey,
            };
            let mut rwr = ibv_recv_wr {
                wr_id: 50,
                next: ptr::null_mut(),
                sg_list: &recv_sge as *const _ as *mut _,
                num_sge: 1,
            };
            let mut bad = ptr::null_mut();
            let post_recv = (*b.ctx).ops.post_recv.unwrap();
            assert_eq!(post_recv(b.qp, &mut rwr, &mut bad), 0);
            let remote = b.buf.as_ptr() as u64;
            let rkey = (*b.mr).rkey;
            (o.wr_start.unwrap())(a.qpx);
            (*a.qpx).ops.wr_id = 1;
            (*a.qpx).ops.wr_flags = 0;
            (o.wr_rdma_write.unwrap())(a.qpx, rkey, remote + 100);
            let sges = [
                ibv_sge {
                    addr: a.buf.as_ptr() as u64,
                    length: 4,
                    lkey: (*a.mr).lkey,
                },
                ibv_sge {
                    addr: a.buf.as_ptr() as u64 + 8,
                    length: 4,
                    lkey: (*a.mr).lkey,
                },
            ];
            (o.wr_set_sge_list.unwrap())(a.qpx, 2, sges.as_ptr());
            (*a.qpx).ops.wr_id = 2;
            (*a.qpx).ops.wr_flags = IBV_SEND_SIGNALED;
            (o.wr_rdma_write_imm.unwrap())(a.qpx, rkey, remote + 200, 0x1234_5678u32.to_be());
            let mut inline = *b"inline!";
            (o.wr_set_inline_data.unwrap())(a.qpx, inline.as_mut_ptr().cast(), inline.len());
            inline.fill(0);
            assert_eq!((o.wr_complete.unwrap())(a.qpx), 0);

            let qpn_a = (*a.qp).qp_num;
            let qpn_b = (*b.qp).qp_num;
            // Only the signaled WR completes on the sender (byte_len is
            // undefined for a WRITE's completion).
            let (id, status, op, _, imm, qpn, flags) = poll_ex(a.cq);
            assert_eq!(
                (id, status, op, imm, qpn, flags),
                (2, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE, 0, qpn_a, 0)
            );
            let got = poll_ex(b.cq);
            assert_eq!(
                got,
                (
                    50,
                    IBV_WC_SUCCESS,
                    IBV_WC_RECV_RDMA_WITH_IMM,
                    7,
                    0x1234_5678,
                    qpn_b,
                    IBV_WC_WITH_IMM
                )
            );
            assert_eq!(&b.buf[100..108], b"abcdefgh");
            assert_eq!(&b.buf[200..207], b"inline!");

            // A READ through the table lands the peer's bytes.
            (o.wr_start.unwrap())(a.qpx);
            (*a.qpx).ops.wr_id = 3;
            (*a.qpx).ops.wr_flags = IBV_SEND_SIGNALED;
            (o.wr_rdma_read.unwrap())(a.qpx, rkey, remote + 100);
            (o.wr_set_sge.unwrap())(a.qpx, (*a.mr).lkey, a.buf.as_ptr() as u64 + 1000, 8);
            assert_eq!((o.wr_complete.unwrap())(a.qpx), 0);
            assert_eq!(
                poll_ex(a.cq),
                (3, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, 8, 0, qpn_a, 0)
            );
            assert_eq!(&a.buf[1000..1008], b"abcdefgh");

            // An ATOMIC WRITE takes its 8 bytes at the call (the program
            // may reuse them at once) and completes as ATOMIC_WRITE.
            (o.wr_start.unwrap())(a.qpx);
            (*a.qpx).ops.wr_id = 5;
            (*a.qpx).ops.wr_flags = IBV_SEND_SIGNALED;
            let mut word = 0x0807_0605_0403_0201u64.to_le_bytes();
            (o.wr_atomic_write.unwrap())(a.qpx, rkey, remote + 400, word.as_ptr().cast());
            word.fill(0);
            assert_eq!((o.wr_complete.unwrap())(a.qpx), 0);
            assert_eq!(
                poll_ex(a.cq),
                (5, IBV_WC_SUCCESS, IBV_WC_ATOMIC_WRITE, 8, 0, qpn_a, 0)
            );
            assert_eq!(&b.buf[400..408], [1, 2, 3, 4, 5, 6, 7, 8]);

            // What the device cannot do fails the whole batch: nothing of
            // it is posted.
            (o.wr_start.unwrap())(a.qpx);
            (*a.qpx).ops.wr_id = 4;
            (o.wr_rdma_write.unwrap())(a.qpx, rkey, remote + 300);
            (o.wr_set_sge.unwrap())(a.qpx, (*a.mr).lkey, a.buf.as_ptr() as u64, 4);
            (o.wr_send_tso.unwrap())(a.qpx, ptr::null_mut(), 0, 0);
            assert_eq!((o.wr_complete.unwrap())(a.qpx), libc::EOPNOTSUPP);
            // An aborted batch posts nothing either.
            (o.wr_start.unwrap())(a.qpx);
            (*a.qpx).ops.wr_flags = IBV_SEND_SIGNALED;
            (o.wr_rdma_write.unwrap())(a.qpx, rkey, remote + 300);
            (o.wr_set_sge.unwrap())(a.qpx, (*a.mr).lkey, a.buf.as_ptr() as u64, 4);
            (o.wr_abort.unwrap())(a.qpx);
            std::thread::sleep(Duration::from_millis(50));
            let mut attr = ibv_poll_cq_attr::default();
            assert_eq!(
                ((*a.cq).ops.start_poll.unwrap())(a.cq, &mut attr),
                libc::ENOENT
            );
            assert_eq!(&b.buf[300..304], [0; 4]);

            // Creation refuses what the device cannot give.
            let refused = create_cq_ex(a.ctx, &mut cq_attr(1 << 7));
            assert!(refused.is_null(), "completion timestamps");
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EOPNOTSUPP)
            );
            // IBV_QP_EX_WITH_TSO (1 << 10) beside a bind: still refused.
            let mut bind = qp_attr(a.pd, a.cq, IBV_QP_EX_WITH_BIND_MW | (1 << 10));
            assert!(create_qp_ex(a.ctx, &mut bind).is_null(), "TSO");
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EOPNOTSUPP)
            );
            let mut ud_write = qp_attr(a.pd, a.cq, IBV_QP_EX_WITH_RDMA_WRITE);
            ud_write.qp_type = IBV_QPT_UD;
            assert!(create_qp_ex(a.ctx, &mut ud_write).is_null());
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EINVAL)
            );
            // A QP created without send ops has no ibv_qp_ex.
            let mut plain = qp_attr(a.pd, a.cq, 0);
            plain.comp_mask = IBV_QP_INIT_ATTR_PD;
            let p = create_qp_ex(a.ctx, &mut plain);
            assert!(!p.is_null());
            assert!(ibv_qp_to_qp_ex(p).is_null());
            assert_eq!(ibv_destroy_qp(p), 0);

            for s in [a, b] {
                assert_eq!(ibv_destroy_qp(s.qp), 0);
                assert_eq!(ibv_dereg_mr(s.mr), 0);
                assert_eq!(ibv_destroy_cq(s.cq.cast()), 0);
                assert_eq!(ibv_dealloc_pd(s.pd), 0);
                assert_eq!(ibv_close_device(s.ctx), 0);
            }
        }
    }
}
