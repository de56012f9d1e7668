//! The requester (rxe: `rxe_req.c`): checks and queues send work, then
//! turns the send queue into request packets under the window, the
//! `max_rd_atomic` limit, fences and the congestion control pacing.
//! Memory window binds and local invalidations send nothing: each runs
//! when it reaches the head of the send queue (every earlier WR
//! completed) and completes there, holding back the WRs behind it until
//! then (`run_local_ops`).

use super::*;

impl Qp {
    // ------------------------------------------------------------------
    // Posting
    // ------------------------------------------------------------------

    /// `ibv_post_send`. Refused below RTS (and in RESET/INIT/RTR); in ERR
    /// the WR completes at once with WR_FLUSH_ERR.
    pub fn post_send(&mut self, wr: SendWr) -> Result<(), PostError> {
        match self.state {
            QpState::Rts | QpState::Sqd => {}
            QpState::Err | QpState::Sqe => {
                self.push_flush(wr.wr_id, wr.op.wc_opcode(), false);
                return Ok(());
            }
            s => return Err(PostError::BadState(s)),
        }
        if self.sq.len() >= self.cfg.max_send_wr as usize {
            return Err(PostError::QueueFull(self.sq.len() as u32));
        }
        let t = self.cfg.qp_type;
        let ok = match t {
            QpType::Rc => true,
            QpType::Uc => matches!(
                wr.op,
                SendOp::Send
                    | SendOp::SendWithImm(_)
                    | SendOp::Write { .. }
                    | SendOp::WriteWithImm { .. }
                    | SendOp::LocalInv(_)
                    | SendOp::BindMw { .. }
            ),
            QpType::Ud => matches!(wr.op, SendOp::Send | SendOp::SendWithImm(_)),
        };
        if !ok {
            return Err(PostError::Unsupported(t));
        }
        let total = wr.sges.total_len();
        if total > MAX_MESSAGE {
            return Err(PostError::Invalid("message longer than 2^31 bytes"));
        }
        if wr.op.is_atomic() && wr.sges.as_slice().first().map_or(true, |s| s.length < 8) {
            return Err(PostError::Invalid("an atomic needs an 8-byte local SGE"));
        }
        if let SendOp::AtomicWrite { remote_addr, .. } = wr.op {
            if total != 8 {
                return Err(PostError::Invalid(
                    "an ATOMIC WRITE carries exactly 8 bytes",
                ));
            }
            if remote_addr % 8 != 0 {
                return Err(PostError::Invalid(
                    "an ATOMIC WRITE needs an 8-byte aligned remote address",
                ));
            }
        }
        if t == QpType::Ud {
            if wr.ud.is_none() {
                return Err(PostError::Invalid("a UD send needs a destination"));
            }
            if total > self.pmtu as u64 {
                return Err(PostError::Invalid("a UD message must fit in one path MTU"));
            }
        }
        if wr.op.is_local() && total > 0 {
            return Err(PostError::Invalid(
                "a memory window bind or local invalidation carries no SGEs",
            ));
        }
        let len = if wr.op.is_atomic() { 8 } else { total as u32 };
        let npsn = match wr.op {
            // A local operation takes no PSN; it is never started.
            SendOp::LocalInv(_) | SendOp::BindMw { .. } => 1,
            SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. } => 1,
            _ => len.div_ceil(self.pmtu).max(1),
        };
        self.sq.push_back(SendWqe {
            wr,
            len,
            first_psn: Psn::new(0),
            npsn,
            started: false,
        });
        Ok(())
    }

    // Inlined into poll_transmit so that the Transmit is built in place
    // rather than copied between return slots (a measurable cost per packet).
    #[inline(always)]
    pub(super) fn poll_request<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        mem: &M,
        lane: Lane,
        out: &mut Transmit,
    ) -> bool {
        let qp_type = self.cfg.qp_type;
        let idx = self.send_idx;
        // Read the few fields needed instead of copying the WQE.
        let (started, flags, op) = {
            let w = &self.sq[idx];
            (w.started, w.wr.flags, w.wr.op)
        };
        if !started {
            if self.state == QpState::Sqd {
                return false;
            }
            if op.is_local() {
                // It runs at the head of the queue (`run_local_ops`): until
                // every earlier WR has completed, it holds what follows.
                return false;
            }
            if flags.contains(SendFlags::FENCE) && self.rd_atomic_inflight > 0 {
                return false;
            }
            if op.is_read_or_atomic()
                && self.rd_atomic_inflight >= self.attr.max_rd_atomic.max(1) as u32
            {
                return false;
            }
            // Local key checks (LOC_PROT_ERR).
            // READ and atomic results land in the SGEs; an ATOMIC WRITE's
            // is only read.
            let need = if op.is_read_or_atomic() && !matches!(op, SendOp::AtomicWrite { .. }) {
                AccessFlags::LOCAL_WRITE
            } else {
                AccessFlags::EMPTY
            };
            let bad = self.sq[idx].wr.sges.as_slice().iter().any(|s| {
                mem.check(MemKey::Local(s.lkey), s.addr, s.length as u64, need)
                    .is_err()
            });
            if bad {
                self.fail_wqe_at(idx, WcStatus::LocProtErr);
                return false;
            }
        }
        if started && self.cfg.retransmit == RetransmitMode::SelectiveRepeat {
            // Held requests drained at the responder can acknowledge past
            // a rewound cursor: what is acknowledged is not sent again.
            let w = &self.sq[idx];
            let k = self.comp_psn.distance_from(w.first_psn);
            if self.send_pkt < k && k < w.npsn {
                self.send_pkt = k;
            }
        }
        let psn = if started {
            self.sq[idx].first_psn.add(self.send_pkt)
        } else {
            self.next_psn
        };
        if qp_type == QpType::Rc
            && psn.distance_from(self.comp_psn) >= self.cfg.max_unacked_psns.max(1)
        {
            return false;
        }
        let cc_window = match &self.cc {
            // HPCC's window, in packets of a full frame.
            AnyCc::Hpcc(h) => Some(h.window_packets(self.pmtu + WIRE_OVERHEAD + 12)),
            AnyCc::Swift(w) => Some(w.window_packets()),
            _ => None,
        };
        if cc_window.is_some_and(|w| psn.distance_from(self.comp_psn) >= w) {
            return false;
        }
        // The packet that fills the congestion window asks for the ACK that
        // will open it: with ACKs asked for only every `ack_req_every`
        // packets, a window smaller than that would otherwise wait for the
        // retransmission timer.
        let fills_window = cc_window.is_some_and(|w| psn.distance_from(self.comp_psn) + 1 >= w);
        if !started {
            let wq = &mut self.sq[idx];
            wq.started = true;
            wq.first_psn = self.next_psn;
            self.next_psn = self.next_psn.add(wq.npsn);
            if wq.wr.op.is_read_or_atomic() {
                self.rd_atomic_inflight += 1;
            }
            self.send_pkt = 0;
        }
        let k = self.send_pkt;
        // Counted as a retransmission only when this PSN went out before.
        let retransmit = psn.is_before(self.retx_until) && psn.is_before(self.sent_psn);
        let (plen, msg_done) = self.build_request(idx, k, psn, u32::MAX, out);
        let w_ud = self.sq[idx].wr.ud;
        if fills_window && qp_type == QpType::Rc {
            out.headers.bth.ack_req = true;
        }
        if out.headers.bth.ack_req {
            self.pkts_since_ackreq = 0;
        } else {
            self.pkts_since_ackreq += 1;
        }
        // Advance the cursor.
        if msg_done {
            self.send_idx += 1;
            self.send_pkt = 0;
        } else {
            self.send_pkt += 1;
        }
        if retransmit {
            self.stats.tx_retransmits += 1;
        } else {
            self.stats.tx_requests += 1;
            if let Some(times) = self.sent_times.as_deref_mut() {
                if qp_type == QpType::Rc && !psn.is_before(self.sent_psn) {
                    times.push_back((psn, now));
                }
            }
        }
        // A READ request stands for its response PSNs, the rest of the
        // READ from this one on; anything else for its own PSN.
        let covered = if matches!(op, SendOp::Read { .. }) {
            self.sq[idx].last_psn().next()
        } else {
            psn.next()
        };
        if covered.is_after(self.sent_psn) {
            self.sent_psn = covered;
        }
        out.path = match self.paths.as_deref_mut() {
            Some(ps) if qp_type == QpType::Rc => {
                Some(ps.take(self.comp_psn, psn, covered.sub(1), lane, now))
            }
            _ => None,
        };
        self.paced(now, &out.headers, plen);
        let dest = match (qp_type, w_ud) {
            (QpType::Ud, Some(ud)) => ud.ah,
            _ => self.attr.ah,
        };
        match qp_type {
            QpType::Rc => {
                if self.rto_deadline.is_none() && self.rnr_deadline.is_none() {
                    self.rto_deadline = self.ack_timeout().map(|d| now + d);
                }
            }
            QpType::Uc | QpType::Ud => {
                if msg_done {
                    // Unreliable: complete when the last packet leaves.
                    let wqe = self.pop_head().expect("the WQE just sent is queued");
                    self.comp_psn = self.next_psn;
                    self.retx_until = self.next_psn;
                    self.complete_send(&wqe, WcStatus::Success);
                    self.check_drained();
                }
            }
        }
        out.dest = dest;
        out.ecn = self.cfg.ecn;
        true
    }

    /// Build packet `k` of send WQE `idx`, with PSN `psn`, into `out`
    /// (headers and payload; not its destination or ECN): its payload
    /// length, and whether it is the message's last. A READ request asks
    /// for at most `span` responses. Changes nothing.
    #[inline(always)]
    fn build_request(
        &self,
        idx: usize,
        k: u32,
        psn: Psn,
        span: u32,
        out: &mut Transmit,
    ) -> (u32, bool) {
        let qp_type = self.cfg.qp_type;
        let (flags, op) = {
            let w = &self.sq[idx];
            (w.wr.flags, w.wr.op)
        };
        let (w_len, w_npsn, w_ud) = {
            let w = &self.sq[idx];
            (w.len, w.npsn, w.wr.ud)
        };
        out.payload.clear();
        let mut plen = 0;
        let msg_done;
        match op {
            SendOp::Read { remote_addr, rkey } => {
                let off = k as u64 * self.pmtu as u64;
                let len = (w_len as u64)
                    .saturating_sub(off)
                    .min(u64::from(span).saturating_mul(u64::from(self.pmtu)))
                    as u32;
                out.headers = headers(self.bth(Opcode::RcReadRequest, psn, true, false, 0));
                out.headers.reth = Some(RethRepr {
                    va: remote_addr.wrapping_add(off),
                    rkey,
                    dma_len: len,
                });
                msg_done = true;
            }
            SendOp::CompareSwap {
                remote_addr,
                rkey,
                compare,
                swap,
            } => {
                out.headers = headers(self.bth(Opcode::RcCompareSwap, psn, true, false, 0));
                out.headers.atomic_eth = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey,
                    swap_add: swap,
                    compare,
                });
                msg_done = true;
            }
            SendOp::FetchAdd {
                remote_addr,
                rkey,
                add,
            } => {
                out.headers = headers(self.bth(Opcode::RcFetchAdd, psn, true, false, 0));
                out.headers.atomic_eth = Some(AtomicEthRepr {
                    va: remote_addr,
                    rkey,
                    swap_add: add,
                    compare: 0,
                });
                msg_done = true;
            }
            op => {
                let n = w_npsn;
                let off = k * self.pmtu;
                plen = (w_len - off.min(w_len)).min(self.pmtu);
                let first = k == 0;
                let last = k + 1 == n;
                // Each packet of a plain WRITE its own WRITE ONLY with its
                // own RETH (IRN's RETH in every WRITE packet, in standard
                // opcodes): a responder can place any of them on arrival.
                let split = self.cfg.write_reth_every_packet
                    && qp_type != QpType::Ud
                    && matches!(op, SendOp::Write { .. });
                let opcode = if split {
                    pick(
                        qp_type == QpType::Uc,
                        Opcode::RcWriteOnly,
                        Opcode::UcWriteOnly,
                    )
                } else {
                    data_opcode(qp_type, op, first, last)
                };
                let se = last
                    && flags.contains(SendFlags::SOLICITED)
                    && !matches!(op, SendOp::Write { .. } | SendOp::AtomicWrite { .. });
                let ack_req = qp_type == QpType::Rc
                    && (last
                        || (self.cfg.ack_req_every > 0
                            && self.pkts_since_ackreq + 1 >= self.cfg.ack_req_every));
                out.headers = headers(self.bth(opcode, psn, ack_req, se, plen));
                if opcode.has_reth() {
                    let (va, rkey) = match op {
                        SendOp::Write { remote_addr, rkey }
                        | SendOp::AtomicWrite { remote_addr, rkey }
                        | SendOp::WriteWithImm {
                            remote_addr, rkey, ..
                        } => (remote_addr, rkey),
                        _ => (0, Rkey::new(0)),
                    };
                    out.headers.reth = Some(if split {
                        RethRepr {
                            va: va.wrapping_add(off as u64),
                            rkey,
                            dma_len: plen,
                        }
                    } else {
                        RethRepr {
                            va,
                            rkey,
                            dma_len: w_len,
                        }
                    });
                }
                if opcode.has_immdt() {
                    out.headers.immdt = Some(match op {
                        SendOp::SendWithImm(i) => i,
                        SendOp::WriteWithImm { imm, .. } => imm,
                        _ => 0,
                    });
                }
                if opcode.has_ieth() {
                    if let SendOp::SendWithInv(k) = op {
                        out.headers.ieth = Some(k);
                    }
                }
                if let (true, Some(ud)) = (qp_type == QpType::Ud, w_ud) {
                    out.headers.bth.dest_qp = ud.remote_qpn;
                    out.headers.deth = Some(DethRepr {
                        qkey: ud.remote_qkey,
                        src_qp: self.cfg.qpn,
                    });
                }
                gather(&mut out.payload, self.sq[idx].wr.sges.as_slice(), off, plen);
                msg_done = last;
            }
        }
        (plen, msg_done)
    }

    /// Resend the next hole selective repeat knows of, if any (with
    /// AckReq, so that the responder reports at once how far the resend
    /// took it).
    pub(super) fn poll_hole(&mut self, now: Instant, lane: Lane, out: &mut Transmit) -> bool {
        let Some((idx, k, psn, trimmed, span)) = self.next_hole() else {
            return false;
        };
        let (plen, _) = self.build_request(idx, k, psn, span, out);
        out.path = None;
        if let Some(ps) = self.paths.as_deref_mut() {
            // The hole's path lost it: avoid that path, resend on another.
            // A trimmed packet's path works: a queue on it was full, which
            // congestion control answers.
            if !trimmed && ps.on_lost(psn, now) {
                self.stats.path_failovers += 1;
            }
            // The lane may have just lost its last usable path.
            let lane = if ps.usable_in(lane, now) {
                lane
            } else {
                Lane::ANY
            };
            out.path = Some(ps.take(self.comp_psn, psn, psn.add(span - 1), lane, now));
        }
        out.headers.bth.ack_req = true;
        self.pkts_since_ackreq = 0;
        self.stats.tx_retransmits += 1;
        self.stats.sr_retransmits += 1;
        self.resend_owed = false;
        self.paced(now, &out.headers, plen);
        if self.rto_deadline.is_none() && self.rnr_deadline.is_none() {
            self.rto_deadline = self.ack_timeout().map(|d| now + d);
        }
        out.dest = self.attr.ah;
        out.ecn = self.cfg.ecn;
        true
    }
}

