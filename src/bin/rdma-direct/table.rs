//! perftest's result tables and their JSON lines, for the rows of [`rdma_direct::perf`].
//!
//! A table is a header line of column titles, then one line per row: one leading space, each
//! cell left-aligned in the width of its column's title, cells separated by two spaces, no
//! trailing blanks. Latencies in microseconds with two decimals; bandwidth with two decimals
//! and the message rate with six, as perftest prints them. A JSON line is one object per row
//! (latencies with three decimals).

use rdma_direct::perf::stats::{BwRow, BwUnit, LatRow};
use rdma_direct::perf::Row;
use rdma_direct::providers::ProviderKind;

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

/// A table line (see the module doc).
fn table_line<S: AsRef<str>>(titles: &[S], cells: &[String]) -> String {
    let mut s = String::from(" ");
    for (k, (t, c)) in titles.iter().zip(cells).enumerate() {
        if k > 0 {
            s.push_str("  ");
        }
        let w = t.as_ref().len();
        s.push_str(&format!("{c:<w$}"));
    }
    s.truncate(s.trim_end().len());
    s
}

/// The latency table's header line.
pub fn lat_header() -> String {
    let titles: Vec<String> = LAT_COLUMNS.iter().map(|t| t.to_string()).collect();
    table_line(&LAT_COLUMNS, &titles)
}

/// The bandwidth table's header line for `unit`.
pub fn bw_header(unit: BwUnit) -> String {
    let c = bw_columns(unit);
    table_line(&c, &c)
}

/// A latency row as printed under [`lat_header`].
pub fn lat_line(r: &LatRow) -> String {
    let f = |v: f64| format!("{v:.2}");
    table_line(
        &LAT_COLUMNS,
        &[
            r.bytes.to_string(),
            r.iters.to_string(),
            f(r.t_min),
            f(r.t_max),
            f(r.t_typical),
            f(r.t_avg),
            f(r.t_stdev),
            f(r.p99),
            f(r.p99_9),
        ],
    )
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

/// A latency row as one JSON object on one line.
pub fn lat_json(r: &LatRow) -> String {
    format!(
        "{{\"bytes\":{},\"iterations\":{},\"t_min_us\":{:.3},\"t_max_us\":{:.3},\"t_typical_us\":{:.3},\"t_avg_us\":{:.3},\"t_stdev_us\":{:.3},\"p99_us\":{:.3},\"p99_9_us\":{:.3}}}",
        r.bytes, r.iters, r.t_min, r.t_max, r.t_typical, r.t_avg, r.t_stdev, r.p99, r.p99_9
    )
}

/// A bandwidth row as one JSON object on one line.
pub fn bw_json(r: &BwRow) -> String {
    let key = match r.unit {
        BwUnit::MiBps => "mib_per_s",
        BwUnit::Gbps => "gbit_per_s",
    };
    format!(
        "{{\"bytes\":{},\"iterations\":{},\"bw_peak_{key}\":{:.3},\"bw_avg_{key}\":{:.3},\"msg_rate_mpps\":{:.6}}}",
        r.bytes, r.iters, r.bw_peak, r.bw_avg, r.msg_rate_mpps
    )
}

/// The table line of either kind of row.
pub fn row_line(r: &Row) -> String {
    match r {
        Row::Lat(r) => lat_line(r),
        Row::Bw(r) => bw_line(r),
    }
}

/// The JSON object of either kind of row.
pub fn row_json(r: &Row) -> String {
    match r {
        Row::Lat(r) => lat_json(r),
        Row::Bw(r) => bw_json(r),
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
    use rdma_direct::perf::stats::{bw_row, lat_row};

    const LAT_HEADER: &str = " #bytes  #iterations  t_min[usec]  t_max[usec]  t_typical[usec]  t_avg[usec]  t_stdev[usec]  99% percentile[usec]  99.9% percentile[usec]";

    #[test]
    fn lat_header_is_perftests_columns() {
        assert_eq!(lat_header(), LAT_HEADER);
        assert_eq!(LAT_COLUMNS.len(), 9);
    }

    #[test]
    fn bw_headers_in_both_units() {
        assert_eq!(
            bw_header(BwUnit::MiBps),
            " #bytes  #iterations  BW peak[MiB/sec]  BW average[MiB/sec]  MsgRate[Mpps]"
        );
        assert_eq!(
            bw_header(BwUnit::Gbps),
            " #bytes  #iterations  BW peak[Gb/sec]  BW average[Gb/sec]  MsgRate[Mpps]"
        );
    }

    #[test]
    fn lat_lines() {
        let r = lat_row(2, 4, &[5000, 1000, 3000], 2).unwrap();
        assert_eq!(
            lat_line(&r),
            " 2       4            0.50         1.50         0.50             0.50         0.00           1.50                  1.50"
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
            " 64      103          1.00         101.00       50.50            50.50        28.87          100.00                101.00"
        );
    }

    #[test]
    fn lat_json_line() {
        let r = lat_row(2, 4, &[5000, 1000, 3000], 2).unwrap();
        assert_eq!(
            lat_json(&r),
            "{\"bytes\":2,\"iterations\":4,\"t_min_us\":0.500,\"t_max_us\":1.500,\"t_typical_us\":0.500,\"t_avg_us\":0.500,\"t_stdev_us\":0.000,\"p99_us\":1.500,\"p99_9_us\":1.500}"
        );
    }

    #[test]
    fn bw_lines_and_json() {
        let tp = [0u64, 100, 200, 300];
        let tc = [1000u64, 1050, 1100, 1900];
        let r = bw_row(65536, 4, 1, 1, &tp, &tc, BwUnit::MiBps).unwrap();
        assert_eq!(
            bw_line(&r),
            " 65536   4            170765.03         131578.95            2.105263"
        );
        const X: u64 = 777_777;
        let tp = [0, X, 100, X, 200, X, 300, X, 400, X];
        let tc = [X, X, X, 1000, X, X, X, 1500, X, 2000];
        let r = bw_row(64, 10, 2, 4, &tp, &tc, BwUnit::Gbps).unwrap();
        assert_eq!(
            bw_line(&r),
            " 64      10           2.74             2.56                5.000000"
        );
        assert_eq!(
            bw_json(&r),
            "{\"bytes\":64,\"iterations\":10,\"bw_peak_gbit_per_s\":2.738,\"bw_avg_gbit_per_s\":2.560,\"msg_rate_mpps\":5.000000}"
        );
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
