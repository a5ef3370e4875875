//! The extended verbs: `struct verbs_context`, thread and parent domains, `ibv_qp_init_attr_ex`
//! and `mlx5dv_create_qp`'s attributes (rdma-core 44).
//!
//! libibverbs allocates every context as a `struct verbs_context` whose *last* member is the
//! `struct ibv_context` applications see; the extended ops sit in memory before it. The struct
//! grows at its start: `sz` (just before the embedded context) says how many bytes, counted
//! back from the end, the provider filled. An op exists only if its whole slot lies in that
//! range and is non-null ([`verbs_get_ctx_op`]), and only if the context says it is extended
//! at all (`abi_compat == (void *)UINTPTR_MAX`, [`verbs_get_ctx`]).
//!
//! `ibv_alloc_td`, `ibv_dealloc_td` and `ibv_alloc_parent_domain` are static inline in
//! verbs.h (they go through these ops), so [`alloc_td`], [`dealloc_td`] and
//! [`alloc_parent_domain`] do the same. A parent domain is freed with the exported
//! `ibv_dealloc_pd`.

#![allow(non_camel_case_types)]

use super::types::*;
use crate::{Error, Result};
use libc::{c_int, c_void};
use std::mem::{offset_of, size_of};

/// Value of `ibv_context::abi_compat` on a context that has a `verbs_context` around it
/// (verbs.h `__VERBS_ABI_IS_EXTENDED`).
pub const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

/// `IBV_QP_INIT_ATTR_PD`: `ibv_qp_init_attr_ex::pd` is valid.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;
/// `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`: `mlx5dv_qp_init_attr::create_flags` is valid.
pub const MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS: u64 = 1 << 0;
/// `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`: received data never lands in the CQE.
pub const MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE: u32 = 1 << 3;

/// `struct ibv_td_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ibv_td_init_attr {
    /// No optional fields in rdma-core 44: 0.
    pub comp_mask: u32,
}

/// `struct ibv_td` (a thread domain: the caller promises single-threaded use of the objects
/// created under it, so the provider may drop its locks).
#[repr(C)]
pub struct ibv_td {
    /// Owning context.
    pub context: *mut ibv_context,
}

/// `alloc` callback of a parent domain (unused here: null).
pub type pd_alloc_fn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    pd_context: *mut c_void,
    size: usize,
    alignment: usize,
    resource_type: u64,
) -> *mut c_void;
/// `free` callback of a parent domain (unused here: null).
pub type pd_free_fn = unsafe extern "C" fn(
    pd: *mut ibv_pd,
    pd_context: *mut c_void,
    ptr: *mut c_void,
    resource_type: u64,
);

/// `struct ibv_parent_domain_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_parent_domain_init_attr {
    /// The protection domain (never null).
    pub pd: *mut ibv_pd,
    /// The thread domain, or null.
    pub td: *mut ibv_td,
    /// `IBV_PARENT_DOMAIN_INIT_ATTR_*`; 0 here.
    pub comp_mask: u32,
    /// Custom allocator (with `comp_mask` ALLOCATORS).
    pub alloc: Option<pd_alloc_fn>,
    /// Custom free.
    pub free: Option<pd_free_fn>,
    /// Passed to the allocators.
    pub pd_context: *mut c_void,
}

/// `struct ibv_rx_hash_conf` (RSS QPs; zero here).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_rx_hash_conf {
    /// `enum ibv_rx_hash_function_flags`.
    pub rx_hash_function: u8,
    /// Key length.
    pub rx_hash_key_len: u8,
    /// Key.
    pub rx_hash_key: *mut u8,
    /// `enum ibv_rx_hash_fields`.
    pub rx_hash_fields_mask: u64,
}

