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
use crate::verbs::handle::{AhHandle, CqHandle, DmHandle, MrHandle, PdHandle, QpHandle};
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

/// On-demand paging capabilities (`struct ibv_odp_caps`, the `odp_caps`
/// of `ibv_query_device_ex`): whether regions registered with
/// `IBV_ACCESS_ON_DEMAND` are served, and which operations of each
/// transport may use them. The default, all zero, is a device without
/// ODP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct OdpCaps {
    /// `general_caps`: [`OdpCaps::SUPPORT`], [`OdpCaps::SUPPORT_IMPLICIT`].
    pub general_caps: u64,
    /// `rc_odp_caps`: the `IBV_ODP_SUPPORT_*` operation bits
    /// ([`OdpCaps::SEND`], ...) for RC QPs.
    pub rc: u32,
    /// `uc_odp_caps`, as `rc` for UC QPs.
    pub uc: u32,
    /// `ud_odp_caps`, as `rc` for UD QPs.
    pub ud: u32,
}

impl OdpCaps {
    /// `IBV_ODP_SUPPORT`: ODP regions can be registered.
    pub const SUPPORT: u64 = 1 << 0;
    /// `IBV_ODP_SUPPORT_IMPLICIT`: the whole address space can be
    /// registered as one ODP region (address 0, length `SIZE_MAX`).
    pub const SUPPORT_IMPLICIT: u64 = 1 << 1;
    /// `IBV_ODP_SUPPORT_SEND`.
    pub const SEND: u32 = 1 << 0;
    /// `IBV_ODP_SUPPORT_RECV`.
    pub const RECV: u32 = 1 << 1;
    /// `IBV_ODP_SUPPORT_WRITE`.
    pub const WRITE: u32 = 1 << 2;
    /// `IBV_ODP_SUPPORT_READ`.
    pub const READ: u32 = 1 << 3;
    /// `IBV_ODP_SUPPORT_ATOMIC`.
    pub const ATOMIC: u32 = 1 << 4;
    /// `IBV_ODP_SUPPORT_SRQ_RECV`.
    pub const SRQ_RECV: u32 = 1 << 5;
}

