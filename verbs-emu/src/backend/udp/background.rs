//! The background thread of a UDP device and its modes
//! ([`super::BackgroundMode`]): progress for the application whenever it
//! is not calling in itself, spinning while traffic is sparse and blocking
//! in ppoll(2) while a stream flows or (interrupt mode) while the
//! application's threads hold the CPU.
//!
//! Contract: the thread stays off the socket while the application moves
//! packets itself (polls within the last `app_active_ns`, waits in
//! `wait_cq`), yet wakes for the engines' next deadline and the end of an
//! ACK's hold; posts never keep it away. It stops when [`Shared::stop`]
//! is set.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::config::BackgroundMode;
use super::progress::SPIN_BELOW;
use super::state::{lock, Shared};

/// How long the background thread keeps polling without sleeping after
/// the last packet it moved, when traffic is sparse.
const BACKGROUND_SPIN_NS: u64 = 200_000;
/// Bytes received in one progress round that make the background thread
/// treat the traffic as a bulk stream (and sleep, not spin, when the
/// socket is empty): half a 64 KiB message. A stream of small messages
/// (a GSO run of 64 one-packet WRITEs is about 4.5 KiB) stays below it:
/// its cost is the wake-ups, not the copies, and spinning saves them.
const BULK_BYTES: u64 = 32 * 1024;

