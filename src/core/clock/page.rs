//! Byte offsets in the kernel's clock-info page (`struct mlx5_ib_clock_info`, host byte
//! order, one page mapped read-only from the verbs command fd), checked against
//! `fixtures/mlx5/clock.txt`.

/// `u32 sign`: even when stable, [`CLOCK_INFO_KERNEL_UPDATING`](super::CLOCK_INFO_KERNEL_UPDATING) set during an update.
pub const SIGN: usize = 0;
/// `u32 resv`.
pub const RESV: usize = 4;
/// `u64 nsec`.
pub const NSEC: usize = 8;
/// `u64 cycles` (`last_cycles` of [`ClockInfo`](super::ClockInfo)).
pub const CYCLES: usize = 16;
/// `u64 frac`.
pub const FRAC: usize = 24;
/// `u32 mult`.
pub const MULT: usize = 32;
/// `u32 shift`.
pub const SHIFT: usize = 36;
/// `u64 mask`.
pub const MASK: usize = 40;
/// `u64 overflow_period`: the kernel's refresh period, in jiffies.
pub const OVERFLOW_PERIOD: usize = 48;
/// Size of the struct.
pub const LEN: usize = 56;
