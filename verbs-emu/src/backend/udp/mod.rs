//! The UDP backend: RoCEv2 over a UDP socket, driven by the sans-IO
//! transport engine ([`roce::transport::Qp`]).
//!
//! Each opened device owns one socket bound to its own address (any of
//! 127.0.0.0/8, or an interface address) on UDP 4791 or another port, one
//! [`HostMemory`] with the registered regions, one engine per QP, and its
//! CQs. Everything lives under one lock; progress is made by whoever holds
//! it:
//!
//! * `post_send` queues work and sends what the engine produces at once,
//!   from the caller's thread;
//! * `poll_cq` and `wait_cq` receive, run due timers, transmit and collect
//!   completions when the CQ is empty (busy polling needs no other thread);
//! * a background thread per device does the same when the application has
//!   not called in for a millisecond and no thread of it waits in
//!   `wait_cq` (a server waiting on TCP, a program sleeping), so that
//!   retransmissions and responses never stall. Between packets it spins
//!   while traffic is sparse (requests answered without a wake-up) and
//!   sleeps in poll(2) while a stream flows (see `background`). That is
//!   [`BackgroundMode::Adaptive`], for applications that call in while
//!   they wait. With [`BackgroundMode::Interrupt`] (the drop-in
//!   libibverbs, whose C programs may wait by watching memory) it instead
//!   moves every packet as it arrives once the application stops calling
//!   in, like a NIC's receive interrupt: it blocks in ppoll(2) on the
//!   socket and the engines' next deadline, and spins between sparse
//!   packets only while the application's threads are off the CPU; ACKs
//!   with nothing to go with wait up to [`ACK_HOLD`] for the application's
//!   next request.
//!
//! Time fed to the engine is the time since the device was opened, in
//! picoseconds.
//!
//! The wire: every packet is emitted by [`roce::wire::roce`] with the ICRC
//! computed over the IPv4 and UDP headers the kernel writes for this socket
//! (DF, identification 0, or 0, 1, 2, ... within a GSO run; see
//! [`super::sys`]). Multi-packet messages go out as GSO runs: a FIRST packet
//! (larger, with its RETH) alone, then the equal-sized MIDDLE packets and
//! the LAST one in one `sendmmsg` entry (runs up to the largest UDP
//! datagram). On the plain socket each packet is handed to the kernel as
//! iovecs: its headers and its pad and ICRC from the batch, its payload
//! straight from the registered region, so the payload is copied once (by
//! the kernel) instead of twice; wrappers that read the bytes (faults,
//! capture) get them gathered into one buffer. On receive, GRO runs are split
//! again and each packet's ICRC is checked against the header its sender's
//! kernel wrote if nothing on the path re-segmented (identification = its
//! position in the GRO run, DF): one CRC pass. On a mismatch the IPv4
//! identification and DF that fit are solved for and, if plausible,
//! accepted and counted (`rx_icrc_id_solved`; [`Ipv4IcrcCheck`] has the
//! rules and the chance that a corrupted packet passes), so a qdisc that
//! splits GSO runs, a sender without GSO, GRO merging differently or a
//! sender numbering otherwise cost no valid packet. Anything else is
//! counted (`rx_icrc_encapsulated`) and dropped, as a NIC does.
//!
//! How far the ICRC is proven: single datagrams (identification 0, DF) are
//! checked against the kernel's real IPv4 header in an AF_PACKET capture on
//! loopback, and tshark decodes them. GSO runs rely on Linux numbering the
//! segments' identification 0, 1, 2, ... (ROCEV2.md §8); loopback never
//! cuts a run on the wire, but a receiver without `UDP_GRO` gets the
//! kernel's segments one by one, each with its own identification, which
//! the receive path solves for (an integration test). Turn GSO off
//! ([`SocketOptions::gso`]) where exact wire behaviour matters more than
//! speed. ECN bits received (`IP_RECVTOS`) go to the
//! engine, which answers CE with CNPs; transmitted packets carry the ECN
//! codepoint the engine asks for (ECT(0)).
//!
//! Congestion control ([`UdpConfig::set_cc`], or per QP
//! [`QpInitAttr::cc`]): every QP answers CE with at most one CNP per
//! [`UdpConfig::min_time_between_cnps`]; with DCQCN, a QP whose rate was
//! cut below the line rate has its data held to that rate by the engine's
//! token bucket ([`roce::cc::Pacer`], [`UdpConfig::pacing_burst`] deep,
//! making up for late rounds by up to [`PACING_CATCH_UP`]). A progress
//! round sends what the tokens allow, several packets and GSO runs, and a
//! wait for the next tokens is a real sub-millisecond wait (ppoll with a
//! nanosecond timeout, spun below 100 µs).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::counters::{QpCounters, TransportTotals};
use super::io::{DatagramIo, IoStats, SocketIo};
use super::sys::{RoceSocket, RxBatch, SocketOptions, TxBatch, MAX_BATCH};
use super::{
    AhHandle, AsyncEvent, Backend, BackendKind, CqHandle, DeviceEntry, MrHandle, MrKeys, PdHandle,
    Provider, QpCreated, QpHandle,
};
use crate::verbs::{
    qp_state, AhAttr, DeviceAttr, Gid, Mtu, PortAttr, PostError, QpAttr, QpAttrMask, QpCap,
    QpInitAttr, QpState, QpType, RecvWr, Result, SendFlags, SendOp, SendWr, VerbsError, WcFlags,
    WorkCompletion,
};
use roce::time::{Duration as PsDuration, Instant, Rate};
use roce::transport::{
    self as tp, AccessFlags, AtomicOp, MemError, MemKey, Memory, Payload, Qp, QpConfig,
};
use roce::wire::icrc::{IcrcMatch, IpEncap, Ipv4IcrcCheck, UdpEncap};
use roce::wire::roce::{emit_udp_payload, parse_udp_payload_unverified, PayloadSource};
use roce::wire::{Ecn, Lkey, Opcode, Qpn, Rkey};

/// The IANA RoCEv2 port.
pub const ROCE_PORT: u16 = 4791;
/// Largest RoCEv2 datagram: 4096-byte payload plus headers and ICRC.
const MAX_PACKET: usize = 4096 + 12 + 28 + 4 + 4 + 16;
/// GSO runs are kept under this many bytes.
const MAX_RUN_BYTES: usize = super::sys::MAX_DATAGRAM;
/// How long the background thread stays out of the way after the
/// application called in.
const APP_ACTIVE_NS: u64 = 1_000_000;
/// How long a [`BackgroundMode::Interrupt`] device (its `poll_cq` and its
/// background thread) holds an ACK it has nothing else to send with. A
/// program that watches memory for its peer's RDMA WRITE answers it with
/// its own within a few microseconds; the ACK then leaves in the same
/// datagram, and the peer, busy polling for that ACK, finds the WRITE
/// beside it and answers without needing its own background thread
/// (ib_write_lat). A NIC sends the ACK at once; this delays an unanswered
/// one by at most this much while the application keeps calling in.
pub const ACK_HOLD: PsDuration = PsDuration::from_us(10);
/// How long the background thread keeps polling without sleeping after
/// the last packet it moved, when traffic is sparse.
const BACKGROUND_SPIN_NS: u64 = 200_000;
/// Waits for an engine deadline shorter than this are spun, not slept:
/// the kernel's timer slack (50 µs by default) would stretch an RNR timer
/// of tens of microseconds (ROCEV2.md §5.6) several times over.
const SPIN_BELOW: Duration = Duration::from_micros(100);
/// The default [`UdpConfig::pacing_burst`]: 10 µs at the QP's rate, a few
/// packets at tens of Gbit/s. Over any 1 ms the rate is then kept within
/// 1 % plus a packet while the host gives the emulation its rounds.
pub const PACING_BURST: PsDuration = PsDuration::from_us(10);
/// How much of a late progress round is made up for while a QP waits on
/// its pacer ([`roce::cc::Pacer::with_catch_up`]): a busy host preempts
/// the sending thread for up to a scheduler time slice, and a NIC's pacer
/// would have gone on sending meanwhile.
pub const PACING_CATCH_UP: PsDuration = PsDuration::from_ms(1);
/// Packets received in one progress round that make the background thread
/// treat the traffic as a stream (and sleep, not spin, when the socket is
/// empty): about half the GSO run of a 64 KiB message at a 4 KiB MTU.
const BULK_PACKETS: u64 = 8;

/// How a UDP device is set up.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// The device name (e.g. `udp_lo`).
    pub name: String,
    /// Address and port to bind.
    pub bind: SocketAddrV4,
    /// Socket options (GSO, GRO, buffers).
    pub socket: SocketOptions,
    /// Spin on the socket in `wait_cq` instead of sleeping in `poll(2)`.
    pub busy_poll: bool,
    /// Accept packets whose ICRC does not match (still counted).
    pub accept_bad_icrc: bool,
    /// Link MTU used to derive the port's active MTU (the largest IB MTU
    /// whose packets fit, as a RoCE NIC derives it from its netdev's MTU).
    /// Default: the bound interface's MTU (`/sys/class/net/IF/mtu`), 65536
    /// on loopback, 1500 where the interface is unknown.
    pub link_mtu: u32,
    /// The link's speed: the line rate DCQCN starts at and never exceeds
    /// ([`UdpConfig::set_cc`]). Default: the bound interface's speed
    /// (`/sys/class/net/IF/speed`), else [`DEFAULT_LINK_RATE`] (loopback
    /// and interfaces that report none).
    pub link_rate: Rate,
    /// Congestion control of every QP's sends (DCQCN reaction point, or
    /// none) unless the QP is created with its own
    /// ([`QpInitAttr::cc`]). The notification point (CNPs on CE) is always
    /// on.
    pub cc: roce::cc::CcConfig,
    /// The notification point's CNP interval for every QP unless created
    /// with its own ([`QpInitAttr::min_time_between_cnps`]): at most one
    /// CNP per QP per this time (default ConnectX's,
    /// [`roce::cc::CONNECTX_CNP_INTERVAL`]).
    pub min_time_between_cnps: PsDuration,
    /// Hold QPs to the line rate too, emulating a link of that speed.
    /// Off (the default), a QP at full speed has no rate limiter, as a
    /// ConnectX QP before its first CNP: the interface (the socket) sets
    /// its pace, and DCQCN on an uncongested path costs nothing.
    /// [`UdpConfig::set_cc`] turns it on when the spec names its own
    /// `line_rate`.
    pub pace_at_line_rate: bool,
    /// Depth of each QP's rate limiter ([`roce::cc::Pacer`]) while its
    /// congestion control limits the rate: a progress round sends what the
    /// rate allowed since the last one, up to this much time's worth
    /// (default [`PACING_BURST`]).
    pub pacing_burst: PsDuration,
    /// The port's P_Key table (`ibv_query_pkey`): a QP's `pkey_index`
    /// picks its P_Key, sent in every BTH and matched against every
    /// received one (full and limited membership, ROCEV2.md §1.5).
    /// Default: 0xFFFF at index 0.
    pub pkey_table: [u16; tp::PKEY_TABLE_LEN],
    /// How long the background thread stays out of the way after the
    /// application called in, in nanoseconds (default 1 ms): the longest a
    /// packet can wait when the application stops calling in just before
    /// it arrives, and the period at which the thread checks while the
    /// application keeps calling.
    pub app_active_ns: u64,
    /// How the background thread waits for packets.
    pub background: BackgroundMode,
}

