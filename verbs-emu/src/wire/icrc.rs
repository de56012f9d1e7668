//! The RoCEv2 Invariant CRC (ROCEV2.md §3).
//!
//! The ICRC is the standard CRC-32 (IEEE 802.3, reflected, as zlib) over
//! `8 x 0xFF || masked IP header || masked UDP header || masked BTH ||
//! extension headers || payload || pad`, written on the wire least
//! significant byte first. Masked fields are replaced by all ones for the
//! computation only:
//!
//! * IPv4: TOS (byte 1), TTL (8), header checksum (10-11);
//! * IPv6: the low nibble of byte 0 and bytes 1-3 (traffic class and flow
//!   label), hop limit (7);
//! * UDP: checksum (6-7);
//! * BTH: byte 4 (FECN, BECN, Resv6a).
//!
//! [`Icrc`] is incremental over slices and never allocates: headers are
//! masked in a copy on the stack. Values are returned as the CRC-32 value
//! (`u32`); the wire bytes are `value.to_le_bytes()`.
//!
//! [`UdpEncap`] describes the IP and UDP header values that a kernel writes
//! around a UDP payload, so a sender or receiver that only sees BTH..ICRC
//! can still compute the ICRC ([`Icrc::for_udp_payload`]).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use super::{Error, Result};

/// Length of the ICRC trailer in bytes.
pub const ICRC_LEN: usize = 4;
/// IPv4 header length without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// IPv6 header length without extension headers.
pub const IPV6_HEADER_LEN: usize = 40;
/// UDP header length.
pub const UDP_HEADER_LEN: usize = 8;
/// BTH length.
pub const BTH_LEN: usize = 12;
/// The IANA UDP port of RoCEv2.
pub const ROCE_UDP_PORT: u16 = 4791;
/// The IP protocol / next header number of UDP.
pub const IP_PROTO_UDP: u8 = 17;

/// Replace the ICRC-variant fields of a 20-byte IPv4 header by ones.
pub fn mask_ipv4_header(h: &mut [u8; IPV4_HEADER_LEN]) {
    h[1] = 0xFF;
    h[8] = 0xFF;
    h[10] = 0xFF;
    h[11] = 0xFF;
}

/// Replace the ICRC-variant fields of a 40-byte IPv6 header by ones.
pub fn mask_ipv6_header(h: &mut [u8; IPV6_HEADER_LEN]) {
    h[0] |= 0x0F;
    h[1] = 0xFF;
    h[2] = 0xFF;
    h[3] = 0xFF;
    h[7] = 0xFF;
}

/// Replace the checksum of an 8-byte UDP header by ones.
pub fn mask_udp_header(h: &mut [u8; UDP_HEADER_LEN]) {
    h[6] = 0xFF;
    h[7] = 0xFF;
}

/// Replace byte 4 (FECN, BECN, Resv6a) of a 12-byte BTH by ones.
pub fn mask_bth(h: &mut [u8; BTH_LEN]) {
    h[4] = 0xFF;
}

/// An ICRC computation in progress. Feed the parts in wire order.
#[derive(Debug, Clone)]
pub struct Icrc {
    hasher: crc32fast::Hasher,
}

impl Default for Icrc {
    fn default() -> Self {
        Self::new()
    }
}

