//! Parsers for real RDMA tools' output, and format detection.
//!
//! Every parser takes the whole text of one file and returns typed records
//! with normalised units (bits per second, bytes, nanoseconds or
//! picoseconds as integers) or a [`ParseError`] naming the line. They are
//! lenient in what they accept (quote prefixes, TABs or spaces, interleaved
//! warnings, excerpts) and exact in what they extract (integer arithmetic
//! on the printed decimals). No input makes any of them panic.
//!
//! [`detect`] guesses the [`Kind`] of a text; [`parse`] dispatches. Both
//! first make the text plain ([`paste::normalise`]: prompts' escapes,
//! parallel-shell prefixes, `==> file <==` headers, MPI tags, fences), so
//! a paste reads like the tool's own output.

pub mod devinfo;
pub mod ethtool;
pub mod events;
pub mod hca;
pub mod ibdiag;
pub mod nccl;
pub mod paste;
pub mod perftest;
pub mod perftest_json;
pub mod qos;
pub mod rdma;
pub mod summary;
pub mod swconfig;
pub mod text;
pub mod tools;
pub mod topo;

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

pub use text::ParseError;

/// The formats understood.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// perftest `ib_*_bw` / `ib_*_lat` output.
    Perftest,
    /// `ethtool -S` dump(s), also of Cumulus switch ports, and NVUE
    /// `nv show interface <if> counters qos` tables.
    Ethtool,
    /// `rdma statistic show` / hw_counters listings, `perfquery`.
    Rdma,
    /// `nvidia-smi topo -m`.
    Topo,
    /// Device and port state: `ibv_devinfo`, `ibstat`, `ibstatus`,
    /// `ibportstate`, `iblinkinfo`, `rdma link show`, `mlxconfig query`.
    Devinfo,
    /// `mlnx_qos -i`.
    MlnxQos,
    /// `show_gids`.
    ShowGids,
    /// NCCL INFO log.
    Nccl,
    /// The simulator's `results.json`.
    SimResults,
    /// nccl-tests output (`all_reduce_perf`, ...).
    NcclTests,
    /// SONiC switch tables: PFC counters, PFC watchdog, queue counters.
    Switch,
    /// `lspci -vv` PCIe link capability and status.
    Lspci,
    /// Plain `ethtool IFACE` / `ethtool -a IFACE`.
    EthtoolLink,
    /// Kernel / UCX event lines.
    Events,
    /// SONiC `mmuconfig -l`: a switch's buffer pools and profiles.
    MmuConfig,
    /// SONiC `ecnconfig -l` / `-q`: a switch's WRED/ECN profiles and
    /// queue states.
    EcnConfig,
}

impl Kind {
    /// All kinds, in the order `parse KIND` lists them.
    pub const ALL: [Kind; 16] = [
        Kind::Perftest,
        Kind::Ethtool,
        Kind::Rdma,
        Kind::Topo,
        Kind::Devinfo,
        Kind::MlnxQos,
        Kind::ShowGids,
        Kind::Nccl,
        Kind::SimResults,
        Kind::NcclTests,
        Kind::Switch,
        Kind::Lspci,
        Kind::EthtoolLink,
        Kind::Events,
        Kind::MmuConfig,
        Kind::EcnConfig,
    ];

    /// Command-line name.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Perftest => "perftest",
            Kind::Ethtool => "ethtool",
            Kind::Rdma => "rdma",
            Kind::Topo => "topo",
            Kind::Devinfo => "devinfo",
            Kind::MlnxQos => "mlnx-qos",
            Kind::ShowGids => "show-gids",
            Kind::Nccl => "nccl",
            Kind::SimResults => "sim-results",
            Kind::NcclTests => "nccl-tests",
            Kind::Switch => "switch",
            Kind::Lspci => "lspci",
            Kind::EthtoolLink => "ethtool-link",
            Kind::Events => "events",
            Kind::MmuConfig => "mmuconfig",
            Kind::EcnConfig => "ecnconfig",
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown kind name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format {0:?}: expected auto, perftest, ethtool (also nvue), rdma (also perfquery), topo, devinfo (also ibstat, ibstatus, ibportstate, iblinkinfo, rdma-link, mlxconfig), mlnx-qos, show-gids, nccl, sim-results, nccl-tests, switch (SONiC pfcstat/pfcwd/queue counters), lspci, ethtool-link, events (kernel/UCX log), mmuconfig (SONiC buffer pools and profiles, show buffer configuration) or ecnconfig (SONiC WRED/ECN profiles, show ecn)")]
pub struct UnknownKind(pub String);

impl FromStr for Kind {
    type Err = UnknownKind;
    fn from_str(s: &str) -> Result<Kind, UnknownKind> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "perftest" => Kind::Perftest,
            "ethtool" | "nvue" | "cumulus" => Kind::Ethtool,
            "rdma" | "hw-counters" | "hw_counters" | "perfquery" => Kind::Rdma,
            "topo" => Kind::Topo,
            "devinfo" | "ibv_devinfo" | "ibstat" | "ibstatus" | "ibportstate" | "iblinkinfo"
            | "rdma-link" | "rdma_link" | "mlxconfig" | "mstconfig" => Kind::Devinfo,
            "mlnx-qos" | "mlnx_qos" => Kind::MlnxQos,
            "show-gids" | "show_gids" => Kind::ShowGids,
            "nccl" => Kind::Nccl,
            "sim-results" | "results" | "results.json" => Kind::SimResults,
            "nccl-tests" | "nccl_tests" => Kind::NcclTests,
            "switch" | "sonic" | "pfcstat" | "pfcwd" => Kind::Switch,
            "lspci" => Kind::Lspci,
            "ethtool-link" | "ethtool-a" => Kind::EthtoolLink,
            "events" | "dmesg" | "ucx" | "log" => Kind::Events,
            "mmuconfig" | "mmu" | "buffers" => Kind::MmuConfig,
            "ecnconfig" | "ecn" | "wred" => Kind::EcnConfig,
            _ => return Err(UnknownKind(s.to_string())),
        })
    }
}

