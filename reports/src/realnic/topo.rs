//! `nvidia-smi topo -m` matrices: GPUs and NICs, the link code between
//! each pair, CPU/NUMA affinity columns and the `NIC Legend:` block.
//!
//! Accepts TAB- or space-separated matrices, older drivers that name NICs
//! `mlx5_0` directly in the header, and any legend text after the matrix.
//! Never panics; errors when no header row starting with `GPU0` (or a NIC
//! name) is found, or a row has fewer cells than devices.

use std::collections::BTreeMap;

use serde::Serialize;

use super::text::{lines, ParseError};

/// A matrix cell: how two devices are connected.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TopoLink {
    /// `X`: the device itself.
    Itself,
    /// `NV#`: that many bonded NVLinks.
    NvLink(u32),
    /// `PIX`: at most one PCIe switch.
    Pix,
    /// `PXB`: several PCIe switches, no host bridge.
    Pxb,
    /// `PHB`: through a PCIe host bridge.
    Phb,
    /// `NODE`: across host bridges within a NUMA node.
    Node,
    /// `SYS`: across the CPU interconnect.
    Sys,
    /// Anything else, verbatim.
    Other(String),
}

impl TopoLink {
    /// Parse one cell code.
    pub fn parse(s: &str) -> TopoLink {
        match s {
            "X" => TopoLink::Itself,
            "PIX" => TopoLink::Pix,
            "PXB" => TopoLink::Pxb,
            "PHB" => TopoLink::Phb,
            "NODE" => TopoLink::Node,
            "SYS" => TopoLink::Sys,
            _ => match s.strip_prefix("NV").and_then(|n| n.parse().ok()) {
                Some(n) => TopoLink::NvLink(n),
                None => TopoLink::Other(s.to_string()),
            },
        }
    }

    /// PCIe distance rank (smaller is closer): PIX 0 .. SYS 4. NVLink and
    /// self rank closest; unknown codes rank farthest.
    pub fn pcie_rank(&self) -> u8 {
        match self {
            TopoLink::Itself | TopoLink::NvLink(_) => 0,
            TopoLink::Pix => 1,
            TopoLink::Pxb => 2,
            TopoLink::Phb => 3,
            TopoLink::Node => 4,
            TopoLink::Sys => 5,
            TopoLink::Other(_) => 6,
        }
    }

    /// NCCL's default `NCCL_NET_GDR_LEVEL` is PXB: GPUDirect RDMA is used
    /// for GPU-NIC pairs at PIX or PXB distance.
    pub fn gdr_by_default(&self) -> bool {
        self.pcie_rank() <= 2
    }

    /// The code as `nvidia-smi` prints it.
    pub fn code(&self) -> String {
        match self {
            TopoLink::Itself => "X".into(),
            TopoLink::NvLink(n) => format!("NV{n}"),
            TopoLink::Pix => "PIX".into(),
            TopoLink::Pxb => "PXB".into(),
            TopoLink::Phb => "PHB".into(),
            TopoLink::Node => "NODE".into(),
            TopoLink::Sys => "SYS".into(),
            TopoLink::Other(s) => s.clone(),
        }
    }
}

/// A parsed `topo -m` matrix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct TopoMatrix {
    /// Device column names in order (`GPU0`, ..., `NIC0`, ... or `mlx5_0`).
    pub devices: Vec<String>,
    /// `cells[row][col]`, rows in the same order as `devices` (rows not
    /// printed are left empty).
    pub cells: Vec<Vec<TopoLink>>,
    /// `CPU Affinity` per row device.
    pub cpu_affinity: BTreeMap<String, String>,
    /// `NUMA Affinity` per row device.
    pub numa_affinity: BTreeMap<String, String>,
    /// `NIC Legend`: `NIC0` -> `mlx5_0`.
    pub nic_legend: BTreeMap<String, String>,
}

