//! Two engines over a simulated wire: the test and benchmark harness of
//! the transport, usable by the simulator and the verbs crates.
//!
//! Each direction is a [`Link`] with a serialisation rate, a propagation
//! latency and faults: loss (i.i.d. random with a seed, or a deterministic
//! every-n-th pattern keyed on a per-link packet counter, the IP-ID trick
//! of Guo et al.), reordering (a random extra delay), duplication and CE
//! marking of ECN-capable packets. Everything is deterministic for a given
//! seed: one ChaCha8 stream per link.
//!
//! [`Pair::run_until`] is the bounded drive loop: it advances virtual time
//! event by event and fails with a [`DriveError`] when nothing completes for
//! longer than the stall limit (a livelock or a deadlock), when time runs
//! out, or when the pair goes idle before the goal is met.
//!
//! ```
//! use roce::time::{Duration, Rate};
//! use roce::transport::pair::{ConnectAttrs, Limits, Loss, Pair, WireConfig};
//! use roce::transport::{AccessFlags, ByteMemory, QpConfig, SendOp, SendWr, Sge};
//! use roce::wire::Qpn;
//!
//! let (mut ma, mut mb) = (ByteMemory::new(), ByteMemory::new());
//! let ra = ma.register(0x1000, 1 << 16, AccessFlags::ALL).unwrap();
//! let rb = mb.register(0x1000, 1 << 16, AccessFlags::ALL).unwrap();
//! let wire = WireConfig {
//!     loss: Loss::Random(0.01),
//!     ..WireConfig::clean(Rate::from_gbps(100), Duration::from_us(2))
//! };
//! let mut pair = Pair::connect(
//!     QpConfig::new(Qpn::new(1)), ma,
//!     QpConfig::new(Qpn::new(2)), mb,
//!     ConnectAttrs::default(), wire, wire,
//! ).unwrap();
//! let op = SendOp::Write { remote_addr: 0x1000, rkey: rb.rkey };
//! let sge = Sge { addr: 0x1000, length: 50_000, lkey: ra.lkey };
//! pair.a.qp.post_send(SendWr::new(7, op, sge)).unwrap();
//! pair.run_until(Limits::default(), |p| p.a.completions.len() == 1).unwrap();
//! assert_eq!(pair.a.completions[0].wr_id, 7);
//! ```

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::time::{Duration, Instant, Rate};
use crate::wire::{Ecn, Psn, Qpn, RoceHeaders};

use super::memory::{AccessFlags, Memory, Payload};
use super::qp::{min_deadline, wire_time, Qp, WIRE_OVERHEAD};
use super::types::*;

/// How a link loses packets.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Loss {
    /// No loss.
    None,
    /// Each packet is lost with this probability, independently.
    Random(f64),
    /// Packet number `k` (counting every packet offered to the link from 0)
    /// is lost when `k % n == phase`: a deterministic 1-in-n drop.
    EveryNth {
        /// Period.
        n: u64,
        /// Which residue is dropped.
        phase: u64,
    },
}

/// Which packets the loss applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LossScope {
    /// Every packet.
    #[default]
    All,
    /// Only packets that carry payload (data and READ responses).
    Data,
}

/// One direction of the wire.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WireConfig {
    /// Serialisation rate.
    pub rate: Rate,
    /// Propagation latency.
    pub latency: Duration,
    /// Loss model.
    pub loss: Loss,
    /// Which packets may be lost.
    pub loss_scope: LossScope,
    /// Probability that a packet is delayed by up to `reorder_delay` more.
    pub reorder: f64,
    /// The largest extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Probability that a packet is delivered twice.
    pub duplicate: f64,
    /// Probability that an ECN-capable packet arrives marked CE.
    pub ce: f64,
    /// Seed of this link's random stream.
    pub seed: u64,
}

impl WireConfig {
    /// A clean link: the rate and latency given, no faults.
    pub fn clean(rate: Rate, latency: Duration) -> WireConfig {
        WireConfig {
            rate,
            latency,
            loss: Loss::None,
            loss_scope: LossScope::All,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
            ce: 0.0,
            seed: 1,
        }
    }
}

/// Counters of one link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LinkStats {
    /// Packets offered.
    pub offered: u64,
    /// Packets lost.
    pub dropped: u64,
    /// Packets delivered (duplicates included).
    pub delivered: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Packets that got a CE mark.
    pub ce_marked: u64,
    /// Payload bytes offered.
    pub payload_bytes: u64,
    /// Wire bytes offered (headers and overhead included).
    pub wire_bytes: u64,
}

