//! Out-of-order placement and selective repeat (IRN: Mittal et al.,
//! "Revisiting Network Support for RDMA", SIGCOMM 2018), both halves:
//!
//! * the responder's reorder window ([`RecvWindow`]): a request past a gap
//!   whose data can be placed at once is placed and held. A WRITE packet
//!   can be placed when its message's RETH is known: its own (a FIRST or
//!   ONLY), the message in progress at the expected PSN, or a held FIRST.
//!   SEND packets, READ and atomic requests are not held: which receive
//!   WQE a SEND lands in, or what a READ reads, depends on what the gap
//!   holds (IRN adds a receive WQE number to SENDs; RoCE has none). When
//!   the gap fills, held requests run through the in-order checks again,
//!   without placing twice, so that completions, MSNs and ACKs keep
//!   request order, and a request the checks refuse fails exactly as it
//!   would have in order;
//! * the requester's scoreboard ([`Scoreboard`]): which outstanding PSNs
//!   the responder reported held, and which were resent. A PSN below the
//!   highest one reported and not reported itself is lost: it is resent
//!   once, and again only when a packet first sent after that resend is
//!   reported before it (the resend was lost too).
//!
//! Contract: nothing is allocated until a packet arrives out of order or a
//! selective acknowledgement arrives, so a QP that never sees either pays
//! one pointer each. The responder holds at most `reorder_window` slots and
//! the requester tracks at most the PSNs it has outstanding, whatever a
//! hostile peer sends.

use super::window::{Held, Mark, RecvWindow, Scoreboard, WriteCtx};
use super::*;

/// What [`Qp::hold_out_of_order`] did with a request past the gap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hold {
    /// Placed and held until the gap fills.
    Held,
    /// Already held: a duplicate.
    Duplicate,
    /// Not held (beyond the window, not placeable now, or refused by a
    /// check the in-order path will report when it arrives in order).
    Refused,
}

impl Qp {
    /// A request `d` PSNs past the expected one: place and hold it if the
    /// reorder window and its message allow. Every check that can fail
    /// here is also made in order, so a refused request fails there, when
    /// it arrives again in sequence.
    pub(super) fn hold_out_of_order<M: Memory + ?Sized>(
        &mut self,
        pkt: &Received<'_>,
        mem: &mut M,
        d: u32,
    ) -> Hold {
        if d >= self.cfg.reorder_window {
            return Hold::Refused;
        }
        if self.rx_window.as_ref().is_some_and(|w| {
            let k = self.epsn.diff(w.base);
            k >= 0 && w.is_held(d + k as u32)
        }) {
            return Hold::Duplicate;
        }
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        let plen = pkt.payload.len();
        let pmtu = self.pmtu;
        if op_kind(op) != OpKind::Write
            || !self
                .attr
                .qp_access_flags
                .contains(AccessFlags::REMOTE_WRITE)
            || !payload_fits(op, plen, pmtu)
        {
            return Hold::Refused;
        }
        let mut ctx = None;
        let (rkey, va, left) = if op.is_first() || op.is_only() {
            let Some(reth) = h.reth else {
                return Hold::Refused;
            };
            if reth.dma_len as u64 > MAX_MESSAGE {
                return Hold::Refused;
            }
            if op.is_first() {
                ctx = Some(WriteCtx {
                    start: psn,
                    npsn: reth.dma_len.div_ceil(pmtu).max(1),
                    rkey: reth.rkey,
                    va: reth.va,
                    len: reth.dma_len,
                });
            }
            (reth.rkey, reth.va, reth.dma_len)
        } else {
            // The message in progress at the expected PSN, if this packet
            // lies within it (its length is known from its RETH) ...
            let in_progress = match self.in_msg {
                InMsg::Write {
                    rkey,
                    va,
                    remaining,
                    ..
                } => {
                    let off = d as u64 * pmtu as u64;
                    (off < remaining as u64)
                        .then(|| (rkey, va.wrapping_add(off), remaining - off as u32))
                }
                _ => None,
            };
            // ... or a message whose first packet is held.
            let target = in_progress.or_else(|| {
                self.rx_window
                    .as_ref()
                    .and_then(|w| w.write_target(psn, pmtu))
            });
            let Some(t) = target else {
                return Hold::Refused;
            };
            t
        };
        let end = op.is_last() || op.is_only();
        if (end && plen != left) || (!end && plen >= left) {
            return Hold::Refused;
        }
        if self.foreign_window(mem, rkey)
            || (plen > 0 && mem.write(MemKey::Remote(rkey), va, pkt.payload).is_err())
        {
            return Hold::Refused;
        }
        let epsn = self.epsn;
        let w = self
            .rx_window
            .get_or_insert_with(|| Box::new(RecvWindow::new(epsn)));
        w.advance(epsn);
        let i = d as usize;
        if w.slots.len() <= i {
            w.slots.resize(i + 1, None);
        }
        w.slots[i] = Some(Held {
            headers: *h,
            len: plen,
        });
        if let Some(c) = ctx {
            w.writes.push(c);
        }
        Hold::Held
    }

