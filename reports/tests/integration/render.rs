//! The run report: a real (small) simulated run rendered to HTML and
//! Markdown, checked against the run's own numbers.

use std::sync::OnceLock;

use reports::render;
use sim::results::RunResult;
use sim::run::{simulate, RunOptions};
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
                let opts = RunOptions {
                    variant: v.name.clone(),
                    seed: v.seed,
                    duration: v.duration,
                    max_events: v.max_events,
                    progress: None,
                    groups: v.groups.clone(),
                    workloads: v.workloads.clone(),
                };
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
        // The shown text is the formatted value.
        let shown = format!(
            "data-value=\"{}\">{}</td>",
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
        lines
            .iter()
            .any(|l| l.starts_with("lossless avoided loss") && l.contains("lossy dropped")),
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
    assert_eq!(md.lines().filter(|l| l.starts_with("- ")).count(), n);
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
