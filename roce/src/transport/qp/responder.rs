//! The responder (rxe: `rxe_resp.c`): receive queue, the RC/UC/UD
//! request checks in the order of IBA C9-* (sequence, opcode, access,
//! resources, length, keys), execution through [`Memory`], duplicate
//! handling, and the response queue (ACK/NAK, atomic ACKs, READ
//! responses) that [`Qp::poll_transmit`] drains first.

use super::selective::Hold;
use super::*;

/// Replays of runs of one READ's responses a selective-repeat responder
/// holds queued at once.
const MAX_READ_REPLAYS: usize = 32;

impl Qp {
    /// True when `rkey` names a type 2 memory window bound to another QP:
    /// only the QP that bound it may use it or invalidate it remotely
    /// (IBA 10.6.7.2.2), so for this QP the key fails like a bad one.
    /// Region keys never take the window lookup.
    #[inline]
    pub(super) fn foreign_window<M: Memory + ?Sized>(&self, mem: &M, rkey: Rkey) -> bool {
        rkey.value() & WINDOW_KEY_BIT != 0 && mem.window_qp(rkey).is_some_and(|q| q != self.cfg.qpn)
    }

    /// `ibv_post_recv`. Refused in RESET; in ERR the WR completes at once
    /// with WR_FLUSH_ERR.
    pub fn post_recv(&mut self, wr: RecvWr) -> Result<(), PostError> {
        match self.state {
            QpState::Reset => return Err(PostError::BadState(QpState::Reset)),
            QpState::Err => {
                self.push_flush(wr.wr_id, WcOpcode::Recv, true);
                return Ok(());
            }
            _ => {}
        }
        if self.rq.len() >= self.cfg.max_recv_wr as usize {
            return Err(PostError::QueueFull(self.rq.len() as u32));
        }
        self.rq.push_back(wr);
        Ok(())
    }

    /// The next response packet of the queue (ACK/NAK, atomic ACK, or the
    /// next packet of a READ response), if one may go now.
    pub(super) fn poll_response<M: Memory + ?Sized>(
        &mut self,
        now: Instant,
        mem: &M,
    ) -> Option<Transmit> {
        let item = *self.resp_q.front()?;
        match item {
            RespItem::Ack { psn, syndrome, msn } => {
                self.resp_q.pop_front();
                let mut h = headers(self.bth(Opcode::RcAcknowledge, psn, false, false, 0));
                h.aeth = Some(AethRepr { syndrome, msn });
                self.stats.tx_responses += 1;
                Some(Transmit {
                    dest: self.attr.ah,
                    headers: h,
                    ecn: self.cfg.ecn,
                    payload: PayloadDesc::EMPTY,
                    path: None,
                })
            }
            RespItem::AtomicAck { psn, orig, msn, .. } => {
                self.resp_q.pop_front();
                let mut h = headers(self.bth(Opcode::RcAtomicAcknowledge, psn, false, false, 0));
                h.aeth = Some(AethRepr {
                    syndrome: AethSyndrome::Ack { credits: 31 },
                    msn,
                });
                h.atomic_ack_eth = Some(AtomicAckEthRepr { orig });
                self.stats.tx_responses += 1;
                Some(Transmit {
                    dest: self.attr.ah,
                    headers: h,
                    ecn: self.cfg.ecn,
                    payload: PayloadDesc::EMPTY,
                    path: None,
                })
            }
            RespItem::Read {
                rkey,
                va,
                remaining,
                psn,
                fresh,
                started,
                msn,
                ..
            } => {
                // In ERR only responses owed before a fatal request are
                // still queued (see `responder_fatal`): they go out.
                if !matches!(
                    self.state,
                    QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err
                ) {
                    self.resp_q.pop_front();
                    return None;
                }
                if !self.pacer.ready(now) && self.pacing_rate().is_some() {
                    self.pacing_blocked = true;
                    self.pacer_held = true;
                    return None;
                }
                let plen = remaining.min(self.pmtu);
                // rxe looks the R_Key up again for every response packet.
                if plen > 0
                    && (mem
                        .check(
                            MemKey::Remote(rkey),
                            va,
                            plen as u64,
                            AccessFlags::REMOTE_READ,
                        )
                        .is_err()
                        || self.foreign_window(mem, rkey))
                {
                    // Only this READ's responses end: its NAK takes their
                    // place, and what is queued behind it (an atomic's ACK
                    // for an atomic that ran, ACKs of executed requests)
                    // still goes out, in request order.
                    self.resp_q.pop_front();
                    self.count_fatal_nak(NakCode::RemoteAccessError);
                    self.resp_q.push_front(RespItem::Ack {
                        psn,
                        syndrome: AethSyndrome::Nak(NakCode::RemoteAccessError),
                        msn,
                    });
                    self.enter_error_keeping_responses(Some(WcStatus::RemAccessErr));
                    return self.poll_response(now, mem);
                }
                let first = !started;
                let last = remaining <= self.pmtu;
                let opcode = match (fresh && first, last) {
                    (true, true) => Opcode::RcReadResponseOnly,
                    (true, false) => Opcode::RcReadResponseFirst,
                    (false, true) => Opcode::RcReadResponseLast,
                    (false, false) => Opcode::RcReadResponseMiddle,
                };
                let mut h = headers(self.bth(opcode, psn, false, false, plen));
                if opcode != Opcode::RcReadResponseMiddle {
                    h.aeth = Some(AethRepr {
                        syndrome: AethSyndrome::Ack { credits: 31 },
                        msn,
                    });
                }
                let mut payload = PayloadDesc::EMPTY;
                payload.remote = true;
                payload.push(Piece {
                    key: rkey.value(),
                    addr: va,
                    len: plen,
                });
                if last {
                    self.resp_q.pop_front();
                } else if let Some(RespItem::Read {
                    va: v,
                    remaining: r,
                    psn: p,
                    started: s,
                    ..
                }) = self.resp_q.front_mut()
                {
                    *v += plen as u64;
                    *r -= plen;
                    *p = p.next();
                    *s = true;
                }
                self.paced(now, &h, plen);
                self.stats.tx_responses += 1;
                Some(Transmit {
                    dest: self.attr.ah,
                    headers: h,
                    ecn: self.cfg.ecn,
                    payload,
                    path: None,
                })
            }
        }
    }

