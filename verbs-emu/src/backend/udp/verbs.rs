//! The verbs of a UDP device: [`Backend`] for [`UdpBackend`], each verb
//! under the device lock, over the engines, the region table and the CQs
//! of [`State`].
//!
//! Contract: as [`Backend`]'s. Posts validate each work request, hand it to
//! the QP's engine and send what it produces at once; polls and waits make
//! progress themselves when the CQ is empty, so that busy polling needs no
//! other thread.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::config::{BackgroundMode, PACING_CATCH_UP, POST_BATCH, POST_HOLD};
use super::device::UdpBackend;
use super::dm::{DmError, DM_SIZE};
use super::netdev::node_guid_for;
use super::odp::Touch;
use super::progress::SPIN_BELOW;
use super::state::{decode_addr, encode_addr, free_qpn, lock, os, Cq, QpEntry, State};
use super::work::post_error;
use crate::backend::counters::QpCounters;
use crate::backend::{
    AhHandle, AsyncEvent, Backend, BackendKind, CqHandle, DmHandle, MrChange, MrHandle, MrKeys,
    PdHandle, QpCreated, QpHandle,
};
use crate::backend::{MrAdvice, OdpCaps};
use crate::verbs::Sge;
use crate::verbs::{
    qp_state, AhAttr, DeviceAttr, Gid, Mtu, PortAttr, PostError, QpAttr, QpAttrMask, QpInitAttr,
    QpState, QpType, RecvWr, Result, SendFlags, SendOp, SendWr, VerbsError, WorkCompletion,
};
use roce::transport::{self as tp, AccessFlags, MemError, Qp, QpConfig};
use roce::wire::{Ecn, Lkey, Qpn, Rkey};

impl Backend for UdpBackend {
    /// The progress thread and the application threads that make progress
    /// (`poll_cq`, `wait_cq`, posts) touch region memory only while holding
    /// the state lock, so holding it here orders `f` with all of them.
    fn with_memory_quiesced(&self, f: &mut dyn FnMut()) {
        let _st = lock(&self.shared.state);
        f();
    }

    fn kind(&self) -> BackendKind {
        BackendKind::Udp
    }

    fn query_device(&self) -> Result<DeviceAttr> {
        Ok(DeviceAttr {
            name: self.shared.cfg.name.clone(),
            node_guid: node_guid_for(self.shared.local),
            fw_ver: concat!("rocelab-", env!("CARGO_PKG_VERSION")).into(),
            vendor_id: 0,
            max_mr_size: 1 << 40,
            max_qp_wr: 16384,
            max_cqe: 1 << 20,
            phys_port_cnt: 1,
        })
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port != 1 {
            return Err(VerbsError::invalid(
                "ibv_query_port",
                format!("port {port} does not exist (the device has port 1)"),
            ));
        }
        Ok(PortAttr {
            state: 4,
            max_mtu: Mtu::Mtu4096,
            active_mtu: self.shared.active_mtu,
            gid_tbl_len: 1,
            link_layer_ethernet: true,
            lid: 0,
        })
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        if port != 1 || index != 0 {
            return Err(VerbsError::invalid(
                "ibv_query_gid",
                format!("port {port} GID {index} does not exist (port 1 has GID 0)"),
            ));
        }
        Ok(Gid::from_ip((*self.shared.local.ip()).into()))
    }

    fn udp_port(&self) -> u16 {
        self.shared.local.port()
    }

    fn alloc_pd(&self) -> Result<PdHandle> {
        let mut st = lock(&self.shared.state);
        let h = Self::handle(&mut st);
        st.pds.insert(h, 0);
        Ok(PdHandle(h))
    }

    fn dealloc_pd(&self, pd: PdHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        match st.pds.get(&pd.0) {
            None => Err(VerbsError::UnknownHandle {
                verb: "ibv_dealloc_pd",
                object: "PD",
            }),
            Some(&n) if n > 0 => Err(VerbsError::Busy {
                verb: "ibv_dealloc_pd",
                object: "PD",
            }),
            Some(_) => {
                st.pds.remove(&pd.0);
                Ok(())
            }
        }
    }

