//! Host NICs: queue pairs driven by the shared transport engine
//! (`roce::transport::Qp`) with length-only memory.
//!
//! * Each flow maps to a connected RC QP pair (requester at the source,
//!   responder at the destination), one pair per (source, destination,
//!   `qp_index`). Flows post their messages as signalled work requests,
//!   a bounded number at a time, and complete when the last one does.
//!   A flow that waits for others is posted by the event its last
//!   dependency's completion schedules; nothing polls for it.
//! * Transmission is pulled: when the NIC port is free and a priority is
//!   not paused, the next QP in that priority's ready ring is asked for a
//!   packet ([`Qp::poll_transmit`]); a QP that has nothing leaves the ring
//!   until something happens to it. DCQCN pacing lives in the engine; its
//!   deadlines come back through [`Qp::poll_timeout`].
//! * Timers: one pending event per QP at most, for the earliest deadline
//!   the engine reports; an idle QP costs nothing.
//! * Receive: frames go straight to the engine, or, with a drain rate,
//!   through a FIFO drained at that rate; crossing `rx_xoff` sends PAUSE on
//!   the frame's (lossless) priority, falling to `rx_xon` sends XON.
//! * CNPs leave on the configured CNP priority; ACKs on the QP's priority.

use std::collections::{BTreeMap, VecDeque};

use roce::cc::{CcConfig as EngineCc, DcqcnParams};
use roce::time::{Duration, Instant, Rate};
use roce::transport::{
    AccessFlags, AddressHandle, LengthMemory, Mtu, Payload, Qp, QpAttr, QpAttrMask, QpConfig,
    QpState, Received, RecvWr, Registration, RetransmitMode as EngineRetransmit, SendOp, SendWr,
    Sge, SgeList, WcStatus,
};
use roce::wire::{Opcode, Psn, Qpn};

use super::packet::{frame_len, Packet};
use super::{Ev, RxQueue, World};
use crate::config::{CcAlgorithm, DcqcnPreset, NicConfig, RetransmitMode, SimConfig};
use crate::engine::{splitmix, EventQueue};
use crate::results::NicRecord;
use crate::topology::ecmp::roce_udp_source_port;
use crate::workload::{FlowOp, FlowSpec};

/// QPN of queue pair 0; QP `i` has QPN `QPN_BASE + i`.
const QPN_BASE: u32 = 0x100;
/// Work requests a flow keeps posted at once.
const POST_AHEAD: u64 = 64;
/// Size of the one memory region every NIC registers.
const REGION: u64 = 1 << 44;

/// One host NIC.
#[derive(Debug)]
pub(crate) struct Nic {
    /// Node index.
    pub node: u32,
    /// Host index.
    pub host: u32,
    /// Global id of its port (port 0 of the host).
    pub port: u32,
    /// Length-only registered memory.
    pub mem: LengthMemory,
    /// The region all work requests use.
    pub reg: Registration,
    /// QPs with something to send, per priority.
    pub ready: [VecDeque<u32>; 8],
    /// Received frames waiting to drain (with a drain rate).
    pub rx: RxQueue,
    /// Drain rate now, if limited.
    pub drain: Option<Rate>,
    /// Drain rate its settings give (what a fault's end returns to).
    pub drain_cfg: Option<Rate>,
    /// The receive pipeline is stalled (a pause storm): nothing drains.
    pub stalled: bool,
    /// Receive buffer, bytes.
    pub rx_buffer: u64,
    /// Send XOFF at this many bytes buffered.
    pub rx_xoff: u64,
    /// Send XON at or below this many.
    pub rx_xon: u64,
    /// Priority of the CNPs it sends.
    pub cnp_priority: u8,
    /// Transport counters the engine does not keep.
    pub counters: NicRecord,
    /// Priorities on which the NIC stopped sending PAUSE past the critical
    /// stall watermark (until its receive buffer drains to XON).
    pub stall_block: u8,
    /// `tx_pause_storm_warning_events`.
    pub storm_warning: u64,
    /// `tx_pause_storm_error_events`.
    pub storm_error: u64,
}

