//! Devices and contexts: `ibv_get_device_list`, `ibv_open_device`, the
//! query verbs and asynchronous events.
//!
//! `ibv_open_device` fills the context's function tables with the verbs of
//! `post` and `objects` that `verbs.h` calls inline; those files use the
//! context's record (in `records`), never this file.

use std::mem::offset_of;
use std::net::SocketAddrV4;
use std::os::raw::{c_char, c_int, c_uint};
use std::ptr;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use verbs_emu::backend::ibverbs::ffi::*;
use verbs_emu::backend::udp::{node_guid_for, BackgroundMode, UdpBackend, UdpConfig};
use verbs_emu::backend::Backend;
use verbs_emu::verbs::VerbsError;
use verbs_emu::wire::ROCE_UDP_PORT;

use crate::config::{lid_of, loopback_candidates, DeviceSpec};
use crate::records::ShimContext;
use crate::{fail, lock, set_errno};

/// A device of the list: the C struct first, so `*mut ibv_device` is a
/// pointer to this record.
#[repr(C)]
pub(crate) struct ShimDevice {
    pub dev: ibv_device,
    pub index: c_int,
    pub guid: u64,
    pub spec: DeviceSpec,
    /// The backend every context of this device in the process shares (one
    /// address, GID table and QPN space, as a NIC's contexts share its
    /// port): alive while a context or an object of one holds it.
    pub shared: Mutex<Weak<UdpBackend>>,
}

/// The devices, built once per process.
fn devices() -> &'static [&'static ShimDevice] {
    static LIST: OnceLock<Vec<&'static ShimDevice>> = OnceLock::new();
    LIST.get_or_init(|| {
        let specs = DeviceSpec::from_env().unwrap_or_else(|e| {
            eprintln!("rocelab-ibverbs: {e}; no devices");
            Vec::new()
        });
        specs
            .into_iter()
            .enumerate()
            .map(|(i, spec)| {
                let guid = node_guid_for(
                    spec.bind
                        .unwrap_or(SocketAddrV4::new([127, 0, 0, 0].into(), ROCE_UDP_PORT)),
                );
                // SAFETY: ibv_device is integers and char arrays; zero is valid.
                let mut dev: ibv_device = unsafe { std::mem::zeroed() };
                dev.node_type = IBV_NODE_CA;
                dev.transport_type = IBV_TRANSPORT_IB;
                copy_c(&mut dev.name, &spec.name);
                copy_c(&mut dev.dev_name, &format!("uverbs{i}"));
                copy_c(
                    &mut dev.dev_path,
                    &format!("/sys/class/infiniband_verbs/uverbs{i}"),
                );
                copy_c(
                    &mut dev.ibdev_path,
                    &format!("/sys/class/infiniband/{}", spec.name),
                );
                let d: &'static ShimDevice = Box::leak(Box::new(ShimDevice {
                    dev,
                    index: i as c_int,
                    guid,
                    spec,
                    shared: Mutex::new(Weak::new()),
                }));
                d
            })
            .collect()
    })
}

/// Copy `s` into a C char array, NUL-terminated, truncated to fit.
pub(crate) fn copy_c(dst: &mut [c_char], s: &str) {
    let n = s.len().min(dst.len().saturating_sub(1));
    for (d, b) in dst.iter_mut().zip(s.bytes().take(n)) {
        *d = b as c_char;
    }
    if let Some(end) = dst.get_mut(n) {
        *end = 0;
    }
}

fn device_of<'a>(dev: *mut ibv_device) -> Option<&'a ShimDevice> {
    devices()
        .iter()
        .find(|d| ptr::eq(&d.dev, dev.cast_const()))
        .copied()
}

