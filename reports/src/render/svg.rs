//! A small SVG writer for the report's plots: a canvas of fixed size with
//! one plot area, linear or logarithmic axes with tick labels, polylines,
//! rectangles, markers and a legend.
//!
//! Coordinates are written with one decimal (pixels), so the same data
//! always gives the same bytes. Every text passes through [`escape`]. The
//! writer never panics: empty or degenerate ranges are widened, and
//! non-finite values are skipped.

use std::fmt::Write as _;

/// Colours of series, by variant index (then repeating).
pub const PALETTE: [&str; 6] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
];

/// Escape text for HTML and SVG (element content and quoted attributes).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if c.is_control() && c != '\n' && c != '\t' => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// A tick value as short text: at most six decimals, trailing zeros
/// dropped (`0.6`, not `0.6000000000000001`).
pub fn num(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// One axis: a value range mapped onto a pixel range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axis {
    /// Smallest value shown.
    pub min: f64,
    /// Largest value shown.
    pub max: f64,
    /// Logarithmic (base 10) scale; `min` must then be positive.
    pub log: bool,
}

impl Axis {
    /// A linear axis from `min` to `max` (widened when empty).
    pub fn linear(min: f64, max: f64) -> Axis {
        let (min, max) = finite_range(min, max);
        let max = if max > min { max } else { min + 1.0 };
        Axis {
            min,
            max,
            log: false,
        }
    }

    /// A linear axis from 0 to a "nice" value at or above `max`.
    pub fn zero_to(max: f64) -> Axis {
        let top = nice_ceil(max);
        Axis::linear(0.0, top)
    }

    /// A log axis covering `min..max` (both > 0), widened to whole decades.
    pub fn log(min: f64, max: f64) -> Axis {
        let min = if min.is_finite() && min > 0.0 {
            min
        } else {
            1.0
        };
        let max = if max.is_finite() && max > min {
            max
        } else {
            min * 10.0
        };
        let lo = 10f64.powf(min.log10().floor());
        let mut hi = 10f64.powf(max.log10().ceil());
        if hi <= lo {
            hi = lo * 10.0;
        }
        Axis {
            min: lo,
            max: hi,
            log: true,
        }
    }

    /// Position of `v` as a fraction 0..=1 of the axis (clamped).
    pub fn frac(&self, v: f64) -> f64 {
        let f = if self.log {
            let v = v.max(self.min);
            (v.log10() - self.min.log10()) / (self.max.log10() - self.min.log10())
        } else {
            (v - self.min) / (self.max - self.min)
        };
        if f.is_finite() {
            f.clamp(0.0, 1.0)
        } else {
            0.0
        }
    }

    /// Tick values: decades on a log axis, 1-2-5 steps on a linear one.
    pub fn ticks(&self) -> Vec<f64> {
        let mut out = Vec::new();
        if self.log {
            let mut v = self.min;
            while v <= self.max * 1.000_001 && out.len() < 24 {
                out.push(v);
                v *= 10.0;
            }
            return out;
        }
        let step = nice_step((self.max - self.min) / 5.0);
        let mut i = (self.min / step).ceil();
        while i * step <= self.max + step * 1e-9 && out.len() < 24 {
            out.push(i * step);
            i += 1.0;
        }
        out
    }
}

fn finite_range(min: f64, max: f64) -> (f64, f64) {
    let min = if min.is_finite() { min } else { 0.0 };
    let max = if max.is_finite() { max } else { min };
    (min, max)
}

/// Smallest of 1, 2, 5 times a power of ten at or above `v` (1 for v <= 0).
pub fn nice_ceil(v: f64) -> f64 {
    if !(v.is_finite() && v > 0.0) {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= v * 0.999_999 {
            return m * p;
        }
    }
    10.0 * p
}

fn nice_step(raw: f64) -> f64 {
    nice_ceil(raw)
}

