//! rdma-core's own verbs test suite (v44, the version Debian ships),
//! unmodified, over rocelab's libibverbs.so.1 and librdmacm.so.1.
//!
//! The suite is pyverbs unittest cases that open a device and run control
//! path and traffic tests against it; providers are held to it (the Linux
//! kernel's test robot runs it on Soft-RoCE). Its copy lives beside the
//! checkout in `../shared/third-party/rdma-core-v44-tests`; the test copies
//! it into a scratch folder as `tests/` and runs every generic case (the
//! `mlx5` and `efa` modules are vendor suites that skip on other devices)
//! on its own, under `rocelab exec`, with a time limit, so a hang is
//! counted as one and does not stop the rest.
//!
//! What it holds the device to: no case fails, none hangs, at least
//! [`MIN_PASS`] pass, and every skip is for a reason this file names
//! ([`ALLOWED_SKIPS`]: features the emulated device does not have, each
//! with why, some for named cases only). A new kind of skip
//! fails the test until it is named here.
//!
//! Needs `python3-pyverbs`; without it (or without the suite's copy) the
//! test skips with a message, except under CI, where it fails.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::wire::under_ci;

/// The fewest generic cases that must pass: all that passed when this was
/// last measured (128 of the 170 generic cases).
const MIN_PASS: usize = 128;

/// How long one case may take before it counts as a hang. The slowest
/// traffic cases take a few seconds in a debug build.
const CASE_LIMIT: Duration = Duration::from_secs(90);

/// Skip reasons the device may give: (case, reason, why). `reason` is a
/// fragment of the suite's message and `why` says why the emulated device
/// lacks the feature; `case`, when not empty, confines the entry to the
/// cases whose id contains it (the same reason from another case is a
/// regression).
const ALLOWED_SKIPS: &[(&str, &str, &str)] = &[
    ("", "dmabuf is not supported", "dma-buf memory comes from a GPU's DRM render node"),
    ("", "no huge pages", "a host setting: no 2 MiB huge pages are reserved on the machine"),
    ("", "cuda-python", "CUDA memory needs a GPU"),
    ("", "Raw Packet QP", "raw Ethernet QPs need a NIC's packet steering; the device speaks RoCEv2 only"),
    ("", "QP type 8", "QP type 8 is IBV_QPT_RAW_PACKET: raw Ethernet, as above"),
    ("", "All gid indices populated", "the bad-flow case needs an empty GID index; the suite's own condition"),
    ("", "Create XRCD is not supported", "XRC domains and XRC QPs are not implemented"),
    ("", "Tag matching", "hardware tag matching is a vendor offload (ConnectX's)"),
    ("", "Multicast is not supported", "UD multicast (ibv_attach_mcast, rdma_join_multicast) is not implemented: max_mcast_grp is 0"),
    ("test_tag_matching", "Extended CQ is not supported", "the tag-matching cases ask for a CQ with IBV_WC_EX_WITH_TM_INFO; hardware tag matching is a ConnectX offload the device does not have"),
    ("test_shared_pd", "Importing a device is not supported", "ibv_import_device shares a kernel uverbs file between processes; the emulated device lives inside each process, so there is nothing to import"),
    ("test_import_dm", "Some object imports are not supported", "the case imports a DM through a context imported from a dup of cmd_fd (ibv_import_device), which the device does not offer, as above"),
];