impl Nic {
    /// The NIC of host `host` at node `node`, whose port 0 has global id
    /// `port`.
    pub fn new(node: u32, host: u32, port: u32, cfg: &NicConfig) -> Nic {
        let mut mem = LengthMemory::new();
        // A fresh memory accepts a well-formed registration; fall back to an
        // empty key (every access then fails visibly) if it ever does not.
        let reg = mem
            .register(0, REGION, AccessFlags::ALL)
            .unwrap_or(Registration {
                lkey: roce::wire::Lkey::new(0),
                rkey: roce::wire::Rkey::new(0),
                addr: 0,
                len: 0,
            });
        Nic {
            node,
            host,
            port,
            mem,
            reg,
            ready: Default::default(),
            rx: RxQueue::default(),
            drain: cfg.rx_drain_rate,
            drain_cfg: cfg.rx_drain_rate,
            stalled: false,
            rx_buffer: cfg.rx_buffer.bytes(),
            rx_xoff: cfg.rx_xoff.bytes(),
            rx_xon: cfg.rx_xon.bytes(),
            cnp_priority: cfg.cnp_priority,
            counters: NicRecord::default(),
            stall_block: 0,
            storm_warning: 0,
            storm_error: 0,
        }
    }

    /// Priorities with a QP ready to send, as a bit set.
    pub fn ready_mask(&self) -> u8 {
        let mut m = 0;
        for p in 0..8 {
            if !self.ready[p].is_empty() {
                m |= 1 << p;
            }
        }
        m
    }
}

/// A queue pair and where it sits.
#[derive(Debug)]
pub(crate) struct SimQp {
    /// The transport engine.
    pub engine: Qp,
    /// Host index of its NIC.
    pub host: u32,
    /// Host index of the peer.
    pub peer: u32,
    /// Priority of its packets (CNPs excepted).
    pub prio: u8,
    /// UDP source port of its packets.
    pub sport: u16,
    /// In its NIC's ready ring.
    pub in_ready: bool,
    /// Time of the pending timer event, if any.
    pub timer_at: Option<Instant>,
    /// Path MTU in bytes: the payload of every packet of a message but
    /// its last.
    pub pmtu: u32,
    /// Requester: the work requests posted and not completed yet, oldest
    /// first (their `wr_id`s). The engine completes them in this order.
    pub wrs: VecDeque<u64>,
    /// Requester: the first PSN of the oldest of `wrs` (PSNs are given out
    /// in post order, consecutively, each message taking one per packet).
    pub head_psn: Psn,
}

impl SimQp {
    /// PSNs a message of `len` bytes takes (as the engine counts them:
    /// one per packet for WRITE and SEND, one per response for READ).
    fn npsn(&self, len: u32) -> u32 {
        len.div_ceil(self.pmtu).max(1)
    }

    /// Requester: the oldest uncompleted work request and how many of its
    /// bytes the receiver acknowledged, from the engine's oldest
    /// unacknowledged PSN (ACKs are cumulative, a READ's responses come in
    /// order). `len`: the byte length of a work request by id.
    pub fn head_acked(&self, len: impl Fn(u64) -> u32) -> Option<(u64, u64)> {
        let &wr = self.wrs.front()?;
        let len = len(wr);
        let done = self.engine.comp_psn().distance_from(self.head_psn);
        // Before the head (nothing of it acknowledged) the distance wraps
        // to far beyond its PSNs.
        let bytes = if done < self.npsn(len) {
            u64::from(done) * u64::from(self.pmtu)
        } else {
            0
        };
        Some((wr, bytes.min(u64::from(len))))
    }

    /// Requester: work request `wr` (of `len` bytes) left the send queue;
    /// the next one starts `npsn(len)` PSNs later when it succeeded.
    fn retire(&mut self, wr: u64, len: u32, success: bool) {
        if self.wrs.front() == Some(&wr) {
            self.wrs.pop_front();
            if success {
                self.head_psn = self.head_psn.add(self.npsn(len));
            }
        } else if let Some(i) = self.wrs.iter().position(|&w| w == wr) {
            self.wrs.remove(i);
        }
    }
}

/// All queue pairs, and the (source, destination, index, congestion
/// control class) -> requester map.
#[derive(Debug, Default)]
pub(crate) struct QpTable {
    /// QPs by id (QPN - `QPN_BASE`).
    pub qps: Vec<SimQp>,
    pairs: BTreeMap<(u32, u32, u32, u32), u32>,
}

