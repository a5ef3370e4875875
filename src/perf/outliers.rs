//! Outliers of a latency row, and whether the polling CPU was taken away during each.
//!
//! While a latency test polls, its waits keep the longest stretch of each sample without a
//! spin of the polling loop (one tick-counter read a spin, kept in a buffer allocated before
//! the run; no system call). After the run, [`Outliers::find`] takes the samples above
//! [`Params::outlier_x`](super::Params::outlier_x) times the median and calls one
//! **interrupted** when the polling thread was away for at least half of its time above the
//! median in one stretch: the CPU was doing something else (an interrupt, a softirq, another
//! task, a page fault) for most of the delay, a host problem. An outlier that was not
//! interrupted spent its extra time polling: the answer was late (the network, the peer, the
//! device). What took the CPU is for the kernel's counters read around the run to say
//! ([`crate::noise::Watch`], with the `doctor` feature).
//!
//! Contract: pure arithmetic on the samples after the run. The samples are the table's
//! (divided by the round-trip factor: half a round trip for `write_lat`, `send_lat`); the
//! stretches away are wall time of the polling thread, undivided. On a provider that does the
//! device's work in the polling thread (the sim in deterministic mode) that work is a stretch
//! without a spin too; it is short beside an outlier's extra time.

/// The longest stretch without a spin of a polling loop, sample by sample: [`Away::spin`] at
/// every turn of the loop (one tick-counter read, no system call), [`Away::mark`] at each
/// sample's stamp, which closes the sample before it. For a loop of one's own (the CLI's
/// `pingpong` uses it); `perf`'s loops keep theirs in their waits.
#[derive(Clone, Copy, Debug)]
pub struct Away {
    rate: crate::tsc::Rate,
    prev: u64,
    longest: u64,
}

impl Default for Away {
    fn default() -> Away {
        Away::new()
    }
}

impl Away {
    /// Starts at the current tick.
    pub fn new() -> Away {
        let rate = crate::tsc::Rate::start();
        Away {
            prev: rate.tick0(),
            rate,
            longest: 0,
        }
    }

    /// One turn of the polling loop.
    #[inline]
    pub fn spin(&mut self) {
        let t = crate::tsc::now();
        self.longest = self.longest.max(t.wrapping_sub(self.prev));
        self.prev = t;
    }

    /// The longest stretch since the last mark, in ticks ([`Away::to_ns`]); the next sample
    /// starts now.
    #[inline]
    pub fn mark(&mut self) -> u64 {
        self.spin();
        std::mem::take(&mut self.longest)
    }

    /// Rewrites tick counts of [`Away::mark`] as nanoseconds (after the loop).
    pub fn to_ns(&self, ticks: &mut [u64]) {
        let per_tick = self.rate.ns_per_tick();
        for t in ticks.iter_mut() {
            *t = (*t as f64 * per_tick) as u64;
        }
    }
}

/// At most this many outliers are listed one by one ([`Outliers::worst`]), the slowest.
pub const MAX_LISTED: usize = 16;

/// One outlier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outlier {
    /// Its iteration (the sample from iteration `i`'s stamp to the next).
    pub iteration: u32,
    /// The sample, ns (the table's unit).
    pub sample_ns: u64,
    /// The longest stretch in it without a spin of the polling loop, ns of wall time.
    pub away_ns: u64,
    /// `away_ns` is at least half of the sample's time above the median.
    pub interrupted: bool,
}

/// The outliers of one latency row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outliers {
    /// The row's message size.
    pub bytes: u64,
    /// Samples looked at.
    pub samples: u64,
    /// Their median, ns (the table's unit).
    pub median_ns: u64,
    /// The factor: an outlier is above `x` times the median.
    pub x: u32,
    /// `x` times the median, ns.
    pub threshold_ns: u64,
    /// Samples above the threshold.
    pub count: u64,
    /// Of those, the ones the polling thread was away for (see the module doc).
    pub interrupted: u64,
    /// The slowest outliers, slowest first, [`MAX_LISTED`] at most.
    pub worst: Vec<Outlier>,
}

