//! The queue pair engine: requester, completer and responder of one QP.
//!
//! See the [module documentation](super) for the calling order.

use std::collections::VecDeque;

use crate::cc::{AnyCc, CongestionControl};
use crate::time::{Duration, Instant};
use crate::wire::{
    AethRepr, AethSyndrome, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn, Msn, NakCode,
    Opcode, Psn, Qpn, RethRepr, Rkey, RoceHeaders,
};

use super::memory::{Access, AtomicOp, MemKey, Memory, Payload, PayloadDesc, Piece};
use super::types::*;

/// Bytes a packet takes on the wire besides its BTH, extension headers,
/// payload and pad: Ethernet 14, IPv4 20, UDP 8, ICRC 4. Used for pacing.
pub const WIRE_OVERHEAD: u32 = 46;

/// Largest RDMA message (RETH DMA length limit, 2^31).
pub const MAX_MESSAGE: u64 = 1 << 31;

/// The RNR timer table of ROCEV2.md §5.6, in microseconds × 100
/// (code 0 = 655.36 ms).
const RNR_TABLE_10NS: [u32; 32] = [
    65_536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
];

/// The RNR NAK delay for a 5-bit timer code (ROCEV2.md §5.6).
pub fn rnr_timer(code: u8) -> Duration {
    Duration::from_ns(RNR_TABLE_10NS[(code & 31) as usize] as u64 * 10_000)
}

/// The Local ACK Timeout for an exponent: 4.096 µs × 2^timeout; `None`
/// for 0 (no timer).
pub fn local_ack_timeout(timeout: u8) -> Option<Duration> {
    if timeout == 0 {
        return None;
    }
    Some(Duration::from_ns(4096).saturating_mul(1u64 << (timeout.min(31))))
}

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
    retx_until: Psn,
    retries_left: u8,
    rnr_left: u8,
    rto_deadline: Option<Instant>,
    rnr_deadline: Option<Instant>,
    rd_atomic_inflight: u32,
    pkts_since_ackreq: u32,
    next_send_time: Instant,
    pacing_blocked: bool,
    /// A retry started by an implied NAK or a READ response gap; cleared by
    /// progress.
    gap_retried: bool,

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
    cnp_pending: bool,
    last_cnp: Option<Instant>,
    /// RETH length of the WRITE in progress.
    write_len: u32,
    /// The peer's last advertised credits (`None`: not advertised).
    peer_credits: Option<u32>,
}

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

impl Qp {
    /// A new QP in RESET.
    pub fn new(cfg: QpConfig) -> Qp {
        Qp {
            cfg,
            state: QpState::Reset,
            attr: QpAttr::default(),
            pmtu: QpAttr::default().path_mtu.bytes(),
            stats: QpStats::default(),
            cc: AnyCc::new(cfg.cc),
            completions: VecDeque::with_capacity(64),
            events: VecDeque::new(),
            sq: VecDeque::with_capacity(cfg.max_send_wr.min(4096) as usize),
            next_psn: Psn::new(0),
            comp_psn: Psn::new(0),
            send_idx: 0,
            send_pkt: 0,
            retx_until: Psn::new(0),
            retries_left: 0,
            rnr_left: 0,
            rto_deadline: None,
            rnr_deadline: None,
            rd_atomic_inflight: 0,
            pkts_since_ackreq: 0,
            next_send_time: Instant::ZERO,
            pacing_blocked: false,
            gap_retried: false,
            rq: VecDeque::with_capacity(cfg.max_recv_wr.min(4096) as usize),
            epsn: Psn::new(0),
            msn: Msn::new(0),
            nak_sent: false,
            in_msg: InMsg::None,
            msg_start: Psn::new(0),
            resources: Vec::new(),
            res_next: 0,
            resp_q: VecDeque::with_capacity(16),
            cnp_pending: false,
            last_cnp: None,
            write_len: 0,
            peer_credits: None,
        }
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
    // modify_qp
    // ------------------------------------------------------------------

    /// `ibv_modify_qp`: apply the attributes whose bits are in `mask` and
    /// move to `attr.qp_state` (STATE must be in the mask). Checks the
    /// kernel's transition table for the QP type: an invalid transition, a
    /// missing required attribute or an attribute the transition does not
    /// accept is an error naming both states and the attributes, and then
    /// nothing changes. Going to ERR flushes every WR; going to RESET clears
    /// the queues and the PSN state.
    pub fn modify(&mut self, attr: &QpAttr, mask: AttrMask) -> Result<(), ModifyError> {
        let from = self.state;
        let to = if mask.contains(AttrMask::STATE) {
            attr.qp_state
        } else {
            return Err(ModifyError::MissingAttributes {
                from,
                to: from,
                missing: AttrMask::STATE,
            });
        };
        let (required, optional) = transition_masks(self.cfg.qp_type, from, to)
            .ok_or(ModifyError::InvalidTransition { from, to })?;
        let given = mask.minus(AttrMask::STATE);
        let missing = required.minus(given);
        if !missing.is_empty() {
            return Err(ModifyError::MissingAttributes { from, to, missing });
        }
        let unexpected = given.minus(required | optional);
        if !unexpected.is_empty() {
            return Err(ModifyError::UnexpectedAttributes {
                from,
                to,
                unexpected,
            });
        }
        if mask.contains(AttrMask::CUR_STATE) && attr.cur_qp_state != from {
            return Err(ModifyError::CurStateMismatch {
                claimed: attr.cur_qp_state,
                actual: from,
            });
        }
        let check = |bit: AttrMask, ok: bool, why: &'static str| {
            if mask.contains(bit) && !ok {
                Err(ModifyError::InvalidValue { attr: bit, why })
            } else {
                Ok(())
            }
        };
        check(
            AttrMask::TIMEOUT,
            attr.timeout <= 31,
            "timeout is 5 bits (0..=31)",
        )?;
        check(
            AttrMask::RETRY_CNT,
            attr.retry_cnt <= 7,
            "retry_cnt is 3 bits (0..=7)",
        )?;
        check(
            AttrMask::RNR_RETRY,
            attr.rnr_retry <= 7,
            "rnr_retry is 3 bits (0..=7)",
        )?;
        check(
            AttrMask::MIN_RNR_TIMER,
            attr.min_rnr_timer <= 31,
            "min_rnr_timer is 5 bits (0..=31)",
        )?;
        check(
            AttrMask::MAX_QP_RD_ATOMIC,
            attr.max_rd_atomic <= 16,
            "max_rd_atomic is at most 16",
        )?;
        check(
            AttrMask::PKEY_INDEX,
            self.cfg
                .pkey_table
                .get(attr.pkey_index as usize)
                .is_some_and(|&k| k & 0x7FFF != 0),
            "pkey_index names no valid entry of the P_Key table",
        )?;
        check(
            AttrMask::MAX_DEST_RD_ATOMIC,
            attr.max_dest_rd_atomic <= 16,
            "max_dest_rd_atomic is at most 16",
        )?;

        // Apply.
        let a = &mut self.attr;
        if mask.contains(AttrMask::ACCESS_FLAGS) {
            a.qp_access_flags = attr.qp_access_flags;
        }
        if mask.contains(AttrMask::PKEY_INDEX) {
            a.pkey_index = attr.pkey_index;
        }
        if mask.contains(AttrMask::PORT) {
            a.port_num = attr.port_num;
        }
        if mask.contains(AttrMask::QKEY) {
            a.qkey = attr.qkey;
        }
        if mask.contains(AttrMask::AV) {
            a.ah = attr.ah;
        }
        if mask.contains(AttrMask::PATH_MTU) {
            a.path_mtu = attr.path_mtu;
        }
        if mask.contains(AttrMask::TIMEOUT) {
            a.timeout = attr.timeout;
        }
        if mask.contains(AttrMask::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt;
        }
        if mask.contains(AttrMask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry;
        }
        if mask.contains(AttrMask::RQ_PSN) {
            a.rq_psn = attr.rq_psn & Psn::MASK;
        }
        if mask.contains(AttrMask::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = attr.max_rd_atomic;
        }
        if mask.contains(AttrMask::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer;
        }
        if mask.contains(AttrMask::SQ_PSN) {
            a.sq_psn = attr.sq_psn & Psn::MASK;
        }
        if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if mask.contains(AttrMask::DEST_QPN) {
            a.dest_qp_num = attr.dest_qp_num;
        }
        a.qp_state = to;
        a.cur_qp_state = to;
        self.pmtu = self.attr.path_mtu.bytes();

        match to {
            QpState::Reset => self.reset(),
            QpState::Err => self.enter_error(None),
            QpState::Rtr if from == QpState::Init => {
                self.epsn = Psn::new(self.attr.rq_psn);
                self.msn = Msn::new(0);
                self.nak_sent = false;
                self.in_msg = InMsg::None;
                self.resources = vec![RdRes::Free; self.attr.max_dest_rd_atomic.max(1) as usize];
                self.res_next = 0;
                self.state = to;
            }
            QpState::Rts if from == QpState::Rtr => {
                self.next_psn = Psn::new(self.attr.sq_psn);
                self.comp_psn = self.next_psn;
                self.retx_until = self.next_psn;
                self.retries_left = self.attr.retry_cnt;
                self.rnr_left = self.attr.rnr_retry;
                self.state = to;
            }
            _ => {
                if mask.contains(AttrMask::MAX_DEST_RD_ATOMIC)
                    && self.resources.len() != self.attr.max_dest_rd_atomic.max(1) as usize
                {
                    self.resources =
                        vec![RdRes::Free; self.attr.max_dest_rd_atomic.max(1) as usize];
                    self.res_next = 0;
                }
                self.state = to;
                self.check_drained();
            }
        }
        Ok(())
    }