impl QpTable {
    /// The requester QP of (src, dst, index, class), creating the
    /// connected pair on first use. `class`: 0 for flows under their
    /// hosts' congestion control, else one per workload with a `cc` of
    /// its own (flows of different settings never share a QP). `cfg`: the
    /// settings of the source's and the destination's ends;
    /// `rate_src`/`rate_dst`: their line rates.
    #[allow(clippy::too_many_arguments)] // one call site, all plain values
    pub fn connect(
        &mut self,
        src: u32,
        dst: u32,
        (index, class): (u32, u32),
        prio: u8,
        (cfg_src, cfg_dst): (&SimConfig, &SimConfig),
        seed: u64,
        rate_src: Rate,
        rate_dst: Rate,
    ) -> Result<u32, String> {
        if let Some(&q) = self.pairs.get(&(src, dst, index, class)) {
            return Ok(q);
        }
        let a = self.qps.len() as u32;
        let b = a + 1;
        // The requester only sends, the responder only receives: size the
        // engine's queues for that (they are preallocated per QP).
        let qa = new_qp(a, b, dst, cfg_src, seed, rate_src, (POST_AHEAD as u32, 1))?;
        let qb = new_qp(b, a, src, cfg_dst, seed, rate_dst, (1, POST_AHEAD as u32))?;
        // The Linux stack's flow-label source port from the two QPNs.
        let sport = |me: u32, peer: u32| roce_udp_source_port(QPN_BASE + me, QPN_BASE + peer);
        for (id, other, engine, host, peer) in [(a, b, qa, src, dst), (b, a, qb, dst, src)] {
            let pmtu = engine.attr().path_mtu.bytes();
            let head_psn = engine.next_psn();
            self.qps.push(SimQp {
                engine,
                host,
                peer,
                prio,
                sport: sport(id, other),
                in_ready: false,
                timer_at: None,
                pmtu,
                wrs: VecDeque::new(),
                head_psn,
            });
        }
        self.pairs.insert((src, dst, index, class), a);
        Ok(a)
    }

    /// The UDP source port of QP `id`'s packets.
    pub fn sport_of(&self, id: u32) -> u16 {
        self.qps[id as usize].sport
    }

    /// The transport counters of NIC `nic`, summed over its QPs: the
    /// engine's mlx5 `hw_counters` ([`QpStats::hw_counters`], the one
    /// mapping the emulator's devices use too), with what only the NIC
    /// sees (requests received by kind, WQEs completed in error).
    ///
    /// [`QpStats::hw_counters`]: roce::transport::QpStats::hw_counters
    pub fn nic_record(&self, nic: &Nic, name: String) -> NicRecord {
        let mut r = nic.counters.clone();
        r.node = name;
        for q in self.qps.iter().filter(|q| q.host == nic.host) {
            for (counter, v) in q.engine.stats().hw_counters() {
                let field = match counter {
                    "out_of_sequence" => &mut r.out_of_sequence,
                    "duplicate_request" => &mut r.duplicate_request,
                    "rnr_nak_retry_err" => &mut r.rnr_nak_retry_err,
                    "packet_seq_err" => &mut r.packet_seq_err,
                    "implied_nak_seq_err" => &mut r.implied_nak_seq_err,
                    "local_ack_timeout_err" => &mut r.local_ack_timeout_err,
                    "roce_adp_retrans" => &mut r.retransmitted_packets,
                    "np_ecn_marked_roce_packets" => &mut r.np_ecn_marked_roce_packets,
                    "np_cnp_sent" => &mut r.np_cnp_sent,
                    "rp_cnp_handled" => &mut r.rp_cnp_handled,
                    // Not in the simulator's record (yet): responder-side
                    // NAKs, CNPs ignored.
                    _ => continue,
                };
                *field += v;
            }
        }
        r
    }
}

