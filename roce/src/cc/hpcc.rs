//! HPCC reaction point (Li et al., "HPCC: High Precision Congestion
//! Control", SIGCOMM 2019, Algorithm 1), driven by in-band network
//! telemetry (INT).
//!
//! Every switch on a data packet's path appends one [`IntHop`] at its
//! egress: the port's line rate, the time, the bytes the port has sent so
//! far and its queue length. The responder echoes the record of the
//! packet it acknowledges in its ACK, and the requester's QP hands it to
//! [`Hpcc::on_telemetry`]. From two records of the same hop, one RTT or
//! less apart, the sender knows the hop's utilisation exactly:
//!
//! `u = tx_rate / B + min(qlen, qlen_prev) / (B × T)`
//!
//! (bytes in the queue as time at the hop's rate, over the base RTT `T`).
//! It keeps an EWMA `U` of the most utilised hop, weighted by the time the
//! sample covers (at most `T`), and sets its window `W = Wc / (U / η) +
//! W_AI` when `U ≥ η` or after `max_stage` additive steps, `W = Wc + W_AI`
//! otherwise. The QP is paced at `W / T` and keeps at most `W` in flight
//! ([`Hpcc::window_packets`]); here `W` is held as the rate `W / T`.
//! `Wc`, the reference, moves once per RTT (when an ACK acknowledges the
//! first PSN sent after the previous move); between moves each ACK
//! recomputes the rate from the same reference (the artifact's "fast
//! react").
//!
//! Units: rates in bits per second, times in picoseconds, bytes. Nothing
//! here ticks: no deadline, no timer.

use crate::time::{Duration, Instant, Rate};
use crate::wire::Psn;

use super::control::CongestionControl;

/// Most hops one INT record carries (the artifact's `maxHop`).
pub const INT_MAX_HOPS: usize = 5;

/// Bytes the INT header adds to a packet that carries it: two bytes of hop
/// count and eight per hop, for [`INT_MAX_HOPS`] hops (the artifact's
/// `IntHeader`).
pub const INT_HEADER_BYTES: u32 = 2 + 8 * INT_MAX_HOPS as u32;

/// What one switch egress port reports in a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntHop {
    /// The port's line rate.
    pub rate: Rate,
    /// When the packet left the port.
    pub ts: Instant,
    /// Bytes the port has transmitted since it started (including this
    /// packet).
    pub tx_bytes: u64,
    /// Bytes queued at the port when the packet left.
    pub qlen: u64,
}

/// The INT record of one packet: the hops it crossed, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IntRecord {
    /// Hops filled.
    pub len: u8,
    /// The hops; `hops[..len]` are valid.
    pub hops: [IntHop; INT_MAX_HOPS],
}

impl IntRecord {
    /// Append a hop; a record already full keeps its first
    /// [`INT_MAX_HOPS`] hops, as the artifact's does.
    pub fn push(&mut self, hop: IntHop) {
        if usize::from(self.len) < INT_MAX_HOPS {
            self.hops[usize::from(self.len)] = hop;
            self.len += 1;
        }
    }

    /// The valid hops.
    pub fn hops(&self) -> &[IntHop] {
        &self.hops[..usize::from(self.len).min(INT_MAX_HOPS)]
    }
}

/// HPCC parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HpccParams {
    /// Line rate: the start rate and the ceiling.
    pub line_rate: Rate,
    /// Floor of the rate.
    pub min_rate: Rate,
    /// The base RTT `T` of the QP's path: the window is `rate × T`.
    pub base_rtt: Duration,
    /// Target utilisation η in millionths (the paper: 0.95).
    pub target_ppm: u32,
    /// Additive steps before a multiplicative one even below η
    /// (`maxStage`; the paper 5, the artifact 0).
    pub max_stage: u32,
    /// Additive increase per step, as a rate (`W_AI / T`).
    pub additive: Rate,
}

impl HpccParams {
    /// The artifact's settings for a NIC of `line_rate` on a path of base
    /// RTT `base_rtt`: η = 0.95, maxStage 0, additive increase 50 Mbit/s
    /// (its web results' "ai50"), floor 100 Mbit/s.
    pub fn artifact(line_rate: Rate, base_rtt: Duration) -> HpccParams {
        HpccParams {
            line_rate,
            min_rate: Rate::from_bps(100_000_000),
            base_rtt,
            target_ppm: 950_000,
            max_stage: 0,
            additive: Rate::from_bps(50_000_000),
        }
    }

