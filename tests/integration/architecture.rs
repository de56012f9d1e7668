//! Architecture tests: the source files of each crate import one another
//! without cycles, and the crates depend on one another only down the
//! layers. Std only: a small Rust lexer, a module-tree builder and a path
//! resolver, enough for this workspace's code.
//!
//! # What is analysed
//!
//! The workspace members are read from the root `Cargo.toml`
//! (`[workspace] members`, `dir/*` globs expanded). For each member, the
//! library root (`[lib] path`, else `src/lib.rs`) and the binary root
//! (`src/main.rs`), where present, are separate crates. A crate's files are
//! those reachable from its root through `mod name;` declarations
//! (`name.rs` or `name/mod.rs`, beside a `mod.rs`/root file or under the
//! declaring file's own directory); files that no `mod` declares are not
//! part of it. Integration tests, benches, examples and build scripts are
//! not analysed, and `#[path]` attributes are not honoured.
//!
//! # Edges
//!
//! The nodes are a crate's files. File A depends on file B (an edge
//! A -> B, A and B different files of the same crate) when
//!
//! * a private `use` in A names an item that resolves to B;
//! * a `pub use` (any visibility: `pub`, `pub(crate)`, `pub(super)`,
//!   `pub(in ..)`) in A names an item that resolves to B *and* the name it
//!   binds (the alias, when renamed) also appears in A's code outside `use`
//!   declarations: a pure re-export is transparent and makes no edge;
//! * a glob import (`use m::*`) in A provides a name that A's code uses,
//!   and that name resolves to B;
//! * a path written in A's code resolves to B: a path that starts with
//!   `crate::`, `super::` or `self::`, with a child module of the current
//!   module, or with a name that a `use` binds to a module.
//!
//! A path resolves to the file that *defines* the named item, re-exports
//! being transparent: the resolver walks the path's module segments from
//! its anchor (the crate root, the current module or its parent), then
//! looks the item up in the last module: the file that defines it (`struct`,
//! `enum`, `union`, `trait`, `type`, `fn`, `const`, `static`,
//! `macro_rules!`, or a name written in a module-level macro invocation),
//! else a `use` there that binds the name (private ones too: children see
//! their parent's imports), followed recursively, else its glob imports;
//! a name found nowhere is taken to be defined by that module's own file. A
//! path that names a module resolves to the module's file; a `use` that
//! only imports a module makes no edge by itself (the paths through it do).
//! Every edge keeps its evidence: A's line and the path as written.
//!
//! A cycle is a strongly connected component of more than one file; each is
//! reported with every edge inside it.
//!
//! # What is excluded
//!
//! * Test-only code: any item under `#[cfg(test)]` (or `#[cfg(all(test,
//!   ..))]`), in particular `#[cfg(test)] mod tests;` and
//!   `#[cfg(test)] mod tests { .. }`. Such a module's file is not a node and
//!   its paths and imports make no edges.
//! * Pure re-export lines (see above).
//! * Comments, doc comments, string, byte-string, raw-string and character
//!   literals: a path in them is not a reference.
//! * Macros: `macro_rules!` bodies are skipped, and a path that only a
//!   macro's expansion produces is not seen. Paths written in a macro
//!   invocation's arguments are code and count.
//! * Paths into other workspace crates (`verbs_emu::..`, `sim::..`): crates
//!   form a DAG, so they make no file edge; they are recorded per crate for
//!   the crate rules. Extern crates (`std`, `serde`, ..) are ignored.
//!
//! # Crate rules
//!
//! [`CRATE_RULES`] is the table of the layers (a rule for a package that is
//! not a member is skipped):
//!
//! * `roce`, the core, depends on no workspace crate and not on `libc`,
//!   `libloading`, `socket2` or `nix`; its sources contain no `unsafe`
//!   token and name none of `std::net::UdpSocket`, `std::net::TcpStream`,
//!   `std::net::TcpListener`, `std::thread`, `std::time::Instant`,
//!   `std::time::SystemTime`, `std::fs`, `std::process` (in code, not in
//!   comments; `use` aliases are followed), and its root says
//!   `#![forbid(unsafe_code)]`.
//! * `sim` depends on neither `verbs-emu`, `libc` nor `libloading`, and its
//!   sources do not name `verbs_emu::`.
//! * `reports` depends on neither `libc` nor `libloading`.
//! * `verbs-emu` depends on neither `sim` nor `reports`.
//!
//! Dependencies are the names in `[dependencies]` and `[build-dependencies]`
//! (target-specific ones too, and the `package` of a renamed one). Sources
//! are every `.rs` file under the crate's `src/`, test modules included.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

// ---------------------------------------------------------------------------
// The layer rules
// ---------------------------------------------------------------------------

/// One crate's layer rule.
struct CrateRule {
    /// The package (`[package] name`) it applies to.
    package: &'static str,
    /// Packages it must not depend on.
    forbidden_deps: &'static [&'static str],
    /// Whether it must not depend on any other workspace member.
    no_workspace_deps: bool,
    /// Paths its sources must not name: a prefix of a path written in code
    /// or in a `use`, after `use` aliases are expanded.
    forbidden_paths: &'static [&'static str],
    /// No `unsafe` token in its sources, `#![forbid(unsafe_code)]` in its root.
    forbid_unsafe: bool,
}

/// The layers, bottom up.
const CRATE_RULES: &[CrateRule] = &[
    CrateRule {
        package: "roce",
        forbidden_deps: &["libc", "libloading", "socket2", "nix"],
        no_workspace_deps: true,
        forbidden_paths: &[
            "std::net::UdpSocket",
            "std::net::TcpStream",
            "std::net::TcpListener",
            "std::thread",
            "std::time::Instant",
            "std::time::SystemTime",
            "std::fs",
            "std::process",
        ],
        forbid_unsafe: true,
    },
    CrateRule {
        package: "sim",
        forbidden_deps: &["verbs-emu", "libc", "libloading"],
        no_workspace_deps: false,
        forbidden_paths: &["verbs_emu"],
        forbid_unsafe: false,
    },
    CrateRule {
        package: "reports",
        forbidden_deps: &["libc", "libloading"],
        no_workspace_deps: false,
        forbidden_paths: &[],
        forbid_unsafe: false,
    },
    // The emulation is one world: it never reaches up into the simulator
    // or the report tools.
    CrateRule {
        package: "verbs-emu",
        forbidden_deps: &["sim", "reports"],
        no_workspace_deps: false,
        forbidden_paths: &[],
        forbid_unsafe: false,
    },
];

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn no_import_cycles_between_files() {
    let analysis = analyze(workspace_root());
    assert!(
        analysis.crates.iter().any(|c| c.files.len() > 1),
        "the analysis found no crate with more than one file:\n{}",
        analysis.report()
    );
    assert!(analysis.cycles.is_empty(), "{}", analysis.report());
}

#[test]
fn crate_dependencies_follow_the_layers() {
    let rules = check_crate_rules(workspace_root());
    assert!(
        rules.violations.is_empty(),
        "crate layer rules broken (rules checked for: {}):\n{}",
        rules.checked.join(", "),
        rules.violations.join("\n")
    );
}

/// A test of the test, on synthetic workspaces in a scratch directory.
#[test]
fn analyzer_finds_a_cycle_introduced_on_purpose() {
    only_the_real_cycle_is_found();
    a_used_re_export_and_paths_in_code_make_cycles();
    the_core_crate_rule_reads_code_not_comments();
}

