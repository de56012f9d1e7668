//! Gathering the doctor's inputs from paths: files, folders (recursively)
//! and `-` for standard input.
//!
//! Contract: nothing a path holds is fatal. A file that cannot be read, is
//! not text the parsers recognise (a rendered `report.html`, an image) or
//! that a parser rejects is listed in [`Loaded::skipped`] with the reason;
//! every other file becomes an [`Input`]. A bundle of dumps (`==> NAME
//! <==` sections, as `tail -n +1` prints several files and as `rocelab
//! run` writes `counters/<variant>/nics.txt` and `switches.txt`) stands
//! for one file per section, named NAME beside the bundle. Folders are walked in sorted
//! path order so the same folder always gives the same inputs.
//!
//! rocelab's own output folders (a `results.json` beside a `counters/`
//! folder, `report.html` or `report-context.json`: a run, a lesson, an
//! interview's answer) are read through `results.json` and the counter
//! dumps only (`counters/`, `dumps/`): the rest there is rocelab's own
//! prose (the copied scenario, `report.md`, `report.html`, the report's
//! context) or captures (`pcap/`), listed as skipped with that reason,
//! never read as a log.
//!
//! Bounds: a file larger than [`MAX_FILE_BYTES`] is skipped unread (its
//! size comes from the file system); standard input is read up to that
//! many bytes, and more is an error, so neither time nor memory grows
//! with the input beyond that cap.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::realnic::{self, Parsed};

/// One input file, already parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// Display name (the file path).
    pub name: String,
    /// Its contents.
    pub parsed: Parsed,
}

/// A path the doctor did not use, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    /// The path as given or found.
    pub path: String,
    /// Why it was skipped.
    pub reason: String,
}

/// What [`load`] found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Loaded {
    /// Parsed inputs, in path order.
    pub inputs: Vec<Input>,
    /// Paths not used.
    pub skipped: Vec<Skipped>,
}

/// Largest file read (bytes): counter dumps and logs are far smaller
/// (a day of kernel log of a busy host is a few MB); a bigger file is
/// skipped rather than held in memory and parsed.
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Deepest folder nesting walked.
pub const MAX_DEPTH: usize = 32;

/// Read every path: a file stands for itself, a folder for every file below
/// it (sorted), `-` for `stdin`.
pub fn load(paths: &[PathBuf], stdin: &mut dyn Read) -> Loaded {
    let mut out = Loaded::default();
    for p in paths {
        if p.as_os_str() == "-" {
            let mut buf = Vec::new();
            match stdin.take(MAX_FILE_BYTES + 1).read_to_end(&mut buf) {
                Ok(n) if n as u64 > MAX_FILE_BYTES => out.skipped.push(Skipped {
                    path: "-".into(),
                    reason: format!(
                        "standard input is larger than the {MAX_FILE_BYTES}-byte limit: not read further"
                    ),
                }),
                Ok(_) => add_text(&mut out, "-".into(), &buf),
                Err(e) => out.skipped.push(Skipped {
                    path: "-".into(),
                    reason: format!("cannot read standard input: {e}"),
                }),
            }
            continue;
        }
        let mut files = Vec::new();
        expand(p, 0, &mut files, &mut out.skipped);
        for f in files {
            let name = f.display().to_string();
            match read_limited(&f) {
                Ok(bytes) => add_text(&mut out, name, &bytes),
                Err(reason) => out.skipped.push(Skipped { path: name, reason }),
            }
        }
    }
    out
}

fn read_limited(f: &Path) -> Result<Vec<u8>, String> {
    let meta = std::fs::metadata(f).map_err(|e| e.to_string())?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{} bytes: larger than the {MAX_FILE_BYTES}-byte limit",
            meta.len()
        ));
    }
    std::fs::read(f).map_err(|e| e.to_string())
}

