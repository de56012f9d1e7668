//! `rocelab sweep` and `rocelab merge`: points equal single runs, shards
//! merge into the local table byte for byte, missing points are named,
//! job files for Slurm and Kubernetes, and a real one-node Slurm cluster
//! running a sweep as an array job.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::cli_sim::{ok, repo};

fn rocelab(args: &[&str]) -> Output {
    rocelab_env(args, &[])
}

fn rocelab_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rocelab"));
    c.current_dir(repo()).args(args);
    for v in [
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_MIN",
        "SLURM_ARRAY_TASK_MAX",
        "SLURM_ARRAY_TASK_COUNT",
        "JOB_COMPLETION_INDEX",
        "ROCELAB_SHARDS",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    c.output().expect("run rocelab")
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-sweep-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(p: &Path) -> Vec<u8> {
    std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every file below `dir`, relative, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap().to_path_buf());
            }
        }
    }
    out.sort();
    out
}

/// A 2 x 3 grid of a tiny incast (PFC on and off), six points.
const SIX: &str = r#"
name = "six"
duration = "5ms"
topology = { generator = { kind = "leaf-spine", leaves = 2, spines = 1, hosts_per_leaf = 3 } }
[fabric.pfc]
enabled = true
priorities = [3]
[[workload]]
kind = "incast"
receiver = "h0"
senders = 2
size = "256KB"
priority = 3
[[variant]]
name = "lossless"
[[variant]]
name = "lossy"
fabric.pfc.enabled = false
[sweep.grid]
"fabric.buffer.size" = ["600KB", "2MB"]
"workload[0].senders" = [2, 3, 5]
"#;

fn six(dir: &Path) -> PathBuf {
    let f = dir.join("six.toml");
    std::fs::write(&f, SIX).unwrap();
    f
}

/// A fresh scratch directory `name` holding the [`SIX`] scenario: (the
/// directory, the scenario file).
fn scratch_six(name: &str) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let f = six(&dir);
    (dir, f)
}

