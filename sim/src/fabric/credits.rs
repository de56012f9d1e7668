//! InfiniBand's credit-based link-level flow control (IBA vol. 1, 7.9), on
//! a fabric with `link_layer = "infiniband"`.
//!
//! Every port is both ends of a link's two directions, so it holds both
//! halves of the protocol ([`IbPort`]):
//!
//! * as **transmitter** of the direction leaving it: FCTBS, the 12-bit
//!   count of 64-byte blocks sent per virtual lane, and FCCL, the 12-bit
//!   credit limit the receiver last advertised. A frame of `b` blocks may
//!   go when `(FCCL − (FCTBS + b)) mod 4096 ≤ 2048`, the IBA rule, which
//!   bounds what a lane can have outstanding to 2,048 blocks (128 KiB);
//! * as **receiver** of the direction arriving at it: ABR, the 12-bit
//!   count of blocks received, and the blocks its buffer holds. Its credit
//!   limit is `ABR + free blocks (mod 4096)`.
//!
//! A switch frees a frame's blocks at its ingress when the frame leaves
//! the switch; a host when it takes the frame off the wire (or, with a
//! host model that queues, when it drains the frame into memory). Freed
//! blocks are announced in a flow-control packet (FCP) at most once per
//! `fc_period`, sent at once if the last went out longer ago; it reaches
//! the transmitter one propagation delay later (FCPs are a few bytes and
//! are not queued behind data here). A transmitter short of credits on
//! every lane it has frames for waits without sending: the time it waits
//! while idle is `PortXmitWait`, counted in ticks of one block's time at
//! the port's rate.
//!
//! Units: blocks of [`crate::config::IB_BLOCK`] bytes, times in
//! picoseconds.

use roce::time::{Duration, Instant};

use crate::config::{VlArbitration, VlWeight, IB_BLOCK};

/// The 12-bit counters' modulus.
const MOD: u16 = 4096;
/// Half the modulus: the most blocks a lane may have outstanding.
const HALF: u16 = 2048;

/// Blocks a frame of `wire` bytes takes.
pub fn blocks(wire: u32) -> u16 {
    u64::from(wire).div_ceil(IB_BLOCK) as u16
}

/// One port's credit state, both halves.
#[derive(Debug, Clone)]
pub struct IbPort {
    /// Transmitter: blocks sent per lane, modulo 4096 (FCTBS).
    pub fctbs: [u16; 8],
    /// Transmitter: the receiver's last credit limit per lane (FCCL).
    pub fccl: [u16; 8],
    /// Transmitter: credit limits on their way from the receiver, oldest
    /// first, each with the time it arrives.
    pub incoming: std::collections::VecDeque<(Instant, [u16; 8])>,
    /// Transmitter: waiting for credits with frames to send since then.
    pub wait_since: Option<Instant>,
    /// Transmitter: picoseconds spent waiting for credits while idle.
    pub wait_ps: u64,
    /// Receiver: blocks received per lane, modulo 4096 (ABR).
    pub abr: [u16; 8],
    /// Receiver: blocks its buffer holds per lane.
    pub held: [u16; 8],
    /// Receiver: the most blocks its buffer held per lane.
    pub max_held: [u16; 8],
    /// Receiver: the blocks of buffer it has per lane.
    pub limit: u16,
    /// Receiver: an FCP is scheduled.
    pub fcp_pending: bool,
    /// Receiver: when the last FCP went out.
    pub fcp_last: Option<Instant>,
    /// Receiver: FCPs sent.
    pub fcps: u64,
    /// VL arbitration: the high table's and the low table's current
    /// entry and the bytes it may still send (`None`: not started).
    pub arb: [(usize, Option<i64>); 2],
    /// VL arbitration: high-priority bytes sent since a low-priority
    /// frame last went.
    pub high_sent: u64,
}

impl IbPort {
    /// A port whose buffer has `limit` blocks per lane, facing a receiver
    /// with `peer_limit` blocks per lane (the credit limit its first FCP
    /// at link-up advertises).
    pub fn new(limit: u16, peer_limit: u16) -> IbPort {
        IbPort {
            fctbs: [0; 8],
            fccl: [peer_limit % MOD; 8],
            incoming: Default::default(),
            wait_since: None,
            wait_ps: 0,
            abr: [0; 8],
            held: [0; 8],
            max_held: [0; 8],
            limit,
            fcp_pending: false,
            fcp_last: None,
            fcps: 0,
            arb: [(0, None); 2],
            high_sent: 0,
        }
    }

