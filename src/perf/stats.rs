//! perftest's statistics, as a pure function of the timestamps.
//!
//! Nothing here touches a device: the measured loop hands over nanosecond timestamps and
//! these functions turn them into the values of the rows `ib_*_lat` and `ib_*_bw` print
//! (formatting them is the caller's business). The rules are perftest 4.5's
//! (`print_report_lat` / `print_report_bw` in `src/perftest_parameters.c`), restated:
//!
//! **Latency.** A sample is the interval between two consecutive posts of the measuring side
//! (`n` iterations give `n - 1` samples). The samples are sorted and the two largest are
//! dropped from everything except `t_max`; with `m = samples - 2`:
//! - `t_min` = the smallest sample; `t_max` = `sorted[m]`, i.e. the second-largest raw sample;
//! - `t_typical` = the median of the `m` kept samples: `sorted[m / 2]` when `m` is odd, else
//!   the mean of `sorted[m / 2 - 1]` and `sorted[m / 2]` **in integer clock units** (perftest
//!   adds two `cycles_t` and halves them; here the unit is the nanosecond, so the halving
//!   truncates to a whole nanosecond);
//! - `t_avg` and `t_stdev` are the mean and the population standard deviation (divide by `m`)
//!   of the `m` kept samples;
//! - the 99 % and 99.9 % percentiles are `sorted[ceil(m * 0.99)]` and `sorted[ceil(m * 0.999)]`
//!   (the product in `f64`, as perftest computes it; the index may reach `m`, which is the
//!   second-largest sample, still inside the array).
//! - beyond perftest: the 99.99 % and 99.999 % percentiles by the same rule
//!   (`sorted[ceil(m * 0.9999)]`, `sorted[ceil(m * 0.99999)]`), reported only when
//!   `m >= 10 000` and `m >= 100 000` respectively (below that they are the largest kept
//!   sample or beyond it: no information);
//! - beyond perftest: a histogram of the `m` kept samples (already divided by the round-trip
//!   factor) in log2 buckets of nanoseconds: bucket `k` counts samples in `[2^k, 2^(k+1))` ns
//!   (bucket 0 also holds 0 ns) ([`Histogram`]).
//!
//! Every value is then divided by the clock rate and by the round-trip factor: perftest keeps
//! timestamps in TSC cycles and divides by the CPU frequency in MHz to get microseconds; with
//! nanoseconds the divisor is 1000. Ping-pong tests (WRITE, SEND) report half the round trip
//! (factor 2); READ and atomics report the full round trip (factor 1), because only one side
//! is active and one sample is one request-response. Fewer than 3 samples leave nothing after
//! the two largest are dropped: that is an error here, not a division by zero.
//!
//! **Bandwidth.** `tposted[i]` is taken just before posting request `i` (with a post list,
//! only the first request of each list gets one), `tcompleted[j]` when the completion that
//! retires request `j` is polled (only the signaled ones: every `cq_mod`-th request, and the
//! last). With `T = tcompleted[n - 1] - tposted[0]` seconds and a unit `U` (2^20 bytes for
//! MiB/s, 125 000 000 bytes for Gb/s):
//! - `BW average` = `size * n / (T * U)`;
//! - `MsgRate[Mpps]` = `n / T / 10^6`;
//! - `BW peak` = `size / (d * U)` per second, where `d` is the smallest per-request time of
//!   any window that starts at a post (`i` = 0, `post_list`, `2 * post_list`, ...) and ends
//!   at a signaled completion `j >= i` (`j` = `cq_mod - 1`, `2 * cq_mod - 1`, ..., and `n - 1`
//!   when `n` is not a multiple of `cq_mod`): `d = (tcompleted[j] - tposted[i]) / (j - i + 1)`.
//!   That is perftest's rule, with one difference: **only windows that last at least
//!   [`MIN_PEAK_WINDOW_NS`] and at least 1/100 of the whole run count** (the whole run always
//!   does), and `d` is a real number, not an integer division. perftest takes every window,
//!   down to one request between two clock readings; its clock is the TSC (a fraction of a
//!   nanosecond per cycle), but a coarse or emulated clock (a TCG guest) can put a post and
//!   its completion on the same tick, and one window of 0 ticks then makes the peak "one
//!   message per tick" (64 B in 1 ns = 61035 MiB/s on rxe, where the average was 4 MiB/s).
//!   With at least 1 µs per window a clock tick of up to 10 ns moves the peak by at most 1 %.
//!   To bound the work for large runs, at most 2048 start and 2048 end points are tried
//!   (evenly spaced post lists and signaled completions; all of them below that).

use std::fmt;

/// Shortest window the BW peak is taken over, in nanoseconds (see the module doc).
pub const MIN_PEAK_WINDOW_NS: u64 = 1000;

