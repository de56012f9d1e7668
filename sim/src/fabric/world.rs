//! The state of the whole simulated network: [`World`] and the state of
//! each switch ([`Switch`]). The event loop ([`super`]) and the handlers
//! of hosts, faults, watchdogs and deadlock checks work on it; this file
//! only says what the state is.

use rand_chacha::ChaCha8Rng;
use roce::time::{Duration, Instant};

use super::capture::Taps;
use super::event::Ev;
use super::impairments::Action;
use super::monitors::{Detector, Watchdog};
use super::nic::{FlowState, Nic, QpTable};
use super::port::Port;
use super::switch::Mmu;
use crate::config::{EcnConfig, SchedulerConfig, SimConfig};
use crate::engine::EventQueue;
use crate::options::RunOptions;
use crate::results::{FlowRateSeries, QueueSeries};
use crate::topology::{Routes, Topology};
use crate::workload::FlowSpec;

/// The whole simulated network and its event loop.
pub struct World<'a> {
    pub(super) topo: &'a Topology,
    pub(super) cfg: &'a SimConfig,
    pub(super) flows: &'a [FlowSpec],
    pub(super) opts: &'a RunOptions,
    pub(super) q: EventQueue<Ev>,
    pub(super) ports: Vec<Port>,
    /// The frames the ports' queues and wires hold.
    pub(super) pkts: super::packet::Packets,
    pub(super) switch_of_node: Vec<u32>,
    pub(super) switches: Vec<Switch>,
    pub(super) host_of_node: Vec<u32>,
    pub(super) nics: Vec<Nic>,
    pub(super) qps: QpTable,
    pub(super) flow_state: Vec<FlowState>,
    /// Per local-copy resource (NVLink, PCIe egress): when it is free.
    pub(super) local_free: Vec<Instant>,
    /// Per flow: the ping-pong flow its landed messages let post
    /// (`NONE`: none).
    pub(super) paced_by: Vec<u32>,
    /// Some flow is paced by another's landed messages (the receive path
    /// then looks for message ends).
    pub(super) paced_any: bool,
    /// Some flow releases its waiters when its data lands.
    pub(super) landing_any: bool,
    /// Flows waiting for each flow, as offsets into `dependents` (flow
    /// `i`'s waiters are `dependents[dependent_start[i]..dependent_start[i + 1]]`).
    pub(super) dependent_start: Vec<u32>,
    pub(super) dependents: Vec<u32>,
    /// Global id of port 0 of each node (one more entry than nodes).
    pub(super) node_port_base: Vec<u32>,
    /// Fault and override state changes, by `Ev::Action` index.
    pub(super) actions: Vec<Action>,
    /// Links currently down, by link id.
    pub(super) link_down: Vec<bool>,
    /// The action that recomputes routes.
    pub(super) reroute_action: u32,
    /// Times routes were recomputed.
    pub(super) reroutes: u64,
    /// The routes the run started with.
    pub(super) routes: &'a Routes,
    /// The routes computed at the last reroute (`None`: none yet).
    pub(super) routes_now: Option<Box<Routes>>,
    /// `static-route` faults: (switch index, host index, local egress
    /// port, in force).
    pub(super) static_routes: Vec<(u32, u32, u16, bool)>,
    pub(super) pfc_refresh: Option<Duration>,
    pub(super) pfc_response: Duration,
    pub(super) pfc_quanta: u16,
    pub(super) sched: SchedulerConfig,
    pub(super) samples: Vec<QueueSeries>,
    pub(super) sample_ports: Vec<u32>,
    /// Flow rate series (`record.flow_rates`; empty: not recorded).
    pub(super) flow_rates: Vec<FlowRateSeries>,
    /// Each flow's delivered bytes at the last flow rate sample.
    pub(super) flow_rate_last: Vec<u64>,
    /// Sampling events pending (`Sample`, `FlowRates`): a sampler stops
    /// when nothing but samplers is left to run.
    pub(super) samplers_pending: usize,
    /// Packet capture of the `record.pcap` link directions (`None`: none).
    pub(super) taps: Option<Box<Taps>>,
    pub(super) drops: u64,
    /// Data frames trimmed to their headers.
    pub(super) trims: u64,
    pub(super) flows_open: usize,
    pub(super) last_active: Instant,
    pub(super) setup_secs: f64,
    pub(super) stop_reason: &'static str,
    /// The switches' PFC watchdog, when enabled.
    pub(super) wd: Option<Box<Watchdog>>,
    /// The deadlock detector, when enabled.
    pub(super) deadlock: Option<Box<Detector>>,
    /// End the run after this event (`on_deadlock = "stop"`).
    pub(super) halt: bool,
    /// InfiniBand's FCP period (`None`: an Ethernet fabric).
    pub(super) fc_period: Option<roce::time::Duration>,
}

