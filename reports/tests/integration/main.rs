//! Integration tests of the reports crate: real-tool parsers on fixtures,
//! the doctor on one capture set per playbook symptom, comparisons, the run
//! report, and robustness against arbitrary text.

mod compare;
mod corpus;
mod doctor;
mod doctor_bundles;
mod evaluation;
mod fuzz;
mod hosts;
mod ibdiag;
mod parsers;
mod render;

use std::path::PathBuf;

/// Path of a fixture file.
pub fn fixture_path(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// Text of a fixture file.
pub fn fixture(rel: &str) -> String {
    let p = fixture_path(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}
