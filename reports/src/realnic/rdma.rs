//! RDMA hardware counters: `rdma statistic show`, `grep "" .../hw_counters/*`
//! sysfs listings and `show_counters` style `name: value` lists.
//!
//! # Accepted forms
//!
//! ```text
//! link mlx5_0/1 rx_write_requests 0 rx_read_requests 0 out_of_sequence 3 ...
//! link mlx5_0/1
//!     rx_write_requests 0 rx_read_requests 0 ...        (pretty form: continuation lines)
//! link mlx5_0/1 rx_write_requests 0 rx_atomic_requests  (wrapped by a mail client:
//! 0 out_of_buffer 0 ...                                  unindented continuation)
//! /sys/class/infiniband/mlx5_0/ports/1/hw_counters/out_of_sequence:3
//! Port 1 hw counters:                                   (show_counters)
//! out_of_sequence: 3
//! # Port extended counters: Lid 10 port 1 (CapMask: 0x5300)   (perfquery [-x] [-a])
//! PortXmitData:....................13672645927
//! PortXmitWait:....................0
//! ```
//!
//! `perfquery` blocks (`# Port counters:`, `# Port extended counters:` and
//! the other `# <group> counters: Lid L port P` headers) become a link
//! named `Lid <L>` with the port of the header (255 = all ports summed,
//! `-a`); a block without header takes
//! `PortSelect`. Counters keep perfquery's names and units:
//! `PortXmitData`/`PortRcvData` count 4-byte words (multiply by 4 for
//! bytes), `PortXmitWait` counts ticks a port had data but no credit to
//! send (IB's backpressure), `CounterSelect*` are not counters and are
//! skipped.
//!
//! The simulator writes the first form, one `link <nic>/<port>` line per
//! NIC port, with mlx5 names (`np_cnp_sent`, `np_ecn_marked_roce_packets`,
//! `rp_cnp_handled`, `out_of_sequence`, `packet_seq_err`,
//! `local_ack_timeout_err`, `duplicate_request`, ...). `# host: NAME`,
//! `# time_ps: N` and `# time: S` comment lines work as in
//! [`super::ethtool`].
//!
//! **Snapshots**: a link that appears a second time (or a counter name
//! repeated within a `name: value` list) starts a new snapshot. Broadcom
//! `bnxt_re` names are mapped to mlx5 names (`cnp_tx_pkts` ->
//! `np_cnp_sent`, ...). Counters are unsigned integers; sizes and times are
//! not involved.

use std::collections::BTreeMap;

use serde::Serialize;

use super::text::{counter_pair, is_counter_name, lines, scaled_decimal, uint, Line, ParseError};

/// One port's counters in one snapshot.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RdmaLink {
    /// RDMA device (`mlx5_0`), empty when the listing does not say.
    pub device: String,
    /// Port number (1 when not said).
    pub port: u32,
    /// Counters as printed.
    pub raw: BTreeMap<String, u64>,
    /// Counters under mlx5 names.
    pub counters: BTreeMap<String, u64>,
}

/// One snapshot: every link listed once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RdmaSnapshot {
    /// Line where the snapshot starts.
    pub line: usize,
    /// `# host:` metadata.
    pub host: Option<String>,
    /// Snapshot time in nanoseconds when the file says.
    pub time_ns: Option<u64>,
    /// The time came from `# time_ps:` (simulated: counters started at zero
    /// at time zero).
    pub simulated: bool,
    /// The links, in order of appearance.
    pub links: Vec<RdmaLink>,
}

impl RdmaSnapshot {
    /// Sum of one counter over every link (`None` when no link has it).
    pub fn total(&self, name: &str) -> Option<u64> {
        let mut any = false;
        let mut sum = 0u64;
        for l in &self.links {
            if let Some(v) = l.counters.get(name) {
                any = true;
                sum = sum.saturating_add(*v);
            }
        }
        any.then_some(sum)
    }