/// A device's background thread: progress for the application whenever it
/// is not calling in itself (see the module docs and [`BackgroundMode`]).
///
/// While the application moves its packets itself (a `poll_cq` that ran a
/// progress round within the last `app_active_ns`, 50 µs by default, or a
/// thread waiting in `wait_cq`), the thread stays off the socket and naps
/// until the window ([`nap_while_active`]: longer while the application
/// keeps polling) or the next deadline ends (an engine timer, or the end
/// of an ACK's hold, [`ACK_HOLD`](super::ACK_HOLD)), so that a datagram
/// wakes one thread, not two that would contend for the two cores of a
/// small host. In [`BackgroundMode::Interrupt`] it never spins to such a
/// deadline. Posts do not keep it away: a program that posts and then
/// watches memory collects nothing, and its packets must move as they
/// arrive.
///
/// Otherwise it runs progress and, between packets, either spins (polls
/// the socket again at once) or blocks in ppoll(2) until a datagram
/// arrives or the next engine timer is due (at most 2 ms, to notice
/// `stop`), like a NIC's receive interrupt, by what the traffic is:
///
/// * sparse requests (a READ or atomic now and then, answered by this
///   device while its application waits elsewhere): it spins for
///   `BACKGROUND_SPIN_NS` after the last packet it moved, so that the next
///   one is answered without a wake-up (adaptive polling, as NAPI busy
///   polling does), which costs tens of microseconds on a small virtual
///   machine. In [`BackgroundMode::Interrupt`] only while the
///   application's threads are off the CPU ([`OtherThreads`]): a program
///   spinning on memory keeps its core;
/// * a stream (a round received `BULK_BYTES` or more, until
///   `BACKGROUND_SPIN_NS` of silence): it blocks as soon as the socket is
///   empty. Spinning there costs more than the wake-ups it saves: the
///   spinning core competes with the sender's (on a virtual machine its
///   hyperthread sibling, perhaps); write_bw 64 KiB was faster with the
///   receiver sleeping in 12 of 16 alternating bench runs (medians
///   +10-15 %).
pub(super) fn background(shared: &Shared) {
    let interrupt = shared.cfg.background == BackgroundMode::Interrupt;
    if interrupt {
        no_timer_slack();
    }
    let mut last_moved = 0u64;
    let mut streaming = false;
    // Naps in a row that found the application polling (see `nap_while_active`).
    let mut calm = 0u32;
    let mut others = OtherThreads::default();
    while !shared.stop.load(Ordering::Relaxed) {
        if shared.app_waiting.load(Ordering::Relaxed) > 0 {
            // A thread in `wait_cq` makes progress itself and wakes at
            // each datagram; two threads taking turns at the lock for
            // every packet would only slow both.
            std::thread::sleep(Duration::from_nanos(shared.cfg.app_active_ns));
            continue;
        }
        let touched = shared.app_polled_ns.load(Ordering::Relaxed);
        let now = shared.now_ns();
        let active = shared.cfg.app_active_ns;
        if touched != 0 && now.saturating_sub(touched) < active {
            // Out of the application's way, but not past an engine timer
            // (an RNR wait of tens of microseconds, a retransmission): the
            // application may not call in before it is due.
            let due = shared
                .next_deadline_ns
                .load(Ordering::SeqCst)
                .saturating_sub(now);
            let window = active - (now - touched);
            let nap = nap_while_active(window, active, calm).min(due);
            calm = calm.saturating_add(1);
            if nap > 0 {
                if !interrupt && due < window && due < SPIN_BELOW.as_nanos() as u64 {
                    // A timer within the kernel's timer slack: spin to it.
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(Duration::from_nanos(nap));
                }
                continue;
            }
        }
        calm = 0;
        let (deadline, seen, received, sent) = {
            let mut st = lock(&shared.state);
            let before = (st.stats.rx_packets, st.stats.tx_packets, st.stats.rx_bytes);
            let d = shared.progress_background(&mut st, interrupt);
            (
                d,
                shared.next_deadline_ns.load(Ordering::SeqCst),
                (st.stats.rx_packets - before.0, st.stats.rx_bytes - before.2),
                st.stats.tx_packets - before.1,
            )
        };
        let (received, received_bytes) = received;
        if received + sent > 0 {
            last_moved = shared.now_ns();
            // A stream stays one until BACKGROUND_SPIN_NS of silence.
            streaming |= received_bytes >= BULK_BYTES;
            continue;
        }
        if shared.now_ns().saturating_sub(last_moved) >= BACKGROUND_SPIN_NS {
            streaming = false;
        } else if !streaming && (!interrupt || !others.busy(shared.now_ns())) {
            std::hint::spin_loop();
            continue;
        }
        let wait = shared.wait_for(deadline, Duration::from_millis(2));
        if !interrupt && wait < SPIN_BELOW && deadline.is_some() {
            // A timer is due within the kernel's timer slack (which the
            // interrupt-style thread turned off): spin to it.
            std::hint::spin_loop();
            continue;
        }
        if wait.is_zero() {
            continue;
        }
        // Say until when this thread is blocked, then look again: a round
        // of the application that moved the deadline earlier before the
        // store is seen here, one after it wakes the thread.
        let until = shared.now_ns().saturating_add(wait.as_nanos() as u64);
        shared
            .background_blocked_until_ns
            .store(until.max(1), Ordering::SeqCst);
        if shared.next_deadline_ns.load(Ordering::SeqCst) < seen {
            shared
                .background_blocked_until_ns
                .store(0, Ordering::SeqCst);
            continue;
        }
        if shared
            .socket
            .wait_readable_or(&shared.wakeup, Some(wait))
            .is_err()
        {
            // Not expected of ppoll on a live socket; never spin on it.
            std::thread::sleep(wait);
        }
        shared
            .background_blocked_until_ns
            .store(0, Ordering::SeqCst);
    }
}

/// How long the background thread naps while the application polls:
/// the rest of the application's window (`window` of `active`
/// nanoseconds), stretched by `active` x (2^min(calm, 3) - 1) after
/// `calm` naps in a row that found the application still polling, so at
/// most 8 x `active` (400 µs by default). Each wake-up of this thread
/// takes a core from a spinning application thread on a small host (two
/// cores, two processes, four threads): at one look per 50 µs, write_lat
/// 8 B averaged 6-7 µs against a 3.4-3.6 µs median; looking every
/// 500 µs it averaged 3.7-4.0 µs and its median fell by 0.1-0.2 µs. The
/// price: a program that polls for a long while and then waits on memory
/// without polling has its next packets moved up to that much later, once,
/// before the thread takes over.
fn nap_while_active(window: u64, active: u64, calm: u32) -> u64 {
    window.saturating_add(active.saturating_mul((1u64 << calm.min(3)) - 1))
}

