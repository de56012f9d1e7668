//! More tools' output: nccl-tests tables, SONiC switch tables (`show pfc
//! counters` / `pfcstat`, `pfcwd show stats`, `show queue counters`),
//! `lspci -vv` PCIe links, plain `ethtool IFACE` and `ethtool -a`, and
//! event logs (kernel `dmesg` lines of mlx5/ice, UCX errors).
//!
//! Units: bandwidths in MB/s (10^6 bytes per second) as integers, times in
//! nanoseconds, link speeds in Mbit/s, PCIe speeds in MT/s. Every number
//! and every identifier (host, rank, device, netdev, PCI address, switch
//! port) printed by the tool is kept. Nothing here panics on any input.

use std::collections::BTreeMap;

use serde::Serialize;

pub use super::events::{parse_events, Event, EventKind, PcieBandwidth};
use super::text::{self, lines, scaled_decimal, uint, ParseError};

/// One row of an nccl-tests table (`all_reduce_perf` and friends).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclTestRow {
    /// Line number.
    pub line: usize,
    /// Message size in bytes.
    pub bytes: u64,
    /// Elements.
    pub count: u64,
    /// Data type (`float`, ...).
    pub dtype: String,
    /// Reduction (`sum`, `none`, ...).
    pub redop: String,
    /// Out-of-place time (ns).
    pub oop_time_ns: Option<u64>,
    /// Out-of-place algorithm bandwidth (MB/s).
    pub oop_algbw_mbps: Option<u64>,
    /// Out-of-place bus bandwidth (MB/s).
    pub oop_busbw_mbps: Option<u64>,
    /// Out-of-place wrong results.
    pub oop_wrong: Option<u64>,
    /// In-place time (ns).
    pub ip_time_ns: Option<u64>,
    /// In-place algorithm bandwidth (MB/s).
    pub ip_algbw_mbps: Option<u64>,
    /// In-place bus bandwidth (MB/s).
    pub ip_busbw_mbps: Option<u64>,
    /// In-place wrong results.
    pub ip_wrong: Option<u64>,
}

/// One `#  Rank  N Group G Pid P on HOST device D [BUS] NAME` line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclTestRank {
    /// Rank.
    pub rank: u64,
    /// Host name.
    pub host: String,
    /// CUDA device index.
    pub device: Option<u64>,
    /// PCI bus id as printed (`0x07`, `0000:07:00.0`).
    pub bus: Option<String>,
    /// GPU name.
    pub gpu: Option<String>,
    /// Process id.
    pub pid: Option<u64>,
}

/// An nccl-tests run.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclTests {
    /// The test binary or collective (`all_reduce_perf`), when printed.
    pub test: Option<String>,
    /// Ranks.
    pub ranks: Vec<NcclTestRank>,
    /// Table rows.
    pub rows: Vec<NcclTestRow>,
    /// `# Out of bounds values : N`.
    pub out_of_bounds: Option<u64>,
    /// `# Avg bus bandwidth : X` in MB/s (the first, when several).
    pub avg_busbw_mbps: Option<u64>,
    /// Every `# Avg bus bandwidth` line's value (MB/s): more than one in
    /// one output means several independent runs were pasted or printed.
    pub avg_busbw_all: Vec<u64>,
    /// `# nThread N nGpus G ...` header lines: each process of a test
    /// that was not launched as one MPI job prints its own.
    pub starts: usize,
}

impl NcclTests {
    /// The largest bus bandwidth of any row (MB/s).
    pub fn peak_busbw_mbps(&self) -> Option<u64> {
        self.rows
            .iter()
            .flat_map(|r| [r.oop_busbw_mbps, r.ip_busbw_mbps])
            .flatten()
            .max()
    }

    /// Rows with wrong results.
    pub fn wrong(&self) -> u64 {
        self.rows
            .iter()
            .flat_map(|r| [r.oop_wrong, r.ip_wrong])
            .flatten()
            .fold(0, u64::saturating_add)
    }

    /// Ranks per host.
    pub fn ranks_per_host(&self) -> BTreeMap<String, u64> {
        let mut m = BTreeMap::new();
        for r in &self.ranks {
            *m.entry(r.host.clone()).or_default() += 1;
        }
        m
    }
}

