//! The verbs API: rdma-core's objects in Rust (STYLE.md rule 8).
//!
//! ```text
//! device list -> Context -> ProtectionDomain -> MemoryRegion
//!                        -> CompletionQueue      -> QueuePair (builder, modify, post)
//!                                                -> AddressHandle (UD)
//! ```
//!
//! Objects hold their parents alive (`Arc`), and destroy themselves on
//! drop in the order rdma-core requires (QPs before CQs and PDs, MRs before
//! PDs). Code written against these types runs unchanged over the UDP
//! emulation and over real hardware: the difference lives in the
//! [`Backend`] trait underneath.
//!
//! Posting work requests is `unsafe` for the reason it is in C: the device
//! reads and writes the buffers asynchronously until the completion (see
//! [`QueuePair::post_send`]). Memory regions allocated by
//! [`ProtectionDomain::alloc_mr`] own their buffer, so they cannot be freed
//! while registered.
//!
//! Region bytes are shared with the device: the UDP emulation's progress
//! thread (or a NIC's DMA) writes them while the application runs. Safe
//! code reaches them only by copying: [`MemoryRegion::read`],
//! [`MemoryRegion::write`], [`MemoryRegion::fill`],
//! [`MemoryRegion::read_u64`] and [`MemoryRegion::read_u8`] run under the
//! backend's memory synchronisation ([`Backend::with_memory_quiesced`]),
//! so they never form a data race; bytes a transfer in flight is changing
//! read as old or new values (read after the completion, or after a flag
//! the peer writes last, to see a message whole). The plain slices
//! [`MemoryRegion::as_slice`] and [`MemoryRegion::as_mut_slice`] are
//! `unsafe`: their contract excludes every concurrent device access.
//! Offsets and lengths are bytes from the region's start; a range outside
//! the region is an `InvalidArgument` error, also for
//! [`MemoryRegion::sge`].

use std::alloc::Layout;
use std::sync::Arc;
use std::time::Duration;

use self::handle::{AhHandle, CqHandle, MrHandle, PdHandle, QpHandle};
use crate::backend::{Backend, BackendKind, DeviceEntry, Provider};
use roce::wire::{Lkey, Qpn, Rkey};

mod error;
pub(crate) mod handle;
pub mod qp_state;
mod types;

pub use error::{PostError, Result, VerbsError};
pub use types::{
    AccessFlags, AhAttr, ConnectAttr, DeviceAttr, Endpoint, Gid, Mtu, PortAttr, QpAttr, QpAttrMask,
    QpCap, QpInitAttr, QpState, QpType, RecvWr, RemoteMr, SendFlags, SendOp, SendWr, Sge, UdDest,
    WcFlags, WcOpcode, WcStatus, WorkCompletion,
};

/// Every device that the given providers can open, in provider order
/// (`ibv_get_device_list`). A provider that is unavailable on this machine
/// is skipped; its error is returned in the second list.
pub fn device_list(
    providers: &[&dyn Provider],
) -> (Vec<DeviceEntry>, Vec<(BackendKind, VerbsError)>) {
    let mut devices = Vec::new();
    let mut errors = Vec::new();
    for p in providers {
        match p.devices() {
            Ok(mut d) => devices.append(&mut d),
            Err(e) => errors.push((p.kind(), e)),
        }
    }
    (devices, errors)
}

/// An opened device (`ibv_context`).
#[derive(Clone)]
pub struct Context {
    backend: Arc<dyn Backend>,
}

impl Context {
    /// Open `device` with `provider` (`ibv_open_device`).
    pub fn open(provider: &dyn Provider, device: &DeviceEntry) -> Result<Context> {
        Ok(Context {
            backend: provider.open(device)?,
        })
    }

    /// Open the device of `provider` whose port has the GID of `addr`
    /// (`Provider::open_by_gid`): pick a device by its address.
    pub fn open_by_address(provider: &dyn Provider, addr: std::net::IpAddr) -> Result<Context> {
        Ok(Context {
            backend: provider.open_by_gid(Gid::from_ip(addr))?,
        })
    }