#[derive(Debug, Clone)]
struct Flight {
    headers: RoceHeaders,
    ecn: Ecn,
    len: u32,
    bytes: Option<Vec<u8>>,
}

/// One direction of the wire: a serialiser, a delay line and faults.
#[derive(Debug, Clone)]
pub struct Link {
    cfg: WireConfig,
    rng: ChaCha8Rng,
    busy_until: Instant,
    /// Packets in arrival order while arrivals are monotonic (the common
    /// case: no reordering), as (arrival, sequence, slot).
    fifo: VecDeque<(Instant, u64, usize)>,
    /// Packets that overtake the FIFO's tail (reordered or duplicated).
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    slots: Vec<Option<Flight>>,
    free: Vec<usize>,
    buffers: Vec<Vec<u8>>,
    seq: u64,
    stats: LinkStats,
    /// The sender stopped pulling because the link was busy.
    wants: bool,
}

impl Link {
    /// A link with this configuration.
    pub fn new(cfg: WireConfig) -> Link {
        Link {
            cfg,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            busy_until: Instant::ZERO,
            fifo: VecDeque::with_capacity(256),
            queue: BinaryHeap::with_capacity(64),
            slots: Vec::with_capacity(256),
            free: Vec::with_capacity(256),
            buffers: Vec::new(),
            seq: 0,
            stats: LinkStats::default(),
            wants: false,
        }
    }

    /// Counters.
    pub fn stats(&self) -> &LinkStats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &WireConfig {
        &self.cfg
    }

    /// Change the configuration (e.g. stop losses) from now on.
    pub fn set_config(&mut self, cfg: WireConfig) {
        self.cfg = cfg;
    }

    fn next_arrival(&self) -> Option<Instant> {
        let heap = self.queue.peek().map(|Reverse((t, _, _))| *t);
        match (self.fifo.front().map(|e| e.0), heap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn send<M: Memory + ?Sized>(&mut self, now: Instant, tx: &Transmit, mem: &M) {
        let plen = tx.payload.len();
        let wire = tx.headers.header_len() as u64
            + plen as u64
            + tx.headers.bth.pad_count as u64
            + WIRE_OVERHEAD as u64;
        let start = self.busy_until.max(now);
        self.busy_until = start + wire_time(self.cfg.rate, wire);
        let k = self.stats.offered;
        self.stats.offered += 1;
        self.stats.wire_bytes += wire;
        self.stats.payload_bytes += plen as u64;
        let eligible = match self.cfg.loss_scope {
            LossScope::All => true,
            LossScope::Data => plen > 0,
        };
        let lost = eligible
            && match self.cfg.loss {
                Loss::None => false,
                Loss::Random(p) => p > 0.0 && self.rng.gen::<f64>() < p,
                Loss::EveryNth { n, phase } => n > 0 && k % n == phase % n,
            };
        if lost {
            self.stats.dropped += 1;
            return;
        }
        let mut ecn = tx.ecn;
        if self.cfg.ce > 0.0 && ecn != Ecn::NotEct && self.rng.gen::<f64>() < self.cfg.ce {
            ecn = Ecn::Ce;
            self.stats.ce_marked += 1;
        }
        let mut arrival = self.busy_until + self.cfg.latency;
        if self.cfg.reorder > 0.0 && self.rng.gen::<f64>() < self.cfg.reorder {
            let max = self.cfg.reorder_delay.as_ps().max(1);
            arrival += Duration::from_ps(self.rng.gen_range(1..=max));
        }
        let bytes = if mem.carries_bytes() {
            let mut b = self.buffers.pop().unwrap_or_default();
            b.clear();
            b.resize(plen as usize, 0);
            if tx.payload.gather(mem, &mut b).is_err() {
                // The engine checked the keys; a failure here means the
                // region went away between post and transmit. Send zeros,
                // as a NIC reading freed memory would send garbage.
                b.iter_mut().for_each(|x| *x = 0);
            }
            Some(b)
        } else {
            None
        };
        let dup = self.cfg.duplicate > 0.0 && self.rng.gen::<f64>() < self.cfg.duplicate;
        let flight = Flight {
            headers: tx.headers,
            ecn,
            len: plen,
            bytes,
        };
        if dup {
            self.stats.duplicated += 1;
            let copy = flight.clone();
            self.enqueue(arrival + Duration::from_ns(1), copy);
        }
        self.enqueue(arrival, flight);
    }

    fn enqueue(&mut self, at: Instant, f: Flight) {
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s] = Some(f);
                s
            }
            None => {
                self.slots.push(Some(f));
                self.slots.len() - 1
            }
        };
        self.seq += 1;
        if self.fifo.back().map_or(true, |b| b.0 <= at) {
            self.fifo.push_back((at, self.seq, slot));
        } else {
            self.queue.push(Reverse((at, self.seq, slot)));
        }
    }

    /// The slot of the next packet due by `now`; the caller reads it in
    /// place and then calls [`Link::release`].
    fn pop_due(&mut self, now: Instant) -> Option<usize> {
        let f = self.fifo.front().map(|e| (e.0, e.1));
        let h = self.queue.peek().map(|Reverse((t, q, _))| (*t, *q));
        let from_fifo = match (f, h) {
            (Some(a), Some(b)) => a < b,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => return None,
        };
        let slot = if from_fifo {
            if f.is_some_and(|(t, _)| t > now) {
                return None;
            }
            self.fifo.pop_front()?.2
        } else {
            if h.is_some_and(|(t, _)| t > now) {
                return None;
            }
            self.queue.pop()?.0 .2
        };
        self.stats.delivered += 1;
        Some(slot)
    }

    fn release(&mut self, slot: usize) {
        if let Some(Flight { bytes: Some(b), .. }) = self.slots[slot].take() {
            self.buffers.push(b);
        }
        self.free.push(slot);
    }
}

