//! The host side of a twin: the RDMA device the run used (named in
//! perftest's header), its link layer, link rate and MTU, the NIC
//! generation, and its PCIe link.
//!
//! The NIC generation comes from the PCI device id (`vendor_part_id` of
//! ibv_devinfo, `CA type: MT4125` of ibstat; decimal, as those tools print
//! it) or from lspci's device name. The ids are the PCI ID Repository's
//! (`pci.ids`, vendors 15b3 and 8086); products without a model of their
//! own take the nearest generation's, and the twin lists that assumption.

use sim::config::NicModel;

use crate::realnic::hca::{HcaInfo, PortInfo};
use crate::realnic::tools::PciLink;

use super::evidence::{gbps, Inference};
use super::types::TwinError;

/// Standard Ethernet rates, Gbit/s.
const STANDARD_GBPS: [u64; 9] = [1, 10, 25, 40, 50, 100, 200, 400, 800];

/// PCI device ids (decimal) and product names.
const PART_IDS: &[(u32, &str)] = &[
    (4115, "ConnectX-4"),
    (4116, "ConnectX-4 Virtual Function"),
    (4117, "ConnectX-4 Lx"),
    (4118, "ConnectX-4 Lx Virtual Function"),
    (4119, "ConnectX-5"),
    (4120, "ConnectX-5 Virtual Function"),
    (4121, "ConnectX-5 Ex"),
    (4122, "ConnectX-5 Ex Virtual Function"),
    (4123, "ConnectX-6"),
    (4124, "ConnectX-6 Virtual Function"),
    (4125, "ConnectX-6 Dx"),
    (4127, "ConnectX-6 Lx"),
    (4129, "ConnectX-7"),
    (4131, "ConnectX-8"),
    (41682, "BlueField integrated ConnectX-5"),
    (41686, "BlueField-2 integrated ConnectX-6 Dx"),
    (41689, "BlueField-3 Lx integrated ConnectX-7"),
    (41692, "BlueField-3 integrated ConnectX-7"),
    (5521, "Intel E810-C for backplane"),
    (5522, "Intel E810-C for QSFP"),
    (5523, "Intel E810-C for SFP"),
    (5529, "Intel E810-XXV for backplane"),
    (5530, "Intel E810-XXV for QSFP"),
    (5531, "Intel E810-XXV for SFP"),
];

/// Product names (as lspci and [`PART_IDS`] spell them, first match wins)
/// and the model whose defaults apply; `false`: the nearest model, not
/// the product's own.
const PRODUCTS: &[(&str, NicModel, bool)] = &[
    ("BlueField-3 Lx", NicModel::BlueField3, false),
    ("BlueField-3", NicModel::BlueField3, true),
    ("BlueField-2", NicModel::ConnectX6Dx, false),
    ("BlueField", NicModel::ConnectX5, false),
    ("ConnectX-8", NicModel::ConnectX7, false),
    ("ConnectX-7", NicModel::ConnectX7, true),
    ("ConnectX-6 Dx", NicModel::ConnectX6Dx, true),
    ("ConnectX-6 Lx", NicModel::ConnectX6Dx, false),
    ("ConnectX-6", NicModel::ConnectX6Dx, false),
    ("ConnectX-5", NicModel::ConnectX5, true),
    ("ConnectX-4 Lx", NicModel::ConnectX4Lx, true),
    ("ConnectX-4", NicModel::ConnectX5, false),
    ("E810", NicModel::E810, true),
];

/// The model of a product name: (model, its own, the name matched).
fn model_of(name: &str) -> Option<(NicModel, bool, &'static str)> {
    PRODUCTS
        .iter()
        .find(|(p, _, _)| name.contains(p))
        .map(|&(p, m, exact)| (m, exact, p))
}

fn is_ib(p: &PortInfo) -> bool {
    p.link_layer
        .as_deref()
        .is_some_and(|l| l.eq_ignore_ascii_case("InfiniBand"))
}

/// The devices of the device dumps named as perftest's device, else all.
pub(super) fn devices<'a>(inf: &Inference<'a>, device: Option<&str>) -> Vec<(usize, &'a HcaInfo)> {
    let named: Vec<_> = inf
        .ev
        .devices
        .iter()
        .copied()
        .filter(|(_, d)| Some(d.name.as_str()) == device)
        .collect();
    if named.is_empty() {
        inf.ev.devices.clone()
    } else {
        named
    }
}