/// How a device's background thread moves packets the application does
/// not collect itself (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundMode {
    /// For applications that call in while they wait (`poll_cq`,
    /// `wait_cq`), as rocelab's own tools do: the thread stays out of
    /// their way for `app_active_ns` after each call, and between packets
    /// it spins while traffic is sparse and sleeps in poll(2) while a
    /// stream flows.
    #[default]
    Adaptive,
    /// For applications that may wait without calling in (C programs
    /// watching memory for a peer's RDMA WRITE): once the application has
    /// not called in for `app_active_ns`, the thread behaves like a NIC's
    /// receive interrupt. It blocks in the kernel on the socket (or until
    /// the next engine timer) and is woken at the packet's arrival. It
    /// spins between sparse packets (as `Adaptive` does) only while the
    /// application's threads use less than half a core, so it takes no
    /// core from a program spinning on memory but answers a server that
    /// blocks (`ib_read_lat`'s) without a wake-up. ACKs it has nothing to
    /// send with wait up to [`ACK_HOLD`] for the application's reply, and
    /// `poll_cq` holds them likewise, so that a ping-pong settles into
    /// each side's polling thread moving every packet, one datagram per
    /// hop.
    Interrupt,
}

impl UdpConfig {
    /// Defaults for a device bound to `bind`.
    pub fn new(bind: SocketAddrV4) -> UdpConfig {
        UdpConfig {
            name: device_name_for(*bind.ip()),
            bind,
            socket: SocketOptions::default(),
            busy_poll: false,
            accept_bad_icrc: false,
            link_mtu: if bind.ip().is_loopback() {
                65536
            } else {
                link_mtu_of(*bind.ip()).unwrap_or(1500)
            },
            link_rate: link_rate_of(*bind.ip()).unwrap_or(DEFAULT_LINK_RATE),
            cc: roce::cc::CcConfig::None,
            min_time_between_cnps: roce::cc::CONNECTX_CNP_INTERVAL,
            pace_at_line_rate: false,
            pacing_burst: PACING_BURST,
            pkey_table: tp::DEFAULT_PKEY_TABLE,
            app_active_ns: APP_ACTIVE_NS,
            background: BackgroundMode::Adaptive,
        }
    }

    /// Set the congestion control of every QP as `spec` names it: the
    /// reaction point ([`UdpConfig::cc`], DCQCN at [`UdpConfig::link_rate`]
    /// unless the spec sets its own line rate, which the QPs are then held
    /// to as a link of that speed would: [`UdpConfig::pace_at_line_rate`])
    /// and the CNP interval.
    pub fn set_cc(&mut self, spec: &roce::cc::CcSpec) {
        let (cc, cnp) = spec.resolve(self.link_rate);
        self.cc = cc;
        self.min_time_between_cnps = cnp;
        self.pace_at_line_rate = spec.dcqcn.is_some() && spec.line_rate.is_some();
    }
}

/// The link speed assumed where the interface reports none (loopback):
/// 100 Gbit/s, a common RoCE port.
pub const DEFAULT_LINK_RATE: Rate = Rate::from_gbps(100);

/// The speed of the interface that has `ip`, from
/// `/sys/class/net/IF/speed` (Mbit/s); `None` for loopback, unknown
/// addresses and interfaces that report none (-1 or unreadable).
pub fn link_rate_of(ip: Ipv4Addr) -> Option<Rate> {
    if ip.is_loopback() {
        return None;
    }
    let mbps: i64 = interface_attr(ip, "speed")?.parse().ok()?;
    (mbps > 0).then(|| Rate::from_bps(mbps as u64 * 1_000_000))
}

/// The MTU of the interface that holds `ip` (`/sys/class/net/IF/mtu`),
/// if it is known.
pub fn link_mtu_of(ip: Ipv4Addr) -> Option<u32> {
    interface_attr(ip, "mtu")?
        .parse()
        .ok()
        .filter(|&m: &u32| m >= 68)
}

/// `/sys/class/net/IF/<attr>`, trimmed, of the interface that holds `ip`.
fn interface_attr(ip: Ipv4Addr, attr: &str) -> Option<String> {
    let (name, _) = interfaces().into_iter().find(|&(_, a)| a == ip)?;
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}")).ok()?;
    Some(text.trim().to_string())
}

/// The device name for an address: `udp_<interface>` when known, else
/// `udp_<a>_<b>_<c>_<d>`.
pub fn device_name_for(ip: Ipv4Addr) -> String {
    if ip.is_loopback() {
        return "udp_lo".into();
    }
    for (name, a) in interfaces() {
        if a == ip {
            return format!("udp_{name}");
        }
    }
    let o = ip.octets();
    format!("udp_{}_{}_{}_{}", o[0], o[1], o[2], o[3])
}

/// The node GUID of an emulated device: derived from its address and port
/// like an EUI-64 (`02:00` locally administered prefix).
pub fn node_guid_for(bind: SocketAddrV4) -> u64 {
    let o = bind.ip().octets();
    u64::from_be_bytes([
        0x02,
        0x00,
        o[0],
        o[1],
        o[2],
        o[3],
        (bind.port() >> 8) as u8,
        bind.port() as u8,
    ])
}

/// The host's IPv4 interfaces, `(name, address)`, in the OS's order.
pub fn interfaces() -> Vec<(String, Ipv4Addr)> {
    let mut out = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `head` with a list we free below.
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return out;
    }
    let mut p = head;
    while !p.is_null() {
        // SAFETY: p walks the list getifaddrs returned; each node is valid
        // until freeifaddrs.
        let ifa = unsafe { &*p };
        if !ifa.ifa_addr.is_null() {
            // SAFETY: ifa_addr points at a sockaddr of at least its family's
            // size; we read sockaddr_in only for AF_INET.
            let fam = unsafe { (*ifa.ifa_addr).sa_family } as i32;
            if fam == libc::AF_INET {
                // SAFETY: AF_INET means the address is a sockaddr_in.
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
                // SAFETY: ifa_name is a NUL-terminated string.
                let name = unsafe { std::ffi::CStr::from_ptr(ifa.ifa_name) }
                    .to_string_lossy()
                    .into_owned();
                out.push((name, ip));
            }
        }
        p = ifa.ifa_next;
    }
    // SAFETY: head came from getifaddrs.
    unsafe { libc::freeifaddrs(head) };
    out
}

/// Lists and opens emulated devices: one per IPv4 interface, bound to its
/// address on the RoCEv2 port.
#[derive(Debug, Clone)]
pub struct UdpProvider {
    /// UDP port the opened devices bind.
    pub port: u16,
}

impl Default for UdpProvider {
    fn default() -> Self {
        UdpProvider { port: ROCE_PORT }
    }
}

impl Provider for UdpProvider {
    fn kind(&self) -> BackendKind {
        BackendKind::Udp
    }

    fn devices(&self) -> Result<Vec<DeviceEntry>> {
        Ok(interfaces()
            .into_iter()
            .map(|(name, ip)| {
                let bind = SocketAddrV4::new(ip, self.port);
                DeviceEntry {
                    name: format!("udp_{name}"),
                    node_guid: node_guid_for(bind),
                    kind: BackendKind::Udp,
                    detail: bind.to_string(),
                }
            })
            .collect())
    }

    fn open(&self, device: &DeviceEntry) -> Result<Arc<dyn Backend>> {
        let bind: SocketAddrV4 = device.detail.parse().map_err(|_| {
            VerbsError::invalid(
                "ibv_open_device",
                format!("{}: not a UDP device", device.name),
            )
        })?;
        let mut cfg = UdpConfig::new(bind);
        cfg.name = device.name.clone();
        Ok(Arc::new(UdpBackend::open(cfg)?))
    }

    /// An emulated device is its address: bind it. Any loopback address
    /// (127.0.0.0/8) or an interface's address opens; others are refused
    /// as `NoDevice`, as no device has that GID here.
    fn open_by_gid(&self, gid: Gid) -> Result<Arc<dyn Backend>> {
        let ip = gid.to_ipv4().ok_or_else(|| {
            VerbsError::NoDevice(format!(" with GID {gid} (the UDP backend is IPv4)"))
        })?;
        if !ip.is_loopback() && !interfaces().iter().any(|&(_, a)| a == ip) {
            return Err(VerbsError::NoDevice(format!(
                " with GID {gid}: {ip} is no address of this host"
            )));
        }
        let bind = SocketAddrV4::new(ip, self.port);
        let mut cfg = UdpConfig::new(bind);
        cfg.name = device_name_for(ip);
        Ok(Arc::new(UdpBackend::open(cfg)?))
    }
}

// ----------------------------------------------------------------------
// Memory: registered user regions, seen by the engine through `Memory`.
// ----------------------------------------------------------------------

/// What backs a region of [`HostMemory`]: the application's buffer.
#[derive(Debug)]
struct HostBuffer {
    ptr: *mut u8,
    /// The range was mlock(2)ed at registration (and is unlocked at
    /// deregistration).
    locked: bool,
}

/// Registered memory of one device: the engine's region table
/// ([`roce::transport::memory`]: keys, bounds, rights, protection
/// domains, ZERO_BASED) over pointers into the application's buffers.
#[derive(Debug, Default)]
pub struct HostMemory {
    regions: tp::memory::Regions<HostBuffer>,
}

// SAFETY: the raw pointers name memory the application registered and
// promised (Backend::reg_mr's contract) to keep valid until deregistration;
// all access goes through the device lock.
unsafe impl Send for HostMemory {}

impl HostMemory {
    /// Register `len` bytes at `ptr` in protection domain `pd`; the key.
    fn register(
        &mut self,
        ptr: *mut u8,
        len: u64,
        access: AccessFlags,
        pd: u64,
    ) -> std::result::Result<u32, MemError> {
        let buf = HostBuffer { ptr, locked: false };
        let r = self.regions.register(ptr as u64, len, access, pd, buf)?;
        Ok(r.lkey.value())
    }

    /// The host pointer for `[addr, addr + len)` in the region `key`
    /// names, checking the rights `access` and, with `pd`, that the region
    /// belongs to that protection domain (the table's checks).
    fn locate(
        &self,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
        pd: Option<u64>,
    ) -> std::result::Result<*mut u8, MemError> {
        let (idx, off) = self.regions.locate(key, addr, len, access, pd)?;
        // SAFETY: off + len <= the region's length (checked by `locate`),
        // so the pointer stays inside the registered buffer.
        Ok(unsafe { self.regions.region(idx).store.ptr.add(off as usize) })
    }

    /// This memory as the QPs of protection domain `pd` see it (keys of
    /// other PDs name nothing, ROCEV2.md §5.10), or, with `None`, as the
    /// device sees it (payload gathering for transmission).
    fn view(&self, pd: Option<u64>) -> HostView<'_> {
        HostView { mem: self, pd }
    }
}

/// [`HostMemory`] seen through the [`Memory`] trait, from one protection
/// domain (`pd: Some`: every key, local or remote, must name a region of
/// that PD, so that a peer's R_Key or an application's L_Key of another PD
/// fails like an unknown key) or from the device (`None`). Writes go
/// through the regions' raw pointers, so a shared borrow of the table
/// suffices; the device lock serialises them.
struct HostView<'a> {
    mem: &'a HostMemory,
    pd: Option<u64>,
}

