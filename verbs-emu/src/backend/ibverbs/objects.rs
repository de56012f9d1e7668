//! Owned handles on libibverbs objects: device list, context, protection
//! domain, memory region, completion queue, queue pair and address handle.
//!
//! Ownership mirrors the C object graph with reference counts: a PD keeps
//! its context open, an MR and a QP keep their PD, a QP keeps its CQs. Each
//! handle destroys its C object on drop, so destruction always runs children
//! first and never touches a freed parent. A destroy that fails on drop is
//! ignored (there is no one to tell); [`MemoryRegion::deregister`] reports
//! it instead and hands the still-registered region back, so its owner can
//! keep the memory alive rather than free what the NIC may still reach.
//!
//! The inline verbs of `<infiniband/verbs.h>` are reproduced exactly: the
//! header's `ibv_poll_cq(cq, ...)` is `cq->context->ops.poll_cq(cq, ...)`,
//! `ibv_post_send(qp, ...)` is `qp->context->ops.post_send(qp, ...)`, and so
//! on; `ibv_query_port` prefers `verbs_context::query_port` when the provider
//! offers it, as the header's macro does.

use std::ffi::CStr;
use std::os::raw::{c_int, c_void};
use std::ptr::{self, NonNull};
use std::sync::Arc;
use std::time::Duration;

use super::error::{IbverbsError, Result};
use super::ffi::*;
use super::library::{clear_errno, last_errno, Verbs};
use crate::verbs::{AccessFlags, QpType};

/// A device found by `ibv_get_device_list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Kernel device name, e.g. `mlx5_0` or `rxe0`.
    pub name: String,
    /// Node GUID in host order (as `ibv_devices` prints it).
    pub node_guid: u64,
    /// `enum ibv_node_type` (1 = CA, 4 = RNIC).
    pub node_type: i32,
    /// `enum ibv_transport_type` (0 = InfiniBand/RoCE, 1 = iWARP).
    pub transport_type: i32,
}

/// The device list, freed on drop.
pub(crate) struct DeviceList {
    verbs: Arc<Verbs>,
    list: NonNull<*mut ibv_device>,
    len: usize,
}

impl DeviceList {
    /// `ibv_get_device_list`; no device (ENOSYS or an empty list) is
    /// [`IbverbsError::NoDevices`].
    pub(crate) fn get(verbs: &Arc<Verbs>) -> Result<Self> {
        let mut count: c_int = 0;
        clear_errno();
        // SAFETY: `count` is a valid out-pointer; the function takes no other
        // input.
        let list = unsafe { (verbs.get_device_list)(&mut count) };
        let errno = last_errno();
        let Some(list) = NonNull::new(list) else {
            return Err(match errno {
                0 | libc::ENOSYS | libc::ENODEV | libc::ENOENT => IbverbsError::NoDevices { errno },
                errno => IbverbsError::Verb {
                    verb: "ibv_get_device_list",
                    errno,
                },
            });
        };
        let list = Self {
            verbs: Arc::clone(verbs),
            list,
            len: usize::try_from(count).unwrap_or(0),
        };
        if list.len == 0 {
            return Err(IbverbsError::NoDevices { errno });
        }
        Ok(list)
    }