/// `rocelab sweep SCENARIO --out OUT EXTRA...`, which must succeed; its
/// stdout.
fn sweep(scenario: &Path, out: &Path, extra: &[&str]) -> String {
    let mut args = vec![
        "sweep",
        scenario.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend(extra);
    ok(&rocelab(&args))
}

/// The whole sweep of `scenario` run here, quietly, into `dir/local`: the
/// table the sharded runs must reproduce.
fn local_table(scenario: &Path, dir: &Path) -> PathBuf {
    let local = dir.join("local");
    sweep(scenario, &local, &["-q"]);
    local
}

/// The files `names` of the tables in `a` and `b` are equal byte for byte.
fn assert_same_tables(a: &Path, b: &Path, names: &[&str]) {
    for t in names {
        assert_eq!(read(&a.join(t)), read(&b.join(t)), "{t}");
    }
}

#[test]
fn each_point_is_its_single_run_and_the_table_has_a_row_per_point_and_variant() {
    let (dir, f) = scratch_six("points");
    let out = dir.join("local");
    let stdout = sweep(&f, &out, &["--jobs", "2"]);
    assert!(stdout.contains("6 points"), "{stdout}");
    let csv = String::from_utf8(read(&out.join("sweep.csv"))).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert!(
        lines[0].starts_with(
            "point,fabric.buffer.size,workload[0].senders,seed,variant,sim_time_ps,events,flows_completed,flows_total,goodput_bps,drops,"
        ),
        "{}",
        lines[0]
    );
    assert_eq!(lines.len(), 1 + 6 * 2);
    assert!(
        lines[1].starts_with("0,600KB,2,1,lossless,"),
        "{}",
        lines[1]
    );
    assert!(lines[2].starts_with("0,600KB,2,1,lossy,"), "{}", lines[2]);
    assert!(lines[12].starts_with("5,2MB,5,1,lossy,"), "{}", lines[12]);
    let jsonl = String::from_utf8(read(&out.join("sweep.jsonl"))).unwrap();
    assert_eq!(jsonl.lines().count(), 12);
    let row: serde_json::Value = serde_json::from_str(jsonl.lines().nth(9).unwrap()).unwrap();
    assert_eq!(row["point"], 4);
    assert_eq!(row["set"]["fabric.buffer.size"], "2MB");
    assert_eq!(row["set"]["workload[0].senders"], 3);
    assert_eq!(row["variant"], "lossy");
    // The small buffer drops without PFC, more senders more.
    let drops = |line: &str| -> u64 {
        let cols: Vec<&str> = lines[0].split(',').collect();
        let i = cols.iter().position(|c| *c == "drops").unwrap();
        line.split(',').nth(i).unwrap().parse().unwrap()
    };
    assert!(
        drops(lines[6]) > drops(lines[2]),
        "{}\n{}",
        lines[2],
        lines[6]
    );
    assert_eq!(drops(lines[5]), 0, "PFC: no drops");
    let html = String::from_utf8(read(&out.join("sweep.html"))).unwrap();
    assert!(html.contains("Goodput over fabric.buffer.size"), "x axis");
    assert!(html.contains("<svg"));

    // Points 1 and 4 run alone with rocelab run: the same files, byte for byte.
    for (p, set) in [
        (1, ["fabric.buffer.size=\"600KB\"", "workload[0].senders=3"]),
        (4, ["fabric.buffer.size=2MB", "workload[0].senders=3"]),
    ] {
        let single = dir.join(format!("single-{p}"));
        ok(&rocelab(&[
            "run",
            f.to_str().unwrap(),
            "--set",
            set[0],
            "--set",
            set[1],
            "--quiet",
            "--out",
            single.to_str().unwrap(),
        ]));
        let point = out.join(format!("shard-1-of-1/points/{p:06}"));
        let theirs = files(&single);
        assert!(theirs.len() >= 5, "{theirs:?}");
        for rel in theirs {
            assert_eq!(
                read(&single.join(&rel)),
                read(&point.join(&rel)),
                "point {p}: {}",
                rel.display()
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn shards_merge_into_the_local_table_and_missing_points_are_named() {
    let (dir, f) = scratch_six("shards");
    let fs = f.to_str().unwrap();
    let local = local_table(&f, &dir);
    let sh = dir.join("sharded");
    let shs = sh.to_str().unwrap();
    // Shard 1 from Slurm's variables with ids from 0, shard 2 with ids
    // from 1, shard 3 from a Kubernetes completion index.
    let slurm = |id: &str, min: &str, max: &str| {
        vec![
            ("SLURM_ARRAY_TASK_ID", id.to_string()),
            ("SLURM_ARRAY_TASK_MIN", min.to_string()),
            ("SLURM_ARRAY_TASK_MAX", max.to_string()),
            ("SLURM_ARRAY_TASK_COUNT", "3".to_string()),
        ]
    };
    for env in [
        slurm("0", "0", "2"),
        slurm("2", "1", "3"),
        vec![
            ("JOB_COMPLETION_INDEX", "2".to_string()),
            ("ROCELAB_SHARDS", "3".to_string()),
        ],
    ] {
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        ok(&rocelab_env(&["sweep", fs, "--out", shs, "-q"], &env));
    }
    for i in 1..=3 {
        assert!(sh.join(format!("shard-{i}-of-3/manifest.json")).is_file());
    }
    assert!(!sh.join("sweep.csv").exists(), "a shard writes no table");
    let merged = dir.join("merged");
    ok(&rocelab(&["merge", shs, "--out", merged.to_str().unwrap()]));
    assert_same_tables(&merged, &local, &["sweep.csv", "sweep.jsonl", "sweep.html"]);
    // A shard that died: merge names its points and the shard to re-run.
    std::fs::remove_dir_all(sh.join("shard-2-of-3")).unwrap();
    let o = rocelab(&["merge", shs, "--out", merged.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("2 of 6 points are missing"), "{err}");
    assert!(
        err.contains("point 1 (fabric.buffer.size=\"600KB\" workload[0].senders=3; shard 2/3)"),
        "{err}"
    );
    assert!(err.contains("point 4 ("), "{err}");
    // It re-runs alone, and the merge is whole again.
    sweep(&f, &sh, &["--shard", "2/3", "-q"]);
    std::fs::remove_dir_all(&merged).unwrap();
    ok(&rocelab(&["merge", shs, "--out", merged.to_str().unwrap()]));
    assert_same_tables(&merged, &local, &["sweep.csv"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `rocelab validate` on `f`, written with `scenario` first, which must
/// fail; its stderr.
fn validate_refuses(f: &Path, scenario: &str) -> String {
    std::fs::write(f, scenario).unwrap();
    let o = rocelab(&["validate", f.to_str().unwrap()]);
    assert!(!o.status.success());
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn validate_checks_every_point_at_its_grid_value() {
    let dir = scratch("validate");
    let f = dir.join("bad.toml");
    // The third buffer size is too small for the headroom PFC needs.
    let err = validate_refuses(
        &f,
        &SIX.replace("[\"600KB\", \"2MB\"]", "[\"600KB\", \"2MB\", \"10KB\"]"),
    );
    let line = SIX
        .lines()
        .position(|l| l.starts_with("\"fabric.buffer.size\""))
        .unwrap()
        + 1;
    let col = "\"fabric.buffer.size\" = [\"600KB\", \"2MB\", ".len() + 1;
    assert!(
        err.contains(&format!("bad.toml:{line}:{col}: key `fabric.buffer.size`")),
        "{err}"
    );
    assert!(
        err.contains("(sweep point 6: fabric.buffer.size=\"10KB\""),
        "{err}"
    );
    // A mistake in the table itself, at its key.
    let err = validate_refuses(
        &f,
        &SIX.replace("\"workload[0].senders\"", "\"workload[0]..senders\""),
    );
    assert!(err.contains(&format!("bad.toml:{}:1:", line + 1)), "{err}");
    // And a good one says how many points it checked.
    let stdout = ok(&rocelab(&["validate", six(&dir).to_str().unwrap()]));
    assert!(stdout.contains("sweep: 6 points, each checked"), "{stdout}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn emit_writes_an_sbatch_array_and_an_indexed_job() {
    let (dir, f) = scratch_six("emit");
    let out = dir.join("out");
    sweep(&f, &out, &["--emit", "slurm", "--set", "nic.mtu=1024"]);
    let s = String::from_utf8(read(&out.join("sweep.sbatch"))).unwrap();
    assert!(s.starts_with("#!/bin/bash\n"), "{s}");
    assert!(s.contains("\n#SBATCH --array=1-6\n"), "{s}");
    assert!(s.contains("--shard \"${SLURM_ARRAY_TASK_ID}/6\""), "{s}");
    assert!(s.contains("'--set' 'nic.mtu=1024'"), "{s}");
    sweep(&f, &out, &["--emit", "k8s", "--shards", "3"]);
    let k = String::from_utf8(read(&out.join("sweep-job.yaml"))).unwrap();
    for want in [
        "kind: Job\n",
        "completionMode: Indexed\n",
        "completions: 3\n",
        "\"--shards\", \"3\"]",
        "name: rocelab-sweep-six\n",
    ] {
        assert!(k.contains(want), "{want:?} in {k}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Stops the test cluster when the test ends, however it ends.
struct Cluster(PathBuf);

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(repo().join("tests/slurm/stop.sh"))
            .arg(&self.0)
            .status();
    }
}

/// Whether the Slurm test can run here; under CI it must.
fn slurm_available() -> bool {
    let have = ["munged", "slurmctld", "slurmd", "sbatch"].iter().all(|p| {
        Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    // slurmd runs jobs as their users: it needs root.
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if have && root {
        return true;
    }
    let why = if have {
        "not root"
    } else {
        "slurm-wlm and munge are not installed"
    };
    assert!(
        std::env::var("CI").is_err(),
        "CI: the Slurm test needs Debian's slurm-wlm and munge as root ({why}); .ci/run installs them"
    );
    eprintln!("skipping the Slurm test: {why}");
    false
}

#[test]
fn a_real_slurm_array_job_gives_the_local_table() {
    if !slurm_available() {
        return;
    }
    let (dir, f) = scratch_six("slurm");
    let cluster = dir.join("cluster");
    let start = Command::new(repo().join("tests/slurm/start.sh"))
        .arg(&cluster)
        .output()
        .unwrap();
    let _guard = Cluster(cluster.clone());
    assert!(
        start.status.success(),
        "{}",
        String::from_utf8_lossy(&start.stderr)
    );
    let conf = cluster.join("slurm.conf");
    let sbatch = |args: &[&str]| {
        let o = Command::new("sbatch")
            .env("SLURM_CONF", &conf)
            .args(args)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "sbatch {args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    };
    let local = local_table(&f, &dir);
    let out = dir.join("slurm-out");
    let outs = out.to_str().unwrap();
    sweep(&f, &out, &["--emit", "slurm"]);
    let script = out.join("sweep.sbatch");
    // Six points, six array tasks; --wait returns when all are done.
    sbatch(&["--wait", script.to_str().unwrap()]);
    for i in 1..=6 {
        let pts = out.join(format!("shard-{i}-of-6/points"));
        assert_eq!(
            std::fs::read_dir(&pts).unwrap().count(),
            1,
            "{}",
            pts.display()
        );
    }
    ok(&rocelab(&["merge", outs]));
    assert_same_tables(&out, &local, &["sweep.csv", "sweep.jsonl"]);
    // A task that died re-runs alone as array task 4.
    std::fs::remove_dir_all(out.join("shard-4-of-6")).unwrap();
    assert!(!rocelab(&["merge", outs]).status.success());
    sbatch(&["--wait", "--array=4", script.to_str().unwrap()]);
    ok(&rocelab(&["merge", outs]));
    assert_same_tables(&out, &local, &["sweep.csv"]);
    drop(_guard);
    let _ = std::fs::remove_dir_all(&dir);
}
