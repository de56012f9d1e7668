//! ECMP: choosing one of the equal-cost next hops per flow.
//!
//! A switch hashes the flow's 5-tuple (source IP, destination IP, UDP
//! source port, UDP destination port 4791, protocol 17) with a per-switch
//! salt and takes `hash % n` among the `n` next hops that [`Routes`]
//! lists (ascending port order). All packets of a flow (one QP) take one
//! path; different QPs of the same host pair spread because the UDP
//! source port carries QP entropy, as on real NICs
//! ([`roce_udp_source_port`]).
//!
//! The hash ([`ecmp_hash`]) is FNV-1a (64 bit) over the 13 tuple bytes in
//! network order, seeded with the salt, then the splitmix64 finaliser,
//! keeping the top 32 bits. It is deterministic and platform independent.
//! The finaliser matters: a linear hash (CRC, plain XOR) with a per-switch
//! salt only permutes the choice, so every switch on a path would split
//! flows the same way (hash polarisation); the non-linear mixing makes the
//! choices at successive switches independent.
//!
//! [`Routes`]: super::Routes

use std::net::Ipv4Addr;

use roce::wire::ROCE_UDP_PORT;

use super::NodeId;

/// The fields a switch hashes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FiveTuple {
    /// Source IPv4 address.
    pub src_ip: Ipv4Addr,
    /// Destination IPv4 address.
    pub dst_ip: Ipv4Addr,
    /// UDP source port (QP entropy for RoCEv2).
    pub src_port: u16,
    /// UDP destination port (4791 for RoCEv2).
    pub dst_port: u16,
    /// IP protocol (17, UDP).
    pub protocol: u8,
}

impl FiveTuple {
    /// A RoCEv2 packet's tuple: UDP (17) to port 4791.
    pub fn roce(src_ip: Ipv4Addr, dst_ip: Ipv4Addr, src_port: u16) -> FiveTuple {
        FiveTuple {
            src_ip,
            dst_ip,
            src_port,
            dst_port: ROCE_UDP_PORT,
            protocol: 17,
        }
    }

    /// The 13 bytes hashed, in network order.
    pub fn bytes(&self) -> [u8; 13] {
        let mut b = [0u8; 13];
        b[0..4].copy_from_slice(&self.src_ip.octets());
        b[4..8].copy_from_slice(&self.dst_ip.octets());
        b[8..10].copy_from_slice(&self.src_port.to_be_bytes());
        b[10..12].copy_from_slice(&self.dst_port.to_be_bytes());
        b[12] = self.protocol;
        b
    }
}

/// The 32-bit ECMP hash of `tuple` at a switch with salt `salt` (the
/// simulator uses the switch's node id).
pub fn ecmp_hash(tuple: &FiveTuple, salt: u32) -> u32 {
    const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut h = FNV_OFFSET ^ u64::from(salt).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for b in tuple.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(FNV_PRIME);
    }
    // splitmix64 finaliser.
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 32) as u32
}

/// The port switch `switch` sends `tuple` out of, among `next_hops`
/// (as [`Routes::next_hops`](super::Routes::next_hops) gives them);
/// `None` when there is none.
pub fn ecmp_select(next_hops: &[u16], tuple: &FiveTuple, switch: NodeId) -> Option<u16> {
    match next_hops.len() {
        0 => None,
        1 => Some(next_hops[0]),
        n => Some(next_hops[ecmp_index(n, tuple, switch)]),
    }
}

/// The position among `n` (at least 1) equal-cost next hops that switch
/// `switch` hashes `tuple` to: what [`ecmp_select`] picks, for callers
/// that need the position (adaptive routing's tie order).
pub fn ecmp_index(n: usize, tuple: &FiveTuple, switch: NodeId) -> usize {
    ecmp_hash(tuple, switch.0) as usize % n.max(1)
}

/// The UDP source port a Linux RDMA stack gives a RoCEv2 QP: the flow
/// label from the local and remote QP numbers (`rdma_calc_flow_label`:
/// `fl = lqpn * rqpn; fl ^= fl >> 20; fl ^= fl >> 40`, low 20 bits), folded
/// to 14 bits and placed in 0xC000-0xFFFF (`rdma_flow_label_to_udp_sport`).
pub fn roce_udp_source_port(local_qpn: u32, remote_qpn: u32) -> u16 {
    let mut fl = u64::from(local_qpn) * u64::from(remote_qpn);
    fl ^= fl >> 20;
    fl ^= fl >> 40;
    let fl = (fl & 0xF_FFFF) as u32;
    let low = (fl & 0x3FFF) ^ ((fl & 0xF_C000) >> 14);
    (low | 0xC000) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn source_ports_stay_in_the_rocev2_range_and_vary_with_qpn() {
        let ports: Vec<u16> = (1..100).map(|q| roce_udp_source_port(q, 17)).collect();
        assert!(ports.iter().all(|&p| p >= 0xC000));
        let mut distinct = ports.clone();
        distinct.sort_unstable();
        distinct.dedup();
        assert!(distinct.len() > 90);
    }

    #[test]
    fn hash_spreads_flows_evenly_and_differs_per_switch() {
        let mut counts = [0u32; 4];
        let mut same = 0;
        for q in 0..4000u32 {
            let t = FiveTuple::roce(
                Ipv4Addr::new(10, 0, 0, 1),
                Ipv4Addr::new(10, 0, 1, 1),
                roce_udp_source_port(q + 2, 0x11),
            );
            let a = ecmp_select(&[0, 1, 2, 3], &t, NodeId(5)).unwrap();
            let b = ecmp_select(&[0, 1, 2, 3], &t, NodeId(6)).unwrap();
            counts[a as usize] += 1;
            same += u32::from(a == b);
        }
        // Even spread (1000 each, within 10%) and independent choices at
        // two switches (about a quarter agree).
        assert!(
            counts.iter().all(|&c| (900..=1100).contains(&c)),
            "{counts:?}"
        );
        assert!((850..=1150).contains(&same), "{same}");
    }
}