/// Whether the process's other threads (the application's) are using the
/// CPU, from the process's CPU time less the calling thread's, sampled
/// every [`OtherThreads::PERIOD_NS`]: busy when they ran more than half
/// of the last period. An application that spins (on memory, on a CQ)
/// holds a core the background thread must not compete for; one that
/// blocks leaves it free.
#[derive(Debug, Default)]
struct OtherThreads {
    at_ns: u64,
    cpu_ns: u64,
    busy: bool,
}

impl OtherThreads {
    const PERIOD_NS: u64 = 50_000;

    /// Whether the other threads were busy, as of the last sample at most
    /// a period before `now_ns` (the device clock).
    fn busy(&mut self, now_ns: u64) -> bool {
        let elapsed = now_ns.saturating_sub(self.at_ns);
        if self.at_ns != 0 && elapsed < Self::PERIOD_NS {
            return self.busy;
        }
        let cpu = cpu_time_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
            .saturating_sub(cpu_time_ns(libc::CLOCK_THREAD_CPUTIME_ID));
        if self.at_ns != 0 {
            self.busy = cpu.saturating_sub(self.cpu_ns) * 2 > elapsed;
        } else {
            // No history yet: assume the worst until a period has passed.
            self.busy = true;
        }
        self.at_ns = now_ns;
        self.cpu_ns = cpu;
        self.busy
    }
}

/// CPU time of `clock` (a process or thread CPU-time clock), in
/// nanoseconds; 0 if the clock cannot be read.
fn cpu_time_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a pointer to a
    // live local.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// No timer slack for the calling thread: ppoll's timeout is otherwise
/// stretched by up to 50 µs, which an RNR timer of tens of microseconds
/// would feel.
fn no_timer_slack() {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes an integer; no pointers.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    /// The background thread spins only while the application's threads
    /// are off the CPU: a sleeping thread leaves the process "not busy",
    /// a spinning one makes it busy; the caller's own time never counts.
    /// Other tests run in this process meanwhile, so each verdict is asked
    /// for in any of several periods.
    /// The first nap is the application's window; naps that keep finding
    /// the application polling grow to eight windows and no further.
    #[test]
    fn naps_grow_while_the_application_keeps_polling() {
        let active = 50_000;
        assert_eq!(nap_while_active(20_000, active, 0), 20_000);
        assert_eq!(nap_while_active(active, active, 1), 2 * active);
        assert_eq!(nap_while_active(active, active, 2), 4 * active);
        assert_eq!(nap_while_active(active, active, 3), 8 * active);
        assert_eq!(nap_while_active(active, active, 40), 8 * active);
    }

    #[test]
    fn other_threads_are_busy_only_while_they_run() {
        let clock = std::time::Instant::now();
        let now = || clock.elapsed().as_nanos() as u64 + 1;
        let spin = |ms| {
            let end = std::time::Instant::now() + Duration::from_millis(ms);
            while std::time::Instant::now() < end {
                std::hint::spin_loop();
            }
        };
        let mut others = OtherThreads::default();
        assert!(others.busy(now()), "no history yet");
        let (wake, asleep) = std::sync::mpsc::channel::<()>();
        let sleeper = std::thread::spawn(move || asleep.recv());
        // This thread spins meanwhile: its own time is not the others'.
        let idle_seen = (0..50).any(|_| {
            spin(60);
            !others.busy(now())
        });
        wake.send(()).unwrap();
        sleeper.join().unwrap().unwrap();
        assert!(idle_seen, "a sleeping thread is not busy");
        let stop = Arc::new(AtomicBool::new(false));
        let spinner = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::hint::spin_loop();
                }
            })
        };
        let busy_seen = (0..50).any(|_| {
            std::thread::sleep(Duration::from_millis(60));
            others.busy(now())
        });
        stop.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        assert!(busy_seen, "a spinning thread is busy");
    }
}
