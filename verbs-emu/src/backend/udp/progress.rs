//! Progress rounds of a UDP device: receive a batch, run the engines' due
//! timers, transmit, collect completions; and the waits between rounds
//! (the engines' next deadline, spun below [`SPIN_BELOW`]).
//!
//! Contract: a round runs with the device lock held (`&mut State`) by
//! whichever thread makes progress (a poll, a post, the background
//! thread); it never blocks. Time is the device clock, picoseconds since
//! the device was opened, and what is handed to the engines never goes
//! back ([`State::fed`]).

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::config::ACK_HOLD;
use super::rx::arrival_times;
use super::state::{Shared, State};
use crate::backend::sys::MAX_BATCH;
use roce::time::Instant;

/// Waits for an engine deadline shorter than this are spun, not slept:
/// the kernel's timer slack (50 µs by default) would stretch an RNR timer
/// of tens of microseconds (ROCEV2.md §5.6) several times over.
pub(super) const SPIN_BELOW: Duration = Duration::from_micros(100);

/// The latest time the device clock reads: half the range of the engines'
/// picosecond clock (about 106 days after the device opened), so that any
/// deadline an engine adds to it (a retry timeout, an ACK's hold) stays
/// representable: `Instant + Duration` panics on overflow.
pub(super) const CLOCK_HORIZON: Instant = Instant::from_ps(u64::MAX / 2);

/// The device clock `elapsed` after the device opened, for the engines:
/// picoseconds, computed without overflow (the product of nanoseconds and
/// 1000 passes `u64::MAX` after 213.5 days, which wrapped the clock back
/// to zero or panicked), and held at [`CLOCK_HORIZON`]. A device open
/// longer than that keeps moving packets and completing work, but its
/// timers (retransmission, RNR, ACK holds) no longer advance: the engines'
/// clock would need a wider representation or a rebase to go further.
pub(super) fn device_time(elapsed: std::time::Duration) -> Instant {
    let ps = elapsed.as_nanos().saturating_mul(1000);
    Instant::from_ps(
        u64::try_from(ps)
            .unwrap_or(u64::MAX)
            .min(CLOCK_HORIZON.as_ps()),
    )
}

impl Shared {
    pub(super) fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub(super) fn now(&self) -> Instant {
        device_time(self.start.elapsed())
    }

    /// One round of progress: receive, timers, transmit, completions, run
    /// by an application thread (a wait), which keeps the background thread
    /// off the socket for `app_active_ns`. Returns the next engine deadline.
    pub(super) fn progress(&self, st: &mut State) -> Option<Instant> {
        self.progress_with(st, true)
    }

    /// Progress; with `transmit_after` false, what the received packets
    /// make the engines send (ACKs, mostly) waits for the next call, or
    /// for [`ACK_HOLD`] when the background thread sends it. A
    /// busy-polling application calls again at once, or posts, and then
    /// the ACK leaves in the same `sendmmsg` as its next request: one
    /// system call per hop instead of two.
    pub(super) fn progress_with(&self, st: &mut State, transmit_after: bool) -> Option<Instant> {
        self.app_polled();
        self.progress_round(st, transmit_after, false)
    }

    /// Progress as the background thread of
    /// [`BackgroundMode::Interrupt`](super::BackgroundMode::Interrupt) makes
    /// it: what it receives is answered at once, but ACKs with nothing else
    /// to send are held (see [`Shared::transmit_holding`]).
    pub(super) fn progress_holding(&self, st: &mut State) -> Option<Instant> {
        self.app_polled();
        self.progress_round(st, true, true)
    }

    /// A round of the background thread: as [`Shared::progress`] (with
    /// `hold_acks`, as [`Shared::progress_holding`]), without claiming the
    /// socket for the application.
    pub(super) fn progress_background(&self, st: &mut State, hold_acks: bool) -> Option<Instant> {
        self.progress_round(st, true, hold_acks)
    }

    /// An application thread is moving packets now.
    fn app_polled(&self) {
        self.app_polled_ns
            .store(self.now_ns().max(1), Ordering::Relaxed);
    }

