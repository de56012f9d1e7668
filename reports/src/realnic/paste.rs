//! Pasted text made plain before format detection and parsing: what a
//! terminal, a chat, a mail client or a parallel shell adds around a
//! tool's output is removed, and the host it names is kept.
//!
//! [`normalise`] applies, line by line:
//!
//! * `\r` (CRLF line ends; of a line redrawn with `\r`, the last drawing);
//! * ANSI escape sequences (colours, cursor moves) and other control
//!   characters except TAB;
//! * Open MPI `--tag-output` prefixes (`[1,0]<stdout>:`);
//! * markdown code fences (a line of three or more backticks, with an
//!   optional language) become empty lines; a single backtick opening the
//!   first line or closing the last line of an inline code span is
//!   dropped;
//! * a line holding a run of `name: integer` pairs (a counter list whose
//!   line breaks were lost in a copy) is split into one pair per line;
//! * parallel-shell prefixes (`pdsh`/`clush`: `host: text`) when most
//!   lines carry one: the lines are grouped per host, in order of first
//!   appearance, each group opened by a `# host: NAME` line, so parsers
//!   that read one host at a time see each host's lines together;
//! * `==> path <==` headers (`tail`/`head` of several files) become
//!   `# host: NAME`, NAME taken from the path (see [`host_of_path`]) when
//!   it names one.
//!
//! Shell prompt lines (`user@host:~$ cmd`, `[root@node ~]# cmd`, `$ cmd`,
//! `➜  dir cmd`, `% cmd`) are kept, because several parsers read the
//! command (`ethtool -S IFACE`, `lspci -s ADDR`, `ssh HOST show_gids`);
//! [`prompt`] splits one into its host and command for those that want it.
//!
//! Contract: the text is only ever shortened or regrouped, never invented;
//! without prefixes or flattened lists the line count is unchanged, so
//! parse errors name the pasted line. Nothing here panics on any input.

use super::text::{counter_pair, is_counter_name};

/// A shell prompt line split into the host it names (when it names one)
/// and the command typed after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt<'a> {
    /// `host` of `user@host:~$`, `[root@host ~]#`, `root@host ~`.
    pub host: Option<&'a str>,
    /// The command after the prompt (may be empty).
    pub command: &'a str,
}

/// Whether `s` could be a host name (letters, digits, `-`, `.`, `_`).
fn host_like(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

/// Split a shell prompt line (see the module docs). `None` when the line
/// is not a prompt.
pub fn prompt(line: &str) -> Option<Prompt<'_>> {
    let t = line.trim();
    // `[root@node ~]# cmd`, `[user@node dir]$ cmd`
    if let Some(rest) = t.strip_prefix('[') {
        let close = rest.find(']')?;
        let inside = &rest[..close];
        let after = rest[close + 1..].trim_start();
        let cmd = after.strip_prefix(['#', '$', '%', '>'])?;
        let (_, hostdir) = inside.split_once('@')?;
        let host = hostdir.split_whitespace().next().filter(|h| host_like(h))?;
        return Some(Prompt {
            host: Some(host),
            command: cmd.trim(),
        });
    }
    // `user@host:~$ cmd`, `user@host:/path# cmd`, `user@host ~ % cmd`
    if let Some(at) = t.find('@') {
        let user = &t[..at];
        if host_like(user) {
            let rest = &t[at + 1..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
                .unwrap_or(rest.len());
            let host = &rest[..end];
            let tail = &rest[end..];
            if host_like(host) {
                // The prompt ends at the first `$`, `#` or `%` followed by a
                // space or the line's end, after an optional `:dir`.
                for (i, c) in tail.char_indices() {
                    if matches!(c, '$' | '#' | '%' | '>') {
                        let next = tail[i + c.len_utf8()..].chars().next();
                        if next.map_or(true, char::is_whitespace) {
                            let before = &tail[..i];
                            let ok = before.is_empty()
                                || before.starts_with(':')
                                || before.starts_with(' ');
                            if ok && !before.contains("  ") {
                                return Some(Prompt {
                                    host: Some(host),
                                    command: tail[i + c.len_utf8()..].trim(),
                                });
                            }
                        }
                    }
                }
                // `root@jazz15 ~` on a line of its own (a two-line prompt).
                if tail.trim() == "~" || tail.trim().starts_with('/') && !tail.contains(' ') {
                    return Some(Prompt {
                        host: Some(host),
                        command: "",
                    });
                }
            }
        }
    }
    // `➜  ~ cmd` (oh-my-zsh), `$ cmd`, `% cmd`, `~$ cmd`, `#cmd` of a
    // two-line prompt is left alone: `#` also opens comments and tables.
    if let Some(rest) = t.strip_prefix('➜') {
        let rest = rest.trim_start();
        let cmd = rest.split_once(' ').map_or("", |(_, c)| c);
        return Some(Prompt {
            host: None,
            command: cmd.trim(),
        });
    }
    for p in ["$ ", "% ", "~$ ", "~# ", "# sudo ", "$sudo "] {
        if let Some(cmd) = t.strip_prefix(p) {
            let cmd = if p.contains("sudo") {
                &t[p.len() - "sudo ".len()..]
            } else {
                cmd
            };
            return Some(Prompt {
                host: None,
                command: cmd.trim(),
            });
        }
    }
    None
}

/// Remove ANSI escape sequences and control characters other than TAB.
fn strip_controls(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c == '\u{1b}' {
            match it.peek() {
                // CSI: ESC [ params final (0x40..=0x7e)
                Some('[') => {
                    it.next();
                    for d in it.by_ref() {
                        if ('\u{40}'..='\u{7e}').contains(&d) {
                            break;
                        }
                    }
                }
                // OSC: ESC ] ... BEL or ESC \
                Some(']') => {
                    it.next();
                    while let Some(d) = it.next() {
                        if d == '\u{7}' {
                            break;
                        }
                        if d == '\u{1b}' {
                            it.next();
                            break;
                        }
                    }
                }
                Some(_) => {
                    it.next();
                }
                None => {}
            }
            continue;
        }
        if c == '\t' || !c.is_control() {
            out.push(c);
        }
    }
    out
}

