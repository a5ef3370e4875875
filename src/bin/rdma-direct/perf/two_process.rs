//! Two processes: this side of perftest's model, server (waits on the TCP port) or client
//! (connects to HOST); the peer is this tool or perftest's `ib_<test>`. The exchange and the
//! run are [`rdma_direct::perf::remote`]'s; this prints the header once the QPs are up, a table
//! line per row (the peer's report for the bandwidth rows the server side does not measure),
//! and returns the report.

use rdma_direct::perf::remote::{self, Event};
use rdma_direct::perf::stats::BwRow;
use rdma_direct::perf::wire::Side;
use rdma_direct::perf::{Info, Report, Row};
use rdma_direct::providers::Provider;

use super::super::table;
use super::text::{header, progress, row_text, table_header};
use super::{Mode, PerfJob};

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
    let o = &cli.params;
    let (stream, side, role) = match &cli.mode {
        Mode::Client(h) => (
            remote::connect(h, cli.port)?,
            Side::Client,
            format!("client of {h}:{}", cli.port),
        ),
        _ => {
            (job.out)(&format!(
                "\n************************************\n* Waiting for client to connect... *\n************************************\n (rdma-direct perf server: {} on TCP port {})\n",
                o.test.name(),
                cli.port
            ));
            (
                remote::accept(cli.port)?,
                Side::Server,
                format!("server on TCP port {}", cli.port),
            )
        }
    };
    let mut info: Option<Info> = None;
    let mut rows = Vec::new();
    let n = o.sizes.len();
    let why = job.why.clone();
    let out = &mut job.out;
    let prog = job.progress;
    remote::run(p, o, stream, side, cli.gid_given, &mut |ev| match ev {
        Event::Ready(i) => {
            out(&header(o, i, &why, &role));
            out(&format!("{}\n", table_header(o)));
            progress(prog, 0, n, o.sizes[0]);
            info = Some(i.clone());
        }
        Event::Row(r) => {
            out(&row_text(&r, cli.histogram));
            rows.push(r);
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
        }
    })?;
    out(&format!("{}\n", table::RULE));
    let info = info.ok_or_else(|| rdma_direct::Error::Protocol {
        context: "perf",
        detail: "the run ended before the QPs were up".into(),
    })?;
    Ok(Report {
        info,
        rows,
        nic: Vec::new(),
    })
}