    /// Check values a type cannot: a positive base RTT and line rate, a
    /// target in (0, 1], a floor at most the line rate.
    pub fn validate(&self) -> Result<(), &'static str> {
        if self.base_rtt == Duration::ZERO {
            return Err("base RTT 0: expected a positive duration");
        }
        if self.line_rate.bps() == 0 || self.min_rate > self.line_rate {
            return Err("expected 0 < min_rate <= line_rate");
        }
        if self.target_ppm == 0 || self.target_ppm > 1_000_000 {
            return Err("target utilisation: expected a fraction in (0, 1]");
        }
        Ok(())
    }
}

/// One QP's HPCC state.
#[derive(Debug, Clone, PartialEq)]
pub struct Hpcc {
    p: HpccParams,
    /// The rate the QP is paced at (`W / T`).
    rate: Rate,
    /// The reference rate (`Wc / T`).
    reference: Rate,
    /// Additive steps since the last multiplicative one.
    stage: u32,
    /// The reference moves when an ACK acknowledges this PSN or later;
    /// `None` before the first record.
    next_update: Option<Psn>,
    /// The last record, hop by hop.
    last: IntRecord,
    /// The EWMA of the most utilised hop's utilisation.
    u: f64,
    /// Records that changed the rate.
    updates: u64,
}

impl Hpcc {
    /// A QP at line rate.
    pub fn new(p: HpccParams) -> Hpcc {
        Hpcc {
            p,
            rate: p.line_rate,
            reference: p.line_rate,
            stage: 0,
            next_update: None,
            last: IntRecord::default(),
            u: 0.0,
            updates: 0,
        }
    }

    /// Set the base RTT `T` (a NIC learns the path's at connection time,
    /// before the QP sends).
    pub fn set_base_rtt(&mut self, rtt: Duration) {
        self.p.base_rtt = rtt;
    }

    /// The parameters.
    pub fn params(&self) -> &HpccParams {
        &self.p
    }

    /// The rate the QP is paced at.
    pub fn current_rate(&self) -> Rate {
        self.rate
    }

    /// The window in packets of `frame` wire bytes: `W = rate × T` (at
    /// least one). HPCC bounds what is in flight by it as well as pacing
    /// at `W / T`: the sum of the windows through a hop is what keeps its
    /// queue near empty.
    pub fn window_packets(&self, frame: u32) -> u32 {
        let bytes = self.rate.bytes_in(self.p.base_rtt);
        (bytes / u64::from(frame.max(1))).clamp(1, u64::from(u32::MAX)) as u32
    }

    /// The utilisation estimate `U` (1.0 = the busiest hop at line rate
    /// with an empty queue).
    pub fn utilisation(&self) -> f64 {
        self.u
    }

    /// Records that changed the rate.
    pub fn updates(&self) -> u64 {
        self.updates
    }

    /// An ACK acknowledging up to `acked` carried `rec`; `sent` is one
    /// past the last PSN the QP has sent (the artifact's `snd_nxt`).
    pub fn on_telemetry(&mut self, acked: Psn, sent: Psn, rec: &IntRecord) {
        let Some(next_update) = self.next_update else {
            // The first record: a baseline for each hop, no rate yet.
            self.last = *rec;
            self.next_update = Some(sent);
            return;
        };
        if rec.len != self.last.len || rec.len == 0 {
            // Another path (or none): start over from this record.
            self.last = *rec;
            return;
        }
        let t_ps = self.p.base_rtt.as_ps() as f64;
        let (mut top, mut span) = (0.0f64, 0.0f64);
        for (now, before) in rec.hops().iter().zip(self.last.hops()) {
            let tau = now.ts.as_ps().saturating_sub(before.ts.as_ps()) as f64;
            if tau <= 0.0 || now.rate.bps() == 0 {
                continue;
            }
            let b = now.rate.bps() as f64;
            let tx = now.tx_bytes.saturating_sub(before.tx_bytes) as f64 * 8.0 / (tau * 1e-12);
            let queued = now.qlen.min(before.qlen) as f64 * 8.0;
            let u = tx / b + queued / (b * t_ps * 1e-12);
            if u > top {
                top = u;
                span = tau;
            }
        }
        self.last = *rec;
        let span = span.min(t_ps);
        self.u = (self.u * (t_ps - span) + top * span) / t_ps;
        let eta = f64::from(self.p.target_ppm) / 1e6;
        let over = self.u / eta;
        let reference = self.reference.bps() as f64;
        let ai = self.p.additive.bps() as f64;
        let (new, stage) = if over >= 1.0 || self.stage >= self.p.max_stage {
            (reference / over.max(f64::MIN_POSITIVE) + ai, 0)
        } else {
            (reference + ai, self.stage + 1)
        };
        let floor = self.p.min_rate.bps() as f64;
        let ceil = self.p.line_rate.bps() as f64;
        let new = Rate::from_bps(new.clamp(floor, ceil) as u64);
        if new != self.rate {
            self.updates += 1;
        }
        self.rate = new;
        if !acked.is_before(next_update) {
            self.reference = new;
            self.stage = stage;
            self.next_update = Some(sent);
        }
    }
}

