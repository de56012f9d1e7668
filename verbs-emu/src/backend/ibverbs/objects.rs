//! Owned handles on libibverbs objects: device list, context, protection
//! domain, memory region, completion queue, queue pair and address handle.
//!
//! Ownership mirrors the C object graph with reference counts: a PD keeps
//! its context open, an MR and a QP keep their PD, a QP keeps its CQs. Each
//! handle destroys its C object on drop, so destruction always runs children
//! first and never touches a freed parent. A destroy that fails on drop is
//! ignored (there is no one to tell), except that an MR whose deregistration
//! fails leaks its buffer rather than free memory the NIC may still reach.
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

use super::error::{IbverbsError, Result};
use super::ffi::*;
use super::library::{clear_errno, last_errno, Verbs};
use super::work::{
    encode_send, init_attributes, rtr_attributes, rts_attributes, AccessFlags, Completion,
    InitAttributes, QpType, RtrAttributes, RtsAttributes, SendFlags, SendOp, UdDestination,
};

/// The most SGEs one work request may carry through the safe post calls
/// (they build the C SGE list on the stack; providers allow about 30).
pub const MAX_SGE: usize = 32;

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

    /// `ibv_create_cq` with at least `min_entries` entries, no completion
    /// channel, vector 0.
    pub fn create_cq(&self, min_entries: u32) -> Result<CompletionQueue> {
        let cqe = c_int::try_from(min_entries).map_err(|_| IbverbsError::InvalidArgument {
            verb: "ibv_create_cq",
            reason: format!("{min_entries} CQ entries do not fit a C int"),
        })?;
        clear_errno();
        // SAFETY: live context; a null channel and cq_context are allowed.
        let cq = unsafe {
            (self.inner.verbs.create_cq)(self.as_ptr(), cqe, ptr::null_mut(), ptr::null_mut(), 0)
        };
        let cq = NonNull::new(cq).ok_or_else(|| null_error("ibv_create_cq"))?;
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                context: Arc::clone(&self.inner),
                cq,
            }),
        })
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

    /// Registers `buffer`, which the region owns until it is dropped
    /// (deregistration first, then the buffer is freed).
    pub fn register(&self, buffer: Box<[u8]>, access: AccessFlags) -> Result<MemoryRegion> {
        let mut buffer = buffer;
        let addr = buffer.as_mut_ptr();
        let len = buffer.len();
        // SAFETY: the buffer is moved into the region and outlives the
        // registration (MemoryRegion::drop deregisters before freeing it).
        let mut region = unsafe { self.register_raw(addr, len, access) }?;
        region.buffer = Some(buffer);
        Ok(region)
    }

    /// Registers `len` bytes at `addr` with `access`, as the header's
    /// `ibv_reg_mr` macro does: `ibv_reg_mr`, or `ibv_reg_mr_iova2` with
    /// `iova = addr` when an optional access flag is set.
    ///
    /// # Safety
    ///
    /// `addr..addr + len` must be memory this process owns, and it must stay
    /// allocated (and not be handed to anyone assuming exclusive access)
    /// until the returned region is dropped: the NIC reads and writes it
    /// without the compiler's knowledge.
    pub unsafe fn register_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        let verbs = &self.inner.context.verbs;
        clear_errno();
        let mr = if access.has_optional() {
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
            // SAFETY: as above; no optional bit is set, so the plain symbol
            // is the one the header would call. The bits fit an int.
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
            buffer: None,
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
            qp_type: init.qp_type.raw(),
            sq_sig_all: c_int::from(init.sq_sig_all),
        };
        clear_errno();
        // SAFETY: live PD and CQs of the same context (the library checks);
        // `attr` is a valid in/out struct.
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

    /// `ibv_create_ah` for a RoCE (global) destination, for UD sends.
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

/// A registered memory region (`struct ibv_mr`), deregistered on drop.
pub struct MemoryRegion {
    pd: Arc<PdInner>,
    mr: NonNull<ibv_mr>,
    /// The registered bytes when the region owns them.
    buffer: Option<Box<[u8]>>,
}

