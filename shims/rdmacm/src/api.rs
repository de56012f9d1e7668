//! The exported `rdma_*` functions.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;

use verbs_emu::backend::ibverbs::ffi::*;

use crate::addrinfo::{read_sockaddr, write_sockaddr};
use crate::channel::{lock, Channel, ChannelRec, EventRec};
use crate::devices::{devices, index_for};
use crate::ffi::*;
use crate::id::{
    conn_param_of, fill_route, initial_psn, start_active, start_listener, IdRec, IdState, Params,
    Phase, DEFAULT_BACKLOG, MAX_RD_ATOMIC,
};
use crate::wire::{Conn, Msg, MAX_REJ_PRIVATE, MAX_REP_PRIVATE, MAX_REQ_PRIVATE};
use crate::{fail, set_errno};

/// The id record behind `id`, or fail with `EINVAL`.
macro_rules! id_or_fail {
    ($id:expr) => {
        // SAFETY: the export contract: null or a live id of ours.
        match unsafe { IdRec::from_ptr($id) } {
            Some(r) => r,
            None => return fail(libc::EINVAL),
        }
    };
}

#[no_mangle]
unsafe extern "C" fn rdma_create_event_channel() -> *mut rdma_event_channel {
    match Channel::create() {
        Ok(rec) => rec.cast(),
        Err(e) => {
            set_errno(e);
            ptr::null_mut()
        }
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_event_channel(channel: *mut rdma_event_channel) {
    if !channel.is_null() {
        // SAFETY: a channel record of ours, destroyed once; ids still on it
        // keep the shared part (and its descriptors) alive.
        drop(unsafe { Box::from_raw(channel.cast::<ChannelRec>()) });
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_create_id(
    channel: *mut rdma_event_channel,
    id: *mut *mut rdma_cm_id,
    context: *mut c_void,
    ps: c_int,
) -> c_int {
    if id.is_null() {
        return fail(libc::EINVAL);
    }
    let qp_type = match ps {
        RDMA_PS_TCP | RDMA_PS_IB => IBV_QPT_RC,
        RDMA_PS_UDP | RDMA_PS_IPOIB => IBV_QPT_UD,
        _ => return fail(libc::EINVAL),
    };
    // SAFETY: caller's output.
    unsafe { *id = create_id(channel, context, ps, qp_type) };
    if unsafe { *id }.is_null() {
        return -1;
    }
    0
}

/// A new id on `channel`, or, for a null channel, a synchronous id on a
/// channel of its own (null and errno set on failure).
fn create_id(
    channel: *mut rdma_event_channel,
    context: *mut c_void,
    ps: c_int,
    qp_type: u32,
) -> *mut rdma_cm_id {
    let (channel, own) = if channel.is_null() {
        match Channel::create() {
            Ok(c) => (c.cast(), c),
            Err(e) => {
                set_errno(e);
                return ptr::null_mut();
            }
        }
    } else {
        (channel, ptr::null_mut())
    };
    // SAFETY: a channel record of ours.
    let chan = unsafe { &*channel.cast::<ChannelRec>() };
    let rec = IdRec::create(channel, chan.sh.clone(), context, ps, qp_type);
    // SAFETY: the fresh record.
    let r = unsafe { &mut *rec };
    r.sync_chan = own;
    lock(&r.sh.st).sync = !own.is_null();
    rec.cast()
}

/// A synchronous id waits here for the event its call started, as
/// rdma-core's: the previous event is acknowledged, the new one stays in
/// `id->event`, and an error event fails the call (`ECONNREFUSED` for a
/// reject, the status's errno otherwise). Asynchronous ids return 0.
fn complete(rec: &mut IdRec) -> c_int {
    if rec.sync_chan.is_null() {
        return 0;
    }
    if !rec.id.event.is_null() {
        // SAFETY: the id's previous event, ours, acknowledged once.
        drop(unsafe { Box::from_raw(rec.id.event.cast::<EventRec>()) });
        rec.id.event = ptr::null_mut();
    }
    // SAFETY: the id's own channel record.
    let chan = unsafe { &*rec.id.channel.cast::<ChannelRec>() };
    let ev = match chan.sh.get() {
        Ok(ev) => ev,
        Err(e) => return fail(e),
    };
    rec.id.event = ev.cast();
    // SAFETY: the event just taken.
    let (kind, status) = unsafe { ((*ev).ev.event, (*ev).ev.status) };
    match status {
        0 => 0,
        _ if kind == RDMA_CM_EVENT_REJECTED => fail(libc::ECONNREFUSED),
        s => fail(s.abs()),
    }
}

/// Run an id's call, then wait for its event if the id is synchronous.
macro_rules! then_complete {
    ($id:expr, $call:expr) => {{
        let r = $call;
        if r != 0 {
            return r;
        }
        // SAFETY: the export contract (the call above checked for null).
        match unsafe { IdRec::from_ptr($id) } {
            Some(rec) => complete(rec),
            None => 0,
        }
    }};
}

#[no_mangle]
unsafe extern "C" fn rdma_resolve_addr(
    id: *mut rdma_cm_id,
    src_addr: *mut libc::sockaddr,
    dst_addr: *mut libc::sockaddr,
    timeout_ms: c_int,
) -> c_int {
    // SAFETY: same contract.
    then_complete!(id, unsafe {
        resolve_addr_async(id, src_addr, dst_addr, timeout_ms)
    })
}

#[no_mangle]
unsafe extern "C" fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int {
    // SAFETY: same contract.
    then_complete!(id, unsafe { resolve_route_async(id, timeout_ms) })
}

#[no_mangle]
unsafe extern "C" fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    // SAFETY: same contract.
    then_complete!(id, unsafe { connect_async(id, conn_param) })
}

#[no_mangle]
unsafe extern "C" fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    // SAFETY: same contract; a UD accept has no event to wait for.
    let ud = unsafe { id.as_ref() }.is_some_and(|i| i.qp_type == IBV_QPT_UD);
    if ud {
        // SAFETY: as above.
        return unsafe { accept_async(id, conn_param) };
    }
    // SAFETY: as above.
    then_complete!(id, unsafe { accept_async(id, conn_param) })
}

#[no_mangle]
unsafe extern "C" fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int {
    // SAFETY: same contract.
    then_complete!(id, unsafe { disconnect_async(id) })
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int {
    let rec = id_or_fail!(id);
    let sh = rec.sh.clone();
    let chan = {
        let mut st = lock(&sh.st);
        if matches!(
            st.phase,
            Phase::Connected | Phase::Accepted | Phase::RepReceived
        ) && !st.disc_sent
        {
            // The kernel's CM sends a DREQ for a connected id going away.
            let _ = st.send(&Msg::Dreq);
        }
        st.destroyed = true;
        st.hang_up();
        if let Some(l) = st.listener.take() {
            // Wakes the accept loop.
            // SAFETY: shutting down our own listening socket.
            unsafe { libc::shutdown(l.as_raw_fd(), libc::SHUT_RDWR) };
        }
        st.chan.clone()
    };
    chan.purge(id);
    // Connect requests still queued for a listener go with it, their ids
    // destroyed (the peer sees its connection close), as the kernel's CM
    // does: their events would name a freed listener.
    for child in chan.withdraw_requests(id) {
        // SAFETY: a live id of ours, created for the request and never
        // handed to the program; its event is gone.
        unsafe { rdma_destroy_id(child) };
    }
    // SAFETY: the record and its path record are ours; no thread touches
    // them once `destroyed` is set (see id.rs). A synchronous id's pending
    // event and its own channel go with it.
    unsafe {
        let rec = Box::from_raw(id.cast::<IdRec>());
        if !rec.id.route.path_rec.is_null() {
            drop(Box::from_raw(rec.id.route.path_rec));
        }
        if !rec.sync_chan.is_null() {
            if !rec.id.event.is_null() {
                drop(Box::from_raw(rec.id.event.cast::<EventRec>()));
            }
            drop(Box::from_raw(rec.sync_chan));
        }
    }
    0
}

/// An address family's wildcard or loopback status decides the route's
/// source: the loopback address for a loopback or wildcard destination.
fn local_source(dst: &SocketAddr, dev_ip: Ipv4Addr) -> IpAddr {
    match dst.ip() {
        IpAddr::V4(a) if a.is_loopback() || a.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(a) if a.is_loopback() || a.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        IpAddr::V6(_) => IpAddr::V6(dev_ip.to_ipv6_mapped()),
        IpAddr::V4(_) => IpAddr::V4(dev_ip),
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int {
    let rec = id_or_fail!(id);
    // SAFETY: the caller's address.
    let a = match unsafe { read_sockaddr(addr) } {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    let mut st = lock(&rec.sh.st);
    if st.phase != Phase::Idle {
        return fail(libc::EINVAL);
    }
    let listener = match TcpListener::bind(a) {
        Ok(l) => l,
        Err(e) => return fail(e.raw_os_error().unwrap_or(libc::EADDRNOTAVAIL)),
    };
    let local = listener.local_addr().unwrap_or(a);
    if !a.ip().is_unspecified() {
        let devs = match devices() {
            Ok(d) => d,
            Err(e) => return fail(e),
        };
        let di = index_for(&devs.list, a.ip());
        rec.id.verbs = devs.list[di].ctx.0;
        rec.id.pd = devs.list[di].pd.0;
        rec.id.port_num = 1;
        st.dev = Some(di);
        fill_route(&mut rec.id, Some(local), None, &devs.list[di], None);
    } else {
        write_sockaddr(&mut rec.id.route.addr.src_storage, local);
    }
    st.src = Some(local);
    st.listener = Some(listener);
    st.phase = Phase::Bound;
    0
}

#[no_mangle]
unsafe extern "C" fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int {
    let rec = id_or_fail!(id);
    // As the kernel's CM: 0 or less, or more than the maximum, means the
    // maximum (see id::DEFAULT_BACKLOG).
    let backlog = usize::try_from(backlog)
        .ok()
        .filter(|&b| b > 0)
        .map_or(DEFAULT_BACKLOG, |b| b.min(DEFAULT_BACKLOG));
    let mut st = lock(&rec.sh.st);
    if st.phase == Phase::Idle {
        // rdma-core binds an unbound id to the wildcard address first.
        drop(st);
        // SAFETY: plain data; all-zero is valid.
        let mut any: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        write_sockaddr(&mut any, SocketAddr::from(([0, 0, 0, 0], 0)));
        // SAFETY: our own id and address.
        let r = unsafe { rdma_bind_addr(id, ptr::from_mut(&mut any).cast()) };
        if r != 0 {
            return r;
        }
        st = lock(&rec.sh.st);
    }
    if st.phase != Phase::Bound {
        return fail(libc::EINVAL);
    }
    let Some(l) = st.listener.as_ref().and_then(|l| l.try_clone().ok()) else {
        return fail(libc::EINVAL);
    };
    st.phase = Phase::Listening;
    st.backlog = backlog;
    drop(st);
    start_listener(rec.sh.clone(), l);
    0
}

/// `rdma_resolve_addr` up to the event (see [`complete`]).
unsafe fn resolve_addr_async(
    id: *mut rdma_cm_id,
    src_addr: *mut libc::sockaddr,
    dst_addr: *mut libc::sockaddr,
    _timeout_ms: c_int,
) -> c_int {
    let rec = id_or_fail!(id);
    // SAFETY: the caller's addresses.
    let dst = match unsafe { read_sockaddr(dst_addr) } {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    // SAFETY: as above; null means "choose".
    let src = if src_addr.is_null() {
        None
    } else {
        match unsafe { read_sockaddr(src_addr) } {
            Ok(a) => Some(a),
            Err(e) => return fail(e),
        }
    };
    let devs = match devices() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let mut st = lock(&rec.sh.st);
    if !matches!(st.phase, Phase::Idle | Phase::Bound | Phase::AddrResolved) {
        return fail(libc::EINVAL);
    }
    let key = src
        .map(|s| s.ip())
        .filter(|ip| !ip.is_unspecified())
        .or(st.src.map(|s| s.ip()).filter(|ip| !ip.is_unspecified()))
        .unwrap_or(dst.ip());
    let di = index_for(&devs.list, key);
    let dev = &devs.list[di];
    let src = src
        .filter(|s| !s.ip().is_unspecified())
        .unwrap_or_else(|| SocketAddr::new(local_source(&dst, dev.ip()), 0));
    rec.id.verbs = dev.ctx.0;
    if rec.id.pd.is_null() {
        rec.id.pd = dev.pd.0;
    }
    rec.id.port_num = 1;
    fill_route(&mut rec.id, Some(src), Some(dst), dev, None);
    st.dev = Some(di);
    st.dst = Some(dst);
    st.listener = None;
    st.phase = Phase::AddrResolved;
    st.post(EventRec::new(id, RDMA_CM_EVENT_ADDR_RESOLVED, 0));
    0
}

/// `rdma_resolve_route` up to the event (see [`complete`]).
unsafe fn resolve_route_async(id: *mut rdma_cm_id, _timeout_ms: c_int) -> c_int {
    let rec = id_or_fail!(id);
    let mut st = lock(&rec.sh.st);
    if st.phase != Phase::AddrResolved {
        return fail(libc::EINVAL);
    }
    let (_, dev) = match st.device() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    // One path: from the device to the destination's address (the peer's
    // device GID comes with its REP).
    let mut dgid = [0u8; 16];
    dgid[10] = 0xff;
    dgid[11] = 0xff;
    if let Some(SocketAddr::V4(d)) = st.dst {
        dgid[12..].copy_from_slice(&d.ip().octets());
    }
    if rec.id.route.path_rec.is_null() {
        rec.id.route.path_rec = Box::into_raw(Box::default());
    }
    // SAFETY: our own path record.
    let p = unsafe { &mut *rec.id.route.path_rec };
    *p = ibv_sa_path_rec {
        dgid: ibv_gid { raw: dgid },
        sgid: ibv_gid { raw: dev.gid },
        hop_limit: 64,
        traffic_class: st.tos,
        reversible: 1,
        numb_path: 1,
        pkey: 0xFFFFu16.to_be(),
        mtu_selector: 2,
        mtu: dev.mtu,
        rate_selector: 2,
        packet_life_time_selector: 2,
        ..Default::default()
    };
    rec.id.route.num_paths = 1;
    rec.id.route.addr.ibaddr.dgid = ibv_gid { raw: dgid };
    st.phase = Phase::RouteResolved;
    st.post(EventRec::new(id, RDMA_CM_EVENT_ROUTE_RESOLVED, 0));
    0
}

/// Create the id's QP on `pd` and move it to INIT (UD: to RTS), as
/// rdma-core's CM does.
fn create_qp(rec: &mut IdRec, pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> c_int {
    if attr.is_null() {
        return fail(libc::EINVAL);
    }
    let pd = if pd.is_null() { rec.id.pd } else { pd };
    if pd.is_null() || rec.id.verbs.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: the program's PD and attributes.
    let (pd_ctx, a) = unsafe { ((*pd).context, &mut *attr) };
    if pd_ctx != rec.id.verbs {
        return fail(libc::EINVAL);
    }
    let devs = match devices() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let sh = rec.sh.clone();
    let mut st = lock(&sh.st);
    if !st.qp.0.is_null() {
        return fail(libc::EINVAL);
    }
    // Missing CQs are made as rdma-core makes them: one per direction,
    // each with its own completion channel, kept on the id.
    if let Err(e) = create_cqs(rec, devs, a) {
        destroy_cqs(rec, devs);
        return fail(e);
    }
    // SAFETY: the exported ibv_create_qp with the program's arguments.
    let qp = unsafe { (devs.verbs.create_qp)(pd, attr) };
    if qp.is_null() {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL);
        destroy_cqs(rec, devs);
        return fail(e);
    }
    st.qp = crate::SendPtr(qp);
    // SAFETY: the QP just created.
    let (qpn, qp_type) = unsafe { ((*qp).qp_num, (*qp).qp_type) };
    st.psn = initial_psn(qpn);
    let r = if qp_type == IBV_QPT_UD {
        ud_ready(&st, qp)
    } else {
        st.move_qp(IBV_QPS_INIT)
    };
    if let Err(e) = r {
        st.qp = crate::SendPtr(ptr::null_mut());
        // SAFETY: our QP, never handed out.
        unsafe { (devs.verbs.destroy_qp)(qp) };
        drop(st);
        destroy_cqs(rec, devs);
        return fail(e);
    }
    rec.id.qp = qp;
    rec.id.pd = pd;
    0
}

/// Give `a` the id's CQs where it names none, creating them (size: the
/// queue's depth) on first use.
fn create_cqs(
    rec: &mut IdRec,
    devs: &crate::devices::Devices,
    a: &mut ibv_qp_init_attr,
) -> Result<(), c_int> {
    let errno = || {
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOMEM)
    };
    let id_ptr = ptr::from_mut(&mut rec.id).cast::<c_void>();
    let id = &mut rec.id;
    for (cq, chan, size, slot) in [
        (
            &mut id.send_cq,
            &mut id.send_cq_channel,
            a.cap.max_send_wr,
            &mut a.send_cq,
        ),
        (
            &mut id.recv_cq,
            &mut id.recv_cq_channel,
            a.cap.max_recv_wr,
            &mut a.recv_cq,
        ),
    ] {
        if !slot.is_null() {
            continue;
        }
        if cq.is_null() {
            // SAFETY: the id's open context.
            *chan = unsafe { (devs.verbs.create_comp_channel)(id.verbs) };
            if chan.is_null() {
                return Err(errno());
            }
            let cqe = c_int::try_from(size.max(1)).unwrap_or(c_int::MAX);
            // SAFETY: as above, with the channel just made.
            *cq = unsafe { (devs.verbs.create_cq)(id.verbs, cqe, id_ptr, *chan, 0) };
            if cq.is_null() {
                return Err(errno());
            }
        }
        *slot = *cq;
    }
    Ok(())
}

/// Destroy the CQs and channels [`create_cqs`] made for the id.
fn destroy_cqs(rec: &mut IdRec, devs: &crate::devices::Devices) {
    let id = &mut rec.id;
    for (cq, chan) in [
        (&mut id.send_cq, &mut id.send_cq_channel),
        (&mut id.recv_cq, &mut id.recv_cq_channel),
    ] {
        if !cq.is_null() {
            // SAFETY: a CQ of ours, destroyed once.
            unsafe { (devs.verbs.destroy_cq)(*cq) };
            *cq = ptr::null_mut();
        }
        if !chan.is_null() {
            // SAFETY: its channel, destroyed once.
            unsafe { (devs.verbs.destroy_comp_channel)(*chan) };
            *chan = ptr::null_mut();
        }
    }
}

/// A UD QP needs no peer: INIT, RTR and RTS at once.
fn ud_ready(st: &IdState, qp: *mut ibv_qp) -> Result<(), c_int> {
    st.move_qp(IBV_QPS_INIT)?;
    let devs = devices()?;
    for (state, mask) in [
        (IBV_QPS_RTR, IBV_QP_STATE),
        (IBV_QPS_RTS, IBV_QP_STATE | IBV_QP_SQ_PSN),
    ] {
        let mut a = ibv_qp_attr {
            qp_state: state,
            sq_psn: st.psn,
            ..Default::default()
        };
        // SAFETY: the id's live QP.
        match unsafe { (devs.verbs.modify_qp)(qp, &mut a, mask) } {
            0 => {}
            e => return Err(e),
        }
    }
    Ok(())
}

#[no_mangle]
unsafe extern "C" fn rdma_create_qp(
    id: *mut rdma_cm_id,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    let rec = id_or_fail!(id);
    create_qp(rec, pd, qp_init_attr)
}

#[no_mangle]
unsafe extern "C" fn rdma_create_qp_ex(
    id: *mut rdma_cm_id,
    attr: *mut ibv_qp_init_attr_ex_head,
) -> c_int {
    let rec = id_or_fail!(id);
    if attr.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: the program's attributes; only the head is read unless
    // comp_mask names more, which is refused.
    let a = unsafe { &mut *attr };
    if a.comp_mask & !IBV_QP_INIT_ATTR_PD != 0 {
        // Extended QPs (send-ops flags, create flags ...) are not there.
        return fail(libc::EOPNOTSUPP);
    }
    let pd = if a.comp_mask & IBV_QP_INIT_ATTR_PD != 0 {
        a.pd
    } else {
        ptr::null_mut()
    };
    let mut plain = a.plain();
    let r = create_qp(rec, pd, &mut plain);
    // ibv_create_qp reports the capabilities it granted.
    a.cap = plain.cap;
    r
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_qp(id: *mut rdma_cm_id) {
    // SAFETY: the export contract.
    let Some(rec) = (unsafe { IdRec::from_ptr(id) }) else {
        return;
    };
    let mut st = lock(&rec.sh.st);
    let qp = std::mem::replace(&mut st.qp, crate::SendPtr(ptr::null_mut())).0;
    drop(st);
    if let Ok(devs) = devices() {
        if !qp.is_null() {
            // SAFETY: the id's QP, destroyed once.
            unsafe { (devs.verbs.destroy_qp)(qp) };
        }
        destroy_cqs(rec, devs);
    }
    rec.id.qp = ptr::null_mut();
}

/// This side's parameters from the program's `rdma_conn_param`: READ/atomic
/// depths over the device's (16) are refused, except 255, rdma-core's
/// "as many as the device takes".
fn params_of(p: &rdma_conn_param) -> Result<Params, c_int> {
    let depth = |v: u8| match v {
        0xFF => Ok(MAX_RD_ATOMIC),
        v if v <= MAX_RD_ATOMIC => Ok(v),
        _ => Err(libc::EINVAL),
    };
    Ok(Params {
        responder_resources: depth(p.responder_resources)?,
        initiator_depth: depth(p.initiator_depth)?,
        retry_count: p.retry_count.min(7),
        rnr_retry_count: p.rnr_retry_count.min(7),
    })
}

/// The program's private data, at most `max` bytes.
///
/// # Safety
///
/// `p` is null or readable for `len` bytes.
unsafe fn private_of(p: *const c_void, len: u8, max: usize) -> Result<Vec<u8>, c_int> {
    let len = usize::from(len);
    if len > max {
        return Err(libc::EINVAL);
    }
    if p.is_null() || len == 0 {
        return Ok(Vec::new());
    }
    // SAFETY: the caller's buffer of len bytes.
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec())
}

/// This side's half of a REQ or REP.
fn my_conn(
    st: &IdState,
    qp_num: u32,
    qp_type: u32,
    srq: bool,
    flow_control: u8,
    private: Vec<u8>,
) -> Result<Conn, c_int> {
    let (_, dev) = st.device()?;
    Ok(Conn {
        gid: dev.gid,
        qpn: qp_num & 0xFF_FFFF,
        psn: st.psn,
        qp_type: qp_type as u8,
        mtu: dev.mtu,
        responder_resources: st.mine.responder_resources,
        initiator_depth: st.mine.initiator_depth,
        retry_count: st.mine.retry_count,
        rnr_retry_count: st.mine.rnr_retry_count,
        srq: u8::from(srq),
        flow_control: flow_control.min(1),
        private,
    })
}

/// The QP number, type and SRQ use the CM announces: the id's QP's, or
/// the program's own (`conn_param.qp_num`) when the id has none.
fn qp_identity(st: &mut IdState, id: &rdma_cm_id, p: Option<&rdma_conn_param>) -> (u32, u32, bool) {
    let qp = st.qp.0;
    if qp.is_null() {
        let qpn = p.map_or(0, |p| p.qp_num);
        if st.psn == 0 {
            st.psn = initial_psn(qpn).max(1);
        }
        (qpn, id.qp_type, p.is_some_and(|p| p.srq != 0))
    } else {
        // SAFETY: the id's live QP.
        let q = unsafe { &*qp };
        (q.qp_num, q.qp_type, !q.srq.is_null())
    }
}

/// `rdma_connect` up to the event (see [`complete`]).
unsafe fn connect_async(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    let rec = id_or_fail!(id);
    // SAFETY: the caller's parameters or null.
    let p = unsafe { conn_param.as_ref() };
    let mut st = lock(&rec.sh.st);
    if st.phase != Phase::RouteResolved {
        return fail(libc::EINVAL);
    }
    let Some(dst) = st.dst else {
        return fail(libc::EINVAL);
    };
    let defaults = rdma_conn_param {
        private_data: ptr::null(),
        private_data_len: 0,
        responder_resources: 0,
        initiator_depth: 0,
        flow_control: 0,
        retry_count: 7,
        rnr_retry_count: 7,
        srq: 0,
        qp_num: 0,
    };
    let p_eff = p.copied().unwrap_or(defaults);
    st.mine = match params_of(&p_eff) {
        Ok(m) => m,
        Err(e) => return fail(e),
    };
    // SAFETY: the program's private data.
    let private =
        match unsafe { private_of(p_eff.private_data, p_eff.private_data_len, MAX_REQ_PRIVATE) } {
            Ok(v) => v,
            Err(e) => return fail(e),
        };
    let (qpn, qp_type, srq) = qp_identity(&mut st, &rec.id, p);
    if qpn == 0 {
        return fail(libc::EINVAL);
    }
    let req = match my_conn(&st, qpn, qp_type, srq, p_eff.flow_control, private) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // The connection comes from the device's address, the GID the REQ
    // names (id::gid_admitted).
    let src = st.device().ok().map(|(_, d)| d.ip());
    st.phase = Phase::Connecting;
    st.req_qp_type = req.qp_type;
    drop(st);
    start_active(rec.sh.clone(), src, dst, Msg::Req(req));
    0
}

/// `rdma_accept` up to the event (see [`complete`]).
unsafe fn accept_async(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int {
    let rec = id_or_fail!(id);
    // SAFETY: the caller's parameters or null.
    let p = unsafe { conn_param.as_ref() };
    let mut st = lock(&rec.sh.st);
    if st.phase != Phase::ReqReceived {
        return fail(libc::EINVAL);
    }
    let Some(peer) = st.peer.clone() else {
        return fail(libc::EINVAL);
    };
    // Without parameters the request's own (seen from this side) apply.
    let p_eff = match p {
        Some(p) => *p,
        None => {
            let mut d = conn_param_of(&peer);
            d.responder_resources = d.responder_resources.min(MAX_RD_ATOMIC);
            d.initiator_depth = d.initiator_depth.min(MAX_RD_ATOMIC);
            d.qp_num = 0;
            d
        }
    };
    st.mine = match params_of(&p_eff) {
        Ok(mut m) => {
            // The retry count of a passive side is the request's.
            m.retry_count = peer.retry_count;
            m
        }
        Err(e) => return fail(e),
    };
    // SAFETY: the program's private data.
    let private =
        match unsafe { private_of(p_eff.private_data, p_eff.private_data_len, MAX_REP_PRIVATE) } {
            Ok(v) => v,
            Err(e) => return fail(e),
        };
    let (qpn, qp_type, srq) = qp_identity(&mut st, &rec.id, p);
    if qpn == 0 {
        return fail(libc::EINVAL);
    }
    let ud = qp_type == IBV_QPT_UD;
    // A UD QP is ready from its creation; a connected one moves now.
    if !ud {
        if let Err(e) = st.qp_ready() {
            return fail(e);
        }
    }
    let rep = match my_conn(&st, qpn, qp_type, srq, p_eff.flow_control, private) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if let Err(e) = st.send(&Msg::Rep(rep)) {
        st.phase = Phase::Failed;
        return fail(e);
    }
    if ud {
        st.phase = Phase::SidrDone;
        st.hang_up();
    } else {
        st.phase = Phase::Accepted;
    }
    0
}

#[no_mangle]
unsafe extern "C" fn rdma_reject(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    let rec = id_or_fail!(id);
    // SAFETY: the program's private data.
    let private = match unsafe { private_of(private_data, private_data_len, MAX_REJ_PRIVATE) } {
        Ok(v) => v,
        Err(e) => return fail(e),
    };
    let mut st = lock(&rec.sh.st);
    if st.phase != Phase::ReqReceived {
        return fail(libc::EINVAL);
    }
    let r = st.send(&Msg::Rej(private));
    st.phase = Phase::Failed;
    st.hang_up();
    match r {
        Ok(()) => 0,
        Err(e) => fail(e),
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_reject_ece(
    id: *mut rdma_cm_id,
    private_data: *const c_void,
    private_data_len: u8,
) -> c_int {
    // SAFETY: same contract.
    unsafe { rdma_reject(id, private_data, private_data_len) }
}

#[no_mangle]
unsafe extern "C" fn rdma_establish(id: *mut rdma_cm_id) -> c_int {
    let rec = id_or_fail!(id);
    let mut st = lock(&rec.sh.st);
    if st.phase != Phase::RepReceived {
        return fail(libc::EINVAL);
    }
    if let Err(e) = st.send(&Msg::Rtu) {
        return fail(e);
    }
    st.phase = Phase::Connected;
    0
}

#[no_mangle]
unsafe extern "C" fn rdma_notify(id: *mut rdma_cm_id, _event: c_int) -> c_int {
    let _ = id_or_fail!(id);
    0
}

/// `rdma_disconnect` up to the event (see [`complete`]).
unsafe fn disconnect_async(id: *mut rdma_cm_id) -> c_int {
    let rec = id_or_fail!(id);
    let mut st = lock(&rec.sh.st);
    if !matches!(
        st.phase,
        Phase::Connected | Phase::Accepted | Phase::RepReceived | Phase::Disconnected
    ) {
        return fail(libc::EINVAL);
    }
    st.qp_error();
    if !st.disc_sent && !st.disc_reported {
        st.disc_sent = true;
        if st.send(&Msg::Dreq).is_err() {
            // The peer is gone: nothing will answer.
            st.disc_reported = true;
            st.post(EventRec::new(id, RDMA_CM_EVENT_DISCONNECTED, 0));
        }
    }
    st.phase = Phase::Disconnected;
    0
}

#[no_mangle]
unsafe extern "C" fn rdma_get_cm_event(
    channel: *mut rdma_event_channel,
    event: *mut *mut rdma_cm_event,
) -> c_int {
    if channel.is_null() || event.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: a channel record of ours.
    let chan = unsafe { &*channel.cast::<ChannelRec>() };
    match chan.sh.get() {
        Ok(ev) => {
            // SAFETY: caller's output; the event stays valid until acked.
            unsafe { *event = ev.cast() };
            0
        }
        Err(e) => fail(e),
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int {
    if event.is_null() {
        return fail(libc::EINVAL);
    }
    // SAFETY: an event of ours, handed out by rdma_get_cm_event, acked once.
    drop(unsafe { Box::from_raw(event.cast::<EventRec>()) });
    0
}

/// The port of a route address (network order), 0 if none.
fn port_of(s: &libc::sockaddr_storage) -> u16 {
    // SAFETY: a sockaddr_storage of ours.
    unsafe { read_sockaddr(ptr::from_ref(s).cast()) }.map_or(0, |a| a.port().to_be())
}

#[no_mangle]
unsafe extern "C" fn rdma_get_src_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: the export contract.
    unsafe { id.as_ref() }.map_or(0, |id| port_of(&id.route.addr.src_storage))
}

#[no_mangle]
unsafe extern "C" fn rdma_get_dst_port(id: *mut rdma_cm_id) -> u16 {
    // SAFETY: the export contract.
    unsafe { id.as_ref() }.map_or(0, |id| port_of(&id.route.addr.dst_storage))
}

#[no_mangle]
unsafe extern "C" fn rdma_get_devices(num_devices: *mut c_int) -> *mut *mut ibv_context {
    let list = match devices() {
        Ok(d) => &d.list[..],
        Err(_) => &[],
    };
    // SAFETY: calloc of len + 1 pointers; freed by rdma_free_devices.
    let arr = unsafe { libc::calloc(list.len() + 1, std::mem::size_of::<*mut ibv_context>()) }
        .cast::<*mut ibv_context>();
    if arr.is_null() {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
    for (i, d) in list.iter().enumerate() {
        // SAFETY: i < len.
        unsafe { *arr.add(i) = d.ctx.0 };
    }
    if !num_devices.is_null() {
        // SAFETY: caller's output.
        unsafe { *num_devices = list.len() as c_int };
    }
    arr
}

#[no_mangle]
unsafe extern "C" fn rdma_free_devices(list: *mut *mut ibv_context) {
    // SAFETY: from rdma_get_devices (calloc) or null.
    unsafe { libc::free(list.cast()) };
}

/// `rdma_event_str`'s texts, indexed by event.
const EVENT_NAMES: [&std::ffi::CStr; 16] = [
    c"RDMA_CM_EVENT_ADDR_RESOLVED",
    c"RDMA_CM_EVENT_ADDR_ERROR",
    c"RDMA_CM_EVENT_ROUTE_RESOLVED",
    c"RDMA_CM_EVENT_ROUTE_ERROR",
    c"RDMA_CM_EVENT_CONNECT_REQUEST",
    c"RDMA_CM_EVENT_CONNECT_RESPONSE",
    c"RDMA_CM_EVENT_CONNECT_ERROR",
    c"RDMA_CM_EVENT_UNREACHABLE",
    c"RDMA_CM_EVENT_REJECTED",
    c"RDMA_CM_EVENT_ESTABLISHED",
    c"RDMA_CM_EVENT_DISCONNECTED",
    c"RDMA_CM_EVENT_DEVICE_REMOVAL",
    c"RDMA_CM_EVENT_MULTICAST_JOIN",
    c"RDMA_CM_EVENT_MULTICAST_ERROR",
    c"RDMA_CM_EVENT_ADDR_CHANGE",
    c"RDMA_CM_EVENT_TIMEWAIT_EXIT",
];

#[no_mangle]
pub unsafe extern "C" fn rdma_event_str(event: c_int) -> *const c_char {
    usize::try_from(event)
        .ok()
        .and_then(|i| EVENT_NAMES.get(i))
        .map_or(c"UNKNOWN EVENT".as_ptr(), |s| s.as_ptr())
}

#[no_mangle]
unsafe extern "C" fn rdma_set_option(
    id: *mut rdma_cm_id,
    level: c_int,
    optname: c_int,
    optval: *mut c_void,
    optlen: usize,
) -> c_int {
    let rec = id_or_fail!(id);
    if optval.is_null() {
        return fail(libc::EINVAL);
    }
    let mut st = lock(&rec.sh.st);
    match (level, optname) {
        (RDMA_OPTION_ID, RDMA_OPTION_ID_TOS) | (RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT) => {
            if optlen != 1 {
                return fail(libc::EINVAL);
            }
            // SAFETY: a one-byte option value.
            let v = unsafe { *optval.cast::<u8>() };
            if optname == RDMA_OPTION_ID_TOS {
                st.tos = v;
            } else {
                // The QP's 5-bit ACK timeout exponent.
                st.ack_timeout = v.min(31);
            }
            0
        }
        // Address reuse and v6-only: TCP listeners here always reuse
        // addresses, and the v6 socket's default applies.
        (RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR) | (RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY) => {
            if optlen != std::mem::size_of::<c_int>() {
                return fail(libc::EINVAL);
            }
            0
        }
        // Path records have no meaning without a subnet manager: accepted
        // and ignored, as the route is always the direct one.
        (RDMA_OPTION_IB, RDMA_OPTION_IB_PATH) => {
            if optlen == 0 {
                return fail(libc::EINVAL);
            }
            0
        }
        _ => fail(libc::ENOSYS),
    }
}

#[no_mangle]
unsafe extern "C" fn rdma_migrate_id(
    id: *mut rdma_cm_id,
    channel: *mut rdma_event_channel,
) -> c_int {
    let rec = id_or_fail!(id);
    if channel.is_null() {
        return fail(libc::EOPNOTSUPP);
    }
    // SAFETY: a channel record of ours.
    let chan = unsafe { &*channel.cast::<ChannelRec>() };
    let mut st = lock(&rec.sh.st);
    st.chan = chan.sh.clone();
    rec.id.channel = channel;
    0
}

#[no_mangle]
unsafe extern "C" fn rdma_getaddrinfo(
    node: *const c_char,
    service: *const c_char,
    hints: *const rdma_addrinfo,
    res: *mut *mut rdma_addrinfo,
) -> c_int {
    // SAFETY: same contract.
    unsafe { crate::addrinfo::getaddrinfo(node, service, hints, res) }
}

#[no_mangle]
unsafe extern "C" fn rdma_freeaddrinfo(res: *mut rdma_addrinfo) {
    // SAFETY: same contract.
    unsafe { crate::addrinfo::freeaddrinfo(res) }
}

#[no_mangle]
unsafe extern "C" fn rdma_init_qp_attr(
    id: *mut rdma_cm_id,
    qp_attr: *mut ibv_qp_attr,
    qp_attr_mask: *mut c_int,
) -> c_int {
    let rec = id_or_fail!(id);
    if qp_attr.is_null() || qp_attr_mask.is_null() {
        return fail(libc::EINVAL);
    }
    let mut st = lock(&rec.sh.st);
    if st.qp.0.is_null() && st.psn == 0 {
        // A program's own QP reaches RTS with this PSN before connect or
        // accept announce one: fix it now, so that the two agree (the
        // kernel's CM draws it when the id is made).
        st.psn = initial_psn(id as usize as u32).max(1);
    }
    let (_, dev) = match st.device() {
        Ok(d) => d,
        Err(e) => return fail(e),
    };
    let qp_type = if st.qp.0.is_null() {
        rec.id.qp_type
    } else {
        // SAFETY: the id's live QP.
        unsafe { (*st.qp.0).qp_type }
    };
    // SAFETY: the caller's input and outputs.
    let state = unsafe { (*qp_attr).qp_state };
    match st.qp_attr(dev, qp_type, state) {
        Some((a, mask)) => {
            // SAFETY: as above.
            unsafe {
                *qp_attr = a;
                *qp_attr_mask = mask;
            }
            0
        }
        None => fail(libc::EINVAL),
    }
}

/// ECE (enhanced connection establishment) needs a device that negotiates
/// it; the emulation's does not.
#[no_mangle]
unsafe extern "C" fn rdma_set_local_ece(id: *mut rdma_cm_id, _ece: *mut c_void) -> c_int {
    let _ = id_or_fail!(id);
    fail(libc::EOPNOTSUPP)
}

#[no_mangle]
unsafe extern "C" fn rdma_get_remote_ece(id: *mut rdma_cm_id, _ece: *mut c_void) -> c_int {
    let _ = id_or_fail!(id);
    fail(libc::EOPNOTSUPP)
}

/// Multicast (joining groups through a subnet manager) is not emulated.
#[no_mangle]
unsafe extern "C" fn rdma_join_multicast(
    id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
    _context: *mut c_void,
) -> c_int {
    let _ = id_or_fail!(id);
    fail(libc::EOPNOTSUPP)
}

#[no_mangle]
unsafe extern "C" fn rdma_join_multicast_ex(
    id: *mut rdma_cm_id,
    _attr: *mut c_void,
    _context: *mut c_void,
) -> c_int {
    let _ = id_or_fail!(id);
    fail(libc::EOPNOTSUPP)
}

#[no_mangle]
unsafe extern "C" fn rdma_leave_multicast(
    id: *mut rdma_cm_id,
    _addr: *mut libc::sockaddr,
) -> c_int {
    let _ = id_or_fail!(id);
    fail(libc::EOPNOTSUPP)
}

/// `rdma_create_ep`: a synchronous id for `res`. Passive: bound to the
/// source address, `qp_init_attr` kept for the QPs of its requests.
/// Active: address and route resolved, and a QP created when
/// `qp_init_attr` is given (on `pd`, or the device's default PD).
#[no_mangle]
unsafe extern "C" fn rdma_create_ep(
    id: *mut *mut rdma_cm_id,
    res: *mut rdma_addrinfo,
    pd: *mut ibv_pd,
    qp_init_attr: *mut ibv_qp_init_attr,
) -> c_int {
    // SAFETY: the caller's addrinfo.
    let (false, Some(r)) = (id.is_null(), unsafe { res.as_ref() }) else {
        return fail(libc::EINVAL);
    };
    let qp_type = match u32::try_from(r.ai_qp_type) {
        Ok(t @ (IBV_QPT_RC | IBV_QPT_UC | IBV_QPT_UD)) => t,
        _ => return fail(libc::EINVAL),
    };
    let cm_id = create_id(ptr::null_mut(), ptr::null_mut(), r.ai_port_space, qp_type);
    if cm_id.is_null() {
        return -1;
    }
    // SAFETY: our fresh id; the caller's address and attributes.
    let ret = unsafe {
        if r.ai_flags & RAI_PASSIVE != 0 {
            let ret = rdma_bind_addr(cm_id, r.ai_src_addr);
            if ret == 0 {
                let rec = &mut *cm_id.cast::<IdRec>();
                if !pd.is_null() {
                    rec.id.pd = pd;
                }
                if let Some(a) = qp_init_attr.as_ref() {
                    rec.ep_attr = Some(ibv_qp_init_attr {
                        qp_type,
                        ..ptr::read(a)
                    });
                }
            }
            ret
        } else {
            let mut ret = rdma_resolve_addr(cm_id, r.ai_src_addr, r.ai_dst_addr, 2000);
            if ret == 0 {
                ret = rdma_resolve_route(cm_id, 2000);
            }
            if ret == 0 && !qp_init_attr.is_null() {
                (*qp_init_attr).qp_type = qp_type;
                ret = rdma_create_qp(cm_id, pd, qp_init_attr);
            }
            ret
        }
    };
    if ret != 0 {
        let e = std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EINVAL);
        // SAFETY: our id, destroyed once.
        unsafe { rdma_destroy_ep(cm_id) };
        return fail(e);
    }
    // SAFETY: caller's output.
    unsafe { *id = cm_id };
    0
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_ep(id: *mut rdma_cm_id) {
    if !id.is_null() {
        // SAFETY: same contract.
        unsafe {
            rdma_destroy_qp(id);
            rdma_destroy_id(id);
        }
    }
}

/// `rdma_get_request`: the next connection request of a synchronous
/// listening id, with a QP made from `rdma_create_ep`'s attributes. The
/// request event stays in the new id's `event`.
#[no_mangle]
unsafe extern "C" fn rdma_get_request(listen: *mut rdma_cm_id, id: *mut *mut rdma_cm_id) -> c_int {
    let rec = id_or_fail!(listen);
    if rec.sync_chan.is_null() || id.is_null() {
        // rdma-core hands out requests this way only on synchronous ids.
        return fail(libc::EINVAL);
    }
    if !rec.id.event.is_null() {
        // SAFETY: the listener's previous event, acknowledged once.
        drop(unsafe { Box::from_raw(rec.id.event.cast::<EventRec>()) });
        rec.id.event = ptr::null_mut();
    }
    // SAFETY: the id's own channel record.
    let chan = unsafe { &*rec.id.channel.cast::<ChannelRec>() };
    let ev = match chan.sh.get() {
        Ok(ev) => ev,
        Err(e) => return fail(e),
    };
    // SAFETY: the event just taken.
    let (kind, status, child) = unsafe { ((*ev).ev.event, (*ev).ev.status, (*ev).ev.id) };
    let err = if kind == RDMA_CM_EVENT_REJECTED {
        libc::ECONNREFUSED
    } else if status != 0 {
        status.abs()
    } else if kind != RDMA_CM_EVENT_CONNECT_REQUEST {
        libc::EINVAL
    } else {
        0
    };
    if err != 0 {
        rec.id.event = ev.cast();
        return fail(err);
    }
    if let Some(mut attr) = rec.ep_attr.as_ref().map(|a| ibv_qp_init_attr {
        // SAFETY: a plain copy of the kept attributes.
        ..unsafe { ptr::read(a) }
    }) {
        // SAFETY: the request's id, ours.
        let r = unsafe { rdma_create_qp(child, rec.id.pd, &mut attr) };
        if r != 0 {
            rec.id.event = ev.cast();
            return r;
        }
    }
    // SAFETY: the request's id and the caller's output.
    unsafe {
        (*child).event = ev.cast();
        *id = child;
    }
    0
}

/// SRQs through the CM (`rdma_create_srq`) are not supported; programs
/// create SRQs with `ibv_create_srq`.
#[no_mangle]
unsafe extern "C" fn rdma_create_srq(
    id: *mut rdma_cm_id,
    _pd: *mut ibv_pd,
    _attr: *mut c_void,
) -> c_int {
    let _ = id_or_fail!(id);
    fail(libc::EOPNOTSUPP)
}

#[no_mangle]
unsafe extern "C" fn rdma_create_srq_ex(id: *mut rdma_cm_id, _attr: *mut c_void) -> c_int {
    let _ = id_or_fail!(id);
    fail(libc::EOPNOTSUPP)
}

#[no_mangle]
unsafe extern "C" fn rdma_destroy_srq(_id: *mut rdma_cm_id) {}

#[cfg(test)]
#[path = "cm_tests.rs"]
mod cm_tests;