fn add_text(out: &mut Loaded, name: String, bytes: &[u8]) {
    if !looks_binary(bytes) {
        if let Some(parts) = sim::stats::bundle_sections(&String::from_utf8_lossy(bytes)) {
            add_bundle(out, &name, parts);
            return;
        }
    }
    if looks_binary(bytes) {
        out.skipped.push(Skipped {
            path: name,
            reason: "binary data, not tool output".into(),
        });
        return;
    }
    let text = String::from_utf8_lossy(bytes);
    if looks_html(&text) {
        out.skipped.push(Skipped {
            path: name,
            reason: "an HTML page (e.g. report.html), not tool output".into(),
        });
        return;
    }
    match realnic::parse(None, &text) {
        Ok(parsed) => out.inputs.push(Input { name, parsed }),
        Err(e) => out.skipped.push(Skipped {
            path: name,
            reason: e.to_string(),
        }),
    }
}

/// A bundle of dumps (`tail -n +1 FILE...`, or a run's `nics.txt` and
/// `switches.txt`): each section is read as the file it names, beside the
/// bundle (`counters/v/nics.txt` holds `counters/v/h0.ethtool.txt`), so
/// sources and variants are those of one file per dump.
fn add_bundle(out: &mut Loaded, name: &str, parts: Vec<(String, String)>) {
    let dir = match name.rfind(['/', '\\']) {
        Some(i) => &name[..=i],
        None => "",
    };
    for (file, text) in parts {
        // A section names a file, never a folder above the bundle's.
        let base = file.rsplit(['/', '\\']).next().unwrap_or(&file);
        add_text(out, format!("{dir}{base}"), text.as_bytes());
    }
}

fn looks_binary(b: &[u8]) -> bool {
    b.iter().take(8192).any(|c| *c == 0)
}

fn looks_html(t: &str) -> bool {
    let head: String = t
        .trim_start()
        .chars()
        .take(64)
        .collect::<String>()
        .to_ascii_lowercase();
    head.starts_with("<!doctype html") || head.starts_with("<html")
}

/// A file stands for itself; a folder for every file below it, sorted by
/// path. Unreadable folders, paths that do not exist and folders nested
/// deeper than [`MAX_DEPTH`] (a symbolic link loop) are skipped.
fn expand(path: &Path, depth: usize, out: &mut Vec<PathBuf>, skipped: &mut Vec<Skipped>) {
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() && depth >= MAX_DEPTH => skipped.push(Skipped {
            path: path.display().to_string(),
            reason: format!("folder nested more than {MAX_DEPTH} deep (a link loop?)"),
        }),
        Err(e) => skipped.push(Skipped {
            path: path.display().to_string(),
            reason: e.to_string(),
        }),
        Ok(m) if m.is_dir() => match std::fs::read_dir(path) {
            Ok(dir) => {
                let mut inner: Vec<PathBuf> =
                    dir.filter_map(|e| e.ok().map(|e| e.path())).collect();
                inner.sort();
                let own = is_rocelab_output(&inner);
                for p in inner {
                    if own && !is_run_data(&p) {
                        skipped.push(Skipped {
                            path: p.display().to_string(),
                            reason: "rocelab's own output (prose, report or captures), not tool output: a run folder is read through results.json and its counter dumps".into(),
                        });
                        continue;
                    }
                    expand(&p, depth + 1, out, skipped);
                }
            }
            Err(e) => skipped.push(Skipped {
                path: path.display().to_string(),
                reason: e.to_string(),
            }),
        },
        Ok(_) => out.push(path.to_path_buf()),
    }
}

/// A folder rocelab wrote (a run, a lesson, an interview): a
/// `results.json` beside its counters, report or report context.
fn is_rocelab_output(entries: &[PathBuf]) -> bool {
    let has = |name: &str| {
        entries
            .iter()
            .any(|p| p.file_name().is_some_and(|n| n == name))
    };
    has("results.json") && (has("counters") || has("report.html") || has("report-context.json"))
}

/// What the doctor reads of a folder rocelab wrote: `results.json` and
/// the counter dumps (`counters/`, an interview's `dumps/`).
fn is_run_data(p: &Path) -> bool {
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    (name == "results.json" && p.is_file()) || (matches!(name, "counters" | "dumps") && p.is_dir())
}
