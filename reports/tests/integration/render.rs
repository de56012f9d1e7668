//! The run report: a real (small) simulated run rendered to HTML and
//! Markdown, checked against the run's own numbers.

use std::sync::OnceLock;

use reports::render;
use sim::results::RunResult;
use sim::run::simulate;
use sim::scenario::{self, ScenarioResults};
use sim::topology::Routes;

use crate::fixture_path;

/// The tiny incast scenario, every variant simulated once per test binary.
pub(crate) fn tiny() -> &'static ScenarioResults {
    static DOC: OnceLock<ScenarioResults> = OnceLock::new();
    DOC.get_or_init(|| {
        let sc = scenario::load(&fixture_path("render/tiny-incast.toml")).unwrap();
        let variants: Vec<RunResult> = sc
            .variants
            .iter()
            .map(|v| {
                let topo = &sc.topologies[v.topology];
                let opts = v.run_options();
                simulate(topo, &Routes::compute(topo), &v.config, &v.flows, &opts)
                    .unwrap()
                    .0
            })
            .collect();
        ScenarioResults {
            scenario: sc.name.clone(),
            seed: sc.seed,
            variants,
        }
    })
}

fn variant<'a>(doc: &'a ScenarioResults, name: &str) -> &'a RunResult {
    doc.variants
        .iter()
        .find(|v| v.summary.variant == name)
        .unwrap()
}

/// Check that every element is closed in order; returns the tag counts.
/// Void HTML elements (`meta`) and self-closing `<x/>` need no end tag;
/// `<script>` and `<style>` hold raw text up to their end tag.
fn check_balanced(html: &str) -> std::collections::BTreeMap<String, usize> {
    let mut stack: Vec<String> = Vec::new();
    let mut counts = std::collections::BTreeMap::new();
    let mut rest = html;
    while let Some(i) = rest.find('<') {
        // Text between tags holds no stray markup characters.
        assert!(!rest[..i].contains('>'), "stray '>' in {:?}", &rest[..i]);
        rest = &rest[i + 1..];
        let end = rest.find('>').expect("unterminated tag");
        let tag = &rest[..end];
        rest = &rest[end + 1..];
        if tag.starts_with('!') {
            continue;
        }
        assert!(!tag.contains('<'), "'<' inside a tag: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            let open = stack
                .pop()
                .unwrap_or_else(|| panic!("</{name}> without start"));
            assert_eq!(open, name, "</{name}> closes <{open}>");
            continue;
        }
        let name: String = tag
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect();
        assert!(!name.is_empty(), "empty tag name in <{tag}>");
        *counts.entry(name.clone()).or_insert(0) += 1;
        if name == "script" || name == "style" {
            // Raw text up to the end tag (the inlined scripts and CSS).
            let close = format!("</{name}>");
            let end = rest
                .find(&close)
                .unwrap_or_else(|| panic!("unclosed <{name}>"));
            rest = &rest[end + close.len()..];
            continue;
        }
        if !(tag.ends_with('/') || name == "meta") {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed: {stack:?}");
    assert!(!rest.contains('>'), "stray '>' at the end");
    counts
}

/// The `data-value` of the summary cell for `row` and `variant`.
fn cell(html: &str, row: &str, variant: &str) -> String {
    let key = format!("data-row=\"{row}\" data-variant=\"{variant}\" data-value=\"");
    let i = html
        .find(&key)
        .unwrap_or_else(|| panic!("no cell {row}/{variant}"))
        + key.len();
    html[i..i + html[i..].find('"').unwrap()].to_string()
}

/// The `<svg>` element whose title starts with `title`.
fn svg<'a>(html: &'a str, title: &str) -> &'a str {
    let key = format!("<title>{title}");
    let t = html.find(&key).unwrap_or_else(|| panic!("no plot {title}"));
    let start = html[..t].rfind("<svg").unwrap();
    let end = t + html[t..].find("</svg>").unwrap();
    &html[start..end]
}

fn explanation(html: &str) -> Vec<String> {
    let s = html.find("<ul id=\"explanation\">").unwrap();
    let e = s + html[s..].find("</ul>").unwrap();
    html[s..e]
        .split("<li>")
        .skip(1)
        .map(|x| x.trim_end().trim_end_matches("</li>").to_string())
        .collect()
}