/// A canvas with one plot area, built element by element.
#[derive(Debug)]
pub struct Plot {
    buf: String,
    /// Canvas width, px.
    width: f64,
    /// Plot area: left, top, right, bottom, px.
    area: (f64, f64, f64, f64),
    x: Axis,
    y: Axis,
}

impl Plot {
    /// Start a plot of `width` x `height` px with a title (for screen
    /// readers and as a caption) and the two axes. Leaves room for tick
    /// labels on the left and bottom.
    pub fn new(width: u32, height: u32, title: &str, x: Axis, y: Axis) -> Plot {
        Plot::with_margin(width, height, title, x, y, 62.0)
    }

    /// As [`Plot::new`] with a left margin of `left` px (for long row
    /// labels).
    pub fn with_margin(width: u32, height: u32, title: &str, x: Axis, y: Axis, left: f64) -> Plot {
        let (w, h) = (f64::from(width), f64::from(height));
        let mut buf = String::new();
        let _ = write!(
            buf,
            "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"plot\" width=\"{width}\" \
             height=\"{height}\" viewBox=\"0 0 {width} {height}\" font-family=\"sans-serif\" font-size=\"11\" role=\"img\">\
             <title>{}</title>",
            escape(title)
        );
        let _ = write!(
            buf,
            "<rect x=\"0\" y=\"0\" width=\"{width}\" height=\"{height}\" fill=\"#fff\"/>"
        );
        let _ = write!(
            buf,
            "<text x=\"{:.1}\" y=\"14\" class=\"t\" font-weight=\"bold\" text-anchor=\"middle\">{}</text>",
            w / 2.0,
            escape(title)
        );
        Plot {
            buf,
            width: w,
            area: (left, 34.0, w - 12.0, h - 36.0),
            x,
            y,
        }
    }

    /// Pixel x of value `v`.
    pub fn px(&self, v: f64) -> f64 {
        let (l, _, r, _) = self.area;
        l + self.x.frac(v) * (r - l)
    }

    /// Pixel y of value `v`.
    pub fn py(&self, v: f64) -> f64 {
        let (_, t, _, b) = self.area;
        b - self.y.frac(v) * (b - t)
    }

    /// Width of the plot area, px.
    pub fn area_width(&self) -> f64 {
        self.area.2 - self.area.0
    }

    /// Draw the frame, grid lines, ticks and labels. `fx` and `fy` format
    /// tick values; `xlabel` and `ylabel` name the axes.
    pub fn axes(
        &mut self,
        xlabel: &str,
        ylabel: &str,
        fx: &dyn Fn(f64) -> String,
        fy: &dyn Fn(f64) -> String,
    ) {
        let (xt, yt) = (self.x.ticks(), self.y.ticks());
        self.axes_with_ticks((&xt, &yt), xlabel, ylabel, fx, fy);
    }

    /// As [`Plot::axes`] with the tick values given (`x`, `y`), for
    /// axes whose natural ticks are not decades or 1-2-5 steps (message
    /// sizes in powers of two).
    pub fn axes_with_ticks(
        &mut self,
        (xticks, yticks): (&[f64], &[f64]),
        xlabel: &str,
        ylabel: &str,
        fx: &dyn Fn(f64) -> String,
        fy: &dyn Fn(f64) -> String,
    ) {
        let (l, t, r, b) = self.area;
        for &v in xticks {
            let x = self.px(v);
            let text = fx(v);
            // Keep the label on the canvas: a centred label near either
            // edge is moved in (about 6.5 px a character at 11 px).
            let half = 3.25 * text.chars().count() as f64 + 2.0;
            let tx = x.clamp(half, self.width - half);
            let _ = write!(
                self.buf,
                "<line x1=\"{x:.1}\" y1=\"{t:.1}\" x2=\"{x:.1}\" y2=\"{b:.1}\" class=\"g\" stroke=\"#eee\"/>\
                 <text x=\"{tx:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
                b + 14.0,
                escape(&text)
            );
        }
        for &v in yticks {
            let y = self.py(v);
            let _ = write!(
                self.buf,
                "<line x1=\"{l:.1}\" y1=\"{y:.1}\" x2=\"{r:.1}\" y2=\"{y:.1}\" class=\"g\" stroke=\"#eee\"/>\
                 <text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
                l - 4.0,
                y + 4.0,
                escape(&fy(v))
            );
        }
        self.frame();
        let _ = write!(
            self.buf,
            "<text class=\"xl\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            (l + r) / 2.0,
            b + 30.0,
            escape(xlabel)
        );
        let _ = write!(
            self.buf,
            "<text class=\"yl\" x=\"12\" y=\"{:.1}\" text-anchor=\"middle\" \
             transform=\"rotate(-90 12 {:.1})\">{}</text>",
            (t + b) / 2.0,
            (t + b) / 2.0,
            escape(ylabel)
        );
    }