    pub(super) fn push_ack(&mut self, psn: Psn) {
        let credit_now = self.credit_code();
        if let Some(RespItem::Ack {
            psn: p,
            syndrome: AethSyndrome::Ack { credits },
            msn,
        }) = self.resp_q.back_mut()
        {
            // Coalesce: a later ACK covers the earlier one.
            if !psn.is_before(*p) {
                *p = psn;
                *msn = self.msn;
                *credits = credit_now;
            }
            return;
        }
        let credits = self.credit_code();
        self.resp_q.push_back(RespItem::Ack {
            psn,
            syndrome: AethSyndrome::Ack { credits },
            msn: self.msn,
        });
    }

    pub(super) fn credit_code(&self) -> u8 {
        if self.cfg.advertise_credits {
            credit_code(self.rq.len() as u32)
        } else {
            31
        }
    }

    pub(super) fn push_nak(&mut self, psn: Psn, syndrome: AethSyndrome) {
        self.resp_q.push_back(RespItem::Ack {
            psn,
            syndrome,
            msn: self.msn,
        });
    }

    /// A Class C/A error: NAK and move to ERR. What earlier requests are
    /// owed (READ responses, atomic ACKs, ACKs) is still sent, before the
    /// NAK: the peer completes them, then fails this one.
    pub(super) fn responder_fatal(
        &mut self,
        psn: Psn,
        code: NakCode,
        local: Option<(u64, WcStatus)>,
    ) {
        self.count_fatal_nak(code);
        self.push_nak(psn, AethSyndrome::Nak(code));
        let owed = std::mem::take(&mut self.resp_q);
        self.responder_error(local);
        self.resp_q = owed;
        let status = match code {
            NakCode::RemoteAccessError => WcStatus::RemAccessErr,
            NakCode::RemoteOperationalError => WcStatus::RemOpErr,
            _ => WcStatus::RemInvReqErr,
        };
        self.enter_error_keeping_responses(Some(status));
    }

    pub(super) fn count_fatal_nak(&mut self, code: NakCode) {
        match code {
            NakCode::RemoteAccessError => self.stats.tx_nak_remote_access += 1,
            NakCode::RemoteOperationalError => self.stats.tx_nak_remote_op += 1,
            _ => self.stats.tx_nak_invalid_request += 1,
        }
    }

