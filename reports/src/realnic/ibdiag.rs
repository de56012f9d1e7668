//! InfiniBand diagnostics and device configuration tools whose output is
//! device/port state: `ibstatus`, `ibportstate`, `iblinkinfo` (default and
//! `--line` forms), `rdma link show` / `rdma dev show` and
//! `mlxconfig ... query` (also `mstconfig`). Each parser returns
//! [`HcaInfo`] records (the doctor's device view) with
//! [`HcaInfo::tool`] naming the tool; [`super::devinfo::parse`] runs them
//! all, so a file holding several tools' output keeps every part.
//!
//! # Accepted forms
//!
//! ```text
//! Infiniband device 'mlx5_0' port 1 status:          ibstatus
//!         state:           4: ACTIVE
//!         rate:            100 Gb/sec (4X EDR)
//! # Port info: Lid 2 port 24                          ibportstate
//! LinkWidthActive:.................4X
//! LinkSpeedActive:.................2.5 Gbps
//! Switch: 0x506b4b0300820910 MF0;SB7700:MSB7700/U1:   iblinkinfo
//!            2   17[  ] ==( 4X      25.78125 Gbps Active/  LinkUp)==>       4    1[  ] "n02 HCA-1" ( )
//! link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev p1p1       rdma link show
//! 0: mlx5_0: node_type ca fw 20.31.1014 node_guid 1070:fd03:00e5:f1e6  rdma dev show
//! Device type:    ConnectX6                           mlxconfig -d DEV query
//! Configurations:          Default      Current      Next Boot
//! *        SRIOV_EN        False(0)     True(1)      True(1)
//! ```
//!
//! Units: per-lane speeds in bit/s (`25.78125 Gbps` is 25 781 250 000),
//! rates in bit/s (`100 Gb/sec`; width x lane speed where only those are
//! printed). LIDs, GUIDs, GIDs, peers, netdevs and every other printed
//! attribute are kept as printed in `attributes`. Nothing here panics on
//! any input; a parser returns no records when its landmarks are absent.

use std::collections::BTreeMap;

use super::hca::{first_word, lanes, ConfigParam, HcaInfo, PortInfo};
use super::text::{chunks, lines, scaled_decimal};

/// Index in `out` of the device `name` printed by `tool`, created at `line`
/// if new.
fn device(out: &mut Vec<HcaInfo>, tool: &str, name: &str, line: usize) -> usize {
    if let Some(i) = out.iter().position(|d| d.tool == tool && d.name == name) {
        return i;
    }
    out.push(HcaInfo {
        line,
        tool: tool.to_string(),
        name: name.to_string(),
        ..HcaInfo::default()
    });
    out.len() - 1
}

/// `4: ACTIVE` -> `ACTIVE`; `5: LinkUp` -> `LinkUp`.
fn state_word(v: &str) -> String {
    let v = v.trim();
    match v.split_once(':') {
        Some((n, rest)) if n.trim().bytes().all(|b| b.is_ascii_digit()) => first_word(rest),
        _ => first_word(v),
    }
}