    /// Every counter summed over links.
    pub fn totals(&self) -> BTreeMap<String, u64> {
        let mut out = BTreeMap::new();
        for l in &self.links {
            for (k, v) in &l.counters {
                let e = out.entry(k.clone()).or_insert(0u64);
                *e = e.saturating_add(*v);
            }
        }
        out
    }
}

/// Map a Broadcom `bnxt_re` hw counter name to the mlx5 one.
pub fn normalize_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "cnp_tx_pkts" => "np_cnp_sent",
        "cnp_rx_pkts" => "rp_cnp_handled",
        "rx_ecn_marked_pkts" => "np_ecn_marked_roce_packets",
        "to_retransmits" => "local_ack_timeout_err",
        "seq_err_naks_rcvd" => "packet_seq_err",
        "dup_req" => "duplicate_request",
        "res_oos_drop_count" => "out_of_sequence",
        "rnr_naks_rcvd" => "rnr_nak_retry_err",
        _ => return None,
    })
}

struct State {
    out: Vec<RdmaSnapshot>,
    cur: RdmaSnapshot,
    host: Option<String>,
    time_ns: Option<u64>,
    simulated: bool,
}

impl State {
    fn link_mut(&mut self, device: &str, port: u32, line: usize) -> &mut RdmaLink {
        let exists = self
            .cur
            .links
            .iter()
            .any(|l| l.device == device && l.port == port);
        if !exists {
            if self.cur.links.is_empty() {
                self.cur.line = line;
                self.cur.host = self.host.clone();
                self.cur.time_ns = self.time_ns.take();
                self.cur.simulated = std::mem::take(&mut self.simulated);
            }
            self.cur.links.push(RdmaLink {
                device: device.to_string(),
                port,
                ..RdmaLink::default()
            });
        }
        let idx = self
            .cur
            .links
            .iter()
            .position(|l| l.device == device && l.port == port)
            .unwrap_or(0);
        &mut self.cur.links[idx]
    }

    fn new_snapshot(&mut self) {
        if !self.cur.links.is_empty() {
            let snap = std::mem::take(&mut self.cur);
            self.out.push(snap);
        }
    }

    /// Insert a counter; a repeat within the current snapshot starts a new
    /// snapshot.
    fn insert(&mut self, device: &str, port: u32, name: &str, value: u64, line: usize) {
        let repeated = self
            .cur
            .links
            .iter()
            .any(|l| l.device == device && l.port == port && l.raw.contains_key(name));
        if repeated {
            self.new_snapshot();
        }
        self.link_mut(device, port, line)
            .raw
            .insert(name.to_string(), value);
    }
}

fn split_link(s: &str) -> Option<(String, u32)> {
    let (dev, port) = s.split_once('/')?;
    Some((dev.to_string(), port.parse().ok()?))
}

