//! Integration tests of the simulator (one binary, one module per area).

mod support;

mod balancing;
mod capture;
mod dcqcn;
mod deadlock;
mod defaults;
mod delivery;
mod dependencies;
mod determinism;
mod fabric;
mod faults;
mod gpu;
mod hostmodel;
mod hpcc;
mod imports;
mod incast;
mod infiniband;
mod loss;
mod multipath;
mod pfc;
mod scenarios;
mod topology;
mod training;
mod units;
mod watchdog;
mod workloads;
