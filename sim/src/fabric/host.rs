//! Host NICs at work: queue pairs driven by the shared transport engine
//! (`roce::transport::Qp`) with length-only memory (their state is in
//! [`super::nic`]).
//!
//! * Each flow maps to a connected RC QP pair (requester at the source,
//!   responder at the destination), one pair per (source, destination,
//!   `qp_index`). Flows post their messages as signalled work requests,
//!   a bounded number at a time, and complete when the last one does.
//!   A flow that waits for others is posted by the event its last
//!   dependency's completion schedules; nothing polls for it.
//! * Transmission is pulled: when the NIC port is free and a priority is
//!   not paused, the next QP in that priority's ready ring is asked for a
//!   packet ([`Qp::poll_transmit`]); a QP that has nothing leaves the ring
//!   until something happens to it. DCQCN pacing lives in the engine; its
//!   deadlines come back through [`Qp::poll_timeout`].
//! * Timers: one pending event per QP at most, for the earliest deadline
//!   the engine reports; an idle QP costs nothing.
//! * Receive: frames go straight to the engine, or, with a drain rate,
//!   through a FIFO drained at that rate; crossing `rx_xoff` sends PAUSE on
//!   the frame's (lossless) priority, falling to `rx_xon` sends XON.
//! * CNPs leave on the configured CNP priority; ACKs on the QP's priority.
//!
//! [`Qp::poll_transmit`]: roce::transport::Qp::poll_transmit
//! [`Qp::poll_timeout`]: roce::transport::Qp::poll_timeout

use roce::time::Instant;
use roce::transport::{
    AddressHandle, Payload, Received, RecvWr, SendOp, SendWr, Sge, SgeList, WcStatus,
};
use roce::wire::Opcode;

use super::event::Ev;
use super::nic::{message_len, wr_len, SimQp, POST_AHEAD, QPN_BASE};
use super::packet::{frame_len, Packet};
use super::world::World;
use crate::engine::EventQueue;
use crate::workload::FlowOp;