    /// The device pointers (valid while `self` lives).
    fn devices(&self) -> impl Iterator<Item = NonNull<ibv_device>> + '_ {
        (0..self.len).filter_map(move |index| {
            // SAFETY: the library returned an array of `len` device pointers
            // followed by NULL; `index < len`.
            NonNull::new(unsafe { *self.list.as_ptr().add(index) })
        })
    }

    fn info(&self, device: NonNull<ibv_device>) -> DeviceInfo {
        // SAFETY: `device` comes from this live list. ibv_get_device_name
        // returns a NUL-terminated string owned by the device.
        let name = unsafe {
            let name = (self.verbs.get_device_name)(device.as_ptr());
            if name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(name).to_string_lossy().into_owned()
            }
        };
        // SAFETY: as above; the GUID is returned by value, big-endian.
        let guid = unsafe { (self.verbs.get_device_guid)(device.as_ptr()) };
        // SAFETY: `device` points to a live `struct ibv_device`, whose layout
        // our mirror matches (checked by the ABI test).
        let (node_type, transport_type) = unsafe {
            (
                (*device.as_ptr()).node_type,
                (*device.as_ptr()).transport_type,
            )
        };
        DeviceInfo {
            name,
            node_guid: u64::from_be(guid),
            node_type,
            transport_type,
        }
    }

    /// Every device's name and GUID.
    pub(crate) fn infos(&self) -> Vec<DeviceInfo> {
        self.devices().map(|device| self.info(device)).collect()
    }

    /// Opens the named device, or the first one.
    pub(crate) fn open(&self, name: Option<&str>) -> Result<Context> {
        let chosen = match name {
            None => self.devices().next(),
            Some(wanted) => self
                .devices()
                .find(|device| self.info(*device).name == wanted),
        };
        let Some(device) = chosen else {
            let available = self
                .infos()
                .into_iter()
                .map(|info| info.name)
                .collect::<Vec<_>>()
                .join(", ");
            return Err(IbverbsError::DeviceNotFound {
                name: name.unwrap_or_default().to_owned(),
                available,
            });
        };
        let info = self.info(device);
        clear_errno();
        // SAFETY: `device` is an entry of this live list; rdma-core keeps the
        // device referenced by the context after the list is freed.
        let context = unsafe { (self.verbs.open_device)(device.as_ptr()) };
        let context = NonNull::new(context).ok_or_else(|| IbverbsError::Verb {
            verb: "ibv_open_device",
            errno: last_errno(),
        })?;
        Ok(Context {
            inner: Arc::new(ContextInner {
                verbs: Arc::clone(&self.verbs),
                context,
                info,
            }),
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once.
        unsafe { (self.verbs.free_device_list)(self.list.as_ptr()) };
    }
}

struct ContextInner {
    verbs: Arc<Verbs>,
    context: NonNull<ibv_context>,
    info: DeviceInfo,
}

// SAFETY: libibverbs objects may be used from any thread: every verb is
// thread-safe (rdma-core serialises inside the provider where needed), and
// the handle is only a pointer to library-owned memory.
unsafe impl Send for ContextInner {}
// SAFETY: as for Send; shared references only call thread-safe verbs.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: every child handle holds an Arc to this value, so none is
        // left when it drops; the context is closed exactly once.
        unsafe { (self.verbs.close_device)(self.context.as_ptr()) };
    }
}

/// An open RDMA device (`struct ibv_context`).
#[derive(Clone)]
pub struct Context {
    inner: Arc<ContextInner>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("device", &self.inner.info.name)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// The device this context was opened on.
    pub fn device(&self) -> &DeviceInfo {
        &self.inner.info
    }

    /// The raw context pointer, for calls this wrapper does not offer.
    pub fn as_ptr(&self) -> *mut ibv_context {
        self.inner.context.as_ptr()
    }

    /// `ibv_query_device`.
    pub fn query_device(&self) -> Result<ibv_device_attr> {
        let mut attr = ibv_device_attr::default();
        // SAFETY: live context; `attr` is a valid, writable ibv_device_attr.
        let rc = unsafe { (self.inner.verbs.query_device)(self.as_ptr(), &mut attr) };
        verb_result("ibv_query_device", rc)?;
        Ok(attr)
    }

    /// `ibv_query_port` as the header's macro does it: through
    /// `verbs_context::query_port` with our struct size when the provider
    /// offers it, else the exported compat symbol on a zeroed struct.
    pub fn query_port(&self, port_num: u8) -> Result<ibv_port_attr> {
        let mut attr = ibv_port_attr::default();
        let context = self.as_ptr();
        // SAFETY: live context; see `extended_query_port`.
        let rc = match unsafe { extended_query_port(context) } {
            // SAFETY: the provider's own extended query_port, called with
            // the size of the struct we pass, as the header does.
            Some(query) => unsafe {
                query(
                    context,
                    port_num,
                    &mut attr,
                    std::mem::size_of::<ibv_port_attr>(),
                )
            },
            // SAFETY: the exported symbol writes at most the compat layout,
            // a prefix of `ibv_port_attr`, which is zeroed beforehand.
            None => unsafe {
                (self.inner.verbs.query_port_compat)(
                    context,
                    port_num,
                    (&mut attr as *mut ibv_port_attr).cast(),
                )
            },
        };
        verb_result("ibv_query_port", rc)?;
        Ok(attr)
    }