    /// Wrap an already opened backend.
    pub fn from_backend(backend: Arc<dyn Backend>) -> Context {
        Context { backend }
    }

    /// The backend underneath.
    pub fn backend(&self) -> &Arc<dyn Backend> {
        &self.backend
    }

    /// `ibv_query_device`.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        self.backend.query_device()
    }

    /// `ibv_query_port`.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        self.backend.query_port(port)
    }

    /// `ibv_query_gid`.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        self.backend.query_gid(port, index)
    }

    /// The device's counters by name (`Backend::counters`): the
    /// transport's under mlx5's hardware counter names, as the simulator
    /// names them, then the device's own. Counted since the device was
    /// opened, destroyed QPs included; a QP's own are
    /// [`QueuePair::counters`].
    pub fn counters(&self) -> Result<Vec<(String, u64)>> {
        self.backend.counters()
    }

    /// One counter of [`counters`](Self::counters), `None` when the device
    /// keeps no counter of that name.
    pub fn counter(&self, name: &str) -> Result<Option<u64>> {
        Ok(self
            .counters()?
            .into_iter()
            .find_map(|(n, v)| (n == name).then_some(v)))
    }

    /// The next asynchronous event (`ibv_get_async_event`, without
    /// blocking): CQ overruns, QPs gone to ERR, drained send queues.
    pub fn poll_async_event(&self) -> Option<crate::backend::AsyncEvent> {
        self.backend.poll_async_event()
    }

    /// `ibv_alloc_pd`.
    pub fn alloc_pd(&self) -> Result<ProtectionDomain> {
        let handle = self.backend.alloc_pd()?;
        Ok(ProtectionDomain {
            inner: Arc::new(PdInner {
                backend: self.backend.clone(),
                handle,
            }),
        })
    }

    /// `ibv_create_cq` with at least `cqe` entries.
    pub fn create_cq(&self, cqe: u32) -> Result<CompletionQueue> {
        let handle = self.backend.create_cq(cqe)?;
        Ok(CompletionQueue {
            inner: Arc::new(CqInner {
                backend: self.backend.clone(),
                handle,
                kept: Default::default(),
            }),
        })
    }
}

struct PdInner {
    backend: Arc<dyn Backend>,
    handle: PdHandle,
}

impl Drop for PdInner {
    fn drop(&mut self) {
        // Children hold this alive, so nothing uses the PD any more; a
        // failure here can only be a backend already gone.
        let _ = self.backend.dealloc_pd(self.handle);
    }
}

/// A protection domain (`ibv_pd`).
#[derive(Clone)]
pub struct ProtectionDomain {
    inner: Arc<PdInner>,
}

impl ProtectionDomain {
    /// The backend handle.
    pub fn handle(&self) -> PdHandle {
        self.inner.handle
    }

