//! Building the world: the checks a run makes before it starts (the
//! configuration, the topology against the routes, the record and capture
//! selectors, the flows) and the construction, in this order, of the
//! ports, the NICs, the switches, the recorded queues, the taps, the
//! monitors, the faults' wrappers and actions, the flows' queue pairs and
//! the samplers. Errors come in that order; nothing runs yet.

use roce::time::Instant;

use super::capture::Taps;
use super::credits::IbPort;
use super::event::{Ev, NONE};
use super::impairments::Action;
use super::monitors::{Detector, Watchdog};
use super::nic::{FlowState, Nic, QpGate, QpTable};
use super::port::Port;
use super::settings::{
    classify_table, ecn_table, pfc_mask, static_fabric, static_nic, switch_mmu, switch_table,
};
use super::world::{Balancer, Switch, World};
use crate::config::{CcConfig, SimConfig};
use crate::engine::{derive_rng, EventQueue, StreamKind};
use crate::options::{RunOptions, SimError};
use crate::results::{FlowRateSeries, QueueSeries};
use crate::topology::{NodeId, NodeKind, Routes, Topology};
use crate::workload::{FlowSpec, LocalPath};

impl<'a> World<'a> {
    /// Build the model. Checks the configuration, the topology and the
    /// flows; nothing runs yet.
    pub fn build(
        topo: &'a Topology,
        routes: &'a Routes,
        cfg: &'a SimConfig,
        flows: &'a [FlowSpec],
        opts: &'a RunOptions,
    ) -> Result<World<'a>, SimError> {
        let t0 = std::time::Instant::now();
        cfg.validate()?;
        let n = topo.nodes.len();
        if routes.node_count() != n {
            return Err(SimError::Topology(format!(
                "routes cover {} nodes, the topology has {n}",
                routes.node_count()
            )));
        }
        let node_port_base = node_port_bases(topo);
        let ports = build_ports(topo, cfg, &node_port_base)?;
        let (host_of_node, nics) = build_nics(topo, routes, cfg, &node_port_base)?;
        let (switch_of_node, switches) = build_switches(
            topo,
            routes,
            cfg,
            opts.seed,
            &node_port_base,
            &ports,
            nics.len(),
        )?;
        let (samples, sample_ports) = recorded_queues(topo, cfg, &node_port_base)?;
        let n_links = topo.links.len();
        let taps = Taps::build(topo, cfg, &node_port_base, &ports)?;
        let mut world = World {
            topo,
            cfg,
            flows,
            opts,
            q: EventQueue::new(),
            ports,
            pkts: Default::default(),
            switch_of_node,
            switches,
            host_of_node,
            nics,
            qps: QpTable::default(),
            flow_state: Vec::with_capacity(flows.len()),
            local_free: Vec::new(),
            paced_by: vec![NONE; flows.len()],
            paced_any: false,
            landing_any: false,
            dependent_start: Vec::new(),
            dependents: Vec::new(),
            node_port_base,
            actions: vec![Action::Reroute],
            link_down: vec![false; n_links],
            reroute_action: 0,
            reroutes: 0,
            routes,
            routes_now: None,
            static_routes: Vec::new(),
            pfc_refresh: cfg.fabric.pfc.refresh,
            pfc_response: cfg.fabric.pfc.response_time,
            pfc_quanta: cfg.fabric.pfc.quanta,
            sched: cfg.fabric.scheduler.clone(),
            samples,
            sample_ports,
            flow_rates: Vec::new(),
            flow_rate_last: Vec::new(),
            samplers_pending: 0,
            taps,
            drops: 0,
            trims: 0,
            flows_open: flows.len(),
            last_active: Instant::ZERO,
            setup_secs: 0.0,
            stop_reason: "idle",
            wd: None,
            deadlock: None,
            halt: false,
            fc_period: (cfg.fabric.link_layer == crate::config::LinkLayer::Infiniband)
                .then_some(cfg.fabric.infiniband.fc_period),
        };
        world.install_monitors();
        world.install_faults()?;
        world.build_flows()?;
        world.start_samplers();
        world.setup_secs = t0.elapsed().as_secs_f64();
        Ok(world)
    }

    /// The PFC watchdog and the deadlock detector, when enabled.
    fn install_monitors(&mut self) {
        let cfg = self.cfg;
        if cfg.fabric.pfc.watchdog.enabled {
            self.wd = Some(Box::new(Watchdog::new(
                &cfg.fabric.pfc.watchdog,
                self.ports.len(),
            )));
        }
        if cfg.fabric.pfc.deadlock.detect {
            self.deadlock = Some(Box::new(Detector::new(&cfg.fabric.pfc.deadlock)));
        }
    }

    /// Check the flows, create their queue pairs and schedule their starts.
    fn build_flows(&mut self) -> Result<(), SimError> {
        let flows = self.flows;
        let own_cfg = self.own_nic_configs();
        for (i, f) in flows.iter().enumerate() {
            if f.id as usize != i {
                return Err(SimError::Flow {
                    id: f.id,
                    message: format!("ids must be dense and in order: found at position {i}"),
                });
            }
            let host = |n: NodeId, what: &str| {
                self.host_of_node
                    .get(n.0 as usize)
                    .copied()
                    .filter(|&h| h != NONE)
                    .ok_or_else(|| SimError::Flow {
                        id: f.id,
                        message: format!("{what} node {} is not a host", n.0),
                    })
            };
            let src = host(f.src, "source")?;
            let dst = host(f.dst, "destination")?;
            if let Some(l) = f.local {
                self.build_local(f, l)?;
                continue;
            }
            check_flow_values(f, src, dst)?;
            let host_cfg = |h: u32| own_cfg[h as usize].as_ref().unwrap_or(self.cfg);
            // A QP's line rate: its port's, or with multipath the ports
            // its paths spread over together.
            let rate = |h: u32| {
                let nic = &self.nics[h as usize];
                let r = self.ports[nic.port as usize].rate;
                match &host_cfg(h).nic.multipath {
                    Some(m) => {
                        let k = u64::from(nic.ports.min(m.paths).max(1));
                        roce::time::Rate::from_bps(r.bps().saturating_mul(k))
                    }
                    None => r,
                }
            };
            let (rs, rd) = (rate(src), rate(dst));
            // A workload with congestion control of its own runs its flows
            // on queue pairs of their own, both ends under its settings.
            let flow_cc = self
                .cfg
                .workload_cc
                .get(f.workload as usize)
                .and_then(Option::as_ref);
            let with_cc = |h: u32, cc: &CcConfig| {
                let mut c = host_cfg(h).clone();
                c.nic.cc = cc.clone();
                c
            };
            let (class, cfgs) = match flow_cc {
                None => (0, None),
                Some(cc) => (f.workload + 1, Some((with_cc(src, cc), with_cc(dst, cc)))),
            };
            let ends = match &cfgs {
                Some((a, b)) => (a, b),
                None => (host_cfg(src), host_cfg(dst)),
            };
            // InfiniBand: the flow's service level picks its lane.
            let ib = &self.cfg.fabric.infiniband;
            let prio = match self.fc_period {
                Some(_) => ib.vl_of(f.priority),
                None => f.priority,
            };
            if let (Some(_), Some(arb)) = (self.fc_period, ib.arbitration.as_ref()) {
                if !arb.serves(prio) {
                    return Err(SimError::Flow {
                        id: f.id,
                        message: format!(
                            "service level {} is lane {prio}, which no entry of \
                             fabric.infiniband.arbitration serves: its frames would never be sent",
                            f.priority
                        ),
                    });
                }
            }
            let known = self.qps.qps.len();
            let qp = self
                .qps
                .connect(
                    src,
                    dst,
                    (f.qp_index, class),
                    prio,
                    ends,
                    self.opts.seed,
                    rs,
                    rd,
                )
                .map_err(|m| SimError::Flow {
                    id: f.id,
                    message: m,
                })?;
            if self.qps.qps.len() > known {
                self.set_base_rtt_of_pair(qp, src, dst);
            }
            let mut after = f.after.clone();
            after.sort_unstable();
            after.dedup();
            if let Some(&a) = after.iter().find(|&&a| a >= f.id) {
                return Err(SimError::Flow {
                    id: f.id,
                    message: format!(
                        "waits for flow {a}: expected flows with smaller ids (dependencies sort first)"
                    ),
                });
            }
            for id in [qp, qp ^ 1] {
                let q = &mut self.qps.qps[id as usize];
                if q.gate.is_none() && self.nics[q.host as usize].host_side.is_some() {
                    q.gate = Some(Box::new(QpGate {
                        next_new: q.engine.next_psn(),
                        ..QpGate::default()
                    }));
                }
            }
            if let Some(p) = f.post.and_then(|p| p.partner) {
                if p as usize >= flows.len() || p == f.id {
                    return Err(SimError::Flow {
                        id: f.id,
                        message: format!("paced by flow {p}: expected another flow of the run"),
                    });
                }
                self.paced_by[p as usize] = f.id;
            }
            let mut st = FlowState::new(f, qp);
            st.waiting = after.len() as u32;
            self.flow_state.push(st);
            if after.is_empty() {
                self.q.schedule(f.start + f.delay, Ev::FlowStart(f.id));
            }
        }
        (self.dependent_start, self.dependents) = dependents_index(flows);
        self.paced_any = self.paced_by.iter().any(|&p| p != NONE);
        self.landing_any = flows.iter().any(|f| f.landing && f.local.is_none());
        Ok(())
    }

    /// A copy inside a server: no queue pair, a slot on its resource.
    fn build_local(&mut self, f: &FlowSpec, l: LocalPath) -> Result<(), SimError> {
        if f.size == 0 || l.rate.bps() == 0 {
            return Err(SimError::Flow {
                id: f.id,
                message: "a local copy needs a positive size and rate".into(),
            });
        }
        if let Some(&a) = f.after.iter().find(|&&a| a >= f.id) {
            return Err(SimError::Flow {
                id: f.id,
                message: format!(
                    "waits for flow {a}: expected flows with smaller ids (dependencies sort first)"
                ),
            });
        }
        let r = l.resource as usize;
        if self.local_free.len() <= r {
            self.local_free.resize(r + 1, Instant::ZERO);
        }
        let mut after = f.after.clone();
        after.sort_unstable();
        after.dedup();
        let mut st = FlowState::new(f, NONE);
        st.waiting = after.len() as u32;
        self.flow_state.push(st);
        if after.is_empty() {
            self.q.schedule(f.start + f.delay, Ev::FlowStart(f.id));
        }
        Ok(())
    }

    /// Per host index, the whole configuration its QPs run with when it
    /// has NIC settings of its own (`None`: the global one).
    fn own_nic_configs(&self) -> Vec<Option<SimConfig>> {
        self.nics
            .iter()
            .map(|n| {
                let name = &self.topo.nodes[n.node as usize].name;
                match static_nic(self.cfg, name) {
                    (_, NONE) => None,
                    (nic, _) => Some(SimConfig {
                        nic: nic.clone(),
                        ..self.cfg.clone()
                    }),
                }
            })
            .collect()
    }

    /// Schedule the first queue sample and the first flow rate sample,
    /// for what `record` asks.
    fn start_samplers(&mut self) {
        if !self.samples.is_empty() {
            self.q.schedule(Instant::ZERO, Ev::Sample);
            self.samplers_pending += 1;
        }
        let flows = self.flows;
        if self.cfg.record.flow_rates && !flows.is_empty() {
            let every = self.flow_rate_interval();
            self.flow_rate_last = vec![0; flows.len()];
            self.flow_rates = flows
                .iter()
                .map(|f| FlowRateSeries {
                    id: f.id,
                    workload: self.workload_name(f),
                    interval_ps: every.as_ps(),
                    samples: Vec::new(),
                })
                .collect();
            self.q.schedule(Instant::ZERO + every, Ev::FlowRates);
            self.samplers_pending += 1;
        }
    }
}

