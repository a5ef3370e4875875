//! The sim's device clock: a free-running cycle counter, its clock-info page, and a
//! real-time clock.
//!
//! Contract:
//!
//! - The counter runs at `khz` (default 156 250 kHz, the core clock of ConnectX-4/5) from the
//!   host's monotonic clock: `cycles = (start + elapsed_ns * khz / 10^6 + skew) & mask`, with a
//!   41-bit mask as the kernel gives mlx5 (`CLOCKSOURCE_MASK(41)`). `start` may be put close
//!   to the wrap ([`SimClockConfig::start_cycles`]) so the wrap-around is reached in a test;
//!   [`SimClock::advance`] jumps the counter forward (a `skew` of cycles), as if that much
//!   device time had passed without the host noticing.
//! - The clock info ([`ClockInfo`]: mult/shift/mask, the last cycles/ns pair) lives in a
//!   [`SharedClockInfo`] page and is updated with the kernel's seqlock rule. Its `nsec` is
//!   wall-clock time (as the kernel's PTP clock): at creation, the host's `CLOCK_REALTIME`.
//!   [`SimClock::refresh`] is the kernel's overflow worker: it moves the pair to the current
//!   counter (`ClockInfo::advanced_to`). The engine calls [`SimClock::maybe_refresh`] at
//!   each CQE it stamps, which refreshes once the counter is a kernel refresh period
//!   (`ClockInfo::kernel_update_period_cycles`) past the page's pair, so a page read at any
//!   time is never farther behind than the kernel's own would be. [`SimClock::advance`]
//!   does not refresh, which is how a test makes the page stale.
//! - Real-time mode: [`SimClock::real_time_raw`] is the host's `CLOCK_REALTIME` as the
//!   device's real-time CQE format, `seconds << 32 | nanoseconds` ([`RealTime`]).
//! - Host time comes from the host's clocks ([`SimTime::Host`], the default) or from a clock
//!   the owner moves ([`SimTime::Manual`]): there the wall clock starts at the given
//!   nanoseconds and both it and the monotonic time driving the counter move only by
//!   [`SimClock::pass`], together. A test then knows to the nanosecond what every stamp
//!   must convert to, whatever the host's load or emulation does to its clocks.
//!
//! Agreement with the host: between refreshes a timestamp converted with the page is the
//! creation-time wall clock plus the monotonic time elapsed, less the rounding of `mult`
//! (`khz2mult` rounds; at 156.25 MHz 3.7 ns short per second) and one cycle (6.4 ns) of
//! counter truncation. The host's wall clock may itself be slewed by NTP against the
//! monotonic clock (at most 500 ppm by adjtimex), and the pair's two readings at creation
//! are two calls apart (a loaded or emulated host may stall between them for milliseconds),
//! so on host time only the order of stamps is exact; with [`SimTime::Manual`] the
//! conversion is exact to the rounding above.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::clock::{
    ClockInfo, ClockInfoReader, ClockInfoSource, RealTime, SharedClockInfo, MLX5_CYCLES_MASK,
};

/// How a sim clock starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimClockConfig {
    /// Counter frequency in kHz (1..=4 000 000).
    pub khz: u32,
    /// Counter value at creation (taken within the mask).
    pub start_cycles: u64,
    /// Where host time comes from.
    pub time: SimTime,
}

impl Default for SimClockConfig {
    fn default() -> Self {
        SimClockConfig {
            khz: 156_250,
            start_cycles: 0,
            time: SimTime::Host,
        }
    }
}

/// The host time a sim clock follows (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimTime {
    /// The host's monotonic clock drives the counter; the wall clock is `CLOCK_REALTIME`.
    Host,
    /// A clock the owner moves with [`SimClock::pass`]; its wall clock starts at
    /// `realtime_ns` (nanoseconds since the Unix epoch).
    Manual {
        /// The wall clock at creation.
        realtime_ns: u64,
    },
}

/// The device clock (see the module doc).
#[derive(Debug)]
pub struct SimClock {
    khz: u32,
    origin: Instant,
    /// `Some(wall clock at creation)` for [`SimTime::Manual`].
    manual: Option<u64>,
    /// Nanoseconds of manual host time passed (unused on host time).
    passed: AtomicU64,
    start_cycles: u64,
    skew: AtomicU64,
    /// `last_cycles` of the page's latest update (read without the seqlock by the refresher).
    page_cycles: AtomicU64,
    period: u64,
    page: Arc<SharedClockInfo>,
}

