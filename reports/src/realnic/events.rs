//! Event lines of logs: kernel `dmesg`/journal lines of the RDMA NIC
//! drivers (mlx5, ice/irdma, bnxt), PCIe hot-plug and AER lines, and UCX
//! log lines (transport errors, the transports an endpoint uses).
//!
//! Accepted shapes: `[  12.34] mlx5_core 0000:3b:00.0: ...` (dmesg),
//! `[Mon Jan  1 10:00:00 2024] ...` (`dmesg -T`), `Jan 01 10:00:00 HOST
//! kernel: ...` (journal, HOST kept), `HOST: ...` (parallel shells),
//! lines without a timestamp (as quoted in mails), a shell prompt line
//! before them (its host kept), `# host: NAME` lines, and kernel lines
//! hard-wrapped by a mail client (a line without a timestamp that follows
//! a timestamped one continues it). UCX lines are `[time] [host:pid:tid]
//! file.c:line UCX LEVEL message` or `[host:pid:tid:tid] file.c:line
//! message`, also with their first characters cut off.
//!
//! Units: PCIe bandwidths in Mbit/s, PCIe speeds in MT/s, widths in
//! lanes. Lines that are no event are ignored; a text without any event is
//! an error. Nothing here panics on any input.

use serde::Serialize;

use super::paste;
use super::text::{lines, scaled_decimal, ParseError};

/// What an event line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum EventKind {
    /// Link down.
    LinkDown,
    /// Link up.
    LinkUp,
    /// PFC / pause storm detected by the NIC.
    PauseStorm,
    /// PCIe bus errors (AER) or a degraded PCIe link.
    PcieError,
    /// Transport retry count exceeded (UCX, verbs).
    RetryExceeded,
    /// TX timeout / CQE error of a netdev queue.
    TxTimeout,
    /// The driver's PCIe bandwidth notice: `N Gb/s available PCIe
    /// bandwidth`, with `limited by` when the link is below the device's
    /// capability (see [`Event::pcie`]).
    PcieBandwidth,
    /// The PCIe slot lost the device: hot-plug `Link Down` / `Card not
    /// present`, `PCI slot is unavailable`, a surprise removal.
    PcieSlotDown,
    /// The slot gives the card less power than it needs.
    PcieInsufficientPower,
    /// The NIC driver failed: probe or load failure, firmware health
    /// failure (`health compromised`, `firmware internal error`, `Fatal
    /// error`), firmware command failures, firmware too old.
    DriverFailure,
    /// UCX found none of the transports it was asked for
    /// (`no usable transports/devices`, `transports ... are not
    /// available`).
    NoTransports,
    /// UCX endpoint configuration: the transports its lanes use
    /// (`ep_cfg[N]: tag(rc_mlx5/mlx5_0:1 ...)`), see [`Event::transports`].
    UcxLanes,
}

/// The numbers of a driver's PCIe bandwidth notice.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PcieBandwidth {
    /// Available bandwidth (Mbit/s).
    pub available_mbps: Option<u64>,
    /// Trained speed (MT/s).
    pub speed_mts: Option<u64>,
    /// Trained width (lanes).
    pub width: Option<u64>,
    /// The link that limits it (`limited by ... at ADDR`), when printed.
    pub limited_at: Option<String>,
    /// Whether the driver said `limited by`.
    pub limited: bool,
    /// What the device could do (Mbit/s), from `capable of`.
    pub capable_mbps: Option<u64>,
    /// Capable speed (MT/s).
    pub capable_speed_mts: Option<u64>,
    /// Capable width (lanes).
    pub capable_width: Option<u64>,
}