fn gbps_to_mbps(s: &str) -> Option<u64> {
    scaled_decimal(s, 1000, 1)
}

fn us_to_ns(s: &str) -> Option<u64> {
    scaled_decimal(s, 1000, 1)
}

/// Which columns of a table row hold what, from its header line
/// (`size count type redop root time algbw busbw #wrong time ...`) and
/// the `out-of-place in-place` line above it.
#[derive(Debug, Clone, Default)]
struct Columns {
    dtype: Option<usize>,
    redop: Option<usize>,
    /// (time, algbw, busbw, wrong) of the out-of-place and in-place groups.
    oop: [Option<usize>; 4],
    ip: [Option<usize>; 4],
}

fn columns(header: &str, in_place_first: bool) -> Option<Columns> {
    let toks: Vec<&str> = header.split_whitespace().collect();
    if !toks.contains(&"size") || !toks.contains(&"busbw") {
        return None;
    }
    let mut c = Columns::default();
    let mut group = 0usize;
    let mut seen = [false; 4];
    for (i, t) in toks.iter().enumerate() {
        let slot = match *t {
            "type" => {
                c.dtype = Some(i);
                continue;
            }
            "redop" => {
                c.redop = Some(i);
                continue;
            }
            "time" => 0,
            "algbw" => 1,
            "busbw" => 2,
            "#wrong" | "error" | "wrong" => 3,
            _ => continue,
        };
        if seen[slot] {
            group += 1;
            seen = [false; 4];
        }
        seen[slot] = true;
        // Two groups per table; a second table printed beside the first
        // (`|`) is not read.
        let g = match (group, in_place_first) {
            (0, false) | (1, true) => &mut c.oop,
            (0, true) | (1, false) => &mut c.ip,
            _ => break,
        };
        g[slot] = Some(i);
    }
    Some(c)
}

/// Parse nccl-tests output: the table (columns read from its header, so
/// extra or reordered columns are found by name), ranks, summaries.
/// Output without a table row is accepted when it has the test's own
/// header or rank lines.
pub fn parse_nccl_tests(input: &str) -> Result<NcclTests, ParseError> {
    let mut r = NcclTests::default();
    let mut cols: Option<Columns> = None;
    let mut in_place_first = false;
    let mut landmark = false;
    for l in lines(input) {
        let t = l.text.trim();
        if let Some(rest) = t.strip_prefix('#') {
            let rest = rest.trim();
            let w: Vec<&str> = rest.split_whitespace().collect();
            if rest.contains("out-of-place") && rest.contains("in-place") {
                in_place_first = rest.find("in-place") < rest.find("out-of-place");
                continue;
            }
            if let Some(c) = columns(rest, in_place_first) {
                cols = Some(c);
                landmark = true;
                continue;
            }
            if w.first() == Some(&"nThread") {
                r.starts += 1;
                landmark = true;
            }
            if w.first() == Some(&"Rank") {
                landmark = true;
                let mut k = NcclTestRank {
                    rank: w.get(1).and_then(|x| uint(x)).unwrap_or(0),
                    ..NcclTestRank::default()
                };
                let mut i = 2;
                while i < w.len() {
                    match w[i] {
                        "Pid" => k.pid = w.get(i + 1).and_then(|x| uint(x)),
                        "on" => k.host = w.get(i + 1).map(|x| x.to_string()).unwrap_or_default(),
                        "device" => {
                            k.device = w.get(i + 1).and_then(|x| uint(x));
                            if let Some(b) = w.get(i + 2).filter(|b| b.starts_with('[')) {
                                k.bus = Some(b.trim_matches(['[', ']']).to_string());
                                let name = w[(i + 3).min(w.len())..].join(" ");
                                if !name.is_empty() {
                                    k.gpu = Some(name);
                                }
                            }
                            break;
                        }
                        _ => {}
                    }
                    i += 1;
                }
                r.ranks.push(k);
            } else if let Some(v) = rest.strip_prefix("Avg bus bandwidth") {
                landmark = true;
                let v = v
                    .trim_start_matches([' ', ':'])
                    .split_whitespace()
                    .next()
                    .and_then(gbps_to_mbps);
                if let Some(v) = v {
                    r.avg_busbw_all.push(v);
                    r.avg_busbw_mbps.get_or_insert(v);
                }
            } else if let Some(v) = rest.strip_prefix("Out of bounds values") {
                landmark = true;
                r.out_of_bounds = v
                    .trim_start_matches([' ', ':'])
                    .split_whitespace()
                    .next()
                    .and_then(uint);
            } else if let Some(v) = rest.strip_prefix("Collective test starting:") {
                r.test = Some(v.trim().to_string());
            } else if let Some(v) = rest.strip_prefix("Collective test concluded:") {
                r.test.get_or_insert_with(|| v.trim().to_string());
            }
            continue;
        }
        if r.test.is_none() {
            if let Some(name) = t.split_whitespace().find_map(|w| {
                let base = w.rsplit('/').next().unwrap_or(w);
                base.ends_with("_perf").then(|| base.to_string())
            }) {
                r.test = Some(name);
            }
        }
        let w: Vec<&str> = t.split_whitespace().collect();
        if w.len() < 5 {
            continue;
        }
        let (Some(bytes), Some(count)) = (uint(w[0]), uint(w[1])) else {
            continue;
        };
        let row = match &cols {
            Some(c) => {
                // nccl-tests leaves the out-of-place columns blank (32
                // spaces where `  time  algbw  busbw  #wrong` would be)
                // when it measured in-place only: the row's first values
                // are then the in-place ones.
                let first = c.oop[0].unwrap_or(usize::MAX);
                let mut w = w;
                if first < w.len() && gap_before_token(t, first) >= 32 {
                    w.splice(first..first, [""; 4]);
                }
                by_columns(c, &w, l.number, bytes, count)
            }
            None => by_position(&w, l.number, bytes, count),
        };
        if let Some(row) = row {
            r.rows.push(row);
        }
    }
    if r.rows.is_empty() && r.avg_busbw_mbps.is_none() && !landmark {
        return Err(ParseError::new(
            0,
            "an nccl-tests table row (size count type ... time algbw busbw #wrong)",
            "",
        ));
    }
    Ok(r)
}

