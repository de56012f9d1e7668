//! The sysfs view of the emulated devices, as verbs consumers read it.
//!
//! The drop-in libibverbs answers the verbs (`ibv_get_device_list`,
//! `ibv_query_gid`, ...), but some consumers look at the kernel's files
//! too: rdma-core's tests list `/sys/class/infiniband/<dev>/device/net/`
//! to find the device's network interface, and UCX only takes a device
//! whose `/dev/infiniband/<uverbsN>` is a character device, then reads
//! `ports/<p>/gid_attrs/{types,ndevs}/<i>` and `device/numa_node`.
//!
//! [`tree`] says, without touching the file system, which directories and
//! files describe a device list (paths relative to `/sys/class`), and
//! [`write_tree`] writes them under a root. [`namespace::enter`] gives the
//! calling process (and what it then executes) a private mount namespace
//! in which that tree is `/sys/class/infiniband` and
//! `/sys/class/infiniband_verbs`, and `/dev/infiniband/uverbsN` are
//! character devices (`/dev/null`); the host's mounts are not changed.
//!
//! The view matches what the drop-in libibverbs reports: the same device
//! names and order (`uverbsN` is the N-th device), one port, one GID
//! (index 0, RoCE v2, the IPv4-mapped address), the node GUID derived from
//! the address. A loopback device without a fixed address takes a fresh
//! `127.0.H.L` when it is opened; the view shows the first address the
//! process tries ([`loopback_first`]), which is the one it gets unless
//! another process holds it. The verbs stay authoritative.
//!
//! Nothing here panics on any device list; [`SysfsDevice::parse_list`]
//! returns an error for an entry it cannot read.

use std::fmt::Write as _;
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;

use crate::backend::udp::{interfaces, node_guid_for, LOOPBACK_DEVICE};

pub mod namespace;

/// The RoCEv2 UDP port, the devices' default.
const ROCE_PORT: u16 = 4791;

/// One emulated device as the sysfs view shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SysfsDevice {
    /// The device name (`rocelab0`).
    pub name: String,
    /// Its address and UDP port.
    pub bind: SocketAddrV4,
    /// Whether the address is fixed (`NAME=IPV4`), or the first of a
    /// loopback device's per-process candidates.
    pub fixed: bool,
}

impl SysfsDevice {
    /// The devices of a `ROCELAB_IBV_DEVICES` list (`NAME=IPV4[:PORT]`,
    /// comma separated), or the default loopback device when `list` is
    /// `None` or blank. `pid` picks the loopback address (the process that
    /// will open the device).
    pub fn parse_list(list: Option<&str>, pid: u32) -> Result<Vec<SysfsDevice>, String> {
        let text = list.unwrap_or("").trim();
        if text.is_empty() {
            return Ok(vec![SysfsDevice {
                name: LOOPBACK_DEVICE.into(),
                bind: loopback_first(pid),
                fixed: false,
            }]);
        }
        text.split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(|entry| {
                let (name, addr) = entry
                    .split_once('=')
                    .ok_or_else(|| format!("device entry {entry:?}: expected NAME=IPV4[:PORT]"))?;
                let name = name.trim();
                if name.is_empty() || name.contains(['/', '\0']) || name.starts_with('.') {
                    return Err(format!("device entry {entry:?}: bad name"));
                }
                let addr = addr.trim();
                let bind = match addr.parse::<SocketAddrV4>() {
                    Ok(a) => a,
                    Err(_) => SocketAddrV4::new(
                        addr.parse::<Ipv4Addr>()
                            .map_err(|e| format!("device entry {entry:?}: {e}"))?,
                        ROCE_PORT,
                    ),
                };
                Ok(SysfsDevice {
                    name: name.into(),
                    bind,
                    fixed: true,
                })
            })
            .collect()
    }

    /// The network interface holding the device's address: `lo` for
    /// loopback, else the interface with that address, if any.
    pub fn netdev(&self) -> Option<String> {
        let ip = *self.bind.ip();
        if ip.is_loopback() {
            return Some("lo".into());
        }
        interfaces()
            .into_iter()
            .find(|(_, a)| *a == ip)
            .map(|(name, _)| name)
    }

