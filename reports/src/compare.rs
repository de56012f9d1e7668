//! Side-by-side comparison of like with like: a perftest output next to
//! the simulator's perftest workload of the same test (in `results.json`)
//! or next to another run of the same program; two `results.json`; or two
//! counter dumps of one tool (ethtool -S, rdma statistic); two nccl-tests
//! outputs of the same program (a real one beside the simulator's).
//!
//! Rows carry both values in the same unit, their ratio `B / A` in
//! per-mille (integer), and a verdict: `agree` within 10 %, `close` within
//! a factor 1.5, `differs` beyond that, `only A` / `only B` when one side is
//! zero. perftest rows are per message size (sizes on one side only are
//! named in the table's notes, never compared); rows against the model
//! carry the model's `limit` at that size. Setup differences both sides
//! state (qps, TX depth, MTU, bidirectional, CQ moderation, inline size)
//! are notes of the table: the rows are then not like with like.
//!
//! What does not compare is refused with a [`CompareError`] that says why
//! and what would: a perftest output next to a fabric run (results without
//! perftest records), two different tests, counters next to a perftest
//! output or `results.json`.
//!
//! The simulator's results are read leniently through `serde_json::Value`:
//! every object holding a `goodput_bps` field is a variant summary (named
//! by its `variant` field); each variant's `perftest` array (next to its
//! `summary`) holds its perftest records, one per workload and size, the
//! workload named by the record's `group` before `-SIZE`. Never panics.

use std::collections::BTreeMap;

use serde::Serialize;
use sim::workload::perftest::PerftestTest;
use verbs_emu::perftest::report::LatencyStats;

use crate::realnic::perftest::{PerftestReport, PerftestRun, Side, TestKind};
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
    /// perftest rows: the message size, bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// What is compared.
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
    /// Rows against the model's perftest workload: what limits the model
    /// at this size (`wire`, `pcie`, `message-rate`, `window`, `latency`),
    /// as `results.json` records it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

impl Row {
    fn new(metric: impl Into<String>, unit: &'static str, a: u64, b: u64) -> Row {
        Row {
            size: None,
            metric: metric.into(),
            unit,
            a,
            b,
            ratio_permille: (a > 0)
                .then(|| u64::try_from(u128::from(b) * 1000 / u128::from(a)).unwrap_or(u64::MAX)),
            verdict: Verdict::judge(a, b),
            limit: None,
        }
    }
}

/// A comparison table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Table {
    /// Heading (which variant, which workload, which run).
    pub title: String,
    /// Side A label.
    pub a_label: String,
    /// Side B label.
    pub b_label: String,
    /// What makes the rows less than like with like: setup differences
    /// both sides state, sizes on one side only, sizes the model did not
    /// complete, a test taken from the other side for want of a title.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Rows.
    pub rows: Vec<Row>,
}

/// Choices of a comparison.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// The perftest workload of `results.json` to compare with, by name
    /// (the group name before `-SIZE`), when the results hold several of
    /// the perftest output's test.
    pub workload: Option<String>,
}

/// Why two inputs are not compared. Sides are named `A (LABEL)` and
/// `B (LABEL)`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CompareError {
    /// Two kinds of input with no quantity in common.
    #[error("cannot compare A ({a}) with B ({b}): {why}")]
    Kinds {
        /// Kind of A.
        a: String,
        /// Kind of B.
        b: String,
        /// Why, and what would compare.
        why: String,
    },
    /// A perftest output next to results without any perftest workload.
    #[error("{results} is a fabric run (variants: {}: flows' goodput and completion times), not a perftest run: a perftest output ({perftest}: {program}) compares with a perftest workload of the same test; {hint}", .variants.join(", "))]
    FabricRun {
        /// The results' side.
        results: String,
        /// The results' variants.
        variants: Vec<String>,
        /// The perftest output's side.
        perftest: String,
        /// The perftest output's program (`ib_write_bw`).
        program: String,
        /// What would compare.
        hint: String,
    },
    /// The two sides ran different tests.
    #[error("{one}; {other}: not the same test; {hint}")]
    DifferentTest {
        /// What one side holds (`B's results hold write_lat (workload
        /// lat)`).
        one: String,
        /// What the other side is (`A is ib_write_bw`).
        other: String,
        /// What would compare.
        hint: String,
    },
    /// The results hold several workloads of the test and none was named.
    #[error("{side} holds {} perftest workloads of {test} ({}): name one with --workload NAME", .choices.len(), .choices.join(", "))]
    Ambiguous {
        /// The results' side.
        side: String,
        /// The test (`write_bw`).
        test: String,
        /// The workloads' names.
        choices: Vec<String>,
    },
    /// The workload named is not a workload of the test in the results.
    #[error("{side} holds no perftest workload {name} of {test}: expected one of {}", .choices.join(", "))]
    NoWorkload {
        /// The results' side.
        side: String,
        /// The name asked for.
        name: String,
        /// The test (`write_bw`).
        test: String,
        /// The workloads of the test.
        choices: Vec<String>,
    },
    /// A perftest output without result rows.
    #[error("{side} has no perftest result rows to compare: {why}")]
    NoRows {
        /// The perftest output's side.
        side: String,
        /// Why (the run failed, the excerpt stops before the table).
        why: String,
    },
}

/// Compare two parsed inputs with the default [`Options`].
pub fn compare(
    a_label: &str,
    a: &Parsed,
    b_label: &str,
    b: &Parsed,
) -> Result<Vec<Table>, CompareError> {
    compare_with(a_label, a, b_label, b, &Options::default())
}

