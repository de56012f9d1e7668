//! Communication identifiers: their state, the QP transitions the CM makes,
//! and the threads that read the peer's CM messages.
//!
//! An id's Rust state sits behind one mutex in an [`IdShared`] that the
//! id's record and its reader thread share. The C struct is written only by
//! the program's calls (and by the thread that builds a passive-side id
//! before anyone else sees it). A thread posts an event or touches the QP
//! only while holding the state lock and only if the id is not destroyed;
//! `rdma_destroy_id` marks it destroyed under that lock, withdraws its
//! queued events and shuts its sockets down, so no thread refers to a freed
//! id or QP afterwards. Threads are not joined: they end when their socket
//! does.

use std::io::Write as _;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use verbs_emu::backend::ibverbs::ffi::*;

use crate::channel::{lock, Channel, EventRec};
use crate::devices::{devices, Device};
use crate::ffi::*;
use crate::wire::{read_msg, write_msg, Conn, Msg};
use crate::{warn, SendPtr};

/// How long a passive side waits for the REQ of a new TCP connection.
const REQ_WAIT: Duration = Duration::from_secs(10);
/// How many connections a listener lets wait for their REQ at once; more
/// are closed at once (a peer cannot pile up threads).
const MAX_PENDING: usize = 64;
/// How long `rdma_connect` tries to reach the listener.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long a refused connection is retried before the connect is
/// reported rejected: programs that agree on a moment out of band (perftest
/// with `-R`) may connect a moment before the peer's `rdma_listen`.
const LISTENER_GRACE: Duration = Duration::from_secs(1);
/// The reason code a REJ for "nobody listens there" carries
/// (IB_CM_REJ_INVALID_SERVICE_ID).
pub(crate) const REJ_INVALID_SERVICE_ID: c_int = 8;
/// The reason code of a consumer's REJ (IB_CM_REJ_CONSUMER_DEFINED).
pub(crate) const REJ_CONSUMER_DEFINED: c_int = 28;
/// The most RDMA READ/atomic requests in flight the devices take
/// (`max_qp_rd_atom`).
pub(crate) const MAX_RD_ATOMIC: u8 = 16;
/// The default local ACK timeout exponent (4.096 us * 2^14 = 67 ms).
const DEFAULT_ACK_TIMEOUT: u8 = 14;
/// Minimum RNR NAK timer code for RTR (12: 0.64 ms).
const MIN_RNR_TIMER: u8 = 12;

/// Where an id is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Idle,
    Bound,
    Listening,
    AddrResolved,
    RouteResolved,
    /// REQ sent, waiting for REP/REJ.
    Connecting,
    /// REP received, the program sets its own QP up (`rdma_establish`).
    RepReceived,
    /// Passive: REQ received, waiting for `rdma_accept`/`rdma_reject`.
    ReqReceived,
    /// Passive: REP sent, waiting for RTU.
    Accepted,
    Connected,
    Disconnected,
    Failed,
    /// A UD port-space exchange (SIDR) is over: no connection remains.
    SidrDone,
}

/// This side's connection parameters (after defaults and clamping).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Params {
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
}

/// An id's mutable state.
pub(crate) struct IdState {
    pub phase: Phase,
    pub destroyed: bool,
    /// Where events go (`rdma_migrate_id` changes it).
    pub chan: Arc<Channel>,
    pub dev: Option<usize>,
    pub src: Option<SocketAddr>,
    pub dst: Option<SocketAddr>,
    pub listener: Option<TcpListener>,
    /// The connection to the peer (a clone of the reader thread's).
    pub stream: Option<TcpStream>,
    /// The id's QP (`rdma_create_qp`), or null.
    pub qp: SendPtr<ibv_qp>,
    /// The peer's REQ (passive) or REP (active).
    pub peer: Option<Conn>,
    /// The PSN this side's send queue starts at.
    pub psn: u32,
    pub mine: Params,
    pub ack_timeout: u8,
    pub tos: u8,
    pub disc_sent: bool,
    pub disc_reported: bool,
    /// Whether the id is synchronous (its requests' ids are too).
    pub sync: bool,
    /// The QP type this side's REQ announced (the REP must match).
    pub req_qp_type: u8,
}

