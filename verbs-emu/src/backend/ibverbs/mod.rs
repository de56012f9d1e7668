//! The hardware backend: real RDMA NICs through rdma-core's libibverbs,
//! loaded at run time.
//!
//! # How it binds to libibverbs
//!
//! There is no build-time dependency on rdma-core. [`Library::load`] opens
//! `libibverbs.so.1` with `dlopen` (through `libloading`) and resolves the
//! exported verbs by name, which yields each symbol's default version
//! (`IBVERBS_1.1`, the one a C program compiled today links to). The structs
//! those verbs take are our own `#[repr(C)]` mirrors in [`ffi`].
//!
//! Several verbs are not exported functions but inline functions or macros
//! in `<infiniband/verbs.h>`; this backend does what the header does:
//!
//! * `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq` and
//!   `ibv_req_notify_cq` call the provider's function table,
//!   `qp->context->ops.post_send(...)`, `cq->context->ops.poll_cq(...)`.
//! * `ibv_query_port` uses `verbs_context::query_port` (found behind the
//!   context when `abi_compat` marks it extended and its `sz` covers the
//!   slot), else the exported compat `ibv_query_port` on a zeroed struct.
//! * `ibv_reg_mr` calls the exported `ibv_reg_mr`, or `ibv_reg_mr_iova2`
//!   with `iova = addr` when an optional access flag (relaxed ordering) is
//!   set.
//!
//! # Errors
//!
//! Nothing here panics on a missing library or device. A machine without
//! rdma-core gets [`IbverbsError::LibraryNotFound`] ("libibverbs.so.1 not
//! found: ..."); one with rdma-core but no RDMA device (libibverbs answers
//! `ENOSYS` when the kernel has no RDMA support, or an empty list) gets
//! [`IbverbsError::NoDevices`] ("no RDMA devices ..."). Every failed verb is
//! [`IbverbsError::Verb`], naming the verb and carrying its errno.
//!
//! # How far this is tested
//!
//! No RDMA hardware (not even a soft-RoCE `rxe` device) is reachable where
//! this project is built and tested, so this backend has never driven a
//! real NIC. What is proven instead:
//!
//! * the ABI: an integration test compiles a C program against the installed
//!   `<infiniband/verbs.h>` and checks the size and alignment of every struct
//!   in [`ffi`], the offset of every field, and the value of every enum
//!   constant against C's;
//! * loading: the installed library loads and every symbol resolves; with no
//!   device the listing reports "no RDMA devices" cleanly; a missing library
//!   reports "libibverbs.so.1 not found";
//! * the data path against a stand-in provider: a loopback fake of
//!   libibverbs, compiled from C against the real header, is driven through
//!   the public verbs API (device list, queries through
//!   `verbs_context::query_port`, PD, MR (including the `ibv_reg_mr_iova2`
//!   route), CQ with completion channel, RC connect, WRITE, READ, SEND with
//!   immediate, atomics, error completions, chunked lists, `bad_wr`);
//! * every translation between the verbs types and the C structs is
//!   unit-tested.
//!
//! What a real NIC, its provider and the kernel do with these calls
//! (resource limits, timing, RoCE GID selection, retries on a real wire)
//! remains untested until this runs on a machine with an RDMA device.

mod backend;
pub mod error;
pub mod ffi;
pub mod library;
mod objects;
pub mod work;

use std::sync::Arc;

pub use backend::{IbverbsBackend, IbverbsProvider};
pub use error::{IbverbsError, Result};
pub use objects::{
    AddressHandle, CompletionQueue, Context, DeviceInfo, MemoryRegion, ProtectionDomain, QpInit,
    QueuePair,
};

use library::Verbs;
use objects::DeviceList;

/// The file name of rdma-core's verbs library, as the dynamic loader finds it.
pub const LIBRARY_NAME: &str = "libibverbs.so.1";

