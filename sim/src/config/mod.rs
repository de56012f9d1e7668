//! Model configuration: plain data that scenario files embed.
//!
//! Every struct here is `serde` with `deny_unknown_fields` and a `Default`
//! holding realistic values, so a scenario only writes what it changes.
//! Durations, rates and sizes are strings in files (`"1us"`, `"100Gbps"`,
//! `"4KiB"`, `"320KB"`: KB is 1000 B, KiB is 1024 B). Field names are
//! user-facing: they appear in scenario files and error messages.
//!
//! Units, once for all: sizes are bytes of Ethernet frames as they sit in a
//! buffer (IP packet plus 18 B of Ethernet header and FCS; preamble and
//! inter-frame gap are counted in serialization only), rates are bits per
//! second, probabilities are in `[0, 1]`, priorities are 802.1p values 0-7.
//!
//! [`SimConfig::validate`] checks the cross-field rules (priorities in
//! range, `xon <= xoff`, `kmin <= kmax`, ...) and names the key at fault
//! ([`ConfigError`]). [`ElementOverride`]s are the per-element settings
//! the scenario loader resolves from `[[override]]` entries.

mod error;
mod host;

use roce::time::{Duration, Rate, Size};
use serde::{Deserialize, Serialize};

use crate::faults::Window;
pub use crate::faults::{FaultConfig, FaultType};
pub use error::ConfigError;
pub use host::{HostConfig, HostParams, NicModel};
/// DCQCN parameters over a preset (`[nic.cc.dcqcn]`): the emulation's
/// table, shared so that both read the same keys.
pub use roce::cc::{DcqcnOverrides, SwiftSettings, TimelySettings};

/// Everything a run needs besides the topology and the flows.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Switches and links.
    pub fabric: FabricConfig,
    /// Host NICs (all hosts share one NIC configuration).
    pub nic: NicConfig,
    /// What to record besides the summary.
    pub record: RecordConfig,
    /// Faults injected on links, ports, NICs and switches.
    pub faults: Vec<FaultConfig>,
    /// Settings of single switches, ports and hosts over the ones above
    /// (resolved by the scenario loader; not a key of its own in files,
    /// which write `[[override]]`).
    #[serde(skip)]
    pub overrides: Vec<ElementOverride>,
    /// Congestion control of single workloads, by workload index (a
    /// flow's `FlowSpec::workload`): `Some` replaces the hosts' `nic.cc`
    /// for that workload's flows, at both ends of their queue pairs. Set
    /// by the scenario loader from each `[[workload]]` table's `cc`; not
    /// a key of its own in files.
    #[serde(skip)]
    pub workload_cc: Vec<Option<CcConfig>>,
}

/// The full settings of one element while an override is in force (what
/// [`crate::overrides::resolve`] makes of `[[override]]` entries).
#[derive(Debug, Clone, PartialEq)]
pub struct ElementOverride {
    /// Node name (a switch for fabric settings, a host for NIC settings).
    pub node: String,
    /// A port of that switch, or `None` for the whole node.
    pub port: Option<u16>,
    /// When it is in force ([`Window::always`]: the whole run).
    pub window: Window,
    /// The element's settings in that window.
    pub setting: OverrideSetting,
}

/// Settings of one element.
#[derive(Debug, Clone, PartialEq)]
pub enum OverrideSetting {
    /// A switch's (or switch port's) fabric settings.
    Fabric(Box<FabricConfig>),
    /// A host's NIC settings.
    Nic(Box<NicConfig>),
}

/// Switch buffer, PFC, ECN and scheduling settings, shared by every switch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FabricConfig {
    /// Priority-based flow control (802.1Qbb).
    pub pfc: PfcConfig,
    /// The shared packet buffer of each switch.
    pub buffer: BufferConfig,
    /// ECN marking (RED on egress queue bytes), one entry per priority
    /// that marks. Empty: no marking.
    pub ecn: Vec<EcnConfig>,
    /// Egress scheduling among the 8 priority queues of a port.
    pub scheduler: SchedulerConfig,
    /// How a switch classifies arriving frames into priorities.
    pub qos: QosConfig,
    /// How a switch spreads frames over equal-cost next hops.
    pub load_balancing: LoadBalancingConfig,
    /// Packet trimming (`[fabric.trim]`; `None`: a full queue drops).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trim: Option<TrimConfig>,
    /// The link layer every link runs: Ethernet (PFC, the shared buffer
    /// and its drops) or InfiniBand (credit-based flow control per
    /// virtual lane: nothing is ever sent that the receiver has no buffer
    /// for).
    #[serde(skip_serializing_if = "LinkLayer::is_ethernet")]
    pub link_layer: LinkLayer,
    /// InfiniBand's link-level flow control (`[fabric.infiniband]`; used
    /// with `link_layer = "infiniband"`).
    #[serde(skip_serializing_if = "InfinibandConfig::is_default")]
    pub infiniband: InfinibandConfig,
}

/// A fabric's link layer (`fabric.link_layer`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkLayer {
    /// Ethernet: PFC and ECN on a shared switch buffer.
    #[default]
    Ethernet,
    /// InfiniBand: credits per link and virtual lane.
    Infiniband,
}

impl LinkLayer {
    /// The default, left out when a configuration is written back.
    pub fn is_ethernet(&self) -> bool {
        *self == LinkLayer::Ethernet
    }
}

/// InfiniBand's link-level flow control (IBA vol. 1, 7.9): each receiving
/// port advertises, per data virtual lane, the 64-byte blocks of buffer it
/// has free; a transmitter sends a packet only when its blocks fit. The
/// receiver returns freed blocks in flow-control packets (FCPs) carrying a
/// 12-bit credit limit; a transmitter compares it with its 12-bit count of
/// blocks sent, modulo 4096, so at most 2,048 blocks (128 KiB) can be
/// outstanding per lane. A flow's priority is its service level (SL); a
/// QP sends on the data virtual lane `sl_to_vl` maps it to, and its frames
/// keep that lane on every hop (one map for the whole fabric; a switch
/// does not reclassify). VL15, management's, carries no data.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InfinibandConfig {
    /// Receive buffer of every port per virtual lane (64 KiB): the credit
    /// limit it advertises. It must hold a full frame and at most 2,048
    /// blocks (128 KiB). At full rate a lane needs it to cover the credit
    /// round trip: two propagation delays, a frame and an FCP period.
    pub vl_buffer: Size,
    /// The longest a port waits to send an FCP after blocks free (1 us):
    /// freed blocks are returned together, at most one FCP per period.
    pub fc_period: Duration,
    /// The data virtual lane (0-7) of each service level 0-7 (default:
    /// the identity).
    pub sl_to_vl: [u8; 8],
    /// VL arbitration at every port (`None`: `fabric.scheduler` picks
    /// among the lanes, as among Ethernet's priorities).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arbitration: Option<VlArbitration>,
}

