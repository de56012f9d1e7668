//! A switch's configuration as SONiC lists it: `mmuconfig -l` (also
//! `show buffer configuration`, `show mmu`: buffer pools and profiles)
//! and `ecnconfig -l` (also `show ecn`: WRED/ECN profiles), with the
//! `ECN status:` / `queue N: on|off` lines `ecnconfig -q N` prints.
//!
//! Both list blocks: a `Pool: NAME`, `Profile: NAME` (or `Pool for
//! namespace asicN: NAME`) title, then `key  value` rows, usually between
//! two dash rules. Values are kept as printed, with the numbers SONiC
//! gives in bytes (`size`, `xoff`, `xon`, `static_th`, thresholds) or as
//! the power of two of the dynamic threshold (`dynamic_th`: alpha is
//! 2^dynamic_th) read out; the speed (Mbit/s) and cable length of a
//! lossless profile named the SONiC way (`pg_lossless_<speed>_<cable>_profile`)
//! are read from its name. Old releases print pool references as
//! `[BUFFER_POOL|name]`: read as `name`.
//!
//! Never panics; each parser errors when no block or queue line is found.

use std::collections::BTreeMap;

use serde::Serialize;

use super::text::{lines, uint, ParseError};

/// One `Pool:` or `Profile:` block, as printed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Block {
    /// The pool's or profile's name.
    pub name: String,
    /// The namespace (`asic0`) of a multi-ASIC listing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The rows, `key -> value` as printed (pool references unwrapped).
    pub fields: BTreeMap<String, String>,
    /// 1-based line of the title.
    pub line: usize,
}

impl Block {
    /// A field as an unsigned integer (bytes for sizes and thresholds).
    pub fn uint(&self, key: &str) -> Option<u64> {
        self.fields.get(key).and_then(|v| uint(v))
    }

    /// A field as printed.
    pub fn text(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }
}

/// A buffer pool of `mmuconfig -l`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BufferPool {
    /// The block as printed.
    #[serde(flatten)]
    pub block: Block,
    /// `size` in bytes.
    pub size: Option<u64>,
    /// `xoff`: the shared headroom pool, bytes.
    pub xoff: Option<u64>,
}

/// A buffer profile of `mmuconfig -l`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct BufferProfile {
    /// The block as printed.
    #[serde(flatten)]
    pub block: Block,
    /// `dynamic_th`: the profile's share of the free pool is
    /// 2^dynamic_th.
    pub dynamic_th: Option<i32>,
    /// `static_th` in bytes.
    pub static_th: Option<u64>,
    /// `xoff`: PFC headroom in bytes (lossless profiles).
    pub xoff: Option<u64>,
    /// The port speed a `pg_lossless_<speed>_<cable>_profile` is for,
    /// Mbit/s.
    pub speed_mbps: Option<u64>,
    /// The cable length of such a profile, as named (`5m`, `300m`).
    pub cable: Option<String>,
}

impl BufferProfile {
    /// A lossless priority-group profile: named `pg_lossless_*`, or one
    /// with PFC headroom (`xoff`).
    pub fn is_lossless_pg(&self) -> bool {
        self.block.name.starts_with("pg_lossless") || self.xoff.is_some()
    }

    /// The pool the profile draws from.
    pub fn pool(&self) -> Option<&str> {
        self.block.text("pool")
    }
}

/// `mmuconfig -l` output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct MmuConfig {
    /// Buffer pools.
    pub pools: Vec<BufferPool>,
    /// Buffer profiles.
    pub profiles: Vec<BufferProfile>,
}

impl MmuConfig {
    /// The pool lossless traffic draws from: the pool the lossless
    /// profiles name, else the one called `ingress_lossless_pool`.
    pub fn lossless_pool(&self) -> Option<&BufferPool> {
        let named = self
            .profiles
            .iter()
            .filter(|p| p.is_lossless_pg())
            .find_map(|p| p.pool())
            .unwrap_or("ingress_lossless_pool");
        self.pools.iter().find(|p| p.block.name == named)
    }
}

/// A WRED/ECN profile of `ecnconfig -l`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct WredProfile {
    /// The block as printed.
    #[serde(flatten)]
    pub block: Block,
    /// `ecn`: `ecn_none`, `ecn_green`, `ecn_all`, ...
    pub ecn: Option<String>,
    /// `green_min_threshold` (Kmin) in bytes.
    pub green_min: Option<u64>,
    /// `green_max_threshold` (Kmax) in bytes.
    pub green_max: Option<u64>,
    /// `green_drop_probability` (Pmax) in percent.
    pub green_probability: Option<u64>,
    /// `wred_green_enable`.
    pub green_enabled: Option<bool>,
}

impl WredProfile {
    /// Whether the profile marks green (RoCE) packets: its `ecn` mode
    /// covers green and green WRED is not disabled.
    pub fn marks_green(&self) -> bool {
        let mode = self.ecn.as_deref().unwrap_or("ecn_none");
        let green = matches!(
            mode,
            "ecn_all" | "ecn_green" | "ecn_green_yellow" | "ecn_green_red"
        );
        green && self.green_enabled != Some(false)
    }
}

