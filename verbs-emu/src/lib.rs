//! RoCEv2 in userspace: the wire format, a sans-IO RC transport engine,
//! congestion control, and a verbs API over UDP or real RDMA hardware.
//!
//! Layers, bottom up (see the architecture map):
//!
//! * [`time`]: integer picosecond time, rates and sizes used everywhere.
//! * [`wire`]: zero-copy packet views and `Repr`s for every RoCEv2 header,
//!   ICRC, PFC frames and pcap files.
//! * [`transport`]: the sans-IO RC/UC/UD engine (requester, responder,
//!   completer, timers, QP state machine).
//! * [`cc`]: congestion control (DCQCN reaction and notification points).
//! * [`verbs`], [`backend`], [`perftest`]: the user API, its backends and
//!   perftest-compatible tools.
//!
//! Nothing under `wire`, `transport` or `cc` reads a clock, opens a socket,
//! spawns a thread or takes OS entropy.

#[macro_use]
mod value_enum;
#[macro_use]
mod flags;

pub mod backend;
pub mod bench;
pub mod cc;
pub mod perftest;
pub mod time;
pub mod transport;
pub mod verbs;
pub mod wire;
