//! rocelab integration tests: one binary, one module per area. They run the
//! built `rocelab` binary.

mod devices;
mod wire;
//! Integration tests of the `rocelab` binary.

mod cli_reports;