/// Why a row could not be computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StatsError {
    /// Latency needs at least 3 samples (4 iterations): the two largest are dropped.
    TooFewSamples {
        /// Samples given.
        n: usize,
    },
    /// Bandwidth: no iterations, or timestamp arrays shorter than the iteration count.
    BadBwInput {
        /// Iterations asked for.
        iters: usize,
        /// Length of `tposted`.
        posted: usize,
        /// Length of `tcompleted`.
        completed: usize,
    },
    /// Bandwidth: `post_list` or `cq_mod` is 0.
    ZeroBatch,
    /// Bandwidth: the last completion is not later than the first post.
    NoElapsedTime,
}

impl fmt::Display for StatsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            StatsError::TooFewSamples { n } => write!(
                f,
                "{n} latency samples: at least 3 are needed (4 iterations), the 2 largest are dropped"
            ),
            StatsError::BadBwInput {
                iters,
                posted,
                completed,
            } => write!(
                f,
                "bandwidth over {iters} iterations needs that many timestamps (got {posted} post, {completed} completion)"
            ),
            StatsError::ZeroBatch => f.write_str("post_list and cq_mod must be at least 1"),
            StatsError::NoElapsedTime => {
                f.write_str("the last completion is not later than the first post")
            }
        }
    }
}

impl std::error::Error for StatsError {}

/// One row of a latency table, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations run (the `#iterations` column: iterations, not samples).
    pub iters: u64,
    /// Smallest sample.
    pub t_min: f64,
    /// Second-largest raw sample.
    pub t_max: f64,
    /// Median of the kept samples.
    pub t_typical: f64,
    /// Mean of the kept samples.
    pub t_avg: f64,
    /// Population standard deviation of the kept samples.
    pub t_stdev: f64,
    /// `sorted[ceil(m * 0.99)]`.
    pub p99: f64,
    /// `sorted[ceil(m * 0.999)]`.
    pub p99_9: f64,
    /// `sorted[ceil(m * 0.9999)]`, when `m >= 10 000`.
    pub p99_99: Option<f64>,
    /// `sorted[ceil(m * 0.99999)]`, when `m >= 100 000`.
    pub p99_999: Option<f64>,
    /// The kept samples in log2 buckets.
    pub hist: Histogram,
}

/// Buckets of a [`Histogram`]: bucket 39 ends at 2^40 ns (18 minutes).
pub const HIST_BUCKETS: usize = 40;

/// Latency samples in log2 buckets of nanoseconds: `counts[k]` samples in `[2^k, 2^(k+1))` ns
/// (`counts[0]` also holds 0 ns; the last bucket everything above).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// Samples per bucket.
    pub counts: [u64; HIST_BUCKETS],
}

impl Histogram {
    /// An empty histogram.
    pub const EMPTY: Histogram = Histogram {
        counts: [0; HIST_BUCKETS],
    };

    /// The bucket of `ns`.
    pub fn bucket(ns: u64) -> usize {
        if ns < 2 {
            0
        } else {
            (63 - ns.leading_zeros() as usize).min(HIST_BUCKETS - 1)
        }
    }

