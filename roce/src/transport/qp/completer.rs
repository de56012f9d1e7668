//! The completer (rxe: `rxe_comp.c`): matches ACKs, NAKs, READ responses
//! and atomic ACKs against the send queue, places READ and atomic results
//! in local memory and completes send WQEs in order.

use super::responder::scatter;
use super::window::Mark;
use super::*;

impl Qp {
    // ---------------------------- completer ---------------------------

    pub(super) fn rc_response<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        pkt: &Received<'_>,
        mem: &mut M,
    ) {
        let h = &pkt.headers;
        let p = h.bth.psn;
        let op = h.bth.opcode;
        // Responses for PSNs never sent are bogus.
        if !self.has_outstanding() || !p.is_before(self.next_psn) {
            self.stats.stale_responses += 1;
            return;
        }
        let head_first = self.sq[0].first_psn;
        match op {
            Opcode::RcAcknowledge => {
                let Some(aeth) = h.aeth else {
                    self.stats.rx_dropped += 1;
                    return;
                };
                match aeth.syndrome {
                    AethSyndrome::Ack { credits } => {
                        self.peer_credits = credits_from_code(credits);
                        if p.is_before(self.comp_psn) {
                            self.stats.stale_responses += 1;
                            return;
                        }
                        if self.sent_times.is_some() {
                            self.swift_sample(now, p);
                        }
                        match self.ack_through(p) {
                            AckOutcome::Done { progress } => {
                                if progress {
                                    self.on_progress(now);
                                }
                            }
                            AckOutcome::ImpliedNak { progress } => {
                                if progress {
                                    self.on_progress(now);
                                }
                                self.implied_retry(now);
                            }
                        }
                    }
                    AethSyndrome::RnrNak { timer } => {
                        self.stats.rx_naks += 1;
                        self.stats.rx_rnr_naks += 1;
                        if p.is_before(self.comp_psn) {
                            self.stats.stale_responses += 1;
                            return;
                        }
                        if p != self.comp_psn {
                            if let AckOutcome::ImpliedNak { progress } = self.ack_through(p.sub(1))
                            {
                                if progress {
                                    self.on_progress(now);
                                }
                                self.retry_or_fail(now);
                                return;
                            }
                        }
                        if !self.has_outstanding() {
                            return;
                        }
                        if self.rnr_left == 0 {
                            self.fail_head(WcStatus::RnrRetryExcErr);
                            return;
                        }
                        if self.rnr_left != 7 {
                            self.rnr_left -= 1;
                        }
                        self.stats.retries += 1;
                        self.rewind(self.comp_psn);
                        self.rnr_deadline = Some(now + rnr_timer(timer));
                        self.rto_deadline = None;
                    }
                    AethSyndrome::Nak(code) => {
                        self.stats.rx_naks += 1;
                        match code {
                            NakCode::PsnSequenceError => self.stats.rx_nak_seq += 1,
                            NakCode::InvalidRequest => self.stats.rx_nak_invalid_request += 1,
                            NakCode::RemoteAccessError => self.stats.rx_nak_remote_access += 1,
                            _ => {}
                        }
                        if code == NakCode::Reserved(TRIMMED_NAK)
                            && self.cfg.retransmit == RetransmitMode::SelectiveRepeat
                        {
                            // A trimmed request: that PSN is lost, nothing
                            // is acknowledged.
                            self.on_trim_nak(p);
                            return;
                        }
                        let go_back0 = self.cfg.retransmit == RetransmitMode::GoBack0;
                        let lower = if go_back0 { head_first } else { self.comp_psn };
                        if p.is_before(lower) {
                            self.stats.stale_responses += 1;
                            if code == NakCode::PsnSequenceError
                                && self.cfg.retransmit == RetransmitMode::SelectiveRepeat
                            {
                                // Overtaken by a later acknowledgement, a
                                // selective one still says what is held.
                                self.on_stale_sack(Psn::new(aeth.msn.value()));
                            }
                            return;
                        }
                        if p.is_after(self.comp_psn) {
                            if let AckOutcome::ImpliedNak { progress } = self.ack_through(p.sub(1))
                            {
                                if progress {
                                    self.on_progress(now);
                                }
                                if self.cfg.retransmit == RetransmitMode::SelectiveRepeat {
                                    // Selective acknowledgements come one
                                    // per held packet: one retry for the
                                    // READ or atomic they pass, as for
                                    // ACKs.
                                    self.implied_retry(now);
                                } else {
                                    self.retry_or_fail(now);
                                }
                                return;
                            }
                            self.on_progress(now);
                        }
                        if !self.has_outstanding() {
                            return;
                        }
                        match code {
                            // During an RNR wait the requester will resend
                            // from comp_psn anyway: a sequence NAK for that
                            // same PSN (the responder saw the packets that
                            // followed the RNR-NAKed one) asks for nothing
                            // new and uses up no retry.
                            NakCode::PsnSequenceError
                                if self.rnr_deadline.is_some() && p == self.comp_psn =>
                            {
                                self.stats.stale_responses += 1;
                            }
                            NakCode::PsnSequenceError
                                if self.cfg.retransmit == RetransmitMode::SelectiveRepeat =>
                            {
                                self.on_selective_nak(now, p, Psn::new(aeth.msn.value()));
                            }
                            NakCode::PsnSequenceError => self.retry_or_fail(now),
                            NakCode::InvalidRequest => self.fail_head(WcStatus::RemInvReqErr),
                            NakCode::RemoteAccessError => self.fail_head(WcStatus::RemAccessErr),
                            NakCode::RemoteOperationalError => self.fail_head(WcStatus::RemOpErr),
                            NakCode::InvalidRdRequest => self.fail_head(WcStatus::RemInvRdReqErr),
                            NakCode::Reserved(_) => self.fail_head(WcStatus::BadRespErr),
                        }
                    }
                    AethSyndrome::Reserved(_) => {
                        self.stats.rx_dropped += 1;
                    }
                }
            }
            Opcode::RcReadResponseFirst
            | Opcode::RcReadResponseMiddle
            | Opcode::RcReadResponseLast
            | Opcode::RcReadResponseOnly => {
                if p.is_before(self.comp_psn) {
                    self.stats.stale_responses += 1;
                    return;
                }
                if p.is_after(self.comp_psn)
                    && self.cfg.retransmit == RetransmitMode::SelectiveRepeat
                    && self.cfg.reorder_window > 0
                    && self.place_read_out_of_order(pkt, mem)
                {
                    // Past a gap, placed: the gap is a hole selective
                    // repeat asks for again.
                    return;
                }
                // Responses come in order: earlier SENDs and WRITEs are done.
                let mut progress = false;
                loop {
                    let Some(w) = self.sq.front() else { return };
                    if !w.started {
                        self.stats.stale_responses += 1;
                        return;
                    }
                    if w.wr.op.is_read_like() && w.contains(p) {
                        break;
                    }
                    if !w.wr.op.is_read_or_atomic() && w.last_psn().is_before(p) {
                        let w = self.pop_head().expect("front exists");
                        self.comp_psn = w.last_psn().next();
                        self.complete_send(&w, WcStatus::Success);
                        progress = true;
                        continue;
                    }
                    // A READ or atomic passed over: implied NAK.
                    if progress {
                        self.on_progress(now);
                    }
                    self.implied_retry(now);
                    return;
                }
                if progress {
                    self.on_progress(now);
                }
                if p != self.comp_psn {
                    // A gap in the responses: retry from comp_psn.
                    self.implied_retry(now);
                    return;
                }
                let w = self.sq[0];
                let k = p.distance_from(w.first_psn);
                let off = k * self.pmtu;
                // An ATOMIC WRITE's response carries nothing.
                let atomic_write = matches!(w.wr.op, SendOp::AtomicWrite { .. });
                let room = if atomic_write {
                    0
                } else {
                    w.len - off.min(w.len)
                };
                let expect = room.min(self.pmtu);
                let last = p == w.last_psn();
                let shape_ok = read_response_shape_ok(
                    op,
                    last,
                    self.cfg.retransmit == RetransmitMode::SelectiveRepeat,
                );
                if pkt.payload.len() > room {
                    // More bytes than the READ has room left for: they
                    // cannot be placed. rxe's do_read() (rxe_comp.c) fails
                    // copy_data() on a length above the WQE's residue and
                    // ends the READ at once with IB_WC_LOC_PROT_ERR, the QP
                    // to ERR; no retry cycle.
                    self.stats.rx_read_overruns += 1;
                    self.fail_head(WcStatus::LocProtErr);
                    return;
                }
                if pkt.payload.len() != expect || !shape_ok {
                    self.stats.rx_dropped += 1;
                    return;
                }
                if scatter(mem, w.wr.sges.as_slice(), off as u64, pkt.payload).is_err() {
                    self.fail_head(WcStatus::LocProtErr);
                    return;
                }
                self.comp_psn = p.next();
                self.on_progress(now);
                if last {
                    let w = self.pop_head().expect("front exists");
                    self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
                    self.complete_send(&w, WcStatus::Success);
                    if self.sack.is_some() {
                        // The READs behind it may be placed already.
                        self.skip_placed_reads();
                    }
                    self.after_completion(now);
                }
            }
            Opcode::RcAtomicAcknowledge => {
                if p.is_before(self.comp_psn) {
                    self.stats.stale_responses += 1;
                    return;
                }
                if p != self.comp_psn {
                    if let AckOutcome::ImpliedNak { progress } = self.ack_through(p.sub(1)) {
                        if progress {
                            self.on_progress(now);
                        }
                        self.implied_retry(now);
                        return;
                    }
                }
                let Some(w) = self.sq.front().copied() else {
                    return;
                };
                let Some(ack) = h.atomic_ack_eth else {
                    self.stats.rx_dropped += 1;
                    return;
                };
                if !w.wr.op.is_atomic() || w.first_psn != p || !w.started {
                    self.stats.stale_responses += 1;
                    return;
                }
                let sge = w.wr.sges.as_slice()[0];
                let key = MemKey::Local(sge.lkey);
                if mem
                    .check(key, sge.addr, 8, AccessFlags::LOCAL_WRITE)
                    .is_err()
                    || mem.write_u64(key, sge.addr, ack.orig).is_err()
                {
                    self.fail_head(WcStatus::LocProtErr);
                    return;
                }
                self.pop_head();
                self.comp_psn = p.next();
                self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
                self.complete_send(&w, WcStatus::Success);
                self.on_progress(now);
                self.after_completion(now);
            }
            _ => self.stats.rx_dropped += 1,
        }
    }

    /// Acknowledge request PSNs up to and including `last`.
    pub(super) fn ack_through(&mut self, last: Psn) -> AckOutcome {
        let mut progress = false;
        while let Some(w) = self.sq.front() {
            if !w.started || last.is_before(w.first_psn) {
                break;
            }
            if w.wr.op.is_read_or_atomic() {
                return AckOutcome::ImpliedNak { progress };
            }
            if w.last_psn().is_after(last) {
                // Partially acknowledged SEND or WRITE.
                if last.next().is_after(self.comp_psn) {
                    self.comp_psn = last.next();
                    progress = true;
                }
                break;
            }
            let w = self.pop_head().expect("front exists");
            self.comp_psn = w.last_psn().next();
            self.complete_send(&w, WcStatus::Success);
            progress = true;
        }
        if progress {
            self.check_drained();
        }
        AckOutcome::Done { progress }
    }

    /// Remove the completed head WQE, keeping the send cursor on the same
    /// WQE (or on the new head, from its first packet, when the cursor was
    /// on the removed one).
    pub(super) fn pop_head(&mut self) -> Option<SendWqe> {
        let w = self.sq.pop_front()?;
        if self.send_idx == 0 {
            self.send_pkt = 0;
        } else {
            self.send_idx -= 1;
        }
        Some(w)
    }

    pub(super) fn on_progress(&mut self, now: Instant) {
        if self.sack.is_some() {
            self.skip_placed_reads();
        }
        self.resend_owed = false;
        self.retries_left = self.attr.retry_cnt;
        self.rnr_left = self.attr.rnr_retry;
        self.gap_retried = false;
        self.rto_deadline = if self.has_outstanding() && self.rnr_deadline.is_none() {
            self.ack_timeout().map(|d| now + d)
        } else {
            None
        };
        self.check_drained();
    }

    pub(super) fn after_completion(&mut self, now: Instant) {
        if !self.has_outstanding() {
            self.rto_deadline = None;
        } else if self.rto_deadline.is_none() && self.rnr_deadline.is_none() {
            self.rto_deadline = self.ack_timeout().map(|d| now + d);
        }
        self.check_drained();
    }
    /// Complete the head WQE with an error, move to ERR and flush.
    pub(super) fn fail_head(&mut self, status: WcStatus) {
        self.fail_wqe_at(0, status);
    }

    pub(super) fn fail_wqe_at(&mut self, idx: usize, status: WcStatus) {
        // Earlier WQEs (idx > 0) are still waiting for acknowledgement; the
        // QP goes to ERR, so they flush.
        for _ in 0..idx {
            if let Some(w) = self.sq.pop_front() {
                self.push_flush(w.wr.wr_id, w.wr.op.wc_opcode(), false);
            }
        }
        if let Some(w) = self.sq.pop_front() {
            self.complete_send_forced(&w, status);
        }
        self.enter_error(Some(status));
    }
    pub(super) fn complete_send(&mut self, w: &SendWqe, status: WcStatus) {
        if status == WcStatus::Success
            && !self.cfg.sq_sig_all
            && !w.wr.flags.contains(SendFlags::SIGNALED)
        {
            return;
        }
        self.complete_send_forced(w, status);
    }

    pub(super) fn complete_send_forced(&mut self, w: &SendWqe, status: WcStatus) {
        self.completions.push_back(Completion {
            wr_id: w.wr.wr_id,
            status,
            opcode: w.wr.op.wc_opcode(),
            is_recv: false,
            qp_num: self.cfg.qpn,
            byte_len: w.len,
            imm_data: None,
            invalidated_rkey: None,
            src_qp: None,
            grh: false,
            solicited: false,
        });
    }
}

