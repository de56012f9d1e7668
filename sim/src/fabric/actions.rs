//! Faults and timed overrides applied to the running fabric. Once, when
//! the world is built, the scenario's fault plans
//! ([`crate::faults::FaultPlan`]) and timed `[[override]]` entries become
//! wrappers on ports ([`Impairments`](super::impairments::Impairments))
//! and [`Action`]s scheduled at their times; each action, when its event
//! comes, changes a port, a switch, a NIC or the routes.

use roce::time::{Instant, Rate};

use super::event::{Ev, NONE};
use super::impairments::{Action, Rule, Verdict};
use super::packet::ETH_OVERHEAD;
use super::settings::{
    classify_table, ecn_table, pfc_mask, static_fabric, static_nic, switch_table,
};
use super::switch::PfcChange;
use super::world::{Balancer, World};
use crate::config::OverrideSetting;
use crate::engine::{derive_rng, StreamKind};
use crate::faults::{FaultPlan, WireFault};
use crate::options::SimError;
use crate::topology::{NodeId, Routes};

impl World<'_> {
    /// Turn the configured faults and timed overrides into wrappers and
    /// scheduled actions. Runs once, after the ports, switches and NICs
    /// exist.
    pub(crate) fn install_faults(&mut self) -> Result<(), SimError> {
        let cfg = self.cfg;
        let topo = self.topo;
        let node_of = |name: &str, key: &str| {
            topo.find(name).ok_or_else(|| SimError::Selector {
                key: key.to_string(),
                message: format!("no node named {name:?}"),
            })
        };
        for (fi, f) in cfg.faults.iter().enumerate() {
            let key = format!("faults[{fi}]");
            let (plan, window) = f.plan(&key)?;
            let start = Instant::ZERO + window.start;
            let end = window.end.map(|e| Instant::ZERO + e);
            match plan {
                FaultPlan::Wire { from, to, wrapper } => {
                    let p = self.port_towards(node_of(&from, &key)?, node_of(&to, &key)?, &key)?;
                    let rng =
                        || Box::new(derive_rng(self.opts.seed, StreamKind::Link, u64::from(p)));
                    let rule = match wrapper {
                        WireFault::Loss(p) => Rule::Loss { p, rng: rng() },
                        WireFault::DropEvery(every) => Rule::DropEvery { every, count: 0 },
                        WireFault::Corrupt(p) => Rule::Corrupt { p, rng: rng() },
                        WireFault::CorruptEvery(every) => Rule::CorruptEvery { every, count: 0 },
                    };
                    self.wire_window(p, fi as u32, rule, start, end);
                }
                FaultPlan::Mtu { node, port, mtu } => {
                    let n = node_of(&node, &key)?;
                    if usize::from(port) >= topo.node(n).ports.len() {
                        return Err(SimError::Selector {
                            key: format!("{key}.port"),
                            message: format!("{node} has {} ports", topo.node(n).ports.len()),
                        });
                    }
                    // The wrapper sits on the direction into the port.
                    let me = self.node_port_base[n.0 as usize] + u32::from(port);
                    let into = self.ports[me as usize].peer;
                    let max_wire = u32::try_from(mtu).unwrap_or(u32::MAX) + ETH_OVERHEAD;
                    self.wire_window(into, fi as u32, Rule::Mtu { max_wire }, start, end);
                }
                FaultPlan::LinkDown {
                    a,
                    b,
                    windows,
                    convergence,
                } => {
                    let (na, nb) = (node_of(&a, &key)?, node_of(&b, &key)?);
                    let pa = self.port_towards(na, nb, &key)?;
                    let pb = self.ports[pa as usize].peer;
                    let link = topo.nodes[na.0 as usize].ports
                        [usize::from(self.ports[pa as usize].local)]
                    .0;
                    for (down, up) in windows {
                        let act = self.push_action(Action::LinkDown {
                            a: pa,
                            b: pb,
                            link,
                            convergence,
                        });
                        self.q.schedule(Instant::ZERO + down, Ev::Action(act));
                        if let Some(up) = up {
                            let act = self.push_action(Action::LinkUp {
                                a: pa,
                                b: pb,
                                link,
                                convergence,
                            });
                            self.q.schedule(Instant::ZERO + up, Ev::Action(act));
                        }
                    }
                }
                FaultPlan::StaticRoute { node, dest, via } => {
                    let (n, v) = (node_of(&node, &key)?, node_of(&via, &key)?);
                    let d = node_of(&dest, &key)?;
                    let sw = self.switch_of_node[n.0 as usize];
                    let host = self.host_of_node[d.0 as usize];
                    if sw == NONE || host == NONE {
                        return Err(SimError::Selector {
                            key,
                            message: format!("expected a switch {node} and a host {dest}"),
                        });
                    }
                    let p = self.port_towards(n, v, &key)?;
                    let local = self.ports[p as usize].local;
                    let entry = self.static_routes.len() as u32;
                    self.static_routes.push((sw, host, local, false));
                    let act = self.push_action(Action::StaticRoute { entry, on: true });
                    self.q.schedule(start, Ev::Action(act));
                    if let Some(end) = end {
                        let act = self.push_action(Action::StaticRoute { entry, on: false });
                        self.q.schedule(end, Ev::Action(act));
                    }
                }
                FaultPlan::Receiver { node, rate } => {
                    let n = node_of(&node, &key)?;
                    let host = self.host_of_node[n.0 as usize];
                    if host == NONE {
                        return Err(SimError::Selector {
                            key: format!("{key}.node"),
                            message: format!("{node} is not a host"),
                        });
                    }
                    let act = self.push_action(Action::Receiver { host, rate });
                    self.q.schedule(start, Ev::Action(act));
                    if let Some(end) = end {
                        let act = self.push_action(Action::ReceiverRestore { host });
                        self.q.schedule(end, Ev::Action(act));
                    }
                }
            }
        }
        // Timed overrides: apply at start, back to the settings without
        // windows at the end.
        for (i, o) in cfg.overrides.iter().enumerate() {
            if o.window.always() {
                continue;
            }
            let key = format!("override[{i}]");
            let n = node_of(&o.node, &key)?;
            let (on, off) = match &o.setting {
                OverrideSetting::Fabric(_) => {
                    let sw = self.switch_of_node[n.0 as usize];
                    if sw == NONE {
                        return Err(SimError::Selector {
                            key,
                            message: format!("{} is not a switch", o.node),
                        });
                    }
                    (
                        Action::Fabric {
                            sw,
                            port: o.port,
                            entry: i as u32,
                        },
                        Action::Fabric {
                            sw,
                            port: o.port,
                            entry: NONE,
                        },
                    )
                }
                OverrideSetting::Nic(_) => {
                    let host = self.host_of_node[n.0 as usize];
                    if host == NONE {
                        return Err(SimError::Selector {
                            key,
                            message: format!("{} is not a host", o.node),
                        });
                    }
                    (
                        Action::Nic {
                            host,
                            entry: i as u32,
                        },
                        Action::Nic { host, entry: NONE },
                    )
                }
            };
            let a = self.push_action(on);
            self.q
                .schedule(Instant::ZERO + o.window.start, Ev::Action(a));
            if let Some(end) = o.window.end {
                let a = self.push_action(off);
                self.q.schedule(Instant::ZERO + end, Ev::Action(a));
            }
        }
        Ok(())
    }

    fn push_action(&mut self, a: Action) -> u32 {
        self.actions.push(a);
        (self.actions.len() - 1) as u32
    }

    /// The port of node `a` whose link leads to node `b`.
    fn port_towards(&self, a: NodeId, b: NodeId, key: &str) -> Result<u32, SimError> {
        let range = self.node_port_base[a.0 as usize]..self.node_port_base[a.0 as usize + 1];
        range
            .into_iter()
            .find(|&p| self.ports[self.ports[p as usize].peer as usize].node == b.0)
            .ok_or_else(|| SimError::Selector {
                key: key.to_string(),
                message: format!(
                    "no link from {} to {}",
                    self.topo.node(a).name,
                    self.topo.node(b).name
                ),
            })
    }

    /// Install `rule` on port `p` now (a window from time zero) or at
    /// `start`, and remove it at `end`.
    fn wire_window(&mut self, p: u32, id: u32, rule: Rule, start: Instant, end: Option<Instant>) {
        if start == Instant::ZERO {
            self.wire_on(p, id, rule);
        } else {
            let a = self.push_action(Action::WireOn { port: p, id, rule });
            self.q.schedule(start, Ev::Action(a));
        }
        if let Some(end) = end {
            let a = self.push_action(Action::WireOff { port: p, id });
            self.q.schedule(end, Ev::Action(a));
        }
    }

    fn wire_on(&mut self, p: u32, id: u32, rule: Rule) {
        self.ports[p as usize]
            .impairments
            .get_or_insert_with(Box::default)
            .rules
            .push((id, rule));
    }

    /// Drop an empty wrapper so the port is healthy again.
    fn tidy(&mut self, p: u32) {
        let port = &mut self.ports[p as usize];
        if port.impairments.as_ref().is_some_and(|f| f.is_empty()) {
            port.impairments = None;
        }
    }

    /// A wrapper stopped `pkt` on port `p`: count it where a device would.
    // Off the healthy path: kept out of the event loop's inlined body.
    #[cold]
    #[inline(never)]
    pub(crate) fn wire_stopped(&mut self, p: u32, v: Verdict) {
        self.drops += 1;
        match v {
            Verdict::Pass => self.drops -= 1,
            Verdict::Lost => self.ports[p as usize].fault_drops += 1,
            Verdict::Down => self.ports[p as usize].errors.tx_discards += 1,
            Verdict::Corrupt => {
                let peer = self.ports[p as usize].peer;
                self.ports[peer as usize].errors.rx_crc_errors += 1;
            }
            Verdict::Oversize => {
                let peer = self.ports[p as usize].peer;
                self.ports[peer as usize].errors.rx_oversize += 1;
            }
        }
    }

    /// Run action `a`.
    // Off the healthy path: kept out of the event loop's inlined body.
    #[cold]
    #[inline(never)]
    pub(crate) fn run_action(&mut self, a: u32, now: Instant) {
        let Some(action) = self.actions.get_mut(a as usize) else {
            return;
        };
        match action.clone() {
            Action::WireOn { port, id, rule } => self.wire_on(port, id, rule),
            Action::WireOff { port, id } => {
                if let Some(f) = self.ports[port as usize].impairments.as_mut() {
                    f.rules.retain(|(i, _)| *i != id);
                }
                self.tidy(port);
            }
            Action::LinkDown {
                a: pa,
                b: pb,
                link,
                convergence,
            } => {
                self.link_down[link as usize] = true;
                for p in [pa, pb] {
                    self.port_down(p, now);
                }
                self.q
                    .schedule(now + convergence, Ev::Action(self.reroute_action));
            }
            Action::LinkUp {
                a: pa,
                b: pb,
                link,
                convergence,
            } => {
                // Frames lost when the link went down still have arrival
                // events pending: come up after the last of them.
                let stale = self.ports[pa as usize]
                    .stale_until
                    .max(self.ports[pb as usize].stale_until);
                if now < stale {
                    self.q.schedule(stale, Ev::Action(a));
                    return;
                }
                self.link_down[link as usize] = false;
                for p in [pa, pb] {
                    if let Some(f) = self.ports[p as usize].impairments.as_mut() {
                        f.down = false;
                    }
                    self.tidy(p);
                    self.kick(p, now);
                }
                self.q
                    .schedule(now + convergence, Ev::Action(self.reroute_action));
            }
            Action::Reroute => self.reroute(),
            Action::StaticRoute { entry, on } => {
                self.static_routes[entry as usize].3 = on;
                self.install_routes();
            }
            Action::Receiver { host, rate } => self.set_receiver(host, rate, rate.is_none(), now),
            Action::ReceiverRestore { host } => {
                let rate = self.nics[host as usize].drain_cfg;
                self.set_receiver(host, rate, false, now);
            }
            Action::Fabric { sw, port, entry } => self.apply_fabric(sw, port, entry),
            Action::Nic { host, entry } => {
                let n = match self.cfg.overrides.get(entry as usize).map(|o| &o.setting) {
                    Some(OverrideSetting::Nic(n)) => &**n,
                    _ => {
                        let name = &self.topo.nodes[self.nics[host as usize].node as usize].name;
                        static_nic(self.cfg, name).0
                    }
                };
                let nic = &mut self.nics[host as usize];
                nic.rx_buffer = n.rx_buffer.bytes();
                nic.rx_xoff = n.rx_xoff.bytes();
                nic.rx_xon = n.rx_xon.bytes();
                nic.drain_cfg = n.rx_drain_rate;
                if !nic.stalled {
                    self.set_receiver(host, n.rx_drain_rate, false, now);
                }
            }
        }
    }

    /// Port `p`'s link goes down: what it holds is lost.
    fn port_down(&mut self, p: u32, now: Instant) {
        let sw = self.switch_of_node[self.ports[p as usize].node as usize];
        let port = &mut self.ports[p as usize];
        port.impairments.get_or_insert_with(Box::default).down = true;
        port.errors.link_down_events += 1;
        port.ctrl.clear();
        let mut lost = port.inflight.len() as u64;
        while let Some(h) = self.pkts.pop_front(&mut port.inflight) {
            self.pkts.free(h);
        }
        // The longest a frame already sent can still be on its way.
        port.stale_until = now + port.rate.serialization_time(65_536) + port.delay;
        let mut resumes = Vec::new();
        for prio in 0..8 {
            while let Some(h) = self
                .pkts
                .pop_front(&mut self.ports[p as usize].queues[prio])
            {
                let pkt = self.pkts.take(h);
                self.pkts.free_int(pkt.int);
                self.ports[p as usize].qbytes[prio] -= u64::from(pkt.wire);
                lost += 1;
                if sw != NONE {
                    let s = &mut self.switches[sw as usize];
                    let ch = s.mmu.depart(pkt.ingress, prio as u8, u64::from(pkt.wire));
                    if ch == PfcChange::Resume {
                        resumes.push((s.port_base + u32::from(pkt.ingress), prio as u8));
                    }
                }
            }
        }
        self.ports[p as usize].errors.tx_discards += lost;
        self.drops += lost;
        for (ing, prio) in resumes {
            self.send_pfc(ing, prio, false, now, false);
        }
    }

    /// Every switch takes the routes computed without the down links.
    fn reroute(&mut self) {
        self.routes_now = Some(Box::new(Routes::compute_avoiding(
            self.topo,
            &self.link_down,
        )));
        self.install_routes();
        self.reroutes += 1;
    }

    /// Every switch takes the current routes (the last computed, or those
    /// the run started with), then the static routes in force replace
    /// their destinations' next hops.
    fn install_routes(&mut self) {
        let routes = self.routes_now.as_deref().unwrap_or(self.routes);
        let n_hosts = self.nics.len();
        for s in &mut self.switches {
            let (route, hops) = switch_table(routes, s.node, n_hosts);
            s.route = route;
            if let Balancer::RoundRobin(turn) = &mut s.lb {
                turn.fill(0);
            }
            s.hops = hops;
        }
        for &(sw, host, port, on) in &self.static_routes {
            if on {
                let s = &mut self.switches[sw as usize];
                s.route[host as usize] = (s.hops.len() as u32, 1);
                s.hops.push(port);
            }
        }
    }

    /// Host `host`'s receive path drains at `rate` (`None`: no limit),
    /// or stalls (`stall`: a pause storm).
    fn set_receiver(&mut self, host: u32, rate: Option<Rate>, stall: bool, now: Instant) {
        let port = self.nics[host as usize].port;
        let line = self.ports[port as usize].rate;
        let nic = &mut self.nics[host as usize];
        nic.stalled = stall;
        // Frames still waiting drain at line rate when no limit is set.
        nic.drain = match rate {
            Some(r) => Some(r),
            None if nic.stalled || !nic.rx.frames.is_empty() => Some(line),
            None => None,
        };
        if let (false, false, Some(front), Some(r)) = (
            nic.stalled,
            nic.rx.draining,
            nic.rx.frames.front().copied(),
            nic.drain,
        ) {
            nic.rx.draining = true;
            self.q.schedule(
                now + r.serialization_time(u64::from(front.wire)),
                Ev::Drain(host),
            );
        }
        let nic = &self.nics[host as usize];
        if nic.stalled {
            // The stalled pipeline asserts PAUSE on every PFC priority and
            // keeps refreshing it.
            let mask = self.ports[port as usize].pfc_mask;
            for p in 0..8u8 {
                if mask & (1 << p) != 0 {
                    self.send_pfc(port, p, true, now, false);
                }
            }
        } else if nic.rx.bytes <= nic.rx_xon {
            for p in 0..8u8 {
                if self.ports[port as usize].xoff_since[usize::from(p)].is_some() {
                    self.send_pfc(port, p, false, now, false);
                }
            }
        }
    }

    /// Switch `sw` (or one port) takes override entry `entry`'s settings,
    /// or its settings without windows (`NONE`).
    pub(crate) fn apply_fabric(&mut self, sw: u32, port: Option<u16>, entry: u32) {
        let s = &mut self.switches[sw as usize];
        match port {
            Some(p) => s.port_fab[usize::from(p)] = entry,
            None => s.fab = entry,
        }
        self.refresh_switch(sw);
    }

    /// Recompute a switch's live settings (ECN, PFC thresholds, lossy
    /// limits, per-port PFC priorities, classification) from its current
    /// entries.
    pub(crate) fn refresh_switch(&mut self, sw: u32) {
        let cfg = self.cfg;
        let name = &self.topo.nodes[self.switches[sw as usize].node as usize].name;
        let entry = |e: u32| match cfg.overrides.get(e as usize).map(|o| &o.setting) {
            Some(OverrideSetting::Fabric(f)) => Some(&**f),
            _ => None,
        };
        let s = &self.switches[sw as usize];
        let switch_cfg = entry(s.fab).unwrap_or_else(|| static_fabric(cfg, name, None).0);
        let ecn = ecn_table(switch_cfg);
        let nports = s.port_fab.len();
        let mut masks = Vec::with_capacity(nports);
        let mut classify = Vec::with_capacity(nports);
        for p in 0..nports {
            let f = match entry(s.port_fab[p]) {
                Some(f) => f,
                None => {
                    let (own, e) = static_fabric(cfg, name, Some(p as u16));
                    // A port without settings of its own follows its switch.
                    if e == NONE {
                        switch_cfg
                    } else {
                        own
                    }
                }
            };
            masks.push(pfc_mask(f));
            classify.push(f.qos.priority_map);
        }
        let base = s.port_base;
        let s = &mut self.switches[sw as usize];
        s.ecn = ecn;
        s.mmu.threshold = switch_cfg.pfc.threshold.clone();
        s.mmu.lossy_alpha = switch_cfg.buffer.lossy_alpha;
        s.mmu.lossy_limit = switch_cfg
            .buffer
            .lossy_queue_limit
            .map_or(u64::MAX, |l| l.bytes());
        s.classify = classify_table(classify);
        for (p, m) in masks.into_iter().enumerate() {
            s.mmu.set_lossless(p as u16, m);
            self.ports[base as usize + p].pfc_mask = m;
        }
    }
}