/// The part of an id its threads share.
pub(crate) struct IdShared {
    pub st: Mutex<IdState>,
    /// The C struct (valid while `!st.destroyed`).
    pub ptr: SendPtr<rdma_cm_id>,
}

/// The id the program holds: the C struct first, then what only the
/// program's calls touch.
#[repr(C)]
pub(crate) struct IdRec {
    pub id: rdma_cm_id,
    pub sh: Arc<IdShared>,
    /// A synchronous id's own channel (created for it, destroyed with it);
    /// null for an id on the program's channel.
    pub sync_chan: *mut crate::channel::ChannelRec,
    /// `rdma_create_ep`'s QP attributes of a passive id, for the QPs
    /// `rdma_get_request` creates.
    pub ep_attr: Option<ibv_qp_init_attr>,
}

impl IdRec {
    /// A new id record on `chan`, leaked to the program.
    pub fn create(
        chan_ptr: *mut rdma_event_channel,
        chan: Arc<Channel>,
        context: *mut std::os::raw::c_void,
        ps: c_int,
        qp_type: u32,
    ) -> *mut IdRec {
        // SAFETY: rdma_cm_id is pointers and integers; all-zero is valid.
        let mut id: rdma_cm_id = unsafe { std::mem::zeroed() };
        id.channel = chan_ptr;
        id.context = context;
        id.ps = ps;
        id.qp_type = qp_type;
        let rec = Box::into_raw(Box::new(IdRec {
            sync_chan: std::ptr::null_mut(),
            ep_attr: None,
            id,
            sh: Arc::new(IdShared {
                st: Mutex::new(IdState {
                    phase: Phase::Idle,
                    destroyed: false,
                    chan,
                    dev: None,
                    src: None,
                    dst: None,
                    listener: None,
                    stream: None,
                    qp: SendPtr(std::ptr::null_mut()),
                    peer: None,
                    psn: 0,
                    mine: Params::default(),
                    ack_timeout: DEFAULT_ACK_TIMEOUT,
                    tos: 0,
                    disc_sent: false,
                    disc_reported: false,
                    sync: false,
                    req_qp_type: 0,
                }),
                ptr: SendPtr(std::ptr::null_mut()),
            }),
        }));
        // SAFETY: rec is fresh; the Arc has no other holder yet.
        unsafe {
            let sh = Arc::get_mut(&mut (*rec).sh).expect("a fresh Arc is unique");
            sh.ptr = SendPtr(std::ptr::addr_of_mut!((*rec).id));
        }
        rec
    }

    /// The record behind an id pointer.
    ///
    /// # Safety
    ///
    /// `id` is null or was returned by this library and not destroyed.
    pub unsafe fn from_ptr<'a>(id: *mut rdma_cm_id) -> Option<&'a mut IdRec> {
        // SAFETY: the id is the first field of its repr(C) record.
        unsafe { id.cast::<IdRec>().as_mut() }
    }
}

impl IdState {
    /// Post an event of this id (not destroyed: the caller holds the lock).
    pub fn post(&self, ev: Box<EventRec>) {
        if !self.destroyed {
            self.chan.post(ev);
        }
    }

    /// Report the disconnection once.
    fn report_disconnect(&mut self, id: *mut rdma_cm_id) {
        if !self.disc_reported {
            self.disc_reported = true;
            self.post(EventRec::new(id, RDMA_CM_EVENT_DISCONNECTED, 0));
        }
        self.phase = Phase::Disconnected;
    }

