//! Topologies: hosts, switches and the links between them.
//!
//! A [`Topology`] is plain data: nodes, and full-duplex links each joining a
//! port of one node to a port of another. Ports are numbered per node in the
//! order links are added (0, 1, 2, ...). Routing ([`Routes`]) gives, for every
//! node and destination host, the set of equal-cost egress ports; the
//! fabric picks one per flow by hashing the 5-tuple ([`ecmp`]).
//!
//! Hosts are numbered by their *host index*: their position among the hosts
//! in node order. Workloads, routes and addresses ([`host_ip`]) use it.
//!
//! Building a topology: by hand with [`Topology::add_node`] and
//! [`Topology::add_link`], with a generator ([`generate`]), from a TOML file
//! ([`mod@file`]) or from another simulator's format ([`hpcc`]). The model knows
//! nothing of files: loaders build this plain data.

mod check;
pub mod ecmp;
pub mod file;
pub mod generate;
pub mod gpu;
pub mod hpcc;
mod routes;

use std::net::Ipv4Addr;

use petgraph::graph::{NodeIndex, UnGraph};
use roce::time::{Duration, Rate};

pub use ecmp::{ecmp_hash, ecmp_select, roce_udp_source_port, FiveTuple};
pub use gpu::{GpuServers, NvLink};
pub use routes::Routes;

/// Index of a node in [`Topology::nodes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub u32);

/// Index of a link in [`Topology::links`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub u32);

/// What a node is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeKind {
    /// An end host with one NIC (one port per attached link).
    Host,
    /// A switch.
    Switch,
}

/// One node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Unique name (`h0`, `leaf1`, ...).
    pub name: String,
    /// Host or switch.
    pub kind: NodeKind,
    /// Links attached, indexed by port number.
    pub ports: Vec<LinkId>,
}

/// One end of a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The node.
    pub node: NodeId,
    /// Its port number.
    pub port: u16,
}

/// A full-duplex point-to-point link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Link {
    /// One end.
    pub a: Endpoint,
    /// The other end.
    pub b: Endpoint,
    /// Rate of each direction.
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Cable length in metres, when given (headroom is computed from it).
    pub cable_m: Option<u32>,
    /// Ethernet MTU (bytes of IP packet).
    pub mtu: u32,
}

/// A whole topology.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Topology {
    /// Nodes, hosts and switches mixed, indexed by [`NodeId`].
    pub nodes: Vec<Node>,
    /// Links, indexed by [`LinkId`].
    pub links: Vec<Link>,
    /// The GPU servers the hosts belong to (`None`: plain hosts, one
    /// rank each; see [`gpu`]).
    pub gpu: Option<GpuServers>,
}

/// The physical properties of a link, without its ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LinkProps {
    /// Rate of each direction.
    pub rate: Rate,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Cable length in metres, when known.
    pub cable_m: Option<u32>,
    /// Ethernet MTU (bytes of IP packet).
    pub mtu: u32,
}

impl Default for LinkProps {
    /// 100 Gbit/s, 1 us, no cable length, MTU 4096.
    fn default() -> Self {
        LinkProps {
            rate: Rate::from_gbps(100),
            delay: Duration::from_us(1),
            cable_m: None,
            mtu: 4096,
        }
    }
}

/// A topology that cannot be built: names and ends that do not fit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TopologyError {
    /// Two nodes share a name.
    #[error("duplicate node name {0:?}: expected unique names")]
    DuplicateName(String),
    /// A link names a node that does not exist.
    #[error("unknown node {0:?}: expected the name of a host or switch")]
    UnknownNode(String),
    /// A link joins a node to itself.
    #[error("link from {0:?} to itself: expected two different nodes")]
    SelfLoop(String),
    /// A node has more ports than a `u16` numbers.
    #[error("node {0:?} has more than 65535 links")]
    TooManyPorts(String),
    /// A link rate of zero.
    #[error("link {0:?}-{1:?} has rate 0: expected a positive rate")]
    ZeroRate(String, String),
    /// An MTU too small to carry a RoCE packet.
    #[error("link {0:?}-{1:?} has MTU {2}: expected at least 256 bytes")]
    SmallMtu(String, String, u32),
    /// Hosts that cannot reach each other.
    #[error("host {0:?} cannot reach host {1:?}: expected a connected fabric")]
    Disconnected(String, String),
    /// No hosts at all.
    #[error("the topology has no hosts: expected at least two")]
    NoHosts,
    /// A generator parameter out of range.
    #[error("{param} = {value}: expected {expected}")]
    BadParameter {
        /// The parameter name as written in files.
        param: &'static str,
        /// The value given.
        value: String,
        /// What it must be.
        expected: &'static str,
    },
}

