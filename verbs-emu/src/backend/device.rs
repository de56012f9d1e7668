//! The device interface: [`Backend`] (one opened device, one method per
//! verb) and [`Provider`] (finding and opening devices), with the types
//! their methods return.
//!
//! [`Backend`] is the verbs-level device interface underneath
//! [`crate::verbs`]: one object per opened device (an `ibv_context`), with
//! one method per verb, taking and returning plain handles
//! ([`PdHandle`], [`QpHandle`], ...). It is shaped so that a real device
//! implements it directly (libibverbs: one call per method); the UDP
//! emulation implements it with the sans-IO transport engine driven over a
//! socket.
//!
//! [`Provider`] is how devices are found and opened (`ibv_get_device_list`
//! + `ibv_open_device`): one provider per backend kind.
//!
//! Contract for implementors:
//!
//! * Every method may be called from any thread (`Send + Sync`).
//! * Handles are opaque `u64`s chosen by the backend; a destroyed handle or
//!   another backend's handle gets [`VerbsError::UnknownHandle`], never UB.
//! * `post_send`/`post_recv` validate each work request and stop at the
//!   first bad one ([`PostError::index`]); the ones before it are posted.
//! * Completions come back through `poll_cq` in the order the hardware (or
//!   the engine) produced them; `wait_cq` blocks until a completion is
//!   available or the timeout passes.
//!
//! Layering: this file sits on the verbs vocabulary (`verbs::types`,
//! `verbs::error`, `verbs::handle`) and is below both the backends that
//! implement it and the verbs objects that call it.

use core::fmt;
use std::sync::Arc;
use std::time::Duration;

use super::counters::QpCounters;
use crate::verbs::handle::{AhHandle, CqHandle, MrHandle, PdHandle, QpHandle};
use crate::verbs::{
    AccessFlags, AhAttr, DeviceAttr, Gid, PortAttr, PostError, QpAttr, QpCap, QpInitAttr, QpState,
    RecvWr, Result, SendWr, VerbsError, WorkCompletion,
};
use roce::wire::{Lkey, Qpn, Rkey};

/// What registering a memory region produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MrKeys {
    /// The handle for `dereg_mr`.
    pub handle: MrHandle,
    /// Local key.
    pub lkey: Lkey,
    /// Remote key.
    pub rkey: Rkey,
    /// Whether the pages are pinned (mlock or the device's pinning). When
    /// `false`, `pin_error` says why not.
    pub pinned: bool,
    /// Why pinning failed (e.g. `RLIMIT_MEMLOCK`), when it did.
    pub pin_error: Option<String>,
}

/// What `ibv_rereg_mr` changes of a registered region: each `Some` is
/// one `IBV_REREG_MR_CHANGE_*` flag. The keys stay the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrChange {
    /// `IBV_REREG_MR_CHANGE_TRANSLATION`: the new address and length.
    pub range: Option<(*mut u8, usize)>,
    /// `IBV_REREG_MR_CHANGE_PD`: the new protection domain.
    pub pd: Option<PdHandle>,
    /// `IBV_REREG_MR_CHANGE_ACCESS`: the new rights.
    pub access: Option<AccessFlags>,
}

/// What creating a QP produced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpCreated {
    /// The handle for later verbs.
    pub handle: QpHandle,
    /// The QP number peers address.
    pub qpn: Qpn,
    /// The capabilities actually granted (at least those asked for).
    pub cap: QpCap,
}

/// The kind of a backend, as the command line names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BackendKind {
    /// RoCEv2 over UDP sockets (the emulation).
    Udp,
    /// Real RDMA hardware through libibverbs.
    Ibverbs,
}

impl BackendKind {
    /// The command-line name.
    pub const fn as_str(self) -> &'static str {
        match self {
            BackendKind::Udp => "udp",
            BackendKind::Ibverbs => "ibverbs",
        }
    }
}

impl fmt::Display for BackendKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl core::str::FromStr for BackendKind {
    type Err = String;
    fn from_str(s: &str) -> core::result::Result<Self, String> {
        match s {
            "udp" => Ok(BackendKind::Udp),
            "ibverbs" => Ok(BackendKind::Ibverbs),
            other => Err(format!(
                "unknown backend {other:?}: expected udp or ibverbs"
            )),
        }
    }
}

/// An asynchronous event of a device (`ibv_get_async_event`'s
/// `ibv_event_type`, the part this project raises).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AsyncEvent {
    /// IBV_EVENT_CQ_ERR: the CQ overflowed and is in error.
    CqErr(CqHandle),
    /// IBV_EVENT_QP_FATAL: the QP went to ERR (a local error, its CQ
    /// overflowed, or its requester failed).
    QpFatal(QpHandle),
    /// IBV_EVENT_QP_REQ_ERR: the responder saw an invalid request
    /// (NAK 0x61, or a class J SEND with Invalidate) and went to ERR.
    QpReqErr(QpHandle),
    /// IBV_EVENT_QP_ACCESS_ERR: the responder saw a remote access
    /// violation (NAK 0x62) and went to ERR.
    QpAccessErr(QpHandle),
    /// IBV_EVENT_SQ_DRAINED: a QP in SQD has nothing outstanding.
    SqDrained(QpHandle),
}

