//! A drop-in `libibverbs.so.1` over rocelab's RoCEv2-over-UDP emulation.
//!
//! Unmodified C and C++ programs written against rdma-core (perftest, the
//! `ibv_*_pingpong` examples, `ibv_devinfo`) load this library instead of
//! rdma-core's when it comes first on `LD_LIBRARY_PATH` (`rocelab exec`
//! arranges that). Every exported name carries rdma-core's symbol version
//! (`symbols.txt`, bound by `build.rs`), so the dynamic loader accepts
//! binaries built against rdma-core 44 and the providers they link.
//!
//! # How verbs reach the emulation
//!
//! Each opened device is one UDP [`verbs_emu::backend::Backend`]; the C
//! objects (`ibv_context`, `ibv_pd`, `ibv_cq`, `ibv_qp`, ...) are the
//! `verbs.h` structs of [`verbs_emu::backend::ibverbs::ffi`] placed first in
//! our own `#[repr(C)]` records, so a pointer the program holds is also a
//! pointer to our record. The inline verbs of `verbs.h` (`ibv_post_send`,
//! `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq`, `ibv_query_port`,
//! and the memory window verbs `ibv_alloc_mw`, `ibv_bind_mw`,
//! `ibv_dealloc_mw` of `windows`) call through the context's function tables, which point here. Extended
//! verbs that `verbs.h` reaches through `verbs_context` slots find the
//! slots this library fills (`ibv_query_device_ex`: device attributes,
//! `phys_port_cnt_ex` and `odp_caps`; on-demand paging's `ibv_advise_mr`
//! in `odp`; device memory, `ibv_alloc_dm` and its kin, in `dm`;
//! thread and parent domains in `domain`); those left empty fall back as
//! rdma-core's header specifies (to the plain verb, or `EOPNOTSUPP`).
//!
//! # Devices and addresses
//!
//! `ROCELAB_IBV_DEVICES` lists devices as `NAME=IPV4[:PORT]`, comma
//! separated. Unset, there is one device, `rocelab0`, on loopback: each
//! process binds its own address `127.0.H.L` on UDP 4791, chosen from the
//! process id (the next free one on a clash), so that two programs on one
//! host are two distinct RoCEv2 endpoints. Every `ibv_open_device` of a
//! device in one process shares that one backend (address, GID table, QPN
//! space), as a NIC's contexts share its port; each context keeps its own
//! asynchronous event fd, and the backend is freed when the last context
//! (and the last object of one) is gone. The port reports an Ethernet
//! link layer, GID 0 = `::ffff:127.0.H.L` (RoCEv2) and LID `H << 8 | L`,
//! so both peers that exchange GIDs (perftest) and peers that exchange only
//! LIDs (`ibv_rc_pingpong` without `-g`) name an address: an address vector
//! without a GRH goes to the local address with its low 16 bits replaced by
//! the DLID.
//!
//! # Congestion control
//!
//! `ROCELAB_IBV_CC` sets every device's congestion control as `rocelab
//! perftest --cc` and `--cc-param` do: `none` (unset), `dcqcn`,
//! `dcqcn:paper`, `dcqcn:firmware`, `swift` or `timely`, then optional
//! `,KEY=VALUE` parameters with the keys of the algorithm's table in a
//! scenario (`[nic.cc.dcqcn]`, `[nic.cc.swift]`, `[nic.cc.timely]`;
//! `min_time_between_cnps` is the CNP interval) and `line_rate`, e.g.
//! `ROCELAB_IBV_CC=dcqcn:paper,rate_ai=40Mbps` or
//! `ROCELAB_IBV_CC=swift,queueing=300us`. The algorithm starts at the
//! interface's speed (100 Gbit/s on loopback). The notification point is
//! on either way: CE-marked packets are answered with CNPs, at most one
//! per QP per 4 µs (ConnectX's `min_time_between_cnps`) unless set. A bad
//! value leaves the process without devices and says why on stderr.
//!
//! # ICRC check
//!
//! `ROCELAB_IBV_ICRC=strict` checks every received ICRC against the IPv4
//! header the sender's kernel is expected to write only, with CRC-32's
//! guarantees; `solve` (the default) also accepts a packet whose IPv4
//! identification a re-segmenting path changed, solved for from the ICRC.
//!
//! # Safety contract of the exports
//!
//! Every exported function trusts its pointer arguments as rdma-core does:
//! objects are those this library returned and not yet destroyed, and
//! output pointers point at writable structs of `verbs.h`'s layout. Null
//! object pointers are refused with `EINVAL` rather than dereferenced.
//! Nothing here unwinds into C: errors become the return value and `errno`
//! rdma-core uses, and nothing is printed (a refusal a program expects,
//! such as a limit it probes, is only its errno).
//!
//! # Asynchronous events
//!
//! `ibv_get_async_event` returns what the device raises for the context's
//! objects (CQ overrun, QP fatal, request and access errors, SQ drained;
//! last WQE reached for a QP of an SRQ put in error; SRQ limit reached);
//! the port never changes state, so no port event comes (`events`).

#![allow(clippy::missing_safety_doc)]

mod config;
mod context;
mod cqex;
mod dm;
mod domain;
mod events;
mod misc;
mod mw;
mod objects;
mod odp;
mod post;
mod qpex;
mod records;
mod srq_pool;
#[cfg(test)]
mod tests;
mod windows;

pub use config::{DeviceSpec, DEVICES_ENV};

include!(concat!(env!("OUT_DIR"), "/symver.rs"));

use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

use verbs_emu::verbs::VerbsError;

/// The errno rdma-core reports for a verbs error.
pub fn errno_of(e: &VerbsError) -> c_int {
    match e {
        VerbsError::Os { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        VerbsError::QueueFull { .. } => libc::ENOMEM,
        VerbsError::Busy { .. } => libc::EBUSY,
        VerbsError::NoDevice(_) => libc::ENODEV,
        VerbsError::Unavailable(_) => libc::EOPNOTSUPP,
        VerbsError::Timeout { .. } => libc::ETIMEDOUT,
        _ => libc::EINVAL,
    }
}

/// Set the thread's `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() = e };
}

/// The errno of a refused verb. The library never prints: a program that
/// probes limits (a QP with a growing `max_inline_data` until one fails)
/// expects the refusal, and the errno is the whole answer, as rdma-core's.
pub(crate) fn fail(e: &VerbsError) -> c_int {
    errno_of(e)
}

/// Lock `m`, also after a panic elsewhere poisoned it: the shared state
/// stays consistent between statements, and a C caller has no use for the
/// panic.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
