//! Which devices exist: `ROCELAB_IBV_DEVICES`, or one loopback device;
//! their congestion control: `ROCELAB_IBV_CC`; their receive ICRC check:
//! `ROCELAB_IBV_ICRC`.

use std::net::{Ipv4Addr, SocketAddrV4};

use verbs_emu::cc::CcSpec;
use verbs_emu::wire::ROCE_UDP_PORT;

/// The environment variable listing devices: `NAME=IPV4[:PORT],...`.
pub const DEVICES_ENV: &str = "ROCELAB_IBV_DEVICES";

/// The environment variable naming every device's congestion control:
/// `none`, `dcqcn`, `dcqcn:paper`, `dcqcn:firmware`, `swift` or `timely`,
/// then optional `,KEY=VALUE` parameters as `rocelab perftest --cc-param`
/// takes them (the keys of the algorithm's `[nic.cc.*]` table,
/// `min_time_between_cnps` for the CNP interval, `line_rate`).
pub const CC_ENV: &str = "ROCELAB_IBV_CC";

/// The environment variable naming every device's receive ICRC check:
/// `solve` (the default: the IPv4 identification a path's re-segmentation
/// changed is solved for) or `strict` (the expected header only, with
/// CRC-32's guarantees for two-bit errors and short bursts).
pub const ICRC_ENV: &str = "ROCELAB_IBV_ICRC";

/// Parse a `ROCELAB_IBV_ICRC` value: whether the check is strict.
pub fn parse_icrc(text: &str) -> Result<bool, String> {
    match text.trim() {
        "strict" => Ok(true),
        "solve" => Ok(false),
        other => Err(format!("{ICRC_ENV}: {other:?}: expected strict or solve")),
    }
}

/// Parse a `ROCELAB_IBV_CC` value. Errors name the variable, the part and
/// what was expected.
pub fn parse_cc(text: &str) -> Result<CcSpec, String> {
    let mut parts = text.split(',');
    let alg = parts.next().unwrap_or_default();
    let mut spec = CcSpec::parse(alg).map_err(|e| format!("{CC_ENV}: {e}"))?;
    for p in parts {
        spec.set_param(p)
            .map_err(|e| format!("{CC_ENV}: {p:?}: {e}"))?;
    }
    spec.validate().map_err(|e| format!("{CC_ENV}: {e}"))?;
    Ok(spec)
}

/// One device of the list.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceSpec {
    /// `ibv_get_device_name`.
    pub name: String,
    /// The address to bind; `None`: a fresh `127.0.H.L` per process (its
    /// contexts share it).
    pub bind: Option<SocketAddrV4>,
    /// Congestion control of the device's QPs (`ROCELAB_IBV_CC`).
    pub cc: CcSpec,
    /// The strict receive ICRC check (`ROCELAB_IBV_ICRC=strict`).
    pub strict_icrc: bool,
}

impl DeviceSpec {
    /// The default device: `rocelab0` on an automatic loopback address.
    pub fn loopback() -> DeviceSpec {
        DeviceSpec {
            name: "rocelab0".into(),
            bind: None,
            cc: CcSpec::default(),
            strict_icrc: false,
        }
    }

    /// Parse a `ROCELAB_IBV_DEVICES` value. Errors name the entry (1-based)
    /// and what was expected.
    pub fn parse_list(text: &str) -> Result<Vec<DeviceSpec>, String> {
        let mut out: Vec<DeviceSpec> = Vec::new();
        for (i, entry) in text.split(',').enumerate() {
            let entry = entry.trim();
            let bad = |why: &str| {
                format!(
                    "{DEVICES_ENV}: entry {} {entry:?}: {why} (expected NAME=IPV4[:PORT], \
                     e.g. rocelab0=127.0.0.1:4791)",
                    i + 1
                )
            };
            let Some((name, addr)) = entry.split_once('=') else {
                return Err(bad("no `=`"));
            };
            let name = name.trim();
            if name.is_empty() || name.len() >= 64 || !name.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(bad("the name must be 1..=63 printable characters"));
            }
            if out.iter().any(|d| d.name == name) {
                return Err(bad("the name is listed twice"));
            }
            let addr = addr.trim();
            let bind = match addr.parse::<SocketAddrV4>() {
                Ok(a) => a,
                Err(_) => match addr.parse::<Ipv4Addr>() {
                    Ok(ip) => SocketAddrV4::new(ip, ROCE_UDP_PORT),
                    Err(_) => return Err(bad("not an IPv4 address with an optional port")),
                },
            };
            out.push(DeviceSpec {
                name: name.into(),
                bind: Some(bind),
                cc: CcSpec::default(),
                strict_icrc: false,
            });
        }
        Ok(out)
    }

    /// The devices of this process: from the environment, or the loopback
    /// default, with the congestion control `ROCELAB_IBV_CC` names and the
    /// ICRC check `ROCELAB_IBV_ICRC` names.
    pub fn from_env() -> Result<Vec<DeviceSpec>, String> {
        let mut list = match std::env::var(DEVICES_ENV) {
            Ok(v) if !v.trim().is_empty() => DeviceSpec::parse_list(&v)?,
            _ => vec![DeviceSpec::loopback()],
        };
        if let Ok(v) = std::env::var(CC_ENV) {
            if !v.trim().is_empty() {
                let cc = parse_cc(&v)?;
                for d in &mut list {
                    d.cc = cc;
                }
            }
        }
        if let Ok(v) = std::env::var(ICRC_ENV) {
            if !v.trim().is_empty() {
                let strict = parse_icrc(&v)?;
                for d in &mut list {
                    d.strict_icrc = strict;
                }
            }
        }
        Ok(list)
    }
}