/// InfiniBand's VL arbitration (IBA vol. 1, 7.6.9): a high- and a
/// low-priority table of (lane, weight) entries, each served weighted
/// round robin (an entry sends while it has weight left, a weight unit
/// being 64 bytes; a frame may overdraw it), the high table first, but
/// once it has sent `high_limit` x 4,096 bytes while a low-priority frame
/// waits, one low-priority frame goes (`high_limit` 0: one high frame at
/// a time; 255: no limit). A lane in neither table, or only with weight
/// 0, never sends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VlArbitration {
    /// High-priority entries, in table order.
    #[serde(default)]
    pub high: Vec<VlWeight>,
    /// Low-priority entries, in table order.
    #[serde(default)]
    pub low: Vec<VlWeight>,
    /// LimitOfHighPriority, in 4,096-byte units (255: unlimited).
    #[serde(default = "VlArbitration::unlimited")]
    pub high_limit: u8,
}

impl VlArbitration {
    fn unlimited() -> u8 {
        255
    }

    /// Whether some entry with a weight above 0 serves lane `vl`.
    pub fn serves(&self, vl: u8) -> bool {
        self.high
            .iter()
            .chain(&self.low)
            .any(|e| e.vl == vl && e.weight > 0)
    }
}

/// One entry of a VL arbitration table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VlWeight {
    /// The data lane, 0-7.
    pub vl: u8,
    /// Its weight, 0-255, in units of 64 bytes.
    pub weight: u8,
}

impl Default for InfinibandConfig {
    fn default() -> Self {
        InfinibandConfig {
            vl_buffer: Size::from_bytes(64 * 1024),
            fc_period: Duration::from_us(1),
            sl_to_vl: [0, 1, 2, 3, 4, 5, 6, 7],
            arbitration: None,
        }
    }
}

impl InfinibandConfig {
    /// All defaults (left out when a configuration is written back).
    pub fn is_default(&self) -> bool {
        *self == InfinibandConfig::default()
    }

    /// The blocks of 64 bytes `vl_buffer` holds: each port's credit limit
    /// per lane.
    pub fn blocks_per_lane(&self) -> u64 {
        self.vl_buffer.bytes().div_ceil(IB_BLOCK)
    }

    /// The virtual lane of service level `sl`.
    pub fn vl_of(&self, sl: u8) -> u8 {
        self.sl_to_vl[usize::from(sl & 7)]
    }
}

/// Bytes of one InfiniBand credit block.
pub const IB_BLOCK: u64 = 64;
/// The most blocks a lane can have outstanding: half the 12-bit space.
pub const IB_MAX_CREDITS: u64 = 2048;

/// Packet trimming (Ultra Ethernet): a data frame a full queue would drop
/// is cut to its headers, which go on, on `priority`, so that the
/// receiver learns of the loss at once and NAKs it (under selective
/// repeat; a receiver without it drops the headers).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrimConfig {
    /// The priority trimmed headers are queued and sent on (default 7,
    /// the highest under strict priority).
    pub priority: u8,
}

impl Default for TrimConfig {
    fn default() -> Self {
        TrimConfig { priority: 7 }
    }
}

impl Default for FabricConfig {
    fn default() -> Self {
        FabricConfig {
            pfc: PfcConfig::default(),
            buffer: BufferConfig::default(),
            ecn: vec![EcnConfig::default()],
            scheduler: SchedulerConfig::default(),
            qos: QosConfig::default(),
            load_balancing: LoadBalancingConfig::default(),
            trim: None,
            link_layer: LinkLayer::Ethernet,
            infiniband: InfinibandConfig::default(),
        }
    }
}

/// How a switch picks among the equal-cost next hops towards a
/// destination, per frame. Only ECMP keeps every frame of a queue pair
/// on one path; the others reorder frames, which a receiver without
/// out-of-order placement sees as sequence errors (go-back-N resends).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "mode")]
pub enum LoadBalancingConfig {
    /// Per-flow ECMP: a hash of the 5-tuple, salted per switch (the UDP
    /// source port carries each queue pair's entropy).
    #[default]
    Ecmp,
    /// Per-packet spraying: each frame to a next hop drawn at random
    /// (the switch's own random stream).
    Spray,
    /// Per-packet spraying in turn: each destination's frames go round
    /// robin over its next hops.
    SprayRoundRobin,
    /// Flowlets: a flow (5-tuple) keeps its next hop while its frames
    /// come less than `gap` apart; after a longer gap its next frame
    /// draws a next hop at random (LetFlow).
    Flowlet {
        /// The idle time that ends a flowlet.
        gap: Duration,
    },
    /// Adaptive routing: each frame to the next hop whose egress holds
    /// the fewest bytes queued, over all priorities; ties go to the
    /// first in the flow's ECMP order, so an idle fabric routes as
    /// ECMP does.
    Adaptive,
}

/// Ingress classification of a switch (or one of its ports): the priority
/// (queue, PFC class) a frame marked with priority `p` by its sender is
/// put in is `priority_map[p]`, and it leaves with that priority.
///
/// The default is the identity: the switch and the NICs agree. A switch
/// that trusts PCP while the NICs mark only DSCP (untagged frames) puts
/// everything in its default class: `[0, 0, 0, 0, 0, 0, 0, 0]`; a DSCP
/// map that sends RoCE's DSCP 26 to class 1 instead of 3 is
/// `[0, 1, 2, 1, 4, 5, 6, 7]`. Either way RoCE lands on a priority PFC
/// does not protect.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct QosConfig {
    /// Priority a frame marked `p` is classified into, for `p` 0-7.
    pub priority_map: [u8; 8],
}

impl Default for QosConfig {
    fn default() -> Self {
        QosConfig {
            priority_map: [0, 1, 2, 3, 4, 5, 6, 7],
        }
    }
}

/// PFC settings. A priority listed in `priorities` (with `enabled`) is
/// lossless: switches pause upstream instead of dropping. Every other
/// priority is lossy (tail drop).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PfcConfig {
    /// PFC on or off. Off makes every priority lossy.
    pub enabled: bool,
    /// Lossless priorities (default `[3]`, the RoCE class).
    pub priorities: Vec<u8>,
    /// Pause time carried by an XOFF frame, in quanta of 512 bit times
    /// (0-65535; 65535 is 335.5 us at 100 Gbps).
    pub quanta: u16,
    /// How often a sender of XOFF repeats it while the queue stays above
    /// XON. Default: when half the pause time has elapsed.
    pub refresh: Option<Duration>,
    /// Time between a PAUSE frame's arrival and the transmitter honouring
    /// it (the peer response time of AN-4). Frames started before then
    /// still go.
    pub response_time: Duration,
    /// When to pause an ingress (port, priority).
    pub threshold: PfcThreshold,
    /// Headroom per ingress (port, lossless priority): where frames in
    /// flight after XOFF land. Separate from the shared pool.
    pub headroom: HeadroomConfig,
    /// The switches' PFC watchdog (SONiC `pfcwd`), off by default.
    pub watchdog: PfcWatchdogConfig,
    /// Live detection of PFC deadlocks (cyclic buffer dependencies).
    pub deadlock: DeadlockConfig,
}

