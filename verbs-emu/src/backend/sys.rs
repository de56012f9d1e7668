//! The low-level UDP socket layer of the emulation (Linux).
//!
//! One [`RoceSocket`] per device, bound to its own address on UDP 4791 (or
//! another port). It is set up so that the IPv4 header the kernel writes is
//! predictable, because the RoCEv2 ICRC covers it (ROCEV2.md §1.2, §8):
//!
//! * the socket is **unconnected** and has `IP_MTU_DISCOVER =
//!   IP_PMTUDISC_DO`, so every datagram leaves with DF set and IPv4
//!   identification **0** (Linux's `ip_select_ident_segs`); a UDP GSO
//!   datagram is cut into segments numbered 0, 1, 2, ...;
//! * the TOS byte (DSCP and ECN) is set per datagram by an `IP_TOS` control
//!   message, ECT(0) by default so that switches mark CE instead of
//!   dropping; it is masked in the ICRC;
//! * `IP_RECVTOS` reports the received TOS, so the ECN bits reach the
//!   transport engine (CNPs, DCQCN);
//! * the UDP checksum is the kernel's (masked in the ICRC).
//!
//! Speed: [`RoceSocket::send`] hands a whole [`TxBatch`] to one `sendmmsg`,
//! with a `UDP_SEGMENT` (GSO) control message on multi-packet entries;
//! [`RoceSocket::recv`] fills an [`RxBatch`] with one `recvmmsg` and, with
//! `UDP_GRO`, gets runs of same-sized datagrams in one buffer with their
//! segment size. `SO_TIMESTAMPNS` has the kernel stamp each datagram with
//! the `CLOCK_REALTIME` instant it arrived ([`RxMeta::arrived`]), as a NIC
//! stamps each packet: a batch read at once holds packets that arrived over
//! hundreds of microseconds, and the transport's timing (the CNP interval)
//! counts from each packet's arrival, not from the read. Batches own their memory, so the steady state allocates
//! nothing. Receives never block; [`RoceSocket::wait_readable`] blocks with
//! a timeout, and a busy-polling caller simply calls `recv` in a loop.

use std::cell::RefCell;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

use libc::c_int;

const SOL_UDP: c_int = 17;
const UDP_SEGMENT: c_int = 103;
const UDP_GRO: c_int = 104;
/// Most datagrams one `sendmmsg`/`recvmmsg` call handles.
pub const MAX_BATCH: usize = 64;
/// The TOS byte every datagram of a [`RoceSocket`] carries unless its
/// batch entry names another: DSCP 0, ECT(0), as a RoCEv2 NIC marks its
/// packets ECN-capable.
pub const DEFAULT_TOS: u8 = 0x02;
/// Most segments the kernel accepts in one GSO datagram.
pub const MAX_GSO_SEGMENTS: usize = 64;
/// Largest UDP payload of one (GSO) datagram.
pub const MAX_DATAGRAM: usize = 65507;
const CMSG_SPACE: usize = 64;
/// Control buffer of one received datagram: IP_TOS, IP_TTL and UDP_GRO,
/// 24 bytes each on 64-bit Linux, and SCM_TIMESTAMPNS, 32.
const RX_CMSG_SPACE: usize = 128;

/// How a [`RoceSocket`] is set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketOptions {
    /// Use UDP GSO for runs of equal-sized packets.
    pub gso: bool,
    /// Ask for UDP GRO on receive.
    pub gro: bool,
    /// `SO_BUSY_POLL` microseconds (0 = off); the busy-poll mode itself is
    /// the caller spinning on [`RoceSocket::recv`].
    pub busy_poll_us: u32,
    /// Socket buffer sizes in bytes (forced as root).
    pub buffer_bytes: usize,
}

impl Default for SocketOptions {
    fn default() -> Self {
        SocketOptions {
            gso: true,
            gro: true,
            busy_poll_us: 0,
            buffer_bytes: 8 << 20,
        }
    }
}

/// A UDP socket carrying RoCEv2 datagrams. See the module docs.
#[derive(Debug)]
pub struct RoceSocket {
    fd: OwnedFd,
    local: SocketAddrV4,
    gso: bool,
    gro: bool,
}

fn cvt(r: c_int) -> io::Result<c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt_int(fd: c_int, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
    // SAFETY: `value` is a live c_int and the length passed is its size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const c_int).cast(),
            size_of::<c_int>() as libc::socklen_t,
        )
    })
    .map(drop)
}

