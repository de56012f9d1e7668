//! The integration tests of verbs-emu, one module per area.

mod transport;
