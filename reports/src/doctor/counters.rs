//! Counters of one source: its snapshots ([`Snap`]) and the view the
//! checks read ([`CounterView`]): the delta between the first and last
//! snapshot, or the totals of a single one, with the interval they cover;
//! and the names of the pause counters per priority.
//!
//! A view is an observation that knows three things besides its numbers:
//! its **entity** ([`Entity`]: a host's NIC port or a switch port, and the
//! node it belongs to), its **time base** ([`TimeBase`]: totals since boot,
//! a delta over a known or unknown interval, counts from zero over a
//! simulated run or one measured run) and its **provenance** (the files
//! its snapshots came from and how they were paired, [`CounterView::files`]
//! and [`CounterView::paired_by`]). A value derived from counters that the
//! tool does not print directly, such as a paused share computed from
//! PAUSE frame counts, is an **estimate** ([`PauseShare::estimated`]) and
//! says what it assumed.
//!
//! Units: times in picoseconds (`interval_ps`) or nanoseconds (snapshot
//! times), pause durations in microseconds (mlx5's `*_pause_duration`),
//! shares in parts per million, link speeds in bit/s.

use std::collections::{BTreeMap, BTreeSet};

use roce::time::Duration;
use serde::Serialize;

use super::finding::Severity;
use super::names::node_of;

/// The label of the one source a capture does not name (a host NIC's
/// `before.txt` and `after.txt`): findings call it "this host".
pub(super) const UNNAMED_HOST: &str = "capture";
/// One snapshot of a source's counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snap {
    /// Time in nanoseconds, when known.
    pub time_ns: Option<u64>,
    /// The time is simulated time (counters started at zero at time zero).
    pub simulated: bool,
    /// The counters.
    pub counters: BTreeMap<String, u64>,
    /// The counters are already a measured delta over `time_ns` (the
    /// end-of-run block of `rocelab perftest`), not totals.
    pub run_delta: bool,
}

/// What a counter source is a port of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Entity {
    /// A host's NIC port (`ethtool -S` of a NIC, `rdma statistic`,
    /// perftest's counter block): the default.
    #[default]
    HostPort,
    /// A switch port (SONiC `show pfc counters`, Cumulus/NVUE, a switch
    /// SDK dump, the simulator's `<switch>-p<N>` dumps). PAUSE it sends
    /// means a congested switch queue (or one held from downstream), never
    /// a host that cannot drain.
    SwitchPort,
    /// One queue of a switch port (`show queue counters`).
    SwitchQueue,
    /// A GPU (`nvidia-smi topo -m`).
    Gpu,
    /// A link between two ports (devinfo, lspci, `ethtool IFACE`).
    Link,
}

impl Entity {
    /// How the entity is named in findings: `host`, `switch port`, ...
    pub fn describe(self) -> &'static str {
        match self {
            Entity::HostPort => "host NIC port",
            Entity::SwitchPort => "switch port",
            Entity::SwitchQueue => "switch queue",
            Entity::Gpu => "GPU",
            Entity::Link => "link",
        }
    }
}

/// What the values of a view count over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeBase {
    /// One snapshot of real counters: totals since the port came up. No
    /// rate, nothing about now.
    SinceBoot,
    /// The difference of two snapshots, over a known interval (ps) or an
    /// unknown one.
    Delta(Option<u64>),
    /// One snapshot of simulated counters, which start at zero: counts
    /// over the simulated time (ps).
    FromZero(u64),
    /// A measured delta over one run (perftest's end-of-run block), of
    /// the run's length (ps).
    RunDelta(u64),
}

/// PAUSE quanta assumed per frame when a tool prints no duration: the
/// largest, 65535, which is what switches and NICs send for XOFF.
pub const ASSUMED_QUANTA: u64 = 65_535;

/// Link speed (bit/s) assumed for a pause estimate when the capture does
/// not say it.
pub const ASSUMED_LINK_BPS: u64 = 100_000_000_000;

/// The share of an interval a port was paused (or paused its peer), in
/// parts per million, measured from a duration counter or estimated from
/// frame counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseShare {
    /// Share of the interval, ppm (at most 1,000,000).
    pub ppm: u64,
    /// Estimated from frames x quanta x 512 bit times / link speed, not
    /// measured: `Some(what was assumed)`.
    pub estimated: Option<String>,
}

