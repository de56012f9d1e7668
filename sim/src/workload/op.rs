//! The RDMA operation of a flow (plain values, below the rest of the
//! workload module).

/// The RDMA operation a flow uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FlowOp {
    /// RDMA WRITE from `src` into `dst`.
    Write,
    /// SEND from `src`, received by `dst`.
    Send,
    /// RDMA READ issued by `src`: data flows from `dst` to `src`. `src` is
    /// always the requester.
    Read,
}