impl Topology {
    /// An empty topology.
    pub fn new() -> Topology {
        Topology::default()
    }

    /// Add a node with no ports; returns its id.
    pub fn add_node(&mut self, name: impl Into<String>, kind: NodeKind) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        self.nodes.push(Node {
            name: name.into(),
            kind,
            ports: Vec::new(),
        });
        id
    }

    /// Join `a` and `b` with a new link; each end gets the next free port.
    pub fn add_link(
        &mut self,
        a: NodeId,
        b: NodeId,
        props: LinkProps,
    ) -> Result<LinkId, TopologyError> {
        if a == b {
            return Err(TopologyError::SelfLoop(self.node(a).name.clone()));
        }
        let id = LinkId(self.links.len() as u32);
        let mut end = |n: NodeId| -> Result<Endpoint, TopologyError> {
            let node = &mut self.nodes[n.0 as usize];
            let port = u16::try_from(node.ports.len())
                .map_err(|_| TopologyError::TooManyPorts(node.name.clone()))?;
            node.ports.push(id);
            Ok(Endpoint { node: n, port })
        };
        let ea = end(a)?;
        let eb = end(b)?;
        self.links.push(Link {
            a: ea,
            b: eb,
            rate: props.rate,
            delay: props.delay,
            cable_m: props.cable_m,
            mtu: props.mtu,
        });
        Ok(id)
    }

    /// The node with this id. Panics on an id not from this topology.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0 as usize]
    }

    /// The link with this id. Panics on an id not from this topology.
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0 as usize]
    }

    /// The node whose name is `name` (linear search).
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.nodes
            .iter()
            .position(|n| n.name == name)
            .map(|i| NodeId(i as u32))
    }

    /// Host node ids in host-index order.
    pub fn hosts(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| n.kind == NodeKind::Host)
            .map(|(i, _)| NodeId(i as u32))
            .collect()
    }

    /// Number of hosts.
    pub fn host_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.kind == NodeKind::Host)
            .count()
    }

    /// Number of switches.
    pub fn switch_count(&self) -> usize {
        self.nodes.len() - self.host_count()
    }

    /// The far end of `port` on `node`.
    pub fn peer(&self, node: NodeId, port: u16) -> Endpoint {
        let link = self.link(self.node(node).ports[port as usize]);
        if link.a.node == node && link.a.port == port {
            link.b
        } else {
            link.a
        }
    }

    /// The link joining `a` and `b` (the first one, when parallel links
    /// exist).
    pub fn link_between(&self, a: NodeId, b: NodeId) -> Option<LinkId> {
        self.node(a).ports.iter().copied().find(|&l| {
            let link = self.link(l);
            (link.a.node == a && link.b.node == b) || (link.a.node == b && link.b.node == a)
        })
    }

    /// The topology as a petgraph graph: node weights are [`NodeId`]s,
    /// edge weights [`LinkId`]s, graph indices equal to the ids.
    pub fn graph(&self) -> UnGraph<NodeId, LinkId> {
        let mut g: UnGraph<NodeId, LinkId> =
            UnGraph::with_capacity(self.nodes.len(), self.links.len());
        for i in 0..self.nodes.len() {
            g.add_node(NodeId(i as u32));
        }
        for (i, l) in self.links.iter().enumerate() {
            g.add_edge(
                NodeIndex::new(l.a.node.0 as usize),
                NodeIndex::new(l.b.node.0 as usize),
                LinkId(i as u32),
            );
        }
        g
    }
}

/// The IPv4 address of the host with index `index`: `10.x.y.1` with
/// `x.y` the index in base 256 (`10.0.0.1` for host 0, `10.0.1.1` for
/// host 1, `10.1.0.1` for host 256), the layout of the HPCC ns-3 simulator
/// (where the node id is `(ip >> 8) & 0xffff`), in 10/8. Up to 65536 hosts.
pub fn host_ip(index: u32) -> Ipv4Addr {
    Ipv4Addr::from(0x0A00_0001u32 | ((index & 0xFFFF) << 8))
}

/// The host index an address from [`host_ip`] belongs to.
pub fn host_index_of_ip(ip: Ipv4Addr) -> Option<u32> {
    let v = u32::from(ip);
    (v & 0xFF00_00FF == 0x0A00_0001).then_some((v >> 8) & 0xFFFF)
}
