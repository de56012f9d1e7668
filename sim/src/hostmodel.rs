//! The host side of a NIC (`[nic.host]`): PCIe and the message path, and
//! the closed forms built on them. The fabric's NICs use the per-transfer
//! times ([`HostParams::write_time`], [`HostParams::read_data_time`], ...);
//! the bounds ([`bw_limits`], [`latency`]) say what a perftest run can reach
//! and which part of the path sets it.
//!
//! # PCIe (per direction)
//!
//! A lane carries `GT/s x encoding` bits: Gen1 2.5 GT/s and Gen2 5 GT/s
//! with 8b/10b, Gen3 8, Gen4 16 and Gen5 32 GT/s with 128b/130b. Payload
//! travels in TLPs of at most MPS bytes (DMA writes, NIC to host: memory
//! writes with a 4-DW header) or `read_completion` bytes (DMA reads, host
//! to NIC: completions with a 3-DW header). Each TLP costs its header,
//! [`TLP_FRAMING`] bytes (framing, sequence number, LCRC) and
//! [`DLLP_SHARE`] bytes of link traffic for the ACK and flow-control
//! DLLPs it causes. A DMA read also sends one request TLP (4-DW header,
//! no payload) upstream per MRRS bytes. So the long-run payload bound of
//! DMA writes is `link x MPS / (MPS + 16 + 8 + 4)`: 56.8 Gb/s on Gen3 x8
//! at MPS 256, 227 Gb/s on Gen4 x16.
//!
//! # Message path
//!
//! Posting a work request rings a doorbell (`doorbell`); the NIC fetches
//! the WQE over PCIe (`read_latency`) unless it came with the doorbell
//! (`blueflame`, an idle send queue), then the payload (`read_latency`
//! plus its TLPs) unless it is inline. Each message takes `1 / qp_mpps`
//! of its QP and `1 / nic_mpps` of the NIC. The NIC adds `nic_latency`
//! each way. Received payload is written to host memory as TLPs and is
//! visible to the CPU `write_latency` later; so is a CQE (64 bytes).
//!
//! Units: bits per second, bytes, picoseconds.

use roce::time::{Duration, Rate};
use serde::{Deserialize, Serialize};

pub use crate::config::{HostParams, NicModel};
use crate::workload::perftest::PerftestTest;
use crate::workload::FlowOp;

/// Bytes each TLP carries besides its header: framing and sequence
/// number (the 4-byte STP token from Gen3; start, sequence and end
/// symbols before) and the 4-byte LCRC.
pub const TLP_FRAMING: u32 = 8;
/// Link bytes of ACK and flow-control DLLPs charged per TLP (an 8-byte
/// DLLP for every two TLPs).
pub const DLLP_SHARE: u32 = 4;
/// Bytes of a completion queue entry.
pub const CQE_BYTES: u32 = 64;
/// Header bytes of a memory write or read request with 64-bit addresses.
pub const HEADER_4DW: u32 = 16;
/// Header bytes of a completion.
pub const HEADER_3DW: u32 = 12;

impl HostParams {
    /// (transfers per second per lane, encoding numerator, denominator).
    fn lane(&self) -> (u64, u64, u64) {
        match self.pcie_gen {
            1 => (2_500_000_000, 8, 10),
            2 => (5_000_000_000, 8, 10),
            3 => (8_000_000_000, 128, 130),
            4 => (16_000_000_000, 128, 130),
            _ => (32_000_000_000, 128, 130),
        }
    }

    /// Link data rate after line encoding, bits per second, one direction.
    pub fn pcie_link_bps(&self) -> f64 {
        let (gt, num, den) = self.lane();
        gt as f64 * num as f64 / den as f64 * f64::from(self.pcie_width)
    }

    /// Bytes each TLP adds to its payload besides the header: framing,
    /// sequence number, LCRC and the DLLP share.
    pub fn tlp_framing(&self) -> u32 {
        TLP_FRAMING + DLLP_SHARE
    }