#[no_mangle]
unsafe extern "C" fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device {
    let list = devices();
    // SAFETY: calloc of list.len() + 1 pointers; the caller frees it with
    // ibv_free_device_list.
    let arr = unsafe { libc::calloc(list.len() + 1, std::mem::size_of::<*mut ibv_device>()) }
        .cast::<*mut ibv_device>();
    if arr.is_null() {
        set_errno(libc::ENOMEM);
        return ptr::null_mut();
    }
    for (i, d) in list.iter().enumerate() {
        // SAFETY: i < len + 1 entries allocated; devices live forever.
        unsafe { *arr.add(i) = ptr::from_ref(&d.dev).cast_mut() };
    }
    if !num_devices.is_null() {
        // SAFETY: caller-provided output.
        unsafe { *num_devices = list.len() as c_int };
    }
    arr
}

#[no_mangle]
unsafe extern "C" fn ibv_free_device_list(list: *mut *mut ibv_device) {
    // SAFETY: list came from ibv_get_device_list (calloc) or is null.
    unsafe { libc::free(list.cast()) };
}

#[no_mangle]
unsafe extern "C" fn ibv_get_device_name(dev: *mut ibv_device) -> *const c_char {
    match device_of(dev) {
        Some(d) => d.dev.name.as_ptr(),
        None => {
            set_errno(libc::EINVAL);
            ptr::null()
        }
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_get_device_guid(dev: *mut ibv_device) -> u64 {
    device_of(dev).map_or(0, |d| d.guid.to_be())
}

#[no_mangle]
unsafe extern "C" fn ibv_get_device_index(dev: *mut ibv_device) -> c_int {
    device_of(dev).map_or(-1, |d| d.index)
}

/// Open the UDP device `spec` describes: its own address, or the first
/// free automatic loopback address.
fn open_backend(spec: &DeviceSpec) -> Result<UdpBackend, VerbsError> {
    let bind_one = |bind: SocketAddrV4| {
        let mut cfg = UdpConfig::new(bind);
        cfg.name = spec.name.clone();
        cfg.set_cc(&spec.cc);
        cfg.strict_icrc = spec.strict_icrc;
        // C programs often wait for a peer's WRITE by watching memory,
        // calling no verb: the background thread must move every packet
        // as it arrives, as a NIC does.
        cfg.background = BackgroundMode::Interrupt;
        UdpBackend::open(cfg)
    };
    if let Some(bind) = spec.bind {
        return bind_one(bind);
    }
    let mut last = None;
    for bind in loopback_candidates(std::process::id()).take(256) {
        match bind_one(bind) {
            Ok(b) => return Ok(b),
            Err(VerbsError::Os { source, verb })
                if source.raw_os_error() == Some(libc::EADDRINUSE) =>
            {
                last = Some(VerbsError::Os { source, verb });
            }
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| VerbsError::invalid("ibv_open_device", "no free address")))
}

/// The device's backend in this process: the one its open contexts share,
/// or a fresh one when none is open. The lock is held while opening, so two
/// threads opening at once share one too.
fn shared_backend(d: &ShimDevice) -> Result<Arc<UdpBackend>, VerbsError> {
    let mut slot = lock(&d.shared);
    if let Some(b) = slot.upgrade() {
        return Ok(b);
    }
    let b = Arc::new(open_backend(&d.spec)?);
    *slot = Arc::downgrade(&b);
    let events: Arc<dyn Backend> = b.clone();
    if !crate::events::watch(Arc::downgrade(&events)) {
        return Err(VerbsError::invalid(
            "ibv_open_device",
            "cannot start the asynchronous event thread",
        ));
    }
    Ok(b)
}

#[no_mangle]
unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    let Some(d) = device_of(dev) else {
        set_errno(libc::EINVAL);
        return ptr::null_mut();
    };
    let backend = match shared_backend(d) {
        Ok(b) => b,
        Err(e) => {
            set_errno(fail(&e));
            return ptr::null_mut();
        }
    };
    let mut fds = [-1; 2];
    // SAFETY: pipe2 writes two fds into the array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return ptr::null_mut();
    }
    crate::events::set_nonblocking(fds[1]);
    let local = backend.local_addr();
    let guid = if d.spec.bind.is_some() {
        d.guid
    } else {
        node_guid_for(local)
    };
    // SAFETY: verbs_context is integers, nullable function pointers, raw
    // pointers and a pthread mutex: all-zero is valid for each (the mutex
    // is initialised below).
    let mut vctx: verbs_context = unsafe { std::mem::zeroed() };
    vctx.sz = std::mem::size_of::<verbs_context>();
    vctx.query_port = Some(crate::context::query_port_ex);
    // SAFETY: the slot's C type is `query_device_ex_fn`; `unused_fn` only
    // stands in for it in the mirror, and the inline ibv_query_device_ex
    // calls it with exactly those arguments.
    vctx.query_device_ex = Some(unsafe {
        std::mem::transmute::<query_device_ex_fn, unsafe extern "C" fn()>(query_device_ex)
    });
    crate::qpex::install(&mut vctx);
    crate::dm::install(&mut vctx);
    crate::domain::install(&mut vctx);
    // SAFETY: the slot's C type is `AdviseMrFn`'s; `unused_fn` only stands
    // in for it in the mirror, and the inline ibv_advise_mr calls it with
    // exactly those arguments.
    vctx.advise_mr = Some(unsafe {
        std::mem::transmute::<crate::odp::AdviseMrFn, unsafe extern "C" fn()>(crate::odp::advise_mr)
    });
    vctx.context.device = dev;
    // A real descriptor, as a NIC's uverbs file is: programs dup it to
    // import the device (`ibv_import_device`, refused here with EOPNOTSUPP).
    vctx.context.cmd_fd = fds[0];
    vctx.context.async_fd = fds[0];
    vctx.context.num_comp_vectors = 1;
    vctx.context.mutex = libc::PTHREAD_MUTEX_INITIALIZER;
    vctx.context.abi_compat = VERBS_ABI_IS_EXTENDED;
    vctx.context.ops.poll_cq = Some(crate::post::poll_cq);
    vctx.context.ops.req_notify_cq = Some(crate::objects::req_notify_cq);
    vctx.context.ops.post_send = Some(crate::post::post_send);
    vctx.context.ops.post_recv = Some(crate::post::post_recv);
    crate::windows::install(&mut vctx.context.ops);
    // SAFETY: the slot's C type is `int (*)(struct ibv_srq *, struct
    // ibv_recv_wr *, struct ibv_recv_wr **)`; `unused_fn` only stands in for
    // it in the mirror, and the inline ibv_post_srq_recv calls it with
    // exactly those arguments.
    vctx.context.ops.post_srq_recv = Some(unsafe {
        std::mem::transmute::<crate::post::PostSrqRecvFn, unsafe extern "C" fn()>(
            crate::post::post_srq_recv,
        )
    });
    let shim = Box::new(ShimContext {
        vctx,
        backend,
        local,
        guid,
        async_wfd: fds[1],
    });
    let raw = Box::into_raw(shim);
    // SAFETY: raw is a fresh, valid allocation.
    unsafe { ptr::addr_of_mut!((*raw).vctx.context) }
}

