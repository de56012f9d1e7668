//! Training jobs: what each step cost and why (the results' `training`
//! records).
//!
//! Shown only when some variant ran a training job. One plot of bars,
//! one per variant and job: its mean step split into compute (the
//! variant's colour) and exposed communication (grey), in milliseconds,
//! so variants and jobs line up. Then per variant and job a table of
//! steps (time, compute, exposed, the collective exposed longest with
//! what held it back and where) and, when other jobs shared the fabric,
//! the step time alone, the slowdown, the links shared with them and the
//! ports PAUSE held on its paths.
//!
//! Pure functions of the records: the same results give the same bytes;
//! a step that did not finish shows `-`.

use std::fmt::Write as _;

use sim::results::{RunResult, StepRecord, TrainingRecord};

use super::format::md_escape;
use super::svg::{escape, num, Axis, Plot};

/// Width of the plot, px.
const WIDTH: u32 = 880;

/// Colour of the exposed part of a bar.
const EXPOSED: &str = "#999";
/// The colour of a pipeline's bubble.
const BUBBLE: &str = "#d8d8d8";

/// One job of one variant.
struct Job<'a> {
    /// `variant: job`.
    name: String,
    color: &'static str,
    rec: &'a TrainingRecord,
}

fn jobs<'a>(rs: &'a [RunResult], colors: &[&'static str]) -> Vec<Job<'a>> {
    let mut out = Vec::new();
    for (i, r) in rs.iter().enumerate() {
        for rec in &r.training {
            out.push(Job {
                name: format!("{}: {}", r.summary.variant, rec.job),
                color: colors.get(i).copied().unwrap_or("#000"),
                rec,
            });
        }
    }
    out
}

fn ms(ps: u64) -> String {
    format!("{:.3}", ps as f64 / 1e9)
}

/// The mean step of a job split as the records do: compute, exposed
/// and pipeline bubble per step, averaged over the finished steps (ps).
fn mean_split(rec: &TrainingRecord) -> Option<(u64, u64, u64)> {
    let done: Vec<&StepRecord> = rec.steps.iter().filter(|s| s.time_ps.is_some()).collect();
    if done.is_empty() {
        return None;
    }
    let n = done.len() as u64;
    let c = done.iter().map(|s| s.compute_ps).sum::<u64>() / n;
    let e = done.iter().map(|s| s.exposed_ps).sum::<u64>() / n;
    let w = done.iter().map(|s| s.bubble_ps).sum::<u64>() / n;
    Some((c, e, w))
}

fn plot(all: &[Job<'_>]) -> String {
    let max = all
        .iter()
        .filter_map(|j| mean_split(j.rec))
        .map(|(c, e, w)| (c + e + w) as f64 / 1e9)
        .fold(0.0, f64::max);
    let row = 26.0;
    let height = 80 + (row * all.len() as f64) as u32;
    // Room right of the longest bar for its label.
    let x = Axis::zero_to((max * 1.25).max(1e-6));
    let xticks = x.ticks();
    let mut p = Plot::with_margin(
        WIDTH,
        height,
        "Mean step: compute and exposed communication",
        x,
        Axis::linear(0.0, 1.0),
        220.0,
    );
    p.axes_with_ticks(
        (&xticks, &[]),
        "mean step (ms)",
        "job",
        &|v| num(v),
        &|_| String::new(),
    );
    let (l, t, _, _) = p.area();
    for (i, j) in all.iter().enumerate() {
        let y0 = t + 6.0 + row * i as f64;
        p.label(l - 6.0, y0 + 14.0, "end", &j.name);
        match mean_split(j.rec) {
            Some((c, e, w)) => {
                let (c, e, w) = (c as f64 / 1e9, e as f64 / 1e9, w as f64 / 1e9);
                p.span(0.0, c, y0, y0 + 18.0, j.color);
                p.span(c, c + e, y0, y0 + 18.0, EXPOSED);
                if w > 0.0 {
                    p.span(c + e, c + e + w, y0, y0 + 18.0, BUBBLE);
                }
                let x = p.px(c + e + w) + 4.0;
                p.label(x, y0 + 14.0, "start", &format!("{:.3} ms", c + e + w));
            }
            None => p.label(l + 4.0, y0 + 14.0, "start", "did not finish"),
        }
    }
    let mut legend = vec![("exposed".to_string(), EXPOSED)];
    if all
        .iter()
        .any(|j| j.rec.steps.iter().any(|s| s.bubble_ps > 0))
    {
        legend.push(("pipeline bubble".to_string(), BUBBLE));
    }
    p.legend(&legend);
    p.finish()
}

const HEADERS: [&str; 6] = [
    "step",
    "time (ms)",
    "compute (ms)",
    "exposed (ms)",
    "most exposed",
    "held back by",
];

fn cells(s: &StepRecord) -> [String; 6] {
    let dash = || "-".to_string();
    let top = s
        .critical
        .as_ref()
        .and_then(|l| s.collectives.iter().find(|c| &c.label == l));
    [
        s.step.to_string(),
        s.time_ps.map_or_else(dash, ms),
        ms(s.compute_ps),
        ms(s.exposed_ps),
        top.map_or_else(dash, |c| format!("{} ({} ms)", c.label, ms(c.exposed_ps))),
        top.map_or_else(dash, |c| match (&c.limit, &c.bottleneck) {
            (Some(l), Some(b)) => format!("{l} at {b}"),
            (Some(l), None) => l.clone(),
            _ => dash(),
        }),
    ]
}

/// Lines under a job's table: its mean step, and with other jobs its
/// step alone, the slowdown, the shared links and the paused ports.
fn notes(rec: &TrainingRecord) -> Vec<String> {
    let mut v = Vec::new();
    if let Some(m) = rec.mean_step_ps {
        v.push(format!("Mean step {} ms.", ms(m)));
    }
    if let (Some(a), Some(s)) = (rec.alone_mean_step_ps, rec.slowdown) {
        v.push(format!(
            "Alone on the same fabric its mean step is {} ms: the other jobs slow it {s:.2}x.",
            ms(a)
        ));
    }
    if let Some((_, e, w)) = mean_split(rec).filter(|x| x.2 > 0) {
        v.push(format!(
            "Pipeline bubble: its slowest rank waits {} ms a step for other stages to send it activations or gradients, beside {} ms of exposed communication; more microbatches shrink it.",
            ms(w),
            ms(e)
        ));
    }
    if !rec.shared_links.is_empty() {
        v.push(format!(
            "Links it shares with other jobs: {}.",
            rec.shared_links.join("; ")
        ));
    }
    if !rec.paused.is_empty() {
        v.push(format!(
            "Ports on its paths PAUSE held while it ran: {}.",
            rec.paused.join("; ")
        ));
    }
    if let Some(h) = rec.healthy_mean_step_ps {
        let costs: Vec<String> = rec
            .steps
            .iter()
            .filter_map(|s| {
                let c = s.fault_cost_ps?;
                Some(format!("step {} {:+.3} ms", s.step, c as f64 / 1e9))
            })
            .collect();
        v.push(format!(
            "Without this variant's faults its mean step is {} ms; what the faults cost each step: {}.",
            ms(h),
            if costs.is_empty() {
                "unknown (a step did not finish)".to_string()
            } else {
                costs.join(", ")
            }
        ));
    }
    v
}

/// The section as HTML; empty without training jobs.
pub fn section_html(rs: &[RunResult], colors: &[&'static str]) -> String {
    let all = jobs(rs, colors);
    if all.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>Training steps</h2>\n");
    h.push_str(
        "<p class=\"note\">Each training job's steps: compute (the job's forward, backward \
         and optimizer) and the communication no compute covered (exposed). A bucket's \
         gradient all-reduce hides behind the backward pass that follows it; tensor-parallel \
         all-reduces and MoE all-to-alls hold the compute until they end. The tables name \
         the collective exposed longest in each step and what held it back.</p>\n",
    );
    h.push_str(&plot(&all));
    h.push('\n');
    for j in &all {
        let _ = write!(
            h,
            "<table class=\"training\"><caption>{}</caption><tr>",
            escape(&j.name)
        );
        for c in HEADERS {
            let _ = write!(h, "<th>{}</th>", escape(c));
        }
        h.push_str("</tr>\n");
        for s in &j.rec.steps {
            h.push_str("<tr>");
            for c in cells(s) {
                let _ = write!(h, "<td>{}</td>", escape(&c));
            }
            h.push_str("</tr>\n");
        }
        h.push_str("</table>\n");
        for n in notes(j.rec) {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(&n));
        }
    }
    h
}

/// The tables as Markdown under a heading; empty without training jobs.
pub fn section_markdown(rs: &[RunResult], colors: &[&'static str]) -> String {
    let all = jobs(rs, colors);
    if all.is_empty() {
        return String::new();
    }
    let mut m = String::from("\n## Training steps\n");
    for j in &all {
        let _ = writeln!(m, "\n{}:\n", md_escape(&j.name));
        let _ = writeln!(m, "| {} |", HEADERS.join(" | "));
        m.push_str("|---:|---:|---:|---:|---|---|\n");
        for s in &j.rec.steps {
            let _ = writeln!(m, "| {} |", cells(s).map(|x| md_escape(&x)).join(" | "));
        }
        for n in notes(j.rec) {
            let _ = writeln!(m, "\n{}", md_escape(&n));
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::evidence::empty_run;
    use sim::results::StepCollective;

    fn step(step: u32, time: Option<u64>) -> StepRecord {
        StepRecord {
            step,
            start_ps: Some(0),
            finish_ps: time,
            time_ps: time,
            compute_ps: 10_000_000_000,
            exposed_ps: 2_000_000_000,
            bubble_ps: 0,
            critical: Some("dp all_reduce bucket 3".into()),
            healthy_time_ps: None,
            fault_cost_ps: None,
            collectives: vec![StepCollective {
                label: "dp all_reduce bucket 3".into(),
                time_ps: 2_500_000_000,
                exposed_ps: 2_000_000_000,
                limit: Some("nic".into()),
                bottleneck: Some("h0:0 -> leaf0".into()),
                last_host: Some("h4".into()),
            }],
        }
    }

    /// A row per step with compute, exposed and the most exposed
    /// collective with where it was held; the slowdown and shared links
    /// under it; no training, no section.
    #[test]
    fn steps_get_rows_and_the_job_its_slowdown() {
        let mut r = empty_run("default");
        r.training.push(TrainingRecord {
            job: "gpt".into(),
            steps: vec![step(0, Some(12_000_000_000)), step(1, None)],
            mean_step_ps: None,
            critical: Some("dp all_reduce bucket 3".into()),
            alone_mean_step_ps: Some(10_000_000_000),
            slowdown: Some(1.2),
            shared_links: vec!["leaf0:9 -> spine0: 1.0 MB of it, 2.0 MB of others".into()],
            paused: Vec::new(),
            healthy_mean_step_ps: None,
        });
        let m = section_markdown(std::slice::from_ref(&r), &["#000"]);
        assert!(
            m.contains("| 0 | 12.000 | 10.000 | 2.000 | dp all\\_reduce bucket 3 (2.000 ms) | nic at h0:0 -\\> leaf0 |"),
            "{m}"
        );
        assert!(m.contains("| 1 | - | 10.000 |"), "{m}");
        assert!(m.contains("slow it 1.20x"), "{m}");
        assert!(m.contains("leaf0:9 -\\> spine0"), "{m}");
        let h = section_html(std::slice::from_ref(&r), &["#000"]);
        assert!(
            h.contains("<h2>Training steps</h2>") && h.contains("<svg"),
            "{h}"
        );
        assert!(section_html(&[empty_run("x")], &["#000"]).is_empty());
    }

    /// A pipeline's bubble gets its own bar segment and legend entry and
    /// a note; a job without one gets neither.
    #[test]
    fn a_pipeline_bubble_is_drawn_and_said() {
        let mut r = empty_run("default");
        let mut s = step(0, Some(15_000_000_000));
        s.bubble_ps = 3_000_000_000;
        r.training.push(TrainingRecord {
            job: "pp".into(),
            steps: vec![s],
            mean_step_ps: Some(15_000_000_000),
            critical: None,
            alone_mean_step_ps: None,
            slowdown: None,
            shared_links: Vec::new(),
            paused: Vec::new(),
            healthy_mean_step_ps: None,
        });
        let h = section_html(std::slice::from_ref(&r), &["#000"]);
        assert!(h.contains("pipeline bubble") && h.contains(BUBBLE), "{h}");
        let m = section_markdown(std::slice::from_ref(&r), &["#000"]);
        assert!(m.contains("waits 3.000 ms a step"), "{m}");
        r.training[0].steps[0].bubble_ps = 0;
        let h = section_html(std::slice::from_ref(&r), &["#000"]);
        assert!(!h.contains("pipeline bubble") && !h.contains(BUBBLE), "{h}");
    }
}
