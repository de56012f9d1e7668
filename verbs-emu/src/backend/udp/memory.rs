//! Registered memory of one UDP device: the engine's region table over
//! pointers into the application's buffers ([`HostMemory`]), seen by the
//! transport engine through its [`Memory`] trait ([`HostView`]).
//!
//! Contract: every access is bounds-, rights- and protection-domain-checked
//! by the region table before a pointer is touched; the pointers are valid
//! because `Backend::reg_mr`'s caller promised to keep the buffers alive
//! until deregistration, and every access happens under the device lock.
//! The mlock(2) pins taken at registration are released here.

use roce::transport::{self as tp, AccessFlags, AtomicOp, MemError, MemKey, Memory, Payload};
use roce::wire::Rkey;

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

    /// The host pointer for `[addr, addr + len)` in the region `key`
    /// names, checking the rights `access` and, with `pd`, that the region
    /// belongs to that protection domain (the table's checks).
    pub(super) fn locate(
        &self,
        key: MemKey,
        addr: u64,
        len: u64,
        access: AccessFlags,
        pd: Option<u64>,
    ) -> std::result::Result<*mut u8, MemError> {
        let (idx, off) = self.regions.locate(key, addr, len, access, pd)?;
        // SAFETY: off + len <= the region's length (checked by `locate`),
        // so the pointer stays inside the registered buffer.
        Ok(unsafe { self.regions.region(idx).store.ptr.add(off as usize) })
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
        let p = self.mem.locate(
            key,
            addr,
            u64::from(data.len()),
            AccessFlags::EMPTY,
            self.pd,
        )?;
        if let Payload::Bytes(b) = data {
            // SAFETY: `locate` bounds-checked [addr, addr + len) inside a
            // live registered region; the source is a distinct packet buffer.
            unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), p, b.len()) };
        }
        Ok(())
    }

    fn read(&self, key: MemKey, addr: u64, out: &mut [u8]) -> std::result::Result<(), MemError> {
        let p = self
            .mem
            .locate(key, addr, out.len() as u64, AccessFlags::EMPTY, self.pd)?;
        // SAFETY: as in `write`, reading instead.
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
            .locate(key, addr, 8, AccessFlags::EMPTY, self.pd)?
            .cast::<u64>();
        // SAFETY: 8 bytes inside the region, checked by `locate`.
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
            .locate(key, addr, 8, AccessFlags::EMPTY, self.pd)?
            .cast::<u64>();
        // SAFETY: 8 bytes inside the region, checked by `locate`.
        unsafe { std::ptr::write_unaligned(p, value) };
        Ok(())
    }

    fn invalidate(&mut self, rkey: Rkey) -> std::result::Result<(), MemError> {
        self.mem.regions.invalidate(rkey.value(), self.pd)
    }

    fn carries_bytes(&self) -> bool {
        true
    }
}
