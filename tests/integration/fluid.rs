//! Fluid mode (`fidelity = "fluid"`) against the packet model on the
//! cases of `scenarios/fluid-check.toml`: within 10 % where the packet
//! run neither paused nor dropped, the error stated where it did; and
//! what fluid mode cannot model is refused before a run.

use serde_json::Value;

use crate::cli_sim::{ok, rocelab, scratch};

/// The largest absolute error the check judges a variant on: its
/// collective and step times when it has them, else its FCT
/// distribution (mean and p99) and makespan.
fn judged_error(c: &Value) -> f64 {
    let f = |k: &str| c[k].as_f64().map(f64::abs);
    let groups = [f("group_error_max_abs"), f("step_error_max_abs")];
    if groups.iter().any(Option::is_some) {
        groups.into_iter().flatten().fold(0.0, f64::max)
    } else {
        ["fct_mean_error", "fct_p99_error", "makespan_error"]
            .iter()
            .filter_map(|k| f(k))
            .fold(0.0, f64::max)
    }
}

#[test]
fn fluid_mode_matches_the_packet_model_where_nothing_pauses() {
    let out = scratch("fluid-check");
    ok(&rocelab(&[
        "run",
        "scenarios/fluid-check.toml",
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ]));
    let j: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let variants = j["variants"].as_array().unwrap();
    assert!(variants.len() >= 10, "{} cases", variants.len());
    let (mut clean, mut paused) = (0, 0);
    for v in variants {
        let name = v["summary"]["variant"].as_str().unwrap();
        let fl = &v["fluid"];
        assert!(
            fl["leaves_out"].as_array().is_some_and(|l| l.len() >= 4),
            "{name}: {fl}"
        );
        let c = &fl["check"];
        assert_eq!(
            v["summary"]["flows_completed"], v["summary"]["flows_total"],
            "{name}"
        );
        let err = judged_error(c);
        let verdict = c["verdict"].as_str().unwrap();
        if c["packet_pause_frames"] == 0 && c["packet_drops"] == 0 {
            clean += 1;
            assert!(err <= 0.10, "{name}: off by {err}: {c}");
            assert!(verdict.contains("within 10 %"), "{name}: {verdict}");
        } else {
            paused += 1;
            assert!(
                verdict.contains("PAUSE frames") && verdict.contains("models neither"),
                "{name}: {verdict}"
            );
        }
        // Same flows, same completions: fluid mode loses nothing.
        assert!(c["flows"].as_u64().unwrap() > 0, "{name}: {c}");
    }
    assert!(clean >= 8 && paused >= 2, "{clean} clean, {paused} paused");
}

/// A fluid run cannot inject a fault in time: `validate` refuses it,
/// naming the key, so `run` never meets it; `fidelity_check` without
/// fluid mode is refused too.
#[test]
fn fluid_mode_refuses_what_needs_frames() {
    let dir = scratch("fluid-refusals");
    let file = dir.join("f.toml");
    let topo = crate::cli_sim::repo().join("topologies/star-4.toml");
    let base = format!(
        "name = \"f\"\ntopology = {:?}\n[[workload]]\nkind = \"permutation\"\nsize = \"1MB\"\n",
        topo.to_str().unwrap()
    );
    std::fs::write(
        &file,
        format!(
            "fidelity = \"fluid\"\n{base}[[faults]]\nfrom = \"h0\"\nto = \"sw0\"\nloss = 0.01\n"
        ),
    )
    .unwrap();
    let o = rocelab(&["validate", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("fidelity") && err.contains("faults"), "{err}");
    std::fs::write(&file, format!("fidelity_check = true\n{base}")).unwrap();
    let o = rocelab(&["validate", file.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("fidelity_check"), "{err}");
    // The same file in fluid mode without the fault runs, and says so.
    std::fs::write(&file, format!("fidelity = \"fluid\"\n{base}")).unwrap();
    let out = dir.join("out");
    let text = ok(&rocelab(&[
        "run",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(text.contains("fidelity           fluid"), "{text}");
}
