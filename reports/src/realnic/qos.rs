//! `mlnx_qos -i <netdev>` (trust mode, dscp2prio, PFC bits, buffers, TCs)
//! and `show_gids` (GID table with RoCE versions).
//!
//! Never panics; each parser errors when its landmark lines are missing.

use std::collections::BTreeMap;

use serde::Serialize;

use super::text::{lines, ParseError};

/// One traffic class of `mlnx_qos`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TrafficClass {
    /// TC number.
    pub tc: u8,
    /// `ratelimit:` as printed (`unlimited`, `25.0 Gbps`).
    pub ratelimit: Option<String>,
    /// `tsa:` (`ets`, `strict`, `vendor`).
    pub tsa: Option<String>,
    /// ETS bandwidth share in percent.
    pub bw_percent: Option<u8>,
    /// Priorities mapped to this TC.
    pub priorities: Vec<u8>,
}

/// `mlnx_qos -i` output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct QosConfig {
    /// `DCBX mode`.
    pub dcbx: Option<String>,
    /// `Priority trust state` (`pcp` / `dscp`).
    pub trust: Option<String>,
    /// DSCP -> priority.
    pub dscp2prio: BTreeMap<u8, u8>,
    /// Receive buffer sizes in bytes.
    pub buffer_bytes: Vec<u64>,
    /// `Cable len`.
    pub cable_len: Option<u32>,
    /// PFC enabled per priority 0..7.
    pub pfc_enabled: Option<[bool; 8]>,
    /// Receive buffer per priority 0..7.
    pub prio_buffer: Option<[u8; 8]>,
    /// Traffic classes.
    pub tcs: Vec<TrafficClass>,
}

impl QosConfig {
    /// Priorities with PFC enabled.
    pub fn pfc_priorities(&self) -> Vec<u8> {
        self.pfc_enabled
            .map(|e| (0u8..8).filter(|&p| e[p as usize]).collect())
            .unwrap_or_default()
    }

    /// The priority a GRH traffic class byte lands on: DSCP = tc >> 2, then
    /// the dscp2prio map when trusting DSCP (default `dscp >> 3`).
    pub fn prio_of_tclass(&self, tc: u8) -> u8 {
        let dscp = tc >> 2;
        self.dscp2prio.get(&dscp).copied().unwrap_or(dscp >> 3)
    }
}

fn row8(toks: &[&str]) -> Option<[u8; 8]> {
    let vals: Vec<u8> = toks.iter().filter_map(|t| t.parse().ok()).collect();
    if vals.len() != 8 || toks.len() != 8 {
        return None;
    }
    let mut a = [0u8; 8];
    a.copy_from_slice(&vals);
    Some(a)
}

/// Parse `mlnx_qos -i` output.
pub fn parse_mlnx_qos(input: &str) -> Result<QosConfig, ParseError> {
    let all = lines(input);
    let mut q = QosConfig::default();
    let mut landmark = false;
    for l in &all {
        let t = l.text.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(v) = t.strip_prefix("DCBX mode:") {
            q.dcbx = Some(v.trim().to_string());
            landmark = true;
        } else if let Some(v) = t.strip_prefix("Priority trust state:") {
            q.trust = Some(v.trim().to_string());
            landmark = true;
        } else if let Some(rest) = t.strip_prefix("prio:") {
            // prio:3 dscp:31,30,29,28,27,26,25,24,
            let mut parts = rest.split_whitespace();
            let prio: Option<u8> = parts.next().and_then(|p| p.parse().ok());
            if let (Some(prio), Some(d)) =
                (prio, parts.next().and_then(|d| d.strip_prefix("dscp:")))
            {
                for x in d.split(',').filter_map(|x| x.trim().parse::<u8>().ok()) {
                    q.dscp2prio.insert(x, prio);
                }
            }
        } else if let Some(v) = t.strip_prefix("Receive buffer size (bytes):") {
            q.buffer_bytes = v
                .split(',')
                .filter(|x| !x.contains('='))
                .filter_map(|x| x.trim().parse().ok())
                .collect();
        } else if let Some(v) = t.strip_prefix("Cable len:") {
            q.cable_len = v.trim().parse().ok();
        } else if t.starts_with("PFC configuration") {
            landmark = true;
        } else if let Some(rest) = t.strip_prefix("enabled") {
            let toks: Vec<&str> = rest.split_whitespace().collect();
            if let Some(r) = row8(&toks) {
                q.pfc_enabled = Some(r.map(|x| x != 0));
            } else {
                return Err(ParseError::new(
                    l.number,
                    "8 PFC enabled bits (0 or 1) after `enabled`",
                    l.text,
                ));
            }
        } else if let Some(rest) = t.strip_prefix("buffer") {
            let toks: Vec<&str> = rest.split_whitespace().collect();
            q.prio_buffer = row8(&toks);
        } else if let Some(rest) = t.strip_prefix("tc:") {
            // tc: 3 ratelimit: unlimited, tsa: ets, bw: 13%
            let mut tc = TrafficClass::default();
            let mut parts = rest.split(',');
            let first = parts.next().unwrap_or("");
            let mut ft = first.split_whitespace();
            tc.tc = ft.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            if ft.next() == Some("ratelimit:") {
                let r: Vec<&str> = ft.collect();
                tc.ratelimit = Some(r.join(" "));
            }
            for p in parts {
                let p = p.trim();
                if let Some(v) = p.strip_prefix("tsa:") {
                    tc.tsa = Some(v.trim().to_string());
                } else if let Some(v) = p.strip_prefix("bw:") {
                    tc.bw_percent = v.trim().trim_end_matches('%').parse().ok();
                }
            }
            q.tcs.push(tc);
        } else if let Some(v) = t.strip_prefix("priority:") {
            if let (Some(tc), Ok(p)) = (q.tcs.last_mut(), v.trim().parse::<u8>()) {
                tc.priorities.push(p);
            }
        }
    }
    if !landmark {
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "`DCBX mode:`, `Priority trust state:` or `PFC configuration:`",
            first.map_or("", |l| l.text),
        ));
    }
    Ok(q)
}

