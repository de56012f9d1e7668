//! The transmit path of a UDP device: drain every engine's packets into
//! one batch, grouping equal-sized packets to one destination into GSO
//! runs, with each packet's payload taken straight from registered memory
//! (or gathered, for wrappers that read bytes), and send the batch; ACKs
//! go last, and in [`super::BackgroundMode::Interrupt`] a round of lone
//! ACKs may be held for up to [`ACK_HOLD`].
//!
//! Contract: every packet is emitted with the ICRC over the IPv4 and UDP
//! headers the kernel will write for it (identification = its position in
//! the GSO run, DF); a packet whose payload cannot be read is counted
//! (`tx_errors`) and dropped. The batch is sent before the device lock is
//! released, so the payload's regions stay registered meanwhile.

use std::net::SocketAddrV4;

use super::config::ACK_HOLD;
use super::memory::HostMemory;
use super::state::{decode_addr, Shared, State, UdpStats};
use crate::backend::sys::{self, TxBatch};
use roce::time::Instant;
use roce::transport::{self as tp, AccessFlags};
use roce::wire::icrc::{IpEncap, UdpEncap};
use roce::wire::roce::{emit_udp_payload, PayloadSource};
use roce::wire::Opcode;

/// GSO runs are kept under this many bytes.
const MAX_RUN_BYTES: usize = sys::MAX_DATAGRAM;

impl Shared {
    /// Drain every engine's transmits into one batch, grouping runs of
    /// equal-sized packets to the same destination into GSO datagrams, and
    /// send it.
    ///
    /// ACKs go last, each its own datagram or in runs of ACKs: the peer
    /// gets the data first and the ACK's cost overlaps with the wait.
    /// (Closing a request's run with the ACK as its shorter last segment
    /// saves a datagram but measured slower on loopback: the data then
    /// waits for the whole run.)
    pub(super) fn transmit(&self, st: &mut State, now: Instant) {
        self.transmit_holding(st, now, false)
    }

    /// [`transmit`](Self::transmit); with `hold`, a round that has nothing
    /// but ACKs to send keeps them for up to [`ACK_HOLD`], so that they
    /// leave with the application's next request (see
    /// [`background`](super::background::background)). Any other round
    /// sends the held ones too.
    pub(super) fn transmit_holding(&self, st: &mut State, now: Instant, hold: bool) {
        st.fed = st.fed.max(now);
        // Every engine is drained below: nothing deferred is left.
        st.deferred_until = None;
        st.posts_held = 0;
        let State {
            io,
            qps,
            mem,
            tx,
            acks,
            acks_held_until,
            stats,
            ..
        } = st;
        tx.clear();
        let mut runs = RunBuilder {
            run: None,
            gso: io.gso(),
            // Payload straight from registered memory (the kernel copies it
            // once), or gathered into the batch for wrappers that read bytes.
            pieces: io.pieces(),
            local: self.local,
        };
        if acks_held_until.is_none() {
            acks.clear();
        }
        // One slot the engines write each packet into (a packet description
        // is ~300 bytes; returning it by value copied it twice more).
        let mut t = tp::Transmit::EMPTY;
        for e in qps.values_mut() {
            while e
                .engine
                .poll_transmit_into(now, &mem.view(Some(e.pd)), &mut t)
            {
                if t.headers.bth.opcode == Opcode::RcAcknowledge {
                    acks.push((t, e.tclass_dscp));
                } else {
                    runs.add(tx, mem, stats, &t, e.tclass_dscp, false);
                }
            }
        }
        if hold && tx.is_empty() && runs.run.is_none() && !acks.is_empty() {
            let until = *acks_held_until.get_or_insert(now + ACK_HOLD);
            if now < until {
                return;
            }
        }
        *acks_held_until = None;
        for (t, dscp) in acks.iter() {
            runs.add(tx, mem, stats, t, *dscp, true);
        }
        runs.close(tx, stats);
        if !tx.is_empty() {
            let _ = io.send(tx);
        }
    }
}

/// The GSO run being built: packets to one destination with one TOS, all
/// `seg` bytes but a shorter last one.
#[derive(Debug, Clone, Copy)]
struct Run {
    dst: SocketAddrV4,
    tos: u8,
    /// Size of every segment but the last.
    seg: usize,
    /// Where the run starts: a byte offset, or a piece index.
    first: usize,
    count: usize,
    bytes: usize,
    /// Closed by a shorter last packet.
    short: bool,
}

/// Groups the packets of one transmit into datagrams and emits them into
/// the batch (see [`Shared::transmit`]).
struct RunBuilder {
    run: Option<Run>,
    gso: bool,
    pieces: bool,
    local: SocketAddrV4,
}

impl RunBuilder {
    /// Queue the open run as one datagram.
    fn close(&mut self, tx: &mut TxBatch, stats: &mut UdpStats) {
        if let Some(r) = self.run.take() {
            let seg = if r.count > 1 { r.seg } else { 0 };
            if self.pieces {
                tx.push_pieces(r.dst, r.tos, seg, r.first, r.bytes);
            } else {
                tx.push_range(r.dst, r.tos, seg, r.first, r.bytes);
            }
            if r.count > 1 {
                stats.tx_gso_runs += 1;
            }
        }
    }