    /// Draw only the frame of the plot area.
    pub fn frame(&mut self) {
        let (l, t, r, b) = self.area;
        let _ = write!(
            self.buf,
            "<rect x=\"{l:.1}\" y=\"{t:.1}\" width=\"{:.1}\" height=\"{:.1}\" class=\"f\" fill=\"none\" stroke=\"#888\"/>",
            r - l,
            b - t
        );
    }

    /// A line through `points` (data coordinates); non-finite points are
    /// skipped.
    pub fn polyline(&mut self, points: &[(f64, f64)], color: &str, series: &str) {
        let mut pts = String::new();
        for &(x, y) in points {
            if x.is_finite() && y.is_finite() {
                let _ = write!(pts, "{:.1},{:.1} ", self.px(x), self.py(y));
            }
        }
        let _ = write!(
            self.buf,
            "<polyline class=\"s\" fill=\"none\" stroke-width=\"1.5\" data-series=\"{}\" stroke=\"{}\" points=\"{}\"><title>{}</title></polyline>",
            escape(series),
            escape(color),
            pts.trim_end(),
            escape(series)
        );
    }

    /// A dashed line through `points` (data coordinates), thinner than
    /// [`Plot::polyline`]'s: a bound drawn beside the measured line of the
    /// same colour.
    pub fn dashed_polyline(&mut self, points: &[(f64, f64)], color: &str, series: &str) {
        let mut pts = String::new();
        for &(x, y) in points {
            if x.is_finite() && y.is_finite() {
                let _ = write!(pts, "{:.1},{:.1} ", self.px(x), self.py(y));
            }
        }
        let _ = write!(
            self.buf,
            "<polyline class=\"b\" fill=\"none\" stroke-width=\"1.2\" stroke-dasharray=\"5 3\" \
             data-series=\"{}\" stroke=\"{}\" points=\"{}\"><title>{}</title></polyline>",
            escape(series),
            escape(color),
            pts.trim_end(),
            escape(series)
        );
    }

    /// Circle markers at `points` (data coordinates).
    pub fn markers(&mut self, points: &[(f64, f64)], color: &str, series: &str) {
        let _ = write!(
            self.buf,
            "<g class=\"m\" data-series=\"{}\" fill=\"{}\">",
            escape(series),
            escape(color)
        );
        for &(x, y) in points {
            if x.is_finite() && y.is_finite() {
                let _ = write!(
                    self.buf,
                    "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\"/>",
                    self.px(x),
                    self.py(y)
                );
            }
        }
        self.buf.push_str("</g>");
    }

    /// A filled rectangle between data coordinates `x0..x1` and pixel rows
    /// `y0..y1`; at least one pixel wide so short intervals stay visible.
    pub fn span(&mut self, x0: f64, x1: f64, y0: f64, y1: f64, color: &str) {
        let a = self.px(x0);
        let w = (self.px(x1) - a).max(1.0);
        let _ = write!(
            self.buf,
            "<rect class=\"p\" x=\"{a:.1}\" y=\"{y0:.1}\" width=\"{w:.1}\" height=\"{:.1}\" \
             fill=\"{}\"/>",
            y1 - y0,
            escape(color)
        );
    }

