//! A drop-in `librdmacm.so.1`: rdma_cm connection setup over TCP for
//! unmodified programs on rocelab's drop-in `libibverbs.so.1`.
//!
//! Programs such as `rping`, `ucmatose` and perftest with `-R` set up their
//! connections with librdmacm: they resolve an IP address to a device,
//! create the QP through the CM, and connect, accept, reject and disconnect
//! by CM events. This library does that without a kernel: the CM messages
//! travel over TCP, beside the UDP data path of the emulation. `rocelab
//! exec` puts it on the loader's path next to the drop-in libibverbs.
//!
//! # Addresses, devices and the TCP side channel
//!
//! The application's IP addresses name TCP endpoints: `rdma_listen` on
//! `IP:PORT` listens on TCP `IP:PORT` (the same port number: RDMA_PS_TCP
//! ports are TCP ports here), and `rdma_connect` to `IP:PORT` connects there.
//! The data path is the device's, which may have another address: on
//! loopback each process's `rocelab0` has its own `127.0.H.L` (see the
//! ibverbs shim). So, as the RoCE CM's REQ and REP do, the CM messages carry
//! each side's GID (`::ffff:` + the device's IPv4 address), QPN and
//! starting PSN, and each side points its QP at the GID it was sent.
//!
//! Which device an IP address maps to: the device whose address equals it,
//! otherwise the first device (the loopback default, or the first of
//! `ROCELAB_IBV_DEVICES`). A listener bound to the wildcard address has no
//! device until a request arrives; the request's id gets the device of the
//! address the request came in on. Every id of the process shares one
//! `ibv_context` per device, opened on first use through the exported
//! `ibv_*` functions of the loaded libibverbs (so the QPs live there).
//!
//! # Connection protocol
//!
//! The active side sends a REQ after `rdma_connect` (QP in INIT). The
//! passive side reports `RDMA_CM_EVENT_CONNECT_REQUEST`; `rdma_accept`
//! moves its QP to RTR and RTS and answers with a REP; `rdma_reject`
//! answers with a REJ (`RDMA_CM_EVENT_REJECTED`, status 28, the
//! consumer-defined reason, on the active side). On a REP the active side
//! moves its QP to RTR and RTS, sends an RTU and reports
//! `RDMA_CM_EVENT_ESTABLISHED`; the RTU makes the passive side report it
//! too. `rdma_disconnect` moves the QP to ERR and sends a DREQ; each side
//! reports `RDMA_CM_EVENT_DISCONNECTED` once (on the DREQ, the DREP, or the
//! peer's connection closing). A connect to a port nobody listens on
//! reports `RDMA_CM_EVENT_REJECTED` with status 8 (invalid service ID), as
//! the kernel's CM does, after a second of retrying (programs that agree
//! on a moment out of band, perftest with `-R`, may connect a moment before
//! the peer's `rdma_listen`). The wire format is in [`wire`]; a peer's message is
//! validated field by field and a malformed one ends that connection.
//!
//! The peer is untrusted, and three rules keep it from holding up or
//! steering the program:
//!
//! - No write to a peer ever waits: a connection carries at most one
//!   message of each type each way (a repeated DREQ gets no second DREP,
//!   as in the kernel's CM), well under the socket's send buffer, so each
//!   is sent non-blocking, and one that would block fails the connection.
//!   No lock is held across a wait on a peer; `rdma_disconnect` returns
//!   at once whatever the peer does.
//! - A listener reads every new connection's REQ in one polling thread,
//!   each connection with a 10 s deadline over its whole REQ; the
//!   connection waiting longest makes room when 256 wait. `rdma_listen`'s
//!   `backlog` bounds the connect requests reported and not yet taken by
//!   `rdma_get_cm_event` (0 or less, or over 1024: 1024, as the kernel's
//!   CM); a request beyond it is refused with a REJ.
//! - A REQ's or REP's GID, which becomes the QP's destination, must be
//!   the IPv4-mapped address its TCP connection comes from; otherwise the
//!   passive side refuses the REQ with a REJ, and the active side answers
//!   the REP with a REJ and reports `RDMA_CM_EVENT_REJECTED` (status 12,
//!   invalid GID). So that a REQ meets the rule on loopback, where each
//!   process's device has its own `127.0.H.L`, the active side connects
//!   from its device's address. A REP comes from the address the program
//!   dialled, which on loopback is not the listener's device address: a
//!   REP over a loopback connection may name any loopback GID (this
//!   host), as may a REQ over IPv6 loopback (`::1`), which cannot come
//!   from an IPv4 address.
//!
//! The QP transitions follow rdma-core's CM: `rdma_create_qp` leaves the QP
//! in INIT; RTR gets the peer's QPN, PSN and GID, the smaller path MTU, and
//! `max_dest_rd_atomic` = the responder resources; RTS gets the PSN this
//! side chose, `max_rd_atomic` = the initiator depth, the retry counts and
//! the ACK timeout (`RDMA_OPTION_ID_ACK_TIMEOUT`, default 14). An id
//! without a QP (the application manages its own) gets
//! `RDMA_CM_EVENT_CONNECT_RESPONSE` instead and finishes with
//! `rdma_establish`; `rdma_init_qp_attr` gives it the same attributes.
//!
//! # Event channels
//!
//! An event channel's `fd` is one end of a Unix socket pair: it is readable
//! while events wait, so `poll` works on it, and `O_NONBLOCK` on it makes
//! `rdma_get_cm_event` fail with `EAGAIN` instead of waiting.
//!
//! An id created without a channel is synchronous, as in rdma-core: it
//! gets a channel of its own, and `rdma_resolve_addr`, `rdma_resolve_route`,
//! `rdma_connect`, `rdma_accept` and `rdma_disconnect` wait for their event
//! (kept in `id->event`); `rdma_create_ep` and `rdma_get_request` build on
//! that. Every id with a device has the device's default PD in `id->pd`,
//! and `rdma_create_qp` without CQs creates one per direction with its own
//! completion channel (`id->send_cq`, `id->recv_cq`, ...), as rdma-core's.
//!
//! UD port-space ids (RDMA_PS_UDP) exchange a REQ and a REP the same way
//! (as the CM's SIDR does) and keep no connection: the passive side's
//! `RDMA_CM_EVENT_CONNECT_REQUEST` and the active side's
//! `RDMA_CM_EVENT_ESTABLISHED` carry the peer's QPN, the Q_Key
//! (`RDMA_UDP_QKEY`) and an address vector to its GID (`param.ud`); UD QPs
//! are in RTS from `rdma_create_qp` on. RDMA_PS_UDP port N is TCP port N
//! too, so a TCP and a UDP port-space listener cannot share a number here.
//!
//! # What is not here
//!
//! Multicast, rsockets, SRQs made by the CM (`rdma_create_srq`), ECE, and
//! migrating an id to synchronous mode
//! fail with the errno rdma-core returns for an unsupported operation
//! (`ENOSYS` for rsockets, `EOPNOTSUPP` otherwise); `rpoll` and `rselect`
//! poll ordinary descriptors, since no rsocket can exist.
//!
//! # Safety contract of the exports
//!
//! Every exported function trusts its pointer arguments as rdma-core does:
//! ids, channels and events are those this library returned and not yet
//! destroyed or acknowledged. Null pointers are refused with `EINVAL`.
//! Nothing unwinds into C.