    /// Emit `t` onto the open run or a new one. A packet smaller than the
    /// segments before it ends the run (a LAST after MIDDLE packets), but
    /// one smaller than a lone first packet starts a new run: its
    /// equal-sized successors (MIDDLE packets after a FIRST) could not
    /// follow it in this one. An ACK (`ack`: they come after every
    /// request of the round) may end a lone packet's run: the reply a
    /// latency test's peer waits for then arrives in one datagram with the
    /// ACK it waits for, instead of in two a receive may split.
    fn add(
        &mut self,
        tx: &mut TxBatch,
        mem: &HostMemory,
        stats: &mut UdpStats,
        t: &tp::Transmit,
        dscp: u8,
        ack: bool,
    ) {
        let dst = decode_addr(t.dest);
        let tos = dscp | t.ecn.bits();
        let mut headers = t.headers;
        let plen = t.payload.len() as usize;
        headers.bth.pad_count = ((4 - plen % 4) % 4) as u8;
        let len = headers.header_len() + plen + usize::from(headers.bth.pad_count) + 4;
        let joins = self.gso
            && self.run.is_some_and(|r| {
                r.dst == dst
                    && r.tos == tos
                    && !r.short
                    && r.count < sys::MAX_GSO_SEGMENTS
                    && r.bytes + len <= MAX_RUN_BYTES
                    && (len == r.seg || (len < r.seg && (r.count > 1 || ack)))
                    && (!self.pieces
                        || tx.pieces_len() - r.first + 2 + t.payload.pieces().len() <= sys::MAX_IOV)
            });
        if !joins {
            self.close(tx, stats);
        }
        let id = if joins {
            self.run.map_or(0, |r| r.count as u16)
        } else {
            0
        };
        let enc = UdpEncap {
            ip: IpEncap::V4 {
                src: *self.local.ip(),
                dst: *dst.ip(),
                identification: id,
                dont_fragment: true,
            },
            src_port: self.local.port(),
            dst_port: dst.port(),
        };
        let mark = tx.bytes_len();
        let hlen = headers.header_len();
        let off = if self.pieces {
            let pmark = tx.pieces_len();
            // SAFETY: the located ranges lie in live registered regions (or
            // a QP's inline buffer), which cannot be deregistered while the
            // device lock is held, and the batch is sent before the lock is
            // released.
            match unsafe { emit_pieces(tx, mem, &headers, &t.payload, &enc) } {
                Some(()) => pmark,
                None => {
                    tx.truncate(mark);
                    tx.truncate_pieces(pmark);
                    stats.tx_errors += 1;
                    return;
                }
            }
        } else {
            let (off, buf) = tx.append(len);
            if t.payload
                .gather(&mem.view(None), &mut buf[hlen..hlen + plen])
                .is_err()
                || emit_udp_payload(&headers, PayloadSource::InPlace(plen), &enc, buf).is_err()
            {
                tx.truncate(mark);
                stats.tx_errors += 1;
                return;
            }
            off
        };
        stats.tx_packets += 1;
        match &mut self.run {
            Some(r) if joins => {
                r.count += 1;
                r.bytes += len;
                r.short = len < r.seg;
            }
            _ => {
                self.run = Some(Run {
                    dst,
                    tos,
                    seg: len,
                    first: off,
                    count: 1,
                    bytes: len,
                    short: false,
                })
            }
        }
    }
}

/// Queue one packet as pieces of `tx`: its headers, its payload where it
/// lies in registered memory, and the pad and ICRC. `None` (with pieces
/// and bytes possibly added, for the caller to drop) when a payload range
/// is not in registered memory or the headers do not emit.
///
/// # Safety
///
/// The payload's regions must stay registered until `tx` is sent.
unsafe fn emit_pieces(
    tx: &mut TxBatch,
    mem: &HostMemory,
    headers: &roce::wire::RoceHeaders,
    payload: &tp::PayloadDesc,
    enc: &UdpEncap,
) -> Option<()> {
    let hlen = headers.header_len();
    let plen = payload.len() as usize;
    let pad = usize::from(headers.bth.pad_count);
    let (hoff, hbuf) = tx.append(hlen);
    headers.emit(hbuf).ok()?;
    tx.push_buf_piece(hoff, hlen);
    let mut parts: [&[u8]; tp::MAX_PIECES + 1] = [&[]; tp::MAX_PIECES + 1];
    for (slot, p) in parts.iter_mut().zip(payload.pieces()) {
        let ptr = mem
            .locate(
                payload.key_of(p),
                p.addr,
                u64::from(p.len),
                AccessFlags::EMPTY,
                None,
            )
            .ok()?;
        // SAFETY: `locate` bounds-checked the range inside a live region,
        // which the caller keeps registered until the batch is sent.
        *slot = unsafe { std::slice::from_raw_parts(ptr, p.len as usize) };
        // SAFETY: as above.
        unsafe { tx.push_ext_piece(ptr, p.len as usize) };
    }
    const ZEROS: [u8; 3] = [0; 3];
    let n = payload.pieces().len();
    parts[n] = &ZEROS[..pad.min(3)];
    let crc = roce::wire::icrc::Icrc::for_udp_payload_parts(
        enc,
        hlen + plen + pad,
        tx.appended(hoff, hlen),
        parts[..=n].iter().copied(),
    )
    .ok()?;
    let (toff, tbuf) = tx.append(pad + 4);
    tbuf[..pad].fill(0);
    tbuf[pad..].copy_from_slice(&crc.to_le_bytes());
    tx.push_buf_piece(toff, pad + 4);
    Some(())
}