// SAFETY: see ContextInner. The owned buffer is only reached through
// `&mut self` or unsafe accessors.
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

    /// A bounds-checked SGE over `offset..offset + length` of this region.
    pub fn sge(&self, offset: usize, length: u32) -> Result<Sge<'_>> {
        let end = offset.checked_add(length as usize);
        if end.map_or(true, |end| end > self.len()) {
            return Err(IbverbsError::InvalidArgument {
                verb: "ibv_post_send/ibv_post_recv",
                reason: format!(
                    "SGE {offset}+{length} exceeds the {}-byte memory region",
                    self.len()
                ),
            });
        }
        Ok(Sge {
            raw: ibv_sge {
                addr: self.addr() + offset as u64,
                length,
                lkey: self.lkey(),
            },
            _region: std::marker::PhantomData,
        })
    }

    /// The owned buffer, for writing before a post.
    ///
    /// `&mut self` cannot stop the NIC, so this is only sound while no
    /// operation reading or writing the region is outstanding; it exists for
    /// set-up and checks between completions.
    ///
    /// # Safety
    ///
    /// No posted work request or remote access may touch the region while
    /// the returned slice lives.
    pub unsafe fn buffer_mut(&mut self) -> Option<&mut [u8]> {
        self.buffer.as_deref_mut()
    }

    /// The owned buffer, for reading after a completion.
    ///
    /// # Safety
    ///
    /// No local operation or remote access may write the region while the
    /// returned slice lives.
    pub unsafe fn buffer(&self) -> Option<&[u8]> {
        self.buffer.as_deref()
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // SAFETY: the MR is deregistered exactly once.
        let rc = unsafe { (self.pd.context.verbs.dereg_mr)(self.mr.as_ptr()) };
        if rc != 0 {
            // The NIC may still reach the buffer: leak it rather than free it.
            if let Some(buffer) = self.buffer.take() {
                std::mem::forget(buffer);
            }
        }
    }
}

/// One scatter/gather element inside a registered region, checked at
/// creation; it borrows the region so the region outlives the post.
#[derive(Clone, Copy, Debug)]
pub struct Sge<'a> {
    raw: ibv_sge,
    _region: std::marker::PhantomData<&'a MemoryRegion>,
}

impl Sge<'_> {
    /// The C SGE.
    pub fn raw(&self) -> ibv_sge {
        self.raw
    }
}

struct CqInner {
    context: Arc<ContextInner>,
    cq: NonNull<ibv_cq>,
}

// SAFETY: see ContextInner.
unsafe impl Send for CqInner {}
// SAFETY: as above.
unsafe impl Sync for CqInner {}

impl Drop for CqInner {
    fn drop(&mut self) {
        // SAFETY: QPs using this CQ hold an Arc to it, so none is left.
        unsafe { (self.context.verbs.destroy_cq)(self.cq.as_ptr()) };
    }
}

/// A completion queue (`struct ibv_cq`).
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

    /// Polls up to `out.len()` completions, converted.
    pub fn poll(&self, out: &mut [Completion]) -> Result<usize> {
        let mut raw = [ibv_wc::default(); 32];
        let mut filled = 0;
        while filled < out.len() {
            let want = (out.len() - filled).min(raw.len());
            let got = self.poll_raw(&mut raw[..want])?;
            for (slot, wc) in out[filled..].iter_mut().zip(&raw[..got]) {
                *slot = Completion::from(wc);
            }
            filled += got;
            if got < want {
                break;
            }
        }
        Ok(filled)
    }

    /// The header's inline `ibv_req_notify_cq`.
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
    /// Kept so the CQs outlive the QP.
    _send_cq: Arc<CqInner>,
    /// Kept so the CQs outlive the QP.
    _recv_cq: Arc<CqInner>,
    qp: NonNull<ibv_qp>,
    qp_type: QpType,
    cap: ibv_qp_cap,
}