/// Open MPI `--tag-output`: `[1,0]<stdout>:` / `[1,12]<stderr>:`.
fn strip_mpi_tag(s: &str) -> &str {
    let Some(rest) = s.strip_prefix('[') else {
        return s;
    };
    let Some(close) = rest.find(']') else {
        return s;
    };
    let inside = &rest[..close];
    let numeric = !inside.is_empty()
        && inside.contains(',')
        && inside.chars().all(|c| c.is_ascii_digit() || c == ',');
    if !numeric {
        return s;
    }
    let after = &rest[close + 1..];
    for tag in ["<stdout>:", "<stderr>:", "<stddiag>:"] {
        if let Some(r) = after.strip_prefix(tag) {
            return r;
        }
    }
    s
}

/// The pairs of a counter list flattened onto one line
/// (`a: 1 b: 2 c: 3 ...`), when the line is nothing else (an optional
/// leading command is kept as its own line).
fn flattened_pairs(s: &str) -> Option<Vec<String>> {
    // A flattened dump is a few kilobytes; a huge line is noise, and
    // splitting it would cost memory in proportion to its words.
    if s.len() > 64 * 1024 || !s.contains(": ") {
        return None;
    }
    let toks: Vec<&str> = s.split_whitespace().collect();
    // Find the first `name:` followed by an integer.
    let start = (0..toks.len().saturating_sub(1)).find(|&i| {
        toks[i].ends_with(':')
            && is_counter_name(&toks[i][..toks[i].len() - 1])
            && toks[i + 1].parse::<u64>().is_ok()
    })?;
    let mut pairs = Vec::new();
    let mut i = start;
    while i + 1 < toks.len() {
        let name = toks[i].strip_suffix(':')?;
        if !is_counter_name(name) || toks[i + 1].parse::<u64>().is_err() {
            return None;
        }
        pairs.push(format!("{name}: {}", toks[i + 1]));
        i += 2;
    }
    if i != toks.len() || pairs.len() < 4 {
        return None;
    }
    let mut out = Vec::new();
    let head = toks[..start].join(" ");
    if !head.is_empty() {
        out.push(head);
    }
    out.extend(pairs);
    Some(out)
}

