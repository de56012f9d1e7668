//! Thread domains and parent domains: `ibv_alloc_td` / `ibv_dealloc_td`
//! and `ibv_alloc_parent_domain` (their `verbs_context` slots), and the
//! queue buffers a parent domain's allocator provides.
//!
//! A parent domain is a PD: its record begins with a [`ShimPd`] naming the
//! protection domain it wraps (same backend PD, so its QPs, MRs, AHs and
//! SRQs are that PD's), and every verb that takes a PD takes it.
//! `ibv_dealloc_pd` frees it ([`dealloc_pd`]); the PD it wraps, and the
//! thread domain it names, are busy (`EBUSY`) until then, as on rdma-core's
//! ConnectX provider.
//!
//! Custom allocators follow rdma-core's contract: for each queue the
//! provider creates under the domain (a QP's send and receive queues, a
//! CQ's entries, an SRQ's entries) it asks `alloc(pd, pd_context, size,
//! alignment, resource_type)` for the queue's buffer, with the page size as
//! alignment; NULL fails the creation with `ENOMEM`;
//! `IBV_ALLOCATOR_USE_DEFAULT` means the provider's own memory, here the
//! queue the backend keeps. A custom buffer is zeroed, as a provider
//! initialises its queue, held while the queue lives and handed back with
//! `free(pd, pd_context, ptr, resource_type)` when the queue is destroyed
//! (the provider's own memory never goes to `free`). The buffers are
//! sized as a ConnectX lays its queues out (64-byte send WQEs with 16-byte
//! segments, 16-byte receive segments, 64-byte CQEs), so an allocator sees
//! the sizes it would see on that device; the work itself stays in the
//! backend's engine, which owns the emulated queues.

use std::collections::BTreeMap;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::Backend;

use crate::records::{rec, ShimContext, ShimPd};
use crate::{lock, set_errno};

/// `resource_type` of a QP's buffer: rdma-core puts the driver's id in the
/// high 32 bits (0, `RDMA_DRIVER_UNKNOWN`, for a device no vendor driver
/// serves) and numbers resources as the ConnectX provider's
/// `MLX5DV_RES_TYPE_*` do.
pub const RES_TYPE_QP: u64 = 1;
/// `resource_type` of an SRQ's buffer.
pub const RES_TYPE_SRQ: u64 = 4;
/// `resource_type` of a CQ's buffer.
pub const RES_TYPE_CQ: u64 = 5;

/// A thread domain: the C struct first.
#[repr(C)]
struct ShimTd {
    td: ibv_td,
    backend: Arc<dyn Backend>,
    /// Parent domains that name it.
    users: AtomicUsize,
}

/// A parent domain: a [`ShimPd`] first (so it is a PD to every verb), then
/// what it adds.
#[repr(C)]
pub(crate) struct ShimParentDomain {
    pub base: ShimPd,
    /// The protection domain it wraps.
    pub protection: *mut ibv_pd,
    /// The thread domain it names, or null.
    pub td: *mut ibv_td,
    pub alloc: Option<pd_alloc_fn>,
    pub free: Option<pd_free_fn>,
    pub pd_context: *mut c_void,
    /// Queues created under it and not yet destroyed.
    pub queues: AtomicUsize,
}

/// The live parent domains (address -> the PD each wraps).
static PARENTS: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

/// The queue buffers of live queues created under a parent domain, by the
/// queue object's address.
static QUEUES: Mutex<BTreeMap<usize, QueueBuf>> = Mutex::new(BTreeMap::new());

/// The parent domain `pd` is, if it is one.
pub(crate) fn parent_of<'a>(pd: *mut ibv_pd) -> Option<&'a ShimParentDomain> {
    if !lock(&PARENTS).contains_key(&(pd as usize)) {
        return None;
    }
    // SAFETY: registered by alloc_parent_domain and not yet freed: a live
    // ShimParentDomain at that address.
    Some(unsafe { &*pd.cast::<ShimParentDomain>() })
}

// ------------------------------------------------------------ thread domain

/// `verbs_context.alloc_td`: a thread domain (no attributes are defined:
/// a non-zero `comp_mask` is `EINVAL`).
pub(crate) unsafe extern "C" fn alloc_td(
    ctx: *mut ibv_context,
    attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: objects only ever carry contexts this library opened.
    let Some(c) = (unsafe { ShimContext::from_ptr(ctx) }) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    // SAFETY: the caller's input struct, or null.
    if attr.is_null() || unsafe { (*attr).comp_mask } != 0 {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    }
    let b = Box::new(ShimTd {
        td: ibv_td { context: ctx },
        backend: c.backend.clone(),
        users: AtomicUsize::new(0),
    });
    Box::into_raw(b).cast()
}

/// `verbs_context.dealloc_td`: `EBUSY` while a parent domain names it.
pub(crate) unsafe extern "C" fn dealloc_td(td: *mut ibv_td) -> c_int {
    // SAFETY: the verb's contract: a TD of ours, or null.
    let Some(t) = (unsafe { rec::<ShimTd, _>(td) }) else {
        return libc::EINVAL;
    };
    if t.users.load(Ordering::Acquire) != 0 {
        return libc::EBUSY;
    }
    // SAFETY: allocated by alloc_td; no parent domain names it.
    drop(unsafe { Box::from_raw(td.cast::<ShimTd>()) });
    0
}