#[test]
fn the_tiny_incast_drops_only_without_pfc() {
    // The premise of the other tests.
    let doc = tiny();
    let (ll, ly) = (variant(doc, "lossless"), variant(doc, "lossy"));
    assert_eq!(ll.summary.drops, 0);
    assert!(ll.summary.pause_frames_sent > 0);
    assert!(!ll.pauses.is_empty());
    assert!(ly.summary.drops > 0);
    assert_eq!(ly.summary.pause_frames_sent, 0);
    assert!(ly.pauses.is_empty());
    // Pause intervals are ordered, inside the run, and add up to the port
    // counters (nothing was capped here).
    for s in &ll.pauses {
        assert_eq!(s.dropped_intervals, 0);
        let mut last = 0;
        for &(a, b) in &s.intervals {
            assert!(a >= last && b > a && b <= ll.summary.sim_time_ps, "{s:?}");
            last = b;
        }
        let port = ll
            .ports
            .iter()
            .find(|p| p.node == s.node && p.port == s.port)
            .unwrap();
        let held: u64 = s.intervals.iter().map(|iv| iv.1 - iv.0).sum();
        assert_eq!(
            held,
            port.prio[usize::from(s.priority)].rx_pause_duration_ps
        );
    }
    let total: u64 = ll
        .pauses
        .iter()
        .flat_map(|s| s.intervals.iter().map(|iv| iv.1 - iv.0))
        .sum();
    assert_eq!(total, ll.summary.pause_time_ps);
}

#[test]
fn summary_table_shows_the_results_numbers() {
    let doc = tiny();
    let html = render::html(doc);
    for r in &doc.variants {
        let s = &r.summary;
        let v = s.variant.as_str();
        assert_eq!(cell(&html, "drops", v), s.drops.to_string());
        assert_eq!(
            cell(&html, "pause frames sent", v),
            s.pause_frames_sent.to_string()
        );
        assert_eq!(
            cell(&html, "pause time (sum)", v),
            s.pause_time_ps.to_string()
        );
        assert_eq!(cell(&html, "ECN marked", v), s.ecn_marked.to_string());
        assert_eq!(cell(&html, "CNPs sent", v), s.cnps_sent.to_string());
        assert_eq!(
            cell(&html, "retransmitted packets", v),
            s.retransmitted_packets.to_string()
        );
        let exact = |x: Option<u64>| x.map_or(String::new(), |x| x.to_string());
        assert_eq!(cell(&html, "FCT p50", v), exact(s.fct_p50_ps));
        assert_eq!(cell(&html, "FCT p99", v), exact(s.fct_p99_ps));
        assert_eq!(cell(&html, "FCT max", v), exact(s.max_fct_ps));
        assert_eq!(
            cell(&html, "flows completed", v),
            s.flows_completed.to_string()
        );
        let g: f64 = cell(&html, "goodput", v).parse().unwrap();
        assert_eq!(g, s.goodput_bps);
        // The shown text is the formatted value, with the flows it covers
        // when some did not finish.
        let over = match s.flows_total - s.flows_completed {
            0 => String::new(),
            _ => format!(" (over {} of {} flows)", s.flows_completed, s.flows_total),
        };
        let shown = format!(
            "data-value=\"{}\">{}{over}</td>",
            s.fct_p99_ps.unwrap(),
            render::fmt_time(s.fct_p99_ps.unwrap())
        );
        assert!(html.contains(&shown), "{shown}");
    }
}

#[test]
fn every_plot_is_drawn_for_every_variant() {
    let doc = tiny();
    let html = render::html(doc);
    let counts = check_balanced(&html);
    // Queue depth: one panel per variant with a line holding the samples.
    for r in &doc.variants {
        let v = &r.summary.variant;
        let q = svg(&html, &format!("{v}: egress queue leaf0 port 0"));
        assert!(q.contains("<polyline class=\"s\""), "{v}");
        let pts = q.split("points=\"").nth(1).unwrap();
        let n = pts[..pts.find('"').unwrap()].split(' ').count();
        // Every sample, or peaks kept per pixel column for long series.
        let samples = r.queues[0].samples.len();
        if samples <= 600 {
            assert_eq!(n, samples, "{v}");
        } else {
            assert!((100..=2 * 420).contains(&n), "{v}: {n} of {samples}");
        }
        assert!(svg(&html, &format!("{v}: PAUSE timeline")).contains("<svg"));
    }
    // The lossless timeline has one labelled row per paused (port, prio)
    // and at least one bar each; the lossy one says nothing was paused.
    let ll = variant(doc, "lossless");
    let t = svg(&html, "lossless: PAUSE timeline");
    for s in &ll.pauses {
        assert!(
            t.contains(&format!(">{}:{} p{} (", s.node, s.port, s.priority)),
            "{s:?}"
        );
    }
    assert!(t.matches("class=\"p\"").count() >= ll.pauses.len());
    assert!(svg(&html, "lossy: PAUSE timeline").contains("no PAUSE frames"));
    // FCT CDF: one step line per variant on one log-scale plot.
    let cdf = svg(&html, "FCT CDF");
    for r in &doc.variants {
        assert!(cdf.contains(&format!("data-series=\"{}\"", r.summary.variant)));
    }
    assert!(cdf.contains("log scale"));
    // Per-flow throughput: one marker per completed flow.
    let tp = svg(&html, "Per-flow throughput");
    let markers = tp.matches("<circle").count();
    let completed: u64 = doc.variants.iter().map(|r| r.summary.flows_completed).sum();
    assert_eq!(markers as u64, completed);
    // Per variant: a queue panel, a PAUSE timeline and a who-paused-whom
    // map; then the FCT CDF and per-flow throughput.
    assert_eq!(counts["svg"], 3 * doc.variants.len() + 2);
    assert_eq!(counts["table"], 1);
    // Self-contained: nothing is fetched (the inline scripts have no src).
    // `url(#...)` names a marker of the same page.
    let html = html.replace("url(#", "");
    for bad in ["<script src", "<link", "src=", "@import", "url("] {
        assert!(!html.contains(bad), "{bad}");
    }
}

