//! perftest's result tables, for the rows of [`crate::perf`].
//!
//! A table is a header line of column titles, then one line per row: one leading space, each
//! cell left-aligned in the width of its column (its title's, and at least 7 for `#bytes`, so
//! 8388608 fits, as perftest's `%-7lu`), cells separated by two spaces, no trailing blanks.
//! Latency tables gain `99.99%` and `99.999%` columns when the run has enough samples for
//! them (10 000 and 100 000 kept samples).
//! Latencies in microseconds with two decimals; bandwidth with two decimals and the message
//! rate with six, as perftest prints them.

use crate::perf::stats::{BwRow, BwUnit, LatRow};
use crate::perf::Row;
use crate::providers::ProviderKind;

/// The dashed rule perftest prints around its header and under its table.
pub const RULE: &str =
    "---------------------------------------------------------------------------------------";

/// Latency columns, exactly as perftest titles them.
pub const LAT_COLUMNS: [&str; 9] = [
    "#bytes",
    "#iterations",
    "t_min[usec]",
    "t_max[usec]",
    "t_typical[usec]",
    "t_avg[usec]",
    "t_stdev[usec]",
    "99% percentile[usec]",
    "99.9% percentile[usec]",
];

/// Column label of a bandwidth unit (`MiB/sec`, `Gb/sec`).
pub fn unit_label(unit: BwUnit) -> &'static str {
    match unit {
        BwUnit::MiBps => "MiB/sec",
        BwUnit::Gbps => "Gb/sec",
    }
}

/// Bandwidth columns for `unit`.
pub fn bw_columns(unit: BwUnit) -> [String; 5] {
    let u = unit_label(unit);
    [
        "#bytes".into(),
        "#iterations".into(),
        format!("BW peak[{u}]"),
        format!("BW average[{u}]"),
        "MsgRate[Mpps]".into(),
    ]
}

/// Latency columns beyond perftest's, when the sample count allows them.
pub const DEEP_LAT_COLUMNS: [&str; 2] = ["99.99% percentile[usec]", "99.999% percentile[usec]"];

/// Widest size printed: 8388608 (7 digits).
const BYTES_WIDTH: usize = 7;

/// A table line (see the module doc).
pub fn table_line<S: AsRef<str>>(titles: &[S], cells: &[String]) -> String {
    let mut s = String::from(" ");
    for (k, (t, c)) in titles.iter().zip(cells).enumerate() {
        if k > 0 {
            s.push_str("  ");
        }
        let w = if k == 0 {
            t.as_ref().len().max(BYTES_WIDTH)
        } else {
            t.as_ref().len()
        };
        s.push_str(&format!("{c:<w$}"));
    }
    s.truncate(s.trim_end().len());
    s
}

/// The latency table's header line (perftest's nine columns).
pub fn lat_header() -> String {
    let titles: Vec<String> = LAT_COLUMNS.iter().map(|t| t.to_string()).collect();
    table_line(&LAT_COLUMNS, &titles)
}

/// How many of [`DEEP_LAT_COLUMNS`] a run of `iters` iterations prints (kept samples =
/// iterations - 3).
pub fn deep_columns(iters: u32) -> usize {
    deep_columns_kept(iters.saturating_sub(3) as usize)
}

/// How many of [`DEEP_LAT_COLUMNS`] a row of `kept` samples has
/// ([`crate::perf::stats::lat_row`] keeps all but the two largest).
fn deep_columns_kept(kept: usize) -> usize {
    usize::from(kept >= 10_000) + usize::from(kept >= 100_000)
}

fn lat_titles(deep: usize) -> Vec<String> {
    LAT_COLUMNS
        .iter()
        .chain(DEEP_LAT_COLUMNS.iter().take(deep))
        .map(|t| t.to_string())
        .collect()
}

/// The latency table's header line for a run of `iters` iterations.
pub fn lat_header_for(iters: u32) -> String {
    let t = lat_titles(deep_columns(iters));
    table_line(&t, &t)
}

/// The latency table's header line for a row made of `samples` samples (known before the
/// run: the same columns as the row will have).
pub fn lat_header_for_samples(samples: usize) -> String {
    let t = lat_titles(deep_columns_kept(samples.saturating_sub(2)));
    table_line(&t, &t)
}

/// A histogram under a latency row: one line per log2 bucket, from the first non-empty one
/// to the last.
pub fn histogram_lines(h: &crate::perf::stats::Histogram) -> String {
    let b = h.buckets();
    let total: u64 = b.iter().map(|x| x.2).sum();
    let mut s = format!("   histogram of {total} kept samples (usec, log2 buckets):\n");
    for (lo, hi, c) in b {
        let bar = if total > 0 {
            "#".repeat(((c as f64 / total as f64) * 40.0).ceil() as usize)
        } else {
            String::new()
        };
        s.push_str(&format!("     [{lo:>12.3}, {hi:>12.3})  {c:>9}  {bar}\n"));
    }
    s
}

/// The bandwidth table's header line for `unit`.
pub fn bw_header(unit: BwUnit) -> String {
    let c = bw_columns(unit);
    table_line(&c, &c)
}