    /// Allocate `len` zeroed, page-aligned bytes and register them with
    /// `access`. The region owns the buffer.
    pub fn alloc_mr(&self, len: usize, access: AccessFlags) -> Result<MemoryRegion> {
        if len == 0 {
            return Err(VerbsError::invalid("ibv_reg_mr", "length 0"));
        }
        let layout = Layout::from_size_align(len, 4096)
            .map_err(|e| VerbsError::invalid("ibv_reg_mr", e.to_string()))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(VerbsError::invalid(
                "ibv_reg_mr",
                format!("cannot allocate {len} bytes"),
            ));
        }
        // SAFETY: ptr is a fresh allocation of len bytes that the region
        // frees only after deregistration (Drop order in MemoryRegion).
        match unsafe { self.register_raw(ptr, len, access) } {
            Ok(mut mr) => {
                mr.owned = Some(layout);
                Ok(mr)
            }
            Err(e) => {
                // SAFETY: allocated above with this layout, never registered.
                unsafe { std::alloc::dealloc(ptr, layout) };
                Err(e)
            }
        }
    }

    /// Register caller-owned memory (`ibv_reg_mr`).
    ///
    /// # Safety
    ///
    /// `[addr, addr + len)` must stay valid for reads and writes until the
    /// returned region is dropped, and the caller must expect the device to
    /// read and write it at any time in between.
    ///
    /// With [`AccessFlags::ON_DEMAND`] (on a device that claims ODP), the
    /// device itself needs none of that: it resolves each access's pages
    /// and fails the access where they are not mapped (see
    /// [`Backend::reg_mr`]), and a null `addr` with `len == usize::MAX` is
    /// the implicit region. The region's own accessors ([`MemoryRegion::read`],
    /// `write`, `fill`, ...) touch the memory directly, though: the caller
    /// promises that every range it passes them is valid memory.
    pub unsafe fn register_raw(
        &self,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MemoryRegion> {
        // SAFETY: forwarded from the caller's contract.
        let keys = unsafe {
            self.inner
                .backend
                .reg_mr(self.inner.handle, addr, len, access)?
        };
        Ok(MemoryRegion {
            pd: self.inner.clone(),
            handle: keys.handle,
            addr,
            len,
            lkey: keys.lkey,
            rkey: keys.rkey,
            access,
            pinned: keys.pinned,
            pin_error: keys.pin_error,
            owned: None,
        })
    }

    /// `ibv_create_ah`.
    pub fn create_ah(&self, attr: &AhAttr) -> Result<AddressHandle> {
        let handle = self.inner.backend.create_ah(self.inner.handle, attr)?;
        Ok(AddressHandle {
            pd: self.inner.clone(),
            handle,
        })
    }

    /// Start building a QP of `qp_type` (`ibv_create_qp`).
    pub fn qp_builder(&self, qp_type: QpType) -> QueuePairBuilder {
        QueuePairBuilder {
            pd: self.inner.clone(),
            qp_type,
            cap: QpCap::default(),
            sq_sig_all: false,
            send_cq: None,
            recv_cq: None,
            cc: None,
            min_time_between_cnps: None,
        }
    }
}

/// A registered memory region (`ibv_mr`).
pub struct MemoryRegion {
    pd: Arc<PdInner>,
    handle: MrHandle,
    addr: *mut u8,
    len: usize,
    lkey: Lkey,
    rkey: Rkey,
    access: AccessFlags,
    pinned: bool,
    pin_error: Option<String>,
    owned: Option<Layout>,
}

// SAFETY: the region is a pointer to memory that the device may access from
// any thread anyway; the handle methods go through the thread-safe backend.
unsafe impl Send for MemoryRegion {}
// SAFETY: as above; shared access hands out the address and keys, copies
// under the backend's memory synchronisation (`read`/`write`), or a slice
// through an `unsafe` accessor whose contract excludes concurrent writers.
unsafe impl Sync for MemoryRegion {}

impl MemoryRegion {
    /// Start address.
    pub fn addr(&self) -> u64 {
        self.addr as u64
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty region (never: registration refuses length 0).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Local key.
    pub fn lkey(&self) -> Lkey {
        self.lkey
    }

    /// Remote key.
    pub fn rkey(&self) -> Rkey {
        self.rkey
    }

    /// Access flags it was registered with.
    pub fn access(&self) -> AccessFlags {
        self.access
    }

    /// Whether the pages are pinned in RAM.
    pub fn pinned(&self) -> bool {
        self.pinned
    }

    /// Why pinning failed, when it did (e.g. `RLIMIT_MEMLOCK` too low).
    pub fn pin_error(&self) -> Option<&str> {
        self.pin_error.as_deref()
    }

    /// The backend handle.
    pub fn handle(&self) -> MrHandle {
        self.handle
    }

    /// An SGE covering `offset..offset + len` of the region; an
    /// `InvalidArgument` error says so when the range is not inside it.
    pub fn sge(&self, offset: usize, len: u32) -> Result<Sge> {
        self.check_range("sge", offset, len as usize)?;
        Ok(Sge {
            addr: self.addr() + offset as u64,
            length: len,
            lkey: self.lkey,
        })
    }

    /// `offset..offset + len` inside the region, or an error naming `verb`.
    fn check_range(&self, verb: &'static str, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_some_and(|end| end <= self.len) {
            Ok(())
        } else {
            Err(VerbsError::InvalidArgument {
                verb,
                why: format!(
                    "range {offset}+{len} is outside the {}-byte region",
                    self.len
                ),
            })
        }
    }

