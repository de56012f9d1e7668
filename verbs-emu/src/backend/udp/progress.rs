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

use super::rx::arrival_times;
use super::state::{Shared, State};
use crate::backend::sys::MAX_BATCH;
use roce::time::Instant;

/// Waits for an engine deadline shorter than this are spun, not slept:
/// the kernel's timer slack (50 µs by default) would stretch an RNR timer
/// of tens of microseconds (ROCEV2.md §5.6) several times over.
pub(super) const SPIN_BELOW: Duration = Duration::from_micros(100);

impl Shared {
    pub(super) fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    pub(super) fn now(&self) -> Instant {
        Instant::from_ps(self.start.elapsed().as_nanos() as u64 * 1000)
    }

    /// One round of progress: receive, timers, transmit, completions.
    /// Returns the next engine deadline.
    pub(super) fn progress(&self, st: &mut State) -> Option<Instant> {
        self.progress_with(st, true)
    }

    /// Progress; with `transmit_after` false, what the received packets
    /// make the engines send (ACKs, mostly) waits for the next call. A
    /// busy-polling application calls again at once, or posts, and then
    /// the ACK leaves in the same `sendmmsg` as its next request: one
    /// system call per hop instead of two.
    pub(super) fn progress_with(&self, st: &mut State, transmit_after: bool) -> Option<Instant> {
        self.progress_round(st, transmit_after, false)
    }

    /// Progress as the background thread of
    /// [`BackgroundMode::Interrupt`](super::BackgroundMode::Interrupt) makes
    /// it: what it receives is answered at once, but ACKs with nothing else
    /// to send are held (see [`Shared::transmit_holding`]).
    pub(super) fn progress_holding(&self, st: &mut State) -> Option<Instant> {
        self.progress_round(st, true, true)
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
        for _ in 0..8 {
            // A receive error (an ICMP report) is a lost packet, not a failure.
            let n = st.io.recv(&mut st.rx).unwrap_or_default();
            if n > 0 {
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
        }
        self.collect(st);
        let d = self.next_deadline(st);
        self.next_deadline_ns
            .store(d.map_or(u64::MAX, |d| d.as_ps() / 1000), Ordering::Relaxed);
        // Held ACKs bound the wait of the thread that holds them, but not
        // the nap of an interrupt-style background thread while the
        // application calls in: its next call sends them.
        d.into_iter().chain(st.acks_held_until).min()
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
