//! Test helpers over the safe, synchronised MR access path
//! (`MemoryRegion::read` / `write`): a snapshot of a region's bytes, and
//! an editable copy that is written back when it goes out of scope.

use std::ops::{Deref, DerefMut};

use verbs_emu::verbs::MemoryRegion;

/// A copy of the whole region, taken under the backend's synchronisation.
pub fn bytes(mr: &MemoryRegion) -> Vec<u8> {
    let mut v = vec![0u8; mr.len()];
    mr.read(0, &mut v).expect("whole region is in range");
    v
}

/// A copy of the region to change; dropping it writes every byte back.
pub struct Edit<'a> {
    mr: &'a MemoryRegion,
    buf: Vec<u8>,
}

/// Edit a copy of `mr`'s bytes (written back on drop).
pub fn edit(mr: &MemoryRegion) -> Edit<'_> {
    Edit { mr, buf: bytes(mr) }
}

impl Deref for Edit<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf
    }
}

impl DerefMut for Edit<'_> {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf
    }
}

impl Drop for Edit<'_> {
    fn drop(&mut self) {
        self.mr
            .write(0, &self.buf)
            .expect("whole region is in range");
    }
}
