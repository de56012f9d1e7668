//! The state of the fabric's monitors: the switches' PFC watchdog
//! ([`Watchdog`], one for the whole fabric, with a [`WdQueue`] per watched
//! egress queue) and the live deadlock detector ([`Detector`]). What they
//! do, and when, is in [`super::watchdog`] and [`super::deadlock`].

use roce::time::Duration;

use super::event::NONE;
use crate::config::{DeadlockConfig, OnDeadlock, PfcWatchdogAction, PfcWatchdogConfig};
use crate::results::{DeadlockRecord, PfcwdEvent};

/// One watched queue.
#[derive(Debug, Clone, Default)]
pub(super) struct WdQueue {
    /// Global port id.
    pub(super) port: u32,
    /// Priority.
    pub(super) prio: u8,
    /// In a storm (action applied).
    pub(super) stormed: bool,
    /// Detection countdown, ps.
    pub(super) detect_left: u64,
    /// Restoration countdown, ps.
    pub(super) restore_left: u64,
    /// Held off at the previous poll.
    pub(super) last_paused: bool,
    /// PFC frames received up to the previous poll.
    pub(super) last_rx_pause: u64,
    /// PAUSE episodes ended up to the previous poll.
    pub(super) last_transitions: u64,
    /// In the polled set.
    pub(super) active: bool,
    /// Counters (totals, then the current or latest storm).
    pub(super) detected: u64,
    pub(super) restored: u64,
    pub(super) tx_ok: u64,
    pub(super) tx_drop: u64,
    pub(super) rx_ok: u64,
    pub(super) rx_drop: u64,
    pub(super) last: [u64; 4],
    /// Port counters when the current storm began: tx and rx packets.
    pub(super) storm_tx0: u64,
    pub(super) storm_rx0: u64,
    /// Drops of the current storm.
    pub(super) cur_tx_drop: u64,
    pub(super) cur_rx_drop: u64,
}

/// The switch watchdog state of a whole fabric.
#[derive(Debug)]
pub(crate) struct Watchdog {
    pub(super) detection: u64,
    pub(super) restoration: u64,
    pub(super) poll: u64,
    pub(super) action: PfcWatchdogAction,
    /// Per `port * 8 + prio`: index into `queues`, or `NONE`.
    pub(super) slot: Vec<u32>,
    pub(super) queues: Vec<WdQueue>,
    /// Indices of the polled queues.
    pub(super) active: Vec<u32>,
    pub(super) poll_pending: bool,
    pub(super) events: Vec<PfcwdEvent>,
}

impl Watchdog {
    /// A watchdog for `ports` ports.
    pub fn new(cfg: &PfcWatchdogConfig, ports: usize) -> Watchdog {
        Watchdog {
            detection: cfg.detection_time.as_ps(),
            restoration: cfg.restoration_time.as_ps(),
            poll: cfg.poll_interval.as_ps().max(1),
            action: cfg.action,
            slot: vec![NONE; ports * 8],
            queues: Vec::new(),
            active: Vec::new(),
            poll_pending: false,
            events: Vec::new(),
        }
    }
}

/// Detector state.
#[derive(Debug)]
pub(crate) struct Detector {
    pub(super) interval: Duration,
    pub(super) stop: bool,
    pub(super) pending: bool,
    /// Deadlocks reported and still present: (priority, sorted member
    /// ports).
    pub(super) live: Vec<(u8, Vec<u32>)>,
    /// Every deadlock found, in order.
    pub(super) records: Vec<DeadlockRecord>,
}

impl Detector {
    /// A detector with `cfg`'s interval and action.
    pub fn new(cfg: &DeadlockConfig) -> Detector {
        Detector {
            interval: cfg.check_interval,
            stop: cfg.on_deadlock == OnDeadlock::Stop,
            pending: false,
            live: Vec::new(),
            records: Vec::new(),
        }
    }
}
