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
//!
//! No thread waits on a peer while it holds a lock: every write to a peer
//! is non-blocking ([`send_now`]), and a listener's thread polls its new
//! connections without blocking (see the crate docs for the rules on
//! peers).

use std::collections::VecDeque;
use std::io::Read as _;
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::c_int;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use verbs_emu::backend::ibverbs::ffi::*;

use crate::channel::{lock, Channel, EventRec};
use crate::devices::{devices, Device};
use crate::ffi::*;
use crate::wire::{read_msg, Conn, Msg, HEADER};
use crate::{warn, SendPtr};

/// How long a new TCP connection of a listener has to deliver its whole
/// REQ (a deadline over the message, not per read; shorter in the unit
/// tests, which wait it out).
pub(crate) const REQ_WAIT: Duration = if cfg!(test) {
    Duration::from_millis(1500)
} else {
    Duration::from_secs(10)
};
/// How many connections a listener lets wait for their REQ at once; a
/// new one beyond that closes the one that has waited longest (one
/// thread polls them all: a peer can pile up neither threads nor a
/// queue that locks others out).
const MAX_PENDING: usize = 256;
/// The longest a listener's thread sleeps between checks that its id
/// still lives.
const LISTEN_TICK: Duration = Duration::from_millis(200);
/// The backlog of `rdma_listen` with a backlog of 0 or less, and the
/// most any backlog counts for (the kernel's `max_backlog`, 1024).
pub(crate) const DEFAULT_BACKLOG: usize = 1024;
/// How long `rdma_connect` tries to reach the listener.
const CONNECT_WAIT: Duration = Duration::from_secs(5);
/// How long a refused connection is retried before the connect is
/// reported rejected: programs that agree on a moment out of band (perftest
/// with `-R`) may connect a moment before the peer's `rdma_listen`.
const LISTENER_GRACE: Duration = Duration::from_secs(1);
/// The reason code a REJ for "nobody listens there" carries
/// (IB_CM_REJ_INVALID_SERVICE_ID).
pub(crate) const REJ_INVALID_SERVICE_ID: c_int = 8;
/// The reason code of a REJ for a REQ or REP whose GID is not the one its
/// connection comes from (IB_CM_REJ_INVALID_GID).
pub(crate) const REJ_INVALID_GID: c_int = 12;
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
    /// Whether the peer's DREQ was answered (once: a repeated DREQ gets
    /// no second DREP, as in the kernel's CM).
    pub drep_sent: bool,
    /// A listener's backlog: how many of its connect requests may wait
    /// in the channel, not yet taken by the program.
    pub backlog: usize,
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
                    drep_sent: false,
                    backlog: DEFAULT_BACKLOG,
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

    /// Send a message to the peer without waiting (see [`send_now`]); a
    /// send that fails hangs the connection up.
    pub fn send(&mut self, m: &Msg) -> Result<(), c_int> {
        let Some(s) = self.stream.as_ref() else {
            return Err(libc::ENOTCONN);
        };
        let r = send_now(s, m);
        if r.is_err() {
            self.hang_up();
        }
        r
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

/// Send one message without ever waiting for the peer. A CM connection
/// carries at most one message of each type per direction (REQ or REP,
/// RTU or REJ, one DREQ, one DREP: well under 1 KiB in all), so the
/// socket's send buffer (4 KiB at the least) has room for every one of
/// them whatever the peer does; a send that would block or goes out in
/// part is therefore a broken connection, and fails (the errno) for the
/// caller to hang up. So no holder of an id's lock waits on a peer.
pub(crate) fn send_now(s: &TcpStream, m: &Msg) -> Result<(), c_int> {
    let bytes = m.encode().map_err(|_| libc::EINVAL)?;
    loop {
        // SAFETY: a send of `bytes` (valid for its length) on our socket;
        // MSG_DONTWAIT never waits, MSG_NOSIGNAL makes a closed peer an
        // error rather than SIGPIPE.
        let n = unsafe {
            libc::send(
                s.as_raw_fd(),
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if n < 0 {
            let e = errno(libc::EPIPE);
            if e == libc::EINTR {
                continue;
            }
            return Err(e);
        }
        return if usize::try_from(n) == Ok(bytes.len()) {
            Ok(())
        } else {
            Err(libc::EPIPE)
        };
    }
}

/// The calling thread's errno, `or` if there is none.
fn errno(or: c_int) -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(or)
}

/// Whether a REQ (`rep` false) or REP (`rep` true) naming `gid` is
/// admitted over a TCP connection whose peer is `peer`. The rule: the GID
/// must be the IPv4-mapped address the connection comes from, so that a
/// peer can point our QP only at itself. The active side binds its
/// connection to its device's address (see [`connect_from`]), so a REQ
/// meets the rule exactly; the exception is a connection over IPv6
/// loopback (`::1`), which cannot come from an IPv4 device address: there
/// a loopback GID (`127/8`, this host) is admitted. A REP comes from the
/// address the program dialled, which on loopback is not the listener's
/// device address (each process has its own `127.0.H.L`): a REP over a
/// loopback connection may name any loopback GID, which is this host too.
pub(crate) fn gid_admitted(gid: &[u8; 16], peer: IpAddr, rep: bool) -> bool {
    if gid[..12] != [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] {
        return false;
    }
    let g = Ipv4Addr::new(gid[12], gid[13], gid[14], gid[15]);
    let peer4 = match peer {
        IpAddr::V4(a) => Some(a),
        IpAddr::V6(a) => a.to_ipv4_mapped(),
    };
    if peer4 == Some(g) {
        return true;
    }
    let v6_loopback = matches!(peer, IpAddr::V6(a) if a.is_loopback());
    let loopback = v6_loopback || peer4.is_some_and(|a| a.is_loopback());
    g.is_loopback() && if rep { loopback } else { v6_loopback }
}

/// Connect to `dst` within `wait`, from `src` (port chosen by the kernel)
/// when `dst` is IPv4 and `src` is given: the connection then comes from
/// the device's address, which the REQ's GID names. If `src` cannot be
/// bound, the connection is made from wherever the kernel chooses (the
/// passive side then decides, see [`gid_admitted`]).
fn connect_from(
    src: Option<Ipv4Addr>,
    dst: SocketAddr,
    wait: Duration,
) -> std::io::Result<TcpStream> {
    let (Some(src), SocketAddr::V4(d)) = (src, dst) else {
        return TcpStream::connect_timeout(&dst, wait);
    };
    let sin = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(ip).to_be(),
        },
        sin_zero: [0; 8],
    };
    let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: a new socket; its descriptor is ours alone.
    let fd = unsafe {
        libc::socket(
            libc::AF_INET,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: the fresh descriptor, owned from here on (closed on drop).
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: c_int = 1;
    let local = sin(src, 0);
    // SAFETY: an int option (failure is harmless: the port is then chosen
    // at bind rather than at connect) and a bind to a sockaddr_in of
    // `len` bytes, both on our socket.
    let bound = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_IP,
            libc::IP_BIND_ADDRESS_NO_PORT,
            std::ptr::from_ref(&one).cast(),
            std::mem::size_of::<c_int>() as libc::socklen_t,
        );
        libc::bind(fd.as_raw_fd(), std::ptr::from_ref(&local).cast(), len)
    };
    if bound != 0 {
        return TcpStream::connect_timeout(&dst, wait);
    }
    let remote = sin(*d.ip(), d.port());
    // SAFETY: a connect to a sockaddr_in of `len` bytes on our socket.
    let r = unsafe { libc::connect(fd.as_raw_fd(), std::ptr::from_ref(&remote).cast(), len) };
    if r != 0 && errno(libc::EIO) != libc::EINPROGRESS {
        return Err(std::io::Error::last_os_error());
    }
    if r != 0 {
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = c_int::try_from(wait.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: one pollfd of ours.
        match unsafe { libc::poll(&mut p, 1, ms) } {
            0 => return Err(std::io::ErrorKind::TimedOut.into()),
            n if n < 0 => return Err(std::io::Error::last_os_error()),
            _ => {}
        }
        let mut err: c_int = 0;
        let mut elen = std::mem::size_of::<c_int>() as libc::socklen_t;
        // SAFETY: reading an int option of our socket into `err`.
        let r = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_ERROR,
                std::ptr::from_mut(&mut err).cast(),
                &mut elen,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if err != 0 {
            return Err(std::io::Error::from_raw_os_error(err));
        }
    }
    let s = TcpStream::from(fd);
    s.set_nonblocking(false)?;
    Ok(s)
}

/// Start the active side: connect to `dst` (from `src`, the device's
/// address, see [`connect_from`]), send `req`, then read the peer's
/// messages for `sh`.
pub(crate) fn start_active(sh: Arc<IdShared>, src: Option<Ipv4Addr>, dst: SocketAddr, req: Msg) {
    spawn("rdmacm-active", move || {
        let id = sh.ptr.0;
        let start = Instant::now();
        let stream = loop {
            match connect_from(src, dst, CONNECT_WAIT) {
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
    spawn("rdmacm-listen", move || listen_loop(&lsh, &listener));
}

/// A new connection of a listener, its REQ still arriving.
struct Incoming {
    stream: TcpStream,
    /// The bytes of the message so far.
    buf: Vec<u8>,
    /// When the whole REQ must be in.
    deadline: Instant,
}

/// What reading an [`Incoming`] came to.
enum Progress {
    /// More bytes are due.
    More,
    /// The REQ is complete.
    Req(Conn),
    /// The peer closed, failed or sent something else: drop it.
    Drop,
}

impl Incoming {
    /// Read what has arrived, never waiting and never past the message.
    fn advance(&mut self) -> Progress {
        loop {
            let mut want = HEADER;
            if let Some(h) = self.buf.first_chunk::<HEADER>() {
                let Ok((kind, len)) = Msg::check_header(h) else {
                    return Progress::Drop;
                };
                want = HEADER + len;
                if self.buf.len() == want {
                    return match Msg::decode(kind, &self.buf[HEADER..]) {
                        Ok(Msg::Req(c)) => Progress::Req(c),
                        _ => Progress::Drop,
                    };
                }
            }
            let mut chunk = [0u8; 256];
            let n = (want - self.buf.len()).min(chunk.len());
            match self.stream.read(&mut chunk[..n]) {
                Ok(0) => return Progress::Drop,
                Ok(got) => self.buf.extend_from_slice(&chunk[..got]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Progress::More,
                Err(_) => return Progress::Drop,
            }
        }
    }
}

/// A listener's thread: one `poll` over the listening socket and every
/// connection whose REQ is on its way, each with a deadline over its whole
/// REQ ([`REQ_WAIT`]), so no peer, slow or silent, holds up another's.
/// A complete REQ goes to a thread of its own ([`passive`]).
fn listen_loop(lsh: &Arc<IdShared>, listener: &TcpListener) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut pending: VecDeque<Incoming> = VecDeque::new();
    loop {
        if lock(&lsh.st).destroyed {
            return;
        }
        let now = Instant::now();
        pending.retain(|p| p.deadline > now);
        let wait = pending
            .iter()
            .map(|p| p.deadline.saturating_duration_since(now))
            .min()
            .unwrap_or(LISTEN_TICK)
            .min(LISTEN_TICK);
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
            .chain(pending.iter().map(|p| p.stream.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let ms = c_int::try_from(wait.as_millis())
            .unwrap_or(c_int::MAX)
            .max(1);
        // SAFETY: `fds` is a live array of fds.len() pollfds.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n < 0 {
            if errno(libc::EINTR) != libc::EINTR {
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        // The connections first (their indices match `fds[1..]`), last to
        // first so that removing one leaves the others' indices.
        for i in (0..pending.len()).rev() {
            if fds[i + 1].revents == 0 {
                continue;
            }
            match pending[i].advance() {
                Progress::More => {}
                Progress::Drop => {
                    pending.remove(i);
                }
                Progress::Req(req) => {
                    if let Some(p) = pending.remove(i) {
                        let lsh = lsh.clone();
                        spawn("rdmacm-passive", move || passive(lsh, p.stream, req));
                    }
                }
            }
        }
        if fds[0].revents == 0 {
            continue;
        }
        loop {
            match listener.accept() {
                Ok((s, _)) => {
                    if s.set_nonblocking(true).is_err() {
                        continue;
                    }
                    if pending.len() >= MAX_PENDING {
                        // The one that has waited longest makes room.
                        pending.pop_front();
                    }
                    pending.push_back(Incoming {
                        stream: s,
                        buf: Vec::new(),
                        deadline: Instant::now() + REQ_WAIT,
                    });
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ECONNABORTED | libc::EMFILE | libc::ENFILE | libc::ENOBUFS)
                    ) =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                    break;
                }
                // The listening socket was shut down (rdma_destroy_id).
                Err(_) => return,
            }
        }
    }
}

/// Refuse a request: a REJ (never waiting), then the connection closes.
fn refuse(s: &TcpStream) {
    let _ = send_now(s, &Msg::Rej(Vec::new()));
    let _ = s.shutdown(Shutdown::Both);
}

/// One incoming connection whose REQ has arrived: check it, make the new
/// id, report the request, then read the peer's messages. The request is
/// refused (a REJ) when its GID is not its connection's
/// ([`gid_admitted`]), when the listener's backlog of requests not yet
/// taken by the program is full, or when it does not fit the listener.
fn passive(lsh: Arc<IdShared>, stream: TcpStream, req: Conn) {
    if stream.set_nonblocking(false).is_err() {
        return;
    }
    let _ = stream.set_nodelay(true);
    let (Ok(local), Ok(peer), Ok(r)) =
        (stream.local_addr(), stream.peer_addr(), stream.try_clone())
    else {
        return;
    };
    if !gid_admitted(&req.gid, peer.ip(), false) {
        warn(&format!(
            "refusing a REQ from {peer} that names another GID ({:02x?})",
            &req.gid[12..]
        ));
        return refuse(&stream);
    }
    let Ok(devs) = devices() else {
        return refuse(&stream);
    };
    let child_sh;
    {
        let lst = lock(&lsh.st);
        if lst.destroyed || lst.phase != Phase::Listening {
            return refuse(&stream);
        }
        // The backlog: requests reported but not yet taken by the program
        // (rdma_get_cm_event), as the kernel's CM counts them.
        if lst.chan.queued_requests(lsh.ptr.0) >= lst.backlog {
            warn("refusing a connect request: the listener's backlog is full");
            return refuse(&stream);
        }
        // SAFETY: the listening id is alive (not destroyed, checked under
        // its lock, which destroy takes before freeing it).
        let lid = unsafe { &*lsh.ptr.0 };
        // RC requests go to TCP port-space listeners, UD ones to UDP ones.
        let ud_ps = lid.ps == RDMA_PS_UDP || lid.ps == RDMA_PS_IPOIB;
        if ud_ps != (u32::from(req.qp_type) == IBV_QPT_UD) {
            return refuse(&stream);
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
pub(crate) fn read_loop(sh: &Arc<IdShared>, mut r: TcpStream) {
    let id = sh.ptr.0;
    let peer = r.peer_addr().map(|a| a.ip());
    loop {
        let msg = read_msg(&mut r);
        let mut st = lock(&sh.st);
        if st.destroyed {
            return;
        }
        match msg {
            Ok(Some(Msg::Rep(c)))
                if st.phase == Phase::Connecting
                    && !peer.as_ref().is_ok_and(|p| gid_admitted(&c.gid, *p, true)) =>
            {
                // The REP names a GID its connection does not come from:
                // our QP would send there. Refuse it (see gid_admitted).
                warn(&format!(
                    "rejecting a REP that names another GID ({:02x?})",
                    &c.gid[12..]
                ));
                let _ = st.send(&Msg::Rej(Vec::new()));
                st.phase = Phase::Failed;
                st.post(EventRec::new(id, RDMA_CM_EVENT_REJECTED, REJ_INVALID_GID));
                st.hang_up();
                return;
            }
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
                // Answered once: a repeated DREQ gets no second DREP (a
                // peer flooding them costs a lock per message, no write).
                if !st.drep_sent {
                    st.drep_sent = true;
                    let _ = st.send(&Msg::Drep);
                }
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
