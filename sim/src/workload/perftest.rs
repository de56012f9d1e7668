//! perftest in the simulator: what `ib_write_bw`, `ib_read_bw`,
//! `ib_send_bw` and the `ib_*_lat` tests do, as flows.
//!
//! * **Bandwidth tests** (`*_bw`): per size, one flow per QP (`-q`) of
//!   `iters` messages (`-n`), or as many as fit in `duration` (`-D`),
//!   posted by perftest's loop: at most `tx_depth` (`-t`) outstanding, a
//!   completion seen every `cq_mod` (`-Q`) work requests, payloads up to
//!   `inline` (`-I`) bytes carried in the WQE. With `bidirectional` (`-b`)
//!   the server runs the same flows back. Sizes run one after the other
//!   (the next size's flows wait for the last flow of the size before).
//! * **Latency tests** (`*_lat`): one message in flight. `write_lat` and
//!   `send_lat` are a ping-pong: the client's message `k` goes when the
//!   server's message `k - 1` has landed in the client's memory, the
//!   server's message `k` when the client's message `k` has landed in the
//!   server's; `read_lat` posts each READ when the one before completed.
//!   The samples are the intervals between the client's posts, halved for
//!   the ping-pongs (perftest reports half the round trip) and whole for
//!   READ.
//!
//! Each size is one [`super::GroupSpec`] with a [`PerftestRow`]; its
//! flows carry a [`super::PostLoop`] (the flows are made by
//! [`super::generate::perftest`]). The fabric records what perftest measures; the rows are
//! computed from the run's flows and groups ([`crate::results`]).

use roce::time::Duration;
use serde::Serialize;

use super::op::FlowOp;

/// Sizes `-a` runs: 2 bytes to 8 MiB, powers of two (perftest's range).
pub fn all_sizes() -> Vec<u64> {
    (1..=23).map(|e| 1u64 << e).collect()
}

/// Which perftest program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PerftestTest {
    /// `ib_write_bw`.
    WriteBw,
    /// `ib_read_bw`.
    ReadBw,
    /// `ib_send_bw`.
    SendBw,
    /// `ib_write_lat`.
    WriteLat,
    /// `ib_read_lat`.
    ReadLat,
    /// `ib_send_lat`.
    SendLat,
}

impl PerftestTest {
    /// Every test.
    pub const ALL: [PerftestTest; 6] = [
        PerftestTest::WriteBw,
        PerftestTest::ReadBw,
        PerftestTest::SendBw,
        PerftestTest::WriteLat,
        PerftestTest::ReadLat,
        PerftestTest::SendLat,
    ];

    /// The name scenario files and results use (`write_bw`).
    pub fn name(self) -> &'static str {
        match self {
            PerftestTest::WriteBw => "write_bw",
            PerftestTest::ReadBw => "read_bw",
            PerftestTest::SendBw => "send_bw",
            PerftestTest::WriteLat => "write_lat",
            PerftestTest::ReadLat => "read_lat",
            PerftestTest::SendLat => "send_lat",
        }
    }

    /// The test of a name (`write_bw` or `ib_write_bw`).
    pub fn from_name(s: &str) -> Option<PerftestTest> {
        let s = s.strip_prefix("ib_").unwrap_or(s);
        PerftestTest::ALL.into_iter().find(|t| t.name() == s)
    }

    /// A bandwidth test.
    pub fn is_bw(self) -> bool {
        matches!(
            self,
            PerftestTest::WriteBw | PerftestTest::ReadBw | PerftestTest::SendBw
        )
    }

    /// The verb.
    pub fn op(self) -> FlowOp {
        match self {
            PerftestTest::WriteBw | PerftestTest::WriteLat => FlowOp::Write,
            PerftestTest::ReadBw | PerftestTest::ReadLat => FlowOp::Read,
            PerftestTest::SendBw | PerftestTest::SendLat => FlowOp::Send,
        }
    }

    /// What perftest divides a latency sample by: 2 for the ping-pongs,
    /// 1 for READ.
    pub fn rtt_factor(self) -> u32 {
        if self.op() == FlowOp::Read {
            1
        } else {
            2
        }
    }

    /// perftest's title verb (`RDMA_Write`, `RDMA_Read`, `Send`).
    pub fn verb(self) -> &'static str {
        match self.op() {
            FlowOp::Write => "RDMA_Write",
            FlowOp::Read => "RDMA_Read",
            FlowOp::Send => "Send",
        }
    }

    /// Default iterations (`-n`): 5000 for `write_bw`, 1000 for the
    /// others (perftest's defaults).
    pub fn default_iters(self) -> u64 {
        if self == PerftestTest::WriteBw {
            5000
        } else {
            1000
        }
    }

    /// Default inline size (`-I`) on a ConnectX: 220 bytes for
    /// `write_lat`, 236 for `send_lat`, none for the others.
    pub fn default_inline(self) -> u32 {
        match self {
            PerftestTest::WriteLat => 220,
            PerftestTest::SendLat => 236,
            _ => 0,
        }
    }

    /// Default size: 65536 bytes for bandwidth, 2 for latency.
    pub fn default_size(self) -> u64 {
        if self.is_bw() {
            65536
        } else {
            2
        }
    }
}

/// One perftest run as a workload gives it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerftestSpec {
    /// The program.
    pub test: PerftestTest,
    /// Message sizes, bytes, in the order they run.
    pub sizes: Vec<u64>,
    /// Iterations per size (`-n`; with `duration`, unused).
    pub iters: u64,
    /// Run each size this long instead (`-D`).
    pub duration: Option<Duration>,
    /// QPs (`-q`).
    pub qps: u32,
    /// Outstanding work requests per QP (`-t`; latency tests: 1).
    pub tx_depth: u32,
    /// Both directions at once (`-b`, bandwidth tests).
    pub bidirectional: bool,
    /// Largest payload carried inline in the WQE (`-I`), bytes.
    pub inline: u32,
    /// A completion every this many work requests (`-Q`).
    pub cq_mod: u32,
}

/// What one size of a perftest run measures (a [`super::GroupSpec`]'s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct PerftestRow {
    /// The program.
    pub test: PerftestTest,
    /// Message size, bytes.
    pub size: u64,
    /// QPs.
    pub qps: u32,
    /// Both directions.
    pub bidirectional: bool,
    /// Outstanding work requests per QP.
    pub tx_depth: u32,
    /// A completion every this many work requests.
    pub cq_mod: u32,
    /// Largest inline payload, bytes.
    pub inline: u32,
    /// Each size ran for a duration (`-D`), not a count.
    pub timed: bool,
}
