//! A UDP device's configuration: [`UdpConfig`] (what [`super::UdpBackend`]
//! opens with), [`BackgroundMode`] (how its background thread waits) and
//! the defaults and time constants they start from.
//!
//! Contract: plain data and its defaults. [`UdpConfig::new`] reads the
//! bound interface's MTU and speed from the host ([`super::netdev`]);
//! nothing here opens a socket or starts a thread.

use std::net::SocketAddrV4;

use super::netdev::{device_name_for, link_mtu_of, link_rate_of};
use crate::backend::sys::SocketOptions;
use roce::time::{Duration as PsDuration, Rate};
use roce::transport as tp;

/// How long the background thread stays out of the way after the
/// application moved packets itself (a poll that ran a progress round):
/// the longest a packet waits when the application stops polling (to
/// watch memory, to sleep) just as it arrives, and the period at which the
/// thread looks while the application keeps polling. A busy-polling
/// application polls every microsecond or so.
pub(super) const APP_ACTIVE_NS: u64 = 50_000;
/// How long a [`BackgroundMode::Interrupt`] device (its `poll_cq` and its
/// background thread) holds an ACK it has nothing else to send with. A
/// program that watches memory for its peer's RDMA WRITE answers it with
/// its own within a few microseconds; the ACK then leaves in the same
/// datagram, and the peer, busy polling for that ACK, finds the WRITE
/// beside it and answers without needing its own background thread
/// (ib_write_lat). A NIC sends the ACK at once; this delays an unanswered
/// one by at most this much while the application keeps calling in.
pub const ACK_HOLD: PsDuration = PsDuration::from_us(10);
/// How long a post of one-packet messages to a QP whose send queue
/// already holds work waits for the application's next call before the
/// background thread sends it (doorbell batching, see `post_send`). A program that posts a window
/// of WRs and then polls has them all leave in one system call (GSO runs
/// of up to 64 packets) instead of one call per post; one that posts and
/// then watches memory has them sent by the background thread at most
/// this much later. A post to an idle QP leaves at once.
pub const POST_HOLD: PsDuration = PsDuration::from_us(10);
/// Posts held (see [`POST_HOLD`]) at which a post sends them all at
/// once: a full GSO run of one-packet messages.
pub(super) const POST_BATCH: usize = 64;
/// The default [`UdpConfig::pacing_burst`]: 10 µs at the QP's rate, a few
/// packets at tens of Gbit/s. Over any 1 ms the rate is then kept within
/// 1 % plus a packet while the host gives the emulation its rounds.
pub const PACING_BURST: PsDuration = PsDuration::from_us(10);
/// How much of a late progress round is made up for while a QP waits on
/// its pacer ([`roce::cc::Pacer::with_catch_up`]): a busy host preempts
/// the sending thread for up to a scheduler time slice, and a NIC's pacer
/// would have gone on sending meanwhile.
pub const PACING_CATCH_UP: PsDuration = PsDuration::from_ms(1);

/// How a UDP device is set up.
#[derive(Debug, Clone)]
pub struct UdpConfig {
    /// The device name (e.g. `rocelab0`, `udp_eth0`).
    pub name: String,
    /// Address and port to bind.
    pub bind: SocketAddrV4,
    /// Socket options (GSO, GRO, buffers).
    pub socket: SocketOptions,
    /// Spin on the socket in `wait_cq` instead of sleeping in `poll(2)`.
    pub busy_poll: bool,
    /// Accept packets whose ICRC does not match (still counted).
    pub accept_bad_icrc: bool,
    /// Check each received ICRC against the expected IPv4 header only
    /// ([`Ipv4IcrcCheck::strict`]): CRC-32's guarantees for two-bit
    /// errors and short bursts, which the default check's solve for the
    /// identification gives up, at the price of an ICRC error for every
    /// packet a path re-segmented or a sender numbered otherwise.
    ///
    /// [`Ipv4IcrcCheck::strict`]: roce::wire::icrc::Ipv4IcrcCheck::strict
    pub strict_icrc: bool,
    /// Link MTU used to derive the port's active MTU (the largest IB MTU
    /// whose packets fit, as a RoCE NIC derives it from its netdev's MTU).
    /// Default: the bound interface's MTU (`/sys/class/net/IF/mtu`), 65536
    /// on loopback, 1500 where the interface is unknown.
    pub link_mtu: u32,
    /// The link's speed: the line rate DCQCN starts at and never exceeds
    /// ([`UdpConfig::set_cc`]). Default: the bound interface's speed
    /// (`/sys/class/net/IF/speed`), else [`DEFAULT_LINK_RATE`] (loopback
    /// and interfaces that report none).
    pub link_rate: Rate,
    /// Congestion control of every QP's sends (DCQCN reaction point, or
    /// none) unless the QP is created with its own
    /// ([`QpInitAttr::cc`](crate::verbs::QpInitAttr::cc)). The
    /// notification point (CNPs on CE) is always on.
    pub cc: roce::cc::CcConfig,
    /// The notification point's CNP interval for every QP unless created
    /// with its own
    /// ([`QpInitAttr::min_time_between_cnps`](crate::verbs::QpInitAttr::min_time_between_cnps)):
    /// at most one CNP per QP per this time (default ConnectX's,
    /// [`roce::cc::CONNECTX_CNP_INTERVAL`]).
    pub min_time_between_cnps: PsDuration,
    /// Hold QPs to the line rate too, emulating a link of that speed.
    /// Off (the default), a QP at full speed has no rate limiter, as a
    /// ConnectX QP before its first CNP: the interface (the socket) sets
    /// its pace, and DCQCN on an uncongested path costs nothing.
    /// [`UdpConfig::set_cc`] turns it on when the spec names its own
    /// `line_rate`.
    pub pace_at_line_rate: bool,
    /// Depth of each QP's rate limiter ([`roce::cc::Pacer`]) while its
    /// congestion control limits the rate: a progress round sends what the
    /// rate allowed since the last one, up to this much time's worth
    /// (default [`PACING_BURST`]).
    pub pacing_burst: PsDuration,
    /// The port's P_Key table (`ibv_query_pkey`): a QP's `pkey_index`
    /// picks its P_Key, sent in every BTH and matched against every
    /// received one (full and limited membership, ROCEV2.md §1.5).
    /// Default: 0xFFFF at index 0.
    pub pkey_table: [u16; tp::PKEY_TABLE_LEN],
    /// How long the background thread stays out of the way after the
    /// application moved packets itself (a `poll_cq` or `wait_cq` that ran
    /// a progress round; posts do not count), in nanoseconds (default
    /// 50 µs): the longest a packet can wait when the application stops
    /// polling just before it arrives, and the period at which the thread
    /// checks while the application keeps polling.
    pub app_active_ns: u64,
    /// How the background thread waits for packets.
    pub background: BackgroundMode,
}

