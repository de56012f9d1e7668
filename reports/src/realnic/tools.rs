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
    /// `# Avg bus bandwidth : X` in MB/s.
    pub avg_busbw_mbps: Option<u64>,
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

/// Parse nccl-tests output.
pub fn parse_nccl_tests(input: &str) -> Result<NcclTests, ParseError> {
    let mut r = NcclTests::default();
    for l in lines(input) {
        let t = l.text.trim();
        if let Some(rest) = t.strip_prefix('#') {
            let rest = rest.trim();
            let w: Vec<&str> = rest.split_whitespace().collect();
            if w.first() == Some(&"Rank") {
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
                r.avg_busbw_mbps = v
                    .trim_start_matches([' ', ':'])
                    .split_whitespace()
                    .next()
                    .and_then(gbps_to_mbps);
            } else if let Some(v) = rest.strip_prefix("Out of bounds values") {
                r.out_of_bounds = v
                    .trim_start_matches([' ', ':'])
                    .split_whitespace()
                    .next()
                    .and_then(uint);
            } else if let Some(v) = rest.strip_prefix("Collective test starting:") {
                r.test = Some(v.trim().to_string());
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
        if w.len() < 8 {
            continue;
        }
        let (Some(bytes), Some(count)) = (uint(w[0]), uint(w[1])) else {
            continue;
        };
        if w[2].parse::<f64>().is_ok() {
            continue;
        }
        // size count type [redop root] then 4 (or 3: no #wrong) per place.
        let mut row = NcclTestRow {
            line: l.number,
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
        if row.oop_busbw_mbps.is_none() && row.ip_busbw_mbps.is_none() {
            continue;
        }
        r.rows.push(row);
    }
    if r.rows.is_empty() && r.avg_busbw_mbps.is_none() {
        return Err(ParseError::new(
            0,
            "an nccl-tests table row (size count type ... time algbw busbw #wrong)",
            "",
        ));
    }
    Ok(r)
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
    /// Queue counters.
    pub queues: Vec<QueueRow>,
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
            Table::None => {}
        }
    }
    for p in order {
        if let Some(x) = ports.remove(&p) {
            r.pfc.push(x);
        }
    }
    if r.pfc.is_empty() && r.watchdog.is_empty() && r.queues.is_empty() {
        return Err(ParseError::new(
            0,
            "a SONiC table (Port Rx/Port Tx PFC counters, pfcwd QUEUE STATUS, or Port TxQ queue counters)",
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
    for l in lines(input) {
        let raw = l.text;
        let t = raw.trim();
        let is_header = !raw.starts_with([' ', '\t'])
            && t.split(' ').next().is_some_and(|a| {
                a.len() >= 7
                    && a.contains(':')
                    && a.contains('.')
                    && a.chars()
                        .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
            });
        // `lspci -vvvs 3b:00.0 ...`: the device the excerpt is about.
        if t.starts_with("lspci") || t.contains("# lspci") || t.contains("$ lspci") {
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
                ..PciLink::default()
            });
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

/// What an event line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// Link down.
    LinkDown,
    /// Link up.
    LinkUp,
    /// PFC / pause storm detected by the NIC.
    PauseStorm,
    /// PCIe bus errors (AER) or a degraded PCIe link.
    PcieError,
    /// Transport retry count exceeded (UCX, verbs).
    RetryExceeded,
    /// TX timeout / CQE error of a netdev queue.
    TxTimeout,
}

/// One event line of a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Line number.
    pub line: usize,
    /// What.
    pub kind: EventKind,
    /// Driver (`mlx5_core`, `ice`, `UCX`).
    pub driver: Option<String>,
    /// PCI address (`0000:3b:00.0`).
    pub pci: Option<String>,
    /// Netdev or RDMA device (`enp59s0f0`, `mlx5_0:1`).
    pub device: Option<String>,
    /// The host, for `host:` prefixed lines (pdsh/journal style).
    pub host: Option<String>,
    /// The line as printed.
    pub text: String,
}

/// Classify one line.
fn event_kind(t: &str) -> Option<EventKind> {
    let l = t.to_ascii_lowercase();
    if l.contains("retry count exceeded") || l.contains("retry exceeded") {
        Some(EventKind::RetryExceeded)
    } else if l.contains("pause storm") || l.contains("pfc storm") {
        Some(EventKind::PauseStorm)
    } else if l.contains("link down") || l.contains("nic link is down") {
        Some(EventKind::LinkDown)
    } else if l.contains("link up") || l.contains("nic link is up") {
        Some(EventKind::LinkUp)
    } else if l.contains("pcie bus error")
        || l.contains("aer:")
        || (l.contains("pcie") && (l.contains("limited by") || l.contains("downgraded")))
    {
        Some(EventKind::PcieError)
    } else if l.contains("tx timeout") || l.contains("cqe error") {
        Some(EventKind::TxTimeout)
    } else {
        None
    }
}

fn is_pci(s: &str) -> bool {
    let s = s.trim_end_matches(':');
    s.len() >= 7
        && s.contains(':')
        && s.contains('.')
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
}

/// Parse event lines from kernel logs (`dmesg`, journal) and UCX/verbs
/// errors. Lines that are not events are ignored; no event is an error.
pub fn parse_events(input: &str) -> Result<Vec<Event>, ParseError> {
    let mut out = Vec::new();
    for l in lines(input) {
        let t = l.text.trim();
        let Some(kind) = event_kind(t) else { continue };
        let w: Vec<&str> = t.split_whitespace().collect();
        let mut e = Event {
            line: l.number,
            kind,
            driver: None,
            pci: None,
            device: None,
            host: None,
            text: t.to_string(),
        };
        for (i, x) in w.iter().enumerate() {
            let bare = x.trim_end_matches([':', ',']);
            if matches!(
                bare,
                "mlx5_core" | "ice" | "bnxt_en" | "i40e" | "mlx4_core" | "UCX"
            ) {
                e.driver.get_or_insert(bare.to_string());
            }
            if is_pci(x) && e.pci.is_none() {
                e.pci = Some(bare.to_string());
                if let Some(n) = w.get(i + 1).filter(|n| n.ends_with(':') && n.len() > 1) {
                    e.device = Some(n.trim_end_matches(':').to_string());
                }
            }
            if e.device.is_none() && bare.starts_with("mlx5_") {
                e.device = Some(bare.to_string());
            }
        }
        if e.device.is_none() {
            if let Some(pos) = t.find(" on ") {
                let dev = t[pos + 4..].split([' ', '/', '(']).next().unwrap_or("");
                if !dev.is_empty() {
                    e.device = Some(dev.to_string());
                }
            }
        }
        // UCX: `[host:pid:thread:tid] file.c:line  message`.
        if let Some(h) = w
            .first()
            .and_then(|x| x.strip_prefix('['))
            .and_then(|x| x.split(':').next())
            .filter(|h| {
                !h.is_empty()
                    && h.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
            })
        {
            e.host = Some(h.to_string());
        } else if let Some(h) = w.first().and_then(|x| x.strip_suffix(':')) {
            if !h.is_empty()
                && !is_pci(h)
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
                && !h.starts_with('[')
            {
                e.host = Some(h.to_string());
            }
        }
        out.push(e);
    }
    if out.is_empty() {
        return Err(ParseError::new(
            0,
            "a kernel or UCX log line about link down/up, pause storm, PCIe errors or retry exceeded",
            "",
        ));
    }
    Ok(out)
}

/// Whether `input` looks like nccl-tests output.
pub fn looks_nccl_tests(ls: &[text::Line<'_>]) -> bool {
    ls.iter().any(|l| {
        let t = l.text.trim();
        t.starts_with('#') && t.contains("algbw") && t.contains("busbw")
    })
}
