//! Reports, comparisons, parsers for real RDMA tools' output, and the doctor.

pub mod compare;
pub mod doctor;
pub mod nccl_tests;
pub mod realnic;
pub mod render;
pub mod simperf;
pub mod twin;
