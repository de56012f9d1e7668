//! Counters as a NIC exposes them: per device (`ethtool -S`, `rdma
//! statistic show link`) and per QP (`rdma statistic qp`), with each QP's
//! current congestion-control rate.
//!
//! Contract:
//!
//! * Names are mlx5's. The transport's come from the one table,
//!   [`QpStats::hw_counters`] (`out_of_sequence`, `packet_seq_err`,
//!   `local_ack_timeout_err`, `np_ecn_marked_roce_packets`, `np_cnp_sent`,
//!   `rp_cnp_handled`, ...), the names the simulator's `rdma statistic`
//!   dumps use; a device then adds its own (`rx_icrc_encapsulated`, ...).
//! * Values are event counts (packets, NAKs, timer expiries), cumulative:
//!   a device's count from when it was opened, destroyed and reset QPs
//!   included; a QP's from when it was created or last moved to RESET.
//!   They only grow, so the difference of two readings ([`delta`]) is
//!   what happened in between.
//! * A rate is bits per second on the wire; `None` means the QP's sending
//!   is not limited (no congestion control algorithm).
//! * [`ethtool_text`] prints a list in `ethtool -S`'s layout (`NIC
//!   statistics:` then `     name: value`, five spaces), the form the
//!   project's parsers and the doctor read.

use std::fmt::Write as _;
use std::path::Path;

use crate::verbs::{Result, VerbsError};
use roce::time::Rate;
use roce::transport::{QpStats, HW_COUNTERS};

/// Counters by name, in the order the device keeps them.
pub type CounterList = Vec<(String, u64)>;

/// One QP's counters and its current rate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpCounters {
    /// The transport counters of the QP ([`QpStats::hw_counters`] order).
    pub counters: CounterList,
    /// The sending rate its congestion control allows now; `None` when
    /// the QP has no algorithm limiting it.
    pub rate: Option<Rate>,
}

impl QpCounters {
    /// A QP's counters from its engine statistics and its rate.
    pub fn from_stats(stats: &QpStats, rate: Option<Rate>) -> QpCounters {
        QpCounters {
            counters: named(stats.hw_counters()),
            rate,
        }
    }

    /// One counter by name (`None` when the list has no such name).
    pub fn get(&self, name: &str) -> Option<u64> {
        get(&self.counters, name)
    }
}

/// One counter of a list by name.
pub fn get(counters: &[(String, u64)], name: &str) -> Option<u64> {
    counters.iter().find_map(|(n, v)| (n == name).then_some(*v))
}

