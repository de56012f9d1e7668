//! A deterministic set of sample frames: one well-formed packet of every
//! RC, UC and UD opcode and a CNP over IPv4, a few NAK/RNR and ECN variants,
//! a few IPv6 packets (with a real UDP checksum, so that Wireshark raises no
//! expert error), and PFC and PAUSE frames.
//!
//! `rocelab wire samples` writes them to a pcap; the conformance tests
//! compare an independent dissector's view of that pcap with
//! [`samples`]. The list is the same on every call.

use std::io::{self, Write};
use std::net::{Ipv4Addr, Ipv6Addr};

use super::dissect::ethernet_frame;
use super::pcap::PcapWriter;
use super::roce::{rxe_udp_src_port, symmetric_flow_label, PayloadSource};
use super::{
    cnp, AethRepr, AethSyndrome, AtomicAckEthRepr, AtomicEthRepr, BthRepr, DethRepr, Ecn, IpRepr,
    MacAddr, Msn, NakCode, Opcode, PfcRepr, Psn, Qpn, RethRepr, Rkey, RoceHeaders, RoceRepr,
    Transport, UdpChecksum,
};
use crate::time::{Duration, Instant};

/// The path MTU the samples are cut for: FIRST and MIDDLE packets carry
/// exactly this many bytes.
pub const SAMPLE_PMTU: usize = 256;

/// Source MAC of the samples.
pub const SRC_MAC: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x01);
/// Destination MAC of the samples.
pub const DST_MAC: MacAddr = MacAddr(0x02, 0, 0, 0, 0, 0x02);

/// What a sample frame holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SampleContent {
    /// A RoCEv2 packet and its payload.
    Roce {
        /// The packet.
        repr: RoceRepr,
        /// Its payload bytes.
        payload: Vec<u8>,
    },
    /// A PFC or PAUSE frame.
    MacControl(PfcRepr),
}

/// One sample frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sample {
    /// Capture time.
    pub timestamp: Instant,
    /// The Ethernet frame (no FCS).
    pub frame: Vec<u8>,
    /// What it holds.
    pub content: SampleContent,
}

/// The headers of the sample of `op`, number `i` in the list.
fn headers_for(op: Opcode, i: u32, payload_len: usize) -> RoceHeaders {
    let mut bth = BthRepr::new(
        op,
        Qpn::new(0x100 + i),
        Psn::new(0x00FF_FFF0u32.wrapping_add(i * 3)),
    );
    bth.pad_count = BthRepr::pad_count_for(payload_len);
    let rc = op.transport() == Transport::Rc;
    bth.ack_req = rc && op.is_request() && (op.is_last() || op.is_only());
    bth.solicited = op.has_immdt() && !op.is_first() && i % 2 == 1;
    if op == Opcode::Cnp {
        return cnp::Repr::new(Qpn::new(0x100 + i)).headers();
    }
    let dma_len = if op == Opcode::RcReadRequest {
        8192
    } else if op.is_first() {
        600
    } else {
        payload_len as u32
    };
    RoceHeaders {
        bth,
        deth: op.has_deth().then_some(DethRepr {
            qkey: 0x1111_1111 + i,
            src_qp: Qpn::new(0x33 + i),
        }),
        reth: op.has_reth().then_some(RethRepr {
            va: 0x0000_7f00_0000_1000 + u64::from(i) * 0x1000,
            rkey: Rkey::new(0x1000 + i),
            dma_len,
        }),
        atomic_eth: op.has_atomic_eth().then_some(AtomicEthRepr {
            va: 0x2000 + 8 * u64::from(i),
            rkey: Rkey::new(0x5555),
            swap_add: 0x1111_1111_1111_1111 * u64::from(i % 15 + 1),
            compare: if op == Opcode::RcCompareSwap {
                0x0123_4567_89ab_cdef
            } else {
                0
            },
        }),
        aeth: op.has_aeth().then_some(AethRepr {
            syndrome: AethSyndrome::ACK,
            msn: Msn::new(i),
        }),
        atomic_ack_eth: op.has_atomic_ack_eth().then_some(AtomicAckEthRepr {
            orig: 0xfedc_ba98_7654_3210,
        }),
        immdt: op.has_immdt().then_some(0xdead_be00 + i),
        ieth: op.has_ieth().then_some(Rkey::new(0x0a0b + i)),
    }
}

/// The payload length of the sample of `op`, number `i`.
fn payload_len_for(op: Opcode, i: usize) -> usize {
    if !op.has_payload() {
        0
    } else if op == Opcode::RcAtomicWrite {
        8
    } else if op.is_first() || op.is_middle() {
        SAMPLE_PMTU
    } else if op.is_last() {
        1 + (i * 37) % SAMPLE_PMTU
    } else {
        (i * 13) % 64
    }
}

fn payload(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|k| (k * 7 + i * 11 + 3) as u8).collect()
}

fn ipv4(ecn: Ecn, dscp: u8) -> IpRepr {
    IpRepr::V4 {
        src: Ipv4Addr::new(192, 168, 1, 10),
        dst: Ipv4Addr::new(192, 168, 1, 20),
        dscp,
        ecn,
        ttl: 64,
        identification: 0,
        dont_fragment: true,
    }
}

fn ipv6(ecn: Ecn, flow_label: u32) -> IpRepr {
    IpRepr::V6 {
        src: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x10),
        dst: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 0x20),
        dscp: 26,
        ecn,
        flow_label,
        hop_limit: 64,
    }
}