/// The closest NIC of one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuNic {
    /// GPU name (`GPU0`).
    pub gpu: String,
    /// NIC column name (`NIC0` or `mlx5_0`).
    pub nic: String,
    /// RDMA device name from the legend, when known.
    pub nic_device: Option<String>,
    /// Link between them.
    pub link: TopoLink,
}

impl TopoMatrix {
    /// Whether a device name is a GPU.
    pub fn is_gpu(name: &str) -> bool {
        name.starts_with("GPU")
    }

    /// The link between two devices by name.
    pub fn link(&self, a: &str, b: &str) -> Option<&TopoLink> {
        let i = self.devices.iter().position(|d| d == a)?;
        let j = self.devices.iter().position(|d| d == b)?;
        self.cells.get(i)?.get(j)
    }

    /// For each GPU, the NIC with the smallest PCIe distance (first in
    /// column order on ties).
    pub fn nearest_nics(&self) -> Vec<GpuNic> {
        let mut out = Vec::new();
        for (i, g) in self.devices.iter().enumerate() {
            if !Self::is_gpu(g) {
                continue;
            }
            let Some(row) = self.cells.get(i) else {
                continue;
            };
            let best = self
                .devices
                .iter()
                .enumerate()
                .filter(|(_, d)| !Self::is_gpu(d))
                .filter_map(|(j, d)| row.get(j).map(|c| (c, d)))
                .min_by_key(|(c, _)| c.pcie_rank());
            if let Some((link, nic)) = best {
                out.push(GpuNic {
                    gpu: g.clone(),
                    nic: nic.clone(),
                    nic_device: self.nic_legend.get(nic).cloned(),
                    link: link.clone(),
                });
            }
        }
        out
    }
}

fn is_device_name(t: &str) -> bool {
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    t.strip_prefix("GPU").is_some_and(digits)
        || t.strip_prefix("NIC").is_some_and(digits)
        || t.strip_prefix("mlx5_").is_some_and(digits)
        || t.strip_prefix("mlx4_").is_some_and(digits)
}

/// Parse a `nvidia-smi topo -m` output.
pub fn parse(input: &str) -> Result<TopoMatrix, ParseError> {
    let all = lines(input);
    let mut m = TopoMatrix::default();
    let mut header_seen = false;
    let mut in_legend = false;
    for l in &all {
        let t = l.text.trim();
        if t.is_empty() {
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        if !header_seen {
            if toks.first().is_some_and(|f| is_device_name(f)) {
                m.devices = toks
                    .iter()
                    .take_while(|t| is_device_name(t))
                    .map(|s| s.to_string())
                    .collect();
                m.cells = vec![Vec::new(); m.devices.len()];
                header_seen = true;
            }
            continue;
        }
        if t.starts_with("NIC Legend") {
            in_legend = true;
            continue;
        }
        if in_legend {
            if let Some((k, v)) = t.split_once(':') {
                if is_device_name(k.trim()) {
                    m.nic_legend
                        .insert(k.trim().to_string(), v.trim().to_string());
                }
            }
            continue;
        }
        let Some(first) = toks.first() else { continue };
        if !is_device_name(first) {
            continue;
        }
        let Some(row) = m.devices.iter().position(|d| d == first) else {
            continue;
        };
        let n = m.devices.len();
        if toks.len() < 1 + n {
            return Err(ParseError::new(
                l.number,
                format!("{n} matrix cells after `{first}`"),
                l.text,
            ));
        }
        m.cells[row] = toks[1..=n].iter().map(|c| TopoLink::parse(c)).collect();
        let rest = &toks[1 + n..];
        if let Some(cpu) = rest.first() {
            m.cpu_affinity.insert(first.to_string(), cpu.to_string());
        }
        if let Some(numa) = rest.get(1) {
            m.numa_affinity.insert(first.to_string(), numa.to_string());
        }
    }
    if !header_seen {
        let first = all.iter().find(|l| !l.text.trim().is_empty());
        return Err(ParseError::new(
            first.map_or(0, |l| l.number),
            "a `topo -m` header row starting with `GPU0`",
            first.map_or("", |l| l.text),
        ));
    }
    Ok(m)
}
