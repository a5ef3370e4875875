//! `rdma-direct pingpong`: RC/UC ping-pong that speaks `ibv_rc_pingpong`'s protocol, one
//! loop over any provider.
//!
//! The protocol is rc_pingpong's: one buffer per end for sends and receives, a CQ of
//! `rx_depth + 1`, one send outstanding, `rx_depth` receives posted before the peer can send
//! (re-posted when one is left), QP parameters MTU 1024, timeout 14, retry and RNR retry 7,
//! min RNR timer 12 (timeout and retry count settable, as perftest's `-u` and `--retry_count`;
//! rxe retries forever at 7, so a bounded run needs fewer); the client sends first, and an end sends again once its last send and
//! a receive have completed; each end sends and receives `iters` messages. [`Flow::step`] is
//! that loop body, written once, generic over the provider's queue types.
//!
//! Two ways to run it:
//!
//! - **two processes** (`-d DEV`, the verbs provider): this process is one end; without a
//!   HOST it is the server and waits on the TCP port (`-p`, 18515), with one it is the
//!   client. Either side may be rdma-core's `ibv_rc_pingpong` / `ibv_uc_pingpong`: same
//!   52-byte `LID:QPN:PSN:GID` message (client writes first; the server reads it, brings its
//!   QP up, answers; the client reads, writes "done", brings its QP up), a GRH only when `-g`
//!   is given (without it the GID sent is zero, as rc_pingpong's).
//! - **loopback** (no `-d`: the software mlx5 device, which lives in this process): both ends
//!   on the device, connected to each other, driven by one thread that alternates between
//!   them; the device thread plays the HCA, and the production mlx5 hot path (WQE writing,
//!   doorbell / BlueFlame, CQE polling) runs against it. No TCP, so a HOST and `-p` are
//!   refused; the device has one port and one GID, so `-i` and `-g` accept only those.
//!
//! Output: rc_pingpong's address lines and two result lines,
//!
//! ```text
//! 8192000 bytes in 0.37 seconds = 177.51 Mbit/sec
//! 1000 iters in 0.37 seconds = 369.18 usec/iter
//! ```
//!
//! and perftest's latency table of half the round trip: a round trip is the interval
//! between two consecutive sends of the measuring end (the client in loopback, this process
//! otherwise; its last one ends when the loop does).
//!
//! A failed completion ends the run, but first the CQ is drained: every request outstanding
//! at that moment (the send in flight and the posted receives) must complete, the failing one
//! with its error, the others flushed (`WR_FLUSH_ERR`) once the QP is in the error state. The
//! error then reads, for example,
//!
//! ```text
//! failed status RETRY_EXC_ERR (12) for wr_id 2 (vendor_err 0x0) after 41 sends and 41
//! receives completed; drain: 9 outstanding at the first error (1 send, 8 receives): 1
//! RETRY_EXC_ERR, 8 WR_FLUSH_ERR, 0 without a completion (0.00 s)
//! ```
//!
//! (one line), so a test can check that nothing outstanding was lost. The drain waits at
//! most [`DRAIN`].

use std::io::{Read, Write};
use std::net::{Ipv6Addr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use memmap2::MmapMut;
use rdma_direct::endpoint::{Mtu, PingpongMsg, PINGPONG_DONE, PINGPONG_MSG_LEN, PINGPONG_PORT};
use rdma_direct::perf::stats;
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, ProviderKind, QpCaps,
    QpConfig, QpEndpoint, QpType, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr, Sge, WcStatus,
};
use rdma_direct::{Error, Result};

use super::provider::{self, Choice};
use super::table;

const USAGE: &str = "\
usage: rdma-direct pingpong [-d DEV] [options] [HOST]
  with -d: HOST given: client (connects to HOST); none: server (waits for a client)
  without -d: both ends on the software mlx5 device in this process (no HOST, no -p)
  -d, --ib-dev DEV      RDMA device (rxe0, mlx5_0); without it: the software mlx5 device
      --provider P      auto (default: mlx5 on an mlx5 device, verbs on any other, sim
                        without -d), mlx5, verbs (libibverbs, also on mlx5), sim
  -i, --ib-port PORT    port (default 1)
  -g, --gid-idx IDX     local GID index; without it no GRH is used (needed on RoCE)
  -s, --size BYTES      message size (default 4096, at most 1 GiB)
  -n, --iters N         iterations (default 1000)
  -c, --connection T    RC or UC (default RC)
  -p, --port PORT       TCP port (default 18515)
  -m, --mtu BYTES       path MTU: 256, 512, 1024, 2048, 4096 (default 1024)
  -r, --rx-depth N      receives kept posted (default 500)
  -l, --sl SL           service level (default 0)
  -u, --timeout T       local ACK timeout exponent: 4.096 us x 2^T (default 14, 0..31)
      --retry-cnt N     transport retries before RETRY_EXC_ERR (default 7, 0..7; rxe
                        retries forever at 7); also --retry_count
  A failed completion ends the run after the CQ is drained: the error line counts how every
  request outstanding at that moment completed (the others must be WR_FLUSH_ERR).
