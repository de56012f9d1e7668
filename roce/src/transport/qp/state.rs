//! QP state (rxe: `rxe_qp.c`): `ibv_modify_qp` with the one attribute
//! validator of the crate, the kernel's transition table
//! ([`transition_masks`]), RESET and the move to ERR (flushing both
//! queues, keeping what the responder still owes).

use super::*;

impl Qp {
    /// `ibv_modify_qp`: apply the attributes whose bits are in `mask` and
    /// move to `attr.qp_state` (without STATE in the mask the QP stays in
    /// its state, as `ibv_modify_qp` does). [`check_modify`] decides first;
    /// when it refuses, nothing changes. Going to ERR flushes every WR;
    /// going to RESET clears the queues and the PSN state.
    pub fn modify(&mut self, attr: &QpAttr, mask: QpAttrMask) -> Result<(), ModifyError> {
        let from = self.state;
        let to = check_modify(
            self.cfg.qp_type,
            from,
            attr,
            mask,
            Some(&self.cfg.pkey_table[..]),
        )?;

        // Apply.
        let a = &mut self.attr;
        if mask.contains(QpAttrMask::ACCESS_FLAGS) {
            a.qp_access_flags = attr.qp_access_flags;
        }
        if mask.contains(QpAttrMask::PKEY_INDEX) {
            a.pkey_index = attr.pkey_index;
        }
        if mask.contains(QpAttrMask::PORT) {
            a.port_num = attr.port_num;
        }
        if mask.contains(QpAttrMask::QKEY) {
            a.qkey = attr.qkey;
        }
        if mask.contains(QpAttrMask::AV) {
            a.ah = attr.ah;
        }
        if mask.contains(QpAttrMask::PATH_MTU) {
            a.path_mtu = attr.path_mtu;
        }
        if mask.contains(QpAttrMask::TIMEOUT) {
            a.timeout = attr.timeout;
        }
        if mask.contains(QpAttrMask::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt;
        }
        if mask.contains(QpAttrMask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry;
        }
        if mask.contains(QpAttrMask::RQ_PSN) {
            a.rq_psn = attr.rq_psn & Psn::MASK;
        }
        if mask.contains(QpAttrMask::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = attr.max_rd_atomic;
        }
        if mask.contains(QpAttrMask::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer;
        }
        if mask.contains(QpAttrMask::SQ_PSN) {
            a.sq_psn = attr.sq_psn & Psn::MASK;
        }
        if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if mask.contains(QpAttrMask::DEST_QPN) {
            a.dest_qp_num = attr.dest_qp_num;
        }
        a.qp_state = to;
        a.cur_qp_state = to;
        self.pmtu = super::packet_mtu(&self.cfg, &self.attr);

        match to {
            QpState::Reset => self.reset(),
            QpState::Err => self.enter_error(None),
            QpState::Rtr if from == QpState::Init => {
                self.epsn = Psn::new(self.attr.rq_psn);
                self.msn = Msn::new(0);
                self.nak_sent = false;
                self.in_msg = InMsg::None;
                self.resources = vec![RdRes::Free; self.attr.max_dest_rd_atomic.max(1) as usize];
                self.res_next = 0;
                self.state = to;
            }
            QpState::Rts if from == QpState::Rtr => {
                self.next_psn = Psn::new(self.attr.sq_psn);
                self.comp_psn = self.next_psn;
                self.retx_until = self.next_psn;
                self.sent_psn = self.next_psn;
                self.retries_left = self.attr.retry_cnt;
                self.rnr_left = self.attr.rnr_retry;
                self.state = to;
            }
            _ => {
                if mask.contains(QpAttrMask::MAX_DEST_RD_ATOMIC)
                    && self.resources.len() != self.attr.max_dest_rd_atomic.max(1) as usize
                {
                    self.resources =
                        vec![RdRes::Free; self.attr.max_dest_rd_atomic.max(1) as usize];
                    self.res_next = 0;
                }
                self.state = to;
                self.check_drained();
            }
        }
        Ok(())
    }

    pub(super) fn reset(&mut self) {
        let cfg = self.cfg;
        let attr = self.attr;
        *self = Qp::new(cfg);
        self.attr = QpAttr {
            qp_state: QpState::Reset,
            cur_qp_state: QpState::Reset,
            ..attr
        };
        self.pmtu = super::packet_mtu(&cfg, &attr);
    }

    pub(super) fn enter_error(&mut self, cause: Option<WcStatus>) {
        self.enter_error_keeping_responses(cause);
        // Keep only NAKs (they tell the peer why) and the ACKs of atomics
        // that ran (a peer must learn what its atomic did).
        self.resp_q.retain(|i| {
            matches!(
                i,
                RespItem::Ack {
                    syndrome: AethSyndrome::Nak(_),
                    ..
                } | RespItem::AtomicAck { new: true, .. }
            )
        });
    }

