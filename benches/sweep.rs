//! A local sweep of 32 points against the same 32 points run one by one
//! with `rocelab run` (the built binary, as a user would): the sweep must
//! use the cores (wall time at most 0.6 x the sum of the single runs on
//! two or more cores) and give each point the single run's files byte for
//! byte.
//!
//! `cargo bench -p rocelab --bench sweep [-- --jobs N]`. Prints the sum of
//! the single runs, the sweep's wall time, their ratio and the verdict;
//! exits non-zero when a point differs. On a machine whose cores are busy
//! with other work the ratio says so: it is measured, not assumed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// 4 buffer sizes x 4 fan-ins x 2 seeds of an incast on a leaf-spine with
/// DCQCN (random ECN marking makes the seeds differ).
const SCENARIO: &str = r#"
name = "bench-sweep"
duration = "500ms"
topology = { generator = { kind = "leaf-spine", leaves = 4, spines = 2, hosts_per_leaf = 8 } }
[fabric.pfc]
enabled = true
priorities = [3]
[nic]
mtu = 4096
cc = { algorithm = "dcqcn" }
[[workload]]
kind = "incast"
receiver = "h0"
senders = 8
size = "32MB"
priority = 3
[sweep]
seeds = [1, 2]
[sweep.grid]
"fabric.buffer.size" = ["2MB", "4MB", "8MB", "16MB"]
"workload[0].senders" = [8, 16, 24, 31]
"#;

fn rocelab(args: &[&str]) -> f64 {
    let t = Instant::now();
    let o = Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(args)
        .output()
        .expect("run rocelab");
    assert!(
        o.status.success(),
        "rocelab {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    t.elapsed().as_secs_f64()
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read dir") {
        let p = e.expect("entry").path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let jobs = args
        .iter()
        .position(|a| a == "--jobs")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let dir = std::env::temp_dir().join(format!("rocelab-bench-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let file = dir.join("sweep.toml");
    std::fs::write(&file, SCENARIO).expect("write scenario");
    let f = file.to_str().expect("utf-8 path");

    let sizes = ["2MB", "4MB", "8MB", "16MB"];
    let senders = [8, 16, 24, 31];
    let seeds = [1, 2];
    let mut single_sum = 0.0;
    let mut singles = Vec::new();
    let mut p = 0;
    for size in sizes {
        for n in senders {
            for seed in seeds {
                let out = dir.join(format!("single-{p}"));
                let secs = rocelab(&[
                    "run",
                    f,
                    "--set",
                    &format!("fabric.buffer.size=\"{size}\""),
                    "--set",
                    &format!("workload[0].senders={n}"),
                    "--seed",
                    &seed.to_string(),
                    "--quiet",
                    "--out",
                    out.to_str().expect("utf-8 path"),
                ]);
                single_sum += secs;
                singles.push(out);
                p += 1;
            }
        }
    }
    let out = dir.join("sweep");
    let mut sweep_args = vec!["sweep", f, "--quiet", "--out", out.to_str().expect("utf-8")];
    if let Some(j) = &jobs {
        sweep_args.extend(["--jobs", j.as_str()]);
    }
    let wall = rocelab(&sweep_args);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let ratio = wall / single_sum;
    println!(
        "sweep of {p} points on {} thread(s): {wall:.2} s wall; single runs {single_sum:.2} s in sum \
         ({:.3} s each); ratio {ratio:.3} ({})",
        jobs.as_deref().map_or(cores.to_string(), str::to_string),
        single_sum / p as f64,
        if ratio <= 0.6 {
            "at most 0.6: the cores are used"
        } else {
            "above 0.6"
        }
    );
    let mut differ = 0;
    for (i, single) in singles.iter().enumerate() {
        let point = out.join(format!("shard-1-of-1/points/{i:06}"));
        let mut fs = Vec::new();
        files(single, &mut fs);
        for a in fs {
            let rel = a.strip_prefix(single).expect("below");
            if std::fs::read(&a).ok() != std::fs::read(point.join(rel)).ok() {
                differ += 1;
                eprintln!("point {i}: {} differs from its single run", rel.display());
            }
        }
    }
    println!(
        "per-point files identical to the single runs: {}",
        if differ == 0 { "yes" } else { "NO" }
    );
    let _ = std::fs::remove_dir_all(&dir);
    if differ > 0 {
        std::process::exit(1);
    }
}