    /// The region as a peer needs it.
    pub fn remote(&self) -> RemoteMr {
        RemoteMr {
            addr: if self.access.contains(AccessFlags::ZERO_BASED) {
                0
            } else {
                self.addr()
            },
            rkey: self.rkey.value(),
            len: self.len as u64,
        }
    }

    /// Copy `out.len()` bytes starting at `offset` out of the region.
    ///
    /// Safe at any time, also while QPs and peers access the region: the
    /// copy runs under the backend's memory synchronisation
    /// ([`Backend::with_memory_quiesced`]), so it never races with the
    /// emulation's own reads and writes. Bytes that a transfer in flight
    /// is changing read as old or new values (a remote WRITE is not
    /// atomic); read after the completion, or after a flag the peer wrote
    /// last, to see a message whole.
    pub fn read(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.check_range("mr read", offset, out.len())?;
        let src = self.addr.wrapping_add(offset);
        self.pd.backend.with_memory_quiesced(&mut || {
            // SAFETY: the range is inside the region (checked above), which
            // stays allocated while `self` lives; the backend synchronises
            // its own accesses with this closure; `out` is a distinct Rust
            // buffer, so the ranges do not overlap.
            unsafe { std::ptr::copy_nonoverlapping(src, out.as_mut_ptr(), out.len()) }
        });
        Ok(())
    }

    /// Copy `data` into the region at `offset`. The same synchronisation
    /// as [`MemoryRegion::read`]; overwriting a buffer that a posted WR is
    /// still sending changes what goes on the wire (unspecified bytes for
    /// the peer, as on a NIC), never undefined behaviour here.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.check_range("mr write", offset, data.len())?;
        let dst = self.addr.wrapping_add(offset);
        self.pd.backend.with_memory_quiesced(&mut || {
            // SAFETY: as in `read`, in the other direction.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) }
        });
        Ok(())
    }

    /// Set `len` bytes at `offset` to `byte`, synchronised as
    /// [`MemoryRegion::write`].
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<()> {
        self.check_range("mr fill", offset, len)?;
        let dst = self.addr.wrapping_add(offset);
        self.pd.backend.with_memory_quiesced(&mut || {
            // SAFETY: as in `write`.
            unsafe { std::ptr::write_bytes(dst, byte, len) }
        });
        Ok(())
    }

    /// The native-endian `u64` at `offset` (an atomic's result, a credit
    /// counter a peer WRITEs), read as [`MemoryRegion::read`] does.
    pub fn read_u64(&self, offset: usize) -> Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_ne_bytes(b))
    }

    /// The one byte at `offset`, read as [`MemoryRegion::read`] does (the
    /// latency tests poll a message's last byte this way).
    pub fn read_u8(&self, offset: usize) -> Result<u8> {
        let mut b = [0u8; 1];
        self.read(offset, &mut b)?;
        Ok(b[0])
    }

    /// The bytes as a plain slice, without synchronisation.
    ///
    /// # Safety
    ///
    /// For as long as the slice lives, nothing may write the region: no QP
    /// of this device may have a receive posted into it or a remote-write
    /// or remote-atomic access in flight through its rkey, and no other
    /// thread may call [`MemoryRegion::write`] or [`MemoryRegion::fill`].
    /// Prefer [`MemoryRegion::read`].
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: addr/len name a live allocation for the region's lifetime
        // (register_raw's contract or our own allocation); the caller
        // promises no concurrent writer.
        unsafe { std::slice::from_raw_parts(self.addr, self.len) }
    }

    /// The bytes as a plain mutable slice, without synchronisation.
    ///
    /// # Safety
    ///
    /// For as long as the slice lives, nothing else may read or write the
    /// region: no posted send, receive, RDMA READ or WRITE may name it
    /// (locally or through its rkey) and no other thread may use
    /// [`MemoryRegion::read`] or [`MemoryRegion::write`] on it. Prefer
    /// [`MemoryRegion::write`].
    pub unsafe fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in as_slice; &mut self excludes other Rust borrows and
        // the caller promises the device does not access the region.
        unsafe { std::slice::from_raw_parts_mut(self.addr, self.len) }
    }
}