/// How a device's background thread moves packets the application does
/// not collect itself (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BackgroundMode {
    /// For applications that call in while they wait (`poll_cq`,
    /// `wait_cq`), as rocelab's own tools do: the thread stays out of
    /// their way for `app_active_ns` after each poll, and between packets
    /// it spins while traffic is sparse and sleeps in poll(2) while a
    /// stream flows.
    #[default]
    Adaptive,
    /// For applications that may wait without calling in (C programs
    /// watching memory for a peer's RDMA WRITE): once the application has
    /// not polled for `app_active_ns`, the thread behaves like a NIC's
    /// receive interrupt. It blocks in the kernel on the socket (or until
    /// the next engine timer) and is woken at the packet's arrival. It
    /// spins between sparse packets (as `Adaptive` does) only while the
    /// application's threads use less than half a core, so it takes no
    /// core from a program spinning on memory but answers a server that
    /// blocks (`ib_read_lat`'s) without a wake-up. ACKs it has nothing to
    /// send with wait up to [`ACK_HOLD`] for the application's reply (the
    /// thread sends them when the hold ends), and `poll_cq` holds them
    /// likewise, so that a ping-pong settles into
    /// each side's polling thread moving every packet, one datagram per
    /// hop.
    Interrupt,
}

impl UdpConfig {
    /// Defaults for a device bound to `bind`.
    pub fn new(bind: SocketAddrV4) -> UdpConfig {
        UdpConfig {
            name: device_name_for(*bind.ip()),
            bind,
            socket: SocketOptions::default(),
            busy_poll: false,
            accept_bad_icrc: false,
            strict_icrc: false,
            link_mtu: if bind.ip().is_loopback() {
                65536
            } else {
                link_mtu_of(*bind.ip()).unwrap_or(1500)
            },
            link_rate: link_rate_of(*bind.ip()).unwrap_or(DEFAULT_LINK_RATE),
            cc: roce::cc::CcConfig::None,
            min_time_between_cnps: roce::cc::CONNECTX_CNP_INTERVAL,
            pace_at_line_rate: false,
            pacing_burst: PACING_BURST,
            pkey_table: tp::DEFAULT_PKEY_TABLE,
            app_active_ns: APP_ACTIVE_NS,
            background: BackgroundMode::Adaptive,
        }
    }

    /// Set the congestion control of every QP as `spec` names it: the
    /// reaction point ([`UdpConfig::cc`], DCQCN at [`UdpConfig::link_rate`]
    /// unless the spec sets its own line rate, which the QPs are then held
    /// to as a link of that speed would: [`UdpConfig::pace_at_line_rate`])
    /// and the CNP interval.
    pub fn set_cc(&mut self, spec: &roce::cc::CcSpec) {
        // Swift's window counts packets of the port's RoCE MTU on the wire.
        let frame = tp::Mtu::for_link_mtu(self.link_mtu).bytes() + tp::WIRE_OVERHEAD;
        let (cc, cnp) = spec.resolve(self.link_rate, frame);
        self.cc = cc;
        self.min_time_between_cnps = cnp;
        self.pace_at_line_rate = spec.is_on() && spec.line_rate.is_some();
    }
}

/// The link speed assumed where the interface reports none (loopback):
/// 100 Gbit/s, a common RoCE port.
pub const DEFAULT_LINK_RATE: Rate = Rate::from_gbps(100);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::udp::netdev::{interfaces, link_mtu_of};
    use std::net::Ipv4Addr;

    /// A device bound to an interface's address takes its link MTU from
    /// the interface (a 9000-byte link carries 4096-byte RoCE packets); an
    /// address no interface holds falls back to Ethernet's 1500.
    #[test]
    fn link_mtu_follows_the_bound_interface() {
        for (name, ip) in interfaces().into_iter().filter(|(_, ip)| !ip.is_loopback()) {
            let sys: u32 = std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert_eq!(link_mtu_of(ip), Some(sys), "{name}");
            assert_eq!(UdpConfig::new(SocketAddrV4::new(ip, 0)).link_mtu, sys);
        }
        let nowhere = Ipv4Addr::new(198, 51, 100, 77);
        assert_eq!(link_mtu_of(nowhere), None);
        assert_eq!(UdpConfig::new(SocketAddrV4::new(nowhere, 0)).link_mtu, 1500);
        let lo = UdpConfig::new(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0));
        assert_eq!(lo.link_mtu, 65536);
    }
}