    /// `ibv_query_gid`: the 16 GID bytes at `index` of `port_num`'s table.
    pub fn query_gid(&self, port_num: u8, index: u32) -> Result<[u8; 16]> {
        let index = c_int::try_from(index).map_err(|_| IbverbsError::InvalidArgument {
            verb: "ibv_query_gid",
            reason: format!("GID index {index} does not fit a C int"),
        })?;
        let mut gid = ibv_gid::default();
        // SAFETY: live context; `gid` is a valid out-pointer.
        let rc = unsafe { (self.inner.verbs.query_gid)(self.as_ptr(), port_num, index, &mut gid) };
        verb_result("ibv_query_gid", rc)?;
        Ok(gid.bytes())
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        clear_errno();
        // SAFETY: live context.
        let pd = unsafe { (self.inner.verbs.alloc_pd)(self.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| null_error("ibv_alloc_pd"))?;
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                context: Arc::clone(&self.inner),
                pd,
            }),
        })
    }

    /// `ibv_create_cq` with at least `min_entries` entries on vector 0, with
    /// its own completion channel (`ibv_create_comp_channel`, made
    /// non-blocking) so that [`CompletionQueue::wait_event`] can sleep.
    pub fn create_cq(&self, min_entries: u32) -> Result<CompletionQueue> {
        let cqe = c_int::try_from(min_entries).map_err(|_| IbverbsError::InvalidArgument {
            verb: "ibv_create_cq",
            reason: format!("{min_entries} CQ entries do not fit a C int"),
        })?;
        let channel = self.create_comp_channel()?;
        clear_errno();
        // SAFETY: live context and a channel of that context; a null
        // cq_context is allowed.
        let cq = unsafe {
            (self.inner.verbs.create_cq)(
                self.as_ptr(),
                cqe,
                ptr::null_mut(),
                channel.channel.as_ptr(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or_else(|| null_error("ibv_create_cq"))?;
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                context: Arc::clone(&self.inner),
                cq,
                channel,
            }),
        })
    }

    fn create_comp_channel(&self) -> Result<ChannelInner> {
        clear_errno();
        // SAFETY: live context.
        let channel = unsafe { (self.inner.verbs.create_comp_channel)(self.as_ptr()) };
        let channel = NonNull::new(channel).ok_or_else(|| null_error("ibv_create_comp_channel"))?;
        let channel = ChannelInner {
            context: Arc::clone(&self.inner),
            channel,
        };
        let fd = channel.fd();
        // SAFETY: fcntl on the channel's own open descriptor.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        // SAFETY: as above.
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(IbverbsError::Verb {
                verb: "fcntl(O_NONBLOCK) on the completion channel",
                errno: last_errno(),
            });
        }
        Ok(channel)
    }
}

/// The extended `query_port` of a provider, found the way the header's
/// `verbs_get_ctx_op(ctx, query_port)` finds it.
///
/// # Safety
///
/// `context` must point to a live context opened by libibverbs.
unsafe fn extended_query_port(context: *mut ibv_context) -> Option<query_port_ex_fn> {
    // SAFETY: the caller guarantees `context` is live.
    if unsafe { (*context).abi_compat } != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    // SAFETY: an extended context is the last field of a `verbs_context`
    // the provider allocated as one object (the marker above says so), so
    // stepping back by the field's offset stays inside that allocation.
    let extended = unsafe {
        context
            .cast::<u8>()
            .sub(std::mem::offset_of!(verbs_context, context))
            .cast::<verbs_context>()
    };
    // SAFETY: `sz` sits immediately before `context` in every version.
    let size = unsafe { (*extended).sz };
    let needed =
        std::mem::size_of::<verbs_context>() - std::mem::offset_of!(verbs_context, query_port);
    if size < needed {
        return None;
    }
    // SAFETY: `size` shows the provider's struct reaches this slot.
    unsafe { (*extended).query_port }
}

