//! [`Backend`] and [`Provider`] over libibverbs: the verbs API's handles
//! mapped onto the owned objects of this module, and the verbs types onto
//! the C structs (see `work.rs`).
//!
//! Handles are `u64`s unique to one opened device: the device's instance
//! number in the high 24 bits and a sequence number below, so a handle of
//! another device (or a destroyed one) is refused with `UnknownHandle`.
//! Objects live in one table behind a reader-writer lock: posts, polls and
//! queries take it shared, creation and destruction exclusively, so nothing
//! is destroyed while a post that uses it is in the library.
//!
//! `wait_cq` must not consume completions, but a CQ cannot be peeked: it
//! polls one completion into a per-CQ stash that the next `poll_cq` returns
//! first, and sleeps on the CQ's completion channel in between.

use std::collections::{BTreeMap, VecDeque};
use std::os::raw::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use super::error::IbverbsError;
use super::ffi::{ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_wc};
use super::objects::{
    AddressHandle, CompletionQueue, Context, MemoryRegion, ProtectionDomain, QpInit, QueuePair,
};
use super::work::{
    ah_attr_to_raw, device_attr_from_raw, encode_send, port_attr_from_raw, qp_attr_to_raw,
    qp_cap_from_raw, qp_cap_to_raw, sge_to_raw, wc_from_raw,
};
use super::Library;
use crate::backend::{
    AhHandle, Backend, BackendKind, CqHandle, DeviceEntry, MrHandle, MrKeys, PdHandle, Provider,
    QpCreated, QpHandle,
};
use crate::verbs::qp_state::check_modify;
use crate::verbs::{
    AccessFlags, AhAttr, DeviceAttr, Gid, PortAttr, PostError, QpAttr, QpInitAttr, QpState, QpType,
    RecvWr, Result, SendWr, VerbsError, WorkCompletion,
};
use roce::wire::{Lkey, Qpn, Rkey};

/// Work requests handed to the library per `ibv_post_send`/`ibv_post_recv`
/// call; longer lists are posted in chunks of this many.
const WR_CHUNK: usize = 16;
/// SGEs per chunk; also the most one work request may carry.
const SGE_CHUNK: usize = 64;
/// Completions taken from the library per `ibv_poll_cq` call.
const POLL_CHUNK: usize = 32;

impl From<IbverbsError> for VerbsError {
    fn from(error: IbverbsError) -> Self {
        match error {
            IbverbsError::Verb { verb, errno } => VerbsError::Os {
                verb,
                source: std::io::Error::from_raw_os_error(errno),
            },
            IbverbsError::InvalidArgument { verb, reason } => VerbsError::invalid(verb, reason),
            IbverbsError::NoDevices { .. } => {
                let text = error.to_string();
                let detail = text.strip_prefix("no RDMA devices").unwrap_or(&text);
                VerbsError::NoDevice(detail.to_owned())
            }
            IbverbsError::DeviceNotFound { name, available } => {
                VerbsError::NoDevice(format!(" named {name:?} (present: {available})"))
            }
            other @ (IbverbsError::LibraryNotFound { .. }
            | IbverbsError::MissingSymbol { .. }
            | IbverbsError::MissingOp { .. }) => VerbsError::Unavailable(other.to_string()),
        }
    }
}

/// Finds and opens real RDMA devices through libibverbs.
#[derive(Debug, Default)]
pub struct IbverbsProvider {
    _private: (),
}

impl IbverbsProvider {
    /// A provider; the library is loaded on first use, not here.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Provider for IbverbsProvider {
    fn kind(&self) -> BackendKind {
        BackendKind::Ibverbs
    }

    /// The devices present. No device (libibverbs answers ENOSYS without
    /// kernel RDMA support) is an empty list, per the trait; a missing
    /// library is `Unavailable` ("libibverbs.so.1 not found: ...").
    fn devices(&self) -> Result<Vec<DeviceEntry>> {
        let library = Library::load()?;
        let devices = match library.devices() {
            Ok(devices) => devices,
            Err(IbverbsError::NoDevices { .. }) => return Ok(Vec::new()),
            Err(error) => return Err(error.into()),
        };
        Ok(devices
            .into_iter()
            .map(|device| DeviceEntry {
                detail: describe_node(device.node_type, device.transport_type),
                name: device.name,
                node_guid: device.node_guid,
                kind: BackendKind::Ibverbs,
            })
            .collect())
    }

