//! A whole RoCEv2 packet (ROCEV2.md §1): IPv4 or IPv6, UDP, BTH, extension
//! headers, payload, pad and ICRC.
//!
//! Three levels, for three users:
//!
//! * [`Packet`] / [`Repr`]: an IP packet (first IP byte to the ICRC), for
//!   pcaps, raw sockets and tests. IP and UDP headers are read and written
//!   with the `pnet_packet` types. [`Repr::parse`] checks, in the order a
//!   receiving host does, the IP and UDP framing, the IPv4 header checksum,
//!   a non-zero UDP checksum, the transport headers and finally the ICRC
//!   ([`Error::BadIcrc`]).
//! * [`emit_udp_payload`] / [`parse_udp_payload`]: only BTH..ICRC, for a
//!   UDP socket backend whose kernel writes the IP and UDP headers; the
//!   ICRC is computed from the [`UdpEncap`] those headers will carry.
//!   Neither allocates.
//! * Size helpers ([`IpVersion`], [`Framing`], [`packet_len`]): what the
//!   simulator needs, since it never serialises in its hot path.
//!
//! Nothing here panics on any input; every length is checked first.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

use pnet_base::MacAddr;
use pnet_packet::ethernet::{EtherTypes, MutableEthernetPacket};
use pnet_packet::ip::IpNextHeaderProtocols;
use pnet_packet::ipv4::{self, Ipv4Flags, Ipv4Packet, MutableIpv4Packet};
use pnet_packet::ipv6::{Ipv6Packet, MutableIpv6Packet};
use pnet_packet::udp::{self, MutableUdpPacket, UdpPacket};
use pnet_packet::vlan::{ClassOfService, MutableVlanPacket};

use super::icrc::{
    self, Icrc, IpEncap, UdpEncap, BTH_LEN, ICRC_LEN, IPV4_HEADER_LEN, IPV6_HEADER_LEN,
    ROCE_UDP_PORT, UDP_HEADER_LEN,
};
use super::{bth, BthRepr, Ecn, Error, Opcode, Qpn, Result, RoceHeaders};

/// Ethernet II header length (no VLAN tag).
pub const ETHERNET_HEADER_LEN: usize = 14;
/// 802.1Q tag length.
pub const VLAN_TAG_LEN: usize = 4;
/// Ethernet frame check sequence length.
pub const FCS_LEN: usize = 4;
/// Preamble (7), start-of-frame delimiter (1) and minimum inter-frame gap
/// (12): the bytes of link time a frame takes besides its own.
pub const PREAMBLE_SFD_IFG_LEN: usize = 20;
/// Minimum Ethernet frame length without FCS (shorter frames are padded).
pub const MIN_FRAME_LEN: usize = 60;
/// Largest UDP length (and IPv4 total length) the headers can express.
const MAX_U16_LEN: usize = u16::MAX as usize;

/// IPv4 or IPv6.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4, 20-byte header.
    V4,
    /// IPv6, 40-byte header.
    V6,
}

impl IpVersion {
    /// The IP header length.
    pub const fn header_len(self) -> usize {
        match self {
            IpVersion::V4 => IPV4_HEADER_LEN,
            IpVersion::V6 => IPV6_HEADER_LEN,
        }
    }
}

/// How much of the framing around the IP packet to count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Framing {
    /// The IP packet only.
    Ip,
    /// With the 14-byte Ethernet header, as a pcap stores it.
    Ethernet,
    /// With the Ethernet header and the 4-byte FCS: the frame length.
    EthernetFcs,
    /// Frame with FCS plus preamble, SFD and inter-frame gap: the bytes of
    /// link time one packet occupies.
    Wire,
}

impl Framing {
    /// Bytes this framing adds around an IP packet (minimum frame padding
    /// not included; see [`packet_len`]).
    pub const fn overhead(self) -> usize {
        match self {
            Framing::Ip => 0,
            Framing::Ethernet => ETHERNET_HEADER_LEN,
            Framing::EthernetFcs => ETHERNET_HEADER_LEN + FCS_LEN,
            Framing::Wire => ETHERNET_HEADER_LEN + FCS_LEN + PREAMBLE_SFD_IFG_LEN,
        }
    }
}

/// UDP payload length (BTH through ICRC) for headers of `header_len` bytes
/// (BTH included, see [`RoceHeaders::header_len`]) and `payload_len`
/// payload bytes with the standard pad.
pub const fn udp_payload_len(header_len: usize, payload_len: usize) -> usize {
    header_len + payload_len + BthRepr::pad_count_for(payload_len) as usize + ICRC_LEN
}

/// Length of one RoCEv2 packet with the given framing. For Ethernet
/// framings, frames shorter than 60 bytes (before FCS) are padded to 60.
pub const fn packet_len(
    ip: IpVersion,
    framing: Framing,
    header_len: usize,
    payload_len: usize,
) -> usize {
    let ip_len = ip.header_len() + UDP_HEADER_LEN + udp_payload_len(header_len, payload_len);
    match framing {
        Framing::Ip => ip_len,
        _ => {
            let frame = ETHERNET_HEADER_LEN + ip_len;
            let frame = if frame < MIN_FRAME_LEN {
                MIN_FRAME_LEN
            } else {
                frame
            };
            frame + framing.overhead() - ETHERNET_HEADER_LEN
        }
    }
}

