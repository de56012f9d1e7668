//! Event channels and events.
//!
//! A channel is a queue of events and a Unix socket pair whose `rx` (the
//! `fd` the program sees) holds one byte exactly while events wait, for
//! any number of them: the post that makes the queue non-empty writes it,
//! a reader takes it with the event and writes it back when more events
//! wait, and a withdrawal that empties the queue takes it (a byte per
//! event stopped signalling once the socket's buffer held a few hundred).
//! The blocking mode is the program's to choose. Events of a destroyed id
//! are taken out of the queue, and so are the connect requests still
//! queued for a destroyed listener, whose ids the caller then destroys, as
//! the kernel's CM does. A reader blocked in `rdma_get_cm_event` when its
//! channel is destroyed stays blocked, as on rdma-core.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Mutex};

use crate::ffi::{
    rdma_cm_event, rdma_cm_event_param, rdma_cm_id, rdma_conn_param, rdma_event_channel,
    rdma_ud_param, RDMA_CM_EVENT_CONNECT_REQUEST,
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

    /// Queue an event; `rx` becomes readable if it was not.
    pub fn post(&self, ev: Box<EventRec>) {
        let mut q = lock(&self.queue);
        q.push_back(SendPtr(Box::into_raw(ev)));
        if q.len() == 1 {
            self.signal();
        }
    }

    /// Put the byte that says "events wait" on `rx`.
    fn signal(&self) {
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
            let mut q = lock(&self.queue);
            if let Some(ev) = q.pop_front() {
                if !q.is_empty() {
                    // More wait: keep `rx` readable for them.
                    self.signal();
                }
                return Ok(ev.0);
            }
            // The events behind this byte were withdrawn; wait for more.
        }
    }

    /// How many connect requests of `listener` wait in the queue, not yet
    /// taken by the program (its backlog in use).
    pub fn queued_requests(&self, listener: *mut rdma_cm_id) -> usize {
        let q = lock(&self.queue);
        q.iter()
            .filter(|e| {
                // SAFETY: queued events are live records of this channel.
                let ev = unsafe { &(*e.0).ev };
                ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && ev.listen_id == listener
            })
            .count()
    }

    /// Withdraw the queued events of `id` (being destroyed).
    pub fn purge(&self, id: *mut rdma_cm_id) {
        self.withdraw(|ev| ev.id == id);
    }

    /// Withdraw the connect requests still queued for `listener` (being
    /// destroyed) and return their ids, which the program never saw: the
    /// caller destroys them (the kernel's CM rejects and frees them with
    /// the listener; left here, each event would name a freed listener).
    pub fn withdraw_requests(&self, listener: *mut rdma_cm_id) -> Vec<*mut rdma_cm_id> {
        self.withdraw(|ev| ev.event == RDMA_CM_EVENT_CONNECT_REQUEST && ev.listen_id == listener)
    }

    /// Take the events `pick` selects out of the queue; the ids they were
    /// for. Emptying the queue takes the byte off `rx`.
    fn withdraw(&self, pick: impl Fn(&rdma_cm_event) -> bool) -> Vec<*mut rdma_cm_id> {
        let mut q = lock(&self.queue);
        let before = q.len();
        let mut ids = Vec::new();
        q.retain(|e| {
            // SAFETY: queued events are live records of this channel.
            let ev = unsafe { &(*e.0).ev };
            if pick(ev) {
                ids.push(ev.id);
                // SAFETY: the record leaves the queue here, unseen by the
                // program; nothing else refers to it.
                drop(unsafe { Box::from_raw(e.0) });
                false
            } else {
                true
            }
        });
        if before > 0 && q.is_empty() {
            let mut b = [0u8; 1];
            // SAFETY: a non-blocking read of at most one byte into b (a
            // reader may have taken it already: then nothing is read).
            unsafe {
                libc::recv(
                    self.rx.as_raw_fd(),
                    b.as_mut_ptr().cast(),
                    1,
                    libc::MSG_DONTWAIT,
                )
            };
        }
        ids
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::RDMA_CM_EVENT_ESTABLISHED;

    /// The channel's shared part, with its descriptor non-blocking.
    fn channel() -> (Box<ChannelRec>, c_int) {
        // SAFETY: a fresh record from create(), owned by the test.
        let rec = unsafe { Box::from_raw(Channel::create().unwrap()) };
        let fd = rec.ch.fd;
        // SAFETY: F_SETFL on the channel's own descriptor.
        unsafe { libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK) };
        (rec, fd)
    }

    fn readable(fd: c_int) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, no wait.
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    fn id(n: usize) -> *mut rdma_cm_id {
        // Never dereferenced: the channel only compares ids.
        (0x1000 * n) as *mut rdma_cm_id
    }

    fn take(c: &Channel) -> Result<Box<EventRec>, c_int> {
        // SAFETY: get() hands out a record the queue owned.
        c.get().map(|e| unsafe { Box::from_raw(e) })
    }

    /// A byte per event stopped signalling after 278 events (the socket's
    /// buffer was full); the channel stays readable for every event.
    #[test]
    fn a_channel_signals_every_event_however_many_wait() {
        let (rec, fd) = channel();
        let c = &rec.sh;
        assert!(!readable(fd));
        for n in 1..=5000 {
            c.post(EventRec::new(id(n), RDMA_CM_EVENT_ESTABLISHED, 0));
        }
        for n in 1..=5000 {
            assert!(readable(fd), "event {n}");
            assert_eq!(take(c).unwrap().ev.id, id(n));
        }
        assert!(!readable(fd));
        assert_eq!(take(c).err(), Some(libc::EAGAIN));
    }

    /// A destroyed listener's queued connect requests go, and their ids
    /// come back for the caller to destroy; other events stay, and an
    /// emptied queue leaves the descriptor unreadable.
    #[test]
    fn a_destroyed_listeners_requests_are_withdrawn_with_their_ids() {
        let (rec, fd) = channel();
        let c = &rec.sh;
        let (listener, other) = (id(1), id(2));
        for (child, from) in [(id(10), listener), (id(11), other), (id(12), listener)] {
            let mut ev = EventRec::new(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
            ev.ev.listen_id = from;
            c.post(ev);
        }
        assert_eq!(c.withdraw_requests(listener), vec![id(10), id(12)]);
        assert!(readable(fd));
        let left = take(c).unwrap();
        assert_eq!((left.ev.id, left.ev.listen_id), (id(11), other));
        assert_eq!(take(c).err(), Some(libc::EAGAIN));
        // Withdrawing what remains empties the queue and the descriptor.
        c.post(EventRec::new(id(3), RDMA_CM_EVENT_ESTABLISHED, 0));
        c.purge(id(3));
        assert!(!readable(fd));
    }
}