Interoperates with rdma-core's ibv_rc_pingpong / ibv_uc_pingpong on either side.
";

const MAX_SIZE: usize = 1 << 30;
/// wr_ids, as rc_pingpong's: bits of [`Flow::pending`].
const RECV_WRID: u64 = 1;
const SEND_WRID: u64 = 2;
/// A run with no completion for this long has lost its peer (or its device).
const STALL: Duration = Duration::from_secs(20);
/// After a failed completion, how long the outstanding requests get to complete (flushed).
const DRAIN: Duration = Duration::from_secs(10);

#[derive(Debug, PartialEq, Eq)]
struct Args {
    dev: Option<String>,
    ib_port: u8,
    gid_idx: Option<u8>,
    size: usize,
    iters: u32,
    qp_type: QpType,
    /// `-p`; `None` = [`PINGPONG_PORT`].
    port: Option<u16>,
    mtu: Mtu,
    rx_depth: u32,
    sl: u8,
    /// `-u`: local ACK timeout exponent.
    timeout: u8,
    /// `--retry-cnt`: transport retries.
    retry_cnt: u8,
    host: Option<String>,
    provider: Choice,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            dev: None,
            ib_port: 1,
            gid_idx: None,
            size: 4096,
            iters: 1000,
            qp_type: QpType::Rc,
            port: None,
            mtu: Mtu::Mtu1024,
            rx_depth: 500,
            sl: 0,
            timeout: 14,
            retry_cnt: 7,
            host: None,
            provider: Choice::Auto,
        }
    }
}

fn num<T: std::str::FromStr>(name: &str, v: &str) -> std::result::Result<T, String> {
    v.parse()
        .map_err(|_| format!("{name}: '{v}' is not a number"))
}