/// Per-packet overhead of an opcode: every byte except payload and pad, for
/// the given IP version and framing (e.g. 58 + 4 + 20 for an IPv4 SEND on
/// the wire).
pub const fn overhead(ip: IpVersion, framing: Framing, opcode: Opcode) -> usize {
    framing.overhead()
        + ip.header_len()
        + UDP_HEADER_LEN
        + BTH_LEN
        + opcode.ext_header_len()
        + ICRC_LEN
}

impl RoceHeaders {
    /// Length of the packet these headers head, with `payload_len` payload
    /// bytes and the standard pad (see [`packet_len`]).
    pub const fn packet_len(&self, ip: IpVersion, framing: Framing, payload_len: usize) -> usize {
        packet_len(ip, framing, self.header_len(), payload_len)
    }
}

/// rxe's UDP source port for a QP: `0xC000 + (hash_32(qpn, 14) & 0x3FFF)`
/// (ROCEV2.md §1.4).
pub const fn rxe_udp_src_port(qpn: Qpn) -> u16 {
    let hash = qpn.value().wrapping_mul(0x61C8_8647) >> 18;
    0xC000 | (hash & 0x3FFF) as u16
}

/// The kernel's mapping of a 20-bit flow label to a UDP source port.
pub const fn flow_label_udp_src_port(flow_label: u32) -> u16 {
    let fl = flow_label & 0xF_FFFF;
    let low14 = fl & 0x3FFF;
    let high6 = (fl & 0xF_C000) >> 14;
    ((low14 ^ high6) | 0xC000) as u16
}

/// The symmetric flow label of a connection between two QPs (the same from
/// both ends).
pub const fn symmetric_flow_label(local: Qpn, remote: Qpn) -> u32 {
    let mut v = local.value() as u64 * remote.value() as u64;
    v ^= v >> 20;
    v ^= v >> 40;
    (v & 0xF_FFFF) as u32
}

/// Where the payload bytes come from when emitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadSource<'a> {
    /// Copy these bytes.
    Copy(&'a [u8]),
    /// The caller already placed this many bytes at the payload offset:
    /// right after the transport headers (`headers.header_len()` into the
    /// UDP payload, or IP header + 8 + that into a whole packet).
    InPlace(usize),
    /// This many zero bytes (e.g. for a capture of a simulation that moves
    /// lengths only).
    Zeroed(usize),
}

impl PayloadSource<'_> {
    /// The payload length.
    pub const fn len(&self) -> usize {
        match self {
            PayloadSource::Copy(b) => b.len(),
            PayloadSource::InPlace(n) | PayloadSource::Zeroed(n) => *n,
        }
    }

    /// True for an empty payload.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn fill(&self, dst: &mut [u8]) {
        match self {
            PayloadSource::Copy(b) => dst.copy_from_slice(b),
            PayloadSource::InPlace(_) => {}
            PayloadSource::Zeroed(_) => dst.fill(0),
        }
    }
}

/// Write BTH, extension headers, payload, pad and ICRC into `buf` (a UDP
/// payload buffer); returns the number of bytes written. The ICRC is
/// computed for the IP and UDP headers `encap` describes, which the kernel
/// will write. The BTH pad count is written as given in `headers`
/// (normally [`BthRepr::pad_count_for`] the payload length).
pub fn emit_udp_payload(
    headers: &RoceHeaders,
    payload: PayloadSource<'_>,
    encap: &UdpEncap,
    buf: &mut [u8],
) -> Result<usize> {
    let hlen = headers.header_len();
    let pad = usize::from(headers.bth.pad_count);
    if pad > 3 {
        return Err(Error::Malformed);
    }
    let body = hlen + payload.len() + pad;
    let total = body + ICRC_LEN;
    if buf.len() < total {
        return Err(Error::Truncated);
    }
    headers.emit(buf)?;
    payload.fill(&mut buf[hlen..hlen + payload.len()]);
    buf[hlen + payload.len()..body].fill(0);
    let crc = Icrc::for_udp_payload(encap, &buf[..body])?;
    buf[body..total].copy_from_slice(&crc.to_le_bytes());
    Ok(total)
}

/// A parsed UDP payload: the transport headers and the payload bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPayload<'a> {
    /// BTH and extension headers.
    pub headers: RoceHeaders,
    /// The payload, without pad.
    pub payload: &'a [u8],
    /// The ICRC carried in the packet (as [`Icrc::finish`] returns it).
    pub icrc: u32,
}

/// Parse a UDP payload (BTH through ICRC) without checking the ICRC; for a
/// receiver that cannot predict the IP header, or wants to count first.
pub fn parse_udp_payload_unverified(buf: &[u8]) -> Result<UdpPayload<'_>> {
    let headers = RoceHeaders::parse(buf)?;
    let hlen = headers.header_len();
    let pad = usize::from(headers.bth.pad_count);
    let end = buf
        .len()
        .checked_sub(ICRC_LEN + pad)
        .filter(|&e| e >= hlen)
        .ok_or(Error::Truncated)?;
    if !headers.bth.opcode.has_payload() && end != hlen {
        return Err(Error::Malformed);
    }
    Ok(UdpPayload {
        headers,
        payload: &buf[hlen..end],
        icrc: icrc::carried(buf)?,
    })
}

/// Parse a UDP payload (BTH through ICRC) received inside the headers
/// `encap` describes, and check its ICRC ([`Error::BadIcrc`]).
pub fn parse_udp_payload<'a>(buf: &'a [u8], encap: &UdpEncap) -> Result<UdpPayload<'a>> {
    let parsed = parse_udp_payload_unverified(buf)?;
    icrc::verify_udp_payload(encap, buf)?;
    Ok(parsed)
}

