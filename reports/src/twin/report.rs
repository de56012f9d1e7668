//! The twin's run beside the real one, per size: the real and model
//! numbers, their ratio, the model's limit at that size (wire, PCIe,
//! message rate, window, latency; [`sim::hostmodel`]) and, where real is
//! far from model, what the gap means and where to look.
//!
//! The ratio is real / model of the test's headline: average bandwidth
//! for `*_bw` (the message rate's ratio is the same), `t_typical` for
//! `*_lat`. Within [`AGREE`] of 1 a row agrees; beyond it a row gets a
//! gap note.

use std::fmt::Write as _;

use serde::Serialize;
use sim::config::HostParams;
use sim::hostmodel::{self, BwLimits, Limit, PathShape};
use sim::results::PerftestRecord;
use verbs_emu::perftest::report::LatencyStats;

use super::types::TwinSetup;

/// A row agrees when real / model is within this fraction of 1.
pub const AGREE: f64 = 0.10;

/// One size, real beside model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwinRow {
    /// Message size, bytes.
    pub bytes: u64,
    /// Real average bandwidth, bit/s (bandwidth tests).
    pub real_bw_bps: Option<f64>,
    /// Model average bandwidth, bit/s.
    pub model_bw_bps: Option<f64>,
    /// Real messages per second.
    pub real_msg_rate: Option<f64>,
    /// Model messages per second.
    pub model_msg_rate: Option<f64>,
    /// Real `t_typical`, ns (latency tests).
    pub real_latency_ns: Option<f64>,
    /// Model `t_typical`, ns.
    pub model_latency_ns: Option<f64>,
    /// Real / model of the headline.
    pub ratio: Option<f64>,
    /// What limits the model at this size.
    pub limit: Limit,
    /// The closed-form bounds (bandwidth tests).
    pub bounds: Option<BwLimits>,
    /// What the gap means, when real is far from model.
    pub gap: Option<String>,
}

/// The whole comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TwinReport {
    /// The inferred setup (with what was assumed and understood).
    pub setup: TwinSetup,
    /// The host model the twin ran with (`None`: no host model).
    pub host: Option<HostParams>,
    /// `bandwidth` or `latency`.
    pub metric: &'static str,
    /// One row per size both sides have.
    pub rows: Vec<TwinRow>,
    /// Sizes the real table has and the model did not run (or the
    /// reverse).
    pub unmatched: Vec<u64>,
}

/// Compare the twin's perftest records with the real table. `host`: the
/// host-side values the twin ran with; `path`: its path.
pub fn compare(
    setup: &TwinSetup,
    model: &[PerftestRecord],
    host: Option<&HostParams>,
    path: &PathShape,
) -> TwinReport {
    let bw = setup.test.is_bw();
    let plateau = real_plateau(setup);
    let mut rows = Vec::new();
    let mut unmatched = Vec::new();
    for real in &setup.real {
        let Some(m) = model.iter().find(|m| m.size == real.bytes) else {
            unmatched.push(real.bytes);
            continue;
        };
        let inline = real.bytes <= u64::from(setup.inline);
        let mut row = TwinRow {
            bytes: real.bytes,
            real_bw_bps: None,
            model_bw_bps: None,
            real_msg_rate: None,
            model_msg_rate: None,
            real_latency_ns: None,
            model_latency_ns: None,
            ratio: None,
            limit: Limit::Latency,
            bounds: None,
            gap: None,
        };
        if bw {
            let b = hostmodel::bw_limits(
                host,
                setup.test,
                real.bytes,
                (setup.qps, setup.tx_depth, inline),
                setup.bidirectional,
                path,
            );
            row.real_bw_bps = real.bw_avg_bps.map(|v| v as f64);
            row.model_bw_bps = m.bw_bps();
            row.real_msg_rate = real.msg_rate_per_s.map(|v| v as f64);
            row.model_msg_rate = m.msg_rate();
            row.ratio = ratio(row.real_bw_bps, row.model_bw_bps);
            row.limit = b.limit;
            row.bounds = Some(b);
        } else {
            let mut ns: Vec<u64> = m.latency_samples_ps.iter().map(|p| p / 1000).collect();
            let typical = LatencyStats::from_samples(&mut ns, m.test.rtt_factor())
                .map(|s| s.typical * 1000.0);
            row.model_latency_ns = typical;
            row.real_latency_ns = real.t_typical_ns.or(real.t_avg_ns).map(|v| v as f64);
            row.ratio = ratio(row.real_latency_ns, row.model_latency_ns);
            row.limit = latency_limit(host, setup, real.bytes, path);
        }
        row.gap = gap(setup, host, &row, plateau);
        rows.push(row);
    }
    for m in model {
        if !setup.real.iter().any(|r| r.bytes == m.size) {
            unmatched.push(m.size);
        }
    }
    TwinReport {
        setup: setup.clone(),
        host: host.copied(),
        metric: if bw { "bandwidth" } else { "latency" },
        rows,
        unmatched,
    }
}

