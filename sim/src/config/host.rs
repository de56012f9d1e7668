//! `[nic.host]`: the host side of a NIC (PCIe, the message path), as a
//! scenario file gives it. Every key is optional: `model` picks a NIC
//! generation's defaults ([`NicModel::defaults`]), the other keys replace
//! single values. [`HostConfig::resolve`] gives the concrete values the
//! simulator uses ([`HostParams`]); what they mean and the closed forms
//! built on them are in [`crate::hostmodel`].
//!
//! Units: sizes in bytes, times in picoseconds ([`Duration`]), message
//! rates in millions of messages per second (the key names say `mpps`).

use roce::time::{Duration, Size};
use serde::{Deserialize, Serialize};

use super::ConfigError;

/// A NIC generation whose host-side defaults the model knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NicModel {
    /// NVIDIA (Mellanox) ConnectX-4 Lx: 10/25/40/50G, PCIe Gen3 x8.
    #[serde(rename = "connectx-4-lx")]
    ConnectX4Lx,
    /// ConnectX-5: up to 100G, PCIe Gen3 x16 (Gen4 on the Ex parts).
    #[serde(rename = "connectx-5")]
    ConnectX5,
    /// ConnectX-6 Dx: up to 2x100G or 1x200G, PCIe Gen4 x16.
    #[serde(rename = "connectx-6-dx")]
    ConnectX6Dx,
    /// ConnectX-7: up to 400G, PCIe Gen5 x16.
    #[serde(rename = "connectx-7")]
    ConnectX7,
    /// BlueField-3 DPU: up to 400G, PCIe Gen5 x16.
    #[serde(rename = "bluefield-3")]
    BlueField3,
    /// Intel E810 (RoCEv2 through the irdma driver): up to 100G, PCIe
    /// Gen4 x16.
    #[serde(rename = "e810")]
    E810,
}

impl NicModel {
    /// Every model, in the order the docs list them.
    pub const ALL: [NicModel; 6] = [
        NicModel::ConnectX4Lx,
        NicModel::ConnectX5,
        NicModel::ConnectX6Dx,
        NicModel::ConnectX7,
        NicModel::BlueField3,
        NicModel::E810,
    ];

    /// The name scenario files use.
    pub fn name(self) -> &'static str {
        match self {
            NicModel::ConnectX4Lx => "connectx-4-lx",
            NicModel::ConnectX5 => "connectx-5",
            NicModel::ConnectX6Dx => "connectx-6-dx",
            NicModel::ConnectX7 => "connectx-7",
            NicModel::BlueField3 => "bluefield-3",
            NicModel::E810 => "e810",
        }
    }

    /// The model of a name scenario files use.
    pub fn from_name(s: &str) -> Option<NicModel> {
        NicModel::ALL.into_iter().find(|m| m.name() == s)
    }

    /// The generation's defaults. The product-brief values (PCIe
    /// interface, NIC message rate) and the sources of the others are in
    /// docs/HOST-MODEL.md; latencies and the per-QP rate are calibrated
    /// against public perftest runs listed there.
    pub fn defaults(self) -> HostParams {
        let ns = Duration::from_ns;
        let base = HostParams {
            model: Some(self),
            pcie_gen: 3,
            pcie_width: 16,
            max_payload: 256,
            max_read_request: 512,
            read_completion: 256,
            read_latency: ns(600),
            write_latency: ns(250),
            doorbell: ns(250),
            nic_latency: ns(250),
            nic_mpps: 200.0,
            qp_mpps: 4.0,
            blueflame: true,
        };
        match self {
            NicModel::ConnectX4Lx => HostParams {
                pcie_width: 8,
                nic_mpps: 75.0,
                qp_mpps: 3.0,
                nic_latency: ns(300),
                ..base
            },
            NicModel::ConnectX5 => base,
            NicModel::ConnectX6Dx => HostParams {
                pcie_gen: 4,
                nic_mpps: 215.0,
                qp_mpps: 4.0,
                nic_latency: ns(230),
                ..base
            },
            NicModel::ConnectX7 => HostParams {
                pcie_gen: 5,
                max_payload: 512,
                read_completion: 512,
                nic_mpps: 330.0,
                qp_mpps: 4.0,
                nic_latency: ns(220),
                ..base
            },
            NicModel::BlueField3 => HostParams {
                pcie_gen: 5,
                max_payload: 512,
                read_completion: 512,
                nic_mpps: 330.0,
                qp_mpps: 4.0,
                nic_latency: ns(240),
                ..base
            },
            NicModel::E810 => HostParams {
                pcie_gen: 4,
                nic_mpps: 100.0,
                qp_mpps: 3.0,
                doorbell: ns(300),
                nic_latency: ns(450),
                blueflame: false,
                ..base
            },
        }
    }
}