/// The UDP checksum policy of an emitted packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum UdpChecksum {
    /// Send 0 (rxe, IPv4 and IPv6).
    #[default]
    Zero,
    /// Compute the real checksum, after the ICRC.
    Compute,
}

/// The IP header of a RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpRepr {
    /// IPv4 without options, protocol UDP, not fragmented.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// DSCP (6 bits).
        dscp: u8,
        /// ECN bits.
        ecn: Ecn,
        /// Time to live.
        ttl: u8,
        /// Identification.
        identification: u16,
        /// The DF flag (rxe sets it).
        dont_fragment: bool,
    },
    /// IPv6 without extension headers, next header UDP.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
        /// DSCP (6 bits of the traffic class).
        dscp: u8,
        /// ECN bits of the traffic class.
        ecn: Ecn,
        /// Flow label (20 bits).
        flow_label: u32,
        /// Hop limit.
        hop_limit: u8,
    },
}

impl IpRepr {
    /// IPv4 as rxe sends it: DSCP 0, the given ECN, TTL 64, identification
    /// 0, DF.
    pub const fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, ecn: Ecn) -> IpRepr {
        IpRepr::V4 {
            src,
            dst,
            dscp: 0,
            ecn,
            ttl: 64,
            identification: 0,
            dont_fragment: true,
        }
    }

    /// IPv6 with DSCP 0, the given ECN, flow label 0, hop limit 64.
    pub const fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, ecn: Ecn) -> IpRepr {
        IpRepr::V6 {
            src,
            dst,
            dscp: 0,
            ecn,
            flow_label: 0,
            hop_limit: 64,
        }
    }

    /// The IP version.
    pub const fn version(&self) -> IpVersion {
        match self {
            IpRepr::V4 { .. } => IpVersion::V4,
            IpRepr::V6 { .. } => IpVersion::V6,
        }
    }

    /// The ECN bits.
    pub const fn ecn(&self) -> Ecn {
        match self {
            IpRepr::V4 { ecn, .. } | IpRepr::V6 { ecn, .. } => *ecn,
        }
    }

    /// The ICRC-covered part of this header.
    pub const fn encap(&self) -> IpEncap {
        match *self {
            IpRepr::V4 {
                src,
                dst,
                identification,
                dont_fragment,
                ..
            } => IpEncap::V4 {
                src,
                dst,
                identification,
                dont_fragment,
            },
            IpRepr::V6 { src, dst, .. } => IpEncap::V6 { src, dst },
        }
    }
}

/// A read-only or read/write view of a whole RoCEv2 IP packet: from the
/// first IP byte to the ICRC. Bytes after the IP length (Ethernet padding)
/// are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// Offsets found by [`Packet::check_len`].
struct Layout {
    ip_header_len: usize,
    /// End of the IP packet (start of any trailing bytes).
    ip_end: usize,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wrap a buffer without checking it; accessors may panic until
    /// [`check_len`](Self::check_len) succeeds.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wrap a buffer and check its framing.
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Check every length so that no accessor can panic: the IP header
    /// (IPv4 without options and unfragmented, or IPv6 without extension
    /// headers), protocol UDP, the UDP length equal to the IP payload
    /// length, and a UDP payload that holds the BTH, the extension headers
    /// of its opcode, the pad and the ICRC.
    pub fn check_len(&self) -> Result<()> {
        let layout = self.layout()?;
        let udp_payload =
            &self.buffer.as_ref()[layout.ip_header_len + UDP_HEADER_LEN..layout.ip_end];
        let bth = bth::Packet::new_checked(udp_payload)?;
        let opcode = bth.opcode()?;
        let min = BTH_LEN + opcode.ext_header_len() + usize::from(bth.pad_count()) + ICRC_LEN;
        if udp_payload.len() < min {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    fn layout(&self) -> Result<Layout> {
        let buf = self.buffer.as_ref();
        let first = *buf.first().ok_or(Error::Truncated)?;
        let (ip_header_len, ip_end) = match first >> 4 {
            4 => {
                let ip = Ipv4Packet::new(buf).ok_or(Error::Truncated)?;
                if ip.get_header_length() != 5 {
                    return Err(Error::Malformed);
                }
                if ip.get_next_level_protocol() != IpNextHeaderProtocols::Udp
                    || ip.get_fragment_offset() != 0
                    || ip.get_flags() & Ipv4Flags::MoreFragments != 0
                {
                    return Err(Error::Malformed);
                }
                let total = usize::from(ip.get_total_length());
                if total < IPV4_HEADER_LEN + UDP_HEADER_LEN {
                    return Err(Error::Malformed);
                }
                (IPV4_HEADER_LEN, total)
            }
            6 => {
                let ip = Ipv6Packet::new(buf).ok_or(Error::Truncated)?;
                if ip.get_next_header() != IpNextHeaderProtocols::Udp {
                    return Err(Error::Malformed);
                }
                let plen = usize::from(ip.get_payload_length());
                if plen < UDP_HEADER_LEN {
                    return Err(Error::Malformed);
                }
                (IPV6_HEADER_LEN, IPV6_HEADER_LEN + plen)
            }
            _ => return Err(Error::Malformed),
        };
        if buf.len() < ip_end {
            return Err(Error::Truncated);
        }
        let udp = UdpPacket::new(&buf[ip_header_len..ip_end]).ok_or(Error::Truncated)?;
        if usize::from(udp.get_length()) != ip_end - ip_header_len {
            return Err(Error::Malformed);
        }
        Ok(Layout {
            ip_header_len,
            ip_end,
        })
    }

    fn checked_layout(&self) -> Layout {
        // Invariant (the smoltcp contract): accessors are used only after
        // `check_len` succeeded, so `layout` succeeds too. Misuse of
        // `new_unchecked` panics here, like an out-of-range index would.
        self.layout()
            .expect("RoCE packet accessor used before a successful check_len")
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The IP version.
    pub fn ip_version(&self) -> IpVersion {
        if self.buffer.as_ref()[0] >> 4 == 6 {
            IpVersion::V6
        } else {
            IpVersion::V4
        }
    }

    /// The IP packet, from the first IP byte through the ICRC.
    pub fn ip_packet(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.checked_layout().ip_end]
    }

    /// The pnet view of the IPv4 header, for an IPv4 packet.
    pub fn ipv4(&self) -> Option<Ipv4Packet<'_>> {
        match self.ip_version() {
            IpVersion::V4 => Ipv4Packet::new(self.ip_packet()),
            IpVersion::V6 => None,
        }
    }

    /// The pnet view of the IPv6 header, for an IPv6 packet.
    pub fn ipv6(&self) -> Option<Ipv6Packet<'_>> {
        match self.ip_version() {
            IpVersion::V6 => Ipv6Packet::new(self.ip_packet()),
            IpVersion::V4 => None,
        }
    }

