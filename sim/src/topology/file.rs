//! Topology files (TOML).
//!
//! A file either lists hosts, switches and links, or names a generator:
//!
//! ```toml
//! # Explicit: two hosts on one switch.
//! hosts = ["h0", "h1"]
//! switches = ["sw0"]
//! [defaults]            # link properties every link starts from
//! rate = "100Gbps"
//! delay = "1us"         # or cable_m = 2 (5 ns per metre)
//! mtu = 4096
//! [[link]]
//! a = "h0"
//! b = "sw0"
//! [[link]]
//! a = "h1"
//! b = "sw0"
//! cable_m = 100         # per-link override
//! ```
//!
//! ```toml
//! [generator]
//! kind = "fat-tree"     # or "leaf-spine", "dumbbell", "chain",
//!                       # "gpu-leaf-spine", "gpu-fat-tree" (with a [gpu] table)
//! k = 8
//! planes = 1            # fat-tree, leaf-spine: independent copies, each
//!                       # host with one port per plane (switches p{k}-...)
//! [defaults]
//! rate = "100Gbps"
//! ```
//!
//! GPU servers (see [`super::gpu`]): a `[gpu]` table makes every
//! `nics` consecutive hosts one server with `gpus` GPUs:
//!
//! ```toml
//! [gpu]
//! gpus = 8
//! nics = 8
//! nvlink_rate = "3600Gbps"   # per GPU and direction (default)
//! nvlink_latency = "1us"
//! nvswitch = true
//! gpudirect = true
//! pcie_rate = "512Gbps"
//! [generator]
//! kind = "gpu-leaf-spine"
//! servers = 16
//! servers_per_leaf = 8
//! spines = 8
//! rail_optimised = true
//! ```
//!
//! Link properties resolve from the most specific layer down: the link
//! (or a generator's `host_link`/`fabric_link`/`bottleneck`), then
//! `[defaults]`, then 100 Gbit/s, 1 us, MTU 4096. A layer that gives
//! `cable_m` without `delay` derives the delay from the cable (5 ns/m).
//! Hosts come first in node order, so host index `i` is the `i`-th name in
//! `hosts` (or `h{i}` from a generator).

use std::path::Path;

use roce::time::{Duration, Rate};
use serde::Deserialize;

use super::generate::{self, GpuLeafSpine, LeafSpine};
use super::{GpuServers, LinkProps, NodeKind, NvLink, Topology, TopologyError};
use crate::input::{decode_str, decode_value, read_file, FileError};

/// Propagation delay per metre of fibre.
pub const DELAY_PER_METRE: Duration = Duration::from_ns(5);

/// The document of a topology file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TopologyDoc {
    /// A short name (reports show it).
    #[serde(default)]
    pub name: Option<String>,
    /// Free text.
    #[serde(default)]
    pub description: Option<String>,
    /// Link properties every link starts from.
    #[serde(default)]
    pub defaults: LinkSpec,
    /// A generator instead of explicit lists.
    #[serde(default)]
    pub generator: Option<GeneratorSpec>,
    /// Host names, in host-index order.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// Switch names.
    #[serde(default)]
    pub switches: Vec<String>,
    /// Links.
    #[serde(default, rename = "link")]
    pub links: Vec<LinkDoc>,
    /// GPU servers behind the hosts (see [`super::gpu`]).
    #[serde(default)]
    pub gpu: Option<GpuDoc>,
}

