//! The rate limiter of a QP's data packets: a token bucket in wire bytes.
//!
//! The congestion control sets a rate ([`super::CongestionControl::rate`]);
//! the pacer lets data packets out at that rate. Its state is one instant,
//! `free_at`: the bucket holds `rate × min(now − free_at, burst)` bytes of
//! tokens (negative while `now < free_at`: the debt of the last packet).
//! A packet may leave while `now >= free_at`, whatever its size, and
//! moves `free_at` on by its serialization time at the current rate.
//!
//! Guarantees, for a sender that always has a packet ready and asks at
//! least once per `burst`:
//!
//! * over any window of length `W`, the wire bytes sent are at most
//!   `rate × (W + burst)` plus one packet, and at least
//!   `rate × (W − burst)` minus one packet;
//! * after any idle time, at most `rate × burst` bytes plus one packet
//!   leave at once.
//!
//! With `burst = 0` every packet starts one serialization time after the
//! previous one (the simulator's strict spacing). The UDP emulation gives
//! a few packets' worth ([`crate::backend::udp::UdpConfig::pacing_burst`]),
//! so that one progress round sends what the rate allows since the last
//! round, not one packet.
//!
//! Time is the caller's ([`Instant`], picoseconds); nothing here reads a
//! clock.

use crate::time::{Duration, Instant};

/// A token bucket in wire bytes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    free_at: Instant,
    burst: Duration,
}

impl Pacer {
    /// An empty history: the first packet may leave at once. `burst` is
    /// the bucket's depth, as time at the current rate.
    pub const fn new(burst: Duration) -> Pacer {
        Pacer {
            free_at: Instant::ZERO,
            burst,
        }
    }

    /// The bucket's depth.
    pub const fn burst(&self) -> Duration {
        self.burst
    }

    /// Whether a packet may leave at `now`.
    pub fn ready(&self, now: Instant) -> bool {
        now >= self.free_at
    }

    /// When the next packet may leave.
    pub fn ready_at(&self) -> Instant {
        self.free_at
    }

    /// A packet that takes `wire` to serialize at the current rate left at
    /// `now`.
    pub fn sent(&mut self, now: Instant, wire: Duration) {
        let floor = Instant::from_ps(now.as_ps().saturating_sub(self.burst.as_ps()));
        self.free_at = self.free_at.max(floor) + wire;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Rate;

    /// A 4096-byte payload with its headers and Ethernet/IP/UDP/ICRC.
    const PKT: u64 = 4096 + 12 + 46;

    /// A backlogged sender driven by a fake clock that asks at irregular
    /// times (1 to `max_gap_ns` apart, from a fixed LCG): the send times.
    fn drive(rate: Rate, burst: Duration, max_gap_ns: u64, horizon: Duration) -> Vec<Instant> {
        let mut p = Pacer::new(burst);
        let wire = rate.serialization_time(PKT);
        let mut now = Instant::ZERO;
        let mut sends = Vec::new();
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        while now < Instant::ZERO + horizon {
            while p.ready(now) {
                p.sent(now, wire);
                sends.push(now);
            }
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            now += Duration::from_ns(1 + (x >> 33) % max_gap_ns);
        }
        sends
    }

    #[test]
    fn every_1ms_window_carries_the_rate_within_2_percent() {
        let burst = Duration::from_us(10);
        let w = Duration::from_ms(1);
        for gbps in [5u64, 10, 25, 40, 100] {
            let rate = Rate::from_gbps(gbps);
            let sends = drive(rate, burst, 8_000, Duration::from_ms(12));
            let want = rate.bytes_in(w) as f64;
            // Every window that starts at a send, ends within the run.
            let end = *sends.last().unwrap();
            let mut j = 0;
            for (i, &t) in sends.iter().enumerate() {
                if t + w > end {
                    break;
                }
                while j < sends.len() && sends[j] < t + w {
                    j += 1;
                }
                let got = ((j - i) as u64 * PKT) as f64;
                let err = (got - want) / want;
                assert!(
                    err.abs() <= 0.02,
                    "{gbps} Gb/s, window at {t}: {got} B against {want} B ({:+.2} %)",
                    err * 100.0
                );
            }
        }
    }

    #[test]
    fn a_round_sends_what_the_tokens_allow_and_bursts_are_bounded() {
        let rate = Rate::from_gbps(25);
        let burst = Duration::from_us(10);
        let wire = rate.serialization_time(PKT);
        let mut p = Pacer::new(burst);
        // After a long idle time, one round: the burst plus one packet.
        let now = Instant::ZERO + Duration::from_ms(5);
        let mut n = 0u64;
        while p.ready(now) {
            p.sent(now, wire);
            n += 1;
        }
        let cap = rate.bytes_in(burst) / PKT + 1;
        assert_eq!(n, cap, "a full bucket: {n} packets");
        // 20 µs later, 20 µs of tokens (capped at 10 µs) plus the debt.
        let later = now + Duration::from_us(20);
        let mut m = 0u64;
        while p.ready(later) {
            p.sent(later, wire);
            m += 1;
        }
        assert!(m <= cap, "{m} packets after 20 µs, cap {cap}");
        assert!(m >= cap - 1, "{m} packets after 20 µs");
        // 3 µs later: about 3 µs of tokens, several packets in one round.
        let soon = later + Duration::from_us(3);
        let mut k = 0u64;
        while p.ready(soon) {
            p.sent(soon, wire);
            k += 1;
        }
        let per3 = rate.bytes_in(Duration::from_us(3)) / PKT;
        assert!(k >= per3 && k <= per3 + 1, "{k} packets in 3 µs");
    }

    #[test]
    fn without_burst_packets_are_spaced_by_their_serialization_time() {
        let rate = Rate::from_gbps(10);
        let wire = rate.serialization_time(PKT);
        let sends = drive(rate, Duration::ZERO, 500, Duration::from_us(200));
        for pair in sends.windows(2) {
            let gap = pair[1] - pair[0];
            assert!(gap >= wire, "gap {gap} below {wire}");
            assert!(gap < wire + Duration::from_ns(500), "gap {gap}");
        }
    }
}
