//! IRN's comparison matrix (docs/VALIDATION.md IRN-1) on
//! `scenarios/irn-comparison.toml`: RoCE (go-back-N) and IRN (selective
//! repeat with a BDP window), each with and without PFC, with no
//! congestion control and with DCQCN, on a k = 6 fat tree at 70 % load.
//! The orderings the paper states must hold on mean FCT, 99th-percentile
//! FCT and mean slowdown, for both congestion controls.

use serde_json::Value;

use crate::cli_sim::{ok, repo, rocelab, scratch};

/// Mean FCT, p99 FCT (nearest rank) and mean slowdown of a variant, with
/// a flow that did not finish counted as ending with the run (a lower
/// bound on its FCT) and its slowdown as that FCT over its ideal.
struct Metrics {
    mean_fct: f64,
    p99_fct: f64,
    slowdown: f64,
    unfinished: usize,
}

/// One of [`Metrics`]' numbers.
type Metric = fn(&Metrics) -> f64;

fn metrics(v: &Value) -> Metrics {
    let end = v["summary"]["sim_time_ps"].as_f64().unwrap();
    let flows = v["flows"].as_array().expect("record.flows is on");
    let mut fct = Vec::new();
    let mut slow = 0.0;
    let mut unfinished = 0;
    for f in flows {
        match (f["fct_ps"].as_f64(), f["slowdown"].as_f64()) {
            (Some(t), Some(s)) => {
                fct.push(t);
                slow += s;
            }
            _ => {
                // The ideal FCT of a finished flow is fct / slowdown; for
                // an unfinished one, size at 40 Gbit/s is below it.
                let start = f["posted_ps"].as_f64().unwrap();
                let ideal = f["size"].as_f64().unwrap() * 8.0 / 40e9 * 1e12;
                fct.push(end - start);
                slow += (end - start) / ideal.max(1.0);
                unfinished += 1;
            }
        }
    }
    let n = fct.len();
    fct.sort_by(f64::total_cmp);
    let rank = ((0.99 * n as f64).ceil() as usize).clamp(1, n);
    Metrics {
        mean_fct: fct.iter().sum::<f64>() / n as f64,
        p99_fct: fct[rank - 1],
        slowdown: slow / n as f64,
        unfinished,
    }
}

#[test]
fn irn_1_orderings_hold_for_every_metric_with_and_without_dcqcn() {
    let dir = scratch("irn-comparison");
    let out = dir.join("out");
    let scenario = repo().join("scenarios/irn-comparison.toml");
    ok(&rocelab(&[
        "run",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]));
    let text = std::fs::read_to_string(out.join("results.json")).unwrap();
    let j: Value = serde_json::from_str(&text).unwrap();
    let get = |name: &str| {
        let v = j["variants"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["summary"]["variant"] == name)
            .unwrap_or_else(|| panic!("no variant {name}"));
        metrics(v)
    };
    for cc in ["", "-dcqcn"] {
        let roce_pfc = get(&format!("roce-pfc{cc}"));
        let roce_lossy = get(&format!("roce-lossy{cc}"));
        let irn_lossy = get(&format!("irn-lossy{cc}"));
        let irn_pfc = get(&format!("irn-pfc{cc}"));
        assert_eq!(
            roce_pfc.unfinished + irn_lossy.unfinished + irn_pfc.unfinished,
            0
        );
        let rows: [(&str, Metric); 3] = [
            ("mean FCT", |m| m.mean_fct),
            ("p99 FCT", |m| m.p99_fct),
            ("mean slowdown", |m| m.slowdown),
        ];
        for (what, f) in rows {
            let (pfc, lossy, irn, irn_pfc) =
                (f(&roce_pfc), f(&roce_lossy), f(&irn_lossy), f(&irn_pfc));
            eprintln!(
                "IRN-1{cc} {what}: roce-pfc {pfc:.4e} roce-lossy {lossy:.4e} irn-lossy {irn:.4e} irn-pfc {irn_pfc:.4e}; IRN improves on RoCE+PFC by {:.0} %",
                100.0 * (1.0 - irn / pfc)
            );
            // 1. RoCE without PFC is worse than with it.
            assert!(lossy > pfc, "{cc} {what}: RoCE lossy {lossy} vs PFC {pfc}");
            // 2. IRN without PFC is better than RoCE with PFC.
            assert!(irn < pfc, "{cc} {what}: IRN {irn} vs RoCE+PFC {pfc}");
            // 3. IRN with PFC is no better than IRN without (within the
            //    noise of one seed: 5 %).
            assert!(
                irn_pfc >= 0.95 * irn,
                "{cc} {what}: IRN+PFC {irn_pfc} vs IRN {irn}"
            );
        }
    }
}
