//! Counter dumps in the formats of the real tools, so that the same eyes
//! and the same parsers read simulated and real output
//! (REAL-NIC-FORMATS.md §2-§3).
//!
//! * [`ethtool_dump`]: `ethtool -S` of an mlx5 port: `NIC statistics:` then
//!   `     name: value` lines (five spaces). Fault counters use the mlx5
//!   names: `rx_crc_errors_phy` (bad FCS), `rx_oversize_pkts_phy` (over
//!   the MTU), `tx_discards_phy` (lost to a down link),
//!   `link_down_events_phy`, `rx_prioN_buf_discard` (drops on a lossless
//!   priority). Per-priority traffic counters
//!   for all 8 priorities; `rx_prioN_pause*` / `tx_prioN_pause*` rows only
//!   for the priorities with PFC enabled, as the driver does. Pause
//!   durations are in microseconds, as mlx5 reports them.
//! * [`rdma_statistic`]: `rdma statistic show link DEV/1` — one line,
//!   `link DEV/1 name value name value ...`.
//!   NIC ports end with the ConnectX stall counters
//!   `tx_pause_storm_warning_events` and `tx_pause_storm_error_events`.
//! * [`perfquery_dump`]: `perfquery -x` of an InfiniBand port (on a
//!   fabric with `link_layer = "infiniband"`, in place of `ethtool -S`):
//!   `<host>.perfquery.txt` and `<switch>-p<port>.perfquery.txt`, each
//!   after a `# host: NODE` line, one LID per node.
//! * [`pfcwd_show_stats`]: SONiC's `pfcwd show stats` table (tabulate
//!   `simple` format, right-aligned) of one switch's watchdog queues.
//! * [`write_counter_dumps`] writes two files into a directory, one per
//!   kind of device: `nics.txt` holds both dumps of every host
//!   (`<host>.ethtool.txt`, `<host>.rdma.txt`), `switches.txt` the ethtool
//!   form of every switch port (`<switch>-p<port>.ethtool.txt`) and, for
//!   every switch whose watchdog saw a storm, `<switch>.pfcwd.txt`. Each is
//!   a [bundle]: the dumps one after another, each under a
//!   `==> NAME <==` line as `tail -n +1 FILE...` prints them, NAME the
//!   file name the dump had when each dump was a file of its own (folders
//!   written before hold those files; readers take both). Each dump starts
//!   with a `# time_ps: <end of run in ps>` comment line, the metadata the
//!   reports parsers read as simulated time. Two files instead of one per
//!   port keep the output small and fast at thousands of hosts.
//! * [`write_capture`] (`capture.rs`): the counter dumps plus each host's
//!   `mlnx_qos -i`, a capture named by node only (the counter interview
//!   and the doctor's evaluation read runs this way), with each switch's
//!   `mmuconfig -l` and `ecnconfig -l` / `-q` listings ([`mmuconfig`],
//!   [`ecnconfig`], `sonic.rs`) and each host's `ethtool IFACE` link
//!   speed.

mod capture;
mod sonic;

pub use capture::{
    ecnconfig_file, ethtool_link, link_file, mlnx_qos, mlnx_qos_file, mmuconfig_file, write_capture,
};
pub use sonic::{ecnconfig, mmuconfig};

use std::fmt::Write as _;
use std::path::Path;

use crate::results::{NicRecord, PfcwdStats, PortRecord, RunResult};

