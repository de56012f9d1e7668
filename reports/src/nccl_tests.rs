//! nccl-tests' results, computed and written as its programs
//! (`all_reduce_perf` and friends, nccl-tests 2.19) compute and print
//! them, so that a simulated collective's table sits beside a real one
//! byte for byte: `rocelab parse` reads both
//! ([`crate::realnic::tools::parse_nccl_tests`]).
//!
//! * [`Collective`] (the simulator's, re-exported): byte counts per rank
//!   and algbw / busbw as the programs compute them.
//! * [`write_table`]: the header, one line per size with the out-of-place
//!   and in-place results, and the footer, with the programs' column
//!   widths and their fallbacks for numbers that do not fit
//!   ([`float_str`], [`format_g`]).
//!
//! Units: sizes in bytes, times in microseconds, bandwidths in GB/s.

use std::fmt::Write as _;

pub use sim::workload::nccl_tests::{ByteCounts, Collective};

/// One result (out-of-place or in-place) of a table line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measurement {
    /// Time of one collective, microseconds.
    pub time_us: f64,
    /// Algorithm bandwidth, GB/s.
    pub algbw: f64,
    /// Bus bandwidth, GB/s.
    pub busbw: f64,
    /// Wrong elements found by the check; `None` prints `N/A` (no check).
    pub wrong: Option<u64>,
}

/// One line of the table: one size.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The `size` column, bytes ([`ByteCounts::size`]).
    pub size: u64,
    /// The `count` column: elements of the count passed to NCCL.
    pub count: u64,
    /// Element type as the programs name it (`float`, `half`,
    /// `bfloat16`, `int8`, ...).
    pub dtype: String,
    /// Reduction (`sum`, `prod`, `max`, `min`, `avg`), or `none`.
    pub redop: String,
    /// Root rank, or -1.
    pub root: i32,
    /// Out-of-place result; `None` leaves its columns blank.
    pub out_of_place: Option<Measurement>,
    /// In-place result.
    pub in_place: Measurement,
}

/// A whole table: the program, its lines, and what its footer reports.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// The program (`all_reduce_perf`).
    pub program: String,
    /// The lines, one per size.
    pub rows: Vec<Row>,
    /// Wrong values found (the footer's "Out of bounds values").
    pub errors: u64,
}

impl Table {
    /// The footer's "Avg bus bandwidth": the mean of every bus bandwidth
    /// printed, out-of-place and in-place (GB/s).
    pub fn avg_busbw(&self) -> f64 {
        let bws: Vec<f64> = self
            .rows
            .iter()
            .flat_map(|r| r.out_of_place.iter().chain([&r.in_place]))
            .map(|m| m.busbw)
            .collect();
        if bws.is_empty() {
            0.0
        } else {
            bws.iter().sum::<f64>() / bws.len() as f64
        }
    }
}

/// The nccl-tests line of a simulated ring all-reduce (a `ring-allreduce`
/// workload's group): `all_reduce_perf` at its size and rank count, its
/// step time as the in-place result. The simulator runs the collective
/// once and checks no data, so the out-of-place columns are blank (as
/// nccl-tests leaves them when it replays a trace) and `#wrong` reads
/// `N/A`. Elements are `float` when the size is a multiple of 4 bytes,
/// `int8` otherwise. `None` for other groups and for a ring that did not
/// finish.
pub fn ring_allreduce_table(g: &sim::results::GroupRecord) -> Option<Table> {
    if g.kind != "ring-allreduce" {
        return None;
    }
    let (step_ps, ranks, bytes) = (g.step_time_ps?, g.ranks?, g.bytes?);
    if step_ps == 0 {
        return None;
    }
    let (dtype, elt) = if bytes % 4 == 0 {
        ("float", 4)
    } else {
        ("int8", 1)
    };
    Some(Table {
        program: Collective::AllReduce.program().into(),
        rows: vec![simulated_row(
            Collective::AllReduce,
            (ranks, bytes),
            (bytes, bytes / elt, dtype),
            step_ps,
        )],
        errors: 0,
    })
}

