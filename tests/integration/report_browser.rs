//! Every lesson's `report.html`, a fault's and a sweep's `sweep.html`
//! checked in headless Chromium, from the rendered layout: no script
//! errors or `console.error`, no network requests, every plot non-empty
//! with labelled axes, no text outside its plot or overflowing its box, no
//! mark or legend entry outside its canvas, no heading cut mid-sentence,
//! no section empty under its heading.
//!
//! Mechanism: Chromium's `--headless --dump-dom` on `report.html#check`.
//! The page carries its own check script (inert without `#check`); after
//! load it measures the page (`getBoundingClientRect`, `scrollWidth`,
//! `performance.getEntriesByType("resource")`) and writes a JSON verdict
//! into `<pre id="check-verdict">`, which the dumped DOM carries back.
//! This needs no DevTools-protocol client and no dependency; virtual time
//! (`--virtual-time-budget`) makes Chromium dump only once the page has
//! loaded. The lesson tests (`lessons.rs`) call [`check`] on the report
//! each lesson run writes, so every lesson is simulated once.
//!
//! Without a `chromium` binary the check prints why and passes, except
//! under CI (`CI` set), where it fails: `.ci/run` installs Debian's
//! `chromium`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::cli_sim::scratch;

/// True when running under CI.
fn under_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// The verdict of the page's check script, or `None` (after printing why)
/// when Chromium is not installed outside CI.
pub fn verdict(report: &Path) -> Option<Value> {
    let found = Command::new("chromium").arg("--version").output();
    if !found.is_ok_and(|o| o.status.success()) {
        assert!(
            !under_ci(),
            "chromium is not installed (CI requires it: .ci/run installs Debian's chromium)"
        );
        eprintln!(
            "skipping the browser check of {}: no chromium",
            report.display()
        );
        return None;
    }
    let profile = scratch(&format!(
        "chromium-{}",
        report
            .parent()
            .and_then(|p| p.parent())
            .and_then(|p| p.file_name())
            .map_or("report".into(), |n| n.to_string_lossy())
    ));
    let abs = std::fs::canonicalize(report).expect("report path");
    let url = format!("file://{}#check", abs.display());
    // Chromium loads every core: never beside the test bed's timing.
    let _alone = super::testbed::exclusive();
    let o = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--hide-scrollbars",
            "--window-size=1400,1000",
            "--virtual-time-budget=10000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(["--dump-dom", &url])
        .output()
        .expect("run chromium");
    let dom = String::from_utf8_lossy(&o.stdout);
    let start = dom.find("<pre id=\"check-verdict\">").unwrap_or_else(|| {
        panic!(
            "{}: no check verdict in the dumped page (status {}): {}",
            report.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        )
    }) + "<pre id=\"check-verdict\">".len();
    let end = start + dom[start..].find("</pre>").expect("verdict end");
    let json = dom[start..end]
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    Some(serde_json::from_str(&json).expect("verdict JSON"))
}

/// Assert that `report` passes the browser check: at least one plot, and
/// nothing in any of the verdict's lists.
pub fn check(report: &Path) {
    let Some(v) = verdict(report) else { return };
    assert!(
        v["plots"].as_u64().unwrap_or(0) > 0,
        "{}: no plot: {v}",
        report.display()
    );
    for key in [
        "errors",
        "requests",
        "empty_plots",
        "unlabelled_plots",
        "overflow",
        "off_canvas",
        "cut_headings",
        "empty_sections",
    ] {
        let list = v[key].as_array().expect("verdict list");
        assert!(list.is_empty(), "{}: {key}: {list:#?}", report.display());
    }
}

