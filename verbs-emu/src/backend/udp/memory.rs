//! Registered memory of one UDP device: the engine's region table over
//! pointers into the application's buffers ([`HostMemory`]), seen by the
//! transport engine through its [`Memory`] trait ([`HostView`]).
//!
//! Contract: every access is bounds-, rights- and protection-domain-checked
//! by the region table before a pointer is touched; the pointers are valid
//! because `Backend::reg_mr`'s caller promised to keep the buffers alive
//! until deregistration, and every access happens under the device lock.
//! The mlock(2) pins taken at registration are released here. Regions
//! registered ON_DEMAND need no such promise for pages nothing is posted
//! on: each access resolves its pages first and fails like a NIC's
//! unresolvable page fault ([`MemError::Unmapped`]) where they are not
//! mapped (`odp`).

use roce::transport::{self as tp, AccessFlags, AtomicOp, MemError, MemKey, Memory, Payload};
use roce::wire::{Lkey, Rkey};

use super::odp::{resolve, Touch};

/// What backs a region of [`HostMemory`]: the application's buffer.
#[derive(Debug)]
struct HostBuffer {
    ptr: *mut u8,
    /// The range was mlock(2)ed at registration (and is unlocked at
    /// deregistration).
    locked: bool,
}

/// Registered memory of one device: the engine's region table
/// ([`roce::transport::memory`]: keys, bounds, rights, protection
/// domains, ZERO_BASED) over pointers into the application's buffers.
#[derive(Debug, Default)]
pub struct HostMemory {
    regions: tp::memory::Regions<HostBuffer>,
}

// SAFETY: the raw pointers name memory the application registered and
// promised (Backend::reg_mr's contract) to keep valid until deregistration;
// all access goes through the device lock.
unsafe impl Send for HostMemory {}

impl HostMemory {
    /// Register `len` bytes at `ptr` in protection domain `pd`; the key.
    pub(super) fn register(
        &mut self,
        ptr: *mut u8,
        len: u64,
        access: AccessFlags,
        pd: u64,
    ) -> std::result::Result<u32, MemError> {
        let buf = HostBuffer { ptr, locked: false };
        let r = self.regions.register(ptr as u64, len, access, pd, buf)?;
        Ok(r.lkey.value())
    }

    /// Register `len` bytes at `ptr` in protection domain `pd` under the
    /// addresses `[base, base + len)` rather than the pointer's own (a
    /// device-memory region is at 0, and ZERO_BASED); the key. The pages
    /// are the device's, never locked.
    pub(super) fn register_at(
        &mut self,
        base: u64,
        ptr: *mut u8,
        len: u64,
        access: AccessFlags,
        pd: u64,
    ) -> std::result::Result<u32, MemError> {
        let buf = HostBuffer { ptr, locked: false };
        let r = self.regions.register(base, len, access, pd, buf)?;
        Ok(r.lkey.value())
    }

    /// The host pointer for `[addr, addr + len)` in the region `key`
    /// names, checking the rights `access` and, with `pd`, that the region
    /// belongs to that protection domain (the table's checks). In an
    /// on-demand-paging region the range's pages are resolved too, for
    /// writing when `access` grants a write right and for reading
    /// otherwise ([`MemError::Unmapped`] when they cannot be).
    pub(super) fn locate(
        &self,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
        pd: Option<u64>,
    ) -> std::result::Result<*mut u8, MemError> {
        let writes = AccessFlags::LOCAL_WRITE.bits()
            | AccessFlags::REMOTE_WRITE.bits()
            | AccessFlags::REMOTE_ATOMIC.bits();
        let touch = if access.bits() & writes != 0 {
            Touch::Write
        } else {
            Touch::Read
        };
        self.locate_for(key, addr, len, access, pd, touch)
    }

    /// [`locate`](Self::locate), resolving an on-demand-paging region's
    /// pages for `touch`: the pointer is then safe to access that way for
    /// `len` bytes (ODP's contract, see `odp`). A region without
    /// ON_DEMAND costs one flag test more than the table's checks.
    fn locate_for(
        &self,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
        pd: Option<u64>,
        touch: Touch,
    ) -> std::result::Result<*mut u8, MemError> {
        let (idx, off) = self.regions.locate(key, addr, len, access, pd)?;
        let r = self.regions.region(idx);
        if r.access.contains(AccessFlags::ON_DEMAND) {
            // The implicit region's pointer is null and its offsets are
            // addresses: form the pointer from the address the program
            // exposed to the device (its buffers' addresses, as a NIC
            // sees them), not by offsetting null.
            let at = (r.store.ptr as usize).wrapping_add(off as usize);
            resolve(at, len, touch).map_err(|_| MemError::Unmapped { addr, len })?;
            // An integer-to-pointer cast: the exposed address's provenance.
            return Ok(at as *mut u8);
        }
        // SAFETY: off + len <= the region's length (checked by `locate`),
        // so the pointer stays inside the registered buffer.
        Ok(unsafe { r.store.ptr.add(off as usize) })
    }

