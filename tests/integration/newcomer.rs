//! What a newcomer meets first: a time without its unit is refused by
//! `validate` and `run` alike; every file a lesson tells the reader to
//! look at is in what its run writes; the README's "start here" path
//! works as written, and the README and the docs index lead to every doc.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn rocelab(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rocelab"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run rocelab")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rocelab-newcomer-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn validate_and_run_refuse_a_time_without_its_unit() {
    let dir = scratch("units");
    std::fs::copy(repo().join("topologies/star-4.toml"), dir.join("star.toml")).unwrap();
    let scenario = "topology = \"star.toml\"\nduration = 20\n[[workload]]\nkind = \"incast\"\nreceiver = \"h0\"\nsize = \"1MB\"\n";
    std::fs::write(dir.join("s.toml"), scenario).unwrap();
    for args in [
        vec!["validate", "s.toml"],
        vec!["run", "s.toml", "--out", "out", "--quiet"],
    ] {
        let o = rocelab(&args, &dir);
        let shown = text(&o);
        assert!(!o.status.success(), "{args:?} accepted it: {shown}");
        for words in [
            "s.toml:2:",
            "duration",
            "20 has no unit",
            "ps, ns, us, ms or s",
        ] {
            assert!(shown.contains(words), "{args:?}: no {words:?} in {shown}");
        }
    }
    assert!(!dir.join("out/results.json").exists(), "run wrote results");
    // On the command line too; with its unit it runs.
    std::fs::write(
        dir.join("s.toml"),
        scenario.replace("duration = 20", "duration = \"1ms\""),
    )
    .unwrap();
    let o = rocelab(&["validate", "s.toml", "--set", "duration=20"], &dir);
    assert!(
        !o.status.success() && text(&o).contains("20 has no unit"),
        "{}",
        text(&o)
    );
    let o = rocelab(
        &[
            "run",
            "s.toml",
            "--set",
            "duration=20us",
            "--out",
            "out",
            "--quiet",
        ],
        &dir,
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(dir.join("out/results.json").exists());
}

/// The leading comment block of a lesson file, `# ` removed, lines joined
/// (a path broken after its `/` joined back together).
fn header(file: &Path) -> String {
    let body = std::fs::read_to_string(file).unwrap();
    let mut out = String::new();
    for line in body.lines().take_while(|l| l.starts_with('#')) {
        let l = line.trim_start_matches('#').trim();
        if !out.is_empty() && !out.ends_with('/') {
            out.push(' ');
        }
        out.push_str(l);
    }
    out
}

/// The names of output files a text mentions: words ending in a file
/// extension a run writes.
fn named_files(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for word in text.split(|c: char| c.is_whitespace() || "`'\"(),;:".contains(c)) {
        let word = word.trim_end_matches(['.', '*']);
        let is_file = [".txt", ".json", ".html", ".md", ".csv", ".pcap"]
            .iter()
            .any(|ext| word.ends_with(ext) && word.len() > ext.len());
        if is_file && !found.contains(&word.to_string()) {
            found.push(word.to_string());
        }
    }
    found
}

/// Every file below `dir`, relative to it.
fn files_below(dir: &Path, base: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            files_below(&p, base, out);
        } else {
            out.push(p.strip_prefix(base).unwrap().to_path_buf());
        }
    }
}

