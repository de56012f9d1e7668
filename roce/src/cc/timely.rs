//! TIMELY (Mittal et al., "TIMELY: RTT-based Congestion Control for the
//! Datacenter", SIGCOMM 2015): a rate set from the round trip and its
//! gradient.
//!
//! The requester times the packets it sends for the first time and, on
//! each ACK that acknowledges some, hands the round trip of the newest to
//! [`Timely::on_rtt`]. Per sample, with `g` the smoothed RTT difference
//! over the minimum RTT:
//!
//! * below `t_low`: `rate += δ`;
//! * above `t_high`: `rate *= 1 − β (1 − t_high / rtt)`;
//! * otherwise, `g ≤ 0`: `rate += N δ` (`N` = 5 after five such samples
//!   in a row, hyper-active increase, else 1); `g > 0`:
//!   `rate *= 1 − β g`.
//!
//! The RTT difference is an exponentially weighted moving average with
//! weight `alpha`. The rate stays between `min_rate` and the line rate.
//! Units: times in picoseconds, rates in bits per second; fractions are
//! parts per million so that the parameters compare exactly. Nothing here
//! ticks.

use crate::time::{Duration, Instant, Rate};

use super::control::CongestionControl;

/// TIMELY's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelyParams {
    /// Line rate: where the rate starts and its ceiling.
    pub line_rate: Rate,
    /// Below this RTT the rate grows whatever the gradient.
    pub t_low: Duration,
    /// Above this RTT the rate falls whatever the gradient.
    pub t_high: Duration,
    /// The minimum RTT the gradient is normalised by (the path's
    /// propagation round trip); zero: the smallest RTT measured so far,
    /// as on a real network whose paths are not known in advance.
    pub min_rtt: Duration,
    /// Additive increase δ per sample.
    pub ai: Rate,
    /// Hyper-active increase, used after five samples in a row with a
    /// gradient at or below zero (the paper: N δ with N = 5).
    pub hai: Rate,
    /// β, the multiplicative decrease, in millionths (0.8: 800,000).
    pub beta_ppm: u32,
    /// Weight of a new RTT difference in the moving average, in millionths.
    pub alpha_ppm: u32,
    /// The floor of the rate.
    pub min_rate: Rate,
}

impl TimelyParams {
    /// The paper's constants (§6: T_low 50 µs, T_high 500 µs, β 0.8) with
    /// the HPCC artifact's increases (AI 100 Mbit/s, HAI 500 Mbit/s) for a
    /// NIC of `line_rate` on a path of minimum RTT `min_rtt`; the moving
    /// average weighs a new difference 0.875, as the paper's algorithm
    /// does per completion.
    pub fn defaults(line_rate: Rate, min_rtt: Duration) -> TimelyParams {
        TimelyParams {
            line_rate,
            t_low: Duration::from_us(50),
            t_high: Duration::from_us(500),
            min_rtt,
            ai: Rate::from_bps(100_000_000),
            hai: Rate::from_bps(500_000_000),
            beta_ppm: 800_000,
            alpha_ppm: 875_000,
            min_rate: Rate::from_bps(100_000_000),
        }
    }
}

/// TIMELY's settings as users write them (`[nic.cc.timely]` in scenario
/// files, `--cc-param` with `--cc timely`): the paper's thresholds and
/// decrease with the HPCC artifact's increases. What a QP runs is
/// [`TimelySettings::params`] at its line rate and path.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TimelySettings {
    /// Below this RTT the rate grows (50 us).
    pub t_low: Duration,
    /// Above this RTT the rate falls (500 us).
    pub t_high: Duration,
    /// Additive increase per RTT sample (100 Mbit/s).
    pub ai: Rate,
    /// Hyper-active increase after five samples of a falling RTT (500
    /// Mbit/s).
    pub hai: Rate,
    /// Multiplicative decrease factor (0.8).
    pub beta: f64,
    /// Weight of a new RTT difference in its moving average (0.875).
    pub alpha: f64,
    /// Floor of the rate (100 Mbit/s).
    pub min_rate: Rate,
}

