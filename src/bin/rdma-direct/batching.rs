//! `rdma-direct bench batching`: the doorbell-batching curve in one command.
//!
//! Contract:
//! - A sweep over batch sizes (requests per doorbell, default 1, 2, 4, ..., 64) for every
//!   configuration: doorbell mode x signaling period x payload (inline / one SGE) x message
//!   size. The operation is an RDMA WRITE of `size` bytes.
//! - Where it runs (`--provider`):
//!   - `plain` (the default without `-d`): the mlx5 provider's queues on plain memory with
//!     this program as the device (the bench rig `benches/rig/plain.rs`). The figure is the
//!     driver's own cost per WQE: post (WQE build), ring (dbrec, barriers, doorbell or
//!     BlueFlame store) and the poll of the completions; the rig's "device" work (writing
//!     CQEs) is outside the timed region. With `--instructions` the command re-runs itself
//!     under callgrind to count instructions per WQE instead.
//!   - `sim`: the software mlx5 device with its device thread consuming the doorbells:
//!     end-to-end message rate through the real doorbell path, the doorbells rung per second
//!     and the WQEs per doorbell the device saw (it may see two doorbells as one).
//!   - `verbs` (the default with `-d DEV`): libibverbs on DEV, one `ibv_post_send` with a
//!     linked list per batch (on rxe: one `write()` system call per doorbell).
//!   - `mlx5` (with `-d DEV`): the hand-rolled mlx5 provider on a ConnectX NIC (untested:
//!     no such NIC was available when this was written).
//! - Doorbell modes (mlx5 providers only; verbs has libmlx5's or the kernel's own):
//!   `db8` always the 8-byte doorbell; `bf-single` BlueFlame copy when exactly one WQE is
//!   staged, as libmlx5 does (its rule: `ds > 1` and it fits the BlueFlame half), the 8-byte
//!   doorbell for lists. A BlueFlame copy of the last WQE of a list (`bf-last`) needs a
//!   doorbell mode the mlx5 send queue does not offer; it is refused with that reason.
//! - Sound measurement: warm-up rounds (not recorded), then `--reps` rounds; a round takes
//!   one sample of every point in turn (round-robin, so a slow phase of a busy machine hits
//!   all configurations alike); each sample times many batches (about a thousand WQEs on
//!   plain memory), so the clock read costs well under 1 % of a sample. Per point: median, p10, p90, min, max of ns/WQE, and
//!   the message rate of the median.
//! - Ctrl-C (or SIGTERM) ends the sweep after the round being measured (at least one
//!   recorded): the tables and files are written with the samples taken, a note says so, and
//!   the tool exits 130 (143).
//! - PCIe (mlx5 providers: plain, sim, mlx5): every point carries what a ConnectX would move
//!   over PCIe per message (8-byte doorbells, 64-byte BlueFlame chunks, WQE and payload
//!   fetches, CQE writes, responder writes), counted by replaying the point's post sequence
//!   through the rig's PCIe tap (`benches/rig/tap.rs`: what the mlx5 provider wrote, ring by
//!   ring), and the rate a PCIe link allows for it (`rdma_direct::pcie`, `--pcie LINK`,
//!   default gen3x8; the JSON adds every Gen3-5 x8/x16 preset), with the bound that binds.
//! - Output: one perftest-style table per configuration with the provider named and the line
//!   "plain-memory and sim figures are not hardware figures"; `--json FILE` (one object,
//!   the host (CPU, governor, kernel, load before and after), the commit built from and the
//!   command line, every point with its spread and PCIe counts); `--svg FILE` (message rate
//!   and ns/WQE against the batch size, log2 axis, one line per configuration); `--explain` fits
//!   `t = w + d/b + c·q` by least squares over the curves (per WQE, per doorbell, per
//!   completion, with 95 % intervals and residuals) and says where the cost goes.
//!
//! The measurement itself is the library's ([`rdma_direct::bench::batching`]); this command
//! parses, prints and writes the files. This file is the entry ([`run`]); the parts:
//! - [`options`]: the usage text, option parsing;
//! - the report (tables, JSON, SVG charts, `--explain`'s model, `--report`'s summary): the
//!   library's, [`rdma_direct::bench::batching::report`] and its siblings;
//! - [`callgrind`]: `--instructions`, instructions per WQE under callgrind.

mod callgrind;
mod options;

use callgrind::instructions;
use options::{parse, Where, USAGE};
use rdma_direct::bench::batching::explain::explain;
use rdma_direct::bench::batching::report::{
    charts, header, json, latency_note, method_note, pcie_note, table, threads_note,
};
use rdma_direct::bench::batching::{summary, sweep};
use rdma_direct::report::plot;

