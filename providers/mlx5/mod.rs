//! The mlx5 provider: direct WQE writing, doorbells and CQE parsing.
//!
//! The queue types are built from the [`dv`] descriptors only (filled from
//! `mlx5dv_init_obj` on hardware, from the sim's memory on the software device), so the same
//! code runs on both.
//!
//! | type | role |
//! |---|---|
//! | [`Mlx5Qp`] | a QP: [`Mlx5Sq`] + [`Mlx5Rq`], `set_state` from the control path |
//! | [`Mlx5Sq`] | WQE writing, SQ accounting, doorbell / BlueFlame |
//! | [`Mlx5Rq`], [`Mlx5Srq`] | receive WQEs, RQ / SRQ doorbell records |
//! | [`Mlx5Cq`] | owner-bit polling, CQE → [`crate::Completion`] |
//! | [`Owners`] | per device: what owns each queue's memory, the UD address handle type |
//! | [`wqe`] | a request as the wire layer's [`crate::wire::SendWqe`] (tests, tools) |
//!
//! Words from the field, as rdma-core uses them: **WQEBB** a 64-byte basic block of a WQE;
//! **ds** a WQE's size in 16-byte units; **pi** / **ci** producer / consumer indices (free
//! running, masked at the slot); **dbrec** the doorbell record in host memory the device
//! reads (QP: `[0]` receive counter, `[1]` send counter; CQ: `[0]` consumer index);
//! **bf** the BlueFlame register in the UAR page, two halves of `bf_size` bytes used in turn;
//! **wqe_counter** the WQE index a CQE names; **qpn** / **cqn** / **srqn** object numbers.
//!
//! Threading: each queue has one producer (`&mut self`); a CQ has one poller. The poster and
//! the poller share per-queue tracking without locks (see `shared.rs`), so a QP may be posted
//! from one thread while its CQ is polled from another.

pub mod arm;
pub mod cq;
mod dedicated;
pub mod device;
pub mod dv;
pub mod handshake;
mod owners;
pub mod probe;
mod qp;
mod rq;
pub(crate) mod shared;
mod sq;
pub mod ts;
pub mod wqe;

pub use arm::{arm_doorbell, CqArm, CqWaiter, EventChannel};
pub use cq::{syndrome_status, Mlx5Cq};
pub use dedicated::{Mlx5Dedicated, NotDedicated};
pub use device::{BfregMode, Mlx5Ah, Mlx5Device, QpOwner};
pub use dv::{AddressVector, DvCq, DvQp, DvSrq};
pub use handshake::{poll_barrier, PollBarrier};
pub use owners::Owners;
pub use qp::Mlx5Qp;
pub use rq::{Mlx5Rq, Mlx5Srq};
pub use sq::Mlx5Sq;
pub use ts::{ClockInfoFeed, CqClock};
pub use wqe::{fm_ce_se_of, send_wqe, OpSegs};

/// How `ring()` tells the device about staged WQEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DoorbellMode {
    /// Always the 8-byte doorbell (first 8 bytes of the last WQE's ctrl segment).
    Doorbell,
    /// BlueFlame copy of the WQE whenever exactly one WQE is staged and it fits `bf_size`.
    BlueFlame,
    /// libmlx5's rule: BlueFlame for exactly one staged WQE with `ds > 1` and
    /// `ds * 16 <= bf_size`, else the 8-byte doorbell.
    #[default]
    Auto,
}

/// Marks the branch that calls it as rarely taken: the code falls through to the common case
/// and the register allocator keeps that case's values in registers, spilling around the
/// call instead.
#[cold]
#[inline(never)]
pub(crate) fn cold_path() {}
