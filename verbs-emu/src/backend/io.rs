//! The UDP backend's datagram path as a trait, so that fault injection and
//! capture wrap it (composition, not flags): `Pcap<Faults<Socket>>`.
//!
//! Wrappers see every datagram the backend sends, in order, with its
//! destination, TOS byte and GSO segment size, and every datagram it
//! receives. A wrapper that holds packets back (delay, reorder) reports
//! when it next wants [`DatagramIo::flush`] through
//! [`DatagramIo::poll_timeout`].

use std::io;
use std::net::SocketAddrV4;
use std::sync::Arc;

use super::sys::{RoceSocket, RxBatch, TxBatch};

/// A datagram path: the socket, or a wrapper around one.
pub trait DatagramIo: Send {
    /// The local address packets leave from.
    fn local_addr(&self) -> SocketAddrV4;

    /// Whether GSO runs may be handed to `send`.
    fn gso(&self) -> bool;

    /// Whether `send` takes datagrams queued from pieces
    /// ([`TxBatch::push_pieces`]), whose payload the kernel reads straight
    /// from registered memory. Wrappers that look at the bytes say no (the
    /// default) and get contiguous datagrams.
    fn pieces(&self) -> bool {
        false
    }

    /// Send a batch. Datagrams the network loses are not errors.
    fn send(&mut self, batch: &TxBatch) -> io::Result<()>;

    /// Receive what is ready without blocking; returns the count.
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize>;

    /// When held-back packets are due (`None`: nothing held).
    fn poll_timeout(&self) -> Option<std::time::Instant> {
        None
    }

    /// Send held-back packets that are due at `now`.
    fn flush(&mut self, now: std::time::Instant) -> io::Result<()> {
        let _ = now;
        Ok(())
    }

    /// Counters of what the path did, for diagnostics.
    fn stats(&self) -> IoStats {
        IoStats::default()
    }
}

/// What a datagram path counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IoStats {
    /// Packets sent (GSO segments counted one by one).
    pub tx_packets: u64,
    /// Datagrams the OS refused (unreachable, ...).
    pub tx_dropped: u64,
    /// Packets dropped by fault injection.
    pub fault_dropped: u64,
    /// Packets duplicated by fault injection.
    pub fault_duplicated: u64,
    /// Packets reordered by fault injection.
    pub fault_reordered: u64,
    /// Packets corrupted by fault injection.
    pub fault_corrupted: u64,
    /// Packets delayed by fault injection.
    pub fault_delayed: u64,
    /// Packets marked CE by fault injection.
    pub fault_ce_marked: u64,
}

impl IoStats {
    /// What fault injection did, by counter name (zeros without a
    /// [`FaultInjector`](super::fault::FaultInjector)).
    pub fn fault_counters(&self) -> [(&'static str, u64); 6] {
        [
            ("fault_dropped", self.fault_dropped),
            ("fault_duplicated", self.fault_duplicated),
            ("fault_reordered", self.fault_reordered),
            ("fault_corrupted", self.fault_corrupted),
            ("fault_delayed", self.fault_delayed),
            ("fault_ce_marked", self.fault_ce_marked),
        ]
    }
}

/// The socket itself as a datagram path.
#[derive(Debug)]
pub struct SocketIo {
    socket: Arc<RoceSocket>,
    tx_packets: u64,
    tx_dropped: u64,
}

impl SocketIo {
    /// Wrap a shared socket (the backend keeps another handle to wait for
    /// readability without holding its lock).
    pub fn new(socket: Arc<RoceSocket>) -> SocketIo {
        SocketIo {
            socket,
            tx_packets: 0,
            tx_dropped: 0,
        }
    }
}

impl DatagramIo for SocketIo {
    fn local_addr(&self) -> SocketAddrV4 {
        self.socket.local_addr()
    }

    fn gso(&self) -> bool {
        self.socket.gso()
    }

    fn pieces(&self) -> bool {
        true
    }

    fn send(&mut self, batch: &TxBatch) -> io::Result<()> {
        for (seg, len) in batch.lengths() {
            self.tx_packets += if seg > 0 { len.div_ceil(seg) as u64 } else { 1 };
        }
        self.socket.send(batch, &mut self.tx_dropped).map(drop)
    }

    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        self.socket.recv(batch)
    }

    fn stats(&self) -> IoStats {
        IoStats {
            tx_packets: self.tx_packets,
            tx_dropped: self.tx_dropped,
            ..IoStats::default()
        }
    }
}

/// Iterate the packets of one queued datagram: GSO runs split into their
/// segments.
pub fn segments(bytes: &[u8], segment_size: usize) -> impl Iterator<Item = &[u8]> {
    let step = if segment_size == 0 {
        bytes.len().max(1)
    } else {
        segment_size
    };
    bytes.chunks(step)
}

impl<T: DatagramIo + ?Sized> DatagramIo for Box<T> {
    fn local_addr(&self) -> SocketAddrV4 {
        (**self).local_addr()
    }
    fn gso(&self) -> bool {
        (**self).gso()
    }
    fn pieces(&self) -> bool {
        (**self).pieces()
    }
    fn send(&mut self, batch: &TxBatch) -> io::Result<()> {
        (**self).send(batch)
    }
    fn recv(&mut self, batch: &mut RxBatch) -> io::Result<usize> {
        (**self).recv(batch)
    }
    fn poll_timeout(&self) -> Option<std::time::Instant> {
        (**self).poll_timeout()
    }
    fn flush(&mut self, now: std::time::Instant) -> io::Result<()> {
        (**self).flush(now)
    }
    fn stats(&self) -> IoStats {
        (**self).stats()
    }
}