    unsafe fn reg_mr(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MrKeys> {
        const VERB: &str = "ibv_reg_mr";
        let odp = access.contains(AccessFlags::ON_DEMAND);
        // The implicit ODP region: the whole address space, as rdma-core
        // asks for it (address 0, length SIZE_MAX).
        let implicit = odp && addr.is_null() && len == usize::MAX;
        if len == 0 || (addr.is_null() && !implicit) {
            return Err(VerbsError::invalid(VERB, "null address or length 0"));
        }
        // An on-demand region is never pinned (its pages need not even be
        // mapped yet: each access resolves them, see `odp`).
        let lock_rc = if odp {
            -1
        } else {
            // SAFETY: the caller promises [addr, addr + len) is valid memory.
            unsafe { libc::mlock(addr.cast(), len) }
        };
        let unpin = || {
            if lock_rc == 0 {
                // SAFETY: unlocking the range locked just above.
                unsafe { libc::munlock(addr.cast(), len) };
            }
        };
        let pin_error = (lock_rc != 0 && !odp).then(|| {
            format!(
                "mlock of {len} bytes failed ({}); raise RLIMIT_MEMLOCK (ulimit -l) to pin",
                io::Error::last_os_error()
            )
        });
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            unpin();
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        // The region table refuses what verbs refuses (REMOTE_WRITE or
        // REMOTE_ATOMIC without LOCAL_WRITE, ...).
        let key = match st.mem.register(addr, len as u64, access, pd.0) {
            Ok(key) => key,
            Err(e) => {
                unpin();
                return Err(VerbsError::invalid(VERB, e.to_string()));
            }
        };
        st.mem.set_locked(key, lock_rc == 0);
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        Ok(MrKeys {
            handle: MrHandle(u64::from(key)),
            lkey: Lkey::new(key),
            rkey: Rkey::new(key),
            pinned: lock_rc == 0,
            pin_error,
        })
    }

    /// Every operation reaches memory through the one region table, which
    /// resolves an on-demand region's pages at each access (`odp`), so
    /// ODP serves every operation of every transport the device carries;
    /// XRC it has not.
    fn odp_caps(&self) -> OdpCaps {
        let recv = OdpCaps::SEND | OdpCaps::RECV | OdpCaps::SRQ_RECV;
        OdpCaps {
            general_caps: OdpCaps::SUPPORT | OdpCaps::SUPPORT_IMPLICIT,
            rc: recv | OdpCaps::WRITE | OdpCaps::READ | OdpCaps::ATOMIC,
            uc: recv | OdpCaps::WRITE,
            ud: recv,
        }
    }

    /// The work is done before this returns, with or without `flush`;
    /// without it, as a NIC's queued prefetch, only bad keys are reported
    /// (`EINVAL`), a fault that cannot be served is not.
    fn advise_mr(&self, pd: PdHandle, advice: MrAdvice, flush: bool, sges: &[Sge]) -> Result<()> {
        const VERB: &str = "ibv_advise_mr";
        let errno = |e: i32| os(VERB, io::Error::from_raw_os_error(e));
        if sges.is_empty() {
            return Err(errno(libc::EINVAL));
        }
        let touch = match advice {
            MrAdvice::Prefetch => Some(Touch::Read),
            MrAdvice::PrefetchWrite => Some(Touch::Write),
            MrAdvice::PrefetchNoFault => None,
        };
        let st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        for s in sges {
            let r = st
                .mem
                .prefetch(s.lkey.value(), s.addr, u64::from(s.length), pd.0, touch);
            match r {
                Ok(()) => {}
                Err(libc::ENOENT) if !flush => return Err(errno(libc::EINVAL)),
                Err(_) if !flush => {}
                Err(e) => return Err(errno(e)),
            }
        }
        Ok(())
    }

    fn dereg_mr(&self, mr: MrHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        let pd = st.mem.deregister(mr.0 as u32).map_err(|e| match e {
            // Memory windows are bound to it: refused, as rxe refuses.
            MemError::WindowsBound(_) => VerbsError::Busy {
                verb: "ibv_dereg_mr",
                object: "MR",
            },
            _ => VerbsError::UnknownHandle {
                verb: "ibv_dereg_mr",
                object: "MR",
            },
        })?;
        st.dm.mr_gone(mr.0 as u32);
        if let Some(n) = st.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }

    fn alloc_mw(&self, pd: PdHandle, mw_type: u32) -> Result<u32> {
        const VERB: &str = "ibv_alloc_mw";
        let Some(t) = tp::MwType::from_raw(mw_type) else {
            return Err(VerbsError::invalid(
                VERB,
                format!("memory window type {mw_type} (types 1 and 2 exist)"),
            ));
        };
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        let key = st
            .mem
            .alloc_window(pd.0, t)
            .map_err(|e| VerbsError::invalid(VERB, e.to_string()))?;
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        Ok(key)
    }

    fn dealloc_mw(&self, rkey: u32) -> Result<()> {
        let mut st = lock(&self.shared.state);
        let pd = st
            .mem
            .dealloc_window(rkey)
            .map_err(|_| VerbsError::UnknownHandle {
                verb: "ibv_dealloc_mw",
                object: "MW",
            })?;
        if let Some(n) = st.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }

    fn dm_size(&self) -> u64 {
        DM_SIZE
    }

    fn alloc_dm(&self, len: u64, log_align: u32) -> Result<DmHandle> {
        let mut st = lock(&self.shared.state);
        st.dm
            .alloc(len, log_align)
            .map(DmHandle)
            .map_err(|e| dm_error("ibv_alloc_dm", e))
    }

    fn free_dm(&self, dm: DmHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        st.dm.free(dm.0).map_err(|e| dm_error("ibv_free_dm", e))
    }

    /// Under the device lock, as the progress thread's accesses to regions
    /// over the device memory are.
    fn memcpy_to_dm(&self, dm: DmHandle, offset: u64, data: &[u8]) -> Result<()> {
        let mut st = lock(&self.shared.state);
        st.dm
            .copy_in(dm.0, offset, data)
            .map_err(|e| dm_error("ibv_memcpy_to_dm", e))
    }

    fn memcpy_from_dm(&self, dm: DmHandle, offset: u64, out: &mut [u8]) -> Result<()> {
        let st = lock(&self.shared.state);
        st.dm
            .copy_out(dm.0, offset, out)
            .map_err(|e| dm_error("ibv_memcpy_from_dm", e))
    }

    /// The region is at address 0 and ZERO_BASED, so local SGEs and remote
    /// peers both name offsets into it (rdma-core hides the device
    /// memory's address: `ibv_mr.addr` is NULL).
    fn reg_dm_mr(
        &self,
        pd: PdHandle,
        dm: DmHandle,
        offset: u64,
        len: u64,
        access: AccessFlags,
    ) -> Result<MrKeys> {
        const VERB: &str = "ibv_reg_dm_mr";
        if !access.contains(AccessFlags::ZERO_BASED) {
            return Err(VerbsError::invalid(
                VERB,
                "device memory regions are zero-based: IBV_ACCESS_ZERO_BASED is required",
            ));
        }
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        let ptr = st
            .dm
            .range(dm.0, offset, len)
            .map_err(|e| dm_error(VERB, e))?;
        let key = st
            .mem
            .register_at(0, ptr, len, access, pd.0)
            .map_err(|e| VerbsError::invalid(VERB, e.to_string()))?;
        st.dm.add_mr(dm.0, key);
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        Ok(MrKeys {
            handle: MrHandle(u64::from(key)),
            lkey: Lkey::new(key),
            rkey: Rkey::new(key),
            // The device's own memory: nothing of the host to pin.
            pinned: true,
            pin_error: None,
        })
    }

    unsafe fn rereg_mr(&self, mr: MrHandle, change: MrChange) -> Result<()> {
        const VERB: &str = "ibv_rereg_mr";
        let mut locked = false;
        if let Some((addr, len)) = change.range {
            if len == 0 || addr.is_null() {
                return Err(VerbsError::invalid(VERB, "null address or length 0"));
            }
            // An on-demand region is never pinned (see reg_mr).
            let odp = change
                .access
                .is_some_and(|a| a.contains(AccessFlags::ON_DEMAND));
            // SAFETY: the caller promises [addr, addr + len) is valid
            // memory (reg_mr's contract).
            locked = !odp && unsafe { libc::mlock(addr.cast(), len) } == 0;
        }
        let unpin = || {
            if let (true, Some((addr, len))) = (locked, change.range) {
                // SAFETY: unlocking the range locked just above.
                unsafe { libc::munlock(addr.cast(), len) };
            }
        };
        let mut st = lock(&self.shared.state);
        if st.dm.owns_mr(mr.0 as u32) {
            // As the kernel's verbs: a region over device memory keeps
            // its translation, PD and rights.
            unpin();
            return Err(VerbsError::invalid(
                VERB,
                "a device memory region cannot be re-registered",
            ));
        }
        if let Some(pd) = change.pd {
            if !st.pds.contains_key(&pd.0) {
                unpin();
                return Err(VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "PD",
                });
            }
        }
        let range = change.range.map(|(a, l)| (a, l as u64, locked));
        let old_pd =
            match st
                .mem
                .reregister(mr.0 as u32, range, change.access, change.pd.map(|p| p.0))
            {
                Ok(pd) => pd,
                Err(MemError::BadKey(_)) => {
                    unpin();
                    return Err(VerbsError::UnknownHandle {
                        verb: VERB,
                        object: "MR",
                    });
                }
                Err(e) => {
                    unpin();
                    return Err(VerbsError::invalid(VERB, e.to_string()));
                }
            };
        if let Some(new_pd) = change.pd {
            if let Some(n) = st.pds.get_mut(&old_pd) {
                *n = n.saturating_sub(1);
            }
            if let Some(n) = st.pds.get_mut(&new_pd.0) {
                *n += 1;
            }
        }
        Ok(())
    }