fn parse_args(args: &[String]) -> std::result::Result<Option<Args>, String> {
    let mut a = Args::default();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let (flag, attached) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg.as_str(), None),
        };
        let mut val = || -> std::result::Result<String, String> {
            match &attached {
                Some(v) => Ok(v.clone()),
                None => it
                    .next()
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value")),
            }
        };
        match flag {
            "-h" | "--help" => return Ok(None),
            "-d" | "--ib-dev" => a.dev = Some(val()?),
            "--provider" => a.provider = Choice::parse(&val()?)?,
            "-i" | "--ib-port" => a.ib_port = num(flag, &val()?)?,
            "-g" | "--gid-idx" => a.gid_idx = Some(num(flag, &val()?)?),
            "-s" | "--size" => a.size = num(flag, &val()?)?,
            "-n" | "--iters" => a.iters = num(flag, &val()?)?,
            "-p" | "--port" => a.port = Some(num(flag, &val()?)?),
            "-r" | "--rx-depth" => a.rx_depth = num(flag, &val()?)?,
            "-l" | "--sl" => a.sl = num(flag, &val()?)?,
            "-u" | "--timeout" | "--qp-timeout" => a.timeout = num(flag, &val()?)?,
            "--retry-cnt" | "--retry_count" => a.retry_cnt = num(flag, &val()?)?,
            "-m" | "--mtu" => {
                let v = val()?;
                a.mtu = Mtu::from_bytes(num(flag, &v)?).ok_or_else(|| {
                    format!("{flag}: MTU {v} is not 256, 512, 1024, 2048 or 4096")
                })?;
            }
            "-c" | "--connection" => {
                a.qp_type = match val()?.to_ascii_uppercase().as_str() {
                    "RC" => QpType::Rc,
                    "UC" => QpType::Uc,
                    other => return Err(format!("{flag}: '{other}' is not RC or UC")),
                }
            }
            s if s.starts_with('-') => return Err(format!("unknown option '{s}'")),
            host => {
                if a.host.is_some() {
                    return Err(format!("more than one HOST given ('{host}')"));
                }
                a.host = Some(host.to_string());
            }
        }
    }
    if a.size == 0 || a.size > MAX_SIZE {
        return Err(format!("size {} out of range (1 .. {MAX_SIZE})", a.size));
    }
    if a.iters == 0 {
        return Err("iters must be at least 1".into());
    }
    if a.rx_depth < 2 || a.rx_depth > 16384 {
        return Err(format!("rx-depth {} out of range (2 .. 16384)", a.rx_depth));
    }
    if a.ib_port == 0 {
        return Err("ib-port is 1-based".into());
    }
    if a.timeout > 31 {
        return Err(format!(
            "timeout {} out of range (0 .. 31: 4.096 us x 2^T)",
            a.timeout
        ));
    }
    if a.retry_cnt > 7 {
        return Err(format!("retry-cnt {} out of range (0 .. 7)", a.retry_cnt));
    }
    if a.dev.is_none() && matches!(a.provider, Choice::Auto | Choice::Force(ProviderKind::Sim)) {
        // Loopback on the software mlx5 device: say why what needs a peer or a second port
        // cannot apply.
        if let Some(h) = &a.host {
            return Err(format!(
                "HOST '{h}': without -d both ends run on the software mlx5 device in this \
                 process, which no other process can reach; a peer on a host needs -d DEV"
            ));
        }
        if a.port.is_some() {
            return Err(
                "-p: without -d both ends run in this process and exchange no TCP message; \
                 the TCP port is for -d DEV"
                    .into(),
            );
        }
        if a.ib_port != 1 {
            return Err(format!(
                "-i {}: the software mlx5 device has one port (1)",
                a.ib_port
            ));
        }
        if a.gid_idx.is_some_and(|g| g != 0) {
            return Err(format!(
                "-g {}: the software mlx5 device has one GID (index 0)",
                a.gid_idx.unwrap_or(0)
            ));
        }
    }
    Ok(Some(a))
}

/// Entry point of `rdma-direct pingpong`.
pub fn run(args: &[String]) -> i32 {
    let a = match parse_args(args) {
        Ok(Some(a)) => a,
        Ok(None) => {
            print!("{USAGE}");
            return 0;
        }
        Err(e) => {
            eprintln!("rdma-direct pingpong: {e}\n\n{USAGE}");
            return 2;
        }
    };
    let (kind, why) = match provider::select("pingpong", a.provider, a.dev.as_deref()) {
        Ok(k) => k,
        Err(status) => return status,
    };
    let res = match kind {
        ProviderKind::Sim => on_the_sim(&a),
        _ => provider::open_and_run(kind, a.dev.as_deref(), false, &mut TwoProcess(&a)),
    };
    match res {
        Ok(text) => {
            // The first line names the provider; how it was chosen closes the output.
            println!("{text}provider choice: {why}");
            0
        }
        Err(e) => {
            eprintln!("rdma-direct pingpong: {e}");
            1
        }
    }
}

/// [`two_process`] for [`provider::open_and_run`].
struct TwoProcess<'a>(&'a Args);

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

fn io_err(ctx: &str, e: std::io::Error) -> Error {
    Error::io(ctx.to_string(), &e)
}

fn perr(detail: String) -> Error {
    Error::Protocol {
        context: "pingpong",
        detail,
    }
}

/// rc_pingpong's address line: `  local address:  LID 0x0000, QPN 0x000100, ...`.
fn dest_line(which: &str, lid: u16, qpn: u32, psn: u32, gid: &[u8; 16]) -> String {
    format!(
        "  {:<16}LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}\n",
        format!("{which} address:"),
        lid,
        qpn,
        psn,
        Ipv6Addr::from(*gid)
    )
}

fn ep_line(which: &str, e: &QpEndpoint) -> String {
    dest_line(which, e.lid, e.qpn, e.psn, &e.gid)
}

fn msg_line(which: &str, m: &PingpongMsg) -> String {
    dest_line(which, m.lid, m.qpn, m.psn, &m.gid)
}