/// The PFC watchdog of every switch, with SONiC's semantics (see
/// [`crate::fabric::watchdog`]): every `poll_interval` it samples each
/// lossless egress queue; a queue that stays held off by PAUSE, with PFC
/// frames still arriving and no XON, for `detection_time` is in a storm
/// and gets `action`; a stormed queue that receives no PFC frame for
/// `restoration_time` is restored. Defaults are SONiC's
/// (`pfcwd start_default`: 200 ms, 200 ms, poll 200 ms, action `drop`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PfcWatchdogConfig {
    /// Watchdog on.
    pub enabled: bool,
    /// How long a queue must stay stormed before the action starts.
    pub detection_time: Duration,
    /// How long a stormed queue must see no PFC frame before it is
    /// restored.
    pub restoration_time: Duration,
    /// Sampling period (at most the detection and restoration times).
    pub poll_interval: Duration,
    /// What a stormed queue does.
    pub action: PfcWatchdogAction,
}

impl Default for PfcWatchdogConfig {
    fn default() -> Self {
        PfcWatchdogConfig {
            enabled: false,
            detection_time: Duration::from_ms(200),
            restoration_time: Duration::from_ms(200),
            poll_interval: Duration::from_ms(200),
            action: PfcWatchdogAction::Drop,
        }
    }
}

/// The action of a stormed queue (SONiC `pfcwd start --action`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PfcWatchdogAction {
    /// Ignore PAUSE on the queue, drop what it holds and every frame of
    /// the priority that arrives for it or on the port.
    Drop,
    /// Ignore PAUSE on the queue and keep transmitting.
    Forward,
    /// Only record the storm (events and counters).
    Alert,
}

/// Live PFC deadlock detection (see [`crate::fabric::deadlock`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DeadlockConfig {
    /// Look for deadlocks while some switch port holds XOFF.
    pub detect: bool,
    /// Time between two checks while some switch port holds XOFF (the
    /// bound on the report's delay after the deadlock formed).
    pub check_interval: Duration,
    /// `report`: record the deadlock and run on; `stop`: end the run
    /// (`stop_reason = "deadlock"`).
    pub on_deadlock: OnDeadlock,
}

impl Default for DeadlockConfig {
    fn default() -> Self {
        DeadlockConfig {
            detect: true,
            check_interval: Duration::from_us(100),
            on_deadlock: OnDeadlock::Report,
        }
    }
}

/// What a detected deadlock does to the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnDeadlock {
    /// Record it in `results.deadlocks` and run on.
    Report,
    /// Record it and end the run.
    Stop,
}

impl Default for PfcConfig {
    fn default() -> Self {
        PfcConfig {
            enabled: true,
            priorities: vec![3],
            quanta: 0xFFFF,
            refresh: None,
            response_time: Duration::ZERO,
            threshold: PfcThreshold::default(),
            headroom: HeadroomConfig::default(),
            watchdog: PfcWatchdogConfig::default(),
            deadlock: DeadlockConfig::default(),
        }
    }
}

/// PFC XOFF/XON thresholds for an ingress (port, priority).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "mode")]
pub enum PfcThreshold {
    /// Fixed byte counts of the ingress (port, priority): pause when the
    /// bytes it holds reach `xoff`, resume when they fall to `xon`.
    Static {
        /// Pause at this many bytes held.
        xoff: Size,
        /// Resume at or below this many bytes.
        xon: Size,
    },
    /// Broadcom-style dynamic threshold: pause when the ingress's share of
    /// the shared pool reaches `alpha` times the free shared bytes (or its
    /// headroom is in use); resume when headroom is empty and the share is
    /// at least `resume_offset` below the threshold.
    Dynamic {
        /// Fraction of the free shared pool one ingress may hold (1/8 is
        /// the HPCC setting for 100G ports).
        alpha: f64,
        /// Hysteresis between XOFF and XON.
        resume_offset: Size,
    },
}

impl Default for PfcThreshold {
    fn default() -> Self {
        PfcThreshold::Dynamic {
            alpha: 0.125,
            resume_offset: Size::from_bytes(3_000),
        }
    }
}

/// How much headroom each ingress (port, lossless priority) gets.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "mode")]
pub enum HeadroomConfig {
    /// The mlx5 `calculate_xoff` formula of VALIDATION.md AN-4:
    /// `(301 + 2.16 * cable_m) * Gbps + 2.72 * MTU` bytes (speed at least
    /// 40 Gbps), with the cable length taken from the link (or from its
    /// propagation delay at 5 ns/m).
    #[default]
    Computed,
    /// The same number of bytes on every port.
    Fixed {
        /// Headroom bytes per ingress (port, priority).
        size: Size,
    },
}

/// A switch's packet buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BufferConfig {
    /// Total buffer per switch (reserve, headroom and shared pool
    /// together). Default 32 MB (Trident 3 class, the HPCC setting).
    pub size: Size,
    /// Guaranteed bytes per ingress (port, priority) before the shared pool
    /// is used.
    pub reserve_per_port: Size,
    /// Lossy traffic: an egress queue may hold at most `lossy_alpha` times
    /// the free shared bytes (dynamic tail drop); frames beyond are dropped.
    pub lossy_alpha: f64,
    /// Lossy traffic: optional hard cap on one egress (port, priority)
    /// queue in bytes, applied on top of `lossy_alpha`.
    pub lossy_queue_limit: Option<Size>,
}

impl Default for BufferConfig {
    fn default() -> Self {
        BufferConfig {
            size: Size::from_bytes(32_000_000),
            reserve_per_port: Size::from_bytes(4_000),
            lossy_alpha: 1.0,
            lossy_queue_limit: None,
        }
    }
}

/// RED/ECN marking of one priority's egress queues. The marking decision
/// is taken when a frame leaves the queue, on the queue's bytes at that
/// moment: no marking at or below `kmin`, probability rising linearly to
/// `pmax` at `kmax`, every frame above `kmax` (VALIDATION.md AN-9).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EcnConfig {
    /// The priority whose queues mark.
    pub priority: u8,
    /// Lower threshold (bytes in the egress queue).
    pub kmin: Size,
    /// Upper threshold.
    pub kmax: Size,
    /// Marking probability at `kmax`.
    pub pmax: f64,
}

impl Default for EcnConfig {
    fn default() -> Self {
        // HPCC artifact, 100G ports (VALIDATION.md STD-1).
        EcnConfig {
            priority: 3,
            kmin: Size::from_bytes(400_000),
            kmax: Size::from_bytes(1_600_000),
            pmax: 0.2,
        }
    }
}

/// Egress scheduling among the priority queues of a port. PFC frames
/// always go first (after the frame in flight); within a priority, frames
/// leave in arrival order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case", tag = "mode")]
pub enum SchedulerConfig {
    /// Highest priority number first.
    #[default]
    Strict,
    /// Deficit weighted round robin with one weight per priority 0-7;
    /// a priority with weight 0 is served strictly before the others.
    Dwrr {
        /// Weights for priorities 0..7.
        weights: [u32; 8],
        /// Bytes of credit per unit of weight per round.
        quantum: Size,
    },
}

