//! Workloads: who sends what to whom, and when.
//!
//! Generators produce a list of [`FlowSpec`]s, sorted by start time then id;
//! the NIC model turns each into work requests on queue pairs.

use verbs_emu::time::Instant;

use crate::topology::NodeId;

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

/// One flow: a message (or series of messages) between two hosts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSpec {
    /// Unique, dense id (0..n).
    pub id: u32,
    /// Requester host.
    pub src: NodeId,
    /// Responder host.
    pub dst: NodeId,
    /// Bytes to move.
    pub size: u64,
    /// When the first work request is posted.
    pub start: Instant,
    /// Operation.
    pub op: FlowOp,
    /// Message size the flow is split into (`size` when one message).
    pub message_size: u64,
    /// Which queue pair of the (src, dst) pair carries it (0-based; the
    /// pair has `qps_per_pair` QPs).
    pub qp_index: u32,
    /// Priority (traffic class, 0-7) the flow uses.
    pub priority: u8,
    /// Group tag for collective workloads (ring all-reduce step etc.).
    pub group: Option<u32>,
}
