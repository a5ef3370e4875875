//! A gateway that survives its peer restarting: it streams numbered 64-byte orders (WRITE
//! WITH IMMEDIATE through the typed `SendWr::write_imm_to`, 16 a batch, the last one
//! signaled) into the peer's ring, and leaves the fault handling to the library's recovery
//! helper (`Recovery`, `probe`): a fault shows as a completion (`RETRY_EXC_ERR`, the rest
//! flushed: nothing is silent), `Recovery` moves the QP to ERR and drains every outstanding
//! request, counted per request, and the gateway reconnects and resends from where the peer
//! resumes. Only the prelude, no `unsafe`.
//!
//! ```text
//! cargo run --release --example reconnect                  # the sim, 2000 batches, 4 restarts
//! cargo run --release --example reconnect -- -n 200 -r 50
//! reconnect -d rxe0 -x 1 --state /var/tmp/orders.state     # receiver (server)
//! reconnect -d rxe0 -x 1 -n 8000 HOST                       # gateway (client)
//! ```
//! **On the sim** (no `-d`): both ends in one process; every EVERY batches the peer
//! "restarts" (its QP is destroyed with a batch in flight, as the kernel destroys a killed
//! process's QP, and a new one comes up). `Recovery::recover` drains the gateway's QP, lists
//! the orders that failed, and reconnects the same QP (through RESET) to the new peer; the
//! gateway resends from the first failed one and the peer checks that the orders arrive in
//! sequence. Options: `-n BATCHES` (default 2000), `-r EVERY` (default 500).
//!
//! **On a device** (`-d DEV`; mlx5 through the direct provider, anything else through
//! libibverbs), two processes, endpoints exchanged over TCP (`-p PORT`, default 18520;
//! `-x GID_INDEX`), a new QP per connection (`Recovery::drain` ends the old one):
//! - the receiver (no HOST) checks every order byte for byte in sequence, keeps its progress
//!   in `--state FILE` after each batch (so a receiver killed and started again resumes where
//!   it stopped), confirms each batch with a SEND WITH IMMEDIATE carrying its count, and
//!   takes a new connection whenever the old one fails (an error completion, a refused post,
//!   or the gateway's TCP connection closing: then the drain moves its QP to ERR);
//! - the gateway (HOST) sends `-n ORDERS` (default 20000, rounded up to whole batches), at
//!   most 64 unconfirmed. `timeout` 16 and `retry_cnt` 2 bound how long a vanished peer takes
//!   to show: three tries 268 ms apart, 0.81 s; with nothing in flight it sends a `probe`
//!   every 200 ms, so a peer that vanished while it waited for credit shows the same way. On
//!   a fault it prints how every outstanding request ended (`first_error`, `flushed`,
//!   `other`, `missing`: never more than 0 without an error exit), then reconnects (for up
//!   to 120 s) and prints how many of the orders in flight had reached the receiver and how
//!   many were lost in flight and resent from where the receiver resumes.
//!
//! Both ends end with the FNV-1a checksum of the whole stream (the receiver's over what it
//! received, kept across its restarts): equal when every byte arrived once, in order.
//! `tests/guest/pair/60-restart.sh` and `70-flap.sh` run it between two guests over rxe.

use rdma_direct::prelude::*;
use std::net::TcpStream;
use std::time::{Duration, Instant};

mod gateway;
mod receiver;
mod sim;

const BATCH: u64 = 16;
const ORDER: usize = 64;
/// Order slots in the receiver's ring (a multiple of `BATCH`): the gateway's window.
const RING: u64 = 64;
/// The gateway's credit receives (the receiver confirms once per batch).
const CREDITS: u32 = (RING / BATCH) as u32 + 2;
/// A gateway with nothing in flight for this long sends a liveness probe.
const HEARTBEAT: Duration = Duration::from_millis(200);
/// A drain that sees no completion for this long is an error (the helper's `stall`).
const DRAIN: Duration = Duration::from_secs(5);
/// How long the gateway keeps trying to reach a restarted receiver.
const RECONNECT: Duration = Duration::from_secs(120);
/// The id base of every receive: after a flush only a completion's wr_id is reliable.
const RECV_ID: u64 = 1 << 62;