    /// The pnet view of the UDP header and payload.
    pub fn udp(&self) -> UdpPacket<'_> {
        let l = self.checked_layout();
        // Invariant: `layout` checked that the UDP length (>= 8) fits.
        UdpPacket::new(&self.buffer.as_ref()[l.ip_header_len..l.ip_end])
            .expect("UDP header checked by layout")
    }

    /// The UDP payload: BTH through ICRC.
    pub fn udp_payload(&self) -> &[u8] {
        let l = self.checked_layout();
        &self.buffer.as_ref()[l.ip_header_len + UDP_HEADER_LEN..l.ip_end]
    }

    /// The BTH view.
    pub fn bth(&self) -> bth::Packet<&[u8]> {
        bth::Packet::new_unchecked(self.udp_payload())
    }

    /// Length of BTH plus extension headers.
    fn header_len(&self) -> usize {
        let op = self.bth().opcode().map_or(0, Opcode::ext_header_len);
        BTH_LEN + op
    }

    /// The payload bytes, without pad.
    pub fn payload(&self) -> &[u8] {
        let u = self.udp_payload();
        let end = u.len() - ICRC_LEN - usize::from(self.bth().pad_count());
        &u[self.header_len()..end]
    }

    /// The pad bytes.
    pub fn pad(&self) -> &[u8] {
        let u = self.udp_payload();
        let end = u.len() - ICRC_LEN;
        &u[end - usize::from(self.bth().pad_count())..end]
    }

    /// The ICRC carried in the packet (as [`Icrc::finish`] returns it).
    pub fn icrc(&self) -> u32 {
        let u = self.udp_payload();
        u32::from_le_bytes([
            u[u.len() - 4],
            u[u.len() - 3],
            u[u.len() - 2],
            u[u.len() - 1],
        ])
    }

    /// The ICRC computed over the packet.
    pub fn compute_icrc(&self) -> u32 {
        let ip = self.ip_packet();
        Icrc::for_ip_packet(&ip[..ip.len() - ICRC_LEN]).unwrap_or(0)
    }

    /// `Ok` or [`Error::BadIcrc`].
    pub fn verify_icrc(&self) -> Result<()> {
        icrc::verify_ip_packet(self.ip_packet())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Recompute and write the ICRC (after changing a covered field).
    pub fn fill_icrc(&mut self) {
        let crc = self.compute_icrc();
        let end = self.checked_layout().ip_end;
        self.buffer.as_mut()[end - ICRC_LEN..end].copy_from_slice(&crc.to_le_bytes());
    }

    /// The payload bytes, writable (before [`fill_icrc`](Self::fill_icrc)).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = self.checked_layout();
        let start = l.ip_header_len + UDP_HEADER_LEN + self.header_len();
        let end = l.ip_end - ICRC_LEN - usize::from(self.bth().pad_count());
        &mut self.buffer.as_mut()[start..end]
    }
}

/// An 802.1Q tag: the priority (PCP) that PFC pauses, and the VLAN id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// Priority code point (3 bits).
    pub pcp: u8,
    /// VLAN identifier (12 bits).
    pub vid: u16,
}

/// The Ethernet header of a frame carrying a RoCEv2 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source MAC.
    pub src: MacAddr,
    /// Destination MAC.
    pub dst: MacAddr,
    /// Optional 802.1Q tag.
    pub vlan: Option<VlanTag>,
}

impl EthernetRepr {
    /// Header length: 14, or 18 with a VLAN tag.
    pub const fn header_len(&self) -> usize {
        match self.vlan {
            Some(_) => ETHERNET_HEADER_LEN + VLAN_TAG_LEN,
            None => ETHERNET_HEADER_LEN,
        }
    }