fn sockaddr_of(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(a.ip().octets()),
        },
        sin_zero: [0; 8],
    }
}

fn addr_of(s: &libc::sockaddr_in) -> SocketAddrV4 {
    SocketAddrV4::new(
        Ipv4Addr::from(s.sin_addr.s_addr.to_ne_bytes()),
        u16::from_be(s.sin_port),
    )
}

impl RoceSocket {
    /// Bind a socket to `addr` and set it up (module docs). GSO/GRO that
    /// the kernel refuses are turned off rather than failing.
    pub fn bind(addr: SocketAddrV4, opts: &SocketOptions) -> io::Result<RoceSocket> {
        // SAFETY: plain socket(2) call; the fd is owned right after.
        let raw = cvt(unsafe {
            libc::socket(
                libc::AF_INET,
                libc::SOCK_DGRAM | libc::SOCK_CLOEXEC,
                libc::IPPROTO_UDP,
            )
        })?;
        // SAFETY: `raw` is a fresh descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt_int(
            raw,
            libc::IPPROTO_IP,
            libc::IP_MTU_DISCOVER,
            libc::IP_PMTUDISC_DO,
        )?;
        setsockopt_int(raw, libc::IPPROTO_IP, libc::IP_RECVTOS, 1)?;
        // The TTL as it arrived, for the IPv4 header in a UD receive's GRH.
        setsockopt_int(raw, libc::IPPROTO_IP, libc::IP_RECVTTL, 1)?;
        setsockopt_int(
            raw,
            libc::IPPROTO_IP,
            libc::IP_TOS,
            c_int::from(DEFAULT_TOS),
        )?;
        // Each datagram's arrival time; without it (a kernel that refuses)
        // the receiver estimates the times (RxMeta::arrived is None).
        let _ = setsockopt_int(raw, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1);
        let buf = opts.buffer_bytes.min(c_int::MAX as usize) as c_int;
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            if setsockopt_int(raw, libc::SOL_SOCKET, force, buf).is_err() {
                let _ = setsockopt_int(raw, libc::SOL_SOCKET, plain, buf);
            }
        }
        if opts.busy_poll_us > 0 {
            let _ = setsockopt_int(
                raw,
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                opts.busy_poll_us as c_int,
            );
        }
        let gro = opts.gro && setsockopt_int(raw, SOL_UDP, UDP_GRO, 1).is_ok();
        // Probe GSO support: setting a socket-wide segment size of 0 is a
        // no-op that fails on kernels without UDP_SEGMENT.
        let gso = opts.gso && setsockopt_int(raw, SOL_UDP, UDP_SEGMENT, 0).is_ok();
        let sa = sockaddr_of(addr);
        // SAFETY: `sa` is a valid sockaddr_in of the given length.
        cvt(unsafe {
            libc::bind(
                raw,
                (&sa as *const libc::sockaddr_in).cast(),
                size_of::<libc::sockaddr_in>() as libc::socklen_t,
            )
        })?;
        let mut out: libc::sockaddr_in = sockaddr_of(addr);
        let mut len = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: `out`/`len` describe a writable sockaddr_in.
        cvt(unsafe {
            libc::getsockname(raw, (&mut out as *mut libc::sockaddr_in).cast(), &mut len)
        })?;
        Ok(RoceSocket {
            fd,
            local: addr_of(&out),
            gso,
            gro,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.local
    }

    /// Whether GSO is in use.
    pub fn gso(&self) -> bool {
        self.gso
    }

    /// Whether GRO is in use.
    pub fn gro(&self) -> bool {
        self.gro
    }

    /// Send every datagram of `batch` (blocking while the socket buffer is
    /// full). Returns the number of datagrams handed to the kernel; errors
    /// such as an unreachable destination drop that datagram (as a lossy
    /// network would) and are counted in `dropped`.
    pub fn send(&self, batch: &TxBatch, dropped: &mut u64) -> io::Result<usize> {
        thread_local! {
            static PIECE_IOVS: RefCell<Vec<libc::iovec>> = const { RefCell::new(Vec::new()) };
        }
        // Taken out for the call and put back after (an early error return
        // just drops it). Its pointers are stale between calls and only
        // read by the kernel during one.
        let mut piece_iovs = PIECE_IOVS.with(|c| c.take());
        let mut done = 0;
        while done < batch.entries.len() {
            let chunk = &batch.entries[done..(done + MAX_BATCH).min(batch.entries.len())];
            let mut hdrs: [MaybeUninit<libc::mmsghdr>; MAX_BATCH] =
                [const { MaybeUninit::uninit() }; MAX_BATCH];
            let mut iovs: [MaybeUninit<libc::iovec>; MAX_BATCH] =
                [const { MaybeUninit::uninit() }; MAX_BATCH];
            let mut names: [MaybeUninit<libc::sockaddr_in>; MAX_BATCH] =
                [const { MaybeUninit::uninit() }; MAX_BATCH];
            // Control buffers: only the ones in use are zeroed (zeroing all
            // 64 costs a busy-polling caller more than the rest of a call).
            let mut cmsgs: [MaybeUninit<[u64; CMSG_SPACE / 8]>; MAX_BATCH] =
                [const { MaybeUninit::uninit() }; MAX_BATCH];
            // The iovecs of datagrams queued from pieces, all of this chunk's,
            // in the calling thread's reusable scratch (no allocation once it
            // has grown to the largest batch).
            piece_iovs.clear();
            for e in chunk.iter().filter(|e| e.pieces > 0) {
                for p in &batch.pieces[e.off..e.off + e.pieces] {
                    let (base, len) = match *p {
                        TxPiece::Buf { off, len } => (batch.buf[off..].as_ptr(), len),
                        TxPiece::Ext { ptr, len } => (ptr, len),
                    };
                    piece_iovs.push(libc::iovec {
                        iov_base: base as *mut libc::c_void,
                        iov_len: len,
                    });
                }
            }
            let mut next_piece = 0;
            for (i, e) in chunk.iter().enumerate() {
                names[i].write(sockaddr_of(e.dst));
                // SAFETY: zeroed msghdr is a valid "empty" value.
                let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
                msg.msg_name = names[i].as_mut_ptr().cast();
                msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
                if e.pieces > 0 {
                    msg.msg_iov = piece_iovs[next_piece..].as_mut_ptr();
                    msg.msg_iovlen = e.pieces as _;
                    next_piece += e.pieces;
                } else {
                    iovs[i].write(libc::iovec {
                        iov_base: batch.buf[e.off..].as_ptr() as *mut libc::c_void,
                        iov_len: e.len,
                    });
                    msg.msg_iov = iovs[i].as_mut_ptr();
                    msg.msg_iovlen = 1;
                }
                // Control messages only where the datagram differs from
                // the socket's defaults: a TOS other than the socket's
                // (ECT(0)), a GSO segment size. A datagram needing neither
                // carries none, which spares the kernel copying and
                // parsing a control buffer on every send.
                let tos = e.tos != DEFAULT_TOS;
                let gso = e.segment_size > 0 && e.segment_size < e.len;
                if tos || gso {
                    msg.msg_control = cmsgs[i].write([0; CMSG_SPACE / 8]).as_mut_ptr().cast();
                    msg.msg_controllen = CMSG_SPACE as _;
                    // SAFETY: msg_control points at CMSG_SPACE writable,
                    // aligned bytes, room for both messages; CMSG_* walk
                    // only inside msg_controllen.
                    unsafe {
                        let mut used = 0usize;
                        let mut c = libc::CMSG_FIRSTHDR(&msg);
                        if tos {
                            (*c).cmsg_level = libc::IPPROTO_IP;
                            (*c).cmsg_type = libc::IP_TOS;
                            (*c).cmsg_len = libc::CMSG_LEN(size_of::<c_int>() as u32) as _;
                            std::ptr::write_unaligned(
                                libc::CMSG_DATA(c).cast::<c_int>(),
                                e.tos as c_int,
                            );
                            used += libc::CMSG_SPACE(size_of::<c_int>() as u32) as usize;
                            c = libc::CMSG_NXTHDR(&msg, c);
                        }
                        if gso {
                            (*c).cmsg_level = SOL_UDP;
                            (*c).cmsg_type = UDP_SEGMENT;
                            (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                            std::ptr::write_unaligned(
                                libc::CMSG_DATA(c).cast::<u16>(),
                                e.segment_size as u16,
                            );
                            used += libc::CMSG_SPACE(size_of::<u16>() as u32) as usize;
                        }
                        msg.msg_controllen = used as _;
                    }
                }
                hdrs[i].write(libc::mmsghdr {
                    msg_hdr: msg,
                    msg_len: 0,
                });
            }
            // SAFETY: the first chunk.len() headers are initialised and point
            // into names/iovs/piece_iovs/cmsgs/batch.buf, all alive for the
            // call, and into memory push_ext_piece's callers keep valid.
            let r = unsafe {
                libc::sendmmsg(
                    self.fd.as_raw_fd(),
                    hdrs.as_mut_ptr().cast(),
                    chunk.len() as u32,
                    0,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => continue,
                    Some(libc::EAGAIN) | Some(libc::ENOBUFS) => {
                        self.wait(libc::POLLOUT, None, Some(Duration::from_millis(1)))?;
                        continue;
                    }
                    // Per-destination failures (ECONNREFUSED from an earlier
                    // ICMP, EHOSTUNREACH, EMSGSIZE...) drop the datagram.
                    _ => {
                        *dropped += 1;
                        done += 1;
                        continue;
                    }
                }
            }
            done += r as usize;
        }
        PIECE_IOVS.with(|c| c.replace(piece_iovs));
        Ok(done)
    }

    /// Receive as many datagrams as are ready, up to the batch's capacity,
    /// without blocking. Returns how many were received (0 when none).
    pub fn recv(&self, batch: &mut RxBatch) -> io::Result<usize> {
        batch.count = 0;
        let n = batch.slots.min(MAX_BATCH);
        let mut hdrs: [MaybeUninit<libc::mmsghdr>; MAX_BATCH] =
            [const { MaybeUninit::uninit() }; MAX_BATCH];
        let mut iovs: [MaybeUninit<libc::iovec>; MAX_BATCH] =
            [const { MaybeUninit::uninit() }; MAX_BATCH];
        let mut names: [MaybeUninit<libc::sockaddr_in>; MAX_BATCH] =
            [const { MaybeUninit::uninit() }; MAX_BATCH];
        // Not zeroed: the kernel writes the control data it reports and
        // sets msg_controllen to its length; only that part is read. A
        // busy-polling caller comes here hundreds of thousands of times a
        // second, mostly to find nothing, so the empty call stays cheap.
        let mut cmsgs: [MaybeUninit<[u64; RX_CMSG_SPACE / 8]>; MAX_BATCH] =
            [const { MaybeUninit::uninit() }; MAX_BATCH];
        let slot = batch.slot_size;
        for i in 0..n {
            iovs[i].write(libc::iovec {
                iov_base: batch.buf[i * slot..].as_mut_ptr().cast(),
                iov_len: slot,
            });
            // SAFETY: zeroed msghdr is a valid "empty" value.
            let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
            msg.msg_name = names[i].as_mut_ptr().cast();
            msg.msg_namelen = size_of::<libc::sockaddr_in>() as libc::socklen_t;
            msg.msg_iov = iovs[i].as_mut_ptr();
            msg.msg_iovlen = 1;
            msg.msg_control = cmsgs[i].as_mut_ptr().cast();
            msg.msg_controllen = RX_CMSG_SPACE as _;
            hdrs[i].write(libc::mmsghdr {
                msg_hdr: msg,
                msg_len: 0,
            });
        }
        let r = loop {
            // SAFETY: n headers are initialised and point into live buffers.
            let r = unsafe {
                libc::recvmmsg(
                    self.fd.as_raw_fd(),
                    hdrs.as_mut_ptr().cast(),
                    n as u32,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                break r as usize;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EAGAIN) => return Ok(0),
                // An ICMP error queued by an earlier send: not ours to fail on.
                Some(libc::ECONNREFUSED) | Some(libc::EHOSTUNREACH) | Some(libc::ENETUNREACH) => {
                    return Ok(0)
                }
                _ => return Err(e),
            }
        };
        for i in 0..r {
            // SAFETY: the kernel filled headers 0..r.
            let h = unsafe { hdrs[i].assume_init_ref() };
            // SAFETY: the kernel wrote a sockaddr_in for AF_INET sockets.
            let src = addr_of(unsafe { names[i].assume_init_ref() });
            let mut tos = 0u8;
            let mut ttl = 0u8;
            let mut segment = 0usize;
            let mut arrived = None;
            // SAFETY: walking the control buffer the kernel filled, within
            // msg_controllen.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                while !c.is_null() {
                    match ((*c).cmsg_level, (*c).cmsg_type) {
                        (libc::IPPROTO_IP, libc::IP_TOS) => tos = *libc::CMSG_DATA(c),
                        (libc::IPPROTO_IP, libc::IP_TTL) => {
                            ttl = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<c_int>()) as u8
                        }
                        (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS) => {
                            let t = std::ptr::read_unaligned(
                                libc::CMSG_DATA(c).cast::<libc::timespec>(),
                            );
                            if t.tv_sec >= 0 && (0..1_000_000_000).contains(&t.tv_nsec) {
                                arrived = Some(Duration::new(t.tv_sec as u64, t.tv_nsec as u32));
                            }
                        }
                        (SOL_UDP, UDP_GRO) => {
                            segment = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<c_int>())
                                as usize
                        }
                        _ => {}
                    }
                    c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
                }
            }
            let len = h.msg_len as usize;
            batch.meta[i] = RxMeta {
                src,
                len,
                tos,
                ttl,
                segment_size: if segment == 0 || segment >= len {
                    len
                } else {
                    segment
                },
                truncated: h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                arrived,
            };
        }
        batch.count = r;
        Ok(r)
    }

    /// Block until the socket is readable or `timeout` passes (`None`:
    /// forever). Returns whether it is readable.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        self.wait(libc::POLLIN, None, timeout)
    }

    /// [`wait_readable`](Self::wait_readable), returning early (false) when
    /// `wakeup` is woken; the wake-up is consumed.
    pub fn wait_readable_or(&self, wakeup: &Wakeup, timeout: Option<Duration>) -> io::Result<bool> {
        self.wait(libc::POLLIN, Some(wakeup), timeout)
    }

    fn wait(
        &self,
        events: libc::c_short,
        wakeup: Option<&Wakeup>,
        timeout: Option<Duration>,
    ) -> io::Result<bool> {
        let mut p = [
            libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events,
                revents: 0,
            },
            libc::pollfd {
                fd: wakeup.map_or(-1, |w| w.fd.as_raw_fd()),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // ppoll(2), not poll(2): its timeout has nanosecond resolution, so
        // a wait of tens of microseconds (an RNR timer) is not rounded up
        // to a millisecond.
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i32::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        let n = if wakeup.is_some() { 2 } else { 1 };
        // SAFETY: `p` holds `n` valid pollfds (a negative fd is ignored);
        // `tsp` is null or points at `ts`, which outlives the call; no
        // signal mask.
        let r = unsafe { libc::ppoll(p.as_mut_ptr(), n, tsp, std::ptr::null()) };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                return Ok(false);
            }
            return Err(e);
        }
        if let Some(w) = wakeup {
            if p[1].revents != 0 {
                w.consume();
            }
        }
        Ok(p[0].revents != 0)
    }
}