    /// Complete receive WQE `wr_id` of this connected QP with success:
    /// `byte_len` bytes placed, with the immediate and the solicited bit of
    /// the message's last packet `h` (no source QP, no GRH).
    fn recv_done(
        &mut self,
        wr_id: u64,
        opcode: WcOpcode,
        byte_len: u32,
        h: &RoceHeaders,
        invalidated_rkey: Option<Rkey>,
    ) {
        self.completions.push_back(Completion {
            wr_id,
            status: WcStatus::Success,
            opcode,
            is_recv: true,
            qp_num: self.cfg.qpn,
            byte_len,
            imm_data: h.immdt,
            invalidated_rkey,
            src_qp: None,
            grh: false,
            solicited: h.bth.solicited,
        });
    }

    /// The receive WQE in use, if any, completes with `local`'s status.
    pub(super) fn responder_error(&mut self, local: Option<(u64, WcStatus)>) {
        if let Some((wr_id, status)) = local {
            // The receive WQE in use completes with the error.
            self.rq.pop_front();
            self.completions.push_back(Completion {
                wr_id,
                status,
                opcode: WcOpcode::Recv,
                is_recv: true,
                qp_num: self.cfg.qpn,
                byte_len: 0,
                imm_data: None,
                invalidated_rkey: None,
                src_qp: None,
                grh: false,
                solicited: false,
            });
        }
    }