impl Memory for HostView<'_> {
    fn check(
        &self,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> std::result::Result<(), MemError> {
        self.mem.locate(key, addr, len, access, self.pd).map(drop)
    }

    fn write(
        &mut self,
        key: MemKey,
        addr: u64,
        data: Payload<'_>,
    ) -> std::result::Result<(), MemError> {
        let p = self.mem.locate(
            key,
            addr,
            u64::from(data.len()),
            AccessFlags::EMPTY,
            self.pd,
        )?;
        if let Payload::Bytes(b) = data {
            // SAFETY: `locate` bounds-checked [addr, addr + len) inside a
            // live registered region; the source is a distinct packet buffer.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
        }
        Ok(())
    }

    fn read(&self, key: MemKey, addr: u64, out: &mut [u8]) -> std::result::Result<(), MemError> {
        let p = self
            .mem
            .locate(key, addr, out.len() as u64, AccessFlags::EMPTY, self.pd)?;
        // SAFETY: as in `write`, reading instead.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn atomic(
        &mut self,
        key: MemKey,
        addr: u64,
        op: AtomicOp,
    ) -> std::result::Result<u64, MemError> {
        if addr % 8 != 0 {
            return Err(MemError::Misaligned(addr));
        }
        let p = self
            .mem
            .locate(key, addr, 8, AccessFlags::EMPTY, self.pd)?
            .cast::<u64>();
        // SAFETY: 8 bytes inside the region, checked by `locate`.
        let orig = unsafe { std::ptr::read_unaligned(p) };
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        // SAFETY: as above.
        unsafe { std::ptr::write_unaligned(p, new) };
        Ok(orig)
    }

    fn write_u64(
        &mut self,
        key: MemKey,
        addr: u64,
        value: u64,
    ) -> std::result::Result<(), MemError> {
        let p = self
            .mem
            .locate(key, addr, 8, AccessFlags::EMPTY, self.pd)?
            .cast::<u64>();
        // SAFETY: 8 bytes inside the region, checked by `locate`.
        unsafe { std::ptr::write_unaligned(p, value) };
        Ok(())
    }

    fn invalidate(&mut self, rkey: Rkey) -> std::result::Result<(), MemError> {
        self.mem.regions.invalidate(rkey.value(), self.pd)
    }

    fn carries_bytes(&self) -> bool {
        true
    }
}

// ----------------------------------------------------------------------
// Device state
// ----------------------------------------------------------------------

#[derive(Debug, Default)]
struct Cq {
    queue: VecDeque<WorkCompletion>,
    capacity: usize,
    /// The CQ overflowed: it is in error, as a device's is, and takes no
    /// more completions.
    overrun: bool,
    users: u32,
}

struct QpEntry {
    engine: Qp,
    qp_type: QpType,
    pd: u64,
    send_cq: u64,
    recv_cq: u64,
    cap: QpCap,
    /// Inline payloads are copied here at post time (one slot per send
    /// queue entry), a region only the backend knows.
    inline_buf: Box<[u8]>,
    inline_key: u32,
    inline_next: usize,
    /// The DSCP part of the address vector's traffic class (its ECN bits
    /// cleared: the engine picks the ECN codepoint), in the IP TOS byte of
    /// every packet the QP sends (connected QPs; 0 until an AV is set).
    tclass_dscp: u8,
}

/// Counters of the UDP device (what a NIC's ethtool/hw_counters show).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdpStats {
    /// Packets handed to the engines.
    pub rx_packets: u64,
    /// Packets with a bad ICRC, dropped unless `accept_bad_icrc` (named
    /// as mlx5's `ethtool -S` counter, which the doctor reads).
    pub rx_icrc_encapsulated: u64,
    /// Packets accepted despite a bad ICRC (`accept_bad_icrc`).
    pub rx_icrc_accepted: u64,
    /// Packets whose ICRC did not match the header expected from their
    /// position in the datagram (the path re-segmented, or the sender
    /// numbers its IPv4 identification otherwise) but matched a solved,
    /// plausible identification and DF, and were accepted
    /// ([`roce::wire::icrc::Ipv4IcrcCheck`]). Not ICRC errors.
    pub rx_icrc_id_solved: u64,
    /// Packets with a good ICRC (or too short to carry one) that did not
    /// parse.
    pub rx_malformed: u64,
    /// Packets for a QP that does not exist.
    pub rx_unknown_qp: u64,
    /// Received CE marks.
    pub rx_ecn_ce: u64,
    /// Packets built and sent.
    pub tx_packets: u64,
    /// Datagrams in GSO runs (more than one packet each).
    pub tx_gso_runs: u64,
    /// Transmits whose payload could not be read (a local protection fault
    /// after the engine's check) and were dropped.
    pub tx_errors: u64,
}

struct State {
    io: Box<dyn DatagramIo>,
    mem: HostMemory,
    pds: BTreeMap<u64, u32>,
    cqs: BTreeMap<u64, Cq>,
    qps: BTreeMap<u32, QpEntry>,
    ahs: BTreeMap<u64, (u64, AhAttr)>,
    next_handle: u64,
    next_qpn: u32,
    tx: TxBatch,
    /// ACKs of one transmit round with their QP's DSCP, sent after the
    /// requests; between rounds, the ACKs the background thread holds
    /// (see [`ACK_HOLD`]).
    acks: Vec<(tp::Transmit, u8)>,
    /// When the held ACKs in `acks` must leave, if any are held.
    acks_held_until: Option<Instant>,
    rx: RxBatch,
    /// The receive ICRC check (remembers identifications per source).
    icrc: Ipv4IcrcCheck,
    stats: UdpStats,
    /// Asynchronous events not yet taken (`ibv_get_async_event`).
    events: VecDeque<AsyncEvent>,
    /// The latest time handed to any engine: received packets are never
    /// dated earlier, so that every engine sees time go forward.
    fed: Instant,
    /// The transport counters of QPs that were destroyed or reset, so
    /// that the device's stay monotonic.
    retired: TransportTotals,
}

struct Shared {
    state: Mutex<State>,
    socket: Arc<RoceSocket>,
    local: SocketAddrV4,
    start: std::time::Instant,
    stop: AtomicBool,
    app_touch_ns: AtomicU64,
    /// Application threads inside `wait_cq`: they make progress
    /// themselves, so the background thread stays out of their way (two
    /// threads woken by every datagram, taking turns at the lock).
    app_waiting: AtomicU64,
    /// The engines' next deadline after the last progress round, in
    /// nanoseconds since the device was opened (`u64::MAX`: none), so that
    /// the background thread wakes for it even while it otherwise stays
    /// out of the application's way.
    next_deadline_ns: AtomicU64,
    cfg: UdpConfig,
    active_mtu: Mtu,
}

/// An opened UDP device. See the module docs.
pub struct UdpBackend {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves plain data; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn os(verb: &'static str, e: io::Error) -> VerbsError {
    VerbsError::Os { verb, source: e }
}

fn encode_addr(a: SocketAddrV4) -> tp::AddressHandle {
    tp::AddressHandle((u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()))
}

fn decode_addr(h: tp::AddressHandle) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from((h.0 >> 16) as u32), h.0 as u16)
}

impl UdpBackend {
    /// Open a device with the plain socket as its datagram path.
    pub fn open(cfg: UdpConfig) -> Result<UdpBackend> {
        Self::open_with(cfg, |io| Ok(Box::new(io)))
    }

    /// Open a device whose datagram path is the socket wrapped by `wrap`
    /// (fault injection, capture: composition).
    pub fn open_with(
        cfg: UdpConfig,
        wrap: impl FnOnce(SocketIo) -> io::Result<Box<dyn DatagramIo>>,
    ) -> Result<UdpBackend> {
        let socket = Arc::new(RoceSocket::bind(cfg.bind, &cfg.socket).map_err(|e| os("bind", e))?);
        let local = socket.local_addr();
        let io = wrap(SocketIo::new(socket.clone())).map_err(|e| os("open", e))?;
        let slot = if socket.gro() {
            65536
        } else {
            MAX_PACKET.next_power_of_two()
        };
        let active_mtu = Mtu::for_link_mtu(cfg.link_mtu);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                io,
                mem: HostMemory::default(),
                pds: BTreeMap::new(),
                cqs: BTreeMap::new(),
                qps: BTreeMap::new(),
                ahs: BTreeMap::new(),
                next_handle: 1,
                next_qpn: 0x11,
                tx: TxBatch::with_capacity(1 << 17),
                acks: Vec::new(),
                acks_held_until: None,
                rx: RxBatch::new(if slot > 16384 { 8 } else { 32 }, slot),
                icrc: Ipv4IcrcCheck::new(),
                stats: UdpStats::default(),
                events: VecDeque::new(),
                fed: Instant::ZERO,
                retired: TransportTotals::default(),
            }),
            socket,
            local,
            start: std::time::Instant::now(),
            stop: AtomicBool::new(false),
            app_touch_ns: AtomicU64::new(0),
            app_waiting: AtomicU64::new(0),
            next_deadline_ns: AtomicU64::new(u64::MAX),
            cfg,
            active_mtu,
        });
        let bg = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rocelab-{}", local))
            .spawn(move || background(&bg))
            .map_err(|e| os("spawn", e))?;
        Ok(UdpBackend {
            shared,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.shared.local
    }

    /// Device counters.
    pub fn stats(&self) -> UdpStats {
        lock(&self.shared.state).stats
    }

    /// Datagram path counters (faults, drops).
    pub fn io_stats(&self) -> IoStats {
        lock(&self.shared.state).io.stats()
    }

    /// Engine counters of one QP.
    pub fn qp_stats(&self, qp: QpHandle) -> Option<tp::QpStats> {
        lock(&self.shared.state)
            .qps
            .get(&(qp.0 as u32))
            .map(|e| *e.engine.stats())
    }

    fn touch(&self) {
        self.shared
            .app_touch_ns
            .store(self.shared.now_ns().max(1), Ordering::Relaxed);
    }

    fn handle(st: &mut State) -> u64 {
        let h = st.next_handle;
        st.next_handle += 1;
        h
    }
}

impl Shared {
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    fn now(&self) -> Instant {
        Instant::from_ps(self.start.elapsed().as_nanos() as u64 * 1000)
    }

    /// One round of progress: receive, timers, transmit, completions.
    /// Returns the next engine deadline.
    fn progress(&self, st: &mut State) -> Option<Instant> {
        self.progress_with(st, true)
    }

    /// Progress; with `transmit_after` false, what the received packets
    /// make the engines send (ACKs, mostly) waits for the next call. A
    /// busy-polling application calls again at once, or posts, and then
    /// the ACK leaves in the same `sendmmsg` as its next request: one
    /// system call per hop instead of two.
    fn progress_with(&self, st: &mut State, transmit_after: bool) -> Option<Instant> {
        self.progress_round(st, transmit_after, false)
    }

    /// Progress as the background thread of [`BackgroundMode::Interrupt`]
    /// makes it: what it receives is answered at once, but ACKs with
    /// nothing else to send are held (see [`Shared::transmit_holding`]).
    fn progress_holding(&self, st: &mut State) -> Option<Instant> {
        self.progress_round(st, true, true)
    }

