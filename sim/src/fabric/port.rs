//! A port: the transmitting side of one link direction, with 8 priority
//! queues, PFC state as transmitter (paused by the peer) and as pauser
//! (asking the peer to stop), and counters.
//!
//! A PAUSE waits behind the frame in flight (a frame on the wire is never
//! cut); it goes before any queued data frame. A transmitter checks its
//! pause state before each new frame.

use std::collections::VecDeque;

use roce::time::{Duration, Instant, Rate};

use super::credits::IbPort;
use super::impairments::Impairments;
use super::packet::PktQueue;
use crate::results::{PortErrors, PrioCounters};

/// One port.
///
/// Laid out in declaration order (`repr(C)`): what every frame touches
/// (state, peer, rate, the queue heads and their byte counts, pause
/// timers) fills the first five cache lines, the counters and logs that
/// reports read come after.
#[derive(Debug)]
#[repr(C)]
pub struct Port {
    /// A frame is being serialised.
    pub busy: bool,
    /// Priorities this port runs PFC on (sends PAUSE for, honours PAUSE
    /// for), as a bit set.
    pub pfc_mask: u8,
    /// Priorities whose PAUSE the transmitter ignores (PFC watchdog storm
    /// action `forward` or `drop`), as a bit set.
    pub wd_ignore: u8,
    /// Priorities whose frames are dropped at this port, queued for it or
    /// arriving on it (watchdog action `drop`), as a bit set.
    pub wd_drop: u8,
    /// Priorities ever held off by a PAUSE, as a bit set: the only ones
    /// [`Port::paused_mask`] looks at.
    pub pause_seen: u8,
    /// Port number on the node.
    pub local: u16,
    /// Owning node index.
    pub node: u32,
    /// Global id of the port at the other end of the link.
    pub peer: u32,
    /// Frames on the wire towards the peer, in arrival order (handles).
    pub(crate) inflight: PktQueue,
    /// Link rate.
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Impairments (fault wrappers) on the link direction leaving this
    /// port (`None`: healthy, the common case).
    pub impairments: Option<Box<Impairments>>,
    /// InfiniBand credit state (`None`: an Ethernet link).
    pub ib: Option<Box<IbPort>>,
    /// Frames serialised (all kinds).
    pub frames_sent: u64,
    /// Bytes queued per priority.
    pub qbytes: [u64; 8],
    /// Egress queues per priority (handles into the world's
    /// [`super::packet::Packets`]).
    pub(crate) queues: [PktQueue; 8],
    /// Transmitter held off for each priority until this time.
    pub paused_until: [Instant; 8],
    /// PFC frames waiting: (priority, quanta).
    pub ctrl: VecDeque<(u8, u16)>,
    /// Largest total queue seen.
    pub max_queue: u64,
    /// Time of the wake-up already scheduled (pause expiry), if any.
    pub wake_at: Option<Instant>,
    /// Start of the current held-off interval, per priority.
    pub pause_began: [Option<Instant>; 8],
    /// XOFF sent to the peer and not cleared: since when, per priority.
    pub xoff_since: [Option<Instant>; 8],
    /// Generation of the pauser state per priority (refresh events carry it).
    pub xoff_gen: [u32; 8],
    /// DWRR deficits.
    pub deficit: [u64; 8],
    /// DWRR position.
    pub rr: u8,
    /// Fault counters (bad FCS, oversize, link down).
    pub errors: PortErrors,
    /// After a link-down: when the last frame lost on the wire would have
    /// arrived (its arrival event is still pending until then).
    pub stale_until: Instant,
    /// Counters per priority.
    pub prio: [PrioCounters; 8],
    /// Frames dropped at this port's ingress.
    pub rx_discards: u64,
    /// Frames lost by the fault.
    pub fault_drops: u64,
    /// Frames marked CE on the way out.
    pub ecn_marked: u64,
    /// Closed held-off intervals `(priority, start_ps, end_ps)`, in the
    /// order they closed, at most `pause_log_cap` of them.
    pub pause_log: Vec<(u8, u64, u64)>,
    /// Most intervals kept in `pause_log` (0: none are kept).
    pub pause_log_cap: usize,
    /// Intervals not kept because the log was full, per priority.
    pub pause_log_dropped: [u64; 8],
    /// Held-off time of all priorities per [`PAUSE_BIN_PS`] bin, kept for
    /// every interval (the log stops at its cap): `(bin, ps held in it)`,
    /// in the order the intervals closed (a bin may repeat).
    pub pause_bins: Vec<(u32, u32)>,
}