/// Build and connect one engine QP (id `me`, peer QP `peer`, peer host
/// `peer_host`) up to RTS.
fn new_qp(
    me: u32,
    peer: u32,
    peer_host: u32,
    cfg: &SimConfig,
    seed: u64,
    line_rate: Rate,
    (max_send_wr, max_recv_wr): (u32, u32),
) -> Result<Qp, String> {
    let n = &cfg.nic;
    let qpn = Qpn::new(QPN_BASE + me);
    let mut qc = QpConfig::new(qpn);
    qc.max_send_wr = max_send_wr;
    qc.max_recv_wr = max_recv_wr;
    qc.retransmit = match n.retransmit {
        RetransmitMode::GoBackN => EngineRetransmit::GoBackN,
        RetransmitMode::GoBack0 => EngineRetransmit::GoBack0,
    };
    if let Some(w) = n.window {
        qc.max_unacked_psns = w;
    }
    if n.cc.algorithm == CcAlgorithm::Dcqcn {
        let p = dcqcn_params(cfg, line_rate);
        qc.cc = EngineCc::Dcqcn(p);
        qc.min_time_between_cnps = Some(n.cc.dcqcn.cnp_interval(match n.cc.preset {
            DcqcnPreset::Paper => roce::cc::PAPER_CNP_INTERVAL,
            DcqcnPreset::Firmware | DcqcnPreset::Hpcc => roce::cc::CONNECTX_CNP_INTERVAL,
        }));
    }
    let mut qp = Qp::new(qc);
    let psn = |id: u32| (splitmix(seed ^ 0x5053_4E00 ^ u64::from(id)) & 0xFF_FFFF) as u32;
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        pkey_index: 0,
        port_num: 1,
        qp_access_flags: AccessFlags::ALL,
        ..QpAttr::default()
    };
    let err = |e: roce::transport::ModifyError| format!("QP setup: {e}");
    qp.modify(
        &attr,
        QpAttrMask::STATE | QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS,
    )
    .map_err(err)?;
    attr.qp_state = QpState::Rtr;
    attr.ah = AddressHandle(u64::from(peer_host));
    attr.path_mtu = Mtu::from_bytes(n.mtu.bytes() as u32).unwrap_or(Mtu::Mtu4096);
    attr.dest_qp_num = Qpn::new(QPN_BASE + peer);
    attr.rq_psn = psn(peer);
    attr.max_dest_rd_atomic = 16;
    attr.min_rnr_timer = 12;
    qp.modify(
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER,
    )
    .map_err(err)?;
    attr.qp_state = QpState::Rts;
    attr.timeout = n.ack_timeout;
    attr.retry_cnt = n.retry_cnt;
    attr.rnr_retry = n.rnr_retry;
    attr.sq_psn = psn(me);
    attr.max_rd_atomic = 16;
    qp.modify(
        &attr,
        QpAttrMask::STATE
            | QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::SQ_PSN
            | QpAttrMask::MAX_QP_RD_ATOMIC,
    )
    .map_err(err)?;
    Ok(qp)
}

/// DCQCN parameters: the preset, then the overrides.
pub fn dcqcn_params(cfg: &SimConfig, line_rate: Rate) -> DcqcnParams {
    let c = &cfg.nic.cc;
    let mut p = match c.preset {
        DcqcnPreset::Paper => DcqcnParams::paper(line_rate),
        DcqcnPreset::Firmware => DcqcnParams::connectx(line_rate),
        DcqcnPreset::Hpcc => {
            // HPCC artifact "Mellanox" set at 100G, scaled with the rate
            // (VALIDATION.md DCQCN-0).
            let mut p = DcqcnParams::connectx(line_rate);
            let scale = line_rate.bps() / 25;
            p.alpha_period = Duration::from_us(1);
            p.rate_reduce_period = Duration::from_us(4);
            p.increase_timer = Duration::from_us(300);
            p.g_num = 1;
            p.g_den = 256;
            p.ai_rate = Rate::from_bps(5 * scale / 1_000_000_000 * 1_000_000);
            p.hai_rate = Rate::from_bps(50 * scale / 1_000_000_000 * 1_000_000);
            p.threshold = 1;
            p.min_rate = Rate::from_bps(1_000_000_000);
            p.clamp_tgt_rate = false;
            p
        }
    };
    c.dcqcn.apply(&mut p);
    p
}

/// Make sure an event is pending for QP `id`'s earliest deadline.
fn arm(q: &mut SimQp, id: u32, events: &mut EventQueue<Ev>) {
    if let Some(t) = q.engine.poll_timeout() {
        if q.timer_at.map_or(true, |x| t < x) {
            q.timer_at = Some(t);
            events.schedule(t, Ev::QpTimer(id));
        }
    }
}

