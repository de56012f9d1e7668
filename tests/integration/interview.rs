//! `rocelab interview`: deterministic per seed; every fault is graded
//! against the cause written in its file (question 1's right option is
//! its `feels`, question 2's its `first`, no distractor has its cause);
//! the doctor is scored on the dumps, not trusted; a wrong answer is
//! marked wrong, and seeds reach different faults. Every run is from a
//! scratch directory outside the checkout (the faults are built into the
//! binary) with the relative `--out out`, so that two runs print the same
//! paths.

use std::collections::{BTreeMap, BTreeSet};
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

/// A fault's written answer: its first variant's `[diagnosis]`.
struct Truth {
    cause: String,
    feels: String,
    first: String,
}

/// Every fault of `scenarios/faults/` by file stem, read from the files
/// (not from the interview) with the scenario loader.
fn truths() -> BTreeMap<String, Truth> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/faults");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let p = e.unwrap().path();
        if !p.extension().is_some_and(|x| x == "toml") {
            continue;
        }
        let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
        let s = sim::scenario::load(&p).unwrap_or_else(|e| panic!("{stem}: {e}"));
        let d = s.variants[0]
            .diagnosis
            .clone()
            .unwrap_or_else(|| panic!("{stem}: no [diagnosis]"));
        out.insert(
            stem.clone(),
            Truth {
                cause: d.cause,
                feels: d.feels.unwrap_or_else(|| panic!("{stem}: no feels")),
                first: d.first.unwrap_or_else(|| panic!("{stem}: no first")),
            },
        );
    }
    out
}

/// Only what an operator collects, named by node, none naming the fault.
fn assert_dumps_name_nodes_only(dir: &Path, scenario: &str, fault: &str) {
    for (name, bytes) in dumps(dir) {
        // The counter bundles (`==> h0.ethtool.txt <==` sections), one
        // mlnx_qos and one ethtool IFACE file per host, and each switch's
        // buffer (mmuconfig -l) and ECN (ecnconfig -l) listings.
        let ok = [
            ".mlnx_qos.txt",
            ".link.txt",
            ".mmuconfig.txt",
            ".ecnconfig.txt",
        ]
        .iter()
        .any(|end| name.ends_with(end))
            || name == "nics.txt"
            || name == "switches.txt";
        assert!(ok, "{fault}: {name} is not a counter dump");
        let text = String::from_utf8_lossy(&bytes);
        for word in [scenario, fault, "rocelab"] {
            assert!(!text.contains(word), "{fault}: {name} names {word:?}");
        }
        assert!(!name.contains("fault"), "{fault}: {name}");
    }
}

#[test]
fn every_fault_is_graded_against_its_written_cause() {
    let truths = truths();
    assert_eq!(truths.len(), 14, "faults: {:?}", truths.keys());
    // Whose text is an option: question 1 reads `feels`, question 2 `first`.
    let owners = |q: usize, text: &str| -> Vec<&str> {
        truths
            .iter()
            .filter(|(_, t)| {
                if q == 0 {
                    t.feels == text
                } else {
                    t.first == text
                }
            })
            .map(|(_, t)| t.cause.as_str())
            .collect()
    };
    for (i, (name, truth)) in truths.iter().enumerate() {
        let dir = scratch(&format!("interview-every-{name}"));
        let seed = 11 + i as u64;
        let j = json(&interview(
            &dir,
            seed,
            &["--fault", name, "--answer", "A,A", "--json"],
            "",
        ));
        assert_eq!(j["fault"]["name"], name.as_str());
        assert_eq!(j["fault"]["cause"], truth.cause.as_str(), "{name}");
        for q in 0..2 {
            let opts: Vec<&str> = j["questions"][q]["options"]
                .as_array()
                .unwrap()
                .iter()
                .map(|o| o.as_str().unwrap())
                .collect();
            assert_eq!(opts.len(), 4, "{name}: four options");
            let distinct: BTreeSet<&str> = opts.iter().copied().collect();
            assert_eq!(distinct.len(), 4, "{name}: options repeat: {opts:?}");
            let right = correct(&j, q) as usize;
            let want = if q == 0 { &truth.feels } else { &truth.first };
            assert_eq!(
                opts[right],
                want.as_str(),
                "{name} question {}: the right option is not the written answer",
                q + 1
            );
            // Every distractor is another fault's written text, and no
            // fault whose text it is has this fault's cause.
            let mut causes = BTreeSet::new();
            for (k, o) in opts.iter().enumerate().filter(|(k, _)| *k != right) {
                let whose = owners(q, o);
                assert!(
                    !whose.is_empty(),
                    "{name}: option {k} is no fault's text: {o}"
                );
                assert!(
                    whose.iter().all(|c| *c != truth.cause),
                    "{name} question {}: distractor {o:?} states the cause {}",
                    q + 1,
                    truth.cause
                );
                causes.insert(whose[0]);
            }
            assert_eq!(causes.len(), 3, "{name}: distractors share a cause");
            // The causes the interview reports per option agree.
            assert_eq!(j["questions"][q]["causes"][right], truth.cause.as_str());
        }
        // The doctor is scored: its rank of the written cause, if any.
        let first_id = j["doctor"]["id"].as_str();
        assert_eq!(
            j["doctor_named_cause"].as_bool(),
            Some(first_id == Some(truth.cause.as_str())),
            "{name}: {}",
            j["doctor"]
        );
        assert_dumps_name_nodes_only(&dir, j["fault"]["scenario"].as_str().unwrap(), name);
    }
}