/// The advice of `ibv_advise_mr` (`enum ibv_advise_mr_advice`): what to
/// do ahead of time for ranges of on-demand-paging regions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrAdvice {
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH`: fault the pages in for reading.
    Prefetch,
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE`: fault the pages in for
    /// writing (the region must be writable).
    PrefetchWrite,
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`: map what is present,
    /// faulting nothing in.
    PrefetchNoFault,
}

impl MrAdvice {
    /// From the raw `enum ibv_advise_mr_advice` value; `None` for a value
    /// rdma-core does not define.
    pub const fn from_raw(advice: u32) -> Option<MrAdvice> {
        match advice {
            0 => Some(MrAdvice::Prefetch),
            1 => Some(MrAdvice::PrefetchWrite),
            2 => Some(MrAdvice::PrefetchNoFault),
            _ => None,
        }
    }
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
    ///
    /// With [`AccessFlags::ON_DEMAND`], on a backend whose
    /// [`odp_caps`](Self::odp_caps) has [`OdpCaps::SUPPORT`], the range
    /// need not be mapped: the backend resolves each access's pages when
    /// it makes it and fails the access (an error completion or a NAK)
    /// where they are not mapped with the rights it needs. A null `addr`
    /// with `len == usize::MAX` is the implicit ODP region, the whole
    /// address space (with [`OdpCaps::SUPPORT_IMPLICIT`]). The program
    /// must still not unmap pages while an operation on them is in flight.
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

    /// `ibv_alloc_mw`: an unbound memory window of `mw_type` (1 or 2;
    /// anything else is an invalid argument) in `pd`. Returns its first
    /// R_Key, whose upper 24 bits name the window to
    /// [`dealloc_mw`](Self::dealloc_mw) and to binds (`SendOp::BindMw`).
    /// Backends without memory windows say `Unavailable`.
    fn alloc_mw(&self, pd: PdHandle, mw_type: u32) -> Result<u32> {
        let _ = (pd, mw_type);
        Err(VerbsError::Unavailable(format!(
            "ibv_alloc_mw: the {} backend has no memory windows",
            self.kind()
        )))
    }

    /// `ibv_dealloc_mw` of the window that `rkey` (any of its keys) names,
    /// bound or not: none of its keys matches again.
    fn dealloc_mw(&self, rkey: u32) -> Result<()> {
        let _ = rkey;
        Err(VerbsError::Unavailable(format!(
            "ibv_dealloc_mw: the {} backend has no memory windows",
            self.kind()
        )))
    }

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

    /// On-demand paging capabilities (`ibv_query_device_ex`'s
    /// `odp_caps`). Backends without ODP keep the default: none.
    fn odp_caps(&self) -> OdpCaps {
        OdpCaps::default()
    }

    /// `ibv_advise_mr`: act on `advice` for the ranges `sges` name, each
    /// in an on-demand-paging region of `pd` under its lkey. With `flush`
    /// (`IBV_ADVISE_MR_FLAG_FLUSH`) the work is done when this returns;
    /// without, it may still be under way. Errors as rdma-core's: a key
    /// that names no ODP region of `pd` (or a write prefetch of a region
    /// without `LOCAL_WRITE`) is `ENOENT` with `flush` and `EINVAL`
    /// without; a range outside its region, or pages that cannot be
    /// faulted in, `EFAULT`; an empty list `EINVAL` (as
    /// [`VerbsError::Os`]). Backends without ODP say `Unavailable`.
    fn advise_mr(
        &self,
        pd: PdHandle,
        advice: MrAdvice,
        flush: bool,
        sges: &[crate::verbs::Sge],
    ) -> Result<()> {
        let _ = (pd, advice, flush, sges);
        Err(VerbsError::Unavailable(format!(
            "ibv_advise_mr: the {} backend has no on-demand paging",
            self.kind()
        )))
    }

    /// The size of the device's own memory in bytes (`ibv_query_device_ex`'s
    /// `max_dm_size`): what [`alloc_dm`](Self::alloc_dm) allocations come
    /// out of. Backends without device memory keep the default, 0.
    fn dm_size(&self) -> u64 {
        0
    }

    /// `ibv_alloc_dm`: `len` bytes of the device's own memory, starting at
    /// a device address aligned to `2^log_align` bytes. An invalid argument
    /// when `len` is 0 or more than [`dm_size`](Self::dm_size); the OS error
    /// `ENOMEM` when no free range is large enough. The memory starts
    /// zeroed. Backends without device memory say `Unavailable`.
    fn alloc_dm(&self, len: u64, log_align: u32) -> Result<DmHandle> {
        let _ = (len, log_align);
        Err(VerbsError::Unavailable(format!(
            "ibv_alloc_dm: the {} backend has no device memory",
            self.kind()
        )))
    }

    /// `ibv_free_dm`. Fails with `Busy` while memory regions cover it.
    fn free_dm(&self, dm: DmHandle) -> Result<()> {
        let _ = dm;
        Err(VerbsError::UnknownHandle {
            verb: "ibv_free_dm",
            object: "DM",
        })
    }

    /// `ibv_memcpy_to_dm`: copy `data` into the allocation at `offset`,
    /// ordered with the device's own accesses (as
    /// [`with_memory_quiesced`](Self::with_memory_quiesced)). An invalid
    /// argument when the range leaves the allocation.
    fn memcpy_to_dm(&self, dm: DmHandle, offset: u64, data: &[u8]) -> Result<()> {
        let _ = (dm, offset, data);
        Err(VerbsError::UnknownHandle {
            verb: "ibv_memcpy_to_dm",
            object: "DM",
        })
    }

    /// `ibv_memcpy_from_dm`: fill `out` from the allocation at `offset`, as
    /// [`memcpy_to_dm`](Self::memcpy_to_dm) in the other direction.
    fn memcpy_from_dm(&self, dm: DmHandle, offset: u64, out: &mut [u8]) -> Result<()> {
        let _ = (dm, offset, out);
        Err(VerbsError::UnknownHandle {
            verb: "ibv_memcpy_from_dm",
            object: "DM",
        })
    }

    /// `ibv_reg_dm_mr`: register `len` bytes of the allocation `dm` from
    /// `offset` as a memory region of `pd`. Such regions are always
    /// zero-based (`access` must hold [`AccessFlags::ZERO_BASED`]): local
    /// and remote addresses alike are offsets from the region's start.
    /// `dereg_mr` releases it; the allocation cannot be freed before.
    fn reg_dm_mr(
        &self,
        pd: PdHandle,
        dm: DmHandle,
        offset: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<MrKeys> {
        let _ = (pd, dm, offset, len, access);
        Err(VerbsError::Unavailable(format!(
            "ibv_reg_dm_mr: the {} backend has no device memory",
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