/// `struct ibv_qp_init_attr_ex`: `ibv_qp_init_attr` plus optional fields named by `comp_mask`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr_ex {
    /// User context.
    pub qp_context: *mut c_void,
    /// Send CQ.
    pub send_cq: *mut ibv_cq,
    /// Receive CQ.
    pub recv_cq: *mut ibv_cq,
    /// SRQ, may be null.
    pub srq: *mut ibv_srq,
    /// Requested caps; on return, the caps granted.
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    /// Non-zero: every send WR generates a completion.
    pub sq_sig_all: c_int,
    /// `IBV_QP_INIT_ATTR_*`: which fields below are valid.
    pub comp_mask: u32,
    /// PD or parent domain (with `IBV_QP_INIT_ATTR_PD`).
    pub pd: *mut ibv_pd,
    /// XRC domain.
    pub xrcd: *mut c_void,
    /// `IBV_QP_CREATE_*`.
    pub create_flags: u32,
    /// LSO header size.
    pub max_tso_header: u16,
    /// RSS indirection table.
    pub rwq_ind_tbl: *mut c_void,
    /// RSS hash.
    pub rx_hash_conf: ibv_rx_hash_conf,
    /// Source QPN (UD).
    pub source_qpn: u32,
    /// `IBV_QP_EX_WITH_*`.
    pub send_ops_flags: u64,
}

/// `struct mlx5dv_dc_init_attr` (DC transport; zero here). The C union of `dct_access_key`
/// and `struct mlx5dv_dci_streams` (two bytes) is represented by its 8-byte member.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_dc_init_attr {
    /// `enum mlx5dv_dc_type`.
    pub dc_type: u32,
    /// `dct_access_key` / `dci_streams`.
    pub dct_access_key: u64,
}

/// `struct mlx5dv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_qp_init_attr {
    /// `MLX5DV_QP_INIT_ATTR_MASK_*`.
    pub comp_mask: u64,
    /// `MLX5DV_QP_CREATE_*` (with `MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS`).
    pub create_flags: u32,
    /// DC attributes (with `MLX5DV_QP_INIT_ATTR_MASK_DC`).
    pub dc_init_attr: mlx5dv_dc_init_attr,
    /// `MLX5DV_QP_EX_WITH_*` (with `MLX5DV_QP_INIT_ATTR_MASK_SEND_OPS_FLAGS`).
    pub send_ops_flags: u64,
}

/// `verbs_context::alloc_td`.
pub type alloc_td_fn =
    unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_td_init_attr) -> *mut ibv_td;
/// `verbs_context::dealloc_td`.
pub type dealloc_td_fn = unsafe extern "C" fn(td: *mut ibv_td) -> c_int;
/// `verbs_context::alloc_parent_domain`.
pub type alloc_parent_domain_fn = unsafe extern "C" fn(
    context: *mut ibv_context,
    attr: *mut ibv_parent_domain_init_attr,
) -> *mut ibv_pd;
/// `verbs_context::create_qp_ex`.
pub type create_qp_ex_fn =
    unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;

/// An op slot this code does not call: only its size and position matter.
type Slot = *mut c_void;