/// Compare two parsed inputs: like with like, else a [`CompareError`]
/// saying why not.
pub fn compare_with(
    a_label: &str,
    a: &Parsed,
    b_label: &str,
    b: &Parsed,
    options: &Options,
) -> Result<Vec<Table>, CompareError> {
    let mk = |title: String, notes: Vec<String>, rows: Vec<Row>| Table {
        title,
        a_label: a_label.to_string(),
        b_label: b_label.to_string(),
        notes,
        rows,
    };
    let side_a = Labelled::new('A', a_label);
    let side_b = Labelled::new('B', b_label);
    let tables = match (a, b) {
        (Parsed::Perftest(pa), Parsed::Perftest(pb)) => {
            let (title, notes, rows) = perftest_vs_perftest(&side_a, pa, &side_b, pb)?;
            vec![mk(title, notes, rows)]
        }
        (Parsed::Perftest(p), Parsed::SimResults(j)) => {
            perftest_vs_model(&side_a, p, &side_b, j, options, false)?
                .into_iter()
                .map(|(t, n, r)| mk(t, n, r))
                .collect()
        }
        (Parsed::SimResults(j), Parsed::Perftest(p)) => {
            perftest_vs_model(&side_b, p, &side_a, j, options, true)?
                .into_iter()
                .map(|(t, n, r)| mk(t, n, r))
                .collect()
        }
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
                    out.push(mk(format!("variant {name}"), Vec::new(), rows));
                }
            }
            out
        }
        (Parsed::NcclTests(n), Parsed::SimResults(j)) => {
            nccl_vs_model(&side_a, n, &side_b, j, false)?
                .into_iter()
                .map(|(t, n, r)| mk(t, n, r))
                .collect()
        }
        (Parsed::SimResults(j), Parsed::NcclTests(n)) => {
            nccl_vs_model(&side_b, n, &side_a, j, true)?
                .into_iter()
                .map(|(t, n, r)| mk(t, n, r))
                .collect()
        }
        (Parsed::NcclTests(na), Parsed::NcclTests(nb)) => {
            let (title, notes, rows) = nccl_vs_nccl(&side_a, na, &side_b, nb)?;
            vec![mk(title, notes, rows)]
        }
        (Parsed::Ethtool(sa), Parsed::Ethtool(sb)) => {
            let ma = counter_delta(sa.iter().map(|s| &s.counters));
            let mb = counter_delta(sb.iter().map(|s| &s.counters));
            vec![mk(
                "ethtool -S counters".into(),
                Vec::new(),
                counter_rows(&ma, &mb),
            )]
        }
        (Parsed::Rdma(sa), Parsed::Rdma(sb)) => {
            let ta: Vec<_> = sa.iter().map(|s| s.totals()).collect();
            let tb: Vec<_> = sb.iter().map(|s| s.totals()).collect();
            let ma = counter_delta(ta.iter());
            let mb = counter_delta(tb.iter());
            vec![mk(
                "RDMA hw counters".into(),
                Vec::new(),
                counter_rows(&ma, &mb),
            )]
        }
        _ => return Err(refusal(a, b)),
    };
    Ok(tables)
}

/// A side of the comparison: its letter and label.
struct Labelled<'a> {
    letter: char,
    label: &'a str,
}

