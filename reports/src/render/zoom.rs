//! Zoom and hover: interactive time-series charts drawn in the page by
//! uPlot (MIT; `vendor/uplot/`, version and origin in its README),
//! inlined so the report stays one file that works offline.
//!
//! Each chart is a `<div class="zoom">` and its data, a
//! `<script type="application/json" class="zoom-data">` holding the title,
//! axis labels and series (`x` in us, `y` in the axis' unit). `zoom.js`
//! draws them: drag across a chart to zoom into a time range,
//! double-click to reset, hover to read every series' value. The SVG
//! plots stay the static evidence (and the Markdown has none of this).
//! The JSON is written by serde_json with `<` escaped, so no text from
//! the results can close the script element.

use std::fmt::Write as _;

use super::svg::escape;

const UPLOT_JS: &str = include_str!("vendor/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &str = include_str!("vendor/uplot/uPlot.min.css");
const ZOOM_JS: &str = include_str!("zoom.js");

/// One line of a chart.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// CSS colour.
    pub color: &'static str,
    /// `(x, y)` points in x order.
    pub points: Vec<(f64, f64)>,
}

/// One interactive chart.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Title above the chart.
    pub title: String,
    /// X axis label.
    pub xlabel: String,
    /// Y axis label.
    pub ylabel: String,
    /// Its lines.
    pub series: Vec<Series>,
}

/// The chart's element and data; `id` must be unique in the page.
pub fn chart_html(id: &str, c: &Chart) -> String {
    let json = serde_json::json!({
        "title": c.title,
        "xlabel": c.xlabel,
        "ylabel": c.ylabel,
        "series": c.series.iter().map(|s| serde_json::json!({
            "name": s.name,
            "color": s.color,
            "x": s.points.iter().map(|p| p.0).collect::<Vec<f64>>(),
            "y": s.points.iter().map(|p| p.1).collect::<Vec<f64>>(),
        })).collect::<Vec<_>>(),
    });
    let text = json.to_string().replace('<', "\\u003c");
    let mut h = String::new();
    let _ = write!(
        h,
        "<div class=\"zoom\" id=\"{id}\"></div>\n<script type=\"application/json\" \
         class=\"zoom-data\" data-for=\"{id}\">{text}</script>\n",
        id = escape(id)
    );
    h
}

/// The library and the script that draws the charts: once per page,
/// after the last chart.
pub fn scripts() -> String {
    format!("<style>{UPLOT_CSS}</style>\n<script>{UPLOT_JS}</script>\n<script>{ZOOM_JS}</script>\n")
}
