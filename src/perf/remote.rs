//! One side of a two-process measurement, perftest's model: this process is the server (it
//! accepted the TCP connection) or the client (it connected), the peer is another process —
//! this tool or perftest 4.5's `ib_*` of the same test.
//!
//! The exchange is [`super::wire`]'s. After the prologue (versions, system data, MTU, and
//! between two copies of this tool the test parameters), the address handshakes come where
//! perftest does them: `write_lat` and `read_lat` two before the QP is brought up, the other
//! tests one; then two more (perftest prints the remote address after one and needs the
//! other "after moving the QP to RTR"). The run itself, per test, as perftest 4.5 runs it
//! (`run_iter_lat_write`, `run_iter_lat`, `run_iter_lat_send`, `run_iter_bw`,
//! `run_iter_bw_server`):
//!
//! - `write_lat`: both sides measure. The **server posts first**; each side waits for the
//!   last byte of the incoming message to carry the iteration number (mod 256), stamps,
//!   writes that number into the last byte of its outgoing message and posts a signaled RDMA
//!   WRITE to the peer's address, then waits for that completion. No handshake between sizes
//!   and no closing handshake.
//! - `read_lat`: the client posts one signaled READ of the peer's buffer at a time; the
//!   server only waits in the closing handshake. `atomic_lat` runs the same way with one
//!   FETCH_AND_ADD (add 1, perftest's default atomic) instead of the READ, and the same
//!   handshakes as `read_lat` (perftest 4.5's `atomic_lat` makes them where `read_lat` does).
//! - `send_lat`: both sides measure; before each size receives are posted and a handshake
//!   is made; the **client sends first**; every 100th send and the last is signaled and
//!   waited for; receives are re-posted until the size's iterations are covered.
//! - `write_bw`, `read_bw`: the client keeps up to 128 requests outstanding ([`TX_DEPTH`]),
//!   post lists and `cq_mod` as in loopback; the server waits in a handshake, receives the
//!   client's report of the last size and prints it.
//! - `send_bw`: before each size the server posts receives and a handshake is made; the
//!   client sends as in `write_bw`, the server counts receives and measures from its first
//!   receive to its last; both print a row; with `-a` another handshake follows each size.
//!
//! Every run ends (except `write_lat`) with a handshake and `"done"`. The remote address is
//! the same for every request (perftest cycles through a page; the peer's buffer is at least
//! a page and at least the largest size, so either is inside it).
//!
//! With [`Params::rdma_cm`] (perftest's `-R`) the exchange itself runs over an RDMA CM
//! connection ([`super::cm_channel::CmChannel`], made by the caller; addresses as the binary
//! `struct pingpong_dest`), and the test's QPs are connected through the RDMA CM
//! ([`crate::cm`]) where perftest 4.5 does it: after the prologue, between two handshakes, on
//! the same CM port (perftest's server has closed its control listener by then). The client
//! retries a rejected connect ten times 100 ms apart, as perftest's client (its server starts
//! listening only after the first of the two handshakes). The address handshakes that follow
//! are the same (they carry the rkey and address); the endpoints they carry are not used.
//!
//! Only RC is supported here; UC, UD and perftest options that change the exchange
//! (`-q`, `-z`, `--dont_xchg_versions`, bidirectional `-b`, `-D`, ...) are refused by the
//! command line.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use super::stats::{self, BwRow};
use super::wire::{BwReport, KeyMsg, Side, Wire, CYCLE_BUFFER};
use super::{bad_opt, perr, Info, Params, Row, Test, RX_DEPTH, TX_DEPTH};
use crate::endpoint::{Mtu, QpEndpoint};
use crate::providers::{
    Access, ConnectOpts, MemoryRegion, Pages, Provider, QpCaps, QpConfig, QpType, QueuePair,
};
use crate::{Error, Result};

mod run_iter;
use run_iter::Queues;

/// Outstanding READs this side answers (and at most initiates).
const OUT_READS: u32 = 16;
/// perftest's `cq_mod` in `send_lat`.
const SEND_LAT_CQ_MOD: u64 = 100;
/// wr_id of receives.
const RECV_WRID: u64 = u64::MAX;