/// Maps a verb's C return value (0 or an errno, sometimes -1 with errno set)
/// to a result.
fn verb_result(verb: &'static str, rc: c_int) -> Result<()> {
    match rc {
        0 => Ok(()),
        -1 => Err(IbverbsError::Verb {
            verb,
            errno: last_errno(),
        }),
        rc => Err(IbverbsError::Verb {
            verb,
            errno: rc.abs(),
        }),
    }
}

/// The error for a verb that returned NULL (errno tells why).
fn null_error(verb: &'static str) -> IbverbsError {
    IbverbsError::Verb {
        verb,
        errno: last_errno(),
    }
}

struct PdInner {
    context: Arc<ContextInner>,
    pd: NonNull<ibv_pd>,
}

// SAFETY: see ContextInner: thread-safe verbs on library-owned memory.
unsafe impl Send for PdInner {}
// SAFETY: as above.
unsafe impl Sync for PdInner {}

impl Drop for PdInner {
    fn drop(&mut self) {
        // SAFETY: MRs, QPs and AHs hold an Arc to this PD, so none is left.
        unsafe { (self.context.verbs.dealloc_pd)(self.pd.as_ptr()) };
    }
}

/// A protection domain (`struct ibv_pd`).
#[derive(Clone)]
pub struct ProtectionDomain {
    inner: Arc<PdInner>,
}

impl std::fmt::Debug for ProtectionDomain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtectionDomain")
            .field("device", &self.inner.context.info.name)
            .finish_non_exhaustive()
    }
}

impl ProtectionDomain {
    /// The raw PD pointer.
    pub fn as_ptr(&self) -> *mut ibv_pd {
        self.inner.pd.as_ptr()
    }

    /// Registers `len` bytes at `addr` with `access`, as the header's
    /// `ibv_reg_mr` macro does: `ibv_reg_mr`, or `ibv_reg_mr_iova2` with
    /// `iova = addr` when an optional access flag is set.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be memory this process owns, and it must stay
    /// allocated until the returned region is deregistered: the NIC reads
    /// and writes it without the compiler's knowledge.
    pub unsafe fn register_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        let verbs = &self.inner.context.verbs;
        clear_errno();
        let mr = if access.bits() & IBV_ACCESS_OPTIONAL_RANGE != 0 {
            let Some(reg_mr_iova2) = verbs.reg_mr_iova2 else {
                return Err(IbverbsError::InvalidArgument {
                    verb: "ibv_reg_mr",
                    reason: format!(
                        "access flags {:#x} need ibv_reg_mr_iova2, which {} lacks",
                        access.bits(),
                        verbs.library_name
                    ),
                });
            };
            // SAFETY: live PD; the caller guarantees the range.
            unsafe {
                reg_mr_iova2(
                    self.as_ptr(),
                    addr.cast::<c_void>(),
                    len,
                    addr as u64,
                    access.bits(),
                )
            }
        } else {
            // SAFETY: as above; with no optional bit set the plain symbol is
            // the one the header calls. The defined bits fit an int.
            unsafe {
                (verbs.reg_mr)(
                    self.as_ptr(),
                    addr.cast::<c_void>(),
                    len,
                    access.bits() as c_int,
                )
            }
        };
        let mr = NonNull::new(mr).ok_or_else(|| null_error("ibv_reg_mr"))?;
        Ok(MemoryRegion {
            pd: Arc::clone(&self.inner),
            mr,
        })
    }

    /// `ibv_create_qp` on this PD.
    pub fn create_qp(&self, init: &QpInit<'_>) -> Result<QueuePair> {
        let mut attr = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: init.send_cq.inner.cq.as_ptr(),
            recv_cq: init.recv_cq.inner.cq.as_ptr(),
            srq: ptr::null_mut(),
            cap: init.cap,
            qp_type: init.qp_type.value(),
            sq_sig_all: c_int::from(init.sq_sig_all),
        };
        clear_errno();
        // SAFETY: live PD and CQs (the library checks they share a
        // context); `attr` is a valid in/out struct.
        let qp = unsafe { (self.inner.context.verbs.create_qp)(self.as_ptr(), &mut attr) };
        let qp = NonNull::new(qp).ok_or_else(|| null_error("ibv_create_qp"))?;
        Ok(QueuePair {
            pd: Arc::clone(&self.inner),
            _send_cq: Arc::clone(&init.send_cq.inner),
            _recv_cq: Arc::clone(&init.recv_cq.inner),
            qp,
            qp_type: init.qp_type,
            cap: attr.cap,
        })
    }

    /// `ibv_create_ah` (for UD sends).
    pub fn create_ah(&self, attr: &ibv_ah_attr) -> Result<AddressHandle> {
        let mut attr = *attr;
        clear_errno();
        // SAFETY: live PD; `attr` is a valid address vector.
        let ah = unsafe { (self.inner.context.verbs.create_ah)(self.as_ptr(), &mut attr) };
        let ah = NonNull::new(ah).ok_or_else(|| null_error("ibv_create_ah"))?;
        Ok(AddressHandle {
            pd: Arc::clone(&self.inner),
            ah,
        })
    }
}

