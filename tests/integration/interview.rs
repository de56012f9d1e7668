//! `rocelab interview`: deterministic per seed, the option it marks
//! correct is `rocelab doctor`'s first finding on the dumps it wrote, a
//! wrong answer is marked wrong, and seeds reach different faults. Every
//! run is from a scratch directory outside the checkout (the faults are
//! built into the binary) with the relative `--out out`, so that two runs
//! print the same paths.

use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::Value;

use crate::cli_sim::scratch;

/// `rocelab interview --seed SEED --out out ARGS...` in `dir`, with
/// `stdin` on standard input; it must succeed.
fn interview(dir: &Path, seed: u64, args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .current_dir(dir)
        .args(["interview", "--seed", &seed.to_string(), "--out", "out"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run rocelab");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "interview --seed {seed} {args:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    o
}

/// `--json` output of a run.
fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).expect("interview --json prints JSON")
}

/// Every file of the dumps folder: name and bytes, in name order.
fn dumps(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir.join("out/dumps"))
        .expect("out/dumps")
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

fn letter(i: u64) -> String {
    char::from(b'A' + i as u8).to_string()
}

fn correct(j: &Value, q: usize) -> u64 {
    j["questions"][q]["correct"]
        .as_u64()
        .expect("correct index")
}

#[test]
fn same_seed_gives_identical_questions_options_and_dumps() {
    let (a, b) = (scratch("interview-same-a"), scratch("interview-same-b"));
    for args in [&["--answer", "A,B"][..], &["--answer", "A,B", "--json"][..]] {
        let oa = interview(&a, 3, args, "");
        let ob = interview(&b, 3, args, "");
        assert_eq!(
            String::from_utf8_lossy(&oa.stdout),
            String::from_utf8_lossy(&ob.stdout),
            "{args:?}: same seed, different output"
        );
        let (da, db) = (dumps(&a), dumps(&b));
        // The counter bundles (nics.txt, switches.txt) and one mlnx_qos
        // file per host.
        assert!(da.len() >= 4, "dumps: {:?}", da.iter().map(|d| &d.0));
        assert_eq!(da, db, "same seed, different dumps");
    }
    // A different seed asks something else (the options or the dumps).
    let c = scratch("interview-same-c");
    let oc = interview(&c, 4, &["--answer", "A,B", "--json"], "");
    let ob = interview(&b, 3, &["--answer", "A,B", "--json"], "");
    assert!(json(&oc)["questions"] != json(&ob)["questions"] || dumps(&c) != dumps(&b));
}

#[test]
fn the_correct_option_is_the_doctors_first_finding_on_the_dumps() {
    for seed in [1, 2, 4, 5] {
        let dir = scratch(&format!("interview-doctor-{seed}"));
        let j = json(&interview(&dir, seed, &["--answer", "A,A", "--json"], ""));
        let d = Command::new(env!("CARGO_BIN_EXE_rocelab"))
            .current_dir(&dir)
            .args(["doctor", "out/dumps", "--json"])
            .output()
            .unwrap();
        assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
        let doc: Value = serde_json::from_slice(&d.stdout).unwrap();
        let first = &doc["findings"][0];
        assert!(first["impact"].as_str().is_some_and(|s| !s.is_empty()));
        for (q, field) in [(0, "impact"), (1, "check_first")] {
            let opts = j["questions"][q]["options"].as_array().unwrap();
            assert_eq!(opts.len(), 4, "seed {seed}: four options");
            let distinct: BTreeSet<&str> = opts.iter().map(|o| o.as_str().unwrap()).collect();
            assert_eq!(distinct.len(), 4, "seed {seed}: options repeat: {opts:?}");
            assert_eq!(
                opts[correct(&j, q) as usize],
                first[field],
                "seed {seed} question {}: the correct option is not the doctor's {field}",
                q + 1
            );
        }
        assert_eq!(j["doctor"]["id"], first["id"], "seed {seed}");
        // Only counter dumps, named by node, none naming the fault.
        let scenario = j["fault"]["scenario"].as_str().unwrap();
        for (name, bytes) in dumps(&dir) {
            // Per-node dumps, or the bundles of them (`==> h0.ethtool.txt <==`
            // sections) that runs write.
            let ok = [".ethtool.txt", ".rdma.txt", ".mlnx_qos.txt", ".pfcwd.txt"]
                .iter()
                .any(|e| name.ends_with(e))
                || name == "nics.txt"
                || name == "switches.txt";
            assert!(ok, "seed {seed}: {name} is not a counter dump");
            let text = String::from_utf8_lossy(&bytes);
            assert!(
                !text.contains(scenario),
                "seed {seed}: {name} names the fault"
            );
            assert!(!name.contains("fault"), "seed {seed}: {name}");
        }
        let report = PathBuf::from(j["report"].as_str().unwrap());
        assert!(dir.join(&report).is_file(), "seed {seed}: no {report:?}");
    }
}

#[test]
fn a_wrong_answer_is_marked_wrong_and_a_right_one_right() {
    let dir = scratch("interview-verdict");
    let seed = 6;
    let j = json(&interview(&dir, seed, &["--answer", "A,A", "--json"], ""));
    let (c1, c2) = (correct(&j, 0), correct(&j, 1));
    let (w1, w2) = ((c1 + 1) % 4, (c2 + 2) % 4);
    let wrong = format!("{},{}", letter(w1), letter(w2));
    let jw = json(&interview(&dir, seed, &["--answer", &wrong, "--json"], ""));
    assert_eq!(jw["verdict"], "wrong");
    for (q, a) in [(0, w1), (1, w2)] {
        assert_eq!(jw["questions"][q]["answer"], a);
        assert_eq!(jw["questions"][q]["verdict"], "wrong");
        assert_eq!(jw["questions"][q]["correct"], j["questions"][q]["correct"]);
    }
    // One right, one wrong: the whole is wrong.
    let mixed = format!("{},{}", letter(c1), letter(w2));
    let jm = json(&interview(&dir, seed, &["--answer", &mixed, "--json"], ""));
    assert_eq!(jm["questions"][0]["verdict"], "correct");
    assert_eq!(jm["questions"][1]["verdict"], "wrong");
    assert_eq!(jm["verdict"], "wrong");
    // Answers on standard input, lower case, as a person types them.
    let stdin = format!(
        "{}\n{}\n",
        letter(c1).to_lowercase(),
        letter(w2).to_lowercase()
    );
    let o = interview(&dir, seed, &[], &stdin);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains(&format!("Question 1: you said {}: correct.", letter(c1))),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Question 2: you said {}: wrong; the answer is {}.",
            letter(w2),
            letter(c2)
        )),
        "{text}"
    );
    assert!(text.contains("report: out/answer/report.html"), "{text}");
    // Both right.
    let right = format!("{},{}", letter(c1), letter(c2));
    let jr = json(&interview(&dir, seed, &["--answer", &right, "--json"], ""));
    assert_eq!(jr["verdict"], "correct");
}

