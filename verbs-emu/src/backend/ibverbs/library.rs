//! Loading libibverbs at run time and resolving the exported verbs.
//!
//! `dlsym` returns a symbol's *default* version (`@@IBVERBS_1.1`), which is
//! the one a program compiled against the current header links to. Verbs the
//! header implements as inline functions (`ibv_post_send`, `ibv_post_recv`,
//! `ibv_poll_cq`, `ibv_req_notify_cq`) are not resolved here: they are called
//! through the context's function table (see `objects.rs`). Two exported
//! symbols are only the fallback of a header macro:
//!
//! * `ibv_query_port` takes the old `_compat_ibv_port_attr`; the header's
//!   `ibv_query_port` macro prefers `verbs_context::query_port`.
//! * `ibv_reg_mr` is what the header's macro calls when no optional access
//!   bit is set; otherwise it calls `ibv_reg_mr_iova2` (IBVERBS_1.8), which
//!   is resolved as optional so an older library still loads.

use std::os::raw::{c_char, c_int, c_uint, c_void};

use libloading::Library;

use super::error::{IbverbsError, Result};
use super::ffi::*;

/// The exported libibverbs functions the backend calls, resolved once.
///
/// Each field is the libibverbs function of the same name (`ibv_` dropped),
/// with `verbs.h`'s prototype. The function pointers are valid for as long
/// as `_library` is loaded, which is as long as this value lives. The
/// drop-in librdmacm reaches the drop-in libibverbs through this table too.
#[allow(missing_docs)]
pub struct Verbs {
    pub library_name: String,
    pub get_device_list: unsafe extern "C" fn(*mut c_int) -> *mut *mut ibv_device,
    pub free_device_list: unsafe extern "C" fn(*mut *mut ibv_device),
    pub get_device_name: unsafe extern "C" fn(*mut ibv_device) -> *const c_char,
    pub get_device_guid: unsafe extern "C" fn(*mut ibv_device) -> u64,
    pub open_device: unsafe extern "C" fn(*mut ibv_device) -> *mut ibv_context,
    pub close_device: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    pub query_device: unsafe extern "C" fn(*mut ibv_context, *mut ibv_device_attr) -> c_int,
    pub query_port_compat:
        unsafe extern "C" fn(*mut ibv_context, u8, *mut _compat_ibv_port_attr) -> c_int,
    pub query_gid: unsafe extern "C" fn(*mut ibv_context, u8, c_int, *mut ibv_gid) -> c_int,
    pub alloc_pd: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_pd,
    pub dealloc_pd: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    pub reg_mr: unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, c_int) -> *mut ibv_mr,
    pub reg_mr_iova2:
        Option<unsafe extern "C" fn(*mut ibv_pd, *mut c_void, usize, u64, c_uint) -> *mut ibv_mr>,
    pub dereg_mr: unsafe extern "C" fn(*mut ibv_mr) -> c_int,
    pub create_cq: unsafe extern "C" fn(
        *mut ibv_context,
        c_int,
        *mut c_void,
        *mut ibv_comp_channel,
        c_int,
    ) -> *mut ibv_cq,
    pub destroy_cq: unsafe extern "C" fn(*mut ibv_cq) -> c_int,
    pub create_comp_channel: unsafe extern "C" fn(*mut ibv_context) -> *mut ibv_comp_channel,
    pub destroy_comp_channel: unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int,
    pub get_cq_event:
        unsafe extern "C" fn(*mut ibv_comp_channel, *mut *mut ibv_cq, *mut *mut c_void) -> c_int,
    pub ack_cq_events: unsafe extern "C" fn(*mut ibv_cq, c_uint),
    pub create_qp: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_qp_init_attr) -> *mut ibv_qp,
    pub modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    pub query_qp:
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int, *mut ibv_qp_init_attr) -> c_int,
    pub destroy_qp: unsafe extern "C" fn(*mut ibv_qp) -> c_int,
    pub create_ah: unsafe extern "C" fn(*mut ibv_pd, *mut ibv_ah_attr) -> *mut ibv_ah,
    pub destroy_ah: unsafe extern "C" fn(*mut ibv_ah) -> c_int,
    /// Keeps the code behind every pointer above mapped. Declared last so it
    /// is dropped last.
    _library: Library,
}

