//! A switch's memory management unit: shared buffer, reserve, headroom,
//! PFC thresholds, lossy tail drop, and RED/ECN marking.
//!
//! Accounting is per ingress (port, priority), as on Broadcom-class
//! switches: each one holds bytes in three places, taken in this order on
//! arrival and given back in the reverse order on departure:
//!
//! 1. its reserve (`reserve_per_port`, guaranteed),
//! 2. the shared pool (what the PFC threshold limits),
//! 3. its headroom (lossless priorities only; absorbs frames in flight
//!    after XOFF). A lossless frame that finds its headroom full is dropped
//!    and counted: that is a misconfiguration (AN-4).
//!
//! Lossy priorities never pause; a frame is tail-dropped when the shared
//! pool is exhausted or its egress queue exceeds `lossy_alpha` times the
//! free shared bytes (or `lossy_queue_limit`).
//!
//! The MMU makes decisions only; the world sends the PFC frames.

use rand::Rng;
use rand_chacha::ChaCha8Rng;

use crate::config::{EcnConfig, PfcThreshold};

/// Where an arriving frame went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admit {
    /// Accepted.
    Accept,
    /// Dropped for lack of buffer.
    Drop,
}

/// A PFC state change to signal upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PfcChange {
    /// Nothing changes.
    None,
    /// Send XOFF.
    Pause,
    /// Send XON.
    Resume,
}

/// Bytes one ingress (port, priority) holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IngressAcc {
    /// In its reserve.
    pub reserve: u64,
    /// In the shared pool.
    pub shared: u64,
    /// In its headroom.
    pub headroom: u64,
    /// XOFF sent and not yet cleared.
    pub paused: bool,
    /// The priority is lossless on the port (a copy of [`Mmu`]'s port
    /// masks, kept beside the counters an arrival reads anyway).
    pub lossless: bool,
}

impl IngressAcc {
    /// Total bytes held.
    pub fn total(&self) -> u64 {
        self.reserve + self.shared + self.headroom
    }
}

/// The buffer of one switch.
#[derive(Debug, Clone)]
pub struct Mmu {
    /// Shared pool size (buffer minus reserves and headroom).
    pub shared_size: u64,
    /// Shared bytes in use.
    pub shared_used: u64,
    /// Reserve per ingress (port, priority).
    pub reserve: u64,
    /// Headroom per port (same for each lossless priority of the port).
    pub headroom: Vec<u64>,
    /// Accounting per `port * 8 + prio`.
    pub acc: Vec<IngressAcc>,
    /// Lossless priorities of each port as a bit set (PFC can be off on
    /// one port, or on for other priorities); change with
    /// [`Mmu::set_lossless`].
    lossless: Vec<u8>,
    /// PFC threshold rule.
    pub threshold: PfcThreshold,
    /// Lossy dynamic-threshold factor.
    pub lossy_alpha: f64,
    /// Lossy hard cap per egress queue.
    pub lossy_limit: u64,
    /// Most headroom bytes one (port, priority) of each port held.
    pub max_headroom: Vec<u64>,
}

impl Mmu {
    /// A buffer of `size` bytes for `ports` ports. Errors when reserves
    /// and headroom do not fit.
    pub fn new(
        size: u64,
        reserve: u64,
        headroom: Vec<u64>,
        lossless: u8,
        threshold: PfcThreshold,
        lossy_alpha: f64,
        lossy_limit: Option<u64>,
    ) -> Result<Mmu, String> {
        let n = headroom.len();
        Mmu::with_port_priorities(
            size,
            reserve,
            headroom,
            vec![lossless; n],
            threshold,
            lossy_alpha,
            lossy_limit,
        )
    }

    /// A buffer whose ports have lossless priorities of their own
    /// (`lossless[port]`, a bit set): headroom is carved for each port's
    /// lossless priorities only. Errors when reserves and headroom do not
    /// fit.
    pub fn with_port_priorities(
        size: u64,
        reserve: u64,
        headroom: Vec<u64>,
        lossless: Vec<u8>,
        threshold: PfcThreshold,
        lossy_alpha: f64,
        lossy_limit: Option<u64>,
    ) -> Result<Mmu, String> {
        let ports = headroom.len() as u64;
        let carved: u64 = headroom
            .iter()
            .zip(&lossless)
            .map(|(h, m)| h * u64::from(m.count_ones()))
            .sum();
        let reserved = ports * 8 * reserve + carved;
        if reserved >= size {
            return Err(format!(
                "reserve and headroom need {reserved} B of a {size} B buffer: expected less than the buffer"
            ));
        }
        let mut mmu = Mmu {
            shared_size: size - reserved,
            shared_used: 0,
            reserve,
            acc: vec![IngressAcc::default(); headroom.len() * 8],
            headroom,
            lossless: vec![0; ports as usize],
            threshold,
            lossy_alpha,
            lossy_limit: lossy_limit.unwrap_or(u64::MAX),
            max_headroom: vec![0; ports as usize],
        };
        for (p, m) in lossless.into_iter().enumerate() {
            mmu.set_lossless(p as u16, m);
        }
        Ok(mmu)
    }

