//! The sans-IO RoCEv2 core: what both of rocelab's worlds run.
//!
//! The simulator's NICs drive this engine in virtual time; the verbs
//! emulation's UDP backend drives it in real time over a socket. Layers,
//! bottom up:
//!
//! * [`time`]: integer picosecond time, rates and sizes used everywhere.
//! * [`wire`]: zero-copy packet views and `Repr`s for every RoCEv2 header,
//!   ICRC, PFC frames and pcap files.
//! * [`transport`]: the sans-IO RC/UC/UD engine (requester, responder,
//!   completer, timers, QP state machine).
//! * [`cc`]: congestion control (DCQCN reaction and notification points,
//!   the pacer).
//!
//! Contract: nothing here reads a clock, opens a socket, spawns a thread,
//! takes OS entropy or touches a file; the crate has no `unsafe` (forbidden
//! below) and no I/O dependency. Inputs are `handle_*(now, ...)`, outputs
//! `poll_transmit(now)`, `poll_timeout()` and `poll_completion()`. The
//! workspace's architecture test keeps it so.

#![forbid(unsafe_code)]

#[macro_use]
mod value_enum;
#[macro_use]
mod flags;

pub mod cc;
pub mod time;
pub mod transport;
pub mod wire;