fn realtime_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// [`realtime_ns`] read straight from `clock_gettime(CLOCK_REALTIME)`, without the
/// `SystemTime` arithmetic (a CQE stamp in real-time format reads it for every CQE): the same
/// value for the times the real-time format holds (the epoch to 2106); `None` outside them
/// or when the call fails, where the caller takes [`realtime_ns`].
fn host_realtime_ns_fast() -> Option<u64> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a live, writable `timespec` for the duration of the call, the only
    // memory `clock_gettime` writes.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut ts) };
    let secs = u32::try_from(ts.tv_sec).ok().filter(|_| rc == 0)?;
    let nanos = u64::try_from(ts.tv_nsec)
        .ok()
        .filter(|&n| n < 1_000_000_000)?;
    Some(u64::from(secs) * 1_000_000_000 + nanos)
}

impl SimClock {
    /// A clock per `cfg`; refuses a frequency `khz2mult` cannot scale.
    pub fn new(cfg: SimClockConfig) -> crate::Result<SimClock> {
        let start = cfg.start_cycles & MLX5_CYCLES_MASK;
        let manual = match cfg.time {
            SimTime::Host => None,
            SimTime::Manual { realtime_ns } => Some(realtime_ns),
        };
        let wall0 = manual.unwrap_or_else(realtime_ns);
        let info = (1..=4_000_000)
            .contains(&cfg.khz)
            .then(|| ClockInfo::for_device_khz(cfg.khz, wall0, start))
            .flatten()
            .ok_or_else(|| crate::Error::InvalidArgument {
                context: "SimClock::new",
                detail: format!("clock frequency {} kHz (1..=4000000)", cfg.khz),
            })?;
        let period = info.kernel_update_period_cycles();
        Ok(SimClock {
            khz: cfg.khz,
            origin: Instant::now(),
            manual,
            passed: AtomicU64::new(0),
            start_cycles: start,
            skew: AtomicU64::new(0),
            page_cycles: AtomicU64::new(start),
            period,
            // overflow_period in jiffies at HZ=250, as the kernel stores it.
            page: Arc::new(SharedClockInfo::new(
                info,
                info.cycles_to_ns(period) / 4_000_000,
            )),
        })
    }

    /// Counter frequency in kHz.
    pub fn khz(&self) -> u32 {
        self.khz
    }

    /// Monotonic host nanoseconds since creation.
    fn elapsed_ns(&self) -> u128 {
        match self.manual {
            None => self.origin.elapsed().as_nanos(),
            Some(_) => u128::from(self.passed.load(Ordering::Relaxed)),
        }
    }

    /// Let `ns` nanoseconds of host time pass on a [`SimTime::Manual`] clock (the counter
    /// runs that long at its frequency and the wall clock moves as much); refused on host
    /// time, which passes by itself.
    pub fn pass(&self, ns: u64) -> crate::Result<()> {
        if self.manual.is_none() {
            return Err(crate::Error::InvalidArgument {
                context: "SimClock::pass",
                detail: "the clock follows host time (SimTime::Host); only a SimTime::Manual clock is moved by hand".into(),
            });
        }
        self.passed.fetch_add(ns, Ordering::Relaxed);
        Ok(())
    }

    /// The host's wall clock as this clock sees it, in nanoseconds since the Unix epoch.
    pub fn wall_ns(&self) -> u64 {
        match self.manual {
            None => realtime_ns(),
            Some(wall0) => wall0.wrapping_add(self.passed.load(Ordering::Relaxed)),
        }
    }

    /// The free-running counter now (within the 41-bit mask).
    pub fn cycles(&self) -> u64 {
        let ns = self.elapsed_ns();
        let khz = u64::from(self.khz);
        // `ns * khz / 10^6`, in 64 bits while the product fits (on host time, the first 32
        // hours at 156.25 MHz; the division is then a multiplication), else in 128 bits.
        let run = match u64::try_from(ns).ok().and_then(|n| n.checked_mul(khz)) {
            Some(product) => product / 1_000_000,
            None => (ns * u128::from(khz) / 1_000_000) as u64,
        };
        self.start_cycles
            .wrapping_add(run)
            .wrapping_add(self.skew.load(Ordering::Relaxed))
            & MLX5_CYCLES_MASK
    }

    /// The real-time clock now, in the real-time CQE format (`seconds << 32 | ns`).
    pub fn real_time_raw(&self) -> u64 {
        let ns = match self.manual {
            None => host_realtime_ns_fast().unwrap_or_else(realtime_ns),
            Some(_) => self.wall_ns(),
        };
        RealTime::from_ns(ns).map_or(0, RealTime::to_raw)
    }

    /// Jump the counter `cycles` forward without refreshing the clock info.
    pub fn advance(&self, cycles: u64) {
        self.skew.fetch_add(cycles, Ordering::Relaxed);
    }

    /// The clock-info page (what `mlx5dv_get_clock_info` reads), updated by this clock.
    pub fn page(&self) -> &Arc<SharedClockInfo> {
        &self.page
    }