/// A parsed file of any kind.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "data", rename_all = "snake_case")]
pub enum Parsed {
    /// perftest.
    Perftest(perftest::PerftestReport),
    /// ethtool snapshots.
    Ethtool(Vec<ethtool::EthtoolSnapshot>),
    /// RDMA counter snapshots.
    Rdma(Vec<rdma::RdmaSnapshot>),
    /// topo matrix.
    Topo(topo::TopoMatrix),
    /// devices.
    Devinfo(Vec<hca::HcaInfo>),
    /// QoS config.
    MlnxQos(qos::QosConfig),
    /// GID table.
    ShowGids(Vec<qos::GidEntry>),
    /// NCCL log.
    Nccl(nccl::NcclLog),
    /// The simulator's results, kept as JSON (read leniently).
    SimResults(serde_json::Value),
    /// nccl-tests.
    NcclTests(tools::NcclTests),
    /// Switch tables.
    Switch(tools::SwitchReport),
    /// PCIe links.
    Lspci(Vec<tools::PciLink>),
    /// Link settings.
    EthtoolLink(Vec<tools::EthLink>),
    /// Log events.
    Events(Vec<tools::Event>),
    /// A switch's buffer configuration.
    MmuConfig(swconfig::MmuConfig),
    /// A switch's ECN/WRED configuration.
    EcnConfig(swconfig::EcnConfig),
}

impl Parsed {
    /// The kind of this record.
    pub fn kind(&self) -> Kind {
        match self {
            Parsed::Perftest(_) => Kind::Perftest,
            Parsed::Ethtool(_) => Kind::Ethtool,
            Parsed::Rdma(_) => Kind::Rdma,
            Parsed::Topo(_) => Kind::Topo,
            Parsed::Devinfo(_) => Kind::Devinfo,
            Parsed::MlnxQos(_) => Kind::MlnxQos,
            Parsed::ShowGids(_) => Kind::ShowGids,
            Parsed::Nccl(_) => Kind::Nccl,
            Parsed::SimResults(_) => Kind::SimResults,
            Parsed::NcclTests(_) => Kind::NcclTests,
            Parsed::Switch(_) => Kind::Switch,
            Parsed::Lspci(_) => Kind::Lspci,
            Parsed::EthtoolLink(_) => Kind::EthtoolLink,
            Parsed::Events(_) => Kind::Events,
            Parsed::MmuConfig(_) => Kind::MmuConfig,
            Parsed::EcnConfig(_) => Kind::EcnConfig,
        }
    }
}

/// Guess the format of `input` (made plain first, see [`paste`]). `None`
/// when nothing matches.
pub fn detect(input: &str) -> Option<Kind> {
    detect_plain(&paste::normalise(input))
}