/// A wake-up for a thread blocked in [`RoceSocket::wait_readable_or`]
/// (an eventfd): another thread that moved a deadline earlier wakes it.
#[derive(Debug)]
pub struct Wakeup {
    fd: OwnedFd,
}

impl Wakeup {
    /// A new, unwoken wake-up.
    pub fn new() -> io::Result<Wakeup> {
        // SAFETY: eventfd takes two integers; no pointers.
        let raw = cvt(unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) })?;
        // SAFETY: `raw` is a new descriptor that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        Ok(Wakeup { fd })
    }

    /// Wake the waiting thread (or the next one to wait). Never blocks: a
    /// counter already at its maximum is woken anyway.
    pub fn wake(&self) {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live local to an eventfd we own.
        unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
    }

    /// Take the pending wake-ups, if any.
    fn consume(&self) {
        let mut buf = [0u8; 8];
        // SAFETY: reads at most 8 bytes into a live local from an eventfd
        // we own (non-blocking: nothing pending is EAGAIN).
        unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
    }
}

/// One datagram queued in a [`TxBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct TxEntry {
    dst: SocketAddrV4,
    /// Contiguous bytes: `buf[off..off + len]`. From pieces
    /// ([`TxBatch::push_pieces`]): `pieces[off..off + pieces]`, `len` bytes
    /// in all.
    off: usize,
    len: usize,
    /// 0: contiguous; else the number of pieces.
    pieces: usize,
    segment_size: usize,
    tos: u8,
}

