//! The queue pair engine, split by role as Linux Soft-RoCE (rxe) splits
//! it:
//!
//! * [`requester`]: `post_send`, request packets (`rxe_req.c`);
//! * [`responder`]: `post_recv`, request checks and execution, the
//!   response queue (`rxe_resp.c`);
//! * [`completer`]: ACKs, NAKs, READ responses and atomic ACKs against the
//!   send queue (`rxe_comp.c`);
//! * [`timers`]: the Local ACK and RNR timers and the retry decisions;
//! * [`selective`]: out-of-order placement (the responder's reorder
//!   window) and selective repeat (the requester's scoreboard), over the
//!   data structures of [`window`];
//! * [`state`]: `modify` (the attribute validator and transition table),
//!   RESET and ERR (`rxe_qp.c`).
//!
//! This file holds the one [`Qp`] they share, its accessors and the two
//! entry points that dispatch by role: [`Qp::handle_packet`] (admission,
//! then responder or completer) and [`Qp::poll_transmit`] (CNP, then
//! responses, then requests). Every role keeps the sans-IO contract of the
//! [module documentation](super): time comes in as `now`, nothing reads a
//! clock or touches a socket, payload moves only through [`Memory`].

mod completer;
mod paths;
mod requester;
mod responder;
mod selective;
mod state;
mod timers;
mod window;

pub use state::{check_modify, transition_masks};
pub use timers::{local_ack_timeout, rnr_timer};

use std::collections::VecDeque;

use crate::cc::{AnyCc, CongestionControl, Pacer};
use crate::time::{Duration, Instant};
use crate::wire::{
    AethRepr, AethSyndrome, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn, Msn, NakCode,
    Opcode, Psn, Qpn, RethRepr, Rkey, RoceHeaders,
};

use super::memory::{
    AccessFlags, AtomicOp, MemKey, Memory, Payload, PayloadDesc, Piece, WINDOW_KEY_BIT,
};
use super::types::*;

/// Bytes a packet takes on the wire besides its BTH, extension headers,
/// payload and pad: Ethernet 14, IPv4 20, UDP 8, ICRC 4. Used for pacing.
pub const WIRE_OVERHEAD: u32 = 46;

/// Largest RDMA message (RETH DMA length limit, 2^31).
pub const MAX_MESSAGE: u64 = 1 << 31;

/// Time to serialise `bytes` at `rate`, rounded up to a picosecond: the
/// same value as [`Rate::serialization_time`](crate::time::Rate), with a
/// 64-bit fast path for packet-sized counts (the 128-bit division costs
/// more than the rest of a packet's bookkeeping).
pub fn wire_time(rate: crate::time::Rate, bytes: u64) -> Duration {
    const PS_PER_S: u64 = 1_000_000_000_000;
    let bps = rate.bps();
    if bps != 0 && bytes < (1 << 20) {
        Duration::from_ps((bytes * 8 * PS_PER_S).div_ceil(bps))
    } else {
        rate.serialization_time(bytes)
    }
}

