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
//!
//! # Receiving without the IPv4 header
//!
//! A UDP socket hands over the UDP payload only, yet the ICRC covers the
//! IPv4 identification and DF flag, which the receiver cannot see and can
//! only guess (0 for a lone datagram from Linux, 0, 1, 2, ... within a GSO
//! run; ROCEV2.md §8). The guess fails as soon as the path re-segments: a
//! qdisc splitting a GSO run, a sender without segmentation offload, GRO
//! merging differently, other senders' numbering. [`Ipv4IcrcCheck`] does
//! not guess twice: CRC-32 is affine over GF(2), so as a function of those
//! 17 bits the ICRC of a packet of known length is
//! `crc(expected) ^ L(id ^ expected id, df ^ expected df)` with `L` linear.
//! [`solve_ipv4_identification`] inverts `L` (one multiplication by
//! x^(-8n) mod P, n the bytes after the identification; no search) and
//! finds the only identification and DF that fit, or none when another
//! covered bit differs. The check:
//!
//! 1. computes the ICRC under the expected header (one CRC pass, the
//!    receive path's only cost when the guess is right) and accepts on a
//!    match ([`IcrcMatch::Expected`]);
//! 2. otherwise solves, and accepts ([`IcrcMatch::Solved`]) only a
//!    plausible answer: DF with an identification below
//!    [`SEGMENT_IDENTIFICATIONS`] (128: a segment's position in a GSO run
//!    from a Linux socket that sets DF), or an identification within
//!    [`IDENTIFICATION_BEHIND`] (64) behind to [`IDENTIFICATION_AHEAD`]
//!    (512) ahead of the last one solved from the same source address,
//!    with the same DF (a sender with its own counter, or a constant
//!    identification without DF, believed from its second packet on);
//! 3. rejects the rest as a bad ICRC.
//!
//! [`Ipv4IcrcCheck::strict`] stops at step 1: CRC-32's own guarantees,
//! and an ICRC error for every packet whose header differs from the
//! expected one.
//!
//! The price, for a corrupted packet whose ICRC difference is random: a
//! strict check accepts one header, chance 2^-32. This one accepts at most
//! 705 headers, 128 segment positions and 64 + 1 + 512 identifications
//! around the last one (each a distinct ICRC value, as `L` is injective),
//! chance at most 705 / 2^32 = 1.6e-7 (about 2^-22.5): the
//! solved 17 bits land on one of 2^17 headers at chance 2^-15, and at most
//! 705 / 2^17 of those are plausible. That is the chance for a random
//! corruption; CRC-32's guarantees for structured ones are lost: for a
//! given packet, some two-bit errors and some bursts of up to 32 bits
//! (which plain CRC-32 always rejects) have the ICRC difference of a
//! plausible identification and pass (in one random 4 KiB packet, 15
//! of the 127 segment positions' differences are those of some two-bit
//! error, about one in eight; and every accepted difference is that of
//! some burst of at most 32 bits, which covers half of all differences
//! from each start bit). A receiver that needs those
//! guarantees uses the strict check and loses re-segmented packets
//! instead. A corruption confined to the
//! identification and DF bits is accepted by design: no receiver uses
//! them. Single flipped bits keep CRC-32's guarantee in practice: outside
//! the identification and DF, a flip anywhere from the first IPv4 byte to
//! 26,768 bytes after the identification (far beyond the largest RoCEv2
//! packet) fits a header only at two offsets, 197 (bit 3) and 1858 (bit 6)
//! bytes after it, and both also flip DF, which neither rule accepts from
//! a sender whose DF does not change (a unit test checks every bit).
//!
//! Cost: the solve is two table reads and two or three multiplications in
//! GF(2)\[x\]/P (x^(-8n) from a low- and a high-byte table of powers,
//! 2 KiB built at compile time, then the product), one when the length is
//! that of the previous solve; no pass over the packet. The `wire` bench
//! measures it at 30-220 ns on a shared host, against 30-210 ns for the
//! one CRC pass of the fast path, which is what it was before.

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
/// `encap`; its identification and DF are only the starting hypothesis
/// (the answer does not depend on them).
///
/// One CRC pass over the packet, then [`solve_ipv4_identification`].
/// Returns `Ok(None)` when no identification and DF fit (the packet is
/// corrupt). Note the price: with 17 of the 32 check bits spent on the
/// header, a random corruption still fits some header with probability
/// 2^-15, so a receiver must judge the answer (see [`Ipv4IcrcCheck`]).
/// [`Error::Malformed`] for an IPv6 `encap` (IPv6 has no such unknown
/// field).
pub fn recover_ipv4_identification(
    encap: &UdpEncap,
    udp_payload: &[u8],
) -> Result<Option<(u16, bool)>> {
    if !matches!(encap.ip, IpEncap::V4 { .. }) {
        return Err(Error::Malformed);
    }
    let carried = carried(udp_payload)?;
    let computed = Icrc::for_udp_payload(encap, &udp_payload[..udp_payload.len() - ICRC_LEN])?;
    solve_ipv4_identification(encap, udp_payload.len(), computed, carried)
}

