//! [`UdpProvider`]: the emulation's device list (one device per IPv4
//! interface: `rocelab0` for loopback, `udp_<interface>` for the others) and how a device is opened, by entry or by GID.
//!
//! Contract: as [`Provider`]'s. Listing never binds; opening binds the
//! device's address and port ([`UdpBackend::open`]).

use std::net::SocketAddrV4;
use std::sync::Arc;

use roce::wire::ROCE_UDP_PORT;

use super::config::UdpConfig;
use super::device::UdpBackend;
use super::netdev::{device_name_for, interface_device_name, interfaces, node_guid_for};
use crate::backend::{Backend, BackendKind, DeviceEntry, Provider};
use crate::verbs::{Gid, Result, VerbsError};

/// Lists and opens emulated devices: one per IPv4 interface, bound to its
/// address on the RoCEv2 port.
#[derive(Debug, Clone)]
pub struct UdpProvider {
    /// UDP port the opened devices bind.
    pub port: u16,
}

impl Default for UdpProvider {
    fn default() -> Self {
        UdpProvider {
            port: ROCE_UDP_PORT,
        }
    }
}

impl Provider for UdpProvider {
    fn kind(&self) -> BackendKind {
        BackendKind::Udp
    }

    fn devices(&self) -> Result<Vec<DeviceEntry>> {
        Ok(interfaces()
            .into_iter()
            .map(|(name, ip)| {
                let bind = SocketAddrV4::new(ip, self.port);
                DeviceEntry {
                    name: interface_device_name(&name, ip),
                    node_guid: node_guid_for(bind),
                    kind: BackendKind::Udp,
                    detail: bind.to_string(),
                }
            })
            .collect())
    }

    fn open(&self, device: &DeviceEntry) -> Result<Arc<dyn Backend>> {
        let bind: SocketAddrV4 = device.detail.parse().map_err(|_| {
            VerbsError::invalid(
                "ibv_open_device",
                format!("{}: not a UDP device", device.name),
            )
        })?;
        let mut cfg = UdpConfig::new(bind);
        cfg.name = device.name.clone();
        Ok(Arc::new(UdpBackend::open(cfg)?))
    }

    /// An emulated device is its address: bind it. Any loopback address
    /// (127.0.0.0/8) or an interface's address opens; others are refused
    /// as `NoDevice`, as no device has that GID here.
    fn open_by_gid(&self, gid: Gid) -> Result<Arc<dyn Backend>> {
        let ip = gid.to_ipv4().ok_or_else(|| {
            VerbsError::NoDevice(format!(" with GID {gid} (the UDP backend is IPv4)"))
        })?;
        if !ip.is_loopback() && !interfaces().iter().any(|&(_, a)| a == ip) {
            return Err(VerbsError::NoDevice(format!(
                " with GID {gid}: {ip} is no address of this host"
            )));
        }
        let bind = SocketAddrV4::new(ip, self.port);
        let mut cfg = UdpConfig::new(bind);
        cfg.name = device_name_for(ip);
        Ok(Arc::new(UdpBackend::open(cfg)?))
    }
}