/// `struct verbs_context` (rdma-core 44), in C order. Only the ops this crate calls are typed.
#[repr(C)]
pub struct verbs_context {
    /// `query_port`.
    pub query_port: Slot,
    /// `advise_mr`.
    pub advise_mr: Slot,
    /// `alloc_null_mr`.
    pub alloc_null_mr: Slot,
    /// `read_counters`.
    pub read_counters: Slot,
    /// `attach_counters_point_flow`.
    pub attach_counters_point_flow: Slot,
    /// `create_counters`.
    pub create_counters: Slot,
    /// `destroy_counters`.
    pub destroy_counters: Slot,
    /// `reg_dm_mr`.
    pub reg_dm_mr: Slot,
    /// `alloc_dm`.
    pub alloc_dm: Slot,
    /// `free_dm`.
    pub free_dm: Slot,
    /// `modify_flow_action_esp`.
    pub modify_flow_action_esp: Slot,
    /// `destroy_flow_action`.
    pub destroy_flow_action: Slot,
    /// `create_flow_action_esp`.
    pub create_flow_action_esp: Slot,
    /// `modify_qp_rate_limit`.
    pub modify_qp_rate_limit: Slot,
    /// `alloc_parent_domain`.
    pub alloc_parent_domain: Option<alloc_parent_domain_fn>,
    /// `dealloc_td`.
    pub dealloc_td: Option<dealloc_td_fn>,
    /// `alloc_td`.
    pub alloc_td: Option<alloc_td_fn>,
    /// `modify_cq`.
    pub modify_cq: Slot,
    /// `post_srq_ops`.
    pub post_srq_ops: Slot,
    /// `destroy_rwq_ind_table`.
    pub destroy_rwq_ind_table: Slot,
    /// `create_rwq_ind_table`.
    pub create_rwq_ind_table: Slot,
    /// `destroy_wq`.
    pub destroy_wq: Slot,
    /// `modify_wq`.
    pub modify_wq: Slot,
    /// `create_wq`.
    pub create_wq: Slot,
    /// `query_rt_values`.
    pub query_rt_values: Slot,
    /// `create_cq_ex`.
    pub create_cq_ex: Slot,
    /// `priv` (libibverbs' private data).
    pub priv_: Slot,
    /// `query_device_ex`.
    pub query_device_ex: Slot,
    /// `ibv_destroy_flow`.
    pub ibv_destroy_flow: Slot,
    /// `ABI_placeholder2`.
    pub abi_placeholder2: Slot,
    /// `ibv_create_flow`.
    pub ibv_create_flow: Slot,
    /// `ABI_placeholder1`.
    pub abi_placeholder1: Slot,
    /// `open_qp`.
    pub open_qp: Slot,
    /// `create_qp_ex`.
    pub create_qp_ex: Option<create_qp_ex_fn>,
    /// `get_srq_num`.
    pub get_srq_num: Slot,
    /// `create_srq_ex`.
    pub create_srq_ex: Slot,
    /// `open_xrcd`.
    pub open_xrcd: Slot,
    /// `close_xrcd`.
    pub close_xrcd: Slot,
    /// `_ABI_placeholder3`.
    pub abi_placeholder3: u64,
    /// Bytes of this struct the provider filled, counted back from its end.
    pub sz: usize,
    /// The context applications see; must be last.
    pub context: ibv_context,
}

/// Whether an op at `op_offset` in `struct verbs_context` lies in the `sz` bytes the provider
/// filled (verbs.h: missing when `sz < sizeof(struct verbs_context) - offsetof(op)`).
pub const fn op_in_range(sz: usize, op_offset: usize) -> bool {
    match size_of::<verbs_context>().checked_sub(op_offset) {
        Some(need) => sz >= need,
        None => false,
    }
}

/// `verbs_get_ctx`: the `verbs_context` around `ctx`, or `None` when the context is not an
/// extended one.
///
/// # Safety
/// `ctx` points to a live `ibv_context` that libibverbs (or a test) embedded as the `context`
/// member of a `verbs_context`, with provenance over the whole `verbs_context` (as libibverbs'
/// own allocation has).
pub unsafe fn verbs_get_ctx(ctx: *mut ibv_context) -> Option<*mut verbs_context> {
    // SAFETY: `ctx` is a live context (caller); `abi_compat` is a plain pointer field.
    let compat = unsafe { (*ctx).abi_compat } as usize;
    if compat != VERBS_ABI_IS_EXTENDED {
        return None;
    }
    let off = offset_of!(verbs_context, context);
    // SAFETY: an extended context is the last member of a verbs_context (caller), so stepping
    // back by its offset stays inside that allocation.
    Some(unsafe { ctx.cast::<u8>().sub(off) }.cast::<verbs_context>())
}

/// `verbs_get_ctx_op`: the `verbs_context` of `ctx` if the op at `op_offset` (an
/// `offset_of!(verbs_context, op)`) is in range and non-null; otherwise
/// [`Error::Unsupported`] naming `op`.
///
/// # Safety
/// As for [`verbs_get_ctx`].
pub unsafe fn verbs_get_ctx_op(
    ctx: *mut ibv_context,
    op_offset: usize,
    op: &str,
) -> Result<*mut verbs_context> {
    let unsupported = |why: &str| Error::Unsupported {
        what: format!("verbs op {op}: {why}"),
    };
    // SAFETY: forwarded from the caller.
    let Some(vctx) = (unsafe { verbs_get_ctx(ctx) }) else {
        return Err(unsupported("the context is not an extended verbs context"));
    };
    // SAFETY: `vctx` points to a live verbs_context (see above); `sz` is always present.
    let sz = unsafe { (*vctx).sz };
    if op_offset % size_of::<usize>() != 0 || !op_in_range(sz, op_offset) {
        return Err(unsupported(
            "the provider's verbs_context does not reach it",
        ));
    }
    // SAFETY: the slot at `op_offset` is a pointer-sized, aligned field inside the `sz`
    // bytes the provider filled; reading it as an address only tests it for null.
    let slot = unsafe { vctx.cast::<u8>().add(op_offset).cast::<usize>().read() };
    if slot == 0 {
        return Err(unsupported("the provider does not implement it"));
    }
    Ok(vctx)
}

