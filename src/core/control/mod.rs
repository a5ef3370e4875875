//! The safe control path over libibverbs.
//!
//! Named `control` for what it is, the control path (devices, resources, QP state), so that
//! `verbs` in this workspace means one thing: the provider that posts and polls through
//! libibverbs (`rdma_direct::providers::verbs`, `--provider verbs`). Both go through
//! libibverbs; only the provider is on the data path.
//!
//! - [`Device::list`], [`Context::open`]: find and open a device (`rxe0`, `mlx5_0`).
//! - [`Context::query_device`], [`Context::query_port`], [`Context::gid_table`]: what the
//!   device and its ports are (state, MTUs, LID, link layer, speed and width, rate in Gb/s,
//!   GIDs with their RoCE type read from sysfs).
//! - [`Pd`], [`Mr`] (explicit access; nothing remote unless asked), [`Cq`], [`Srq`], [`Ah`].
//! - [`Qp`] for RC, UC and UD with the capacities the device granted, and its state machine
//!   ([`Qp::to_init`], [`Qp::to_rtr`], [`Qp::to_rts`], [`Qp::to_err`], [`Qp::to_reset`],
//!   [`Qp::connect`], [`Qp::query`]).
//! - [`Qp::mlx5dv`], [`Cq::mlx5dv`], [`Srq::mlx5dv`]: the `mlx5dv_init_obj` view for the mlx5
//!   provider (an mlx5 device only; [`Context::is_mlx5`]).
//! - [`Cq::new_timestamped`], [`Context::query_rt_clock`]: CQs whose completions carry the
//!   device's time (`ibv_create_cq_ex`), and the device clock (`ibv_query_rt_values_ex`);
//!   both [`crate::Error::Unsupported`] on rxe.
//! - [`Context::poll_async_event`]: asynchronous events without blocking (CQ overrun shows
//!   up there as `IBV_EVENT_CQ_ERR`, and nowhere else).
//!
//! ## Teardown order, by construction
//!
//! Every object owns (an `Arc` of) what it was created from: a [`Qp`] its [`Pd`], both
//! [`Cq`]s and its [`Srq`]; an [`Mr`], [`Srq`] or [`Ah`] its PD; a PD or CQ its [`Context`].
//! The C object is destroyed in the owner's `Drop`, so a CQ is never destroyed while a QP
//! still uses it, and the device is closed last, whatever order the Rust values go out of
//! scope in. `Context`, `Pd`, `Cq` and `Srq` are cheap `Clone`s of a shared handle.
//!
//! ## For the data-plane providers
//!
//! `as_ptr()` on every object gives the raw `ibv_*` pointer, valid for as long as the object
//! lives; [`crate::ffi::ops`] posts and polls through the context's ops table.

mod address;
mod channel;
mod device;
mod events;
mod gid;
mod mlx5;
mod port;
mod qp;
mod resources;
mod timestamps;
mod transition;

pub use channel::CompChannel;
pub use device::{
    format_guid, loaded_libraries, no_device_reason, Context, Device, DeviceAttr, SYSFS_INFINIBAND,
};
pub use events::{AsyncElement, AsyncEvent, AsyncEventKind};
pub use gid::{Gid, GidEntry, GidType};
pub use port::{lane_gbps, width_lanes, LinkLayer, PortAttr, PortState};
pub use qp::Qp;
pub use resources::{check_access, Ah, Cq, Mr, Pd, Srq};
pub use transition::{mask_names, transition_mask, InitAttr, QpAttr, RtrAttr, RtsAttr, Transition};