    /// ERR: flush both queues, stop the requester; the responses queued
    /// stay queued.
    pub(super) fn enter_error_keeping_responses(&mut self, cause: Option<WcStatus>) {
        self.state = QpState::Err;
        self.attr.qp_state = QpState::Err;
        while let Some(w) = self.sq.pop_front() {
            self.push_flush(w.wr.wr_id, w.wr.op.wc_opcode(), false);
        }
        while let Some(r) = self.rq.pop_front() {
            self.push_flush(r.wr_id, WcOpcode::Recv, true);
        }
        self.send_idx = 0;
        self.send_pkt = 0;
        self.rto_deadline = None;
        self.rnr_deadline = None;
        self.pacing_blocked = false;
        self.pacer_held = false;
        self.rd_atomic_inflight = 0;
        if let Some(s) = cause {
            self.events.push_back(QpEvent::Error(s));
        }
    }

    pub(super) fn check_drained(&mut self) {
        if self.state == QpState::Sqd
            && !self.has_outstanding()
            && !self.events.contains(&QpEvent::SqDrained)
        {
            self.events.push_back(QpEvent::SqDrained);
        }
    }

    pub(super) fn push_flush(&mut self, wr_id: u64, opcode: WcOpcode, is_recv: bool) {
        self.completions.push_back(Completion {
            wr_id,
            status: WcStatus::WrFlushErr,
            opcode,
            is_recv,
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

/// The one QP attribute validator of the crate (`ib_modify_qp_is_ok` and
/// the range checks of `ib_modify_qp`): may a `qp_type` QP in `from` take
/// `attr` with `mask`? Returns the target state (`from` when STATE is not
/// in the mask).
///
/// Checks, in order: CUR_STATE against `from`; the transition table
/// ([`transition_masks`]); required and accepted attributes; the ranges of
/// `timeout` (5 bits), `retry_cnt` and `rnr_retry` (3 bits),
/// `min_rnr_timer` (5 bits), `max_rd_atomic` and `max_dest_rd_atomic` (at
/// most 16), `port_num` (the device has port 1) and, when `pkey_table` is
/// given, that `pkey_index` names a valid entry. The engine's
/// [`Qp::modify`] and the verbs API (`verbs::qp_state::check_modify`, for
/// backends without an engine) both call it, so they cannot disagree.
pub fn check_modify(
    qp_type: QpType,
    from: QpState,
    attr: &QpAttr,
    mask: QpAttrMask,
    pkey_table: Option<&[u16]>,
) -> Result<QpState, ModifyError> {
    if mask.contains(QpAttrMask::CUR_STATE) && attr.cur_qp_state != from {
        return Err(ModifyError::CurStateMismatch {
            claimed: attr.cur_qp_state,
            actual: from,
        });
    }
    let to = if mask.contains(QpAttrMask::STATE) {
        attr.qp_state
    } else {
        from
    };
    let (required, optional) =
        transition_masks(qp_type, from, to).ok_or(ModifyError::InvalidTransition { from, to })?;
    let given = mask.difference(QpAttrMask::STATE);
    let missing = required.difference(given);
    if !missing.is_empty() {
        return Err(ModifyError::MissingAttributes { from, to, missing });
    }
    let unexpected = given.difference(required | optional);
    if !unexpected.is_empty() {
        return Err(ModifyError::UnexpectedAttributes {
            from,
            to,
            unexpected,
        });
    }
    let check = |bit: QpAttrMask, ok: bool, why: &'static str| {
        if mask.contains(bit) && !ok {
            Err(ModifyError::InvalidValue { attr: bit, why })
        } else {
            Ok(())
        }
    };
    check(
        QpAttrMask::TIMEOUT,
        attr.timeout <= 31,
        "timeout is 5 bits (0..=31)",
    )?;
    check(
        QpAttrMask::RETRY_CNT,
        attr.retry_cnt <= 7,
        "retry_cnt is 3 bits (0..=7)",
    )?;
    check(
        QpAttrMask::RNR_RETRY,
        attr.rnr_retry <= 7,
        "rnr_retry is 3 bits (0..=7)",
    )?;
    check(
        QpAttrMask::MIN_RNR_TIMER,
        attr.min_rnr_timer <= 31,
        "min_rnr_timer is 5 bits (0..=31)",
    )?;
    check(
        QpAttrMask::MAX_QP_RD_ATOMIC,
        attr.max_rd_atomic <= 16,
        "max_rd_atomic is at most 16",
    )?;
    check(
        QpAttrMask::MAX_DEST_RD_ATOMIC,
        attr.max_dest_rd_atomic <= 16,
        "max_dest_rd_atomic is at most 16",
    )?;
    check(
        QpAttrMask::PORT,
        attr.port_num == 1,
        "port_num names no port (the device has port 1)",
    )?;
    if let Some(table) = pkey_table {
        check(
            QpAttrMask::PKEY_INDEX,
            table
                .get(attr.pkey_index as usize)
                .is_some_and(|&k| k & 0x7FFF != 0),
            "pkey_index names no valid entry of the P_Key table",
        )?;
    }
    Ok(to)
}

/// The (required, optional) attribute masks of a transition, or `None` when
/// the kernel table has no such transition (ROCEV2.md §5.9). STATE is
/// always required and in neither mask. The one table of the crate: the
/// verbs API's `ibv_modify_qp` checks use it too.
pub fn transition_masks(t: QpType, from: QpState, to: QpState) -> Option<(QpAttrMask, QpAttrMask)> {
    use QpAttrMask as M;
    use QpState::*;
    let none = M::EMPTY;
    let r = match (from, to) {
        (Reset, Reset) => (none, none),
        (Reset, Init) => match t {
            QpType::Ud => (M::PKEY_INDEX | M::PORT | M::QKEY, none),
            _ => (M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS, none),
        },
        (Init, Init) => match t {
            QpType::Ud => (none, M::PKEY_INDEX | M::PORT | M::QKEY),
            _ => (none, M::PKEY_INDEX | M::PORT | M::ACCESS_FLAGS),
        },
        (Init, Rtr) => match t {
            QpType::Ud => (none, M::PKEY_INDEX | M::QKEY),
            QpType::Uc => (
                M::AV | M::PATH_MTU | M::DEST_QPN | M::RQ_PSN,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
            ),
            QpType::Rc => (
                M::AV
                    | M::PATH_MTU
                    | M::DEST_QPN
                    | M::RQ_PSN
                    | M::MAX_DEST_RD_ATOMIC
                    | M::MIN_RNR_TIMER,
                M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX,
            ),
        },
        (Rtr, Rts) => match t {
            QpType::Ud => (M::SQ_PSN, M::CUR_STATE | M::QKEY),
            QpType::Uc => (
                M::SQ_PSN,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                M::TIMEOUT | M::RETRY_CNT | M::RNR_RETRY | M::SQ_PSN | M::MAX_QP_RD_ATOMIC,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::PATH_MIG_STATE,
            ),
        },
        (Rts, Rts) => match t {
            QpType::Ud => (none, M::CUR_STATE | M::QKEY),
            QpType::Uc => (
                none,
                M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                none,
                M::CUR_STATE | M::ACCESS_FLAGS | M::ALT_PATH | M::PATH_MIG_STATE | M::MIN_RNR_TIMER,
            ),
        },
        (Rts, Sqd) => (none, M::EN_SQD_ASYNC_NOTIFY),
        (Sqd, Rts) => match t {
            QpType::Ud => (none, M::CUR_STATE | M::QKEY),
            QpType::Uc => (
                none,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                none,
                M::CUR_STATE | M::ALT_PATH | M::ACCESS_FLAGS | M::MIN_RNR_TIMER | M::PATH_MIG_STATE,
            ),
        },
        (Sqd, Sqd) => match t {
            QpType::Ud => (none, M::PKEY_INDEX | M::QKEY),
            QpType::Uc => (
                none,
                M::PORT | M::AV | M::ALT_PATH | M::ACCESS_FLAGS | M::PKEY_INDEX | M::PATH_MIG_STATE,
            ),
            QpType::Rc => (
                none,
                M::PORT
                    | M::AV
                    | M::TIMEOUT
                    | M::RETRY_CNT
                    | M::RNR_RETRY
                    | M::MAX_QP_RD_ATOMIC
                    | M::MAX_DEST_RD_ATOMIC
                    | M::ALT_PATH
                    | M::ACCESS_FLAGS
                    | M::PKEY_INDEX
                    | M::MIN_RNR_TIMER
                    | M::PATH_MIG_STATE,
            ),
        },
        (Sqe, Rts) => match t {
            QpType::Ud => (none, M::CUR_STATE | M::QKEY),
            QpType::Uc => (none, M::CUR_STATE | M::ACCESS_FLAGS),
            QpType::Rc => return None,
        },
        (Init | Rtr | Rts | Sqd | Sqe | Err, Reset | Err) => (none, none),
        _ => return None,
    };
    Some(r)
}
