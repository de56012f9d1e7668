//! rsockets: sockets over RDMA. No rsocket can be made here (`rsocket`
//! fails with `ENOSYS`), so every call on one fails with `EBADF`; `rpoll`
//! and `rselect`, which also take ordinary descriptors, poll those.

use std::os::raw::{c_int, c_void};

use crate::{fail, set_errno};

#[no_mangle]
unsafe extern "C" fn rsocket(_domain: c_int, _type: c_int, _protocol: c_int) -> c_int {
    fail(libc::ENOSYS)
}

/// The failure value of an rsocket call's return type.
trait Failed {
    fn failed() -> Self;
}

impl Failed for c_int {
    fn failed() -> Self {
        -1
    }
}

impl Failed for isize {
    fn failed() -> Self {
        -1
    }
}

impl Failed for i64 {
    fn failed() -> Self {
        -1
    }
}

/// `riowrite`'s `size_t`: `(size_t)-1`.
impl Failed for usize {
    fn failed() -> Self {
        usize::MAX
    }
}

/// Calls on an rsocket descriptor: none exists, so the descriptor is bad.
macro_rules! no_rsocket {
    ($($name:ident($($arg:ident: $t:ty),*) -> $ret:ty;)*) => {$(
        #[no_mangle]
        unsafe extern "C" fn $name(_socket: c_int, $($arg: $t),*) -> $ret {
            $(let _ = $arg;)*
            set_errno(libc::EBADF);
            <$ret as Failed>::failed()
        }
    )*};
}

no_rsocket! {
    rbind(addr: *const c_void, len: u32) -> c_int;
    rlisten(backlog: c_int) -> c_int;
    raccept(addr: *mut c_void, len: *mut u32) -> c_int;
    rconnect(addr: *const c_void, len: u32) -> c_int;
    rshutdown(how: c_int) -> c_int;
    rclose() -> c_int;
    rrecv(buf: *mut c_void, len: usize, flags: c_int) -> isize;
    rrecvfrom(buf: *mut c_void, len: usize, flags: c_int, src: *mut c_void, alen: *mut u32) -> isize;
    rrecvmsg(msg: *mut c_void, flags: c_int) -> isize;
    rsend(buf: *const c_void, len: usize, flags: c_int) -> isize;
    rsendto(buf: *const c_void, len: usize, flags: c_int, dst: *const c_void, alen: u32) -> isize;
    rsendmsg(msg: *const c_void, flags: c_int) -> isize;
    rread(buf: *mut c_void, count: usize) -> isize;
    rreadv(iov: *const c_void, iovcnt: c_int) -> isize;
    rwrite(buf: *const c_void, count: usize) -> isize;
    rwritev(iov: *const c_void, iovcnt: c_int) -> isize;
    rgetpeername(addr: *mut c_void, len: *mut u32) -> c_int;
    rgetsockname(addr: *mut c_void, len: *mut u32) -> c_int;
    rsetsockopt(level: c_int, optname: c_int, optval: *const c_void, optlen: u32) -> c_int;
    rgetsockopt(level: c_int, optname: c_int, optval: *mut c_void, optlen: *mut u32) -> c_int;
    riomap(buf: *mut c_void, len: usize, prot: c_int, flags: c_int, offset: i64) -> i64;
    riounmap(buf: *mut c_void, len: usize) -> c_int;
    riowrite(buf: *const c_void, count: usize, offset: i64, flags: c_int) -> usize;
}

/// `rfcntl(socket, cmd, ...)`: variadic in C; the extra argument is never
/// read, since no rsocket exists.
#[no_mangle]
unsafe extern "C" fn rfcntl(_socket: c_int, _cmd: c_int, _arg: usize) -> c_int {
    fail(libc::EBADF)
}

#[no_mangle]
unsafe extern "C" fn rpoll(fds: *mut libc::pollfd, nfds: libc::nfds_t, timeout: c_int) -> c_int {
    // SAFETY: the caller's poll set, passed through.
    unsafe { libc::poll(fds, nfds, timeout) }
}

#[no_mangle]
unsafe extern "C" fn rselect(
    nfds: c_int,
    readfds: *mut libc::fd_set,
    writefds: *mut libc::fd_set,
    exceptfds: *mut libc::fd_set,
    timeout: *mut libc::timeval,
) -> c_int {
    // SAFETY: the caller's sets, passed through.
    unsafe { libc::select(nfds, readfds, writefds, exceptfds, timeout) }
}
