//! The fabric: ports and links, switches, host NICs, and the event loop
//! that moves frames between them.
//!
//! Model summary (units: ps, bytes, bits/s):
//!
//! * **Links** are full duplex; each direction serialises one frame at a
//!   time at the link rate, then the frame arrives whole at the peer after
//!   the propagation delay (store and forward). Preamble and inter-frame
//!   gap are not modelled.
//! * **Ports** have 8 priority queues, strict or DWRR, and PFC state (see
//!   [`port`]). A PFC frame is 64 B, goes after the frame in flight and
//!   before queued data, and takes effect at the peer after propagation
//!   plus the configured response time.
//! * **Switches** route by destination host over the equal-cost next hops
//!   of [`crate::topology::Routes`], by default picking one per flow with
//!   [`crate::topology::ecmp::ecmp_select`] on the 5-tuple (host addresses
//!   from [`crate::topology::host_ip`]; the UDP source port carries QP
//!   entropy, from the two QPNs as the Linux stack derives it); or per
//!   frame (spraying, flowlets, adaptive routing:
//!   [`crate::config::LoadBalancingConfig`]). Buffering, PFC and
//!   drops follow [`switch::Mmu`]; ECN marking is RED on the egress queue
//!   when a frame leaves. Within a priority the egress queue is one FIFO:
//!   fairness between ingress ports comes from per-ingress PFC accounting.
//! * **NICs** host queue pairs driven by the shared transport engine (see
//!   [`nic`]); they obey PAUSE per priority, can drain received frames at
//!   a configured rate and then send PAUSE themselves.
//! * **Watchdogs** ([`watchdog`]): the switches' PFC storm watchdog and
//!   the NICs' PAUSE storm prevention; **deadlocks** ([`deadlock`]) are
//!   found live from the buffer dependencies of paused queues.
//! * **Faults** in force are [`impairments`]: wrappers on link directions
//!   and timed actions.
//!
//! Files, bottom up (each uses only files listed before it):
//!
//! 1. Plain values: `event` (the event type, the `NONE` marker),
//!    [`packet`], [`switch`] (the MMU), [`impairments`] (fault wrappers
//!    and actions in force), `settings` (each element's settings).
//! 2. The state of elements: [`port`], [`nic`] (NICs, queue pairs,
//!    flows), `monitors` (watchdog and deadlock detector), `capture`.
//! 3. `world`: the [`World`] struct, which holds them.
//! 4. Handlers, `impl World` blocks, one job each: `build` (checks and
//!    construction), `host` (NICs at work), `actions` (faults and timed
//!    overrides), [`watchdog`], [`deadlock`].
//! 5. This file: the event loop, forwarding, PFC signalling and the
//!    results.

mod actions;
mod build;
mod capture;
pub mod credits;
pub mod deadlock;
mod event;
mod fluid;
mod host;
mod ib;
pub mod impairments;
mod monitors;
pub mod nic;
pub mod packet;
pub mod port;
mod settings;
pub mod switch;
pub mod watchdog;
mod world;

use roce::cc::IntHop;
use roce::time::{Duration, Instant, Rate};
use roce::wire::Ecn;

use crate::config::SchedulerConfig;
use crate::options::{Progress, SimError};
use crate::results::{
    percentile, EcnSetting, FlowRecord, GroupRecord, IbPortRecord, NicRecord, PauseSeries,
    PerftestRecord, PortRecord, RunResult, RunStats, Summary,
};
use crate::topology::ecmp::{ecmp_index, ecmp_select, FiveTuple};
use crate::topology::{host_ip, NodeId};
use crate::workload::FlowSpec;

use event::{Ev, NONE};
use impairments::Verdict;
use packet::{NO_INT, PFC_FRAME};
use rand::Rng;
pub(crate) use settings::switch_mmu;
use switch::{Admit, PfcChange};
use world::Balancer;
pub use world::World;