/// One part of a datagram queued from pieces: bytes of the batch's own
/// buffer, or memory outside it (a registered region) the kernel reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TxPiece {
    Buf { off: usize, len: usize },
    Ext { ptr: *const u8, len: usize },
}

// SAFETY: `Ext` pointers are only dereferenced by the kernel during
// `RoceSocket::send`; `push_ext_piece`'s contract keeps them valid until
// the batch is sent or cleared, by whichever thread holds the batch.
unsafe impl Send for TxPiece {}

/// Most iovecs one datagram may take (the kernel's `UIO_MAXIOV`).
pub const MAX_IOV: usize = 1024;

/// Datagrams waiting for one `sendmmsg`, in one reusable buffer.
#[derive(Debug, Default)]
pub struct TxBatch {
    /// Backing store; only `..used` is queued. Bytes past `used` are stale
    /// and get overwritten, so reusing the batch never zero-fills.
    buf: Vec<u8>,
    used: usize,
    entries: Vec<TxEntry>,
    /// Parts of datagrams queued from pieces, in order.
    pieces: Vec<TxPiece>,
}

impl TxBatch {
    /// An empty batch with room for `bytes` of datagrams before growing.
    pub fn with_capacity(bytes: usize) -> TxBatch {
        TxBatch {
            buf: Vec::with_capacity(bytes),
            used: 0,
            entries: Vec::with_capacity(MAX_BATCH),
            pieces: Vec::new(),
        }
    }

