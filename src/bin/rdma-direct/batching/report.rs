//! The output of `bench batching`: the header, one perftest-style table per configuration,
//! the JSON document and the SVG charts.
//!
//! Contract: pure functions of the options and the measured points ([`Stat`]); each returns
//! its text (or charts) and writes nothing. Every table and chart names the provider and
//! says that plain-memory and sim figures are not hardware figures.

use std::fmt::Write as _;

use super::measure::Stat;
use super::options::{Config, Opts, Where};
use crate::json_value::Value;
use crate::plot::{self, Chart, Point, Series, XKind};

pub(super) fn series_name(o: &Opts, c: &Config) -> String {
    let mut s = format!("{}, {}", c.mode.name(), c.signal.name());
    if o.many_payloads() {
        let _ = write!(s, ", {} {} B", c.payload.name(), c.size);
    }
    s
}

pub(super) fn table(o: &Opts, c: &Config, pts: &[Stat]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        " doorbell: {} | {} | WRITE {} {} B | {} samples of {}+ WQEs per point, {} warm-up",
        c.mode.name(),
        c.signal.name(),
        c.payload.name(),
        c.size,
        taken(o, pts),
        o.wqes,
        o.warmup
    );
    let _ = write!(
        s,
        " {:<7} {:<8} {:<12} {:<12} {:<12} {:<12} {:<12} {:<14} {:<14}",
        "#batch",
        "#WQEs",
        "ns/WQE[med]",
        "ns/WQE[p10]",
        "ns/WQE[p90]",
        "ns/WQE[min]",
        "ns/WQE[max]",
        "MsgRate[Mpps]",
        "Doorbells[M/s]"
    );
    if o.at == Where::Sim {
        let _ = write!(s, " {:<12}", "WQE/db-seen");
    }
    s.push('\n');
    for p in pts {
        let _ = write!(
            s,
            " {:<7} {:<8} {:<12.2} {:<12.2} {:<12.2} {:<12.2} {:<12.2} {:<14.3} {:<14.3}",
            p.batch,
            p.wqes,
            p.med,
            p.p10,
            p.p90,
            p.min,
            p.max,
            p.mpps(),
            p.db_per_s / 1e6
        );
        if let Some(d) = p.dev_wqes_per_db {
            let _ = write!(s, " {d:<12.2}");
        }
        s.push('\n');
    }
    s
}

pub(super) fn header(o: &Opts) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "---------------------------------------------------------------------------------------"
    );
    let _ = writeln!(s, "                    Doorbell batching: RDMA WRITE, RC");
    let _ = writeln!(s, " provider: {}", o.at.describe(o.device.as_deref()));
    if o.at.hardware() {
        let _ = writeln!(
            s,
            " device figures (on rxe: an emulated device in the kernel, not a NIC)"
        );
    } else {
        let _ = writeln!(s, " plain-memory and sim figures are not hardware figures");
    }
    if o.at == Where::Mlx5 {
        let _ = writeln!(s, " mlx5 on a NIC is untested in this project's CI");
    }
    let _ = writeln!(
        s,
        "---------------------------------------------------------------------------------------"
    );
    s
}

fn title(o: &Opts) -> String {
    let what = match o.at {
        Where::Plain => "plain memory, mlx5 driver cost".to_string(),
        Where::Sim => "sim, device thread".to_string(),
        Where::Verbs | Where::Mlx5 => {
            format!("{} on {}", o.at.name(), o.device.as_deref().unwrap_or("?"))
        }
    };
    format!("Doorbell batching: RDMA WRITE — {what}")
}

