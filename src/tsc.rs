//! The tick source of the measuring loops (`perf`'s latency stamps, `noise`'s spinning
//! threads): the time-stamp counter on x86-64 (one `RDTSC`, as perftest's `get_cycles`),
//! nanoseconds of a process-wide [`Instant`] elsewhere.
//!
//! Contract: [`now`] is a raw tick count, monotonic on one CPU and comparable across CPUs
//! where the TSC is invariant and synchronised (every x86-64 CPU of the last decade, and what
//! Linux checks before it uses the TSC as its clock); it makes no system call. Ticks become
//! nanoseconds only through a rate measured against [`Instant`] ([`Rate`]), never from a
//! nominal frequency.

use std::time::Instant;

/// The tick count now.
#[inline]
pub(crate) fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no memory effects and exists on every x86-64 CPU; it is only
        // `unsafe` on older toolchains.
        #[allow(unused_unsafe)]
        unsafe {
            std::arch::x86_64::_rdtsc()
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// The tick rate, measured between [`Rate::start`] and [`Rate::ns_per_tick`] against
/// [`Instant`]: the longer apart, the more exact.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Rate {
    t0: Instant,
    tick0: u64,
}

impl Rate {
    /// Starts measuring.
    pub(crate) fn start() -> Rate {
        let t0 = Instant::now();
        Rate { t0, tick0: now() }
    }

    /// The tick at [`Rate::start`].
    #[cfg_attr(not(feature = "perf"), allow(dead_code))]
    pub(crate) fn tick0(&self) -> u64 {
        self.tick0
    }

    /// Nanoseconds per tick since [`Rate::start`] (0 if no tick has passed).
    pub(crate) fn ns_per_tick(&self) -> f64 {
        let ticks = now().wrapping_sub(self.tick0);
        let ns = self.t0.elapsed().as_nanos() as f64;
        if ticks == 0 {
            0.0
        } else {
            ns / ticks as f64
        }
    }
}
