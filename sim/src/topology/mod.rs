//! Topologies: hosts, switches and the links between them.
//!
//! A [`Topology`] is plain data: nodes, and full-duplex links each joining a
//! port of one node to a port of another. Ports are numbered per node in the
//! order links are added (0, 1, 2, ...). Routing ([`Routes`]) gives, for every
//! switch and destination host, the set of equal-cost egress ports; the
//! fabric picks one per flow by hashing the 5-tuple.

use verbs_emu::time::{Duration, Rate};

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
}

/// Equal-cost next hops: for each node and each destination host, the
/// egress ports on shortest paths (empty when unreachable or at the host).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Routes {
    /// `next_hops[node][dest_host_index]`: egress ports, ascending.
    pub next_hops: Vec<Vec<Vec<u16>>>,
    /// Host index (position among hosts, in node order) of each host node;
    /// `None` for switches.
    pub host_index: Vec<Option<u32>>,
}
