//! Truncated or garbage input of any length never panics any parser.

use proptest::prelude::*;
use verbs_emu::wire::{icrc, roce, Icrc, RoceHeaders, RocePacket, RoceRepr, UdpEncap};

fn parse_everything(bytes: &[u8]) {
    let _ = RoceHeaders::parse(bytes);
    let _ = roce::parse_udp_payload_unverified(bytes);
    let encap = UdpEncap::ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 0xC000);
    let _ = roce::parse_udp_payload(bytes, &encap);
    let _ = Icrc::for_ip_packet(bytes);
    let _ = icrc::verify_ip_packet(bytes);
    let _ = Icrc::for_udp_payload(&encap, bytes);
    if let Ok(p) = RocePacket::new_checked(bytes) {
        // After a successful check every accessor is safe.
        let _ = (
            p.payload(),
            p.pad(),
            p.icrc(),
            p.compute_icrc(),
            p.udp(),
            p.bth(),
        );
        let _ = RoceRepr::parse(&p);
        let _ = RoceRepr::parse_unverified(&p);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..160)) {
        parse_everything(&bytes);
    }

    #[test]
    fn random_bytes_behind_plausible_ip_headers_never_panic(
        v6 in any::<bool>(),
        len_field in any::<u16>(),
        udp_len in any::<u16>(),
        opcode in any::<u8>(),
        flags in any::<u8>(),
        tail in proptest::collection::vec(any::<u8>(), 0..120),
    ) {
        // Steer the random input past the first checks so that the deeper
        // layers see garbage too.
        let mut b = Vec::new();
        if v6 {
            b.extend_from_slice(&[0x60, 0, 0, 0]);
            b.extend_from_slice(&len_field.to_be_bytes());
            b.extend_from_slice(&[17, 64]);
            b.extend_from_slice(&[0u8; 32]);
        } else {
            b.extend_from_slice(&[0x45, 0]);
            b.extend_from_slice(&len_field.to_be_bytes());
            b.extend_from_slice(&[0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        }
        b.extend_from_slice(&[0xC0, 0, 0x12, 0xB7]);
        b.extend_from_slice(&udp_len.to_be_bytes());
        b.extend_from_slice(&[0, 0, opcode, flags]);
        b.extend_from_slice(&tail);
        parse_everything(&b);
    }
}
