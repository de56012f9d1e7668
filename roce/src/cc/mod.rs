//! Congestion control: a trait and the built-in algorithms.
//!
//! The transport engine owns one [`AnyCc`] per QP (enum dispatch, no
//! allocation) and consults it for the pacing rate of its data packets.
//! Inputs: [`CongestionControl::on_cnp`] when a CNP arrives for the QP,
//! [`CongestionControl::on_transmit`] for every data packet sent, and
//! [`CongestionControl::handle_timeout`] when the deadline from
//! [`CongestionControl::poll_timeout`] passes. Nothing here ticks on its
//! own: an algorithm with nothing to do returns no deadline.
//!
//! The notification point (CNP generation on CE) lives in the engine,
//! since it is a receive-side duty of every QP (ROCEV2.md §6.2).

mod control;
pub mod dcqcn;
pub mod hpcc;
pub mod ibcc;
pub mod pacer;
mod settings;
pub mod swift;
pub mod timely;

use crate::time::{Duration, Instant, Rate};

pub use control::CongestionControl;
pub use dcqcn::{
    Dcqcn, DcqcnModel, DcqcnOverrides, DcqcnParams, CONNECTX_CNP_INTERVAL, PAPER_CNP_INTERVAL,
};
pub use hpcc::{Hpcc, HpccParams, IntHop, IntRecord, INT_HEADER_BYTES, INT_MAX_HOPS};
pub use ibcc::{IbCc, IbCcParams};
pub use pacer::Pacer;
pub use swift::{Swift, SwiftParams, SwiftSettings, SWIFT_KEYS};
pub use timely::{Timely, TimelyParams, TimelySettings, TIMELY_KEYS};

/// Which algorithm a QP uses, with its parameters. In files:
/// `{ algorithm = "none" }`, `{ algorithm = "dcqcn", model = ..., ... }`
/// or `{ algorithm = "hpcc", ... }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "algorithm", rename_all = "snake_case")]
pub enum CcConfig {
    /// No congestion control: send as fast as the caller pulls.
    #[default]
    None,
    /// DCQCN reaction point.
    Dcqcn(DcqcnParams),
    /// HPCC reaction point, fed by INT records in ACKs
    /// ([`Hpcc::on_telemetry`]).
    Hpcc(HpccParams),
    /// Swift: a delay-based window, fed by the round trips the requester
    /// times ([`Swift::on_rtt`]).
    Swift(SwiftParams),
    /// TIMELY: a rate from the round trip and its gradient, fed as Swift
    /// is ([`Timely::on_rtt`]).
    Timely(TimelyParams),
    /// InfiniBand's congestion control: BECNs (CNPs) climb a table of
    /// inter-packet delays, a timer walks it back.
    IbCc(IbCcParams),
}

/// The built-in algorithms, as one type.
// One per QP, held inline on purpose: boxing the DCQCN state would cost a
// pointer chase on every packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum AnyCc {
    /// `none`.
    None(NoCc),
    /// `dcqcn`.
    Dcqcn(Dcqcn),
    /// `hpcc`.
    Hpcc(Hpcc),
    /// `swift`.
    Swift(Swift),
    /// `timely`.
    Timely(Timely),
    /// `ib_cc`.
    IbCc(IbCc),
}

impl AnyCc {
    /// Build the algorithm a configuration names.
    pub fn new(config: CcConfig) -> AnyCc {
        match config {
            CcConfig::None => AnyCc::None(NoCc),
            CcConfig::Dcqcn(p) => AnyCc::Dcqcn(Dcqcn::new(p)),
            CcConfig::Hpcc(p) => AnyCc::Hpcc(Hpcc::new(p)),
            CcConfig::Swift(p) => AnyCc::Swift(Swift::new(p)),
            CcConfig::Timely(p) => AnyCc::Timely(Timely::new(p)),
            CcConfig::IbCc(p) => AnyCc::IbCc(IbCc::new(p)),
        }
    }
}