/// Parse `ibstatus` output: one block per device port.
pub fn parse_ibstatus(input: &str) -> Vec<HcaInfo> {
    let mut out: Vec<HcaInfo> = Vec::new();
    // (device index, port index) of the current block.
    let mut cur: Option<(usize, usize)> = None;
    for l in lines(input) {
        let t = l.text.trim();
        if let Some(rest) = t.strip_prefix("Infiniband device '") {
            cur = None;
            let Some((dev, tail)) = rest.split_once('\'') else {
                continue;
            };
            let Some(port) = tail
                .trim()
                .strip_prefix("port")
                .and_then(|p| p.split_whitespace().next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let di = device(&mut out, "ibstatus", dev, l.number);
            out[di].ports.push(PortInfo {
                port,
                ..PortInfo::default()
            });
            cur = Some((di, out[di].ports.len() - 1));
            continue;
        }
        let Some((di, pi)) = cur else { continue };
        if t.is_empty() {
            cur = None;
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            cur = None;
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let Some(p) = out.get_mut(di).and_then(|d| d.ports.get_mut(pi)) else {
            continue;
        };
        if !k.is_empty() && !v.is_empty() {
            p.attributes.insert(k.to_string(), v.to_string());
        }
        match k {
            "state" => p.state = Some(state_word(v)),
            "phys state" => p.phys_state = Some(state_word(v)),
            "link_layer" => p.link_layer = Some(first_word(v)),
            "rate" => {
                // `100 Gb/sec (4X EDR)`, `10 Gb/sec (4X)`, `25 Gb/sec (1X EDR)`
                let mut it = v.split_whitespace();
                let num = it.next().unwrap_or("");
                let unit = it.next().unwrap_or("Gb/sec");
                let mult: u128 = if unit.starts_with("Mb") {
                    1_000_000
                } else {
                    1_000_000_000
                };
                p.rate_bps = scaled_decimal(num, mult, 1);
                if let Some(inner) = v.split_once('(').map(|(_, r)| r.trim_end_matches(')')) {
                    p.width_lanes = lanes(inner);
                }
            }
            _ => {}
        }
    }
    out
}

/// `1X or 4X` / `4X (IBA extension)` -> the widest.
fn widest(v: &str) -> Option<u32> {
    v.split_whitespace()
        .filter_map(|w| w.strip_suffix(['X', 'x'])?.parse::<u32>().ok())
        .max()
}

/// `2.5 Gbps or 5.0 Gbps or 10.0 Gbps` -> the fastest, bit/s.
fn fastest(v: &str) -> Option<u64> {
    let w: Vec<&str> = v.split_whitespace().collect();
    w.windows(2)
        .filter(|p| p[1].starts_with("Gbps"))
        .filter_map(|p| scaled_decimal(p[0], 1_000_000_000, 1))
        .max()
}

/// Parse `ibportstate` output (`# Port info:` blocks of dotted
/// `Key:....value` lines; `Peer PortInfo:` marks the peer's block).
pub fn parse_ibportstate(input: &str) -> Vec<HcaInfo> {
    let mut out: Vec<HcaInfo> = Vec::new();
    let mut cur: Option<(usize, usize)> = None;
    let mut peer_next = false;
    let mut last_local: Option<String> = None;
    // Last `# Port info:` address, for the peer link.
    for l in lines(input) {
        let t = l.text.trim();
        if t == "Peer PortInfo:" {
            peer_next = true;
            cur = None;
            continue;
        }
        if t == "PortInfo:" {
            peer_next = false;
            cur = None;
            continue;
        }
        if let Some(rest) = t.strip_prefix("# Port info:") {
            // `Lid 2 port 24`, `Lid 2 DR path slid 65535; dlid 65535; 0,8 port 2`
            let rest = rest.trim();
            let (addr, port) = match rest.rsplit_once(" port ") {
                Some((a, p)) => (a.trim(), p.trim().parse::<u32>().ok()),
                None => (rest, None),
            };
            let port = port.unwrap_or(0);
            let di = device(&mut out, "ibportstate", addr, l.number);
            let mut p = PortInfo {
                port,
                ..PortInfo::default()
            };
            if peer_next {
                if let Some(local) = &last_local {
                    p.attributes.insert("peer of".into(), local.clone());
                }
            } else {
                last_local = Some(format!("{addr} port {port}"));
            }
            out[di].ports.push(p);
            cur = Some((di, out[di].ports.len() - 1));
            peer_next = false;
            continue;
        }
        let Some((k, v)) = t.split_once(':') else {
            continue;
        };
        let Some(v) = v.strip_prefix("..") else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim_start_matches('.').trim());
        if k.is_empty() || k.contains(' ') {
            continue;
        }
        if cur.is_none() {
            // A block without its `# Port info:` header (an excerpt).
            let di = device(&mut out, "ibportstate", "", l.number);
            out[di].ports.push(PortInfo::default());
            cur = Some((di, out[di].ports.len() - 1));
        }
        let Some((di, pi)) = cur else { continue };
        let Some(p) = out.get_mut(di).and_then(|d| d.ports.get_mut(pi)) else {
            continue;
        };
        if !v.is_empty() {
            p.attributes.insert(k.to_string(), v.to_string());
        }
        match k {
            "LinkState" => p.state = Some(first_word(v)),
            "PhysLinkState" => p.phys_state = Some(first_word(v)),
            "LinkWidthActive" => p.width_lanes = lanes(v),
            "LinkWidthSupported" => p.max_width_lanes = widest(v),
            "LinkSpeedActive" | "LinkSpeedExtActive" => {
                if let Some(s) = fastest(v) {
                    // The extended speed, when in use, is the real one.
                    if k == "LinkSpeedExtActive" || p.lane_bps.is_none() {
                        p.lane_bps = Some(s);
                    }
                }
            }
            "LinkSpeedSupported" | "LinkSpeedExtSupported" => {
                if let Some(s) = fastest(v) {
                    p.max_lane_bps = Some(p.max_lane_bps.map_or(s, |m| m.max(s)));
                }
            }
            "LocalPort" | "PortSelect" if p.port == 0 => {
                p.port = v.parse().unwrap_or(0);
            }
            _ => {}
        }
    }
    // Dotted blocks of other tools (perfquery counters) carry no port state.
    for d in &mut out {
        d.ports.retain(|p| {
            p.state.is_some()
                || p.phys_state.is_some()
                || p.width_lanes.is_some()
                || p.lane_bps.is_some()
        });
        for p in &mut d.ports {
            if p.width_lanes.is_some() || p.lane_bps.is_some() {
                p.link_layer.get_or_insert_with(|| "InfiniBand".into());
            }
        }
    }
    out.retain(|d| !d.ports.is_empty());
    out
}

/// The `LID PORT[..]` (or `GUID LID PORT[..]`) end of one side of an
/// `iblinkinfo` link, and the quoted node name when printed before it.
struct End {
    guid: Option<String>,
    name: Option<String>,
    lid: Option<String>,
    port: Option<u32>,
}

fn link_end(s: &str) -> End {
    let mut e = End {
        guid: None,
        name: None,
        lid: None,
        port: None,
    };
    // The quoted node name comes before the LID/port (`--line`, local
    // side) or after it (remote side).
    let mut num_part = s;
    if let (Some(a), Some(b)) = (s.find('"'), s.rfind('"')) {
        if b > a {
            e.name = Some(s[a + 1..b].trim().to_string());
            let (head, tail) = (&s[..a], &s[b + 1..]);
            num_part = if tail.contains('[') { tail } else { head };
            if let Some(g) = head
                .split_whitespace()
                .next()
                .filter(|g| g.starts_with("0x"))
            {
                e.guid = Some(g.to_string());
            }
        }
    }
    let before = num_part.rsplit_once('[').map_or(num_part, |(b, _)| b);
    let toks: Vec<&str> = before.split_whitespace().collect();
    let n = toks.len();
    if n >= 1 {
        e.port = toks[n - 1].parse().ok();
    }
    if n >= 2 {
        e.lid = Some(toks[n - 2].to_string());
    }
    if n >= 3 && toks[n - 3].starts_with("0x") {
        e.guid = Some(toks[n - 3].to_string());
    }
    e
}

/// Parse `iblinkinfo` output, default (node headers `CA: NAME:` /
/// `Switch: GUID NAME:`) or `--line` form.
pub fn parse_iblinkinfo(input: &str) -> Vec<HcaInfo> {
    let mut out: Vec<HcaInfo> = Vec::new();
    // Current node: (type, guid, name).
    let mut node: Option<(String, Option<String>, String)> = None;
    for l in lines(input) {
        let t = l.text.trim();
        for kind in ["CA", "Switch", "Router"] {
            if let Some(rest) = t
                .strip_prefix(kind)
                .and_then(|r| r.strip_prefix(": "))
                .filter(|_| !t.contains("==("))
            {
                let rest = rest.trim().trim_end_matches(':').trim();
                let (guid, name) = match rest.split_once(' ') {
                    Some((g, n)) if g.starts_with("0x") => (Some(g.to_string()), n.trim()),
                    _ => (None, rest),
                };
                node = Some((kind.to_string(), guid, name.to_string()));
            }
        }
        let (Some(open), Some(close)) = (t.find("==("), t.find(")==>")) else {
            continue;
        };
        if close < open {
            continue;
        }
        let local = link_end(&t[..open]);
        let mid = &t[open + 3..close];
        let remote_text = &t[close + 4..];
        // Remote: everything up to the quoted name's closing quote.
        let (remote_end, hint) = match (remote_text.find('"'), remote_text.rfind('"')) {
            (Some(a), Some(b)) if b > a => (&remote_text[..=b], remote_text[b + 1..].trim()),
            _ => (remote_text, ""),
        };
        let remote = link_end(remote_end);
        let (node_kind, node_guid, name) = match (&local.name, &node) {
            (Some(n), _) => ("".to_string(), local.guid.clone(), n.clone()),
            (None, Some((k, g, n))) => (k.clone(), g.clone(), n.clone()),
            (None, None) => (String::new(), None, String::new()),
        };
        let di = device(&mut out, "iblinkinfo", &name, l.number);
        let d = &mut out[di];
        if !node_kind.is_empty() {
            d.attributes
                .entry("node type".into())
                .or_insert(node_kind.clone());
        }
        if let Some(g) = node_guid.filter(|_| node_kind == "Switch" || local.name.is_some()) {
            d.attributes.entry("node guid".into()).or_insert(g);
        }
        let mut p = PortInfo {
            port: local.port.unwrap_or(0),
            link_layer: Some("InfiniBand".into()),
            ..PortInfo::default()
        };
        if let Some(g) = local.guid.as_ref().filter(|_| local.name.is_none()) {
            p.attributes.insert("port guid".into(), g.clone());
        }
        if let Some(lid) = &local.lid {
            p.attributes.insert("lid".into(), lid.clone());
        }
        // `4X      25.78125 Gbps Active/  LinkUp`, `4X 10.0 Gbps (FDR10) Active/ LinkUp`,
        // `Down/ Polling`
        let (left, phys) = mid.rsplit_once('/').unwrap_or((mid, ""));
        let lw: Vec<&str> = left.split_whitespace().collect();
        if let Some(state) = lw.last() {
            p.state = Some(state.to_string());
        }
        let phys = phys.trim();
        if !phys.is_empty() {
            p.phys_state = Some(first_word(phys));
        }
        p.width_lanes = lw.first().and_then(|w| lanes(w));
        p.lane_bps = fastest(left);
        if let Some(enc) = lw.iter().find(|w| w.starts_with('(') && w.ends_with(')')) {
            p.attributes.insert(
                "speed name".into(),
                enc.trim_matches(['(', ')']).to_string(),
            );
        }
        if let Some(g) = &remote.guid {
            p.attributes.insert("peer guid".into(), g.clone());
        }
        if let Some(lid) = &remote.lid {
            p.attributes.insert("peer lid".into(), lid.clone());
        }
        if let Some(port) = remote.port {
            p.attributes.insert("peer port".into(), port.to_string());
        }
        if let Some(n) = remote.name.as_ref().filter(|n| !n.is_empty()) {
            p.attributes.insert("peer".into(), n.clone());
        }
        // `(Could be 12X Could be 10.0 Gbps)`: what the link could run at.
        let hint = hint.trim_matches(['(', ')', ' ']);
        if !hint.is_empty() {
            p.attributes.insert("hint".into(), hint.to_string());
            p.max_width_lanes = widest(hint).filter(|w| p.width_lanes.map_or(true, |a| *w > a));
            p.max_lane_bps = fastest(hint).filter(|s| p.lane_bps.map_or(true, |a| *s > a));
        }
        d.ports.push(p);
    }
    out
}

/// Words of `rdma link show` lines that are flags, not `key value` pairs.
const RDMA_LINK_KEYS: &[&str] = &[
    "state",
    "physical_state",
    "netdev",
    "netdev_index",
    "subnet_prefix",
    "lid",
    "sm_lid",
    "lmc",
];

/// Whether a line is `rdma link show` output (not `rdma statistic`).
pub fn is_rdma_link_line(t: &str) -> bool {
    let mut w = t.split_whitespace();
    w.next() == Some("link")
        && w.next().is_some_and(|d| d.contains('/'))
        && w.next().is_some_and(|k| RDMA_LINK_KEYS.contains(&k))
}

/// Parse `rdma link show` (`link DEV/PORT state S physical_state P
/// netdev N ...`) and `rdma dev show` (`N: DEV: node_type ca fw V ...`).
pub fn parse_rdma_link(input: &str) -> Vec<HcaInfo> {
    let mut out: Vec<HcaInfo> = Vec::new();
    for l in lines(input) {
        let t = l.text.trim();
        if is_rdma_link_line(t) {
            let mut w = t.split_whitespace().skip(1);
            let Some((dev, port)) = w.next().and_then(|x| x.split_once('/')) else {
                continue;
            };
            let Ok(port) = port.parse::<u32>() else {
                continue;
            };
            let mut p = PortInfo {
                port,
                ..PortInfo::default()
            };
            let rest: Vec<&str> = w.collect();
            let mut i = 0;
            while i < rest.len() {
                let k = rest[i];
                let v = rest.get(i + 1).copied().unwrap_or("");
                p.attributes.insert(k.to_string(), v.to_string());
                match k {
                    "state" => p.state = Some(v.to_string()),
                    "physical_state" => p.phys_state = Some(v.to_string()),
                    _ => {}
                }
                i += 2;
            }
            let di = device(&mut out, "rdma link", dev, l.number);
            out[di].ports.push(p);
            continue;
        }
        // `0: mlx5_0: node_type ca fw 20.31.1014 node_guid ... sys_image_guid ...`
        let mut w = t.split_whitespace();
        let (Some(idx), Some(dev)) = (w.next(), w.next()) else {
            continue;
        };
        let Some(dev) = dev.strip_suffix(':') else {
            continue;
        };
        if !idx
            .strip_suffix(':')
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        let rest: Vec<&str> = w.collect();
        if rest.first() != Some(&"node_type") {
            continue;
        }
        let di = device(&mut out, "rdma dev", dev, l.number);
        let d = &mut out[di];
        let mut i = 0;
        while i < rest.len() {
            let k = rest[i];
            let v = rest.get(i + 1).copied().unwrap_or("");
            d.attributes.insert(k.to_string(), v.to_string());
            if k == "fw" {
                d.fw_ver = Some(v.to_string());
            }
            i += 2;
        }
    }
    out
}

/// A `mlxconfig`/`mstconfig` query command line (after any prompt): the
/// `-d` device when given.
fn mlxconfig_command(t: &str) -> Option<Option<String>> {
    let w: Vec<&str> = t.split_whitespace().collect();
    let at = w
        .iter()
        .position(|x| matches!(x.rsplit('/').next(), Some("mlxconfig" | "mstconfig")))?;
    let args = &w[at + 1..];
    if !args.iter().any(|a| matches!(*a, "q" | "query")) {
        return None;
    }
    let dev = args
        .iter()
        .position(|a| *a == "-d" || *a == "--dev")
        .and_then(|i| args.get(i + 1))
        .map(|d| d.to_string());
    Some(dev)
}

/// Parse `mlxconfig -d DEV query` / `mstconfig -d DEV q` output: the device
/// header (`Device type:`, `Name:`, `Description:`, `Device:`) and every
/// parameter with its value per printed column.
pub fn parse_mlxconfig(input: &str) -> Vec<HcaInfo> {
    let mut out: Vec<HcaInfo> = Vec::new();
    let mut cur: Option<usize> = None;
    let mut columns: Vec<String> = Vec::new();
    let mut in_config = false;
    for l in lines(input) {
        let t = l.text.trim();
        if t.starts_with("Device #") && t.ends_with(':') {
            out.push(HcaInfo {
                line: l.number,
                tool: "mlxconfig".into(),
                ..HcaInfo::default()
            });
            cur = Some(out.len() - 1);
            in_config = false;
            columns.clear();
            continue;
        }
        // `mlxconfig -d DEV q | grep ...`: the parameter rows without their
        // header, in the single `Next Boot` column a plain query prints.
        if let Some(dev) = mlxconfig_command(t) {
            out.push(HcaInfo {
                line: l.number,
                tool: "mlxconfig".into(),
                name: dev.unwrap_or_default(),
                ..HcaInfo::default()
            });
            cur = Some(out.len() - 1);
            columns = vec!["Next Boot".to_string()];
            in_config = true;
            continue;
        }
        if let Some(rest) = t.strip_prefix("Configurations:") {
            if cur.is_none() {
                out.push(HcaInfo {
                    line: l.number,
                    tool: "mlxconfig".into(),
                    ..HcaInfo::default()
                });
                cur = Some(out.len() - 1);
            }
            columns = chunks(rest).into_iter().map(str::to_string).collect();
            in_config = true;
            continue;
        }
        let Some(d) = cur.and_then(|i| out.get_mut(i)) else {
            continue;
        };
        if !in_config {
            if let Some((k, v)) = t.split_once(':') {
                let (k, v) = (k.trim(), v.trim());
                if matches!(
                    k,
                    "Device type" | "Name" | "Description" | "Device" | "PSID" | "FW Version"
                ) && !v.is_empty()
                {
                    d.attributes.insert(k.to_string(), v.to_string());
                    if k == "Device" {
                        d.name = v.to_string();
                    }
                    if k == "FW Version" {
                        d.fw_ver = Some(v.to_string());
                    }
                }
            }
            continue;
        }
        // A parameter row: `[*] NAME value [value ...]`.
        let (modified, body) = match t.strip_prefix('*') {
            Some(b) => (true, b.trim()),
            None => (false, t),
        };
        let mut w = body.split_whitespace();
        let Some(name) = w.next() else {
            continue;
        };
        // `SRIOV_EN`, `MODULE_SPLIT_M0[0..15]` (an array element query).
        let is_param = name.len() > 1
            && name.bytes().all(|b| {
                b.is_ascii_uppercase()
                    || b.is_ascii_digit()
                    || matches!(b, b'_' | b'[' | b']' | b'.')
            })
            && name.bytes().next().is_some_and(|b| b.is_ascii_uppercase());
        if !is_param {
            if !t.is_empty() && !t.starts_with('-') {
                in_config = false;
            }
            continue;
        }
        let vals: Vec<&str> = w.collect();
        let mut values = BTreeMap::new();
        if vals.len() == columns.len() {
            for (c, v) in columns.iter().zip(&vals) {
                values.insert(c.clone(), (*v).to_string());
            }
        } else if !vals.is_empty() {
            let key = columns.first().cloned().unwrap_or_else(|| "value".into());
            values.insert(key, vals.join(" "));
        }
        d.config.push(ConfigParam {
            name: name.to_string(),
            values,
            modified,
        });
    }
    out.retain(|d| !d.config.is_empty() || !d.attributes.is_empty());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widest_and_fastest_pick_the_maximum() {
        assert_eq!(widest("1X or 4X"), Some(4));
        assert_eq!(widest("4X (IBA extension)"), Some(4));
        assert_eq!(
            fastest("2.5 Gbps or 5.0 Gbps or 10.0 Gbps"),
            Some(10_000_000_000)
        );
        assert_eq!(fastest("Extended speed"), None);
    }

    #[test]
    fn link_end_reads_both_iblinkinfo_forms() {
        let e = link_end("      0xec0d9a03003d62be      4    1[  ] ");
        assert_eq!(e.guid.as_deref(), Some("0xec0d9a03003d62be"));
        assert_eq!(e.lid.as_deref(), Some("4"));
        assert_eq!(e.port, Some(1));
        let e = link_end("0xf452140300f55051 \"    ib-test-7 mlx4_0\"     37    1[  ] ");
        assert_eq!(e.name.as_deref(), Some("ib-test-7 mlx4_0"));
        assert_eq!(e.guid.as_deref(), Some("0xf452140300f55051"));
        assert_eq!(e.lid.as_deref(), Some("37"));
        assert_eq!(e.port, Some(1));
    }
}