    /// A filled band between pixel columns `x0..x1` and rows `y0..y1`
    /// with a hover text (a cell of a strip under the plot area).
    pub fn band(&mut self, (x0, x1): (f64, f64), (y0, y1): (f64, f64), fill: &str, title: &str) {
        let _ = write!(
            self.buf,
            "<rect class=\"band\" x=\"{x0:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" \
             fill=\"{}\" stroke=\"#fff\"><title>{}</title></rect>",
            (x1 - x0).max(1.0),
            y1 - y0,
            escape(fill),
            escape(title)
        );
    }

    /// A text at pixel position (`x`, `y`), anchored `start`, `middle` or
    /// `end`.
    pub fn label(&mut self, x: f64, y: f64, anchor: &str, text: &str) {
        let _ = write!(
            self.buf,
            "<text x=\"{x:.1}\" y=\"{y:.1}\" text-anchor=\"{}\">{}</text>",
            escape(anchor),
            escape(text)
        );
    }

    /// A legend in one line above the top-right corner of the plot area.
    pub fn legend(&mut self, entries: &[(String, &str)]) {
        let (_, t, r, _) = self.area;
        // About 6.5 px per character at 11 px, plus the swatch and a gap.
        let widths: Vec<f64> = entries
            .iter()
            .map(|(n, _)| 26.0 + 6.5 * n.chars().count() as f64)
            .collect();
        let mut x = r - widths.iter().sum::<f64>();
        let y = t - 4.0;
        for ((name, color), w) in entries.iter().zip(&widths) {
            let _ = write!(
                self.buf,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/>",
                y - 9.0,
                escape(color)
            );
            self.label(x + 14.0, y, "start", name);
            x += w;
        }
    }

    /// A dashed horizontal line at value `v` across the plot area, named
    /// at its right end (a threshold).
    pub fn hline(&mut self, v: f64, name: &str) {
        let (l, _, r, _) = self.area;
        let y = self.py(v);
        let _ = write!(
            self.buf,
            "<line class=\"th\" x1=\"{l:.1}\" y1=\"{y:.1}\" x2=\"{r:.1}\" y2=\"{y:.1}\" \
             stroke=\"#555\" stroke-dasharray=\"4 3\"><title>{}</title></line>",
            escape(name)
        );
        self.label(r - 2.0, y - 2.0, "end", name);
    }

    /// Move the bottom of the plot area up by `px` (room under the axis
    /// label for notes and a legend; the caller made the canvas taller).
    pub fn shrink_bottom(&mut self, px: f64) {
        self.area.3 -= px;
    }

    /// A legend under the x axis label, in rows of two when every name
    /// fits half the plot area's width, else one a row
    /// ([`legend_rows`] gives the rows, to size the canvas).
    pub fn legend_below(&mut self, entries: &[(String, &str)]) {
        let (l, _, r, b) = self.area;
        let cols = legend_columns(r - l, entries.iter().map(|e| e.0.as_str()));
        let col_w = (r - l) / cols as f64;
        for (k, (name, color)) in entries.iter().enumerate() {
            let x = l + col_w * (k % cols) as f64;
            let y = b + 42.0 + 14.0 * (k / cols) as f64;
            let _ = write!(
                self.buf,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"10\" height=\"10\" fill=\"{}\"/>",
                y - 9.0,
                escape(color)
            );
            self.label(x + 14.0, y, "start", name);
        }
    }

    /// A message in the middle of the plot area, in place of data.
    pub fn note(&mut self, text: &str) {
        let (l, t, r, b) = self.area;
        let _ = write!(
            self.buf,
            "<text class=\"note\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            (l + r) / 2.0,
            (t + b) / 2.0 + 4.0,
            escape(text)
        );
    }