impl<'a> Labelled<'a> {
    fn new(letter: char, label: &'a str) -> Labelled<'a> {
        Labelled { letter, label }
    }

    /// `A (LABEL)`.
    fn name(&self) -> String {
        format!("{} ({})", self.letter, self.label)
    }
}

/// Why two kinds of input do not compare, and what would.
fn refusal(a: &Parsed, b: &Parsed) -> CompareError {
    let counters = |p: &Parsed| matches!(p, Parsed::Ethtool(_) | Parsed::Rdma(_));
    let kinds = [a, b];
    let has = |f: &dyn Fn(&Parsed) -> bool| kinds.iter().any(|p| f(p));
    let why = if has(&counters) && has(&|p| matches!(p, Parsed::Perftest(_))) {
        "a counter dump counts events over a capture, a perftest output measures bandwidth \
         or latency per message size: no row of one has a counterpart in the other. A counter \
         dump compares with a dump of the same tool (ethtool -S with ethtool -S, rdma statistic \
         with rdma statistic); a perftest output with another of the same test or with a \
         results.json holding a perftest workload of that test"
            .to_string()
    } else if has(&counters) && has(&|p| matches!(p, Parsed::SimResults(_))) {
        let tool = if has(&|p| matches!(p, Parsed::Rdma(_))) {
            "rdma"
        } else {
            "ethtool"
        };
        format!(
            "results.json holds the model's summary per variant, not a counter dump; the run \
             writes its counters as the tools print them beside results.json \
             (`counters/<variant>/<node>.{tool}.txt`): compare the real dump with one of those"
        )
    } else if counters(a) && counters(b) {
        "ethtool -S counts a port's frames and bytes, rdma statistic a device's transport \
         events: no counter of one is in the other; compare two dumps of the same tool"
            .to_string()
    } else {
        "expected a perftest output next to another of the same test or next to a results.json \
         holding a perftest workload of that test, two results.json, or two counter dumps of \
         the same tool"
            .to_string()
    };
    CompareError::Kinds {
        a: a.kind().to_string(),
        b: b.kind().to_string(),
        why,
    }
}

/// A title, notes and rows.
type TableParts = (String, Vec<String>, Vec<Row>);

/// Two perftest outputs of the same test, size by size.
fn perftest_vs_perftest(
    side_a: &Labelled<'_>,
    pa: &PerftestReport,
    side_b: &Labelled<'_>,
    pb: &PerftestReport,
) -> Result<TableParts, CompareError> {
    let ra = pick_run(side_a, pa)?;
    let rb = pick_run(side_b, pb)?;
    if !same_program(ra, rb) {
        return Err(CompareError::DifferentTest {
            one: format!("{} is {}", side_a.letter, program(ra)),
            other: format!("{} is {}", side_b.letter, program(rb)),
            hint: "a perftest output compares with another run of the same program".into(),
        });
    }
    let mut notes = setup_notes(&real_setup(ra), &real_setup(rb));
    let va = real_sizes(ra);
    let vb = real_sizes(rb);
    notes.extend(size_notes(&va, &vb));
    let rows = size_rows(&va, &vb, |_| None);
    Ok((
        format!("perftest vs perftest: {}", program(ra)),
        notes,
        rows,
    ))
}

/// A row of an nccl-tests table as compared: (bus bandwidth MB/s, time
/// ns, which result), its out-of-place result where it printed one, else
/// its in-place one.
fn nccl_result(r: &crate::realnic::tools::NcclTestRow) -> Option<(u64, u64, &'static str)> {
    match (r.oop_busbw_mbps, r.oop_time_ns) {
        (Some(bw), Some(t)) => Some((bw, t, "out-of-place")),
        _ => Some((r.ip_busbw_mbps?, r.ip_time_ns?, "in-place")),
    }
}

/// Two nccl-tests outputs of the same program (a real one, and the
/// simulator's `nccl-tests/<variant>/<workload>.txt`, or two real runs),
/// size by size: bus bandwidth and time. Each side's out-of-place result
/// is used where it printed one, else its in-place one (the simulator
/// prints in-place only); the notes say which, and what makes the sides
/// less than like with like (rank counts, sizes on one side only).
fn nccl_vs_nccl(
    side_a: &Labelled<'_>,
    a: &crate::realnic::tools::NcclTests,
    side_b: &Labelled<'_>,
    b: &crate::realnic::tools::NcclTests,
) -> Result<TableParts, CompareError> {
    if let (Some(ta), Some(tb)) = (&a.test, &b.test) {
        if ta != tb {
            return Err(CompareError::DifferentTest {
                one: format!("{} is {ta}", side_a.letter),
                other: format!("{} is {tb}", side_b.letter),
                hint: "an nccl-tests output compares with another of the same program (the \
                       simulator writes its nccl-tests workloads' tables under nccl-tests/)"
                    .into(),
            });
        }
    }
    let values = |n: &crate::realnic::tools::NcclTests| {
        let mut m: BTreeMap<u64, (u64, u64, &'static str)> = BTreeMap::new();
        for r in &n.rows {
            if let Some(v) = nccl_result(r) {
                // The first line of a size (a pasted output may repeat it).
                m.entry(r.bytes).or_insert(v);
            }
        }
        m
    };
    let (va, vb) = (values(a), values(b));
    let mut notes = Vec::new();
    for (side, v) in [(side_a, &va), (side_b, &vb)] {
        let mut used: Vec<&str> = v.values().map(|x| x.2).collect();
        used.sort_unstable();
        used.dedup();
        if !used.is_empty() {
            notes.push(format!(
                "{} reports {} results",
                side.name(),
                used.join(" and ")
            ));
        }
    }
    let (ra, rb) = (a.ranks.len(), b.ranks.len());
    if ra > 0 && rb > 0 && ra != rb {
        notes.push(format!(
            "{} ran {ra} ranks, {} {rb}: bus bandwidth is meant to compare across rank counts, times are not",
            side_a.name(),
            side_b.name()
        ));
    }
    for (side, mine, other) in [(side_a, &va, &vb), (side_b, &vb, &va)] {
        let only: Vec<u64> = mine
            .keys()
            .filter(|k| !other.contains_key(k))
            .copied()
            .collect();
        if !only.is_empty() {
            notes.push(format!(
                "sizes only in {}: {}",
                side.name(),
                list_sizes(&only)
            ));
        }
    }
    let mut rows = Vec::new();
    for (size, &(bwa, ta, _)) in &va {
        let Some(&(bwb, tb, _)) = vb.get(size) else {
            continue;
        };
        let mut r = Row::new("busbw", "MB/s", bwa, bwb);
        r.size = Some(*size);
        rows.push(r);
        let mut r = Row::new("time", "ns", ta, tb);
        r.size = Some(*size);
        rows.push(r);
    }
    if rows.is_empty() {
        return Err(CompareError::Kinds {
            a: "nccl-tests".into(),
            b: "nccl-tests".into(),
            why: "no size is in both tables: run them over the same -b/-e/-f range".into(),
        });
    }
    let program = a
        .test
        .clone()
        .or(b.test.clone())
        .unwrap_or_else(|| "nccl-tests".into());
    Ok((format!("nccl-tests vs nccl-tests: {program}"), notes, rows))
}

/// An nccl-tests output against the simulator's `nccl-tests` workloads of
/// the same program in `results.json`: per variant and workload, size by
/// size, bus bandwidth and time (the real side's out-of-place result
/// where it printed one), each row with what held the model back at that
/// size (`latency`, `nic`, `nvlink`, `pcie`, `pause`, `congestion`), the
/// algorithm and protocol it ran in the notes. When `model_first`, the
/// model is side A.
fn nccl_vs_model(
    real_side: &Labelled<'_>,
    real: &crate::realnic::tools::NcclTests,
    model_side: &Labelled<'_>,
    j: &serde_json::Value,
    model_first: bool,
) -> Result<Vec<TableParts>, CompareError> {
    use sim::workload::nccl_tests::Collective;
    let program = real.test.clone().unwrap_or_default();
    let collective = Collective::ALL
        .into_iter()
        .find(|c| c.program() == program)
        .ok_or_else(|| CompareError::Kinds {
            a: "nccl-tests".into(),
            b: "results".into(),
            why: format!(
                "{} does not say which nccl-tests program it is (its \"Collective test concluded\" line): expected one of them",
                real_side.name()
            ),
        })?;
    let mut real_rows: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
    for r in &real.rows {
        if let Some((bw, t, _)) = nccl_result(r) {
            real_rows.entry(r.bytes).or_insert((bw, t));
        }
    }
    let mut out = Vec::new();
    let variants = j["variants"].as_array().cloned().unwrap_or_default();
    for v in &variants {
        let vname = v["summary"]["variant"].as_str().unwrap_or("default");
        // Workload name -> size -> (busbw MB/s, time ns, limit, algo, proto).
        type ModelRow = (u64, u64, String, String, String);
        let mut by_workload: BTreeMap<String, (u64, BTreeMap<u64, ModelRow>)> = BTreeMap::new();
        for g in v["groups"].as_array().into_iter().flatten() {
            if g["kind"] != "nccl-tests" || g["collective"].as_str() != Some(collective.name()) {
                continue;
            }
            let (Some(size), Some(param), Some(ranks), Some(step)) = (
                g["size"].as_u64(),
                g["bytes"].as_u64(),
                g["ranks"].as_u64(),
                g["step_time_ps"].as_u64(),
            ) else {
                continue;
            };
            let name = g["name"].as_str().unwrap_or("");
            let workload = name
                .strip_suffix(&format!("-{size}"))
                .unwrap_or(name)
                .to_string();
            let secs = step as f64 * 1e-12;
            let (_, bus) = collective.bandwidths(param, secs, ranks as u32);
            let text = |k: &str| g[k].as_str().unwrap_or("").to_string();
            let e = by_workload.entry(workload).or_default();
            e.0 = ranks;
            e.1.insert(
                size,
                (
                    (bus * 1000.0).round() as u64,
                    step / 1000,
                    text("limit"),
                    text("algorithm"),
                    text("protocol"),
                ),
            );
        }
        for (w, (ranks, sizes)) in by_workload {
            let mut rows = Vec::new();
            let mut ran: Vec<String> = Vec::new();
            for (size, (bw, t, limit, algo, proto)) in &sizes {
                let Some(&(rbw, rt)) = real_rows.get(size) else {
                    continue;
                };
                let both = |metric: &str, unit: &'static str, real: u64, model: u64| {
                    let (a, b) = if model_first {
                        (model, real)
                    } else {
                        (real, model)
                    };
                    let mut r = Row::new(metric, unit, a, b);
                    r.size = Some(*size);
                    if !limit.is_empty() {
                        r.limit = Some(limit.clone());
                    }
                    r
                };
                rows.push(both("busbw", "MB/s", rbw, *bw));
                rows.push(both("time", "ns", rt, *t));
                if !algo.is_empty() {
                    let a = format!("{algo}/{proto}");
                    if !ran.contains(&a) {
                        ran.push(a);
                    }
                }
            }
            if rows.is_empty() {
                continue;
            }
            let mut notes = vec![format!(
                "{} is the simulator's {w} ({ranks} ranks), {} the real run",
                model_side.name(),
                real_side.name()
            )];
            if !ran.is_empty() {
                notes.push(format!("the model ran {} (NCCL's tuning model's choice unless the workload forced one)", ran.join(", ")));
            }
            if real.ranks.len() as u64 != ranks && !real.ranks.is_empty() {
                notes.push(format!(
                    "{} ran {} ranks: bus bandwidth compares across rank counts, times do not",
                    real_side.name(),
                    real.ranks.len()
                ));
            }
            out.push((
                format!("nccl-tests vs model: {program}, variant {vname}, workload {w}"),
                notes,
                rows,
            ));
        }
    }
    if out.is_empty() {
        return Err(CompareError::Kinds {
            a: "nccl-tests".into(),
            b: "results".into(),
            why: format!(
                "{} has no nccl-tests workload of {} at the sizes {} printed: add `kind = \"nccl-tests\"` with collective = \"{}\" over the same -b/-e/-f range",
                model_side.name(),
                program,
                real_side.name(),
                collective.name()
            ),
        });
    }
    Ok(out)
}

/// A perftest output against the same test's workload in `results.json`,
/// one table per variant. When `model_first`, the model is side A.
fn perftest_vs_model(
    real_side: &Labelled<'_>,
    report: &PerftestReport,
    model_side: &Labelled<'_>,
    j: &serde_json::Value,
    options: &Options,
    model_first: bool,
) -> Result<Vec<TableParts>, CompareError> {
    let run = pick_run(real_side, report)?;
    let variants = model_variants(j);
    let chosen = choose_workload(real_side, run, model_side, j, &variants, options)?;
    Ok(variants
        .iter()
        .filter_map(|v| model_table(real_side, run, v, &chosen, model_first))
        .collect())
}

/// A perftest workload of `results.json`: its name and test.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Workload {
    name: String,
    test: String,
}