fn only_the_real_cycle_is_found() {
    // a <-> b is a cycle. c/mod.rs only re-exports d's `Out` while d uses
    // c's `Shared`: no cycle. e mentions f only in comments and strings
    // while f uses e: no cycle. b's test module imports a: not counted.
    let ws = TempTree::new("cycle");
    ws.write("Cargo.toml", "[workspace]\nmembers = [\"app\"]\n");
    ws.write("app/Cargo.toml", "[package]\nname = \"app\"\n");
    ws.write(
        "app/src/lib.rs",
        "//! Synthetic.\npub mod a;\npub mod b;\npub mod c;\npub mod e;\npub mod f;\n\
         pub mod g;\n\npub use a::Thing;\n",
    );
    ws.write(
        "app/src/a.rs",
        "use crate::b::Other;\n\npub struct Thing;\n\npub fn take(_: Other) {}\n",
    );
    ws.write(
        "app/src/b.rs",
        "use crate::a::Thing;\n\npub struct Other;\n\npub fn give(_: Thing) {}\n\n\
         #[cfg(test)]\nmod tests {\n    use crate::a::*;\n    use crate::g::Gee;\n}\n",
    );
    ws.write(
        "app/src/c/mod.rs",
        "pub mod d;\n\npub use d::Out;\n\npub struct Shared;\n",
    );
    ws.write(
        "app/src/c/d.rs",
        "use super::Shared;\n\npub struct Out(pub Shared);\n\n\
         pub fn thing() -> crate::Thing { crate::Thing }\n",
    );
    ws.write(
        "app/src/e.rs",
        "//! Mentions crate::f::Hidden in docs.\n\
         // use crate::f::Hidden;\n\
         /* crate::f::Hidden /* nested */ crate::f::Hidden */\n\
         pub const NOTE: &str = \"crate::f::Hidden\";\n\
         pub const RAW: &str = r#\"use crate::f::Hidden; \"quoted\"\"#;\n\
         pub const BYTES: &[u8] = b\"crate::f::Hidden\";\n\
         pub fn pick<'a>(x: &'a str) -> &'a str {\n    let _q = '\"';\n    let _b = b'\\'';\n    x\n}\n\
         pub const AFTER: &str = \"crate::f::Hidden\";\n",
    );
    ws.write(
        "app/src/f.rs",
        "use crate::e::NOTE;\n\npub struct Hidden(pub &'static str);\n\n\
         pub fn note() -> Hidden { Hidden(NOTE) }\n",
    );
    // g depends on b only from its test module; b's test module uses g.
    ws.write(
        "app/src/g.rs",
        "pub struct Gee;\n\n#[cfg(test)]\nmod tests {\n    use crate::b::Other;\n}\n\n\
         #[cfg(test)]\nmod more;\n",
    );
    ws.write("app/src/g/more.rs", "use crate::b::Other;\n");
    // Not declared by any `mod`: not a node, its imports make no edges.
    ws.write(
        "app/src/stray.rs",
        "use crate::a::Thing;\nuse crate::b::Other;\n",
    );

    let analysis = analyze(&ws.root);
    let report = analysis.report();
    let app = analysis
        .crates
        .iter()
        .find(|c| c.label == "app")
        .expect("the synthetic crate is analysed");
    assert!(
        app.files.iter().all(|f| !f.ends_with("stray.rs")),
        "an undeclared file is a node:\n{report}"
    );
    assert!(
        app.files.iter().all(|f| !f.ends_with("more.rs")),
        "a test-only module's file is a node:\n{report}"
    );
    assert_eq!(app.files.len(), 8, "{report}");
    assert_eq!(analysis.cycles.len(), 1, "{report}");
    assert_eq!(
        analysis.cycles[0].files,
        ["app/src/a.rs", "app/src/b.rs"],
        "{report}"
    );
    let lines: Vec<String> = analysis.cycles[0]
        .edges
        .iter()
        .map(|e| format!("{}:{} -> {}", e.from, e.line, e.to))
        .collect();
    assert_eq!(
        lines,
        [
            "app/src/a.rs:1 -> app/src/b.rs",
            "app/src/b.rs:1 -> app/src/a.rs"
        ],
        "{report}"
    );
    assert!(report.contains("app/src/a.rs:1 -> app/src/b.rs (use crate::b::Other)"));
}

fn a_used_re_export_and_paths_in_code_make_cycles() {
    // The re-exporting mod.rs uses the re-exported name in code while the
    // child uses the parent: a cycle. So are x and y, through paths in code
    // (one through a module that a `use` binds, one in an inline module).
    let ws = TempTree::new("facade");
    ws.write("Cargo.toml", "[workspace]\nmembers = [\"app\"]\n");
    ws.write("app/Cargo.toml", "[package]\nname = \"app\"\n");
    ws.write("app/src/lib.rs", "pub mod c;\npub mod x;\npub mod y;\n");
    ws.write(
        "app/src/c/mod.rs",
        "pub mod d;\n\npub use d::Out;\n\npub struct Shared;\n\n\
         pub fn make() -> Out {\n    Out(Shared)\n}\n",
    );
    ws.write(
        "app/src/c/d.rs",
        "use super::Shared;\n\npub struct Out(pub Shared);\n",
    );
    ws.write(
        "app/src/x.rs",
        "use crate::y;\n\npub fn x() {\n    y::y();\n}\n",
    );
    ws.write(
        "app/src/y.rs",
        "pub fn y() {}\n\nmod inner {\n    pub fn z() {\n        super::super::x::x();\n    }\n}\n",
    );
    let analysis = analyze(&ws.root);
    let report = analysis.report();
    let cycles: Vec<&[String]> = analysis.cycles.iter().map(|c| &c.files[..]).collect();
    assert_eq!(
        cycles,
        [
            &["app/src/c/d.rs", "app/src/c/mod.rs"][..],
            &["app/src/x.rs", "app/src/y.rs"][..]
        ],
        "{report}"
    );
    assert!(
        report.contains("app/src/c/mod.rs:3 -> app/src/c/d.rs (pub use d::Out)"),
        "{report}"
    );
    assert!(
        report.contains("app/src/y.rs:5 -> app/src/x.rs (super::super::x::x)"),
        "{report}"
    );
}

fn the_core_crate_rule_reads_code_not_comments() {
    // The crate rule: `unsafe` in code breaks it, in a comment or a string
    // it does not; so do a forbidden import and a forbidden dependency.
    let ws = TempTree::new("rules");
    ws.write("Cargo.toml", "[workspace]\nmembers = [\"roce\"]\n");
    ws.write(
        "roce/Cargo.toml",
        "[package]\nname = \"roce\"\n\n[dependencies]\nserde = \"1\"\n",
    );
    ws.write(
        "roce/src/lib.rs",
        "//! Core.\n#![forbid(unsafe_code)]\n\n// No unsafe here.\npub mod x;\n\n\
         pub fn f() -> &'static str {\n    \"unsafe std::fs\"\n}\n",
    );
    ws.write("roce/src/x.rs", "/// Not `unsafe`.\npub fn g() {}\n");
    let clean = check_crate_rules(&ws.root);
    assert_eq!(clean.checked, ["roce"]);
    assert!(clean.violations.is_empty(), "{:?}", clean.violations);

    ws.write(
        "roce/src/x.rs",
        "use std::{fs, time::{Duration, Instant as Clock}};\n\n\
         pub fn g() -> Duration {\n    let _ = unsafe { core::mem::zeroed::<u8>() };\n    \
         fs::read(\"x\").ok();\n    let _ = Clock::now();\n    Duration::ZERO\n}\n",
    );
    let broken = check_crate_rules(&ws.root);
    assert_eq!(
        broken.violations,
        [
            "roce: roce/src/x.rs:1: names `std::fs`",
            "roce: roce/src/x.rs:1: names `std::time::Instant`",
            "roce: roce/src/x.rs:4: `unsafe`",
            "roce: roce/src/x.rs:5: names `std::fs::read`",
            "roce: roce/src/x.rs:6: names `std::time::Instant::now`",
        ]
    );

    ws.write("roce/src/x.rs", "pub fn g() {}\n");
    ws.write(
        "roce/Cargo.toml",
        "[package]\nname = \"roce\"\n\n[dependencies]\nlibc.workspace = true\n",
    );
    ws.write("roce/src/lib.rs", "//! Core.\npub mod x;\n");
    let broken = check_crate_rules(&ws.root);
    assert_eq!(
        broken.violations,
        [
            "roce: depends on `libc` (roce/Cargo.toml)",
            "roce: roce/src/lib.rs lacks `#![forbid(unsafe_code)]`",
        ]
    );
}

