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

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

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

/// The values `mlx5dv_get_clock_info` returns (`struct mlx5dv_clock_info`): at device cycle
/// `last_cycles` the clock read `nsec` ns plus `frac / 2^shift` ns; one cycle is
/// `mult / 2^shift` ns; the counter has the bits of `mask`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClockInfo {
    /// Nanoseconds at `last_cycles` (wall-clock time when the kernel's PTP clock runs).
    pub nsec: u64,
    /// The device cycle counter at the last update (the page's `cycles`), within `mask`.
    pub last_cycles: u64,
    /// Fractional nanoseconds at `last_cycles`, in units of `2^-shift` ns (below `1 << shift`
    /// as the kernel writes it).
    pub frac: u64,
    /// Cycles → ns multiplier, scaled by `2^shift`.
    pub mult: u32,
    /// Cycles → ns shift.
    pub shift: u32,
    /// The counter's bits (`2^width - 1`).
    pub mask: u64,
}

/// Why a clock info or a clock-info page was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClockInfoError {
    /// `shift` is 64 or more (undefined in `mlx5dv_ts_to_ns`).
    BadShift(u32),
    /// `mult` is 0: every timestamp would convert to `nsec`.
    ZeroMult,
    /// `mask` is not of the form `2^width - 1` with `width >= 1`.
    BadMask(u64),
    /// The page was being updated (or changed) on every one of `tries` reads.
    Busy {
        /// How many reads were tried.
        tries: u32,
    },
    /// A byte view of the page is shorter than the page's 56 bytes.
    Truncated(usize),
}

impl fmt::Display for ClockInfoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClockInfoError::BadShift(s) => write!(
                f,
                "clock info: shift {s} is 64 or more (the kernel writes 23); the page is not an mlx5 clock-info page"
            ),
            ClockInfoError::ZeroMult => write!(
                f,
                "clock info: mult is 0 (the device reported no core clock frequency); use the real-time format or software time"
            ),
            ClockInfoError::BadMask(m) => write!(
                f,
                "clock info: mask {m:#x} is not 2^n - 1 (the kernel writes 2^41 - 1); the page is not an mlx5 clock-info page"
            ),
            ClockInfoError::Busy { tries } => write!(
                f,
                "clock info: the page was being updated on all {tries} reads (EBUSY in mlx5dv_get_clock_info); retry later"
            ),
            ClockInfoError::Truncated(len) => write!(
                f,
                "clock info: {len} bytes given, the page's fields need {}",
                page::LEN
            ),
        }
    }
}

impl std::error::Error for ClockInfoError {}

/// `clocksource_khz2mult(khz, shift)` of the kernel: the multiplier that turns cycles of a
/// `khz` clock into ns after `>> shift`, rounded to nearest. `None` when `khz` is 0, `shift`
/// is 64 or more, or the result does not fit 32 bits.
pub fn khz2mult(khz: u32, shift: u32) -> Option<u32> {
    if khz == 0 {
        return None;
    }
    let tmp = 1_000_000u64.checked_shl(shift)?;
    if tmp >> shift != 1_000_000 {
        return None;
    }
    let tmp = tmp.checked_add(u64::from(khz / 2))? / u64::from(khz);
    u32::try_from(tmp).ok()
}

impl ClockInfo {
    /// The clock info a kernel mlx5 clock of `khz` starts with: `nsec` ns at cycle `cycles`,
    /// shift 23, 41-bit mask, `mult = clocksource_khz2mult(khz, 23)`, no fraction. `None` if
    /// `khz` is 0.
    pub fn for_device_khz(khz: u32, nsec: u64, cycles: u64) -> Option<ClockInfo> {
        Some(ClockInfo {
            nsec,
            last_cycles: cycles & MLX5_CYCLES_MASK,
            frac: 0,
            mult: khz2mult(khz, MLX5_CYCLES_SHIFT)?,
            shift: MLX5_CYCLES_SHIFT,
            mask: MLX5_CYCLES_MASK,
        })
    }

    /// Refuses values no mlx5 clock-info page holds and that make the conversion meaningless:
    /// `shift >= 64`, `mult == 0`, a mask that is not `2^width - 1`.
    pub fn check(&self) -> Result<(), ClockInfoError> {
        if self.shift >= 64 {
            return Err(ClockInfoError::BadShift(self.shift));
        }
        if self.mult == 0 {
            return Err(ClockInfoError::ZeroMult);
        }
        if self.mask == 0 || self.mask & self.mask.wrapping_add(1) != 0 {
            return Err(ClockInfoError::BadMask(self.mask));
        }
        Ok(())
    }

