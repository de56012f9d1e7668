//! The congestion control trait: what the transport engine asks of an
//! algorithm at the reaction point of one QP.
//!
//! Contract: an implementation is driven only through these calls, all
//! with the caller's `now`; it never reads a clock and never ticks on its
//! own (an algorithm with nothing to do returns no deadline from
//! [`CongestionControl::poll_timeout`]). The algorithms ([`super::Dcqcn`],
//! [`super::Hpcc`], [`super::Swift`],
//! [`super::NoCc`]) and the engine's enum ([`super::AnyCc`]) live beside it.

use crate::time::{Instant, Rate};

/// A congestion control algorithm at the reaction point of one QP. Only
/// the rate is required: an algorithm that takes no CNPs, counts no bytes
/// or has no timers (HPCC, Swift and none, whose signals come from ACKs)
/// keeps the defaults, which ignore the event and set no deadline.
pub trait CongestionControl {
    /// The current sending rate; `None` means unlimited.
    fn rate(&self) -> Option<Rate>;
    /// A CNP arrived for this QP.
    fn on_cnp(&mut self, _now: Instant) {}
    /// A data packet of `bytes` (wire bytes) was sent.
    fn on_transmit(&mut self, _now: Instant, _bytes: u64) {}
    /// The next time [`handle_timeout`](Self::handle_timeout) must run.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    /// Run the timers due at `now`.
    fn handle_timeout(&mut self, _now: Instant) {}
}
