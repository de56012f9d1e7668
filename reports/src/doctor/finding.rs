//! What the doctor reports: a [`Finding`], its [`Severity`] and the
//! playbook [`Symptom`] it belongs to (numbers 1-12, and the doctor's
//! extra findings), with the triage order findings are ranked by within
//! one severity.

use std::fmt;

use serde::Serialize;

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Context: nothing to fix.
    Info,
    /// Worth a look; costs performance.
    Warning,
    /// A real problem that costs the job time or correctness.
    Error,
    /// The job is (or is about to be) stalled or losing data.
    Critical,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Error => "error",
            Severity::Critical => "critical",
        })
    }
}

/// The playbook's symptoms (numbers 1-12) and the doctor's extra findings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Symptom {
    /// 1: PFC pause received (the peer holds our transmitter).
    RxPause,
    /// 2: PFC pause sent (we cannot drain what arrives).
    TxPause,
    /// PFC deadlock: a cycle of paused (port, priority) queues.
    PfcDeadlock,
    /// 3: PFC storm.
    PfcStorm,
    /// 4: ECN not marking while PFC does all the work.
    EcnNotMarking,
    /// 5: CNPs sent but not acted on.
    CnpNotHandled,
    /// 6: packet loss and go-back-N retransmissions.
    PacketLoss,
    /// 7: ACK timeouts / retry exceeded (completion status 12).
    AckTimeout,
    /// 8: link speed or width below the others, or flapping.
    LinkDegraded,
    /// 9: MTU mismatch or small RoCE MTU.
    MtuMismatch,
    /// 10: RoCE traffic on a priority without PFC.
    LossyPriority,
    /// 11: GPUDirect RDMA not used or GPU far from its NIC.
    GdrNotUsed,
    /// 12: corrupted packets (CRC / ICRC / symbol errors).
    Corruption,
    /// The receive queue had no buffer posted (host side).
    HostOutOfBuffer,
    /// Work completions failed with a status other than 12.
    CompletionError,
    /// NCCL fell back to TCP sockets.
    SocketFallback,
    /// perftest bandwidth well below the port rate.
    SlowPerftest,
    /// One receiver takes most ECN marks / CNPs (incast or slow receiver).
    SlowReceiver,
    /// PCIe link below capability or PCIe errors.
    PcieDegraded,
    /// A collective's bus bandwidth (nccl-tests) below what the NICs allow.
    SlowCollective,
    /// Counters are since-boot totals.
    SinceBoot,
    /// Something about the snapshots themselves (order, resets).
    CounterNote,
    /// ECN/CNP balance summary.
    EcnBalance,
    /// Summary of a healthy capture.
    Healthy,
    /// GID index or type problems: the index in use is RoCE v1,
    /// link-local or empty, no IPv4-mapped RoCE v2 GID, the same address
    /// at several v2 indices, or a container's table that does not start
    /// at index 0.
    GidMisconfigured,
    /// The NIC driver or its firmware failed: probe or load failure,
    /// firmware health failure, firmware too old (kernel log).
    DriverFailure,
    /// Drops on a lossless priority at a port that paused: PFC headroom
    /// too small for the cable, the speed and the MTU.
    HeadroomShort,
    /// A switch's buffer too small for its thresholds: it reaches XOFF
    /// before ECN's Kmin (early PAUSE), or drops.
    BufferTooSmall,
    /// A link that went down: traffic on it lost until routes moved.
    LinkDown,
    /// A switch queue congested by fan-in: the switch sends PAUSE
    /// upstream; not a host problem.
    SwitchCongestion,
    /// ECN thresholds so low that a switch marks while its queue is a few
    /// frames deep: DCQCN throttles the senders and links run underused.
    EcnTooEarly,
    /// Switches that pick a next hop per frame (spraying, adaptive
    /// routing) reorder a queue pair's frames, which go-back-N NICs
    /// count as out of sequence and resend.
    Reordering,
    /// InfiniBand: ports waiting for flow-control credits
    /// (`PortXmitWait` climbing), IB's "pause frames climbing".
    CreditWait,
}

impl Symptom {
    /// Playbook number (1-12) for the playbook's symptoms.
    pub fn number(self) -> Option<u8> {
        Some(match self {
            Symptom::RxPause => 1,
            Symptom::TxPause => 2,
            Symptom::PfcStorm => 3,
            Symptom::EcnNotMarking => 4,
            Symptom::CnpNotHandled => 5,
            Symptom::PacketLoss => 6,
            Symptom::AckTimeout => 7,
            Symptom::LinkDegraded => 8,
            Symptom::MtuMismatch => 9,
            Symptom::LossyPriority => 10,
            Symptom::GdrNotUsed => 11,
            Symptom::Corruption => 12,
            // The doctor's causes behind a playbook symptom: a switch
            // queue sending PAUSE (#2), drops on a lossless priority
            // (#6), a link that went down (#8).
            Symptom::SwitchCongestion => 2,
            // The peer holds our transmitter, by credits instead of PAUSE.
            Symptom::CreditWait => 1,
            Symptom::HeadroomShort => 6,
            Symptom::LinkDown => 8,
            _ => return None,
        })
    }

