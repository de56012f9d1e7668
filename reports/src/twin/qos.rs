//! The QoS side of a twin: the priorities PFC protects and the one RoCE
//! ran on (mlnx_qos, ethtool -S, ethtool -a), the trust mode, the RoCE
//! version of the GID the run used (show_gids, ibv_devinfo -v) and the
//! congestion notifications the NIC counted (rdma statistic).
//!
//! Counters come as dumps: two or more of one kind give the change from
//! the first to the last; a single dump gives totals since boot, and the
//! twin says so.

use crate::realnic::ethtool::EthtoolSnapshot;
use crate::realnic::rdma::RdmaSnapshot;

use super::evidence::Inference;
use super::host;

/// What the QoS inputs say.
pub(super) struct Qos {
    /// Priorities with PFC on, as a bit mask.
    pub pfc_priorities: Option<u8>,
    /// The priority RoCE traffic ran on.
    pub priority: Option<u8>,
    /// Trust mode.
    pub trust: Option<String>,
    /// RoCE v2 GID.
    pub roce_v2: Option<bool>,
    /// CNPs sent and handled.
    pub cnps: Option<u64>,
}

/// Infer the QoS settings (`device`, `gid_index`: perftest's).
pub(super) fn infer(inf: &mut Inference<'_>, device: Option<&str>, gid_index: Option<u32>) -> Qos {
    let pfc_priorities = pfc(inf);
    let priority = priority(inf, pfc_priorities);
    let trust = trust(inf);
    let roce_v2 = roce_version(inf, device, gid_index);
    let cnps = cnps(inf);
    Qos {
        pfc_priorities,
        priority,
        trust,
        roce_v2,
        cnps,
    }
}

/// A counter over the dumps that have it: (input of the last, value, from
/// a single dump).
fn counter<T>(
    dumps: &[(usize, T)],
    value: impl Fn(&T) -> Option<u64>,
) -> Option<(usize, u64, bool)> {
    let vals: Vec<(usize, u64)> = dumps
        .iter()
        .filter_map(|(i, d)| value(d).map(|v| (*i, v)))
        .collect();
    match vals[..] {
        [] => None,
        [(i, v)] => Some((i, v, true)),
        [(_, a), .., (i, b)] => Some((i, b.saturating_sub(a), false)),
    }
}

fn ethtool_counter(dumps: &[(usize, &EthtoolSnapshot)], name: &str) -> Option<(usize, u64, bool)> {
    counter(dumps, |s| s.get(name))
}

fn since_boot(single: bool) -> &'static str {
    if single {
        " (totals since boot: one dump)"
    } else {
        ""
    }
}

