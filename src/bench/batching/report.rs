//! The report of a batching sweep (feature `report`): the header, one perftest-style table
//! per configuration, the notes on method, latency and PCIe, the JSON document and the SVG
//! charts.
//!
//! Contract: pure functions of a [`Setup`] (the sweep's [`Params`], the PCIe link the bound
//! is given for, the command line) and the measured points ([`Stat`]); each returns its text
//! (or charts) and writes nothing. Every table and chart names the provider and says that
//! plain-memory and sim figures are not hardware figures.

use std::fmt::Write as _;

use super::explain::{completions_per_wqe, model_fit};
use super::{Config, Mode, Params, Stat, Sweep, Where};
use crate::pcie::{Counts, Link, Traffic};
use crate::perf::host::Host;
use crate::report::json::Value;
use crate::report::plot::{Chart, Curve, Panel, Point, Series, XKind};

/// What a report says about the run besides its points: the sweep's parameters (reached
/// through `Deref`), the PCIe link whose rate bounds each point, and the command line the
/// JSON records (the arguments after `rdma-direct bench batching`).
#[derive(Clone, Debug)]
pub struct Setup {
    pub params: Params,
    pub pcie: Link,
    pub argv: Vec<String>,
}

impl std::ops::Deref for Setup {
    type Target = Params;
    fn deref(&self) -> &Params {
        &self.params
    }
}

impl std::ops::DerefMut for Setup {
    fn deref_mut(&mut self) -> &mut Params {
        &mut self.params
    }
}

pub fn series_name(o: &Setup, c: &Config) -> String {
    let mut s = format!("{}, {}", c.mode.name(), c.signal.name());
    if o.ops.len() > 1 || c.op != crate::bench::batching::Op::Write {
        s = format!("{}, {s}", c.op.name());
    }
    if o.many_payloads() {
        let _ = write!(s, ", {} {} B", c.payload.name(), c.size);
    }
    s
}

/// The PCIe model at a point on `link`: (requester traffic, responder traffic, the message
/// rate the busier of the two links allows in Mpps).
pub fn link_bound(link: &Link, p: &Stat) -> Option<(Traffic, Traffic, f64)> {
    let c = p.pcie?;
    let (req, resp) = (link.requester(&c), link.responder(&c));
    Some((req, resp, req.rate(link).min(resp.rate(link)) / 1e6))
}

/// Which bound sets the rate: the measured one ("cpu" on plain memory, the device thread on
/// the sim) or the link's.
fn binds(o: &Setup, measured_mpps: f64, link_mpps: f64) -> &'static str {
    if link_mpps < measured_mpps {
        "link"
    } else if o.at == Where::Sim {
        "sim"
    } else {
        "cpu"
    }
}

pub fn table(o: &Setup, c: &Config, pts: &[Stat]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        " doorbell: {} | {} | {} {} {} B | {} samples of {}+ WQEs per point, {} warm-up",
        c.mode.name(),
        c.signal.name(),
        c.op.title(),
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
    let _ = write!(s, " {:<15}", "med-CI95[ns]");
    if o.runs > 1 {
        let _ = write!(s, " {:<10}", "run-spread");
    }
    if o.at == Where::Sim {
        let _ = write!(s, " {:<12}", "WQE/db-seen");
    }
    let pcie = pts.iter().any(|p| p.pcie.is_some());
    if pcie {
        let _ = write!(
            s,
            " {:<9} {:<9} {:<12} {:<12} {:<5}",
            "MMIO/msg", "DMA/msg", "PCIe[B dn/up]", "Link[Mpps]", "bound"
        );
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
        let ci = match p.med_ci95 {
            Some((lo, hi)) => format!("{lo:.2}-{hi:.2}"),
            None => "-".into(),
        };
        let _ = write!(s, " {ci:<15}");
        if o.runs > 1 {
            let _ = write!(s, " {:<10}", format!("{:.1}%", 100.0 * p.run_spread));
        }
        if let Some(d) = p.dev_wqes_per_db {
            let _ = write!(s, " {d:<12.2}");
        }
        if let (Some(k), Some((req, _, mpps))) = (p.pcie, link_bound(&o.pcie, p)) {
            let mmio = k.per_message(k.doorbells + k.bf_chunks);
            let dma = k.per_message(k.wqe_reads + k.payload_reads + k.cqe_writes + k.resp_writes);
            let _ = write!(
                s,
                " {:<9.3} {:<9.3} {:<12} {:<12.1} {:<5}",
                mmio,
                dma,
                format!("{:.1}/{:.1}", req.down, req.up),
                mpps,
                binds(o, p.mpps(), mpps)
            );
        }
        s.push('\n');
    }
    s
}

