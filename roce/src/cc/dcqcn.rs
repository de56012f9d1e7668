//! DCQCN reaction point (Zhu et al., SIGCOMM 2015; ROCEV2.md §6.3).
//!
//! State per QP: the current rate RC, the target rate RT, α, the timer
//! stage count T and the byte stage count BC. Rates are bits per second;
//! α is fixed point with [`ALPHA_ONE`] = 1.0.
//!
//! Timers are event-driven:
//! * the α update runs lazily: whenever an event needs α, the whole
//!   periods elapsed since the last update are applied at once;
//! * the rate-increase timer is a deadline from [`Dcqcn::poll_timeout`],
//!   armed by a rate decrease and dropped once RC and RT are back at line
//!   rate; the byte counter advances with [`Dcqcn::on_transmit`];
//! * the firmware's rate-reduce monitor period defers a decrease to a
//!   deadline when a CNP comes too soon after the previous decrease.
//!
//! An idle, unthrottled flow has no deadline at all.
//!
//! When the α timer starts is where the two models differ. In the paper's
//! model ([`DcqcnModel::Paper`]) the α-update timer runs from the flow's
//! start: α begins at 1 and decays by `(1 - g)` every K even before any
//! CNP, so a flow's first cut is smaller the longer it ran uncongested.
//! ConnectX firmware ([`DcqcnModel::Firmware`]) keeps α at
//! `initial_alpha_value` until the first CNP and starts its α periods
//! there. A flow starts at its first data packet ([`Dcqcn::on_transmit`]).

use crate::time::{Duration, Instant, Rate};

use super::control::CongestionControl;

/// α = 1.0 in fixed point.
pub const ALPHA_ONE: u64 = 1 << 20;

/// Which published model the stage rules follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DcqcnModel {
    /// SIGCOMM'15 / htsim: fast recovery while `max(T, BC) <= F`, hyper
    /// increase when `min(T, BC) > F` with `RT += (min(T, BC) - F) * R_HAI`,
    /// additive otherwise; α updated on every CNP and decayed every K,
    /// with the α timer running from the flow's first data packet (so α
    /// decays from 1 even while no CNP arrives).
    Paper,
    /// NVIDIA ConnectX firmware: hyper when `min(T, BC) > F` (`RT += R_HAI`),
    /// additive when `max(T, BC) >= F`, fast recovery otherwise; α updated
    /// once per `dce_tcp_rtt` period; at most one decrease per
    /// `rate_reduce_monitor_period`; decrease capped by `rpg_min_dec_fac`.
    /// The α timer starts at the first CNP: until then α stays at
    /// `initial_alpha_value`, however long the flow has been sending.
    Firmware,
}

/// DCQCN parameters: one type for both presets ([`DcqcnParams::paper`],
/// [`DcqcnParams::connectx`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DcqcnParams {
    /// Stage rules.
    pub model: DcqcnModel,
    /// Line rate: the start rate and the ceiling.
    pub line_rate: Rate,
    /// Floor (`rpg_min_rate`).
    pub min_rate: Rate,
    /// α gain g as a fraction `g_num / g_den` (paper 1/256; firmware
    /// (1024 - dce_tcp_g)/1024 = 5/1024).
    pub g_num: u64,
    /// Denominator of g.
    pub g_den: u64,
    /// α at the flow's start (paper model: it decays from there every
    /// `alpha_period`) or at the first CNP (firmware model: it holds until
    /// then), fixed point ([`ALPHA_ONE`] = 1.0).
    pub initial_alpha: u64,
    /// Largest α (firmware clamps to 1023/1024).
    pub max_alpha: u64,
    /// The α update period (paper K = 55 µs; firmware dce_tcp_rtt = 1 µs).
    pub alpha_period: Duration,
    /// At most one decrease per this period (firmware 4 µs; paper 0 = every CNP).
    pub rate_reduce_period: Duration,
    /// Rate-increase timer (paper T = 55 µs; firmware rpg_time_reset 300 µs).
    pub increase_timer: Duration,
    /// Rate-increase byte counter (paper B = 10 MB; firmware 32767 × 64 B).
    pub byte_counter: u64,
    /// Fast-recovery stages F (paper 5; firmware rpg_threshold 1).
    pub threshold: u32,
    /// Additive increase step R_AI.
    pub ai_rate: Rate,
    /// Hyper increase step R_HAI.
    pub hai_rate: Rate,
    /// Largest share of RC one decrease may remove, percent (firmware 50).
    pub min_dec_fac_percent: u64,
    /// Rate forced on RC and RT at a flow's first CNP; zero = apply the
    /// normal decrease (our reading of firmware's default 0).
    pub rate_on_first_cnp: Rate,
    /// Firmware `clamp_tgt_rate`: RT = RC at every decrease.
    pub clamp_tgt_rate: bool,
    /// Firmware `clamp_tgt_rate_after_time_inc`: RT = RC at a decrease if a
    /// timer stage happened since the last one.
    pub clamp_tgt_rate_after_time_inc: bool,
}

