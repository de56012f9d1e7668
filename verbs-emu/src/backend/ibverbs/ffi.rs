//! Our own `#[repr(C)]` mirror of the parts of rdma-core's
//! `<infiniband/verbs.h>` that the hardware backend uses.
//!
//! Names follow the C header exactly (so a reader can hold this file next to
//! `verbs.h`), which is why the types are `snake_case`. C enums are carried as
//! the integer type the C ABI gives them (`c_int`/`u32`), never as Rust enums:
//! a value the library adds later must not be undefined behaviour here. The
//! constants of those enums follow each struct that uses them.
//!
//! Every struct and every field below is checked against the installed C
//! header (size, alignment and offset) by the `ibverbs_abi` integration test,
//! which compiles a small C program against `<infiniband/verbs.h>`.
//!
//! Structs the backend only ever handles through pointers (SRQ, AH, MW,
//! completion channel, ...) are opaque.
//!
//! Layout reference: rdma-core, `libibverbs/verbs.h` (ABI stable since
//! `IBVERBS_1.1`; the `verbs_context` block "grows up" in front of
//! `ibv_context`).

#![allow(non_camel_case_types)]
#![allow(missing_docs)] // Field docs live in verbs.h; the names are identical.

use std::os::raw::{c_char, c_int, c_uint, c_void};

/// An opaque C struct we only handle by pointer.
macro_rules! opaque {
    ($($(#[$m:meta])* $name:ident),* $(,)?) => {$(
        $(#[$m])*
        #[repr(C)]
        pub struct $name {
            _private: [u8; 0],
        }
    )*};
}

opaque!(
    /// `struct ibv_mw`: memory window (not used by the backend).
    ibv_mw,
    /// `struct _compat_ibv_port_attr`: the pre-1.1 port attribute layout
    /// that the exported `ibv_query_port` symbol takes.
    _compat_ibv_port_attr,
);

/// An untyped C function pointer, for function-table slots the backend never
/// calls. Only its size and position matter.
pub type unused_fn = Option<unsafe extern "C" fn()>;

/// `union ibv_gid`: a 128-bit GID, in network byte order.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    pub raw: [u8; 16],
    pub global: ibv_gid_global,
}

/// The `global` view of `union ibv_gid` (both fields big-endian).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_gid_global {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

impl Default for ibv_gid {
    fn default() -> Self {
        Self { raw: [0; 16] }
    }
}

impl ibv_gid {
    /// The GID from its 16 wire bytes.
    pub fn from_bytes(raw: [u8; 16]) -> Self {
        Self { raw }
    }

    /// The GID's 16 wire bytes.
    pub fn bytes(&self) -> [u8; 16] {
        // SAFETY: both union views are 16 bytes of plain integers with no
        // invalid bit patterns, so reading `raw` is always defined.
        unsafe { self.raw }
    }
}

impl std::fmt::Debug for ibv_gid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ibv_gid({:02x?})", self.bytes())
    }
}

/// `struct _ibv_device_ops`: obsolete, kept for the layout of `ibv_device`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct _ibv_device_ops {
    pub _dummy1: unused_fn,
    pub _dummy2: unused_fn,
}

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

/// `struct ibv_device`: one entry of `ibv_get_device_list`.
#[repr(C)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    /// `enum ibv_node_type`.
    pub node_type: c_int,
    /// `enum ibv_transport_type`.
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// `IBV_NODE_CA` (`enum ibv_node_type`).
pub const IBV_NODE_CA: c_int = 1;
/// `IBV_NODE_RNIC` (`enum ibv_node_type`).
pub const IBV_NODE_RNIC: c_int = 4;
/// `IBV_TRANSPORT_IB` (`enum ibv_transport_type`): InfiniBand and RoCE.
pub const IBV_TRANSPORT_IB: c_int = 0;
/// `IBV_TRANSPORT_IWARP` (`enum ibv_transport_type`).
pub const IBV_TRANSPORT_IWARP: c_int = 1;

/// `ibv_context_ops.poll_cq`.
pub type poll_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
/// `ibv_context_ops.req_notify_cq`.
pub type req_notify_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
/// `ibv_context_ops.post_send`.
pub type post_send_fn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
/// `ibv_context_ops.post_recv`.
pub type post_recv_fn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
/// `verbs_context.query_port`: the extended port query with a size argument.
pub type query_port_ex_fn =
    unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;

