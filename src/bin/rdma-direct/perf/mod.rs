//! `rdma-direct perf <test> [options] [HOST]`: perftest's flags in, perftest's header and
//! table out. The measurement is [`rdma_direct::perf`]'s; this module parses the command line,
//! chooses and opens the provider ([`super::provider`]), and prints the header and one table
//! line per size as it is measured. `--json FILE` is rewritten after each size and both
//! result files (`--json FILE`, `--svg FILE`) after the table; nothing but the table goes to
//! stdout. Ctrl-C during a sweep (loopback, or this side's of a two-process run) ends it
//! after the current size, keeping the sizes done in the text and both files (exit status
//! 130, [`crate::stop`]).
//!
//! Modes: with `-d DEV` and no HOST this process is perftest's **server** (waits on TCP port
//! `-p`, 18515); with a HOST it is the **client**; the peer is this tool or perftest's
//! `ib_<test>` ([`rdma_direct::perf::wire`]). `--loopback` (the default of the software
//! device) runs client and server QPs in this process; on the software device HOST or `-p`
//! makes this process one side, its sim device reaching the peer's over the sim fabric.

mod args;
mod loopback;
mod two_process;

use std::io::IsTerminal;

use rdma_direct::perf::{Info, Params, Report, Row, Test, TX_DEPTH};
use rdma_direct::providers::{Provider, ProviderKind};

use super::provider::{self, Job};
use args::{parse, Cli, Mode, HELP};
use loopback::report;
use rdma_direct::report::plot::YScale;
use rdma_direct::report::results;
use two_process::two_process;

/// `rdma-direct perf ...`: parse, choose the provider, run, print. Returns the exit code.
pub fn run(args: &[String]) -> i32 {
    let cli = match crate::options_or_exit("perf", HELP, parse(args)) {
        Ok(cli) => cli,
        Err(status) => return status,
    };
    let name = cli.params.test.name();
    for (flag, path) in [("--json", &cli.json), ("--svg", &cli.svg)] {
        if let Some(p) = path {
            if let Err(e) = crate::check_output(flag, p) {
                errln!("rdma-direct perf {name}: {e}");
                return 1;
            }
        }
    }
    if let Some(note) = short_run_note(&cli.params) {
        errln!("rdma-direct perf {name}: note: {note}");
    }
    let (kind, why) = match provider::select("perf", cli.provider, cli.device.as_deref()) {
        Ok(k) => k,
        Err(status) => return status,
    };
    let pollers = if cli.mode == Mode::Loopback
        && matches!(cli.params.test, Test::WriteLat | Test::SendLat)
        && rdma_direct::perf::two_threads(kind, &cli.params)
    {
        2
    } else {
        1
    };
    let sim_thread = sim_device_thread(kind, &cli);
    let (busy, what) = crate::cpu_room::busy(
        pollers,
        crate::cpu_room::device_thread(kind) && (kind != ProviderKind::Sim || sim_thread),
    );
    // The busy-threads warning goes out with the first text of a run that started (the
    // header, or a server's wait), not before a refusal.
    let mut warned = false;
    let mut print = |s: &str| {
        if !std::mem::replace(&mut warned, true) {
            crate::cpu_room::warn(&format!("perf {name}"), busy, what);
        }
        out!("{s}");
        crate::out::flush();
    };
    let mut job = PerfJob {
        cli: &cli,
        why,
        out: &mut print,
        progress: std::io::stderr().is_terminal() && cli.params.sizes.len() > 1,
    };
    // A loopback sweep stops cleanly at Ctrl-C (a two-process run arms it once its QPs are
    // up, in two_process).
    let _armed =
        (cli.mode == Mode::Loopback && cli.params.sizes.len() > 1).then(crate::stop::Armed::new);
    let report = match provider::open_and_run(kind, cli.device.as_deref(), sim_thread, &mut job) {
        Ok(r) => r,
        // Options the device cannot honour (found once it is open: its MTU, its inline
        // limit): a bad command line, status 2.
        Err(rdma_direct::Error::InvalidArgument {
            context: "perf",
            detail,
        }) => return crate::usage_error(&format!("perf {name}"), &detail),
        Err(e) => {
            errln!("rdma-direct perf {name}: {e}");
            return 1;
        }
    };
    match write_files(&cli, &report) {
        Ok(()) => 0,
        Err(e) => {
            errln!("rdma-direct perf {name}: {e}");
            1
        }
    }
}

