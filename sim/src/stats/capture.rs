//! A run's capture as an operator would collect it from the machines: the
//! counter dumps of every host and switch port
//! ([`write_counter_dumps`](super::write_counter_dumps): `nics.txt` and
//! `switches.txt`, each section named `<node>.ethtool.txt`,
//! `<node>.rdma.txt`, `<switch>-p<port>.ethtool.txt` or
//! `<switch>.pfcwd.txt`), one `<host>.mlnx_qos.txt` per host, each
//! switch's buffer and ECN configuration as SONiC lists them (`<switch>.mmuconfig.txt`,
//! `<switch>.ecnconfig.txt`, see `sonic.rs`) and each host's link speed
//! (`<host>.link.txt`, `ethtool IFACE`), what an operator collects when
//! the counters alone cannot tell a small buffer or ECN switched off from
//! ordinary congestion, or a full link from a starved one.
//!
//! Every file and section is named by node only: nothing in the folder
//! names the scenario, the variant, the fault or rocelab's own files, so
//! a reader (a person in the counter interview, the doctor in its
//! evaluation) learns only what a real capture would tell.

use std::fmt::Write as _;
use std::path::Path;

use super::sonic::{ecnconfig, mmuconfig};
use super::write_counter_dumps;
use crate::config::SimConfig;
use crate::results::{PortRecord, RunResult};
use crate::topology::{NodeKind, Topology};

/// The file name of a host's `mlnx_qos -i` dump in a capture.
pub fn mlnx_qos_file(host: &str) -> String {
    format!("{host}.mlnx_qos.txt")
}

/// The file name of a switch's `mmuconfig -l` listing in a capture.
pub fn mmuconfig_file(switch: &str) -> String {
    format!("{switch}.mmuconfig.txt")
}

/// The file name of a switch's `ecnconfig -l` / `ecnconfig -q` listing in
/// a capture.
pub fn ecnconfig_file(switch: &str) -> String {
    format!("{switch}.ecnconfig.txt")
}

/// What `mlnx_qos -i` prints for a host NIC of a run with `config`: trust
/// DSCP with the default DSCP-to-priority map (DSCP `8p..8p+7` to
/// priority `p`; the NICs mark DSCP), PFC on the fabric's lossless
/// priorities (none when PFC is off), one receive buffer of
/// `nic.rx_buffer` bytes for every priority, one traffic class per
/// priority.
pub fn mlnx_qos(config: &SimConfig) -> String {
    let pfc = &config.fabric.pfc;
    let lossless = |p: u8| pfc.enabled && pfc.priorities.contains(&p);
    let mut s = String::from("DCBX mode: OS controlled\nPriority trust state: dscp\n");
    s.push_str("dscp2prio mapping:\n");
    // Writing to a String cannot fail.
    for p in 0u8..8 {
        let dscps: Vec<String> = (0u8..8)
            .rev()
            .map(|d| format!("{:02},", p * 8 + d))
            .collect();
        let _ = writeln!(s, "\tprio:{p} dscp:{}", dscps.concat());
    }
    let _ = writeln!(
        s,
        "Receive buffer size (bytes): {},0,0,0,0,0,0,0,",
        config.nic.rx_buffer.bytes()
    );
    s.push_str("PFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n\tenabled  ");
    for p in 0u8..8 {
        let _ = write!(s, "   {}", u8::from(lossless(p)));
    }
    s.push_str("\n\tbuffer      0   0   0   0   0   0   0   0\n");
    for p in 0u8..8 {
        let _ = writeln!(
            s,
            "tc: {p} ratelimit: unlimited, tsa: vendor\n\t priority:  {p}"
        );
    }
    s
}

/// Write the capture of one run (`result`, run with `config` over
/// `topo`) into `dir` (created if missing): the counter dumps, with the
/// pause rows of the fabric's lossless priorities for ports whose record
/// does not list its own, one [`mlnx_qos`] file per host NIC
/// ([`mlnx_qos_file`]), and the configuration listings: each switch's
/// [`mmuconfig_file`] and [`ecnconfig_file`], each host's [`link_file`].
pub fn write_capture(
    dir: &Path,
    result: &RunResult,
    config: &SimConfig,
    topo: &Topology,
) -> std::io::Result<()> {
    let pfc = &config.fabric.pfc;
    let prios: &[u8] = if pfc.enabled { &pfc.priorities } else { &[] };
    write_counter_dumps(dir, result, prios)?;
    let qos = mlnx_qos(config);
    for n in &result.nics {
        std::fs::write(dir.join(mlnx_qos_file(&n.node)), &qos)?;
    }
    write_config_listings(dir, result, config, topo)
}

/// The file name of a host's `ethtool IFACE` link settings in a capture.
pub fn link_file(host: &str) -> String {
    format!("{host}.link.txt")
}

/// What plain `ethtool IFACE` prints of a host port linked at `mbps`
/// Mbit/s: its speed, duplex and link state.
pub fn ethtool_link(iface: &str, mbps: u64) -> String {
    format!("Settings for {iface}:\n\tSpeed: {mbps}Mb/s\n\tDuplex: Full\n\tLink detected: yes\n")
}

/// Write the configuration listings of `topo`'s nodes into `dir`, the
/// settings an operator reads beside the
/// counters: per switch [`mmuconfig_file`] (its buffer pools and profiles
/// under `config`) and [`ecnconfig_file`] (its WRED/ECN profiles and
/// queue states, from `result`'s port records; switches without port
/// records get only the buffer listing); per host [`link_file`] (the
/// speed of its first link, as `ethtool IFACE` prints it).
fn write_config_listings(
    dir: &Path,
    result: &RunResult,
    config: &SimConfig,
    topo: &Topology,
) -> std::io::Result<()> {
    for (ni, node) in topo.nodes.iter().enumerate() {
        if node.kind != NodeKind::Switch {
            if let Some(l) = node.ports.first() {
                let mbps = topo.links[l.0 as usize].rate.bps() / 1_000_000;
                std::fs::write(dir.join(link_file(&node.name)), ethtool_link("eth0", mbps))?;
            }
            continue;
        }
        if let Some(text) = mmuconfig(topo, config, ni) {
            std::fs::write(dir.join(mmuconfig_file(&node.name)), text)?;
        }
        let ports: Vec<&PortRecord> = result
            .ports
            .iter()
            .filter(|p| !p.is_nic && p.node == node.name)
            .collect();
        if !ports.is_empty() {
            std::fs::write(
                dir.join(ecnconfig_file(&node.name)),
                ecnconfig(&ports, config),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mlnx_qos_enables_pfc_on_the_lossless_priorities_only() {
        let mut config = SimConfig::default();
        config.fabric.pfc.enabled = true;
        config.fabric.pfc.priorities = vec![3];
        let s = mlnx_qos(&config);
        assert!(s.contains("Priority trust state: dscp\n"), "{s}");
        assert!(
            s.contains("\tprio:3 dscp:31,30,29,28,27,26,25,24,\n"),
            "{s}"
        );
        assert!(
            s.contains("\tenabled     0   0   0   1   0   0   0   0\n"),
            "{s}"
        );
        config.fabric.pfc.enabled = false;
        assert!(mlnx_qos(&config).contains("\tenabled     0   0   0   0   0   0   0   0\n"));
    }
}
