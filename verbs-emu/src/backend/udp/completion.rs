//! Completions and asynchronous events of a UDP device: move what the
//! engines completed to their CQs and what they raised to the device's
//! event queue.
//!
//! Contract: a completion that finds its CQ full overruns it, as on a
//! device: the CQ goes into error (`CqErr`), the completion is lost, and
//! every QP using that CQ goes to ERR (`QpFatal`).

use super::state::{Shared, State};
use super::work::convert_wc;
use crate::backend::{AsyncEvent, CqHandle, QpHandle};
use crate::verbs::{QpAttrMask, QpState};
use roce::transport as tp;

impl Shared {
    /// Move completions from the engines to their CQs, and the engines'
    /// events to the device's async event queue. A completion that finds
    /// its CQ full overruns it, as on a device: the CQ goes into error
    /// (`CqErr`), the completion is lost, and every QP using that CQ goes
    /// to ERR (`QpFatal`).
    pub(super) fn collect(&self, st: &mut State) {
        let State {
            qps, cqs, events, ..
        } = st;
        let mut overrun = false;
        for (&qpn, e) in qps.iter_mut() {
            let qp = QpHandle(u64::from(qpn));
            while let Some(c) = e.engine.poll_completion() {
                let cq = if c.is_recv { e.recv_cq } else { e.send_cq };
                if let Some(q) = cqs.get_mut(&cq) {
                    if q.overrun {
                        continue;
                    }
                    if q.queue.len() >= q.capacity {
                        q.overrun = true;
                        overrun = true;
                        events.push_back(AsyncEvent::CqErr(CqHandle(cq)));
                        continue;
                    }
                    q.queue.push_back(convert_wc(&c));
                }
            }
            while let Some(ev) = e.engine.poll_event() {
                events.push_back(match ev {
                    tp::QpEvent::SqDrained => AsyncEvent::SqDrained(qp),
                    tp::QpEvent::Error(tp::WcStatus::RemInvReqErr) => AsyncEvent::QpReqErr(qp),
                    tp::QpEvent::Error(tp::WcStatus::RemAccessErr) => AsyncEvent::QpAccessErr(qp),
                    tp::QpEvent::Error(_) => AsyncEvent::QpFatal(qp),
                });
            }
        }
        if !overrun {
            return;
        }
        let broken = |h: u64| cqs.get(&h).is_some_and(|q| q.overrun);
        for (&qpn, e) in qps.iter_mut() {
            let state = e.engine.state();
            if (broken(e.send_cq) || broken(e.recv_cq))
                && !matches!(state, QpState::Reset | QpState::Err)
            {
                let attr = tp::QpAttr {
                    qp_state: QpState::Err,
                    ..*e.engine.attr()
                };
                if e.engine.modify(&attr, QpAttrMask::STATE).is_ok() {
                    events.push_back(AsyncEvent::QpFatal(QpHandle(u64::from(qpn))));
                }
            }
        }
        // The flushes of those QPs go where they can.
        self.collect(st);
    }
}
