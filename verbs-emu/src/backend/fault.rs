//! Seeded fault injection on the transmit path (smoltcp's
//! `FaultInjector::new(inner, seed)` shape): a [`DatagramIo`] wrapper that
//! loses, loses in bursts, reorders, duplicates, delays and corrupts
//! packets before they reach the inner path.
//!
//! Decisions come from a `ChaCha8Rng` seeded with [`FaultConfig::seed`], one
//! draw sequence per packet in sending order, so the same seed and the same
//! traffic give the same faults. GSO runs are split into single packets so
//! that every packet is judged on its own. Corruption flips one bit outside
//! BTH byte 4 (the only BTH byte the ICRC does not cover), so the
//! receiver's ICRC check always catches it.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::io::{segments, DatagramIo, IoStats};
use super::sys::{RxBatch, TxBatch};

/// How long a reordered packet waits at most for a successor to overtake it.
const REORDER_HOLD: Duration = Duration::from_micros(200);

/// What to inject. Probabilities are per packet, in `0..=1`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct FaultConfig {
    /// Drop the packet.
    pub loss: f64,
    /// Start a burst: drop this packet and the next `burst_len - 1`.
    pub burst_loss: f64,
    /// Length of a loss burst (packets).
    pub burst_len: u32,
    /// Hold the packet back until the next one has been sent.
    pub reorder: f64,
    /// Send the packet twice.
    pub duplicate: f64,
    /// Flip one bit (a bad ICRC at the receiver).
    pub corrupt: f64,
    /// Mark this share of ECN-capable packets CE, as a congested switch
    /// with ECN does (the ECN bits are masked in the ICRC).
    pub ce_mark: f64,
    /// Delay this share of packets by `delay`.
    pub delay_p: f64,
    /// The delay.
    pub delay: Duration,
    /// RNG seed.
    pub seed: u64,
}

impl FaultConfig {
    /// True when any fault is enabled.
    pub fn any(&self) -> bool {
        self.loss > 0.0
            || self.burst_loss > 0.0
            || self.reorder > 0.0
            || self.duplicate > 0.0
            || self.corrupt > 0.0
            || self.ce_mark > 0.0
            || (self.delay_p > 0.0 && !self.delay.is_zero())
    }
}

#[derive(Debug)]
struct Held {
    due: Instant,
    dst: SocketAddrV4,
    tos: u8,
    bytes: Vec<u8>,
    /// Released once this many later packets went out (reorder), or at
    /// `due` (delay).
    after_packets: Option<u64>,
}

/// The fault-injecting wrapper.
#[derive(Debug)]
pub struct FaultInjector<T> {
    inner: T,
    cfg: FaultConfig,
    rng: ChaCha8Rng,
    out: TxBatch,
    held: VecDeque<Held>,
    pool: Vec<Vec<u8>>,
    burst_left: u32,
    sent: u64,
    stats: IoStats,
}

impl<T: DatagramIo> FaultInjector<T> {
    /// Wrap `inner`.
    pub fn new(inner: T, cfg: FaultConfig) -> FaultInjector<T> {
        FaultInjector {
            inner,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            cfg,
            out: TxBatch::with_capacity(1 << 16),
            held: VecDeque::new(),
            pool: Vec::new(),
            burst_left: 0,
            sent: 0,
            stats: IoStats::default(),
        }
    }

    /// The wrapped path.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    fn hold(&mut self, dst: SocketAddrV4, tos: u8, pkt: &[u8], due: Instant, after: Option<u64>) {
        let mut bytes = self.pool.pop().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(pkt);
        self.held.push_back(Held {
            due,
            dst,
            tos,
            bytes,
            after_packets: after,
        });
    }

    fn emit(&mut self, dst: SocketAddrV4, tos: u8, pkt: &[u8]) {
        self.out
            .push(dst, tos, 0, pkt.len(), |b| b.copy_from_slice(pkt));
        self.sent += 1;
    }

    fn release_due(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.held.len() {
            let h = &self.held[i];
            let due = h.due <= now || h.after_packets.is_some_and(|n| self.sent >= n);
            if due {
                let h = self.held.remove(i).expect("index in range");
                self.out.push(h.dst, h.tos, 0, h.bytes.len(), |b| {
                    b.copy_from_slice(&h.bytes)
                });
                self.sent += 1;
                self.pool.push(h.bytes);
            } else {
                i += 1;
            }
        }
    }
}

impl<T: DatagramIo> DatagramIo for FaultInjector<T> {
    fn local_addr(&self) -> SocketAddrV4 {
        self.inner.local_addr()
    }

    fn gso(&self) -> bool {
        // Every packet is judged alone.
        false
    }

