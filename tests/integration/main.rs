//! rocelab integration tests: one binary, one module per area. They run the
//! built `rocelab` binary.

mod architecture;
mod cli_reports;
mod cli_sim;
mod cli_sweep;
mod devices;
mod fluid;
mod ibverbs_shim;
mod interview;
mod irn;
mod lessons;
mod newcomer;
mod perftest;
mod rdma_core;
mod rdmacm_shim;
mod report_browser;
mod testbed;
mod twin;
mod ucx;
mod wire;
