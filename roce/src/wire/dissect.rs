//! One-line decoding of captured Ethernet frames, like a small tshark for
//! RoCE: RoCEv2 packets (every field of the BTH and extension headers, the
//! lengths and whether the ICRC is right) and MAC control frames (PFC and
//! PAUSE). Anything else is named and left alone.
//!
//! [`decode_frame`] never panics; a packet that fails to parse is reported
//! with the reason.

use core::fmt;

use pnet_packet::ethernet::{EtherType, EtherTypes, EthernetPacket};
use pnet_packet::ipv4::Ipv4Packet;
use pnet_packet::ipv6::Ipv6Packet;
use pnet_packet::udp::UdpPacket;

use super::icrc::ROCE_UDP_PORT;
use super::{pfc, roce, Error, IpRepr, PfcRepr, RocePacket, RoceRepr};

/// What a frame turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// A RoCEv2 packet whose headers parsed.
    Roce {
        /// The 802.1Q priority, if the frame had a VLAN tag.
        vlan_pcp: Option<u8>,
        /// The packet.
        repr: RoceRepr,
        /// The ICRC check: `Ok` or [`Error::BadIcrc`].
        icrc: Result<(), Error>,
    },
    /// A RoCEv2 packet (UDP port 4791) that did not parse.
    BadRoce {
        /// Why.
        error: Error,
        /// The IP packet length.
        len: usize,
    },
    /// A PFC or PAUSE frame.
    MacControl(PfcRepr),
    /// A MAC control frame with another opcode, or too short.
    BadMacControl,
    /// Anything else, with its EtherType (and UDP ports for UDP).
    Other {
        /// The EtherType.
        ethertype: u16,
        /// UDP source and destination port, for UDP over IP.
        udp_ports: Option<(u16, u16)>,
    },
    /// Shorter than an Ethernet header.
    Runt(usize),
}

impl Decoded {
    /// True for a RoCE packet that parsed with a correct ICRC, or a valid
    /// MAC control frame.
    pub fn is_good(&self) -> bool {
        matches!(
            self,
            Decoded::Roce { icrc: Ok(()), .. } | Decoded::MacControl(_)
        )
    }
}

/// Decode one Ethernet frame (no FCS).
pub fn decode_frame(frame: &[u8]) -> Decoded {
    let Some(eth) = EthernetPacket::new(frame) else {
        return Decoded::Runt(frame.len());
    };
    let mut ethertype = eth.get_ethertype();
    let mut body = &frame[14..];
    let mut vlan_pcp = None;
    if ethertype == EtherTypes::Vlan {
        if body.len() < 4 {
            return Decoded::Runt(frame.len());
        }
        vlan_pcp = Some(body[0] >> 5);
        ethertype = EtherType(u16::from_be_bytes([body[2], body[3]]));
        body = &body[4..];
    }
    if ethertype == EtherTypes::FlowControl {
        return match pfc::Packet::new_checked(body).and_then(|p| PfcRepr::parse(&p)) {
            Ok(r) => Decoded::MacControl(r),
            Err(_) => Decoded::BadMacControl,
        };
    }
    let udp_ports = udp_ports(ethertype, body);
    match udp_ports {
        Some((_, ROCE_UDP_PORT)) => decode_roce(body, vlan_pcp),
        _ => Decoded::Other {
            ethertype: ethertype.0,
            udp_ports,
        },
    }
}

fn udp_ports(ethertype: EtherType, body: &[u8]) -> Option<(u16, u16)> {
    let payload = if ethertype == EtherTypes::Ipv4 {
        let ip = Ipv4Packet::new(body)?;
        if ip.get_next_level_protocol().0 != 17 {
            return None;
        }
        let start = usize::from(ip.get_header_length()) * 4;
        body.get(start..)?
    } else if ethertype == EtherTypes::Ipv6 {
        let ip = Ipv6Packet::new(body)?;
        if ip.get_next_header().0 != 17 {
            return None;
        }
        body.get(40..)?
    } else {
        return None;
    };
    let udp = UdpPacket::new(payload)?;
    Some((udp.get_source(), udp.get_destination()))
}