/// Host NIC settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NicConfig {
    /// Path MTU: payload bytes per RoCE packet (256, 512, 1024, 2048 or
    /// 4096).
    pub mtu: Size,
    /// Where the requester restarts after a NAK or timeout.
    pub retransmit: RetransmitMode,
    /// Local ACK timeout exponent: 4.096 us * 2^`ack_timeout` (14 is about
    /// 67 ms; 0 means wait forever).
    pub ack_timeout: u8,
    /// Retransmissions after timeouts or NAKs before the WR fails.
    pub retry_cnt: u8,
    /// RNR NAK retries (7 = infinite).
    pub rnr_retry: u8,
    /// Congestion control.
    pub cc: CcConfig,
    /// Rate at which the NIC drains received frames into the host. `None`:
    /// as fast as they arrive. Slower than the link, the receive buffer
    /// fills and the NIC sends PAUSE upstream.
    pub rx_drain_rate: Option<Rate>,
    /// Receive buffer of the NIC port (used with `rx_drain_rate`).
    pub rx_buffer: Size,
    /// Send XOFF when the receive buffer holds this much.
    pub rx_xoff: Size,
    /// Send XON when it falls to this.
    pub rx_xon: Size,
    /// Priority used by RoCE data when a workload does not say.
    pub priority: u8,
    /// Priority CNPs travel on (6 on ConnectX).
    pub cnp_priority: u8,
    /// Queue pairs per (source, destination) pair.
    pub qps_per_pair: u32,
    /// Maximum outstanding (unacknowledged) packets per QP, first tries
    /// and go-back-N retries alike; `None`: no window, as a ConnectX QP
    /// and the DCQCN model of the HPCC artifact (`HAS_WIN 0`): what was
    /// sent and not acknowledged is bounded by the rate and the 24-bit
    /// PSN space only.
    pub window: Option<u32>,
    /// PSNs past a gap the responder holds and places out of order (its
    /// reorder window, IRN's bitmap). `None`: 0 under go-back-N and
    /// go-back-0 (every packet past a gap is dropped and resent, as on a
    /// NIC without out-of-order placement), 4096 under selective repeat.
    /// Set under go-back-N, the responder holds what it can and NAKs only
    /// what it cannot: the NIC that adaptive routing and spraying need.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reorder_window: Option<u32>,
    /// IRN's low retransmission timeout, used while at most three packets
    /// are outstanding (with `rto_high`, replacing `ack_timeout`).
    /// `None`: 100 us under selective repeat, else `ack_timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_low: Option<Duration>,
    /// IRN's high retransmission timeout, used otherwise. `None`: 320 us
    /// under selective repeat, else `ack_timeout`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rto_high: Option<Duration>,
    /// Spread each QP's packets over several paths and planes
    /// (`[nic.multipath]`; `None`: one path per QP, its UDP source port).
    /// Needs selective repeat.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multipath: Option<MultipathConfig>,
    /// PFC storm prevention of the NIC (ConnectX device stall watermarks).
    pub pause_storm: PauseStormConfig,
    /// The NIC's host side (PCIe, message path; see
    /// [`crate::hostmodel`]). `None`: an ideal host, the NIC sends at line
    /// rate from the first byte.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<HostConfig>,
}

/// Multipath (`[nic.multipath]`): each request packet of a QP takes one
/// of `paths` paths in turn, each with its own UDP source port (the
/// entropy switches hash); path `i` leaves by NIC port `i mod ports`, so
/// on a multi-plane fabric (one NIC port per plane) the paths spread over
/// the planes. A packet lost on a path makes the QP avoid that path for
/// `avoid`; it is resent on another. Responses (ACKs, READ data) leave by
/// the port their request arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MultipathConfig {
    /// Paths (entropy values) per QP.
    pub paths: u16,
    /// How long a path that lost a packet is avoided.
    pub avoid: Duration,
    /// How much later than a missing packet a delivered one must have been
    /// sent for the missing one to count as lost (paths reorder by less).
    pub reorder: Duration,
}

impl Default for MultipathConfig {
    /// 16 paths, avoided for 1 ms after a loss, 20 us of reordering.
    fn default() -> Self {
        MultipathConfig {
            paths: 16,
            avoid: Duration::from_ms(1),
            reorder: Duration::from_us(20),
        }
    }
}

/// ConnectX PFC storm prevention (`ethtool --set-tunable DEV
/// pfc-prevention-tout`): when the NIC has held XOFF on a priority without
/// a break for the minor watermark it counts a
/// `tx_pause_storm_warning_events`; at the critical watermark it counts a
/// `tx_pause_storm_error_events` and stops sending PAUSE until its receive
/// buffer has drained to XON. The default critical watermark is a
/// ConnectX's own, 8 s (Linux commit "net/mlx5e: PFC stall prevention
/// support"; range 80 ms to 8 s): a stalled NIC keeps pausing long enough
/// for a switch watchdog (SONiC: 200 ms detection) to see the storm. The
/// mlx5 driver's `auto` setting, 100 ms, is for a scenario to set. The
/// minor watermark is 85 % of the critical one, at least 80 ms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PauseStormConfig {
    /// Prevention on (the driver's default on NICs with stall detection).
    pub enabled: bool,
    /// Critical watermark: continuous XOFF time after which PAUSE stops.
    pub critical: Duration,
    /// Minor watermark (warning). Default: 85 % of `critical`, at least
    /// 80 ms when `critical` is at least that, as the driver derives it.
    pub minor: Option<Duration>,
}

impl Default for PauseStormConfig {
    fn default() -> Self {
        PauseStormConfig {
            enabled: true,
            critical: Duration::from_secs(8),
            minor: None,
        }
    }
}

impl PauseStormConfig {
    /// The minor watermark: the configured one, or the driver's
    /// `max(80 ms, 85 % of critical)` (below 80 ms of critical, which the
    /// driver refuses and a short simulation wants, 85 % of it).
    pub fn minor_watermark(&self) -> Duration {
        self.minor.unwrap_or_else(|| {
            let pct = Duration::from_ps(self.critical.as_ps() / 100 * 85);
            if self.critical >= Duration::from_ms(80) {
                pct.max(Duration::from_ms(80))
            } else {
                pct
            }
        })
    }
}

impl Default for NicConfig {
    fn default() -> Self {
        NicConfig {
            mtu: Size::from_bytes(4096),
            retransmit: RetransmitMode::GoBackN,
            ack_timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            cc: CcConfig::default(),
            rx_drain_rate: None,
            rx_buffer: Size::from_bytes(256_000),
            rx_xoff: Size::from_bytes(128_000),
            rx_xon: Size::from_bytes(64_000),
            priority: 3,
            cnp_priority: 6,
            qps_per_pair: 1,
            window: None,
            reorder_window: None,
            rto_low: None,
            rto_high: None,
            multipath: None,
            pause_storm: PauseStormConfig::default(),
            host: None,
        }
    }
}