    fn progress_round(
        &self,
        st: &mut State,
        transmit_after: bool,
        hold_acks: bool,
    ) -> Option<Instant> {
        let mut now = self.now();
        if !transmit_after {
            self.transmit(st, now);
        }
        let mut at = [Instant::ZERO; MAX_BATCH + 1];
        for _ in 0..8 {
            // A receive error (an ICMP report) is a lost packet, not a failure.
            let n = st.io.recv(&mut st.rx).unwrap_or_default();
            if n > 0 {
                now = self.now();
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok();
                let rx = &st.rx;
                arrival_times(
                    st.fed,
                    now,
                    wall,
                    (0..n).map(|k| {
                        let (m, _) = rx.get(k);
                        (m.arrived, m.len.div_ceil(m.segment_size.max(1)))
                    }),
                    &mut at[..=n],
                );
                st.fed = now;
            }
            for k in 0..n {
                self.receive_slot(st, k, at[k], at[k + 1]);
            }
            if n < st.rx.capacity() {
                // The socket is drained; another call would only say so.
                break;
            }
        }
        self.run_timers(st, now);
        if transmit_after {
            self.transmit_holding(st, now, hold_acks);
        }
        self.collect(st);
        let d = self.next_deadline(st);
        self.next_deadline_ns
            .store(d.map_or(u64::MAX, |d| d.as_ps() / 1000), Ordering::Relaxed);
        // Held ACKs bound the wait of the thread that holds them, but not
        // the nap of an interrupt-style background thread while the
        // application calls in: its next call sends them.
        d.into_iter().chain(st.acks_held_until).min()
    }

    /// Send what the engines hold ready: above all the ACKs that
    /// `progress_with(.., false)` left for the next call, which may never
    /// come when the application is done (it got its last completion and
    /// tears down).
    fn flush_deferred(&self, st: &mut State) {
        let now = self.now();
        self.transmit(st, now);
    }

    /// Hand slot `k`'s packets to their engines, its segments at times
    /// spread evenly after `after` (the previous slot's arrival) up to
    /// `arrived` (its last segment's).
    fn receive_slot(&self, st: &mut State, k: usize, after: Instant, arrived: Instant) {
        let State {
            rx,
            qps,
            mem,
            stats,
            icrc,
            ..
        } = st;
        let (m, bytes) = rx.get(k);
        let seg = m.segment_size.max(1);
        let segments = bytes.len().div_ceil(seg).max(1) as u64;
        let span = arrived.saturating_duration_since(after).as_ps();
        for (i, pkt) in bytes.chunks(seg).enumerate() {
            let now = after
                + PsDuration::from_ps((span as u128 * (i as u128 + 1) / segments as u128) as u64);
            // The ICRC first, over the bytes as they arrived, as a NIC
            // checks it: a corrupted packet is an ICRC error
            // (`rx_icrc_encapsulated`) whichever byte the corruption hit,
            // even one that leaves the headers unparsable. Only a datagram
            // too short to carry a BTH and an ICRC is malformed outright.
            if pkt.len() < roce::wire::bth::HEADER_LEN + roce::wire::icrc::ICRC_LEN {
                stats.rx_malformed += 1;
                continue;
            }
            let local = self.local;
            // The header the sender's kernel wrote if nothing on the path
            // re-segmented: identification = the position in the GRO run
            // (a GRO run holds at most 64 segments), DF. When that fails,
            // the check solves for the identification and DF that fit and
            // believes them only if plausible (wire::icrc module docs).
            let expected = UdpEncap {
                ip: IpEncap::V4 {
                    src: *m.src.ip(),
                    dst: *local.ip(),
                    identification: i as u16,
                    dont_fragment: true,
                },
                src_port: m.src.port(),
                dst_port: local.port(),
            };
            let (id, df) = match icrc.verify(&expected, pkt) {
                Ok(IcrcMatch::Expected) => (i as u16, true),
                Ok(IcrcMatch::Solved {
                    identification,
                    dont_fragment,
                }) => {
                    stats.rx_icrc_id_solved += 1;
                    (identification, dont_fragment)
                }
                Err(_) => {
                    stats.rx_icrc_encapsulated += 1;
                    if !self.cfg.accept_bad_icrc {
                        continue;
                    }
                    stats.rx_icrc_accepted += 1;
                    (i as u16, true)
                }
            };
            let parsed = match parse_udp_payload_unverified(pkt) {
                Ok(p) => p,
                Err(_) => {
                    stats.rx_malformed += 1;
                    continue;
                }
            };
            let ecn = Ecn::from_bits(m.tos);
            if ecn == Ecn::Ce {
                stats.rx_ecn_ce += 1;
            }
            let qpn = parsed.headers.bth.dest_qp.value();
            let Some(entry) = qps.get_mut(&qpn) else {
                stats.rx_unknown_qp += 1;
                continue;
            };
            // UD receives get a GRH area: 20 zero bytes and the IPv4
            // header as it arrived (Soft-RoCE): TOS and TTL as received,
            // the identification and DF the ICRC check matched, and its
            // checksum.
            let mut grh = [0u8; 40];
            if entry.qp_type == QpType::Ud {
                let total = (20 + 8 + pkt.len()) as u16;
                let h = &mut grh[20..];
                h[0] = 0x45;
                h[1] = m.tos;
                h[2..4].copy_from_slice(&total.to_be_bytes());
                h[4..6].copy_from_slice(&id.to_be_bytes());
                h[6] = if df { 0x40 } else { 0 };
                h[8] = m.ttl;
                h[9] = 17;
                h[12..16].copy_from_slice(&m.src.ip().octets());
                h[16..20].copy_from_slice(&local.ip().octets());
                let sum = ipv4_checksum(h);
                h[10..12].copy_from_slice(&sum.to_be_bytes());
            }
            let received = tp::Received {
                headers: parsed.headers,
                ecn,
                payload: Payload::Bytes(parsed.payload),
                grh: (entry.qp_type == QpType::Ud).then_some(&grh),
                // The engine matches a connected QP's sender against its AV
                // by address (GID) only, as a NIC does: the UDP source port
                // of RoCEv2 varies per QP and flow.
                src: if entry.qp_type == QpType::Ud {
                    encode_addr(m.src)
                } else {
                    let av_port = decode_addr(entry.engine.attr().ah).port();
                    encode_addr(SocketAddrV4::new(*m.src.ip(), av_port))
                },
            };
            stats.rx_packets += 1;
            entry
                .engine
                .handle_packet(now, &received, &mut mem.view(Some(entry.pd)));
        }
    }

    fn run_timers(&self, st: &mut State, now: Instant) {
        st.fed = st.fed.max(now);
        for e in st.qps.values_mut() {
            if e.engine.poll_timeout().is_some_and(|t| t <= now) {
                e.engine.handle_timeout(now);
            }
        }
        if st
            .io
            .poll_timeout()
            .is_some_and(|t| t <= std::time::Instant::now())
        {
            let _ = st.io.flush(std::time::Instant::now());
        }
    }

    /// Drain every engine's transmits into one batch, grouping runs of
    /// equal-sized packets to the same destination into GSO datagrams, and
    /// send it.
    ///
    /// ACKs go last, each its own datagram or in runs of ACKs: the peer
    /// gets the data first and the ACK's cost overlaps with the wait.
    /// (Closing a request's run with the ACK as its shorter last segment
    /// saves a datagram but measured slower on loopback: the data then
    /// waits for the whole run.)
    fn transmit(&self, st: &mut State, now: Instant) {
        self.transmit_holding(st, now, false)
    }

    /// [`transmit`](Self::transmit); with `hold`, a round that has nothing
    /// but ACKs to send keeps them for up to [`ACK_HOLD`], so that they
    /// leave with the application's next request (see
    /// [`background`]). Any other round sends the held ones too.
    fn transmit_holding(&self, st: &mut State, now: Instant, hold: bool) {
        st.fed = st.fed.max(now);
        let State {
            io,
            qps,
            mem,
            tx,
            acks,
            acks_held_until,
            stats,
            ..
        } = st;
        tx.clear();
        let mut runs = RunBuilder {
            run: None,
            gso: io.gso(),
            // Payload straight from registered memory (the kernel copies it
            // once), or gathered into the batch for wrappers that read bytes.
            pieces: io.pieces(),
            local: self.local,
        };
        if acks_held_until.is_none() {
            acks.clear();
        }
        // One slot the engines write each packet into (a packet description
        // is ~300 bytes; returning it by value copied it twice more).
        let mut t = tp::Transmit::EMPTY;
        for e in qps.values_mut() {
            while e
                .engine
                .poll_transmit_into(now, &mem.view(Some(e.pd)), &mut t)
            {
                if t.headers.bth.opcode == Opcode::RcAcknowledge {
                    acks.push((t, e.tclass_dscp));
                } else {
                    runs.add(tx, mem, stats, &t, e.tclass_dscp, false);
                }
            }
        }
        if hold && tx.is_empty() && runs.run.is_none() && !acks.is_empty() {
            let until = *acks_held_until.get_or_insert(now + ACK_HOLD);
            if now < until {
                return;
            }
        }
        *acks_held_until = None;
        for (t, dscp) in acks.iter() {
            runs.add(tx, mem, stats, t, *dscp, true);
        }
        runs.close(tx, stats);
        if !tx.is_empty() {
            let _ = io.send(tx);
        }
    }

    /// Move completions from the engines to their CQs, and the engines'
    /// events to the device's async event queue. A completion that finds
    /// its CQ full overruns it, as on a device: the CQ goes into error
    /// (`CqErr`), the completion is lost, and every QP using that CQ goes
    /// to ERR (`QpFatal`).
    fn collect(&self, st: &mut State) {
        let State {
            qps, cqs, events, ..
        } = st;
        let mut overrun = false;
        for (&qpn, e) in qps.iter_mut() {
            let qp = QpHandle(u64::from(qpn));
            while let Some(c) = e.engine.poll_completion() {
                let cq = if c.is_recv { e.recv_cq } else { e.send_cq };
                if let Some(q) = cqs.get_mut(&cq) {
                    if q.overrun {
                        continue;
                    }
                    if q.queue.len() >= q.capacity {
                        q.overrun = true;
                        overrun = true;
                        events.push_back(AsyncEvent::CqErr(CqHandle(cq)));
                        continue;
                    }
                    q.queue.push_back(convert_wc(&c));
                }
            }
            while let Some(ev) = e.engine.poll_event() {
                events.push_back(match ev {
                    tp::QpEvent::SqDrained => AsyncEvent::SqDrained(qp),
                    tp::QpEvent::Error(tp::WcStatus::RemInvReqErr) => AsyncEvent::QpReqErr(qp),
                    tp::QpEvent::Error(tp::WcStatus::RemAccessErr) => AsyncEvent::QpAccessErr(qp),
                    tp::QpEvent::Error(_) => AsyncEvent::QpFatal(qp),
                });
            }
        }
        if !overrun {
            return;
        }
        let broken = |h: u64| cqs.get(&h).is_some_and(|q| q.overrun);
        for (&qpn, e) in qps.iter_mut() {
            let state = e.engine.state();
            if (broken(e.send_cq) || broken(e.recv_cq))
                && !matches!(state, QpState::Reset | QpState::Err)
            {
                let attr = tp::QpAttr {
                    qp_state: QpState::Err,
                    ..*e.engine.attr()
                };
                if e.engine.modify(&attr, QpAttrMask::STATE).is_ok() {
                    events.push_back(AsyncEvent::QpFatal(QpHandle(u64::from(qpn))));
                }
            }
        }
        // The flushes of those QPs go where they can.
        self.collect(st);
    }

    fn next_deadline(&self, st: &State) -> Option<Instant> {
        st.qps
            .values()
            .filter_map(|e| e.engine.poll_timeout())
            .min()
    }

    /// Time until `deadline`, capped.
    fn wait_for(&self, deadline: Option<Instant>, cap: Duration) -> Duration {
        match deadline {
            Some(d) => {
                let now = self.now();
                let ps = d.saturating_duration_since(now).as_ps();
                Duration::from_nanos(ps / 1000).min(cap)
            }
            None => cap,
        }
    }
}