impl World<'_> {
    /// Where flow `id`'s dependents lie in `dependents`.
    fn dependents_of(&self, id: u32) -> std::ops::Range<usize> {
        self.dependent_start[id as usize] as usize..self.dependent_start[id as usize + 1] as usize
    }

    /// Flow `id` completed at `now`: post every flow that was waiting only
    /// for it, at the later of `now` and its own start.
    pub(crate) fn release_dependents(&mut self, id: u32, now: Instant) {
        let me = &mut self.flow_state[id as usize];
        if me.released {
            return;
        }
        me.released = true;
        for k in self.dependents_of(id) {
            let d = self.dependents[k];
            let st = &mut self.flow_state[d as usize];
            st.waiting -= 1;
            if st.waiting == 0 && !st.blocked {
                let f = &self.flows[d as usize];
                let at = now.max(f.start) + f.delay;
                self.q.schedule(at, Ev::FlowStart(d));
            }
        }
    }

    /// Flow `id` failed: every flow waiting for it, directly or not, can
    /// never be posted; they stop counting as open.
    pub(crate) fn block_dependents(&mut self, id: u32) {
        if self.flow_state[id as usize].released {
            // Its data landed and its waiters went: nothing to block.
            return;
        }
        let mut stack = vec![id];
        while let Some(f) = stack.pop() {
            for k in self.dependents_of(f) {
                let d = self.dependents[k];
                let st = &mut self.flow_state[d as usize];
                if !st.blocked {
                    st.blocked = true;
                    self.flows_open -= 1;
                    stack.push(d);
                }
            }
        }
    }

    /// Run the event loop and collect the results.
    pub fn run(mut self) -> Result<(RunResult, RunStats), SimError> {
        let wall = std::time::Instant::now();
        let end = self.opts.duration.map(|d| Instant::ZERO + d);
        let mut last_check = 0u64;
        loop {
            let Some(t) = self.q.peek_time() else {
                self.stop_reason = "idle";
                break;
            };
            if end.is_some_and(|e| t > e) {
                self.stop_reason = "duration";
                break;
            }
            if self.q.processed() >= self.opts.max_events {
                self.stop_reason = "event_budget";
                break;
            }
            if self.flows_open == 0 && !self.flows.is_empty() {
                // Every flow finished: what is left are idle timers
                // (congestion-control recovery, stale deadlines), which
                // change nothing a result reports. A duration is only an
                // upper bound.
                self.stop_reason = "flows_done";
                break;
            }
            let Some((now, ev)) = self.q.pop() else { break };
            if self.dispatch(now, ev) {
                self.last_active = now;
            }
            if self.halt {
                self.stop_reason = "deadlock";
                break;
            }
            if self.q.processed() & ((1 << 14) - 1) == 0 && self.opts.stopped() {
                self.stop_reason = "interrupted";
                break;
            }
            if let Some(observe) = &self.opts.progress {
                if self.q.processed() - last_check >= 1 << 18 {
                    last_check = self.q.processed();
                    let total = self.flows.len();
                    observe(&Progress {
                        variant: &self.opts.variant,
                        wall: wall.elapsed(),
                        now,
                        end,
                        flows_done: total - self.flows_open,
                        flows_total: total,
                        events: self.q.processed(),
                    });
                }
            }
        }
        // An idle network ends at its last real activity, not at a stale
        // timer that found nothing to do.
        let now = match (self.stop_reason, end) {
            ("duration", Some(e)) => e,
            ("idle", _) | ("flows_done", _) => self.last_active,
            _ => self.q.now(),
        };
        let run_secs = wall.elapsed().as_secs_f64();
        let events = self.q.processed();
        let result = self.collect(now);
        let stats = self.run_stats(run_secs, events, now);
        Ok((result, stats))
    }

    /// Wall-clock statistics of a run whose loop took `run_secs` for
    /// `events` events and ended at simulated time `now`.
    fn run_stats(&self, run_secs: f64, events: u64, now: Instant) -> RunStats {
        RunStats {
            setup_secs: self.setup_secs,
            run_secs,
            events,
            events_per_sec: events as f64 / run_secs.max(1e-9),
            sim_secs_per_wall_sec: now.since_zero().as_secs_f64() / run_secs.max(1e-9),
            peak_rss_bytes: peak_rss(),
        }
    }

    /// Run one event; false when it found nothing to do (a stale timer or
    /// a sample). Inlined into the loop, its one caller: the handlers of
    /// faults, watchdogs, deadlock checks and samplers stay out of line
    /// (`#[cold]`), so the healthy path costs what it did before them.
    #[inline(always)]
    fn dispatch(&mut self, now: Instant, ev: Ev) -> bool {
        match ev {
            Ev::TxDone(p) => {
                self.ports[p as usize].busy = false;
                self.start_next(p, now);
            }
            Ev::Arrive(p) => self.arrive(p, now),
            Ev::Pfc { port, prio, quanta } => {
                let pt = &mut self.ports[port as usize];
                if pt.pfc_mask & (1 << prio) == 0 {
                    // PFC is off for this priority here: the frame is
                    // counted and ignored.
                    pt.prio[usize::from(prio)].rx_pause += 1;
                    return false;
                }
                pt.apply_pause(now, prio, quanta);
                if quanta > 0 && self.wd.is_some() {
                    self.wd_arm(port, prio, now);
                }
                self.kick(port, now);
            }
            Ev::Wake(p) => {
                let port = &mut self.ports[p as usize];
                if port.wake_at != Some(now) {
                    return false;
                }
                port.wake_at = None;
                let was_busy = port.busy;
                self.kick(p, now);
                return !was_busy && self.ports[p as usize].busy;
            }
            Ev::Refresh { port, prio, gen } => {
                let pt = &self.ports[port as usize];
                if pt.xoff_gen[usize::from(prio)] != gen
                    || pt.xoff_since[usize::from(prio)].is_none()
                {
                    return false;
                }
                self.send_pfc(port, prio, true, now, true);
            }
            Ev::FlowStart(f) => self.flow_start(f, now),
            Ev::LocalDone(f) => self.local_done(f, now),
            Ev::QpTimer(qp) => return self.qp_timer(qp, now),
            Ev::HostReady(qp) => self.host_ready(qp, now),
            Ev::FlowPost(f) => self.flow_post(f, now),
            Ev::Drain(nic) => self.drain(nic, now),
            Ev::Action(a) => self.run_action(a, now),
            // Fluid mode's own events; the packet model never schedules them.
            Ev::FluidLand(_) | Ev::FluidDone(_) => return false,
            Ev::FcpSend(rx) => self.fcp_send(rx, now),
            Ev::FcpArrive(p) => self.fcp_arrive(p, now),
            Ev::Sample => {
                self.sample_queues(now);
                return false;
            }
            Ev::FlowRates => {
                self.sample_flow_rates(now);
                return false;
            }
            Ev::WdPoll => {
                self.wd_poll(now);
                return false;
            }
            Ev::DeadlockCheck => {
                self.deadlock_check(now);
                return false;
            }
            Ev::NicStall {
                port,
                prio,
                gen,
                critical,
            } => return self.nic_stall(port, prio, gen, critical, now),
        }
        true
    }

    /// Start transmitting on `p` if it is idle.
    pub(crate) fn kick(&mut self, p: u32, now: Instant) {
        if !self.ports[p as usize].busy {
            self.start_next(p, now);
        }
    }

    /// Pick and serialise the next frame of idle port `p`.
    fn start_next(&mut self, p: u32, now: Instant) {
        let pi = p as usize;
        if let Some((prio, quanta)) = self.ports[pi].ctrl.pop_front() {
            let port = &mut self.ports[pi];
            if port.impairments.as_ref().is_some_and(|f| f.down) {
                // Nothing crosses a down link, PFC frames included.
                return self.start_next(p, now);
            }
            let ser = port.rate.serialization_time(u64::from(PFC_FRAME));
            port.busy = true;
            port.frames_sent += 1;
            let peer = port.peer;
            let arrive = now + ser + port.delay + self.pfc_response;
            if let Some(t) = self.taps.as_deref_mut() {
                t.pfc(p, prio, quanta, now);
            }
            self.q.schedule(now + ser, Ev::TxDone(p));
            self.q.schedule(
                arrive,
                Ev::Pfc {
                    port: peer,
                    prio,
                    quanta,
                },
            );
            return;
        }
        let node = self.ports[pi].node;
        let host = self.host_of_node[node as usize];
        // NIC priorities whose ready QPs had nothing for this port.
        let mut dry = 0u8;
        let ib_fabric = self.fc_period.is_some();
        loop {
            let port = &self.ports[pi];
            let mut have = port.queued_mask();
            if host != NONE {
                have |= self.nics[host as usize].ready_mask() & !dry;
            }
            if have == 0 {
                return;
            }
            let paused = port.paused_mask(now) & !port.wd_ignore;
            let starved = if ib_fabric {
                // A lane goes when its head frame fits the peer's credits;
                // a NIC pulls a frame only for a lane with some credit.
                let queued = port.queued_mask();
                self.ib_starved(pi) | (self.ib_empty(pi) & !queued)
            } else {
                0
            };
            let eligible = have & !paused & !starved;
            if starved != 0 && eligible == 0 {
                // Frames wait for credits, which an FCP brings.
                self.ib_wait(pi, now);
                return;
            }
            if eligible == 0 {
                // Everything waiting is paused: wake when the first pause
                // expires (a refresh or XON may come earlier).
                let mut t = Instant::MAX;
                for pr in 0..8 {
                    if have & paused & (1 << pr) != 0 {
                        t = t.min(port.paused_until[pr]);
                    }
                }
                if self.ports[pi].wake_at.map_or(true, |w| w > t) {
                    self.ports[pi].wake_at = Some(t);
                    self.q.schedule(t, Ev::Wake(p));
                }
                return;
            }
            let prio = self.pick(pi, eligible);
            let h = if !self.ports[pi].queues[prio].is_empty() {
                self.dequeue(pi, prio, now)
            } else {
                let local = self.ports[pi].local;
                match self.nic_pull(host, prio as u8, local, now) {
                    Some((pkt, k)) => {
                        let out = self.nics[host as usize].port + u32::from(k);
                        let wire = pkt.wire;
                        let h = self.pkts.put(pkt);
                        let port = &self.ports[pi];
                        if out != p
                            || (ib_fabric
                                && port
                                    .ib
                                    .as_deref()
                                    .is_some_and(|ib| !ib.fits(prio, credits::blocks(wire))))
                        {
                            // Another port's (another plane's) frame: in
                            // its queue, and that port started.
                            let o = &mut self.ports[out as usize];
                            o.qbytes[prio] += u64::from(wire);
                            self.pkts.push_back(&mut o.queues[prio], h);
                            self.kick(out, now);
                            continue;
                        }
                        h
                    }
                    None => {
                        dry |= 1 << prio;
                        continue;
                    }
                }
            };
            self.transmit(p, h, now);
            return;
        }
    }

    /// Scheduler: which eligible priority goes next.
    fn pick(&mut self, pi: usize, eligible: u8) -> usize {
        if self.fc_period.is_some() {
            if let Some(l) = self.ib_pick(pi, eligible) {
                return l;
            }
        }
        match &self.sched {
            SchedulerConfig::Strict => 7 - eligible.leading_zeros() as usize,
            SchedulerConfig::Dwrr { weights, quantum } => {
                // Weight 0: strict, before the weighted ones.
                let strict = (0..8)
                    .rev()
                    .find(|&p| eligible & (1 << p) != 0 && weights[p] == 0);
                if let Some(p) = strict {
                    return p;
                }
                let port = &mut self.ports[pi];
                loop {
                    let p = usize::from(port.rr);
                    if eligible & (1 << p) != 0 {
                        let head = port.queues[p]
                            .front()
                            .map_or(4096, |x| u64::from(self.pkts.get(x).wire));
                        if port.deficit[p] >= head {
                            port.deficit[p] -= head;
                            return p;
                        }
                        port.deficit[p] += u64::from(weights[p]) * quantum.bytes();
                    } else {
                        port.deficit[p] = 0;
                    }
                    port.rr = (port.rr + 1) % 8;
                }
            }
        }
    }

    /// Take the head frame of queue `prio` of port `pi`: release its
    /// buffer at a switch (maybe sending XON), mark ECN. Returns its
    /// handle.
    fn dequeue(&mut self, pi: usize, prio: usize, now: Instant) -> u32 {
        let port = &mut self.ports[pi];
        let Some(h) = self.pkts.pop_front(&mut port.queues[prio]) else {
            unreachable!("dequeue from an empty queue: callers check first");
        };
        let pkt = self.pkts.get_mut(h);
        port.qbytes[prio] -= u64::from(pkt.wire);
        let node = port.node as usize;
        let sw = self.switch_of_node[node];
        if sw != NONE {
            let s = &mut self.switches[sw as usize];
            if let Some(e) = &s.ecn[prio] {
                if pkt.ecn != Ecn::NotEct && pkt.ecn != Ecn::Ce {
                    let q = self.ports[pi].qbytes[prio];
                    if switch::should_mark(e, q, &mut s.rng) {
                        pkt.ecn = Ecn::Ce;
                        self.ports[pi].ecn_marked += 1;
                    }
                }
            }
            let ing = s.port_base + u32::from(pkt.ingress);
            if self.fc_period.is_some() {
                // InfiniBand: the frame's blocks leave its ingress buffer.
                let wire = pkt.wire;
                self.ib_freed(ing, prio as u8, wire, now);
                return h;
            }
            let ch = s.mmu.depart(pkt.ingress, prio as u8, u64::from(pkt.wire));
            if ch == PfcChange::Resume {
                self.send_pfc(ing, prio as u8, false, now, false);
            }
        }
        h
    }

    /// Serialise the frame of handle `h` on port `p` from `now`.
    pub(crate) fn transmit(&mut self, p: u32, h: u32, now: Instant) {
        if let Some(t) = self.taps.as_deref_mut() {
            t.roce(p, &self.pkts.packet(h), now);
        }
        let pkt = self.pkts.get(h);
        let pkt = if self.fc_period.is_some() {
            let (lane, wire) = (pkt.prio, pkt.wire);
            self.ib_sent(p as usize, lane, wire, now);
            self.pkts.get(h)
        } else {
            pkt
        };
        let port = &mut self.ports[p as usize];
        let ser = port.rate.serialization_time(u64::from(pkt.wire));
        port.busy = true;
        port.frames_sent += 1;
        let c = &mut port.prio[usize::from(pkt.prio)];
        c.tx_packets += 1;
        c.tx_bytes += u64::from(pkt.wire);
        // HPCC: this egress's hop for the frame's INT record, appended
        // once the frame is on the wire.
        let stamp =
            (pkt.int != NO_INT && self.switch_of_node[port.node as usize] != NONE).then(|| {
                let hop = IntHop {
                    rate: port.rate,
                    ts: now,
                    tx_bytes: port.prio.iter().map(|c| c.tx_bytes).sum(),
                    qlen: port.qbytes.iter().sum(),
                };
                (pkt.int, hop)
            });
        self.q.schedule(now + ser, Ev::TxDone(p));
        if let Some(f) = &mut port.impairments {
            let v = f.judge(pkt.wire);
            if v != Verdict::Pass {
                if self.fc_period.is_some() {
                    let (lane, wire) = (pkt.prio, pkt.wire);
                    self.ib_lost(p, lane, wire, now);
                }
                self.pkts.free(h);
                self.wire_stopped(p, v);
                return;
            }
        }
        self.pkts.push_back(&mut port.inflight, h);
        self.q.schedule(now + ser + port.delay, Ev::Arrive(p));
        if let Some((int, hop)) = stamp {
            self.pkts.int_mut(int).push(hop);
        }
    }

    /// The oldest frame on the wire leaving `p` arrives at its peer.
    fn arrive(&mut self, p: u32, now: Instant) {
        let Some(h) = self.pkts.pop_front(&mut self.ports[p as usize].inflight) else {
            return;
        };
        let pkt = self.pkts.get(h);
        let (in_prio, wire, src, dst, sport) = (pkt.prio, pkt.wire, pkt.src, pkt.dst, pkt.sport);
        let rx = self.ports[p as usize].peer;
        let rport = &mut self.ports[rx as usize];
        let c = &mut rport.prio[usize::from(in_prio)];
        c.rx_packets += 1;
        c.rx_bytes += u64::from(wire);
        let node = rport.node as usize;
        let ib = self.fc_period.is_some();
        if ib {
            self.ib_received(rx, in_prio, wire);
        }
        let sw = self.switch_of_node[node];
        if sw == NONE {
            let host = self.host_of_node[node];
            let local = self.ports[rx as usize].local;
            let mut pkt = self.pkts.take(h);
            pkt.ingress = local;
            self.nic_receive(host, pkt, now);
            return;
        }
        // Watchdog drop actions exist only with a watchdog.
        let wd = self.wd.is_some();
        if wd && self.ports[rx as usize].wd_drop & (1 << in_prio) != 0 {
            self.pkts.free(h);
            self.wd_drop_frame(rx, in_prio, false);
            return;
        }
        let s = &mut self.switches[sw as usize];
        let (off, cnt) = s.route[dst as usize];
        if cnt == 0 {
            self.pkts.free(h);
            if ib {
                self.ib_freed(rx, in_prio, wire, now);
            }
            self.ports[rx as usize].rx_discards += 1;
            self.ports[rx as usize].prio[usize::from(in_prio)].rx_discards += 1;
            self.drops += 1;
            return;
        }
        let hops = &s.hops[off as usize..(off + u32::from(cnt)) as usize];
        let hop = if cnt == 1 {
            hops[0]
        } else {
            let n = usize::from(cnt);
            let hashed = || {
                let tuple = FiveTuple::roce(host_ip(src), host_ip(dst), sport);
                ecmp_index(n, &tuple, NodeId(s.node))
            };
            match &mut s.lb {
                Balancer::Ecmp => hops[hashed()],
                Balancer::Spray => hops[s.rng.gen_range(0..n)],
                Balancer::RoundRobin(turn) => {
                    let k = &mut turn[dst as usize];
                    let h = hops[usize::from(*k) % n];
                    *k = ((usize::from(*k) + 1) % n) as u16;
                    h
                }
                Balancer::Flowlet { gap, flows } => {
                    let e = flows
                        .entry((src, dst, sport))
                        .or_insert_with(|| (now, s.rng.gen_range(0..n) as u16));
                    if now - e.0 > *gap {
                        e.1 = s.rng.gen_range(0..n) as u16;
                    }
                    e.0 = now;
                    hops[usize::from(e.1) % n]
                }
                Balancer::Adaptive => {
                    let first = hashed();
                    let base = s.port_base;
                    let queued = |k: usize| {
                        let h = hops[(first + k) % n];
                        self.ports[(base + u32::from(h)) as usize].total_queued()
                    };
                    let best = (0..n).min_by_key(|&k| (queued(k), k)).unwrap_or(0);
                    hops[(first + best) % n]
                }
            }
        };
        let out = s.port_base + u32::from(hop);
        let local_in = self.ports[rx as usize].local;
        // Ingress classification: the class the frame is queued and
        // accounted in, and leaves with.
        let prio = match s.classify.get(usize::from(local_in)) {
            // InfiniBand keeps a frame's lane: its blocks are the lane's.
            Some(map) if !ib => map[usize::from(in_prio) & 7],
            _ => in_prio,
        };
        if wd && self.ports[out as usize].wd_drop & (1 << prio) != 0 {
            self.pkts.free(h);
            self.wd_drop_frame(out, prio, true);
            return;
        }
        let egress_q = self.ports[out as usize].qbytes[usize::from(prio)];
        // InfiniBand: credits admitted the frame before it was sent.
        let (adm, ch) = if ib {
            (Admit::Accept, PfcChange::None)
        } else {
            s.mmu.arrive(local_in, prio, u64::from(wire), egress_q)
        };
        if ch == PfcChange::Pause {
            self.send_pfc(rx, prio, true, now, false);
        }
        let (mut prio, mut wire) = (prio, wire);
        if adm == Admit::Drop && self.trim(sw, h, rx, out, now) {
            let pkt = self.pkts.get(h);
            (prio, wire) = (pkt.prio, pkt.wire);
        } else if adm == Admit::Drop {
            self.pkts.free(h);
            let lossless = self.switches[sw as usize].mmu.is_lossless(local_in, prio);
            let r = &mut self.ports[rx as usize];
            r.rx_discards += 1;
            r.prio[usize::from(prio)].rx_discards += 1;
            if lossless {
                r.prio[usize::from(prio)].rx_buf_discard += 1;
            }
            self.drops += 1;
            return;
        }
        let pkt = self.pkts.get_mut(h);
        pkt.prio = prio;
        pkt.ingress = local_in;
        let o = &mut self.ports[out as usize];
        o.qbytes[usize::from(prio)] += u64::from(wire);
        self.pkts.push_back(&mut o.queues[usize::from(prio)], h);
        let tq = o.total_queued();
        o.max_queue = o.max_queue.max(tq);
        self.kick(out, now);
    }

    /// Switch `sw` would drop frame `h` (arrived on global port `rx`, for
    /// egress `out`): with trimming, a data frame is cut to its headers,
    /// which are admitted on the trim priority if the buffer takes them.
    /// True when trimmed and admitted (the frame's priority and length
    /// are the trimmed ones); false: drop it.
    fn trim(&mut self, sw: u32, h: u32, rx: u32, out: u32, now: Instant) -> bool {
        let Some(tp) = self.switches[sw as usize].trim else {
            return false;
        };
        let pkt = self.pkts.get(h);
        if pkt.payload == 0 || pkt.trimmed || !pkt.bth.opcode.is_request() {
            return false;
        }
        let cut = pkt.wire - pkt.payload - (pkt.payload.wrapping_neg() & 3);
        let local_in = self.ports[rx as usize].local;
        let q = self.ports[out as usize].qbytes[usize::from(tp)];
        let (adm, ch) = self.switches[sw as usize]
            .mmu
            .arrive(local_in, tp, u64::from(cut), q);
        if ch == PfcChange::Pause {
            self.send_pfc(rx, tp, true, now, false);
        }
        if adm == Admit::Drop {
            return false;
        }
        let pkt = self.pkts.get_mut(h);
        pkt.payload = 0;
        pkt.wire = cut;
        pkt.trimmed = true;
        pkt.prio = tp;
        self.trims += 1;
        true
    }

    /// Port `p` tells its peer to stop (`xoff`) or resume priority `prio`.
    /// `refresh`: a repeat of an XOFF already in force.
    pub(crate) fn send_pfc(&mut self, p: u32, prio: u8, xoff: bool, now: Instant, refresh: bool) {
        let quanta = if xoff { self.pfc_quanta } else { 0 };
        if self.ports[p as usize].pfc_mask & (1 << prio) == 0 {
            return;
        }
        let pr = usize::from(prio);
        if xoff {
            if !refresh {
                let port = &mut self.ports[p as usize];
                if port.xoff_since[pr].is_some() {
                    return;
                }
                port.xoff_since[pr] = Some(now);
                port.xoff_gen[pr] = port.xoff_gen[pr].wrapping_add(1);
                let gen = port.xoff_gen[pr];
                if self.switch_of_node[port.node as usize] == NONE {
                    self.nic_stall_arm(p, prio, gen, now);
                } else if self.deadlock.is_some() {
                    self.deadlock_arm(now);
                }
            }
            let port = &self.ports[p as usize];
            if quanta > 0 {
                let every = self
                    .pfc_refresh
                    .unwrap_or_else(|| Duration::from_ps(port.quanta_time(quanta).as_ps() / 2))
                    .max(Duration::from_ps(1));
                let gen = port.xoff_gen[pr];
                self.q
                    .schedule(now + every, Ev::Refresh { port: p, prio, gen });
            }
        } else {
            let port = &mut self.ports[p as usize];
            let Some(since) = port.xoff_since[pr].take() else {
                return;
            };
            port.prio[pr].tx_pause_duration_ps += (now - since).as_ps();
            port.xoff_gen[pr] = port.xoff_gen[pr].wrapping_add(1);
        }
        let port = &mut self.ports[p as usize];
        port.prio[pr].tx_pause += 1;
        port.ctrl.push_back((prio, quanta));
        self.kick(p, now);
    }

    fn nic_port(&self, p: u32) -> bool {
        self.switch_of_node[self.ports[p as usize].node as usize] == NONE
    }

    /// Gather results at the end of the run.
    fn collect(&mut self, now: Instant) -> RunResult {
        for p in &mut self.ports {
            p.finish(now);
        }
        let topo = self.topo;
        let name = |node: u32| topo.nodes[node as usize].name.clone();
        let mut fcts = Vec::new();
        let mut completed = 0u64;
        let mut bytes = 0u64;
        let mut first_start = Instant::MAX;
        let mut last_finish = Instant::ZERO;
        let mut flows = Vec::new();
        for (f, st) in self.flows.iter().zip(&self.flow_state) {
            first_start = first_start.min(f.start);
            let acked = self.delivered(f.id);
            let fct = match (st.finish, st.posted_at) {
                (Some(t), Some(p)) => Some((t - p).as_ps()),
                _ => None,
            };
            if let (Some(t), Some(x)) = (st.finish, fct) {
                completed += 1;
                last_finish = last_finish.max(t);
                // Copies inside a server are not the fabric's flows: they
                // count as done but not in FCTs or goodput.
                if f.local.is_none() {
                    fcts.push(x);
                }
            }
            if f.local.is_none() {
                bytes += acked;
            }
            // Copies inside a server are not the fabric's flows: no
            // record (their FCTs and slowdowns would read as flows').
            if self.cfg.record.flows && f.local.is_none() {
                let ideal = self.ideal_fct(f).max(1);
                flows.push(FlowRecord {
                    id: f.id,
                    src: name(f.src.0),
                    dst: name(f.dst.0),
                    workload: self.workload_name(f),
                    size: f.size,
                    start_ps: f.start.as_ps(),
                    posted_ps: st.posted_at.map(|t| t.as_ps()),
                    finish_ps: st.finish.map(|t| t.as_ps()),
                    fct_ps: fct,
                    slowdown: fct.map(|x| (x as f64 / ideal as f64).max(1.0)),
                    bytes_acked: acked,
                    failed: st.failed,
                });
            }
        }
        fcts.sort_unstable();
        let span_end = if completed == self.flows.len() as u64 && completed > 0 {
            last_finish
        } else {
            now
        };
        let span = span_end.saturating_duration_since(first_start.min(span_end));
        let goodput = if span.as_ps() > 0 {
            bytes as f64 * 8.0 / span.as_secs_f64()
        } else {
            0.0
        };
        let mut pause_frames = 0;
        let mut pause_time = 0;
        let mut ecn_marked = 0;
        let mut frames = 0;
        let mut ports_out = Vec::new();
        let mut pauses = Vec::new();
        for (gi, p) in self.ports.iter().enumerate() {
            for prio in 0..8u8 {
                let dropped = p.pause_log_dropped[usize::from(prio)];
                let intervals: Vec<(u64, u64)> = p
                    .pause_log
                    .iter()
                    .filter(|e| e.0 == prio)
                    .map(|e| (e.1, e.2))
                    .collect();
                if !intervals.is_empty() || dropped > 0 {
                    pauses.push(PauseSeries {
                        node: name(p.node),
                        port: p.local,
                        peer: name(self.ports[p.peer as usize].node),
                        priority: prio,
                        intervals,
                        dropped_intervals: dropped,
                    });
                }
            }
            pause_frames += p.prio.iter().map(|c| c.tx_pause).sum::<u64>();
            pause_time += p.prio.iter().map(|c| c.rx_pause_duration_ps).sum::<u64>();
            ecn_marked += p.ecn_marked;
            frames += p.frames_sent;
            // Always kept: the counter dumps print them; `record.ports`
            // decides whether results.json holds them too.
            {
                ports_out.push(PortRecord {
                    node: name(p.node),
                    port: p.local,
                    peer: name(self.ports[p.peer as usize].node),
                    is_nic: self.nic_port(gi as u32),
                    prio: p.prio.to_vec(),
                    rx_discards: p.rx_discards,
                    fault_drops: p.fault_drops,
                    ecn_marked: p.ecn_marked,
                    max_queue_bytes: p.max_queue,
                    max_headroom_bytes: match self.switch_of_node[p.node as usize] {
                        NONE => 0,
                        sw => self.switches[sw as usize].mmu.max_headroom[usize::from(p.local)],
                    },
                    tx_pause_storm_warning_events: match self.host_of_node[p.node as usize] {
                        NONE => 0,
                        h => self.nics[h as usize].storm_warning,
                    },
                    tx_pause_storm_error_events: match self.host_of_node[p.node as usize] {
                        NONE => 0,
                        h => self.nics[h as usize].storm_error,
                    },
                    errors: p.errors.clone(),
                    pfc_priorities: Some((0..8u8).filter(|b| p.pfc_mask & (1 << b) != 0).collect()),
                    ecn: match self.switch_of_node[p.node as usize] {
                        NONE => None,
                        sw => Some(
                            self.switches[sw as usize]
                                .ecn
                                .iter()
                                .flatten()
                                .map(|e| EcnSetting {
                                    priority: e.priority,
                                    kmin_bytes: e.kmin.bytes(),
                                    kmax_bytes: e.kmax.bytes(),
                                    pmax: e.pmax,
                                })
                                .collect(),
                        ),
                    },
                    load_balancing: match self.switch_of_node[p.node as usize] {
                        NONE => None,
                        sw => self.switches[sw as usize].lb.per_frame().map(String::from),
                    },
                    infiniband: p.ib.as_deref().map(|ib| {
                        // A wait still open at the end counts up to now.
                        let open = ib
                            .wait_since
                            .map_or(0, |t| now.saturating_duration_since(t).as_ps());
                        let tick = p
                            .rate
                            .serialization_time(crate::config::IB_BLOCK)
                            .as_ps()
                            .max(1);
                        IbPortRecord {
                            xmit_wait: (ib.wait_ps + open) / tick,
                            fcps_sent: ib.fcps,
                            max_blocks_held: ib.max_held.iter().copied().max().map_or(0, u64::from),
                            blocks_per_lane: u64::from(ib.limit),
                        }
                    }),
                });
            }
        }
        let nics: Vec<NicRecord> = self
            .nics
            .iter()
            .map(|n| self.qps.nic_record(n, name(n.node)))
            .collect();
        let drops = self.drops;
        let summary = Summary {
            variant: self.opts.variant.clone(),
            sim_time_ps: now.as_ps(),
            events: self.q.processed(),
            flows_completed: completed,
            flows_total: self.flows.len() as u64,
            goodput_bps: goodput,
            drops,
            trimmed: self.trims,
            pause_frames_sent: pause_frames,
            pause_time_ps: pause_time,
            ecn_marked,
            cnps_sent: nics.iter().map(|n| n.np_cnp_sent).sum(),
            retransmitted_packets: nics.iter().map(|n| n.retransmitted_packets).sum(),
            fct_p50_ps: (!fcts.is_empty()).then(|| percentile(&fcts, 50)),
            fct_p99_ps: (!fcts.is_empty()).then(|| percentile(&fcts, 99)),
            max_fct_ps: fcts.last().copied(),
            makespan_ps: if completed > 0 {
                last_finish.as_ps()
            } else {
                0
            },
            bytes_delivered: bytes,
            frames_sent: frames,
            stop_reason: self.stop_reason.to_string(),
        };
        let jobs = self.job_loads();
        let groups = self.group_records(&jobs);
        let mut training =
            crate::workload::training::steps(&self.opts.groups, &groups, &self.compute_times());
        self.job_interference(&jobs, &mut training);
        let perftest = self.perftest_records();
        // Samples stop with the run: an idle network ends at its last
        // activity, and the sampler may have run on beside stale timers.
        let mut queues = std::mem::take(&mut self.samples);
        for series in &mut queues {
            series.samples.retain(|&(t, _)| t <= now.as_ps());
        }
        let mut flow_rates = std::mem::take(&mut self.flow_rates);
        for series in &mut flow_rates {
            series.samples.retain(|&(t, _)| t <= now.as_ps());
        }
        let (pfcwd_events, pfcwd_stats) = self.wd_results();
        let deadlocks = self
            .deadlock
            .as_mut()
            .map(|d| std::mem::take(&mut d.records))
            .unwrap_or_default();
        RunResult {
            summary,
            groups,
            flows,
            ports: ports_out,
            nics,
            queues,
            pauses,
            pfcwd_events,
            pfcwd_stats,
            deadlocks,
            flow_rates,
            perftest,
            training,
            fluid: None,
            captures: self.taps.take().map(|t| t.finish()).unwrap_or_default(),
        }
    }

    /// The name of the workload that made flow `f`.
    fn workload_name(&self, f: &FlowSpec) -> String {
        self.opts
            .workloads
            .get(f.workload as usize)
            .cloned()
            .unwrap_or_else(|| format!("workload-{}", f.workload))
    }

    /// The flow rate sampling period.
    fn flow_rate_interval(&self) -> Duration {
        self.cfg
            .record
            .flow_rate_interval
            .unwrap_or(self.cfg.record.interval)
    }

    /// One sample of every recorded queue.
    #[cold]
    #[inline(never)]
    fn sample_queues(&mut self, now: Instant) {
        for (i, &p) in self.sample_ports.iter().enumerate() {
            let port = &self.ports[p as usize];
            let b = match self.samples[i].priority {
                Some(pr) => port.qbytes[usize::from(pr)],
                None => port.total_queued(),
            };
            self.samples[i].samples.push((now.as_ps(), b));
        }
        self.samplers_pending -= 1;
        if self.q.len() > self.samplers_pending {
            self.q.schedule(now + self.cfg.record.interval, Ev::Sample);
            self.samplers_pending += 1;
        }
    }

    /// One flow rate sample of every flow: acknowledged bytes gained since
    /// the last one, as bits per second over the interval.
    #[cold]
    #[inline(never)]
    fn sample_flow_rates(&mut self, now: Instant) {
        let every = self.flow_rate_interval();
        let ps = u128::from(every.as_ps());
        for i in 0..self.flow_rates.len() {
            let d = self.delivered(i as u32);
            let gained = d.saturating_sub(self.flow_rate_last[i]);
            self.flow_rate_last[i] = d;
            let bps = u128::from(gained) * 8 * 1_000_000_000_000 / ps;
            self.flow_rates[i]
                .samples
                .push((now.as_ps(), u64::try_from(bps).unwrap_or(u64::MAX)));
        }
        self.samplers_pending -= 1;
        if self.q.len() > self.samplers_pending {
            self.q.schedule(now + every, Ev::FlowRates);
            self.samplers_pending += 1;
        }
    }

    /// The step time of every group in [`crate::options::RunOptions::groups`].
    fn group_records(&self, jobs: &JobLoads) -> Vec<GroupRecord> {
        let mut out = Vec::with_capacity(self.opts.groups.len());
        // The flows of each group, in one pass.
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); self.opts.groups.len()];
        for f in self.flows.iter() {
            if let Some(m) = f.group.and_then(|g| members.get_mut(g as usize)) {
                m.push(f.id);
            }
        }
        for (g, spec) in self.opts.groups.iter().enumerate() {
            let members = &members[g];
            let mut flows = 0u64;
            let mut completed = 0u64;
            let mut first_post: Option<Instant> = None;
            let mut last_finish: Option<Instant> = None;
            let mut slowest: Option<Rate> = None;
            let mut last_host: Option<u32> = None;
            for &id in members {
                let (f, st) = (&self.flows[id as usize], &self.flow_state[id as usize]);
                flows += 1;
                if let Some(p) = st.posted_at {
                    // A delayed flow's group began when it was released:
                    // the delay (a protocol's latency) is part of the step.
                    let p = p.checked_sub(f.delay).unwrap_or(Instant::ZERO);
                    first_post = Some(first_post.map_or(p, |x| x.min(p)));
                }
                if let Some(t) = st.finish {
                    completed += 1;
                    if last_finish.map_or(true, |x| t > x) {
                        last_host = Some(f.dst.0);
                    }
                    last_finish = Some(last_finish.map_or(t, |x| x.max(t)));
                }
                for node in [f.src, f.dst] {
                    let host = self.host_of_node[node.0 as usize];
                    let rate = self.ports[self.nics[host as usize].port as usize].rate;
                    slowest = Some(slowest.map_or(rate, |r| r.min(rate)));
                }
            }
            let step = match (first_post, last_finish) {
                (Some(a), Some(b)) if completed == flows && flows > 0 => Some((b - a).as_ps()),
                _ => None,
            };
            let limit = match (spec.nccl, step, first_post) {
                (Some(row), Some(step), Some(t0)) => {
                    // Other jobs' bytes on the same links while it ran.
                    let w = members.first().map(|&id| self.flows[id as usize].workload);
                    let others = jobs.others(w, t0.as_ps(), t0.as_ps() + step);
                    Some(self.nccl_limit(members, row, step, t0, &others))
                }
                _ => None,
            };
            out.push(GroupRecord {
                name: spec.name.clone(),
                kind: spec.kind.clone(),
                flows,
                flows_completed: completed,
                start_ps: first_post.map(|t| t.as_ps()),
                finish_ps: last_finish.map(|t| t.as_ps()),
                step_time_ps: step,
                ideal_ps: spec
                    .ring
                    .zip(slowest)
                    .and_then(|(ring, rate)| ring.ideal_ps(rate)),
                ranks: spec.ring.map(|r| r.hosts).or(spec.nccl.map(|r| r.ranks)),
                bytes: spec.ring.map(|r| r.bytes).or(spec.nccl.map(|r| r.param)),
                collective: spec.nccl.map(|r| r.collective.name().to_string()),
                size: spec.nccl.map(|r| r.size),
                count: spec.nccl.map(|r| r.count),
                algorithm: spec.nccl.and_then(|r| r.algorithm).map(str::to_string),
                protocol: spec.nccl.and_then(|r| r.protocol).map(str::to_string),
                model_ps: spec.nccl.and_then(|r| r.model_ps),
                limit: limit.as_ref().map(|l| l.0.to_string()),
                bottleneck: limit.and_then(|l| l.1),
                last_host: match (spec.nccl, last_host) {
                    (Some(_), Some(h)) => Some(self.topo.nodes[h as usize].name.clone()),
                    _ => None,
                },
                paused: match (spec.nccl, first_post, last_finish) {
                    (Some(_), Some(a), Some(b)) => self.paused_between(a, b),
                    _ => Vec::new(),
                },
            });
        }
        out
    }

    /// Per compute group of a training job: each rank's release and end
    /// of its phase (see [`crate::workload::training::ComputeTimes`]).
    fn compute_times(
        &self,
    ) -> std::collections::HashMap<u32, crate::workload::training::ComputeTimes> {
        use crate::workload::PartKind;
        let mut out: std::collections::HashMap<u32, crate::workload::training::ComputeTimes> =
            std::collections::HashMap::new();
        let Some(gs) = self.topo.gpu else {
            return out;
        };
        for (f, st) in self.flows.iter().zip(&self.flow_state) {
            let (Some(g), Some(path)) = (f.group, f.local) else {
                continue;
            };
            let is_compute = self.opts.groups.get(g as usize).is_some_and(|s| {
                s.training
                    .as_ref()
                    .is_some_and(|p| matches!(p.kind, PartKind::Compute(_)))
            });
            let (Some(posted), Some(end)) = (st.posted_at, st.finish) else {
                continue;
            };
            if !is_compute {
                continue;
            }
            let host = self.host_of_node[f.src.0 as usize];
            let key = u64::from(gs.server_of_host(host)) * u64::from(gs.gpus) + u64::from(path.gpu);
            let rel = posted.checked_sub(f.delay).unwrap_or(Instant::ZERO);
            out.entry(g)
                .or_default()
                .push((key, rel.as_ps(), end.as_ps()));
        }
        out
    }

    /// Each training job's wire bytes per egress port (on the paths ECMP
    /// hashed its flows onto) and its span, when two or more ran.
    fn job_loads(&self) -> JobLoads {
        use std::collections::HashMap;
        let mut names: Vec<&str> = Vec::new();
        for g in &self.opts.groups {
            if let Some(t) = &g.training {
                if !names.contains(&t.job.as_str()) {
                    names.push(&t.job);
                }
            }
        }
        if names.len() < 2 {
            return JobLoads::default();
        }
        let mut jobs: Vec<JobLoad> = names
            .iter()
            .map(|n| JobLoad {
                name: n.to_string(),
                workload: self
                    .opts
                    .workloads
                    .iter()
                    .position(|w| w == n)
                    .map(|w| w as u32),
                ports: HashMap::new(),
                span: None,
            })
            .collect();
        let mtu = self.cfg.nic.mtu.bytes();
        for (f, st) in self.flows.iter().zip(&self.flow_state) {
            let Some(j) = jobs.iter_mut().find(|j| j.workload == Some(f.workload)) else {
                continue;
            };
            if let (Some(a), Some(z)) = (st.posted_at, st.finish) {
                let (a, z) = (a.as_ps(), z.as_ps());
                j.span = Some(j.span.map_or((a, z), |(x, y)| (x.min(a), y.max(z))));
            }
            if f.local.is_some() {
                continue;
            }
            let wire = f.size + f.size.div_ceil(mtu) * 62;
            for p in self.path_ports(f) {
                *j.ports.entry(p).or_default() += wire;
            }
        }
        JobLoads { jobs }
    }

    /// With two or more training jobs: the links each shares with the
    /// others and the ports on its paths PAUSE held while it ran (see
    /// [`crate::results::TrainingRecord::shared_links`] and `paused`).
    fn job_interference(&self, loads: &JobLoads, jobs: &mut [crate::results::TrainingRecord]) {
        use std::collections::HashMap;
        if jobs.len() < 2 {
            return;
        }
        // Per port: wire bytes of each job (in `jobs` order).
        let mut per_port: HashMap<u32, Vec<u64>> = HashMap::new();
        for (j, r) in jobs.iter().enumerate() {
            let Some(load) = loads.jobs.iter().find(|l| l.name == r.job) else {
                continue;
            };
            for (&p, &b) in &load.ports {
                per_port.entry(p).or_insert_with(|| vec![0; jobs.len()])[j] += b;
            }
        }
        let mut ports: Vec<(&u32, &Vec<u64>)> = per_port.iter().collect();
        ports.sort_by_key(|x| *x.0);
        let name = |node: u32| &self.topo.nodes[node as usize].name;
        let link = |p: u32| {
            let port = &self.ports[p as usize];
            format!(
                "{}:{} -> {}",
                name(port.node),
                port.local,
                name(self.ports[port.peer as usize].node)
            )
        };
        let mb = |b: u64| format!("{:.1} MB", b as f64 / 1e6);
        for j in 0..jobs.len() {
            let mut shared: Vec<(u64, u32, u64, u64)> = ports
                .iter()
                .filter_map(|(&p, b)| {
                    let others: u64 = b
                        .iter()
                        .enumerate()
                        .filter(|x| x.0 != j)
                        .map(|x| *x.1)
                        .sum();
                    (b[j] > 0 && others > 0).then_some((b[j].min(others), p, b[j], others))
                })
                .collect();
            shared.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
            jobs[j].shared_links = shared
                .iter()
                .take(8)
                .map(|&(_, p, mine, others)| {
                    format!("{}: {} of it, {} of others", link(p), mb(mine), mb(others))
                })
                .collect();
            let span = (
                jobs[j].steps.iter().filter_map(|s| s.start_ps).min(),
                jobs[j].steps.iter().filter_map(|s| s.finish_ps).max(),
            );
            let (Some(a), Some(z)) = span else { continue };
            let mut held: Vec<(u64, u32)> = ports
                .iter()
                .filter(|(_, b)| b[j] > 0)
                .filter_map(|(&p, _)| {
                    let ps = self.ports[p as usize].paused_between(a, z);
                    (ps > 0).then_some((ps, p))
                })
                .collect();
            held.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
            let names: Vec<String> = jobs.iter().map(|r| r.job.clone()).collect();
            jobs[j].paused = held
                .iter()
                .take(8)
                .map(|&(ps, p)| {
                    let port = &self.ports[p as usize];
                    let peer = name(self.ports[port.peer as usize].node);
                    let also: Vec<&str> = per_port[&p]
                        .iter()
                        .enumerate()
                        .filter(|&(k, &b)| k != j && b > 0)
                        .map(|(k, _)| names[k].as_str())
                        .collect();
                    let also = if also.is_empty() {
                        String::new()
                    } else {
                        format!(" (also carries {})", also.join(", "))
                    };
                    format!(
                        "{}:{} by {peer} for {}{also}",
                        name(port.node),
                        port.local,
                        Duration::from_ps(ps)
                    )
                })
                .collect();
        }
    }

    /// Ports held off by PAUSE between `a` and `b` (see
    /// [`GroupRecord::paused`]), from the logged intervals.
    fn paused_between(&self, a: Instant, b: Instant) -> Vec<String> {
        let (a, b) = (a.as_ps(), b.as_ps());
        let mut held: Vec<(u64, usize)> = self
            .ports
            .iter()
            .enumerate()
            .filter_map(|(i, p)| {
                let ps = p.paused_between(a, b);
                (ps > 0).then_some((ps, i))
            })
            .collect();
        held.sort_by(|x, y| y.0.cmp(&x.0).then(x.1.cmp(&y.1)));
        let name = |node: u32| &self.topo.nodes[node as usize].name;
        held.iter()
            .take(8)
            .map(|&(ps, i)| {
                let p = &self.ports[i];
                let peer = &self.ports[p.peer as usize];
                format!(
                    "{}:{} by {} for {}",
                    name(p.node),
                    p.local,
                    name(peer.node),
                    Duration::from_ps(ps)
                )
            })
            .collect()
    }

    /// What held the nccl-tests group of flows `members` back and where
    /// (see [`GroupRecord::limit`] and [`GroupRecord::bottleneck`]): its
    /// step took `step` ps from `t0`.
    fn nccl_limit(
        &self,
        members: &[u32],
        row: crate::workload::nccl_tests::NcclRow,
        step: u64,
        t0: Instant,
        others: &std::collections::HashMap<u32, u64>,
    ) -> (&'static str, Option<String>) {
        use std::collections::HashMap;
        // Wire bytes per egress port on the hashed paths; bytes per local
        // resource, with its rate, link and the node that names it.
        let mut port_bytes: HashMap<u32, u64> = HashMap::new();
        let mut local: HashMap<u32, (u64, crate::workload::LocalPath, NodeId)> = HashMap::new();
        let mtu = self.cfg.nic.mtu.bytes();
        for f in members.iter().map(|&id| &self.flows[id as usize]) {
            match f.local {
                Some(l) => local.entry(l.resource).or_insert((0, l, f.src)).0 += f.size,
                None => {
                    // Payload and RoCE framing per packet.
                    let wire = f.size + f.size.div_ceil(mtu) * 62;
                    for p in self.path_ports(f) {
                        *port_bytes.entry(p).or_default() += wire;
                    }
                }
            }
        }
        // Other jobs share the links of its paths (their bytes while it
        // ran; links off its paths do not hold it back).
        for (p, b) in port_bytes.iter_mut() {
            *b += others.get(p).copied().unwrap_or(0);
        }
        let port_ps = |p: u32, bytes: u64| {
            self.ports[p as usize]
                .rate
                .serialization_time(bytes)
                .as_ps()
        };
        let host_link = |p: u32| {
            let port = &self.ports[p as usize];
            self.host_of_node[port.node as usize] != NONE
                || self.host_of_node[self.ports[port.peer as usize].node as usize] != NONE
        };
        // The busiest host link and fabric link, ties to the lower port.
        let busiest = |host: bool| {
            port_bytes
                .iter()
                .filter(|(&p, _)| host_link(p) == host)
                .map(|(&p, &b)| (port_ps(p, b), std::cmp::Reverse(p)))
                .max()
                .map(|(ps, p)| (ps, p.0))
        };
        let (nic, fabric) = (busiest(true), busiest(false));
        let busiest_local = |kind: &str| {
            local
                .iter()
                .filter(|(_, v)| v.1.link.kind() == kind)
                .map(|(&r, v)| {
                    (
                        v.1.rate.serialization_time(v.0).as_ps(),
                        std::cmp::Reverse(r),
                    )
                })
                .max()
                .map(|(ps, r)| (ps, r.0))
        };
        let (nvlink, pcie) = (busiest_local("nvlink"), busiest_local("pcie"));
        let link_name = |p: u32| {
            let port = &self.ports[p as usize];
            let peer = &self.ports[port.peer as usize];
            format!(
                "{}:{} -> {}",
                self.topo.nodes[port.node as usize].name,
                port.local,
                self.topo.nodes[peer.node as usize].name
            )
        };
        let local_name = |r: u32| {
            let (_, l, node) = local[&r];
            let host = self.host_of_node[node.0 as usize];
            match self.topo.gpu {
                Some(gs) => format!(
                    "server {} GPU {} {}",
                    gs.server_of_host(host),
                    l.gpu,
                    l.link.text()
                ),
                None => format!(
                    "{} GPU {} {}",
                    self.topo.nodes[node.0 as usize].name,
                    l.gpu,
                    l.link.text()
                ),
            }
        };
        let latency = row.model_latency_ps.unwrap_or(0);
        let nic_ps = nic.map_or(0, |x| x.0);
        // A fabric link is the limit only when it carries more than any
        // host link can (ECMP put several rings' bytes on it).
        let fabric = fabric.filter(|f| f.0 > nic_ps);
        let biggest_link = [nic, fabric, nvlink, pcie]
            .iter()
            .flatten()
            .map(|x| x.0)
            .max()
            .unwrap_or(0);
        let expected = latency + biggest_link;
        let t1 = t0.as_ps() + step;
        let held = |p: &port::Port| -> u64 { p.paused_between(t0.as_ps(), t1) };
        // The port PAUSE held longest, on the group's paths first.
        let most_held = |on_path: bool| {
            self.ports
                .iter()
                .enumerate()
                .filter(|(i, _)| !on_path || port_bytes.contains_key(&(*i as u32)))
                .map(|(i, p)| (held(p), std::cmp::Reverse(i)))
                .filter(|x| x.0 > 0)
                .max()
                .map(|x| x.1 .0 as u32)
        };
        if let Some(p) = most_held(true).or_else(|| most_held(false)) {
            if step as f64 > 1.1 * expected as f64 {
                return ("pause", Some(format!("{} paused", link_name(p))));
            }
        }
        let link_ps = nic.into_iter().chain(fabric).max();
        if step as f64 > 1.5 * expected as f64 {
            // No PAUSE: queues on the busiest link of its paths.
            return ("congestion", link_ps.map(|x| link_name(x.1)));
        }
        let mut best: (&'static str, u64, Option<String>) = ("latency", latency, None);
        if let Some((ps, p)) = nic {
            if ps > best.1 {
                best = ("nic", ps, Some(link_name(p)));
            }
        }
        if let Some((ps, p)) = fabric {
            if ps > best.1 {
                best = ("congestion", ps, Some(link_name(p)));
            }
        }
        for (kind, x) in [("nvlink", nvlink), ("pcie", pcie)] {
            if let Some((ps, r)) = x {
                if ps > best.1 {
                    best = (kind, ps, Some(local_name(r)));
                }
            }
        }
        (best.0, best.2)
    }

    /// What every perftest size measured (groups with a perftest row).
    fn perftest_records(&self) -> Vec<PerftestRecord> {
        let mut out = Vec::new();
        for (g, spec) in self.opts.groups.iter().enumerate() {
            let Some(row) = spec.perftest else { continue };
            let mut r = PerftestRecord {
                group: spec.name.clone(),
                test: row.test,
                size: row.size,
                qps: row.qps,
                bidirectional: row.bidirectional,
                tx_depth: row.tx_depth,
                cq_mod: row.cq_mod,
                inline: row.inline,
                timed: row.timed,
                messages: 0,
                bytes: 0,
                start_ps: None,
                finish_ps: None,
                completed: true,
                limit: crate::hostmodel::Limit::Wire,
                bound_bps: 0,
                unloaded_latency_ps: 0,
                latency_samples_ps: Vec::new(),
            };
            let client = self.flows.iter().find(|f| {
                f.group == Some(g as u32) && f.post.is_some_and(|p| p.lead || row.test.is_bw())
            });
            if let Some(f) = client {
                let host = self.host_of_node[f.src.0 as usize];
                let h = self.nics[host as usize].host_side.as_deref().map(|h| h.p);
                let path = self.path_shape(f);
                let inline = row.size <= u64::from(row.inline);
                if row.test.is_bw() {
                    let b = crate::hostmodel::bw_limits(
                        h.as_ref(),
                        row.test,
                        row.size,
                        (row.qps, row.tx_depth, inline),
                        row.bidirectional,
                        &path,
                    );
                    r.limit = b.limit;
                    r.bound_bps = b.bound_bps as u64;
                } else {
                    r.limit = crate::hostmodel::Limit::Latency;
                    r.unloaded_latency_ps =
                        crate::hostmodel::latency(h.as_ref(), row.test, row.size, inline, &path)
                            .as_ps();
                }
            }
            let (mut first, mut last): (Option<Instant>, Option<Instant>) = (None, None);
            for (f, st) in self.flows.iter().zip(&self.flow_state) {
                if f.group != Some(g as u32) {
                    continue;
                }
                // The ping-pong's answering flow is not the client's:
                // the client's flow measures the round trips.
                let counts = row.test.is_bw() || f.post.is_some_and(|p| p.lead);
                if counts {
                    // A run with a deadline counts what completed by then.
                    let (done, end) = match st.cut {
                        Some((t, done)) => (done, Some(t)),
                        None => (st.done, st.finish),
                    };
                    r.messages += done;
                    r.bytes += if st.cut.is_some() {
                        done * f.message_size
                    } else {
                        self.delivered(f.id)
                    };
                    if let Some(p) = st.posted_at {
                        first = Some(first.map_or(p, |x| x.min(p)));
                    }
                    if let Some(t) = end {
                        last = Some(last.map_or(t, |x| x.max(t)));
                    }
                }
                match st.finish {
                    Some(_) if counts => {}
                    Some(_) => {}
                    None => r.completed = false,
                }
                if f.post.is_some_and(|p| p.record_posts) {
                    r.latency_samples_ps = st
                        .post_times
                        .windows(2)
                        .map(|w| (w[1] - w[0]).as_ps())
                        .collect();
                }
            }
            r.start_ps = first.map(|t| t.as_ps());
            r.finish_ps = last.map(|t| t.as_ps());
            out.push(r);
        }
        out
    }

    /// The egress ports flow `f`'s packets leave, in order, on the path
    /// its hash picks: its NIC's port, then one per switch.
    fn path_ports(&self, f: &FlowSpec) -> Vec<u32> {
        let st = &self.flow_state[f.id as usize];
        let (src, dst) = (
            self.host_of_node[f.src.0 as usize],
            self.host_of_node[f.dst.0 as usize],
        );
        self.path_ports_between(src, dst, self.qps.sport_of(st.qp))
    }

    /// The egress ports, in order, that per-flow ECMP takes from host
    /// `src` to host `dst` for UDP source port `sport`.
    fn path_ports_between(&self, src: u32, dst: u32, sport: u16) -> Vec<u32> {
        let tuple = FiveTuple::roce(host_ip(src), host_ip(dst), sport);
        let mut p = self.nics[src as usize].port;
        let mut out = Vec::with_capacity(8);
        // A path never revisits a node; 64 bounds a malformed table.
        for _ in 0..64 {
            out.push(p);
            let peer = &self.ports[self.ports[p as usize].peer as usize];
            let sw = self.switch_of_node[peer.node as usize];
            if sw == NONE {
                break;
            }
            let s = &self.switches[sw as usize];
            let (off, cnt) = s.route[dst as usize];
            if cnt == 0 {
                break;
            }
            let hops = &s.hops[off as usize..(off + u32::from(cnt)) as usize];
            let hop = ecmp_select(hops, &tuple, NodeId(s.node)).unwrap_or(hops[0]);
            p = s.port_base + u32::from(hop);
        }
        out
    }

    /// The path flow `f` takes, as the closed forms see it: its links,
    /// the slowest rate, the mean propagation delay, the MTU.
    fn path_shape(&self, f: &FlowSpec) -> crate::hostmodel::PathShape {
        let st = &self.flow_state[f.id as usize];
        let ports = self.path_ports(f);
        let (mut delay, mut rate) = (Duration::ZERO, Rate::from_bps(u64::MAX));
        for &p in &ports {
            let port = &self.ports[p as usize];
            delay += port.delay;
            rate = rate.min(port.rate);
        }
        let links = ports.len() as u32;
        crate::hostmodel::PathShape {
            rate,
            links,
            delay: Duration::from_ps(delay.as_ps() / u64::from(links.max(1))),
            mtu: self.qps.qps[st.qp as usize].pmtu,
        }
    }

    /// Stand-alone FCT of a flow: base RTT over the path its hash picks
    /// plus its wire bytes at the bottleneck rate.
    fn ideal_fct(&self, f: &FlowSpec) -> u64 {
        let mtu = self.cfg.nic.mtu.bytes();
        let ports = self.path_ports(f);
        let rtt = self.base_rtt(&ports);
        let mut bottleneck = Rate::from_bps(u64::MAX);
        for &p in &ports {
            bottleneck = bottleneck.min(self.ports[p as usize].rate);
        }
        let packets = f.size.div_ceil(mtu).max(1);
        let wire = f.size + packets * 62 + 16;
        (rtt + bottleneck.serialization_time(wire)).as_ps()
    }

    /// The base RTT over egress ports `ports`: each link's propagation
    /// both ways, a full frame forward and an ACK back at its rate.
    pub(crate) fn base_rtt(&self, ports: &[u32]) -> Duration {
        let frame = self.cfg.nic.mtu.bytes() + 62 + 16;
        let mut rtt = Duration::ZERO;
        for &p in ports {
            let port = &self.ports[p as usize];
            rtt += port.delay + port.delay;
            rtt += port.rate.serialization_time(frame) + port.rate.serialization_time(64);
        }
        rtt
    }

    /// HPCC and Swift: give the new QP pair from `qp` (requester, from
    /// host `src` to `dst`) its path's base RTT.
    pub(crate) fn set_base_rtt_of_pair(&mut self, qp: u32, src: u32, dst: u32) {
        if !matches!(
            self.qps.qps[qp as usize].engine.config().cc,
            roce::cc::CcConfig::Hpcc(_) | roce::cc::CcConfig::Swift(_)
        ) {
            return;
        }
        let ports = self.path_ports_between(src, dst, self.qps.sport_of(qp));
        let rtt = self.base_rtt(&ports);
        for id in [qp, qp ^ 1] {
            self.qps.qps[id as usize].engine.set_base_rtt(rtt);
        }
    }
}