/// Retransmission start policy of the requester (VALIDATION.md AN-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RetransmitMode {
    /// Restart from the NAKed or timed-out PSN (every modern RoCE NIC).
    GoBackN,
    /// Restart from the first packet of the message (early NICs).
    #[serde(rename = "go-back-0")]
    GoBack0,
    /// Resend only what was lost (IRN): the responder holds packets past
    /// a gap and acknowledges each selectively; both ends of every
    /// connection use it.
    SelectiveRepeat,
}

impl NicConfig {
    /// The responder's reorder window in PSNs (see `reorder_window`).
    pub fn effective_reorder_window(&self) -> u32 {
        self.reorder_window.unwrap_or(match self.retransmit {
            RetransmitMode::SelectiveRepeat => 4096,
            RetransmitMode::GoBackN | RetransmitMode::GoBack0 => 0,
        })
    }

    /// IRN's (low, high) timeouts when they replace `ack_timeout`.
    pub fn effective_rto(&self) -> Option<(Duration, Duration)> {
        match (self.rto_low, self.rto_high, self.retransmit) {
            (Some(l), Some(h), _) => Some((l, h)),
            (None, None, RetransmitMode::SelectiveRepeat) => {
                Some((Duration::from_us(100), Duration::from_us(320)))
            }
            (Some(l), None, RetransmitMode::SelectiveRepeat) => Some((l, Duration::from_us(320))),
            (None, Some(h), RetransmitMode::SelectiveRepeat) => Some((Duration::from_us(100), h)),
            _ => None,
        }
    }
}

/// Congestion control of the NIC.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CcConfig {
    /// The algorithm.
    pub algorithm: CcAlgorithm,
    /// DCQCN parameter set to start from.
    pub preset: DcqcnPreset,
    /// DCQCN parameters that override the preset.
    pub dcqcn: DcqcnOverrides,
    /// HPCC settings (used with `algorithm = "hpcc"`).
    #[serde(skip_serializing_if = "HpccSettings::is_default")]
    pub hpcc: HpccSettings,
    /// Swift settings (used with `algorithm = "swift"`).
    #[serde(skip_serializing_if = "SwiftSettings::is_default")]
    pub swift: SwiftSettings,
    /// TIMELY settings (used with `algorithm = "timely"`).
    #[serde(skip_serializing_if = "TimelySettings::is_default")]
    pub timely: TimelySettings,
    /// InfiniBand congestion control settings (used with `algorithm =
    /// "ib_cc"`).
    #[serde(skip_serializing_if = "IbCcSettings::is_default")]
    pub ib_cc: IbCcSettings,
}

/// InfiniBand congestion control at the source (`nic.cc.ib_cc`): switches
/// mark FECN where `fabric.ecn` marks, the destination returns BECN (its
/// CNP), and each BECN raises the source's index into a table of
/// inter-packet delays by `ccti_increase`, up to `ccti_limit`; every
/// `ccti_timer` the index falls by one, down to `ccti_min`. Entry `i`
/// delays each frame by `i x ipd_step`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IbCcSettings {
    /// Index steps per BECN (1).
    pub ccti_increase: u16,
    /// The table's last index (127).
    pub ccti_limit: u16,
    /// The lowest index the timer lowers to (0).
    pub ccti_min: u16,
    /// The period of one step down (10 us).
    pub ccti_timer: Duration,
    /// Delay added per table entry (`None`: an eighth of a full frame's
    /// time at the NIC's rate, so index 8 halves the rate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ipd_step: Option<Duration>,
}

impl Default for IbCcSettings {
    fn default() -> Self {
        IbCcSettings {
            ccti_increase: 1,
            ccti_limit: 127,
            ccti_min: 0,
            ccti_timer: Duration::from_us(10),
            ipd_step: None,
        }
    }
}

impl IbCcSettings {
    /// All defaults (left out when a configuration is written back).
    pub fn is_default(&self) -> bool {
        *self == IbCcSettings::default()
    }
}

impl CcConfig {
    /// Check the values a type cannot: `key` is where this table sits
    /// (`nic.cc`, `workload[2].cc`), named in the error.
    pub fn validate(&self, key: &str) -> Result<(), ConfigError> {
        self.dcqcn
            .validate()
            .map_err(|(k, why)| ConfigError::new(&format!("{key}.dcqcn.{k}"), why))?;
        let h = &self.hpcc;
        if !(h.eta > 0.0 && h.eta <= 1.0) {
            return Err(ConfigError::new(
                &format!("{key}.hpcc.eta"),
                format!("{}: expected a target utilisation in (0, 1]", h.eta),
            ));
        }
        if h.min_rate.bps() == 0 {
            return Err(ConfigError::new(
                &format!("{key}.hpcc.min_rate"),
                "0: expected a positive rate",
            ));
        }
        let ib = &self.ib_cc;
        if ib.ccti_min > ib.ccti_limit {
            return Err(ConfigError::new(
                &format!("{key}.ib_cc.ccti_min"),
                format!(
                    "{}: expected at most ccti_limit ({})",
                    ib.ccti_min, ib.ccti_limit
                ),
            ));
        }
        if ib.ccti_timer == Duration::ZERO {
            return Err(ConfigError::new(
                &format!("{key}.ib_cc.ccti_timer"),
                "0: expected the period of one step down, e.g. \"10us\"",
            ));
        }
        for (table, check) in [
            ("swift", self.swift.validate()),
            ("timely", self.timely.validate()),
        ] {
            check.map_err(|(k, why)| ConfigError::new(&format!("{key}.{table}.{k}"), why))?;
        }
        Ok(())
    }
}

/// HPCC's settings (`nic.cc.hpcc`): the HPCC artifact's by default. The
/// base RTT of each QP is its path's, computed from the topology; the
/// line rate is its NIC's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HpccSettings {
    /// Target utilisation η of the busiest hop (0.95).
    pub eta: f64,
    /// Additive steps before a multiplicative one below η (`maxStage`;
    /// the artifact 0, the paper 5).
    pub max_stage: u32,
    /// Additive increase per step, as a rate (`W_AI / T`; 50 Mbit/s, the
    /// artifact's web results' "ai50").
    pub ai: Rate,
    /// Floor of the rate (100 Mbit/s).
    pub min_rate: Rate,
}

impl Default for HpccSettings {
    fn default() -> Self {
        HpccSettings {
            eta: 0.95,
            max_stage: 0,
            ai: Rate::from_bps(50_000_000),
            min_rate: Rate::from_bps(100_000_000),
        }
    }
}

impl HpccSettings {
    /// All defaults (left out when a configuration is written back).
    pub fn is_default(&self) -> bool {
        *self == HpccSettings::default()
    }
}

impl Default for CcConfig {
    fn default() -> Self {
        CcConfig {
            algorithm: CcAlgorithm::None,
            preset: DcqcnPreset::Firmware,
            dcqcn: DcqcnOverrides::default(),
            hpcc: HpccSettings::default(),
            swift: SwiftSettings::default(),
            timely: TimelySettings::default(),
            ib_cc: IbCcSettings::default(),
        }
    }
}

