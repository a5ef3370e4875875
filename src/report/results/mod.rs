//! Result files: one JSON file holds one run (one test on one device, one row per message
//! size), written by `perf --json FILE` and read by `rdma-direct plot`.
//!
//! The schema (every key always written, in this order; `null` stands for a value that is not
//! a finite number):
//!
//! ```text
//! {
//!   "tool": "rdma-direct",          who measured ("perftest" for a file read from perftest)
//!   "version": "0.1.0",             the tool's version ("" when unknown)
//!   "test": "write_lat",            write_lat, send_lat, read_lat, atomic_lat, write_bw, ...
//!   "kind": "latency",              "latency" or "bandwidth": which row shape follows
//!   "provider": "mlx5",             mlx5 | verbs | sim
//!   "device": "mlx5_0",
//!   "transport": "RC",              RC | UC | UD
//!   "units": {"latency": "usec"},   or {"bandwidth": "MiB/s", "msg_rate": "Mpps"}
//!   "options": {"iterations": 1000, ...},   the run's options, free-form key -> value
//!   "results": [ one row per message size, ascending ]
//! }
//! latency row:   {"bytes", "iterations", "t_min", "t_max", "t_typical", "t_avg", "t_stdev",
//!                 "p99", "p99_9"} in microseconds (perftest's columns, same rules), plus
//!                 "p99_99" and "p99_999" when the sample count allows them, and
//!                 "histogram": [[lo_usec, hi_usec, count], ...] when one was taken
//! bandwidth row: {"bytes", "iterations", "bw_peak", "bw_avg"} in MiB/s (2^20 bytes per
//!                 second, whatever the table printed) and "msg_rate" in millions of messages
//!                 per second
//! ```
//!
//! [`RunFile::from_text`] also reads perftest's `--out_json` files: both the
//! dialect perftest 4.5 writes (bare keys and values, trailing commas: not JSON) and the
//! standard JSON of perftest 24.01 and later. perftest opens the file with `O_TRUNC` for every
//! report, so after `-a` only the last size (8 MiB) is left: one size per file. Run perftest
//! once per size with `--out_json_file=NAME` and give `plot` all the files; `plot` joins
//! files of the same tool, test, provider and device into one curve. perftest does not
//! record its bandwidth unit: files are read as MiB/s, so a run with `--report_gbits` must
//! not be plotted beside others.
//!
//! [`report::from_report`] makes the file of a `perf` measurement; [`write_file`] / [`read_file`] store
//! and load it; [`chart`] draws runs as charts.
//!
//! Reading never panics: a malformed or truncated file gives an error naming the file and the
//! line and column, or the row and field, that is wrong.

pub mod chart;
mod fields;
mod perftest;
mod read;
mod report;
mod write;

use std::path::Path;

use crate::perf::stats::{BwRow, LatRow};

use crate::report::json::Value;

pub use report::from_report;

/// The tool name written in `"tool"`.
pub const TOOL: &str = "rdma-direct";

/// The rows of a run: all latency or all bandwidth. They are the rows `perf` measures
/// ([`LatRow`], [`BwRow`]); in a file the bandwidth is always in MiB/s (`unit` reads
/// [`BwUnit::MiBps`](crate::perf::stats::BwUnit::MiBps)) and a latency row's histogram is empty when none was taken.
#[derive(Clone, Debug, PartialEq)]
pub enum Rows {
    /// A latency test.
    Lat(Vec<LatRow>),
    /// A bandwidth test.
    Bw(Vec<BwRow>),
}

impl Rows {
    /// `"latency"` or `"bandwidth"`, as in the file's `"kind"`.
    pub fn kind(&self) -> &'static str {
        match self {
            Rows::Lat(_) => "latency",
            Rows::Bw(_) => "bandwidth",
        }
    }
    /// The message sizes, in row order.
    pub fn sizes(&self) -> Vec<u64> {
        match self {
            Rows::Lat(r) => r.iter().map(|p| p.bytes).collect(),
            Rows::Bw(r) => r.iter().map(|p| p.bytes).collect(),
        }
    }
}