    pub(super) fn rc_request<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let psn = pkt.headers.bth.psn;
        let d = psn.diff(self.epsn);
        if d > 0 {
            if self.cfg.reorder_window > 0 {
                match self.hold_out_of_order(pkt, mem, d as u32) {
                    Hold::Held => {
                        self.stats.rx_ooo_held += 1;
                        if self.cfg.retransmit == RetransmitMode::SelectiveRepeat {
                            self.push_sack(psn);
                        }
                        return;
                    }
                    Hold::Duplicate => {
                        self.stats.rx_duplicates += 1;
                        if self.cfg.retransmit == RetransmitMode::SelectiveRepeat {
                            self.push_sack(psn);
                        }
                        return;
                    }
                    Hold::Refused => self.stats.rx_ooo_dropped += 1,
                }
            }
            // Out of sequence: one NAK per gap.
            self.stats.rx_out_of_sequence += 1;
            self.stats.rx_dropped += 1;
            if !self.nak_sent {
                self.nak_sent = true;
                self.stats.tx_nak_seq += 1;
                if self.cfg.retransmit == RetransmitMode::GoBack0 && self.in_msg != InMsg::None {
                    // The early NICs dropped the partial message and asked
                    // for it again from its first packet.
                    self.epsn = self.msg_start;
                    self.in_msg = InMsg::None;
                }
                let e = self.epsn;
                if self.cfg.retransmit == RetransmitMode::SelectiveRepeat {
                    // No selective acknowledgement: the MSN field repeats
                    // the PSN, and the requester goes back N.
                    self.resp_q.push_back(RespItem::Ack {
                        psn: e,
                        syndrome: AethSyndrome::Nak(NakCode::PsnSequenceError),
                        msn: Msn::new(e.value()),
                    });
                } else {
                    self.push_nak(e, AethSyndrome::Nak(NakCode::PsnSequenceError));
                }
            }
            return;
        }
        if d < 0 {
            self.stats.rx_duplicates += 1;
            self.rc_duplicate(pkt, mem);
            return;
        }
        self.rc_execute(pkt, mem, false);
        if self.rx_window.is_some() {
            self.drain_held(pkt.src, mem);
        }
    }

    /// Check and execute the request at the expected PSN (IBA C9-*:
    /// opcode sequence, access, resources, length, keys). `placed`: its
    /// data was placed when it arrived out of order and was held; it is
    /// not written again.
    pub(super) fn rc_execute<M: Memory + ?Sized>(
        &mut self,
        pkt: &Received<'_>,
        mem: &mut M,
        placed: bool,
    ) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        self.nak_sent = false;
        let kind = op_kind(op);
        // 2. Opcode sequence.
        let seq_ok = match self.in_msg {
            InMsg::None => op.is_first() || op.is_only(),
            InMsg::Send { .. } => kind == OpKind::Send && (op.is_middle() || op.is_last()),
            InMsg::Write { .. } => kind == OpKind::Write && (op.is_middle() || op.is_last()),
        };
        if !seq_ok || kind == OpKind::Other {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        // 3. Operation allowed on the QP.
        let need = match kind {
            OpKind::Write | OpKind::AtomicWrite => AccessFlags::REMOTE_WRITE,
            OpKind::Read => AccessFlags::REMOTE_READ,
            OpKind::Atomic => AccessFlags::REMOTE_ATOMIC,
            _ => AccessFlags::EMPTY,
        };
        if !self.attr.qp_access_flags.contains(need) {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        // 4. Resources.
        let write_imm_end = kind == OpKind::Write && op.has_immdt();
        let needs_rwqe = (kind == OpKind::Send && (op.is_first() || op.is_only())) || write_imm_end;
        if needs_rwqe && self.rq.is_empty() {
            self.stats.tx_rnr_naks += 1;
            self.push_nak(
                psn,
                AethSyndrome::RnrNak {
                    timer: self.attr.min_rnr_timer,
                },
            );
            return;
        }
        if matches!(kind, OpKind::Read | OpKind::Atomic | OpKind::AtomicWrite)
            && self.owed_rd_atomic() >= self.attr.max_dest_rd_atomic as usize
        {
            // Class C: more READs and atomics than the responder's
            // resources (a requester keeps at most its max_rd_atomic, which
            // connection setup bounds by our max_dest_rd_atomic, in flight;
            // one whose responses are still owed is in flight). This also
            // bounds the READ bytes owed: at most max_dest_rd_atomic
            // READs of at most 2^31 bytes, held as descriptors, not data.
            self.stats.rx_rd_atomic_overflow += 1;
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        // 5. Length.
        let pmtu = self.pmtu;
        if !payload_fits(op, pkt.payload.len(), pmtu) {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        if let Some(reth) = h.reth {
            if reth.dma_len as u64 > MAX_MESSAGE {
                self.responder_fatal(psn, NakCode::InvalidRequest, None);
                return;
            }
        }
        match kind {
            OpKind::Send => self.rc_send(pkt, mem),
            OpKind::Write => self.rc_write(pkt, mem, placed),
            OpKind::Read => {
                let Some(reth) = h.reth else {
                    self.responder_fatal(psn, NakCode::InvalidRequest, None);
                    return;
                };
                if reth.dma_len > 0
                    && (mem
                        .check(
                            MemKey::Remote(reth.rkey),
                            reth.va,
                            reth.dma_len as u64,
                            AccessFlags::REMOTE_READ,
                        )
                        .is_err()
                        || self.foreign_window(mem, reth.rkey))
                {
                    self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                    return;
                }
                let n = reth.dma_len.div_ceil(pmtu).max(1);
                self.msn = self.msn.next();
                self.store_resource(RdRes::Read {
                    first_psn: psn,
                    last_psn: psn.add(n - 1),
                    rkey: reth.rkey,
                    va: reth.va,
                    len: reth.dma_len,
                });
                self.resp_q.push_back(RespItem::Read {
                    request_psn: psn,
                    rkey: reth.rkey,
                    va: reth.va,
                    remaining: reth.dma_len,
                    psn,
                    fresh: true,
                    started: false,
                    msn: self.msn,
                    new: true,
                });
                self.epsn = psn.add(n);
                self.msg_start = self.epsn;
            }
            OpKind::AtomicWrite => self.rc_atomic_write(pkt, mem),
            OpKind::Atomic => {
                let Some(a) = h.atomic_eth else {
                    self.responder_fatal(psn, NakCode::InvalidRequest, None);
                    return;
                };
                if a.va % 8 != 0 {
                    self.responder_fatal(psn, NakCode::InvalidRequest, None);
                    return;
                }
                let key = MemKey::Remote(a.rkey);
                if mem.check(key, a.va, 8, AccessFlags::REMOTE_ATOMIC).is_err()
                    || self.foreign_window(mem, a.rkey)
                {
                    self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                    return;
                }
                let aop = if op == Opcode::RcCompareSwap {
                    AtomicOp::CompareSwap {
                        compare: a.compare,
                        swap: a.swap_add,
                    }
                } else {
                    AtomicOp::FetchAdd { add: a.swap_add }
                };
                let orig = match mem.atomic(key, a.va, aop) {
                    Ok(v) => v,
                    Err(_) => {
                        self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                        return;
                    }
                };
                self.stats.atomics_executed += 1;
                self.msn = self.msn.next();
                self.store_resource(RdRes::Atomic { psn, orig });
                self.resp_q.push_back(RespItem::AtomicAck {
                    psn,
                    orig,
                    msn: self.msn,
                    new: true,
                });
                self.epsn = psn.next();
                self.msg_start = self.epsn;
            }
            OpKind::Other => {}
        }
    }

    /// New READs and atomics whose responses are not all sent yet.
    pub(super) fn owed_rd_atomic(&self) -> usize {
        self.resp_q
            .iter()
            .filter(|i| {
                matches!(
                    i,
                    RespItem::Read { new: true, .. } | RespItem::AtomicAck { new: true, .. }
                )
            })
            .count()
    }

    pub(super) fn store_resource(&mut self, r: RdRes) {
        if self.resources.is_empty() {
            self.resources.push(RdRes::Free);
        }
        let n = self.resources.len();
        self.resources[self.res_next % n] = r;
        self.res_next = (self.res_next + 1) % n;
    }

    pub(super) fn rc_send<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        if op.is_first() || op.is_only() {
            self.msg_start = psn;
        }
        let offset = match self.in_msg {
            InMsg::Send { offset } => offset,
            _ => 0,
        };
        let Some(rwqe) = self.rq.front().copied() else {
            // Checked before; a MIDDLE/LAST without a WQE cannot happen.
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        };
        match scatter(mem, rwqe.sges.as_slice(), offset as u64, pkt.payload) {
            Ok(()) => {}
            Err(ScatterError::TooSmall) => {
                let st = self.cfg.recv_too_small_status;
                self.responder_fatal(psn, NakCode::InvalidRequest, Some((rwqe.wr_id, st)));
                return;
            }
            Err(ScatterError::Protection) => {
                self.responder_fatal(
                    psn,
                    NakCode::RemoteOperationalError,
                    Some((rwqe.wr_id, WcStatus::LocProtErr)),
                );
                return;
            }
        }
        let total = offset + pkt.payload.len();
        self.epsn = psn.next();
        if op.is_last() || op.is_only() {
            let mut invalidated = None;
            if let Some(rkey) = h.ieth {
                if self.foreign_window(mem, rkey) || mem.invalidate(rkey).is_err() {
                    // IBA class J (rxe RESPST_ERR_INVALIDATE_RKEY, mlx5
                    // alike): no ACK of any kind, the receive completes in
                    // error, the QP goes to ERR. The key stays valid.
                    self.stats.rx_bad_invalidate += 1;
                    self.in_msg = InMsg::None;
                    let owed = std::mem::take(&mut self.resp_q);
                    self.responder_error(Some((rwqe.wr_id, WcStatus::RemInvReqErr)));
                    self.resp_q = owed;
                    self.enter_error_keeping_responses(Some(WcStatus::RemInvReqErr));
                    return;
                }
                invalidated = Some(rkey);
            }
            self.rq.pop_front();
            self.msn = self.msn.next();
            self.in_msg = InMsg::None;
            self.recv_done(rwqe.wr_id, WcOpcode::Recv, total, h, invalidated);
        } else {
            self.in_msg = InMsg::Send { offset: total };
        }
        if h.bth.ack_req {
            self.push_ack(psn);
        }
    }

    pub(super) fn rc_write<M: Memory + ?Sized>(
        &mut self,
        pkt: &Received<'_>,
        mem: &mut M,
        placed: bool,
    ) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        let plen = pkt.payload.len();
        let (rkey, va, remaining, imm) = match (self.in_msg, h.reth) {
            (
                InMsg::Write {
                    rkey,
                    va,
                    remaining,
                    imm,
                },
                _,
            ) => (rkey, va, remaining, imm),
            (InMsg::None, Some(reth)) => {
                self.msg_start = psn;
                if reth.dma_len > 0
                    && (mem
                        .check(
                            MemKey::Remote(reth.rkey),
                            reth.va,
                            reth.dma_len as u64,
                            AccessFlags::REMOTE_WRITE,
                        )
                        .is_err()
                        || self.foreign_window(mem, reth.rkey))
                {
                    self.responder_fatal(psn, NakCode::RemoteAccessError, None);
                    return;
                }
                (reth.rkey, reth.va, reth.dma_len, false)
            }
            _ => {
                self.responder_fatal(psn, NakCode::InvalidRequest, None);
                return;
            }
        };
        let end = op.is_last() || op.is_only();
        // The packets must add up to the RETH length.
        if (end && plen != remaining) || (!end && plen >= remaining) {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        if plen > 0 && !placed && mem.write(MemKey::Remote(rkey), va, pkt.payload).is_err() {
            self.responder_fatal(psn, NakCode::RemoteAccessError, None);
            return;
        }
        let _ = imm;
        self.epsn = psn.next();
        if end {
            self.msn = self.msn.next();
            self.in_msg = InMsg::None;
            if op.has_immdt() {
                let rwqe = self.rq.pop_front().expect("checked at the resource step");
                let total = match h.reth {
                    Some(r) => r.dma_len,
                    None => self.write_total(),
                };
                self.recv_done(rwqe.wr_id, WcOpcode::RecvRdmaWithImm, total, h, None);
            }
            self.write_len = 0;
        } else {
            if self.in_msg == InMsg::None {
                self.write_len = remaining;
            }
            self.in_msg = InMsg::Write {
                rkey,
                va: va + plen as u64,
                remaining: remaining - plen,
                imm: false,
            };
        }
        if h.bth.ack_req {
            self.push_ack(psn);
        }
    }

    /// An ATOMIC WRITE (IBTA 1.5): 8 bytes written at once to an 8-byte
    /// aligned address the R_Key lets the peer write, then answered as a
    /// READ of nothing (an RDMA READ RESPONSE ONLY without payload, as rxe
    /// answers it), so that it is ordered and replayed as a READ is: a
    /// duplicate is answered again from its resource, never executed twice.
    fn rc_atomic_write<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let psn = h.bth.psn;
        let Some(reth) = h.reth else {
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        };
        if pkt.payload.len() != 8 || reth.dma_len != 8 || reth.va % 8 != 0 {
            // Misaligned or not 8 bytes: an invalid request, as a
            // misaligned atomic is.
            self.responder_fatal(psn, NakCode::InvalidRequest, None);
            return;
        }
        let key = MemKey::Remote(reth.rkey);
        if mem
            .check(key, reth.va, 8, AccessFlags::REMOTE_WRITE)
            .is_err()
            || self.foreign_window(mem, reth.rkey)
            || mem.write(key, reth.va, pkt.payload).is_err()
        {
            self.responder_fatal(psn, NakCode::RemoteAccessError, None);
            return;
        }
        self.msn = self.msn.next();
        self.store_resource(RdRes::Read {
            first_psn: psn,
            last_psn: psn,
            rkey: reth.rkey,
            va: reth.va,
            len: 0,
        });
        self.owe_empty_read_response(psn, reth, true);
        self.epsn = psn.next();
        self.msg_start = self.epsn;
    }

    /// Queue the answer to the ATOMIC WRITE at `psn`: an RDMA READ
    /// RESPONSE ONLY without payload (`new`: its first, not a replay).
    fn owe_empty_read_response(&mut self, psn: Psn, reth: RethRepr, new: bool) {
        self.resp_q.push_back(RespItem::Read {
            request_psn: psn,
            rkey: reth.rkey,
            va: reth.va,
            remaining: 0,
            psn,
            fresh: true,
            started: false,
            msn: self.msn,
            new,
        });
    }

    pub(super) fn write_total(&self) -> u32 {
        self.write_len
    }

    pub(super) fn rc_duplicate<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let psn = h.bth.psn;
        match op_kind(h.bth.opcode) {
            OpKind::Send | OpKind::Write => {
                // C9-105: not executed again; ACK the last good PSN.
                let last_good = self.epsn.sub(1);
                self.push_ack(last_good);
            }
            OpKind::Read => {
                let Some(reth) = h.reth else { return };
                let found = self.resources.iter().find_map(|r| match *r {
                    RdRes::Read {
                        first_psn,
                        last_psn,
                        rkey,
                        va,
                        len,
                    } if !psn.is_before(first_psn)
                        && !psn.is_after(last_psn)
                        && rkey == reth.rkey
                        && reth.va >= va
                        && reth.va.saturating_add(reth.dma_len as u64)
                            <= va.saturating_add(len as u64) =>
                    {
                        Some(first_psn)
                    }
                    _ => None,
                });
                let Some(first_psn) = found else {
                    self.stats.rx_dropped += 1;
                    return;
                };
                let _ = mem;
                if self.cfg.retransmit == RetransmitMode::SelectiveRepeat {
                    // Selective repeat asks again only for the runs of
                    // responses it misses (the RETH's length says how
                    // many), while those still queued are owed as they
                    // are: each replay goes behind them. A replay of the
                    // same run replaces the one waiting, and at most
                    // MAX_READ_REPLAYS wait per READ (the oldest goes), so
                    // duplicates cannot grow the queue without bound.
                    let waiting = |i: &RespItem| {
                        matches!(i, RespItem::Read { request_psn, started: false, new: false, .. }
                            if *request_psn == first_psn)
                    };
                    if let Some(i) = self.resp_q.iter().position(|i| {
                        waiting(i) && matches!(i, RespItem::Read { psn: p, .. } if *p == psn)
                    }) {
                        self.resp_q.remove(i);
                    } else if self.resp_q.iter().filter(|i| waiting(i)).count() >= MAX_READ_REPLAYS
                    {
                        if let Some(i) = self.resp_q.iter().position(waiting) {
                            self.resp_q.remove(i);
                        }
                    }
                } else {
                    // Re-execute from memory, responses from the request's
                    // PSN. The requester resends every request from this
                    // one on (go-back-N), so the responses still queued for
                    // this READ and the ones after it are owed again by
                    // those resends: they go, and this READ restarts from
                    // the requested PSN, as rxe's replay of a resource
                    // does. What a responder holds per READ stays one
                    // descriptor, so duplicates cannot grow the queue, and
                    // responses keep request order.
                    self.resp_q.retain(|i| {
                        !matches!(i, RespItem::Read { request_psn, .. }
                            if !request_psn.is_before(first_psn))
                    });
                }
                self.resp_q.push_back(RespItem::Read {
                    request_psn: first_psn,
                    rkey: reth.rkey,
                    va: reth.va,
                    remaining: reth.dma_len,
                    psn,
                    fresh: psn == first_psn,
                    started: false,
                    msn: self.msn,
                    new: false,
                });
            }
            OpKind::AtomicWrite => {
                // Answered again from its resource (a READ of nothing),
                // never written twice: the requester resends from here on,
                // so what is queued from this PSN on is owed again.
                let found = self.resources.iter().any(
                    |r| matches!(*r, RdRes::Read { first_psn, len: 0, .. } if first_psn == psn),
                );
                let Some(reth) = h.reth.filter(|_| found) else {
                    self.stats.rx_dropped += 1;
                    return;
                };
                self.resp_q.retain(|i| {
                    !matches!(i, RespItem::Read { request_psn, .. }
                        if !request_psn.is_before(psn))
                });
                self.owe_empty_read_response(psn, reth, false);
            }
            OpKind::Atomic => {
                let found = self.resources.iter().find_map(|r| match *r {
                    RdRes::Atomic { psn: p, orig } if p == psn => Some(orig),
                    _ => None,
                });
                if let Some(orig) = found {
                    // Replay the saved result; never execute twice.
                    self.resp_q.push_back(RespItem::AtomicAck {
                        psn,
                        orig,
                        msn: self.msn,
                        new: false,
                    });
                } else {
                    self.stats.rx_dropped += 1;
                }
            }
            OpKind::Other => self.stats.rx_dropped += 1,
        }
    }

    pub(super) fn uc_request<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let op = h.bth.opcode;
        let psn = h.bth.psn;
        if psn != self.epsn {
            // Lost packets: drop the message in progress, resynchronise on
            // the next FIRST or ONLY.
            self.in_msg = InMsg::None;
        }
        self.epsn = psn.next();
        let kind = op_kind(op);
        let seq_ok = match self.in_msg {
            InMsg::None => op.is_first() || op.is_only(),
            InMsg::Send { .. } => kind == OpKind::Send && (op.is_middle() || op.is_last()),
            InMsg::Write { .. } => kind == OpKind::Write && (op.is_middle() || op.is_last()),
        };
        let plen = pkt.payload.len();
        if !seq_ok || !payload_fits(op, plen, self.pmtu) {
            self.in_msg = InMsg::None;
            self.stats.rx_dropped += 1;
            return;
        }
        match kind {
            OpKind::Send => {
                let Some(rwqe) = self.rq.front().copied() else {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                };
                let offset = match self.in_msg {
                    InMsg::Send { offset } => offset,
                    _ => 0,
                };
                if scatter(mem, rwqe.sges.as_slice(), offset as u64, pkt.payload).is_err() {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                let total = offset + plen;
                if op.is_last() || op.is_only() {
                    self.rq.pop_front();
                    self.in_msg = InMsg::None;
                    self.recv_done(rwqe.wr_id, WcOpcode::Recv, total, h, None);
                } else {
                    self.in_msg = InMsg::Send { offset: total };
                }
            }
            OpKind::Write => {
                let (rkey, va, remaining) = match (self.in_msg, h.reth) {
                    (
                        InMsg::Write {
                            rkey,
                            va,
                            remaining,
                            ..
                        },
                        _,
                    ) => (rkey, va, remaining),
                    (InMsg::None, Some(r)) => {
                        if !self
                            .attr
                            .qp_access_flags
                            .contains(AccessFlags::REMOTE_WRITE)
                            || (r.dma_len > 0
                                && (mem
                                    .check(
                                        MemKey::Remote(r.rkey),
                                        r.va,
                                        r.dma_len as u64,
                                        AccessFlags::REMOTE_WRITE,
                                    )
                                    .is_err()
                                    || self.foreign_window(mem, r.rkey)))
                        {
                            self.stats.rx_dropped += 1;
                            return;
                        }
                        self.write_len = r.dma_len;
                        (r.rkey, r.va, r.dma_len)
                    }
                    _ => {
                        self.stats.rx_dropped += 1;
                        return;
                    }
                };
                let end = op.is_last() || op.is_only();
                if (end && plen != remaining) || (!end && plen >= remaining) {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                if end && op.has_immdt() && self.rq.is_empty() {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                if plen > 0 && mem.write(MemKey::Remote(rkey), va, pkt.payload).is_err() {
                    self.in_msg = InMsg::None;
                    self.stats.rx_dropped += 1;
                    return;
                }
                if end {
                    self.in_msg = InMsg::None;
                    if op.has_immdt() {
                        let rwqe = self.rq.pop_front().expect("checked above");
                        self.recv_done(
                            rwqe.wr_id,
                            WcOpcode::RecvRdmaWithImm,
                            self.write_len,
                            h,
                            None,
                        );
                    }
                } else {
                    self.in_msg = InMsg::Write {
                        rkey,
                        va: va + plen as u64,
                        remaining: remaining - plen,
                        imm: false,
                    };
                }
            }
            _ => self.stats.rx_dropped += 1,
        }
    }

    pub(super) fn ud_request<M: Memory + ?Sized>(&mut self, pkt: &Received<'_>, mem: &mut M) {
        let h = &pkt.headers;
        let Some(deth) = h.deth else {
            self.stats.rx_dropped += 1;
            return;
        };
        if deth.qkey != self.attr.qkey {
            self.stats.rx_bad_qkey += 1;
            self.stats.rx_dropped += 1;
            return;
        }
        if pkt.payload.len() > self.pmtu {
            self.stats.rx_dropped += 1;
            return;
        }
        let Some(rwqe) = self.rq.front().copied() else {
            self.stats.rx_dropped += 1;
            return;
        };
        let zeros = [0u8; 40];
        let grh = match (pkt.grh, pkt.payload) {
            (Some(g), _) => Payload::Bytes(g),
            (None, Payload::Bytes(_)) => Payload::Bytes(&zeros),
            (None, Payload::Len(_)) => Payload::Len(40),
        };
        let sges = rwqe.sges.as_slice();
        self.rq.pop_front();
        let status =
            match scatter(mem, sges, 0, grh).and_then(|()| scatter(mem, sges, 40, pkt.payload)) {
                Ok(()) => WcStatus::Success,
                Err(ScatterError::TooSmall) => WcStatus::LocLenErr,
                Err(ScatterError::Protection) => WcStatus::LocProtErr,
            };
        self.completions.push_back(Completion {
            wr_id: rwqe.wr_id,
            status,
            opcode: WcOpcode::Recv,
            is_recv: true,
            qp_num: self.cfg.qpn,
            byte_len: 40 + pkt.payload.len(),
            imm_data: h.immdt,
            invalidated_rkey: None,
            src_qp: Some(deth.src_qp),
            grh: true,
            solicited: h.bth.solicited,
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ScatterError {
    TooSmall,
    Protection,
}

/// Write `data` into `sges` starting `off` bytes in, with LOCAL_WRITE
/// checks on every piece before anything is written.
pub(super) fn scatter<M: Memory + ?Sized>(
    mem: &mut M,
    sges: &[Sge],
    off: u64,
    data: Payload<'_>,
) -> Result<(), ScatterError> {
    let total: u64 = sges.iter().map(|s| s.length as u64).sum();
    if off + data.len() as u64 > total {
        return Err(ScatterError::TooSmall);
    }
    for pass in 0..2 {
        let mut skip = off;
        let mut done = 0u32;
        for s in sges {
            if done == data.len() {
                break;
            }
            let l = s.length as u64;
            if skip >= l {
                skip -= l;
                continue;
            }
            let take = ((l - skip) as u32).min(data.len() - done);
            let key = MemKey::Local(s.lkey);
            let addr = s.addr.wrapping_add(skip);
            if pass == 0 {
                mem.check(key, addr, take as u64, AccessFlags::LOCAL_WRITE)
                    .map_err(|_| ScatterError::Protection)?;
            } else {
                mem.write(key, addr, data.slice(done, take))
                    .map_err(|_| ScatterError::Protection)?;
            }
            done += take;
            skip = 0;
        }
    }
    Ok(())
}