    fn send(&mut self, batch: &TxBatch) -> io::Result<()> {
        self.out.clear();
        let now = Instant::now();
        let mut scratch = Vec::new();
        for (dst, tos, seg, bytes) in batch.iter() {
            for pkt in segments(bytes, seg) {
                if self.burst_left > 0 {
                    self.burst_left -= 1;
                    self.stats.fault_dropped += 1;
                    continue;
                }
                let r: [f64; 7] = self.rng.gen();
                let tos = if r[6] < self.cfg.ce_mark && tos & 3 != 0 {
                    self.stats.fault_ce_marked += 1;
                    tos | 3
                } else {
                    tos
                };
                if r[0] < self.cfg.loss {
                    self.stats.fault_dropped += 1;
                    continue;
                }
                if r[1] < self.cfg.burst_loss {
                    self.burst_left = self.cfg.burst_len.saturating_sub(1);
                    self.stats.fault_dropped += 1;
                    continue;
                }
                let pkt: &[u8] = if r[2] < self.cfg.corrupt && !pkt.is_empty() {
                    scratch.clear();
                    scratch.extend_from_slice(pkt);
                    let mut at = self.rng.gen_range(0..scratch.len());
                    if at == 4 {
                        at = if scratch.len() > 5 { 5 } else { 0 };
                    }
                    let bit = self.rng.gen_range(0..8);
                    scratch[at] ^= 1 << bit;
                    self.stats.fault_corrupted += 1;
                    &scratch
                } else {
                    pkt
                };
                let dup = r[3] < self.cfg.duplicate;
                if dup {
                    self.stats.fault_duplicated += 1;
                }
                if r[4] < self.cfg.reorder {
                    self.stats.fault_reordered += 1;
                    let after = self.sent + 1;
                    self.hold(dst, tos, pkt, now + REORDER_HOLD, Some(after));
                } else if r[5] < self.cfg.delay_p && !self.cfg.delay.is_zero() {
                    self.stats.fault_delayed += 1;
                    self.hold(dst, tos, pkt, now + self.cfg.delay, None);
                } else {
                    self.emit(dst, tos, pkt);
                }
                if dup {
                    self.emit(dst, tos, pkt);
                }
                self.release_due(now);
            }
        }
        let out = std::mem::take(&mut self.out);
        let r = if out.is_empty() {
            Ok(())
        } else {
            self.inner.send(&out)
        };
        self.out = out;
        r
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        self.inner.recv(batch)
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let own = self.held.iter().map(|h| h.due).min();
        match (own, self.inner.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn flush(&mut self, now: Instant) -> io::Result<()> {
        self.out.clear();
        self.release_due(now);
        if !self.out.is_empty() {
            let out = std::mem::take(&mut self.out);
            let r = self.inner.send(&out);
            self.out = out;
            r?;
        }
        self.inner.flush(now)
    }

    fn stats(&self) -> IoStats {
        let i = self.inner.stats();
        IoStats {
            fault_dropped: self.stats.fault_dropped + i.fault_dropped,
            fault_duplicated: self.stats.fault_duplicated + i.fault_duplicated,
            fault_reordered: self.stats.fault_reordered + i.fault_reordered,
            fault_corrupted: self.stats.fault_corrupted + i.fault_corrupted,
            fault_delayed: self.stats.fault_delayed + i.fault_delayed,
            fault_ce_marked: self.stats.fault_ce_marked + i.fault_ce_marked,
            ..i
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// A path that records what reaches it.
    #[derive(Default)]
    struct Sink {
        got: Vec<Vec<u8>>,
    }

    impl DatagramIo for Sink {
        fn local_addr(&self) -> SocketAddrV4 {
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791)
        }
        fn gso(&self) -> bool {
            true
        }
        fn send(&mut self, batch: &TxBatch) -> io::Result<()> {
            for (_, _, seg, b) in batch.iter() {
                for p in segments(b, seg) {
                    self.got.push(p.to_vec());
                }
            }
            Ok(())
        }
        fn recv(&mut self, _: &mut RxBatch) -> io::Result<usize> {
            Ok(0)
        }
    }

    fn run(cfg: FaultConfig, n: u8) -> (Vec<Vec<u8>>, IoStats) {
        let mut f = FaultInjector::new(Sink::default(), cfg);
        let dst = SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4791);
        for i in 0..n {
            let mut b = TxBatch::default();
            b.push(dst, 2, 0, 16, |p| p.fill(i));
            f.send(&b).unwrap();
        }
        f.flush(Instant::now() + Duration::from_secs(1)).unwrap();
        let s = f.stats();
        (f.inner.got, s)
    }

    #[test]
    fn same_seed_same_faults() {
        let cfg = FaultConfig {
            loss: 0.2,
            reorder: 0.1,
            duplicate: 0.1,
            corrupt: 0.1,
            seed: 7,
            ..FaultConfig::default()
        };
        assert_eq!(run(cfg, 200).0, run(cfg, 200).0);
        let other = FaultConfig { seed: 8, ..cfg };
        assert_ne!(run(cfg, 200).0, run(other, 200).0);
    }

    #[test]
    fn each_fault_does_what_it_says() {
        let (got, s) = run(
            FaultConfig {
                loss: 1.0,
                ..FaultConfig::default()
            },
            50,
        );
        assert!(got.is_empty());
        assert_eq!(s.fault_dropped, 50);
        let (got, _) = run(
            FaultConfig {
                duplicate: 1.0,
                ..FaultConfig::default()
            },
            10,
        );
        assert_eq!(got.len(), 20);
        let (got, s) = run(
            FaultConfig {
                reorder: 0.5,
                seed: 3,
                ..FaultConfig::default()
            },
            100,
        );
        assert_eq!(got.len(), 100, "reordering never loses a packet");
        assert!(s.fault_reordered > 10);
        assert!(
            got.windows(2).any(|w| w[0][0] > w[1][0]),
            "some packet overtaken"
        );
        let (got, s) = run(
            FaultConfig {
                corrupt: 1.0,
                ..FaultConfig::default()
            },
            20,
        );
        assert_eq!(s.fault_corrupted, 20);
        for (i, p) in got.iter().enumerate() {
            let diff: u32 = p.iter().map(|&b| (b ^ i as u8).count_ones()).sum();
            assert_eq!(diff, 1, "exactly one bit flipped");
            assert_eq!(p[4], i as u8, "BTH byte 4 (not ICRC-covered) untouched");
        }
        let (got, s) = run(
            FaultConfig {
                burst_loss: 0.05,
                burst_len: 5,
                seed: 1,
                ..FaultConfig::default()
            },
            200,
        );
        assert_eq!(got.len() as u64 + s.fault_dropped, 200);
        assert!(s.fault_dropped >= 5);
    }
}
