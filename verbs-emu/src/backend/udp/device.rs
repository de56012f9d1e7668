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
use super::memory::HostMemory;
use super::state::{lock, os, Shared, State, UdpStats};
use crate::backend::counters::TransportTotals;
use crate::backend::io::{DatagramIo, IoStats, SocketIo};
use crate::backend::sys::{RoceSocket, RxBatch, TxBatch};
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
                pds: BTreeMap::new(),
                cqs: BTreeMap::new(),
                qps: BTreeMap::new(),
                ahs: BTreeMap::new(),
                next_handle: 1,
                next_qpn: 0x11,
                tx: TxBatch::with_capacity(1 << 17),
                acks: Vec::new(),
                acks_held_until: None,
                rx: RxBatch::new(if slot > 16384 { 8 } else { 32 }, slot),
                icrc: Ipv4IcrcCheck::new(),
                stats: UdpStats::default(),
                events: VecDeque::new(),
                fed: Instant::ZERO,
                retired: TransportTotals::default(),
            }),
            socket,
            local,
            start: std::time::Instant::now(),
            stop: AtomicBool::new(false),
            app_touch_ns: AtomicU64::new(0),
            app_waiting: AtomicU64::new(0),
            next_deadline_ns: AtomicU64::new(u64::MAX),
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

    pub(super) fn touch(&self) {
        self.shared
            .app_touch_ns
            .store(self.shared.now_ns().max(1), Ordering::Relaxed);
    }

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