#[test]
fn explanation_follows_the_numbers() {
    let doc = tiny();
    let html = render::html(doc);
    let lines = explanation(&html);
    let ll = &variant(doc, "lossless").summary;
    let ly = &variant(doc, "lossy").summary;
    let of = |v: &str| -> Vec<&String> {
        lines
            .iter()
            .filter(|l| l.starts_with(&format!("{v}: ")))
            .collect()
    };
    assert!(
        of("lossless").iter().any(|l| l.contains("0 drops")
            && l.contains(&format!("{} PAUSE frames", ll.pause_frames_sent))
            && l.contains(&render::fmt_time(ll.pause_time_ps))),
        "{lines:#?}"
    );
    assert!(
        of("lossy")
            .iter()
            .any(|l| l.contains(&format!("{} frames were dropped", ly.drops))
                && l.contains(&format!("{} retransmitted", ly.retransmitted_packets))),
        "{lines:#?}"
    );
    assert!(!of("lossy").iter().any(|l| l.contains("0 drops")));
    assert!(!of("lossless").iter().any(|l| l.contains("dropped")));
    // The comparison names both.
    assert!(
        lines.iter().any(|l| l
            .starts_with("lossy against lossless (the first variant): lossy dropped")
            && l.contains("where lossless dropped none")),
        "{lines:#?}"
    );
}

#[test]
fn explanation_branches_when_nothing_drops_or_pauses() {
    let mut a = variant(tiny(), "lossless").clone();
    let mut b = a.clone();
    b.summary.variant = "copy".into();
    let doc = |a: &RunResult, b: &RunResult| ScenarioResults {
        scenario: "x".into(),
        seed: 1,
        variants: vec![a.clone(), b.clone()],
    };
    // Same numbers under two names: said once, nothing compared.
    let lines = render::explanation(&doc(&a, &b));
    let same = "The variants (lossless, copy) gave the same numbers: the settings that \
                differ did not change what happened.";
    assert!(lines.iter().any(|l| l == same), "{lines:#?}");
    assert!(!lines.iter().any(|l| l.starts_with("Goodput")));
    // No drops in either, different goodput: both said, with the ratio.
    b.summary.goodput_bps = a.summary.goodput_bps / 4.0;
    b.summary.pause_frames_sent += 1;
    let lines = render::explanation(&doc(&a, &b));
    assert!(lines
        .iter()
        .any(|l| l.starts_with("No variant dropped a frame (lossless, copy)")));
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("Goodput: lossless reached")
                && l.contains("4.0 times that of copy")),
        "{lines:#?}"
    );
    // No pauses either: nothing filled up.
    a.summary.pause_frames_sent = 0;
    a.summary.pause_time_ps = 0;
    let lines = render::explain::variant(&a);
    assert!(
        lines
            .iter()
            .any(|l| l
                == "lossless: 0 drops and no PAUSE frames: no buffer filled up enough to act."),
        "{lines:#?}"
    );
}

#[test]
fn text_from_files_is_escaped() {
    let mut r = variant(tiny(), "lossy").clone();
    r.summary.variant = "<b>\"a&b\"</b>".into();
    let doc = ScenarioResults {
        scenario: "<script>alert(1)</script>".into(),
        seed: 1,
        variants: vec![r],
    };
    let html = render::html(&doc);
    check_balanced(&html);
    assert!(!html.contains("<script>alert"));
    assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
    assert!(!html.contains("<b>"));
    assert!(html.contains("&lt;b&gt;&quot;a&amp;b&quot;&lt;/b&gt;"));
    let md = render::markdown(&doc);
    assert!(md.contains("\\<b\\>"), "{md}");
}

