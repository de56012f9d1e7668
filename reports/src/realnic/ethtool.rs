//! `ethtool -S` dumps (mlx5, with Intel `ice`, Broadcom `bnxt_en` and
//! Cumulus switch-port `HwIf*` names mapped onto the mlx5 ones), one or
//! several snapshots per file, and NVUE's `nv show interface <if> counters
//! qos` tables of a Cumulus switch port (per-priority pause frames and
//! pause duration, read as microseconds like mlx5's; ingress buffer, egress
//! queue and port tables kept as `pgN.*`, `tcN.*`, `port.rx.*`/`port.tx.*`;
//! the port named on the `nv show interface` command line is the host),
//! and NetQ's `show ethtool-stats` tables of the same `HwIf*` counters
//! (one snapshot per `HOST:PORT`).
//!
//! # The format (what real mlx5 prints, and what the simulator writes)
//!
//! ```text
//! # host: leaf1-h3                 optional: names the source (a host, NIC or switch port)
//! # time_ps: 2000000000            optional: snapshot time in picoseconds (simulated time)
//! NIC statistics:
//!      rx_prio3_bytes: 123456789
//!      rx_prio3_packets: 30123
//!      tx_prio3_bytes: 98765432
//!      tx_prio3_packets: 24111
//!      rx_prio3_pause: 17
//!      rx_prio3_pause_duration: 2480
//!      rx_prio3_pause_transition: 9
//!      tx_prio3_pause: 0
//!      tx_prio3_pause_duration: 0
//!      rx_discards_phy: 0
//!      rx_out_of_buffer: 0
//! ```
//!
//! * The first line of a dump is `NIC statistics:`; then one counter per
//!   line: any leading whitespace (ethtool prints 5 spaces), the counter
//!   name, `:`, one space, an unsigned decimal integer. Counters are
//!   cumulative (never reset) and are printed in a fixed order.
//! * Names and units are mlx5's: `rx_prioN_*` / `tx_prioN_*` for L2
//!   priority N in 0..=7; frames for `*_pause` and `*_packets`, bytes for
//!   `*_bytes`, **microseconds** for `*_pause_duration`; `rx_prioN_pause*`
//!   and `tx_prioN_pause*` rows exist only for priorities with PFC enabled.
//!   Other names understood by the doctor: `rx_prioN_discards`,
//!   `rx_discards_phy`, `tx_discards_phy`, `rx_out_of_buffer`,
//!   `rx_buffer_passed_thres_phy`, `tx_pause_storm_warning_events`,
//!   `tx_pause_storm_error_events`, `rx_crc_errors_phy`,
//!   `rx_symbol_err_phy`, `rx_pcs_symbol_err_phy`, `rx_corrected_bits_phy`,
//!   `rx_bits_phy`, `link_down_events_phy`, `rx_oversize_pkts_phy`,
//!   `rx_out_of_range_len_phy`, `rx_vport_rdma_unicast_packets`,
//!   `rx_vport_rdma_unicast_bytes`, `tx_vport_rdma_unicast_packets`,
//!   `tx_vport_rdma_unicast_bytes`, `outbound_pci_stalled_rd`,
//!   `outbound_pci_stalled_wr`.
//! * Lines starting with `#` are comments; three are metadata:
//!   `# host: NAME` (the source; also taken from an `ethtool -S IFACE`
//!   command line), `# time_ps: N` (picoseconds) and `# time: S` (seconds,
//!   decimals allowed, e.g. `date +%s.%N`). A bare number on its own line
//!   (the output of `date +%s`) is read as `# time:`. `# time_ps:` marks
//!   simulated time: simulated counters start at zero at time zero, so a
//!   single snapshot with it is a delta over that time.
//! * **Several snapshots in one file**: each `NIC statistics:` line starts a
//!   new snapshot, and so does a counter name that is already present in the
//!   current snapshot (two dumps pasted back to back without the header).
//!   Any other line between dumps (a `date` line, a separator) is kept as
//!   the next snapshot's label. The time between the first and last
//!   snapshot comes from their `time`/`time_ps` metadata when both have it.
//!
//! Parsing never panics. A line inside a dump of the form `counter: value`
//! whose value is not an unsigned integer is an error naming the line.

use std::collections::BTreeMap;