/// The `ethtool -S` text of one port. `pfc_prios`: priorities with PFC
/// enabled (their pause rows are printed).
pub fn ethtool_dump(port: &PortRecord, pfc_prios: &[u8]) -> String {
    let mut out = String::from("NIC statistics:\n");
    let mut line = |name: &str, v: u64| {
        // Writing to a String cannot fail.
        let _ = writeln!(out, "     {name}: {v}");
    };
    let sum = |f: fn(&crate::results::PrioCounters) -> u64| port.prio.iter().map(f).sum::<u64>();
    line("rx_packets_phy", sum(|c| c.rx_packets));
    line("tx_packets_phy", sum(|c| c.tx_packets));
    line("rx_bytes_phy", sum(|c| c.rx_bytes));
    line("tx_bytes_phy", sum(|c| c.tx_bytes));
    line("rx_discards_phy", port.rx_discards);
    line("tx_discards_phy", port.errors.tx_discards);
    line("rx_crc_errors_phy", port.errors.rx_crc_errors);
    line("rx_oversize_pkts_phy", port.errors.rx_oversize);
    line("link_down_events_phy", port.errors.link_down_events);
    line("rx_pause_ctrl_phy", sum(|c| c.rx_pause));
    line("tx_pause_ctrl_phy", sum(|c| c.tx_pause));
    for (n, c) in port.prio.iter().enumerate() {
        line(&format!("rx_prio{n}_bytes"), c.rx_bytes);
        line(&format!("rx_prio{n}_packets"), c.rx_packets);
        line(&format!("rx_prio{n}_discards"), c.rx_discards);
        line(&format!("rx_prio{n}_buf_discard"), c.rx_buf_discard);
        line(&format!("tx_prio{n}_bytes"), c.tx_bytes);
        line(&format!("tx_prio{n}_packets"), c.tx_packets);
    }
    for &n in pfc_prios {
        let Some(c) = port.prio.get(usize::from(n)) else {
            continue;
        };
        line(&format!("rx_prio{n}_pause"), c.rx_pause);
        line(
            &format!("rx_prio{n}_pause_duration"),
            c.rx_pause_duration_ps / 1_000_000,
        );
        line(&format!("tx_prio{n}_pause"), c.tx_pause);
        line(
            &format!("tx_prio{n}_pause_duration"),
            c.tx_pause_duration_ps / 1_000_000,
        );
        line(
            &format!("rx_prio{n}_pause_transition"),
            c.rx_pause_transition,
        );
    }
    if port.is_nic {
        line(
            "tx_pause_storm_warning_events",
            port.tx_pause_storm_warning_events,
        );
        line(
            "tx_pause_storm_error_events",
            port.tx_pause_storm_error_events,
        );
    }
    out
}

/// SONiC's `pfcwd show stats` for the queues of one switch: columns
/// `QUEUE` (`Ethernet<port>:<priority>`, the simulator's port number),
/// `STATUS` (`stormed` or `operational`), then `STORM DETECTED/RESTORED`,
/// `TX OK/DROP`, `RX OK/DROP`, `TX LAST OK/DROP`, `RX LAST OK/DROP` as
/// `a/b` pairs; every column right-aligned and as wide as its widest cell,
/// two spaces between columns, a dash rule under the header.
pub fn pfcwd_show_stats(rows: &[&PfcwdStats]) -> String {
    let header = [
        "QUEUE",
        "STATUS",
        "STORM DETECTED/RESTORED",
        "TX OK/DROP",
        "RX OK/DROP",
        "TX LAST OK/DROP",
        "RX LAST OK/DROP",
    ];
    let pair = |a: u64, b: u64| format!("{a}/{b}");
    let cells: Vec<[String; 7]> = rows
        .iter()
        .map(|r| {
            [
                format!("Ethernet{}:{}", r.port, r.priority),
                r.status.clone(),
                pair(r.storms_detected, r.storms_restored),
                pair(r.tx_ok, r.tx_drop),
                pair(r.rx_ok, r.rx_drop),
                pair(r.tx_last_ok, r.tx_last_drop),
                pair(r.rx_last_ok, r.rx_last_drop),
            ]
        })
        .collect();
    let mut width = header.map(str::len);
    for row in &cells {
        for (w, c) in width.iter_mut().zip(row) {
            *w = (*w).max(c.len());
        }
    }
    let mut out = String::new();
    let mut row = |cols: &mut dyn Iterator<Item = String>| {
        let line: Vec<String> = cols.zip(width).map(|(c, w)| format!("{c:>w$}")).collect();
        let _ = writeln!(out, "{}", line.join("  "));
    };
    row(&mut header.iter().map(|h| h.to_string()));
    row(&mut width.iter().map(|&w| "-".repeat(w)));
    for r in cells {
        row(&mut r.into_iter());
    }
    out
}