impl DcqcnParams {
    /// A preset by name: `"paper"` (SIGCOMM'15) or `"connectx"` (alias
    /// `"firmware"`, the NVIDIA firmware defaults).
    pub fn preset(name: &str, line_rate: Rate) -> Option<DcqcnParams> {
        match name {
            "paper" => Some(DcqcnParams::paper(line_rate)),
            "connectx" | "firmware" => Some(DcqcnParams::connectx(line_rate)),
            _ => None,
        }
    }

    /// The SIGCOMM'15 paper set (VALIDATION.md DCQCN-0): g = 1/256, α₀ = 1,
    /// K = 55 µs, T = 55 µs, B = 10 MB, F = 5, R_AI = 40 Mb/s. R_HAI is not
    /// pinned down by the sources; we take 10 × R_AI = 400 Mb/s (the ratio of
    /// the authors' ns-3 defaults). Minimum rate 1 Mb/s. As in the paper's
    /// model, the α timer runs from the flow's first data packet: α decays
    /// from 1 every K with or without CNPs.
    pub fn paper(line_rate: Rate) -> DcqcnParams {
        DcqcnParams {
            model: DcqcnModel::Paper,
            line_rate,
            min_rate: Rate::from_bps(1_000_000),
            g_num: 1,
            g_den: 256,
            initial_alpha: ALPHA_ONE,
            max_alpha: ALPHA_ONE,
            alpha_period: Duration::from_us(55),
            rate_reduce_period: Duration::ZERO,
            increase_timer: Duration::from_us(55),
            byte_counter: 10_000_000,
            threshold: 5,
            ai_rate: Rate::from_bps(40_000_000),
            hai_rate: Rate::from_bps(400_000_000),
            min_dec_fac_percent: 50,
            rate_on_first_cnp: Rate::from_bps(0),
            clamp_tgt_rate: true,
            clamp_tgt_rate_after_time_inc: true,
        }
    }

    /// The ConnectX firmware defaults (ROCEV2.md §6.3, VALIDATION.md
    /// DCQCN-0): dce_tcp_g 1019, dce_tcp_rtt 1 µs, initial α 1023/1024,
    /// rate_reduce_monitor_period 4 µs, rpg_gd 11, rpg_min_dec_fac 50 %,
    /// rpg_min_rate 1 Mb/s, rpg_time_reset 300 µs, rpg_byte_reset 32767 × 64 B,
    /// rpg_threshold 1, rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s,
    /// clamp_tgt_rate 0, clamp_tgt_rate_after_time_inc 1. As the firmware
    /// does, α holds at its initial value until the flow's first CNP and the
    /// α periods (dce_tcp_rtt) count from that CNP.
    pub fn connectx(line_rate: Rate) -> DcqcnParams {
        DcqcnParams {
            model: DcqcnModel::Firmware,
            line_rate,
            min_rate: Rate::from_bps(1_000_000),
            g_num: 1024 - 1019,
            g_den: 1024,
            initial_alpha: ALPHA_ONE * 1023 / 1024,
            max_alpha: ALPHA_ONE * 1023 / 1024,
            alpha_period: Duration::from_us(1),
            rate_reduce_period: Duration::from_us(4),
            increase_timer: Duration::from_us(300),
            byte_counter: 32767 * 64,
            threshold: 1,
            ai_rate: Rate::from_bps(5_000_000),
            hai_rate: Rate::from_bps(50_000_000),
            min_dec_fac_percent: 50,
            rate_on_first_cnp: Rate::from_bps(0),
            clamp_tgt_rate: false,
            clamp_tgt_rate_after_time_inc: true,
        }
    }
}

/// The notification point's CNP interval in the paper's model (and
/// htsim's): at most one CNP per QP per 50 µs (ROCEV2.md §6.2).
pub const PAPER_CNP_INTERVAL: Duration = Duration::from_us(50);

/// ConnectX's default `min_time_between_cnps` (`roce_np` sysfs parameter,
/// `MIN_TIME_BETWEEN_CNPS_P<port>` in `mlxconfig`): 4 µs. NVIDIA's "DCQCN
/// CC Parameters" list it among the notification point's parameters in
/// µs; `mlxconfig -d <dev> query` of a ConnectX-5 (fw 16.35) with the
/// DCQCN defaults untouched (`DCE_TCP_G` 1019, `RPG_TIME_RESET` 300, ...)
/// shows `MIN_TIME_BETWEEN_CNPS_P1 4` (REAL-NIC-FORMATS.md §6).
pub const CONNECTX_CNP_INTERVAL: Duration = Duration::from_us(4);