    /// Whether a frame of `need` blocks may go on `lane` now.
    pub fn fits(&self, lane: usize, need: u16) -> bool {
        let after = self.fctbs[lane].wrapping_add(need) % MOD;
        self.fccl[lane].wrapping_sub(after) % MOD <= HALF
    }

    /// Blocks the transmitter may still send on `lane`.
    pub fn available(&self, lane: usize) -> u16 {
        let a = self.fccl[lane].wrapping_sub(self.fctbs[lane]) % MOD;
        if a > HALF {
            0
        } else {
            a
        }
    }

    /// A frame of `need` blocks leaves on `lane`.
    pub fn sent(&mut self, lane: usize, need: u16) {
        self.fctbs[lane] = self.fctbs[lane].wrapping_add(need) % MOD;
    }

    /// A frame of `need` blocks arrived on `lane` into the buffer.
    pub fn received(&mut self, lane: usize, need: u16) {
        self.abr[lane] = self.abr[lane].wrapping_add(need) % MOD;
        self.held[lane] += need;
        self.max_held[lane] = self.max_held[lane].max(self.held[lane]);
    }

    /// The buffer let go of `need` blocks of `lane`.
    pub fn freed(&mut self, lane: usize, need: u16) {
        self.held[lane] = self.held[lane].saturating_sub(need);
    }

    /// The credit limits an FCP sent now carries.
    pub fn credit_limits(&self) -> [u16; 8] {
        let mut out = [0; 8];
        for (l, o) in out.iter_mut().enumerate() {
            let free = self.limit.saturating_sub(self.held[l]);
            *o = self.abr[l].wrapping_add(free) % MOD;
        }
        out
    }

    /// When the next FCP may go out, given one is due at `now`.
    pub fn next_fcp(&self, now: Instant, period: Duration) -> Instant {
        match self.fcp_last {
            Some(t) if t + period > now => t + period,
            _ => now,
        }
    }

    /// Start a wait for credits at `now` (if not waiting already).
    pub fn wait(&mut self, now: Instant) {
        self.wait_since.get_or_insert(now);
    }

    /// End a wait at `now`, counting it.
    pub fn end_wait(&mut self, now: Instant) {
        if let Some(t) = self.wait_since.take() {
            self.wait_ps += now.saturating_duration_since(t).as_ps();
        }
    }
}

/// VL arbitration (IBA 7.6.9) at a port with `state`: the lane to send
/// next among `eligible` (a bit set), `size(lane)` the bytes of its next
/// frame. The high table goes first unless it has sent `high_limit` x
/// 4,096 bytes while a low-priority lane waits; within a table, entries
/// in turn, each sending while its weight (64-byte units) lasts. `None`:
/// no entry serves an eligible lane.
pub fn vl_pick(
    arb: &VlArbitration,
    state: &mut IbPort,
    eligible: u8,
    size: impl Fn(usize) -> u64,
) -> Option<usize> {
    let mask = |t: &[VlWeight]| {
        t.iter()
            .filter(|e| e.weight > 0)
            .fold(0u8, |m, e| m | 1 << e.vl)
    };
    let (hi, lo) = (mask(&arb.high) & eligible, mask(&arb.low) & eligible);
    let limit = if arb.high_limit == 255 {
        u64::MAX
    } else {
        u64::from(arb.high_limit) * 4096
    };
    // Limit 0 still lets one high-priority frame go at a time.
    let high_turn = hi != 0 && (lo == 0 || state.high_sent == 0 || state.high_sent < limit);
    let (table, which) = if high_turn {
        (&arb.high, 0)
    } else if lo != 0 {
        (&arb.low, 1)
    } else {
        return None;
    };
    let lane = weighted_turn(table, &mut state.arb[which], eligible, &size)?;
    if which == 0 {
        state.high_sent += size(lane);
    } else {
        state.high_sent = 0;
    }
    Some(lane)
}