impl Qp {
    /// A READ response at `psn`, past the first one missing (`comp_psn`),
    /// under selective repeat with a reorder window: placed at its address
    /// at once if it is one of a started READ's, whole and of the right
    /// shape. True when placed (or placed already); false: not a response
    /// this can place, for the in-order path to judge.
    pub(super) fn place_read_out_of_order<M: Memory + ?Sized>(
        &mut self,
        pkt: &Received<'_>,
        mem: &mut M,
    ) -> bool {
        let p = pkt.headers.bth.psn;
        let op = pkt.headers.bth.opcode;
        if p.distance_from(self.comp_psn) >= self.cfg.reorder_window || !p.is_before(self.sent_psn)
        {
            return false;
        }
        let Some(w) = self
            .sq
            .iter()
            .find(|w| w.contains(p) && matches!(w.wr.op, SendOp::Read { .. }))
            .copied()
        else {
            return false;
        };
        if *self.scoreboard().mark(p) == Mark::Placed {
            self.stats.rx_duplicates += 1;
            return true;
        }
        let k = p.distance_from(w.first_psn);
        let off = k * self.pmtu;
        let room = w.len - off.min(w.len);
        let last = p == w.last_psn();
        let shape_ok = read_response_shape_ok(op, last, true);
        if pkt.payload.len() != room.min(self.pmtu) || !shape_ok {
            self.stats.rx_dropped += 1;
            return true;
        }
        if scatter(mem, w.wr.sges.as_slice(), off as u64, pkt.payload).is_err() {
            self.fail_head(WcStatus::LocProtErr);
            return true;
        }
        let sb = self.sack.as_mut().expect("created above");
        *sb.mark(p) = Mark::Placed;
        sb.raise_high(p);
        self.stats.rx_read_ooo_placed += 1;
        true
    }