/// The check is not blind: a report spoiled with a script error, a
/// fetched image, an empty plot, an unlabelled axis and overflowing text
/// fails on each count.
#[test]
fn the_browser_check_catches_a_spoiled_report() {
    let dir = scratch("browser-check-spoiled");
    let o = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .current_dir(&dir)
        .args(["lesson", "1", "--out", "out", "--quiet"])
        .output()
        .expect("run rocelab");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let report = dir.join("out/report.html");
    let good = std::fs::read_to_string(&report).unwrap();
    let spoiled = good.replacen(
        "</body>",
        "<img src=\"http://127.0.0.1:9/pixel.png\" alt=\"\">\
             <script>console.error(\"spoiled\"); undefinedFunction();</script>\
             <svg class=\"plot\" width=\"100\" height=\"50\"><title>empty one</title>\
             <text class=\"xl\" x=\"90\" y=\"20\">a label far too long for this box</text></svg>\
             <table><tr><td style=\"max-width:40px;overflow:hidden;white-space:nowrap\">\
             wide-cell-text-that-cannot-wrap-anywhere</td></tr></table>\
             <svg class=\"plot\" width=\"100\" height=\"50\"><title>legend off</title>\
             <rect x=\"-785\" y=\"5\" width=\"10\" height=\"10\"/><circle cx=\"50\" cy=\"25\" r=\"2\"/>\
             <text class=\"xl\" x=\"50\" y=\"40\">x</text><text class=\"yl\" x=\"5\" y=\"20\">y</text></svg>\
             <h2>Fault: corruption. Every 100th frame sw0 sends to h0 arrives with a bad</h2><p>x</p>\
             <h2>The empty one</h2><h2>Last</h2><p>y</p></body>",
        1,
    );
    let bad = dir.join("out/spoiled.html");
    std::fs::write(&bad, spoiled).unwrap();
    let Some(v) = verdict(&bad) else { return };
    let text = v.to_string();
    assert!(text.contains("spoiled"), "{v}");
    assert!(text.contains("undefinedFunction"), "{v}");
    // Listed twice: the request Chromium made, and the element asking.
    assert_eq!(text.matches("127.0.0.1:9/pixel.png").count(), 2, "{v}");
    assert_eq!(v["empty_plots"], serde_json::json!(["empty one"]), "{v}");
    assert_eq!(
        v["unlabelled_plots"],
        serde_json::json!(["empty one"]),
        "{v}"
    );
    assert!(text.contains("a label far too long"), "{v}");
    assert!(text.contains("wide-cell-text"), "{v}");
    let off = v["off_canvas"].to_string();
    assert!(off.contains("legend off: rect"), "{v}");
    assert_eq!(off.matches("legend off").count(), 1, "{v}");
    let cut = v["cut_headings"].to_string();
    assert!(cut.contains("arrives with a bad"), "{v}");
    assert_eq!(v["cut_headings"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(
        v["empty_sections"],
        serde_json::json!(["H2 'The empty one'"]),
        "{v}"
    );
}

/// Run `rocelab` with `args` in `dir`; it must succeed.
fn rocelab(dir: &Path, args: &[&str]) {
    let o = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run rocelab");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

/// A scenario path from the repository root.
fn scenario(rel: &str) -> String {
    format!("{}/scenarios/{rel}", env!("CARGO_MANIFEST_DIR"))
}

/// A fault's report: its title is the first sentence of its header
/// comment, never a line cut mid-sentence, and every section has content.
#[test]
fn a_fault_report_has_a_whole_title_and_no_empty_section() {
    let dir = scratch("browser-check-fault");
    rocelab(
        &dir,
        &[
            "run",
            &scenario("faults/corruption.toml"),
            "--out",
            "out",
            "--quiet",
        ],
    );
    let report = dir.join("out/report.html");
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("<h1>Fault: corruption</h1>"), "{html}");
    check(&report);
}

/// A sweep's page: every series of every plot in a legend on its canvas.
#[test]
fn a_sweep_page_keeps_every_legend_entry_on_its_canvas() {
    let dir = scratch("browser-check-sweep");
    rocelab(
        &dir,
        &[
            "sweep",
            &scenario("sweeps/incast-buffer.toml"),
            "--out",
            "sw",
        ],
    );
    let page = dir.join("sw/sweep.html");
    let html = std::fs::read_to_string(&page).unwrap();
    // Six series (3 fan-ins x 2 variants), each named in all five plots.
    assert_eq!(
        html.matches(">workload[0].senders=7 lossy</text>").count(),
        5
    );
    check(&page);
}
