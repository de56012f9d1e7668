//! verbs-emu integration tests: one binary, one module per area.

mod capture;
mod counters;
mod extended_verbs;
mod hostile;
mod ibverbs_abi;
mod ibverbs_fake;
mod mr_bytes;
mod odp;
mod verbs;

use std::time::Duration;

use verbs_emu::verbs::{
    AccessFlags, CompletionQueue, MemoryRegion, QueuePair, RemoteMr, SendFlags, SendOp, SendWr,
    WcStatus,
};
use verbs_emu::wire::Rkey;

/// Every access right: what the tests' regions and QPs grant.
const ALL: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0,
);

/// One signaled WRITE of the first `len` bytes of `mr` into the peer's
/// region `to`, posted on `qp` and waited for on `cq` (up to `timeout`):
/// its completion must be `wr_id`'s, and a success.
fn write_and_wait(
    qp: &QueuePair,
    cq: &CompletionQueue,
    mr: &MemoryRegion,
    to: &RemoteMr,
    len: u32,
    wr_id: u64,
    timeout: Duration,
) {
    let sge = [mr.sge(0, len).unwrap()];
    let wr = SendWr {
        wr_id,
        sg_list: &sge,
        op: SendOp::Write {
            remote_addr: to.addr,
            rkey: Rkey::new(to.rkey),
        },
        flags: SendFlags::SIGNALED,
        ud: None,
    };
    // SAFETY: a registered region, unchanged until the completion.
    unsafe { qp.post_send(&[wr]) }.unwrap();
    let wc = cq.poll_n(1, timeout).unwrap()[0];
    assert_eq!((wc.wr_id, wc.status), (wr_id, WcStatus::Success));
}