/// Global id of port 0 of each node (ports are numbered node by node),
/// and one more entry: the number of ports.
fn node_port_bases(topo: &Topology) -> Vec<u32> {
    let mut node_port_base = Vec::with_capacity(topo.nodes.len() + 1);
    let mut total = 0u32;
    for node in &topo.nodes {
        node_port_base.push(total);
        total += node.ports.len() as u32;
    }
    node_port_base.push(total);
    node_port_base
}

/// Every port, one per (node, port number) in global id order, joined to
/// its peer; errors on links that do not attach where the nodes say.
fn build_ports(
    topo: &Topology,
    cfg: &SimConfig,
    node_port_base: &[u32],
) -> Result<Vec<Port>, SimError> {
    let n = topo.nodes.len();
    let total = node_port_base.last().copied().unwrap_or(0);
    let mut ports = Vec::with_capacity(total as usize);
    for (ni, node) in topo.nodes.iter().enumerate() {
        for (pi, lid) in node.ports.iter().enumerate() {
            let link = topo.links.get(lid.0 as usize).ok_or_else(|| {
                SimError::Topology(format!("node {} port {pi}: no link {}", node.name, lid.0))
            })?;
            let me = (ni as u32, pi as u16);
            let other = if (link.a.node.0, link.a.port) == me {
                link.b
            } else if (link.b.node.0, link.b.port) == me {
                link.a
            } else {
                return Err(SimError::Topology(format!(
                    "node {} port {pi}: link {} does not attach here",
                    node.name, lid.0
                )));
            };
            let on = other.node.0 as usize;
            if on >= n || usize::from(other.port) >= topo.nodes[on].ports.len() {
                return Err(SimError::Topology(format!(
                    "link {}: dangling end {}:{}",
                    lid.0, other.node.0, other.port
                )));
            }
            if link.rate.bps() == 0 {
                return Err(SimError::Topology(format!("link {}: zero rate", lid.0)));
            }
            let peer = node_port_base[on] + u32::from(other.port);
            let mut port = Port::new(me.0, me.1, peer, link.rate, link.delay);
            port.pause_log_cap = cfg.record.pause_intervals as usize;
            port.pfc_mask = match node.kind {
                NodeKind::Switch => pfc_mask(static_fabric(cfg, &node.name, Some(pi as u16)).0),
                NodeKind::Host => pfc_mask(&cfg.fabric),
            };
            if cfg.fabric.link_layer == crate::config::LinkLayer::Infiniband {
                // Credits replace PFC: every port's buffer per lane is
                // the same, so each transmitter starts with its peer's.
                // (at most 2,048 blocks: the configuration check).
                let limit = cfg.fabric.infiniband.blocks_per_lane() as u16;
                port.pfc_mask = 0;
                port.ib = Some(Box::new(IbPort::new(limit, limit)));
            }
            ports.push(port);
        }
    }
    Ok(ports)
}