    /// The device's GID at index 0: the IPv4-mapped IPv6 address, in
    /// sysfs's notation (eight groups of four hex digits).
    pub fn gid(&self) -> String {
        let o = self.bind.ip().octets();
        format!(
            "0000:0000:0000:0000:0000:ffff:{:02x}{:02x}:{:02x}{:02x}",
            o[0], o[1], o[2], o[3]
        )
    }

    /// The node GUID as sysfs prints it (`xxxx:xxxx:xxxx:xxxx`), the one
    /// the drop-in libibverbs reports.
    pub fn node_guid(&self) -> String {
        let bind = if self.fixed {
            self.bind
        } else {
            SocketAddrV4::new([127, 0, 0, 0].into(), ROCE_PORT)
        };
        let g = node_guid_for(bind);
        format!(
            "{:04x}:{:04x}:{:04x}:{:04x}",
            g >> 48,
            (g >> 32) & 0xffff,
            (g >> 16) & 0xffff,
            g & 0xffff
        )
    }
}

/// The first loopback address a process with id `pid` tries:
/// `127.0.H.L` with `H << 8 | L = 1 + pid % 0xBFFF` (a unicast LID), as
/// the drop-in libibverbs picks it.
pub fn loopback_first(pid: u32) -> SocketAddrV4 {
    let lid = 1 + pid % 0xBFFF;
    SocketAddrV4::new(
        Ipv4Addr::new(127, 0, (lid >> 8) as u8, lid as u8),
        ROCE_PORT,
    )
}

/// One entry of the view: a directory, or a file with its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A directory (relative path under `/sys/class`).
    Dir(String),
    /// A file (relative path, contents).
    File(String, String),
}

/// The entries describing `devices`, parents before children, paths
/// relative to `/sys/class`.
pub fn tree(devices: &[SysfsDevice]) -> Vec<Entry> {
    use Entry::{Dir, File};
    let mut out = vec![
        Dir("infiniband".into()),
        Dir("infiniband_verbs".into()),
        File("infiniband_verbs/abi_version".into(), "6\n".into()),
    ];
    for (i, dev) in devices.iter().enumerate() {
        let d = format!("infiniband/{}", dev.name);
        let port = format!("{d}/ports/1");
        let netdev = dev.netdev();
        out.extend([
            Dir(d.clone()),
            File(format!("{d}/node_type"), "1: CA\n".into()),
            File(format!("{d}/node_guid"), format!("{}\n", dev.node_guid())),
            File(
                format!("{d}/sys_image_guid"),
                format!("{}\n", dev.node_guid()),
            ),
            File(format!("{d}/fw_ver"), "1.0.0\n".into()),
            File(format!("{d}/hca_type"), "rocelab\n".into()),
            File(format!("{d}/node_desc"), format!("rocelab {}\n", dev.name)),
            Dir(format!("{d}/device")),
            File(format!("{d}/device/numa_node"), "-1\n".into()),
            Dir(format!("{d}/device/net")),
        ]);
        if let Some(n) = &netdev {
            out.push(Dir(format!("{d}/device/net/{n}")));
            out.push(File(format!("{d}/device/net/{n}/ifname"), format!("{n}\n")));
        }
        out.extend([
            Dir(format!("{d}/ports")),
            Dir(port.clone()),
            File(format!("{port}/state"), "4: ACTIVE\n".into()),
            File(format!("{port}/phys_state"), "5: LinkUp\n".into()),
            File(format!("{port}/link_layer"), "Ethernet\n".into()),
            File(format!("{port}/lid"), "0x0\n".into()),
            File(format!("{port}/sm_lid"), "0x0\n".into()),
            File(format!("{port}/lid_mask_count"), "0\n".into()),
            File(format!("{port}/cap_mask"), "0x00010000\n".into()),
            File(format!("{port}/rate"), "100 Gb/sec (4X EDR)\n".into()),
            Dir(format!("{port}/gids")),
            File(format!("{port}/gids/0"), format!("{}\n", dev.gid())),
            Dir(format!("{port}/pkeys")),
            File(format!("{port}/pkeys/0"), "0xffff\n".into()),
            Dir(format!("{port}/gid_attrs")),
            Dir(format!("{port}/gid_attrs/types")),
            File(format!("{port}/gid_attrs/types/0"), "RoCE v2\n".into()),
            Dir(format!("{port}/gid_attrs/ndevs")),
        ]);
        if let Some(n) = &netdev {
            out.push(File(format!("{port}/gid_attrs/ndevs/0"), format!("{n}\n")));
        }
        let v = format!("infiniband_verbs/uverbs{i}");
        out.extend([
            Dir(v.clone()),
            File(format!("{v}/ibdev"), format!("{}\n", dev.name)),
            File(format!("{v}/abi_version"), "1\n".into()),
            File(format!("{v}/dev"), format!("231:{}\n", 192 + i)),
        ]);
    }
    out
}