    fn open(&self, device: &DeviceEntry) -> Result<Arc<dyn Backend>> {
        let context = Library::load()?.open(Some(&device.name))?;
        Ok(Arc::new(IbverbsBackend::new(context)))
    }
}

/// `ibv_node_type_str` / transport wording for listings.
fn describe_node(node_type: i32, transport_type: i32) -> String {
    let node = match node_type {
        1 => "channel adapter",
        2 => "switch",
        3 => "router",
        4 => "RNIC",
        5 => "usNIC",
        6 => "usNIC UDP",
        _ => "unknown node type",
    };
    let transport = match transport_type {
        0 => "InfiniBand/RoCE",
        1 => "iWARP",
        2 => "usNIC",
        3 => "usNIC UDP",
        _ => "unknown transport",
    };
    format!("{node}, {transport}")
}

/// Hands out a distinct instance number per opened device.
static INSTANCES: AtomicU64 = AtomicU64::new(1);

struct PdEntry {
    pd: ProtectionDomain,
}

struct MrEntry {
    pd: u64,
    mr: MemoryRegion,
}

struct CqEntry {
    cq: CompletionQueue,
    /// Completions `wait_cq` polled ahead of `poll_cq`.
    stash: Mutex<VecDeque<WorkCompletion>>,
}

struct QpEntry {
    pd: u64,
    send_cq: u64,
    recv_cq: u64,
    qp: QueuePair,
}

struct AhEntry {
    pd: u64,
    ah: AddressHandle,
}

/// Every live object of one device, by handle. Field order is drop order:
/// children before parents (their own references keep that order too).
#[derive(Default)]
struct Tables {
    qps: BTreeMap<u64, QpEntry>,
    ahs: BTreeMap<u64, AhEntry>,
    mrs: BTreeMap<u64, MrEntry>,
    cqs: BTreeMap<u64, Arc<CqEntry>>,
    pds: BTreeMap<u64, PdEntry>,
}

/// One real RDMA device opened through libibverbs.
pub struct IbverbsBackend {
    context: Context,
    /// High bits of every handle of this device.
    handle_base: u64,
    next: AtomicU64,
    tables: RwLock<Tables>,
}

impl std::fmt::Debug for IbverbsBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IbverbsBackend")
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl IbverbsBackend {
    /// Wraps an opened device.
    pub fn new(context: Context) -> Self {
        let instance = INSTANCES.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff;
        Self {
            context,
            handle_base: instance << 40,
            next: AtomicU64::new(1),
            tables: RwLock::new(Tables::default()),
        }
    }

    /// Opens the named device (or the first) with a freshly loaded library.
    pub fn open(name: Option<&str>) -> Result<Self> {
        Ok(Self::new(Library::load()?.open(name)?))
    }

    /// The underlying context.
    pub fn context(&self) -> &Context {
        &self.context
    }

    fn new_handle(&self) -> u64 {
        self.handle_base | self.next.fetch_add(1, Ordering::Relaxed)
    }

    fn read(&self) -> RwLockReadGuard<'_, Tables> {
        // A panic while holding the lock cannot leave a table half-updated
        // (each update is one insert or remove), so poisoning is ignored.
        self.tables
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn write(&self) -> RwLockWriteGuard<'_, Tables> {
        self.tables
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn cq(&self, verb: &'static str, cq: CqHandle) -> Result<Arc<CqEntry>> {
        self.read()
            .cqs
            .get(&cq.0)
            .cloned()
            .ok_or(VerbsError::UnknownHandle { verb, object: "CQ" })
    }

    /// Moves up to `out.len()` completions of `entry` into `out`: the
    /// stash first, then the library.
    fn poll_entry(entry: &CqEntry, out: &mut [WorkCompletion]) -> Result<usize> {
        let mut filled = 0;
        {
            let mut stash = entry.stash.lock().unwrap_or_else(|p| p.into_inner());
            while filled < out.len() {
                let Some(wc) = stash.pop_front() else { break };
                out[filled] = wc;
                filled += 1;
            }
        }
        let mut raw = [ibv_wc::default(); POLL_CHUNK];
        while filled < out.len() {
            let want = (out.len() - filled).min(POLL_CHUNK);
            let got = entry.cq.poll_raw(&mut raw[..want])?;
            for (slot, wc) in out[filled..].iter_mut().zip(&raw[..got]) {
                *slot = wc_from_raw(wc);
            }
            filled += got;
            if got < want {
                break;
            }
        }
        Ok(filled)
    }

    /// Polls one completion into the stash; whether one is there now.
    fn stash_one(entry: &CqEntry) -> Result<bool> {
        let mut stash = entry.stash.lock().unwrap_or_else(|p| p.into_inner());
        if !stash.is_empty() {
            return Ok(true);
        }
        let mut raw = [ibv_wc::default(); 1];
        if entry.cq.poll_raw(&mut raw)? == 1 {
            stash.push_back(wc_from_raw(&raw[0]));
            return Ok(true);
        }
        Ok(false)
    }
}

