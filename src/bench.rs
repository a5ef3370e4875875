//! Measurements of the mlx5 hot path itself (feature `bench`): what `rdma-direct bench`
//! runs, as library calls that return figures and print nothing.
//!
//! Contract:
//! - [`hot`]: the cost of post + ring per work request and of polling per completion, on
//!   plain memory (the mlx5 provider's queues with the bench rig `rdma-direct-rig` playing
//!   the device): per-sample ns per operation and the operations each sample timed. What is
//!   measured is the driver's work, not a NIC.
//! - [`batching`]: the doorbell-batching sweep (batch sizes x doorbell mode x signaling x
//!   payload x size) on plain memory, the sim, libibverbs or the mlx5 provider on a device,
//!   every point sampled round-robin after warm-up rounds, with what a ConnectX would move
//!   over PCIe for it (counted by the rig's PCIe tap from what the provider wrote).
//! - Plain-memory and sim figures are not hardware figures; callers say so where they print.
//! - Nothing here parses a command line or prints; a caller's stop hook
//!   ([`StopHook`](crate::perf::StopHook)) is asked between rounds, never inside a timed loop.
//!   The timed regions hold the post, the ring and the poll only.

pub mod batching;
pub mod cpu;
pub mod hot;
