//! What a run prints: before the run (once the address lines are out), the title and header
//! of perftest's latency table of half the round trip ([`table_head`]: its columns depend only
//! on the iterations, known then); at its end the table's row from the measuring end's send
//! times, then rc_pingpong's two result lines (bytes and Mbit/s, iterations and usec/iter);
//! with `--attribute` the outliers and what took the CPU ([`attribution`]).

use std::time::{Duration, Instant};

use rdma_direct::doctor::Sysfs;
use rdma_direct::noise::Watch;
use rdma_direct::perf::{stats, Away, Outliers, DEFAULT_OUTLIER_X};

use super::args::Args;
use rdma_direct::report::table;

/// What the Mbit/sec of a run on the software device is: the sim copies each message in
/// memory, so the figure says nothing of a link.
pub(super) const SIM_RATE_NOTE: &str =
    " (software device: memory copies in this process, not a link rate)";

/// The latency table's title and header line for a run of `iters` iterations (one round-trip
/// sample each), to print and flush before the run; empty when the run makes no table
/// (fewer than 3 samples: its end says so).
pub(super) fn table_head(iters: u32) -> String {
    let samples = iters as usize;
    if samples < 3 {
        return String::new();
    }
    format!(
        "latency (half round trip: consecutive sends of the measuring end, halved):\n{}\n",
        table::lat_header_for_samples(samples)
    )
}

/// The end of a run: the latency row of the measuring end's send times (closed by `end`),
/// under the header [`table_head`] printed, then rc_pingpong's result lines; `rate_note`
/// follows the Mbit/sec figure (empty on a device, [`SIM_RATE_NOTE`] on the sim).
pub(super) fn results(
    a: &Args,
    elapsed: Duration,
    stamps: &[Instant],
    end: Instant,
    rate_note: &str,
) -> String {
    let mut out = latency_row(a.size as u64, a.iters, &round_trips(stamps, end));
    let usec = elapsed.as_secs_f64() * 1e6;
    let bytes = a.size as u64 * u64::from(a.iters) * 2;
    out.push_str(&format!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec{rate_note}\n",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    ));
    out.push_str(&format!(
        "{} iters in {:.2} seconds = {:.2} usec/iter\n",
        a.iters,
        usec / 1e6,
        usec / f64::from(a.iters)
    ));
    out
}

/// The round trips (ns) of the measuring end's send times, the last closed by `end`.
fn round_trips(stamps: &[Instant], end: Instant) -> Vec<u64> {
    let mut samples: Vec<u64> = stamps
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_nanos() as u64)
        .collect();
    if let Some(last) = stamps.last() {
        samples.push(end.duration_since(*last).as_nanos() as u64);
    }
    samples
}

/// `--attribute`'s lines: the outliers of the half round trips ([`Outliers`]: `away` holds
/// each send's mark, the one of send `k` closing round trip `k - 1`) and what the kernel
/// counted on this thread's CPU ([`Watch`], started before the loop).
pub(super) fn attribution(
    stamps: &[Instant],
    end: Instant,
    away: Option<&(Away, Vec<u64>)>,
    watch: Option<Watch>,
    bytes: u64,
) -> String {
    let (Some((w, marks)), Some(watch)) = (away, watch) else {
        return String::new();
    };
    let mut away_ns: Vec<u64> = marks.iter().skip(1).copied().collect();
    w.to_ns(&mut away_ns);
    let half: Vec<u64> = round_trips(stamps, end).iter().map(|s| s / 2).collect();
    let o = Outliers::find(bytes, &half, &away_ns, DEFAULT_OUTLIER_X, 2);
    let sys = Sysfs::system();
    format!(
        "outliers: {}\npolling CPU over the run: {}\n",
        o.summary(),
        watch.finish(&sys, &[]).likely()
    )
}

/// perftest's latency row of round-trip `samples` (ns), reported as half the round trip;
/// with fewer than 3 samples a line that says so.
fn latency_row(bytes: u64, iters: u32, samples: &[u64]) -> String {
    match stats::lat_row(bytes, u64::from(iters), samples, 2) {
        Ok(r) => format!("{}\n", table::lat_line(&r)),
        Err(e) => format!("latency: no table ({e})\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_is_perftests_table_of_half_the_round_trip() {
        // 10 round trips of 2..=20 us (1..=10 us halved): perftest drops the two largest, so
        // 8 are kept (1..=8 us); the median of an even count is the mean of the middle two.
        let s: Vec<u64> = (1..=10u64).rev().map(|k| 2000 * k).collect();
        let head = table_head(10);
        let lines: Vec<&str> = head.lines().collect();
        assert!(lines[0].starts_with("latency (half round trip"), "{head}");
        assert_eq!(lines[1], table::lat_header());
        let t = latency_row(2, 10, &s);
        let row: Vec<&str> = t.split_whitespace().collect();
        assert_eq!(
            row,
            ["2", "10", "1.00", "9.00", "4.50", "4.50", "2.29", "9.00", "9.00"]
        );
        assert_eq!(table_head(2), "");
        assert!(latency_row(2, 2, &[1000, 2000]).contains("no table"));
    }

    /// The header printed before the run has the row's columns at every count around the
    /// deep percentiles' thresholds (10 000 and 100 000 kept samples): `-n 10003` printed 10
    /// values under 9 titles.
    #[test]
    fn header_and_row_have_the_same_columns_at_every_count() {
        for n in (9_990..10_010).chain(99_990..100_010) {
            let s: Vec<u64> = (0..u64::from(n)).map(|k| 1000 + k % 977).collect();
            let head = table_head(n);
            let header = head.lines().nth(1).expect("a header line");
            let row = latency_row(8, n, &s);
            let titles = header.matches("[usec]").count() + 2;
            let cells = row.split_whitespace().count();
            assert_eq!(titles, cells, "-n {n}:\n{header}\n{row}");
            // Each cell starts under its title.
            for title in ["99.9% percentile[usec]", "99.99% percentile[usec]"] {
                if let Some(at) = header.find(title) {
                    assert_ne!(&row[at..at + 1], " ", "-n {n}:\n{header}\n{row}");
                }
            }
        }
    }
}
