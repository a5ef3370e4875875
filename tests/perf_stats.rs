//! `perf::stats` against tables computed by hand from perftest 4.5's rules (see the module
//! doc of `rdma_direct::perf::stats`): sort, drop the 2 largest, median of the rest (integer
//! halving for an even count), `t_max` = second-largest raw sample, percentiles
//! `sorted[ceil(m * p)]`, half or full round trip; bandwidth peak over post-list-aligned
//! windows ending at signaled completions.
//!
//! How the rows are printed (perftest's columns, the JSON lines) is the CLI's and is tested
//! there (`src/report/table.rs`).

use rdma_direct::perf::stats::{
    bw_row, lat_row, BwRow, BwUnit, Histogram, LatRow, StatsError, HIST_BUCKETS,
};

#[test]
fn fewer_than_three_samples_is_an_error() {
    for n in 0..3 {
        let s = vec![1000u64; n];
        assert_eq!(
            lat_row(2, n as u64 + 1, &s, 2),
            Err(StatsError::TooFewSamples { n })
        );
    }
    let e = StatsError::TooFewSamples { n: 2 }.to_string();
    assert!(e.contains("at least 3"), "{e}");
}

#[test]
fn three_samples_keep_one() {
    // Sorted 1000, 3000, 5000 ns; m = 1 kept (1000); t_max = sorted[1] = 3000.
    // Half round trip: divide by 2 * 1000.
    let r = lat_row(2, 4, &[5000, 1000, 3000], 2).unwrap();
    assert_eq!(
        r,
        LatRow {
            bytes: 2,
            iters: 4,
            t_min: 0.5,
            t_max: 1.5,
            t_typical: 0.5,
            t_avg: 0.5,
            t_stdev: 0.0,
            // ceil(1 * 0.99) = 1, ceil(1 * 0.999) = 1: sorted[1].
            p99: 1.5,
            p99_9: 1.5,
            // 1 kept sample: too few for the deeper percentiles.
            p99_99: None,
            p99_999: None,
            // The kept 1000 ns halved: 500 ns, bucket [256, 512).
            hist: {
                let mut h = Histogram::EMPTY;
                h.counts[8] = 1;
                h
            },
        }
    );
}

/// p99.99 appears from 10 000 kept samples on, p99.999 from 100 000; the histogram holds
/// every kept sample in its log2 bucket.
#[test]
fn deep_percentiles_and_histogram() {
    // 10 002 samples 1..=10002 us: m = 10 000 kept (1..=10000 us).
    let s: Vec<u64> = (1..=10_002u64).map(|k| k * 1000).collect();
    let r = lat_row(2, 10_003, &s, 1).unwrap();
    // ceil(10000 * 0.9999) = 9999: sorted[9999] = 10000 us.
    assert_eq!(r.p99_99, Some(10_000.0));
    assert_eq!(r.p99_999, None);
    assert_eq!(r.hist.counts.iter().sum::<u64>(), 10_000);
    // 1000..=2047 ns -> bucket 9 ([512,1024)) holds only 1000 ns; 1024..2048 bucket 10.
    assert_eq!(r.hist.counts[9], 1);
    assert_eq!(r.hist.counts[10], 1);
    let b = r.hist.buckets();
    assert_eq!(b.first().map(|x| (x.0, x.1, x.2)), Some((0.512, 1.024, 1)));
    let s: Vec<u64> = (1..=100_002u64).collect();
    let r = lat_row(2, 100_003, &s, 1).unwrap();
    assert!(r.p99_99.is_some() && r.p99_999.is_some());
    assert_eq!(Histogram::bucket(0), 0);
    assert_eq!(Histogram::bucket(1), 0);
    assert_eq!(Histogram::bucket(2), 1);
    assert_eq!(Histogram::bucket(u64::MAX), HIST_BUCKETS - 1);
}

#[test]
fn all_equal_samples() {
    let r = lat_row(8, 11, &[2000; 10], 1).unwrap();
    assert_eq!(
        (
            r.t_min,
            r.t_max,
            r.t_typical,
            r.t_avg,
            r.t_stdev,
            r.p99,
            r.p99_9
        ),
        (2.0, 2.0, 2.0, 2.0, 0.0, 2.0, 2.0)
    );
}

