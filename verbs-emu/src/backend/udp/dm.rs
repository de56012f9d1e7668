//! The device memory of one UDP device (`ibv_alloc_dm`): memory the
//! device itself owns, as a NIC's on-chip memory is, carved into
//! allocations that programs copy into and out of (`ibv_memcpy_to_dm`,
//! `ibv_memcpy_from_dm`) and register as zero-based memory regions
//! (`ibv_reg_dm_mr`) that RDMA reaches like any other region.
//!
//! Contract: the whole [`DM_SIZE`] bytes are one heap block the device
//! allocates on first use and frees when it is dropped, so its address
//! never changes while regions point into it. Allocations are first-fit
//! ranges of it, each rounded up to [`GRANULE`] bytes and aligned in the
//! device's address space (offsets from the block's start, which is page
//! aligned) to the larger of [`GRANULE`] and the alignment asked for. Every
//! access is bounds-checked against the length the program asked for; the
//! bytes are only touched through raw pointers, under the device lock.

use std::alloc::{self, Layout};
use std::collections::BTreeMap;
use std::ptr::NonNull;

/// The device memory of every UDP device, in bytes: 256 KiB, the size of
/// the on-chip memory (MEMIC) a ConnectX reports as `max_dm_size`.
pub const DM_SIZE: u64 = 256 * 1024;

/// The allocation unit: 64 bytes, a ConnectX's MEMIC unit. Every
/// allocation covers whole units and starts on one.
pub const GRANULE: u64 = 64;

/// The alignment of the block in host memory (a page): an allocation's
/// device address alignment, up to this, is also its host alignment.
const BLOCK_ALIGN: usize = 4096;

/// Why a device-memory verb was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum DmError {
    /// No such allocation (never made, or freed).
    Unknown,
    /// Memory regions still cover the allocation.
    Busy,
    /// An argument the verb does not accept, and why.
    Invalid(String),
    /// No free range is large enough (`ENOMEM`).
    NoSpace,
}

/// One allocation: where it starts in the block, the length asked for,
/// the length it occupies, and the regions registered over it.
#[derive(Debug)]
struct Allocation {
    start: u64,
    len: u64,
    span: u64,
    mrs: Vec<u32>,
}

/// The device memory of one device. See the module docs.
#[derive(Debug, Default)]
pub(super) struct DevMemory {
    /// The block, once anything was allocated.
    block: Option<NonNull<u8>>,
    /// The live allocations, by handle.
    allocs: BTreeMap<u64, Allocation>,
    /// The allocation each device-memory region covers, by region key.
    by_mr: BTreeMap<u32, u64>,
    /// The next handle (handles start at 1 and are never reused).
    next: u64,
}

// SAFETY: the block is a heap allocation this struct owns alone; its bytes
// are only reached through raw pointers under the device lock (this struct
// lives in the lock's `State`), so moving it to another thread moves sole
// ownership.
unsafe impl Send for DevMemory {}

fn block_layout() -> Layout {
    // DM_SIZE fits usize and BLOCK_ALIGN is a power of two: never fails.
    Layout::from_size_align(DM_SIZE as usize, BLOCK_ALIGN).expect("device memory layout")
}

impl DevMemory {
    /// Allocate `len` bytes aligned to `2^log_align` (at least
    /// [`GRANULE`]); the handle. The bytes start zeroed.
    pub(super) fn alloc(&mut self, len: u64, log_align: u32) -> Result<u64, DmError> {
        if len == 0 || len > DM_SIZE {
            return Err(DmError::Invalid(format!(
                "length {len}: the device has {DM_SIZE} bytes of memory (1 to {DM_SIZE} may be asked for)"
            )));
        }
        let align = 1u64
            .checked_shl(log_align)
            .filter(|a| *a <= DM_SIZE)
            .ok_or_else(|| {
                DmError::Invalid(format!(
                    "log_align_req {log_align}: larger than the device memory"
                ))
            })?
            .max(GRANULE);
        let span = len.div_ceil(GRANULE) * GRANULE;
        let start = self.free_range(span, align).ok_or(DmError::NoSpace)?;
        let block = match self.block {
            Some(b) => b,
            None => {
                // SAFETY: the layout has a non-zero size.
                let p = unsafe { alloc::alloc_zeroed(block_layout()) };
                let b = NonNull::new(p).ok_or(DmError::NoSpace)?;
                self.block = Some(b);
                b
            }
        };
        // SAFETY: start + span <= DM_SIZE (free_range), inside the block;
        // the bytes are not in any live allocation, so nothing else reads
        // them now.
        unsafe {
            block
                .as_ptr()
                .add(start as usize)
                .write_bytes(0, span as usize)
        };
        self.next += 1;
        let h = self.next;
        self.allocs.insert(
            h,
            Allocation {
                start,
                len,
                span,
                mrs: Vec::new(),
            },
        );
        Ok(h)
    }

    /// The first start, aligned to `align`, of `span` free bytes.
    fn free_range(&self, span: u64, align: u64) -> Option<u64> {
        let mut used: Vec<(u64, u64)> = self
            .allocs
            .values()
            .map(|a| (a.start, a.start + a.span))
            .collect();
        used.sort_unstable();
        let mut from = 0u64;
        for (s, e) in used {
            let at = from.next_multiple_of(align);
            if at + span <= s {
                return Some(at);
            }
            from = from.max(e);
        }
        let at = from.next_multiple_of(align);
        (at + span <= DM_SIZE).then_some(at)
    }

    /// Free the allocation `h`: refused while regions cover it.
    pub(super) fn free(&mut self, h: u64) -> Result<(), DmError> {
        let a = self.allocs.get(&h).ok_or(DmError::Unknown)?;
        if !a.mrs.is_empty() {
            return Err(DmError::Busy);
        }
        self.allocs.remove(&h);
        Ok(())
    }