    /// Send a message to the peer.
    pub fn send(&mut self, m: &Msg) -> Result<(), c_int> {
        let Some(s) = self.stream.as_mut() else {
            return Err(libc::ENOTCONN);
        };
        write_msg(s, m)
            .and_then(|()| s.flush())
            .map_err(|e| e.raw_os_error().unwrap_or(libc::ECONNRESET))
    }

    /// Close the connection to the peer (wakes the reader thread).
    pub fn hang_up(&mut self) {
        if let Some(s) = self.stream.take() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// This side's QP attributes for a transition to `state`, as
    /// rdma-core's CM computes them; `None` for a state the CM does not
    /// set up (or before the peer is known, for RTR and RTS).
    pub fn qp_attr(&self, dev: &Device, qp_type: u32, state: u32) -> Option<(ibv_qp_attr, c_int)> {
        let mut a = ibv_qp_attr {
            qp_state: state,
            ..Default::default()
        };
        let rc = qp_type == IBV_QPT_RC;
        match state {
            IBV_QPS_INIT => {
                a.pkey_index = 0;
                a.port_num = 1;
                let mut mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT;
                if qp_type == IBV_QPT_UD {
                    a.qkey = RDMA_UDP_QKEY;
                    mask |= IBV_QP_QKEY;
                } else {
                    // The CM's rule: remote writes always; reads and
                    // atomics when this side takes them.
                    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
                    if rc && self.mine.responder_resources > 0 {
                        a.qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
                    }
                    mask |= IBV_QP_ACCESS_FLAGS;
                }
                Some((a, mask))
            }
            IBV_QPS_RTR => {
                let p = self.peer.as_ref()?;
                a.path_mtu = u32::from(dev.mtu.min(p.mtu));
                a.dest_qp_num = p.qpn;
                a.rq_psn = p.psn;
                a.ah_attr = ah_to(&p.gid, self.tos);
                let mut mask =
                    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
                if rc {
                    a.max_dest_rd_atomic = self.mine.responder_resources;
                    a.min_rnr_timer = MIN_RNR_TIMER;
                    mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
                }
                Some((a, mask))
            }
            IBV_QPS_RTS => {
                self.peer.as_ref()?;
                a.sq_psn = self.psn;
                let mut mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
                if rc {
                    a.timeout = self.ack_timeout;
                    a.retry_cnt = self.mine.retry_count;
                    a.rnr_retry = self.mine.rnr_retry_count;
                    a.max_rd_atomic = self.mine.initiator_depth;
                    mask |= IBV_QP_TIMEOUT
                        | IBV_QP_RETRY_CNT
                        | IBV_QP_RNR_RETRY
                        | IBV_QP_MAX_QP_RD_ATOMIC;
                }
                Some((a, mask))
            }
            _ => None,
        }
    }

    /// Move the id's QP (if any) to `state` with the CM's attributes;
    /// the errno on failure.
    pub fn move_qp(&self, state: u32) -> Result<(), c_int> {
        let qp = self.qp.0;
        if qp.is_null() {
            return Ok(());
        }
        let (devs, dev) = self.device()?;
        // SAFETY: the id's live QP (cleared by rdma_destroy_qp under the
        // lock this caller holds).
        let qp_type = unsafe { (*qp).qp_type };
        let Some((mut a, mask)) = self.qp_attr(dev, qp_type, state) else {
            return Err(libc::EINVAL);
        };
        // SAFETY: the exported ibv_modify_qp on a live QP.
        match unsafe { (devs.verbs.modify_qp)(qp, &mut a, mask) } {
            0 => Ok(()),
            e => Err(e),
        }
    }

    /// The id's device.
    pub fn device(&self) -> Result<(&'static crate::devices::Devices, &'static Device), c_int> {
        let devs = devices()?;
        let dev = self
            .dev
            .and_then(|i| devs.list.get(i))
            .ok_or(libc::EINVAL)?;
        Ok((devs, dev))
    }

    /// Move the QP to RTR and RTS with the peer's parameters.
    pub fn qp_ready(&self) -> Result<(), c_int> {
        self.move_qp(IBV_QPS_INIT)?;
        self.move_qp(IBV_QPS_RTR)?;
        self.move_qp(IBV_QPS_RTS)
    }

    /// Move the QP to ERR (flushing its work requests), ignoring failure:
    /// a QP already in ERR or RESET needs nothing.
    pub fn qp_error(&self) {
        let qp = self.qp.0;
        if qp.is_null() {
            return;
        }
        if let Ok(devs) = devices() {
            let mut a = ibv_qp_attr {
                qp_state: IBV_QPS_ERR,
                ..Default::default()
            };
            // SAFETY: the id's live QP.
            let _ = unsafe { (devs.verbs.modify_qp)(qp, &mut a, IBV_QP_STATE) };
        }
    }
}

/// The address vector to a peer's GID: RoCEv2 (GRH with the GID, GID
/// index 0, hop limit 64), the DLID its low 16 bits, port 1.
pub(crate) fn ah_to(gid: &[u8; 16], tos: u8) -> ibv_ah_attr {
    ibv_ah_attr {
        grh: ibv_global_route {
            dgid: ibv_gid { raw: *gid },
            flow_label: 0,
            sgid_index: 0,
            hop_limit: 64,
            traffic_class: tos,
        },
        dlid: u16::from_be_bytes([gid[14], gid[15]]),
        sl: 0,
        src_path_bits: 0,
        static_rate: 0,
        is_global: 1,
        port_num: 1,
    }
}

/// A UD exchange's event parameters: how to reach the peer's QP.
pub(crate) fn ud_param_of(c: &Conn, tos: u8) -> rdma_ud_param {
    rdma_ud_param {
        private_data: std::ptr::null(),
        private_data_len: 0,
        ah_attr: ah_to(&c.gid, tos),
        qp_num: c.qpn,
        qkey: RDMA_UDP_QKEY,
    }
}

/// The starting PSN of a QP: 24 bits mixed from the process and the QPN
/// (any value is valid; distinct connections get distinct ones).
pub(crate) fn initial_psn(qpn: u32) -> u32 {
    let x = (u64::from(std::process::id()) << 24) | u64::from(qpn);
    let h = x.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    ((h >> 40) as u32) & 0xFF_FFFF
}

/// A connection event's parameters as the program sees them: the peer's
/// numbers from this side's point of view (its initiator depth is our
/// responder resources and the other way round), as the kernel reports
/// them.
pub(crate) fn conn_param_of(c: &Conn) -> rdma_conn_param {
    rdma_conn_param {
        private_data: std::ptr::null(),
        private_data_len: 0,
        responder_resources: c.initiator_depth,
        initiator_depth: c.responder_resources,
        flow_control: c.flow_control,
        retry_count: c.retry_count,
        rnr_retry_count: c.rnr_retry_count,
        srq: c.srq,
        qp_num: c.qpn,
    }
}

fn spawn(name: &str, f: impl FnOnce() + Send + 'static) {
    if let Err(e) = std::thread::Builder::new().name(name.into()).spawn(f) {
        warn(&format!("cannot start a CM thread: {e}"));
    }
}

/// Start the active side: connect to `dst`, send `req`, then read the
/// peer's messages for `sh`.
pub(crate) fn start_active(sh: Arc<IdShared>, dst: SocketAddr, req: Msg) {
    spawn("rdmacm-active", move || {
        let id = sh.ptr.0;
        let start = Instant::now();
        let stream = loop {
            match TcpStream::connect_timeout(&dst, CONNECT_WAIT) {
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && start.elapsed() < LISTENER_GRACE =>
                {
                    if lock(&sh.st).destroyed {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(20));
                }
                other => break other,
            }
        };
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                let mut st = lock(&sh.st);
                if st.phase == Phase::Connecting {
                    st.phase = Phase::Failed;
                    let ev = if e.kind() == std::io::ErrorKind::ConnectionRefused {
                        EventRec::new(id, RDMA_CM_EVENT_REJECTED, REJ_INVALID_SERVICE_ID)
                    } else {
                        EventRec::new(id, RDMA_CM_EVENT_UNREACHABLE, -libc::ETIMEDOUT)
                    };
                    st.post(ev);
                }
                return;
            }
        };
        let _ = stream.set_nodelay(true);
        let reader = {
            let mut st = lock(&sh.st);
            if st.destroyed || st.phase != Phase::Connecting {
                return;
            }
            let (Ok(w), Ok(r)) = (stream.try_clone(), stream.try_clone()) else {
                return;
            };
            st.stream = Some(w);
            if let Err(e) = st.send(&req) {
                st.phase = Phase::Failed;
                st.post(EventRec::new(id, RDMA_CM_EVENT_CONNECT_ERROR, -e));
                st.hang_up();
                return;
            }
            r
        };
        read_loop(&sh, reader);
    });
}

