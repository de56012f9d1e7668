//! perftest runs by message size: what `ib_*_bw -a` and `ib_*_lat -a`
//! measured in each variant (the results' `perftest` records), beside the
//! closed-form bound of each size and what sets it.
//!
//! Shown only when some variant has perftest records. Bandwidth tests: one
//! plot of bandwidth (`BW average`, Gbit/s) against message size (log
//! scale, powers of two), one solid line with a dot per size for each
//! variant's workload and a dashed line of the same colour for its bound
//! (`bound_bps`); under the plot, one strip per line names the limit at
//! each size (wire, PCIe, message rate, window), contiguous sizes with the
//! same limit merged into one band. Latency tests: latency (perftest's
//! average, half the round trip for WRITE and SEND; log scale) against
//! size, with the unloaded latency dashed. Then one table per variant and workload:
//! size, bandwidth, message rate, bound and limit (latency tests: the
//! average and the unloaded latency).
//!
//! Pure functions of the records: the same results give the same bytes.
//! Nothing here panics on records without a measurement (an unfinished
//! size shows as `-` and is left out of the lines).

use std::fmt::Write as _;

use sim::hostmodel::Limit;
use sim::results::{PerftestRecord, RunResult};

use super::format::md_escape;
use super::kinds::SPARE;
use super::svg::{escape, num, Axis, Plot};
use crate::simperf::by_workload;

/// The kind of the groups a perftest workload makes, one per size:
/// shown in this section, not as steps.
pub const PERFTEST_GROUP: &str = "perftest";

/// Width of the plots, px.
const WIDTH: u32 = 880;
/// Height of a plot area, px.
const AREA_HEIGHT: f64 = 260.0;
/// Height of one limit strip and the gap to the next, px.
const STRIP_ROW: f64 = 18.0;
/// Most tick labels on the size axis.
const MAX_TICKS: usize = 12;

/// Points of a line, data coordinates.
type Points = Vec<(f64, f64)>;

/// One line of a plot: a workload of a variant.
struct Series<'a> {
    /// The variant, or `variant: workload` when the variant has several.
    name: String,
    /// The program (`write_bw`).
    test: &'static str,
    color: &'static str,
    recs: Vec<&'a PerftestRecord>,
}

impl Series<'_> {
    /// Measured points (size, value) and bound points of the line:
    /// bandwidth in Gbit/s, or latency in us.
    fn points(&self, bw: bool) -> (Points, Points) {
        let mut measured = Vec::new();
        let mut bound = Vec::new();
        for r in &self.recs {
            let x = r.size as f64;
            if bw {
                if let Some(b) = r.bw_bps() {
                    measured.push((x, b / 1e9));
                }
                if r.bound_bps > 0 {
                    bound.push((x, r.bound_bps as f64 / 1e9));
                }
            } else {
                if let Some(t) = average_latency_us(r) {
                    measured.push((x, t));
                }
                if r.unloaded_latency_ps > 0 {
                    bound.push((x, r.unloaded_latency_ps as f64 / 1e6));
                }
            }
        }
        (measured, bound)
    }
}

