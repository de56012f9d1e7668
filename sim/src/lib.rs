//! Discrete-event simulator of RoCEv2 fabrics.
//!
//! Models (engine, fabric, NIC) know nothing of files; the topology,
//! workload and scenario layers build them (STYLE.md rule 9). The types in
//! [`topology`] and [`workload`] are the contract between the two sides;
//! [`config`] holds the model settings scenario files embed, [`run`] the
//! entry point and [`results`] what a run produces. [`stats`] writes
//! counter dumps in the real tools' formats. [`faults`] and [`overrides`]
//! describe broken and per-element fabrics (`[[faults]]`, `[[override]]`),
//! [`sweep`] parameter sweeps (`[sweep]`), their shards and table.

pub mod config;
pub mod engine;
pub mod fabric;
pub mod faults;
pub mod hostmodel;
pub mod input;
pub mod nccl_model;
pub mod options;
pub mod overrides;
pub mod results;
pub mod run;
pub mod scenario;
pub mod stats;
pub mod sweep;
pub mod topology;
pub mod workload;