    /// A consistent copy of the page's clock info.
    pub fn clock_info(&self) -> ClockInfo {
        // The sim's writer never stalls, so unbounded tries only ride out concurrent updates.
        ClockInfoReader::with_tries(&*self.page, u32::MAX)
            .read()
            .unwrap_or_else(|_| self.page.load_fields())
    }

    /// The kernel's overflow worker: move the page's cycles/ns pair to the counter now. A
    /// counter more than a refresh period ahead (after [`SimClock::advance`]) is caught up
    /// in steps of one period, as the kernel's worker would have run meanwhile; so the page
    /// never leaves its exact range, whatever a copy of it does.
    pub fn refresh(&self) {
        let now = self.cycles();
        let mut info = self.clock_info();
        while now.wrapping_sub(info.last_cycles) & MLX5_CYCLES_MASK > self.period {
            info = info.advanced_to(info.last_cycles.wrapping_add(self.period));
        }
        let info = info.advanced_to(now);
        self.page.update(&info);
        self.page_cycles.store(now, Ordering::Relaxed);
    }

    /// Refresh when the counter has run a kernel refresh period past the page's pair.
    pub fn maybe_refresh(&self, now: u64) {
        let last = self.page_cycles.load(Ordering::Relaxed);
        if now.wrapping_sub(last) & MLX5_CYCLES_MASK >= self.period {
            self.refresh();
        }
    }

    /// The kernel's refresh period of this clock, in cycles.
    pub fn refresh_period_cycles(&self) -> u64 {
        self.period
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_is_monotonic_and_within_the_mask() {
        let c = SimClock::new(SimClockConfig::default()).unwrap();
        let mut last = c.cycles();
        for _ in 0..1000 {
            let now = c.cycles();
            assert!(now >= last);
            assert!(now <= MLX5_CYCLES_MASK);
            last = now;
        }
        assert!(SimClock::new(SimClockConfig {
            khz: 0,
            ..SimClockConfig::default()
        })
        .is_err());
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = SimClock::new(SimClockConfig {
            time: SimTime::Manual {
                realtime_ns: 5_000_000_000,
            },
            ..SimClockConfig::default()
        })
        .unwrap();
        assert_eq!((c.cycles(), c.wall_ns()), (0, 5_000_000_000));
        assert_eq!(c.clock_info().nsec, 5_000_000_000);
        // One millisecond at 156.25 MHz is 156 250 cycles.
        c.pass(1_000_000).unwrap();
        assert_eq!((c.cycles(), c.wall_ns()), (156_250, 5_001_000_000));
        assert_eq!(c.real_time_raw(), 5 << 32 | 1_000_000);
        c.advance(10);
        assert_eq!((c.cycles(), c.wall_ns()), (156_260, 5_001_000_000));
        let host = SimClock::new(SimClockConfig::default()).unwrap();
        assert!(host.pass(1).is_err());
    }

    #[test]
    fn the_counter_is_the_same_on_both_sides_of_the_64_bit_product() {
        for khz in [156_250, 1_000_000, 4_000_000] {
            let c = SimClock::new(SimClockConfig {
                khz,
                time: SimTime::Manual { realtime_ns: 0 },
                ..SimClockConfig::default()
            })
            .unwrap();
            // Host time where `ns * khz` leaves 64 bits, and around it.
            let edge = u64::MAX / u64::from(khz);
            let mut passed = 0u64;
            for ns in [999_999, edge - 1, edge, edge + 1, u64::MAX - 1] {
                c.pass(ns - passed).unwrap();
                passed = ns;
                let run = (u128::from(ns) * u128::from(khz) / 1_000_000) as u64;
                assert_eq!(c.cycles(), run & MLX5_CYCLES_MASK, "{khz} kHz at {ns} ns");
            }
        }
    }

    #[test]
    fn the_direct_real_time_read_is_the_system_time() {
        // Between two readings of `SystemTime` (whole nanoseconds since the epoch).
        let before = realtime_ns();
        let fast = host_realtime_ns_fast().expect("the host clock is past 1970 and before 2106");
        let after = realtime_ns();
        assert!(before <= fast && fast <= after, "{before} {fast} {after}");
        let raw = SimClock::new(SimClockConfig::default())
            .unwrap()
            .real_time_raw();
        let t = RealTime::from_raw(raw);
        assert!(t.is_normalized() && t.as_ns() >= after, "{raw:#x}");
    }

    #[test]
    fn refresh_keeps_conversions_and_bumps_the_sign() {
        let c = SimClock::new(SimClockConfig::default()).unwrap();
        let before = c.clock_info();
        let ts = c.cycles();
        c.refresh();
        let after = c.clock_info();
        assert!(after.last_cycles >= before.last_cycles);
        assert!(before.ts_to_ns(ts).abs_diff(after.ts_to_ns(ts)) <= 1);
        let (_, sign) = ClockInfoReader::new(&**c.page()).read_with_sign().unwrap();
        assert_eq!(sign, 2);
    }
}