struct Args {
    host: Option<String>,
    state: Option<String>,
    port: u16,
    gid: u8,
    total: u64,
}

fn proto(detail: String) -> Error {
    Error::Protocol {
        context: "reconnect example",
        detail,
    }
}

/// `timeout` 16 (268 ms) and `retry_cnt` 2 (three tries): a vanished peer shows in 0.81 s.
fn device_opts(gid: u8) -> ConnectOpts {
    ConnectOpts {
        gid_index: gid,
        timeout: 16,
        retry_cnt: 2,
        ..ConnectOpts::default()
    }
}

/// Order `seq`'s 64 bytes: its number, then 7 copies of a hash of it (little endian).
fn order_bytes(seq: u64) -> [u8; ORDER] {
    let mut o = [0u8; ORDER];
    o[..8].copy_from_slice(&seq.to_le_bytes());
    let mut z = seq.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    for c in o[8..].chunks_mut(8) {
        c.copy_from_slice(&z.to_le_bytes());
    }
    o
}

const FNV0: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a over the bytes of a stream of orders, continued from `h`.
fn fnv(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
}

fn read_u64(s: &mut TcpStream, what: &str) -> Result<u64> {
    use std::io::Read;
    let mut b = [0u8; 8];
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .and_then(|()| s.read_exact(&mut b))
        .map_err(|e| Error::io(format!("reconnect: reading {what}"), &e))?;
    Ok(u64::from_le_bytes(b))
}

fn write_u64(s: &mut TcpStream, v: u64, what: &str) -> Result<()> {
    use std::io::Write;
    s.write_all(&v.to_le_bytes())
        .map_err(|e| Error::io(format!("reconnect: sending {what}"), &e))
}

/// Whether a post refusal means the device failed the QP (a fault to recover from).
fn post_fault(e: &PostError) -> bool {
    matches!(e, PostError::BadState { .. } | PostError::CqError { .. })
}

/// One connection's QP and CQ with the library's helpers on them: the send window, the
/// receives kept posted (ids from `RECV_ID`) and the recovery. A new one per connection.
struct Link<P: Provider> {
    qp: P::Qp,
    cq: P::Cq,
    window: SendWindow,
    recvs: RecvReplenisher,
    rec: Recovery,
}

/// How the requests outstanding at a fault ended (printed in the line the guest tests read).
struct Tally {
    first: Option<WcStatus>,
    what: &'static str,
    sends: u64,
    recvs: u64,
    first_error: u64,
    flushed: u64,
    other: u64,
    secs: f64,
}

impl<P: Provider> Link<P> {
    /// `sends` requests in flight at most (plus the slot the recovery's marker needs).
    fn new(p: &mut P, pd: &P::Pd, sends: u32, recvs: u32) -> Result<Self> {
        let mut cq = p.create_cq(sends + recvs + 1)?;
        let mut c = QpConfig::new(QpType::Rc);
        (c.caps.max_send_wr, c.caps.max_recv_wr) = (sends + 1, recvs);
        let qp = p.create_qp(pd, &mut cq, None, None, &c)?;
        let window = Recovery::send_window(&qp);
        let rec = Recovery::new(&window, DRAIN);
        let recvs = RecvReplenisher::new(recvs).with_id_base(RECV_ID);
        Ok(Link {
            qp,
            cq,
            window,
            recvs,
            rec,
        })
    }

    /// Books a completion the application polled; true for a receive.
    fn take(&mut self, c: &Completion) -> bool {
        let recv = self.recvs.owns(c.wr_id);
        if recv {
            self.recvs.consumed(c);
        } else {
            self.window.retire(c);
        }
        recv
    }