    /// Whether `prio` is lossless on `port`.
    pub fn is_lossless(&self, port: u16, prio: u8) -> bool {
        self.lossless[usize::from(port)] & (1 << prio) != 0
    }

    /// Make the priorities in bit set `mask` lossless on `port` and the
    /// others lossy (PFC turned on or off there). Headroom stays as
    /// carved.
    pub fn set_lossless(&mut self, port: u16, mask: u8) {
        let p = usize::from(port);
        if let Some(m) = self.lossless.get_mut(p) {
            *m = mask;
            for (prio, a) in self.acc[p * 8..p * 8 + 8].iter_mut().enumerate() {
                a.lossless = mask & (1 << prio) != 0;
            }
        }
    }

    /// The shared-pool limit of one ingress under the dynamic rule, or the
    /// static XOFF expressed in shared bytes.
    fn shared_limit(&self) -> u64 {
        match self.threshold {
            PfcThreshold::Static { xoff, .. } => xoff.bytes().saturating_sub(self.reserve),
            PfcThreshold::Dynamic { alpha, .. } => {
                (alpha * self.shared_size.saturating_sub(self.shared_used) as f64) as u64
            }
        }
    }

    /// A frame of `len` bytes arrives on `port` with `prio`; `egress_q` is
    /// the bytes already queued at its egress (port, priority). Returns the
    /// decision and whether XOFF must be sent.
    pub fn arrive(&mut self, port: u16, prio: u8, len: u64, egress_q: u64) -> (Admit, PfcChange) {
        let i = usize::from(port) * 8 + usize::from(prio);
        let a = self.acc[i];
        let lossless = a.lossless;
        let free = self.shared_size.saturating_sub(self.shared_used);
        if a.total() + len <= self.reserve {
            self.acc[i].reserve += len;
        } else if !lossless {
            let cap = ((self.lossy_alpha * free as f64) as u64).min(self.lossy_limit);
            if len > free || egress_q + len > cap {
                return (Admit::Drop, PfcChange::None);
            }
            self.acc[i].shared += len;
            self.shared_used += len;
            return (Admit::Accept, PfcChange::None);
        } else {
            let fits_shared = match self.threshold {
                PfcThreshold::Static { xoff, .. } => a.total() + len <= xoff.bytes(),
                PfcThreshold::Dynamic { .. } => a.shared + len <= self.shared_limit(),
            };
            if !a.paused && a.headroom == 0 && fits_shared && len <= free {
                self.acc[i].shared += len;
                self.shared_used += len;
            } else if a.headroom + len <= self.headroom[usize::from(port)] {
                self.acc[i].headroom += len;
                let m = &mut self.max_headroom[usize::from(port)];
                *m = (*m).max(a.headroom + len);
            } else {
                return (Admit::Drop, PfcChange::None);
            }
        }
        if !lossless {
            return (Admit::Accept, PfcChange::None);
        }
        let a = self.acc[i];
        let should_pause = a.headroom > 0
            || match self.threshold {
                PfcThreshold::Static { xoff, .. } => a.total() >= xoff.bytes(),
                PfcThreshold::Dynamic { .. } => a.shared >= self.shared_limit(),
            };
        if should_pause && !a.paused {
            self.acc[i].paused = true;
            (Admit::Accept, PfcChange::Pause)
        } else {
            (Admit::Accept, PfcChange::None)
        }
    }

    /// A frame of `len` bytes that entered on `port` with `prio` leaves.
    /// Returns whether XON must be sent.
    pub fn depart(&mut self, port: u16, prio: u8, len: u64) -> PfcChange {
        let i = usize::from(port) * 8 + usize::from(prio);
        let a = &mut self.acc[i];
        let mut left = len;
        let h = left.min(a.headroom);
        a.headroom -= h;
        left -= h;
        let s = left.min(a.shared);
        a.shared -= s;
        left -= s;
        a.reserve -= left.min(a.reserve);
        self.shared_used -= s;
        let a = self.acc[i];
        if !a.paused || a.headroom > 0 {
            return PfcChange::None;
        }
        let resume = match self.threshold {
            PfcThreshold::Static { xon, .. } => a.total() <= xon.bytes(),
            PfcThreshold::Dynamic { resume_offset, .. } => {
                a.shared == 0 || a.shared + resume_offset.bytes() <= self.shared_limit()
            }
        };
        if resume {
            self.acc[i].paused = false;
            PfcChange::Resume
        } else {
            PfcChange::None
        }
    }
}

/// RED marking probability of an egress queue holding `q` bytes
/// (VALIDATION.md AN-9): 0 at or below `kmin`, linear to `pmax` at `kmax`,
/// 1 above `kmax`. With `kmin == kmax` it is a step at `kmin`.
pub fn mark_probability(e: &EcnConfig, q: u64) -> f64 {
    let (kmin, kmax) = (e.kmin.bytes(), e.kmax.bytes());
    if q <= kmin {
        0.0
    } else if q > kmax {
        1.0
    } else {
        e.pmax * (q - kmin) as f64 / (kmax - kmin) as f64
    }
}