/// The IPv4 identification and DF flag that turn `computed`, the ICRC of a
/// `udp_payload_len`-byte UDP payload (BTH through ICRC) under the header
/// `encap` describes, into `carried`, the ICRC the packet carries; `None`
/// when no identification and DF do (another field differs: the packet is
/// corrupt). Costs no pass over the packet: two multiplications in
/// GF(2)\[x\]/P (see the module docs). [`Error::Malformed`] for an IPv6
/// `encap` or a length no IPv4 packet has.
pub fn solve_ipv4_identification(
    encap: &UdpEncap,
    udp_payload_len: usize,
    computed: u32,
    carried: u32,
) -> Result<Option<(u16, bool)>> {
    let n = bytes_after_identification(udp_payload_len).ok_or(Error::Malformed)?;
    solve_with(encap, unshift_bytes(n), computed ^ carried)
}

/// [`solve_ipv4_identification`] with `unshift` = `unshift_bytes(n)` for
/// the packet's length already at hand and `diff` = computed ^ carried.
fn solve_with(encap: &UdpEncap, unshift: u32, diff: u32) -> Result<Option<(u16, bool)>> {
    let IpEncap::V4 {
        identification,
        dont_fragment,
        ..
    } = encap.ip
    else {
        return Err(Error::Malformed);
    };
    Ok(id_df_difference(unshift, diff).map(|(id, df)| (identification ^ id, dont_fragment ^ df)))
}

/// The bytes of the ICRC's input from the IPv4 identification on (IPv4
/// header bytes 4-19, UDP header, BTH through pad) for a UDP payload of
/// `udp_payload_len` bytes (BTH through ICRC): the IPv4 total length less
/// 8. `None` when no IPv4 packet is that long.
fn bytes_after_identification(udp_payload_len: usize) -> Option<u16> {
    let total = udp_payload_len.checked_add(IPV4_HEADER_LEN + UDP_HEADER_LEN)?;
    u16::try_from(total).ok()?.checked_sub(8)
}

/// CRC-32's polynomial, bit-reflected: bit 31 is the coefficient of x^0,
/// bit 0 that of x^31 (x^32 implied).
const POLY_REFLECTED: u32 = 0xEDB8_8320;
/// The polynomial 1 in the reflected representation.
const ONE: u32 = 1 << 31;
/// x^-1 mod P: (P + 1) / x, i.e. P's coefficients of x^1..x^32 moved down
/// one degree.
const X_INVERSE: u32 = (POLY_REFLECTED << 1) | 1;

/// a * b mod P, both reflected (zlib's `multmodp`, without branches).
const fn mul_mod_p(a: u32, mut b: u32) -> u32 {
    let mut p = 0u32;
    let mut i = 0;
    while i < 32 {
        p ^= b & 0u32.wrapping_sub((a >> (31 - i)) & 1);
        b = (b >> 1) ^ (POLY_REFLECTED & 0u32.wrapping_sub(b & 1));
        i += 1;
    }
    p
}

/// `[1, f, f^2, ..., f^255]` mod P.
const fn powers(f: u32) -> [u32; 256] {
    let mut t = [ONE; 256];
    let mut k = 1;
    while k < 256 {
        t[k] = mul_mod_p(t[k - 1], f);
        k += 1;
    }
    t
}

/// x^-8 mod P: undoes feeding one byte.
const X_INVERSE_8: u32 = {
    let x2 = mul_mod_p(X_INVERSE, X_INVERSE);
    let x4 = mul_mod_p(x2, x2);
    mul_mod_p(x4, x4)
};
/// `UNSHIFT_LOW[k]` = x^(-8 k) mod P.
const UNSHIFT_LOW: [u32; 256] = powers(X_INVERSE_8);
/// `UNSHIFT_HIGH[k]` = x^(-8 * 256 k) mod P.
const UNSHIFT_HIGH: [u32; 256] = powers(mul_mod_p(UNSHIFT_LOW[255], X_INVERSE_8));

