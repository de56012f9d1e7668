//! How the report writes numbers: times with a unit and about four
//! significant digits, rates in Gbit/s or Mbit/s, byte tick labels in the
//! unit of their axis; and Markdown's escaping of inline text. Pure
//! functions of their input.

use super::svg::num;

/// Format picoseconds with a unit and about four significant digits.
pub fn fmt_time(ps: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000_000, "s"),
        (1_000_000_000, "ms"),
        (1_000_000, "us"),
        (1_000, "ns"),
    ];
    for (scale, unit) in UNITS {
        if ps >= scale {
            return format!("{} {unit}", sig(ps as f64 / scale as f64));
        }
    }
    format!("{ps} ps")
}

/// Format bits per second as Gbit/s (or Mbit/s below 1 Gbit/s).
pub fn fmt_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{:.2} Gbit/s", bps / 1e9)
    } else {
        format!("{:.2} Mbit/s", bps / 1e6)
    }
}

/// A byte tick label in the unit of the axis' top value (`2 MB`).
pub(super) fn bytes_tick(v: f64, top: f64) -> String {
    if top >= 1e6 {
        format!("{} MB", num(v / 1e6))
    } else if top >= 1e3 {
        format!("{} KB", num(v / 1e3))
    } else {
        format!("{} B", num(v))
    }
}

/// Escape Markdown inline text (table cells and list items).
pub(super) fn md_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '|' | '*' | '_' | '`' | '[' | ']' | '<' | '>' | '#' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c if c.is_control() => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

/// About four significant digits.
fn sig(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.1}")
    } else if x >= 10.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_sizes_read_naturally() {
        assert_eq!(fmt_time(0), "0 ps");
        assert_eq!(fmt_time(1_307_000_000), "1.307 ms");
        assert_eq!(fmt_time(68_363_000_000), "68.36 ms");
        assert_eq!(fmt_time(999), "999 ps");
        assert_eq!(fmt_rate(97.86e9), "97.86 Gbit/s");
        assert_eq!(bytes_tick(1_500_000.0, 1e7), "1.5 MB");
        assert_eq!(bytes_tick(0.0, 500.0), "0 B");
    }
}
