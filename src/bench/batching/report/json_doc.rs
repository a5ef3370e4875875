//! The JSON document of a batching sweep: the host and run, the sweep's method, every point
//! per configuration (with its PCIe counts and link bounds on an mlx5 provider), the
//! per-thread rates and the least-squares fits.
//!
//! Contract: [`json`] is a pure function of a [`Setup`], the finished [`Sweep`] and the host
//! read around it; it returns the document as text and writes nothing.

use super::super::explain::{completions_per_wqe, model_fit};
use super::super::setup::{series_name, Setup};
use super::super::{Config, Stat, Sweep};
use super::{binds, link_bound};
use crate::pcie::{Counts, Link};
use crate::perf::host::Host;
use crate::report::json::Value;

/// The host and the run, for the JSON: `host` read before the sweep, `load_after` after it.
fn host_json(o: &Setup, host: &Host, load_after: Option<f64>) -> Value {
    let opt_s = |v: &Option<String>| v.clone().map(Value::Str).unwrap_or(Value::Null);
    let opt_n = |v: Option<f64>| v.map(Value::Num).unwrap_or(Value::Null);
    Value::Obj(vec![
        ("cpu_model".into(), opt_s(&host.cpu_model)),
        ("cpus".into(), opt_n(host.cpus.map(|n| n as f64))),
        ("governor".into(), opt_s(&host.governor)),
        ("kernel".into(), opt_s(&host.kernel)),
        ("load_1min_before".into(), opt_n(host.load)),
        ("load_1min_after".into(), opt_n(load_after)),
        ("commit".into(), opt_s(&host.commit)),
        (
            "command_line".into(),
            Value::Arr(
                std::iter::once("rdma-direct bench batching".to_string())
                    .chain(o.argv.iter().cloned())
                    .map(Value::Str)
                    .collect(),
            ),
        ),
    ])
}

pub fn json(o: &Setup, done: &Sweep, host: &Host, load_after: Option<f64>) -> String {
    let res = &done.points;
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
                                (
                                    "median_ci95".into(),
                                    match p.med_ci95 {
                                        Some((lo, hi)) => Value::Arr(vec![n(lo), n(hi)]),
                                        None => Value::Null,
                                    },
                                ),
                            ]),
                        ),
                        (
                            "raw_ns_per_wqe".to_string(),
                            Value::Arr(p.samples.iter().map(|&v| n(v)).collect()),
                        ),
                        (
                            "run_medians".to_string(),
                            Value::Arr(p.run_medians.iter().map(|&v| n(v)).collect()),
                        ),
                        ("run_spread".to_string(), n(p.run_spread)),
                        ("mpps".to_string(), n(p.mpps())),
                        ("doorbells_per_s".to_string(), n(p.db_per_s)),
                    ];
                    if let Some(d) = p.dev_wqes_per_db {
                        kv.push(("device_wqes_per_doorbell".to_string(), n(d)));
                    }
                    if let Some(d) = p.dev_cqes_per_wqe {
                        kv.push(("device_cqes_per_wqe".to_string(), n(d)));
                    }
                    if let Some(k) = p.pcie {
                        kv.push(("pcie".to_string(), pcie_json(o, p, &k)));
                    }
                    Value::Obj(kv)
                })
                .collect();
            Value::Obj(vec![
                ("name".into(), s(&series_name(o, c))),
                ("op".into(), s(c.op.name())),
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
        (
            "op".into(),
            s(if o.ops == [crate::bench::batching::Op::Write] {
                "RDMA WRITE"
            } else {
                "see configs"
            }),
        ),
        ("qps".into(), n(f64::from(o.qps))),
        ("threads".into(), n(f64::from(o.threads.max(1)))),
        ("host".into(), host_json(o, host, load_after)),
        ("method".into(), method_json(o, done)),
        ("configs".into(), Value::Arr(configs)),
        ("fits".into(), fits_json(o, res)),
        (
            "skipped".into(),
            Value::Arr(done.skipped.iter().map(|l| s(l)).collect()),
        ),
    ]);
    let v = match (v, threads_json(o, done)) {
        (Value::Obj(mut kv), Some(more)) => {
            kv.extend(more);
            Value::Obj(kv)
        }
        (v, _) => v,
    };
    let mut t = v.to_json();
    t.push('\n');
    t
}

