//! What the checks of one scope look at: its counter views and every
//! inventory, log and results file given for it, gathered by
//! [`super::diagnose`].

use super::counters::CounterView;
use super::sim::SimVariant;
use crate::realnic::hca::HcaInfo;
use crate::realnic::nccl::NcclLog;
use crate::realnic::perftest::PerftestReport;
use crate::realnic::qos::{GidEntry, QosConfig};
use crate::realnic::swconfig::{EcnConfig, MmuConfig};
use crate::realnic::tools::{EthLink, Event, NcclTests, PciLink, SwitchReport};
use crate::realnic::topo::TopoMatrix;

/// Everything the checks look at.
#[derive(Debug, Clone, Default)]
pub(super) struct Context {
    pub eth: Vec<CounterView>,
    pub rdma: Vec<CounterView>,
    pub perftest: Vec<(String, PerftestReport)>,
    pub topo: Vec<(String, TopoMatrix)>,
    pub devinfo: Vec<(String, Vec<HcaInfo>)>,
    pub qos: Vec<(String, QosConfig)>,
    pub gids: Vec<(String, Vec<GidEntry>)>,
    pub nccl: Vec<(String, NcclLog)>,
    pub sim: Vec<SimVariant>,
    pub nccl_tests: Vec<(String, NcclTests)>,
    pub switch: Vec<(String, SwitchReport)>,
    pub lspci: Vec<(String, Vec<PciLink>)>,
    pub links: Vec<(String, Vec<EthLink>)>,
    pub events: Vec<(String, Vec<Event>)>,
    /// Switch buffer listings (`mmuconfig -l`), by file.
    pub mmu: Vec<(String, MmuConfig)>,
    /// Switch ECN listings (`ecnconfig -l` / `-q`), by file.
    pub ecncfg: Vec<(String, EcnConfig)>,
}