/// `struct ibv_context_ops`: the provider's function table embedded in every
/// context. rdma-core's inline `ibv_poll_cq`, `ibv_req_notify_cq`,
/// `ibv_post_send` and `ibv_post_recv` call through it; so do we.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_context_ops {
    pub _compat_query_device: unused_fn,
    pub _compat_query_port: unused_fn,
    pub _compat_alloc_pd: unused_fn,
    pub _compat_dealloc_pd: unused_fn,
    pub _compat_reg_mr: unused_fn,
    pub _compat_rereg_mr: unused_fn,
    pub _compat_dereg_mr: unused_fn,
    pub alloc_mw: unused_fn,
    pub bind_mw: unused_fn,
    pub dealloc_mw: unused_fn,
    pub _compat_create_cq: unused_fn,
    pub poll_cq: Option<poll_cq_fn>,
    pub req_notify_cq: Option<req_notify_cq_fn>,
    pub _compat_cq_event: unused_fn,
    pub _compat_resize_cq: unused_fn,
    pub _compat_destroy_cq: unused_fn,
    pub _compat_create_srq: unused_fn,
    pub _compat_modify_srq: unused_fn,
    pub _compat_query_srq: unused_fn,
    pub _compat_destroy_srq: unused_fn,
    pub post_srq_recv: unused_fn,
    pub _compat_create_qp: unused_fn,
    pub _compat_query_qp: unused_fn,
    pub _compat_modify_qp: unused_fn,
    pub _compat_destroy_qp: unused_fn,
    pub post_send: Option<post_send_fn>,
    pub post_recv: Option<post_recv_fn>,
    pub _compat_create_ah: unused_fn,
    pub _compat_destroy_ah: unused_fn,
    pub _compat_attach_mcast: unused_fn,
    pub _compat_detach_mcast: unused_fn,
    pub _compat_async_event: unused_fn,
}

/// `struct ibv_context`: an open device.
#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: libc::pthread_mutex_t,
    /// `__VERBS_ABI_IS_EXTENDED` (all ones) when a [`verbs_context`] wraps
    /// this context.
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`: the `abi_compat` marker of an extended context.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `struct verbs_context`: the extended context that modern providers
/// allocate around `ibv_context` (which is its last field). Only
/// `query_port`, `sz` and `context` are read; every other slot is here for
/// its position.
#[repr(C)]
pub struct verbs_context {
    pub query_port: Option<query_port_ex_fn>,
    pub advise_mr: unused_fn,
    pub alloc_null_mr: unused_fn,
    pub read_counters: unused_fn,
    pub attach_counters_point_flow: unused_fn,
    pub create_counters: unused_fn,
    pub destroy_counters: unused_fn,
    pub reg_dm_mr: unused_fn,
    pub alloc_dm: unused_fn,
    pub free_dm: unused_fn,
    pub modify_flow_action_esp: unused_fn,
    pub destroy_flow_action: unused_fn,
    pub create_flow_action_esp: unused_fn,
    pub modify_qp_rate_limit: unused_fn,
    pub alloc_parent_domain: unused_fn,
    pub dealloc_td: unused_fn,
    pub alloc_td: unused_fn,
    pub modify_cq: unused_fn,
    pub post_srq_ops: unused_fn,
    pub destroy_rwq_ind_table: unused_fn,
    pub create_rwq_ind_table: unused_fn,
    pub destroy_wq: unused_fn,
    pub modify_wq: unused_fn,
    pub create_wq: unused_fn,
    pub query_rt_values: unused_fn,
    pub create_cq_ex: unused_fn,
    /// C name `priv` (a Rust keyword).
    pub priv_: *mut c_void,
    pub query_device_ex: unused_fn,
    pub ibv_destroy_flow: unused_fn,
    pub abi_placeholder2: unused_fn,
    pub ibv_create_flow: unused_fn,
    pub abi_placeholder1: unused_fn,
    pub open_qp: unused_fn,
    pub create_qp_ex: unused_fn,
    pub get_srq_num: unused_fn,
    pub create_srq_ex: unused_fn,
    pub open_xrcd: unused_fn,
    pub close_xrcd: unused_fn,
    pub _abi_placeholder3: u64,
    /// Size of the provider's `verbs_context`, counted from the first field
    /// it knows to the end: `verbs_get_ctx_op` compares slot offsets with it.
    pub sz: usize,
    pub context: ibv_context,
}

/// `struct ibv_device_attr`: `ibv_query_device` output.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    /// Big-endian.
    pub node_guid: u64,
    /// Big-endian.
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    /// `enum ibv_atomic_cap`.
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

impl Default for ibv_device_attr {
    fn default() -> Self {
        // SAFETY: every field is an integer or an integer array; all-zero is
        // a valid value of each.
        unsafe { std::mem::zeroed() }
    }
}

/// `struct ibv_port_attr`: `ibv_query_port` output.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_port_attr {
    /// `enum ibv_port_state`.
    pub state: u32,
    /// `enum ibv_mtu`.
    pub max_mtu: u32,
    /// `enum ibv_mtu`.
    pub active_mtu: u32,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `IBV_PORT_ACTIVE` (`enum ibv_port_state`).
pub const IBV_PORT_ACTIVE: u32 = 4;
/// `IBV_LINK_LAYER_INFINIBAND`.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
/// `IBV_LINK_LAYER_ETHERNET`: RoCE.
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `IBV_MTU_256` .. `IBV_MTU_4096` (`enum ibv_mtu`).
pub const IBV_MTU_256: u32 = 1;
/// `IBV_MTU_512`.
pub const IBV_MTU_512: u32 = 2;
/// `IBV_MTU_1024`.
pub const IBV_MTU_1024: u32 = 3;
/// `IBV_MTU_2048`.
pub const IBV_MTU_2048: u32 = 4;
/// `IBV_MTU_4096`.
pub const IBV_MTU_4096: u32 = 5;

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `IBV_ACCESS_LOCAL_WRITE` (`enum ibv_access_flags`).
pub const IBV_ACCESS_LOCAL_WRITE: c_uint = 1;
/// `IBV_ACCESS_REMOTE_WRITE`.
pub const IBV_ACCESS_REMOTE_WRITE: c_uint = 1 << 1;
/// `IBV_ACCESS_REMOTE_READ`.
pub const IBV_ACCESS_REMOTE_READ: c_uint = 1 << 2;
/// `IBV_ACCESS_REMOTE_ATOMIC`.
pub const IBV_ACCESS_REMOTE_ATOMIC: c_uint = 1 << 3;
/// `IBV_ACCESS_OPTIONAL_FIRST` (`IB_UVERBS_ACCESS_OPTIONAL_FIRST`).
pub const IBV_ACCESS_OPTIONAL_FIRST: c_uint = 1 << 20;
/// `IBV_ACCESS_OPTIONAL_LAST` (`IB_UVERBS_ACCESS_OPTIONAL_LAST`).
pub const IBV_ACCESS_OPTIONAL_LAST: c_uint = 1 << 29;
/// `IBV_ACCESS_OPTIONAL_RANGE`: access bits a kernel may ignore; the header's
/// `ibv_reg_mr` macro routes these to `ibv_reg_mr_iova2`.
pub const IBV_ACCESS_OPTIONAL_RANGE: c_uint =
    ((IBV_ACCESS_OPTIONAL_LAST << 1) - 1) & !(IBV_ACCESS_OPTIONAL_FIRST - 1);
/// `IBV_ACCESS_RELAXED_ORDERING`.
pub const IBV_ACCESS_RELAXED_ORDERING: c_uint = IBV_ACCESS_OPTIONAL_FIRST;

/// `struct ibv_srq`: a shared receive queue.
#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`: `ibv_create_srq` input (and `attr` output).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `IBV_SRQ_MAX_WR` (`enum ibv_srq_attr_mask`).
pub const IBV_SRQ_MAX_WR: c_int = 1;
/// `IBV_SRQ_LIMIT`.
pub const IBV_SRQ_LIMIT: c_int = 1 << 1;