/// The bring-up parameters of `a` (rc_pingpong's, with its MTU, port, GID index and SL).
fn connect_opts(a: &Args) -> ConnectOpts {
    ConnectOpts {
        port: a.ib_port,
        gid_index: a.gid_idx.unwrap_or(0),
        path_mtu: Some(a.mtu),
        sl: a.sl,
        // rc_pingpong's (retry forever; its receives are posted before the first send).
        rnr_retry: 7,
        timeout: a.timeout,
        retry_cnt: a.retry_cnt,
        ..ConnectOpts::default()
    }
}

/// One end's resources, as rc_pingpong's `pp_init_ctx`. Field order is drop order: the QP
/// before its CQ, the MR before the PD, the memory last.
struct End<P: Provider> {
    qp: P::Qp,
    cq: P::Cq,
    mr: P::Mr,
    _pd: P::Pd,
    _buf: MmapMut,
}

fn open_end<P: Provider>(p: &mut P, a: &Args) -> Result<End<P>> {
    let page = 4096;
    let mut buf =
        MmapMut::map_anon(a.size.div_ceil(page) * page).map_err(|e| io_err("mmap buffer", e))?;
    buf.fill(0x7b);
    let pd = p.alloc_pd()?;
    // SAFETY: `buf` is kept in the end next to `mr` and dropped after it (field order).
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), a.size, Access::LOCAL_WRITE)? };
    let mut cq = p.create_cq(a.rx_depth + 1)?;
    let cfg = QpConfig {
        qp_type: a.qp_type,
        caps: QpCaps {
            max_send_wr: 1,
            max_recv_wr: a.rx_depth,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    };
    let qp = p.create_qp(&pd, &mut cq, None, None, &cfg)?;
    Ok(End {
        qp,
        cq,
        mr,
        _pd: pd,
        _buf: buf,
    })
}

/// rc_pingpong's loop state of one end.
struct Flow {
    /// wr_id bits that must complete before the next send.
    pending: u64,
    /// Receives posted.
    routs: u32,
    /// Sends posted and not completed.
    souts: u32,
    scnt: u32,
    rcnt: u32,
    iters: u32,
    rx_depth: u32,
    sge: [Sge; 1],
    /// Send times of the measuring end (preallocated; nothing grows in the loop).
    stamps: Option<Vec<Instant>>,
}

impl Flow {
    fn new<P: Provider>(end: &End<P>, a: &Args, measure: bool) -> Flow {
        Flow {
            pending: RECV_WRID,
            routs: 0,
            souts: 0,
            scnt: 0,
            rcnt: 0,
            iters: a.iters,
            rx_depth: a.rx_depth,
            sge: [end.mr.sge(0, a.size as u32)],
            stamps: measure.then(|| Vec::with_capacity(a.iters as usize + 1)),
        }
    }

    fn done(&self) -> bool {
        self.rcnt >= self.iters && self.scnt >= self.iters
    }

    /// Post receives until `rx_depth` are up; fails if none more could be posted.
    fn fill<Q: QueuePair>(&mut self, qp: &mut Q) -> Result<()> {
        let rq = qp.rq();
        while self.routs < self.rx_depth {
            let wr = RecvWr {
                wr_id: RECV_WRID,
                sges: &self.sge,
            };
            if rq.post_recv(wr).is_err() {
                break;
            }
            self.routs += 1;
        }
        rq.ring();
        if self.routs < self.rx_depth {
            return Err(perr(format!(
                "could only post {} of {} receives",
                self.routs, self.rx_depth
            )));
        }
        Ok(())
    }

    fn send<Q: QueuePair>(&mut self, qp: &mut Q) -> Result<()> {
        if let Some(s) = &mut self.stamps {
            s.push(Instant::now());
        }
        let sq = qp.sq();
        sq.post(SendWr::send(SEND_WRID, &self.sge).signaled())
            .map_err(|r| perr(format!("post send: {}", r.error)))?;
        sq.ring();
        self.souts += 1;
        self.pending = RECV_WRID | SEND_WRID;
        Ok(())
    }

    /// The client's first send.
    fn start<Q: QueuePair>(&mut self, qp: &mut Q) -> Result<()> {
        self.send(qp)
    }