    /// `ibv_advise_mr` for one SGE: check that `key` names an
    /// on-demand-paging region of `pd` containing `[addr, addr + len)`
    /// (with `LOCAL_WRITE` for a write prefetch), then fault the range in
    /// for `touch` (`None`: fault nothing in, as
    /// `IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT`; the device keeps no page
    /// table of its own to fill). `Err` is the errno: `ENOENT` for a key
    /// that names no ODP region of `pd`, `EFAULT` for a range outside it
    /// or pages that cannot be faulted in.
    pub(super) fn prefetch(
        &self,
        key: u32,
        addr: u64,
        len: u64,
        pd: u64,
        touch: Option<Touch>,
    ) -> std::result::Result<(), i32> {
        let idx = self.regions.index(key).map_err(|_| libc::ENOENT)?;
        let r = self.regions.region(idx);
        if r.pd != pd
            || !r.access.contains(AccessFlags::ON_DEMAND)
            || (touch == Some(Touch::Write) && !r.access.contains(AccessFlags::LOCAL_WRITE))
        {
            return Err(libc::ENOENT);
        }
        let need = AccessFlags::EMPTY;
        match touch {
            None => self
                .regions
                .locate(MemKey::Local(Lkey::new(key)), addr, len, need, Some(pd))
                .map(drop)
                .map_err(|_| libc::EFAULT),
            Some(t) => self
                .locate_for(MemKey::Local(Lkey::new(key)), addr, len, need, Some(pd), t)
                .map(drop)
                .map_err(|_| libc::EFAULT),
        }
    }

    /// Record whether the region `key` names was mlock(2)ed at
    /// registration, so that deregistration unlocks it.
    pub(super) fn set_locked(&mut self, key: u32, locked: bool) {
        if let Ok(idx) = self.regions.index(key) {
            self.regions.region_mut(idx).store.locked = locked;
        }
    }

    /// Re-register the region `key` names in place (`ibv_rereg_mr`): a
    /// new range (`ptr`, `len`, whether it was mlock(2)ed), rights or
    /// protection domain; the keys stay. The old range's pages are
    /// unlocked when a new range replaces them; on a refusal nothing
    /// changes. Returns the protection domain the region had.
    pub(super) fn reregister(
        &mut self,
        key: u32,
        range: Option<(*mut u8, u64, bool)>,
        access: Option<AccessFlags>,
        pd: Option<u64>,
    ) -> std::result::Result<u64, MemError> {
        let old_pd = self.regions.region(self.regions.index(key)?).pd;
        let old_len = self.regions.region(self.regions.index(key)?).len;
        let range = range.map(|(ptr, len, locked)| (ptr as u64, len, HostBuffer { ptr, locked }));
        if let Some(old) = self.regions.reregister(key, range, access, pd)? {
            if old.locked {
                // SAFETY: unlocking the range locked at registration.
                unsafe { libc::munlock(old.ptr.cast(), old_len as usize) };
            }
        }
        Ok(old_pd)
    }

    /// Deregister the region `key` names, unlocking its pages if they were
    /// locked; its protection domain.
    pub(super) fn deregister(&mut self, key: u32) -> std::result::Result<u64, MemError> {
        let r = self.regions.deregister(key)?;
        let (ptr, len, locked, pd) = (r.store.ptr, r.len, r.store.locked, r.pd);
        if locked {
            // SAFETY: unlocking the range locked at registration.
            unsafe { libc::munlock(ptr.cast(), len as usize) };
        }
        Ok(pd)
    }

    /// Invalidate every region, unlocking the pages that were locked: the
    /// device is closing and never touches the memory again.
    pub(super) fn release_all(&mut self) {
        for r in self.regions.iter_mut().filter(|r| r.valid) {
            if r.store.locked {
                // SAFETY: unlocking the range we locked at registration.
                unsafe { libc::munlock(r.store.ptr.cast(), r.len as usize) };
            }
            r.valid = false;
        }
    }

    /// Allocate an unbound memory window of `mw_type` in protection domain
    /// `pd` (`ibv_alloc_mw`); its first R_Key.
    pub(super) fn alloc_window(
        &mut self,
        pd: u64,
        mw_type: tp::MwType,
    ) -> std::result::Result<u32, MemError> {
        self.regions.alloc_window(pd, mw_type).map(|k| k.value())
    }