/// The bandwidth lines (`bw`) or the latency lines of every variant, in
/// variant order; `colors` are the variants' colours.
fn series<'a>(rs: &'a [RunResult], colors: &[&'static str], bw: bool) -> Vec<Series<'a>> {
    let mut out = Vec::new();
    for (i, r) in rs.iter().enumerate() {
        let workloads = by_workload(&r.perftest);
        let several = workloads.len() > 1;
        let mut k = 0;
        for (name, recs) in workloads {
            if recs[0].test.is_bw() != bw {
                continue;
            }
            let color = match k {
                0 => colors.get(i).copied().unwrap_or(SPARE[0]),
                _ => SPARE[(k - 1) % SPARE.len()],
            };
            k += 1;
            out.push(Series {
                name: if several {
                    format!("{}: {name}", r.summary.variant)
                } else {
                    r.summary.variant.clone()
                },
                test: recs[0].test.name(),
                color,
                recs,
            });
        }
    }
    out
}

/// perftest's average latency of a latency test's size, us (the samples
/// halved for WRITE and SEND).
fn average_latency_us(r: &PerftestRecord) -> Option<f64> {
    if r.latency_samples_ps.is_empty() {
        return None;
    }
    let total: u64 = r.latency_samples_ps.iter().sum();
    let n = r.latency_samples_ps.len() as f64;
    Some(total as f64 / n / 1e6 / f64::from(r.test.rtt_factor()))
}

/// Gbit/s with three decimals below 1 (small sizes), else two.
fn gbps_text(bps: f64) -> String {
    let g = bps / 1e9;
    if g < 1.0 {
        format!("{g:.3}")
    } else {
        format!("{g:.2}")
    }
}

/// A message size as perftest users write it: `2 B`, `64 KiB`, `8 MiB`.
pub fn size_text(bytes: u64) -> String {
    const KIB: u64 = 1024;
    const MIB: u64 = 1024 * 1024;
    if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= KIB && bytes % KIB == 0 {
        format!("{} KiB", bytes / KIB)
    } else {
        format!("{bytes} B")
    }
}

/// The size axis: log scale from half a power of two below the smallest
/// size to half one above the largest, with powers of two as ticks (at
/// most [`MAX_TICKS`], from the smallest size's up).
fn size_axis(all: &[Series<'_>]) -> (Axis, Vec<f64>) {
    size_axis_of(all.iter().flat_map(|s| s.recs.iter().map(|r| r.size)))
}

/// The size axis of a plot of these sizes (bytes): see [`size_axis`].
pub(super) fn size_axis_of(sizes: impl Iterator<Item = u64>) -> (Axis, Vec<f64>) {
    let sizes: Vec<u64> = sizes.map(|s| s.max(1)).collect();
    let lo = sizes.iter().copied().min().unwrap_or(1) as f64;
    let hi = sizes.iter().copied().max().unwrap_or(1) as f64;
    let axis = Axis {
        min: lo / std::f64::consts::SQRT_2,
        max: hi * std::f64::consts::SQRT_2,
        log: true,
    };
    let first = axis.min.log2().ceil() as i32;
    let last = axis.max.log2().floor() as i32;
    let count = (last - first + 1).max(0) as usize;
    let step = count.div_ceil(MAX_TICKS).max(1);
    let ticks = (first..=last).step_by(step).map(|e| 2f64.powi(e)).collect();
    (axis, ticks)
}

/// A tick label of the size axis.
pub(super) fn size_tick(v: f64) -> String {
    size_text(v.round() as u64)
}

/// Fill of a limit's band in the strips.
fn limit_fill(l: Limit) -> &'static str {
    match l {
        Limit::Wire => "#e8e8e8",
        Limit::Pcie => "#fcd5ce",
        Limit::MessageRate => "#fdf0b0",
        Limit::Window => "#d4e6f6",
        Limit::Latency => "#dcefd6",
    }
}

/// A limit's name short enough for a narrow band.
fn limit_short(l: Limit) -> &'static str {
    match l {
        Limit::Wire => "wire",
        Limit::Pcie => "PCIe",
        Limit::MessageRate => "msg",
        Limit::Window => "win",
        Limit::Latency => "lat",
    }
}

/// About 6.5 px a character at 11 px, and a margin.
fn text_px(s: &str) -> f64 {
    6.5 * s.chars().count() as f64 + 6.0
}

