//! Side-by-side comparisons: like with like, and refusals that say why.

use reports::compare::{compare, compare_with, render_text, CompareError, Options, Verdict};
use reports::realnic;
use sim::hostmodel::Limit;
use sim::results::PerftestRecord;
use sim::workload::perftest::PerftestTest;

use crate::fixture;

fn parsed(rel: &str) -> realnic::Parsed {
    realnic::parse(None, &fixture(rel)).unwrap()
}

/// A bandwidth record of the model: `messages` of `size` over `span_ps`.
fn bw_record(
    workload: &str,
    test: PerftestTest,
    size: u64,
    messages: u64,
    span_ps: u64,
    limit: Limit,
) -> PerftestRecord {
    PerftestRecord {
        group: format!("{workload}-{size}"),
        test,
        size,
        qps: 1,
        bidirectional: false,
        tx_depth: 128,
        cq_mod: 1,
        inline: 0,
        timed: false,
        messages,
        bytes: messages * size,
        start_ps: Some(1_000_000),
        finish_ps: Some(1_000_000 + span_ps),
        completed: true,
        limit,
        bound_bps: 0,
        unloaded_latency_ps: 0,
        latency_samples_ps: Vec::new(),
    }
}

/// A latency record of the model with these round trips.
fn lat_record(workload: &str, test: PerftestTest, size: u64, rtts_ps: &[u64]) -> PerftestRecord {
    PerftestRecord {
        tx_depth: 1,
        messages: rtts_ps.len() as u64 + 1,
        bytes: (rtts_ps.len() as u64 + 1) * size,
        limit: Limit::Latency,
        latency_samples_ps: rtts_ps.to_vec(),
        ..bw_record(workload, test, size, 1, 1, Limit::Latency)
    }
}

/// A `results.json` of one variant per name, each with these records.
fn results(variants: &[&str], records: &[PerftestRecord]) -> realnic::Parsed {
    let variants: Vec<serde_json::Value> = variants
        .iter()
        .map(|v| {
            serde_json::json!({
                "summary": {
                    "variant": v,
                    "sim_time_ps": 1_000_000_000u64,
                    "flows_completed": 1,
                    "flows_total": 1,
                    "goodput_bps": 90e9,
                },
                "flows": [],
                "perftest": records,
            })
        })
        .collect();
    let doc = serde_json::json!({
        "schema": "rocelab-results",
        "version": 2,
        "scenario": "perftest",
        "seed": 1,
        "variants": variants,
    });
    realnic::parse(None, &doc.to_string()).unwrap()
}