/// Congestion-control algorithms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CcAlgorithm {
    /// Line rate (PFC only).
    None,
    /// DCQCN reaction and notification points.
    Dcqcn,
    /// HPCC: switches stamp in-band telemetry on data packets, ACKs echo
    /// it (one ACK per packet), the sender sets its rate from the busiest
    /// hop's utilisation.
    Hpcc,
    /// Swift: a delay-based window aiming for the base RTT plus a
    /// queueing budget (one ACK per packet, each timed).
    Swift,
    /// TIMELY: a rate from the RTT and its gradient between two
    /// thresholds (one ACK per packet, each timed).
    Timely,
    /// InfiniBand congestion control: FECN marks, BECNs (CNPs), a table
    /// of inter-packet delays.
    IbCc,
}

/// DCQCN parameter presets (VALIDATION.md DCQCN-0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DcqcnPreset {
    /// SIGCOMM'15 paper set (40 Gbps testbed), with the paper's α timer:
    /// it runs from the flow's first data packet, so α decays from 1 every
    /// K even before any CNP.
    Paper,
    /// ConnectX firmware defaults as shipped, with the firmware's α timer:
    /// α holds at its initial value until the flow's first CNP and its
    /// update periods count from there.
    Firmware,
    /// The HPCC artifact's "Mellanox" set at 100 Gbps (firmware model: α
    /// timer from the first CNP).
    Hpcc,
}

/// What to record besides the summary, per-flow records and counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecordConfig {
    /// Egress queues whose depth is sampled over time.
    pub queues: Vec<QueueSelector>,
    /// Sampling period of the time series.
    pub interval: Duration,
    /// Keep one record per flow in the results.
    pub flows: bool,
    /// Write the per-port counters into `results.json` (`ports`). They are
    /// always in the counter dumps (`counters/<variant>/`) and the report;
    /// at thousands of ports they are most of `results.json`, so only on
    /// request.
    pub ports: bool,
    /// Most PAUSE (held-off) intervals kept per port for the pause
    /// timelines in `results.json` (`pauses`); 0 keeps none. Intervals past
    /// the cap are only counted.
    pub pause_intervals: u32,
    /// Link directions to capture as pcap files (RoCEv2 and PFC frames,
    /// timestamps in simulated time); empty: no capture, no cost.
    pub pcap: Vec<CaptureSelector>,
    /// Sample every flow's delivery rate over time into `results.json`
    /// (`flow_rates`); off: no series, no cost.
    pub flow_rates: bool,
    /// Sampling period of the flow rates (default: `interval`).
    pub flow_rate_interval: Option<Duration>,
}

impl Default for RecordConfig {
    fn default() -> Self {
        RecordConfig {
            queues: Vec::new(),
            interval: Duration::from_us(10),
            flows: true,
            ports: false,
            pause_intervals: 256,
            pcap: Vec::new(),
            flow_rates: false,
            flow_rate_interval: None,
        }
    }
}

/// One link direction to capture: the frames a port transmits. Named
/// either by the link's ends (`{ from = "leaf0", to = "h0" }`: what leaf0
/// sends to h0) or by the transmitting port (`{ node = "leaf0", port = 2
/// }`), not both.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureSelector {
    /// The transmitting node of the link direction.
    #[serde(default)]
    pub from: Option<String>,
    /// The receiving node of the link direction.
    #[serde(default)]
    pub to: Option<String>,
    /// The transmitting node, with `port`.
    #[serde(default)]
    pub node: Option<String>,
    /// Port number on `node`.
    #[serde(default)]
    pub port: Option<u16>,
    /// Most frames written; later ones are only counted (default 100000).
    #[serde(default = "default_capture_frames")]
    pub max_frames: u64,
}

fn default_capture_frames() -> u64 {
    100_000
}

impl CaptureSelector {
    /// The transmitting (node, port number) this selector names in
    /// `topo`, or the key (under `record.pcap[i]`) and what is wrong.
    pub fn resolve(
        &self,
        topo: &crate::topology::Topology,
    ) -> Result<(crate::topology::NodeId, u16), (&'static str, String)> {
        let find = |name: &str, key: &'static str| {
            topo.find(name).ok_or_else(|| {
                (
                    key,
                    format!("{name:?}: expected the name of a node in the topology"),
                )
            })
        };
        match (&self.from, &self.to, &self.node, self.port) {
            (Some(from), Some(to), None, None) => {
                let (a, b) = (find(from, "from")?, find(to, "to")?);
                let port = topo
                    .node(a)
                    .ports
                    .iter()
                    .position(|&l| {
                        let l = topo.link(l);
                        (l.a.node == a && l.b.node == b) || (l.b.node == a && l.a.node == b)
                    })
                    .ok_or_else(|| {
                        (
                            "to",
                            format!(
                                "no link joins {from:?} and {to:?}: expected the two ends of a link"
                            ),
                        )
                    })?;
                Ok((a, port as u16))
            }
            (None, None, Some(node), Some(port)) => {
                let n = find(node, "node")?;
                let ports = topo.node(n).ports.len();
                if usize::from(port) >= ports {
                    return Err((
                        "port",
                        format!("{port}: {node:?} has ports 0-{}", ports.saturating_sub(1)),
                    ));
                }
                Ok((n, port))
            }
            _ => Err((
                "from",
                "expected either `from` and `to` (a link direction) or `node` and `port`"
                    .to_string(),
            )),
        }
    }
}

/// One egress queue (or all priorities of a port) to sample.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueueSelector {
    /// Node name (`leaf0`, `h3`).
    pub node: String,
    /// Port number on that node.
    pub port: u16,
    /// One priority, or `None` for the sum over priorities.
    #[serde(default)]
    pub priority: Option<u8>,
}

impl SimConfig {
    /// Check the rules serde cannot: ranges and orderings between fields.
    /// The first rule broken is the error: the fabric's, the NICs', the
    /// congestion controls', the record's, the classification map's, then
    /// the faults'.
    pub fn validate(&self) -> Result<(), ConfigError> {
        check_fabric(&self.fabric)?;
        check_nic(&self.nic)?;
        self.nic.cc.validate("nic.cc")?;
        for (i, cc) in self.workload_cc.iter().enumerate() {
            if let Some(cc) = cc {
                cc.validate(&format!("workload[{i}].cc"))?;
            }
        }
        check_record(&self.record)?;
        for &p in &self.fabric.qos.priority_map {
            check_priority("fabric.qos.priority_map", p)?;
        }
        for (i, fault) in self.faults.iter().enumerate() {
            fault.plan(&format!("faults[{i}]"))?;
        }
        Ok(())
    }

    /// True when priority `p` is lossless (PFC on and `p` listed).
    pub fn is_lossless(&self, p: u8) -> bool {
        self.fabric.pfc.enabled && self.fabric.pfc.priorities.contains(&p)
    }
}

/// A priority under `key`: 0-7.
fn check_priority(key: &str, p: u8) -> Result<(), ConfigError> {
    if p > 7 {
        Err(ConfigError::new(key, format!("priority {p}: expected 0-7")))
    } else {
        Ok(())
    }
}