#[test]
fn the_doctor_is_scored_on_exactly_the_dumps() {
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
        let findings = doc["findings"].as_array().unwrap();
        assert_eq!(
            j["doctor"]["id"],
            findings.first().map_or(Value::Null, |f| f["id"].clone())
        );
        let cause = j["fault"]["cause"].as_str().unwrap();
        let rank = findings
            .iter()
            .position(|f| f["id"] == cause)
            .map(|i| i + 1);
        assert_eq!(
            j["doctor_rank"].as_u64(),
            rank.map(|r| r as u64),
            "seed {seed}"
        );
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
    let mut causes = BTreeSet::new();
    for seed in 1..=8 {
        let j = json(&interview(&dir, seed, &["--answer", "A,A", "--json"], ""));
        faults.insert(j["fault"]["scenario"].as_str().unwrap().to_string());
        causes.insert(j["fault"]["cause"].as_str().unwrap().to_string());
    }
    assert!(faults.len() >= 4, "faults: {faults:?}");
    assert!(causes.len() >= 3, "causes: {causes:?}");
}

#[test]
fn bad_answers_are_refused_with_what_was_expected() {
    let dir = scratch("interview-bad");
    for (args, stdin, want) in [
        (&["--answer", "A"][..], "", "expected 2 letters"),
        (&["--answer", "A,E"][..], "", "expected one letter A-D"),
        (&[][..], "a\n", "no answer to question 2"),
        (
            &["--fault", "no-such-fault", "--answer", "A,B"][..],
            "",
            "expected one of",
        ),
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

/// `--job` hides each fault of the training job's file inside the job:
/// it is graded against the cause its variant writes, no distractor has
/// that cause, and the job's step times come with the dumps as its
/// training log prints them, beside its healthy step (the baseline run
/// without the fault): a 90 ms stall adds about 90 ms to one step, a
/// refused MTU leaves every step unfinished.
#[test]
fn a_fault_inside_a_training_job_comes_with_its_step_times() {
    let dir = scratch("interview-job");
    let written = [
        ("slow-nic", "slow-receiver"),
        ("storm", "pfc-storm"),
        ("lossy-link", "packet-loss"),
        ("mtu", "mtu-mismatch"),
    ];
    let text = std::fs::read_to_string(
        crate::cli_sim::repo().join("scenarios/interview/training-job.toml"),
    )
    .unwrap();
    for (name, cause) in written {
        assert!(
            text.contains(&format!("name = \"{name}\""))
                && text.contains(&format!("cause = \"{cause}\"")),
            "{name}: {cause} is not what the file writes"
        );
        let j = json(&interview(
            &dir,
            7,
            &["--job", "--fault", name, "--answer", "A,A", "--json"],
            "",
        ));
        assert_eq!(j["fault"]["name"], name);
        assert_eq!(j["fault"]["cause"], cause);
        for q in 0..2 {
            let causes = j["questions"][q]["causes"].as_array().unwrap();
            assert_eq!(causes.len(), 4);
            assert_eq!(causes[correct(&j, q) as usize], cause);
            assert_eq!(causes.iter().filter(|c| *c == cause).count(), 1);
        }
        let log: Vec<String> = j["job_steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect();
        let ms =
            |l: &str| -> Option<f64> { l.split(": ").nth(1)?.strip_suffix(" ms")?.parse().ok() };
        let healthy = log
            .last()
            .and_then(|l| l.strip_prefix("(the same job's step on a healthy day: "))
            .and_then(|l| l.strip_suffix(" ms)"))
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or_else(|| panic!("{name}: {log:?}"));
        let steps: Vec<&String> = log.iter().filter(|l| l.starts_with("step ")).collect();
        assert_eq!(steps.len(), 2, "{log:?}");
        match name {
            "storm" => {
                let s0 = ms(steps[0]).unwrap();
                assert!(s0 >= healthy + 89.0 && s0 <= healthy + 95.0, "{log:?}");
                assert!(ms(steps[1]).unwrap() <= 1.05 * healthy, "{log:?}");
            }
            "mtu" => assert!(steps.iter().all(|l| l.contains("no progress")), "{log:?}"),
            _ => assert!(
                steps.iter().all(|l| ms(l).unwrap() > 1.1 * healthy),
                "{log:?}"
            ),
        }
        let file = std::fs::read_to_string(dir.join("out/job-steps.txt")).unwrap();
        assert_eq!(file.lines().count(), log.len());
        assert!(!dir.join("out/dumps/job-steps.txt").exists());
    }
}
