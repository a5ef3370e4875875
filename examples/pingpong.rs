//! A minimal RC ping-pong: one 64-byte SEND each way per iteration, a receive always posted
//! ahead; prints the median and p99 half round trip. Only the prelude, no `unsafe`.
//!
//! ```text
//! cargo run --release --example pingpong                           # one process, two QPs on the sim
//! cargo run --release --example pingpong -- -d mlx5_0 -x 3         # server
//! cargo run --release --example pingpong -- -d mlx5_0 -x 3 HOST    # client
//! ```
//! With `-d`, the device is opened with the direct mlx5 provider when it is an mlx5 NIC and
//! with libibverbs otherwise (e.g. rxe). Options: `-n ITERS` (default 10000), `-p PORT`
//! (default 18516), `-x GID_INDEX` (default 0; RoCE needs the index of a valid GID).

use rdma_direct::prelude::*;
use std::time::Duration;

const MSG: usize = 64;
const STALL: Duration = Duration::from_secs(5);

struct Side<P: Provider> {
    qp: P::Qp,
    cq: P::Cq,
    buf: RegisteredBuf<P::Mr>,
    /// Receive completions polled (and re-posted) but not yet waited for.
    recvd: usize,
    /// Send completions polled but not yet waited for.
    sent: usize,
}

/// One RC QP with its own CQ and a buffer: the message to send first, the receive slot after.
fn side<P: Provider>(p: &mut P, pd: &P::Pd) -> Result<Side<P>> {
    let buf = p.alloc_buf(pd, 2 * MSG, Access::LOCAL_WRITE, Pages::Normal)?;
    // One send and one receive outstanding at a time; the CQ holds both queues' worth.
    let mut cq = p.create_cq(16)?;
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = 4;
    cfg.caps.max_recv_wr = 4;
    let qp = p.create_qp(pd, &mut cq, None, None, &cfg)?;
    Ok(Side {
        qp,
        cq,
        buf,
        recvd: 0,
        sent: 0,
    })
}

/// Posts the receive (wr_id 1). The QP must be past RESET (INIT at least, as with verbs).
fn post_recv<P: Provider>(s: &mut Side<P>) -> Result<()> {
    let into = [s.buf.sge(MSG, MSG)?];
    s.qp.rq().post_recv(RecvWr::new(1, &into))?;
    s.qp.rq().ring();
    // Only a verbs device can refuse a doorbell; a refused receive would never complete.
    match s.qp.rq().take_ring_error() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

fn send<P: Provider>(s: &mut Side<P>) -> Result<()> {
    let from = [s.buf.sge(0, MSG)?];
    s.qp.sq().post_and_ring(SendWr::send(0, &from).signaled())?;
    match s.qp.sq().take_ring_error() {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Polls until `recvs` receives and `sends` sends completed, counting from what earlier calls
/// polled beyond what they waited for; each receive is re-posted as soon as it is polled.
///
/// With two processes the peer's next message may arrive before our own send completion:
/// a receive polled while waiting for a send is kept for the next wait, never dropped.
fn wait<P: Provider>(p: &mut P, s: &mut Side<P>, recvs: usize, sends: usize) -> Result<()> {
    let mut wc = [Completion::EMPTY; 4];
    while s.recvd < recvs || s.sent < sends {
        let n = poll_wait(p, &mut s.cq, &mut wc, STALL)?;
        for c in &wc[..n] {
            c.check()?;
            if c.wr_id == 1 {
                s.recvd += 1;
                post_recv(s)?;
            } else {
                s.sent += 1;
            }
        }
    }
    s.recvd -= recvs;
    s.sent -= sends;
    Ok(())
}

fn report(mut ns: Vec<u64>) {
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q) as usize] as f64 / 2000.0;
    println!(
        "{} iterations, {MSG}-byte SEND: half round trip median {:.2} us  p99 {:.2} us",
        ns.len(),
        at(0.5),
        at(0.99)
    );
}

fn on_sim<P: Provider>(p: &mut P, iters: usize) -> Result<()> {
    let pd = p.alloc_pd()?;
    let mut a = side(p, &pd)?;
    let mut b = side(p, &pd)?;
    let opts = ConnectOpts::default();
    let (ea, eb) = (p.endpoint(&a.qp, &opts)?, p.endpoint(&b.qp, &opts)?);
    p.connect(&mut a.qp, &ea, &eb, &opts)?;
    p.connect(&mut b.qp, &eb, &ea, &opts)?;
    post_recv(&mut a)?;
    post_recv(&mut b)?;
    let mut rtts = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = std::time::Instant::now();
        send(&mut a)?;
        wait(p, &mut b, 1, 0)?;
        send(&mut b)?;
        wait(p, &mut a, 1, 0)?;
        rtts.push(t.elapsed().as_nanos() as u64);
        wait(p, &mut a, 0, 1)?;
        wait(p, &mut b, 0, 1)?;
    }
    report(rtts);
    Ok(())
}