    /// Link bytes carrying `bytes` of payload in TLPs of at most `tlp`
    /// payload bytes with `header` header bytes (at least one TLP).
    pub fn link_bytes(&self, bytes: u64, tlp: u32, header: u32) -> u64 {
        let n = bytes.div_ceil(u64::from(tlp.max(1))).max(1);
        bytes + n * u64::from(header + self.tlp_framing())
    }

    /// Time `link_bytes` take on the link, rounded up to a picosecond.
    pub fn link_time(&self, link_bytes: u64) -> Duration {
        let (gt, num, den) = self.lane();
        let num_ps = u128::from(link_bytes) * 8 * 1_000_000_000_000 * u128::from(den);
        let per = u128::from(gt) * u128::from(num) * u128::from(self.pcie_width.max(1));
        Duration::from_ps(num_ps.div_ceil(per) as u64)
    }

    /// Link time of a DMA write of `bytes` (NIC to host).
    pub fn write_time(&self, bytes: u64) -> Duration {
        self.link_time(self.link_bytes(bytes, self.max_payload, HEADER_4DW))
    }

    /// Link time of the completions of a DMA read of `bytes` (host to
    /// NIC).
    pub fn read_data_time(&self, bytes: u64) -> Duration {
        self.link_time(self.link_bytes(bytes, self.read_completion, HEADER_3DW))
    }

    /// Link time of the read requests for `bytes` (NIC to host).
    pub fn read_request_time(&self, bytes: u64) -> Duration {
        let n = bytes
            .div_ceil(u64::from(self.max_read_request.max(1)))
            .max(1);
        self.link_time(n * u64::from(HEADER_4DW + self.tlp_framing()))
    }

    /// Long-run payload bound of DMA writes (NIC to host), bits/s.
    pub fn write_bound_bps(&self) -> f64 {
        let m = f64::from(self.max_payload);
        self.pcie_link_bps() * m / (m + f64::from(HEADER_4DW + self.tlp_framing()))
    }

    /// Long-run payload bound of DMA reads (host to NIC), bits/s.
    pub fn read_bound_bps(&self) -> f64 {
        let c = f64::from(self.read_completion);
        self.pcie_link_bps() * c / (c + f64::from(HEADER_3DW + self.tlp_framing()))
    }

    /// Time one message takes of the NIC's message engine.
    pub fn nic_gap(&self) -> Duration {
        Duration::from_ps((1e6 / self.nic_mpps).round() as u64)
    }

    /// Time one message takes of its QP.
    pub fn qp_gap(&self) -> Duration {
        Duration::from_ps((1e6 / self.qp_mpps).round() as u64)
    }

    /// One line: `connectx-5, PCIe Gen3 x16, MPS 256`.
    pub fn describe(&self) -> String {
        format!(
            "{}PCIe Gen{} x{}, MPS {} B, MRRS {} B",
            self.model
                .map_or(String::new(), |m| format!("{}, ", m.name())),
            self.pcie_gen,
            self.pcie_width,
            self.max_payload,
            self.max_read_request
        )
    }
}

/// Bytes on the wire of one message of `size` bytes split into packets of
/// `mtu` payload: Ethernet, IPv4, UDP, BTH, ICRC and FCS per packet (62
/// bytes, no preamble or gap, as the fabric counts them), RETH on the
/// first packet of a WRITE, AETH on the first and last READ response, the
/// payload padded to 4 bytes.
pub fn wire_bytes(op: FlowOp, size: u64, mtu: u32) -> u64 {
    let mtu = u64::from(mtu.max(1));
    let n = size.div_ceil(mtu).max(1);
    let per = 18 + 32 + 12;
    let ext = match op {
        FlowOp::Write => 16,
        FlowOp::Send => 0,
        FlowOp::Read => 4 * n.min(2),
    };
    let last = size - (n - 1) * mtu;
    let pad = (4 - last % 4) % 4;
    size + pad + n * per + ext
}