#[test]
fn t_max_is_the_second_largest_raw_sample() {
    // One huge outlier and a second, smaller one: t_max is the second.
    let r = lat_row(2, 7, &[1000, 900_000, 1000, 50_000, 1000, 1000], 1).unwrap();
    assert_eq!(r.t_max, 50.0);
    // Both outliers are out of the mean: m = 4 samples of 1 us.
    assert_eq!(r.t_avg, 1.0);
    assert_eq!(r.t_stdev, 0.0);
}

#[test]
fn even_count_median_halves_in_whole_nanoseconds() {
    // m = 2 kept: 1001 and 1002 ns; (1001 + 1002) / 2 = 1001 in integer nanoseconds.
    let r = lat_row(2, 5, &[1002, 9999, 1001, 9000], 1).unwrap();
    assert_eq!(r.t_typical, 1.001);
    // Odd count: the middle one.
    let r = lat_row(2, 6, &[1003, 9999, 1001, 9000, 1002], 1).unwrap();
    assert_eq!(r.t_typical, 1.002);
}

#[test]
fn hundred_kept_samples_percentile_indices() {
    // 102 samples of 1..=102 us, shuffled deterministically; m = 100 kept (1..=100 us).
    let mut s: Vec<u64> = (1..=102u64).map(|k| k * 1000).collect();
    for i in 0..s.len() {
        let j = (i * 37 + 11) % s.len();
        s.swap(i, j);
    }
    let r = lat_row(64, 103, &s, 1).unwrap();
    assert_eq!(r.t_min, 1.0);
    // sorted[100] = 101 us: the second-largest raw sample.
    assert_eq!(r.t_max, 101.0);
    // Even m: (sorted[50] + sorted[49]) / 2 = (51 + 50) / 2 us.
    assert_eq!(r.t_typical, 50.5);
    assert_eq!(r.t_avg, 50.5);
    // Population stdev of 1..=100: sqrt((100^2 - 1) / 12) = 28.86607...
    assert!(
        (r.t_stdev - 28.866_070_047_722_12).abs() < 1e-9,
        "{}",
        r.t_stdev
    );
    // ceil(100 * 0.99) = 99 -> 100 us; ceil(100 * 0.999) = 100 -> 101 us.
    assert_eq!(r.p99, 100.0);
    assert_eq!(r.p99_9, 101.0);
}

#[test]
fn percentile_index_rounds_up() {
    // m = 50: ceil(49.5) = 50 and ceil(49.95) = 50, i.e. sorted[50], the second largest;
    // a rounding-down rule would give sorted[49].
    let s: Vec<u64> = (1..=52u64).map(|k| k * 1000).collect();
    let r = lat_row(2, 53, &s, 1).unwrap();
    assert_eq!(r.p99, 51.0);
    assert_eq!(r.p99_9, 51.0);
    // m = 150: ceil(148.5) = 149 -> 150 us; ceil(149.85) = 150 -> 151 us.
    let s: Vec<u64> = (1..=152u64).map(|k| k * 1000).collect();
    let r = lat_row(2, 153, &s, 1).unwrap();
    assert_eq!(r.p99, 150.0);
    assert_eq!(r.p99_9, 151.0);
}

#[test]
fn round_trip_factor() {
    let s = [4000u64, 4000, 4000, 8000, 8000];
    let full = lat_row(2, 6, &s, 1).unwrap();
    let half = lat_row(2, 6, &s, 2).unwrap();
    assert_eq!(full.t_typical, 4.0);
    assert_eq!(half.t_typical, 2.0);
    assert_eq!(half.t_max, 4.0);
}

#[test]
fn bw_every_request_signaled() {
    // 4 requests, post_list 1, cq_mod 1. Total 1900 ns.
    let tp = [0u64, 100, 200, 300];
    let tc = [1000u64, 1050, 1100, 1900];
    let r = bw_row(65536, 4, 1, 1, &tp, &tc, BwUnit::MiBps).unwrap();
    // Windows (tc[j] - tp[i]) / (j - i + 1) of at least 1 us: the smallest is i=0, j=2:
    // 1100 / 3 ns. Peak = 65536 B / (1100 / 3) ns in MiB/s.
    let want = 65536.0 * 1e9 / (1100.0 / 3.0 * 1_048_576.0);
    assert!((r.bw_peak - want).abs() < 1e-6, "{}", r.bw_peak);
    // Average: 4 * 65536 B / 1900 ns.
    assert!(
        (r.bw_avg - 131_578.947_368_421_04).abs() < 1e-6,
        "{}",
        r.bw_avg
    );
    assert!((r.msg_rate_mpps - 2.105_263_157_894_736_7).abs() < 1e-12);
}