/// Active ports (or ports whose state is not printed) of `devs`.
fn active_ports<'a>(devs: &[(usize, &'a HcaInfo)]) -> Vec<(usize, &'a HcaInfo, &'a PortInfo)> {
    devs.iter()
        .flat_map(|&(i, d)| d.ports.iter().map(move |p| (i, d, p)))
        .filter(|(_, _, p)| p.active || p.state.is_none())
        .collect()
}

/// Refuse a run whose device's active ports are all InfiniBand.
pub(super) fn check_link_layer(inf: &Inference<'_>, device: Option<&str>) -> Result<(), TwinError> {
    let ports = active_ports(&devices(inf, device));
    let ib: Vec<_> = ports.iter().filter(|(_, _, p)| is_ib(p)).collect();
    match ib.first() {
        Some((i, d, p)) if ib.len() == ports.len() => Err(TwinError::InfiniBand {
            file: inf.file(*i).to_string(),
            evidence: format!("{} port {}: link layer InfiniBand", d.name, p.port),
            understood: inf.so_far(),
        }),
        _ => Ok(()),
    }
}

/// The path MTU: perftest's (input, bytes), else the device's active MTU,
/// else 1024 B (assumed).
pub(super) fn mtu(
    inf: &mut Inference<'_>,
    device: Option<&str>,
    perftest: Option<(usize, u32)>,
) -> u32 {
    let devs = devices(inf, device);
    let port_mtu = active_ports(&devs)
        .into_iter()
        .filter(|(_, _, p)| !is_ib(p))
        .filter_map(|(i, d, p)| p.active_mtu.map(|m| (i, d, p, m)))
        .min_by_key(|x| x.3);
    match (perftest, port_mtu) {
        (Some((_, m)), Some((i, d, p, pm))) => {
            let note = if pm == m {
                format!(
                    "{} port {}: active MTU {pm} B, as perftest's",
                    d.name, p.port
                )
            } else {
                format!(
                    "{} port {}: active MTU {pm} B, not the run's {m} B (perftest's is the path's: used)",
                    d.name, p.port
                )
            };
            inf.took(i, note);
            m
        }
        (Some((_, m)), None) => m,
        (None, Some((i, d, p, pm))) => {
            inf.took(
                i,
                format!("MTU {pm} B ({} port {}'s active MTU)", d.name, p.port),
            );
            pm
        }
        (None, None) => {
            inf.assume(
                "mtu",
                "1024 B",
                "neither perftest's header nor ibv_devinfo gives it: RoCE's active MTU under Linux's default interface MTU of 1500",
            );
            1024
        }
    }
}

/// The link rate, Gbit/s: the slowest rate ethtool or the device dumps
/// give that is not below what the run measured (`measured`, bit/s, one
/// direction); else the smallest standard rate above the measurement
/// (assumed); else 100 (assumed).
pub(super) fn link_gbps(
    inf: &mut Inference<'_>,
    device: Option<&str>,
    measured: Option<u64>,
) -> u64 {
    let mut cands: Vec<(usize, u64, String)> = Vec::new();
    for &(i, l) in &inf.ev.links {
        if let Some(m) = l.speed_mbps {
            let name = l.interface.as_deref().unwrap_or("the interface");
            cands.push((
                i,
                m.saturating_mul(1_000_000),
                format!("{name}: Speed {m} Mb/s"),
            ));
        }
    }
    let devs = devices(inf, device);
    for (i, d, p) in active_ports(&devs) {
        if let (false, Some(r)) = (is_ib(p), p.rate_bps) {
            cands.push((
                i,
                r,
                format!("{} port {}: {} Gb/s", d.name, p.port, gbps(r)),
            ));
        }
    }
    let floor = measured.unwrap_or(0);
    let (fit, below): (Vec<_>, Vec<_>) = cands.into_iter().partition(|c| c.1 >= floor);
    for (i, _, what) in below {
        inf.took(
            i,
            format!(
                "{what}, below the {} Gb/s the run measured: not the tested link",
                gbps(floor)
            ),
        );
    }
    if let Some(best) = fit.iter().min_by_key(|c| c.1).cloned() {
        inf.took(best.0, format!("the link rate: {}", best.2));
        for (i, _, what) in fit.into_iter().filter(|c| c.1 != best.1) {
            inf.took(
                i,
                format!("{what}: not taken, the slower link is the path's bottleneck"),
            );
        }
        return (best.1 + 500_000_000) / 1_000_000_000;
    }
    match measured {
        Some(m) => {
            let g = STANDARD_GBPS
                .iter()
                .copied()
                .find(|&s| s.saturating_mul(1_000_000_000) >= m)
                .unwrap_or(800);
            inf.assume(
                "link_gbps",
                format!("{g} Gbit/s"),
                format!(
                    "no ethtool or ibv_devinfo gives the link rate: the smallest standard rate above the best the run measured ({} Gb/s)",
                    gbps(m)
                ),
            );
            g
        }
        None => {
            inf.assume(
                "link_gbps",
                "100 Gbit/s",
                "no input gives the link rate and the table cannot bound it: the simulator's default",
            );
            100
        }
    }
}

