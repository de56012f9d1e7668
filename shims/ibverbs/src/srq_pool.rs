//! The pool behind a shared receive queue.
//!
//! The transport engine has per-QP receive queues only, so an SRQ is a pool
//! that lends its receive WRs to the QPs attached to it: each WR posted to
//! the SRQ goes to the attached QP (in a state that accepts receives) that
//! holds the fewest lent WRs, and a receive completion returns the lent WR
//! of its QP. A message for a QP that holds none meets an RNR NAK and is
//! retried, as with an SRQ that ran dry; programs keep an SRQ deep enough
//! for that never to matter (`ibv_srq_pingpong` posts 500 for 16 QPs).
//!
//! This file knows no C object: the records that share a pool (SRQ, QP,
//! CQ) hold it by `Arc`, and the verbs call its methods.

use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::{Arc, Mutex};

use verbs_emu::backend::{Backend, QpHandle};
use verbs_emu::verbs::{QpState, RecvWr, Sge};

use crate::lock;

/// The receive WRs of one SRQ (see the module docs).
pub(crate) struct SrqPool {
    pub max_wr: u32,
    pub max_sge: u32,
    state: Mutex<PoolState>,
    /// The armed limit (`ibv_modify_srq` with `IBV_SRQ_LIMIT`; 0: not
    /// armed) and the C SRQ its event names.
    limit: Mutex<(u32, usize)>,
}

/// What the pool's lock guards.
struct PoolState {
    /// WRs waiting for a QP, first to lend first.
    pending: VecDeque<Pending>,
    /// The attached QPs and the WRs each holds.
    qps: Vec<Lent>,
    /// WRs taken back from destroyed QPs, by (QPN, wr_id): a flush
    /// completion of one still in a CQ is the pool's, not the program's.
    /// At most `max_wr` entries, oldest dropped first.
    returned: VecDeque<(u32, u64)>,
}

impl PoolState {
    /// WRs the pool holds, waiting or lent.
    fn held(&self) -> usize {
        self.pending.len() + self.qps.iter().map(|l| l.held.len()).sum::<usize>()
    }
}

impl SrqPool {
    /// An empty pool of at most `max_wr` WRs of at most `max_sge` SGEs.
    pub fn new(max_wr: u32, max_sge: u32) -> Self {
        Self {
            max_wr,
            max_sge,
            state: Mutex::new(PoolState {
                pending: VecDeque::new(),
                qps: Vec::new(),
                returned: VecDeque::new(),
            }),
            limit: Mutex::new((0, 0)),
        }
    }

    /// Arm the limit event of the SRQ at `element`: it fires once when the
    /// pool holds fewer than `limit` WRs (0 disarms). Refused with
    /// `EINVAL` above `max_wr`.
    pub fn arm(&self, limit: u32, element: usize) -> Result<(), c_int> {
        if limit > self.max_wr {
            return Err(libc::EINVAL);
        }
        *lock(&self.limit) = (limit, element);
        Ok(())
    }

    /// The armed limit (0 once the event fired, as on a NIC).
    pub fn limit(&self) -> u32 {
        lock(&self.limit).0
    }

    /// The SRQ to raise `IBV_EVENT_SRQ_LIMIT_REACHED` on, when the pool now
    /// holds fewer WRs than the armed limit; disarms it.
    pub fn limit_reached(&self) -> Option<usize> {
        let held = lock(&self.state).held();
        let mut l = lock(&self.limit);
        if l.0 == 0 || held >= l.0 as usize {
            return None;
        }
        l.0 = 0;
        Some(l.1)
    }

    /// Queue one posted WR (`sges` is `None` when its SGE list was
    /// unreadable). Refused with `ENOMEM` when the pool already holds
    /// `max_wr` WRs (waiting or lent), else with `EINVAL` for a bad SGE list.
    pub fn queue(&self, wr_id: u64, sges: Option<&[Sge]>) -> Result<(), c_int> {
        let mut g = lock(&self.state);
        let full = g.held() >= self.max_wr as usize;
        let Some(sg) = sges.filter(|sg| sg.len() <= self.max_sge as usize && !full) else {
            return Err(if full { libc::ENOMEM } else { libc::EINVAL });
        };
        g.pending.push_back(Pending {
            wr_id,
            sges: sg.to_vec(),
        });
        Ok(())
    }

