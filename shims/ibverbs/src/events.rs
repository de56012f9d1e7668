//! Asynchronous events: from the emulated device to the context that owns
//! the object, through `ibv_get_async_event`.
//!
//! Each context has its own event pipe (`async_fd` reads it, as the
//! kernel's event file). The backend, shared by every context of a device
//! in the process, queues its events (CQ overrun, QP fatal, request and
//! access errors, SQ drained) by handle; one watcher thread per backend
//! takes them every [`WATCH_INTERVAL`] and writes each, as a whole
//! `ibv_async_event`, to the pipe of the context whose QP or CQ it names.
//! Objects register here when created and leave when destroyed, and a
//! closing context takes its pipe out, all under one lock, so no event is
//! written for a freed object or to a closed (and perhaps reused) fd. The
//! element pointers are only copied, never dereferenced.
//!
//! The write end is non-blocking: a program that never reads its events
//! loses those that find the pipe full (64 KiB: 4096 events), as a full
//! kernel queue drops them, instead of stalling the device.

use std::os::raw::c_int;
use std::ptr;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use verbs_emu::backend::ibverbs::ffi::ibv_async_event;
use verbs_emu::backend::{AsyncEvent, Backend};

use crate::lock;

/// How often a watcher takes its backend's events.
pub(crate) const WATCH_INTERVAL: Duration = Duration::from_millis(2);

/// `enum ibv_event_type` values this device raises.
pub(crate) mod event_type {
    use std::os::raw::c_int;
    /// `IBV_EVENT_CQ_ERR`.
    pub const CQ_ERR: c_int = 0;
    /// `IBV_EVENT_QP_FATAL`.
    pub const QP_FATAL: c_int = 1;
    /// `IBV_EVENT_QP_REQ_ERR`.
    pub const QP_REQ_ERR: c_int = 2;
    /// `IBV_EVENT_QP_ACCESS_ERR`.
    pub const QP_ACCESS_ERR: c_int = 3;
    /// `IBV_EVENT_SQ_DRAINED`.
    pub const SQ_DRAINED: c_int = 5;
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`.
    pub const SRQ_LIMIT_REACHED: c_int = 15;
    /// `IBV_EVENT_QP_LAST_WQE_REACHED`.
    pub const QP_LAST_WQE_REACHED: c_int = 16;
}

/// Which backend object an element is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    /// A QP, by its backend handle.
    Qp(u64),
    /// A CQ, by its backend handle.
    Cq(u64),
    /// An SRQ (the library's own: its events are raised here, by element).
    Srq,
}

/// One object that may receive events.
struct Entry {
    /// The backend it lives on ([`backend_id`]).
    backend: usize,
    kind: Kind,
    /// The C object's pointer, as the event's `element`.
    element: usize,
    /// Its context's pipe.
    wfd: c_int,
    /// A QP receiving from an SRQ: an error also reaches its last WQE.
    srq: bool,
}

/// Every object of the process that may receive events.
static ENTRIES: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

/// The identity of a backend: its address.
pub(crate) fn backend_id(b: &dyn Backend) -> usize {
    ptr::from_ref(b).cast::<u8>() as usize
}

/// An object of `backend` whose events go to `wfd` (its context's pipe).
pub(crate) fn register(backend: usize, kind: Kind, element: usize, wfd: c_int, srq: bool) {
    lock(&ENTRIES).push(Entry {
        backend,
        kind,
        element,
        wfd,
        srq,
    });
}

/// The object at `element` is destroyed.
pub(crate) fn unregister(element: usize) {
    lock(&ENTRIES).retain(|e| e.element != element);
}

/// The context writing to `wfd` closes.
pub(crate) fn close_pipe(wfd: c_int) {
    lock(&ENTRIES).retain(|e| e.wfd != wfd);
}

/// Raise `event_type` on the registered object at `element` (an event the
/// library itself knows of, such as a QP of an SRQ put in error).
pub(crate) fn raise(element: usize, event_type: c_int) {
    let g = lock(&ENTRIES);
    if let Some(e) = g.iter().find(|e| e.element == element) {
        write_event(e.wfd, e.element, event_type);
    }
}

/// Write one whole event record to `wfd` (non-blocking: dropped when full).
fn write_event(wfd: c_int, element: usize, event_type: c_int) {
    let ev = ibv_async_event {
        element: element as *mut std::os::raw::c_void,
        event_type,
    };
    let n = std::mem::size_of::<ibv_async_event>();
    // SAFETY: writing a local of `n` bytes; a pipe write under PIPE_BUF is
    // atomic, so readers see whole records.
    unsafe { libc::write(wfd, ptr::from_ref(&ev).cast(), n) };
}

/// Route one backend event to the context that owns its object.
fn route(backend: usize, ev: AsyncEvent) {
    let (kind, ty) = match ev {
        AsyncEvent::CqErr(h) => (Kind::Cq(h.0), event_type::CQ_ERR),
        AsyncEvent::QpFatal(h) => (Kind::Qp(h.0), event_type::QP_FATAL),
        AsyncEvent::QpReqErr(h) => (Kind::Qp(h.0), event_type::QP_REQ_ERR),
        AsyncEvent::QpAccessErr(h) => (Kind::Qp(h.0), event_type::QP_ACCESS_ERR),
        AsyncEvent::SqDrained(h) => (Kind::Qp(h.0), event_type::SQ_DRAINED),
    };
    let g = lock(&ENTRIES);
    let Some(e) = g.iter().find(|e| e.backend == backend && e.kind == kind) else {
        return;
    };
    write_event(e.wfd, e.element, ty);
    if e.srq && ty != event_type::SQ_DRAINED {
        // The QP is in error: it takes no more of the SRQ's WQEs.
        write_event(e.wfd, e.element, event_type::QP_LAST_WQE_REACHED);
    }
}

/// Start the watcher of a newly opened backend; it ends when the backend
/// is freed. Returns whether the thread started.
pub(crate) fn watch(backend: Weak<dyn Backend>) -> bool {
    std::thread::Builder::new()
        .name("rocelab-async-events".into())
        .spawn(move || loop {
            std::thread::sleep(WATCH_INTERVAL);
            let Some(b) = backend.upgrade() else {
                return;
            };
            let id = backend_id(&*b);
            while let Some(ev) = b.poll_async_event() {
                route(id, ev);
            }
        })
        .is_ok()
}

/// Make `fd` non-blocking (the write end of an event pipe).
pub(crate) fn set_nonblocking(fd: c_int) {
    // SAFETY: fcntl on an fd we own, with integer arguments.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags >= 0 {
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
    }
}