/// One training job's load on the fabric (see `World::job_loads`).
struct JobLoad {
    name: String,
    /// Its workload index.
    workload: Option<u32>,
    /// Wire bytes per egress port.
    ports: std::collections::HashMap<u32, u64>,
    /// First post to last finish of its flows, ps.
    span: Option<(u64, u64)>,
}

/// The training jobs' loads; empty with fewer than two jobs.
#[derive(Default)]
struct JobLoads {
    jobs: Vec<JobLoad>,
}

impl JobLoads {
    /// Per port, the bytes the jobs other than workload `w` sent over it
    /// between `t0` and `t1` (ps): each job's bytes there spread evenly
    /// over its span (a job's traffic is steady at this scale).
    fn others(&self, w: Option<u32>, t0: u64, t1: u64) -> std::collections::HashMap<u32, u64> {
        let mut out = std::collections::HashMap::new();
        for j in self.jobs.iter().filter(|j| j.workload != w) {
            let Some((a, z)) = j.span else { continue };
            let overlap = t1.min(z).saturating_sub(t0.max(a));
            if overlap == 0 || z <= a {
                continue;
            }
            let share = overlap as f64 / (z - a) as f64;
            for (&p, &b) in &j.ports {
                *out.entry(p).or_default() += (b as f64 * share) as u64;
            }
        }
        out
    }
}

/// Peak resident set size of this process (VmHWM), when the OS tells.
pub fn peak_rss() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}