impl Icrc {
    /// Start a computation: the 8 bytes of 0xFF that stand in for the LRH
    /// are already fed.
    pub fn new() -> Icrc {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&[0xFF; 8]);
        Icrc { hasher }
    }

    /// Feed a 20-byte IPv4 header, masked.
    pub fn update_ipv4_header(&mut self, header: &[u8; IPV4_HEADER_LEN]) {
        let mut h = *header;
        mask_ipv4_header(&mut h);
        self.hasher.update(&h);
    }

    /// Feed a 40-byte IPv6 header, masked.
    pub fn update_ipv6_header(&mut self, header: &[u8; IPV6_HEADER_LEN]) {
        let mut h = *header;
        mask_ipv6_header(&mut h);
        self.hasher.update(&h);
    }

    /// Feed an 8-byte UDP header, masked.
    pub fn update_udp_header(&mut self, header: &[u8; UDP_HEADER_LEN]) {
        let mut h = *header;
        mask_udp_header(&mut h);
        self.hasher.update(&h);
    }

    /// Feed a 12-byte BTH, masked.
    pub fn update_bth(&mut self, header: &[u8; BTH_LEN]) {
        let mut h = *header;
        mask_bth(&mut h);
        self.hasher.update(&h);
    }

    /// Feed unmasked bytes (extension headers, payload, pad).
    pub fn update(&mut self, data: &[u8]) {
        self.hasher.update(data);
    }

    /// Feed a UDP payload (BTH first, without the ICRC trailer): the BTH
    /// masked, the rest as is. [`Error::Truncated`] if shorter than a BTH.
    pub fn update_udp_payload(&mut self, udp_payload: &[u8]) -> Result<()> {
        let bth: &[u8; BTH_LEN] = udp_payload
            .get(..BTH_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(Error::Truncated)?;
        self.update_bth(bth);
        self.update(&udp_payload[BTH_LEN..]);
        Ok(())
    }

    /// The CRC-32 value. The wire bytes are `to_le_bytes()` of it.
    pub fn finish(self) -> u32 {
        self.hasher.finalize()
    }

    /// The ICRC of an IP packet from its first IP byte through the pad,
    /// without the ICRC trailer. The IP version comes from the first nibble;
    /// IPv4 options and IPv6 extension headers are refused
    /// ([`Error::Malformed`]), as RoCEv2 does not use them.
    pub fn for_ip_packet(ip_packet: &[u8]) -> Result<u32> {
        let first = *ip_packet.first().ok_or(Error::Truncated)?;
        let mut icrc = Icrc::new();
        let ip_len = match first >> 4 {
            4 => {
                if first & 0x0F != 5 {
                    return Err(Error::Malformed);
                }
                icrc.update_ipv4_header(array(ip_packet, 0)?);
                IPV4_HEADER_LEN
            }
            6 => {
                icrc.update_ipv6_header(array(ip_packet, 0)?);
                IPV6_HEADER_LEN
            }
            _ => return Err(Error::Malformed),
        };
        icrc.update_udp_header(array(ip_packet, ip_len)?);
        icrc.update_udp_payload(&ip_packet[ip_len + UDP_HEADER_LEN..])?;
        Ok(icrc.finish())
    }

    /// The ICRC of a UDP payload (BTH through pad, without the ICRC
    /// trailer) that travels inside the IP and UDP headers `encap`
    /// describes. The lengths come from `udp_payload.len() + 4`.
    pub fn for_udp_payload(encap: &UdpEncap, udp_payload: &[u8]) -> Result<u32> {
        Self::for_udp_payload_parts(encap, udp_payload.len(), udp_payload, core::iter::empty())
    }

    /// [`Icrc::for_udp_payload`] of a UDP payload given in parts, without
    /// joining them: `head` starts with the BTH, `rest` follows it in
    /// order, and `body_len` is the length of all of them together (BTH
    /// through pad). For a sender that hands the kernel its headers and the
    /// application's payload as separate buffers.
    pub fn for_udp_payload_parts<'a>(
        encap: &UdpEncap,
        body_len: usize,
        head: &[u8],
        rest: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<u32> {
        let bth: &[u8; BTH_LEN] = array(head, 0)?;
        let udp_len = UDP_HEADER_LEN + body_len + ICRC_LEN;
        // The whole masked prefix (LRH stand-in, IP, UDP, BTH) is built on
        // the stack and fed in one call: small updates dominate the cost
        // of short packets.
        let mut prefix = [0xFFu8; 8 + IPV6_HEADER_LEN + UDP_HEADER_LEN + BTH_LEN];
        let ip_len = match encap.ip {
            IpEncap::V4 {
                src,
                dst,
                identification,
                dont_fragment,
            } => {
                let total =
                    u16::try_from(IPV4_HEADER_LEN + udp_len).map_err(|_| Error::Malformed)?;
                let mut h = ipv4_header(src, dst, total, identification, dont_fragment);
                mask_ipv4_header(&mut h);
                prefix[8..8 + IPV4_HEADER_LEN].copy_from_slice(&h);
                IPV4_HEADER_LEN
            }
            IpEncap::V6 { src, dst } => {
                let plen = u16::try_from(udp_len).map_err(|_| Error::Malformed)?;
                let mut h = [0u8; IPV6_HEADER_LEN];
                h[0] = 0x60;
                h[4..6].copy_from_slice(&plen.to_be_bytes());
                h[6] = IP_PROTO_UDP;
                h[8..24].copy_from_slice(&src.octets());
                h[24..40].copy_from_slice(&dst.octets());
                mask_ipv6_header(&mut h);
                prefix[8..8 + IPV6_HEADER_LEN].copy_from_slice(&h);
                IPV6_HEADER_LEN
            }
        };
        let udp_len = u16::try_from(udp_len).map_err(|_| Error::Malformed)?;
        let u = 8 + ip_len;
        prefix[u..u + 2].copy_from_slice(&encap.src_port.to_be_bytes());
        prefix[u + 2..u + 4].copy_from_slice(&encap.dst_port.to_be_bytes());
        prefix[u + 4..u + 6].copy_from_slice(&udp_len.to_be_bytes());
        // u + 6..u + 8: the UDP checksum, masked (already 0xFF).
        let b = u + UDP_HEADER_LEN;
        prefix[b..b + BTH_LEN].copy_from_slice(bth);
        prefix[b + 4] = 0xFF;
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&prefix[..b + BTH_LEN]);
        hasher.update(&head[BTH_LEN..]);
        for part in rest {
            hasher.update(part);
        }
        Ok(hasher.finalize())
    }
}