/// The `rdma statistic show link DEV/1` line of one NIC (mlx5 hw counter
/// names).
pub fn rdma_statistic(dev: &str, nic: &NicRecord) -> String {
    let fields: [(&str, u64); 13] = [
        ("rx_write_requests", nic.rx_write_requests),
        ("rx_read_requests", nic.rx_read_requests),
        ("out_of_sequence", nic.out_of_sequence),
        ("duplicate_request", nic.duplicate_request),
        ("rnr_nak_retry_err", nic.rnr_nak_retry_err),
        ("packet_seq_err", nic.packet_seq_err),
        ("implied_nak_seq_err", nic.implied_nak_seq_err),
        ("local_ack_timeout_err", nic.local_ack_timeout_err),
        ("req_cqe_error", nic.req_cqe_error),
        ("roce_adp_retrans", nic.retransmitted_packets),
        ("np_ecn_marked_roce_packets", nic.np_ecn_marked_roce_packets),
        ("np_cnp_sent", nic.np_cnp_sent),
        ("rp_cnp_handled", nic.rp_cnp_handled),
    ];
    let mut out = format!("link {dev}/1");
    for (k, v) in fields {
        let _ = write!(out, " {k} {v}");
    }
    out.push('\n');
    out
}

/// The metadata line that opens every dump file: the simulated time at
/// the end of the run, so that one dump reads as counts over a known
/// interval (counters start at zero at time zero) rather than totals since
/// boot. The reports parsers read it (`# time_ps: N`).
pub fn time_line(sim_time_ps: u64) -> String {
    format!("# time_ps: {sim_time_ps}\n")
}

/// The `perfquery -x` text of one InfiniBand port: LID `lid`, port
/// number `port_num` (1-based, as IB numbers ports). The extended block
/// (64-bit data and packet counters, then the error counters) ends with
/// `PortXmitWait`, the ticks the port had data but no credit (one tick:
/// one 64-byte block's time at the port's rate). Data counts 4-byte
/// words, as perfquery prints it. `None` for an Ethernet port.
pub fn perfquery_dump(lid: u32, port_num: u16, p: &PortRecord) -> Option<String> {
    let ib = p.infiniband.as_ref()?;
    let sum = |f: fn(&crate::results::PrioCounters) -> u64| p.prio.iter().map(f).sum::<u64>();
    let (tx_pkts, rx_pkts) = (sum(|c| c.tx_packets), sum(|c| c.rx_packets));
    let mut out = format!(
        "# Port extended counters: Lid {lid} port {port_num} (CapMask: 0x5A00 CapMask2: 0x0000000)\n"
    );
    let mut line = |name: &str, v: String| {
        let dots = 33usize.saturating_sub(name.len() + 1).max(1);
        // Writing to a String cannot fail.
        let _ = writeln!(out, "{name}:{}{v}", ".".repeat(dots));
    };
    line("PortSelect", port_num.to_string());
    line("CounterSelect", "0x0000".into());
    for (name, v) in [
        ("PortXmitData", sum(|c| c.tx_bytes) / 4),
        ("PortRcvData", sum(|c| c.rx_bytes) / 4),
        ("PortXmitPkts", tx_pkts),
        ("PortRcvPkts", rx_pkts),
        ("PortUnicastXmitPkts", tx_pkts),
        ("PortUnicastRcvPkts", rx_pkts),
        ("PortMulticastXmitPkts", 0),
        ("PortMulticastRcvPkts", 0),
    ] {
        line(name, v.to_string());
    }
    line("CounterSelect2", "0x00000000".into());
    for (name, v) in [
        ("SymbolErrorCounter", p.errors.rx_crc_errors),
        ("LinkErrorRecoveryCounter", 0),
        ("LinkDownedCounter", p.errors.link_down_events),
        (
            "PortRcvErrors",
            p.errors.rx_crc_errors + p.errors.rx_oversize,
        ),
        ("PortRcvRemotePhysicalErrors", 0),
        // Frames a switch had no route for.
        ("PortRcvSwitchRelayErrors", p.rx_discards),
        ("PortXmitDiscards", p.errors.tx_discards),
        ("PortXmitConstraintErrors", 0),
        ("PortRcvConstraintErrors", 0),
        ("LocalLinkIntegrityErrors", 0),
        ("ExcessiveBufferOverrunErrors", 0),
        ("VL15Dropped", 0),
        ("PortXmitWait", ib.xmit_wait),
    ] {
        line(name, v.to_string());
    }
    Some(out)
}

/// The file of NIC dumps [`write_counter_dumps`] writes.
pub const NICS_FILE: &str = "nics.txt";
/// The file of switch dumps [`write_counter_dumps`] writes.
pub const SWITCHES_FILE: &str = "switches.txt";