/// One end of the pair: its QP, its memory and the completions seen.
#[derive(Debug, Clone)]
pub struct Endpoint<M> {
    /// The QP.
    pub qp: Qp,
    /// Its registered memory.
    pub mem: M,
    /// Completions drained so far (when [`Pair::collect`] is on).
    pub completions: Vec<Completion>,
    /// Completions counted so far (always).
    pub completed: u64,
}

/// Which end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The first QP (usually the requester).
    A,
    /// The second QP.
    B,
}

/// Attributes used to connect the two QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectAttrs {
    /// Path MTU.
    pub mtu: Mtu,
    /// Local ACK timeout exponent.
    pub timeout: u8,
    /// Retry count.
    pub retry_cnt: u8,
    /// RNR retry count.
    pub rnr_retry: u8,
    /// RNR timer code the responders advertise.
    pub min_rnr_timer: u8,
    /// READs/atomics in flight (both directions).
    pub max_rd_atomic: u8,
    /// Remote rights granted by both QPs.
    pub access: AccessFlags,
    /// A's first send PSN (= B's first expected PSN).
    pub psn_a: u32,
    /// B's first send PSN.
    pub psn_b: u32,
    /// UD Q_Key.
    pub qkey: u32,
}

impl Default for ConnectAttrs {
    fn default() -> ConnectAttrs {
        ConnectAttrs {
            mtu: Mtu::Mtu1024,
            timeout: 8,
            retry_cnt: 7,
            rnr_retry: 7,
            min_rnr_timer: 1,
            max_rd_atomic: 16,
            access: AccessFlags::ALL,
            psn_a: 0,
            psn_b: 0,
            qkey: 0x1111_1111,
        }
    }
}

/// Bounds for [`Pair::run_until`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Give up when virtual time passes this.
    pub max_time: Instant,
    /// Fail when no completion at all happens for this long.
    pub stall: Duration,
    /// Fail after this many loop iterations.
    pub max_steps: u64,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_time: Instant::from_ps(Duration::from_secs(10).as_ps()),
            stall: Duration::from_ms(100),
            max_steps: 200_000_000,
        }
    }
}

/// Why the drive loop stopped without reaching its goal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DriveError {
    /// Nothing completed for longer than the stall limit: livelock or
    /// deadlock.
    #[error("no progress since {since} (now {now}): livelock or deadlock")]
    NoProgress {
        /// The last completion.
        since: Instant,
        /// Now.
        now: Instant,
    },
    /// Virtual time ran past the limit.
    #[error("time limit reached at {0}")]
    TimeLimit(Instant),
    /// The step limit was reached.
    #[error("step limit reached at {0}")]
    StepLimit(Instant),
    /// No event is pending and the goal is not met.
    #[error("idle at {0} with the goal not met")]
    Idle(Instant),
}

