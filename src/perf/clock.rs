//! The clock of the measured loops ([`Clock`]), shared by the in-process loops and
//! [`remote`](super::remote).
//!
//! Contract: the loops stamp raw ticks; the stamps become nanoseconds only after the loop
//! ([`Clock::to_ns`]).

/// The clock of the measured loops: the crate's tick source (`crate::tsc`: the time-stamp
/// counter on x86-64, as perftest's `get_cycles`, `Instant` elsewhere). Stamps are raw ticks;
/// [`Clock::to_ns`] turns them into nanoseconds since the start with the tick rate measured
/// against `Instant` over the whole run (perftest takes the rate from the CPU's MHz
/// instead). Reading `Instant` in the loop would cost an emulated HPET access per stamp in
/// the TCG guest (microseconds).
pub(super) struct Clock {
    rate: crate::tsc::Rate,
    /// Host `CLOCK_REALTIME` at the start, ns since the epoch.
    pub(super) real0: u64,
}

impl Clock {
    pub(super) fn start() -> Clock {
        let real0 = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            rate: crate::tsc::Rate::start(),
            real0,
        }
    }

    #[inline]
    pub(super) fn ticks(&self) -> u64 {
        crate::tsc::now()
    }

    /// Rewrite `stamps` (ticks) as nanoseconds since [`Clock::start`]. Call once, right after
    /// the loop. Entries never stamped (0) stay 0.
    pub(super) fn to_ns(&self, stamps: &mut [u64]) {
        let per_tick = self.rate.ns_per_tick();
        let tick0 = self.rate.tick0();
        for s in stamps.iter_mut() {
            if *s != 0 {
                *s = (s.wrapping_sub(tick0) as f64 * per_tick) as u64;
            }
        }
    }

    /// Rewrite `spans` (tick differences) as nanoseconds.
    pub(super) fn spans_to_ns(&self, spans: &mut [u64]) {
        let per_tick = self.rate.ns_per_tick();
        for s in spans.iter_mut() {
            *s = (*s as f64 * per_tick) as u64;
        }
    }
}
