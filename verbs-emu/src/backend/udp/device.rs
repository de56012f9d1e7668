//! [`UdpBackend`]: one opened UDP device. Opening binds the socket,
//! builds the device state and starts the background thread; dropping
//! stops the thread, flushes the deferred ACKs and releases the memory
//! pins. The device's own counters and per-QP engine statistics are read
//! here; the verbs are in `verbs`.
//!
//! Contract: a device that opened has its socket bound and its background
//! thread running until it is dropped.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::background::background;
use super::config::UdpConfig;
use super::dm::DevMemory;
use super::memory::HostMemory;
use super::state::{lock, os, Shared, State, UdpStats, QPN_FIRST};
use crate::backend::counters::TransportTotals;
use crate::backend::io::{DatagramIo, IoStats, SocketIo};
use crate::backend::sys::{RoceSocket, RxBatch, TxBatch, Wakeup};
use crate::backend::QpHandle;
use crate::verbs::{Mtu, Result};
use roce::time::Instant;
use roce::transport as tp;
use roce::wire::icrc::Ipv4IcrcCheck;

/// Largest RoCEv2 datagram: 4096-byte payload plus headers and ICRC.
const MAX_PACKET: usize = 4096 + 12 + 28 + 4 + 4 + 16;

/// An opened UDP device. See the module docs.
pub struct UdpBackend {
    pub(super) shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl UdpBackend {
    /// Open a device with the plain socket as its datagram path.
    pub fn open(cfg: UdpConfig) -> Result<UdpBackend> {
        Self::open_with(cfg, |io| Ok(Box::new(io)))
    }

    /// Open a device whose datagram path is the socket wrapped by `wrap`
    /// (fault injection, capture: composition).
    pub fn open_with(
        cfg: UdpConfig,
        wrap: impl FnOnce(SocketIo) -> io::Result<Box<dyn DatagramIo>>,
    ) -> Result<UdpBackend> {
        let socket = Arc::new(RoceSocket::bind(cfg.bind, &cfg.socket).map_err(|e| os("bind", e))?);
        let local = socket.local_addr();
        let io = wrap(SocketIo::new(socket.clone())).map_err(|e| os("open", e))?;
        let slot = if socket.gro() {
            65536
        } else {
            MAX_PACKET.next_power_of_two()
        };
        let active_mtu = Mtu::for_link_mtu(cfg.link_mtu);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                io,
                mem: HostMemory::default(),
                dm: DevMemory::default(),
                pds: BTreeMap::new(),
                cqs: BTreeMap::new(),
                qps: BTreeMap::new(),
                ahs: BTreeMap::new(),
                next_handle: 1,
                next_qpn: QPN_FIRST,
                tx: TxBatch::with_capacity(1 << 17),
                acks: Vec::new(),
                deferred_until: None,
                posts_held: 0,
                acks_held_until: None,
                rx: RxBatch::new(if slot > 16384 { 8 } else { 32 }, slot),
                icrc: if cfg.strict_icrc {
                    Ipv4IcrcCheck::strict()
                } else {
                    Ipv4IcrcCheck::new()
                },
                stats: UdpStats::default(),
                events: VecDeque::new(),
                fed: Instant::ZERO,
                retired: TransportTotals::default(),
            }),
            socket,
            local,
            start: std::time::Instant::now(),
            stop: AtomicBool::new(false),
            app_polled_ns: AtomicU64::new(0),
            app_waiting: AtomicU64::new(0),
            next_deadline_ns: AtomicU64::new(u64::MAX),
            background_blocked_until_ns: AtomicU64::new(0),
            wakeup: Wakeup::new().map_err(|e| os("eventfd", e))?,
            cfg,
            active_mtu,
        });
        let bg = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("rocelab-{}", local))
            .spawn(move || background(&bg))
            .map_err(|e| os("spawn", e))?;
        Ok(UdpBackend {
            shared,
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddrV4 {
        self.shared.local
    }

    /// Device counters.
    pub fn stats(&self) -> UdpStats {
        lock(&self.shared.state).stats
    }

    /// Datagram path counters (faults, drops).
    pub fn io_stats(&self) -> IoStats {
        lock(&self.shared.state).io.stats()
    }

    /// Engine counters of one QP.
    pub fn qp_stats(&self, qp: QpHandle) -> Option<tp::QpStats> {
        lock(&self.shared.state)
            .qps
            .get(&(qp.0 as u32))
            .map(|e| *e.engine.stats())
    }

    /// A verb call. It keeps the background thread from nothing: only the
    /// progress rounds an application thread runs (polls and waits) do,
    /// as they stamp `app_polled_ns` (see
    /// [`Shared::progress`](super::state::Shared)), so that a thread that
    /// posts and then watches memory has its packets moved as they arrive.
    pub(super) fn touch(&self) {}

    pub(super) fn handle(st: &mut State) -> u64 {
        let h = st.next_handle;
        st.next_handle += 1;
        h
    }
}

impl Drop for UdpBackend {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let mut st = lock(&self.shared.state);
        // As in destroy_qp: the deferred ACKs leave before the socket goes.
        self.shared.flush_deferred(&mut st);
        st.mem.release_all();
    }
}

