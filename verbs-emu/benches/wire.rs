//! Wire-format throughput: emitting and parsing RoCEv2 UDP payloads (with
//! the ICRC) against a baseline of a plain copy plus CRC-32 over the same
//! bytes, measured in the same run. Prints ns per packet and the ratio.
//!
//! Run with `cargo bench -p verbs-emu --bench wire`.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

use verbs_emu::wire::roce::{emit_udp_payload, parse_udp_payload, PayloadSource};
use verbs_emu::wire::{BthRepr, Opcode, Psn, Qpn, RethRepr, Rkey, RoceHeaders, UdpEncap};

/// Nanoseconds per call: the best of five rounds (the machine is shared,
/// so the minimum is the least disturbed estimate).
fn time_per_iter(iters: u32, mut f: impl FnMut()) -> f64 {
    for _ in 0..iters / 10 {
        f();
    }
    (0..5)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..iters / 5 {
                f();
            }
            start.elapsed().as_nanos() as f64 / f64::from(iters / 5)
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let encap = UdpEncap::ipv4(
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        0xC123,
    );
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>8}",
        "payload", "emit ns", "parse ns", "base ns", "ratio"
    );
    for len in [0usize, 64, 1024, 4096] {
        let mut bth = BthRepr::new(Opcode::RcWriteOnly, Qpn::new(0x11), Psn::new(7));
        bth.pad_count = BthRepr::pad_count_for(len);
        bth.ack_req = true;
        let headers = RoceHeaders {
            reth: Some(RethRepr {
                va: 0x1000,
                rkey: Rkey::new(0x42),
                dma_len: len as u32,
            }),
            ..RoceHeaders::new(bth)
        };
        let payload: Vec<u8> = (0..len).map(|i| i as u8).collect();
        let mut buf = vec![0u8; 28 + len + 8];
        let n = emit_udp_payload(&headers, PayloadSource::Copy(&payload), &encap, &mut buf)
            .expect("fits");
        let iters = if len >= 1024 { 200_000 } else { 1_000_000 };
        let emit = time_per_iter(iters, || {
            let n = emit_udp_payload(
                black_box(&headers),
                PayloadSource::Copy(black_box(&payload)),
                &encap,
                &mut buf,
            );
            black_box(n.ok());
        });
        let wire = buf[..n].to_vec();
        let parse = time_per_iter(iters, || {
            let r = parse_udp_payload(black_box(&wire), &encap);
            black_box(r.is_ok());
        });
        // Baseline: copy the payload and CRC the same number of bytes plus
        // the 36 bytes of pseudo IP/UDP header and LRH stand-in.
        let mut copy = vec![0u8; n];
        let base = time_per_iter(iters, || {
            copy[..payload.len()].copy_from_slice(black_box(&payload));
            let mut h = crc32fast::Hasher::new();
            h.update(&[0xFF; 36]);
            h.update(black_box(&copy));
            black_box(h.finalize());
        });
        println!(
            "{len:>8} {emit:>12.1} {parse:>12.1} {base:>12.1} {:>8.2}",
            emit / base
        );
    }
}