/// A configuration's keys in the JSON, then `rest`.
fn config_obj(o: &Setup, c: &Config, rest: Vec<(String, Value)>) -> Value {
    let s = |t: &str| Value::Str(t.to_string());
    let mut kv = vec![
        ("name".into(), s(&series_name(o, c))),
        ("op".into(), s(c.op.name())),
        ("mode".into(), s(c.mode.name())),
        ("signal".into(), s(&c.signal.key())),
        ("payload".into(), s(c.payload.name())),
        ("size".into(), Value::Num(c.size as f64)),
    ];
    kv.extend(rest);
    Value::Obj(kv)
}

/// With several measuring threads: `per_thread` (each thread's CPU, runs and points: batch,
/// samples, median ns per WQE with its interval, Mpps) and `total` (per configuration and
/// batch, the sum of the threads' median Mpps). `None` with one thread.
fn threads_json(o: &Setup, done: &Sweep) -> Option<Vec<(String, Value)>> {
    let total = done.total_mpps()?;
    let n = Value::Num;
    let per_thread = done
        .threads
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let configs = t
                .points
                .iter()
                .map(|(c, pts)| {
                    let points = pts
                        .iter()
                        .map(|p| {
                            Value::Obj(vec![
                                ("batch".into(), n(p.batch as f64)),
                                ("samples".into(), n(p.reps as f64)),
                                ("ns_per_wqe_median".into(), n(p.med)),
                                (
                                    "median_ci95".into(),
                                    match p.med_ci95 {
                                        Some((lo, hi)) => Value::Arr(vec![n(lo), n(hi)]),
                                        None => Value::Null,
                                    },
                                ),
                                ("mpps".into(), n(p.mpps())),
                            ])
                        })
                        .collect();
                    config_obj(o, c, vec![("points".into(), Value::Arr(points))])
                })
                .collect();
            Value::Obj(vec![
                ("thread".into(), n(i as f64)),
                (
                    "cpu".into(),
                    t.cpu
                        .as_ref()
                        .map(|c| n(c.cpu as f64))
                        .unwrap_or(Value::Null),
                ),
                ("runs".into(), n(f64::from(t.runs))),
                ("configs".into(), Value::Arr(configs)),
            ])
        })
        .collect();
    let total = total
        .iter()
        .map(|(c, pts)| {
            let points = pts
                .iter()
                .map(|&(b, mpps)| {
                    Value::Obj(vec![
                        ("batch".into(), n(b as f64)),
                        ("mpps".into(), n(mpps)),
                    ])
                })
                .collect();
            config_obj(o, c, vec![("points".into(), Value::Arr(points))])
        })
        .collect();
    Some(vec![
        ("per_thread".into(), Value::Arr(per_thread)),
        ("total".into(), Value::Arr(total)),
    ])
}

/// How the points were sampled: pinning, runs, window, samples and warm-up per point.
fn method_json(o: &Setup, done: &Sweep) -> Value {
    let n = Value::Num;
    Value::Obj(vec![
        (
            "pinned_cpu".into(),
            done.cpu
                .as_ref()
                .map(|c| n(c.cpu as f64))
                .unwrap_or(Value::Null),
        ),
        (
            "pinned_why".into(),
            done.cpu
                .as_ref()
                .map(|c| Value::Str(c.why.clone()))
                .unwrap_or(Value::Str("not pinned".into())),
        ),
        ("runs".into(), n(f64::from(done.runs))),
        ("reps_per_run".into(), n(f64::from(o.reps))),
        ("warmup".into(), n(f64::from(o.warmup))),
        ("wqes_per_sample".into(), n(f64::from(o.wqes))),
        (
            "window".into(),
            o.window.map(|w| n(f64::from(w))).unwrap_or(Value::Null),
        ),
        (
            "interval".into(),
            Value::Str(format!(
                "percentile bootstrap of the median, 95 %, {} resamples, seeded",
                crate::bench::batching::stats::BOOTSTRAP_RESAMPLES
            )),
        ),
    ])
}