/// The ICRC-relevant IPv4 header a kernel writes (masked fields zero).
fn ipv4_header(
    src: Ipv4Addr,
    dst: Ipv4Addr,
    total_len: u16,
    identification: u16,
    dont_fragment: bool,
) -> [u8; IPV4_HEADER_LEN] {
    let mut h = [0u8; IPV4_HEADER_LEN];
    h[0] = 0x45;
    h[2..4].copy_from_slice(&total_len.to_be_bytes());
    h[4..6].copy_from_slice(&identification.to_be_bytes());
    h[6] = if dont_fragment { 0x40 } else { 0 };
    h[9] = IP_PROTO_UDP;
    h[12..16].copy_from_slice(&src.octets());
    h[16..20].copy_from_slice(&dst.octets());
    h
}

/// Find the IPv4 identification and DF flag that make the ICRC of a
/// received UDP payload (BTH through ICRC) right, for a receiver that sees
/// only the UDP payload (ROCEV2.md §8). The addresses and ports come from
/// `encap`; its identification and DF are ignored.
///
/// CRC-32 is affine over GF(2), so the 17 unknown bits are solved for
/// rather than guessed: one pass over the packet, then 17 short CRCs and a
/// 32x17 elimination. Returns `Ok(None)` when no value fits (the packet is
/// corrupt). Note the price: with 17 of the 32 check bits spent on the
/// header, a random corruption still passes with probability 2^-15, so
/// count packets accepted this way separately. [`Error::Malformed`] for an
/// IPv6 `encap` (IPv6 has no such unknown field).
pub fn recover_ipv4_identification(
    encap: &UdpEncap,
    udp_payload: &[u8],
) -> Result<Option<(u16, bool)>> {
    let IpEncap::V4 { src, dst, .. } = encap.ip else {
        return Err(Error::Malformed);
    };
    let carried = carried(udp_payload)?;
    let body = &udp_payload[..udp_payload.len() - ICRC_LEN];
    let mut base = *encap;
    base.ip = IpEncap::V4 {
        src,
        dst,
        identification: 0,
        dont_fragment: false,
    };
    let c0 = Icrc::for_udp_payload(&base, body)?;
    let mut want = c0 ^ carried;
    // The CRC of the first 16 input bytes (8 x 0xFF and IPv4 bytes 0-7) for
    // a header with the given identification and flags byte.
    let total = u16::try_from(IPV4_HEADER_LEN + UDP_HEADER_LEN + udp_payload.len())
        .map_err(|_| Error::Malformed)?;
    let prefix_crc = |id: u16, df: bool| {
        let h = ipv4_header(src, dst, total, id, df);
        let mut m = h;
        mask_ipv4_header(&mut m);
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&[0xFF; 8]);
        hasher.update(&m[..8]);
        hasher.finalize()
    };
    let p0 = prefix_crc(0, false);
    // Bytes fed after the 16-byte prefix.
    let rest = (IPV4_HEADER_LEN - 8 + UDP_HEADER_LEN + body.len()) as u64;
    // basis[p]: (vector with highest set bit p, combination of unknowns).
    let mut basis: [Option<(u32, u32)>; 32] = [None; 32];
    for bit in 0..17u32 {
        let (id, df) = if bit < 16 {
            (1u16 << bit, false)
        } else {
            (0, true)
        };
        // The effect of this one bit on the final CRC: its effect on the
        // prefix CRC, carried through `rest` more bytes (linear).
        let mut h = crc32fast::Hasher::new_with_initial(prefix_crc(id, df) ^ p0);
        h.combine(&crc32fast::Hasher::new_with_initial_len(0, rest));
        let mut v = h.finalize();
        let mut combo = 1u32 << bit;
        while v != 0 {
            let p = 31 - v.leading_zeros() as usize;
            match basis[p] {
                Some((bv, bc)) => {
                    v ^= bv;
                    combo ^= bc;
                }
                None => {
                    basis[p] = Some((v, combo));
                    break;
                }
            }
        }
    }
    let mut combo = 0u32;
    while want != 0 {
        let p = 31 - want.leading_zeros() as usize;
        match basis[p] {
            Some((bv, bc)) => {
                want ^= bv;
                combo ^= bc;
            }
            None => return Ok(None),
        }
    }
    Ok(Some(((combo & 0xFFFF) as u16, combo & 0x1_0000 != 0)))
}

