//! Fluid mode: the same fabric, flows and dependencies as the packet
//! model, with each flow moved as a rate instead of as frames.
//!
//! Contract (units: ps, bytes, bytes per ps):
//!
//! * A fabric flow takes the path ECMP hashes it onto (the packet model's
//!   [`World::path_ports`]) and moves its wire bytes (payload plus 62
//!   bytes of headers per packet and a RETH per WRITE message) at a rate.
//!   Rates are **max-min fair** over the egress ports of every flow in
//!   transfer (progressive filling): no port carries more than its link
//!   rate, and no flow can gain without taking from one with less. A NIC
//!   with a receive drain rate caps the link into it at that rate.
//! * The flows of one queue pair move one after another, in the order
//!   they were posted, as its send queue serves them.
//! * A flow's last byte lands at its destination one store-and-forward
//!   frame per hop after the first plus the path's propagation delay
//!   after it left; its requester sees the completion an ACK's trip
//!   later. Waiters are released at either, as in the packet model
//!   ([`crate::workload::FlowSpec::landing`]); local copies (NVLink,
//!   PCIe) run exactly as in the packet model.
//! * Rates change only when a flow starts or ends; between those instants
//!   every flow moves at a constant rate, so a run costs a few events per
//!   flow, not per packet.
//!
//! What it leaves out is listed in [`LEAVES_OUT`] (and in results.json):
//! buffers, PFC and its head-of-line blocking, ECN and congestion
//! control dynamics, loss and retransmission, priorities. Runs it cannot
//! model faithfully (faults, timed overrides, perftest's posting loops,
//! host models, captures) are refused with the reason.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use roce::time::{Duration, Instant};

use super::event::Ev;
use super::World;
use crate::config::ConfigError;
use crate::options::{Fidelity, Progress, SimError};
use crate::results::{FluidRecord, RunResult, RunStats};
use crate::workload::FlowOp;

/// What fluid mode does not model (results.json `fluid.leaves_out`).
pub const LEAVES_OUT: &[&str] = &[
    "switch buffers and queueing delay: a port's excess demand is shared, never queued",
    "PFC: no PAUSE, so no head-of-line blocking, congestion spreading, storms or deadlocks",
    "ECN and congestion control: flows take their max-min fair share at once",
    "loss and retransmission: every byte arrives once",
    "priorities and the scheduler: all traffic classes share a port max-min fairly",
];

/// A flow in transfer.
struct Live {
    id: u32,
    /// Wire bytes left.
    rem: f64,
    /// Its max-min rate, bytes per ps.
    rate: f64,
    /// When `rem` was taken, ps.
    t_upd: f64,
    /// When its transfer began, ps.
    t0: f64,
    /// Set at each new rate from a run-wide counter (a slot is reused
    /// by later flows): older finish times in the heap are stale.
    ver: u64,
    /// Egress ports of its path.
    path: Vec<u32>,
    /// Last byte out to landing, and landing to the completion, ps.
    land: u64,
    ack: u64,
    /// Wire bytes and frames (for the port counters).
    wire: u64,
    frames: u64,
}

/// Scratch state of the max-min computation, kept between rounds.
#[derive(Default)]
struct Share {
    left: Vec<f64>,
    count: Vec<u32>,
    flows_on: Vec<Vec<u32>>,
    touched: Vec<u32>,
    frozen: Vec<bool>,
    heap: BinaryHeap<Reverse<(u64, u32)>>,
}

