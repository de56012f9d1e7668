//! Side-by-side comparison of two results for the same test: a perftest
//! output next to the simulator's `results.json` (or another perftest), or
//! two counter dumps (ethtool -S or rdma statistic).
//!
//! Rows carry both values in the same unit, their ratio `B / A` in
//! per-mille (integer), and a verdict: `agree` within 10 %, `close` within
//! a factor 1.5, `differs` beyond that, `only A` / `only B` when one side is
//! zero. The simulator's results are read leniently through
//! `serde_json::Value`: every object holding a `goodput_bps` field is a
//! variant summary (named by its `variant` field).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::realnic::perftest::PerftestReport;
use crate::realnic::Parsed;

/// Verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Within 10 %.
    Agree,
    /// Within a factor of 1.5.
    Close,
    /// Further apart.
    Differs,
    /// Only A is non-zero.
    OnlyA,
    /// Only B is non-zero.
    OnlyB,
    /// Both zero.
    BothZero,
}

impl Verdict {
    /// Judge two values.
    pub fn judge(a: u64, b: u64) -> Verdict {
        match (a, b) {
            (0, 0) => Verdict::BothZero,
            (_, 0) => Verdict::OnlyA,
            (0, _) => Verdict::OnlyB,
            _ => {
                let (lo, hi) = (u128::from(a.min(b)), u128::from(a.max(b)));
                if hi * 10 <= lo * 11 {
                    Verdict::Agree
                } else if hi * 2 <= lo * 3 {
                    Verdict::Close
                } else {
                    Verdict::Differs
                }
            }
        }
    }

    /// Display text.
    pub fn text(self) -> &'static str {
        match self {
            Verdict::Agree => "agree",
            Verdict::Close => "close",
            Verdict::Differs => "differs",
            Verdict::OnlyA => "only A",
            Verdict::OnlyB => "only B",
            Verdict::BothZero => "both zero",
        }
    }
}

/// One compared quantity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Row {
    /// What is compared, with its unit.
    pub metric: String,
    /// Unit of `a` and `b`.
    pub unit: &'static str,
    /// Value on side A.
    pub a: u64,
    /// Value on side B.
    pub b: u64,
    /// `b * 1000 / a` (absent when `a` is 0).
    pub ratio_permille: Option<u64>,
    /// Verdict.
    pub verdict: Verdict,
}

impl Row {
    fn new(metric: impl Into<String>, unit: &'static str, a: u64, b: u64) -> Row {
        Row {
            metric: metric.into(),
            unit,
            a,
            b,
            ratio_permille: (a > 0)
                .then(|| u64::try_from(u128::from(b) * 1000 / u128::from(a)).unwrap_or(u64::MAX)),
            verdict: Verdict::judge(a, b),
        }
    }
}

/// A comparison table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Table {
    /// Heading (which variant, which run).
    pub title: String,
    /// Side A label.
    pub a_label: String,
    /// Side B label.
    pub b_label: String,
    /// Rows.
    pub rows: Vec<Row>,
}

/// Why two inputs cannot be compared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot compare {a} with {b}: expected perftest or sim-results on both sides, or two counter dumps of the same kind")]
pub struct CompareError {
    /// Kind of A.
    pub a: String,
    /// Kind of B.
    pub b: String,
}

/// Compare two parsed inputs.
pub fn compare(
    a_label: &str,
    a: &Parsed,
    b_label: &str,
    b: &Parsed,
) -> Result<Vec<Table>, CompareError> {
    let mk = |title: String, rows: Vec<Row>| Table {
        title,
        a_label: a_label.to_string(),
        b_label: b_label.to_string(),
        rows,
    };
    let tables = match (a, b) {
        (Parsed::Perftest(pa), Parsed::Perftest(pb)) => {
            vec![mk(
                "perftest vs perftest".into(),
                perftest_rows(&perf_metrics(pa), &perf_metrics(pb)),
            )]
        }
        (Parsed::Perftest(p), Parsed::SimResults(j)) => sim_tables(&perf_metrics(p), j, false)
            .into_iter()
            .map(|(t, r)| mk(t, r))
            .collect(),
        (Parsed::SimResults(j), Parsed::Perftest(p)) => sim_tables(&perf_metrics(p), j, true)
            .into_iter()
            .map(|(t, r)| mk(t, r))
            .collect(),
        (Parsed::SimResults(ja), Parsed::SimResults(jb)) => {
            let sa = summaries(ja);
            let sb = summaries(jb);
            let mut out = Vec::new();
            for (name, va) in &sa {
                if let Some((_, vb)) = sb.iter().find(|(n, _)| n == name) {
                    let rows = SUMMARY_FIELDS
                        .iter()
                        .filter_map(|(f, unit)| Some(Row::new(*f, unit, num(va, f)?, num(vb, f)?)))
                        .collect();
                    out.push(mk(format!("variant {name}"), rows));
                }
            }
            out
        }
        (Parsed::Ethtool(sa), Parsed::Ethtool(sb)) => {
            let ma = counter_delta(sa.iter().map(|s| &s.counters));
            let mb = counter_delta(sb.iter().map(|s| &s.counters));
            vec![mk("ethtool -S counters".into(), counter_rows(&ma, &mb))]
        }
        (Parsed::Rdma(sa), Parsed::Rdma(sb)) => {
            let ta: Vec<_> = sa.iter().map(|s| s.totals()).collect();
            let tb: Vec<_> = sb.iter().map(|s| s.totals()).collect();
            let ma = counter_delta(ta.iter());
            let mb = counter_delta(tb.iter());
            vec![mk("RDMA hw counters".into(), counter_rows(&ma, &mb))]
        }
        _ => {
            return Err(CompareError {
                a: a.kind().to_string(),
                b: b.kind().to_string(),
            })
        }
    };
    Ok(tables)
}