    fn create_cq(&self, cqe: u32) -> Result<CqHandle> {
        if cqe == 0 || cqe > 1 << 20 {
            return Err(VerbsError::invalid(
                "ibv_create_cq",
                format!("{cqe} entries: expected 1..=1048576"),
            ));
        }
        let mut st = lock(&self.shared.state);
        let h = Self::handle(&mut st);
        st.cqs.insert(
            h,
            Cq {
                capacity: cqe as usize,
                ..Cq::default()
            },
        );
        Ok(CqHandle(h))
    }

    fn destroy_cq(&self, cq: CqHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        match st.cqs.get(&cq.0) {
            None => Err(VerbsError::UnknownHandle {
                verb: "ibv_destroy_cq",
                object: "CQ",
            }),
            Some(c) if c.users > 0 => Err(VerbsError::Busy {
                verb: "ibv_destroy_cq",
                object: "CQ",
            }),
            Some(_) => {
                st.cqs.remove(&cq.0);
                Ok(())
            }
        }
    }

    fn resize_cq(&self, cq: CqHandle, cqe: u32) -> Result<u32> {
        const VERB: &str = "ibv_resize_cq";
        let mut st = lock(&self.shared.state);
        let q = st.cqs.get_mut(&cq.0).ok_or(VerbsError::UnknownHandle {
            verb: VERB,
            object: "CQ",
        })?;
        let cqe = cqe.max(1);
        if (cqe as usize) < q.queue.len() {
            return Err(VerbsError::invalid(
                VERB,
                format!("{} completions are queued, more than {cqe}", q.queue.len()),
            ));
        }
        q.capacity = cqe as usize;
        Ok(cqe)
    }

