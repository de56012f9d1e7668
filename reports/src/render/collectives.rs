//! nccl-tests workloads by size: what each collective size took in each
//! variant (the results' groups with a `collective`), beside NCCL's own
//! tuning model.
//!
//! Shown only when some variant has such groups. One plot of bus
//! bandwidth (GB/s, nccl-tests' busbw) against size (log scale): a solid
//! line with a dot per size for each variant's workload, a dashed line of
//! the same colour for the bus bandwidth NCCL's model predicts. Then one
//! table per variant and workload: size, algorithm and protocol, time,
//! algbw, busbw, the model's time, what held the size back (`limit`), the
//! host that finished last and the port PAUSE held longest (and by whom).
//!
//! Pure functions of the records: the same results give the same bytes;
//! an unfinished size shows as `-` and is left out of the lines.

use std::fmt::Write as _;

use sim::results::{GroupRecord, RunResult};
use sim::workload::nccl_tests::Collective;

use super::format::md_escape;
use super::perftest::{size_axis_of, size_text, size_tick};
use super::svg::{escape, num, Axis, Plot};

/// Width of the plot, px.
const WIDTH: u32 = 880;

/// Points of a line, data coordinates.
type Points = Vec<(f64, f64)>;

/// One workload of one variant.
struct Series<'a> {
    /// The variant, or `variant: workload` when the variant has several.
    name: String,
    color: &'static str,
    collective: Collective,
    groups: Vec<&'a GroupRecord>,
}

/// What one size measured: (algbw, busbw) in GB/s, from its time.
fn bandwidths(c: Collective, g: &GroupRecord, ps: u64) -> Option<(f64, f64)> {
    let (bytes, ranks) = (g.bytes?, g.ranks?);
    if ps == 0 {
        return None;
    }
    Some(c.bandwidths(bytes, ps as f64 * 1e-12, ranks))
}

/// The workload a size's group belongs to: its name less `-SIZE`.
fn workload_of(g: &GroupRecord) -> String {
    let size = g.size.unwrap_or(0);
    g.name
        .strip_suffix(&format!("-{size}"))
        .unwrap_or(&g.name)
        .to_string()
}

fn series<'a>(rs: &'a [RunResult], colors: &[&'static str]) -> Vec<Series<'a>> {
    let mut out = Vec::new();
    for (i, r) in rs.iter().enumerate() {
        let mut names: Vec<String> = Vec::new();
        for g in r.groups.iter().filter(|g| g.kind == "nccl-tests") {
            let w = workload_of(g);
            if !names.contains(&w) {
                names.push(w);
            }
        }
        for w in &names {
            let groups: Vec<&GroupRecord> = r
                .groups
                .iter()
                .filter(|g| g.kind == "nccl-tests" && workload_of(g) == *w)
                .collect();
            let Some(c) = groups
                .first()
                .and_then(|g| g.collective.as_deref())
                .and_then(Collective::from_name)
            else {
                continue;
            };
            let name = if names.len() > 1 {
                format!("{}: {w}", r.summary.variant)
            } else {
                r.summary.variant.clone()
            };
            out.push(Series {
                name,
                color: colors[i % colors.len()],
                collective: c,
                groups,
            });
        }
    }
    out
}

impl Series<'_> {
    /// (size, busbw) measured and as NCCL's model predicts.
    fn points(&self) -> (Points, Points) {
        let mut measured = Vec::new();
        let mut model = Vec::new();
        for g in &self.groups {
            let x = g.size.unwrap_or(0).max(1) as f64;
            if let Some((_, bus)) = g
                .step_time_ps
                .and_then(|t| bandwidths(self.collective, g, t))
            {
                measured.push((x, bus));
            }
            if let Some((_, bus)) = g.model_ps.and_then(|t| bandwidths(self.collective, g, t)) {
                model.push((x, bus));
            }
        }
        (measured, model)
    }
}