/// One run: one file.
#[derive(Clone, Debug, PartialEq)]
pub struct RunFile {
    /// Who measured: [`TOOL`] or `"perftest"`.
    pub tool: String,
    /// The tool's version, `""` when unknown.
    pub version: String,
    /// Test name (`write_lat`, `send_bw`, ...).
    pub test: String,
    /// `mlx5`, `verbs` or `sim`.
    pub provider: String,
    /// Device name.
    pub device: String,
    /// `RC`, `UC` or `UD`.
    pub transport: String,
    /// The run's options, in the order they are written.
    pub options: Vec<(String, Value)>,
    /// One row per message size.
    pub rows: Rows,
}

impl RunFile {
    /// A run of this crate's tool and version with no options yet.
    pub fn new(test: &str, provider: &str, device: &str, transport: &str, rows: Rows) -> RunFile {
        RunFile {
            tool: TOOL.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            test: test.to_string(),
            provider: provider.to_string(),
            device: device.to_string(),
            transport: transport.to_string(),
            options: Vec::new(),
            rows,
        }
    }
}

/// Read `path` ([`RunFile::from_text`]); errors start with the path.
pub fn read_file(path: &Path) -> Result<RunFile, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{}: not UTF-8 text (invalid byte at offset {})",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })?;
    RunFile::from_text(&text).map_err(|e| {
        // `bench` writes files of its own schema, which a missing "kind" reveals first.
        let hint = if text.contains("\"tool\":\"rdma-direct bench") {
            " (this is a `bench` result file, not a perf run: the batching report, bench::batching, draws it)"
        } else {
            ""
        };
        format!("{}: {e}{hint}", path.display())
    })
}

