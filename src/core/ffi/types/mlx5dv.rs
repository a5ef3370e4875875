//! `mlx5dv.h`: the direct-verbs views of QPs, CQs, SRQs and AHs (`mlx5dv_init_obj`), the
//! device context and the clock info.

use super::queues::{ibv_cq, ibv_qp, ibv_srq};
use super::wr::ibv_ah;
use libc::c_void;

/// `struct mlx5dv_clock_info` (mlx5dv.h, 40 bytes): what `mlx5dv_get_clock_info` fills.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_clock_info {
    /// ns at `last_cycles`.
    pub nsec: u64,
    /// The device counter at the last update.
    pub last_cycles: u64,
    /// Fractional ns at that point (units of 2^-shift ns).
    pub frac: u64,
    /// Cycles to ns multiplier (scaled by 2^shift).
    pub mult: u32,
    /// The scale.
    pub shift: u32,
    /// The counter's bits.
    pub mask: u64,
}

static_assertions::const_assert_eq!(std::mem::size_of::<mlx5dv_clock_info>(), 40);
static_assertions::const_assert_eq!(std::mem::offset_of!(mlx5dv_clock_info, mult), 24);
static_assertions::const_assert_eq!(std::mem::offset_of!(mlx5dv_clock_info, mask), 32);

/// `mlx5dv_qp.sq` / `.rq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_qp_wq {
    /// Ring.
    pub buf: *mut c_void,
    /// Entries.
    pub wqe_cnt: u32,
    /// Bytes per entry.
    pub stride: u32,
}

/// `mlx5dv_qp.bf`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_qp_bf {
    /// BlueFlame register.
    pub reg: *mut c_void,
    /// Half size in bytes (0 = no BlueFlame).
    pub size: u32,
}

/// `struct mlx5dv_qp`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_qp {
    /// Doorbell record (big-endian counters).
    pub dbrec: *mut u32,
    /// Send queue.
    pub sq: mlx5dv_qp_wq,
    /// Receive queue.
    pub rq: mlx5dv_qp_wq,
    /// BlueFlame.
    pub bf: mlx5dv_qp_bf,
    /// Which optional fields to fill (in) / were filled (out).
    pub comp_mask: u64,
    /// UAR mmap offset (optional).
    pub uar_mmap_offset: libc::off_t,
    /// TIR number (raw packet).
    pub tirn: u32,
    /// TIS number (raw packet).
    pub tisn: u32,
    /// RQ number (raw packet).
    pub rqn: u32,
    /// SQ number (raw packet).
    pub sqn: u32,
    /// TIR ICM address.
    pub tir_icm_addr: u64,
}

/// `struct mlx5dv_cq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_cq {
    /// CQE ring.
    pub buf: *mut c_void,
    /// Doorbell record.
    pub dbrec: *mut u32,
    /// Entries.
    pub cqe_cnt: u32,
    /// 64 or 128.
    pub cqe_size: u32,
    /// UAR for arming.
    pub cq_uar: *mut c_void,
    /// CQ number.
    pub cqn: u32,
    /// Optional fields.
    pub comp_mask: u64,
}

/// `struct mlx5dv_srq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_srq {
    /// WQE ring.
    pub buf: *mut c_void,
    /// Doorbell record.
    pub dbrec: *mut u32,
    /// Bytes per entry.
    pub stride: u32,
    /// First free entry.
    pub head: u32,
    /// Last free entry.
    pub tail: u32,
    /// Optional fields (in: `MLX5DV_SRQ_MASK_SRQN` to get `srqn`).
    pub comp_mask: u64,
    /// SRQ number (when asked for).
    pub srqn: u32,
}

/// `mlx5dv_srq.comp_mask` bit: fill `srqn`.
pub const MLX5DV_SRQ_MASK_SRQN: u64 = 1 << 0;