#![allow(clippy::missing_safety_doc)]

mod addrinfo;
mod api;
mod channel;
mod devices;
pub mod ffi;
mod id;
mod rsocket;
#[cfg(test)]
mod tests;
pub mod wire;

include!(concat!(env!("OUT_DIR"), "/symver.rs"));

use std::os::raw::c_int;

/// Set the thread's `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// Fail a call the rdma-core way: `errno` = `e`, return -1.
pub(crate) fn fail(e: c_int) -> c_int {
    set_errno(e);
    -1
}

/// A diagnostic about a peer or the host (a refused request, a closed
/// connection): the library prints nothing, as a library must, unless the
/// user asks for these lines with `ROCELAB_RDMACM_DEBUG=1`; what the
/// program needs reaches it as events and errnos.
pub(crate) fn warn(msg: &str) {
    if std::env::var_os("ROCELAB_RDMACM_DEBUG").is_some_and(|v| v != "0") {
        eprintln!("rocelab-rdmacm: {msg}");
    }
}

/// A raw pointer that may cross threads: the pointee's owner guarantees
/// it outlives every use (see the modules that hold one).
#[derive(Debug)]
pub(crate) struct SendPtr<T>(pub *mut T);

// SAFETY: a SendPtr is only dereferenced under the locks and liveness
// checks documented where it is stored.
unsafe impl<T> Send for SendPtr<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for SendPtr<T> {}

impl<T> Clone for SendPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SendPtr<T> {}