/// The `[gpu]` table: what each server of `nics` consecutive hosts holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuDoc {
    /// GPUs per server.
    pub gpus: u32,
    /// NICs (hosts) per server, one per rail.
    pub nics: u32,
    /// A GPU's NVLink bandwidth per direction (default 3600 Gbit/s, H100).
    #[serde(default)]
    pub nvlink_rate: Option<Rate>,
    /// Latency of an NVLink transfer (default 1 us).
    #[serde(default)]
    pub nvlink_latency: Option<Duration>,
    /// An NVSwitch joins the GPUs (default true); false: point to point.
    #[serde(default)]
    pub nvswitch: Option<bool>,
    /// GPUDirect RDMA (default true).
    #[serde(default)]
    pub gpudirect: Option<bool>,
    /// A GPU's PCIe rate to host memory (default 512 Gbit/s, Gen5 x16).
    #[serde(default)]
    pub pcie_rate: Option<Rate>,
    /// Latency of a PCIe copy (default 1 us).
    #[serde(default)]
    pub pcie_latency: Option<Duration>,
}

/// Link properties, each optional (unset ones come from the layer below).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkSpec {
    /// Rate of each direction (`"100Gbps"`).
    #[serde(default)]
    pub rate: Option<Rate>,
    /// One-way propagation delay (`"1us"`).
    #[serde(default)]
    pub delay: Option<Duration>,
    /// Cable length in metres.
    #[serde(default)]
    pub cable_m: Option<u32>,
    /// Ethernet MTU in bytes.
    #[serde(default)]
    pub mtu: Option<u32>,
}

impl LinkSpec {
    /// `self` laid over `base`: set fields win; a cable length without a
    /// delay does not inherit the base's delay.
    pub fn over(self, base: LinkSpec) -> LinkSpec {
        LinkSpec {
            rate: self.rate.or(base.rate),
            delay: match (self.delay, self.cable_m) {
                (Some(d), _) => Some(d),
                (None, Some(_)) => None,
                (None, None) => base.delay,
            },
            cable_m: self.cable_m.or(base.cable_m),
            mtu: self.mtu.or(base.mtu),
        }
    }

    /// The resolved properties (built-in defaults for what is unset).
    pub fn props(self) -> LinkProps {
        let d = LinkProps::default();
        LinkProps {
            rate: self.rate.unwrap_or(d.rate),
            delay: match (self.delay, self.cable_m) {
                (Some(delay), _) => delay,
                (None, Some(m)) => DELAY_PER_METRE.saturating_mul(u64::from(m)),
                (None, None) => d.delay,
            },
            cable_m: self.cable_m,
            mtu: self.mtu.unwrap_or(d.mtu),
        }
    }
}

/// One explicit link.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDoc {
    /// Name of one end.
    pub a: String,
    /// Name of the other end.
    pub b: String,
    /// Rate override.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Delay override.
    #[serde(default)]
    pub delay: Option<Duration>,
    /// Cable length override.
    #[serde(default)]
    pub cable_m: Option<u32>,
    /// MTU override.
    #[serde(default)]
    pub mtu: Option<u32>,
}