/// The NIC generation: from the device's PCI id, else lspci's device name,
/// else the device name's driver (assumed), else none (ConnectX-5's
/// defaults, assumed).
pub(super) fn nic_model(inf: &mut Inference<'_>, device: Option<&str>) -> Option<NicModel> {
    for (i, d) in devices(inf, device) {
        let Some(id) = d.part_id else { continue };
        match PART_IDS.iter().find(|p| p.0 == id) {
            Some(&(_, product)) => {
                inf.took(i, format!("{}: PCI device id {id}, {product}", d.name));
                return Some(known(inf, product));
            }
            None => inf.took(
                i,
                format!(
                    "{}: PCI device id {id}, no NIC generation the twin knows",
                    d.name
                ),
            ),
        }
    }
    for (i, p) in nic_pci(inf, device) {
        if model_of(&p.description).is_some() {
            inf.took(i, format!("{}: {}", p.address, p.description));
            return Some(known(inf, &p.description));
        }
    }
    match device.map(driver_of) {
        Some("irdma") => {
            inf.assume(
                "nic_model",
                NicModel::E810.name(),
                "only the device name says the NIC: irdma drives Intel's E800 series, of which the E810 has a model",
            );
            Some(NicModel::E810)
        }
        Some("mlx5") => {
            inf.assume(
                "nic_model",
                "connectx-5 (the simulator's default)",
                "only the device name says the NIC: mlx5 drives every ConnectX from the ConnectX-4 on (give ibv_devinfo or lspci for the generation)",
            );
            None
        }
        _ => {
            inf.assume(
                "nic_model",
                "connectx-5 (the simulator's default)",
                "no ibv_devinfo, ibstat or lspci names the NIC",
            );
            None
        }
    }
}

/// The driver part of an RDMA device name: `mlx5` of `mlx5_0`, `irdma`
/// of `irdma1`, `bnxt_re` of `bnxt_re0`.
fn driver_of(device: &str) -> &str {
    match device.rsplit_once('_') {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => device.trim_end_matches(|c: char| c.is_ascii_digit()),
    }
}

/// The model of a product known to [`model_of`]; an assumption when it is
/// the nearest model, not the product's own.
fn known(inf: &mut Inference<'_>, product: &str) -> NicModel {
    let Some((model, exact, matched)) = model_of(product) else {
        return NicModel::ConnectX5;
    };
    if !exact {
        inf.assume(
            "nic_model",
            model.name(),
            format!("the {matched} has no model of its own: the nearest generation's defaults"),
        );
    }
    model
}

/// lspci devices that can be the NIC: network and InfiniBand controllers
/// (and excerpts without a device line), at perftest's device's PCI
/// address when its name says it (`rocep175s0f0`).
fn nic_pci<'a>(inf: &Inference<'a>, device: Option<&str>) -> Vec<(usize, &'a PciLink)> {
    let nics: Vec<_> = inf
        .ev
        .pci
        .iter()
        .copied()
        .filter(|(_, p)| is_nic(&p.description))
        .collect();
    if let Some(addr) = device.and_then(pci_address_of) {
        let at: Vec<_> = nics
            .iter()
            .copied()
            .filter(|(_, p)| p.address.ends_with(&addr))
            .collect();
        if !at.is_empty() {
            return at;
        }
    }
    nics
}