/// A probability under `key`: in [0, 1].
fn check_probability(key: &str, p: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(ConfigError::new(
            key,
            format!("{p}: expected a probability in [0, 1]"),
        ))
    }
}

/// The rules of `[fabric]` but its classification map (checked last,
/// after the record's): PFC priorities and thresholds, the buffer, ECN,
/// the watchdog's and the deadlock detector's times, the scheduler.
fn check_fabric(f: &FabricConfig) -> Result<(), ConfigError> {
    for &p in &f.pfc.priorities {
        check_priority("fabric.pfc.priorities", p)?;
    }
    if let Some(t) = &f.trim {
        check_priority("fabric.trim.priority", t.priority)?;
        if f.link_layer == LinkLayer::Infiniband {
            return Err(ConfigError::new(
                "fabric.trim",
                "an InfiniBand fabric never drops for lack of buffer, so there is nothing to \
                 trim: expected link_layer = \"ethernet\" with [fabric.trim]",
            ));
        }
    }
    if f.link_layer == LinkLayer::Infiniband {
        let ib = &f.infiniband;
        let blocks = ib.blocks_per_lane();
        if ib.vl_buffer.bytes() < 4096 + 128 || blocks > IB_MAX_CREDITS {
            return Err(ConfigError::new(
                "fabric.infiniband.vl_buffer",
                format!(
                    "{}: expected a full 4 KiB frame's room (4224 B) up to 128 KiB, the 2048 \
                     blocks of 64 B the 12-bit credit counters can keep outstanding",
                    ib.vl_buffer
                ),
            ));
        }
        if let Some(a) = &ib.arbitration {
            if a.high.len() > 64 || a.low.len() > 64 {
                return Err(ConfigError::new(
                    "fabric.infiniband.arbitration",
                    "more than 64 entries in a table: expected at most 64",
                ));
            }
            for e in a.high.iter().chain(&a.low) {
                if e.vl > 7 {
                    return Err(ConfigError::new(
                        "fabric.infiniband.arbitration.vl",
                        format!("{}: expected a data lane 0-7", e.vl),
                    ));
                }
            }
        }
        for &vl in &ib.sl_to_vl {
            if vl > 7 {
                return Err(ConfigError::new(
                    "fabric.infiniband.sl_to_vl",
                    format!("lane {vl}: expected a data lane 0-7 (VL15 is management's)"),
                ));
            }
        }
        if ib.fc_period == Duration::ZERO {
            return Err(ConfigError::new(
                "fabric.infiniband.fc_period",
                "0: expected the longest wait before a flow-control packet, e.g. \"1us\"",
            ));
        }
    }
    if let LoadBalancingConfig::Flowlet { gap } = f.load_balancing {
        if gap == Duration::ZERO {
            return Err(ConfigError::new(
                "fabric.load_balancing.gap",
                "0: expected the idle time that ends a flowlet, e.g. \"50us\"",
            ));
        }
    }
    match f.pfc.threshold {
        PfcThreshold::Static { xoff, xon } => {
            if xon > xoff {
                return Err(ConfigError::new(
                    "fabric.pfc.threshold.xon",
                    format!("{xon} is above xoff {xoff}: expected xon <= xoff"),
                ));
            }
        }
        PfcThreshold::Dynamic { alpha, .. } => {
            if !(alpha > 0.0 && alpha.is_finite()) {
                return Err(ConfigError::new(
                    "fabric.pfc.threshold.alpha",
                    format!("{alpha}: expected a positive number"),
                ));
            }
        }
    }
    if !(f.buffer.lossy_alpha > 0.0 && f.buffer.lossy_alpha.is_finite()) {
        return Err(ConfigError::new(
            "fabric.buffer.lossy_alpha",
            format!("{}: expected a positive number", f.buffer.lossy_alpha),
        ));
    }
    if f.buffer.size.bytes() == 0 {
        return Err(ConfigError::new(
            "fabric.buffer.size",
            "0: expected a buffer size above zero",
        ));
    }
    for e in &f.ecn {
        check_priority("fabric.ecn.priority", e.priority)?;
        check_probability("fabric.ecn.pmax", e.pmax)?;
        if e.kmin > e.kmax {
            return Err(ConfigError::new(
                "fabric.ecn.kmin",
                format!("{} is above kmax {}: expected kmin <= kmax", e.kmin, e.kmax),
            ));
        }
    }
    let wd = &f.pfc.watchdog;
    for (key, d) in [
        ("fabric.pfc.watchdog.detection_time", wd.detection_time),
        ("fabric.pfc.watchdog.restoration_time", wd.restoration_time),
        ("fabric.pfc.watchdog.poll_interval", wd.poll_interval),
        (
            "fabric.pfc.deadlock.check_interval",
            f.pfc.deadlock.check_interval,
        ),
    ] {
        if d == Duration::ZERO {
            return Err(ConfigError::new(key, "0: expected a positive duration"));
        }
    }
    if wd.poll_interval > wd.detection_time.min(wd.restoration_time) {
        return Err(ConfigError::new(
            "fabric.pfc.watchdog.poll_interval",
            format!(
                "{} is longer than the detection or restoration time: expected at most {}",
                wd.poll_interval,
                wd.detection_time.min(wd.restoration_time)
            ),
        ));
    }
    if let SchedulerConfig::Dwrr { quantum, .. } = f.scheduler {
        if quantum.bytes() == 0 {
            return Err(ConfigError::new(
                "fabric.scheduler.quantum",
                "0: expected a positive byte count",
            ));
        }
    }
    Ok(())
}

