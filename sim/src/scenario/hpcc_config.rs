//! The HPCC artifact's run file (its ns-3 simulator's `config.txt`:
//! `KEY value` per line) read as a scenario: `rocelab run mix/config.txt`
//! and `rocelab validate` take it unchanged, beside its topology and flow
//! files.
//!
//! [`to_scenario`] writes the equivalent scenario document, which then
//! loads as any scenario does (so what `validate` accepts, `run` runs):
//!
//! * `TOPOLOGY_FILE` and `FLOW_FILE` become `topology = { format =
//!   "hpcc" }` and a `hpcc-flows` workload (start times kept: flows start
//!   at 2 s, as the artifact's do); `SIMULATOR_STOP_TIME` the duration;
//! * `CC_MODE` 1 is DCQCN (the artifact's preset, with `ALPHA_RESUME_
//!   INTERVAL`, `RATE_DECREASE_INTERVAL`, `RP_TIMER`, `EWMA_GAIN`,
//!   `FAST_RECOVERY_TIMES`, `CLAMP_TARGET_RATE`, `RATE_AI`, `RATE_HAI`,
//!   `MIN_RATE`), 3 is HPCC (`U_TARGET`, `MI_THRESH`, `RATE_AI`,
//!   `MIN_RATE`); TIMELY (7) and DCTCP (8) are refused;
//! * `BUFFER_SIZE` (MB per switch), `ENABLE_QCN` and the `KMIN_MAP`,
//!   `KMAX_MAP`, `PMAX_MAP` thresholds (KB, by link rate: each switch gets
//!   its slowest port's row, since the model marks per switch, not per
//!   port), PFC on every priority the flows use (the artifact is
//!   lossless), `L2_BACK_TO_ZERO` (1: go-back-0);
//! * `PACKET_PAYLOAD_SIZE` becomes the smallest RoCE MTU that holds it
//!   (1000 bytes: 1024).
//!
//! Keys about output files and tracing are not needed (results.json,
//! counters and the report replace them). A setting the model does not
//! have with a value other than the artifact's default is an error naming
//! the line, the key and what is supported; nothing is dropped silently.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::Path;

use crate::input::FileError;
use crate::topology::{self, NodeKind};

/// Whether `text` is an HPCC run file rather than a TOML scenario: every
/// line is blank or `KEY value...` with an upper-case key, and it names
/// `CC_MODE` or `TOPOLOGY_FILE`.
pub fn looks_like(text: &str) -> bool {
    let mut named = false;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let key = line.split_whitespace().next().unwrap_or("");
        if !key
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
            || !key.starts_with(|c: char| c.is_ascii_uppercase())
        {
            return false;
        }
        named |= key == "CC_MODE" || key == "TOPOLOGY_FILE";
    }
    named
}

/// One `KEY value...` line: its key, values and byte offset.
struct Line<'a> {
    key: &'a str,
    values: Vec<&'a str>,
    offset: usize,
}