impl AnyCc {
    /// Whether CNPs drive the algorithm: DCQCN's and InfiniBand's (whose
    /// BECNs the CNPs stand for). HPCC reads telemetry, Swift and TIMELY
    /// round trips: a CNP to their QP is ignored, as to a QP without
    /// congestion control.
    pub fn reacts_to_cnp(&self) -> bool {
        matches!(self, AnyCc::Dcqcn(_) | AnyCc::IbCc(_))
    }

    /// The rate when it is below the line rate, `None` otherwise: what a
    /// ConnectX rate limiter holds a QP to. The NIC attaches a limiter at
    /// the first CNP and lets the link alone pace a QP at full speed.
    pub fn rate_below_line(&self) -> Option<Rate> {
        let line = match self {
            AnyCc::None(_) => return None,
            AnyCc::Dcqcn(d) => d.params().line_rate,
            AnyCc::Hpcc(h) => h.params().line_rate,
            AnyCc::Swift(s) => s.params().line_rate,
            AnyCc::Timely(t) => t.params().line_rate,
            AnyCc::IbCc(c) => c.params().line_rate,
        };
        self.rate().filter(|&r| r < line)
    }
}

impl CongestionControl for AnyCc {
    fn rate(&self) -> Option<Rate> {
        match self {
            AnyCc::None(c) => c.rate(),
            AnyCc::Dcqcn(c) => c.rate(),
            AnyCc::Hpcc(c) => c.rate(),
            AnyCc::Swift(c) => c.rate(),
            AnyCc::Timely(c) => c.rate(),
            AnyCc::IbCc(c) => c.rate(),
        }
    }
    fn on_cnp(&mut self, now: Instant) {
        match self {
            AnyCc::None(c) => c.on_cnp(now),
            AnyCc::Dcqcn(c) => c.on_cnp(now),
            AnyCc::Hpcc(c) => c.on_cnp(now),
            AnyCc::Swift(c) => c.on_cnp(now),
            AnyCc::Timely(c) => c.on_cnp(now),
            AnyCc::IbCc(c) => c.on_cnp(now),
        }
    }
    fn on_transmit(&mut self, now: Instant, bytes: u64) {
        match self {
            AnyCc::None(c) => c.on_transmit(now, bytes),
            AnyCc::Dcqcn(c) => c.on_transmit(now, bytes),
            AnyCc::Hpcc(c) => c.on_transmit(now, bytes),
            AnyCc::Swift(c) => c.on_transmit(now, bytes),
            AnyCc::Timely(c) => c.on_transmit(now, bytes),
            AnyCc::IbCc(c) => c.on_transmit(now, bytes),
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            AnyCc::None(c) => c.poll_timeout(),
            AnyCc::Dcqcn(c) => c.poll_timeout(),
            AnyCc::Hpcc(c) => c.poll_timeout(),
            AnyCc::Swift(c) => c.poll_timeout(),
            AnyCc::Timely(c) => c.poll_timeout(),
            AnyCc::IbCc(c) => c.poll_timeout(),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self {
            AnyCc::None(c) => c.handle_timeout(now),
            AnyCc::Dcqcn(c) => c.handle_timeout(now),
            AnyCc::Hpcc(c) => c.handle_timeout(now),
            AnyCc::Swift(c) => c.handle_timeout(now),
            AnyCc::Timely(c) => c.handle_timeout(now),
            AnyCc::IbCc(c) => c.handle_timeout(now),
        }
    }
}

/// No congestion control: unlimited rate, no timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoCc;

impl CongestionControl for NoCc {
    fn rate(&self) -> Option<Rate> {
        None
    }
}

/// Congestion control as a user names it: `rocelab perftest --cc
/// none|dcqcn[:paper|firmware]|swift|timely` with `--cc-param KEY=VALUE`
/// and `--cnp-interval`, a device's configuration, the drop-in library's
/// `ROCELAB_IBV_CC`. [`CcSpec::resolve`] turns it into what an engine runs:
/// the reaction point's [`CcConfig`] (a preset of [`DcqcnParams`] with the
/// [`DcqcnOverrides`] applied, or a delay-based algorithm's settings) and
/// the notification point's CNP interval.
///
/// The notification point is always on, as a NIC's: with `none` (or a
/// delay-based algorithm) the QP still answers CE with CNPs, every
/// [`CONNECTX_CNP_INTERVAL`] unless the interval is set. The interval's
/// default follows the preset: [`PAPER_CNP_INTERVAL`] with `dcqcn:paper`,
/// ConnectX's otherwise.
///
/// HPCC is not offered here: it needs INT telemetry from every switch on
/// the path, which a network of hosts and plain switches does not carry.
/// Swift and TIMELY need only the round trips the requester times, which
/// any network carries.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CcSpec {
    /// The DCQCN preset the reaction point starts from (`paper` or
    /// `firmware`, [`DcqcnParams::preset`]); `None`: no DCQCN.
    pub dcqcn: Option<DcqcnModel>,
    /// DCQCN parameters over the preset, keys as in scenario files'
    /// `[nic.cc.dcqcn]`; `min_time_between_cnps` is the notification
    /// point's CNP interval (the only key that applies without DCQCN).
    pub overrides: DcqcnOverrides,
    /// A delay-based algorithm instead of DCQCN, with its settings (keys
    /// as in `[nic.cc.swift]` and `[nic.cc.timely]`).
    pub delay: Option<DelayCc>,
    /// The rate the algorithm starts at and never exceeds; `None`: the
    /// device's link speed. Given, the emulation also holds QPs to it at
    /// full speed, as a link of that speed would (without it, a QP at full
    /// speed is not paced, as a ConnectX QP before its first CNP).
    pub line_rate: Option<Rate>,
}