    fn progress_round(
        &self,
        st: &mut State,
        transmit_after: bool,
        hold_acks: bool,
    ) -> Option<Instant> {
        let mut now = self.now();
        if !transmit_after {
            self.transmit(st, now);
        }
        let mut at = [Instant::ZERO; MAX_BATCH + 1];
        let mut received = false;
        for _ in 0..8 {
            // A receive error (an ICMP report) is a lost packet, not a failure.
            let n = st.io.recv(&mut st.rx).unwrap_or_default();
            if n > 0 {
                received = true;
                now = self.now();
                let wall = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .ok();
                let rx = &st.rx;
                arrival_times(
                    st.fed,
                    now,
                    wall,
                    (0..n).map(|k| {
                        let (m, _) = rx.get(k);
                        (m.arrived, m.len.div_ceil(m.segment_size.max(1)))
                    }),
                    &mut at[..=n],
                );
                st.fed = now;
            }
            for k in 0..n {
                self.receive_slot(st, k, at[k], at[k + 1]);
            }
            if n < st.rx.capacity() {
                // The socket is drained; another call would only say so.
                break;
            }
        }
        self.run_timers(st, now);
        if transmit_after {
            self.transmit_holding(st, now, hold_acks);
        } else if received && st.deferred_until.is_none() {
            st.deferred_until = Some(now + ACK_HOLD);
        }
        self.collect(st);
        self.publish_deadline(st)
    }

    /// Tell the background thread the device's next deadline, waking it
    /// if it is blocked past it, and return it. Held ACKs and deferred
    /// transmits (received packets' answers, held posts) are deadlines
    /// like the engines' timers: whoever left them, the background thread
    /// wakes for them and sends them when the application has not called
    /// in by then.
    pub(super) fn publish_deadline(&self, st: &State) -> Option<Instant> {
        let d = self
            .next_deadline(st)
            .into_iter()
            .chain(st.acks_held_until)
            .chain(st.deferred_until)
            .min();
        let d_ns = d.map_or(u64::MAX, |d| d.as_ps() / 1000);
        self.next_deadline_ns.store(d_ns, Ordering::SeqCst);
        let blocked = self.background_blocked_until_ns.load(Ordering::SeqCst);
        if blocked != 0 && d_ns < blocked {
            self.wakeup.wake();
        }
        d
    }

    /// Send what the engines hold ready: above all the ACKs that
    /// `progress_with(.., false)` left for the next call, which may never
    /// come when the application is done (it got its last completion and
    /// tears down).
    pub(super) fn flush_deferred(&self, st: &mut State) {
        let now = self.now();
        self.transmit(st, now);
    }

    fn run_timers(&self, st: &mut State, now: Instant) {
        st.fed = st.fed.max(now);
        for e in st.qps.values_mut() {
            if e.engine.poll_timeout().is_some_and(|t| t <= now) {
                e.engine.handle_timeout(now);
            }
        }
        if st
            .io
            .poll_timeout()
            .is_some_and(|t| t <= std::time::Instant::now())
        {
            let _ = st.io.flush(std::time::Instant::now());
        }
    }

    pub(super) fn next_deadline(&self, st: &State) -> Option<Instant> {
        st.qps
            .values()
            .filter_map(|e| e.engine.poll_timeout())
            .min()
    }

    /// Time until `deadline`, capped.
    pub(super) fn wait_for(&self, deadline: Option<Instant>, cap: Duration) -> Duration {
        match deadline {
            Some(d) => {
                let now = self.now();
                let ps = d.saturating_duration_since(now).as_ps();
                Duration::from_nanos(ps / 1000).min(cap)
            }
            None => cap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use roce::time::Duration as PsDuration;

    /// Near and past the old overflow (2^64 ps, 213.5 days) the device
    /// clock neither wraps back nor panics, never goes back, and leaves
    /// room for the engines' deadlines; below the horizon it is exact.
    #[test]
    fn device_clock_does_not_overflow_after_213_days() {
        let day = 86_400u64;
        let old_overflow_ns = u64::MAX / 1000;
        let before = device_time(Duration::from_nanos(old_overflow_ns - 1_000_000_000));
        let after = device_time(Duration::from_nanos(old_overflow_ns + 1_000_000_000));
        let years = device_time(Duration::from_secs(10 * 365 * day));
        assert!(before <= after && after <= years);
        assert_eq!(after, CLOCK_HORIZON);
        assert!(years
            .checked_add(PsDuration::from_secs(100 * day))
            .is_some());
        assert!((years + ACK_HOLD) > years);
        // Exact up to the horizon: 100 days and 1 ns.
        let d = Duration::from_secs(100 * day) + Duration::from_nanos(1);
        assert_eq!(device_time(d).as_ps(), d.as_nanos() as u64 * 1000);
    }
}