/// Parse RDMA counter listings. Errors when nothing countable is found or a
/// `link` line carries a value that is not an unsigned integer.
pub fn parse(input: &str) -> Result<Vec<RdmaSnapshot>, ParseError> {
    let all = lines(input);
    let mut st = State {
        out: Vec::new(),
        cur: RdmaSnapshot::default(),
        host: None,
        time_ns: None,
        simulated: false,
    };
    // Link continued by indented lines in the pretty form.
    let mut current_link: Option<(String, u32)> = None;
    // Default link for `name: value` lists.
    let mut list_link: (String, u32) = (String::new(), 1);
    let logical = join_wrapped(&all);
    for l in &logical {
        let l = Line {
            number: l.0,
            text: &l.1,
        };
        let t = l.text.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(meta) = t.strip_prefix('#') {
            let meta = meta.trim();
            if let Some(h) = meta.strip_prefix("host:") {
                st.new_snapshot();
                st.host = Some(h.trim().to_string());
            } else if let Some(v) = meta.strip_prefix("time_ps:") {
                st.new_snapshot();
                st.time_ns = v.trim().parse::<u64>().ok().map(|ps| ps / 1000);
                st.simulated = st.time_ns.is_some();
            } else if let Some(v) = meta.strip_prefix("time:") {
                st.new_snapshot();
                st.time_ns = scaled_decimal(v, 1_000_000_000, 1);
                st.simulated = false;
            } else if let Some(link) = perfquery_header(meta) {
                list_link = link;
                current_link = None;
            }
            continue;
        }
        // perfquery: `PortXmitData:....................13672645927`
        if let Some((name, value)) = t.split_once(':') {
            if let Some(v) = value.strip_prefix("..") {
                let name = name.trim();
                let v = v.trim_start_matches('.').trim();
                if is_counter_name(name) && !name.starts_with("CounterSelect") {
                    if let Some(v) = uint(v) {
                        if name == "PortSelect" {
                            if list_link.0.is_empty() {
                                list_link.1 = u32::try_from(v).unwrap_or(u32::MAX);
                            }
                        } else {
                            let (dev, port) = list_link.clone();
                            st.insert(&dev, port, name, v, l.number);
                        }
                    }
                }
                current_link = None;
                continue;
            }
        }
        if let Some(rest) = t.strip_prefix("link ") {
            let mut toks = rest.split_whitespace();
            let Some((dev, port)) = toks.next().and_then(split_link) else {
                return Err(ParseError::new(l.number, "`link <device>/<port>`", l.text));
            };
            if st
                .cur
                .links
                .iter()
                .any(|x| x.device == dev && x.port == port)
            {
                st.new_snapshot();
            }
            st.link_mut(&dev, port, l.number);
            pairs(&mut st, &dev, port, toks, l.number, l.text)?;
            current_link = Some((dev, port));
            continue;
        }
        if let Some(pos) = t.find("/hw_counters/") {
            let path = &t[..pos];
            let tail = &t[pos + "/hw_counters/".len()..];
            let Some((name, value)) = tail.split_once(':') else {
                continue;
            };
            let Ok(value) = value.trim().parse::<u64>() else {
                return Err(ParseError::new(
                    l.number,
                    format!("an unsigned integer after `{name}:`"),
                    l.text,
                ));
            };
            let mut parts = path.split('/').filter(|p| !p.is_empty());
            let mut device = String::new();
            let mut port = 1;
            while let Some(p) = parts.next() {
                if p == "infiniband" {
                    device = parts.next().unwrap_or("").to_string();
                } else if p == "ports" {
                    port = parts.next().and_then(|x| x.parse().ok()).unwrap_or(1);
                }
            }
            st.insert(&device, port, name, value, l.number);
            current_link = None;
            continue;
        }
        if let Some(rest) = t.strip_prefix("Port ") {
            if let Some(p) = rest.split_whitespace().next().and_then(|p| p.parse().ok()) {
                if t.contains("counters") {
                    list_link = (list_link.0.clone(), p);
                    current_link = None;
                    continue;
                }
            }
        }
        let indented = l.text.starts_with([' ', '\t']);
        if let (Some((dev, port)), true) = (current_link.clone(), indented) {
            let toks = t.split_whitespace();
            if t.split_whitespace().count() % 2 == 0 && !t.contains(':') {
                pairs(&mut st, &dev, port, toks, l.number, l.text)?;
                continue;
            }
        }
        if let Some((name, value)) = counter_pair(t) {
            let (dev, port) = list_link.clone();
            st.insert(&dev, port, name, value, l.number);
            current_link = None;
            continue;
        }
        // Device header of show_counters-like tools: `mlx5_0:` or `Device mlx5_0`.
        if let Some(dev) = t.strip_suffix(':').filter(|d| is_counter_name(d)) {
            list_link = (dev.to_string(), list_link.1);
        }
        current_link = None;
    }
    st.new_snapshot();
    let mut out = st.out;
    for s in &mut out {
        for link in &mut s.links {
            let mut norm = BTreeMap::new();
            for (k, v) in &link.raw {
                if let Some(n) = normalize_name(k) {
                    let e = norm.entry(n.to_string()).or_insert(0u64);
                    *e = e.saturating_add(*v);
                }
            }
            for (k, v) in &link.raw {
                norm.entry(k.clone()).or_insert(*v);
            }
            link.counters = norm;
        }
    }
    if out.iter().all(|s| s.links.iter().all(|l| l.raw.is_empty())) {
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "`link <dev>/<port> name value ...`, `.../hw_counters/name:value`, `name: value` or perfquery `Name:....value` lines",
            first.map_or("", |l| l.text),
        ));
    }
    Ok(out)
}

