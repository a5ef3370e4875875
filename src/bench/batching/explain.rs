//! Where the cost of a batching sweep goes (feature `report`): the per-doorbell and per-WQE
//! costs derived from the measured curve.
//!
//! Contract: a pure function of the [`Setup`] and the measured points; it fits
//! `t = w + d/b + c·q` (ns per WQE against the batch `b` and the completions per WQE `q`) by
//! least squares over every point of the first doorbell mode's curves ([`model_fit`], with
//! [`crate::perf::fit`]), states the coefficients with 95 % intervals and the residuals,
//! and returns its text; it measures nothing but the cost of a fence pair on this machine,
//! for comparison. It never clamps: a coefficient the data make negative is printed as such.

use std::fmt::Write as _;
use std::time::Instant;

use super::setup::{series_name, Setup};
use super::{Config, Mode, Signal, Stat, Where};
use crate::perf::fit::{least_squares, Fit};

/// Completions per WQE at a point: the signaled requests of a sample over its requests.
pub fn completions_per_wqe(c: &Config, p: &Stat) -> f64 {
    let signaled = (0..p.wqes)
        .filter(|&i| c.signal.wants(i, p.batch, p.wqes))
        .count();
    signaled as f64 / f64::from(p.wqes.max(1))
}

/// The least-squares fit of `t = w + d/b + c·q` (ns per WQE; `b` the batch, `q` completions
/// per WQE) over every point of the curves `res` holds for doorbell mode `m` (first payload
/// and size only, so the points share one cost per WQE). Without two signaling periods whose
/// `q` differ the per-completion term cannot be told apart: then `t = w + d/b` is fitted and
/// the third coefficient is `None`.
pub struct ModelFit {
    pub fit: Fit,
    pub per_completion: bool,
    /// (config, point) of each row, for naming residuals.
    pub rows: Vec<(Config, Stat)>,
}

pub fn model_fit(res: &[(Config, Vec<Stat>)], m: Mode) -> Option<ModelFit> {
    let first = res.iter().find(|(c, _)| c.mode == m)?.0;
    let rows: Vec<(Config, Stat)> = res
        .iter()
        .filter(|(c, _)| c.mode == m && c.payload == first.payload && c.size == first.size)
        .flat_map(|(c, pts)| pts.iter().map(move |p| (*c, p.clone())))
        .collect();
    let with_q: Vec<(Vec<f64>, f64)> = rows
        .iter()
        .map(|(c, p)| {
            (
                vec![1.0, 1.0 / f64::from(p.batch), completions_per_wqe(c, p)],
                p.med,
            )
        })
        .collect();
    if let Some(fit) = least_squares(&with_q) {
        return Some(ModelFit {
            fit,
            per_completion: true,
            rows,
        });
    }
    let without: Vec<(Vec<f64>, f64)> = with_q
        .into_iter()
        .map(|(x, y)| (x[..2].to_vec(), y))
        .collect();
    least_squares(&without).map(|fit| ModelFit {
        fit,
        per_completion: false,
        rows,
    })
}

/// `v ± h` with the interval when the fit has one.
fn pm(f: &Fit, j: usize) -> String {
    match &f.ci95 {
        Some(ci) => format!("{:.2} ± {:.2}", f.coef[j], ci[j]),
        None => format!("{:.2} (exact fit, no interval)", f.coef[j]),
    }
}

fn find(res: &[(Config, Vec<Stat>)], f: impl Fn(&Config) -> bool) -> Option<&(Config, Vec<Stat>)> {
    res.iter().find(|(c, _)| f(c))
}