    /// Free the window `key` names (`ibv_dealloc_mw`); its protection
    /// domain.
    pub(super) fn dealloc_window(&mut self, key: u32) -> std::result::Result<u64, MemError> {
        let (_, pd) = self.regions.window_info(key).ok_or(MemError::BadKey(key))?;
        self.regions.dealloc_window(key)?;
        Ok(pd)
    }

    /// This memory as the QPs of protection domain `pd` see it (keys of
    /// other PDs name nothing, ROCEV2.md §5.10), or, with `None`, as the
    /// device sees it (payload gathering for transmission).
    pub(super) fn view(&self, pd: Option<u64>) -> HostView<'_> {
        HostView { mem: self, pd }
    }
}

/// [`HostMemory`] seen through the [`Memory`] trait, from one protection
/// domain (`pd: Some`: every key, local or remote, must name a region of
/// that PD, so that a peer's R_Key or an application's L_Key of another PD
/// fails like an unknown key) or from the device (`None`). Writes go
/// through the regions' raw pointers, so a shared borrow of the table
/// suffices; the device lock serialises them.
pub(super) struct HostView<'a> {
    mem: &'a HostMemory,
    pd: Option<u64>,
}

impl Memory for HostView<'_> {
    fn check(
        &self,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
    ) -> std::result::Result<(), MemError> {
        self.mem.locate(key, addr, len, access, self.pd).map(drop)
    }

    fn write(
        &mut self,
        key: MemKey,
        addr: u64,
        data: Payload<'_>,
    ) -> std::result::Result<(), MemError> {
        let p = self.mem.locate_for(
            key,
            addr,
            u64::from(data.len()),
            AccessFlags::EMPTY,
            self.pd,
            Touch::Write,
        )?;
        if let Payload::Bytes(b) = data {
            // SAFETY: `locate_for` bounds-checked [addr, addr + len) inside
            // a live registered region (and, for an on-demand region,
            // resolved its pages as writable); the source is a distinct
            // packet buffer.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
        }
        Ok(())
    }

    fn read(&self, key: MemKey, addr: u64, out: &mut [u8]) -> std::result::Result<(), MemError> {
        let p = self
            .mem
            .locate(key, addr, out.len() as u64, AccessFlags::EMPTY, self.pd)?;
        // SAFETY: as in `write`, reading instead (`locate` resolved an
        // on-demand region's pages as readable).
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    fn atomic(
        &mut self,
        key: MemKey,
        addr: u64,
        op: AtomicOp,
    ) -> std::result::Result<u64, MemError> {
        if addr % 8 != 0 {
            return Err(MemError::Misaligned(addr));
        }
        let p = self
            .mem
            .locate_for(key, addr, 8, AccessFlags::EMPTY, self.pd, Touch::Write)?
            .cast::<u64>();
        // SAFETY: 8 bytes inside the region, checked (and, on demand,
        // resolved as writable) by `locate_for`.
        let orig = unsafe { std::ptr::read_unaligned(p) };
        let new = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                if orig == compare {
                    swap
                } else {
                    orig
                }
            }
            AtomicOp::FetchAdd { add } => orig.wrapping_add(add),
        };
        // SAFETY: as above.
        unsafe { std::ptr::write_unaligned(p, new) };
        Ok(orig)
    }

    fn write_u64(
        &mut self,
        key: MemKey,
        addr: u64,
        value: u64,
    ) -> std::result::Result<(), MemError> {
        let p = self
            .mem
            .locate_for(key, addr, 8, AccessFlags::EMPTY, self.pd, Touch::Write)?
            .cast::<u64>();
        // SAFETY: 8 bytes inside the region, checked (and, on demand,
        // resolved as writable) by `locate_for`.
        unsafe { std::ptr::write_unaligned(p, value) };
        Ok(())
    }

    fn invalidate(&mut self, rkey: Rkey) -> std::result::Result<(), MemError> {
        self.mem.regions.invalidate(rkey.value(), self.pd)
    }

    fn carries_bytes(&self) -> bool {
        true
    }

    fn bind_window(
        &self,
        bind: &tp::WindowBind,
        qpn: roce::wire::Qpn,
    ) -> std::result::Result<(), MemError> {
        self.mem.regions.bind_window(bind, self.pd, qpn)
    }

    fn invalidate_local(&self, rkey: Rkey) -> std::result::Result<(), MemError> {
        self.mem.regions.invalidate(rkey.value(), self.pd)
    }

    fn window_qp(&self, rkey: Rkey) -> Option<roce::wire::Qpn> {
        self.mem.regions.window_qp(rkey.value())
    }
}