use serde::Serialize;

use super::text::{chunks, counter_pair, is_counter_name, lines, scaled_decimal, uint, ParseError};

/// Driver family, guessed from the counter names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Vendor {
    /// NVIDIA/Mellanox ConnectX (`mlx5_core`), and the simulator.
    #[default]
    Mlx5,
    /// Intel E800 (`ice`).
    Ice,
    /// Broadcom (`bnxt_en`).
    Bnxt,
    /// Cumulus Linux switch ports (`swpN`): `HwIf*` names of `ethtool -S`,
    /// or NVUE's `nv show interface <if> counters qos` tables.
    Cumulus,
    /// A switch SDK port counter dump (`Port 0x10500 - IEEE 802.3 Counters
    /// Group`, `Prio 3` sections of `name = value` lines; the group names
    /// are those of the Spectrum SDK's PPCNT counter groups).
    SwitchSdk,
}

/// One `ethtool -S` dump.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EthtoolSnapshot {
    /// Line where the dump starts.
    pub line: usize,
    /// Non-counter lines seen just before the dump (a date, a separator).
    pub label: Option<String>,
    /// `# host:` or the interface of an `ethtool -S IFACE` command line.
    pub host: Option<String>,
    /// Snapshot time in nanoseconds when the file says (`# time:` in
    /// seconds, `# time_ps:` in picoseconds, a bare `date +%s` line).
    /// Nanoseconds because a Unix time in picoseconds overflows 64 bits.
    pub time_ns: Option<u64>,
    /// The time came from `# time_ps:` (simulated time): counters started
    /// at zero at time zero, so one snapshot is already a delta.
    pub simulated: bool,
    /// Driver family guessed from the names.
    pub vendor: Vendor,
    /// Counters exactly as printed.
    pub raw: BTreeMap<String, u64>,
    /// Counters under mlx5 names (native mlx5 names pass through; `ice` and
    /// `bnxt_en` names are mapped; unmapped names pass through unchanged).
    pub counters: BTreeMap<String, u64>,
}

impl EthtoolSnapshot {
    /// A normalised counter, if present.
    pub fn get(&self, name: &str) -> Option<u64> {
        self.counters.get(name).copied()
    }
}

