//! The peer's exchange, whichever program the peer is ([`Link`]):
//! rocelab's JSON lines ([`super::oob::Oob`]) or perftest's own records
//! ([`PerftestPeer`]: key records per QP, handshakes), with what the two
//! sides agreed on.
//!
//! Contract: a step that only rocelab's exchange can carry fails with a
//! message naming it when the peer is perftest; a barrier is rocelab's
//! tagged sync or perftest's handshake.

use serde::de::DeserializeOwned;

use super::error::{PerftestError, Result};
use super::oob::{Msg, Oob, PeerInfo};
use roce::wire::ROCE_UDP_PORT;

use crate::perftest::exchange::{KeyRecord, PerftestLink};
use crate::verbs::{Endpoint, MemoryRegion, Mtu};

/// The peer's exchange: rocelab's (JSON lines) or perftest's records.
pub(super) enum Link {
    /// rocelab perftest on the other side.
    Rocelab(Oob),
    /// perftest's own program on the other side.
    Perftest(Box<PerftestPeer>),
}

/// A perftest peer: the connection and what was agreed on it.
pub(super) struct PerftestPeer {
    pub(super) link: PerftestLink,
    /// Our key records, one per QP (resent at every handshake).
    pub(super) mine: Vec<KeyRecord>,
    /// The peer's key records.
    pub(super) theirs: Vec<KeyRecord>,
    /// The larger cycle buffer of the two sides (bytes): the span of our
    /// buffer a perftest writer or reader cycles through.
    pub(super) cycle_buffer: u32,
    /// The larger cache line size (bytes).
    pub(super) cache_line: u32,
    /// The smaller MTU of the two sides.
    pub(super) mtu: Mtu,
    /// Our outstanding READs and atomics (`-o`), as our key records say.
    pub(super) outs: u8,
}

impl PerftestPeer {
    /// Exchange key records, one per QP, and turn the peer's into its
    /// endpoints: each QP's buffer is the peer's address for that QP, one
    /// slot of the largest message.
    pub(super) fn exchange_keys(
        &mut self,
        local: &PeerInfo,
        mr: &MemoryRegion,
        max_size: u64,
    ) -> Result<PeerInfo> {
        let mut endpoints = Vec::new();
        for (q, ep) in local.endpoints.iter().enumerate() {
            if ep.udp_port != ROCE_UDP_PORT {
                return Err(PerftestError::Config(format!(
                    "this side's device listens on UDP port {}; a perftest peer sends RoCEv2 to port {} only (use --bind to give this side its own address)",
                    ep.udp_port,
                    ROCE_UDP_PORT
                )));
            }
            let mine = KeyRecord {
                lid: ep.lid,
                out_reads: u16::from(self.outs),
                qpn: ep.qpn,
                psn: ep.psn,
                rkey: mr.rkey().value(),
                vaddr: local.slot_addr(mr.addr(), q, 0),
                gid: ep.gid,
                srqn: 0,
            };
            let theirs = self.link.keys(&mine).map_err(PerftestError::Oob)?;
            if self.theirs.iter().any(|t| t.qpn == theirs.qpn) {
                // perftest's handshake repeats its first record: the peer
                // has no more QPs to describe.
                return Err(PerftestError::Config(format!(
                    " Number of QPs mismatch: this side runs -q {}, the peer (perftest) runs -q {q}: its handshake came where the key record of this side's QP {} was due; give both sides the same -q",
                    local.endpoints.len(),
                    q + 1
                )));
            }
            theirs.check_span(max_size).map_err(PerftestError::Oob)?;
            self.mine.push(mine);
            self.theirs.push(theirs);
            endpoints.push(Endpoint {
                lid: theirs.lid,
                qpn: theirs.qpn,
                psn: theirs.psn,
                gid: theirs.gid,
                udp_port: ROCE_UDP_PORT,
                mtu: self.mtu,
                mr: Some(crate::verbs::RemoteMr {
                    addr: theirs.vaddr,
                    rkey: theirs.rkey,
                    len: max_size,
                }),
            });
        }
        Ok(PeerInfo {
            endpoints,
            slots: 1,
            slot_size: max_size,
            credit_offset: max_size,
            mtu: self.mtu.bytes(),
            device: String::new(),
            per_qp_buffers: true,
        })
    }

    pub(super) fn hand_shake(&mut self) -> Result<()> {
        let (m, t) = (self.mine[0], self.theirs[0]);
        let qps = self.mine.len();
        self.link.hand_shake(&m, &t).map_err(|e| {
            if e.contains("key record of another QP") {
                PerftestError::Config(format!(
                    " Number of QPs mismatch: this side runs -q {qps}, the peer (perftest) runs more: {e}; give both sides the same -q"
                ))
            } else {
                PerftestError::Oob(e)
            }
        })
    }
}

impl Link {
    fn rocelab(&mut self, what: &str) -> Result<&mut Oob> {
        match self {
            Link::Rocelab(o) => Ok(o),
            Link::Perftest(_) => Err(PerftestError::Oob(format!(
                "{what} needs rocelab perftest on both sides (the peer is perftest)"
            ))),
        }
    }

    pub(super) fn send(&mut self, m: &Msg) -> Result<()> {
        self.rocelab("this step")?.send(m)
    }

    pub(super) fn recv<T: DeserializeOwned>(&mut self) -> Result<T> {
        self.rocelab("this step")?.recv()
    }

    pub(super) fn try_recv<T: DeserializeOwned>(&mut self) -> Result<Option<T>> {
        self.rocelab("this step")?.try_recv()
    }

    /// A synchronisation point: rocelab's tagged barrier, or perftest's
    /// handshake.
    pub(super) fn barrier(&mut self, tag: &str) -> Result<()> {
        match self {
            Link::Rocelab(o) => o.barrier(tag),
            Link::Perftest(p) => p.hand_shake(),
        }
    }
}
