//! Swift (Kumar et al., "Swift: Delay is Simple and Effective for
//! Congestion Control in the Datacenter", SIGCOMM 2020): a delay-based
//! window.
//!
//! The requester times the packets it sends for the first time and, on
//! each ACK that acknowledges some, hands the round trip of the newest to
//! [`Swift::on_rtt`] with how many packets it acknowledged. Below the
//! target delay the window grows additively (`ai` packets per window's
//! worth of ACKs); above it, at most once per round trip, it shrinks in
//! proportion to how far the delay overshoots:
//!
//! `cwnd ← cwnd × max(1 − β (delay − target) / delay, 1 − max_mdf)`.
//!
//! The target is the path's base RTT plus a queueing budget. The window is
//! in packets and may fall below one: the QP is then paced at `cwnd`
//! packets per RTT. Units: times in picoseconds, the window in packets,
//! rates in bits per second. Fractions are parts per million so that the
//! parameters compare exactly. Nothing here ticks.

use crate::time::{Duration, Instant, Rate};

use super::control::CongestionControl;

/// Swift's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwiftParams {
    /// Line rate: the most the QP is paced at.
    pub line_rate: Rate,
    /// The path's base RTT (the simulator sets each QP's; the target
    /// is this plus `queueing`). Zero: the smallest RTT measured, as on a
    /// real network whose paths are not known in advance.
    pub base_rtt: Duration,
    /// The queueing delay Swift aims for on top of the base RTT.
    pub queueing: Duration,
    /// Additive increase, in millionths of a packet per window of ACKs
    /// (1 packet: 1,000,000).
    pub ai_ppm: u32,
    /// β, the multiplicative decrease per unit of relative overshoot, in
    /// millionths (0.8: 800,000).
    pub beta_ppm: u32,
    /// The largest decrease at once, in millionths (0.5: 500,000).
    pub max_mdf_ppm: u32,
    /// The window's ceiling, in packets.
    pub max_cwnd: u32,
    /// Wire bytes of a full packet: the unit of the window.
    pub frame: u32,
}

impl SwiftParams {
    /// The paper's defaults for a NIC of `line_rate` on a path of base RTT
    /// `base_rtt` with packets of `frame` wire bytes: 10 µs of queueing,
    /// AI one packet, β 0.8, max_mdf 0.5, a ceiling of 1,024 packets.
    pub fn defaults(line_rate: Rate, base_rtt: Duration, frame: u32) -> SwiftParams {
        SwiftParams {
            line_rate,
            base_rtt,
            queueing: Duration::from_us(10),
            ai_ppm: 1_000_000,
            beta_ppm: 800_000,
            max_mdf_ppm: 500_000,
            max_cwnd: 1024,
            frame,
        }
    }

    /// The target delay.
    pub fn target(&self) -> Duration {
        self.base_rtt + self.queueing
    }
}

/// Swift's settings as users write them (`[nic.cc.swift]` in scenario
/// files, `--cc-param` with `--cc swift`): the paper's by default. What a
/// QP runs is [`SwiftSettings::params`]: its target delay is its path's
/// base RTT plus `queueing`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SwiftSettings {
    /// Queueing delay aimed for above the base RTT (10 us).
    pub queueing: Duration,
    /// Additive increase, packets per window of ACKs (1).
    pub ai: f64,
    /// Multiplicative decrease per unit of relative overshoot (0.8).
    pub beta: f64,
    /// The largest cut at once (0.5).
    pub max_mdf: f64,
    /// The window's ceiling, packets (1024).
    pub max_cwnd: u32,
}

impl Default for SwiftSettings {
    fn default() -> Self {
        let p = SwiftParams::defaults(Rate::from_bps(1), Duration::ZERO, 1);
        SwiftSettings {
            queueing: p.queueing,
            ai: f64::from(p.ai_ppm) / 1e6,
            beta: f64::from(p.beta_ppm) / 1e6,
            max_mdf: f64::from(p.max_mdf_ppm) / 1e6,
            max_cwnd: p.max_cwnd,
        }
    }
}

/// The keys of [`SwiftSettings`], in the order of the table.
pub const SWIFT_KEYS: [&str; 5] = ["queueing", "ai", "beta", "max_mdf", "max_cwnd"];