impl Default for TimelySettings {
    fn default() -> Self {
        let p = TimelyParams::defaults(Rate::from_bps(1), Duration::ZERO);
        TimelySettings {
            t_low: p.t_low,
            t_high: p.t_high,
            ai: p.ai,
            hai: p.hai,
            beta: f64::from(p.beta_ppm) / 1e6,
            alpha: f64::from(p.alpha_ppm) / 1e6,
            min_rate: p.min_rate,
        }
    }
}

/// The keys of [`TimelySettings`], in the order of the table.
pub const TIMELY_KEYS: [&str; 7] = ["t_low", "t_high", "ai", "hai", "beta", "alpha", "min_rate"];

impl TimelySettings {
    /// All defaults (left out when a configuration is written back).
    pub fn is_default(&self) -> bool {
        *self == TimelySettings::default()
    }

    /// Check the values a type cannot: `Err((key, what was expected))`,
    /// the key as the table names it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        for (k, v) in [("beta", self.beta), ("alpha", self.alpha)] {
            if !(v > 0.0 && v <= 1.0) {
                return Err((k, format!("{v}: expected a number in (0, 1]")));
            }
        }
        if self.t_low >= self.t_high {
            return Err((
                "t_low",
                format!(
                    "{}: expected less than t_high ({})",
                    self.t_low, self.t_high
                ),
            ));
        }
        if self.min_rate.bps() == 0 {
            return Err(("min_rate", "0: expected a positive rate".into()));
        }
        Ok(())
    }

    /// Set one key from its text, as `KEY=VALUE` on a command line
    /// (durations and rates with their unit, fractions as numbers); the
    /// error names the key and what was expected. Ranges and the order of
    /// the thresholds are [`TimelySettings::validate`]'s, once every key is
    /// set.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        super::settings::set_key(self, "TIMELY", &TIMELY_KEYS, key, value)
    }

    /// What a QP of `line_rate` runs; `min_rtt` is its path's propagation
    /// round trip, or zero where it is not known in advance (the smallest
    /// RTT measured stands in for it, [`TimelyParams::min_rtt`]).
    pub fn params(&self, line_rate: Rate, min_rtt: Duration) -> TimelyParams {
        let ppm = |x: f64| (x * 1e6).round() as u32;
        TimelyParams {
            line_rate,
            t_low: self.t_low,
            t_high: self.t_high,
            min_rtt,
            ai: self.ai,
            hai: self.hai,
            beta_ppm: ppm(self.beta),
            alpha_ppm: ppm(self.alpha),
            min_rate: self.min_rate.min(line_rate),
        }
    }
}

/// One QP's TIMELY state.
#[derive(Debug, Clone, PartialEq)]
pub struct Timely {
    p: TimelyParams,
    /// Current rate, bits per second.
    rate: f64,
    /// The previous RTT sample, picoseconds.
    prev_rtt: Option<f64>,
    /// Smoothed RTT difference, picoseconds.
    rtt_diff: f64,
    /// Samples in a row with a gradient at or below zero.
    negative: u32,
    /// The smallest RTT sample, picoseconds (stands in for a zero
    /// [`TimelyParams::min_rtt`]).
    measured_min: f64,
}