/// `ibv_alloc_td` (comp_mask 0).
///
/// # Safety
/// `ctx` is a live context opened by libibverbs.
pub unsafe fn alloc_td(ctx: *mut ibv_context) -> Result<*mut ibv_td> {
    // SAFETY: forwarded.
    let vctx = unsafe { verbs_get_ctx_op(ctx, offset_of!(verbs_context, alloc_td), "alloc_td") }?;
    // SAFETY: checked in range and non-null just above.
    let f = unsafe { (*vctx).alloc_td }.ok_or_else(|| Error::Unsupported {
        what: "verbs op alloc_td".into(),
    })?;
    let mut attr = ibv_td_init_attr::default();
    // SAFETY: live context and a valid attr.
    let td = unsafe { f(ctx, &mut attr) };
    if td.is_null() {
        return Err(refused("ibv_alloc_td", last_errno(), td_hint()));
    }
    Ok(td)
}

/// `ibv_dealloc_td`; returns the provider's errno (0 on success).
///
/// # Safety
/// `td` came from [`alloc_td`] on `ctx`, no parent domain uses it any more, and it is freed
/// once.
pub unsafe fn dealloc_td(ctx: *mut ibv_context, td: *mut ibv_td) -> c_int {
    // SAFETY: forwarded.
    match unsafe { verbs_get_ctx_op(ctx, offset_of!(verbs_context, dealloc_td), "dealloc_td") } {
        // SAFETY: in range and non-null (checked); `td` is ours to free (caller).
        Ok(vctx) => match unsafe { (*vctx).dealloc_td } {
            // SAFETY: as above.
            Some(f) => unsafe { f(td) },
            None => libc::EOPNOTSUPP,
        },
        Err(_) => libc::EOPNOTSUPP,
    }
}

/// `ibv_alloc_parent_domain` over `pd` with thread domain `td` (no custom allocators).
///
/// # Safety
/// `ctx` is a live context; `pd` and `td` are live objects of it.
pub unsafe fn alloc_parent_domain(
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    td: *mut ibv_td,
) -> Result<*mut ibv_pd> {
    // SAFETY: forwarded.
    let vctx = unsafe {
        verbs_get_ctx_op(
            ctx,
            offset_of!(verbs_context, alloc_parent_domain),
            "alloc_parent_domain",
        )
    }?;
    // SAFETY: checked in range and non-null.
    let f = unsafe { (*vctx).alloc_parent_domain }.ok_or_else(|| Error::Unsupported {
        what: "verbs op alloc_parent_domain".into(),
    })?;
    let mut attr = ibv_parent_domain_init_attr {
        pd,
        td,
        comp_mask: 0,
        alloc: None,
        free: None,
        pd_context: std::ptr::null_mut(),
    };
    // SAFETY: live context, PD and TD; a fully initialised attr.
    let p = unsafe { f(ctx, &mut attr) };
    if p.is_null() {
        return Err(refused(
            "ibv_alloc_parent_domain",
            last_errno(),
            "the provider refused a parent domain over this PD and thread domain",
        ));
    }
    Ok(p)
}

/// The error for a failed extended verb. libibverbs fills the ops a provider lacks with stubs
/// that fail with EOPNOTSUPP (rxe's `alloc_td`, for one), so that errno means "not supported"
/// just as a missing slot does.
fn refused(verb: &'static str, errno: c_int, hint: &str) -> Error {
    if errno == libc::EOPNOTSUPP || errno == libc::ENOSYS {
        Error::Unsupported {
            what: format!("{verb}: the provider does not support it ({hint})"),
        }
    } else {
        Error::verb(verb, errno, hint)
    }
}

