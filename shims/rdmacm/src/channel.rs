//! Event channels and events.
//!
//! A channel is a queue of events and a Unix socket pair: one byte is
//! written to `tx` per queued event, and `rx` (the `fd` the program sees)
//! is read one byte per event taken, so `rx` is readable exactly while
//! events wait (its blocking mode is the program's to choose). Events of a
//! destroyed id are taken out of the queue together with their bytes. A
//! reader blocked in `rdma_get_cm_event` when its channel is destroyed
//! stays blocked, as on rdma-core.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Mutex};

use crate::ffi::{
    rdma_cm_event, rdma_cm_event_param, rdma_cm_id, rdma_conn_param, rdma_event_channel,
    rdma_ud_param,
};
use crate::SendPtr;

/// An event handed to the program: the C struct first (a pointer to the
/// event is a pointer to this record), then the private data it points at.
#[repr(C)]
pub(crate) struct EventRec {
    pub ev: rdma_cm_event,
    pub private: [u8; 256],
}

impl EventRec {
    /// An event of `kind` for `id` with `status`; no parameters.
    pub fn new(id: *mut rdma_cm_id, kind: c_int, status: c_int) -> Box<EventRec> {
        Box::new(EventRec {
            ev: rdma_cm_event {
                id,
                listen_id: std::ptr::null_mut(),
                event: kind,
                status,
                param: rdma_cm_event_param {
                    conn: rdma_conn_param::EMPTY,
                },
            },
            private: [0; 256],
        })
    }

    /// Set the connection parameters, copying `private` into the record.
    pub fn set_conn(&mut self, mut conn: rdma_conn_param, private: &[u8]) {
        let n = private.len().min(self.private.len()).min(255);
        self.private[..n].copy_from_slice(&private[..n]);
        conn.private_data = if n == 0 {
            std::ptr::null()
        } else {
            self.private.as_ptr().cast::<c_void>()
        };
        conn.private_data_len = n as u8;
        self.ev.param.conn = conn;
    }

    /// Set the UD parameters (a UD port-space request or reply), copying
    /// `private` into the record.
    pub fn set_ud(&mut self, mut ud: rdma_ud_param, private: &[u8]) {
        let n = private.len().min(self.private.len()).min(255);
        self.private[..n].copy_from_slice(&private[..n]);
        ud.private_data = if n == 0 {
            std::ptr::null()
        } else {
            self.private.as_ptr().cast::<c_void>()
        };
        ud.private_data_len = n as u8;
        self.ev.param.ud = ud;
    }
}

/// The shared part of a channel.
pub(crate) struct Channel {
    rx: OwnedFd,
    tx: OwnedFd,
    queue: Mutex<VecDeque<SendPtr<EventRec>>>,
}

/// The channel the program holds: the C struct first.
#[repr(C)]
pub(crate) struct ChannelRec {
    pub ch: rdma_event_channel,
    pub sh: Arc<Channel>,
}

impl Channel {
    /// A new channel record (leaked to the program), or the errno.
    pub fn create() -> Result<*mut ChannelRec, c_int> {
        let mut fds = [0 as c_int; 2];
        // SAFETY: fds has room for the two descriptors.
        let r = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EMFILE));
        }
        // SAFETY: both descriptors are fresh and ours.
        let (rx, tx) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        let fd = rx.as_raw_fd();
        let sh = Arc::new(Channel {
            rx,
            tx,
            queue: Mutex::new(VecDeque::new()),
        });
        Ok(Box::into_raw(Box::new(ChannelRec {
            ch: rdma_event_channel { fd },
            sh,
        })))
    }

    /// Queue an event and make `rx` readable.
    pub fn post(&self, ev: Box<EventRec>) {
        let mut q = lock(&self.queue);
        q.push_back(SendPtr(Box::into_raw(ev)));
        // SAFETY: a one-byte send on our socket; MSG_NOSIGNAL so a closed
        // peer end is an error, not a signal.
        unsafe {
            libc::send(
                self.tx.as_raw_fd(),
                b"e".as_ptr().cast(),
                1,
                libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
            )
        };
    }

    /// Take the next event, waiting for one unless `rx` is non-blocking
    /// (then `EAGAIN`).
    pub fn get(&self) -> Result<*mut EventRec, c_int> {
        loop {
            let mut b = [0u8; 1];
            // SAFETY: a one-byte read into b.
            let n = unsafe { libc::read(self.rx.as_raw_fd(), b.as_mut_ptr().cast(), 1) };
            if n < 0 {
                let e = std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO);
                if e == libc::EINTR {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                // The channel was destroyed under this reader. rdma-core's
                // read on its device file stays blocked then (programs such
                // as rping leave a thread in rdma_get_cm_event until they
                // exit): do the same rather than fail.
                // SAFETY: F_GETFL on our descriptor.
                let flags = unsafe { libc::fcntl(self.rx.as_raw_fd(), libc::F_GETFL) };
                if flags >= 0 && flags & libc::O_NONBLOCK != 0 {
                    return Err(libc::EAGAIN);
                }
                loop {
                    std::thread::park();
                }
            }
            if let Some(ev) = lock(&self.queue).pop_front() {
                return Ok(ev.0);
            }
            // The event behind this byte was withdrawn; wait for the next.
        }
    }

    /// Withdraw the queued events of `id` (being destroyed).
    pub fn purge(&self, id: *mut rdma_cm_id) {
        let mut q = lock(&self.queue);
        let before = q.len();
        q.retain(|e| {
            // SAFETY: queued events are live records of this channel.
            let ev = unsafe { &(*e.0).ev };
            if ev.id == id {
                // SAFETY: the record leaves the queue here, unseen by the
                // program; nothing else refers to it.
                drop(unsafe { Box::from_raw(e.0) });
                false
            } else {
                true
            }
        });
        let mut left = before - q.len();
        let mut buf = [0u8; 64];
        while left > 0 {
            let n = left.min(buf.len());
            // SAFETY: a non-blocking read of at most n bytes into buf.
            let r = unsafe {
                libc::recv(
                    self.rx.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    n,
                    libc::MSG_DONTWAIT,
                )
            };
            if r <= 0 {
                break;
            }
            left -= r as usize;
        }
    }
}

impl Drop for Channel {
    fn drop(&mut self) {
        for e in lock(&self.queue).drain(..) {
            // SAFETY: events never handed out are owned by the queue.
            drop(unsafe { Box::from_raw(e.0) });
        }
    }
}

/// Lock a mutex, carrying on past a panic of another holder (the state is
/// plain data; the library never panics on purpose).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
