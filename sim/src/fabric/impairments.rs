//! Impairments in force during a run: what a port or the world carries
//! while a scenario's faults (`[[faults]]`, planned by [`crate::faults`])
//! and timed overrides are in force.
//!
//! Everything here is a wrapper or a state change (ARCHITECTURE.md,
//! "Composition over flags"):
//!
//! * [`Impairments`] wraps the link direction leaving a port: loss, bad
//!   FCS, an MTU smaller than the frame, or the link being down. A healthy
//!   port has no wrapper (`Port::impairments` is `None`), so the only cost
//!   a healthy run pays is the one `Option` test `transmit` always made.
//! * Link down/up, routing convergence, a NIC's drain rate or stall, and
//!   timed overrides are `Action`s: events at their times that change
//!   the state of a port, a switch, a NIC or the routes, then get out of
//!   the way (the world installs and runs them, in `actions`).
//!
//! Counting: a frame a wrapper stops ([`Verdict`]) is counted once, where
//! a real device counts it: lost on the wire at the sender's
//! `fault_drops`, bad FCS at the receiver's `rx_crc_errors`, oversize at
//! the receiver's `rx_oversize`, a down link at the sender's
//! `tx_discards`; every one also in the summary's `drops`.

use rand::Rng;
use rand_chacha::ChaCha8Rng;
use roce::time::{Duration, Rate};

/// The impairments of one link direction (leaving one port): the
/// wrappers in force on it.
#[derive(Debug, Default)]
pub struct Impairments {
    /// The link is down: nothing passes.
    pub down: bool,
    /// Active rules, in the order they were installed; the first that
    /// stops a frame decides.
    pub rules: Vec<(u32, Rule)>,
}

/// One wrapper's rule and its state.
#[derive(Debug, Clone)]
pub enum Rule {
    /// Lose RoCE frames with probability `p`.
    Loss {
        /// Probability.
        p: f64,
        /// The link's own stream.
        rng: Box<ChaCha8Rng>,
    },
    /// Lose every n-th RoCE frame.
    DropEvery {
        /// Period.
        every: u64,
        /// Frames seen.
        count: u64,
    },
    /// Bad FCS with probability `p`.
    Corrupt {
        /// Probability.
        p: f64,
        /// The link's own stream.
        rng: Box<ChaCha8Rng>,
    },
    /// Bad FCS on every n-th frame.
    CorruptEvery {
        /// Period.
        every: u64,
        /// Frames seen.
        count: u64,
    },
    /// The receiving port drops frames above this many wire bytes.
    Mtu {
        /// Largest frame (IP MTU plus Ethernet header and FCS).
        max_wire: u32,
    },
}

/// What the wrappers did to a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// It goes on.
    Pass,
    /// Lost on the wire.
    Lost,
    /// Arrives with a bad FCS.
    Corrupt,
    /// Larger than the receiver's MTU.
    Oversize,
    /// The link is down.
    Down,
}

impl Impairments {
    /// Judge one frame of `wire` bytes about to be serialised.
    pub fn judge(&mut self, wire: u32) -> Verdict {
        if self.down {
            return Verdict::Down;
        }
        for (_, r) in &mut self.rules {
            let v = match r {
                Rule::Loss { p, rng } => rng.gen::<f64>() < *p,
                Rule::DropEvery { every, count } => {
                    *count += 1;
                    *count % *every == 0
                }
                Rule::Corrupt { p, rng } => {
                    if rng.gen::<f64>() < *p {
                        return Verdict::Corrupt;
                    }
                    false
                }
                Rule::CorruptEvery { every, count } => {
                    *count += 1;
                    if *count % *every == 0 {
                        return Verdict::Corrupt;
                    }
                    false
                }
                Rule::Mtu { max_wire } => {
                    if wire > *max_wire {
                        return Verdict::Oversize;
                    }
                    false
                }
            };
            if v {
                return Verdict::Lost;
            }
        }
        Verdict::Pass
    }

    /// Nothing left to do: the port can drop the wrapper.
    pub(super) fn is_empty(&self) -> bool {
        !self.down && self.rules.is_empty()
    }
}

/// A state change at a given time.
#[derive(Debug, Clone)]
pub(crate) enum Action {
    /// Install wrapper rule `rule` (of fault `id`) on port `port`.
    WireOn {
        /// Global port id.
        port: u32,
        /// Fault index.
        id: u32,
        /// The rule.
        rule: Rule,
    },
    /// Remove fault `id`'s rule from port `port`.
    WireOff {
        /// Global port id.
        port: u32,
        /// Fault index.
        id: u32,
    },
    /// The link between ports `a` and `b` goes down.
    LinkDown {
        /// One direction.
        a: u32,
        /// The other.
        b: u32,
        /// Link id.
        link: u32,
        /// Routing convergence delay.
        convergence: Duration,
    },
    /// The link comes back.
    LinkUp {
        /// One direction.
        a: u32,
        /// The other.
        b: u32,
        /// Link id.
        link: u32,
        /// Routing convergence delay.
        convergence: Duration,
    },
    /// Switches adopt routes computed without the down links.
    Reroute,
    /// Host `host` drains at `rate` (`None`: stalled, PAUSE asserted).
    Receiver {
        /// Host index.
        host: u32,
        /// New drain rate.
        rate: Option<Rate>,
    },
    /// `static-route` entry `entry` of the world's list comes into force
    /// (`on`) or leaves it.
    StaticRoute {
        /// Index into `World::static_routes`.
        entry: u32,
        /// In force from now on.
        on: bool,
    },
    /// Host `host`'s receive path returns to its configuration.
    ReceiverRestore {
        /// Host index.
        host: u32,
    },
    /// Switch `sw` (port `port`, or the whole switch) takes the fabric
    /// settings of override entry `entry` (`NONE`: its settings without
    /// windows).
    Fabric {
        /// Switch index.
        sw: u32,
        /// Port, or `None`.
        port: Option<u16>,
        /// Entry of `SimConfig::overrides`.
        entry: u32,
    },
    /// Host `host` takes the NIC receive settings of entry `entry`
    /// (`NONE`: its settings without windows).
    Nic {
        /// Host index.
        host: u32,
        /// Entry of `SimConfig::overrides`.
        entry: u32,
    },
}
