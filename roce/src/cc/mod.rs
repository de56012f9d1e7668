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
pub mod pacer;
pub mod swift;
pub mod timely;

use crate::time::{Duration, Instant, Rate};

pub use control::CongestionControl;
pub use dcqcn::{
    Dcqcn, DcqcnModel, DcqcnOverrides, DcqcnParams, CONNECTX_CNP_INTERVAL, PAPER_CNP_INTERVAL,
};
pub use hpcc::{Hpcc, HpccParams, IntHop, IntRecord, INT_HEADER_BYTES, INT_MAX_HOPS};
pub use pacer::Pacer;
pub use swift::{Swift, SwiftParams};
pub use timely::{Timely, TimelyParams};

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
        }
    }
}

impl AnyCc {
    /// The rate when it is below the line rate, `None` otherwise: what a
    /// ConnectX rate limiter holds a QP to. The NIC attaches a limiter at
    /// the first CNP and lets the link alone pace a QP at full speed.
    pub fn rate_below_line(&self) -> Option<Rate> {
        match self {
            AnyCc::None(_) => None,
            AnyCc::Dcqcn(d) => {
                let rc = d.current_rate();
                (rc < d.params().line_rate).then_some(rc)
            }
            AnyCc::Hpcc(h) => {
                let r = h.current_rate();
                (r < h.params().line_rate).then_some(r)
            }
            AnyCc::Swift(s) => s.rate().filter(|&r| r < s.params().line_rate),
            AnyCc::Timely(t) => {
                let r = t.current_rate();
                (r < t.params().line_rate).then_some(r)
            }
        }
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
        }
    }
    fn on_cnp(&mut self, now: Instant) {
        match self {
            AnyCc::None(c) => c.on_cnp(now),
            AnyCc::Dcqcn(c) => c.on_cnp(now),
            AnyCc::Hpcc(c) => c.on_cnp(now),
            AnyCc::Swift(c) => c.on_cnp(now),
            AnyCc::Timely(c) => c.on_cnp(now),
        }
    }
    fn on_transmit(&mut self, now: Instant, bytes: u64) {
        match self {
            AnyCc::None(c) => c.on_transmit(now, bytes),
            AnyCc::Dcqcn(c) => c.on_transmit(now, bytes),
            AnyCc::Hpcc(c) => c.on_transmit(now, bytes),
            AnyCc::Swift(c) => c.on_transmit(now, bytes),
            AnyCc::Timely(c) => c.on_transmit(now, bytes),
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            AnyCc::None(c) => c.poll_timeout(),
            AnyCc::Dcqcn(c) => c.poll_timeout(),
            AnyCc::Hpcc(c) => c.poll_timeout(),
            AnyCc::Swift(c) => c.poll_timeout(),
            AnyCc::Timely(c) => c.poll_timeout(),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self {
            AnyCc::None(c) => c.handle_timeout(now),
            AnyCc::Dcqcn(c) => c.handle_timeout(now),
            AnyCc::Hpcc(c) => c.handle_timeout(now),
            AnyCc::Swift(c) => c.handle_timeout(now),
            AnyCc::Timely(c) => c.handle_timeout(now),
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
/// none|dcqcn[:paper|firmware]` with `--cc-param KEY=VALUE` and
/// `--cnp-interval`, a device's configuration, the drop-in library's
/// `ROCELAB_IBV_CC`. [`CcSpec::resolve`] turns it into what an engine runs:
/// the reaction point's [`CcConfig`] (a preset of [`DcqcnParams`] with the
/// [`DcqcnOverrides`] applied) and the notification point's CNP interval.
///
/// The notification point is always on, as a NIC's: with `none` the QP
/// still answers CE with CNPs, every [`CONNECTX_CNP_INTERVAL`] unless the
/// interval is set. The interval's default follows the preset:
/// [`PAPER_CNP_INTERVAL`] with `dcqcn:paper`, ConnectX's otherwise.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CcSpec {
    /// The DCQCN preset the reaction point starts from (`paper` or
    /// `firmware`, [`DcqcnParams::preset`]); `None`: no congestion control.
    pub dcqcn: Option<DcqcnModel>,
    /// DCQCN parameters over the preset, keys as in scenario files'
    /// `[nic.cc.dcqcn]`; `min_time_between_cnps` is the notification
    /// point's CNP interval.
    pub overrides: DcqcnOverrides,
    /// The rate DCQCN starts at and never exceeds; `None`: the device's
    /// link speed. Given, the emulation also holds QPs to it at full speed,
    /// as a link of that speed would (without it, a QP at full speed is
    /// not paced, as a ConnectX QP before its first CNP).
    pub line_rate: Option<Rate>,
}

impl CcSpec {
    /// Parse the algorithm: `none`, `dcqcn` (the firmware preset),
    /// `dcqcn:paper`, `dcqcn:firmware` (alias `dcqcn:connectx`).
    pub fn parse(s: &str) -> Result<CcSpec, String> {
        const EXPECTED: &str = "expected none, dcqcn, dcqcn:paper or dcqcn:firmware";
        let (alg, preset) = match s.trim().split_once(':') {
            Some((a, p)) => (a, Some(p)),
            None => (s.trim(), None),
        };
        let dcqcn = match (alg, preset) {
            ("none", None) => None,
            ("dcqcn", None) => Some(DcqcnModel::Firmware),
            ("dcqcn", Some(p)) => match DcqcnParams::preset(p, Rate::from_bps(1)) {
                Some(params) => Some(params.model),
                None => return Err(format!("{s:?}: unknown DCQCN preset {p:?}: {EXPECTED}")),
            },
            _ => return Err(format!("{s:?}: {EXPECTED}")),
        };
        Ok(CcSpec {
            dcqcn,
            ..CcSpec::default()
        })
    }

    /// Set one parameter from `KEY=VALUE`: a key of the `[nic.cc.dcqcn]`
    /// table ([`DcqcnOverrides::set`]) or `line_rate`.
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
        self.overrides.set(k, v)
    }

    /// Check that the parameters fit the algorithm: without DCQCN only
    /// the notification point's `min_time_between_cnps` means anything.
    pub fn validate(&self) -> Result<(), String> {
        self.overrides
            .validate()
            .map_err(|(k, e)| format!("{k} = {e}"))?;
        if self.dcqcn.is_none() {
            let rp_only = DcqcnOverrides {
                min_time_between_cnps: None,
                ..self.overrides
            };
            if rp_only != DcqcnOverrides::default() || self.line_rate.is_some() {
                return Err(
                    "DCQCN parameters need dcqcn congestion control (without it only min_time_between_cnps applies)"
                        .into(),
                );
            }
        }
        Ok(())
    }

    /// The notification point's CNP interval.
    pub fn cnp_interval(&self) -> Duration {
        let default = self
            .dcqcn
            .map_or(CONNECTX_CNP_INTERVAL, |m| m.default_cnp_interval());
        self.overrides.cnp_interval(default)
    }

    /// What an engine runs on a link of `link_rate` (used unless
    /// [`CcSpec::line_rate`] is set): the reaction point and the
    /// notification point's CNP interval.
    pub fn resolve(&self, link_rate: Rate) -> (CcConfig, Duration) {
        let cc = match self.dcqcn {
            None => CcConfig::None,
            Some(model) => {
                let line = self.line_rate.unwrap_or(link_rate);
                let mut p = DcqcnParams::preset(model.preset_name(), line)
                    .unwrap_or_else(|| DcqcnParams::connectx(line));
                self.overrides.apply(&mut p);
                CcConfig::Dcqcn(p)
            }
        };
        (cc, self.cnp_interval())
    }
}

impl core::fmt::Display for CcSpec {
    /// The algorithm as `--cc` takes it: `none`, `dcqcn:paper`,
    /// `dcqcn:firmware`.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.dcqcn {
            None => f.write_str("none"),
            Some(m) => write!(f, "dcqcn:{}", m.preset_name()),
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
        assert_eq!(none.resolve(line), (CcConfig::None, CONNECTX_CNP_INTERVAL));
        let fw = CcSpec::parse("dcqcn").unwrap();
        assert_eq!(fw, CcSpec::parse("dcqcn:firmware").unwrap());
        assert_eq!(fw, CcSpec::parse("dcqcn:connectx").unwrap());
        assert_eq!(
            fw.resolve(line),
            (
                CcConfig::Dcqcn(DcqcnParams::connectx(line)),
                CONNECTX_CNP_INTERVAL
            )
        );
        let paper = CcSpec::parse("dcqcn:paper").unwrap();
        assert_eq!(paper.to_string(), "dcqcn:paper");
        assert_eq!(
            paper.resolve(line),
            (
                CcConfig::Dcqcn(DcqcnParams::paper(line)),
                PAPER_CNP_INTERVAL
            )
        );
        for bad in ["", "dcqcn:", "dcqcn:hpcc", "DCQCN", "none:paper", "timely"] {
            let e = CcSpec::parse(bad).unwrap_err();
            assert!(e.contains("expected none, dcqcn"), "{bad:?}: {e}");
        }
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
        let (cc, cnp) = s.resolve(Rate::from_gbps(100));
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
        assert_eq!(n.resolve(Rate::from_gbps(1)).1, Duration::from_us(8));
        n.set_param("rate_ai=1Mbps").unwrap();
        assert!(n
            .validate()
            .unwrap_err()
            .contains("need dcqcn congestion control"));
    }
}
