//! One side of a test and its resources ([`Side`]): the device, PD, one
//! region holding every QP's ring of slots and the credit area, the CQ,
//! the QPs (connected as perftest connects them) and, for UD, the address
//! handles; the peer's endpoints and ring; and the helpers the test loops
//! share (slot addresses, receive posts, completion errors, the
//! `--verify` tally).
//!
//! Contract: [`Side::setup`] exchanges endpoints over the link and leaves
//! every QP in RTS; the slot rings never exceed [`MAX_RING_BYTES`] per
//! side.

use std::time::Instant;

use super::attrs::{address_vector, connect_attrs, QKEY};
use super::error::{PerftestError, Result};
use super::link::Link;
use super::oob::{Msg, PeerInfo};
use super::pattern::{pattern_word, write_pattern};
use crate::perftest::report;
use crate::perftest::{Config, Verb};
use crate::verbs::{
    AccessFlags, AddressHandle, CompletionQueue, Context, MemoryRegion, Mtu, ProtectionDomain,
    QpAttr, QpState, QpType, QueuePair, RecvWr, Sge, UdDest, WorkCompletion,
};
use roce::wire::{Qpn, Rkey};

/// The GRH area a UD receive buffer starts with.
pub(super) const GRH: usize = 40;
/// Most memory a side registers for verify slot rings.
const MAX_RING_BYTES: u64 = 64 << 20;

/// One side of the test: its resources and the peer's.
pub(super) struct Side {
    pub(super) cfg: Config,
    pub(super) server: bool,
    pub(super) _ctx: Context,
    pub(super) _pd: ProtectionDomain,
    pub(super) cq: CompletionQueue,
    pub(super) mr: MemoryRegion,
    pub(super) qps: Vec<QueuePair>,
    pub(super) ahs: Vec<AddressHandle>,
    pub(super) local: PeerInfo,
    pub(super) remote: PeerInfo,
    pub(super) mtu: u32,
    pub(super) device: String,
    /// `--verify`: messages and bytes checked so far (one tally however
    /// many places check).
    pub(super) verified: std::cell::Cell<(u64, u64)>,
    /// The device's counters when the run started (before its QPs), and
    /// when: the end-of-run block is the difference.
    pub(super) counters_at_start: crate::verbs::Result<Vec<(String, u64)>>,
    pub(super) started: Instant,
    /// The last `--out_json` report written, to which the end of the run
    /// adds its counters.
    pub(super) json_written: std::cell::RefCell<Option<String>>,
}

fn psn_for(seed: u64, qpn: u32, server: bool) -> u32 {
    (pattern_word(seed ^ u64::from(server), u64::from(qpn)) & 0xFF_FFFF) as u32
}

