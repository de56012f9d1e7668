//! On-demand paging: resolving the pages of one access to an ODP region
//! (`IBV_ACCESS_ON_DEMAND`) the way a NIC's page-fault handler does.
//!
//! The emulated device never pins memory: it reaches the application's
//! pages through the CPU at the moment of each access, so the kernel
//! serves page faults (first touch, swap, copy-on-write) exactly as ODP
//! promises. What an ODP region adds is the fault a NIC cannot resolve:
//! pages that are not mapped, or not mapped with the rights the access
//! needs. A NIC then fails the access (an error completion, or a NAK for a
//! peer's request); touching such a page from the CPU would instead raise
//! SIGSEGV in the process. So before an access to an ODP region touches
//! anything, [`resolve`] faults the exact range in through the kernel with
//! `madvise(MADV_POPULATE_READ / MADV_POPULATE_WRITE)` (Linux 5.14), which
//! is what a NIC's fault handler asks of the kernel (`hmm_range_fault`)
//! and which answers an error, never a signal, for pages that are not
//! mapped (`ENOMEM`) or lack the protection (`EINVAL`, `EFAULT`). On older
//! kernels, without those, `msync(MS_ASYNC)` checks that the range is
//! mapped (`ENOMEM` for a hole), without the protection check.
//!
//! The check and the access happen back to back under the device lock,
//! but the application's other threads do not take it: a program that
//! unmaps pages while an operation on them is in flight (which a NIC
//! would see through its MMU notifier) can still fault between the two.
//! Verbs forbid that for any region; ODP only lifts the need to keep
//! pages mapped while nothing is posted on them.

use std::sync::atomic::{AtomicU8, Ordering};

/// How an access touches the pages it resolves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Touch {
    /// The device reads them (a SEND's or WRITE's source, a READ's
    /// response).
    Read,
    /// The device writes them (a receive, a WRITE's target, a READ's
    /// result, an atomic).
    Write,
}

/// The system's page size.
fn page_size() -> usize {
    // SAFETY: sysconf has no memory effects.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n)
        .ok()
        .filter(|n| n.is_power_of_two())
        .unwrap_or(4096)
}

/// Whether the kernel knows `MADV_POPULATE_READ`/`_WRITE`: 0 not asked
/// yet, 1 yes, 2 no.
static POPULATE: AtomicU8 = AtomicU8::new(0);

/// Whether `madvise` takes the populate advices (Linux 5.14 and later).
fn populate_supported(page: usize) -> bool {
    match POPULATE.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => {
            // An advice the kernel does not know is EINVAL before anything
            // else; a known one over an empty range is 0 before any
            // mapping is looked at. `page` is a page-aligned address.
            // SAFETY: an empty range: nothing is touched or changed.
            let rc =
                unsafe { libc::madvise(page as *mut libc::c_void, 0, libc::MADV_POPULATE_READ) };
            let ok = rc == 0;
            POPULATE.store(if ok { 1 } else { 2 }, Ordering::Relaxed);
            ok
        }
    }
}

/// Fault `[addr, addr + len)` in for `touch` through the kernel, as a
/// NIC's page-fault handler does; `Err` with the errno when a page of it
/// cannot be resolved (not mapped, or not mapped with the rights `touch`
/// needs), in which case the access must fail and touch nothing. An empty
/// range touches nothing and resolves.
pub(super) fn resolve(addr: usize, len: u64, touch: Touch) -> Result<(), i32> {
    if len == 0 {
        return Ok(());
    }
    let page = page_size();
    let len = usize::try_from(len).map_err(|_| libc::EFAULT)?;
    let start = addr & !(page - 1);
    // The last page of the address space is never the application's.
    let end = addr
        .checked_add(len)
        .and_then(|e| e.checked_add(page - 1))
        .ok_or(libc::EFAULT)?
        & !(page - 1);
    let span = end - start;
    let rc = if populate_supported(page) {
        let advice = match touch {
            Touch::Read => libc::MADV_POPULATE_READ,
            Touch::Write => libc::MADV_POPULATE_WRITE,
        };
        // SAFETY: populating page tables changes no byte of memory (it
        // faults pages in as a read or write would, without the access)
        // and fails with an error, never a signal, where it cannot.
        unsafe { libc::madvise(start as *mut libc::c_void, span, advice) }
    } else {
        // SAFETY: MS_ASYNC on a mapped range only schedules write-back of
        // dirty shared pages; it changes no memory, and a hole is ENOMEM.
        unsafe { libc::msync(start as *mut libc::c_void, span, libc::MS_ASYNC) }
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EFAULT))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An anonymous mapping of `pages` pages with protection `prot`.
    fn map(pages: usize, prot: i32) -> *mut u8 {
        // SAFETY: a fresh anonymous mapping the kernel places.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * page_size(),
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p.cast()
    }

    #[test]
    fn mapped_pages_resolve_and_holes_do_not() {
        let page = page_size();
        let p = map(2, libc::PROT_READ | libc::PROT_WRITE);
        let a = p as usize;
        assert_eq!(resolve(a, page as u64, Touch::Write), Ok(()));
        assert_eq!(resolve(a + page + 8, 16, Touch::Read), Ok(()));
        assert_eq!(resolve(a + 3, 0, Touch::Write), Ok(()));
        // Page 0 is never mapped (vm.mmap_min_addr), so no other thread's
        // mapping can land in this hole.
        assert!(resolve(16, 8, Touch::Read).is_err());
        assert!(resolve(usize::MAX - 4, 8, Touch::Read).is_err());
        if populate_supported(page) {
            // A range that straddles a page without rights fails as a whole.
            // SAFETY: the second page of the mapping made above.
            let rc = unsafe { libc::mprotect(p.add(page).cast(), page, libc::PROT_NONE) };
            assert_eq!(rc, 0);
            assert!(resolve(a + page - 8, 16, Touch::Read).is_err());
            assert!(resolve(a + page - 8, 16, Touch::Write).is_err());
        }
        // SAFETY: unmapping the mapping made above.
        unsafe { libc::munmap(p.cast(), 2 * page) };
    }

    #[test]
    fn a_write_to_read_only_pages_does_not_resolve() {
        let page = page_size();
        let p = map(1, libc::PROT_READ);
        let a = p as usize;
        assert_eq!(resolve(a, 64, Touch::Read), Ok(()));
        if populate_supported(page) {
            assert!(resolve(a, 64, Touch::Write).is_err());
        }
        // SAFETY: unmapping the mapping made above.
        unsafe { libc::munmap(p.cast(), page) };
    }
}
