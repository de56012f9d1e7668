//! Errors of the verbs API, by audience (STYLE.md rule 6): API misuse says
//! precisely why; backend failures name the verb and carry the source.

use super::types::{QpAttrMask, QpState, QpType};

/// Why a verb failed.
#[derive(Debug, thiserror::Error)]
pub enum VerbsError {
    /// The OS or the device refused the verb.
    #[error("{verb} failed: {source}")]
    Os {
        /// The verb, e.g. `"ibv_reg_mr"`.
        verb: &'static str,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// An argument is not acceptable; `why` says which and what was expected.
    #[error("{verb}: invalid argument: {why}")]
    InvalidArgument {
        /// The verb.
        verb: &'static str,
        /// The explanation.
        why: String,
    },
    /// The QP state machine does not have this transition (ROCEV2.md §5.9).
    #[error("invalid QP transition {from} -> {to} for a {qp_type} QP")]
    InvalidTransition {
        /// QP type.
        qp_type: QpType,
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
    },
    /// The transition needs attributes that were not given.
    #[error("QP transition {from} -> {to} needs attributes {missing:?}")]
    MissingAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// The required mask bits that were absent.
        missing: QpAttrMask,
    },
    /// The transition does not accept some of the given attributes.
    #[error("QP transition {from} -> {to} does not accept attributes {unexpected:?}")]
    UnexpectedAttributes {
        /// Current state.
        from: QpState,
        /// Requested state.
        to: QpState,
        /// The mask bits that are neither required nor optional.
        unexpected: QpAttrMask,
    },
    /// The asserted current state (CUR_STATE) is not the QP's state.
    #[error("QP is in {actual}, not in the asserted current state {asserted}")]
    WrongCurrentState {
        /// What the caller asserted.
        asserted: QpState,
        /// What the QP is in.
        actual: QpState,
    },
    /// A post in a state that does not allow it.
    #[error("{verb}: QP in state {state} does not accept this post")]
    BadQpState {
        /// The verb.
        verb: &'static str,
        /// The QP's state.
        state: QpState,
    },
    /// The queue is full.
    #[error("{verb}: queue full ({depth} entries outstanding)")]
    QueueFull {
        /// The verb.
        verb: &'static str,
        /// The queue depth.
        depth: u32,
    },
    /// A handle that the backend does not know (destroyed, or another
    /// context's).
    #[error("{verb}: unknown or destroyed {object}")]
    UnknownHandle {
        /// The verb.
        verb: &'static str,
        /// What kind of object.
        object: &'static str,
    },
    /// The object still has dependents (e.g. a PD with MRs).
    #[error("{verb}: {object} is still in use")]
    Busy {
        /// The verb.
        verb: &'static str,
        /// What kind of object.
        object: &'static str,
    },
    /// No device matched.
    #[error("no RDMA devices{0}")]
    NoDevice(String),
    /// A backend is not available on this machine (e.g. libibverbs missing).
    #[error("{0}")]
    Unavailable(String),
    /// The CQ overflowed: a completion found it full. As on a real
    /// device the CQ is then in error (`IBV_EVENT_CQ_ERR`), its completions
    /// are lost, and the QPs that use it go to ERR (`IBV_EVENT_QP_FATAL`).
    #[error("{verb}: the CQ overflowed ({capacity} entries) and is in error")]
    CqOverrun {
        /// The verb.
        verb: &'static str,
        /// The CQ's size.
        capacity: usize,
    },
    /// A timed wait ran out.
    #[error("{verb}: timed out")]
    Timeout {
        /// The verb.
        verb: &'static str,
    },
}

impl VerbsError {
    /// An `InvalidArgument` error.
    pub fn invalid(verb: &'static str, why: impl Into<String>) -> VerbsError {
        VerbsError::InvalidArgument {
            verb,
            why: why.into(),
        }
    }

    /// An `Os` error from the last OS error.
    pub fn last_os(verb: &'static str) -> VerbsError {
        VerbsError::Os {
            verb,
            source: std::io::Error::last_os_error(),
        }
    }
}

/// A failed post: which work request of the list failed, and why. Work
/// requests before `index` were posted (`bad_wr` in rdma-core).
#[derive(Debug, thiserror::Error)]
#[error("work request {index} of the list: {error}")]
pub struct PostError {
    /// Index of the first WR that was not posted.
    pub index: usize,
    /// Why.
    #[source]
    pub error: VerbsError,
}

/// Result of a verb.
pub type Result<T, E = VerbsError> = core::result::Result<T, E>;
