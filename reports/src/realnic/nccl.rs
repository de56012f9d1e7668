//! NCCL `NCCL_DEBUG=INFO` logs: the IB/RoCE devices NCCL picked, which
//! transport each channel uses (and whether with GPUDirect RDMA), and
//! completion errors (`status=12` = transport retry counter exceeded).
//!
//! Lines are recognised anywhere after an optional `host:pid:tid [dev]`
//! prefix. Never panics; errors when no `NCCL` line is present.

use std::collections::BTreeMap;

use serde::Serialize;

use super::text::{lines, ParseError};

/// A device from `NET/IB : Using [0]mlx5_0:1/RoCE ...`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclNetDev {
    /// NCCL's index (`NET/IB/<index>` in channel lines).
    pub index: u32,
    /// RDMA device.
    pub device: String,
    /// Port.
    pub port: u32,
    /// `RoCE` or `IB`.
    pub link: String,
}

/// One `Channel ... via ...` line.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclChannel {
    /// Line number.
    pub line: usize,
    /// Channel number.
    pub channel: u32,
    /// Sending rank.
    pub from_rank: Option<u32>,
    /// Receiving rank.
    pub to_rank: Option<u32>,
    /// `send` / `receive` when printed.
    pub direction: Option<String>,
    /// Transport (`NET/IB`, `NET/Socket`, `P2P/IPC`, `SHM`, ...).
    pub transport: String,
    /// NET device index for network transports.
    pub net_dev: Option<u32>,
    /// `/GDRDMA` present.
    pub gdr: bool,
}

/// A completion error reported by NCCL.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclError {
    /// Line number.
    pub line: usize,
    /// Work completion status (12 = retry exceeded, 13 = RNR, 4 = local
    /// protection, 5 = flushed).
    pub status: Option<u32>,
    /// Vendor error (129 = 0x81 accompanies retry exceeded on mlx5).
    pub vendor_err: Option<u32>,
    /// The line text.
    pub text: String,
}

/// What a NCCL log says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclLog {
    /// `NCCL version ...`.
    pub version: Option<String>,
    /// `Using network ...`.
    pub network: Option<String>,
    /// `NET/IB : Using ...` devices.
    pub net_devs: Vec<NcclNetDev>,
    /// `[RO]`: PCIe relaxed ordering on.
    pub relaxed_ordering: bool,
    /// `NET/IB : No device found` seen.
    pub no_ib_device: bool,
    /// Channel connections.
    pub channels: Vec<NcclChannel>,
    /// Completion errors.
    pub errors: Vec<NcclError>,
    /// `NCCL_* set by environment to V` echoes.
    pub env: BTreeMap<String, String>,
    /// Number of `NCCL WARN` lines.
    pub warn_lines: usize,
    /// HCAs of `NET/IB : GPU Direct RDMA Disabled for HCA N 'dev'`.
    pub gdr_disabled: Vec<String>,
    /// HCAs of `NET/IB : GPU Direct RDMA Enabled for HCA N 'dev'`.
    pub gdr_enabled: Vec<String>,
    /// The GID index the log says the job uses (`NCCL_IB_GID_INDEX set
    /// by environment to N`, `local GID index N`, `GID index N`).
    pub gid_index: Option<u32>,
    /// Failed verbs calls while connecting (`Call to ibv_modify_qp failed
    /// with 110 Connection timed out ... next state RTR`).
    pub setup_errors: Vec<NcclSetupError>,
}

/// A verbs call that failed while NCCL set up a connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct NcclSetupError {
    /// Line number.
    pub line: usize,
    /// The call (`ibv_modify_qp`).
    pub call: String,
    /// errno (110 = timed out).
    pub errno: Option<u32>,
    /// The QP state it was moving to (`RTR`, `RTS`), when printed.
    pub next_state: Option<String>,
    /// The line text.
    pub text: String,
}

impl NcclLog {
    /// Channels over a network transport.
    pub fn net_channels(&self) -> impl Iterator<Item = &NcclChannel> {
        self.channels
            .iter()
            .filter(|c| c.transport.starts_with("NET/"))
    }
}

fn after<'a>(t: &'a str, key: &str) -> Option<&'a str> {
    t.find(key).map(|p| &t[p + key.len()..])
}