impl CongestionControl for Hpcc {
    /// The rate; HPCC takes no CNPs and has no timers.
    fn rate(&self) -> Option<Rate> {
        Some(self.rate)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hop(rate_g: u64, ts_us: u64, tx: u64, q: u64) -> IntHop {
        IntHop {
            rate: Rate::from_gbps(rate_g),
            ts: Instant::from_ps(ts_us * 1_000_000),
            tx_bytes: tx,
            qlen: q,
        }
    }

    fn rec(hops: &[IntHop]) -> IntRecord {
        let mut r = IntRecord::default();
        for &h in hops {
            r.push(h);
        }
        r
    }

    fn hpcc() -> Hpcc {
        Hpcc::new(HpccParams::artifact(
            Rate::from_gbps(100),
            Duration::from_us(10),
        ))
    }

    #[test]
    fn a_full_link_with_a_queue_cuts_the_rate_by_eta_over_u() {
        let mut h = hpcc();
        // 100 Gbit/s link, 125 KB sent per 10 us (line rate), 125 KB
        // queued (one base RTT's worth): u = 1 + 1 = 2.
        h.on_telemetry(Psn::new(0), Psn::new(10), &rec(&[hop(100, 0, 0, 125_000)]));
        h.on_telemetry(
            Psn::new(10),
            Psn::new(20),
            &rec(&[hop(100, 10, 125_000, 125_000)]),
        );
        assert!((h.utilisation() - 2.0).abs() < 1e-9, "{}", h.utilisation());
        // Wc / (U / eta) + AI = 100 G x 0.95 / 2 + 50 M.
        let want = 100e9 * 0.95 / 2.0 + 50e6;
        let got = h.current_rate().bps() as f64;
        assert!((got - want).abs() < 1.0, "{got} vs {want}");
    }

    #[test]
    fn below_the_target_the_rate_climbs_additively_once_per_rtt() {
        let mut p = HpccParams::artifact(Rate::from_gbps(100), Duration::from_us(10));
        p.max_stage = 5;
        let mut h = Hpcc::new(p);
        h.rate = Rate::from_gbps(40);
        h.reference = h.rate;
        // A half-used link with no queue: below eta.
        h.on_telemetry(Psn::new(0), Psn::new(100), &rec(&[hop(100, 0, 0, 0)]));
        h.on_telemetry(
            Psn::new(50),
            Psn::new(110),
            &rec(&[hop(100, 10, 62_500, 0)]),
        );
        // Before `sent` (100) is acknowledged the reference stays: each
        // ACK gives reference + AI, not a compounding climb.
        let one = 40e9 + 50e6;
        assert_eq!(h.current_rate().bps() as f64, one);
        h.on_telemetry(
            Psn::new(60),
            Psn::new(120),
            &rec(&[hop(100, 12, 75_000, 0)]),
        );
        assert_eq!(h.current_rate().bps() as f64, one);
        // PSN 100 acknowledged: the reference moves, the next step adds.
        h.on_telemetry(
            Psn::new(100),
            Psn::new(200),
            &rec(&[hop(100, 14, 87_500, 0)]),
        );
        h.on_telemetry(
            Psn::new(120),
            Psn::new(210),
            &rec(&[hop(100, 16, 100_000, 0)]),
        );
        assert_eq!(h.current_rate().bps() as f64, one + 50e6);
    }

    #[test]
    fn the_busiest_hop_decides_and_a_new_path_restarts() {
        let mut h = hpcc();
        let a = |t, tx1, tx2| rec(&[hop(100, t, tx1, 0), hop(400, t, tx2, 0)]);
        h.on_telemetry(Psn::new(0), Psn::new(10), &a(0, 0, 0));
        // Hop 1 at 100 % of 100 G, hop 2 at 25 % of 400 G.
        h.on_telemetry(Psn::new(10), Psn::new(20), &a(10, 125_000, 125_000));
        assert!((h.utilisation() - 1.0).abs() < 1e-9);
        let r = h.current_rate();
        // Three hops now: a baseline only.
        h.on_telemetry(
            Psn::new(20),
            Psn::new(30),
            &rec(&[hop(100, 20, 0, 0), hop(100, 20, 0, 0), hop(100, 20, 0, 0)]),
        );
        assert_eq!(h.current_rate(), r);
    }
}