/// Width of a [`Port::pause_bins`] bin: 10 us.
pub const PAUSE_BIN_PS: u64 = 10_000_000;

impl Port {
    /// A port of `node` number `local` towards `peer`.
    pub fn new(node: u32, local: u16, peer: u32, rate: Rate, delay: Duration) -> Port {
        Port {
            node,
            local,
            peer,
            rate,
            delay,
            queues: Default::default(),
            qbytes: [0; 8],
            ctrl: VecDeque::new(),
            busy: false,
            inflight: PktQueue::default(),
            paused_until: [Instant::ZERO; 8],
            pause_began: [None; 8],
            wake_at: None,
            xoff_since: [None; 8],
            xoff_gen: [0; 8],
            deficit: [0; 8],
            rr: 0,
            impairments: None,
            pfc_mask: 0,
            pause_seen: 0,
            errors: PortErrors::default(),
            stale_until: Instant::ZERO,
            prio: Default::default(),
            rx_discards: 0,
            fault_drops: 0,
            ecn_marked: 0,
            max_queue: 0,
            frames_sent: 0,
            pause_log: Vec::new(),
            pause_log_cap: 0,
            pause_log_dropped: [0; 8],
            pause_bins: Vec::new(),
            wd_ignore: 0,
            wd_drop: 0,
            ib: None,
        }
    }

    /// A held-off interval of priority `p` ended: count it and log it.
    fn close_pause(&mut self, p: usize, began: Instant, end: Instant) {
        self.prio[p].rx_pause_duration_ps += (end - began).as_ps();
        let (a, z) = (began.as_ps(), end.as_ps());
        let mut bin = a / PAUSE_BIN_PS;
        while bin * PAUSE_BIN_PS < z {
            let lo = a.max(bin * PAUSE_BIN_PS);
            let hi = z.min((bin + 1) * PAUSE_BIN_PS);
            let b = u32::try_from(bin).unwrap_or(u32::MAX);
            match self.pause_bins.last_mut() {
                Some(last) if last.0 == b => last.1 += (hi - lo) as u32,
                _ => self.pause_bins.push((b, (hi - lo) as u32)),
            }
            bin += 1;
        }
        if self.pause_log.len() < self.pause_log_cap {
            self.pause_log.push((p as u8, began.as_ps(), end.as_ps()));
        } else if self.pause_log_cap > 0 {
            self.pause_log_dropped[p] += 1;
        }
    }

    /// Picoseconds this transmitter was held off (any priority, summed)
    /// between `a` and `b` (ps), from [`Port::pause_bins`]: exact for
    /// whole bins, the edge bins' time taken as spread evenly.
    pub fn paused_between(&self, a: u64, b: u64) -> u64 {
        if b <= a {
            return 0;
        }
        let mut total = 0.0;
        for &(bin, ps) in &self.pause_bins {
            let lo = u64::from(bin) * PAUSE_BIN_PS;
            let hi = lo + PAUSE_BIN_PS;
            let overlap = b.min(hi).saturating_sub(a.max(lo));
            if overlap > 0 {
                total += f64::from(ps) * overlap as f64 / PAUSE_BIN_PS as f64;
            }
        }
        total as u64
    }

    /// Priorities whose transmitter is held off at `now`, as a bit set.
    pub fn paused_mask(&self, now: Instant) -> u8 {
        let mut m = 0;
        let mut seen = self.pause_seen;
        while seen != 0 {
            let p = seen.trailing_zeros() as usize;
            seen &= seen - 1;
            if self.paused_until[p] > now {
                m |= 1 << p;
            }
        }
        m
    }

    /// Priorities with queued frames, as a bit set.
    pub fn queued_mask(&self) -> u8 {
        let mut m = 0;
        for p in 0..8 {
            if !self.queues[p].is_empty() {
                m |= 1 << p;
            }
        }
        m
    }

    /// Total bytes queued.
    pub fn total_queued(&self) -> u64 {
        self.qbytes.iter().sum()
    }

    /// Time `quanta` pause quanta (512 bit times each) last at this rate.
    pub fn quanta_time(&self, quanta: u16) -> Duration {
        pause_quanta_time(self.rate, quanta)
    }

    /// A PFC frame for `prio` with `quanta` takes effect at `now`.
    pub fn apply_pause(&mut self, now: Instant, prio: u8, quanta: u16) {
        let p = usize::from(prio);
        self.settle_pause(now, p);
        self.prio[p].rx_pause += 1;
        if quanta == 0 {
            if let Some(began) = self.pause_began[p].take() {
                self.close_pause(p, began, now);
                self.prio[p].rx_pause_transition += 1;
            }
            self.paused_until[p] = now;
        } else {
            if self.pause_began[p].is_none() {
                self.pause_began[p] = Some(now);
            }
            self.paused_until[p] = now + self.quanta_time(quanta);
            self.pause_seen |= 1 << p;
        }
    }