/// x^(-8 n) mod P: undoes what feeding `n` more bytes does to a CRC
/// difference. Two table reads and at most one multiplication.
fn unshift_bytes(n: u16) -> u32 {
    let (low, high) = (UNSHIFT_LOW[usize::from(n & 0xFF)], n >> 8);
    if high == 0 {
        low
    } else {
        mul_mod_p(low, UNSHIFT_HIGH[usize::from(high)])
    }
}

/// The bits of the little-endian word of IPv4 header bytes 4-7 that the
/// identification (bytes 4-5) and DF (0x40 of byte 6) occupy.
const ID_DF_BITS: u32 = 0x0040_FFFF;

/// The identification and DF differences (XOR) that explain the ICRC
/// difference `diff` of a packet, given `unshift` = x^(-8 n) for its `n`
/// [`bytes_after_identification`]; `None` when none do.
///
/// Feeding bytes into a CRC register multiplies its difference by x^8 mod
/// P, and XORing a 4-byte word `w` into the register at IPv4 byte 4 adds
/// `w * x^32`; `n - 4` bytes follow. So `diff = w * x^(8 n)`, and `w`
/// comes back by one multiplication with the inverse: the header differs
/// in identification and DF only if `w` has no bit elsewhere.
fn id_df_difference(unshift: u32, diff: u32) -> Option<(u16, bool)> {
    let w = mul_mod_p(diff, unshift);
    (w & !ID_DF_BITS == 0).then(|| ((w as u16).swap_bytes(), w & 0x0040_0000 != 0))
}

/// Solved identifications below this are taken for a segment's position in
/// a UDP GSO run whose first segment had identification 0 (Linux numbers
/// segments 0, 1, 2, ... from an unconnected socket that sets DF); the
/// kernel's UDP_MAX_SEGMENTS, 64, raised to 128 on recent kernels.
pub const SEGMENT_IDENTIFICATIONS: u16 = 128;
/// How far a solved identification may trail the last one solved from the
/// same source address and still be believed (reordering).
pub const IDENTIFICATION_BEHIND: u16 = 64;
/// How far a solved identification may lead the last one solved from the
/// same source address and still be believed (a per-destination counter
/// that other flows of the sender also advance, and losses).
pub const IDENTIFICATION_AHEAD: u16 = 512;
/// Source addresses whose last solved identification is remembered (a
/// fixed table indexed by address: bounded memory whatever the sources).
const RECENT_SOURCES: usize = 64;

/// How a received UDP payload's ICRC matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IcrcMatch {
    /// Under the expected header, as given.
    Expected,
    /// Under another IPv4 identification and DF, solved for and plausible.
    Solved {
        /// The identification that fits.
        identification: u16,
        /// The DF flag that fits.
        dont_fragment: bool,
    },
}

/// The last identification solved from one source address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct RecentId {
    src: Ipv4Addr,
    identification: u16,
    dont_fragment: bool,
}

/// The ICRC check of a receiver that sees only UDP payloads (ROCEV2.md §8):
/// the expected header first, then, when that fails on IPv4, the
/// identification and DF solved for and admitted only when plausible. See
/// the module docs for the rules and the chance that a corrupted packet
/// passes. Remembers the last identification solved per source address.
#[derive(Debug, Clone)]
pub struct Ipv4IcrcCheck {
    /// Solve for the identification and DF when the expected header fails
    /// (false: [`Ipv4IcrcCheck::strict`]).
    solve: bool,
    recent: [Option<RecentId>; RECENT_SOURCES],
    /// The last packet length solved for (bytes after the identification)
    /// and its `unshift_bytes`: a stream's packets mostly share a length,
    /// so the solve is then one multiplication.
    unshift: (u16, u32),
}

impl Default for Ipv4IcrcCheck {
    fn default() -> Self {
        Self::new()
    }
}

impl Ipv4IcrcCheck {
    /// A check that has seen no packet, solving for the identification
    /// and DF when the expected header fails: no valid packet is lost to a
    /// path that re-segments or a sender that numbers otherwise, at the
    /// price the module docs give.
    pub fn new() -> Ipv4IcrcCheck {
        Ipv4IcrcCheck {
            solve: true,
            recent: [None; RECENT_SOURCES],
            unshift: (0, ONE),
        }
    }