/// What limits a bandwidth test at one size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Limit {
    /// The link's payload rate.
    Wire,
    /// PCIe (DMA reads at the sender or writes at the receiver).
    Pcie,
    /// Messages per second (QP or NIC).
    MessageRate,
    /// `tx_depth x size / RTT`.
    Window,
    /// A latency test: the path's latency.
    Latency,
}

impl Limit {
    /// Display text.
    pub fn text(self) -> &'static str {
        match self {
            Limit::Wire => "wire",
            Limit::Pcie => "PCIe",
            Limit::MessageRate => "message rate",
            Limit::Window => "window",
            Limit::Latency => "latency",
        }
    }
}

/// The closed-form bounds of a bandwidth test at one size, bits/s of
/// payload (both directions together with `-b`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BwLimits {
    /// Message size, bytes.
    pub size: u64,
    /// The link's payload rate.
    pub wire_bps: f64,
    /// PCIe's (no host model: none).
    pub pcie_bps: Option<f64>,
    /// Message rate x size.
    pub msg_bps: Option<f64>,
    /// Window: outstanding bytes over the round trip.
    pub window_bps: f64,
    /// The unloaded round trip of one message, post to completion seen.
    pub rtt_ps: u64,
    /// The lowest of them.
    pub bound_bps: f64,
    /// Which one it is.
    pub limit: Limit,
}

/// The path between client and server: store-and-forward links.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathShape {
    /// Line rate of every link.
    pub rate: Rate,
    /// Links on the path (2 through one switch).
    pub links: u32,
    /// Propagation delay of each link.
    pub delay: Duration,
    /// Path MTU, payload bytes.
    pub mtu: u32,
}

impl PathShape {
    /// One-way time of a frame of `bytes` across the path.
    fn frame(&self, bytes: u64) -> Duration {
        (self.rate.serialization_time(bytes) + self.delay).saturating_mul(u64::from(self.links))
    }

    /// One-way time of a message of `size` over the path: the first
    /// packet's store-and-forward hops plus the rest serialised once.
    fn message(&self, op: FlowOp, size: u64) -> Duration {
        let all = wire_bytes(op, size, self.mtu);
        let first = wire_bytes(op, size.min(u64::from(self.mtu)), self.mtu);
        self.frame(first) + self.rate.serialization_time(all - first)
    }
}

/// Time to move `size` payload bytes over PCIe (the slower of the
/// sender's reads and the receiver's writes), for the bounds.
fn pcie_time(h: &HostParams, size: u64, inline: bool) -> Duration {
    let w = h.write_time(size);
    if inline {
        w
    } else {
        w.max(h.read_data_time(size))
    }
}

/// Bytes of a READ request frame and of an ACK frame.
const READ_REQUEST_FRAME: u64 = 18 + 32 + 12 + 16;
const ACK_FRAME: u64 = 18 + 32 + 12 + 4;

/// From the post to the first packet on the wire: the doorbell, the WQE
/// fetch (none for a lone WQE with `blueflame`), then the NIC's pipeline
/// or the first packet's payload fetch, whichever ends later.
fn depart(h: &HostParams, op: FlowOp, size: u64, inline: bool, mtu: u32, lone: bool) -> Duration {
    let wqe = h.doorbell
        + if h.blueflame && lone {
            Duration::ZERO
        } else {
            h.read_latency
        };
    let fetch = if inline || op == FlowOp::Read {
        Duration::ZERO
    } else {
        h.read_latency + h.read_data_time(size.min(u64::from(mtu)))
    };
    wqe + h.nic_latency.max(fetch)
}

/// From a completion to the application seeing it: the NIC's receive
/// pipeline, the CQE's DMA write and its latency.
fn cqe_seen(h: &HostParams) -> Duration {
    h.nic_latency + h.write_time(u64::from(CQE_BYTES)) + h.write_latency
}

