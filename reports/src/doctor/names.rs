//! What names say: the source a counter file stands for, the run variant
//! (scope) a path belongs to, the host of a per-host tool output and the
//! node of a source. Pure functions of the name.

/// The source a file stands for when it names none: its file name without
/// directories, extensions (`.txt`, `.log`, `.out`, `.ethtool`, `.rdma`,
/// `.stats`, `.counters`) and a trailing snapshot marker (`before`,
/// `after`, `start`, `end`, `begin`, `pre`, `post`, `old`, `new`, `t0`..`t9`
/// after `_`, `-` or `.`). So `h3.ethtool.txt` is `h3`, and
/// `ethtool_before.txt` / `ethtool_after.txt` are one source.
pub fn source_from_file_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    let mut s = base.to_string();
    loop {
        let lower = s.to_ascii_lowercase();
        let ext = [
            ".txt",
            ".log",
            ".out",
            ".ethtool",
            ".rdma",
            ".stats",
            ".counters",
        ]
        .iter()
        .find(|e| lower.ends_with(**e));
        match ext {
            Some(e) => s.truncate(s.len() - e.len()),
            None => break,
        }
    }
    let lower = s.to_ascii_lowercase();
    const MARKS: &[&str] = &[
        "before", "after", "start", "end", "begin", "pre", "post", "old", "new", "t0", "t1", "t2",
        "t3", "t4", "t5", "t6", "t7", "t8", "t9",
    ];
    for m in MARKS {
        if lower == *m {
            return String::new();
        }
        for sep in ['_', '-', '.'] {
            let suffix = format!("{sep}{m}");
            if lower.ends_with(&suffix) {
                s.truncate(s.len() - suffix.len());
                return s;
            }
        }
    }
    s
}

/// The run variant a file belongs to: `X` for a path `.../counters/X/FILE`
/// (rocelab's run folders), else none.
pub fn scope_from_path(name: &str) -> Option<String> {
    let parts: Vec<&str> = name.split(['/', '\\']).collect();
    let n = parts.len();
    (n >= 3 && parts[n - 3] == "counters" && !parts[n - 2].is_empty())
        .then(|| parts[n - 2].to_string())
}

/// Tool names that make up a file name without naming a host.
const TOOL_NAMES: &[&str] = &[
    "show_gids",
    "show-gids",
    "gids",
    "ibv_devinfo",
    "ibv_devinfo_v",
    "ibv-devinfo",
    "devinfo",
    "ibstat",
    "ibstatus",
    "mlnx_qos",
    "mlnx-qos",
    "qos",
];

/// The host a per-host tool output (`show_gids`, `ibv_devinfo` /
/// `ibstat`, `mlnx_qos`) stands for: the file name without its extensions
/// and the tool's name (`node1.show_gids.txt`, `node1-ibv_devinfo.txt` ->
/// `node1`), or its folder when the file is named after the tool only
/// (`node1/show_gids.txt` -> `node1`).
pub(super) fn host_from_path(name: &str) -> String {
    let stem = source_from_file_name(name);
    let lower = stem.to_ascii_lowercase();
    let mut host = stem.clone();
    for t in TOOL_NAMES {
        if lower == *t {
            host.clear();
            break;
        }
        let mut done = false;
        for sep in ['.', '_', '-'] {
            if lower.ends_with(&format!("{sep}{t}")) {
                host.truncate(stem.len() - t.len() - 1);
                done = true;
                break;
            }
            if lower.starts_with(&format!("{t}{sep}")) {
                host = stem[t.len() + 1..].to_string();
                done = true;
                break;
            }
        }
        if done {
            break;
        }
    }
    if host.is_empty() {
        let parts: Vec<&str> = name.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
        host = match parts.len() {
            0 | 1 => stem,
            n => parts[n - 2].to_string(),
        };
    }
    host
}

/// The node of a source name: without a trailing `-pN` (switch port).
pub(super) fn node_of(source: &str) -> String {
    if let Some((node, port)) = source.rsplit_once("-p") {
        if !node.is_empty() && !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) {
            return node.to_string();
        }
    }
    source.to_string()
}

#[cfg(test)]
mod tests {
    use super::host_from_path;

    #[test]
    fn the_host_comes_from_the_file_name_or_its_folder() {
        assert_eq!(host_from_path("dumps/node1.show_gids.txt"), "node1");
        assert_eq!(host_from_path("node-07-ibv_devinfo.txt"), "node-07");
        assert_eq!(host_from_path("mlnx_qos_gpu3.txt"), "gpu3");
        assert_eq!(host_from_path("case/node2/show_gids.txt"), "node2");
        assert_eq!(host_from_path("h4.txt"), "h4");
        assert_eq!(host_from_path("ibstat"), "ibstat");
    }
}