/// The workload of the run's test in the results (the one named in
/// `options` when there are several), else why none compares.
fn choose_workload(
    real_side: &Labelled<'_>,
    run: &PerftestRun,
    model_side: &Labelled<'_>,
    j: &serde_json::Value,
    variants: &[ModelVariant],
    options: &Options,
) -> Result<Workload, CompareError> {
    let mut all: Vec<Workload> = Vec::new();
    for r in variants.iter().flat_map(|v| &v.records) {
        let w = Workload {
            name: r.workload.clone(),
            test: r.test.clone(),
        };
        if !all.contains(&w) {
            all.push(w);
        }
    }
    let prog = program(run);
    if all.is_empty() {
        let mut names: Vec<String> = variants.iter().map(|v| v.name.clone()).collect();
        if names.is_empty() {
            names = summaries(j).into_iter().map(|(n, _)| n).collect();
        }
        if names.is_empty() {
            names.push("none found".into());
        }
        let hint = match test_hint(real_side, run) {
            Some(test) => format!(
                "run `rocelab twin {}` to build one, or add a `kind = \"perftest\"` workload with {test} to the scenario",
                real_side.label
            ),
            None => no_such_workload(&prog),
        };
        return Err(CompareError::FabricRun {
            results: model_side.name(),
            variants: names,
            perftest: format!("{}, {}", real_side.letter, real_side.label),
            program: prog,
            hint,
        });
    }
    let same: Vec<Workload> = all
        .iter()
        .filter(|w| PerftestTest::from_name(&w.test).is_some_and(|t| matches_test(run, t)))
        .cloned()
        .collect();
    let Some(first) = same.first() else {
        let held: Vec<String> = all
            .iter()
            .map(|w| format!("{} (workload {})", w.test, w.name))
            .collect();
        let hint = match test_hint(real_side, run) {
            Some(test) => format!(
                "compare {} with a perftest workload with {test} (`rocelab twin {}` builds one)",
                real_side.letter, real_side.label
            ),
            None => no_such_workload(&prog),
        };
        return Err(CompareError::DifferentTest {
            one: format!("{}'s results hold {}", model_side.letter, held.join(", ")),
            other: format!("{} is {prog}", real_side.letter),
            hint,
        });
    };
    let choices = || same.iter().map(|w| w.name.clone()).collect::<Vec<_>>();
    match &options.workload {
        Some(name) => same
            .iter()
            .find(|w| w.name == *name)
            .cloned()
            .ok_or_else(|| CompareError::NoWorkload {
                side: model_side.name(),
                name: name.clone(),
                test: first.test.clone(),
                choices: choices(),
            }),
        None if same.len() > 1 => Err(CompareError::Ambiguous {
            side: model_side.name(),
            test: first.test.clone(),
            choices: choices(),
        }),
        None => Ok(first.clone()),
    }
}