/// The scenario document equivalent to the HPCC run file `text` (at
/// `path`), or the first mistake in it.
pub fn to_scenario(path: &Path, text: &str) -> Result<String, FileError> {
    let mut lines: Vec<Line<'_>> = Vec::new();
    let mut offset = 0;
    for raw in text.split_inclusive('\n') {
        let mut words = raw.split_whitespace();
        if let Some(key) = words.next() {
            let lead = raw.len() - raw.trim_start().len();
            lines.push(Line {
                key,
                values: words.collect(),
                offset: offset + lead,
            });
        }
        offset += raw.len();
    }
    let err = |l: &Line<'_>, msg: String| FileError::new(path, l.key, msg).at(text, l.offset);
    let get = |key: &str| lines.iter().rev().find(|l| l.key == key);
    let one = |key: &str| -> Result<Option<(&Line<'_>, &str)>, FileError> {
        match get(key) {
            None => Ok(None),
            Some(l) if l.values.is_empty() => Err(err(l, "expected a value".into())),
            Some(l) => Ok(Some((l, l.values[0]))),
        }
    };
    let num = |key: &str| -> Result<Option<f64>, FileError> {
        match one(key)? {
            None => Ok(None),
            Some((l, v)) => v
                .parse::<f64>()
                .map(Some)
                .map_err(|_| err(l, format!("{v:?}: expected a number"))),
        }
    };
    // An artifact rate ("50Mb/s") as a scenario rate ("50Mbps").
    let rate = |key: &str| -> Result<Option<String>, FileError> {
        match one(key)? {
            None => Ok(None),
            Some((l, v)) => {
                let unit = v.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
                let n = &v[..v.len() - unit.len()];
                let scale = match unit {
                    "b/s" | "bps" => "bps",
                    "Kb/s" | "kb/s" | "Kbps" => "Kbps",
                    "Mb/s" | "Mbps" => "Mbps",
                    "Gb/s" | "Gbps" => "Gbps",
                    _ => "",
                };
                if n.is_empty() || scale.is_empty() {
                    return Err(err(l, format!("{v:?}: expected a rate such as 50Mb/s")));
                }
                Ok(Some(format!("{n}{scale}")))
            }
        }
    };
    let dir = path.parent().unwrap_or(Path::new("."));
    // The artifact names its files relative to the simulator's directory,
    // the parent of `mix/`; a file beside the run file also resolves.
    let file = |key: &str| -> Result<Option<String>, FileError> {
        let Some((l, v)) = one(key)? else {
            return Ok(None);
        };
        for cand in [v.to_string(), format!("../{v}")] {
            if dir.join(&cand).is_file() {
                return Ok(Some(cand));
            }
        }
        Err(err(
            l,
            format!(
                "{v:?}: no such file beside {} or in its parent directory",
                path.display()
            ),
        ))
    };

    // Settings the model does not have: only the artifact's defaults pass.
    for l in &lines {
        let v = l.values.first().copied().unwrap_or("");
        let refuse = |expected: &str| Err(err(l, format!("{v:?}: {expected}")));
        match l.key {
            "ERROR_RATE_PER_LINK" if v.parse::<f64>().unwrap_or(1.0) != 0.0 => {
                return refuse("only 0 is imported: put a link's error rate in the topology file");
            }
            "LINK_DOWN" if l.values.iter().any(|x| *x != "0") => {
                return refuse("only 0 0 0 is imported: add a link-down fault to the scenario");
            }
            "SAMPLE_FEEDBACK" if v != "0" => {
                return refuse("only 0 (telemetry on every packet) is modelled");
            }
            "USE_DYNAMIC_PFC_THRESHOLD" if v != "1" => {
                return refuse("only 1 (the dynamic threshold) is imported");
            }
            "RATE_BOUND" if v != "1" => return refuse("only 1 (a rate limiter) is modelled"),
            "L2_ACK_INTERVAL" if v != "1" => {
                return refuse("only 1 (an ACK per packet) is imported");
            }
            _ => {}
        }
    }

    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "hpcc".into());
    let Some(topo) = file("TOPOLOGY_FILE")? else {
        return Err(FileError::new(
            path,
            "TOPOLOGY_FILE",
            "missing: expected the topology file's path",
        ));
    };
    let Some(flows) = file("FLOW_FILE")? else {
        return Err(FileError::new(
            path,
            "FLOW_FILE",
            "missing: expected the flow file's path",
        ));
    };
    let mode = match one("CC_MODE")? {
        None => return Err(FileError::new(path, "CC_MODE", "missing: expected 1 (DCQCN) or 3 (HPCC)")),
        Some((l, v)) => match v {
            "1" => "dcqcn",
            "3" => "hpcc",
            _ => {
                return Err(err(
                    l,
                    format!("{v:?}: expected 1 (DCQCN) or 3 (HPCC); TIMELY (7) and DCTCP (8) are not modelled"),
                ))
            }
        },
    };
    let payload = num("PACKET_PAYLOAD_SIZE")?.unwrap_or(1000.0);
    let Some(mtu) = [256u32, 512, 1024, 2048, 4096]
        .into_iter()
        .find(|&m| f64::from(m) >= payload)
    else {
        let l = get("PACKET_PAYLOAD_SIZE").expect("read above");
        return Err(err(l, format!("{payload}: expected at most 4096 bytes")));
    };
    let stop = num("SIMULATOR_STOP_TIME")?.unwrap_or(4.0);
    let buffer_mb = num("BUFFER_SIZE")?.unwrap_or(32.0);
    let back_to_zero = num("L2_BACK_TO_ZERO")?.unwrap_or(0.0) != 0.0;
    let qcn = num("ENABLE_QCN")?.unwrap_or(1.0) != 0.0;

    // The priorities the flows use (`src dst pg dport size start`).
    let flow_path = dir.join(&flows);
    let flow_text = crate::input::read_file(&flow_path)?;
    let mut prios = BTreeSet::new();
    for line in flow_text.lines().skip(1) {
        if let Some(pg) = line
            .split_whitespace()
            .nth(2)
            .and_then(|p| p.parse::<u8>().ok())
        {
            if pg < 8 {
                prios.insert(pg);
            }
        }
    }
    if prios.is_empty() {
        prios.insert(3);
    }
    let prio_list = prios
        .iter()
        .map(u8::to_string)
        .collect::<Vec<_>>()
        .join(", ");

    // ECN thresholds by link rate: `N rate value rate value ...`.
    let map = |key: &str| -> Result<Vec<(u64, f64)>, FileError> {
        let Some(l) = get(key) else {
            return Ok(Vec::new());
        };
        let bad = || {
            err(
                l,
                "expected a count, then that many `rate_bps value` pairs".into(),
            )
        };
        let n: usize = l
            .values
            .first()
            .and_then(|v| v.parse().ok())
            .ok_or_else(bad)?;
        if l.values.len() != 1 + 2 * n {
            return Err(bad());
        }
        (0..n)
            .map(|i| {
                let r = l.values[1 + 2 * i].parse::<u64>().map_err(|_| bad())?;
                let v = l.values[2 + 2 * i].parse::<f64>().map_err(|_| bad())?;
                Ok((r, v))
            })
            .collect()
    };
    let (kmin, kmax, pmax) = (map("KMIN_MAP")?, map("KMAX_MAP")?, map("PMAX_MAP")?);
    // The row for a port of `bps`: the fastest entry not above it, else
    // the slowest.
    let row = |m: &[(u64, f64)], bps: u64| -> Option<f64> {
        m.iter()
            .filter(|(r, _)| *r <= bps)
            .max_by_key(|(r, _)| *r)
            .or_else(|| m.iter().min_by_key(|(r, _)| *r))
            .map(|(_, v)| *v)
    };
    let ecn_for = |bps: u64| -> Option<String> {
        let (a, b, p) = (row(&kmin, bps)?, row(&kmax, bps)?, row(&pmax, bps)?);
        Some(
            prios
                .iter()
                .map(|pr| {
                    format!("{{ priority = {pr}, kmin = \"{a}KB\", kmax = \"{b}KB\", pmax = {p} }}")
                })
                .collect::<Vec<_>>()
                .join(", "),
        )
    };
    // Each switch's slowest port decides its row.
    let t = topology::hpcc::load(&dir.join(&topo))?.topology;
    let mut slowest: Vec<(String, u64)> = Vec::new();
    for n in t.nodes.iter().filter(|n| n.kind == NodeKind::Switch) {
        let r = n
            .ports
            .iter()
            .map(|&l| t.link(l).rate.bps())
            .min()
            .unwrap_or(0);
        slowest.push((n.name.clone(), r));
    }
    let host_rate = t
        .nodes
        .iter()
        .filter(|n| n.kind == NodeKind::Host)
        .filter_map(|n| n.ports.first().map(|&l| t.link(l).rate.bps()))
        .min()
        .unwrap_or(100_000_000_000);

    let mut s = String::new();
    let _ = writeln!(s, "name = {:?}", stem);
    let _ = writeln!(
        s,
        "description = {:?}",
        format!(
            "the HPCC artifact's run file {} ({})",
            path.display(),
            mode.to_uppercase()
        )
    );
    let _ = writeln!(s, "duration = \"{stop}s\"");
    let _ = writeln!(s, "topology = {{ format = \"hpcc\", path = {topo:?} }}");
    let _ = writeln!(s, "[fabric]");
    match (qcn, ecn_for(host_rate)) {
        (true, Some(e)) => {
            let _ = writeln!(s, "ecn = [{e}]");
        }
        _ => {
            let _ = writeln!(s, "ecn = []");
        }
    }
    let _ = writeln!(s, "[fabric.buffer]\nsize = \"{buffer_mb}MB\"");
    let _ = writeln!(
        s,
        "[fabric.pfc]\nenabled = true\npriorities = [{prio_list}]"
    );
    let _ = writeln!(s, "[nic]\nmtu = {mtu}");
    let _ = writeln!(
        s,
        "retransmit = \"{}\"",
        if back_to_zero {
            "go-back-0"
        } else {
            "go-back-n"
        }
    );
    let us = |key: &str| -> Result<Option<String>, FileError> {
        Ok(num(key)?.map(|v| format!("\"{v}us\"")))
    };
    if mode == "hpcc" {
        let _ = writeln!(s, "[nic.cc]\nalgorithm = \"hpcc\"\n[nic.cc.hpcc]");
        if let Some(v) = num("U_TARGET")? {
            let _ = writeln!(s, "eta = {v}");
        }
        if let Some(v) = num("MI_THRESH")? {
            let _ = writeln!(s, "max_stage = {}", v as u32);
        }
        if let Some(v) = rate("RATE_AI")? {
            let _ = writeln!(s, "ai = {v:?}");
        }
        if let Some(v) = rate("MIN_RATE")? {
            let _ = writeln!(s, "min_rate = {v:?}");
        }
    } else {
        let _ = writeln!(
            s,
            "[nic.cc]\nalgorithm = \"dcqcn\"\npreset = \"hpcc\"\n[nic.cc.dcqcn]"
        );
        for (key, name) in [
            ("ALPHA_RESUME_INTERVAL", "alpha_update_interval"),
            ("RATE_DECREASE_INTERVAL", "rate_decrease_interval"),
            ("RP_TIMER", "rate_increase_timer"),
        ] {
            if let Some(v) = us(key)? {
                let _ = writeln!(s, "{name} = {v}");
            }
        }
        if let Some(v) = num("EWMA_GAIN")? {
            let _ = writeln!(s, "g = {v}");
        }
        if let Some(v) = num("FAST_RECOVERY_TIMES")? {
            let _ = writeln!(s, "fast_recovery_steps = {}", v as u32);
        }
        if let Some(v) = num("CLAMP_TARGET_RATE")? {
            let _ = writeln!(s, "clamp_target_rate = {}", v != 0.0);
        }
        for (key, name) in [
            ("RATE_AI", "rate_ai"),
            ("RATE_HAI", "rate_hai"),
            ("MIN_RATE", "min_rate"),
        ] {
            if let Some(v) = rate(key)? {
                let _ = writeln!(s, "{name} = {v:?}");
            }
        }
    }
    let _ = writeln!(s, "[record]\nflows = true");
    let _ = writeln!(s, "[[workload]]\nkind = \"hpcc-flows\"\npath = {flows:?}");
    if qcn {
        for (name, r) in &slowest {
            if *r == host_rate {
                continue;
            }
            if let Some(e) = ecn_for(*r) {
                let _ = writeln!(s, "[[override]]\nnodes = {name:?}\nfabric.ecn = [{e}]");
            }
        }
    }
    Ok(s)
}