    fn poll_cq(&self, cq: CqHandle, wc: &mut [WorkCompletion]) -> Result<usize> {
        self.touch();
        let mut st = lock(&self.shared.state);
        let take = |st: &mut State, wc: &mut [WorkCompletion]| -> Result<usize> {
            let q = st.cqs.get_mut(&cq.0).ok_or(VerbsError::UnknownHandle {
                verb: "ibv_poll_cq",
                object: "CQ",
            })?;
            if q.overrun {
                return Err(VerbsError::CqOverrun {
                    verb: "ibv_poll_cq",
                    capacity: q.capacity,
                });
            }
            let n = wc.len().min(q.queue.len());
            for (slot, c) in wc.iter_mut().zip(q.queue.drain(..n)) {
                *slot = c;
            }
            Ok(n)
        };
        let n = take(&mut st, wc)?;
        if n > 0 || wc.is_empty() {
            return Ok(n);
        }
        // What the received packets make the engines send waits so that
        // a post sends it with its request: in interrupt mode lone ACKs
        // are held for up to ACK_HOLD (the next call after that, or the
        // background thread once the application stops calling in, sends
        // them); otherwise everything waits for the next call.
        if self.shared.cfg.background == BackgroundMode::Interrupt {
            self.shared.progress_holding(&mut st);
        } else {
            self.shared.progress_with(&mut st, false);
        }
        take(&mut st, wc)
    }