/// `rdma-direct bench batching ...`. Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let mut o = match crate::options_or_exit("bench batching", USAGE, parse(args)) {
        Ok(o) => o,
        Err(status) => return status,
    };
    o.stop = Some(rdma_direct::perf::StopHook(crate::stop::requested));
    // The device and the output files first: nothing is printed for a run that cannot be
    // made or kept.
    if let Some(d) = &o.device {
        if let Err(e) = crate::provider::find_device(d) {
            errln!("rdma-direct bench batching: {e}");
            return 1;
        }
    }
    if let Some(dir) = &o.report {
        let d = std::path::Path::new(dir);
        let made = std::fs::create_dir_all(d)
            .map_err(|e| format!("--report {dir}: {e} (a directory this user may create)"))
            .and_then(|()| crate::check_output("--report", &d.join(summary::MARKDOWN)));
        if let Err(e) = made {
            errln!("rdma-direct bench batching: {e}");
            return 1;
        }
    }
    for (flag, path) in [("--json", &o.json), ("--svg", &o.svg)] {
        if let Some(p) = path {
            if let Err(e) = crate::check_output(flag, std::path::Path::new(p)) {
                errln!("rdma-direct bench batching: {e}");
                return 1;
            }
        }
    }
    if o.instructions {
        out!("{}", header(&o));
        return match instructions(&o) {
            Ok(t) => {
                out!("{t}");
                0
            }
            Err(e) => {
                errln!("rdma-direct bench batching: {e}");
                1
            }
        };
    }
    let device_thread = match o.at {
        Where::Plain => false,
        Where::Sim => true,
        Where::Verbs | Where::Mlx5 => {
            crate::cpu_room::device_thread(rdma_direct::providers::ProviderKind::Mlx5)
        }
    };
    let (busy, what) = match o.threads {
        0 | 1 => crate::cpu_room::busy(1, device_thread),
        // Each measuring thread drives its own queues (on the sim, its own device thread).
        n if device_thread => (
            2 * n as usize,
            "the measuring threads and their software devices' threads",
        ),
        n => (n as usize, "the measuring threads"),
    };
    crate::cpu_room::warn("bench batching", busy, what);
    // Ctrl-C ends the sweep after the round being measured; the points keep their samples.
    let armed = crate::stop::Armed::new();
    out!("{}", header(&o));
    crate::out::flush();
    let host = rdma_direct::perf::host::Host::read();
    let done = match sweep(&o) {
        Ok(r) => r,
        Err(e) => {
            // The library names its fields and `Pin`'s variants; here the flags that set them.
            let e = e
                .to_string()
                .replace("(Pin::Cpu)", "(--cpu N)")
                .replace("(Pin::Off)", "(--unpin)")
                .replace("Pin::Off", "--unpin")
                .replace("Params::threads", "--threads")
                .replace("Params::wqes", "-n")
                .replace("(Params::qps)", "(--qps)");
            errln!("rdma-direct bench batching ({}): {e}", o.at.name());
            return 1;
        }
    };
    drop(armed);
    let res = &done.points;
    if let Some(sig) = crate::stop::signal() {
        let taken = res.iter().flat_map(|(_, p)| p).map(|p| p.reps).min();
        errln!(
            "rdma-direct bench batching: interrupted ({}) after {} of {} rounds; every point \
             keeps the samples taken (text and result files)",
            crate::stop::name(sig),
            taken.unwrap_or(0),
            o.reps
        );
    }
    for (c, pts) in res {
        out!("{}", table(&o, c, pts));
    }
    out!("{}", method_note(&o, &done));
    out!("{}", threads_note(&o, &done));
    for line in &done.skipped {
        outln!(" note: {line}");
    }
    if o.latency {
        out!("{}", latency_note(&o, res));
    }
    if res.iter().flat_map(|(_, p)| p).any(|p| p.pcie.is_some()) {
        out!("{}", pcie_note(&o));
    }
    // (A round trip in latency mode takes about a microsecond on the sim by itself.)
    if o.at == Where::Sim && !o.latency && res.iter().flat_map(|(_, p)| p).any(|p| p.med > 1000.0) {
        outln!(
            " note: some points took over 1 µs per WQE: the device thread and this thread \
             shared a core (a busy machine), so those figures show the scheduler, not the \
             doorbell path. The sim needs two idle cores."
        );
    }
    let explained = (o.explain || o.report.is_some()).then(|| explain(&o, res));
    if o.explain {
        out!("{}", explained.as_deref().unwrap_or_default());
    }
    let write = |path: &str, text: String, what: &str| -> bool {
        match std::fs::write(path, text) {
            Ok(()) => true,
            Err(e) => {
                errln!("rdma-direct bench batching: writing the {what} to {path}: {e}");
                false
            }
        }
    };
    let mut ok = true;
    let load_after = rdma_direct::perf::host::load_average();
    if let Some(f) = &o.json {
        ok &= write(f, json(&o, &done, &host, load_after), "JSON");
    }
    if let Some(f) = &o.svg {
        ok &= write(f, plot::render_panels(&charts(&o, res)), "SVG");
    }
    if let Some(dir) = &o.report {
        let at = |name: &str| std::path::Path::new(dir).join(name).display().to_string();
        ok &= write(
            &at(summary::JSON),
            json(&o, &done, &host, load_after),
            "JSON",
        );
        ok &= write(
            &at(summary::SVG),
            plot::render_panels(&charts(&o, res)),
            "SVG",
        );
        let md = summary::markdown(
            &o,
            &done,
            &host,
            load_after,
            explained.as_deref().unwrap_or_default(),
        );
        ok &= write(&at(summary::MARKDOWN), md, "summary");
        if ok {
            outln!(
                " report: {} ({}, {}, {})",
                dir,
                summary::MARKDOWN,
                summary::JSON,
                summary::SVG
            );
        }
    }
    if ok {
        0
    } else {
        1
    }
}