/// Map an `ice`, `bnxt_en` or Cumulus counter name to its mlx5 equivalent.
pub fn normalize_name(name: &str) -> Option<String> {
    // Cumulus `ethtool -S swpN`: HwIfInPfc3Pkt, HwIfOutPfc3Pkt.
    for (dir, pfx) in [("rx", "HwIfInPfc"), ("tx", "HwIfOutPfc")] {
        if let Some(p) = name.strip_prefix(pfx).and_then(|r| r.strip_suffix("Pkt")) {
            let p: u8 = p.parse().ok().filter(|p| *p < 8)?;
            return Some(format!("{dir}_prio{p}_pause"));
        }
    }
    // NVUE tables, kept as `prio3.rx-pause-frames` / `port.tx.pause-frames`.
    if let Some(rest) = name.strip_prefix("prio") {
        let (p, what) = rest.split_once('.')?;
        let p: u8 = p.parse().ok().filter(|p| *p < 8)?;
        // NVUE columns, and the switch SDK dump's per-priority names.
        return match what {
            "rx-pause-frames" | "rx_pause" => Some(format!("rx_prio{p}_pause")),
            "tx-pause-frames" | "tx_pause" => Some(format!("tx_prio{p}_pause")),
            "rx-pause-duration" | "rx_pause_duration" => Some(format!("rx_prio{p}_pause_duration")),
            "tx-pause-duration" | "tx_pause_duration" => Some(format!("tx_prio{p}_pause_duration")),
            "rx_pause_transition" => Some(format!("rx_prio{p}_pause_transition")),
            "rx_discards" => Some(format!("rx_prio{p}_discards")),
            _ => None,
        };
    }
    match name {
        "HwIfInPausePkt" | "port.rx.pause-frames" => return Some("rx_global_pause".into()),
        "HwIfOutPausePkt" | "port.tx.pause-frames" => return Some("tx_global_pause".into()),
        "HwIfInBufferDrops" => return Some("rx_discards_phy".into()),
        "HwIfOutQDrops" => return Some("tx_discards_phy".into()),
        "HwIfInDot3FrameErrors" => return Some("rx_crc_errors_phy".into()),
        _ => {}
    }
    // ice: rx_priority_3_xoff.nic
    if let Some(rest) = name.strip_suffix(".nic") {
        for (dir, pfx) in [("rx", "rx_priority_"), ("tx", "tx_priority_")] {
            if let Some(r) = rest.strip_prefix(pfx) {
                let (p, what) = r.split_once('_')?;
                let p: u8 = p.parse().ok().filter(|p| *p < 8)?;
                return match what {
                    "xoff" => Some(format!("{dir}_prio{p}_pause")),
                    "xon" => Some(format!("{dir}_prio{p}_pause_transition")),
                    _ => None,
                };
            }
        }
        return match rest {
            "rx_crc_errors" => Some("rx_crc_errors_phy".into()),
            "rx_oversize" => Some("rx_oversize_pkts_phy".into()),
            "link_xoff_rx" => Some("rx_global_pause".into()),
            "link_xoff_tx" => Some("tx_global_pause".into()),
            _ => None,
        };
    }
    // bnxt_en: rx_pfc_ena_frames_pri3, pfc_pri3_rx_transitions
    for (dir, pfx) in [
        ("rx", "rx_pfc_ena_frames_pri"),
        ("tx", "tx_pfc_ena_frames_pri"),
    ] {
        if let Some(p) = name.strip_prefix(pfx) {
            let p: u8 = p.parse().ok().filter(|p| *p < 8)?;
            return Some(format!("{dir}_prio{p}_pause"));
        }
    }
    if let Some(r) = name.strip_prefix("pfc_pri") {
        let (p, what) = r.split_once('_')?;
        let p: u8 = p.parse().ok().filter(|p| *p < 8)?;
        return match what {
            "rx_transitions" => Some(format!("rx_prio{p}_pause_transition")),
            "tx_transitions" => Some(format!("tx_prio{p}_pause_transition")),
            _ => None,
        };
    }
    match name {
        "rx_fcs_err_frames" => Some("rx_crc_errors_phy".into()),
        "rx_pause_frames" => Some("rx_pause_ctrl_phy".into()),
        "tx_pause_frames" => Some("tx_pause_ctrl_phy".into()),
        _ => None,
    }
}

fn guess_vendor(raw: &BTreeMap<String, u64>) -> Vendor {
    if raw
        .keys()
        .any(|k| k.starts_with("HwIf") || k.starts_with("prio") || k.starts_with("port."))
    {
        Vendor::Cumulus
    } else if raw.keys().any(|k| k.ends_with(".nic")) {
        Vendor::Ice
    } else if raw
        .keys()
        .any(|k| k.contains("pfc_ena_frames") || k.starts_with("pfc_pri"))
    {
        Vendor::Bnxt
    } else {
        Vendor::Mlx5
    }
}

/// Whether a line is the header of a NetQ `show ethtool-stats` table
/// (`Hostname  Interface  HwIfInPfc0Pkt ... Last Updated`).
pub fn is_netq_header(t: &str) -> bool {
    let mut w = t.split_whitespace();
    w.next() == Some("Hostname") && w.next() == Some("Interface") && t.contains("HwIf")
}