    /// Write the header for an IPv4 or IPv6 payload.
    fn emit(&self, ip: IpVersion, buf: &mut [u8]) -> Result<()> {
        let inner = match ip {
            IpVersion::V4 => EtherTypes::Ipv4,
            IpVersion::V6 => EtherTypes::Ipv6,
        };
        let mut eth = MutableEthernetPacket::new(buf).ok_or(Error::Truncated)?;
        eth.set_destination(self.dst);
        eth.set_source(self.src);
        match self.vlan {
            None => eth.set_ethertype(inner),
            Some(tag) => {
                eth.set_ethertype(EtherTypes::Vlan);
                let mut v = MutableVlanPacket::new(&mut buf[ETHERNET_HEADER_LEN..])
                    .ok_or(Error::Truncated)?;
                v.set_priority_code_point(ClassOfService::new(tag.pcp & 7));
                v.set_drop_eligible_indicator(0);
                v.set_vlan_identifier(tag.vid & 0x0FFF);
                v.set_ethertype(inner);
            }
        }
        Ok(())
    }
}

/// A whole RoCEv2 packet, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// The IP header.
    pub ip: IpRepr,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port (4791).
    pub dst_port: u16,
    /// UDP checksum policy: on parse, `Zero` for a zero checksum and
    /// `Compute` for a (verified) non-zero one.
    pub udp_checksum: UdpChecksum,
    /// BTH and extension headers.
    pub headers: RoceHeaders,
    /// Payload length without pad.
    pub payload_len: usize,
}

impl Repr {
    /// Parse and check everything but the ICRC. Rejects a wrong IPv4
    /// header checksum or a wrong non-zero UDP checksum with
    /// [`Error::Malformed`] (a host drops those before RoCE sees them).
    pub fn parse_unverified<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        let ip_packet = packet.ip_packet();
        let ip = match packet.ip_version() {
            IpVersion::V4 => {
                let p = Ipv4Packet::new(ip_packet).ok_or(Error::Truncated)?;
                if ipv4::checksum(&p) != p.get_checksum() {
                    return Err(Error::Malformed);
                }
                IpRepr::V4 {
                    src: p.get_source(),
                    dst: p.get_destination(),
                    dscp: p.get_dscp(),
                    ecn: Ecn::from_bits(p.get_ecn()),
                    ttl: p.get_ttl(),
                    identification: p.get_identification(),
                    dont_fragment: p.get_flags() & Ipv4Flags::DontFragment != 0,
                }
            }
            IpVersion::V6 => {
                let p = Ipv6Packet::new(ip_packet).ok_or(Error::Truncated)?;
                let tc = p.get_traffic_class();
                IpRepr::V6 {
                    src: p.get_source(),
                    dst: p.get_destination(),
                    dscp: tc >> 2,
                    ecn: Ecn::from_bits(tc),
                    flow_label: p.get_flow_label(),
                    hop_limit: p.get_hop_limit(),
                }
            }
        };
        let udp = packet.udp();
        let udp_checksum = match udp.get_checksum() {
            0 => UdpChecksum::Zero,
            carried => {
                if udp_checksum(&udp, &ip) != carried {
                    return Err(Error::Malformed);
                }
                UdpChecksum::Compute
            }
        };
        let parsed = parse_udp_payload_unverified(packet.udp_payload())?;
        Ok(Repr {
            ip,
            src_port: udp.get_source(),
            dst_port: udp.get_destination(),
            udp_checksum,
            headers: parsed.headers,
            payload_len: parsed.payload.len(),
        })
    }

    /// Parse and check everything, the ICRC last ([`Error::BadIcrc`]).
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        let repr = Self::parse_unverified(packet)?;
        packet.verify_icrc()?;
        Ok(repr)
    }

    /// The UDP payload length (BTH through ICRC).
    pub const fn udp_payload_len(&self) -> usize {
        self.headers.header_len()
            + self.payload_len
            + self.headers.bth.pad_count as usize
            + ICRC_LEN
    }

    /// Bytes [`emit`](Self::emit) writes: the IP packet length.
    pub const fn buffer_len(&self) -> usize {
        self.ip.version().header_len() + UDP_HEADER_LEN + self.udp_payload_len()
    }

    /// The ICRC-covered values of the IP and UDP headers.
    pub const fn encap(&self) -> UdpEncap {
        UdpEncap {
            ip: self.ip.encap(),
            src_port: self.src_port,
            dst_port: self.dst_port,
        }
    }

    /// A packet with rxe's defaults around `headers`: UDP source port from
    /// the destination QP is not known here, so `src_port` is given;
    /// destination port 4791, UDP checksum 0.
    pub const fn new(ip: IpRepr, src_port: u16, headers: RoceHeaders, payload_len: usize) -> Repr {
        Repr {
            ip,
            src_port,
            dst_port: ROCE_UDP_PORT,
            udp_checksum: UdpChecksum::Zero,
            headers,
            payload_len,
        }
    }

    /// Write the whole IP packet into `buf`; returns its length. `payload`
    /// must have `payload_len` bytes ([`Error::Malformed`] otherwise); the
    /// pad is written as `headers.bth.pad_count` zero bytes; the ICRC is
    /// computed, then the UDP checksum if asked for.
    pub fn emit(&self, buf: &mut [u8], payload: PayloadSource<'_>) -> Result<usize> {
        if payload.len() != self.payload_len || self.headers.bth.pad_count > 3 {
            return Err(Error::Malformed);
        }
        let iplen = self.ip.version().header_len();
        let udp_len = UDP_HEADER_LEN + self.udp_payload_len();
        let total = iplen + udp_len;
        if udp_len > MAX_U16_LEN || (iplen == IPV4_HEADER_LEN && total > MAX_U16_LEN) {
            return Err(Error::Malformed);
        }
        if buf.len() < total {
            return Err(Error::Truncated);
        }
        let buf = &mut buf[..total];
        // Transport part first (its ICRC needs only the encap values).
        emit_udp_payload(
            &self.headers,
            payload,
            &self.encap(),
            &mut buf[iplen + UDP_HEADER_LEN..],
        )?;
        // Lengths are checked above to fit in u16.
        let udp_len16 = udp_len as u16;
        match self.ip {
            IpRepr::V4 {
                src,
                dst,
                dscp,
                ecn,
                ttl,
                identification,
                dont_fragment,
            } => {
                let mut p = MutableIpv4Packet::new(&mut buf[..iplen]).ok_or(Error::Truncated)?;
                p.set_version(4);
                p.set_header_length(5);
                p.set_dscp(dscp & 0x3F);
                p.set_ecn(ecn.bits());
                p.set_total_length(total as u16);
                p.set_identification(identification);
                p.set_flags(if dont_fragment {
                    Ipv4Flags::DontFragment
                } else {
                    0
                });
                p.set_fragment_offset(0);
                p.set_ttl(ttl);
                p.set_next_level_protocol(IpNextHeaderProtocols::Udp);
                p.set_checksum(0);
                p.set_source(src);
                p.set_destination(dst);
                let sum = ipv4::checksum(&p.to_immutable());
                p.set_checksum(sum);
            }
            IpRepr::V6 {
                src,
                dst,
                dscp,
                ecn,
                flow_label,
                hop_limit,
            } => {
                let mut p = MutableIpv6Packet::new(&mut buf[..iplen]).ok_or(Error::Truncated)?;
                p.set_version(6);
                p.set_traffic_class(((dscp & 0x3F) << 2) | ecn.bits());
                p.set_flow_label(flow_label & 0xF_FFFF);
                p.set_payload_length(udp_len16);
                p.set_next_header(IpNextHeaderProtocols::Udp);
                p.set_hop_limit(hop_limit);
                p.set_source(src);
                p.set_destination(dst);
            }
        }
        let mut u = MutableUdpPacket::new(&mut buf[iplen..]).ok_or(Error::Truncated)?;
        u.set_source(self.src_port);
        u.set_destination(self.dst_port);
        u.set_length(udp_len16);
        u.set_checksum(0);
        if self.udp_checksum == UdpChecksum::Compute {
            let sum = udp_checksum(&u.to_immutable(), &self.ip);
            u.set_checksum(sum);
        }
        Ok(total)
    }
}