/// A fixed-size header at `at`, or [`Error::Truncated`].
fn array<const N: usize>(buf: &[u8], at: usize) -> Result<&[u8; N]> {
    buf.get(at..at + N)
        .and_then(|b| b.try_into().ok())
        .ok_or(Error::Truncated)
}

/// The ICRC carried in the last four bytes of `buf` (read little-endian,
/// comparable with [`Icrc::finish`]).
pub fn carried(buf: &[u8]) -> Result<u32> {
    let n = buf.len();
    let b: &[u8; ICRC_LEN] = array(buf, n.checked_sub(ICRC_LEN).ok_or(Error::Truncated)?)?;
    Ok(u32::from_le_bytes(*b))
}

/// Check the ICRC of an IP packet (first IP byte through the ICRC
/// trailer): `Ok` or [`Error::BadIcrc`] with both values.
pub fn verify_ip_packet(ip_packet: &[u8]) -> Result<()> {
    let carried = carried(ip_packet)?;
    let computed = Icrc::for_ip_packet(&ip_packet[..ip_packet.len() - ICRC_LEN])?;
    check(carried, computed)
}

/// Check the ICRC of a UDP payload (BTH through the ICRC trailer) received
/// inside the headers `encap` describes.
pub fn verify_udp_payload(encap: &UdpEncap, udp_payload: &[u8]) -> Result<()> {
    let carried = carried(udp_payload)?;
    let computed = Icrc::for_udp_payload(encap, &udp_payload[..udp_payload.len() - ICRC_LEN])?;
    check(carried, computed)
}

fn check(carried: u32, computed: u32) -> Result<()> {
    if carried == computed {
        Ok(())
    } else {
        Err(Error::BadIcrc { carried, computed })
    }
}

/// The IP-level values of the headers around a UDP payload that the ICRC
/// covers (the masked ones, TOS/TTL/flow label/checksums, are not needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IpEncap {
    /// IPv4, 20-byte header, protocol UDP, fragment offset 0, no MF.
    V4 {
        /// Source address.
        src: Ipv4Addr,
        /// Destination address.
        dst: Ipv4Addr,
        /// Identification field (0 from a Linux socket that sets DF).
        identification: u16,
        /// The DF flag.
        dont_fragment: bool,
    },
    /// IPv6, 40-byte header, next header UDP.
    V6 {
        /// Source address.
        src: Ipv6Addr,
        /// Destination address.
        dst: Ipv6Addr,
    },
}

/// The IP and UDP header values a kernel writes around a RoCEv2 UDP payload,
/// as far as the ICRC covers them. Lengths are derived from the payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpEncap {
    /// The IP part.
    pub ip: IpEncap,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port (4791).
    pub dst_port: u16,
}