// ------------------------------------------------------------ parent domain

/// `verbs_context.alloc_parent_domain`: a PD wrapping `attr.pd` (a
/// parent domain given there stands for the PD it wraps), with the thread
/// domain `attr.td` and, per `comp_mask`, custom allocators and their
/// `pd_context`. `EINVAL` for an unknown `comp_mask` bit, allocators
/// announced but missing, or objects of another device.
pub(crate) unsafe extern "C" fn alloc_parent_domain(
    ctx: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd {
    let einval = || {
        set_errno(libc::EINVAL);
        ptr::null_mut()
    };
    // SAFETY: objects only ever carry contexts this library opened.
    let Some(c) = (unsafe { ShimContext::from_ptr(ctx) }) else {
        return einval();
    };
    if attr.is_null() {
        return einval();
    }
    // SAFETY: the caller's input struct.
    let a = unsafe { &*attr };
    let known = IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS | IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT;
    if a.comp_mask & !known != 0 {
        return einval();
    }
    let with_allocators = a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS != 0;
    if with_allocators && (a.alloc.is_none() || a.free.is_none()) {
        return einval();
    }
    let protection = match parent_of(a.pd) {
        Some(p) => p.protection,
        None => a.pd,
    };
    // SAFETY: the verb's contract: a PD of ours, or null.
    let Some(p) = (unsafe { rec::<ShimPd, _>(protection) }) else {
        return einval();
    };
    if !Arc::ptr_eq(&p.backend, &c.backend) {
        return einval();
    }
    // SAFETY: a TD of ours, or null.
    let td = unsafe { rec::<ShimTd, _>(a.td) };
    if td.is_some_and(|t| !Arc::ptr_eq(&t.backend, &c.backend)) {
        return einval();
    }
    let b = Box::new(ShimParentDomain {
        base: ShimPd {
            pd: ibv_pd {
                context: ctx,
                handle: p.pd.handle,
            },
            handle: p.handle,
            backend: p.backend.clone(),
            local: p.local,
        },
        protection,
        td: a.td,
        alloc: if with_allocators { a.alloc } else { None },
        free: if with_allocators { a.free } else { None },
        pd_context: if a.comp_mask & IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT != 0 {
            a.pd_context
        } else {
            ptr::null_mut()
        },
        queues: AtomicUsize::new(0),
    });
    if let Some(t) = td {
        t.users.fetch_add(1, Ordering::AcqRel);
    }
    let raw = Box::into_raw(b);
    lock(&PARENTS).insert(raw as usize, protection as usize);
    raw.cast()
}

/// `ibv_dealloc_pd` of a parent domain, or of a PD parent domains wrap:
/// `None` for any other PD (the caller deallocates it), else the verb's
/// answer: a parent domain is freed (`EBUSY` while queues created under it
/// live), a PD that a parent domain wraps is `EBUSY`.
///
/// # Safety
///
/// `pd` is null or a PD or parent domain of ours, not yet deallocated.
pub(crate) unsafe fn dealloc_pd(pd: *mut ibv_pd) -> Option<c_int> {
    let mut parents = lock(&PARENTS);
    if !parents.contains_key(&(pd as usize)) {
        return parents
            .values()
            .any(|&p| p == pd as usize)
            .then_some(libc::EBUSY);
    }
    // SAFETY: registered, hence a live parent domain of ours.
    let d = unsafe { &*pd.cast::<ShimParentDomain>() };
    if d.queues.load(Ordering::Acquire) != 0 {
        return Some(libc::EBUSY);
    }
    parents.remove(&(pd as usize));
    drop(parents);
    // SAFETY: a TD of ours, or null; it outlives the parent domains that
    // name it (dealloc_td refuses while `users` counts them).
    if let Some(t) = unsafe { rec::<ShimTd, _>(d.td) } {
        t.users.fetch_sub(1, Ordering::AcqRel);
    }
    // SAFETY: allocated by alloc_parent_domain; unregistered above, so no
    // verb finds it any more.
    drop(unsafe { Box::from_raw(pd.cast::<ShimParentDomain>()) });
    Some(0)
}

// ------------------------------------------------------------ queue buffers

/// The buffer of one queue created under a parent domain: what its
/// allocator gave (or nothing: the provider's own memory), given back when
/// the queue is destroyed. It counts in the domain's `queues`.
pub(crate) struct QueueBuf {
    domain: *const ShimParentDomain,
    /// The custom buffer, if the allocator gave one.
    ptr: *mut c_void,
    resource: u64,
}

// SAFETY: the pointers are a parent domain that outlives the buffer (its
// dealloc is refused while `queues` counts it) and the allocator's buffer,
// which only `drop` touches; rdma-core's allocators may be called from any
// thread that destroys the queue.
unsafe impl Send for QueueBuf {}

impl Drop for QueueBuf {
    fn drop(&mut self) {
        // SAFETY: the domain outlives its queue buffers (see `Send`).
        let d = unsafe { &*self.domain };
        if !self.ptr.is_null() {
            if let Some(free) = d.free {
                // SAFETY: the allocator's own free, with the pointer its
                // alloc returned and the arguments rdma-core passes.
                unsafe {
                    free(
                        ptr::from_ref(&d.base.pd).cast_mut(),
                        d.pd_context,
                        self.ptr,
                        self.resource,
                    )
                };
            }
        }
        d.queues.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The page size: the alignment queue buffers are asked for.
fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|p| *p > 0).unwrap_or(4096)
}

/// The buffer of a queue of `size` bytes and `resource` type created under
/// `pd`: `Ok(None)` when `pd` is a plain PD (the backend's memory serves),
/// else the domain's buffer, or `Err(ENOMEM)` when its allocator returns
/// NULL.
pub(crate) fn queue_buffer(
    pd: *mut ibv_pd,
    resource: u64,
    size: usize,
) -> Result<Option<QueueBuf>, c_int> {
    let Some(d) = parent_of(pd) else {
        return Ok(None);
    };
    let page = page_size();
    let size = size.max(1).next_multiple_of(page);
    let mut ptr = ptr::null_mut();
    if let Some(alloc) = d.alloc {
        // SAFETY: the program's allocator, called as rdma-core calls it:
        // the parent domain, its context, a size and a power-of-two
        // alignment.
        let p = unsafe {
            alloc(
                ptr::from_ref(&d.base.pd).cast_mut(),
                d.pd_context,
                size,
                page,
                resource,
            )
        };
        if p.is_null() {
            return Err(libc::ENOMEM);
        }
        if p != IBV_ALLOCATOR_USE_DEFAULT {
            // SAFETY: the allocator's contract: `size` writable bytes at
            // `p`, the queue's alone until it is freed.
            unsafe { p.cast::<u8>().write_bytes(0, size) };
            ptr = p;
        }
    }
    d.queues.fetch_add(1, Ordering::AcqRel);
    Ok(Some(QueueBuf {
        domain: d,
        ptr,
        resource,
    }))
}

/// Keep `buf` for the queue object at `obj` until [`release`].
pub(crate) fn keep(obj: usize, buf: Option<QueueBuf>) {
    if let Some(b) = buf {
        lock(&QUEUES).insert(obj, b);
    }
}

/// The queue object at `obj` was destroyed: give its buffer back.
pub(crate) fn release(obj: usize) {
    let b = lock(&QUEUES).remove(&obj);
    // Dropped outside the lock: the allocator's free may call verbs.
    drop(b);
}

/// Bytes of a QP's queues as a ConnectX lays them out: send WQEs of a
/// 64-byte control and address part plus 16 bytes per SGE (or the inline
/// data), receive WQEs of 16 bytes per SGE, each a power of two.
pub(crate) fn qp_buffer_size(cap: &ibv_qp_cap) -> usize {
    let sq_stride = (64 + 16 * cap.max_send_sge.max(1) as usize)
        .max(64 + cap.max_inline_data as usize)
        .next_power_of_two();
    let rq_stride = (16 * cap.max_recv_sge.max(1) as usize).next_power_of_two();
    cap.max_send_wr as usize * sq_stride + cap.max_recv_wr as usize * rq_stride
}

/// Bytes of a CQ of `cqe` entries: 64-byte CQEs.
pub(crate) fn cq_buffer_size(cqe: usize) -> usize {
    cqe.max(1) * 64
}

/// Bytes of an SRQ of `max_wr` entries of `max_sge` SGEs: a 16-byte next
/// segment plus 16 bytes per SGE, a power of two.
pub(crate) fn srq_buffer_size(max_wr: u32, max_sge: u32) -> usize {
    max_wr as usize * (16 + 16 * max_sge.max(1) as usize).next_power_of_two()
}

/// Fill the thread- and parent-domain slots of a new context.
pub(crate) fn install(vctx: &mut verbs_context) {
    // SAFETY: the slot's C type is `alloc_td_fn`; `unused_fn` only stands
    // in for it in the mirror, and the inline `ibv_alloc_td` calls it with
    // that type.
    vctx.alloc_td =
        Some(unsafe { std::mem::transmute::<alloc_td_fn, unsafe extern "C" fn()>(alloc_td) });
    // SAFETY: as above, for `dealloc_td_fn` and `ibv_dealloc_td`.
    vctx.dealloc_td =
        Some(unsafe { std::mem::transmute::<dealloc_td_fn, unsafe extern "C" fn()>(dealloc_td) });
    // SAFETY: as above, for `alloc_parent_domain_fn` and
    // `ibv_alloc_parent_domain`.
    vctx.alloc_parent_domain = Some(unsafe {
        std::mem::transmute::<alloc_parent_domain_fn, unsafe extern "C" fn()>(alloc_parent_domain)
    });
}