fn td_hint() -> &'static str {
    "libmlx5 gives a thread domain a dedicated BlueFlame register; it fails when the device \
     has none left (EOPNOTSUPP/ENOMEM)"
}

fn last_errno() -> c_int {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

impl ibv_qp_init_attr_ex {
    /// All fields zero / null.
    pub fn zeroed() -> Self {
        // SAFETY: plain C data (integers, raw pointers): all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

impl verbs_context {
    /// All fields zero / null (for tests that build a context in memory).
    pub fn zeroed() -> Self {
        // SAFETY: plain C data (integers, raw pointers, `Option` of fn pointers, the
        // pthread mutex bytes of ibv_context): all-zero is valid.
        unsafe { std::mem::zeroed() }
    }
}

#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use static_assertions::const_assert_eq;

    const_assert_eq!(size_of::<ibv_td_init_attr>(), 4);
    const_assert_eq!(size_of::<ibv_td>(), 8);
    const_assert_eq!(size_of::<ibv_parent_domain_init_attr>(), 48);
    const_assert_eq!(offset_of!(ibv_parent_domain_init_attr, comp_mask), 16);
    const_assert_eq!(offset_of!(ibv_parent_domain_init_attr, pd_context), 40);
    const_assert_eq!(size_of::<ibv_qp_init_attr_ex>(), 136);
    const_assert_eq!(offset_of!(ibv_qp_init_attr_ex, comp_mask), 60);
    const_assert_eq!(offset_of!(ibv_qp_init_attr_ex, pd), 64);
    const_assert_eq!(offset_of!(ibv_qp_init_attr_ex, send_ops_flags), 128);
    const_assert_eq!(size_of::<mlx5dv_qp_init_attr>(), 40);
    const_assert_eq!(offset_of!(mlx5dv_qp_init_attr, create_flags), 8);
    const_assert_eq!(offset_of!(mlx5dv_qp_init_attr, dc_init_attr), 16);
    const_assert_eq!(offset_of!(mlx5dv_qp_init_attr, send_ops_flags), 32);
    const_assert_eq!(offset_of!(verbs_context, alloc_parent_domain), 112);
    const_assert_eq!(offset_of!(verbs_context, dealloc_td), 120);
    const_assert_eq!(offset_of!(verbs_context, alloc_td), 128);
    const_assert_eq!(offset_of!(verbs_context, create_qp_ex), 264);
    // verbs_context ends with the ibv_context, whose pthread_mutex_t is 40 bytes on x86_64
    // and 48 on aarch64.
    #[cfg(target_arch = "x86_64")]
    const_assert_eq!(size_of::<verbs_context>(), 648);
    #[cfg(target_arch = "aarch64")]
    const_assert_eq!(size_of::<verbs_context>(), 656);
    const_assert_eq!(offset_of!(verbs_context, sz), 312);
    const_assert_eq!(offset_of!(verbs_context, context), 320);
}

// ---- completion timestamps: ibv_create_cq_ex, ibv_query_rt_values_ex ----

/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`: the CQ reports the device's free-running clock.
pub const IBV_WC_EX_WITH_COMPLETION_TIMESTAMP: u64 = 1 << 7;
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK`: the CQ reports wall-clock ns (alone:
/// the real-time CQE format on mlx5).
pub const IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK: u64 = 1 << 11;
/// `IBV_VALUES_MASK_RAW_CLOCK`: `ibv_values_ex::raw_clock` is asked for / valid.
pub const IBV_VALUES_MASK_RAW_CLOCK: u32 = 1 << 0;

/// `struct ibv_cq_init_attr_ex` (rdma-core 44, 56 bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_cq_init_attr_ex {
    /// Minimum number of entries.
    pub cqe: u32,
    /// Returned in `ibv_cq.cq_context`.
    pub cq_context: *mut c_void,
    /// Completion channel, or null.
    pub channel: *mut ibv_comp_channel,
    /// Completion vector.
    pub comp_vector: u32,
    /// `IBV_WC_EX_WITH_*` bits.
    pub wc_flags: u64,
    /// `IBV_CQ_INIT_ATTR_MASK_*` (0: no optional fields).
    pub comp_mask: u32,
    /// `IBV_CREATE_CQ_ATTR_*`.
    pub flags: u32,
    /// Parent domain (with `IBV_CQ_INIT_ATTR_MASK_PD`).
    pub parent_domain: *mut ibv_pd,
}

static_assertions::const_assert_eq!(size_of::<ibv_cq_init_attr_ex>(), 56);
static_assertions::const_assert_eq!(offset_of!(ibv_cq_init_attr_ex, wc_flags), 32);
static_assertions::const_assert_eq!(offset_of!(ibv_cq_init_attr_ex, parent_domain), 48);

/// `struct ibv_values_ex`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ibv_values_ex {
    /// `IBV_VALUES_MASK_*`: in, what to read; out, what was read.
    pub comp_mask: u32,
    /// The device clock (mlx5: the raw counter in `tv_nsec`, `tv_sec` 0).
    pub raw_clock: libc::timespec,
}

static_assertions::const_assert_eq!(size_of::<ibv_values_ex>(), 24);

/// `verbs_context::create_cq_ex` (returns a `struct ibv_cq_ex *`, whose first member is the
/// `struct ibv_cq`).
pub type create_cq_ex_fn =
    unsafe extern "C" fn(context: *mut ibv_context, attr: *mut ibv_cq_init_attr_ex) -> *mut ibv_cq;
/// `verbs_context::query_rt_values`.
pub type query_rt_values_fn =
    unsafe extern "C" fn(context: *mut ibv_context, values: *mut ibv_values_ex) -> c_int;

/// `ibv_create_cq_ex` (static inline in verbs.h): through the context's `create_cq_ex` op.
/// Errors: `Unsupported` when the provider has no such op; otherwise the errno the provider
/// set (rxe: `EOPNOTSUPP` for any timestamp flag).
///
/// # Safety
/// `ctx` is a live context opened by libibverbs; `attr` is valid.
pub unsafe fn create_cq_ex(
    ctx: *mut ibv_context,
    attr: &mut ibv_cq_init_attr_ex,
) -> Result<std::result::Result<*mut ibv_cq, c_int>> {
    // SAFETY: forwarded.
    let vctx =
        unsafe { verbs_get_ctx_op(ctx, offset_of!(verbs_context, create_cq_ex), "create_cq_ex") }?;
    // SAFETY: the slot is in range and non-null (checked above); it holds the provider's
    // create_cq_ex, whose C type is `create_cq_ex_fn`.
    let f: create_cq_ex_fn = unsafe { std::mem::transmute((*vctx).create_cq_ex) };
    // SAFETY: live context, valid attr.
    let cq = unsafe { f(ctx, attr) };
    if cq.is_null() {
        return Ok(Err(std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(0)));
    }
    Ok(Ok(cq))
}

/// `ibv_query_rt_values_ex` (static inline in verbs.h) asking for the raw clock: the raw
/// value (`tv_sec * 10^9 + tv_nsec`, as verbs.h packs it), or the errno.
///
/// # Safety
/// `ctx` is a live context opened by libibverbs.
pub unsafe fn query_rt_values_ex(ctx: *mut ibv_context) -> Result<std::result::Result<u64, c_int>> {
    // SAFETY: forwarded.
    let vctx = unsafe {
        verbs_get_ctx_op(
            ctx,
            offset_of!(verbs_context, query_rt_values),
            "query_rt_values",
        )
    }?;
    // SAFETY: as in `create_cq_ex`: a non-null slot of type `query_rt_values_fn`.
    let f: query_rt_values_fn = unsafe { std::mem::transmute((*vctx).query_rt_values) };
    let mut v = ibv_values_ex {
        comp_mask: IBV_VALUES_MASK_RAW_CLOCK,
        raw_clock: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    };
    // SAFETY: live context, valid out struct.
    let rc = unsafe { f(ctx, &mut v) };
    if rc != 0 {
        return Ok(Err(rc));
    }
    Ok(Ok((v.raw_clock.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(v.raw_clock.tv_nsec as u64)))
}