    /// The host pointer of `[offset, offset + len)` of allocation `h`,
    /// inside the length the program asked for.
    pub(super) fn range(&self, h: u64, offset: u64, len: u64) -> Result<*mut u8, DmError> {
        let a = self.allocs.get(&h).ok_or(DmError::Unknown)?;
        match offset.checked_add(len) {
            Some(end) if end <= a.len => {}
            _ => {
                return Err(DmError::Invalid(format!(
                    "[{offset}, {offset} + {len}) is outside the {} bytes allocated",
                    a.len
                )))
            }
        }
        // A live allocation implies the block exists.
        let block = self.block.ok_or(DmError::Unknown)?;
        // SAFETY: a.start + offset + len <= a.start + a.span <= DM_SIZE:
        // inside the block.
        Ok(unsafe { block.as_ptr().add((a.start + offset) as usize) })
    }

    /// Copy `data` into allocation `h` at `offset`.
    pub(super) fn copy_in(&mut self, h: u64, offset: u64, data: &[u8]) -> Result<(), DmError> {
        let p = self.range(h, offset, data.len() as u64)?;
        // SAFETY: `range` checked that data.len() bytes from p lie in the
        // block; `data` is the caller's slice, not device memory (the block
        // is never lent out as a slice).
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), p, data.len()) };
        Ok(())
    }

    /// Copy from allocation `h` at `offset` into `out`.
    pub(super) fn copy_out(&self, h: u64, offset: u64, out: &mut [u8]) -> Result<(), DmError> {
        let p = self.range(h, offset, out.len() as u64)?;
        // SAFETY: as in `copy_in`, in the other direction.
        unsafe { std::ptr::copy_nonoverlapping(p, out.as_mut_ptr(), out.len()) };
        Ok(())
    }

    /// Record that the region `key` covers allocation `h`.
    pub(super) fn add_mr(&mut self, h: u64, key: u32) {
        if let Some(a) = self.allocs.get_mut(&h) {
            a.mrs.push(key);
            self.by_mr.insert(key, h);
        }
    }

    /// Whether the region `key` covers device memory.
    pub(super) fn owns_mr(&self, key: u32) -> bool {
        self.by_mr.contains_key(&key)
    }

    /// The region `key` was deregistered: it no longer holds its
    /// allocation.
    pub(super) fn mr_gone(&mut self, key: u32) {
        if let Some(h) = self.by_mr.remove(&key) {
            if let Some(a) = self.allocs.get_mut(&h) {
                a.mrs.retain(|k| *k != key);
            }
        }
    }

    /// Bytes allocated (in whole units).
    #[cfg(test)]
    pub(super) fn used(&self) -> u64 {
        self.allocs.values().map(|a| a.span).sum()
    }
}

impl Drop for DevMemory {
    fn drop(&mut self) {
        if let Some(b) = self.block.take() {
            // SAFETY: allocated in `alloc` with this layout; the device is
            // gone, so no region points into it any more.
            unsafe { alloc::dealloc(b.as_ptr(), block_layout()) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_accounted_and_refused_when_full() {
        let mut dm = DevMemory::default();
        let a = dm.alloc(100, 0).unwrap();
        assert_eq!(dm.used(), 128, "two 64-byte units");
        // Aligned to 4 KiB in the device's address space.
        let b = dm.alloc(8, 12).unwrap();
        let pa = dm.range(a, 0, 0).unwrap() as usize;
        let pb = dm.range(b, 0, 0).unwrap() as usize;
        assert_eq!((pb - pa) % 4096, 0);
        assert_eq!(pb % 4096, 0, "the block is page aligned");
        assert!(dm.range(a, 96, 8).is_err(), "past the 100 bytes asked for");
        assert!(dm.range(a, 96, 4).is_ok());
        // The rest no longer fits in one piece.
        assert_eq!(dm.alloc(DM_SIZE, 0), Err(DmError::NoSpace));
        assert!(matches!(dm.alloc(DM_SIZE + 1, 0), Err(DmError::Invalid(_))));
        assert!(matches!(dm.alloc(0, 0), Err(DmError::Invalid(_))));
        assert!(matches!(dm.alloc(64, 63), Err(DmError::Invalid(_))));
        // A region holds its allocation.
        dm.add_mr(a, 0x100);
        assert_eq!(dm.free(a), Err(DmError::Busy));
        dm.mr_gone(0x100);
        dm.free(a).unwrap();
        dm.free(b).unwrap();
        assert_eq!(dm.free(b), Err(DmError::Unknown));
        assert_eq!(dm.used(), 0);
        // All of it, once free; then nothing more.
        let all = dm.alloc(DM_SIZE, 0).unwrap();
        assert_eq!(dm.alloc(1, 0), Err(DmError::NoSpace));
        dm.copy_in(all, DM_SIZE - 4, b"abcd").unwrap();
        let mut out = [0u8; 4];
        dm.copy_out(all, DM_SIZE - 4, &mut out).unwrap();
        assert_eq!(&out, b"abcd");
        assert!(dm.copy_in(all, DM_SIZE - 3, b"abcd").is_err());
    }

    #[test]
    fn freed_memory_comes_back_zeroed() {
        let mut dm = DevMemory::default();
        let a = dm.alloc(64, 0).unwrap();
        dm.copy_in(a, 0, &[0xAB; 64]).unwrap();
        dm.free(a).unwrap();
        let b = dm.alloc(64, 0).unwrap();
        let mut out = [1u8; 64];
        dm.copy_out(b, 0, &mut out).unwrap();
        assert_eq!(out, [0u8; 64]);
    }
}