/// The NIC of every host, in host index order, with each node's host
/// index (`NONE` for switches).
fn build_nics(
    topo: &Topology,
    routes: &Routes,
    cfg: &SimConfig,
    node_port_base: &[u32],
) -> Result<(Vec<u32>, Vec<Nic>), SimError> {
    let mut host_of_node = vec![NONE; topo.nodes.len()];
    let mut nics = Vec::new();
    for (ni, node) in topo.nodes.iter().enumerate() {
        if node.kind == NodeKind::Host {
            let hi = routes.host_index(NodeId(ni as u32)).ok_or_else(|| {
                SimError::Topology(format!("host {} has no host index", node.name))
            })?;
            if node.ports.is_empty() {
                return Err(SimError::Topology(format!(
                    "host {} has no port",
                    node.name
                )));
            }
            if hi as usize != nics.len() {
                return Err(SimError::Topology(format!(
                    "host {}: host index {hi}, expected {} (hosts in node order)",
                    node.name,
                    nics.len()
                )));
            }
            host_of_node[ni] = hi;
            let nic_cfg = static_nic(cfg, &node.name).0;
            let ports = u16::try_from(node.ports.len()).map_err(|_| {
                SimError::Topology(format!("host {} has more than 65535 ports", node.name))
            })?;
            nics.push(Nic::new(
                ni as u32,
                hi,
                (node_port_base[ni], ports),
                nic_cfg,
            ));
        }
    }
    Ok((host_of_node, nics))
}

