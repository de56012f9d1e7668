//! Integration tests of the simulator (one binary, one module per area).

mod support;

mod capture;
mod dcqcn;
mod dependencies;
mod determinism;
mod fabric;
mod imports;
mod incast;
mod loss;
mod pfc;
mod scenarios;
mod topology;
mod workloads;