impl std::fmt::Debug for Verbs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verbs")
            .field("library", &self.library_name)
            .field("reg_mr_iova2", &self.reg_mr_iova2.is_some())
            .finish_non_exhaustive()
    }
}

impl Verbs {
    /// Opens `library` (a file name searched the dynamic loader's way, or a
    /// path) and resolves every symbol. Never panics.
    pub fn load(library: &str) -> Result<Self> {
        // SAFETY: loading a shared library runs its initialisers. libibverbs'
        // constructors only set up internal state (no threads, no signal
        // handlers); this is the same load a program linked with -libverbs
        // performs at start-up.
        let lib =
            unsafe { Library::new(library) }.map_err(|error| IbverbsError::LibraryNotFound {
                library: library.to_owned(),
                reason: error.to_string(),
            })?;

        macro_rules! symbol {
            ($name:literal) => {{
                // SAFETY: the type we read the symbol as is the prototype of
                // the same name in <infiniband/verbs.h> (default symbol
                // version), with our #[repr(C)] mirrors of its structs; the
                // pointer is copied out and used only while `lib` is kept
                // alive inside the returned `Verbs`.
                match unsafe { lib.get(concat!($name, "\0").as_bytes()) } {
                    Ok(symbol) => Ok(*symbol),
                    Err(error) => Err(IbverbsError::MissingSymbol {
                        library: library.to_owned(),
                        symbol: $name,
                        reason: error.to_string(),
                    }),
                }
            }};
        }

        Ok(Self {
            library_name: library.to_owned(),
            get_device_list: symbol!("ibv_get_device_list")?,
            free_device_list: symbol!("ibv_free_device_list")?,
            get_device_name: symbol!("ibv_get_device_name")?,
            get_device_guid: symbol!("ibv_get_device_guid")?,
            open_device: symbol!("ibv_open_device")?,
            close_device: symbol!("ibv_close_device")?,
            query_device: symbol!("ibv_query_device")?,
            query_port_compat: symbol!("ibv_query_port")?,
            query_gid: symbol!("ibv_query_gid")?,
            alloc_pd: symbol!("ibv_alloc_pd")?,
            dealloc_pd: symbol!("ibv_dealloc_pd")?,
            reg_mr: symbol!("ibv_reg_mr")?,
            reg_mr_iova2: symbol!("ibv_reg_mr_iova2").ok(),
            dereg_mr: symbol!("ibv_dereg_mr")?,
            create_cq: symbol!("ibv_create_cq")?,
            destroy_cq: symbol!("ibv_destroy_cq")?,
            create_comp_channel: symbol!("ibv_create_comp_channel")?,
            destroy_comp_channel: symbol!("ibv_destroy_comp_channel")?,
            get_cq_event: symbol!("ibv_get_cq_event")?,
            ack_cq_events: symbol!("ibv_ack_cq_events")?,
            create_qp: symbol!("ibv_create_qp")?,
            modify_qp: symbol!("ibv_modify_qp")?,
            query_qp: symbol!("ibv_query_qp")?,
            destroy_qp: symbol!("ibv_destroy_qp")?,
            create_ah: symbol!("ibv_create_ah")?,
            destroy_ah: symbol!("ibv_destroy_ah")?,
            _library: lib,
        })
    }
}

/// Sets errno to 0, so that a verb which fails without setting it is not
/// blamed for an older error.
pub(crate) fn clear_errno() {
    #[cfg(target_os = "linux")]
    // SAFETY: __errno_location returns this thread's errno slot, always a
    // valid, aligned int for the life of the thread.
    unsafe {
        *libc::__errno_location() = 0;
    }
}

/// This thread's errno (0 if none is set).
pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