/// `(&str, u64)` pairs as an owned list.
pub fn named<const N: usize>(pairs: [(&'static str, u64); N]) -> CounterList {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

/// The transport counters of a device: the sum over its QPs, kept in
/// [`QpStats::hw_counters`] order, so that QPs destroyed or reset leave
/// their counts behind (a device's counters only grow).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TransportTotals([u64; HW_COUNTERS]);

impl TransportTotals {
    /// Add one QP's counters.
    pub fn add(&mut self, stats: &QpStats) {
        for (t, (_, n)) in self.0.iter_mut().zip(stats.hw_counters()) {
            *t = t.saturating_add(n);
        }
    }

    /// The totals under their names.
    pub fn named(&self) -> CounterList {
        QpStats::default()
            .hw_counters()
            .iter()
            .zip(self.0)
            .map(|((name, _), n)| (name.to_string(), n))
            .collect()
    }
}

/// What changed from `before` to `after`: every counter of `after`, in its
/// order, less its value in `before` (a name `before` lacks counts from
/// zero; a counter that fell, a reset, counts from zero too).
pub fn delta(before: &[(String, u64)], after: &[(String, u64)]) -> CounterList {
    after
        .iter()
        .map(|(n, v)| {
            let b = get(before, n).unwrap_or(0);
            (n.clone(), if *v >= b { v - b } else { *v })
        })
        .collect()
}

/// A list in `ethtool -S`'s layout: `NIC statistics:`, then one
/// `     name: value` line per counter (five spaces), newline-terminated.
pub fn ethtool_text(counters: &[(String, u64)]) -> String {
    let mut out = String::from("NIC statistics:\n");
    for (n, v) in counters {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "     {n}: {v}");
    }
    out
}

/// The hardware counters of a real RDMA port from its sysfs folder
/// (`/sys/class/infiniband/DEV/ports/PORT/hw_counters`, one integer per
/// file): the names of [`QpStats::hw_counters`] the device has, in that
/// order, then the rest in name order (`rx_icrc_encapsulated`,
/// `rx_write_requests`, ...). Files that do not hold an integer
/// (`lifespan` does, and is not a counter: left out) are skipped.
/// `Unavailable` when the folder cannot be read (no such device, or a
/// driver without hardware counters).
pub fn read_sysfs_hw_counters(dir: &Path) -> Result<CounterList> {
    let entries = std::fs::read_dir(dir).map_err(|e| {
        VerbsError::Unavailable(format!(
            "hardware counters: {}: {e} (the driver exposes none here)",
            dir.display()
        ))
    })?;
    let mut found: Vec<(String, u64)> = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name == "lifespan" {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        if let Ok(v) = text.trim().parse::<u64>() {
            found.push((name, v));
        }
    }
    found.sort();
    let table = QpStats::default().hw_counters();
    let mut out: CounterList = table
        .iter()
        .filter_map(|(n, _)| get(&found, n).map(|v| (n.to_string(), v)))
        .collect();
    out.extend(
        found
            .into_iter()
            .filter(|(n, _)| !table.iter().any(|(t, _)| t == n)),
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_keep_the_table_order_and_sum() {
        let a = QpStats {
            rx_out_of_sequence: 3,
            rx_cnps: 5,
            rx_cnps_ignored: 2,
            ..QpStats::default()
        };
        let mut t = TransportTotals::default();
        t.add(&a);
        t.add(&a);
        let n = t.named();
        assert_eq!(n.len(), HW_COUNTERS);
        assert_eq!(n[0], ("out_of_sequence".to_string(), 6));
        assert_eq!(get(&n, "rp_cnp_handled"), Some(6));
        assert_eq!(get(&n, "rp_cnp_ignored"), Some(4));
        assert_eq!(get(&n, "np_cnp_sent"), Some(0));
    }

    #[test]
    fn delta_subtracts_by_name_and_survives_resets() {
        let before = named([("a", 5), ("b", 7)]);
        let after = named([("b", 9), ("a", 2), ("c", 4)]);
        assert_eq!(
            delta(&before, &after),
            named([("b", 2), ("a", 2), ("c", 4)])
        );
    }

    #[test]
    fn ethtool_text_is_ethtools_layout() {
        let t = ethtool_text(&named([("np_cnp_sent", 12), ("rx_icrc_encapsulated", 0)]));
        assert_eq!(
            t,
            "NIC statistics:\n     np_cnp_sent: 12\n     rx_icrc_encapsulated: 0\n"
        );
    }

    #[test]
    fn sysfs_counters_put_the_table_first() {
        let dir = std::env::temp_dir().join(format!("rocelab-hwc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (n, v) in [
            ("rx_write_requests", "10\n"),
            ("np_cnp_sent", "4\n"),
            ("out_of_sequence", "2\n"),
            ("lifespan", "10\n"),
            ("garbage", "n/a\n"),
        ] {
            std::fs::write(dir.join(n), v).unwrap();
        }
        let c = read_sysfs_hw_counters(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            c,
            named([
                ("out_of_sequence", 2),
                ("np_cnp_sent", 4),
                ("rx_write_requests", 10)
            ])
        );
        let missing = read_sysfs_hw_counters(Path::new("/nonexistent/hw_counters"));
        assert!(matches!(missing, Err(VerbsError::Unavailable(_))));
    }
}