impl DcqcnModel {
    /// The CNP interval that goes with the model's preset:
    /// [`PAPER_CNP_INTERVAL`] or [`CONNECTX_CNP_INTERVAL`].
    pub const fn default_cnp_interval(self) -> Duration {
        match self {
            DcqcnModel::Paper => PAPER_CNP_INTERVAL,
            DcqcnModel::Firmware => CONNECTX_CNP_INTERVAL,
        }
    }

    /// The preset's name: `paper` or `firmware`.
    pub const fn preset_name(self) -> &'static str {
        match self {
            DcqcnModel::Paper => "paper",
            DcqcnModel::Firmware => "firmware",
        }
    }
}

/// DCQCN parameters over a preset, as scenario files write them
/// (`[nic.cc.dcqcn]`) and `rocelab perftest --cc-param KEY=VALUE` sets
/// them: each one left out keeps the preset's value. The one parameter
/// table of the project: the simulator and the emulation both apply it
/// with [`DcqcnOverrides::apply`].
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DcqcnOverrides {
    /// Alpha gain g (e.g. 1/256 = 0.00390625).
    pub g: Option<f64>,
    /// Initial alpha (0..1).
    pub initial_alpha: Option<f64>,
    /// Alpha update period K without CNPs.
    pub alpha_update_interval: Option<Duration>,
    /// Minimum spacing between two rate decreases.
    pub rate_decrease_interval: Option<Duration>,
    /// Rate-increase timer T.
    pub rate_increase_timer: Option<Duration>,
    /// Rate-increase byte counter B.
    pub byte_counter: Option<crate::time::Size>,
    /// Fast-recovery steps F.
    pub fast_recovery_steps: Option<u32>,
    /// Additive increase R_AI.
    pub rate_ai: Option<Rate>,
    /// Hyper increase R_HAI.
    pub rate_hai: Option<Rate>,
    /// Minimum rate.
    pub min_rate: Option<Rate>,
    /// Notification point: at most one CNP per QP per this interval.
    pub min_time_between_cnps: Option<Duration>,
    /// Clamp the target rate on a cut (CLAMP_TGT_RATE).
    pub clamp_target_rate: Option<bool>,
}

/// The keys of [`DcqcnOverrides`], in the order of the table.
pub const DCQCN_KEYS: [&str; 12] = [
    "g",
    "initial_alpha",
    "alpha_update_interval",
    "rate_decrease_interval",
    "rate_increase_timer",
    "byte_counter",
    "fast_recovery_steps",
    "rate_ai",
    "rate_hai",
    "min_rate",
    "min_time_between_cnps",
    "clamp_target_rate",
];