/// A registered memory region (`struct ibv_mr`), deregistered on drop. The
/// memory belongs to whoever registered it.
pub struct MemoryRegion {
    pd: Arc<PdInner>,
    mr: NonNull<ibv_mr>,
}

// SAFETY: see ContextInner.
unsafe impl Send for MemoryRegion {}
// SAFETY: shared access only reads keys and addresses.
unsafe impl Sync for MemoryRegion {}

impl std::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &self.addr())
            .field("len", &self.len())
            .field("lkey", &self.lkey())
            .field("rkey", &self.rkey())
            .finish_non_exhaustive()
    }
}

impl MemoryRegion {
    fn raw(&self) -> &ibv_mr {
        // SAFETY: the MR is live while `self` is; the library does not
        // change these fields after registration.
        unsafe { self.mr.as_ref() }
    }

    /// Start address of the region.
    pub fn addr(&self) -> u64 {
        self.raw().addr as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.raw().length
    }

    /// Whether the region is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The local key (for SGEs).
    pub fn lkey(&self) -> u32 {
        self.raw().lkey
    }

    /// The remote key (for peers' RDMA and atomics).
    pub fn rkey(&self) -> u32 {
        self.raw().rkey
    }

    /// `ibv_dereg_mr`, reporting the outcome (a drop deregisters silently).
    /// On failure the region is still registered and comes back with the
    /// error, so its memory must stay alive.
    pub fn deregister(self) -> std::result::Result<(), (Self, IbverbsError)> {
        // SAFETY: live MR, deregistered once here; Drop is skipped on
        // success below.
        let rc = unsafe { (self.pd.context.verbs.dereg_mr)(self.mr.as_ptr()) };
        match verb_result("ibv_dereg_mr", rc) {
            Ok(()) => {
                let this = std::mem::ManuallyDrop::new(self);
                // SAFETY: `this` is never used again; the PD reference is
                // moved out once and released here, instead of by Drop.
                drop(unsafe { ptr::read(&this.pd) });
                Ok(())
            }
            Err(error) => Err((self, error)),
        }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: the MR is deregistered exactly once.
        unsafe { (self.pd.context.verbs.dereg_mr)(self.mr.as_ptr()) };
    }
}

/// A completion channel, destroyed after the CQ that uses it.
struct ChannelInner {
    context: Arc<ContextInner>,
    channel: NonNull<ibv_comp_channel>,
}

impl ChannelInner {
    fn fd(&self) -> c_int {
        // SAFETY: live channel; `fd` is fixed at creation.
        unsafe { (*self.channel.as_ptr()).fd }
    }
}

