//! Transport engine throughput, with length-only memory (the simulator's
//! case). Prints packets per second for:
//!
//! * `direct`: two QPs wired back to back with no link model: every packet
//!   the requester emits goes straight into the responder and every
//!   response straight back. This is the engine's own cost.
//! * `pair`: the same traffic through the pair harness (serialisation,
//!   latency, event heap), the way the simulator drives it.
//! * `baseline`: a trivial loop that moves a packet-sized record through a
//!   queue and touches it, measured in the same run, so that the ratio
//!   travels between machines.

use std::collections::VecDeque;
use std::hint::black_box;
use std::time::Instant as WallClock;

use roce::time::{Duration, Instant, Rate};
use roce::transport::pair::{ConnectAttrs, Limits, Pair, WireConfig};
use roce::transport::*;
use roce::wire::Qpn;

const MSG: u32 = 64 * 1024;

fn pair(n_msgs: u64) -> Pair<LengthMemory> {
    let mut ma = LengthMemory::new();
    let mut mb = LengthMemory::new();
    let ra = ma.register(0, MSG as u64, AccessFlags::ALL).unwrap();
    let rb = mb.register(0, MSG as u64, AccessFlags::ALL).unwrap();
    let mut ca = QpConfig::new(Qpn::new(1));
    ca.max_send_wr = n_msgs as u32;
    let cb = QpConfig::new(Qpn::new(2));
    let link = WireConfig::clean(Rate::from_gbps(400), Duration::from_ns(500));
    let mut p = Pair::connect(ca, ma, cb, mb, ConnectAttrs::default(), link, link).unwrap();
    p.collect = false;
    for i in 0..n_msgs {
        let op = SendOp::Write {
            remote_addr: 0,
            rkey: rb.rkey,
        };
        let mut wr = SendWr::new(
            i,
            op,
            Sge {
                addr: 0,
                length: MSG,
                lkey: ra.lkey,
            },
        );
        wr.flags = SendFlags::EMPTY;
        p.a.qp.post_send(wr).unwrap();
    }
    p
}

/// Back to back, no link: returns packets moved.
fn direct(n_msgs: u64) -> (u64, f64) {
    let mut p = pair(n_msgs);
    let now = Instant::ZERO;
    let start = WallClock::now();
    let mut pkts = 0u64;
    let mut tx = Transmit::EMPTY;
    let mut back = Transmit::EMPTY;
    loop {
        let mut moved = false;
        while p.a.qp.poll_transmit_into(now, &p.a.mem, &mut tx) {
            let rx = Received {
                headers: tx.headers,
                ecn: tx.ecn,
                payload: Payload::Len(tx.payload.len()),
                grh: None,
                src: AddressHandle(1),
            };
            p.b.qp.handle_packet(now, &rx, &mut p.b.mem);
            pkts += 1;
            moved = true;
            while p.b.qp.poll_transmit_into(now, &p.b.mem, &mut back) {
                let rx = Received {
                    headers: back.headers,
                    ecn: back.ecn,
                    payload: Payload::Len(back.payload.len()),
                    grh: None,
                    src: AddressHandle(2),
                };
                p.a.qp.handle_packet(now, &rx, &mut p.a.mem);
                pkts += 1;
            }
        }
        while p.a.qp.poll_completion().is_some() {}
        if !moved {
            break;
        }
    }
    assert_eq!(p.a.qp.send_queue_len(), 0, "all messages acknowledged");
    (pkts, start.elapsed().as_secs_f64())
}

fn through_pair(n_msgs: u64) -> (u64, f64) {
    let mut p = pair(n_msgs);
    let start = WallClock::now();
    p.run_until(Limits::default(), |p| p.a.qp.send_queue_len() == 0)
        .unwrap();
    let pkts = p.ab.stats().delivered + p.ba.stats().delivered;
    (pkts, start.elapsed().as_secs_f64())
}

/// Move a Transmit-sized record through a queue and fold a field.
fn baseline(n: u64) -> f64 {
    #[derive(Clone, Copy)]
    struct Rec {
        words: [u64; 36],
    }
    let mut q: VecDeque<Rec> = VecDeque::with_capacity(64);
    let start = WallClock::now();
    let mut acc = 0u64;
    for i in 0..n {
        let mut r = Rec { words: [0; 36] };
        r.words[(i % 36) as usize] = i;
        q.push_back(black_box(r));
        if q.len() > 32 {
            let r = q.pop_front().unwrap();
            acc = acc.wrapping_add(r.words[(i % 36) as usize]);
        }
    }
    black_box(acc);
    start.elapsed().as_secs_f64()
}

fn main() {
    // 64 packets each: 1.28 M data packets by default.
    let n_msgs = std::env::var("TRANSPORT_BENCH_MSGS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    if std::env::var("TRANSPORT_BENCH_ONLY").as_deref() == Ok("direct") {
        let (dp, dt) = direct(n_msgs);
        println!("direct: {dp} packets in {dt:.3} s");
        return;
    }
    if std::env::var("TRANSPORT_BENCH_ONLY").as_deref() == Ok("pair") {
        let (pp, pt) = through_pair(n_msgs);
        println!("pair: {pp} packets in {pt:.3} s");
        return;
    }
    // Warm up.
    direct(500);
    let (dp, dt) = direct(n_msgs);
    let (pp, pt) = through_pair(n_msgs);
    let bt = baseline(dp);
    let d_rate = dp as f64 / dt;
    let p_rate = pp as f64 / pt;
    let b_rate = dp as f64 / bt;
    println!("transport engine, length-only memory, 64 KB WRITEs at 1 KB MTU");
    println!(
        "  direct   : {dp} packets in {dt:.3} s = {:.2} Mpps",
        d_rate / 1e6
    );
    println!(
        "  pair     : {pp} packets in {pt:.3} s = {:.2} Mpps",
        p_rate / 1e6
    );
    println!(
        "  baseline : {dp} records in {bt:.3} s = {:.2} Mpps",
        b_rate / 1e6
    );
    println!(
        "  ratio to baseline: direct {:.3}, pair {:.3}",
        d_rate / b_rate,
        p_rate / b_rate
    );
}
