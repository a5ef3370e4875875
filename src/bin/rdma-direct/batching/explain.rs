//! `bench batching --explain`: the per-doorbell and per-WQE costs derived from the measured
//! curve, and where they go.
//!
//! Contract: a pure function of the options and the measured points; it fits
//! `t(b) = w + d / b` per configuration and returns its text; it measures nothing but the
//! cost of a fence pair on this machine, for comparison.

use std::fmt::Write as _;
use std::time::Instant;

use super::measure::Stat;
use super::options::{Config, Mode, Opts, Signal, Where};
use super::report::series_name;

/// Fit `t(b) = w + d / b` through the smallest and the largest batch: `d` the cost per
/// doorbell, `w` the cost per WQE that batching cannot remove.
fn fit(pts: &[Stat]) -> Option<(f64, f64)> {
    let (a, z) = (pts.first()?, pts.last()?);
    if a.batch == z.batch {
        return None;
    }
    let (ia, iz) = (1.0 / a.batch as f64, 1.0 / z.batch as f64);
    let d = (a.med - z.med) / (ia - iz);
    Some((z.med - d * iz, d))
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
            rdma_direct::barrier::wc_start();
            rdma_direct::barrier::wc_flush();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / n as f64);
    }
    best
}

pub(super) fn explain(o: &Opts, res: &[(Config, Vec<Stat>)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\nWhere the cost goes ({}):",
        o.at.describe(o.device.as_deref())
    );
    let base = |m: Mode, sig: Signal| find(res, |c| c.mode == m && c.signal == sig);
    let first_mode = o.modes[0];
    // Per doorbell vs per WQE, from the curve with the fewest completions.
    // A fixed signaling period keeps the completions per WQE constant across the curve;
    // "once per batch" would put one completion into every doorbell's share.
    let lean = o
        .signals
        .iter()
        .find(|&&g| matches!(g, Signal::Every(n) if n > 1))
        .or_else(|| o.signals.first())
        .and_then(|&g| base(first_mode, g))
        .or_else(|| res.first());
    if let Some((c, pts)) = lean {
        if let Some((w, d)) = fit(pts).filter(|&(w, d)| w > 0.0 && d >= 0.0) {
            let _ = writeln!(
                s,
                " - Fitting t(b) = w + d/b to the {} curve ({}): w = {:.2} ns per WQE, \
                 d = {:.2} ns per doorbell.",
                c.mode.name(),
                c.signal.name(),
                w,
                d
            );
            if c.signal == Signal::PerBatch {
                let _ = writeln!(
                    s,
                    "   (Signaled once per batch, d includes one completion per doorbell.)"
                );
            }
            let _ = writeln!(
                s,
                "   At batch 1 the doorbell is {:.0} % of the cost; at batch {} it is {:.0} %.",
                100.0 * d / (w + d).max(1e-9),
                pts.last().map_or(0, |p| p.batch),
                {
                    let b = pts.last().map_or(1, |p| p.batch) as f64;
                    100.0 * (d / b) / (w + d / b).max(1e-9)
                }
            );
        } else {
            let _ = writeln!(
                s,
                " - The {} curve ({}) does not fall as w + d/b: too noisy to split into a \
                 per-WQE and a per-doorbell cost (a busy machine? more -r, -n).",
                c.mode.name(),
                c.signal.name()
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
                 is a few ns (--provider plain). Batching removes doorbells; the device needs \
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
    // Completion handling: every-WR signaling vs the sparsest, at the largest batch.
    let every = base(first_mode, Signal::Every(1));
    let sparse = o
        .signals
        .iter()
        .rev()
        .find(|&&g| g != Signal::Every(1))
        .and_then(|&g| base(first_mode, g));
    if let (Some((_, e)), Some((c, sp))) = (every, sparse) {
        if let (Some(a), Some(b)) = (e.last(), sp.last()) {
            let _ = writeln!(
                s,
                " - Completion handling: at batch {} signaling every WR costs {:.2} ns/WQE, \
                 {} {:.2}: about {:.2} ns per completion polled.",
                a.batch,
                a.med,
                c.signal.name(),
                b.med,
                (a.med - b.med).max(0.0)
            );
        }
    }
    s
}