/// A delay-based algorithm as [`CcSpec`] names it. Its path's base RTT is
/// not known in advance, so each QP takes the smallest RTT it measures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DelayCc {
    /// `swift`.
    Swift(SwiftSettings),
    /// `timely`.
    Timely(TimelySettings),
}

impl CcSpec {
    /// Parse the algorithm: `none`, `dcqcn` (the firmware preset),
    /// `dcqcn:paper`, `dcqcn:firmware` (alias `dcqcn:connectx`), `swift`,
    /// `timely`.
    pub fn parse(s: &str) -> Result<CcSpec, String> {
        const EXPECTED: &str = "expected none, dcqcn, dcqcn:paper, dcqcn:firmware, swift or timely";
        let (alg, preset) = match s.trim().split_once(':') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let mut spec = CcSpec::default();
        match (alg, preset) {
            ("none", None) => {}
            ("dcqcn", None) => spec.dcqcn = Some(DcqcnModel::Firmware),
            ("dcqcn", Some(p)) => match DcqcnParams::preset(p, Rate::from_bps(1)) {
                Some(params) => spec.dcqcn = Some(params.model),
                None => return Err(format!("{s:?}: unknown DCQCN preset {p:?}: {EXPECTED}")),
            },
            ("swift", None) => spec.delay = Some(DelayCc::Swift(SwiftSettings::default())),
            ("timely", None) => spec.delay = Some(DelayCc::Timely(TimelySettings::default())),
            ("hpcc", None) => {
                return Err(format!(
                    "{s:?}: HPCC needs INT telemetry from every switch on the path, which \
                     this network does not carry (the simulator has it: nic.cc.algorithm = \
                     \"hpcc\"); {EXPECTED}"
                ))
            }
            _ => return Err(format!("{s:?}: {EXPECTED}")),
        }
        Ok(spec)
    }

    /// Set one parameter from `KEY=VALUE`: `line_rate`, the CNP interval
    /// `min_time_between_cnps`, and a key of the algorithm's table
    /// (`[nic.cc.dcqcn]`, `[nic.cc.swift]` or `[nic.cc.timely]`; without an
    /// algorithm, DCQCN's keys, which [`CcSpec::validate`] then refuses).
    pub fn set_param(&mut self, kv: &str) -> Result<(), String> {
        let Some((k, v)) = kv.split_once('=') else {
            return Err(format!("{kv:?}: expected KEY=VALUE, e.g. rate_ai=40Mbps"));
        };
        let (k, v) = (k.trim(), v.trim());
        if k == "line_rate" {
            let r: Rate = v.parse().map_err(|e| format!("line_rate: {e}"))?;
            if r.bps() == 0 {
                return Err(format!("line_rate = {v:?}: expected a positive rate"));
            }
            self.line_rate = Some(r);
            return Ok(());
        }
        match &mut self.delay {
            Some(DelayCc::Swift(w)) if k != "min_time_between_cnps" => w.set(k, v),
            Some(DelayCc::Timely(t)) if k != "min_time_between_cnps" => t.set(k, v),
            _ => self.overrides.set(k, v),
        }
    }

