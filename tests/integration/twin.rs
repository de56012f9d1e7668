//! `rocelab twin` on public perftest runs (tests/fixtures/twin, each with
//! its source and setup in SETUP.md): the twin runs, lists what it
//! assumed, writes a scenario `run` accepts, and lands within the issue's
//! tolerances of the real numbers (10 % at 64 KiB and above, 20 % for
//! latency); bad input gets a message that says what was understood.

use std::path::PathBuf;

use crate::cli_sim::{ok, repo, rocelab, scratch};

fn fixture(p: &str) -> String {
    repo()
        .join("tests/fixtures/twin")
        .join(p)
        .display()
        .to_string()
}

/// `rocelab twin ARGS --json --out DIR`: the report.
fn twin(name: &str, args: &[&str]) -> (serde_json::Value, PathBuf) {
    let out = scratch(&format!("twin-{name}"));
    let mut all: Vec<&str> = vec!["twin"];
    all.extend_from_slice(args);
    let o = out.display().to_string();
    all.extend_from_slice(&["--json", "--out", &o]);
    let stdout = ok(&rocelab(&all));
    (serde_json::from_str(&stdout).expect("twin --json"), out)
}

fn rows(r: &serde_json::Value) -> &Vec<serde_json::Value> {
    r["rows"].as_array().expect("rows")
}

fn assumed(r: &serde_json::Value) -> Vec<String> {
    r["setup"]["assumptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["what"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_perftest_output_alone_lists_every_assumption_and_runs() {
    let (r, out) = twin(
        "alone",
        &[&fixture("cx4lx-25gbe-roce-send-bw/perftest.txt")],
    );
    let a = assumed(&r);
    // Nothing but the perftest output: the host, the link, the QoS and
    // the fabric are all assumptions.
    for what in [
        "nic_model",
        "pcie",
        "max_payload",
        "max_read_request",
        "link_gbps",
        "pfc_priorities",
        "trust",
        "back_to_back",
        "cable",
        "switch",
    ] {
        assert!(a.iter().any(|x| x == what), "{what} not in {a:?}");
    }
    assert_eq!(rows(&r).len(), 23, "-a: every size compared");
    // The written twin is an ordinary scenario: `validate` accepts it and
    // every assumed line says so.
    let file = out.join("twin.toml");
    ok(&rocelab(&["validate", file.to_str().unwrap()]));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("# assumed:"), "{text}");
    assert!(out.join("model-client.txt").is_file());
    assert!(out.join("twin.md").is_file());
    // The model's results compare with the real run like for like.
    let cmp = ok(&rocelab(&[
        "compare",
        &fixture("cx4lx-25gbe-roce-send-bw/perftest.txt"),
        out.join("results.json").to_str().unwrap(),
    ]));
    assert!(cmp.contains("65536"), "{cmp}");
}

#[test]
fn public_runs_of_three_generations_are_within_tolerance() {
    // ConnectX-4 Lx, 25G, ib_send_bw -a: sizes of 64 KiB and above.
    let (r, _) = twin("cx4lx", &[&fixture("cx4lx-25gbe-roce-send-bw")]);
    for row in rows(&r) {
        if row["bytes"].as_u64().unwrap() >= 65536 {
            let ratio = row["ratio"].as_f64().unwrap();
            assert!((ratio - 1.0).abs() <= 0.10, "{row}");
        }
    }
    // ConnectX-5 trained at Gen3 x8, back to back: the three bandwidth
    // tests at 1 MiB (PCIe-bound) and the two latency tests at 8 B.
    let dir = "cx5-100gbe-roce-gen3x8-b2b/excerpts";
    for (test, tol, limit) in [
        ("write_bw", 0.10, "pcie"),
        ("read_bw", 0.10, "pcie"),
        ("send_bw", 0.10, "pcie"),
        ("write_lat", 0.20, "latency"),
        ("send_lat", 0.20, "latency"),
    ] {
        let (r, _) = twin(
            test,
            &[
                &fixture(&format!("{dir}/{test}.txt")),
                &fixture(&format!("{dir}/lspci.txt")),
                "--test",
                test,
                "--back-to-back",
            ],
        );
        let row = &rows(&r)[0];
        let ratio = row["ratio"].as_f64().unwrap();
        assert!((ratio - 1.0).abs() <= tol, "{test}: {row}");
        assert_eq!(row["limit"], limit, "{test}: {row}");
    }
    // ConnectX-7 of a DGX Spark: each of its two logical devices behind
    // its own PCIe Gen5 x4 link (what the source says and no dump shows).
    for c in ["client-1.txt", "client-2.txt"] {
        let (r, _) = twin(
            c,
            &[
                &fixture(&format!("dgx-spark-cx7-200gbe-roce-write-bw/{c}")),
                "--back-to-back",
                "--set",
                "nic.host.model=connectx-7",
                "--set",
                "nic.host.pcie_width=4",
            ],
        );
        let row = &rows(&r)[0];
        let ratio = row["ratio"].as_f64().unwrap();
        assert!((ratio - 1.0).abs() <= 0.10, "{c}: {row}");
        assert!(r["setup"]["understood"]
            .to_string()
            .contains("told: nic.host.pcie_width = 4"));
    }
}

#[test]
fn bad_input_says_what_was_understood() {
    let dir = scratch("twin-bad");
    let run = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        let o = rocelab(&[
            "twin",
            p.to_str().unwrap(),
            "--out",
            dir.join("out").to_str().unwrap(),
        ]);
        assert_eq!(o.status.code(), Some(2), "{name}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let real = std::fs::read_to_string(fixture("cx4lx-25gbe-roce-send-bw/perftest.txt")).unwrap();
    // Cut before its first row: the header is understood, no row.
    let head: String = real
        .lines()
        .take_while(|l| !l.trim_start().starts_with("#bytes"))
        .map(|l| format!("{l}\n"))
        .collect();
    let e = run("cut.txt", &head);
    assert!(
        e.contains("no result row") && e.contains("understood"),
        "{e}"
    );
    // A foreign file.
    let e = run("notes.txt", "meeting notes: the NIC was slow on Tuesday\n");
    assert!(e.contains("not a format the twin reads"), "{e}");
    assert!(e.contains("expected perftest output"), "{e}");
    // Two different tests interleaved in one file.
    let lat = std::fs::read_to_string(repo().join("reports/tests/fixtures/perftest/write_lat.txt"))
        .unwrap();
    let e = run("two.txt", &format!("{real}\n{lat}"));
    assert!(e.contains("not the two ends of one test"), "{e}");
    // --test must match the table's kind.
    let p = dir.join("bw.txt");
    std::fs::write(&p, &real).unwrap();
    let o = rocelab(&["twin", p.to_str().unwrap(), "--test", "write_lat"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("bandwidth table"));
}