impl Drop for ChannelInner {
    fn drop(&mut self) {
        // SAFETY: the CQ using this channel is destroyed first: CqInner's
        // Drop runs before its fields (this one) are dropped.
        unsafe { (self.context.verbs.destroy_comp_channel)(self.channel.as_ptr()) };
    }
}

struct CqInner {
    context: Arc<ContextInner>,
    cq: NonNull<ibv_cq>,
    channel: ChannelInner,
}

// SAFETY: see ContextInner.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: QPs using this CQ hold an Arc to it, so none is left; every
        // channel event was acknowledged in wait_event.
        unsafe { (self.context.verbs.destroy_cq)(self.cq.as_ptr()) };
    }
}

/// A completion queue (`struct ibv_cq`) with its completion channel.
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl std::fmt::Debug for CompletionQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionQueue")
            .field("entries", &self.entries())
            .finish_non_exhaustive()
    }
}

impl CompletionQueue {
    /// The raw CQ pointer.
    pub fn as_ptr(&self) -> *mut ibv_cq {
        self.inner.cq.as_ptr()
    }

    /// The number of entries the library actually allocated.
    pub fn entries(&self) -> i32 {
        // SAFETY: live CQ; `cqe` is set at creation.
        unsafe { (*self.as_ptr()).cqe }
    }

    /// The header's inline `ibv_poll_cq`: `cq->context->ops.poll_cq(cq, n,
    /// wc)`. Returns how many entries of `out` were filled.
    pub fn poll_raw(&self, out: &mut [ibv_wc]) -> Result<usize> {
        let cq = self.as_ptr();
        let n = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        // SAFETY: live CQ, whose `context` is the live context it was created
        // on; the function table entry is the provider's.
        let poll = unsafe { (*(*cq).context).ops.poll_cq }.ok_or(IbverbsError::MissingOp {
            verb: "ibv_poll_cq",
            slot: "poll_cq",
        })?;
        clear_errno();
        // SAFETY: `out` has room for `n` entries.
        let rc = unsafe { poll(cq, n, out.as_mut_ptr()) };
        if rc < 0 {
            return Err(IbverbsError::Verb {
                verb: "ibv_poll_cq",
                errno: last_errno(),
            });
        }
        Ok(rc as usize)
    }

    /// The header's inline `ibv_req_notify_cq`:
    /// `cq->context->ops.req_notify_cq(cq, solicited_only)`.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        let cq = self.as_ptr();
        // SAFETY: as in poll_raw.
        let notify =
            unsafe { (*(*cq).context).ops.req_notify_cq }.ok_or(IbverbsError::MissingOp {
                verb: "ibv_req_notify_cq",
                slot: "req_notify_cq",
            })?;
        // SAFETY: live CQ.
        let rc = unsafe { notify(cq, c_int::from(solicited_only)) };
        verb_result("ibv_req_notify_cq", rc)
    }

    /// Sleeps until the CQ's channel reports a completion event or `timeout`
    /// passes; returns whether an event came. The event is taken with
    /// `ibv_get_cq_event` and acknowledged at once (`ibv_ack_cq_events`),
    /// so destroying the CQ never waits for acks. Arm with
    /// [`Self::req_notify`] and poll once more before sleeping, or a
    /// completion that arrived in between is missed.
    pub fn wait_event(&self, timeout: Duration) -> Result<bool> {
        let channel = &self.inner.channel;
        let mut pollfd = libc::pollfd {
            fd: channel.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // Round up so that a short timeout sleeps rather than spins.
        let millis = timeout.as_nanos().div_ceil(1_000_000);
        let millis = c_int::try_from(millis).unwrap_or(c_int::MAX);
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(&mut pollfd, 1, millis) };
        if ready < 0 {
            let errno = last_errno();
            if errno == libc::EINTR {
                return Ok(false);
            }
            return Err(IbverbsError::Verb {
                verb: "poll(completion channel)",
                errno,
            });
        }
        if ready == 0 {
            return Ok(false);
        }
        let mut cq: *mut ibv_cq = ptr::null_mut();
        let mut cq_context: *mut c_void = ptr::null_mut();
        clear_errno();
        // SAFETY: live channel; valid out-pointers. The fd is non-blocking,
        // so a spurious wake-up answers EAGAIN instead of blocking.
        let rc = unsafe {
            (self.inner.context.verbs.get_cq_event)(
                channel.channel.as_ptr(),
                &mut cq,
                &mut cq_context,
            )
        };
        if rc != 0 {
            let errno = last_errno();
            if errno == libc::EAGAIN {
                return Ok(false);
            }
            return Err(IbverbsError::Verb {
                verb: "ibv_get_cq_event",
                errno,
            });
        }
        // SAFETY: `cq` is the CQ the event was for (ours: one CQ per
        // channel); exactly one event is acknowledged.
        unsafe { (self.inner.context.verbs.ack_cq_events)(cq, 1) };
        Ok(true)
    }
}