impl Side {
    pub(super) fn setup(ctx: Context, cfg: &Config, server: bool, oob: &mut Link) -> Result<Side> {
        let counters_at_start = ctx.counters();
        let started = Instant::now();
        let device = ctx.query_device()?.name;
        let port = ctx.query_port(1)?;
        let pd = ctx.alloc_pd()?;
        let max_size = *cfg.sizes().iter().max().unwrap_or(&65536);
        let qps_n = u64::from(cfg.qps);
        let tx = u64::from(cfg.tx_depth());
        let rx = u64::from(cfg.rx_depth);
        let ud = cfg.connection == QpType::Ud;
        let slot_size = match oob {
            // A perftest peer cycles through max(size, cycle buffer) bytes
            // from each QP's address, in cache-line steps.
            Link::Perftest(p) => {
                let span = max_size.max(u64::from(p.cycle_buffer));
                span.div_ceil(u64::from(p.cache_line)) * u64::from(p.cache_line)
            }
            Link::Rocelab(_) if ud => max_size + GRH as u64,
            Link::Rocelab(_) => max_size.max(8),
        };
        // Slots per QP: enough for the queue depths in verify mode (a ring),
        // one (or two for ping-pong) otherwise, as perftest uses.
        let want_slots = if cfg.verify {
            match (cfg.test.verb(), server) {
                (Verb::Send, true) => rx,
                (Verb::Send, false) => tx,
                (Verb::Write, true) if cfg.test.is_bw() => (2 * tx).max(rx),
                (Verb::Write, false) if cfg.test.is_bw() => tx,
                (Verb::Read, true) => 2 * tx,
                (Verb::Read, false) => tx,
                (Verb::Atomic, _) => tx.max(1),
                _ => 2,
            }
        } else {
            match (cfg.test.verb(), server, cfg.test.is_bw()) {
                (Verb::Send, true, true) => rx.min(64),
                (Verb::Atomic, _, _) => tx.max(1),
                (_, _, false) => 2,
                _ => 1,
            }
        };
        let max_slots = (MAX_RING_BYTES / (slot_size * qps_n)).max(2);
        let slots = want_slots.clamp(1, max_slots);
        let credit_offset = slots * slot_size * qps_n;
        let mr_len = credit_offset + 64 * qps_n;
        let access = AccessFlags::LOCAL_WRITE
            | AccessFlags::REMOTE_WRITE
            | AccessFlags::REMOTE_READ
            | AccessFlags::REMOTE_ATOMIC;
        let mr = pd.alloc_mr(mr_len as usize, access)?;
        if let Some(why) = mr.pin_error() {
            eprintln!(" Note: memory not pinned: {why}");
        }
        // The read responder's slots carry their pattern from the start.
        if server && cfg.test.verb() == Verb::Read {
            for q in 0..qps_n {
                for s in 0..slots {
                    let off = ((q * slots + s) * slot_size) as usize;
                    write_pattern(&mr, off, max_size as usize, s)?;
                }
            }
        }
        let cqe = (tx + rx + 16) as u32 * cfg.qps;
        let cq = ctx.create_cq(cqe)?;
        let inline = cfg.inline_size();
        let mut qps = Vec::new();
        for _ in 0..cfg.qps {
            qps.push(
                pd.qp_builder(cfg.connection)
                    .cq(&cq)
                    .max_send_wr(cfg.tx_depth().max(16))
                    .max_recv_wr(cfg.rx_depth.max(16))
                    .max_inline_data(inline.max(64))
                    .build()?,
            );
        }
        let mtu_local = match oob {
            Link::Perftest(p) => p.mtu.bytes(),
            Link::Rocelab(_) => cfg.mtu.unwrap_or(port.active_mtu.bytes()),
        };
        let mut endpoints = Vec::new();
        for qp in &qps {
            let psn = psn_for(cfg.faults.seed, qp.qpn().value(), server);
            endpoints.push(qp.endpoint(psn, cfg.gid_index, Some(&mr))?);
        }
        let local = PeerInfo {
            endpoints,
            slots,
            slot_size,
            credit_offset,
            mtu: mtu_local,
            device: device.clone(),
            per_qp_buffers: false,
        };
        let remote = match oob {
            Link::Rocelab(o) => {
                o.send(&Msg::Peer(local.clone()))?;
                let remote = match o.recv::<Msg>()? {
                    Msg::Peer(p) => p,
                    Msg::Error(e) => return Err(PerftestError::Oob(format!("peer failed: {e}"))),
                    other => {
                        return Err(PerftestError::Oob(format!(
                            "expected endpoints, the peer sent {}",
                            other.what()
                        )))
                    }
                };
                remote
                    .validate(qps.len(), max_size, ud)
                    .map_err(PerftestError::Oob)?;
                remote
            }
            Link::Perftest(p) => p.exchange_keys(&local, &mr, max_size)?,
        };
        // perftest >= 5.1: both sides use the smaller MTU.
        let mtu = mtu_local.min(remote.mtu).min(4096);
        let ib_mtu = Mtu::from_bytes(mtu).unwrap_or(Mtu::Mtu1024);
        let mut ahs = Vec::new();
        for (i, qp) in qps.iter().enumerate() {
            let lep = &local.endpoints[i];
            let rep = &remote.endpoints[i];
            if ud {
                ahs.push(pd.create_ah(&address_vector(cfg, rep))?);
                qp.modify(
                    &QpAttr::new()
                        .with_state(QpState::Init)
                        .with_pkey_index(0)
                        .with_port(1)
                        .with_qkey(QKEY),
                )?;
                qp.modify(&QpAttr::new().with_state(QpState::Rtr))?;
                qp.modify(&QpAttr::new().with_state(QpState::Rts).with_sq_psn(lep.psn))?;
            } else {
                let (init, rtr, rts) = connect_attrs(cfg, lep.psn, rep, ib_mtu, access);
                for a in [init, rtr, rts] {
                    qp.modify(&a).map_err(|e| {
                        PerftestError::Config(format!("Failed to modify QP to RTR/RTS: {e}"))
                    })?;
                }
            }
        }
        match oob {
            Link::Rocelab(o) => o.barrier("connected")?,
            // perftest: a handshake per QP after its move to RTR/RTS, and
            // one more.
            Link::Perftest(p) => {
                for _ in 0..=qps.len() {
                    p.hand_shake()?;
                }
            }
        }
        Ok(Side {
            cfg: cfg.clone(),
            server,
            _ctx: ctx,
            _pd: pd,
            cq,
            mr,
            qps,
            ahs,
            local,
            remote,
            mtu,
            device,
            verified: std::cell::Cell::new((0, 0)),
            counters_at_start,
            started,
            json_written: std::cell::RefCell::new(None),
        })
    }

