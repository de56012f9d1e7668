//! Congestion control: a trait and the built-in algorithms.
//!
//! The transport engine owns one [`AnyCc`] per QP (enum dispatch, no
//! allocation) and consults it for the pacing rate of its data packets.
//! Inputs: [`CongestionControl::on_cnp`] when a CNP arrives for the QP,
//! [`CongestionControl::on_transmit`] for every data packet sent, and
//! [`CongestionControl::handle_timeout`] when the deadline from
//! [`CongestionControl::poll_timeout`] passes. Nothing here ticks on its
//! own: an algorithm with nothing to do returns no deadline.
//!
//! The notification point (CNP generation on CE) lives in the engine,
//! since it is a receive-side duty of every QP (ROCEV2.md §6.2).

pub mod dcqcn;

use crate::time::{Instant, Rate};

pub use dcqcn::{Dcqcn, DcqcnModel, DcqcnParams};

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

/// Which algorithm a QP uses, with its parameters. In files:
/// `{ algorithm = "none" }` or `{ algorithm = "dcqcn", model = ..., ... }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "algorithm", rename_all = "snake_case")]
pub enum CcConfig {
    /// No congestion control: send as fast as the caller pulls.
    #[default]
    None,
    /// DCQCN reaction point.
    Dcqcn(DcqcnParams),
}

/// The built-in algorithms, as one type.
// One per QP, held inline on purpose: boxing the DCQCN state would cost a
// pointer chase on every packet.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnyCc {
    /// `none`.
    None(NoCc),
    /// `dcqcn`.
    Dcqcn(Dcqcn),
}

impl AnyCc {
    /// Build the algorithm a configuration names.
    pub fn new(config: CcConfig) -> AnyCc {
        match config {
            CcConfig::None => AnyCc::None(NoCc),
            CcConfig::Dcqcn(p) => AnyCc::Dcqcn(Dcqcn::new(p)),
        }
    }
}

impl CongestionControl for AnyCc {
    fn rate(&self) -> Option<Rate> {
        match self {
            AnyCc::None(c) => c.rate(),
            AnyCc::Dcqcn(c) => c.rate(),
        }
    }
    fn on_cnp(&mut self, now: Instant) {
        match self {
            AnyCc::None(c) => c.on_cnp(now),
            AnyCc::Dcqcn(c) => c.on_cnp(now),
        }
    }
    fn on_transmit(&mut self, now: Instant, bytes: u64) {
        match self {
            AnyCc::None(c) => c.on_transmit(now, bytes),
            AnyCc::Dcqcn(c) => c.on_transmit(now, bytes),
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        match self {
            AnyCc::None(c) => c.poll_timeout(),
            AnyCc::Dcqcn(c) => c.poll_timeout(),
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        match self {
            AnyCc::None(c) => c.handle_timeout(now),
            AnyCc::Dcqcn(c) => c.handle_timeout(now),
        }
    }
}

/// No congestion control: unlimited rate, no timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NoCc;

impl CongestionControl for NoCc {
    fn rate(&self) -> Option<Rate> {
        None
    }
    fn on_cnp(&mut self, _now: Instant) {}
    fn on_transmit(&mut self, _now: Instant, _bytes: u64) {}
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
}