/// The GSO run being built: packets to one destination with one TOS, all
/// `seg` bytes but a shorter last one.
#[derive(Debug, Clone, Copy)]
struct Run {
    dst: SocketAddrV4,
    tos: u8,
    /// Size of every segment but the last.
    seg: usize,
    /// Where the run starts: a byte offset, or a piece index.
    first: usize,
    count: usize,
    bytes: usize,
    /// Closed by a shorter last packet.
    short: bool,
}

/// Groups the packets of one transmit into datagrams and emits them into
/// the batch (see [`Shared::transmit`]).
struct RunBuilder {
    run: Option<Run>,
    gso: bool,
    pieces: bool,
    local: SocketAddrV4,
}

impl RunBuilder {
    /// Queue the open run as one datagram.
    fn close(&mut self, tx: &mut TxBatch, stats: &mut UdpStats) {
        if let Some(r) = self.run.take() {
            let seg = if r.count > 1 { r.seg } else { 0 };
            if self.pieces {
                tx.push_pieces(r.dst, r.tos, seg, r.first, r.bytes);
            } else {
                tx.push_range(r.dst, r.tos, seg, r.first, r.bytes);
            }
            if r.count > 1 {
                stats.tx_gso_runs += 1;
            }
        }
    }

    /// Emit `t` onto the open run or a new one. A packet smaller than the
    /// segments before it ends the run (a LAST after MIDDLE packets), but
    /// one smaller than a lone first packet starts a new run: its
    /// equal-sized successors (MIDDLE packets after a FIRST) could not
    /// follow it in this one. An ACK (`ack`: they come after every
    /// request of the round) may end a lone packet's run: the reply a
    /// latency test's peer waits for then arrives in one datagram with the
    /// ACK it waits for, instead of in two a receive may split.
    fn add(
        &mut self,
        tx: &mut TxBatch,
        mem: &HostMemory,
        stats: &mut UdpStats,
        t: &tp::Transmit,
        dscp: u8,
        ack: bool,
    ) {
        let dst = decode_addr(t.dest);
        let tos = dscp | t.ecn.bits();
        let mut headers = t.headers;
        let plen = t.payload.len() as usize;
        headers.bth.pad_count = ((4 - plen % 4) % 4) as u8;
        let len = headers.header_len() + plen + usize::from(headers.bth.pad_count) + 4;
        let joins = self.gso
            && self.run.is_some_and(|r| {
                r.dst == dst
                    && r.tos == tos
                    && !r.short
                    && r.count < super::sys::MAX_GSO_SEGMENTS
                    && r.bytes + len <= MAX_RUN_BYTES
                    && (len == r.seg || (len < r.seg && (r.count > 1 || ack)))
                    && (!self.pieces
                        || tx.pieces_len() - r.first + 2 + t.payload.pieces().len()
                            <= super::sys::MAX_IOV)
            });
        if !joins {
            self.close(tx, stats);
        }
        let id = if joins {
            self.run.map_or(0, |r| r.count as u16)
        } else {
            0
        };
        let enc = UdpEncap {
            ip: IpEncap::V4 {
                src: *self.local.ip(),
                dst: *dst.ip(),
                identification: id,
                dont_fragment: true,
            },
            src_port: self.local.port(),
            dst_port: dst.port(),
        };
        let mark = tx.bytes_len();
        let hlen = headers.header_len();
        let off = if self.pieces {
            let pmark = tx.pieces_len();
            // SAFETY: the located ranges lie in live registered regions (or
            // a QP's inline buffer), which cannot be deregistered while the
            // device lock is held, and the batch is sent before the lock is
            // released.
            match unsafe { emit_pieces(tx, mem, &headers, &t.payload, &enc) } {
                Some(()) => pmark,
                None => {
                    tx.truncate(mark);
                    tx.truncate_pieces(pmark);
                    stats.tx_errors += 1;
                    return;
                }
            }
        } else {
            let (off, buf) = tx.append(len);
            if t.payload
                .gather(&mem.view(None), &mut buf[hlen..hlen + plen])
                .is_err()
                || emit_udp_payload(&headers, PayloadSource::InPlace(plen), &enc, buf).is_err()
            {
                tx.truncate(mark);
                stats.tx_errors += 1;
                return;
            }
            off
        };
        stats.tx_packets += 1;
        match &mut self.run {
            Some(r) if joins => {
                r.count += 1;
                r.bytes += len;
                r.short = len < r.seg;
            }
            _ => {
                self.run = Some(Run {
                    dst,
                    tos,
                    seg: len,
                    first: off,
                    count: 1,
                    bytes: len,
                    short: false,
                })
            }
        }
    }
}

/// Queue one packet as pieces of `tx`: its headers, its payload where it
/// lies in registered memory, and the pad and ICRC. `None` (with pieces
/// and bytes possibly added, for the caller to drop) when a payload range
/// is not in registered memory or the headers do not emit.
///
/// # Safety
///
/// The payload's regions must stay registered until `tx` is sent.
unsafe fn emit_pieces(
    tx: &mut TxBatch,
    mem: &HostMemory,
    headers: &roce::wire::RoceHeaders,
    payload: &tp::PayloadDesc,
    enc: &UdpEncap,
) -> Option<()> {
    let hlen = headers.header_len();
    let plen = payload.len() as usize;
    let pad = usize::from(headers.bth.pad_count);
    let (hoff, hbuf) = tx.append(hlen);
    headers.emit(hbuf).ok()?;
    tx.push_buf_piece(hoff, hlen);
    let mut parts: [&[u8]; tp::MAX_PIECES + 1] = [&[]; tp::MAX_PIECES + 1];
    for (slot, p) in parts.iter_mut().zip(payload.pieces()) {
        let ptr = mem
            .locate(
                payload.key_of(p),
                p.addr,
                u64::from(p.len),
                AccessFlags::EMPTY,
                None,
            )
            .ok()?;
        // SAFETY: `locate` bounds-checked the range inside a live region,
        // which the caller keeps registered until the batch is sent.
        *slot = unsafe { std::slice::from_raw_parts(ptr, p.len as usize) };
        // SAFETY: as above.
        unsafe { tx.push_ext_piece(ptr, p.len as usize) };
    }
    const ZEROS: [u8; 3] = [0; 3];
    let n = payload.pieces().len();
    parts[n] = &ZEROS[..pad.min(3)];
    let crc = roce::wire::icrc::Icrc::for_udp_payload_parts(
        enc,
        hlen + plen + pad,
        tx.appended(hoff, hlen),
        parts[..=n].iter().copied(),
    )
    .ok()?;
    let (toff, tbuf) = tx.append(pad + 4);
    tbuf[..pad].fill(0);
    tbuf[pad..].copy_from_slice(&crc.to_le_bytes());
    tx.push_buf_piece(toff, pad + 4);
    Some(())
}

/// The device-clock times at which the slots of one receive batch arrived:
/// `out[0] = floor` (the latest time the engines were given) and `out[k +
/// 1]` for slot `k` (`out` holds one more than there are slots), none
/// before `floor` nor after `now`, never decreasing. The kernel stamps a
/// datagram as it delivers it, a GRO run when its last segment is in, so a
/// slot's time is its last packet's; its others arrived since the slot
/// before.
///
/// A slot the kernel stamped (`arrived`: `CLOCK_REALTIME`, with `wall` that
/// clock read beside `now`) is dated by its age, `now - (wall - arrived)`,
/// so a clock step between rounds cannot move it out of order. An unstamped
/// slot is placed as if the batch's packets had arrived evenly after
/// `floor` up to `now`. `slots` gives each slot's stamp and packet count.
fn arrival_times<I>(
    floor: Instant,
    now: Instant,
    wall: Option<Duration>,
    slots: I,
    out: &mut [Instant],
) where
    I: Iterator<Item = (Option<Duration>, usize)> + Clone,
{
    let floor = floor.min(now);
    let span = now.saturating_duration_since(floor).as_ps();
    let total = slots.clone().map(|(_, p)| p as u64).sum::<u64>().max(1);
    let mut before = 0u64;
    let mut prev = floor;
    let mut k = 0;
    out[0] = floor;
    for (arrived, packets) in slots {
        let at = match (arrived, wall) {
            (Some(a), Some(w)) => {
                let age = w
                    .saturating_sub(a)
                    .as_nanos()
                    .min(u128::from(u64::MAX / 1000)) as u64;
                now.checked_sub(PsDuration::from_ps(age * 1000))
                    .unwrap_or(Instant::ZERO)
            }
            _ => {
                floor
                    + PsDuration::from_ps(
                        (span as u128 * u128::from((before + packets as u64).min(total))
                            / u128::from(total)) as u64,
                    )
            }
        };
        before += packets as u64;
        prev = at.clamp(prev, now);
        k += 1;
        out[k] = prev;
    }
}

/// A device's background thread: progress for the application whenever it
/// is not calling in itself (see the module docs and [`BackgroundMode`]).
///
/// While the application calls in (a `poll_cq` or post within the last
/// `app_active_ns`) or waits in `wait_cq`, it moves its packets itself; the
/// thread stays off the socket and naps until the window or the next
/// engine timer ends. In [`BackgroundMode::Interrupt`] it never spins to
/// such a timer, and ACKs it or `poll_cq` holds ([`ACK_HOLD`]) leave with
/// the application's next call, so that a datagram wakes one thread, not
/// two that would contend for the two cores of a small host.
///
/// Otherwise it runs progress and, between packets, either spins (polls
/// the socket again at once) or blocks in ppoll(2) until a datagram
/// arrives or the next engine timer is due (at most 2 ms, to notice
/// `stop`), like a NIC's receive interrupt, by what the traffic is:
///
/// * sparse requests (a READ or atomic now and then, answered by this
///   device while its application waits elsewhere): it spins for
///   `BACKGROUND_SPIN_NS` after the last packet it moved, so that the next
///   one is answered without a wake-up (adaptive polling, as NAPI busy
///   polling does), which costs tens of microseconds on a small virtual
///   machine. In [`BackgroundMode::Interrupt`] only while the
///   application's threads are off the CPU ([`OtherThreads`]): a program
///   spinning on memory keeps its core;
/// * a stream (a round received `BULK_PACKETS` or more, until
///   `BACKGROUND_SPIN_NS` of silence): it blocks as soon as the socket is
///   empty. Spinning there costs more than the wake-ups it saves: the
///   spinning core competes with the sender's (on a virtual machine its
///   hyperthread sibling, perhaps); write_bw 64 KiB was faster with the
///   receiver sleeping in 12 of 16 alternating bench runs (medians
///   +10-15 %).
fn background(shared: &Shared) {
    let interrupt = shared.cfg.background == BackgroundMode::Interrupt;
    if interrupt {
        no_timer_slack();
    }
    let mut last_moved = 0u64;
    let mut streaming = false;
    let mut others = OtherThreads::default();
    while !shared.stop.load(Ordering::Relaxed) {
        if shared.app_waiting.load(Ordering::Relaxed) > 0 {
            // A thread in `wait_cq` makes progress itself and wakes at
            // each datagram; two threads taking turns at the lock for
            // every packet would only slow both.
            std::thread::sleep(Duration::from_nanos(shared.cfg.app_active_ns));
            continue;
        }
        let touched = shared.app_touch_ns.load(Ordering::Relaxed);
        let now = shared.now_ns();
        let active = shared.cfg.app_active_ns;
        if touched != 0 && now.saturating_sub(touched) < active {
            // Out of the application's way, but not past an engine timer
            // (an RNR wait of tens of microseconds, a retransmission): the
            // application may not call in before it is due.
            let due = shared
                .next_deadline_ns
                .load(Ordering::Relaxed)
                .saturating_sub(now);
            let nap = (active - (now - touched)).min(due);
            if nap >= SPIN_BELOW.as_nanos() as u64 || (interrupt && nap > 0) {
                std::thread::sleep(Duration::from_nanos(nap));
                continue;
            }
            if nap > 0 {
                std::hint::spin_loop();
                continue;
            }
        }
        let (deadline, received, sent) = {
            let mut st = lock(&shared.state);
            let before = (st.stats.rx_packets, st.stats.tx_packets);
            let d = if interrupt {
                shared.progress_holding(&mut st)
            } else {
                shared.progress(&mut st)
            };
            (
                d,
                st.stats.rx_packets - before.0,
                st.stats.tx_packets - before.1,
            )
        };
        if received + sent > 0 {
            last_moved = shared.now_ns();
            // A stream stays one until BACKGROUND_SPIN_NS of silence.
            streaming |= received >= BULK_PACKETS;
            continue;
        }
        if shared.now_ns().saturating_sub(last_moved) >= BACKGROUND_SPIN_NS {
            streaming = false;
        } else if !streaming && (!interrupt || !others.busy(shared.now_ns())) {
            std::hint::spin_loop();
            continue;
        }
        let wait = shared.wait_for(deadline, Duration::from_millis(2));
        if !interrupt && wait < SPIN_BELOW && deadline.is_some() {
            // A timer is due within the kernel's timer slack (which the
            // interrupt-style thread turned off): spin to it.
            std::hint::spin_loop();
            continue;
        }
        if wait.is_zero() {
            continue;
        }
        if shared.socket.wait_readable(Some(wait)).is_err() {
            // Not expected of ppoll on a live socket; never spin on it.
            std::thread::sleep(wait);
        }
    }
}

