//! Raw UDP baselines of this host, measured the way the emulator uses
//! the kernel, for benchmarks that print rocelab's numbers as ratios of
//! them (`cargo bench -p verbs-emu --bench udp`).
//!
//! * [`raw_pingpong`]: two threads ping-pong a datagram between two
//!   loopback sockets, both busy-polling non-blocking receives; the round
//!   trip is what any request/response over UDP pays at least.
//! * [`raw_stream`]: one thread streams GSO runs of equal segments to
//!   another receiving with GRO; the receiver's byte rate is the most a
//!   UDP transport moves through the kernel on this host.
//! * [`ucx_perftest_tcp`]: UCX's own `ucx_perftest` (where installed) over
//!   TCP between two processes on loopback, the transport a verbs-less
//!   host falls back to: the figure rocelab's small messages must beat.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::backend::sys::{RoceSocket, RxBatch, SocketOptions, TxBatch, MAX_GSO_SEGMENTS};

fn bind(ip: Ipv4Addr) -> std::io::Result<RoceSocket> {
    RoceSocket::bind(SocketAddrV4::new(ip, 0), &SocketOptions::default())
}

/// Round-trip times (nanoseconds) of `iters` ping-pongs of `size`-byte
/// datagrams between two busy-polling threads on `a` and `b`.
pub fn raw_pingpong(
    a: Ipv4Addr,
    b: Ipv4Addr,
    size: usize,
    iters: usize,
) -> std::io::Result<Vec<u64>> {
    raw_pingpong_shape(a, b, &[(0, size)], iters)
}

/// Round-trip times (nanoseconds) of `iters` ping-pongs in which each hop
/// is the datagrams `shape` (`(segment size, length)`, segment size 0: a
/// plain datagram) sent in one `sendmmsg`; a hop is over when all of its
/// datagrams (or GRO runs) have been received. `[(0, 40), (0, 20)]` is an
/// 8-byte RDMA WRITE and the ACK of the peer's, as two datagrams;
/// `[(40, 60)]` the same two packets as one GSO run.
pub fn raw_pingpong_shape(
    a: Ipv4Addr,
    b: Ipv4Addr,
    shape: &[(usize, usize)],
    iters: usize,
) -> std::io::Result<Vec<u64>> {
    let sa = bind(a)?;
    let sb = bind(b)?;
    let (aa, ab) = (sa.local_addr(), sb.local_addr());
    let per_hop = shape.len();
    let batch = |dst| {
        let mut tx = TxBatch::with_capacity(4096);
        for &(seg, len) in shape {
            tx.push(dst, 2, seg, len, |p| p.fill(1));
        }
        tx
    };
    let (to_a, to_b) = (batch(aa), batch(ab));
    // As many receive slots as a hop has datagrams: a receive sets up
    // every slot's header, which a floor should not pay for needlessly.
    let slots = per_hop.max(1);
    let echo = std::thread::spawn(move || {
        let mut rx = RxBatch::new(slots, 4096);
        let mut dropped = 0;
        for _ in 0..iters + 100 {
            let mut got = 0;
            while got < per_hop {
                got += sb.recv(&mut rx).unwrap_or(0);
            }
            let _ = sb.send(&to_a, &mut dropped);
        }
    });
    let mut rx = RxBatch::new(slots, 4096);
    let mut dropped = 0;
    let mut out = Vec::with_capacity(iters);
    for i in 0..iters + 100 {
        let t0 = Instant::now();
        sa.send(&to_b, &mut dropped)?;
        let mut got = 0;
        while got < per_hop {
            got += sa.recv(&mut rx)?;
        }
        if i >= 100 {
            out.push(t0.elapsed().as_nanos() as u64);
        }
    }
    let _ = echo.join();
    Ok(out)
}

/// Bytes per second received when streaming `segment`-byte packets in GSO
/// runs for `duration` from `a` to `b` (receiver with GRO).
pub fn raw_stream(
    a: Ipv4Addr,
    b: Ipv4Addr,
    segment: usize,
    duration: Duration,
) -> std::io::Result<f64> {
    let per_run = (60 * 1024 / segment).clamp(1, MAX_GSO_SEGMENTS);
    raw_stream_of(a, b, &[(segment, segment * per_run); 8], duration)
}

