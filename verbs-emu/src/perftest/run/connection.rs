//! Reaching the peer and opening the device: the TCP connection (`-p`,
//! client or server), the device name check (`-d`), and the device opened
//! at the address the connection reveals (on loopback, a client moves to
//! another 127/8 address or UDP port).
//!
//! Contract: a missing device fails before any peer is waited for; an
//! address already taken is retried elsewhere only where this side chose
//! it (a client without `--bind`).

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use super::error::{PerftestError, Result};
use crate::backend::{self, BackendKind, OpenRequest};
use crate::perftest::Config;
use crate::verbs::{Context, VerbsError};

/// The device `-d` names, as the backend knows it: the emulation's
/// loopback device answers to its former name `udp_lo` too.
fn device_name(cfg: &Config) -> Option<String> {
    let name = cfg.ib_dev.as_ref()?;
    if cfg.backend == BackendKind::Udp && name == crate::backend::udp::LOOPBACK_DEVICE_ALIAS {
        return Some(crate::backend::udp::LOOPBACK_DEVICE.into());
    }
    Some(name.clone())
}

/// As perftest's device lookup: `-d NAME` must name a device that exists,
/// before any peer is waited for. The emulation has one device per IPv4
/// interface (`rocelab0` for loopback, as the drop-in libibverbs names
/// it, then `udp_eth0`, ...); the hardware backend's open checks its own
/// names.
pub(super) fn check_device_exists(cfg: &Config) -> Result<()> {
    if cfg.backend != BackendKind::Udp {
        return Ok(());
    }
    let Some(name) = device_name(cfg) else {
        return Ok(());
    };
    use crate::backend::Provider as _;
    let names: Vec<String> = crate::backend::udp::UdpProvider::default()
        .devices()?
        .into_iter()
        .map(|d| d.name)
        .collect();
    if names.contains(&name) {
        return Ok(());
    }
    Err(PerftestError::Config(format!(
        " IB device {name} not found\n Unable to find the Infiniband/RoCE device (devices here: {})",
        names.join(", ")
    )))
}

fn to_v4(ip: IpAddr) -> Result<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Ok(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped().ok_or_else(|| {
            PerftestError::Config(format!("{v6}: the UDP backend speaks RoCEv2 over IPv4"))
        }),
    }
}

pub(super) fn connect(host: &str, port: u16) -> Result<(TcpStream, Ipv4Addr, Ipv4Addr)> {
    let addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|e| PerftestError::Oob(format!("cannot resolve {host}: {e}")))?
        .filter(SocketAddr::is_ipv4)
        .collect();
    let addr = *addrs
        .first()
        .ok_or_else(|| PerftestError::Oob(format!("{host} has no IPv4 address")))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    let stream = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if Instant::now() < deadline => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                return Err(PerftestError::Oob(format!(
                    "Couldn't connect to {addr}: {e}"
                )))
            }
        }
    };
    let local = to_v4(
        stream
            .local_addr()
            .map_err(|e| PerftestError::Oob(e.to_string()))?
            .ip(),
    )?;
    Ok((stream, local, to_v4(addr.ip())?))
}

pub(super) fn accept(port: u16) -> Result<(TcpStream, Ipv4Addr, Ipv4Addr)> {
    let l = TcpListener::bind((Ipv4Addr::UNSPECIFIED, port))
        .map_err(|e| PerftestError::Oob(format!("cannot listen on TCP port {port}: {e}")))?;
    let (s, peer) = l
        .accept()
        .map_err(|e| PerftestError::Oob(format!("accept: {e}")))?;
    let local = to_v4(
        s.local_addr()
            .map_err(|e| PerftestError::Oob(e.to_string()))?
            .ip(),
    )?;
    Ok((s, local, to_v4(peer.ip())?))
}

/// The addresses (and UDP ports) to try binding the emulated device to. On
/// loopback the client and the server share the host, so the client moves
/// to another 127/8 address (the server keeps the one the client connected
/// to); reaching its own host through another address, the client moves to
/// the next UDP ports instead (its endpoint tells the server which).
fn bind_candidates(
    cfg: &Config,
    server: bool,
    local: Ipv4Addr,
    peer: Ipv4Addr,
) -> Vec<(Ipv4Addr, u16)> {
    let port = cfg.udp_port;
    if let Some(b) = cfg.bind {
        return vec![(b, port)];
    }
    if server {
        return vec![(local, port)];
    }
    if !local.is_loopback() {
        if local != peer {
            return vec![(local, port)];
        }
        return (1..16u16).map(|k| (local, port.wrapping_add(k))).collect();
    }
    let o = peer.octets();
    let base = u32::from(Ipv4Addr::new(127, o[1], o[2], o[3]));
    (1..64u32)
        .map(|k| {
            let mut v = base.wrapping_add(k);
            if (v & 0xFF) == 0 || (v & 0xFF) == 0xFF {
                v = v.wrapping_add(2);
            }
            Ipv4Addr::from(0x7F00_0000 | (v & 0x00FF_FFFF))
        })
        .filter(|a| *a != peer)
        .map(|a| (a, port))
        .collect()
}

pub(super) fn open_device(
    cfg: &Config,
    server: bool,
    local: Ipv4Addr,
    peer: Ipv4Addr,
) -> Result<Context> {
    let mut last = None;
    for (ip, udp_port) in bind_candidates(cfg, server, local, peer) {
        let req = OpenRequest {
            kind: cfg.backend,
            device: device_name(cfg),
            bind: ip,
            udp_port,
            faults: cfg.faults,
            pcap: cfg.pcap.clone(),
            busy_poll: cfg.busy_poll.unwrap_or(!cfg.test.is_bw() && !cfg.events),
            cc: cfg.cc,
            strict_icrc: cfg.strict_icrc,
        };
        match backend::open(&req) {
            Ok(b) => return Ok(Context::from_backend(b)),
            Err(VerbsError::Os { source, .. })
                if source.kind() == std::io::ErrorKind::AddrInUse
                    && cfg.bind.is_none()
                    && !server =>
            {
                last = Some(VerbsError::Os {
                    verb: "bind",
                    source,
                });
            }
            Err(VerbsError::Os { verb, source }) if source.kind() == std::io::ErrorKind::AddrInUse => {
                return Err(PerftestError::Config(format!(
                    "{verb} {ip}:{udp_port}: {source}; another device is there: pick another address with --bind or port with --udp-port"
                )))
            }
            Err(e) => return Err(e.into()),
        }
    }
    Err(last
        .unwrap_or_else(|| VerbsError::NoDevice(" to bind".into()))
        .into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perftest::Test;

    #[test]
    fn loopback_client_moves_to_another_address() {
        let cfg = Config::new(Test::WriteBw);
        let lo = Ipv4Addr::LOCALHOST;
        let c = bind_candidates(&cfg, false, lo, lo);
        assert_eq!(c[0], (Ipv4Addr::new(127, 0, 0, 2), 4791));
        assert!(!c.iter().any(|(a, _)| *a == lo));
        assert_eq!(bind_candidates(&cfg, true, lo, lo), vec![(lo, 4791)]);
        let remote = Ipv4Addr::new(10, 0, 0, 1);
        let local = Ipv4Addr::new(10, 0, 0, 2);
        assert_eq!(
            bind_candidates(&cfg, false, local, remote),
            vec![(local, 4791)]
        );
        // Its own host through a real address: same address, next ports.
        assert_eq!(
            bind_candidates(&cfg, false, remote, remote)[0],
            (remote, 4792)
        );
    }
}