/// The table line of one simulated collective that took `step_ps` on
/// `ranks` ranks with `bytes` per rank passed to NCCL, printed with
/// `size`, `count` and `dtype`: its time as the in-place result (the
/// simulator runs each collective once and checks no data: blank
/// out-of-place columns, `#wrong` N/A), nccl-tests' algbw and busbw, the
/// reduction (`sum` or `none`) and the root (rank 0 for the rooted
/// collectives, else -1).
fn simulated_row(
    c: Collective,
    (ranks, bytes): (u32, u64),
    (size, count, dtype): (u64, u64, &str),
    step_ps: u64,
) -> Row {
    let seconds = step_ps as f64 / 1e12;
    let (algbw, busbw) = c.bandwidths(bytes, seconds, ranks);
    Row {
        size,
        count,
        dtype: dtype.into(),
        redop: if c.reduces() { "sum" } else { "none" }.into(),
        root: if c.rooted() { 0 } else { -1 },
        out_of_place: None,
        in_place: Measurement {
            time_us: seconds * 1e6,
            algbw,
            busbw,
            wrong: None,
        },
    }
}

/// The nccl-tests tables of a run's groups, named: one per
/// `ring-allreduce` workload ([`ring_allreduce_table`], named by its
/// group) and one per `nccl-tests` sweep (its sizes in order, named by
/// the workload: the groups' names less their `-SIZE`). Sizes that did
/// not finish have no line; a sweep none of whose sizes finished has no
/// table.
pub fn tables(groups: &[sim::results::GroupRecord]) -> Vec<(String, Table)> {
    let mut out: Vec<(String, Table)> = Vec::new();
    for g in groups {
        if let Some(t) = ring_allreduce_table(g) {
            out.push((g.name.clone(), t));
            continue;
        }
        if g.kind != "nccl-tests" {
            continue;
        }
        let Some(c) = g.collective.as_deref().and_then(Collective::from_name) else {
            continue;
        };
        let workload = g
            .name
            .rsplit_once('-')
            .map_or(g.name.as_str(), |(w, _)| w)
            .to_string();
        let row = match (g.step_time_ps, g.ranks, g.bytes, g.size, g.count) {
            (Some(ps), Some(ranks), Some(bytes), Some(size), Some(count)) if ps > 0 => {
                Some(simulated_row(c, (ranks, bytes), (size, count, "float"), ps))
            }
            _ => None,
        };
        match out.iter_mut().find(|(n, _)| *n == workload) {
            Some((_, t)) => t.rows.extend(row),
            None => out.push((
                workload,
                Table {
                    program: c.program().into(),
                    rows: row.into_iter().collect(),
                    errors: 0,
                },
            )),
        }
    }
    out.retain(|(_, t)| !t.rows.is_empty());
    out
}

/// Write `table` as nccl-tests prints it, from the result header to the
/// "Collective test concluded" line.
pub fn write_table(table: &Table) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "#");
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ",
        "", "", "", "", ""
    );
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
        "algbw", "busbw", "#wrong"
    );
    let _ = writeln!(
        s,
        "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}  {:>6} ",
        "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
        ""
    );
    for r in &table.rows {
        let _ = write!(
            s,
            "{:>12}  {:>12}  {:>8}  {:>6}  {:>6}",
            r.size, r.count, r.dtype, r.redop, r.root
        );
        match &r.out_of_place {
            Some(m) => write_measurement(&mut s, m),
            None => s.push_str(&" ".repeat(32)),
        }
        write_measurement(&mut s, &r.in_place);
        s.push('\n');
    }
    let _ = writeln!(
        s,
        "# {:<20} : {} {}",
        "Out of bounds values",
        table.errors,
        if table.errors > 0 { "FAILED" } else { "OK" }
    );
    let _ = writeln!(
        s,
        "# {:<20} : {} ",
        "Avg bus bandwidth",
        format_g(table.avg_busbw())
    );
    let _ = writeln!(s, "#");
    let _ = writeln!(s, "# Collective test concluded: {}", table.program);
    s
}

fn write_measurement(s: &mut String, m: &Measurement) {
    let _ = write!(
        s,
        "  {:>7}  {:>6}  {:>6}",
        float_str(m.time_us, 7),
        float_str(m.algbw, 6),
        float_str(m.busbw, 6)
    );
    match m.wrong {
        Some(w) => {
            let _ = write!(s, "  {:>6}", format_g(w as f64));
        }
        None => s.push_str("    N/A"),
    }
}