/// Counters of one source, as a delta or as since-boot totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterView {
    /// Source name (`""` = unnamed).
    pub source: String,
    /// What the source is a port of.
    pub entity: Entity,
    /// The node (host or switch) the port belongs to, when the inputs say
    /// (`""`: derived from the source name, see [`CounterView::node`]).
    pub node_name: String,
    /// The input files its snapshots came from, in reading order.
    pub files: Vec<String>,
    /// How its snapshots were put together when there are several: `file
    /// name`, `host line`, `folder`, `content` (same counters, every
    /// counter grew), `one file`.
    pub paired_by: Option<String>,
    /// The port's link speed (bit/s) when the inputs say it.
    pub link_bps: Option<u64>,
    /// One snapshot only: totals since boot.
    pub since_boot: bool,
    /// Delta interval in ps when known.
    pub interval_ps: Option<u64>,
    /// Delta (or totals) per counter.
    pub values: BTreeMap<String, u64>,
    /// Names present in the last snapshot (presence matters: PFC rows).
    pub present: BTreeSet<String>,
    /// Counters that went backwards (reset between snapshots).
    pub reset: Vec<String>,
    /// The snapshots were given newest first and were swapped.
    pub reversed: bool,
    /// One snapshot of simulated counters: a delta from time zero.
    pub from_zero: bool,
    /// The run variant the counters belong to, when known.
    pub scope: Option<String>,
    /// One snapshot that is a measured delta over one run (perftest's
    /// end-of-run block): `interval_ps` is the run's length.
    pub run_delta: bool,
}

impl CounterView {
    /// Build from a series of snapshots. `sim_time_ps`: the simulated run
    /// time, when the counters are known to come from one simulated run.
    pub fn from_series(
        source: String,
        snaps: &[Snap],
        interval: Option<Duration>,
        sim_time_ps: Option<u64>,
    ) -> CounterView {
        let mut v = CounterView {
            source,
            ..CounterView::default()
        };
        let mut order: Vec<&Snap> = snaps.iter().collect();
        if order.iter().all(|s| s.time_ns.is_some()) {
            order.sort_by_key(|s| s.time_ns);
        }
        let (Some(&first), Some(&last)) = (order.first(), order.last()) else {
            return v;
        };
        if order.len() == 1 {
            v.present = last.counters.keys().cloned().collect();
            v.values = last.counters.clone();
            let from_zero = match (last.simulated || last.run_delta, last.time_ns) {
                (true, Some(ns)) => ns.checked_mul(1000),
                _ => sim_time_ps,
            };
            v.run_delta = last.run_delta && from_zero.is_some();
            match from_zero {
                Some(ps) => {
                    v.interval_ps = Some(ps);
                    v.from_zero = true;
                }
                None => v.since_boot = true,
            }
            return v;
        }
        let (mut first, mut last) = (first, last);
        if first.time_ns.is_none() || last.time_ns.is_none() {
            let fell = last
                .counters
                .iter()
                .filter(|(k, b)| first.counters.get(*k).is_some_and(|a| *b < a))
                .count();
            let rose = last
                .counters
                .iter()
                .filter(|(k, b)| first.counters.get(*k).is_some_and(|a| *b > a))
                .count();
            if fell > rose {
                std::mem::swap(&mut first, &mut last);
                v.reversed = true;
            }
        }
        v.present = last.counters.keys().cloned().collect();
        let gaps = (snaps.len() - 1) as u64;
        v.interval_ps = match interval {
            Some(d) => d.as_ps().checked_mul(gaps),
            None => match (first.time_ns, last.time_ns) {
                (Some(a), Some(b)) if b > a => (b - a).checked_mul(1000),
                _ => None,
            },
        };
        for (k, b) in &last.counters {
            let a = first.counters.get(k).copied().unwrap_or(0);
            if *b < a {
                v.reset.push(k.clone());
            }
            v.values.insert(k.clone(), b.saturating_sub(a));
        }
        v
    }

    /// A counter's delta (0 when absent).
    pub fn get(&self, name: &str) -> u64 {
        self.values.get(name).copied().unwrap_or(0)
    }

    /// Whether the counter exists.
    pub fn has(&self, name: &str) -> bool {
        self.present.contains(name)
    }

    /// Microseconds as a fraction of the interval, in parts per million.
    pub(super) fn ppm_of_interval(&self, us: u64) -> Option<u64> {
        let ps = self.interval_ps.filter(|p| *p > 0)?;
        let v = u128::from(us) * 1_000_000 * 1_000_000 / u128::from(ps);
        Some(u64::try_from(v).unwrap_or(u64::MAX))
    }

    /// The source, or [`UNNAMED_HOST`] for the unnamed one.
    pub(super) fn label(&self) -> String {
        if self.source.is_empty() {
            UNNAMED_HOST.to_string()
        } else {
            self.source.clone()
        }
    }

    /// The source with its scope: `variant/source`.
    pub fn label_full(&self) -> String {
        match &self.scope {
            Some(s) => format!("{s}/{}", self.source),
            None => self.source.clone(),
        }
    }

    /// The node (host or switch) of this source: the node the inputs
    /// name, else the name without a trailing `-pN` port marker.
    pub fn node(&self) -> String {
        if self.node_name.is_empty() {
            node_of(&self.label())
        } else {
            self.node_name.clone()
        }
    }

