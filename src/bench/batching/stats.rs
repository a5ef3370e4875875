//! A point's samples into its summary: order statistics, a bootstrap interval of the median
//! and the run-to-run spread.
//!
//! Contract: pure functions of the samples (ns per WQE, in the order taken); the bootstrap is
//! seeded, so the same samples give the same interval on every run and machine.

/// Resamples the bootstrap draws.
pub const BOOTSTRAP_RESAMPLES: usize = 2000;

/// The `p`-quantile of sorted `v` (nearest rank on `(n - 1) * p`).
pub fn quantile(v: &[f64], p: f64) -> f64 {
    let n = v.len();
    v[((p * (n - 1) as f64).round() as usize).min(n - 1)]
}

/// The median of `v` (any order), as [`quantile`] of the sorted copy at 0.5.
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    quantile(&s, 0.5)
}

/// splitmix64: a small seeded generator for the resampling (no dependency).
struct Mix(u64);

impl Mix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        // Lemire's multiply-shift: unbiased enough for n far below 2^32.
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }
}

/// The percentile-bootstrap 95 % interval of the median of `v`: `resamples` draws of
/// `v.len()` samples with replacement, the median of each, their 2.5 % and 97.5 % quantiles.
/// `None` with fewer than 2 samples (no interval from one sample).
pub fn bootstrap_median_ci(v: &[f64], resamples: usize, seed: u64) -> Option<(f64, f64)> {
    let n = v.len();
    if n < 2 || resamples == 0 {
        return None;
    }
    let mut rng = Mix(seed);
    let mut draw = vec![0f64; n];
    let mut meds = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        for d in draw.iter_mut() {
            *d = v[rng.below(n)];
        }
        draw.sort_by(|a, b| a.total_cmp(b));
        meds.push(quantile(&draw, 0.5));
    }
    meds.sort_by(|a, b| a.total_cmp(b));
    Some((quantile(&meds, 0.025), quantile(&meds, 0.975)))
}

/// Run-to-run spread: how far the largest per-run median lies above the smallest, as a
/// fraction of the smallest (`largest / smallest - 1`); 0 for one run.
pub fn spread(run_medians: &[f64]) -> f64 {
    if run_medians.len() < 2 {
        return 0.0;
    }
    let lo = run_medians.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = run_medians
        .iter()
        .copied()
        .fold(f64::NEG_INFINITY, f64::max);
    hi / lo - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_by_hand() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0];
        assert_eq!(quantile(&v, 0.5), 6.0);
        assert_eq!(quantile(&v, 0.1), 2.0);
        assert_eq!(quantile(&v, 0.9), 10.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    }

    #[test]
    fn bootstrap_interval_holds_the_median_and_is_seeded() {
        let v: Vec<f64> = (0..101).map(|i| 10.0 + (i % 7) as f64).collect();
        let m = median(&v);
        let (lo, hi) = bootstrap_median_ci(&v, 500, 1).unwrap();
        assert!(lo <= m && m <= hi, "{lo} <= {m} <= {hi}");
        assert!(lo >= 10.0 && hi <= 16.0);
        assert_eq!(bootstrap_median_ci(&v, 500, 1), Some((lo, hi)));
        // All samples equal: the interval is that value.
        assert_eq!(bootstrap_median_ci(&[5.0; 9], 100, 3), Some((5.0, 5.0)));
        assert_eq!(bootstrap_median_ci(&[5.0], 100, 3), None);
    }

    #[test]
    fn a_wider_spread_gives_a_wider_interval() {
        let tight: Vec<f64> = (0..101).map(|i| 100.0 + (i % 3) as f64).collect();
        let wide: Vec<f64> = (0..101).map(|i| 100.0 + (i % 41) as f64).collect();
        let w = |v: &[f64]| {
            let (lo, hi) = bootstrap_median_ci(v, 500, 7).unwrap();
            hi - lo
        };
        assert!(w(&wide) > w(&tight), "{} vs {}", w(&wide), w(&tight));
    }

    #[test]
    fn spread_by_hand() {
        assert_eq!(spread(&[10.0]), 0.0);
        assert!((spread(&[10.0, 12.0, 11.0]) - 0.2).abs() < 1e-12);
    }
}