impl Outliers {
    /// The outliers of `samples_ns` (one per iteration, the table's unit: raw samples divided
    /// by `rtt_factor`) given `away_ns` (the longest stretch without a spin of each sample, ns
    /// of wall time; missing entries count 0), with factor `x`.
    pub fn find(
        bytes: u64,
        samples_ns: &[u64],
        away_ns: &[u64],
        x: u32,
        rtt_factor: u32,
    ) -> Outliers {
        let mut sorted = samples_ns.to_vec();
        sorted.sort_unstable();
        let median_ns = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        let threshold_ns = median_ns.saturating_mul(u64::from(x));
        let f = u64::from(rtt_factor.max(1));
        // Sized first and never empty: one allocation whatever the run's length and its
        // outliers (tests/perf_device.rs counts a run's allocations).
        let above = samples_ns.iter().filter(|&&s| s > threshold_ns).count();
        let mut all: Vec<Outlier> = Vec::with_capacity(above.max(1));
        all.extend(
            samples_ns
                .iter()
                .enumerate()
                .filter(|&(_, &s)| s > threshold_ns)
                .map(|(i, &s)| {
                    let away_ns = away_ns.get(i).copied().unwrap_or(0);
                    // In wall time: the sample's extra time over the median, undivided.
                    let extra = (s - median_ns).saturating_mul(f);
                    Outlier {
                        iteration: i as u32,
                        sample_ns: s,
                        away_ns,
                        interrupted: away_ns.saturating_mul(2) >= extra,
                    }
                }),
        );
        let count = all.len() as u64;
        let interrupted = all.iter().filter(|o| o.interrupted).count() as u64;
        // Unstable: a stable sort of more than 20 allocates (ties go by iteration).
        all.sort_unstable_by_key(|o| (std::cmp::Reverse(o.sample_ns), o.iteration));
        all.truncate(MAX_LISTED);
        Outliers {
            bytes,
            samples: samples_ns.len() as u64,
            median_ns,
            x,
            threshold_ns,
            count,
            interrupted,
            worst: all,
        }
    }

    /// One line: how many outliers, and how many coincided with the CPU taken away.
    pub fn summary(&self) -> String {
        if self.count == 0 {
            return format!(
                "{} B: no sample above {}x the median ({} ns) of {}",
                self.bytes, self.x, self.median_ns, self.samples
            );
        }
        format!(
            "{} B: {} of {} samples above {}x the median ({} ns > {} ns); {} coincided with an \
             interruption of the polling CPU (host), {} spent their extra time polling \
             (the answer was late: network, peer or device)",
            self.bytes,
            self.count,
            self.samples,
            self.x,
            self.median_ns,
            self.threshold_ns,
            self.interrupted,
            self.count - self.interrupted
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outliers_are_above_x_times_the_median_and_interrupted_by_the_stretch_away() {
        // Median 100; threshold 1000 at x = 10.
        let mut s = vec![100u64; 101];
        let mut away = vec![50u64; 101];
        s[10] = 5000; // extra 4900: away 3000 >= 2450, interrupted
        away[10] = 3000;
        s[20] = 5000; // away 2000 < 2450: polled through it
        away[20] = 2000;
        s[30] = 1000; // not above the threshold
        s[40] = 20_000; // no stretch at all
        let o = Outliers::find(2, &s, &away, 10, 1);
        assert_eq!(
            (o.median_ns, o.threshold_ns, o.count, o.interrupted),
            (100, 1000, 3, 1)
        );
        assert_eq!(
            o.worst,
            vec![
                Outlier {
                    iteration: 40,
                    sample_ns: 20_000,
                    away_ns: 50,
                    interrupted: false
                },
                Outlier {
                    iteration: 10,
                    sample_ns: 5000,
                    away_ns: 3000,
                    interrupted: true
                },
                Outlier {
                    iteration: 20,
                    sample_ns: 5000,
                    away_ns: 2000,
                    interrupted: false
                },
            ]
        );
        // Half round trips: the extra time in wall time is twice the table's.
        let o = Outliers::find(2, &s, &away, 10, 2);
        assert_eq!(o.interrupted, 0);
        away[10] = 4900;
        assert_eq!(Outliers::find(2, &s, &away, 10, 2).interrupted, 1);
        assert!(
            o.summary().starts_with(
                "2 B: 3 of 101 samples above 10x the median (100 ns > 1000 ns); 0 coincided"
            ),
            "{}",
            o.summary()
        );
        let none = Outliers::find(8, &[], &[], 10, 1);
        assert_eq!((none.count, none.median_ns), (0, 0));
        assert_eq!(
            none.summary(),
            "8 B: no sample above 10x the median (0 ns) of 0"
        );
    }
}