impl UdpEncap {
    /// IPv4 as Linux writes it from an unconnected UDP socket with DF set
    /// (path MTU discovery "do"): identification 0, DF, destination port
    /// 4791.
    pub const fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, src_port: u16) -> UdpEncap {
        UdpEncap {
            ip: IpEncap::V4 {
                src,
                dst,
                identification: 0,
                dont_fragment: true,
            },
            src_port,
            dst_port: ROCE_UDP_PORT,
        }
    }

    /// IPv6 with destination port 4791.
    pub const fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, src_port: u16) -> UdpEncap {
        UdpEncap {
            ip: IpEncap::V6 { src, dst },
            src_port,
            dst_port: ROCE_UDP_PORT,
        }
    }

    /// From the source and destination socket addresses of a datagram, as
    /// a Linux socket with DF set sends it (identification 0, DF). Both
    /// must be of the same family ([`Error::Malformed`] otherwise).
    pub fn from_sockets(src: SocketAddr, dst: SocketAddr) -> Result<UdpEncap> {
        let ip = match (src, dst) {
            (SocketAddr::V4(s), SocketAddr::V4(d)) => IpEncap::V4 {
                src: *s.ip(),
                dst: *d.ip(),
                identification: 0,
                dont_fragment: true,
            },
            (SocketAddr::V6(s), SocketAddr::V6(d)) => IpEncap::V6 {
                src: *s.ip(),
                dst: *d.ip(),
            },
            _ => return Err(Error::Malformed),
        };
        Ok(UdpEncap {
            ip,
            src_port: src.port(),
            dst_port: dst.port(),
        })
    }

    /// The same flow seen from the other end (addresses and ports swapped),
    /// e.g. to describe a received packet from the receiver's view of the
    /// sender.
    #[must_use]
    pub const fn reversed(self) -> UdpEncap {
        let ip = match self.ip {
            IpEncap::V4 {
                src,
                dst,
                identification,
                dont_fragment,
            } => IpEncap::V4 {
                src: dst,
                dst: src,
                identification,
                dont_fragment,
            },
            IpEncap::V6 { src, dst } => IpEncap::V6 { src: dst, dst: src },
        };
        UdpEncap {
            ip,
            src_port: self.dst_port,
            dst_port: self.src_port,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    const V1: &str = "45020034123440004011a514c0a8010ac0a80114c1f312b7002000000430ffff000000118000000068656c6c6f0000003daab6e3";

    #[test]
    fn crc_parameters_are_the_standard_crc32() {
        let mut h = crc32fast::Hasher::new();
        h.update(b"123456789");
        assert_eq!(h.finalize(), 0xCBF4_3926);
    }

    #[test]
    fn worked_example_of_vector_1() {
        let p = hex(V1);
        let v = Icrc::for_ip_packet(&p[..p.len() - 4]).unwrap();
        assert_eq!(v, 0xe3b6_aa3d);
        assert_eq!(v.to_le_bytes(), [0x3d, 0xaa, 0xb6, 0xe3]);
        assert_eq!(carried(&p), Ok(0xe3b6_aa3d));
        assert_eq!(verify_ip_packet(&p), Ok(()));
    }

    #[test]
    fn incremental_feeding_equals_one_shot() {
        let p = hex(V1);
        let mut icrc = Icrc::new();
        icrc.update_ipv4_header(p[..20].try_into().unwrap());
        icrc.update_udp_header(p[20..28].try_into().unwrap());
        icrc.update_bth(p[28..40].try_into().unwrap());
        icrc.update(&p[40..43]);
        icrc.update(&p[43..48]);
        assert_eq!(icrc.finish(), 0xe3b6_aa3d);
    }

    #[test]
    fn masked_fields_do_not_change_it_and_covered_ones_do() {
        let p = hex(V1);
        let body = &p[..p.len() - 4];
        let base = Icrc::for_ip_packet(body).unwrap();
        for i in [1usize, 8, 10, 11, 26, 27, 32] {
            let mut q = body.to_vec();
            q[i] ^= 0x5A;
            assert_eq!(Icrc::for_ip_packet(&q).unwrap(), base, "byte {i} is masked");
        }
        for i in [
            2usize, 3, 4, 5, 6, 7, 9, 12, 19, 20, 24, 28, 29, 30, 36, 39, 40, 47,
        ] {
            let mut q = body.to_vec();
            q[i] ^= 0x01;
            assert_ne!(
                Icrc::for_ip_packet(&q).unwrap(),
                base,
                "byte {i} is covered"
            );
        }
    }

    #[test]
    fn flipped_last_byte_is_bad_icrc() {
        let mut p = hex(V1);
        *p.last_mut().unwrap() ^= 1;
        assert_eq!(
            verify_ip_packet(&p),
            Err(Error::BadIcrc {
                carried: 0xe2b6_aa3d,
                computed: 0xe3b6_aa3d
            })
        );
    }

    /// The IPv4/UDP encapsulation of vector 1 (identification 0x1234, DF).
    fn v1_encap() -> UdpEncap {
        UdpEncap {
            ip: IpEncap::V4 {
                src: Ipv4Addr::new(192, 168, 1, 10),
                dst: Ipv4Addr::new(192, 168, 1, 20),
                identification: 0x1234,
                dont_fragment: true,
            },
            src_port: 49651,
            dst_port: 4791,
        }
    }

    #[test]
    fn parts_give_the_icrc_of_the_joined_payload() {
        // Vector 1's UDP payload (BTH through pad), cut every which way.
        let p = hex(V1);
        let body = &p[28..p.len() - 4];
        let encap = v1_encap();
        for head in BTH_LEN..=body.len() {
            for cut in head..=body.len() {
                let rest = [&body[head..cut], &[][..], &body[cut..]];
                assert_eq!(
                    Icrc::for_udp_payload_parts(&encap, body.len(), &body[..head], rest),
                    Ok(0xe3b6_aa3d),
                    "head {head} cut {cut}"
                );
            }
        }
        assert!(Icrc::for_udp_payload_parts(&encap, 8, &body[..8], []).is_err());
    }

    #[test]
    fn udp_payload_form_matches_the_whole_packet_form() {
        // Vector 1 has identification 0x1234 with DF.
        let p = hex(V1);
        let encap = v1_encap();
        assert_eq!(verify_udp_payload(&encap, &p[28..]), Ok(()));
        let wrong_id = UdpEncap::ipv4(
            Ipv4Addr::new(192, 168, 1, 10),
            Ipv4Addr::new(192, 168, 1, 20),
            49651,
        );
        assert!(matches!(
            verify_udp_payload(&wrong_id, &p[28..]),
            Err(Error::BadIcrc { .. })
        ));
        assert_eq!(encap.reversed().reversed(), encap);
        let from = UdpEncap::from_sockets(
            "192.168.1.10:49651".parse().unwrap(),
            "192.168.1.20:4791".parse().unwrap(),
        );
        assert_eq!(from, Ok(wrong_id));
        assert_eq!(
            UdpEncap::from_sockets(
                "192.168.1.10:1".parse().unwrap(),
                "[::1]:4791".parse().unwrap()
            ),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn identification_and_df_are_recovered_from_the_icrc() {
        // Vector 1: identification 0x1234 with DF.
        let p = hex(V1);
        let encap = UdpEncap::ipv4(
            Ipv4Addr::new(192, 168, 1, 10),
            Ipv4Addr::new(192, 168, 1, 20),
            49651,
        );
        assert_eq!(
            recover_ipv4_identification(&encap, &p[28..]),
            Ok(Some((0x1234, true)))
        );
        // Every identification and both DF values, on a short payload.
        let mut buf = [0u8; 64];
        let body = [0x04, 0x00, 0xff, 0xff, 0, 0, 0, 7, 0x80, 0, 0, 1];
        buf[..12].copy_from_slice(&body);
        for id in (0..=u16::MAX).step_by(997) {
            for df in [false, true] {
                let mut e = encap;
                e.ip = IpEncap::V4 {
                    src: Ipv4Addr::new(192, 168, 1, 10),
                    dst: Ipv4Addr::new(192, 168, 1, 20),
                    identification: id,
                    dont_fragment: df,
                };
                let crc = Icrc::for_udp_payload(&e, &buf[..12]).unwrap();
                buf[12..16].copy_from_slice(&crc.to_le_bytes());
                assert_eq!(
                    recover_ipv4_identification(&encap, &buf[..16]),
                    Ok(Some((id, df)))
                );
            }
        }
        // A corrupted payload fits no header.
        let mut q = p.clone();
        q[45] ^= 0x01;
        assert_eq!(recover_ipv4_identification(&encap, &q[28..]), Ok(None));
        let v6 = UdpEncap::ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, 1);
        assert_eq!(
            recover_ipv4_identification(&v6, &p[28..]),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn short_and_odd_inputs_are_errors() {
        assert_eq!(Icrc::for_ip_packet(&[]), Err(Error::Truncated));
        assert_eq!(Icrc::for_ip_packet(&[0x45; 30]), Err(Error::Truncated));
        assert_eq!(Icrc::for_ip_packet(&[0x46; 60]), Err(Error::Malformed));
        assert_eq!(Icrc::for_ip_packet(&[0x55; 60]), Err(Error::Malformed));
        assert_eq!(carried(&[1, 2, 3]), Err(Error::Truncated));
        assert_eq!(verify_ip_packet(&[0x60; 50]), Err(Error::Truncated));
    }
}
