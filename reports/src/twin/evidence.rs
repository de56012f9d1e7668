//! The inputs of a twin, sorted by what they can tell ([`Evidence`]), and
//! the record of an inference under way ([`Inference`]): what each input
//! was read as and what was taken from it, and what had to be assumed.

use crate::realnic::ethtool::EthtoolSnapshot;
use crate::realnic::hca::HcaInfo;
use crate::realnic::perftest::{PerftestReport, PerftestRun, Side, TestKind};
use crate::realnic::qos::{GidEntry, QosConfig};
use crate::realnic::rdma::RdmaSnapshot;
use crate::realnic::tools::{EthLink, PciLink};
use crate::realnic::{self, paste, Parsed};

use super::types::{Assumption, TwinError};

/// Read one file for a twin: any format [`realnic::parse`] detects, and
/// plain `lspci` (device names without `-vv`'s link lines). A text in no
/// known format is [`TwinError::Foreign`].
pub fn read(file: &str, text: &str) -> Result<Parsed, TwinError> {
    match realnic::parse(None, text) {
        Ok(parsed) => Ok(parsed),
        Err(realnic::Error::Undetected) => {
            plain_lspci(text)
                .map(Parsed::Lspci)
                .ok_or_else(|| TwinError::Foreign {
                    file: file.to_string(),
                    reason: "its format could not be told".to_string(),
                })
        }
        Err(e) => Err(TwinError::Foreign {
            file: file.to_string(),
            reason: e.to_string(),
        }),
    }
}

/// Plain `lspci` lines (`3b:00.0 Ethernet controller: Mellanox ...`) as
/// PCI devices without link state; `None` when there is none.
fn plain_lspci(text: &str) -> Option<Vec<PciLink>> {
    let plain = paste::normalise(text);
    let devices: Vec<PciLink> = plain
        .lines()
        .enumerate()
        .filter_map(|(i, l)| {
            let (address, description) = l.trim().split_once(' ')?;
            let (class, _) = description.split_once(": ")?;
            let is_class = class
                .chars()
                .all(|c| c.is_ascii_alphabetic() || matches!(c, ' ' | '-'));
            (is_pci_address(address) && is_class).then(|| PciLink {
                line: i + 1,
                address: address.to_string(),
                description: description.trim().to_string(),
                ..PciLink::default()
            })
        })
        .collect();
    (!devices.is_empty()).then_some(devices)
}

/// `bb:dd.f` or `dddd:bb:dd.f` (hex).
fn is_pci_address(a: &str) -> bool {
    let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| b.is_ascii_hexdigit());
    let parts: Vec<&str> = a.split(':').collect();
    let (bus, rest) = match parts[..] {
        [bus, rest] => (bus, rest),
        [domain, bus, rest] if hex(domain, 4) => (bus, rest),
        _ => return false,
    };
    let Some((device, function)) = rest.split_once('.') else {
        return false;
    };
    hex(bus, 2) && hex(device, 2) && hex(function, 1)
}

