//! The QP state machine and `ibv_modify_qp` mask rules (ROCEV2.md §5.9,
//! the kernel's `ib_modify_qp_is_ok` table), in the verbs API's types.
//!
//! There is one validator: the transport engine's
//! ([`roce::transport::check_modify`]), with its table
//! ([`roce::transport::transition_masks`]). [`check_modify`] here converts
//! a verbs [`QpAttr`] with [`engine_attr`] and maps the engine's
//! [`ModifyError`] into a [`VerbsError`] ([`modify_error`]), for backends
//! that have no engine (real hardware: the kernel would refuse too, but
//! only with EINVAL). The UDP backend's engine runs the same validator in
//! `Qp::modify`. Nothing is changed when the check fails.

use super::error::VerbsError;
use super::types::{QpAttr, QpAttrMask as M, QpState, QpType};
use roce::transport::{self as tp, ModifyError};

/// Required and optional attributes of one transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransitionRule {
    /// Must be present (besides STATE).
    pub required: M,
    /// May be present.
    pub optional: M,
}

/// The rule for `from -> to` on a QP of type `qp_type`, or `None` when the
/// transition does not exist: the transport engine's table
/// ([`roce::transport::transition_masks`]).
pub fn transition_rule(qp_type: QpType, from: QpState, to: QpState) -> Option<TransitionRule> {
    let (required, optional) = tp::transition_masks(qp_type, from, to)?;
    Some(TransitionRule { required, optional })
}

/// The engine's form of a verbs [`QpAttr`] for a QP currently in `current`
/// (the target state is `current` when STATE is not in the mask). The
/// address vector is left as the empty handle: each backend resolves the
/// GID its own way.
pub fn engine_attr(attr: &QpAttr, current: QpState) -> tp::QpAttr {
    tp::QpAttr {
        qp_state: if attr.mask.contains(M::STATE) {
            attr.qp_state
        } else {
            current
        },
        cur_qp_state: attr.cur_qp_state,
        qp_access_flags: attr.qp_access_flags,
        pkey_index: attr.pkey_index,
        port_num: attr.port_num,
        qkey: attr.qkey,
        ah: tp::AddressHandle(0),
        path_mtu: attr.path_mtu,
        timeout: attr.timeout,
        retry_cnt: attr.retry_cnt,
        rnr_retry: attr.rnr_retry,
        rq_psn: attr.rq_psn,
        max_rd_atomic: attr.max_rd_atomic,
        min_rnr_timer: attr.min_rnr_timer,
        sq_psn: attr.sq_psn,
        max_dest_rd_atomic: attr.max_dest_rd_atomic,
        dest_qp_num: attr.dest_qp_num,
    }
}

/// The attributes `query_qp` reports (every one [`QpAttr`] has a field
/// for).
pub const QUERY_MASK: M = M(M::STATE.0
    | M::CUR_STATE.0
    | M::ACCESS_FLAGS.0
    | M::PKEY_INDEX.0
    | M::PORT.0
    | M::QKEY.0
    | M::AV.0
    | M::PATH_MTU.0
    | M::TIMEOUT.0
    | M::RETRY_CNT.0
    | M::RNR_RETRY.0
    | M::RQ_PSN.0
    | M::SQ_PSN.0
    | M::MAX_QP_RD_ATOMIC.0
    | M::MAX_DEST_RD_ATOMIC.0
    | M::MIN_RNR_TIMER.0
    | M::DEST_QPN.0);

/// The engine's refusal of a modify of a `qp_type` QP, as the verbs error
/// that says the same thing.
pub fn modify_error(qp_type: QpType, e: ModifyError) -> VerbsError {
    match e {
        ModifyError::InvalidTransition { from, to } => {
            VerbsError::InvalidTransition { qp_type, from, to }
        }
        ModifyError::MissingAttributes { from, to, missing } => {
            VerbsError::MissingAttributes { from, to, missing }
        }
        ModifyError::UnexpectedAttributes {
            from,
            to,
            unexpected,
        } => VerbsError::UnexpectedAttributes {
            from,
            to,
            unexpected,
        },
        ModifyError::CurStateMismatch { claimed, actual } => VerbsError::WrongCurrentState {
            asserted: claimed,
            actual,
        },
        ModifyError::InvalidValue { attr, why } => {
            VerbsError::invalid("ibv_modify_qp", format!("{attr}: {why}"))
        }
    }
}