#[test]
fn every_file_a_lesson_names_is_in_its_run_output() {
    let mut lessons: Vec<PathBuf> = std::fs::read_dir(repo().join("scenarios/lessons"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    lessons.sort();
    assert!(lessons.len() >= 13, "{lessons:?}");
    let dir = scratch("lessons");
    for lesson in &lessons {
        let stem = lesson.file_stem().unwrap().to_string_lossy().into_owned();
        let out = dir.join(&stem);
        let o = rocelab(
            &[
                "run",
                lesson.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
                "--quiet",
            ],
            &dir,
        );
        assert!(o.status.success(), "{stem}: {}", text(&o));
        let mut files = Vec::new();
        files_below(&out, &out, &mut files);
        let variants: Vec<String> = std::fs::read_dir(out.join("counters"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut sections = Vec::new();
        for f in &files {
            let body = std::fs::read_to_string(out.join(f)).unwrap_or_default();
            for line in body.lines() {
                if let Some(name) = line
                    .strip_prefix("==> ")
                    .and_then(|l| l.strip_suffix(" <=="))
                {
                    sections.push(name.to_string());
                }
            }
        }
        let head = header(lesson);
        let named = named_files(&head);
        assert!(!named.is_empty(), "{stem} names no output file");
        for name in named {
            // A path in the repository (another lesson, a test) is not output.
            if repo().join(&name).exists() {
                continue;
            }
            if name.contains('/') {
                // A path in the output: `out/<scenario>/` is the run's folder,
                // `<variant>` any of its variants.
                let rel = name.strip_prefix("out/").map_or(name.as_str(), |r| {
                    r.split_once('/').map_or(r, |(_, rest)| rest)
                });
                let wanted: Vec<PathBuf> = if rel.contains("<variant>") {
                    variants
                        .iter()
                        .map(|v| PathBuf::from(rel.replace("<variant>", v)))
                        .collect()
                } else {
                    vec![PathBuf::from(rel)]
                };
                for w in wanted {
                    assert!(
                        files.contains(&w),
                        "{stem} names {name}, but the run wrote no {} (it wrote {files:?})",
                        w.display()
                    );
                }
                if let Some(scn) = name.strip_prefix("out/").and_then(|r| r.split('/').next()) {
                    let default_out = format!("name = \"{scn}\"",);
                    let body = std::fs::read_to_string(lesson).unwrap();
                    assert!(
                        body.contains(&default_out),
                        "{stem} names out/{scn}/, but its name is not {scn}"
                    );
                }
            } else {
                // A bare name: a file anywhere in the output, or a
                // `==> NAME <==` section of a counter dump.
                let as_file = files
                    .iter()
                    .any(|f| f.file_name().is_some_and(|n| *n == *name));
                assert!(
                    as_file || sections.contains(&name),
                    "{stem} names {name}: no such file or `==> {name} <==` section in its output"
                );
            }
        }
    }
}

/// The `## I have a problem: start here` section of the README.
fn start_here(readme: &str) -> &str {
    let at = readme
        .find("## I have a problem: start here")
        .expect("the README has a start-here section");
    let rest = &readme[at + 3..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

#[test]
fn the_readmes_start_here_path_works_as_written() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let at = readme.find("## I have a problem: start here").unwrap();
    assert!(
        readme[..at].lines().count() < 60,
        "the start-here path is near the top"
    );
    let section = start_here(&readme);
    // Two snapshots of a port under a PAUSE storm, as `ethtool -S IFACE`
    // prints them (no time header).
    let dir = scratch("start");
    for (snap, fixture) in [
        ("before.txt", "ethtool_before.txt"),
        ("after.txt", "ethtool_after.txt"),
    ] {
        let dump = std::fs::read_to_string(
            repo()
                .join("reports/tests/fixtures/doctor/s03_pfc_storm")
                .join(fixture),
        )
        .unwrap();
        let dump: String = dump
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| format!("{l}\n"))
            .collect();
        std::fs::write(dir.join(snap), dump).unwrap();
    }
    assert!(
        section.contains("ethtool -S IFACE > before.txt; sleep 30; ethtool -S IFACE > after.txt"),
        "{section}"
    );
    let cmd = "rocelab doctor before.txt after.txt --interval 30s";
    assert!(section.contains(cmd), "{section}");
    let args: Vec<&str> = cmd.split_whitespace().skip(1).collect();
    let o = rocelab(&args, &dir);
    let shown = text(&o);
    assert!(o.status.success(), "{shown}");
    // What the README says it prints, it prints.
    for quoted in [
        "rocelab doctor: 2 input(s): 2 ethtool",
        "deltas over 30s",
        "1. [CRITICAL] pfc-storm",
        "the job feels:",
        "check first:",
        "why:",
    ] {
        assert!(
            section.contains(quoted),
            "the README does not show {quoted:?}"
        );
        assert!(
            shown.contains(quoted),
            "doctor does not print {quoted:?}: {shown}"
        );
    }
    // The next steps it names exist.
    for (args, words) in [
        (vec!["lessons"], "incast"),
        (vec!["interview", "--help"], "--fault"),
    ] {
        assert!(
            section.contains(&format!("rocelab {}", args[0])),
            "{section}"
        );
        let o = rocelab(&args, &dir);
        assert!(
            o.status.success() && text(&o).contains(words),
            "{args:?}: {}",
            text(&o)
        );
    }
}

#[test]
fn the_readme_and_the_docs_index_lead_to_every_doc() {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let index = std::fs::read_to_string(repo().join("docs/README.md")).unwrap();
    let mut docs: Vec<String> = std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    docs.sort();
    assert!(docs.len() >= 10, "{docs:?}");
    for d in &docs {
        assert!(
            readme.contains(&format!("](docs/{d})")),
            "README.md does not link docs/{d}"
        );
        if d != "README.md" {
            // One line each: `- [NAME](NAME): what it is`.
            let line = index
                .lines()
                .find(|l| l.starts_with("- [") && l.contains(&format!("]({d})")))
                .unwrap_or_else(|| panic!("docs/README.md does not list {d}"));
            assert!(
                line.starts_with("- [") && line.len() > d.len() * 2 + 20,
                "{line}"
            );
        }
    }
    // And nothing the index lists is missing.
    for line in index.lines().filter(|l| l.starts_with("- [")) {
        let target = line
            .split("](")
            .nth(1)
            .and_then(|r| r.split(')').next())
            .unwrap();
        assert!(
            repo().join("docs").join(target).exists(),
            "docs/README.md lists {target}"
        );
    }
}