/// Whether the process's other threads (the application's) are using the
/// CPU, from the process's CPU time less the calling thread's, sampled
/// every [`OtherThreads::PERIOD_NS`]: busy when they ran more than half
/// of the last period. An application that spins (on memory, on a CQ)
/// holds a core the background thread must not compete for; one that
/// blocks leaves it free.
#[derive(Debug, Default)]
struct OtherThreads {
    at_ns: u64,
    cpu_ns: u64,
    busy: bool,
}

impl OtherThreads {
    const PERIOD_NS: u64 = 50_000;

    /// Whether the other threads were busy, as of the last sample at most
    /// a period before `now_ns` (the device clock).
    fn busy(&mut self, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.at_ns);
        if self.at_ns != 0 && elapsed < Self::PERIOD_NS {
            return self.busy;
        }
        let cpu = cpu_time_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
            .saturating_sub(cpu_time_ns(libc::CLOCK_THREAD_CPUTIME_ID));
        if self.at_ns != 0 {
            self.busy = cpu.saturating_sub(self.cpu_ns) * 2 > elapsed;
        } else {
            // No history yet: assume the worst until a period has passed.
            self.busy = true;
        }
        self.at_ns = now_ns;
        self.cpu_ns = cpu;
        self.busy
    }
}

/// CPU time of `clock` (a process or thread CPU-time clock), in
/// nanoseconds; 0 if the clock cannot be read.
fn cpu_time_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a pointer to a
    // live local.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// No timer slack for the calling thread: ppoll's timeout is otherwise
/// stretched by up to 50 µs, which an RNR timer of tens of microseconds
/// would feel.
fn no_timer_slack() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer; no pointers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

impl Drop for UdpBackend {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut st = lock(&self.shared.state);
        // As in destroy_qp: the deferred ACKs leave before the socket goes.
        self.shared.flush_deferred(&mut st);
        for r in st.mem.regions.iter_mut().filter(|r| r.valid) {
            if r.store.locked {
                // SAFETY: unlocking the range we locked at registration.
                unsafe { libc::munlock(r.store.ptr.cast(), r.len as usize) };
            }
            r.valid = false;
        }
    }
}

/// The IPv4 header checksum (RFC 791) of a 20-byte header whose checksum
/// field is zero.
fn ipv4_checksum(h: &[u8]) -> u16 {
    let mut sum: u32 = h
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w.get(1).copied().unwrap_or(0)])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    !(sum as u16)
}

fn convert_wc(c: &tp::Completion) -> WorkCompletion {
    let mut flags = WcFlags::EMPTY;
    if c.imm_data.is_some() {
        flags |= WcFlags::WITH_IMM;
    }
    if c.invalidated_rkey.is_some() {
        flags |= WcFlags::WITH_INV;
    }
    if c.grh {
        flags |= WcFlags::GRH;
    }
    WorkCompletion {
        wr_id: c.wr_id,
        status: c.status,
        opcode: c.opcode,
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: c.imm_data.unwrap_or(0),
        invalidated_rkey: c.invalidated_rkey.map_or(0, |k| k.value()),
        qp_num: c.qp_num,
        src_qp: c.src_qp.unwrap_or(Qpn::new(0)),
        wc_flags: flags,
    }
}

fn engine_op(op: SendOp) -> tp::SendOp {
    match op {
        SendOp::Send => tp::SendOp::Send,
        SendOp::SendWithImm(i) => tp::SendOp::SendWithImm(i),
        SendOp::SendWithInv(k) => tp::SendOp::SendWithInv(k),
        SendOp::Write { remote_addr, rkey } => tp::SendOp::Write { remote_addr, rkey },
        SendOp::WriteWithImm {
            remote_addr,
            rkey,
            imm,
        } => tp::SendOp::WriteWithImm {
            remote_addr,
            rkey,
            imm,
        },
        SendOp::Read { remote_addr, rkey } => tp::SendOp::Read { remote_addr, rkey },
        SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        } => tp::SendOp::CompareSwap {
            remote_addr,
            rkey,
            compare,
            swap,
        },
        SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        } => tp::SendOp::FetchAdd {
            remote_addr,
            rkey,
            add,
        },
    }
}

fn post_error(verb: &'static str, e: tp::PostError) -> VerbsError {
    match e {
        tp::PostError::BadState(s) => VerbsError::BadQpState { verb, state: s },
        tp::PostError::QueueFull(n) => VerbsError::QueueFull { verb, depth: n },
        tp::PostError::Unsupported(t) => {
            VerbsError::invalid(verb, format!("operation not supported on {t:?} QPs"))
        }
        tp::PostError::Invalid(why) => VerbsError::invalid(verb, why),
    }
}

impl Backend for UdpBackend {
    /// The progress thread and the application threads that make progress
    /// (`poll_cq`, `wait_cq`, posts) touch region memory only while holding
    /// the state lock, so holding it here orders `f` with all of them.
    fn with_memory_quiesced(&self, f: &mut dyn FnMut()) {
        let _st = lock(&self.shared.state);
        f();
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Udp
    }

