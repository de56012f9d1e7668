//! Packet capture: a tap on chosen link directions (`[record] pcap`).
//!
//! The fabric moves lengths and headers, never payload bytes. A tap turns
//! each frame a tapped port starts to transmit into the bytes a real NIC or
//! switch would put on the wire, with the core's (`roce`) wire module: Ethernet,
//! IPv4 (DSCP = priority × 8, the frame's ECN codepoint), UDP to 4791
//! (checksum 0, as RoCE NICs send it), the BTH and extension headers the
//! transport engine produced, a zero-filled payload of the real length,
//! pad and a valid ICRC. PFC frames are 802.1Qbb frames for the one
//! priority they pause (quanta 0 = XON). Frames are stored without FCS,
//! so every RoCE frame is `Packet::wire - 4` bytes and every PFC frame 60.
//!
//! Timestamps are simulated time (picoseconds, truncated to the pcap's
//! nanoseconds) at which the first bit leaves the transmitting port. A
//! frame a link fault loses is captured (the tap sits before the fault).
//! MAC addresses name the ports: `02:00:NN:NN:PP:PP` with the node index
//! and port number of the transmitter (source) and of its peer
//! (destination).
//!
//! Cost: a run without taps holds `None` and pays one branch per frame;
//! the tap itself is a lookup in a per-port table and one write into a
//! reusable buffer.

use roce::time::Instant;
use roce::wire::{
    EthernetRepr, IpRepr, MacAddr, PayloadSource, PcapWriter, PfcRepr, RoceRepr, UdpChecksum,
};

use super::event::NONE;
use super::packet::Packet;
use super::port::Port;
use crate::config::SimConfig;
use crate::options::SimError;
use crate::results::CaptureFile;
use crate::topology::{host_ip, Topology};
use roce::wire::ROCE_UDP_PORT;

/// One tapped port.
#[derive(Debug)]
struct Tap {
    name: String,
    writer: PcapWriter<Vec<u8>>,
    frames: u64,
    max_frames: u64,
    dropped: u64,
    eth: EthernetRepr,
}

/// Every tap of a run.
#[derive(Debug)]
pub(crate) struct Taps {
    /// Per global port: index into `taps`, or [`NONE`].
    by_port: Vec<u32>,
    taps: Vec<Tap>,
    /// Scratch for one frame.
    buf: Vec<u8>,
}

/// The MAC address of a port: `02:00` then the node index and the port
/// number, 16 bits each.
fn port_mac(node: u32, port: u16) -> MacAddr {
    let n = node.to_be_bytes();
    let p = port.to_be_bytes();
    MacAddr(0x02, 0x00, n[2], n[3], p[0], p[1])
}

impl Taps {
    /// The taps `cfg.record.pcap` asks for, or `None` when it asks for
    /// none. `node_port_base[n]` is the global id of node `n`'s port 0.
    pub(crate) fn build(
        topo: &Topology,
        cfg: &SimConfig,
        node_port_base: &[u32],
        ports: &[Port],
    ) -> Result<Option<Box<Taps>>, SimError> {
        if cfg.record.pcap.is_empty() {
            return Ok(None);
        }
        let mut by_port = vec![NONE; ports.len()];
        let mut taps = Vec::new();
        for (i, sel) in cfg.record.pcap.iter().enumerate() {
            let (node, local) = sel
                .resolve(topo)
                .map_err(|(k, message)| SimError::Selector {
                    key: format!("record.pcap[{i}].{k}"),
                    message,
                })?;
            let p = node_port_base[node.0 as usize] + u32::from(local);
            if by_port[p as usize] != NONE {
                return Err(SimError::Selector {
                    key: format!("record.pcap[{i}]"),
                    message: "this link direction is already captured: expected each once"
                        .to_string(),
                });
            }
            let port = &ports[p as usize];
            let peer = &ports[port.peer as usize];
            let name = format!(
                "{}-{}",
                topo.node(node).name,
                topo.nodes[peer.node as usize].name
            );
            by_port[p as usize] = taps.len() as u32;
            taps.push(Tap {
                name,
                // Writing into a Vec cannot fail.
                writer: PcapWriter::new(Vec::new()).map_err(|e| SimError::Selector {
                    key: format!("record.pcap[{i}]"),
                    message: e.to_string(),
                })?,
                frames: 0,
                max_frames: sel.max_frames,
                dropped: 0,
                eth: EthernetRepr {
                    src: port_mac(port.node, port.local),
                    dst: port_mac(peer.node, peer.local),
                    vlan: None,
                },
            });
        }
        Ok(Some(Box::new(Taps {
            by_port,
            taps,
            buf: vec![0; 16 * 1024],
        })))
    }

    /// Port `p` starts sending the RoCE frame `pkt` at `now`.
    pub(crate) fn roce(&mut self, p: u32, pkt: &Packet, now: Instant) {
        let Some(&t) = self.by_port.get(p as usize) else {
            return;
        };
        if t == NONE {
            return;
        }
        let tap = &mut self.taps[t as usize];
        if tap.frames >= tap.max_frames {
            tap.dropped += 1;
            return;
        }
        let repr = RoceRepr {
            ip: IpRepr::V4 {
                src: host_ip(pkt.src),
                dst: host_ip(pkt.dst),
                dscp: (pkt.prio & 7) << 3,
                ecn: pkt.ecn,
                ttl: 64,
                identification: 0,
                dont_fragment: true,
            },
            src_port: pkt.sport,
            dst_port: ROCE_UDP_PORT,
            udp_checksum: UdpChecksum::Zero,
            headers: pkt.headers,
            payload_len: pkt.payload as usize,
        };
        let need = repr.frame_len(&tap.eth);
        if self.buf.len() < need {
            self.buf.resize(need, 0);
        }
        let payload = PayloadSource::Zeroed(pkt.payload as usize);
        match repr.emit_frame(&tap.eth, &mut self.buf, payload) {
            Ok(n) => {
                if tap.writer.write_frame(now, &self.buf[..n]).is_ok() {
                    tap.frames += 1;
                } else {
                    tap.dropped += 1;
                }
            }
            // Headers the engine built always emit; count rather than panic.
            Err(_) => tap.dropped += 1,
        }
    }

    /// Port `p` starts sending a PFC frame for `prio` with `quanta` (0:
    /// XON) at `now`.
    pub(crate) fn pfc(&mut self, p: u32, prio: u8, quanta: u16, now: Instant) {
        let Some(&t) = self.by_port.get(p as usize) else {
            return;
        };
        if t == NONE {
            return;
        }
        let tap = &mut self.taps[t as usize];
        if tap.frames >= tap.max_frames {
            tap.dropped += 1;
            return;
        }
        match PfcRepr::pfc_one(prio, quanta).emit_frame(tap.eth.src, &mut self.buf) {
            Ok(n) if tap.writer.write_frame(now, &self.buf[..n]).is_ok() => tap.frames += 1,
            _ => tap.dropped += 1,
        }
    }

    /// The pcap files, in `record.pcap` order.
    pub(crate) fn finish(self) -> Vec<CaptureFile> {
        self.taps
            .into_iter()
            .map(|t| CaptureFile {
                name: t.name,
                frames: t.frames,
                frames_not_written: t.dropped,
                pcap: t.writer.into_inner(),
            })
            .collect()
    }
}