/// How many whitespace characters precede the `k`-th (from 0)
/// whitespace-separated token of `line` (0 when there is no such token).
fn gap_before_token(line: &str, k: usize) -> usize {
    let mut rest = line;
    for _ in 0..k {
        rest = rest.trim_start();
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        rest = &rest[end..];
    }
    let gap = rest.len() - rest.trim_start().len();
    if rest.trim_start().is_empty() {
        0
    } else {
        gap
    }
}

/// A row read by the header's columns. The header may name columns a row
/// leaves out at its end (only one of the two groups printed).
fn by_columns(c: &Columns, w: &[&str], line: usize, bytes: u64, count: u64) -> Option<NcclTestRow> {
    // Rows print `N/A` for an unused root; a row longer than the header
    // carries extra tagged columns at its end, which are ignored.
    let get = |i: Option<usize>| i.and_then(|i| w.get(i).copied()).unwrap_or("");
    let mut row = NcclTestRow {
        line,
        bytes,
        count,
        dtype: get(c.dtype).to_string(),
        redop: get(c.redop).to_string(),
        ..NcclTestRow::default()
    };
    if !row.dtype.is_empty() && row.dtype.parse::<f64>().is_ok() {
        return None;
    }
    row.oop_time_ns = us_to_ns(get(c.oop[0]));
    row.oop_algbw_mbps = gbps_to_mbps(get(c.oop[1]));
    row.oop_busbw_mbps = gbps_to_mbps(get(c.oop[2]));
    row.oop_wrong = uint(get(c.oop[3]));
    row.ip_time_ns = us_to_ns(get(c.ip[0]));
    row.ip_algbw_mbps = gbps_to_mbps(get(c.ip[1]));
    row.ip_busbw_mbps = gbps_to_mbps(get(c.ip[2]));
    row.ip_wrong = uint(get(c.ip[3]));
    (row.oop_busbw_mbps.is_some() || row.ip_busbw_mbps.is_some()).then_some(row)
}

