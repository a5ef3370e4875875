//! A gateway that survives its peer restarting: it streams numbered 64-byte orders (WRITE
//! WITH IMMEDIATE through the typed `SendWr::write_imm_to`, 16 a batch, the last one
//! signaled) into the peer's ring, and leaves the fault handling to the library: each
//! connection is an `RcLink` (QP, CQ, send window, receives kept posted, `Recovery`); a fault
//! shows as a completion (`RETRY_EXC_ERR`, the rest flushed: nothing is silent), or as a
//! refused post; `RcLink::drain_polled` moves the QP to ERR and ends every outstanding
//! request, counted per request; the gateway reconnects and resends from where the peer
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
//! process's QP, and a new one comes up). The gateway hands the error completion to the
//! drain (which counts the orders lost) and reconnects the same QP (ERR, RESET, ..., RTS) to
//! the new peer, both in `RcLink::recover`, and resends from the first failed order; the
//! peer checks that the orders arrive in sequence. Options: `-n BATCHES` (default 2000), `-r EVERY` (default 500).
//!
//! **On a device** (`-d DEV`; mlx5 through the direct provider, anything else through
//! libibverbs), two processes, endpoints exchanged over TCP (`-p PORT`, default 18520;
//! `-x GID_INDEX`), a new `RcLink` per connection (the failed one is drained and kept until
//! the next is up):
//! - the receiver (no HOST) checks every order byte for byte in sequence, keeps its progress
//!   in `--state FILE` after each batch (so a receiver killed and started again resumes where
//!   it stopped), confirms the batches of each poll (once their receives are posted again)
//!   with a SEND WITH IMMEDIATE carrying its count, and takes a new connection whenever the
//!   old one fails (an error completion, a refused post, or the gateway's TCP connection
//!   closing: then the drain moves its QP to ERR);
//! - the gateway (HOST) sends `-n ORDERS` (default 20000, rounded up to whole batches), at
//!   most 64 unconfirmed. `timeout` 16 and `retry_cnt` 2 bound how long a vanished peer takes
//!   to show: three tries 268 ms apart, 0.81 s; with nothing in flight it sends a `probe`
//!   every 200 ms, so a peer that vanished while it waited for credit shows the same way. On
//!   a fault it prints how every outstanding request ended (`first_error`, `flushed`,
//!   `other`, `missing`: the library's `RecoveryReport`; a drain that does not end them all
//!   within 5 s is an error exit), then reconnects (for up to 120 s) and prints how many
//!   of the orders in flight had reached the receiver and how many were lost in flight and
//!   resent from where the receiver resumes.
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
/// The ring's bytes.
const LEN: usize = RING as usize * ORDER;
/// The gateway's credit receives (the receiver confirms at most once per batch).
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
    /// `timeout` 16 (268 ms) and `retry_cnt` 2 (three tries): a vanished peer shows in
    /// 0.81 s.
    opts: ConnectOpts,
    total: u64,
}

fn proto(detail: String) -> Error {
    Error::Protocol {
        context: "reconnect example",
        detail,
    }
}

