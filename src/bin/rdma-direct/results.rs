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
//! [`RunFile::from_text`] also reads perftest's `--out_json` files ([`from_perftest`]): both the
//! dialect perftest 4.5 writes (bare keys and values, trailing commas: not JSON) and the
//! standard JSON of perftest 24.01 and later. perftest opens the file with `O_TRUNC` for every
//! report, so after `-a` only the last size (8 MiB) is left: one size per file. Run perftest
//! once per size with `--out_json_file=NAME` and give `plot` all the files; `plot` joins
//! files of the same tool, test, provider and device into one curve. perftest does not
//! record its bandwidth unit: files are read as MiB/s, so a run with `--report_gbits` must
//! not be plotted beside others.
//!
//! [`from_report`] makes the file of a `perf` measurement; [`write_file`] / [`read_file`] store
//! and load it.
//!
//! Reading never panics: a malformed or truncated file gives an error naming the file and the
//! line and column, or the row and field, that is wrong.

use std::path::Path;

use rdma_direct::perf::stats::BwUnit;
use rdma_direct::perf::{Params, Report, Row};

use crate::json_value::{self as json, Value};

/// The tool name written in `"tool"`.
pub const TOOL: &str = "rdma-direct";

/// One latency row (microseconds).
#[derive(Clone, Debug, PartialEq)]
pub struct LatPoint {
    /// Message size.
    pub bytes: u64,
    /// Iterations run.
    pub iterations: u64,
    /// Smallest sample.
    pub t_min: f64,
    /// Second-largest raw sample (perftest's rule).
    pub t_max: f64,
    /// Median.
    pub t_typical: f64,
    /// Mean.
    pub t_avg: f64,
    /// Population standard deviation.
    pub t_stdev: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p99_9: f64,
    /// 99.99th percentile, when the sample count allows.
    pub p99_99: Option<f64>,
    /// 99.999th percentile, when the sample count allows.
    pub p99_999: Option<f64>,
    /// Histogram buckets, empty when none was taken.
    pub histogram: Vec<Bucket>,
}

/// One histogram bucket: `count` samples in `[lo, hi)` microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bucket {
    /// Lower edge, microseconds.
    pub lo: f64,
    /// Upper edge, microseconds.
    pub hi: f64,
    /// Samples in the bucket.
    pub count: u64,
}

/// One bandwidth row.
#[derive(Clone, Debug, PartialEq)]
pub struct BwPoint {
    /// Message size.
    pub bytes: u64,
    /// Iterations run.
    pub iterations: u64,
    /// Peak bandwidth, MiB/s.
    pub bw_peak: f64,
    /// Average bandwidth, MiB/s.
    pub bw_avg: f64,
    /// Message rate, millions per second.
    pub msg_rate: f64,
}

/// The rows of a run: all latency or all bandwidth.
#[derive(Clone, Debug, PartialEq)]
pub enum Rows {
    /// A latency test.
    Lat(Vec<LatPoint>),
    /// A bandwidth test.
    Bw(Vec<BwPoint>),
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
    #[allow(dead_code)] // for perf --json
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

    /// The file's text: the schema of the module doc, one row per line, ending in a newline.
    /// The same run always gives the same bytes.
    pub fn to_json(&self) -> String {
        let mut s = String::from("{\n");
        let mut field = |k: &str, v: String| {
            s.push_str("  ");
            json::write_str(&mut s, k);
            s.push_str(": ");
            s.push_str(&v);
            s.push_str(",\n");
        };
        let q = |v: &str| Value::Str(v.to_string()).to_json();
        field("tool", q(&self.tool));
        field("version", q(&self.version));
        field("test", q(&self.test));
        field("kind", q(self.rows.kind()));
        field("provider", q(&self.provider));
        field("device", q(&self.device));
        field("transport", q(&self.transport));
        let units = match self.rows {
            Rows::Lat(_) => r#"{"latency": "usec"}"#,
            Rows::Bw(_) => r#"{"bandwidth": "MiB/s", "msg_rate": "Mpps"}"#,
        };
        field("units", units.to_string());
        field("options", Value::Obj(self.options.clone()).to_json());
        let rows: Vec<String> = match &self.rows {
            Rows::Lat(r) => r.iter().map(lat_json).collect(),
            Rows::Bw(r) => r.iter().map(bw_json).collect(),
        };
        s.push_str("  \"results\": [");
        for (i, r) in rows.iter().enumerate() {
            s.push_str(if i == 0 { "\n    " } else { ",\n    " });
            s.push_str(r);
        }
        s.push_str(if rows.is_empty() {
            "]\n}\n"
        } else {
            "\n  ]\n}\n"
        });
        s
    }

