//! Checking a topology before it is simulated: unique names, usable
//! links, and every host reaching every other through switches (the
//! reachability search is the routes' own, [`super::routes`]).

use super::routes;
use super::{Topology, TopologyError};

impl Topology {
    /// Check what a simulation needs: unique names, positive rates,
    /// usable MTUs, at least two hosts, every host reaching every other
    /// through switches.
    pub fn check(&self) -> Result<(), TopologyError> {
        let mut names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(TopologyError::DuplicateName(w[0].to_string()));
        }
        for l in &self.links {
            let (a, b) = (&self.node(l.a.node).name, &self.node(l.b.node).name);
            if l.rate.bps() == 0 {
                return Err(TopologyError::ZeroRate(a.clone(), b.clone()));
            }
            if l.mtu < 256 {
                return Err(TopologyError::SmallMtu(a.clone(), b.clone(), l.mtu));
            }
        }
        let hosts = self.hosts();
        if hosts.len() < 2 {
            return Err(TopologyError::NoHosts);
        }
        // Reachability through switches only: hosts do not forward. Links
        // are full duplex, so one search from the first host is enough.
        let dist = routes::distances_from(self, hosts[0]);
        if let Some(&h) = hosts.iter().find(|h| dist[h.0 as usize] == u32::MAX) {
            return Err(TopologyError::Disconnected(
                self.node(hosts[0]).name.clone(),
                self.node(h).name.clone(),
            ));
        }
        Ok(())
    }
}
