//! The congestion control trait: what the transport engine asks of an
//! algorithm at the reaction point of one QP.
//!
//! Contract: an implementation is driven only through these calls, all
//! with the caller's `now`; it never reads a clock and never ticks on its
//! own (an algorithm with nothing to do returns no deadline from
//! [`CongestionControl::poll_timeout`]). The algorithms ([`super::Dcqcn`],
//! [`super::NoCc`]) and the engine's enum ([`super::AnyCc`]) live beside it.

use crate::time::{Instant, Rate};

/// A congestion control algorithm at the reaction point of one QP.
pub trait CongestionControl {
    /// The current sending rate; `None` means unlimited.
    fn rate(&self) -> Option<Rate>;
    /// A CNP arrived for this QP.
    fn on_cnp(&mut self, now: Instant);
    /// A data packet of `bytes` (wire bytes) was sent.
    fn on_transmit(&mut self, now: Instant, bytes: u64);
    /// The next time [`handle_timeout`](Self::handle_timeout) must run.
    fn poll_timeout(&self) -> Option<Instant>;
    /// Run the timers due at `now`.
    fn handle_timeout(&mut self, now: Instant);
}