    /// A check against the expected header only: plain CRC-32 with all its
    /// guarantees (every error of up to three bits in a packet of up to
    /// 11 KiB, every burst of up to 32 bits, is rejected), where the solve
    /// accepts some of them (a two-bit error or a short burst whose ICRC
    /// difference is that of a plausible identification). The price: a
    /// packet whose IPv4 identification or DF is not what the receiver
    /// expects (a GSO run cut differently on the path, a receiver without
    /// GRO, a sender with its own counter) is an ICRC error. Fit for
    /// senders that send each packet alone or in GSO runs that arrive
    /// whole (loopback with GRO).
    pub fn strict() -> Ipv4IcrcCheck {
        Ipv4IcrcCheck {
            solve: false,
            ..Ipv4IcrcCheck::new()
        }
    }

    /// Whether this check solves for the identification (see
    /// [`Ipv4IcrcCheck::strict`]).
    pub fn solves(&self) -> bool {
        self.solve
    }

    /// Check the ICRC of a received UDP payload (BTH through ICRC) against
    /// the header `expected` describes (one CRC pass), else against the
    /// identification and DF that fit, if plausible. [`Error::BadIcrc`]
    /// with the expected header's value when neither matches;
    /// [`Error::Truncated`] below four bytes.
    pub fn verify(&mut self, expected: &UdpEncap, udp_payload: &[u8]) -> Result<IcrcMatch> {
        let carried = carried(udp_payload)?;
        let computed =
            Icrc::for_udp_payload(expected, &udp_payload[..udp_payload.len() - ICRC_LEN])?;
        if carried == computed {
            return Ok(IcrcMatch::Expected);
        }
        let bad = Error::BadIcrc { carried, computed };
        let IpEncap::V4 { src, .. } = expected.ip else {
            return Err(bad);
        };
        if !self.solve {
            return Err(bad);
        }
        let n = bytes_after_identification(udp_payload.len()).ok_or(Error::Malformed)?;
        if self.unshift.0 != n {
            self.unshift = (n, unshift_bytes(n));
        }
        match solve_with(expected, self.unshift.1, computed ^ carried)? {
            Some((identification, dont_fragment))
                if self.plausible(src, identification, dont_fragment) =>
            {
                Ok(IcrcMatch::Solved {
                    identification,
                    dont_fragment,
                })
            }
            _ => Err(bad),
        }
    }

    /// A segment position with DF, or within the window around the last
    /// identification solved from `src` with the same DF. Anything else is
    /// remembered as that source's last identification, so a sender with
    /// its own counter is believed from its second packet on.
    fn plausible(&mut self, src: Ipv4Addr, identification: u16, dont_fragment: bool) -> bool {
        if dont_fragment && identification < SEGMENT_IDENTIFICATIONS {
            return true;
        }
        let a = u32::from(src);
        let slot =
            &mut self.recent[((a ^ (a >> 8) ^ (a >> 16) ^ (a >> 24)) as usize) % RECENT_SOURCES];
        let near = slot.is_some_and(|r| {
            let ahead = identification.wrapping_sub(r.identification);
            r.src == src
                && r.dont_fragment == dont_fragment
                && (ahead <= IDENTIFICATION_AHEAD || ahead.wrapping_neg() <= IDENTIFICATION_BEHIND)
        });
        *slot = Some(RecentId {
            src,
            identification,
            dont_fragment,
        });
        near
    }
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

    /// x^k mod P, reflected, by squaring.
    fn x_pow(mut k: u64) -> u32 {
        let (mut p, mut sq) = (ONE, 1u32 << 30);
        while k != 0 {
            if k & 1 != 0 {
                p = mul_mod_p(p, sq);
            }
            sq = mul_mod_p(sq, sq);
            k >>= 1;
        }
        p
    }

    fn v4(src: u32, dst: u32, src_port: u16, identification: u16, dont_fragment: bool) -> UdpEncap {
        UdpEncap {
            ip: IpEncap::V4 {
                src: src.into(),
                dst: dst.into(),
                identification,
                dont_fragment,
            },
            src_port,
            dst_port: ROCE_UDP_PORT,
        }
    }

    /// `body` (BTH through pad) with the ICRC it has under `encap`.
    fn packet(encap: &UdpEncap, body: &[u8]) -> Vec<u8> {
        let mut p = body.to_vec();
        p.extend(Icrc::for_udp_payload(encap, body).unwrap().to_le_bytes());
        p
    }