/// A generator and its parameters (`kind` selects it).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum GeneratorSpec {
    /// Two switches and one bottleneck link.
    Dumbbell {
        /// Hosts on the left switch.
        left: u32,
        /// Hosts on the right switch.
        right: u32,
        /// Host links.
        #[serde(default)]
        host_link: LinkSpec,
        /// The switch-to-switch link.
        #[serde(default)]
        bottleneck: LinkSpec,
    },
    /// Switches in a line.
    Chain {
        /// Number of switches.
        switches: u32,
        /// Hosts per switch.
        hosts_per_switch: u32,
        /// Host links.
        #[serde(default)]
        host_link: LinkSpec,
        /// Switch-to-switch links.
        #[serde(default)]
        fabric_link: LinkSpec,
    },
    /// Two-tier leaf-spine.
    LeafSpine {
        /// Leaf switches.
        leaves: u32,
        /// Spine switches.
        spines: u32,
        /// Hosts per leaf.
        hosts_per_leaf: u32,
        /// Downlink:uplink bandwidth ratio; derives the uplink rate.
        #[serde(default)]
        oversubscription: Option<f64>,
        /// Independent planes, each a copy of the leaf-spine, every host
        /// with one port in each (default 1).
        #[serde(default)]
        planes: Option<u32>,
        /// Host links.
        #[serde(default)]
        host_link: LinkSpec,
        /// Leaf-spine links.
        #[serde(default)]
        fabric_link: LinkSpec,
    },
    /// Leaf-spine of GPU servers (`[gpu]` gives the NICs per server).
    GpuLeafSpine {
        /// GPU servers.
        servers: u32,
        /// Servers per leaf (per rail leaf when rail-optimised).
        servers_per_leaf: u32,
        /// Spine switches.
        spines: u32,
        /// NIC `r` of every server on rail `r`'s leaf (default true).
        #[serde(default)]
        rail_optimised: Option<bool>,
        /// Downlink:uplink bandwidth ratio; derives the uplink rate.
        #[serde(default)]
        oversubscription: Option<f64>,
        /// Host (NIC) links.
        #[serde(default)]
        host_link: LinkSpec,
        /// Leaf-spine links.
        #[serde(default)]
        fabric_link: LinkSpec,
    },
    /// 3-tier k-ary fat tree of GPU servers (`[gpu]` gives the NICs per
    /// server).
    GpuFatTree {
        /// Switch radix (even).
        k: u32,
        /// NIC `r` of a pod's servers on the pod's edge `r` (default
        /// true; needs k/2 NICs per server).
        #[serde(default)]
        rail_optimised: Option<bool>,
        /// Host (NIC) links.
        #[serde(default)]
        host_link: LinkSpec,
        /// Switch-to-switch links.
        #[serde(default)]
        fabric_link: LinkSpec,
    },
    /// 3-tier k-ary fat tree.
    FatTree {
        /// Switch radix (even).
        k: u32,
        /// Independent planes, each a copy of the fat tree, every host
        /// with one port in each (default 1).
        #[serde(default)]
        planes: Option<u32>,
        /// Host links.
        #[serde(default)]
        host_link: LinkSpec,
        /// Switch-to-switch links.
        #[serde(default)]
        fabric_link: LinkSpec,
    },
}

/// Load and build a topology file.
pub fn load(path: &Path) -> Result<Topology, FileError> {
    let text = read_file(path)?;
    from_str(path, &text)
}

/// Build a topology from the text of a file named `file`.
pub fn from_str(file: &Path, text: &str) -> Result<Topology, FileError> {
    let doc: TopologyDoc = decode_str(file, text).map_err(|e| {
        let raw = text.parse::<toml::Table>().ok();
        sharpen(file, e, raw.as_ref().and_then(|t| t.get("generator")), "").locate(text)
    })?;
    build(&doc, file, "")
}

/// Build a topology from a TOML value found under `prefix` in `file`
/// (an inline `[topology]` table of a scenario).
pub fn from_value(file: &Path, value: toml::Value, prefix: &str) -> Result<Topology, FileError> {
    let generator = value.get("generator").cloned();
    let doc: TopologyDoc = decode_value(file, value, prefix)
        .map_err(|e| sharpen(file, e, generator.as_ref(), prefix))?;
    build(&doc, file, prefix)
}

/// A decoding error that names only `generator` (serde reads the tagged
/// generator table whole, losing the key inside it) named at the key of
/// the link table at fault instead (`generator.fabric_link.rate`), when
/// one of them is wrong on its own; any other error as it is.
fn sharpen(
    file: &Path,
    err: FileError,
    generator: Option<&toml::Value>,
    prefix: &str,
) -> FileError {
    let whole = if prefix.is_empty() {
        "generator".to_string()
    } else {
        format!("{prefix}.generator")
    };
    if err.key.as_deref() != Some(whole.as_str()) {
        return err;
    }
    let Some(toml::Value::Table(t)) = generator else {
        return err;
    };
    for k in ["host_link", "fabric_link", "bottleneck"] {
        if let Some(v) = t.get(k) {
            if let Err(e) = decode_value::<LinkSpec>(file, v.clone(), &format!("{whole}.{k}")) {
                return e;
            }
        }
    }
    err
}