/// NetQ `netq [HOST] show ethtool-stats port IF (tx|rx) [extended]`
/// tables: one row per switch and port, one column per Cumulus `HwIf*`
/// counter, then the `Last Updated` date. Rows of several tables for the
/// same switch and port (tx, rx, extended) make one snapshot, named
/// `HOST:PORT`.
fn parse_netq(input: &str) -> Vec<EthtoolSnapshot> {
    let mut snaps: Vec<EthtoolSnapshot> = Vec::new();
    let mut columns: Option<Vec<String>> = None;
    for l in lines(input) {
        let t = l.text.trim();
        if is_netq_header(t) {
            columns = Some(
                t.split_whitespace()
                    .skip(2)
                    .take_while(|c| *c != "Last")
                    .map(str::to_string)
                    .collect(),
            );
            continue;
        }
        let Some(cols) = &columns else { continue };
        if t.is_empty() || t.starts_with('-') {
            continue;
        }
        let w: Vec<&str> = t.split_whitespace().collect();
        if w.len() < 2 + cols.len() {
            columns = None;
            continue;
        }
        let values: Vec<Option<u64>> = w[2..2 + cols.len()]
            .iter()
            .map(|v| v.parse().ok())
            .collect();
        if values.iter().all(Option::is_none) {
            columns = None;
            continue;
        }
        let host = format!("{}:{}", w[0], w[1]);
        let idx = match snaps
            .iter()
            .position(|s| s.host.as_deref() == Some(host.as_str()))
        {
            Some(i) => i,
            None => {
                snaps.push(EthtoolSnapshot {
                    line: l.number,
                    host: Some(host),
                    ..EthtoolSnapshot::default()
                });
                snaps.len() - 1
            }
        };
        for (name, v) in cols.iter().zip(values) {
            if let Some(v) = v {
                snaps[idx].raw.insert(name.clone(), v);
            }
        }
    }
    snaps.retain(|s| !s.raw.is_empty());
    for s in &mut snaps {
        finish(s);
    }
    snaps
}