    /// One turn of rc_pingpong's loop: poll the CQ once and react to every completion.
    /// Returns whether anything completed.
    fn step<Q: QueuePair, C: CompletionQueue>(
        &mut self,
        qp: &mut Q,
        cq: &mut C,
        wc: &mut [Completion],
        who: &str,
    ) -> Result<bool> {
        let n = cq.poll(wc);
        for (i, c) in wc[..n].iter().enumerate() {
            if !c.is_ok() {
                let drained = self.drain(cq, &wc[i..n]);
                return Err(perr(format!(
                    "{who}failed status {} ({}) for wr_id {} (vendor_err {:#x}) after {} sends \
                     and {} receives completed; {drained}",
                    c.status,
                    c.status.to_ibv(),
                    c.wr_id,
                    c.vendor_err,
                    self.scnt,
                    self.rcnt
                )));
            }
            match c.wr_id {
                SEND_WRID => {
                    self.scnt += 1;
                    self.souts -= 1;
                }
                RECV_WRID => {
                    self.routs -= 1;
                    if self.routs <= 1 {
                        self.fill(qp)?;
                    }
                    self.rcnt += 1;
                }
                other => return Err(perr(format!("{who}completion for unknown wr_id {other}"))),
            }
            self.pending &= !c.wr_id;
            if self.scnt < self.iters && self.pending == 0 {
                self.send(qp)?;
            }
        }
        Ok(n > 0)
    }

    /// After a failed completion (`first[0]`; the rest of its poll follows it): poll until
    /// every request outstanding at that moment has completed, or [`DRAIN`] has passed, and
    /// say how each completed (counts per status, in order of first appearance).
    fn drain<C: CompletionQueue>(&self, cq: &mut C, first: &[Completion]) -> String {
        let outstanding = self.souts + self.routs;
        let mut counts: Vec<(WcStatus, u32)> = Vec::new();
        let tally = |counts: &mut Vec<(WcStatus, u32)>, done: &[Completion]| {
            for c in done {
                match counts.iter_mut().find(|(s, _)| *s == c.status) {
                    Some((_, k)) => *k += 1,
                    None => counts.push((c.status, 1)),
                }
            }
            done.len() as u32
        };
        let mut seen = tally(&mut counts, first);
        let t0 = Instant::now();
        let mut wc = [Completion::EMPTY; 16];
        while seen < outstanding && t0.elapsed() < DRAIN {
            let n = cq.poll(&mut wc);
            if n == 0 {
                std::thread::sleep(Duration::from_millis(1));
            }
            seen += tally(&mut counts, &wc[..n]);
        }
        drain_line(outstanding, self.souts, self.routs, &counts, t0.elapsed())
    }
}

/// The drain's report: `drain: N outstanding at the first error (S sends, R receives): 1
/// RETRY_EXC_ERR, 8 WR_FLUSH_ERR, 0 without a completion (0.00 s)`.
fn drain_line(
    outstanding: u32,
    sends: u32,
    recvs: u32,
    counts: &[(WcStatus, u32)],
    took: Duration,
) -> String {
    let seen: u32 = counts.iter().map(|(_, k)| k).sum();
    let mut s = format!(
        "drain: {outstanding} outstanding at the first error ({sends} send{}, {recvs} receive{}):",
        if sends == 1 { "" } else { "s" },
        if recvs == 1 { "" } else { "s" }
    );
    for (st, k) in counts {
        s.push_str(&format!(" {k} {st},"));
    }
    s.push_str(&format!(
        " {} without a completion ({:.2} s)",
        outstanding.saturating_sub(seen),
        took.as_secs_f64()
    ));
    s
}

/// Idle turns of a loop: a spin-loop hint each, and an error after [`STALL`] without a
/// completion (the clock is read once per 4096 idle turns).
struct Stall {
    idle: u32,
    since: Option<Instant>,
}

impl Stall {
    fn new() -> Stall {
        Stall {
            idle: 0,
            since: None,
        }
    }
    fn progressed(&mut self) {
        self.idle = 0;
        self.since = None;
    }
    fn idle(&mut self, what: impl FnOnce() -> String) -> Result<()> {
        std::hint::spin_loop();
        self.idle = self.idle.wrapping_add(1);
        if self.idle % 4096 == 0 {
            match self.since {
                None => self.since = Some(Instant::now()),
                Some(t) if t.elapsed() > STALL => {
                    return Err(perr(format!("no completion for {STALL:?}: {}", what())))
                }
                Some(_) => {}
            }
        }
        Ok(())
    }
}