#[no_mangle]
unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    // SAFETY: the export contract.
    let Some(c) = (unsafe { ShimContext::from_ptr(ctx) }) else {
        return libc::EINVAL;
    };
    let raw = ptr::from_ref(c).cast_mut();
    // SAFETY: the fds are ours; raw came from Box::into_raw in
    // ibv_open_device, and the program gives up the context here.
    crate::events::close_pipe(c.async_wfd);
    unsafe {
        libc::close((*raw).vctx.context.async_fd);
        libc::close((*raw).async_wfd);
        drop(Box::from_raw(raw));
    }
    0
}

fn ctx_or_einval<'a>(ctx: *mut ibv_context) -> Result<&'a ShimContext, c_int> {
    // SAFETY: the export contract.
    unsafe { ShimContext::from_ptr(ctx) }.ok_or(libc::EINVAL)
}

/// The device attributes this emulation reports.
pub(crate) fn device_attr(c: &ShimContext) -> Result<ibv_device_attr, c_int> {
    let a = c.backend.query_device().map_err(|e| fail(&e))?;
    let mut out = ibv_device_attr::default();
    copy_c(&mut out.fw_ver, &a.fw_ver);
    out.node_guid = c.guid.to_be();
    out.sys_image_guid = c.guid.to_be();
    out.max_mr_size = a.max_mr_size;
    out.page_size_cap = 0xFFFF_F000;
    out.vendor_id = if a.vendor_id == 0 {
        VENDOR_ID
    } else {
        a.vendor_id
    };
    out.vendor_part_id = VENDOR_PART_ID;
    out.hw_ver = 1;
    out.max_qp = 1 << 16;
    out.max_qp_wr = a.max_qp_wr as c_int;
    out.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | crate::windows::CAP_FLAGS;
    out.max_mw = crate::windows::MAX_MW;
    out.max_sge = verbs_emu::transport::MAX_SGE as c_int;
    out.max_sge_rd = verbs_emu::transport::MAX_SGE as c_int;
    out.max_cq = 1 << 16;
    out.max_cqe = a.max_cqe as c_int;
    out.max_mr = 1 << 16;
    out.max_pd = 1 << 16;
    out.max_qp_rd_atom = 16;
    out.max_res_rd_atom = 16 << 16;
    out.max_qp_init_rd_atom = 16;
    out.atomic_cap = IBV_ATOMIC_HCA;
    out.max_ah = 1 << 16;
    out.max_srq = 1 << 10;
    out.max_srq_wr = a.max_qp_wr as c_int;
    out.max_srq_sge = verbs_emu::transport::MAX_SGE as c_int;
    out.max_pkeys = 1;
    out.local_ca_ack_delay = 15;
    out.phys_port_cnt = a.phys_port_cnt;
    Ok(out)
}