impl Drop for MemoryRegion {
    fn drop(&mut self) {
        // After a successful dereg_mr the backend never touches the memory
        // again (Backend contract), so freeing it next is sound. When
        // deregistration fails (a provider's EBUSY, a device gone wrong) the
        // registration may still be live: the device could still DMA into
        // these pages or a peer still WRITE to them through the rkey, so
        // freeing them would hand memory the device references to the
        // allocator. The buffer is leaked instead, deliberately: a leak is
        // bounded and safe, a use after free is neither.
        if self.pd.backend.dereg_mr(self.handle).is_err() {
            return;
        }
        if let Some(layout) = self.owned {
            // SAFETY: allocated in alloc_mr with this layout; deregistered
            // above, so nothing references it any more.
            unsafe { std::alloc::dealloc(self.addr, layout) };
        }
    }
}

impl core::fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MemoryRegion")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len)
            .field("lkey", &self.lkey)
            .field("rkey", &self.rkey)
            .field("access", &self.access)
            .field("pinned", &self.pinned)
            .finish()
    }
}

struct CqInner {
    backend: Arc<dyn Backend>,
    handle: CqHandle,
    /// Completions `poll_n` took from the device but could not return
    /// (it timed out or failed first): `poll` hands them out before any
    /// new ones, so that none is lost.
    kept: std::sync::Mutex<std::collections::VecDeque<WorkCompletion>>,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        let _ = self.backend.destroy_cq(self.handle);
    }
}

/// A completion queue (`ibv_cq`).
#[derive(Clone)]
pub struct CompletionQueue {
    inner: Arc<CqInner>,
}

impl CompletionQueue {
    /// The backend handle.
    pub fn handle(&self) -> CqHandle {
        self.inner.handle
    }

    /// `ibv_poll_cq`: fill the front of `wc`, return the filled part.
    pub fn poll<'a>(&self, wc: &'a mut [WorkCompletion]) -> Result<&'a [WorkCompletion]> {
        let mut k = 0;
        {
            let mut kept = self.inner.kept.lock().unwrap_or_else(|e| e.into_inner());
            while k < wc.len() {
                let Some(c) = kept.pop_front() else { break };
                wc[k] = c;
                k += 1;
            }
        }
        if k > 0 {
            return Ok(&wc[..k]);
        }
        let n = self.inner.backend.poll_cq(self.inner.handle, wc)?;
        Ok(&wc[..n])
    }

    /// Put completions taken by `poll_n` back in front of the queue.
    fn keep(&self, taken: Vec<WorkCompletion>) {
        let mut kept = self.inner.kept.lock().unwrap_or_else(|e| e.into_inner());
        for c in taken.into_iter().rev() {
            kept.push_front(c);
        }
    }

    /// Block until a completion is available or `timeout` passes; returns
    /// whether one is.
    pub fn wait(&self, timeout: Duration) -> Result<bool> {
        if !self
            .inner
            .kept
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
        {
            return Ok(true);
        }
        self.inner.backend.wait_cq(self.inner.handle, timeout)
    }

    /// Poll until `n` completions have arrived or `timeout` passes. On a
    /// timeout or an error, the completions already taken stay queued (the
    /// next `poll` or `poll_n` returns them first): none is lost.
    pub fn poll_n(&self, n: usize, timeout: Duration) -> Result<Vec<WorkCompletion>> {
        let deadline = std::time::Instant::now() + timeout;
        let mut out = Vec::with_capacity(n);
        let mut buf = [WorkCompletion::empty(); 16];
        while out.len() < n {
            let want = (n - out.len()).min(buf.len());
            let got = match self.poll(&mut buf[..want]) {
                Ok(got) => got,
                Err(e) => {
                    self.keep(out);
                    return Err(e);
                }
            };
            out.extend_from_slice(got);
            if out.len() >= n {
                break;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                self.keep(out);
                return Err(VerbsError::Timeout {
                    verb: "ibv_poll_cq",
                });
            }
            if got.is_empty() {
                if let Err(e) = self.wait(deadline - now) {
                    self.keep(out);
                    return Err(e);
                }
            }
        }
        Ok(out)
    }
}

