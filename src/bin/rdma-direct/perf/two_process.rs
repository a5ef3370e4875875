//! Two processes: this side of perftest's model, server (waits on the TCP port) or client
//! (connects to HOST); the peer is this tool or perftest's `ib_<test>`. The exchange and the
//! run are [`rdma_direct::perf::remote`]'s; this prints the header once the QPs are up, a table
//! line per row (the peer's report for the bandwidth rows the server side does not measure),
//! hands the rows so far to `--json`'s file after each (a run killed midway keeps the sizes
//! done), and returns the report. Ctrl-C or SIGTERM during a sweep of this side ends it after
//! the size being measured ([`remote::run`]'s stop hook), with the sizes done in the text and
//! both files, a note, and exit status 130 (143).

use rdma_direct::perf::cm_channel::Channel;
use rdma_direct::perf::remote::{self, Event};
use rdma_direct::perf::stats::BwRow;
use rdma_direct::perf::wire::Side;
use rdma_direct::perf::{Info, Report, Row, StopHook};
use rdma_direct::providers::{Provider, ProviderKind};

use super::progress;
use super::{keep, Mode, PerfJob};
use rdma_direct::report::perftest::{header, row_text, table_header};
use rdma_direct::report::table;

/// Two processes: this side of perftest's model (see the module doc).
pub(super) fn two_process<P: Provider>(
    p: &mut P,
    job: &mut PerfJob<'_>,
) -> rdma_direct::Result<Report>
where
    P::Qp: Send,
    P::Cq: Send,
{
    let cli = job.cli;
    let mut params = cli.params.clone();
    let o = &mut params;
    let cm = cli.rdma_cm;
    let (via, kind) = if cm {
        (" through the RDMA CM", "RDMA CM")
    } else {
        ("", "TCP")
    };
    let ((stream, at), side, role) = match &cli.mode {
        Mode::Client(h) => (
            Channel::connect(p, h, cli.port, cm)?,
            Side::Client,
            format!("client of {h}:{}{via}", cli.port),
        ),
        _ => {
            (job.out)(&format!(
                "\n************************************\n* Waiting for client to connect... *\n************************************\n (rdma-direct perf server: {} on {} port {})\n",
                o.test.name(),
                kind,
                cli.port
            ));
            (
                Channel::accept(p, cli.port, cm)?,
                Side::Server,
                format!("server on {kind} port {}", cli.port),
            )
        }
    };
    o.rdma_cm = at;
    // Ctrl-C (SIGINT, SIGTERM) ends a sweep of this side after the size being measured
    // ([`crate::stop`]), caught from the moment the QPs are up (waiting for a peer, it ends
    // the tool as any C tool); a side that does not sweep keeps the default action.
    let sweeps = remote::sweeps(o, side);
    if sweeps {
        o.stop = Some(StopHook(crate::stop::requested));
    }
    let mut armed = None;
    let o = &*o;
    let mut info: Option<Info> = None;
    let mut rows = Vec::new();
    let n = o.sizes.len();
    let why = job.why.clone();
    let out = &mut job.out;
    let prog = job.progress;
    remote::run(p, o, stream, side, cli.gid_given, &mut |ev| match ev {
        Event::Ready(i) => {
            if sweeps {
                armed = Some(crate::stop::Armed::new());
            }
            if i.provider == ProviderKind::Sim {
                out(&format!(
                    " {}: the peer's sim device over the sim fabric (shared memory, this host)\n",
                    table::provider_label(i.provider, &i.device)
                ));
            } else if matches!(
                rdma_direct::providers::sim::standin::attach_if_standin(),
                Ok(true)
            ) {
                out(&format!(
                    " {}: the stand-in's device (RDMA_DIRECT_LIBIBVERBS), reaching the peer's \
                     over the sim fabric (shared memory, this host)\n",
                    table::provider_label(i.provider, &i.device)
                ));
            }
            out(&header(o, i, &why, &role));
            out(&format!("{}\n", table_header(o)));
            progress(prog, 0, n, o.sizes[0]);
            info = Some(i.clone());
        }
        Event::Row(r) => {
            out(&row_text(&r, cli.histogram));
            rows.push(r);
            if let Some(i) = &info {
                keep(cli, i, &rows);
            }
            progress(
                prog,
                rows.len(),
                n,
                o.sizes.get(rows.len()).copied().unwrap_or(0),
            );
        }
        Event::PeerReport(r) => {
            let row = Row::Bw(BwRow {
                bytes: r.size,
                iters: r.iters,
                bw_peak: r.bw_peak,
                bw_avg: r.bw_avg,
                msg_rate_mpps: r.msg_rate,
                unit: o.unit,
            });
            out(&row_text(&row, false));
            rows.push(row);
            if let Some(i) = &info {
                keep(cli, i, &rows);
            }
        }
    })?;
    drop(armed);
    if crate::stop::signal().is_some() && rows.len() < n {
        crate::stop::note(&format!("perf {}", o.test.name()), rows.len(), n);
    }
    out(&format!("{}\n", table::RULE));
    let info = info.ok_or_else(|| rdma_direct::Error::Protocol {
        context: "perf",
        detail: "the run ended before the QPs were up".into(),
    })?;
    Ok(Report {
        info,
        rows,
        nic: Vec::new(),
        outliers: Vec::new(),
    })
}