/// Every switch, each with its own settings (overrides without windows
/// over the global ones), with each node's switch index (`NONE` for
/// hosts). `seed`: the run's, for the switches' marking streams.
fn build_switches(
    topo: &Topology,
    routes: &Routes,
    cfg: &SimConfig,
    seed: u64,
    node_port_base: &[u32],
    ports: &[Port],
    n_hosts: usize,
) -> Result<(Vec<u32>, Vec<Switch>), SimError> {
    let mut switch_of_node = vec![NONE; topo.nodes.len()];
    let mut switches = Vec::new();
    for (ni, node) in topo.nodes.iter().enumerate() {
        if node.kind != NodeKind::Switch {
            continue;
        }
        let base = node_port_base[ni];
        let fab = static_fabric(cfg, &node.name, None).0;
        let mut mmu = switch_mmu(topo, cfg, ni).map_err(SimError::Config)?;
        for pi in 0..node.ports.len() {
            mmu.set_lossless(pi as u16, ports[base as usize + pi].pfc_mask);
        }
        let (route, hops) = switch_table(routes, ni as u32, n_hosts);
        if let Some(&p) = hops.iter().find(|&&p| usize::from(p) >= node.ports.len()) {
            return Err(SimError::Topology(format!(
                "routes: switch {} via port {p}, it has {} ports",
                node.name,
                node.ports.len()
            )));
        }
        let classify = classify_table(
            (0..node.ports.len())
                .map(|pi| {
                    static_fabric(cfg, &node.name, Some(pi as u16))
                        .0
                        .qos
                        .priority_map
                })
                .collect(),
        );
        let si = switches.len() as u64;
        switch_of_node[ni] = switches.len() as u32;
        switches.push(Switch {
            node: ni as u32,
            port_base: base,
            mmu,
            rng: derive_rng(seed, StreamKind::Switch, si),
            route,
            hops,
            ecn: ecn_table(fab),
            classify,
            fab: NONE,
            port_fab: vec![NONE; node.ports.len()],
            lb: Balancer::new(&fab.load_balancing, n_hosts),
            trim: fab.trim.map(|t| t.priority),
        });
    }
    Ok((switch_of_node, switches))
}