/// The bandwidth plot: measured and bound per line, the limit strips
/// under it (which also name the lines).
fn bandwidth_plot(all: &[Series<'_>]) -> String {
    let (x, ticks) = size_axis(all);
    let ymax = all
        .iter()
        .flat_map(|s| {
            let (m, b) = s.points(true);
            m.into_iter().chain(b).map(|p| p.1)
        })
        .fold(0.0, f64::max);
    let y = Axis::zero_to(ymax);
    let longest = all
        .iter()
        .map(|s| s.name.chars().count())
        .max()
        .unwrap_or(0);
    let margin = (30.0 + 6.5 * longest as f64).max(62.0);
    let n = all.len() as f64;
    let top = 34.0;
    let bottom = top + AREA_HEIGHT;
    let height = bottom + 58.0 + STRIP_ROW * n + 6.0;
    let mut p = Plot::with_margin(
        WIDTH,
        height as u32,
        "perftest bandwidth by message size",
        x,
        y,
        margin,
    );
    p.shrink_bottom(height - 36.0 - bottom);
    let yticks = y.ticks();
    p.axes_with_ticks(
        (&ticks, &yticks),
        "message size (log scale)",
        "BW average (Gbit/s)",
        &size_tick,
        &num,
    );
    for s in all {
        let (measured, bound) = s.points(true);
        p.dashed_polyline(&bound, s.color, &format!("{}: bound", s.name));
        p.polyline(&measured, s.color, &s.name);
        p.markers(&measured, s.color, &s.name);
    }
    let (l, _, r, b) = p.area();
    p.label(
        l,
        b + 50.0,
        "start",
        "limit at each size (the closed forms), one strip per line:",
    );
    for (k, s) in all.iter().enumerate() {
        let row = b + 58.0 + STRIP_ROW * k as f64;
        p.band(
            (l - 16.0, l - 6.0),
            (row + 2.0, row + 12.0),
            s.color,
            &s.name,
        );
        p.label(l - 20.0, row + 11.0, "end", &s.name);
        // Each size's cell spans half a step to either side (on the log
        // axis); runs of one limit are merged into one band.
        let cells: Vec<(f64, f64, Limit, u64)> = s
            .recs
            .iter()
            .enumerate()
            .map(|(j, rec)| {
                let v = rec.size.max(1) as f64;
                let prev = j.checked_sub(1).map_or(v / std::f64::consts::SQRT_2, |i| {
                    (v * s.recs[i].size.max(1) as f64).sqrt()
                });
                let next = s.recs.get(j + 1).map_or(v * std::f64::consts::SQRT_2, |n| {
                    (v * n.size.max(1) as f64).sqrt()
                });
                (
                    p.px(prev).clamp(l, r),
                    p.px(next).clamp(l, r),
                    rec.limit,
                    rec.size,
                )
            })
            .collect();
        let mut i = 0;
        while i < cells.len() {
            let mut j = i;
            while j + 1 < cells.len() && cells[j + 1].2 == cells[i].2 {
                j += 1;
            }
            let (x0, x1, limit) = (cells[i].0, cells[j].1, cells[i].2);
            let title = if i == j {
                format!("{}: {} at {}", s.name, limit.text(), size_text(cells[i].3))
            } else {
                format!(
                    "{}: {} from {} to {}",
                    s.name,
                    limit.text(),
                    size_text(cells[i].3),
                    size_text(cells[j].3)
                )
            };
            p.band((x0, x1), (row, row + 14.0), limit_fill(limit), &title);
            let text = [limit.text(), limit_short(limit)]
                .into_iter()
                .find(|t| text_px(t) <= x1 - x0);
            if let Some(t) = text {
                p.label((x0 + x1) / 2.0, row + 11.0, "middle", t);
            }
            i = j + 1;
        }
    }
    p.finish()
}

/// The latency plot: measured and unloaded latency per line, a legend
/// under it.
fn latency_plot(all: &[Series<'_>]) -> String {
    let (x, ticks) = size_axis(all);
    // Latency spans decades (a microsecond at 2 B, milliseconds at
    // 8 MiB): a log scale keeps the small sizes readable.
    let values: Vec<f64> = all
        .iter()
        .flat_map(|s| {
            let (m, b) = s.points(false);
            m.into_iter().chain(b).map(|p| p.1)
        })
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let ymin = values.iter().copied().fold(f64::INFINITY, f64::min);
    let ymax = values.iter().copied().fold(0.0, f64::max);
    let y = Axis::log(ymin, ymax);
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    let extra = 14.0 * super::svg::legend_rows(WIDTH, &names) as f64;
    let mut p = Plot::new(
        WIDTH,
        (AREA_HEIGHT + 70.0 + extra) as u32,
        "perftest latency by message size",
        x,
        y,
    );
    p.shrink_bottom(extra);
    let yticks = y.ticks();
    p.axes_with_ticks(
        (&ticks, &yticks),
        "message size (log scale)",
        "latency (us, log scale)",
        &size_tick,
        &num,
    );
    let mut legend = Vec::new();
    for s in all {
        let (measured, bound) = s.points(false);
        p.dashed_polyline(&bound, s.color, &format!("{}: unloaded", s.name));
        p.polyline(&measured, s.color, &s.name);
        p.markers(&measured, s.color, &s.name);
        legend.push((s.name.clone(), s.color));
    }
    p.legend_below(&legend);
    p.finish()
}

/// A table of one line: size, BW average, message rate, bound, limit
/// (latency tests: size, average, unloaded latency).
fn table_html(s: &Series<'_>, bw: bool, id: usize) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<table class=\"perftest\" id=\"perftest-{id}\">\n<caption>{} ({}{})</caption>\n<thead><tr>",
        escape(&s.name),
        escape(s.test),
        if bw {
            ": BW average and bound in Gbit/s"
        } else {
            ": latency in us"
        }
    );
    let head: &[&str] = if bw {
        &["size", "BW average", "Mpps", "bound", "limit"]
    } else {
        &["size", "t_avg", "unloaded", "limit"]
    };
    for c in head {
        let _ = write!(h, "<th>{}</th>", escape(c));
    }
    h.push_str("</tr></thead>\n<tbody>\n");
    for r in &s.recs {
        let dash = || "-".to_string();
        let cells: Vec<(String, String)> = if bw {
            let b = r.bw_bps();
            vec![
                (r.size.to_string(), size_text(r.size)),
                (
                    b.map_or_else(String::new, |v| format!("{v:.0}")),
                    b.map_or_else(dash, gbps_text),
                ),
                (
                    String::new(),
                    r.msg_rate()
                        .map_or_else(dash, |m| format!("{:.3}", m / 1e6)),
                ),
                (r.bound_bps.to_string(), gbps_text(r.bound_bps as f64)),
                (String::new(), r.limit.text().to_string()),
            ]
        } else {
            let t = average_latency_us(r);
            vec![
                (r.size.to_string(), size_text(r.size)),
                (String::new(), t.map_or_else(dash, |v| format!("{v:.2}"))),
                (
                    r.unloaded_latency_ps.to_string(),
                    format!("{:.2}", r.unloaded_latency_ps as f64 / 1e6),
                ),
                (String::new(), r.limit.text().to_string()),
            ]
        };
        h.push_str("<tr>");
        for (exact, shown) in cells {
            if exact.is_empty() {
                let _ = write!(h, "<td>{}</td>", escape(&shown));
            } else {
                let _ = write!(
                    h,
                    "<td data-value=\"{}\">{}</td>",
                    escape(&exact),
                    escape(&shown)
                );
            }
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody>\n</table>\n");
    h
}

/// The section: heading, note, plots and tables; empty when no variant
/// has perftest records. `colors` are the variants' colours.
pub fn section_html(rs: &[RunResult], colors: &[&'static str]) -> String {
    let bw = series(rs, colors, true);
    let lat = series(rs, colors, false);
    if bw.is_empty() && lat.is_empty() {
        return String::new();
    }
    let mut h = String::from("<h2>perftest by message size</h2>\n");
    h.push_str(
        "<p class=\"note\">What perftest printed for each size, beside its closed-form \
         bound. Solid lines and dots: the measurement (BW average; for latency tests \
         perftest's average, half the round trip for WRITE and SEND); dashed lines of the \
         same colour: the bound, the lowest of the wire's payload rate, PCIe, the message \
         rate and the window (outstanding bytes over the round trip), or the unloaded \
         latency. The strips under the bandwidth plot name the limit that sets each size \
         (msg: message rate, win: window).</p>\n",
    );
    if !bw.is_empty() {
        h.push_str(&bandwidth_plot(&bw));
        h.push('\n');
    }
    if !lat.is_empty() {
        h.push_str(&latency_plot(&lat));
        h.push('\n');
    }
    h.push_str("<div class=\"row\">\n");
    for (id, (s, is_bw)) in bw
        .iter()
        .map(|s| (s, true))
        .chain(lat.iter().map(|s| (s, false)))
        .enumerate()
    {
        h.push_str(&table_html(s, is_bw, id));
    }
    h.push_str("</div>\n");
    h
}

/// The same tables as Markdown, under a heading; empty without perftest
/// records.
pub fn section_markdown(rs: &[RunResult], colors: &[&'static str]) -> String {
    let bw = series(rs, colors, true);
    let lat = series(rs, colors, false);
    if bw.is_empty() && lat.is_empty() {
        return String::new();
    }
    let mut m = String::from("\n## perftest by message size\n");
    for (s, is_bw) in bw
        .iter()
        .map(|s| (s, true))
        .chain(lat.iter().map(|s| (s, false)))
    {
        let _ = writeln!(m, "\n{} ({}):\n", md_escape(&s.name), md_escape(s.test));
        if is_bw {
            m.push_str(
                "| size | BW average (Gbit/s) | MsgRate (Mpps) | bound (Gbit/s) | limit |\n",
            );
            m.push_str("|---:|---:|---:|---:|---|\n");
        } else {
            m.push_str("| size | t_avg (us) | unloaded (us) | limit |\n|---:|---:|---:|---|\n");
        }
        for r in &s.recs {
            let dash = || "-".to_string();
            if is_bw {
                let _ = writeln!(
                    m,
                    "| {} | {} | {} | {} | {} |",
                    size_text(r.size),
                    r.bw_bps().map_or_else(dash, gbps_text),
                    r.msg_rate()
                        .map_or_else(dash, |v| format!("{:.3}", v / 1e6)),
                    gbps_text(r.bound_bps as f64),
                    r.limit.text()
                );
            } else {
                let _ = writeln!(
                    m,
                    "| {} | {} | {:.2} | {} |",
                    size_text(r.size),
                    average_latency_us(r).map_or_else(dash, |v| format!("{v:.2}")),
                    r.unloaded_latency_ps as f64 / 1e6,
                    r.limit.text()
                );
            }
        }
    }
    m
}

/// One sentence per perftest workload of `r`: the largest size's
/// bandwidth against its bound, the smallest size's message rate, and
/// the limit by ranges of sizes (latency tests: the smallest and largest
/// size's latency against the unloaded latency).
pub fn sentences(r: &RunResult) -> Vec<String> {
    let v = &r.summary.variant;
    let mut out = Vec::new();
    for (name, recs) in by_workload(&r.perftest) {
        let (Some(first), Some(last)) = (recs.first(), recs.last()) else {
            continue;
        };
        let test = first.test.name();
        let span = if recs.len() == 1 {
            format!("one size, {}", size_text(first.size))
        } else {
            format!(
                "{} sizes from {} to {}",
                recs.len(),
                size_text(first.size),
                size_text(last.size)
            )
        };
        if first.test.is_bw() {
            let at_last = match last.bw_bps() {
                Some(b) if last.bound_bps > 0 => format!(
                    "{:.2} Gbit/s at {}, {:.1} % of its bound ({}, {:.2} Gbit/s)",
                    b / 1e9,
                    size_text(last.size),
                    b / last.bound_bps as f64 * 100.0,
                    last.limit.text(),
                    last.bound_bps as f64 / 1e9
                ),
                Some(b) => format!("{:.2} Gbit/s at {}", b / 1e9, size_text(last.size)),
                None => format!("{} did not finish", size_text(last.size)),
            };
            let at_first = match (recs.len() > 1, first.msg_rate()) {
                (true, Some(m)) => format!(
                    "; {:.3} Mpps at {} ({})",
                    m / 1e6,
                    size_text(first.size),
                    first.limit.text()
                ),
                _ => String::new(),
            };
            out.push(format!(
                "{v}: perftest {name} ({test}, {span}): {at_last}{at_first}; the limit by size: {}.",
                limit_ranges(&recs)
            ));
        } else {
            let lat = |rec: &PerftestRecord| match average_latency_us(rec) {
                Some(t) => format!(
                    "{t:.2} us at {} (unloaded {:.2} us)",
                    size_text(rec.size),
                    rec.unloaded_latency_ps as f64 / 1e6
                ),
                None => format!("{} did not finish", size_text(rec.size)),
            };
            let more = if recs.len() > 1 {
                format!(", {}", lat(last))
            } else {
                String::new()
            };
            out.push(format!(
                "{v}: perftest {name} ({test}, {span}): {}{more}.",
                lat(first)
            ));
        }
    }
    out
}

/// `message rate from 2 B to 2 KiB, wire from 4 KiB to 8 MiB`.
fn limit_ranges(recs: &[&PerftestRecord]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < recs.len() {
        let mut j = i;
        while j + 1 < recs.len() && recs[j + 1].limit == recs[i].limit {
            j += 1;
        }
        parts.push(if i == j {
            format!("{} at {}", recs[i].limit.text(), size_text(recs[i].size))
        } else {
            format!(
                "{} from {} to {}",
                recs[i].limit.text(),
                size_text(recs[i].size),
                size_text(recs[j].size)
            )
        });
        i = j + 1;
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_perftest_users_write_them() {
        assert_eq!(size_text(2), "2 B");
        assert_eq!(size_text(1000), "1000 B");
        assert_eq!(size_text(65536), "64 KiB");
        assert_eq!(size_text(8 << 20), "8 MiB");
        assert_eq!(size_tick(2048.0), "2 KiB");
    }
}