/// A row of a table whose header was not seen: `size count type [redop
/// root]` then 4 (or 3: no #wrong) values per place, out-of-place first.
fn by_position(w: &[&str], line: usize, bytes: u64, count: u64) -> Option<NcclTestRow> {
    if w.len() < 8 || w[2].parse::<f64>().is_ok() {
        return None;
    }
    let mut row = NcclTestRow {
        line,
        bytes,
        count,
        dtype: w[2].to_string(),
        ..NcclTestRow::default()
    };
    let mut i = 3;
    if w.get(3).is_some_and(|x| x.parse::<f64>().is_err()) {
        row.redop = w[3].to_string();
        i = 4;
    }
    if w.get(i).is_some_and(|x| x.parse::<i64>().is_ok()) && w.len() - i >= 9 {
        i += 1; // root
    }
    let rest = &w[i..];
    let per = if rest.len() >= 8 { 4 } else { 3 };
    let num = |k: usize| rest.get(k).copied().unwrap_or("");
    row.oop_time_ns = us_to_ns(num(0));
    row.oop_algbw_mbps = gbps_to_mbps(num(1));
    row.oop_busbw_mbps = gbps_to_mbps(num(2));
    if per == 4 {
        row.oop_wrong = uint(num(3));
    }
    row.ip_time_ns = us_to_ns(num(per));
    row.ip_algbw_mbps = gbps_to_mbps(num(per + 1));
    row.ip_busbw_mbps = gbps_to_mbps(num(per + 2));
    if per == 4 {
        row.ip_wrong = uint(num(per + 3));
    }
    (row.oop_busbw_mbps.is_some() || row.ip_busbw_mbps.is_some()).then_some(row)
}

/// Per-port PFC frame counts of a switch (`show pfc counters`, `pfcstat`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SwitchPfc {
    /// Port (`Ethernet0`).
    pub port: String,
    /// PFC frames received per priority 0-7 (`None` when `N/A`).
    pub rx: Vec<Option<u64>>,
    /// PFC frames sent per priority 0-7.
    pub tx: Vec<Option<u64>>,
}

/// One `pfcwd show stats` row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WatchdogRow {
    /// Line number.
    pub line: usize,
    /// Port.
    pub port: String,
    /// Queue (priority).
    pub queue: Option<u64>,
    /// `stormed` / `operational`.
    pub status: String,
    /// Storms detected.
    pub detected: Option<u64>,
    /// Storms restored.
    pub restored: Option<u64>,
    /// TX ok / drop packets.
    pub tx_ok: Option<u64>,
    /// TX drops while stormed.
    pub tx_drop: Option<u64>,
    /// RX ok.
    pub rx_ok: Option<u64>,
    /// RX drops while stormed.
    pub rx_drop: Option<u64>,
}

/// One `show queue counters` row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QueueRow {
    /// Line number.
    pub line: usize,
    /// Port.
    pub port: String,
    /// Queue (`UC3`, `MC0`, `ALL3`).
    pub queue: String,
    /// Packets.
    pub packets: Option<u64>,
    /// Bytes.
    pub bytes: Option<u64>,
    /// Dropped packets.
    pub drop_packets: Option<u64>,
    /// Dropped bytes.
    pub drop_bytes: Option<u64>,
}

/// Switch tables of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SwitchReport {
    /// PFC counters per port.
    pub pfc: Vec<SwitchPfc>,
    /// PFC watchdog statistics.
    pub watchdog: Vec<WatchdogRow>,
    /// Queue counters (SONiC `show queue counters`, EOS `show interfaces
    /// counters queue`).
    pub queues: Vec<QueueRow>,
    /// Ingress priority-group drops (SONiC `show priority-group drop
    /// counters` / `pg-drop -c show`).
    pub pg_drops: Vec<PgDrops>,
}

/// Ingress drops per priority group of one switch port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PgDrops {
    /// Line number.
    pub line: usize,
    /// Port.
    pub port: String,
    /// Dropped packets per priority group 0-7 (`None` when `N/A`).
    pub drops: Vec<Option<u64>>,
}