/// The model of `ib_write_bw -a` at three sizes, the largest unfinished.
fn write_bw_model() -> Vec<PerftestRecord> {
    let mut unfinished = bw_record("bw", PerftestTest::WriteBw, 8_388_608, 12, 1, Limit::Wire);
    unfinished.completed = false;
    unfinished.finish_ps = None;
    vec![
        bw_record(
            "bw",
            PerftestTest::WriteBw,
            4096,
            5000,
            2_000_000_000,
            Limit::MessageRate,
        ),
        bw_record(
            "bw",
            PerftestTest::WriteBw,
            65_536,
            5000,
            27_000_000_000,
            Limit::Wire,
        ),
        unfinished,
    ]
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
fn perftest_bandwidth_against_the_models_workload_of_the_same_test_size_by_size() {
    let t = compare(
        "real",
        &parsed("perftest/write_bw_all_gbits.txt"),
        "sim",
        &results(&["lossless", "lossy"], &write_bw_model()),
    )
    .unwrap();
    assert_eq!(t.len(), 2, "one table per variant");
    assert_eq!(
        t[0].title,
        "variant lossless: perftest workload bw (write_bw)"
    );
    let sizes: Vec<(u64, &str)> = t[0]
        .rows
        .iter()
        .map(|r| (r.size.unwrap(), r.metric.as_str()))
        .collect();
    assert_eq!(
        sizes,
        [
            (4096, "BW average"),
            (4096, "message rate"),
            (65_536, "BW average"),
            (65_536, "message rate"),
        ],
        "the sizes both sides ran (8 MiB did not finish in the model)"
    );
    // 65536 B x 5000 x 8 bits in 27 ms = 97.09 Gb/s; perftest said 97.39.
    let r = &t[0].rows[2];
    assert_eq!((r.a, r.b), (97_390_000_000, 97_090_370_370));
    assert_eq!(r.ratio_permille, Some(996));
    assert_eq!(r.verdict, Verdict::Agree);
    assert_eq!(r.limit.as_deref(), Some("wire"));
    // 5000 messages in 2 ms = 2.5 Mpps against perftest's 2.713263.
    let r = &t[0].rows[1];
    assert_eq!(
        (r.a, r.b, r.ratio_permille),
        (2_713_263, 2_500_000, Some(921))
    );
    assert_eq!(r.limit.as_deref(), Some("message-rate"));
    assert!(
        t[0].notes
            .iter()
            .any(|n| n.starts_with("sizes only in A, not compared: 2, 4, 8, ...")),
        "{:?}",
        t[0].notes
    );
    assert!(
        t[0].notes
            .iter()
            .any(|n| n == "the model did not complete size 8388608 B"),
        "{:?}",
        t[0].notes
    );
    let text = render_text(&t);
    assert!(
        text.contains("97.39 Gb/s") && text.contains("97.09 Gb/s") && text.contains("0.996"),
        "{text}"
    );
    assert!(text.contains("message-rate"), "the limit is shown: {text}");
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(json[0]["rows"][2]["size"], 65_536);
    assert_eq!(json[0]["rows"][2]["limit"], "wire");
    assert_eq!(json[0]["rows"][2]["ratio_permille"], 996);
}

#[test]
fn perftest_latency_against_the_models_samples_with_the_model_as_a() {
    // Round trips of 1.9, 2.0 and 2.1 us: perftest halves them for WRITE.
    let model = [lat_record(
        "lat",
        PerftestTest::WriteLat,
        2,
        &[1_900_000, 2_000_000, 2_100_000],
    )];
    let t = compare(
        "sim",
        &results(&["lossless"], &model),
        "real",
        &parsed("perftest/write_lat.txt"),
    )
    .unwrap();
    let rows = &t[0].rows;
    let got: Vec<(&str, u64, u64, Option<u64>)> = rows
        .iter()
        .map(|r| (r.metric.as_str(), r.a, r.b, r.ratio_permille))
        .collect();
    assert_eq!(
        got,
        [
            ("t_typical", 1_000_000, 940_000, Some(940)),
            ("t_avg", 1_000_000, 950_000, Some(950)),
        ]
    );
    assert!(rows.iter().all(|r| r.size == Some(2)));
    assert!(rows.iter().all(|r| r.limit.as_deref() == Some("latency")));
    assert!(t[0].notes.is_empty(), "{:?}", t[0].notes);
}

#[test]
fn setup_differences_both_sides_state_are_noted() {
    let mut model = write_bw_model();
    for r in &mut model {
        r.qps = 4;
        r.tx_depth = 64;
        r.bidirectional = true;
    }
    let t = compare(
        "real",
        &parsed("perftest/write_bw_client.txt"),
        "sim",
        &results(&["lossless"], &model),
    )
    .unwrap();
    let notes = &t[0].notes;
    for want in [
        "qps differ: A 1, B 4",
        "TX depths differ: A 128, B 64",
        "directions differ: A one way, B bidirectional (-b)",
        "sizes only in B, not compared: 4096, 8388608 B",
    ] {
        assert!(notes.iter().any(|n| n == want), "{want}: {notes:?}");
    }
    assert!(
        render_text(&t).contains("note: qps differ: A 1, B 4"),
        "notes are printed"
    );
}

#[test]
fn a_perftest_output_next_to_a_fabric_run_is_refused_with_why_and_what_would() {
    let e = compare(
        "real.txt",
        &parsed("perftest/write_bw_client.txt"),
        "incast/results.json",
        &parsed("sim/results.json"),
    )
    .unwrap_err();
    assert!(matches!(e, CompareError::FabricRun { .. }), "{e:?}");
    let msg = e.to_string();
    for want in [
        "B (incast/results.json) is a fabric run (variants: lossless, lossy",
        "not a perftest run",
        "a perftest output (A, real.txt: ib_write_bw)",
        "run `rocelab twin real.txt`",
        "`kind = \"perftest\"` workload with `test = \"write_bw\"`",
    ] {
        assert!(msg.contains(want), "{want}: {msg}");
    }
    // Either order; a latency output names its own test.
    let e = compare(
        "run.json",
        &parsed("sim/results.json"),
        "lat.txt",
        &parsed("perftest/write_lat.txt"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("A (run.json) is a fabric run") && e.contains("`test = \"write_lat\"`"),
        "{e}"
    );
}

#[test]
fn a_different_test_is_refused() {
    let model = [lat_record("lat", PerftestTest::WriteLat, 2, &[2_000_000])];
    let e = compare(
        "real",
        &parsed("perftest/write_bw_client.txt"),
        "sim",
        &results(&["lossless"], &model),
    )
    .unwrap_err();
    assert!(matches!(e, CompareError::DifferentTest { .. }), "{e:?}");
    let msg = e.to_string();
    assert!(
        msg.starts_with(
            "B's results hold write_lat (workload lat); A is ib_write_bw: not the same test"
        ),
        "{msg}"
    );
    // READ against WRITE, and a test the simulator has no workload for.
    let e = compare(
        "real",
        &parsed("perftest/read_bw_old_mb.txt"),
        "sim",
        &results(&["lossless"], &write_bw_model()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("hold write_bw (workload bw); A is ib_read_bw"),
        "{e}"
    );
    let e = compare(
        "real",
        &parsed("perftest/atomic_bw.txt"),
        "sim",
        &results(&["lossless"], &write_bw_model()),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("A is ib_atomic_bw: not the same test")
            && e.contains("the simulator has no ib_atomic_bw workload"),
        "{e}"
    );
}

#[test]
fn several_workloads_of_the_test_need_a_name() {
    let mut model = write_bw_model();
    model.extend(write_bw_model().into_iter().map(|mut r| {
        r.group = r.group.replacen("bw", "bw8", 1);
        r.qps = 8;
        r
    }));
    let real = parsed("perftest/write_bw_client.txt");
    let sim = results(&["lossless"], &model);
    let e = compare("real", &real, "sim", &sim).unwrap_err();
    assert_eq!(
        e.to_string(),
        "B (sim) holds 2 perftest workloads of write_bw (bw, bw8): name one with --workload NAME"
    );
    let pick = |w: &str| Options {
        workload: Some(w.to_string()),
    };
    let t = compare_with("real", &real, "sim", &sim, &pick("bw8")).unwrap();
    assert_eq!(
        t[0].title,
        "variant lossless: perftest workload bw8 (write_bw)"
    );
    assert!(t[0].notes.iter().any(|n| n == "qps differ: A 1, B 8"));
    let e = compare_with("real", &real, "sim", &sim, &pick("nope")).unwrap_err();
    assert!(matches!(e, CompareError::NoWorkload { .. }), "{e}");
}

#[test]
fn an_excerpt_without_its_title_compares_with_the_test_of_its_kind() {
    let model = [bw_record(
        "bw",
        PerftestTest::WriteBw,
        2,
        5000,
        1_200_000_000,
        Limit::MessageRate,
    )];
    let t = compare(
        "real",
        &parsed("perftest/write_bw_truncated.txt"),
        "sim",
        &results(&["lossless"], &model),
    )
    .unwrap();
    assert!(
        t[0].notes
            .iter()
            .any(|n| n == "A's title is missing: taken as write_bw, the model's test"),
        "{:?}",
        t[0].notes
    );
    assert_eq!(t[0].rows[0].size, Some(2));
}

#[test]
fn perftest_against_perftest_size_by_size_and_only_the_same_test() {
    let t = compare(
        "a",
        &parsed("perftest/write_bw_client.txt"),
        "b",
        &parsed("perftest/write_bw_mtu1024.txt"),
    )
    .unwrap();
    assert_eq!(t[0].title, "perftest vs perftest: ib_write_bw");
    let avg = t[0].rows.iter().find(|r| r.metric == "BW average").unwrap();
    assert_eq!(avg.size, Some(65_536));
    assert_eq!(
        avg.verdict,
        Verdict::Close,
        "11497.82 vs 10371.55 MiB/s: 10.9 % apart"
    );
    assert_eq!(avg.ratio_permille, Some(902));
    assert!(t[0]
        .notes
        .iter()
        .any(|n| n == "MTUs differ: A 4096 B, B 1024 B"));
    let t = compare(
        "a",
        &parsed("perftest/write_bw_all_gbits.txt"),
        "b",
        &parsed("perftest/write_bw_client.txt"),
    )
    .unwrap();
    assert!(t[0].rows.iter().all(|r| r.size == Some(65_536)));
    let e = compare(
        "a",
        &parsed("perftest/write_bw_client.txt"),
        "b",
        &parsed("perftest/write_lat.txt"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("A is ib_write_bw; B is ib_write_lat: not the same test"),
        "{e}"
    );
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

#[test]
fn counters_next_to_perftest_or_results_are_refused_with_why() {
    let e = compare(
        "a",
        &parsed("ethtool/mlx5_two_dumps_date.txt"),
        "b",
        &parsed("perftest/write_bw_client.txt"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("cannot compare A (ethtool) with B (perftest): a counter dump counts"),
        "{e}"
    );
    let e = compare(
        "a",
        &parsed("sim/results.json"),
        "b",
        &parsed("rdma/two_snapshots.txt"),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("cannot compare A (sim-results) with B (rdma)")
            && e.contains("`counters/<variant>/<node>.rdma.txt`"),
        "{e}"
    );
    let e = compare(
        "a",
        &parsed("ethtool/mlx5_two_dumps_date.txt"),
        "b",
        &parsed("rdma/two_snapshots.txt"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("compare two dumps of the same tool"), "{e}");
}