/// Progress of one flow.
#[derive(Debug, Clone)]
pub(crate) struct FlowState {
    /// Requester QP.
    pub qp: u32,
    /// Messages in the flow.
    pub msgs: u64,
    /// Messages posted so far.
    pub posted: u64,
    /// Receive WQEs posted at the responder (SEND flows).
    pub recvs: u64,
    /// Messages completed.
    pub done: u64,
    /// Completion time of the last message.
    pub finish: Option<Instant>,
    /// Bytes acknowledged.
    pub bytes_acked: u64,
    /// A work request ended in error.
    pub failed: bool,
    /// When its first work requests were posted.
    pub posted_at: Option<Instant>,
    /// Flows it still waits for.
    pub waiting: u32,
    /// A flow it waits for (directly or not) failed: it is never posted.
    pub blocked: bool,
}

impl FlowState {
    /// A flow not started yet, on requester QP `qp`.
    pub fn new(f: &FlowSpec, qp: u32) -> FlowState {
        FlowState {
            qp,
            msgs: f.size.div_ceil(f.message_size),
            posted: 0,
            recvs: 0,
            done: 0,
            finish: None,
            bytes_acked: 0,
            failed: false,
            posted_at: None,
            waiting: 0,
            blocked: false,
        }
    }
}

/// Length of message `i` of flow `f`.
fn message_len(f: &FlowSpec, i: u64) -> u32 {
    (f.size - i * f.message_size).min(f.message_size) as u32
}

/// Length of the message a send work request id names (flow id in the
/// high half, message index in the low half); 0 for an id of no flow.
fn wr_len(flows: &[FlowSpec], wr: u64) -> u32 {
    flows
        .get((wr >> 32) as usize)
        .map_or(0, |f| message_len(f, wr & 0xFFFF_FFFF))
}

