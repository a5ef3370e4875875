//! Completion timestamps through verbs: `ibv_create_cq_ex` with a timestamp flag, and
//! `ibv_query_rt_values_ex` for the device clock, both through the context's extended ops.
//!
//! Contract: where the provider refuses (rxe accepts no timestamp `wc_flags` in its
//! `create_cq_ex` and has no `query_rt_values`: `EOPNOTSUPP` in both cases), the result is
//! [`Error::Unsupported`] naming the device and the fix (measure latency in software, or use
//! an mlx5 device). A free-running CQ is created with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`,
//! a real-time one with `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK` alone (both CQs of a
//! QP the same, or the kernel refuses the QP). The completions' timestamps are read from
//! the CQE by the mlx5 provider; reading them through `ibv_wc_read_completion_ts` (the
//! `ibv_cq_ex` poll ops) is not wired into the verbs provider.

use std::sync::Arc;

use super::device::Context;
use super::resources::{Cq, CqInner};
use crate::error::{Error, Result};
use crate::ffi;

fn unsupported(ctx: &Context, verb: &str, errno: i32) -> Error {
    Error::Unsupported {
        what: format!(
            "{verb} on {}: completion timestamps (errno {errno}{}); the device has no NIC \
             clock for verbs (rxe accepts no timestamp flag): measure latency in software, \
             or use an mlx5 device",
            ctx.name(),
            if errno == libc::EOPNOTSUPP {
                ", EOPNOTSUPP"
            } else {
                ""
            }
        ),
    }
}

impl Cq {
    /// `ibv_create_cq_ex` with at least `cqe` entries whose completions carry the device's
    /// time: its free-running clock, or with `real_time` its real-time clock.
    pub fn new_timestamped(ctx: &Context, cqe: u32, real_time: bool) -> Result<Cq> {
        if cqe == 0 || cqe > i32::MAX as u32 {
            return Err(Error::InvalidArgument {
                context: "ibv_create_cq_ex",
                detail: format!("cqe {cqe} must be 1..=i32::MAX"),
            });
        }
        let mut attr = ffi::ibv_cq_init_attr_ex {
            cqe,
            cq_context: std::ptr::null_mut(),
            channel: std::ptr::null_mut(),
            comp_vector: 0,
            wc_flags: if real_time {
                ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK
            } else {
                ffi::IBV_WC_EX_WITH_COMPLETION_TIMESTAMP
            },
            comp_mask: 0,
            flags: 0,
            parent_domain: std::ptr::null_mut(),
        };
        // SAFETY: a live context; a valid attr.
        match unsafe { ffi::create_cq_ex(ctx.as_ptr(), &mut attr) } {
            Err(Error::Unsupported { .. }) => Err(unsupported(ctx, "ibv_create_cq_ex", 0)),
            Err(e) => Err(e),
            Ok(Err(errno)) if errno == libc::EOPNOTSUPP || errno == libc::ENOTSUP => {
                Err(unsupported(ctx, "ibv_create_cq_ex", errno))
            }
            Ok(Err(errno)) => Err(Error::verb("ibv_create_cq_ex", errno, "")),
            Ok(Ok(raw)) => Ok(Cq {
                inner: Arc::new(CqInner {
                    raw,
                    ctx: ctx.clone(),
                    _channel: None,
                }),
            }),
        }
    }
}

impl Context {
    /// `ibv_query_rt_values_ex` for the raw device clock (mlx5: the free-running counter,
    /// or `seconds << 32 | ns` on a real-time clock).
    pub fn query_rt_clock(&self) -> Result<u64> {
        // SAFETY: a live context.
        match unsafe { ffi::query_rt_values_ex(self.as_ptr()) } {
            Err(Error::Unsupported { .. }) => Err(unsupported(self, "ibv_query_rt_values_ex", 0)),
            Err(e) => Err(e),
            Ok(Err(errno)) if errno == libc::EOPNOTSUPP || errno == libc::ENOTSUP => {
                Err(unsupported(self, "ibv_query_rt_values_ex", errno))
            }
            Ok(Err(errno)) => Err(Error::verb("ibv_query_rt_values_ex", errno, "")),
            Ok(Ok(v)) => Ok(v),
        }
    }
}