/// The unloaded round trip of one message: post to the completion seen
/// by the application. `lone`: the send queue was empty (a WQE then
/// travels with its doorbell when the NIC supports it).
pub fn round_trip(
    h: Option<&HostParams>,
    op: FlowOp,
    size: u64,
    (inline, lone): (bool, bool),
    path: &PathShape,
) -> Duration {
    let Some(h) = h else {
        return match op {
            FlowOp::Read => path.frame(READ_REQUEST_FRAME) + path.message(op, size),
            _ => path.message(op, size) + path.frame(ACK_FRAME),
        };
    };
    match op {
        FlowOp::Read => {
            let first = size.min(u64::from(path.mtu));
            depart(h, op, size, inline, path.mtu, lone)
                + path.frame(READ_REQUEST_FRAME)
                + h.nic_latency
                + h.nic_latency.max(h.read_latency + h.read_data_time(first))
                + path.message(op, size)
                + cqe_seen(h)
        }
        _ => {
            depart(h, op, size, inline, path.mtu, lone)
                + path.message(op, size)
                + path.frame(ACK_FRAME)
                + cqe_seen(h)
        }
    }
}

/// The bounds of bandwidth test `test` at `size` with `qps` QPs of
/// `depth` outstanding work requests each.
pub fn bw_limits(
    h: Option<&HostParams>,
    test: PerftestTest,
    size: u64,
    (qps, depth, inline): (u32, u32, bool),
    bidirectional: bool,
    path: &PathShape,
) -> BwLimits {
    let op = test.op();
    let dirs = if bidirectional { 2.0 } else { 1.0 };
    let bits = size as f64 * 8.0;
    let wire_bps = path.rate.bps() as f64 * size as f64 / wire_bytes(op, size, path.mtu) as f64;
    let pcie_bps = h.map(|h| {
        let t = pcie_time(h, size, inline && op != FlowOp::Read).as_ps() as f64;
        bits / (t / 1e12)
    });
    let msg_bps = h.map(|h| {
        let mps = (h.qp_mpps * f64::from(qps.max(1))).min(h.nic_mpps) * 1e6;
        mps * bits
    });
    let rtt = round_trip(h, op, size, (inline, depth <= 1), path);
    let window_bps =
        f64::from(qps.max(1)) * f64::from(depth.max(1)) * bits / (rtt.as_ps().max(1) as f64 / 1e12);
    let mut best = (wire_bps, Limit::Wire);
    for (v, l) in [
        (pcie_bps, Limit::Pcie),
        (msg_bps, Limit::MessageRate),
        (Some(window_bps), Limit::Window),
    ] {
        if let Some(v) = v {
            if v < best.0 {
                best = (v, l);
            }
        }
    }
    BwLimits {
        size,
        wire_bps: wire_bps * dirs,
        pcie_bps: pcie_bps.map(|v| v * dirs),
        msg_bps: msg_bps.map(|v| v * dirs),
        window_bps: window_bps * dirs,
        rtt_ps: rtt.as_ps(),
        bound_bps: best.0 * dirs,
        limit: best.1,
    }
}

/// The unloaded latency a latency test reports at `size` (half the round
/// trip for WRITE and SEND ping-pongs, the whole READ round trip).
pub fn latency(
    h: Option<&HostParams>,
    test: PerftestTest,
    size: u64,
    inline: bool,
    path: &PathShape,
) -> Duration {
    let op = test.op();
    if op == FlowOp::Read {
        return round_trip(h, op, size, (inline, true), path);
    }
    let Some(h) = h else {
        // The answer follows the ACK of the message it answers out of
        // the same port.
        return path.rate.serialization_time(ACK_FRAME) + path.message(op, size);
    };
    // The last packet's payload is written to host memory, then seen.
    let mtu = u64::from(path.mtu.max(1));
    let last = size - (size.max(1) - 1) / mtu * mtu;
    let cqe = if op == FlowOp::Send {
        h.write_time(u64::from(CQE_BYTES))
    } else {
        Duration::ZERO
    };
    depart(h, op, size, inline, path.mtu, true)
        + path.message(op, size)
        + h.write_time(last)
        + h.nic_latency
        + h.write_latency
        + cqe
}
