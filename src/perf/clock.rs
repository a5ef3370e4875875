//! The clock of the measured loops ([`Clock`]), shared by the in-process loops and
//! [`remote`](super::remote).
//!
//! Contract: the loops stamp raw ticks; the stamps become nanoseconds only after the loop
//! ([`Clock::to_ns`]).

use std::time::Instant;

/// The clock of the measured loops: the crate's tick source (`crate::tsc`: the time-stamp
/// counter on x86-64, as perftest's `get_cycles`, [`Instant`] elsewhere). Stamps are raw
/// ticks; [`Clock::to_ns`] turns them into nanoseconds since the start with the tick rate
/// measured against [`Instant`] over the whole run (perftest takes the rate from the CPU's
/// MHz instead). Reading `Instant` in the loop would cost an emulated HPET access per stamp
/// in the TCG guest (microseconds).
pub(super) struct Clock {
    t0: Instant,
    tick0: u64,
    /// Host `CLOCK_REALTIME` at `t0`, ns since the epoch.
    pub(super) real0: u64,
}

impl Clock {
    pub(super) fn start() -> Clock {
        let real0 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let t0 = Instant::now();
        let mut c = Clock {
            t0,
            tick0: 0,
            real0,
        };
        c.tick0 = c.ticks();
        c
    }

    #[inline]
    pub(super) fn ticks(&self) -> u64 {
        crate::tsc::now()
    }

    /// Rewrite `stamps` (ticks) as nanoseconds since [`Clock::start`]. Call once, right after
    /// the loop. Entries never stamped (0) stay 0.
    pub(super) fn to_ns(&self, stamps: &mut [u64]) {
        let ticks = self.ticks().wrapping_sub(self.tick0);
        let ns = self.t0.elapsed().as_nanos() as f64;
        let per_tick = if ticks == 0 { 0.0 } else { ns / ticks as f64 };
        for s in stamps.iter_mut() {
            if *s != 0 {
                *s = (s.wrapping_sub(self.tick0) as f64 * per_tick) as u64;
            }
        }
    }
}