/// One event line of a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Event {
    /// Line number (of the line's start when a mail wrapped it).
    pub line: usize,
    /// What.
    pub kind: EventKind,
    /// Driver (`mlx5_core`, `ice`, `UCX`).
    pub driver: Option<String>,
    /// PCI address (`0000:3b:00.0`).
    pub pci: Option<String>,
    /// Netdev or RDMA device (`enp59s0f0`, `mlx5_0:1`).
    pub device: Option<String>,
    /// The host: of a journal line, a `host:` prefix, a UCX `[host:pid]`
    /// tag, a `# host:` line or the shell prompt above.
    pub host: Option<String>,
    /// Seconds since boot of a dmesg timestamp, in microseconds.
    pub uptime_us: Option<u64>,
    /// The PCIe bandwidth notice's numbers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcie: Option<PcieBandwidth>,
    /// UCX: the transports of the endpoint's lanes
    /// (`rc_mlx5/mlx5_0:1`, `tcp/eno1`), or the transports UCX says are
    /// available when none asked for is.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub transports: Vec<String>,
    /// UCX: the GID index and destination GID of a failed send
    /// (`sgix 0 dgid fe80::...`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gid_index: Option<u32>,
    /// Destination GID of a failed send.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dgid: Option<String>,
    /// The line as printed.
    pub text: String,
}

/// Classify one line.
fn event_kind(t: &str) -> Option<EventKind> {
    let l = t.to_ascii_lowercase();
    if l.contains("retry count exceeded") || l.contains("retry exceeded") {
        Some(EventKind::RetryExceeded)
    } else if l.contains("ep_cfg[") && l.contains('(') {
        Some(EventKind::UcxLanes)
    } else if l.contains("no usable transports") || l.contains("are not available, please use") {
        Some(EventKind::NoTransports)
    } else if l.contains("pause storm") || l.contains("pfc storm") {
        Some(EventKind::PauseStorm)
    } else if l.contains("pci slot is unavailable")
        || l.contains("card not present")
        || l.contains("surprise removal")
        || (l.contains("pciehp") && l.contains("link down"))
    {
        Some(EventKind::PcieSlotDown)
    } else if l.contains("available pcie bandwidth") {
        Some(EventKind::PcieBandwidth)
    } else if l.contains("insufficient power") {
        Some(EventKind::PcieInsufficientPower)
    } else if l.contains("link down") || l.contains("nic link is down") {
        Some(EventKind::LinkDown)
    } else if l.contains("link up") || l.contains("nic link is up") {
        Some(EventKind::LinkUp)
    } else if is_driver_failure(&l) {
        Some(EventKind::DriverFailure)
    } else if l.contains("pcie bus error")
        || l.contains("aer:")
        || (l.contains("pcie") && (l.contains("limited by") || l.contains("downgraded")))
    {
        Some(EventKind::PcieError)
    } else if l.contains("tx timeout") || l.contains("cqe error") {
        Some(EventKind::TxTimeout)
    } else {
        None
    }
}

/// Driver and firmware failures of the RDMA NIC drivers (lower-cased
/// line).
fn is_driver_failure(l: &str) -> bool {
    let nic = ["mlx5", "mlx4", "ice", "irdma", "bnxt", "i40e"]
        .iter()
        .any(|d| l.contains(d));
    nic && ((l.contains("probe of ") && l.contains("failed"))
        || l.contains("load_one failed")
        || l.contains("handle_hca_cap failed")
        || l.contains("init_one failed")
        || l.contains("health compromised")
        || l.contains("firmware internal error")
        || l.contains("fatal error")
        || l.contains("isn't supported by the fw")
        || l.contains("not supported by the fw")
        || l.contains("firmware version is too old")
        || l.contains("fw is too old")
        || (l.contains("cmd_exec") && l.contains("failed"))
        || l.contains("failed to load firmware")
        || l.contains("reset failed")
        || l.contains("timeout. will cause a leak")
        || (l.contains("command") && l.contains("timeout") && l.contains("fw")))
}

fn is_pci(s: &str) -> bool {
    let s = s.trim_end_matches([':', ',']);
    s.len() >= 7
        && s.contains(':')
        && s.contains('.')
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || matches!(c, ':' | '.'))
}

/// `[  12.345678]` -> microseconds; the rest of the line.
fn dmesg_stamp(t: &str) -> Option<(Option<u64>, &str)> {
    let rest = t.strip_prefix('[')?;
    let close = rest.find(']')?;
    let inside = rest[..close].trim();
    let after = rest[close + 1..].trim_start();
    if !inside.is_empty() && inside.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Some((scaled_decimal(inside, 1_000_000, 1), after));
    }
    // `dmesg -T`: `[Mon Jan  1 10:00:00 2024]`
    if inside.contains(':') && inside.split_whitespace().count() >= 4 && !inside.contains('@') {
        return Some((None, after));
    }
    None
}

