//! Integration tests of the `rocelab` binary.

mod cli_reports;
