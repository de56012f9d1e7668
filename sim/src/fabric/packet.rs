//! Frames as the fabric moves them: small `Copy` values with transport
//! headers and lengths, never payload bytes.

use verbs_emu::wire::{Ecn, RoceHeaders};

/// Ethernet header (14) and FCS (4).
pub const ETH_OVERHEAD: u32 = 18;
/// IPv4 (20) + UDP (8) + ICRC (4).
pub const IP_UDP_ICRC: u32 = 32;
/// A PFC frame on the wire (minimum Ethernet frame).
pub const PFC_FRAME: u32 = 64;
/// UDP destination port of RoCEv2.
pub const ROCE_UDP_PORT: u16 = 4791;

/// One RoCEv2 frame in flight or in a queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Transport headers (BTH and extensions).
    pub headers: RoceHeaders,
    /// Payload bytes (no pad).
    pub payload: u32,
    /// Frame bytes on the wire (Ethernet to FCS).
    pub wire: u32,
    /// Source host index.
    pub src: u32,
    /// Destination host index.
    pub dst: u32,
    /// 5-tuple hash (IP addresses, UDP ports) for ECMP.
    pub hash: u32,
    /// 802.1p priority.
    pub prio: u8,
    /// ECN codepoint of the IP header.
    pub ecn: Ecn,
    /// Port number the frame entered the current switch on.
    pub ingress: u16,
}

/// Bytes of the Ethernet frame carrying `headers` and `payload` bytes over
/// IPv4: Ethernet, IP, UDP, BTH and extension headers, payload, pad, ICRC,
/// FCS.
pub fn frame_len(headers: &RoceHeaders, payload: u32) -> u32 {
    let pad = payload.wrapping_neg() & 3;
    ETH_OVERHEAD + IP_UDP_ICRC + headers.header_len() as u32 + payload + pad
}

/// Hash of the 5-tuple (source host, destination host, UDP source port,
/// UDP destination port 4791, protocol UDP) used by every switch's ECMP.
pub fn five_tuple_hash(src: u32, dst: u32, sport: u16) -> u32 {
    let ip_src = 0x0A00_0000u64 | u64::from(src);
    let ip_dst = 0x0A00_0000u64 | u64::from(dst);
    let ports = (u64::from(sport) << 16) | u64::from(ROCE_UDP_PORT);
    let h =
        crate::engine::splitmix((ip_src << 32 | ip_dst) ^ crate::engine::splitmix(ports << 8 | 17));
    (h ^ (h >> 32)) as u32
}