fn num_after(t: &str, key: &str) -> Option<u32> {
    let rest = after(t, key)?.trim_start();
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Parse a NCCL INFO log.
pub fn parse(input: &str) -> Result<NcclLog, ParseError> {
    let all = lines(input);
    let mut log = NcclLog::default();
    let mut any = false;
    for l in &all {
        let t = l.text.trim();
        if !t.contains("NCCL") && !t.contains("NET/IB") {
            continue;
        }
        any = true;
        if t.contains("NCCL WARN") {
            log.warn_lines += 1;
        }
        if let Some(v) = after(t, "NCCL version ") {
            log.version = v.split_whitespace().next().map(str::to_string);
        }
        if let Some(v) = after(t, "Using network ") {
            log.network = v.split_whitespace().next().map(str::to_string);
        }
        if t.contains("NET/IB : No device found") {
            log.no_ib_device = true;
        }
        if let Some(v) = after(t, "NET/IB : Using ") {
            let list = v.split(';').next().unwrap_or("");
            for tok in list.split_whitespace() {
                if tok == "[RO]" {
                    log.relaxed_ordering = true;
                    continue;
                }
                // [0]mlx5_0:1/RoCE
                let Some(rest) = tok.strip_prefix('[') else {
                    continue;
                };
                let Some((idx, dev)) = rest.split_once(']') else {
                    continue;
                };
                let (devport, link) = dev.split_once('/').unwrap_or((dev, ""));
                let mut dp = devport.split(':');
                let name = dp.next().unwrap_or("");
                let port = dp.next().and_then(|p| p.parse().ok()).unwrap_or(1);
                if let Ok(index) = idx.parse() {
                    log.net_devs.push(NcclNetDev {
                        index,
                        device: name.to_string(),
                        port,
                        link: link.to_string(),
                    });
                }
            }
        }
        if let Some(rest) = after(t, "Channel ") {
            if let Some(via) = after(rest, " via ") {
                let channel = rest
                    .split(['/', ' '])
                    .next()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(0);
                let ranks = rest.split(" via ").next().unwrap_or("");
                let (from_rank, to_rank) = match ranks.split_once("->") {
                    Some((a, b)) => (a.rsplit(':').next().and_then(rank_of), rank_of(b)),
                    None => (None, None),
                };
                let direction = if ranks.contains("[send]") {
                    Some("send".to_string())
                } else if ranks.contains("[receive]") {
                    Some("receive".to_string())
                } else {
                    None
                };
                let desc = via.split_whitespace().next().unwrap_or("");
                let parts: Vec<&str> = desc.split('/').collect();
                let (transport, net_dev) = if parts.first() == Some(&"NET") && parts.len() >= 2 {
                    let dev = parts
                        .get(2)
                        .and_then(|d| d.split('(').next().and_then(|x| x.parse().ok()));
                    (format!("NET/{}", parts[1]), dev)
                } else {
                    (
                        parts.iter().take(2).copied().collect::<Vec<_>>().join("/"),
                        None,
                    )
                };
                log.channels.push(NcclChannel {
                    line: l.number,
                    channel,
                    from_rank,
                    to_rank,
                    direction,
                    transport,
                    net_dev,
                    gdr: desc.contains("GDRDMA"),
                });
            }
        }
        for (key, list) in [
            ("GPU Direct RDMA Disabled for HCA", &mut log.gdr_disabled),
            ("GPU Direct RDMA Enabled for HCA", &mut log.gdr_enabled),
        ] {
            if let Some(rest) = after(t, key) {
                let dev = rest.split('\'').nth(1).unwrap_or("").to_string();
                if !dev.is_empty() && !list.contains(&dev) {
                    list.push(dev);
                }
            }
        }
        if let Some(i) = num_after(t, "GID index ").or_else(|| num_after(t, "GID index: ")) {
            log.gid_index.get_or_insert(i);
        }
        if let Some(rest) = after(t, "Call to ibv_") {
            let call = format!("ibv_{}", rest.split_whitespace().next().unwrap_or(""));
            log.setup_errors.push(NcclSetupError {
                line: l.number,
                call,
                errno: num_after(t, "failed with "),
                next_state: after(t, "next state ")
                    .and_then(|r| r.split([',', ' ']).next())
                    .map(str::to_string),
                text: t.to_string(),
            });
        }
        if t.contains("Got completion") {
            let status = num_after(t, "status=").or_else(|| num_after(t, "with error "));
            let vendor_err = num_after(t, "vendor err ");
            log.errors.push(NcclError {
                line: l.number,
                status,
                vendor_err,
                text: t.to_string(),
            });
        }
        if let Some(pos) = t.find(" set by environment to ") {
            let key = t[..pos].split_whitespace().last().unwrap_or("");
            let val = t[pos + " set by environment to ".len()..].trim_end_matches('.');
            if key.starts_with("NCCL_") {
                log.env.insert(key.to_string(), val.trim().to_string());
            }
            if key == "NCCL_IB_GID_INDEX" {
                log.gid_index = val.trim().parse().ok().or(log.gid_index);
            }
        }
    }
    if !any {
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "NCCL log lines (`NCCL INFO ...`)",
            first.map_or("", |l| l.text),
        ));
    }
    Ok(log)
}

/// `0[0]` / ` 8[3d000] [send]` -> 0 / 8.
fn rank_of(s: &str) -> Option<u32> {
    let s = s.trim();
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}