impl Timely {
    /// A QP starting at line rate.
    pub fn new(p: TimelyParams) -> Timely {
        Timely {
            p,
            rate: p.line_rate.bps() as f64,
            prev_rtt: None,
            rtt_diff: 0.0,
            negative: 0,
            measured_min: f64::INFINITY,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &TimelyParams {
        &self.p
    }

    /// Set the path's minimum RTT (before the QP sends).
    pub fn set_min_rtt(&mut self, rtt: Duration) {
        self.p.min_rtt = rtt;
    }

    /// The current rate.
    pub fn current_rate(&self) -> Rate {
        Rate::from_bps(self.rate as u64)
    }

    /// A round trip of `rtt` measured at `now`.
    pub fn on_rtt(&mut self, _now: Instant, rtt: Duration) {
        let r = rtt.as_ps() as f64;
        let prev = self.prev_rtt.replace(r).unwrap_or(r);
        let alpha = f64::from(self.p.alpha_ppm) / 1e6;
        self.rtt_diff = (1.0 - alpha) * self.rtt_diff + alpha * (r - prev);
        let beta = f64::from(self.p.beta_ppm) / 1e6;
        self.measured_min = self.measured_min.min(r);
        let min_rtt = if self.p.min_rtt > Duration::ZERO {
            self.p.min_rtt.as_ps() as f64
        } else {
            self.measured_min
        }
        .max(1.0);
        let gradient = self.rtt_diff / min_rtt;
        if rtt < self.p.t_low {
            self.negative = 0;
            self.rate += self.p.ai.bps() as f64;
        } else if rtt > self.p.t_high {
            self.negative = 0;
            let t_high = self.p.t_high.as_ps() as f64;
            self.rate *= 1.0 - beta * (1.0 - t_high / r);
        } else if gradient <= 0.0 {
            self.negative += 1;
            self.rate += if self.negative >= 5 {
                self.p.hai.bps() as f64
            } else {
                self.p.ai.bps() as f64
            };
        } else {
            self.negative = 0;
            self.rate *= (1.0 - beta * gradient).max(0.0);
        }
        self.rate = self
            .rate
            .clamp(self.p.min_rate.bps() as f64, self.p.line_rate.bps() as f64);
    }
}

impl CongestionControl for Timely {
    fn rate(&self) -> Option<Rate> {
        Some(self.current_rate())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t() -> Timely {
        Timely::new(TimelyParams::defaults(
            Rate::from_gbps(100),
            Duration::from_us(10),
        ))
    }

    #[test]
    fn below_t_low_the_rate_grows_by_delta_up_to_the_line() {
        let mut c = t();
        c.rate = 50e9;
        c.on_rtt(Instant::ZERO, Duration::from_us(20));
        assert_eq!(c.current_rate().bps(), 50_100_000_000);
        for _ in 0..1000 {
            c.on_rtt(Instant::ZERO, Duration::from_us(20));
        }
        assert_eq!(c.current_rate(), Rate::from_gbps(100));
    }

    #[test]
    fn above_t_high_the_rate_falls_by_the_overshoot() {
        let mut c = t();
        // 1 ms against 500 us: 1 - 0.8 (1 - 0.5) = 0.6.
        c.on_rtt(Instant::ZERO, Duration::from_ms(1));
        assert_eq!(c.current_rate().bps(), 60_000_000_000);
    }

    #[test]
    fn a_rising_rtt_cuts_and_a_falling_one_grows_hyper_actively() {
        let mut c = t();
        c.on_rtt(Instant::ZERO, Duration::from_us(100));
        // +10 us over a 10 us minimum: gradient 0.875, rate x (1 - 0.7).
        c.on_rtt(Instant::ZERO, Duration::from_us(110));
        let cut = c.current_rate().bps();
        assert!((cut as f64 - 30e9).abs() < 1e6, "{cut}");
        // Falling: additive, then hyper-active from the fifth sample on.
        let mut rtt = 110;
        let mut rates = vec![];
        for _ in 0..6 {
            rtt -= 5;
            c.on_rtt(Instant::ZERO, Duration::from_us(rtt));
            rates.push(c.current_rate().bps());
        }
        let steps: Vec<u64> = rates.windows(2).map(|w| w[1] - w[0]).collect();
        assert_eq!(steps[..3], [100_000_000; 3]);
        assert_eq!(steps[3..], [500_000_000; 2]);
    }

    #[test]
    fn the_rate_never_falls_below_its_floor() {
        let mut c = t();
        for _ in 0..100 {
            c.on_rtt(Instant::ZERO, Duration::from_ms(10));
        }
        assert_eq!(c.current_rate(), Rate::from_bps(100_000_000));
    }
}