/// `struct ibv_ah`: an address handle (UD destination).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

/// `struct ibv_gid_entry`: one GID table entry (`ibv_query_gid_ex`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    /// `enum ibv_gid_type`.
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

/// `IBV_GID_TYPE_ROCE_V2` (`enum ibv_gid_type`).
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;

/// `struct ibv_async_event`: C's `element` is a union of the object
/// pointers (CQ, QP, SRQ, WQ) and `int port_num`; `event_type` says which.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_async_event {
    pub element: *mut c_void,
    /// `enum ibv_event_type`.
    pub event_type: c_int,
}

/// `struct ibv_comp_channel`: a completion event channel; `fd` becomes
/// readable when an armed CQ gets a completion.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`: `ibv_create_qp` input (and `cap` output).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    pub sq_sig_all: c_int,
}

/// `IBV_QPT_RC` (`enum ibv_qp_type`).
pub const IBV_QPT_RC: u32 = 2;
/// `IBV_QPT_UC`.
pub const IBV_QPT_UC: u32 = 3;
/// `IBV_QPT_UD`.
pub const IBV_QPT_UD: u32 = 4;

/// `struct ibv_qp`.
#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    /// `enum ibv_qp_state`.
    pub state: u32,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

/// `struct ibv_global_route`: the GRH part of an address vector (RoCE
/// always uses it).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`: an address vector.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr`: `ibv_modify_qp` input; `attr_mask` says which
/// fields are meant.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_qp_attr {
    /// `enum ibv_qp_state`.
    pub qp_state: u32,
    /// `enum ibv_qp_state`.
    pub cur_qp_state: u32,
    /// `enum ibv_mtu`.
    pub path_mtu: u32,
    /// `enum ibv_mig_state`.
    pub path_mig_state: u32,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

/// `IBV_QPS_RESET` (`enum ibv_qp_state`).
pub const IBV_QPS_RESET: u32 = 0;
/// `IBV_QPS_INIT`.
pub const IBV_QPS_INIT: u32 = 1;
/// `IBV_QPS_RTR`.
pub const IBV_QPS_RTR: u32 = 2;
/// `IBV_QPS_RTS`.
pub const IBV_QPS_RTS: u32 = 3;
/// `IBV_QPS_SQD`.
pub const IBV_QPS_SQD: u32 = 4;
/// `IBV_QPS_SQE`.
pub const IBV_QPS_SQE: u32 = 5;
/// `IBV_QPS_ERR`.
pub const IBV_QPS_ERR: u32 = 6;
/// `IBV_QPS_UNKNOWN`.
pub const IBV_QPS_UNKNOWN: u32 = 7;