fn is_nic(description: &str) -> bool {
    let d = description.to_ascii_lowercase();
    d.is_empty()
        || (!d.contains("bridge")
            && [
                "ethernet controller",
                "infiniband controller",
                "network controller",
                "mellanox",
                "connectx",
                "bluefield",
                "e810",
            ]
            .iter()
            .any(|k| d.contains(k)))
}

/// The PCI address (`af:00.0`) in a udev RDMA device name
/// (`rocep175s0f0`, `roceP2p1s0f0`).
fn pci_address_of(device: &str) -> Option<String> {
    let rest = device.strip_prefix("roce")?;
    let rest = match rest.strip_prefix('P') {
        Some(r) => r.split_once('p')?.1,
        None => rest.strip_prefix('p')?,
    };
    let num = |s: &str| -> Option<(u32, usize)> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        Some((d.parse().ok()?, d.len()))
    };
    let (bus, n) = num(rest)?;
    let rest = rest[n..].strip_prefix('s')?;
    let (slot, n) = num(rest)?;
    let function = rest[n..]
        .strip_prefix('f')
        .and_then(|r| num(r).map(|x| x.0))
        .unwrap_or(0);
    Some(format!("{bus:02x}:{slot:02x}.{function}"))
}

/// The PCIe side of the NIC.
pub(super) struct Pci {
    /// (generation, lanes) as trained.
    pub link: Option<(u8, u8)>,
    /// MPS, bytes.
    pub max_payload: Option<u32>,
    /// MRRS, bytes.
    pub max_read_request: Option<u32>,
}

/// PCIe generation of a transfer rate (MT/s).
fn generation(mts: u64) -> Option<u8> {
    match mts {
        2500 => Some(1),
        5000 => Some(2),
        8000 => Some(3),
        16000 => Some(4),
        32000 => Some(5),
        _ => None,
    }
}

/// The NIC's PCIe link from lspci -vv (LnkSta, else LnkCap: assumed
/// trained at its capability; the slowest when several NICs are given),
/// MPS and MRRS from DevCtl; what is missing is the model's default
/// (assumed).
pub(super) fn pcie(inf: &mut Inference<'_>, device: Option<&str>, model: Option<NicModel>) -> Pci {
    let model = model.unwrap_or(NicModel::ConnectX5);
    let defaults = model.defaults();
    let nics = nic_pci(inf, device);
    let trained = nics
        .iter()
        .filter_map(
            |&(i, p)| match (p.sta_speed_mts, p.sta_width, p.cap_speed_mts, p.cap_width) {
                (Some(s), Some(w), _, _) => Some((i, p, s, w, true)),
                (_, _, Some(s), Some(w)) => Some((i, p, s, w, false)),
                _ => None,
            },
        )
        .min_by_key(|x| PciLink::mbps(x.2, x.3));
    let mut link = None;
    if let Some((i, p, s, w, sta)) = trained {
        let lanes = u8::try_from(w)
            .ok()
            .filter(|w| matches!(w, 1 | 2 | 4 | 8 | 16));
        match (generation(s), lanes) {
            (Some(g), Some(l)) => {
                let from = if sta { "LnkSta" } else { "LnkCap" };
                let what = format!("PCIe Gen{g} x{l} ({from} of {})", pci_name(p));
                inf.took(i, what);
                if !sta {
                    inf.assume(
                        "pcie",
                        format!("Gen{g} x{l}"),
                        "lspci gives the NIC's LnkCap but no LnkSta: taken as trained at its capability",
                    );
                }
                link = Some((g, l));
            }
            _ => inf.took(
                i,
                format!(
                    "{}: a PCIe link of {} MT/s x{w}, which the host model has no generation for",
                    pci_name(p),
                    s
                ),
            ),
        }
    }
    if link.is_none() {
        inf.assume(
            "pcie",
            format!(
                "Gen{} x{} ({}'s default)",
                defaults.pcie_gen,
                defaults.pcie_width,
                model.name()
            ),
            "no lspci -vv of the NIC given",
        );
    }
    let from_devctl = |f: fn(&PciLink) -> Option<u32>| {
        trained
            .map(|t| (t.0, t.1))
            .into_iter()
            .chain(nics.iter().copied())
            .find_map(|(i, p)| f(p).map(|v| (i, v)))
    };
    let max_payload = from_devctl(|p| p.max_payload);
    let max_read_request = from_devctl(|p| p.max_read_request);
    match (max_payload, max_read_request) {
        (Some((i, mps)), Some((_, mrrs))) => {
            inf.took(
                i,
                format!("MaxPayload {mps} B, MaxReadReq {mrrs} B (DevCtl)"),
            );
        }
        (Some((i, mps)), None) => inf.took(i, format!("MaxPayload {mps} B (DevCtl)")),
        (None, Some((i, mrrs))) => inf.took(i, format!("MaxReadReq {mrrs} B (DevCtl)")),
        (None, None) => {}
    }
    if max_payload.is_none() {
        inf.assume(
            "max_payload",
            format!("{} B ({}'s default)", defaults.max_payload, model.name()),
            "no lspci -vv DevCtl line given",
        );
    }
    if max_read_request.is_none() {
        inf.assume(
            "max_read_request",
            format!(
                "{} B ({}'s default)",
                defaults.max_read_request,
                model.name()
            ),
            "no lspci -vv DevCtl line given",
        );
    }
    Pci {
        link,
        max_payload: max_payload.map(|x| x.1),
        max_read_request: max_read_request.map(|x| x.1),
    }
}