#[test]
fn seeds_reach_several_faults() {
    let dir = scratch("interview-faults");
    let mut faults = BTreeSet::new();
    let mut symptoms = BTreeSet::new();
    for seed in 1..=8 {
        let j = json(&interview(&dir, seed, &["--answer", "A,A", "--json"], ""));
        faults.insert(j["fault"]["scenario"].as_str().unwrap().to_string());
        symptoms.insert(j["doctor"]["id"].as_str().unwrap().to_string());
    }
    assert!(faults.len() >= 4, "faults: {faults:?}");
    assert!(symptoms.len() >= 3, "first findings: {symptoms:?}");
}

#[test]
fn bad_answers_are_refused_with_what_was_expected() {
    let dir = scratch("interview-bad");
    for (args, stdin, want) in [
        (&["--answer", "A"][..], "", "expected 2 letters"),
        (&["--answer", "A,E"][..], "", "expected one letter A-D"),
        (&[][..], "a\n", "no answer to question 2"),
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_rocelab"))
            .current_dir(&dir)
            .args(["interview", "--seed", "1", "--out", "out"])
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .and_then(|mut c| {
                c.stdin.take().unwrap().write_all(stdin.as_bytes())?;
                c.wait_with_output()
            })
            .unwrap();
        assert!(!o.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}