// SAFETY: see ContextInner.
unsafe impl Send for QueuePair {}
// SAFETY: posting from several threads at once is allowed by libibverbs.
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

    /// RESET to INIT.
    pub fn to_init(&self, init: &InitAttributes) -> Result<()> {
        let (attr, mask) = init_attributes(self.qp_type, init);
        self.modify(&attr, mask)
    }

    /// INIT to RTR.
    pub fn to_rtr(&self, rtr: &RtrAttributes) -> Result<()> {
        let (attr, mask) = rtr_attributes(self.qp_type, rtr)?;
        self.modify(&attr, mask)
    }

    /// RTR to RTS.
    pub fn to_rts(&self, rts: &RtsAttributes) -> Result<()> {
        let (attr, mask) = rts_attributes(self.qp_type, rts)?;
        self.modify(&attr, mask)
    }

    /// Any state to ERR (flushes outstanding work requests).
    pub fn to_error(&self) -> Result<()> {
        let attr = ibv_qp_attr {
            qp_state: IBV_QPS_ERR,
            ..Default::default()
        };
        self.modify(&attr, IBV_QP_STATE)
    }

    /// The header's inline `ibv_post_send`: `qp->context->ops.post_send`.
    ///
    /// # Safety
    ///
    /// `wr` must be a valid list of work requests whose SGEs, and remote
    /// addresses, name memory that stays registered (and, for inline sends,
    /// readable) until the call returns, and whose local buffers stay
    /// allocated until the work request completes.
    pub unsafe fn post_send_raw(&self, wr: *mut ibv_send_wr) -> Result<()> {
        let qp = self.as_ptr();
        // SAFETY: live QP whose context is live.
        let post = unsafe { (*(*qp).context).ops.post_send }.ok_or(IbverbsError::MissingOp {
            verb: "ibv_post_send",
            slot: "post_send",
        })?;
        let mut bad: *mut ibv_send_wr = ptr::null_mut();
        clear_errno();
        // SAFETY: the caller guarantees `wr`.
        let rc = unsafe { post(qp, wr, &mut bad) };
        verb_result("ibv_post_send", rc)
    }

    /// The header's inline `ibv_post_recv`: `qp->context->ops.post_recv`.
    ///
    /// # Safety
    ///
    /// As for [`QueuePair::post_send_raw`], for receive buffers.
    pub unsafe fn post_recv_raw(&self, wr: *mut ibv_recv_wr) -> Result<()> {
        let qp = self.as_ptr();
        // SAFETY: live QP whose context is live.
        let post = unsafe { (*(*qp).context).ops.post_recv }.ok_or(IbverbsError::MissingOp {
            verb: "ibv_post_recv",
            slot: "post_recv",
        })?;
        let mut bad: *mut ibv_recv_wr = ptr::null_mut();
        clear_errno();
        // SAFETY: the caller guarantees `wr`.
        let rc = unsafe { post(qp, wr, &mut bad) };
        verb_result("ibv_post_recv", rc)
    }

    /// Posts one send work request whose SGEs were bounds-checked against
    /// their regions. `ud` is required for (and only allowed on) UD QPs.
    pub fn post_send(
        &self,
        wr_id: u64,
        op: SendOp,
        sges: &[Sge<'_>],
        flags: SendFlags,
        ud: Option<(&AddressHandle, u32, u32)>,
    ) -> Result<()> {
        if (self.qp_type == QpType::Ud) != ud.is_some() {
            return Err(IbverbsError::InvalidArgument {
                verb: "ibv_post_send",
                reason: format!(
                    "a {:?} QP {} a UD destination",
                    self.qp_type,
                    if ud.is_some() { "takes no" } else { "needs" }
                ),
            });
        }
        let (raw_sges, count) = collect_sges(sges)?;
        let mut lengths = [0u32; MAX_SGE];
        for (length, sge) in lengths.iter_mut().zip(&raw_sges[..count]) {
            *length = sge.length;
        }
        let ud = ud.map(|(ah, remote_qpn, remote_qkey)| UdDestination {
            ah: ah.as_ptr(),
            remote_qpn,
            remote_qkey,
        });
        let mut raw_sges = raw_sges;
        let mut wr = encode_send(wr_id, op, flags, ud, &lengths[..count])?;
        wr.sg_list = raw_sges.as_mut_ptr();
        wr.num_sge = count as c_int;
        // SAFETY: the SGEs borrow live regions (checked bounds), the AH is
        // borrowed, and the request lives on this stack frame for the call.
        unsafe { self.post_send_raw(&mut wr) }
    }

    /// Posts one receive work request over bounds-checked SGEs.
    pub fn post_recv(&self, wr_id: u64, sges: &[Sge<'_>]) -> Result<()> {
        let (mut raw_sges, count) = collect_sges(sges)?;
        let mut wr = ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: raw_sges.as_mut_ptr(),
            num_sge: count as c_int,
        };
        // SAFETY: as in post_send.
        unsafe { self.post_recv_raw(&mut wr) }
    }
}

fn collect_sges(sges: &[Sge<'_>]) -> Result<([ibv_sge; MAX_SGE], usize)> {
    if sges.len() > MAX_SGE {
        return Err(IbverbsError::InvalidArgument {
            verb: "ibv_post_send/ibv_post_recv",
            reason: format!("{} SGEs, at most {MAX_SGE} supported", sges.len()),
        });
    }
    let mut raw = [ibv_sge::default(); MAX_SGE];
    for (slot, sge) in raw.iter_mut().zip(sges) {
        *slot = sge.raw;
    }
    Ok((raw, sges.len()))
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