/// What a two-process run reports as it goes.
// One event per size at most, made outside the measured loops (see `Row`).
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Event<'a> {
    /// Both QPs are up: `info.client` is this side's endpoint, `info.server` the peer's.
    Ready(&'a Info),
    /// One size measured on this side.
    Row(Row),
    /// The client's report of its last size, as the server of a `write_bw`/`read_bw` gets it.
    PeerReport(BwReport),
}

/// Wait for a client on TCP `port` (all IPv4 addresses), as perftest's server.
pub fn accept(port: u16) -> Result<TcpStream> {
    let l = TcpListener::bind(("0.0.0.0", port))
        .map_err(|e| Error::io(format!("perf server: listen on TCP port {port}"), &e))?;
    let (s, _) = l
        .accept()
        .map_err(|e| Error::io("perf server: accept", &e))?;
    prepare(s)
}

/// Connect to a server at `host:port`, retrying for 10 s while it comes up.
pub fn connect(host: &str, port: u16) -> Result<TcpStream> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => return prepare(s),
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            Err(e) => {
                return Err(Error::io(
                    format!("perf client: connect to {host}:{port} (is the server running?)"),
                    &e,
                ))
            }
        }
    }
}

fn prepare(s: TcpStream) -> Result<TcpStream> {
    let _ = s.set_nodelay(true);
    s.set_read_timeout(Some(Duration::from_secs(120)))
        .map_err(|e| Error::io("perf: set_read_timeout", &e))?;
    Ok(s)
}

/// The parameters both sides must agree on, as the `key=value` text of the exchange.
pub fn params_text(o: &Params) -> String {
    let sizes = if o.sizes.len() == 1 {
        o.sizes[0].to_string()
    } else {
        format!(
            "{}..{}",
            o.sizes.first().copied().unwrap_or(0),
            o.sizes.last().copied().unwrap_or(0)
        )
    };
    format!(
        "test={} connection={} size={} iterations={}",
        o.test.name(),
        o.qp_type,
        sizes,
        o.iters
    )
}