/// A number in a column `width` characters wide, as the programs'
/// `getFloatStr` writes it: two decimals, else one, else none, else an
/// exponent (one decimal from seven characters up).
pub fn float_str(value: f64, width: usize) -> String {
    for prec in [2, 1, 0] {
        let f = format!("{value:>width$.prec$}");
        if f.len() <= width {
            return f;
        }
    }
    let e = format_e(value, if width >= 7 { 1 } else { 0 });
    format!("{e:>width$}")
}

/// C's `%.{prec}e`: a mantissa, `e`, a sign and at least two exponent
/// digits (`1.2e+05`).
fn format_e(value: f64, prec: usize) -> String {
    let r = format!("{value:.prec$e}");
    let (mantissa, exp) = r.split_once('e').unwrap_or((&r, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    format!("{mantissa}e{sign}{:02}", exp.abs())
}

/// C's `%g` (six significant digits, no trailing zeros, an exponent
/// below 10^-4 and from 10^6 up), as the programs print wrong-element
/// counts and the average bus bandwidth.
pub fn format_g(value: f64) -> String {
    if value == 0.0 {
        return "0".into();
    }
    if !value.is_finite() {
        return if value.is_nan() {
            "nan".into()
        } else if value > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    // The exponent after rounding to six significant digits.
    let e = format!("{value:.5e}");
    let exp: i32 = e
        .split_once('e')
        .and_then(|(_, x)| x.parse().ok())
        .unwrap_or(0);
    if (-4..6).contains(&exp) {
        let prec = (5 - exp) as usize;
        trim_zeros(&format!("{value:.prec$}")).to_string()
    } else {
        let full = format_e(value, 5);
        let (mantissa, rest) = full.split_once('e').unwrap_or((&full, ""));
        format!("{}e{rest}", trim_zeros(mantissa))
    }
}

fn trim_zeros(s: &str) -> &str {
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.')
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::realnic::tools::parse_nccl_tests;

    /// Each number as C's printf writes it through the programs'
    /// `getFloatStr` (widths 7 and 6) and `%g`, produced by compiling
    /// that function: ties round to even on the exact binary value,
    /// exponents have a sign and two digits.
    #[test]
    fn numbers_are_written_as_printf_writes_them() {
        let cases: [(f64, &str, &str, &str); 15] = [
            (0.0, "   0.00", "  0.00", "0"),
            (0.125, "   0.12", "  0.12", "0.125"),
            (0.375, "   0.38", "  0.38", "0.375"),
            (2.5, "   2.50", "  2.50", "2.5"),
            (12.345, "  12.35", " 12.35", "12.345"),
            (999.995, "1000.00", "1000.0", "999.995"),
            (1234.56, "1234.56", "1234.6", "1234.56"),
            (9999.99, "9999.99", " 10000", "9999.99"),
            (99999.4, "99999.4", " 99999", "99999.4"),
            (123456.7, " 123457", "123457", "123457"),
            (1234567.8, "1234568", " 1e+06", "1.23457e+06"),
            (98765432.1, "9.9e+07", " 1e+08", "9.87654e+07"),
            (1.5e9, "1.5e+09", " 2e+09", "1.5e+09"),
            (0.004, "   0.00", "  0.00", "0.004"),
            (1e-7, "   0.00", "  0.00", "1e-07"),
        ];
        for (v, w7, w6, g) in cases {
            assert_eq!(float_str(v, 7), w7, "{v} at width 7");
            assert_eq!(float_str(v, 6), w6, "{v} at width 6");
            assert_eq!(format_g(v), g, "{v} as %g");
        }
        for (v, g) in [
            (176.123456, "176.123"),
            (0.000123456, "0.000123456"),
            (100000.0, "100000"),
            (999999.5, "1e+06"),
            (12.5, "12.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
        ] {
            assert_eq!(format_g(v), g, "{v} as %g");
        }
    }

    fn sample() -> Table {
        let n = 16;
        let rows = [8u64, 1 << 20, 1 << 30]
            .iter()
            .map(|&size| {
                let c = Collective::AllReduce.byte_counts(size, 4, n);
                let secs = 20e-6 + size as f64 / 40e9;
                let (alg, bus) = Collective::AllReduce.bandwidths(c.param, secs, n);
                let m = Measurement {
                    time_us: secs * 1e6,
                    algbw: alg,
                    busbw: bus,
                    wrong: Some(0),
                };
                Row {
                    size: c.size(),
                    count: c.param / 4,
                    dtype: "float".into(),
                    redop: "sum".into(),
                    root: -1,
                    out_of_place: Some(m),
                    in_place: Measurement { wrong: None, ..m },
                }
            })
            .collect();
        Table {
            program: "all_reduce_perf".into(),
            rows,
            errors: 0,
        }
    }

    /// A strict reader built from the programs' printf strings: every
    /// line has the exact width and fields they give it (the header lines
    /// as C's printf writes them from those strings).
    #[test]
    fn the_table_has_the_programs_exact_layout() {
        let out = write_table(&sample());
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "#");
        assert_eq!(
            lines[1],
            format!("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}           out-of-place                       in-place          ", "", "", "", "", "")
        );
        assert_eq!(lines[2], "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   busbw  #wrong ");
        assert_eq!(lines[3], "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  (GB/s)         ");
        for l in &lines[4..7] {
            // %12li  %12li  %8s  %6s  %6s, then   %7s  %6s  %6s followed by
            // "  %6g" (out-of-place, checked) or "    N/A" (in-place here).
            let body = 2 + 7 + 2 + 6 + 2 + 6;
            assert_eq!(l.len(), 52 + (body + 8) + (body + 7), "{l:?}");
            let f: Vec<&str> = l.split_whitespace().collect();
            assert_eq!(f.len(), 13, "{l:?}");
            assert_eq!(&f[2..5], ["float", "sum", "-1"]);
            assert_eq!(f[8], "0");
            assert_eq!(f[12], "N/A");
        }
        assert!(lines[6].starts_with("  1073741824     268435456     float     sum      -1"));
        // One line exactly as C's printf writes it from the same values.
        let m = Measurement {
            time_us: 12.34,
            algbw: 56.78,
            busbw: 99.99,
            wrong: Some(0),
        };
        let one = Table {
            program: "all_reduce_perf".into(),
            rows: vec![Row {
                size: 1 << 30,
                count: 1 << 28,
                dtype: "float".into(),
                redop: "sum".into(),
                root: -1,
                out_of_place: Some(m),
                in_place: Measurement { wrong: None, ..m },
            }],
            errors: 0,
        };
        assert_eq!(
            write_table(&one).lines().nth(4).unwrap(),
            "  1073741824     268435456     float     sum      -1    12.34   56.78   99.99       0    12.34   56.78   99.99    N/A"
        );
        assert_eq!(lines[7], "# Out of bounds values : 0 OK");
        assert!(lines[8].starts_with("# Avg bus bandwidth    : "));
        assert!(lines[8].ends_with(' '));
        assert_eq!(lines[9], "#");
        assert_eq!(lines[10], "# Collective test concluded: all_reduce_perf");
    }

    /// `rocelab parse`'s reader takes the written table back: sizes,
    /// counts and the bandwidths as printed.
    #[test]
    fn the_written_table_parses_back() {
        let t = sample();
        let parsed = parse_nccl_tests(&write_table(&t)).expect("parses");
        assert_eq!(parsed.rows.len(), 3);
        for (p, r) in parsed.rows.iter().zip(&t.rows) {
            assert_eq!((p.bytes, p.count), (r.size, r.count));
            assert_eq!(p.dtype, "float");
            let busbw = r.out_of_place.unwrap().busbw;
            let printed: f64 = float_str(busbw, 6).trim().parse().unwrap();
            assert_eq!(p.oop_busbw_mbps, Some((printed * 1000.0).round() as u64));
            assert_eq!(p.ip_wrong, None);
        }
        assert_eq!(parsed.out_of_bounds, Some(0));
        // In-place only (blank out-of-place columns, as nccl-tests prints
        // a replayed trace): the values are read as in-place ones.
        let mut ip = t.clone();
        for r in &mut ip.rows {
            r.out_of_place = None;
        }
        let back = parse_nccl_tests(&write_table(&ip)).expect("parses");
        for (p, r) in back.rows.iter().zip(&ip.rows) {
            assert_eq!(
                (p.oop_time_ns, p.oop_busbw_mbps),
                (None, None),
                "line {}",
                p.line
            );
            let printed: f64 = float_str(r.in_place.busbw, 6).trim().parse().unwrap();
            assert_eq!(p.ip_busbw_mbps, Some((printed * 1000.0).round() as u64));
        }
        let avg: f64 = format_g(t.avg_busbw()).parse().unwrap();
        assert_eq!(parsed.avg_busbw_mbps, Some((avg * 1000.0).round() as u64));
    }
}