/// `Jan 01 10:00:00 HOST kernel: rest` -> (HOST, rest).
fn journal(t: &str) -> Option<(&str, &str)> {
    let w: Vec<&str> = t.splitn(6, ' ').filter(|x| !x.is_empty()).collect();
    let pos = t.find(" kernel: ")?;
    let head: Vec<&str> = t[..pos].split_whitespace().collect();
    if head.len() < 4 || !head[2].contains(':') || w.is_empty() {
        return None;
    }
    Some((head[3], &t[pos + " kernel: ".len()..]))
}

/// The numbers of `N Gb/s available PCIe bandwidth[, limited by S GT/s
/// [PCIe] xW link at ADDR] [(capable of M Gb/s with S GT/s [PCIe] xW
/// link)]` and of the older `(S GT/s PCIe xW link)`.
fn pcie_numbers(t: &str) -> PcieBandwidth {
    let mut p = PcieBandwidth::default();
    let lower = t.to_ascii_lowercase();
    let Some(pos) = lower.find("gb/s available pcie bandwidth") else {
        return p;
    };
    p.available_mbps = t[..pos]
        .split_whitespace()
        .last()
        .and_then(|v| scaled_decimal(v, 1000, 1));
    let rest = &t[pos..];
    let (link, cap) = match rest.find("capable of") {
        Some(c) => (&rest[..c], Some(&rest[c..])),
        None => (rest, None),
    };
    p.limited = link.contains("limited by");
    let (s, w) = speed_width(link);
    p.speed_mts = s;
    p.width = w;
    if let Some(at) = link.find(" at ") {
        p.limited_at = link[at + 4..]
            .split([' ', ')', ','])
            .next()
            .filter(|a| is_pci(a))
            .map(str::to_string);
    }
    if let Some(c) = cap {
        p.capable_mbps = c
            .trim_start_matches("capable of")
            .split_whitespace()
            .next()
            .and_then(|v| scaled_decimal(v, 1000, 1));
        let (s, w) = speed_width(c);
        p.capable_speed_mts = s;
        p.capable_width = w;
    }
    p
}

/// `8.0 GT/s`, `8GT/s`, and `x16` of a link description.
fn speed_width(s: &str) -> (Option<u64>, Option<u64>) {
    let toks: Vec<&str> = s
        .split(|c: char| c.is_whitespace() || matches!(c, '(' | ')' | ','))
        .filter(|x| !x.is_empty())
        .collect();
    let mut speed = None;
    let mut width = None;
    for (i, x) in toks.iter().enumerate() {
        if speed.is_none() {
            if let Some(v) = x.strip_suffix("GT/s") {
                let v = if v.is_empty() {
                    i.checked_sub(1).map_or("", |k| toks[k])
                } else {
                    v
                };
                speed = scaled_decimal(v, 1000, 1);
            }
        }
        if width.is_none() {
            if let Some(n) = x.strip_prefix('x').and_then(|n| n.parse().ok()) {
                width = Some(n);
            }
        }
    }
    (speed, width)
}

/// `tag(rc_mlx5/mlx5_0:1 rc_mlx5/mlx5_4:1); rma(...)` -> the lanes.
fn ucx_lanes(t: &str) -> Vec<String> {
    let Some(pos) = t.find("ep_cfg[") else {
        return Vec::new();
    };
    let mut out: Vec<String> = Vec::new();
    for group in t[pos..].split('(').skip(1) {
        let inside = group.split(')').next().unwrap_or("");
        for lane in inside.split_whitespace() {
            if lane.contains('/') && !out.iter().any(|x| x == lane) {
                out.push(lane.to_string());
            }
        }
    }
    out
}

/// `please use one or more of: mm, posix, tcp` -> the list.
fn ucx_available(t: &str) -> Vec<String> {
    t.find("one or more of:")
        .map(|p| {
            t[p + "one or more of:".len()..]
                .split(',')
                .map(|x| x.trim().to_string())
                .filter(|x| !x.is_empty())
                .collect()
        })
        .unwrap_or_default()
}