fn detect_plain(input: &str) -> Option<Kind> {
    let trimmed = input.trim_start();
    if perftest_json::looks_like(input) {
        return Some(Kind::Perftest);
    }
    if (trimmed.starts_with('{') || trimmed.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(input).is_ok()
    {
        return Some(Kind::SimResults);
    }
    let ls = text::lines(input);
    let has = |pred: &dyn Fn(&str) -> bool| ls.iter().any(|l| pred(l.text.trim()));
    if tools::looks_nccl_tests(&ls) {
        return Some(Kind::NcclTests);
    }
    match swconfig::detect(input) {
        Some(true) => return Some(Kind::EcnConfig),
        Some(false) => return Some(Kind::MmuConfig),
        None => {}
    }
    if has(&|t| {
        let u = t.to_ascii_uppercase();
        u.starts_with("PORT RX")
            || u.starts_with("PORT TX")
            || (u.starts_with("QUEUE") && u.contains("STATUS") && u.contains("STORM"))
            || (u.starts_with("PORT") && u.contains("TXQ") && u.contains("DROP"))
            || (u.starts_with("PORT") && u.contains("OUTDROPPKTS"))
            || (u.starts_with("PORT") && u.contains("PG0") && u.contains("PG7"))
    }) {
        return Some(Kind::Switch);
    }
    if has(&|t| t.starts_with("LnkCap:") || t.starts_with("LnkSta:")) {
        return Some(Kind::Lspci);
    }
    if has(&|t| t.starts_with("Settings for ") || t.starts_with("Pause parameters for ")) {
        return Some(Kind::EthtoolLink);
    }
    if has(&|t| {
        t.contains("NCCL INFO")
            || t.contains("NCCL WARN")
            || t.starts_with("NCCL version")
            || t.contains(" NCCL version")
    }) {
        return Some(Kind::Nccl);
    }
    if has(&|t| t.ends_with("BW Test") || t.ends_with("Latency Test") || t.starts_with("#bytes")) {
        return Some(Kind::Perftest);
    }
    if has(&|t| t.starts_with("NIC statistics")) {
        return Some(Kind::Ethtool);
    }
    // NVUE QoS counter tables of a Cumulus switch port; switch SDK dumps.
    if has(&|t| {
        (t.starts_with("switch-priority") && t.contains("pause"))
            || ethtool::sdk_port_header(t).is_some()
            || ethtool::is_netq_header(t)
    }) || (has(&|t| t.starts_with("Prio ")) && has(&|t| t.starts_with("rx_pause = ")))
    {
        return Some(Kind::Ethtool);
    }
    if has(&|t| rdma::looks_perfquery(t)) {
        return Some(Kind::Rdma);
    }
    if has(&|t| {
        t.starts_with("hca_id:")
            || t.starts_with("CA '")
            || t.starts_with("Infiniband device '")
            || t.starts_with("# Port info:")
            || t.starts_with("LinkState:..")
            || (t.contains("==(") && t.contains(")==>"))
            || ibdiag::is_rdma_link_line(t)
            || t.contains(": node_type ")
            || (t.starts_with("GID[") && t.contains("RoCE v"))
    }) || has(&|t| {
        t.starts_with("Configurations:")
            && ["Next Boot", "Current", "Default", "New"]
                .iter()
                .any(|c| t.contains(c))
    }) {
        return Some(Kind::Devinfo);
    }
    if has(&|t| {
        t.starts_with("Priority trust state")
            || t.starts_with("PFC configuration")
            || t.starts_with("DCBX mode")
    }) {
        return Some(Kind::MlnxQos);
    }
    if has(&|t| {
        t.contains("n_gids_found")
            || (t.contains("DEV") && t.contains("GID") && t.contains("INDEX"))
    }) {
        return Some(Kind::ShowGids);
    }
    if has(&|t| t.starts_with("GPU0") || t.starts_with("NIC Legend") || t.contains("X    = Self")) {
        return Some(Kind::Topo);
    }
    if has(&|t| {
        t.starts_with("link ") && t.split_whitespace().nth(1).is_some_and(|d| d.contains('/'))
            || t.contains("/hw_counters/")
            || t.ends_with("hw counters:")
    }) {
        return Some(Kind::Rdma);
    }
    // Header-less counter lists: RDMA names or ethtool names.
    let pairs: Vec<&str> = ls
        .iter()
        .filter_map(|l| text::counter_pair(l.text).map(|(n, _)| n))
        .collect();
    // A counter list must look like one: most names counter-like, at
    // least one a known NIC counter shape (so `key: 3` prose is no dump).
    let known = pairs
        .iter()
        .filter(|n| is_rdma_counter(n) || is_eth_counter(n))
        .count();
    if pairs.is_empty() || known == 0 || known * 2 < pairs.len() {
        return tools::parse_events(input).is_ok().then_some(Kind::Events);
    }
    let rdma_like = pairs.iter().filter(|n| is_rdma_counter(n)).count();
    if rdma_like * 2 > pairs.len() {
        Some(Kind::Rdma)
    } else {
        Some(Kind::Ethtool)
    }
}

fn is_eth_counter(n: &str) -> bool {
    let n = n.to_ascii_lowercase();
    n.starts_with("rx")
        || n.starts_with("tx")
        || n.contains("_phy")
        || n.contains("pause")
        || n.contains("discard")
        || n.contains("drop")
        || n.contains("err")
        || n.ends_with(".nic")
        || n.starts_with("link_down")
        || n.starts_with("ch_")
        || n.starts_with("port")
        || n.contains("xon")
        || n.contains("xoff")
}

/// Whether `n` names an RDMA hardware counter (mlx5's `hw_counters`:
/// `np_*`, `rp_*`, `roce_*`, `req_*`, `resp_*`, `out_of_sequence`,
/// `packet_seq_err`, `rx_icrc_encapsulated`, ...) rather than an Ethernet
/// port counter.
pub fn is_rdma_counter(n: &str) -> bool {
    n.starts_with("np_")
        || n.starts_with("rp_")
        || n.starts_with("roce_")
        || n.starts_with("req_")
        || n.starts_with("resp_")
        || n.starts_with("rx_write_requests")
        || n.starts_with("rx_read_requests")
        || n.starts_with("rx_atomic_requests")
        || matches!(
            n,
            "out_of_sequence"
                | "out_of_buffer"
                | "packet_seq_err"
                | "local_ack_timeout_err"
                | "duplicate_request"
                | "implied_nak_seq_err"
                | "rnr_nak_retry_err"
                | "rx_icrc_encapsulated"
                | "lifespan"
        )
}

/// Errors of [`parse`]: detection failure or a parser's error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// `auto` could not tell the format.
    #[error("not RDMA tool output: could not detect the format (expected perftest, ethtool -S, NVUE qos counters, plain ethtool or ethtool -a, rdma statistic or hw_counters, perfquery, nvidia-smi topo -m, ibv_devinfo/ibstat/ibstatus/ibportstate/iblinkinfo, rdma link show, mlxconfig query, mlnx_qos, show_gids, a NCCL log, nccl-tests, SONiC pfcstat/pfcwd/queue counters, SONiC mmuconfig -l or ecnconfig -l, lspci -vv, kernel/UCX log lines or results.json)")]
    Undetected,
    /// A parser rejected the text.
    #[error("as {kind}: {source}")]
    Parse {
        /// The format tried.
        kind: Kind,
        /// Why.
        source: ParseError,
    },
    /// JSON did not parse.
    #[error("as sim-results: {0}")]
    Json(String),
}

