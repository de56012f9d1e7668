//! The sweep report: `sweep.html`, rendered from a sweep's table
//! ([`sim::sweep::Table`]).
//!
//! Contents: the table (one row per point and variant: swept values,
//! seed, headline metrics) and one plot per metric with the first grid key
//! on the x axis (the seed when the sweep has no grid), one line per
//! combination of the other keys' values and variant, each point the mean
//! over the seeds. Values that are all numbers make a linear x axis;
//! otherwise the values are categories in file order.
//!
//! Contract: as [`super::html`]: the output depends only on the table, so
//! the same table gives the same bytes; every text from the input is
//! escaped; rendering never panics.

use std::fmt::Write as _;

use sim::sweep::{Row, Table};

use super::format::{fmt_rate, fmt_time};
use super::svg::PALETTE;
use super::svg::{escape, legend_rows, num, Axis, Plot};
use super::{CHECK_JS, CSS};

/// A metric of the summary plotted over the sweep: field, title, axis
/// label and the scale from the field's unit to the axis's.
const METRICS: [(&str, &str, &str, f64); 5] = [
    ("goodput_bps", "Goodput", "Gbit/s", 1e-9),
    ("fct_p99_ps", "FCT p99", "us", 1e-6),
    ("makespan_ps", "Makespan", "us", 1e-6),
    ("drops", "Drops", "frames", 1.0),
    ("pause_frames_sent", "PAUSE frames sent", "frames", 1.0),
];

fn field<'a>(o: &'a [(String, serde_json::Value)], k: &str) -> Option<&'a serde_json::Value> {
    o.iter().find(|(n, _)| n == k).map(|(_, v)| v)
}

