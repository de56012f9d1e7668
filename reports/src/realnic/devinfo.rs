//! Device and port state: `ibv_devinfo [-v]`, `ibstat`, and (in
//! [`super::ibdiag`]) `ibstatus`, `ibportstate`, `iblinkinfo`,
//! `rdma link show` / `rdma dev show` and `mlxconfig ... query`. All produce
//! the same [`HcaInfo`] records; [`HcaInfo::tool`] says which tool printed
//! them. One file may hold the output of several of these tools.
//!
//! Units: `rate_bps` is the port's data rate in bits per second (width x
//! per-lane speed for `ibv_devinfo`, `ibportstate` and `iblinkinfo`;
//! `Rate:` Gb/s for `ibstat`, `rate:` for `ibstatus`); MTUs in bytes.
//! Never panics; errors when none of the tools' landmark lines exists.

use super::hca::{first_word, lanes};
pub use super::hca::{ConfigParam, HcaInfo, PortInfo};
use super::text::{lines, scaled_decimal, ParseError};

fn gbps(v: &str) -> Option<u64> {
    let mut it = v.split_whitespace();
    let num = it.next()?;
    let unit = it.next().unwrap_or("Gbps");
    let mult: u128 = if unit.starts_with("Gb") {
        1_000_000_000
    } else if unit.starts_with("Mb") {
        1_000_000
    } else {
        return None;
    };
    scaled_decimal(num, mult, 1)
}

pub(crate) fn finish_port(p: &mut PortInfo) {
    if p.rate_bps.is_none() {
        if let (Some(w), Some(s)) = (p.width_lanes, p.lane_bps) {
            p.rate_bps = Some(s.saturating_mul(u64::from(w)));
        }
    }
    p.active = p
        .state
        .as_deref()
        .is_some_and(|s| s.eq_ignore_ascii_case("PORT_ACTIVE") || s.eq_ignore_ascii_case("Active"));
}

/// Parse device/port state output of any of the tools of this module
/// (several may share one file): `ibv_devinfo`, `ibstat`, `ibstatus`,
/// `ibportstate`, `iblinkinfo`, `rdma link show`, `rdma dev show`,
/// `mlxconfig ... query`.
pub fn parse(input: &str) -> Result<Vec<HcaInfo>, ParseError> {
    let mut out = parse_devinfo_ibstat(input);
    out.extend(super::ibdiag::parse_ibstatus(input));
    out.extend(super::ibdiag::parse_ibportstate(input));
    out.extend(super::ibdiag::parse_iblinkinfo(input));
    out.extend(super::ibdiag::parse_rdma_link(input));
    out.extend(super::ibdiag::parse_mlxconfig(input));
    if out.is_empty() {
        let all = lines(input);
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "`hca_id: <dev>` (ibv_devinfo), `CA '<dev>'` (ibstat), `Infiniband device '<dev>' port N status:` (ibstatus), `LinkState:....` (ibportstate), `==( 4X ... )==>` (iblinkinfo), `link <dev>/<port> state ...` (rdma link) or `Device type:` with `Configurations:` (mlxconfig)",
            first.map_or("", |l| l.text),
        ));
    }
    out.sort_by_key(|d| d.line);
    for d in &mut out {
        for p in &mut d.ports {
            finish_port(p);
        }
    }
    Ok(out)
}

