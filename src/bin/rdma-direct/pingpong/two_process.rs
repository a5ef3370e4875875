//! Two processes: this process is one end, the peer (this tool or rdma-core's
//! `ibv_rc_pingpong` / `ibv_uc_pingpong`) another. The server waits on the TCP port, the client
//! connects; they exchange rc_pingpong's 52-byte address message and bring their QPs up at the
//! point rc_pingpong does. Address lines are printed as soon as they are known, the latency table's
//! header before the run.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use rdma_direct::endpoint::{PingpongMsg, PINGPONG_DONE, PINGPONG_MSG_LEN, PINGPONG_PORT};
use rdma_direct::providers::{Completion, Provider};
use rdma_direct::{Error, Result};

use super::super::provider;
use super::args::Args;
use super::bring_up::{connect_opts, msg_line, open_end};
use super::flow::{flow, Stall, STALL};
use super::io_err;
use super::report::results;
use rdma_direct::report::table;

/// [`two_process`] for [`provider::open_and_run`].
pub(super) struct TwoProcess<'a>(pub(super) &'a Args);

impl provider::Job for TwoProcess<'_> {
    type Out = String;
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<String>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        two_process(p, self.0)
    }
}

/// Client side of the exchange: connect (retrying for a few seconds while the server comes
/// up), write ours, read theirs, write "done". `server` is the command line that starts the
/// server this client expects, named when none answers.
fn client_exchange(host: &str, port: u16, mine: &PingpongMsg, server: &str) -> Result<PingpongMsg> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut s = loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                let what = format!(
                    "connect to {host}:{port} (is the server running? start it first: `{server}`)"
                );
                return Err(io_err(&what, e));
            }
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| io_err("set_read_timeout", e))?;
    s.write_all(&mine.format()?)
        .map_err(|e| io_err("write local address", e))?;
    let mut buf = [0u8; PINGPONG_MSG_LEN];
    s.read_exact(&mut buf)
        .map_err(|e| io_err("read remote address", e))?;
    // Whatever answered at host:port is not rc_pingpong's server when its first 52 bytes are
    // not an address message: name where it came from.
    let rem = PingpongMsg::parse(&buf).map_err(|e| match e {
        Error::Protocol { context, detail } => Error::Protocol {
            context,
            detail: format!(
                "{detail} (the peer at {host}:{port} did not send rc_pingpong's address \
                 message: is it another service?)"
            ),
        },
        e => e,
    })?;
    s.write_all(PINGPONG_DONE)
        .map_err(|e| io_err("write \"done\"", e))?;
    Ok(rem)
}

/// This process is one end; the peer (this tool or rdma-core's) another process. Prints the
/// provider and address lines as soon as they are known (a server waits for its client after
/// the local one, as rc_pingpong's does); returns the result lines.
fn two_process<P: Provider>(p: &mut P, a: &Args) -> Result<String> {
    let opts = connect_opts(a);
    let port = a.port.unwrap_or(PINGPONG_PORT);
    let mut end = open_end(p, a)?;
    let mut local = p.endpoint(&end.qp, &opts)?;
    if a.gid_idx.is_none()
        && p.kind() != rdma_direct::providers::ProviderKind::Sim
        && local.lid != 0
    {
        // rc_pingpong sends a zero GID without -g: the peer then routes by LID, no GRH. A
        // port without a LID (RoCE) is reached only by its GID, so it sends index 0's, as
        // `-g 0` would (rc_pingpong's modify_qp fails there instead). The sim's GID names its
        // device on the fabric: always sent.
        local.gid = [0; 16];
    }
    let mine = PingpongMsg::from_endpoint(&local);
    out!(
        "provider: {}\n{}",
        table::provider_label(p.kind(), p.device_name()),
        msg_line("local", &mine)
    );
    crate::out::flush();
    let mut flow = flow(&end, a, true);

    // The exchange, and the bring-up at the point rc_pingpong does it. Our receives are
    // posted right after the QP reaches RTS and before the peer can send to us.
    let rem = match &a.host {
        Some(host) => {
            // Without -d the sim's server needs -p (plain `pingpong` runs both ends in one
            // process); with -d, rc_pingpong's rule: no host is the server.
            let server = match &a.dev {
                None => format!("rdma-direct pingpong -p {port}"),
                Some(d) => format!("rdma-direct pingpong -d {d} -p {port}"),
            };
            let rem = client_exchange(host, port, &mine, &server)?;
            let remote = rem.to_endpoint(a.mtu, opts.gid_index);
            p.connect(&mut end.qp, &local, &remote, &opts)?;
            flow.fill(&mut end.qp)?;
            rem
        }
        None => {
            let l = TcpListener::bind(("0.0.0.0", port))
                .map_err(|e| io_err(&format!("listen on port {port}"), e))?;
            let (mut s, _) = l.accept().map_err(|e| io_err("accept", e))?;
            s.set_read_timeout(Some(Duration::from_secs(30)))
                .map_err(|e| io_err("set_read_timeout", e))?;
            let mut m = [0u8; PINGPONG_MSG_LEN];
            s.read_exact(&mut m)
                .map_err(|e| io_err("read remote address", e))?;
            let rem = PingpongMsg::parse(&m)?;
            let remote = rem.to_endpoint(a.mtu, opts.gid_index);
            p.connect(&mut end.qp, &local, &remote, &opts)?;
            flow.fill(&mut end.qp)?;
            s.write_all(&mine.format()?)
                .map_err(|e| io_err("write local address", e))?;
            let mut done = [0u8; 5];
            s.read_exact(&mut done)
                .map_err(|e| io_err("read \"done\"", e))?;
            if &done != PINGPONG_DONE {
                return Err(Error::Protocol {
                    context: "rc_pingpong exchange",
                    detail: format!("expected \"done\\0\", got {done:?}"),
                });
            }
            rem
        }
    };
    out!("{}", msg_line("remote", &rem));
    crate::out::flush();
    super::warn_busy(p.kind());
    // The latency table's header too: its columns are known before the run.
    out!("{}", super::report::table_head(a.iters));
    crate::out::flush();

    let mut wc = [Completion::EMPTY; 16];
    let mut stall = Stall::new(STALL);
    let watch = a
        .attribute
        .then(|| rdma_direct::noise::Watch::start(&rdma_direct::doctor::Sysfs::system()));
    let start = Instant::now();
    if a.host.is_some() {
        flow.start(&mut end.qp, end.buf.as_mut_slice())?;
    }
    while !flow.done() {
        if flow.step(
            p,
            &mut end.qp,
            &mut end.cq,
            end.buf.as_mut_slice(),
            &mut wc,
            "",
        )? {
            stall.progressed();
        } else {
            p.progress();
            std::hint::spin_loop();
            stall.idle("pingpong", || {
                // What is owed only: the error adds the likely causes (the peer gone, ...).
                format!(
                    "the peer's next message, after {} sends and {} receives",
                    flow.scnt, flow.rcnt
                )
            })?;
        }
    }
    let end_t = Instant::now();
    let stamps = flow.stamps.as_deref().unwrap_or(&[]);
    let mut text = results(a, end_t.duration_since(start), stamps, end_t, "");
    text.push_str(&super::report::attribution(
        stamps,
        end_t,
        flow.away.as_ref(),
        watch,
        a.size as u64,
    ));
    Ok(text)
}