/// The inputs by kind; each item carries the index of its input.
#[derive(Debug, Default)]
pub(super) struct Evidence<'a> {
    /// perftest outputs.
    pub perftest: Vec<(usize, &'a PerftestReport)>,
    /// Devices of ibv_devinfo, ibstat, ibstatus ...
    pub devices: Vec<(usize, &'a HcaInfo)>,
    /// PCI devices (lspci).
    pub pci: Vec<(usize, &'a PciLink)>,
    /// Link settings (ethtool IFACE, ethtool -a).
    pub links: Vec<(usize, &'a EthLink)>,
    /// ethtool -S dumps.
    pub ethtool: Vec<(usize, &'a EthtoolSnapshot)>,
    /// rdma statistic dumps.
    pub rdma: Vec<(usize, &'a RdmaSnapshot)>,
    /// mlnx_qos.
    pub qos: Vec<(usize, &'a QosConfig)>,
    /// show_gids rows.
    pub gids: Vec<(usize, &'a GidEntry)>,
}

/// An inference under way: the inputs, what was read from each, what was
/// assumed.
#[derive(Debug)]
pub(super) struct Inference<'a> {
    /// The inputs by kind.
    pub ev: Evidence<'a>,
    files: Vec<&'a str>,
    read_as: Vec<String>,
    took: Vec<Vec<String>>,
    /// What was assumed so far.
    pub assumptions: Vec<Assumption>,
}

impl<'a> Inference<'a> {
    /// Sort the inputs; [`TwinError::Unused`] for a format the twin has no
    /// use for.
    pub fn new(inputs: &'a [(String, Parsed)]) -> Result<Inference<'a>, TwinError> {
        let mut ev = Evidence::default();
        let mut read_as = Vec::with_capacity(inputs.len());
        for (i, (file, parsed)) in inputs.iter().enumerate() {
            read_as.push(describe(parsed));
            match parsed {
                Parsed::Perftest(r) => ev.perftest.push((i, r)),
                Parsed::Devinfo(d) => ev.devices.extend(d.iter().map(|x| (i, x))),
                Parsed::Lspci(p) => ev.pci.extend(p.iter().map(|x| (i, x))),
                Parsed::EthtoolLink(l) => ev.links.extend(l.iter().map(|x| (i, x))),
                Parsed::Ethtool(s) => ev.ethtool.extend(s.iter().map(|x| (i, x))),
                Parsed::Rdma(s) => ev.rdma.extend(s.iter().map(|x| (i, x))),
                Parsed::MlnxQos(q) => ev.qos.push((i, q)),
                Parsed::ShowGids(g) => ev.gids.extend(g.iter().map(|x| (i, x))),
                other => {
                    return Err(TwinError::Unused {
                        file: file.clone(),
                        kind: other.kind(),
                    })
                }
            }
        }
        Ok(Inference {
            ev,
            files: inputs.iter().map(|(f, _)| f.as_str()).collect(),
            took: vec![Vec::new(); inputs.len()],
            read_as,
            assumptions: Vec::new(),
        })
    }

    /// The name of input `i`.
    pub fn file(&self, i: usize) -> &'a str {
        self.files[i]
    }

    /// Record that `what` was taken from input `i`.
    pub fn took(&mut self, i: usize, what: impl Into<String>) {
        self.took[i].push(what.into());
    }

    /// Record an assumption about `what`.
    pub fn assume(&mut self, what: &'static str, value: impl Into<String>, why: impl Into<String>) {
        self.assumptions.push(Assumption {
            what,
            value: value.into(),
            why: why.into(),
        });
    }

    /// One line per input: what it was read as, what was taken from it.
    pub fn understood(&self) -> Vec<String> {
        self.lines(Some("nothing the twin uses"))
    }

    /// What was understood when the inference stopped: what each input
    /// was read as and what was taken so far.
    pub fn so_far(&self) -> Vec<String> {
        self.lines(None)
    }

    fn lines(&self, unused: Option<&str>) -> Vec<String> {
        (0..self.files.len())
            .map(|i| {
                let mut line = format!("{}: {}", self.files[i], self.read_as[i]);
                let took = self.took[i].join("; ");
                match (took.is_empty(), unused) {
                    (false, _) => line.push_str(&format!("; {took}")),
                    (true, Some(u)) => line.push_str(&format!("; {u}")),
                    (true, None) => {}
                }
                line
            })
            .collect()
    }
}

/// What a parsed input is, in a few words.
fn describe(parsed: &Parsed) -> String {
    match parsed {
        Parsed::Perftest(r) => {
            let runs: Vec<String> = r
                .runs
                .iter()
                .map(|run| {
                    let rows = run.bw.len() + run.lat.len() + run.lat_duration.len();
                    let cut = if run.truncated { ", cut" } else { "" };
                    format!(
                        "{} ({}, line {}, {rows} row(s){cut})",
                        title(run),
                        end(run.side),
                        run.line
                    )
                })
                .collect();
            match (runs.is_empty(), r.errors.len()) {
                (true, n) => format!("perftest output without a run, {n} completion error(s)"),
                (false, 0) => format!("perftest output: {}", runs.join(", ")),
                (false, n) => format!(
                    "perftest output: {}; {n} completion error(s)",
                    runs.join(", ")
                ),
            }
        }
        Parsed::Devinfo(d) => {
            let mut names: Vec<&str> = d.iter().map(|x| x.name.as_str()).collect();
            names.dedup();
            let tool = d.first().map_or("device state", |x| x.tool.as_str());
            format!("{tool} ({})", names.join(", "))
        }
        Parsed::Lspci(p) => format!("lspci, {} device(s)", p.len()),
        Parsed::EthtoolLink(l) => {
            let names: Vec<&str> = l.iter().filter_map(|x| x.interface.as_deref()).collect();
            format!("ethtool ({})", names.join(", "))
        }
        Parsed::Ethtool(s) => format!("ethtool -S, {} dump(s)", s.len()),
        Parsed::Rdma(s) => format!("rdma statistic, {} dump(s)", s.len()),
        Parsed::MlnxQos(_) => "mlnx_qos".to_string(),
        Parsed::ShowGids(g) => format!("show_gids, {} GID(s)", g.len()),
        other => format!("{} output", other.kind()),
    }
}

/// A run's title, or what its table is when the title is missing.
pub(super) fn title(run: &PerftestRun) -> String {
    match (&run.title, run.kind) {
        (Some(t), _) => t.clone(),
        (None, TestKind::Bandwidth) => "a bandwidth table without its title".to_string(),
        (None, TestKind::Latency) => "a latency table without its title".to_string(),
        (None, TestKind::Unknown) => "a perftest header without its title".to_string(),
    }
}

/// Which end printed a run.
pub(super) fn end(side: Side) -> &'static str {
    match side {
        Side::Client => "client",
        Side::Server => "server",
        Side::Unknown => "end not said",
    }
}

/// A size for messages: `65536 B`, `8 MiB`.
pub(super) fn bytes(b: u64) -> String {
    if b >= 1 << 20 && b % (1 << 20) == 0 {
        format!("{} MiB", b >> 20)
    } else if b >= 1 << 10 && b % (1 << 10) == 0 {
        format!("{} KiB", b >> 10)
    } else {
        format!("{b} B")
    }
}

/// A rate in bit/s as Gb/s, up to two decimals: `25`, `97.66`.
pub(super) fn gbps(bps: u64) -> String {
    let hundredths = (bps + 5_000_000) / 10_000_000;
    let s = format!("{}.{:02}", hundredths / 100, hundredths % 100);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pci_addresses_are_told_from_times() {
        assert!(is_pci_address("3b:00.0"));
        assert!(is_pci_address("0000:af:00.1"));
        assert!(is_pci_address("98da:00:02.0"));
        assert!(!is_pci_address("10:00:00.123"));
        assert!(!is_pci_address("12:30"));
        assert!(!is_pci_address("0000:3b:00"));
    }

    #[test]
    fn plain_lspci_lines_are_devices_and_prose_is_not() {
        let l = plain_lspci("$ lspci\n3b:00.0 Ethernet controller: Mellanox Technologies MT2892 Family [ConnectX-6 Dx]\n").unwrap();
        assert_eq!(l.len(), 1);
        assert_eq!(l[0].address, "3b:00.0");
        assert!(l[0].description.ends_with("[ConnectX-6 Dx]"));
        assert!(plain_lspci("10:00:00.123 kernel: link up\nhello: world\n").is_none());
    }

    #[test]
    fn rates_print_as_gbps() {
        assert_eq!(gbps(25_000_000_000), "25");
        assert_eq!(gbps(97_660_000_000), "97.66");
        assert_eq!(gbps(96_450_000_000), "96.45");
        assert_eq!(gbps(480_000_000), "0.48");
    }
}