    /// Count one message of `bytes` bytes as checked by `--verify`.
    pub(super) fn tally(&self, bytes: u64) {
        let (m, b) = self.verified.get();
        self.verified.set((m + 1, b + bytes));
    }

    /// perftest forces CQ moderation 1 above 8 KiB messages (single size)
    /// unless `-Q` or `-l` was given.
    pub(super) fn cq_mod(&self, size: u64) -> u32 {
        let m = if size > 8192
            && !self.cfg.all
            && self.cfg.connection != QpType::Ud
            && !self.cfg.cq_mod_set
            && self.cfg.post_list == 1
        {
            1
        } else {
            self.cfg.base_cq_mod()
        };
        m.min(self.cfg.tx_depth()).max(1)
    }

    pub(super) fn local_slot(&self, qp: usize, slot: u64) -> (u64, usize) {
        let a = self.local.slot_addr(self.mr.addr(), qp, slot);
        (a, (a - self.mr.addr()) as usize)
    }

    pub(super) fn remote_slot(&self, qp: usize, slot: u64) -> u64 {
        let m = self.remote.endpoints[qp].mr.expect("peer offers a region");
        self.remote.slot_addr(m.addr, qp, slot)
    }

    pub(super) fn remote_rkey(&self, qp: usize) -> Rkey {
        Rkey::new(self.remote.endpoints[qp].mr.map_or(0, |m| m.rkey))
    }

    pub(super) fn completion_error(
        &self,
        wc: &WorkCompletion,
        scnt: u64,
        ccnt: u64,
    ) -> PerftestError {
        let mut s = report::completion_error(
            self.server,
            wc.status.as_str(),
            wc.status.value(),
            wc.wr_id,
            wc.vendor_err,
        );
        s.push_str(&format!("\n scnt={scnt}, ccnt={ccnt}"));
        PerftestError::Completion(s)
    }

    pub(super) fn ud_dest(&self, qp: usize) -> Option<UdDest> {
        self.ahs.get(qp).map(|ah| UdDest {
            ah: ah.handle(),
            remote_qpn: Qpn::new(self.remote.endpoints[qp].qpn),
            remote_qkey: QKEY,
        })
    }

    pub(super) fn post_recv_slot(&self, qp: usize, slot: u64, len: u64) -> Result<()> {
        let (addr, _) = self.local_slot(qp, slot);
        let len = if self.cfg.connection == QpType::Ud {
            len + GRH as u64
        } else {
            len
        };
        let sge = [Sge {
            addr,
            length: len as u32,
            lkey: self.mr.lkey(),
        }];
        let wr = RecvWr {
            wr_id: ((qp as u64) << 32) | (slot & 0xFFFF_FFFF),
            sg_list: if len == 0 { &[] } else { &sge },
        };
        // SAFETY: the SGE lies in our registered region, which outlives the
        // QP; the slot is not touched until its completion is polled.
        unsafe { self.qps[qp].post_recv(&[wr]) }.map_err(|e| PerftestError::Verbs(e.error))
    }
}