    fn grow(&mut self, len: usize) -> usize {
        let off = self.used;
        if self.buf.len() < off + len {
            self.buf.resize(off + len, 0);
        }
        self.used = off + len;
        off
    }

    /// Append a datagram of `len` bytes to `dst`, filled by `fill`. With
    /// `segment_size` > 0 and smaller than `len`, the datagram is a GSO run
    /// of `segment_size`-byte packets (the last one may be shorter).
    pub fn push(
        &mut self,
        dst: SocketAddrV4,
        tos: u8,
        segment_size: usize,
        len: usize,
        fill: impl FnOnce(&mut [u8]),
    ) {
        let off = self.grow(len);
        fill(&mut self.buf[off..off + len]);
        self.entries.push(TxEntry {
            dst,
            off,
            len,
            pieces: 0,
            segment_size,
            tos,
        });
    }

    /// Append `len` bytes to the buffer without queueing a datagram;
    /// returns their offset and the bytes, to be queued later with
    /// [`TxBatch::push_range`] (alone or as part of a GSO run). The bytes
    /// are not cleared: the caller writes every one of them.
    pub fn append(&mut self, len: usize) -> (usize, &mut [u8]) {
        let off = self.grow(len);
        (off, &mut self.buf[off..off + len])
    }

    /// Drop appended bytes past `len` (a packet that could not be built).
    pub fn truncate(&mut self, len: usize) {
        self.used = self.used.min(len);
    }