    #[test]
    fn the_polynomial_arithmetic_is_the_one_crc32_combining_uses() {
        assert_eq!(mul_mod_p(X_INVERSE, 1 << 30), ONE);
        // crc(A || B) = crc(A) * x^(8 |B|) ^ crc(B) (zlib's combine),
        // against crc32fast's independent implementation.
        let data: Vec<u8> = (0..3000u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for (a, b) in [
            (0usize, 1usize),
            (5, 0),
            (17, 1000),
            (1000, 1999),
            (1, 2999),
        ] {
            let crc = |d: &[u8]| crc32fast::hash(d);
            assert_eq!(
                mul_mod_p(crc(&data[..a]), x_pow(8 * b as u64)) ^ crc(&data[a..a + b]),
                crc(&data[..a + b]),
                "{a} + {b}"
            );
        }
        for n in (0..=u16::MAX).step_by(97).chain([255, 256, 4132, 65535]) {
            assert_eq!(
                mul_mod_p(unshift_bytes(n), x_pow(8 * u64::from(n))),
                ONE,
                "{n}"
            );
        }
    }

    proptest::proptest! {
        #[test]
        fn the_solver_recovers_any_identification_and_df(
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 12..1500),
            (id, df, hyp_id, hyp_df) in proptest::prelude::any::<(u16, bool, u16, bool)>(),
            (src, dst, port) in proptest::prelude::any::<(u32, u32, u16)>(),
        ) {
            let p = packet(&v4(src, dst, port, id, df), &body);
            let hyp = v4(src, dst, port, hyp_id, hyp_df);
            proptest::prop_assert_eq!(recover_ipv4_identification(&hyp, &p), Ok(Some((id, df))));
            let computed = Icrc::for_udp_payload(&hyp, &body).unwrap();
            let carried = carried(&p).unwrap();
            proptest::prop_assert_eq!(
                solve_ipv4_identification(&hyp, p.len(), computed, carried),
                Ok(Some((id, df)))
            );
            proptest::prop_assert_eq!(
                solve_ipv4_identification(&hyp, usize::MAX, computed, carried),
                Err(Error::Malformed)
            );
            // A check expecting that very header takes the fast path.
            let mut check = Ipv4IcrcCheck::new();
            proptest::prop_assert_eq!(
                check.verify(&v4(src, dst, port, id, df), &p),
                Ok(IcrcMatch::Expected)
            );
        }
    }

    #[test]
    fn every_single_bit_flip_outside_the_identification_flips_df_too() {
        // A flip of bit `b` in the byte `o` bytes after the identification's
        // first byte changes the ICRC as the word (1 << b) * x^(-8 o) XORed
        // at the identification would: it fits a header only when that
        // word has no bit outside the identification and DF.
        let mut g = x_pow(8 * 4); // o = -4: IPv4 byte 0
        let mut fits = Vec::new();
        for o in -4i64..26_768 {
            for b in 0..8 {
                let w = mul_mod_p(1 << b, g);
                let in_id = (0..2).contains(&o) || (o == 2 && b == 6);
                if w & !ID_DF_BITS == 0 && !in_id {
                    assert_ne!(w & 0x0040_0000, 0, "offset {o} bit {b} keeps DF");
                    fits.push((o, b));
                }
            }
            g = mul_mod_p(g, X_INVERSE_8);
        }
        assert_eq!(fits, [(197, 3), (1858, 6)]);
        // By brute force, without the algebra: every bit of a 2 KiB UDP
        // payload flipped in turn (the masked BTH byte 4 aside). Only the
        // two offsets fit a header (the payload starts 24 bytes after the
        // identification), and the check rejects every flip.
        let body: Vec<u8> = (0..2048 + 12u32).map(|i| (i * 13 + 1) as u8).collect();
        let sent = packet(&v4(0x0A00_0001, 0x0A00_0002, 0xC000, 0, true), &body);
        let expected = v4(0x0A00_0001, 0x0A00_0002, 0xC000, 0, true);
        let mut check = Ipv4IcrcCheck::new();
        let mut fit = Vec::new();
        for at in (0..sent.len()).filter(|&at| at != 4) {
            for b in 0..8 {
                let mut q = sent.clone();
                q[at] ^= 1 << b;
                if recover_ipv4_identification(&expected, &q)
                    .unwrap()
                    .is_some()
                {
                    fit.push((at + 24, b));
                }
                assert!(check.verify(&expected, &q).is_err(), "byte {at} bit {b}");
            }
        }
        assert_eq!(fit, [(197, 3), (1858, 6)]);
        // The same through the check, in a 4 KiB packet (the UDP payload
        // starts 24 bytes after the identification), for all DF-constant
        // senders: positions, a counter with DF and one without.
        let body: Vec<u8> = (0..4096 + 12u32).map(|i| (i * 31 + 7) as u8).collect();
        for (id, df) in [
            (0u16, true),
            (3, true),
            (0x5000, true),
            (0x5000, false),
            (1, false),
        ] {
            let p = packet(&v4(0x0A00_0001, 0x0A00_0002, 0xC000, id, df), &body);
            let mut check = Ipv4IcrcCheck::new();
            // The sender's previous packet taught the check its counter.
            let prev = packet(
                &v4(0x0A00_0001, 0x0A00_0002, 0xC000, id.wrapping_sub(1), df),
                &body,
            );
            let expected = v4(0x0A00_0001, 0x0A00_0002, 0xC000, 0, true);
            let _ = check.verify(&expected, &prev);
            assert!(check.verify(&expected, &p).is_ok(), "{id} {df}");
            for (o, b) in [(197usize, 3u8), (1858, 6)] {
                let mut q = p.clone();
                q[o - 24] ^= 1 << b;
                let solved = recover_ipv4_identification(&expected, &q).unwrap();
                assert!(solved.is_some_and(|(_, d)| d != df), "{o}: {solved:?}");
                assert!(
                    matches!(check.verify(&expected, &q), Err(Error::BadIcrc { .. })),
                    "{id} {df} offset {o}"
                );
            }
        }
    }

