//! Live PFC deadlock detection.
//!
//! A switch egress queue (port, lossless priority) is **held** when it has
//! frames, its transmitter is held off by PAUSE (and the watchdog does not
//! override it), and the peer switch port that sent the PAUSE still holds
//! XOFF. A held queue `B` waits for the frames of the peer's ingress
//! (port, priority) `I` to leave: they sit in egress queues of the peer
//! switch. The **buffer dependency graph** has an edge `B -> B'` for every
//! held queue `B'` holding frames of `I`; a held queue whose `I` also has
//! frames in a queue that is not held (or none at all) can drain, and so
//! can every queue that waits for a queue that can drain. What is left
//! can never drain: a deadlock. Its strongly connected components of more
//! than one queue (petgraph's Tarjan) are the cycles reported, each once
//! for as long as it lasts.
//!
//! Cost: nothing while no switch port holds XOFF. The first XOFF of a
//! switch port schedules a check `check_interval` later; checks repeat
//! every `check_interval` while some switch port holds XOFF. A check
//! scans the switch ports (not the frames) and, only when the port-level
//! graph (every held queue of the peer switch) has a cycle, the frames of
//! the held queues' priority at the peer switches. A deadlock is reported
//! at most `check_interval` after it formed.
//!
//! `formed_ps` of a report is the latest start of the members' held-off
//! intervals: the moment the cycle closed.
//!
//! On InfiniBand links the same graph holds with credits in place of
//! PAUSE: a queue is held when its head frame lacks the peer switch's
//! credits, which return only as frames of that ingress leave the peer
//! (a credit loop). Checks are armed by a switch port starting to wait
//! for credits and repeat while any switch port waits.

use petgraph::algo::{is_cyclic_directed, tarjan_scc};
use petgraph::graph::{DiGraph, NodeIndex};
use roce::time::Instant;

use super::event::{Ev, NONE};
use super::world::World;
use crate::results::{DeadlockRecord, QueueRef};

/// One held queue.
#[derive(Debug, Clone, Copy)]
struct Held {
    /// Global id of the egress port.
    port: u32,
    prio: u8,
    /// Switch index of the peer (where the frames it waits for sit).
    peer_switch: u32,
    /// Local number of the peer's ingress port.
    peer_local: u16,
}