/// Numbers taken from a perftest report.
#[derive(Debug, Clone, Default)]
struct PerfMetrics {
    avg_bps: Option<u64>,
    peak_bps: Option<u64>,
    msg_rate: Option<u64>,
    lat_typical_ps: Option<u64>,
    lat_avg_ps: Option<u64>,
    lat_p99_ps: Option<u64>,
    lat_max_ps: Option<u64>,
}

fn perf_metrics(p: &PerftestReport) -> PerfMetrics {
    let mut m = PerfMetrics::default();
    // Prefer the client's run (the one with a TX depth), else the first.
    let run = p
        .runs
        .iter()
        .find(|r| r.tx_depth.is_some() && (!r.bw.is_empty() || !r.lat.is_empty()))
        .or_else(|| {
            p.runs
                .iter()
                .find(|r| !r.bw.is_empty() || !r.lat.is_empty() || !r.lat_duration.is_empty())
        });
    let Some(run) = run else { return m };
    if let Some(bw) = run.headline_bw() {
        m.avg_bps = Some(bw.avg_bps);
        m.peak_bps = (bw.peak_bps > 0).then_some(bw.peak_bps);
        m.msg_rate = bw.msg_rate_per_s;
    }
    if let Some(l) = run.headline_lat() {
        m.lat_typical_ps = Some(l.typical_ns.saturating_mul(1000));
        m.lat_avg_ps = Some(l.avg_ns.saturating_mul(1000));
        m.lat_p99_ps = l.p99_ns.map(|v| v.saturating_mul(1000));
        m.lat_max_ps = Some(l.max_ns.saturating_mul(1000));
    } else if let Some(l) = run.lat_duration.last() {
        m.lat_avg_ps = Some(l.avg_ns.saturating_mul(1000));
    }
    m
}