/// Checks a modify of a `qp_type` QP currently in `current` with `attr`,
/// with the engine's validator. Returns the target state on success.
///
/// Without STATE in the mask the modify keeps the state (`current ->
/// current`), as `ibv_modify_qp` does. The P_Key table is the device's, so
/// `pkey_index` is left to the backend.
pub fn check_modify(
    qp_type: QpType,
    current: QpState,
    attr: &QpAttr,
) -> Result<QpState, VerbsError> {
    tp::check_modify(
        qp_type,
        current,
        &engine_attr(attr, current),
        attr.mask,
        None,
    )
    .map_err(|e| modify_error(qp_type, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::types::{AccessFlags, AhAttr, Gid, Mtu};
    use roce::wire::Qpn;

    fn to_init() -> QpAttr {
        QpAttr::new()
            .with_state(QpState::Init)
            .with_pkey_index(0)
            .with_port(1)
            .with_access_flags(AccessFlags::REMOTE_WRITE)
    }

    #[test]
    fn rc_reset_to_init_needs_port_pkey_access() {
        assert_eq!(
            check_modify(QpType::Rc, QpState::Reset, &to_init()).unwrap(),
            QpState::Init
        );
        let partial = QpAttr::new().with_state(QpState::Init).with_port(1);
        match check_modify(QpType::Rc, QpState::Reset, &partial) {
            Err(VerbsError::MissingAttributes { missing, .. }) => {
                assert_eq!(missing, M::PKEY_INDEX | M::ACCESS_FLAGS)
            }
            other => panic!("expected MissingAttributes, got {other:?}"),
        }
    }

    #[test]
    fn rc_init_to_rtr_rejects_send_side_attributes() {
        let a = QpAttr::new()
            .with_state(QpState::Rtr)
            .with_av(AhAttr::to_gid(Gid::default()))
            .with_path_mtu(Mtu::Mtu1024)
            .with_dest_qpn(Qpn::new(5))
            .with_rq_psn(0)
            .with_max_dest_rd_atomic(1)
            .with_min_rnr_timer(12);
        assert_eq!(
            check_modify(QpType::Rc, QpState::Init, &a).unwrap(),
            QpState::Rtr
        );
        match check_modify(QpType::Rc, QpState::Init, &a.with_sq_psn(3)) {
            Err(VerbsError::UnexpectedAttributes { unexpected, .. }) => {
                assert_eq!(unexpected, M::SQ_PSN)
            }
            other => panic!("expected UnexpectedAttributes, got {other:?}"),
        }
    }

    #[test]
    fn reset_to_err_and_skipping_states_are_refused() {
        let e = QpAttr::new().with_state(QpState::Err);
        assert!(matches!(
            check_modify(QpType::Rc, QpState::Reset, &e),
            Err(VerbsError::InvalidTransition {
                from: QpState::Reset,
                to: QpState::Err,
                ..
            })
        ));
        let rts = QpAttr::new().with_state(QpState::Rts).with_sq_psn(0);
        assert!(matches!(
            check_modify(QpType::Ud, QpState::Init, &rts),
            Err(VerbsError::InvalidTransition { .. })
        ));
        assert_eq!(
            check_modify(QpType::Rc, QpState::Rts, &e).unwrap(),
            QpState::Err
        );
        assert!(matches!(
            check_modify(
                QpType::Rc,
                QpState::Err,
                &QpAttr::new().with_state(QpState::Rts)
            ),
            Err(VerbsError::InvalidTransition { .. })
        ));
    }

    #[test]
    fn ud_path_needs_qkey_then_nothing_then_sq_psn() {
        let init = QpAttr::new()
            .with_state(QpState::Init)
            .with_pkey_index(0)
            .with_port(1)
            .with_qkey(0x11111111);
        assert!(check_modify(QpType::Ud, QpState::Reset, &init).is_ok());
        assert!(check_modify(
            QpType::Ud,
            QpState::Init,
            &QpAttr::new().with_state(QpState::Rtr)
        )
        .is_ok());
        assert!(matches!(
            check_modify(
                QpType::Ud,
                QpState::Rtr,
                &QpAttr::new().with_state(QpState::Rts)
            ),
            Err(VerbsError::MissingAttributes { .. })
        ));
    }

    #[test]
    fn the_verbs_check_is_the_engines_validator_with_its_error_mapped() {
        // Ranges the verbs side once checked on its own, and the engine's
        // that it did not (max_rd_atomic): one validator says both.
        let rts = QpAttr::new()
            .with_state(QpState::Rts)
            .with_sq_psn(0)
            .with_timeout(14)
            .with_retry_cnt(7)
            .with_rnr_retry(7);
        for (attr, bit) in [
            (rts.with_max_rd_atomic(17), M::MAX_QP_RD_ATOMIC),
            (rts.with_max_rd_atomic(1).with_timeout(32), M::TIMEOUT),
            (rts.with_max_rd_atomic(1).with_retry_cnt(8), M::RETRY_CNT),
        ] {
            let engine = tp::check_modify(
                QpType::Rc,
                QpState::Rtr,
                &engine_attr(&attr, QpState::Rtr),
                attr.mask,
                None,
            );
            assert!(
                matches!(engine, Err(ModifyError::InvalidValue { attr: a, .. }) if a == bit),
                "{engine:?}"
            );
            match check_modify(QpType::Rc, QpState::Rtr, &attr) {
                Err(VerbsError::InvalidArgument { verb, why }) => {
                    assert_eq!(verb, "ibv_modify_qp");
                    assert!(why.starts_with(&bit.to_string()), "{why}");
                }
                other => panic!("expected InvalidArgument, got {other:?}"),
            }
        }
        let port2 = to_init().with_port(2);
        assert!(matches!(
            check_modify(QpType::Rc, QpState::Reset, &port2),
            Err(VerbsError::InvalidArgument { ref why, .. }) if why.contains("port_num")
        ));
        // Without STATE the QP stays where it is: RTS -> RTS.
        let min_rnr = QpAttr::new().with_min_rnr_timer(3);
        assert_eq!(
            check_modify(QpType::Rc, QpState::Rts, &min_rnr).unwrap(),
            QpState::Rts
        );
    }

    #[test]
    fn cur_state_must_match() {
        let a = QpAttr::new()
            .with_state(QpState::Rts)
            .with_cur_state(QpState::Rtr);
        assert!(matches!(
            check_modify(QpType::Rc, QpState::Rts, &a),
            Err(VerbsError::WrongCurrentState { .. })
        ));
    }
}
