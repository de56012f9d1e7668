//! Exports rdma-core's symbols under rdma-core's symbol versions.
//!
//! `symbols.txt` is the one list: for each exported name, its version node.
//! From it this script writes a linker version script (the nodes, chained
//! as rdma-core chains them) and a `.symver` line per symbol, which binds
//! the Rust function of that name to `name@@NODE`. rustc passes its own
//! anonymous export list as well; the linker merges the two, and the
//! `.symver` directives decide each symbol's version.

use std::fmt::Write as _;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-changed=symbols.txt");
    let text = std::fs::read_to_string("symbols.txt").expect("symbols.txt is readable");
    let mut nodes: Vec<(String, Vec<String>)> = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut parts = line.split_whitespace();
        let (Some(node), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
            panic!("symbols.txt:{}: expected `NODE NAME`, got {line:?}", n + 1);
        };
        match nodes.iter_mut().find(|(n, _)| n == node) {
            Some((_, names)) => names.push(name.to_owned()),
            None => nodes.push((node.to_owned(), vec![name.to_owned()])),
        }
    }
    let mut script = String::new();
    let mut asm = String::from("std::arch::global_asm!(\n");
    let mut prev: Option<&str> = None;
    for (node, names) in &nodes {
        let _ = writeln!(script, "{node} {{\n  global:");
        for name in names {
            let _ = writeln!(script, "    {name};");
            let _ = writeln!(asm, "    \".symver {name}, {name}@@{node}\",");
        }
        if prev.is_none() {
            script.push_str("  local: *;\n");
        }
        match prev.filter(|_| !node.starts_with("IBVERBS_PRIVATE")) {
            Some(p) => {
                let _ = writeln!(script, "}} {p};");
            }
            None => script.push_str("};\n"),
        }
        if !node.starts_with("IBVERBS_PRIVATE") {
            prev = Some(node);
        }
    }
    asm.push_str(");\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let map = out.join("libibverbs.map");
    std::fs::write(&map, script).expect("OUT_DIR is writable");
    std::fs::write(out.join("symver.rs"), asm).expect("OUT_DIR is writable");
    println!(
        "cargo:rustc-cdylib-link-arg=-Wl,--version-script={}",
        map.display()
    );
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libibverbs.so.1");
}