    /// Stable identifier (as in `--json`).
    pub fn id(self) -> &'static str {
        match self {
            Symptom::RxPause => "rx-pause",
            Symptom::TxPause => "tx-pause",
            Symptom::PfcDeadlock => "pfc-deadlock",
            Symptom::PfcStorm => "pfc-storm",
            Symptom::EcnNotMarking => "ecn-not-marking",
            Symptom::CnpNotHandled => "cnp-not-handled",
            Symptom::PacketLoss => "packet-loss",
            Symptom::AckTimeout => "ack-timeout",
            Symptom::LinkDegraded => "link-degraded",
            Symptom::MtuMismatch => "mtu-mismatch",
            Symptom::LossyPriority => "lossy-priority",
            Symptom::GdrNotUsed => "gdr-not-used",
            Symptom::Corruption => "corruption",
            Symptom::HostOutOfBuffer => "host-out-of-buffer",
            Symptom::CompletionError => "completion-error",
            Symptom::SocketFallback => "socket-fallback",
            Symptom::SlowPerftest => "slow-perftest",
            Symptom::SlowReceiver => "slow-receiver",
            Symptom::PcieDegraded => "pcie-degraded",
            Symptom::SlowCollective => "slow-collective",
            Symptom::SinceBoot => "since-boot",
            Symptom::CounterNote => "counter-note",
            Symptom::EcnBalance => "ecn-balance",
            Symptom::Healthy => "healthy",
            Symptom::GidMisconfigured => "gid-misconfigured",
            Symptom::DriverFailure => "driver-failure",
            Symptom::HeadroomShort => "headroom-short",
            Symptom::BufferTooSmall => "buffer-too-small",
            Symptom::LinkDown => "link-down",
            Symptom::SwitchCongestion => "switch-congestion",
            Symptom::EcnTooEarly => "ecn-too-early",
            Symptom::Reordering => "reordering",
            Symptom::CreditWait => "ib-credit-wait",
        }
    }

    /// Triage order within one severity (the playbook's quick order).
    fn triage(self) -> u8 {
        match self {
            // A deadlock never clears by itself: it comes before all.
            Symptom::PfcDeadlock => 0,
            Symptom::LossyPriority => 1,
            Symptom::PfcStorm => 2,
            Symptom::PacketLoss
            | Symptom::AckTimeout
            | Symptom::Corruption
            | Symptom::CompletionError => 3,
            Symptom::RxPause | Symptom::TxPause | Symptom::CreditWait => 4,
            Symptom::EcnNotMarking | Symptom::CnpNotHandled => 5,
            Symptom::LinkDegraded
            | Symptom::MtuMismatch
            | Symptom::SlowPerftest
            | Symptom::PcieDegraded
            | Symptom::SlowCollective => 6,
            Symptom::GdrNotUsed | Symptom::SocketFallback => 7,
            Symptom::HostOutOfBuffer | Symptom::SlowReceiver => 8,
            Symptom::EcnBalance | Symptom::SinceBoot | Symptom::CounterNote | Symptom::Healthy => 9,
            // A wrong GID explains the timeouts it causes: rank it with
            // the other misconfigurations.
            Symptom::GidMisconfigured => 1,
            // A failed device explains everything above it.
            Symptom::DriverFailure => 3,
            // A buffer too small for its thresholds explains the pause
            // and the missing marks: a misconfiguration.
            Symptom::BufferTooSmall => 1,
            // Loss causes.
            Symptom::HeadroomShort | Symptom::LinkDown => 3,
            Symptom::SwitchCongestion => 4,
            // A misconfigured switch explains the throttled senders.
            Symptom::EcnTooEarly => 1,
            // The fabric's setting explains the sequence errors.
            Symptom::Reordering => 3,
        }
    }
}

/// One diagnosis.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// How bad.
    pub severity: Severity,
    /// Which symptom.
    pub symptom: Symptom,
    /// Stable id, e.g. `rx-pause`.
    pub id: &'static str,
    /// Playbook number 1-12 (absent for the doctor's extra findings).
    pub playbook: Option<u8>,
    /// Where: a source and priority, a device, a file; for a cause seen
    /// on several ports, its origin.
    pub subject: String,
    /// The run variant (`counters/<variant>/`, a `results.json` variant)
    /// the finding belongs to; absent for real captures.
    pub scope: Option<String>,
    /// The node (host or switch) where the cause sits, when known.
    pub origin: Option<String>,
    /// Every port, host or file this cause shows on (the subject first).
    pub affects: Vec<String>,
    /// One-line summary.
    pub title: String,
    /// What the counters show, with numbers.
    pub evidence: Vec<String>,
    /// What the training job feels.
    pub impact: String,
    /// What to check first.
    pub check_first: String,
    /// Why (how the counters lead to the conclusion).
    pub why: String,
}

impl Finding {
    /// Triage order within one severity: the symptom's
    /// ([`Symptom::triage`]), except that a misconfigured element named as
    /// the origin (ECN off at one switch) ranks with the other
    /// misconfigurations, before the pause and loss it causes.
    pub(super) fn triage(&self) -> u8 {
        match self.symptom {
            Symptom::EcnNotMarking if self.origin.is_some() => Symptom::LossyPriority.triage(),
            // A host named as the origin of the PAUSE it sends is a
            // cause, ranked with the pause it explains.
            Symptom::SlowReceiver if self.origin.is_some() => Symptom::TxPause.triage(),
            s => s.triage(),
        }
    }

    /// A finding of `symptom` about `subject`, its texts still empty.
    pub(super) fn new(severity: Severity, symptom: Symptom, subject: impl Into<String>) -> Finding {
        Finding {
            severity,
            symptom,
            id: symptom.id(),
            playbook: symptom.number(),
            subject: subject.into(),
            scope: None,
            origin: None,
            affects: Vec::new(),
            title: String::new(),
            evidence: Vec::new(),
            impact: String::new(),
            check_first: String::new(),
            why: String::new(),
        }
    }
}
