//! `#[repr(C)]` mirrors of rdma-core 44's `verbs.h`, `mlx5dv.h` and `rdma_cma.h`, and the
//! run-time loader.
//!
//! - [`types`]: the structs and enum values, named as in C, with their layout asserted at
//!   compile time and checked against `fixtures/abi/abi.txt` by `tests/abi.rs`.
//! - [`loader`]: `dlopen` of `libibverbs.so.1` / `libmlx5.so.1` into function tables
//!   ([`verbs()`], [`mlx5()`]); a missing library is an [`Error::LibraryMissing`](crate::Error).
//! - [`cm`]: librdmacm's `rdma_cm_id`, `rdma_cm_event`, `rdma_conn_param` and event values
//!   ([`rdmacm()`] loads `librdmacm.so.1`).
//! - [`ext`]: `struct verbs_context` (the extended ops before `ibv_context`), thread and
//!   parent domains, `ibv_qp_init_attr_ex`, `mlx5dv_qp_init_attr`.
//! - [`ops`]: the ops-table entry points verbs.h inlines (`ibv_post_send`, `ibv_poll_cq`, ...).
//!
//! Everything here is raw: the safe control path is [`crate::control`]. Nothing in this module
//! allocates or locks after the first load.

pub mod cm;
pub mod ext;
pub mod loader;
pub mod ops;
pub mod types;

pub use cm::*;
pub use ext::*;
pub use loader::{
    mlx5, rdmacm, verbs, Mlx5, Rdmacm, Verbs, LIBIBVERBS, LIBIBVERBS_HINT, LIBMLX5, LIBMLX5_HINT,
    LIBRDMACM, LIBRDMACM_HINT,
};
pub use ops::DataPathOps;
pub use types::*;