fn perftest_rows(a: &PerfMetrics, b: &PerfMetrics) -> Vec<Row> {
    let pairs: [(&str, &'static str, Option<u64>, Option<u64>); 7] = [
        ("bandwidth average", "bit/s", a.avg_bps, b.avg_bps),
        ("bandwidth peak", "bit/s", a.peak_bps, b.peak_bps),
        ("message rate", "msg/s", a.msg_rate, b.msg_rate),
        (
            "latency typical (median)",
            "ps",
            a.lat_typical_ps,
            b.lat_typical_ps,
        ),
        ("latency average", "ps", a.lat_avg_ps, b.lat_avg_ps),
        ("latency 99%", "ps", a.lat_p99_ps, b.lat_p99_ps),
        ("latency max", "ps", a.lat_max_ps, b.lat_max_ps),
    ];
    pairs
        .into_iter()
        .filter_map(|(n, u, x, y)| Some(Row::new(n, u, x?, y?)))
        .collect()
}

const SUMMARY_FIELDS: &[(&str, &str)] = &[
    ("goodput_bps", "bit/s"),
    ("flows_completed", "flows"),
    ("flows_total", "flows"),
    ("drops", "packets"),
    ("pause_frames_sent", "frames"),
    ("pause_time_ps", "ps"),
    ("ecn_marked", "packets"),
    ("cnps_sent", "packets"),
    ("retransmitted_packets", "packets"),
    ("fct_p50_ps", "ps"),
    ("fct_p99_ps", "ps"),
    ("max_fct_ps", "ps"),
];

fn num(v: &serde_json::Value, key: &str) -> Option<u64> {
    let x = v.get(key)?;
    x.as_u64().or_else(|| {
        x.as_f64()
            .filter(|f| f.is_finite() && *f >= 0.0)
            .map(|f| f.round() as u64)
    })
}

/// The `sim_time_ps` of every variant summary in a `results.json`.
pub fn sim_times_ps(j: &serde_json::Value) -> Vec<u64> {
    summaries(j)
        .iter()
        .filter_map(|(_, s)| num(s, "sim_time_ps"))
        .collect()
}

/// Every JSON object with a `goodput_bps` field, named by its `variant`.
fn summaries(j: &serde_json::Value) -> Vec<(String, serde_json::Value)> {
    fn walk(v: &serde_json::Value, path: &str, out: &mut Vec<(String, serde_json::Value)>) {
        match v {
            serde_json::Value::Object(m) => {
                if m.contains_key("goodput_bps") {
                    let name = m
                        .get("variant")
                        .and_then(|x| x.as_str())
                        .map(str::to_string)
                        .unwrap_or_else(|| {
                            if path.is_empty() {
                                "results".into()
                            } else {
                                path.to_string()
                            }
                        });
                    out.push((name, v.clone()));
                    return;
                }
                for (k, x) in m {
                    let p = if path.is_empty() {
                        k.clone()
                    } else {
                        format!("{path}.{k}")
                    };
                    walk(x, &p, out);
                }
            }
            serde_json::Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{path}[{i}]"), out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(j, "", &mut out);
    out
}

/// perftest metrics against each simulated variant. When `sim_first`, the
/// simulator is side A.
fn sim_tables(p: &PerfMetrics, j: &serde_json::Value, sim_first: bool) -> Vec<(String, Vec<Row>)> {
    let mut out = Vec::new();
    for (name, s) in summaries(j) {
        let sim = PerfMetrics {
            avg_bps: num(&s, "goodput_bps"),
            lat_typical_ps: num(&s, "fct_p50_ps"),
            lat_p99_ps: num(&s, "fct_p99_ps"),
            lat_max_ps: num(&s, "max_fct_ps"),
            ..PerfMetrics::default()
        };
        let mut real = p.clone();
        // The simulator reports flow completion times; perftest's average
        // latency has no counterpart, and neither have peak or msg rate.
        real.lat_avg_ps = None;
        real.peak_bps = None;
        real.msg_rate = None;
        let rows = if sim_first {
            perftest_rows(&sim, &real)
        } else {
            perftest_rows(&real, &sim)
        };
        let rows = rows
            .into_iter()
            .map(|mut r| {
                r.metric = match r.metric.as_str() {
                    "bandwidth average" => {
                        "bandwidth: perftest BW average vs sim goodput_bps".into()
                    }
                    "latency typical (median)" => {
                        "latency: perftest t_typical vs sim fct_p50_ps".into()
                    }
                    "latency 99%" => "latency: perftest 99% vs sim fct_p99_ps".into(),
                    "latency max" => "latency: perftest t_max vs sim max_fct_ps".into(),
                    _ => r.metric,
                };
                r
            })
            .collect();
        out.push((format!("variant {name}"), rows));
    }
    out
}

/// Last minus first when there are several snapshots, else the totals.
fn counter_delta<'a>(
    mut snaps: impl Iterator<Item = &'a BTreeMap<String, u64>>,
) -> BTreeMap<String, u64> {
    let Some(first) = snaps.next() else {
        return BTreeMap::new();
    };
    match snaps.last() {
        None => first.clone(),
        Some(last) => last
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    v.saturating_sub(first.get(k).copied().unwrap_or(0)),
                )
            })
            .collect(),
    }
}

fn counter_rows(a: &BTreeMap<String, u64>, b: &BTreeMap<String, u64>) -> Vec<Row> {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        .filter_map(|n| {
            let x = a.get(n).copied().unwrap_or(0);
            let y = b.get(n).copied().unwrap_or(0);
            (x > 0 || y > 0).then(|| Row::new(n.clone(), "count", x, y))
        })
        .collect()
}

/// Render tables as aligned text.
pub fn render_text(tables: &[Table]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for t in tables {
        let _ = writeln!(s, "{}  (A = {}, B = {})", t.title, t.a_label, t.b_label);
        let w = t
            .rows
            .iter()
            .map(|r| r.metric.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let _ = writeln!(
            s,
            "  {:<w$}  {:>20}  {:>20}  {:>8}  verdict",
            "metric", "A", "B", "B/A"
        );
        for r in &t.rows {
            let ratio = r
                .ratio_permille
                .map(|p| format!("{}.{:03}", p / 1000, p % 1000))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "  {:<w$}  {:>20}  {:>20}  {:>8}  {}",
                r.metric,
                fmt_unit(r.a, r.unit),
                fmt_unit(r.b, r.unit),
                ratio,
                r.verdict.text()
            );
        }
        if t.rows.is_empty() {
            let _ = writeln!(s, "  (nothing comparable)");
        }
        let _ = writeln!(s);
    }
    s
}

fn fmt_unit(v: u64, unit: &str) -> String {
    match unit {
        "bit/s" => format!(
            "{}.{:02} Gb/s",
            v / 1_000_000_000,
            (v % 1_000_000_000) / 10_000_000
        ),
        "ps" => format!("{}.{:03} us", v / 1_000_000, (v % 1_000_000) / 1000),
        _ => v.to_string(),
    }
}
