//! Device time: mlx5 completion timestamps in nanoseconds.
//!
//! An mlx5 CQE carries a 64-bit timestamp at byte 48, big-endian. What it holds depends on
//! the queue's timestamp format:
//!
//! - **free-running**: the device's core clock in cycles. [`ClockInfo::ts_to_ns`] turns it
//!   into nanoseconds with the clock info the kernel publishes in its clock-info page
//!   (`nsec` at `last_cycles`, `mult`/`shift` for cycles → ns, `mask` for the counter width);
//! - **real-time** (devices with `MLX5DV_CONTEXT_FLAGS_REAL_TIME_TS`, CQs created for
//!   wall-clock timestamps): the device's real-time clock as `seconds << 32 | nanoseconds`.
//!   [`RealTime`] decodes it.
//!
//! `docs/timestamps.md` has the evidence for both rules, the update rule of the page and the
//! staleness bound.
//!
//! # Contract
//!
//! - [`ClockInfo::ts_to_ns`] returns exactly what rdma-core 44's `mlx5dv_ts_to_ns` returns
//!   for every input: the same masked wrap-around, the same "older than `last_cycles`" branch
//!   (taken when the masked distance exceeds `mask / 2`), the same 64-bit wrapping arithmetic
//!   (checked bit for bit against `fixtures/mlx5/clock.txt`). A shift of 64 or more, undefined
//!   in C, shifts by `shift % 64` here (what x86 does); [`ClockInfo::check`] refuses it.
//! - That result is the device time only while the timestamp is within
//!   [`ClockInfo::max_delta_cycles`] of `last_cycles` (and, for older timestamps, when
//!   `mult >= frac`). [`ClockInfo::ts_to_ns_checked`] returns `None` where the arithmetic
//!   wrapped; a timestamp newer than `last_cycles` by more than `mask / 2` cannot be told from
//!   an old one and comes out in the past. Keep the clock info fresher than that: read the page
//!   again at least once per [`ClockInfo::kernel_update_period_cycles`].
//! - [`ClockInfoReader`] reads a clock-info page with the kernel's seqlock rule (sign word
//!   before and after, retry while the update bit is set or the sign changed) and gives up
//!   with [`ClockInfoError::Busy`] after a bounded number of tries: it never spins forever.
//! - Nothing here panics, allocates, locks or makes a system call. No `unsafe`.
//!
//! The parts: [`ClockInfo`] and its conversion (`info`), the real-time format and what a
//! CQ's timestamps carry (`format`), the page's byte layout ([`page`]), and the seqlock
//! reader and the pages it reads (`reader`).

mod format;
mod info;
pub mod page;
mod reader;

pub use format::{real_time_to_ns, RealTime, TimestampFormat, TimestampKind};
pub use info::{khz2mult, ClockInfo, ClockInfoError};
pub use reader::{ClockInfoBytes, ClockInfoReader, ClockInfoSource, SharedClockInfo};

/// Nanoseconds per second.
pub const NSEC_PER_SEC: u64 = 1_000_000_000;

/// The clock-info page's update bit in `sign` (`MLX5_IB_CLOCK_INFO_KERNEL_UPDATING`): set
/// while the writer changes the fields; each completed update adds 2 to `sign`.
pub const CLOCK_INFO_KERNEL_UPDATING: u32 = 1;

/// The kernel mlx5 clock's cycles → ns shift (`MLX5_CYCLES_SHIFT`).
pub const MLX5_CYCLES_SHIFT: u32 = 23;

/// The kernel mlx5 clock's counter mask: the low 41 bits (`CLOCKSOURCE_MASK(41)`).
pub const MLX5_CYCLES_MASK: u64 = (1 << 41) - 1;

/// How many times [`ClockInfoReader`] tries by default (rdma-core tries 10 times while the
/// update bit is set before `mlx5dv_get_clock_info` fails with EBUSY).
pub const CLOCK_INFO_READ_TRIES: u32 = 10;

/// Fixtures the tests of the submodules share.
#[cfg(test)]
mod tests {
    use super::*;

    pub(super) const NS0: u64 = 1_764_720_000_123_456_789;

    pub(super) fn clock_156() -> ClockInfo {
        ClockInfo {
            frac: 0x5a5a5,
            ..ClockInfo::for_device_khz(156_250, NS0, 0x0000_0123_4567_8900).unwrap()
        }
    }
}