impl Qp {
    /// Run the memory window binds and local invalidations at the head of
    /// the send queue (every earlier WR has completed: local operations
    /// are ordered after everything before them), completing each in
    /// order. A refusal completes the WR with `IBV_WC_MW_BIND_ERR` and
    /// puts the QP in ERR, as for any local error of a send WR.
    #[cold]
    #[inline(never)]
    pub(super) fn run_local_ops<M: Memory + ?Sized>(&mut self, mem: &M) {
        while self.send_idx == 0 && self.state == QpState::Rts {
            let Some(w) = self.sq.front() else {
                break;
            };
            if w.started || !w.wr.op.is_local() {
                break;
            }
            let op = w.wr.op;
            let r = match (op, op.window_bind()) {
                (SendOp::LocalInv(rkey), _) => mem.invalidate_local(rkey),
                (_, Some(b)) => mem.bind_window(&b, self.cfg.qpn),
                _ => Ok(()),
            };
            if r.is_err() {
                self.fail_wqe_at(0, WcStatus::MwBindErr);
                break;
            }
            let w = self.pop_head().expect("the head WQE was just read");
            self.complete_send(&w, WcStatus::Success);
        }
    }
}

pub(super) fn data_opcode(t: QpType, op: SendOp, first: bool, last: bool) -> Opcode {
    use Opcode::*;
    let only = first && last;
    match (t, op) {
        (QpType::Ud, SendOp::SendWithImm(_)) => UdSendOnlyImm,
        (QpType::Ud, _) => UdSendOnly,
        (_, SendOp::AtomicWrite { .. }) => RcAtomicWrite,
        (t, SendOp::Send | SendOp::SendWithImm(_) | SendOp::SendWithInv(_)) => {
            let uc = t == QpType::Uc;
            match (only, first, last, op) {
                (true, _, _, SendOp::SendWithImm(_)) => pick(uc, RcSendOnlyImm, UcSendOnlyImm),
                (true, _, _, SendOp::SendWithInv(_)) => RcSendOnlyInv,
                (true, _, _, _) => pick(uc, RcSendOnly, UcSendOnly),
                (_, true, _, _) => pick(uc, RcSendFirst, UcSendFirst),
                (_, _, true, SendOp::SendWithImm(_)) => pick(uc, RcSendLastImm, UcSendLastImm),
                (_, _, true, SendOp::SendWithInv(_)) => RcSendLastInv,
                (_, _, true, _) => pick(uc, RcSendLast, UcSendLast),
                _ => pick(uc, RcSendMiddle, UcSendMiddle),
            }
        }
        (t, op) => {
            let uc = t == QpType::Uc;
            let imm = matches!(op, SendOp::WriteWithImm { .. });
            match (only, first, last) {
                (true, _, _) if imm => pick(uc, RcWriteOnlyImm, UcWriteOnlyImm),
                (true, _, _) => pick(uc, RcWriteOnly, UcWriteOnly),
                (_, true, _) => pick(uc, RcWriteFirst, UcWriteFirst),
                (_, _, true) if imm => pick(uc, RcWriteLastImm, UcWriteLastImm),
                (_, _, true) => pick(uc, RcWriteLast, UcWriteLast),
                _ => pick(uc, RcWriteMiddle, UcWriteMiddle),
            }
        }
    }
}

pub(super) fn pick(uc: bool, rc: Opcode, ucop: Opcode) -> Opcode {
    if uc {
        ucop
    } else {
        rc
    }
}

/// The pieces of `sges` covering `[off, off + len)`.
pub(super) fn gather(d: &mut PayloadDesc, sges: &[Sge], off: u32, len: u32) {
    let mut skip = off as u64;
    let mut want = len as u64;
    for s in sges {
        if want == 0 {
            break;
        }
        let l = s.length as u64;
        if skip >= l {
            skip -= l;
            continue;
        }
        let take = (l - skip).min(want);
        d.push(Piece {
            key: s.lkey.value(),
            addr: s.addr.wrapping_add(skip),
            len: take as u32,
        });
        want -= take;
        skip = 0;
    }
}