    /// Run the held requests that the last in-order one made next, in
    /// order, until the next gap (or until one fails or must wait), then
    /// acknowledge how far the responder got.
    pub(super) fn drain_held<M: Memory + ?Sized>(&mut self, src: AddressHandle, mem: &mut M) {
        let mut drained = false;
        loop {
            let epsn = self.epsn;
            let Some(w) = self.rx_window.as_mut() else {
                break;
            };
            w.advance(epsn);
            let Some(held) = w.slots.front_mut().and_then(Option::take) else {
                break;
            };
            if !matches!(
                self.state,
                QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
            ) {
                break;
            }
            let pkt = Received {
                headers: held.headers,
                ecn: Ecn::NotEct,
                payload: Payload::Len(held.len),
                grh: None,
                src,
            };
            self.rc_execute(&pkt, mem, true);
            if self.epsn == epsn {
                // Refused or waiting (an RNR NAK): it is sent again.
                break;
            }
            self.stats.ooo_drained += 1;
            drained = true;
        }
        if self.state == QpState::Err {
            self.rx_window = None;
        } else if drained {
            self.push_ack(self.epsn.sub(1));
        }
    }

    /// Queue a selective acknowledgement of the held request at `psn`: a
    /// sequence NAK for the expected PSN whose MSN field names `psn`.
    pub(super) fn push_sack(&mut self, psn: Psn) {
        self.stats.tx_nak_seq += 1;
        self.stats.tx_sacks += 1;
        self.resp_q.push_back(RespItem::Ack {
            psn: self.epsn,
            syndrome: AethSyndrome::Nak(NakCode::PsnSequenceError),
            msn: Msn::new(psn.value()),
        });
    }

    /// A sequence NAK for `p` under selective repeat, reporting `held`
    /// (equal to `p`: nothing held, the responder dropped what followed
    /// the gap and the requester goes back N).
    pub(super) fn on_selective_nak(&mut self, now: Instant, p: Psn, held: Psn) {
        if held == p || !held.is_after(p) || !held.is_before(self.sent_psn) {
            self.sack = None;
            self.retry_or_fail(now);
            return;
        }
        self.stats.rx_sacks += 1;
        self.record_held(held);
        // The first missing PSN: a resend of it that packets first sent
        // after it overtook was lost too.
        let sb = self.scoreboard();
        if let Mark::Resent(frontier) = *sb.mark(p) {
            if !held.is_before(frontier) {
                *sb.mark(p) = Mark::Out;
                if p.is_before(sb.cursor) {
                    sb.cursor = p;
                }
            }
        }
    }

    /// A NAK for a trimmed request at `psn`: lost, to be resent first.
    pub(super) fn on_trim_nak(&mut self, psn: Psn) {
        let comp = self.comp_psn;
        if psn.is_before(comp) || !psn.is_before(self.sent_psn) {
            self.stats.stale_responses += 1;
            return;
        }
        self.stats.rx_trim_naks += 1;
        let sb = self.scoreboard();
        *sb.mark(psn) = Mark::Trimmed;
        sb.raise_high(psn);
        if psn.is_before(sb.cursor) {
            sb.cursor = psn;
        }
    }