/// `struct mlx5dv_ah`: what `mlx5dv_init_obj(MLX5DV_OBJ_AH)` says of an address handle.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_ah {
    /// The 48-byte address vector (`struct mlx5_wqe_av`) libmlx5 filled for the AH; UD sends
    /// copy it into their WQEs. Valid while the AH lives.
    pub av: *mut u8,
    /// Which optional fields are valid (none are read).
    pub comp_mask: u64,
}

/// One `{ in, out }` pair of `struct mlx5dv_obj`.
#[repr(C)]
pub struct mlx5dv_obj_pair<I, O> {
    /// The verbs object.
    pub r#in: *mut I,
    /// Where to write its mlx5 view.
    pub out: *mut O,
}

impl<I, O> Clone for mlx5dv_obj_pair<I, O> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I, O> Copy for mlx5dv_obj_pair<I, O> {}

/// `struct mlx5dv_obj`. It grew between releases (rwq, dm, ah, pd): always start from
/// [`mlx5dv_obj::zeroed`] so the members we do not set are null.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_obj {
    /// QP.
    pub qp: mlx5dv_obj_pair<ibv_qp, mlx5dv_qp>,
    /// CQ.
    pub cq: mlx5dv_obj_pair<ibv_cq, mlx5dv_cq>,
    /// SRQ.
    pub srq: mlx5dv_obj_pair<ibv_srq, mlx5dv_srq>,
    /// RWQ (unused).
    pub rwq: mlx5dv_obj_pair<c_void, c_void>,
    /// DM (unused).
    pub dm: mlx5dv_obj_pair<c_void, c_void>,
    /// AH.
    pub ah: mlx5dv_obj_pair<ibv_ah, mlx5dv_ah>,
    /// PD (unused).
    pub pd: mlx5dv_obj_pair<c_void, c_void>,
}

/// Size of `struct mlx5dv_context` in rdma-core 44 (see `fixtures/abi/abi.txt`).
pub const MLX5DV_CONTEXT_SIZE: usize = 152;

/// `struct mlx5dv_context`: the leading fields we read, then the rest as opaque bytes.
/// `mlx5dv_query_device` fills only what `comp_mask` asks for; with 0 it fills `version`,
/// `flags` and `comp_mask`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_context {
    /// Version.
    pub version: u8,
    /// `MLX5DV_CONTEXT_FLAGS_*`.
    pub flags: u64,
    /// In: which optional parts to fill; out: which were filled.
    pub comp_mask: u64,
    /// Everything after `comp_mask`, not interpreted.
    pub rest: [u8; MLX5DV_CONTEXT_SIZE - 24],
}

/// `mlx5dv_context.flags`: compressed CQEs are supported.
pub const MLX5DV_CONTEXT_FLAGS_CQE_V1: u64 = 1 << 0;
/// `mlx5dv_context.flags`: enhanced multi-packet WQEs.
pub const MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW: u64 = 1 << 3;
/// `mlx5dv_context.flags`: CQE 128 B compression.
pub const MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP: u64 = 1 << 4;
/// `mlx5dv_context.flags`: CQE 128 B padding.
pub const MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD: u64 = 1 << 5;

/// The sizes and offsets the code relies on (LP64; see the parent module).
#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use static_assertions::const_assert_eq;
    use std::mem::{offset_of, size_of};

    const_assert_eq!(size_of::<mlx5dv_qp>(), 96);
    const_assert_eq!(offset_of!(mlx5dv_qp, bf), 40);
    const_assert_eq!(size_of::<mlx5dv_cq>(), 48);
    const_assert_eq!(offset_of!(mlx5dv_cq, cqn), 32);
    const_assert_eq!(size_of::<mlx5dv_srq>(), 48);
    const_assert_eq!(offset_of!(mlx5dv_srq, srqn), 40);
    const_assert_eq!(size_of::<mlx5dv_ah>(), 16);
    const_assert_eq!(offset_of!(mlx5dv_ah, comp_mask), 8);
    const_assert_eq!(size_of::<mlx5dv_obj>(), 112);
    const_assert_eq!(size_of::<mlx5dv_context>(), MLX5DV_CONTEXT_SIZE);
}
