//! Why a perftest run fails ([`PerftestError`]) and the run's `Result`.
//!
//! Contract: every failure of a run is one of these; a verbs error keeps
//! its source, a completion error carries perftest's own message.

use crate::verbs::VerbsError;

/// Why a perftest run failed.
#[derive(Debug, thiserror::Error)]
pub enum PerftestError {
    /// The flags do not make sense together.
    #[error("{0}")]
    Config(String),
    /// The out-of-band TCP exchange failed.
    #[error("out-of-band exchange: {0}")]
    Oob(String),
    /// A verb failed.
    #[error(transparent)]
    Verbs(#[from] VerbsError),
    /// A work completion had an error status (perftest's message).
    #[error("{0}")]
    Completion(String),
    /// `--verify` found a wrong byte.
    #[error("verify: {0}")]
    Verify(String),
}

pub(super) type Result<T> = std::result::Result<T, PerftestError>;