/// How a scenario names the run's test (`` `test = "write_bw"` ``); none
/// when the simulator has no such test.
fn test_hint(real_side: &Labelled<'_>, run: &PerftestRun) -> Option<String> {
    match sim_test(run) {
        Some(t) => Some(format!("`test = \"{}\"`", t.name())),
        None if run.verb.is_none() => {
            let k = kind_suffix(run_kind(run));
            Some(format!(
                "the `test` {} ran (`write_{k}`, `read_{k}` or `send_{k}`: its title is missing)",
                real_side.letter
            ))
        }
        None => None,
    }
}

/// Why a program has no workload to compare with.
fn no_such_workload(program: &str) -> String {
    let tests: Vec<&str> = PerftestTest::ALL.iter().map(|t| t.name()).collect();
    format!(
        "the simulator has no {program} workload (its perftest tests: {})",
        tests.join(", ")
    )
}

/// The table of one variant's records of the workload (none when the
/// variant has none).
fn model_table(
    real_side: &Labelled<'_>,
    run: &PerftestRun,
    variant: &ModelVariant,
    chosen: &Workload,
    model_first: bool,
) -> Option<TableParts> {
    let recs: Vec<&ModelRecord> = variant
        .records
        .iter()
        .filter(|r| r.workload == chosen.name && r.test == chosen.test)
        .collect();
    let first = recs.first()?;
    let real = real_sizes(run);
    let real_setup = real_setup(run);
    let model: BTreeMap<u64, SizeValues> =
        recs.iter().map(|r| (r.size, r.values.clone())).collect();
    let limits: BTreeMap<u64, String> = recs
        .iter()
        .filter_map(|r| Some((r.size, r.limit.clone()?)))
        .collect();
    let (sa, sb, va, vb) = if model_first {
        (&first.setup, &real_setup, &model, &real)
    } else {
        (&real_setup, &first.setup, &real, &model)
    };
    let mut notes = Vec::new();
    if run.verb.is_none() {
        notes.push(format!(
            "{}'s title is missing: taken as {}, the model's test",
            real_side.letter, chosen.test
        ));
    }
    notes.extend(setup_notes(sa, sb));
    notes.extend(size_notes(va, vb));
    let unfinished: Vec<u64> = recs
        .iter()
        .filter(|r| !r.completed)
        .map(|r| r.size)
        .collect();
    if !unfinished.is_empty() {
        notes.push(format!(
            "the model did not complete size{} {}",
            if unfinished.len() == 1 { "" } else { "s" },
            list_sizes(&unfinished)
        ));
    }
    let rows = size_rows(va, vb, |size| limits.get(&size).cloned());
    Some((
        format!(
            "variant {}: perftest workload {} ({})",
            variant.name, chosen.name, chosen.test
        ),
        notes,
        rows,
    ))
}

/// The run of a perftest output that is compared: the client's (with a
/// TX depth, not after the server banner), else the first with rows.
fn pick_run<'a>(
    side: &Labelled<'_>,
    p: &'a PerftestReport,
) -> Result<&'a PerftestRun, CompareError> {
    let has_rows =
        |r: &PerftestRun| !r.bw.is_empty() || !r.lat.is_empty() || !r.lat_duration.is_empty();
    p.runs
        .iter()
        .find(|r| r.tx_depth.is_some() && r.side != Side::Server && has_rows(r))
        .or_else(|| p.runs.iter().find(|r| has_rows(r)))
        .ok_or_else(|| CompareError::NoRows {
            side: side.name(),
            why: if !p.errors.is_empty() {
                "the run failed (completion error)".into()
            } else if p.runs.iter().any(|r| r.latency_in_cycles) {
                "its latency table is in CPU cycles (-C), not time".into()
            } else {
                "the output stops before its result table".into()
            },
        })
}

/// Bandwidth or latency, from the title or else from the table's rows.
fn run_kind(run: &PerftestRun) -> TestKind {
    match run.kind {
        TestKind::Unknown if !run.bw.is_empty() => TestKind::Bandwidth,
        TestKind::Unknown if !run.lat.is_empty() || !run.lat_duration.is_empty() => {
            TestKind::Latency
        }
        k => k,
    }
}