/// A number as SONiC prints it: `12,345`, `N/A` (none).
fn sonic_num(s: &str) -> Option<u64> {
    let c: String = s.chars().filter(|c| *c != ',').collect();
    uint(&c)
}

fn slash_pair(s: &str) -> (Option<u64>, Option<u64>) {
    match s.split_once('/') {
        Some((a, b)) => (sonic_num(a), sonic_num(b)),
        None => (sonic_num(s), None),
    }
}

/// Parse SONiC `show pfc counters` / `pfcstat`, `pfcwd show stats` and
/// `show queue counters` tables (any of them, in one file).
pub fn parse_switch(input: &str) -> Result<SwitchReport, ParseError> {
    #[derive(PartialEq)]
    enum Table {
        None,
        PfcRx,
        PfcTx,
        Wd,
        Queue,
        Eos,
        Pg,
    }
    let mut r = SwitchReport::default();
    let mut table = Table::None;
    let mut ports: BTreeMap<String, SwitchPfc> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    for l in lines(input) {
        let t = l.text.trim();
        if t.is_empty() || t.starts_with("---") || t.starts_with("Last cached") {
            continue;
        }
        // A prompt line ends the table above it.
        if super::paste::prompt(t).is_some() {
            table = Table::None;
            continue;
        }
        let w: Vec<&str> = t.split_whitespace().collect();
        let upper = t.to_ascii_uppercase();
        if upper.starts_with("PORT RX") {
            table = Table::PfcRx;
            continue;
        }
        if upper.starts_with("PORT TX") && !upper.contains("TXQ") {
            table = Table::PfcTx;
            continue;
        }
        if upper.starts_with("QUEUE") && upper.contains("STATUS") {
            table = Table::Wd;
            continue;
        }
        if upper.starts_with("PORT") && upper.contains("TXQ") {
            table = Table::Queue;
            continue;
        }
        if upper.starts_with("PORT") && upper.contains("OUTDROPPKTS") {
            table = Table::Eos;
            continue;
        }
        if upper.starts_with("PORT") && upper.contains("PG0") {
            table = Table::Pg;
            continue;
        }
        let Some(first) = w.first() else { continue };
        if !first
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
        {
            continue;
        }
        match table {
            Table::PfcRx | Table::PfcTx => {
                let vals: Vec<Option<u64>> = w[1..].iter().map(|x| sonic_num(x)).collect();
                if w.len() < 2 {
                    continue;
                }
                let e = ports.entry(first.to_string()).or_insert_with(|| {
                    order.push(first.to_string());
                    SwitchPfc {
                        port: first.to_string(),
                        ..SwitchPfc::default()
                    }
                });
                if table == Table::PfcRx {
                    e.rx = vals;
                } else {
                    e.tx = vals;
                }
            }
            Table::Wd => {
                let (port, queue) = match first.rsplit_once(':') {
                    Some((p, q)) => (p.to_string(), uint(q)),
                    None => (first.to_string(), None),
                };
                let (detected, restored) = w.get(2).map_or((None, None), |x| slash_pair(x));
                let (tx_ok, tx_drop) = w.get(3).map_or((None, None), |x| slash_pair(x));
                let (rx_ok, rx_drop) = w.get(4).map_or((None, None), |x| slash_pair(x));
                r.watchdog.push(WatchdogRow {
                    line: l.number,
                    port,
                    queue,
                    status: w.get(1).map(|x| x.to_string()).unwrap_or_default(),
                    detected,
                    restored,
                    tx_ok,
                    tx_drop,
                    rx_ok,
                    rx_drop,
                });
            }
            Table::Queue => {
                if w.len() < 3 {
                    continue;
                }
                r.queues.push(QueueRow {
                    line: l.number,
                    port: first.to_string(),
                    queue: w[1].to_string(),
                    packets: w.get(2).and_then(|x| sonic_num(x)),
                    bytes: w.get(3).and_then(|x| sonic_num(x)),
                    drop_packets: w.get(4).and_then(|x| sonic_num(x)),
                    drop_bytes: w.get(5).and_then(|x| sonic_num(x)),
                });
            }
            // `Et3/1/1  TC7  DP0-3  UC  enq-pkts enq-octets drop-pkts
            // drop-octets`: the queue is named by class and destination
            // type (`TC7 UC`).
            Table::Eos => {
                let nums: Vec<u64> = w.iter().filter_map(|x| sonic_num(x)).collect();
                if w.len() < 6 || nums.len() < 4 || !w[1].starts_with("TC") {
                    continue;
                }
                let dest = w
                    .iter()
                    .skip(2)
                    .find(|x| matches!(**x, "UC" | "MC"))
                    .copied();
                let n = &nums[nums.len() - 4..];
                r.queues.push(QueueRow {
                    line: l.number,
                    port: first.to_string(),
                    queue: match dest {
                        Some(d) => format!("{} {d}", w[1]),
                        None => w[1].to_string(),
                    },
                    packets: Some(n[0]),
                    bytes: Some(n[1]),
                    drop_packets: Some(n[2]),
                    drop_bytes: Some(n[3]),
                });
            }
            Table::Pg => {
                if w.len() < 2 {
                    continue;
                }
                r.pg_drops.push(PgDrops {
                    line: l.number,
                    port: first.to_string(),
                    drops: w[1..].iter().map(|x| sonic_num(x)).collect(),
                });
            }
            Table::None => {}
        }
    }
    for p in order {
        if let Some(x) = ports.remove(&p) {
            r.pfc.push(x);
        }
    }
    if r.pfc.is_empty() && r.watchdog.is_empty() && r.queues.is_empty() && r.pg_drops.is_empty() {
        return Err(ParseError::new(
            0,
            "a switch table (SONiC Port Rx/Port Tx PFC counters, pfcwd QUEUE STATUS, Port TxQ queue counters, PG drop counters; EOS queue counters)",
            "",
        ));
    }
    Ok(r)
}