/// Parse one or more `ethtool -S` dumps. Errors when no counter line is
/// found, or when a counter's value is not an unsigned integer.
pub fn parse(input: &str) -> Result<Vec<EthtoolSnapshot>, ParseError> {
    let netq = parse_netq(input);
    if !netq.is_empty() {
        return Ok(netq);
    }
    let mut out: Vec<EthtoolSnapshot> = Vec::new();
    let mut cur: Option<EthtoolSnapshot> = None;
    let mut label: Option<String> = None;
    let mut host: Option<String> = None;
    let mut time_ns: Option<u64> = None;
    let mut simulated = false;
    let all = lines(input);
    let close = |cur: &mut Option<EthtoolSnapshot>, out: &mut Vec<EthtoolSnapshot>| {
        if let Some(mut s) = cur.take() {
            if !s.raw.is_empty() {
                finish(&mut s);
                out.push(s);
            }
        }
    };
    // NVUE `nv show interface <if> counters qos` tables: (row prefix,
    // column names), and whether this dump is NVUE output (its titles and
    // rulers then do not end the snapshot).
    let mut table: Option<(&'static str, Vec<String>)> = None;
    let mut nvue = false;
    // Switch SDK dump: inside one (`Port 0x... - ... Counters Group`), and
    // the `Prio N` section.
    let mut sdk = false;
    let mut prio: Option<u8> = None;
    for l in &all {
        let t = l.text.trim();
        if t.is_empty() {
            table = None;
            continue;
        }
        if let Some(port) = sdk_port_header(t) {
            if host.as_deref() != Some(port) {
                close(&mut cur, &mut out);
                host = Some(port.to_string());
            }
            sdk = true;
            prio = None;
            continue;
        }
        if let Some(p) = sdk_prio(t) {
            sdk = true;
            prio = Some(p);
            continue;
        }
        if sdk {
            if t.bytes().all(|b| b == b'=' || b == b'-') {
                continue;
            }
            if let Some((name, value)) = t.split_once(" = ") {
                let (name, value) = (name.trim(), value.trim());
                if is_counter_name(name) {
                    let Some(v) = uint(value) else {
                        return Err(ParseError::new(
                            l.number,
                            format!("an unsigned integer value for counter `{name}`"),
                            l.text,
                        ));
                    };
                    let name = match prio {
                        Some(p) => format!("prio{p}.{name}"),
                        None => name.to_string(),
                    };
                    if cur.is_none() {
                        let mut snap = new_snapshot(
                            l.number,
                            &mut label,
                            &host,
                            (&mut time_ns, &mut simulated),
                        );
                        snap.vendor = Vendor::SwitchSdk;
                        cur = Some(snap);
                    }
                    if let Some(c) = cur.as_mut() {
                        c.raw.insert(name, v);
                    }
                    continue;
                }
            }
        }
        let cols = chunks(t);
        let prefix = match cols.first().copied() {
            Some("switch-priority") => Some("prio"),
            Some("priority-group") => Some("pg"),
            Some("traffic-class") => Some("tc"),
            Some("Counter") if cols.contains(&"Receive") => Some("port"),
            _ => None,
        };
        if let Some(prefix) = prefix.filter(|_| cols.len() >= 2) {
            table = Some((prefix, cols.iter().map(|c| c.to_string()).collect()));
            nvue = true;
            continue;
        }
        if let Some((prefix, names)) = &table {
            if t.starts_with("---") {
                continue;
            }
            let row = nvue_row(prefix, names, &cols);
            if !row.is_empty() {
                for (name, value) in row {
                    let repeated = cur.as_ref().is_some_and(|c| c.raw.contains_key(&name));
                    if cur.is_none() || repeated {
                        close(&mut cur, &mut out);
                        cur = Some(new_snapshot(
                            l.number,
                            &mut label,
                            &host,
                            (&mut time_ns, &mut simulated),
                        ));
                    }
                    if let Some(c) = cur.as_mut() {
                        c.raw.insert(name, value);
                    }
                }
                continue;
            }
            table = None;
        }
        if let Some(iface) = command_iface(t) {
            nvue = t.contains("nv show ");
            host = Some(iface);
            close(&mut cur, &mut out);
            continue;
        }
        if nvue && !t.contains(':') {
            // Section titles (`PFC Statistics`), `====` rulers, `...`.
            continue;
        }
        // `# ethtool -S eth0` is a root prompt and a command, not metadata.
        if let Some(meta) = t.strip_prefix('#').filter(|_| command_iface(t).is_none()) {
            let meta = meta.trim();
            if let Some(h) = meta.strip_prefix("host:") {
                host = Some(h.trim().to_string());
            } else if let Some(v) = meta.strip_prefix("time_ps:") {
                time_ns = v.trim().parse::<u64>().ok().map(|ps| ps / 1000);
                simulated = time_ns.is_some();
            } else if let Some(v) = meta.strip_prefix("time:") {
                time_ns = scaled_decimal(v, 1_000_000_000, 1);
                simulated = false;
            }
            close(&mut cur, &mut out);
            continue;
        }
        if t.starts_with("NIC statistics") {
            close(&mut cur, &mut out);
            cur = Some(new_snapshot(
                l.number,
                &mut label,
                &host,
                (&mut time_ns, &mut simulated),
            ));
            continue;
        }
        let t = strip_ring_prefix(t);
        if let Some((name, value)) = counter_pair(&t) {
            if name.contains(' ') {
                continue;
            }
            let repeated = cur.as_ref().is_some_and(|c| c.raw.contains_key(name));
            if cur.is_none() || repeated {
                close(&mut cur, &mut out);
                cur = Some(new_snapshot(
                    l.number,
                    &mut label,
                    &host,
                    (&mut time_ns, &mut simulated),
                ));
            }
            if let Some(c) = cur.as_mut() {
                c.raw.insert(name.to_string(), value);
            }
            continue;
        }
        if let Some((name, value)) = t.split_once(':') {
            let (name, value) = (name.trim(), value.trim());
            if cur.is_some() && is_counter_name(name) && !value.is_empty() && !value.contains(' ') {
                return Err(ParseError::new(
                    l.number,
                    format!("an unsigned integer value for counter `{name}`"),
                    l.text,
                ));
            }
        }
        if let Some(iface) = command_iface(&t) {
            host = Some(iface);
            close(&mut cur, &mut out);
            continue;
        }
        if let Some(ns) = bare_epoch(&t) {
            time_ns = Some(ns);
            simulated = false;
        } else {
            label = Some(t.to_string());
        }
        close(&mut cur, &mut out);
    }
    close(&mut cur, &mut out);
    if out.is_empty() {
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "`NIC statistics:` followed by `name: value` counter lines",
            first.map_or("", |l| l.text),
        ));
    }
    Ok(out)
}

fn new_snapshot(
    line: usize,
    label: &mut Option<String>,
    host: &Option<String>,
    (time_ns, simulated): (&mut Option<u64>, &mut bool),
) -> EthtoolSnapshot {
    EthtoolSnapshot {
        line,
        label: label.take(),
        host: host.clone(),
        time_ns: time_ns.take(),
        simulated: std::mem::take(simulated),
        ..EthtoolSnapshot::default()
    }
}