fn text(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        serde_json::Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The x value of a row (the first grid key, else the seed) as text.
fn x_of(r: &Row) -> String {
    r.set
        .0
        .first()
        .map_or_else(|| r.seed.to_string(), |(_, v)| text(v))
}

/// The series a row belongs to: the other grid keys' values and the
/// variant.
fn series_of(r: &Row) -> String {
    let mut parts: Vec<String> = r
        .set
        .0
        .iter()
        .skip(1)
        .map(|(k, v)| format!("{k}={}", text(v)))
        .collect();
    parts.push(r.variant.clone());
    parts.join(" ")
}

/// The whole sweep report as one HTML page.
pub fn html(table: &Table) -> String {
    let m = &table.manifest;
    let rows = table.rows();
    let mut h = String::new();
    let title = format!("rocelab sweep: {}", m.scenario);
    let keys = if m.keys.is_empty() {
        "none (seeds only)".to_string()
    } else {
        m.keys.join(", ")
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>{}</title>\n<style>{CSS}</style>\n<script>{CHECK_JS}</script>\n</head>\n<body>\n<h1>{}</h1>\n\
         <p>{} points, {} rows; grid keys: {}.</p>\n",
        escape(&title),
        escape(&title),
        m.points.len(),
        rows.len(),
        escape(&keys)
    );
    h.push_str(&plots(&m.keys, &rows));
    h.push_str("<h2>Table</h2>\n<table id=\"sweep\">\n<thead><tr><th>point</th>");
    for k in &m.keys {
        let _ = write!(h, "<th>{}</th>", escape(k));
    }
    h.push_str(
        "<th>seed</th><th>variant</th><th>flows completed</th><th>goodput</th>\
         <th>FCT p99</th><th>drops</th><th>PAUSE frames</th></tr></thead>\n<tbody>\n",
    );
    for r in &rows {
        let s = &r.summary.0;
        let n = |k: &str| field(s, k).and_then(serde_json::Value::as_u64);
        let _ = write!(h, "<tr><td>{}</td>", r.point);
        for (_, v) in &r.set.0 {
            let _ = write!(h, "<td>{}</td>", escape(&text(v)));
        }
        let _ = writeln!(
            h,
            "<td>{}</td><td>{}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            r.seed,
            escape(&r.variant),
            n("flows_completed").unwrap_or(0),
            n("flows_total").unwrap_or(0),
            escape(&fmt_rate(
                field(s, "goodput_bps")
                    .and_then(serde_json::Value::as_f64)
                    .unwrap_or(0.0)
            )),
            n("fct_p99_ps").map_or("none finished".to_string(), fmt_time),
            n("drops").unwrap_or(0),
            n("pause_frames_sent").unwrap_or(0)
        );
    }
    h.push_str("</tbody>\n</table>\n</body>\n</html>\n");
    h
}

/// One plot per metric over the first grid key.
fn plots(keys: &[String], rows: &[Row]) -> String {
    if rows.is_empty() {
        return "<p class=\"note\">No rows: nothing to plot.</p>\n".to_string();
    }
    let xlabel = keys.first().map_or("seed", String::as_str);
    // x values in first-seen (sweep) order; numeric when all are numbers.
    let mut xs: Vec<String> = Vec::new();
    for r in rows {
        let x = x_of(r);
        if !xs.contains(&x) {
            xs.push(x);
        }
    }
    let numeric: Option<Vec<f64>> = xs.iter().map(|x| x.parse::<f64>().ok()).collect();
    let xpos = |x: &str| -> f64 {
        match &numeric {
            Some(v) => v[xs.iter().position(|y| y == x).unwrap_or(0)],
            None => xs.iter().position(|y| y == x).unwrap_or(0) as f64,
        }
    };
    let xaxis = match &numeric {
        Some(v) => {
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            let pad = ((hi - lo) * 0.05).max(1e-9);
            Axis::linear(lo - pad, hi + pad)
        }
        None => Axis::linear(-0.5, xs.len() as f64 - 0.5),
    };
    let fx = |v: f64| -> String {
        if numeric.is_some() {
            return num(v);
        }
        let i = v.round();
        if (v - i).abs() < 1e-9 && i >= 0.0 && (i as usize) < xs.len() {
            xs[i as usize].clone()
        } else {
            String::new()
        }
    };
    let mut series: Vec<String> = Vec::new();
    for r in rows {
        let s = series_of(r);
        if !series.contains(&s) {
            series.push(s);
        }
    }
    let mut out = String::from("<h2>Over the sweep</h2>\n<div class=\"row\">\n");
    for (fieldname, title, unit, scale) in METRICS {
        // (series, x) -> (sum, count) over seeds.
        let mut acc: Vec<Vec<(f64, usize)>> = vec![vec![(0.0, 0); xs.len()]; series.len()];
        for r in rows {
            let Some(y) = field(&r.summary.0, fieldname).and_then(serde_json::Value::as_f64) else {
                continue;
            };
            let si = series.iter().position(|s| *s == series_of(r)).unwrap_or(0);
            let xi = xs.iter().position(|x| *x == x_of(r)).unwrap_or(0);
            acc[si][xi].0 += y * scale;
            acc[si][xi].1 += 1;
        }
        let top = acc
            .iter()
            .flatten()
            .filter(|(_, n)| *n > 0)
            .map(|(s, n)| s / *n as f64)
            .fold(0.0, f64::max);
        // Every series in the legend under the plot, one a row when the
        // names are long: the canvas grows to hold them.
        let names: Vec<&str> = series.iter().map(String::as_str).collect();
        let extra = 14.0 * legend_rows(480, &names) as f64;
        let mut p = Plot::new(
            480,
            (300.0 + extra) as u32,
            &format!("{title} over {xlabel}"),
            xaxis,
            Axis::zero_to(top),
        );
        p.shrink_bottom(extra);
        p.axes(xlabel, &format!("{title} ({unit})"), &fx, &num);
        let mut legend = Vec::new();
        for (si, name) in series.iter().enumerate() {
            let pts: Vec<(f64, f64)> = xs
                .iter()
                .zip(&acc[si])
                .filter(|(_, (_, n))| *n > 0)
                .map(|(x, (s, n))| (xpos(x), s / *n as f64))
                .collect();
            if pts.is_empty() {
                continue;
            }
            p.polyline(&pts, PALETTE[si % PALETTE.len()], name);
            p.markers(&pts, PALETTE[si % PALETTE.len()], name);
            legend.push((name.clone(), PALETTE[si % PALETTE.len()]));
        }
        p.legend_below(&legend);
        out.push_str(&p.finish());
        out.push('\n');
    }
    out.push_str("</div>\n");
    out
}
