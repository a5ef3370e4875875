//! A gateway that survives its peer restarting: it streams numbered 64-byte orders (WRITE
//! WITH IMMEDIATE, 16 a batch, the last one signaled) into the peer's ring, detects a fault
//! from its completions (the batch ends in `RETRY_EXC_ERR` and the rest flushes: nothing is
//! silent), drains, counts what was in flight and not acknowledged, reconnects and resends
//! from where the peer resumes. Only the prelude, no `unsafe`.
//!
//! ```text
//! cargo run --release --example reconnect                  # the sim, 2000 batches, 4 restarts
//! cargo run --release --example reconnect -- -n 200 -r 50
//! reconnect -d rxe0 -x 1 --state /var/tmp/orders.state     # receiver (server)
//! reconnect -d rxe0 -x 1 -n 8000 HOST                       # gateway (client)
//! ```
//! **On the sim** (no `-d`): both ends in one process; every EVERY batches the peer
//! "restarts" (its QP is destroyed with a batch in flight, as the kernel destroys a killed
//! process's QP, and a new one comes up). The gateway resets its QP, reconnects and resends;
//! the peer checks that the orders arrive in sequence. Options: `-n BATCHES` (default 2000),
//! `-r EVERY` (default 500).
//!
//! **On a device** (`-d DEV`; mlx5 through the direct provider, anything else through
//! libibverbs), two processes, endpoints exchanged over TCP (`-p PORT`, default 18520;
//! `-x GID_INDEX`):
//! - the receiver (no HOST) checks every order byte for byte in sequence, keeps its progress
//!   in `--state FILE` after each batch (so a receiver killed and started again resumes where
//!   it stopped), confirms each batch with a SEND WITH IMMEDIATE carrying its count, and
//!   takes a new connection whenever the old one fails (an error completion, a refused post,
//!   or the gateway's TCP connection closing: then it moves its QP to ERR and drains it);
//! - the gateway (HOST) sends `-n ORDERS` (default 20000, rounded up to whole batches), at
//!   most 64 unconfirmed. `timeout` 16 and `retry_cnt` 2 bound how long a vanished peer takes
//!   to show: three tries 268 ms apart, 0.81 s; with nothing in flight it writes an 8-byte
//!   heartbeat every 200 ms, so a peer that vanished while it waited for credit shows the
//!   same way. On a fault it prints how every outstanding request ended (`first_error`,
//!   `flushed`, `missing`: never more than 0 without an error exit), then reconnects (a new
//!   QP; for up to 120 s) and prints how many of the orders in flight had reached the
//!   receiver and how many were lost in flight and resent from where the receiver resumes.
//!
//! Both ends end with the FNV-1a checksum of the whole stream (the receiver's over what it
//! received, kept across its restarts): equal when every byte arrived once, in order.
//! `tests/guest/pair/60-restart.sh` and `70-flap.sh` run it between two guests over rxe.

use rdma_direct::prelude::*;
use std::time::Duration;

mod gateway;
mod link;
mod receiver;
mod sim;

use gateway::gateway;
use link::*;
use receiver::receiver;
use sim::on_sim;

const BATCH: u64 = 16;
const ORDER: usize = 64;
const STALL: Duration = Duration::from_secs(5);

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let bad = |detail: String| Error::InvalidArgument {
        context: "reconnect example",
        detail,
    };
    let (mut dev, mut host, mut state) = (None, None, None);
    let (mut n, mut every, mut port, mut gid) = (None, 500u64, 18520u16, 0u8);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = |flag: &str| {
            it.next()
                .cloned()
                .ok_or_else(|| bad(format!("{flag} needs a value")))
        };
        let num = |flag: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| bad(format!("{flag} needs a number, not {v:?}")))
        };
        match a.as_str() {
            "-d" => dev = Some(val("-d")?),
            "--state" => state = Some(val("--state")?),
            "-n" => n = Some(num("-n", val("-n")?)?),
            "-r" => every = num("-r", val("-r")?)?.max(1),
            "-p" => port = num("-p", val("-p")?)?.min(65535) as u16,
            "-x" => gid = num("-x", val("-x")?)?.min(255) as u8,
            h if !h.starts_with('-') && host.is_none() => host = Some(h.to_string()),
            other => {
                return Err(bad(format!(
                    "unknown argument {other:?} (options: -n N, -r EVERY, -d DEV, -x GID_INDEX, \
                     -p PORT, --state FILE, HOST)"
                )))
            }
        }
    }
    let Some(dev) = dev else {
        if host.is_some() || state.is_some() {
            return Err(bad("HOST and --state need a device (-d DEV)".into()));
        }
        return on_sim(n.unwrap_or(2000), every);
    };
    let total = n.unwrap_or(20_000).div_ceil(BATCH) * BATCH;
    fn go<P: Provider>(
        p: P,
        host: Option<&str>,
        port: u16,
        gid: u8,
        total: u64,
        state: Option<&str>,
    ) -> Result<()> {
        match host {
            Some(h) => gateway(p, h, port, gid, total),
            None => receiver(p, port, gid, state),
        }
    }
    match Mlx5Device::open(&dev) {
        Ok(p) => go(p, host.as_deref(), port, gid, total, state.as_deref()),
        Err(_) => go(
            VerbsDevice::open(&dev)?,
            host.as_deref(),
            port,
            gid,
            total,
            state.as_deref(),
        ),
    }
}

fn main() {
    if let Err(e) = run() {
        eprintln!("reconnect: {e}");
        std::process::exit(1);
    }
}