/// Dumps as one text: each `(name, text)` under a `==> name <==` line,
/// a blank line between two (the output of `tail -n +1 FILE...`). Every
/// text ends with a newline; [`bundle_sections`] gives them back exactly.
pub fn bundle(parts: &[(String, String)]) -> String {
    let mut out = String::new();
    for (i, (name, text)) in parts.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let _ = writeln!(out, "==> {name} <==");
        out.push_str(text);
        if !text.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}

/// The `(name, text)` sections of a [`bundle`] (or of `tail -n +1` /
/// `head` output over several files), or `None` when `text` does not
/// start with a `==> NAME <==` line. A section's text runs to the blank
/// line before the next header.
pub fn bundle_sections(text: &str) -> Option<Vec<(String, String)>> {
    let header = |l: &str| {
        l.strip_prefix("==> ")
            .and_then(|r| r.strip_suffix(" <=="))
            .filter(|n| !n.is_empty())
            .map(str::to_string)
    };
    header(text.lines().next()?)?;
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if let Some(name) = header(bare) {
            if let Some((_, prev)) = out.last_mut() {
                // The separator line before a header is not the dump's.
                if prev.ends_with("\n\n") {
                    prev.pop();
                } else if prev == "\n" {
                    prev.clear();
                }
            }
            out.push((name, String::new()));
        } else if let Some((_, cur)) = out.last_mut() {
            cur.push_str(line);
        }
    }
    Some(out)
}