impl Backend for IbverbsBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Ibverbs
    }

    fn query_device(&self) -> Result<DeviceAttr> {
        let raw = self.context.query_device()?;
        Ok(device_attr_from_raw(&self.context.device().name, &raw))
    }

    fn query_port(&self, port: u8) -> Result<PortAttr> {
        port_attr_from_raw(&self.context.query_port(port)?)
    }

    fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        Ok(Gid(self.context.query_gid(port, index)?))
    }

    fn alloc_pd(&self) -> Result<PdHandle> {
        let pd = self.context.alloc_pd()?;
        let handle = self.new_handle();
        self.write().pds.insert(handle, PdEntry { pd });
        Ok(PdHandle(handle))
    }

    fn dealloc_pd(&self, pd: PdHandle) -> Result<()> {
        const VERB: &str = "ibv_dealloc_pd";
        let mut tables = self.write();
        if !tables.pds.contains_key(&pd.0) {
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "PD",
            });
        }
        let busy = tables.mrs.values().any(|mr| mr.pd == pd.0)
            || tables.qps.values().any(|qp| qp.pd == pd.0)
            || tables.ahs.values().any(|ah| ah.pd == pd.0);
        if busy {
            return Err(VerbsError::Busy {
                verb: VERB,
                object: "PD",
            });
        }
        tables.pds.remove(&pd.0);
        Ok(())
    }

    unsafe fn reg_mr(
        &self,
        pd: PdHandle,
        addr: *mut u8,
        len: usize,
        access: AccessFlags,
    ) -> Result<MrKeys> {
        let mut tables = self.write();
        let entry = tables.pds.get(&pd.0).ok_or(VerbsError::UnknownHandle {
            verb: "ibv_reg_mr",
            object: "PD",
        })?;
        // SAFETY: the caller guarantees the range stays valid until dereg_mr,
        // which is what register_raw requires.
        let mr = unsafe { entry.pd.register_raw(addr, len, access) }?;
        let keys = (Lkey::new(mr.lkey()), Rkey::new(mr.rkey()));
        let handle = self.new_handle();
        tables.mrs.insert(handle, MrEntry { pd: pd.0, mr });
        Ok(MrKeys {
            handle: MrHandle(handle),
            lkey: keys.0,
            rkey: keys.1,
            // ibv_reg_mr pins the pages itself (get_user_pages in the kernel).
            pinned: true,
            pin_error: None,
        })
    }

    fn dereg_mr(&self, mr: MrHandle) -> Result<()> {
        let mut tables = self.write();
        let entry = tables.mrs.remove(&mr.0).ok_or(VerbsError::UnknownHandle {
            verb: "ibv_dereg_mr",
            object: "MR",
        })?;
        match entry.mr.deregister() {
            Ok(()) => Ok(()),
            Err((region, error)) => {
                // Still registered: keep it so that a retry can succeed.
                tables.mrs.insert(
                    mr.0,
                    MrEntry {
                        pd: entry.pd,
                        mr: region,
                    },
                );
                Err(error.into())
            }
        }
    }

    fn create_cq(&self, cqe: u32) -> Result<CqHandle> {
        let cq = self.context.create_cq(cqe)?;
        let handle = self.new_handle();
        self.write().cqs.insert(
            handle,
            Arc::new(CqEntry {
                cq,
                stash: Mutex::new(VecDeque::new()),
            }),
        );
        Ok(CqHandle(handle))
    }

    fn destroy_cq(&self, cq: CqHandle) -> Result<()> {
        const VERB: &str = "ibv_destroy_cq";
        let mut tables = self.write();
        if !tables.cqs.contains_key(&cq.0) {
            return Err(VerbsError::UnknownHandle {
                verb: VERB,
                object: "CQ",
            });
        }
        if tables
            .qps
            .values()
            .any(|qp| qp.send_cq == cq.0 || qp.recv_cq == cq.0)
        {
            return Err(VerbsError::Busy {
                verb: VERB,
                object: "CQ",
            });
        }
        tables.cqs.remove(&cq.0);
        Ok(())
    }

    fn poll_cq(&self, cq: CqHandle, wc: &mut [WorkCompletion]) -> Result<usize> {
        let entry = self.cq("ibv_poll_cq", cq)?;
        Self::poll_entry(&entry, wc)
    }

    fn wait_cq(&self, cq: CqHandle, timeout: Duration) -> Result<bool> {
        let entry = self.cq("ibv_get_cq_event", cq)?;
        let deadline = Instant::now() + timeout;
        loop {
            if Self::stash_one(&entry)? {
                return Ok(true);
            }
            // Arm, then look again: a completion that arrived before the
            // arm raises no event.
            entry.cq.req_notify(false)?;
            if Self::stash_one(&entry)? {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            entry.cq.wait_event(deadline - now)?;
        }
    }

    fn create_qp(&self, pd: PdHandle, init: &QpInitAttr) -> Result<QpCreated> {
        const VERB: &str = "ibv_create_qp";
        let mut tables = self.write();
        let unknown = |object| VerbsError::UnknownHandle { verb: VERB, object };
        let pd_entry = tables.pds.get(&pd.0).ok_or(unknown("PD"))?;
        let send_cq = tables.cqs.get(&init.send_cq.0).ok_or(unknown("send CQ"))?;
        let recv_cq = tables
            .cqs
            .get(&init.recv_cq.0)
            .ok_or(unknown("receive CQ"))?;
        let qp = pd_entry.pd.create_qp(&QpInit {
            qp_type: init.qp_type,
            send_cq: &send_cq.cq,
            recv_cq: &recv_cq.cq,
            cap: qp_cap_to_raw(&init.cap),
            sq_sig_all: init.sq_sig_all,
        })?;
        let created = QpCreated {
            handle: QpHandle(self.new_handle()),
            qpn: Qpn::new(qp.qp_num()),
            cap: qp_cap_from_raw(&qp.cap()),
        };
        tables.qps.insert(
            created.handle.0,
            QpEntry {
                pd: pd.0,
                send_cq: init.send_cq.0,
                recv_cq: init.recv_cq.0,
                qp,
            },
        );
        Ok(created)
    }

    /// Checks the transition with the same rules as the emulation first
    /// (the kernel would refuse it too, but only with EINVAL), then calls
    /// `ibv_modify_qp`.
    fn modify_qp(&self, qp: QpHandle, attr: &QpAttr) -> Result<()> {
        const VERB: &str = "ibv_modify_qp";
        let tables = self.read();
        let entry = tables.qps.get(&qp.0).ok_or(VerbsError::UnknownHandle {
            verb: VERB,
            object: "QP",
        })?;
        let current = qp_state_from_raw(entry.qp.query_state()?)?;
        check_modify(entry.qp.qp_type(), current, attr)?;
        let (raw, mask) = qp_attr_to_raw(attr)?;
        entry.qp.modify(&raw, mask)?;
        Ok(())
    }

    fn query_qp_state(&self, qp: QpHandle) -> Result<QpState> {
        let tables = self.read();
        let entry = tables.qps.get(&qp.0).ok_or(VerbsError::UnknownHandle {
            verb: "ibv_query_qp",
            object: "QP",
        })?;
        qp_state_from_raw(entry.qp.query_state()?)
    }

    /// The port's hardware counters as the kernel exposes them
    /// (`/sys/class/infiniband/DEV/ports/1/hw_counters`, what `rdma
    /// statistic show` prints): the names the emulation and the simulator
    /// use are mlx5's own, so they pass through unchanged, in the shared
    /// table's order first. `Unavailable` when the driver exposes none.
    fn counters(&self) -> Result<Vec<(String, u64)>> {
        let dir = std::path::Path::new("/sys/class/infiniband")
            .join(&self.context.device().name)
            .join("ports/1/hw_counters");
        crate::backend::counters::read_sysfs_hw_counters(&dir)
    }

    fn query_qp(&self, qp: QpHandle) -> Result<QpAttr> {
        const VERB: &str = "ibv_query_qp";
        let tables = self.read();
        let entry = tables.qps.get(&qp.0).ok_or(VerbsError::UnknownHandle {
            verb: VERB,
            object: "QP",
        })?;
        let raw = entry
            .qp
            .query(crate::verbs::qp_state::QUERY_MASK.bits() as std::os::raw::c_int)?;
        let state = qp_state_from_raw(raw.qp_state)?;
        let g = &raw.ah_attr.grh;
        let ah_attr = AhAttr {
            dgid: Gid(g.dgid.bytes()),
            sgid_index: g.sgid_index,
            hop_limit: g.hop_limit,
            traffic_class: g.traffic_class,
            flow_label: g.flow_label,
            sl: raw.ah_attr.sl,
            port_num: raw.ah_attr.port_num,
            dport: None,
        };
        Ok(QpAttr {
            mask: crate::verbs::qp_state::QUERY_MASK,
            qp_state: state,
            cur_qp_state: qp_state_from_raw(raw.cur_qp_state).unwrap_or(state),
            qp_access_flags: AccessFlags(raw.qp_access_flags),
            pkey_index: raw.pkey_index,
            port_num: raw.port_num,
            qkey: raw.qkey,
            ah_attr,
            path_mtu: crate::verbs::Mtu::from_value(raw.path_mtu).ok_or_else(|| {
                VerbsError::invalid(
                    VERB,
                    format!(
                        "the device reports path_mtu {}, not one of 1..=5",
                        raw.path_mtu
                    ),
                )
            })?,
            timeout: raw.timeout,
            retry_cnt: raw.retry_cnt,
            rnr_retry: raw.rnr_retry,
            rq_psn: raw.rq_psn,
            sq_psn: raw.sq_psn,
            max_rd_atomic: raw.max_rd_atomic,
            max_dest_rd_atomic: raw.max_dest_rd_atomic,
            min_rnr_timer: raw.min_rnr_timer,
            dest_qp_num: roce::wire::Qpn::new(raw.dest_qp_num),
        })
    }

    fn destroy_qp(&self, qp: QpHandle) -> Result<()> {
        self.write()
            .qps
            .remove(&qp.0)
            .map(drop)
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_destroy_qp",
                object: "QP",
            })
    }

    fn create_ah(&self, pd: PdHandle, attr: &AhAttr) -> Result<AhHandle> {
        const VERB: &str = "ibv_create_ah";
        let raw = ah_attr_to_raw(VERB, attr)?;
        let mut tables = self.write();
        let pd_entry = tables.pds.get(&pd.0).ok_or(VerbsError::UnknownHandle {
            verb: VERB,
            object: "PD",
        })?;
        let ah = pd_entry.pd.create_ah(&raw)?;
        let handle = self.new_handle();
        tables.ahs.insert(handle, AhEntry { pd: pd.0, ah });
        Ok(AhHandle(handle))
    }

    fn destroy_ah(&self, ah: AhHandle) -> Result<()> {
        self.write()
            .ahs
            .remove(&ah.0)
            .map(drop)
            .ok_or(VerbsError::UnknownHandle {
                verb: "ibv_destroy_ah",
                object: "AH",
            })
    }

    unsafe fn post_send(
        &self,
        qp: QpHandle,
        wrs: &[SendWr<'_>],
    ) -> core::result::Result<(), PostError> {
        const VERB: &str = "ibv_post_send";
        let tables = self.read();
        let Some(entry) = tables.qps.get(&qp.0) else {
            return Err(PostError {
                index: 0,
                error: VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "QP",
                },
            });
        };
        let is_ud = entry.qp.qp_type() == QpType::Ud;
        let max_sge = (entry.qp.cap().max_send_sge as usize).min(SGE_CHUNK);
        // Validates and encodes one request; the caller links the lists.
        let encode = |wr: &SendWr<'_>| -> Result<ibv_send_wr> {
            if is_ud != wr.ud.is_some() {
                let why = if is_ud {
                    "a UD QP needs a destination (wr.ud)"
                } else {
                    "only a UD QP takes a destination (wr.ud)"
                };
                return Err(VerbsError::invalid(VERB, why));
            }
            if wr.sg_list.len() > max_sge {
                return Err(VerbsError::invalid(
                    VERB,
                    format!("{} SGEs, the QP allows {max_sge}", wr.sg_list.len()),
                ));
            }
            let ah = match wr.ud {
                Some(ud) => Some(
                    tables
                        .ahs
                        .get(&ud.ah.0)
                        .ok_or(VerbsError::UnknownHandle {
                            verb: VERB,
                            object: "AH",
                        })?
                        .ah
                        .as_ptr(),
                ),
                None => None,
            };
            encode_send(wr, ah)
        };
        let mut start = 0;
        while start < wrs.len() {
            let mut raw_wrs = [ibv_send_wr::default(); WR_CHUNK];
            let mut raw_sges = [ibv_sge::default(); SGE_CHUNK];
            let mut count = 0;
            let mut sges_used = 0;
            let mut invalid = None;
            while start + count < wrs.len() && count < WR_CHUNK {
                let wr = &wrs[start + count];
                if sges_used + wr.sg_list.len() > SGE_CHUNK && count > 0 {
                    break;
                }
                match encode(wr) {
                    Ok(raw) => {
                        raw_wrs[count] = raw;
                        for (slot, sge) in raw_sges[sges_used..].iter_mut().zip(wr.sg_list) {
                            *slot = sge_to_raw(sge);
                        }
                        raw_wrs[count].num_sge = wr.sg_list.len() as c_int;
                        sges_used += wr.sg_list.len();
                        count += 1;
                    }
                    Err(error) => {
                        invalid = Some(PostError {
                            index: start + count,
                            error,
                        });
                        break;
                    }
                }
            }
            if count > 0 {
                // Link the chunk now that the arrays no longer move.
                let base = raw_wrs.as_mut_ptr();
                // SAFETY: `count` requests and their SGEs were filled above
                // within the two arrays' bounds.
                unsafe { link_send(base, raw_sges.as_mut_ptr(), count) };
                // SAFETY: the list and its SGE arrays live on this frame for
                // the call; the caller guarantees the memory they name
                // (Backend::post_send's contract); AHs are kept alive by the
                // read lock held here.
                if let Err((error, bad)) = unsafe { entry.qp.post_send_raw(base) } {
                    let offset = if bad.is_null() {
                        0
                    } else {
                        (bad as usize).saturating_sub(base as usize)
                            / std::mem::size_of::<ibv_send_wr>()
                    };
                    return Err(PostError {
                        index: start + offset.min(count - 1),
                        error: error.into(),
                    });
                }
            }
            if let Some(invalid) = invalid {
                return Err(invalid);
            }
            start += count;
        }
        Ok(())
    }

    unsafe fn post_recv(
        &self,
        qp: QpHandle,
        wrs: &[RecvWr<'_>],
    ) -> core::result::Result<(), PostError> {
        const VERB: &str = "ibv_post_recv";
        let tables = self.read();
        let Some(entry) = tables.qps.get(&qp.0) else {
            return Err(PostError {
                index: 0,
                error: VerbsError::UnknownHandle {
                    verb: VERB,
                    object: "QP",
                },
            });
        };
        let max_sge = (entry.qp.cap().max_recv_sge as usize).min(SGE_CHUNK);
        let mut start = 0;
        while start < wrs.len() {
            let mut raw_wrs = [ibv_recv_wr {
                wr_id: 0,
                next: std::ptr::null_mut(),
                sg_list: std::ptr::null_mut(),
                num_sge: 0,
            }; WR_CHUNK];
            let mut raw_sges = [ibv_sge::default(); SGE_CHUNK];
            let mut count = 0;
            let mut sges_used = 0;
            let mut invalid = None;
            while start + count < wrs.len() && count < WR_CHUNK {
                let wr = &wrs[start + count];
                if wr.sg_list.len() > max_sge {
                    invalid = Some(PostError {
                        index: start + count,
                        error: VerbsError::invalid(
                            VERB,
                            format!("{} SGEs, the QP allows {max_sge}", wr.sg_list.len()),
                        ),
                    });
                    break;
                }
                if sges_used + wr.sg_list.len() > SGE_CHUNK {
                    break;
                }
                for (slot, sge) in raw_sges[sges_used..].iter_mut().zip(wr.sg_list) {
                    *slot = sge_to_raw(sge);
                }
                raw_wrs[count].wr_id = wr.wr_id;
                raw_wrs[count].num_sge = wr.sg_list.len() as c_int;
                sges_used += wr.sg_list.len();
                count += 1;
            }
            if count > 0 {
                let base = raw_wrs.as_mut_ptr();
                // SAFETY: as in post_send.
                unsafe { link_recv(base, raw_sges.as_mut_ptr(), count) };
                // SAFETY: as in post_send; the caller guarantees the buffers.
                if let Err((error, bad)) = unsafe { entry.qp.post_recv_raw(base) } {
                    let offset = if bad.is_null() {
                        0
                    } else {
                        (bad as usize).saturating_sub(base as usize)
                            / std::mem::size_of::<ibv_recv_wr>()
                    };
                    return Err(PostError {
                        index: start + offset.min(count - 1),
                        error: error.into(),
                    });
                }
            }
            if let Some(invalid) = invalid {
                return Err(invalid);
            }
            start += count;
        }
        Ok(())
    }
}