/// A loaded libibverbs with every verb this backend calls resolved.
///
/// Cheap to clone; the library stays loaded while any clone, or any object
/// opened through it, lives.
#[derive(Clone, Debug)]
pub struct Library {
    verbs: Arc<Verbs>,
}

impl Library {
    /// Loads [`LIBRARY_NAME`].
    pub fn load() -> Result<Self> {
        Self::load_from(LIBRARY_NAME)
    }

    /// Loads the library at `name` (a file name or a path).
    pub fn load_from(name: &str) -> Result<Self> {
        Ok(Self {
            verbs: Arc::new(Verbs::load(name)?),
        })
    }

    /// Whether `ibv_reg_mr_iova2` (libibverbs 1.8+) is available, needed
    /// only for optional access flags.
    pub fn has_reg_mr_iova2(&self) -> bool {
        self.verbs.reg_mr_iova2.is_some()
    }

    /// The RDMA devices present, in the library's order.
    /// [`IbverbsError::NoDevices`] when there are none.
    pub fn devices(&self) -> Result<Vec<DeviceInfo>> {
        Ok(DeviceList::get(&self.verbs)?.infos())
    }

    /// Opens the device called `name`, or the first device.
    pub fn open(&self, name: Option<&str>) -> Result<Context> {
        DeviceList::get(&self.verbs)?.open(name)
    }
}

/// Real RDMA devices as `(name, node GUID)`, or why there are none. A
/// convenience for listings: loads the library and lists in one step.
pub fn list_devices() -> Result<Vec<DeviceInfo>> {
    Library::load()?.devices()
}

/// The node GUID the way `ibv_devices` prints it: 16 lowercase hex digits of
/// the host-order value.
pub fn format_guid(node_guid: u64) -> String {
    format!("{node_guid:016x}")
}

/// A device table in `ibv_devices`' exact layout: a header, a rule, and one
/// `name<TAB>guid` row per device, each line indented four spaces with the
/// name padded to 16 columns.
pub fn device_table<'a>(rows: impl IntoIterator<Item = (&'a str, u64)>) -> String {
    let mut out = format!("    {:<16}\t   node GUID\n", "device");
    out.push_str(&format!("    {:<16}\t----------------\n", "------"));
    for (name, guid) in rows {
        out.push_str(&format!("    {name:<16}\t{}\n", format_guid(guid)));
    }
    out
}

/// [`device_table`] with two more columns: the backend serving each device
/// and a free-form detail (bound address, node type).
pub fn device_table_long<'a>(
    rows: impl IntoIterator<Item = (&'a str, u64, &'a str, &'a str)>,
) -> String {
    let mut out = format!("    {:<16}\t   node GUID    \tbackend\tdetail\n", "device");
    out.push_str(&format!(
        "    {:<16}\t----------------\t-------\t------\n",
        "------"
    ));
    for (name, guid, backend, detail) in rows {
        out.push_str(&format!(
            "    {name:<16}\t{}\t{backend}\t{detail}\n",
            format_guid(guid)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_table_matches_ibv_devices_layout() {
        let table = device_table([("mlx5_0", 0x248a_0703_0049_d468), ("rxe0", 0x1)]);
        assert_eq!(
            table,
            "    device          \t   node GUID\n\
             \x20   ------          \t----------------\n\
             \x20   mlx5_0          \t248a07030049d468\n\
             \x20   rxe0            \t0000000000000001\n"
        );
    }

    #[test]
    fn long_table_adds_backend_and_detail_columns() {
        let table = device_table_long([("rxe_lo", 0x2, "udp", "127.0.0.1:4791")]);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            lines[2],
            "    rxe_lo          \t0000000000000002\tudp\t127.0.0.1:4791"
        );
        assert!(lines[0].starts_with("    device          \t   node GUID"));
    }

    #[test]
    fn missing_library_is_reported_not_panicked() {
        let error = Library::load_from("libibverbs-does-not-exist.so.1").unwrap_err();
        assert!(
            error
                .to_string()
                .starts_with("libibverbs-does-not-exist.so.1 not found"),
            "{error}"
        );
    }
}
