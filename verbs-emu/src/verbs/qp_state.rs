//! The QP state machine and `ibv_modify_qp` mask rules (ROCEV2.md §5.9,
//! the kernel's `ib_modify_qp_is_ok` table).
//!
//! [`check_modify`] is pure: it says whether a modify from a state with a
//! given mask is allowed, and if not, exactly why. Backends that do not get
//! this check from a kernel (the UDP emulation) call it before applying a
//! modify; nothing is changed when it fails. The table itself is the
//! transport engine's ([`crate::transport::transition_masks`]), so the API
//! and the engine cannot disagree about a transition.

use super::error::VerbsError;
use super::types::{QpAttr, QpAttrMask as M, QpState, QpType};
use crate::transport as tp;

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
/// ([`crate::transport::transition_masks`]), in this API's types.
pub fn transition_rule(qp_type: QpType, from: QpState, to: QpState) -> Option<TransitionRule> {
    let (required, optional) = tp::transition_masks(qp_type, from, to)?;
    Some(TransitionRule {
        required: M(required.bits()),
        optional: M(optional.bits()),
    })
}

/// Checks a modify of a `qp_type` QP currently in `current` with `attr`.
/// Returns the target state on success.
///
/// Without STATE in the mask the modify keeps the state (`current ->
/// current`), as `ibv_modify_qp` does.
pub fn check_modify(
    qp_type: QpType,
    current: QpState,
    attr: &QpAttr,
) -> Result<QpState, VerbsError> {
    let mask = attr.mask;
    if mask.contains(M::CUR_STATE) && attr.cur_qp_state != current {
        return Err(VerbsError::WrongCurrentState {
            asserted: attr.cur_qp_state,
            actual: current,
        });
    }
    let to = if mask.contains(M::STATE) {
        attr.qp_state
    } else {
        current
    };
    let Some(r) = transition_rule(qp_type, current, to) else {
        return Err(VerbsError::InvalidTransition {
            qp_type,
            from: current,
            to,
        });
    };
    let given = mask.difference(M::STATE);
    let missing = r.required.difference(given);
    if !missing.is_empty() {
        return Err(VerbsError::MissingAttributes {
            from: current,
            to,
            missing,
        });
    }
    let unexpected = given.difference(r.required | r.optional);
    if !unexpected.is_empty() {
        return Err(VerbsError::UnexpectedAttributes {
            from: current,
            to,
            unexpected,
        });
    }
    if mask.contains(M::CUR_STATE)
        && !matches!(
            current,
            QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe
        )
    {
        return Err(VerbsError::UnexpectedAttributes {
            from: current,
            to,
            unexpected: M::CUR_STATE,
        });
    }
    if mask.contains(M::RETRY_CNT) && attr.retry_cnt > 7 {
        return Err(VerbsError::invalid(
            "ibv_modify_qp",
            format!("retry_cnt {} is above 7", attr.retry_cnt),
        ));
    }
    if mask.contains(M::RNR_RETRY) && attr.rnr_retry > 7 {
        return Err(VerbsError::invalid(
            "ibv_modify_qp",
            format!("rnr_retry {} is above 7", attr.rnr_retry),
        ));
    }
    if mask.contains(M::MIN_RNR_TIMER) && attr.min_rnr_timer > 31 {
        return Err(VerbsError::invalid(
            "ibv_modify_qp",
            format!("min_rnr_timer {} is above 31", attr.min_rnr_timer),
        ));
    }
    if mask.contains(M::TIMEOUT) && attr.timeout > 31 {
        return Err(VerbsError::invalid(
            "ibv_modify_qp",
            format!("timeout {} is above 31", attr.timeout),
        ));
    }
    if mask.contains(M::PORT) && attr.port_num != 1 {
        return Err(VerbsError::invalid(
            "ibv_modify_qp",
            format!(
                "port_num {} does not exist (the device has port 1)",
                attr.port_num
            ),
        ));
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::verbs::types::{AccessFlags, AhAttr, Gid, Mtu};
    use crate::wire::Qpn;

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