impl Share {
    /// Set `rate` of every live flow to its max-min fair share of
    /// `cap` (bytes per ps per port).
    fn assign(&mut self, live: &mut [Live], cap: &[f64]) {
        if self.left.len() < cap.len() {
            self.left.resize(cap.len(), 0.0);
            self.count.resize(cap.len(), 0);
            self.flows_on.resize_with(cap.len(), Vec::new);
        }
        for &p in &self.touched {
            self.count[p as usize] = 0;
            self.flows_on[p as usize].clear();
        }
        self.touched.clear();
        for (i, f) in live.iter().enumerate() {
            for &p in &f.path {
                let pi = p as usize;
                if self.flows_on[pi].is_empty() {
                    self.touched.push(p);
                    self.left[pi] = cap[pi];
                }
                self.count[pi] += 1;
                self.flows_on[pi].push(i as u32);
            }
        }
        let key = |left: f64, n: u32| (left.max(0.0) / f64::from(n)).to_bits();
        self.heap.clear();
        for &p in &self.touched {
            let pi = p as usize;
            self.heap
                .push(Reverse((key(self.left[pi], self.count[pi]), p)));
        }
        self.frozen.clear();
        self.frozen.resize(live.len(), false);
        // Progressive filling: the port with the smallest fair share
        // fixes its flows at it; shares of the others only grow, so an
        // entry whose key no longer matches is stale.
        while let Some(Reverse((k, p))) = self.heap.pop() {
            let pi = p as usize;
            let n = self.count[pi];
            if n == 0 || key(self.left[pi], n) != k {
                continue;
            }
            let share = self.left[pi].max(0.0) / f64::from(n);
            for j in 0..self.flows_on[pi].len() {
                let i = self.flows_on[pi][j] as usize;
                if self.frozen[i] {
                    continue;
                }
                self.frozen[i] = true;
                live[i].rate = share;
                for &q in &live[i].path {
                    let qi = q as usize;
                    self.left[qi] -= share;
                    self.count[qi] -= 1;
                    if q != p && self.count[qi] > 0 {
                        self.heap
                            .push(Reverse((key(self.left[qi], self.count[qi]), q)));
                    }
                }
            }
        }
    }
}

/// Flows closer together than this finish together (ps): a batch of
/// equal transfers that started a few ns apart is one rate change, not
/// one per flow.
const FINISH_WINDOW_PS: f64 = 5_000.0;
/// ... or closer than this share of the first one's transfer time: a
/// flow may end up to 0.5 % of its transfer early, so that the hundreds
/// of transfers of an all-to-all that end close together cost one rate
/// change instead of one each.
const FINISH_WINDOW_SHARE: f64 = 0.005;

/// The flows in transfer and their rates, recomputed only for the
/// flows that share a port, directly or through others, with a flow
/// that started or ended: max-min shares of separate components do not
/// depend on each other.
struct Rates {
    /// Capacity per port, bytes per ps.
    cap: Vec<f64>,
    /// Live flows by slot.
    slab: Vec<Option<Live>>,
    free: Vec<u32>,
    /// Slots of the live flows on each port.
    on_port: Vec<Vec<u32>>,
    /// Ports whose flows changed since the last settle.
    touched: Vec<u32>,
    /// Finish times (bits of a positive f64), slot, version.
    finish: BinaryHeap<Reverse<(u64, u32, u64)>>,
    /// The last version handed out.
    ver: u64,
    share: Share,
    /// Scratch of the component search: stamps per port and slot.
    port_mark: Vec<u32>,
    slot_mark: Vec<u32>,
    stamp: u32,
}

impl Rates {
    fn new(cap: Vec<f64>) -> Rates {
        let n = cap.len();
        Rates {
            cap,
            slab: Vec::new(),
            free: Vec::new(),
            on_port: vec![Vec::new(); n],
            touched: Vec::new(),
            finish: BinaryHeap::new(),
            ver: 0,
            share: Share::default(),
            port_mark: vec![0; n],
            slot_mark: Vec::new(),
            stamp: 0,
        }
    }