/// Two QPs over two links.
#[derive(Debug, Clone)]
pub struct Pair<M> {
    /// End A.
    pub a: Endpoint<M>,
    /// End B.
    pub b: Endpoint<M>,
    /// A → B.
    pub ab: Link,
    /// B → A.
    pub ba: Link,
    /// Virtual time.
    pub now: Instant,
    /// Keep completions in [`Endpoint::completions`] (on by default; the
    /// benchmark turns it off to count only).
    pub collect: bool,
    last_progress: Instant,
    scratch: Transmit,
}

impl<M: Memory> Pair<M> {
    /// Two QPs (already created, in RESET) over the given links.
    pub fn new(qp_a: Qp, mem_a: M, qp_b: Qp, mem_b: M, ab: WireConfig, ba: WireConfig) -> Pair<M> {
        Pair {
            a: Endpoint {
                qp: qp_a,
                mem: mem_a,
                completions: Vec::new(),
                completed: 0,
            },
            b: Endpoint {
                qp: qp_b,
                mem: mem_b,
                completions: Vec::new(),
                completed: 0,
            },
            ab: Link::new(ab),
            ba: Link::new(ba),
            now: Instant::ZERO,
            collect: true,
            last_progress: Instant::ZERO,
            scratch: Transmit::EMPTY,
        }
    }

    /// Create and connect two QPs (RESET → INIT → RTR → RTS) with the
    /// given configurations and attributes. A's address handle is 1, B's
    /// is 2.
    pub fn connect(
        cfg_a: QpConfig,
        mem_a: M,
        cfg_b: QpConfig,
        mem_b: M,
        attrs: ConnectAttrs,
        ab: WireConfig,
        ba: WireConfig,
    ) -> Result<Pair<M>, ModifyError> {
        let mut a = Qp::new(cfg_a);
        let mut b = Qp::new(cfg_b);
        bring_up(
            &mut a,
            cfg_b.qpn,
            AddressHandle(2),
            attrs.psn_b,
            attrs.psn_a,
            &attrs,
        )?;
        bring_up(
            &mut b,
            cfg_a.qpn,
            AddressHandle(1),
            attrs.psn_a,
            attrs.psn_b,
            &attrs,
        )?;
        Ok(Pair::new(a, mem_a, b, mem_b, ab, ba))
    }

    /// The endpoint on `side`.
    pub fn side(&mut self, side: Side) -> &mut Endpoint<M> {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }

    fn pump(&mut self) {
        let now = self.now;
        for side in [Side::A, Side::B] {
            let (ep, link) = match side {
                Side::A => (&mut self.a, &mut self.ab),
                Side::B => (&mut self.b, &mut self.ba),
            };
            link.wants = false;
            loop {
                if link.busy_until > now {
                    link.wants = true;
                    break;
                }
                if !ep.qp.poll_transmit_into(now, &ep.mem, &mut self.scratch) {
                    break;
                }
                link.send(now, &self.scratch, &ep.mem);
            }
        }
    }

    fn drain(&mut self) {
        for ep in [&mut self.a, &mut self.b] {
            while let Some(c) = ep.qp.poll_completion() {
                ep.completed += 1;
                self.last_progress = self.now;
                if self.collect {
                    ep.completions.push(c);
                }
            }
        }
    }

    /// The next event time, and the two QPs' deadlines.
    fn next_event(&self) -> (Option<Instant>, Option<Instant>, Option<Instant>) {
        let ta = self.a.qp.poll_timeout();
        let tb = self.b.qp.poll_timeout();
        let mut t = min_deadline(self.ab.next_arrival(), self.ba.next_arrival());
        t = min_deadline(t, min_deadline(ta, tb));
        if self.ab.wants {
            t = min_deadline(t, Some(self.ab.busy_until));
        }
        if self.ba.wants {
            t = min_deadline(t, Some(self.ba.busy_until));
        }
        (t, ta, tb)
    }