fn finish(s: &mut EthtoolSnapshot) {
    // A switch SDK dump says what it is; the others are told by their names.
    if s.vendor != Vendor::SwitchSdk {
        s.vendor = guess_vendor(&s.raw);
    }
    let mut norm = BTreeMap::new();
    for (k, v) in &s.raw {
        if let Some(n) = normalize_name(k) {
            let e = norm.entry(n).or_insert(0u64);
            *e = e.saturating_add(*v);
        }
    }
    for (k, v) in &s.raw {
        norm.entry(k.clone()).or_insert(*v);
    }
    s.counters = norm;
}

/// `[3]: rx_ucast_packets: 5` (bnxt per-ring) -> `q3_rx_ucast_packets: 5`.
fn strip_ring_prefix(t: &str) -> std::borrow::Cow<'_, str> {
    if let Some(rest) = t.strip_prefix('[') {
        if let Some((n, tail)) = rest.split_once("]:") {
            if n.bytes().all(|b| b.is_ascii_digit()) && !n.is_empty() {
                return format!("q{n}_{}", tail.trim()).into();
            }
        }
    }
    // `rxq0: rx_bytes: 5` (be2net and others: a queue, then the counter)
    // -> `rxq0_rx_bytes: 5`.
    if let Some((q, tail)) = t.split_once(": ") {
        let q = q.trim();
        if tail.contains(':')
            && !q.is_empty()
            && q.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && q.bytes().any(|b| b.is_ascii_digit())
        {
            return format!("{q}_{}", tail.trim()).into();
        }
    }
    t.into()
}

/// `Port 0x10500 - IEEE 802.3 Counters Group` -> `0x10500`.
pub fn sdk_port_header(t: &str) -> Option<&str> {
    let rest = t.strip_prefix("Port ")?;
    let (port, group) = rest.split_once(" - ")?;
    (group.trim_end().ends_with("Counters Group") && !port.contains(' ')).then_some(port)
}

/// `Prio 3` -> 3.
fn sdk_prio(t: &str) -> Option<u8> {
    t.strip_prefix("Prio ")?
        .trim()
        .parse()
        .ok()
        .filter(|p| *p < 8)
}

/// A value of an NVUE table cell: `12`, `0 Bytes`; `n/a` and sizes in
/// KB/MB (rounded by NVUE) are not counters.
fn nvue_value(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_suffix(" Bytes").unwrap_or(s);
    s.parse().ok()
}

/// Counters of one NVUE table row, named `<prefix><index>.<column>`
/// (`prio3.rx-pause-frames`, `pg3.rx-buffer-discards` in bytes,
/// `tc3.tx-frames`) or, for the port table, `port.rx.<counter>` /
/// `port.tx.<counter>`.
fn nvue_row(prefix: &str, names: &[String], cols: &[&str]) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if prefix == "port" {
        if let [name, rx, tx] = cols {
            if is_counter_name(name) {
                // `n/a` cells are not counters.
                for (dir, v) in [("rx", rx), ("tx", tx)] {
                    if let Some(v) = nvue_value(v) {
                        out.push((format!("port.{dir}.{name}"), v));
                    }
                }
            }
        }
        return out;
    }
    let Some(idx) = cols.first().and_then(|c| c.parse::<u8>().ok()) else {
        return out;
    };
    if cols.len() != names.len() {
        return out;
    }
    for (name, v) in names.iter().zip(cols).skip(1) {
        if let Some(v) = nvue_value(v) {
            out.push((format!("{prefix}{idx}.{name}"), v));
        }
    }
    out
}

fn command_iface(t: &str) -> Option<String> {
    // `nv show interface swp1 counters qos` after any prompt.
    if let Some(pos) = t.find("nv show interface ") {
        return t[pos + "nv show interface ".len()..]
            .split_whitespace()
            .next()
            .map(str::to_string);
    }
    // `ethtool -S eth0`, `# ethtool -S eth0`, `user@host:~$ sudo ethtool -S swp1`
    let rest = ["ethtool -S ", "ethtool --statistics "]
        .iter()
        .find_map(|c| t.find(c).map(|pos| &t[pos + c.len()..]))?;
    rest.split_whitespace().next().map(str::to_string)
}

fn bare_epoch(t: &str) -> Option<u64> {
    if t.len() >= 9 && t.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        scaled_decimal(t, 1_000_000_000, 1)
    } else {
        None
    }
}