/// Run `o` on `p` against the peer at the other end of `stream`. `use_gid`: exchange the
/// GID form of the address (RoCE, or a GID index given); `events` sees the setup, then each
/// row as it is measured.
///
/// A stop ([`Params::stop`], asked after each size but the last, on the side that sweeps)
/// ends the run there with `Ok`: the rows `events` saw are the run. Where the protocol
/// lets the peer end as after a full run (the client of `read_lat`, `write_bw` and
/// `read_bw`: the closing exchange follows, with the last size's report) it runs; otherwise
/// (`write_lat`, `send_lat`, `send_bw`: the peer expects the next size) the connection is
/// dropped and the peer sees its end at its next exchange (or its completion wait's limit).
pub fn run<P: Provider, S: Read + Write>(
    p: &mut P,
    o: &Params,
    stream: S,
    side: Side,
    use_gid: bool,
    events: &mut dyn FnMut(Event<'_>),
) -> Result<()> {
    o.check()?;
    if o.qp_type != QpType::Rc {
        return Err(bad_opt(format!(
            "{}: a two-process run is RC only (perftest's UC/UD exchange is not spoken here); \
             run both ends in one process (perf::run) for {}",
            o.test.name(),
            o.qp_type
        )));
    }
    let max_size = *o.sizes.iter().max().ok_or_else(|| bad_opt("no size"))?;
    let half = (max_size.max(CYCLE_BUFFER) as usize).next_multiple_of(64);
    let send = o.test.is_send();
    let pd = p.alloc_pd()?;
    let caps = QpCaps {
        max_send_wr: TX_DEPTH,
        max_recv_wr: if send { RX_DEPTH } else { 1 },
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: o.inline,
    };
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps,
        sq_sig_all: false,
    };
    let mut scq = p.create_cq(TX_DEPTH + 1)?;
    let mut rcq = p.create_cq(RX_DEPTH + 1)?;
    let mut qp = p.create_qp(&pd, &mut scq, Some(&mut rcq), None, &cfg)?;
    if o.inline > 0 && qp.caps().max_inline_data < o.inline {
        return Err(bad_opt(format!(
            "inline {} B requested, the QP grants {} B",
            o.inline,
            qp.caps().max_inline_data
        )));
    }
    // Outgoing half `[0, half)`, incoming half `[half, 2 half)`; it lives until the run ends.
    let mut buf = p.alloc_buf(&pd, 2 * half, Access::ALL, Pages::Normal)?;
    let base = buf.as_mut_slice().as_mut_ptr() as usize;
    let read_like = o.test.is_read_like();
    let mut copts = ConnectOpts {
        port: o.port,
        gid_index: o.gid_index,
        max_rd_atomic: if read_like { OUT_READS as u8 } else { 1 },
        max_dest_rd_atomic: if read_like { OUT_READS as u8 } else { 1 },
        // perftest's: the receiver re-posts as it consumes, a sender ahead of it waits.
        rnr_retry: 7,
        ..ConnectOpts::default()
    };
    let local = p.endpoint(&qp, &copts)?;
    let mine = KeyMsg {
        lid: local.lid,
        out_reads: if read_like { OUT_READS } else { 1 },
        qpn: local.qpn,
        psn: local.psn,
        rkey: buf.rkey(),
        vaddr: (base + half) as u64,
        gid: (use_gid || local.lid == 0).then_some(local.gid),
        srqn: 0,
    };

    // perftest's server listens from its first CM handshake on; ours from before it.
    let mut cm_listener = match (o.rdma_cm, side) {
        (Some(a), Side::Server) => Some(crate::cm::Listener::bind(a)?),
        _ => None,
    };
    let mut w = if o.rdma_cm.is_some() {
        Wire::new_cm(stream, side)
    } else {
        Wire::new(stream, side)
    };
    w.versions()?;
    w.sys_data()?;
    let mtu = w.mtu(local.mtu as u32)?;
    w.params(&params_text(o))?;
    let mut cm_conn = None;
    if let Some(addr) = o.rdma_cm {
        w.hand_shake(&mine)?;
        cm_conn = Some(match cm_listener.as_mut() {
            Some(l) => l.accept(p, &mut qp, &copts, None, CM_TIMEOUT)?,
            None => cm_connect_retrying(p, &mut qp, addr, &copts)?,
        });
        w.hand_shake(&mine)?;
    }
    drop(cm_listener);
    let rem = w.hand_shake(&mine)?;
    if matches!(o.test, Test::WriteLat | Test::ReadLat | Test::AtomicLat) {
        w.hand_shake(&mine)?;
    }
    let path_mtu = Mtu::from_ibv(mtu).unwrap_or(local.mtu);
    let (local, remote, path_mtu) = match &cm_conn {
        Some(c) => (c.local, c.remote, c.remote.mtu),
        None => {
            let remote = QpEndpoint {
                lid: rem.lid,
                gid: rem.gid.unwrap_or([0; 16]),
                gid_index: o.gid_index,
                qpn: rem.qpn,
                psn: rem.psn,
                mtu: path_mtu,
                mr: None,
            };
            if read_like {
                copts.max_rd_atomic = rem.out_reads.clamp(1, OUT_READS) as u8;
            }
            copts.path_mtu = Some(path_mtu);
            p.connect(&mut qp, &local, &remote, &copts)?;
            (local, remote, path_mtu)
        }
    };
    let info = Info {
        provider: p.kind(),
        device: p.device_name().to_string(),
        mtu: path_mtu.bytes(),
        max_inline: qp.caps().max_inline_data,
        two_threads: false,
        client: local,
        server: remote,
        sizes: o.sizes.clone(),
    };
    events(Event::Ready(&info));
    w.hand_shake(&mine)?;
    w.hand_shake(&mine)?;

    let n = o.iters as usize;
    let mut tposted = vec![0u64; n];
    let mut tcompleted = vec![0u64; n];
    let mut samples = vec![0u64; n.saturating_sub(1)];
    let mut queues = Queues {
        qp: &mut qp,
        scq: &mut scq,
        rcq: &mut rcq,
        out: base,
        inc: base + half,
        lkey_sge: |off: usize, len: u32| buf.mr().sge(off, len),
        raddr: rem.vaddr,
        rkey: rem.rkey,
        posted_recvs: 0,
    };
    let lat_row = |size: u32, tposted: &[u64], samples: &mut [u64]| -> Result<Row> {
        for i in 0..n - 1 {
            samples[i] = tposted[i + 1].saturating_sub(tposted[i]);
        }
        stats::lat_row(u64::from(size), n as u64, samples, o.test.rtt_factor())
            .map(Row::Lat)
            .map_err(|e| perr(e.to_string()))
    };
    // A stop the peer cannot learn of (it expects the next size): no closing exchange.
    let mut stopped = false;
    match (o.test, side) {
        (Test::WriteLat, _) => {
            for (i, &size) in o.sizes.iter().enumerate() {
                queues.write_lat(p, o, size, side, &mut tposted)?;
                events(Event::Row(lat_row(size, &tposted, &mut samples)?));
                // No closing exchange in write_lat: a stop just ends the loop.
                if stop_after(o, i) {
                    break;
                }
            }
        }
        (Test::ReadLat | Test::AtomicLat, Side::Server) => w.close(&mine)?,
        (Test::ReadLat | Test::AtomicLat, Side::Client) => {
            for (i, &size) in o.sizes.iter().enumerate() {
                queues.read_lat(p, o, size, &mut tposted)?;
                events(Event::Row(lat_row(size, &tposted, &mut samples)?));
                if stop_after(o, i) {
                    break;
                }
            }
            w.close(&mine)?;
        }
        (Test::SendLat, _) => {
            for (i, &size) in o.sizes.iter().enumerate() {
                queues.post_recvs(size, n)?;
                w.hand_shake(&mine)?;
                queues.send_lat(p, o, size, side, &mut tposted)?;
                events(Event::Row(lat_row(size, &tposted, &mut samples)?));
                if stop_after(o, i) {
                    stopped = true;
                    break;
                }
            }
            if !stopped {
                w.close(&mine)?;
            }
        }
        (Test::WriteBw | Test::ReadBw, Side::Server) => {
            w.hand_shake(&mine)?;
            let r = w.bw_reports(&BwReport {
                size: 0,
                iters: 0,
                bw_peak: 0.0,
                bw_avg: 0.0,
                msg_rate: 0.0,
            })?;
            events(Event::PeerReport(r));
            w.close(&mine)?;
        }
        (Test::WriteBw | Test::ReadBw, Side::Client) => {
            let mut last = None;
            for (i, &size) in o.sizes.iter().enumerate() {
                queues.bw(p, o, size, &mut tposted, &mut tcompleted)?;
                let r = bw_row(o, size, &tposted, &tcompleted)?;
                last = Some(r);
                events(Event::Row(Row::Bw(r)));
                if stop_after(o, i) {
                    break;
                }
            }
            w.hand_shake(&mine)?;
            let r = last.ok_or_else(|| bad_opt("no size"))?;
            w.bw_reports(&BwReport {
                size: r.bytes,
                iters: r.iters,
                bw_peak: r.bw_peak,
                bw_avg: r.bw_avg,
                msg_rate: r.msg_rate_mpps,
            })?;
            w.close(&mine)?;
        }
        (Test::SendBw, _) => {
            for (i, &size) in o.sizes.iter().enumerate() {
                if side == Side::Server {
                    queues.post_recvs(size, n)?;
                }
                w.hand_shake(&mine)?;
                let r = if side == Side::Client {
                    queues.bw(p, o, size, &mut tposted, &mut tcompleted)?;
                    bw_row(o, size, &tposted, &tcompleted)?
                } else {
                    // From the end of the handshake (the client starts sending then) to
                    // each receive: windows start at 0 only.
                    queues.bw_server(p, size, n, &mut tposted, &mut tcompleted)?;
                    stats::bw_row(u64::from(size), n, n, 1, &tposted, &tcompleted, o.unit)
                        .map_err(|e| perr(e.to_string()))?
                };
                events(Event::Row(Row::Bw(r)));
                if stop_after(o, i) {
                    stopped = true;
                    break;
                }
                if o.sizes.len() > 1 {
                    w.hand_shake(&mine)?;
                }
            }
            if !stopped {
                w.close(&mine)?;
            }
        }
    }
    // The CM id first: destroying a connected id sends the peer its DREQ.
    drop(cm_conn);
    // The QP before the memory registered for it.
    drop(qp);
    drop(buf);
    Ok(())
}