/// `host: text` of a parallel shell: the host and the text.
fn shell_prefix(s: &str) -> Option<(&str, &str)> {
    let (h, rest) = s.split_once(':')?;
    // pdsh prints `host: line`; the line may itself open with a TAB.
    let rest = rest
        .strip_prefix(' ')
        .or_else(|| rest.strip_prefix('\t').map(|_| rest))?;
    let h = h.trim();
    // Host names hold no `_` (DNS), and a prefix host is one token.
    // Host names hold no `_` (DNS); field names (`LnkSta:`, `Speed:`)
    // hold no digit, dash or dot, which cluster host names do.
    if !host_like(h)
        || h.contains('_')
        || !h.contains(|c: char| c.is_ascii_digit() || c == '-' || c == '.')
    {
        return None;
    }
    // A counter line (`rx_bytes: 12`) or a key (`Speed: 10`) is no
    // prefix: the rest must be more than one number.
    let r = rest.trim();
    if r.parse::<u64>().is_ok() {
        return None;
    }
    Some((h, rest))
}

/// The host a file path names: its stem without snapshot markers, or
/// the folder above when the stem is only a tool's name or a marker
/// (`node1.txt` -> `node1`, `node2/ethtool_before.txt` -> `node2`,
/// `before.txt` -> none).
pub fn host_of_path(path: &str) -> Option<String> {
    const TOOLS: [&str; 14] = [
        "ethtool",
        "dmesg",
        "lspci",
        "show_gids",
        "showgids",
        "gids",
        "counters",
        "stats",
        "nccl",
        "log",
        "ibv_devinfo",
        "devinfo",
        "topo",
        "kern",
    ];
    const MARKS: [&str; 14] = [
        "before", "after", "pre", "post", "start", "end", "begin", "snap", "snapshot", "t0", "t1",
        "first", "last", "s",
    ];
    let path = path.trim().trim_matches('"');
    let mut parts: Vec<&str> = path.split(['/', '\\']).filter(|p| !p.is_empty()).collect();
    let file = parts.pop()?;
    let stem = file.split('.').next().unwrap_or(file);
    let words: Vec<&str> = stem
        .split(['_', '-'])
        .filter(|w| {
            let lw = w.to_ascii_lowercase();
            let bare = lw.trim_end_matches(|c: char| c.is_ascii_digit());
            let marker =
                MARKS.contains(&lw.as_str()) || (MARKS.contains(&bare) && bare.len() < lw.len());
            let noise = w.is_empty() || TOOLS.contains(&lw.as_str()) || marker;
            !noise && !lw.chars().all(|c| c.is_ascii_digit())
        })
        .collect();
    if !words.is_empty() {
        return Some(words.join("-"));
    }
    parts
        .pop()
        .filter(|d| host_like(d) && !matches!(*d, "tmp" | "." | ".."))
        .map(str::to_string)
}

/// Make a pasted text plain (see the module docs).
pub fn normalise(input: &str) -> String {
    let raw: Vec<&str> = input.split('\n').collect();
    let last_nonempty = raw.iter().rposition(|l| !l.trim().is_empty());
    let first_nonempty = raw.iter().position(|l| !l.trim().is_empty());
    let mut lines: Vec<String> = Vec::with_capacity(raw.len());
    for (i, l) in raw.iter().enumerate() {
        // A line redrawn with `\r` shows its last drawing.
        let l = l.trim_end_matches('\r');
        let l = l.rsplit('\r').next().unwrap_or(l);
        let mut s = if l.contains('\u{1b}') || l.chars().any(|c| c.is_control() && c != '\t') {
            strip_controls(l)
        } else {
            l.to_string()
        };
        let tagged = strip_mpi_tag(&s);
        if tagged.len() != s.len() {
            s = tagged.to_string();
        }
        let t = s.trim();
        if t.starts_with("```") && !t[3..].contains('`') {
            lines.push(String::new());
            continue;
        }
        if Some(i) == first_nonempty && t.starts_with('`') && !t.starts_with("``") {
            s = s.replacen('`', "", 1);
        }
        if Some(i) == last_nonempty && s.trim_end().ends_with('`') && !s.trim_end().ends_with("``")
        {
            let cut = s.trim_end().len() - 1;
            s.truncate(cut);
        }
        if let Some(header) = s
            .trim()
            .strip_prefix("==>")
            .and_then(|r| r.strip_suffix("<=="))
        {
            if let Some(h) = host_of_path(header) {
                lines.push(format!("# host: {h}"));
                continue;
            }
        }
        match flattened_pairs(&s) {
            Some(pairs) if counter_pair(&s).is_none() => lines.extend(pairs),
            _ => lines.push(s),
        }
    }
    group_by_host(lines).join("\n")
}