    /// Close a held-off interval that expired on its own before `now`.
    pub fn settle_pause(&mut self, now: Instant, p: usize) {
        if let Some(began) = self.pause_began[p] {
            if self.paused_until[p] <= now {
                self.close_pause(p, began, self.paused_until[p]);
                self.prio[p].rx_pause_transition += 1;
                self.pause_began[p] = None;
            }
        }
    }

    /// Close every interval at the end of a run (an ongoing pause counts
    /// up to `now`).
    pub fn finish(&mut self, now: Instant) {
        for p in 0..8 {
            self.settle_pause(now, p);
            if let Some(began) = self.pause_began[p].take() {
                self.close_pause(p, began, now);
            }
            if let Some(since) = self.xoff_since[p].take() {
                self.prio[p].tx_pause_duration_ps += (now - since).as_ps();
            }
        }
    }
}

/// Time `quanta` pause quanta (512 bit times each) last at `rate`
/// (VALIDATION.md AN-5: 5.12 ns per quantum at 100 Gbps).
pub fn pause_quanta_time(rate: Rate, quanta: u16) -> Duration {
    rate.serialization_time(u64::from(quanta) * 64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quanta_last_512_bit_times() {
        let q1 = |g| pause_quanta_time(Rate::from_gbps(g), 1).as_ps();
        assert_eq!(q1(25), 20_480);
        assert_eq!(q1(40), 12_800);
        assert_eq!(q1(100), 5_120);
        assert_eq!(q1(400), 1_280);
        let max = |g| pause_quanta_time(Rate::from_gbps(g), 0xFFFF);
        // 1.342 ms @25G, 335.5 us @100G, 83.9 us @400G.
        assert_eq!(max(25).as_ps(), 1_342_156_800);
        assert_eq!(max(100).as_ps(), 335_539_200);
        assert_eq!(max(400).as_ps(), 83_884_800);
    }

    #[test]
    fn zero_quanta_resume_at_once_and_durations_add_up() {
        let mut p = Port::new(0, 0, 1, Rate::from_gbps(100), Duration::from_us(1));
        let t0 = Instant::from_ps(1_000_000);
        p.apply_pause(t0, 3, 0xFFFF);
        assert_eq!(p.paused_mask(t0), 1 << 3);
        let t1 = t0 + Duration::from_us(10);
        p.apply_pause(t1, 3, 0);
        assert_eq!(p.paused_mask(t1), 0);
        assert_eq!(p.prio[3].rx_pause, 2);
        assert_eq!(p.prio[3].rx_pause_duration_ps, 10_000_000);
        // Expiry without refresh: the peer resumes when the timer runs out.
        p.apply_pause(t1, 3, 100);
        let later = t1 + Duration::from_us(5);
        assert_eq!(p.paused_mask(later), 0);
        p.finish(later);
        assert_eq!(p.prio[3].rx_pause_duration_ps, 10_000_000 + 512_000);
        assert_eq!(p.prio[3].rx_pause_transition, 2);
        // Logging is off by default.
        assert!(p.pause_log.is_empty());
        assert_eq!(p.pause_log_dropped, [0; 8]);
    }

    #[test]
    fn pause_log_keeps_intervals_up_to_its_cap() {
        let mut p = Port::new(0, 0, 1, Rate::from_gbps(100), Duration::from_us(1));
        p.pause_log_cap = 2;
        let us = |n: u64| Instant::from_ps(n * 1_000_000);
        for (on, off) in [(1, 3), (5, 6), (8, 9)] {
            p.apply_pause(us(on), 3, 0xFFFF);
            p.apply_pause(us(off), 3, 0);
        }
        // Expires on its own (100 quanta = 512 ns at 100G), closed at the end.
        p.apply_pause(us(20), 5, 100);
        p.finish(us(30));
        assert_eq!(
            p.pause_log,
            vec![(3, 1_000_000, 3_000_000), (3, 5_000_000, 6_000_000)]
        );
        assert_eq!(p.pause_log_dropped[3], 1);
        assert_eq!(p.pause_log_dropped[5], 1);
        assert_eq!(p.prio[3].rx_pause_duration_ps, 4_000_000);
        assert_eq!(p.prio[5].rx_pause_duration_ps, 512_000);
    }
}
