//! The run report: one self-contained `report.html` (inline CSS and SVG,
//! no external resources; its one inline script is a self-check that runs
//! only when the page is opened as `report.html#check`) or a Markdown
//! summary, rendered from a run's `results.json` ([`ScenarioResults`]: one
//! [`RunResult`] per variant) and, from `rocelab run`, a [`Context`]: the
//! scenario file's narrative, each variant's thresholds and its ground
//! truth (the scenario's `[diagnosis]`: the cause it injects, the healthy
//! baseline, the fix, the victim workload), which the explanation uses.
//!
//! Reading order: flows left unfinished first ([`unfinished`]: how many,
//! of which workloads, why the run stopped; the FCT percentiles and the
//! makespan in the table then carry the count of flows they cover), then
//! the lesson's point (title: the narrative's whole first sentence,
//! [`Context::title`]; question; the key numbers of this run from
//! [`context::key_numbers`]; the narrative, with no heading when there is
//! none), then the evidence. Every time axis spans the same range (the
//! longest variant's run); each variant has one colour in every report
//! ([`kinds`]: faulty red and fixed purple only as the scenario's ground
//! truth says; lossless blue, lossy orange, congestion control green by
//! name; a second variant of a colour gets a spare one); labels, marks
//! and legends are kept on their canvas, and anything left out or
//! aggregated is said on the plot.
//!
//! Contents: a summary table with the variants side by side, the
//! plain-language explanation ([`explain`]), and plots: queue depth over
//! time for every recorded queue (one panel per variant, same depth
//! scale), PAUSE timelines (one row per paused port and priority, from
//! `pauses`), who paused whom on the topology ([`topology`], by tier and
//! pod past a size), the FCT CDF of every variant on one log-scale plot,
//! throughput over time of the flows the scenario names ([`rates`]) and
//! per-flow throughput. When a run found PFC deadlocks or its PFC
//! watchdog saw storms, both forms list them ([`fabric_event_tables`]):
//! each deadlock's priority, when it formed and was detected, and its
//! member queues; each storm detected / restored event per switch port
//! and priority. A run with perftest workloads gets, before the other
//! plots, bandwidth (or latency) against message size with each size's
//! bound and limit and a table per variant ([`perftest`]); its sizes are
//! not listed as steps. nccl-tests workloads get busbw against size
//! beside NCCL's model ([`collectives`]); training jobs their steps as
//! compute and exposed communication, the collective exposed longest and,
//! with several jobs, what each cost the others ([`training`]). The
//! Markdown form has the tables and the explanation.
//!
//! Contract: the output depends only on the input (no clock, no
//! environment), so the same results give byte-identical reports. Every
//! text taken from the input is escaped. Rendering never panics; missing
//! data (no flows, no queues, no pauses recorded) shows as a note instead
//! of a plot. Each summary cell carries the exact value in `data-value`
//! (integers as written in `results.json`; times in ps, rates in bit/s).

pub mod collectives;
pub mod context;
pub mod evidence;
pub mod explain;
mod format;
pub mod kinds;
mod load;
pub mod perftest;
pub mod rates;
pub mod svg;
pub mod sweep;
pub mod topology;
pub mod training;
pub mod unfinished;
pub mod zoom;

use std::fmt::Write as _;

use sim::results::RunResult;
use sim::scenario::ScenarioResults;

pub use context::{load_context, narrative_of, Context, Threshold, CONTEXT_FILE};
use format::{bytes_tick, md_escape};
pub use format::{fmt_rate, fmt_time};
use kinds::{legend_html, variant_colors};
pub use load::{load, LoadError};
use svg::{decimate, escape, num, Axis, Plot};

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
    /// A number over finished flows only: with how many it covers when
    /// some flow did not finish.
    fn over(r: &RunResult, (exact, shown): (String, String)) -> (String, String) {
        match unfinished::Unfinished::of(r) {
            Some(u) if r.summary.flows_completed > 0 => (exact, format!("{shown} ({})", u.over())),
            _ => (exact, shown),
        }
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
        ("pause time (sum)", |r| {
            let (exact, shown) = t(r.summary.pause_time_ps);
            match unfinished::pause_sum_note(r) {
                Some(note) => (exact, format!("{shown} ({note})")),
                None => (exact, shown),
            }
        }),
        ("ECN marked", |r| n(r.summary.ecn_marked)),
        ("CNPs sent", |r| n(r.summary.cnps_sent)),
        ("retransmitted packets", |r| {
            n(r.summary.retransmitted_packets)
        }),
        ("FCT p50", |r| over(r, ot(r.summary.fct_p50_ps))),
        ("FCT p99", |r| over(r, ot(r.summary.fct_p99_ps))),
        ("FCT max", |r| over(r, ot(r.summary.max_fct_ps))),
        ("makespan", |r| {
            let s = &r.summary;
            if s.flows_completed == 0 && s.flows_total > 0 {
                return (s.makespan_ps.to_string(), "none finished".to_string());
            }
            over(r, t(s.makespan_ps))
        }),
        ("simulated time", |r| t(r.summary.sim_time_ps)),
    ]
}