/// The loopback addresses an automatic device tries, first choice first:
/// `127.0.H.L` with `H << 8 | L` in `1..0xC000` (a unicast LID), starting
/// from the process id.
pub fn loopback_candidates(pid: u32) -> impl Iterator<Item = SocketAddrV4> {
    let start = pid % 0xBFFF;
    (0..0xBFFFu32).map(move |k| {
        let lid = (start + k) % 0xBFFF + 1;
        SocketAddrV4::new(
            Ipv4Addr::new(127, 0, (lid >> 8) as u8, lid as u8),
            ROCE_UDP_PORT,
        )
    })
}

/// The LID a port at `ip` reports: the address's low 16 bits.
pub fn lid_of(ip: Ipv4Addr) -> u16 {
    let o = ip.octets();
    u16::from_be_bytes([o[2], o[3]])
}

/// The address a GRH-less address vector with `dlid` names, seen from a
/// port at `local`: `local` with its low 16 bits replaced.
pub fn ip_of_lid(local: Ipv4Addr, dlid: u16) -> Ipv4Addr {
    let o = local.octets();
    let l = dlid.to_be_bytes();
    Ipv4Addr::new(o[0], o[1], l[0], l[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_addresses_and_ports() {
        let d = DeviceSpec::parse_list("a=10.0.0.1, b=127.0.0.2:5000").unwrap();
        assert_eq!(d[0].name, "a");
        assert_eq!(d[0].bind, Some("10.0.0.1:4791".parse().unwrap()));
        assert_eq!(d[1].bind, Some("127.0.0.2:5000".parse().unwrap()));
    }

    #[test]
    fn bad_entries_say_which_and_why() {
        let e = DeviceSpec::parse_list("a=10.0.0.1,b").unwrap_err();
        assert!(e.contains("entry 2") && e.contains("no `=`"), "{e}");
        let e = DeviceSpec::parse_list("a=10.0.0.300").unwrap_err();
        assert!(e.contains("not an IPv4"), "{e}");
        let e = DeviceSpec::parse_list("a=1.2.3.4,a=1.2.3.5").unwrap_err();
        assert!(e.contains("twice"), "{e}");
    }

    #[test]
    fn congestion_control_reads_like_the_perftest_flags() {
        use verbs_emu::cc::{DcqcnModel, CONNECTX_CNP_INTERVAL};
        use verbs_emu::time::{Duration, Rate};
        let c = parse_cc("dcqcn:firmware").unwrap();
        assert_eq!(c.dcqcn, Some(DcqcnModel::Firmware));
        assert_eq!(c.cnp_interval(), CONNECTX_CNP_INTERVAL);
        let c = parse_cc("dcqcn:paper,rate_ai=80Mbps,min_time_between_cnps=8us").unwrap();
        assert_eq!(c.dcqcn, Some(DcqcnModel::Paper));
        assert_eq!(c.overrides.rate_ai, Some(Rate::from_bps(80_000_000)));
        assert_eq!(c.cnp_interval(), Duration::from_us(8));
        assert_eq!(parse_cc("none").unwrap(), CcSpec::default());
        let e = parse_cc("dcqcn:fast").unwrap_err();
        assert!(
            e.starts_with("ROCELAB_IBV_CC: ") && e.contains("expected none"),
            "{e}"
        );
        let e = parse_cc("dcqcn,rate_ai").unwrap_err();
        assert!(e.contains("\"rate_ai\"") && e.contains("KEY=VALUE"), "{e}");
        let e = parse_cc("none,g=0.5").unwrap_err();
        assert!(e.contains("need dcqcn congestion control"), "{e}");
    }

    #[test]
    fn the_icrc_check_is_strict_or_solving_and_nothing_else() {
        assert_eq!(parse_icrc("strict"), Ok(true));
        assert_eq!(parse_icrc(" solve "), Ok(false));
        let e = parse_icrc("loose").unwrap_err();
        assert!(
            e.starts_with("ROCELAB_IBV_ICRC: ") && e.contains("strict or solve"),
            "{e}"
        );
    }

    #[test]
    fn loopback_addresses_are_unicast_lids_and_round_trip() {
        for pid in [0, 1, 0xBFFE, 0xBFFF, 123_456, u32::MAX] {
            for a in loopback_candidates(pid).take(3) {
                let lid = lid_of(*a.ip());
                assert!((1..0xC000).contains(&lid), "{a}");
                assert_eq!(ip_of_lid(*a.ip(), lid), *a.ip());
                assert_eq!(a.ip().octets()[..2], [127, 0]);
            }
        }
        let n = loopback_candidates(7).collect::<std::collections::HashSet<_>>();
        assert_eq!(n.len(), 0xBFFF, "every candidate is distinct");
    }
}
