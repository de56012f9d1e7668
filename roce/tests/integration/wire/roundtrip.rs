//! `parse(emit(r)) == r` for random representations of every opcode: the
//! transport headers alone and whole IPv4/IPv6 packets.

use std::net::{Ipv4Addr, Ipv6Addr};

use ::roce::time::Instant;
use ::roce::wire::{cnp, pfc, CnpRepr, MacAddr, PcapReader, PcapWriter, PfcRepr};
use ::roce::wire::{
    roce, AethRepr, AethSyndrome, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn, Error,
    IpRepr, Msn, NakCode, Opcode, PayloadSource, Psn, Qpn, RethRepr, Rkey, RoceHeaders, RocePacket,
    RoceRepr, UdpChecksum,
};
use proptest::prelude::*;

fn opcode() -> impl Strategy<Value = Opcode> {
    proptest::sample::select(Opcode::ALL.to_vec())
}

fn ecn() -> impl Strategy<Value = Ecn> {
    prop_oneof![
        Just(Ecn::NotEct),
        Just(Ecn::Ect0),
        Just(Ecn::Ect1),
        Just(Ecn::Ce)
    ]
}

fn syndrome() -> impl Strategy<Value = AethSyndrome> {
    prop_oneof![
        (0u8..32).prop_map(|credits| AethSyndrome::Ack { credits }),
        (0u8..32).prop_map(|timer| AethSyndrome::RnrNak { timer }),
        (0u8..32).prop_map(|c| AethSyndrome::Nak(NakCode::from_code(c))),
        (0u8..32).prop_map(AethSyndrome::Reserved),
    ]
}

prop_compose! {
    fn bth(op: Opcode)(
        solicited in any::<bool>(), migreq in any::<bool>(), pad_count in 0u8..4,
        tver in 0u8..16, pkey in any::<u16>(), fecn in any::<bool>(), becn in any::<bool>(),
        dest_qp in any::<u32>(), ack_req in any::<bool>(), psn in any::<u32>(),
    ) -> BthRepr {
        BthRepr {
            opcode: op, solicited, migreq, pad_count, tver, pkey, fecn, becn,
            dest_qp: Qpn::new(dest_qp), ack_req, psn: Psn::new(psn),
        }
    }
}

prop_compose! {
    fn headers_for(op: Opcode)(
        bth in bth(op),
        deth in (any::<u32>(), any::<u32>()),
        reth in (any::<u64>(), any::<u32>(), any::<u32>()),
        atomic in (any::<u64>(), any::<u32>(), any::<u64>(), any::<u64>()),
        aeth in (syndrome(), any::<u32>()),
        orig in any::<u64>(),
        imm in any::<u32>(),
        inv in any::<u32>(),
    ) -> RoceHeaders {
        RoceHeaders {
            bth,
            deth: op.has_deth().then_some(DethRepr { qkey: deth.0, src_qp: Qpn::new(deth.1) }),
            reth: op.has_reth().then_some(RethRepr { va: reth.0, rkey: Rkey::new(reth.1), dma_len: reth.2 }),
            atomic_eth: op.has_atomic_eth().then_some(AtomicEthRepr {
                va: atomic.0, rkey: Rkey::new(atomic.1), swap_add: atomic.2, compare: atomic.3,
            }),
            aeth: op.has_aeth().then_some(AethRepr { syndrome: aeth.0, msn: Msn::new(aeth.1) }),
            atomic_ack_eth: op.has_atomic_ack_eth().then_some(AtomicAckEthRepr { orig }),
            immdt: op.has_immdt().then_some(imm),
            ieth: op.has_ieth().then_some(Rkey::new(inv)),
        }
    }
}

fn headers() -> impl Strategy<Value = RoceHeaders> {
    opcode().prop_flat_map(headers_for)
}

fn ip() -> impl Strategy<Value = IpRepr> {
    prop_oneof![
        (
            any::<u32>(),
            any::<u32>(),
            0u8..64,
            ecn(),
            any::<u8>(),
            any::<u16>(),
            any::<bool>()
        )
            .prop_map(
                |(s, d, dscp, ecn, ttl, identification, dont_fragment)| IpRepr::V4 {
                    src: Ipv4Addr::from(s),
                    dst: Ipv4Addr::from(d),
                    dscp,
                    ecn,
                    ttl,
                    identification,
                    dont_fragment,
                }
            ),
        (
            any::<u128>(),
            any::<u128>(),
            0u8..64,
            ecn(),
            0u32..0x10_0000,
            any::<u8>()
        )
            .prop_map(|(s, d, dscp, ecn, flow_label, hop_limit)| IpRepr::V6 {
                src: Ipv6Addr::from(s),
                dst: Ipv6Addr::from(d),
                dscp,
                ecn,
                flow_label,
                hop_limit,
            }),
    ]
}