/// One opened device: the verbs, at verbs level. See the module docs for
/// the contract.
pub trait Backend: Send + Sync + 'static {
    /// The backend's kind.
    fn kind(&self) -> BackendKind;

    /// Device attributes (`ibv_query_device`).
    fn query_device(&self) -> Result<DeviceAttr>;

    /// Port attributes (`ibv_query_port`); ports are 1-based.
    fn query_port(&self, port: u8) -> Result<PortAttr>;

    /// A GID table entry (`ibv_query_gid`).
    fn query_gid(&self, port: u8, index: u32) -> Result<Gid>;

    /// The UDP port RoCEv2 packets reach this device on (4791 on hardware).
    fn udp_port(&self) -> u16 {
        4791
    }

    /// `ibv_alloc_pd`.
    fn alloc_pd(&self) -> Result<PdHandle>;

    /// `ibv_dealloc_pd`. Fails with `Busy` while MRs, QPs or AHs use it.
    fn dealloc_pd(&self, pd: PdHandle) -> Result<()>;

    /// `ibv_reg_mr`: register `len` bytes at `addr` with `access`.
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` must be valid for reads and writes, and stay
    /// allocated, until `dereg_mr` of the returned handle has returned. The
    /// device (or the emulation's progress thread) may read and write it at
    /// any time in between, as RDMA hardware does.
    unsafe fn reg_mr(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MrKeys>;

    /// Run `f` at a point where this backend's own threads touch no
    /// registered memory, so that an application copy into or out of a
    /// region inside `f` is ordered with every backend access before and
    /// after it (no data race in the language's memory model). This is
    /// the synchronisation [`crate::verbs::MemoryRegion::read`] and
    /// [`crate::verbs::MemoryRegion::write`] use.
    ///
    /// The UDP emulation runs `f` under the lock its progress thread holds
    /// whenever it reads or writes a region. The default runs `f`
    /// directly: a hardware device's DMA is not a Rust access, so there is
    /// nothing to order with; bytes that a DMA writes during the copy read
    /// as unspecified values (old, new or a mix), never as undefined
    /// behaviour. `f` must not call back into the backend.
    fn with_memory_quiesced(&self, f: &mut dyn FnMut()) {
        f();
    }

    /// `ibv_dereg_mr`. After it returns the backend never touches the
    /// memory again; later uses of its keys fail with protection errors.
    fn dereg_mr(&self, mr: MrHandle) -> Result<()>;

    /// `ibv_rereg_mr`: change the translation, protection domain or
    /// rights of a registered region in place, keeping its keys. On an
    /// error the region is unchanged. Backends that cannot say
    /// `Unavailable`.
    ///
    /// # Safety
    ///
    /// A new range in `change` carries `reg_mr`'s contract; the old range
    /// is released when this returns successfully.
    unsafe fn rereg_mr(&self, mr: MrHandle, change: MrChange) -> Result<()> {
        let _ = (mr, change);
        Err(VerbsError::Unavailable(format!(
            "ibv_rereg_mr: the {} backend does not re-register MRs",
            self.kind()
        )))
    }

    /// `ibv_create_cq` with at least `cqe` entries.
    fn create_cq(&self, cqe: u32) -> Result<CqHandle>;

    /// `ibv_destroy_cq`. Fails with `Busy` while QPs use it.
    fn destroy_cq(&self, cq: CqHandle) -> Result<()>;

    /// `ibv_resize_cq`: hold at least `cqe` entries from now on, keeping
    /// the completions queued. Returns the new size. Fails with an invalid
    /// argument when more than `cqe` completions are queued; backends that
    /// cannot resize say `Unavailable`.
    fn resize_cq(&self, cq: CqHandle, cqe: u32) -> Result<u32> {
        let _ = (cq, cqe);
        Err(VerbsError::Unavailable(format!(
            "ibv_resize_cq: the {} backend does not resize CQs",
            self.kind()
        )))
    }

    /// `ibv_poll_cq`: move up to `wc.len()` completions into `wc`, return
    /// how many. Never blocks.
    fn poll_cq(&self, cq: CqHandle, wc: &mut [WorkCompletion]) -> Result<usize>;

    /// Block until `cq` has a completion or `timeout` passes
    /// (`ibv_req_notify_cq` + `ibv_get_cq_event`). Returns whether a
    /// completion is available. Consumes nothing.
    fn wait_cq(&self, cq: CqHandle, timeout: Duration) -> Result<bool>;

    /// `ibv_create_qp`.
    fn create_qp(&self, pd: PdHandle, init: &QpInitAttr) -> Result<QpCreated>;

    /// `ibv_modify_qp`. A refused modify changes nothing.
    fn modify_qp(&self, qp: QpHandle, attr: &QpAttr) -> Result<()>;

    /// The QP's current state (`ibv_query_qp` with `IBV_QP_STATE`). A QP
    /// can move to ERR on its own after an error completion.
    fn query_qp_state(&self, qp: QpHandle) -> Result<QpState>;

    /// `ibv_destroy_qp`.
    fn destroy_qp(&self, qp: QpHandle) -> Result<()>;

    /// `ibv_create_ah`.
    fn create_ah(&self, pd: PdHandle, attr: &AhAttr) -> Result<AhHandle>;

    /// `ibv_destroy_ah`.
    fn destroy_ah(&self, ah: AhHandle) -> Result<()>;

    /// The next asynchronous event, if any, without blocking
    /// (`ibv_get_async_event`; no acknowledgement needed). Backends that
    /// raise none keep the default.
    fn poll_async_event(&self) -> Option<AsyncEvent> {
        None
    }

    /// `ibv_query_qp`: every attribute of the QP (with `mask` saying
    /// which are reported), its PSNs where they are now.
    fn query_qp(&self, qp: QpHandle) -> Result<QpAttr>;

    /// The device's counters, by name, in the order the backend keeps them:
    /// the transport's under mlx5's hardware counter names (as the
    /// simulator's `rdma statistic` dumps name them: `roce_adp_retrans`,
    /// `local_ack_timeout_err`, `packet_seq_err`, `rnr_nak_retry_err`,
    /// ...), then the device's own (`rx_icrc_encapsulated`,
    /// `rx_icrc_id_solved`, and the fault wrapper's `fault_*` when one is
    /// installed). Counts since the
    /// device was opened, destroyed QPs included. Backends that keep no
    /// counters return none.
    fn counters(&self) -> Result<Vec<(String, u64)>> {
        Ok(Vec::new())
    }

    /// One QP's transport counters (mlx5's `rdma statistic qp` view, the
    /// names of [`counters`](Self::counters)' transport part, counted
    /// since the QP was created or last reset) and its current sending
    /// rate. Backends that cannot read them say `Unavailable`.
    fn qp_counters(&self, qp: QpHandle) -> Result<QpCounters> {
        let _ = qp;
        Err(VerbsError::Unavailable(format!(
            "per-QP counters: the {} backend does not read them",
            self.kind()
        )))
    }

    /// `ibv_post_send`.
    ///
    /// # Safety
    ///
    /// Every SGE not sent inline must name memory inside a region
    /// registered on this backend under its lkey (the backend checks keys and
    /// bounds; a bad one completes in error), and the caller must not
    /// access that memory in a conflicting way until the WR completes:
    /// the device reads (SEND/WRITE) or writes (READ/atomic) it
    /// asynchronously. Every SGE of a WR sent inline
    /// (`SendFlags::INLINE`) must be readable for its `length` bytes
    /// from `addr` during this call (registered or not: no lkey applies),
    /// which copies the data before it returns.
    unsafe fn post_send(
        &self,
        qp: QpHandle,
        wrs: &[SendWr<'_>],
    ) -> core::result::Result<(), PostError>;

    /// `ibv_post_recv`.
    ///
    /// # Safety
    ///
    /// As for [`Backend::post_send`]: the buffers are written
    /// asynchronously until the receive completes.
    unsafe fn post_recv(
        &self,
        qp: QpHandle,
        wrs: &[RecvWr<'_>],
    ) -> core::result::Result<(), PostError>;
}

/// One device a provider can open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceEntry {
    /// Device name (`ibv_get_device_name`).
    pub name: String,
    /// Node GUID (`ibv_get_device_guid`, host order).
    pub node_guid: u64,
    /// Which backend serves it.
    pub kind: BackendKind,
    /// Provider-specific detail for listings (e.g. the bound address).
    pub detail: String,
}

/// Finds and opens devices of one backend kind.
pub trait Provider: Send + Sync {
    /// The backend kind.
    fn kind(&self) -> BackendKind;

    /// The devices present (`ibv_get_device_list`). An empty list is not an
    /// error; a missing library is (`Unavailable`).
    fn devices(&self) -> Result<Vec<DeviceEntry>>;

    /// Open one (`ibv_open_device`).
    fn open(&self, device: &DeviceEntry) -> Result<Arc<dyn Backend>>;

    /// Open the device that has `gid` (an IP address as a GID) in the GID
    /// table of its port 1, the way RoCE applications pick a device by the
    /// address they were given. By default every device is opened in turn
    /// and its GID table read; `NoDevice` when none has the GID.
    fn open_by_gid(&self, gid: Gid) -> Result<Arc<dyn Backend>> {
        for device in self.devices()? {
            let Ok(backend) = self.open(&device) else {
                continue;
            };
            let entries = backend.query_port(1).map_or(0, |p| p.gid_tbl_len);
            if (0..entries).any(|i| backend.query_gid(1, i).is_ok_and(|g| g == gid)) {
                return Ok(backend);
            }
        }
        Err(VerbsError::NoDevice(format!(" with GID {gid}")))
    }
}
