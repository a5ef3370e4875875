//! An order gateway: 64-byte orders RDMA-WRITTEN WITH IMMEDIATE into the peer's ring, 16 per
//! doorbell with one signaled request per batch, the peer echoing each batch back the same
//! way; checks that every order arrived whole and prints round-trip percentiles. Each side is
//! a QP that owns its CQ (`Provider::own_pair`: on mlx5 and the sim its poll takes the
//! dedicated way). No `unsafe` anywhere.
//!
//! ```text
//! cargo run --release --example order_gateway                         # one process, two QPs on the sim
//! cargo run --release --example order_gateway -- -d rxe0 -x 1         # server
//! cargo run --release --example order_gateway -- -d rxe0 -x 1 HOST    # client
//! ```
//! With `-d`, the device is opened with the direct mlx5 provider when it is an mlx5 NIC and
//! with libibverbs otherwise (e.g. rxe). Options:
//! `-n ROUNDS` (default 2000), `-p PORT` (default 18515), `-x GID_INDEX` (default 0; RoCE
//! needs the index of a valid GID, e.g. the IPv4-mapped one).

use rdma_direct::prelude::*;
use std::time::{Duration, Instant};

const ORDER: usize = 64;
const BATCH: usize = 16;
const RING: usize = 64; // slots per ring; a multiple of BATCH
/// No completion for this long while some are expected: a stall.
const STALL: Duration = Duration::from_secs(5);

struct Side<P: Provider> {
    /// The QP and the CQ it alone completes into, owned together (on mlx5 and the sim its
    /// poll takes the dedicated way).
    pair: P::Pair,
    buf: RegisteredBuf<P::Mr>,
    /// Receive completions polled but not yet waited for.
    recvd: usize,
    /// Send requests retired (by a completion, or covered by one) but not yet waited for.
    sent: usize,
}

fn side<P: Provider>(p: &mut P, pd: &P::Pd) -> Result<Side<P>> {
    // Send ring first, receive ring after it.
    let buf = p.alloc_buf(pd, 2 * RING * ORDER, Access::ALL, Pages::HugeOrNormal)?;
    let mut cq = p.create_cq(4 * RING as u32)?;
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = RING as u32;
    cfg.caps.max_recv_wr = RING as u32;
    let qp = p.create_qp(pd, &mut cq, None, None, &cfg)?;
    Ok(Side {
        pair: p.own_pair(qp, cq)?,
        buf,
        recvd: 0,
        sent: 0,
    })
}

