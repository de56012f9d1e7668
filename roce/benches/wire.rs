//! Wire-format throughput: emitting and parsing RoCEv2 UDP payloads (with
//! the ICRC) against a baseline of a plain copy plus CRC-32 over the same
//! bytes, measured in the same run. Prints ns per packet and the ratio.
//!
//! Then the receive ICRC check without the IPv4 header (`wire::icrc`
//! module docs), ns per packet: `exact` is one CRC against the expected
//! header (`verify_udp_payload`, what a receiver that only guesses pays per
//! guess); `check hit` is `Ipv4IcrcCheck::verify` when the expected header
//! matches (the fast path); `check solved` when it does not and the
//! identification is solved for; `solve` the solve alone, given both CRC
//! values.
//!
//! Run with `cargo bench -p verbs-emu --bench wire`.

use std::hint::black_box;
use std::net::Ipv4Addr;
use std::time::Instant;

use roce::wire::icrc::{self, IcrcMatch, Ipv4IcrcCheck};
use roce::wire::roce::{emit_udp_payload, parse_udp_payload, PayloadSource};
use roce::wire::{BthRepr, Icrc, IpEncap, Opcode, Psn, Qpn, RethRepr, Rkey, RoceHeaders, UdpEncap};

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
    check_table(&encap);
}

/// The receive ICRC check's cost: the fast path against one plain CRC, and
/// the solve when the expected header does not match.
fn check_table(encap: &UdpEncap) {
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>12}",
        "udp len", "exact ns", "check hit", "check solved", "solve ns"
    );
    let with_id = |id: u16| {
        let mut e = *encap;
        if let IpEncap::V4 { identification, .. } = &mut e.ip {
            *identification = id;
        }
        e
    };
    for body_len in [16usize, 76, 1052, 4124] {
        let body: Vec<u8> = (0..body_len).map(|i| (i * 7) as u8).collect();
        let packet = |id: u16| {
            let mut p = body.clone();
            let crc = Icrc::for_udp_payload(&with_id(id), &body).expect("fits");
            p.extend(crc.to_le_bytes());
            p
        };
        // Segment 5 of a run, received alone (expected: position 0).
        let (hit, moved, expected) = (packet(0), packet(5), with_id(0));
        let iters = if body_len >= 1024 { 200_000 } else { 1_000_000 };
        let exact = time_per_iter(iters, || {
            black_box(icrc::verify_udp_payload(&expected, black_box(&hit)).is_ok());
        });
        let mut check = Ipv4IcrcCheck::new();
        assert_eq!(check.verify(&expected, &hit), Ok(IcrcMatch::Expected));
        let fast = time_per_iter(iters, || {
            black_box(check.verify(&expected, black_box(&hit)).is_ok());
        });
        assert!(matches!(
            check.verify(&expected, &moved),
            Ok(IcrcMatch::Solved {
                identification: 5,
                ..
            })
        ));
        let solved = time_per_iter(iters, || {
            black_box(check.verify(&expected, black_box(&moved)).is_ok());
        });
        let computed = Icrc::for_udp_payload(&expected, &body).expect("fits");
        let carried = icrc::carried(&moved).expect("has an ICRC");
        let solve = time_per_iter(1_000_000, || {
            black_box(icrc::solve_ipv4_identification(
                &expected,
                black_box(moved.len()),
                black_box(computed),
                black_box(carried),
            ))
            .ok();
        });
        println!(
            "{:>8} {exact:>12.1} {fast:>12.1} {solved:>12.1} {solve:>12.1}",
            moved.len()
        );
    }
}