/// One PCI device of `lspci -vv`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PciLink {
    /// Line of the device header.
    pub line: usize,
    /// PCI address (`3b:00.0`, `0000:3b:00.0`).
    pub address: String,
    /// Device description.
    pub description: String,
    /// LnkCap speed (MT/s).
    pub cap_speed_mts: Option<u64>,
    /// LnkCap width (lanes).
    pub cap_width: Option<u64>,
    /// LnkSta speed (MT/s).
    pub sta_speed_mts: Option<u64>,
    /// LnkSta width (lanes).
    pub sta_width: Option<u64>,
    /// LnkSta says `(downgraded)`.
    pub downgraded: bool,
    /// DevCtl's `MaxPayload` (in force, not DevCap's maximum), bytes.
    pub max_payload: Option<u32>,
    /// DevCtl's `MaxReadReq`, bytes.
    pub max_read_request: Option<u32>,
    /// The host, from a `# host: NAME` line above the device (several
    /// hosts' output in one paste).
    pub host: Option<String>,
}

impl PciLink {
    /// Usable bandwidth of a link in Mbit/s: MT/s x lanes x line code
    /// efficiency (8b/10b up to 5 GT/s, 128b/130b from 8 GT/s).
    pub fn mbps(speed_mts: u64, width: u64) -> u64 {
        let raw = speed_mts.saturating_mul(width);
        if speed_mts <= 5000 {
            raw / 10 * 8
        } else {
            raw / 130 * 128
        }
    }

    /// Whether the link runs below what both ends can do.
    pub fn degraded(&self) -> bool {
        self.downgraded
            || matches!((self.cap_speed_mts, self.sta_speed_mts), (Some(c), Some(s)) if s < c)
            || matches!((self.cap_width, self.sta_width), (Some(c), Some(s)) if s < c)
    }
}

fn pci_speed(s: &str) -> Option<u64> {
    let s = s.trim().trim_end_matches(',');
    let v = s.strip_suffix("GT/s")?;
    scaled_decimal(v, 1000, 1)
}