/// Whether this side of a run of `o` measures size after size (and so asks
/// [`Params::stop`] between them): both sides of `write_lat`, `send_lat` and `send_bw`, the
/// client of `read_lat`, `write_bw` and `read_bw` (their server waits in one exchange until
/// the client is done), when there is more than one size.
pub fn sweeps(o: &Params, side: Side) -> bool {
    o.sizes.len() > 1
        && match o.test {
            Test::WriteLat | Test::SendLat | Test::SendBw => true,
            Test::ReadLat | Test::AtomicLat | Test::WriteBw | Test::ReadBw => side == Side::Client,
        }
}

/// Whether the sweep ends after size number `i` (0-based) of `o.sizes`: not the last, and
/// [`Params::stop`] asks it.
fn stop_after(o: &Params, i: usize) -> bool {
    i + 1 < o.sizes.len() && o.stop.is_some_and(|s| s.requested())
}

/// The deadline of one CM connection attempt.
const CM_TIMEOUT: Duration = Duration::from_secs(20);

/// perftest's client: a connect rejected (its server not listening yet) is retried, ten
/// attempts 100 ms apart.
fn cm_connect_retrying<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    addr: std::net::SocketAddr,
    copts: &ConnectOpts,
) -> Result<crate::cm::Connection> {
    let mut n = 0;
    loop {
        n += 1;
        match crate::cm::connect(p, qp, addr, copts, None, CM_TIMEOUT) {
            Err(Error::Io {
                kind: std::io::ErrorKind::ConnectionRefused,
                ..
            }) if n < 10 => std::thread::sleep(Duration::from_millis(100)),
            r => return r,
        }
    }
}