/// `[nic.host]` as written: every key optional.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HostConfig {
    /// NIC generation whose defaults apply (default `connectx-5`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<NicModel>,
    /// PCIe generation 1-5.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcie_gen: Option<u8>,
    /// PCIe lanes: 1, 2, 4, 8 or 16.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcie_width: Option<u8>,
    /// Max payload size (MPS) of a TLP: 128-4096, a power of two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_payload: Option<Size>,
    /// Max read request size (MRRS): 128-4096, a power of two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_read_request: Option<Size>,
    /// Payload of each completion the host returns for a DMA read:
    /// 64-4096, a power of two.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_completion: Option<Size>,
    /// DMA read round trip: request sent to first completion received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_latency: Option<Duration>,
    /// A posted write (data, a CQE) until the CPU can see it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub write_latency: Option<Duration>,
    /// The doorbell (an MMIO write) until it reaches the NIC.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub doorbell: Option<Duration>,
    /// The NIC's own pipeline, each way (send: WQE to wire; receive: wire
    /// to the DMA write).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_latency: Option<Duration>,
    /// Messages the NIC processes per second, millions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_mpps: Option<f64>,
    /// Messages one QP (and the thread posting to it) processes per
    /// second, millions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_mpps: Option<f64>,
    /// A WQE posted to an idle send queue travels with its doorbell (no
    /// WQE fetch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blueflame: Option<bool>,
}

/// The concrete host-side values of one NIC (what [`HostConfig`]
/// resolves to).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct HostParams {
    /// The generation the defaults came from.
    pub model: Option<NicModel>,
    /// PCIe generation 1-5.
    pub pcie_gen: u8,
    /// PCIe lanes.
    pub pcie_width: u8,
    /// MPS, bytes.
    pub max_payload: u32,
    /// MRRS, bytes.
    pub max_read_request: u32,
    /// Read completion payload, bytes.
    pub read_completion: u32,
    /// DMA read round trip.
    pub read_latency: Duration,
    /// Posted write until visible.
    pub write_latency: Duration,
    /// Doorbell to NIC.
    pub doorbell: Duration,
    /// NIC pipeline, each way.
    pub nic_latency: Duration,
    /// NIC message rate, millions per second.
    pub nic_mpps: f64,
    /// Per-QP message rate, millions per second.
    pub qp_mpps: f64,
    /// WQE with the doorbell on an idle send queue.
    pub blueflame: bool,
}

impl HostConfig {
    /// The concrete values: the model's defaults (ConnectX-5 when no
    /// model is named), then each key given.
    pub fn resolve(&self) -> HostParams {
        let mut p = self.model.unwrap_or(NicModel::ConnectX5).defaults();
        p.model = self.model;
        let b = |s: Option<Size>| s.map(|s| s.bytes() as u32);
        if let Some(v) = self.pcie_gen {
            p.pcie_gen = v;
        }
        if let Some(v) = self.pcie_width {
            p.pcie_width = v;
        }
        if let Some(v) = b(self.max_payload) {
            p.max_payload = v;
        }
        if let Some(v) = b(self.max_read_request) {
            p.max_read_request = v;
        }
        if let Some(v) = b(self.read_completion) {
            p.read_completion = v;
        }
        if let Some(v) = self.read_latency {
            p.read_latency = v;
        }
        if let Some(v) = self.write_latency {
            p.write_latency = v;
        }
        if let Some(v) = self.doorbell {
            p.doorbell = v;
        }
        if let Some(v) = self.nic_latency {
            p.nic_latency = v;
        }
        if let Some(v) = self.nic_mpps {
            p.nic_mpps = v;
        }
        if let Some(v) = self.qp_mpps {
            p.qp_mpps = v;
        }
        if let Some(v) = self.blueflame {
            p.blueflame = v;
        }
        p
    }

    /// The rules of `[nic.host]` (`prefix`: the table's key, e.g.
    /// `nic.host`).
    pub fn validate(&self, prefix: &str) -> Result<(), ConfigError> {
        let key = |k: &str| format!("{prefix}.{k}");
        if let Some(g) = self.pcie_gen {
            if !(1..=5).contains(&g) {
                return Err(ConfigError::new(
                    &key("pcie_gen"),
                    format!("{g}: expected a PCIe generation 1-5"),
                ));
            }
        }
        if let Some(w) = self.pcie_width {
            if !matches!(w, 1 | 2 | 4 | 8 | 16) {
                return Err(ConfigError::new(
                    &key("pcie_width"),
                    format!("{w}: expected 1, 2, 4, 8 or 16 lanes"),
                ));
            }
        }
        for (k, v, lo) in [
            ("max_payload", self.max_payload, 128),
            ("max_read_request", self.max_read_request, 128),
            ("read_completion", self.read_completion, 64),
        ] {
            if let Some(s) = v {
                let b = s.bytes();
                if !b.is_power_of_two() || !(lo..=4096).contains(&b) {
                    return Err(ConfigError::new(
                        &key(k),
                        format!("{b} B: expected a power of two from {lo} to 4096 bytes"),
                    ));
                }
            }
        }
        for (k, v) in [("nic_mpps", self.nic_mpps), ("qp_mpps", self.qp_mpps)] {
            if let Some(r) = v {
                if !(r.is_finite() && r > 0.0 && r <= 10_000.0) {
                    return Err(ConfigError::new(
                        &key(k),
                        format!("{r}: expected millions of messages per second, above 0"),
                    ));
                }
            }
        }
        Ok(())
    }
}
