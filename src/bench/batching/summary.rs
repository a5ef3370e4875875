//! The Markdown summary of a batching sweep (feature `report`), for a report directory
//! beside the JSON and the SVG ([`JSON`], [`SVG`], [`MARKDOWN`] name the three files).
//!
//! Contract: a pure function of the [`Setup`], the sweep and the host; it returns the text of
//! `summary.md`: the setup (command line, provider, what a sample is), the host and run
//! metadata, one table per configuration (median with its bootstrap interval, spread, rate,
//! the PCIe link's rate and which bound binds), the fitted model (the text of [`explain`](super::explain::explain)) and
//! the caveats (plain memory and the sim are not hardware; the PCIe model is a bandwidth
//! bound). It writes nothing itself.

use std::fmt::Write as _;

use super::report::link_bound;
use super::setup::{series_name, Setup};
use super::{Sweep, Where};
use crate::perf::host::Host;

/// The files `--report DIR` writes, by name.
pub const JSON: &str = "batching.json";
pub const SVG: &str = "batching.svg";
pub const MARKDOWN: &str = "summary.md";

pub fn markdown(
    o: &Setup,
    done: &Sweep,
    host: &Host,
    load_after: Option<f64>,
    explained: &str,
) -> String {
    let mut s = String::new();
    let what = if o.latency {
        "latency (one signaled request at a time)"
    } else {
        "doorbell batching"
    };
    let _ = writeln!(s, "# RDMA WRITE {what}: {}\n", o.at.name());
    let _ = writeln!(s, "## Setup\n");
    let _ = writeln!(
        s,
        "- Command: `rdma-direct bench batching {}`",
        o.argv.join(" ")
    );
    let _ = writeln!(s, "- Provider: {}", o.at.describe(o.device.as_deref()));
    let _ = writeln!(
        s,
        "- Samples: {} per point per run after {} warm-up, {} run(s); each sample times {}+ \
         WQEs in whole batches; points sampled round-robin",
        o.reps, o.warmup, done.runs, o.wqes
    );
    let window = match (o.latency, o.window) {
        (true, _) => "one request outstanding (latency)".to_string(),
        (false, Some(w)) => format!("steady pipeline, at most {w} WQEs outstanding"),
        (false, None) if o.at == Where::Plain => {
            "a sample's WQEs posted, then all polled".to_string()
        }
        (false, None) => "up to 256 WQEs outstanding".to_string(),
    };
    let _ = writeln!(s, "- Pipeline: {window}");
    let pinned = match &done.cpu {
        Some(c) => format!("CPU {} ({})", c.cpu, c.why),
        None => "not pinned".into(),
    };
    let _ = writeln!(s, "- Measuring thread: {pinned}");
    let _ = writeln!(
        s,
        "- Interval: percentile bootstrap 95 % of the median, {} resamples, seeded",
        crate::bench::batching::stats::BOOTSTRAP_RESAMPLES
    );
    let _ = writeln!(s, "- PCIe link for the bound: {}\n", o.pcie.name());
    let _ = writeln!(s, "## Host\n");
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "unknown".into());
    let num = |v: Option<f64>| v.map_or("unknown".into(), |x| format!("{x:.2}"));
    let _ = writeln!(s, "- CPU: {}", opt(&host.cpu_model));
    let _ = writeln!(
        s,
        "- CPUs online: {}",
        host.cpus.map_or("unknown".into(), |n| n.to_string())
    );
    let _ = writeln!(s, "- Governor: {}", opt(&host.governor));
    let _ = writeln!(s, "- Kernel: {}", opt(&host.kernel));
    let _ = writeln!(
        s,
        "- Load (1 min) before / after: {} / {}",
        num(host.load),
        num(load_after)
    );
    let _ = writeln!(
        s,
        "- Tool: rdma-direct {}, commit {}\n",
        env!("CARGO_PKG_VERSION"),
        opt(&host.commit)
    );
    let _ = writeln!(s, "## Results\n");
    let _ = writeln!(
        s,
        "Median ns per WQE{} with its 95 % interval; Mpps from the median; Link: the rate the \
         PCIe link allows for what the point moves per message; bound: the lower of the two \
         (`cpu` on plain memory, `sim` for the device thread).\n",
        if o.latency { " (per round trip)" } else { "" }
    );
    for (c, pts) in &done.points {
        let _ = writeln!(
            s,
            "### {} ({} {} B)\n",
            series_name(o, c),
            c.payload.name(),
            c.size
        );
        let _ = writeln!(
            s,
            "| batch | ns/WQE median | 95 % interval | p10-p90 | run spread | Mpps | Link Mpps | bound |"
        );
        let _ = writeln!(s, "|---|---|---|---|---|---|---|---|");
        for p in pts {
            let ci = p
                .med_ci95
                .map_or("-".into(), |(lo, hi)| format!("{lo:.2}-{hi:.2}"));
            let (link, bound) = match link_bound(&o.pcie, p) {
                Some((_, _, l)) => (
                    format!("{l:.1}"),
                    if l < p.mpps() {
                        "link"
                    } else if o.at == Where::Sim {
                        "sim"
                    } else {
                        "cpu"
                    },
                ),
                None => ("-".into(), "-"),
            };
            let spread = if p.run_medians.len() > 1 {
                format!("{:.1} %", 100.0 * p.run_spread)
            } else {
                "-".into()
            };
            let _ = writeln!(
                s,
                "| {} | {:.2} | {ci} | {:.2}-{:.2} | {spread} | {:.2} | {link} | {bound} |",
                p.batch,
                p.med,
                p.p10,
                p.p90,
                p.mpps()
            );
        }
        s.push('\n');
    }
    let _ = writeln!(s, "## Model\n");
    let _ = writeln!(s, "```\n{}```\n", explained);
    let _ = writeln!(s, "## Caveats\n");
    if o.at.hardware() {
        let _ = writeln!(
            s,
            "- Device figures; on rxe the device is emulated in the kernel, not a NIC."
        );
    } else {
        let _ = writeln!(
            s,
            "- Plain memory and the sim are not hardware: plain memory times the driver's own \
             work with this program playing the device; the sim is a software device thread."
        );
    }
    let _ = writeln!(
        s,
        "- The PCIe counts are what a ConnectX would move for the requests the provider wrote \
         (replayed through the rig's tap), not measured on a link; the link model leaves out \
         acknowledgement and credit packets: its rate is an upper bound."
    );
    if o.at == Where::Sim {
        let _ = writeln!(
            s,
            "- The sim reads every WQE from its ring, BlueFlame or not, and needs two idle \
             cores (a shared core shows the scheduler)."
        );
    }
    for line in &done.skipped {
        let _ = writeln!(s, "- {line}.");
    }
    if done.threads.len() > 1 {
        let _ = writeln!(
            s,
            "- {} measuring threads ran side by side, each on queues of its own: the tables \
             are thread 0's; the JSON's `per_thread` and `total` hold every thread's points \
             and their sum.",
            done.threads.len()
        );
    }
    let _ = writeln!(
        s,
        "\nFiles: `{JSON}` (every point, raw samples, metadata), `{SVG}` (the curves)."
    );
    s
}
