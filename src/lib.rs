//! # rdma-direct
//!
//! A kernel-bypass RDMA data plane with a hand-rolled mlx5 provider.
//!
//! ## Layers
//!
//! | layer | module | what it does | unsafe? |
//! |---|---|---|---|
//! | wire | [`wire`] | typed views over mlx5 WQE segments and CQEs (bytes in, fields out) | forbidden |
//! | ffi | [`ffi`] | `#[repr(C)]` mirrors of `verbs.h` / `mlx5dv.h`, the `dlopen` loader | yes, fenced |
//! | control path | [`verbs`] | devices, ports, GIDs, PD, MR, CQ, SRQ, QP and their state machine through libibverbs | wraps ffi |
//! | endpoints | [`endpoint`] | out-of-band exchange of QPN/PSN/GID/MR over TCP, and rc_pingpong's text format | none |
//! | barriers, MMIO | [`barrier`], [`mmio`] | one named barrier per purpose, volatile device-memory access | yes, fenced |
//! | data plane | [`providers`] | the provider traits and the three providers: `mlx5` (direct WQE writing), `rxe` (libibverbs post/poll), `sim` (software mlx5 device) | providers only |
//! | diagnostics | [`doctor`] | the troubleshooting order (link, MTU, caps, memlock, NUMA/affinity, PCIe) as checks returning findings | none |
//! | measurement | [`perf`] | perftest-style latency / bandwidth runs over any provider, returning perftest's statistics | none |
//!
//! [`prelude`] holds the names an embedding program needs (devices, provider traits, work
//! requests, completions) in one `use`. The library parses no command line and prints
//! nothing: the `rdma-direct` binary (`src/bin/rdma-direct/`) does that on top of it.
//!
//! The control path may allocate, lock and make system calls. The data plane on mlx5 and on
//! the sim does none of these per operation (see `tests/hot_path_alloc.rs`).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod barrier;
pub mod clock;
pub mod doctor;
pub mod endpoint;
pub mod error;
pub mod ffi;
pub mod mmio;
pub mod perf;
pub mod prelude;
pub mod verbs;
pub mod wire;

#[path = "../providers/mod.rs"]
pub mod providers;

pub use error::{Error, Result};