/// `IBV_QP_STATE` (`enum ibv_qp_attr_mask`).
pub const IBV_QP_STATE: c_int = 1;
/// `IBV_QP_CUR_STATE`.
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
/// `IBV_QP_ACCESS_FLAGS`.
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
/// `IBV_QP_PKEY_INDEX`.
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
/// `IBV_QP_PORT`.
pub const IBV_QP_PORT: c_int = 1 << 5;
/// `IBV_QP_QKEY`.
pub const IBV_QP_QKEY: c_int = 1 << 6;
/// `IBV_QP_AV`.
pub const IBV_QP_AV: c_int = 1 << 7;
/// `IBV_QP_PATH_MTU`.
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
/// `IBV_QP_TIMEOUT`.
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
/// `IBV_QP_RETRY_CNT`.
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
/// `IBV_QP_RNR_RETRY`.
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
/// `IBV_QP_RQ_PSN`.
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
/// `IBV_QP_MAX_QP_RD_ATOMIC`.
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
/// `IBV_QP_MIN_RNR_TIMER`.
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
/// `IBV_QP_SQ_PSN`.
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
/// `IBV_QP_MAX_DEST_RD_ATOMIC`.
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
/// `IBV_QP_CAP`.
pub const IBV_QP_CAP: c_int = 1 << 19;
/// `IBV_QP_DEST_QPN`.
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;

/// `struct ibv_sge`: one scatter/gather element.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `ibv_send_wr.wr.rdma`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.atomic`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

/// `ibv_send_wr.wr.ud`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ibv_send_wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// `ibv_send_wr.wr`: the union of the per-operation attributes; `opcode`
/// says which view is meant.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: ibv_send_wr_rdma,
    pub atomic: ibv_send_wr_atomic,
    pub ud: ibv_send_wr_ud,
}

/// `ibv_send_wr.qp_type.xrc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_xrc {
    pub remote_srqn: u32,
}

/// `ibv_send_wr.qp_type` (a one-member union in C).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_send_wr_qp_type {
    pub xrc: ibv_send_wr_xrc,
}

/// `struct ibv_mw_bind_info`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_mw_bind_info {
    pub mr: *mut ibv_mr,
    pub addr: u64,
    pub length: u64,
    pub mw_access_flags: c_uint,
}

/// `ibv_send_wr.bind_mw`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_bind_mw {
    pub mw: *mut ibv_mw,
    pub rkey: u32,
    pub bind_info: ibv_mw_bind_info,
}

/// `ibv_send_wr.tso`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_send_wr_tso {
    pub hdr: *mut c_void,
    pub hdr_sz: u16,
    pub mss: u16,
}

/// The last, anonymous union of `ibv_send_wr` (memory-window bind or TSO).
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_ext {
    pub bind_mw: ibv_send_wr_bind_mw,
    pub tso: ibv_send_wr_tso,
}

/// `struct ibv_send_wr`: a send-queue work request (a linked list via
/// `next`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    /// `enum ibv_wr_opcode`.
    pub opcode: u32,
    pub send_flags: c_uint,
    /// C: anonymous union `{ __be32 imm_data; uint32_t invalidate_rkey; }`;
    /// both are 32 bits at this offset. Immediate data is big-endian.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub qp_type: ibv_send_wr_qp_type,
    /// C: the anonymous union `{ bind_mw; tso; }`.
    pub ext: ibv_send_wr_ext,
}

impl Default for ibv_send_wr {
    fn default() -> Self {
        // SAFETY: integers, raw pointers (null) and unions of those: the
        // all-zero pattern is valid for every field.
        unsafe { std::mem::zeroed() }
    }
}

impl std::fmt::Debug for ibv_send_wr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ibv_send_wr")
            .field("wr_id", &self.wr_id)
            .field("next", &self.next)
            .field("sg_list", &self.sg_list)
            .field("num_sge", &self.num_sge)
            .field("opcode", &self.opcode)
            .field("send_flags", &self.send_flags)
            .field("imm_data", &self.imm_data)
            .finish_non_exhaustive()
    }
}

/// `IBV_WR_RDMA_WRITE` (`enum ibv_wr_opcode`).
pub const IBV_WR_RDMA_WRITE: u32 = 0;
/// `IBV_WR_RDMA_WRITE_WITH_IMM`.
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `IBV_WR_SEND`.
pub const IBV_WR_SEND: u32 = 2;
/// `IBV_WR_SEND_WITH_IMM`.
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
/// `IBV_WR_RDMA_READ`.
pub const IBV_WR_RDMA_READ: u32 = 4;
/// `IBV_WR_ATOMIC_CMP_AND_SWP`.
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
/// `IBV_WR_ATOMIC_FETCH_AND_ADD`.
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// `IBV_WR_ATOMIC_WRITE`: 8 bytes from the SGE list, `wr.rdma` names
/// where.
pub const IBV_WR_ATOMIC_WRITE: u32 = 15;
/// `IBV_WR_SEND_WITH_INV`: `imm_data` holds the rkey to invalidate.
pub const IBV_WR_SEND_WITH_INV: u32 = 9;