    #[test]
    fn random_corruptions_are_rejected_and_fit_a_header_at_chance_2_pow_minus_15() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(15);
        // The linear step alone, on random ICRC differences: 2^20 tries
        // fit some header about 32 times (binomial, sd 5.7).
        let fit = (0..1u32 << 20)
            .filter(|_| {
                id_df_difference(unshift_bytes(rng.gen_range(36..4220)), rng.gen()).is_some()
            })
            .count();
        assert!((10..=60).contains(&fit), "{fit} of 2^20 fit");
        // Whole packets with random corruption (1-8 bytes, payload, BTH or
        // ICRC, never the masked BTH byte 4) from a sender numbering GSO
        // segments, checked as the receive path does: all rejected.
        let mut check = Ipv4IcrcCheck::new();
        for k in 0..3000 {
            let len = rng.gen_range(12..1200);
            let body: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
            let pos = rng.gen_range(0..64u16);
            let mut p = packet(&v4(0x7F00_0001, 0x7F00_0002, 0xC001, pos, true), &body);
            let sent = p.clone();
            for _ in 0..rng.gen_range(1..=8) {
                let at = loop {
                    let at = rng.gen_range(0..p.len());
                    if at != 4 {
                        break at;
                    }
                };
                p[at] ^= rng.gen_range(1..=255u8);
            }
            if p == sent {
                continue; // two flips of one byte cancelled out
            }
            let expected = v4(0x7F00_0001, 0x7F00_0002, 0xC001, 0, true);
            assert!(
                matches!(check.verify(&expected, &p), Err(Error::BadIcrc { .. })),
                "corruption {k} accepted"
            );
        }
    }

    /// The audit's finding: with the solve, a two-bit error that plain
    /// CRC-32 always rejects can pass, when its ICRC difference is that of
    /// a plausible identification (here a GSO segment position of a lone
    /// 4 KiB packet). Such an error is searched for among every pair of
    /// bits (the ICRC is affine: a pair's difference is the XOR of its two
    /// single-bit differences), found, accepted by the solving check and
    /// rejected by the strict one, which also rejects every single-bit
    /// error and keeps accepting the expected header.
    #[test]
    fn a_two_bit_error_the_solve_accepts_is_rejected_by_the_strict_check() {
        use rand::{Rng, SeedableRng};
        use std::collections::HashMap;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(26);
        let mut body: Vec<u8> = (0..12 + 4096).map(|_| rng.gen()).collect();
        body[..12].copy_from_slice(&[0x2A, 0x40, 0xff, 0xff, 0, 0, 0, 0x11, 0x80, 0, 0, 7]);
        let at = |id| v4(0x7F00_0001, 0x7F00_0002, 0xC004, id, true);
        let crc0 = Icrc::for_udp_payload(&at(0), &body).unwrap();
        // The ICRC difference of each single flipped bit (BTH byte 4 is
        // masked: its bits change nothing).
        let mut single: HashMap<u32, usize> = HashMap::new();
        let mut q = body.clone();
        for bit in (0..body.len() * 8).filter(|b| b / 8 != 4) {
            q[bit / 8] ^= 1 << (bit % 8);
            let d = Icrc::for_udp_payload(&at(0), &q).unwrap() ^ crc0;
            q[bit / 8] ^= 1 << (bit % 8);
            assert_ne!(d, 0, "a single-bit error always changes the ICRC");
            single.insert(d, bit);
        }
        // The differences the solve accepts from a lone packet: segment
        // positions 1..128 with DF.
        let found = (1..SEGMENT_IDENTIFICATIONS).find_map(|id| {
            let target = Icrc::for_udp_payload(&at(id), &body).unwrap() ^ crc0;
            single.iter().find_map(|(&d, &i)| {
                single
                    .get(&(d ^ target))
                    .filter(|&&j| j > i)
                    .map(|&j| (id, i, j))
            })
        });
        let (id, i, j) = found.expect("some two-bit error fits a segment position");
        let mut bad = packet(&at(0), &body);
        bad[i / 8] ^= 1 << (i % 8);
        bad[j / 8] ^= 1 << (j % 8);
        assert_eq!(
            Ipv4IcrcCheck::new().verify(&at(0), &bad),
            Ok(IcrcMatch::Solved {
                identification: id,
                dont_fragment: true
            }),
            "bits {i} and {j}"
        );
        let mut strict = Ipv4IcrcCheck::strict();
        assert!(!strict.solves());
        assert!(matches!(
            strict.verify(&at(0), &bad),
            Err(Error::BadIcrc { .. })
        ));
        // The packet as sent passes; as the sender's kernel numbered it in
        // a run that arrives cut, it is an ICRC error under the strict
        // check (the price) and solved under the other.
        assert_eq!(
            strict.verify(&at(0), &packet(&at(0), &body)),
            Ok(IcrcMatch::Expected)
        );
        let cut = packet(&at(3), &body);
        assert!(strict.verify(&at(0), &cut).is_err());
        assert!(matches!(
            Ipv4IcrcCheck::new().verify(&at(0), &cut),
            Ok(IcrcMatch::Solved {
                identification: 3,
                ..
            })
        ));
    }

    /// The ICRC a sender computes over an arbitrary 20-byte IPv4 header and
    /// the UDP header of `udp` ports for `body`.
    fn icrc_with_header(
        ip: &[u8; IPV4_HEADER_LEN],
        udp: &[u8; UDP_HEADER_LEN],
        body: &[u8],
    ) -> u32 {
        let mut icrc = Icrc::new();
        icrc.update_ipv4_header(ip);
        icrc.update_udp_header(udp);
        icrc.update_udp_payload(body).unwrap();
        icrc.finish()
    }

    #[test]
    fn a_flipped_header_bit_other_than_identification_and_df_is_rejected() {
        let body = [
            0x04, 0x00, 0xff, 0xff, 0, 0, 0, 7, 0x80, 0, 0, 1, 1, 2, 3, 4,
        ];
        let (src, dst) = (Ipv4Addr::new(10, 1, 2, 3), Ipv4Addr::new(10, 1, 2, 4));
        let total = (IPV4_HEADER_LEN + UDP_HEADER_LEN + body.len() + ICRC_LEN) as u16;
        let ip = ipv4_header(src, dst, total, 2, true);
        let mut udp = [0u8; UDP_HEADER_LEN];
        udp[..2].copy_from_slice(&0xC002u16.to_be_bytes());
        udp[2..4].copy_from_slice(&ROCE_UDP_PORT.to_be_bytes());
        udp[4..6].copy_from_slice(&(total - IPV4_HEADER_LEN as u16).to_be_bytes());
        let expected = v4(src.into(), dst.into(), 0xC002, 0, true);
        let mut p = body.to_vec();
        p.extend(icrc_with_header(&ip, &udp, &body).to_le_bytes());
        assert_eq!(
            Ipv4IcrcCheck::new().verify(&expected, &p),
            Ok(IcrcMatch::Solved {
                identification: 2,
                dont_fragment: true
            })
        );
        let masked = [1usize, 8, 10, 11];
        for byte in (0..IPV4_HEADER_LEN + 6).filter(|i| !masked.contains(i)) {
            for bit in 0..8 {
                let (mut ip, mut udp) = (ip, udp);
                match byte {
                    4 | 5 => continue,
                    6 if bit == 6 => continue,
                    _ if byte < IPV4_HEADER_LEN => ip[byte] ^= 1 << bit,
                    _ => udp[byte - IPV4_HEADER_LEN] ^= 1 << bit,
                }
                let mut q = body.to_vec();
                q.extend(icrc_with_header(&ip, &udp, &body).to_le_bytes());
                assert_eq!(
                    recover_ipv4_identification(&expected, &q),
                    Ok(None),
                    "{byte}.{bit}"
                );
                assert!(
                    Ipv4IcrcCheck::new().verify(&expected, &q).is_err(),
                    "{byte}.{bit}"
                );
            }
        }
    }

    #[test]
    fn positions_and_counters_are_believed_and_far_identifications_are_not() {
        let body: Vec<u8> = (0..1036u32).map(|i| i as u8).collect();
        let (a, b) = (0x0A00_0001, 0x0A00_0009);
        let at = |src: u32, id, df| packet(&v4(src, b, 0xC003, id, df), &body);
        let expected = |src: u32, pos| v4(src, b, 0xC003, pos, true);
        let solved = |identification, dont_fragment| {
            Ok(IcrcMatch::Solved {
                identification,
                dont_fragment,
            })
        };
        let mut check = Ipv4IcrcCheck::new();
        // The position guess: one CRC, no solving.
        assert_eq!(
            check.verify(&expected(a, 0), &at(a, 0, true)),
            Ok(IcrcMatch::Expected)
        );
        assert_eq!(
            check.verify(&expected(a, 9), &at(a, 9, true)),
            Ok(IcrcMatch::Expected)
        );
        // A GSO run cut on the way: segment 5 alone, 127 the last position.
        assert_eq!(
            check.verify(&expected(a, 0), &at(a, 5, true)),
            solved(5, true)
        );
        assert_eq!(
            check.verify(&expected(a, 3), &at(a, 127, true)),
            solved(127, true)
        );
        assert!(check.verify(&expected(a, 0), &at(a, 128, true)).is_err());
        // Small identifications without DF are no GSO positions.
        assert!(check.verify(&expected(b, 0), &at(b, 1, false)).is_err());
        // ... but a constant one is believed from the second packet on.
        assert_eq!(
            check.verify(&expected(b, 0), &at(b, 1, false)),
            solved(1, false)
        );
        // A counter: the first packet is refused, the next ones believed
        // within 64 behind and 512 ahead, with the same DF.
        assert!(check
            .verify(&expected(a, 0), &at(a, 0xFFF0, false))
            .is_err());
        assert_eq!(
            check.verify(&expected(a, 0), &at(a, 0xFFF1, false)),
            solved(0xFFF1, false)
        );
        assert_eq!(
            check.verify(&expected(a, 0), &at(a, 0x01F1, false)),
            solved(0x01F1, false)
        );
        assert_eq!(
            check.verify(&expected(a, 0), &at(a, 0x01B1, false)),
            solved(0x01B1, false)
        );
        assert!(check
            .verify(&expected(a, 0), &at(a, 0x01B1 - 65, false))
            .is_err());
        assert!(check
            .verify(&expected(a, 0), &at(a, 0x01B1 - 65 + 513, false))
            .is_err());
        assert!(check
            .verify(&expected(a, 0), &at(a, 0x01B1 - 65 + 514, true))
            .is_err());
        // The other source's memory is its own.
        assert!(check
            .verify(&expected(b, 0), &at(b, 0x0300, false))
            .is_err());
        // IPv6 has nothing to solve: exact or bad.
        let v6 = UdpEncap::ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST, 1);
        let p6 = packet(&v6, &body);
        assert_eq!(check.verify(&v6, &p6), Ok(IcrcMatch::Expected));
        let mut q6 = p6.clone();
        q6[20] ^= 1;
        assert!(matches!(check.verify(&v6, &q6), Err(Error::BadIcrc { .. })));
        assert_eq!(check.verify(&v6, &[1, 2, 3]), Err(Error::Truncated));
        // The largest UDP payload an IPv4 packet holds, and one more.
        let e = v4(a, b, 1, 7, true);
        assert_eq!(
            solve_ipv4_identification(&e, 65_507, 9, 9),
            Ok(Some((7, true)))
        );
        assert_eq!(
            solve_ipv4_identification(&e, 65_508, 9, 9),
            Err(Error::Malformed)
        );
        assert_eq!(
            solve_ipv4_identification(&v6, 100, 9, 9),
            Err(Error::Malformed)
        );
    }
}
