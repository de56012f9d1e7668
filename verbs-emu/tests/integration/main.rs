//! verbs-emu integration tests: one binary, one module per area.

mod capture;
mod counters;
mod hostile;
mod ibverbs_abi;
mod ibverbs_fake;
mod mr_bytes;
mod transport;
mod verbs;
mod wire;
