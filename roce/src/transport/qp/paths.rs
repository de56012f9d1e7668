//! Multipath: one QP's packets spread over several paths, each named by an
//! entropy value the network hashes (the UDP source port; with several
//! planes, the plane too), with a lost packet's path avoided for a while
//! (the Multipath Reliable Connection's idea, and Ultra Ethernet's
//! entropy-based spraying).
//!
//! The [`PathSet`] is plain data with its rules; the requester asks it for
//! a path per request packet and tells it what the responder reported:
//!
//! * **Choice**: round robin over the paths not avoided. When every path
//!   is avoided, the one whose avoidance ends first is used (a probe).
//! * **Loss**, under selective repeat: packets on one path arrive in the
//!   order they were sent on it, so a hole whose path delivered a packet
//!   sent after it is lost for certain. A hole is also lost when a packet
//!   sent at least [`MultipathConfig::reorder`] after it was reported
//!   (different paths reorder by less than that; a dead path delivers
//!   nothing, and this rule finds its losses). A timeout declares every
//!   outstanding packet lost.
//! * **Ambiguity**: a report of a resent PSN may be of any of its
//!   transmissions, so it is no evidence about paths (Karn's rule).
//! * **Avoidance**: the path of a packet declared lost is avoided for
//!   [`MultipathConfig::avoid`]; a packet it carried that is reported
//!   later than that loss's send time ends the avoidance early.
//!
//! Units: times are [`Instant`]s of the caller's clock; sequence numbers
//! count packets per path. Contract: memory is one record per outstanding
//! PSN (bounded by the send window) and a few words per path.

use std::collections::VecDeque;

use crate::time::Instant;
use crate::transport::types::{Lane, MultipathConfig};
use crate::wire::Psn;

/// The latest transmission of one outstanding PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Sent {
    /// The path it took.
    path: u16,
    /// Its sequence number on that path.
    seq: u32,
    /// When it left.
    at: Instant,
    /// A resend: a report of this PSN may be of an earlier transmission,
    /// so it proves nothing about this one's path (Karn's rule).
    resent: bool,
}

/// One path's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct PathState {
    /// The next sequence number to send on it.
    next_seq: u32,
    /// One past the highest sequence number reported delivered.
    reported: u32,
    /// Avoided until then.
    avoid_until: Option<Instant>,
    /// Send time of the packet whose loss started the avoidance.
    lost_sent_at: Instant,
}

/// A QP's paths and its record of which packet took which.
#[derive(Debug, Clone)]
pub(super) struct PathSet {
    cfg: MultipathConfig,
    paths: Vec<PathState>,
    /// Round-robin cursor per lane (index: the lane's).
    next: Vec<u16>,
    /// The PSN of `sent[0]`.
    base: Psn,
    sent: VecDeque<Option<Sent>>,
    /// The latest send time among packets reported delivered.
    latest_reported: Option<Instant>,
}

impl PathSet {
    pub(super) fn new(cfg: MultipathConfig) -> PathSet {
        PathSet {
            cfg,
            paths: vec![PathState::default(); usize::from(cfg.paths.max(1))],
            next: Vec::new(),
            base: Psn::new(0),
            sent: VecDeque::new(),
            latest_reported: None,
        }
    }

    /// Forget what `comp_psn` acknowledged.
    pub(super) fn sync(&mut self, comp_psn: Psn) {
        let k = comp_psn.diff(self.base);
        if k <= 0 {
            if self.sent.is_empty() {
                self.base = comp_psn;
            }
            return;
        }
        if k as usize >= self.sent.len() {
            self.sent.clear();
        } else {
            self.sent.drain(..k as usize);
        }
        self.base = comp_psn;
    }

    /// Whether `path` is avoided at `now`.
    fn is_avoided(&self, path: u16, now: Instant) -> bool {
        self.paths[usize::from(path)]
            .avoid_until
            .is_some_and(|t| t > now)
    }

    /// Whether a packet sent at `now` may take a path of `lane`: one of
    /// its paths is not avoided, or every path of every lane is (each
    /// lane then probes).
    pub(super) fn usable_in(&self, lane: Lane, now: Instant) -> bool {
        let n = self.paths.len() as u16;
        let mut any = false;
        for p in 0..n {
            if !self.is_avoided(p, now) {
                if lane.holds(p) {
                    return true;
                }
                any = true;
            }
        }
        !any && (0..n).any(|p| lane.holds(p))
    }

