//! Backends: what carries the verbs.
//!
//! * the device interface (`device.rs`): [`Backend`] (one opened device,
//!   one method per verb, over plain handles) and [`Provider`] (finding
//!   and opening devices), with its contract for implementors;
//! * [`udp`]: the emulation, RoCEv2 over a UDP socket driven by the
//!   sans-IO transport engine;
//! * [`ibverbs`]: real RDMA hardware through libibverbs;
//! * [`io`], [`sys`], [`fault`], [`capture`]: the UDP backend's datagram
//!   path and what can wrap it; [`counters`]: counter names and views.
//!
//! [`open`] composes a device from an [`OpenRequest`], the one entry point
//! the tools use. The handle types ([`PdHandle`], ...) live with the verbs
//! vocabulary (`verbs::handle`) and are re-exported here, where the
//! backend interface that hands them out is.
//!
//! Layering (no file imports one above it): the verbs vocabulary
//! (`verbs::{types, error, handle, qp_state}`) < the device interface
//! (`backend::device`) < the backends (`udp`, `ibverbs`) and this file's
//! [`open`] < the verbs objects (`verbs`'s `Context`, `QueuePair`, ...).

use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;

use crate::verbs::{Result, VerbsError};

pub mod capture;
pub mod counters;
mod device;
pub mod fault;
pub mod ibverbs;
pub mod io;
pub mod sys;
pub mod udp;

pub use self::device::{
    AsyncEvent, Backend, BackendKind, DeviceEntry, MrChange, MrKeys, Provider, QpCreated,
};
pub use self::device::{MrAdvice, OdpCaps};
pub use crate::verbs::handle::{AhHandle, CqHandle, DmHandle, MrHandle, PdHandle, QpHandle};

/// What to open: the backend, and for the UDP backend the address, port,
/// transmit-path faults and capture. The one entry point the tools use
/// (`rocelab perftest`, examples).
#[derive(Debug, Clone, PartialEq)]
pub struct OpenRequest {
    /// Which backend.
    pub kind: BackendKind,
    /// Device name (`-d`); the UDP backend names devices after the address.
    pub device: Option<String>,
    /// Address to bind (UDP).
    pub bind: Ipv4Addr,
    /// UDP port (4791).
    pub udp_port: u16,
    /// Transmit-path faults (UDP).
    pub faults: fault::FaultConfig,
    /// Capture file (UDP).
    pub pcap: Option<PathBuf>,
    /// Spin instead of sleeping while waiting for completions.
    pub busy_poll: bool,
    /// Congestion control of the device's QPs (UDP; a NIC's is set in
    /// its firmware): DCQCN at the link's speed or none, and the CNP
    /// interval.
    pub cc: roce::cc::CcSpec,
    /// Check received ICRCs against the expected IPv4 header only (UDP;
    /// [`udp::UdpConfig::strict_icrc`]); a NIC sees the real header.
    pub strict_icrc: bool,
}

/// Open the device `req` names, composing the UDP datagram path as
/// `capture(faults(socket))` when asked.
pub fn open(req: &OpenRequest) -> Result<Arc<dyn Backend>> {
    match req.kind {
        BackendKind::Udp => {
            let mut cfg = udp::UdpConfig::new(SocketAddrV4::new(req.bind, req.udp_port));
            if let Some(d) = &req.device {
                cfg.name = d.clone();
            }
            cfg.busy_poll = req.busy_poll;
            cfg.strict_icrc = req.strict_icrc;
            cfg.set_cc(&req.cc);
            if req.busy_poll {
                cfg.socket.busy_poll_us = 50;
            }
            let faults = req.faults;
            let pcap = req.pcap.clone();
            let b = udp::UdpBackend::open_with(cfg, move |sock| {
                let inner: Box<dyn io::DatagramIo> = if faults.any() {
                    Box::new(fault::FaultInjector::new(sock, faults))
                } else {
                    Box::new(sock)
                };
                Ok(match pcap {
                    Some(p) => Box::new(capture::PcapCapture::create(inner, &p)?),
                    None => inner,
                })
            })?;
            Ok(Arc::new(b))
        }
        BackendKind::Ibverbs => {
            // A NIC's wire is out of our reach: faults and capture wrap the
            // UDP datagram path only, and RoCEv2 NICs send to UDP 4791.
            if req.faults.any() || req.pcap.is_some() {
                return Err(VerbsError::invalid(
                    "ibv_open_device",
                    "fault injection and pcap capture wrap the UDP backend's datagrams; \
                     a hardware NIC's wire cannot be reached (use --backend udp)",
                ));
            }
            if req.cc != roce::cc::CcSpec::default() {
                return Err(VerbsError::invalid(
                    "ibv_open_device",
                    format!(
                        "congestion control {}: a NIC's DCQCN and CNP interval are set in \
                         its firmware (mlxconfig, sysfs roce_np/roce_rp), not per run \
                         (--cc applies to --backend udp)",
                        req.cc
                    ),
                ));
            }
            if req.udp_port != 4791 {
                return Err(VerbsError::invalid(
                    "ibv_open_device",
                    format!("UDP port {}: a RoCEv2 NIC always uses 4791", req.udp_port),
                ));
            }
            // busy_poll needs nothing here: polling never blocks, and
            // wait_cq sleeps on the completion channel; strict_icrc
            // neither: the NIC checks the ICRC against the real header.
            Ok(Arc::new(ibverbs::IbverbsBackend::open(
                req.device.as_deref(),
            )?))
        }
    }
}