/// UDP payload bytes per second received when the datagrams `(segment
/// size, length)` (segment size 0: a plain datagram) are sent over and over,
/// all in one `sendmmsg` each time, for `duration` from `a` to `b`
/// (receiver with GRO). With the shape of a RoCE message's packets it shows
/// what the packet boundaries alone cost against [`raw_stream`].
pub fn raw_stream_of(
    a: Ipv4Addr,
    b: Ipv4Addr,
    datagrams: &[(usize, usize)],
    duration: Duration,
) -> std::io::Result<f64> {
    let sa = bind(a)?;
    let sb = bind(b)?;
    let dst = sb.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let receiver = std::thread::spawn(move || {
        let mut rx = RxBatch::new(16, 65536);
        let mut bytes = 0u64;
        let mut first: Option<Instant> = None;
        let mut last = Instant::now();
        loop {
            let n = sb.recv(&mut rx).unwrap_or(0);
            if n == 0 {
                if stop2.load(Ordering::Relaxed) {
                    break;
                }
                let _ = sb.wait_readable(Some(Duration::from_millis(5)));
                continue;
            }
            let now = Instant::now();
            if first.is_none() {
                first = Some(now);
            } else {
                for k in 0..n {
                    bytes += rx.get(k).0.len as u64;
                }
            }
            last = now;
        }
        let secs = first.map_or(0.0, |f| (last - f).as_secs_f64());
        if secs > 0.0 {
            bytes as f64 / secs
        } else {
            0.0
        }
    });
    let mut tx = TxBatch::with_capacity(1 << 20);
    for &(segment, len) in datagrams {
        tx.push(dst, 2, segment, len, |p| p.fill(5));
    }
    let mut dropped = 0;
    let end = Instant::now() + duration;
    while Instant::now() < end {
        sa.send(&tx, &mut dropped)?;
    }
    std::thread::sleep(Duration::from_millis(20));
    stop.store(true, Ordering::Relaxed);
    Ok(receiver.join().unwrap_or(0.0))
}

/// The 1-minute load average, for reports.
pub fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Median of `v` (sorted in place).
pub fn median(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    if v.is_empty() {
        0
    } else {
        v[v.len() / 2]
    }
}

/// What one `ucx_perftest` run reported on its `Final:` line.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UcxResult {
    /// The median latency, microseconds (one way: half the round trip, as
    /// perftest's `t_typical`).
    pub median_us: f64,
    /// The overall message rate, messages per second.
    pub msg_rate: f64,
}

/// Run `ucx_perftest -t test -s size -n iters` over TCP (`UCX_TLS=tcp,self`)
/// between a server and a client process on 127.0.0.1, the server on TCP
/// `port`. `None` when `ucx_perftest` is not installed, fails, or prints
/// no `Final:` line (each process is killed after `timeout`).
pub fn ucx_perftest_tcp(
    test: &str,
    size: u64,
    iters: u64,
    port: u16,
    timeout: Duration,
) -> Option<UcxResult> {
    use std::process::{Command, Stdio};
    let args = |c: &mut Command| {
        c.env("UCX_TLS", "tcp,self")
            .args([
                "-t",
                test,
                "-s",
                &size.to_string(),
                "-n",
                &iters.to_string(),
            ])
            .args(["-p", &port.to_string()])
            .stdin(Stdio::null())
            .stderr(Stdio::null());
    };
    let mut server = Command::new("ucx_perftest");
    args(&mut server);
    let mut server = server.stdout(Stdio::null()).spawn().ok()?;
    std::thread::sleep(Duration::from_millis(500));
    let mut client = Command::new("ucx_perftest");
    args(&mut client);
    let client = client.arg("127.0.0.1").stdout(Stdio::piped()).spawn();
    let Ok(mut client) = client else {
        let _ = server.kill();
        let _ = server.wait();
        return None;
    };
    let end = Instant::now() + timeout;
    while client.try_wait().ok().flatten().is_none() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(10));
    }
    for child in [&mut client, &mut server] {
        if child.try_wait().ok().flatten().is_none() {
            let _ = child.kill();
        }
    }
    let out = client.wait_with_output().ok()?;
    let _ = server.wait();
    parse_ucx_final(&String::from_utf8_lossy(&out.stdout))
}

/// The `Final:` line of `ucx_perftest`'s table: iterations, then latency
/// (median, average, overall), bandwidth (average, overall) and message
/// rate (average, overall).
fn parse_ucx_final(out: &str) -> Option<UcxResult> {
    let line = out.lines().find(|l| l.trim_start().starts_with("Final:"))?;
    let v: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 8 {
        return None;
    }
    Some(UcxResult {
        median_us: v[1],
        msg_rate: v[7],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ucx_final_line_gives_the_median_latency_and_overall_rate() {
        let out = "[thread 0]  3692  4.414  138.502  138.502  0.06  0.06  7220  7220\n\
                   Final:                 20000      4.360   190.063   305.728        0.04       0.02        5261        3271\n";
        assert_eq!(
            parse_ucx_final(out),
            Some(UcxResult {
                median_us: 4.36,
                msg_rate: 3271.0
            })
        );
        assert_eq!(parse_ucx_final("Final: 1 2 x"), None);
        assert_eq!(parse_ucx_final("no table"), None);
    }
}
