//! GPU servers: what sits behind the fabric's hosts on a GPU cluster.
//!
//! A GPU server has `gpus` GPUs in one NVLink domain and `nics` NICs, one
//! per rail. The fabric's hosts are the NICs: server `s` owns host
//! indices `s * nics .. (s + 1) * nics`, NIC `r` of a server is on rail
//! `r`, and GPU `g` sits beside NIC `g * nics / gpus` on a PCIe switch
//! (with 8 GPUs and 8 NICs, GPU `i` is on rail `i`). A topology without
//! GPU servers has one rank per host and no NVLink.
//!
//! Units: rates per direction; NVLink's rate is a GPU's whole NVLink
//! bandwidth in one direction (H100: 18 links x 25 GB/s = 450 GB/s =
//! 3600 Gbit/s). With an NVSwitch every GPU reaches every other at that
//! rate, shared among its peers; without one (point to point) each pair
//! of GPUs has `rate / (gpus - 1)` of its own.

use roce::time::{Duration, Rate};

/// The GPU servers of a topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GpuServers {
    /// GPUs per server.
    pub gpus: u32,
    /// NICs per server (rails).
    pub nics: u32,
    /// Servers: the topology's hosts divided by `nics`.
    pub servers: u32,
    /// The NVLink domain of a server.
    pub nvlink: NvLink,
    /// GPUDirect RDMA: the NIC reads and writes GPU memory. Off: every
    /// byte sent crosses host memory, copied over the GPU's PCIe link at
    /// `pcie` before the send and after the receive.
    pub gpudirect: bool,
    /// A GPU's PCIe link to host memory (each direction).
    pub pcie: Rate,
    /// Latency of one PCIe copy.
    pub pcie_latency: Duration,
}

/// A server's NVLink domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NvLink {
    /// A GPU's NVLink bandwidth, one direction.
    pub rate: Rate,
    /// Latency of one transfer (first byte out to last byte in, less
    /// the serialisation).
    pub latency: Duration,
    /// An NVSwitch joins the GPUs (else point-to-point links).
    pub switched: bool,
}

impl NvLink {
    /// H100 SXM's: 450 GB/s per direction through NVSwitch, 1 us.
    pub const H100: NvLink = NvLink {
        rate: Rate::from_gbps(3600),
        latency: Duration::from_us(1),
        switched: true,
    };
}

/// GPU servers that do not fit the topology: the `[gpu]` key at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{param} = {value}: expected {expected}")]
pub struct GpuError {
    /// The key as written in files (`gpu.nics`).
    pub param: &'static str,
    /// The value given.
    pub value: u32,
    /// What it must be.
    pub expected: &'static str,
}

impl GpuServers {
    /// Servers of `gpus` GPUs and `nics` NICs over `hosts` fabric hosts,
    /// checked: every count positive, one of `gpus` and `nics` a
    /// multiple of the other, the hosts a whole number of servers.
    pub fn new(
        gpus: u32,
        nics: u32,
        hosts: u32,
        nvlink: NvLink,
        gpudirect: bool,
        pcie: Rate,
    ) -> Result<GpuServers, GpuError> {
        let bad = |param, value: u32, expected| GpuError {
            param,
            value,
            expected,
        };
        if gpus == 0 || gpus > 64 {
            return Err(bad("gpu.gpus", gpus, "1 to 64 GPUs per server"));
        }
        if nics == 0 || nics > 64 {
            return Err(bad("gpu.nics", nics, "1 to 64 NICs per server"));
        }
        if gpus % nics != 0 && nics % gpus != 0 {
            return Err(bad(
                "gpu.nics",
                nics,
                "a divisor or a multiple of gpu.gpus (GPUs share NICs evenly)",
            ));
        }
        if hosts % nics != 0 || hosts == 0 {
            return Err(bad(
                "gpu.nics",
                nics,
                "a divisor of the topology's hosts (each server owns gpu.nics hosts in order)",
            ));
        }
        if nvlink.rate.bps() == 0 {
            return Err(bad("gpu.nvlink_rate", 0, "a positive rate"));
        }
        if pcie.bps() == 0 {
            return Err(bad("gpu.pcie_rate", 0, "a positive rate"));
        }
        Ok(GpuServers {
            gpus,
            nics,
            servers: hosts / nics,
            nvlink,
            gpudirect,
            pcie,
            pcie_latency: Duration::from_us(1),
        })
    }

    /// The rail (NIC of its server) GPU `gpu` sits beside.
    pub fn rail_of(&self, gpu: u32) -> u32 {
        gpu * self.nics / self.gpus
    }

    /// Host index of NIC `rail` of server `server`.
    pub fn host_index(&self, server: u32, rail: u32) -> u32 {
        server * self.nics + rail
    }

    /// The server a host index belongs to.
    pub fn server_of_host(&self, host: u32) -> u32 {
        host / self.nics
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_sit_beside_their_rails_nic() {
        let s = GpuServers::new(8, 8, 32, NvLink::H100, true, Rate::from_gbps(512)).unwrap();
        assert_eq!(s.servers, 4);
        assert_eq!((s.rail_of(0), s.rail_of(7)), (0, 7));
        assert_eq!(s.host_index(2, 3), 19);
        assert_eq!(s.server_of_host(19), 2);
        let half = GpuServers::new(8, 4, 8, NvLink::H100, true, Rate::from_gbps(512)).unwrap();
        assert_eq!(
            (half.rail_of(1), half.rail_of(2), half.rail_of(7)),
            (0, 1, 3)
        );
        assert!(GpuServers::new(8, 3, 9, NvLink::H100, true, Rate::from_gbps(1)).is_err());
        assert!(GpuServers::new(8, 8, 12, NvLink::H100, true, Rate::from_gbps(1)).is_err());
    }
}