/// The vendor id the device reports: `0xFFFFFF`, an IEEE OUI no company
/// holds, which software devices report (Soft-RoCE does): the emulation is
/// nobody's hardware, and claiming a vendor's id (Mellanox's `0x02c9`)
/// would send programs (UCX) down that vendor's private paths.
pub(crate) const VENDOR_ID: u32 = 0xFF_FFFF;
/// The part id under [`VENDOR_ID`]: `0x524C`, "RL" for rocelab, which no
/// other software device uses.
pub(crate) const VENDOR_PART_ID: u32 = 0x524C;

/// `IBV_DEVICE_RC_RNR_NAK_GEN` (`enum ibv_device_cap_flags`).
const IBV_DEVICE_RC_RNR_NAK_GEN: c_uint = 1 << 12;
/// `IBV_ATOMIC_HCA` (`enum ibv_atomic_cap`).
const IBV_ATOMIC_HCA: c_int = 1;

#[no_mangle]
unsafe extern "C" fn ibv_query_device(ctx: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int {
    let c = match ctx_or_einval(ctx) {
        Ok(c) => c,
        Err(e) => return e,
    };
    if attr.is_null() {
        return libc::EINVAL;
    }
    match device_attr(c) {
        Ok(a) => {
            // SAFETY: caller-provided output of this type.
            unsafe { *attr = a };
            0
        }
        Err(e) => e,
    }
}

/// `verbs_context.query_device_ex`: the device attributes, then the
/// extended ones this device has (one port, on-demand paging, device
/// memory's `max_dm_size`; no TSO, RSS or tag matching: those stay zero). Copies at most `size` bytes, so
/// programs built against an older, shorter struct get its prefix.
pub(crate) unsafe extern "C" fn query_device_ex(
    ctx: *mut ibv_context,
    input: *const ibv_query_device_ex_input,
    attr: *mut ibv_device_attr_ex,
    size: usize,
) -> c_int {
    let c = match ctx_or_einval(ctx) {
        Ok(c) => c,
        Err(e) => return e,
    };
    // SAFETY: the caller's input struct, or null.
    if attr.is_null() || (!input.is_null() && unsafe { (*input).comp_mask } != 0) {
        return libc::EINVAL;
    }
    let orig = match device_attr(c) {
        Ok(a) => a,
        Err(e) => return e,
    };
    if size < std::mem::size_of::<ibv_device_attr>() {
        return libc::EINVAL;
    }
    let out = ibv_device_attr_ex {
        orig_attr: orig,
        // The extended flags start with the plain ones (the kernel's).
        device_cap_flags_ex: u64::from(orig.device_cap_flags),
        odp_caps: crate::odp::odp_caps(&*c.backend),
        phys_port_cnt_ex: u32::from(orig.phys_port_cnt),
        max_dm_size: c.backend.dm_size(),
        ..Default::default()
    };
    let n = size.min(std::mem::size_of::<ibv_device_attr_ex>());
    // SAFETY: the caller's struct holds `size` bytes; we write at most that
    // many of ours.
    unsafe {
        ptr::copy_nonoverlapping(ptr::from_ref(&out).cast::<u8>(), attr.cast(), n);
        // A newer, longer struct: its fields this device has none of.
        ptr::write_bytes(attr.cast::<u8>().add(n), 0, size - n);
    }
    0
}

/// `IBV_GID_TYPE_SYSFS_ROCE_V2` (`enum ibv_gid_type_sysfs` of rdma-core's
/// provider header `infiniband/driver.h`): what `ibv_query_gid_type` answers.
const IBV_GID_TYPE_SYSFS_ROCE_V2: c_int = 1;
/// `IBV_PORT_CM_SUP` (`enum ibv_port_cap_flags`).
const IBV_PORT_CM_SUP: u32 = 1 << 16;
/// `IBV_PORT_IP_BASED_GIDS`.
const IBV_PORT_IP_BASED_GIDS: u32 = 1 << 26;

fn port_attr(c: &ShimContext, port: u8) -> Result<ibv_port_attr, c_int> {
    let p = c.backend.query_port(port).map_err(|e| fail(&e))?;
    Ok(ibv_port_attr {
        state: p.state,
        max_mtu: p.max_mtu.value(),
        active_mtu: p.active_mtu.value(),
        gid_tbl_len: p.gid_tbl_len as c_int,
        port_cap_flags: IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS,
        max_msg_sz: 1 << 31,
        pkey_tbl_len: 1,
        lid: lid_of(*c.local.ip()),
        // 4X at 25 Gb/s (EDR-like), the rate rxe reports over Ethernet.
        active_width: 2,
        active_speed: 32,
        phys_state: 5,
        link_layer: if p.link_layer_ethernet {
            IBV_LINK_LAYER_ETHERNET
        } else {
            IBV_LINK_LAYER_INFINIBAND
        },
        max_vl_num: 1,
        ..Default::default()
    })
}

/// `verbs_context.query_port`: what the inline `ibv_query_port` calls.
pub(crate) unsafe extern "C" fn query_port_ex(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    size: usize,
) -> c_int {
    let c = match ctx_or_einval(ctx) {
        Ok(c) => c,
        Err(e) => return e,
    };
    if attr.is_null() {
        return libc::EINVAL;
    }
    match port_attr(c, port) {
        Ok(a) => {
            let n = size.min(std::mem::size_of::<ibv_port_attr>());
            // SAFETY: the caller's struct holds `size` bytes; we copy at
            // most that many of ours.
            unsafe { ptr::copy_nonoverlapping(ptr::from_ref(&a).cast::<u8>(), attr.cast(), n) };
            0
        }
        Err(e) => e,
    }
}

/// The exported `ibv_query_port`, on the older layout (`_compat` struct:
/// everything up to `flags`).
#[no_mangle]
unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    let compat = offset_of!(ibv_port_attr, port_cap_flags2);
    // SAFETY: forwarded; the compat struct is `compat` bytes long.
    unsafe { query_port_ex(ctx, port, attr, compat) }
}