    /// Read a result file's text: this tool's schema, or perftest's `--out_json` (either
    /// dialect). Errors say where (line and column, or row and field) but not which file; see
    /// [`read_file`].
    pub fn from_text(text: &str) -> Result<RunFile, String> {
        let v = match json::parse(text) {
            Ok(v) => v,
            Err(strict) => match json::parse_relaxed(text) {
                Ok(v) if v.get("test_info").is_some() => v,
                // Report the reading that got further: it is the one that matches the file.
                Err(relaxed) if relaxed.offset > strict.offset => return Err(relaxed.to_string()),
                _ => return Err(strict.to_string()),
            },
        };
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

/// The file of a finished measurement: `o` is what was asked, `r` what ran. The options are
/// perftest's knobs under their long names (`iterations`, `inline`, `post_list`, `cq_mod`,
/// `port`, `gid_index`), what the run set up (`threads`, `mtu`, `max_inline`) and
/// `table_unit` (the bandwidth unit the table printed; the file always holds MiB/s).
#[allow(dead_code)] // for perf --json
pub fn from_report(o: &Params, r: &Report) -> RunFile {
    let lat = r
        .rows
        .iter()
        .filter_map(|row| match row {
            Row::Lat(l) => Some(LatPoint {
                bytes: l.bytes,
                iterations: l.iters,
                t_min: l.t_min,
                t_max: l.t_max,
                t_typical: l.t_typical,
                t_avg: l.t_avg,
                t_stdev: l.t_stdev,
                p99: l.p99,
                p99_9: l.p99_9,
                p99_99: None,
                p99_999: None,
                histogram: Vec::new(),
            }),
            Row::Bw(_) => None,
        })
        .collect();
    let bw = r
        .rows
        .iter()
        .filter_map(|row| match row {
            Row::Bw(b) => {
                let to_mib = b.unit.bytes_per_unit() / BwUnit::MiBps.bytes_per_unit();
                Some(BwPoint {
                    bytes: b.bytes,
                    iterations: b.iters,
                    bw_peak: b.bw_peak * to_mib,
                    bw_avg: b.bw_avg * to_mib,
                    msg_rate: b.msg_rate_mpps,
                })
            }
            Row::Lat(_) => None,
        })
        .collect();
    let rows = if o.test.is_lat() {
        Rows::Lat(lat)
    } else {
        Rows::Bw(bw)
    };
    let mut f = RunFile::new(
        o.test.name(),
        &r.info.provider.to_string(),
        &r.info.device,
        &o.qp_type.to_string(),
        rows,
    );
    let n = |v: u32| Value::Num(f64::from(v));
    f.options = vec![
        ("iterations".into(), n(o.iters)),
        ("inline".into(), n(o.inline)),
        ("post_list".into(), n(o.post_list)),
        ("cq_mod".into(), n(o.cq_mod)),
        ("port".into(), n(u32::from(o.port))),
        ("gid_index".into(), n(u32::from(o.gid_index))),
        ("threads".into(), n(if r.info.two_threads { 2 } else { 1 })),
        ("mtu".into(), n(r.info.mtu)),
        ("max_inline".into(), n(r.info.max_inline)),
        (
            "table_unit".into(),
            Value::Str(
                match o.unit {
                    BwUnit::MiBps => "MiB/s",
                    BwUnit::Gbps => "Gb/s",
                }
                .to_string(),
            ),
        ),
    ];
    f
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
    RunFile::from_text(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Write `run` to `path` ([`RunFile::to_json`]); errors start with the path.
#[allow(dead_code)] // for perf --json
pub fn write_file(path: &Path, run: &RunFile) -> Result<(), String> {
    std::fs::write(path, run.to_json()).map_err(|e| format!("{}: {e}", path.display()))
}

fn lat_json(p: &LatPoint) -> String {
    let n = json::num;
    let mut s = format!(
        "{{\"bytes\": {}, \"iterations\": {}, \"t_min\": {}, \"t_max\": {}, \"t_typical\": {}, \"t_avg\": {}, \"t_stdev\": {}, \"p99\": {}, \"p99_9\": {}",
        p.bytes,
        p.iterations,
        n(p.t_min),
        n(p.t_max),
        n(p.t_typical),
        n(p.t_avg),
        n(p.t_stdev),
        n(p.p99),
        n(p.p99_9)
    );
    if let Some(v) = p.p99_99 {
        s.push_str(&format!(", \"p99_99\": {}", n(v)));
    }
    if let Some(v) = p.p99_999 {
        s.push_str(&format!(", \"p99_999\": {}", n(v)));
    }
    if !p.histogram.is_empty() {
        s.push_str(", \"histogram\": [");
        for (i, b) in p.histogram.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&format!("[{}, {}, {}]", n(b.lo), n(b.hi), b.count));
        }
        s.push(']');
    }
    s.push('}');
    s
}

fn bw_json(p: &BwPoint) -> String {
    let n = json::num;
    format!(
        "{{\"bytes\": {}, \"iterations\": {}, \"bw_peak\": {}, \"bw_avg\": {}, \"msg_rate\": {}}}",
        p.bytes,
        p.iterations,
        n(p.bw_peak),
        n(p.bw_avg),
        n(p.msg_rate)
    )
}

/// Field access with errors that name the field.
struct Obj<'a> {
    v: &'a Value,
    at: String,
}

impl<'a> Obj<'a> {
    fn new(v: &'a Value, at: impl Into<String>) -> Result<Obj<'a>, String> {
        let at = at.into();
        match v {
            Value::Obj(_) => Ok(Obj { v, at }),
            other => Err(format!("{at}: expected an object, found {}", other.kind())),
        }
    }
    fn name(&self, key: &str) -> String {
        if self.at.is_empty() {
            format!("\"{key}\"")
        } else {
            format!("{}.{key}", self.at)
        }
    }
    fn req(&self, key: &str) -> Result<&'a Value, String> {
        self.v
            .get(key)
            .ok_or_else(|| format!("{}: missing", self.name(key)))
    }
    fn str(&self, key: &str) -> Result<String, String> {
        match self.req(key)? {
            Value::Str(s) => Ok(s.clone()),
            o => Err(format!(
                "{}: expected a string, found {}",
                self.name(key),
                o.kind()
            )),
        }
    }
    fn str_or(&self, key: &str, default: &str) -> Result<String, String> {
        match self.v.get(key) {
            None => Ok(default.to_string()),
            Some(_) => self.str(key),
        }
    }
    /// A number; `null` (what the writer puts for a non-finite value) reads as NaN.
    fn f64(&self, key: &str) -> Result<f64, String> {
        match self.req(key)? {
            Value::Num(v) => Ok(*v),
            Value::Null => Ok(f64::NAN),
            o => Err(format!(
                "{}: expected a number, found {}",
                self.name(key),
                o.kind()
            )),
        }
    }
    fn opt_f64(&self, key: &str) -> Result<Option<f64>, String> {
        match self.v.get(key) {
            None => Ok(None),
            Some(_) => self.f64(key).map(Some),
        }
    }
    fn u64(&self, key: &str) -> Result<u64, String> {
        let v = self.req(key)?;
        v.as_u64().ok_or_else(|| {
            format!(
                "{}: expected a whole number from 0 to 2^53, found {}",
                self.name(key),
                match v {
                    Value::Num(x) => x.to_string(),
                    o => o.kind().to_string(),
                }
            )
        })
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
                rows.push(BwPoint {
                    bytes: r.u64("bytes")?,
                    iterations: r.u64("iterations")?,
                    bw_peak: r.f64("bw_peak")?,
                    bw_avg: r.f64("bw_avg")?,
                    msg_rate: r.f64("msg_rate")?,
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

fn lat_point(r: &Obj<'_>) -> Result<LatPoint, String> {
    let mut histogram = Vec::new();
    if let Some(h) = r.v.get("histogram") {
        let at = r.name("histogram");
        let Value::Arr(h) = h else {
            return Err(format!("{at}: expected an array, found {}", h.kind()));
        };
        for (j, b) in h.iter().enumerate() {
            let bad = || format!("{at}[{j}]: expected [lo_usec, hi_usec, count]");
            let Value::Arr(t) = b else { return Err(bad()) };
            match t.as_slice() {
                [lo, hi, c] => histogram.push(Bucket {
                    lo: lo.as_f64().ok_or_else(bad)?,
                    hi: hi.as_f64().ok_or_else(bad)?,
                    count: c.as_u64().ok_or_else(bad)?,
                }),
                _ => return Err(bad()),
            }
        }
    }
    Ok(LatPoint {
        bytes: r.u64("bytes")?,
        iterations: r.u64("iterations")?,
        t_min: r.f64("t_min")?,
        t_max: r.f64("t_max")?,
        t_typical: r.f64("t_typical")?,
        t_avg: r.f64("t_avg")?,
        t_stdev: r.f64("t_stdev")?,
        p99: r.f64("p99")?,
        p99_9: r.f64("p99_9")?,
        p99_99: r.opt_f64("p99_99")?,
        p99_999: r.opt_f64("p99_999")?,
        histogram,
    })
}

/// A perftest `--out_json` document (parsed by [`json::parse_relaxed`]) as a one-row run.
///
/// perftest writes `{"test_info": {...}, "results": {...}}`. `test_info.test` is built as
/// `<verb>_[<atomic op>_][Bidirectional_][Post_List_](BW|Latency)_[forwarding_][Multicast_]Test`
/// with verb `Send`, `RDMA_Write`, `RDMA_Read` or `Atomic`; `Device`, `Connection_type`
/// (RC, UC, UD, ...) and the other `test_info` keys (`Mtu`, `TX_depth`, `Max_inline_data`,
/// `CQ_Moderation`, ...) become options. `results` of a latency test: `MsgSize`,
/// `n_iterations`, `t_min`, `t_max`, `t_typical`, `t_avg`, `t_stdev`, `percentile_99`,
/// `percentile_99.9` (usec); of a bandwidth test: `MsgSize`, `n_iterations`, `BW_peak`,
/// `BW_average`, `MsgRate` (Mpps). Reports that hold only one figure (`--output`) or a
/// duration run (`-D`: `t_avg`, `tps_average`) are refused: they have no curve to draw.
pub fn from_perftest(v: &Value) -> Result<RunFile, String> {
    let info = Obj::new(v.get("test_info").unwrap_or(&Value::Null), "test_info")?;
    let res = Obj::new(
        v.get("results")
            .ok_or("perftest file without \"results\" (the run did not finish?)")?,
        "results",
    )?;
    let name = info.str("test")?;
    let verb = if name.starts_with("RDMA_Write_") {
        "write"
    } else if name.starts_with("RDMA_Read_") {
        "read"
    } else if name.starts_with("Send_") {
        "send"
    } else if name.starts_with("Atomic_") {
        "atomic"
    } else {
        return Err(format!(
            "test_info.test: \"{name}\" is not a perftest RDMA test (Send_, RDMA_Write_, RDMA_Read_, Atomic_)"
        ));
    };
    let lat = name.contains("_Latency_");
    if !lat && !name.contains("_BW_") {
        return Err(format!(
            "test_info.test: \"{name}\" is neither a _Latency_ nor a _BW_ test"
        ));
    }
    for only in ["avg_lat", "bw_avg", "msgRate_avg", "tps_average"] {
        if res.v.get(only).is_some() {
            return Err(format!(
                "results.{only}: this perftest report holds a single figure (--output or -D duration mode); rerun perftest without them to get a full row"
            ));
        }
    }
    let bytes = res.u64("MsgSize")?;
    let iterations = res.u64("n_iterations")?;
    let rows = if lat {
        Rows::Lat(vec![LatPoint {
            bytes,
            iterations,
            t_min: res.f64("t_min")?,
            t_max: res.f64("t_max")?,
            t_typical: res.f64("t_typical")?,
            t_avg: res.f64("t_avg")?,
            t_stdev: res.f64("t_stdev")?,
            p99: res.f64("percentile_99")?,
            p99_9: res.f64("percentile_99.9")?,
            p99_99: None,
            p99_999: None,
            histogram: Vec::new(),
        }])
    } else {
        Rows::Bw(vec![BwPoint {
            bytes,
            iterations,
            bw_peak: res.f64("BW_peak")?,
            bw_avg: res.f64("BW_average")?,
            msg_rate: res.f64("MsgRate")?,
        }])
    };
    let mut options: Vec<(String, Value)> = Vec::new();
    if let Value::Obj(kv) = info.v {
        for (k, val) in kv {
            if !matches!(k.as_str(), "test" | "Device" | "Connection_type") {
                options.push((k.clone(), val.clone()));
            }
        }
    }
    for flag in ["Bidirectional", "Post_List"] {
        if name.contains(&format!("_{flag}_")) {
            options.push((flag.to_lowercase(), Value::Bool(true)));
        }
    }
    Ok(RunFile {
        tool: "perftest".to_string(),
        version: String::new(),
        test: format!("{verb}_{}", if lat { "lat" } else { "bw" }),
        // perftest drives the device through libibverbs (libmlx5 on a ConnectX).
        provider: "verbs".to_string(),
        device: info.str("Device")?,
        transport: info.str_or("Connection_type", "")?,
        options,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat_run() -> RunFile {
        let mut r = RunFile::new(
            "write_lat",
            "sim",
            "sim0",
            "RC",
            Rows::Lat(vec![
                LatPoint {
                    bytes: 2,
                    iterations: 1000,
                    t_min: 0.412,
                    t_max: 3.5,
                    t_typical: 0.5,
                    t_avg: 0.5123456789,
                    t_stdev: 0.1,
                    p99: 1.25,
                    p99_9: 2.0,
                    p99_99: None,
                    p99_999: None,
                    histogram: vec![],
                },
                LatPoint {
                    bytes: 8_388_608,
                    iterations: 100_000,
                    t_min: 700.0,
                    t_max: 1e4,
                    t_typical: 712.25,
                    t_avg: 720.0,
                    t_stdev: f64::NAN,
                    p99: 800.0,
                    p99_9: 900.0,
                    p99_99: Some(950.5),
                    p99_999: Some(999.0),
                    histogram: vec![
                        Bucket {
                            lo: 512.0,
                            hi: 1024.0,
                            count: 99_990,
                        },
                        Bucket {
                            lo: 1024.0,
                            hi: 2048.0,
                            count: 8,
                        },
                    ],
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
        assert!(text.contains("\"histogram\": [[512, 1024, 99990], [1024, 2048, 8]]"));
    }

    #[test]
    fn bandwidth_round_trip_and_layout() {
        let r = RunFile::new(
            "write_bw",
            "verbs",
            "rxe0",
            "UC",
            Rows::Bw(vec![BwPoint {
                bytes: 65536,
                iterations: 5000,
                bw_peak: 1234.5,
                bw_avg: 1000.25,
                msg_rate: 0.016004,
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
    fn a_sim_run_becomes_a_file() {
        use rdma_direct::perf::{self, Test};
        use rdma_direct::providers::sim::SimDevice;
        let mut o = Params::new(Test::WriteBw);
        o.sizes = vec![64, 4096];
        o.iters = 40;
        o.unit = BwUnit::Gbps;
        let mut p = SimDevice::new();
        let rep = perf::run(&mut p, &o).unwrap();
        let f = from_report(&o, &rep);
        assert_eq!(
            (f.test.as_str(), f.provider.as_str(), f.transport.as_str()),
            ("write_bw", "sim", "RC")
        );
        let (Rows::Bw(got), Row::Bw(first)) = (&f.rows, rep.rows[0]) else {
            panic!("not bandwidth")
        };
        assert_eq!(f.rows.sizes(), [64, 4096]);
        let mib = first.bw_avg * 125_000_000.0 / 1_048_576.0;
        assert!(
            (got[0].bw_avg - mib).abs() <= mib * 1e-12,
            "Gb/s turned into MiB/s"
        );
        assert!(f
            .options
            .contains(&("table_unit".into(), Value::Str("Gb/s".into()))));
        assert_eq!(RunFile::from_text(&f.to_json()).unwrap(), f);

        let mut o = Params::new(Test::SendLat);
        o.iters = 20;
        let rep = perf::run(&mut SimDevice::new(), &o).unwrap();
        let f = from_report(&o, &rep);
        let (Rows::Lat(got), Row::Lat(want)) = (&f.rows, rep.rows[0]) else {
            panic!("not latency")
        };
        assert_eq!(
            [got[0].t_min, got[0].t_typical, got[0].p99_9],
            [want.t_min, want.t_typical, want.p99_9]
        );
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
        let bad = ok.replacen("[512, 1024, 99990]", "[512, 1024]", 1);
        let e = RunFile::from_text(&bad).unwrap_err();
        assert_eq!(
            e,
            "results[1].histogram[0]: expected [lo_usec, hi_usec, count]"
        );
        let bad = ok.replacen("\"device\": \"sim0\",\n", "", 1);
        assert_eq!(RunFile::from_text(&bad).unwrap_err(), "\"device\": missing");
    }

    /// perftest 4.5's `print_report_lat` output for `ib_write_lat -d rxe0 -s 2`, key for key
    /// in the order `write_test_info_to_file` and `REPORT_FMT_LAT_JSON` write them.
    const PERFTEST_45_LAT: &str = "{\ntest_info: {\ntest: RDMA_Write_Latency_Test,\nDual_port: OFF,\nDevice: \"rxe0\",\nNumber_of_qps: 1,\nTransport_type: IB,\nConnection_type: RC,\nUsing_SRQ: OFF,\n PCIe_relax_order: Unsupported,\nibv_wr_API: ON,\nTX_depth : 1,\nMtu: 1024,\nLink_type: Ethernet,\nGID_index: 1,\nMax_inline_data: 220,\nrdma_cm_QPs: OFF,\nData_ex_method: Ethernet,\n},\nresults: {\nMsgSize: 2,\nn_iterations: 1000,\nt_min: 19.73,\nt_max: 61.27,\nt_typical: 24.95,\nt_avg: 25.84,\nt_stdev: 4.21,\npercentile_99: 41.02,\npercentile_99.9: 61.27,\n},\n}\n";

    #[test]
    fn perftest_45_latency() {
        let r = RunFile::from_text(PERFTEST_45_LAT).unwrap();
        assert_eq!(
            (
                r.tool.as_str(),
                r.test.as_str(),
                r.provider.as_str(),
                r.device.as_str(),
                r.transport.as_str()
            ),
            ("perftest", "write_lat", "verbs", "rxe0", "RC")
        );
        let Rows::Lat(rows) = &r.rows else {
            panic!("not latency")
        };
        assert_eq!(rows.len(), 1);
        assert_eq!((rows[0].bytes, rows[0].iterations), (2, 1000));
        assert_eq!(
            [rows[0].t_min, rows[0].t_typical, rows[0].p99, rows[0].p99_9],
            [19.73, 24.95, 41.02, 61.27]
        );
        assert!(r.options.contains(&("Mtu".into(), Value::Num(1024.0))));
        assert!(r.options.contains(&("TX_depth".into(), Value::Num(1.0))));
    }

    #[test]
    fn perftest_fixtures() {
        let lat = RunFile::from_text(include_str!(
            "../../../fixtures/perftest/ib_write_lat_rxe0_2.json"
        ))
        .unwrap();
        assert_eq!(
            (lat.test.as_str(), lat.rows.sizes()),
            ("write_lat", vec![2])
        );
        let bw = RunFile::from_text(include_str!(
            "../../../fixtures/perftest/ib_write_bw_rxe0_65536.json"
        ))
        .unwrap();
        assert_eq!(
            (bw.test.as_str(), bw.rows.sizes()),
            ("write_bw", vec![65536])
        );
        let Rows::Bw(b) = &bw.rows else {
            panic!("not bandwidth")
        };
        assert_eq!(
            (b[0].bw_peak, b[0].bw_avg, b[0].msg_rate),
            (298.41, 291.07, 0.004657)
        );
        assert!(bw
            .options
            .contains(&("CQ_Moderation".into(), Value::Num(100.0))));
        let std = RunFile::from_text(include_str!(
            "../../../fixtures/perftest/ib_send_lat_rxe0_2_json24.json"
        ))
        .unwrap();
        assert_eq!(
            (std.test.as_str(), std.device.as_str()),
            ("send_lat", "rxe0")
        );
        assert!(
            json::parse(include_str!(
                "../../../fixtures/perftest/ib_write_lat_rxe0_2.json"
            ))
            .is_err(),
            "perftest 4.5's file is not JSON"
        );
    }

    #[test]
    fn perftest_standard_json_bandwidth() {
        // perftest 24.01+ quotes every key and value and drops the trailing commas.
        let t = "{\n\"test_info\": {\n\"test\": \"Send_Post_List_BW_Test\",\n\"Device\": \"mlx5_0\",\n\"Connection_type\": \"UC\",\n\"CQ_Moderation\": 100\n},\n\"results\": {\n\"MsgSize\": 65536,\n\"n_iterations\": 5000,\n\"BW_peak\": 11000.12,\n\"BW_average\": 10987.65,\n\"MsgRate\": 0.175803\n}\n}\n";
        let r = RunFile::from_text(t).unwrap();
        assert_eq!((r.test.as_str(), r.transport.as_str()), ("send_bw", "UC"));
        assert_eq!(
            r.rows,
            Rows::Bw(vec![BwPoint {
                bytes: 65536,
                iterations: 5000,
                bw_peak: 11000.12,
                bw_avg: 10987.65,
                msg_rate: 0.175803
            }])
        );
        assert!(r.options.contains(&("post_list".into(), Value::Bool(true))));
    }

    #[test]
    fn perftest_refusals_and_truncation() {
        let only = "{\ntest_info: {\ntest: RDMA_Write_Latency_Test,\nDevice: \"rxe0\",\n},\nresults: {\navg_lat: 25.000000,\n},\n}\n";
        let e = RunFile::from_text(only).unwrap_err();
        assert!(
            e.contains("results.avg_lat") && e.contains("--output"),
            "{e}"
        );
        let e = RunFile::from_text(&PERFTEST_45_LAT.replace("t_stdev: 4.21,\n", "")).unwrap_err();
        assert_eq!(e, "results.t_stdev: missing");
        let e = RunFile::from_text(&PERFTEST_45_LAT.replace("RDMA_Write_", "Raw_Ethernet_"))
            .unwrap_err();
        assert!(e.contains("not a perftest RDMA test"), "{e}");
        for end in 0..PERFTEST_45_LAT.trim_end().len() {
            let Some(t) = PERFTEST_45_LAT.get(..end) else {
                continue;
            };
            assert!(
                RunFile::from_text(t).is_err(),
                "prefix of {end} bytes accepted"
            );
        }
        // Truncated inside results: the error points into the perftest text, not at line 2.
        let cut = &PERFTEST_45_LAT[..PERFTEST_45_LAT.find("t_avg").unwrap()];
        let e = RunFile::from_text(cut).unwrap_err();
        assert!(e.contains("end of file inside the object"), "{e}");
    }
}