/// rc_pingpong's result lines and the latency table of the measuring end's send times
/// (closed by `end`).
fn results(a: &Args, elapsed: Duration, stamps: &[Instant], end: Instant) -> String {
    let usec = elapsed.as_secs_f64() * 1e6;
    let bytes = a.size as u64 * u64::from(a.iters) * 2;
    let mut out = format!(
        "{bytes} bytes in {:.2} seconds = {:.2} Mbit/sec\n",
        usec / 1e6,
        bytes as f64 * 8.0 / usec
    );
    out.push_str(&format!(
        "{} iters in {:.2} seconds = {:.2} usec/iter\n",
        a.iters,
        usec / 1e6,
        usec / f64::from(a.iters)
    ));
    let mut samples: Vec<u64> = stamps
        .windows(2)
        .map(|w| w[1].duration_since(w[0]).as_nanos() as u64)
        .collect();
    if let Some(last) = stamps.last() {
        samples.push(end.duration_since(*last).as_nanos() as u64);
    }
    out.push_str(&latency_block(a.size as u64, a.iters, &samples));
    out
}

/// perftest's latency table of round-trip `samples` (ns), reported as half the round trip;
/// with fewer than 3 samples a line that says so.
fn latency_block(bytes: u64, iters: u32, samples: &[u64]) -> String {
    match stats::lat_row(bytes, u64::from(iters), samples, 2) {
        Ok(r) => format!(
            "latency (half round trip: consecutive sends of the measuring end, halved):\n{}\n{}\n",
            table::lat_header(),
            table::lat_line(&r)
        ),
        Err(e) => format!("latency: no table ({e})\n"),
    }
}

/// Loopback on the software mlx5 device, with its device thread; the text to print.
fn on_the_sim(a: &Args) -> Result<String> {
    let mut dev = SimDevice::new();
    let mut text = loopback(&mut dev, a, &mut |dev: &mut SimDevice| {
        dev.start_device_thread()?;
        // Start the clock once the device thread runs (a pass done), so thread start-up is
        // not counted as the first round trip.
        let t0 = Instant::now();
        while dev.stats().passes == 0 && t0.elapsed() < Duration::from_secs(10) {
            std::thread::yield_now();
        }
        Ok(())
    })?;
    dev.stop_device_thread();
    let st = dev.stats();
    text.push_str(&format!(
        "sim device: {} doorbells, {} WQEs, {} CQEs, {} engine passes\n",
        st.doorbells, st.wqes, st.cqes, st.passes
    ));
    Ok(text)
}

/// Both ends on `p`, connected to each other, one thread alternating between them.
/// `ready` runs after the bring-up, before the first send.
fn loopback<P: Provider>(
    p: &mut P,
    a: &Args,
    ready: &mut dyn FnMut(&mut P) -> Result<()>,
) -> Result<String> {
    let opts = connect_opts(a);
    let mut client = open_end(p, a)?;
    let mut server = open_end(p, a)?;
    let ce = p.endpoint(&client.qp, &opts)?;
    let se = p.endpoint(&server.qp, &opts)?;
    p.connect(&mut server.qp, &se, &ce, &opts)?;
    p.connect(&mut client.qp, &ce, &se, &opts)?;
    let mut cf = Flow::new(&client, a, true);
    let mut sf = Flow::new(&server, a, false);
    cf.fill(&mut client.qp)?;
    sf.fill(&mut server.qp)?;
    let mut out = format!(
        "provider: {}\n",
        table::provider_label(p.kind(), p.device_name())
    );
    out.push_str(&ep_line("local", &ce));
    out.push_str(&ep_line("remote", &se));
    ready(p)?;

    let mut wc = [Completion::EMPTY; 16];
    let mut stall = Stall::new();
    let start = Instant::now();
    cf.start(&mut client.qp)?;
    while !cf.done() || !sf.done() {
        let c = cf.step(&mut client.qp, &mut client.cq, &mut wc, "client: ")?;
        let s = sf.step(&mut server.qp, &mut server.cq, &mut wc, "server: ")?;
        if c || s {
            stall.progressed();
        } else {
            p.progress();
            stall.idle(|| {
                format!(
                    "client {}/{} sent/received, server {}/{}: the device stalled",
                    cf.scnt, cf.rcnt, sf.scnt, sf.rcnt
                )
            })?;
        }
    }
    let end = Instant::now();
    out.push_str(&results(
        a,
        end.duration_since(start),
        cf.stamps.as_deref().unwrap_or(&[]),
        end,
    ));
    Ok(out)
}

