//! Integration tests of the simulator (one binary, one module per area).

mod support;

mod determinism;
mod fabric;
mod incast;
mod loss;
mod pfc;