/// Draw the marking decision for a queue of `q` bytes.
pub fn should_mark(e: &EcnConfig, q: u64, rng: &mut ChaCha8Rng) -> bool {
    let p = mark_probability(e, q);
    p >= 1.0 || (p > 0.0 && rng.gen::<f64>() < p)
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce::time::Size;

    fn static_mmu() -> Mmu {
        Mmu::new(
            10_000_000,
            1_000,
            vec![50_000; 4],
            1 << 3,
            PfcThreshold::Static {
                xoff: Size::from_bytes(20_000),
                xon: Size::from_bytes(10_000),
            },
            1.0,
            None,
        )
        .unwrap()
    }

    #[test]
    fn static_thresholds_pause_at_xoff_and_resume_at_xon() {
        let mut m = static_mmu();
        let mut paused_at = None;
        for k in 1..=25u64 {
            let (adm, ch) = m.arrive(1, 3, 1_000, 0);
            assert_eq!(adm, Admit::Accept);
            if ch == PfcChange::Pause {
                paused_at = Some(k);
            }
        }
        assert_eq!(paused_at, Some(20), "XOFF when 20 KB are held");
        assert_eq!(m.acc[11].headroom, 5_000, "frames after XOFF use headroom");
        let mut resumed_at = None;
        for k in 1..=25u64 {
            if m.depart(1, 3, 1_000) == PfcChange::Resume {
                resumed_at = Some(k);
            }
        }
        assert_eq!(resumed_at, Some(15), "XON when 10 KB are left");
        assert_eq!(m.shared_used, 0);
        assert_eq!(m.acc[11].total(), 0);
        assert!(!m.acc[11].paused && m.acc[11].lossless);
    }

    #[test]
    fn lossless_frames_drop_only_when_headroom_overflows() {
        let mut m = static_mmu();
        let mut drops = 0;
        for _ in 0..100 {
            if m.arrive(0, 3, 1_000, 0).0 == Admit::Drop {
                drops += 1;
            }
        }
        // 20 KB before XOFF, 50 KB of headroom, the rest dropped.
        assert_eq!(drops, 30);
    }

    #[test]
    fn lossy_queues_tail_drop_at_the_dynamic_limit() {
        let mut m = Mmu::new(
            100_000,
            0,
            vec![0; 2],
            0,
            PfcThreshold::default(),
            1.0,
            None,
        )
        .unwrap();
        let mut q = 0;
        let mut accepted = 0;
        for _ in 0..100 {
            if m.arrive(0, 0, 1_000, q).0 == Admit::Accept {
                q += 1_000;
                accepted += 1;
            }
        }
        // q <= free = 100 KB - q: half the buffer.
        assert_eq!(accepted, 50);
    }

    #[test]
    fn buffer_configuration_that_cannot_fit_is_refused() {
        let e = Mmu::new(
            100_000,
            10_000,
            vec![0; 2],
            0,
            PfcThreshold::default(),
            1.0,
            None,
        );
        assert!(e.is_err());
    }

    #[test]
    fn marking_curve_follows_red_boundaries() {
        let e = EcnConfig {
            priority: 3,
            kmin: Size::from_bytes(100),
            kmax: Size::from_bytes(300),
            pmax: 0.2,
        };
        assert_eq!(mark_probability(&e, 100), 0.0);
        assert!((mark_probability(&e, 200) - 0.1).abs() < 1e-12);
        assert!((mark_probability(&e, 300) - 0.2).abs() < 1e-12);
        assert_eq!(mark_probability(&e, 301), 1.0);
        let step = EcnConfig {
            priority: 3,
            kmin: Size::from_bytes(300),
            kmax: Size::from_bytes(300),
            pmax: 1.0,
        };
        assert_eq!(mark_probability(&step, 300), 0.0);
        assert_eq!(mark_probability(&step, 301), 1.0);
    }

    #[test]
    fn an9_marked_fraction_matches_red_within_three_sigma() {
        use rand_chacha::rand_core::SeedableRng;
        let e = EcnConfig {
            priority: 3,
            kmin: Size::from_bytes(5_000),
            kmax: Size::from_bytes(200_000),
            pmax: 0.01,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let n = 1_000_000u32;
        for q in [
            4_000u64, 5_000, 50_000, 102_500, 200_000, 200_001, 1_000_000,
        ] {
            let p = mark_probability(&e, q);
            let marked = (0..n).filter(|_| should_mark(&e, q, &mut rng)).count() as f64;
            let sigma = (f64::from(n) * p * (1.0 - p)).sqrt();
            let dev = (marked - f64::from(n) * p).abs();
            assert!(dev <= 3.0 * sigma, "q={q}: {marked} marked, p={p}");
            if p == 0.0 || p == 1.0 {
                assert_eq!(dev, 0.0, "q={q}: the boundaries are exact");
            }
        }
    }
}