fn gid_entry(c: &ShimContext, port: u8, index: u32) -> Result<ibv_gid_entry, c_int> {
    let gid = c.backend.query_gid(port, index).map_err(|_| libc::EINVAL)?;
    Ok(ibv_gid_entry {
        gid: ibv_gid::from_bytes(gid.0),
        gid_index: index,
        port_num: u32::from(port),
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: 1,
    })
}

#[no_mangle]
unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    let Ok(c) = ctx_or_einval(ctx) else {
        return -1;
    };
    if gid.is_null() || index < 0 {
        return -1;
    }
    match gid_entry(c, port, index as u32) {
        Ok(e) => {
            // SAFETY: caller-provided output.
            unsafe { *gid = e.gid };
            0
        }
        Err(_) => -1,
    }
}

#[no_mangle]
unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    let c = match ctx_or_einval(ctx) {
        Ok(c) => c,
        Err(e) => return e,
    };
    if entry.is_null() || flags != 0 || entry_size < std::mem::size_of::<ibv_gid_entry>() {
        return libc::EINVAL;
    }
    let Ok(port) = u8::try_from(port) else {
        return libc::EINVAL;
    };
    match gid_entry(c, port, index) {
        Ok(e) => {
            // SAFETY: caller-provided output, checked large enough.
            unsafe { *entry = e };
            0
        }
        Err(e) => e,
    }
}