fn plot(all: &[Series<'_>]) -> String {
    let (x, ticks) = size_axis_of(
        all.iter()
            .flat_map(|s| s.groups.iter().map(|g| g.size.unwrap_or(1))),
    );
    let ymax = all
        .iter()
        .flat_map(|s| {
            let (m, b) = s.points();
            m.into_iter().chain(b).map(|p| p.1)
        })
        .fold(0.0, f64::max);
    let y = Axis::zero_to(ymax);
    let mut p = Plot::new(WIDTH, 340, "bus bandwidth by size", x, y);
    let yticks = y.ticks();
    p.axes_with_ticks(
        (&ticks, &yticks),
        "size (log scale)",
        "busbw (GB/s)",
        &size_tick,
        &num,
    );
    for s in all {
        let (measured, model) = s.points();
        p.dashed_polyline(&model, s.color, &format!("{}: NCCL's model", s.name));
        p.polyline(&measured, s.color, &s.name);
        p.markers(&measured, s.color, &s.name);
    }
    let entries: Vec<(String, &str)> = all.iter().map(|s| (s.name.clone(), s.color)).collect();
    p.legend(&entries);
    p.finish()
}

/// One table row's cells: size, algorithm/protocol, time (us), algbw,
/// busbw, model time (us), limit and where it acted, the host that finished last, the port
/// PAUSE held longest (and how many more were held).
fn cells(s: &Series<'_>, g: &GroupRecord) -> [String; 9] {
    let dash = || "-".to_string();
    let us = |ps: u64| format!("{:.2}", ps as f64 / 1e6);
    let measured = g.step_time_ps.and_then(|t| bandwidths(s.collective, g, t));
    [
        size_text(g.size.unwrap_or(0)),
        match (&g.algorithm, &g.protocol) {
            (Some(a), Some(p)) => format!("{a}/{p}"),
            _ => "p2p".to_string(),
        },
        g.step_time_ps.map_or_else(dash, us),
        measured.map_or_else(dash, |(a, _)| format!("{a:.2}")),
        measured.map_or_else(dash, |(_, b)| format!("{b:.2}")),
        g.model_ps.map_or_else(dash, us),
        match (&g.limit, &g.bottleneck) {
            (Some(l), Some(at)) => format!("{l} at {at}"),
            (Some(l), None) => l.clone(),
            _ => dash(),
        },
        g.last_host.clone().unwrap_or_else(dash),
        match g.paused.len() {
            0 => dash(),
            1 => g.paused[0].clone(),
            n => format!("{} (+{} more)", g.paused[0], n - 1),
        },
    ]
}

const HEADERS: [&str; 9] = [
    "size",
    "algorithm",
    "time (us)",
    "algbw (GB/s)",
    "busbw (GB/s)",
    "NCCL model (us)",
    "limit",
    "last to finish",
    "held by PAUSE",
];

/// The section as HTML; empty without nccl-tests groups.
pub fn section_html(rs: &[RunResult], colors: &[&'static str]) -> String {
    let all = series(rs, colors);
    if all.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>nccl-tests by size</h2>\n");
    h.push_str(
        "<p class=\"note\">Each size of each nccl-tests workload: nccl-tests' bus bandwidth \
         (solid, one dot per size) beside what NCCL's tuning model predicts for the same \
         ranks, algorithm and protocol (dashed). The tables name the algorithm and protocol \
         that ran and what held each size back: NCCL's latency term, the busiest NIC, NVLink \
         or PCIe link at its rate, PAUSE, or congestion; the host whose transfer finished \
         last; and the port PAUSE held longest while it ran, with the switch or NIC that \
         sent the PAUSE.</p>\n",
    );
    h.push_str(&plot(&all));
    h.push('\n');
    for s in &all {
        let _ = write!(
            h,
            "<table class=\"nccl\"><caption>{} ({})</caption><tr>",
            escape(&s.name),
            escape(s.collective.program())
        );
        for c in HEADERS {
            let _ = write!(h, "<th>{}</th>", escape(c));
        }
        h.push_str("</tr>\n");
        for g in &s.groups {
            h.push_str("<tr>");
            for c in cells(s, g) {
                let _ = write!(h, "<td>{}</td>", escape(&c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
    }
    h
}

/// The tables as Markdown under a heading; empty without nccl-tests
/// groups.
pub fn section_markdown(rs: &[RunResult], colors: &[&'static str]) -> String {
    let all = series(rs, colors);
    if all.is_empty() {
        return String::new();
    }
    let mut m = String::from("\n## nccl-tests by size\n");
    for s in &all {
        let _ = writeln!(
            m,
            "\n{} ({}):\n",
            md_escape(&s.name),
            md_escape(s.collective.program())
        );
        let _ = writeln!(m, "| {} |", HEADERS.join(" | "));
        m.push_str("|---:|---|---:|---:|---:|---:|---|---|---|\n");
        for g in &s.groups {
            let c = cells(s, g);
            let _ = writeln!(m, "| {} |", c.map(|x| md_escape(&x)).join(" | "));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::evidence::empty_run;

    fn group(size: u64, step: Option<u64>, limit: &str) -> GroupRecord {
        GroupRecord {
            name: format!("ar-{size}"),
            kind: "nccl-tests".into(),
            flows: 10,
            flows_completed: if step.is_some() { 10 } else { 3 },
            start_ps: Some(0),
            finish_ps: step,
            step_time_ps: step,
            ideal_ps: None,
            ranks: Some(8),
            bytes: Some(size),
            collective: Some("all_reduce".into()),
            size: Some(size),
            count: Some(size / 4),
            algorithm: Some("Ring".into()),
            protocol: Some("Simple".into()),
            model_ps: Some(step.unwrap_or(1_000_000)),
            limit: step.map(|_| limit.to_string()),
            last_host: None,
            paused: Vec::new(),
            bottleneck: None,
        }
    }

    /// A row per size with nccl-tests' bandwidths (busbw = algbw x
    /// 2(n-1)/n for all-reduce), the model's time and the limit; an
    /// unfinished size shows dashes; no nccl-tests groups, no section.
    #[test]
    fn sizes_get_rows_with_busbw_model_and_limit() {
        let mut r = empty_run("default");
        // 1 MiB in 100 us: algbw 10.49 GB/s, busbw x 1.75 = 18.35.
        let mut g = group(1 << 20, Some(100_000_000), "latency");
        g.last_host = Some("h3".into());
        g.paused = vec![
            "leaf0:1 by h1 for 2us".into(),
            "leaf0:2 by h2 for 1us".into(),
        ];
        r.groups.push(g);
        let mut nic = group(1 << 24, Some(1_000_000_000), "nic");
        nic.bottleneck = Some("h3:0 -> leaf0".into());
        r.groups.push(nic);
        r.groups.push(group(1 << 26, None, ""));
        let m = section_markdown(std::slice::from_ref(&r), &["#000"]);
        assert!(
            m.contains("| 1 MiB | Ring/Simple | 100.00 | 10.49 | 18.35 | 100.00 | latency | h3 | leaf0:1 by h1 for 2us (+1 more) |"),
            "{m}"
        );
        assert!(
            m.contains(r"| 1000.00 | nic at h3:0 -\> leaf0 | - | - |"),
            "{m}"
        );
        assert!(
            m.contains("| 64 MiB | Ring/Simple | - | - | - | 1.00 | - |"),
            "{m}"
        );
        let h = section_html(std::slice::from_ref(&r), &["#000"]);
        assert!(
            h.contains("<h2>nccl-tests by size</h2>") && h.contains("<svg"),
            "{h}"
        );
        assert!(section_html(&[empty_run("x")], &["#000"]).is_empty());
    }
}
