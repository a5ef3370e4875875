//! The queue memory `mlx5dv_init_obj` hands out, as plain descriptors.
//!
//! On hardware these are filled from `struct mlx5dv_qp` / `mlx5dv_cq` / `mlx5dv_srq` (see
//! [`crate::ffi`]); on the software device ([`crate::sim`]) from the sim's own
//! memory. The hot-path types of this provider are built from these descriptors only, so they
//! cannot tell the two apart.
//!
//! Pointers here point into memory the device reads or writes: they are only ever
//! dereferenced through [`crate::mmio`] (volatile) or the ring code, never turned into `&`.

/// A QP's rings, doorbell record and BlueFlame register (`struct mlx5dv_qp`).
#[derive(Clone, Copy, Debug)]
pub struct DvQp {
    /// QP number (24 bits).
    pub qpn: u32,
    /// Send queue ring: `sq_wqe_cnt` WQEBBs of `sq_stride` (= 64) bytes.
    pub sq_buf: *mut u8,
    /// Number of WQEBBs in the SQ (a power of two).
    pub sq_wqe_cnt: u32,
    /// SQ stride in bytes (must be 64).
    pub sq_stride: u32,
    /// Receive queue ring: `rq_wqe_cnt` entries of `rq_stride` bytes (null / 0 with an SRQ).
    pub rq_buf: *mut u8,
    /// Number of RQ entries (a power of two).
    pub rq_wqe_cnt: u32,
    /// RQ stride in bytes (16 × a power of two: room for max_recv_sge data segments).
    pub rq_stride: u32,
    /// Doorbell record: `[0]` = receive counter, `[1]` = send counter, both big-endian,
    /// 16 significant bits.
    pub dbrec: *mut u32,
    /// BlueFlame register (UAR page offset of this QP's bfreg); the 8-byte doorbell goes here.
    pub bf_reg: *mut u8,
    /// Size of one BlueFlame half in bytes (typically 256); 0 = no BlueFlame.
    pub bf_size: u32,
}

/// A CQ's ring and doorbell record (`struct mlx5dv_cq`).
#[derive(Clone, Copy, Debug)]
pub struct DvCq {
    /// CQ number.
    pub cqn: u32,
    /// CQE ring: `cqe_cnt` entries of `cqe_size` bytes.
    pub buf: *mut u8,
    /// Number of CQEs (a power of two).
    pub cqe_cnt: u32,
    /// 64 or 128; with 128 the 64-byte CQE is the second half of each slot.
    pub cqe_size: u32,
    /// `[0]` = consumer index (`ci & 0xffffff`, big-endian); `[1]` = arm doorbell.
    pub dbrec: *mut u32,
}

/// An SRQ's ring and doorbell record (`struct mlx5dv_srq`).
#[derive(Clone, Copy, Debug)]
pub struct DvSrq {
    /// SRQ number.
    pub srqn: u32,
    /// WQE ring: `wqe_cnt` entries of `stride` bytes, each a 16-byte "next" segment followed by
    /// data segments; free entries form a list linked through `next_wqe_index`.
    pub buf: *mut u8,
    /// Number of entries.
    pub wqe_cnt: u32,
    /// Entry size in bytes.
    pub stride: u32,
    /// Index of the first free entry at creation.
    pub head: u32,
    /// Index of the last free entry at creation.
    pub tail: u32,
    /// `[0]` = receive counter (big-endian, 16 bits).
    pub dbrec: *mut u32,
}

// SAFETY: the descriptors are plain addresses; whoever dereferences them (the queue types)
// upholds the single-producer / single-consumer discipline that makes cross-thread use sound.
unsafe impl Send for DvQp {}
// SAFETY: as above.
unsafe impl Send for DvCq {}
// SAFETY: as above.
unsafe impl Send for DvSrq {}

/// A UD address handle that is nothing but its 48-byte mlx5 address vector
/// (`struct mlx5_wqe_av`): the address handle of devices whose handles own no other object
/// (the software device, queues built from descriptors by the caller).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddressVector(pub [u8; crate::wire::MLX5_AV_LEN]);