    /// Advance to the next event and process it. Returns false when no
    /// event is pending.
    pub fn step(&mut self) -> bool {
        self.pump();
        let (Some(t), ta, tb) = self.next_event() else {
            return false;
        };
        if t > self.now {
            self.now = t;
        }
        let now = self.now;
        for side in [Side::A, Side::B] {
            let (link, ep) = match side {
                Side::A => (&mut self.ab, &mut self.b),
                Side::B => (&mut self.ba, &mut self.a),
            };
            while let Some(slot) = link.pop_due(now) {
                let Some(f) = link.slots[slot].as_ref() else {
                    link.release(slot);
                    continue;
                };
                let payload = match &f.bytes {
                    Some(b) => Payload::Bytes(b),
                    None => Payload::Len(f.len),
                };
                let rx = Received {
                    headers: f.headers,
                    ecn: f.ecn,
                    payload,
                    grh: None,
                    src: match side {
                        Side::A => AddressHandle(1),
                        Side::B => AddressHandle(2),
                    },
                };
                ep.qp.handle_packet(now, &rx, &mut ep.mem);
                link.release(slot);
            }
        }
        // Deadlines set by the packets just handled all lie after `now`, so
        // the ones read before delivery decide which timers are due.
        if ta.is_some_and(|t| t <= now) {
            self.a.qp.handle_timeout(now);
        }
        if tb.is_some_and(|t| t <= now) {
            self.b.qp.handle_timeout(now);
        }
        self.drain();
        true
    }

    /// Drive until `goal` holds, within `limits`. Progress is any
    /// completion on either side; `limits.stall` without one is a
    /// [`DriveError::NoProgress`].
    pub fn run_until(
        &mut self,
        limits: Limits,
        mut goal: impl FnMut(&Pair<M>) -> bool,
    ) -> Result<(), DriveError> {
        self.last_progress = self.now;
        let mut steps = 0u64;
        loop {
            if goal(self) {
                return Ok(());
            }
            if self.now > limits.max_time {
                return Err(DriveError::TimeLimit(self.now));
            }
            if self.now.saturating_duration_since(self.last_progress) > limits.stall {
                return Err(DriveError::NoProgress {
                    since: self.last_progress,
                    now: self.now,
                });
            }
            steps += 1;
            if steps > limits.max_steps {
                return Err(DriveError::StepLimit(self.now));
            }
            if !self.step() {
                // Drain what the last step produced before declaring idle.
                self.pump();
                self.drain();
                if goal(self) {
                    return Ok(());
                }
                if self.next_event().0.is_none() {
                    return Err(DriveError::Idle(self.now));
                }
            }
        }
    }
}

fn bring_up(
    qp: &mut Qp,
    dest: Qpn,
    ah: AddressHandle,
    rq_psn: u32,
    sq_psn: u32,
    a: &ConnectAttrs,
) -> Result<(), ModifyError> {
    let ud = qp.config().qp_type == QpType::Ud;
    let uc = qp.config().qp_type == QpType::Uc;
    let mut attr = QpAttr {
        qp_state: QpState::Init,
        qp_access_flags: a.access,
        qkey: a.qkey,
        ah,
        path_mtu: a.mtu,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        rnr_retry: a.rnr_retry,
        rq_psn: Psn::new(rq_psn).value(),
        max_rd_atomic: a.max_rd_atomic,
        min_rnr_timer: a.min_rnr_timer,
        sq_psn: Psn::new(sq_psn).value(),
        max_dest_rd_atomic: a.max_rd_atomic,
        dest_qp_num: dest,
        ..QpAttr::default()
    };
    let m = |x: QpAttrMask| QpAttrMask::STATE | x;
    let init = if ud {
        QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::QKEY
    } else {
        QpAttrMask::PKEY_INDEX | QpAttrMask::PORT | QpAttrMask::ACCESS_FLAGS
    };
    qp.modify(&attr, m(init))?;
    attr.qp_state = QpState::Rtr;
    let rtr = if ud {
        QpAttrMask::EMPTY
    } else if uc {
        QpAttrMask::AV | QpAttrMask::PATH_MTU | QpAttrMask::DEST_QPN | QpAttrMask::RQ_PSN
    } else {
        QpAttrMask::AV
            | QpAttrMask::PATH_MTU
            | QpAttrMask::DEST_QPN
            | QpAttrMask::RQ_PSN
            | QpAttrMask::MAX_DEST_RD_ATOMIC
            | QpAttrMask::MIN_RNR_TIMER
    };
    qp.modify(&attr, m(rtr))?;
    attr.qp_state = QpState::Rts;
    let rts = if ud || uc {
        QpAttrMask::SQ_PSN
    } else {
        QpAttrMask::TIMEOUT
            | QpAttrMask::RETRY_CNT
            | QpAttrMask::RNR_RETRY
            | QpAttrMask::SQ_PSN
            | QpAttrMask::MAX_QP_RD_ATOMIC
    };
    qp.modify(&attr, m(rts))
}