/// A scratch directory, removed when dropped.
struct TempTree {
    root: PathBuf,
}

impl TempTree {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let root = std::env::temp_dir().join(format!(
            "rocelab-architecture-{tag}-{}-{}-{nanos}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&root).expect("create the scratch workspace");
        TempTree { root }
    }

    fn write(&self, rel: &str, text: &str) {
        let path = self.root.join(rel);
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir).expect("create a scratch directory");
        }
        fs::write(&path, text).expect("write a scratch file");
    }
}

impl Drop for TempTree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.root);
    }
}

// ---------------------------------------------------------------------------
// The analysis and its report
// ---------------------------------------------------------------------------

/// What [`analyze`] found.
#[derive(Debug, Default)]
struct Analysis {
    crates: Vec<CrateSummary>,
    /// Sorted by crate, then by first file.
    cycles: Vec<Cycle>,
    /// Members or module files that could not be read.
    notes: Vec<String>,
}

#[derive(Debug)]
struct CrateSummary {
    /// The package, with ` (lib)` or ` (bin)` when it has both.
    label: String,
    /// Its files (relative to the workspace root), sorted.
    files: Vec<String>,
    /// Distinct file-to-file dependencies.
    edges: usize,
    /// Other workspace packages its code names.
    other_crates: BTreeSet<String>,
}

#[derive(Debug)]
struct Cycle {
    label: String,
    /// Sorted.
    files: Vec<String>,
    /// Every edge inside the component, sorted.
    edges: Vec<Evidence>,
}

#[derive(Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Evidence {
    from: String,
    line: usize,
    to: String,
    via: String,
}

impl Analysis {
    fn report(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{} import cycle(s) between files ({} crates analysed):",
            self.cycles.len(),
            self.crates.len()
        );
        for c in &self.crates {
            let others: Vec<&str> = c.other_crates.iter().map(String::as_str).collect();
            let _ = writeln!(
                out,
                "  crate `{}`: {} files, {} edges, uses [{}]",
                c.label,
                c.files.len(),
                c.edges,
                others.join(", ")
            );
        }
        for (k, cycle) in self.cycles.iter().enumerate() {
            let _ = writeln!(
                out,
                "\ncycle {} of {} in crate `{}`, {} files:",
                k + 1,
                self.cycles.len(),
                cycle.label,
                cycle.files.len()
            );
            for f in &cycle.files {
                let _ = writeln!(out, "    {f}");
            }
            let _ = writeln!(out, "  edges:");
            for e in &cycle.edges {
                let _ = writeln!(out, "    {}:{} -> {} ({})", e.from, e.line, e.to, e.via);
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(out, "\nnotes:");
            for n in &self.notes {
                let _ = writeln!(out, "    {n}");
            }
        }
        out
    }
}

/// Build every member crate's file graph under `root` and find its cycles.
fn analyze(root: &Path) -> Analysis {
    let mut analysis = Analysis::default();
    let members = read_members(root, &mut analysis.notes);
    let idents: BTreeMap<String, String> = members
        .iter()
        .map(|m| (m.lib_ident.clone(), m.package.clone()))
        .collect();
    for member in &members {
        for (label, root_file) in crate_roots(member) {
            let graph = CrateGraph::build(root, &root_file, &mut analysis.notes);
            let (edges, other_crates) = graph.edges(&idents);
            let mut adjacency = vec![BTreeSet::new(); graph.files.len()];
            for e in &edges {
                adjacency[e.from].insert(e.to);
            }
            let components = strongly_connected(&adjacency);
            for comp in components.into_iter().filter(|c| c.len() > 1) {
                let inside: BTreeSet<usize> = comp.iter().copied().collect();
                let mut files: Vec<String> =
                    comp.iter().map(|&f| graph.files[f].rel.clone()).collect();
                files.sort();
                let mut evidence: Vec<Evidence> = edges
                    .iter()
                    .filter(|e| inside.contains(&e.from) && inside.contains(&e.to))
                    .map(|e| Evidence {
                        from: graph.files[e.from].rel.clone(),
                        line: e.line,
                        to: graph.files[e.to].rel.clone(),
                        via: e.via.clone(),
                    })
                    .collect();
                evidence.sort();
                evidence.dedup();
                // One line per (file, line, target): `(use a::X, use a::Y)`.
                let mut merged: Vec<Evidence> = Vec::new();
                for e in evidence {
                    match merged.last_mut() {
                        Some(m) if (&m.from, m.line, &m.to) == (&e.from, e.line, &e.to) => {
                            m.via.push_str(", ");
                            m.via.push_str(&e.via);
                        }
                        _ => merged.push(e),
                    }
                }
                analysis.cycles.push(Cycle {
                    label: label.clone(),
                    files,
                    edges: merged,
                });
            }
            let mut files: Vec<String> = graph.files.iter().map(|f| f.rel.clone()).collect();
            files.sort();
            analysis.crates.push(CrateSummary {
                label,
                files,
                edges: adjacency.iter().map(BTreeSet::len).sum(),
                other_crates,
            });
        }
    }
    analysis
        .cycles
        .sort_by(|a, b| (&a.label, &a.files).cmp(&(&b.label, &b.files)));
    analysis
}