/// The series of the queues `record.queues` names, empty, and the global
/// id of each one's port.
fn recorded_queues(
    topo: &Topology,
    cfg: &SimConfig,
    node_port_base: &[u32],
) -> Result<(Vec<QueueSeries>, Vec<u32>), SimError> {
    let mut samples = Vec::new();
    let mut sample_ports = Vec::new();
    for (qi, sel) in cfg.record.queues.iter().enumerate() {
        let Some(ni) = topo.nodes.iter().position(|x| x.name == sel.node) else {
            return Err(SimError::Selector {
                key: format!("record.queues[{qi}].node"),
                message: format!("no node named {:?}", sel.node),
            });
        };
        if usize::from(sel.port) >= topo.nodes[ni].ports.len() {
            return Err(SimError::Selector {
                key: format!("record.queues[{qi}].port"),
                message: format!("{} has {} ports", sel.node, topo.nodes[ni].ports.len()),
            });
        }
        sample_ports.push(node_port_base[ni] + u32::from(sel.port));
        samples.push(QueueSeries {
            node: sel.node.clone(),
            port: sel.port,
            priority: sel.priority,
            interval_ps: cfg.record.interval.as_ps(),
            samples: Vec::new(),
        });
    }
    Ok((samples, sample_ports))
}

/// A flow's own values: two different hosts `src` and `dst`, a priority
/// 0-7, positive sizes, messages that fit a work request.
fn check_flow_values(f: &FlowSpec, src: u32, dst: u32) -> Result<(), SimError> {
    if src == dst {
        return Err(SimError::Flow {
            id: f.id,
            message: "source and destination are the same host".into(),
        });
    }
    if f.priority > 7 {
        return Err(SimError::Flow {
            id: f.id,
            message: format!("priority {}: expected 0-7", f.priority),
        });
    }
    if f.size == 0 || f.message_size == 0 {
        return Err(SimError::Flow {
            id: f.id,
            message: "size and message_size must be positive".into(),
        });
    }
    if f.message_size > u64::from(u32::MAX) {
        return Err(SimError::Flow {
            id: f.id,
            message: format!("message_size {} exceeds 4 GiB - 1", f.message_size),
        });
    }
    Ok(())
}

/// Who waits for whom, flow by flow (a counting sort by dependency): flow
/// `i`'s waiters are `dependents[start[i]..start[i + 1]]`, returned as
/// `(start, dependents)`.
fn dependents_index(flows: &[FlowSpec]) -> (Vec<u32>, Vec<u32>) {
    let mut start = vec![0u32; flows.len() + 1];
    let mut pairs: Vec<(u32, u32)> = Vec::new();
    for f in flows {
        let mut after = f.after.clone();
        after.sort_unstable();
        after.dedup();
        for a in after {
            start[a as usize + 1] += 1;
            pairs.push((a, f.id));
        }
    }
    for i in 0..flows.len() {
        start[i + 1] += start[i];
    }
    let mut fill = start.clone();
    let mut dependents = vec![0u32; pairs.len()];
    for (a, d) in pairs {
        dependents[fill[a as usize] as usize] = d;
        fill[a as usize] += 1;
    }
    (start, dependents)
}