    /// `comp_psn` moved: past the READ responses placed out of order that
    /// now follow it, completing each READ they finish.
    pub(super) fn skip_placed_reads(&mut self) {
        while let (Some(sb), Some(w)) = (self.sack.as_mut(), self.sq.front()) {
            if !matches!(w.wr.op, SendOp::Read { .. }) || !w.contains(self.comp_psn) {
                return;
            }
            sb.sync(self.comp_psn);
            if *sb.mark(self.comp_psn) != Mark::Placed {
                return;
            }
            self.comp_psn = self.comp_psn.next();
            if self.comp_psn == w.last_psn().next() {
                let w = self.pop_head().expect("front exists");
                self.rd_atomic_inflight = self.rd_atomic_inflight.saturating_sub(1);
                self.complete_send(&w, WcStatus::Success);
            }
        }
    }
}

/// Whether a READ response's opcode fits its place: the READ's last PSN
/// takes a LAST or ONLY. Before it, a FIRST or MIDDLE; under selective
/// repeat also a LAST or ONLY, which ends the replay of a run of missing
/// responses the requester asked for again (its payload is still checked
/// to be a full path MTU).
pub(super) fn read_response_shape_ok(op: Opcode, last: bool, runs: bool) -> bool {
    match op {
        Opcode::RcReadResponseLast | Opcode::RcReadResponseOnly => last || runs,
        Opcode::RcReadResponseFirst | Opcode::RcReadResponseMiddle => !last,
        _ => false,
    }
}