fn pci_name(p: &PciLink) -> String {
    match (p.address.is_empty(), p.description.is_empty()) {
        (false, false) => format!("{} {}", p.address, p.description),
        (false, true) => p.address.clone(),
        _ => "the NIC".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udev_device_names_give_the_pci_address() {
        assert_eq!(pci_address_of("rocep175s0f0").as_deref(), Some("af:00.0"));
        assert_eq!(pci_address_of("rocep3s0").as_deref(), Some("03:00.0"));
        assert_eq!(pci_address_of("roceP2p1s0f1").as_deref(), Some("01:00.1"));
        assert_eq!(pci_address_of("mlx5_0"), None);
        assert_eq!(pci_address_of("rocep"), None);
    }

    #[test]
    fn device_names_give_their_driver() {
        assert_eq!(driver_of("mlx5_0"), "mlx5");
        assert_eq!(driver_of("mlx5_12"), "mlx5");
        assert_eq!(driver_of("irdma1"), "irdma");
        assert_eq!(driver_of("bnxt_re0"), "bnxt_re");
        assert_eq!(driver_of("rocep3s0"), "rocep3s");
    }

    #[test]
    fn product_names_pick_the_most_specific_model() {
        let m = |n: &str| model_of(n).map(|x| (x.0, x.1));
        assert_eq!(
            m("MT2892 Family [ConnectX-6 Dx]"),
            Some((NicModel::ConnectX6Dx, true))
        );
        assert_eq!(
            m("MT2894 Family [ConnectX-6 Lx]"),
            Some((NicModel::ConnectX6Dx, false))
        );
        assert_eq!(
            m("MT43244 BlueField-3 integrated ConnectX-7 network controller"),
            Some((NicModel::BlueField3, true))
        );
        assert_eq!(
            m("MT27710 Family [ConnectX-4 Lx]"),
            Some((NicModel::ConnectX4Lx, true))
        );
        assert_eq!(
            m("Ethernet Controller E810-C for QSFP"),
            Some((NicModel::E810, true))
        );
        assert_eq!(m("Broadcom BCM57508 NetXtreme-E"), None);
        for (id, name) in PART_IDS {
            assert!(model_of(name).is_some(), "{id} {name}");
        }
    }

    #[test]
    fn nic_like_pci_devices() {
        assert!(is_nic(
            "Ethernet controller: Mellanox Technologies MT2910 Family [ConnectX-7]"
        ));
        assert!(is_nic("Infiniband controller: Mellanox Technologies MT27800 Family [ConnectX-5 Virtual Function]"));
        assert!(is_nic(""));
        assert!(!is_nic(
            "PCI bridge: Mellanox Technologies MT2910 Family [ConnectX-7 PCIe Bridge]"
        ));
        assert!(!is_nic(
            "VGA compatible controller: NVIDIA Corporation GA102"
        ));
    }
}
