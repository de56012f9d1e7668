//! Truncated or garbage input of any length never panics any parser.

use ::roce::wire::dissect::decode_frame;
use ::roce::wire::{
    cnp, icrc, pfc, roce, samples, CnpRepr, Icrc, PcapReader, PfcRepr, RoceHeaders, RocePacket,
    RoceRepr, UdpEncap,
};
use proptest::prelude::*;

fn parse_everything(bytes: &[u8]) {
    let _ = RoceHeaders::parse(bytes);
    let _ = roce::parse_udp_payload_unverified(bytes);
    let encap = UdpEncap::ipv4([10, 0, 0, 1].into(), [10, 0, 0, 2].into(), 0xC000);
    let _ = roce::parse_udp_payload(bytes, &encap);
    let _ = Icrc::for_ip_packet(bytes);
    let _ = icrc::verify_ip_packet(bytes);
    let _ = Icrc::for_udp_payload(&encap, bytes);
    let _ = icrc::recover_ipv4_identification(&encap, bytes);
    if let Ok(p) = pfc::Packet::new_checked(bytes) {
        let _ = PfcRepr::parse(&p);
    }
    let _ = PfcRepr::parse_frame(bytes);
    if let Ok(p) = cnp::Packet::new_checked(bytes) {
        let _ = CnpRepr::parse(&p);
    }
    let _ = decode_frame(bytes).to_string();
    if let Ok(r) = PcapReader::new(bytes) {
        for rec in r.flatten() {
            let _ = decode_frame(rec.data);
        }
    }
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

#[test]
fn every_prefix_of_every_sample_and_of_the_sample_pcap_is_handled() {
    let all = samples::samples();
    for s in &all {
        for n in 0..s.frame.len() {
            parse_everything(&s.frame[..n]);
            parse_everything(&s.frame[14.min(n)..n]);
        }
    }
    let mut file = Vec::new();
    samples::write_pcap(&mut file).unwrap();
    for n in 0..file.len() {
        // Either the header is refused, or the records up to the cut come
        // back and the cut record is an error.
        if let Ok(r) = PcapReader::new(&file[..n]) {
            let results: Vec<_> = r.collect();
            let ok = results.iter().take_while(|r| r.is_ok()).count();
            assert!(ok <= all.len());
            assert!(results.len() - ok <= 1, "reading stops after an error");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn random_pcap_records_never_panic(
        big_endian in any::<bool>(),
        nanos in any::<bool>(),
        records in proptest::collection::vec(
            (any::<u32>(), any::<u32>(), 0u32..100, any::<u32>(),
             proptest::collection::vec(any::<u8>(), 0..100)),
            0..6,
        ),
    ) {
        let magic: u32 = if nanos { 0xA1B2_3C4D } else { 0xA1B2_C3D4 };
        let put = |b: &mut Vec<u8>, v: u32| {
            if big_endian { b.extend_from_slice(&v.to_be_bytes()) } else { b.extend_from_slice(&v.to_le_bytes()) }
        };
        let mut b = Vec::new();
        put(&mut b, magic);
        put(&mut b, 0x0004_0002u32.rotate_left(if big_endian { 16 } else { 0 }));
        put(&mut b, 0);
        put(&mut b, 0);
        put(&mut b, 65535);
        put(&mut b, 1);
        for (secs, frac, incl, orig, data) in records {
            put(&mut b, secs);
            put(&mut b, frac);
            put(&mut b, incl);
            put(&mut b, orig);
            b.extend_from_slice(&data);
        }
        parse_everything(&b);
    }
}
