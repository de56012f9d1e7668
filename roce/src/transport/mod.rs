//! The sans-IO RC/UC/UD transport engine (ROCEV2.md §5).
//!
//! One [`Qp`] holds the requester, the completer and the responder of one
//! queue pair (one file per role under `qp/`, as Soft-RoCE splits them). It never reads a clock, never opens a socket and never
//! copies payload: time comes in as `now` (integer picoseconds), packets
//! come in as [`RoceHeaders`](crate::wire::RoceHeaders) plus a
//! [`Payload`] (bytes or a bare length) and go out as [`Transmit`]s whose
//! payload is a [`PayloadDesc`] the caller resolves through the
//! [`Memory`] trait. Registered memory is reached only through that trait:
//! [`ByteMemory`] holds real bytes (the UDP emulator), [`LengthMemory`]
//! moves lengths only (the simulator).
//!
//! # Calling order
//!
//! 1. Create with [`Qp::new`] and bring up with [`Qp::modify`]
//!    (RESET → INIT → RTR → RTS, the `ibv_modify_qp` rules).
//! 2. Post work with [`Qp::post_recv`] and [`Qp::post_send`].
//! 3. Loop, in any order that respects time:
//!    * for every packet received for this QP:
//!      [`Qp::handle_packet`]`(now, &Received { headers, ecn, payload, .. }, mem)`;
//!    * when `now` reaches [`Qp::poll_timeout`]: [`Qp::handle_timeout`]`(now)`;
//!    * then drain [`Qp::poll_transmit`]`(now, mem)` while the link can
//!      take packets (it returns `None` when there is nothing to send, when
//!      a window or RNR wait holds, or while the congestion control's rate
//!      limiter holds: then `poll_timeout` includes the pacing deadline);
//!    * drain [`Qp::poll_completion`] and [`Qp::poll_event`].
//!    * after any call, re-read [`Qp::poll_timeout`]: the next deadline, or
//!      `None` when nothing is pending (an idle QP needs no timer).
//!
//! ECN enters with each received packet ([`Received::ecn`]) and leaves with
//! each transmitted one ([`Transmit::ecn`]). A CE mark makes the
//! notification point emit a CNP (at most one per
//! [`QpConfig::min_time_between_cnps`]); a received CNP feeds the QP's
//! congestion control ([`crate::cc`]).
//!
//! # Guarantees
//!
//! * Network input never panics and never surfaces as `Err`: bad packets
//!   become NAKs, completion statuses or [`QpStats`] drop counters.
//! * API misuse ([`Qp::modify`], [`Qp::post_send`], [`Qp::post_recv`])
//!   returns an error saying why, and changes nothing.
//! * Deterministic: the same calls give the same outputs.
//! * No heap allocation per packet in steady state: queues are
//!   preallocated rings; payload descriptors are inline arrays.
//!
//! # Policies where implementations differ (ROCEV2.md §8)
//!
//! * `retry_cnt = 7` means 7 retries (spec); [`QpConfig::rxe_retry_cnt7_infinite`]
//!   gives rxe's "infinite".
//! * A receive buffer too small: NAK invalid request to the peer, and
//!   [`QpConfig::recv_too_small_status`] locally (default LOC_LEN_ERR).
//! * A `qp_access_flags` violation: NAK invalid request (rxe).
//! * AckReq: last packet of each message plus every
//!   [`QpConfig::ack_req_every`] packets (rxe: 64). The responder ACKs only
//!   when AckReq is set, coalescing queued ACKs.
//! * Duplicate SEND/WRITE: re-ACK with PSN ePSN − 1 (rxe).
//! * READ retry responses: the requester accepts both a restart
//!   (FIRST/ONLY) and a continuation (MIDDLE/LAST) at the retried PSN; the
//!   responder restarts when the PSN is the resource's first, else continues.
//! * An RNR wait has priority over the ACK timer; the retry counters reset
//!   on every response that makes progress.

pub mod memory;
pub mod pair;
mod qp;
mod types;

pub use memory::{
    AccessFlags, AtomicOp, ByteMemory, LengthMemory, MemError, MemKey, Memory, MwType, Payload,
    PayloadDesc, Piece, Registration, WindowBind, MAX_PIECES, WINDOW_KEY_BIT,
};
pub use qp::{
    check_modify, local_ack_timeout, rnr_timer, transition_masks, wire_time, Qp, QpEvent,
    MAX_MESSAGE, TRIMMED_NAK, WIRE_OVERHEAD,
};
pub use types::*;