#[test]
fn same_results_give_the_same_bytes() {
    let doc = tiny();
    // Through the file and back, as `rocelab report` reads it.
    let dir = std::env::temp_dir().join(format!("rocelab-render-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("results.json");
    std::fs::write(&f, doc.to_json()).unwrap();
    let back = render::load(&f).unwrap();
    assert_eq!(&back, doc);
    let (h1, h2) = (render::html(doc), render::html(&back));
    assert_eq!(h1, h2);
    assert_eq!(render::markdown(doc), render::markdown(&back));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn markdown_has_the_table_and_the_explanation() {
    let doc = tiny();
    let md = render::markdown(doc);
    assert!(md.starts_with("# rocelab report: tiny-incast\n"));
    assert!(
        md.contains("| | lossless | lossy |\n|---|---:|---:|\n"),
        "{md}"
    );
    let ly = &variant(doc, "lossy").summary;
    let ll = &variant(doc, "lossless").summary;
    assert!(
        md.contains(&format!("| drops | 0 | {} |", ly.drops)),
        "{md}"
    );
    assert!(md.contains(&format!(
        "| pause frames sent | {} | 0 |",
        ll.pause_frames_sent
    )));
    let n = render::explanation(doc).len();
    let happened = &md[md.find("## What happened").unwrap()..];
    assert_eq!(happened.lines().filter(|l| l.starts_with("- ")).count(), n);
    // Unfinished flows are said before the summary, one line per variant.
    let open: Vec<&RunResult> = doc
        .variants
        .iter()
        .filter(|r| r.summary.flows_completed < r.summary.flows_total)
        .collect();
    let summary = md.find("## Summary").unwrap();
    assert_eq!(
        md[..summary]
            .lines()
            .filter(|l| l.starts_with("- "))
            .count(),
        open.len(),
        "{md}"
    );
}

#[test]
fn load_names_the_file_and_the_problem() {
    let dir = std::env::temp_dir().join(format!("rocelab-render-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("broken.json");
    std::fs::write(&f, "{\"scenario\": \"x\", \"seed\": 1, \"variants\": [{}]}").unwrap();
    let e = render::load(&f).unwrap_err().to_string();
    assert!(e.starts_with(&f.display().to_string()), "{e}");
    assert!(e.contains("missing field `summary`"), "{e}");
    std::fs::write(&f, "{\"scenario\": \"x\", \"seed\": 1, \"variants\": []}").unwrap();
    let e = render::load(&f).unwrap_err().to_string();
    assert!(e.contains("`variants` is empty"), "{e}");
    let missing = dir.join("nope.json");
    let e = render::load(&missing).unwrap_err().to_string();
    assert!(e.contains("nope.json") && e.contains("cannot read"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A pause storm at h0 that holds h1, whose other flow (the workload
/// `victim`) goes to a healthy host; healthy, stormed, and stormed with
/// the PFC watchdog (drop) as the fix. Its `[diagnosis]` tables state it.
const STORM: &str = r#"
name = "tiny-storm"
seed = 1
duration = "10ms"

[topology]
name = "star-3"
hosts = ["h0", "h1", "h3"]
switches = ["sw0"]
defaults = { rate = "100Gbps", delay = "1us", mtu = 4096 }
link = [{ a = "h0", b = "sw0" }, { a = "h1", b = "sw0" }, { a = "h3", b = "sw0" }]

[fabric.pfc]
threshold = { mode = "static", xoff = "200KB", xon = "100KB" }

[nic]
ack_timeout = 8

[record]
ports = true

[[workload]]
name = "to-h0"
kind = "perftest"
src = "h1"
dst = "h0"
size = "1MB"

[[workload]]
name = "victim"
kind = "perftest"
src = "h1"
dst = "h3"
start = "50us"
size = "1MB"

[diagnosis]
cause = "pfc-storm"
at = "h0"
summary = "h0's NIC keeps PAUSE asserted"
victim = "victim"

[[variant]]
name = "healthy"
diagnosis = { cause = "healthy" }

[[variant]]
name = "storm"
faults = [{ kind = "pause-storm", node = "h0", start = "20us", end = "3ms" }]

[[variant]]
name = "storm-watchdog"
faults = [{ kind = "pause-storm", node = "h0", start = "20us", end = "3ms" }]
fabric.pfc.watchdog = { enabled = true, detection_time = "1ms", restoration_time = "1ms", poll_interval = "500us", action = "drop" }
diagnosis = { role = "fix" }
"#;

/// The storm scenario simulated once, with its context (the variants'
/// ground truth).
fn storm() -> &'static (ScenarioResults, render::Context) {
    static DOC: OnceLock<(ScenarioResults, render::Context)> = OnceLock::new();
    DOC.get_or_init(|| {
        let sc = scenario::from_str(std::path::Path::new("tiny-storm.toml"), STORM).unwrap();
        let variants: Vec<RunResult> = sc
            .variants
            .iter()
            .map(|v| {
                let topo = &sc.topologies[v.topology];
                let opts = v.run_options();
                simulate(topo, &Routes::compute(topo), &v.config, &v.flows, &opts)
                    .unwrap()
                    .0
            })
            .collect();
        let ctx = render::Context {
            narrative: Vec::new(),
            thresholds: Vec::new(),
            diagnoses: sc.variants.iter().map(|v| v.diagnosis.clone()).collect(),
        };
        let doc = ScenarioResults {
            scenario: sc.name.clone(),
            seed: sc.seed,
            variants,
        };
        (doc, ctx)
    })
}

/// The sentences of `lines` about variant `v`.
fn about<'a>(lines: &'a [String], v: &str) -> Vec<&'a String> {
    lines
        .iter()
        .filter(|l| l.starts_with(&format!("{v}: ")))
        .collect()
}

#[test]
fn the_storm_premise_holds() {
    let (doc, _) = storm();
    let wd = variant(doc, "storm-watchdog");
    assert!(wd.summary.drops > 0);
    let by_wd: u64 = wd.pfcwd_stats.iter().map(|q| q.tx_drop + q.rx_drop).sum();
    assert_eq!(by_wd, wd.summary.drops, "every drop is the watchdog's");
    assert_eq!(variant(doc, "storm").summary.drops, 0);
    let victim = |v: &str| {
        variant(doc, v)
            .flows
            .iter()
            .find(|f| f.workload == "victim")
            .and_then(|f| f.fct_ps)
            .unwrap()
    };
    assert!(victim("storm-watchdog") < victim("storm"));
}

/// The watchdog's drops are its own, never headroom's; with the
/// scenario's ground truth the baseline is the healthy variant and the
/// watchdog is judged against the storm it cures, on the victim: what it
/// saves and what it costs.
#[test]
fn the_ground_truth_names_the_baseline_the_fix_and_the_victim() {
    let (doc, ctx) = storm();
    let lines = render::explanation_with(doc, ctx);
    let wd = variant(doc, "storm-watchdog");
    let mine = about(&lines, "storm-watchdog");
    assert!(!mine.iter().any(|l| l.contains("headroom")), "{mine:#?}");
    assert!(
        mine.iter().any(|l| l.starts_with(&format!(
            "storm-watchdog: all {} of them were dropped by the PFC watchdog, on purpose",
            wd.summary.drops
        ))),
        "{mine:#?}"
    );
    assert!(
        about(&lines, "storm")
            .iter()
            .any(|l| l.starts_with("storm: a pause storm: sw0 port 0 (PAUSE from h0)")),
        "{lines:#?}"
    );
    assert!(
        about(&lines, "storm")
            .iter()
            .any(|l| l.starts_with("storm: the scenario injects pfc-storm at h0: h0's NIC")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(
            |l| l.starts_with("storm against healthy (the healthy baseline): ")
                && l.contains("the victim (victim) took")
                && l.contains("worse")
        ),
        "{lines:#?}"
    );
    let fix = lines
        .iter()
        .find(|l| l.starts_with("storm-watchdog is storm (pfc-storm) with the remedy on: "))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(
        fix.contains("the victim (victim) finished in") && fix.contains("sooner"),
        "{fix}"
    );
    assert!(
        fix.contains(&format!(
            "the price: {n} frames dropped ({n} of them by the PFC watchdog, on purpose)",
            n = wd.summary.drops
        )),
        "{fix}"
    );
    assert!(
        !fix.contains("worse") && !fix.contains("did not save"),
        "{fix}"
    );
    // The same run through the HTML and Markdown writers.
    let html = render::html_with(doc, ctx);
    assert!(html.contains("with the remedy on"));
    let md = render::markdown_with(doc, ctx);
    assert!(md.contains("(the healthy baseline)"), "{md}");
}

/// Without ground truth the first variant is the baseline, nothing is
/// called a fix, and still no drop is blamed on headroom.
#[test]
fn without_ground_truth_the_first_variant_is_the_baseline() {
    let (doc, _) = storm();
    let lines = render::explanation(doc);
    assert!(!lines.iter().any(|l| l.contains("healthy baseline")));
    assert!(!lines.iter().any(|l| l.contains("remedy")));
    assert!(!lines.iter().any(|l| l.contains("headroom")), "{lines:#?}");
    for v in ["storm", "storm-watchdog"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{v} against healthy (the first variant): "))),
            "{v}: {lines:#?}"
        );
    }
    // Two workloads, no victim named: each one's slowest flow.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("the slowest flow of victim took")
                && l.contains("the slowest flow of to-h0 took")),
        "{lines:#?}"
    );
}

/// A PAUSE held without a break is a storm, unless the scenario says the
/// cause is a slow receiver: then it is that, and never a storm.
#[test]
fn a_stated_slow_receiver_is_never_called_a_storm() {
    let (doc, ctx) = storm();
    let r = variant(doc, "storm");
    let plain = render::explain::variant(r);
    assert!(
        plain
            .iter()
            .any(|l| l.starts_with("storm: a pause storm: ")),
        "{plain:#?}"
    );
    let mut slow = ctx.diagnoses[1].clone().unwrap();
    slow.cause = "slow-receiver".into();
    let lines = render::explain::variant_with(r, Some(&slow));
    assert!(
        !lines.iter().any(|l| l.contains(": a pause storm")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains(
            "that is the scenario's slow receiver at h0 draining slower than frames arrive, \
             not a pause storm"
        )),
        "{lines:#?}"
    );
    // Pauses that come and go are no storm either, by the numbers alone.
    let mut short = r.clone();
    for s in &mut short.pauses {
        s.intervals = (0..40u64)
            .map(|i| (i * 100_000_000, i * 100_000_000 + 60_000_000))
            .collect();
    }
    short.ports.clear();
    let lines = render::explain::variant(&short);
    assert!(
        !lines.iter().any(|l| l.contains("pause storm")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.contains("XON followed XOFF")),
        "{lines:#?}"
    );
}

/// Headroom is named only where a lossless priority counted the drops
/// (`rx_buf_discard`); a lossy priority's drops are tail drops; without
/// per-port counters the report says it cannot tell.
#[test]
fn drops_are_given_only_the_cause_their_counters_show() {
    let lossy = variant(tiny(), "lossy").clone();
    let n = lossy.summary.drops;
    let lines = render::explain::variant(&lossy);
    assert!(!lines.iter().any(|l| l.contains("headroom")), "{lines:#?}");
    let mut bare = lossy.clone();
    bare.ports.clear();
    let lines = render::explain::variant(&bare);
    assert!(
        lines.iter().any(|l| l.contains(&format!(
            "results.json holds no per-port counters ([record] ports), so where and why the \
             {n} frames were lost is not known here"
        ))),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("headroom")), "{lines:#?}");
    // The same drops counted on a lossless priority: headroom.
    let mut lossless = bare.clone();
    let mut p = variant(tiny(), "lossless").ports.first().cloned();
    if p.is_none() {
        // Ports are not recorded by the tiny scenario: make one.
        let (doc, _) = storm();
        p = variant(doc, "healthy").ports.first().cloned();
    }
    let mut p = p.expect("a port record");
    p.prio[3].rx_discards = n;
    p.prio[3].rx_buf_discard = n;
    p.rx_discards = n;
    p.pfc_priorities = Some(vec![3]);
    lossless.ports = vec![p.clone()];
    let lines = render::explain::variant(&lossless);
    assert!(
        lines.iter().any(|l| l.contains(&format!(
            "all {n} were dropped at ingress on lossless priority 3"
        )) && l.contains("headroom")),
        "{lines:#?}"
    );
    // On a priority that port runs no PFC on: a lossy priority, no headroom.
    p.pfc_priorities = Some(vec![4]);
    p.is_nic = false;
    lossless.ports = vec![p];
    for c in &mut lossless.ports[0].prio {
        c.rx_buf_discard = 0;
    }
    let lines = render::explain::variant(&lossless);
    assert!(
        lines
            .iter()
            .any(|l| l.contains(&format!("all {n} were tail-dropped on priority 3"))),
        "{lines:#?}"
    );
    assert!(!lines.iter().any(|l| l.contains("headroom")), "{lines:#?}");
}

/// Flows far apart are never "close together": by FCT for one size, by
/// slowdown when sizes differ.
#[test]
fn flows_far_apart_are_not_called_close_together() {
    let mut r = variant(tiny(), "lossless").clone();
    assert!(r.flows.len() >= 4 && r.flows.iter().all(|f| f.fct_ps.is_some()));
    let base = r.flows[0].fct_ps.unwrap();
    for (i, f) in r.flows.iter_mut().enumerate() {
        let fct = if i == 0 { base } else { 2 * base };
        f.fct_ps = Some(fct);
        f.slowdown = Some(fct as f64 / base as f64);
    }
    r.summary.fct_p50_ps = Some(2 * base);
    r.summary.fct_p99_ps = Some(2 * base);
    let lines = render::explain::variant(&r);
    assert!(
        !lines.iter().any(|l| l.contains("close together")),
        "{lines:#?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("flows were treated unevenly")
                && l.contains("2.0 times the fastest")),
        "{lines:#?}"
    );
}

/// A context written before ground truth existed (no `diagnoses`) still
/// loads and renders; a context with it round-trips.
#[test]
fn old_contexts_without_ground_truth_still_render() {
    let dir = std::env::temp_dir().join(format!("rocelab-render-ctx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(render::CONTEXT_FILE),
        "{\"narrative\": [\"Lesson 1: t\"], \"thresholds\": [[], []]}",
    )
    .unwrap();
    let ctx = render::load_context(&dir).unwrap();
    assert!(ctx.diagnoses.is_empty());
    let doc = tiny();
    assert_eq!(
        render::explanation_with(doc, &ctx),
        render::explanation(doc)
    );
    let (_, with) = storm();
    let json = serde_json::to_string(with).unwrap();
    std::fs::write(dir.join(render::CONTEXT_FILE), json).unwrap();
    assert_eq!(&render::load_context(&dir).unwrap(), with);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `ib_write_bw -a` and `ib_write_lat -a` between two hosts with the
/// NIC's host side on: a Gen4 x16 host (the wire sets large sizes) and a
/// Gen3 x8 one (PCIe does).
const PERFTEST: &str = r#"
name = "tiny-perftest"
seed = 1
duration = "1s"

[topology]
name = "pair"
hosts = ["client", "server"]
switches = ["sw0"]
defaults = { rate = "100Gbps", delay = "100ns", mtu = 4096 }
link = [{ a = "client", b = "sw0" }, { a = "server", b = "sw0" }]

[nic.host]
model = "connectx-6-dx"

[[workload]]
name = "ib_write_bw"
kind = "perftest"
test = "write_bw"
src = "client"
dst = "server"
all = true
iters = 20

[[workload]]
name = "ib_write_lat"
kind = "perftest"
test = "write_lat"
src = "client"
dst = "server"
all = true
iters = 20

[[variant]]
name = "gen4-x16"

[[variant]]
name = "gen3-x8"
nic.host = { model = "connectx-5", pcie_gen = 3, pcie_width = 8 }
"#;

/// The perftest scenario simulated once.
fn perftest_doc() -> &'static ScenarioResults {
    static DOC: OnceLock<ScenarioResults> = OnceLock::new();
    DOC.get_or_init(|| {
        let sc = scenario::from_str(std::path::Path::new("tiny-perftest.toml"), PERFTEST).unwrap();
        let variants: Vec<RunResult> = sc
            .variants
            .iter()
            .map(|v| {
                let topo = &sc.topologies[v.topology];
                let opts = v.run_options();
                simulate(topo, &Routes::compute(topo), &v.config, &v.flows, &opts)
                    .unwrap()
                    .0
            })
            .collect();
        ScenarioResults {
            scenario: sc.name.clone(),
            seed: sc.seed,
            variants,
        }
    })
}

/// The perftest records of workload `w` in `r`, in size order.
fn perftest_of<'a>(r: &'a RunResult, w: &str) -> Vec<&'a sim::results::PerftestRecord> {
    r.perftest
        .iter()
        .filter(|p| p.group.strip_suffix(&format!("-{}", p.size)) == Some(w))
        .collect()
}

/// The perftest section appears only with perftest records; it plots
/// every size of every variant's bandwidth test against its bound, names
/// the limit of each run of sizes in a strip, plots the latency test,
/// and tabulates what the records hold; the sizes are not listed as
/// steps; the same results give the same bytes.
#[test]
fn perftest_runs_are_plotted_by_size_with_their_bounds_and_limits() {
    use render::perftest::size_text;
    for doc in [tiny(), &storm().0] {
        assert!(!render::html(doc).contains("perftest by message size"));
    }
    let doc = perftest_doc();
    let html = render::html(doc);
    check_balanced(&html);
    let bw = svg(&html, "perftest bandwidth by message size");
    let lat = svg(&html, "perftest latency by message size");
    for (table, r) in doc.variants.iter().enumerate() {
        let v = &r.summary.variant;
        let recs = perftest_of(r, "ib_write_bw");
        assert_eq!(recs.len(), 23, "{v}: -a runs 2 B to 8 MiB");
        let name = format!("{v}: ib_write_bw");
        // The measured line: one point per size; the bound dashed.
        let key = format!("data-series=\"{name}\" stroke=\"");
        let line = &bw[bw
            .find(&format!(
                "<polyline class=\"s\" fill=\"none\" stroke-width=\"1.5\" {key}"
            ))
            .unwrap_or_else(|| panic!("{name}: no line"))..];
        let pts = line.split("points=\"").nth(1).unwrap();
        assert_eq!(
            pts[..pts.find('"').unwrap()].split(' ').count(),
            23,
            "{name}"
        );
        assert!(
            bw.contains(&format!("data-series=\"{name}: bound\"")),
            "{name}: no bound"
        );
        assert!(bw.contains("stroke-dasharray"));
        // One band per run of sizes with one limit, named in its title.
        let mut i = 0;
        while i < recs.len() {
            let mut j = i;
            while j + 1 < recs.len() && recs[j + 1].limit == recs[i].limit {
                j += 1;
            }
            let what = if i == j {
                format!(
                    "{name}: {} at {}",
                    recs[i].limit.text(),
                    size_text(recs[i].size)
                )
            } else {
                format!(
                    "{name}: {} from {} to {}",
                    recs[i].limit.text(),
                    size_text(recs[i].size),
                    size_text(recs[j].size)
                )
            };
            assert!(bw.contains(&format!("<title>{what}</title>")), "{what}");
            i = j + 1;
        }
        // Latency: one point per size.
        let lat_name = format!("{v}: ib_write_lat");
        assert_eq!(perftest_of(r, "ib_write_lat").len(), 23, "{lat_name}");
        assert!(
            lat.contains(&format!("data-series=\"{lat_name}\"")),
            "{lat_name}"
        );
        // The table holds the records' numbers and limits.
        let t = &html[html
            .find(&format!(
                "<table class=\"perftest\" id=\"perftest-{table}\">"
            ))
            .unwrap()..];
        let t = &t[..t.find("</table>").unwrap()];
        assert!(t.contains(&format!("<caption>{name} (write_bw")), "{t}");
        for p in &recs {
            let row = format!(
                "<tr><td data-value=\"{}\">{}</td><td data-value=\"{:.0}\">",
                p.size,
                size_text(p.size),
                p.bw_bps().unwrap()
            );
            let at = t
                .find(&row)
                .unwrap_or_else(|| panic!("{name}: no row {row}"));
            let rest = &t[at..];
            let rest = &rest[..rest.find("</tr>").unwrap()];
            assert!(
                rest.ends_with(&format!("<td>{}</td>", p.limit.text())),
                "{rest}"
            );
        }
    }
    // The wire sets gen4-x16's large sizes, PCIe gen3-x8's.
    let top = |v: &str| perftest_of(variant(doc, v), "ib_write_bw")[22].limit;
    assert_eq!(top("gen4-x16"), sim::hostmodel::Limit::Wire);
    assert_eq!(top("gen3-x8"), sim::hostmodel::Limit::Pcie);
    assert!(bw.contains(">PCIe</text>") && bw.contains(">wire</text>"));
    // Two bandwidth and two latency tables.
    assert_eq!(html.matches("<table class=\"perftest\"").count(), 4);
    // Sizes are no steps; the explanation says each workload once.
    assert!(
        !html.contains("step time ib_write_bw"),
        "perftest sizes as steps"
    );
    let lines = explanation(&html);
    for r in &doc.variants {
        let v = &r.summary.variant;
        let said: Vec<&String> = lines
            .iter()
            .filter(|l| {
                l.starts_with(&format!(
                    "{v}: perftest ib_write_bw (write_bw, 23 sizes from 2 B to 8 MiB): "
                ))
            })
            .collect();
        assert_eq!(said.len(), 1, "{v}: {lines:#?}");
        assert!(
            !lines.iter().any(|l| l.contains("ib_write_bw-2 step")),
            "{lines:#?}"
        );
    }
    let md = render::markdown(doc);
    assert!(md.contains("\n## perftest by message size\n"), "{md}");
    assert!(
        md.contains("\ngen3-x8: ib\\_write\\_bw (write\\_bw):\n"),
        "{md}"
    );
    // Through the file and back: the same bytes.
    let back: ScenarioResults = serde_json::from_str(&doc.to_json()).unwrap();
    assert_eq!(render::html(&back), html);
}