    /// Device timestamp → ns, exactly as `mlx5dv_ts_to_ns`:
    ///
    /// ```text
    /// delta = (ts - last_cycles) & mask
    /// if delta > mask / 2:            # "older than last_cycles"
    ///     delta = (last_cycles - ts) & mask
    ///     ns = nsec - ((delta * mult - frac) >> shift)
    /// else:
    ///     ns = nsec + ((delta * mult + frac) >> shift)
    /// ```
    ///
    /// all in wrapping 64-bit arithmetic. See the module contract for when the result is the
    /// device time.
    #[inline]
    pub fn ts_to_ns(&self, ts: u64) -> u64 {
        let mult = u64::from(self.mult);
        let delta = ts.wrapping_sub(self.last_cycles) & self.mask;
        if delta > self.mask / 2 {
            let delta = self.last_cycles.wrapping_sub(ts) & self.mask;
            let back = delta.wrapping_mul(mult).wrapping_sub(self.frac);
            self.nsec.wrapping_sub(back.wrapping_shr(self.shift))
        } else {
            let fwd = delta.wrapping_mul(mult).wrapping_add(self.frac);
            self.nsec.wrapping_add(fwd.wrapping_shr(self.shift))
        }
    }

    /// Whether [`ts_to_ns`](Self::ts_to_ns) treats `ts` as older than `last_cycles`.
    #[inline]
    pub fn is_older(&self, ts: u64) -> bool {
        ts.wrapping_sub(self.last_cycles) & self.mask > self.mask / 2
    }

    /// [`ts_to_ns`](Self::ts_to_ns) where no step wraps: `None` when `delta * mult` overflows
    /// 64 bits, `delta * mult + frac` overflows, `delta * mult < frac` on the older branch, the
    /// shift is 64 or more, or the result leaves `0..=u64::MAX`. `Some` equals `ts_to_ns`.
    pub fn ts_to_ns_checked(&self, ts: u64) -> Option<u64> {
        if self.shift >= 64 {
            return None;
        }
        let mult = u64::from(self.mult);
        if self.is_older(ts) {
            let delta = self.last_cycles.wrapping_sub(ts) & self.mask;
            let back = delta.checked_mul(mult)?.checked_sub(self.frac)?;
            self.nsec.checked_sub(back >> self.shift)
        } else {
            let delta = ts.wrapping_sub(self.last_cycles) & self.mask;
            let fwd = delta.checked_mul(mult)?.checked_add(self.frac)?;
            self.nsec.checked_add(fwd >> self.shift)
        }
    }

    /// The largest distance in cycles between a timestamp and `last_cycles` over which the
    /// conversion of a newer timestamp neither takes the older branch nor wraps:
    /// `min(mask / 2, (2^64 - 1 - frac) / mult)`. With the kernel's values (shift 23, 41-bit
    /// mask) that is `mask / 2` = 2^40 cycles (~1100 s) for a 1 GHz clock and the product
    /// limit, 343 597 384 960 cycles (~2199 s), for a 156.25 MHz clock.
    pub fn max_delta_cycles(&self) -> u64 {
        let half = self.mask / 2;
        match (u64::MAX - self.frac).checked_div(u64::from(self.mult)) {
            Some(product_limit) => half.min(product_limit),
            None => half,
        }
    }

    /// [`max_delta_cycles`](Self::max_delta_cycles) in ns of this clock (saturating).
    pub fn max_delta_ns(&self) -> u64 {
        self.cycles_to_ns(self.max_delta_cycles())
    }