    /// A flow begins its transfer at `t`.
    fn add(&mut self, mut f: Live, t: f64) {
        f.t_upd = t;
        f.t0 = t;
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                self.slab.push(None);
                self.slot_mark.push(0);
                (self.slab.len() - 1) as u32
            }
        };
        for &p in &f.path {
            self.on_port[p as usize].push(slot);
            self.touched.push(p);
        }
        self.slab[slot as usize] = Some(f);
    }

    /// When the first live flow finishes at today's rates.
    fn next_finish(&mut self) -> Option<f64> {
        while let Some(&Reverse((bits, slot, ver))) = self.finish.peek() {
            match &self.slab[slot as usize] {
                Some(f) if f.ver == ver => return Some(f64::from_bits(bits)),
                _ => {
                    self.finish.pop();
                }
            }
        }
        None
    }

    /// Take every flow due to finish by `t` (and those within
    /// [`FINISH_WINDOW_PS`] of it), in finish order.
    fn take_finished(&mut self, t: f64) -> Vec<Live> {
        let mut out = Vec::new();
        let mut window = FINISH_WINDOW_PS;
        while let Some(&Reverse((bits, slot, ver))) = self.finish.peek() {
            if f64::from_bits(bits) > t + window {
                break;
            }
            self.finish.pop();
            let fresh = self.slab[slot as usize]
                .as_ref()
                .is_some_and(|f| f.ver == ver);
            if !fresh {
                continue;
            }
            let Some(f) = self.slab[slot as usize].take() else {
                continue;
            };
            for &p in &f.path {
                let list = &mut self.on_port[p as usize];
                if let Some(i) = list.iter().position(|&s| s == slot) {
                    list.swap_remove(i);
                }
                self.touched.push(p);
            }
            self.free.push(slot);
            if out.is_empty() {
                window = window.max(FINISH_WINDOW_SHARE * (t - f.t0));
            }
            out.push(f);
        }
        out
    }

    /// New rates at `t` for the flows connected to the touched ports.
    fn settle(&mut self, t: f64) {
        if self.touched.is_empty() {
            return;
        }
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            self.port_mark.iter_mut().for_each(|m| *m = 0);
            self.slot_mark.iter_mut().for_each(|m| *m = 0);
            self.stamp = 1;
        }
        let stamp = self.stamp;
        // The component: flows reachable from the touched ports through
        // the ports they cross.
        let mut ports = std::mem::take(&mut self.touched);
        for &p in &ports {
            self.port_mark[p as usize] = stamp;
        }
        let mut comp: Vec<u32> = Vec::new();
        let mut i = 0;
        while i < ports.len() {
            let p = ports[i] as usize;
            i += 1;
            for k in 0..self.on_port[p].len() {
                let slot = self.on_port[p][k];
                if self.slot_mark[slot as usize] == stamp {
                    continue;
                }
                self.slot_mark[slot as usize] = stamp;
                comp.push(slot);
                if let Some(f) = &self.slab[slot as usize] {
                    for &q in &f.path {
                        if self.port_mark[q as usize] != stamp {
                            self.port_mark[q as usize] = stamp;
                            ports.push(q);
                        }
                    }
                }
            }
        }
        ports.clear();
        self.touched = ports;
        let mut flows: Vec<Live> = comp
            .iter()
            .filter_map(|&s| self.slab[s as usize].take())
            .collect();
        let old: Vec<f64> = flows.iter().map(|f| f.rate).collect();
        self.share.assign(&mut flows, &self.cap);
        for ((&slot, mut f), was) in comp.iter().zip(flows).zip(old) {
            // A flow whose rate did not change keeps its progress
            // stamp and its finish time in the heap.
            if f.rate != was || f.ver == 0 {
                f.rem = (f.rem - was * (t - f.t_upd)).max(0.0);
                f.t_upd = t;
                self.ver += 1;
                f.ver = self.ver;
                if f.rate > 0.0 {
                    let at = t + f.rem / f.rate;
                    self.finish.push(Reverse((at.to_bits(), slot, f.ver)));
                }
            }
            self.slab[slot as usize] = Some(f);
        }
        // Stale finish times pile up under frequent recomputes: start
        // the heap afresh when most of it is stale.
        let live = self.slab.len() - self.free.len();
        if self.finish.len() > 4 * live + 1024 {
            let fresh: Vec<Reverse<(u64, u32, u64)>> = self
                .slab
                .iter()
                .enumerate()
                .filter_map(|(slot, f)| {
                    let f = f.as_ref().filter(|f| f.rate > 0.0)?;
                    let at = f.t_upd + f.rem / f.rate;
                    Some(Reverse((at.to_bits(), slot as u32, f.ver)))
                })
                .collect();
            self.finish = BinaryHeap::from(fresh);
        }
    }
}