/// perftest's text output ([`perftest::parse`]) or, for a text that
/// opens with `{` or `[`, its `--out_json` report ([`perftest_json::parse`]).
fn parse_perftest(input: &str) -> Result<perftest::PerftestReport, ParseError> {
    let t = input.trim_start();
    if t.starts_with('{') || t.starts_with('[') {
        perftest_json::parse(input)
    } else {
        perftest::parse(input)
    }
}

/// Parse `input` as `kind`, or detect the kind when `None`.
///
/// The text is made plain first ([`paste::normalise`]); line numbers in
/// errors and records are those of the plain text, which are the pasted
/// ones unless parallel-shell prefixes were regrouped or a flattened
/// counter list was split.
pub fn parse(kind: Option<Kind>, input: &str) -> Result<Parsed, Error> {
    let plain = paste::normalise(input);
    let input = plain.as_str();
    let kind = match kind {
        Some(k) => k,
        None => detect_plain(input).ok_or(Error::Undetected)?,
    };
    let wrap = |source| Error::Parse { kind, source };
    Ok(match kind {
        Kind::Perftest => Parsed::Perftest(parse_perftest(input).map_err(wrap)?),
        Kind::Ethtool => Parsed::Ethtool(ethtool::parse(input).map_err(wrap)?),
        Kind::Rdma => Parsed::Rdma(rdma::parse(input).map_err(wrap)?),
        Kind::Topo => Parsed::Topo(topo::parse(input).map_err(wrap)?),
        Kind::Devinfo => Parsed::Devinfo(devinfo::parse(input).map_err(wrap)?),
        Kind::MlnxQos => Parsed::MlnxQos(qos::parse_mlnx_qos(input).map_err(wrap)?),
        Kind::ShowGids => Parsed::ShowGids(qos::parse_show_gids(input).map_err(wrap)?),
        Kind::Nccl => Parsed::Nccl(nccl::parse(input).map_err(wrap)?),
        Kind::SimResults => {
            Parsed::SimResults(serde_json::from_str(input).map_err(|e| Error::Json(e.to_string()))?)
        }
        Kind::NcclTests => Parsed::NcclTests(tools::parse_nccl_tests(input).map_err(wrap)?),
        Kind::Switch => Parsed::Switch(tools::parse_switch(input).map_err(wrap)?),
        Kind::Lspci => Parsed::Lspci(tools::parse_lspci(input).map_err(wrap)?),
        Kind::EthtoolLink => Parsed::EthtoolLink(tools::parse_ethtool_link(input).map_err(wrap)?),
        Kind::Events => Parsed::Events(tools::parse_events(input).map_err(wrap)?),
        Kind::MmuConfig => Parsed::MmuConfig(swconfig::parse_mmuconfig(input).map_err(wrap)?),
        Kind::EcnConfig => Parsed::EcnConfig(swconfig::parse_ecnconfig(input).map_err(wrap)?),
    })
}