/// Tarjan's algorithm; components in no particular order.
fn strongly_connected(adjacency: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        adjacency: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        components: Vec<Vec<usize>>,
    }

    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        let adjacency = s.adjacency;
        for &w in &adjacency[v] {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if s.index[v] == Some(s.low[v]) {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.components.push(component);
        }
    }

    let n = adjacency.len();
    let mut s = State {
        adjacency,
        index: vec![None; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        components: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.components
}

// ---------------------------------------------------------------------------
// The crate rules' check
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct RulesReport {
    /// The packages whose rule applied.
    checked: Vec<String>,
    violations: Vec<String>,
}

fn check_crate_rules(root: &Path) -> RulesReport {
    let mut notes = Vec::new();
    let members = read_members(root, &mut notes);
    let packages: BTreeSet<&str> = members.iter().map(|m| m.package.as_str()).collect();
    let mut report = RulesReport {
        checked: Vec::new(),
        violations: Vec::new(),
    };
    for rule in CRATE_RULES {
        let Some(member) = members.iter().find(|m| m.package == rule.package) else {
            continue;
        };
        report.checked.push(rule.package.to_string());
        let manifest = format!("{}/Cargo.toml", member.rel);
        for dep in &member.deps {
            if rule.forbidden_deps.contains(&dep.as_str()) {
                report
                    .violations
                    .push(format!("{}: depends on `{dep}` ({manifest})", rule.package));
            } else if rule.no_workspace_deps
                && *dep != member.package
                && packages.contains(dep.as_str())
            {
                report.violations.push(format!(
                    "{}: depends on workspace crate `{dep}` ({manifest})",
                    rule.package
                ));
            }
        }
        let forbidden: Vec<Vec<&str>> = rule
            .forbidden_paths
            .iter()
            .map(|p| p.split("::").collect())
            .collect();
        let mut files = Vec::new();
        rust_files(&member.dir.join("src"), &mut files);
        files.sort();
        for file in &files {
            let rel = relative(root, file);
            let Ok(text) = fs::read_to_string(file) else {
                report
                    .violations
                    .push(format!("{}: cannot read {rel}", rule.package));
                continue;
            };
            let tokens = lex(&text);
            let mut found = Vec::new();
            if rule.forbid_unsafe {
                for t in tokens.iter().filter(|t| t.is_ident("unsafe")) {
                    found.push((t.line, "`unsafe`".to_string()));
                }
            }
            if !forbidden.is_empty() {
                for (line, path) in written_paths(&tokens) {
                    if forbidden.iter().any(|f| path_hits(&path, f)) {
                        found.push((line, format!("names `{}`", join_path(&path))));
                    }
                }
            }
            found.sort();
            found.dedup();
            for (line, what) in found {
                report
                    .violations
                    .push(format!("{}: {rel}:{line}: {what}", rule.package));
            }
        }
        if rule.forbid_unsafe {
            let lib = member.dir.join("src/lib.rs");
            let root_file = if lib.is_file() {
                lib
            } else {
                member.dir.join("src/main.rs")
            };
            let text = fs::read_to_string(&root_file).unwrap_or_default();
            if !forbids_unsafe_code(&lex(&text)) {
                report.violations.push(format!(
                    "{}: {} lacks `#![forbid(unsafe_code)]`",
                    rule.package,
                    relative(root, &root_file)
                ));
            }
        }
    }
    report
}

/// Every path a file's code or `use` declarations write (test code
/// included), with `use` aliases expanded and a leading `::` dropped.
fn written_paths(tokens: &[Token]) -> Vec<(usize, Vec<String>)> {
    let parsed = parse(tokens, true);
    let mut aliases: BTreeMap<&str, &[String]> = BTreeMap::new();
    for u in &parsed.uses {
        if let Leaf::Named(name) = &u.leaf {
            aliases.insert(name, &u.path);
        }
    }
    let strip =
        |p: &[String]| -> Vec<String> { p.iter().skip_while(|s| *s == "::").cloned().collect() };
    let mut out = Vec::new();
    for u in &parsed.uses {
        let mut path = strip(&u.path);
        if u.leaf == Leaf::Glob {
            path.push("*".to_string());
        }
        out.push((u.line, path));
    }
    for p in &parsed.paths {
        let head = p.segs[0].as_str();
        let path = match aliases.get(head) {
            Some(target) if !matches!(head, "crate" | "self" | "super") => {
                let mut full = strip(target);
                full.extend(p.segs[1..].iter().cloned());
                full
            }
            _ => strip(&p.segs),
        };
        out.push((p.line, path));
    }
    out
}

/// Whether `path` names `forbidden` or something under it (a glob of one
/// of its parents counts).
fn path_hits(path: &[String], forbidden: &[&str]) -> bool {
    if path.last().is_some_and(|s| s == "*") {
        let module = &path[..path.len() - 1];
        return module.len() <= forbidden.len()
            && module.iter().zip(forbidden).all(|(a, b)| a == b);
    }
    path.len() >= forbidden.len() && path.iter().zip(forbidden).all(|(a, b)| a == b)
}

/// Whether the tokens hold `#![forbid(.., unsafe_code, ..)]`.
fn forbids_unsafe_code(tokens: &[Token]) -> bool {
    tokens.windows(5).enumerate().any(|(k, w)| {
        w[0].tok == Tok::Punct('#')
            && w[1].tok == Tok::Punct('!')
            && w[2].tok == Tok::Punct('[')
            && w[3].is_ident("forbid")
            && w[4].tok == Tok::Punct('(')
            && tokens[k + 5..]
                .iter()
                .take_while(|t| t.tok != Tok::Punct(')'))
                .any(|t| t.is_ident("unsafe_code"))
    })
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

// ---------------------------------------------------------------------------
// Cargo manifests
// ---------------------------------------------------------------------------

#[derive(Debug)]
struct Member {
    /// The directory, relative to the workspace root (`.` for the root).
    rel: String,
    dir: PathBuf,
    package: String,
    /// The library's name as code spells it (`[lib] name`, else the
    /// package's with `-` as `_`).
    lib_ident: String,
    /// `[lib] path`, when set.
    lib_path: Option<PathBuf>,
    /// Its `[dependencies]` and `[build-dependencies]` names.
    deps: BTreeSet<String>,
}

fn read_members(root: &Path, notes: &mut Vec<String>) -> Vec<Member> {
    let text = fs::read_to_string(root.join("Cargo.toml")).expect("the workspace's Cargo.toml");
    let mut rels = Vec::new();
    for (section, key, value) in toml_entries(&text) {
        if section != "workspace" || key != "members" {
            continue;
        }
        for m in quoted(&value) {
            if let Some(parent) = m.strip_suffix("/*") {
                let mut found: Vec<String> = fs::read_dir(root.join(parent))
                    .map(|entries| {
                        entries
                            .flatten()
                            .filter(|e| e.path().join("Cargo.toml").is_file())
                            .map(|e| format!("{parent}/{}", e.file_name().to_string_lossy()))
                            .collect()
                    })
                    .unwrap_or_default();
                found.sort();
                rels.extend(found);
            } else {
                rels.push(m);
            }
        }
    }
    let mut members = Vec::new();
    for rel in rels {
        let dir = if rel == "." {
            root.to_path_buf()
        } else {
            root.join(&rel)
        };
        let Ok(text) = fs::read_to_string(dir.join("Cargo.toml")) else {
            notes.push(format!("member `{rel}` has no readable Cargo.toml"));
            continue;
        };
        let mut package = None;
        let mut lib_name = None;
        let mut lib_path = None;
        let mut deps = BTreeSet::new();
        for (section, key, value) in toml_entries(&text) {
            match (section.as_str(), key.as_str()) {
                ("package", "name") => package = quoted(&value).into_iter().next(),
                ("lib", "name") => lib_name = quoted(&value).into_iter().next(),
                ("lib", "path") => lib_path = quoted(&value).into_iter().next(),
                _ => {}
            }
            for kind in ["dependencies", "build-dependencies"] {
                let whole = section == kind
                    || (section.starts_with("target.") && section.ends_with(&format!(".{kind}")));
                if whole {
                    let name = key.split('.').next().unwrap_or(&key).trim_matches('"');
                    deps.insert(name.to_string());
                    if let Some(pos) = value.find("package") {
                        deps.extend(quoted(&value[pos..]).into_iter().take(1));
                    }
                } else if let Some(name) = section.strip_prefix(&format!("{kind}.")) {
                    deps.insert(name.trim_matches('"').to_string());
                    if key == "package" {
                        deps.extend(quoted(&value).into_iter().take(1));
                    }
                }
            }
        }
        let Some(package) = package else {
            notes.push(format!("member `{rel}` has no [package] name"));
            continue;
        };
        members.push(Member {
            lib_ident: lib_name.unwrap_or_else(|| package.replace('-', "_")),
            lib_path: lib_path.map(|p| dir.join(p)),
            rel,
            dir,
            package,
            deps,
        });
    }
    members
}

/// A member's crate roots with their labels: the library, the binary.
fn crate_roots(member: &Member) -> Vec<(String, PathBuf)> {
    let lib = member
        .lib_path
        .clone()
        .unwrap_or_else(|| member.dir.join("src/lib.rs"));
    let bin = member.dir.join("src/main.rs");
    match (lib.is_file(), bin.is_file()) {
        (true, true) => vec![
            (format!("{} (lib)", member.package), lib),
            (format!("{} (bin)", member.package), bin),
        ],
        (true, false) => vec![(member.package.clone(), lib)],
        (false, true) => vec![(member.package.clone(), bin)],
        (false, false) => Vec::new(),
    }
}

/// `(section, key, value)` of each `key = value` line; multi-line arrays
/// and tables are joined, comments dropped.
fn toml_entries(text: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    let mut lines = text.lines();
    while let Some(raw) = lines.next() {
        let line = strip_toml_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            section = line
                .trim_matches(|c| c == '[' || c == ']')
                .trim()
                .to_string();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let mut value = value.trim().to_string();
        while bracket_balance(&value) > 0 {
            let Some(next) = lines.next() else {
                break;
            };
            value.push(' ');
            value.push_str(strip_toml_comment(next).trim());
        }
        out.push((section.clone(), key.trim().to_string(), value));
    }
    out
}

fn strip_toml_comment(line: &str) -> &str {
    let mut quote = None;
    for (k, c) in line.char_indices() {
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), _) if c == q => quote = None,
            (None, '#') => return &line[..k],
            _ => {}
        }
    }
    line
}

