//! Who owns an mlx5 queue's memory, named by static types.
//!
//! The queue types of this provider are built from descriptors only ([`super::dv`]); the
//! memory those describe belongs to objects of the device on the other side of the queues:
//! the verbs CQ, SRQ and QP on hardware ([`super::Mlx5Device`]), another device's objects
//! elsewhere (the software device, a bench rig's plain memory). [`Owners`] names those types
//! for one device `D`, and the queues carry them as `Mlx5Cq<D>`, `Mlx5Srq<D>`, `Mlx5Qp<D>`,
//! `Mlx5Sq<D>` (`D` defaults to [`super::Mlx5Device`]): a queue hands its owner back with
//! its own type, so the hardware glue reaches the verbs QP behind an `Mlx5Qp` without a
//! run-time check, and no provider's object can be passed to another's queue.
//!
//! A UD send names the address handle of the device its queue runs on; another device's
//! handle does not compile:
//!
//! ```compile_fail
//! use rdma_direct_providers::mlx5::{AddressVector, Mlx5Qp};
//! use rdma_direct_providers::{QueuePair, SendQueue, SendWr, UdDest};
//! // A hardware QP takes the hardware handle (`Mlx5Ah`), not a bare address vector.
//! fn send(qp: &mut Mlx5Qp, ah: &AddressVector) {
//!     let dest = UdDest { ah, remote_qpn: 1, remote_qkey: 1 };
//!     let _ = qp.sq().post(SendWr::send(1, &[]).to(dest));
//! }
//! ```
//!
//! The same post on a device whose handle is the address vector compiles:
//!
//! ```
//! use rdma_direct_providers::mlx5::{AddressVector, Mlx5Qp};
//! use rdma_direct_providers::sim::SimDevice;
//! use rdma_direct_providers::{QueuePair, SendQueue, SendWr, UdDest};
//! fn send(qp: &mut Mlx5Qp<SimDevice>, ah: &AddressVector) {
//!     let dest = UdDest { ah, remote_qpn: 1, remote_qkey: 1 };
//!     let _ = qp.sq().post(SendWr::send(1, &[]).to(dest));
//! }
//! ```
//!
//! Lifetimes the queue types guarantee:
//! - a CQ's owner lives as long as its `Mlx5Cq` and every `Mlx5Qp` registered with it (a
//!   QP's reset or drop scans the CQ memory, even after the `Mlx5Cq` is gone);
//! - an SRQ's owner as long as its `Mlx5Srq` and every `Mlx5Qp` attached to it (the poller
//!   reads SRQ entries back for scatter-to-CQE, for live QPs only);
//! - a QP's owner is dropped first when the `Mlx5Qp` is, after the CQs have forgotten the
//!   QP and before the QP lets go of its CQs' and SRQ's owners (on hardware: the verbs QP is
//!   destroyed before the last references to its CQs and SRQ can go).

use crate::wire::MLX5_AV_LEN;

/// The types that own one device's queue memory, and the address handle its UD sends carry.
pub trait Owners {
    /// Owns a CQ's ring and doorbell record (hardware: the verbs CQ).
    type Cq: Send + Sync + 'static;
    /// Owns an SRQ's ring and doorbell record (hardware: the verbs SRQ).
    type Srq: Send + Sync;
    /// Owns a QP's rings, doorbell record and BlueFlame register (hardware: the verbs QP and
    /// its thread domain).
    type Qp: Send;
    /// The address handle of a UD send (hardware: the verbs AH and its address vector).
    type Ah;
    /// The 48-byte address vector of `ah` (`struct mlx5_wqe_av`), copied into every UD WQE.
    fn av(ah: &Self::Ah) -> &[u8; MLX5_AV_LEN];
}