    /// Check that the parameters fit the algorithm: without DCQCN only
    /// the notification point's `min_time_between_cnps` of DCQCN's keys
    /// means anything, and `line_rate` needs an algorithm.
    pub fn validate(&self) -> Result<(), String> {
        self.overrides
            .validate()
            .map_err(|(k, e)| format!("{k} = {e}"))?;
        match self.delay {
            Some(DelayCc::Swift(w)) => w.validate(),
            Some(DelayCc::Timely(t)) => t.validate(),
            None => Ok(()),
        }
        .map_err(|(k, e)| format!("{k} = {e}"))?;
        if self.dcqcn.is_none() {
            let rp_only = DcqcnOverrides {
                min_time_between_cnps: None,
                ..self.overrides
            };
            if rp_only != DcqcnOverrides::default() {
                return Err(
                    "DCQCN parameters need dcqcn congestion control (without it only min_time_between_cnps applies)"
                        .into(),
                );
            }
            if self.delay.is_none() && self.line_rate.is_some() {
                return Err("line_rate needs congestion control (dcqcn, swift or timely)".into());
            }
        }
        Ok(())
    }

    /// Whether a reaction point runs (DCQCN, Swift or TIMELY).
    pub fn is_on(&self) -> bool {
        self.dcqcn.is_some() || self.delay.is_some()
    }

    /// The notification point's CNP interval.
    pub fn cnp_interval(&self) -> Duration {
        let default = self
            .dcqcn
            .map_or(CONNECTX_CNP_INTERVAL, |m| m.default_cnp_interval());
        self.overrides.cnp_interval(default)
    }

    /// What an engine runs on a link of `link_rate` (used unless
    /// [`CcSpec::line_rate`] is set) with packets of at most `frame` wire
    /// bytes (Swift's window unit): the reaction point and the
    /// notification point's CNP interval. The delay-based algorithms'
    /// base RTT is left at zero: each QP takes the smallest it measures.
    pub fn resolve(&self, link_rate: Rate, frame: u32) -> (CcConfig, Duration) {
        let line = self.line_rate.unwrap_or(link_rate);
        let cc = match (self.dcqcn, self.delay) {
            (Some(model), _) => {
                let mut p = DcqcnParams::preset(model.preset_name(), line)
                    .unwrap_or_else(|| DcqcnParams::connectx(line));
                self.overrides.apply(&mut p);
                CcConfig::Dcqcn(p)
            }
            (None, Some(DelayCc::Swift(w))) => {
                CcConfig::Swift(w.params(line, Duration::ZERO, frame))
            }
            (None, Some(DelayCc::Timely(t))) => CcConfig::Timely(t.params(line, Duration::ZERO)),
            (None, None) => CcConfig::None,
        };
        (cc, self.cnp_interval())
    }
}