/// One switch.
#[derive(Debug)]
pub(super) struct Switch {
    /// Node index (the ECMP salt).
    pub(super) node: u32,
    /// Global id of port 0.
    pub(super) port_base: u32,
    /// Buffer accounting.
    pub(super) mmu: Mmu,
    /// ECN marking stream.
    pub(super) rng: ChaCha8Rng,
    /// Per destination host: (offset into `hops`, count).
    pub(super) route: Vec<(u32, u16)>,
    /// Egress port numbers.
    pub(super) hops: Vec<u16>,
    /// ECN marking per priority.
    pub(super) ecn: [Option<EcnConfig>; 8],
    /// Per ingress port: the priority a frame marked `p` is classified in
    /// (empty: every port keeps each priority, no lookup; see
    /// [`super::settings::classify_table`]).
    pub(super) classify: Vec<[u8; 8]>,
    /// Override entry in force for the whole switch (`NONE`: its
    /// settings without windows).
    pub(super) fab: u32,
    /// Override entry in force per port (`NONE`: without windows).
    pub(super) port_fab: Vec<u32>,
    /// How it picks among equal-cost next hops, with its state.
    pub(super) lb: Balancer,
    /// Packet trimming: the priority of trimmed headers (`None`: a full
    /// queue drops).
    pub(super) trim: Option<u8>,
}

/// A switch's load balancing ([`crate::config::LoadBalancingConfig`])
/// and what it remembers.
#[derive(Debug)]
pub(super) enum Balancer {
    /// Per-flow hash.
    Ecmp,
    /// A random next hop per frame.
    Spray,
    /// Per destination host: the next hop's turn.
    RoundRobin(Vec<u16>),
    /// Per flow (source, destination, UDP source port): when its last
    /// frame passed and the position of its next hop in the route.
    Flowlet {
        gap: roce::time::Duration,
        flows: std::collections::HashMap<(u32, u32, u16), (roce::time::Instant, u16)>,
    },
    /// The least-queued next hop.
    Adaptive,
}

impl Balancer {
    /// The mode's name in files when it picks a next hop per frame
    /// (`None`: per-flow ECMP).
    pub(super) fn per_frame(&self) -> Option<&'static str> {
        match self {
            Balancer::Ecmp => None,
            Balancer::Spray => Some("spray"),
            Balancer::RoundRobin(_) => Some("spray_round_robin"),
            Balancer::Flowlet { .. } => Some("flowlet"),
            Balancer::Adaptive => Some("adaptive"),
        }
    }

    /// The state for `cfg` on a switch of a fabric with `hosts` hosts.
    pub(super) fn new(cfg: &crate::config::LoadBalancingConfig, hosts: usize) -> Balancer {
        use crate::config::LoadBalancingConfig as L;
        match *cfg {
            L::Ecmp => Balancer::Ecmp,
            L::Spray => Balancer::Spray,
            L::SprayRoundRobin => Balancer::RoundRobin(vec![0; hosts]),
            L::Flowlet { gap } => Balancer::Flowlet {
                gap,
                flows: std::collections::HashMap::new(),
            },
            L::Adaptive => Balancer::Adaptive,
        }
    }
}