/// Keeps `RING` receives posted (WRITE WITH IMMEDIATE consumes one each, zero SGEs).
fn post_receives<P: Provider>(s: &mut Side<P>, n: usize) -> Result<()> {
    for i in 0..n {
        s.pair.rq().post_recv(RecvWr::new(i as u64, &[]))?;
    }
    s.pair.rq().ring();
    // Only a verbs device can refuse a doorbell; a refused batch would never complete.
    match s.pair.rq().take_ring_error() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Writes one batch of orders `seq..seq+BATCH` into the peer's ring.
fn send_batch<P: Provider>(s: &mut Side<P>, peer: RemoteMr, seq: u64) -> Result<()> {
    let mut sges = [[Sge::default()]; BATCH];
    for (i, sge) in sges.iter_mut().enumerate() {
        let slot = (seq as usize + i) % RING;
        let order = s.buf.get_mut(slot * ORDER, ORDER)?;
        order[..8].copy_from_slice(&(seq + i as u64).to_le_bytes());
        *sge = [s.buf.sge(slot * ORDER, ORDER)?];
    }
    let mut batch = SendBatch::<_, BATCH>::new();
    for (i, sge) in sges.iter().enumerate() {
        let slot = (seq as usize + i) % RING;
        let at = peer.target((slot * ORDER) as u64, ORDER as u64)?;
        let wr = SendWr::write_imm_to(seq + i as u64, sge, at, slot as u32);
        let _ = batch.push(wr.signaled_if(i == BATCH - 1));
    }
    s.pair.sq().post_list(batch.as_slice())?;
    match s.pair.sq().take_ring_error() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Polls until `recvs` receives and `sends` send requests completed, counting from what
/// earlier calls polled beyond what they waited for.
///
/// With two processes, the peer's next batch may land while this side still waits for its
/// own send completion: those receive completions must be kept for the next wait, not
/// dropped. Sends are counted as requests retired (the signaled one plus the unsignaled
/// ones it covers), which is exact whatever the device signals.
fn wait<P: Provider>(p: &mut P, s: &mut Side<P>, recvs: usize, sends: usize) -> Result<()> {
    let mut wc = [Completion::EMPTY; 32];
    while s.recvd < recvs || s.sent < sends {
        // Busy-polls, reading the clock only every so many empty polls: a clock read can be
        // a system call (e.g. with the HPET clock source of an emulated guest).
        let n = poll_wait(p, &mut s.pair, &mut wc, STALL).map_err(|e| Error::Unsupported {
            what: format!(
                "stalled: {} receives and {} sends missing: {e}",
                recvs - s.recvd.min(recvs),
                sends - s.sent.min(sends)
            ),
        })?;
        for c in &wc[..n] {
            c.check()?;
            if c.opcode.is_recv() {
                s.recvd += 1;
            } else {
                s.sent += 1 + c.covered as usize;
            }
        }
    }
    s.recvd -= recvs;
    s.sent -= sends;
    Ok(())
}

/// Checks that orders `seq..seq+BATCH` arrived whole in this side's receive ring (each
/// order carries its sequence number in its first 8 bytes, little endian).
fn check_batch<P: Provider>(s: &Side<P>, seq: u64) -> Result<()> {
    for i in 0..BATCH as u64 {
        let slot = ((seq + i) as usize) % RING;
        let order = s.buf.get((RING + slot) * ORDER, ORDER)?;
        let got = u64::from_le_bytes(order[..8].try_into().unwrap_or_default());
        if got != seq + i {
            return Err(Error::Protocol {
                context: "order_gateway",
                detail: format!("order {} arrived as {got} in slot {slot}", seq + i),
            });
        }
    }
    Ok(())
}

fn percentiles(mut ns: Vec<u64>) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "round trip of a {BATCH}-order batch, {} rounds: p50 {:.2} us  p90 {:.2} us  p99 {:.2} us  max {:.2} us",
        ns.len(),
        at(0.5),
        at(0.9),
        at(0.99),
        at(1.0)
    );
}

fn on_sim<P: Provider>(p: &mut P, rounds: usize) -> Result<()> {
    let pd = p.alloc_pd()?;
    let mut a = side(p, &pd)?;
    let mut b = side(p, &pd)?;
    let opts = ConnectOpts::default();
    let (ea, eb) = (
        p.endpoint(a.pair.qp(), &opts)?,
        p.endpoint(b.pair.qp(), &opts)?,
    );
    p.connect(a.pair.qp_mut(), &ea, &eb, &opts)?;
    p.connect(b.pair.qp_mut(), &eb, &ea, &opts)?;
    let (ring_a, ring_b) = (
        a.buf.remote(RING * ORDER, RING * ORDER)?,
        b.buf.remote(RING * ORDER, RING * ORDER)?,
    );
    post_receives(&mut a, RING)?;
    post_receives(&mut b, RING)?;
    let mut rtts = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let seq = (r * BATCH) as u64;
        let t = Instant::now();
        send_batch(&mut a, ring_b, seq)?;
        if r > 0 {
            // b's previous echo is waited for only now, after a's next batch landed: the
            // order a server process meets when an ACK comes late. The receives polled
            // meanwhile stay counted for the next wait.
            wait(p, &mut b, 0, BATCH)?;
        }
        wait(p, &mut b, BATCH, 0)?;
        post_receives(&mut b, BATCH)?;
        send_batch(&mut b, ring_a, seq)?;
        wait(p, &mut a, BATCH, BATCH)?;
        rtts.push(t.elapsed().as_nanos() as u64);
        check_batch(&b, seq)?;
        check_batch(&a, seq)?;
        post_receives(&mut a, BATCH)?;
    }
    wait(p, &mut b, 0, BATCH)?;
    percentiles(rtts);
    Ok(())
}

