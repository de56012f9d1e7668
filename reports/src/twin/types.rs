//! What a twin is made of: the inferred setup ([`TwinSetup`]), the real
//! table it is compared with ([`RealRow`]), what had to be assumed
//! ([`Assumption`]) and why an inference fails ([`TwinError`]). The
//! inference (`infer.rs`) builds these; the scenario writer
//! (`scenario.rs`) reads them.

use serde::Serialize;
use sim::config::NicModel;
use sim::workload::perftest::PerftestTest;

use crate::realnic::perftest::Side;
use crate::realnic::Kind;

/// The formats the twin reads, as the error messages name them.
pub const EXPECTED_INPUTS: &str = "perftest output (ib_write_bw, ib_read_bw, ib_send_bw, \
ib_write_lat, ib_read_lat, ib_send_lat; the client's, or both ends in one file) and, where \
you have them, ibv_devinfo (or ibstat, ibstatus), ethtool IFACE, ethtool -a, ethtool -S, \
lspci -vv, mlnx_qos -i, show_gids and rdma statistic";

/// A like-for-like model of one real perftest run: the test as it was run,
/// the host and link it ran on, and the real table to compare with.
///
/// Units: sizes and MTUs in bytes, rates in bits per second unless the
/// name says Gbit/s, times in nanoseconds unless the name says seconds.
/// Every value that was not read from an input is listed in
/// [`TwinSetup::assumptions`] under the field's name.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwinSetup {
    /// The perftest program.
    pub test: PerftestTest,
    /// The message sizes of the real table, in its order, each once.
    pub sizes: Vec<u64>,
    /// The real run was `-a` (every power of two from 2 B to 8 MiB).
    pub all: bool,
    /// Iterations per size (`-n`); `None` in duration mode.
    pub iters: Option<u64>,
    /// Seconds per size (`-D`, or `--run_infinitely`'s reporting period);
    /// `None` in iteration mode.
    pub duration_s: Option<f64>,
    /// QPs (`-q`).
    pub qps: u32,
    /// Outstanding work requests per QP (`-t`).
    pub tx_depth: u32,
    /// Both directions at once (`-b`).
    pub bidirectional: bool,
    /// Largest inline payload (`-I`), bytes.
    pub inline: u32,
    /// A completion every this many work requests (`-Q`); `None` for the
    /// latency tests, which wait for every completion.
    pub cq_mod: Option<u32>,
    /// Path MTU (RoCE payload per packet), bytes.
    pub mtu: u32,
    /// Link rate, Gbit/s.
    pub link_gbps: u64,
    /// The NIC generation whose host-side defaults apply.
    pub nic_model: Option<NicModel>,
    /// PCIe link as trained: (generation, lanes).
    pub pcie: Option<(u8, u8)>,
    /// PCIe max payload size in force, bytes.
    pub max_payload: Option<u32>,
    /// PCIe max read request size in force, bytes.
    pub max_read_request: Option<u32>,
    /// Priorities with PFC on, bit `p` for priority `p`.
    pub pfc_priorities: Option<u8>,
    /// The priority RoCE traffic ran on.
    pub priority: Option<u8>,
    /// The NIC's priority trust mode (`pcp` or `dscp`).
    pub trust: Option<String>,
    /// The run used a RoCE v2 GID (`Some(false)`: RoCE v1).
    pub roce_v2: Option<bool>,
    /// Congestion notification packets the counter dumps show (sent and
    /// handled); `None` when no counter dump has them.
    pub cnps: Option<u64>,
    /// The two hosts are cabled to each other, without a switch. The
    /// inputs never say so: [`super::infer`] leaves it `false` (one switch,
    /// an assumption it lists); a caller told otherwise calls
    /// [`TwinSetup::cabled_back_to_back`].
    pub back_to_back: bool,
    /// The real table, one row per size.
    pub real: Vec<RealRow>,
    /// Which end's table [`TwinSetup::real`] is.
    pub side: Side,
    /// Every value not read from an input: what, the value taken, why.
    pub assumptions: Vec<Assumption>,
    /// One line per input: what it was read as and what was taken from it.
    pub understood: Vec<String>,
}

impl TwinSetup {
    /// The hosts are cabled back to back, as the user says (no input can):
    /// the twin drops its one-switch assumption and says where this came
    /// from.
    pub fn cabled_back_to_back(&mut self) {
        self.back_to_back = true;
        self.assumptions.retain(|a| a.what != "back_to_back");
        self.understood
            .push("told: the hosts are cabled back to back, without a switch".to_string());
    }

    /// The test is `test`, as the user says (an excerpt without its
    /// title): it replaces any assumed test and says where it came from.
    pub fn told_test(&mut self, test: PerftestTest) {
        self.test = test;
        self.assumptions.retain(|a| a.what != "test");
        self.understood
            .push(format!("told: the test is ib_{}", test.name()));
    }