#[test]
fn bw_post_list_and_cq_mod_windows() {
    // 10 requests, lists of 2 (posts stamped at 0, 2, 4, 6, 8), cq_mod 4 (completions
    // stamped at 3, 7 and the last, 9). Every other entry holds garbage that must be ignored.
    const X: u64 = 777_777;
    let tp = [0, X, 100, X, 200, X, 300, X, 400, X];
    let tc = [X, X, X, 1000, X, X, X, 1500, X, 2000];
    let r = bw_row(64, 10, 2, 4, &tp, &tc, BwUnit::Gbps).unwrap();
    // Smallest window: i=0, j=7: 1500 / 8 = 187.5 ns. 64 B / 187.5 ns in Gb/s.
    assert!(
        (r.bw_peak - 64.0 * 8.0 / 187.5).abs() < 1e-12,
        "{}",
        r.bw_peak
    );
    // 640 B in 2000 ns = 2.56 Gb/s; 10 messages in 2 us = 5 Mpps.
    assert!((r.bw_avg - 2.56).abs() < 1e-12);
    assert!((r.msg_rate_mpps - 5.0).abs() < 1e-12);
    assert_eq!(
        r,
        BwRow {
            bytes: 64,
            iters: 10,
            bw_peak: r.bw_peak,
            bw_avg: r.bw_avg,
            msg_rate_mpps: r.msg_rate_mpps,
            unit: BwUnit::Gbps
        }
    );
}

#[test]
fn bw_iters_below_cq_mod_use_the_last_completion() {
    // 3 requests, cq_mod 100: only the last is signaled.
    let tp = [0u64, 10, 20];
    let tc = [0u64, 0, 3000];
    let r = bw_row(1024, 3, 1, 100, &tp, &tc, BwUnit::MiBps).unwrap();
    // Windows to j=2: 3000/3 = 1000, 2990/2 = 1495, 2980/1: smallest 1000 ns.
    let want = 1024.0 * 1e9 / (1000.0 * 1_048_576.0);
    assert!((r.bw_peak - want).abs() < 1e-9);
}

/// A post and its completion on the same clock tick (a coarse or emulated clock) made the
/// peak "64 B in 1 ns" = 61035 MiB/s beside an average of a few MiB/s. Windows shorter than
/// 1 us (and than 1/100 of the run) no longer count.
#[test]
fn bw_peak_is_not_one_clock_tick() {
    // 64 requests of 64 B, lists of 16, cq_mod 16: each list completes on the very tick it
    // was posted, lists 20 us apart.
    let n = 64;
    let mut tp = vec![0u64; n];
    let mut tc = vec![0u64; n];
    for l in 0..4 {
        tp[l * 16] = 1 + l as u64 * 20_000;
        tc[l * 16 + 15] = 1 + l as u64 * 20_000;
    }
    let r = bw_row(64, n, 16, 16, &tp, &tc, BwUnit::MiBps).unwrap();
    assert!(r.bw_peak < 61_035.0 / 10.0, "peak {}", r.bw_peak);
    // The shortest window that counts: list 0 to list 1, 32 requests in 20 us.
    let want = 64.0 * 1e9 / (20_000.0 / 32.0 * 1_048_576.0);
    assert!((r.bw_peak - want).abs() < 1e-9, "{} vs {want}", r.bw_peak);
    assert!(r.bw_peak >= r.bw_avg * 0.999);
}

#[test]
fn bw_bad_input_is_an_error() {
    let t = [0u64, 1, 2];
    assert_eq!(
        bw_row(8, 0, 1, 1, &t, &t, BwUnit::MiBps),
        Err(StatsError::BadBwInput {
            iters: 0,
            posted: 3,
            completed: 3
        })
    );
    assert!(matches!(
        bw_row(8, 4, 1, 1, &t, &t, BwUnit::MiBps),
        Err(StatsError::BadBwInput { iters: 4, .. })
    ));
    assert_eq!(
        bw_row(8, 3, 0, 1, &t, &t, BwUnit::MiBps),
        Err(StatsError::ZeroBatch)
    );
    assert_eq!(
        bw_row(8, 3, 1, 0, &t, &t, BwUnit::MiBps),
        Err(StatsError::ZeroBatch)
    );
    assert_eq!(
        bw_row(8, 3, 1, 1, &[5, 5, 5], &[0, 0, 5], BwUnit::MiBps),
        Err(StatsError::NoElapsedTime)
    );
}
