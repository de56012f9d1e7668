//! The verbs that make and free the objects: PD, MR, completion channel,
//! CQ, QP, AH (SRQs are with the data path, in `post`).
//!
//! The records they share with the other verb files are in `records`; the
//! MR and channel records, which only these verbs touch, are here, with
//! the `verbs.h` struct first likewise.

use std::collections::VecDeque;
use std::net::Ipv4Addr;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::ibverbs::work::{qp_cap_from_raw, qp_cap_to_raw};
use verbs_emu::backend::{Backend, CqHandle, MrHandle};
use verbs_emu::verbs::{
    AccessFlags, AhAttr, Gid, Mtu, QpAttr, QpAttrMask, QpInitAttr, QpState, QpType,
};
use verbs_emu::wire::Qpn;

use crate::config::ip_of_lid;
use crate::records::{rec, srq_pool, ShimAh, ShimContext, ShimCq, ShimPd, ShimQp};
use crate::{fail, lock, set_errno};

/// The context record of a C object's `context` field.
fn ctx_of<'a>(ctx: *mut ibv_context) -> Option<&'a ShimContext> {
    // SAFETY: objects only ever carry contexts this library opened.
    unsafe { ShimContext::from_ptr(ctx) }
}

// ---------------------------------------------------------------- PD

#[no_mangle]
unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    let Some(c) = ctx_of(ctx) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    match c.backend.alloc_pd() {
        Ok(handle) => {
            let b = Box::new(ShimPd {
                pd: ibv_pd {
                    context: ctx,
                    handle: handle.0 as u32,
                },
                handle,
                backend: c.backend.clone(),
                local: *c.local.ip(),
            });
            Box::into_raw(b).cast()
        }
        Err(e) => {
            set_errno(fail(&e));
            ptr::null_mut()
        }
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    // SAFETY: the export contract.
    let Some(p) = (unsafe { rec::<ShimPd, _>(pd) }) else {
        return libc::EINVAL;
    };
    // A parent domain, or a PD one wraps (the domain module's).
    // SAFETY: the export contract: a live PD of ours.
    if let Some(rc) = unsafe { crate::domain::dealloc_pd(pd) } {
        return rc;
    }
    if let Err(e) = p.backend.dealloc_pd(p.handle) {
        return crate::errno_of(&e);
    }
    // SAFETY: allocated by ibv_alloc_pd; the backend released it.
    drop(unsafe { Box::from_raw(pd.cast::<ShimPd>()) });
    0
}

// ---------------------------------------------------------------- MR

#[repr(C)]
pub(crate) struct ShimMr {
    pub mr: ibv_mr,
    pub handle: MrHandle,
    pub backend: Arc<dyn Backend>,
}

