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

/// Words of a counter file's name that name a tool, a snapshot or a kind
/// of dump rather than a host or switch (`ethtool`, `rdma`, `pfc`,
/// `counters`, ...).
const GENERIC_WORDS: &[&str] = &[
    "ethtool",
    "rdma",
    "stats",
    "statistic",
    "statistics",
    "counters",
    "counter",
    "show",
    "pfc",
    "pfcstat",
    "pfcwd",
    "queue",
    "queues",
    "hw",
    "nic",
    "nics",
    "switch",
    "switches",
    "sonic",
    "dump",
    "dumps",
    "capture",
    "snap",
    "snapshot",
    "sample",
    "nvue",
    "nv",
    "qos",
    "interface",
    "port",
    "ports",
    "perfquery",
    "netq",
];

/// A token that marks a snapshot rather than naming something: a marker
/// word of [`source_from_file_name`], digits only (`1`, `20240601`), or a
/// snapshot word with a number (`snap1`, `sample02`, `dump3`, `t10`).
fn is_snapshot_token(t: &str) -> bool {
    let l = t.to_ascii_lowercase();
    if l.is_empty() || l.bytes().all(|b| b.is_ascii_digit()) {
        return true;
    }
    const MARKS: &[&str] = &[
        "before", "after", "start", "end", "begin", "pre", "post", "old", "new", "first", "second",
        "third", "last", "prev", "next", "one", "two", "three", "four", "five",
    ];
    if MARKS.contains(&l.as_str()) {
        return true;
    }
    let head = l.trim_end_matches(|c: char| c.is_ascii_digit());
    head.len() < l.len()
        && [
            "snap", "snapshot", "sample", "dump", "t", "iter", "round", "poll", "run",
        ]
        .contains(&head)
}

/// How a counter file's name names its source: `(name, generic)`. The
/// name is [`source_from_file_name`] without snapshot tokens (`snap1`,
/// `2`, `first`); `generic` when what is left names only a tool or a kind
/// of dump (`ethtool`, `rdma_stats`) or nothing, so that the file's folder
/// is the better name (`node1/ethtool_before.txt` is host `node1`).
pub(super) fn counter_file_name(file: &str) -> (String, bool) {
    let stem = source_from_file_name(file);
    // Split into tokens, keeping each token's leading separator.
    let mut parts: Vec<(String, String)> = Vec::new();
    let mut sep = String::new();
    let mut tok = String::new();
    for c in stem.chars() {
        if matches!(c, '_' | '-' | '.' | ' ') {
            parts.push((std::mem::take(&mut sep), std::mem::take(&mut tok)));
            sep.push(c);
        } else {
            tok.push(c);
        }
    }
    parts.push((sep, tok));
    let is_generic = |t: &str| GENERIC_WORDS.contains(&t.to_ascii_lowercase().as_str());
    let kept: Vec<&(String, String)> = parts
        .iter()
        .filter(|(_, t)| !t.is_empty() && !is_snapshot_token(t))
        .collect();
    let generic = kept.iter().all(|(_, t)| is_generic(t));
    // A name with a host or switch in it keeps only those tokens
    // (`leaf1_pfc` is `leaf1`); a generic one keeps its tool words.
    let kept: Vec<&(String, String)> = kept
        .into_iter()
        .filter(|(_, t)| generic || !is_generic(t))
        .collect();
    let mut name = String::new();
    for (i, (s, t)) in kept.iter().enumerate() {
        if i > 0 {
            name.push_str(if s.is_empty() { "-" } else { s });
        }
        name.push_str(t);
    }
    (name, generic)
}

/// The folder of a path (`""` for a bare file name).
pub(super) fn folder_of(path: &str) -> &str {
    match path.rfind(['/', '\\']) {
        Some(i) => &path[..i],
        None => "",
    }
}

/// The last component of a folder path, unless the folder is a run
/// variant's counters folder (`.../counters/<variant>`), whose name is a
/// variant, not a host.
pub(super) fn host_folder(path: &str) -> Option<String> {
    let dir = folder_of(path);
    if dir.is_empty() || scope_from_path(path).is_some() {
        return None;
    }
    let last = dir.rsplit(['/', '\\']).next().unwrap_or(dir);
    (!last.is_empty() && last != "." && last != "..").then(|| last.to_string())
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
    "mmuconfig",
    "ecnconfig",
    "link",
    "pfcwd",
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
    use super::{counter_file_name, host_folder, host_from_path};

    #[test]
    fn counter_file_names_drop_snapshot_and_tool_words() {
        assert_eq!(counter_file_name("snap1.txt"), (String::new(), true));
        assert_eq!(counter_file_name("a/snap2.txt"), (String::new(), true));
        assert_eq!(
            counter_file_name("ethtool_before.txt"),
            ("ethtool".into(), true)
        );
        assert_eq!(counter_file_name("node7-t1.log"), ("node7".into(), false));
        assert_eq!(
            counter_file_name("leaf0-p3.ethtool.txt"),
            ("leaf0-p3".into(), false)
        );
        assert_eq!(counter_file_name("h3_rdma_2.txt"), ("h3".into(), false));
        assert_eq!(
            counter_file_name("leaf1_pfc_counters.txt"),
            ("leaf1".into(), false)
        );
        assert_eq!(counter_file_name("node7.txt"), ("node7".into(), false));
        assert_eq!(
            host_folder("case/node1/ethtool_after.txt"),
            Some("node1".into())
        );
        assert_eq!(host_folder("out/counters/v/h0.ethtool.txt"), None);
        assert_eq!(host_folder("h0.txt"), None);
    }

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