/// An address handle (`ibv_ah`), for UD sends.
pub struct AddressHandle {
    pd: Arc<PdInner>,
    handle: AhHandle,
}

impl AddressHandle {
    /// The backend handle, for [`UdDest::ah`].
    pub fn handle(&self) -> AhHandle {
        self.handle
    }
}

impl Drop for AddressHandle {
    fn drop(&mut self) {
        let _ = self.pd.backend.destroy_ah(self.handle);
    }
}

/// Builds a QP (`ibv_qp_init_attr`), in the rust-ibverbs shape.
pub struct QueuePairBuilder {
    pd: Arc<PdInner>,
    qp_type: QpType,
    cap: QpCap,
    sq_sig_all: bool,
    send_cq: Option<CompletionQueue>,
    recv_cq: Option<CompletionQueue>,
    cc: Option<roce::cc::CcConfig>,
    min_time_between_cnps: Option<roce::time::Duration>,
}

impl QueuePairBuilder {
    /// This QP's congestion control instead of the device's (emulated
    /// devices; a NIC's is set in its firmware and ignores this).
    #[must_use]
    pub fn cc(mut self, cc: roce::cc::CcConfig) -> Self {
        self.cc = Some(cc);
        self
    }

    /// This QP's CNP interval (notification point) instead of the
    /// device's (emulated devices).
    #[must_use]
    pub fn cnp_interval(mut self, d: roce::time::Duration) -> Self {
        self.min_time_between_cnps = Some(d);
        self
    }

    /// Send and receive completions go to `cq`.
    #[must_use]
    pub fn cq(mut self, cq: &CompletionQueue) -> Self {
        self.send_cq = Some(cq.clone());
        self.recv_cq = Some(cq.clone());
        self
    }

    /// Send completions go to `cq`.
    #[must_use]
    pub fn send_cq(mut self, cq: &CompletionQueue) -> Self {
        self.send_cq = Some(cq.clone());
        self
    }

    /// Receive completions go to `cq`.
    #[must_use]
    pub fn recv_cq(mut self, cq: &CompletionQueue) -> Self {
        self.recv_cq = Some(cq.clone());
        self
    }

    /// Queue capabilities.
    #[must_use]
    pub fn cap(mut self, cap: QpCap) -> Self {
        self.cap = cap;
        self
    }

    /// Send queue depth.
    #[must_use]
    pub fn max_send_wr(mut self, n: u32) -> Self {
        self.cap.max_send_wr = n;
        self
    }

    /// Receive queue depth.
    #[must_use]
    pub fn max_recv_wr(mut self, n: u32) -> Self {
        self.cap.max_recv_wr = n;
        self
    }

    /// Largest inline payload.
    #[must_use]
    pub fn max_inline_data(mut self, n: u32) -> Self {
        self.cap.max_inline_data = n;
        self
    }

