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
use verbs_emu::verbs::{RecvWr, Sge};

use crate::lock;

/// The receive WRs of one SRQ (see the module docs).
pub(crate) struct SrqPool {
    pub max_wr: u32,
    pub max_sge: u32,
    state: Mutex<(VecDeque<Pending>, Vec<Lent>)>,
}

impl SrqPool {
    /// An empty pool of at most `max_wr` WRs of at most `max_sge` SGEs.
    pub fn new(max_wr: u32, max_sge: u32) -> Self {
        Self {
            max_wr,
            max_sge,
            state: Mutex::new((VecDeque::new(), Vec::new())),
        }
    }

    /// Queue one posted WR (`sges` is `None` when its SGE list was
    /// unreadable). Refused with `ENOMEM` when the pool already holds
    /// `max_wr` WRs (waiting or lent), else with `EINVAL` for a bad SGE list.
    pub fn queue(&self, wr_id: u64, sges: Option<&[Sge]>) -> Result<(), c_int> {
        let mut g = lock(&self.state);
        let full =
            g.0.len() + g.1.iter().map(|l| l.lent as usize).sum::<usize>() >= self.max_wr as usize;
        let Some(sg) = sges.filter(|sg| sg.len() <= self.max_sge as usize && !full) else {
            return Err(if full { libc::ENOMEM } else { libc::EINVAL });
        };
        g.0.push_back(Pending {
            wr_id,
            sges: sg.to_vec(),
        });
        Ok(())
    }

    /// Whether a QP still receives from this pool.
    pub fn in_use(&self) -> bool {
        !lock(&self.state).1.is_empty()
    }

    /// A QP starts receiving from this SRQ.
    pub fn attach(&self, qp: usize, qpn: u32, handle: QpHandle, backend: Arc<dyn Backend>) {
        lock(&self.state).1.push(Lent {
            qp,
            qpn,
            handle,
            backend,
            lent: 0,
        });
        self.refill();
    }

    /// A QP is destroyed; what it held is flushed with it.
    pub fn detach(&self, qp: usize) {
        lock(&self.state).1.retain(|l| l.qp != qp);
    }

    /// A receive completed on QP `qpn`.
    pub fn completed(&self, qpn: u32) {
        let mut g = lock(&self.state);
        if let Some(l) = g.1.iter_mut().find(|l| l.qpn == qpn) {
            l.lent = l.lent.saturating_sub(1);
        }
    }

    /// Lend waiting WRs to the QPs that hold the fewest.
    pub fn refill(&self) {
        let mut g = lock(&self.state);
        let (pending, qps) = &mut *g;
        let mut refused = vec![false; qps.len()];
        while let Some(p) = pending.front() {
            let Some(i) = (0..qps.len())
                .filter(|&i| !refused[i])
                .min_by_key(|&i| qps[i].lent)
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
                    l.lent += 1;
                    pending.pop_front();
                }
                // A QP in RESET (or full) takes nothing now; another may.
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

/// A QP attached to an SRQ and how many of its WRs it holds.
struct Lent {
    qp: usize,
    qpn: u32,
    handle: QpHandle,
    backend: Arc<dyn Backend>,
    lent: u32,
}