    /// `cycles * mult >> shift`, saturating at `u64::MAX`; 0 for a shift of 64 or more.
    pub fn cycles_to_ns(&self, cycles: u64) -> u64 {
        let wide = u128::from(cycles) * u128::from(self.mult);
        let ns = wide.checked_shr(self.shift).unwrap_or(0);
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// How often the kernel refreshes its clock-info page, in cycles: the clock is read
    /// "at least twice every wrap around", every `min((2^63 - 1) / mult, mask / 3)` cycles.
    /// (The page's `overflow_period`, which rdma-core reports as
    /// `max_clock_info_update_nsec`, is this period in jiffies, not ns.)
    pub fn kernel_update_period_cycles(&self) -> u64 {
        match (u64::MAX >> 1).checked_div(u64::from(self.mult)) {
            Some(p) => p.min(self.mask / 3),
            None => self.mask / 3,
        }
    }

    /// The clock info after the kernel reads the counter at `cycles` (its `timecounter_read`):
    /// `nsec` advances by `(delta * mult + frac) >> shift`, the low `shift` bits become the
    /// new `frac`, `last_cycles` becomes `cycles & mask`. Converting with the result agrees
    /// with converting with `self` for every timestamp not older than `cycles`, as long as
    /// neither conversion wraps (a property the tests check).
    pub fn advanced_to(&self, cycles: u64) -> ClockInfo {
        let delta = cycles.wrapping_sub(self.last_cycles) & self.mask;
        let ns = delta
            .wrapping_mul(u64::from(self.mult))
            .wrapping_add(self.frac);
        let frac_mask = 1u64.checked_shl(self.shift).map_or(u64::MAX, |bit| bit - 1);
        ClockInfo {
            nsec: self.nsec.wrapping_add(ns.wrapping_shr(self.shift)),
            last_cycles: cycles & self.mask,
            frac: ns & frac_mask,
            ..*self
        }
    }
}

/// A real-time CQE timestamp: `seconds << 32 | nanoseconds` of the device's real-time clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RealTime {
    /// Seconds (the high 32 bits).
    pub secs: u32,
    /// Nanoseconds within the second (the low 32 bits; below 10^9 from a device).
    pub nanos: u32,
}

impl RealTime {
    /// Splits the raw 64-bit CQE value.
    #[inline]
    pub const fn from_raw(raw: u64) -> RealTime {
        RealTime {
            secs: (raw >> 32) as u32,
            nanos: raw as u32,
        }
    }

    /// The raw 64-bit value the device writes.
    #[inline]
    pub const fn to_raw(self) -> u64 {
        ((self.secs as u64) << 32) | self.nanos as u64
    }

    /// `secs * 10^9 + nanos`, as the kernel (`REAL_TIME_TO_NS`) and DPDK
    /// (`mlx5_txpp_convert_rx_ts`) compute it; never overflows.
    #[inline]
    pub const fn as_ns(self) -> u64 {
        self.secs as u64 * NSEC_PER_SEC + self.nanos as u64
    }

    /// Whether `nanos` is below 10^9. A raw value that is not (about three quarters of raw
    /// nanosecond counts) was not written in the real-time format.
    #[inline]
    pub const fn is_normalized(self) -> bool {
        (self.nanos as u64) < NSEC_PER_SEC
    }

    /// Encodes `ns` since the epoch; `None` past 2^32 seconds (year 2106).
    pub const fn from_ns(ns: u64) -> Option<RealTime> {
        let secs = ns / NSEC_PER_SEC;
        if secs > u32::MAX as u64 {
            return None;
        }
        Some(RealTime {
            secs: secs as u32,
            nanos: (ns % NSEC_PER_SEC) as u32,
        })
    }
}

/// Raw real-time CQE timestamp → ns (`(raw >> 32) * 10^9 + (raw & 0xffffffff)`).
#[inline]
pub const fn real_time_to_ns(raw: u64) -> u64 {
    RealTime::from_raw(raw).as_ns()
}

/// How a queue's CQE timestamps are to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampFormat {
    /// Device cycles, converted with this clock info.
    FreeRunning(ClockInfo),
    /// `seconds << 32 | nanoseconds`.
    RealTime,
}

impl TimestampFormat {
    /// The raw CQE timestamp in ns.
    #[inline]
    pub fn to_ns(&self, raw: u64) -> u64 {
        match self {
            TimestampFormat::FreeRunning(info) => info.ts_to_ns(raw),
            TimestampFormat::RealTime => real_time_to_ns(raw),
        }
    }
}

/// What a CQ's CQEs carry in their timestamp field, chosen when the CQ is created (on
/// hardware: `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP` for free-running cycles,
/// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK` alone for real time; both CQs of a QP
/// must agree, or the kernel refuses the QP).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TimestampKind {
    /// The device's free-running cycle counter (convert with the clock info).
    FreeRunning,
    /// The device's real-time clock, `seconds << 32 | nanoseconds`.
    RealTime,
}

/// Byte offsets in the kernel's clock-info page (`struct mlx5_ib_clock_info`, host byte
/// order, one page mapped read-only from the verbs command fd), checked against
/// `fixtures/mlx5/clock.txt`.
pub mod page {
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
}

