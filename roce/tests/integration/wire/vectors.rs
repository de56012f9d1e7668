//! Every vector of `tests/data/rocev2-icrc.json` (a copy of the shared
//! RoCEv2 ICRC vectors) reproduces: the ICRC, the bytes after a parse/emit
//! round trip, the masking rules and the rejection of a corrupted ICRC.

use ::roce::wire::{
    icrc, roce, Error, Icrc, Opcode, PayloadSource, RocePacket, RoceRepr, UdpChecksum,
};
use pnet_packet::ethernet::{EtherTypes, EthernetPacket};
use serde_json::Value;

use super::hex;

struct Vector {
    id: u64,
    ip: Vec<u8>,
    frame: Vec<u8>,
    icrc_wire: Vec<u8>,
    icrc_value: u32,
    fields: Value,
}

fn vectors() -> Vec<Vector> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/rocev2-icrc.json");
    let text = std::fs::read_to_string(path).expect("vector file is in the repository");
    let doc: Value = serde_json::from_str(&text).expect("vector file is JSON");
    let list = doc["vectors"].as_array().expect("a `vectors` array");
    list.iter()
        .map(|v| {
            let value = v["icrc_crc32_value"].as_str().expect("icrc_crc32_value");
            Vector {
                id: v["id"].as_u64().expect("id"),
                ip: hex(v["ip_hex"].as_str().expect("ip_hex")),
                frame: hex(v["frame_hex"].as_str().expect("frame_hex")),
                icrc_wire: hex(v["icrc_hex"].as_str().expect("icrc_hex")),
                icrc_value: u32::from_str_radix(value.trim_start_matches("0x"), 16)
                    .expect("hex value"),
                fields: v["fields"].clone(),
            }
        })
        .collect()
}

fn field_u32(fields: &Value, key: &str) -> Option<u32> {
    match &fields[key] {
        Value::String(s) => s
            .strip_prefix("0x")
            .map(|h| u32::from_str_radix(h, 16).expect("hex field")),
        Value::Number(n) => n.as_u64().map(|n| n as u32),
        _ => None,
    }
}

#[test]
fn all_nineteen_vectors_are_present() {
    let ids: Vec<u64> = vectors().iter().map(|v| v.id).collect();
    assert_eq!(ids, (1..=19).collect::<Vec<_>>());
}

#[test]
fn icrc_of_every_vector_reproduces() {
    for v in vectors() {
        let body = &v.ip[..v.ip.len() - 4];
        let got = Icrc::for_ip_packet(body).unwrap_or_else(|e| panic!("vector {}: {e}", v.id));
        assert_eq!(got, v.icrc_value, "vector {}", v.id);
        assert_eq!(&got.to_le_bytes()[..], &v.icrc_wire[..], "vector {}", v.id);
        assert_eq!(&v.ip[v.ip.len() - 4..], &v.icrc_wire[..], "vector {}", v.id);
        assert_eq!(icrc::verify_ip_packet(&v.ip), Ok(()), "vector {}", v.id);
    }
}

#[test]
fn every_vector_parses_and_emits_the_same_bytes() {
    for v in vectors() {
        let p =
            RocePacket::new_checked(&v.ip[..]).unwrap_or_else(|e| panic!("vector {}: {e}", v.id));
        let r = RoceRepr::parse(&p).unwrap_or_else(|e| panic!("vector {}: {e}", v.id));
        if let Some(op) = field_u32(&v.fields, "opcode") {
            assert_eq!(
                u32::from(r.headers.bth.opcode.value()),
                op,
                "vector {}",
                v.id
            );
        }
        if let Some(qp) = field_u32(&v.fields, "dest_qp") {
            assert_eq!(r.headers.bth.dest_qp.value(), qp, "vector {}", v.id);
        }
        if let Some(psn) = field_u32(&v.fields, "psn") {
            assert_eq!(r.headers.bth.psn.value(), psn, "vector {}", v.id);
        }
        if let Some(pad) = field_u32(&v.fields, "pad") {
            assert_eq!(u32::from(r.headers.bth.pad_count), pad, "vector {}", v.id);
        }
        if let Some(syn) = field_u32(&v.fields, "syndrome") {
            let aeth = r.headers.aeth.expect("AETH");
            assert_eq!(u32::from(aeth.syndrome.to_byte()), syn, "vector {}", v.id);
        }
        let mut buf = vec![0u8; r.buffer_len()];
        let n = r
            .emit(&mut buf, PayloadSource::Copy(p.payload()))
            .unwrap_or_else(|e| panic!("vector {}: {e}", v.id));
        assert_eq!(n, v.ip.len(), "vector {}", v.id);
        assert_eq!(buf, v.ip, "vector {} re-emitted", v.id);
    }
}