/// Parse `lspci -vv` (devices with a LnkCap or LnkSta line are kept).
pub fn parse_lspci(input: &str) -> Result<Vec<PciLink>, ParseError> {
    let mut out: Vec<PciLink> = Vec::new();
    let mut cur: Option<PciLink> = None;
    let mut pending_addr: Option<String> = None;
    let mut host: Option<String> = None;
    for l in lines(input) {
        let raw = l.text;
        let t = raw.trim();
        let pci_addr = |a: &str| {
            a.len() >= 7
                && a.contains(':')
                && a.contains('.')
                && a.chars()
                    .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
        };
        // A device header, also behind a script's label (`Card: 01:00.0
        // VGA compatible controller: ...`).
        let t = match t.split_once(' ') {
            Some((label, rest))
                if label.ends_with(':')
                    && label.len() > 1
                    && label[..label.len() - 1]
                        .chars()
                        .all(|c| c.is_ascii_alphabetic())
                    && rest.split(' ').next().is_some_and(pci_addr) =>
            {
                rest
            }
            _ => t,
        };
        let is_header = !raw.starts_with([' ', '\t']) && t.split(' ').next().is_some_and(pci_addr);
        // Another host's output: the device above is complete.
        if let Some(h) = t
            .strip_prefix('#')
            .map(str::trim)
            .and_then(|m| m.strip_prefix("host:"))
        {
            if let Some(c) = cur.take() {
                out.push(c);
            }
            host = Some(h.trim().to_string()).filter(|h| !h.is_empty());
            continue;
        }
        // `lspci -vvvs 3b:00.0 ...`: the device the excerpt is about.
        if t.starts_with("lspci") || t.contains("lspci -") {
            let w: Vec<&str> = t.split_whitespace().collect();
            if let Some(i) = w
                .iter()
                .position(|x| x.starts_with('-') && x.ends_with('s'))
            {
                if let Some(a) = w.get(i + 1) {
                    pending_addr = Some(a.to_string());
                }
            }
            continue;
        }
        if is_header {
            if let Some(c) = cur.take() {
                out.push(c);
            }
            let (addr, desc) = t.split_once(' ').unwrap_or((t, ""));
            cur = Some(PciLink {
                line: l.number,
                address: addr.to_string(),
                description: desc.to_string(),
                host: host.clone(),
                ..PciLink::default()
            });
            continue;
        }
        // DevCtl's second line: `MaxPayload 256 bytes, MaxReadReq 512
        // bytes` (DevCap's `MaxPayload` comes without `MaxReadReq`).
        if t.contains("MaxReadReq") {
            if let Some(c) = cur.as_mut() {
                c.max_payload = bytes_after(t, "MaxPayload");
                c.max_read_request = bytes_after(t, "MaxReadReq");
            }
            continue;
        }
        let (cap, rest) = if let Some(r) = t.strip_prefix("LnkCap:") {
            (true, r)
        } else if let Some(r) = t.strip_prefix("LnkSta:") {
            (false, r)
        } else {
            continue;
        };
        let c = cur.get_or_insert_with(|| PciLink {
            line: l.number,
            address: pending_addr.take().unwrap_or_default(),
            host: host.clone(),
            ..PciLink::default()
        });
        let w: Vec<&str> = rest.split_whitespace().collect();
        for (i, x) in w.iter().enumerate() {
            if *x == "Speed" {
                let sp = w.get(i + 1).and_then(|s| pci_speed(s));
                if cap {
                    c.cap_speed_mts = sp;
                } else {
                    c.sta_speed_mts = sp;
                }
            }
            if *x == "Width" {
                let wd = w
                    .get(i + 1)
                    .and_then(|s| s.trim_end_matches(',').strip_prefix('x'))
                    .and_then(uint);
                if cap {
                    c.cap_width = wd;
                } else {
                    c.sta_width = wd;
                }
            }
        }
        if !cap && rest.contains("downgraded") {
            c.downgraded = true;
        }
    }
    if let Some(c) = cur.take() {
        out.push(c);
    }
    out.retain(|p| p.cap_speed_mts.is_some() || p.sta_speed_mts.is_some());
    if out.is_empty() {
        return Err(ParseError::new(0, "lspci -vv LnkCap/LnkSta lines", ""));
    }
    Ok(out)
}

/// The `N` of `NAME N bytes` in an lspci line.
fn bytes_after(t: &str, name: &str) -> Option<u32> {
    let w: Vec<&str> = t.split_whitespace().collect();
    let i = w.iter().position(|x| *x == name)?;
    w.get(i + 1)?.parse().ok()
}

