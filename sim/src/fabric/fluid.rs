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
use crate::options::{Progress, SimError};
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

impl World<'_> {
    /// Why this run cannot be moved as rates, if it cannot.
    fn fluid_refusal(&self) -> Option<String> {
        if !self.cfg.faults.is_empty() || self.cfg.overrides.iter().any(|o| !o.window.always()) {
            return Some(
                "faults and timed overrides act on frames and links in time: run them in packet mode"
                    .into(),
            );
        }
        if let Some(f) = self.flows.iter().find(|f| f.post.is_some()) {
            return Some(format!(
                "flow {} follows perftest's posting loop (latency and message rate are per packet): run it in packet mode",
                f.id
            ));
        }
        if self.nics.iter().any(|n| n.host_side.is_some()) {
            return Some(
                "a host model (nic.host) paces frames through PCIe: run it in packet mode".into(),
            );
        }
        if self.taps.is_some() {
            return Some("captures (record.pcap) need frames: run it in packet mode".into());
        }
        None
    }

    /// Run the flows as rates (see the module docs) and collect the same
    /// results as [`World::run`], with `fluid` saying what was left out.
    pub fn run_fluid(mut self) -> Result<(RunResult, RunStats), SimError> {
        if let Some(why) = self.fluid_refusal() {
            return Err(SimError::Config(ConfigError::new(
                "fidelity",
                format!("fluid: {why}"),
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
        let mut live: Vec<Live> = Vec::new();
        let mut share = Share::default();
        let mut qp_busy = vec![false; self.qps.qps.len()];
        // Flows waiting for their queue pair, first posted first (ties
        // by id).
        let mut qp_wait: std::collections::HashMap<u32, BinaryHeap<Reverse<(u64, u32)>>> =
            std::collections::HashMap::new();
        let mut starting: Vec<u32> = Vec::new();
        // Rates hold from `t_set` on, where every live flow's `rem` was
        // taken; `next_fin` is when the first of them will finish.
        let mut t = 0f64;
        let mut t_set = 0f64;
        let mut next_fin: Option<f64> = None;
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
            let next_q = self.q.peek_time().map(|x| x.as_ps() as f64);
            let (at, finishing) = match (next_fin, next_q) {
                (Some(a), Some(b)) if a < b => (a, true),
                (Some(a), None) => (a, true),
                (_, Some(b)) => (b, false),
                (None, None) => {
                    self.stop_reason = "idle";
                    break;
                }
            };
            if end.is_some_and(|e| at > e as f64) {
                self.stop_reason = "duration";
                let e = end.unwrap_or(0) as f64;
                advance(&mut live, e - t_set);
                t = e;
                break;
            }
            t = at;
            let mut dirty = false;
            let now = Instant::from_ps(t.round() as u64).max(self.q.now());
            steps += 1;
            if finishing {
                advance(&mut live, t - t_set);
                t_set = t;
                dirty = true;
                // Every flow whose last byte left now (rates are equal
                // for flows that tie, so they finish together).
                let mut i = 0;
                while i < live.len() {
                    let f = &live[i];
                    if f.rem <= 1e-6 * (f.wire as f64) + 1e-3 {
                        let f = live.swap_remove(i);
                        self.fluid_sent(&f);
                        self.q
                            .schedule(now + Duration::from_ps(f.land), Ev::FluidLand(f.id));
                        self.q
                            .schedule(now + Duration::from_ps(f.land + f.ack), Ev::FluidDone(f.id));
                        let qp = self.flow_state[f.id as usize].qp;
                        qp_busy[qp as usize] = false;
                        if let Some(Reverse((_, n))) =
                            qp_wait.get_mut(&qp).and_then(BinaryHeap::pop)
                        {
                            qp_busy[qp as usize] = true;
                            live.push(self.fluid_live(n));
                        }
                    } else {
                        i += 1;
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
                if !starting.is_empty() {
                    advance(&mut live, t - t_set);
                    t_set = t;
                }
                for id in starting.drain(..) {
                    let qp = self.flow_state[id as usize].qp;
                    if qp_busy[qp as usize] {
                        qp_wait
                            .entry(qp)
                            .or_default()
                            .push(Reverse((now.as_ps(), id)));
                    } else {
                        qp_busy[qp as usize] = true;
                        live.push(self.fluid_live(id));
                        dirty = true;
                    }
                }
            }
            if dirty {
                share.assign(&mut live, &cap);
                next_fin = None;
                for f in &live {
                    if f.rate > 0.0 {
                        let at = t_set + f.rem / f.rate;
                        next_fin = Some(next_fin.map_or(at, |x: f64| x.min(at)));
                    }
                }
            }
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
        result.fluid = Some(FluidRecord {
            leaves_out: LEAVES_OUT.iter().map(|s| s.to_string()).collect(),
            check: None,
        });
        let stats = RunStats {
            setup_secs: self.setup_secs,
            run_secs,
            events,
            events_per_sec: events as f64 / run_secs.max(1e-9),
            sim_secs_per_wall_sec: now.since_zero().as_secs_f64() / run_secs.max(1e-9),
            peak_rss_bytes: super::peak_rss(),
        };
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

/// Move every live flow `dt` ps at its rate.
fn advance(live: &mut [Live], dt: f64) {
    if dt <= 0.0 {
        return;
    }
    for f in live {
        f.rem = (f.rem - f.rate * dt).max(0.0);
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
