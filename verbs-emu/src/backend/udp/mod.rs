//! The UDP backend: RoCEv2 over a UDP socket, driven by the sans-IO
//! transport engine ([`roce::transport::Qp`]).
//!
//! Each opened device owns one socket bound to its own address (any of
//! 127.0.0.0/8, or an interface address) on UDP 4791 or another port, one
//! [`HostMemory`] with the registered regions, one engine per QP, and its
//! CQs. Everything lives under one lock; progress is made by whoever holds
//! it:
//!
//! * `post_send` queues work and sends what the engine produces at once,
//!   from the caller's thread, when the QP's send queue was empty; behind
//!   work in flight, posts of one-packet messages wait for the next poll (at most
//!   [`POST_HOLD`], or until 64 are held) and leave together, as a
//!   NIC batches doorbells;
//! * `poll_cq` and `wait_cq` receive, run due timers, transmit and collect
//!   completions when the CQ is empty (busy polling needs no other thread);
//! * a background thread per device does the same when the application has
//!   not polled for 50 µs and no thread of it waits in `wait_cq` (a server
//!   waiting on TCP, a program sleeping or watching memory after a post:
//!   posts only transmit), so that
//!   retransmissions and responses never stall. Between packets it spins
//!   while traffic is sparse (requests answered without a wake-up) and
//!   sleeps in poll(2) while a stream flows (see `background`). That is
//!   [`BackgroundMode::Adaptive`], for applications that call in while
//!   they wait. With [`BackgroundMode::Interrupt`] (the drop-in
//!   libibverbs, whose C programs may wait by watching memory) it instead
//!   moves every packet as it arrives once the application stops
//!   polling, like a NIC's receive interrupt: it blocks in ppoll(2) on the
//!   socket and the engines' next deadline, and spins between sparse
//!   packets only while the application's threads are off the CPU; ACKs
//!   with nothing to go with wait up to [`ACK_HOLD`] for the application's
//!   next request, and then leave from the background thread.
//!
//! Time fed to the engine is the time since the device was opened, in
//! picoseconds.
//!
//! The wire: every packet is emitted by [`roce::wire::roce`] with the ICRC
//! computed over the IPv4 and UDP headers the kernel writes for this socket
//! (DF, identification 0, or 0, 1, 2, ... within a GSO run; see
//! [`super::sys`]). Multi-packet messages go out as GSO runs: a FIRST packet
//! (larger, with its RETH) alone, then the equal-sized MIDDLE packets and
//! the LAST one in one `sendmmsg` entry (runs up to the largest UDP
//! datagram). On the plain socket each packet is handed to the kernel as
//! iovecs: its headers and its pad and ICRC from the batch, its payload
//! straight from the registered region, so the payload is copied once (by
//! the kernel) instead of twice; wrappers that read the bytes (faults,
//! capture) get them gathered into one buffer. On receive, GRO runs are split
//! again and each packet's ICRC is checked against the header its sender's
//! kernel wrote if nothing on the path re-segmented (identification = its
//! position in the GRO run, DF): one CRC pass. On a mismatch the IPv4
//! identification and DF that fit are solved for and, if plausible,
//! accepted and counted (`rx_icrc_id_solved`; [`Ipv4IcrcCheck`] has the
//! rules and the chance that a corrupted packet passes), so a qdisc that
//! splits GSO runs, a sender without GSO, GRO merging differently or a
//! sender numbering otherwise cost no valid packet. Anything else is
//! counted (`rx_icrc_encapsulated`) and dropped, as a NIC does.
//!
//! How far the ICRC is proven: single datagrams (identification 0, DF) are
//! checked against the kernel's real IPv4 header in an AF_PACKET capture on
//! loopback, and tshark decodes them. GSO runs rely on Linux numbering the
//! segments' identification 0, 1, 2, ... (ROCEV2.md §8); loopback never
//! cuts a run on the wire, but a receiver without `UDP_GRO` gets the
//! kernel's segments one by one, each with its own identification, which
//! the receive path solves for (an integration test). Turn GSO off
//! ([`SocketOptions::gso`]) where exact wire behaviour matters more than
//! speed. ECN bits received (`IP_RECVTOS`) go to the
//! engine, which answers CE with CNPs; transmitted packets carry the ECN
//! codepoint the engine asks for (ECT(0)).
//!
//! Congestion control ([`UdpConfig::set_cc`], or per QP
//! [`QpInitAttr::cc`]): every QP answers CE with at most one CNP per
//! [`UdpConfig::min_time_between_cnps`]; with DCQCN, a QP whose rate was
//! cut below the line rate has its data held to that rate by the engine's
//! token bucket ([`roce::cc::Pacer`], [`UdpConfig::pacing_burst`] deep,
//! making up for late rounds by up to [`PACING_CATCH_UP`]). A progress
//! round sends what the tokens allow, several packets and GSO runs, and a
//! wait for the next tokens is a real sub-millisecond wait (ppoll with a
//! nanosecond timeout, spun below 100 µs).
//!
//! Files, bottom up (none imports one above it):
//!
//! * `config`, `netdev`: the configuration and what the host says about
//!   its interfaces;
//! * `memory`: registered regions as the engine sees them; `dm`: the
//!   device's own memory (`ibv_alloc_dm`), which regions may cover;
//!   `odp`: resolving the pages of an on-demand-paging region's access
//!   first, so that an unmapped page fails the access, not the process;
//! * `state`: what the device lock guards and what its threads share;
//! * `work`: verbs <-> engine translations;
//! * `rx`, `tx`, `completion`: the receive path, the transmit path with
//!   GSO batching and ACK holding, completions and async events;
//! * `progress`: rounds of receive, timers, transmit and collect, and the
//!   waits between them;
//! * `background`: the background thread and its modes;
//! * `device`: [`UdpBackend`], open and close;
//! * `verbs`: the [`Backend`](crate::backend::Backend) implementation;
//! * `provider`: [`UdpProvider`], the device list.
//!
//! [`Ipv4IcrcCheck`]: roce::wire::icrc::Ipv4IcrcCheck
//! [`SocketOptions::gso`]: super::sys::SocketOptions::gso
//! [`QpInitAttr::cc`]: crate::verbs::QpInitAttr::cc

mod background;
mod completion;
mod config;
mod device;
mod dm;
mod memory;
mod netdev;
mod odp;
mod progress;
mod provider;
mod rx;
mod state;
mod tx;
mod verbs;
mod work;

pub use config::{
    BackgroundMode, UdpConfig, ACK_HOLD, DEFAULT_LINK_RATE, PACING_BURST, PACING_CATCH_UP,
    POST_HOLD,
};
pub use device::UdpBackend;
pub use dm::{DM_SIZE, GRANULE};
pub use memory::HostMemory;
pub use netdev::{
    device_name_for, interface_device_name, interfaces, link_mtu_of, link_rate_of, node_guid_for,
    LOOPBACK_DEVICE, LOOPBACK_DEVICE_ALIAS,
};
pub use provider::UdpProvider;
pub use state::UdpStats;