/// Every sample, in capture order.
pub fn samples() -> Vec<Sample> {
    let mut packets: Vec<(RoceRepr, Vec<u8>)> = Vec::new();
    let mut push = |ip: IpRepr, headers: RoceHeaders, payload: Vec<u8>, csum: UdpChecksum| {
        let src_qp = Qpn::new(0x200 + packets.len() as u32);
        let mut repr = RoceRepr::new(ip, rxe_udp_src_port(src_qp), headers, payload.len());
        repr.udp_checksum = csum;
        packets.push((repr, payload));
    };
    // One of every opcode over IPv4.
    for (i, &op) in Opcode::ALL.iter().enumerate() {
        let len = payload_len_for(op, i);
        let h = headers_for(op, i as u32, len);
        let ip = if op == Opcode::Cnp {
            ipv4(Ecn::Ect0, cnp::NVIDIA_CNP_DSCP)
        } else {
            ipv4(Ecn::Ect0, 0)
        };
        push(ip, h, payload(i, len), UdpChecksum::Zero);
    }
    // ACK variants: NAK sequence error, RNR NAK, NAK remote access, ACK
    // with credits.
    for (k, syndrome) in [
        AethSyndrome::Nak(NakCode::PsnSequenceError),
        AethSyndrome::RnrNak { timer: 14 },
        AethSyndrome::Nak(NakCode::RemoteAccessError),
        AethSyndrome::Ack { credits: 5 },
    ]
    .into_iter()
    .enumerate()
    {
        let mut h = headers_for(Opcode::RcAcknowledge, 100 + k as u32, 0);
        h.aeth = Some(AethRepr {
            syndrome,
            msn: Msn::new(3 + k as u32),
        });
        push(ipv4(Ecn::Ect0, 0), h, Vec::new(), UdpChecksum::Zero);
    }
    // Congestion experienced, with FECN set by the congestion point.
    let mut h = headers_for(Opcode::RcSendOnly, 110, 5);
    h.bth.fecn = true;
    push(ipv4(Ecn::Ce, 0), h, b"hello".to_vec(), UdpChecksum::Zero);
    // IPv6, with a real UDP checksum.
    for (k, op) in [
        Opcode::RcSendOnly,
        Opcode::RcWriteOnlyImm,
        Opcode::UdSendOnlyImm,
        Opcode::RcAcknowledge,
    ]
    .into_iter()
    .enumerate()
    {
        let i = 120 + k;
        let len = payload_len_for(op, i);
        let h = headers_for(op, i as u32, len);
        let fl = symmetric_flow_label(h.bth.dest_qp, Qpn::new(0x200 + i as u32));
        push(
            ipv6(Ecn::Ect0, fl),
            h,
            payload(i, len),
            UdpChecksum::Compute,
        );
    }
    let mut out = Vec::new();
    let mut t = Instant::ZERO;
    let step = Duration::from_us(1);
    for (repr, payload) in packets {
        t += step;
        // The samples are built within every limit, so emission succeeds.
        let frame = ethernet_frame(SRC_MAC, DST_MAC, &repr, PayloadSource::Copy(&payload))
            .expect("sample packets are well formed");
        out.push(Sample {
            timestamp: t,
            frame,
            content: SampleContent::Roce { repr, payload },
        });
    }
    for pfc in [
        PfcRepr::pfc_one(3, 0xFFFF),
        PfcRepr::pfc_one(3, 0),
        PfcRepr::Pfc {
            class_enable: 0x48,
            quanta: [0, 0, 0, 1000, 0, 0, 200, 0],
        },
        PfcRepr::Pause { quanta: 0x1234 },
    ] {
        t += step;
        let mut frame = vec![0u8; super::pfc::FRAME_LEN];
        // The buffer is exactly FRAME_LEN, so emission succeeds.
        pfc.emit_frame(SRC_MAC, &mut frame)
            .expect("buffer holds a MAC control frame");
        out.push(Sample {
            timestamp: t,
            frame,
            content: SampleContent::MacControl(pfc),
        });
    }
    out
}

/// Write every sample to `out` as a pcap; returns the number of frames.
pub fn write_pcap<W: Write>(out: W) -> io::Result<usize> {
    let mut w = PcapWriter::new(out)?;
    let all = samples();
    for s in &all {
        w.write_frame(s.timestamp, &s.frame)?;
    }
    w.flush()?;
    Ok(all.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::dissect::{decode_frame, Decoded};
    use crate::wire::PcapReader;

    #[test]
    fn every_opcode_is_sampled_and_every_sample_decodes() {
        let all = samples();
        for op in Opcode::ALL {
            assert!(
                all.iter().any(|s| matches!(&s.content,
                    SampleContent::Roce { repr, .. } if repr.headers.bth.opcode == *op)),
                "{op} missing"
            );
        }
        for s in &all {
            let d = decode_frame(&s.frame);
            assert!(d.is_good(), "{d}");
            match (&s.content, d) {
                (SampleContent::Roce { repr, .. }, Decoded::Roce { repr: got, .. }) => {
                    assert_eq!(&got, repr)
                }
                (SampleContent::MacControl(p), Decoded::MacControl(got)) => assert_eq!(&got, p),
                (c, d) => panic!("{c:?} decoded as {d:?}"),
            }
        }
    }

    #[test]
    fn pcap_round_trips_and_is_deterministic() {
        let mut a = Vec::new();
        let n = write_pcap(&mut a).unwrap();
        let mut b = Vec::new();
        write_pcap(&mut b).unwrap();
        assert_eq!(a, b);
        let frames: Vec<_> = PcapReader::new(&a)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(frames.len(), n);
        for (rec, s) in frames.iter().zip(samples()) {
            assert_eq!(rec.data, &s.frame[..]);
            assert_eq!(rec.timestamp, s.timestamp);
        }
    }
}
