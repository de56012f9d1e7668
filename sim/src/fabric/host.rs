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

use roce::cc::{IntRecord, INT_HEADER_BYTES};
use roce::time::{Duration, Instant};
use roce::transport::{
    AddressHandle, Payload, Received, RecvWr, SendOp, SendWr, Sge, SgeList, Transmit, WcStatus,
};
use roce::wire::{Opcode, Psn};

use super::event::{Ev, NONE};
use super::nic::{lane, message_len, wr_len, HostSide, QpGate, SimQp, POST_AHEAD, QPN_BASE};
use super::packet::{frame_len, Packet, NO_INT};
use super::world::World;
use crate::engine::EventQueue;
use crate::workload::FlowOp;

impl World<'_> {
    /// A flow starts: post its first messages.
    pub(crate) fn flow_start(&mut self, id: u32, now: Instant) {
        self.flow_state[id as usize].posted_at = Some(now);
        let f = &self.flows[id as usize];
        if let Some(l) = f.local {
            // In line behind the copies already on its resource.
            let free = &mut self.local_free[l.resource as usize];
            let begin = (*free).max(now);
            *free = begin + l.rate.serialization_time(f.size);
            let at = *free + l.latency;
            self.q.schedule(at, Ev::LocalDone(id));
            return;
        }
        if let Some(d) = f.post.and_then(|p| p.deadline) {
            // Look at the deadline when it comes, whatever else happens.
            self.q.schedule(now + d, Ev::FlowPost(id));
        }
        if f.op == FlowOp::Send {
            let qp = self.flow_state[id as usize].qp;
            self.post_recvs(id, qp ^ 1);
        }
        let qp = self.flow_state[id as usize].qp;
        self.post_more(id, now);
        self.after_activity(qp, now);
    }

    /// Local copy `id` completed.
    pub(crate) fn local_done(&mut self, id: u32, now: Instant) {
        let st = &mut self.flow_state[id as usize];
        st.done = st.msgs;
        st.posted = st.msgs;
        st.bytes_acked = self.flows[id as usize].size;
        st.finish = Some(now);
        self.flows_open -= 1;
        self.release_dependents(id, now);
    }

    /// The application of flow `id` (with a posting loop) sees what
    /// completed so far, or a landed message of its ping-pong partner:
    /// post what it may.
    pub(crate) fn flow_post(&mut self, id: u32, now: Instant) {
        let f = &self.flows[id as usize];
        let st = &mut self.flow_state[id as usize];
        if st.posted_at.is_none() || st.failed || st.finish.is_some() {
            return;
        }
        if let Some(lp) = f.post {
            let m = u64::from(lp.moderation.max(1));
            let seen = if st.done == st.posted {
                st.done
            } else {
                st.done / m * m
            };
            st.seen = st.seen.max(seen);
        }
        let qp = st.qp;
        self.post_more(id, now);
        if f.op == FlowOp::Send {
            self.post_recvs(id, qp ^ 1);
        }
        self.after_activity(qp, now);
    }

    /// Keep up to `POST_AHEAD` receive WQEs ahead of a SEND flow.
    fn post_recvs(&mut self, id: u32, responder: u32) {
        let f = &self.flows[id as usize];
        let st = &mut self.flow_state[id as usize];
        let q = &mut self.qps.qps[responder as usize];
        let lkey = self.nics[q.host as usize].reg.lkey;
        let ahead = f
            .post
            .map_or(POST_AHEAD, |p| POST_AHEAD.max(u64::from(p.depth)));
        while st.recvs < st.msgs && st.recvs < st.done + ahead {
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

    /// Post the flow's next messages: up to `POST_AHEAD` outstanding, or
    /// as its posting loop allows (depth over what the application saw
    /// complete, the ping-pong partner's landed messages, the deadline).
    fn post_more(&mut self, id: u32, now: Instant) {
        let f = &self.flows[id as usize];
        let lp = f.post;
        let partner_landed = lp
            .and_then(|p| p.partner)
            .map(|p| self.flow_state[p as usize].landed);
        if let Some(d) = lp.and_then(|p| p.deadline) {
            let st = &self.flow_state[id as usize];
            if st.posted < st.msgs && st.posted_at.is_some_and(|t0| now >= t0 + d) {
                self.stop_posting(id, now);
                return;
            }
        }
        let st = &mut self.flow_state[id as usize];
        let q = &mut self.qps.qps[st.qp as usize];
        let lkey = self.nics[q.host as usize].reg.lkey;
        let rkey = self.nics[q.peer as usize].reg.rkey;
        let host = self.nics[q.host as usize].host_side.as_deref().map(|h| h.p);
        while st.posted < st.msgs {
            let room = match lp {
                None => st.posted < st.done + POST_AHEAD,
                Some(p) => st.posted < st.seen + u64::from(p.depth),
            };
            if !room {
                break;
            }
            if let (Some(p), Some(landed)) = (lp, partner_landed) {
                if landed < st.posted + u64::from(!p.lead) {
                    break;
                }
            }
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
            let idle = q.wrs.is_empty();
            if q.engine.post_send(wr).is_err() {
                // The send queue is full of other flows' work: wait for
                // it to drain (after_activity posts starved flows). An
                // application's posting loop instead posts again when it
                // sees its next completion.
                if !st.starved && lp.is_none() {
                    st.starved = true;
                    q.starved.push_back(id);
                }
                break;
            }
            if let (Some(g), Some(h)) = (q.gate.as_deref_mut(), host) {
                // The doorbell, then the WQE fetch unless it came with it.
                let fetch = if h.blueflame && idle {
                    Duration::ZERO
                } else {
                    h.read_latency
                };
                let inline = lp.is_some_and(|p| p.inline);
                g.wqes.push_back((now + h.doorbell + fetch, inline));
            }
            q.wrs.push_back(wr_id);
            if lp.is_some_and(|p| p.record_posts) {
                st.post_times.push(now);
            }
            st.posted += 1;
        }
    }

    /// Flow `id` passed its deadline: it posts nothing more and ends when
    /// what it posted completes; its ping-pong partner stops at the same
    /// count.
    fn stop_posting(&mut self, id: u32, now: Instant) {
        let st = &mut self.flow_state[id as usize];
        st.msgs = st.posted;
        st.cut = Some((now, st.done));
        let posted = st.posted;
        self.end_if_done(id, now);
        let pacer = self.paced_by[id as usize];
        if pacer != NONE {
            let ps = &mut self.flow_state[pacer as usize];
            ps.msgs = ps.msgs.min(posted.max(ps.posted));
            self.end_if_done(pacer, now);
        }
    }

    /// Flow `id` has completed everything it will post: it finishes now.
    fn end_if_done(&mut self, id: u32, now: Instant) {
        let st = &mut self.flow_state[id as usize];
        if st.done == st.msgs && st.finish.is_none() && !st.failed && st.posted_at.is_some() {
            st.finish = Some(now);
            self.flows_open -= 1;
            self.release_dependents(id, now);
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
                } else if let Some(lp) = f.post {
                    // The application sees every `moderation`-th
                    // completion (and the last it posted), once its CQE
                    // is in host memory.
                    let m = u64::from(lp.moderation.max(1));
                    if st.done % m == 0 || st.done == st.posted {
                        let host = self.qps.qps[id as usize].host;
                        match self.nics[host as usize].host_side.as_deref() {
                            Some(h) => {
                                let at = now + cqe_delay(h);
                                self.q.schedule(at, Ev::FlowPost(fid));
                            }
                            None => {
                                st.seen = st.done;
                                self.post_more(fid, now);
                                if f.op == FlowOp::Send {
                                    self.post_recvs(fid, id ^ 1);
                                }
                            }
                        }
                    }
                } else {
                    self.post_more(fid, now);
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
        // Flows that found the send queue full, in order, while it has
        // room.
        while self.qps.qps[id as usize].wrs.len() < POST_AHEAD as usize {
            let Some(fid) = self.qps.qps[id as usize].starved.pop_front() else {
                break;
            };
            self.flow_state[fid as usize].starved = false;
            self.post_more(fid, now);
            if self.flows[fid as usize].op == FlowOp::Send {
                // A SEND needs its receive posted at the responder.
                self.post_recvs(fid, id ^ 1);
            }
            if self.flow_state[fid as usize].starved {
                // Refused again (full, or the QP failed): later.
                break;
            }
        }
        let q = &mut self.qps.qps[id as usize];
        let host = q.host;
        if !q.in_ready {
            q.in_ready = true;
            self.nics[host as usize].ready[usize::from(q.prio)].push_back(id);
        }
        self.arm_timer(id);
        self.kick_nic(host, now);
    }

    /// Start transmitting on every idle port of host `host`'s NIC.
    pub(crate) fn kick_nic(&mut self, host: u32, now: Instant) {
        let nic = &self.nics[host as usize];
        let (first, n) = (nic.port, u32::from(nic.ports));
        for p in first..first + n.max(1) {
            self.kick(p, now);
        }
    }

    /// Bytes of flow `id` the receiver acknowledged: its completed
    /// messages, plus the acknowledged packets of the message in progress
    /// at the head of its queue pair (a flow cut off by the duration still
    /// shows what got through). Payload bytes, no headers.
    pub(crate) fn delivered(&self, id: u32) -> u64 {
        let st = &self.flow_state[id as usize];
        if st.failed || st.finish.is_some() || st.qp == NONE {
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
    /// robin, with the NIC port (local number) it leaves by. With a host
    /// model, a frame whose payload is not in the NIC yet is held by its
    /// QP (out of the ring) until it is.
    ///
    /// `port` (local number) asks: on a NIC of several ports, a QP whose
    /// frames cannot leave by it ([`SimQp::lane_ok`]) stays in the ring
    /// for another port.
    pub(crate) fn nic_pull(
        &mut self,
        host: u32,
        prio: u8,
        port: u16,
        now: Instant,
    ) -> Option<(Packet, u16)> {
        let nic = &mut self.nics[host as usize];
        let n = nic.ready[usize::from(prio)].len();
        let multi = nic.ports > 1;
        for _ in 0..n {
            let id = nic.ready[usize::from(prio)].pop_front()?;
            let q = &mut self.qps.qps[id as usize];
            if multi && !q.lane_ok(port, nic.ports, now) {
                nic.ready[usize::from(prio)].push_back(id);
                continue;
            }
            if let Some(g) = q.gate.as_deref_mut() {
                if let Some((pkt, at)) = g.staged {
                    if at <= now {
                        g.staged = None;
                        nic.ready[usize::from(prio)].push_back(id);
                        let k = nic.port_of(&pkt);
                        return Some((pkt, k));
                    }
                    // Back in the ring early: `HostReady` returns it.
                    q.in_ready = false;
                    continue;
                }
            }
            let mut tx = Transmit::EMPTY;
            let lane = lane(port, nic.ports);
            let responses = q.engine.pending_responses();
            match q.engine.poll_transmit_on(now, &nic.mem, lane, &mut tx) {
                true => {
                    let payload = tx.payload.len();
                    let cnp = tx.headers.bth.opcode == Opcode::Cnp;
                    let (k, sport) = if cnp {
                        (q.rx_port.min(nic.ports.saturating_sub(1)), q.sport)
                    } else {
                        q.egress(tx.path, nic.ports)
                    };
                    if q.engine.pending_responses() < responses {
                        // That response is sent in full: the next one's
                        // port is next.
                        if let Some(r) = q.resp_ports.as_deref_mut() {
                            r.pop_front();
                        }
                    }
                    let mut pkt = Packet {
                        headers: tx.headers,
                        payload,
                        wire: frame_len(&tx.headers, payload),
                        src: host,
                        dst: tx.dest.0 as u32,
                        sport,
                        prio: if cnp { nic.cnp_priority } else { q.prio },
                        ecn: tx.ecn,
                        // At a NIC: the port it leaves by (a switch
                        // rewrites it on arrival).
                        ingress: k,
                        int: NO_INT,
                        trimmed: false,
                    };
                    if q.carries_int() {
                        // HPCC: requests collect the switches' hops, ACKs
                        // echo the last request's record; both carry the
                        // INT header.
                        let op = tx.headers.bth.opcode;
                        let rec = if op.is_request() {
                            Some(IntRecord::default())
                        } else if op == Opcode::RcAcknowledge {
                            q.echo.as_deref().copied()
                        } else {
                            None
                        };
                        if let Some(r) = rec {
                            pkt.int = self.pkts.new_int(r);
                            pkt.wire += INT_HEADER_BYTES;
                        }
                    }
                    arm(q, id, &mut self.q);
                    if let (Some(hs), Some(g)) =
                        (nic.host_side.as_deref_mut(), q.gate.as_deref_mut())
                    {
                        let at = gate_time(hs, g, &pkt, q.pmtu, now);
                        if at > now {
                            g.staged = Some((pkt, at));
                            q.in_ready = false;
                            self.q.schedule(at, Ev::HostReady(id));
                            continue;
                        }
                    }
                    nic.ready[usize::from(prio)].push_back(id);
                    return Some((pkt, k));
                }
                false => {
                    q.in_ready = false;
                    arm(q, id, &mut self.q);
                }
            }
        }
        None
    }

    /// QP `id`'s held frame has its payload in the NIC: back in the ring.
    pub(crate) fn host_ready(&mut self, id: u32, now: Instant) {
        let q = &mut self.qps.qps[id as usize];
        if !q
            .gate
            .as_deref()
            .and_then(|g| g.staged)
            .is_some_and(|(_, at)| at <= now)
        {
            return;
        }
        let host = q.host;
        if !q.in_ready {
            q.in_ready = true;
            self.nics[host as usize].ready[usize::from(q.prio)].push_back(id);
        }
        self.kick_nic(host, now);
    }

    /// A frame reached host `host`'s port.
    pub(crate) fn nic_receive(&mut self, host: u32, pkt: Packet, now: Instant) {
        let nic = &mut self.nics[host as usize];
        let port = nic.port;
        let ib = self.fc_period.is_some();
        if nic.drain.is_none() {
            match nic.host_side.as_deref_mut() {
                None => {
                    self.deliver(host, pkt, now);
                    return;
                }
                Some(hs) => {
                    // The payload's DMA write keeps up with the wire: no
                    // queue builds.
                    let w = hs.p.write_time(u64::from(pkt.payload));
                    let wire = self.ports[port as usize]
                        .rate
                        .serialization_time(u64::from(pkt.wire));
                    if nic.rx.frames.is_empty() && (pkt.payload == 0 || w <= wire) {
                        if pkt.payload > 0 {
                            hs.write(u64::from(pkt.payload), now);
                        }
                        self.deliver(host, pkt, now);
                        return;
                    }
                }
            }
        }
        // InfiniBand's credits never let more in than the buffer holds.
        if !ib && nic.rx.bytes + u64::from(pkt.wire) > nic.rx_buffer {
            self.pkts.free_int(pkt.int);
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
            let t = drain_time(nic, &pkt, now);
            self.q.schedule(now + t, Ev::Drain(host));
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
        match nic.rx.frames.front().copied() {
            Some(next) => {
                let t = drain_time(nic, &next, now);
                self.q.schedule(now + t, Ev::Drain(host));
            }
            None => nic.rx.draining = false,
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

    /// Hand a received frame to its QP's engine. On InfiniBand the
    /// frame's blocks leave the port's buffer here, as the host takes it.
    fn deliver(&mut self, host: u32, pkt: Packet, now: Instant) {
        if self.fc_period.is_some() {
            let rx = self.nics[host as usize].port + u32::from(pkt.ingress);
            self.ib_freed(rx, pkt.prio, pkt.wire, now);
        }
        let int = self.pkts.take_int(pkt.int);
        let qpn = pkt.headers.bth.dest_qp.value();
        let id = qpn.wrapping_sub(QPN_BASE);
        let nic = &mut self.nics[host as usize];
        let Some(q) = self.qps.qps.get_mut(id as usize).filter(|q| q.host == host) else {
            let p = &mut self.ports[nic.port as usize];
            p.rx_discards += 1;
            self.drops += 1;
            return;
        };
        let op = pkt.headers.bth.opcode;
        if op.is_request() {
            q.rx_port = pkt.ingress;
        }
        let responses = q.engine.pending_responses();
        match op {
            _ if pkt.trimmed => {}
            Opcode::RcWriteFirst | Opcode::RcWriteOnly | Opcode::RcWriteOnlyImm => {
                nic.counters.rx_write_requests += 1
            }
            Opcode::RcReadRequest => {
                nic.counters.rx_read_requests += 1;
                if let (Some(g), Some(hs)) = (q.gate.as_deref_mut(), nic.host_side.as_deref()) {
                    g.read_req_at = now + hs.p.nic_latency;
                }
            }
            _ => {}
        }
        let rx = Received {
            headers: pkt.headers,
            ecn: pkt.ecn,
            payload: Payload::Len(pkt.payload),
            grh: None,
            src: AddressHandle(u64::from(pkt.src)),
        };
        let before = q.engine.expected_psn();
        if pkt.trimmed {
            q.engine.handle_trimmed(&rx);
        } else {
            q.engine.handle_packet(now, &rx, &mut nic.mem);
        }
        if nic.ports > 1 && q.engine.config().multipath.is_some() {
            // Each response this request queued leaves by the port it
            // came in on (one coalesced into a queued ACK keeps that
            // ACK's).
            let added = q.engine.pending_responses().saturating_sub(responses);
            if added > 0 {
                let r = q.resp_ports.get_or_insert_with(Box::default);
                r.extend(std::iter::repeat(pkt.ingress).take(added));
            }
        }
        let psn = pkt.headers.bth.psn;
        if let Some(rec) = int {
            if op.is_request() {
                q.echo = Some(Box::new(rec));
            } else if op == Opcode::RcAcknowledge {
                q.engine.on_telemetry(psn, &rec);
            }
        }
        let after = q.engine.expected_psn();
        let landed = ends_request(op) && after != before && after == psn.next();
        // A request that filled a gap in a reorder window also completed
        // the held ones behind it: every message ending up to `after`.
        let drained = after != before
            && after.is_after(psn.next())
            && op != Opcode::RcReadRequest
            && self.qps.qps[id as usize].engine.config().reorder_window > 0;
        self.after_activity(id, now);
        if self.paced_any || self.landing_any {
            if landed {
                self.landed(id ^ 1, psn, host, now);
            } else if drained {
                let flows = self.flows;
                let ends = self.qps.qps[(id ^ 1) as usize].wr_ends_within(
                    psn,
                    after.distance_from(psn),
                    |w| wr_len(flows, w),
                );
                for last in ends {
                    self.landed(id ^ 1, last, host, now);
                }
            }
        }
    }

    /// The message of requester QP `req` ending at `psn` landed in the
    /// memory of host `host`: count it, and let the ping-pong flow it
    /// paces post once the CPU can see it.
    fn landed(&mut self, req: u32, psn: Psn, host: u32, now: Instant) {
        let flows = self.flows;
        let Some(wr) = self.qps.qps[req as usize].wr_ending_at(psn, |w| wr_len(flows, w)) else {
            return;
        };
        let fid = (wr >> 32) as usize;
        let Some(st) = self.flow_state.get_mut(fid) else {
            return;
        };
        st.landed += 1;
        if flows[fid].landing && st.landed == st.msgs {
            self.release_dependents(fid as u32, now);
        }
        let pacer = self.paced_by[fid];
        if pacer == NONE {
            return;
        }
        let at = match self.nics[host as usize].host_side.as_deref() {
            Some(h) => {
                let mut at = now.max(h.up_free) + h.p.nic_latency + h.p.write_latency;
                if flows[fid].op == FlowOp::Send {
                    at +=
                        h.p.write_time(u64::from(super::super::hostmodel::CQE_BYTES));
                }
                at
            }
            None => now,
        };
        self.q.schedule(at, Ev::FlowPost(pacer));
    }
}

/// A request packet that ends a message (its last or only packet).
fn ends_request(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::RcWriteLast
            | Opcode::RcWriteLastImm
            | Opcode::RcWriteOnly
            | Opcode::RcWriteOnlyImm
            | Opcode::RcSendLast
            | Opcode::RcSendLastImm
            | Opcode::RcSendOnly
            | Opcode::RcSendOnlyImm
            | Opcode::RcSendLastInv
            | Opcode::RcSendOnlyInv
    )
}

/// How long the application takes to see a completion: the ACK through
/// the NIC's receive pipeline, the CQE's DMA write, the write's latency.
fn cqe_delay(h: &HostSide) -> Duration {
    h.p.nic_latency + h.p.write_time(u64::from(crate::hostmodel::CQE_BYTES)) + h.p.write_latency
}

/// How long the NIC takes to drain `pkt` into the host: at its drain
/// rate, and no faster than the payload's DMA write (reserving the
/// NIC-to-host direction).
fn drain_time(nic: &mut super::nic::Nic, pkt: &Packet, now: Instant) -> Duration {
    let mut d = nic.drain.map_or(Duration::ZERO, |r| {
        r.serialization_time(u64::from(pkt.wire))
    });
    if let Some(hs) = nic.host_side.as_deref_mut() {
        if pkt.payload > 0 {
            let w = hs.p.write_time(u64::from(pkt.payload));
            d = d.max(w);
            hs.up_free = hs.up_free.max(now) + w;
        }
    }
    d
}

/// When frame `pkt`, just pulled from QP `g`'s engine at `now`, can leave:
/// a new message waits for its WQE in the NIC and for the QP's and the
/// NIC's message rates, then the NIC's pipeline; a payload not inline
/// waits for its DMA read (see [`crate::hostmodel`]).
fn gate_time(hs: &mut HostSide, g: &mut QpGate, pkt: &Packet, pmtu: u32, now: Instant) -> Instant {
    let p = hs.p;
    let op = pkt.headers.bth.opcode;
    let psn = pkt.headers.bth.psn;
    let fresh = !psn.is_before(g.next_new);
    if fresh {
        g.next_new = match (op, pkt.headers.reth) {
            (Opcode::RcReadRequest, Some(r)) => psn.add(r.dma_len.div_ceil(pmtu.max(1)).max(1)),
            _ => psn.next(),
        };
    }
    let mut at = now;
    match op {
        Opcode::RcSendFirst
        | Opcode::RcSendOnly
        | Opcode::RcSendOnlyImm
        | Opcode::RcSendOnlyInv
        | Opcode::RcWriteFirst
        | Opcode::RcWriteOnly
        | Opcode::RcWriteOnlyImm
        | Opcode::RcReadRequest
        | Opcode::RcCompareSwap
        | Opcode::RcFetchAdd
            if fresh =>
        {
            let (wqe, inline) = g.wqes.pop_front().unwrap_or((now, false));
            let m = wqe.max(g.msg_next).max(hs.msg_next);
            g.msg_next = m + p.qp_gap();
            hs.msg_next = m + p.nic_gap();
            g.inline = inline;
            g.data_from = m + p.read_latency;
            at = at.max(m + p.nic_latency);
        }
        Opcode::RcReadResponseFirst | Opcode::RcReadResponseOnly => {
            let m = g.read_req_at.max(hs.msg_next);
            hs.msg_next = m + p.nic_gap();
            g.inline = false;
            g.data_from = m + p.read_latency;
            at = at.max(m + p.nic_latency);
        }
        _ => {}
    }
    let data = matches!(
        op,
        Opcode::RcSendFirst
            | Opcode::RcSendMiddle
            | Opcode::RcSendLast
            | Opcode::RcSendLastImm
            | Opcode::RcSendLastInv
            | Opcode::RcSendOnly
            | Opcode::RcSendOnlyImm
            | Opcode::RcSendOnlyInv
            | Opcode::RcWriteFirst
            | Opcode::RcWriteMiddle
            | Opcode::RcWriteLast
            | Opcode::RcWriteLastImm
            | Opcode::RcWriteOnly
            | Opcode::RcWriteOnlyImm
            | Opcode::RcReadResponseFirst
            | Opcode::RcReadResponseMiddle
            | Opcode::RcReadResponseLast
            | Opcode::RcReadResponseOnly
    );
    if data && pkt.payload > 0 && !g.inline {
        let bytes = u64::from(pkt.payload);
        // The direction does not bank idle time: at most one payload's
        // worth of prefetch before now.
        let floor = now
            .checked_sub(p.read_data_time(bytes))
            .unwrap_or(Instant::ZERO);
        at = at.max(hs.fetch(bytes, g.data_from, floor));
    }
    at
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