/// Rows for the step time of each dependent group (ring all-reduce,
/// triggered imports), by group name in first-seen order: label, then per
/// variant the exact value (ps, empty when absent) and the shown one.
fn group_rows(doc: &ScenarioResults) -> Vec<(String, Vec<(String, String)>)> {
    let mut names: Vec<&str> = Vec::new();
    for r in &doc.variants {
        // perftest's sizes have their own section and tables.
        for g in r
            .groups
            .iter()
            .filter(|g| g.kind != perftest::PERFTEST_GROUP)
        {
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

/// All explanation sentences, without ground truth ([`explanation_with`]
/// with [`Context::default`]).
pub fn explanation(doc: &ScenarioResults) -> Vec<String> {
    explanation_with(doc, &Context::default())
}

/// All explanation sentences: per variant, then the comparison, using
/// each variant's ground truth from `ctx` where the scenario states one.
pub fn explanation_with(doc: &ScenarioResults, ctx: &Context) -> Vec<String> {
    let truth = |i: usize| ctx.diagnoses.get(i).and_then(Option::as_ref);
    let mut out: Vec<String> = doc
        .variants
        .iter()
        .enumerate()
        .flat_map(|(i, r)| explain::variant_with(r, truth(i)))
        .collect();
    out.extend(explain::comparison_with(&doc.variants, &ctx.diagnoses));
    out
}

const CSS: &str = "body{font-family:sans-serif;margin:2em;max-width:1200px;color:#222}\
table{border-collapse:collapse;margin:1em 0}\
th,td{border:1px solid #ccc;padding:4px 10px;text-align:right}\
th:first-child,td:first-child{text-align:left}\
table.perftest th,table.perftest td{padding:2px 6px}\
table.perftest caption{text-align:left;padding-bottom:4px}\
.row{display:flex;flex-wrap:wrap;gap:12px}\
svg.plot{font-size:11px;border:1px solid #eee}\
svg .t{font-weight:bold;font-size:12px}\
svg .g{stroke:#eee}\
svg .f{fill:none;stroke:#888}\
svg .s{fill:none;stroke-width:1.5}\
.note{color:#666}\
.key .sw{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px}\
#lesson{border-left:4px solid #1f77b4;padding-left:1em}\
#unfinished{border-left:4px solid #d62728;padding-left:1em}\
#lesson .q{font-size:1.15em}";

/// The page's self-check, run only when the page is opened with
/// `#check` (the report test opens it so in headless Chromium): it
/// records script errors and `console.error` calls from the start, and
/// after load writes a JSON verdict into `<pre id="check-verdict">`:
/// resources fetched (`performance` entries; a report needs none), plots
/// without data marks or axis labels, and texts whose rendered box
/// leaves their plot or whose content overflows its element.
pub(crate) const CHECK_JS: &str = include_str!("check.js");

/// The whole report as one HTML page, without a scenario narrative or
/// thresholds ([`html_with`] with [`Context::default`]).
pub fn html(doc: &ScenarioResults) -> String {
    html_with(doc, &Context::default())
}

/// The whole report as one HTML page: the scenario's point first (its
/// narrative and the key numbers of this run), then the evidence.
pub fn html_with(doc: &ScenarioResults, ctx: &Context) -> String {
    let mut h = String::new();
    let title = format!("rocelab report: {}", doc.scenario);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n<script>{CHECK_JS}</script>\n</head>\n<body>\n<h1>{}</h1>\n\
         <p>Seed {}; {} variant{}: {}.</p>\n",
        escape(&title),
        escape(&ctx.title().unwrap_or_else(|| title.clone())),
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
    h.push_str(&unfinished_html(doc));
    h.push_str(&lesson_html(doc, ctx));
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
    for s in explanation_with(doc, ctx) {
        let _ = writeln!(h, "<li>{}</li>", escape(&s));
    }
    h.push_str("</ul>\n");
    // Deadlocks and watchdog events, when there are any.
    for t in fabric_event_tables(&doc.variants) {
        let _ = writeln!(h, "<h2>{}</h2>", escape(t.title));
        if let Some(note) = &t.note {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(note));
        }
        let _ = write!(h, "<table id=\"{}\">\n<thead><tr>", t.id);
        for c in t.head {
            let _ = write!(h, "<th>{}</th>", escape(c));
        }
        h.push_str("</tr></thead>\n<tbody>\n");
        for row in &t.rows {
            h.push_str("<tr>");
            for c in row {
                let _ = write!(h, "<td>{}</td>", escape(c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</tbody>\n</table>\n");
    }
    // Plots.
    let colors = variant_colors(&doc.variants, &ctx.diagnoses);
    h.push_str(&legend_html(&doc.variants, &ctx.diagnoses));
    h.push_str(&perftest::section_html(&doc.variants, &colors));
    h.push_str(&collectives::section_html(&doc.variants, &colors));
    h.push_str(&training::section_html(&doc.variants, &colors));
    h.push_str("<h2>Queue depth</h2>\n");
    h.push_str(
        "<p class=\"note\">All time axes of the report span the same range: the \
         longest variant's run. Dashed lines are the variant's thresholds: Kmin and Kmax \
         (ECN marking on this egress queue) and XOFF and XON (PFC, counted per ingress \
         port, so drawn for scale; a dynamic PFC threshold moves with the free buffer and \
         is not drawn).</p>\n",
    );
    h.push_str(&queue_plots(&doc.variants, &ctx.thresholds, &colors));
    h.push_str("<h2>PAUSE timelines</h2>\n");
    h.push_str(
        "<p class=\"note\">One row per port and priority whose transmitter was held off \
         by PAUSE from its peer; a bar is one held-off interval.</p>\n",
    );
    h.push_str(&pause_plots(&doc.variants, &colors));
    h.push_str("<h2>Who paused whom</h2>\n<div class=\"row\">\n");
    for (i, r) in doc.variants.iter().enumerate() {
        match topology::pause_map(r, i, colors[i]) {
            Some(svg) => h.push_str(&svg),
            None => {
                let _ = write!(
                    h,
                    "<p class=\"note\">{}: no ports recorded (<code>[record] ports</code>): \
                     no map.</p>",
                    escape(&r.summary.variant)
                );
            }
        }
        h.push('\n');
    }
    h.push_str("</div>\n");
    h.push_str("<h2>Flow completion times</h2>\n");
    h.push_str(&fct_cdf(&doc.variants, &colors));
    h.push_str("<h2>Throughput over time</h2>\n");
    h.push_str(&rates::flow_rate_plots(
        &doc.variants,
        ctx,
        time_end_us(&doc.variants),
        ZOOM_COLUMNS,
    ));
    h.push_str("<h2>Per-flow throughput</h2>\n");
    h.push_str(&flow_throughput(&doc.variants, &colors));
    if h.contains("<div class=\"zoom\"") {
        h.push_str(&zoom::scripts());
    }
    h.push_str("</body>\n</html>\n");
    h
}

/// The summary table and the explanation as Markdown, without a
/// scenario narrative ([`markdown_with`] with [`Context::default`]).
pub fn markdown(doc: &ScenarioResults) -> String {
    markdown_with(doc, &Context::default())
}

/// The scenario's point (narrative and key numbers), the summary table
/// and the explanation as Markdown.
pub fn markdown_with(doc: &ScenarioResults, ctx: &Context) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# rocelab report: {}\n", md_escape(&doc.scenario));
    if let Some(t) = ctx.title() {
        let _ = writeln!(m, "## {}\n", md_escape(&t));
    }
    let unfinished = unfinished_lines(doc);
    if !unfinished.is_empty() {
        m.push_str("### Flows left unfinished\n\n");
        for l in unfinished {
            let _ = writeln!(m, "- {}", md_escape(&l));
        }
        m.push('\n');
    }
    if let Some(q) = ctx.header("Question") {
        let _ = writeln!(m, "**Question:** {}\n", md_escape(q));
    }
    if !ctx.narrative.is_empty() {
        m.push_str("### Key numbers of this run\n\n");
        for k in context::key_numbers(&doc.variants, &ctx.diagnoses) {
            let _ = writeln!(m, "- {}", md_escape(&k));
        }
        m.push('\n');
        for para in ctx.paragraphs() {
            match para.strip_prefix("* ") {
                Some(item) => {
                    let _ = writeln!(m, "- {}\n", md_escape(item));
                }
                None => {
                    let _ = writeln!(m, "{}\n", md_escape(&para));
                }
            }
        }
    }
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
    for s in explanation_with(doc, ctx) {
        let _ = writeln!(m, "- {}", md_escape(&s));
    }
    let colors = variant_colors(&doc.variants, &ctx.diagnoses);
    m.push_str(&perftest::section_markdown(&doc.variants, &colors));
    m.push_str(&collectives::section_markdown(&doc.variants, &colors));
    m.push_str(&training::section_markdown(&doc.variants, &colors));
    for t in fabric_event_tables(&doc.variants) {
        let _ = writeln!(m, "\n## {}\n", t.title);
        if let Some(note) = &t.note {
            let _ = writeln!(m, "{}\n", md_escape(note));
        }
        let _ = writeln!(m, "| {} |", t.head.join(" | "));
        let _ = writeln!(m, "|{}", "---|".repeat(t.head.len()));
        for row in &t.rows {
            let cells: Vec<String> = row.iter().map(|c| md_escape(c)).collect();
            let _ = writeln!(m, "| {} |", cells.join(" | "));
        }
    }
    m
}

/// Most rows of one fabric event table; later rows are only counted.
const MAX_EVENT_ROWS: usize = 200;

/// A table of fabric events, shared by the HTML and Markdown forms.
struct EventTable {
    /// Heading.
    title: &'static str,
    /// HTML id of the table.
    id: &'static str,
    /// Column names.
    head: &'static [&'static str],
    /// Cells, plain text (escaped by the writer).
    rows: Vec<Vec<String>>,
    /// Rows left out past [`MAX_EVENT_ROWS`], when some were.
    note: Option<String>,
}

/// The deadlock table and the PFC watchdog event table, each only when
/// some variant has entries (healthy runs show neither).
fn fabric_event_tables(rs: &[RunResult]) -> Vec<EventTable> {
    let mut out = Vec::new();
    let deadlocks: Vec<Vec<String>> = rs
        .iter()
        .flat_map(|r| {
            r.deadlocks.iter().map(move |d| {
                let members: Vec<String> = d
                    .members
                    .iter()
                    .map(|q| format!("{} port {} (to {})", q.node, q.port, q.peer))
                    .collect();
                vec![
                    r.summary.variant.clone(),
                    d.priority.to_string(),
                    fmt_time(d.formed_ps),
                    fmt_time(d.detected_ps),
                    members.len().to_string(),
                    members.join(", "),
                ]
            })
        })
        .collect();
    let events: Vec<Vec<String>> = rs
        .iter()
        .flat_map(|r| {
            r.pfcwd_events.iter().map(move |e| {
                vec![
                    r.summary.variant.clone(),
                    fmt_time(e.time_ps),
                    format!("{} port {}", e.node, e.port),
                    e.peer.clone(),
                    e.priority.to_string(),
                    e.event.clone(),
                    e.action.clone(),
                ]
            })
        })
        .collect();
    let mut table = |title, id, head, mut rows: Vec<Vec<String>>| {
        if rows.is_empty() {
            return;
        }
        let note = (rows.len() > MAX_EVENT_ROWS).then(|| {
            format!(
                "The first {MAX_EVENT_ROWS} of {} rows are shown; results.json has them all.",
                rows.len()
            )
        });
        rows.truncate(MAX_EVENT_ROWS);
        out.push(EventTable {
            title,
            id,
            head,
            rows,
            note,
        });
    };
    table(
        "PFC deadlocks",
        "deadlocks",
        &[
            "variant",
            "priority",
            "formed",
            "detected",
            "queues",
            "members (switch egress queues held off in a cycle)",
        ],
        deadlocks,
    );
    table(
        "PFC watchdog events",
        "pfcwd-events",
        &[
            "variant",
            "time",
            "switch port",
            "peer",
            "priority",
            "event",
            "action",
        ],
        events,
    );
    out
}

/// Flows left unfinished, before anything else: per variant that left
/// some, how many, of which workloads and why the run stopped. Empty when
/// every flow of every variant completed.
fn unfinished_html(doc: &ScenarioResults) -> String {
    let lines = unfinished_lines(doc);
    if lines.is_empty() {
        return String::new();
    }
    let mut h = String::from("<section id=\"unfinished\">\n<h2>Flows left unfinished</h2>\n<ul>\n");
    for l in lines {
        let _ = writeln!(h, "<li>{}</li>", escape(&l));
    }
    h.push_str("</ul>\n</section>\n");
    h
}

/// One sentence per variant that left flows unfinished
/// ([`unfinished::Unfinished::sentence`]).
fn unfinished_lines(doc: &ScenarioResults) -> Vec<String> {
    doc.variants
        .iter()
        .filter_map(|r| unfinished::Unfinished::of(r).map(|u| u.sentence(&r.summary.variant)))
        .collect()
}

/// The lesson first: title, question, the key numbers of this run, then
/// the narrative. Empty without a narrative.
fn lesson_html(doc: &ScenarioResults, ctx: &Context) -> String {
    let mut h = String::new();
    if ctx.narrative.is_empty() {
        return h;
    }
    h.push_str("<section id=\"lesson\">\n");
    if let Some(q) = ctx.header("Question") {
        let _ = writeln!(h, "<p class=\"q\"><b>Question:</b> {}</p>", escape(q));
    }
    h.push_str("<h2>Key numbers of this run</h2>\n<ul id=\"key-numbers\">\n");
    for k in context::key_numbers(&doc.variants, &ctx.diagnoses) {
        let _ = writeln!(h, "<li>{}</li>", escape(&k));
    }
    h.push_str("</ul>\n");
    let paragraphs = ctx.paragraphs();
    if paragraphs.is_empty() {
        // A title alone is no lesson: no empty section under its heading.
        h.push_str("</section>\n");
        return h;
    }
    h.push_str("<h2>The lesson</h2>\n<div id=\"narrative\">\n");
    let mut in_list = false;
    for para in paragraphs {
        match para.strip_prefix("* ") {
            Some(item) => {
                if !in_list {
                    h.push_str("<ul>\n");
                    in_list = true;
                }
                let _ = writeln!(h, "<li>{}</li>", escape(item));
            }
            None => {
                if in_list {
                    h.push_str("</ul>\n");
                    in_list = false;
                }
                let _ = writeln!(h, "<p>{}</p>", escape(&para));
            }
        }
    }
    if in_list {
        h.push_str("</ul>\n");
    }
    h.push_str("</div>\n</section>\n");
    h
}

/// The end of the shared time axis, in us: the longest variant's run.
fn time_end_us(rs: &[RunResult]) -> f64 {
    rs.iter()
        .map(|r| {
            let q = r
                .queues
                .iter()
                .filter_map(|q| q.samples.last().map(|s| s.0))
                .max()
                .unwrap_or(0);
            r.summary.sim_time_ps.max(q)
        })
        .max()
        .unwrap_or(0)
        .max(1) as f64
        / 1e6
}

fn queue_name(node: &str, port: u16, priority: Option<u8>) -> String {
    match priority {
        Some(p) => format!("{node} port {port} priority {p}"),
        None => format!("{node} port {port}"),
    }
}

/// One row of panels per recorded queue, one panel per variant, sharing
/// the depth axis so the variants compare at a glance.
fn queue_plots(rs: &[RunResult], thresholds: &[Vec<Threshold>], colors: &[&'static str]) -> String {
    let end = time_end_us(rs);
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
    for (k, (node, port, prio)) in keys.iter().enumerate() {
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
        let applies =
            |t: &&Threshold| t.priority.is_none() || prio.is_none() || t.priority == *prio;
        let ymax = series
            .iter()
            .flat_map(|(i, _, q)| {
                q.samples.iter().map(|s| s.1).chain(
                    thresholds
                        .get(*i)
                        .into_iter()
                        .flatten()
                        .filter(applies)
                        .map(|t| t.bytes),
                )
            })
            .max()
            .unwrap_or(0);
        let y = Axis::zero_to(ymax as f64);
        out.push_str("<div class=\"row\">\n");
        let mut zoomed = Vec::new();
        for &(i, r, q) in &series {
            let x = Axis::linear(0.0, end);
            let title = format!(
                "{}: egress queue {} (bytes)",
                r.summary.variant,
                queue_name(node, *port, *prio)
            );
            let mut p = Plot::new(420, 240, &title, x, y);
            p.axes("time (us)", "bytes queued", &num, &|v| bytes_tick(v, y.max));
            for t in thresholds.get(i).into_iter().flatten().filter(applies) {
                p.hline(
                    t.bytes as f64,
                    &format!("{} {}", t.name, bytes_tick(t.bytes as f64, y.max)),
                );
            }
            let pts: Vec<(f64, f64)> = q
                .samples
                .iter()
                .map(|&(t, b)| (t as f64 / 1e6, b as f64))
                .collect();
            let cols = p.area_width() as usize;
            p.polyline(&decimate(&pts, cols), colors[i], &r.summary.variant);
            out.push_str(&p.finish());
            out.push('\n');
            zoomed.push(zoom::Series {
                name: r.summary.variant.clone(),
                color: colors[i],
                points: decimate(&pts, ZOOM_COLUMNS),
            });
        }
        out.push_str("</div>\n");
        out.push_str(&zoom::chart_html(
            &format!("zoom-queue-{k}"),
            &zoom::Chart {
                title: format!(
                    "egress queue {}, all variants: drag to zoom, double-click to reset",
                    queue_name(node, *port, *prio)
                ),
                xlabel: "time (us)".into(),
                ylabel: "bytes queued".into(),
                series: zoomed,
            },
        ));
    }
    out
}

/// One timeline per variant: a row per paused (port, priority).
fn pause_plots(rs: &[RunResult], colors: &[&'static str]) -> String {
    let end = time_end_us(rs);
    let mut out = String::from("<div class=\"row\">\n");
    for (i, r) in rs.iter().enumerate() {
        let title = format!("{}: PAUSE timeline", r.summary.variant);
        let x = Axis::linear(0.0, end);
        // The most held-off rows, shown in (node, port, priority) order.
        let mut shown: Vec<usize> = (0..r.pauses.len()).collect();
        shown.sort_by_key(|&k| std::cmp::Reverse(held_ps(&r.pauses[k])));
        shown.truncate(MAX_PAUSE_ROWS);
        shown.sort_unstable();
        let rows = shown.len();
        if rows == 0 {
            let mut p = Plot::new(520, 90, &title, x, Axis::linear(0.0, 1.0));
            p.frame();
            p.note(if r.summary.pause_frames_sent == 0 {
                "no PAUSE frames: no transmitter was held off"
            } else {
                "PAUSE frames sent, but no interval recorded (record.pause_intervals = 0?)"
            });
            out.push_str(&p.finish());
            out.push('\n');
            continue;
        }
        let row_h = 16.0;
        let names: Vec<String> = shown
            .iter()
            .map(|&k| {
                let s = &r.pauses[k];
                let mut name = format!(
                    "{}:{} p{} ({})",
                    s.node,
                    s.port,
                    s.priority,
                    fmt_time(held_ps(s))
                );
                if s.dropped_intervals > 0 {
                    name.push_str(&format!(" +{} not drawn", s.dropped_intervals));
                }
                name
            })
            .collect();
        // Room for the longest row label (about 6.5 px a character at
        // 11 px) and the rotated axis label.
        let longest = names.iter().map(|n| n.chars().count()).max().unwrap_or(0);
        let margin = 30.0 + 6.5 * longest as f64;
        let truncated: u64 = shown.iter().map(|&k| r.pauses[k].dropped_intervals).sum();
        let notes = usize::from(rows < r.pauses.len()) + usize::from(truncated > 0);
        let height = (60.0 + row_h * rows as f64 + 14.0 * notes as f64) as u32;
        let width = (margin + 380.0).max(520.0) as u32;
        let mut p = Plot::with_margin(width, height, &title, x, Axis::linear(0.0, 1.0), margin);
        p.shrink_bottom(14.0 * notes as f64);
        p.axes("time (us)", "held port", &num, &|_| String::new());
        let (l, t, rr, b) = p.area();
        let mut note_y = b + 42.0;
        if rows < r.pauses.len() {
            p.label(
                rr,
                note_y,
                "end",
                &format!(
                    "{} of {} paused rows shown (the longest held)",
                    rows,
                    r.pauses.len()
                ),
            );
            note_y += 14.0;
        }
        if truncated > 0 {
            p.label(
                rr,
                note_y,
                "end",
                &format!(
                    "truncated: {truncated} later intervals past record.pause_intervals per row not drawn"
                ),
            );
        }
        for (k, (s, name)) in shown.iter().map(|&k| &r.pauses[k]).zip(&names).enumerate() {
            let y0 = t + 2.0 + row_h * k as f64;
            p.label(l - 4.0, y0 + row_h - 5.0, "end", name);
            // Merge intervals closer than half a pixel: same picture, fewer
            // elements.
            let px_ps = end * 1e6 / p.area_width() / 2.0;
            let mut bar = |(a, b): (u64, u64)| {
                p.span(
                    a as f64 / 1e6,
                    b as f64 / 1e6,
                    y0,
                    y0 + row_h - 4.0,
                    colors[i],
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
fn fct_cdf(rs: &[RunResult], colors: &[&'static str]) -> String {
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
    let names: Vec<&str> = rs.iter().map(|r| r.summary.variant.as_str()).collect();
    let extra = 14.0 * svg::legend_rows(640, &names) as f64;
    let mut p = Plot::new(
        640,
        (320.0 + extra) as u32,
        "FCT CDF (all variants)",
        x,
        Axis::linear(0.0, 1.0),
    );
    p.shrink_bottom(extra);
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
        p.polyline(&pts, colors[i], &r.summary.variant);
        legend.push((r.summary.variant.clone(), colors[i]));
    }
    p.legend_below(&legend);
    let mut out = p.finish();
    out.push('\n');
    out
}

/// Columns of an interactive chart's data (each keeps its minimum and
/// maximum, so peaks survive until zoomed in).
const ZOOM_COLUMNS: usize = 900;

/// Throughput of each completed flow (size over FCT), by flow id.
fn flow_throughput(rs: &[RunResult], colors: &[&'static str]) -> String {
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
    let names: Vec<&str> = rs.iter().map(|r| r.summary.variant.as_str()).collect();
    let extra = 14.0 * svg::legend_rows(640, &names) as f64;
    let mut p = Plot::new(
        640,
        (300.0 + extra) as u32,
        "Per-flow throughput",
        x,
        Axis::zero_to(ymax),
    );
    p.shrink_bottom(extra);
    p.axes("flow id", "Gbit/s (size / FCT)", &num, &num);
    let mut legend = Vec::new();
    for (i, (r, pts)) in rs.iter().zip(&per).enumerate() {
        p.markers(pts, colors[i], &r.summary.variant);
        legend.push((r.summary.variant.clone(), colors[i]));
    }
    p.legend_below(&legend);
    let mut out = p.finish();
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use evidence::empty_run;

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
                ranks: Some(8),
                bytes: Some(8_000_000),
                collective: None,
                size: None,
                count: None,
                algorithm: None,
                protocol: None,
                model_ps: None,
                limit: None,
                last_host: None,
                paused: Vec::new(),
                bottleneck: None,
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

    #[test]
    fn deadlocks_and_watchdog_events_get_tables_only_when_present() {
        let healthy = ScenarioResults {
            scenario: "ok".into(),
            seed: 1,
            variants: vec![empty_run("a")],
        };
        assert!(!html(&healthy).contains("PFC deadlocks"));
        assert!(!markdown(&healthy).contains("PFC watchdog"));
        let mut r = empty_run("ring");
        r.deadlocks.push(sim::results::DeadlockRecord {
            priority: 3,
            formed_ps: 1_250_000_000,
            detected_ps: 1_300_000_000,
            members: vec![
                sim::results::QueueRef {
                    node: "s0".into(),
                    port: 1,
                    peer: "s1".into(),
                },
                sim::results::QueueRef {
                    node: "s1".into(),
                    port: 1,
                    peer: "s0".into(),
                },
            ],
        });
        for (t, ev) in [
            (2_000_000_000, "storm_detected"),
            (3_000_000_000, "storm_restored"),
        ] {
            r.pfcwd_events.push(sim::results::PfcwdEvent {
                time_ps: t,
                node: "s0".into(),
                port: 1,
                peer: "s1".into(),
                priority: 3,
                event: ev.into(),
                action: "drop".into(),
            });
        }
        let doc = ScenarioResults {
            scenario: "ring".into(),
            seed: 1,
            variants: vec![r],
        };
        let h = html(&doc);
        assert!(h.contains("<h2>PFC deadlocks</h2>"), "{h}");
        assert!(h.contains(
            "<td>ring</td><td>3</td><td>1.250 ms</td><td>1.300 ms</td><td>2</td>\
             <td>s0 port 1 (to s1), s1 port 1 (to s0)</td>"
        ));
        assert!(h.contains(
            "<td>2.000 ms</td><td>s0 port 1</td><td>s1</td><td>3</td><td>storm_detected</td><td>drop</td>"
        ));
        assert!(h.contains("storm_restored"));
        let m = markdown(&doc);
        assert!(m.contains("## PFC watchdog events"), "{m}");
        assert!(
            m.contains(
                "| ring | 3 | 1.250 ms | 1.300 ms | 2 | s0 port 1 (to s1), s1 port 1 (to s0) |"
            ),
            "{m}"
        );
        assert!(m.contains("| ring | 3.000 ms | s0 port 1 | s1 | 3 | storm\\_restored | drop |"));
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
        let svg = pause_plots(std::slice::from_ref(&r), &["#1f77b4"]);
        assert!(svg.contains("40 of 45 paused rows shown"));
        assert!(svg.contains(">n44:0 p3 ("));
        assert!(!svg.contains(">n4:0 p3 ("));
        assert_eq!(svg.matches("class=\"p\"").count(), MAX_PAUSE_ROWS);
    }

    #[test]
    fn a_variant_kind_keeps_its_colour_and_a_second_one_gets_a_spare() {
        let rs: Vec<RunResult> = ["lossy", "lossless-dcqcn", "lossless", "go-back-0"]
            .iter()
            .map(|n| empty_run(n))
            .collect();
        assert_eq!(
            variant_colors(&rs, &[]),
            vec!["#ff7f0e", "#2ca02c", "#1f77b4", kinds::SPARE[0]]
        );
    }

    #[test]
    fn time_axes_are_shared_and_thresholds_drawn_with_the_lesson_first() {
        let mut a = empty_run("lossless");
        let mut b = empty_run("lossy");
        a.summary.sim_time_ps = 1_000_000_000; // 1 ms
        b.summary.sim_time_ps = 100_000_000_000; // 100 ms
        for r in [&mut a, &mut b] {
            r.queues.push(sim::results::QueueSeries {
                node: "sw".into(),
                port: 0,
                priority: Some(3),
                interval_ps: 10_000,
                samples: vec![(0, 0), (500_000_000, 300_000)],
            });
        }
        let doc = ScenarioResults {
            scenario: "s".into(),
            seed: 1,
            variants: vec![a, b],
        };
        let ctx = Context {
            narrative: narrative_of("# Lesson 9: T\n# Question: Q?\n#\n# Body.\n"),
            thresholds: vec![
                vec![Threshold {
                    name: "Kmin".into(),
                    bytes: 400_000,
                    priority: Some(3),
                }],
                Vec::new(),
            ],
            diagnoses: Vec::new(),
        };
        let h = html_with(&doc, &ctx);
        // Both queue panels end at the longer run's 100 ms: the last tick
        // is 100000 us, kept on the canvas (centre at most 420 - 23.5).
        let last = "x=\"398.5\" y=\"218.0\" text-anchor=\"middle\">100000</text>";
        assert_eq!(h.matches(last).count(), 2, "{h}");
        assert_eq!(h.matches(">Kmin 400 KB</text>").count(), 1);
        let lesson = h.find("id=\"lesson\"").unwrap();
        assert!(lesson < h.find("id=\"summary\"").unwrap());
        assert!(h.contains("<b>Question:</b> Q?"));
        assert!(h.contains("<h1>Lesson 9: T</h1>"));
        assert!(h.contains("<p>Body.</p>"));
        assert!(markdown_with(&doc, &ctx).contains("**Question:** Q?"));
    }

    #[test]
    fn key_numbers_name_the_slowest_flow_and_each_workloads_worst() {
        let mut r = empty_run("lossless");
        let flow = |id: u32, src: &str, dst: &str, workload: &str, fct: u64, sd: f64| {
            sim::results::FlowRecord {
                id,
                src: src.into(),
                dst: dst.into(),
                workload: workload.into(),
                size: 8_000_000,
                start_ps: 0,
                posted_ps: None,
                finish_ps: Some(fct),
                fct_ps: Some(fct),
                slowdown: Some(sd),
                bytes_acked: 8_000_000,
                failed: false,
            }
        };
        r.flows = vec![
            flow(0, "h2", "h0", "incast", 9_104_000_000, 13.8),
            flow(1, "h3", "h0", "incast", 8_000_000_000, 12.1),
            flow(14, "h15", "h1", "victim", 5_700_000_000, 8.66),
        ];
        r.summary.flows_total = 3;
        r.summary.flows_completed = 3;
        r.summary.pause_frames_sent = 2995;
        r.summary.pause_time_ps = 30_560_000_000;
        let k = context::key_numbers(std::slice::from_ref(&r), &[]);
        assert_eq!(
            k,
            vec![
                "lossless: the slowest flow is flow 0 h2 -> h0 (incast, 8000000 bytes): 9.104 ms \
                 against 659.7 us alone, 13.8 times its ideal; slowest of victim: flow 14 h15 -> \
                 h1, 5.700 ms (8.7 times its ideal) (2995 PAUSE frames held transmitters for \
                 30.56 ms in all)."
            ]
        );
    }

    #[test]
    fn markdown_escapes_table_breakers() {
        assert_eq!(md_escape("a|b*c\nd"), "a\\|b\\*c d");
    }
}