    /// A selective acknowledgement whose expected PSN is already
    /// acknowledged (a later acknowledgement overtook it): the PSN it
    /// reports held, if still outstanding, is held.
    pub(super) fn on_stale_sack(&mut self, held: Psn) {
        let comp = self.comp_psn;
        if !held.is_after(comp) || !held.is_before(self.sent_psn) || self.sack.is_none() {
            return;
        }
        self.record_held(held);
    }

    /// The scoreboard, created at the first need, synced to `comp_psn`.
    pub(super) fn scoreboard(&mut self) -> &mut Scoreboard {
        let comp = self.comp_psn;
        let sb = self
            .sack
            .get_or_insert_with(|| Box::new(Scoreboard::new(comp)));
        sb.sync(comp);
        sb
    }

    /// The responder reported the outstanding PSN `held` held: on the
    /// scoreboard and, with multipath, as evidence about its path.
    fn record_held(&mut self, held: Psn) {
        let sb = self.scoreboard();
        *sb.mark(held) = Mark::Sacked;
        sb.raise_high(held);
        let comp = self.comp_psn;
        if let Some(ps) = self.paths.as_deref_mut() {
            ps.sync(comp);
            ps.on_reported(held);
        }
    }

    /// A timeout under selective repeat: every unacknowledged PSN not
    /// reported held is resent once more.
    pub(super) fn selective_timeout(&mut self) {
        let comp = self.comp_psn;
        let sent = self.sent_psn;
        let sb = self.scoreboard();
        if sent.is_after(comp) {
            sb.mark(sent.sub(1));
            sb.raise_high(sent.sub(1));
        }
        for m in sb.marks.iter_mut() {
            if let Mark::Resent(_) = m {
                *m = Mark::Out;
            }
        }
        sb.cursor = comp;
        sb.forced = sent;
    }

    /// The next hole to resend, marking it (and, for a READ, its response
    /// PSNs up to the next one placed) resent: (send queue index, packet
    /// of the WQE, PSN, whether it was trimmed rather than lost, the PSNs
    /// the resend asks for: 1, or a READ's run of missing responses).
    pub(super) fn next_hole(&mut self) -> Option<(usize, u32, Psn, bool, u32)> {
        let comp = self.comp_psn;
        let frontier = self.sent_psn;
        let sb = self.sack.as_mut()?;
        sb.sync(comp);
        let paths = self.paths.as_deref();
        // With multipath, the first hole not yet known lost: the scan
        // starts there again, as later reports may prove it lost.
        let mut pending: Option<Psn> = None;
        while sb.cursor.is_before(sb.high) {
            let q = sb.cursor;
            sb.cursor = q.next();
            let trimmed = match *sb.mark(q) {
                Mark::Out => false,
                Mark::Trimmed => true,
                _ => continue,
            };
            if let (Some(ps), false) = (paths, trimmed) {
                if !q.is_before(sb.forced) && !ps.is_lost(q) {
                    pending.get_or_insert(q);
                    continue;
                }
            }
            let Some(idx) = self.sq.iter().position(|w| w.contains(q)) else {
                continue;
            };
            let w = &self.sq[idx];
            let k = q.distance_from(w.first_psn);
            *sb.mark(q) = Mark::Resent(frontier);
            let mut span = 1;
            if matches!(w.wr.op, SendOp::Read { .. }) {
                // One READ request stands for its responses up to the next
                // one placed: asked for again as one run.
                let last = w.last_psn();
                let mut r = q.next();
                while !r.is_after(last) && *sb.mark(r) != Mark::Placed {
                    *sb.mark(r) = Mark::Resent(frontier);
                    r = r.next();
                }
                span = r.distance_from(q);
                if r.is_after(sb.cursor) {
                    sb.cursor = r;
                }
            }
            if let Some(p) = pending {
                sb.cursor = p;
            }
            return Some((idx, k, q, trimmed, span));
        }
        if let Some(p) = pending {
            sb.cursor = p;
        }
        None
    }
}
