//! The twin of a real perftest setup: from real dumps of one setup (a
//! perftest output and, where given, ibv_devinfo, ethtool, ethtool -S,
//! lspci -vv, mlnx_qos, show_gids, rdma statistic), infer the test, the
//! hosts' NIC and PCIe link, the link, the MTU and the PFC, ECN and trust
//! settings ([`infer`]), and write them as an ordinary scenario and
//! topology ([`TwinSetup::scenario_toml`], [`TwinSetup::topology_toml`])
//! that the simulator runs and a user can edit. The real table
//! ([`TwinSetup::real`]) is what the model's results are set against.
//!
//! # Contract
//!
//! * Every value not read from an input is an [`Assumption`] naming the
//!   [`TwinSetup`] field it fills (`pcie`, `link_gbps`, ...; `back_to_back`,
//!   `cable` and `switch` for the fabric, `cnps` for congestion control),
//!   and the writer marks its line `# assumed:`.
//! * [`TwinSetup::understood`] has one line per input: what it was read as,
//!   what was taken from it.
//! * Bad input is an error that says what was understood
//!   ([`TwinError`]): no perftest output, a foreign file, a run cut before
//!   its first row or failed, two tests or two clients, an InfiniBand run.
//!   Both ends of one test in one file (or two) are one run: the client's
//!   table is used.
//! * Nothing here prints, reads files or panics on any input.
//!
//! Units: sizes and MTUs in bytes, rates in bit/s (the link in Gbit/s),
//! latencies in nanoseconds.

mod evidence;
mod host;
mod infer;
mod qos;
mod report;
mod scenario;
mod types;

pub use evidence::read;
pub use infer::{infer, infer_texts};
pub use report::{compare, render_markdown, render_text, TwinReport, TwinRow, AGREE};
pub use scenario::TOPOLOGY_FILE;
pub use types::{Assumption, RealRow, TwinError, TwinSetup, EXPECTED_INPUTS};

#[cfg(test)]
mod tests;