#[test]
fn udp_payload_path_matches_every_vector() {
    for v in vectors() {
        let p = RocePacket::new_checked(&v.ip[..]).unwrap();
        let r = RoceRepr::parse(&p).unwrap();
        let got = roce::parse_udp_payload(p.udp_payload(), &r.encap())
            .unwrap_or_else(|e| panic!("vector {}: {e}", v.id));
        assert_eq!(got.headers, r.headers);
        assert_eq!(got.payload, p.payload());
        let mut buf = vec![0u8; p.udp_payload().len()];
        let n = roce::emit_udp_payload(
            &r.headers,
            PayloadSource::Copy(got.payload),
            &r.encap(),
            &mut buf,
        )
        .unwrap();
        assert_eq!(&buf[..n], p.udp_payload(), "vector {}", v.id);
    }
}

#[test]
fn frames_carry_the_ip_packet_after_an_ethernet_header() {
    for v in vectors() {
        let eth = EthernetPacket::new(&v.frame).expect("frame");
        let want = if v.ip[0] >> 4 == 4 {
            EtherTypes::Ipv4
        } else {
            EtherTypes::Ipv6
        };
        assert_eq!(eth.get_ethertype(), want, "vector {}", v.id);
        assert_eq!(&v.frame[14..], &v.ip[..], "vector {}", v.id);
    }
}

#[test]
fn variant_field_pairs_share_their_icrc() {
    let vs = vectors();
    let by_id = |id: u64| vs.iter().find(|v| v.id == id).expect("vector");
    assert_eq!(by_id(1).icrc_value, by_id(2).icrc_value);
    assert_eq!(by_id(14).icrc_value, by_id(15).icrc_value);
    assert_ne!(by_id(1).ip, by_id(2).ip);
}

#[test]
fn masked_fields_keep_and_covered_fields_change_the_icrc() {
    for v in vectors() {
        let body = &v.ip[..v.ip.len() - 4];
        let v4 = v.ip[0] >> 4 == 4;
        let ip_len = if v4 { 20 } else { 40 };
        let masked: Vec<usize> = if v4 {
            vec![1, 8, 10, 11]
        } else {
            vec![0, 1, 2, 3, 7]
        };
        let masked = masked
            .into_iter()
            .chain([ip_len + 6, ip_len + 7, ip_len + 8 + 4]);
        for i in masked {
            let mut q = body.to_vec();
            // Byte 0 of IPv6: only the low nibble is masked.
            q[i] ^= if !v4 && i == 0 { 0x0F } else { 0xA5 };
            assert_eq!(
                Icrc::for_ip_packet(&q),
                Ok(v.icrc_value),
                "vector {} byte {i}",
                v.id
            );
        }
        // Identification (v4) / payload length (v6), UDP ports, BTH opcode
        // flags, AckReq/Resv7 and the last covered byte.
        let covered = if v4 { vec![4, 5, 6] } else { vec![4, 5, 8] }
            .into_iter()
            .chain([
                ip_len,
                ip_len + 3,
                ip_len + 8 + 1,
                ip_len + 8 + 8,
                body.len() - 1,
            ]);
        for i in covered {
            let mut q = body.to_vec();
            q[i] ^= 0x01;
            assert_ne!(
                Icrc::for_ip_packet(&q),
                Ok(v.icrc_value),
                "vector {} byte {i}",
                v.id
            );
        }
    }
}

