//! The rest of rdma-core's exports: strings, rates, fork support, and the
//! verbs the emulation does not offer, which fail as rdma-core fails them
//! on a device without the capability.
//!
//! The `IBVERBS_PRIVATE_34` names are the interface between libibverbs and
//! its providers (`libmlx5`, `libefa`). Programs such as perftest link
//! those providers, so the loader needs the names to exist; the providers'
//! load-time registration (`verbs_register_driver_34`) is accepted and
//! ignored, and every command verb answers `EOPNOTSUPP`: no provider device
//! is ever opened through this library.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::OnceLock;

use verbs_emu::verbs::WcStatus;

use crate::set_errno;

/// rdma-core's text for each `ibv_wc_status` (the verbs API's strings).
fn wc_status_table() -> &'static [CString] {
    static T: OnceLock<Vec<CString>> = OnceLock::new();
    T.get_or_init(|| {
        (0..=23)
            .map(|v| {
                let s = WcStatus::from_value(v).map_or("unknown", |s| s.as_str());
                CString::new(s).unwrap_or_default()
            })
            .collect()
    })
}

#[no_mangle]
unsafe extern "C" fn ibv_wc_status_str(status: c_int) -> *const c_char {
    let t = wc_status_table();
    match usize::try_from(status).ok().and_then(|i| t.get(i)) {
        Some(s) => s.as_ptr(),
        None => c"unknown".as_ptr(),
    }
}

const EVENT_STR: [&CStr; 20] = [
    c"CQ error",
    c"local work queue catastrophic error",
    c"invalid request local work queue error",
    c"local access violation work queue error",
    c"communication established",
    c"send queue drained",
    c"path migrated",
    c"path migration request error",
    c"local catastrophic error",
    c"port active",
    c"port error",
    c"LID change",
    c"P_Key change",
    c"SM change",
    c"SRQ catastrophic error",
    c"SRQ limit reached",
    c"last WQE reached",
    c"client reregistration",
    c"GID table change",
    c"WQ fatal",
];

#[no_mangle]
unsafe extern "C" fn ibv_event_type_str(event: c_int) -> *const c_char {
    usize::try_from(event)
        .ok()
        .and_then(|i| EVENT_STR.get(i))
        .map_or(c"unknown".as_ptr(), |s| s.as_ptr())
}

const NODE_STR: [&CStr; 8] = [
    c"unknown",
    c"InfiniBand channel adapter",
    c"InfiniBand switch",
    c"InfiniBand router",
    c"iWARP NIC",
    c"usNIC",
    c"usNIC UDP",
    c"unspecified",
];

#[no_mangle]
unsafe extern "C" fn ibv_node_type_str(node: c_int) -> *const c_char {
    usize::try_from(node)
        .ok()
        .and_then(|i| NODE_STR.get(i))
        .map_or(c"unknown".as_ptr(), |s| s.as_ptr())
}

const PORT_STR: [&CStr; 6] = [
    c"PORT_NOP",
    c"PORT_DOWN",
    c"PORT_INIT",
    c"PORT_ARMED",
    c"PORT_ACTIVE",
    c"PORT_ACTIVE_DEFER",
];

#[no_mangle]
unsafe extern "C" fn ibv_port_state_str(state: c_int) -> *const c_char {
    usize::try_from(state)
        .ok()
        .and_then(|i| PORT_STR.get(i))
        .map_or(c"invalid state".as_ptr(), |s| s.as_ptr())
}

/// `enum ibv_rate` value, multiple of 2.5 Gb/s, and Mb/s (InfiniBand's
/// signalling rates, as rdma-core tabulates them).
const RATES: [(c_int, c_int, c_int); 21] = [
    (2, 1, 2500),
    (5, 2, 5000),
    (3, 4, 10000),
    (6, 8, 20000),
    (4, 12, 30000),
    (7, 16, 40000),
    (8, 24, 60000),
    (9, 32, 80000),
    (10, 48, 120000),
    (11, -1, 14062),
    (12, -1, 56250),
    (13, -1, 112500),
    (14, -1, 168750),
    (15, -1, 25781),
    (16, -1, 103125),
    (17, -1, 206250),
    (18, -1, 309375),
    (19, -1, 28125),
    (20, -1, 53125),
    (21, -1, 425000),
    (22, -1, 637500),
];