/// Regroup parallel-shell output per host when most lines carry a
/// `host: ` prefix (see the module docs).
fn group_by_host(lines: Vec<String>) -> Vec<String> {
    let nonempty: Vec<&String> = lines.iter().filter(|l| !l.trim().is_empty()).collect();
    let mut count: Vec<(String, usize)> = Vec::new();
    let mut prefixed = 0;
    for l in &nonempty {
        if let Some((h, _)) = shell_prefix(l.trim_start()) {
            prefixed += 1;
            match count.iter_mut().find(|(x, _)| x == h) {
                Some(c) => c.1 += 1,
                None => count.push((h.to_string(), 1)),
            }
        }
    }
    // Most lines prefixed, every host on at least two lines (a field
    // name such as `Speed:` appears once per record, a host many times).
    if nonempty.len() < 2
        || prefixed * 2 <= nonempty.len()
        || count.iter().any(|(_, n)| *n < 2 && nonempty.len() > 2)
        || count.len() * 2 > prefixed
    {
        return lines;
    }
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    let mut loose: Vec<String> = Vec::new();
    for l in lines {
        match shell_prefix(l.trim_start()) {
            Some((h, rest)) if count.iter().any(|(x, _)| x == h) => {
                let rest = rest.to_string();
                match groups.iter_mut().find(|(x, _)| x == h) {
                    Some(g) => g.1.push(rest),
                    None => groups.push((h.to_string(), vec![rest])),
                }
            }
            // Blank lines carry nothing once the lines are regrouped.
            _ if l.trim().is_empty() => {}
            _ => loose.push(l),
        }
    }
    let mut out = loose;
    for (h, ls) in groups {
        out.push(format!("# host: {h}"));
        out.extend(ls);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_give_host_and_command() {
        let p = prompt("user@gpu-node3:~$ sudo ethtool -S eth0").unwrap();
        assert_eq!(p.host, Some("gpu-node3"));
        assert_eq!(p.command, "sudo ethtool -S eth0");
        let p = prompt("[root@node01 ~]# dmesg | grep mlx5").unwrap();
        assert_eq!(p.host, Some("node01"));
        assert_eq!(p.command, "dmesg | grep mlx5");
        let p = prompt("root@sonic-10432:/home/admin# show pfcwd stats").unwrap();
        assert_eq!(p.host, Some("sonic-10432"));
        assert_eq!(
            prompt("➜  ~ sudo lspci -vv").unwrap().command,
            "sudo lspci -vv"
        );
        assert_eq!(prompt("$ show_gids").unwrap().command, "show_gids");
        assert!(prompt("rx_prio3_pause: 12").is_none());
        assert!(prompt("# host: n1").is_none());
    }

    #[test]
    fn escapes_tags_fences_and_cr_go() {
        let s = "```\r\n\u{1b}[1;32m[1,0]<stdout>:#  size\u{1b}[0m\r\n```";
        assert_eq!(normalise(s), "\n#  size\n");
    }

    #[test]
    fn pdsh_prefixes_group_per_host() {
        let s = "n1: a 1 x\nn2: a 2 x\nn1: b 3 x\nn2: b 4 x";
        assert_eq!(
            normalise(s),
            "# host: n1\na 1 x\nb 3 x\n# host: n2\na 2 x\nb 4 x"
        );
        // Counter lines are not host prefixes.
        let c = "rx_bytes: 1\ntx_bytes: 2\nrx_pause: 3";
        assert_eq!(normalise(c), c);
    }

    #[test]
    fn flattened_counter_lists_are_split() {
        let s = "# ethtool -S e0 | grep prio a_x: 1 b_x: 2 c_x: 3 d_x: 4";
        assert_eq!(
            normalise(s),
            "# ethtool -S e0 | grep prio\na_x: 1\nb_x: 2\nc_x: 3\nd_x: 4"
        );
    }

    #[test]
    fn paths_name_hosts() {
        assert_eq!(host_of_path("node1.txt").as_deref(), Some("node1"));
        assert_eq!(
            host_of_path("node2/ethtool_before.txt").as_deref(),
            Some("node2")
        );
        assert_eq!(host_of_path("before.txt"), None);
        assert_eq!(host_of_path("snap1.txt"), None);
    }
}