impl World<'_> {
    /// A switch port started holding XOFF: make sure a check is coming.
    pub(crate) fn deadlock_arm(&mut self, now: Instant) {
        let Some(d) = self.deadlock.as_deref_mut() else {
            return;
        };
        if !d.pending {
            d.pending = true;
            let at = now + d.interval;
            self.q.schedule(at, Ev::DeadlockCheck);
        }
    }

    /// Look for deadlocks; schedule the next check while XOFF is held.
    // Off the healthy path: kept out of the event loop's inlined body.
    #[cold]
    #[inline(never)]
    pub(crate) fn deadlock_check(&mut self, now: Instant) {
        let Some(mut d) = self.deadlock.take() else {
            return;
        };
        d.pending = false;
        let (any_xoff, held) = self.held_queues(now);
        let found = if held.len() < 2 {
            Vec::new()
        } else {
            self.stuck_cycles(&held)
        };
        let mut live = Vec::with_capacity(found.len());
        for (prio, members) in found {
            let key = (prio, members);
            if !d.live.contains(&key) {
                d.records.push(self.deadlock_record(key.0, &key.1, now));
                if d.stop {
                    self.halt = true;
                }
            }
            live.push(key);
        }
        d.live = live;
        if any_xoff && !self.halt {
            d.pending = true;
            self.q.schedule(now + d.interval, Ev::DeadlockCheck);
        }
        self.deadlock = Some(d);
    }

    /// Whether any switch port holds XOFF, and the held queues in (port,
    /// priority) order.
    fn held_queues(&self, now: Instant) -> (bool, Vec<Held>) {
        let mut any = false;
        let mut held = Vec::new();
        for s in &self.switches {
            let n = self.topo.nodes[s.node as usize].ports.len() as u32;
            for p in s.port_base..s.port_base + n {
                let port = &self.ports[p as usize];
                if port.ib.is_some() {
                    // InfiniBand: a lane is held when its head frame lacks
                    // the peer switch's credits, which come back only as
                    // the peer's frames of that ingress leave.
                    let mut mask = self.ib_starved(p as usize);
                    any |= mask != 0;
                    let peer = &self.ports[port.peer as usize];
                    let peer_switch = self.switch_of_node[peer.node as usize];
                    while mask != 0 && peer_switch != NONE {
                        let prio = mask.trailing_zeros() as u8;
                        mask &= mask - 1;
                        held.push(Held {
                            port: p,
                            prio,
                            peer_switch,
                            peer_local: peer.local,
                        });
                    }
                    continue;
                }
                let mut mask = port.pfc_mask;
                while mask != 0 {
                    let prio = mask.trailing_zeros() as u8;
                    mask &= mask - 1;
                    let pr = usize::from(prio);
                    if self.ports[port.peer as usize].xoff_since[pr].is_some() {
                        any = true;
                    }
                    if port.queues[pr].is_empty()
                        || port.paused_until[pr] <= now
                        || port.wd_ignore & (1 << prio) != 0
                    {
                        continue;
                    }
                    let peer = &self.ports[port.peer as usize];
                    let peer_switch = self.switch_of_node[peer.node as usize];
                    if peer_switch == NONE || peer.xoff_since[pr].is_none() {
                        continue;
                    }
                    held.push(Held {
                        port: p,
                        prio,
                        peer_switch,
                        peer_local: peer.local,
                    });
                }
            }
        }
        held.sort_by_key(|h| (h.port, h.prio));
        (any, held)
    }

    /// Index of the held queue (`port`, `prio`) in sorted `held`.
    fn held_index(held: &[Held], port: u32, prio: u8) -> Option<usize> {
        held.binary_search_by_key(&(port, prio), |h| (h.port, h.prio))
            .ok()
    }

    /// The deadlocked cycles among `held`: (priority, sorted member
    /// ports), in order of their smallest member.
    fn stuck_cycles(&self, held: &[Held]) -> Vec<(u8, Vec<u32>)> {
        // Port level first: B -> every held queue of the same priority at
        // the peer switch. No cycle there, no deadlock.
        let mut coarse: DiGraph<(), ()> = DiGraph::with_capacity(held.len(), held.len());
        let nodes: Vec<NodeIndex> = held.iter().map(|_| coarse.add_node(())).collect();
        for (i, h) in held.iter().enumerate() {
            let s = &self.switches[h.peer_switch as usize];
            let n = self.topo.nodes[s.node as usize].ports.len() as u32;
            for p in s.port_base..s.port_base + n {
                if let Some(j) = Self::held_index(held, p, h.prio) {
                    coarse.add_edge(nodes[i], nodes[j], ());
                }
            }
        }
        if !is_cyclic_directed(&coarse) {
            return Vec::new();
        }
        // Frame level: where the frames of each peer ingress really are.
        let mut succ: Vec<Vec<usize>> = vec![Vec::new(); held.len()];
        let mut drains = vec![false; held.len()];
        for (i, h) in held.iter().enumerate() {
            let s = &self.switches[h.peer_switch as usize];
            let n = self.topo.nodes[s.node as usize].ports.len() as u32;
            let mut any = false;
            for p in s.port_base..s.port_base + n {
                let q = &self.ports[p as usize].queues[usize::from(h.prio)];
                if !self
                    .pkts
                    .iter(q)
                    .any(|f| self.pkts.get(f).ingress == h.peer_local)
                {
                    continue;
                }
                any = true;
                match Self::held_index(held, p, h.prio) {
                    Some(j) => succ[i].push(j),
                    None => drains[i] = true,
                }
            }
            if !any {
                drains[i] = true;
            }
        }
        // A queue drains when any queue it waits for drains.
        let mut dead: Vec<bool> = drains.iter().map(|&d| !d).collect();
        loop {
            let mut changed = false;
            for i in 0..held.len() {
                if dead[i] && succ[i].iter().any(|&j| !dead[j]) {
                    dead[i] = false;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        let mut g: DiGraph<usize, ()> = DiGraph::new();
        let mut idx = vec![NodeIndex::end(); held.len()];
        for i in (0..held.len()).filter(|&i| dead[i]) {
            idx[i] = g.add_node(i);
        }
        for i in (0..held.len()).filter(|&i| dead[i]) {
            for &j in &succ[i] {
                g.add_edge(idx[i], idx[j], ());
            }
        }
        let mut out: Vec<(u8, Vec<u32>)> = tarjan_scc(&g)
            .into_iter()
            .filter(|c| c.len() > 1)
            .map(|c| {
                let mut m: Vec<u32> = c.iter().map(|&n| held[g[n]].port).collect();
                m.sort_unstable();
                (held[g[c[0]]].prio, m)
            })
            .collect();
        out.sort();
        out
    }

    fn deadlock_record(&self, prio: u8, members: &[u32], now: Instant) -> DeadlockRecord {
        let name = |n: u32| self.topo.nodes[n as usize].name.clone();
        let formed = members
            .iter()
            .filter_map(|&p| {
                let port = &self.ports[p as usize];
                match port.ib.as_deref() {
                    Some(ib) => ib.wait_since,
                    None => port.pause_began[usize::from(prio)],
                }
            })
            .max()
            .unwrap_or(now);
        DeadlockRecord {
            priority: prio,
            formed_ps: formed.as_ps(),
            detected_ps: now.as_ps(),
            members: members
                .iter()
                .map(|&p| {
                    let port = &self.ports[p as usize];
                    QueueRef {
                        node: name(port.node),
                        port: port.local,
                        peer: name(self.ports[port.peer as usize].node),
                    }
                })
                .collect(),
        }
    }
}