#[no_mangle]
unsafe extern "C" fn ibv_rate_to_mult(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.1)
}

#[no_mangle]
unsafe extern "C" fn mult_to_ibv_rate(mult: c_int) -> c_int {
    RATES
        .iter()
        .find(|r| r.1 == mult && mult > 0)
        .map_or(0, |r| r.0)
}

#[no_mangle]
unsafe extern "C" fn ibv_rate_to_mbps(rate: c_int) -> c_int {
    RATES.iter().find(|r| r.0 == rate).map_or(-1, |r| r.2)
}

#[no_mangle]
unsafe extern "C" fn mbps_to_ibv_rate(mbps: c_int) -> c_int {
    RATES.iter().find(|r| r.2 == mbps).map_or(0, |r| r.0)
}

// Fork support: the emulation's memory is ordinary process memory that no
// device reaches by DMA, so a child never corrupts a registration.

#[no_mangle]
unsafe extern "C" fn ibv_fork_init() -> c_int {
    0
}

/// `IBV_FORK_UNNEEDED` (`enum ibv_fork_status`).
const IBV_FORK_UNNEEDED: c_int = 2;

#[no_mangle]
unsafe extern "C" fn ibv_is_fork_initialized() -> c_int {
    IBV_FORK_UNNEEDED
}

#[no_mangle]
unsafe extern "C" fn ibv_dontfork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_dofork_range(_base: *mut c_void, _size: usize) -> c_int {
    0
}

#[no_mangle]
unsafe extern "C" fn ibv_get_sysfs_path() -> *const c_char {
    c"/sys".as_ptr()
}

/// The emulated devices have no sysfs files: every read fails as for a
/// missing file.
#[no_mangle]
unsafe extern "C" fn ibv_read_sysfs_file(
    _dir: *const c_char,
    _file: *const c_char,
    _buf: *mut c_char,
    _size: usize,
) -> c_int {
    set_errno(libc::ENOENT);
    -1
}

/// Providers register themselves at load time; none is used here.
#[no_mangle]
unsafe extern "C" fn ibv_register_driver(_name: *const c_char, _init: *mut c_void) {}

#[no_mangle]
unsafe extern "C" fn verbs_register_driver_34(_ops: *const c_void) {}

/// Whether data of `op` lands in order: the emulation promises nothing
/// beyond the transport's ordering, like a device without the capability.
#[no_mangle]
unsafe extern "C" fn ibv_query_qp_data_in_order(
    _qp: *mut c_void,
    _op: c_int,
    _flags: u32,
) -> c_int {
    0
}

/// `verbs_allow_disassociate_destroy`, read by providers.
#[no_mangle]
static mut verbs_allow_disassociate_destroy: bool = false;

/// Int-returning verbs without the capability here: `EOPNOTSUPP`, as
/// returned value and `errno`. Arguments are ignored, which the C calling
/// convention allows (the caller owns them).
macro_rules! unsupported_int {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        unsafe extern "C" fn $name() -> c_int {
            set_errno(libc::EOPNOTSUPP);
            libc::EOPNOTSUPP
        }
    )*};
}

/// Pointer-returning verbs without the capability: NULL, `errno`
/// `EOPNOTSUPP`.
macro_rules! unsupported_ptr {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        unsafe extern "C" fn $name() -> *mut c_void {
            set_errno(libc::EOPNOTSUPP);
            ptr::null_mut()
        }
    )*};
}

/// Verbs returning nothing: a no-op that sets `errno` `EOPNOTSUPP`.
macro_rules! unsupported_void {
    ($($name:ident),* $(,)?) => {$(
        #[no_mangle]
        unsafe extern "C" fn $name() {
            set_errno(libc::EOPNOTSUPP);
        }
    )*};
}

unsupported_int!(
    ibv_attach_mcast,
    ibv_detach_mcast,
    ibv_resolve_eth_l2_from_gid,
    ibv_query_ece,
    ibv_set_ece,
);

unsupported_ptr!(
    ibv_import_device,
    ibv_import_pd,
    ibv_import_mr,
    ibv_import_dm,
    ibv_reg_dmabuf_mr,
);