/// A UCX `[host:pid:...]` tag (also with its `[` cut off).
fn ucx_host(w: &[&str]) -> Option<String> {
    w.iter().take(2).find_map(|x| {
        let x = x.strip_prefix('[').unwrap_or(x);
        let x = x.strip_suffix(']')?;
        let mut parts = x.split(':');
        let h = parts.next()?;
        let pid = parts.next()?;
        (!h.is_empty()
            && pid.bytes().all(|b| b.is_ascii_digit())
            && !pid.is_empty()
            && h.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
        .then(|| h.to_string())
    })
}

/// Parse event lines from kernel logs and UCX logs (see the module docs).
pub fn parse_events(input: &str) -> Result<Vec<Event>, ParseError> {
    // Logical lines: a mail-wrapped kernel line continues on the next.
    let mut logical: Vec<(usize, String, bool)> = Vec::new();
    for l in lines(input) {
        let t = l.text.trim();
        let stamped = dmesg_stamp(t).is_some();
        if let Some(prev) = logical.last_mut() {
            let continues = prev.2
                && !stamped
                && !t.is_empty()
                && paste::prompt(t).is_none()
                && !t.starts_with('#')
                && l.text.starts_with(|c: char| !c.is_whitespace())
                && !t.contains(" kernel: ");
            if continues {
                prev.1.push(' ');
                prev.1.push_str(t);
                prev.2 = false;
                continue;
            }
        }
        logical.push((l.number, t.to_string(), stamped));
    }
    let mut out = Vec::new();
    let mut host: Option<String> = None;
    for (number, t, _) in &logical {
        let t = t.as_str();
        if let Some(p) = paste::prompt(t) {
            if let Some(h) = p.host {
                host = Some(h.to_string());
            }
            continue;
        }
        if let Some(h) = t
            .strip_prefix('#')
            .map(str::trim)
            .and_then(|m| m.strip_prefix("host:"))
        {
            host = Some(h.trim().to_string()).filter(|h| !h.is_empty());
            continue;
        }
        let Some(kind) = event_kind(t) else {
            // UCX prints the failed work request after the error line:
            // `DCI QP 0x1510 wqe[0]: SEND s-e [... sgix 0 dgid fe80::...]`.
            if let Some(prev) = out
                .last_mut()
                .filter(|p: &&mut Event| p.kind == EventKind::RetryExceeded && p.dgid.is_none())
            {
                let w: Vec<&str> = t.split_whitespace().collect();
                for (i, x) in w.iter().enumerate() {
                    if *x == "sgix" {
                        prev.gid_index = w.get(i + 1).and_then(|v| v.parse().ok());
                    }
                    if *x == "dgid" {
                        prev.dgid = w.get(i + 1).map(|v| v.trim_end_matches(']').to_string());
                    }
                }
                if prev.dgid.is_some() {
                    prev.text = format!("{} / {}", prev.text, t);
                }
            }
            continue;
        };
        let (uptime_us, body) = dmesg_stamp(t).unwrap_or((None, t));
        let (line_host, body) = match journal(body) {
            Some((h, rest)) => (Some(h.to_string()), rest),
            None => (None, body),
        };
        let w: Vec<&str> = body.split_whitespace().collect();
        let mut e = Event {
            line: *number,
            kind,
            driver: None,
            pci: None,
            device: None,
            host: line_host.or_else(|| host.clone()),
            uptime_us,
            pcie: None,
            transports: Vec::new(),
            gid_index: None,
            dgid: None,
            text: t.to_string(),
        };
        for (i, x) in w.iter().enumerate() {
            let bare = x.trim_end_matches([':', ',']);
            if matches!(
                bare,
                "mlx5_core"
                    | "ice"
                    | "irdma"
                    | "bnxt_en"
                    | "i40e"
                    | "mlx4_core"
                    | "UCX"
                    | "pcieport"
            ) {
                e.driver.get_or_insert(bare.to_string());
            }
            if is_pci(x) && e.pci.is_none() {
                e.pci = Some(bare.to_string());
                if let Some(n) = w.get(i + 1).filter(|n| {
                    n.ends_with(':')
                        && n.len() > 1
                        && !n.starts_with("pciehp")
                        && !is_pci(n)
                        && !n.contains('(')
                }) {
                    e.device = Some(n.trim_end_matches(':').to_string());
                }
            }
            if e.device.is_none() && bare.starts_with("mlx5_") && bare != "mlx5_core" {
                e.device = Some(bare.to_string());
            }
            if *x == "sgix" {
                e.gid_index = w.get(i + 1).and_then(|v| v.parse().ok());
            }
            if *x == "dgid" {
                e.dgid = w.get(i + 1).map(|v| v.trim_end_matches(']').to_string());
            }
        }
        if e.device.is_none() {
            if let Some(pos) = body.find(" on ") {
                let dev = body[pos + 4..].split([' ', '/', '(']).next().unwrap_or("");
                if !dev.is_empty() && !dev.starts_with("socket") {
                    e.device = Some(dev.to_string());
                }
            }
        }
        if e.host.is_none() {
            e.host = ucx_host(&w).or_else(|| {
                let h = w.first()?.strip_suffix(':')?;
                (!h.is_empty()
                    && !is_pci(h)
                    && !h.contains('_')
                    && h.chars()
                        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.'))
                    && h.chars().any(|c| c.is_ascii_digit() || c == '-'))
                .then(|| h.to_string())
            });
        }
        match kind {
            EventKind::PcieBandwidth => e.pcie = Some(pcie_numbers(body)),
            EventKind::UcxLanes => e.transports = ucx_lanes(body),
            EventKind::NoTransports => e.transports = ucx_available(body),
            _ => {}
        }
        if kind == EventKind::UcxLanes && e.transports.is_empty() {
            continue;
        }
        // Prose that mentions a link or a storm is no log line: a log
        // line names its driver, device or PCI address, or carries a
        // timestamp or a host tag.
        let logged = uptime_us.is_some()
            || e.driver.is_some()
            || e.pci.is_some()
            || e.host.is_some()
            || body.contains("mlx5_")
            || body.contains("ib_mlx5")
            || body.contains("pciehp")
            || (e.device.is_some() && w.first().is_some_and(|x| x.ends_with(':')));
        if !logged {
            continue;
        }
        out.push(e);
    }
    if out.is_empty() {
        return Err(ParseError::new(
            0,
            "a kernel or UCX log line about the link, PCIe, the NIC driver or firmware, pause storms, transports or retry exceeded",
            "",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pcie_notices_give_their_numbers() {
        let p = pcie_numbers("8.000 Gb/s available PCIe bandwidth, limited by 2.5 GT/s PCIe x4 link at 0000:00:1b.4 (capable of 252.048 Gb/s with 16.0 GT/s PCIe x16 link)");
        assert_eq!(p.available_mbps, Some(8000));
        assert_eq!((p.speed_mts, p.width), (Some(2500), Some(4)));
        assert_eq!(p.limited_at.as_deref(), Some("0000:00:1b.4"));
        assert_eq!(p.capable_mbps, Some(252_048));
        assert_eq!(
            (p.capable_speed_mts, p.capable_width),
            (Some(16000), Some(16))
        );
        assert!(p.limited);
        let q = pcie_numbers("63.008 Gb/s available PCIe bandwidth (8.0GT/s PCIe x8 link)");
        assert_eq!(
            (q.speed_mts, q.width, q.limited),
            (Some(8000), Some(8), false)
        );
    }

    #[test]
    fn driver_failures_are_recognised() {
        for l in [
            "mlx5_core: probe of 0000:01:00.0 failed with error -22",
            "mlx5_core 0000:0d:00.0: poll_health:801:(pid 0): device's health compromised - reached miss count",
            "mlx5_core 0000:00:07.0: mlx5_fw_version_query:823:(pid 918): fw query isn't supported by the FW",
        ] {
            assert_eq!(event_kind(l), Some(EventKind::DriverFailure), "{l}");
        }
        assert_eq!(
            event_kind("mlx5_core 0000:01:00.0: firmware version: 20.27.446"),
            None
        );
    }
}
