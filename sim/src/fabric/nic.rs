//! Host NICs as state: each NIC (`Nic`), the queue pairs of every NIC on
//! the shared transport engine (`roce::transport::Qp`, with length-only
//! memory; `QpTable`) and the progress of each flow (`FlowState`). What
//! they do in the event loop is in the fabric's `host` file.

use std::collections::{BTreeMap, VecDeque};

use roce::cc::{CcConfig as EngineCc, DcqcnParams};
use roce::time::{Duration, Instant, Rate};
use roce::transport::{
    AccessFlags, AddressHandle, LengthMemory, Mtu, Qp, QpAttr, QpAttrMask, QpConfig, QpState,
    Registration, RetransmitMode as EngineRetransmit,
};
use roce::wire::{Psn, Qpn};

use super::packet::Packet;
use crate::config::{CcAlgorithm, DcqcnPreset, HostParams, NicConfig, RetransmitMode, SimConfig};
use crate::engine::splitmix;
use crate::results::NicRecord;
use crate::topology::ecmp::roce_udp_source_port;
use crate::workload::FlowSpec;

/// The lane of NIC port `port` of `ports`: the paths that leave by it.
pub(super) fn lane(port: u16, ports: u16) -> roce::transport::Lane {
    roce::transport::Lane {
        index: port,
        count: ports.max(1),
    }
}

/// QPN of queue pair 0; QP `i` has QPN `QPN_BASE + i`.
pub(super) const QPN_BASE: u32 = 0x100;
/// Work requests a flow keeps posted at once.
pub(super) const POST_AHEAD: u64 = 64;
/// Size of the one memory region every NIC registers.
const REGION: u64 = 1 << 44;

/// One host NIC.
#[derive(Debug)]
pub(crate) struct Nic {
    /// Node index.
    pub node: u32,
    /// Host index.
    pub host: u32,
    /// Global id of its port 0; its other ports follow.
    pub port: u32,
    /// Its ports (one per link of the host; one per plane on a
    /// multi-plane fabric).
    pub ports: u16,
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
    /// Its host side (`[nic.host]`); `None`: an ideal host.
    pub host_side: Option<Box<HostSide>>,
}

/// The host side of one NIC at work: when each PCIe direction and the
/// message engine are next free (see [`crate::hostmodel`]).
#[derive(Debug)]
pub(crate) struct HostSide {
    /// The values.
    pub p: HostParams,
    /// Host-to-NIC direction (DMA read completions) busy until.
    pub down_free: Instant,
    /// NIC-to-host direction (DMA writes, read requests) busy until.
    pub up_free: Instant,
    /// The NIC's message engine takes its next message at.
    pub msg_next: Instant,
}

impl HostSide {
    /// Reserve the host-to-NIC direction for a read of `bytes` whose data
    /// may come from `from`, no earlier than `floor` (the direction does
    /// not bank idle time); returns when the last byte is in the NIC.
    pub fn fetch(&mut self, bytes: u64, from: Instant, floor: Instant) -> Instant {
        let d = self.p.read_data_time(bytes);
        let start = self.down_free.max(from).max(floor);
        self.down_free = start + d;
        let req = self.p.read_request_time(bytes);
        self.up_free = self.up_free.max(floor) + req;
        self.down_free
    }

    /// Reserve the NIC-to-host direction for a write of `bytes` from
    /// `now`; returns when the last byte is written.
    pub fn write(&mut self, bytes: u64, now: Instant) -> Instant {
        self.up_free = self.up_free.max(now) + self.p.write_time(bytes);
        self.up_free
    }
}

/// A queue pair's view of its host side: posted WQEs waiting for the NIC,
/// its message rate, a frame held until its payload is in the NIC.
#[derive(Debug, Default)]
pub(crate) struct QpGate {
    /// When each posted, not yet started message's WQE is in the NIC,
    /// and whether its payload is inline, in post order.
    pub wqes: VecDeque<(Instant, bool)>,
    /// The first PSN never transmitted yet (retransmissions are below).
    pub next_new: Psn,
    /// The QP takes its next message at.
    pub msg_next: Instant,
    /// The current message's payload can be fetched from.
    pub data_from: Instant,
    /// The current message's payload is inline.
    pub inline: bool,
    /// Responder: the last READ request arrived at.
    pub read_req_at: Instant,
    /// A frame pulled from the engine, held until its payload is in the
    /// NIC, and when that is.
    pub staged: Option<(Packet, Instant)>,
}

