//! The run report: one self-contained `report.html` (inline CSS and SVG,
//! no scripts, no external resources) or a Markdown summary, rendered from
//! a run's `results.json` ([`ScenarioResults`]: one [`RunResult`] per
//! variant).
//!
//! Contents: a summary table with the variants side by side, the
//! plain-language explanation ([`explain`]), and plots: queue depth over
//! time for every recorded queue (one panel per variant, same depth
//! scale), PAUSE timelines (one row per paused port and priority, from
//! `pauses`), the FCT CDF of every variant on one log-scale plot, and
//! per-flow throughput. The Markdown form has the table and the
//! explanation.
//!
//! Contract: the output depends only on the input (no clock, no
//! environment), so the same results give byte-identical reports. Every
//! text taken from the input is escaped. Rendering never panics; missing
//! data (no flows, no queues, no pauses recorded) shows as a note instead
//! of a plot. Each summary cell carries the exact value in `data-value`
//! (integers as written in `results.json`; times in ps, rates in bit/s).

pub mod explain;
pub mod svg;
pub mod sweep;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use sim::results::RunResult;
use sim::scenario::ScenarioResults;

use svg::{decimate, escape, num, Axis, Plot, PALETTE};

/// Why a results file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("{}: {message}", path.display())]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong with it.
    pub message: String,
}

/// Read a `results.json` written by `rocelab run`.
pub fn load(path: &Path) -> Result<ScenarioResults, LoadError> {
    let err = |message: String| LoadError {
        path: path.to_path_buf(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(format!("cannot read: {e}")))?;
    let doc: ScenarioResults = serde_json::from_str(&text).map_err(|e| {
        err(format!(
            "not a rocelab results.json (expected {{\"scenario\", \"seed\", \"variants\": \
             [{{\"summary\", \"flows\", \"ports\", \"nics\", \"queues\"}}]}}): {e}"
        ))
    })?;
    if doc.variants.is_empty() {
        return Err(err("`variants` is empty: expected at least one run".into()));
    }
    Ok(doc)
}

/// Format picoseconds with a unit and about four significant digits.
pub fn fmt_time(ps: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "s"),
        (1_000_000_000, "ms"),
        (1_000_000, "us"),
        (1_000, "ns"),
    ];
    for (scale, unit) in UNITS {
        if ps >= scale {
            return format!("{} {unit}", sig(ps as f64 / scale as f64));
        }
    }
    format!("{ps} ps")
}

/// Format bits per second as Gbit/s (or Mbit/s below 1 Gbit/s).
pub fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else {
        format!("{:.2} Mbit/s", bps / 1e6)
    }
}

/// A byte tick label in the unit of the axis' top value (`2 MB`).
fn bytes_tick(v: f64, top: f64) -> String {
    if top >= 1e6 {
        format!("{} MB", num(v / 1e6))
    } else if top >= 1e3 {
        format!("{} KB", num(v / 1e3))
    } else {
        format!("{} B", num(v))
    }
}

fn sig(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.1}")
    } else if x >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// One row of the summary table: label, exact value, shown value.