/// The suite's copy beside the checkout, or `None` (after saying why)
/// when the test should skip.
fn suite() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("shared")
        .join("third-party")
        .join("rdma-core-v44-tests");
    let pyverbs = Command::new("/usr/bin/python3")
        .args(["-c", "import pyverbs"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let why = if !dir.join("run_tests.py").is_file() {
        "rdma-core's test suite is not beside the checkout (../shared/third-party)"
    } else if !pyverbs {
        "pyverbs is not installed (apt-get install python3-pyverbs)"
    } else {
        return Some(dir);
    };
    assert!(!under_ci(), "{why}: required under CI");
    eprintln!("skipping: {why}");
    None
}

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// `python3 tests/run_tests.py ARGS` in `scratch`, under `rocelab exec`.
fn run_tests(scratch: &Path, args: &[&str]) -> Command {
    let py = PathBuf::from("/usr/bin/python3");
    let mut all = vec!["tests/run_tests.py"];
    all.extend_from_slice(args);
    let mut c = super::ibverbs_shim::exec(&py, &all);
    c.current_dir(scratch);
    c
}

/// How one case ended.
#[derive(Debug, Clone, PartialEq)]
enum Outcome {
    Pass,
    Skip(String),
    Fail(String),
    Hang,
}

/// The outcome unittest's verbose output reports for one case.
fn outcome(out: &str) -> Outcome {
    if let Some(i) = out.find("skipped ") {
        let rest = &out[i + "skipped ".len()..];
        let reason = rest.lines().next().unwrap_or("").trim();
        return Outcome::Skip(reason.trim_matches(|c| c == '\'' || c == '"').to_string());
    }
    if out.lines().any(|l| l.trim_end().ends_with("... ok"))
        || out.lines().any(|l| l.trim() == "OK")
    {
        return Outcome::Pass;
    }
    let last = out
        .lines()
        .rev()
        .filter(|l| !l.starts_with("FAILED ("))
        .find(|l| l.contains("Error") || l.contains("error") || l.contains("Exception"))
        .unwrap_or("no verdict");
    Outcome::Fail(last.trim().to_string())
}

/// Run one case with the time limit; its output goes to a file (a pipe
/// could fill while we wait).
fn run_case(scratch: &Path, id: &str, n: usize) -> (Outcome, String) {
    let log = scratch.join(format!("case-{n}.log"));
    let f = fs::File::create(&log).unwrap();
    let mut cmd = run_tests(scratch, &["-v", id]);
    cmd.stdout(f.try_clone().unwrap()).stderr(f);
    let mut child = cmd.spawn().unwrap();
    let end = Instant::now() + CASE_LIMIT;
    let hung = loop {
        if child.try_wait().unwrap().is_some() {
            break false;
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            break true;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = fs::read_to_string(&log).unwrap_or_default();
    if hung {
        (Outcome::Hang, out)
    } else {
        (outcome(&out), out)
    }
}

#[test]
fn rdma_core_generic_tests_pass_on_the_emulated_device() {
    let Some(src) = suite() else { return };
    let _alone = super::testbed::exclusive();
    let scratch = std::env::temp_dir().join(format!("rocelab-rdma-core-{}", std::process::id()));
    let _ = fs::remove_dir_all(&scratch);
    copy_dir(&src, &scratch.join("tests"));

    let listed = run_tests(&scratch, &["--list-tests"]).output().unwrap();
    assert!(
        listed.status.success(),
        "--list-tests failed:\n{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let ids: Vec<String> = String::from_utf8_lossy(&listed.stdout)
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("tests.test_"))
        .filter(|l| !l.contains("mlx5") && !l.contains("efa"))
        .map(String::from)
        .collect();
    assert!(ids.len() >= 150, "only {} generic cases listed", ids.len());

    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, Outcome, String)>> = Mutex::new(Vec::new());
    // The rdma_cm cases listen on one fixed port of the device's address,
    // as the suite does on a NIC: two at once would collide (EADDRINUSE),
    // so they take turns; the rest run two at a time.
    let cm_turn = Mutex::new(());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                let Some(id) = ids.get(n) else { break };
                let _turn = id.contains("rdmacm").then(|| cm_turn.lock().unwrap());
                let (o, out) = run_case(&scratch, id, n);
                results.lock().unwrap().push((n, o, out));
            });
        }
    });
    let mut results = results.into_inner().unwrap();
    results.sort_by_key(|r| r.0);

    let mut report = String::new();
    let (mut pass, mut bad, mut unnamed) = (0, Vec::new(), Vec::new());
    for (n, o, out) in &results {
        let id = &ids[*n];
        report.push_str(&format!("{id}: {o:?}\n"));
        match o {
            Outcome::Pass => pass += 1,
            Outcome::Skip(why) => {
                let named = ALLOWED_SKIPS
                    .iter()
                    .any(|(case, frag, _)| id.contains(case) && why.contains(frag));
                if !named {
                    unnamed.push(format!("{id}: {why}"));
                }
            }
            Outcome::Fail(_) | Outcome::Hang => bad.push(format!("{id}: {o:?}\n{out}")),
        }
    }
    eprintln!("{report}");
    eprintln!(
        "rdma-core generic tests: {} run, {pass} pass, {} skip, {} fail or hang",
        results.len(),
        results.len() - pass - bad.len(),
        bad.len()
    );
    assert!(bad.is_empty(), "failed or hung:\n{}", bad.join("\n"));
    assert!(
        unnamed.is_empty(),
        "skipped for a reason this test does not name:\n{}",
        unnamed.join("\n")
    );
    assert!(pass >= MIN_PASS, "{pass} pass, at least {MIN_PASS} must");
    let _ = fs::remove_dir_all(&scratch);
}

#[test]
fn verdicts_are_read_from_unittest_output() {
    let ok = "test_x (tests.a.B.test_x) ... ok\n\n----\nRan 1 test in 0.1s\n\nOK\n";
    assert_eq!(outcome(ok), Outcome::Pass);
    let skip = "test_x (tests.a.B.test_x)\nDoc ... skipped 'ODP is not supported - No ODP caps'\n\nOK (skipped=1)\n";
    assert_eq!(
        outcome(skip),
        Outcome::Skip("ODP is not supported - No ODP caps".into())
    );
    let err = "test_x (tests.a.B.test_x) ... ERROR\nTraceback\npyverbs.pyverbs_error.PyverbsRDMAError: Retry exceeded\n\nFAILED (errors=1)\n";
    assert!(matches!(outcome(err), Outcome::Fail(m) if m.contains("Retry exceeded")));
}