/// The earlier of two optional deadlines.
#[inline]
pub(crate) fn min_deadline(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Asynchronous QP events (`ibv_event_type` subset).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QpEvent {
    /// IBV_EVENT_SQ_DRAINED: the QP is in SQD and nothing is outstanding.
    SqDrained,
    /// IBV_EVENT_QP_FATAL-like: the QP went to ERR, with the status that
    /// caused it.
    Error(WcStatus),
}

#[derive(Debug, Clone, Copy)]
struct SendWqe {
    wr: SendWr,
    len: u32,
    first_psn: Psn,
    /// PSNs the WQE takes (packets for SEND/WRITE, responses for READ).
    npsn: u32,
    started: bool,
}

impl SendWqe {
    fn last_psn(&self) -> Psn {
        self.first_psn.add(self.npsn - 1)
    }
    fn contains(&self, p: Psn) -> bool {
        self.started && p.distance_from(self.first_psn) < self.npsn
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InMsg {
    None,
    Send {
        offset: u32,
    },
    Write {
        rkey: Rkey,
        va: u64,
        remaining: u32,
        imm: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RdRes {
    Free,
    Read {
        first_psn: Psn,
        last_psn: Psn,
        rkey: Rkey,
        va: u64,
        len: u32,
    },
    Atomic {
        psn: Psn,
        orig: u64,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RespItem {
    Ack {
        psn: Psn,
        syndrome: AethSyndrome,
        msn: Msn,
    },
    Read {
        /// The READ request's PSN (its resource's `first_psn`): a
        /// duplicate of the same READ restarts this item, never queues
        /// another.
        request_psn: Psn,
        rkey: Rkey,
        va: u64,
        remaining: u32,
        psn: Psn,
        fresh: bool,
        started: bool,
        msn: Msn,
        /// A new request (not a duplicate's replay): counts against
        /// `max_dest_rd_atomic` until its last response is sent.
        new: bool,
    },
    AtomicAck {
        psn: Psn,
        orig: u64,
        msn: Msn,
        /// As for `Read`.
        new: bool,
    },
}

/// One queue pair: the sans-IO RC/UC/UD engine.
#[derive(Debug, Clone)]
pub struct Qp {
    cfg: QpConfig,
    state: QpState,
    attr: QpAttr,
    pmtu: u32,
    stats: QpStats,
    cc: AnyCc,
    completions: VecDeque<Completion>,
    events: VecDeque<QpEvent>,

    // Requester.
    sq: VecDeque<SendWqe>,
    next_psn: Psn,
    comp_psn: Psn,
    send_idx: usize,
    send_pkt: u32,
    /// Requests before this PSN are resent past `max_unacked_psns` (the
    /// end of the started message, as of the last rewind).
    retx_until: Psn,
    /// One past the last request PSN ever sent (a READ's request covers
    /// its response PSNs): what a rewind may count as resent. `next_psn`
    /// runs ahead of it by the rest of a message that has started.
    sent_psn: Psn,
    retries_left: u8,
    rnr_left: u8,
    rto_deadline: Option<Instant>,
    rnr_deadline: Option<Instant>,
    rd_atomic_inflight: u32,
    pkts_since_ackreq: u32,
    pacer: Pacer,
    pacing_blocked: bool,
    /// Data packets have been waiting on the pacer since the QP last had
    /// nothing to send (unlike `pacing_blocked`, not cleared by the pacing
    /// timer nor by a send): the pacer's catch-up applies.
    pacer_held: bool,
    /// A retry started by an implied NAK or a READ response gap; cleared by
    /// progress.
    gap_retried: bool,
    /// Selective repeat: a timeout's resends have not left yet (the pacer
    /// or the window held them); the next timeout uses no retry.
    resend_owed: bool,

    // Responder.
    rq: VecDeque<RecvWr>,
    epsn: Psn,
    msn: Msn,
    nak_sent: bool,
    in_msg: InMsg,
    msg_start: Psn,
    resources: Vec<RdRes>,
    res_next: usize,
    resp_q: VecDeque<RespItem>,
    /// CNPs due and not yet sent: a batch of received packets can hold
    /// several CE marks that are each past the CNP interval (packets are
    /// stamped with their own arrival times), and each is owed its CNP.
    cnp_pending: u32,
    last_cnp: Option<Instant>,
    /// RETH length of the WRITE in progress.
    write_len: u32,
    /// The peer's last advertised credits (`None`: not advertised).
    peer_credits: Option<u32>,
    /// Requests held past a gap (only with a reorder window, once one
    /// arrives out of order).
    rx_window: Option<Box<window::RecvWindow>>,
    /// Selective repeat's record of what the responder holds (once a
    /// selective acknowledgement arrives).
    sack: Option<Box<window::Scoreboard>>,
    /// Swift: the first transmissions not yet acknowledged, with their send
    /// times, oldest first (`None` for other algorithms).
    // Boxed on purpose: one pointer per QP when unused (a simulation holds
    // millions of QPs), where an inline VecDeque would take four words.
    #[allow(clippy::box_collection)]
    sent_times: Option<Box<VecDeque<(Psn, Instant)>>>,
    /// Multipath's paths and which packet took which (`None`: one path).
    paths: Option<Box<paths::PathSet>>,
}

/// The AETH NAK code (one of the reserved ones) of a NAK answering a
/// trimmed request under selective repeat: its BTH PSN is the request's,
/// which is lost; it acknowledges nothing.
pub const TRIMMED_NAK: u8 = 0x05;

/// Outcome of acknowledging requests up to a PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AckOutcome {
    Done {
        progress: bool,
    },
    /// A READ or atomic at the head was passed over: its responses were
    /// lost.
    ImpliedNak {
        progress: bool,
    },
}

/// The largest payload of one packet: the path MTU of an RC or UC QP, or
/// the port's active MTU for UD (whose messages are one packet each).
pub(super) fn packet_mtu(cfg: &QpConfig, attr: &QpAttr) -> u32 {
    if cfg.qp_type == QpType::Ud {
        cfg.port_mtu.bytes()
    } else {
        attr.path_mtu.bytes()
    }
}

impl Qp {
    /// A new QP in RESET. Its queues start empty and grow with use: a
    /// fabric of thousands of QPs pays for the work posted, not for the
    /// limits configured.
    pub fn new(cfg: QpConfig) -> Qp {
        Qp {
            cfg,
            state: QpState::Reset,
            attr: QpAttr::default(),
            pmtu: packet_mtu(&cfg, &QpAttr::default()),
            stats: QpStats::default(),
            cc: AnyCc::new(cfg.cc),
            completions: VecDeque::new(),
            events: VecDeque::new(),
            sq: VecDeque::new(),
            next_psn: Psn::new(0),
            comp_psn: Psn::new(0),
            send_idx: 0,
            send_pkt: 0,
            retx_until: Psn::new(0),
            sent_psn: Psn::new(0),
            retries_left: 0,
            rnr_left: 0,
            rto_deadline: None,
            rnr_deadline: None,
            rd_atomic_inflight: 0,
            pkts_since_ackreq: 0,
            pacer: Pacer::with_catch_up(cfg.pacing_burst, cfg.pacing_catch_up),
            pacing_blocked: false,
            pacer_held: false,
            gap_retried: false,
            resend_owed: false,
            rq: VecDeque::new(),
            epsn: Psn::new(0),
            msn: Msn::new(0),
            nak_sent: false,
            in_msg: InMsg::None,
            msg_start: Psn::new(0),
            resources: Vec::new(),
            res_next: 0,
            resp_q: VecDeque::new(),
            cnp_pending: 0,
            last_cnp: None,
            write_len: 0,
            peer_credits: None,
            rx_window: None,
            sack: None,
            sent_times: matches!(
                cfg.cc,
                crate::cc::CcConfig::Swift(_) | crate::cc::CcConfig::Timely(_)
            )
            .then(Box::default),
            paths: cfg.multipath.map(|m| Box::new(paths::PathSet::new(m))),
        }
    }

    /// Responses (ACKs, NAKs, READ responses, atomic ACKs) queued and not
    /// sent in full yet; a READ's is one until its last packet leaves.
    pub fn pending_responses(&self) -> usize {
        self.resp_q.len()
    }

    /// Multipath: whether a request sent at `now` may take a path of
    /// `lane` (one is not avoided, or all of every lane are and each
    /// probes). True for every lane without multipath.
    pub fn lane_usable(&self, lane: Lane, now: Instant) -> bool {
        self.paths
            .as_deref()
            .map_or(true, |p| p.usable_in(lane, now))
    }

    /// Multipath: how many of this QP's paths are avoided at `now` after
    /// a loss (0 without multipath).
    pub fn paths_avoided(&self, now: Instant) -> usize {
        self.paths.as_deref().map_or(0, |p| p.avoided(now))
    }

    /// This QP's number.
    pub fn qpn(&self) -> Qpn {
        self.cfg.qpn
    }

    /// This QP's P_Key: the entry of [`QpConfig::pkey_table`] that
    /// `pkey_index` names (0, which matches nothing, when out of range).
    pub fn pkey(&self) -> u16 {
        self.cfg
            .pkey_table
            .get(self.attr.pkey_index as usize)
            .copied()
            .unwrap_or(0)
    }

    /// The current state.
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The creation-time configuration.
    pub fn config(&self) -> &QpConfig {
        &self.cfg
    }

    /// The current attributes (`ibv_query_qp`).
    pub fn attr(&self) -> &QpAttr {
        &self.attr
    }

    /// Counters.
    pub fn stats(&self) -> &QpStats {
        &self.stats
    }

    /// The congestion control state.
    pub fn cc(&self) -> &AnyCc {
        &self.cc
    }

    /// An ACK for `acked` carried the INT record `rec` (the switches' hops
    /// of the data packet it acknowledges, echoed by the responder): HPCC
    /// sets its rate from it; other algorithms ignore it. The caller
    /// delivers the ACK itself through [`handle_packet`](Self::handle_packet)
    /// first, as a NIC processes the transport before the telemetry.
    pub fn on_telemetry(&mut self, acked: Psn, rec: &crate::cc::IntRecord) {
        let sent = self.sent_psn;
        if let AnyCc::Hpcc(h) = &mut self.cc {
            h.on_telemetry(acked, sent, rec);
        }
    }

    /// Tell HPCC, Swift and TIMELY the base RTT of the QP's path (see
    /// [`HpccParams::base_rtt`](crate::cc::HpccParams); TIMELY normalises
    /// its gradient by it); other algorithms have none.
    pub fn set_base_rtt(&mut self, rtt: Duration) {
        match &mut self.cc {
            AnyCc::Hpcc(h) => h.set_base_rtt(rtt),
            AnyCc::Swift(w) => w.set_base_rtt(rtt),
            AnyCc::Timely(t) => t.set_min_rtt(rtt),
            _ => {}
        }
        match &mut self.cfg.cc {
            crate::cc::CcConfig::Hpcc(p) => p.base_rtt = rtt,
            crate::cc::CcConfig::Swift(p) => p.base_rtt = rtt,
            crate::cc::CcConfig::Timely(p) => p.min_rtt = rtt,
            _ => {}
        }
    }

    /// Swift: the ACK for `acked` arrived at `now`; time the newest first
    /// transmission it acknowledges (retransmitted PSNs are not timed, as
    /// Karn's rule has it).
    pub(super) fn swift_sample(&mut self, now: Instant, acked: Psn) {
        let Some(times) = self.sent_times.as_deref_mut() else {
            return;
        };
        let mut newest = None;
        let mut n = 0u32;
        while let Some(&(p, t)) = times.front() {
            if p.is_after(acked) {
                break;
            }
            times.pop_front();
            newest = Some(t);
            n += 1;
        }
        match (newest, &mut self.cc) {
            (Some(t), AnyCc::Swift(w)) => w.on_rtt(now, now - t, n),
            (Some(t), AnyCc::Timely(c)) => c.on_rtt(now, now - t),
            _ => {}
        }
    }

    /// The requester's next new PSN.
    pub fn next_psn(&self) -> Psn {
        self.next_psn
    }

    /// The oldest unacknowledged PSN.
    pub fn comp_psn(&self) -> Psn {
        self.comp_psn
    }

    /// The receive WQEs the peer last advertised in an ACK (`None` when it
    /// sends no credit information). Informational: like rxe, the
    /// requester relies on RNR NAKs rather than holding SENDs back.
    pub fn peer_credits(&self) -> Option<u32> {
        self.peer_credits
    }

    /// The responder's expected PSN.
    pub fn expected_psn(&self) -> Psn {
        self.epsn
    }

    /// Send WRs posted and not yet completed.
    pub fn send_queue_len(&self) -> usize {
        self.sq.len()
    }

    /// Receive WRs posted and not yet consumed.
    pub fn recv_queue_len(&self) -> usize {
        self.rq.len()
    }

    // ------------------------------------------------------------------

    // ------------------------------------------------------------------
    // Polling
    // ------------------------------------------------------------------

    /// The next completion, in order.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// The next asynchronous event.
    pub fn poll_event(&mut self) -> Option<QpEvent> {
        self.events.pop_front()
    }
    /// True while requests are sent and not yet acknowledged.
    pub fn has_outstanding(&self) -> bool {
        self.sq.front().is_some_and(|w| w.started)
    }

    fn state_runs_requester(&self) -> bool {
        matches!(self.state, QpState::Rts | QpState::Sqd)
    }

    // ------------------------------------------------------------------
    // Transmit
    // ------------------------------------------------------------------

    /// The next packet to send, if any, in priority order: a CNP, then
    /// responses (ACK/NAK, atomic ACKs, READ responses), then requests. Data
    /// packets (requests and READ responses) obey the congestion control
    /// rate: while the rate limiter holds, this returns `None` and
    /// [`poll_timeout`](Self::poll_timeout) includes the pacing deadline.
    /// `mem` is consulted for local and remote key checks only; payload
    /// bytes are never copied here.
    pub fn poll_transmit<M: Memory + ?Sized>(&mut self, now: Instant, mem: &M) -> Option<Transmit> {
        let mut t = Transmit::EMPTY;
        self.poll_transmit_into(now, mem, &mut t).then_some(t)
    }

    /// [`poll_transmit`](Self::poll_transmit) writing into a caller-owned
    /// [`Transmit`], which saves copying the packet between return slots
    /// (the fast path for the simulator). Returns false, leaving `out` in an
    /// unspecified state, when there is nothing to send.
    pub fn poll_transmit_into<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        mem: &M,
        out: &mut Transmit,
    ) -> bool {
        self.poll_transmit_on(now, mem, Lane::ANY, out)
    }

    /// [`poll_transmit_into`](Self::poll_transmit_into) for a transmit
    /// opportunity of `lane` (a NIC port of several): a multipath request
    /// takes one of the lane's paths, or, when [`lane_usable`] says none
    /// is, still one of the lane's paths as a probe. Responses and QPs
    /// without multipath ignore the lane.
    ///
    /// [`lane_usable`]: Self::lane_usable
    pub fn poll_transmit_on<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        mem: &M,
        lane: Lane,
        out: &mut Transmit,
    ) -> bool {
        if self.cnp_pending > 0 {
            self.cnp_pending -= 1;
            self.stats.tx_cnps += 1;
            *out = self.cnp();
            return true;
        }
        if !self.resp_q.is_empty() {
            if let Some(t) = self.poll_response(now, mem) {
                *out = t;
                return true;
            }
        }
        let holes = self.sack.as_ref().is_some_and(|s| s.may_have_hole());
        if !self.state_runs_requester() || (self.sq.len() <= self.send_idx && !holes) {
            if self.resp_q.is_empty() {
                // Nothing waits: the sender is idle, not behind.
                self.pacer_held = false;
            }
            return false;
        }
        if self.send_idx == 0 && self.sq.front().is_some_and(|w| w.wr.op.is_local()) {
            // A memory window bind or local invalidation at the head runs
            // here, sending nothing; what follows it may then go out.
            self.run_local_ops(mem);
            if !self.state_runs_requester() || self.sq.len() <= self.send_idx {
                self.pacer_held = false;
                return false;
            }
        }
        if self.rnr_deadline.is_some() {
            self.pacer_held = false;
            return false;
        }
        if !self.pacer.ready(now) && self.pacing_rate().is_some() {
            self.pacing_blocked = true;
            self.pacer_held = true;
            return false;
        }
        if holes && self.poll_hole(now, lane, out) {
            return true;
        }
        if self.sq.len() > self.send_idx && self.poll_request(now, mem, lane, out) {
            return true;
        }
        // Held by something else (the window, a fence): the time until it
        // clears is not the pacer's to make up for.
        self.pacer_held = false;
        false
    }

    fn cnp(&self) -> Transmit {
        let mut h = headers(BthRepr {
            opcode: Opcode::Cnp,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            // 0xFFFF in the default partition (ROCEV2.md §2.5); the QP's
            // own key otherwise, so that the peer's admission takes it.
            pkey: self.pkey(),
            fecn: false,
            becn: true,
            dest_qp: self.attr.dest_qp_num,
            ack_req: false,
            psn: Psn::new(0),
        });
        h.bth.becn = true;
        Transmit {
            dest: self.attr.ah,
            headers: h,
            ecn: self.cfg.ecn,
            payload: PayloadDesc::EMPTY,
            path: None,
        }
    }

    fn bth(&self, opcode: Opcode, psn: Psn, ack_req: bool, se: bool, plen: u32) -> BthRepr {
        BthRepr {
            opcode,
            solicited: se,
            migreq: false,
            pad_count: ((4 - (plen & 3)) & 3) as u8,
            tver: 0,
            pkey: self.pkey(),
            fecn: false,
            becn: false,
            dest_qp: self.attr.dest_qp_num,
            ack_req,
            psn,
        }
    }

    /// The rate the pacer holds data packets to, if any.
    fn pacing_rate(&self) -> Option<crate::time::Rate> {
        if self.cfg.pace_at_line_rate {
            self.cc.rate()
        } else {
            self.cc.rate_below_line()
        }
    }

    fn paced(&mut self, now: Instant, h: &RoceHeaders, plen: u32) {
        if let AnyCc::None(_) = self.cc {
            return;
        }
        let bytes = (h.header_len() as u32 + plen + h.bth.pad_count as u32 + WIRE_OVERHEAD) as u64;
        self.cc.on_transmit(now, bytes);
        if let Some(rate) = self.cc.rate() {
            self.pacer
                .sent(now, wire_time(rate, bytes), self.pacer_held);
        }
        self.pacing_blocked = false;
    }

    // ------------------------------------------------------------------
    // Receive
    // ------------------------------------------------------------------

    /// Handle a received packet addressed to this QP (the caller
    /// demultiplexes by DestQP and has checked the ICRC). Requests go to
    /// the responder, responses to the completer, CNPs to the congestion
    /// control. A CE mark makes the notification point schedule a CNP.
    /// Never panics and never returns an error: bad packets become NAKs,
    /// completion statuses or drop counters.
    pub fn handle_packet<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        pkt: &Received<'_>,
        mem: &mut M,
    ) {
        self.stats.rx_packets += 1;
        let op = pkt.headers.bth.opcode;
        if pkt.headers.bth.dest_qp != self.cfg.qpn || pkt.headers.bth.tver != 0 {
            self.stats.rx_dropped += 1;
            return;
        }
        if op == Opcode::Cnp {
            // A CNP passes the same admission as any packet (a NIC checks
            // it against the QP it names): from the connected peer of an RC
            // or UC QP, in the QP's partition. Anyone else could throttle
            // the QP.
            if !self.admitted(pkt) {
                return;
            }
            self.stats.rx_cnps += 1;
            // A CNP is acted on by a QP that sends and whose algorithm
            // cuts its rate on CNPs; otherwise it is ignored (mlx5's
            // rp_cnp_ignored: the reaction point is off for the QP).
            if matches!(self.state, QpState::Rts | QpState::Sqd) && self.cc.reacts_to_cnp() {
                self.cc.on_cnp(now);
            } else {
                self.stats.rx_cnps_ignored += 1;
            }
            return;
        }
        let transport_ok = matches!(
            (op.transport(), self.cfg.qp_type),
            (crate::wire::Transport::Rc, QpType::Rc)
                | (crate::wire::Transport::Uc, QpType::Uc)
                | (crate::wire::Transport::Ud, QpType::Ud)
        );
        if !transport_ok || matches!(self.state, QpState::Reset | QpState::Init | QpState::Err) {
            self.stats.rx_dropped += 1;
            return;
        }
        if !self.admitted(pkt) {
            return;
        }
        if pkt.ecn == Ecn::Ce {
            self.stats.rx_ce += 1;
            if let Some(gap) = self.cfg.min_time_between_cnps {
                if self.cfg.qp_type != QpType::Ud && self.last_cnp.map_or(true, |t| now >= t + gap)
                {
                    self.cnp_pending = self.cnp_pending.saturating_add(1);
                    self.last_cnp = Some(now);
                }
            }
        }
        if op.is_request() {
            match self.cfg.qp_type {
                QpType::Rc => self.rc_request(pkt, mem),
                QpType::Uc => self.uc_request(pkt, mem),
                QpType::Ud => self.ud_request(pkt, mem),
            }
        } else if matches!(self.state, QpState::Rts | QpState::Sqd | QpState::Sqe) {
            self.rc_response(now, pkt, mem);
        } else {
            self.stats.rx_dropped += 1;
        }
    }
}

impl Qp {
    /// A request a switch trimmed (Ultra Ethernet's packet trimming): its
    /// headers arrived, its payload was cut off where a queue was full.
    /// Under selective repeat the responder answers at once with a NAK
    /// naming the PSN ([`TRIMMED_NAK`]), and the requester resends it
    /// without waiting for later packets or a timeout. Otherwise, and for
    /// anything but an RC request in sequence or past it, it is dropped,
    /// as a NIC drops a packet shorter than its headers say.
    pub fn handle_trimmed(&mut self, pkt: &Received<'_>) {
        self.stats.rx_packets += 1;
        self.stats.rx_trimmed += 1;
        let h = &pkt.headers;
        let ok = h.bth.dest_qp == self.cfg.qpn
            && h.bth.opcode.is_request()
            && h.bth.opcode.transport() == crate::wire::Transport::Rc
            && self.cfg.qp_type == QpType::Rc
            && self.cfg.retransmit == RetransmitMode::SelectiveRepeat
            && matches!(
                self.state,
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
            );
        if !ok || !self.admitted(pkt) {
            self.stats.rx_dropped += 1;
            return;
        }
        let psn = h.bth.psn;
        let d = psn.diff(self.epsn);
        if d < 0 || d as u32 >= self.cfg.reorder_window.max(1) {
            // Delivered already, or beyond what the responder tracks.
            self.stats.rx_dropped += 1;
            return;
        }
        if self.rx_window.as_ref().is_some_and(|w| {
            let k = self.epsn.diff(w.base);
            k >= 0 && w.is_held(d as u32 + k as u32)
        }) {
            // Held already: a resend's trimmed copy.
            self.stats.rx_dropped += 1;
            return;
        }
        self.stats.tx_trim_naks += 1;
        self.resp_q.push_back(RespItem::Ack {
            psn,
            syndrome: AethSyndrome::Nak(NakCode::Reserved(TRIMMED_NAK)),
            msn: self.msn,
        });
    }

    /// Admission, as a NIC does it (ROCEV2.md §7 item 2), for every packet
    /// and CNP: a connected QP hears only its peer, and everyone must be in
    /// its partition. Failures are silent drops, counted by cause.
    fn admitted(&mut self, pkt: &Received<'_>) -> bool {
        if self.cfg.qp_type != QpType::Ud && pkt.src != self.attr.ah {
            self.stats.rx_bad_source += 1;
            self.stats.rx_dropped += 1;
            return false;
        }
        if !pkey_match(pkt.headers.bth.pkey, self.pkey()) {
            self.stats.rx_bad_pkey += 1;
            self.stats.rx_dropped += 1;
            return false;
        }
        true
    }
}

/// Whether a request packet's payload of `plen` bytes has the length its
/// opcode allows at path MTU `pmtu` (IBA C9-*, the length check): FIRST
/// and MIDDLE exactly the MTU, LAST one byte to the MTU, ONLY up to it.
pub(super) fn payload_fits(op: Opcode, plen: u32, pmtu: u32) -> bool {
    if op.is_first() || op.is_middle() {
        plen == pmtu
    } else if op.is_last() {
        plen >= 1 && plen <= pmtu
    } else {
        plen <= pmtu
    }
}

/// What a request opcode asks the responder to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum OpKind {
    Send,
    Write,
    Read,
    Atomic,
    /// ATOMIC WRITE (IBTA 1.5): executed at once, answered as a READ of
    /// nothing (RDMA READ RESPONSE ONLY), counted as a READ resource.
    AtomicWrite,
    Other,
}

pub(super) fn op_kind(op: Opcode) -> OpKind {
    use Opcode::*;
    match op {
        RcSendFirst | RcSendMiddle | RcSendLast | RcSendLastImm | RcSendOnly | RcSendOnlyImm
        | RcSendLastInv | RcSendOnlyInv | UcSendFirst | UcSendMiddle | UcSendLast
        | UcSendLastImm | UcSendOnly | UcSendOnlyImm | UdSendOnly | UdSendOnlyImm => OpKind::Send,
        RcWriteFirst | RcWriteMiddle | RcWriteLast | RcWriteLastImm | RcWriteOnly
        | RcWriteOnlyImm | UcWriteFirst | UcWriteMiddle | UcWriteLast | UcWriteLastImm
        | UcWriteOnly | UcWriteOnlyImm => OpKind::Write,
        RcAtomicWrite => OpKind::AtomicWrite,
        RcReadRequest => OpKind::Read,
        RcCompareSwap | RcFetchAdd => OpKind::Atomic,
        _ => OpKind::Other,
    }
}

fn headers(bth: BthRepr) -> RoceHeaders {
    RoceHeaders {
        bth,
        deth: None,
        reth: None,
        atomic_eth: None,
        aeth: None,
        atomic_ack_eth: None,
        immdt: None,
        ieth: None,
    }
}

#[cfg(test)]
mod tests {
    use super::requester::{data_opcode, gather};
    use super::responder::{scatter, ScatterError};
    use super::*;
    use crate::transport::memory::ByteMemory;
    use crate::wire::Lkey;

    #[test]
    fn engines_can_move_between_threads() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Qp>();
        assert_send_sync::<ByteMemory>();
        assert_send_sync::<crate::transport::LengthMemory>();
    }

    #[test]
    fn wire_time_matches_the_128_bit_formula() {
        use crate::time::Rate;
        for bps in [1u64, 999_999_937, 25_000_000_000, 400_000_000_000] {
            for bytes in [0u64, 1, 64, 1082, 4142, (1 << 20) - 1, 1 << 20, 1 << 30] {
                let r = Rate::from_bps(bps);
                assert_eq!(
                    wire_time(r, bytes),
                    r.serialization_time(bytes),
                    "{bps} {bytes}"
                );
            }
        }
        assert_eq!(wire_time(Rate::from_bps(0), 10), Duration::MAX);
    }

    #[test]
    fn opcodes_follow_position_and_variant() {
        use Opcode::*;
        let w = SendOp::Write {
            remote_addr: 0,
            rkey: Rkey::new(1),
        };
        let wi = SendOp::WriteWithImm {
            remote_addr: 0,
            rkey: Rkey::new(1),
            imm: 3,
        };
        assert_eq!(
            data_opcode(QpType::Rc, SendOp::Send, true, true),
            RcSendOnly
        );
        assert_eq!(
            data_opcode(QpType::Rc, SendOp::SendWithImm(1), false, true),
            RcSendLastImm
        );
        assert_eq!(
            data_opcode(QpType::Rc, SendOp::SendWithImm(1), true, false),
            RcSendFirst
        );
        assert_eq!(
            data_opcode(QpType::Rc, SendOp::SendWithInv(Rkey::new(1)), true, true),
            RcSendOnlyInv
        );
        assert_eq!(data_opcode(QpType::Uc, w, false, false), UcWriteMiddle);
        assert_eq!(data_opcode(QpType::Rc, wi, true, true), RcWriteOnlyImm);
        assert_eq!(data_opcode(QpType::Rc, wi, false, true), RcWriteLastImm);
        assert_eq!(
            data_opcode(QpType::Ud, SendOp::SendWithImm(1), true, true),
            UdSendOnlyImm
        );
    }

    #[test]
    fn gather_and_scatter_walk_sge_lists() {
        let sges = [
            Sge {
                addr: 100,
                length: 10,
                lkey: Lkey::new(7),
            },
            Sge {
                addr: 500,
                length: 5,
                lkey: Lkey::new(7),
            },
            Sge {
                addr: 900,
                length: 20,
                lkey: Lkey::new(8),
            },
        ];
        let mut d = PayloadDesc::EMPTY;
        gather(&mut d, &sges, 8, 10);
        let p: Vec<(u32, u64, u32)> = d.pieces().iter().map(|p| (p.key, p.addr, p.len)).collect();
        assert_eq!(p, [(7, 108, 2), (7, 500, 5), (8, 900, 3)]);
        assert_eq!(d.len(), 10);

        let mut mem = ByteMemory::new();
        let r = mem.register(0, 4096, AccessFlags::LOCAL_WRITE).unwrap();
        let sges = [
            Sge {
                addr: 10,
                length: 3,
                lkey: r.lkey,
            },
            Sge {
                addr: 100,
                length: 4,
                lkey: r.lkey,
            },
        ];
        scatter(&mut mem, &sges, 1, Payload::Bytes(&[1, 2, 3, 4, 5])).unwrap();
        assert_eq!(mem.bytes(r.lkey, 10, 3).unwrap(), &[0, 1, 2]);
        assert_eq!(mem.bytes(r.lkey, 100, 4).unwrap(), &[3, 4, 5, 0]);
        assert_eq!(
            scatter(&mut mem, &sges, 3, Payload::Len(5)),
            Err(ScatterError::TooSmall)
        );
        let bad = [Sge {
            addr: 10,
            length: 3,
            lkey: Lkey::new(0),
        }];
        assert_eq!(
            scatter(&mut mem, &bad, 0, Payload::Len(1)),
            Err(ScatterError::Protection)
        );
    }

    #[test]
    fn the_transition_table_differs_by_qp_type() {
        use QpState::*;
        assert!(transition_masks(QpType::Rc, Reset, Err).is_none());
        assert!(transition_masks(QpType::Rc, Sqe, Rts).is_none());
        assert!(transition_masks(QpType::Uc, Sqe, Rts).is_some());
        let (req, _) = transition_masks(QpType::Ud, Reset, Init).unwrap();
        assert!(req.contains(QpAttrMask::QKEY));
        let (req, _) = transition_masks(QpType::Ud, Init, Rtr).unwrap();
        assert!(req.is_empty());
        let (req, _) = transition_masks(QpType::Rc, Rtr, Rts).unwrap();
        assert_eq!(
            req,
            QpAttrMask::TIMEOUT
                | QpAttrMask::RETRY_CNT
                | QpAttrMask::RNR_RETRY
                | QpAttrMask::SQ_PSN
                | QpAttrMask::MAX_QP_RD_ATOMIC
        );
        for from in [Init, Rtr, Rts, Sqd, Sqe, Err] {
            assert!(transition_masks(QpType::Rc, from, Err).is_some());
            assert!(transition_masks(QpType::Rc, from, Reset).is_some());
        }
    }
}