/// Something that holds a clock-info page: the sign word and the six fields, read without a
/// lock while a writer may be changing them. [`ClockInfoReader`] makes a consistent snapshot.
pub trait ClockInfoSource {
    /// Loads the sign word with `order` (the reader asks for `Acquire` first, then `Relaxed`
    /// after an acquire fence). A source over the kernel's read-only mapping may serve
    /// `Acquire` as a relaxed load followed by `fence(Acquire)`: Rust promises only relaxed,
    /// register-sized atomic loads to work on read-only memory.
    fn load_sign(&self, order: Ordering) -> u32;
    /// Loads the six fields with relaxed (or volatile) loads; the result may be torn, the
    /// reader's sign check rejects it then.
    fn load_fields(&self) -> ClockInfo;
}

impl<T: ClockInfoSource + ?Sized> ClockInfoSource for &T {
    fn load_sign(&self, order: Ordering) -> u32 {
        (**self).load_sign(order)
    }
    fn load_fields(&self) -> ClockInfo {
        (**self).load_fields()
    }
}

impl<T: ClockInfoSource + ?Sized> ClockInfoSource for std::sync::Arc<T> {
    fn load_sign(&self, order: Ordering) -> u32 {
        self.deref().load_sign(order)
    }
    fn load_fields(&self) -> ClockInfo {
        self.deref().load_fields()
    }
}

/// Reads a consistent [`ClockInfo`] from a page another thread (the kernel, the sim) updates.
///
/// One read: load `sign` (acquire); if the update bit is set, try again; load the fields; an
/// acquire fence; load `sign` again; if it changed, try again. After `tries` failed reads it
/// returns [`ClockInfoError::Busy`]. rdma-core's `mlx5dv_get_clock_info` does the same but
/// counts only reads that saw the update bit (10) and retries a changed sign without limit;
/// the kernel updates every few minutes, so a bound on both changes nothing in practice and
/// keeps a dead writer from hanging the reader.
#[derive(Clone, Debug)]
pub struct ClockInfoReader<S> {
    source: S,
    tries: u32,
}

impl<S: ClockInfoSource> ClockInfoReader<S> {
    /// A reader that tries [`CLOCK_INFO_READ_TRIES`] times.
    pub fn new(source: S) -> Self {
        Self::with_tries(source, CLOCK_INFO_READ_TRIES)
    }

    /// A reader that tries `tries` times (at least once).
    pub fn with_tries(source: S, tries: u32) -> Self {
        ClockInfoReader {
            source,
            tries: tries.max(1),
        }
    }

    /// The page this reader reads.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// A consistent snapshot with the sign it was read under (even).
    pub fn read_with_sign(&self) -> Result<(ClockInfo, u32), ClockInfoError> {
        for _ in 0..self.tries {
            let before = self.source.load_sign(Ordering::Acquire);
            if before & CLOCK_INFO_KERNEL_UPDATING != 0 {
                std::hint::spin_loop();
                continue;
            }
            let info = self.source.load_fields();
            // Orders the field loads before the second sign load: if any field load saw a
            // store of a later update, the sign load below sees that update's sign or a later
            // one (the writer's release fence pairs with this).
            fence(Ordering::Acquire);
            let after = self.source.load_sign(Ordering::Relaxed);
            if before == after {
                return Ok((info, before));
            }
            std::hint::spin_loop();
        }
        Err(ClockInfoError::Busy { tries: self.tries })
    }

    /// A consistent snapshot.
    pub fn read(&self) -> Result<ClockInfo, ClockInfoError> {
        self.read_with_sign().map(|(info, _)| info)
    }

    /// Whether the page changed since a snapshot read under `sign` (one relaxed load; a
    /// cheap test before paying for a full read).
    pub fn changed_since(&self, sign: u32) -> bool {
        self.source.load_sign(Ordering::Relaxed) != sign
    }
}

/// A clock-info page in memory with the kernel's layout (`struct mlx5_ib_clock_info`, 56
/// bytes, native byte order), made of atomics so that one writer and any number of readers
/// may share it; the sim's device clock publishes through it. [`update`](Self::update) is the
/// kernel's update rule.
#[repr(C)]
#[derive(Debug)]
pub struct SharedClockInfo {
    sign: AtomicU32,
    resv: AtomicU32,
    nsec: AtomicU64,
    cycles: AtomicU64,
    frac: AtomicU64,
    mult: AtomicU32,
    shift: AtomicU32,
    mask: AtomicU64,
    overflow_period: AtomicU64,
}