fn bracket_balance(value: &str) -> i64 {
    let mut depth = 0;
    let mut in_string = false;
    for c in value.chars() {
        match c {
            '"' => in_string = !in_string,
            '[' | '{' if !in_string => depth += 1,
            ']' | '}' if !in_string => depth -= 1,
            _ => {}
        }
    }
    depth
}

/// The double-quoted strings in a TOML value.
fn quoted(value: &str) -> Vec<String> {
    value
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

// ---------------------------------------------------------------------------
// Lexer
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Punct(char),
    /// `::`
    PathSep,
    /// A string, character or number literal (its text is dropped).
    Literal,
    /// A lifetime or a loop label.
    Lifetime,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
}

impl Token {
    fn is_ident(&self, word: &str) -> bool {
        matches!(&self.tok, Tok::Ident(w) if w == word)
    }
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Rust source as tokens, without comments and literal contents.
fn lex(src: &str) -> Vec<Token> {
    let mut lx = Lexer {
        s: src.chars().collect(),
        i: 0,
        line: 1,
    };
    let mut out = Vec::new();
    while let Some(c) = lx.at(0) {
        let line = lx.line;
        let tok = if c.is_whitespace() {
            lx.bump();
            continue;
        } else if c == '/' && lx.at(1) == Some('/') {
            lx.skip_line_comment();
            continue;
        } else if c == '/' && lx.at(1) == Some('*') {
            lx.skip_block_comment();
            continue;
        } else if c == '"' {
            lx.skip_quoted('"');
            Tok::Literal
        } else if c == '\'' {
            lx.char_or_lifetime()
        } else if c.is_ascii_digit() {
            lx.number();
            Tok::Literal
        } else if is_ident_start(c) {
            lx.word()
        } else if c == ':' && lx.at(1) == Some(':') {
            lx.i += 2;
            Tok::PathSep
        } else {
            lx.i += 1;
            Tok::Punct(c)
        };
        out.push(Token { tok, line });
    }
    out
}

struct Lexer {
    s: Vec<char>,
    i: usize,
    line: usize,
}

impl Lexer {
    fn at(&self, k: usize) -> Option<char> {
        self.s.get(self.i + k).copied()
    }

    fn bump(&mut self) {
        if self.at(0) == Some('\n') {
            self.line += 1;
        }
        self.i += 1;
    }

    fn skip_line_comment(&mut self) {
        while self.at(0).is_some_and(|c| c != '\n') {
            self.i += 1;
        }
    }

    /// Block comments nest.
    fn skip_block_comment(&mut self) {
        let mut depth = 0usize;
        while self.i < self.s.len() {
            if self.at(0) == Some('/') && self.at(1) == Some('*') {
                depth += 1;
                self.i += 2;
            } else if self.at(0) == Some('*') && self.at(1) == Some('/') {
                self.i += 2;
                depth -= 1;
                if depth == 0 {
                    return;
                }
            } else {
                self.bump();
            }
        }
    }

    /// At an opening quote: past the closing one, escapes honoured.
    fn skip_quoted(&mut self, quote: char) {
        self.i += 1;
        while let Some(c) = self.at(0) {
            if c == '\\' {
                self.bump();
                self.bump();
            } else if c == quote {
                self.i += 1;
                return;
            } else {
                self.bump();
            }
        }
    }

    /// The number of `#` at offset `k` when a `"` follows them.
    fn raw_string_at(&self, k: usize) -> Option<usize> {
        let mut hashes = 0;
        while self.at(k + hashes) == Some('#') {
            hashes += 1;
        }
        (self.at(k + hashes) == Some('"')).then_some(hashes)
    }

    /// Past a raw string whose hashes start at offset `k`.
    fn skip_raw(&mut self, k: usize, hashes: usize) {
        self.i += k + hashes + 1;
        while self.i < self.s.len() {
            if self.at(0) == Some('"') && (1..=hashes).all(|h| self.at(h) == Some('#')) {
                self.i += hashes + 1;
                return;
            }
            self.bump();
        }
    }

    /// `'x'` and `'\n'` are characters; `'a` (not closed within a
    /// character) is a lifetime or a label.
    fn char_or_lifetime(&mut self) -> Tok {
        if self.at(1) == Some('\\') || self.at(2) == Some('\'') {
            self.skip_quoted('\'');
            return Tok::Literal;
        }
        self.i += 1;
        while self.at(0).is_some_and(is_ident_char) {
            self.i += 1;
        }
        Tok::Lifetime
    }

    fn number(&mut self) {
        while let Some(c) = self.at(0) {
            let fraction = c == '.' && self.at(1).is_some_and(|d| d.is_ascii_digit());
            if !is_ident_char(c) && !fraction {
                break;
            }
            self.i += 1;
        }
    }

    /// An identifier, a raw identifier, or a prefixed literal (`r"..."`,
    /// `r#"..."#`, `b"..."`, `br#"..."#`, `b'x'`, `c"..."`, `cr"..."`).
    fn word(&mut self) -> Tok {
        let prefix = match (self.at(0), self.at(1)) {
            (Some('b' | 'c'), Some('r')) => 2,
            (Some('r' | 'b' | 'c'), _) => 1,
            _ => 0,
        };
        if prefix > 0 {
            if self.at(prefix - 1) == Some('r') {
                if let Some(hashes) = self.raw_string_at(prefix) {
                    self.skip_raw(prefix, hashes);
                    return Tok::Literal;
                }
            } else if self.at(1) == Some('"') {
                self.i += 1;
                self.skip_quoted('"');
                return Tok::Literal;
            } else if self.at(0) == Some('b') && self.at(1) == Some('\'') {
                self.i += 1;
                self.skip_quoted('\'');
                return Tok::Literal;
            }
        }
        if self.at(0) == Some('r')
            && self.at(1) == Some('#')
            && self.at(2).is_some_and(is_ident_start)
        {
            self.i += 2;
        }
        let start = self.i;
        while self.at(0).is_some_and(is_ident_char) {
            self.i += 1;
        }
        Tok::Ident(self.s[start..self.i].iter().collect())
    }
}

// ---------------------------------------------------------------------------
// Parser: items, `use` trees, paths in code
// ---------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq)]
enum Leaf {
    /// Binds this name (the last segment, or the `as` alias).
    Named(String),
    /// `as _`.
    Unnamed,
    /// `*`.
    Glob,
}

/// One leaf of a `use` tree.
#[derive(Clone, Debug)]
struct UseDecl {
    /// The file-local module it is declared in.
    module: usize,
    line: usize,
    /// As written, the prefix included; a leading `::` is a `"::"` segment.
    path: Vec<String>,
    leaf: Leaf,
    public: bool,
    /// At the module's top level (not in a function body).
    module_level: bool,
}

impl UseDecl {
    fn text(&self) -> String {
        let mut t = String::from(if self.public { "pub use " } else { "use " });
        t.push_str(&join_path(&self.path));
        match &self.leaf {
            Leaf::Named(name) if self.path.last() != Some(name) => {
                let _ = write!(t, " as {name}");
            }
            Leaf::Named(_) => {}
            Leaf::Unnamed => t.push_str(" as _"),
            Leaf::Glob => t.push_str("::*"),
        }
        t
    }
}

fn join_path(segs: &[String]) -> String {
    let mut out = String::new();
    for (k, seg) in segs.iter().enumerate() {
        if k > 0 && segs[k - 1] != "::" {
            out.push_str("::");
        }
        out.push_str(seg);
    }
    out
}

/// A path written in code (outside `use` declarations), two segments or more.
#[derive(Clone, Debug)]
struct CodePath {
    module: usize,
    line: usize,
    segs: Vec<String>,
}

/// A module of a file: the file's own (index 0) or an inline `mod x { }`.
#[derive(Clone, Debug, Default)]
struct LocalModule {
    name: String,
    parent: Option<usize>,
    /// Items defined at its top level.
    items: BTreeSet<String>,
    /// Names written in its top-level macro invocations (`flags! { X .. }`):
    /// taken as defined here.
    macro_idents: BTreeSet<String>,
    /// `mod name;` declarations.
    decls: Vec<String>,
}

#[derive(Clone, Debug, Default)]
struct ParsedFile {
    modules: Vec<LocalModule>,
    uses: Vec<UseDecl>,
    paths: Vec<CodePath>,
    /// Identifiers in code outside `use` declarations, except those after
    /// `.` or inside a path, a field name before `:`, a name being defined.
    code_idents: BTreeSet<String>,
}

enum Scope {
    Module(usize),
    /// `extern { }` or a module-level macro invocation: items inside
    /// belong to the module.
    Transparent {
        macro_body: bool,
    },
    Other,
}

const KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern",
    "false", "fn", "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub",
    "ref", "return", "self", "Self", "static", "struct", "super", "trait", "true", "type",
    "unsafe", "use", "where", "while", "_",
];