    /// The path for the next packet sent at `now` in `lane`: round robin
    /// over its paths not avoided; when every one is avoided, the one
    /// released first (a probe). A lane without paths gets the lane-free
    /// choice.
    pub(super) fn pick(&mut self, lane: Lane, now: Instant) -> u16 {
        let n = self.paths.len() as u16;
        let lane = if (0..n).any(|p| lane.holds(p)) {
            lane
        } else {
            Lane::ANY
        };
        let li = usize::from(lane.index);
        if self.next.len() <= li {
            self.next.resize(li + 1, 0);
        }
        let start = self.next[li];
        for k in 0..n {
            let p = (start + k) % n;
            if !lane.holds(p) || self.is_avoided(p, now) {
                continue;
            }
            self.paths[usize::from(p)].avoid_until = None;
            self.next[li] = (p + 1) % n;
            return p;
        }
        // Every path of the lane avoided: probe the one released first.
        let p = (0..n)
            .filter(|&p| lane.holds(p))
            .min_by_key(|&p| self.paths[usize::from(p)].avoid_until)
            .unwrap_or(0);
        self.next[li] = (p + 1) % n;
        p
    }

    /// The path for request PSN `psn` (with, for a READ request, its
    /// response PSNs up to `last`) leaving at `now` in `lane`, recorded;
    /// `comp_psn` is the requester's, to forget what it acknowledged.
    pub(super) fn take(
        &mut self,
        comp_psn: Psn,
        psn: Psn,
        last: Psn,
        lane: Lane,
        now: Instant,
    ) -> u16 {
        self.sync(comp_psn);
        let path = self.pick(lane, now);
        self.record(psn, last, path, now);
        path
    }

    /// PSN `psn` (and, for a READ request, the response PSNs up to
    /// `last`) left on `path` at `now`.
    pub(super) fn record(&mut self, psn: Psn, last: Psn, path: u16, now: Instant) {
        let resent = self.sent_of(psn).is_some();
        let st = &mut self.paths[usize::from(path)];
        let s = Sent {
            path,
            seq: st.next_seq,
            at: now,
            resent,
        };
        st.next_seq = st.next_seq.wrapping_add(1);
        let mut q = psn;
        loop {
            let d = q.diff(self.base);
            if d < 0 {
                return;
            }
            let i = d as usize;
            if self.sent.len() <= i {
                self.sent.resize(i + 1, None);
            }
            self.sent[i] = Some(s);
            if q == last {
                break;
            }
            q = q.next();
        }
    }

    fn sent_of(&self, psn: Psn) -> Option<Sent> {
        let d = psn.diff(self.base);
        if d < 0 {
            return None;
        }
        self.sent.get(d as usize).copied().flatten()
    }

    /// The responder reported `psn` delivered (held past a gap).
    pub(super) fn on_reported(&mut self, psn: Psn) {
        let Some(s) = self.sent_of(psn).filter(|s| !s.resent) else {
            return;
        };
        let st = &mut self.paths[usize::from(s.path)];
        if s.seq.wrapping_add(1).wrapping_sub(st.reported) as i32 > 0 {
            st.reported = s.seq.wrapping_add(1);
        }
        if st.avoid_until.is_some() && s.at > st.lost_sent_at {
            // Sent after the loss and delivered: the path works again.
            st.avoid_until = None;
        }
        if self.latest_reported.map_or(true, |t| s.at > t) {
            self.latest_reported = Some(s.at);
        }
    }

    /// Whether the hole at `psn` is lost by the rules above (a PSN without
    /// a record is: nothing can be learnt about it).
    pub(super) fn is_lost(&self, psn: Psn) -> bool {
        let Some(s) = self.sent_of(psn) else {
            return true;
        };
        let st = &self.paths[usize::from(s.path)];
        if st.reported.wrapping_sub(s.seq.wrapping_add(1)) as i32 >= 0 && st.reported != 0 {
            return true;
        }
        self.latest_reported
            .is_some_and(|t| t >= s.at + self.cfg.reorder)
    }

    /// The packet at `psn` was declared lost at `now`: avoid its path.
    /// True when that path was not avoided already.
    pub(super) fn on_lost(&mut self, psn: Psn, now: Instant) -> bool {
        let Some(s) = self.sent_of(psn) else {
            return false;
        };
        let st = &mut self.paths[usize::from(s.path)];
        let fresh = st.avoid_until.map_or(true, |t| t <= now);
        st.avoid_until = Some(now + self.cfg.avoid);
        st.lost_sent_at = s.at;
        fresh
    }