static_assertions::const_assert_eq!(std::mem::size_of::<SharedClockInfo>(), page::LEN);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, sign), page::SIGN);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, resv), page::RESV);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, nsec), page::NSEC);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, cycles), page::CYCLES);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, frac), page::FRAC);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, mult), page::MULT);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, shift), page::SHIFT);
static_assertions::const_assert_eq!(std::mem::offset_of!(SharedClockInfo, mask), page::MASK);
static_assertions::const_assert_eq!(
    std::mem::offset_of!(SharedClockInfo, overflow_period),
    page::OVERFLOW_PERIOD
);

impl SharedClockInfo {
    /// A page holding `info` and `overflow_period`, sign 0 (what the kernel's
    /// `mlx5_init_clock_info` writes into its zeroed page).
    pub fn new(info: ClockInfo, overflow_period: u64) -> Self {
        SharedClockInfo {
            sign: AtomicU32::new(0),
            resv: AtomicU32::new(0),
            nsec: AtomicU64::new(info.nsec),
            cycles: AtomicU64::new(info.last_cycles),
            frac: AtomicU64::new(info.frac),
            mult: AtomicU32::new(info.mult),
            shift: AtomicU32::new(info.shift),
            mask: AtomicU64::new(info.mask),
            overflow_period: AtomicU64::new(overflow_period),
        }
    }

    /// Publishes `info`'s `last_cycles`, `mult`, `nsec` and `frac` with the kernel's rule
    /// (`mlx5_update_clock_info_page`): set the update bit in `sign`, store the four fields,
    /// then store the old sign + 2. `shift` and `mask` are fixed when the page is made, as in
    /// the kernel, and are not written. Concurrent calls are serialised on the update bit.
    pub fn update(&self, info: &ClockInfo) {
        let mut sign = self.sign.load(Ordering::Relaxed);
        loop {
            if sign & CLOCK_INFO_KERNEL_UPDATING != 0 {
                std::hint::spin_loop();
                sign = self.sign.load(Ordering::Relaxed);
                continue;
            }
            match self.sign.compare_exchange_weak(
                sign,
                sign | CLOCK_INFO_KERNEL_UPDATING,
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(now) => sign = now,
            }
        }
        // Orders the odd sign before the field stores: a reader whose field load sees one of
        // them sees the odd (or a later) sign after its acquire fence.
        fence(Ordering::Release);
        self.cycles.store(info.last_cycles, Ordering::Relaxed);
        self.mult.store(info.mult, Ordering::Relaxed);
        self.nsec.store(info.nsec, Ordering::Relaxed);
        self.frac.store(info.frac, Ordering::Relaxed);
        self.sign.store(
            sign.wrapping_add(2 * CLOCK_INFO_KERNEL_UPDATING),
            Ordering::Release,
        );
    }

    /// The page's `overflow_period` (the kernel's refresh period in jiffies).
    pub fn overflow_period(&self) -> u64 {
        self.overflow_period.load(Ordering::Relaxed)
    }
}

impl ClockInfoSource for SharedClockInfo {
    fn load_sign(&self, order: Ordering) -> u32 {
        self.sign.load(order)
    }
    fn load_fields(&self) -> ClockInfo {
        ClockInfo {
            nsec: self.nsec.load(Ordering::Relaxed),
            last_cycles: self.cycles.load(Ordering::Relaxed),
            frac: self.frac.load(Ordering::Relaxed),
            mult: self.mult.load(Ordering::Relaxed),
            shift: self.shift.load(Ordering::Relaxed),
            mask: self.mask.load(Ordering::Relaxed),
        }
    }
}

/// A view of a clock-info page's bytes (native byte order), e.g. a copy read from the device
/// or built by a test. As a [`ClockInfoSource`] it never changes, so every read succeeds
/// unless the copy caught the update bit.
#[derive(Clone, Copy, Debug)]
pub struct ClockInfoBytes<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ClockInfoBytes<T> {
    /// Wraps `buffer` after checking it holds the page's 56 bytes.
    pub fn new_checked(buffer: T) -> Result<Self, ClockInfoError> {
        let len = buffer.as_ref().len();
        if len < page::LEN {
            return Err(ClockInfoError::Truncated(len));
        }
        Ok(ClockInfoBytes { buffer })
    }

    fn u32_at(&self, off: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_ne_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
    }

    fn u64_at(&self, off: usize) -> u64 {
        let b = self.buffer.as_ref();
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[off..off + 8]);
        u64::from_ne_bytes(w)
    }

    /// `sign`.
    pub fn sign(&self) -> u32 {
        self.u32_at(page::SIGN)
    }

    /// `overflow_period` (jiffies).
    pub fn overflow_period(&self) -> u64 {
        self.u64_at(page::OVERFLOW_PERIOD)
    }

    /// The six fields.
    pub fn info(&self) -> ClockInfo {
        ClockInfo {
            nsec: self.u64_at(page::NSEC),
            last_cycles: self.u64_at(page::CYCLES),
            frac: self.u64_at(page::FRAC),
            mult: self.u32_at(page::MULT),
            shift: self.u32_at(page::SHIFT),
            mask: self.u64_at(page::MASK),
        }
    }
}