type Row = (&'static str, fn(&RunResult) -> (String, String));

fn rows() -> [Row; 13] {
    fn n(v: u64) -> (String, String) {
        (v.to_string(), v.to_string())
    }
    fn t(v: u64) -> (String, String) {
        (v.to_string(), fmt_time(v))
    }
    /// A percentile of FCTs: no exact value when no flow finished.
    fn ot(v: Option<u64>) -> (String, String) {
        v.map_or_else(|| (String::new(), "none finished".to_string()), t)
    }
    [
        ("flows completed", |r| {
            let s = &r.summary;
            (
                s.flows_completed.to_string(),
                format!("{} / {}", s.flows_completed, s.flows_total),
            )
        }),
        ("goodput", |r| {
            let g = r.summary.goodput_bps;
            (format!("{g}"), fmt_rate(g))
        }),
        ("drops", |r| n(r.summary.drops)),
        ("pause frames sent", |r| n(r.summary.pause_frames_sent)),
        ("pause time (sum)", |r| t(r.summary.pause_time_ps)),
        ("ECN marked", |r| n(r.summary.ecn_marked)),
        ("CNPs sent", |r| n(r.summary.cnps_sent)),
        ("retransmitted packets", |r| {
            n(r.summary.retransmitted_packets)
        }),
        ("FCT p50", |r| ot(r.summary.fct_p50_ps)),
        ("FCT p99", |r| ot(r.summary.fct_p99_ps)),
        ("FCT max", |r| ot(r.summary.max_fct_ps)),
        ("makespan", |r| t(r.summary.makespan_ps)),
        ("simulated time", |r| t(r.summary.sim_time_ps)),
    ]
}

/// Rows for the step time of each dependent group (ring all-reduce,
/// triggered imports), by group name in first-seen order: label, then per
/// variant the exact value (ps, empty when absent) and the shown one.
fn group_rows(doc: &ScenarioResults) -> Vec<(String, Vec<(String, String)>)> {
    let mut names: Vec<&str> = Vec::new();
    for r in &doc.variants {
        for g in &r.groups {
            if !names.contains(&g.name.as_str()) {
                names.push(&g.name);
            }
        }
    }
    names
        .iter()
        .map(|name| {
            let cells = doc
                .variants
                .iter()
                .map(|r| match r.groups.iter().find(|g| g.name == *name) {
                    Some(g) => match g.step_time_ps {
                        Some(st) => {
                            let ratio = g
                                .ideal_ps
                                .filter(|&i| i > 0)
                                .map(|i| format!(" (x{:.3} ideal)", st as f64 / i as f64))
                                .unwrap_or_default();
                            (st.to_string(), format!("{}{ratio}", fmt_time(st)))
                        }
                        None => (
                            String::new(),
                            format!("unfinished ({}/{} flows)", g.flows_completed, g.flows),
                        ),
                    },
                    None => (String::new(), "-".to_string()),
                })
                .collect();
            (format!("step time {name}"), cells)
        })
        .collect()
}

/// All explanation sentences: per variant, then the comparison.
pub fn explanation(doc: &ScenarioResults) -> Vec<String> {
    let mut out: Vec<String> = doc.variants.iter().flat_map(explain::variant).collect();
    out.extend(explain::comparison(&doc.variants));
    out
}

const CSS: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\
table{border-collapse:collapse;margin:1em 0}\
th,td{border:1px solid #ccc;padding:4px 10px;text-align:right}\
th:first-child,td:first-child{text-align:left}\
.row{display:flex;flex-wrap:wrap;gap:12px}\
svg.plot{font-size:11px;border:1px solid #eee}\
svg .t{font-weight:bold;font-size:12px}\
svg .g{stroke:#eee}\
svg .f{fill:none;stroke:#888}\
svg .s{fill:none;stroke-width:1.5}\
.note{color:#666}";

/// The whole report as one HTML page.
pub fn html(doc: &ScenarioResults) -> String {
    let mut h = String::new();
    let title = format!("rocelab report: {}", doc.scenario);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{}</h1>\n\
         <p>Seed {}; {} variant{}: {}.</p>\n",
        escape(&title),
        escape(&title),
        doc.seed,
        doc.variants.len(),
        if doc.variants.len() == 1 { "" } else { "s" },
        escape(
            &doc.variants
                .iter()
                .map(|v| v.summary.variant.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )
    );
    // Summary table.
    h.push_str("<h2>Summary</h2>\n<table id=\"summary\">\n<thead><tr><th></th>");
    for r in &doc.variants {
        let _ = write!(h, "<th>{}</th>", escape(&r.summary.variant));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for (label, f) in rows() {
        let _ = write!(h, "<tr><td>{}</td>", escape(label));
        for r in &doc.variants {
            let (exact, shown) = f(r);
            let _ = write!(
                h,
                "<td data-row=\"{}\" data-variant=\"{}\" data-value=\"{}\">{}</td>",
                escape(label),
                escape(&r.summary.variant),
                escape(&exact),
                escape(&shown)
            );
        }
        h.push_str("</tr>\n");
    }
    for (label, cells) in group_rows(doc) {
        let _ = write!(h, "<tr><td>{}</td>", escape(&label));
        for (r, (exact, shown)) in doc.variants.iter().zip(cells) {
            let _ = write!(
                h,
                "<td data-row=\"{}\" data-variant=\"{}\" data-value=\"{}\">{}</td>",
                escape(&label),
                escape(&r.summary.variant),
                escape(&exact),
                escape(&shown)
            );
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
    // Explanation.
    h.push_str("<h2>What happened</h2>\n<ul id=\"explanation\">\n");
    for s in explanation(doc) {
        let _ = writeln!(h, "<li>{}</li>", escape(&s));
    }
    h.push_str("</ul>\n");
    // Plots.
    h.push_str("<h2>Queue depth</h2>\n");
    h.push_str(&queue_plots(&doc.variants));
    h.push_str("<h2>PAUSE timelines</h2>\n");
    h.push_str(
        "<p class=\"note\">One row per port and priority whose transmitter was held off \
         by PAUSE from its peer; a bar is one held-off interval.</p>\n",
    );
    h.push_str(&pause_plots(&doc.variants));
    h.push_str("<h2>Flow completion times</h2>\n");
    h.push_str(&fct_cdf(&doc.variants));
    h.push_str("<h2>Per-flow throughput</h2>\n");
    h.push_str(&flow_throughput(&doc.variants));
    h.push_str("</body>\n</html>\n");
    h
}

/// The summary table and the explanation as Markdown.
pub fn markdown(doc: &ScenarioResults) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# rocelab report: {}\n", md_escape(&doc.scenario));
    let _ = writeln!(
        m,
        "Seed {}; {} variant{}.\n",
        doc.seed,
        doc.variants.len(),
        if doc.variants.len() == 1 { "" } else { "s" }
    );
    m.push_str("## Summary\n\n|");
    for r in &doc.variants {
        let _ = write!(m, " | {}", md_escape(&r.summary.variant));
    }
    m.push_str(" |\n|---");
    for _ in &doc.variants {
        m.push_str("|---:");
    }
    m.push_str("|\n");
    for (label, f) in rows() {
        let _ = write!(m, "| {label}");
        for r in &doc.variants {
            let _ = write!(m, " | {}", md_escape(&f(r).1));
        }
        m.push_str(" |\n");
    }
    for (label, cells) in group_rows(doc) {
        let _ = write!(m, "| {}", md_escape(&label));
        for (_, shown) in cells {
            let _ = write!(m, " | {}", md_escape(&shown));
        }
        m.push_str(" |\n");
    }
    m.push_str("\n## What happened\n\n");
    for s in explanation(doc) {
        let _ = writeln!(m, "- {}", md_escape(&s));
    }
    m
}

/// Escape Markdown inline text (table cells and list items).
fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '|' | '*' | '_' | '`' | '[' | ']' | '<' | '>' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn queue_name(node: &str, port: u16, priority: Option<u8>) -> String {
    match priority {
        Some(p) => format!("{node} port {port} priority {p}"),
        None => format!("{node} port {port}"),
    }
}

/// One row of panels per recorded queue, one panel per variant, sharing
/// the depth axis so the variants compare at a glance.
fn queue_plots(rs: &[RunResult]) -> String {
    let mut keys: Vec<(String, u16, Option<u8>)> = Vec::new();
    for r in rs {
        for q in &r.queues {
            let k = (q.node.clone(), q.port, q.priority);
            if !keys.contains(&k) {
                keys.push(k);
            }
        }
    }
    if keys.is_empty() {
        return "<p class=\"note\">No queue was recorded (add <code>[record] queues</code> \
                to the scenario).</p>\n"
            .to_string();
    }
    let mut out = String::new();
    for (node, port, prio) in &keys {
        let series: Vec<(usize, &RunResult, &sim::results::QueueSeries)> = rs
            .iter()
            .enumerate()
            .filter_map(|(i, r)| {
                r.queues
                    .iter()
                    .find(|q| &q.node == node && q.port == *port && q.priority == *prio)
                    .map(|q| (i, r, q))
            })
            .collect();
        let ymax = series
            .iter()
            .flat_map(|(_, _, q)| q.samples.iter().map(|s| s.1))
            .max()
            .unwrap_or(0);
        let y = Axis::zero_to(ymax as f64);
        out.push_str("<div class=\"row\">\n");
        for (i, r, q) in series {
            let end = q
                .samples
                .last()
                .map_or(r.summary.sim_time_ps, |s| s.0)
                .max(1);
            let x = Axis::linear(0.0, end as f64 / 1e6);
            let title = format!(
                "{}: egress queue {} (bytes)",
                r.summary.variant,
                queue_name(node, *port, *prio)
            );
            let mut p = Plot::new(420, 240, &title, x, y);
            p.axes("time (us)", "", &num, &|v| bytes_tick(v, y.max));
            let pts: Vec<(f64, f64)> = q
                .samples
                .iter()
                .map(|&(t, b)| (t as f64 / 1e6, b as f64))
                .collect();
            let cols = p.area_width() as usize;
            p.polyline(&decimate(&pts, cols), color(i), &r.summary.variant);
            out.push_str(&p.finish());
            out.push('\n');
        }
        out.push_str("</div>\n");
    }
    out
}

/// One timeline per variant: a row per paused (port, priority).
fn pause_plots(rs: &[RunResult]) -> String {
    let mut out = String::from("<div class=\"row\">\n");
    for (i, r) in rs.iter().enumerate() {
        let title = format!("{}: PAUSE timeline", r.summary.variant);
        let end = r.summary.sim_time_ps.max(1) as f64 / 1e6;
        let x = Axis::linear(0.0, end);
        // The most held-off rows, shown in (node, port, priority) order.
        let mut shown: Vec<usize> = (0..r.pauses.len()).collect();
        shown.sort_by_key(|&k| std::cmp::Reverse(held_ps(&r.pauses[k])));
        shown.truncate(MAX_PAUSE_ROWS);
        shown.sort_unstable();
        let rows = shown.len();
        if rows == 0 {
            let mut p = Plot::new(420, 90, &title, x, Axis::linear(0.0, 1.0));
            p.frame();
            let (l, t, rr, b) = p.area();
            p.label(
                (l + rr) / 2.0,
                (t + b) / 2.0 + 4.0,
                "middle",
                if r.summary.pause_frames_sent == 0 {
                    "no PAUSE frames: no transmitter was held off"
                } else {
                    "PAUSE frames sent, but no interval recorded (record.pause_intervals = 0?)"
                },
            );
            out.push_str(&p.finish());
            out.push('\n');
            continue;
        }
        let row_h = 16.0;
        let height = (60.0 + row_h * rows as f64) as u32;
        let mut p = Plot::with_margin(520, height, &title, x, Axis::linear(0.0, 1.0), 150.0);
        p.axes("time (us)", "", &num, &|_| String::new());
        let (l, t, _, _) = p.area();
        if rows < r.pauses.len() {
            let (_, _, rr, b) = p.area();
            p.label(
                rr,
                b + 28.0,
                "end",
                &format!(
                    "{} of {} paused rows shown (the longest held)",
                    rows,
                    r.pauses.len()
                ),
            );
        }
        for (k, s) in shown.iter().map(|&k| &r.pauses[k]).enumerate() {
            let y0 = t + 2.0 + row_h * k as f64;
            let held = held_ps(s);
            let mut name = format!("{}:{} p{} ({})", s.node, s.port, s.priority, fmt_time(held));
            if s.dropped_intervals > 0 {
                name.push_str(&format!(" +{} more", s.dropped_intervals));
            }
            p.label(l - 4.0, y0 + row_h - 5.0, "end", &name);
            // Merge intervals closer than half a pixel: same picture, fewer
            // elements.
            let px_ps = end * 1e6 / p.area_width() / 2.0;
            let mut bar = |(a, b): (u64, u64)| {
                p.span(
                    a as f64 / 1e6,
                    b as f64 / 1e6,
                    y0,
                    y0 + row_h - 4.0,
                    color(i),
                )
            };
            let mut cur: Option<(u64, u64)> = None;
            for &(a, b) in &s.intervals {
                cur = match cur {
                    Some((ca, cb)) if (a as f64) - (cb as f64) <= px_ps => Some((ca, cb.max(b))),
                    Some(done) => {
                        bar(done);
                        Some((a, b))
                    }
                    None => Some((a, b)),
                };
            }
            if let Some(done) = cur {
                bar(done);
            }
        }
        out.push_str(&p.finish());
        out.push('\n');
    }
    out.push_str("</div>\n");
    out
}

/// Most rows of one PAUSE timeline.
const MAX_PAUSE_ROWS: usize = 40;

/// Time the recorded intervals of `s` add up to.
fn held_ps(s: &sim::results::PauseSeries) -> u64 {
    s.intervals.iter().map(|iv| iv.1.saturating_sub(iv.0)).sum()
}

/// FCT CDF of every variant on one plot, log time axis.
fn fct_cdf(rs: &[RunResult]) -> String {
    let fcts: Vec<Vec<u64>> = rs
        .iter()
        .map(|r| {
            let mut v: Vec<u64> = r.flows.iter().filter_map(|f| f.fct_ps).collect();
            v.sort_unstable();
            v
        })
        .collect();
    let all = fcts.iter().flatten();
    let (lo, hi) = all.fold((u64::MAX, 0), |(a, b), &v| (a.min(v), b.max(v)));
    if hi == 0 {
        return "<p class=\"note\">No flow completed (or flows were not recorded): no FCT \
                distribution.</p>\n"
            .to_string();
    }
    let x = Axis::log(lo.max(1) as f64 / 1e6, hi as f64 / 1e6);
    let mut p = Plot::new(
        640,
        320,
        "FCT CDF (all variants)",
        x,
        Axis::linear(0.0, 1.0),
    );
    p.axes(
        "flow completion time (us, log scale)",
        "fraction of flows",
        &num,
        &|v| format!("{v:.1}"),
    );
    let mut legend = Vec::new();
    for (i, (r, v)) in rs.iter().zip(&fcts).enumerate() {
        if v.is_empty() {
            continue;
        }
        let n = v.len() as f64;
        // A step per completed flow, at most about 1000 steps.
        let stride = v.len().div_ceil(1000).max(1);
        let mut pts = vec![(v[0] as f64 / 1e6, 0.0)];
        let mut k = 0;
        while k < v.len() {
            let j = (k + stride).min(v.len()) - 1;
            let t = v[j] as f64 / 1e6;
            pts.push((t, k as f64 / n));
            pts.push((t, (j + 1) as f64 / n));
            k = j + 1;
        }
        p.polyline(&pts, color(i), &r.summary.variant);
        legend.push((r.summary.variant.clone(), color(i)));
    }
    p.legend(&legend);
    let mut out = p.finish();
    out.push('\n');
    out
}

/// Throughput of each completed flow (size over FCT), by flow id.
fn flow_throughput(rs: &[RunResult]) -> String {
    let per: Vec<Vec<(f64, f64)>> = rs
        .iter()
        .map(|r| {
            let stride = r.flows.len().div_ceil(2000).max(1);
            r.flows
                .iter()
                .step_by(stride)
                .filter_map(|f| {
                    let fct = f.fct_ps.filter(|&t| t > 0)?;
                    Some((
                        f64::from(f.id),
                        f.size as f64 * 8.0 / (fct as f64 / 1e12) / 1e9,
                    ))
                })
                .collect()
        })
        .collect();
    let n = rs.iter().map(|r| r.flows.len()).max().unwrap_or(0);
    let ymax = per.iter().flatten().map(|p| p.1).fold(0.0, f64::max);
    if per.iter().all(Vec::is_empty) {
        return "<p class=\"note\">No completed flow recorded: no per-flow throughput.</p>\n"
            .to_string();
    }
    let x = Axis::linear(-0.5, n as f64 - 0.5);
    let mut p = Plot::new(640, 300, "Per-flow throughput", x, Axis::zero_to(ymax));
    p.axes("flow id", "Gbit/s (size / FCT)", &num, &num);
    let mut legend = Vec::new();
    for (i, (r, pts)) in rs.iter().zip(&per).enumerate() {
        p.markers(pts, color(i), &r.summary.variant);
        legend.push((r.summary.variant.clone(), color(i)));
    }
    p.legend(&legend);
    let mut out = p.finish();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_sizes_read_naturally() {
        assert_eq!(fmt_time(0), "0 ps");
        assert_eq!(fmt_time(1_307_000_000), "1.307 ms");
        assert_eq!(fmt_time(68_363_000_000), "68.36 ms");
        assert_eq!(fmt_time(999), "999 ps");
        assert_eq!(fmt_rate(97.86e9), "97.86 Gbit/s");
        assert_eq!(bytes_tick(1_500_000.0, 1e7), "1.5 MB");
        assert_eq!(bytes_tick(0.0, 500.0), "0 B");
    }

    #[test]
    fn group_step_times_get_a_row_and_a_sentence() {
        let mut a = empty_run("fast");
        let mut b = empty_run("slow");
        for (r, st) in [(&mut a, Some(1_256_825_600)), (&mut b, None)] {
            r.groups.push(sim::results::GroupRecord {
                name: "grads".into(),
                kind: "ring-allreduce".into(),
                flows: 112,
                flows_completed: if st.is_some() { 112 } else { 50 },
                start_ps: Some(0),
                finish_ps: st,
                step_time_ps: st,
                ideal_ps: Some(1_120_000_000),
            });
        }
        let doc = ScenarioResults {
            scenario: "ring".into(),
            seed: 1,
            variants: vec![a, b],
        };
        let h = html(&doc);
        assert!(h.contains("data-row=\"step time grads\" data-variant=\"fast\" data-value=\"1256825600\">1.257 ms (x1.122 ideal)<"), "{h}");
        assert!(h.contains(">unfinished (50/112 flows)<"));
        let m = markdown(&doc);
        assert!(
            m.contains("| step time grads | 1.257 ms (x1.122 ideal) | unfinished (50/112 flows) |"),
            "{m}"
        );
        let text = explanation(&doc).join("\n");
        assert!(
            text.contains("1.122 times the bandwidth-only bound of 1.120 ms"),
            "{text}"
        );
        assert!(
            text.contains("slow: the grads step did not finish: 50 of its 112 flows completed.")
        );
    }

    fn empty_run(name: &str) -> RunResult {
        RunResult {
            summary: sim::results::Summary {
                variant: name.into(),
                sim_time_ps: 0,
                events: 0,
                flows_completed: 0,
                flows_total: 0,
                goodput_bps: 0.0,
                drops: 0,
                pause_frames_sent: 0,
                pause_time_ps: 0,
                ecn_marked: 0,
                cnps_sent: 0,
                retransmitted_packets: 0,
                fct_p50_ps: None,
                fct_p99_ps: None,
                max_fct_ps: None,
                makespan_ps: 0,
                bytes_delivered: 0,
                frames_sent: 0,
                stop_reason: "idle".into(),
            },
            groups: Vec::new(),
            flows: Vec::new(),
            ports: Vec::new(),
            nics: Vec::new(),
            queues: Vec::new(),
            pauses: Vec::new(),
            pfcwd_events: Vec::new(),
            pfcwd_stats: Vec::new(),
            deadlocks: Vec::new(),
            captures: Vec::new(),
        }
    }

    #[test]
    fn an_empty_run_renders_notes_instead_of_plots() {
        let doc = ScenarioResults {
            scenario: "empty".into(),
            seed: 0,
            variants: vec![empty_run("a"), empty_run("b")],
        };
        let h = html(&doc);
        assert!(h.contains("No queue was recorded"));
        assert!(h.contains("No flow completed"));
        assert!(h.contains("No completed flow recorded"));
        assert!(h.contains("a: the workload had no flows."));
        assert!(h.contains("The variants (a, b) gave the same numbers"));
        assert_eq!(h.matches("<svg").count(), 2);
        assert!(markdown(&doc).contains("| flows completed | 0 / 0 | 0 / 0 |"));
    }

    #[test]
    fn pause_timelines_keep_the_longest_rows() {
        let mut r = empty_run("v");
        r.summary.sim_time_ps = 1_000_000;
        r.summary.pause_frames_sent = 1;
        for k in 0..(MAX_PAUSE_ROWS as u64 + 5) {
            r.pauses.push(sim::results::PauseSeries {
                node: format!("n{k}"),
                port: 0,
                peer: "x".into(),
                priority: 3,
                intervals: vec![(0, 1000 + k)],
                dropped_intervals: 0,
            });
        }
        let svg = pause_plots(std::slice::from_ref(&r));
        assert!(svg.contains("40 of 45 paused rows shown"));
        assert!(svg.contains(">n44:0 p3 ("));
        assert!(!svg.contains(">n4:0 p3 ("));
        assert_eq!(svg.matches("class=\"p\"").count(), MAX_PAUSE_ROWS);
    }

    #[test]
    fn markdown_escapes_table_breakers() {
        assert_eq!(md_escape("a|b*c\nd"), "a\\|b\\*c d");
    }
}
