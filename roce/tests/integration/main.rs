//! The core's integration tests: one binary, one module per area. They
//! drive the sans-IO engine and the wire format in process, with no
//! socket and no clock.

mod crafted;
mod transport;
mod windows;
mod wire;