/// `rdma statistic show` lines wrapped by a mail client or a narrow
/// terminal: a `link` line whose `name value` list is cut continues on the
/// following unindented lines (one starting with a value, or made of
/// `name value` pairs). Returns (first line number, logical text).
fn join_wrapped(all: &[Line<'_>]) -> Vec<(usize, String)> {
    let mut out: Vec<(usize, String)> = Vec::new();
    // Tokens after `link DEV/PORT` of the open logical link line.
    let mut open: Option<usize> = None;
    for l in all {
        let t = l.text.trim();
        if let (Some(n), false) = (open, t.is_empty()) {
            let indented = l.text.starts_with([' ', '\t']);
            let w: Vec<&str> = t.split_whitespace().collect();
            let starts_with_value = w.first().is_some_and(|x| x.parse::<u64>().is_ok());
            let pairs = w.len() % 2 == 0
                && w.chunks(2)
                    .all(|p| is_counter_name(p[0]) && p[1].parse::<u64>().is_ok());
            if !indented
                && !t.starts_with("link ")
                && !t.starts_with('#')
                && !t.contains(':')
                && (n % 2 == 1 || starts_with_value || pairs)
            {
                if let Some(last) = out.last_mut() {
                    last.1.push(' ');
                    last.1.push_str(t);
                }
                open = Some(n + w.len());
                continue;
            }
        }
        open = t
            .strip_prefix("link ")
            .map(|r| r.split_whitespace().count().saturating_sub(1));
        out.push((l.number, l.text.to_string()));
    }
    out
}

/// `Port counters: Lid 21 port 1 (CapMask: ...)` (a perfquery header
/// without its `#`; also `PortXmitDataSL counters:`, `Port extended
/// counters:` and the other groups) -> (`Lid 21`, 1).
fn perfquery_header(meta: &str) -> Option<(String, u32)> {
    let rest = meta.split_once("counters: ")?.1;
    if !rest.trim_start().starts_with("Lid ") {
        return None;
    }
    let w: Vec<&str> = rest.split_whitespace().collect();
    let lid = w
        .iter()
        .position(|x| *x == "Lid")
        .and_then(|i| w.get(i + 1))?;
    let port = w
        .iter()
        .position(|x| *x == "port")
        .and_then(|i| w.get(i + 1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(1);
    Some((format!("Lid {lid}"), port))
}

/// Whether `input` holds perfquery output.
pub fn looks_perfquery(t: &str) -> bool {
    (t.starts_with("# ") && t.contains(" counters: Lid "))
        || [
            "PortXmitData:..",
            "PortRcvErrors:..",
            "SymbolErrorCounter:..",
        ]
        .iter()
        .any(|p| t.starts_with(p))
}

/// Words in `rdma statistic qp show` / `mode` lines that carry metadata,
/// not counters: skipped with their value.
const METADATA: &[&str] = &["cntn", "qp-type", "pid", "comm", "lqpn", "mode", "auto"];

fn pairs<'a>(
    st: &mut State,
    dev: &str,
    port: u32,
    toks: impl Iterator<Item = &'a str>,
    line: usize,
    text: &str,
) -> Result<(), ParseError> {
    let mut toks = toks.peekable();
    while let Some(name) = toks.next() {
        if name == "optional-counters" || name == "[optional-counters]" {
            // A section marker without a value of its own.
            continue;
        }
        let Some(v) = toks.next() else {
            return Err(ParseError::new(
                line,
                format!("a value after counter `{name}`"),
                text,
            ));
        };
        if METADATA.contains(&name) {
            continue;
        }
        let Ok(v) = v.parse::<u64>() else {
            return Err(ParseError::new(
                line,
                format!("an unsigned integer value for `{name}`"),
                text,
            ));
        };
        st.insert(dev, port, name, v, line);
    }
    Ok(())
}