/// The real host's small-message plateau: the median message rate of
/// the real rows at 64 bytes and below (`None` with fewer than two).
fn real_plateau(setup: &TwinSetup) -> Option<f64> {
    let mut v: Vec<f64> = setup
        .real
        .iter()
        .filter(|r| r.bytes <= 64)
        .filter_map(|r| r.msg_rate_per_s.map(|m| m as f64))
        .collect();
    if v.len() < 2 {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

fn ratio(real: Option<f64>, model: Option<f64>) -> Option<f64> {
    match (real, model) {
        (Some(r), Some(m)) if m > 0.0 => Some(r / m),
        _ => None,
    }
}

/// What sets a latency test at `size`: the fixed path (latency) while the
/// message's transfer time is the smaller part, else the slower of wire
/// and PCIe.
fn latency_limit(
    host: Option<&HostParams>,
    setup: &TwinSetup,
    size: u64,
    path: &PathShape,
) -> Limit {
    let b = hostmodel::bw_limits(
        host,
        setup.test,
        size,
        (1, 1, size <= u64::from(setup.inline)),
        false,
        path,
    );
    let (rate, which) = match b.pcie_bps {
        Some(p) if p < b.wire_bps => (p, Limit::Pcie),
        _ => (b.wire_bps, Limit::Wire),
    };
    let transfer_ns = size as f64 * 8.0 / rate * 1e9;
    let total = hostmodel::latency(
        host,
        setup.test,
        size,
        size <= u64::from(setup.inline),
        path,
    )
    .as_ps() as f64
        / 1000.0;
    if transfer_ns * 2.0 > total {
        which
    } else {
        Limit::Latency
    }
}

fn gbps(bps: f64) -> String {
    format!("{:.2} Gbit/s", bps / 1e9)
}

/// What a gap between real and model means at its limit.
fn gap(
    setup: &TwinSetup,
    host: Option<&HostParams>,
    row: &TwinRow,
    plateau: Option<f64>,
) -> Option<String> {
    let r = row.ratio?;
    if (r - 1.0).abs() <= AGREE {
        return None;
    }
    let pct = ((1.0 - r).abs() * 100.0).round();
    let below = r < 1.0;
    // Real still runs at its own small-message rate where the model has
    // left its own: the posting rate sets this size on the real host.
    if let (Some(p), Some(m), true) = (plateau, row.real_msg_rate, below) {
        if row.limit != Limit::MessageRate && row.bytes > 64 && (m / p - 1.0).abs() <= 0.15 {
            return Some(format!(
                "real is {pct:.0} % below the model and still at its small-message rate ({:.2} M/s): on the real host the posting rate sets this size, the {} does in the model; the twin's qp_mpps ({}) is above this host's",
                m / 1e6,
                row.limit.text(),
                host.map_or("none".to_string(), |h| format!("{} M/s", h.qp_mpps))
            ));
        }
    }
    let assumed = |keys: &[&str]| -> String {
        let a: Vec<String> = setup
            .assumptions
            .iter()
            .filter(|a| keys.contains(&a.what))
            .map(|a| format!("{} = {}", a.what, a.value))
            .collect();
        if a.is_empty() {
            String::new()
        } else {
            format!(" (assumed: {})", a.join(", "))
        }
    };
    let b = row.bounds;
    let text = match (row.limit, below) {
        (Limit::Pcie, true) => format!(
            "real is {pct:.0} % below the PCIe bound ({}{}): look at the link the NIC trained at and its payload sizes (lspci -vv: LnkSta, DevCtl MaxPayload/MaxReadReq), and at the NUMA node the test ran on",
            host.map_or(String::new(), |h| format!("{}: ", h.describe())),
            b.and_then(|b| b.pcie_bps).map_or(String::new(), gbps),
        ),
        (Limit::Pcie, false) => format!(
            "real is {pct:.0} % above the modelled PCIe bound: the slot is faster or its payload sizes larger than the twin has{}",
            assumed(&["pcie", "max_payload", "max_read_request", "nic_model"])
        ),
        (Limit::Wire, true) => format!(
            "real is {pct:.0} % below the wire's payload rate ({}): look for PAUSE or loss on the path (ethtool -S: rx_prio*_pause, rx_discards_phy; rdma statistic: out_of_sequence, packet_seq_err), an active MTU below {} B, or other traffic on the link",
            b.map_or(String::new(), |b| gbps(b.wire_bps)),
            setup.mtu
        ),
        (Limit::Wire, false) => format!(
            "real is {pct:.0} % above the wire's payload rate: the link is faster than the twin has{}",
            assumed(&["link_gbps", "mtu"])
        ),
        (Limit::MessageRate, true) => format!(
            "real posts {pct:.0} % fewer messages than the model ({}): at this size the posting CPU sets the rate (frequency scaling, its NUMA node, interrupts on its core); more QPs (-q) or post lists raise it",
            host.map_or(String::new(), |h| format!("{} M/s per QP, {} M/s per NIC", h.qp_mpps, h.nic_mpps))
        ),
        (Limit::MessageRate, false) => format!(
            "real posts {pct:.0} % more messages than the model: this host's posting thread is faster than the twin's qp_mpps ({}); set qp_mpps in the twin's [nic.host]",
            host.map_or(String::new(), |h| format!("{} M/s", h.qp_mpps))
        ),
        (Limit::Window, true) => format!(
            "real is {pct:.0} % below the window bound (tx_depth x size / RTT = {}): the real round trip is longer than modelled (a switch hop or a longer cable{}); a deeper -t raises the bound",
            b.map_or(String::new(), |b| gbps(b.window_bps)),
            assumed(&["back_to_back", "cable"])
        ),
        (Limit::Window, false) => format!(
            "real is {pct:.0} % above the window bound: the real round trip is shorter than modelled{}",
            assumed(&["back_to_back", "cable", "nic_model"])
        ),
        (Limit::Latency, false) => format!(
            "real latency is {pct:.0} % above the model: the model has no CPU power-state wake-ups, no polling jitter and a switch without forwarding delay; look at the CPU's C-states and frequency governor, the NUMA node of both processes, and the switch's port-to-port latency{}",
            assumed(&["back_to_back", "nic_model"])
        ),
        (Limit::Latency, true) => format!(
            "real latency is {pct:.0} % below the model: {}the host's doorbell, NIC pipeline and DMA write are faster than the twin's [nic.host] (doorbell, nic_latency, write_latency){}",
            if setup.back_to_back {
                ""
            } else {
                "the hosts may be cabled back to back (rerun with --back-to-back), or "
            },
            assumed(&["back_to_back", "nic_model"])
        ),
    };
    Some(text)
}

/// The report as text: the setup line, the table, the gaps, what was
/// assumed and understood.
pub fn render_text(r: &TwinReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "twin of ib_{}: {} Gbit/s, MTU {} B, {} QP(s), tx depth {}{}",
        r.setup.test.name(),
        r.setup.link_gbps,
        r.setup.mtu,
        r.setup.qps,
        r.setup.tx_depth,
        r.host.map_or(", no host model".to_string(), |h| format!(
            ", {}",
            h.describe()
        ))
    );
    let _ = writeln!(s);
    for line in table(r, false) {
        let _ = writeln!(s, "{line}");
    }
    notes(r, &mut s, "");
    s
}

/// The report as Markdown.
pub fn render_markdown(r: &TwinReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Twin of `ib_{}`\n", r.setup.test.name());
    let _ = writeln!(
        s,
        "{} Gbit/s, MTU {} B, {} QP(s), tx depth {}{}.\n",
        r.setup.link_gbps,
        r.setup.mtu,
        r.setup.qps,
        r.setup.tx_depth,
        r.host.map_or(", no host model".to_string(), |h| format!(
            ", {}",
            h.describe()
        ))
    );
    for line in table(r, true) {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s);
    notes(r, &mut s, "- ");
    s
}

fn table(r: &TwinReport, md: bool) -> Vec<String> {
    let bw = r.metric == "bandwidth";
    let head: &[&str] = if bw {
        &[
            "bytes",
            "real Gb/s",
            "model Gb/s",
            "real Mpps",
            "model Mpps",
            "real/model",
            "model limit",
        ]
    } else {
        &["bytes", "real us", "model us", "real/model", "model limit"]
    };
    let f = |v: Option<f64>, scale: f64, p: usize| {
        v.map_or("-".to_string(), |v| format!("{:.p$}", v / scale))
    };
    let mut rows: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    for row in &r.rows {
        let mut cells = vec![row.bytes.to_string()];
        if bw {
            cells.push(f(row.real_bw_bps, 1e9, 2));
            cells.push(f(row.model_bw_bps, 1e9, 2));
            cells.push(f(row.real_msg_rate, 1e6, 3));
            cells.push(f(row.model_msg_rate, 1e6, 3));
        } else {
            cells.push(f(row.real_latency_ns, 1e3, 2));
            cells.push(f(row.model_latency_ns, 1e3, 2));
        }
        cells.push(f(row.ratio, 1.0, 3));
        let mark = if row.gap.is_some() { " *" } else { "" };
        cells.push(format!("{}{mark}", row.limit.text()));
        rows.push(cells);
    }
    if md {
        let mut out = Vec::new();
        for (i, cells) in rows.iter().enumerate() {
            out.push(format!("| {} |", cells.join(" | ")));
            if i == 0 {
                out.push(format!("|{}", "---|".repeat(cells.len())));
            }
        }
        return out;
    }
    let widths: Vec<usize> = (0..head.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    rows.iter()
        .map(|cells| {
            let line: Vec<String> = cells
                .iter()
                .zip(&widths)
                .map(|(c, w)| format!("{c:>w$}"))
                .collect();
            format!("  {}", line.join("  "))
        })
        .collect()
}

/// The kind of a row's gap note (its text up to the first number).
fn note_kind(r: &TwinRow) -> String {
    r.gap
        .as_deref()
        .unwrap_or("")
        .split(|c: char| c.is_ascii_digit())
        .next()
        .unwrap_or("")
        .to_string()
}

fn notes(r: &TwinReport, s: &mut String, bullet: &str) {
    let gaps: Vec<&TwinRow> = r.rows.iter().filter(|x| x.gap.is_some()).collect();
    if gaps.is_empty() && !r.rows.is_empty() {
        let _ = writeln!(
            s,
            "\nreal and model agree within {:.0} % at every size.",
            AGREE * 100.0
        );
    } else if !gaps.is_empty() {
        let _ = writeln!(s, "\nwhere real is far from the model (* above):");
        // Consecutive sizes with the same kind of note share one line,
        // with the range of their real/model ratios.
        let mut i = 0;
        while i < gaps.len() {
            let g = gaps[i];
            let key = |x: &TwinRow| (x.limit, note_kind(x));
            let mut j = i + 1;
            while j < gaps.len() && key(gaps[j]) == key(g) {
                j += 1;
            }
            let last = gaps[j - 1];
            let sizes = if j - i == 1 {
                format!("{} B", g.bytes)
            } else {
                format!("{}-{} B ({} sizes)", g.bytes, last.bytes, j - i)
            };
            let (lo, hi) = gaps[i..j]
                .iter()
                .filter_map(|x| x.ratio)
                .fold((f64::MAX, f64::MIN), |(a, b), r| (a.min(r), b.max(r)));
            let range = if j - i > 1 {
                format!(" [real/model {lo:.2}-{hi:.2}]")
            } else {
                String::new()
            };
            let _ = writeln!(
                s,
                "{bullet}  {sizes}: {}{range}",
                g.gap.as_deref().unwrap_or("")
            );
            i = j;
        }
    }
    if !r.unmatched.is_empty() {
        let sizes: Vec<String> = r.unmatched.iter().map(u64::to_string).collect();
        let _ = writeln!(s, "\nsizes on one side only: {}", sizes.join(", "));
    }
    let _ = writeln!(s, "\nassumed (no input gave these):");
    if r.setup.assumptions.is_empty() {
        let _ = writeln!(s, "{bullet}  nothing");
    }
    for a in &r.setup.assumptions {
        let _ = writeln!(s, "{bullet}  {}: {} ({})", a.what, a.value, a.why);
    }
    let _ = writeln!(s, "\nunderstood:");
    for u in &r.setup.understood {
        let _ = writeln!(s, "{bullet}  {u}");
    }
}
