//! The device and port records of every device/port-state tool
//! ([`HcaInfo`], [`PortInfo`], [`ConfigParam`]): [`super::devinfo`] reads
//! them from `ibv_devinfo` and `ibstat`, [`super::ibdiag`] from `ibstatus`,
//! `ibportstate`, `iblinkinfo`, `rdma link` / `rdma dev` and `mlxconfig`;
//! and the readers of printed values both parsers share.
//!
//! Units: `rate_bps` is the port's data rate in bits per second, per-lane
//! speeds in bit/s, MTUs in bytes.

use std::collections::BTreeMap;

use serde::Serialize;

/// One RDMA device.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HcaInfo {
    /// Line where the device starts.
    pub line: usize,
    /// The tool whose output this is: `ibv_devinfo`, `ibstat`, `ibstatus`,
    /// `ibportstate`, `iblinkinfo`, `rdma link`, `rdma dev` or `mlxconfig`.
    pub tool: String,
    /// `hca_id` / CA name (`mlx5_0`); for `ibportstate` the queried
    /// address (`Lid 2`), for `iblinkinfo` the node description
    /// (`n02 HCA-1`, a switch's name), for `mlxconfig` the `Device:` (PCI
    /// address or MST device).
    pub name: String,
    /// Firmware version.
    pub fw_ver: Option<String>,
    /// PCI device id (`vendor_part_id`, or the number in `CA type: MT4125`).
    pub part_id: Option<u32>,
    /// Every other `key: value` attribute of the device, as printed
    /// (`node_guid`, `CA type`, `Node GUID`, `hw_ver`, ...).
    pub attributes: BTreeMap<String, String>,
    /// Ports.
    pub ports: Vec<PortInfo>,
    /// `mlxconfig` parameters, in printed order (empty for other tools).
    pub config: Vec<ConfigParam>,
}

/// One `mlxconfig ... query` parameter.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConfigParam {
    /// Parameter name (`SRIOV_EN`, `LINK_TYPE_P1`, `ROCE_CONTROL`).
    pub name: String,
    /// Value per printed column (`Default`, `Current`, `Next Boot`, `New`),
    /// as printed (`True(1)`, `ETH(2)`, `Array[0..7]`).
    pub values: BTreeMap<String, String>,
    /// Marked with `*` (changed from the default).
    pub modified: bool,
}

impl ConfigParam {
    /// The value in use: `Current`, else `Next Boot`, else the only column.
    pub fn current(&self) -> Option<&str> {
        self.values
            .get("Current")
            .or_else(|| self.values.get("Next Boot"))
            .or_else(|| self.values.values().next())
            .map(String::as_str)
    }
}

/// One port.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct PortInfo {
    /// Port number.
    pub port: u32,
    /// Logical state (`PORT_ACTIVE` / `Active`).
    pub state: Option<String>,
    /// Physical state (`LINK_UP` / `LinkUp`).
    pub phys_state: Option<String>,
    /// Whether the port is active (logical state).
    pub active: bool,
    /// Largest MTU the port supports, bytes.
    pub max_mtu: Option<u32>,
    /// MTU in use, bytes.
    pub active_mtu: Option<u32>,
    /// `Ethernet` (RoCE) or `InfiniBand`.
    pub link_layer: Option<String>,
    /// Lanes (`4X` -> 4).
    pub width_lanes: Option<u32>,
    /// Per-lane speed, bit/s.
    pub lane_bps: Option<u64>,
    /// Widest width the port supports (`LinkWidthSupported`, or
    /// `iblinkinfo`'s `Could be 12X`), lanes.
    pub max_width_lanes: Option<u32>,
    /// Fastest per-lane speed the port supports (`LinkSpeedSupported` /
    /// `LinkSpeedExtSupported`, or `iblinkinfo`'s `Could be 10.0 Gbps`),
    /// bit/s.
    pub max_lane_bps: Option<u64>,
    /// Port rate, bit/s.
    pub rate_bps: Option<u64>,
    /// Every other `key: value` attribute of the port, as printed
    /// (`port_lid`, `Base lid`, `Port GUID`, `GID[  3]`, `sm_lid`, ...).
    pub attributes: BTreeMap<String, String>,
}

/// The first word of a printed value (`PORT_ACTIVE` of `PORT_ACTIVE (4)`), or `""`.
pub(crate) fn first_word(v: &str) -> String {
    v.split_whitespace().next().unwrap_or("").to_string()
}

/// A printed link width as lanes: `4X` -> 4.
pub(crate) fn lanes(v: &str) -> Option<u32> {
    v.split_whitespace()
        .next()?
        .strip_suffix(['X', 'x'])?
        .parse()
        .ok()
}