impl core::fmt::Display for CcSpec {
    /// The algorithm as `--cc` takes it: `none`, `dcqcn:paper`,
    /// `dcqcn:firmware`, `swift`, `timely`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match (self.dcqcn, self.delay) {
            (Some(m), _) => write!(f, "dcqcn:{}", m.preset_name()),
            (None, Some(DelayCc::Swift(_))) => f.write_str("swift"),
            (None, Some(DelayCc::Timely(_))) => f.write_str("timely"),
            (None, None) => f.write_str("none"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_into_presets_and_resolve_at_the_link_rate() {
        let line = Rate::from_gbps(25);
        let none = CcSpec::parse("none").unwrap();
        assert_eq!(
            none.resolve(line, 4142),
            (CcConfig::None, CONNECTX_CNP_INTERVAL)
        );
        let fw = CcSpec::parse("dcqcn").unwrap();
        assert_eq!(fw, CcSpec::parse("dcqcn:firmware").unwrap());
        assert_eq!(fw, CcSpec::parse("dcqcn:connectx").unwrap());
        assert_eq!(
            fw.resolve(line, 4142),
            (
                CcConfig::Dcqcn(DcqcnParams::connectx(line)),
                CONNECTX_CNP_INTERVAL
            )
        );
        let paper = CcSpec::parse("dcqcn:paper").unwrap();
        assert_eq!(paper.to_string(), "dcqcn:paper");
        assert_eq!(
            paper.resolve(line, 4142),
            (
                CcConfig::Dcqcn(DcqcnParams::paper(line)),
                PAPER_CNP_INTERVAL
            )
        );
        for bad in [
            "",
            "dcqcn:",
            "dcqcn:hpcc",
            "DCQCN",
            "none:paper",
            "timely:x",
            "hpcc",
        ] {
            let e = CcSpec::parse(bad).unwrap_err();
            assert!(e.contains("expected none, dcqcn"), "{bad:?}: {e}");
        }
        assert!(CcSpec::parse("hpcc").unwrap_err().contains("INT telemetry"));
    }

    #[test]
    fn delay_based_algorithms_take_their_tables_keys_and_measure_their_base_rtt() {
        let line = Rate::from_gbps(10);
        let mut t = CcSpec::parse("timely").unwrap();
        assert_eq!(t.to_string(), "timely");
        t.set_param("t_low=20us").unwrap();
        t.set_param("beta=0.5").unwrap();
        t.set_param("min_time_between_cnps=8us").unwrap();
        t.validate().unwrap();
        let (cc, cnp) = t.resolve(line, 1070);
        let CcConfig::Timely(p) = cc else {
            panic!("{cc:?}")
        };
        assert_eq!(p.t_low, Duration::from_us(20));
        assert_eq!(p.beta_ppm, 500_000);
        assert_eq!(
            p.t_high,
            Duration::from_us(500),
            "the rest keep their defaults"
        );
        assert_eq!((p.line_rate, p.min_rtt), (line, Duration::ZERO));
        assert_eq!(cnp, Duration::from_us(8));
        // Errors name the key and what was expected.
        // Keys are checked together once all are set: thresholds may be
        // raised in either order.
        let mut raised = t;
        raised.set_param("t_low=600us").unwrap();
        let e = raised.validate().unwrap_err();
        assert!(e.contains("t_low") && e.contains("less than t_high"), "{e}");
        raised.set_param("t_high=2ms").unwrap();
        raised.validate().unwrap();
        let mut bad = t;
        bad.set_param("beta=2").unwrap();
        let e = bad.validate().unwrap_err();
        assert!(e.contains("beta = 2: expected a number in (0, 1]"), "{e}");
        let e = t.set_param("rate_ai=1Mbps").unwrap_err();
        assert!(
            e.contains("unknown TIMELY parameter") && e.contains("t_high"),
            "{e}"
        );
        let e = t.set_param("t_high=5").unwrap_err();
        assert!(e.contains("t_high"), "{e}");
        let mut w = CcSpec::parse("swift").unwrap();
        w.set_param("queueing=200us").unwrap();
        w.set_param("max_cwnd=64").unwrap();
        w.set_param("line_rate=1Gbps").unwrap();
        w.validate().unwrap();
        let (cc, _) = w.resolve(line, 1070);
        let CcConfig::Swift(p) = cc else {
            panic!("{cc:?}")
        };
        assert_eq!(p.queueing, Duration::from_us(200));
        assert_eq!((p.max_cwnd, p.frame), (64, 1070));
        assert_eq!(
            (p.line_rate, p.base_rtt),
            (Rate::from_gbps(1), Duration::ZERO)
        );
        w.set_param("max_cwnd=0").unwrap();
        assert!(w.validate().unwrap_err().contains("at least 1"));
        // line_rate alone names no algorithm to hold it.
        let mut n = CcSpec::parse("none").unwrap();
        n.set_param("line_rate=1Gbps").unwrap();
        assert!(n.validate().unwrap_err().contains("line_rate needs"));
    }

    #[test]
    fn timely_without_a_known_path_normalises_by_the_smallest_rtt_measured() {
        let mut c = Timely::new(TimelyParams::defaults(Rate::from_gbps(100), Duration::ZERO));
        c.on_rtt(Instant::ZERO, Duration::from_us(100));
        // +10 us over the 100 us measured: gradient 0.0875, rate x 0.93.
        c.on_rtt(Instant::ZERO, Duration::from_us(110));
        let r = c.current_rate().bps() as f64;
        assert!((r - 93e9).abs() < 1e6, "{r}");
    }

    #[test]
    fn the_rate_limits_only_below_the_line_rate() {
        use crate::cc::CongestionControl;
        let line = Rate::from_gbps(25);
        let mut cc = AnyCc::new(CcConfig::Dcqcn(DcqcnParams::connectx(line)));
        assert_eq!(cc.rate(), Some(line));
        assert_eq!(cc.rate_below_line(), None, "full speed: no limiter");
        cc.on_cnp(Instant::ZERO);
        let cut = cc.rate().unwrap();
        assert!(cut < line);
        assert_eq!(cc.rate_below_line(), Some(cut));
        assert_eq!(AnyCc::new(CcConfig::None).rate_below_line(), None);
    }

    #[test]
    fn parameters_override_the_preset_by_their_scenario_names() {
        let mut s = CcSpec::parse("dcqcn:paper").unwrap();
        s.set_param("rate_ai=80Mbps").unwrap();
        s.set_param("g=0.5").unwrap();
        s.set_param("fast_recovery_steps=3").unwrap();
        s.set_param("clamp_target_rate=false").unwrap();
        s.set_param("min_time_between_cnps=20us").unwrap();
        s.set_param("line_rate=10Gbps").unwrap();
        s.validate().unwrap();
        let (cc, cnp) = s.resolve(Rate::from_gbps(100), 4142);
        let CcConfig::Dcqcn(p) = cc else {
            panic!("{cc:?}")
        };
        assert_eq!(p.line_rate, Rate::from_gbps(10));
        assert_eq!(p.ai_rate, Rate::from_bps(80_000_000));
        assert_eq!((p.g_num, p.g_den), (1 << 19, 1 << 20));
        assert_eq!(p.threshold, 3);
        assert!(!p.clamp_tgt_rate);
        assert_eq!(p.model, DcqcnModel::Paper);
        assert_eq!(cnp, Duration::from_us(20));
        // Errors name the key and what was expected.
        let e = s.set_param("rate_ai=fast").unwrap_err();
        assert!(e.contains("rate_ai") && e.contains("expected"), "{e}");
        let e = s.set_param("rate_increase_timer=55").unwrap_err();
        assert!(
            e.contains("rate_increase_timer") && e.contains("unit"),
            "{e}"
        );
        let e = s.set_param("g=2").unwrap_err();
        assert!(e.contains("g = 2: expected a gain in (0, 1]"), "{e}");
        let e = s.set_param("alpha=1").unwrap_err();
        assert!(e.contains("unknown DCQCN parameter \"alpha\"") && e.contains("rate_hai"));
        let e = s.set_param("rate_ai").unwrap_err();
        assert!(e.contains("expected KEY=VALUE"), "{e}");
        let e = s.set_param("line_rate=0Gbps").unwrap_err();
        assert!(e.contains("positive"), "{e}");
        // Without DCQCN only the CNP interval applies.
        let mut n = CcSpec::parse("none").unwrap();
        n.set_param("min_time_between_cnps=8us").unwrap();
        n.validate().unwrap();
        assert_eq!(n.resolve(Rate::from_gbps(1), 4142).1, Duration::from_us(8));
        n.set_param("rate_ai=1Mbps").unwrap();
        assert!(n
            .validate()
            .unwrap_err()
            .contains("need dcqcn congestion control"));
    }
}