impl Repr {
    /// Bytes [`emit_frame`](Self::emit_frame) writes: Ethernet header, IP
    /// packet, and padding up to the 60-byte minimum frame (no FCS).
    pub const fn frame_len(&self, eth: &EthernetRepr) -> usize {
        let n = eth.header_len() + self.buffer_len();
        if n < MIN_FRAME_LEN {
            MIN_FRAME_LEN
        } else {
            n
        }
    }

    /// Write a whole Ethernet frame (no FCS) into `buf`, padded with zeros
    /// to 60 bytes; returns its length. No allocation: the simulator's
    /// capture and raw-socket senders reuse one buffer.
    pub fn emit_frame(
        &self,
        eth: &EthernetRepr,
        buf: &mut [u8],
        payload: PayloadSource<'_>,
    ) -> Result<usize> {
        let len = self.frame_len(eth);
        if buf.len() < len {
            return Err(Error::Truncated);
        }
        let hl = eth.header_len();
        let n = self.emit(&mut buf[hl..len], payload)?;
        eth.emit(self.ip.version(), &mut buf[..len])?;
        buf[hl + n..len].fill(0);
        Ok(len)
    }
}

/// The UDP checksum of `udp` (whole datagram) under `ip`'s addresses, with
/// 0 sent as 0xFFFF.
fn udp_checksum(udp: &UdpPacket<'_>, ip: &IpRepr) -> u16 {
    let sum = match ip {
        IpRepr::V4 { src, dst, .. } => udp::ipv4_checksum(udp, src, dst),
        IpRepr::V6 { src, dst, .. } => udp::ipv6_checksum(udp, src, dst),
    };
    if sum == 0 {
        0xFFFF
    } else {
        sum
    }
}

impl fmt::Display for IpRepr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpRepr::V4 {
                src,
                dst,
                dscp,
                ecn,
                ttl,
                identification,
                dont_fragment,
            } => write!(
                f,
                "IPv4 {src} > {dst} dscp={dscp} ecn={ecn:?} ttl={ttl} id={identification:#06x}{}",
                if *dont_fragment { " DF" } else { "" }
            ),
            IpRepr::V6 {
                src,
                dst,
                dscp,
                ecn,
                flow_label,
                hop_limit,
            } => write!(
                f,
                "IPv6 {src} > {dst} dscp={dscp} ecn={ecn:?} flow={flow_label:#07x} hlim={hop_limit}"
            ),
        }
    }
}