/// Parse a file's tokens; `keep_test` keeps `#[cfg(test)]` items.
fn parse(tokens: &[Token], keep_test: bool) -> ParsedFile {
    let mut p = Parser {
        toks: tokens,
        i: 0,
        keep_test,
        scopes: Vec::new(),
        out: ParsedFile {
            modules: vec![LocalModule::default()],
            ..ParsedFile::default()
        },
    };
    p.run();
    p.out
}

struct Parser<'t> {
    toks: &'t [Token],
    i: usize,
    keep_test: bool,
    scopes: Vec<Scope>,
    out: ParsedFile,
}

impl<'t> Parser<'t> {
    fn tok(&self, k: usize) -> Option<&'t Tok> {
        self.toks.get(k).map(|t| &t.tok)
    }

    fn ident(&self, k: usize) -> Option<&'t str> {
        match self.tok(k) {
            Some(Tok::Ident(s)) => Some(s),
            _ => None,
        }
    }

    fn punct(&self, k: usize, c: char) -> bool {
        self.tok(k) == Some(&Tok::Punct(c))
    }

    fn line(&self, k: usize) -> usize {
        self.toks
            .get(k)
            .or_else(|| self.toks.last())
            .map_or(0, |t| t.line)
    }

    /// The innermost module; whether this is its top level (only extern
    /// blocks and macro invocations in between); whether directly inside a
    /// top-level macro invocation.
    fn position(&self) -> (usize, bool, bool) {
        let mut top = true;
        let mut in_macro = false;
        for (depth, scope) in self.scopes.iter().rev().enumerate() {
            match scope {
                Scope::Module(m) => return (*m, top, top && in_macro),
                Scope::Transparent { macro_body } => in_macro |= depth == 0 && *macro_body,
                Scope::Other => top = false,
            }
        }
        (0, top, top && in_macro)
    }

    /// The index of the delimiter that closes the one at `open`.
    fn matching(&self, open: usize) -> usize {
        let mut depth = 0usize;
        for (k, t) in self.toks.iter().enumerate().skip(open) {
            match t.tok {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(')' | ']' | '}') => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        return k;
                    }
                }
                _ => {}
            }
        }
        self.toks.len()
    }

    fn run(&mut self) {
        while let Some(tok) = self.tok(self.i) {
            match tok {
                Tok::Punct('#') => self.attributes(),
                Tok::Punct('{') => {
                    self.scopes.push(Scope::Other);
                    self.i += 1;
                }
                Tok::Punct('}') => {
                    self.scopes.pop();
                    self.i += 1;
                }
                Tok::Ident(word) => self.word(word),
                _ => self.i += 1,
            }
        }
    }

    /// Attributes; the item after them is skipped when one is `cfg(test)`.
    fn attributes(&mut self) {
        let mut test_only = false;
        while self.punct(self.i, '#') {
            let inner = self.punct(self.i + 1, '!');
            let open = self.i + 1 + usize::from(inner);
            if !self.punct(open, '[') {
                self.i += 1;
                return;
            }
            let close = self.matching(open);
            if !inner && is_cfg_test(&self.toks[open + 1..close.min(self.toks.len())]) {
                test_only = true;
            }
            self.i = close + 1;
        }
        if test_only && !self.keep_test {
            self.skip_item();
        }
    }

    /// Past one item, statement, field or match arm.
    fn skip_item(&mut self) {
        let mut depth = 0usize;
        while let Some(tok) = self.tok(self.i) {
            match tok {
                Tok::Punct('(' | '[' | '{') => depth += 1,
                Tok::Punct(c @ (')' | ']' | '}')) => {
                    if depth == 0 {
                        return;
                    }
                    depth -= 1;
                    if depth == 0 && *c == '}' {
                        self.i += 1;
                        return;
                    }
                }
                Tok::Punct(';' | ',') if depth == 0 => {
                    self.i += 1;
                    return;
                }
                _ => {}
            }
            self.i += 1;
        }
    }

    fn word(&mut self, word: &'t str) {
        let (module, top, in_macro) = self.position();
        match word {
            "macro_rules" if self.punct(self.i + 1, '!') => {
                if let (Some(name), true) = (self.ident(self.i + 2), top) {
                    self.out.modules[module].items.insert(name.to_string());
                }
                let open = self.i + 3;
                self.i = if matches!(self.tok(open), Some(Tok::Punct('{' | '(' | '['))) {
                    self.matching(open) + 1
                } else {
                    open
                };
            }
            "pub" => {
                self.i += 1;
                if self.punct(self.i, '(') {
                    self.i = self.matching(self.i) + 1;
                }
                if self.ident(self.i) == Some("use") {
                    self.use_decl(true);
                }
            }
            "use" => self.use_decl(false),
            "mod" => self.module(module),
            "struct" | "enum" | "union" | "trait" | "type" | "fn" | "const" | "static" => {
                let after_star = self.i > 0 && self.punct(self.i - 1, '*');
                match self.ident(self.i + 1) {
                    Some(name) if !after_star && !KEYWORDS.contains(&name) => {
                        if top {
                            self.out.modules[module].items.insert(name.to_string());
                        }
                        self.i += 2;
                    }
                    _ => self.i += 1,
                }
            }
            "extern" => {
                let mut k = self.i + 1;
                if self.tok(k) == Some(&Tok::Literal) {
                    k += 1;
                }
                if self.punct(k, '{') {
                    self.scopes.push(Scope::Transparent { macro_body: false });
                    self.i = k + 1;
                } else {
                    self.i += 1;
                }
            }
            _ if top && self.punct(self.i + 1, '!') && self.punct(self.i + 2, '{') => {
                self.scopes.push(Scope::Transparent { macro_body: true });
                self.i += 3;
            }
            _ => self.code(word, module, in_macro),
        }
    }

    fn module(&mut self, parent: usize) {
        let Some(name) = self.ident(self.i + 1) else {
            self.i += 1;
            return;
        };
        if self.punct(self.i + 2, ';') {
            self.out.modules[parent].decls.push(name.to_string());
            self.i += 3;
        } else if self.punct(self.i + 2, '{') {
            self.out.modules.push(LocalModule {
                name: name.to_string(),
                parent: Some(parent),
                ..LocalModule::default()
            });
            self.scopes.push(Scope::Module(self.out.modules.len() - 1));
            self.i += 3;
        } else {
            self.i += 1;
        }
    }

    /// An identifier in code: maybe the head of a path.
    fn code(&mut self, word: &'t str, module: usize, in_macro: bool) {
        if in_macro {
            self.out.modules[module]
                .macro_idents
                .insert(word.to_string());
        }
        let prev = self.i.checked_sub(1).and_then(|k| self.tok(k));
        let after_dot = prev == Some(&Tok::Punct('.'));
        let after_sep = prev == Some(&Tok::PathSep);
        // A leading `::` (`::std::..`), not `a::b` nor `Vec::<u8>::new`.
        let leading_sep = after_sep
            && !matches!(
                self.i.checked_sub(2).and_then(|k| self.tok(k)),
                Some(Tok::Ident(_) | Tok::Punct('>'))
            );
        if !after_dot && (!after_sep || leading_sep) && self.tok(self.i + 1) == Some(&Tok::PathSep)
        {
            let line = self.line(self.i);
            let mut segs = Vec::new();
            if leading_sep {
                segs.push("::".to_string());
            }
            segs.push(word.to_string());
            let mut k = self.i;
            while self.tok(k + 1) == Some(&Tok::PathSep) {
                let Some(seg) = self.ident(k + 2) else {
                    break;
                };
                segs.push(seg.to_string());
                k += 2;
            }
            if !leading_sep {
                self.out.code_idents.insert(word.to_string());
            }
            if segs.len() >= 2 {
                self.out.paths.push(CodePath { module, line, segs });
            }
            self.i = k + 1;
            return;
        }
        if leading_sep {
            self.out.paths.push(CodePath {
                module,
                line: self.line(self.i),
                segs: vec!["::".to_string(), word.to_string()],
            });
        }
        let field = self.punct(self.i + 1, ':');
        if !after_dot && !after_sep && !field {
            self.out.code_idents.insert(word.to_string());
        }
        self.i += 1;
    }

    fn use_decl(&mut self, public: bool) {
        let (module, top, _) = self.position();
        self.i += 1;
        let mut leaves = Vec::new();
        self.use_tree(Vec::new(), &mut leaves);
        while let Some(tok) = self.tok(self.i) {
            if *tok == Tok::Punct('}') {
                break;
            }
            self.i += 1;
            if *tok == Tok::Punct(';') {
                break;
            }
        }
        for (path, leaf, line) in leaves {
            self.out.uses.push(UseDecl {
                module,
                line,
                path,
                leaf,
                public,
                module_level: top,
            });
        }
    }

    fn use_tree(&mut self, prefix: Vec<String>, leaves: &mut Vec<(Vec<String>, Leaf, usize)>) {
        let mut path = prefix;
        if self.tok(self.i) == Some(&Tok::PathSep) {
            if path.is_empty() {
                path.push("::".to_string());
            }
            self.i += 1;
        }
        loop {
            let line = self.line(self.i);
            match self.tok(self.i) {
                Some(Tok::Ident(name)) => {
                    path.push(name.clone());
                    self.i += 1;
                    if self.tok(self.i) == Some(&Tok::PathSep) {
                        self.i += 1;
                        continue;
                    }
                    let mut binding = if name == "self" {
                        path.pop();
                        path.last().cloned()
                    } else {
                        Some(name.clone())
                    };
                    let mut leaf_line = line;
                    if self.ident(self.i) == Some("as") {
                        binding = self.ident(self.i + 1).map(str::to_string);
                        leaf_line = self.line(self.i + 1);
                        self.i += 2;
                    }
                    let leaf = match binding {
                        Some(b) if b == "_" => Leaf::Unnamed,
                        Some(b) => Leaf::Named(b),
                        None => return,
                    };
                    leaves.push((path, leaf, leaf_line));
                    return;
                }
                Some(Tok::Punct('*')) => {
                    self.i += 1;
                    leaves.push((path, Leaf::Glob, line));
                    return;
                }
                Some(Tok::Punct('{')) => {
                    self.i += 1;
                    while let Some(tok) = self.tok(self.i) {
                        match tok {
                            Tok::Punct('}') => {
                                self.i += 1;
                                break;
                            }
                            Tok::Punct(',') => self.i += 1,
                            _ => {
                                let before = self.i;
                                self.use_tree(path.clone(), leaves);
                                if self.i == before {
                                    self.i += 1;
                                }
                            }
                        }
                    }
                    return;
                }
                _ => return,
            }
        }
    }
}