/// `IBV_SEND_FENCE` (`enum ibv_send_flags`).
pub const IBV_SEND_FENCE: c_uint = 1;
/// `IBV_SEND_SIGNALED`.
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
/// `IBV_SEND_SOLICITED`.
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
/// `IBV_SEND_INLINE`.
pub const IBV_SEND_INLINE: c_uint = 1 << 3;

/// `struct ibv_recv_wr`: a receive-queue work request.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_wc`: a work completion.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode`.
    pub opcode: u32,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// C: anonymous union `{ __be32 imm_data; uint32_t invalidated_rkey; }`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `IBV_WC_SUCCESS` (`enum ibv_wc_status`); the other statuses follow in
/// order up to `IBV_WC_TM_RNDV_INCOMPLETE` = 23.
pub const IBV_WC_SUCCESS: u32 = 0;
/// `IBV_WC_LOC_LEN_ERR`.
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
/// `IBV_WC_LOC_QP_OP_ERR`.
pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
/// `IBV_WC_LOC_PROT_ERR`.
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
/// `IBV_WC_WR_FLUSH_ERR`.
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
/// `IBV_WC_BAD_RESP_ERR`.
pub const IBV_WC_BAD_RESP_ERR: u32 = 7;
/// `IBV_WC_LOC_ACCESS_ERR`.
pub const IBV_WC_LOC_ACCESS_ERR: u32 = 8;
/// `IBV_WC_REM_INV_REQ_ERR`.
pub const IBV_WC_REM_INV_REQ_ERR: u32 = 9;
/// `IBV_WC_REM_ACCESS_ERR`.
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
/// `IBV_WC_REM_OP_ERR`.
pub const IBV_WC_REM_OP_ERR: u32 = 11;
/// `IBV_WC_RETRY_EXC_ERR`.
pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
/// `IBV_WC_RNR_RETRY_EXC_ERR`.
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// `IBV_WC_REM_ABORT_ERR`.
pub const IBV_WC_REM_ABORT_ERR: u32 = 16;
/// `IBV_WC_FATAL_ERR`.
pub const IBV_WC_FATAL_ERR: u32 = 19;
/// `IBV_WC_RESP_TIMEOUT_ERR`.
pub const IBV_WC_RESP_TIMEOUT_ERR: u32 = 20;
/// `IBV_WC_GENERAL_ERR`.
pub const IBV_WC_GENERAL_ERR: u32 = 21;

/// `IBV_WC_SEND` (`enum ibv_wc_opcode`).
pub const IBV_WC_SEND: u32 = 0;
/// `IBV_WC_RDMA_WRITE`.
pub const IBV_WC_RDMA_WRITE: u32 = 1;
/// `IBV_WC_RDMA_READ`.
pub const IBV_WC_RDMA_READ: u32 = 2;
/// `IBV_WC_COMP_SWAP`.
pub const IBV_WC_COMP_SWAP: u32 = 3;
/// `IBV_WC_FETCH_ADD`.
pub const IBV_WC_FETCH_ADD: u32 = 4;
/// `IBV_WC_RECV`: receive completions have this bit set.
pub const IBV_WC_RECV: u32 = 1 << 7;
/// `IBV_WC_RECV_RDMA_WITH_IMM`.
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = IBV_WC_RECV + 1;

/// `IBV_WC_GRH` (`enum ibv_wc_flags`): a GRH precedes a UD payload.
pub const IBV_WC_GRH: c_uint = 1;
/// `IBV_WC_WITH_IMM`: `imm_data` is valid.
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;
/// `IBV_WC_WITH_INV`: `imm_data` holds the invalidated rkey.
pub const IBV_WC_WITH_INV: c_uint = 1 << 3;
/// `IBV_WC_BIND_MW` (`enum ibv_wc_opcode`).
pub const IBV_WC_BIND_MW: u32 = 5;
/// `IBV_WC_LOCAL_INV`.
pub const IBV_WC_LOCAL_INV: u32 = 6;
/// `IBV_WC_ATOMIC_WRITE`.
pub const IBV_WC_ATOMIC_WRITE: u32 = 9;

// ------------------------------------------------------------------------
// Extended device attributes (`ibv_query_device_ex`), for the ibverbs shim.
// ------------------------------------------------------------------------

/// `verbs_context.query_device_ex`: what the inline `ibv_query_device_ex`
/// calls, with the size of the caller's struct.
pub type query_device_ex_fn = unsafe extern "C" fn(
    *mut ibv_context,
    *const ibv_query_device_ex_input,
    *mut ibv_device_attr_ex,
    usize,
) -> c_int;

/// `struct ibv_query_device_ex_input`: no input is defined yet.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_query_device_ex_input {
    pub comp_mask: u32,
}

/// `struct ibv_odp_caps`: on-demand paging capabilities.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_odp_caps {
    pub general_caps: u64,
    /// `rc_odp_caps`, `uc_odp_caps`, `ud_odp_caps`.
    pub per_transport_caps: [u32; 3],
}

