//! The state of one UDP device: what its lock guards ([`State`]: the
//! datagram path, memory, PDs, CQs, QP engines, AHs, batches, counters)
//! and what its threads share ([`Shared`]: the lock, the socket, the clock,
//! the flags the background thread reads), with the device's counters
//! ([`UdpStats`]).
//!
//! Contract: plain data. The progress logic that works on it lives in
//! `progress`, `rx`, `tx` and `completion` (impl blocks on [`Shared`]),
//! the verbs in `verbs`. Engines address peers by
//! [`tp::AddressHandle`]s that pack an IPv4 address and UDP port
//! ([`encode_addr`], [`decode_addr`]).

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard};

use super::config::UdpConfig;
use super::dm::DevMemory;
use super::memory::HostMemory;
use crate::backend::counters::TransportTotals;
use crate::backend::io::DatagramIo;
use crate::backend::sys::{RoceSocket, RxBatch, TxBatch, Wakeup};
use crate::backend::AsyncEvent;
use crate::verbs::{AhAttr, Mtu, QpCap, QpType, VerbsError, WorkCompletion};
use roce::time::Instant;
use roce::transport::{self as tp, Qp};
use roce::wire::icrc::Ipv4IcrcCheck;

#[derive(Debug, Default)]
pub(super) struct Cq {
    pub(super) queue: VecDeque<WorkCompletion>,
    pub(super) capacity: usize,
    /// The CQ overflowed: it is in error, as a device's is, and takes no
    /// more completions.
    pub(super) overrun: bool,
    pub(super) users: u32,
}

pub(super) struct QpEntry {
    pub(super) engine: Qp,
    pub(super) qp_type: QpType,
    pub(super) pd: u64,
    pub(super) send_cq: u64,
    pub(super) recv_cq: u64,
    pub(super) cap: QpCap,
    /// Inline payloads are copied here at post time (one slot per send
    /// queue entry), a region only the backend knows.
    pub(super) inline_buf: Box<[u8]>,
    pub(super) inline_key: u32,
    pub(super) inline_next: usize,
    /// The DSCP part of the address vector's traffic class (its ECN bits
    /// cleared: the engine picks the ECN codepoint), in the IP TOS byte of
    /// every packet the QP sends (connected QPs; 0 until an AV is set).
    pub(super) tclass_dscp: u8,
}

/// Counters of the UDP device (what a NIC's ethtool/hw_counters show).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UdpStats {
    /// Packets handed to the engines.
    pub rx_packets: u64,
    /// Bytes of those packets (BTH to ICRC).
    pub rx_bytes: u64,
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

pub(super) struct State {
    pub(super) io: Box<dyn DatagramIo>,
    pub(super) mem: HostMemory,
    /// The device's own memory (`ibv_alloc_dm`); regions in `mem` may
    /// point into it.
    pub(super) dm: DevMemory,
    pub(super) pds: BTreeMap<u64, u32>,
    pub(super) cqs: BTreeMap<u64, Cq>,
    pub(super) qps: BTreeMap<u32, QpEntry>,
    pub(super) ahs: BTreeMap<u64, (u64, AhAttr)>,
    pub(super) next_handle: u64,
    pub(super) next_qpn: u32,
    pub(super) tx: TxBatch,
    /// ACKs of one transmit round with their QP's DSCP, sent after the
    /// requests; between rounds, the ACKs the background thread holds
    /// (see [`ACK_HOLD`](super::ACK_HOLD)).
    pub(super) acks: Vec<(tp::Transmit, u8)>,
    /// A round that received left what the engines produced for the next
    /// call (`progress_with(.., false)`): the next call, or the background
    /// thread at this time if none comes, sends it.
    pub(super) deferred_until: Option<Instant>,
    /// Send WRs posted since the last transmit and held for it (doorbell
    /// batching, [`POST_HOLD`](super::POST_HOLD)); `deferred_until` says
    /// until when.
    pub(super) posts_held: usize,
    /// When the held ACKs in `acks` must leave, if any are held.
    pub(super) acks_held_until: Option<Instant>,
    pub(super) rx: RxBatch,
    /// The receive ICRC check (remembers identifications per source).
    pub(super) icrc: Ipv4IcrcCheck,
    pub(super) stats: UdpStats,
    /// Asynchronous events not yet taken (`ibv_get_async_event`).
    pub(super) events: VecDeque<AsyncEvent>,
    /// The latest time handed to any engine: received packets are never
    /// dated earlier, so that every engine sees time go forward.
    pub(super) fed: Instant,
    /// The transport counters of QPs that were destroyed or reset, so
    /// that the device's stay monotonic.
    pub(super) retired: TransportTotals,
}