/// One `queue N: on|off` line of `ecnconfig -q N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct QueueEcn {
    /// Queue (priority) index.
    pub queue: u8,
    /// ECN (a WRED profile) on that queue.
    pub on: bool,
    /// 1-based line.
    pub line: usize,
}

/// `ecnconfig -l` (and `-q`) output.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EcnConfig {
    /// WRED profiles.
    pub profiles: Vec<WredProfile>,
    /// Queue states.
    pub queues: Vec<QueueEcn>,
}

/// `[BUFFER_POOL|name]` or `BUFFER_POOL|name` as `name`.
fn unwrap_ref(v: &str) -> String {
    let v = v.trim().trim_start_matches('[').trim_end_matches(']');
    v.rsplit_once('|').map_or(v, |(_, n)| n).to_string()
}

/// A block title: `(kind, namespace, name)` for `Pool: X`, `Profile: X`,
/// `Pool for namespace asic0: X`.
fn title(t: &str) -> Option<(&str, Option<&str>, &str)> {
    for kind in ["Pool", "Profile"] {
        let Some(rest) = t.strip_prefix(kind) else {
            continue;
        };
        if let Some(name) = rest.strip_prefix(": ") {
            return Some((kind, None, name.trim())).filter(|x| !x.2.is_empty());
        }
        if let Some(r) = rest.strip_prefix(" for namespace ") {
            let (ns, name) = r.split_once(": ")?;
            return Some((kind, Some(ns.trim()), name.trim())).filter(|x| !x.2.is_empty());
        }
    }
    None
}

/// Whether `t` is a dash rule (`----  -----`).
fn is_rule(t: &str) -> bool {
    !t.is_empty() && t.chars().all(|c| c == '-' || c == ' ') && t.contains("--")
}

/// The blocks of a listing: `(kind, block)`.
fn blocks(input: &str) -> Vec<(&'static str, Block)> {
    let mut out: Vec<(&'static str, Block)> = Vec::new();
    let mut open = false;
    for l in lines(input) {
        let t = l.text.trim();
        if let Some((kind, ns, name)) = title(t) {
            let kind = if kind == "Pool" { "pool" } else { "profile" };
            out.push((
                kind,
                Block {
                    name: unwrap_ref(name),
                    namespace: ns.map(str::to_string),
                    fields: BTreeMap::new(),
                    line: l.number,
                },
            ));
            open = true;
            continue;
        }
        if t.is_empty() || is_rule(t) {
            continue;
        }
        let Some((_, b)) = out.last_mut().filter(|_| open) else {
            continue;
        };
        let mut parts = t.split_whitespace();
        match (parts.next(), parts.next(), parts.next()) {
            (Some(k), Some(v), None)
                if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                let v = if k == "pool" {
                    unwrap_ref(v)
                } else {
                    v.to_string()
                };
                b.fields.insert(k.to_string(), v);
            }
            // Anything else ends the block (a prompt, a summary line).
            _ => open = false,
        }
    }
    out
}

/// `(speed Mbit/s, cable)` of a `pg_lossless_<speed>_<cable>_profile`.
fn profile_speed(name: &str) -> (Option<u64>, Option<String>) {
    let Some(rest) = name.strip_prefix("pg_lossless_") else {
        return (None, None);
    };
    let mut it = rest.split('_');
    let speed = it.next().and_then(|s| s.parse::<u64>().ok());
    let cable = it
        .next()
        .filter(|c| c.ends_with('m') && c[..c.len() - 1].bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_string);
    (speed, cable)
}

/// Parse `mmuconfig -l`.
pub fn parse_mmuconfig(input: &str) -> Result<MmuConfig, ParseError> {
    let mut cfg = MmuConfig::default();
    for (kind, b) in blocks(input) {
        if kind == "pool" {
            cfg.pools.push(BufferPool {
                size: b.uint("size"),
                xoff: b.uint("xoff"),
                block: b,
            });
            continue;
        }
        let (speed_mbps, cable) = profile_speed(&b.name);
        cfg.profiles.push(BufferProfile {
            dynamic_th: b.text("dynamic_th").and_then(|v| v.parse::<i32>().ok()),
            static_th: b.uint("static_th"),
            xoff: b.uint("xoff"),
            speed_mbps,
            cable,
            block: b,
        });
    }
    if cfg.pools.is_empty() && cfg.profiles.is_empty() {
        return Err(ParseError::new(
            1,
            "`Pool: NAME` or `Profile: NAME` blocks (mmuconfig -l)",
            input.lines().next().unwrap_or(""),
        ));
    }
    Ok(cfg)
}