/// Client side of the exchange: connect (retrying for a few seconds while the server comes
/// up), write ours, read theirs, write "done".
fn client_exchange(host: &str, port: u16, mine: &PingpongMsg) -> Result<PingpongMsg> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut s = loop {
        match TcpStream::connect((host, port)) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => return Err(io_err(&format!("connect to {host}:{port}"), e)),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| io_err("set_read_timeout", e))?;
    s.write_all(&mine.format()?)
        .map_err(|e| io_err("write local address", e))?;
    let mut buf = [0u8; PINGPONG_MSG_LEN];
    s.read_exact(&mut buf)
        .map_err(|e| io_err("read remote address", e))?;
    let rem = PingpongMsg::parse(&buf)?;
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
    if a.gid_idx.is_none() {
        // rc_pingpong sends a zero GID without -g: the peer then uses no GRH.
        local.gid = [0; 16];
    }
    let mine = PingpongMsg::from_endpoint(&local);
    print!(
        "provider: {}\n{}",
        table::provider_label(p.kind(), p.device_name()),
        msg_line("local", &mine)
    );
    let _ = std::io::stdout().flush();
    let mut flow = Flow::new(&end, a, true);

    // The exchange, and the bring-up at the point rc_pingpong does it. Our receives are
    // posted right after the QP reaches RTS and before the peer can send to us.
    let rem = match &a.host {
        Some(host) => {
            let rem = client_exchange(host, port, &mine)?;
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
    print!("{}", msg_line("remote", &rem));
    let _ = std::io::stdout().flush();

    let mut wc = [Completion::EMPTY; 16];
    let mut stall = Stall::new();
    let start = Instant::now();
    if a.host.is_some() {
        flow.start(&mut end.qp)?;
    }
    while !flow.done() {
        if flow.step(&mut end.qp, &mut end.cq, &mut wc, "")? {
            stall.progressed();
        } else {
            p.progress();
            stall.idle(|| {
                format!(
                    "after {} sends and {} receives: is the peer still running?",
                    flow.scnt, flow.rcnt
                )
            })?;
        }
    }
    let end_t = Instant::now();
    Ok(results(
        a,
        end_t.duration_since(start),
        flow.stamps.as_deref().unwrap_or(&[]),
        end_t,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_rc_pingpong_options() {
        let a = parse_args(&args(
            "-d rxe0 -g 1 -s 65536 -n 50 -c uc -p 19000 -m 2048 -r 64 127.0.0.1",
        ))
        .unwrap()
        .unwrap();
        assert_eq!(a.dev.as_deref(), Some("rxe0"));
        assert_eq!(a.gid_idx, Some(1));
        assert_eq!(a.size, 65536);
        assert_eq!(a.iters, 50);
        assert_eq!(a.qp_type, QpType::Uc);
        assert_eq!(a.port, Some(19000));
        assert_eq!(a.mtu, Mtu::Mtu2048);
        assert_eq!(a.rx_depth, 64);
        assert_eq!(a.host.as_deref(), Some("127.0.0.1"));
        let d = parse_args(&args("-d rxe0")).unwrap().unwrap();
        assert_eq!(
            (d.size, d.iters, d.port, d.rx_depth),
            (4096, 1000, None, 500)
        );
        assert_eq!(d.mtu, Mtu::Mtu1024);
        assert!(d.host.is_none());
    }

    #[test]
    fn retry_count_and_timeout_reach_the_bring_up() {
        let d = parse_args(&args("-d rxe0")).unwrap().unwrap();
        let o = connect_opts(&d);
        assert_eq!((o.timeout, o.retry_cnt), (14, 7));
        for s in [
            "-d rxe0 --retry-cnt 1 -u 12",
            "-d rxe0 --retry_count=1 --timeout=12",
        ] {
            let a = parse_args(&args(s)).unwrap().unwrap();
            let o = connect_opts(&a);
            assert_eq!((o.timeout, o.retry_cnt), (12, 1), "{s}");
            // Nothing else moves.
            assert_eq!(
                ConnectOpts {
                    timeout: 14,
                    retry_cnt: 7,
                    ..o
                },
                connect_opts(&d),
                "{s}"
            );
        }
    }

    #[test]
    fn the_drain_line_counts_every_outstanding_request() {
        let counts = [(WcStatus::RetryExcErr, 1), (WcStatus::WrFlushErr, 8)];
        assert_eq!(
            drain_line(9, 1, 8, &counts, Duration::from_millis(20)),
            "drain: 9 outstanding at the first error (1 send, 8 receives): 1 RETRY_EXC_ERR, \
             8 WR_FLUSH_ERR, 0 without a completion (0.02 s)"
        );
        assert_eq!(
            drain_line(3, 0, 3, &counts[..1], Duration::ZERO),
            "drain: 3 outstanding at the first error (0 sends, 3 receives): 1 RETRY_EXC_ERR, \
             2 without a completion (0.00 s)"
        );
    }

    #[test]
    fn bad_options_are_errors() {
        for (s, want) in [
            ("-d rxe0 -s 0", "out of range"),
            ("-d rxe0 -s 2000000000", "out of range"),
            ("-d rxe0 -m 1000", "not 256"),
            ("-d rxe0 -c XRC", "not RC or UC"),
            ("-d rxe0 -n x", "not a number"),
            ("-d rxe0 -n", "needs a value"),
            ("-d rxe0 --frob", "unknown option"),
            ("-d rxe0 a b", "more than one HOST"),
            ("-d rxe0 -r 1", "rx-depth"),
            ("-d rxe0 --retry-cnt 8", "retry-cnt 8 out of range"),
            ("-d rxe0 -u 32", "timeout 32 out of range"),
        ] {
            let e = parse_args(&args(s)).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }

    #[test]
    fn without_a_device_options_parse_like_rc_pingpong() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(parse_args(&a(&[])).unwrap(), Some(Args::default()));
        let o = parse_args(&a(&["-s", "64", "--iters=10", "-r", "8", "-m", "2048"]))
            .unwrap()
            .unwrap();
        assert_eq!(
            (o.size, o.iters, o.rx_depth, o.mtu.bytes()),
            (64, 10, 8, 2048)
        );
        assert_eq!(parse_args(&a(&["-h"])).unwrap(), None);
        assert!(parse_args(&a(&["-s"]))
            .unwrap_err()
            .contains("needs a value"));
        assert!(parse_args(&a(&["-s", "x"]))
            .unwrap_err()
            .contains("not a number"));
        assert!(parse_args(&a(&["-m", "1000"]))
            .unwrap_err()
            .contains("1000"));
        assert!(parse_args(&a(&["-n", "0"])).is_err());
        assert!(parse_args(&a(&["--bogus"]))
            .unwrap_err()
            .contains("--bogus"));
    }

    #[test]
    fn without_a_device_what_makes_sense_is_accepted_the_rest_refused_with_a_reason() {
        let ok = parse_args(&args("-c UC -g 0 -i 1 -l 3")).unwrap().unwrap();
        assert_eq!((ok.qp_type, ok.gid_idx, ok.sl), (QpType::Uc, Some(0), 3));
        for (s, want) in [
            ("127.0.0.1", "needs -d DEV"),
            ("-p 19000", "the TCP port is for -d DEV"),
            ("-i 2", "one port"),
            ("-g 1", "one GID"),
        ] {
            let e = parse_args(&args(s)).unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }

    #[test]
    fn latency_is_perftests_table_of_half_the_round_trip() {
        // 10 round trips of 2..=20 us (1..=10 us halved): perftest drops the two largest, so
        // 8 are kept (1..=8 us); the median of an even count is the mean of the middle two.
        let s: Vec<u64> = (1..=10u64).rev().map(|k| 2000 * k).collect();
        let t = latency_block(2, 10, &s);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[0].starts_with("latency (half round trip"), "{t}");
        assert_eq!(lines[1], table::lat_header());
        let row: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(
            row,
            ["2", "10", "1.00", "9.00", "4.50", "4.50", "2.29", "9.00", "9.00"]
        );
        assert!(latency_block(2, 2, &[1000, 2000]).contains("no table"));
    }

    #[test]
    fn loopback_on_the_deterministic_sim() {
        // No device thread: the loop's `progress` runs the device until idle.
        for c in ["RC", "UC"] {
            let a = parse_args(&args(&format!("-s 64 -n 20 -r 4 -c {c}")))
                .unwrap()
                .unwrap();
            let mut dev = SimDevice::new();
            let out = loopback(&mut dev, &a, &mut |_| Ok(())).expect("loopback");
            assert!(out.contains("2560 bytes in "), "{out}");
            assert!(out.contains("20 iters in "), "{out}");
            assert_eq!(dev.stats().wqes, 40, "{c}: {out}");
        }
    }
}