/// `struct ibv_rss_caps`: receive-side scaling capabilities.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_rss_caps {
    pub supported_qpts: u32,
    pub max_rwq_indirection_tables: u32,
    pub max_rwq_indirection_table_size: u32,
    pub rx_hash_fields_mask: u64,
    pub rx_hash_function: u8,
}

/// `struct ibv_device_attr_ex`: `ibv_query_device_ex` output (rdma-core
/// 44: 400 bytes, `phys_port_cnt_ex` at 396).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub odp_caps: ibv_odp_caps,
    pub completion_timestamp_mask: u64,
    pub hca_core_clock: u64,
    pub device_cap_flags_ex: u64,
    /// `struct ibv_tso_caps`: `max_tso`, `supported_qpts`.
    pub tso_caps: [u32; 2],
    pub rss_caps: ibv_rss_caps,
    pub max_wq_type_rq: u32,
    /// `struct ibv_packet_pacing_caps`: `qp_rate_limit_min`,
    /// `qp_rate_limit_max`, `supported_qpts`.
    pub packet_pacing_caps: [u32; 3],
    pub raw_packet_caps: u32,
    /// `struct ibv_tm_caps`: `max_rndv_hdr_size`, `max_num_tags`, `flags`,
    /// `max_ops`, `max_sge`.
    pub tm_caps: [u32; 5],
    /// `struct ibv_cq_moderation_caps`: `max_cq_count`, `max_cq_period`.
    pub cq_mod_caps: [u16; 2],
    pub max_dm_size: u64,
    /// `struct ibv_pci_atomic_caps`: `fetch_add`, `swap`, `compare_swap`.
    pub pci_atomic_caps: [u16; 3],
    pub xrc_odp_caps: u32,
    pub phys_port_cnt_ex: u32,
}

#[cfg(test)]
mod device_attr_ex_layout {
    use super::*;

    #[test]
    fn device_attr_ex_has_rdma_core_44s_layout() {
        assert_eq!(std::mem::size_of::<ibv_device_attr_ex>(), 400);
        assert_eq!(std::mem::offset_of!(ibv_device_attr_ex, comp_mask), 232);
        assert_eq!(
            std::mem::offset_of!(ibv_device_attr_ex, max_wq_type_rq),
            328
        );
        assert_eq!(std::mem::offset_of!(ibv_device_attr_ex, max_dm_size), 376);
        assert_eq!(std::mem::offset_of!(ibv_device_attr_ex, xrc_odp_caps), 392);
        assert_eq!(
            std::mem::offset_of!(ibv_device_attr_ex, phys_port_cnt_ex),
            396
        );
    }
}

// ------------------------------------------------------------------------
// Extended QPs and CQs (`ibv_qp_ex`, `ibv_cq_ex`), for the ibverbs shim.
// ------------------------------------------------------------------------

/// `struct ibv_qp_init_attr_ex`: `verbs_context.create_qp_ex` input; its
/// first fields are `ibv_qp_init_attr`'s.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    pub sq_sig_all: c_int,
    /// `enum ibv_qp_init_attr_mask` bits.
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    /// `struct ibv_xrcd *`.
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    /// `struct ibv_rwq_ind_table *`.
    pub rwq_ind_tbl: *mut c_void,
    /// `struct ibv_rx_hash_conf`: function, key length, key pointer,
    /// fields mask.
    pub rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    /// `enum ibv_qp_create_send_ops_flags` bits.
    pub send_ops_flags: u64,
}

/// `IBV_QP_INIT_ATTR_PD` (`enum ibv_qp_init_attr_mask`).
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `IBV_QP_INIT_ATTR_XRCD`.
pub const IBV_QP_INIT_ATTR_XRCD: u32 = 1 << 1;
/// `IBV_QP_INIT_ATTR_CREATE_FLAGS`.
pub const IBV_QP_INIT_ATTR_CREATE_FLAGS: u32 = 1 << 2;
/// `IBV_QP_INIT_ATTR_SEND_OPS_FLAGS`.
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;

/// `IBV_QP_EX_WITH_RDMA_WRITE` (`enum ibv_qp_create_send_ops_flags`).
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
/// `IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM`.
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
/// `IBV_QP_EX_WITH_SEND`.
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
/// `IBV_QP_EX_WITH_SEND_WITH_IMM`.
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
/// `IBV_QP_EX_WITH_RDMA_READ`.
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
/// `IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP`.
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
/// `IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD`.
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
/// `IBV_QP_EX_WITH_LOCAL_INV`.
pub const IBV_QP_EX_WITH_LOCAL_INV: u64 = 1 << 7;
/// `IBV_QP_EX_WITH_BIND_MW`.
pub const IBV_QP_EX_WITH_BIND_MW: u64 = 1 << 8;
/// `IBV_QP_EX_WITH_SEND_WITH_INV`.
pub const IBV_QP_EX_WITH_SEND_WITH_INV: u64 = 1 << 9;
/// `IBV_QP_EX_WITH_ATOMIC_WRITE`.
pub const IBV_QP_EX_WITH_ATOMIC_WRITE: u64 = 1 << 12;

