//! verbs-emu integration tests: one binary, one module per area.

mod capture;
mod counters;
mod hostile;
mod ibverbs_abi;
mod ibverbs_fake;
mod mr_bytes;
mod transport;
mod verbs;
mod wire;

use verbs_emu::verbs::AccessFlags;

/// Every access right: what the tests' regions and QPs grant.
const ALL: AccessFlags = AccessFlags(
    AccessFlags::LOCAL_WRITE.0
        | AccessFlags::REMOTE_WRITE.0
        | AccessFlags::REMOTE_READ.0
        | AccessFlags::REMOTE_ATOMIC.0,
);