fn on_device<P: Provider>(
    p: &mut P,
    host: Option<&str>,
    port: u16,
    rounds: usize,
    gid: u8,
) -> Result<()> {
    let pd = p.alloc_pd()?;
    let mut s = side(p, &pd)?;
    let share = Some(s.buf.remote(RING * ORDER, RING * ORDER)?);
    let opts = ConnectOpts {
        gid_index: gid,
        ..ConnectOpts::default()
    };
    let timeout = Duration::from_secs(30);
    let mut conn = match host {
        Some(h) => connect_qp_client(p, s.pair.qp_mut(), (h, port), &opts, share, timeout)?,
        None => {
            let l = std::net::TcpListener::bind(("0.0.0.0", port))
                .map_err(|e| Error::io("bind", &e))?;
            connect_qp_server(p, s.pair.qp_mut(), &l, &opts, share, timeout)?
        }
    };
    let peer = conn.remote_mr().ok_or(Error::Protocol {
        context: "order_gateway",
        detail: "the peer shared no ring".into(),
    })?;
    // Receives need a QP past RESET: post them once connected, then sync again so neither
    // side writes before the other's receives are there.
    post_receives(&mut s, RING)?;
    conn.sync(timeout)?;
    let mut rtts = Vec::with_capacity(rounds);
    for r in 0..rounds {
        let seq = (r * BATCH) as u64;
        if host.is_some() {
            let t = Instant::now();
            send_batch(&mut s, peer, seq)?;
            wait(p, &mut s, BATCH, BATCH)?;
            rtts.push(t.elapsed().as_nanos() as u64);
            check_batch(&s, seq)?;
        } else {
            wait(p, &mut s, BATCH, 0)?;
            check_batch(&s, seq)?;
            send_batch(&mut s, peer, seq)?;
            wait(p, &mut s, 0, BATCH)?;
        }
        post_receives(&mut s, BATCH)?;
    }
    conn.sync(timeout)?;
    if host.is_some() {
        percentiles(rtts);
    }
    Ok(())
}

/// The run on whichever provider [`run_chosen`] opens: both ends here on the sim, one end
/// of two processes on a device.
struct Gateway {
    host: Option<String>,
    port: u16,
    rounds: usize,
    gid: u8,
}

impl Job for Gateway {
    type Out = ();
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<()>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        match p.kind() {
            ProviderKind::Sim => on_sim(p, self.rounds),
            _ => on_device(p, self.host.as_deref(), self.port, self.rounds, self.gid),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut dev, mut host, mut port, mut rounds, mut gid) = (None, None, 18515u16, 2000usize, 0u8);
    let mut it = args.iter();
    let usage = "usage: order_gateway [-d DEV [-x GID_INDEX] [-p PORT] [HOST]] [-n ROUNDS]";
    let bad = |what: String| -> ! {
        eprintln!("order_gateway: {what} ({usage})");
        std::process::exit(2);
    };
    while let Some(a) = it.next() {
        let mut num = |flag: &str| match it.next().map(|v| (v, v.parse::<u64>())) {
            Some((_, Ok(n))) => n,
            Some((v, Err(_))) => bad(format!("{flag} needs a number, not {v:?}")),
            None => bad(format!("{flag} needs a value")),
        };
        match a.as_str() {
            "-d" => {
                dev = Some(
                    it.next()
                        .cloned()
                        .unwrap_or_else(|| bad("-d needs a value".into())),
                )
            }
            "-p" => {
                port = u16::try_from(num("-p")).unwrap_or_else(|_| bad("-p: not a port".into()))
            }
            "-n" => rounds = num("-n") as usize,
            "-x" => {
                gid = u8::try_from(num("-x")).unwrap_or_else(|_| bad("-x: not a GID index".into()))
            }
            o if o.starts_with('-') => bad(format!("unknown option {o:?}")),
            h => host = Some(h.to_string()),
        }
    }
    if host.is_some() && dev.is_none() {
        bad("HOST needs -d DEV: on the sim both ends run in this process".into());
    }
    let mut job = Gateway {
        host,
        port,
        rounds: rounds.max(1),
        gid,
    };
    // The library's rule: no device, the sim; an mlx5 NIC, the direct provider; else verbs.
    let r = run_chosen(Choice::Auto, dev.as_deref(), &mut job);
    if let Err(e) = r {
        eprintln!("order_gateway: {e}");
        std::process::exit(1);
    }
}