    fn reset(&mut self) {
        let cfg = self.cfg;
        let attr = self.attr;
        *self = Qp::new(cfg);
        self.attr = QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            ..attr
        };
        self.pmtu = attr.path_mtu.bytes();
    }

    // ------------------------------------------------------------------
    // Posting
    // ------------------------------------------------------------------

    /// `ibv_post_send`. Refused below RTS (and in RESET/INIT/RTR); in ERR
    /// the WR completes at once with WR_FLUSH_ERR.
    pub fn post_send(&mut self, wr: SendWr) -> Result<(), PostError> {
        match self.state {
            QpState::Rts | QpState::Sqd => {}
            QpState::Err | QpState::Sqe => {
                self.push_flush(wr.wr_id, wr.op.wc_opcode(), false);
                return Ok(());
            }
            s => return Err(PostError::BadState(s)),
        }
        if self.sq.len() >= self.cfg.max_send_wr as usize {
            return Err(PostError::QueueFull(self.sq.len() as u32));
        }
        let t = self.cfg.qp_type;
        let ok = match t {
            QpType::Rc => true,
            QpType::Uc => matches!(
                wr.op,
                SendOp::Send
                    | SendOp::SendWithImm(_)
                    | SendOp::Write { .. }
                    | SendOp::WriteWithImm { .. }
            ),
            QpType::Ud => matches!(wr.op, SendOp::Send | SendOp::SendWithImm(_)),
        };
        if !ok {
            return Err(PostError::Unsupported(t));
        }
        let total = wr.sges.total_len();
        if total > MAX_MESSAGE {
            return Err(PostError::Invalid("message longer than 2^31 bytes"));
        }
        if wr.op.is_atomic() && wr.sges.as_slice().first().map_or(true, |s| s.length < 8) {
            return Err(PostError::Invalid("an atomic needs an 8-byte local SGE"));
        }
        if t == QpType::Ud {
            if wr.ud.is_none() {
                return Err(PostError::Invalid("a UD send needs a destination"));
            }
            if total > self.pmtu as u64 {
                return Err(PostError::Invalid("a UD message must fit in one path MTU"));
            }
        }
        let len = if wr.op.is_atomic() { 8 } else { total as u32 };
        let npsn = match wr.op {
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => 1,
            _ => len.div_ceil(self.pmtu).max(1),
        };
        self.sq.push_back(SendWqe {
            wr,
            len,
            first_psn: Psn::new(0),
            npsn,
            started: false,
        });
        Ok(())
    }

    /// `ibv_post_recv`. Refused in RESET; in ERR the WR completes at once
    /// with WR_FLUSH_ERR.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), PostError> {
        match self.state {
            QpState::Reset => return Err(PostError::BadState(QpState::Reset)),
            QpState::Err => {
                self.push_flush(wr.wr_id, WcOpcode::Recv, true);
                return Ok(());
            }
            _ => {}
        }
        if self.rq.len() >= self.cfg.max_recv_wr as usize {
            return Err(PostError::QueueFull(self.rq.len() as u32));
        }
        self.rq.push_back(wr);
        Ok(())
    }

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

    /// The earliest time [`handle_timeout`](Self::handle_timeout) must run:
    /// the Local ACK timer, the RNR wait, the congestion control timers,
    /// and the pacing deadline when pacing is what holds a packet back.
    /// `None` when nothing is pending: an idle QP costs nothing.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = min_deadline(self.rto_deadline, self.rnr_deadline);
        if let AnyCc::Dcqcn(_) = self.cc {
            t = min_deadline(t, self.cc.poll_timeout());
        }
        if self.pacing_blocked {
            t = min_deadline(t, Some(self.next_send_time));
        }
        t
    }

    /// Run the timers due at `now`: congestion control, the end of an RNR
    /// wait, the Local ACK timeout (retransmit from `comp_psn`, or
    /// RETRY_EXC_ERR when `retry_cnt` is used up).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.cc.poll_timeout().is_some_and(|t| t <= now) {
            self.cc.handle_timeout(now);
        }
        if self.pacing_blocked && self.next_send_time <= now {
            self.pacing_blocked = false;
        }
        if let Some(t) = self.rnr_deadline {
            if t <= now {
                self.rnr_deadline = None;
                // The RNR wait had priority; restart the ACK timer now.
                if self.has_outstanding() {
                    self.rto_deadline = local_ack_timeout(self.attr.timeout).map(|d| now + d);
                }
            } else if self.rto_deadline.is_some_and(|r| r <= now) {
                // An RNR wait takes priority over the retransmission timer.
                self.rto_deadline = None;
            }
        }
        if let Some(t) = self.rto_deadline {
            if t <= now && self.state_runs_requester() {
                self.rto_deadline = None;
                if self.has_outstanding() {
                    self.stats.timeouts += 1;
                    if self.take_retry() {
                        self.rewind(self.comp_psn);
                        self.rto_deadline = local_ack_timeout(self.attr.timeout).map(|d| now + d);
                    } else {
                        self.fail_head(WcStatus::RetryExcErr);
                    }
                }
            }
        }
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
        if self.cnp_pending {
            self.cnp_pending = false;
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
        if !self.state_runs_requester() || self.sq.len() <= self.send_idx {
            return false;
        }
        if self.rnr_deadline.is_some() {
            return false;
        }
        if now < self.next_send_time && self.cc.rate().is_some() {
            self.pacing_blocked = true;
            return false;
        }
        self.poll_request(now, mem, out)
    }

    fn cnp(&self) -> Transmit {
        let mut h = headers(BthRepr {
            opcode: Opcode::Cnp,
            solicited: false,
            migreq: false,
            pad_count: 0,
            tver: 0,
            pkey: 0xFFFF,
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

    fn paced(&mut self, now: Instant, h: &RoceHeaders, plen: u32) {
        if let AnyCc::None(_) = self.cc {
            return;
        }
        let bytes = (h.header_len() as u32 + plen + h.bth.pad_count as u32 + WIRE_OVERHEAD) as u64;
        self.cc.on_transmit(now, bytes);
        if let Some(rate) = self.cc.rate() {
            let start = self.next_send_time.max(now);
            self.next_send_time = start + wire_time(rate, bytes);
        }
        self.pacing_blocked = false;
    }

    fn poll_response<M: Memory + ?Sized>(&mut self, now: Instant, mem: &M) -> Option<Transmit> {
        let item = *self.resp_q.front()?;
        match item {
            RespItem::Ack { psn, syndrome, msn } => {
                self.resp_q.pop_front();
                let mut h = headers(self.bth(Opcode::RcAcknowledge, psn, false, false, 0));
                h.aeth = Some(AethRepr { syndrome, msn });
                self.stats.tx_responses += 1;
                Some(Transmit {
                    dest: self.attr.ah,
                    headers: h,
                    ecn: self.cfg.ecn,
                    payload: PayloadDesc::EMPTY,
                })
            }
            RespItem::AtomicAck { psn, orig, msn, .. } => {
                self.resp_q.pop_front();
                let mut h = headers(self.bth(Opcode::RcAtomicAcknowledge, psn, false, false, 0));
                h.aeth = Some(AethRepr {
                    syndrome: AethSyndrome::Ack { credits: 31 },
                    msn,
                });
                h.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
                self.stats.tx_responses += 1;
                Some(Transmit {
                    dest: self.attr.ah,
                    headers: h,
                    ecn: self.cfg.ecn,
                    payload: PayloadDesc::EMPTY,
                })
            }
            RespItem::Read {
                rkey,
                va,
                remaining,
                psn,
                fresh,
                started,
                msn,
                ..
            } => {
                // In ERR only responses owed before a fatal request are
                // still queued (see `responder_fatal`): they go out.
                if !matches!(
                    self.state,
                    QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err
                ) {
                    self.resp_q.pop_front();
                    return None;
                }
                if now < self.next_send_time && self.cc.rate().is_some() {
                    self.pacing_blocked = true;
                    return None;
                }
                let plen = remaining.min(self.pmtu);
                // rxe looks the R_Key up again for every response packet.
                if plen > 0
                    && mem
                        .check(MemKey::Remote(rkey), va, plen as u64, Access::REMOTE_READ)
                        .is_err()
                {
                    self.resp_q.clear();
                    self.count_fatal_nak(NakCode::RemoteAccessError);
                    self.resp_q.push_back(RespItem::Ack {
                        psn,
                        syndrome: AethSyndrome::Nak(NakCode::RemoteAccessError),
                        msn,
                    });
                    self.enter_error(Some(WcStatus::RemAccessErr));
                    return self.poll_response(now, mem);
                }
                let first = !started;
                let last = remaining <= self.pmtu;
                let opcode = match (fresh && first, last) {
                    (true, true) => Opcode::RcReadResponseOnly,
                    (true, false) => Opcode::RcReadResponseFirst,
                    (false, true) => Opcode::RcReadResponseLast,
                    (false, false) => Opcode::RcReadResponseMiddle,
                };
                let mut h = headers(self.bth(opcode, psn, false, false, plen));
                if opcode != Opcode::RcReadResponseMiddle {
                    h.aeth = Some(AethRepr {
                        syndrome: AethSyndrome::Ack { credits: 31 },
                        msn,
                    });
                }
                let mut payload = PayloadDesc::EMPTY;
                payload.remote = true;
                payload.push(Piece {
                    key: rkey.value(),
                    addr: va,
                    len: plen,
                });
                if last {
                    self.resp_q.pop_front();
                } else if let Some(RespItem::Read {
                    va: v,
                    remaining: r,
                    psn: p,
                    started: s,
                    ..
                }) = self.resp_q.front_mut()
                {
                    *v += plen as u64;
                    *r -= plen;
                    *p = p.next();
                    *s = true;
                }
                self.paced(now, &h, plen);
                self.stats.tx_responses += 1;
                Some(Transmit {
                    dest: self.attr.ah,
                    headers: h,
                    ecn: self.cfg.ecn,
                    payload,
                })
            }
        }
    }

    // Inlined into poll_transmit so that the Transmit is built in place
    // rather than copied between return slots (a measurable cost per packet).
    #[inline(always)]
    fn poll_request<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        mem: &M,
        out: &mut Transmit,
    ) -> bool {
        let qp_type = self.cfg.qp_type;
        let idx = self.send_idx;
        // Read the few fields needed instead of copying the WQE.
        let (started, flags, op) = {
            let w = &self.sq[idx];
            (w.started, w.wr.flags, w.wr.op)
        };
        if !started {
            if self.state == QpState::Sqd {
                return false;
            }
            if flags.contains(SendFlags::FENCE) && self.rd_atomic_inflight > 0 {
                return false;
            }
            if op.is_read_or_atomic()
                && self.rd_atomic_inflight >= self.attr.max_rd_atomic.max(1) as u32
            {
                return false;
            }
            // Local key checks (LOC_PROT_ERR).
            let need = if op.is_read_or_atomic() {
                Access::LOCAL_WRITE
            } else {
                Access::NONE
            };
            let bad = self.sq[idx].wr.sges.as_slice().iter().any(|s| {
                mem.check(MemKey::Local(s.lkey), s.addr, s.length as u64, need)
                    .is_err()
            });
            if bad {
                self.fail_wqe_at(idx, WcStatus::LocProtErr);
                return false;
            }
        }
        let psn = if started {
            self.sq[idx].first_psn.add(self.send_pkt)
        } else {
            self.next_psn
        };
        if qp_type == QpType::Rc
            && psn.distance_from(self.comp_psn) >= self.cfg.max_unacked_psns.max(1)
            && !psn.is_before(self.retx_until)
        {
            return false;
        }
        if !started {
            let wq = &mut self.sq[idx];
            wq.started = true;
            wq.first_psn = self.next_psn;
            self.next_psn = self.next_psn.add(wq.npsn);
            if wq.wr.op.is_read_or_atomic() {
                self.rd_atomic_inflight += 1;
            }
            self.send_pkt = 0;
        }
        let (w_len, w_npsn, w_ud) = {
            let w = &self.sq[idx];
            (w.len, w.npsn, w.wr.ud)
        };
        let k = self.send_pkt;
        let retransmit = psn.is_before(self.retx_until);
        out.payload.clear();
        let mut plen = 0;
        let msg_done;
        match op {
            SendOp::Read { remote_addr, rkey } => {
                let off = k as u64 * self.pmtu as u64;
                let len = (w_len as u64).saturating_sub(off) as u32;
                out.headers = headers(self.bth(Opcode::RcReadRequest, psn, true, false, 0));
                out.headers.reth = Some(RethRepr {
                    va: remote_addr.wrapping_add(off),
                    rkey,
                    dma_len: len,
                });
                msg_done = true;
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                out.headers = headers(self.bth(Opcode::RcCompareSwap, psn, true, false, 0));
                out.headers.atomic_eth = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey,
                    swap_add: swap,
                    compare,
                });
                msg_done = true;
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                out.headers = headers(self.bth(Opcode::RcFetchAdd, psn, true, false, 0));
                out.headers.atomic_eth = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey,
                    swap_add: add,
                    compare: 0,
                });
                msg_done = true;
            }
            op => {
                let n = w_npsn;
                let off = k * self.pmtu;
                plen = (w_len - off.min(w_len)).min(self.pmtu);
                let first = k == 0;
                let last = k + 1 == n;
                let opcode = data_opcode(qp_type, op, first, last);
                let se = last
                    && flags.contains(SendFlags::SOLICITED)
                    && !matches!(op, SendOp::Write { .. });
                let ack_req = qp_type == QpType::Rc
                    && (last
                        || (self.cfg.ack_req_every > 0
                            && self.pkts_since_ackreq + 1 >= self.cfg.ack_req_every));
                out.headers = headers(self.bth(opcode, psn, ack_req, se, plen));
                if opcode.has_reth() {
                    let (va, rkey) = match op {
                        SendOp::Write { remote_addr, rkey }
                        | SendOp::WriteWithImm {
                            remote_addr, rkey, ..
                        } => (remote_addr, rkey),
                        _ => (0, Rkey::new(0)),
                    };
                    out.headers.reth = Some(RethRepr {
                        va,
                        rkey,
                        dma_len: w_len,
                    });
                }
                if opcode.has_immdt() {
                    out.headers.immdt = Some(match op {
                        SendOp::SendWithImm(i) => i,
                        SendOp::WriteWithImm { imm, .. } => imm,
                        _ => 0,
                    });
                }
                if opcode.has_ieth() {
                    if let SendOp::SendWithInv(k) = op {
                        out.headers.ieth = Some(k);
                    }
                }
                if let (true, Some(ud)) = (qp_type == QpType::Ud, w_ud) {
                    out.headers.bth.dest_qp = ud.remote_qpn;
                    out.headers.deth = Some(DethRepr {
                        qkey: ud.remote_qkey,
                        src_qp: self.cfg.qpn,
                    });
                }
                gather(&mut out.payload, self.sq[idx].wr.sges.as_slice(), off, plen);
                msg_done = last;
            }
        }
        if out.headers.bth.ack_req {
            self.pkts_since_ackreq = 0;
        } else {
            self.pkts_since_ackreq += 1;
        }
        // Advance the cursor.
        if msg_done {
            self.send_idx += 1;
            self.send_pkt = 0;
        } else {
            self.send_pkt += 1;
        }
        if retransmit {
            self.stats.tx_retransmits += 1;
        } else {
            self.stats.tx_requests += 1;
        }
        self.paced(now, &out.headers, plen);
        let dest = match (qp_type, w_ud) {
            (QpType::Ud, Some(ud)) => ud.ah,
            _ => self.attr.ah,
        };
        match qp_type {
            QpType::Rc => {
                if self.rto_deadline.is_none() && self.rnr_deadline.is_none() {
                    self.rto_deadline = local_ack_timeout(self.attr.timeout).map(|d| now + d);
                }
            }
            QpType::Uc | QpType::Ud => {
                if msg_done {
                    // Unreliable: complete when the last packet leaves.
                    let wqe = self.pop_head().expect("the WQE just sent is queued");
                    self.comp_psn = self.next_psn;
                    self.retx_until = self.next_psn;
                    self.complete_send(&wqe, WcStatus::Success);
                    self.check_drained();
                }
            }
        }
        out.dest = dest;
        out.ecn = self.cfg.ecn;
        true
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
            self.stats.rx_cnps += 1;
            if matches!(self.state, QpState::Rts | QpState::Sqd) {
                self.cc.on_cnp(now);
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
        // Admission, as a NIC does it (ROCEV2.md §7 item 2): a connected QP
        // hears only its peer, and everyone must be in its partition.
        // Failures are silent drops, counted by cause.
        if self.cfg.qp_type != QpType::Ud && pkt.src != self.attr.ah {
            self.stats.rx_bad_source += 1;
            self.stats.rx_dropped += 1;
            return;
        }
        if !pkey_match(pkt.headers.bth.pkey, self.pkey()) {
            self.stats.rx_bad_pkey += 1;
            self.stats.rx_dropped += 1;
            return;
        }
        if pkt.ecn == Ecn::Ce {
            self.stats.rx_ce += 1;
            if let Some(gap) = self.cfg.min_time_between_cnps {
                if self.cfg.qp_type != QpType::Ud && self.last_cnp.map_or(true, |t| now >= t + gap)
                {
                    self.cnp_pending = true;
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

    // ---------------------------- completer ---------------------------

    fn rc_response<M: Memory + ?Sized>(&mut self, now: Instant, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let p = h.bth.psn;
        let op = h.bth.opcode;
        // Responses for PSNs never sent are bogus.
        if !self.has_outstanding() || !p.is_before(self.next_psn) {
            self.stats.stale_responses += 1;
            return;
        }
        let head_first = self.sq[0].first_psn;
        match op {
            Opcode::RcAcknowledge => {
                let Some(aeth) = h.aeth else {
                    self.stats.rx_dropped += 1;
                    return;
                };
                match aeth.syndrome {
                    AethSyndrome::Ack { credits } => {
                        self.peer_credits = credits_from_code(credits);
                        if p.is_before(self.comp_psn) {
                            self.stats.stale_responses += 1;
                            return;
                        }
                        match self.ack_through(p) {
                            AckOutcome::Done { progress } => {
                                if progress {
                                    self.on_progress(now);
                                }
                            }
                            AckOutcome::ImpliedNak { progress } => {
                                if progress {
                                    self.on_progress(now);
                                }
                                self.implied_retry(now);
                            }
                        }
                    }
                    AethSyndrome::RnrNak { timer } => {
                        self.stats.rx_naks += 1;
                        self.stats.rx_rnr_naks += 1;
                        if p.is_before(self.comp_psn) {
                            self.stats.stale_responses += 1;
                            return;
                        }
                        if p != self.comp_psn {
                            if let AckOutcome::ImpliedNak { progress } = self.ack_through(p.sub(1))
                            {
                                if progress {
                                    self.on_progress(now);
                                }
                                self.retry_or_fail(now);
                                return;
                            }
                        }
                        if !self.has_outstanding() {
                            return;
                        }
                        if self.rnr_left == 0 {
                            self.fail_head(WcStatus::RnrRetryExcErr);
                            return;
                        }
                        if self.rnr_left != 7 {
                            self.rnr_left -= 1;
                        }
                        self.stats.retries += 1;
                        self.rewind(self.comp_psn);
                        self.rnr_deadline = Some(now + rnr_timer(timer));
                        self.rto_deadline = None;
                    }
                    AethSyndrome::Nak(code) => {
                        self.stats.rx_naks += 1;
                        let go_back0 = self.cfg.retransmit == RetransmitMode::GoBack0;
                        let lower = if go_back0 { head_first } else { self.comp_psn };
                        if p.is_before(lower) {
                            self.stats.stale_responses += 1;
                            return;
                        }
                        if p.is_after(self.comp_psn) {
                            if let AckOutcome::ImpliedNak { progress } = self.ack_through(p.sub(1))
                            {
                                if progress {
                                    self.on_progress(now);
                                }
                                self.retry_or_fail(now);
                                return;
                            }
                            self.on_progress(now);
                        }
                        if !self.has_outstanding() {
                            return;
                        }
                        match code {
                            NakCode::PsnSequenceError => self.retry_or_fail(now),
                            NakCode::InvalidRequest => self.fail_head(WcStatus::RemInvReqErr),
                            NakCode::RemoteAccessError => self.fail_head(WcStatus::RemAccessErr),
                            NakCode::RemoteOperationalError => self.fail_head(WcStatus::RemOpErr),
                            NakCode::InvalidRdRequest => self.fail_head(WcStatus::RemInvRdReqErr),
                            NakCode::Reserved(_) => self.fail_head(WcStatus::BadRespErr),
                        }
                    }
                    AethSyndrome::Reserved(_) => {
                        self.stats.rx_dropped += 1;
                    }
                }
            }
            Opcode::RcReadResponseFirst
            | Opcode::RcReadResponseMiddle
            | Opcode::RcReadResponseLast
            | Opcode::RcReadResponseOnly => {
                if p.is_before(self.comp_psn) {
                    self.stats.stale_responses += 1;
                    return;
                }
                // Responses come in order: earlier SENDs and WRITEs are done.
                let mut progress = false;
                loop {
                    let Some(w) = self.sq.front() else { return };
                    if !w.started {
                        self.stats.stale_responses += 1;
                        return;
                    }
                    if matches!(w.wr.op, SendOp::Read { .. }) && w.contains(p) {
                        break;
                    }
                    if !w.wr.op.is_read_or_atomic() && w.last_psn().is_before(p) {
                        let w = self.pop_head().expect("front exists");
                        self.comp_psn = w.last_psn().next();
                        self.complete_send(&w, WcStatus::Success);
                        progress = true;
                        continue;
                    }
                    // A READ or atomic passed over: implied NAK.
                    if progress {
                        self.on_progress(now);
                    }
                    self.implied_retry(now);
                    return;
                }
                if progress {
                    self.on_progress(now);
                }
                if p != self.comp_psn {
                    // A gap in the responses: retry from comp_psn.
                    self.implied_retry(now);
                    return;
                }
                let w = self.sq[0];
                let k = p.distance_from(w.first_psn);
                let off = k * self.pmtu;
                let expect = (w.len - off.min(w.len)).min(self.pmtu);
                let last = p == w.last_psn();
                let shape_ok = if last {
                    matches!(op, Opcode::RcReadResponseLast | Opcode::RcReadResponseOnly)
                } else {
                    matches!(
                        op,
                        Opcode::RcReadResponseFirst | Opcode::RcReadResponseMiddle
                    )
                };
                if pkt.payload.len() != expect || !shape_ok {
                    self.stats.rx_dropped += 1;
                    return;
                }
                if scatter(mem, w.wr.sges.as_slice(), off as u64, pkt.payload).is_err() {
                    self.fail_head(WcStatus::LocProtErr);
                    return;
                }
                self.comp_psn = p.next();
                self.on_progress(now);
                if last {
                    let w = self.pop_head().expect("front exists");
                    self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
                    self.complete_send(&w, WcStatus::Success);
                    self.after_completion(now);
                }
            }
            Opcode::RcAtomicAcknowledge => {
                if p.is_before(self.comp_psn) {
                    self.stats.stale_responses += 1;
                    return;
                }
                if p != self.comp_psn {
                    if let AckOutcome::ImpliedNak { progress } = self.ack_through(p.sub(1)) {
                        if progress {
                            self.on_progress(now);
                        }
                        self.implied_retry(now);
                        return;
                    }
                }
                let Some(w) = self.sq.front().copied() else {
                    return;
                };
                let Some(ack) = h.atomic_ack_eth else {
                    self.stats.rx_dropped += 1;
                    return;
                };
                if !w.wr.op.is_atomic() || w.first_psn != p || !w.started {
                    self.stats.stale_responses += 1;
                    return;
                }
                let sge = w.wr.sges.as_slice()[0];
                let key = MemKey::Local(sge.lkey);
                if mem.check(key, sge.addr, 8, Access::LOCAL_WRITE).is_err()
                    || mem.write_u64(key, sge.addr, ack.orig).is_err()
                {
                    self.fail_head(WcStatus::LocProtErr);
                    return;
                }
                self.pop_head();
                self.comp_psn = p.next();
                self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
                self.complete_send(&w, WcStatus::Success);
                self.on_progress(now);
                self.after_completion(now);
            }
            _ => self.stats.rx_dropped += 1,
        }
    }

    /// Acknowledge request PSNs up to and including `last`.
    fn ack_through(&mut self, last: Psn) -> AckOutcome {
        let mut progress = false;
        while let Some(w) = self.sq.front() {
            if !w.started || last.is_before(w.first_psn) {
                break;
            }
            if w.wr.op.is_read_or_atomic() {
                return AckOutcome::ImpliedNak { progress };
            }
            if w.last_psn().is_after(last) {
                // Partially acknowledged SEND or WRITE.
                if last.next().is_after(self.comp_psn) {
                    self.comp_psn = last.next();
                    progress = true;
                }
                break;
            }
            let w = self.pop_head().expect("front exists");
            self.comp_psn = w.last_psn().next();
            self.complete_send(&w, WcStatus::Success);
            progress = true;
        }
        if progress {
            self.check_drained();
        }
        AckOutcome::Done { progress }
    }

    /// Remove the completed head WQE, keeping the send cursor on the same
    /// WQE (or on the new head, from its first packet, when the cursor was
    /// on the removed one).
    fn pop_head(&mut self) -> Option<SendWqe> {
        let w = self.sq.pop_front()?;
        if self.send_idx == 0 {
            self.send_pkt = 0;
        } else {
            self.send_idx -= 1;
        }
        Some(w)
    }

    fn on_progress(&mut self, now: Instant) {
        self.retries_left = self.attr.retry_cnt;
        self.rnr_left = self.attr.rnr_retry;
        self.gap_retried = false;
        self.rto_deadline = if self.has_outstanding() && self.rnr_deadline.is_none() {
            local_ack_timeout(self.attr.timeout).map(|d| now + d)
        } else {
            None
        };
        self.check_drained();
    }

    fn after_completion(&mut self, now: Instant) {
        if !self.has_outstanding() {
            self.rto_deadline = None;
        } else if self.rto_deadline.is_none() && self.rnr_deadline.is_none() {
            self.rto_deadline = local_ack_timeout(self.attr.timeout).map(|d| now + d);
        }
        self.check_drained();
    }

    /// Use up one retry; false when none is left.
    fn take_retry(&mut self) -> bool {
        if self.cfg.rxe_retry_cnt7_infinite && self.attr.retry_cnt == 7 {
            return true;
        }
        if self.retries_left == 0 {
            return false;
        }
        self.retries_left -= 1;
        true
    }

    /// An implied NAK or a gap in READ responses: retry once, then ignore
    /// further out-of-order responses until one makes progress (rxe's
    /// `started_retry`), so that the tail of a stream that was already in
    /// flight does not use up `retry_cnt`.
    fn implied_retry(&mut self, now: Instant) {
        if self.gap_retried {
            self.stats.stale_responses += 1;
            return;
        }
        self.gap_retried = true;
        self.retry_or_fail(now);
    }

    fn retry_or_fail(&mut self, now: Instant) {
        if !self.has_outstanding() {
            return;
        }
        if self.take_retry() {
            self.stats.retries += 1;
            self.rewind(self.comp_psn);
            self.rto_deadline = local_ack_timeout(self.attr.timeout).map(|d| now + d);
        } else {
            self.fail_head(WcStatus::RetryExcErr);
        }
    }

    /// Restart sending at the first incomplete WQE: from `from` (go-back-N)
    /// or from the WQE's first packet (go-back-0).
    fn rewind(&mut self, from: Psn) {
        let Some(w) = self.sq.front() else { return };
        if !w.started {
            return;
        }
        if self.next_psn.is_after(self.retx_until) {
            self.retx_until = self.next_psn;
        }
        self.send_idx = 0;
        self.pkts_since_ackreq = 0;
        match self.cfg.retransmit {
            RetransmitMode::GoBackN => {
                let k = from.distance_from(w.first_psn);
                self.send_pkt = if k < w.npsn { k } else { 0 };
            }
            RetransmitMode::GoBack0 => {
                self.send_pkt = 0;
                self.comp_psn = w.first_psn;
            }
        }
    }

    /// Complete the head WQE with an error, move to ERR and flush.
    fn fail_head(&mut self, status: WcStatus) {
        self.fail_wqe_at(0, status);
    }

    fn fail_wqe_at(&mut self, idx: usize, status: WcStatus) {
        // Earlier WQEs (idx > 0) are still waiting for acknowledgement; the
        // QP goes to ERR, so they flush.
        for _ in 0..idx {
            if let Some(w) = self.sq.pop_front() {
                self.push_flush(w.wr.wr_id, w.wr.op.wc_opcode(), false);
            }
        }
        if let Some(w) = self.sq.pop_front() {
            self.complete_send_forced(&w, status);
        }
        self.enter_error(Some(status));
    }

    fn enter_error(&mut self, cause: Option<WcStatus>) {
        self.enter_error_keeping_responses(cause);
        // Keep only NAKs (they tell the peer why) and the ACKs of atomics
        // that ran (a peer must learn what its atomic did).
        self.resp_q.retain(|i| {
            matches!(
                i,
                RespItem::Ack {
                    syndrome: AethSyndrome::Nak(_),
                    ..
                } | RespItem::AtomicAck { new: true, .. }
            )
        });
    }

    /// ERR: flush both queues, stop the requester; the responses queued
    /// stay queued.
    fn enter_error_keeping_responses(&mut self, cause: Option<WcStatus>) {
        self.state = QpState::Err;
        self.attr.qp_state = QpState::Err;
        while let Some(w) = self.sq.pop_front() {
            self.push_flush(w.wr.wr_id, w.wr.op.wc_opcode(), false);
        }
        while let Some(r) = self.rq.pop_front() {
            self.push_flush(r.wr_id, WcOpcode::Recv, true);
        }
        self.send_idx = 0;
        self.send_pkt = 0;
        self.rto_deadline = None;
        self.rnr_deadline = None;
        self.pacing_blocked = false;
        self.rd_atomic_inflight = 0;
        if let Some(s) = cause {
            self.events.push_back(QpEvent::Error(s));
        }
    }

    fn check_drained(&mut self) {
        if self.state == QpState::Sqd
            && !self.has_outstanding()
            && !self.events.contains(&QpEvent::SqDrained)
        {
            self.events.push_back(QpEvent::SqDrained);
        }
    }

    fn push_flush(&mut self, wr_id: u64, opcode: WcOpcode, is_recv: bool) {
        self.completions.push_back(Completion {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            is_recv,
            qp_num: self.cfg.qpn,
            byte_len: 0,
            imm_data: None,
            invalidated_rkey: None,
            src_qp: None,
            grh: false,
            solicited: false,
        });
    }

    fn complete_send(&mut self, w: &SendWqe, status: WcStatus) {
        if status == WcStatus::Success
            && !self.cfg.sq_sig_all
            && !w.wr.flags.contains(SendFlags::SIGNALED)
        {
            return;
        }
        self.complete_send_forced(w, status);
    }

    fn complete_send_forced(&mut self, w: &SendWqe, status: WcStatus) {
        self.completions.push_back(Completion {
            wr_id: w.wr.wr_id,
            status,
            opcode: w.wr.op.wc_opcode(),
            is_recv: false,
            qp_num: self.cfg.qpn,
            byte_len: w.len,
            imm_data: None,
            invalidated_rkey: None,
            src_qp: None,
            grh: false,
            solicited: false,
        });
    }

    // ---------------------------- responder ---------------------------

    fn push_ack(&mut self, psn: Psn) {
        let credit_now = self.credit_code();
        if let Some(RespItem::Ack {
            psn: p,
            syndrome: AethSyndrome::Ack { credits },
            msn,
        }) = self.resp_q.back_mut()
        {
            // Coalesce: a later ACK covers the earlier one.
            if !psn.is_before(*p) {
                *p = psn;
                *msn = self.msn;
                *credits = credit_now;
            }
            return;
        }
        let credits = self.credit_code();
        self.resp_q.push_back(RespItem::Ack {
            psn,
            syndrome: AethSyndrome::Ack { credits },
            msn: self.msn,
        });
    }

    fn credit_code(&self) -> u8 {
        if self.cfg.advertise_credits {
            credit_code(self.rq.len() as u32)
        } else {
            31
        }
    }

    fn push_nak(&mut self, psn: Psn, syndrome: AethSyndrome) {
        self.resp_q.push_back(RespItem::Ack {
            psn,
            syndrome,
            msn: self.msn,
        });
    }

    /// A Class C/A error: NAK and move to ERR. What earlier requests are
    /// owed (READ responses, atomic ACKs, ACKs) is still sent, before the
    /// NAK: the peer completes them, then fails this one.
    fn responder_fatal(&mut self, psn: Psn, code: NakCode, local: Option<(u64, WcStatus)>) {
        self.count_fatal_nak(code);
        self.push_nak(psn, AethSyndrome::Nak(code));
        let owed = std::mem::take(&mut self.resp_q);
        self.responder_error(local);
        self.resp_q = owed;
        let status = match code {
            NakCode::RemoteAccessError => WcStatus::RemAccessErr,
            NakCode::RemoteOperationalError => WcStatus::RemOpErr,
            _ => WcStatus::RemInvReqErr,
        };
        self.enter_error_keeping_responses(Some(status));
    }

    fn count_fatal_nak(&mut self, code: NakCode) {
        match code {
            NakCode::RemoteAccessError => self.stats.tx_nak_remote_access += 1,
            NakCode::RemoteOperationalError => self.stats.tx_nak_remote_op += 1,
            _ => self.stats.tx_nak_invalid_request += 1,
        }
    }

    /// The receive WQE in use, if any, completes with `local`'s status.
    fn responder_error(&mut self, local: Option<(u64, WcStatus)>) {
        if let Some((wr_id, status)) = local {
            // The receive WQE in use completes with the error.
            self.rq.pop_front();
            self.completions.push_back(Completion {
                wr_id,
                status,
                opcode: WcOpcode::Recv,
                is_recv: true,
                qp_num: self.cfg.qpn,
                byte_len: 0,
                imm_data: None,
                invalidated_rkey: None,
                src_qp: None,
                grh: false,
                solicited: false,
            });
        }
    }

    fn rc_request<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        let d = psn.diff(self.epsn);
        if d > 0 {
            // Out of sequence: one NAK per gap.
            self.stats.rx_dropped += 1;
            if !self.nak_sent {
                self.nak_sent = true;
                self.stats.tx_nak_seq += 1;
                if self.cfg.retransmit == RetransmitMode::GoBack0 && self.in_msg != InMsg::None {
                    // The early NICs dropped the partial message and asked
                    // for it again from its first packet.
                    self.epsn = self.msg_start;
                    self.in_msg = InMsg::None;
                }
                let e = self.epsn;
                self.push_nak(e, AethSyndrome::Nak(NakCode::PsnSequenceError));
            }
            return;
        }
        if d < 0 {
            self.stats.rx_duplicates += 1;
            self.rc_duplicate(pkt, mem);
            return;
        }
        self.nak_sent = false;
        let kind = op_kind(op);
        // 2. Opcode sequence.
        let seq_ok = match self.in_msg {
            InMsg::None => op.is_first() || op.is_only(),
            InMsg::Send { .. } => kind == OpKind::Send && (op.is_middle() || op.is_last()),
            InMsg::Write { .. } => kind == OpKind::Write && (op.is_middle() || op.is_last()),
        };
        if !seq_ok || kind == OpKind::Other {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        // 3. Operation allowed on the QP.
        let need = match kind {
            OpKind::Write => Access::REMOTE_WRITE,
            OpKind::Read => Access::REMOTE_READ,
            OpKind::Atomic => Access::REMOTE_ATOMIC,
            _ => Access::NONE,
        };
        if !self.attr.qp_access_flags.contains(need) {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        // 4. Resources.
        let write_imm_end = kind == OpKind::Write && op.has_immdt();
        let needs_rwqe = (kind == OpKind::Send && (op.is_first() || op.is_only())) || write_imm_end;
        if needs_rwqe && self.rq.is_empty() {
            self.stats.tx_rnr_naks += 1;
            self.push_nak(
                psn,
                AethSyndrome::RnrNak {
                    timer: self.attr.min_rnr_timer,
                },
            );
            return;
        }
        if matches!(kind, OpKind::Read | OpKind::Atomic)
            && self.owed_rd_atomic() >= self.attr.max_dest_rd_atomic as usize
        {
            // Class C: more READs and atomics than the responder's
            // resources (a requester keeps at most its max_rd_atomic, which
            // connection setup bounds by our max_dest_rd_atomic, in flight;
            // one whose responses are still owed is in flight). This also
            // bounds the READ bytes owed: at most max_dest_rd_atomic
            // READs of at most 2^31 bytes, held as descriptors, not data.
            self.stats.rx_rd_atomic_overflow += 1;
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        // 5. Length.
        let plen = pkt.payload.len();
        let pmtu = self.pmtu;
        let len_ok = if op.is_first() || op.is_middle() {
            plen == pmtu
        } else if op.is_last() {
            plen >= 1 && plen <= pmtu
        } else {
            plen <= pmtu
        };
        if !len_ok {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        if let Some(reth) = h.reth {
            if reth.dma_len as u64 > MAX_MESSAGE {
                self.responder_fatal(psn, NakCode::InvalidRequest, None);
                return;
            }
        }
        match kind {
            OpKind::Send => self.rc_send(pkt, mem),
            OpKind::Write => self.rc_write(pkt, mem),
            OpKind::Read => {
                let Some(reth) = h.reth else {
                    self.responder_fatal(psn, NakCode::InvalidRequest, None);
                    return;
                };
                if reth.dma_len > 0
                    && mem
                        .check(
                            MemKey::Remote(reth.rkey),
                            reth.va,
                            reth.dma_len as u64,
                            Access::REMOTE_READ,
                        )
                        .is_err()
                {
                    self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                    return;
                }
                let n = reth.dma_len.div_ceil(pmtu).max(1);
                self.msn = self.msn.next();
                self.store_resource(RdRes::Read {
                    first_psn: psn,
                    last_psn: psn.add(n - 1),
                    rkey: reth.rkey,
                    va: reth.va,
                    len: reth.dma_len,
                });
                self.resp_q.push_back(RespItem::Read {
                    rkey: reth.rkey,
                    va: reth.va,
                    remaining: reth.dma_len,
                    psn,
                    fresh: true,
                    started: false,
                    msn: self.msn,
                    new: true,
                });
                self.epsn = psn.add(n);
                self.msg_start = self.epsn;
            }
            OpKind::Atomic => {
                let Some(a) = h.atomic_eth else {
                    self.responder_fatal(psn, NakCode::InvalidRequest, None);
                    return;
                };
                if a.va % 8 != 0 {
                    self.responder_fatal(psn, NakCode::InvalidRequest, None);
                    return;
                }
                let key = MemKey::Remote(a.rkey);
                if mem.check(key, a.va, 8, Access::REMOTE_ATOMIC).is_err() {
                    self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                    return;
                }
                let aop = if op == Opcode::RcCompareSwap {
                    AtomicOp::CompareSwap {
                        compare: a.compare,
                        swap: a.swap_add,
                    }
                } else {
                    AtomicOp::FetchAdd { add: a.swap_add }
                };
                let orig = match mem.atomic(key, a.va, aop) {
                    Ok(v) => v,
                    Err(_) => {
                        self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                        return;
                    }
                };
                self.stats.atomics_executed += 1;
                self.msn = self.msn.next();
                self.store_resource(RdRes::Atomic { psn, orig });
                self.resp_q.push_back(RespItem::AtomicAck {
                    psn,
                    orig,
                    msn: self.msn,
                    new: true,
                });
                self.epsn = psn.next();
                self.msg_start = self.epsn;
            }
            OpKind::Other => {}
        }
    }

    /// New READs and atomics whose responses are not all sent yet.
    fn owed_rd_atomic(&self) -> usize {
        self.resp_q
            .iter()
            .filter(|i| {
                matches!(
                    i,
                    RespItem::Read { new: true, .. } | RespItem::AtomicAck { new: true, .. }
                )
            })
            .count()
    }

    fn store_resource(&mut self, r: RdRes) {
        if self.resources.is_empty() {
            self.resources.push(RdRes::Free);
        }
        let n = self.resources.len();
        self.resources[self.res_next % n] = r;
        self.res_next = (self.res_next + 1) % n;
    }

    fn rc_send<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        if op.is_first() || op.is_only() {
            self.msg_start = psn;
        }
        let offset = match self.in_msg {
            InMsg::Send { offset } => offset,
            _ => 0,
        };
        let Some(rwqe) = self.rq.front().copied() else {
            // Checked before; a MIDDLE/LAST without a WQE cannot happen.
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        };
        match scatter(mem, rwqe.sges.as_slice(), offset as u64, pkt.payload) {
            Ok(()) => {}
            Err(ScatterError::TooSmall) => {
                let st = self.cfg.recv_too_small_status;
                self.responder_fatal(psn, NakCode::InvalidRequest, Some((rwqe.wr_id, st)));
                return;
            }
            Err(ScatterError::Protection) => {
                self.responder_fatal(
                    psn,
                    NakCode::RemoteOperationalError,
                    Some((rwqe.wr_id, WcStatus::LocProtErr)),
                );
                return;
            }
        }
        let total = offset + pkt.payload.len();
        self.epsn = psn.next();
        if op.is_last() || op.is_only() {
            let mut invalidated = None;
            if let Some(rkey) = h.ieth {
                if mem.invalidate(rkey).is_err() {
                    // IBA class J (rxe RESPST_ERR_INVALIDATE_RKEY, mlx5
                    // alike): no ACK of any kind, the receive completes in
                    // error, the QP goes to ERR. The key stays valid.
                    self.stats.rx_bad_invalidate += 1;
                    self.in_msg = InMsg::None;
                    let owed = std::mem::take(&mut self.resp_q);
                    self.responder_error(Some((rwqe.wr_id, WcStatus::RemInvReqErr)));
                    self.resp_q = owed;
                    self.enter_error_keeping_responses(Some(WcStatus::RemInvReqErr));
                    return;
                }
                invalidated = Some(rkey);
            }
            self.rq.pop_front();
            self.msn = self.msn.next();
            self.in_msg = InMsg::None;
            self.completions.push_back(Completion {
                wr_id: rwqe.wr_id,
                status: WcStatus::Success,
                opcode: WcOpcode::Recv,
                is_recv: true,
                qp_num: self.cfg.qpn,
                byte_len: total,
                imm_data: h.immdt,
                invalidated_rkey: invalidated,
                src_qp: None,
                grh: false,
                solicited: h.bth.solicited,
            });
        } else {
            self.in_msg = InMsg::Send { offset: total };
        }
        if h.bth.ack_req {
            self.push_ack(psn);
        }
    }

    fn rc_write<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        let plen = pkt.payload.len();
        let (rkey, va, remaining, imm) = match (self.in_msg, h.reth) {
            (
                InMsg::Write {
                    rkey,
                    va,
                    remaining,
                    imm,
                },
                _,
            ) => (rkey, va, remaining, imm),
            (InMsg::None, Some(reth)) => {
                self.msg_start = psn;
                if reth.dma_len > 0
                    && mem
                        .check(
                            MemKey::Remote(reth.rkey),
                            reth.va,
                            reth.dma_len as u64,
                            Access::REMOTE_WRITE,
                        )
                        .is_err()
                {
                    self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                    return;
                }
                (reth.rkey, reth.va, reth.dma_len, false)
            }
            _ => {
                self.responder_fatal(psn, NakCode::InvalidRequest, None);
                return;
            }
        };
        let end = op.is_last() || op.is_only();
        // The packets must add up to the RETH length.
        if (end && plen != remaining) || (!end && plen >= remaining) {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        if plen > 0 && mem.write(MemKey::Remote(rkey), va, pkt.payload).is_err() {
            self.responder_fatal(psn, NakCode::RemoteAccessError, None);
            return;
        }
        let _ = imm;
        self.epsn = psn.next();
        if end {
            self.msn = self.msn.next();
            self.in_msg = InMsg::None;
            if op.has_immdt() {
                let rwqe = self.rq.pop_front().expect("checked at the resource step");
                let total = match h.reth {
                    Some(r) => r.dma_len,
                    None => self.write_total(),
                };
                self.completions.push_back(Completion {
                    wr_id: rwqe.wr_id,
                    status: WcStatus::Success,
                    opcode: WcOpcode::RecvRdmaWithImm,
                    is_recv: true,
                    qp_num: self.cfg.qpn,
                    byte_len: total,
                    imm_data: h.immdt,
                    invalidated_rkey: None,
                    src_qp: None,
                    grh: false,
                    solicited: h.bth.solicited,
                });
            }
            self.write_len = 0;
        } else {
            if self.in_msg == InMsg::None {
                self.write_len = remaining;
            }
            self.in_msg = InMsg::Write {
                rkey,
                va: va + plen as u64,
                remaining: remaining - plen,
                imm: false,
            };
        }
        if h.bth.ack_req {
            self.push_ack(psn);
        }
    }

    fn write_total(&self) -> u32 {
        self.write_len
    }

    fn rc_duplicate<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let psn = h.bth.psn;
        match op_kind(h.bth.opcode) {
            OpKind::Send | OpKind::Write => {
                // C9-105: not executed again; ACK the last good PSN.
                let last_good = self.epsn.sub(1);
                self.push_ack(last_good);
            }
            OpKind::Read => {
                let Some(reth) = h.reth else { return };
                let found = self.resources.iter().find_map(|r| match *r {
                    RdRes::Read {
                        first_psn,
                        last_psn,
                        rkey,
                        va,
                        len,
                    } if !psn.is_before(first_psn)
                        && !psn.is_after(last_psn)
                        && rkey == reth.rkey
                        && reth.va >= va
                        && reth.va.saturating_add(reth.dma_len as u64)
                            <= va.saturating_add(len as u64) =>
                    {
                        Some(first_psn)
                    }
                    _ => None,
                });
                let Some(first_psn) = found else {
                    self.stats.rx_dropped += 1;
                    return;
                };
                let _ = mem;
                // Re-execute from memory, responses from the request's PSN.
                self.resp_q.push_back(RespItem::Read {
                    rkey: reth.rkey,
                    va: reth.va,
                    remaining: reth.dma_len,
                    psn,
                    fresh: psn == first_psn,
                    started: false,
                    msn: self.msn,
                    new: false,
                });
            }
            OpKind::Atomic => {
                let found = self.resources.iter().find_map(|r| match *r {
                    RdRes::Atomic { psn: p, orig } if p == psn => Some(orig),
                    _ => None,
                });
                if let Some(orig) = found {
                    // Replay the saved result; never execute twice.
                    self.resp_q.push_back(RespItem::AtomicAck {
                        psn,
                        orig,
                        msn: self.msn,
                        new: false,
                    });
                } else {
                    self.stats.rx_dropped += 1;
                }
            }
            OpKind::Other => self.stats.rx_dropped += 1,
        }
    }

    fn uc_request<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        if psn != self.epsn {
            // Lost packets: drop the message in progress, resynchronise on
            // the next FIRST or ONLY.
            self.in_msg = InMsg::None;
        }
        self.epsn = psn.next();
        let kind = op_kind(op);
        let seq_ok = match self.in_msg {
            InMsg::None => op.is_first() || op.is_only(),
            InMsg::Send { .. } => kind == OpKind::Send && (op.is_middle() || op.is_last()),
            InMsg::Write { .. } => kind == OpKind::Write && (op.is_middle() || op.is_last()),
        };
        let plen = pkt.payload.len();
        let len_ok = if op.is_first() || op.is_middle() {
            plen == self.pmtu
        } else if op.is_last() {
            plen >= 1 && plen <= self.pmtu
        } else {
            plen <= self.pmtu
        };
        if !seq_ok || !len_ok {
            self.in_msg = InMsg::None;
            self.stats.rx_dropped += 1;
            return;
        }
        match kind {
            OpKind::Send => {
                let Some(rwqe) = self.rq.front().copied() else {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                };
                let offset = match self.in_msg {
                    InMsg::Send { offset } => offset,
                    _ => 0,
                };
                if scatter(mem, rwqe.sges.as_slice(), offset as u64, pkt.payload).is_err() {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                let total = offset + plen;
                if op.is_last() || op.is_only() {
                    self.rq.pop_front();
                    self.in_msg = InMsg::None;
                    self.completions.push_back(Completion {
                        wr_id: rwqe.wr_id,
                        status: WcStatus::Success,
                        opcode: WcOpcode::Recv,
                        is_recv: true,
                        qp_num: self.cfg.qpn,
                        byte_len: total,
                        imm_data: h.immdt,
                        invalidated_rkey: None,
                        src_qp: None,
                        grh: false,
                        solicited: h.bth.solicited,
                    });
                } else {
                    self.in_msg = InMsg::Send { offset: total };
                }
            }
            OpKind::Write => {
                let (rkey, va, remaining) = match (self.in_msg, h.reth) {
                    (
                        InMsg::Write {
                            rkey,
                            va,
                            remaining,
                            ..
                        },
                        _,
                    ) => (rkey, va, remaining),
                    (InMsg::None, Some(r)) => {
                        if !self.attr.qp_access_flags.contains(Access::REMOTE_WRITE)
                            || (r.dma_len > 0
                                && mem
                                    .check(
                                        MemKey::Remote(r.rkey),
                                        r.va,
                                        r.dma_len as u64,
                                        Access::REMOTE_WRITE,
                                    )
                                    .is_err())
                        {
                            self.stats.rx_dropped += 1;
                            return;
                        }
                        self.write_len = r.dma_len;
                        (r.rkey, r.va, r.dma_len)
                    }
                    _ => {
                        self.stats.rx_dropped += 1;
                        return;
                    }
                };
                let end = op.is_last() || op.is_only();
                if (end && plen != remaining) || (!end && plen >= remaining) {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                if end && op.has_immdt() && self.rq.is_empty() {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                if plen > 0 && mem.write(MemKey::Remote(rkey), va, pkt.payload).is_err() {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                if end {
                    self.in_msg = InMsg::None;
                    if op.has_immdt() {
                        let rwqe = self.rq.pop_front().expect("checked above");
                        self.completions.push_back(Completion {
                            wr_id: rwqe.wr_id,
                            status: WcStatus::Success,
                            opcode: WcOpcode::RecvRdmaWithImm,
                            is_recv: true,
                            qp_num: self.cfg.qpn,
                            byte_len: self.write_len,
                            imm_data: h.immdt,
                            invalidated_rkey: None,
                            src_qp: None,
                            grh: false,
                            solicited: h.bth.solicited,
                        });
                    }
                } else {
                    self.in_msg = InMsg::Write {
                        rkey,
                        va: va + plen as u64,
                        remaining: remaining - plen,
                        imm: false,
                    };
                }
            }
            _ => self.stats.rx_dropped += 1,
        }
    }

    fn ud_request<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let Some(deth) = h.deth else {
            self.stats.rx_dropped += 1;
            return;
        };
        if deth.qkey != self.attr.qkey {
            self.stats.rx_bad_qkey += 1;
            self.stats.rx_dropped += 1;
            return;
        }
        if pkt.payload.len() > self.pmtu {
            self.stats.rx_dropped += 1;
            return;
        }
        let Some(rwqe) = self.rq.front().copied() else {
            self.stats.rx_dropped += 1;
            return;
        };
        let zeros = [0u8; 40];
        let grh = match (pkt.grh, pkt.payload) {
            (Some(g), _) => Payload::Bytes(g),
            (None, Payload::Bytes(_)) => Payload::Bytes(&zeros),
            (None, Payload::Len(_)) => Payload::Len(40),
        };
        let sges = rwqe.sges.as_slice();
        self.rq.pop_front();
        let status =
            match scatter(mem, sges, 0, grh).and_then(|()| scatter(mem, sges, 40, pkt.payload)) {
                Ok(()) => WcStatus::Success,
                Err(ScatterError::TooSmall) => WcStatus::LocLenErr,
                Err(ScatterError::Protection) => WcStatus::LocProtErr,
            };
        self.completions.push_back(Completion {
            wr_id: rwqe.wr_id,
            status,
            opcode: WcOpcode::Recv,
            is_recv: true,
            qp_num: self.cfg.qpn,
            byte_len: 40 + pkt.payload.len(),
            imm_data: h.immdt,
            invalidated_rkey: None,
            src_qp: Some(deth.src_qp),
            grh: true,
            solicited: h.bth.solicited,
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Send,
    Write,
    Read,
    Atomic,
    Other,
}

fn op_kind(op: Opcode) -> OpKind {
    use Opcode::*;
    match op {
        RcSendFirst | RcSendMiddle | RcSendLast | RcSendLastImm | RcSendOnly | RcSendOnlyImm
        | RcSendLastInv | RcSendOnlyInv | UcSendFirst | UcSendMiddle | UcSendLast
        | UcSendLastImm | UcSendOnly | UcSendOnlyImm | UdSendOnly | UdSendOnlyImm => OpKind::Send,
        RcWriteFirst | RcWriteMiddle | RcWriteLast | RcWriteLastImm | RcWriteOnly
        | RcWriteOnlyImm | UcWriteFirst | UcWriteMiddle | UcWriteLast | UcWriteLastImm
        | UcWriteOnly | UcWriteOnlyImm => OpKind::Write,
        RcReadRequest => OpKind::Read,
        RcCompareSwap | RcFetchAdd => OpKind::Atomic,
        _ => OpKind::Other,
    }
}

fn data_opcode(t: QpType, op: SendOp, first: bool, last: bool) -> Opcode {
    use Opcode::*;
    let only = first && last;
    match (t, op) {
        (QpType::Ud, SendOp::SendWithImm(_)) => UdSendOnlyImm,
        (QpType::Ud, _) => UdSendOnly,
        (t, SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_)) => {
            let uc = t == QpType::Uc;
            match (only, first, last, op) {
                (true, _, _, SendOp::SendWithImm(_)) => pick(uc, RcSendOnlyImm, UcSendOnlyImm),
                (true, _, _, SendOp::SendWithInv(_)) => RcSendOnlyInv,
                (true, _, _, _) => pick(uc, RcSendOnly, UcSendOnly),
                (_, true, _, _) => pick(uc, RcSendFirst, UcSendFirst),
                (_, _, true, SendOp::SendWithImm(_)) => pick(uc, RcSendLastImm, UcSendLastImm),
                (_, _, true, SendOp::SendWithInv(_)) => RcSendLastInv,
                (_, _, true, _) => pick(uc, RcSendLast, UcSendLast),
                _ => pick(uc, RcSendMiddle, UcSendMiddle),
            }
        }
        (t, op) => {
            let uc = t == QpType::Uc;
            let imm = matches!(op, SendOp::WriteWithImm { .. });
            match (only, first, last) {
                (true, _, _) if imm => pick(uc, RcWriteOnlyImm, UcWriteOnlyImm),
                (true, _, _) => pick(uc, RcWriteOnly, UcWriteOnly),
                (_, true, _) => pick(uc, RcWriteFirst, UcWriteFirst),
                (_, _, true) if imm => pick(uc, RcWriteLastImm, UcWriteLastImm),
                (_, _, true) => pick(uc, RcWriteLast, UcWriteLast),
                _ => pick(uc, RcWriteMiddle, UcWriteMiddle),
            }
        }
    }
}

fn pick(uc: bool, rc: Opcode, ucop: Opcode) -> Opcode {
    if uc {
        ucop
    } else {
        rc
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

/// The pieces of `sges` covering `[off, off + len)`.
fn gather(d: &mut PayloadDesc, sges: &[Sge], off: u32, len: u32) {
    let mut skip = off as u64;
    let mut want = len as u64;
    for s in sges {
        if want == 0 {
            break;
        }
        let l = s.length as u64;
        if skip >= l {
            skip -= l;
            continue;
        }
        let take = (l - skip).min(want);
        d.push(Piece {
            key: s.lkey.value(),
            addr: s.addr.wrapping_add(skip),
            len: take as u32,
        });
        want -= take;
        skip = 0;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ScatterError {
    TooSmall,
    Protection,
}

/// Write `data` into `sges` starting `off` bytes in, with LOCAL_WRITE
/// checks on every piece before anything is written.
fn scatter<M: Memory + ?Sized>(
    mem: &mut M,
    sges: &[Sge],
    off: u64,
    data: Payload<'_>,
) -> Result<(), ScatterError> {
    let total: u64 = sges.iter().map(|s| s.length as u64).sum();
    if off + data.len() as u64 > total {
        return Err(ScatterError::TooSmall);
    }
    for pass in 0..2 {
        let mut skip = off;
        let mut done = 0u32;
        for s in sges {
            if done == data.len() {
                break;
            }
            let l = s.length as u64;
            if skip >= l {
                skip -= l;
                continue;
            }
            let take = ((l - skip) as u32).min(data.len() - done);
            let key = MemKey::Local(s.lkey);
            let addr = s.addr.wrapping_add(skip);
            if pass == 0 {
                mem.check(key, addr, take as u64, Access::LOCAL_WRITE)
                    .map_err(|_| ScatterError::Protection)?;
            } else {
                mem.write(key, addr, data.slice(done, take))
                    .map_err(|_| ScatterError::Protection)?;
            }
            done += take;
            skip = 0;
        }
    }
    Ok(())
}

/// The (required, optional) attribute masks of a transition, or `None` when
/// the kernel table has no such transition (ROCEV2.md §5.9). STATE is
/// always required and in neither mask. The one table of the crate: the
/// verbs API's `ibv_modify_qp` checks use it too.
pub fn transition_masks(t: QpType, from: QpState, to: QpState) -> Option<(AttrMask, AttrMask)> {
    use AttrMask as M;
    use QpState::*;
    let none = M::NONE;
    let r = match (from, to) {
        (Reset, Reset) => (none, none),
        (Reset, Init) => match t {
            QpType::Ud => (M::PKEY_INDEX | M::PORT | M::QKEY, none),
            _ => (M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, none),
        },
        (Init, Init) => match t {
            QpType::Ud => (none, M::PKEY_INDEX | M::PORT | M::QKEY),
            _ => (none, M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        },
        (Init, Rtr) => match t {
            QpType::Ud => (none, M::PKEY_INDEX | M::QKEY),
            QpType::Uc => (
                M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
            ),
            QpType::Rc => (
                M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
            ),
        },
        (Rtr, Rts) => match t {
            QpType::Ud => (M::SQ_PSN, M::CUR_STATE | M::QKEY),
            QpType::Uc => (
                M::SQ_PSN,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::PATH_MIG_STATE,
            ),
        },
        (Rts, Rts) => match t {
            QpType::Ud => (none, M::CUR_STATE | M::QKEY),
            QpType::Uc => (
                none,
                M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                none,
                M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE | M::MIN_RNR_TIMER,
            ),
        },
        (Rts, Sqd) => (none, M::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Rts) => match t {
            QpType::Ud => (none, M::CUR_STATE | M::QKEY),
            QpType::Uc => (
                none,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                none,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::PATH_MIG_STATE,
            ),
        },
        (Sqd, Sqd) => match t {
            QpType::Ud => (none, M::PKEY_INDEX | M::QKEY),
            QpType::Uc => (
                none,
                M::PORT | M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                none,
                M::PORT
                    | M::AV
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
                    | M::MAX_DEST_RD_ATOMIC
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
            ),
        },
        (Sqe, Rts) => match t {
            QpType::Ud => (none, M::CUR_STATE | M::QKEY),
            QpType::Uc => (none, M::CUR_STATE | M::ACCESS_FLAGS),
            QpType::Rc => return None,
        },
        (Init | Rtr | Rts | Sqd | Sqe | Err, Reset | Err) => (none, none),
        _ => return None,
    };
    Some(r)
}

#[cfg(test)]
mod tests {
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
        let r = mem.register(0, 4096, Access::LOCAL_WRITE).unwrap();
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
        assert!(req.contains(AttrMask::QKEY));
        let (req, _) = transition_masks(QpType::Ud, Init, Rtr).unwrap();
        assert!(req.is_empty());
        let (req, _) = transition_masks(QpType::Rc, Rtr, Rts).unwrap();
        assert_eq!(
            req,
            AttrMask::TIMEOUT
                | AttrMask::RETRY_CNT
                | AttrMask::RNR_RETRY
                | AttrMask::SQ_PSN
                | AttrMask::MAX_QP_RD_ATOMIC
        );
        for from in [Init, Rtr, Rts, Sqd, Sqe, Err] {
            assert!(transition_masks(QpType::Rc, from, Err).is_some());
            assert!(transition_masks(QpType::Rc, from, Reset).is_some());
        }
    }
}