/// Write the dumps of every host and switch port of `result` into `dir`
/// (created if missing), each opened by [`time_line`]: [`NICS_FILE`] and
/// [`SWITCHES_FILE`], each a [`bundle`].
/// Each port prints pause rows for its own `pfc_priorities` (so a port
/// with PFC off prints none, as the driver does); `pfc_prios` stands in
/// for ports whose record does not say (results written before the field
/// existed).
pub fn write_counter_dumps(
    dir: &Path,
    result: &RunResult,
    pfc_prios: &[u8],
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let time = time_line(result.summary.sim_time_ps);
    let (mut nics, mut switches) = (Vec::new(), Vec::new());
    // A NIC's two dumps sit together: its ethtool -S, then its rdma line.
    let rdma: std::collections::HashMap<&str, &NicRecord> =
        result.nics.iter().map(|n| (n.node.as_str(), n)).collect();
    let mut done: std::collections::HashSet<&str> = std::collections::HashSet::new();
    // InfiniBand ports: one LID per node, in the order nodes first appear.
    let mut lids: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    for p in &result.ports {
        let next = lids.len() as u32 + 1;
        let lid = *lids.entry(p.node.as_str()).or_insert(next);
        if let Some(pq) = perfquery_dump(lid, p.port + 1, p) {
            // Named as the ethtool dumps are: a switch port by its port.
            let name = if p.is_nic {
                p.node.clone()
            } else {
                format!("{}-p{}", p.node, p.port)
            };
            let dump = format!("{time}# host: {name}\n{pq}");
            if p.is_nic {
                nics.push((format!("{}.perfquery.txt", p.node), dump));
            } else {
                switches.push((format!("{}-p{}.perfquery.txt", p.node, p.port), dump));
            }
            if let Some(n) = rdma.get(p.node.as_str()).filter(|_| p.is_nic) {
                nics.push((
                    format!("{}.rdma.txt", n.node),
                    format!("{time}{}", rdma_statistic("mlx5_0", n)),
                ));
                done.insert(n.node.as_str());
            }
            continue;
        }
        let dump = format!(
            "{time}{}",
            ethtool_dump(p, p.pfc_priorities.as_deref().unwrap_or(pfc_prios))
        );
        if p.is_nic {
            nics.push((format!("{}.ethtool.txt", p.node), dump));
            if let Some(n) = rdma.get(p.node.as_str()) {
                nics.push((
                    format!("{}.rdma.txt", n.node),
                    format!("{time}{}", rdma_statistic("mlx5_0", n)),
                ));
                done.insert(n.node.as_str());
            }
        } else {
            switches.push((format!("{}-p{}.ethtool.txt", p.node, p.port), dump));
        }
    }
    for n in result
        .nics
        .iter()
        .filter(|n| !done.contains(n.node.as_str()))
    {
        nics.push((
            format!("{}.rdma.txt", n.node),
            format!("{time}{}", rdma_statistic("mlx5_0", n)),
        ));
    }
    let mut i = 0;
    let wd = &result.pfcwd_stats;
    while i < wd.len() {
        let node = &wd[i].node;
        let rows: Vec<&PfcwdStats> = wd[i..].iter().take_while(|r| &r.node == node).collect();
        i += rows.len();
        switches.push((
            format!("{node}.pfcwd.txt"),
            format!("{time}{}", pfcwd_show_stats(&rows)),
        ));
    }
    std::fs::write(dir.join(NICS_FILE), bundle(&nics))?;
    std::fs::write(dir.join(SWITCHES_FILE), bundle(&switches))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::PrioCounters;

    #[test]
    fn ethtool_dump_has_the_mlx5_shape() {
        let mut prio = vec![PrioCounters::default(); 8];
        prio[3].rx_pause = 7;
        prio[3].rx_pause_duration_ps = 12_345_678;
        prio[3].tx_bytes = 4096;
        let p = PortRecord {
            node: "h0".into(),
            port: 0,
            peer: "sw".into(),
            is_nic: true,
            prio,
            rx_discards: 2,
            fault_drops: 0,
            ecn_marked: 0,
            max_queue_bytes: 0,
            max_headroom_bytes: 0,
            tx_pause_storm_warning_events: 0,
            tx_pause_storm_error_events: 0,
            errors: Default::default(),
            pfc_priorities: None,
            ecn: None,
            load_balancing: None,
            infiniband: None,
        };
        let s = ethtool_dump(&p, &[3]);
        assert!(s.starts_with("NIC statistics:\n     rx_packets_phy: 0\n"));
        assert!(s.contains("\n     rx_prio3_pause: 7\n"));
        assert!(s.contains("\n     rx_prio3_pause_duration: 12\n"));
        assert!(s.contains("\n     tx_prio3_bytes: 4096\n"));
        assert!(s.contains("\n     rx_discards_phy: 2\n"));
        assert!(!s.contains("rx_prio0_pause"), "no pause rows without PFC");
    }

    #[test]
    fn pfcwd_table_has_sonic_columns_right_aligned() {
        let r = PfcwdStats {
            node: "leaf0".into(),
            port: 12,
            priority: 3,
            status: "stormed".into(),
            storms_detected: 1,
            tx_drop: 1234,
            tx_last_drop: 1234,
            rx_drop: 7,
            rx_last_drop: 7,
            ..PfcwdStats::default()
        };
        let s = pfcwd_show_stats(&[&r]);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[0],
            "       QUEUE   STATUS  STORM DETECTED/RESTORED  TX OK/DROP  RX OK/DROP  TX LAST OK/DROP  RX LAST OK/DROP"
        );
        assert!(lines[1].starts_with("------------  -------  ---"));
        assert_eq!(
            lines[2],
            "Ethernet12:3  stormed                      1/0      0/1234         0/7           0/1234              0/7"
        );
        assert!(lines.iter().all(|l| l.len() == lines[0].len()));
    }

    #[test]
    fn bundle_sections_give_back_each_dump_exactly() {
        let parts = vec![
            (
                "h0.ethtool.txt".to_string(),
                "# time_ps: 5\nNIC statistics:\n     a: 1\n".to_string(),
            ),
            (
                "h0.rdma.txt".to_string(),
                "\n\nlink mlx5_0/1 x 1\n".to_string(),
            ),
            ("empty.txt".to_string(), String::new()),
            ("last.txt".to_string(), "z\n\n".to_string()),
        ];
        let text = bundle(&parts);
        assert!(text.starts_with("==> h0.ethtool.txt <==\n# time_ps: 5\n"));
        assert!(text.contains("     a: 1\n\n==> h0.rdma.txt <==\n"));
        let mut want = parts.clone();
        // An empty dump is written as an empty line, read back as that.
        want[2].1 = "\n".to_string();
        assert_eq!(bundle_sections(&text).unwrap(), want);
        assert_eq!(bundle_sections("NIC statistics:\n"), None);
        assert_eq!(bundle_sections(""), None);
    }

    #[test]
    fn rdma_statistic_is_one_link_line() {
        let n = NicRecord {
            np_cnp_sent: 5,
            ..NicRecord::default()
        };
        let s = rdma_statistic("mlx5_0", &n);
        assert!(s.starts_with("link mlx5_0/1 rx_write_requests 0 "));
        assert!(s.contains(" np_cnp_sent 5 "));
        assert_eq!(s.lines().count(), 1);
    }
}
