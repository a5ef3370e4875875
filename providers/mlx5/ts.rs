//! Completion timestamps of an mlx5 CQ: which format its CQEs carry and how they become
//! nanoseconds.
//!
//! Contract: a [`CqClock`] is attached to a CQ created to carry timestamps (the sim's
//! `create_cq_ts`; on hardware a CQ made by `ibv_create_cq_ex` with
//! `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`, or `..._WALLCLOCK` alone for the real-time
//! format — both CQs of a QP in the same format). The raw value is CQE bytes 48..56
//! (`wire::offset::cqe64::TIMESTAMP`, big-endian). Free-running values convert with a copy of
//! the device's clock info ([`ClockInfo::ts_to_ns`], rdma-core's `mlx5dv_ts_to_ns`), which
//! [`CqClock::refresh`] re-reads from its [`ClockInfoFeed`] — the sim's page, or on hardware
//! `mlx5dv_get_clock_info` (resolved with `dlsym`; run against the stand-in of `tests/standin/`, not on an mlx5 NIC). The copy must
//! be refreshed at least once per kernel refresh period
//! ([`ClockInfo::kernel_update_period_cycles`], ~1100 s at 156.25 MHz) and the timestamps
//! converted must not be older than one period, or the conversion leaves its exact range
//! (see `docs/timestamps.md`, "Staleness bound"). Reading it never consumes a CQE, so a
//! failed read (`EBUSY` while the kernel updates) loses nothing. Real-time values are
//! `seconds << 32 | nanoseconds` ([`crate::clock::real_time_to_ns`]).

use std::sync::Arc;

use crate::clock::{ClockInfo, ClockInfoReader, SharedClockInfo, TimestampFormat, TimestampKind};

/// Where a free-running CQ's clock info comes from.
pub trait ClockInfoFeed: Send + Sync + std::fmt::Debug {
    /// A consistent copy of the device's clock info now.
    fn clock_info(&self) -> crate::Result<ClockInfo>;
}

impl ClockInfoFeed for SharedClockInfo {
    fn clock_info(&self) -> crate::Result<ClockInfo> {
        ClockInfoReader::new(self)
            .read()
            .map_err(|e| crate::Error::InvalidArgument {
                context: "clock-info page read",
                detail: e.to_string(),
            })
    }
}

/// A CQ's timestamp format and, for free-running stamps, its copy of the clock info.
#[derive(Clone, Debug)]
pub struct CqClock {
    kind: TimestampKind,
    feed: Option<Arc<dyn ClockInfoFeed>>,
    format: TimestampFormat,
}

impl CqClock {
    /// Real-time stamps (`seconds << 32 | nanoseconds`); nothing to read.
    pub fn real_time() -> CqClock {
        CqClock {
            kind: TimestampKind::RealTime,
            feed: None,
            format: TimestampFormat::RealTime,
        }
    }

    /// Free-running stamps converted with `feed`'s clock info (read now).
    pub fn free_running(feed: Arc<dyn ClockInfoFeed>) -> crate::Result<CqClock> {
        let info = feed.clock_info()?;
        info.check().map_err(|e| crate::Error::InvalidArgument {
            context: "mlx5dv_get_clock_info",
            detail: e.to_string(),
        })?;
        Ok(CqClock {
            kind: TimestampKind::FreeRunning,
            feed: Some(feed),
            format: TimestampFormat::FreeRunning(info),
        })
    }

    /// Which format the CQEs carry.
    pub fn kind(&self) -> TimestampKind {
        self.kind
    }

    /// The conversion in use (with the clock info copy for free-running stamps).
    pub fn format(&self) -> TimestampFormat {
        self.format
    }

    /// Re-read the clock info (free-running only; real-time needs none). On failure the
    /// previous copy stays in use.
    pub fn refresh(&mut self) -> crate::Result<()> {
        if let Some(feed) = &self.feed {
            self.format = TimestampFormat::FreeRunning(feed.clock_info()?);
        }
        Ok(())
    }

    /// A raw CQE timestamp in ns.
    #[inline]
    pub fn to_ns(&self, raw: u64) -> u64 {
        self.format.to_ns(raw)
    }
}

/// The clock info of a hardware context: `mlx5dv_get_clock_info` (resolved with `dlsym`
/// from libmlx5). Run against the stand-in (`tests/standin/`), not on an mlx5 NIC.
pub struct DvClockFeed {
    ctx: rdma_direct_core::control::Context,
    mlx5: &'static crate::ffi::Mlx5,
}

impl std::fmt::Debug for DvClockFeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DvClockFeed")
            .field("ctx", &self.ctx)
            .finish_non_exhaustive()
    }
}

impl DvClockFeed {
    /// The feed of `ctx` (an mlx5 context).
    pub fn new(
        ctx: rdma_direct_core::control::Context,
        mlx5: &'static crate::ffi::Mlx5,
    ) -> DvClockFeed {
        DvClockFeed { ctx, mlx5 }
    }
}

impl ClockInfoFeed for DvClockFeed {
    fn clock_info(&self) -> crate::Result<ClockInfo> {
        let mut c = crate::ffi::mlx5dv_clock_info::default();
        // SAFETY: a live mlx5 context (`ctx` keeps it open) and a writable out struct.
        let rc = unsafe { (self.mlx5.mlx5dv_get_clock_info)(self.ctx.as_ptr(), &mut c) };
        if rc != 0 {
            return Err(crate::Error::verb(
                "mlx5dv_get_clock_info",
                rc,
                "EBUSY: the kernel was updating the page, retry; EOPNOTSUPP/EINVAL: the \
                 device runs its clock in real-time mode (use TimestampKind::RealTime)",
            ));
        }
        Ok(ClockInfo {
            nsec: c.nsec,
            last_cycles: c.last_cycles,
            frac: c.frac,
            mult: c.mult,
            shift: c.shift,
            mask: c.mask,
        })
    }
}