    /// The non-empty buckets from the first to the last non-empty one (empty ones between
    /// them included), as (lower edge, upper edge) in microseconds and the count.
    pub fn buckets(&self) -> Vec<(f64, f64, u64)> {
        let first = self.counts.iter().position(|&c| c > 0);
        let last = self.counts.iter().rposition(|&c| c > 0);
        match (first, last) {
            (Some(a), Some(b)) => (a..=b)
                .map(|k| {
                    let lo = if k == 0 {
                        0.0
                    } else {
                        (1u64 << k) as f64 / 1000.0
                    };
                    (lo, (1u64 << (k + 1)) as f64 / 1000.0, self.counts[k])
                })
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// The latency row of `samples_ns` (intervals between consecutive posts, any order).
/// `rtt_factor` is 2 for ping-pong tests (half the round trip) and 1 for READ and atomics.
/// `rtt_factor` 0 is taken as 1.
pub fn lat_row(
    bytes: u64,
    iters: u64,
    samples_ns: &[u64],
    rtt_factor: u32,
) -> Result<LatRow, StatsError> {
    let n = samples_ns.len();
    if n < 3 {
        return Err(StatsError::TooFewSamples { n });
    }
    let mut d = samples_ns.to_vec();
    d.sort_unstable();
    let m = n - 2;
    let median = if (m - 1) % 2 == 1 {
        // Even count: perftest halves the sum of two integer clock readings.
        ((u128::from(d[m / 2]) + u128::from(d[m / 2 - 1])) / 2) as u64
    } else {
        d[m / 2]
    };
    let q = 1000.0 * f64::from(rtt_factor.max(1));
    let us = |v: u64| v as f64 / q;
    let sum: f64 = d[..m].iter().map(|&v| us(v)).sum();
    let avg = sum / m as f64;
    let var: f64 = d[..m]
        .iter()
        .map(|&v| {
            let x = avg - us(v);
            x * x
        })
        .sum::<f64>()
        / m as f64;
    let i99 = (m as f64 * 0.99).ceil() as usize;
    let i999 = (m as f64 * 0.999).ceil() as usize;
    let pct = |q: f64, min_m: usize| -> Option<f64> {
        (m >= min_m).then(|| us(d[((m as f64 * q).ceil() as usize).min(m)]))
    };
    let mut hist = Histogram::EMPTY;
    let div = u64::from(rtt_factor.max(1));
    for &v in &d[..m] {
        hist.counts[Histogram::bucket(v / div)] += 1;
    }
    Ok(LatRow {
        bytes,
        iters,
        t_min: us(d[0]),
        t_max: us(d[m]),
        t_typical: us(median),
        t_avg: avg,
        t_stdev: var.sqrt(),
        p99: us(d[i99.min(m)]),
        p99_9: us(d[i999.min(m)]),
        p99_99: pct(0.9999, 10_000),
        p99_999: pct(0.99999, 100_000),
        hist,
    })
}

/// The unit of the bandwidth columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BwUnit {
    /// MiB/sec (2^20 bytes per second): perftest's default.
    MiBps,
    /// Gb/sec (10^9 bits per second): `--report_gbits`.
    Gbps,
}

impl BwUnit {
    /// Bytes per unit per second (perftest's `format_factor`).
    pub fn bytes_per_unit(self) -> f64 {
        match self {
            BwUnit::MiBps => 1_048_576.0,
            BwUnit::Gbps => 125_000_000.0,
        }
    }
}

/// One row of a bandwidth table.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BwRow {
    /// Message size.
    pub bytes: u64,
    /// Iterations run.
    pub iters: u64,
    /// Peak bandwidth in `unit`.
    pub bw_peak: f64,
    /// Average bandwidth in `unit`.
    pub bw_avg: f64,
    /// Messages per second, in millions.
    pub msg_rate_mpps: f64,
    /// Unit of the two bandwidth columns.
    pub unit: BwUnit,
}

/// The bandwidth row of a run of `iters` requests of `bytes` each. `tposted[i]` must be set
/// for every `i` that is a multiple of `post_list`, `tcompleted[j]` for every signaled `j`
/// (see the module doc); other entries are ignored. Timestamps in nanoseconds.
pub fn bw_row(
    bytes: u64,
    iters: usize,
    post_list: usize,
    cq_mod: usize,
    tposted: &[u64],
    tcompleted: &[u64],
    unit: BwUnit,
) -> Result<BwRow, StatsError> {
    if iters == 0 || tposted.len() < iters || tcompleted.len() < iters {
        return Err(StatsError::BadBwInput {
            iters,
            posted: tposted.len(),
            completed: tcompleted.len(),
        });
    }
    if post_list == 0 || cq_mod == 0 {
        return Err(StatsError::ZeroBatch);
    }
    let total = tcompleted[iters - 1].saturating_sub(tposted[0]);
    if total == 0 {
        return Err(StatsError::NoElapsedTime);
    }
    // See the module doc: windows shorter than this do not count.
    let min_window = (total / 100).max(MIN_PEAK_WINDOW_NS).min(total);
    let mut best = f64::INFINITY;
    let mut window = |i: usize, j: usize| {
        let d = tcompleted[j].saturating_sub(tposted[i]);
        if d >= min_window {
            best = best.min(d as f64 / (j - i + 1) as f64);
        }
    };
    window(0, iters - 1);
    let i_step = post_list * (iters / post_list / 2048).max(1);
    let j_step = cq_mod * (iters / cq_mod / 2048).max(1);
    for i in (0..iters).step_by(i_step) {
        let first = (i + 1).div_ceil(cq_mod) * cq_mod - 1;
        for j in (first..iters).step_by(j_step) {
            window(i, j);
        }
        if iters % cq_mod != 0 {
            window(i, iters - 1);
        }
    }
    let best = best.max(f64::MIN_POSITIVE);
    let per_s = 1e9;
    let u = unit.bytes_per_unit();
    let secs = total as f64 / per_s;
    Ok(BwRow {
        bytes,
        iters: iters as u64,
        bw_peak: (bytes as f64 * per_s) / (best * u),
        bw_avg: (bytes as f64 * iters as f64) / (secs * u),
        msg_rate_mpps: iters as f64 / secs / 1e6,
        unit,
    })
}
