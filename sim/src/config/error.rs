//! The error of a configuration: which key is at fault and what was
//! expected. It sits below the settings and the fault plans, which both
//! report it.

/// A configuration mistake, naming the key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{key}: {message}")]
pub struct ConfigError {
    /// Dotted key, e.g. `fabric.pfc.priorities`.
    pub key: String,
    /// What was expected.
    pub message: String,
}

impl ConfigError {
    /// A mistake under `key`.
    pub fn new(key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            key: key.to_string(),
            message: message.into(),
        }
    }
}