/// The rules of `[nic]` besides its congestion control: MTU, retries,
/// priorities, receive buffer and drain, storm prevention, window.
fn check_nic(n: &NicConfig) -> Result<(), ConfigError> {
    if !matches!(n.mtu.bytes(), 256 | 512 | 1024 | 2048 | 4096) {
        return Err(ConfigError::new(
            "nic.mtu",
            format!("{}: expected 256, 512, 1024, 2048 or 4096", n.mtu.bytes()),
        ));
    }
    if n.ack_timeout > 31 {
        return Err(ConfigError::new(
            "nic.ack_timeout",
            format!("{}: expected an exponent 0-31", n.ack_timeout),
        ));
    }
    if n.retry_cnt > 7 || n.rnr_retry > 7 {
        return Err(ConfigError::new(
            "nic.retry_cnt",
            "expected retry_cnt and rnr_retry in 0-7",
        ));
    }
    check_priority("nic.priority", n.priority)?;
    check_priority("nic.cnp_priority", n.cnp_priority)?;
    if n.qps_per_pair == 0 {
        return Err(ConfigError::new(
            "nic.qps_per_pair",
            "0: expected at least 1",
        ));
    }
    if n.rx_xon > n.rx_xoff || n.rx_xoff > n.rx_buffer {
        return Err(ConfigError::new(
            "nic.rx_xoff",
            "expected rx_xon <= rx_xoff <= rx_buffer",
        ));
    }
    if let Some(r) = n.rx_drain_rate {
        if r.bps() == 0 {
            return Err(ConfigError::new(
                "nic.rx_drain_rate",
                "0: expected a positive rate",
            ));
        }
    }
    if n.pause_storm.critical == Duration::ZERO {
        return Err(ConfigError::new(
            "nic.pause_storm.critical",
            "0: expected a positive duration",
        ));
    }
    if let Some(m) = n.pause_storm.minor {
        if m == Duration::ZERO || m > n.pause_storm.critical {
            return Err(ConfigError::new(
                "nic.pause_storm.minor",
                format!(
                    "{m}: expected a positive duration at most the critical watermark {}",
                    n.pause_storm.critical
                ),
            ));
        }
    }
    if let Some(0) = n.window {
        return Err(ConfigError::new("nic.window", "0: expected at least 1"));
    }
    if let Some(w) = n.reorder_window {
        if w > 1 << 22 {
            return Err(ConfigError::new(
                "nic.reorder_window",
                format!("{w}: expected at most 4194304 PSNs (a quarter of the PSN space)"),
            ));
        }
        if w == 0 && n.retransmit == RetransmitMode::SelectiveRepeat {
            return Err(ConfigError::new(
                "nic.reorder_window",
                "0: selective repeat needs a responder that holds packets past a gap",
            ));
        }
    }
    if n.retransmit != RetransmitMode::SelectiveRepeat
        && n.rto_low.is_some() != n.rto_high.is_some()
    {
        return Err(ConfigError::new(
            if n.rto_low.is_some() {
                "nic.rto_high"
            } else {
                "nic.rto_low"
            },
            "missing: rto_low and rto_high replace ack_timeout together",
        ));
    }
    if let Some((l, h)) = n.effective_rto() {
        if l == Duration::ZERO || l > h {
            return Err(ConfigError::new(
                "nic.rto_low",
                format!("{l}: expected a positive duration at most rto_high ({h})"),
            ));
        }
    }
    if let Some(m) = &n.multipath {
        if m.paths == 0 {
            return Err(ConfigError::new(
                "nic.multipath.paths",
                "0: expected at least 1",
            ));
        }
        if m.avoid == Duration::ZERO {
            return Err(ConfigError::new(
                "nic.multipath.avoid",
                "0: expected a positive duration",
            ));
        }
        if n.retransmit != RetransmitMode::SelectiveRepeat {
            return Err(ConfigError::new(
                "nic.multipath",
                "needs nic.retransmit = \"selective-repeat\": paths reorder packets, which go-back-N resends",
            ));
        }
    }
    if let Some(h) = &n.host {
        h.validate("nic.host")?;
    }
    Ok(())
}

/// The rules of `[record]`: positive sampling periods, priorities of the
/// recorded queues.
fn check_record(r: &RecordConfig) -> Result<(), ConfigError> {
    if r.interval == Duration::ZERO {
        return Err(ConfigError::new(
            "record.interval",
            "0: expected a positive duration",
        ));
    }
    if r.flow_rate_interval == Some(Duration::ZERO) {
        return Err(ConfigError::new(
            "record.flow_rate_interval",
            "0: expected a positive duration",
        ));
    }
    for q in &r.queues {
        if let Some(p) = q.priority {
            check_priority("record.queues.priority", p)?;
        }
    }
    Ok(())
}

/// The mlx5 `calculate_xoff` headroom (VALIDATION.md AN-4) in bytes:
/// `(301 + 2.16 * cable_m) * Gbps + 2.72 * mtu`, speed clamped to at least
/// 40 Gbps. Computed in integers (hundredths) so it is exact; saturates at
/// `u64::MAX` for absurd cables (which then cannot fit any buffer).
pub fn mlx5_headroom(rate: Rate, cable_m: u64, mtu: u64) -> u64 {
    let gbps = u128::from((rate.bps() / 1_000_000_000).max(40));
    let hundredths = (30_100 + 216 * u128::from(cable_m)) * gbps + 272 * u128::from(mtu);
    u64::try_from(hundredths.div_ceil(100)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_round_trip_through_toml() {
        let c = SimConfig::default();
        c.validate().unwrap();
        // Sizes whose display is exact survive a round trip unchanged.
        let mut c = c;
        c.fabric.buffer.size = Size::from_bytes(32 << 20);
        let text = toml::to_string(&c).unwrap();
        let back: SimConfig = toml::from_str(&text).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn scenario_snippets_parse_with_units() {
        let c: SimConfig = toml::from_str(
            r#"
            [fabric.pfc]
            priorities = [3]
            threshold = { mode = "static", xoff = "320KB", xon = "200KB" }
            headroom = { mode = "fixed", size = "100KB" }
            [fabric.buffer]
            size = "12MB"
            [[fabric.ecn]]
            priority = 3
            kmin = "5KB"
            kmax = "200KB"
            pmax = 0.01
            [nic]
            retransmit = "go-back-0"
            cc = { algorithm = "dcqcn", preset = "paper", dcqcn = { rate_ai = "40Mbps" } }
            [[faults]]
            from = "sw0"
            to = "h1"
            loss = 0.001
            "#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(
            c.fabric.pfc.threshold,
            PfcThreshold::Static {
                xoff: Size::from_bytes(320_000),
                xon: Size::from_bytes(200_000)
            }
        );
        assert_eq!(c.nic.retransmit, RetransmitMode::GoBack0);
        assert_eq!(c.nic.cc.dcqcn.rate_ai, Some(Rate::from_bps(40_000_000)));
        assert_eq!(c.faults[0].loss, Some(0.001));
    }

    #[test]
    fn unknown_keys_and_bad_orderings_are_rejected() {
        assert!(toml::from_str::<SimConfig>("[fabric]\nbufer = 1").is_err());
        let mut c = SimConfig::default();
        c.fabric.ecn[0].kmin = Size::from_bytes(2_000_000);
        let e = c.validate().unwrap_err();
        assert_eq!(e.key, "fabric.ecn.kmin");
        let mut c = SimConfig::default();
        c.fabric.pfc.priorities = vec![9];
        assert_eq!(c.validate().unwrap_err().key, "fabric.pfc.priorities");
    }

    #[test]
    fn mlx5_headroom_matches_the_reference_table() {
        // VALIDATION.md AN-4: 100G, 5 m, MTU 1500 -> 35.3 KB; 100G 100 m
        // MTU 4096 -> 62.8 KB; 40G 300 m MTU 4096 -> 49.1 KB.
        let kb10 = |b: u64| (b + 50) / 100;
        assert_eq!(kb10(mlx5_headroom(Rate::from_gbps(100), 5, 1500)), 353);
        assert_eq!(kb10(mlx5_headroom(Rate::from_gbps(100), 100, 4096)), 628);
        assert_eq!(kb10(mlx5_headroom(Rate::from_gbps(40), 300, 4096)), 491);
        assert_eq!(kb10(mlx5_headroom(Rate::from_gbps(25), 5, 1500)), 166);
    }
}
