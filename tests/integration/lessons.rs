//! The lesson library (`scenarios/lessons/`, `rocelab lessons`, `rocelab
//! lesson N`): one test per lesson, asserting the expected outcomes its
//! file states, with the tolerances it states. Each runs the lesson as a
//! user would, through `rocelab lesson N`, from a directory outside the
//! checkout (the lessons are built into the binary).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

use crate::cli_sim::{repo, rocelab, scratch};

/// `rocelab lesson N --out DIR --quiet`, run from a scratch directory
/// (not the checkout); the results and the output directory.
fn lesson(n: usize) -> (Value, PathBuf) {
    let dir = scratch(&format!("lesson-{n}"));
    let out = dir.join("out");
    let o = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .current_dir(&dir)
        .args(["lesson", &n.to_string(), "--out", "out", "--quiet"])
        .output()
        .expect("run rocelab");
    assert!(
        o.status.success(),
        "lesson {n}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    crate::report_browser::check(&out.join("report.html"));
    let text = std::fs::read_to_string(out.join("results.json")).expect("results.json");
    let j: Value = serde_json::from_str(&text).expect("JSON");
    report_agrees(&lesson_file(n), &j, &out);
    (j, out)
}

/// The path of lesson `n`'s file in the checkout.
fn lesson_file(n: usize) -> PathBuf {
    let dir = repo().join("scenarios/lessons");
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(&format!("{n:02}-")))
        })
        .unwrap_or_else(|| panic!("no lesson {n} in {}", dir.display()))
}

/// The "What happened" sentences of the `report.html` in `out`, with the
/// HTML escapes undone.
fn what_happened(out: &Path) -> Vec<String> {
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    let s = html
        .find("<ul id=\"explanation\">")
        .expect("the explanation list");
    let e = s + html[s..].find("</ul>").unwrap();
    html[s..e]
        .split("<li>")
        .skip(1)
        .map(|x| {
            x.trim_end()
                .trim_end_matches("</li>")
                .replace("&lt;", "<")
                .replace("&gt;", ">")
                .replace("&quot;", "\"")
                .replace("&#39;", "'")
                .replace("&amp;", "&")
        })
        .collect()
}

/// The sentences about variant `v` (those opening with `v: `).
fn about<'a>(lines: &'a [String], v: &str) -> Vec<&'a str> {
    let p = format!("{v}: ");
    lines
        .iter()
        .filter(|l| l.starts_with(&p))
        .map(String::as_str)
        .collect()
}

/// Frames the PFC watchdog dropped in variant `v`.
fn watchdog_drops(v: &Value) -> u64 {
    v["pfcwd_stats"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|q| q["tx_drop"].as_u64().unwrap_or(0) + q["rx_drop"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

/// Frames dropped on a lossless priority for lack of headroom in `v`
/// (`rx_buf_discard`; zero when ports are not recorded).
fn headroom_drops(v: &Value) -> u64 {
    v["ports"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .flat_map(|p| p["prio"].as_array().cloned().unwrap_or_default())
                .map(|c| c["rx_buf_discard"].as_u64().unwrap_or(0))
                .sum()
        })
        .unwrap_or(0)
}

/// The slowest FCT (ps) of workload `w`'s flows in `v`, when all completed.
fn workload_fct(v: &Value, w: &str) -> Option<u64> {
    let fs: Vec<&Value> = v["flows"]
        .as_array()?
        .iter()
        .filter(|f| f["workload"] == w)
        .collect();
    let fcts: Vec<u64> = fs.iter().filter_map(|f| f["fct_ps"].as_u64()).collect();
    (!fs.is_empty() && fcts.len() == fs.len()).then(|| fcts.into_iter().max())?
}

/// The report of a run agrees with the scenario and with the numbers: it
/// blames headroom only where `rx_buf_discard` counted drops (never for a
/// watchdog's), never calls a slow receiver a pause storm, names the cause
/// each variant's ground truth states, compares with the healthy variant
/// (else the first), and never says a fix failed to save the victim when
/// the victim's FCT improved.
fn report_agrees(file: &Path, j: &Value, out: &Path) {
    let lines = what_happened(out);
    let sc = sim::scenario::load(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let results = j["variants"].as_array().unwrap();
    let truth = |name: &str| {
        sc.variants
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.diagnosis.clone())
    };
    let names: Vec<&str> = results
        .iter()
        .map(|v| v["summary"]["variant"].as_str().unwrap())
        .collect();
    for (v, name) in results.iter().zip(&names) {
        let mine = about(&lines, name);
        if headroom_drops(v) == 0 {
            assert!(
                !mine.iter().any(|l| l.contains("headroom")),
                "{name}: headroom blamed without a buf_discard drop (watchdog drops {}): {mine:#?}",
                watchdog_drops(v)
            );
        }
        if watchdog_drops(v) > 0 {
            assert!(
                mine.iter()
                    .any(|l| l.contains("by the PFC watchdog, on purpose")),
                "{name}: the watchdog's drops are not named as its: {mine:#?}"
            );
        }
        let Some(d) = truth(name) else { continue };
        if d.cause == "slow-receiver" {
            assert!(
                !mine.iter().any(|l| l.contains(": a pause storm")),
                "{name}: a slow receiver called a pause storm: {mine:#?}"
            );
        }
        if !d.is_healthy() {
            let says = format!("the scenario injects {}", d.cause);
            assert!(
                mine.iter().any(|l| l.contains(&says)),
                "{name}: the stated cause {} is not named: {mine:#?}",
                d.cause
            );
        }
    }
    // The baseline: the healthy variant, else the first.
    let healthy = names
        .iter()
        .find(|n| truth(n).is_some_and(|d| d.is_healthy()));
    let (base, label) = match healthy {
        Some(h) => (*h, "the healthy baseline"),
        None => (names[0], "the first variant"),
    };
    let other = if healthy.is_some() {
        "(the first variant"
    } else {
        "(the healthy baseline"
    };
    for l in lines.iter().filter(|l| l.contains(&format!("({label}"))) {
        assert!(
            l.contains(&format!("{base} ({label}")),
            "baseline {base}: {l}"
        );
    }
    assert!(
        !lines.iter().any(|l| l.contains(other)),
        "baseline {base} ({label}): {lines:#?}"
    );
    // A fix that saved its victim is not said to have failed it.
    for (v, name) in results.iter().zip(&names) {
        let Some(d) = truth(name).filter(|d| d.role() == sim::scenario::Role::Fix) else {
            continue;
        };
        let Some(w) = d.victim.as_deref() else {
            continue;
        };
        let fault = results.iter().zip(&names).find(|(_, n)| {
            truth(n).is_some_and(|e| e.role() == sim::scenario::Role::Fault && e.cause == d.cause)
        });
        let Some((u, un)) = fault else { continue };
        if let (Some(x), Some(y)) = (workload_fct(v, w), workload_fct(u, w)) {
            if x < y {
                let s = lines
                    .iter()
                    .find(|l| l.starts_with(&format!("{name} is {un} (")))
                    .unwrap_or_else(|| panic!("no fix sentence for {name}: {lines:#?}"));
                assert!(
                    s.contains("sooner") && !s.contains("did not save") && !s.contains(" worse"),
                    "{s}"
                );
            }
        }
    }
}

/// The variant named `name`.
fn variant<'a>(j: &'a Value, name: &str) -> &'a Value {
    j["variants"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["summary"]["variant"] == name)
        .unwrap_or_else(|| panic!("no variant {name}"))
}

/// A summary counter of a variant.
fn sum(v: &Value, key: &str) -> u64 {
    v["summary"][key]
        .as_u64()
        .unwrap_or_else(|| panic!("summary.{key} in {}", v["summary"]))
}

/// The FCT in microseconds of the flow from `src` to `dst` (which must
/// have completed).
fn fct_us(v: &Value, src: &str, dst: &str) -> f64 {
    let f = v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["src"] == src && f["dst"] == dst)
        .unwrap_or_else(|| panic!("no flow {src} -> {dst}"));
    f["fct_ps"]
        .as_u64()
        .unwrap_or_else(|| panic!("{src} -> {dst} did not complete: {f}")) as f64
        / 1e6
}

/// The port record of `node` port `port`.
fn port<'a>(v: &'a Value, node: &str, port: u64) -> &'a Value {
    v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["node"] == node && p["port"] == port)
        .unwrap_or_else(|| panic!("no port {node}:{port}"))
}

/// A per-priority counter of a port.
fn prio(v: &Value, node: &str, p: u64, priority: usize, key: &str) -> u64 {
    port(v, node, p)["prio"][priority][key].as_u64().unwrap()
}