/// What `ibv_create_qp` needs.
#[derive(Clone, Copy, Debug)]
pub struct QpInit<'a> {
    /// Transport service.
    pub qp_type: QpType,
    /// CQ for send completions.
    pub send_cq: &'a CompletionQueue,
    /// CQ for receive completions.
    pub recv_cq: &'a CompletionQueue,
    /// Queue sizes asked for (the library may round up).
    pub cap: ibv_qp_cap,
    /// Signal every send (otherwise per work request).
    pub sq_sig_all: bool,
}

/// A queue pair (`struct ibv_qp`).
pub struct QueuePair {
    pd: Arc<PdInner>,
    /// Kept so that the CQs outlive the QP.
    _send_cq: Arc<CqInner>,
    /// Kept so that the CQs outlive the QP.
    _recv_cq: Arc<CqInner>,
    qp: NonNull<ibv_qp>,
    qp_type: QpType,
    cap: ibv_qp_cap,
}

// SAFETY: see ContextInner.
unsafe impl Send for QueuePair {}
// SAFETY: libibverbs allows posting to one QP from several threads.
unsafe impl Sync for QueuePair {}

impl std::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueuePair")
            .field("qp_num", &self.qp_num())
            .field("qp_type", &self.qp_type)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        // SAFETY: destroyed exactly once, before its PD and CQs (held here).
        unsafe { (self.pd.context.verbs.destroy_qp)(self.qp.as_ptr()) };
    }
}

impl QueuePair {
    /// The raw QP pointer.
    pub fn as_ptr(&self) -> *mut ibv_qp {
        self.qp.as_ptr()
    }

    /// The QP number peers address.
    pub fn qp_num(&self) -> u32 {
        // SAFETY: live QP; `qp_num` is fixed at creation.
        unsafe { (*self.as_ptr()).qp_num }
    }

    /// The transport service.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// The queue sizes the library granted.
    pub fn cap(&self) -> ibv_qp_cap {
        self.cap
    }

    /// `ibv_modify_qp` with explicit attributes and mask.
    pub fn modify(&self, attr: &ibv_qp_attr, mask: c_int) -> Result<()> {
        let mut attr = *attr;
        clear_errno();
        // SAFETY: live QP; `attr` is a valid struct the call may read.
        let rc = unsafe { (self.pd.context.verbs.modify_qp)(self.as_ptr(), &mut attr, mask) };
        verb_result("ibv_modify_qp", rc)
    }