impl<T: AsRef<[u8]>> ClockInfoSource for ClockInfoBytes<T> {
    fn load_sign(&self, _order: Ordering) -> u32 {
        self.sign()
    }
    fn load_fields(&self) -> ClockInfo {
        self.info()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    const NS0: u64 = 1_764_720_000_123_456_789;

    fn clock_156() -> ClockInfo {
        ClockInfo {
            frac: 0x5a5a5,
            ..ClockInfo::for_device_khz(156_250, NS0, 0x0000_0123_4567_8900).unwrap()
        }
    }

    #[test]
    fn khz2mult_matches_the_kernel_for_known_clocks() {
        assert_eq!(khz2mult(156_250, 23), Some(53_687_091));
        assert_eq!(khz2mult(1_000_000, 23), Some(8_388_608));
        assert_eq!(khz2mult(0, 23), None);
        assert_eq!(khz2mult(1, 64), None);
        assert_eq!(khz2mult(1, 40), None); // 10^6 << 40 does not fit
    }

    #[test]
    fn check_refuses_what_no_page_holds() {
        assert_eq!(clock_156().check(), Ok(()));
        let bad_shift = ClockInfo {
            shift: 64,
            ..clock_156()
        };
        assert_eq!(bad_shift.check(), Err(ClockInfoError::BadShift(64)));
        let zero_mult = ClockInfo {
            mult: 0,
            ..clock_156()
        };
        assert_eq!(zero_mult.check(), Err(ClockInfoError::ZeroMult));
        for mask in [0, 0x1fe, 1 << 40] {
            let c = ClockInfo {
                mask,
                ..clock_156()
            };
            assert_eq!(c.check(), Err(ClockInfoError::BadMask(mask)));
        }
        assert_eq!(
            ClockInfo {
                mask: u64::MAX,
                ..clock_156()
            }
            .check(),
            Ok(())
        );
        // Display names the fix, never panics.
        assert!(ClockInfoError::Busy { tries: 3 }
            .to_string()
            .contains("retry"));
    }

    #[test]
    fn whole_seconds_convert_exactly() {
        let c = clock_156();
        let one_s = 156_250_000;
        assert_eq!(c.ts_to_ns(c.last_cycles), NS0);
        // mult is rounded down (53687091.2 -> 53687091): 3.7 ns short per second.
        assert_eq!(c.ts_to_ns(c.last_cycles + one_s), NS0 + NSEC_PER_SEC - 4);
        let g = ClockInfo::for_device_khz(1_000_000, NS0, 7).unwrap();
        assert_eq!(g.ts_to_ns(7 + 123_456_789), NS0 + 123_456_789);
        assert_eq!(g.ts_to_ns(7 - 5), NS0 - 5);
    }

    #[test]
    fn wrap_around_of_the_41_bit_counter() {
        let g = ClockInfo::for_device_khz(1_000_000, NS0, MLX5_CYCLES_MASK - 99).unwrap();
        // 100 cycles to the wrap (to 0), then 50 past it: 150 ns later.
        assert_eq!(g.ts_to_ns(50), NS0 + 150);
        assert!(!g.is_older(50));
        // Bits above the mask are ignored (a 64-bit CQE value of a 41-bit clock).
        assert_eq!(g.ts_to_ns(50 | 0xffff_fe00_0000_0000), NS0 + 150);
        // Older across the wrap the other way.
        let h = ClockInfo::for_device_khz(1_000_000, NS0, 10).unwrap();
        assert!(h.is_older(MLX5_CYCLES_MASK - 9));
        assert_eq!(h.ts_to_ns(MLX5_CYCLES_MASK - 9), NS0 - 20);
    }

    #[test]
    fn staleness_bound_is_where_conversion_stops_being_exact() {
        // 1 GHz: the bound is mask / 2; one cycle further reads as the past.
        let g = ClockInfo::for_device_khz(1_000_000, NS0, 0).unwrap();
        let max = g.max_delta_cycles();
        assert_eq!(max, MLX5_CYCLES_MASK / 2);
        assert_eq!(g.ts_to_ns(max), NS0 + max);
        assert_eq!(g.ts_to_ns_checked(max), Some(NS0 + max));
        assert!(g.is_older(max + 1));
        assert!(g.ts_to_ns(max + 1) < NS0);
        // 156.25 MHz: the product overflows before mask / 2; past the bound the checked
        // conversion refuses and the plain one wraps (goes backwards).
        let c = ClockInfo::for_device_khz(156_250, NS0, 0).unwrap();
        let max = c.max_delta_cycles();
        assert_eq!(max, u64::MAX / 53_687_091);
        assert!(max < MLX5_CYCLES_MASK / 2);
        assert!(c.ts_to_ns_checked(max).is_some());
        assert_eq!(c.ts_to_ns_checked(max + 1), None);
        assert!(c.ts_to_ns(max + 1) < c.ts_to_ns(max));
        // ~2199 s and ~1100 s, as the docs say.
        assert_eq!(c.max_delta_ns() / NSEC_PER_SEC, 2199);
        assert_eq!(g.max_delta_ns() / NSEC_PER_SEC, 1099);
        // The kernel refreshes well inside the bound.
        assert!(c.kernel_update_period_cycles() < c.max_delta_cycles());
        assert!(g.kernel_update_period_cycles() < g.max_delta_cycles());
    }

    #[test]
    fn older_timestamp_with_frac_above_the_product_wraps_like_c() {
        let c = ClockInfo {
            nsec: 1000,
            last_cycles: 100,
            frac: 0x7f_ffff,
            mult: 1,
            shift: 23,
            mask: MLX5_CYCLES_MASK,
        };
        assert_eq!(c.ts_to_ns(99), 0xffff_fe00_0000_03e9);
        assert_eq!(c.ts_to_ns_checked(99), None);
    }

    #[test]
    fn an_update_does_not_move_the_time_of_later_timestamps() {
        let c = clock_156();
        for step in [1u64, 1_000, 156_250_000, 60 * 156_250_000] {
            let n = c.advanced_to(c.last_cycles + step);
            assert!(n.frac < 1 << n.shift);
            assert_eq!(n.ts_to_ns(n.last_cycles), c.ts_to_ns(n.last_cycles));
            for later in [0u64, 1, 7, 156_250_000] {
                let ts = n.last_cycles + later;
                assert_eq!(n.ts_to_ns(ts), c.ts_to_ns(ts), "step {step} later {later}");
            }
            // Timestamps before the update take the older branch with the new info: they
            // agree with the old info to the nanosecond (floor versus ceiling).
            for earlier in [1u64, 2, 1000] {
                let ts = n.last_cycles - earlier;
                assert!(n.is_older(ts));
                assert!(n.ts_to_ns(ts).abs_diff(c.ts_to_ns(ts)) <= 1);
            }
        }
    }

    #[test]
    fn real_time_decodes_seconds_and_nanoseconds() {
        let raw = 0x6930_1a2b_3b9a_c9ff;
        let t = RealTime::from_raw(raw);
        assert_eq!(t.secs, 0x6930_1a2b);
        assert_eq!(t.nanos, 999_999_999);
        assert!(t.is_normalized());
        assert_eq!(t.as_ns(), 0x6930_1a2b * NSEC_PER_SEC + 999_999_999);
        assert_eq!(real_time_to_ns(raw), t.as_ns());
        assert_eq!(t.to_raw(), raw);
        assert_eq!(RealTime::from_ns(t.as_ns()), Some(t));
        assert_eq!(RealTime::from_ns(u64::MAX), None);
        assert_eq!(
            real_time_to_ns(u64::MAX),
            u64::from(u32::MAX) * (NSEC_PER_SEC + 1)
        );
        // A raw nanosecond count is usually not normalized in this format.
        assert!(!RealTime::from_raw(NS0).is_normalized());
        assert_eq!(TimestampFormat::RealTime.to_ns(raw), t.as_ns());
        let c = clock_156();
        assert_eq!(
            TimestampFormat::FreeRunning(c).to_ns(c.last_cycles),
            c.ts_to_ns(c.last_cycles)
        );
    }

    /// A page whose sign follows a script (one entry per load), to drive the reader.
    struct Scripted {
        signs: Vec<u32>,
        at: Cell<usize>,
        info: ClockInfo,
    }

    impl ClockInfoSource for Scripted {
        fn load_sign(&self, _order: Ordering) -> u32 {
            let i = self.at.get();
            self.at.set(i + 1);
            self.signs.get(i).copied().unwrap_or(u32::MAX)
        }
        fn load_fields(&self) -> ClockInfo {
            self.info
        }
    }

    #[test]
    fn reader_retries_while_updating_or_changed_and_gives_up() {
        let info = clock_156();
        let page = |signs: Vec<u32>| Scripted {
            signs,
            at: Cell::new(0),
            info,
        };
        // Stable: two loads.
        let r = ClockInfoReader::new(page(vec![4, 4]));
        assert_eq!(r.read_with_sign(), Ok((info, 4)));
        // Update bit set twice, then a change under the read, then stable.
        let r = ClockInfoReader::new(page(vec![5, 5, 6, 8, 8, 8]));
        assert_eq!(r.read_with_sign(), Ok((info, 8)));
        assert_eq!(r.source().at.get(), 6);
        // Always updating: Busy after exactly `tries` loads.
        let r = ClockInfoReader::with_tries(page(vec![1; 3]), 3);
        assert_eq!(r.read(), Err(ClockInfoError::Busy { tries: 3 }));
        // Zero tries means one.
        let r = ClockInfoReader::with_tries(page(vec![2, 2]), 0);
        assert_eq!(r.read(), Ok(info));
    }

    #[test]
    fn shared_page_follows_the_kernel_update_rule() {
        let c = clock_156();
        let p = SharedClockInfo::new(c, 12_345);
        let r = ClockInfoReader::new(&p);
        assert_eq!(r.read_with_sign(), Ok((c, 0)));
        let n = c.advanced_to(c.last_cycles + 1_000_000);
        p.update(&n);
        assert_eq!(r.read_with_sign(), Ok((n, 2)));
        assert!(r.changed_since(0));
        assert!(!r.changed_since(2));
        // shift and mask are fixed at creation.
        p.update(&ClockInfo {
            shift: 1,
            mask: 1,
            ..n
        });
        assert_eq!(r.read(), Ok(n));
        assert_eq!(p.overflow_period(), 12_345);
    }

    #[test]
    fn byte_view_reads_native_order_and_refuses_short_buffers() {
        let c = clock_156();
        let mut b = [0u8; page::LEN];
        b[page::SIGN..page::SIGN + 4].copy_from_slice(&6u32.to_ne_bytes());
        b[page::NSEC..page::NSEC + 8].copy_from_slice(&c.nsec.to_ne_bytes());
        b[page::CYCLES..page::CYCLES + 8].copy_from_slice(&c.last_cycles.to_ne_bytes());
        b[page::FRAC..page::FRAC + 8].copy_from_slice(&c.frac.to_ne_bytes());
        b[page::MULT..page::MULT + 4].copy_from_slice(&c.mult.to_ne_bytes());
        b[page::SHIFT..page::SHIFT + 4].copy_from_slice(&c.shift.to_ne_bytes());
        b[page::MASK..page::MASK + 8].copy_from_slice(&c.mask.to_ne_bytes());
        b[page::OVERFLOW_PERIOD..].copy_from_slice(&99u64.to_ne_bytes());
        let v = ClockInfoBytes::new_checked(&b[..]).unwrap();
        assert_eq!(v.overflow_period(), 99);
        assert_eq!(ClockInfoReader::new(v).read_with_sign(), Ok((c, 6)));
        assert_eq!(
            ClockInfoBytes::new_checked(&b[..55]).err(),
            Some(ClockInfoError::Truncated(55))
        );
    }

    #[test]
    fn concurrent_reader_never_sees_a_torn_page() {
        // The writer keeps nsec == 3 * last_cycles and frac == last_cycles; a torn read
        // would break one of the two equalities.
        let base = ClockInfo {
            nsec: 0,
            last_cycles: 0,
            frac: 0,
            mult: 1,
            shift: 0,
            mask: u64::MAX,
        };
        let p = std::sync::Arc::new(SharedClockInfo::new(base, 0));
        let writer = {
            let p = p.clone();
            std::thread::spawn(move || {
                for i in 1..=20_000u64 {
                    p.update(&ClockInfo {
                        nsec: 3 * i,
                        last_cycles: i,
                        frac: i,
                        ..base
                    });
                }
            })
        };
        let r = ClockInfoReader::with_tries(p.clone(), 1_000_000);
        let mut last = 0;
        while last < 20_000 {
            let info = r.read().unwrap();
            assert_eq!(info.nsec, 3 * info.last_cycles);
            assert_eq!(info.frac, info.last_cycles);
            assert!(info.last_cycles >= last);
            last = info.last_cycles;
        }
        writer.join().unwrap();
    }
}