impl DcqcnOverrides {
    /// Check the values a type cannot: `Err((key, what was expected))`,
    /// the key as the table names it.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if let Some(g) = self.g {
            if !(g > 0.0 && g <= 1.0) {
                return Err(("g", format!("{g}: expected a gain in (0, 1]")));
            }
        }
        if let Some(a) = self.initial_alpha {
            if !(0.0..=1.0).contains(&a) {
                return Err(("initial_alpha", format!("{a}: expected a value in [0, 1]")));
            }
        }
        for (k, d) in [
            ("alpha_update_interval", self.alpha_update_interval),
            ("rate_decrease_interval", self.rate_decrease_interval),
            ("rate_increase_timer", self.rate_increase_timer),
        ] {
            if d == Some(Duration::ZERO) {
                return Err((k, "0: expected a positive duration".into()));
            }
        }
        Ok(())
    }

    /// Set one key from its text, as `KEY=VALUE` on a command line: the
    /// numbers and flags (`g`, `initial_alpha`, `fast_recovery_steps`,
    /// `clamp_target_rate`) as numbers and `true`/`false`, durations,
    /// rates and sizes as strings with their unit (`50us`, `40Mbps`,
    /// `10MB`; a bare number is refused, not read as picoseconds). The
    /// error names the key and what was expected.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        const LITERAL_KEYS: [&str; 4] = [
            "g",
            "initial_alpha",
            "fast_recovery_steps",
            "clamp_target_rate",
        ];
        let v = value.trim();
        let literal = serde_json::from_str::<serde_json::Value>(v)
            .ok()
            .filter(|j| LITERAL_KEYS.contains(&key) && (j.is_number() || j.is_boolean()));
        let json = literal.unwrap_or_else(|| serde_json::Value::String(v.to_string()));
        let mut obj = serde_json::Map::new();
        obj.insert(key.to_string(), json);
        let one: DcqcnOverrides =
            serde_json::from_value(serde_json::Value::Object(obj)).map_err(|e| {
                if DCQCN_KEYS.contains(&key) {
                    format!("{key} = {value:?}: {e}")
                } else {
                    format!(
                        "unknown DCQCN parameter {key:?}: expected one of {}",
                        DCQCN_KEYS.join(", ")
                    )
                }
            })?;
        one.validate().map_err(|(k, e)| format!("{k} = {e}"))?;
        self.merge(&one);
        Ok(())
    }

    /// Take every parameter `other` sets.
    pub fn merge(&mut self, other: &DcqcnOverrides) {
        macro_rules! take {
            ($($f:ident),*) => {$(
                if other.$f.is_some() {
                    self.$f = other.$f;
                }
            )*};
        }
        take!(
            g,
            initial_alpha,
            alpha_update_interval,
            rate_decrease_interval,
            rate_increase_timer,
            byte_counter,
            fast_recovery_steps,
            rate_ai,
            rate_hai,
            min_rate,
            min_time_between_cnps,
            clamp_target_rate
        );
    }

    /// Write the reaction point's parameters this table sets into `p`
    /// (`min_time_between_cnps` is the notification point's: see
    /// [`DcqcnOverrides::cnp_interval`]).
    pub fn apply(&self, p: &mut DcqcnParams) {
        if let Some(g) = self.g {
            p.g_den = 1 << 20;
            p.g_num = ((g * (1u64 << 20) as f64).round() as u64).max(1);
        }
        if let Some(a) = self.initial_alpha {
            p.initial_alpha = (a.clamp(0.0, 1.0) * ALPHA_ONE as f64) as u64;
        }
        if let Some(d) = self.alpha_update_interval {
            p.alpha_period = d;
        }
        if let Some(d) = self.rate_decrease_interval {
            p.rate_reduce_period = d;
        }
        if let Some(d) = self.rate_increase_timer {
            p.increase_timer = d;
        }
        if let Some(b) = self.byte_counter {
            p.byte_counter = b.bytes();
        }
        if let Some(f) = self.fast_recovery_steps {
            p.threshold = f;
        }
        if let Some(r) = self.rate_ai {
            p.ai_rate = r;
        }
        if let Some(r) = self.rate_hai {
            p.hai_rate = r;
        }
        if let Some(r) = self.min_rate {
            p.min_rate = r;
        }
        if let Some(c) = self.clamp_target_rate {
            p.clamp_tgt_rate = c;
        }
    }

    /// The notification point's CNP interval: the table's
    /// `min_time_between_cnps`, else `default`.
    pub fn cnp_interval(&self, default: Duration) -> Duration {
        self.min_time_between_cnps.unwrap_or(default)
    }
}

/// The DCQCN reaction point of one QP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dcqcn {
    p: DcqcnParams,
    rc: u64,
    rt: u64,
    alpha: u64,
    /// Start of the current α period; `None` before the α timer starts
    /// (paper: the first data packet; firmware: the first CNP).
    alpha_epoch: Option<Instant>,
    /// Firmware: a CNP has been counted in the current α period.
    cnp_in_alpha_period: bool,
    t_stage: u32,
    bc_stage: u32,
    bytes: u64,
    increase_deadline: Option<Instant>,
    next_decrease_allowed: Instant,
    decrease_deadline: Option<Instant>,
    seen_cnp: bool,
    decreases: u64,
}