/// `bw` or `lat`.
fn kind_suffix(k: TestKind) -> &'static str {
    match k {
        TestKind::Latency => "lat",
        _ => "bw",
    }
}

/// The program that printed a run (`ib_write_bw`), or what is known of
/// it when the title is missing.
fn program(run: &PerftestRun) -> String {
    let kind = run_kind(run);
    match run.verb.as_deref() {
        Some(v) => {
            let op = match v {
                "RDMA_Write" => "write".to_string(),
                "RDMA_Read" => "read".to_string(),
                "Send" => "send".to_string(),
                other => other.to_ascii_lowercase(),
            };
            format!("ib_{op}_{}", kind_suffix(kind))
        }
        None => match kind {
            TestKind::Latency => "a latency test without its title".into(),
            _ => "a bandwidth test without its title".into(),
        },
    }
}

/// The simulator's test of a run (none when its verb is unknown or has no
/// simulated counterpart).
fn sim_test(run: &PerftestRun) -> Option<PerftestTest> {
    run.verb.as_ref()?;
    PerftestTest::from_name(&program(run))
}

/// Whether a run is the simulator's test `t` (a run without its title
/// matches every test of its kind).
fn matches_test(run: &PerftestRun, t: PerftestTest) -> bool {
    let kind = run_kind(run);
    kind != TestKind::Unknown
        && t.is_bw() == (kind == TestKind::Bandwidth)
        && run.verb.as_deref().map_or(true, |v| v == t.verb())
}

/// Whether two runs are the same program (the direction, `-b`, is a
/// setup difference, not another test).
fn same_program(a: &PerftestRun, b: &PerftestRun) -> bool {
    let title = |r: &PerftestRun| {
        r.title.as_ref().map(|t| {
            t.split_whitespace()
                .filter(|w| *w != "Bidirectional")
                .collect::<Vec<_>>()
                .join(" ")
        })
    };
    let (ka, kb) = (run_kind(a), run_kind(b));
    let kinds = ka == kb || ka == TestKind::Unknown || kb == TestKind::Unknown;
    let verbs = match (&a.verb, &b.verb) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    };
    let titles = match (title(a), title(b)) {
        (Some(x), Some(y)) => x == y,
        _ => true,
    };
    kinds && verbs && titles
}

/// The quantities of one size, in the rows' units (bit/s, msg/s, ps).
#[derive(Debug, Clone, Default)]
struct SizeValues {
    avg_bps: Option<u64>,
    peak_bps: Option<u64>,
    msg_rate: Option<u64>,
    typical_ps: Option<u64>,
    avg_ps: Option<u64>,
    p99_ps: Option<u64>,
    max_ps: Option<u64>,
}

/// The metrics of a perftest row, in display order.
type Metric = (&'static str, &'static str, fn(&SizeValues) -> Option<u64>);

const METRICS: [Metric; 7] = [
    ("BW average", "bit/s", |v| v.avg_bps),
    ("BW peak", "bit/s", |v| v.peak_bps),
    ("message rate", "msg/s", |v| v.msg_rate),
    ("t_typical", "ps", |v| v.typical_ps),
    ("t_avg", "ps", |v| v.avg_ps),
    ("99% percentile", "ps", |v| v.p99_ps),
    ("t_max", "ps", |v| v.max_ps),
];

/// A run's rows per size (a size printed twice: the last row).
fn real_sizes(run: &PerftestRun) -> BTreeMap<u64, SizeValues> {
    let mut out: BTreeMap<u64, SizeValues> = BTreeMap::new();
    for r in &run.bw {
        let v = out.entry(r.bytes).or_default();
        v.avg_bps = Some(r.avg_bps);
        v.peak_bps = (run.peak_measured && r.peak_bps > 0).then_some(r.peak_bps);
        v.msg_rate = r.msg_rate_per_s;
    }
    let ps = |ns: u64| ns.saturating_mul(1000);
    for r in &run.lat {
        let v = out.entry(r.bytes).or_default();
        v.typical_ps = Some(ps(r.typical_ns));
        v.avg_ps = Some(ps(r.avg_ns));
        v.p99_ps = r.p99_ns.map(ps);
        v.max_ps = Some(ps(r.max_ns));
    }
    for r in &run.lat_duration {
        out.entry(r.bytes).or_default().avg_ps = Some(ps(r.avg_ns));
    }
    out
}

/// Rows for the sizes both sides have, metric by metric; `limit` gives
/// the model's limit at a size.
fn size_rows(
    a: &BTreeMap<u64, SizeValues>,
    b: &BTreeMap<u64, SizeValues>,
    limit: impl Fn(u64) -> Option<String>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for (size, va) in a {
        let Some(vb) = b.get(size) else { continue };
        for (name, unit, get) in METRICS {
            if let (Some(x), Some(y)) = (get(va), get(vb)) {
                let mut r = Row::new(name, unit, x, y);
                r.size = Some(*size);
                r.limit = limit(*size);
                rows.push(r);
            }
        }
    }
    rows
}

/// The sizes on one side only.
fn size_notes(a: &BTreeMap<u64, SizeValues>, b: &BTreeMap<u64, SizeValues>) -> Vec<String> {
    let mut notes = Vec::new();
    for (letter, x, y) in [('A', a, b), ('B', b, a)] {
        let only: Vec<u64> = x.keys().filter(|s| !y.contains_key(s)).copied().collect();
        if !only.is_empty() {
            notes.push(format!(
                "size{} only in {letter}, not compared: {}",
                if only.len() == 1 { "" } else { "s" },
                list_sizes(&only)
            ));
        }
    }
    notes
}

