//! Retransmission and timers (rxe: the retransmit and RNR timers of
//! `rxe_comp.c`/`rxe_req.c`): the RNR NAK delay table and the Local ACK
//! Timeout (or IRN's two timeouts), the deadline the caller must wake at,
//! and the retry decisions (retry counters, go-back-N / go-back-0 rewinds;
//! a selective repeat timeout resends what was not reported held).
//!
//! Units: [`Duration`] and [`Instant`] are integer picoseconds.

use super::*;

/// The RNR timer table of ROCEV2.md §5.6, in microseconds × 100
/// (code 0 = 655.36 ms).
pub(super) const RNR_TABLE_10NS: [u32; 32] = [
    65_536, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536,
    2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152,
];

/// The RNR NAK delay for a 5-bit timer code (ROCEV2.md §5.6).
pub fn rnr_timer(code: u8) -> Duration {
    Duration::from_ns(RNR_TABLE_10NS[(code & 31) as usize] as u64 * 10_000)
}

/// The Local ACK Timeout for an exponent: 4.096 µs × 2^timeout; `None`
/// for 0 (no timer).
pub fn local_ack_timeout(timeout: u8) -> Option<Duration> {
    if timeout == 0 {
        return None;
    }
    Some(Duration::from_ns(4096).saturating_mul(1u64 << (timeout.min(31))))
}

impl Qp {
    /// The earliest time [`handle_timeout`](Self::handle_timeout) must run:
    /// the Local ACK timer, the RNR wait, the congestion control timers,
    /// and the pacing deadline when pacing is what holds a packet back.
    /// `None` when nothing is pending: an idle QP costs nothing.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let mut t = min_deadline(self.rto_deadline, self.rnr_deadline);
        if let AnyCc::Dcqcn(_) = self.cc {
            t = min_deadline(t, self.cc.poll_timeout());
        }
        if self.pacing_blocked {
            t = min_deadline(t, Some(self.pacer.ready_at()));
        }
        t
    }

    /// Run the timers due at `now`: congestion control, the end of an RNR
    /// wait, the Local ACK timeout (retransmit from `comp_psn`, or
    /// RETRY_EXC_ERR when `retry_cnt` is used up).
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.cc.poll_timeout().is_some_and(|t| t <= now) {
            self.cc.handle_timeout(now);
        }
        if self.pacing_blocked && self.pacer.ready(now) {
            self.pacing_blocked = false;
        }
        if let Some(t) = self.rnr_deadline {
            if t <= now {
                self.rnr_deadline = None;
                // The RNR wait had priority; restart the ACK timer now.
                if self.has_outstanding() {
                    self.rto_deadline = self.ack_timeout().map(|d| now + d);
                }
            } else if self.rto_deadline.is_some_and(|r| r <= now) {
                // An RNR wait takes priority over the retransmission timer.
                self.rto_deadline = None;
            }
        }
        if let Some(t) = self.rto_deadline {
            if t <= now && self.state_runs_requester() {
                self.rto_deadline = None;
                if self.has_outstanding() {
                    self.stats.timeouts += 1;
                    if self.resend_owed && self.pacing_blocked {
                        // Nothing went again since the last timeout: the
                        // congestion control's rate held it. A retry is
                        // used by a resend that left, not by waiting.
                        self.rto_deadline = self.ack_timeout().map(|d| now + d);
                        return;
                    }
                    if self.take_retry() {
                        if self.cfg.retransmit == RetransmitMode::SelectiveRepeat {
                            self.selective_timeout();
                            self.resend_owed = true;
                        } else {
                            self.rewind(self.comp_psn);
                        }
                        self.rto_deadline = self.ack_timeout().map(|d| now + d);
                    } else {
                        self.fail_head(WcStatus::RetryExcErr);
                    }
                }
            }
        }
    }

    /// The retransmission timeout to arm now: the configured low or high
    /// one ([`QpConfig::rto`]) by the PSNs outstanding, else the Local
    /// ACK Timeout of the `timeout` attribute (`None`: no timer).
    pub(super) fn ack_timeout(&self) -> Option<Duration> {
        match self.cfg.rto {
            Some(r) => Some(if self.sent_psn.distance_from(self.comp_psn) <= r.few {
                r.low
            } else {
                r.high
            }),
            None => local_ack_timeout(self.attr.timeout),
        }
    }

    /// Use up one retry; false when none is left.
    pub(super) fn take_retry(&mut self) -> bool {
        if self.cfg.rxe_retry_cnt7_infinite && self.attr.retry_cnt == 7 {
            return true;
        }
        if self.retries_left == 0 {
            return false;
        }
        self.retries_left -= 1;
        true
    }

    /// An implied NAK or a gap in READ responses: retry once, then ignore
    /// further out-of-order responses until one makes progress (rxe's
    /// `started_retry`), so that the tail of a stream that was already in
    /// flight does not use up `retry_cnt`.
    pub(super) fn implied_retry(&mut self, now: Instant) {
        if self.gap_retried {
            self.stats.stale_responses += 1;
            return;
        }
        self.gap_retried = true;
        self.stats.implied_naks += 1;
        self.retry_or_fail(now);
    }

    pub(super) fn retry_or_fail(&mut self, now: Instant) {
        if !self.has_outstanding() {
            return;
        }
        if self.take_retry() {
            self.stats.retries += 1;
            self.rewind(self.comp_psn);
            self.rto_deadline = self.ack_timeout().map(|d| now + d);
        } else {
            self.fail_head(WcStatus::RetryExcErr);
        }
    }

    /// Restart sending at the first incomplete WQE: from `from` (go-back-N)
    /// or from the WQE's first packet (go-back-0).
    pub(super) fn rewind(&mut self, from: Psn) {
        let Some(w) = self.sq.front() else { return };
        if !w.started {
            return;
        }
        // Everything from `from` goes again: what selective repeat knew of
        // the responder's holdings no longer matters, and no resent PSN is
        // timed (Karn's rule).
        self.sack = None;
        if let Some(t) = self.sent_times.as_deref_mut() {
            t.clear();
        }
        // Only the PSNs that went out before (below `sent_psn`) count as
        // retransmissions.
        if self.next_psn.is_after(self.retx_until) {
            self.retx_until = self.next_psn;
        }
        self.send_idx = 0;
        self.pkts_since_ackreq = 0;
        match self.cfg.retransmit {
            RetransmitMode::GoBackN | RetransmitMode::SelectiveRepeat => {
                let k = from.distance_from(w.first_psn);
                self.send_pkt = if k < w.npsn { k } else { 0 };
            }
            RetransmitMode::GoBack0 => {
                self.send_pkt = 0;
                self.comp_psn = w.first_psn;
            }
        }
    }
}