/// Start listening: accept TCP connections on `listener` and turn each
/// REQ into a new id on the listening id's channel.
pub(crate) fn start_listener(lsh: Arc<IdShared>, listener: TcpListener) {
    spawn("rdmacm-listen", move || {
        let pending = Arc::new(AtomicUsize::new(0));
        for conn in listener.incoming() {
            if lock(&lsh.st).destroyed {
                return;
            }
            match conn {
                Ok(s) => {
                    if pending.fetch_add(1, Ordering::AcqRel) >= MAX_PENDING {
                        pending.fetch_sub(1, Ordering::AcqRel);
                        warn("too many connections waiting for their REQ; closing one");
                        continue;
                    }
                    let lsh = lsh.clone();
                    let pending = Pending(pending.clone());
                    spawn("rdmacm-passive", move || passive(lsh, s, pending));
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNABORTED | libc::EMFILE | libc::ENFILE | libc::ENOBUFS)
                    ) =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => return,
            }
        }
    });
}

/// A connection counted as waiting for its REQ until this drops.
struct Pending(Arc<AtomicUsize>);

impl Drop for Pending {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One incoming connection: wait for its REQ, make the new id, report the
/// request, then read the peer's messages.
fn passive(lsh: Arc<IdShared>, stream: TcpStream, pending: Pending) {
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(REQ_WAIT));
    let mut r = match stream.try_clone() {
        Ok(r) => r,
        Err(_) => return,
    };
    let req = read_msg(&mut r);
    drop(pending);
    let req = match req {
        Ok(Some(Msg::Req(c))) => c,
        Ok(Some(m)) => {
            warn(&format!(
                "dropping a connection that began with {m:?}, not a REQ"
            ));
            return;
        }
        Ok(None) => return,
        Err(e) => {
            warn(&format!("dropping a connection: {e}"));
            return;
        }
    };
    let _ = stream.set_read_timeout(None);
    let (Ok(local), Ok(peer)) = (stream.local_addr(), stream.peer_addr()) else {
        return;
    };
    let Ok(devs) = devices() else {
        let mut s = stream;
        let _ = write_msg(&mut s, &Msg::Rej(Vec::new()));
        return;
    };
    let child_sh;
    {
        let lst = lock(&lsh.st);
        if lst.destroyed || lst.phase != Phase::Listening {
            let mut s = stream;
            let _ = write_msg(&mut s, &Msg::Rej(Vec::new()));
            return;
        }
        // SAFETY: the listening id is alive (not destroyed, checked under
        // its lock, which destroy takes before freeing it).
        let lid = unsafe { &*lsh.ptr.0 };
        // RC requests go to TCP port-space listeners, UD ones to UDP ones.
        let ud_ps = lid.ps == RDMA_PS_UDP || lid.ps == RDMA_PS_IPOIB;
        if ud_ps != (u32::from(req.qp_type) == IBV_QPT_UD) {
            let mut s = stream;
            let _ = write_msg(&mut s, &Msg::Rej(Vec::new()));
            return;
        }
        let di = crate::devices::index_for(&devs.list, local.ip());
        let dev = &devs.list[di];
        // A synchronous listener's requests are synchronous ids, each on a
        // channel of its own (the request itself goes to the listener's).
        let (chan_ptr, chan, own) = if lst.sync {
            let Ok(own) = Channel::create() else {
                return;
            };
            // SAFETY: the channel record just made.
            (own.cast(), unsafe { (*own).sh.clone() }, own)
        } else {
            (lid.channel, lst.chan.clone(), std::ptr::null_mut())
        };
        let child = IdRec::create(chan_ptr, chan, lid.context, lid.ps, req.qp_type.into());
        // SAFETY: the fresh record, not yet visible to the program.
        let c = unsafe { &mut *child };
        c.sync_chan = own;
        c.id.verbs = dev.ctx.0;
        c.id.pd = dev.pd.0;
        c.id.port_num = 1;
        fill_route(&mut c.id, Some(local), Some(peer), dev, Some(&req.gid));
        child_sh = c.sh.clone();
        let mut st = lock(&child_sh.st);
        st.phase = Phase::ReqReceived;
        st.dev = Some(di);
        st.src = Some(local);
        st.dst = Some(peer);
        st.stream = Some(stream);
        st.tos = lst.tos;
        st.ack_timeout = lst.ack_timeout;
        st.peer = Some(req.clone());
        // Until accept says otherwise, the request's numbers seen from
        // this side, as the kernel's CM sets a passive id: a program that
        // moves its own QP with rdma_init_qp_attr before accepting gets
        // them (its initiator depth is our responder resources).
        st.mine = Params {
            responder_resources: req.initiator_depth.min(MAX_RD_ATOMIC),
            initiator_depth: req.responder_resources.min(MAX_RD_ATOMIC),
            retry_count: req.retry_count,
            rnr_retry_count: req.rnr_retry_count,
        };
        st.sync = lst.sync;
        let mut ev = EventRec::new(child_sh.ptr.0, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
        ev.ev.listen_id = lsh.ptr.0;
        if u32::from(req.qp_type) == IBV_QPT_UD {
            ev.set_ud(ud_param_of(&req, lst.tos), &req.private);
        } else {
            ev.set_conn(conn_param_of(&req), &req.private);
        }
        lst.chan.post(ev);
    }
    read_loop(&child_sh, r);
}

/// Fill an id's route: addresses, GIDs and one path record.
pub(crate) fn fill_route(
    id: &mut rdma_cm_id,
    src: Option<SocketAddr>,
    dst: Option<SocketAddr>,
    dev: &Device,
    dgid: Option<&[u8; 16]>,
) {
    if let Some(a) = src {
        crate::addrinfo::write_sockaddr(&mut id.route.addr.src_storage, a);
    }
    if let Some(a) = dst {
        crate::addrinfo::write_sockaddr(&mut id.route.addr.dst_storage, a);
    }
    id.route.addr.ibaddr.sgid = ibv_gid { raw: dev.gid };
    id.route.addr.ibaddr.pkey = 0xFFFFu16.to_be();
    if let Some(g) = dgid {
        id.route.addr.ibaddr.dgid = ibv_gid { raw: *g };
    }
}

/// Read the peer's messages until the connection ends, acting on each.
fn read_loop(sh: &Arc<IdShared>, mut r: TcpStream) {
    let id = sh.ptr.0;
    loop {
        let msg = read_msg(&mut r);
        let mut st = lock(&sh.st);
        if st.destroyed {
            return;
        }
        match msg {
            Ok(Some(Msg::Rep(c)))
                if st.phase == Phase::Connecting && c.qp_type != st.req_qp_type =>
            {
                warn(&format!(
                    "closing a connection: a REP for QP type {} answers a REQ for {}",
                    c.qp_type, st.req_qp_type
                ));
                st.phase = Phase::Failed;
                st.post(EventRec::new(
                    id,
                    RDMA_CM_EVENT_CONNECT_ERROR,
                    -libc::EPROTO,
                ));
                st.hang_up();
                return;
            }
            Ok(Some(Msg::Rep(c)))
                if st.phase == Phase::Connecting && u32::from(c.qp_type) == IBV_QPT_UD =>
            {
                // A UD exchange ends with the reply: report how to reach
                // the peer's QP; no connection remains.
                st.phase = Phase::SidrDone;
                let mut ev = EventRec::new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
                ev.set_ud(ud_param_of(&c, st.tos), &c.private);
                st.peer = Some(c);
                st.post(ev);
                st.hang_up();
                return;
            }
            Ok(Some(Msg::Rep(c))) if st.phase == Phase::Connecting => {
                let param = conn_param_of(&c);
                let private = c.private.clone();
                st.peer = Some(c);
                if st.qp.0.is_null() {
                    st.phase = Phase::RepReceived;
                    let mut ev = EventRec::new(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
                    ev.set_conn(param, &private);
                    st.post(ev);
                    continue;
                }
                if let Err(e) = st.qp_ready() {
                    warn(&format!(
                        "cannot ready the QP for the peer's REP (errno {e})"
                    ));
                    let _ = st.send(&Msg::Rej(Vec::new()));
                    st.phase = Phase::Failed;
                    st.post(EventRec::new(id, RDMA_CM_EVENT_CONNECT_ERROR, -e));
                    st.hang_up();
                    return;
                }
                if let Err(e) = st.send(&Msg::Rtu) {
                    st.phase = Phase::Failed;
                    st.post(EventRec::new(id, RDMA_CM_EVENT_CONNECT_ERROR, -e));
                    return;
                }
                st.phase = Phase::Connected;
                let mut ev = EventRec::new(id, RDMA_CM_EVENT_ESTABLISHED, 0);
                ev.set_conn(param, &private);
                st.post(ev);
            }
            Ok(Some(Msg::Rej(p))) if st.phase == Phase::Connecting => {
                st.phase = Phase::Failed;
                let mut ev = EventRec::new(id, RDMA_CM_EVENT_REJECTED, REJ_CONSUMER_DEFINED);
                ev.set_conn(rdma_conn_param::EMPTY, &p);
                st.post(ev);
                st.hang_up();
                return;
            }
            Ok(Some(Msg::Rtu)) if st.phase == Phase::Accepted => {
                st.phase = Phase::Connected;
                st.post(EventRec::new(id, RDMA_CM_EVENT_ESTABLISHED, 0));
            }
            Ok(Some(Msg::Dreq))
                if matches!(
                    st.phase,
                    Phase::Connected | Phase::Accepted | Phase::RepReceived | Phase::Disconnected
                ) =>
            {
                let _ = st.send(&Msg::Drep);
                st.report_disconnect(id);
            }
            Ok(Some(Msg::Drep)) if st.disc_sent => {
                st.report_disconnect(id);
            }
            other => {
                // The end of the connection, or a message out of turn.
                match &other {
                    Ok(Some(m)) => {
                        warn(&format!(
                            "closing a connection after {m:?} in phase {:?}",
                            st.phase
                        ));
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                        warn(&format!("closing a connection: {e}"));
                    }
                    _ => {}
                }
                match st.phase {
                    Phase::Connected | Phase::Accepted | Phase::RepReceived => {
                        st.report_disconnect(id);
                    }
                    Phase::Disconnected if st.disc_sent => st.report_disconnect(id),
                    Phase::Connecting => {
                        st.phase = Phase::Failed;
                        st.post(EventRec::new(
                            id,
                            RDMA_CM_EVENT_CONNECT_ERROR,
                            -libc::ECONNRESET,
                        ));
                    }
                    _ => {}
                }
                st.hang_up();
                return;
            }
        }
    }
}