/// The character device names under `/dev/infiniband` for `devices`
/// (`uverbs0`, `uverbs1`, ...), in order.
pub fn device_nodes(devices: &[SysfsDevice]) -> Vec<String> {
    (0..devices.len()).map(|i| format!("uverbs{i}")).collect()
}

/// Writes [`tree`]`(devices)` under `root` (which stands for `/sys/class`).
pub fn write_tree(root: &Path, devices: &[SysfsDevice]) -> io::Result<()> {
    for e in tree(devices) {
        match e {
            Entry::Dir(p) => std::fs::create_dir_all(root.join(p))?,
            Entry::File(p, text) => std::fs::write(root.join(p), text)?,
        }
    }
    Ok(())
}

/// The view as text (`path` or `path = contents` per line), for a
/// reader's check.
pub fn describe(devices: &[SysfsDevice]) -> String {
    let mut s = String::new();
    for e in tree(devices) {
        let _ = match e {
            Entry::Dir(p) => writeln!(s, "{p}/"),
            Entry::File(p, t) => writeln!(s, "{p} = {}", t.trim_end()),
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_device_is_loopback_on_lo_with_a_roce_v2_gid() {
        let d = SysfsDevice::parse_list(None, 0x0102).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].name, "rocelab0");
        assert_eq!(d[0].bind, "127.0.1.3:4791".parse().unwrap());
        assert_eq!(d[0].netdev().as_deref(), Some("lo"));
        let t = describe(&d);
        assert!(t.contains("infiniband/rocelab0/device/net/lo/\n"), "{t}");
        assert!(t.contains("infiniband/rocelab0/ports/1/gid_attrs/types/0 = RoCE v2\n"));
        assert!(t.contains("infiniband/rocelab0/ports/1/gid_attrs/ndevs/0 = lo\n"));
        assert!(t.contains(
            "infiniband/rocelab0/ports/1/gids/0 = 0000:0000:0000:0000:0000:ffff:7f00:0103\n"
        ));
        assert!(t.contains("infiniband_verbs/uverbs0/ibdev = rocelab0\n"));
        assert!(
            t.contains("infiniband/rocelab0/node_guid = 0200:7f00:0000:12b7\n"),
            "{t}"
        );
        assert_eq!(device_nodes(&d), ["uverbs0"]);
    }

    #[test]
    fn listed_devices_keep_their_order_addresses_and_guids() {
        let d = SysfsDevice::parse_list(Some("a=127.0.0.7, b=192.0.2.1:5000"), 1).unwrap();
        assert_eq!(d[0].bind, "127.0.0.7:4791".parse().unwrap());
        assert_eq!(d[1].bind, "192.0.2.1:5000".parse().unwrap());
        assert_eq!(d[1].node_guid(), "0200:c000:0201:1388");
        // No interface holds a documentation address: no net directory entry.
        assert_eq!(d[1].netdev(), None);
        let t = describe(&d);
        assert!(t.contains("infiniband_verbs/uverbs1/ibdev = b\n"));
        assert!(!t.contains("infiniband/b/device/net/lo"));
    }

    #[test]
    fn bad_entries_are_errors_not_paths() {
        for bad in [
            "x",
            "../x=127.0.0.1",
            "a=1.2.3",
            "=127.0.0.1",
            "a/b=127.0.0.1",
        ] {
            assert!(SysfsDevice::parse_list(Some(bad), 1).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_tree_is_written_parents_first() {
        let root = std::env::temp_dir().join(format!("rocelab-sysfs-test-{}", std::process::id()));
        let d = SysfsDevice::parse_list(None, 5).unwrap();
        write_tree(&root, &d).unwrap();
        let t = std::fs::read_to_string(root.join("infiniband/rocelab0/ports/1/gid_attrs/types/0"));
        assert_eq!(t.unwrap(), "RoCE v2\n");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
