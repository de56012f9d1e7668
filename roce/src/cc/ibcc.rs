//! InfiniBand congestion control (IBA vol. 1, annex A10) at the source
//! channel adapter: a congestion control table (CCT) of inter-packet
//! delays, an index into it (CCTI) that each BECN raises and a timer
//! lowers.
//!
//! A switch marks FECN on packets leaving a congested port; the
//! destination returns a BECN (here the notification point's CNP). Per
//! BECN, `CCTI += ccti_increase` up to `ccti_limit`; every `ccti_timer`,
//! while above `ccti_min`, `CCTI -= 1`. The QP waits `CCT[CCTI]` between
//! packets; the table here is linear, entry `i` a delay of `i × ipd_step`,
//! so with frames of `frame` wire bytes the rate is
//! `line × T / (T + CCTI × ipd_step)`, `T` a frame's time at line rate.
//! Units: times in picoseconds, rates in bits per second.

use crate::time::{Duration, Instant, Rate};

use super::control::CongestionControl;

/// The source's congestion control settings (CA Congestion Setting and a
/// linear CCT).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IbCcParams {
    /// Line rate: the rate at CCTI 0.
    pub line_rate: Rate,
    /// Wire bytes of a full frame (the delay is between such frames).
    pub frame: u32,
    /// CCTI steps per BECN.
    pub ccti_increase: u16,
    /// The highest CCTI (the table's last entry).
    pub ccti_limit: u16,
    /// The lowest CCTI the timer lowers to.
    pub ccti_min: u16,
    /// The period of the timer that lowers CCTI by one.
    pub ccti_timer: Duration,
    /// The inter-packet delay added per CCT entry.
    pub ipd_step: Duration,
}

/// One QP's state.
#[derive(Debug, Clone, PartialEq)]
pub struct IbCc {
    p: IbCcParams,
    /// The current index into the table.
    ccti: u16,
    /// When the timer next lowers the index (`None`: at its floor).
    next_decrease: Option<Instant>,
}

impl IbCc {
    /// A QP at the table's floor.
    pub fn new(p: IbCcParams) -> IbCc {
        IbCc {
            p,
            ccti: p.ccti_min.min(p.ccti_limit),
            next_decrease: None,
        }
    }

    /// The parameters.
    pub fn params(&self) -> &IbCcParams {
        &self.p
    }

    /// The current index into the table.
    pub fn ccti(&self) -> u16 {
        self.ccti
    }

    /// The rate at the current index.
    pub fn current_rate(&self) -> Rate {
        let t = self
            .p
            .line_rate
            .serialization_time(u64::from(self.p.frame.max(1)));
        let ipd = self.p.ipd_step.as_ps() * u64::from(self.ccti);
        let t = t.as_ps().max(1);
        let bps = u128::from(self.p.line_rate.bps()) * u128::from(t) / u128::from(t + ipd);
        Rate::from_bps(bps as u64)
    }
}

impl CongestionControl for IbCc {
    fn rate(&self) -> Option<Rate> {
        Some(self.current_rate())
    }

    /// A BECN: up the table.
    fn on_cnp(&mut self, now: Instant) {
        self.ccti = self
            .ccti
            .saturating_add(self.p.ccti_increase)
            .min(self.p.ccti_limit);
        if self.next_decrease.is_none() && self.ccti > self.p.ccti_min {
            self.next_decrease = Some(now + self.p.ccti_timer);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.next_decrease
    }

    /// The timer: one step down, and again while above the floor.
    fn handle_timeout(&mut self, now: Instant) {
        let Some(t) = self.next_decrease else {
            return;
        };
        if now < t {
            return;
        }
        if self.ccti > self.p.ccti_min {
            self.ccti -= 1;
        }
        self.next_decrease = (self.ccti > self.p.ccti_min && self.p.ccti_timer > Duration::ZERO)
            .then(|| t + self.p.ccti_timer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> IbCcParams {
        IbCcParams {
            line_rate: Rate::from_gbps(100),
            frame: 4000,
            ccti_increase: 2,
            ccti_limit: 10,
            ccti_min: 0,
            ccti_timer: Duration::from_us(10),
            // One frame's time (320 ns at 100 Gbit/s) per entry.
            ipd_step: Duration::from_ns(320),
        }
    }

    #[test]
    fn becns_climb_the_table_and_the_timer_walks_it_back() {
        let mut c = IbCc::new(p());
        assert_eq!(c.rate(), Some(Rate::from_gbps(100)));
        c.on_cnp(Instant::ZERO);
        // CCTI 2: two frames' time of delay per frame, a third of line.
        assert_eq!(c.ccti(), 2);
        assert_eq!(c.current_rate().bps(), 33_333_333_333);
        for _ in 0..10 {
            c.on_cnp(Instant::ZERO);
        }
        assert_eq!(c.ccti(), 10, "capped at the limit");
        assert_eq!(
            c.poll_timeout(),
            Some(Instant::ZERO + Duration::from_us(10))
        );
        let mut t = Instant::ZERO;
        while let Some(d) = c.poll_timeout() {
            t = d;
            c.handle_timeout(t);
        }
        assert_eq!(c.ccti(), 0);
        assert_eq!(
            t,
            Instant::ZERO + Duration::from_us(100),
            "one step per 10 us"
        );
        assert_eq!(c.rate(), Some(Rate::from_gbps(100)));
    }
}