impl fmt::Display for Repr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} UDP {} > {} len={} {} payload={}",
            self.ip,
            self.src_port,
            self.dst_port,
            UDP_HEADER_LEN + self.udp_payload_len(),
            self.headers,
            self.payload_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Psn, RethRepr, Rkey};

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    // Vector 3: RC RDMA_WRITE_ONLY + RETH + 16 bytes.
    const V3: &str = "4502004c004240004011b6eec0a8010ac0a80114c1f312b7003800000a00ffff000000a18000abcd00007f00000010000000123400000010000102030405060708090a0b0c0d0e0f06172cb9";
    // Vector 14: RC SEND_ONLY over IPv6.
    const V14: &str = "6621234500201140fd000000000000000000000000000010fd000000000000000000000000000020c1f312b7002000000400ffff000000118000010049507636526f434516033172";

    fn v3_repr() -> Repr {
        let mut bth = BthRepr::new(Opcode::RcWriteOnly, Qpn::new(0xa1), Psn::new(0xabcd));
        bth.ack_req = true;
        Repr {
            ip: IpRepr::V4 {
                src: Ipv4Addr::new(192, 168, 1, 10),
                dst: Ipv4Addr::new(192, 168, 1, 20),
                dscp: 0,
                ecn: Ecn::Ect0,
                ttl: 64,
                identification: 0x42,
                dont_fragment: true,
            },
            src_port: 49651,
            dst_port: 4791,
            udp_checksum: UdpChecksum::Zero,
            headers: RoceHeaders {
                reth: Some(RethRepr {
                    va: 0x7f00_0000_1000,
                    rkey: Rkey::new(0x1234),
                    dma_len: 16,
                }),
                ..RoceHeaders::new(bth)
            },
            payload_len: 16,
        }
    }

    fn v3_payload() -> Vec<u8> {
        (0u8..16).collect()
    }

    #[test]
    fn deconstruct() {
        let bytes = hex(V3);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.ip_version(), IpVersion::V4);
        assert_eq!(p.ipv4().unwrap().get_ttl(), 64);
        assert!(p.ipv6().is_none());
        assert_eq!(p.udp().get_destination(), 4791);
        assert_eq!(p.udp_payload().len(), 0x38 - 8);
        assert_eq!(p.bth().dest_qp(), Qpn::new(0xa1));
        assert_eq!(p.payload(), &v3_payload()[..]);
        assert!(p.pad().is_empty());
        assert_eq!(p.icrc(), 0xb92c_1706);
        assert_eq!(p.compute_icrc(), 0xb92c_1706);
        assert_eq!(p.verify_icrc(), Ok(()));
    }

    #[test]
    fn construct() {
        let mut bytes = hex(V3);
        let mut p = Packet::new_checked(&mut bytes[..]).unwrap();
        p.payload_mut()[0] = 0xFF;
        assert!(matches!(p.verify_icrc(), Err(Error::BadIcrc { .. })));
        p.fill_icrc();
        assert_eq!(p.verify_icrc(), Ok(()));
        p.payload_mut()[0] = 0x00;
        p.fill_icrc();
        assert_eq!(bytes, hex(V3));
    }

    #[test]
    fn parse() {
        let bytes = hex(V3);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&p), Ok(v3_repr()));
    }

    #[test]
    fn emit() {
        let r = v3_repr();
        let mut buf = vec![0xAAu8; r.buffer_len() + 7];
        let n = r
            .emit(&mut buf, PayloadSource::Copy(&v3_payload()))
            .unwrap();
        assert_eq!(n, r.buffer_len());
        assert_eq!(&buf[..n], &hex(V3)[..]);
        // The same with the payload already in place.
        let mut buf2 = vec![0u8; n];
        buf2[40 + 16..40 + 32].copy_from_slice(&v3_payload());
        r.emit(&mut buf2, PayloadSource::InPlace(16)).unwrap();
        assert_eq!(buf2, hex(V3));
    }

    #[test]
    fn truncated() {
        let bytes = hex(V3);
        for n in 0..bytes.len() {
            assert_eq!(
                Packet::new_checked(&bytes[..n]),
                Err(Error::Truncated),
                "{n}"
            );
        }
        let r = v3_repr();
        let mut buf = vec![0u8; r.buffer_len() - 1];
        assert_eq!(
            r.emit(&mut buf, PayloadSource::Copy(&v3_payload())),
            Err(Error::Truncated)
        );
        assert_eq!(
            r.emit(&mut [0; 200], PayloadSource::Zeroed(3)),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn ipv6_parse_and_emit_with_and_without_udp_checksum() {
        let bytes = hex(V14);
        let p = Packet::new_checked(&bytes[..]).unwrap();
        let r = Repr::parse(&p).unwrap();
        assert_eq!(
            r.ip,
            IpRepr::V6 {
                src: "fd00::10".parse().unwrap(),
                dst: "fd00::20".parse().unwrap(),
                dscp: 24,
                ecn: Ecn::Ect0,
                flow_label: 0x12345,
                hop_limit: 64,
            }
        );
        assert_eq!(r.payload_len, 8);
        let mut buf = vec![0u8; r.buffer_len()];
        r.emit(&mut buf, PayloadSource::Copy(p.payload())).unwrap();
        assert_eq!(buf, bytes);
        // Real checksum: the ICRC does not change (ROCEV2.md §1.4: 0x0f10).
        let with_sum = Repr {
            udp_checksum: UdpChecksum::Compute,
            ..r
        };
        with_sum
            .emit(&mut buf, PayloadSource::Copy(p.payload()))
            .unwrap();
        assert_eq!(&buf[46..48], &[0x0f, 0x10]);
        assert_eq!(&buf[buf.len() - 4..], &bytes[bytes.len() - 4..]);
        let q = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&q), Ok(with_sum));
        // A wrong non-zero checksum is refused.
        buf[47] ^= 1;
        let q = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(Repr::parse(&q), Err(Error::Malformed));
    }

    #[test]
    fn wrong_icrc_is_bad_icrc_and_wrong_ip_checksum_is_malformed() {
        let mut bytes = hex(V3);
        let last = bytes.len() - 1;
        bytes[last] ^= 0x80;
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            Repr::parse(&p),
            Err(Error::BadIcrc {
                carried: 0x392c_1706,
                computed: 0xb92c_1706
            })
        );
        assert_eq!(Repr::parse_unverified(&p), Ok(v3_repr()));
        let mut bytes = hex(V3);
        bytes[10] ^= 1;
        let p = Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(Repr::parse(&p), Err(Error::Malformed));
    }

    #[test]
    fn udp_payload_round_trip_for_a_kernel_socket() {
        let r = v3_repr();
        let encap = r.encap();
        let mut buf = [0u8; 128];
        let n = emit_udp_payload(
            &r.headers,
            PayloadSource::Copy(&v3_payload()),
            &encap,
            &mut buf,
        )
        .unwrap();
        assert_eq!(&buf[..n], &hex(V3)[28..]);
        let got = parse_udp_payload(&buf[..n], &encap).unwrap();
        assert_eq!(got.headers, r.headers);
        assert_eq!(got.payload, &v3_payload()[..]);
        let mut other = encap;
        other.src_port ^= 1;
        assert!(matches!(
            parse_udp_payload(&buf[..n], &other),
            Err(Error::BadIcrc { .. })
        ));
        assert_eq!(
            emit_udp_payload(
                &r.headers,
                PayloadSource::Zeroed(16),
                &encap,
                &mut buf[..n - 1]
            ),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn udp_source_ports_follow_the_kernel() {
        assert_eq!(rxe_udp_src_port(Qpn::new(17)), 0xDF94);
        assert_eq!(flow_label_udp_src_port(0), 0xC000);
        assert_eq!(
            flow_label_udp_src_port(0xF_C000 | 0x3),
            0xC000 | (0x3 ^ 0x3F)
        );
        assert_eq!(
            symmetric_flow_label(Qpn::new(17), Qpn::new(0x1234)),
            symmetric_flow_label(Qpn::new(0x1234), Qpn::new(17))
        );
        // 17 * 0x1234 = 0x13574, < 2^20, so the folds leave it unchanged.
        assert_eq!(
            symmetric_flow_label(Qpn::new(17), Qpn::new(0x1234)),
            0x13574
        );
    }

    #[test]
    fn sizes_match_the_spec() {
        // 14 + 20 + 8 + 12 + 4 = 58 bytes of overhead for a SEND over IPv4.
        assert_eq!(
            overhead(IpVersion::V4, Framing::Ethernet, Opcode::RcSendOnly),
            58
        );
        assert_eq!(
            overhead(IpVersion::V6, Framing::Wire, Opcode::RcWriteFirst),
            14 + 4 + 20 + 40 + 8 + 12 + 16 + 4
        );
        assert_eq!(v3_repr().buffer_len(), 0x4c);
        let h = v3_repr().headers;
        assert_eq!(h.packet_len(IpVersion::V4, Framing::Ip, 16), 0x4c);
        assert_eq!(
            h.packet_len(IpVersion::V4, Framing::Ethernet, 16),
            0x4c + 14
        );
        // Short frames are padded to 60 bytes before the FCS.
        let cnp = RoceHeaders::new(BthRepr::new(Opcode::Cnp, Qpn::new(1), Psn::new(0)));
        assert_eq!(cnp.packet_len(IpVersion::V4, Framing::Ip, 0), 60);
        assert_eq!(cnp.packet_len(IpVersion::V4, Framing::Ethernet, 0), 74);
        let send = RoceHeaders::new(BthRepr::new(Opcode::RcSendOnly, Qpn::new(1), Psn::new(0)));
        assert_eq!(send.packet_len(IpVersion::V4, Framing::Ip, 0), 44);
        assert_eq!(send.packet_len(IpVersion::V4, Framing::Ethernet, 0), 60);
        assert_eq!(send.packet_len(IpVersion::V4, Framing::Wire, 0), 84);
        assert_eq!(udp_payload_len(12, 5), 24);
    }

    #[test]
    fn frames_with_and_without_a_vlan_tag() {
        let r = v3_repr();
        let src = MacAddr(2, 0, 0, 0, 0, 1);
        let dst = MacAddr(2, 0, 0, 0, 0, 2);
        let mut eth = EthernetRepr {
            src,
            dst,
            vlan: None,
        };
        let mut buf = [0xAAu8; 200];
        let n = r
            .emit_frame(&eth, &mut buf, PayloadSource::Copy(&v3_payload()))
            .unwrap();
        assert_eq!(n, 14 + 0x4c);
        assert_eq!(&buf[12..14], &[0x08, 0x00]);
        assert_eq!(&buf[14..n], &hex(V3)[..]);
        eth.vlan = Some(VlanTag { pcp: 3, vid: 100 });
        let n = r
            .emit_frame(&eth, &mut buf, PayloadSource::Copy(&v3_payload()))
            .unwrap();
        assert_eq!(n, 18 + 0x4c);
        assert_eq!(&buf[12..18], &[0x81, 0x00, 0x60, 0x64, 0x08, 0x00]);
        assert_eq!(&buf[18..n], &hex(V3)[..]);
        assert_eq!(
            r.emit_frame(&eth, &mut buf[..n - 1], PayloadSource::Copy(&v3_payload())),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn display() {
        let s = v3_repr().to_string();
        assert!(s.starts_with("IPv4 192.168.1.10 > 192.168.1.20 dscp=0 ecn=Ect0 ttl=64 id=0x0042 DF UDP 49651 > 4791 len=56 BTH RC RDMA_WRITE_ONLY qp=0xa1 psn=43981 A, RETH"), "{s}");
    }
}