impl World<'_> {
    /// A flow starts: post its first messages.
    pub(crate) fn flow_start(&mut self, id: u32, now: Instant) {
        self.flow_state[id as usize].posted_at = Some(now);
        let f = &self.flows[id as usize];
        if f.op == FlowOp::Send {
            let qp = self.flow_state[id as usize].qp;
            self.post_recvs(id, qp ^ 1);
        }
        let qp = self.flow_state[id as usize].qp;
        self.post_more(id);
        self.after_activity(qp, now);
    }

    /// Keep up to `POST_AHEAD` receive WQEs ahead of a SEND flow.
    fn post_recvs(&mut self, id: u32, responder: u32) {
        let f = &self.flows[id as usize];
        let st = &mut self.flow_state[id as usize];
        let q = &mut self.qps.qps[responder as usize];
        let lkey = self.nics[q.host as usize].reg.lkey;
        while st.recvs < st.msgs && st.recvs < st.done + POST_AHEAD {
            let len = message_len(f, st.recvs);
            let wr = RecvWr {
                wr_id: (u64::from(id) << 32) | st.recvs,
                sges: SgeList::one(0, len, lkey),
            };
            if q.engine.post_recv(wr).is_err() {
                break;
            }
            st.recvs += 1;
        }
    }

    /// Post the flow's next messages, up to `POST_AHEAD` outstanding.
    fn post_more(&mut self, id: u32) {
        let f = &self.flows[id as usize];
        let st = &mut self.flow_state[id as usize];
        let q = &mut self.qps.qps[st.qp as usize];
        let lkey = self.nics[q.host as usize].reg.lkey;
        let rkey = self.nics[q.peer as usize].reg.rkey;
        while st.posted < st.msgs && st.posted < st.done + POST_AHEAD {
            let len = message_len(f, st.posted);
            let op = match f.op {
                FlowOp::Write => SendOp::Write {
                    remote_addr: 0,
                    rkey,
                },
                FlowOp::Read => SendOp::Read {
                    remote_addr: 0,
                    rkey,
                },
                FlowOp::Send => SendOp::Send,
            };
            let wr = SendWr::new(
                (u64::from(id) << 32) | st.posted,
                op,
                Sge {
                    addr: 0,
                    length: len,
                    lkey,
                },
            );
            let wr_id = wr.wr_id;
            if q.engine.post_send(wr).is_err() {
                break;
            }
            q.wrs.push_back(wr_id);
            st.posted += 1;
        }
    }

    /// After anything happened to QP `id`: collect completions, put it in
    /// the ready ring, kick the port, re-arm its timer.
    pub(crate) fn after_activity(&mut self, id: u32, now: Instant) {
        while let Some(c) = self.qps.qps[id as usize].engine.poll_completion() {
            if c.is_recv {
                continue;
            }
            let fid = (c.wr_id >> 32) as u32;
            let Some(st) = self.flow_state.get_mut(fid as usize) else {
                continue;
            };
            let f = &self.flows[fid as usize];
            let len = message_len(f, c.wr_id & 0xFFFF_FFFF);
            if c.status == WcStatus::Success {
                self.qps.qps[id as usize].retire(c.wr_id, len, true);
                st.done += 1;
                st.bytes_acked += u64::from(len);
                if st.done == st.msgs {
                    st.finish = Some(now);
                    self.flows_open -= 1;
                    self.release_dependents(fid, now);
                } else {
                    self.post_more(fid);
                    if f.op == FlowOp::Send {
                        self.post_recvs(fid, id ^ 1);
                    }
                }
            } else {
                let flows = self.flows;
                let q = &mut self.qps.qps[id as usize];
                if !st.failed {
                    // What the receiver acknowledged of the message that
                    // failed still counts as delivered.
                    if let Some((wr, part)) = q.head_acked(|w| wr_len(flows, w)) {
                        if wr == c.wr_id {
                            st.bytes_acked += part;
                        }
                    }
                }
                q.retire(c.wr_id, len, false);
                if st.failed {
                    continue;
                }
                st.failed = true;
                self.flows_open -= 1;
                let host = self.qps.qps[id as usize].host;
                self.nics[host as usize].counters.req_cqe_error += 1;
                self.block_dependents(fid);
            }
        }
        while self.qps.qps[id as usize].engine.poll_event().is_some() {}
        let q = &mut self.qps.qps[id as usize];
        let host = q.host;
        if !q.in_ready {
            q.in_ready = true;
            self.nics[host as usize].ready[usize::from(q.prio)].push_back(id);
        }
        self.arm_timer(id);
        let port = self.nics[host as usize].port;
        self.kick(port, now);
    }

    /// Bytes of flow `id` the receiver acknowledged: its completed
    /// messages, plus the acknowledged packets of the message in progress
    /// at the head of its queue pair (a flow cut off by the duration still
    /// shows what got through). Payload bytes, no headers.
    pub(crate) fn delivered(&self, id: u32) -> u64 {
        let st = &self.flow_state[id as usize];
        if st.failed || st.finish.is_some() {
            return st.bytes_acked;
        }
        let flows = self.flows;
        let part = self.qps.qps[st.qp as usize]
            .head_acked(|w| wr_len(flows, w))
            .filter(|&(wr, _)| (wr >> 32) as u32 == id)
            .map_or(0, |(_, b)| b);
        st.bytes_acked + part
    }

    /// Make sure an event is pending for QP `id`'s earliest deadline.
    fn arm_timer(&mut self, id: u32) {
        arm(&mut self.qps.qps[id as usize], id, &mut self.q);
    }

    /// QP `id`'s timer event; false when it was stale.
    pub(crate) fn qp_timer(&mut self, id: u32, now: Instant) -> bool {
        let q = &mut self.qps.qps[id as usize];
        if q.timer_at == Some(now) {
            q.timer_at = None;
        }
        if q.engine.poll_timeout().is_some_and(|t| t <= now) {
            q.engine.handle_timeout(now);
            self.after_activity(id, now);
            true
        } else {
            self.arm_timer(id);
            false
        }
    }

    /// The next frame of priority `prio` from host `host`'s QPs, round
    /// robin.
    pub(crate) fn nic_pull(&mut self, host: u32, prio: u8, now: Instant) -> Option<Packet> {
        let nic = &mut self.nics[host as usize];
        let n = nic.ready[usize::from(prio)].len();
        for _ in 0..n {
            let id = nic.ready[usize::from(prio)].pop_front()?;
            let q = &mut self.qps.qps[id as usize];
            match q.engine.poll_transmit(now, &nic.mem) {
                Some(tx) => {
                    nic.ready[usize::from(prio)].push_back(id);
                    let payload = tx.payload.len();
                    let cnp = tx.headers.bth.opcode == Opcode::Cnp;
                    let pkt = Packet {
                        headers: tx.headers,
                        payload,
                        wire: frame_len(&tx.headers, payload),
                        src: host,
                        dst: tx.dest.0 as u32,
                        sport: q.sport,
                        prio: if cnp { nic.cnp_priority } else { q.prio },
                        ecn: tx.ecn,
                        ingress: 0,
                    };
                    arm(q, id, &mut self.q);
                    return Some(pkt);
                }
                None => {
                    q.in_ready = false;
                    arm(q, id, &mut self.q);
                }
            }
        }
        None
    }

    /// A frame reached host `host`'s port.
    pub(crate) fn nic_receive(&mut self, host: u32, pkt: Packet, now: Instant) {
        let Some(rate) = self.nics[host as usize].drain else {
            self.deliver(host, pkt, now);
            return;
        };
        let nic = &mut self.nics[host as usize];
        let port = nic.port;
        if nic.rx.bytes + u64::from(pkt.wire) > nic.rx_buffer {
            let p = &mut self.ports[port as usize];
            p.rx_discards += 1;
            p.prio[usize::from(pkt.prio)].rx_discards += 1;
            self.drops += 1;
            return;
        }
        nic.rx.bytes += u64::from(pkt.wire);
        nic.rx.frames.push_back(pkt);
        let over = nic.rx.bytes >= nic.rx_xoff;
        if !nic.rx.draining && !nic.stalled {
            nic.rx.draining = true;
            self.q.schedule(
                now + rate.serialization_time(u64::from(pkt.wire)),
                Ev::Drain(host),
            );
        }
        if over && nic.stall_block & (1 << pkt.prio) == 0 {
            self.send_pfc(port, pkt.prio, true, now, false);
        }
    }

    /// Host `host` finished draining its oldest received frame.
    pub(crate) fn drain(&mut self, host: u32, now: Instant) {
        let nic = &mut self.nics[host as usize];
        if nic.stalled {
            nic.rx.draining = false;
            return;
        }
        let Some(pkt) = nic.rx.frames.pop_front() else {
            nic.rx.draining = false;
            return;
        };
        nic.rx.bytes -= u64::from(pkt.wire);
        let port = nic.port;
        let below = nic.rx.bytes <= nic.rx_xon;
        match (nic.rx.frames.front(), nic.drain) {
            (Some(next), Some(rate)) => {
                let t = now + rate.serialization_time(u64::from(next.wire));
                self.q.schedule(t, Ev::Drain(host));
            }
            _ => nic.rx.draining = false,
        }
        if below {
            nic.stall_block = 0;
            for p in 0..8 {
                if self.ports[port as usize].xoff_since[p].is_some() {
                    self.send_pfc(port, p as u8, false, now, false);
                }
            }
        }
        self.deliver(host, pkt, now);
    }

    /// Hand a received frame to its QP's engine.
    fn deliver(&mut self, host: u32, pkt: Packet, now: Instant) {
        let qpn = pkt.headers.bth.dest_qp.value();
        let id = qpn.wrapping_sub(QPN_BASE);
        let nic = &mut self.nics[host as usize];
        let Some(q) = self.qps.qps.get_mut(id as usize).filter(|q| q.host == host) else {
            let p = &mut self.ports[nic.port as usize];
            p.rx_discards += 1;
            self.drops += 1;
            return;
        };
        match pkt.headers.bth.opcode {
            Opcode::RcWriteFirst | Opcode::RcWriteOnly | Opcode::RcWriteOnlyImm => {
                nic.counters.rx_write_requests += 1
            }
            Opcode::RcReadRequest => nic.counters.rx_read_requests += 1,
            _ => {}
        }
        let rx = Received {
            headers: pkt.headers,
            ecn: pkt.ecn,
            payload: Payload::Len(pkt.payload),
            grh: None,
            src: AddressHandle(u64::from(pkt.src)),
        };
        q.engine.handle_packet(now, &rx, &mut nic.mem);
        self.after_activity(id, now);
    }
}
