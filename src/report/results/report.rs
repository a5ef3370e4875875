//! From a measurement to a file: [`from_report`] turns what `perf` measured into a
//! [`RunFile`], bandwidth converted to MiB/s, the run's options under perftest's long names.

use crate::perf::stats::{BwRow, BwUnit, Histogram, LatRow};
use crate::perf::{Params, Report, Row};

use crate::report::json::Value;

use super::{Rows, RunFile};

/// The file of a finished measurement: `o` is what was asked, `r` what ran; `histogram`
/// keeps each latency row's histogram (`perf --histogram`), else it is left out. The options
/// are perftest's knobs under their long names (`iterations`, `inline`, `post_list`,
/// `cq_mod`, `port`, `gid_index`), what the run set up (`threads`, `mtu`, `max_inline`) and
/// `table_unit` (the bandwidth unit the table printed; the file always holds MiB/s).
pub fn from_report(o: &Params, r: &Report, histogram: bool) -> RunFile {
    let lat = r
        .rows
        .iter()
        .filter_map(|row| match *row {
            Row::Lat(l) if histogram => Some(l),
            Row::Lat(l) => Some(LatRow {
                hist: Histogram::EMPTY,
                ..l
            }),
            Row::Bw(_) => None,
        })
        .collect();
    let bw = r
        .rows
        .iter()
        .filter_map(|row| match *row {
            Row::Bw(b) => {
                let to_mib = b.unit.bytes_per_unit() / BwUnit::MiBps.bytes_per_unit();
                Some(BwRow {
                    bw_peak: b.bw_peak * to_mib,
                    bw_avg: b.bw_avg * to_mib,
                    unit: BwUnit::MiBps,
                    ..b
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
    // Latency in one process: each row's outliers (perf --attribute's figures).
    if !r.outliers.is_empty() {
        let u = |v: u64| Value::Num(v as f64);
        let rows = r
            .outliers
            .iter()
            .map(|o| {
                Value::Obj(vec![
                    ("bytes".into(), u(o.bytes)),
                    ("samples".into(), u(o.samples)),
                    ("median_ns".into(), u(o.median_ns)),
                    ("x".into(), n(o.x)),
                    ("threshold_ns".into(), u(o.threshold_ns)),
                    ("count".into(), u(o.count)),
                    ("interrupted".into(), u(o.interrupted)),
                ])
            })
            .collect();
        f.options.push(("outliers".into(), Value::Arr(rows)));
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sim_run_becomes_a_file() {
        use crate::perf::{self, Test};
        use crate::providers::sim::SimDevice;
        let mut o = Params::new(Test::WriteBw);
        o.sizes = vec![64, 4096];
        o.iters = 40;
        o.unit = BwUnit::Gbps;
        let mut p = SimDevice::new();
        let rep = perf::run(&mut p, &o).unwrap();
        let f = from_report(&o, &rep, false);
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
        let f = from_report(&o, &rep, false);
        let (Rows::Lat(got), Row::Lat(want)) = (&f.rows, rep.rows[0]) else {
            panic!("not latency")
        };
        assert_eq!(
            [got[0].t_min, got[0].t_typical, got[0].p99_9],
            [want.t_min, want.t_typical, want.p99_9]
        );
    }
}