/// `cfg(test)`, or `cfg(all(.., test, ..))`.
fn is_cfg_test(attr: &[Token]) -> bool {
    let ident = |k: usize, w: &str| attr.get(k).is_some_and(|t| t.is_ident(w));
    let punct = |k: usize, c: char| attr.get(k).is_some_and(|t| t.tok == Tok::Punct(c));
    if !ident(0, "cfg") || !punct(1, '(') {
        return false;
    }
    if ident(2, "test") && punct(3, ')') && attr.len() == 4 {
        return true;
    }
    if !(ident(2, "all") && punct(3, '(')) {
        return false;
    }
    let mut depth = 0usize;
    for (k, t) in attr.iter().enumerate().skip(3) {
        match t.tok {
            Tok::Punct('(') => depth += 1,
            Tok::Punct(')') => depth = depth.saturating_sub(1),
            _ if depth == 1
                && t.is_ident("test")
                && (punct(k - 1, '(') || punct(k - 1, ','))
                && (punct(k + 1, ')') || punct(k + 1, ',')) =>
            {
                return true;
            }
            _ => {}
        }
    }
    false
}

// ---------------------------------------------------------------------------
// One crate's module tree, name resolution and file edges
// ---------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
struct UseRef {
    file: usize,
    index: usize,
}

#[derive(Debug)]
struct Module {
    parent: Option<usize>,
    file: usize,
    children: BTreeMap<String, usize>,
    items: BTreeSet<String>,
    macro_idents: BTreeSet<String>,
    /// Names its top-level `use` declarations bind.
    bindings: BTreeMap<String, UseRef>,
    /// Names `use` declarations in its function bodies bind.
    local_bindings: BTreeMap<String, UseRef>,
    globs: Vec<UseRef>,
}

#[derive(Debug)]
struct SrcFile {
    /// Relative to the workspace root.
    rel: String,
    parsed: ParsedFile,
    /// The crate module of each of the file's local modules.
    modules: Vec<usize>,
}

/// What a path resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Res {
    Module(usize),
    /// An item defined in this file.
    File(usize),
    /// Outside the crate: a workspace package, or `None` for extern crates.
    External(Option<String>),
}

#[derive(Debug)]
struct FileEdge {
    from: usize,
    to: usize,
    line: usize,
    via: String,
}

/// The crate's modules; module 0 is the root.
#[derive(Debug)]
struct CrateGraph {
    modules: Vec<Module>,
    files: Vec<SrcFile>,
}

