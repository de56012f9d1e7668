//! The world's side of InfiniBand's credits ([`super::credits`]): which
//! lanes of a port lack them, blocks taken and freed as frames arrive and
//! leave, and the flow-control packets that carry freed blocks back.

use roce::time::Instant;

use super::credits::blocks;
use super::event::Ev;
use super::world::World;

impl World<'_> {
    /// Lanes of port `p` whose head frame does not fit the peer's
    /// credits (0 on an Ethernet link).
    pub(crate) fn ib_starved(&self, p: usize) -> u8 {
        let port = &self.ports[p];
        let Some(ib) = port.ib.as_deref() else {
            return 0;
        };
        let mut m = 0u8;
        for (lane, q) in port.queues.iter().enumerate() {
            if let Some(h) = q.front() {
                if !ib.fits(lane, blocks(self.pkts.get(h).wire)) {
                    m |= 1 << lane;
                }
            }
        }
        m
    }

    /// Lanes of port `p` with no credit at all: a NIC pulls no frame for
    /// them (0 on an Ethernet link).
    pub(crate) fn ib_empty(&self, p: usize) -> u8 {
        let Some(ib) = self.ports[p].ib.as_deref() else {
            return 0;
        };
        (0..8).fold(
            0u8,
            |m, l| {
                if ib.available(l) == 0 {
                    m | 1 << l
                } else {
                    m
                }
            },
        )
    }

    /// VL arbitration at port `pi` among the `eligible` lanes, when the
    /// fabric configures it (`None`: the scheduler picks). Kept out of
    /// line so that an Ethernet port's pick stays small.
    #[inline(never)]
    pub(crate) fn ib_pick(&mut self, pi: usize, eligible: u8) -> Option<usize> {
        let arb = self.cfg.fabric.infiniband.arbitration.as_ref()?;
        let pkts = &self.pkts;
        let super::port::Port { queues, ib, .. } = &mut self.ports[pi];
        let ib = ib.as_deref_mut()?;
        let size = |l: usize| {
            queues[l]
                .front()
                .map_or(4096, |h| u64::from(pkts.get(h).wire))
        };
        super::credits::vl_pick(arb, ib, eligible, size)
    }

    /// Port `p` has frames only on lanes short of credits: its wait
    /// (`PortXmitWait`) runs from `now`.
    pub(crate) fn ib_wait(&mut self, p: usize, now: Instant) {
        let Some(ib) = self.ports[p].ib.as_deref_mut() else {
            return;
        };
        let first = ib.wait_since.is_none();
        ib.wait(now);
        // A switch port starting to wait may close a credit loop.
        let node = self.ports[p].node as usize;
        if first && self.deadlock.is_some() && self.switch_of_node[node] != super::event::NONE {
            self.deadlock_arm(now);
        }
    }

    /// Port `p` starts a frame of `wire` bytes on `lane`: its wait ends
    /// and the frame's blocks are spent.
    pub(crate) fn ib_sent(&mut self, p: usize, lane: u8, wire: u32, now: Instant) {
        if let Some(ib) = self.ports[p].ib.as_deref_mut() {
            ib.end_wait(now);
            ib.sent(usize::from(lane), blocks(wire));
        }
    }

    /// A frame of `wire` bytes on `lane` arrived at port `rx` and sits in
    /// its buffer.
    pub(crate) fn ib_received(&mut self, rx: u32, lane: u8, wire: u32) {
        if let Some(ib) = self.ports[rx as usize].ib.as_deref_mut() {
            ib.received(usize::from(lane), blocks(wire));
        }
    }

    /// Port `rx`'s buffer let go of a frame of `wire` bytes on `lane`: an
    /// FCP will say so.
    pub(crate) fn ib_freed(&mut self, rx: u32, lane: u8, wire: u32, now: Instant) {
        let Some(period) = self.fc_period else {
            return;
        };
        let Some(ib) = self.ports[rx as usize].ib.as_deref_mut() else {
            return;
        };
        ib.freed(usize::from(lane), blocks(wire));
        if !ib.fcp_pending {
            ib.fcp_pending = true;
            let at = ib.next_fcp(now, period);
            self.q.schedule(at, Ev::FcpSend(rx));
        }
    }

    /// A frame of `wire` bytes on `lane` left port `p` and was lost on
    /// the wire: the receiver's block count catches up with the sender's,
    /// as the FCTBS its FCPs carry resynchronises ABR (IBA 7.9.4), so the
    /// lost blocks come back as credits.
    pub(crate) fn ib_lost(&mut self, p: u32, lane: u8, wire: u32, now: Instant) {
        let rx = self.ports[p as usize].peer;
        if let Some(ib) = self.ports[rx as usize].ib.as_deref_mut() {
            let l = usize::from(lane);
            ib.received(l, blocks(wire));
        }
        self.ib_freed(rx, lane, wire, now);
    }

    /// Port `rx` sends its FCP: the credit limits reach its peer's
    /// transmitter one propagation delay later.
    pub(crate) fn fcp_send(&mut self, rx: u32, now: Instant) {
        let port = &mut self.ports[rx as usize];
        let (peer, delay) = (port.peer, port.delay);
        let Some(ib) = port.ib.as_deref_mut() else {
            return;
        };
        ib.fcp_pending = false;
        ib.fcp_last = Some(now);
        ib.fcps += 1;
        let limits = ib.credit_limits();
        let at = now + delay;
        if let Some(t) = self.ports[peer as usize].ib.as_deref_mut() {
            t.incoming.push_back((at, limits));
            self.q.schedule(at, Ev::FcpArrive(peer));
        }
    }

    /// The oldest FCP towards port `p` arrives: new credit limits, and the
    /// port may send again.
    pub(crate) fn fcp_arrive(&mut self, p: u32, now: Instant) {
        let Some(ib) = self.ports[p as usize].ib.as_deref_mut() else {
            return;
        };
        if let Some((_, limits)) = ib.incoming.pop_front() {
            ib.fccl = limits;
        }
        self.kick(p, now);
    }
}