    /// Paths avoided at `now`.
    pub(super) fn avoided(&self, now: Instant) -> usize {
        (0..self.paths.len() as u16)
            .filter(|&p| self.is_avoided(p, now))
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn set(paths: u16) -> PathSet {
        PathSet::new(MultipathConfig {
            paths,
            avoid: Duration::from_us(500),
            reorder: Duration::from_us(10),
        })
    }

    fn t(us: u64) -> Instant {
        Instant::ZERO + Duration::from_us(us)
    }

    #[test]
    fn round_robin_skips_avoided_paths_until_released() {
        let mut s = set(4);
        let picks: Vec<u16> = (0..4).map(|_| s.pick(Lane::ANY, t(0))).collect();
        assert_eq!(picks, [0, 1, 2, 3]);
        for (i, &p) in picks.iter().enumerate() {
            s.record(Psn::new(i as u32), Psn::new(i as u32), p, t(0));
        }
        assert!(s.on_lost(Psn::new(2), t(1)));
        assert!(!s.on_lost(Psn::new(2), t(2)), "already avoided");
        let picks: Vec<u16> = (0..6).map(|_| s.pick(Lane::ANY, t(3))).collect();
        assert_eq!(picks, [0, 1, 3, 0, 1, 3]);
        assert_eq!(s.avoided(t(3)), 1);
        // Released after `avoid`.
        let picks: Vec<u16> = (0..4).map(|_| s.pick(Lane::ANY, t(600))).collect();
        assert!(picks.contains(&2));
    }

    #[test]
    fn lanes_take_their_own_paths_and_refuse_when_all_are_avoided() {
        let mut s = set(8);
        let lane1 = Lane { index: 1, count: 4 };
        assert_eq!(s.pick(lane1, t(0)), 1);
        assert_eq!(s.pick(lane1, t(0)), 5);
        assert_eq!(s.pick(lane1, t(0)), 1);
        s.record(Psn::new(0), Psn::new(0), 1, t(0));
        s.record(Psn::new(1), Psn::new(1), 5, t(0));
        s.on_lost(Psn::new(0), t(1));
        assert!(s.usable_in(lane1, t(2)));
        s.on_lost(Psn::new(1), t(1));
        assert!(!s.usable_in(lane1, t(2)), "both of lane 1's paths avoided");
        assert!(s.usable_in(Lane { index: 0, count: 4 }, t(2)));
        // A lane whose paths are all avoided probes only once every lane's are.
        for (psn, path) in [(2, 0), (3, 2), (4, 3), (5, 4), (6, 6), (7, 7)] {
            s.record(Psn::new(psn), Psn::new(psn), path, t(0));
            s.on_lost(Psn::new(psn), t(1));
        }
        assert!(s.usable_in(lane1, t(2)));
        assert!(
            !s.usable_in(Lane { index: 8, count: 9 }, t(2)),
            "a lane without paths"
        );
    }

    #[test]
    fn a_later_packet_on_the_same_path_proves_a_loss() {
        let mut s = set(2);
        // PSN 0 on path 0, 1 on path 1, 2 on path 0, all at time 0.
        for (psn, path) in [(0, 0), (1, 1), (2, 0)] {
            s.record(Psn::new(psn), Psn::new(psn), path, t(0));
        }
        // PSN 1 reported: another path, sent at the same time: not proof.
        s.on_reported(Psn::new(1));
        assert!(!s.is_lost(Psn::new(0)));
        // PSN 2 reported: same path as 0, sent after it.
        s.on_reported(Psn::new(2));
        assert!(s.is_lost(Psn::new(0)));
    }

    #[test]
    fn a_packet_sent_much_later_proves_a_loss_on_a_dead_path() {
        let mut s = set(2);
        s.record(Psn::new(0), Psn::new(0), 0, t(0));
        s.record(Psn::new(1), Psn::new(1), 1, t(5));
        s.on_reported(Psn::new(1));
        assert!(!s.is_lost(Psn::new(0)), "within the reorder time");
        s.record(Psn::new(2), Psn::new(2), 1, t(10));
        s.on_reported(Psn::new(2));
        assert!(s.is_lost(Psn::new(0)));
    }

    #[test]
    fn every_path_avoided_probes_the_first_released() {
        let mut s = set(3);
        for p in 0..3u16 {
            s.record(Psn::new(u32::from(p)), Psn::new(u32::from(p)), p, t(0));
        }
        s.on_lost(Psn::new(1), t(1));
        s.on_lost(Psn::new(0), t(2));
        s.on_lost(Psn::new(2), t(3));
        assert_eq!(s.pick(Lane::ANY, t(4)), 1);
        // A delivery on path 0 sent after its loss ends its avoidance.
        s.record(Psn::new(3), Psn::new(3), 0, t(5));
        s.on_reported(Psn::new(3));
        assert_eq!(s.avoided(t(6)), 2);
    }

    #[test]
    fn records_follow_the_acknowledged_psn() {
        let mut s = set(2);
        s.record(Psn::new(10), Psn::new(12), 1, t(0));
        s.sync(Psn::new(11));
        assert!(s.sent_of(Psn::new(10)).is_none());
        assert_eq!(s.sent_of(Psn::new(12)).map(|x| x.path), Some(1));
    }
}