macro_rules! link_fn {
    ($name:ident, $ty:ty) => {
        /// Points each of the first `count` requests at its SGEs (packed in
        /// order in `sges`, `num_sge` each) and at the next request, as the
        /// C list wants. Works through raw pointers only, so `wrs` stays
        /// valid for the post that follows.
        ///
        /// # Safety
        ///
        /// `wrs` must point to at least `count` initialised requests and
        /// `sges` to at least the sum of their `num_sge` SGEs.
        unsafe fn $name(wrs: *mut $ty, sges: *mut ibv_sge, count: usize) {
            let mut sge_offset = 0;
            for index in 0..count {
                // SAFETY: index < count, within `wrs` (caller's contract).
                let wr = unsafe { wrs.add(index) };
                // SAFETY: `wr` is valid and initialised.
                let num_sge = unsafe { (*wr).num_sge } as usize;
                let sg_list = if num_sge == 0 {
                    std::ptr::null_mut()
                } else {
                    // SAFETY: sge_offset + num_sge <= the SGEs filled.
                    unsafe { sges.add(sge_offset) }
                };
                let next = if index + 1 < count {
                    // SAFETY: index + 1 < count.
                    unsafe { wrs.add(index + 1) }
                } else {
                    std::ptr::null_mut()
                };
                // SAFETY: `wr` is valid for writes.
                unsafe {
                    (*wr).sg_list = sg_list;
                    (*wr).next = next;
                }
                sge_offset += num_sge;
            }
        }
    };
}

