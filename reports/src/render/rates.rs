//! "Throughput over time": the delivery rate of chosen flows
//! (`record.flow_rates`), one panel per variant on the shared time axis
//! and a shared rate scale.
//!
//! Which flows: first the flows the scenario names (the ground truth's
//! victim workload, then `flow N` in the narrative), then the variant's
//! slowest flow, then the others by id, at most [`MAX_RATE_FLOWS`] (the
//! panel says how many were left out).
//!
//! At what interval: a flow's delivered bytes advance in steps (one ACK,
//! or one completed work request: at 400 Gbit/s a 10 us sample holds
//! either nothing or a whole step, a comb between 0 and a multiple of the
//! line rate). Each flow's interval is chosen from its own data: its
//! delivery step (the amount its samples, but the first and last, are
//! whole multiples of) and its mean rate while active give how long
//! [`STEPS_PER_BIN`] steps take, and its samples are averaged over bins
//! that long (at most the run over [`MIN_BINS`]). The page says the
//! intervals used. Pure function of the results and the context.

use std::fmt::Write as _;

use sim::results::{FlowRateSeries, RunResult};

use super::context::{self, Context};
use super::format::fmt_time;
use super::svg::{decimate, escape, legend_rows, num, Axis, Plot, PALETTE};
use super::zoom;

/// Most flows drawn in one panel.
pub const MAX_RATE_FLOWS: usize = 6;
/// Delivery steps of a flow at its mean rate in one bin.
pub const STEPS_PER_BIN: u64 = 4;
/// Fewest bins over the run (bins are never longer than the run over it).
pub const MIN_BINS: u64 = 16;

/// The flows of `r` to draw, in order (see the module docs); `victim`:
/// the ground truth's victim workload; `named`: flow ids the narrative
/// names.
fn chosen<'a>(r: &'a RunResult, victim: Option<&str>, named: &[u32]) -> Vec<&'a FlowRateSeries> {
    let slowest = context::slowest_flow(r).map(|f| f.id);
    let mut order: Vec<&FlowRateSeries> = r.flow_rates.iter().collect();
    order.sort_by_key(|f| {
        let rank = if Some(f.workload.as_str()) == victim {
            0
        } else if named.contains(&f.id) {
            1
        } else if Some(f.id) == slowest {
            2
        } else {
            3
        };
        (rank, f.id)
    });
    order
}