/// Sizes in bytes, the middle elided past eight.
fn list_sizes(sizes: &[u64]) -> String {
    let s = |v: &[u64]| v.iter().map(u64::to_string).collect::<Vec<_>>().join(", ");
    if sizes.len() <= 8 {
        format!("{} B", s(sizes))
    } else {
        format!(
            "{}, ..., {} B ({} sizes)",
            s(&sizes[..3]),
            s(&sizes[sizes.len() - 2..]),
            sizes.len()
        )
    }
}

/// The settings of a run that make two runs unequal when they differ.
#[derive(Debug, Clone, Default)]
struct Setup {
    qps: Option<u32>,
    tx_depth: Option<u32>,
    mtu: Option<u32>,
    bidirectional: Option<bool>,
    cq_mod: Option<u32>,
    inline: Option<u32>,
}

/// What a perftest header states.
fn real_setup(run: &PerftestRun) -> Setup {
    let field = |key: &str| {
        run.fields
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .and_then(|(_, v)| {
                let d: String = v.trim().chars().take_while(char::is_ascii_digit).collect();
                d.parse().ok()
            })
    };
    Setup {
        qps: run.qps,
        tx_depth: run.tx_depth,
        mtu: run.mtu_bytes,
        bidirectional: run.title.is_some().then_some(run.bidirectional),
        cq_mod: field("CQ Moderation"),
        inline: field("Max inline data"),
    }
}

/// One note per setting both sides state and differ in.
fn setup_notes(a: &Setup, b: &Setup) -> Vec<String> {
    let mut notes = Vec::new();
    let mut num = |what: &str, unit: &str, x: Option<u32>, y: Option<u32>| {
        if let (Some(x), Some(y)) = (x, y) {
            if x != y {
                notes.push(format!("{what} differ: A {x}{unit}, B {y}{unit}"));
            }
        }
    };
    num("qps", "", a.qps, b.qps);
    num("TX depths", "", a.tx_depth, b.tx_depth);
    num("MTUs", " B", a.mtu, b.mtu);
    num("CQ moderations", "", a.cq_mod, b.cq_mod);
    num("inline sizes", " B", a.inline, b.inline);
    if let (Some(x), Some(y)) = (a.bidirectional, b.bidirectional) {
        if x != y {
            let d = |b: bool| if b { "bidirectional (-b)" } else { "one way" };
            notes.push(format!("directions differ: A {}, B {}", d(x), d(y)));
        }
    }
    notes
}

/// One variant's perftest records.
struct ModelVariant {
    name: String,
    records: Vec<ModelRecord>,
}

/// One perftest record of `results.json`, read leniently.
struct ModelRecord {
    workload: String,
    test: String,
    size: u64,
    completed: bool,
    limit: Option<String>,
    setup: Setup,
    values: SizeValues,
}

/// The variants of a `results.json` (`variants[]`, or the document
/// itself when it is one variant) with their perftest records.
fn model_variants(j: &serde_json::Value) -> Vec<ModelVariant> {
    let list: Vec<&serde_json::Value> = match j.get("variants").and_then(|v| v.as_array()) {
        Some(a) => a.iter().collect(),
        None if j.get("summary").is_some() || j.get("perftest").is_some() => vec![j],
        None => Vec::new(),
    };
    list.into_iter()
        .enumerate()
        .map(|(i, v)| ModelVariant {
            name: v
                .get("summary")
                .and_then(|s| s.get("variant"))
                .and_then(|s| s.as_str())
                .map_or_else(|| format!("variants[{i}]"), str::to_string),
            records: v
                .get("perftest")
                .and_then(|p| p.as_array())
                .map(|a| a.iter().filter_map(model_record).collect())
                .unwrap_or_default(),
        })
        .collect()
}

/// A record's quantities: bandwidth and message rate over first post to
/// last completion, latency statistics of the samples as perftest
/// computes them.
fn model_record(r: &serde_json::Value) -> Option<ModelRecord> {
    let test = r.get("test")?.as_str()?.to_string();
    let size = num(r, "size")?;
    let group = r.get("group").and_then(|g| g.as_str()).unwrap_or("");
    let workload = group
        .strip_suffix(&format!("-{size}"))
        .unwrap_or(group)
        .to_string();
    let small = |k: &str| num(r, k).and_then(|v| u32::try_from(v).ok());
    let flag = |k: &str| r.get(k).and_then(|v| v.as_bool());
    let mut values = SizeValues::default();
    let kind = PerftestTest::from_name(&test);
    if kind.is_some_and(PerftestTest::is_bw) {
        let span = match (num(r, "start_ps"), num(r, "finish_ps")) {
            (Some(s), Some(f)) if f > s => Some(u128::from(f - s)),
            _ => None,
        };
        // Integer arithmetic: per second = count x 10^12 / span in ps.
        let per_s = |k: &str, scale: u128| {
            let (n, d) = (u128::from(num(r, k)?), span?);
            u64::try_from(n * scale * 1_000_000_000_000 / d).ok()
        };
        values.avg_bps = per_s("bytes", 8);
        values.msg_rate = per_s("messages", 1);
    } else if let Some(t) = kind {
        let mut ns: Vec<u64> = r
            .get("latency_samples_ps")
            .and_then(|s| s.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_u64())
                    .map(|p| p / 1000)
                    .collect()
            })
            .unwrap_or_default();
        if let Some(s) = LatencyStats::from_samples(&mut ns, t.rtt_factor()) {
            let ps = |us: f64| (us * 1e6).round() as u64;
            values.typical_ps = Some(ps(s.typical));
            values.avg_ps = Some(ps(s.avg));
        }
    }
    Some(ModelRecord {
        workload,
        test,
        size,
        completed: flag("completed").unwrap_or(true),
        limit: r.get("limit").and_then(|l| l.as_str()).map(str::to_string),
        setup: Setup {
            qps: small("qps"),
            tx_depth: small("tx_depth"),
            // The records do not state the path MTU.
            mtu: None,
            bidirectional: flag("bidirectional"),
            cq_mod: small("cq_mod"),
            inline: small("inline"),
        },
        values,
    })
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