/// Latency mode: per payload and size, each doorbell mode's round trip (median, its
/// interval) and what it moves over PCIe per message, then BlueFlame against the 8-byte
/// doorbell: the difference in time and in PCIe transactions (from the tap's counts).
pub fn latency_note(o: &Setup, res: &[(Config, Vec<Stat>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        " latency (one request at a time: post, ring, poll its completion), per message:"
    );
    let mut seen: Vec<(crate::bench::batching::PayloadKind, u32)> = Vec::new();
    for (c, _) in res {
        if !seen.contains(&(c.payload, c.size)) {
            seen.push((c.payload, c.size));
        }
    }
    for (payload, size) in seen {
        let of = |m: Mode| {
            res.iter()
                .find(|(c, _)| c.mode == m && c.payload == payload && c.size == size)
                .and_then(|(_, p)| p.first())
        };
        let mut line = |m: Mode, p: &Stat| {
            let ci = p
                .med_ci95
                .map(|(lo, hi)| format!(" [{lo:.1}, {hi:.1}]"))
                .unwrap_or_default();
            let pcie = match (p.pcie, link_bound(&o.pcie, p)) {
                (Some(k), Some((req, _, _))) => format!(
                    "; PCIe: {:.0} doorbell(s), {:.0} BlueFlame chunk(s), {:.0} WQE read(s), \
                     {:.0} payload read(s), {:.0} CQE write(s); {:.1} B down, {:.1} B up",
                    k.per_message(k.doorbells),
                    k.per_message(k.bf_chunks),
                    k.per_message(k.wqe_reads),
                    k.per_message(k.payload_reads),
                    k.per_message(k.cqe_writes),
                    req.down,
                    req.up
                ),
                _ => String::new(),
            };
            let _ = writeln!(
                s,
                "   {payload} {size} B, {}: {:.1} ns{ci}{pcie}",
                m.name(),
                p.med,
                payload = payload.name()
            );
        };
        for m in [Mode::Db8, Mode::BfSingle, Mode::Verbs] {
            if let Some(p) = of(m) {
                line(m, p);
            }
        }
        if let (Some(db), Some(bf)) = (of(Mode::Db8), of(Mode::BfSingle)) {
            let _ = write!(s, "   bf-single - db8: {:+.1} ns measured", bf.med - db.med);
            if let (Some(kd), Some(kb), Some((rd, _, _)), Some((rb, _, _))) = (
                db.pcie,
                bf.pcie,
                link_bound(&o.pcie, db),
                link_bound(&o.pcie, bf),
            ) {
                let _ = write!(
                    s,
                    "; on PCIe BlueFlame moves {:+.0} WQE read(s) per message (each a \
                     non-posted round trip before the NIC can send), {:+.1} B down, {:+.1} B up",
                    kb.per_message(kb.wqe_reads) - kd.per_message(kd.wqe_reads),
                    rb.down - rd.down,
                    rb.up - rd.up
                );
            }
            s.push('\n');
        }
    }
    if o.at == Where::Sim {
        let _ = writeln!(
            s,
            "   (the sim reads the WQE from its ring in both modes: its latency shows no WQE \
             fetch; the PCIe counts say what a NIC would be spared)"
        );
    }
    s
}

/// How the sweep sampled: the CPU, the runs, the window, and the interval's method.
pub fn method_note(o: &Setup, done: &Sweep) -> String {
    let pinned = match &done.cpu {
        Some(c) => format!("measuring thread pinned to CPU {} ({})", c.cpu, c.why),
        None => "measuring thread not pinned".into(),
    };
    let window = match o.window {
        Some(w) => format!("steady pipeline, at most {w} WQEs outstanding"),
        None if o.at == Where::Plain => "each sample posts its WQEs, then polls them all".into(),
        None => "up to 256 WQEs outstanding".into(),
    };
    format!(
        " method: {pinned}; {} run(s) of {} samples per point; {window}; med-CI95: \
         bootstrap 95 % interval of the median\n",
        done.runs, o.reps
    )
}

pub fn header(o: &Setup) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "---------------------------------------------------------------------------------------"
    );
    let ops: Vec<&str> = o
        .ops
        .iter()
        .map(|op| match op {
            crate::bench::batching::Op::Write => "RDMA WRITE, RC",
            crate::bench::batching::Op::UdSend => "SEND, UD",
        })
        .collect();
    let qps = if o.qps > 1 {
        format!(", {} QPs", o.qps)
    } else {
        String::new()
    };
    let _ = writeln!(
        s,
        "                    Doorbell batching: {}{qps}",
        ops.join(" / ")
    );
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

fn title(o: &Setup) -> String {
    let what = match o.at {
        Where::Plain => "plain memory, mlx5 driver cost".to_string(),
        Where::Sim => "sim, device thread".to_string(),
        Where::Verbs | Where::Mlx5 => {
            format!("{} on {}", o.at.name(), o.device.as_deref().unwrap_or("?"))
        }
    };
    format!("Doorbell batching: RDMA WRITE — {what}")
}

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

