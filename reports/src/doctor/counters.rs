//! Counters of one source: its snapshots ([`Snap`]) and the view the
//! checks read ([`CounterView`]): the delta between the first and last
//! snapshot, or the totals of a single one, with the interval they cover;
//! and the names of the pause counters per priority.

use std::collections::{BTreeMap, BTreeSet};

use roce::time::Duration;

use super::finding::Severity;
use super::names::node_of;

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

/// Counters of one source, as a delta or as since-boot totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterView {
    /// Source name (`""` = unnamed).
    pub source: String,
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

    /// The source, or `capture` for the unnamed one.
    pub(super) fn label(&self) -> String {
        if self.source.is_empty() {
            "capture".to_string()
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

    /// The node (host or switch) of this source: the name without a
    /// trailing `-pN` port marker.
    pub fn node(&self) -> String {
        node_of(&self.label())
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