impl Dcqcn {
    /// A flow at line rate, α at its initial value.
    pub fn new(p: DcqcnParams) -> Dcqcn {
        Dcqcn {
            p,
            rc: p.line_rate.bps(),
            rt: p.line_rate.bps(),
            alpha: p.initial_alpha,
            alpha_epoch: None,
            cnp_in_alpha_period: false,
            t_stage: 0,
            bc_stage: 0,
            bytes: 0,
            increase_deadline: None,
            next_decrease_allowed: Instant::ZERO,
            decrease_deadline: None,
            seen_cnp: false,
            decreases: 0,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &DcqcnParams {
        &self.p
    }

    /// Current rate RC.
    pub fn current_rate(&self) -> Rate {
        Rate::from_bps(self.rc)
    }

    /// Target rate RT.
    pub fn target_rate(&self) -> Rate {
        Rate::from_bps(self.rt)
    }

    /// α as of `now` (applying elapsed decay periods), fixed point.
    pub fn alpha_at(&self, now: Instant) -> u64 {
        let mut c = self.clone();
        c.catch_up_alpha(now);
        c.alpha
    }

    /// Timer stage count T.
    pub fn timer_stage(&self) -> u32 {
        self.t_stage
    }

    /// Byte stage count BC.
    pub fn byte_stage(&self) -> u32 {
        self.bc_stage
    }

    /// Rate decreases applied so far.
    pub fn decreases(&self) -> u64 {
        self.decreases
    }

    fn decay(&self, a: u64) -> u64 {
        a * (self.p.g_den - self.p.g_num) / self.p.g_den
    }

    /// Apply the α periods that have fully elapsed by `now`.
    fn catch_up_alpha(&mut self, now: Instant) {
        let Some(epoch) = self.alpha_epoch else {
            return;
        };
        let period = self.p.alpha_period.as_ps().max(1);
        let elapsed = now.saturating_duration_since(epoch).as_ps();
        let n = elapsed / period;
        if n == 0 {
            return;
        }
        let mut first = true;
        // Once α reaches 0 further decays change nothing, so the loop is
        // bounded by the precision of the fixed point, not by idle time.
        for _ in 0..n {
            if first && self.p.model == DcqcnModel::Firmware && self.cnp_in_alpha_period {
                // The period that saw a CNP was already applied at the CNP.
            } else {
                self.alpha = self.decay(self.alpha);
            }
            first = false;
            if self.alpha == 0 {
                break;
            }
        }
        self.cnp_in_alpha_period = false;
        self.alpha_epoch = Some(Instant::from_ps(epoch.as_ps() + n * period));
    }

    fn alpha_on_cnp(&mut self, now: Instant) {
        if self.alpha_epoch.is_none() {
            self.alpha_epoch = Some(now);
            if self.p.model == DcqcnModel::Firmware {
                // The initial α applies to the first CNP; the update for
                // this period follows it.
                self.cnp_in_alpha_period = false;
            }
        }
        self.catch_up_alpha(now);
        match self.p.model {
            DcqcnModel::Paper => {
                self.alpha = self.decay(self.alpha) + ALPHA_ONE * self.p.g_num / self.p.g_den;
                self.alpha = self.alpha.min(self.p.max_alpha);
                // The α timer restarts at each CNP.
                self.alpha_epoch = Some(now);
            }
            DcqcnModel::Firmware => {
                if !self.cnp_in_alpha_period {
                    self.alpha = self.decay(self.alpha) + ALPHA_ONE * self.p.g_num / self.p.g_den;
                    self.alpha = self.alpha.min(self.p.max_alpha);
                    self.cnp_in_alpha_period = true;
                }
            }
        }
    }

    fn decrease(&mut self, now: Instant) {
        let first = !self.seen_cnp;
        self.seen_cnp = true;
        self.decreases += 1;
        if first && self.p.rate_on_first_cnp.bps() != 0 {
            self.rc = self.p.rate_on_first_cnp.bps().min(self.p.line_rate.bps());
            self.rt = self.rc;
        } else {
            let clamp = match self.p.model {
                DcqcnModel::Paper => true,
                DcqcnModel::Firmware => {
                    self.p.clamp_tgt_rate
                        || self.bc_stage > 0
                        || (self.t_stage > 0 && self.p.clamp_tgt_rate_after_time_inc)
                        || first
                }
            };
            if clamp {
                self.rt = self.rc;
            }
            let cut = (self.rc as u128 * self.alpha as u128 / (2 * ALPHA_ONE as u128)) as u64;
            let cap = self.rc / 100 * self.p.min_dec_fac_percent;
            self.rc -= cut.min(cap);
            self.rc = self.rc.max(self.p.min_rate.bps());
        }
        self.t_stage = 0;
        self.bc_stage = 0;
        self.bytes = 0;
        self.increase_deadline = Some(now + self.p.increase_timer);
        self.next_decrease_allowed = now + self.p.rate_reduce_period;
    }

    fn increase(&mut self) {
        let f = self.p.threshold;
        let (lo, hi) = (
            self.t_stage.min(self.bc_stage),
            self.t_stage.max(self.bc_stage),
        );
        match self.p.model {
            DcqcnModel::Paper => {
                if hi <= f {
                    // fast recovery
                } else if lo > f {
                    self.rt += (lo - f) as u64 * self.p.hai_rate.bps();
                } else {
                    self.rt += self.p.ai_rate.bps();
                }
            }
            DcqcnModel::Firmware => {
                if lo > f {
                    self.rt += self.p.hai_rate.bps();
                } else if hi >= f {
                    self.rt += self.p.ai_rate.bps();
                }
            }
        }
        let line = self.p.line_rate.bps();
        self.rt = self.rt.min(line);
        // Round up so that RC reaches RT instead of stalling one below it.
        self.rc = (self.rc + self.rt).div_ceil(2);
        self.rc = self.rc.clamp(self.p.min_rate.bps().min(line), line);
    }

    fn at_line_rate(&self) -> bool {
        let line = self.p.line_rate.bps();
        self.rc >= line && self.rt >= line
    }
}

impl CongestionControl for Dcqcn {
    fn rate(&self) -> Option<Rate> {
        Some(Rate::from_bps(self.rc))
    }

    fn on_cnp(&mut self, now: Instant) {
        // The cut uses α as it was before this CNP; α updates after.
        self.catch_up_alpha(now);
        if now >= self.next_decrease_allowed || !self.seen_cnp {
            self.decrease(now);
            self.decrease_deadline = None;
        } else if self.decrease_deadline.is_none() {
            self.decrease_deadline = Some(self.next_decrease_allowed);
        }
        self.alpha_on_cnp(now);
    }

    fn on_transmit(&mut self, now: Instant, bytes: u64) {
        if self.alpha_epoch.is_none() && self.p.model == DcqcnModel::Paper {
            // The paper's α timer runs from the flow's start.
            self.alpha_epoch = Some(now);
        }
        if self.increase_deadline.is_none() {
            return;
        }
        self.bytes += bytes;
        while self.bytes >= self.p.byte_counter && self.increase_deadline.is_some() {
            self.bytes -= self.p.byte_counter;
            self.bc_stage += 1;
            self.increase();
            if self.at_line_rate() {
                self.increase_deadline = None;
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        match (self.increase_deadline, self.decrease_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn handle_timeout(&mut self, now: Instant) {
        if let Some(d) = self.decrease_deadline {
            if d <= now {
                self.decrease_deadline = None;
                self.catch_up_alpha(now);
                self.decrease(d);
            }
        }
        while let Some(t) = self.increase_deadline {
            if t > now {
                break;
            }
            self.t_stage += 1;
            self.increase();
            self.increase_deadline = if self.at_line_rate() {
                None
            } else {
                Some(t + self.p.increase_timer)
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const G40: u64 = 40_000_000_000;

    fn us(n: u64) -> Instant {
        Instant::from_ps(n * 1_000_000)
    }

    #[test]
    fn paper_first_cnp_halves_the_rate_and_keeps_alpha_at_one() {
        let mut d = Dcqcn::new(DcqcnParams::paper(Rate::from_bps(G40)));
        assert_eq!(d.poll_timeout(), None, "no timer before congestion");
        d.on_cnp(us(0));
        assert_eq!(d.current_rate().bps(), G40 / 2);
        assert_eq!(d.target_rate().bps(), G40);
        // α = (1 - 1/256)·1 + 1/256 = 1
        assert_eq!(d.alpha_at(us(0)), ALPHA_ONE);
        assert_eq!(d.poll_timeout(), Some(us(55)));
    }

    #[test]
    fn paper_alpha_decays_per_period_without_cnps() {
        let mut d = Dcqcn::new(DcqcnParams::paper(Rate::from_bps(G40)));
        d.on_cnp(us(0));
        // Ten periods of 55 µs: α = (255/256)^10 = 0.961617.
        let a = d.alpha_at(us(550)) as f64 / ALPHA_ONE as f64;
        assert!((a - 0.961_617).abs() < 1e-5, "alpha {a}");
        // Half a period more changes nothing.
        assert_eq!(d.alpha_at(us(550)), d.alpha_at(us(570)));
        // A second CNP at 550 µs cuts with that α: RC·(1 - α/2).
        d.handle_timeout(us(549));
        let rc = d.current_rate().bps() as f64;
        d.on_cnp(us(550));
        let expect = rc * (1.0 - a / 2.0);
        assert!((d.current_rate().bps() as f64 - expect).abs() / expect < 1e-5);
    }

    #[test]
    fn paper_timer_drives_fast_recovery_then_additive_increase() {
        let mut d = Dcqcn::new(DcqcnParams::paper(Rate::from_bps(G40)));
        d.on_cnp(us(0));
        // Fast recovery: RC = (RT + RC)/2 each 55 µs, RT stays 40G, F = 5 stages.
        let expect_g = [30.0, 35.0, 37.5, 38.75, 39.375];
        for (i, g) in expect_g.iter().enumerate() {
            d.handle_timeout(us(55 * (i as u64 + 1)));
            assert_eq!(d.timer_stage(), i as u32 + 1);
            assert_eq!(d.current_rate().bps(), (g * 1e9) as u64, "stage {}", i + 1);
            assert_eq!(d.target_rate().bps(), G40);
        }
        // Stage 6: additive, RT = min(40G + 40M, 40G) = 40G, RC = 39.6875G.
        d.handle_timeout(us(330));
        assert_eq!(d.current_rate().bps(), 39_687_500_000);
    }

    #[test]
    fn paper_additive_and_hyper_stages_move_the_target() {
        let line = Rate::from_gbps(100);
        let mut d = Dcqcn::new(DcqcnParams::paper(line));
        d.on_cnp(us(0)); // RC 50G, RT 100G
        d.on_cnp(us(1)); // RT = 50G, RC = 25G (α still 1)
        assert_eq!(d.current_rate().bps(), 25_000_000_000);
        assert_eq!(d.target_rate().bps(), 50_000_000_000);
        // 5 timer stages of fast recovery: RC -> 50 - 25/32 = 49.21875G
        for i in 1..=5 {
            d.handle_timeout(us(1 + 55 * i));
        }
        assert_eq!(d.current_rate().bps(), 49_218_750_000);
        // Stage T=6 with BC=0: additive, RT += 40M.
        d.handle_timeout(us(1 + 55 * 6));
        assert_eq!(d.target_rate().bps(), 50_040_000_000);
        assert_eq!(
            d.current_rate().bps(),
            (49_218_750_000 + 50_040_000_000) / 2
        );
        // Six byte stages (10 MB each) bring BC to 6: min(T, BC) = 6 > 5 is
        // hyper only once BC exceeds F: the first five byte stages are additive.
        let mut rt = d.target_rate().bps();
        for bc in 1..=6u32 {
            d.on_transmit(us(400), 10_000_000);
            let lo = bc.min(6);
            if lo > 5 {
                rt += (lo as u64 - 5) * 400_000_000;
            } else {
                rt += 40_000_000;
            }
            assert_eq!(d.byte_stage(), bc);
            assert_eq!(d.target_rate().bps(), rt, "byte stage {bc}");
        }
    }

    #[test]
    fn firmware_limits_decreases_to_one_per_monitor_period() {
        let mut d = Dcqcn::new(DcqcnParams::connectx(Rate::from_gbps(100)));
        d.on_cnp(us(0));
        // α = 1023/1024: cut = RC·α/2.
        let after_first = 100_000_000_000u64
            - (100_000_000_000u128 * (ALPHA_ONE * 1023 / 1024) as u128 / (2 * ALPHA_ONE as u128))
                as u64;
        assert_eq!(d.current_rate().bps(), after_first);
        d.on_cnp(us(1));
        assert_eq!(
            d.current_rate().bps(),
            after_first,
            "no second cut within 4 µs"
        );
        assert_eq!(d.poll_timeout(), Some(us(4)));
        d.handle_timeout(us(4));
        assert!(d.current_rate().bps() < after_first);
        assert_eq!(d.decreases(), 2);
    }

    #[test]
    fn firmware_recovers_to_line_rate_and_stops_its_timer() {
        let mut d = Dcqcn::new(DcqcnParams::connectx(Rate::from_gbps(25)));
        d.on_cnp(us(0));
        let mut t = us(0);
        let mut n = 0;
        while let Some(dl) = d.poll_timeout() {
            t = dl;
            d.handle_timeout(t);
            n += 1;
            assert!(n < 100_000, "timer never stops");
        }
        assert_eq!(d.current_rate(), Rate::from_gbps(25));
        assert!(t > us(300));
    }

    #[test]
    fn firmware_stages_are_additive_from_the_first_timer_and_hyper_with_bytes() {
        let mut d = Dcqcn::new(DcqcnParams::connectx(Rate::from_gbps(100)));
        d.on_cnp(us(0));
        let rc0 = d.current_rate().bps();
        // The first CNP clamps RT to RC (no stage yet).
        assert_eq!(d.target_rate().bps(), 100_000_000_000);
        // T = 1 >= threshold 1: additive, RT += 5 Mb/s, then RC = (RC+RT)/2.
        d.handle_timeout(us(300));
        assert_eq!(d.timer_stage(), 1);
        // RT + 5 Mb/s is clamped to the line rate.
        let rt1 = 100_000_000_000u64;
        assert_eq!(d.target_rate().bps(), rt1);
        assert_eq!(d.current_rate().bps(), (rc0 + rt1).div_ceil(2));
        // With clamp_tgt_rate = 0, RT drops to RC at a decrease only after a
        // timer stage: CNP, one timer stage, CNP.
        let line = Rate::from_gbps(400);
        let mut d = Dcqcn::new(DcqcnParams::connectx(line));
        d.on_cnp(us(0));
        d.handle_timeout(us(300));
        let rc = d.current_rate().bps();
        d.on_cnp(us(301));
        let rt = d.target_rate().bps();
        assert_eq!(rt, rc, "RT clamped to RC after a timer stage");
        assert!(rt < line.bps());
        // Every increase with max(T, BC) >= 1 is at least additive.
        d.on_transmit(us(302), 32767 * 64);
        assert_eq!(
            d.target_rate().bps(),
            rt + 5_000_000,
            "BC = 1, T = 0: additive"
        );
        d.on_transmit(us(303), 32767 * 64);
        assert_eq!(
            d.target_rate().bps(),
            rt + 10_000_000,
            "BC = 2, T = 0: additive"
        );
        d.handle_timeout(us(601));
        assert_eq!(
            d.target_rate().bps(),
            rt + 15_000_000,
            "T = 1, BC = 2: additive"
        );
        d.handle_timeout(us(901));
        assert_eq!(
            d.target_rate().bps(),
            rt + 65_000_000,
            "T = 2, BC = 2: hyper"
        );
    }

    #[test]
    fn paper_alpha_timer_runs_from_the_flow_start_without_any_cnp() {
        let line = Rate::from_bps(G40);
        let mut d = Dcqcn::new(DcqcnParams::paper(line));
        // Before the flow sends, no timer runs: α stays 1 however late.
        assert_eq!(d.alpha_at(us(10_000)), ALPHA_ONE);
        // The flow starts at 100 µs and sends at line rate, no CNP.
        d.on_transmit(us(100), 1_000);
        d.on_transmit(us(300), 1_000);
        assert_eq!(d.poll_timeout(), None, "no rate timer without a CNP");
        // 54 µs in: no whole period yet.
        assert_eq!(d.alpha_at(us(154)), ALPHA_ONE);
        // One period: α = 255/256.
        assert_eq!(d.alpha_at(us(155)), ALPHA_ONE * 255 / 256);
        // Twenty periods (1.1 ms): α = (255/256)^20 = 0.924715, in fixed
        // point with each step rounded down.
        let mut fixed = ALPHA_ONE;
        for _ in 0..20 {
            fixed = fixed * 255 / 256;
        }
        assert_eq!(d.alpha_at(us(100 + 20 * 55)), fixed);
        let a = fixed as f64 / ALPHA_ONE as f64;
        assert!((a - 0.924_715).abs() < 1e-4, "alpha {a}");
        // The first CNP cuts with that decayed α, not with 1.
        d.on_cnp(us(100 + 20 * 55));
        let expect = G40 as f64 * (1.0 - a / 2.0);
        let rc = d.current_rate().bps() as f64;
        assert!(
            (rc - expect).abs() / expect < 1e-5,
            "rc {rc} expect {expect}"
        );
        assert!(d.current_rate().bps() > G40 / 2);
    }

    #[test]
    fn firmware_alpha_holds_until_the_first_cnp() {
        let line = Rate::from_gbps(100);
        let p = DcqcnParams::connectx(line);
        let mut d = Dcqcn::new(p);
        d.on_transmit(us(0), 4_000);
        d.on_transmit(us(500), 4_000);
        // 1000 α periods of 1 µs after the flow's start: still the initial α.
        assert_eq!(d.alpha_at(us(1_000)), p.initial_alpha);
        // The first CNP cuts with the initial α (1023/1024): RC·(1 − α/2).
        d.on_cnp(us(1_000));
        let cut = (100_000_000_000u128 * p.initial_alpha as u128 / (2 * ALPHA_ONE as u128)) as u64;
        assert_eq!(d.current_rate().bps(), 100_000_000_000 - cut);
        // From then on α periods run: α moves within a few periods.
        assert_ne!(d.alpha_at(us(1_010)), p.initial_alpha);
        // Same flow under the paper preset, with the firmware's α gain and
        // period, would have decayed α long before the CNP.
        let mut paper = DcqcnParams::paper(line);
        paper.g_num = p.g_num;
        paper.g_den = p.g_den;
        paper.alpha_period = p.alpha_period;
        paper.initial_alpha = p.initial_alpha;
        let mut q = Dcqcn::new(paper);
        q.on_transmit(us(0), 4_000);
        assert!(q.alpha_at(us(1_000)) < p.initial_alpha / 2);
    }

    #[test]
    fn presets_by_name_and_through_serde() {
        let line = Rate::from_gbps(100);
        assert_eq!(
            DcqcnParams::preset("paper", line),
            Some(DcqcnParams::paper(line))
        );
        assert_eq!(
            DcqcnParams::preset("firmware", line),
            Some(DcqcnParams::connectx(line))
        );
        assert_eq!(DcqcnParams::preset("x", line), None);
        let cfg = crate::cc::CcConfig::Dcqcn(DcqcnParams::connectx(line));
        let json = serde_json::to_string(&cfg).unwrap();
        assert!(json.contains("\"algorithm\":\"dcqcn\""), "{json}");
        assert!(json.contains("\"model\":\"firmware\""), "{json}");
        let back: crate::cc::CcConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, cfg);
        let none: crate::cc::CcConfig = serde_json::from_str(r#"{"algorithm":"none"}"#).unwrap();
        assert_eq!(none, crate::cc::CcConfig::None);
    }
}
