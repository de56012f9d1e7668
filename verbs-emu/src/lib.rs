//! RDMA verbs in userspace: a verbs API modelled on rdma-core over the
//! sans-IO RoCEv2 core ([`roce`]), with two backends (RoCEv2 over UDP,
//! real RDMA hardware through libibverbs) and perftest-compatible tools.
//!
//! * [`verbs`]: the user API (Context, PD, MR, CQ, QP, builders, states).
//! * [`backend`]: the `Backend` trait, the UDP backend (which drives the
//!   core's engine over a socket in real time) and the hardware backend.
//! * [`perftest`]: `ib_*_bw` / `ib_*_lat` compatible tools over any backend.
//! * [`sysfs`]: the devices' sysfs view and the mount namespace that shows it.
//!
//! The core's modules ([`time`], [`wire`], [`transport`], [`cc`]) are
//! re-exported so that a program written against the verbs API needs one
//! crate; they are the core's own types, not copies.

pub mod backend;
pub mod bench;
pub mod perftest;
pub mod sysfs;
pub mod verbs;

pub use roce::{cc, time, transport, wire};