    /// Bytes appended so far.
    pub fn bytes_len(&self) -> usize {
        self.used
    }

    /// Queue the appended bytes `off..off + len` as one datagram (a GSO run
    /// when `segment_size` is non-zero and smaller than `len`).
    pub fn push_range(
        &mut self,
        dst: SocketAddrV4,
        tos: u8,
        segment_size: usize,
        off: usize,
        len: usize,
    ) {
        debug_assert!(off + len <= self.used);
        self.entries.push(TxEntry {
            dst,
            off,
            len,
            pieces: 0,
            segment_size,
            tos,
        });
    }

    /// Pieces added so far (the start of the next datagram's pieces).
    pub fn pieces_len(&self) -> usize {
        self.pieces.len()
    }

    /// Add appended bytes `off..off + len` as the next piece.
    pub fn push_buf_piece(&mut self, off: usize, len: usize) {
        debug_assert!(off + len <= self.used);
        self.pieces.push(TxPiece::Buf { off, len });
    }

    /// Appended bytes `off..off + len`.
    pub fn appended(&self, off: usize, len: usize) -> &[u8] {
        &self.buf[off..off + len]
    }

    /// Add `len` bytes at `ptr`, outside the batch, as the next piece: the
    /// kernel copies them straight from there when the batch is sent.
    ///
    /// # Safety
    ///
    /// `ptr..ptr + len` must stay valid for reads until the batch is sent
    /// or cleared.
    pub unsafe fn push_ext_piece(&mut self, ptr: *const u8, len: usize) {
        self.pieces.push(TxPiece::Ext { ptr, len });
    }