fn decode_roce(ip: &[u8], vlan_pcp: Option<u8>) -> Decoded {
    let bad = |error| Decoded::BadRoce {
        error,
        len: ip.len(),
    };
    let packet = match RocePacket::new_checked(ip) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    match RoceRepr::parse_unverified(&packet) {
        Ok(repr) => Decoded::Roce {
            vlan_pcp,
            repr,
            icrc: packet.verify_icrc(),
        },
        Err(e) => bad(e),
    }
}

impl fmt::Display for Decoded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Decoded::Roce {
                vlan_pcp,
                repr,
                icrc,
            } => {
                if let Some(pcp) = vlan_pcp {
                    write!(f, "vlan pcp={pcp} ")?;
                }
                write_roce(f, repr)?;
                match icrc {
                    Ok(()) => f.write_str(" | ICRC ok"),
                    Err(Error::BadIcrc { carried, computed }) => write!(
                        f,
                        " | ICRC BAD carried={carried:#010x} computed={computed:#010x}"
                    ),
                    Err(e) => write!(f, " | ICRC {e}"),
                }
            }
            Decoded::BadRoce { error, len } => write!(f, "RoCEv2 ({len} bytes): {error}"),
            Decoded::MacControl(r) => write!(f, "MAC control {r}"),
            Decoded::BadMacControl => f.write_str("MAC control: unknown opcode or truncated"),
            Decoded::Other {
                ethertype,
                udp_ports: Some((s, d)),
            } => write!(f, "ethertype {ethertype:#06x} UDP {s} > {d} (not RoCE)"),
            Decoded::Other {
                ethertype,
                udp_ports: None,
            } => write!(f, "ethertype {ethertype:#06x} (not decoded)"),
            Decoded::Runt(n) => write!(f, "runt frame of {n} bytes"),
        }
    }
}

/// `src:port > dst:port OPCODE qp= psn= A=.. lengths | ext headers`.
fn write_roce(f: &mut fmt::Formatter<'_>, r: &RoceRepr) -> fmt::Result {
    match r.ip {
        IpRepr::V4 {
            src,
            dst,
            dscp,
            ecn,
            ..
        } => write!(
            f,
            "{src}:{} > {dst}:{} dscp={dscp} ecn={ecn:?}",
            r.src_port, r.dst_port
        )?,
        IpRepr::V6 {
            src,
            dst,
            dscp,
            ecn,
            ..
        } => write!(
            f,
            "[{src}]:{} > [{dst}]:{} dscp={dscp} ecn={ecn:?}",
            r.src_port, r.dst_port
        )?,
    }
    let b = &r.headers.bth;
    write!(
        f,
        " | {} qp={:#08x} psn={} A={} SE={} M={} pad={} pkey={:#06x}",
        b.opcode,
        b.dest_qp.value(),
        b.psn,
        u8::from(b.ack_req),
        u8::from(b.solicited),
        u8::from(b.migreq),
        b.pad_count,
        b.pkey
    )?;
    if b.fecn {
        f.write_str(" FECN")?;
    }
    if b.becn {
        f.write_str(" BECN")?;
    }
    write!(
        f,
        " | ip_len={} udp_len={} payload={}",
        r.buffer_len(),
        8 + r.udp_payload_len(),
        r.payload_len
    )?;
    let h = &r.headers;
    if let Some(d) = &h.deth {
        write!(f, " | {d}")?;
    }
    if let Some(x) = &h.reth {
        write!(f, " | {x}")?;
    }
    if let Some(x) = &h.atomic_eth {
        write!(f, " | {x}")?;
    }
    if let Some(x) = &h.aeth {
        write!(f, " | {x}")?;
    }
    if let Some(x) = &h.atomic_ack_eth {
        write!(f, " | {x}")?;
    }
    if let Some(imm) = h.immdt {
        write!(f, " | ImmDt {imm:#010x}")?;
    }
    if let Some(k) = h.ieth {
        write!(f, " | IETH rkey={k}")?;
    }
    Ok(())
}

