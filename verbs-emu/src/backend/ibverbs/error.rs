//! Errors of the hardware backend. Every failure of a verb names the verb
//! and carries the errno it reported.

use std::io;

/// An error from loading libibverbs or from one of its verbs.
#[derive(Debug, thiserror::Error)]
pub enum IbverbsError {
    /// The shared library could not be opened (rdma-core is not installed).
    #[error("{library} not found: {reason}")]
    LibraryNotFound {
        /// The file name that was tried, e.g. `libibverbs.so.1`.
        library: String,
        /// What the dynamic loader said.
        reason: String,
    },
    /// The library opened but lacks a symbol this backend needs (a
    /// libibverbs older than the ABI this backend is written for).
    #[error("{library} has no symbol {symbol}: {reason}")]
    MissingSymbol {
        /// The library file name.
        library: String,
        /// The symbol that was looked up.
        symbol: &'static str,
        /// What the dynamic loader said.
        reason: String,
    },
    /// libibverbs works but sees no RDMA device (no kernel support: it
    /// answers ENOSYS; or an empty device list).
    #[error("no RDMA devices (ibv_get_device_list: {})", describe_errno(*.errno))]
    NoDevices {
        /// The errno `ibv_get_device_list` left, 0 when it returned an
        /// empty list without one.
        errno: i32,
    },
    /// A device was asked for by name and is not in the list.
    #[error("RDMA device {name:?} not found; devices present: {available}")]
    DeviceNotFound {
        /// The name asked for.
        name: String,
        /// The names that do exist, comma separated.
        available: String,
    },
    /// A verb failed.
    #[error("{verb} failed: {}", describe_errno(*.errno))]
    Verb {
        /// The libibverbs function (or function-table slot) that failed.
        verb: &'static str,
        /// The errno it reported (0 if it reported failure without one).
        errno: i32,
    },
    /// The provider's function table lacks an entry this call needs.
    #[error("{verb}: the provider's function table has no {slot} entry")]
    MissingOp {
        /// The verb being called.
        verb: &'static str,
        /// The empty slot of `ibv_context_ops`.
        slot: &'static str,
    },
    /// The request cannot be expressed to libibverbs (API misuse).
    #[error("{verb}: {reason}")]
    InvalidArgument {
        /// The verb the request was meant for.
        verb: &'static str,
        /// Why it was refused.
        reason: String,
    },
}

impl IbverbsError {
    /// The errno carried by this error, if it came from the library.
    pub fn errno(&self) -> Option<i32> {
        match self {
            Self::Verb { errno, .. } | Self::NoDevices { errno } => Some(*errno),
            _ => None,
        }
    }

    /// The failed verb, if the error is about one.
    pub fn verb(&self) -> Option<&'static str> {
        match self {
            Self::Verb { verb, .. }
            | Self::MissingOp { verb, .. }
            | Self::InvalidArgument { verb, .. } => Some(verb),
            Self::NoDevices { .. } => Some("ibv_get_device_list"),
            _ => None,
        }
    }
}

/// `"Invalid argument (errno 22)"`, or a note that none was set.
fn describe_errno(errno: i32) -> String {
    if errno == 0 {
        "no errno set".to_owned()
    } else {
        let text = io::Error::from_raw_os_error(errno).to_string();
        // io::Error prints "Invalid argument (os error 22)"; say errno.
        let text = text
            .strip_suffix(&format!(" (os error {errno})"))
            .unwrap_or(&text)
            .to_owned();
        format!("{text} (errno {errno})")
    }
}

/// Result alias of the hardware backend.
pub type Result<T, E = IbverbsError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verb_error_names_verb_and_errno() {
        let error = IbverbsError::Verb {
            verb: "ibv_reg_mr",
            errno: libc::ENOMEM,
        };
        let text = error.to_string();
        assert!(text.starts_with("ibv_reg_mr failed: "), "{text}");
        assert!(
            text.ends_with(&format!("(errno {})", libc::ENOMEM)),
            "{text}"
        );
        assert_eq!(error.errno(), Some(libc::ENOMEM));
        assert_eq!(error.verb(), Some("ibv_reg_mr"));
    }

    #[test]
    fn no_devices_message_carries_enosys() {
        let text = IbverbsError::NoDevices {
            errno: libc::ENOSYS,
        }
        .to_string();
        assert!(text.starts_with("no RDMA devices"), "{text}");
        assert!(text.contains(&format!("errno {}", libc::ENOSYS)), "{text}");
        let empty = IbverbsError::NoDevices { errno: 0 }.to_string();
        assert!(empty.contains("no errno set"), "{empty}");
    }
}
