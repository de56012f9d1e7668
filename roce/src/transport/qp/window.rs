//! The data of out-of-order placement and selective repeat, without the
//! queue pair: the responder's reorder window ([`RecvWindow`]: held
//! requests by PSN, and where WRITE messages whose first packet was held
//! put their data) and the requester's scoreboard ([`Scoreboard`]: what
//! the responder reported held and what was resent). [`super::selective`]
//! holds the rules that use them; the [`super::Qp`] owns one of each,
//! boxed, once needed.
//!
//! Contract: PSNs are 24-bit and compared in the modular half-space;
//! neither structure grows past the PSNs between its base and the
//! highest PSN given to it, which its callers bound (the reorder window,
//! the PSNs outstanding).

use std::collections::VecDeque;

use crate::wire::{Psn, Rkey, RoceHeaders};

/// A held request: its headers and payload length, what the in-order
/// checks need again (the data is already in place).
#[derive(Debug, Clone, Copy)]
pub(super) struct Held {
    pub(super) headers: RoceHeaders,
    pub(super) len: u32,
}

/// Where a WRITE message whose first packet was held puts its data.
#[derive(Debug, Clone, Copy)]
pub(super) struct WriteCtx {
    pub(super) start: Psn,
    pub(super) npsn: u32,
    pub(super) rkey: Rkey,
    pub(super) va: u64,
    pub(super) len: u32,
}

/// The responder's reorder window: slots for the PSNs from the expected
/// one on.
#[derive(Debug, Clone)]
pub(super) struct RecvWindow {
    /// The PSN of `slots[0]`.
    pub(super) base: Psn,
    pub(super) slots: VecDeque<Option<Held>>,
    pub(super) writes: Vec<WriteCtx>,
}

impl RecvWindow {
    pub(super) fn new(base: Psn) -> RecvWindow {
        RecvWindow {
            base,
            slots: VecDeque::new(),
            writes: Vec::new(),
        }
    }

    /// Forget the slots and messages before `epsn`.
    pub(super) fn advance(&mut self, epsn: Psn) {
        let k = epsn.diff(self.base);
        if k < 0 || k as usize >= self.slots.len() {
            self.slots.clear();
        } else {
            self.slots.drain(..k as usize);
        }
        self.base = epsn;
        self.writes.retain(|w| w.start.add(w.npsn).is_after(epsn));
    }

    pub(super) fn is_held(&self, d: u32) -> bool {
        self.slots.get(d as usize).is_some_and(Option::is_some)
    }

    /// Where the WRITE packet at `psn` goes, from a held first packet:
    /// (R_Key, address, bytes left in the message from there).
    pub(super) fn write_target(&self, psn: Psn, pmtu: u32) -> Option<(Rkey, u64, u32)> {
        self.writes.iter().find_map(|w| {
            let k = psn.distance_from(w.start);
            (k > 0 && k < w.npsn).then(|| {
                let off = k as u64 * pmtu as u64;
                (w.rkey, w.va.wrapping_add(off), w.len - off as u32)
            })
        })
    }
}

/// How the requester last sent an outstanding PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mark {
    /// Sent once; lost if a later PSN is reported held.
    Out,
    /// Reported held by the responder.
    Sacked,
    /// Resent while the first new PSN not yet sent was this one.
    Resent(Psn),
    /// Known lost (the responder got its trimmed headers): resent next.
    Trimmed,
    /// A READ response the requester placed past a gap (only the
    /// requester's own placement sets it: nothing a peer sends does).
    Placed,
}

/// The requester's view of its outstanding PSNs under selective repeat.
#[derive(Debug, Clone)]
pub(super) struct Scoreboard {
    /// The PSN of `marks[0]` (the oldest unacknowledged, when synced).
    pub(super) base: Psn,
    pub(super) marks: VecDeque<Mark>,
    /// One past the highest PSN reported held or known lost: PSNs below it
    /// marked `Out` are holes.
    pub(super) high: Psn,
    /// The next PSN to look at for a hole.
    pub(super) cursor: Psn,
    /// PSNs before this one, outstanding at the last timeout, are lost
    /// whatever multipath's rules say.
    pub(super) forced: Psn,
}

impl Scoreboard {
    pub(super) fn new(base: Psn) -> Scoreboard {
        Scoreboard {
            base,
            marks: VecDeque::new(),
            high: base,
            cursor: base,
            forced: base,
        }
    }

    /// Drop what `comp_psn` acknowledged.
    pub(super) fn sync(&mut self, comp_psn: Psn) {
        let k = comp_psn.diff(self.base);
        if k <= 0 {
            return;
        }
        if k as usize >= self.marks.len() {
            self.marks.clear();
        } else {
            self.marks.drain(..k as usize);
        }
        self.base = comp_psn;
        if self.high.is_before(comp_psn) {
            self.high = comp_psn;
        }
        if self.cursor.is_before(comp_psn) {
            self.cursor = comp_psn;
        }
    }

    /// The mark of `psn`, created as `Out` (with those before it).
    pub(super) fn mark(&mut self, psn: Psn) -> &mut Mark {
        let i = psn.distance_from(self.base) as usize;
        if self.marks.len() <= i {
            self.marks.resize(i + 1, Mark::Out);
        }
        &mut self.marks[i]
    }

    pub(super) fn raise_high(&mut self, psn: Psn) {
        if psn.next().is_after(self.high) {
            self.high = psn.next();
        }
    }

    /// Whether a hole may be waiting to be resent.
    pub(super) fn may_have_hole(&self) -> bool {
        self.cursor.is_before(self.high)
    }
}
