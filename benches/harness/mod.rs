//! A small std-only bench harness shared by the benches (`harness = false`).
//!
//! A bench case is a closure that performs one *run* of `ops` operations and returns the
//! time of the part that counts (so untimed set-up or device work can be left out). The
//! harness warms up, repeats the run, and reports per-operation figures: median, min, max
//! and the spread between the 10th and 90th percentile of the runs. It prints a table for
//! people and one JSON line (prefixed `JSON `) for scripts.
#![allow(dead_code)]

use std::time::Duration;

/// One measured case.
#[derive(Clone, Debug)]
pub struct Stats {
    /// Case name.
    pub name: String,
    /// Operations per run.
    pub ops: u64,
    /// ns per operation of each run, sorted.
    pub per_op_ns: Vec<f64>,
}

impl Stats {
    fn pct(&self, p: f64) -> f64 {
        let n = self.per_op_ns.len();
        let i = ((p * (n - 1) as f64).round() as usize).min(n - 1);
        self.per_op_ns[i]
    }
    /// Median ns per op.
    pub fn median(&self) -> f64 {
        self.pct(0.5)
    }
    /// Fastest run.
    pub fn min(&self) -> f64 {
        self.per_op_ns[0]
    }
    /// Slowest run.
    pub fn max(&self) -> f64 {
        self.per_op_ns[self.per_op_ns.len() - 1]
    }
    /// p90 - p10.
    pub fn spread(&self) -> f64 {
        self.pct(0.9) - self.pct(0.1)
    }
}

/// Settings from the environment: `BENCH_RUNS` (default 30), `BENCH_WARMUP` (default 5).
pub fn runs() -> (usize, usize) {
    let get = |k: &str, d: usize| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(d)
    };
    (get("BENCH_WARMUP", 5), get("BENCH_RUNS", 30).max(1))
}

/// Warm up, then time `runs` runs of `run` (each returning the timed part of `ops` ops).
pub fn measure(name: &str, ops: u64, mut run: impl FnMut() -> Duration) -> Stats {
    let (warmup, runs) = runs();
    for _ in 0..warmup {
        std::hint::black_box(run());
    }
    let mut per_op_ns: Vec<f64> = (0..runs)
        .map(|_| run().as_nanos() as f64 / ops as f64)
        .collect();
    per_op_ns.sort_by(|a, b| a.total_cmp(b));
    Stats {
        name: name.to_string(),
        ops,
        per_op_ns,
    }
}

/// Print the table and the JSON line.
pub fn report(title: &str, note: &str, cases: &[Stats]) {
    println!("# {title}");
    println!("# {note}");
    println!(
        "{:<36} {:>8} {:>12} {:>10} {:>10} {:>12}",
        "case", "ops/run", "median[ns]", "min[ns]", "max[ns]", "p90-p10[ns]"
    );
    for s in cases {
        println!(
            "{:<36} {:>8} {:>12.2} {:>10.2} {:>10.2} {:>12.2}",
            s.name,
            s.ops,
            s.median(),
            s.min(),
            s.max(),
            s.spread()
        );
    }
    let items: Vec<String> = cases
        .iter()
        .map(|s| {
            format!(
                "{{\"case\":\"{}\",\"ops\":{},\"median_ns\":{:.3},\"min_ns\":{:.3},\"max_ns\":{:.3},\"spread_ns\":{:.3}}}",
                s.name,
                s.ops,
                s.median(),
                s.min(),
                s.max(),
                s.spread()
            )
        })
        .collect();
    println!(
        "JSON {{\"bench\":\"{title}\",\"note\":\"{note}\",\"cases\":[{}]}}",
        items.join(",")
    );
}