fn bw_row(o: &Params, size: u32, tposted: &[u64], tcompleted: &[u64]) -> Result<BwRow> {
    stats::bw_row(
        u64::from(size),
        o.iters as usize,
        o.post_list as usize,
        o.cq_mod as usize,
        tposted,
        tcompleted,
        o.unit,
    )
    .map_err(|e| perr(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::sim::SimDevice;

    /// A stream that has nothing to say and takes everything.
    struct Silent(Vec<u8>);
    impl Read for Silent {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Ok(0)
        }
    }
    impl Write for Silent {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn what_the_exchange_does_not_carry_is_refused_before_a_byte_is_sent() {
        let mut dev = SimDevice::new();
        let mut uc = Params::new(Test::WriteLat);
        uc.qp_type = QpType::Uc;
        let e = run(
            &mut dev,
            &uc,
            Silent(Vec::new()),
            Side::Client,
            true,
            &mut |_| {},
        );
        assert!(e.unwrap_err().to_string().contains("RC only"));
    }

    /// The client writes its version first; a peer that closes gets a clear error naming
    /// what was being read.
    #[test]
    fn a_silent_peer_is_an_error_naming_the_step() {
        let mut dev = SimDevice::new();
        let o = Params::new(Test::WriteLat);
        let e = run(
            &mut dev,
            &o,
            Silent(Vec::new()),
            Side::Client,
            true,
            &mut |_| {},
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("read version"), "{e}");
    }

    #[test]
    fn the_parameter_text_names_what_both_sides_must_share() {
        let mut o = Params::new(Test::SendBw);
        assert_eq!(
            params_text(&o),
            "test=send_bw connection=RC size=65536 iterations=1000"
        );
        o.sizes = Params::all_sizes();
        assert!(params_text(&o).contains("size=2..8388608"));
    }
}
