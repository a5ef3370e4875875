//! # rdma-direct-core
//!
//! The lower floor of rdma-direct: everything the data-plane providers build on, and nothing
//! that knows a provider. Embedders reach it through the `rdma-direct` crate, which re-exports
//! each module under the same name (`rdma_direct::wire`, `rdma_direct::control`, ...).
//!
//! | module | what it does | unsafe? |
//! |---|---|---|
//! | [`wire`] | typed views over mlx5 WQE segments and CQEs (bytes in, fields out) | forbidden |
//! | [`types`], [`error`] | work requests, completions, QP parameters, access flags, MTU, errors: plain values every layer shares | `Send`/`Sync` of the address handle only |
//! | [`ffi`] | `#[repr(C)]` mirrors of `verbs.h` / `mlx5dv.h` / `rdma_cma.h`, the `dlopen` loader | yes, fenced |
//! | [`control`] | devices, ports, GIDs, PD, MR, CQ, SRQ, QP and their state machine through libibverbs | wraps ffi |
//! | [`endpoint`] | the out-of-band endpoint message and its exchange over TCP, rc_pingpong's text format | none |
//! | [`clock`] | the NIC clock: its page, the cycles-to-nanoseconds conversion | reads device memory |
//! | [`pcie`] | a PCIe link model: NIC transactions to bytes on the link and a link-bound message rate | none |
//! | [`barrier`], [`mmio`] | one named barrier per purpose, volatile device-memory access | yes, fenced |
//!
//! The dependency rule (enforced by `tests/deps.rs` of the workspace): `wire` imports nothing
//! of the crate; `types` and `error` only each other; nothing here names a provider.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod barrier;
pub mod clock;
pub mod control;
mod convert;
pub mod endpoint;
pub mod error;
pub mod ffi;
pub mod mmio;
pub mod pcie;
pub mod types;
pub mod wire;

pub use error::{Error, Result};