    /// Every send WR completes with a CQE (`sq_sig_all`).
    #[must_use]
    pub fn sq_sig_all(mut self, all: bool) -> Self {
        self.sq_sig_all = all;
        self
    }

    /// `ibv_create_qp`. The QP starts in RESET.
    pub fn build(self) -> Result<QueuePair> {
        let send_cq = self
            .send_cq
            .ok_or_else(|| VerbsError::invalid("ibv_create_qp", "no send CQ given"))?;
        let recv_cq = self
            .recv_cq
            .ok_or_else(|| VerbsError::invalid("ibv_create_qp", "no receive CQ given"))?;
        let init = QpInitAttr {
            qp_type: self.qp_type,
            send_cq: send_cq.handle(),
            recv_cq: recv_cq.handle(),
            cap: self.cap,
            sq_sig_all: self.sq_sig_all,
            cc: self.cc,
            min_time_between_cnps: self.min_time_between_cnps,
        };
        let created = self.pd.backend.create_qp(self.pd.handle, &init)?;
        Ok(QueuePair {
            pd: self.pd,
            _send_cq: send_cq,
            _recv_cq: recv_cq,
            handle: created.handle,
            qpn: created.qpn,
            qp_type: self.qp_type,
            cap: created.cap,
        })
    }
}

/// A queue pair (`ibv_qp`).
pub struct QueuePair {
    pd: Arc<PdInner>,
    _send_cq: CompletionQueue,
    _recv_cq: CompletionQueue,
    handle: QpHandle,
    qpn: Qpn,
    qp_type: QpType,
    cap: QpCap,
}

impl QueuePair {
    /// QP number.
    pub fn qpn(&self) -> Qpn {
        self.qpn
    }

    /// Transport type.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Granted capabilities.
    pub fn cap(&self) -> QpCap {
        self.cap
    }

    /// The rate this QP's congestion control lets its data out at now
    /// (DCQCN's current rate), in bits per second on the wire; `None`
    /// when nothing limits it. [`VerbsError::Unavailable`] on a NIC,
    /// which keeps it in firmware.
    pub fn cc_rate(&self) -> Result<Option<roce::time::Rate>> {
        Ok(self.pd.backend.qp_counters(self.handle)?.rate)
    }

    /// The backend handle.
    pub fn handle(&self) -> QpHandle {
        self.handle
    }

    /// `ibv_modify_qp`. Invalid transitions and masks are refused with a
    /// precise error, and nothing changes.
    pub fn modify(&self, attr: &QpAttr) -> Result<()> {
        self.pd.backend.modify_qp(self.handle, attr)
    }

    /// The current state.
    pub fn state(&self) -> Result<QpState> {
        self.pd.backend.query_qp_state(self.handle)
    }

    /// This QP's transport counters (mlx5's names, as `rdma statistic qp`
    /// shows a QP's; counted since it was created or last reset) and the
    /// sending rate its congestion control allows now
    /// (`Backend::qp_counters`).
    pub fn counters(&self) -> Result<crate::backend::counters::QpCounters> {
        self.pd.backend.qp_counters(self.handle)
    }

    /// This QP's out-of-band record: QPN, first send PSN, the port's GID
    /// (GID index `gid_index`) and optionally a region to offer.
    pub fn endpoint(
        &self,
        psn: u32,
        gid_index: u32,
        mr: Option<&MemoryRegion>,
    ) -> Result<Endpoint> {
        let gid = self.pd.backend.query_gid(1, gid_index)?;
        let port = self.pd.backend.query_port(1)?;
        Ok(Endpoint {
            lid: port.lid,
            qpn: self.qpn.value(),
            psn: psn & 0xFF_FFFF,
            gid,
            udp_port: self.pd.backend.udp_port(),
            mtu: port.active_mtu,
            mr: mr.map(MemoryRegion::remote),
        })
    }