/// `3` or `3, 4`, or `none`.
pub(super) fn priority_list(mask: u8) -> String {
    let v: Vec<String> = (0..8)
        .filter(|p| mask & (1 << p) != 0)
        .map(|p: u8| p.to_string())
        .collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// PFC priorities: mlnx_qos; else where ethtool -S counted PAUSE frames
/// (assumed); else none known (the simulator's default, assumed).
fn pfc(inf: &mut Inference<'_>) -> Option<u8> {
    if let Some((i, enabled)) = inf
        .ev
        .qos
        .iter()
        .find_map(|&(i, q)| q.pfc_enabled.map(|e| (i, e)))
    {
        let mask = (0..8).filter(|&p| enabled[p]).fold(0u8, |m, p| m | 1 << p);
        inf.took(i, format!("PFC on priority {}", priority_list(mask)));
        return Some(mask);
    }
    let mut mask = 0u8;
    let mut seen = None;
    for p in 0..8u8 {
        for dir in ["rx", "tx"] {
            if let Some((i, n, single)) =
                ethtool_counter(&inf.ev.ethtool, &format!("{dir}_prio{p}_pause"))
            {
                if n > 0 {
                    mask |= 1 << p;
                    seen = Some((i, single));
                }
            }
        }
    }
    if let Some((i, single)) = seen {
        inf.took(
            i,
            format!(
                "PAUSE frames on priority {}{}",
                priority_list(mask),
                since_boot(single)
            ),
        );
        inf.assume(
            "pfc_priorities",
            priority_list(mask),
            "no mlnx_qos given: PFC taken as on where ethtool -S counted PAUSE frames",
        );
        return Some(mask);
    }
    let global = inf
        .ev
        .links
        .iter()
        .find(|(_, l)| l.pause_rx == Some(true) || l.pause_tx == Some(true))
        .map(|&(i, l)| (i, l.pause_rx, l.pause_tx));
    let on_off = |v: Option<bool>| match v {
        Some(true) => "on",
        Some(false) => "off",
        None => "?",
    };
    let why = match global {
        Some((i, rx, tx)) => {
            inf.took(
                i,
                format!("global pause (802.3x) RX {} TX {}", on_off(rx), on_off(tx)),
            );
            "no mlnx_qos given; ethtool -a shows global pause on, modelled as PFC on the RoCE priority"
        }
        None => "no mlnx_qos or ethtool -S PAUSE counters given",
    };
    inf.assume("pfc_priorities", "3 (the simulator's default)", why);
    None
}

/// The priority RoCE ran on: the PFC priority ethtool -S counted most
/// bytes on (any priority without PFC settings); else the PFC priority
/// (assumed: 3 when it is among several); else none (assumed).
fn priority(inf: &mut Inference<'_>, pfc: Option<u8>) -> Option<u8> {
    let allowed = |p: u8| pfc.map_or(true, |m| m == 0 || m & (1 << p) != 0);
    let mut best: Option<(u8, u64, usize, bool)> = None;
    for p in (0..8u8).filter(|&p| allowed(p)) {
        let mut bytes = 0u64;
        let mut at = None;
        for dir in ["rx", "tx"] {
            if let Some((i, n, single)) =
                ethtool_counter(&inf.ev.ethtool, &format!("{dir}_prio{p}_bytes"))
            {
                bytes = bytes.saturating_add(n);
                at = Some((i, single));
            }
        }
        if let Some((i, single)) = at.filter(|_| bytes > 0) {
            if best.map_or(true, |b| bytes > b.1) {
                best = Some((p, bytes, i, single));
            }
        }
    }
    if let Some((p, bytes, i, single)) = best {
        inf.took(
            i,
            format!(
                "most bytes on priority {p} ({bytes} B){}: the RoCE priority",
                since_boot(single)
            ),
        );
        return Some(p);
    }
    match pfc {
        Some(mask) if mask != 0 => {
            let p = if mask.count_ones() > 1 && mask & (1 << 3) != 0 {
                3
            } else {
                mask.trailing_zeros() as u8
            };
            let why = if mask.count_ones() == 1 {
                "the traffic's priority is in no input: taken as the one PFC priority".to_string()
            } else {
                format!(
                    "the traffic's priority is in no input: taken as {p} of the PFC priorities {}",
                    priority_list(mask)
                )
            };
            inf.assume("priority", p.to_string(), why);
            Some(p)
        }
        _ => {
            inf.assume(
                "priority",
                "3 (the simulator's default)",
                "the traffic's priority is in no input (no ethtool -S per-priority bytes)",
            );
            None
        }
    }
}

/// mlnx_qos's trust mode.
fn trust(inf: &mut Inference<'_>) -> Option<String> {
    if let Some((i, t)) = inf
        .ev
        .qos
        .iter()
        .find_map(|&(i, q)| q.trust.clone().map(|t| (i, t)))
    {
        inf.took(i, format!("trust {t}"));
        return Some(t);
    }
    inf.assume(
        "trust",
        "the NICs and the switch agree on the priority",
        "no mlnx_qos gives the trust mode",
    );
    None
}

/// The RoCE version of perftest's GID index: show_gids, else the GID
/// table of ibv_devinfo -v; else RoCE v2 (assumed).
fn roce_version(
    inf: &mut Inference<'_>,
    device: Option<&str>,
    gid_index: Option<u32>,
) -> Option<bool> {
    let found = gid_index.and_then(|idx| {
        let listed = inf
            .ev
            .gids
            .iter()
            .find(|(_, g)| g.index == idx && device.map_or(true, |d| d == g.device))
            .map(|&(i, g)| {
                (
                    i,
                    format!("{} GID index {idx}", g.device),
                    g.version.clone(),
                )
            });
        listed.or_else(|| {
            host::devices(inf, device).into_iter().find_map(|(i, d)| {
                d.ports.iter().find_map(|p| {
                    p.attributes.iter().find_map(|(k, v)| {
                        let n: u32 = k
                            .strip_prefix("GID[")?
                            .strip_suffix(']')?
                            .trim()
                            .parse()
                            .ok()?;
                        let version = v.rsplit("RoCE ").next().filter(|_| v.contains("RoCE "))?;
                        (n == idx).then(|| {
                            (
                                i,
                                format!("{} GID[{idx}]", d.name),
                                version.trim().to_string(),
                            )
                        })
                    })
                })
            })
        })
    });
    if let Some((i, what, version)) = found {
        let v2 = version.eq_ignore_ascii_case("v2");
        inf.took(i, format!("{what}: RoCE {version}"));
        if !v2 {
            inf.assume(
                "roce_v2",
                "RoCE v2",
                format!("the run used a RoCE {version} GID; the simulator models RoCE v2 only"),
            );
        }
        return Some(v2);
    }
    let why = match gid_index {
        None => "perftest's header gives no GID index".to_string(),
        Some(idx) => format!("no show_gids or ibv_devinfo -v lists GID index {idx}"),
    };
    inf.assume(
        "roce_v2",
        "RoCE v2",
        format!("{why}: the simulator models RoCE v2"),
    );
    None
}

/// CNPs sent and handled (rdma statistic).
fn cnps(inf: &mut Inference<'_>) -> Option<u64> {
    let rdma: &[(usize, &RdmaSnapshot)] = &inf.ev.rdma;
    let sent = counter(rdma, |s| s.total("np_cnp_sent"));
    let handled = counter(rdma, |s| s.total("rp_cnp_handled"));
    let (i, single) = match (sent, handled) {
        (Some(s), _) => (s.0, s.2),
        (None, Some(h)) => (h.0, h.2),
        (None, None) => {
            let why = if inf.ev.rdma.is_empty() {
                "no rdma statistic given"
            } else {
                "the rdma statistic has no CNP counters"
            };
            inf.assume(
                "cnps",
                "no congestion control",
                format!("{why}: a single perftest flow meets no congestion in an idle switch"),
            );
            return None;
        }
    };
    let (s, h) = (sent.map_or(0, |x| x.1), handled.map_or(0, |x| x.1));
    let n = s.saturating_add(h);
    let then = if n > 0 {
        "DCQCN on"
    } else {
        "no congestion control"
    };
    inf.took(
        i,
        format!("{s} CNPs sent, {h} handled{}: {then}", since_boot(single)),
    );
    Some(n)
}
