//! Reading a result file: [`RunFile::from_text`] takes this tool's schema or perftest's
//! `--out_json` (either dialect, handed to [`super::perftest`]) and checks every field; errors
//! name the line and column, or the row and field, that is wrong (field access through
//! [`super::fields::Obj`], which both readers share). Never panics.

use crate::report::json::{self as json, Value};

use super::fields::Obj;
use super::perftest::from_perftest;
use crate::perf::stats::{BwRow, BwUnit, Histogram, LatRow, HIST_BUCKETS};

use super::{Rows, RunFile};

impl RunFile {
    /// Read a result file's text: this tool's schema, or perftest's `--out_json` (either
    /// dialect). Errors say where (line and column, or row and field) but not which file; see
    /// [`read_file`](super::read_file).
    pub fn from_text(text: &str) -> Result<RunFile, String> {
        let v = json::parse(text).map_err(|e| e.to_string())?;
        if v.get("test_info").is_some() {
            return from_perftest(&v);
        }
        if !matches!(v, Value::Obj(_)) {
            return Err(format!("the file holds {}, not a result object", v.kind()));
        }
        if v.get("tool").is_none() {
            return Err(
                "not a result file: no \"tool\" (rdma-direct) and no \"test_info\" (perftest --out_json)"
                    .to_string(),
            );
        }
        from_value(&v)
    }
}

fn from_value(v: &Value) -> Result<RunFile, String> {
    let o = Obj::new(v, "")?;
    let kind = o.str("kind")?;
    if let Some(u) = v.get("units") {
        let want = match kind.as_str() {
            "latency" => vec![("latency", "usec")],
            _ => vec![("bandwidth", "MiB/s"), ("msg_rate", "Mpps")],
        };
        let u = Obj::new(u, "units")?;
        for (k, w) in want {
            if u.v.get(k).is_some() && u.str(k)? != w {
                return Err(format!(
                    "units.{k}: \"{}\" is not supported (files hold {w})",
                    u.str(k)?
                ));
            }
        }
    }
    let options = match v.get("options") {
        None => Vec::new(),
        Some(Value::Obj(kv)) => kv.clone(),
        Some(other) => {
            return Err(format!(
                "\"options\": expected an object, found {}",
                other.kind()
            ))
        }
    };
    let rows_v = match o.req("results")? {
        Value::Arr(a) => a,
        other => {
            return Err(format!(
                "\"results\": expected an array, found {}",
                other.kind()
            ))
        }
    };
    let rows = match kind.as_str() {
        "latency" => {
            let mut rows = Vec::with_capacity(rows_v.len());
            for (i, r) in rows_v.iter().enumerate() {
                rows.push(lat_point(&Obj::new(r, format!("results[{i}]"))?)?);
            }
            Rows::Lat(rows)
        }
        "bandwidth" => {
            let mut rows = Vec::with_capacity(rows_v.len());
            for (i, r) in rows_v.iter().enumerate() {
                let r = Obj::new(r, format!("results[{i}]"))?;
                rows.push(BwRow {
                    bytes: r.u64("bytes")?,
                    iters: r.u64("iterations")?,
                    bw_peak: r.f64("bw_peak")?,
                    bw_avg: r.f64("bw_avg")?,
                    msg_rate_mpps: r.f64("msg_rate")?,
                    unit: BwUnit::MiBps,
                });
            }
            Rows::Bw(rows)
        }
        other => {
            return Err(format!(
                "\"kind\": \"{other}\" is neither \"latency\" nor \"bandwidth\""
            ))
        }
    };
    Ok(RunFile {
        tool: o.str("tool")?,
        version: o.str_or("version", "")?,
        test: o.str("test")?,
        provider: o.str("provider")?,
        device: o.str("device")?,
        transport: o.str_or("transport", "")?,
        options,
        rows,
    })
}

fn lat_point(r: &Obj<'_>) -> Result<LatRow, String> {
    let mut hist = Histogram::EMPTY;
    if let Some(h) = r.v.get("histogram") {
        let at = r.name("histogram");
        let Value::Arr(h) = h else {
            return Err(format!("{at}: expected an array, found {}", h.kind()));
        };
        for (j, b) in h.iter().enumerate() {
            let bad = || format!("{at}[{j}]: expected [lo_usec, hi_usec, count]");
            let Value::Arr(t) = b else { return Err(bad()) };
            let [lo, hi, c] = t.as_slice() else {
                return Err(bad());
            };
            let (lo, hi) = (lo.as_f64().ok_or_else(bad)?, hi.as_f64().ok_or_else(bad)?);
            let count = c.as_u64().ok_or_else(bad)?;
            let k = log2_bucket(lo, hi).ok_or_else(|| {
                format!("{at}[{j}]: [{lo}, {hi}] is not a log2 bucket (2^k to 2^(k+1) ns, in microseconds)")
            })?;
            hist.counts[k] += count;
        }
    }
    Ok(LatRow {
        bytes: r.u64("bytes")?,
        iters: r.u64("iterations")?,
        t_min: r.f64("t_min")?,
        t_max: r.f64("t_max")?,
        t_typical: r.f64("t_typical")?,
        t_avg: r.f64("t_avg")?,
        t_stdev: r.f64("t_stdev")?,
        p99: r.f64("p99")?,
        p99_9: r.f64("p99_9")?,
        p99_99: r.opt_f64("p99_99")?,
        p99_999: r.opt_f64("p99_999")?,
        hist,
    })
}

/// The [`Histogram`] bucket whose edges in microseconds are `lo` and `hi` (what
/// [`Histogram::buckets`] writes), or `None` when they are not one.
fn log2_bucket(lo: f64, hi: f64) -> Option<usize> {
    (0..HIST_BUCKETS).find(|&k| {
        let lo_k = if k == 0 {
            0.0
        } else {
            (1u64 << k) as f64 / 1000.0
        };
        lo == lo_k && hi == (1u64 << (k + 1)) as f64 / 1000.0
    })
}