    /// The user set scenario key `key` to `value` (what no dump says): the
    /// assumptions it replaces go, and `understood` says so.
    pub fn told_setting(&mut self, key: &str, value: &str) {
        let replaces: &[&str] = match key {
            "nic.host.pcie_gen" | "nic.host.pcie_width" => &["pcie"],
            "nic.host.model" => &["nic_model"],
            "nic.host.max_payload" => &["max_payload"],
            "nic.host.max_read_request" => &["max_read_request"],
            "nic.mtu" => &["mtu"],
            "nic.priority" => &["priority"],
            _ => &[],
        };
        self.assumptions.retain(|a| !replaces.contains(&a.what));
        self.understood.push(format!("told: {key} = {value}"));
    }

    /// The assumption made for `what` (a field name), if any.
    pub fn assumption(&self, what: &str) -> Option<&Assumption> {
        self.assumptions.iter().find(|a| a.what == what)
    }
}

/// One size of the real table. Bandwidth tests fill the `bw_*` and
/// `msg_rate_per_s` fields, latency tests the `t_*` and percentile fields
/// (duration mode: `t_avg_ns` and `tps`); what the table did not print is
/// `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RealRow {
    /// Message size, bytes.
    pub bytes: u64,
    /// Iterations (achieved, in duration mode).
    pub iterations: u64,
    /// Peak bandwidth, bit/s (`None` when perftest did not measure it).
    pub bw_peak_bps: Option<u64>,
    /// Average bandwidth, bit/s.
    pub bw_avg_bps: Option<u64>,
    /// Messages per second.
    pub msg_rate_per_s: Option<u64>,
    /// `t_min`, ns.
    pub t_min_ns: Option<u64>,
    /// `t_typical` (the median), ns.
    pub t_typical_ns: Option<u64>,
    /// `t_avg`, ns.
    pub t_avg_ns: Option<u64>,
    /// `t_max`, ns.
    pub t_max_ns: Option<u64>,
    /// 99th percentile, ns.
    pub p99_ns: Option<u64>,
    /// 99.9th percentile, ns.
    pub p999_ns: Option<u64>,
    /// Transactions per second (latency in duration mode).
    pub tps: Option<u64>,
    /// Rows of this size the table had (`--run_infinitely` prints one per
    /// period); the bandwidth fields are their mean.
    pub repeats: u32,
}

/// A value the inputs did not give.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Assumption {
    /// The [`TwinSetup`] field (or `topology`, `cable`, `switch`, `cc`,
    /// `post_list`, ...) it is about.
    pub what: &'static str,
    /// The value taken.
    pub value: String,
    /// Why: what was missing, and where the value comes from.
    pub why: String,
}

/// Why no twin could be inferred. Each message says what was understood
/// of the inputs up to the point of failure.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TwinError {
    /// A file in no format the twin reads.
    #[error("{file}: not a format the twin reads ({reason}); expected {EXPECTED_INPUTS}")]
    Foreign {
        /// The file.
        file: String,
        /// What went wrong reading it.
        reason: String,
    },
    /// A file in a known format that says nothing about a perftest setup.
    #[error(
        "{file}: read as {kind} output, which the twin has no use for; expected {EXPECTED_INPUTS}"
    )]
    Unused {
        /// The file.
        file: String,
        /// What it was read as.
        kind: Kind,
    },
    /// No input is perftest output.
    #[error("no perftest output among the inputs: give the ib_*_bw or ib_*_lat output (the client's, or both ends in one file){}", listed(.understood))]
    NoPerftest {
        /// What the other inputs were read as.
        understood: Vec<String>,
    },
    /// Two runs that are not the two ends of one test.
    #[error("two perftest runs that are not the two ends of one test ({why}): {first}; {second}. A twin models one run: give one test's output (the client's, or both ends of one run){}", listed(.understood))]
    TwoRuns {
        /// The first run: file, line, title and end.
        first: String,
        /// The second run.
        second: String,
        /// `different tests` or `two client runs`.
        why: String,
        /// What was understood.
        understood: Vec<String>,
    },
    /// The run is over InfiniBand.
    #[error("{file}: an InfiniBand run ({evidence}); the twin models RoCE (Ethernet) only{}", listed(.understood))]
    InfiniBand {
        /// The file that says so.
        file: String,
        /// What says so.
        evidence: String,
        /// What was understood.
        understood: Vec<String>,
    },
    /// A test or setting the simulator's perftest workload does not run.
    #[error("{file}: {what}: the twin runs ib_write, ib_read and ib_send, _bw and _lat, over RC{}", listed(.understood))]
    Unsupported {
        /// The file.
        file: String,
        /// What is not supported.
        what: String,
        /// What was understood.
        understood: Vec<String>,
    },
    /// The chosen run has no result row.
    #[error("{file}: {run} has no result row: {why}{}", listed(.understood))]
    NoRows {
        /// The file.
        file: String,
        /// The run (title and end).
        run: String,
        /// Why: cut before the first row, a failed run, cycles.
        why: String,
        /// What was understood.
        understood: Vec<String>,
    },
}

/// `understood` lines as the tail of an error message.
fn listed(understood: &[String]) -> String {
    if understood.is_empty() {
        return String::new();
    }
    let mut s = String::from("\nunderstood so far:");
    for u in understood {
        s.push_str("\n  ");
        s.push_str(u);
    }
    s
}