/// Mean depth of the first recorded queue over samples in `[from_ps, to_ps]`.
fn mean_queue(v: &Value, from_ps: u64, to_ps: u64) -> f64 {
    let s: Vec<u64> = v["queues"][0]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| {
            let t = s[0].as_u64()?;
            (from_ps..=to_ps).contains(&t).then(|| s[1].as_u64())?
        })
        .collect();
    assert!(!s.is_empty(), "no queue samples in [{from_ps}, {to_ps}]");
    s.iter().sum::<u64>() as f64 / s.len() as f64
}

/// `x` within `tol` (a fraction) of `want`.
fn near(what: &str, x: f64, want: f64, tol: f64) {
    assert!(
        (x - want).abs() <= tol * want,
        "{what}: {x}, expected {want} within {}%",
        tol * 100.0
    );
}

fn gbps(v: &Value) -> f64 {
    v["summary"]["goodput_bps"].as_f64().unwrap() / 1e9
}

#[test]
fn lessons_lists_every_lesson_with_title_and_question() {
    let o = rocelab(&["lessons"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{text}");
    let mut files: Vec<String> = std::fs::read_dir(repo().join("scenarios/lessons"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    let last = files.len();
    assert!(last >= 13, "{files:?}");
    for (i, f) in files.iter().enumerate() {
        let n = i + 1;
        assert!(f.starts_with(&format!("{n:02}-")), "{f}");
        let body = std::fs::read_to_string(repo().join("scenarios/lessons").join(f)).unwrap();
        let mut lines = body.lines();
        let title = lines
            .next()
            .and_then(|l| l.strip_prefix(&format!("# Lesson {n}: ")))
            .unwrap_or_else(|| panic!("{f}: first line `# Lesson {n}: TITLE`"));
        let question = lines
            .next()
            .and_then(|l| l.strip_prefix("# Question: "))
            .unwrap_or_else(|| panic!("{f}: second line `# Question: ...`"));
        assert!(question.ends_with('?'), "{f}: {question}");
        assert!(body.contains("# Expected outcomes"), "{f}");
        // The listing shows what the file says.
        assert!(
            text.contains(&format!("{n:>2}  {title}: {question}\n")),
            "{title} in {text}"
        );
    }
    // Every lesson is listed, and one past the last is refused.
    assert_eq!(
        text.lines().filter(|l| l.contains(": ")).count(),
        last,
        "{text}"
    );
    let o = rocelab(&["lesson", &(last + 1).to_string()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&format!("no lesson {}: expected 1 to {last}", last + 1)),
        "{err}"
    );
}

/// `rocelab lesson N` is `rocelab run` of the lesson's file: the same
/// bytes, the default output folder `out/<scenario name>`, a copy of the
/// lesson beside the results, and the report's path on the console.
#[test]
fn lesson_runs_its_file_as_run_does_and_says_where_the_report_is() {
    let dir = scratch("lesson-vs-run");
    let o = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .current_dir(&dir)
        .args(["lesson", "3"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = Path::new("out/congestion-spreading-and-pfc-unfairness");
    assert!(
        stdout.contains(&format!("report: {}", out.join("report.html").display())),
        "{stdout}"
    );
    assert!(stdout.contains("question: why do flows"), "{stdout}");
    let file = "03-congestion-spreading-and-pfc-unfairness.toml";
    let original = std::fs::read_to_string(repo().join("scenarios/lessons").join(file)).unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.join(out).join(file)).unwrap(),
        original
    );
    let by_run = dir.join("by-run");
    let o = rocelab(&[
        "run",
        repo()
            .join("scenarios/lessons")
            .join(file)
            .to_str()
            .unwrap(),
        "--out",
        by_run.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success());
    for f in ["results.json", "report.html"] {
        assert_eq!(
            std::fs::read(dir.join(out).join(f)).unwrap(),
            std::fs::read(by_run.join(f)).unwrap(),
            "{f}"
        );
    }
}

#[test]
fn lesson_01_incast_lossless_vs_lossy() {
    let (j, _) = lesson(1);
    let (ll, ly) = (variant(&j, "lossless"), variant(&j, "lossy"));
    assert_eq!(sum(ll, "drops"), 0);
    assert_eq!(sum(ll, "flows_completed"), 16);
    let p99 = sum(ll, "fct_p99_ps") as f64 / 1e6;
    // 16 MB x 8 / 100 Gbit/s = 1.28 ms, plus a round trip.
    near("lossless p99 FCT (us)", p99, 1310.0, 0.05);
    assert!(sum(ly, "drops") > 0 && sum(ly, "retransmitted_packets") > 0);
    // At least one ACK timeout: 4.096 us x 2^14.
    assert!(
        sum(ly, "fct_p99_ps") >= 4_096_000 << 14,
        "{}",
        ly["summary"]
    );
}

#[test]
fn lesson_02_head_of_line_blocking_and_what_dcqcn_buys_back() {
    let (j, _) = lesson(2);
    let (ll, dc, ly) = (
        variant(&j, "lossless"),
        variant(&j, "lossless-dcqcn"),
        variant(&j, "lossy"),
    );
    // The victim h15 -> h1, 8 MB: alone about 660 us with headers.
    let alone = 660.0;
    let (a, b, c) = (
        fct_us(ll, "h15", "h1"),
        fct_us(dc, "h15", "h1"),
        fct_us(ly, "h15", "h1"),
    );
    assert!(a > 4.0 * alone, "victim under PFC alone: {a} us");
    assert!(b < 3.0 * alone && b < a / 2.0, "victim with DCQCN: {b} us");
    assert!(sum(dc, "cnps_sent") > 0);
    assert!(
        sum(dc, "pause_frames_sent") * 5 < sum(ll, "pause_frames_sent"),
        "pauses {} vs {}",
        sum(dc, "pause_frames_sent"),
        sum(ll, "pause_frames_sent")
    );
    assert_eq!(sum(ll, "drops"), 0);
    assert_eq!(sum(dc, "drops"), 0);
    assert!(sum(ly, "drops") > 0 && sum(ly, "retransmitted_packets") > 0);
    assert_eq!(sum(ly, "pause_frames_sent"), 0);
    near("victim without PFC (us)", c, alone, 0.10);
}

#[test]
fn lesson_03_congestion_spreading_and_pfc_unfairness() {
    let (j, _) = lesson(3);
    let pfc = variant(&j, "pfc");
    assert_eq!(sum(pfc, "drops"), 0);
    // h1 has an ingress port to itself: half of h0's link.
    near("h1 (us)", fct_us(pfc, "h1", "h0"), 325.0, 0.05);
    for h in ["h2", "h3", "h4"] {
        near(h, fct_us(pfc, h, "h0"), 650.0, 0.05);
    }
    // Spreading: sw0 pauses sw1 (port 2), sw1 pauses each of its senders.
    assert!(prio(pfc, "sw0", 2, 3, "tx_pause") > 0);
    for p in 1..=3 {
        assert!(prio(pfc, "sw1", p, 3, "tx_pause") > 0, "sw1 port {p}");
    }
    let dc = variant(&j, "pfc-dcqcn");
    let f: Vec<f64> = ["h1", "h2", "h3", "h4"]
        .iter()
        .map(|h| fct_us(dc, h, "h0"))
        .collect();
    let (lo, hi) = (
        f.iter().cloned().fold(f64::MAX, f64::min),
        f.iter().cloned().fold(0.0, f64::max),
    );
    assert!(hi <= 1.3 * lo, "DCQCN FCTs {f:?}");
    assert!(sum(dc, "pause_frames_sent") * 5 <= sum(pfc, "pause_frames_sent"));
}

#[test]
fn lesson_04_dcqcn_two_flows_converging() {
    let (j, _) = lesson(4);
    // h2's average rate over its own transfer (10 MB), Gbit/s.
    let rate = |v: &Value| 10e6 * 8.0 / (fct_us(v, "h2", "h0") * 1e-6) / 1e9;
    // Mean queue from 300 us after h2 starts until h2 ends.
    let overlap_queue = |v: &Value| {
        let from = 200_000_000 + 300_000_000;
        let to = from - 300_000_000 + (fct_us(v, "h2", "h0") * 1e6) as u64;
        mean_queue(v, from, to)
    };
    let none = variant(&j, "no-cc");
    near("no-cc h2 rate (Gbit/s)", rate(none), 50.0, 0.10);
    let q_none = overlap_queue(none);
    assert!(q_none > 500_000.0, "no-cc mean queue {q_none}");
    assert!(gbps(none) > 95.0);
    for (name, good) in [("paper", 77.0), ("firmware", 73.0), ("hpcc", 55.0)] {
        let v = variant(&j, name);
        assert!(sum(v, "cnps_sent") > 0, "{name}");
        assert_eq!(sum(v, "pause_frames_sent"), 0, "{name}");
        let q = overlap_queue(v);
        assert!(q <= q_none / 10.0, "{name}: mean queue {q} vs {q_none}");
        near(&format!("{name} h2 rate"), rate(v), 50.0, 0.20);
        near(&format!("{name} goodput"), gbps(v), good, 0.10);
    }
    let g = |n| gbps(variant(&j, n));
    assert!(g("paper") > g("firmware") && g("firmware") > g("hpcc"));
}

#[test]
fn lesson_05_ecn_thresholds() {
    let (j, _) = lesson(5);
    let q = |v: &Value| mean_queue(v, 50_000_000, sum(v, "makespan_ps"));
    let tuned = variant(&j, "tuned");
    near("tuned goodput", gbps(tuned), 77.0, 0.10);
    assert!(sum(tuned, "pause_frames_sent") <= 10);
    assert!(q(tuned) < 100_000.0, "tuned queue {}", q(tuned));
    let high = variant(&j, "too-high");
    assert_eq!(sum(high, "ecn_marked"), 0);
    assert_eq!(sum(high, "cnps_sent"), 0);
    assert!(sum(high, "pause_frames_sent") >= 100);
    assert!(q(high) > 500_000.0, "too-high queue {}", q(high));
    let low = variant(&j, "too-low");
    assert!(gbps(low) < gbps(tuned) / 3.0, "too-low {}", gbps(low));
    for v in [tuned, high, low] {
        assert_eq!(sum(v, "drops"), 0);
    }
}

#[test]
fn lesson_06_pfc_headroom() {
    let (j, _) = lesson(6);
    let ingress = [1u64, 2, 3];
    let headroom = |v: &Value, p| port(v, "sw0", p)["max_headroom_bytes"].as_u64().unwrap();
    let computed = variant(&j, "computed-1km");
    assert_eq!(sum(computed, "drops"), 0);
    for p in ingress {
        near(
            "headroom used",
            headroom(computed, p) as f64,
            91_000.0,
            0.05,
        );
    }
    let short = variant(&j, "fixed-42KB-1km");
    let drops = sum(short, "drops");
    assert!(drops > 0 && sum(short, "retransmitted_packets") > 0);
    let buf: u64 = ingress
        .iter()
        .map(|&p| prio(short, "sw0", p, 3, "rx_buf_discard"))
        .sum();
    assert_eq!(buf, drops, "every drop is on the lossless priority");
    for p in ingress {
        assert!(headroom(short, p) <= 42_000);
    }
    assert_eq!(sum(variant(&j, "fixed-42KB-3m"), "drops"), 0);
    assert!(sum(variant(&j, "fixed-6KB-3m"), "drops") > 0);
    assert_eq!(sum(variant(&j, "fixed-6KB-3m-mtu2048"), "drops"), 0);
}

#[test]
fn lesson_07_slow_receiver_and_pause_storm() {
    let (j, out) = lesson(7);
    let victim = |n| fct_us(variant(&j, n), "h1", "h3");
    let healthy = victim("healthy");
    near("healthy victim (us)", healthy, 230.0, 0.05);
    let slow = variant(&j, "slow-receiver");
    let s = victim("slow-receiver");
    assert!(s > 1.5 * healthy && s < 3.0 * healthy, "slow receiver: {s}");
    assert!(sum(slow, "pause_frames_sent") > 0);
    assert!(slow["pfcwd_events"].as_array().unwrap().is_empty());
    let storm = variant(&j, "storm");
    assert!(victim("storm") >= 4500.0, "storm: {}", victim("storm"));
    assert_eq!(sum(storm, "drops"), 0);
    let wd = variant(&j, "storm-watchdog");
    let ev = &wd["pfcwd_events"][0];
    assert_eq!(ev["event"], "storm_detected");
    assert_eq!(
        (ev["node"].as_str(), ev["port"].as_u64()),
        (Some("sw0"), Some(0))
    );
    assert_eq!(ev["time_ps"], 1_500_000_000u64);
    assert!(victim("storm-watchdog") < 2000.0);
    assert!(sum(wd, "drops") > 0);
    assert_eq!(sum(wd, "flows_completed"), 2);
    assert_eq!(sum(slow, "drops"), 0);
    lesson_07_report_says_what_the_narrative_says(&j, &out);
}

/// Lesson 7's "What happened" against its narrative: the watchdog's drops
/// are the watchdog's (not headroom's), the storm is a storm, the slow
/// receiver's pauses come and go and are no storm, the comparisons are
/// against the healthy variant, and the watchdog variant, which saved the
/// victim, is never called worse than the storm it cures.
fn lesson_07_report_says_what_the_narrative_says(j: &Value, out: &Path) {
    let lines = what_happened(out);
    let wd = variant(j, "storm-watchdog");
    let mine = about(&lines, "storm-watchdog");
    let all = format!(
        "storm-watchdog: all {} of them were dropped by the PFC watchdog, on purpose (at sw0 port 0)",
        sum(wd, "drops")
    );
    assert!(mine.iter().any(|l| l.starts_with(&all)), "{mine:#?}");
    assert!(!mine.iter().any(|l| l.contains("headroom")), "{mine:#?}");
    assert!(
        mine.iter().any(|l| l.starts_with(
            "storm-watchdog: the PFC watchdog declared a storm on sw0 port 0 priority 3 \
             (PAUSE from h0) at 1.500 ms; action drop"
        )),
        "{mine:#?}"
    );
    let storm = about(&lines, "storm");
    assert!(
        storm.iter().any(|l| l.starts_with(
            "storm: a pause storm: sw0 port 0 (PAUSE from h0) was held off without a break"
        )),
        "{storm:#?}"
    );
    let slow = about(&lines, "slow-receiver");
    assert!(
        !slow.iter().any(|l| l.contains(": a pause storm")),
        "{slow:#?}"
    );
    assert!(
        slow.iter().any(|l| l.contains("XON follow")),
        "the slow receiver's pauses come and go: {slow:#?}"
    );
    // Compared with the healthy variant; never "storm-watchdog is worse
    // than storm" (it saved the victim: 1.7 ms against 5.2 ms).
    for v in ["slow-receiver", "storm"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{v} against healthy ("))),
            "{v}: {lines:#?}"
        );
    }
    for l in &lines {
        assert!(!l.contains("p99 FCT of storm-watchdog is"), "{l}");
        assert!(!l.starts_with("storm-watchdog against storm "), "{l}");
        assert!(!l.starts_with("storm avoided loss"), "{l}");
        if l.starts_with("storm-watchdog is storm (") {
            assert!(l.contains("sooner") && !l.contains("did not save"), "{l}");
        }
    }
}

/// Lesson 7's file with its ground truth: its own `[diagnosis]` tables,
/// or, where the file has none yet, the cause its narrative states (a
/// pause storm at h0, the victim workload `victim`, the slow receiver, the
/// watchdog as the fix, the healthy variant).
fn lesson_07_with_ground_truth() -> String {
    let mut text = std::fs::read_to_string(lesson_file(7)).unwrap();
    if text.contains("diagnosis") {
        return text;
    }
    for (name, d) in [
        ("healthy", "{ cause = \"healthy\" }"),
        (
            "slow-receiver",
            "{ cause = \"slow-receiver\", summary = \"h0 drains received frames at a quarter of its link rate\" }",
        ),
        ("storm-watchdog", "{ role = \"fix\" }"),
    ] {
        let line = format!("name = \"{name}\"\n");
        assert!(text.contains(&line), "{line}");
        text = text.replacen(&line, &format!("{line}diagnosis = {d}\n"), 1);
    }
    text.push_str(
        "\n[diagnosis]\ncause = \"pfc-storm\"\nat = \"h0\"\n\
         summary = \"h0's NIC stalls and keeps PAUSE asserted\"\nvictim = \"victim\"\n",
    );
    text
}

/// With the scenario's ground truth the report names each variant's
/// cause, calls the slow receiver one (and no storm), compares with the
/// healthy baseline, and sets the watchdog against the storm it cures:
/// what it saves (the victim, about three times sooner) and what it costs
/// (the watchdog's drops, h0's flow).
#[test]
fn lesson_07_report_uses_the_scenarios_ground_truth() {
    let dir = scratch("lesson-7-truth");
    let file = dir.join("07-slow-receiver-and-pause-storm.toml");
    std::fs::write(&file, lesson_07_with_ground_truth()).unwrap();
    let out = dir.join("out");
    let o = rocelab(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    report_agrees(&file, &j, &out);
    lesson_07_report_says_what_the_narrative_says(&j, &out);
    let lines = what_happened(&out);
    let slow = about(&lines, "slow-receiver");
    assert!(
        slow.iter()
            .any(|l| l.starts_with("slow-receiver: the scenario injects slow-receiver at h0")),
        "{slow:#?}"
    );
    assert!(
        slow.iter().any(|l| l.contains(
            "that is the scenario's slow receiver at h0 draining slower than frames arrive, \
             not a pause storm"
        )),
        "{slow:#?}"
    );
    let t = |v: &str| {
        reports::render::fmt_time(
            workload_fct(variant(&j, v), "victim").expect("the victim completed"),
        )
    };
    let fix = lines
        .iter()
        .find(|l| l.starts_with("storm-watchdog is storm (pfc-storm) with the remedy on: "))
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert!(
        fix.contains(&format!(
            "the victim (victim) finished in {} instead of {}",
            t("storm-watchdog"),
            t("storm")
        )),
        "{fix}"
    );
    let wd = sum(variant(&j, "storm-watchdog"), "drops");
    assert!(
        fix.contains(&format!(
            "the price: {wd} frames dropped ({wd} of them by the PFC watchdog, on purpose)"
        )) && fix.contains("to-h0 took"),
        "{fix}"
    );
    for v in ["slow-receiver", "storm"] {
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with(&format!("{v} against healthy (the healthy baseline): "))),
            "{v}: {lines:#?}"
        );
    }
}

#[test]
fn lesson_08_pfc_deadlock_after_link_failure() {
    let (j, _) = lesson(8);
    let dl = variant(&j, "deadlock");
    let d = dl["deadlocks"].as_array().unwrap();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["priority"], 3);
    let members: Vec<String> = d[0]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            format!(
                "{}>{}",
                m["node"].as_str().unwrap(),
                m["peer"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(members, ["l0>s1", "l1>s0", "s0>l0", "s1>l1"]);
    let formed = d[0]["formed_ps"].as_u64().unwrap();
    let detected = d[0]["detected_ps"].as_u64().unwrap();
    assert!((250_000_000..=350_000_000).contains(&formed), "{formed}");
    assert!(detected >= formed && detected - formed <= 100_000_000);
    let bytes = |v: &Value| sum(v, "bytes_delivered");
    assert!(bytes(dl) < 5_000_000, "{}", bytes(dl));
    let wd = variant(&j, "watchdog");
    let ev = wd["pfcwd_events"].as_array().unwrap();
    assert!(!ev.is_empty());
    assert!(ev
        .iter()
        .filter(|e| e["event"] == "storm_detected")
        .all(|e| e["time_ps"] == 1_500_000_000u64));
    assert!(
        bytes(wd) >= 10 * bytes(dl),
        "{} vs {}",
        bytes(wd),
        bytes(dl)
    );
    let fixed = variant(&j, "routes-follow");
    assert!(fixed["deadlocks"].as_array().unwrap().is_empty());
    assert!(bytes(fixed) > 2 * bytes(wd));
}

#[test]
fn lesson_09_dscp_pcp_trust_mismatch() {
    let (j, _) = lesson(9);
    let light = variant(&j, "light-load");
    assert_eq!(sum(light, "drops"), 0);
    near("light h1 (us)", fct_us(light, "h1", "h0"), 167.0, 0.05);
    let inc = variant(&j, "incast");
    let drops = sum(inc, "drops");
    assert!(drops > 0 && sum(inc, "retransmitted_packets") > 0);
    assert_eq!(prio(inc, "sw0", 1, 0, "rx_discards"), drops);
    let h1 = fct_us(inc, "h1", "h0");
    for h in ["h2", "h3"] {
        assert!(h1 > 1.5 * fct_us(inc, h, "h0"), "{h}");
    }
    let fixed = variant(&j, "fixed");
    assert_eq!(sum(fixed, "drops"), 0);
    assert_eq!(sum(fixed, "retransmitted_packets"), 0);
    let f: Vec<f64> = ["h1", "h2", "h3"]
        .iter()
        .map(|h| fct_us(fixed, h, "h0"))
        .collect();
    for x in &f {
        near("fixed FCT", *x, f[0], 0.05);
    }
}

#[test]
fn lesson_10_go_back_n_vs_go_back_0() {
    let (j, _) = lesson(10);
    let clean = variant(&j, "no-loss");
    let base = fct_us(clean, "h1", "h0");
    near("no-loss FCT (us)", base, 670.0, 0.05);
    assert_eq!(sum(clean, "retransmitted_packets"), 0);
    let gbn = variant(&j, "go-back-n");
    let lost = sum(gbn, "drops");
    assert!(lost > 0);
    assert!(
        sum(gbn, "retransmitted_packets") >= 20 * lost,
        "{} resent for {lost} lost",
        sum(gbn, "retransmitted_packets")
    );
    assert!(fct_us(gbn, "h1", "h0") > 1.3 * base);
    let gb0 = variant(&j, "go-back-0");
    assert!(sum(gb0, "retransmitted_packets") > sum(gbn, "retransmitted_packets"));
    assert!(fct_us(gb0, "h1", "h0") > fct_us(gbn, "h1", "h0"));
}

/// The perftest records of variant `v`, in size order.
fn perftest(v: &Value) -> &[Value] {
    v["perftest"]
        .as_array()
        .unwrap_or_else(|| panic!("no perftest records in {}", v["summary"]["variant"]))
}

/// The perftest record of size `size` in variant `v`.
fn perftest_at(v: &Value, size: u64) -> &Value {
    perftest(v)
        .iter()
        .find(|r| r["size"] == size)
        .unwrap_or_else(|| panic!("no perftest record of {size} bytes"))
}

/// BW average of a perftest record, bits/s (payload over first post to
/// last completion, as perftest computes it).
fn perftest_bps(r: &Value) -> f64 {
    let (a, b) = (
        r["start_ps"].as_u64().unwrap(),
        r["finish_ps"].as_u64().unwrap(),
    );
    r["bytes"].as_u64().unwrap() as f64 * 8.0 / ((b - a) as f64 / 1e12)
}

/// Messages per second of a perftest record.
fn perftest_rate(r: &Value) -> f64 {
    let (a, b) = (
        r["start_ps"].as_u64().unwrap(),
        r["finish_ps"].as_u64().unwrap(),
    );
    r["messages"].as_u64().unwrap() as f64 / ((b - a) as f64 / 1e12)
}

#[test]
fn lesson_11_why_my_nic_does_not_reach_line_rate() {
    let (j, out) = lesson(11);
    const MIB8: u64 = 8 << 20;
    // 100 Gbit/s x 4096 / (4096 + 62): the wire's payload rate at MTU 4096.
    let wire = 100e9 * 4096.0 / 4158.0;
    for v in j["variants"].as_array().unwrap() {
        let name = v["summary"]["variant"].as_str().unwrap();
        let recs = perftest(v);
        assert_eq!(recs.len(), 23, "{name}: -a runs 2 B to 8 MiB");
        assert!(recs.iter().all(|r| r["completed"] == true), "{name}");
        assert_eq!(sum(v, "drops"), 0, "{name}");
        // perftest's own output of each side.
        for side in ["client", "server"] {
            let f = out.join(format!("perftest/{name}/ib_write_bw-{side}.txt"));
            let text = std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{f:?}: {e}"));
            assert!(text.contains(" 8388608 "), "{name} {side}: {text}");
        }
    }
    let gen4 = variant(&j, "gen4-x16");
    let top = perftest_at(gen4, MIB8);
    near("gen4-x16 8 MiB (bit/s)", perftest_bps(top), wire, 0.02);
    assert_eq!(top["limit"], "wire");
    assert_eq!(perftest_at(gen4, 2)["limit"], "message-rate");
    assert_eq!(sum(gen4, "pause_frames_sent"), 0);

    let gen3 = variant(&j, "gen3-x8");
    let top = perftest_at(gen3, MIB8);
    // Gen3 x8: 8 GT/s x 128/130 x 8 lanes x 256 / (256 + 28) per TLP.
    near("gen3-x8 8 MiB (bit/s)", perftest_bps(top), 56.8e9, 0.02);
    assert_eq!(top["limit"], "pcie");
    assert!(
        sum(gen3, "pause_frames_sent") > 0,
        "the server's NIC pauses"
    );

    let slow = variant(&j, "slow-poster");
    for r in perftest(slow)
        .iter()
        .filter(|r| r["size"].as_u64() <= Some(2048))
    {
        assert_eq!(r["limit"], "message-rate", "{r}");
        assert!(perftest_rate(r) <= 1.0e6, "{r}");
    }
    assert!(
        perftest(slow).iter().any(
            |r| r["limit"] == "window" && (4096..=16384).contains(&r["size"].as_u64().unwrap())
        ),
        "no window-bound size between 4 KiB and 16 KiB"
    );
    let top = perftest_at(slow, MIB8);
    near("slow-poster 8 MiB (bit/s)", perftest_bps(top), wire, 0.02);
    assert_eq!(top["limit"], "wire");

    // The report plots the run by size and names the limits.
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<title>perftest bandwidth by message size</title>"));
    for limit in ["message rate", "PCIe", "window", "wire"] {
        assert!(html.contains(&format!(">{limit}</text>")), "{limit}");
    }
}

/// The nccl-tests groups of a variant: (size, busbw GB/s, limit, time
/// ps, NCCL's model ps), in size order.
fn nccl_sizes(v: &Value) -> Vec<(u64, f64, String, u64, u64)> {
    v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|g| g["kind"] == "nccl-tests")
        .map(|g| {
            let ps = g["step_time_ps"].as_u64().expect("the size completed");
            let (bytes, n) = (g["bytes"].as_u64().unwrap(), g["ranks"].as_u64().unwrap());
            let alg = bytes as f64 / (ps as f64 * 1e-12) / 1e9;
            let bus = alg * 2.0 * (n as f64 - 1.0) / n as f64;
            (
                g["size"].as_u64().unwrap(),
                bus,
                g["limit"].as_str().unwrap_or("").to_string(),
                ps,
                g["model_ps"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn lesson_12_allreduce_bus_bandwidth_and_its_ceiling() {
    let (j, _) = lesson(12);
    // The eight NICs' payload rate in LL128's lines: 8 x 400 Gbit/s x
    // 4096/4158 x 120/128, GB/s; NVLink's 450 GB/s.
    let nic = 8.0 * 400.0 / 8.0 * 4096.0 / 4158.0 * 120.0 / 128.0;
    for (name, ceiling, top_limit, tol) in [
        ("four-servers", nic, "nic", 0.03),
        ("one-server", 450.0, "nvlink", 0.02),
    ] {
        let v = variant(&j, name);
        let sizes = nccl_sizes(v);
        assert_eq!(sizes.len(), 7, "{name}: 64 KiB to 256 MiB by 4");
        for w in sizes.windows(2) {
            assert!(
                w[1].1 > w[0].1,
                "{name}: busbw falls from {:?} to {:?}",
                w[0],
                w[1]
            );
        }
        let last = sizes.last().unwrap();
        near(
            &format!("{name} busbw at 256 MiB (GB/s)"),
            last.1,
            ceiling,
            tol,
        );
        assert!(
            (last.3 as f64 - last.4 as f64).abs() <= 0.10 * last.4 as f64,
            "{name}: 256 MiB in {} ps, NCCL's model {}",
            last.3,
            last.4
        );
        for s in sizes.iter().filter(|s| s.0 >= 64 << 20) {
            assert_eq!(s.2, top_limit, "{name} {s:?}");
        }
        if name == "four-servers" {
            for s in sizes.iter().filter(|s| s.0 <= 4 << 20) {
                assert_eq!(s.2, "latency", "{name} {s:?}");
            }
        } else {
            let nic_bytes: u64 = v["ports"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|p| p["is_nic"] == true)
                .flat_map(|p| p["prio"].as_array().cloned().unwrap_or_default())
                .map(|c| c["tx_bytes"].as_u64().unwrap_or(0))
                .sum();
            assert_eq!(nic_bytes, 0, "one server: nothing reaches a NIC");
        }
    }
}

/// Every step of every training job in every variant finished, and its
/// time is its compute plus its exposed communication, exactly.
fn every_step_is_compute_plus_exposed(j: &Value) {
    for v in j["variants"].as_array().unwrap() {
        for t in v["training"].as_array().unwrap() {
            for s in t["steps"].as_array().unwrap() {
                assert_eq!(
                    s["time_ps"].as_u64().expect("the step finished"),
                    s["compute_ps"].as_u64().unwrap() + s["exposed_ps"].as_u64().unwrap(),
                    "{} {}: step = compute + exposed",
                    v["summary"]["variant"],
                    t["job"]
                );
            }
        }
    }
}

/// A training job's steps in a variant: (time, compute, exposed, the
/// most exposed collective with its limit and bottleneck).
fn job_steps(v: &Value) -> Vec<(u64, u64, u64, Value)> {
    v["training"][0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let label = s["critical"].clone();
            let top = s["collectives"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["label"] == label)
                .cloned()
                .unwrap_or(Value::Null);
            (
                s["time_ps"].as_u64().expect("the step finished"),
                s["compute_ps"].as_u64().unwrap(),
                s["exposed_ps"].as_u64().unwrap(),
                top,
            )
        })
        .collect()
}

#[test]
fn lesson_13_one_slow_nic_drags_the_job() {
    let (j, out) = lesson(13);
    let ms = 1e9;
    every_step_is_compute_plus_exposed(&j);
    let healthy = job_steps(variant(&j, "healthy"));
    // 2(n-1)/n x 64 MiB at a 400 (100) Gbit/s NIC's payload rate.
    let bytes = 1.5 * (64u64 << 20) as f64;
    let payload = |gbps: f64| gbps * 1e9 / 8.0 * 4096.0 / 4158.0;
    let ar = bytes / payload(400.0) * 1e12;
    let slow_ar = bytes / payload(100.0) * 1e12;
    for (t, _, _, top) in &healthy {
        assert_eq!(top["label"], "dp all_reduce bucket 0", "{top}");
        assert!(top["exposed_ps"].as_u64().unwrap() as f64 >= ar, "{top}");
        near(
            "healthy step (ps)",
            *t as f64,
            0.7 * ms + 8.0 * 30e6 + ar,
            0.10,
        );
    }
    let h = healthy[0].0 as f64;
    for (t, _, _, top) in job_steps(variant(&j, "slow-nic")) {
        assert!(
            t as f64 >= slow_ar,
            "slow-nic step {t} ps under the slow ring's {slow_ar}"
        );
        assert_eq!(top["label"], "dp all_reduce bucket 0", "{top}");
        let at = top["bottleneck"].as_str().unwrap_or("");
        assert!(at.contains("h0"), "{top}");
    }
    let storm_v = variant(&j, "storm");
    assert_eq!(storm_v["summary"]["drops"], 0);
    // h0's NIC counted one storm warning (85 ms held) and no error.
    let dump = std::fs::read_to_string(out.join("counters/storm/nics.txt")).expect("nics.txt");
    let h0: Vec<&str> = dump
        .split("==> ")
        .find(|s| s.starts_with("h0.ethtool.txt"))
        .expect("h0's ethtool dump")
        .lines()
        .collect();
    let count = |name: &str| {
        h0.iter()
            .find_map(|l| l.trim().strip_prefix(name)?.strip_prefix(": "))
            .unwrap_or_else(|| panic!("{name} in h0's dump"))
            .trim()
            .to_string()
    };
    assert_eq!(count("tx_pause_storm_warning_events"), "1");
    assert_eq!(count("tx_pause_storm_error_events"), "0");
    let storm = job_steps(storm_v);
    let s0 = storm[0].0 as f64;
    assert!(
        s0 >= h + 90.0 * ms && s0 <= 1.10 * (h + 90.0 * ms),
        "storm step 0: {s0}"
    );

    near(
        "storm step 1 (ps)",
        storm[1].0 as f64,
        healthy[1].0 as f64,
        0.02,
    );
    // Each faulty variant states what its faults cost each step, against
    // the same job run without them.
    let cost = |v: &Value| -> Vec<f64> {
        v["training"][0]["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["fault_cost_ps"].as_i64().expect("fault_cost_ps") as f64)
            .collect()
    };
    assert!(variant(&j, "healthy")["training"][0]["steps"][0]
        .get("fault_cost_ps")
        .is_none());
    let c = cost(storm_v);
    assert!(c[0] >= 90.0 * ms && c[0] <= 1.1 * 90.0 * ms, "{c:?}");
    assert!(c[1].abs() <= 0.02 * h, "{c:?}");
    for c in cost(variant(&j, "slow-nic")) {
        assert!(c >= slow_ar - 1.02 * h, "slow-nic cost {c}");
    }
}

/// The time of the single nccl-tests size of a variant, ps, and its group.
fn only_size(v: &Value) -> (f64, &Value) {
    let g = v["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["kind"] == "nccl-tests")
        .expect("an nccl-tests size");
    (
        g["step_time_ps"].as_u64().expect("the size completed") as f64,
        g,
    )
}

#[test]
fn lesson_14_moe_alltoall_is_an_incast() {
    let (j, _) = lesson(14);
    let us = 1e6;
    // Each rank's 24 off-server shares of 512 KiB at a 400 Gbit/s NIC's
    // payload rate (4096 of each 4158 bytes on the wire).
    let payload = 400e9 / 8.0 * 4096.0 / 4158.0;
    let floor = 24.0 * (512u64 << 10) as f64 / payload * 1e12;
    for v in j["variants"].as_array().unwrap() {
        let (t, _) = only_size(v);
        assert!(
            t >= floor,
            "{}: {t} ps under the NIC floor {floor}",
            v["summary"]["variant"]
        );
    }
    let deep = variant(&j, "deep-buffer");
    assert_eq!(sum(deep, "pause_frames_sent"), 0);
    assert_eq!(sum(deep, "drops"), 0);
    let (t_deep, g) = only_size(deep);
    assert_eq!(g["limit"], "congestion", "{g}");
    let at = g["bottleneck"].as_str().unwrap();
    assert!(
        at.starts_with("spine") && at.contains("-> rail"),
        "a spine's link to a leaf: {at}"
    );
    // The busiest fabric link's bytes (on the wire) at 50 GB/s.
    let busiest = deep["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["is_nic"] == false)
        .map(|p| {
            p["prio"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["tx_bytes"].as_u64().unwrap_or(0))
                .sum::<u64>()
        })
        .max()
        .unwrap();
    near(
        "deep-buffer all-to-all (ps)",
        t_deep,
        busiest as f64 / 50e9 * 1e12,
        0.05,
    );

    let pfc = variant(&j, "pfc");
    assert!(sum(pfc, "pause_frames_sent") > 0);
    assert_eq!(sum(pfc, "drops"), 0);
    let (t_pfc, g) = only_size(pfc);
    assert!(t_pfc > t_deep, "pfc {t_pfc} ps, deep buffers {t_deep}");
    let held: Vec<&str> = g["paused"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(held.iter().any(|p| p.starts_with('h')), "a NIC: {held:?}");
    assert!(
        held.iter()
            .any(|p| p.starts_with("rail") && p.contains(" by spine")),
        "a leaf's uplink: {held:?}"
    );

    let dcqcn = variant(&j, "dcqcn");
    assert_eq!(sum(dcqcn, "pause_frames_sent"), 0);
    assert!(sum(dcqcn, "cnps_sent") > 0);
    near(
        "dcqcn all-to-all (ps)",
        only_size(dcqcn).0,
        2.0 * floor,
        0.25,
    );

    let lossy = variant(&j, "lossy");
    assert!(sum(lossy, "drops") > 0);
    // One ACK timeout: 4.096 us x 2^14.
    let timeout = 4.096 * us * f64::from(1u32 << 14);
    let t = only_size(lossy).0;
    assert!(
        t >= timeout && t <= timeout + 1000.0 * us,
        "lossy all-to-all {t} ps, one ACK timeout {timeout}"
    );
}

/// The bytes a port sent, all priorities.
fn port_bytes(p: &Value) -> u64 {
    p["prio"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["tx_bytes"].as_u64().unwrap_or(0))
        .sum()
}

/// The most bytes any NIC sent, and any port on a link to or from a
/// spine sent, in a variant.
fn nic_and_spine_bytes(v: &Value) -> (u64, u64) {
    let ports = v["ports"].as_array().unwrap();
    let nic = ports
        .iter()
        .filter(|p| p["is_nic"] == true)
        .map(port_bytes)
        .max()
        .unwrap();
    let spine = ports
        .iter()
        .filter(|p| {
            let (a, b) = (
                p["node"].as_str().unwrap(),
                p["peer"].as_str().unwrap_or(""),
            );
            a.starts_with("spine") || b.starts_with("spine")
        })
        .map(port_bytes)
        .max()
        .unwrap_or(0);
    (nic, spine)
}

#[test]
fn lesson_15_ecmp_collisions_rails_against_plain() {
    let (j, _) = lesson(15);
    // Lesson 12's ceiling: eight 400 Gbit/s NICs less headers, in LL128's
    // lines, GB/s; a ring all-reduce moves 2(n-1)/n of the buffer.
    let ceiling = 8.0 * 400.0 / 8.0 * 4096.0 / 4158.0 * 120.0 / 128.0;
    let want = 2.0 * 31.0 / 32.0 * (64u64 << 20) as f64 / (ceiling * 1e9) * 1e12;
    let rails = variant(&j, "rails");
    let (t_rails, g) = only_size(rails);
    near("rails all-reduce (ps)", t_rails, want, 0.10);
    assert_eq!(g["limit"], "nic", "{g}");
    assert_eq!(nic_and_spine_bytes(rails).1, 0, "rails: no byte on a spine");
    assert_eq!(sum(rails, "pause_frames_sent"), 0);

    let plain = variant(&j, "plain");
    let (t_plain, g) = only_size(plain);
    assert_eq!(g["limit"], "congestion", "{g}");
    let at = g["bottleneck"].as_str().unwrap();
    assert!(
        at.starts_with("leaf") && at.contains("-> spine"),
        "a leaf's uplink: {at}"
    );
    let (nic, spine) = nic_and_spine_bytes(plain);
    // Four rings of two NICs, give or take the acknowledgements each way.
    near("busiest uplink (B)", spine as f64, 2.0 * nic as f64, 0.01);
    assert!(
        t_plain >= 1.8 * t_rails,
        "plain {t_plain} ps, rails {t_rails}"
    );
    near(
        "plain all-reduce (ps)",
        t_plain,
        spine as f64 / 50e9 * 1e12,
        0.05,
    );
    assert!(sum(plain, "pause_frames_sent") > 0);
    assert_eq!(sum(plain, "drops"), 0);

    let fat = variant(&j, "plain-fat-uplinks");
    let (nic, spine) = nic_and_spine_bytes(fat);
    // At most eight rings: four NICs' bytes, its 1600 Gbit/s.
    assert!(
        spine as f64 <= 1.01 * 4.0 * nic as f64,
        "busiest uplink {spine} B, a NIC {nic} B"
    );
    assert_eq!(sum(fat, "pause_frames_sent"), 0);
    near(
        "plain-fat-uplinks all-reduce (ps)",
        only_size(fat).0,
        t_rails,
        0.02,
    );
}

/// Bytes leaf0 sent to each spine in a variant, by spine.
fn leaf0_uplinks(v: &Value) -> Vec<u64> {
    let mut u: Vec<(String, u64)> = v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["node"] == "leaf0" && p["peer"].as_str().unwrap().starts_with("spine"))
        .map(|p| (p["peer"].as_str().unwrap().to_string(), port_bytes(p)))
        .collect();
    u.sort();
    assert_eq!(u.len(), 4, "{u:?}");
    u.into_iter().map(|x| x.1).collect()
}

/// A NIC counter summed over the hosts of a variant.
fn nic_total(v: &Value, key: &str) -> u64 {
    v["nics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n[key].as_u64().unwrap_or(0))
        .sum()
}

/// The slowest flow of a variant (ps); every flow completed.
fn slowest(v: &Value) -> f64 {
    v["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["fct_ps"].as_u64().expect("completed") as f64)
        .fold(0.0, f64::max)
}

#[test]
fn lesson_17_ecmp_collisions_against_spraying() {
    let (j, out) = lesson(17);
    // 8 MB at 100 Gbit/s in 4096-byte frames with 62 bytes of headers
    // (and a RETH on the first), plus a round trip.
    let frames = 8_000_000f64 / 4096.0;
    let line = (8_000_000.0 + frames.ceil() * 62.0 + 16.0) * 8.0 / 100e9 * 1e12;
    let ecmp = variant(&j, "ecmp");
    let per_flow = {
        let u = leaf0_uplinks(ecmp);
        u.iter().sum::<u64>() / 4
    };
    // Per-flow schemes: each uplink carries whole flows.
    let whole_flows = |name: &str, v: &Value| {
        for b in leaf0_uplinks(v) {
            let flows = (b as f64 / per_flow as f64).round();
            let off = (b as f64 - flows * per_flow as f64).abs();
            assert!(
                off <= 0.01 * per_flow as f64,
                "{name}: an uplink carries {b} B, not whole flows of {per_flow}"
            );
        }
    };
    whole_flows("ecmp", ecmp);
    assert!(
        slowest(ecmp) >= 1.8 * line,
        "{} against {line}",
        slowest(ecmp)
    );
    assert_eq!(nic_total(ecmp, "out_of_sequence"), 0);

    let spray = variant(&j, "spray");
    let u = leaf0_uplinks(spray);
    let mean = u.iter().sum::<u64>() as f64 / 4.0;
    for &b in &u {
        near("spray uplink (B)", b as f64, mean, 0.05);
    }
    assert!(nic_total(spray, "out_of_sequence") > 1000);
    assert!(nic_total(spray, "retransmitted_packets") > 1000);
    assert!(slowest(spray) > slowest(ecmp));
    assert_eq!(sum(spray, "drops"), 0);
    // The doctor reads the sequence errors with no drop as reordering at
    // a spraying switch, first in that variant.
    let o = rocelab(&[
        "doctor",
        "--json",
        out.join("results.json").to_str().unwrap(),
    ]);
    let d: Value = serde_json::from_slice(&o.stdout).expect("doctor --json");
    let first = d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["scope"] == "spray")
        .expect("a finding for spray");
    assert_eq!(first["id"], "reordering", "{first}");
    assert_eq!(first["severity"], "error", "{first}");
    assert!(
        first["origin"].as_str().unwrap().starts_with("leaf"),
        "{first}"
    );

    for name in ["spray-round-robin", "adaptive"] {
        let v = variant(&j, name);
        let u = leaf0_uplinks(v);
        let mean = u.iter().sum::<u64>() as f64 / 4.0;
        for &b in &u {
            near(&format!("{name} uplink (B)"), b as f64, mean, 0.01);
        }
        near(&format!("{name} slowest flow (ps)"), slowest(v), line, 0.10);
    }
    let flowlet = variant(&j, "flowlet");
    whole_flows("flowlet", flowlet);
    assert_eq!(nic_total(flowlet, "out_of_sequence"), 0);

    // The same spraying towards NICs that place out of order: the frames
    // still overtake each other, and are held, not dropped: nothing is
    // resent.
    let ooo = variant(&j, "spray-ooo-nic");
    assert!(nic_total(ooo, "rx_ooo_placed") > 1000);
    assert_eq!(nic_total(ooo, "out_of_sequence"), 0);
    assert_eq!(nic_total(ooo, "retransmitted_packets"), 0);
    assert_eq!(sum(ooo, "drops"), 0);
    near("spray-ooo-nic slowest flow (ps)", slowest(ooo), line, 0.10);
}

/// The training record of job `name` in a variant.
fn job<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["training"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["job"] == name)
        .unwrap_or_else(|| panic!("no job {name}"))
}

/// A job's slowdown against itself alone on the same fabric.
fn slowdown(v: &Value, name: &str) -> f64 {
    job(v, name)["slowdown"]
        .as_f64()
        .unwrap_or_else(|| panic!("{name}'s slowdown"))
}

/// A job's list of strings under `key` (`shared_links`, `paused`).
fn job_list<'a>(v: &'a Value, name: &str, key: &str) -> Vec<&'a str> {
    job(v, name)[key]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default()
}

#[test]
fn lesson_16_two_jobs_who_pays_for_whose_incast() {
    let (j, _) = lesson(16);
    let us = 1e6;
    every_step_is_compute_plus_exposed(&j);
    // A 400 Gbit/s NIC's payload rate, bytes per second.
    let payload = 400e9 / 8.0 * 4096.0 / 4158.0;
    let apart = variant(&j, "apart");
    assert_eq!(sum(apart, "pause_frames_sent"), 0);
    for name in ["moe", "dense"] {
        near(
            &format!("apart {name} slowdown"),
            slowdown(apart, name),
            1.0,
            0.01,
        );
        assert!(job_list(apart, name, "shared_links").is_empty());
    }
    let step = |v: &Value, name: &str| job(v, name)["mean_step_ps"].as_u64().unwrap() as f64;
    // 0.7 ms of compute; moe: 8 all-to-alls of 8 x 512 KiB through each
    // NIC; dense: 8 tensor-parallel all-reduces of about 30 us and 64 MiB
    // through each NIC.
    let a2a = 8.0 * (512u64 << 10) as f64 / payload * 1e12;
    near(
        "apart moe step (ps)",
        step(apart, "moe"),
        700.0 * us + 8.0 * a2a,
        0.03,
    );
    let ar = (64u64 << 20) as f64 / payload * 1e12;
    near(
        "apart dense step (ps)",
        step(apart, "dense"),
        700.0 * us + 8.0 * 30.0 * us + ar,
        0.03,
    );

    let shared = variant(&j, "shared");
    assert!(sum(shared, "pause_frames_sent") > 0);
    assert_eq!(sum(shared, "drops"), 0);
    for (name, other) in [("moe", "dense"), ("dense", "moe")] {
        let s = slowdown(shared, name);
        assert!(s > 1.03, "shared: {name} slowed {s}");
        let links = job_list(shared, name, "shared_links");
        assert!(
            !links.is_empty() && links.iter().all(|l| l.contains("spine")),
            "{name}: {links:?}"
        );
        let paused = job_list(shared, name, "paused");
        assert!(
            paused
                .iter()
                .any(|p| p.contains(&format!("(also carries {other})"))),
            "{name}: {paused:?}"
        );
    }

    let first = variant(&j, "dense-first");
    assert_eq!(sum(first, "pause_frames_sent"), 0);
    near(
        "dense-first dense slowdown",
        slowdown(first, "dense"),
        1.0,
        0.01,
    );
    // At worst one all-to-all a step waits out dense's whole gradient
    // all-reduce.
    let alone = job(first, "moe")["alone_mean_step_ps"].as_u64().unwrap() as f64;
    assert!(
        step(first, "moe") <= 1.02 * (alone + ar),
        "dense-first moe step {} ps, alone {alone} + dense's all-reduce {ar}",
        step(first, "moe")
    );
    assert!(
        slowdown(first, "moe") > slowdown(shared, "moe"),
        "moe pays more when dense goes first: {} against {}",
        slowdown(first, "moe"),
        slowdown(shared, "moe")
    );
}

/// `scenarios/websearch-poisson.toml` shows the contrast it promises: the
/// same flows drop nothing under PFC, and without it drop, resend and
/// wait for ACK timeouts in the tail.
#[test]
fn websearch_poisson_contrasts_lossless_and_lossy_tails() {
    let dir = scratch("websearch");
    let o = rocelab(&[
        "run",
        repo()
            .join("scenarios/websearch-poisson.toml")
            .to_str()
            .unwrap(),
        "--out",
        dir.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    let (ll, ly) = (variant(&j, "lossless"), variant(&j, "lossy"));
    // The same flows (same seed, same arrivals) in both variants.
    let specs = |v: &Value| -> Vec<(Value, Value, Value, Value)> {
        v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["src"].clone(),
                    f["dst"].clone(),
                    f["size"].clone(),
                    f["start_ps"].clone(),
                )
            })
            .collect()
    };
    assert!(sum(ll, "flows_total") > 100);
    assert_eq!(specs(ll), specs(ly));
    assert_eq!(sum(ll, "drops"), 0);
    assert!(sum(ll, "pause_frames_sent") > 1000);
    assert!(sum(ly, "drops") > 0 && sum(ly, "retransmitted_packets") > 0);
    assert!(sum(ly, "fct_p99_ps") > 10 * sum(ll, "fct_p99_ps"));
}

#[test]
fn lesson_18_lossy_selective_repeat_vs_lossless_pfc() {
    let (j, _) = lesson(18);
    let p99 = |v: &Value| sum(v, "fct_p99_ps") as f64 / 1e6;
    let ll = variant(&j, "lossless-go-back-n");
    assert_eq!(sum(ll, "drops"), 0);
    assert!(sum(ll, "pause_frames_sent") > 0);
    // 16 MB x 8 / 100 Gbit/s = 1.28 ms, plus a round trip.
    near("lossless p99 FCT (us)", p99(ll), 1310.0, 0.05);

    let gbn = variant(&j, "lossy-go-back-n");
    assert!(sum(gbn, "drops") > 0);
    assert!(
        sum(gbn, "fct_p99_ps") >= 4_096_000 << 14,
        "{}",
        gbn["summary"]
    );

    let sr = variant(&j, "lossy-selective-repeat");
    let drops = sum(sr, "drops");
    let resent = sum(sr, "retransmitted_packets");
    assert!(drops > 0);
    assert_eq!(nic_total(sr, "selective_retransmits"), resent);
    assert!(
        resent >= drops && resent * 2 <= drops * 3,
        "{resent} resent for {drops} drops"
    );
    assert!(nic_total(sr, "rx_ooo_placed") > 0 && nic_total(sr, "tx_sacks") > 0);
    assert!(p99(sr) < 3000.0, "selective repeat p99 {} us", p99(sr));
    assert!(p99(gbn) > 20.0 * p99(sr));
    assert_eq!(nic_total(gbn, "tx_sacks"), 0);

    let irn = variant(&j, "lossy-irn");
    assert_eq!(sum(irn, "drops"), 0);
    assert_eq!(sum(irn, "pause_frames_sent"), 0);
    assert_eq!(sum(irn, "retransmitted_packets"), 0);
    near("lossy IRN p99 FCT (us)", p99(irn), p99(ll), 0.05);

    let both = variant(&j, "lossless-irn");
    assert_eq!(sum(both, "pause_frames_sent"), 0);
    assert_eq!(sum(both, "fct_p99_ps"), sum(irn, "fct_p99_ps"));
    assert_eq!(sum(both, "fct_p50_ps"), sum(irn, "fct_p50_ps"));
}

#[test]
fn lesson_19_hpcc_against_dcqcn() {
    let (j, _) = lesson(19);
    // Leaf0's queue to h0 while the incast runs, and the incast's end.
    let during = |v: &Value| {
        let end = v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| f["workload"] == "incast")
            .map(|f| f["fct_ps"].as_u64().expect("completed"))
            .max()
            .unwrap();
        let q: Vec<f64> = v["queues"][0]["samples"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s[0].as_u64().unwrap() <= end)
            .map(|s| s[1].as_f64().unwrap())
            .collect();
        (q.iter().sum::<f64>() / q.len() as f64, end as f64)
    };
    let lat = |v: &Value| {
        let mut l: Vec<u64> = v["perftest"][0]["latency_samples_ps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect();
        l.sort_unstable();
        let p99 = l[(l.len() * 99).div_ceil(100) - 1] as f64 / 1e6;
        (p99, *l.last().unwrap() as f64 / 1e6)
    };
    let d = variant(&j, "dcqcn");
    let h = variant(&j, "hpcc");
    let (dq, dend) = during(d);
    let (hq, hend) = during(h);
    let (dp99, _) = lat(d);
    let (_, hmax) = lat(h);
    eprintln!("dcqcn queue {dq:.0} B, end {dend} ps, probe p99 {dp99} us; hpcc queue {hq:.0} B, end {hend} ps, probe max {hmax} us");
    assert!(dq > 500_000.0, "dcqcn mean queue {dq}");
    assert!(sum(d, "cnps_sent") > 0);
    assert!(dp99 > 20.0, "dcqcn probe p99 {dp99} us");
    assert!(hq < 50_000.0, "hpcc mean queue {hq}");
    assert_eq!(sum(h, "cnps_sent"), 0);
    assert_eq!(sum(h, "pause_frames_sent"), 0);
    assert!(hmax < 5.0, "hpcc probe worst {hmax} us");
    assert!(
        hend <= 0.9 * dend,
        "incast end: hpcc {hend} vs dcqcn {dend}"
    );
}

#[test]
fn lesson_20_a_failed_plane() {
    let (j, _) = lesson(20);
    let fcts = |v: &Value| -> Vec<(String, String, Option<f64>)> {
        v["flows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| {
                (
                    f["src"].as_str().unwrap().to_string(),
                    f["dst"].as_str().unwrap().to_string(),
                    f["fct_ps"].as_u64().map(|t| t as f64 / 1e6),
                )
            })
            .collect()
    };
    let delivered_all =
        |v: &Value| {
            v["flows"].as_array().unwrap().iter().all(|f| {
                f["failed"] == false && f["bytes_acked"] == f["size"] && f["fct_ps"].is_u64()
            })
        };
    // 16 MB (10^6 bytes) at 4 x 100 Gbit/s: 320 us of payload.
    let mh = variant(&j, "multipath-healthy");
    assert!(delivered_all(mh));
    assert_eq!(sum(mh, "drops"), 0);
    let worst = |v: &Value| fcts(v).iter().filter_map(|f| f.2).fold(0.0f64, f64::max);
    near("multipath healthy worst FCT (us)", worst(mh), 340.0, 0.05);

    // Plane 1 dies at 50 us: every flow completes with all its bytes, and
    // each flow between racks runs at 3/4 of its healthy rate from then
    // on: FCT = 50 us + (healthy FCT - 50 us) / (3/4), within 5 %.
    let mf = variant(&j, "multipath-failed-plane");
    assert!(delivered_all(mf), "nothing lost");
    let leaf = |h: &str| h[1..].parse::<u32>().unwrap() / 4;
    let healthy: Vec<_> = fcts(mh);
    let mut cross = 0;
    for (src, dst, t) in fcts(mf) {
        let h = healthy
            .iter()
            .find(|f| f.0 == src && f.1 == dst)
            .and_then(|f| f.2)
            .unwrap();
        let t = t.unwrap();
        if leaf(&src) == leaf(&dst) {
            // Plane 1 still joins hosts under one leaf.
            near(&format!("{src} -> {dst} within a rack"), t, h, 0.02);
        } else {
            cross += 1;
            near(
                &format!("{src} -> {dst} FCT (us)"),
                t,
                50.0 + (h - 50.0) / 0.75,
                0.05,
            );
        }
    }
    assert!(cross > 0);
    let drops = sum(mf, "drops");
    let resent = sum(mf, "retransmitted_packets");
    assert!(
        drops > 0 && resent <= drops * 3 / 2,
        "{resent} resent, {drops} drops"
    );
    assert_eq!(nic_total(mf, "path_failovers"), 4 * cross);

    // Pinned: a quarter of the NIC; on the failed plane, retry exceeded.
    let ph = variant(&j, "pinned-healthy");
    assert!(delivered_all(ph));
    near(
        "pinned healthy worst FCT (us)",
        worst(ph),
        4.0 * 320.0 * 1.025,
        0.05,
    );
    let pf = variant(&j, "pinned-failed-plane");
    let failed = pf["flows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["failed"] == true)
        .count();
    assert!(failed > 0 && failed < 16, "{failed} flows failed");
    assert_eq!(nic_total(pf, "req_cqe_error"), failed as u64);
    for (src, dst, t) in fcts(pf) {
        if let Some(t) = t {
            let h = fcts(ph)
                .into_iter()
                .find(|f| f.0 == src && f.1 == dst)
                .and_then(|f| f.2)
                .unwrap();
            near(&format!("pinned {src} -> {dst}"), t, h, 0.02);
        }
    }
}

#[test]
fn lesson_21_credits_against_pfc() {
    let (j, out) = lesson(21);
    let victim_us = |name: &str| fct_us(variant(&j, name), "h15", "h1");
    // Alone: 8 MB at 100 Gbit/s with headers, about 0.66 ms.
    let alone = 660.0;
    for name in ["roce-pfc", "infiniband"] {
        let v = variant(&j, name);
        assert_eq!(sum(v, "drops"), 0, "{name}");
        assert_eq!(sum(v, "flows_completed"), 15, "{name}");
        // Sharing the incast's class, the victim waits behind it.
        let t = victim_us(name);
        assert!(t > 3.0 * alone, "{name}: victim {t} us");
    }
    for name in ["infiniband-victim-own-vl", "roce-pfc-victim-own-priority"] {
        let t = victim_us(name);
        assert!(t < 1.5 * alone, "{name}: victim {t} us");
    }
    // The same tree, told by different counters: PAUSE on Ethernet,
    // PortXmitWait on InfiniBand, where no PAUSE exists.
    assert!(sum(variant(&j, "roce-pfc"), "pause_frames_sent") > 1000);
    let ib = variant(&j, "infiniband");
    assert_eq!(sum(ib, "pause_frames_sent"), 0);
    let wait = |node: &str, p: u64| {
        port(ib, node, p)["infiniband"]["xmit_wait"]
            .as_u64()
            .unwrap()
    };
    assert_eq!(wait("leaf0", 0), 0, "the root sends, it never waits");
    assert!(wait("spine0", 0) > 0 && wait("spine1", 0) > 0);
    assert!(
        wait("leaf1", 8) + wait("leaf1", 9) > 0,
        "leaf1 waits in turn"
    );
    assert_eq!(wait("leaf0", 1), 0, "the victim's last hop is idle");
    // The perfquery -x dumps parse, and the doctor ranks the credit wait
    // first, rooted at leaf0's port to h0.
    let dumps = out.join("counters/infiniband/switches.txt");
    let o = rocelab(&["parse", "rdma", dumps.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success() && text.contains("host spine0-p0"),
        "{text}"
    );
    let o = rocelab(&["doctor", "--json", out.to_str().unwrap()]);
    let doc: Value = serde_json::from_slice(&o.stdout).expect("doctor JSON");
    let first = doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["scope"] == "infiniband")
        .expect("a finding for the InfiniBand variant");
    assert_eq!(first["id"], "ib-credit-wait", "{first}");
    assert_eq!(first["subject"], "leaf0-p0", "{first}");
}