/// `struct ibv_data_buf`: one piece of inline data.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// The fields `struct ibv_qp_ex` adds after its `ibv_qp qp_base`: a record
/// holding `ibv_qp` then this struct has `ibv_qp_ex`'s layout (`ibv_qp` is
/// 160 bytes, a multiple of this struct's alignment).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_qp_ex_ops {
    pub comp_mask: u64,
    /// The id the next `wr_*` call gives its WR (the program sets it).
    pub wr_id: u64,
    /// The `ibv_send_flags` of the next WR (the program sets them).
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_mw, u32, *const ibv_mw_bind_info)>,
    pub wr_local_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    /// The immediate is `__be32`, as the program passes it.
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_tso: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, u16, u16)>,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<unsafe extern "C" fn(*mut ibv_qp_ex)>,
    pub wr_atomic_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, *const c_void)>,
}

/// `struct ibv_qp_ex`: the QP and its `ibv_wr_*` post API.
#[repr(C)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub ops: ibv_qp_ex_ops,
}

/// `verbs_context.create_qp_ex`.
pub type create_qp_ex_fn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;

/// `struct ibv_cq_init_attr_ex`: `verbs_context.create_cq_ex` input.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    /// `enum ibv_create_cq_wc_flags` bits.
    pub wc_flags: u64,
    /// `enum ibv_cq_init_attr_mask` bits.
    pub comp_mask: u32,
    /// `enum ibv_create_cq_attr_flags` bits.
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

/// `IBV_CQ_INIT_ATTR_MASK_FLAGS` (`enum ibv_cq_init_attr_mask`).
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1 << 0;
/// `IBV_CQ_INIT_ATTR_MASK_PD`.
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
/// `IBV_CREATE_CQ_ATTR_SINGLE_THREADED` (`enum ibv_create_cq_attr_flags`).
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1 << 0;
/// `IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN`.
pub const IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN: u32 = 1 << 1;
/// `IBV_WC_STANDARD_FLAGS` (`enum ibv_create_cq_wc_flags`): byte length,
/// immediate, QP number, source QP, SLID, SL, DLID path bits.
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7F;

/// `struct ibv_poll_cq_attr`: `start_poll` input (no fields defined).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_poll_cq_attr {
    pub comp_mask: u32,
}

/// The fields `struct ibv_cq_ex` adds after the fields it shares with
/// `ibv_cq` (128 bytes): a record holding `ibv_cq` then this struct has
/// `ibv_cq_ex`'s layout.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_cq_ex_ops {
    pub comp_mask: u32,
    /// `enum ibv_wc_status` of the current completion.
    pub status: u32,
    /// `wr_id` of the current completion.
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut ibv_poll_cq_attr) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_vendor_err: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    /// Returns `__be32`.
    pub read_imm_data: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint>,
    pub read_slid: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_completion_ts: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
    pub read_cvlan: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u16>,
    pub read_flow_tag: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_tm_info: unused_fn,
    pub read_completion_wallclock_ns: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u64>,
}

/// `struct ibv_cq_ex`: the CQ and its `ibv_start_poll` API.
#[repr(C)]
pub struct ibv_cq_ex {
    pub cq: ibv_cq,
    pub ops: ibv_cq_ex_ops,
}

/// `verbs_context.create_cq_ex`.
pub type create_cq_ex_fn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;

#[cfg(test)]
mod extended_layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn qp_ex_and_cq_ex_have_rdma_core_44s_layout() {
        assert_eq!(size_of::<ibv_qp>(), 160);
        assert_eq!(offset_of!(ibv_qp_ex, ops), 160);
        assert_eq!(offset_of!(ibv_qp_ex_ops, wr_atomic_cmp_swp), 24);
        assert_eq!(offset_of!(ibv_qp_ex_ops, wr_start), 24 + 17 * 8);
        assert_eq!(size_of::<ibv_qp_ex>(), 160 + 24 + 21 * 8);
        assert_eq!(size_of::<ibv_cq>(), 128);
        assert_eq!(offset_of!(ibv_cq_ex, ops), 128);
        assert_eq!(offset_of!(ibv_cq_ex_ops, start_poll), 16);
        assert_eq!(size_of::<ibv_cq_ex>(), 128 + 16 + 18 * 8);
        assert_eq!(offset_of!(ibv_qp_init_attr_ex, comp_mask), 60);
        assert_eq!(offset_of!(ibv_qp_init_attr_ex, send_ops_flags), 128);
        assert_eq!(size_of::<ibv_qp_init_attr_ex>(), 136);
        assert_eq!(offset_of!(ibv_cq_init_attr_ex, wc_flags), 32);
        assert_eq!(size_of::<ibv_cq_init_attr_ex>(), 56);
    }
}

// ------------------------------------------------------------------------
// Device memory, thread domains and parent domains, for the ibverbs shim.
// ------------------------------------------------------------------------

/// `struct ibv_alloc_dm_attr`: `ibv_alloc_dm` input.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_alloc_dm_attr {
    pub length: usize,
    pub log_align_req: u32,
    pub comp_mask: u32,
}