impl SwiftSettings {
    /// All defaults (left out when a configuration is written back).
    pub fn is_default(&self) -> bool {
        *self == SwiftSettings::default()
    }

    /// Check the values a type cannot: `Err((key, what was expected))`,
    /// the key as the table names it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (k, v, lo, hi) in [
            ("ai", self.ai, 0.0, 1000.0),
            ("beta", self.beta, 0.0, 1.0),
            ("max_mdf", self.max_mdf, 0.0, 1.0),
        ] {
            if !(v > lo && v <= hi) {
                return Err((k, format!("{v}: expected a number in ({lo}, {hi}]")));
            }
        }
        if self.max_cwnd == 0 {
            return Err(("max_cwnd", "0: expected at least 1 packet".into()));
        }
        Ok(())
    }

    /// Set one key from its text, as `KEY=VALUE` on a command line
    /// (durations with their unit, the rest as numbers); the error names
    /// the key and what was expected. Ranges are
    /// [`SwiftSettings::validate`]'s, once every key is set.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        super::settings::set_key(self, "Swift", &SWIFT_KEYS, key, value)
    }

    /// What a QP of `line_rate` runs with packets of `frame` wire bytes;
    /// `base_rtt` is its path's, or zero where it is not known in advance
    /// (the smallest RTT measured stands in for it).
    pub fn params(&self, line_rate: Rate, base_rtt: Duration, frame: u32) -> SwiftParams {
        let ppm = |x: f64| (x * 1e6).round() as u32;
        SwiftParams {
            line_rate,
            base_rtt,
            queueing: self.queueing,
            ai_ppm: ppm(self.ai),
            beta_ppm: ppm(self.beta),
            max_mdf_ppm: ppm(self.max_mdf),
            max_cwnd: self.max_cwnd,
            frame,
        }
    }
}

/// One QP's Swift state.
#[derive(Debug, Clone, PartialEq)]
pub struct Swift {
    p: SwiftParams,
    /// Congestion window, packets.
    cwnd: f64,
    /// The last decrease, if any.
    last_decrease: Option<Instant>,
    /// The last RTT sample.
    rtt: Duration,
    /// The smallest RTT sample: the base RTT when the parameters give
    /// none (a real network's path is not known in advance).
    min_rtt: Option<Duration>,
}

impl Swift {
    /// A QP with a window of a bandwidth-delay product at the target
    /// delay (at least one packet).
    pub fn new(p: SwiftParams) -> Swift {
        let bdp = p.line_rate.bytes_in(p.target()) as f64 / f64::from(p.frame.max(1));
        Swift {
            p,
            cwnd: bdp.clamp(1.0, f64::from(p.max_cwnd.max(1))),
            last_decrease: None,
            rtt: p.base_rtt,
            min_rtt: None,
        }
    }

    /// The delay aimed for: the base RTT (the parameters', else the
    /// smallest sample so far) plus the queueing budget.
    pub fn target(&self) -> Duration {
        let base = if self.p.base_rtt > Duration::ZERO {
            self.p.base_rtt
        } else {
            self.min_rtt.unwrap_or(Duration::ZERO)
        };
        base + self.p.queueing
    }

    /// Set the path's base RTT (before the QP sends): the target and the
    /// first window follow it.
    pub fn set_base_rtt(&mut self, rtt: Duration) {
        self.p.base_rtt = rtt;
        *self = Swift::new(self.p);
    }

    /// The parameters.
    pub fn params(&self) -> &SwiftParams {
        &self.p
    }

    /// The congestion window, packets (may be below one).
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The window in whole packets for the requester: at least one.
    pub fn window_packets(&self) -> u32 {
        (self.cwnd.floor() as u32).max(1)
    }

