//! The one integration test binary of `verbs-emu`; each module tests one
//! area.

mod ibverbs_abi;