/// With several measuring threads, their total rate per point (the sum of each thread's
/// median Mpps) and each thread's CPU, as text; empty with one thread.
pub fn threads_note(o: &Setup, done: &Sweep) -> String {
    let Some(total) = done.total_mpps() else {
        return String::new();
    };
    let mut s = String::new();
    let cpus: Vec<String> = done
        .threads
        .iter()
        .map(|t| t.cpu.as_ref().map_or("-".into(), |c| c.cpu.to_string()))
        .collect();
    let _ = writeln!(
        s,
        " {} measuring threads, each on queues of its own (CPUs {}); the tables are thread \
         0's. Total Mpps (sum of the threads' medians):",
        done.threads.len(),
        cpus.join(", ")
    );
    for (c, pts) in &total {
        let pts: Vec<String> = pts.iter().map(|(b, m)| format!("b{b} {m:.3}")).collect();
        let _ = writeln!(s, "   {}: {}", series_name(o, c), pts.join(", "));
    }
    s
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

/// The samples each point holds: `--reps`, fewer when a stop cut the sweep short.
fn taken(o: &Setup, pts: &[Stat]) -> u32 {
    pts.iter().map(|p| p.reps).min().unwrap_or(o.reps)
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

/// The note under the tables of an mlx5 provider's sweep: what the PCIe columns mean.
pub fn pcie_note(o: &Setup) -> String {
    let l = &o.pcie;
    format!(
        " PCIe columns, per message, counted from what the mlx5 provider wrote (replayed on \
         plain memory):\n   MMIO = 8-B doorbells + 64-B BlueFlame chunks; DMA = WQE fetches \
         + payload fetches + CQE writes + responder payload writes;\n   PCIe = requester-link \
         bytes host-to-device/device-to-host; Link = the rate a {} link allows (MPS {}, MRRS \
         {},\n   read completions of {} B; model and sources: crate::pcie); bound = \
         the lower of Link and the measured rate.\n",
        l.name(),
        l.mps,
        l.mrrs,
        l.rcb
    )
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

/// The two charts (message rate, cost per WQE), each point with its p10..p90 range as an error
/// bar; the cost chart also draws, per configuration the model covers, the least-squares fit
/// `t = w + d/b + c·q` ([`model_fit`]) evaluated along the batch axis.
pub fn charts(o: &Setup, res: &[(Config, Vec<Stat>)]) -> Vec<Panel> {
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
                            band: Some(b),
                        }
                    })
                    .collect(),
            })
            .collect()
    };
    let band_label = Some("bars: p10..p90 of the samples".to_string());
    let rate = Chart {
        title: format!("{} — message rate", title(o)),
        subtitle: sub.clone(),
        x_label: "batch size [WQEs per doorbell]".into(),
        x_kind: XKind::Count,
        y_label: "message rate [Mpps]".into(),
        band_label: band_label.clone(),
        series: mk(&|p| (p.mpps(), (1e3 / p.p90, 1e3 / p.p10))),
    };
    let cost = Chart {
        title: format!("{} — cost per WQE", title(o)),
        subtitle: sub,
        x_label: "batch size [WQEs per doorbell]".into(),
        x_kind: XKind::Count,
        y_label: "time per WQE [ns]".into(),
        band_label,
        series: mk(&|p| (p.med, (p.p10, p.p90))),
    };
    let mut cost = Panel::from(cost).error_bars();
    for curve in fit_curves(o, res) {
        cost = cost.with_curve(curve);
    }
    vec![Panel::from(rate).error_bars(), cost]
}

/// The fitted model along each configuration's batch range, for the configurations whose
/// points the fit used (per doorbell mode: its first payload and size).
fn fit_curves(o: &Setup, res: &[(Config, Vec<Stat>)]) -> Vec<Curve> {
    let mut out = Vec::new();
    for (i, (c, pts)) in res.iter().enumerate() {
        let Some(m) = model_fit(res, c.mode) else {
            continue;
        };
        let Some((fc, _)) = m.rows.first() else {
            continue;
        };
        if (fc.payload, fc.size) != (c.payload, c.size) || !m.rows.iter().any(|(r, _)| r == c) {
            continue;
        }
        let (Some(lo), Some(hi)) = (
            pts.iter().map(|p| p.batch).min(),
            pts.iter().map(|p| p.batch).max(),
        ) else {
            continue;
        };
        if lo == hi {
            continue;
        }
        let wqes = pts.iter().map(|p| p.wqes).max().unwrap_or(1).max(1);
        let k = &m.fit.coef;
        let (w, d) = (k[0], k[1]);
        let per_cqe = if m.per_completion { k[2] } else { 0.0 };
        let signal = c.signal;
        let q = move |b: f64| {
            let b = (b.round() as u32).max(1);
            let n = (0..wqes).filter(|&j| signal.wants(j, b, wqes)).count();
            n as f64 / f64::from(wqes)
        };
        let name = if m.per_completion {
            format!(
                "fit {}: {w:.1} + {d:.1}/b + {per_cqe:.1}·q ns",
                series_name(o, c)
            )
        } else {
            format!("fit {}: {w:.1} + {d:.1}/b ns", series_name(o, c))
        };
        out.push(Curve::sampled(
            &name,
            Some(i),
            f64::from(lo),
            f64::from(hi),
            49,
            |b| w + d / b + per_cqe * q(b),
        ));
    }
    out
}
