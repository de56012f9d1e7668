//! Exports a drop-in C library's symbols under rdma-core's symbol versions.
//!
//! Used by the build scripts of `ibverbs-shim` (`libibverbs.so.1`) and
//! `rdmacm-shim` (`librdmacm.so.1`). Each crate keeps one list,
//! `symbols.txt`: `NODE NAME` per line (`#` starts a comment), naming for
//! each exported function the version node rdma-core's map file gives it.
//! [`export`] writes, into `OUT_DIR`:
//!
//! * a linker version script with the nodes in list order, each public
//!   node inheriting from the previous public one as rdma-core chains them
//!   (nodes whose name contains `_PRIVATE` stand alone), the first one
//!   holding `local: *`;
//! * `symver.rs`, a `global_asm!` with one `.symver NAME, NAME@@NODE` line
//!   per symbol, which the crate `include!`s so that the Rust function of
//!   that name is bound to its version. rustc passes its own anonymous
//!   export list as well; the linker merges the two, and the `.symver`
//!   directives decide each symbol's version. They must sit in the object
//!   file that defines the symbol: build the crate as one codegen unit,
//!   without incremental compilation.
//!
//! and tells cargo to link the cdylib with the script and `soname`.

use std::fmt::Write as _;
use std::path::PathBuf;

/// The version nodes of a `symbols.txt` text, in first-seen order, each
/// with its names. Errors name the line (1-based) and what was expected.
pub fn parse(text: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut nodes: Vec<(String, Vec<String>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(node), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
            return Err(format!(
                "symbols.txt:{}: expected `NODE NAME`, got {line:?}",
                n + 1
            ));
        };
        match nodes.iter_mut().find(|(n, _)| n == node) {
            Some((_, names)) => names.push(name.to_owned()),
            None => nodes.push((node.to_owned(), vec![name.to_owned()])),
        }
    }
    Ok(nodes)
}

/// The version script and the `global_asm!` source for `nodes`.
pub fn render(nodes: &[(String, Vec<String>)]) -> (String, String) {
    let mut script = String::new();
    let mut asm = String::from("std::arch::global_asm!(\n");
    let mut prev: Option<&str> = None;
    for (i, (node, names)) in nodes.iter().enumerate() {
        let private = node.contains("_PRIVATE");
        let _ = writeln!(script, "{node} {{\n  global:");
        for name in names {
            let _ = writeln!(script, "    {name};");
            let _ = writeln!(asm, "    \".symver {name}, {name}@@{node}\",");
        }
        if i == 0 {
            script.push_str("  local: *;\n");
        }
        match prev.filter(|_| !private) {
            Some(p) => {
                let _ = writeln!(script, "}} {p};");
            }
            None => script.push_str("};\n"),
        }
        if !private {
            prev = Some(node);
        }
    }
    asm.push_str(");\n");
    (script, asm)
}

/// Run from a build script: read `symbols.txt` in the crate's directory,
/// write `<stem>.map` and `symver.rs` into `OUT_DIR`, and link the cdylib
/// with that version script and `soname`. Panics (failing the build) with
/// the file and line of a malformed entry.
pub fn export(stem: &str, soname: &str) {
    println!("cargo:rerun-if-changed=symbols.txt");
    let text = std::fs::read_to_string("symbols.txt").expect("symbols.txt is readable");
    let nodes = parse(&text).unwrap_or_else(|e| panic!("{e}"));
    let (script, asm) = render(&nodes);
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let map = out.join(format!("{stem}.map"));
    std::fs::write(&map, script).expect("OUT_DIR is writable");
    std::fs::write(out.join("symver.rs"), asm).expect("OUT_DIR is writable");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,{soname}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_chain_except_private_ones() {
        let nodes = parse("# c\nV_1.0 a\nV_1.0 b\nV_PRIVATE_1 p\nV_1.1 c\n\nV_1.2 d\n").unwrap();
        let (script, asm) = render(&nodes);
        assert_eq!(
            script,
            "V_1.0 {\n  global:\n    a;\n    b;\n  local: *;\n};\n\
             V_PRIVATE_1 {\n  global:\n    p;\n};\n\
             V_1.1 {\n  global:\n    c;\n} V_1.0;\n\
             V_1.2 {\n  global:\n    d;\n} V_1.1;\n"
        );
        assert!(asm.contains("\".symver p, p@@V_PRIVATE_1\""), "{asm}");
        assert_eq!(asm.matches(".symver").count(), 5);
    }

    #[test]
    fn a_bad_line_is_named() {
        let e = parse("V_1.0 a\nV_1.0 b c\n").unwrap_err();
        assert!(
            e.contains("symbols.txt:2") && e.contains("NODE NAME"),
            "{e}"
        );
    }
}