pub(super) struct Shared {
    pub(super) state: Mutex<State>,
    pub(super) socket: Arc<RoceSocket>,
    pub(super) local: SocketAddrV4,
    pub(super) start: std::time::Instant,
    pub(super) stop: AtomicBool,
    /// When an application thread last moved packets itself (a poll or a
    /// wait that ran a progress round), in nanoseconds since the device
    /// was opened (0: never). Only these keep the background thread off
    /// the socket, for `app_active_ns`: a post only transmits, and says
    /// nothing about whether the application will collect what arrives
    /// (it may wait by watching memory).
    pub(super) app_polled_ns: AtomicU64,
    /// Application threads inside `wait_cq`: they make progress
    /// themselves, so the background thread stays out of their way (two
    /// threads woken by every datagram, taking turns at the lock).
    pub(super) app_waiting: AtomicU64,
    /// The engines' next deadline after the last progress round, in
    /// nanoseconds since the device was opened (`u64::MAX`: none), so that
    /// the background thread wakes for it even while it otherwise stays
    /// out of the application's way.
    pub(super) next_deadline_ns: AtomicU64,
    /// Until when the background thread is blocked in the kernel, in
    /// nanoseconds since the device was opened (0: it is not): a round
    /// that moves `next_deadline_ns` before it wakes the thread through
    /// `wakeup`.
    pub(super) background_blocked_until_ns: AtomicU64,
    /// Wakes the background thread out of its wait on the socket.
    pub(super) wakeup: Wakeup,
    pub(super) cfg: UdpConfig,
    pub(super) active_mtu: Mtu,
}

/// The first QPN a device hands out: 0 and 1 are the special QPs, and
/// the numbers below 0x11 stay unused as on Soft-RoCE.
pub(super) const QPN_FIRST: u32 = 0x11;
/// The last QPN a device hands out before wrapping to [`QPN_FIRST`]
/// (0xFFFFFF is the multicast QPN; the ones just below it stay clear).
pub(super) const QPN_LAST: u32 = 0xFF_FFF0;

/// The next free QPN from `*next` on, wrapping from [`QPN_LAST`] to
/// [`QPN_FIRST`] and skipping every number `live` says is in use; `*next`
/// moves past it. `None` when every QPN is in use: a QPN is never handed
/// out twice, so a wrap never replaces a live QP.
pub(super) fn free_qpn(next: &mut u32, live: impl Fn(u32) -> bool) -> Option<u32> {
    let span = QPN_LAST - QPN_FIRST + 1;
    let mut q = (*next).clamp(QPN_FIRST, QPN_LAST);
    for _ in 0..span {
        let after = if q >= QPN_LAST { QPN_FIRST } else { q + 1 };
        if !live(q) {
            *next = after;
            return Some(q);
        }
        q = after;
    }
    None
}

pub(super) fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    // A panic while holding the lock leaves plain data; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

pub(super) fn os(verb: &'static str, e: io::Error) -> VerbsError {
    VerbsError::Os { verb, source: e }
}

pub(super) fn encode_addr(a: SocketAddrV4) -> tp::AddressHandle {
    tp::AddressHandle((u64::from(u32::from(*a.ip())) << 16) | u64::from(a.port()))
}

pub(super) fn decode_addr(h: tp::AddressHandle) -> SocketAddrV4 {
    SocketAddrV4::new(Ipv4Addr::from((h.0 >> 16) as u32), h.0 as u16)
}