/// Cost of the two store fences a doorbell takes (`wc_start` + `wc_flush`), measured here.
fn fence_pair_ns() -> f64 {
    let n = 200_000u32;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        for _ in 0..n {
            crate::barrier::wc_start();
            crate::barrier::wc_flush();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

pub fn explain(o: &Setup, res: &[(Config, Vec<Stat>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nWhere the cost goes ({}):",
        o.at.describe(o.device.as_deref())
    );
    let base = |m: Mode, sig: Signal| find(res, |c| c.mode == m && c.signal == sig);
    let first_mode = o.modes[0];
    let model = model_fit(res, first_mode);
    match &model {
        Some(mf) => {
            let f = &mf.fit;
            let _ = write!(
                s,
                " - Least-squares fit of t = w + d/b{} over the {} points of the {} curves \
                 (t: median ns per WQE, b: batch{}): w = {} ns per WQE, d = {} ns per \
                 doorbell",
                if mf.per_completion { " + c·q" } else { "" },
                mf.rows.len(),
                first_mode.name(),
                if mf.per_completion {
                    ", q: completions per WQE"
                } else {
                    ""
                },
                pm(f, 0),
                pm(f, 1)
            );
            if mf.per_completion {
                let _ = write!(s, ", c = {} ns per completion polled", pm(f, 2));
            }
            let _ = writeln!(s, " (95 % intervals).");
            if let Some((i, r)) = f.worst() {
                let (c, p) = &mf.rows[i];
                let _ = writeln!(
                    s,
                    "   Residuals: rms {:.2} ns; the largest {:+.2} ns at batch {} ({}).",
                    f.rms(),
                    r,
                    p.batch,
                    c.signal.name()
                );
            }
            if !mf.per_completion {
                let _ = writeln!(
                    s,
                    "   (No per-completion term: it needs two signaling periods whose completions \
                     per WQE differ, e.g. every 1st and every 16th.)"
                );
            }
            let (w, d) = (f.coef[0], f.coef[1]);
            let bmax = res
                .iter()
                .flat_map(|(_, p)| p)
                .map(|p| p.batch)
                .max()
                .unwrap_or(1) as f64;
            if w > 0.0 && d > 0.0 {
                let _ = writeln!(
                    s,
                    "   At batch 1 the doorbell is {:.0} % of w + d; at batch {} it is {:.0} %.",
                    100.0 * d / (w + d),
                    bmax,
                    100.0 * (d / bmax) / (w + d / bmax)
                );
            }
        }
        None => {
            let _ = writeln!(
                s,
                " - Too few points to fit t = w + d/b (two batch sizes at least)."
            );
        }
    }
    // What batching bought, per configuration.
    for (c, pts) in res {
        if let (Some(a), Some(z)) = (pts.first(), pts.last()) {
            if a.batch != z.batch {
                let _ = writeln!(
                    s,
                    " - {}: batch {} -> {}: {:.2} -> {:.2} Mpps ({:+.0} %).",
                    series_name(o, c),
                    a.batch,
                    z.batch,
                    a.mpps(),
                    z.mpps(),
                    100.0 * (z.mpps() / a.mpps() - 1.0)
                );
            }
        }
    }
    match o.at {
        Where::Plain => {
            let f = fence_pair_ns();
            let _ = writeln!(
                s,
                " - Per WQE (w): building the WQE in the ring — ctrl segment, remote address, \
                 inline data or data segment — and recording its wr_id. No barrier, no \
                 shared store."
            );
            let _ = writeln!(
                s,
                " - Per doorbell (d): the store barrier before the doorbell record (a compiler \
                 barrier on x86_64, dsb st on aarch64), the dbrec store, the two store fences \
                 around the write-combining store (measured here: {f:.2} ns for the pair), and \
                 the 8-byte doorbell or the BlueFlame copy. Batching divides all of it by b."
            );
            if let (Some((_, db)), Some((_, bf))) = (
                base(Mode::Db8, o.signals[0]),
                base(Mode::BfSingle, o.signals[0]),
            ) {
                if let (Some(a), Some(b)) = (db.first(), bf.first()) {
                    let _ = writeln!(
                        s,
                        " - BlueFlame at batch {}: {:.2} ns/WQE vs {:.2} with the 8-byte \
                         doorbell ({:+.2} ns): the CPU copies the whole WQE (64 B here) into \
                         the register instead of 8 bytes. On a NIC that buys latency — the \
                         device has the WQE without a DMA read — so libmlx5 uses it for single \
                         posts only; for a list it rings the 8-byte doorbell, the copy would \
                         cover one WQE of many and the device DMA-reads the list anyway.",
                        a.batch,
                        b.med,
                        a.med,
                        b.med - a.med
                    );
                }
                if let (Some(a), Some(b)) = (db.last(), bf.last()) {
                    let _ = writeln!(
                        s,
                        "   At batch {} both ring the 8-byte doorbell: {:.2} vs {:.2} ns/WQE.",
                        a.batch, a.med, b.med
                    );
                }
            }
        }
        Where::Sim => {
            let _ = writeln!(
                s,
                " - On the sim the device thread, not the driver, sets the rate: it fetches \
                 and executes each WQE in software (tens of ns), while the driver's own cost \
                 is a few ns (on plain memory). Batching removes doorbells; the device needs \
                 fewer still (column WQE/db-seen): once a doorbell woke it, it follows the \
                 doorbell record until the send queue is empty, so while the poster keeps it \
                 busy every later doorbell is a store nobody waits for."
            );
        }
        Where::Verbs => {
            let _ = writeln!(
                s,
                " - On rxe one ibv_post_send is one write() system call; the kernel then \
                 builds, checksums and loops back a packet per WQE and completes it in a \
                 tasklet. Where the per-WQE part w dwarfs the per-call part d (the fit \
                 above), batching barely helps: the emulated device in the kernel, not the \
                 doorbell, is the bottleneck."
            );
        }
        Where::Mlx5 => {
            let _ = writeln!(
                s,
                " - On a ConnectX NIC the doorbell is an uncached MMIO write over PCIe; the \
                 curve shows how much of it batching hides (untested in this project)."
            );
        }
    }
    // Completion handling: the fitted per-completion cost, or, without a fit, every-WR
    // signaling against the sparsest at the largest batch divided by the difference in
    // completions per WQE.
    match &model {
        Some(mf) if mf.per_completion => {
            let _ = writeln!(
                s,
                " - Completion handling: {} ns per completion polled (the fit's c, 95 % \
                 interval).",
                pm(&mf.fit, 2)
            );
        }
        _ => {
            let every = base(first_mode, Signal::Every(1));
            let sparse = o
                .signals
                .iter()
                .rev()
                .find(|&&g| g != Signal::Every(1))
                .and_then(|&g| base(first_mode, g));
            if let (Some((ce, e)), Some((cs, sp))) = (every, sparse) {
                if let (Some(a), Some(b)) = (e.last(), sp.last()) {
                    let dq = completions_per_wqe(ce, a) - completions_per_wqe(cs, b);
                    if dq > 0.0 {
                        let _ = writeln!(
                            s,
                            " - Completion handling: at batch {} signaling every WR costs {:.2} \
                             ns/WQE, {} {:.2}, {:.3} fewer completions per WQE: about {:.2} ns \
                             per completion polled (two points, no interval).",
                            a.batch,
                            a.med,
                            cs.signal.name(),
                            b.med,
                            dq,
                            (a.med - b.med) / dq
                        );
                    }
                }
            }
        }
    }
    s
}