    /// A switch port (by what the inputs say or by a `<switch>-pN` name).
    pub fn is_switch_port(&self) -> bool {
        self.entity == Entity::SwitchPort
    }

    /// What the values count over.
    pub fn time_base(&self) -> TimeBase {
        match (self.since_boot, self.run_delta, self.from_zero) {
            (true, _, _) => TimeBase::SinceBoot,
            (_, true, _) => TimeBase::RunDelta(self.interval_ps.unwrap_or(0)),
            (_, _, true) => TimeBase::FromZero(self.interval_ps.unwrap_or(0)),
            _ => TimeBase::Delta(self.interval_ps),
        }
    }

    /// The share of the interval a pause direction covers: from the
    /// duration counter `dur_n` (microseconds) when the source has one,
    /// else estimated from the frame counter `frames_n` as frames x
    /// [`ASSUMED_QUANTA`] x 512 bit times at the link speed (the source's,
    /// else [`ASSUMED_LINK_BPS`]), capped at 100 %. None without an
    /// interval (or since boot, where there is no interval).
    pub(super) fn pause_share(&self, frames_n: &str, dur_n: &str) -> Option<PauseShare> {
        let ps = self.interval_ps.filter(|p| *p > 0)?;
        if self.has(dur_n) || self.get(dur_n) > 0 {
            return Some(PauseShare {
                ppm: self.ppm_of_interval(self.get(dur_n))?.min(1_000_000),
                estimated: None,
            });
        }
        let frames = self.get(frames_n);
        let bps = self.link_bps.filter(|b| *b > 0).unwrap_or(ASSUMED_LINK_BPS);
        // Paused time per frame: quanta x 512 bit times.
        // Saturating: a hostile count only reaches the 100 % cap.
        let bits = u128::from(frames) * u128::from(ASSUMED_QUANTA) * 512;
        let paused_ps = bits.saturating_mul(1_000_000_000_000) / u128::from(bps);
        let ppm = (paused_ps.saturating_mul(1_000_000) / u128::from(ps)).min(1_000_000) as u64;
        Some(PauseShare {
            ppm,
            estimated: Some(format!(
                "an estimate: the tool prints no pause duration, so {frames} frames x {ASSUMED_QUANTA} quanta x 512 bit times at {} ({}), capped at 100 %; an upper bound, since a port refreshes PAUSE before it expires and XON frames may be counted too",
                format_bps(bps),
                if self.link_bps.is_some() { "the link speed the capture gives" } else { "an assumed link speed: the capture does not say" }
            )),
        })
    }

    /// How the values were counted: `since boot`, `in 10s`, ...
    pub(super) fn how(&self) -> String {
        if self.since_boot {
            "since boot".to_string()
        } else if self.run_delta {
            format!(
                "in the {} of one run",
                Duration::from_ps(self.interval_ps.unwrap_or(0))
            )
        } else if self.from_zero {
            format!(
                "in {} of simulated time",
                Duration::from_ps(self.interval_ps.unwrap_or(0))
            )
        } else {
            match self.interval_ps {
                Some(ps) => format!("in {}", Duration::from_ps(ps)),
                None => "between snapshots".to_string(),
            }
        }
    }

    /// Cap a severity for since-boot totals.
    pub(super) fn cap(&self, s: Severity) -> Severity {
        if self.since_boot {
            s.min(Severity::Warning)
        } else {
            s
        }
    }

    /// Priorities with PFC rows (`rx_prioN_pause` or `tx_prioN_pause`).
    pub(super) fn pfc_prios(&self) -> Vec<u8> {
        (0u8..8)
            .filter(|p| {
                self.has(&format!("rx_prio{p}_pause")) || self.has(&format!("tx_prio{p}_pause"))
            })
            .collect()
    }
}

/// A speed in bit/s as `100 Gbit/s`.
pub(super) fn format_bps(bps: u64) -> String {
    if bps % 1_000_000_000 == 0 {
        format!("{} Gbit/s", bps / 1_000_000_000)
    } else {
        format!("{} Mbit/s", bps / 1_000_000)
    }
}

/// The pause counters of `tag` (`prio3`, `global`): rx frames, rx
/// duration, tx frames, tx duration.
pub(super) fn prio_names(tag: &str) -> (String, String, String, String) {
    (
        format!("rx_{tag}_pause"),
        format!("rx_{tag}_pause_duration"),
        format!("tx_{tag}_pause"),
        format!("tx_{tag}_pause_duration"),
    )
}

/// The pause tags: `prio0`..`prio7`, then `global`.
pub(super) fn tags() -> impl Iterator<Item = String> {
    (0..8)
        .map(|p| format!("prio{p}"))
        .chain(std::iter::once("global".to_string()))
}