/// One table's weighted round robin: the current entry sends while its
/// weight lasts; an exhausted entry, or one whose lane cannot send, passes
/// the turn to the next.
fn weighted_turn(
    table: &[VlWeight],
    cur: &mut (usize, Option<i64>),
    eligible: u8,
    size: &impl Fn(usize) -> u64,
) -> Option<usize> {
    for _ in 0..=table.len() {
        let Some(e) = table.get(cur.0) else {
            *cur = (0, None);
            continue;
        };
        let lane = usize::from(e.vl);
        if e.weight > 0 && eligible & (1 << lane) != 0 {
            let left = cur.1.get_or_insert(i64::from(e.weight) * 64);
            *left -= size(lane) as i64;
            if *left <= 0 {
                *cur = ((cur.0 + 1) % table.len(), None);
            }
            return Some(lane);
        }
        *cur = ((cur.0 + 1) % table.len(), None);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lane_sends_up_to_its_credit_limit_and_no_further() {
        let mut p = IbPort::new(1024, 100);
        assert_eq!(p.available(0), 100);
        assert!(p.fits(0, 100));
        assert!(!p.fits(0, 101));
        p.sent(0, 60);
        assert_eq!(p.available(0), 40);
        assert!(!p.fits(0, 41));
        assert!(p.fits(1, 100), "lanes are independent");
    }

    #[test]
    fn the_12_bit_counters_wrap_without_losing_credits() {
        // Sender and receiver run 10,000 frames of 65 blocks through a
        // 300-block buffer: the counters wrap many times over.
        let mut tx = IbPort::new(300, 300);
        let mut rx = IbPort::new(300, 300);
        let mut in_buffer = std::collections::VecDeque::new();
        let mut sent = 0;
        while sent < 10_000 {
            if tx.fits(3, 65) {
                tx.sent(3, 65);
                rx.received(3, 65);
                in_buffer.push_back(65);
                sent += 1;
                assert!(rx.held[3] <= 300, "buffer overrun");
            } else {
                // Drain one frame and return the credits.
                rx.freed(3, in_buffer.pop_front().unwrap());
                tx.fccl = rx.credit_limits();
            }
        }
        assert!(tx.fctbs[3] < 4096 && rx.abr[3] == tx.fctbs[3]);
        assert_eq!(rx.max_held[3], 260, "four frames fit in 300 blocks");
    }

    #[test]
    fn outstanding_credits_stop_at_half_the_counter_space() {
        // A receiver that advertised more than 2,048 blocks ahead cannot
        // be told apart from one behind: the rule refuses it.
        let p = IbPort::new(4095, 2049);
        assert_eq!(p.available(0), 0);
        let q = IbPort::new(4095, 2048);
        assert_eq!(q.available(0), 2048);
    }

    fn arb(high: &[(u8, u8)], low: &[(u8, u8)], limit: u8) -> VlArbitration {
        let t = |v: &[(u8, u8)]| {
            v.iter()
                .map(|&(vl, weight)| VlWeight { vl, weight })
                .collect()
        };
        VlArbitration {
            high: t(high),
            low: t(low),
            high_limit: limit,
        }
    }

    /// Lanes sent in `n` picks with every lane of `eligible` always ready
    /// with 4,096-byte frames.
    fn picks(a: &VlArbitration, eligible: u8, n: usize) -> [usize; 8] {
        let mut st = IbPort::new(1, 1);
        let mut count = [0; 8];
        for _ in 0..n {
            count[vl_pick(a, &mut st, eligible, |_| 4096).unwrap()] += 1;
        }
        count
    }

    #[test]
    fn weights_share_a_table_and_the_high_limit_lets_low_through() {
        // Weights 64 and 192 (4 KiB and 12 KiB per turn): 1 to 3.
        let c = picks(&arb(&[], &[(1, 64), (3, 192)], 255), 0b1010, 400);
        assert_eq!((c[1], c[3]), (100, 300));
        // High first without limit: low starves while high has frames.
        let c = picks(&arb(&[(1, 255)], &[(3, 255)], 255), 0b1010, 100);
        assert_eq!((c[1], c[3]), (100, 0));
        // A limit of 4 x 4 KiB: four high frames, then one low.
        let c = picks(&arb(&[(1, 255)], &[(3, 255)], 4), 0b1010, 100);
        assert_eq!((c[1], c[3]), (80, 20));
        // Limit 0: one high frame at a time.
        let c = picks(&arb(&[(1, 255)], &[(3, 255)], 0), 0b1010, 100);
        assert_eq!((c[1], c[3]), (50, 50));
        // A lane in no table never goes.
        let mut st = IbPort::new(1, 1);
        assert_eq!(
            vl_pick(&arb(&[], &[(1, 1)], 255), &mut st, 0b1000, |_| 64),
            None
        );
    }

    #[test]
    fn frames_take_whole_blocks() {
        assert_eq!(blocks(64), 1);
        assert_eq!(blocks(65), 2);
        assert_eq!(blocks(4096 + 82), 66);
    }
}