/// Flow ids the narrative names as `flow N`.
fn named_flows(ctx: &Context) -> Vec<u32> {
    let text = ctx.narrative.join(" ");
    let mut out = Vec::new();
    for (i, _) in text.match_indices("flow ") {
        let digits: String = text[i + 5..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        if let Ok(id) = digits.parse::<u32>() {
            if !out.contains(&id) {
                out.push(id);
            }
        }
    }
    out
}

/// The bin length (ps) for `flows` over a run of `end_ps`: how long
/// [`STEPS_PER_BIN`] delivery steps take at the slowest mean rate of a
/// drawn flow, in whole sample intervals, at most `end_ps / MIN_BINS`.
fn bin_ps(flows: &[&FlowRateSeries], end_ps: u64) -> u64 {
    let interval = flows
        .iter()
        .map(|f| f.interval_ps)
        .max()
        .unwrap_or(1)
        .max(1);
    let mut want = interval;
    for f in flows {
        // Bytes delivered in each sample (the sampler wrote them as a
        // rate over the interval, rounded down).
        let every = u128::from(f.interval_ps.max(1));
        let bytes: Vec<u128> = f
            .samples
            .iter()
            .map(|s| (u128::from(s.1) * every + 4_000_000_000_000) / 8_000_000_000_000)
            .collect();
        let active: Vec<usize> = (0..bytes.len()).filter(|&k| bytes[k] > 0).collect();
        let (Some(&first), Some(&last)) = (active.first(), active.last()) else {
            continue;
        };
        // The delivery step: the largest amount every sample is a whole
        // number of, leaving out the first and last active samples (a
        // flow's last step is what remains of it).
        let inner = if active.len() > 2 {
            &active[1..active.len() - 1]
        } else {
            &active[..]
        };
        let step = inner.iter().fold(0, |g, &k| gcd(g, bytes[k]));
        let span = u128::from(f.samples[last].0 - f.samples[first].0) + every;
        let total: u128 = bytes.iter().sum();
        // Time for STEPS_PER_BIN steps at the mean active rate.
        let need = u128::from(STEPS_PER_BIN) * step * span / total.max(1);
        want = want.max(u64::try_from(need).unwrap_or(u64::MAX));
    }
    let cap = (end_ps / MIN_BINS).max(interval);
    let bin = want.min(cap);
    // Whole sample intervals.
    bin.div_ceil(interval) * interval
}

fn gcd(a: u128, b: u128) -> u128 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// `samples` averaged over bins of `bin` ps (each point at its bin's
/// end), as (us, Gbit/s).
fn binned(f: &FlowRateSeries, bin: u64) -> Vec<(f64, f64)> {
    let per = (bin / f.interval_ps.max(1)).max(1) as usize;
    f.samples
        .chunks(per)
        .map(|c| {
            let t = c.last().map_or(0, |s| s.0);
            let mean = c.iter().map(|s| s.1 as f64).sum::<f64>() / c.len() as f64;
            (t as f64 / 1e6, mean / 1e9)
        })
        .collect()
}

/// The throughput-over-time section: notes and one panel per variant
/// with rate series, then the interactive charts. `end_us`: the shared
/// time axis' end; `zoom_columns`: data columns of an interactive chart.
pub fn flow_rate_plots(
    rs: &[RunResult],
    ctx: &Context,
    end_us: f64,
    zoom_columns: usize,
) -> String {
    if rs.iter().all(|r| r.flow_rates.is_empty()) {
        return "<p class=\"note\">No flow rate series recorded (add <code>flow_rates = \
                true</code> to <code>[record]</code>).</p>\n"
            .to_string();
    }
    let named = named_flows(ctx);
    let end_ps = (end_us * 1e6) as u64;
    let mut panels = Vec::new();
    let mut notes = String::new();
    for (v, r) in rs
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.flow_rates.is_empty())
    {
        let victim = ctx
            .diagnoses
            .get(v)
            .and_then(Option::as_ref)
            .and_then(|d| d.victim.as_deref());
        let mut order = chosen(r, victim, &named);
        let left_out = order.len().saturating_sub(MAX_RATE_FLOWS);
        order.truncate(MAX_RATE_FLOWS);
        let interval = order.iter().map(|f| f.interval_ps).max().unwrap_or(0);
        let mut bins: Vec<u64> = Vec::new();
        let series: Vec<(String, Vec<(f64, f64)>)> = order
            .iter()
            .map(|f| {
                let mut name = match r.flows.iter().find(|x| x.id == f.id) {
                    Some(x) => format!("flow {} {}->{}", f.id, x.src, x.dst),
                    None => format!("flow {}", f.id),
                };
                if Some(f.workload.as_str()) == victim {
                    name.push_str(" (victim)");
                }
                // Each flow at its own interval: a line-rate victim keeps
                // its detail beside a crawling incast.
                let bin = bin_ps(&[f], end_ps);
                bins.push(bin);
                (name, binned(f, bin))
            })
            .collect();
        let lo = bins.iter().copied().min().unwrap_or(interval);
        let hi = bins.iter().copied().max().unwrap_or(interval);
        let over = if lo == hi {
            fmt_time(lo)
        } else {
            format!("{} to {}, by flow", fmt_time(lo), fmt_time(hi))
        };
        let _ = writeln!(
            notes,
            "<p class=\"note\">{}: each point is the mean over {}{}.</p>",
            escape(&r.summary.variant),
            over,
            if hi > interval {
                format!(
                    " (samples of {}: a flow's deliveries arrive in steps, and a point over \
                     fewer than {STEPS_PER_BIN} steps would swing between 0 and a multiple of \
                     its rate)",
                    fmt_time(interval)
                )
            } else {
                String::new()
            }
        );
        panels.push((v, r, series, left_out));
    }
    let ymax = panels
        .iter()
        .flat_map(|p| p.2.iter().flat_map(|s| s.1.iter().map(|pt| pt.1)))
        .fold(0.0, f64::max);
    let y = Axis::zero_to(ymax);
    let mut out = notes;
    out.push_str("<div class=\"row\">\n");
    let mut charts = Vec::new();
    for (v, r, series, left_out) in panels {
        let title = format!("{}: throughput of chosen flows", r.summary.variant);
        let names: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
        let legend_rows = legend_rows(520, &names);
        let extra = 14.0 * (legend_rows + usize::from(left_out > 0)) as f64;
        let mut p = Plot::new(
            520,
            (280.0 + extra) as u32,
            &title,
            Axis::linear(0.0, end_us),
            y,
        );
        p.shrink_bottom(extra);
        p.axes("time (us)", "Gbit/s delivered", &num, &num);
        let mut legend = Vec::new();
        let mut zoomed = Vec::new();
        for (k, (name, pts)) in series.into_iter().enumerate() {
            let c = PALETTE[k % PALETTE.len()];
            let cols = p.area_width() as usize;
            p.polyline(&decimate(&pts, cols), c, &name);
            zoomed.push(zoom::Series {
                name: name.clone(),
                color: c,
                points: decimate(&pts, zoom_columns),
            });
            legend.push((name, c));
        }
        if left_out > 0 {
            let (_, _, rr, b) = p.area();
            p.label(
                rr,
                b + 42.0 + 14.0 * legend_rows as f64,
                "end",
                &format!("{left_out} more flows not drawn (results.json has them all)"),
            );
        }
        p.legend_below(&legend);
        out.push_str(&p.finish());
        out.push('\n');
        charts.push(zoom::chart_html(
            &format!("zoom-rate-{v}"),
            &zoom::Chart {
                title: format!(
                    "{}: throughput of chosen flows: drag to zoom, double-click to reset",
                    r.summary.variant
                ),
                xlabel: "time (us)".into(),
                ylabel: "Gbit/s delivered".into(),
                series: zoomed,
            },
        ));
    }
    out.push_str("</div>\n");
    out.push_str(&charts.concat());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(id: u32, workload: &str, samples: Vec<(u64, u64)>) -> FlowRateSeries {
        FlowRateSeries {
            id,
            workload: workload.into(),
            interval_ps: 10_000_000,
            samples,
        }
    }

    #[test]
    fn a_comb_of_whole_steps_is_averaged_over_several_steps() {
        // 210 Gbit/s for one 10 us sample in five: a 262.5 KB step every
        // 50 us, 42 Gbit/s on average.
        let comb: Vec<(u64, u64)> = (1..=300u64)
            .map(|k| (k * 10_000_000, if k % 5 == 0 { 210_000_000_000 } else { 0 }))
            .collect();
        let f = series(0, "incast", comb);
        let bin = bin_ps(&[&f], 6_000_000_000);
        // Four steps at 42 Gbit/s: 200 us.
        assert_eq!(bin, 200_000_000);
        let pts = binned(&f, bin);
        assert!(pts.iter().all(|p| (p.1 - 42.0).abs() < 1e-9), "{pts:?}");
        // A smooth series keeps its own interval.
        let flat = series(
            1,
            "incast",
            (1..=300u64)
                .map(|k| {
                    let gbps = if k % 2 == 0 { 49 } else { 51 };
                    (k * 10_000_000, gbps * 1_000_000_000)
                })
                .collect(),
        );
        assert_eq!(bin_ps(&[&flat], 3_000_000_000), 10_000_000);
    }

    #[test]
    fn the_victim_and_named_flows_come_first() {
        let mut r: RunResult = serde_json::from_str(
            r#"{"summary":{"variant":"v","sim_time_ps":1,"events":1,"flows_completed":0,
            "flows_total":0,"goodput_bps":0.0,"drops":0,"pause_frames_sent":0,"pause_time_ps":0,
            "ecn_marked":0,"cnps_sent":0,"retransmitted_packets":0,"fct_p50_ps":null,
            "fct_p99_ps":null,"max_fct_ps":null,"makespan_ps":0,"bytes_delivered":0,
            "frames_sent":0,"stop_reason":"idle"},"flows":[],"groups":[],"ports":[],"nics":[],
            "queues":[],"pauses":[]}"#,
        )
        .unwrap();
        r.flow_rates = (0..15)
            .map(|i| series(i, if i == 14 { "victim" } else { "incast" }, vec![]))
            .collect();
        let ids = |v: Vec<&FlowRateSeries>| v.iter().map(|f| f.id).take(3).collect::<Vec<_>>();
        assert_eq!(ids(chosen(&r, Some("victim"), &[9])), vec![14, 9, 0]);
        let ctx = Context {
            narrative: vec!["Watch flow 9 and flow 12.".into()],
            ..Context::default()
        };
        assert_eq!(named_flows(&ctx), vec![9, 12]);
    }
}
