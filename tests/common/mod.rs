//! Helpers shared by the integration tests.
//!
//! Device tests are `#[ignore]`d: a plain `cargo test` lists them as ignored (never as passed).
//! They run with `--ignored` and `RDMA_DIRECT_DEVICE=<dev>` (the rxe guest harness sets it to
//! `rxe0`). Run with `--ignored` but without the variable, they fail and say why, so a skipped
//! device test is never counted as a pass.
#![allow(dead_code)]

/// The device named by `RDMA_DIRECT_DEVICE`; panics (failing the test) when it is unset.
pub fn device() -> String {
    // Against tests/standin's libibverbs (RDMA_DIRECT_LIBIBVERBS), the sim is the device.
    #[cfg(feature = "sim")]
    if let Err(e) = rdma_direct::providers::sim::standin::attach_if_standin() {
        panic!("the stand-in for libibverbs: {e}");
    }
    match std::env::var("RDMA_DIRECT_DEVICE") {
        Ok(d) if !d.is_empty() => d,
        _ => panic!(
            "skipped: no RDMA device — this #[ignore]d device test needs RDMA_DIRECT_DEVICE=<dev> \
             (e.g. rxe0 in the guest: tests/guest/run); it is reported as failed, not passed"
        ),
    }
}

/// The GID index to use: `RDMA_DIRECT_GID_INDEX` if set (the guest harness reads it from
/// sysfs), else `None` (the caller picks one from the GID table).
pub fn gid_index() -> Option<u8> {
    std::env::var("RDMA_DIRECT_GID_INDEX")
        .ok()
        .and_then(|s| s.parse().ok())
}