/// Order `seq`'s 64 bytes: its number, then 7 words mixed from it (little endian).
fn order_bytes(seq: u64) -> [u8; ORDER] {
    let mut o = [0u8; ORDER];
    for (i, w) in o.chunks_mut(8).enumerate() {
        let x = seq.wrapping_mul(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64) | 1);
        w.copy_from_slice(&x.to_le_bytes());
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

/// The side channel's one exchange after a connect: sends `mine`, returns the peer's (the
/// gateway sends the order count, the receiver where it resumes).
fn swap_u64(s: &mut TcpStream, mine: u64) -> Result<u64> {
    use std::io::{Read, Write};
    let mut b = [0u8; 8];
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .and_then(|()| s.write_all(&mine.to_le_bytes()))
        .and_then(|()| s.read_exact(&mut b))
        .map_err(|e| Error::io("reconnect: the exchange after the connect", &e))?;
    Ok(u64::from_le_bytes(b))
}

/// A refused post: a QP the device failed is a fault to recover from (its text), anything
/// else a bug (the error).
fn refusal(e: PostError) -> Result<String> {
    match e {
        PostError::BadState { .. } | PostError::CqError { .. } => Ok(e.to_string()),
        e => Err(e.into()),
    }
}

/// A fault on link `k`: `polled` is what the poll that saw it returned from the error on
/// (empty when it came from elsewhere). The library's drain books those, moves the QP to ERR
/// and ends every request still outstanding; the line says how each one ended.
fn fault<P: Provider>(p: &mut P, k: &mut RcLink<P>, polled: &[Completion]) -> Result<String> {
    // What arrived since the last poll is not booked: the stream resumes at the position
    // the two ends agree on at the reconnect, and the peer sends it again from there.
    let r = k.drain_polled(p, polled, |_| {})?;
    let first = match (polled.first(), r.first_error) {
        (Some(c), _) => format!("{:?}", c.status),
        (None, Some(e)) => format!("{:?}", e.1),
        (None, None) => "none".into(),
    };
    let how = match polled.first() {
        Some(c) if k.recvs.owns(c.wr_id) => "on a receive",
        Some(_) => "on a send",
        None => "the QP moved to ERR here",
    };
    Ok(format!("failed status {first} ({how}); drain: {r}"))
}

/// The command line, for an argument error.
const USAGE: &str =
    "usage: reconnect [-n BATCHES] [-r EVERY] | -d DEV [-x GID] [-p PORT] (--state FILE | -n ORDERS HOST)";

/// The options that take a value, in the order `run` reads them.
const FLAGS: [&str; 6] = ["-d", "--state", "-n", "-r", "-p", "-x"];

fn run() -> Result<()> {
    let bad = |detail: String| Error::InvalidArgument {
        context: "reconnect example",
        detail,
    };
    let (mut v, mut host): ([Option<String>; 6], Option<String>) = Default::default();
    let mut it = std::env::args().skip(1);
    while let Some(f) = it.next() {
        match FLAGS.iter().position(|&x| x == f) {
            Some(i) => v[i] = Some(it.next().ok_or_else(|| bad(format!("{f} needs a value")))?),
            None if !f.starts_with('-') && host.is_none() => host = Some(f),
            None => return Err(bad(format!("unknown argument {f:?} ({USAGE})"))),
        }
    }
    let num = |i: usize, default: u64| match &v[i] {
        None => Ok(default),
        Some(s) => s
            .parse::<u64>()
            .map_err(|_| bad(format!("{} needs a number, not {s:?}", FLAGS[i]))),
    };
    let Some(dev) = &v[0] else {
        if host.is_some() || v[1].is_some() {
            return Err(bad("HOST and --state need a device (-d DEV)".into()));
        }
        return sim::on_sim(num(2, 2000)?, num(3, 500)?.max(1));
    };
    let a = Args {
        host,
        state: v[1].clone(),
        port: num(4, 18520)?.min(65535) as u16,
        opts: ConnectOpts {
            gid_index: num(5, 0)?.min(255) as u8,
            timeout: 16,
            retry_cnt: 2,
            ..ConnectOpts::default()
        },
        total: num(2, 20_000)?.div_ceil(BATCH) * BATCH,
    };
    /// The gateway or the receiver on whichever provider [`run_chosen`] opens.
    struct Go<'a>(&'a Args);
    impl Job for Go<'_> {
        type Out = ();
        fn run<P: Provider>(&mut self, p: &mut P) -> Result<()>
        where
            P::Qp: Send,
            P::Cq: Send,
        {
            match &self.0.host {
                Some(h) => gateway::gateway(p, h, self.0),
                None => receiver::receiver(p, self.0),
            }
        }
    }
    // The library's rule: an mlx5 NIC, the direct provider; any other device, verbs.
    run_chosen(Choice::Auto, Some(dev), &mut Go(&a))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("reconnect: {e}");
        // A command line it cannot honour: 2, as the other examples; a failed run: 1.
        std::process::exit(1 + i32::from(matches!(e, Error::InvalidArgument { .. })));
    }
}