    /// `ibv_query_qp` of the attributes in `mask`.
    pub fn query(&self, mask: c_int) -> Result<ibv_qp_attr> {
        let mut attr = ibv_qp_attr::default();
        let mut init = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: ptr::null_mut(),
            recv_cq: ptr::null_mut(),
            srq: ptr::null_mut(),
            cap: ibv_qp_cap::default(),
            qp_type: 0,
            sq_sig_all: 0,
        };
        clear_errno();
        // SAFETY: live QP; both out-structs are valid and writable.
        let rc =
            unsafe { (self.pd.context.verbs.query_qp)(self.as_ptr(), &mut attr, mask, &mut init) };
        verb_result("ibv_query_qp", rc)?;
        Ok(attr)
    }

    /// The QP's current state (`ibv_query_qp` with `IBV_QP_STATE`), as an
    /// `enum ibv_qp_state` value.
    pub fn query_state(&self) -> Result<u32> {
        let mut attr = ibv_qp_attr::default();
        let mut init = ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: ptr::null_mut(),
            recv_cq: ptr::null_mut(),
            srq: ptr::null_mut(),
            cap: ibv_qp_cap::default(),
            qp_type: 0,
            sq_sig_all: 0,
        };
        clear_errno();
        // SAFETY: live QP; both out-structs are valid and writable.
        let rc = unsafe {
            (self.pd.context.verbs.query_qp)(self.as_ptr(), &mut attr, IBV_QP_STATE, &mut init)
        };
        verb_result("ibv_query_qp", rc)?;
        Ok(attr.qp_state)
    }

    /// The header's inline `ibv_post_send`:
    /// `qp->context->ops.post_send(qp, wr, bad_wr)`. On failure the error
    /// comes with `bad_wr`, the first request that was not posted.
    ///
    /// # Safety
    ///
    /// `wr` must be a valid, `next`-linked list of work requests whose SGEs
    /// name memory registered on this QP's device (inline data: readable
    /// memory) that stays allocated until the requests complete, and whose
    /// address handles are live.
    pub unsafe fn post_send_raw(
        &self,
        wr: *mut ibv_send_wr,
    ) -> std::result::Result<(), (IbverbsError, *mut ibv_send_wr)> {
        let qp = self.as_ptr();
        // SAFETY: live QP whose context is live.
        let Some(post) = (unsafe { (*(*qp).context).ops.post_send }) else {
            let error = IbverbsError::MissingOp {
                verb: "ibv_post_send",
                slot: "post_send",
            };
            return Err((error, wr));
        };
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        clear_errno();
        // SAFETY: the caller guarantees `wr`.
        let rc = unsafe { post(qp, wr, &mut bad) };
        verb_result("ibv_post_send", rc).map_err(|error| (error, bad))
    }

    /// The header's inline `ibv_post_recv`:
    /// `qp->context->ops.post_recv(qp, wr, bad_wr)`.
    ///
    /// # Safety
    ///
    /// As for [`QueuePair::post_send_raw`], for receive buffers.
    pub unsafe fn post_recv_raw(
        &self,
        wr: *mut ibv_recv_wr,
    ) -> std::result::Result<(), (IbverbsError, *mut ibv_recv_wr)> {
        let qp = self.as_ptr();
        // SAFETY: live QP whose context is live.
        let Some(post) = (unsafe { (*(*qp).context).ops.post_recv }) else {
            let error = IbverbsError::MissingOp {
                verb: "ibv_post_recv",
                slot: "post_recv",
            };
            return Err((error, wr));
        };
        let mut bad: *mut ibv_recv_wr = ptr::null_mut();
        clear_errno();
        // SAFETY: the caller guarantees `wr`.
        let rc = unsafe { post(qp, wr, &mut bad) };
        verb_result("ibv_post_recv", rc).map_err(|error| (error, bad))
    }
}

/// An address handle (`struct ibv_ah`) for UD sends.
pub struct AddressHandle {
    pd: Arc<PdInner>,
    ah: NonNull<ibv_ah>,
}

// SAFETY: see ContextInner.
unsafe impl Send for AddressHandle {}
// SAFETY: as above.
unsafe impl Sync for AddressHandle {}

impl std::fmt::Debug for AddressHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AddressHandle").finish_non_exhaustive()
    }
}

impl AddressHandle {
    /// The raw AH pointer.
    pub fn as_ptr(&self) -> *mut ibv_ah {
        self.ah.as_ptr()
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        // SAFETY: destroyed exactly once, before its PD (held here).
        unsafe { (self.pd.context.verbs.destroy_ah)(self.ah.as_ptr()) };
    }
}
