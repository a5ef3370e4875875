//! Writing a result file: [`RunFile::to_json`] gives the schema of the module doc, every key
//! always, in order, one row per line; the same run always gives the same bytes (`null` for a
//! value that is not a finite number).

use crate::report::json::{self as json, Value};

use crate::perf::stats::{BwRow, LatRow};

use super::{Rows, RunFile};

impl RunFile {
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
}

fn lat_json(p: &LatRow) -> String {
    let n = json::num;
    let mut s = format!(
        "{{\"bytes\": {}, \"iterations\": {}, \"t_min\": {}, \"t_max\": {}, \"t_typical\": {}, \"t_avg\": {}, \"t_stdev\": {}, \"p99\": {}, \"p99_9\": {}",
        p.bytes,
        p.iters,
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
    let buckets = p.hist.buckets();
    if !buckets.is_empty() {
        s.push_str(", \"histogram\": [");
        for (i, (lo, hi, count)) in buckets.into_iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            s.push_str(&format!("[{}, {}, {count}]", n(lo), n(hi)));
        }
        s.push(']');
    }
    s.push('}');
    s
}

fn bw_json(p: &BwRow) -> String {
    let n = json::num;
    format!(
        "{{\"bytes\": {}, \"iterations\": {}, \"bw_peak\": {}, \"bw_avg\": {}, \"msg_rate\": {}}}",
        p.bytes,
        p.iters,
        n(p.bw_peak),
        n(p.bw_avg),
        n(p.msg_rate_mpps)
    )
}
