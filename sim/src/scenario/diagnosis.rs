//! A scenario's ground truth: the `[diagnosis]` table.
//!
//! A fault scenario or a lesson states what it injects, so that whatever
//! reads its outputs (the doctor's evaluation, the counter interview, the
//! report's "what happened") is judged against the cause the scenario put
//! there, never against rocelab's own output:
//!
//! ```toml
//! [diagnosis]
//! cause = "slow-receiver"     # the doctor's finding id naming the cause
//! at = "h0"                   # where the cause is (a node, or NODE-pN)
//! summary = "h0 drains received frames at half its link rate"
//! feels = "every flow to h0 runs at half speed; ..."
//! first = "h0's host side: PCIe width and speed, ..."
//! victim = "victim"           # the workload whose flows are the victims
//!
//! [[variant]]
//! name = "healthy"
//! diagnosis = { cause = "healthy" }
//! ```
//!
//! A variant's `diagnosis` keys replace the scenario's (variants merge over
//! the base document like every other table). A variant's `role` says how
//! it stands to the cause: `fault` (the cause is present), `fix` (the cause
//! is present and a remedy is on, e.g. a watchdog) or `healthy` (no fault);
//! without `role`, a `healthy` cause means `healthy` and any other `fault`.

use serde::{Deserialize, Serialize};

/// The cause id of a variant with no fault.
pub const HEALTHY: &str = "healthy";

/// How a variant stands to the scenario's cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The cause is present and nothing mitigates it.
    Fault,
    /// The cause is present and a remedy is on (a watchdog, a fixed route).
    Fix,
    /// No fault: the baseline the others are compared with.
    Healthy,
}

/// The ground truth of one variant (or, before variants merge over it, of
/// the scenario).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Diagnosis {
    /// The doctor's finding id that names the cause (`healthy`: none).
    pub cause: String,
    /// Where the cause is: a node, or a switch port `NODE-pN`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The cause in one sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// What a job running on the fabric feels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feels: Option<String>,
    /// What to look at or change first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first: Option<String>,
    /// The workload whose flows suffer without being part of the cause.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub victim: Option<String>,
    /// How this variant stands to the cause (see the module docs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
}

impl Diagnosis {
    /// The variant's role: as written, else from the cause.
    pub fn role(&self) -> Role {
        self.role.unwrap_or(if self.cause == HEALTHY {
            Role::Healthy
        } else {
            Role::Fault
        })
    }

    /// True when the variant has no fault.
    pub fn is_healthy(&self) -> bool {
        self.role() == Role::Healthy
    }

    /// Why the table cannot be used, if it cannot: the cause is a
    /// lowercase id (`[a-z0-9-]+`), and a healthy role has the healthy cause.
    pub fn check(&self) -> Result<(), String> {
        let id_ok = !self.cause.is_empty()
            && self
                .cause
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !id_ok {
            return Err(format!(
                "{:?}: expected a finding id such as \"slow-receiver\" or \"healthy\" (lowercase letters, digits and '-')",
                self.cause
            ));
        }
        match (self.role, self.cause == HEALTHY) {
            (Some(Role::Healthy), false) => Err(format!(
                "role \"healthy\" with cause {:?}: expected cause \"healthy\"",
                self.cause
            )),
            (Some(Role::Fault | Role::Fix), true) => Err(
                "cause \"healthy\" with a fault or fix role: expected the cause the variant injects"
                    .to_string(),
            ),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(cause: &str, role: Option<Role>) -> Diagnosis {
        Diagnosis {
            cause: cause.to_string(),
            at: None,
            summary: None,
            feels: None,
            first: None,
            victim: None,
            role,
        }
    }

    #[test]
    fn the_role_follows_the_cause_unless_written() {
        assert_eq!(d("healthy", None).role(), Role::Healthy);
        assert_eq!(d("pfc-storm", None).role(), Role::Fault);
        assert_eq!(d("pfc-storm", Some(Role::Fix)).role(), Role::Fix);
    }

    #[test]
    fn a_cause_must_be_an_id_and_agree_with_the_role() {
        assert!(d("slow-receiver", None).check().is_ok());
        assert!(d("Slow receiver", None).check().is_err());
        assert!(d("", None).check().is_err());
        assert!(d("pfc-storm", Some(Role::Healthy)).check().is_err());
        assert!(d("healthy", Some(Role::Fix)).check().is_err());
    }
}