fn on_device<P: Provider>(
    p: &mut P,
    host: Option<&str>,
    port: u16,
    opts: &ConnectOpts,
    iters: usize,
) -> Result<()> {
    let pd = p.alloc_pd()?;
    let mut s = side(p, &pd)?;
    let timeout = Duration::from_secs(30);
    let mut conn = match host {
        Some(h) => connect_qp_client(p, &mut s.qp, (h, port), opts, None, timeout)?,
        None => {
            let l = std::net::TcpListener::bind(("0.0.0.0", port))
                .map_err(|e| Error::io("bind", &e))?;
            connect_qp_server(p, &mut s.qp, &l, opts, None, timeout)?
        }
    };
    // A receive needs a QP past RESET (verbs refuses it before INIT): post it once connected,
    // then sync again so that neither side sends before the other's receive is there.
    post_recv(&mut s)?;
    conn.sync(timeout)?;
    let mut rtts = Vec::with_capacity(iters);
    for _ in 0..iters {
        if host.is_some() {
            let t = std::time::Instant::now();
            send(&mut s)?;
            wait(p, &mut s, 1, 0)?;
            rtts.push(t.elapsed().as_nanos() as u64);
            wait(p, &mut s, 0, 1)?;
        } else {
            wait(p, &mut s, 1, 0)?;
            send(&mut s)?;
            wait(p, &mut s, 0, 1)?;
        }
    }
    conn.sync(timeout)?;
    if host.is_some() {
        report(rtts);
    }
    Ok(())
}

/// The run on whichever provider [`run_chosen`] opens: both ends here on the sim, one end
/// of two processes on a device.
struct PingPong {
    host: Option<String>,
    port: u16,
    opts: ConnectOpts,
    iters: usize,
}

impl Job for PingPong {
    type Out = ();
    fn run<P: Provider>(&mut self, p: &mut P) -> Result<()>
    where
        P::Qp: Send,
        P::Cq: Send,
    {
        match p.kind() {
            ProviderKind::Sim => on_sim(p, self.iters),
            _ => on_device(p, self.host.as_deref(), self.port, &self.opts, self.iters),
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mut dev, mut host, mut port, mut iters) = (None, None, 18516u16, 10000usize);
    let mut opts = ConnectOpts::default();
    let mut it = args.iter();
    let usage = "usage: pingpong [-d DEV [-x GID_INDEX] [-p PORT] [HOST]] [-n ITERS]";
    let bad = |what: String| -> ! {
        eprintln!("pingpong: {what} ({usage})");
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
            "-n" => iters = num("-n") as usize,
            "-x" => {
                let x = num("-x");
                opts.gid_index =
                    u8::try_from(x).unwrap_or_else(|_| bad("-x: not a GID index".into()))
            }
            o if o.starts_with('-') => bad(format!("unknown option {o:?}")),
            h => host = Some(h.to_string()),
        }
    }
    if host.is_some() && dev.is_none() {
        bad("HOST needs -d DEV: on the sim both ends run in this process".into());
    }
    let iters = iters.max(1);
    let mut job = PingPong {
        host,
        port,
        opts,
        iters,
    };
    // The library's rule: no device, the sim; an mlx5 NIC, the direct provider; else verbs.
    let r = run_chosen(Choice::Auto, dev.as_deref(), &mut job);
    if let Err(e) = r {
        eprintln!("pingpong: {e}");
        std::process::exit(1);
    }
}