/// Render tables as aligned text: per table its title, its notes, then
/// one line per row (with the size and the model's limit when the rows
/// have them).
pub fn render_text(tables: &[Table]) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    for t in tables {
        let _ = writeln!(s, "{}  (A = {}, B = {})", t.title, t.a_label, t.b_label);
        for n in &t.notes {
            let _ = writeln!(s, "  note: {n}");
        }
        if t.rows.is_empty() {
            let _ = writeln!(s, "  (nothing comparable)");
            let _ = writeln!(s);
            continue;
        }
        let sized = t.rows.iter().any(|r| r.size.is_some());
        let limited = t.rows.iter().any(|r| r.limit.is_some());
        let w = t
            .rows
            .iter()
            .map(|r| r.metric.len())
            .max()
            .unwrap_or(6)
            .max(6);
        let line = |size: &str,
                    metric: &str,
                    a: &str,
                    b: &str,
                    ratio: &str,
                    verdict: &str,
                    limit: &str| {
            let mut l = String::from("  ");
            if sized {
                let _ = write!(l, "{size:>8}  ");
            }
            let _ = write!(l, "{metric:<w$}  {a:>20}  {b:>20}  {ratio:>8}  {verdict}");
            if limited {
                let _ = write!(
                    l,
                    "{:w2$}  {limit}",
                    "",
                    w2 = 9usize.saturating_sub(verdict.len())
                );
            }
            l.trim_end().to_string()
        };
        let _ = writeln!(
            s,
            "{}",
            line("size", "metric", "A", "B", "B/A", "verdict", "limit")
        );
        for r in &t.rows {
            let ratio = r
                .ratio_permille
                .map(|p| format!("{}.{:03}", p / 1000, p % 1000))
                .unwrap_or_else(|| "-".into());
            let size = r.size.map(|v| v.to_string()).unwrap_or_default();
            let _ = writeln!(
                s,
                "{}",
                line(
                    &size,
                    &r.metric,
                    &fmt_unit(r.a, r.unit),
                    &fmt_unit(r.b, r.unit),
                    &ratio,
                    r.verdict.text(),
                    r.limit.as_deref().unwrap_or("-"),
                )
            );
        }
        let _ = writeln!(s);
    }
    s
}

/// A value in its unit: bit/s as Gb/s (Mb/s below 1 Gb/s), ps as us.
fn fmt_unit(v: u64, unit: &str) -> String {
    match unit {
        "bit/s" if v < 1_000_000_000 => {
            format!("{}.{:02} Mb/s", v / 1_000_000, (v % 1_000_000) / 10_000)
        }
        "bit/s" => format!(
            "{}.{:02} Gb/s",
            v / 1_000_000_000,
            (v % 1_000_000_000) / 10_000_000
        ),
        "ps" => format!("{}.{:03} us", v / 1_000_000, (v % 1_000_000) / 1000),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_rates_are_counts_over_first_post_to_last_completion() {
        let r = serde_json::json!({
            "group": "pt-0-65536", "test": "write_bw", "size": 65536,
            "qps": 2, "messages": 3, "bytes": 196_608,
            "start_ps": 1_000, "finish_ps": 1_000 + 3_000_000,
            "completed": true, "limit": "pcie",
        });
        let m = model_record(&r).unwrap();
        assert_eq!(m.workload, "pt-0", "the group before `-SIZE`");
        // 196608 B x 8 in 3 us; 3 messages in 3 us.
        assert_eq!(m.values.avg_bps, Some(524_288_000_000));
        assert_eq!(m.values.msg_rate, Some(1_000_000));
        assert_eq!((m.setup.qps, m.limit.as_deref()), (Some(2), Some("pcie")));
    }

    #[test]
    fn model_latency_is_perftests_statistic_of_the_halved_round_trips() {
        let r = serde_json::json!({
            "group": "l-2", "test": "read_lat", "size": 2,
            "latency_samples_ps": [2_000_000, 2_200_000, 9_000_000],
        });
        let m = model_record(&r).unwrap();
        assert_eq!(m.values.typical_ps, Some(2_200_000), "READ is not halved");
        let r = serde_json::json!({
            "group": "l-2", "test": "send_lat", "size": 2,
            "latency_samples_ps": [2_000_000, 2_200_000, 9_000_000],
        });
        assert_eq!(model_record(&r).unwrap().values.typical_ps, Some(1_100_000));
    }

    #[test]
    fn long_size_lists_elide_the_middle() {
        assert_eq!(list_sizes(&[2, 4]), "2, 4 B");
        let all: Vec<u64> = (1..=23).map(|e| 1u64 << e).collect();
        assert_eq!(
            list_sizes(&all),
            "2, 4, 8, ..., 4194304, 8388608 B (23 sizes)"
        );
    }

    #[test]
    fn a_run_without_its_title_matches_every_test_of_its_kind() {
        let mut run = PerftestRun::default();
        run.bw.push(Default::default());
        assert!(matches_test(&run, PerftestTest::ReadBw));
        assert!(!matches_test(&run, PerftestTest::ReadLat));
        run.verb = Some("RDMA_Write".into());
        run.kind = TestKind::Bandwidth;
        assert!(matches_test(&run, PerftestTest::WriteBw));
        assert!(!matches_test(&run, PerftestTest::ReadBw));
        assert_eq!(program(&run), "ib_write_bw");
    }
}