/// Plain `ethtool IFACE` and `ethtool -a IFACE`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EthLink {
    /// Interface (`Settings for eth0:` / `Pause parameters for eth0:`).
    pub interface: Option<String>,
    /// Speed (Mbit/s); `None` when unknown.
    pub speed_mbps: Option<u64>,
    /// Fastest supported or advertised link mode (Mbit/s).
    pub max_supported_mbps: Option<u64>,
    /// `Full` / `Half`.
    pub duplex: Option<String>,
    /// `Link detected: yes|no`.
    pub link_detected: Option<bool>,
    /// Port type (`Direct Attach Copper`, `FIBRE`).
    pub port: Option<String>,
    /// Auto-negotiation.
    pub autoneg: Option<String>,
    /// `ethtool -a`: RX pause (global).
    pub pause_rx: Option<bool>,
    /// `ethtool -a`: TX pause (global).
    pub pause_tx: Option<bool>,
    /// `ethtool -a`: pause autonegotiation.
    pub pause_autoneg: Option<bool>,
}

fn on_off(s: &str) -> Option<bool> {
    match s.trim().to_ascii_lowercase().as_str() {
        "on" | "yes" => Some(true),
        "off" | "no" => Some(false),
        _ => None,
    }
}

/// Parse plain `ethtool IFACE` and/or `ethtool -a IFACE` (one interface
/// per block; several blocks give several records).
pub fn parse_ethtool_link(input: &str) -> Result<Vec<EthLink>, ParseError> {
    let mut out: Vec<EthLink> = Vec::new();
    let mut in_modes = false;
    for l in lines(input) {
        let t = l.text.trim();
        for head in ["Settings for ", "Pause parameters for "] {
            if let Some(rest) = t.strip_prefix(head) {
                let iface = rest.trim_end_matches(':').to_string();
                if !out
                    .last()
                    .is_some_and(|e| e.interface.as_deref() == Some(&iface))
                {
                    out.push(EthLink {
                        interface: Some(iface),
                        ..EthLink::default()
                    });
                }
            }
        }
        let Some(cur) = out.last_mut() else { continue };
        let (k, v) = match t.split_once(':') {
            Some((k, v)) => (k.trim(), v.trim()),
            None => {
                if in_modes {
                    for m in t.split_whitespace() {
                        max_mode(cur, m);
                    }
                }
                continue;
            }
        };
        // The link partner's modes say nothing about this port's ability.
        in_modes = k.ends_with("link modes") && !k.contains("partner");
        if in_modes {
            for m in v.split_whitespace() {
                max_mode(cur, m);
            }
        }
        match k {
            "Speed" => cur.speed_mbps = v.strip_suffix("Mb/s").and_then(uint),
            "Duplex" => cur.duplex = Some(v.to_string()),
            "Link detected" => cur.link_detected = on_off(v),
            "Port" => cur.port = Some(v.to_string()),
            "Auto-negotiation" => cur.autoneg = Some(v.to_string()),
            "Autonegotiate" => cur.pause_autoneg = on_off(v),
            "RX" => cur.pause_rx = on_off(v),
            "TX" => cur.pause_tx = on_off(v),
            _ => {}
        }
    }
    if out.is_empty() {
        return Err(ParseError::new(
            0,
            "`Settings for IFACE:` or `Pause parameters for IFACE:`",
            "",
        ));
    }
    Ok(out)
}

fn max_mode(cur: &mut EthLink, m: &str) {
    let digits: String = m.chars().take_while(|c| c.is_ascii_digit()).collect();
    if m[digits.len()..].starts_with("base") {
        if let Some(v) = uint(&digits) {
            cur.max_supported_mbps = cur.max_supported_mbps.max(Some(v));
        }
    }
}

/// Whether `input` looks like nccl-tests output.
pub fn looks_nccl_tests(ls: &[text::Line<'_>]) -> bool {
    ls.iter().any(|l| {
        let t = l.text.trim();
        t.starts_with('#')
            && ((t.contains("algbw") && t.contains("busbw"))
                || t.contains("Avg bus bandwidth")
                || (t.contains("nThread") && t.contains("nGpus")))
    })
}