    /// Pixel bounds of the plot area: left, top, right, bottom.
    pub fn area(&self) -> (f64, f64, f64, f64) {
        self.area
    }

    /// Close the canvas and return the SVG text.
    pub fn finish(mut self) -> String {
        self.buf.push_str("</svg>");
        self.buf
    }
}

/// Columns of a legend under a plot area `width` px wide: two when every
/// name (swatch and about 6.5 px a character) fits half of it, else one.
fn legend_columns<'a>(width: f64, names: impl Iterator<Item = &'a str>) -> usize {
    let widest = names
        .map(|n| 18.0 + 6.5 * n.chars().count() as f64)
        .fold(0.0, f64::max);
    if widest <= width / 2.0 {
        2
    } else {
        1
    }
}

/// Rows of [`Plot::legend_below`] for `names` on a canvas `width` px wide
/// made by [`Plot::new`] (left margin 62 px).
pub fn legend_rows(width: u32, names: &[&str]) -> usize {
    let area = f64::from(width) - 62.0 - 12.0;
    names
        .len()
        .div_ceil(legend_columns(area, names.iter().copied()))
}

/// Reduce a time series to at most about `2 * columns` points while
/// keeping each column's minimum and maximum (peaks stay visible), in time
/// order. Deterministic; series short enough are returned unchanged.
pub fn decimate(points: &[(f64, f64)], columns: usize) -> Vec<(f64, f64)> {
    let columns = columns.max(1);
    if points.len() <= 2 * columns {
        return points.to_vec();
    }
    let (x0, x1) = (points[0].0, points[points.len() - 1].0);
    let span = (x1 - x0).max(f64::MIN_POSITIVE);
    let mut out = Vec::with_capacity(2 * columns + 2);
    let mut i = 0;
    while i < points.len() {
        let col = (((points[i].0 - x0) / span) * columns as f64) as usize;
        let mut j = i;
        let (mut lo, mut hi) = (i, i);
        while j < points.len() && (((points[j].0 - x0) / span) * columns as f64) as usize == col {
            if points[j].1 < points[lo].1 {
                lo = j;
            }
            if points[j].1 > points[hi].1 {
                hi = j;
            }
            j += 1;
        }
        let (a, b) = (lo.min(hi), lo.max(hi));
        out.push(points[a]);
        if b != a {
            out.push(points[b]);
        }
        i = j.max(i + 1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tick_numbers_are_short() {
        assert_eq!(num(3.0 * 0.2), "0.6");
        assert_eq!(num(1000.0), "1000");
        assert_eq!(num(0.001), "0.001");
    }

    #[test]
    fn escape_covers_markup_characters() {
        assert_eq!(
            escape("<a href=\"x\">&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
        );
    }

    #[test]
    fn ticks_are_nice_and_log_axes_cover_decades() {
        let a = Axis::zero_to(730.0);
        assert_eq!(a.max, 1000.0);
        assert_eq!(a.ticks(), vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        let l = Axis::log(3.0e6, 7.0e10);
        assert_eq!((l.min, l.max), (1.0e6, 1.0e11));
        assert_eq!(l.ticks().len(), 6);
        assert_eq!(l.frac(1.0e6), 0.0);
        assert_eq!(l.frac(1.0e11), 1.0);
    }

    #[test]
    fn decimate_keeps_extremes() {
        let pts: Vec<(f64, f64)> = (0..1000)
            .map(|i| (f64::from(i), if i == 501 { 99.0 } else { 1.0 }))
            .collect();
        let d = decimate(&pts, 10);
        assert!(d.len() <= 20, "{}", d.len());
        assert!(d.contains(&(501.0, 99.0)));
        assert_eq!(d[0], (0.0, 1.0));
    }
}