    fn wait_cq(&self, cq: CqHandle, timeout: Duration) -> Result<bool> {
        struct Waiting<'a>(&'a AtomicU64);
        impl Drop for Waiting<'_> {
            fn drop(&mut self) {
                self.0.fetch_sub(1, Ordering::Relaxed);
            }
        }
        self.shared.app_waiting.fetch_add(1, Ordering::Relaxed);
        let _waiting = Waiting(&self.shared.app_waiting);
        let end = std::time::Instant::now() + timeout;
        loop {
            self.touch();
            let deadline = {
                let mut st = lock(&self.shared.state);
                let ready =
                    |st: &State| st.cqs.get(&cq.0).map(|q| !q.queue.is_empty() || q.overrun);
                match ready(&st) {
                    None => {
                        return Err(VerbsError::UnknownHandle {
                            verb: "ibv_get_cq_event",
                            object: "CQ",
                        })
                    }
                    Some(true) => return Ok(true),
                    Some(false) => {}
                }
                let d = self.shared.progress(&mut st);
                if ready(&st) == Some(true) {
                    return Ok(true);
                }
                d
            };
            let now = std::time::Instant::now();
            if now >= end {
                return Ok(false);
            }
            if self.shared.cfg.busy_poll {
                std::hint::spin_loop();
                continue;
            }
            let wait = self
                .shared
                .wait_for(deadline, (end - now).min(Duration::from_millis(1)));
            if wait < SPIN_BELOW && deadline.is_some() {
                // An engine timer (RNR wait, pacing) is due within the
                // kernel's timer slack: spin to it.
                std::hint::spin_loop();
                continue;
            }
            let _ = self.shared.socket.wait_readable(Some(wait));
        }
    }

    fn create_qp(&self, pd: PdHandle, init: &QpInitAttr) -> Result<QpCreated> {
        const VERB: &str = "ibv_create_qp";
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        for cq in [init.send_cq, init.recv_cq] {
            if !st.cqs.contains_key(&cq.0) {
                return Err(VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "CQ",
                });
            }
        }
        let cap = init.cap;
        if cap.max_send_wr == 0 || cap.max_send_wr > 16384 || cap.max_recv_wr > 16384 {
            return Err(VerbsError::invalid(
                VERB,
                format!(
                    "queue depths {}/{}: expected 1..=16384",
                    cap.max_send_wr, cap.max_recv_wr
                ),
            ));
        }
        if cap.max_send_sge as usize > tp::MAX_SGE || cap.max_recv_sge as usize > tp::MAX_SGE {
            return Err(VerbsError::invalid(
                VERB,
                format!("at most {} SGEs per work request", tp::MAX_SGE),
            ));
        }
        if cap.max_inline_data > 4096 {
            return Err(VerbsError::invalid(VERB, "max_inline_data above 4096"));
        }
        let State { next_qpn, qps, .. } = &mut *st;
        let qpn = free_qpn(next_qpn, |q| qps.contains_key(&q))
            .ok_or_else(|| os(VERB, io::Error::from_raw_os_error(libc::ENOMEM)))?;
        let mut cfg = QpConfig::new(Qpn::new(qpn));
        cfg.qp_type = init.qp_type;
        cfg.max_send_wr = cap.max_send_wr;
        cfg.max_recv_wr = cap.max_recv_wr.max(1);
        cfg.sq_sig_all = init.sq_sig_all;
        cfg.ecn = Ecn::Ect0;
        cfg.min_time_between_cnps = Some(
            init.min_time_between_cnps
                .unwrap_or(self.shared.cfg.min_time_between_cnps),
        );
        cfg.cc = init.cc.unwrap_or(self.shared.cfg.cc);
        cfg.pacing_burst = self.shared.cfg.pacing_burst;
        cfg.pacing_catch_up = PACING_CATCH_UP;
        cfg.pace_at_line_rate = self.shared.cfg.pace_at_line_rate;
        cfg.pkey_table = self.shared.cfg.pkey_table;
        cfg.port_mtu = self.shared.active_mtu;
        // A host socket absorbs more than a NIC's on-chip window: keep 4 MiB
        // (at 4 KiB MTU, half the default socket buffer) in flight, so that
        // large messages stream without waiting for ACK round trips. Every
        // ACK wakes the sender and costs it a receive, so within a long
        // message they are asked for every 128 packets (rxe: 64); the LAST
        // packet of each message asks for one as well.
        cfg.max_unacked_psns = 1024;
        // The window, which holds retries too, is what keeps the peer's
        // socket buffer from overflowing: a retry that burst past it lost
        // more than it resent (8 MiB write_bw: 32 M packets resent for
        // 10 M sent).
        cfg.ack_req_every = 128;
        let inline_len = inline_slot(&cap) * cap.max_send_wr as usize;
        let mut inline_buf = vec![0u8; inline_len].into_boxed_slice();
        let inline_key = st
            .mem
            .register(
                inline_buf.as_mut_ptr(),
                inline_len as u64,
                AccessFlags::LOCAL_WRITE,
                pd.0,
            )
            .map_err(|e| VerbsError::invalid(VERB, e.to_string()))?;
        let entry = QpEntry {
            engine: Qp::new(cfg),
            qp_type: init.qp_type,
            pd: pd.0,
            send_cq: init.send_cq.0,
            recv_cq: init.recv_cq.0,
            cap,
            inline_buf,
            inline_key,
            inline_next: 0,
            tclass_dscp: 0,
        };
        st.qps.insert(qpn, entry);
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        for cq in [init.send_cq, init.recv_cq] {
            if let Some(c) = st.cqs.get_mut(&cq.0) {
                c.users += 1;
            }
        }
        Ok(QpCreated {
            handle: QpHandle(u64::from(qpn)),
            qpn: Qpn::new(qpn),
            cap,
        })
    }

    fn modify_qp(&self, qp: QpHandle, attr: &QpAttr) -> Result<()> {
        const VERB: &str = "ibv_modify_qp";
        self.touch();
        let mut st = lock(&self.shared.state);
        let default_port = self.shared.local.port();
        let e = st
            .qps
            .get_mut(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: VERB,
                object: "QP",
            })?;
        let current = e.engine.state();
        let mut ea = qp_state::engine_attr(attr, current);
        ea.ah = e.engine.attr().ah;
        if attr.mask.contains(QpAttrMask::AV) {
            let ip = attr.ah_attr.dgid.to_ipv4().ok_or_else(|| {
                VerbsError::invalid(
                    VERB,
                    format!(
                        "GID {} is not IPv4: the UDP backend speaks RoCEv2 over IPv4",
                        attr.ah_attr.dgid
                    ),
                )
            })?;
            ea.ah = encode_addr(SocketAddrV4::new(
                ip,
                attr.ah_attr.dport.unwrap_or(default_port),
            ));
        }
        // The engine's validator decides (the one of the crate); its
        // refusal becomes the verbs error that says the same.
        let before = *e.engine.stats();
        e.engine
            .modify(&ea, attr.mask)
            .map_err(|err| qp_state::modify_error(e.qp_type, err))?;
        if attr.mask.contains(QpAttrMask::AV) {
            // The traffic class's DSCP goes into the IP TOS byte; ECN
            // stays the engine's.
            e.tclass_dscp = attr.ah_attr.traffic_class & !0x03;
        }
        if e.engine.state() == QpState::Reset && current != QpState::Reset {
            // RESET starts the engine afresh, counters included; the
            // device's totals keep what it counted.
            let (qpn, cqs) = (qp.0 as u32, [e.send_cq, e.recv_cq]);
            st.retired.add(&before);
            // A QP taken to RESET leaves nothing in its CQs (a NIC's
            // driver cleans the CQ of its entries): the flush completions
            // of an ERR state never meet the QP's next life.
            for cq in cqs {
                if let Some(cq) = st.cqs.get_mut(&cq) {
                    cq.queue.retain(|wc| wc.qp_num.value() != qpn);
                }
            }
        }
        self.shared.collect(&mut st);
        Ok(())
    }

    fn query_qp_state(&self, qp: QpHandle) -> Result<QpState> {
        let st = lock(&self.shared.state);
        st.qps
            .get(&(qp.0 as u32))
            .map(|e| e.engine.state())
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_query_qp",
                object: "QP",
            })
    }

    fn query_qp(&self, qp: QpHandle) -> Result<QpAttr> {
        let st = lock(&self.shared.state);
        let e = st
            .qps
            .get(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_query_qp",
                object: "QP",
            })?;
        let (a, state) = (e.engine.attr(), e.engine.state());
        let dest = decode_addr(a.ah);
        let mut ah_attr = AhAttr::to_gid(Gid::from_ip((*dest.ip()).into()));
        ah_attr.dport = Some(dest.port());
        let sending = matches!(
            state,
            QpState::Rts | QpState::Sqd | QpState::Sqe | QpState::Err
        );
        let receiving = sending || state == QpState::Rtr;
        Ok(QpAttr {
            mask: qp_state::QUERY_MASK,
            qp_state: state,
            cur_qp_state: state,
            qp_access_flags: a.qp_access_flags,
            pkey_index: a.pkey_index,
            port_num: a.port_num,
            qkey: a.qkey,
            ah_attr,
            path_mtu: a.path_mtu,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            // Where the PSNs are now, as rxe reports them (req.psn and
            // resp.psn), once the QP has them.
            rq_psn: if receiving {
                e.engine.expected_psn().value()
            } else {
                a.rq_psn
            },
            sq_psn: if sending {
                e.engine.next_psn().value()
            } else {
                a.sq_psn
            },
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            min_rnr_timer: a.min_rnr_timer,
            dest_qp_num: a.dest_qp_num,
        })
    }

    fn destroy_qp(&self, qp: QpHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        if !st.qps.contains_key(&(qp.0 as u32)) {
            return Err(VerbsError::UnknownHandle {
                verb: "ibv_destroy_qp",
                object: "QP",
            });
        }
        // ACKs for what this QP received may still wait for the next
        // transmit (poll_cq defers them to share a sendmmsg with the next
        // request): a NIC would have sent them already, and the peer's
        // requests would otherwise time out against a QP that is gone.
        self.shared.flush_deferred(&mut st);
        let e = st
            .qps
            .remove(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_destroy_qp",
                object: "QP",
            })?;
        let _ = st.mem.deregister(e.inline_key);
        st.retired.add(e.engine.stats());
        if let Some(n) = st.pds.get_mut(&e.pd) {
            *n = n.saturating_sub(1);
        }
        for cq in [e.send_cq, e.recv_cq] {
            if let Some(c) = st.cqs.get_mut(&cq) {
                c.users = c.users.saturating_sub(1);
            }
        }
        Ok(())
    }

    fn create_ah(&self, pd: PdHandle, attr: &AhAttr) -> Result<AhHandle> {
        let mut st = lock(&self.shared.state);
        if !st.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: "ibv_create_ah",
                object: "PD",
            });
        }
        if attr.dgid.to_ipv4().is_none() {
            return Err(VerbsError::invalid(
                "ibv_create_ah",
                format!("GID {} is not IPv4", attr.dgid),
            ));
        }
        let h = Self::handle(&mut st);
        st.ahs.insert(h, (pd.0, *attr));
        if let Some(n) = st.pds.get_mut(&pd.0) {
            *n += 1;
        }
        Ok(AhHandle(h))
    }

    fn poll_async_event(&self) -> Option<AsyncEvent> {
        lock(&self.shared.state).events.pop_front()
    }

    fn counters(&self) -> Result<Vec<(String, u64)>> {
        let st = lock(&self.shared.state);
        let mut hw = st.retired;
        for e in st.qps.values() {
            hw.add(e.engine.stats());
        }
        let mut v = hw.named();
        let d = st.stats;
        v.extend(
            [
                ("rx_icrc_encapsulated", d.rx_icrc_encapsulated),
                ("rx_icrc_id_solved", d.rx_icrc_id_solved),
                ("rx_malformed", d.rx_malformed),
                ("rx_unknown_qp", d.rx_unknown_qp),
                ("rx_packets", d.rx_packets),
                ("tx_packets", d.tx_packets),
            ]
            .map(|(n, x)| (n.to_string(), x)),
        );
        v.extend(
            st.io
                .stats()
                .fault_counters()
                .map(|(n, x)| (n.to_string(), x)),
        );
        Ok(v)
    }

    fn qp_counters(&self, qp: QpHandle) -> Result<QpCounters> {
        let st = lock(&self.shared.state);
        let e = st
            .qps
            .get(&(qp.0 as u32))
            .ok_or(VerbsError::UnknownHandle {
                verb: "rdma statistic qp",
                object: "QP",
            })?;
        let rate = roce::cc::CongestionControl::rate(e.engine.cc());
        Ok(QpCounters::from_stats(e.engine.stats(), rate))
    }

    fn destroy_ah(&self, ah: AhHandle) -> Result<()> {
        let mut st = lock(&self.shared.state);
        let (pd, _) = st.ahs.remove(&ah.0).ok_or(VerbsError::UnknownHandle {
            verb: "ibv_destroy_ah",
            object: "AH",
        })?;
        if let Some(n) = st.pds.get_mut(&pd) {
            *n = n.saturating_sub(1);
        }
        Ok(())
    }

    unsafe fn post_send(
        &self,
        qp: QpHandle,
        wrs: &[SendWr<'_>],
    ) -> std::result::Result<(), PostError> {
        const VERB: &str = "ibv_post_send";
        self.touch();
        let mut st = lock(&self.shared.state);
        let default_port = self.shared.local.port();
        // A QP with work already in its send queue is in a pipeline whose
        // completions the application will poll for: its new one-packet
        // WRs wait for that poll (or POST_HOLD, or a full batch) and leave
        // together. Larger messages fill GSO runs by themselves, and
        // holding them measured slower (8 MiB ib_write_bw: 0.6-0.8 GB/s
        // held against 1.5-2.0 sent at once).
        let pipelined = st.qps.get(&(qp.0 as u32)).is_some_and(|e| {
            let one_packet = u64::from(e.engine.attr().path_mtu.bytes());
            e.engine.send_queue_len() > 0
                && wrs.iter().all(|w| {
                    w.sg_list.iter().map(|s| u64::from(s.length)).sum::<u64>() <= one_packet
                })
        });
        for (index, wr) in wrs.iter().enumerate() {
            let fail = |error| PostError { index, error };
            let State { qps, mem, ahs, .. } = &mut *st;
            let e = qps.get_mut(&(qp.0 as u32)).ok_or_else(|| {
                fail(VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "QP",
                })
            })?;
            if wr.sg_list.len() > e.cap.max_send_sge.max(1) as usize
                || wr.sg_list.len() > tp::MAX_SGE
            {
                return Err(fail(VerbsError::invalid(
                    VERB,
                    format!(
                        "{} SGEs, the QP takes {}",
                        wr.sg_list.len(),
                        e.cap.max_send_sge
                    ),
                )));
            }
            let mut sges = [tp::Sge::default(); tp::MAX_SGE];
            let mut nsge = wr.sg_list.len();
            for (d, s) in sges.iter_mut().zip(wr.sg_list) {
                *d = tp::Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                };
            }
            if wr.flags.contains(SendFlags::INLINE) {
                let total: usize = wr.sg_list.iter().map(|s| s.length as usize).sum();
                // An ATOMIC WRITE's 8 bytes are its operand, copied at post
                // time (`ibv_wr_atomic_write` takes a pointer), whatever
                // the QP's max_inline_data.
                let max = if matches!(wr.op, SendOp::AtomicWrite { .. }) {
                    8
                } else {
                    e.cap.max_inline_data as usize
                };
                if total > max {
                    return Err(fail(VerbsError::invalid(
                        VERB,
                        format!("inline payload of {total} bytes exceeds max_inline_data {max}"),
                    )));
                }
                if matches!(
                    wr.op,
                    SendOp::Read { .. } | SendOp::CompareSwap { .. } | SendOp::FetchAdd { .. }
                ) {
                    return Err(fail(VerbsError::invalid(
                        VERB,
                        "INLINE applies to SEND and WRITE only",
                    )));
                }
                // Slots go round in posting order and are freed in
                // completion order, so the next slot is free exactly when
                // the send queue has room. A post the engine will refuse
                // for want of room must not touch it: it holds the inline
                // data of the oldest WR still pending.
                if e.engine.send_queue_len() >= e.cap.max_send_wr as usize {
                    return Err(fail(VerbsError::QueueFull {
                        verb: VERB,
                        depth: e.cap.max_send_wr,
                    }));
                }
                let slot = e.inline_next % e.cap.max_send_wr as usize;
                let base = slot * inline_slot(&e.cap);
                let mut off = 0;
                for s in wr.sg_list {
                    let dst = &mut e.inline_buf[base + off..base + off + s.length as usize];
                    // SAFETY: inline data is read at post time from the
                    // caller's buffer, which the caller promises is valid
                    // (post_send's contract); no lkey applies.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            s.addr as *const u8,
                            dst.as_mut_ptr(),
                            dst.len(),
                        )
                    };
                    off += s.length as usize;
                }
                nsge = 0;
                if total > 0 {
                    sges[0] = tp::Sge {
                        addr: e.inline_buf.as_ptr() as u64 + base as u64,
                        length: total as u32,
                        lkey: Lkey::new(e.inline_key),
                    };
                    nsge = 1;
                }
            }
            let ud = match (e.qp_type, wr.ud) {
                (QpType::Ud, Some(d)) => {
                    let Some((_, av)) = ahs.get(&d.ah.0) else {
                        return Err(fail(VerbsError::UnknownHandle {
                            verb: VERB,
                            object: "AH",
                        }));
                    };
                    let ip = av.dgid.to_ipv4().unwrap_or(Ipv4Addr::UNSPECIFIED);
                    Some(tp::UdDest {
                        ah: encode_addr(SocketAddrV4::new(ip, av.dport.unwrap_or(default_port))),
                        remote_qpn: d.remote_qpn,
                        remote_qkey: d.remote_qkey,
                    })
                }
                (QpType::Ud, None) => {
                    return Err(fail(VerbsError::invalid(
                        VERB,
                        "a UD send needs a destination (wr.ud)",
                    )))
                }
                _ => None,
            };
            let ewr = tp::SendWr {
                wr_id: wr.wr_id,
                op: wr.op,
                sges: tp::SgeList::from_slice(&sges[..nsge]).unwrap_or_default(),
                flags: wr.flags.difference(SendFlags::INLINE),
                ud,
            };
            let _ = mem;
            e.engine
                .post_send(ewr)
                .map_err(|x| fail(post_error(VERB, x)))?;
            if wr.flags.contains(SendFlags::INLINE) {
                // The slot is taken only by a post the engine accepted.
                e.inline_next = e.inline_next.wrapping_add(1);
            }
        }
        let now = self.shared.now();
        st.posts_held += wrs.len();
        if pipelined && st.posts_held < POST_BATCH {
            // Doorbell batching: the next poll, wait or post past the
            // batch sends these with the rest; the background thread
            // sends them at POST_HOLD if none comes.
            if st.deferred_until.is_none() {
                st.deferred_until = Some(now + POST_HOLD);
                self.shared.publish_deadline(&st);
            }
            self.shared.collect(&mut st);
            return Ok(());
        }
        // Sending drains every engine: what was held for a deadline (the
        // answers of a round that received, held ACKs) leaves now, and
        // the background thread must not wake for it (a stale deadline
        // has it take the lock from the application at every message).
        let stale = st.deferred_until.is_some() || st.acks_held_until.is_some();
        self.shared.transmit(&mut st, now);
        self.shared.collect(&mut st);
        if stale {
            self.shared.publish_deadline(&st);
        }
        Ok(())
    }

    unsafe fn post_recv(
        &self,
        qp: QpHandle,
        wrs: &[RecvWr<'_>],
    ) -> std::result::Result<(), PostError> {
        const VERB: &str = "ibv_post_recv";
        self.touch();
        let mut st = lock(&self.shared.state);
        for (index, wr) in wrs.iter().enumerate() {
            let fail = |error| PostError { index, error };
            let e = st.qps.get_mut(&(qp.0 as u32)).ok_or_else(|| {
                fail(VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "QP",
                })
            })?;
            // As on a NIC: a receive with more SGEs than the QP was
            // created for is refused (EINVAL), never truncated.
            if wr.sg_list.len() > e.cap.max_recv_sge.max(1) as usize
                || wr.sg_list.len() > tp::MAX_SGE
            {
                return Err(fail(VerbsError::invalid(
                    VERB,
                    format!(
                        "{} SGEs, the QP takes {}",
                        wr.sg_list.len(),
                        e.cap.max_recv_sge
                    ),
                )));
            }
            let mut sges = [tp::Sge::default(); tp::MAX_SGE];
            for (d, s) in sges.iter_mut().zip(wr.sg_list) {
                *d = tp::Sge {
                    addr: s.addr,
                    length: s.length,
                    lkey: s.lkey,
                };
            }
            let ewr = tp::RecvWr {
                wr_id: wr.wr_id,
                sges: tp::SgeList::from_slice(&sges[..wr.sg_list.len()]).unwrap_or_default(),
            };
            e.engine
                .post_recv(ewr)
                .map_err(|x| fail(post_error(VERB, x)))?;
        }
        // A flushed receive (QP in ERR) completes at once.
        self.shared.collect(&mut st);
        Ok(())
    }
}

/// The verbs error of a device-memory refusal: no space is `ENOMEM`, as a
/// NIC's driver answers.
fn dm_error(verb: &'static str, e: DmError) -> VerbsError {
    match e {
        DmError::Unknown => VerbsError::UnknownHandle { verb, object: "DM" },
        DmError::Busy => VerbsError::Busy { verb, object: "DM" },
        DmError::Invalid(why) => VerbsError::invalid(verb, why),
        DmError::NoSpace => os(verb, io::Error::from_raw_os_error(libc::ENOMEM)),
    }
}

/// Bytes of a QP's inline buffer per send queue entry: its
/// `max_inline_data`, and at least an ATOMIC WRITE's 8 bytes.
fn inline_slot(cap: &crate::verbs::QpCap) -> usize {
    (cap.max_inline_data as usize).max(8)
}