pub(super) fn json(o: &Opts, res: &[(Config, Vec<Stat>)]) -> String {
    let s = |t: &str| Value::Str(t.to_string());
    let n = Value::Num;
    let configs = res
        .iter()
        .map(|(c, pts)| {
            let points = pts
                .iter()
                .map(|p| {
                    let mut kv = vec![
                        ("batch".to_string(), n(p.batch as f64)),
                        ("wqes_per_sample".to_string(), n(p.wqes as f64)),
                        ("samples".to_string(), n(p.reps as f64)),
                        (
                            "ns_per_wqe".to_string(),
                            Value::Obj(vec![
                                ("median".into(), n(p.med)),
                                ("p10".into(), n(p.p10)),
                                ("p90".into(), n(p.p90)),
                                ("min".into(), n(p.min)),
                                ("max".into(), n(p.max)),
                            ]),
                        ),
                        ("mpps".to_string(), n(p.mpps())),
                        ("doorbells_per_s".to_string(), n(p.db_per_s)),
                    ];
                    if let Some(d) = p.dev_wqes_per_db {
                        kv.push(("device_wqes_per_doorbell".to_string(), n(d)));
                    }
                    Value::Obj(kv)
                })
                .collect();
            Value::Obj(vec![
                ("name".into(), s(&series_name(o, c))),
                ("mode".into(), s(c.mode.name())),
                ("signal".into(), s(&c.signal.key())),
                ("payload".into(), s(c.payload.name())),
                ("size".into(), n(c.size as f64)),
                ("points".into(), Value::Arr(points)),
            ])
        })
        .collect();
    let v = Value::Obj(vec![
        ("tool".into(), s("rdma-direct bench batching")),
        ("version".into(), s(env!("CARGO_PKG_VERSION"))),
        ("provider".into(), s(o.at.name())),
        (
            "device".into(),
            o.device.as_deref().map(s).unwrap_or(Value::Null),
        ),
        ("hardware".into(), Value::Bool(o.at.hardware())),
        ("op".into(), s("RDMA WRITE")),
        ("configs".into(), Value::Arr(configs)),
    ]);
    let mut t = v.to_json();
    t.push('\n');
    t
}

/// The samples each point holds: `--reps`, fewer when a stop cut the sweep short.
fn taken(o: &Opts, pts: &[Stat]) -> u32 {
    pts.iter().map(|p| p.reps).min().unwrap_or(o.reps)
}

pub(super) fn charts(o: &Opts, res: &[(Config, Vec<Stat>)]) -> Vec<Chart> {
    let reps = res.iter().map(|(_, p)| taken(o, p)).min().unwrap_or(o.reps);
    let sub = if o.at.hardware() {
        format!(
            "{} — median of {} samples",
            o.at.describe(o.device.as_deref()),
            reps
        )
    } else {
        format!(
            "{} — median of {} samples; not hardware figures",
            o.at.describe(None),
            reps
        )
    };
    let band = res.len() <= plot::MAX_BANDS;
    // A point's value and its band.
    type Pick<'f> = &'f dyn Fn(&Stat) -> (f64, (f64, f64));
    let mk = |y: Pick| -> Vec<Series> {
        res.iter()
            .map(|(c, pts)| Series {
                name: series_name(o, c),
                points: pts
                    .iter()
                    .map(|p| {
                        let (v, b) = y(p);
                        Point {
                            x: p.batch as f64,
                            y: v,
                            band: band.then_some(b),
                        }
                    })
                    .collect(),
            })
            .collect()
    };
    let band_label = band.then(|| "shaded: p10..p90 of the samples".to_string());
    vec![
        Chart {
            title: format!("{} — message rate", title(o)),
            subtitle: sub.clone(),
            x_label: "batch size [WQEs per doorbell]".into(),
            x_kind: XKind::Count,
            y_label: "message rate [Mpps]".into(),
            band_label: band_label.clone(),
            series: mk(&|p| (p.mpps(), (1e3 / p.p90, 1e3 / p.p10))),
        },
        Chart {
            title: format!("{} — cost per WQE", title(o)),
            subtitle: sub,
            x_label: "batch size [WQEs per doorbell]".into(),
            x_kind: XKind::Count,
            y_label: "time per WQE [ns]".into(),
            band_label,
            series: mk(&|p| (p.med, (p.p10, p.p90))),
        },
    ]
}