impl CrateGraph {
    fn build(root: &Path, root_file: &Path, notes: &mut Vec<String>) -> Self {
        let mut graph = CrateGraph {
            modules: Vec::new(),
            files: Vec::new(),
        };
        let mut queue: VecDeque<(PathBuf, String, Option<usize>)> = VecDeque::new();
        queue.push_back((root_file.to_path_buf(), String::new(), None));
        while let Some((path, name, parent)) = queue.pop_front() {
            let rel = relative(root, &path);
            let Ok(text) = fs::read_to_string(&path) else {
                notes.push(format!("cannot read {rel}"));
                continue;
            };
            let parsed = parse(&lex(&text), false);
            let file = graph.files.len();
            let mut ids: Vec<usize> = Vec::new();
            for (local, lm) in parsed.modules.iter().enumerate() {
                let id = graph.modules.len();
                let (key, up) = match lm.parent {
                    None => (name.clone(), parent),
                    Some(p) => (lm.name.clone(), Some(ids[p])),
                };
                if let Some(up) = up {
                    graph.modules[up].children.insert(key, id);
                }
                graph.modules.push(Module {
                    parent: up,
                    file,
                    children: BTreeMap::new(),
                    items: lm.items.clone(),
                    macro_idents: lm.macro_idents.clone(),
                    bindings: BTreeMap::new(),
                    local_bindings: BTreeMap::new(),
                    globs: Vec::new(),
                });
                ids.push(id);
                debug_assert_eq!(ids.len(), local + 1);
            }
            for (index, u) in parsed.uses.iter().enumerate() {
                let m = &mut graph.modules[ids[u.module]];
                let r = UseRef { file, index };
                match (&u.leaf, u.module_level) {
                    (Leaf::Named(b), true) => {
                        m.bindings.insert(b.clone(), r);
                    }
                    (Leaf::Named(b), false) => {
                        m.local_bindings.insert(b.clone(), r);
                    }
                    (Leaf::Glob, true) => m.globs.push(r),
                    _ => {}
                }
            }
            // Where this file's `mod x;` files are: beside a root or mod.rs
            // file, else in the directory named after the file.
            let dir = path.parent().unwrap_or(Path::new(""));
            let base = if parent.is_none() || path.file_name().is_some_and(|f| f == "mod.rs") {
                dir.to_path_buf()
            } else {
                dir.join(path.file_stem().unwrap_or_default())
            };
            for (local, lm) in parsed.modules.iter().enumerate() {
                let mut inline = Vec::new();
                let mut at = local;
                while let Some(p) = parsed.modules[at].parent {
                    inline.push(parsed.modules[at].name.as_str());
                    at = p;
                }
                let mut here = base.clone();
                for seg in inline.iter().rev() {
                    here.push(seg);
                }
                for decl in &lm.decls {
                    let flat = here.join(format!("{decl}.rs"));
                    let nested = here.join(decl).join("mod.rs");
                    if flat.is_file() {
                        queue.push_back((flat, decl.clone(), Some(ids[local])));
                    } else if nested.is_file() {
                        queue.push_back((nested, decl.clone(), Some(ids[local])));
                    } else {
                        notes.push(format!("{rel}: no file for `mod {decl};`"));
                    }
                }
            }
            graph.files.push(SrcFile {
                rel,
                parsed,
                modules: ids,
            });
        }
        graph
    }

    fn use_decl(&self, r: UseRef) -> &UseDecl {
        &self.files[r.file].parsed.uses[r.index]
    }

    /// Resolve `path` as written in module `ctx`.
    fn resolve(
        &self,
        ctx: usize,
        path: &[String],
        idents: &BTreeMap<String, String>,
        seen: &mut BTreeSet<(usize, String)>,
    ) -> Res {
        let Some(first) = path.first() else {
            return Res::Module(ctx);
        };
        let external =
            |name: Option<&String>| Res::External(name.and_then(|n| idents.get(n)).cloned());
        let (mut cur, rest) = match first.as_str() {
            "::" => return external(path.get(1)),
            "crate" | "$crate" => (0, &path[1..]),
            "self" => (ctx, &path[1..]),
            "super" => (ctx, path),
            _ if self.modules[ctx].children.contains_key(first) => (ctx, path),
            _ => match self.lookup(ctx, first, idents, seen) {
                Some(Res::Module(m)) => (m, &path[1..]),
                Some(found) => return found,
                None => return external(Some(first)),
            },
        };
        for seg in rest {
            match seg.as_str() {
                "self" => continue,
                "super" => {
                    cur = self.modules[cur].parent.unwrap_or(cur);
                    continue;
                }
                _ => {}
            }
            if let Some(&child) = self.modules[cur].children.get(seg) {
                cur = child;
                continue;
            }
            match self.lookup(cur, seg, idents, seen) {
                Some(Res::Module(m)) => cur = m,
                Some(found) => return found,
                None => return Res::File(self.modules[cur].file),
            }
        }
        Res::Module(cur)
    }

    /// What `name` means in module `m`: an item it defines, a child module,
    /// a name its `use` declarations bind, or one its globs provide.
    fn lookup(
        &self,
        m: usize,
        name: &str,
        idents: &BTreeMap<String, String>,
        seen: &mut BTreeSet<(usize, String)>,
    ) -> Option<Res> {
        let key = (m, name.to_string());
        if !seen.insert(key.clone()) {
            return None;
        }
        let module = &self.modules[m];
        let found = if module.items.contains(name) {
            Some(Res::File(module.file))
        } else if let Some(&child) = module.children.get(name) {
            Some(Res::Module(child))
        } else if let Some(&r) = module.bindings.get(name) {
            Some(self.resolve(m, &self.use_decl(r).path, idents, seen))
        } else {
            module
                .globs
                .iter()
                .find_map(
                    |&g| match self.resolve(m, &self.use_decl(g).path, idents, seen) {
                        Res::Module(target) => self.lookup(target, name, idents, seen),
                        _ => None,
                    },
                )
                .or_else(|| {
                    module
                        .macro_idents
                        .contains(name)
                        .then_some(Res::File(module.file))
                })
        };
        seen.remove(&key);
        found
    }

    /// The head of a path in code: what it names, if anything in the crate
    /// (function-local imports included).
    fn head(&self, m: usize, head: &str, idents: &BTreeMap<String, String>) -> Option<Res> {
        let mut seen = BTreeSet::new();
        self.lookup(m, head, idents, &mut seen).or_else(|| {
            let r = *self.modules[m].local_bindings.get(head)?;
            Some(self.resolve(m, &self.use_decl(r).path, idents, &mut seen))
        })
    }

    /// Every file edge with its evidence, and the workspace packages the
    /// crate's code names.
    fn edges(&self, idents: &BTreeMap<String, String>) -> (Vec<FileEdge>, BTreeSet<String>) {
        let mut edges = Vec::new();
        let mut others = BTreeSet::new();
        let mut add = |from: usize, res: Res, line: usize, via: String| match res {
            Res::File(to) if to != from => edges.push(FileEdge {
                from,
                to,
                line,
                via,
            }),
            Res::Module(m) if self.modules[m].file != from => edges.push(FileEdge {
                from,
                to: self.modules[m].file,
                line,
                via,
            }),
            Res::External(Some(package)) => {
                others.insert(package);
            }
            _ => {}
        };
        for (from, file) in self.files.iter().enumerate() {
            let code = &file.parsed.code_idents;
            for u in &file.parsed.uses {
                let ctx = file.modules[u.module];
                let target = self.resolve(ctx, &u.path, idents, &mut BTreeSet::new());
                match &u.leaf {
                    Leaf::Glob => match target {
                        Res::Module(g) => {
                            for name in code {
                                if let Some(found @ Res::File(_)) =
                                    self.lookup(g, name, idents, &mut BTreeSet::new())
                                {
                                    add(from, found, u.line, format!("{} ({name})", u.text()));
                                }
                            }
                        }
                        Res::File(_) if u.public => {}
                        _ => add(from, target, u.line, u.text()),
                    },
                    Leaf::Named(name) if u.public && !code.contains(name) => {
                        if let Res::External(_) = target {
                            add(from, target, u.line, u.text());
                        }
                    }
                    Leaf::Unnamed if u.public => {}
                    // A `use` of a module makes no edge: paths through it do.
                    _ if matches!(target, Res::Module(_)) => {}
                    _ => add(from, target, u.line, u.text()),
                }
            }
            for p in &file.parsed.paths {
                let ctx = file.modules[p.module];
                let head = p.segs[0].as_str();
                let res = match head {
                    "crate" | "self" | "super" | "::" => {
                        self.resolve(ctx, &p.segs, idents, &mut BTreeSet::new())
                    }
                    _ => match self.head(ctx, head, idents) {
                        Some(Res::Module(m)) => {
                            let mut rest = vec!["self".to_string()];
                            rest.extend(p.segs[1..].iter().cloned());
                            self.resolve(m, &rest, idents, &mut BTreeSet::new())
                        }
                        Some(Res::External(Some(package))) => Res::External(Some(package)),
                        Some(_) => continue,
                        None => match idents.get(head) {
                            Some(package) => Res::External(Some(package.clone())),
                            None => continue,
                        },
                    },
                };
                add(from, res, p.line, join_path(&p.segs));
            }
        }
        (edges, others)
    }
}