    /// Drop pieces past `count` (a packet that could not be built).
    pub fn truncate_pieces(&mut self, count: usize) {
        self.pieces.truncate(count);
    }

    /// Queue the pieces `first..` added since as one datagram of `len`
    /// bytes (a GSO run when `segment_size` is non-zero and smaller than
    /// `len`). At most [`MAX_IOV`] pieces.
    pub fn push_pieces(
        &mut self,
        dst: SocketAddrV4,
        tos: u8,
        segment_size: usize,
        first: usize,
        len: usize,
    ) {
        let count = self.pieces.len() - first;
        debug_assert!(count > 0 && count <= MAX_IOV);
        self.entries.push(TxEntry {
            dst,
            off: first,
            len,
            pieces: count,
            segment_size,
            tos,
        });
    }

    /// Number of datagrams (a GSO run counts once).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Drop everything queued, keeping the memory.
    pub fn clear(&mut self) {
        self.used = 0;
        self.entries.clear();
        self.pieces.clear();
    }

    /// The queued datagrams: destination, TOS, segment size (0 = none) and
    /// bytes. Datagrams queued from pieces ([`TxBatch::push_pieces`]) are
    /// not contiguous and are skipped: only a datagram path that says it
    /// takes them ([`super::io::DatagramIo::pieces`]) gets such batches.
    pub fn iter(&self) -> impl Iterator<Item = (SocketAddrV4, u8, usize, &[u8])> + '_ {
        self.entries.iter().filter(|e| e.pieces == 0).map(|e| {
            (
                e.dst,
                e.tos,
                e.segment_size,
                &self.buf[e.off..e.off + e.len],
            )
        })
    }

    /// Every queued datagram's segment size (0 = none) and length in bytes.
    pub fn lengths(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.entries.iter().map(|e| (e.segment_size, e.len))
    }
}

/// What arrived in one receive slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxMeta {
    /// Sender.
    pub src: SocketAddrV4,
    /// Bytes in the slot (a GRO run: all segments).
    pub len: usize,
    /// The received IPv4 TOS byte (ECN in the low two bits).
    pub tos: u8,
    /// The received IPv4 TTL (`IP_RECVTTL`).
    pub ttl: u8,
    /// Size of each coalesced segment (equals `len` without GRO); the last
    /// may be shorter.
    pub segment_size: usize,
    /// The datagram was larger than the slot and got cut.
    pub truncated: bool,
    /// When the kernel received it (`SO_TIMESTAMPNS`): `CLOCK_REALTIME`
    /// since the Unix epoch; a GRO run, when the kernel delivered it (its
    /// last segment in).
    /// `None` when the kernel gave none.
    pub arrived: Option<Duration>,
}

/// Reusable receive buffers for one `recvmmsg`.
#[derive(Debug)]
pub struct RxBatch {
    buf: Vec<u8>,
    meta: Vec<RxMeta>,
    slots: usize,
    slot_size: usize,
    count: usize,
}

impl RxBatch {
    /// `slots` buffers of `slot_size` bytes (64 KiB with GRO).
    pub fn new(slots: usize, slot_size: usize) -> RxBatch {
        let slots = slots.clamp(1, MAX_BATCH);
        RxBatch {
            buf: vec![0; slots * slot_size],
            meta: vec![
                RxMeta {
                    src: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
                    len: 0,
                    tos: 0,
                    ttl: 0,
                    segment_size: 0,
                    truncated: false,
                    arrived: None,
                };
                slots
            ],
            slots,
            slot_size,
            count: 0,
        }
    }

    /// How many datagrams one receive can return.
    pub fn capacity(&self) -> usize {
        self.slots
    }

    /// Datagrams from the last receive.
    pub fn len(&self) -> usize {
        self.count
    }

    /// True when the last receive got nothing.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Slot `i` of the last receive: its metadata and bytes.
    pub fn get(&self, i: usize) -> (RxMeta, &[u8]) {
        let m = self.meta[i];
        let off = i * self.slot_size;
        (m, &self.buf[off..off + m.len])
    }

    /// Slot `i`'s bytes, mutably (for in-place processing).
    pub fn get_mut(&mut self, i: usize) -> (RxMeta, &mut [u8]) {
        let m = self.meta[i];
        let off = i * self.slot_size;
        (m, &mut self.buf[off..off + m.len])
    }