/// Write `run` to `path` ([`RunFile::to_json`]); errors start with the path.
pub fn write_file(path: &Path, run: &RunFile) -> Result<(), String> {
    std::fs::write(path, run.to_json()).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::perf::stats::{BwUnit, Histogram};

    fn lat_run() -> RunFile {
        // 2^19 ns = 524.288 us: bucket 19 is [524.288, 1048.576) us.
        let mut hist = Histogram::EMPTY;
        hist.counts[19] = 99_990;
        hist.counts[20] = 8;
        let mut r = RunFile::new(
            "write_lat",
            "sim",
            "sim0",
            "RC",
            Rows::Lat(vec![
                LatRow {
                    bytes: 2,
                    iters: 1000,
                    t_min: 0.412,
                    t_max: 3.5,
                    t_typical: 0.5,
                    t_avg: 0.5123456789,
                    t_stdev: 0.1,
                    p99: 1.25,
                    p99_9: 2.0,
                    p99_99: None,
                    p99_999: None,
                    hist: Histogram::EMPTY,
                },
                LatRow {
                    bytes: 8_388_608,
                    iters: 100_000,
                    t_min: 700.0,
                    t_max: 1e4,
                    t_typical: 712.25,
                    t_avg: 720.0,
                    t_stdev: f64::NAN,
                    p99: 800.0,
                    p99_9: 900.0,
                    p99_99: Some(950.5),
                    p99_999: Some(999.0),
                    hist,
                },
            ]),
        );
        r.options = vec![
            ("iterations".into(), Value::Num(1000.0)),
            ("inline".into(), Value::Num(220.0)),
            ("note".into(), Value::Str("a \"quoted\"\nline".into())),
        ];
        r
    }

    #[test]
    fn latency_round_trip() {
        let r = lat_run();
        let text = r.to_json();
        let back = RunFile::from_text(&text).unwrap();
        // NaN != NaN: compare the non-finite field apart.
        let (Rows::Lat(a), Rows::Lat(b)) = (&r.rows, &back.rows) else {
            panic!("kind changed")
        };
        assert!(b[1].t_stdev.is_nan());
        let mut b = b.clone();
        b[1].t_stdev = a[1].t_stdev;
        assert_eq!(a[0], b[0]);
        assert_eq!(
            (
                back.tool.as_str(),
                back.test.as_str(),
                back.provider.as_str()
            ),
            ("rdma-direct", "write_lat", "sim")
        );
        assert_eq!(back.options, r.options);
        assert_eq!(back.version, env!("CARGO_PKG_VERSION"));
        assert_eq!(
            text,
            RunFile::from_text(&text).unwrap().to_json(),
            "stable bytes"
        );
        assert!(text.contains("\"t_stdev\": null"));
        assert!(
            text.contains("\"histogram\": [[524.288, 1048.576, 99990], [1048.576, 2097.152, 8]]")
        );
    }

    #[test]
    fn bandwidth_round_trip_and_layout() {
        let r = RunFile::new(
            "write_bw",
            "verbs",
            "rxe0",
            "UC",
            Rows::Bw(vec![BwRow {
                bytes: 65536,
                iters: 5000,
                bw_peak: 1234.5,
                bw_avg: 1000.25,
                msg_rate_mpps: 0.016004,
                unit: BwUnit::MiBps,
            }]),
        );
        let text = r.to_json();
        assert_eq!(RunFile::from_text(&text).unwrap(), r);
        let want = format!(
            "{{\n  \"tool\": \"rdma-direct\",\n  \"version\": \"{}\",\n  \"test\": \"write_bw\",\n  \"kind\": \"bandwidth\",\n  \"provider\": \"verbs\",\n  \"device\": \"rxe0\",\n  \"transport\": \"UC\",\n  \"units\": {{\"bandwidth\": \"MiB/s\", \"msg_rate\": \"Mpps\"}},\n  \"options\": {{}},\n  \"results\": [\n    {{\"bytes\": 65536, \"iterations\": 5000, \"bw_peak\": 1234.5, \"bw_avg\": 1000.25, \"msg_rate\": 0.016004}}\n  ]\n}}\n",
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(text, want);
        let empty = RunFile::new("send_bw", "sim", "sim0", "RC", Rows::Bw(vec![]));
        assert_eq!(RunFile::from_text(&empty.to_json()).unwrap(), empty);
    }

    #[test]
    fn truncated_and_garbage_files_give_positioned_errors() {
        let text = lat_run().to_json();
        for end in 0..text.trim_end().len() {
            let Some(t) = text.get(..end) else { continue };
            match RunFile::from_text(t) {
                Ok(_) => panic!("a prefix of {end} bytes was accepted"),
                Err(e) => assert!(
                    e.contains("line ") || e.contains("missing") || e.contains("not a result"),
                    "{end}: {e}"
                ),
            }
        }
        let e = RunFile::from_text("\u{0}\u{1}garbage").unwrap_err();
        assert!(e.starts_with("line 1, column 1:"), "{e}");
        let e = RunFile::from_text("[1, 2]").unwrap_err();
        assert!(e.contains("an array, not a result object"), "{e}");
        let e = RunFile::from_text("{\"a\": 1}").unwrap_err();
        assert!(e.contains("not a result file"), "{e}");
    }

    #[test]
    fn schema_errors_name_the_field() {
        let ok = lat_run().to_json();
        let bad = ok.replacen("\"t_min\": 0.412", "\"t_min\": \"fast\"", 1);
        let e = RunFile::from_text(&bad).unwrap_err();
        assert_eq!(e, "results[0].t_min: expected a number, found a string");
        let bad = ok.replacen("\"bytes\": 2,", "\"bytes\": -2,", 1);
        let e = RunFile::from_text(&bad).unwrap_err();
        assert!(
            e.starts_with("results[0].bytes: expected a whole number"),
            "{e}"
        );
        let bad = ok.replacen("\"kind\": \"latency\"", "\"kind\": \"power\"", 1);
        assert!(RunFile::from_text(&bad).unwrap_err().contains("\"power\""));
        let bad = ok.replacen("\"usec\"", "\"cycles\"", 1);
        assert!(RunFile::from_text(&bad)
            .unwrap_err()
            .contains("units.latency"));
        let bad = ok.replacen("[524.288, 1048.576, 99990]", "[524.288, 1048.576]", 1);
        let e = RunFile::from_text(&bad).unwrap_err();
        assert_eq!(
            e,
            "results[1].histogram[0]: expected [lo_usec, hi_usec, count]"
        );
        let bad = ok.replacen("[524.288, 1048.576, 99990]", "[512, 1024, 99990]", 1);
        let e = RunFile::from_text(&bad).unwrap_err();
        assert!(
            e.starts_with("results[1].histogram[0]: [512, 1024] is not a log2 bucket"),
            "{e}"
        );
        let bad = ok.replacen("\"device\": \"sim0\",\n", "", 1);
        assert_eq!(RunFile::from_text(&bad).unwrap_err(), "\"device\": missing");
    }
}