impl World<'_> {
    /// Run the flows as rates (see the module docs) and collect the same
    /// results as [`World::run`], with `fluid` saying what was left out.
    pub fn run_fluid(mut self) -> Result<(RunResult, RunStats), SimError> {
        if let Some(why) = Fidelity::fluid_refusal(self.cfg, self.flows) {
            return Err(SimError::Config(ConfigError::new(
                "fidelity",
                format!("fluid: {why}; run it in packet mode"),
            )));
        }
        let wall = std::time::Instant::now();
        let end = self.opts.duration.map(|d| (Instant::ZERO + d).as_ps());
        // Port capacities, bytes per ps; a NIC that drains slower than
        // its link caps the link into it.
        let mut cap: Vec<f64> = self
            .ports
            .iter()
            .map(|p| p.rate.bps() as f64 / 8e12)
            .collect();
        for n in &self.nics {
            if let Some(r) = n.drain_cfg {
                let into = self.ports[n.port as usize].peer as usize;
                cap[into] = cap[into].min(r.bps() as f64 / 8e12);
            }
        }
        let mut rates = Rates::new(cap);
        let mut qp_busy = vec![false; self.qps.qps.len()];
        // Flows waiting for their queue pair, first posted first (ties
        // by id).
        let mut qp_wait: std::collections::HashMap<u32, BinaryHeap<Reverse<(u64, u32)>>> =
            std::collections::HashMap::new();
        let mut starting: Vec<u32> = Vec::new();
        let mut t = 0f64;
        let mut steps = 0u64;
        let mut last_check = 0u64;
        loop {
            if self.flows_open == 0 && !self.flows.is_empty() {
                self.stop_reason = "flows_done";
                break;
            }
            if self.q.processed() + steps >= self.opts.max_events {
                self.stop_reason = "event_budget";
                break;
            }
            if steps & ((1 << 14) - 1) == 0 && self.opts.stopped() {
                self.stop_reason = "interrupted";
                break;
            }
            let next_q = self.q.peek_time().map(|x| x.as_ps() as f64);
            let (at, finishing) = match (rates.next_finish(), next_q) {
                (Some(a), Some(b)) if a < b => (a, true),
                (Some(a), None) => (a, true),
                (_, Some(b)) => (b, false),
                (None, None) => {
                    self.stop_reason = "idle";
                    break;
                }
            };
            if let Some(e) = end.filter(|&e| at > e as f64) {
                self.stop_reason = "duration";
                t = e as f64;
                break;
            }
            t = at;
            let now = Instant::from_ps(t.round() as u64).max(self.q.now());
            steps += 1;
            if finishing {
                for f in rates.take_finished(t) {
                    self.fluid_sent(&f);
                    self.q
                        .schedule(now + Duration::from_ps(f.land), Ev::FluidLand(f.id));
                    self.q
                        .schedule(now + Duration::from_ps(f.land + f.ack), Ev::FluidDone(f.id));
                    let qp = self.flow_state[f.id as usize].qp;
                    qp_busy[qp as usize] = false;
                    if let Some(Reverse((_, n))) = qp_wait.get_mut(&qp).and_then(BinaryHeap::pop) {
                        qp_busy[qp as usize] = true;
                        rates.add(self.fluid_live(n), t);
                    }
                }
                self.last_active = now;
            } else {
                while self.q.peek_time() == Some(Instant::from_ps(t as u64)) {
                    let Some((now, ev)) = self.q.pop() else { break };
                    match ev {
                        Ev::FlowStart(id) if self.flows[id as usize].local.is_some() => {
                            self.flow_start(id, now);
                        }
                        Ev::FlowStart(id) => {
                            self.flow_state[id as usize].posted_at = Some(now);
                            starting.push(id);
                        }
                        Ev::LocalDone(id) => {
                            self.local_done(id, now);
                            self.last_active = now;
                        }
                        Ev::FluidLand(id) if self.flows[id as usize].landing => {
                            self.release_dependents(id, now);
                        }
                        Ev::FluidDone(id) => {
                            let f = &self.flows[id as usize];
                            let st = &mut self.flow_state[id as usize];
                            st.finish = Some(now);
                            st.done = st.msgs;
                            st.posted = st.msgs;
                            st.bytes_acked = f.size;
                            self.flows_open -= 1;
                            self.release_dependents(id, now);
                            self.last_active = now;
                        }
                        // Samplers, watchdog polls and deadlock checks
                        // watch queues fluid mode does not have.
                        _ => {}
                    }
                }
                // Flows posted at one instant take their queue pairs in
                // post (id) order, whichever release came first.
                starting.sort_unstable();
                for id in starting.drain(..) {
                    let qp = self.flow_state[id as usize].qp;
                    if qp_busy[qp as usize] {
                        qp_wait
                            .entry(qp)
                            .or_default()
                            .push(Reverse((now.as_ps(), id)));
                    } else {
                        qp_busy[qp as usize] = true;
                        rates.add(self.fluid_live(id), t);
                    }
                }
            }
            rates.settle(t);
            if let Some(observe) = &self.opts.progress {
                if steps - last_check >= 1 << 14 {
                    last_check = steps;
                    let total = self.flows.len();
                    observe(&Progress {
                        variant: &self.opts.variant,
                        wall: wall.elapsed(),
                        now,
                        end: end.map(Instant::from_ps),
                        flows_done: total - self.flows_open,
                        flows_total: total,
                        events: self.q.processed() + steps,
                    });
                }
            }
        }
        let now = match self.stop_reason {
            "duration" => Instant::from_ps(t as u64),
            _ => self.last_active,
        };
        let run_secs = wall.elapsed().as_secs_f64();
        let events = self.q.processed() + steps;
        let mut result = self.collect(now);
        let stats = self.run_stats(run_secs, events, now);
        result.fluid = Some(FluidRecord {
            leaves_out: LEAVES_OUT.iter().map(|s| s.to_string()).collect(),
            check: None,
        });
        Ok((result, stats))
    }

    /// Flow `id` begins its transfer: its path, wire bytes and latencies.
    fn fluid_live(&self, id: u32) -> Live {
        let f = &self.flows[id as usize];
        let mtu = self.cfg.nic.mtu.bytes().max(1);
        let packets = f.size.div_ceil(mtu).max(1);
        let messages = f.size.div_ceil(f.message_size.max(1)).max(1);
        let reth = if f.op == FlowOp::Write { 16 } else { 0 };
        let wire = f.size + packets * 62 + messages * reth;
        let frame = f.size.min(mtu) + 62;
        let path = self.path_ports(f);
        let (mut land, mut ack) = (Duration::ZERO, Duration::ZERO);
        for (k, &p) in path.iter().enumerate() {
            let port = &self.ports[p as usize];
            land += port.delay;
            ack += port.delay + port.rate.serialization_time(64);
            if k > 0 {
                land += port.rate.serialization_time(frame);
            }
        }
        Live {
            id,
            rem: wire as f64,
            rate: 0.0,
            t_upd: 0.0,
            t0: 0.0,
            ver: 0,
            path,
            land: land.as_ps(),
            ack: ack.as_ps(),
            wire,
            frames: packets,
        }
    }

    /// Count a finished transfer on the ports it crossed.
    fn fluid_sent(&mut self, f: &Live) {
        let prio = usize::from(self.flows[f.id as usize].priority.min(7));
        for &p in &f.path {
            let port = &mut self.ports[p as usize];
            port.frames_sent += f.frames;
            port.prio[prio].tx_bytes += f.wire;
            port.prio[prio].tx_packets += f.frames;
            let peer = port.peer as usize;
            self.ports[peer].prio[prio].rx_bytes += f.wire;
            self.ports[peer].prio[prio].rx_packets += f.frames;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(path: &[u32]) -> Live {
        Live {
            id: 0,
            rem: 1.0,
            rate: 0.0,
            t_upd: 0.0,
            t0: 0.0,
            ver: 0,
            path: path.to_vec(),
            land: 0,
            ack: 0,
            wire: 1,
            frames: 1,
        }
    }

    /// The textbook case: two flows share link 0 (capacity 1), one of
    /// them also crosses link 1 (capacity 0.3): it gets 0.3, the other
    /// the remaining 0.7; a third flow alone on link 2 gets all of it.
    #[test]
    fn max_min_gives_the_unconstrained_flow_what_the_bottlenecked_leaves() {
        let mut live = vec![flow(&[0, 1]), flow(&[0]), flow(&[2])];
        let cap = [1.0, 0.3, 5.0];
        Share::default().assign(&mut live, &cap);
        let r: Vec<f64> = live.iter().map(|f| f.rate).collect();
        assert!((r[0] - 0.3).abs() < 1e-12, "{r:?}");
        assert!((r[1] - 0.7).abs() < 1e-12, "{r:?}");
        assert!((r[2] - 5.0).abs() < 1e-12, "{r:?}");
    }

    /// A slot freed by a finished flow and taken by a new one: a finish
    /// time left in the heap from the old flow's earlier, slower rate
    /// must not end the new flow (it once did when versions counted per
    /// flow).
    #[test]
    fn a_reused_slot_never_takes_an_older_flows_finish_time() {
        let mut r = Rates::new(vec![1.0; 2]);
        let (mut a, mut b) = (flow(&[0]), flow(&[0]));
        (a.id, a.rem, b.id, b.rem) = (1, 1e8, 2, 1e7);
        r.add(a, 0.0);
        r.add(b, 0.0);
        r.settle(0.0);
        // Both at 0.5: b ends at 2e7 ps, a would end at 2e8.
        assert_eq!(r.next_finish(), Some(2e7));
        let done: Vec<u32> = r.take_finished(2e7).iter().map(|f| f.id).collect();
        assert_eq!(done, [2]);
        r.settle(2e7);
        // a alone at 1.0: 9e7 left, ends at 1.1e8.
        assert_eq!(r.next_finish(), Some(1.1e8));
        let done: Vec<u32> = r.take_finished(1.1e8).iter().map(|f| f.id).collect();
        assert_eq!(done, [1]);
        r.settle(1.1e8);
        let mut c = flow(&[1]);
        (c.id, c.rem) = (3, 1e9);
        r.add(c, 1.1e8);
        r.settle(1.1e8);
        assert_eq!(r.next_finish(), Some(1.11e9));
    }

    /// An incast: n flows into one link share it equally, and no link
    /// carries more than its capacity.
    #[test]
    fn an_incast_shares_the_last_link_equally() {
        let n = 7;
        let mut live: Vec<Live> = (0..n).map(|i| flow(&[10 + i, 99])).collect();
        let mut cap = vec![1.0; 100];
        cap[99] = 0.7;
        Share::default().assign(&mut live, &cap);
        for f in &live {
            assert!((f.rate - 0.1).abs() < 1e-12, "{}", f.rate);
        }
    }
}