impl Nic {
    /// The port (local number) a frame this NIC built leaves by: the one
    /// [`SimQp::egress`] gave it, kept in its `ingress` until it leaves.
    pub fn port_of(&self, pkt: &Packet) -> u16 {
        pkt.ingress.min(self.ports.saturating_sub(1))
    }

    /// The NIC of host `host` at node `node`, whose port 0 has global id
    /// `port`, of `ports` ports.
    pub fn new(node: u32, host: u32, (port, ports): (u32, u16), cfg: &NicConfig) -> Nic {
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
            ports,
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
            host_side: cfg.host.as_ref().map(|h| {
                Box::new(HostSide {
                    p: h.resolve(),
                    down_free: Instant::ZERO,
                    up_free: Instant::ZERO,
                    msg_next: Instant::ZERO,
                })
            }),
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

/// A received-frame FIFO of a NIC with a drain rate.
#[derive(Debug, Default)]
pub(crate) struct RxQueue {
    /// Frames waiting to drain.
    pub frames: VecDeque<Packet>,
    /// Bytes waiting.
    pub bytes: u64,
    /// A drain is in progress.
    pub draining: bool,
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
    /// Its host side, when its NIC has one.
    pub gate: Option<Box<QpGate>>,
    /// Requester: flows that found its send queue full (`POST_AHEAD`
    /// work requests), oldest first; they post again as it drains.
    pub starved: VecDeque<u32>,
    /// HPCC responder: the INT record of the last request received, which
    /// its next ACK echoes.
    pub echo: Option<Box<roce::cc::IntRecord>>,
    /// The NIC port (local number) its last request arrived on: with
    /// multipath, where its CNPs leave.
    pub rx_port: u16,
    /// Multipath: the port each queued response leaves by, the one its
    /// request arrived on, oldest first (so that the responses to one
    /// path's packets come back in order on one plane).
    // Boxed on purpose: one pointer per QP without multipath (a
    // simulation holds millions), where a VecDeque would take four words.
    #[allow(clippy::box_collection)]
    pub resp_ports: Option<Box<VecDeque<u16>>>,
}

impl SimQp {
    /// Whether NIC port `port` of `ports` may take this QP's next frame:
    /// with multipath, while one of the port's paths is not avoided; else
    /// only its own port ([`SimQp::pinned_port`]).
    pub fn lane_ok(&self, port: u16, ports: u16, now: Instant) -> bool {
        if self.engine.config().multipath.is_some() {
            self.engine.lane_usable(lane(port, ports), now)
        } else {
            port == self.pinned_port(ports)
        }
    }

    /// The port a QP without multipath uses on a NIC of `ports` ports: its
    /// UDP source port's hash picks one, as a bond's layer-3+4 transmit
    /// hash would (0 on a one-port NIC).
    pub fn pinned_port(&self, ports: u16) -> u16 {
        if ports <= 1 {
            return 0;
        }
        let h = u32::from(self.sport).wrapping_mul(0x9E37_79B1) >> 16;
        (h % u32::from(ports)) as u16
    }

    /// The NIC port (local number, below `ports`) and UDP source port of
    /// a packet this QP sends on `path` (`None`: a response or a QP without
    /// multipath): path `i` leaves by port `i mod ports` with its own
    /// source port; a response by the port its request came in on; a QP
    /// without multipath by its pinned port with its own source port.
    pub fn egress(&self, path: Option<u16>, ports: u16) -> (u16, u16) {
        match path {
            Some(i) => {
                let n = ports.max(1);
                // Distinct, in the range RoCE NICs draw from (49152..).
                let sport = 0xC000 | (self.sport.wrapping_add(i.wrapping_mul(0x2F1)) & 0x3FFF);
                (i % n, sport)
            }
            None if self.engine.config().multipath.is_some() => {
                let k = self
                    .resp_ports
                    .as_deref()
                    .and_then(|r| r.front().copied())
                    .unwrap_or(self.rx_port);
                (k.min(ports.saturating_sub(1)), self.sport)
            }
            None => (self.pinned_port(ports), self.sport),
        }
    }

    /// HPCC: the QP's packets carry INT records (requests collect the
    /// switches' hops, ACKs echo them).
    pub fn carries_int(&self) -> bool {
        matches!(self.engine.config().cc, EngineCc::Hpcc(_))
    }

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

    /// Requester: the work request whose last PSN is `psn`, if one of
    /// `wrs` ends there.
    pub fn wr_ending_at(&self, psn: Psn, len: impl Fn(u64) -> u32) -> Option<u64> {
        let mut first = self.head_psn;
        for &wr in &self.wrs {
            let n = self.npsn(len(wr));
            let last = first.add(n - 1);
            if last == psn {
                return Some(wr);
            }
            if psn.is_before(last) {
                return None;
            }
            first = first.add(n);
        }
        None
    }

    /// Requester: the last PSNs of the work requests of `wrs` that end in
    /// the `count` PSNs from `from` on, in order.
    pub fn wr_ends_within(&self, from: Psn, count: u32, len: impl Fn(u64) -> u32) -> Vec<Psn> {
        let mut out = Vec::new();
        let mut first = self.head_psn;
        for &wr in &self.wrs {
            let last = first.add(self.npsn(len(wr)) - 1);
            let k = last.distance_from(from);
            if last.is_before(from) {
                first = last.next();
                continue;
            }
            if k >= count {
                break;
            }
            out.push(last);
            first = last.next();
        }
        out
    }

    /// Requester: work request `wr` (of `len` bytes) left the send queue;
    /// the next one starts `npsn(len)` PSNs later when it succeeded.
    pub(super) fn retire(&mut self, wr: u64, len: u32, success: bool) {
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
                gate: None,
                starved: VecDeque::new(),
                echo: None,
                rx_port: 0,
                resp_ports: None,
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
            let st = q.engine.stats();
            r.rx_ooo_placed += st.rx_ooo_held + st.rx_read_ooo_placed;
            r.rx_ooo_dropped += st.rx_ooo_dropped;
            r.tx_sacks += st.tx_sacks;
            r.selective_retransmits += st.sr_retransmits;
            r.path_failovers += st.path_failovers;
            r.rx_trimmed += st.rx_trimmed;
            for (counter, v) in st.hw_counters() {
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
        RetransmitMode::SelectiveRepeat => EngineRetransmit::SelectiveRepeat,
    };
    qc.reorder_window = n.effective_reorder_window();
    // A NIC that places out of order gets a RETH in every WRITE packet
    // (IRN): both ends of every connection share the NIC settings.
    qc.write_reth_every_packet = qc.reorder_window > 0;
    qc.multipath = n.multipath.map(|m| roce::transport::MultipathConfig {
        paths: m.paths,
        avoid: m.avoid,
        reorder: m.reorder,
    });
    qc.rto = n
        .effective_rto()
        .map(|(low, high)| roce::transport::RetransmitTimeouts { low, high, few: 3 });
    // No window unless the NIC configures one: a ConnectX QP has none.
    qc.max_unacked_psns = n.window.unwrap_or(u32::MAX);
    // AckReq at least every half window, so that a small window (IRN's
    // BDP cap) is reopened by ACKs, not by the timeout.
    if let Some(w) = n.window.filter(|&w| w < 2 * qc.ack_req_every) {
        qc.ack_req_every = (w / 2).max(1);
    }
    if n.cc.algorithm == CcAlgorithm::Dcqcn {
        let p = dcqcn_params(cfg, line_rate);
        qc.cc = EngineCc::Dcqcn(p);
        qc.min_time_between_cnps = Some(n.cc.dcqcn.cnp_interval(match n.cc.preset {
            DcqcnPreset::Paper => roce::cc::PAPER_CNP_INTERVAL,
            DcqcnPreset::Firmware | DcqcnPreset::Hpcc => roce::cc::CONNECTX_CNP_INTERVAL,
        }));
    }
    if n.cc.algorithm == CcAlgorithm::Hpcc {
        let h = &n.cc.hpcc;
        // The base RTT is the path's, set once the path is known
        // (`QpTable::connect`'s caller); 10 us until then.
        qc.cc = EngineCc::Hpcc(roce::cc::HpccParams {
            line_rate,
            min_rate: h.min_rate.min(line_rate),
            base_rtt: Duration::from_us(10),
            target_ppm: (h.eta * 1e6).round() as u32,
            max_stage: h.max_stage,
            additive: h.ai,
        });
        // The artifact's per-packet ACK: every packet's telemetry returns.
        qc.ack_req_every = 1;
    }
    // Wire bytes of a full frame: Swift's window unit, the frame InfiniBand
    // congestion control delays.
    let frame = n.mtu.bytes() as u32 + 62;
    if n.cc.algorithm == CcAlgorithm::Swift {
        // The base RTT is the path's, set once the path is known; 10 us
        // until then.
        qc.cc = EngineCc::Swift(n.cc.swift.params(line_rate, Duration::from_us(10), frame));
        // Every packet timed by its own ACK.
        qc.ack_req_every = 1;
    }
    if n.cc.algorithm == CcAlgorithm::Timely {
        // The minimum RTT is the path's, set once the path is known;
        // 10 us until then.
        qc.cc = EngineCc::Timely(n.cc.timely.params(line_rate, Duration::from_us(10)));
        qc.ack_req_every = 1;
    }
    if n.cc.algorithm == CcAlgorithm::IbCc {
        let c = &n.cc.ib_cc;
        qc.cc = EngineCc::IbCc(roce::cc::IbCcParams {
            line_rate,
            frame,
            ccti_increase: c.ccti_increase,
            ccti_limit: c.ccti_limit,
            ccti_min: c.ccti_min,
            ccti_timer: c.ccti_timer,
            ipd_step: c.ipd_step.unwrap_or_else(|| {
                Duration::from_ps(line_rate.serialization_time(u64::from(frame)).as_ps() / 8)
            }),
        });
        // The destination returns BECNs as CNPs, as DCQCN's notification
        // point does (at most one per QP per interval).
        qc.min_time_between_cnps = Some(n.cc.dcqcn.cnp_interval(roce::cc::CONNECTX_CNP_INTERVAL));
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
    /// Completions the application has seen (with CQ moderation, a
    /// multiple of it until the last).
    pub seen: u64,
    /// Messages that landed in the destination's memory (counted for
    /// ping-pong partners only).
    pub landed: u64,
    /// Post time of every message (latency tests only).
    pub post_times: Vec<Instant>,
    /// A flow with a deadline: when it passed, and the messages completed
    /// by then.
    pub cut: Option<(Instant, u64)>,
    /// A flow it waits for (directly or not) failed: it is never posted.
    pub blocked: bool,
    /// It waits in its queue pair's `starved` list for room.
    pub starved: bool,
    /// The flows waiting for it were released (at its completion, or
    /// when its data landed for a [`FlowSpec::landing`] flow).
    pub released: bool,
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
            seen: 0,
            landed: 0,
            post_times: Vec::new(),
            cut: None,
            released: false,
            starved: false,
        }
    }
}

/// Length of message `i` of flow `f`.
pub(super) fn message_len(f: &FlowSpec, i: u64) -> u32 {
    (f.size - i * f.message_size).min(f.message_size) as u32
}

/// Length of the message a send work request id names (flow id in the
/// high half, message index in the low half); 0 for an id of no flow.
pub(super) fn wr_len(flows: &[FlowSpec], wr: u64) -> u32 {
    flows
        .get((wr >> 32) as usize)
        .map_or(0, |f| message_len(f, wr & 0xFFFF_FFFF))
}