/// The least-squares model per doorbell mode (see `explain::model_fit`): coefficients, 95 %
/// half-widths, residuals per point.
fn fits_json(o: &Setup, res: &[(Config, Vec<Stat>)]) -> Value {
    let n = Value::Num;
    let fits = o
        .modes
        .iter()
        .filter_map(|&m| {
            let mf = model_fit(res, m)?;
            let f = &mf.fit;
            let names = ["w_ns_per_wqe", "d_ns_per_doorbell", "c_ns_per_completion"];
            let coef = names
                .iter()
                .zip(&f.coef)
                .enumerate()
                .map(|(j, (k, v))| {
                    let ci = f.ci95.as_ref().map_or(Value::Null, |c| n(c[j]));
                    (
                        k.to_string(),
                        Value::Obj(vec![("value".into(), n(*v)), ("ci95".into(), ci)]),
                    )
                })
                .collect();
            let residuals = mf
                .rows
                .iter()
                .zip(&f.residuals)
                .map(|((c, p), r)| {
                    Value::Obj(vec![
                        ("name".into(), Value::Str(series_name(o, c))),
                        ("batch".into(), n(f64::from(p.batch))),
                        ("completions_per_wqe".into(), n(completions_per_wqe(c, p))),
                        ("residual_ns".into(), n(*r)),
                    ])
                })
                .collect();
            Some(Value::Obj(vec![
                ("mode".into(), Value::Str(m.name().into())),
                (
                    "model".into(),
                    Value::Str(if mf.per_completion {
                        "t = w + d/b + c*q".into()
                    } else {
                        "t = w + d/b".into()
                    }),
                ),
                ("coefficients".into(), Value::Obj(coef)),
                ("residual_rms_ns".into(), n(f.rms())),
                ("residuals".into(), Value::Arr(residuals)),
            ]))
        })
        .collect();
    Value::Arr(fits)
}

/// Link presets reported in the JSON beside the chosen link.
const PRESETS: [&str; 6] = [
    "gen3x8", "gen3x16", "gen4x8", "gen4x16", "gen5x8", "gen5x16",
];

/// A point's PCIe counts (per message), its traffic on `--pcie`'s link, the link-bound rate
/// on every preset, and which bound binds.
fn pcie_json(o: &Setup, p: &Stat, k: &Counts) -> Value {
    let n = Value::Num;
    let per = |x: u64| n(k.per_message(x));
    let counts = vec![
        ("mmio_doorbell_8B".to_string(), per(k.doorbells)),
        ("mmio_blueflame_64B".to_string(), per(k.bf_chunks)),
        ("dbrec_updates".to_string(), per(k.dbrec_updates)),
        ("wqe_dma_reads".to_string(), per(k.wqe_reads)),
        ("wqe_dma_read_wqebbs".to_string(), per(k.wqe_read_bbs)),
        ("payload_dma_reads".to_string(), per(k.payload_reads)),
        (
            "payload_dma_read_bytes".to_string(),
            per(k.payload_read_bytes),
        ),
        ("cqe_dma_writes".to_string(), per(k.cqe_writes)),
        ("cqe_bytes".to_string(), n(f64::from(k.cqe_size))),
        ("responder_payload_writes".to_string(), per(k.resp_writes)),
        (
            "responder_payload_bytes".to_string(),
            per(k.resp_write_bytes),
        ),
        (
            "responder_recv_wqe_reads".to_string(),
            per(k.recv_wqe_reads),
        ),
        ("responder_cqe_writes".to_string(), per(k.resp_cqe_writes)),
    ];
    let mut kv = vec![
        ("messages_counted".to_string(), n(k.messages as f64)),
        ("per_message".to_string(), Value::Obj(counts)),
    ];
    if let Some((req, resp, mpps)) = link_bound(&o.pcie, p) {
        kv.push((
            "link".to_string(),
            Value::Obj(vec![
                ("name".into(), Value::Str(o.pcie.name())),
                ("mps".into(), n(f64::from(o.pcie.mps))),
                ("mrrs".into(), n(f64::from(o.pcie.mrrs))),
                ("read_completion_bytes".into(), n(f64::from(o.pcie.rcb))),
                ("addr64".into(), Value::Bool(o.pcie.addr64)),
                ("requester_bytes_down".into(), n(req.down)),
                ("requester_bytes_up".into(), n(req.up)),
                ("responder_bytes_down".into(), n(resp.down)),
                ("responder_bytes_up".into(), n(resp.up)),
                ("link_mpps".into(), n(mpps)),
            ]),
        ));
        kv.push((
            "bound".to_string(),
            Value::Str(binds(o, p.mpps(), mpps).to_string()),
        ));
    }
    let presets = PRESETS
        .iter()
        .filter_map(|name| {
            let l = Link::preset(name).ok()?;
            Some((name.to_string(), n(link_bound(&l, p)?.2)))
        })
        .collect();
    kv.push(("link_mpps_presets".to_string(), Value::Obj(presets)));
    Value::Obj(kv)
}