    fn query_device(&self) -> Result<DeviceAttr> {
        Ok(DeviceAttr {
            name: self.shared.cfg.name.clone(),
            node_guid: node_guid_for(self.shared.local),
            fw_ver: concat!("rocelab-", env!("CARGO_PKG_VERSION")).into(),
            vendor_id: 0,
            max_mr_size: 1 << 40,
            max_qp_wr: 16384,
            max_cqe: 1 << 20,
            phys_port_cnt: 1,
        })
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(VerbsError::invalid(
                "ibv_query_port",
                format!("port {port} does not exist (the device has port 1)"),
            ));
        }
        Ok(PortAttr {
            state: 4,
            max_mtu: Mtu::Mtu4096,
            active_mtu: self.shared.active_mtu,
            gid_tbl_len: 1,
            link_layer_ethernet: true,
            lid: 0,
        })
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        if port != 1 || index != 0 {
            return Err(VerbsError::invalid(
                "ibv_query_gid",
                format!("port {port} GID {index} does not exist (port 1 has GID 0)"),
            ));
        }
        Ok(Gid::from_ip((*self.shared.local.ip()).into()))
    }

    fn udp_port(&self) -> u16 {
        self.shared.local.port()
    }

    fn alloc_pd(&self) -> Result<PdHandle> {
        let mut st = lock(&self.shared.state);
        let h = Self::handle(&mut st);
        st.pds.insert(h, 0);
        Ok(PdHandle(h))
    }

    fn dealloc_pd(&self, pd: PdHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        match st.pds.get(&pd.0) {
            None => Err(VerbsError::UnknownHandle {
                verb: "ibv_dealloc_pd",
                object: "PD",
            }),
            Some(&n) if n > 0 => Err(VerbsError::Busy {
                verb: "ibv_dealloc_pd",
                object: "PD",
            }),
            Some(_) => {
                st.pds.remove(&pd.0);
                Ok(())
            }
        }
    }

    unsafe fn reg_mr(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MrKeys> {
        const VERB: &str = "ibv_reg_mr";
        if len == 0 || addr.is_null() {
            return Err(VerbsError::invalid(VERB, "null address or length 0"));
        }
        // SAFETY: the caller promises [addr, addr + len) is valid memory.
        let lock_rc = unsafe { libc::mlock(addr.cast(), len) };
        let unpin = || {
            if lock_rc == 0 {
                // SAFETY: unlocking the range locked just above.
                unsafe { libc::munlock(addr.cast(), len) };
            }
        };
        let pin_error = (lock_rc != 0).then(|| {
            format!(
                "mlock of {len} bytes failed ({}); raise RLIMIT_MEMLOCK (ulimit -l) to pin",
                io::Error::last_os_error()
            )
        });
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            unpin();
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        // The region table refuses what verbs refuses (REMOTE_WRITE or
        // REMOTE_ATOMIC without LOCAL_WRITE, ...).
        let key = match st.mem.register(addr, len as u64, access, pd.0) {
            Ok(key) => key,
            Err(e) => {
                unpin();
                return Err(VerbsError::invalid(VERB, e.to_string()));
            }
        };
        if let Ok(idx) = st.mem.regions.index(key) {
            st.mem.regions.region_mut(idx).store.locked = lock_rc == 0;
        }
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        Ok(MrKeys {
            handle: MrHandle(u64::from(key)),
            lkey: Lkey::new(key),
            rkey: Rkey::new(key),
            pinned: lock_rc == 0,
            pin_error,
        })
    }

    fn dereg_mr(&self, mr: MrHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        let r = st
            .mem
            .regions
            .deregister(mr.0 as u32)
            .map_err(|_| VerbsError::UnknownHandle {
                verb: "ibv_dereg_mr",
                object: "MR",
            })?;
        let (ptr, len, locked, pd) = (r.store.ptr, r.len, r.store.locked, r.pd);
        if locked {
            // SAFETY: unlocking the range locked at registration.
            unsafe { libc::munlock(ptr.cast(), len as usize) };
        }
        if let Some(n) = st.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }

    fn create_cq(&self, cqe: u32) -> Result<CqHandle> {
        if cqe == 0 || cqe > 1 << 20 {
            return Err(VerbsError::invalid(
                "ibv_create_cq",
                format!("{cqe} entries: expected 1..=1048576"),
            ));
        }
        let mut st = lock(&self.shared.state);
        let h = Self::handle(&mut st);
        st.cqs.insert(
            h,
            Cq {
                capacity: cqe as usize,
                ..Cq::default()
            },
        );
        Ok(CqHandle(h))
    }

    fn destroy_cq(&self, cq: CqHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        match st.cqs.get(&cq.0) {
            None => Err(VerbsError::UnknownHandle {
                verb: "ibv_destroy_cq",
                object: "CQ",
            }),
            Some(c) if c.users > 0 => Err(VerbsError::Busy {
                verb: "ibv_destroy_cq",
                object: "CQ",
            }),
            Some(_) => {
                st.cqs.remove(&cq.0);
                Ok(())
            }
        }
    }

    fn poll_cq(&self, cq: CqHandle, wc: &mut [WorkCompletion]) -> Result<usize> {
        self.touch();
        let mut st = lock(&self.shared.state);
        let take = |st: &mut State, wc: &mut [WorkCompletion]| -> Result<usize> {
            let q = st.cqs.get_mut(&cq.0).ok_or(VerbsError::UnknownHandle {
                verb: "ibv_poll_cq",
                object: "CQ",
            })?;
            if q.overrun {
                return Err(VerbsError::CqOverrun {
                    verb: "ibv_poll_cq",
                    capacity: q.capacity,
                });
            }
            let n = wc.len().min(q.queue.len());
            for (slot, c) in wc.iter_mut().zip(q.queue.drain(..n)) {
                *slot = c;
            }
            Ok(n)
        };
        let n = take(&mut st, wc)?;
        if n > 0 || wc.is_empty() {
            return Ok(n);
        }
        // What the received packets make the engines send waits so that
        // a post sends it with its request: in interrupt mode lone ACKs
        // are held for up to ACK_HOLD (the next call after that, or the
        // background thread once the application stops calling in, sends
        // them); otherwise everything waits for the next call.
        if self.shared.cfg.background == BackgroundMode::Interrupt {
            self.shared.progress_holding(&mut st);
        } else {
            self.shared.progress_with(&mut st, false);
        }
        take(&mut st, wc)
    }

    fn wait_cq(&self, cq: CqHandle, timeout: Duration) -> Result<bool> {
        struct Waiting<'a>(&'a AtomicU64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.shared.app_waiting.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(&self.shared.app_waiting);
        let end = std::time::Instant::now() + timeout;
        loop {
            self.touch();
            let deadline = {
                let mut st = lock(&self.shared.state);
                let ready =
                    |st: &State| st.cqs.get(&cq.0).map(|q| !q.queue.is_empty() || q.overrun);
                match ready(&st) {
                    None => {
                        return Err(VerbsError::UnknownHandle {
                            verb: "ibv_get_cq_event",
                            object: "CQ",
                        })
                    }
                    Some(true) => return Ok(true),
                    Some(false) => {}
                }
                let d = self.shared.progress(&mut st);
                if ready(&st) == Some(true) {
                    return Ok(true);
                }
                d
            };
            let now = std::time::Instant::now();
            if now >= end {
                return Ok(false);
            }
            if self.shared.cfg.busy_poll {
                std::hint::spin_loop();
                continue;
            }
            let wait = self
                .shared
                .wait_for(deadline, (end - now).min(Duration::from_millis(1)));
            if wait < SPIN_BELOW && deadline.is_some() {
                // An engine timer (RNR wait, pacing) is due within the
                // kernel's timer slack: spin to it.
                std::hint::spin_loop();
                continue;
            }
            let _ = self.shared.socket.wait_readable(Some(wait));
        }
    }

    fn create_qp(&self, pd: PdHandle, init: &QpInitAttr) -> Result<QpCreated> {
        const VERB: &str = "ibv_create_qp";
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !st.cqs.contains_key(&cq.0) {
                return Err(VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "CQ",
                });
            }
        }
        let cap = init.cap;
        if cap.max_send_wr == 0 || cap.max_send_wr > 16384 || cap.max_recv_wr > 16384 {
            return Err(VerbsError::invalid(
                VERB,
                format!(
                    "queue depths {}/{}: expected 1..=16384",
                    cap.max_send_wr, cap.max_recv_wr
                ),
            ));
        }
        if cap.max_send_sge as usize > tp::MAX_SGE || cap.max_recv_sge as usize > tp::MAX_SGE {
            return Err(VerbsError::invalid(
                VERB,
                format!("at most {} SGEs per work request", tp::MAX_SGE),
            ));
        }
        if cap.max_inline_data > 4096 {
            return Err(VerbsError::invalid(VERB, "max_inline_data above 4096"));
        }
        let qpn = st.next_qpn;
        st.next_qpn = if qpn >= 0xFF_FFF0 { 0x11 } else { qpn + 1 };
        let mut cfg = QpConfig::new(Qpn::new(qpn));
        cfg.qp_type = init.qp_type;
        cfg.max_send_wr = cap.max_send_wr;
        cfg.max_recv_wr = cap.max_recv_wr.max(1);
        cfg.sq_sig_all = init.sq_sig_all;
        cfg.ecn = Ecn::Ect0;
        cfg.min_time_between_cnps = Some(
            init.min_time_between_cnps
                .unwrap_or(self.shared.cfg.min_time_between_cnps),
        );
        cfg.cc = init.cc.unwrap_or(self.shared.cfg.cc);
        cfg.pacing_burst = self.shared.cfg.pacing_burst;
        cfg.pacing_catch_up = PACING_CATCH_UP;
        cfg.pace_at_line_rate = self.shared.cfg.pace_at_line_rate;
        cfg.pkey_table = self.shared.cfg.pkey_table;
        cfg.port_mtu = self.shared.active_mtu;
        // A host socket absorbs more than a NIC's on-chip window: keep 4 MiB
        // (at 4 KiB MTU, half the default socket buffer) in flight, so that
        // large messages stream without waiting for ACK round trips. Every
        // ACK wakes the sender and costs it a receive, so within a long
        // message they are asked for every 128 packets (rxe: 64); the LAST
        // packet of each message asks for one as well.
        cfg.max_unacked_psns = 1024;
        cfg.ack_req_every = 128;
        let inline_len = (cap.max_inline_data as usize).max(1) * cap.max_send_wr as usize;
        let mut inline_buf = vec![0u8; inline_len].into_boxed_slice();
        let inline_key = st
            .mem
            .register(
                inline_buf.as_mut_ptr(),
                inline_len as u64,
                AccessFlags::LOCAL_WRITE,
                pd.0,
            )
            .map_err(|e| VerbsError::invalid(VERB, e.to_string()))?;
        let entry = QpEntry {
            engine: Qp::new(cfg),
            qp_type: init.qp_type,
            pd: pd.0,
            send_cq: init.send_cq.0,
            recv_cq: init.recv_cq.0,
            cap,
            inline_buf,
            inline_key,
            inline_next: 0,
            tclass_dscp: 0,
        };
        st.qps.insert(qpn, entry);
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        for cq in [init.send_cq, init.recv_cq] {
            if let Some(c) = st.cqs.get_mut(&cq.0) {
                c.users += 1;
            }
        }
        Ok(QpCreated {
            handle: QpHandle(u64::from(qpn)),
            qpn: Qpn::new(qpn),
            cap,
        })
    }

    fn modify_qp(&self, qp: QpHandle, attr: &QpAttr) -> Result<()> {
        const VERB: &str = "ibv_modify_qp";
        self.touch();
        let mut st = lock(&self.shared.state);
        let default_port = self.shared.local.port();
        let e = st
            .qps
            .get_mut(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: VERB,
                object: "QP",
            })?;
        let current = e.engine.state();
        let mut ea = qp_state::engine_attr(attr, current);
        ea.ah = e.engine.attr().ah;
        if attr.mask.contains(QpAttrMask::AV) {
            let ip = attr.ah_attr.dgid.to_ipv4().ok_or_else(|| {
                VerbsError::invalid(
                    VERB,
                    format!(
                        "GID {} is not IPv4: the UDP backend speaks RoCEv2 over IPv4",
                        attr.ah_attr.dgid
                    ),
                )
            })?;
            ea.ah = encode_addr(SocketAddrV4::new(
                ip,
                attr.ah_attr.dport.unwrap_or(default_port),
            ));
        }
        // The engine's validator decides (the one of the crate); its
        // refusal becomes the verbs error that says the same.
        let before = *e.engine.stats();
        e.engine
            .modify(&ea, attr.mask)
            .map_err(|err| qp_state::modify_error(e.qp_type, err))?;
        if attr.mask.contains(QpAttrMask::AV) {
            // The traffic class's DSCP goes into the IP TOS byte; ECN
            // stays the engine's.
            e.tclass_dscp = attr.ah_attr.traffic_class & !0x03;
        }
        if e.engine.state() == QpState::Reset && current != QpState::Reset {
            // RESET starts the engine afresh, counters included; the
            // device's totals keep what it counted.
            st.retired.add(&before);
        }
        self.shared.collect(&mut st);
        Ok(())
    }

    fn query_qp_state(&self, qp: QpHandle) -> Result<QpState> {
        let st = lock(&self.shared.state);
        st.qps
            .get(&(qp.0 as u32))
            .map(|e| e.engine.state())
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_query_qp",
                object: "QP",
            })
    }

    fn query_qp(&self, qp: QpHandle) -> Result<QpAttr> {
        let st = lock(&self.shared.state);
        let e = st
            .qps
            .get(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_query_qp",
                object: "QP",
            })?;
        let (a, state) = (e.engine.attr(), e.engine.state());
        let dest = decode_addr(a.ah);
        let mut ah_attr = AhAttr::to_gid(Gid::from_ip((*dest.ip()).into()));
        ah_attr.dport = Some(dest.port());
        let sending = matches!(
            state,
            QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err
        );
        let receiving = sending || state == QpState::Rtr;
        Ok(QpAttr {
            mask: qp_state::QUERY_MASK,
            qp_state: state,
            cur_qp_state: state,
            qp_access_flags: a.qp_access_flags,
            pkey_index: a.pkey_index,
            port_num: a.port_num,
            qkey: a.qkey,
            ah_attr,
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            // Where the PSNs are now, as rxe reports them (req.psn and
            // resp.psn), once the QP has them.
            rq_psn: if receiving {
                e.engine.expected_psn().value()
            } else {
                a.rq_psn
            },
            sq_psn: if sending {
                e.engine.next_psn().value()
            } else {
                a.sq_psn
            },
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            dest_qp_num: a.dest_qp_num,
        })
    }

    fn destroy_qp(&self, qp: QpHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        if !st.qps.contains_key(&(qp.0 as u32)) {
            return Err(VerbsError::UnknownHandle {
                verb: "ibv_destroy_qp",
                object: "QP",
            });
        }
        // ACKs for what this QP received may still wait for the next
        // transmit (poll_cq defers them to share a sendmmsg with the next
        // request): a NIC would have sent them already, and the peer's
        // requests would otherwise time out against a QP that is gone.
        self.shared.flush_deferred(&mut st);
        let e = st
            .qps
            .remove(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_destroy_qp",
                object: "QP",
            })?;
        let _ = st.mem.regions.deregister(e.inline_key);
        st.retired.add(e.engine.stats());
        if let Some(n) = st.pds.get_mut(&e.pd) {
            *n = n.saturating_sub(1);
        }
        for cq in [e.send_cq, e.recv_cq] {
            if let Some(c) = st.cqs.get_mut(&cq) {
                c.users = c.users.saturating_sub(1);
            }
        }
        Ok(())
    }

    fn create_ah(&self, pd: PdHandle, attr: &AhAttr) -> Result<AhHandle> {
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: "ibv_create_ah",
                object: "PD",
            });
        }
        if attr.dgid.to_ipv4().is_none() {
            return Err(VerbsError::invalid(
                "ibv_create_ah",
                format!("GID {} is not IPv4", attr.dgid),
            ));
        }
        let h = Self::handle(&mut st);
        st.ahs.insert(h, (pd.0, *attr));
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        Ok(AhHandle(h))
    }

    fn poll_async_event(&self) -> Option<AsyncEvent> {
        lock(&self.shared.state).events.pop_front()
    }

    fn counters(&self) -> Result<Vec<(String, u64)>> {
        let st = lock(&self.shared.state);
        let mut hw = st.retired;
        for e in st.qps.values() {
            hw.add(e.engine.stats());
        }
        let mut v = hw.named();
        let d = st.stats;
        v.extend(
            [
                ("rx_icrc_encapsulated", d.rx_icrc_encapsulated),
                ("rx_icrc_id_solved", d.rx_icrc_id_solved),
                ("rx_malformed", d.rx_malformed),
                ("rx_unknown_qp", d.rx_unknown_qp),
                ("rx_packets", d.rx_packets),
                ("tx_packets", d.tx_packets),
            ]
            .map(|(n, x)| (n.to_string(), x)),
        );
        v.extend(
            st.io
                .stats()
                .fault_counters()
                .map(|(n, x)| (n.to_string(), x)),
        );
        Ok(v)
    }

    fn qp_counters(&self, qp: QpHandle) -> Result<QpCounters> {
        let st = lock(&self.shared.state);
        let e = st
            .qps
            .get(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: "rdma statistic qp",
                object: "QP",
            })?;
        let rate = roce::cc::CongestionControl::rate(e.engine.cc());
        Ok(QpCounters::from_stats(e.engine.stats(), rate))
    }

    fn destroy_ah(&self, ah: AhHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        let (pd, _) = st.ahs.remove(&ah.0).ok_or(VerbsError::UnknownHandle {
            verb: "ibv_destroy_ah",
            object: "AH",
        })?;
        if let Some(n) = st.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }

    unsafe fn post_send(
        &self,
        qp: QpHandle,
        wrs: &[SendWr<'_>],
    ) -> std::result::Result<(), PostError> {
        const VERB: &str = "ibv_post_send";
        self.touch();
        let mut st = lock(&self.shared.state);
        let default_port = self.shared.local.port();
        for (index, wr) in wrs.iter().enumerate() {
            let fail = |error| PostError { index, error };
            let State { qps, mem, ahs, .. } = &mut *st;
            let e = qps.get_mut(&(qp.0 as u32)).ok_or_else(|| {
                fail(VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "QP",
                })
            })?;
            if wr.sg_list.len() > e.cap.max_send_sge.max(1) as usize
                || wr.sg_list.len() > tp::MAX_SGE
            {
                return Err(fail(VerbsError::invalid(
                    VERB,
                    format!(
                        "{} SGEs, the QP takes {}",
                        wr.sg_list.len(),
                        e.cap.max_send_sge
                    ),
                )));
            }
            let mut sges = [tp::Sge::default(); tp::MAX_SGE];
            let mut nsge = wr.sg_list.len();
            for (d, s) in sges.iter_mut().zip(wr.sg_list) {
                *d = tp::Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                };
            }
            if wr.flags.contains(SendFlags::INLINE) {
                let total: usize = wr.sg_list.iter().map(|s| s.length as usize).sum();
                let max = e.cap.max_inline_data as usize;
                if total > max {
                    return Err(fail(VerbsError::invalid(
                        VERB,
                        format!("inline payload of {total} bytes exceeds max_inline_data {max}"),
                    )));
                }
                if matches!(
                    wr.op,
                    SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
                ) {
                    return Err(fail(VerbsError::invalid(
                        VERB,
                        "INLINE applies to SEND and WRITE only",
                    )));
                }
                // Slots go round in posting order and are freed in
                // completion order, so the next slot is free exactly when
                // the send queue has room. A post the engine will refuse
                // for want of room must not touch it: it holds the inline
                // data of the oldest WR still pending.
                if e.engine.send_queue_len() >= e.cap.max_send_wr as usize {
                    return Err(fail(VerbsError::QueueFull {
                        verb: VERB,
                        depth: e.cap.max_send_wr,
                    }));
                }
                let slot = e.inline_next % e.cap.max_send_wr as usize;
                let base = slot * max.max(1);
                let mut off = 0;
                for s in wr.sg_list {
                    let dst = &mut e.inline_buf[base + off..base + off + s.length as usize];
                    // SAFETY: inline data is read at post time from the
                    // caller's buffer, which the caller promises is valid
                    // (post_send's contract); no lkey applies.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            s.addr as *const u8,
                            dst.as_mut_ptr(),
                            dst.len(),
                        )
                    };
                    off += s.length as usize;
                }
                nsge = 0;
                if total > 0 {
                    sges[0] = tp::Sge {
                        addr: e.inline_buf.as_ptr() as u64 + base as u64,
                        length: total as u32,
                        lkey: Lkey::new(e.inline_key),
                    };
                    nsge = 1;
                }
            }
            let ud = match (e.qp_type, wr.ud) {
                (QpType::Ud, Some(d)) => {
                    let Some((_, av)) = ahs.get(&d.ah.0) else {
                        return Err(fail(VerbsError::UnknownHandle {
                            verb: VERB,
                            object: "AH",
                        }));
                    };
                    let ip = av.dgid.to_ipv4().unwrap_or(Ipv4Addr::UNSPECIFIED);
                    Some(tp::UdDest {
                        ah: encode_addr(SocketAddrV4::new(ip, av.dport.unwrap_or(default_port))),
                        remote_qpn: d.remote_qpn,
                        remote_qkey: d.remote_qkey,
                    })
                }
                (QpType::Ud, None) => {
                    return Err(fail(VerbsError::invalid(
                        VERB,
                        "a UD send needs a destination (wr.ud)",
                    )))
                }
                _ => None,
            };
            let ewr = tp::SendWr {
                wr_id: wr.wr_id,
                op: engine_op(wr.op),
                sges: tp::SgeList::from_slice(&sges[..nsge]).unwrap_or_default(),
                flags: wr.flags.difference(SendFlags::INLINE),
                ud,
            };
            let _ = mem;
            e.engine
                .post_send(ewr)
                .map_err(|x| fail(post_error(VERB, x)))?;
            if wr.flags.contains(SendFlags::INLINE) {
                // The slot is taken only by a post the engine accepted.
                e.inline_next = e.inline_next.wrapping_add(1);
            }
        }
        let now = self.shared.now();
        self.shared.transmit(&mut st, now);
        self.shared.collect(&mut st);
        Ok(())
    }

    unsafe fn post_recv(
        &self,
        qp: QpHandle,
        wrs: &[RecvWr<'_>],
    ) -> std::result::Result<(), PostError> {
        const VERB: &str = "ibv_post_recv";
        self.touch();
        let mut st = lock(&self.shared.state);
        for (index, wr) in wrs.iter().enumerate() {
            let fail = |error| PostError { index, error };
            let e = st.qps.get_mut(&(qp.0 as u32)).ok_or_else(|| {
                fail(VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "QP",
                })
            })?;
            if wr.sg_list.len() > tp::MAX_SGE {
                return Err(fail(VerbsError::invalid(
                    VERB,
                    format!("{} SGEs, at most {}", wr.sg_list.len(), tp::MAX_SGE),
                )));
            }
            let mut sges = [tp::Sge::default(); tp::MAX_SGE];
            for (d, s) in sges.iter_mut().zip(wr.sg_list) {
                *d = tp::Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                };
            }
            let ewr = tp::RecvWr {
                wr_id: wr.wr_id,
                sges: tp::SgeList::from_slice(&sges[..wr.sg_list.len()]).unwrap_or_default(),
            };
            e.engine
                .post_recv(ewr)
                .map_err(|x| fail(post_error(VERB, x)))?;
        }
        // A flushed receive (QP in ERR) completes at once.
        self.shared.collect(&mut st);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Instant {
        Instant::from_ps(n * 1_000_000)
    }

    /// A device bound to an interface's address takes its link MTU from
    /// the interface (a 9000-byte link carries 4096-byte RoCE packets); an
    /// address no interface holds falls back to Ethernet's 1500.
    #[test]
    fn link_mtu_follows_the_bound_interface() {
        for (name, ip) in interfaces().into_iter().filter(|(_, ip)| !ip.is_loopback()) {
            let sys: u32 = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert_eq!(link_mtu_of(ip), Some(sys), "{name}");
            assert_eq!(UdpConfig::new(SocketAddrV4::new(ip, 0)).link_mtu, sys);
        }
        let nowhere = Ipv4Addr::new(198, 51, 100, 77);
        assert_eq!(link_mtu_of(nowhere), None);
        assert_eq!(UdpConfig::new(SocketAddrV4::new(nowhere, 0)).link_mtu, 1500);
        let lo = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        assert_eq!(lo.link_mtu, 65536);
    }

    /// The background thread spins only while the application's threads
    /// are off the CPU: a sleeping thread leaves the process "not busy",
    /// a spinning one makes it busy; the caller's own time never counts.
    /// Other tests run in this process meanwhile, so each verdict is asked
    /// for in any of several periods.
    #[test]
    fn other_threads_are_busy_only_while_they_run() {
        let clock = std::time::Instant::now();
        let now = || clock.elapsed().as_nanos() as u64 + 1;
        let spin = |ms| {
            let end = std::time::Instant::now() + Duration::from_millis(ms);
            while std::time::Instant::now() < end {
                std::hint::spin_loop();
            }
        };
        let mut others = OtherThreads::default();
        assert!(others.busy(now()), "no history yet");
        let (wake, asleep) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || asleep.recv());
        // This thread spins meanwhile: its own time is not the others'.
        let idle_seen = (0..50).any(|_| {
            spin(60);
            !others.busy(now())
        });
        wake.send(()).unwrap();
        sleeper.join().unwrap().unwrap();
        assert!(idle_seen, "a sleeping thread is not busy");
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let busy_seen = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(60));
            others.busy(now())
        });
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(busy_seen, "a spinning thread is busy");
    }

    #[test]
    fn kernel_stamps_date_each_slot_by_its_age_clamped_and_in_order() {
        // The realtime clock reads 1000 s beside device time 500 us.
        let wall = Some(Duration::from_secs(1000));
        let ago = |n: u64| Some(Duration::from_secs(1000) - Duration::from_micros(n));
        let mut out = [Instant::ZERO; 5];
        // Ages 300, 200 and 100 us; one stamped before the floor (100 us
        // on the device clock) and one "after now" (a clock step).
        let slots = [
            (ago(450), 1),
            (ago(300), 1),
            (ago(350), 1),
            (ago(0).map(|d| d + Duration::from_micros(5)), 1),
        ];
        arrival_times(us(100), us(500), wall, slots.into_iter(), &mut out);
        assert_eq!(out, [us(100), us(100), us(200), us(200), us(500)]);
    }

    #[test]
    fn unstamped_packets_spread_evenly_from_the_floor_to_now() {
        let mut out = [Instant::ZERO; 4];
        // Eight packets, 100 us apart: slot 0 holds the first five (a GRO
        // run), dated by its last.
        let slots = [(None, 5), (None, 1), (None, 2)];
        arrival_times(us(100), us(900), None, slots.into_iter(), &mut out);
        assert_eq!(out, [us(100), us(600), us(700), us(900)]);
        // Stamps without the wall clock to age them: the same spread.
        let stamped = [(Some(Duration::from_secs(1)), 5), (None, 1), (None, 2)];
        arrival_times(us(100), us(900), None, stamped.into_iter(), &mut out);
        assert_eq!(out, [us(100), us(600), us(700), us(900)]);
    }
}
