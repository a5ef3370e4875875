//! Run-time loading of `libibverbs.so.1`, `libmlx5.so.1` and `librdmacm.so.1` with `dlopen`.
//!
//! Nothing links rdma-core at build time: the crate builds and its host tests run on a machine
//! without it, and every entry point then returns [`Error::LibraryMissing`] ("libibverbs.so.1
//! not found: install rdma-core / libibverbs1"). Each library is opened once, on first use,
//! and stays loaded for the life of the process (the function pointers handed out are
//! `'static`). `libmlx5.so.1` is loaded separately and lazily: its absence only matters to the
//! mlx5 provider; `librdmacm.so.1` likewise, only connecting by address needs
//! it.
//!
//! `dlsym` resolves the default version of a versioned symbol (`ibv_query_port@@IBVERBS_1.1`,
//! `mlx5dv_init_obj@@MLX5_1.2`), which is the one a program compiled against rdma-core 44
//! headers binds to.
//!
//! Three environment variables override the sonames (for tests and unusual installs):
//! `RDMA_DIRECT_LIBIBVERBS`, `RDMA_DIRECT_LIBMLX5` and `RDMA_DIRECT_LIBRDMACM`.

use super::cm::*;
use super::ext::*;
use super::types::*;
use crate::error::{Error, Result};
use libc::{c_char, c_int, c_uint, c_void};
use std::ffi::{CStr, CString};
use std::mem::size_of;
use std::sync::OnceLock;

/// The soname of libibverbs.
pub const LIBIBVERBS: &str = "libibverbs.so.1";
/// The soname of the mlx5 direct-verbs library.
pub const LIBMLX5: &str = "libmlx5.so.1";
/// The soname of the RDMA connection manager library.
pub const LIBRDMACM: &str = "librdmacm.so.1";
/// What to install when librdmacm is missing.
pub const LIBRDMACM_HINT: &str = "install rdma-core's librdmacm (Debian/Ubuntu: librdmacm1)";
/// What to install when libibverbs is missing.
pub const LIBIBVERBS_HINT: &str = "install rdma-core / libibverbs1";
/// What to install when libmlx5 is missing.
pub const LIBMLX5_HINT: &str = "install rdma-core / ibverbs-providers (libmlx5-1)";

/// A `dlopen`ed library that is never closed.
struct Library {
    handle: *mut c_void,
    lib: &'static str,
}

impl Library {
    /// Opens `path` (a soname or a file path); `lib` names it in errors.
    fn open(path: &str, lib: &'static str, hint: &'static str) -> Result<Library> {
        let cpath = CString::new(path).map_err(|_| Error::LibraryMissing {
            lib,
            detail: format!("library path {path:?} contains a NUL byte"),
            hint,
        })?;
        // SAFETY: `cpath` is a valid NUL-terminated string; dlopen has no other precondition.
        // Loading runs the library's constructors, which is what using it requires.
        let handle = unsafe { libc::dlopen(cpath.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if handle.is_null() {
            return Err(Error::LibraryMissing {
                lib,
                detail: dlerror_string().unwrap_or_else(|| format!("dlopen({path}) failed")),
                hint,
            });
        }
        Ok(Library { handle, lib })
    }

    /// The address of `symbol` (given with its trailing NUL).
    fn sym(&self, symbol: &'static str) -> Result<*mut c_void> {
        debug_assert!(symbol.ends_with('\0'));
        // SAFETY: `handle` came from a successful dlopen and is never closed; `symbol` is
        // NUL-terminated (all call sites pass literals ending in "\0").
        let p = unsafe { libc::dlsym(self.handle, symbol.as_ptr().cast()) };
        if p.is_null() {
            return Err(Error::SymbolMissing {
                lib: self.lib,
                symbol: symbol.trim_end_matches('\0'),
            });
        }
        Ok(p)
    }
}

/// Reinterprets a symbol address as a function pointer of type `F`.
///
/// # Safety
/// `p` must be the non-null address of a function whose C prototype matches `F`, an
/// `extern "C" fn` pointer type.
unsafe fn fn_from_ptr<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(size_of::<F>(), size_of::<*mut c_void>());
    // SAFETY: same size (checked above); the caller guarantees `p` is a function of type `F`.
    unsafe { std::mem::transmute_copy::<*mut c_void, F>(&p) }
}

fn dlerror_string() -> Option<String> {
    // SAFETY: dlerror returns null or a NUL-terminated string valid until the next dl* call
    // on this thread; we copy it out immediately.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        None
    } else {
        // SAFETY: non-null, NUL-terminated (see above).
        Some(unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned())
    }
}