    /// Iterate the packets of slot `i`, splitting GRO runs into segments.
    pub fn segments(&self, i: usize) -> impl Iterator<Item = &[u8]> + '_ {
        let (m, bytes) = self.get(i);
        bytes.chunks(m.segment_size.max(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sock(ip: [u8; 4]) -> RoceSocket {
        RoceSocket::bind(
            SocketAddrV4::new(Ipv4Addr::from(ip), 0),
            &SocketOptions::default(),
        )
        .unwrap()
    }

    #[test]
    fn datagrams_from_pieces_arrive_as_if_contiguous() {
        let a = sock([127, 0, 0, 1]);
        let b = sock([127, 0, 0, 1]);
        // Payload outside the batch, as a registered region is.
        let region: Vec<u8> = (0..6000u32).map(|i| (i * 7) as u8).collect();
        let mut tx = TxBatch::with_capacity(1 << 16);
        // A GSO run of three 1010-byte packets: 4 header bytes from the
        // batch, 1000 payload bytes from the region, a 6-byte trailer.
        let first = tx.pieces_len();
        for k in 0..3u8 {
            let (h, hb) = tx.append(4);
            hb.fill(0xA0 + k);
            tx.push_buf_piece(h, 4);
            // SAFETY: `region` outlives the send below.
            unsafe { tx.push_ext_piece(region[1000 * k as usize..].as_ptr(), 1000) };
            let (t, tb) = tx.append(6);
            tb.fill(0xB0 + k);
            tx.push_buf_piece(t, 6);
        }
        tx.push_pieces(b.local_addr(), 0x02, 1010, first, 3030);
        // And a contiguous datagram after it in the same sendmmsg.
        tx.push(b.local_addr(), 0x02, 0, 10, |p| p.fill(9));
        assert_eq!(
            tx.lengths().collect::<Vec<_>>(),
            vec![(1010, 3030), (0, 10)]
        );
        let mut dropped = 0;
        assert_eq!(a.send(&tx, &mut dropped).unwrap(), 2);
        let mut rx = RxBatch::new(8, 65536);
        let mut got: Vec<Vec<u8>> = Vec::new();
        for _ in 0..100 {
            b.wait_readable(Some(Duration::from_millis(50))).unwrap();
            b.recv(&mut rx).unwrap();
            for i in 0..rx.len() {
                got.extend(rx.segments(i).map(<[u8]>::to_vec));
            }
            if got.len() >= 4 {
                break;
            }
        }
        assert_eq!(got.len(), 4);
        for k in 0..3usize {
            let mut want = vec![0xA0 + k as u8; 4];
            want.extend_from_slice(&region[1000 * k..1000 * k + 1000]);
            want.extend_from_slice(&[0xB0 + k as u8; 6]);
            assert_eq!(got[k], want, "packet {k}");
        }
        assert_eq!(got[3], vec![9; 10]);
    }

    #[test]
    fn batch_round_trip_carries_tos_and_gro_segments() {
        let a = sock([127, 0, 0, 1]);
        let b = sock([127, 0, 0, 1]);
        let mut tx = TxBatch::with_capacity(1 << 16);
        tx.push(b.local_addr(), 0x02, 0, 100, |p| p.fill(7));
        // A GSO run of 3 x 1000 + 500 bytes.
        tx.push(b.local_addr(), 0x03, 1000, 3500, |p| {
            for (i, c) in p.chunks_mut(1000).enumerate() {
                c.fill(i as u8)
            }
        });
        let mut dropped = 0;
        assert_eq!(a.send(&tx, &mut dropped).unwrap(), 2);
        assert_eq!(dropped, 0);
        let mut rx = RxBatch::new(8, 65536);
        let mut got = Vec::new();
        for _ in 0..100 {
            b.wait_readable(Some(Duration::from_millis(50))).unwrap();
            b.recv(&mut rx).unwrap();
            for i in 0..rx.len() {
                let (m, _) = rx.get(i);
                assert_eq!(m.src, a.local_addr());
                for s in rx.segments(i) {
                    got.push((m.tos, s.len(), s[0]));
                }
            }
            if got.len() >= 5 {
                break;
            }
        }
        assert_eq!(
            got,
            vec![
                (0x02, 100, 7),
                (0x03, 1000, 0),
                (0x03, 1000, 1),
                (0x03, 1000, 2),
                (0x03, 500, 3)
            ]
        );
    }
}