prop_compose! {
    fn packet()(
        headers in headers(),
        ip in ip(),
        src_port in any::<u16>(),
        dst_port in prop_oneof![Just(4791u16), any::<u16>()],
        compute in any::<bool>(),
        payload in proptest::collection::vec(any::<u8>(), 0..300),
    ) -> (RoceRepr, Vec<u8>) {
        let payload = if headers.bth.opcode.has_payload() { payload } else { Vec::new() };
        let repr = RoceRepr {
            ip,
            src_port,
            dst_port,
            udp_checksum: if compute { UdpChecksum::Compute } else { UdpChecksum::Zero },
            headers,
            payload_len: payload.len(),
        };
        (repr, payload)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn headers_round_trip(h in headers()) {
        let mut buf = [0u8; 64];
        let n = h.emit(&mut buf).unwrap();
        prop_assert_eq!(n, h.header_len());
        prop_assert_eq!(RoceHeaders::parse(&buf[..n]), Ok(h));
        // One byte short is always refused.
        prop_assert_eq!(RoceHeaders::parse(&buf[..n - 1]), Err(Error::Truncated));
    }

    #[test]
    fn whole_packets_round_trip((repr, payload) in packet()) {
        let mut buf = vec![0u8; repr.buffer_len()];
        let n = repr.emit(&mut buf, PayloadSource::Copy(&payload)).unwrap();
        prop_assert_eq!(n, buf.len());
        let p = RocePacket::new_checked(&buf[..]).unwrap();
        prop_assert_eq!(RoceRepr::parse(&p), Ok(repr));
        prop_assert_eq!(p.payload(), &payload[..]);
        prop_assert!(p.pad().iter().all(|&b| b == 0));
        // The socket path sees the same bytes and accepts them.
        let got = roce::parse_udp_payload(p.udp_payload(), &repr.encap()).unwrap();
        prop_assert_eq!(got.headers, repr.headers);
        prop_assert_eq!(got.payload, &payload[..]);
        // Every strict prefix is refused without a panic.
        for cut in [0, 1, n / 2, n - 5, n - 1] {
            prop_assert!(RocePacket::new_checked(&buf[..cut]).is_err());
        }
    }

    #[test]
    fn any_flipped_covered_bit_is_caught((repr, payload) in packet(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(&mut buf, PayloadSource::Copy(&payload)).unwrap();
        let iplen = repr.ip.version().header_len();
        // Flip one bit in the ICRC-covered, unmasked tail (ext headers,
        // payload, pad, ICRC) and keep the UDP checksum out of the way.
        let start = iplen + 8 + 12;
        let i = start + at.index(buf.len() - start);
        buf[i] ^= 1 << bit;
        buf[iplen + 6] = 0;
        buf[iplen + 7] = 0;
        if let Ok(p) = RocePacket::new_checked(&buf[..]) {
            match RoceRepr::parse(&p) {
                Err(Error::BadIcrc { .. }) | Err(Error::Truncated) | Err(Error::Malformed) => {}
                other => prop_assert!(false, "flip at {} accepted: {:?}", i, other),
            }
        }
    }
}

fn pfc_repr() -> impl Strategy<Value = PfcRepr> {
    prop_oneof![
        any::<u16>().prop_map(|quanta| PfcRepr::Pause { quanta }),
        (any::<u8>(), any::<[u16; 8]>()).prop_map(|(class_enable, quanta)| PfcRepr::Pfc {
            class_enable,
            quanta
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn mac_control_frames_round_trip(r in pfc_repr(), mac in any::<[u8; 6]>()) {
        let src = MacAddr(mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]);
        let mut frame = [0u8; pfc::FRAME_LEN];
        prop_assert_eq!(r.emit_frame(src, &mut frame), Ok(60));
        prop_assert_eq!(PfcRepr::parse_frame(&frame), Ok((src, r)));
    }

    #[test]
    fn cnps_round_trip(qp in any::<u32>(), pkey in any::<u16>()) {
        let r = CnpRepr { dest_qp: Qpn::new(qp), pkey };
        let mut buf = [0u8; cnp::LEN];
        r.emit(&mut cnp::Packet::new_unchecked(&mut buf[..]));
        prop_assert_eq!(CnpRepr::parse(&cnp::Packet::new_checked(&buf[..]).unwrap()), Ok(r));
        prop_assert_eq!(RoceHeaders::parse(&buf), Ok(r.headers()));
    }

    #[test]
    fn pcap_files_round_trip(
        frames in proptest::collection::vec(
            (any::<u64>(), proptest::collection::vec(any::<u8>(), 0..200)), 0..8),
    ) {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (t, f) in &frames {
            w.write_frame(Instant::from_ps(*t), f).unwrap();
        }
        let file = w.into_inner();
        let got: Vec<_> = PcapReader::new(&file).unwrap().collect::<Result<_, _>>().unwrap();
        prop_assert_eq!(got.len(), frames.len());
        for (rec, (t, f)) in got.iter().zip(&frames) {
            // Nanosecond resolution: picoseconds are truncated.
            prop_assert_eq!(rec.timestamp, Instant::from_ps(t / 1000 * 1000));
            prop_assert_eq!(rec.data, &f[..]);
            prop_assert_eq!(rec.orig_len as usize, f.len());
        }
    }
}
