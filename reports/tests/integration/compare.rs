//! Side-by-side comparisons.

use reports::compare::{compare, render_text, Verdict};
use reports::realnic;

use crate::fixture;

fn parsed(rel: &str) -> realnic::Parsed {
    realnic::parse(None, &fixture(rel)).unwrap()
}

#[test]
fn verdicts() {
    assert_eq!(Verdict::judge(100, 109), Verdict::Agree);
    assert_eq!(Verdict::judge(100, 111), Verdict::Close);
    assert_eq!(Verdict::judge(100, 150), Verdict::Close);
    assert_eq!(Verdict::judge(100, 151), Verdict::Differs);
    assert_eq!(Verdict::judge(0, 0), Verdict::BothZero);
    assert_eq!(Verdict::judge(5, 0), Verdict::OnlyA);
}

#[test]
fn perftest_bandwidth_against_simulated_goodput() {
    let t = compare(
        "real",
        &parsed("perftest/write_bw_client.txt"),
        "sim",
        &parsed("sim/results.json"),
    )
    .unwrap();
    assert_eq!(t.len(), 2, "one table per variant");
    assert_eq!(t[0].title, "variant lossless");
    let r = &t[0].rows[0];
    assert_eq!((r.a, r.b), (96_450_704_835, 97_120_000_000));
    assert_eq!(r.ratio_permille, Some(1006));
    assert_eq!(r.verdict, Verdict::Agree);
    assert_eq!(t[1].rows[0].verdict, Verdict::Differs);
    let text = render_text(&t);
    assert!(
        text.contains("96.45 Gb/s") && text.contains("97.12 Gb/s"),
        "{text}"
    );
}

#[test]
fn perftest_latency_against_simulated_fct() {
    let t = compare(
        "sim",
        &parsed("sim/results.json"),
        "real",
        &parsed("perftest/write_lat.txt"),
    )
    .unwrap();
    let rows = &t[0].rows;
    assert_eq!(rows.len(), 3);
    assert_eq!(
        (rows[0].a, rows[0].b),
        (1_900_000, 940_000),
        "median: fct_p50_ps vs t_typical"
    );
    assert_eq!(rows[2].verdict, Verdict::Agree, "max 3.4 us vs 3.52 us");
}

#[test]
fn counter_dumps_side_by_side_use_deltas() {
    let t = compare(
        "a",
        &parsed("ethtool/mlx5_two_dumps_date.txt"),
        "b",
        &parsed("rdma/two_snapshots.txt"),
    );
    assert!(t.is_err(), "different counter kinds do not compare");
    let t = compare(
        "a",
        &parsed("ethtool/mlx5_two_dumps_date.txt"),
        "b",
        &parsed("ethtool/mlx5_two_dumps_date.txt"),
    )
    .unwrap();
    let row = t[0]
        .rows
        .iter()
        .find(|r| r.metric == "rx_prio3_bytes")
        .unwrap();
    assert_eq!(
        (row.a, row.b, row.verdict),
        (92_000_000_000, 92_000_000_000, Verdict::Agree)
    );
    assert!(t[0].rows.iter().all(|r| r.a > 0 || r.b > 0));
}