    /// Take an RC or UC QP to RTS towards `remote`, with perftest's usual
    /// attributes (`access` for incoming requests, `timeout` 14, 7
    /// retries, 7 RNR retries, 16 outstanding reads): [`connect_with`]
    /// with [`ConnectAttr::new`].
    ///
    /// [`connect_with`]: Self::connect_with
    pub fn connect(
        &self,
        local_psn: u32,
        remote: &Endpoint,
        mtu: Mtu,
        access: AccessFlags,
    ) -> Result<()> {
        self.connect_with(remote, &ConnectAttr::new(local_psn, mtu, access))
    }

    /// Take an RC or UC QP to RTS towards `remote` with `attr`. A QP that
    /// is not in RESET (in ERR after a fatal error, or connected before)
    /// is reset first, as `ibv_modify_qp(RESET)` then the usual INIT, RTR,
    /// RTS: its queues are flushed and its PSNs start again.
    pub fn connect_with(&self, remote: &Endpoint, attr: &ConnectAttr) -> Result<()> {
        if self.state()? != QpState::Reset {
            self.modify(&QpAttr::new().with_state(QpState::Reset))?;
        }
        let mut av = AhAttr::to_gid(remote.gid);
        av.dport = Some(remote.udp_port);
        let rc = self.qp_type == QpType::Rc;
        self.modify(
            &QpAttr::new()
                .with_state(QpState::Init)
                .with_pkey_index(attr.pkey_index)
                .with_port(1)
                .with_access_flags(attr.access),
        )?;
        let mut rtr = QpAttr::new()
            .with_state(QpState::Rtr)
            .with_av(av)
            .with_path_mtu(attr.mtu)
            .with_dest_qpn(Qpn::new(remote.qpn))
            .with_rq_psn(remote.psn);
        if rc {
            rtr = rtr
                .with_max_dest_rd_atomic(attr.max_dest_rd_atomic)
                .with_min_rnr_timer(attr.min_rnr_timer);
        }
        self.modify(&rtr)?;
        let mut rts = QpAttr::new().with_state(QpState::Rts).with_sq_psn(attr.psn);
        if rc {
            rts = rts
                .with_timeout(attr.timeout)
                .with_retry_cnt(attr.retry_cnt)
                .with_rnr_retry(attr.rnr_retry)
                .with_max_rd_atomic(attr.max_rd_atomic);
        }
        self.modify(&rts)
    }

    /// `ibv_query_qp`: every attribute the QP has, with the PSNs where
    /// they are now (the next PSN the requester sends, the PSN the
    /// responder expects) and the mask of what is reported.
    pub fn query(&self) -> Result<QpAttr> {
        self.pd.backend.query_qp(self.handle)
    }

    /// `ibv_post_send` of a list of work requests.
    ///
    /// # Safety
    ///
    /// Each non-inline SGE must lie in a memory region registered on this
    /// device (keys and bounds are checked; a bad one completes in error),
    /// and the program must not write memory the device is reading, nor
    /// read memory it is writing, until the WR completes. Unsignaled WRs
    /// complete when a later signaled WR of the same QP completes.
    pub unsafe fn post_send(&self, wrs: &[SendWr<'_>]) -> core::result::Result<(), PostError> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.pd.backend.post_send(self.handle, wrs) }
    }

    /// `ibv_post_recv` of a list of work requests.
    ///
    /// # Safety
    ///
    /// As for [`QueuePair::post_send`]: the buffers are written
    /// asynchronously until the receive completes.
    pub unsafe fn post_recv(&self, wrs: &[RecvWr<'_>]) -> core::result::Result<(), PostError> {
        // SAFETY: forwarded from the caller's contract.
        unsafe { self.pd.backend.post_recv(self.handle, wrs) }
    }
}

impl Drop for QueuePair {
    fn drop(&mut self) {
        let _ = self.pd.backend.destroy_qp(self.handle);
    }
}

impl core::fmt::Debug for QueuePair {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QueuePair")
            .field("qpn", &self.qpn)
            .field("qp_type", &self.qp_type)
            .finish()
    }
}
