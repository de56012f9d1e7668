//! backend: work in progress, see the architecture map.
//!
//! * [`ibverbs`]: real RDMA hardware through libibverbs loaded at run time.

pub mod ibverbs;
