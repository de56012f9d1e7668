//! What happens at an instant ([`Ev`], the event loop's one event type)
//! and the fabric's "no such index" marker ([`NONE`]). Plain values, below
//! every part of the fabric.

/// Marker for "no such index".
pub(crate) const NONE: u32 = u32::MAX;

/// What happens at an instant.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Ev {
    /// A port finished serialising its frame.
    TxDone(u32),
    /// The oldest frame on the wire leaving this port reaches the peer.
    Arrive(u32),
    /// A PFC frame takes effect at this (transmitting) port.
    Pfc { port: u32, prio: u8, quanta: u16 },
    /// A pause may have expired: try to transmit.
    Wake(u32),
    /// Repeat an XOFF still in force (generation-checked).
    Refresh { port: u32, prio: u8, gen: u32 },
    /// A flow posts its first work requests (at its start, or when the
    /// last flow it waits for completed).
    FlowStart(u32),
    /// A local copy (NVLink, PCIe) completes.
    LocalDone(u32),
    /// A queue pair's deadline.
    QpTimer(u32),
    /// A frame a queue pair holds has its payload in the NIC: the QP
    /// may send again (host model).
    HostReady(u32),
    /// The application of a flow with a posting loop sees a completion
    /// or a landed message and may post.
    FlowPost(u32),
    /// A NIC finished draining one received frame into the host.
    Drain(u32),
    /// Sample the recorded queues.
    Sample,
    /// Sample every flow's delivery rate (`record.flow_rates`).
    FlowRates,
    /// A PFC watchdog poll (all switches).
    WdPoll,
    /// Look for PFC deadlocks.
    DeadlockCheck,
    /// A NIC stall watermark of an XOFF episode (generation-checked).
    NicStall {
        port: u32,
        prio: u8,
        gen: u32,
        critical: bool,
    },
    /// A fault or timed override changes the state of an element (index
    /// into the world's actions).
    Action(u32),
    /// Fluid mode: a flow's last byte lands at its destination.
    FluidLand(u32),
    /// Fluid mode: a flow's requester sees its completion.
    FluidDone(u32),
    /// InfiniBand: this (receiving) port sends a flow-control packet.
    FcpSend(u32),
    /// InfiniBand: the oldest flow-control packet towards this
    /// (transmitting) port arrives.
    FcpArrive(u32),
}
