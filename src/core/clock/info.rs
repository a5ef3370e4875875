//! [`ClockInfo`]: the clock-info values and the free-running conversion, cycles to ns, as
//! rdma-core's `mlx5dv_ts_to_ns` does it, with the bounds within which the result is the
//! device time (see the contract in the module doc of [`crate::clock`]). [`khz2mult`] and
//! [`ClockInfo::for_device_khz`] build one as the kernel does; [`ClockInfo::check`] refuses
//! what no page holds.

use std::fmt;

use super::{page, MLX5_CYCLES_MASK, MLX5_CYCLES_SHIFT};

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

#[cfg(test)]
mod tests {
    use super::super::tests::{clock_156, NS0};
    use super::super::NSEC_PER_SEC;
    use super::*;

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
}