/// `struct ibv_dm`: an allocation of device memory. The inline
/// `ibv_memcpy_to_dm` and `ibv_memcpy_from_dm` call its function pointers.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_dm {
    pub context: *mut ibv_context,
    pub memcpy_to_dm: Option<memcpy_to_dm_fn>,
    pub memcpy_from_dm: Option<memcpy_from_dm_fn>,
    /// `enum ibv_dm_mask` bits: which of the fields below are valid.
    pub comp_mask: u32,
    pub handle: u32,
}

/// `IBV_DM_MASK_HANDLE` (`enum ibv_dm_mask`): `ibv_dm.handle` is valid.
pub const IBV_DM_MASK_HANDLE: u32 = 1 << 0;
/// `IBV_ACCESS_ZERO_BASED` (`enum ibv_access_flags`).
pub const IBV_ACCESS_ZERO_BASED: c_uint = 1 << 5;

/// `ibv_dm.memcpy_to_dm`.
pub type memcpy_to_dm_fn = unsafe extern "C" fn(*mut ibv_dm, u64, *const c_void, usize) -> c_int;
/// `ibv_dm.memcpy_from_dm`.
pub type memcpy_from_dm_fn = unsafe extern "C" fn(*mut c_void, *mut ibv_dm, u64, usize) -> c_int;
/// `verbs_context.alloc_dm`.
pub type alloc_dm_fn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_alloc_dm_attr) -> *mut ibv_dm;
/// `verbs_context.free_dm`.
pub type free_dm_fn = unsafe extern "C" fn(*mut ibv_dm) -> c_int;
/// `verbs_context.reg_dm_mr`.
pub type reg_dm_mr_fn =
    unsafe extern "C" fn(*mut ibv_pd, *mut ibv_dm, u64, usize, c_uint) -> *mut ibv_mr;

/// `struct ibv_td_init_attr`: `ibv_alloc_td` input (no fields defined).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_td_init_attr {
    pub comp_mask: u32,
}

/// `struct ibv_td`: a thread domain.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_td {
    pub context: *mut ibv_context,
}

/// `verbs_context.alloc_td`.
pub type alloc_td_fn = unsafe extern "C" fn(*mut ibv_context, *mut ibv_td_init_attr) -> *mut ibv_td;
/// `verbs_context.dealloc_td`.
pub type dealloc_td_fn = unsafe extern "C" fn(*mut ibv_td) -> c_int;

/// `ibv_parent_domain_init_attr.alloc`: a buffer of `size` bytes aligned
/// to `alignment` for the provider's resource `resource_type`; NULL for
/// none, [`IBV_ALLOCATOR_USE_DEFAULT`] for the provider's own allocator.
pub type pd_alloc_fn =
    unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, usize, u64) -> *mut c_void;
/// `ibv_parent_domain_init_attr.free`: give back what `alloc` returned.
pub type pd_free_fn = unsafe extern "C" fn(*mut ibv_pd, *mut c_void, *mut c_void, u64);

/// `IBV_ALLOCATOR_USE_DEFAULT`: `(void *)-1`, an allocator's answer that
/// the provider should allocate as it does without one.
pub const IBV_ALLOCATOR_USE_DEFAULT: *mut c_void = usize::MAX as *mut c_void;

/// `struct ibv_parent_domain_init_attr`: `ibv_alloc_parent_domain` input.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_parent_domain_init_attr {
    pub pd: *mut ibv_pd,
    pub td: *mut ibv_td,
    /// `enum ibv_parent_domain_init_attr_mask` bits.
    pub comp_mask: u32,
    pub alloc: Option<pd_alloc_fn>,
    pub free: Option<pd_free_fn>,
    pub pd_context: *mut c_void,
}

/// `IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS`
/// (`enum ibv_parent_domain_init_attr_mask`): `alloc` and `free` are set.
pub const IBV_PARENT_DOMAIN_INIT_ATTR_ALLOCATORS: u32 = 1 << 0;
/// `IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT`: `pd_context` is set.
pub const IBV_PARENT_DOMAIN_INIT_ATTR_PD_CONTEXT: u32 = 1 << 1;

/// `verbs_context.alloc_parent_domain`.
pub type alloc_parent_domain_fn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_parent_domain_init_attr) -> *mut ibv_pd;

#[cfg(test)]
mod domain_layout {
    use super::*;
    use std::mem::{offset_of, size_of};

    #[test]
    fn dm_and_parent_domain_structs_have_rdma_core_44s_layout() {
        assert_eq!(size_of::<ibv_alloc_dm_attr>(), 16);
        assert_eq!(offset_of!(ibv_dm, comp_mask), 24);
        assert_eq!(offset_of!(ibv_dm, handle), 28);
        assert_eq!(size_of::<ibv_dm>(), 32);
        assert_eq!(offset_of!(ibv_parent_domain_init_attr, comp_mask), 16);
        assert_eq!(offset_of!(ibv_parent_domain_init_attr, alloc), 24);
        assert_eq!(offset_of!(ibv_parent_domain_init_attr, pd_context), 40);
        assert_eq!(size_of::<ibv_parent_domain_init_attr>(), 48);
    }
}