/// Parse `ecnconfig -l`, with any `queue N: on|off` lines.
pub fn parse_ecnconfig(input: &str) -> Result<EcnConfig, ParseError> {
    let mut cfg = EcnConfig::default();
    for (_, b) in blocks(input) {
        cfg.profiles.push(WredProfile {
            ecn: b.text("ecn").map(str::to_string),
            green_min: b.uint("green_min_threshold"),
            green_max: b.uint("green_max_threshold"),
            green_probability: b.uint("green_drop_probability"),
            green_enabled: b.text("wred_green_enable").map(|v| v == "true"),
            block: b,
        });
    }
    for l in lines(input) {
        if let Some(q) = queue_line(l.text.trim()) {
            cfg.queues.push(QueueEcn {
                queue: q.0,
                on: q.1,
                line: l.number,
            });
        }
    }
    if cfg.profiles.is_empty() && cfg.queues.is_empty() {
        return Err(ParseError::new(
            1,
            "`Profile: NAME` blocks (ecnconfig -l) or `queue N: on|off` lines (ecnconfig -q)",
            input.lines().next().unwrap_or(""),
        ));
    }
    Ok(cfg)
}

/// `queue 3: on` as `(3, true)`.
fn queue_line(t: &str) -> Option<(u8, bool)> {
    let (q, state) = t.strip_prefix("queue ")?.split_once(':')?;
    let q = q.trim().parse::<u8>().ok().filter(|q| *q < 8)?;
    match state.trim() {
        "on" => Some((q, true)),
        "off" => Some((q, false)),
        _ => None,
    }
}

/// Which of the two listings `input` is, if either: `Some(true)` for
/// `ecnconfig` (WRED threshold keys or `ECN status:` / queue lines),
/// `Some(false)` for `mmuconfig` (pool or buffer profile blocks).
pub fn detect(input: &str) -> Option<bool> {
    let ls = lines(input);
    let texts: Vec<&str> = ls.iter().map(|l| l.text.trim()).collect();
    let ecn_key = |t: &&str| {
        let k = t.split_whitespace().next().unwrap_or("");
        k.ends_with("_min_threshold") || k.ends_with("_max_threshold") || k.starts_with("wred_")
    };
    let has_title = texts.iter().any(|t| title(t).is_some());
    if texts.contains(&"ECN status:") || (has_title && texts.iter().any(ecn_key)) {
        return Some(true);
    }
    let mmu_key = |t: &&str| {
        matches!(
            t.split_whitespace().next(),
            Some("dynamic_th" | "static_th" | "xoff" | "xon" | "pool" | "mode")
        )
    };
    (has_title && texts.iter().any(mmu_key)).then_some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MMU: &str = "Pool: ingress_lossless_pool\n----  -------\nmode  dynamic\nsize  155636\ntype  ingress\nxoff  316364\n----  -------\n\nProfile: pg_lossless_100000_40m_profile\n----------  -----------------------------------\ndynamic_th  -3\npool        [BUFFER_POOL|ingress_lossless_pool]\nsize        4000\nxoff        62891\n----------  -----------------------------------\n";

    #[test]
    fn mmuconfig_pools_and_profiles() {
        assert_eq!(detect(MMU), Some(false));
        let c = parse_mmuconfig(MMU).unwrap();
        let pool = c.lossless_pool().unwrap();
        assert_eq!(pool.size, Some(155_636));
        assert_eq!(pool.xoff, Some(316_364));
        assert_eq!(pool.block.line, 1);
        let p = &c.profiles[0];
        assert_eq!(p.dynamic_th, Some(-3));
        assert_eq!(p.xoff, Some(62_891));
        assert_eq!(p.speed_mbps, Some(100_000));
        assert_eq!(p.cable.as_deref(), Some("40m"));
        assert_eq!(p.pool(), Some("ingress_lossless_pool"));
        assert!(p.is_lossless_pg());
    }

    #[test]
    fn ecnconfig_profiles_and_queues() {
        let t = "Profile: AZURE_LOSSLESS\n-----------------------  -------\nred_max_threshold        2097152\nwred_green_enable        true\necn                      ecn_all\ngreen_min_threshold      1048576\ngreen_max_threshold      2097152\ngreen_drop_probability   5\n-----------------------  -------\n\nECN status:\nqueue 3: off\n";
        assert_eq!(detect(t), Some(true));
        let c = parse_ecnconfig(t).unwrap();
        let p = &c.profiles[0];
        assert_eq!(p.block.name, "AZURE_LOSSLESS");
        assert_eq!(
            (p.green_min, p.green_max),
            (Some(1_048_576), Some(2_097_152))
        );
        assert_eq!(p.green_probability, Some(5));
        assert!(p.marks_green());
        assert_eq!(
            c.queues,
            vec![QueueEcn {
                queue: 3,
                on: false,
                line: 12
            }]
        );
        let none = t.replace("ecn_all", "ecn_none");
        assert!(!parse_ecnconfig(&none).unwrap().profiles[0].marks_green());
    }

    #[test]
    fn neither_listing_is_an_error_not_a_panic() {
        assert_eq!(detect("Pool: x\nhello world foo\n"), None);
        assert!(parse_mmuconfig("NIC statistics:\n rx: 1\n").is_err());
        assert!(parse_ecnconfig("").is_err());
        assert_eq!(queue_line("queue 9: on"), None);
        assert_eq!(unwrap_ref("[BUFFER_POOL|p]"), "p");
    }
}