    /// After a fault (`first` the error completion the application polled, `rest` what that
    /// poll returned after it; `None` when the fault came from elsewhere): books those, then
    /// `Recovery::drain` moves the QP to ERR and ends every request still outstanding.
    fn fault(
        &mut self,
        p: &mut P,
        first: Option<&Completion>,
        rest: &[Completion],
    ) -> Result<Tally> {
        let mut t = Tally {
            first: first.map(|c| c.status),
            what: "the peer closed the connection; QP moved to ERR here",
            sends: u64::from(self.window.in_flight()),
            recvs: u64::from(self.recvs.posted()),
            first_error: u64::from(first.is_some()),
            flushed: 0,
            other: 0,
            secs: 0.0,
        };
        for (i, c) in first.into_iter().chain(rest).enumerate() {
            let recv = self.take(c);
            let n = if recv { 1 } else { 1 + u64::from(c.covered) };
            if i == 0 && first.is_some() {
                t.what = if recv { "on a receive" } else { "on a send" };
                t.other += n - 1;
            } else if c.is_ok() {
                t.other += n;
            } else {
                (t.flushed, t.other) = (t.flushed + 1, t.other + n - 1);
            }
        }
        let mut q = LinkQueues {
            send_cq: &mut self.cq,
            recv_cq: None,
            window: &mut self.window,
            recvs: Some(&mut self.recvs),
        };
        let r = self.rec.drain(p, &mut self.qp, &mut q, |_| {})?;
        t.other += r.sends_completed + r.recvs_completed;
        t.flushed += r.sends_failed + r.probes_failed + r.recvs_flushed;
        if let (None, Some((_, status))) = (t.first, r.first_error) {
            // The first error was seen by the drain (the QP failed meanwhile).
            (t.first, t.what, t.first_error) = (Some(status), "on a send, in the drain", 1);
            t.flushed -= 1;
        }
        t.secs = r.elapsed.as_secs_f64();
        Ok(t)
    }
}

impl Tally {
    /// What never ended (0 unless the counts disagree with the window and receives).
    fn missing(&self) -> u64 {
        (self.sends + self.recvs).saturating_sub(self.first_error + self.flushed + self.other)
    }
}

impl std::fmt::Display for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "failed status {} ({}); drain: outstanding={} sends={} receives={} first_error={} \
             flushed={} other={} missing={} in {:.2} s",
            self.first.map_or("none".into(), |s| format!("{s:?}")),
            self.what,
            self.sends + self.recvs,
            self.sends,
            self.recvs,
            self.first_error,
            self.flushed,
            self.other,
            self.missing(),
            self.secs,
        )
    }
}

fn run() -> Result<()> {
    let bad = |detail: String| Error::InvalidArgument {
        context: "reconnect example",
        detail,
    };
    let mut a = Args {
        host: None,
        state: None,
        port: 18520,
        gid: 0,
        total: 0,
    };
    let (mut dev, mut n, mut every) = (None, None, 500u64);
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut val = || {
            it.next()
                .ok_or_else(|| bad(format!("{flag} needs a value")))
        };
        let num = |v: String| {
            v.parse::<u64>()
                .map_err(|_| bad(format!("{flag} needs a number, not {v:?}")))
        };
        match flag.as_str() {
            "-d" => dev = Some(val()?),
            "--state" => a.state = Some(val()?),
            "-n" => n = Some(num(val()?)?),
            "-r" => every = num(val()?)?.max(1),
            "-p" => a.port = num(val()?)?.min(65535) as u16,
            "-x" => a.gid = num(val()?)?.min(255) as u8,
            h if !h.starts_with('-') && a.host.is_none() => a.host = Some(h.to_string()),
            other => {
                return Err(bad(format!(
                    "unknown argument {other:?} (options: -n N, -r EVERY, -d DEV, -x GID_INDEX, \
                     -p PORT, --state FILE, HOST)"
                )))
            }
        }
    }
    let Some(dev) = dev else {
        if a.host.is_some() || a.state.is_some() {
            return Err(bad("HOST and --state need a device (-d DEV)".into()));
        }
        return sim::on_sim(n.unwrap_or(2000), every);
    };
    a.total = n.unwrap_or(20_000).div_ceil(BATCH) * BATCH;
    fn go<P: Provider>(p: P, a: &Args) -> Result<()> {
        match &a.host {
            Some(h) => gateway::gateway(p, h, a),
            None => receiver::receiver(p, a),
        }
    }
    match Mlx5Device::open(&dev) {
        Ok(p) => go(p, &a),
        Err(_) => go(VerbsDevice::open(&dev)?, &a),
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("reconnect: {e}");
        std::process::exit(1);
    }
}