/// A latency row as printed under [`lat_header`] (or [`lat_header_for`] its iterations).
pub fn lat_line(r: &LatRow) -> String {
    let f = |v: f64| format!("{v:.2}");
    let mut cells = vec![
        r.bytes.to_string(),
        r.iters.to_string(),
        f(r.t_min),
        f(r.t_max),
        f(r.t_typical),
        f(r.t_avg),
        f(r.t_stdev),
        f(r.p99),
        f(r.p99_9),
    ];
    cells.extend(r.p99_99.map(f));
    cells.extend(r.p99_999.map(f));
    table_line(&lat_titles(cells.len() - LAT_COLUMNS.len()), &cells)
}

/// A bandwidth row as printed under [`bw_header`].
pub fn bw_line(r: &BwRow) -> String {
    table_line(
        &bw_columns(r.unit),
        &[
            r.bytes.to_string(),
            r.iters.to_string(),
            format!("{:.2}", r.bw_peak),
            format!("{:.2}", r.bw_avg),
            format!("{:.6}", r.msg_rate_mpps),
        ],
    )
}

/// The table line of either kind of row.
pub fn row_line(r: &Row) -> String {
    match r {
        Row::Lat(r) => lat_line(r),
        Row::Bw(r) => bw_line(r),
    }
}

/// How a provider is described in a run's header.
pub fn provider_label(kind: ProviderKind, dev: &str) -> String {
    match kind {
        ProviderKind::Sim => format!("sim: software mlx5 device ({dev}), not hardware"),
        ProviderKind::Verbs => format!("{dev} via libibverbs (verbs provider)"),
        ProviderKind::Mlx5 => format!("{dev}: direct mlx5 WQE writing"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::stats::{bw_row, lat_row};

    const LAT_HEADER: &str = " #bytes   #iterations  t_min[usec]  t_max[usec]  t_typical[usec]  t_avg[usec]  t_stdev[usec]  99% percentile[usec]  99.9% percentile[usec]";

    #[test]
    fn lat_header_is_perftests_columns() {
        // perftest's titles; #bytes padded to 7 so 8388608 does not shift the columns.
        assert_eq!(lat_header(), LAT_HEADER);
        assert_eq!(LAT_COLUMNS.len(), 9);
    }

    #[test]
    fn bw_headers_in_both_units() {
        assert_eq!(
            bw_header(BwUnit::MiBps),
            " #bytes   #iterations  BW peak[MiB/sec]  BW average[MiB/sec]  MsgRate[Mpps]"
        );
        assert_eq!(
            bw_header(BwUnit::Gbps),
            " #bytes   #iterations  BW peak[Gb/sec]  BW average[Gb/sec]  MsgRate[Mpps]"
        );
    }

    #[test]
    fn lat_lines() {
        let r = lat_row(2, 4, &[5000, 1000, 3000], 2).unwrap();
        assert_eq!(
            lat_line(&r),
            " 2        4            0.50         1.50         0.50             0.50         0.00           1.50                  1.50"
        );
        // 102 samples of 1..=102 us, shuffled deterministically; m = 100 kept (1..=100 us).
        let mut s: Vec<u64> = (1..=102u64).map(|k| k * 1000).collect();
        for i in 0..s.len() {
            let j = (i * 37 + 11) % s.len();
            s.swap(i, j);
        }
        let r = lat_row(64, 103, &s, 1).unwrap();
        assert_eq!(
            lat_line(&r),
            " 64       103          1.00         101.00       50.50            50.50        28.87          100.00                101.00"
        );
    }

    #[test]
    fn bw_lines() {
        let tp = [0u64, 100, 200, 300];
        let tc = [1000u64, 1050, 1100, 1900];
        let r = bw_row(65536, 4, 1, 1, &tp, &tc, BwUnit::MiBps).unwrap();
        assert_eq!(
            bw_line(&r),
            " 65536    4            170454.55         131578.95            2.105263"
        );
        const X: u64 = 777_777;
        let tp = [0, X, 100, X, 200, X, 300, X, 400, X];
        let tc = [X, X, X, 1000, X, X, X, 1500, X, 2000];
        let r = bw_row(64, 10, 2, 4, &tp, &tc, BwUnit::Gbps).unwrap();
        assert_eq!(
            bw_line(&r),
            " 64       10           2.73             2.56                5.000000"
        );
    }

    #[test]
    fn deep_percentile_columns_when_the_samples_allow() {
        assert_eq!(deep_columns(10_002), 0);
        assert_eq!(deep_columns(10_003), 1);
        assert_eq!(deep_columns(100_003), 2);
        assert_eq!(lat_header_for(1000), lat_header());
        let h = lat_header_for(10_003);
        assert!(h.ends_with("  99.99% percentile[usec]"), "{h}");
        let s: Vec<u64> = (1..=10_002u64).map(|k| k * 1000).collect();
        let r = lat_row(8388608, 10_003, &s, 1).unwrap();
        let l = lat_line(&r);
        // Every cell starts under its title.
        for title in ["#iterations", "99.99% percentile[usec]"] {
            let at = h.find(title).unwrap();
            assert_ne!(&l[at..at + 1], " ", "{h}\n{l}");
            assert_eq!(&l[at - 1..at], " ", "{h}\n{l}");
        }
    }

    #[test]
    fn provider_labels() {
        assert_eq!(
            provider_label(ProviderKind::Sim, "sim0"),
            "sim: software mlx5 device (sim0), not hardware"
        );
        assert!(provider_label(ProviderKind::Verbs, "rxe0").contains("via libibverbs"));
    }
}