impl World<'_> {
    /// A flow starts: post its first messages.
    pub(crate) fn flow_start(&mut self, id: u32, now: Instant) {
        self.flow_state[id as usize].posted_at = Some(now);
        let f = &self.flows[id as usize];
        if f.op == FlowOp::Send {
            let qp = self.flow_state[id as usize].qp;
            self.post_recvs(id, qp ^ 1);
        }
        let qp = self.flow_state[id as usize].qp;
        self.post_more(id);
        self.after_activity(qp, now);
    }

    /// Keep up to `POST_AHEAD` receive WQEs ahead of a SEND flow.
    fn post_recvs(&mut self, id: u32, responder: u32) {
        let f = &self.flows[id as usize];
        let st = &mut self.flow_state[id as usize];
        let q = &mut self.qps.qps[responder as usize];
        let lkey = self.nics[q.host as usize].reg.lkey;
        while st.recvs < st.msgs && st.recvs < st.done + POST_AHEAD {
            let len = message_len(f, st.recvs);
            let wr = RecvWr {
                wr_id: (u64::from(id) << 32) | st.recvs,
                sges: SgeList::one(0, len, lkey),
            };
            if q.engine.post_recv(wr).is_err() {
                break;
            }
            st.recvs += 1;
        }
    }

    /// Post the flow's next messages, up to `POST_AHEAD` outstanding.
    fn post_more(&mut self, id: u32) {
        let f = &self.flows[id as usize];
        let st = &mut self.flow_state[id as usize];
        let q = &mut self.qps.qps[st.qp as usize];
        let lkey = self.nics[q.host as usize].reg.lkey;
        let rkey = self.nics[q.peer as usize].reg.rkey;
        while st.posted < st.msgs && st.posted < st.done + POST_AHEAD {
            let len = message_len(f, st.posted);
            let op = match f.op {
                FlowOp::Write => SendOp::Write {
                    remote_addr: 0,
                    rkey,
                },
                FlowOp::Read => SendOp::Read {
                    remote_addr: 0,
                    rkey,
                },
                FlowOp::Send => SendOp::Send,
            };
            let wr = SendWr::new(
                (u64::from(id) << 32) | st.posted,
                op,
                Sge {
                    addr: 0,
                    length: len,
                    lkey,
                },
            );
            let wr_id = wr.wr_id;
            if q.engine.post_send(wr).is_err() {
                break;
            }
            q.wrs.push_back(wr_id);
            st.posted += 1;
        }
    }

    /// After anything happened to QP `id`: collect completions, put it in
    /// the ready ring, kick the port, re-arm its timer.
    pub(crate) fn after_activity(&mut self, id: u32, now: Instant) {
        while let Some(c) = self.qps.qps[id as usize].engine.poll_completion() {
            if c.is_recv {
                continue;
            }
            let fid = (c.wr_id >> 32) as u32;
            let Some(st) = self.flow_state.get_mut(fid as usize) else {
                continue;
            };
            let f = &self.flows[fid as usize];
            let len = message_len(f, c.wr_id & 0xFFFF_FFFF);
            if c.status == WcStatus::Success {
                self.qps.qps[id as usize].retire(c.wr_id, len, true);
                st.done += 1;
                st.bytes_acked += u64::from(len);
                if st.done == st.msgs {
                    st.finish = Some(now);
                    self.flows_open -= 1;
                    self.release_dependents(fid, now);
                } else {
                    self.post_more(fid);
                    if f.op == FlowOp::Send {
                        self.post_recvs(fid, id ^ 1);
                    }
                }
            } else {
                let flows = self.flows;
                let q = &mut self.qps.qps[id as usize];
                if !st.failed {
                    // What the receiver acknowledged of the message that
                    // failed still counts as delivered.
                    if let Some((wr, part)) = q.head_acked(|w| wr_len(flows, w)) {
                        if wr == c.wr_id {
                            st.bytes_acked += part;
                        }
                    }
                }
                q.retire(c.wr_id, len, false);
                if st.failed {
                    continue;
                }
                st.failed = true;
                self.flows_open -= 1;
                let host = self.qps.qps[id as usize].host;
                self.nics[host as usize].counters.req_cqe_error += 1;
                self.block_dependents(fid);
            }
        }
        while self.qps.qps[id as usize].engine.poll_event().is_some() {}
        let q = &mut self.qps.qps[id as usize];
        let host = q.host;
        if !q.in_ready {
            q.in_ready = true;
            self.nics[host as usize].ready[usize::from(q.prio)].push_back(id);
        }
        self.arm_timer(id);
        let port = self.nics[host as usize].port;
        self.kick(port, now);
    }

    /// Bytes of flow `id` the receiver acknowledged: its completed
    /// messages, plus the acknowledged packets of the message in progress
    /// at the head of its queue pair (a flow cut off by the duration still
    /// shows what got through). Payload bytes, no headers.
    pub(crate) fn delivered(&self, id: u32) -> u64 {
        let st = &self.flow_state[id as usize];
        if st.failed || st.finish.is_some() {
            return st.bytes_acked;
        }
        let flows = self.flows;
        let part = self.qps.qps[st.qp as usize]
            .head_acked(|w| wr_len(flows, w))
            .filter(|&(wr, _)| (wr >> 32) as u32 == id)
            .map_or(0, |(_, b)| b);
        st.bytes_acked + part
    }

    /// Make sure an event is pending for QP `id`'s earliest deadline.
    fn arm_timer(&mut self, id: u32) {
        arm(&mut self.qps.qps[id as usize], id, &mut self.q);
    }

    /// QP `id`'s timer event; false when it was stale.
    pub(crate) fn qp_timer(&mut self, id: u32, now: Instant) -> bool {
        let q = &mut self.qps.qps[id as usize];
        if q.timer_at == Some(now) {
            q.timer_at = None;
        }
        if q.engine.poll_timeout().is_some_and(|t| t <= now) {
            q.engine.handle_timeout(now);
            self.after_activity(id, now);
            true
        } else {
            self.arm_timer(id);
            false
        }
    }

    /// The next frame of priority `prio` from host `host`'s QPs, round
    /// robin.
    pub(crate) fn nic_pull(&mut self, host: u32, prio: u8, now: Instant) -> Option<Packet> {
        let nic = &mut self.nics[host as usize];
        let n = nic.ready[usize::from(prio)].len();
        for _ in 0..n {
            let id = nic.ready[usize::from(prio)].pop_front()?;
            let q = &mut self.qps.qps[id as usize];
            match q.engine.poll_transmit(now, &nic.mem) {
                Some(tx) => {
                    nic.ready[usize::from(prio)].push_back(id);
                    let payload = tx.payload.len();
                    let cnp = tx.headers.bth.opcode == Opcode::Cnp;
                    let pkt = Packet {
                        headers: tx.headers,
                        payload,
                        wire: frame_len(&tx.headers, payload),
                        src: host,
                        dst: tx.dest.0 as u32,
                        sport: q.sport,
                        prio: if cnp { nic.cnp_priority } else { q.prio },
                        ecn: tx.ecn,
                        ingress: 0,
                    };
                    arm(q, id, &mut self.q);
                    return Some(pkt);
                }
                None => {
                    q.in_ready = false;
                    arm(q, id, &mut self.q);
                }
            }
        }
        None
    }

    /// A frame reached host `host`'s port.
    pub(crate) fn nic_receive(&mut self, host: u32, pkt: Packet, now: Instant) {
        let Some(rate) = self.nics[host as usize].drain else {
            self.deliver(host, pkt, now);
            return;
        };
        let nic = &mut self.nics[host as usize];
        let port = nic.port;
        if nic.rx.bytes + u64::from(pkt.wire) > nic.rx_buffer {
            let p = &mut self.ports[port as usize];
            p.rx_discards += 1;
            p.prio[usize::from(pkt.prio)].rx_discards += 1;
            self.drops += 1;
            return;
        }
        nic.rx.bytes += u64::from(pkt.wire);
        nic.rx.frames.push_back(pkt);
        let over = nic.rx.bytes >= nic.rx_xoff;
        if !nic.rx.draining && !nic.stalled {
            nic.rx.draining = true;
            self.q.schedule(
                now + rate.serialization_time(u64::from(pkt.wire)),
                Ev::Drain(host),
            );
        }
        if over && nic.stall_block & (1 << pkt.prio) == 0 {
            self.send_pfc(port, pkt.prio, true, now, false);
        }
    }

    /// Host `host` finished draining its oldest received frame.
    pub(crate) fn drain(&mut self, host: u32, now: Instant) {
        let nic = &mut self.nics[host as usize];
        if nic.stalled {
            nic.rx.draining = false;
            return;
        }
        let Some(pkt) = nic.rx.frames.pop_front() else {
            nic.rx.draining = false;
            return;
        };
        nic.rx.bytes -= u64::from(pkt.wire);
        let port = nic.port;
        let below = nic.rx.bytes <= nic.rx_xon;
        match (nic.rx.frames.front(), nic.drain) {
            (Some(next), Some(rate)) => {
                let t = now + rate.serialization_time(u64::from(next.wire));
                self.q.schedule(t, Ev::Drain(host));
            }
            _ => nic.rx.draining = false,
        }
        if below {
            nic.stall_block = 0;
            for p in 0..8 {
                if self.ports[port as usize].xoff_since[p].is_some() {
                    self.send_pfc(port, p as u8, false, now, false);
                }
            }
        }
        self.deliver(host, pkt, now);
    }

    /// Hand a received frame to its QP's engine.
    fn deliver(&mut self, host: u32, pkt: Packet, now: Instant) {
        let qpn = pkt.headers.bth.dest_qp.value();
        let id = qpn.wrapping_sub(QPN_BASE);
        let nic = &mut self.nics[host as usize];
        let Some(q) = self.qps.qps.get_mut(id as usize).filter(|q| q.host == host) else {
            let p = &mut self.ports[nic.port as usize];
            p.rx_discards += 1;
            self.drops += 1;
            return;
        };
        match pkt.headers.bth.opcode {
            Opcode::RcWriteFirst | Opcode::RcWriteOnly | Opcode::RcWriteOnlyImm => {
                nic.counters.rx_write_requests += 1
            }
            Opcode::RcReadRequest => nic.counters.rx_read_requests += 1,
            _ => {}
        }
        let rx = Received {
            headers: pkt.headers,
            ecn: pkt.ecn,
            payload: Payload::Len(pkt.payload),
            grh: None,
            src: AddressHandle(u64::from(pkt.src)),
        };
        q.engine.handle_packet(now, &rx, &mut nic.mem);
        self.after_activity(id, now);
    }
}

/// Make sure an event is pending for QP `id`'s earliest deadline.
fn arm(q: &mut SimQp, id: u32, events: &mut EventQueue<Ev>) {
    if let Some(t) = q.engine.poll_timeout() {
        if q.timer_at.map_or(true, |x| t < x) {
            q.timer_at = Some(t);
            events.schedule(t, Ev::QpTimer(id));
        }
    }
}