#[test]
fn corrupted_icrc_is_reported_as_bad_icrc() {
    for v in vectors() {
        let mut ip = v.ip.clone();
        let last = ip.len() - 1;
        ip[last] ^= 0x01;
        let udp_sum = if ip[0] >> 4 == 4 { 26 } else { 46 };
        if ip[udp_sum..udp_sum + 2] != [0, 0] {
            // Vector 19's real UDP checksum covers the ICRC: a host would
            // drop the corrupted packet for that first (Malformed). Clear
            // it to reach the ICRC check.
            let p = RocePacket::new_checked(&ip[..]).unwrap();
            assert_eq!(
                RoceRepr::parse(&p),
                Err(Error::Malformed),
                "vector {}",
                v.id
            );
            ip[udp_sum..udp_sum + 2].fill(0);
        }
        let p = RocePacket::new_checked(&ip[..]).unwrap();
        assert_eq!(
            RoceRepr::parse(&p),
            Err(Error::BadIcrc {
                carried: v.icrc_value ^ 0x0100_0000,
                computed: v.icrc_value
            }),
            "vector {}",
            v.id
        );
    }
}

#[test]
fn vector_nineteen_keeps_its_real_udp_checksum_and_migreq() {
    let v = vectors().into_iter().find(|v| v.id == 19).unwrap();
    let p = RocePacket::new_checked(&v.ip[..]).unwrap();
    let r = RoceRepr::parse(&p).unwrap();
    assert_eq!(r.udp_checksum, UdpChecksum::Compute);
    assert!(r.headers.bth.migreq);
    assert_eq!(r.headers.bth.opcode, Opcode::UcSendOnly);
    assert_eq!(r.payload_len, 18);
}

#[test]
fn vector_eighteen_is_a_hardware_cnp_with_source_port_zero() {
    let v = vectors().into_iter().find(|v| v.id == 18).unwrap();
    let p = RocePacket::new_checked(&v.ip[..]).unwrap();
    let r = RoceRepr::parse(&p).unwrap();
    assert_eq!(r.src_port, 0);
    assert_eq!(r.headers.bth.opcode, Opcode::Cnp);
    assert!(r.headers.bth.becn);
    assert_eq!(r.payload_len, 0);
}

#[test]
fn ipv4_identification_and_df_are_recovered_from_every_ipv4_vector() {
    for v in vectors().into_iter().filter(|v| v.ip[0] >> 4 == 4) {
        let p = RocePacket::new_checked(&v.ip[..]).unwrap();
        let r = RoceRepr::parse(&p).unwrap();
        let ::roce::wire::IpRepr::V4 {
            identification,
            dont_fragment,
            ..
        } = r.ip
        else {
            unreachable!("filtered to IPv4")
        };
        assert_eq!(
            icrc::recover_ipv4_identification(&r.encap(), p.udp_payload()),
            Ok(Some((identification, dont_fragment))),
            "vector {}",
            v.id
        );
    }
}

#[test]
fn the_copy_matches_the_shared_vectors_when_they_are_present() {
    // The repository keeps its own copy; when the shared reference set is
    // checked out next to the repository, the two must not drift apart.
    let shared = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/rocev2-icrc.json"
    );
    let Ok(reference) = std::fs::read(shared) else {
        eprintln!("shared vectors not present next to the repository; nothing to compare");
        return;
    };
    let copy = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/rocev2-icrc.json"
    ))
    .expect("the copy is in the repository");
    assert!(
        copy == reference,
        "tests/data/rocev2-icrc.json differs from the shared vectors"
    );
}