/// Build the topology a document describes and check it
/// ([`Topology::check`]); errors name keys under `prefix`.
pub fn build(doc: &TopologyDoc, file: &Path, prefix: &str) -> Result<Topology, FileError> {
    let err = |key: &str, e: TopologyError| FileError::new(file, key, e.to_string()).under(prefix);
    let defaults = doc.defaults;
    let topo = match &doc.generator {
        Some(g) => {
            if !doc.hosts.is_empty() || !doc.switches.is_empty() || !doc.links.is_empty() {
                return Err(FileError::new(
                    file,
                    "generator",
                    "a generator and explicit hosts/switches/links: expected one or the other",
                )
                .under(prefix));
            }
            let l = |s: &LinkSpec| s.over(defaults).props();
            // The GPU generators read the NICs per server from [gpu].
            let gpu_table = |kind: &str| {
                doc.gpu.ok_or_else(|| {
                    FileError::new(
                        file,
                        "generator.kind",
                        format!("{kind} without a [gpu] table: expected one giving gpus and nics per server"),
                    )
                    .under(prefix)
                })
            };
            let one_uplink_rate = |o: &Option<f64>, fabric: &LinkSpec| {
                if o.is_some() && fabric.rate.is_some() {
                    Err(FileError::new(
                        file,
                        "generator.oversubscription",
                        "both oversubscription and fabric_link.rate: expected one of them",
                    )
                    .under(prefix))
                } else {
                    Ok(())
                }
            };
            let key = match g {
                GeneratorSpec::Dumbbell { .. } => "generator",
                GeneratorSpec::Chain { .. } => "generator",
                GeneratorSpec::LeafSpine { .. } => "generator",
                GeneratorSpec::FatTree { .. } => "generator.k",
                GeneratorSpec::GpuLeafSpine { .. } => "generator",
                GeneratorSpec::GpuFatTree { .. } => "generator.k",
            };
            let built = match g {
                GeneratorSpec::Dumbbell {
                    left,
                    right,
                    host_link,
                    bottleneck,
                } => generate::dumbbell(*left, *right, l(host_link), l(bottleneck)),
                GeneratorSpec::Chain {
                    switches,
                    hosts_per_switch,
                    host_link,
                    fabric_link,
                } => generate::chain(*switches, *hosts_per_switch, l(host_link), l(fabric_link)),
                GeneratorSpec::LeafSpine {
                    leaves,
                    spines,
                    hosts_per_leaf,
                    oversubscription,
                    planes,
                    host_link,
                    fabric_link,
                } => {
                    one_uplink_rate(oversubscription, fabric_link)?;
                    generate::leaf_spine(&LeafSpine {
                        leaves: *leaves,
                        spines: *spines,
                        hosts_per_leaf: *hosts_per_leaf,
                        host_link: l(host_link),
                        fabric_link: l(fabric_link),
                        oversubscription: *oversubscription,
                    })
                    .and_then(|t| generate::planes(t, planes.unwrap_or(1)))
                }
                GeneratorSpec::FatTree {
                    k,
                    planes,
                    host_link,
                    fabric_link,
                } => generate::fat_tree(*k, l(host_link), l(fabric_link))
                    .and_then(|t| generate::planes(t, planes.unwrap_or(1))),
                GeneratorSpec::GpuFatTree {
                    k,
                    rail_optimised,
                    host_link,
                    fabric_link,
                } => {
                    let gpu = gpu_table("gpu-fat-tree")?;
                    generate::gpu_fat_tree(
                        *k,
                        gpu.nics,
                        rail_optimised.unwrap_or(true),
                        l(host_link),
                        l(fabric_link),
                    )
                }
                GeneratorSpec::GpuLeafSpine {
                    servers,
                    servers_per_leaf,
                    spines,
                    rail_optimised,
                    oversubscription,
                    host_link,
                    fabric_link,
                } => {
                    let gpu = gpu_table("gpu-leaf-spine")?;
                    one_uplink_rate(oversubscription, fabric_link)?;
                    generate::gpu_leaf_spine(&GpuLeafSpine {
                        servers: *servers,
                        nics: gpu.nics,
                        servers_per_leaf: *servers_per_leaf,
                        spines: *spines,
                        rail_optimised: rail_optimised.unwrap_or(true),
                        host_link: l(host_link),
                        fabric_link: l(fabric_link),
                        oversubscription: *oversubscription,
                    })
                }
            };
            built.map_err(|e| match &e {
                // The [gpu] table's keys are named as they are.
                TopologyError::BadParameter { param, .. } if param.starts_with("gpu.") => {
                    err(param, e)
                }
                TopologyError::BadParameter { param, .. } => err(&format!("generator.{param}"), e),
                _ => err(key, e),
            })?
        }
        None => {
            let mut t = Topology::new();
            for h in &doc.hosts {
                t.add_node(h.clone(), NodeKind::Host);
            }
            for s in &doc.switches {
                t.add_node(s.clone(), NodeKind::Switch);
            }
            // Name lookups through a sorted index: files may list thousands.
            let mut index: Vec<(&str, u32)> = t
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.name.as_str(), i as u32))
                .collect();
            index.sort_unstable();
            if let Some(w) = index.windows(2).find(|w| w[0].0 == w[1].0) {
                return Err(err(
                    "hosts",
                    TopologyError::DuplicateName(w[0].0.to_string()),
                ));
            }
            let find = |name: &str| {
                index
                    .binary_search_by(|(n, _)| (*n).cmp(name))
                    .ok()
                    .map(|i| super::NodeId(index[i].1))
            };
            let mut resolved = Vec::with_capacity(doc.links.len());
            for (i, l) in doc.links.iter().enumerate() {
                let a = find(&l.a).ok_or_else(|| {
                    err(
                        &format!("link[{i}].a"),
                        TopologyError::UnknownNode(l.a.clone()),
                    )
                })?;
                let b = find(&l.b).ok_or_else(|| {
                    err(
                        &format!("link[{i}].b"),
                        TopologyError::UnknownNode(l.b.clone()),
                    )
                })?;
                let spec = LinkSpec {
                    rate: l.rate,
                    delay: l.delay,
                    cable_m: l.cable_m,
                    mtu: l.mtu,
                };
                resolved.push((a, b, spec.over(defaults).props()));
            }
            for (i, (a, b, props)) in resolved.into_iter().enumerate() {
                t.add_link(a, b, props)
                    .map_err(|e| err(&format!("link[{i}]"), e))?;
            }
            t
        }
    };
    let mut topo = topo;
    if let Some(g) = doc.gpu {
        let nvlink = NvLink {
            rate: g.nvlink_rate.unwrap_or(NvLink::H100.rate),
            latency: g.nvlink_latency.unwrap_or(NvLink::H100.latency),
            switched: g.nvswitch.unwrap_or(true),
        };
        let mut servers = GpuServers::new(
            g.gpus,
            g.nics,
            topo.host_count() as u32,
            nvlink,
            g.gpudirect.unwrap_or(true),
            g.pcie_rate.unwrap_or(Rate::from_gbps(512)),
        )
        .map_err(|e| FileError::new(file, e.param, e.to_string()).under(prefix))?;
        if let Some(l) = g.pcie_latency {
            servers.pcie_latency = l;
        }
        topo.gpu = Some(servers);
    }
    topo.check().map_err(|e| {
        let key = match e {
            TopologyError::NoHosts => "hosts",
            _ => "link",
        };
        err(
            if doc.generator.is_some() {
                "generator"
            } else {
                key
            },
            e,
        )
    })?;
    Ok(topo)
}