    /// An ACK acknowledged `acked` packets, the newest sent `rtt` ago.
    pub fn on_rtt(&mut self, now: Instant, rtt: Duration, acked: u32) {
        self.rtt = rtt;
        if self.min_rtt.map_or(true, |m| rtt < m) {
            self.min_rtt = Some(rtt);
        }
        let target = self.target().as_ps() as f64;
        let delay = rtt.as_ps() as f64;
        let ai = f64::from(self.p.ai_ppm) / 1e6;
        if delay < target {
            let n = f64::from(acked);
            if self.cwnd >= 1.0 {
                self.cwnd += ai * n / self.cwnd;
            } else {
                self.cwnd += ai * n;
            }
        } else if self.last_decrease.map_or(true, |t| {
            now.as_ps().saturating_sub(t.as_ps()) >= rtt.as_ps()
        }) {
            let beta = f64::from(self.p.beta_ppm) / 1e6;
            let mdf = f64::from(self.p.max_mdf_ppm) / 1e6;
            let factor = (1.0 - beta * (delay - target) / delay).max(1.0 - mdf);
            self.cwnd *= factor;
            self.last_decrease = Some(now);
        }
        self.cwnd = self.cwnd.clamp(0.001, f64::from(self.p.max_cwnd.max(1)));
    }
}

impl CongestionControl for Swift {
    /// Line rate while the window is a packet or more (the window paces
    /// the QP), `cwnd` packets per RTT below that.
    fn rate(&self) -> Option<Rate> {
        if self.cwnd >= 1.0 {
            return Some(self.p.line_rate);
        }
        let bits = self.cwnd * f64::from(self.p.frame.max(1)) * 8.0;
        let secs = (self.rtt.as_ps().max(1)) as f64 * 1e-12;
        Some(Rate::from_bps(
            ((bits / secs) as u64).clamp(1, self.p.line_rate.bps()),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn swift() -> Swift {
        let p = SwiftParams::defaults(Rate::from_gbps(100), Duration::from_us(10), 4096);
        Swift::new(p)
    }

    #[test]
    fn it_starts_at_a_bdp_and_grows_one_packet_per_window_below_target() {
        let mut s = swift();
        // 100 Gbit/s x 20 us = 250 KB: 61 packets of 4 KB.
        assert_eq!(s.window_packets(), 61);
        let w = s.cwnd();
        for _ in 0..61 {
            s.on_rtt(Instant::ZERO, Duration::from_us(12), 1);
        }
        assert!((s.cwnd() - (w + 1.0)).abs() < 0.05, "{}", s.cwnd());
    }

    #[test]
    fn over_target_it_cuts_by_the_overshoot_once_per_rtt() {
        let mut s = swift();
        let w = s.cwnd();
        // 40 us against a 20 us target: 1 - 0.8 x 20/40 = 0.6.
        s.on_rtt(Instant::from_ps(1_000_000), Duration::from_us(40), 1);
        assert!((s.cwnd() - 0.6 * w).abs() < 1e-9);
        // Within the same RTT: no second cut.
        s.on_rtt(Instant::from_ps(2_000_000), Duration::from_us(40), 1);
        assert!((s.cwnd() - 0.6 * w).abs() < 1e-9);
        // A huge overshoot cuts by max_mdf at most.
        s.on_rtt(Instant::from_ps(2_000_000_000), Duration::from_us(1000), 1);
        assert!((s.cwnd() - 0.3 * w).abs() < 1e-9);
    }

    #[test]
    fn without_a_base_rtt_the_smallest_sample_is_the_base() {
        let p = SwiftParams::defaults(Rate::from_gbps(100), Duration::ZERO, 4096);
        let mut s = Swift::new(p);
        s.on_rtt(Instant::ZERO, Duration::from_us(50), 1);
        s.on_rtt(Instant::ZERO, Duration::from_us(30), 1);
        s.on_rtt(Instant::ZERO, Duration::from_us(45), 1);
        assert_eq!(s.target(), Duration::from_us(40));
    }

    #[test]
    fn below_one_packet_it_paces() {
        let mut s = swift();
        let mut t = 0;
        while s.cwnd() >= 1.0 {
            t += 1_000_000_000;
            s.on_rtt(Instant::from_ps(t), Duration::from_us(1000), 1);
        }
        let r = s.rate().unwrap().bps() as f64;
        let want = s.cwnd() * 4096.0 * 8.0 / 1e-3;
        assert!((r - want).abs() / want < 1e-3, "{r} vs {want}");
        assert_eq!(s.window_packets(), 1);
    }
}