link_fn!(link_send, ibv_send_wr);
link_fn!(link_recv, ibv_recv_wr);

/// The verbs state of an `enum ibv_qp_state` value.
fn qp_state_from_raw(raw: u32) -> Result<QpState> {
    QpState::from_value(raw).ok_or_else(|| {
        VerbsError::invalid(
            "ibv_query_qp",
            format!("the device reports QP state {raw}, which is not one of RESET..ERR"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_errors_map_to_the_verbs_audiences() {
        let os: VerbsError = IbverbsError::Verb {
            verb: "ibv_reg_mr",
            errno: libc::ENOMEM,
        }
        .into();
        match &os {
            VerbsError::Os { verb, source } => {
                assert_eq!(*verb, "ibv_reg_mr");
                assert_eq!(source.raw_os_error(), Some(libc::ENOMEM));
            }
            other => panic!("{other:?}"),
        }
        let none: VerbsError = IbverbsError::NoDevices {
            errno: libc::ENOSYS,
        }
        .into();
        let text = none.to_string();
        assert!(
            text.starts_with("no RDMA devices (ibv_get_device_list: "),
            "{text}"
        );
        let missing: VerbsError = IbverbsError::LibraryNotFound {
            library: "libibverbs.so.1".to_owned(),
            reason: "cannot open".to_owned(),
        }
        .into();
        assert_eq!(
            missing.to_string(),
            "libibverbs.so.1 not found: cannot open"
        );
        assert!(matches!(missing, VerbsError::Unavailable(_)));
    }

    #[test]
    fn qp_states_map_and_unknown_is_refused() {
        assert_eq!(qp_state_from_raw(3).unwrap(), QpState::Rts);
        let error = qp_state_from_raw(7).unwrap_err();
        assert!(error.to_string().contains("QP state 7"), "{error}");
    }

    #[test]
    fn node_descriptions_read_like_ibv_devinfo() {
        assert_eq!(describe_node(1, 0), "channel adapter, InfiniBand/RoCE");
        assert_eq!(describe_node(4, 1), "RNIC, iWARP");
    }

    fn open_request() -> crate::backend::OpenRequest {
        crate::backend::OpenRequest {
            kind: BackendKind::Ibverbs,
            device: None,
            bind: std::net::Ipv4Addr::LOCALHOST,
            udp_port: 4791,
            faults: crate::backend::fault::FaultConfig::default(),
            pcap: None,
            busy_poll: false,
            cc: roce::cc::CcSpec::default(),
            strict_icrc: false,
        }
    }

    #[test]
    fn opening_hardware_refuses_what_only_the_udp_path_can_do() {
        let mut faulty = open_request();
        faulty.faults.loss = 0.02;
        let error = crate::backend::open(&faulty).err().expect("refused");
        assert!(error.to_string().contains("use --backend udp"), "{error}");
        let mut capture = open_request();
        capture.pcap = Some("x.pcap".into());
        assert!(crate::backend::open(&capture).is_err());
        let mut port = open_request();
        port.udp_port = 4792;
        let error = crate::backend::open(&port).err().expect("refused");
        assert!(error.to_string().contains("always uses 4791"), "{error}");
    }

    #[test]
    fn opening_hardware_here_says_why_it_cannot() {
        // No RDMA device where this runs (or no libibverbs at all): the
        // answer names the reason, never panics. With a device it opens.
        match crate::backend::open(&open_request()) {
            Ok(backend) => assert_eq!(backend.kind(), BackendKind::Ibverbs),
            Err(VerbsError::NoDevice(detail)) => {
                assert!(detail.contains("ibv_get_device_list"), "{detail}");
            }
            Err(VerbsError::Unavailable(text)) => {
                assert!(text.contains("libibverbs.so.1 not found"), "{text}");
            }
            Err(other) => panic!("unexpected: {other}"),
        }
    }

    #[test]
    fn provider_without_devices_lists_nothing_or_reports_why() {
        // Here: either the library is missing (Unavailable, with the
        // message) or present with no device (an empty list), or a machine
        // with devices lists them; it never panics.
        match IbverbsProvider::new().devices() {
            Ok(devices) => {
                for device in devices {
                    assert_eq!(device.kind, BackendKind::Ibverbs);
                    assert!(!device.name.is_empty());
                }
            }
            Err(VerbsError::Unavailable(text)) => {
                assert!(text.contains("libibverbs.so.1 not found"), "{text}");
            }
            Err(other) => panic!("unexpected: {other}"),
        }
    }
}
