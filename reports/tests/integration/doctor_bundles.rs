//! The doctor on counter bundles: a run's `counters/<variant>/nics.txt`
//! and `switches.txt` read exactly as the one-file-per-dump folders that
//! runs wrote before (which stay readable), and `tail -n +1` output of
//! real dumps reads as its files.

use std::path::{Path, PathBuf};

use reports::doctor::{diagnose, load, Options};

/// A run folder of the tiny incast with its counters as `rocelab run`
/// writes them (bundles) or, with `split`, one file per dump as before.
fn folder(tag: &str, split: bool) -> PathBuf {
    let dir = crate::doctor::tiny_run_folder(tag);
    if split {
        for r in &crate::render::tiny().variants {
            let vdir = dir.join("counters").join(&r.summary.variant);
            for b in [sim::stats::NICS_FILE, sim::stats::SWITCHES_FILE] {
                let text = std::fs::read_to_string(vdir.join(b)).unwrap();
                for (name, dump) in sim::stats::bundle_sections(&text).unwrap() {
                    std::fs::write(vdir.join(name), dump).unwrap();
                }
                std::fs::remove_file(vdir.join(b)).unwrap();
            }
        }
    }
    dir
}

fn names_under(dir: &Path, names: &[String]) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    let mut v: Vec<String> = names
        .iter()
        .map(|n| n.strip_prefix(&prefix).unwrap_or(n).to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn bundled_and_per_file_counters_give_the_same_diagnosis() {
    let (bundled, split) = (folder("bundled", false), folder("split", true));
    let a = load(std::slice::from_ref(&bundled), &mut std::io::empty());
    let b = load(std::slice::from_ref(&split), &mut std::io::empty());
    assert!(a.skipped.is_empty(), "{:?}", a.skipped);
    assert!(b.skipped.is_empty(), "{:?}", b.skipped);
    let an: Vec<String> = a.inputs.iter().map(|i| i.name.clone()).collect();
    let bn: Vec<String> = b.inputs.iter().map(|i| i.name.clone()).collect();
    // Every dump of the bundles is an input named as its file was.
    assert_eq!(names_under(&bundled, &an), names_under(&split, &bn));
    assert!(an
        .iter()
        .any(|n| n.ends_with("counters/lossless/h0.ethtool.txt")));
    assert!(an
        .iter()
        .any(|n| n.ends_with("counters/lossy/leaf0-p0.ethtool.txt")));
    assert!(an.iter().any(|n| n.ends_with("counters/lossy/h0.rdma.txt")));
    let da = diagnose(&a.inputs, &Options::default());
    let db = diagnose(&b.inputs, &Options::default());
    assert!(!da.findings.is_empty());
    assert_eq!(
        da.render_text()
            .replace(&bundled.display().to_string(), "DIR"),
        db.render_text()
            .replace(&split.display().to_string(), "DIR")
    );
    let _ = std::fs::remove_dir_all(&bundled);
    let _ = std::fs::remove_dir_all(&split);
}

#[test]
fn tail_output_of_real_dumps_reads_as_its_files() {
    let one = crate::fixture("ethtool/mlx5_single.txt");
    let bundle = sim::stats::bundle(&[
        ("a/h1.ethtool.txt".to_string(), one.clone()),
        ("h2.ethtool.txt".to_string(), one),
    ]);
    let dir = std::env::temp_dir().join(format!("rocelab-bundles-tail-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("all.txt");
    std::fs::write(&f, bundle).unwrap();
    let l = load(std::slice::from_ref(&f), &mut std::io::empty());
    let names: Vec<String> = l.inputs.iter().map(|i| i.name.clone()).collect();
    // Sections name files beside the bundle, never folders above it.
    assert_eq!(
        names,
        [
            dir.join("h1.ethtool.txt").display().to_string(),
            dir.join("h2.ethtool.txt").display().to_string()
        ]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