/// One `show_gids` row.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct GidEntry {
    /// Line number.
    pub line: usize,
    /// The host the row came from, when the file says: a `pdsh`/`clush`
    /// `host: ` line prefix, a `==> host <==` header (`tail`/`head` of
    /// several files), a `host: NAME` / `# host: NAME` line, or the prompt
    /// or `ssh HOST` of a `show_gids` command line.
    pub host: Option<String>,
    /// RDMA device.
    pub device: String,
    /// Port.
    pub port: u32,
    /// GID index (what `-x` / `NCCL_IB_GID_INDEX` take).
    pub index: u32,
    /// GID text.
    pub gid: String,
    /// IPv4 address for IPv4-mapped GIDs.
    pub ipv4: Option<String>,
    /// RoCE version (`v1` / `v2`).
    pub version: String,
    /// Netdev.
    pub netdev: Option<String>,
}

impl GidEntry {
    /// The routable RoCEv2 IPv4 entry (what RoCE traffic should use).
    pub fn is_rocev2_ipv4(&self) -> bool {
        self.version.eq_ignore_ascii_case("v2") && self.ipv4.is_some()
    }
}

fn host_token(h: &str) -> Option<String> {
    let h = h.trim();
    (!h.is_empty()
        && h.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '/')))
    .then(|| h.to_string())
}

/// The host named by a header line of a multi-host `show_gids` file.
fn host_header(t: &str) -> Option<String> {
    if let Some(inner) = t.strip_prefix("==>").and_then(|r| r.strip_suffix("<==")) {
        return host_token(inner);
    }
    let bare = t.trim_start_matches('#').trim();
    for key in [
        "host:",
        "Host:",
        "HOST:",
        "hostname:",
        "Hostname:",
        "host =",
    ] {
        if let Some(v) = bare.strip_prefix(key) {
            if v.split_whitespace().count() == 1 {
                return host_token(v);
            }
        }
    }
    if let Some(pos) = t.find("show_gids") {
        let cmd = &t[..pos];
        // `ssh [user@]host show_gids`
        if let Some(rest) = cmd.split("ssh ").nth(1) {
            let target = rest.split_whitespace().last()?;
            return host_token(target.rsplit('@').next().unwrap_or(target));
        }
        // `user@host:~$ show_gids`, `[root@host ~]# show_gids`
        let at = cmd.find('@')?;
        let h: String = cmd[at + 1..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
            .collect();
        return host_token(&h);
    }
    None
}

/// `host: rest` (pdsh/clush prefix) when `rest` is show_gids output.
fn host_prefix(t: &str) -> Option<(String, &str)> {
    let (h, rest) = t.split_once(':')?;
    if h.contains(char::is_whitespace) {
        return None;
    }
    let rest = rest.trim();
    let toks: Vec<&str> = rest.split_whitespace().collect();
    let is_gids = rest.starts_with("n_gids_found")
        || toks.first() == Some(&"DEV")
        || rest.starts_with("---")
        || (toks.len() >= 5 && toks[1].parse::<u32>().is_ok() && toks[3].contains(':'));
    if !is_gids {
        return None;
    }
    Some((host_token(h)?, rest))
}

/// Parse `show_gids` output, of one host or several (see
/// [`GidEntry::host`]).
pub fn parse_show_gids(input: &str) -> Result<Vec<GidEntry>, ParseError> {
    let all = lines(input);
    let mut out = Vec::new();
    let mut header = false;
    let mut host: Option<String> = None;
    for l in &all {
        let mut t = l.text.trim();
        let mut line_host = None;
        if let Some((h, rest)) = host_prefix(t) {
            line_host = Some(h);
            t = rest;
        } else if let Some(h) = host_header(t) {
            host = Some(h);
            continue;
        }
        if t.is_empty() || t.starts_with("---") || t.starts_with("n_gids_found") {
            if t.starts_with("n_gids_found") {
                header = true;
            }
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        if toks.first() == Some(&"DEV") {
            header = true;
            continue;
        }
        // DEV PORT INDEX GID [IPv4] VER [NETDEV]
        if toks.len() < 5 {
            continue;
        }
        let (Ok(port), Ok(index)) = (toks[1].parse(), toks[2].parse()) else {
            continue;
        };
        if !toks[3].contains(':') {
            continue;
        }
        let ver_pos = toks.iter().skip(4).position(|x| *x == "v1" || *x == "v2");
        let Some(vp) = ver_pos.map(|p| p + 4) else {
            return Err(ParseError::new(l.number, "a `v1` or `v2` column", l.text));
        };
        out.push(GidEntry {
            line: l.number,
            host: line_host.or_else(|| host.clone()),
            device: toks[0].to_string(),
            port,
            index,
            gid: toks[3].to_string(),
            ipv4: (vp > 4).then(|| toks[4].to_string()),
            version: toks[vp].to_string(),
            netdev: toks.get(vp + 1).map(|s| s.to_string()),
        });
    }
    if out.is_empty() && !header {
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "a `DEV PORT INDEX GID IPv4 VER DEV` table",
            first.map_or("", |l| l.text),
        ));
    }
    Ok(out)
}