unsupported_void!(
    ibv_unimport_pd,
    ibv_unimport_mr,
    ibv_unimport_dm,
    ibv_copy_path_rec_from_kern,
    ibv_copy_path_rec_to_kern,
    ibv_copy_qp_attr_from_kern,
    ibv_copy_ah_attr_from_kern,
);

// IBVERBS_PRIVATE_34: the provider interface.
unsupported_int!(
    execute_ioctl,
    ibv_cmd_advise_mr,
    ibv_cmd_alloc_dm,
    ibv_cmd_alloc_mw,
    ibv_cmd_alloc_pd,
    ibv_cmd_attach_mcast,
    ibv_cmd_close_xrcd,
    ibv_cmd_create_ah,
    ibv_cmd_create_counters,
    ibv_cmd_create_cq_ex,
    ibv_cmd_create_flow,
    ibv_cmd_create_flow_action_esp,
    ibv_cmd_create_qp_ex,
    ibv_cmd_create_qp_ex2,
    ibv_cmd_create_rwq_ind_table,
    ibv_cmd_create_srq,
    ibv_cmd_create_srq_ex,
    ibv_cmd_create_wq,
    ibv_cmd_dealloc_mw,
    ibv_cmd_dealloc_pd,
    ibv_cmd_dereg_mr,
    ibv_cmd_destroy_ah,
    ibv_cmd_destroy_counters,
    ibv_cmd_destroy_cq,
    ibv_cmd_destroy_flow,
    ibv_cmd_destroy_flow_action,
    ibv_cmd_destroy_qp,
    ibv_cmd_destroy_rwq_ind_table,
    ibv_cmd_destroy_srq,
    ibv_cmd_destroy_wq,
    ibv_cmd_detach_mcast,
    ibv_cmd_free_dm,
    ibv_cmd_get_context,
    ibv_cmd_modify_cq,
    ibv_cmd_modify_flow_action_esp,
    ibv_cmd_modify_qp,
    ibv_cmd_modify_qp_ex,
    ibv_cmd_modify_srq,
    ibv_cmd_modify_wq,
    ibv_cmd_open_qp,
    ibv_cmd_open_xrcd,
    ibv_cmd_query_context,
    ibv_cmd_query_device_any,
    ibv_cmd_query_mr,
    ibv_cmd_query_port,
    ibv_cmd_query_qp,
    ibv_cmd_query_srq,
    ibv_cmd_read_counters,
    ibv_cmd_reg_dm_mr,
    ibv_cmd_reg_dmabuf_mr,
    ibv_cmd_reg_mr,
    ibv_cmd_rereg_mr,
    ibv_cmd_resize_cq,
);

unsupported_ptr!(_verbs_init_and_alloc_context, verbs_open_device);

unsupported_void!(
    __verbs_log,
    verbs_set_ops,
    verbs_init_cq,
    verbs_uninit_context
);

#[cfg(test)]
mod tests {
    use super::*;

    fn s(p: *const c_char) -> String {
        // SAFETY: our exports return static C strings.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    #[test]
    fn strings_are_rdma_cores() {
        // SAFETY: plain calls of our exports.
        unsafe {
            assert_eq!(s(ibv_wc_status_str(0)), "success");
            assert_eq!(s(ibv_wc_status_str(5)), "Work Request Flushed Error");
            assert_eq!(s(ibv_wc_status_str(-3)), "unknown");
            assert_eq!(s(ibv_port_state_str(4)), "PORT_ACTIVE");
            assert_eq!(s(ibv_port_state_str(9)), "invalid state");
            assert_eq!(s(ibv_node_type_str(1)), "InfiniBand channel adapter");
            assert_eq!(s(ibv_event_type_str(15)), "SRQ limit reached");
        }
    }

    #[test]
    fn rates_round_trip() {
        // SAFETY: plain calls of our exports.
        unsafe {
            for (rate, mult, mbps) in RATES {
                assert_eq!(ibv_rate_to_mbps(rate), mbps);
                assert_eq!(mbps_to_ibv_rate(mbps), rate);
                if mult > 0 {
                    assert_eq!(mult_to_ibv_rate(ibv_rate_to_mult(rate)), rate);
                }
            }
            assert_eq!(ibv_rate_to_mult(99), -1);
        }
    }
}