#[cfg(test)]
mod tests {
    use super::super::state::{free_qpn, QPN_LAST};
    use super::*;
    use crate::backend::Backend;
    use crate::verbs::{QpCap, QpInitAttr, QpType};
    use std::net::Ipv4Addr;

    fn device(net: u8) -> UdpBackend {
        UdpBackend::open(UdpConfig::new(SocketAddrV4::new(
            Ipv4Addr::new(127, net, 0, 1),
            0,
        )))
        .unwrap()
    }

    fn init(cq: crate::backend::CqHandle) -> QpInitAttr {
        QpInitAttr {
            qp_type: QpType::Rc,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap::default(),
            sq_sig_all: false,
            cc: None,
            min_time_between_cnps: None,
        }
    }

    /// QPNs wrap after the last one back to the first that is free: a
    /// live QP keeps its number (and its engine), never replaced by a new
    /// one, and the reserved QPNs 0 and 1 are never handed out.
    #[test]
    fn qpn_wrap_skips_live_qps() {
        let dev = device(216);
        let pd = dev.alloc_pd().unwrap();
        let cq = dev.create_cq(16).unwrap();
        let first = dev.create_qp(pd, &init(cq)).unwrap();
        let second = dev.create_qp(pd, &init(cq)).unwrap();
        dev.destroy_qp(second.handle).unwrap();
        assert_eq!(first.qpn.value(), 0x11);
        lock(&dev.shared.state).next_qpn = QPN_LAST;
        let last = dev.create_qp(pd, &init(cq)).unwrap();
        let wrapped = dev.create_qp(pd, &init(cq)).unwrap();
        assert_eq!(last.qpn.value(), QPN_LAST);
        // 0x11 is live; 0x12 was freed.
        assert_eq!(wrapped.qpn.value(), 0x12);
        let st = lock(&dev.shared.state);
        let live: Vec<u32> = st.qps.keys().copied().collect();
        assert_eq!(live, [0x11, 0x12, QPN_LAST]);
        assert_eq!(st.qps[&0x11].engine.qpn().value(), 0x11);
    }

    /// With every QPN from `next_qpn` on in use and the rest too, creation
    /// fails: it never replaces a QP.
    #[test]
    fn qpn_allocation_never_replaces_when_the_space_is_full() {
        let mut next = 0x1234;
        assert_eq!(free_qpn(&mut next, |_| true), None);
        assert_eq!(next, 0x1234, "nothing handed out");
        // One free QPN below the start: found after wrapping.
        assert_eq!(free_qpn(&mut next, |q| q != 0x20), Some(0x20));
        assert_eq!(next, 0x21);
        // Never 0 or 1, whatever `next` says.
        let mut next = 0;
        assert_eq!(free_qpn(&mut next, |_| false), Some(QPN_FIRST));
    }
}
