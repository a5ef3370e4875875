//! The report of a batching sweep (feature `report`): the header, one perftest-style table
//! per configuration, the notes on method, latency and PCIe, the JSON document and the SVG
//! charts.
//!
//! Contract: pure functions of a [`Setup`] (the sweep's [`Params`](super::Params), the PCIe
//! link the bound is given for, the command line) and the measured points ([`Stat`]); each
//! returns its text (or charts) and writes nothing. Every table and chart names the provider
//! and says that plain-memory and sim figures are not hardware figures.

use std::fmt::Write as _;

use super::explain::model_fit;
use super::setup::{series_name, Setup};
use super::{Config, Mode, Stat, Sweep, Where};
use crate::pcie::{Link, Traffic};
use crate::report::plot::{Chart, Curve, Panel, Point, Series, XKind};

mod json_doc;
pub use json_doc::json;

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

/// The samples each point holds: `--reps`, fewer when a stop cut the sweep short.
fn taken(o: &Setup, pts: &[Stat]) -> u32 {
    pts.iter().map(|p| p.reps).min().unwrap_or(o.reps)
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