/// Whether the sim runs its device thread. In loopback, yes. Across two processes (the sim
/// fabric) a side whose loop polls throughout runs the engine itself (deterministic mode:
/// no third and fourth busy thread on the host); a server that only waits in the exchange
/// while the client's requests arrive (`read_lat`, `atomic_lat`, `write_bw`, `read_bw`)
/// needs the thread to answer them.
fn sim_device_thread(kind: ProviderKind, cli: &Cli) -> bool {
    kind == ProviderKind::Sim
        && match cli.mode {
            Mode::Loopback => true,
            Mode::Client(_) => false,
            Mode::Server => matches!(
                cli.params.test,
                Test::ReadLat | Test::AtomicLat | Test::WriteBw | Test::ReadBw
            ),
        }
}

/// Fewer bandwidth iterations than this per size measure mostly the ramp-up (the first
/// [`TX_DEPTH`] requests fill the send queue): perftest's default for every test but
/// `write_bw`.
const MIN_BW_ITERS: u32 = 1000;

/// The note a bandwidth run of fewer than [`MIN_BW_ITERS`] iterations gets: its figures are
/// too short to mean much (on the sim `write_bw -a -n 200` reads about 0.15 Mpps where the
/// default `-n` reads over 5).
fn short_run_note(o: &Params) -> Option<String> {
    (!o.test.is_lat() && o.iters < MIN_BW_ITERS).then(|| {
        format!(
            "-n {} is short for a bandwidth test: the first {TX_DEPTH} requests only fill the \
             send queue, so the figures are mostly ramp-up; use -n {MIN_BW_ITERS} or more \
             (default {})",
            o.iters,
            Params::new(o.test).iters
        )
    })
}

/// `--json FILE` and `--svg FILE`, from the finished report.
fn write_files(cli: &Cli, report: &Report) -> Result<(), String> {
    if cli.json.is_none() && cli.svg.is_none() {
        return Ok(());
    }
    let file = results::from_report(&cli.params, report, cli.histogram);
    if let Some(p) = &cli.json {
        results::write_file(p, &file)?;
    }
    if let Some(p) = &cli.svg {
        let svg = results::chart::svg(std::slice::from_ref(&file), None, None, YScale::Log)?;
        std::fs::write(p, svg).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(())
}

/// After each measured size: `--json`'s file rewritten with the rows so far, so a run that is
/// killed keeps them (a failure here is reported by the final write, [`write_files`]).
fn keep(cli: &Cli, info: &Info, rows: &[Row]) {
    if let Some(p) = &cli.json {
        let r = Report {
            info: info.clone(),
            rows: rows.to_vec(),
            nic: Vec::new(),
            outliers: Vec::new(),
        };
        let _ = results::write_file(p, &results::from_report(&cli.params, &r, cli.histogram));
    }
}

/// The run, generic over the provider.
struct PerfJob<'a> {
    cli: &'a Cli,
    why: String,
    out: &'a mut dyn FnMut(&str),
    progress: bool,
}

impl Job for PerfJob<'_> {
    type Out = Report;
    fn run<P: Provider>(&mut self, p: &mut P) -> rdma_direct::Result<Report>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        match &self.cli.mode {
            Mode::Loopback => report(p, self.cli, &self.why, self.out, self.progress),
            Mode::Server | Mode::Client(_) => two_process(p, self),
        }
    }
}

/// Progress of a sweep on stderr (a terminal): `size k/n`.
fn progress(on: bool, k: usize, n: usize, size: u32) {
    if on {
        if k < n {
            err!("\r  perf: {k}/{n} sizes done, measuring {size} B ...   ");
        } else {
            err!("\r{:60}\r", "");
        }
    }
}