/// Resolves each field of a function table from a library: `fn_table!(lib, Type { a, b })`
/// looks up the symbols "a" and "b" and transmutes them to the field types.
macro_rules! fn_table {
    ($lib:expr, $ty:ident { $($name:ident),* $(,)? }) => {{
        let lib = $lib;
        $ty {
            $(
                $name: {
                    let p = lib.sym(concat!(stringify!($name), "\0"))?;
                    // SAFETY: `p` is the non-null address of the exported C function of that
                    // name in rdma-core 44, whose prototype (from verbs.h / mlx5dv.h) is the
                    // field's type.
                    unsafe { fn_from_ptr(p) }
                },
            )*
        }
    }};
}

/// The libibverbs functions the crate calls, resolved from `libibverbs.so.1`.
///
/// Each is the C function of the same name (see `verbs.h`); calling one is `unsafe` with the
/// preconditions the C documentation gives. The data-path entry points (`post_send`, ...) are
/// not here: they live in each context's ops table, see [`crate::ffi::ops`].
#[allow(missing_docs)]
pub struct Verbs {
    pub ibv_get_device_list: unsafe extern "C" fn(num_devices: *mut c_int) -> *mut *mut ibv_device,
    pub ibv_free_device_list: unsafe extern "C" fn(list: *mut *mut ibv_device),
    pub ibv_get_device_name: unsafe extern "C" fn(device: *mut ibv_device) -> *const c_char,
    /// Returns the node GUID in network order.
    pub ibv_get_device_guid: unsafe extern "C" fn(device: *mut ibv_device) -> u64,
    pub ibv_open_device: unsafe extern "C" fn(device: *mut ibv_device) -> *mut ibv_context,
    pub ibv_close_device: unsafe extern "C" fn(context: *mut ibv_context) -> c_int,
    pub ibv_query_device:
        unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_device_attr) -> c_int,
    /// The exported (compat) entry point: fills `ibv_port_attr` up to `flags`. Zero the
    /// struct first, as verbs.h's inline wrapper does.
    pub ibv_query_port: unsafe extern "C" fn(
        context: *mut ibv_context,
        port_num: u8,
        attr: *mut ibv_port_attr,
    ) -> c_int,
    pub ibv_query_gid: unsafe extern "C" fn(
        context: *mut ibv_context,
        port_num: u8,
        index: c_int,
        gid: *mut ibv_gid,
    ) -> c_int,
    pub ibv_alloc_pd: unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_pd,
    pub ibv_dealloc_pd: unsafe extern "C" fn(pd: *mut ibv_pd) -> c_int,
    pub ibv_reg_mr: unsafe extern "C" fn(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        length: usize,
        access: c_int,
    ) -> *mut ibv_mr,
    /// Needed for access flags at or above `IBV_ACCESS_OPTIONAL_FIRST` (relaxed ordering).
    pub ibv_reg_mr_iova2: unsafe extern "C" fn(
        pd: *mut ibv_pd,
        addr: *mut c_void,
        length: usize,
        iova: u64,
        access: c_uint,
    ) -> *mut ibv_mr,
    pub ibv_dereg_mr: unsafe extern "C" fn(mr: *mut ibv_mr) -> c_int,
    pub ibv_create_cq: unsafe extern "C" fn(
        context: *mut ibv_context,
        cqe: c_int,
        cq_context: *mut c_void,
        channel: *mut ibv_comp_channel,
        comp_vector: c_int,
    ) -> *mut ibv_cq,
    pub ibv_destroy_cq: unsafe extern "C" fn(cq: *mut ibv_cq) -> c_int,
    pub ibv_create_srq:
        unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> *mut ibv_srq,
    pub ibv_modify_srq:
        unsafe extern "C" fn(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> c_int,
    pub ibv_query_srq: unsafe extern "C" fn(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> c_int,
    pub ibv_destroy_srq: unsafe extern "C" fn(srq: *mut ibv_srq) -> c_int,
    pub ibv_create_qp:
        unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp,
    pub ibv_destroy_qp: unsafe extern "C" fn(qp: *mut ibv_qp) -> c_int,
    pub ibv_modify_qp:
        unsafe extern "C" fn(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int,
    pub ibv_query_qp: unsafe extern "C" fn(
        qp: *mut ibv_qp,
        attr: *mut ibv_qp_attr,
        mask: c_int,
        init_attr: *mut ibv_qp_init_attr,
    ) -> c_int,
    pub ibv_create_ah: unsafe extern "C" fn(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> *mut ibv_ah,
    pub ibv_destroy_ah: unsafe extern "C" fn(ah: *mut ibv_ah) -> c_int,
    /// Blocks unless `context.async_fd` was made non-blocking.
    pub ibv_get_async_event:
        unsafe extern "C" fn(context: *mut ibv_context, event: *mut ibv_async_event) -> c_int,
    pub ibv_ack_async_event: unsafe extern "C" fn(event: *mut ibv_async_event),
    pub ibv_create_comp_channel:
        unsafe extern "C" fn(context: *mut ibv_context) -> *mut ibv_comp_channel,
    pub ibv_destroy_comp_channel: unsafe extern "C" fn(channel: *mut ibv_comp_channel) -> c_int,
    /// Blocks unless the channel's fd was made non-blocking.
    pub ibv_get_cq_event: unsafe extern "C" fn(
        channel: *mut ibv_comp_channel,
        cq: *mut *mut ibv_cq,
        cq_context: *mut *mut c_void,
    ) -> c_int,
    pub ibv_ack_cq_events: unsafe extern "C" fn(cq: *mut ibv_cq, nevents: c_uint),
    pub ibv_wc_status_str: unsafe extern "C" fn(status: u32) -> *const c_char,
    pub ibv_event_type_str: unsafe extern "C" fn(event: u32) -> *const c_char,
}

/// The mlx5 direct-verbs functions, resolved from `libmlx5.so.1`.
#[allow(missing_docs)]
pub struct Mlx5 {
    /// Zero the `mlx5dv_obj` first (it grew between releases); `obj_type` is a mask of
    /// `MLX5DV_OBJ_*`.
    pub mlx5dv_init_obj: unsafe extern "C" fn(obj: *mut mlx5dv_obj, obj_type: u64) -> c_int,
    pub mlx5dv_query_device:
        unsafe extern "C" fn(context: *mut ibv_context, attrs: *mut mlx5dv_context) -> c_int,
    /// True when `device` is driven by libmlx5 (safe to ask of any device).
    pub mlx5dv_is_supported: unsafe extern "C" fn(device: *mut ibv_device) -> bool,
    /// `ibv_create_qp_ex` plus mlx5 attributes (scatter-to-CQE, DC, ...).
    pub mlx5dv_create_qp: unsafe extern "C" fn(
        context: *mut ibv_context,
        qp_attr: *mut ibv_qp_init_attr_ex,
        mlx5_qp_attr: *mut mlx5dv_qp_init_attr,
    ) -> *mut ibv_qp,
    /// A consistent copy of the kernel's clock-info page (`EINVAL`/`EOPNOTSUPP` without one,
    /// `EBUSY` while it is being updated).
    pub mlx5dv_get_clock_info: unsafe extern "C" fn(
        context: *mut ibv_context,
        clock_info: *mut mlx5dv_clock_info,
    ) -> c_int,
}

/// The librdmacm functions the crate calls, resolved from `librdmacm.so.1`.
///
/// Each is the C function of the same name (see `rdma_cma.h`); calling one is `unsafe` with the
/// preconditions the C documentation gives. All return 0 or -1 with `errno` set, except where
/// noted.
#[allow(missing_docs)]
pub struct Rdmacm {
    pub rdma_create_event_channel: unsafe extern "C" fn() -> *mut rdma_event_channel,
    pub rdma_destroy_event_channel: unsafe extern "C" fn(channel: *mut rdma_event_channel),
    pub rdma_create_id: unsafe extern "C" fn(
        channel: *mut rdma_event_channel,
        id: *mut *mut rdma_cm_id,
        context: *mut c_void,
        ps: u32,
    ) -> c_int,
    pub rdma_destroy_id: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
    pub rdma_bind_addr:
        unsafe extern "C" fn(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int,
    pub rdma_listen: unsafe extern "C" fn(id: *mut rdma_cm_id, backlog: c_int) -> c_int,
    pub rdma_resolve_addr: unsafe extern "C" fn(
        id: *mut rdma_cm_id,
        src_addr: *mut libc::sockaddr,
        dst_addr: *mut libc::sockaddr,
        timeout_ms: c_int,
    ) -> c_int,
    pub rdma_resolve_route: unsafe extern "C" fn(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int,
    pub rdma_connect:
        unsafe extern "C" fn(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int,
    pub rdma_accept:
        unsafe extern "C" fn(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int,
    pub rdma_reject: unsafe extern "C" fn(
        id: *mut rdma_cm_id,
        private_data: *const c_void,
        private_data_len: u8,
    ) -> c_int,
    /// Sends the RTU after `CONNECT_RESPONSE` on an id without a QP.
    pub rdma_establish: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
    pub rdma_disconnect: unsafe extern "C" fn(id: *mut rdma_cm_id) -> c_int,
    /// Blocks unless the channel's fd was made non-blocking (then -1 with `EAGAIN`).
    pub rdma_get_cm_event: unsafe extern "C" fn(
        channel: *mut rdma_event_channel,
        event: *mut *mut rdma_cm_event,
    ) -> c_int,
    pub rdma_ack_cm_event: unsafe extern "C" fn(event: *mut rdma_cm_event) -> c_int,
    /// Fills the attributes (and the mask) for the transition to `qp_attr.qp_state`.
    pub rdma_init_qp_attr: unsafe extern "C" fn(
        id: *mut rdma_cm_id,
        qp_attr: *mut ibv_qp_attr,
        qp_attr_mask: *mut c_int,
    ) -> c_int,
    /// A static string for any value.
    pub rdma_event_str: unsafe extern "C" fn(event: u32) -> *const c_char,
    /// Moves `id` (all its events acked) to another channel.
    pub rdma_migrate_id:
        unsafe extern "C" fn(id: *mut rdma_cm_id, channel: *mut rdma_event_channel) -> c_int,
    /// The local port, network order.
    pub rdma_get_src_port: unsafe extern "C" fn(id: *mut rdma_cm_id) -> u16,
}

// SAFETY: the tables hold only function pointers into libraries that are never unloaded.
unsafe impl Send for Verbs {}
// SAFETY: as above; calling the functions concurrently is governed by libibverbs' own
// thread-safety rules, which the callers (the control module) follow.
unsafe impl Sync for Verbs {}
// SAFETY: as for `Verbs`.
unsafe impl Send for Mlx5 {}
// SAFETY: as for `Verbs`.
unsafe impl Sync for Mlx5 {}
// SAFETY: as for `Verbs`.
unsafe impl Send for Rdmacm {}
// SAFETY: as for `Verbs`; librdmacm serializes its own state.
unsafe impl Sync for Rdmacm {}

impl Verbs {
    /// Loads libibverbs from `path` (a soname or a file) and resolves every function.
    /// Not cached: use [`verbs`] for the process-wide table.
    pub fn load_from(path: &str) -> Result<Verbs> {
        let lib = Library::open(path, LIBIBVERBS, LIBIBVERBS_HINT)?;
        Ok(fn_table!(
            &lib,
            Verbs {
                ibv_get_device_list,
                ibv_free_device_list,
                ibv_get_device_name,
                ibv_get_device_guid,
                ibv_open_device,
                ibv_close_device,
                ibv_query_device,
                ibv_query_port,
                ibv_query_gid,
                ibv_alloc_pd,
                ibv_dealloc_pd,
                ibv_reg_mr,
                ibv_reg_mr_iova2,
                ibv_dereg_mr,
                ibv_create_cq,
                ibv_destroy_cq,
                ibv_create_srq,
                ibv_modify_srq,
                ibv_query_srq,
                ibv_destroy_srq,
                ibv_create_qp,
                ibv_destroy_qp,
                ibv_modify_qp,
                ibv_query_qp,
                ibv_create_ah,
                ibv_destroy_ah,
                ibv_get_async_event,
                ibv_ack_async_event,
                ibv_create_comp_channel,
                ibv_destroy_comp_channel,
                ibv_get_cq_event,
                ibv_ack_cq_events,
                ibv_wc_status_str,
                ibv_event_type_str,
            }
        ))
    }

    /// `ibv_wc_status_str` as a Rust string.
    pub fn wc_status_str(&self, status: u32) -> String {
        // SAFETY: ibv_wc_status_str accepts any value and returns a static string
        // ("unknown" for values it does not know).
        cstr_to_string(unsafe { (self.ibv_wc_status_str)(status) })
    }

    /// `ibv_event_type_str` as a Rust string.
    pub fn event_type_str(&self, event: u32) -> String {
        // SAFETY: as for `wc_status_str`.
        cstr_to_string(unsafe { (self.ibv_event_type_str)(event) })
    }
}

impl Mlx5 {
    /// Loads libmlx5 from `path` and resolves every function. Not cached: see [`mlx5`].
    pub fn load_from(path: &str) -> Result<Mlx5> {
        let lib = Library::open(path, LIBMLX5, LIBMLX5_HINT)?;
        Ok(fn_table!(
            &lib,
            Mlx5 {
                mlx5dv_init_obj,
                mlx5dv_query_device,
                mlx5dv_is_supported,
                mlx5dv_create_qp,
                mlx5dv_get_clock_info,
            }
        ))
    }
}

impl Rdmacm {
    /// Loads librdmacm from `path` and resolves every function. Not cached: see [`rdmacm`].
    pub fn load_from(path: &str) -> Result<Rdmacm> {
        let lib = Library::open(path, LIBRDMACM, LIBRDMACM_HINT)?;
        Ok(fn_table!(
            &lib,
            Rdmacm {
                rdma_create_event_channel,
                rdma_destroy_event_channel,
                rdma_create_id,
                rdma_destroy_id,
                rdma_bind_addr,
                rdma_listen,
                rdma_resolve_addr,
                rdma_resolve_route,
                rdma_connect,
                rdma_accept,
                rdma_reject,
                rdma_establish,
                rdma_disconnect,
                rdma_get_cm_event,
                rdma_ack_cm_event,
                rdma_init_qp_attr,
                rdma_event_str,
                rdma_migrate_id,
                rdma_get_src_port,
            }
        ))
    }

    /// `rdma_event_str` as a Rust string.
    pub fn event_str(&self, event: u32) -> String {
        // SAFETY: rdma_event_str accepts any value and returns a static string.
        cstr_to_string(unsafe { (self.rdma_event_str)(event) })
    }
}

fn cstr_to_string(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-null pointers passed here are NUL-terminated static strings from libibverbs.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

fn path_from_env(var: &str, default: &str) -> String {
    match std::env::var(var) {
        Ok(p) if !p.is_empty() => p,
        _ => default.to_string(),
    }
}

/// The process-wide libibverbs table, loaded on first call. A failure is remembered: every
/// later call returns the same error.
pub fn verbs() -> Result<&'static Verbs> {
    static VERBS: OnceLock<Result<Verbs>> = OnceLock::new();
    VERBS
        .get_or_init(|| Verbs::load_from(&libibverbs_path()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The path libibverbs is loaded from: `RDMA_DIRECT_LIBIBVERBS`, else the soname.
pub fn libibverbs_path() -> String {
    path_from_env("RDMA_DIRECT_LIBIBVERBS", LIBIBVERBS)
}

/// The path libmlx5 is loaded from: `RDMA_DIRECT_LIBMLX5`, else the soname.
pub fn libmlx5_path() -> String {
    path_from_env("RDMA_DIRECT_LIBMLX5", LIBMLX5)
}

/// The address of `symbol` (given with its trailing NUL) in the process-wide libibverbs
/// (loaded here if it was not), for an entry point beyond [`Verbs`]'s; `None` when that
/// libibverbs does not export it. The address is untyped: the caller must know the symbol's
/// C prototype and cast to it before any call.
pub fn libibverbs_symbol(symbol: &'static str) -> Result<Option<*mut c_void>> {
    verbs()?;
    let path = libibverbs_path();
    let lib = Library::open(&path, LIBIBVERBS, LIBIBVERBS_HINT)?;
    Ok(lib.sym(symbol).ok())
}

/// The process-wide libmlx5 table, loaded on first call (only the mlx5 provider needs it).
pub fn mlx5() -> Result<&'static Mlx5> {
    static MLX5: OnceLock<Result<Mlx5>> = OnceLock::new();
    MLX5.get_or_init(|| Mlx5::load_from(&libmlx5_path()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The process-wide librdmacm table, loaded on first call (only connecting by address needs
/// it). A failure is remembered.
pub fn rdmacm() -> Result<&'static Rdmacm> {
    static RDMACM: OnceLock<Result<Rdmacm>> = OnceLock::new();
    RDMACM
        .get_or_init(|| Rdmacm::load_from(&path_from_env("RDMA_DIRECT_LIBRDMACM", LIBRDMACM)))
        .as_ref()
        .map_err(Clone::clone)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_library_is_a_clear_error() {
        let e = match Verbs::load_from("/nonexistent/libibverbs.so.1") {
            Err(e) => e,
            Ok(_) => panic!("loading a nonexistent path succeeded"),
        };
        let s = e.to_string();
        assert!(
            s.starts_with("libibverbs.so.1 not found: install rdma-core / libibverbs1"),
            "{s}"
        );
        assert!(matches!(e, Error::LibraryMissing { .. }));
        let e = match Mlx5::load_from("/nonexistent/libmlx5.so.1") {
            Err(e) => e,
            Ok(_) => panic!("loading a nonexistent path succeeded"),
        };
        assert!(e.to_string().starts_with("libmlx5.so.1 not found"), "{e}");
        let e = match Rdmacm::load_from("/nonexistent/librdmacm.so.1") {
            Err(e) => e,
            Ok(_) => panic!("loading a nonexistent path succeeded"),
        };
        assert!(
            e.to_string()
                .starts_with("librdmacm.so.1 not found: install rdma-core's librdmacm (Debian/Ubuntu: librdmacm1)"),
            "{e}"
        );
    }

    #[test]
    fn the_installed_librdmacm_resolves_every_function() {
        // Where librdmacm is installed every symbol resolves; elsewhere the load fails cleanly.
        match Rdmacm::load_from(LIBRDMACM) {
            Ok(cm) => assert_eq!(
                cm.event_str(RDMA_CM_EVENT_REJECTED),
                "RDMA_CM_EVENT_REJECTED"
            ),
            Err(e) => assert!(matches!(e, Error::LibraryMissing { .. }), "{e}"),
        }
        let e = match Rdmacm::load_from("libc.so.6") {
            Err(e) => e,
            Ok(_) => panic!("libc resolved rdma_create_event_channel"),
        };
        assert_eq!(
            e,
            Error::SymbolMissing {
                lib: LIBRDMACM,
                symbol: "rdma_create_event_channel"
            }
        );
    }

    #[test]
    fn the_installed_libibverbs_resolves_every_function() {
        // Only meaningful where rdma-core is installed; elsewhere the load must fail cleanly.
        match Verbs::load_from(LIBIBVERBS) {
            Ok(v) => assert_eq!(v.wc_status_str(IBV_WC_SUCCESS), "success"),
            Err(e) => assert!(matches!(e, Error::LibraryMissing { .. }), "{e}"),
        }
        // Where libmlx5 is installed, every symbol resolves (a SymbolMissing fails here).
        if let Err(e) = Mlx5::load_from(LIBMLX5) {
            assert!(matches!(e, Error::LibraryMissing { .. }), "{e}");
        }
    }

    #[test]
    fn a_library_without_the_symbols_is_a_symbol_error() {
        // libc is always present and exports none of the verbs.
        let e = match Verbs::load_from("libc.so.6") {
            Err(e) => e,
            Ok(_) => panic!("libc resolved ibv_get_device_list"),
        };
        assert_eq!(
            e,
            Error::SymbolMissing {
                lib: LIBIBVERBS,
                symbol: "ibv_get_device_list"
            }
        );
    }
}