/// `ibv_devinfo` and `ibstat` devices (either, detected per device).
fn parse_devinfo_ibstat(input: &str) -> Vec<HcaInfo> {
    let all = lines(input);
    let mut out: Vec<HcaInfo> = Vec::new();
    // `ibv_devinfo -d DEV [-v]` (also in markdown italics): the device an
    // excerpt without its `hca_id:` line is about.
    let mut cmd_dev: Option<String> = None;
    for l in &all {
        let t = l.text.trim();
        if t.is_empty() {
            continue;
        }
        if t.contains("ibv_devinfo") {
            let w: Vec<&str> = t.split_whitespace().collect();
            cmd_dev = w
                .iter()
                .position(|x| *x == "-d" || *x == "--ib-dev")
                .and_then(|i| w.get(i + 1).copied())
                .or_else(|| w.iter().find_map(|x| x.strip_prefix("--ib-dev=")))
                .map(|d| d.trim_matches(['_', '*', '`']).to_string());
            continue;
        }
        // A grepped excerpt of `ibv_devinfo -v`: port attributes and GIDs
        // without the device header.
        if out.is_empty() && t.starts_with("GID[") && t.contains("RoCE v") {
            out.push(HcaInfo {
                line: l.number,
                tool: "ibv_devinfo".into(),
                name: cmd_dev.clone().unwrap_or_default(),
                ..HcaInfo::default()
            });
        }
        if let Some(name) = t.strip_prefix("hca_id:") {
            out.push(HcaInfo {
                line: l.number,
                tool: "ibv_devinfo".into(),
                name: name.trim().to_string(),
                ..HcaInfo::default()
            });
            continue;
        }
        if let Some(rest) = t.strip_prefix("CA '") {
            out.push(HcaInfo {
                line: l.number,
                tool: "ibstat".into(),
                name: rest.trim_end_matches('\'').to_string(),
                ..HcaInfo::default()
            });
            continue;
        }
        // Another tool's block ends the device: `ibportstate`'s dotted
        // `Key:....value` lines, `iblinkinfo`'s node headers, ibstatus.
        if t.starts_with("Infiniband device '")
            || t.starts_with("# Port info:")
            || t.starts_with("CA: ")
            || t.starts_with("Switch: ")
            || t.starts_with("Device #")
            || t.starts_with("Configurations:")
            || t.contains(": node_type ")
        {
            out.push(HcaInfo::default());
            continue;
        }
        // An iblinkinfo `--line` row or an rdma link line is no attribute.
        if t.contains("==(") || t.starts_with("link ") {
            continue;
        }
        let Some(dev) = out.last_mut() else { continue };
        let Some((k, v)) = t.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        if v.starts_with("..") {
            continue;
        }
        // ibstat: `Port 1:`; ibv_devinfo: `port:   1`.
        if k == "port" || (k.starts_with("Port ") && v.is_empty()) {
            let num = if k == "port" {
                v.parse().ok()
            } else {
                k[5..].trim().parse().ok()
            };
            if let Some(num) = num {
                dev.ports.push(PortInfo {
                    port: num,
                    ..PortInfo::default()
                });
            }
            continue;
        }
        match k {
            "fw_ver" | "Firmware version" => dev.fw_ver = Some(v.to_string()),
            "vendor_part_id" => dev.part_id = v.parse().ok(),
            "CA type" => dev.part_id = v.trim_start_matches("MT").parse().ok(),
            _ => {}
        }
        let Some(p) = dev.ports.last_mut() else {
            if !k.is_empty() && !v.is_empty() {
                dev.attributes.insert(k.to_string(), v.to_string());
            }
            continue;
        };
        if !k.is_empty() && !v.is_empty() {
            p.attributes.insert(k.to_string(), v.to_string());
        }
        match k {
            "state" | "State" => p.state = Some(first_word(v)),
            "phys_state" | "Physical state" => p.phys_state = Some(first_word(v)),
            "max_mtu" => p.max_mtu = v.split_whitespace().next().and_then(|x| x.parse().ok()),
            "active_mtu" => p.active_mtu = v.split_whitespace().next().and_then(|x| x.parse().ok()),
            "link_layer" | "Link layer" => p.link_layer = Some(first_word(v)),
            "active_width" => p.width_lanes = lanes(v),
            "active_speed" => p.lane_bps = gbps(v),
            "Rate" => p.rate_bps = scaled_decimal(first_word(v).as_str(), 1_000_000_000, 1),
            _ => {}
        }
    }
    out.retain(|d| !d.tool.is_empty());
    out
}
