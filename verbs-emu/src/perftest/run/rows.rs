//! A run's results as numbers: the rows of perftest's table
//! ([`ResultRow`]) and a bandwidth test's measurement ([`BwRow`]).
//!
//! Contract: plain data; printing and the JSON report are elsewhere.

use crate::perftest::report::LatencyStats;

/// One result row of a run, as numbers (what the table prints).
#[derive(Debug, Clone, PartialEq)]
pub enum ResultRow {
    /// A bandwidth row; `peak` and `avg` in the table's unit.
    Bw {
        /// Message size.
        size: u64,
        /// Iterations.
        iters: u64,
        /// Peak bandwidth.
        peak: f64,
        /// Average bandwidth.
        avg: f64,
        /// Message rate in Mpps.
        msg_rate: f64,
    },
    /// A latency row.
    Lat {
        /// Message size.
        size: u64,
        /// Iterations.
        iters: u64,
        /// The statistics, microseconds.
        stats: LatencyStats,
    },
    /// A latency row in duration mode.
    LatDuration {
        /// Message size.
        size: u64,
        /// Iterations done.
        iters: u64,
        /// Mean latency, microseconds.
        avg_us: f64,
        /// Transactions per second.
        tps: f64,
    },
}

/// One bandwidth measurement, before it becomes a [`ResultRow`].
pub(super) struct BwRow {
    pub(super) size: u64,
    pub(super) iters: u64,
    pub(super) peak: f64,
    pub(super) avg: f64,
    pub(super) rate: f64,
}
