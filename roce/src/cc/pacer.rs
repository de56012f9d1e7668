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
//! a few packets' worth (the verbs emulation's `UdpConfig::pacing_burst`),
//! so that one progress round sends what the rate allows since the last
//! round, not one packet.
//!
//! Catch-up: a hardware pacer is never late, a program on a busy host is.
//! When the caller says the sender was held back by the pacer and comes
//! back late (`backlogged`), the tokens of the lateness count, up to
//! `catch_up`: the packets go out as if sent on time, so that the long-run
//! rate is the rate asked for, not what the host's scheduling left. An
//! idle sender (nothing to send) gets only `burst`. With `catch_up` no
//! more than `burst` (the default) this changes nothing.
//!
//! Time is the caller's ([`Instant`], picoseconds); nothing here reads a
//! clock.

use crate::time::{Duration, Instant};

/// A token bucket in wire bytes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacer {
    free_at: Instant,
    burst: Duration,
    catch_up: Duration,
}

impl Pacer {
    /// An empty history: the first packet may leave at once. `burst` is
    /// the bucket's depth, as time at the current rate.
    pub const fn new(burst: Duration) -> Pacer {
        Pacer {
            free_at: Instant::ZERO,
            burst,
            catch_up: Duration::ZERO,
        }
    }

    /// The same, with the tokens of up to `catch_up` of lateness kept for
    /// a backlogged sender (see the module docs).
    pub const fn with_catch_up(burst: Duration, catch_up: Duration) -> Pacer {
        Pacer {
            free_at: Instant::ZERO,
            burst,
            catch_up,
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
    /// `now`. `backlogged`: the sender has been held back by this pacer,
    /// with packets waiting all along, since it last found nothing to send
    /// (it is behind the pacer's schedule, not idle).
    pub fn sent(&mut self, now: Instant, wire: Duration, backlogged: bool) {
        let depth = if backlogged {
            self.burst.max(self.catch_up)
        } else {
            self.burst
        };
        let floor = Instant::from_ps(now.as_ps().saturating_sub(depth.as_ps()));
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
                p.sent(now, wire, false);
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
            p.sent(now, wire, false);
            n += 1;
        }
        let cap = rate.bytes_in(burst) / PKT + 1;
        assert_eq!(n, cap, "a full bucket: {n} packets");
        // 20 µs later, 20 µs of tokens (capped at 10 µs) plus the debt.
        let later = now + Duration::from_us(20);
        let mut m = 0u64;
        while p.ready(later) {
            p.sent(later, wire, false);
            m += 1;
        }
        assert!(m <= cap, "{m} packets after 20 µs, cap {cap}");
        assert!(m >= cap - 1, "{m} packets after 20 µs");
        // 3 µs later: about 3 µs of tokens, several packets in one round.
        let soon = later + Duration::from_us(3);
        let mut k = 0u64;
        while p.ready(soon) {
            p.sent(soon, wire, false);
            k += 1;
        }
        let per3 = rate.bytes_in(Duration::from_us(3)) / PKT;
        assert!(k >= per3 && k <= per3 + 1, "{k} packets in 3 µs");
    }

    #[test]
    fn a_late_backlogged_sender_catches_up_and_an_idle_one_does_not() {
        let rate = Rate::from_gbps(10);
        let wire = rate.serialization_time(PKT);
        let burst = Duration::from_us(10);
        let catch_up = Duration::from_ms(1);
        // Backlogged, asking every 2 µs, but the host stalls it for 300 µs
        // once: over the whole 2 ms it still sends the rate's bytes.
        let mut p = Pacer::with_catch_up(burst, catch_up);
        let mut now = Instant::ZERO;
        let end = Instant::ZERO + Duration::from_ms(2);
        let mut bytes = 0u64;
        let mut blocked = false;
        let mut biggest = 0u64;
        while now < end {
            let mut round = 0u64;
            while p.ready(now) {
                p.sent(now, wire, blocked);
                round += PKT;
            }
            // Still behind: it always has a packet waiting.
            blocked = true;
            bytes += round;
            biggest = biggest.max(round);
            let stalled = now >= Instant::ZERO + Duration::from_us(500)
                && now < Instant::ZERO + Duration::from_us(502);
            now += if stalled {
                Duration::from_us(300)
            } else {
                Duration::from_us(2)
            };
        }
        let want = rate.bytes_in(Duration::from_ms(2)) as f64;
        let err = (bytes as f64 - want) / want;
        assert!(err.abs() < 0.01, "{bytes} B against {want} ({err:+.4})");
        // The catch-up is one round of 300 µs' worth, no more.
        let stall = rate.bytes_in(Duration::from_us(300));
        assert!(
            biggest + PKT >= stall && biggest <= stall + 2 * PKT,
            "{biggest}"
        );
        // Without the flag (idle, nothing was waiting) only the burst.
        let mut q = Pacer::with_catch_up(burst, catch_up);
        q.sent(Instant::ZERO, wire, false);
        let later = Instant::ZERO + Duration::from_us(300);
        let mut n = 0;
        while q.ready(later) {
            q.sent(later, wire, n > 0);
            n += 1;
        }
        assert_eq!(n as u64, rate.bytes_in(burst) / PKT + 1);
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