unsafe fn reg_mr(pd: *mut ibv_pd, addr: *mut c_void, len: usize, access: c_int) -> *mut ibv_mr {
    // SAFETY: the export contract.
    let Some(p) = (unsafe { rec::<ShimPd, _>(pd) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // The optional bits (relaxed ordering) are hints a device may ignore.
    let flags = AccessFlags(access as u32 & !IBV_ACCESS_OPTIONAL_RANGE);
    // SAFETY: the program promises the range stays valid while registered,
    // as it does to a NIC.
    match unsafe { p.backend.reg_mr(p.handle, addr.cast(), len, flags) } {
        Ok(keys) => {
            let b = Box::new(ShimMr {
                mr: ibv_mr {
                    context: p.pd.context,
                    pd,
                    addr,
                    length: len,
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

#[no_mangle]
unsafe extern "C" fn ibv_reg_mr(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded.
    unsafe { reg_mr(pd, addr, len, access) }
}

unsafe fn reg_mr_at(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    if iova == addr as u64 {
        // SAFETY: forwarded.
        return unsafe { reg_mr(pd, addr, len, access) };
    }
    if iova == 0 {
        // SAFETY: forwarded; zero-based addressing is IOVA 0.
        return unsafe {
            reg_mr(
                pd,
                addr,
                len,
                access | AccessFlags::ZERO_BASED.bits() as c_int,
            )
        };
    }
    // The emulation maps a region at its address or at 0 only.
    set_errno(libc::EOPNOTSUPP);
    ptr::null_mut()
}

#[no_mangle]
unsafe extern "C" fn ibv_reg_mr_iova(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: c_int,
) -> *mut ibv_mr {
    // SAFETY: forwarded.
    unsafe { reg_mr_at(pd, addr, len, iova, access) }
}

#[no_mangle]
unsafe extern "C" fn ibv_reg_mr_iova2(
    pd: *mut ibv_pd,
    addr: *mut c_void,
    len: usize,
    iova: u64,
    access: u32,
) -> *mut ibv_mr {
    // SAFETY: forwarded.
    unsafe { reg_mr_at(pd, addr, len, iova, access as c_int) }
}

#[no_mangle]
unsafe extern "C" fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int {
    // SAFETY: the export contract.
    let Some(m) = (unsafe { rec::<ShimMr, _>(mr) }) else {
        return libc::EINVAL;
    };
    if let Err(e) = m.backend.dereg_mr(m.handle) {
        return fail(&e);
    }
    // SAFETY: allocated by ibv_reg_mr; deregistered above.
    drop(unsafe { Box::from_raw(mr.cast::<ShimMr>()) });
    0
}

// ---------------------------------------------------- completion channel

struct Armed {
    cq: usize,
    backend: Arc<dyn Backend>,
    handle: CqHandle,
}

/// What a channel's notifier thread and its callers share.
struct ChannelInner {
    armed: Mutex<Vec<Armed>>,
    wake: Condvar,
    events: Mutex<VecDeque<usize>>,
    wfd: c_int,
    stop: AtomicBool,
}

#[repr(C)]
pub(crate) struct ShimChannel {
    pub ch: ibv_comp_channel,
    inner: Arc<ChannelInner>,
    thread: Option<JoinHandle<()>>,
}

/// The notifier: waits on the armed CQs; when one has a completion it is
/// disarmed, its event queued and one byte written to the channel's pipe
/// (which makes `fd` readable, as the kernel's event file is).
fn notifier(inner: Arc<ChannelInner>) {
    loop {
        let list: Vec<(usize, Arc<dyn Backend>, CqHandle)> = {
            let mut g = lock(&inner.armed);
            while g.is_empty() && !inner.stop.load(Ordering::Acquire) {
                g = inner.wake.wait(g).unwrap_or_else(|p| p.into_inner());
            }
            if inner.stop.load(Ordering::Acquire) {
                return;
            }
            g.iter()
                .map(|a| (a.cq, a.backend.clone(), a.handle))
                .collect()
        };
        let slice = Duration::from_millis(2) / list.len().max(1) as u32;
        for (cq, backend, handle) in list {
            if inner.stop.load(Ordering::Acquire) {
                return;
            }
            if !matches!(backend.wait_cq(handle, slice), Ok(true)) {
                continue;
            }
            let mut g = lock(&inner.armed);
            if let Some(i) = g.iter().position(|a| a.cq == cq) {
                g.swap_remove(i);
                drop(g);
                lock(&inner.events).push_back(cq);
                let one = 1u8;
                // SAFETY: writing one byte from a local to our pipe.
                unsafe { libc::write(inner.wfd, ptr::from_ref(&one).cast(), 1) };
            }
        }
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    if ctx_of(ctx).is_none() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let mut fds = [-1; 2];
    // SAFETY: pipe2 fills the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return ptr::null_mut();
    }
    let inner = Arc::new(ChannelInner {
        armed: Mutex::new(Vec::new()),
        wake: Condvar::new(),
        events: Mutex::new(VecDeque::new()),
        wfd: fds[1],
        stop: AtomicBool::new(false),
    });
    let t = {
        let inner = inner.clone();
        std::thread::Builder::new()
            .name("rocelab-cq-events".into())
            .spawn(move || notifier(inner))
    };
    let Ok(t) = t else {
        // SAFETY: closing the pipe we just made.
        unsafe {
            libc::close(fds[0]);
            libc::close(fds[1]);
        }
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    };
    let b = Box::new(ShimChannel {
        ch: ibv_comp_channel {
            context: ctx,
            fd: fds[0],
            refcnt: 0,
        },
        inner,
        thread: Some(t),
    });
    Box::into_raw(b).cast()
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    if ch.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: the export contract: a channel this library made.
    let mut b = unsafe { Box::from_raw(ch.cast::<ShimChannel>()) };
    if b.ch.refcnt > 0 {
        let _ = Box::into_raw(b);
        return libc::EBUSY;
    }
    b.inner.stop.store(true, Ordering::Release);
    {
        let _g = lock(&b.inner.armed);
        b.inner.wake.notify_all();
    }
    if let Some(t) = b.thread.take() {
        let _ = t.join();
    }
    // SAFETY: our pipe's two ends.
    unsafe {
        libc::close(b.ch.fd);
        libc::close(b.inner.wfd);
    }
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_get_cq_event(
    ch: *mut ibv_comp_channel,
    cq: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    // SAFETY: the export contract.
    let Some(c) = (unsafe { rec::<ShimChannel, _>(ch) }) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    let mut byte = 0u8;
    // SAFETY: one byte into a local; blocks unless the program made the fd
    // non-blocking, like the kernel's event file.
    let n = unsafe { libc::read(c.ch.fd, ptr::from_mut(&mut byte).cast(), 1) };
    if n != 1 {
        return -1;
    }
    let Some(ev) = lock(&c.inner.events).pop_front() else {
        set_errno(libc::EIO);
        return -1;
    };
    let ev = ev as *mut ibv_cq;
    // SAFETY: caller outputs; ev is a CQ still armed when the event fired.
    unsafe {
        if !cq.is_null() {
            *cq = ev;
        }
        if !cq_context.is_null() {
            *cq_context = (*ev).cq_context;
        }
    }
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: u32) {
    if cq.is_null() {
        return;
    }
    // SAFETY: a live CQ of ours; the counter is what destroy waits on in
    // rdma-core, kept for programs that read it.
    unsafe {
        libc::pthread_mutex_lock(ptr::addr_of_mut!((*cq).mutex));
        (*cq).comp_events_completed = (*cq).comp_events_completed.wrapping_add(nevents);
        libc::pthread_mutex_unlock(ptr::addr_of_mut!((*cq).mutex));
    }
}

// ---------------------------------------------------------------- CQ

#[no_mangle]
pub(crate) unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    let Some(c) = ctx_of(ctx) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // As a NIC's driver: more entries than the device's max_cqe, or a
    // completion vector it does not have, is EINVAL.
    let max_cqe = c.backend.query_device().map_or(0, |a| a.max_cqe);
    let n = match u32::try_from(cqe) {
        Ok(n) if n <= max_cqe => n,
        _ => {
            set_errno(libc::EINVAL);
            return ptr::null_mut();
        }
    };
    if comp_vector < 0 || comp_vector >= c.vctx.context.num_comp_vectors {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    match c.backend.create_cq(n.max(1)) {
        Ok(handle) => {
            if !channel.is_null() {
                // SAFETY: a live channel of ours.
                unsafe { (*channel).refcnt += 1 };
            }
            // SAFETY: ibv_cq is pointers, integers and pthread objects
            // (initialised next); zero is valid for each.
            let mut raw: ibv_cq = unsafe { std::mem::zeroed() };
            raw.context = ctx;
            raw.channel = channel;
            raw.cq_context = cq_context;
            raw.handle = handle.0 as u32;
            raw.cqe = n.max(1) as c_int;
            raw.mutex = libc::PTHREAD_MUTEX_INITIALIZER;
            raw.cond = libc::PTHREAD_COND_INITIALIZER;
            let b = Box::new(ShimCq {
                cq: raw,
                ex: ibv_cq_ex_ops::default(),
                handle,
                backend: c.backend.clone(),
                srqs: Mutex::new(Vec::new()),
            });
            let raw = Box::into_raw(b);
            crate::events::register(
                crate::events::backend_id(&*c.backend),
                crate::events::Kind::Cq(handle.0),
                raw as usize,
                c.async_wfd,
                false,
            );
            raw.cast()
        }
        Err(e) => {
            set_errno(fail(&e));
            ptr::null_mut()
        }
    }
}

/// `ibv_resize_cq`: at least `cqe` entries (up to the device's
/// `max_cqe`), keeping the queued completions; `EINVAL` when more are
/// queued than `cqe`, as a NIC's driver answers.
#[no_mangle]
unsafe extern "C" fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> c_int {
    // SAFETY: the export contract.
    let Some(q) = (unsafe { rec::<ShimCq, _>(cq) }) else {
        return libc::EINVAL;
    };
    let max_cqe = q.backend.query_device().map_or(0, |a| a.max_cqe);
    let n = match u32::try_from(cqe) {
        Ok(n) if n >= 1 && n <= max_cqe => n,
        _ => return libc::EINVAL,
    };
    match q.backend.resize_cq(q.handle, n) {
        Ok(size) => {
            // SAFETY: our own CQ record; programs read `cqe`.
            unsafe { (*cq).cqe = size as c_int };
            0
        }
        Err(e) => fail(&e),
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the export contract.
    let Some(q) = (unsafe { rec::<ShimCq, _>(cq) }) else {
        return libc::EINVAL;
    };
    if let Err(e) = q.backend.destroy_cq(q.handle) {
        return crate::errno_of(&e);
    }
    let ch = q.cq.channel;
    // SAFETY: a live channel of ours (it cannot be destroyed while this CQ
    // holds a reference).
    if let Some(c) = unsafe { rec::<ShimChannel, _>(ch) } {
        lock(&c.inner.armed).retain(|a| a.cq != cq as usize);
        lock(&c.inner.events).retain(|&e| e != cq as usize);
        // SAFETY: as above.
        unsafe { (*ch).refcnt -= 1 };
    }
    crate::events::unregister(cq as usize);
    crate::domain::release(cq as usize);
    // SAFETY: allocated by ibv_create_cq; the backend released it.
    drop(unsafe { Box::from_raw(cq.cast::<ShimCq>()) });
    0
}

/// `ibv_context_ops.req_notify_cq`: arm the CQ on its channel. The event
/// fires for the next completion of any kind, also when the program asked
/// for solicited ones only: an extra wake-up, which programs must tolerate
/// anyway (they poll after every event), never a missed one.
pub(crate) unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, _solicited_only: c_int) -> c_int {
    // SAFETY: the export contract.
    let Some(q) = (unsafe { rec::<ShimCq, _>(cq) }) else {
        return libc::EINVAL;
    };
    // SAFETY: a live channel of ours, or null.
    let Some(c) = (unsafe { rec::<ShimChannel, _>(q.cq.channel) }) else {
        // No channel: nothing can deliver an event, as on a NIC.
        return 0;
    };
    let mut g = lock(&c.inner.armed);
    if !g.iter().any(|a| a.cq == cq as usize) {
        g.push(Armed {
            cq: cq as usize,
            backend: q.backend.clone(),
            handle: q.handle,
        });
        c.inner.wake.notify_all();
    }
    0
}

// ---------------------------------------------------------------- QP

#[no_mangle]
pub(crate) unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    // SAFETY: the export contract.
    let (Some(p), false) = ((unsafe { rec::<ShimPd, _>(pd) }), init.is_null()) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // SAFETY: caller's input struct.
    let ia = unsafe { &mut *init };
    // SAFETY: CQs of ours (or null).
    let (Some(scq), Some(rcq)) =
        (unsafe { (rec::<ShimCq, _>(ia.send_cq), rec::<ShimCq, _>(ia.recv_cq)) })
    else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    let qp_type = match ia.qp_type {
        IBV_QPT_RC => QpType::Rc,
        IBV_QPT_UC => QpType::Uc,
        IBV_QPT_UD => QpType::Ud,
        _ => {
            set_errno(libc::EOPNOTSUPP);
            return ptr::null_mut();
        }
    };
    // SAFETY: an SRQ of ours, or null.
    let srq = unsafe { srq_pool(ia.srq) };
    if !ia.srq.is_null() && srq.is_none() {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let mut cap = qp_cap_from_raw(&ia.cap);
    if let Some(s) = &srq {
        // Receives come from the SRQ: the QP's own queue holds what the
        // pool lends it.
        cap.max_recv_wr = s.max_wr;
        cap.max_recv_sge = s.max_sge;
    }
    let attr = QpInitAttr {
        qp_type,
        send_cq: scq.handle,
        recv_cq: rcq.handle,
        cap,
        sq_sig_all: ia.sq_sig_all != 0,
        // The device's congestion control (ROCELAB_IBV_CC).
        cc: None,
        min_time_between_cnps: None,
    };
    let created = match p.backend.create_qp(p.handle, &attr) {
        Ok(c) => c,
        Err(e) => {
            set_errno(fail(&e));
            return ptr::null_mut();
        }
    };
    let mut granted = qp_cap_to_raw(&created.cap);
    if srq.is_some() {
        granted.max_recv_wr = 0;
        granted.max_recv_sge = 0;
    }
    // Under a parent domain, its allocator gives the queues' buffer.
    let size = crate::domain::qp_buffer_size(&granted);
    let qbuf = match crate::domain::queue_buffer(pd, crate::domain::RES_TYPE_QP, size) {
        Ok(b) => b,
        Err(e) => {
            let _ = p.backend.destroy_qp(created.handle);
            set_errno(e);
            return ptr::null_mut();
        }
    };
    ia.cap = granted;
    // SAFETY: ibv_qp is pointers, integers and pthread objects (set
    // below); zero is valid for each.
    let mut raw: ibv_qp = unsafe { std::mem::zeroed() };
    raw.context = p.pd.context;
    raw.qp_context = ia.qp_context;
    raw.pd = pd;
    raw.send_cq = ia.send_cq;
    raw.recv_cq = ia.recv_cq;
    raw.srq = ia.srq;
    raw.handle = created.handle.0 as u32;
    raw.qp_num = created.qpn.value();
    raw.state = IBV_QPS_RESET;
    raw.qp_type = ia.qp_type;
    raw.mutex = libc::PTHREAD_MUTEX_INITIALIZER;
    raw.cond = libc::PTHREAD_COND_INITIALIZER;
    let b = Box::into_raw(Box::new(ShimQp {
        qp: raw,
        ex: ibv_qp_ex_ops::default(),
        handle: created.handle,
        backend: p.backend.clone(),
        local: p.local,
        init_cap: granted,
        sq_sig_all: ia.sq_sig_all,
        attr: Mutex::new(ibv_qp_attr {
            cap: granted,
            ..Default::default()
        }),
        srq: srq.clone(),
    }));
    crate::domain::keep(b as usize, qbuf);
    if let Some(c) = ctx_of(p.pd.context) {
        crate::events::register(
            crate::events::backend_id(&*p.backend),
            crate::events::Kind::Qp(created.handle.0),
            b as usize,
            c.async_wfd,
            srq.is_some(),
        );
    }
    if let Some(s) = srq {
        let mut list = lock(&rcq.srqs);
        if !list.iter().any(|x| Arc::ptr_eq(x, &s)) {
            list.push(s.clone());
        }
        drop(list);
        s.attach(
            b as usize,
            created.qpn.value(),
            created.handle,
            p.backend.clone(),
        );
    }
    b.cast()
}

/// The GID an address vector names: its GRH's destination, or for a
/// GRH-less one the address of its DLID next to `local`.
fn dest_gid(local: Ipv4Addr, ah: &ibv_ah_attr) -> Gid {
    let g = ah.grh.dgid.bytes();
    if ah.is_global != 0 && g != [0; 16] {
        Gid(g)
    } else {
        Gid::from_ip(ip_of_lid(local, ah.dlid).into())
    }
}

/// The verbs address vector of a C one.
pub(crate) fn ah_from_raw(local: Ipv4Addr, ah: &ibv_ah_attr) -> AhAttr {
    let mut a = AhAttr::to_gid(dest_gid(local, ah));
    a.sgid_index = ah.grh.sgid_index;
    a.hop_limit = ah.grh.hop_limit;
    a.traffic_class = ah.grh.traffic_class;
    a.flow_label = ah.grh.flow_label;
    a.sl = ah.sl;
    a.port_num = ah.port_num;
    a
}

fn qp_attr_from_raw(local: Ipv4Addr, a: &ibv_qp_attr, mask: c_int) -> Result<QpAttr, c_int> {
    let m = QpAttrMask(mask as u32);
    let mut q = QpAttr {
        mask: m,
        ..QpAttr::default()
    };
    if m.contains(QpAttrMask::STATE) {
        q.qp_state = QpState::from_value(a.qp_state).ok_or(libc::EINVAL)?;
    }
    if m.contains(QpAttrMask::CUR_STATE) {
        q.cur_qp_state = QpState::from_value(a.cur_qp_state).ok_or(libc::EINVAL)?;
    }
    if m.contains(QpAttrMask::PATH_MTU) {
        q.path_mtu = Mtu::from_value(a.path_mtu).ok_or(libc::EINVAL)?;
    }
    q.qp_access_flags = AccessFlags(a.qp_access_flags);
    q.pkey_index = a.pkey_index;
    q.port_num = a.port_num;
    q.qkey = a.qkey;
    if m.contains(QpAttrMask::AV) {
        q.ah_attr = ah_from_raw(local, &a.ah_attr);
    }
    q.timeout = a.timeout;
    q.retry_cnt = a.retry_cnt;
    q.rnr_retry = a.rnr_retry;
    q.rq_psn = a.rq_psn;
    q.sq_psn = a.sq_psn;
    q.max_rd_atomic = a.max_rd_atomic;
    q.max_dest_rd_atomic = a.max_dest_rd_atomic;
    q.min_rnr_timer = a.min_rnr_timer;
    q.dest_qp_num = Qpn::new(a.dest_qp_num & 0xFF_FFFF);
    Ok(q)
}

/// Copy the fields `mask` names from `src` into `dst`.
fn merge_attr(dst: &mut ibv_qp_attr, src: &ibv_qp_attr, mask: c_int) {
    let has = |bit: c_int| mask & bit != 0;
    if has(IBV_QP_STATE) {
        dst.qp_state = src.qp_state;
    }
    if has(IBV_QP_ACCESS_FLAGS) {
        dst.qp_access_flags = src.qp_access_flags;
    }
    if has(IBV_QP_PKEY_INDEX) {
        dst.pkey_index = src.pkey_index;
    }
    if has(IBV_QP_PORT) {
        dst.port_num = src.port_num;
    }
    if has(IBV_QP_QKEY) {
        dst.qkey = src.qkey;
    }
    if has(IBV_QP_AV) {
        dst.ah_attr = src.ah_attr;
    }
    if has(IBV_QP_PATH_MTU) {
        dst.path_mtu = src.path_mtu;
    }
    if has(IBV_QP_TIMEOUT) {
        dst.timeout = src.timeout;
    }
    if has(IBV_QP_RETRY_CNT) {
        dst.retry_cnt = src.retry_cnt;
    }
    if has(IBV_QP_RNR_RETRY) {
        dst.rnr_retry = src.rnr_retry;
    }
    if has(IBV_QP_RQ_PSN) {
        dst.rq_psn = src.rq_psn;
    }
    if has(IBV_QP_MAX_QP_RD_ATOMIC) {
        dst.max_rd_atomic = src.max_rd_atomic;
    }
    if has(IBV_QP_MIN_RNR_TIMER) {
        dst.min_rnr_timer = src.min_rnr_timer;
    }
    if has(IBV_QP_SQ_PSN) {
        dst.sq_psn = src.sq_psn;
    }
    if has(IBV_QP_MAX_DEST_RD_ATOMIC) {
        dst.max_dest_rd_atomic = src.max_dest_rd_atomic;
    }
    if has(IBV_QP_DEST_QPN) {
        dst.dest_qp_num = src.dest_qp_num;
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    // SAFETY: the export contract.
    let (Some(q), false) = ((unsafe { rec::<ShimQp, _>(qp) }), attr.is_null()) else {
        return libc::EINVAL;
    };
    // SAFETY: caller's input.
    let a = unsafe { &*attr };
    let verbs_attr = match qp_attr_from_raw(q.local, a, mask) {
        Ok(v) => v,
        Err(e) => return e,
    };
    if let Err(e) = q.backend.modify_qp(q.handle, &verbs_attr) {
        return fail(&e);
    }
    merge_attr(&mut lock(&q.attr), a, mask);
    if mask & IBV_QP_STATE != 0 {
        // SAFETY: our own QP record; programs read `state`.
        let was = unsafe { (*qp).state };
        // SAFETY: as above.
        unsafe { (*qp).state = a.qp_state };
        if q.srq.is_some() && a.qp_state == IBV_QPS_ERR && was != IBV_QPS_ERR {
            // A QP of an SRQ put in error consumes no more of its WQEs.
            crate::events::raise(qp as usize, crate::events::event_type::QP_LAST_WQE_REACHED);
        }
    }
    if let Some(s) = &q.srq {
        s.refill();
    }
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the export contract.
    let (Some(q), false) = ((unsafe { rec::<ShimQp, _>(qp) }), attr.is_null()) else {
        return libc::EINVAL;
    };
    let state = match q.backend.query_qp_state(q.handle) {
        Ok(s) => s.value(),
        Err(e) => return fail(&e),
    };
    let mut out = *lock(&q.attr);
    out.qp_state = state;
    out.cur_qp_state = state;
    out.cap = q.init_cap;
    // SAFETY: caller outputs.
    unsafe {
        *attr = out;
        if !init.is_null() {
            *init = ibv_qp_init_attr {
                qp_context: q.qp.qp_context,
                send_cq: q.qp.send_cq,
                recv_cq: q.qp.recv_cq,
                srq: q.qp.srq,
                cap: q.init_cap,
                qp_type: q.qp.qp_type,
                sq_sig_all: q.sq_sig_all,
            };
        }
    }
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: the export contract.
    let Some(q) = (unsafe { rec::<ShimQp, _>(qp) }) else {
        return libc::EINVAL;
    };
    if let Err(e) = q.backend.destroy_qp(q.handle) {
        return fail(&e);
    }
    crate::events::unregister(qp as usize);
    crate::domain::release(qp as usize);
    if let Some(s) = &q.srq {
        s.detach(qp as usize);
    }
    // SAFETY: allocated by ibv_create_qp; the backend released it.
    drop(unsafe { Box::from_raw(qp.cast::<ShimQp>()) });
    0
}

// ---------------------------------------------------------------- AH

#[no_mangle]
unsafe extern "C" fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah {
    // SAFETY: the export contract.
    let (Some(p), false) = ((unsafe { rec::<ShimPd, _>(pd) }), attr.is_null()) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // SAFETY: caller's input.
    let raw = unsafe { &*attr };
    if raw.is_global == 0 && raw.dlid == 0 {
        // A RoCE port addresses by GID: without a GRH, only the DLID the
        // emulation maps to an address next to ours could name a peer, and
        // LID 0 names none (a NIC refuses any GRH-less AH on RoCE).
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let a = ah_from_raw(p.local, raw);
    match p.backend.create_ah(p.handle, &a) {
        Ok(handle) => Box::into_raw(Box::new(ShimAh {
            ah: ibv_ah {
                context: p.pd.context,
                pd,
                handle: handle.0 as u32,
            },
            handle,
            backend: p.backend.clone(),
        }))
        .cast(),
        Err(e) => {
            set_errno(fail(&e));
            ptr::null_mut()
        }
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_destroy_ah(ah: *mut ibv_ah) -> c_int {
    // SAFETY: the export contract.
    let Some(a) = (unsafe { rec::<ShimAh, _>(ah) }) else {
        return libc::EINVAL;
    };
    if let Err(e) = a.backend.destroy_ah(a.handle) {
        return fail(&e);
    }
    // SAFETY: allocated by ibv_create_ah.
    drop(unsafe { Box::from_raw(ah.cast::<ShimAh>()) });
    0
}

/// The source address of a UD receive from its GRH area: RoCEv2 over IPv4
/// puts 20 unused bytes, then the IPv4 header (source at bytes 12..16).
fn grh_source(grh: &[u8; 40]) -> Gid {
    if grh[0] >> 4 == 6 {
        let mut g = [0u8; 16];
        g.copy_from_slice(&grh[8..24]);
        Gid(g)
    } else {
        Gid::from_ip(Ipv4Addr::new(grh[32], grh[33], grh[34], grh[35]).into())
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_init_ah_from_wc(
    ctx: *mut ibv_context,
    port: u8,
    wc: *mut ibv_wc,
    grh: *mut [u8; 40],
    ah_attr: *mut ibv_ah_attr,
) -> c_int {
    if ctx_of(ctx).is_none() || wc.is_null() || ah_attr.is_null() {
        return libc::EINVAL;
    }
    // SAFETY: caller's structs.
    let (w, out) = unsafe { (&*wc, &mut *ah_attr) };
    *out = ibv_ah_attr {
        dlid: w.slid,
        sl: w.sl,
        src_path_bits: w.dlid_path_bits,
        port_num: port,
        ..Default::default()
    };
    if w.wc_flags & IBV_WC_GRH != 0 && !grh.is_null() {
        // SAFETY: the program's receive buffer starts with the GRH area.
        let src = grh_source(unsafe { &*grh });
        out.is_global = 1;
        out.grh.dgid = ibv_gid::from_bytes(src.0);
        out.grh.hop_limit = 0xFF;
    }
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_create_ah_from_wc(
    pd: *mut ibv_pd,
    wc: *mut ibv_wc,
    grh: *mut [u8; 40],
    port: u8,
) -> *mut ibv_ah {
    // SAFETY: the export contract.
    let Some(p) = (unsafe { rec::<ShimPd, _>(pd) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    let mut attr = ibv_ah_attr::default();
    // SAFETY: forwarded.
    let rc = unsafe { ibv_init_ah_from_wc(p.pd.context, port, wc, grh, &mut attr) };
    if rc != 0 {
        set_errno(rc);
        return ptr::null_mut();
    }
    // SAFETY: forwarded.
    unsafe { ibv_create_ah(pd, &mut attr) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grh_less_vectors_go_to_the_dlid_next_to_us() {
        let ah = ibv_ah_attr {
            dlid: 0x0102,
            ..Default::default()
        };
        let g = dest_gid(Ipv4Addr::new(127, 0, 9, 9), &ah);
        assert_eq!(g.to_ipv4(), Some(Ipv4Addr::new(127, 0, 1, 2)));
        let mut ah = ah;
        ah.is_global = 1;
        ah.grh.dgid = ibv_gid::from_bytes(Gid::from_ip(Ipv4Addr::new(10, 1, 2, 3).into()).0);
        assert_eq!(
            dest_gid(Ipv4Addr::LOCALHOST, &ah).to_ipv4(),
            Some(Ipv4Addr::new(10, 1, 2, 3))
        );
    }

    #[test]
    fn grh_source_reads_ipv4_and_ipv6_headers() {
        let mut grh = [0u8; 40];
        grh[20] = 0x45;
        grh[32..36].copy_from_slice(&[127, 0, 3, 4]);
        assert_eq!(
            grh_source(&grh).to_ipv4(),
            Some(Ipv4Addr::new(127, 0, 3, 4))
        );
        let mut grh = [0u8; 40];
        grh[0] = 0x60;
        grh[8..24].copy_from_slice(&[0xfe, 0x80, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(grh_source(&grh).0[0], 0xfe);
    }

    #[test]
    fn modify_attributes_translate_with_their_mask() {
        let a = ibv_qp_attr {
            qp_state: IBV_QPS_RTR,
            path_mtu: IBV_MTU_1024,
            dest_qp_num: 0x1234,
            rq_psn: 77,
            ah_attr: ibv_ah_attr {
                dlid: 5,
                ..Default::default()
            },
            ..Default::default()
        };
        let mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        let q = qp_attr_from_raw(Ipv4Addr::new(127, 0, 0, 1), &a, mask).unwrap();
        assert_eq!(q.qp_state, QpState::Rtr);
        assert_eq!(q.path_mtu, Mtu::Mtu1024);
        assert_eq!(q.dest_qp_num, Qpn::new(0x1234));
        assert_eq!(q.ah_attr.dgid.to_ipv4(), Some(Ipv4Addr::new(127, 0, 0, 5)));
        let bad = ibv_qp_attr {
            qp_state: 99,
            ..Default::default()
        };
        assert_eq!(
            qp_attr_from_raw(Ipv4Addr::LOCALHOST, &bad, IBV_QP_STATE).unwrap_err(),
            libc::EINVAL
        );
    }
}