/// Build an Ethernet frame (no FCS, padded to 60 bytes, untagged) around
/// the RoCE packet `repr` with `payload`: a convenience for captures (see
/// [`RoceRepr::emit_frame`] to write into a reused buffer or add a VLAN tag).
pub fn ethernet_frame(
    src: super::MacAddr,
    dst: super::MacAddr,
    repr: &RoceRepr,
    payload: roce::PayloadSource<'_>,
) -> Result<Vec<u8>, Error> {
    let eth = roce::EthernetRepr {
        src,
        dst,
        vlan: None,
    };
    let mut frame = vec![0u8; repr.frame_len(&eth)];
    repr.emit_frame(&eth, &mut frame, payload)?;
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::MacAddr;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // Vector 1's frame.
    const FRAME: &str = "020000000002020000000001080045020034123440004011a514c0a8010ac0a80114c1f312b7002000000430ffff000000118000000068656c6c6f0000003daab6e3";

    #[test]
    fn decodes_a_roce_frame_in_one_line() {
        let d = decode_frame(&hex(FRAME));
        assert!(d.is_good());
        assert_eq!(
            d.to_string(),
            "192.168.1.10:49651 > 192.168.1.20:4791 dscp=0 ecn=Ect0 | RC SEND_ONLY qp=0x000011 psn=0 A=1 SE=0 M=0 pad=3 pkey=0xffff | ip_len=52 udp_len=32 payload=5 | ICRC ok"
        );
    }

    #[test]
    fn reports_a_bad_icrc() {
        let mut f = hex(FRAME);
        let n = f.len();
        f[n - 1] ^= 0xFF;
        let d = decode_frame(&f);
        assert!(!d.is_good());
        assert!(d
            .to_string()
            .ends_with("ICRC BAD carried=0x1cb6aa3d computed=0xe3b6aa3d"));
    }

    #[test]
    fn decodes_pfc_and_names_the_rest() {
        let mut f = [0u8; 60];
        PfcRepr::pfc_one(3, 100)
            .emit_frame(MacAddr(2, 0, 0, 0, 0, 1), &mut f)
            .unwrap();
        assert_eq!(
            decode_frame(&f).to_string(),
            "MAC control PFC enable=0x08 p3=100"
        );
        f[12] = 0x08;
        f[13] = 0x06;
        assert_eq!(
            decode_frame(&f).to_string(),
            "ethertype 0x0806 (not decoded)"
        );
        assert_eq!(decode_frame(&f[..10]), Decoded::Runt(10));
        let mut t = hex(FRAME);
        t.truncate(50);
        assert!(matches!(
            decode_frame(&t),
            Decoded::BadRoce {
                error: Error::Truncated,
                ..
            }
        ));
    }

    #[test]
    fn vlan_tagged_frames_show_their_priority() {
        let f = hex(FRAME);
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0xA0, 0x05]);
        t.extend_from_slice(&f[12..]);
        let d = decode_frame(&t);
        assert!(d.is_good());
        assert!(d.to_string().starts_with("vlan pcp=5 192.168.1.10"));
    }

    #[test]
    fn ethernet_frame_wraps_a_repr() {
        let f = hex(FRAME);
        let d = decode_frame(&f);
        let Decoded::Roce { repr, .. } = d else {
            panic!("not RoCE")
        };
        let built = ethernet_frame(
            MacAddr(2, 0, 0, 0, 0, 1),
            MacAddr(2, 0, 0, 0, 0, 2),
            &repr,
            roce::PayloadSource::Copy(b"hello"),
        )
        .unwrap();
        assert_eq!(built, f);
    }

    #[test]
    fn short_frames_are_padded_and_the_padding_is_ignored() {
        use crate::wire::{BthRepr, Ecn, Opcode, Psn, Qpn, RoceHeaders};
        let h = RoceHeaders::new(BthRepr::new(Opcode::RcSendOnly, Qpn::new(7), Psn::new(1)));
        let ip = IpRepr::ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), Ecn::Ect0);
        let repr = RoceRepr::new(ip, 0xC000, h, 0);
        let f = ethernet_frame(
            MacAddr(2, 0, 0, 0, 0, 1),
            MacAddr(2, 0, 0, 0, 0, 2),
            &repr,
            roce::PayloadSource::Zeroed(0),
        )
        .unwrap();
        assert_eq!(repr.buffer_len(), 44);
        assert_eq!(f.len(), 60);
        match decode_frame(&f) {
            Decoded::Roce {
                repr: got,
                icrc: Ok(()),
                ..
            } => assert_eq!(got, repr),
            d => panic!("{d}"),
        }
    }
}