    /// Whether a QP still receives from this pool.
    pub fn in_use(&self) -> bool {
        !lock(&self.state).qps.is_empty()
    }

    /// A QP starts receiving from this SRQ.
    pub fn attach(&self, qp: usize, qpn: u32, handle: QpHandle, backend: Arc<dyn Backend>) {
        let mut g = lock(&self.state);
        // A reused QPN: flushes of its former owner are long polled.
        g.returned.retain(|&(n, _)| n != qpn);
        g.qps.push(Lent {
            qp,
            qpn,
            handle,
            backend,
            held: VecDeque::new(),
        });
        drop(g);
        self.refill();
    }

    /// A QP is destroyed: the WRs it held return to the pool, as a NIC's
    /// SRQ keeps the WQEs a destroyed QP never consumed.
    pub fn detach(&self, qp: usize) {
        let mut g = lock(&self.state);
        let Some(i) = g.qps.iter().position(|l| l.qp == qp) else {
            return;
        };
        let l = g.qps.swap_remove(i);
        for p in l.held {
            g.returned.push_back((l.qpn, p.wr_id));
            if g.returned.len() > self.max_wr as usize {
                g.returned.pop_front();
            }
            g.pending.push_back(p);
        }
        drop(g);
        self.refill();
    }

    /// A receive `wr_id` completed on QP `qpn`, `flushed` or not. Returns
    /// whether the completion is the pool's own: the flush of a WR it lent
    /// to a QP that went to error (or was destroyed), which goes back to
    /// the pool for another QP instead of reaching the program, as an SRQ
    /// WQE on a NIC is never flushed by one QP's error.
    pub fn completed(&self, qpn: u32, wr_id: u64, flushed: bool) -> bool {
        let mut g = lock(&self.state);
        let g = &mut *g;
        if let Some(l) = g.qps.iter_mut().find(|l| l.qpn == qpn) {
            let Some(i) = l.held.iter().position(|p| p.wr_id == wr_id) else {
                return false;
            };
            let p = l.held.remove(i);
            if flushed {
                if let Some(p) = p {
                    g.pending.push_back(p);
                }
            }
            return flushed;
        }
        if !flushed {
            return false;
        }
        match g.returned.iter().position(|&r| r == (qpn, wr_id)) {
            Some(i) => {
                g.returned.remove(i);
                true
            }
            None => false,
        }
    }

    /// Lend waiting WRs to the QPs that hold the fewest, among those that
    /// take receives and do not flush them (INIT to SQE: never RESET or
    /// ERR).
    pub fn refill(&self) {
        let mut g = lock(&self.state);
        let PoolState { pending, qps, .. } = &mut *g;
        if pending.is_empty() {
            return;
        }
        let mut refused: Vec<bool> = qps
            .iter()
            .map(|l| {
                !matches!(
                    l.backend.query_qp_state(l.handle),
                    Ok(QpState::Init | QpState::Rtr | QpState::Rts | QpState::Sqd | QpState::Sqe)
                )
            })
            .collect();
        while let Some(p) = pending.front() {
            let Some(i) = (0..qps.len())
                .filter(|&i| !refused[i])
                .min_by_key(|&i| qps[i].held.len())
            else {
                return;
            };
            let l = &mut qps[i];
            let wr = RecvWr {
                wr_id: p.wr_id,
                sg_list: &p.sges,
            };
            // SAFETY: the program posted these buffers to the SRQ under the
            // same contract as a QP's receives.
            match unsafe { l.backend.post_recv(l.handle, &[wr]) } {
                Ok(()) => {
                    if let Some(p) = pending.pop_front() {
                        l.held.push_back(p);
                    }
                }
                // A full QP takes nothing now; another may.
                Err(_) => refused[i] = true,
            }
        }
    }
}

/// A WR waiting in an SRQ.
struct Pending {
    wr_id: u64,
    sges: Vec<Sge>,
}

/// A QP attached to an SRQ and the WRs it holds, in posting order.
struct Lent {
    qp: usize,
    qpn: u32,
    handle: QpHandle,
    backend: Arc<dyn Backend>,
    held: VecDeque<Pending>,
}