#[no_mangle]
unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    let c = match ctx_or_einval(ctx) {
        Ok(c) => c,
        Err(e) => return -(e as isize),
    };
    if entries.is_null() || flags != 0 || entry_size < std::mem::size_of::<ibv_gid_entry>() {
        return -(libc::EINVAL as isize);
    }
    if max_entries < 1 {
        return -(libc::EINVAL as isize);
    }
    match gid_entry(c, 1, 0) {
        Ok(e) => {
            // SAFETY: at least one entry of entry_size bytes.
            unsafe { *entries = e };
            1
        }
        Err(e) => -(e as isize),
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    let Ok(c) = ctx_or_einval(ctx) else {
        return -1;
    };
    if ty.is_null() || gid_entry(c, port, index).is_err() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // SAFETY: caller-provided output.
    unsafe { *ty = IBV_GID_TYPE_SYSFS_ROCE_V2 };
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    let Ok(c) = ctx_or_einval(ctx) else {
        return -1;
    };
    if pkey.is_null() || index != 0 || c.backend.query_port(port).is_err() {
        return -1;
    }
    // SAFETY: caller-provided output. The default P_Key, big-endian.
    unsafe { *pkey = 0xFFFFu16.to_be() };
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    let Ok(c) = ctx_or_einval(ctx) else {
        return -libc::EINVAL;
    };
    if c.backend.query_port(port).is_err() {
        return -libc::EINVAL;
    }
    if u16::from_be(pkey) & 0x7FFF == 0x7FFF {
        0
    } else {
        -libc::ENOENT
    }
}

#[no_mangle]
unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    let Ok(c) = ctx_or_einval(ctx) else {
        set_errno(libc::EINVAL);
        return -1;
    };
    if event.is_null() {
        set_errno(libc::EINVAL);
        return -1;
    }
    // The `events` module writes whole records to this pipe: a blocking
    // read waits for the next (as on a NIC) and a non-blocking one says
    // EAGAIN. The port never changes state, so no port event comes.
    let mut rec = [0u8; std::mem::size_of::<ibv_async_event>()];
    // SAFETY: reading into a local buffer of its size.
    let n = unsafe { libc::read(c.vctx.context.async_fd, rec.as_mut_ptr().cast(), rec.len()) };
    if n != rec.len() as isize {
        return -1;
    }
    // SAFETY: the writer wrote one whole ibv_async_event.
    unsafe { ptr::copy_nonoverlapping(rec.as_ptr(), event.cast::<u8>(), rec.len()) };
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_ack_async_event(_event: *mut ibv_async_event) {}
