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

const BATCH: u64 = 16;
const ORDER: usize = 64;
const STALL: Duration = Duration::from_secs(5);

/// The peer: its QP, CQ and the ring the orders land in.
struct Peer {
    qp: <SimDevice as Provider>::Qp,
    cq: <SimDevice as Provider>::Cq,
    ring: RegisteredBuf<<SimDevice as Provider>::Mr>,
    /// The next order number this incarnation expects.
    next: u64,
}

fn cfg() -> QpConfig {
    let mut c = QpConfig::new(QpType::Rc);
    (c.caps.max_send_wr, c.caps.max_recv_wr) = (BATCH as u32, BATCH as u32);
    c
}

fn new_peer(dev: &mut SimDevice, pd: &<SimDevice as Provider>::Pd) -> Result<Peer> {
    let ring = dev.alloc_buf(pd, BATCH as usize * ORDER, Access::ALL, Pages::Normal)?;
    let mut cq = dev.create_cq(2 * BATCH as u32)?;
    let qp = dev.create_qp(pd, &mut cq, None, None, &cfg())?;
    Ok(Peer {
        qp,
        cq,
        ring,
        next: 0,
    })
}

/// Connect `a` (RESET first if it is not there) and `b` to each other.
fn connect(
    dev: &mut SimDevice,
    a: &mut <SimDevice as Provider>::Qp,
    b: &mut <SimDevice as Provider>::Qp,
) -> Result<()> {
    // A finite transport retry count: a peer that vanished must end the requests in
    // RETRY_EXC_ERR (7 would retry forever).
    let opts = ConnectOpts {
        retry_cnt: 3,
        ..ConnectOpts::default()
    };
    let (ea, eb) = (dev.endpoint(a, &opts)?, dev.endpoint(b, &opts)?);
    dev.connect(a, &ea, &eb, &opts)?;
    dev.connect(b, &eb, &ea, &opts)
}

/// The peer's receives for one batch.
fn post_receives(p: &mut Peer) -> Result<()> {
    for i in 0..BATCH {
        p.qp.rq().post_recv(RecvWr::new(i, &[]))?;
    }
    p.qp.rq().ring();
    Ok(())
}

/// The peer takes what arrived: each order's immediate must be the next number.
fn peer_takes(dev: &mut SimDevice, p: &mut Peer) -> Result<u64> {
    let mut wc = [Completion::EMPTY; BATCH as usize];
    let mut got = 0;
    loop {
        dev.progress();
        let n = p.cq.poll(&mut wc);
        if n == 0 {
            return Ok(got);
        }
        for c in &wc[..n] {
            if !c.is_ok() {
                return Err(Error::Protocol {
                    context: "reconnect example (peer)",
                    detail: format!("receive completion {:?}", c.status),
                });
            }
            if u64::from(c.imm) != p.next & 0xffff_ffff {
                return Err(Error::Protocol {
                    context: "reconnect example (peer)",
                    detail: format!("order {} arrived, {} expected", c.imm, p.next),
                });
            }
            p.next += 1;
            got += 1;
        }
    }
}

fn on_sim(batches: u64, every: u64) -> Result<()> {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd()?;
    let mut orders = dev.alloc_buf(&pd, ORDER, Access::LOCAL_WRITE, Pages::Normal)?;
    let mut gcq = dev.create_cq(2 * BATCH as u32)?;
    let mut gw = dev.create_qp(&pd, &mut gcq, None, None, &cfg())?;
    let mut peer = new_peer(&mut dev, &pd)?;
    connect(&mut dev, &mut gw, &mut peer.qp)?;

    // `acked`: orders acknowledged (their batch's signaled completion succeeded); the gateway
    // resends from there after a fault.
    let (mut acked, mut restarts, mut lost, mut delivered) = (0u64, 0u64, 0u64, 0u64);
    let mut batch = 0u64;
    let mut restarted_at = None;
    while batch < batches {
        post_receives(&mut peer)?;
        let window = peer.ring.remote(0, BATCH as usize * ORDER)?;
        for i in 0..BATCH {
            let seq = acked + i;
            orders.get_mut(0, 8)?.copy_from_slice(&seq.to_le_bytes());
            let at = window
                .addr_at(i * ORDER as u64, ORDER as u64)
                .expect("in the window");
            let sge = [orders.sge(0, ORDER)?];
            let wr = SendWr::write_imm(seq, &sge, at, window.rkey, seq as u32);
            gw.sq().post(wr.signaled_if(i == BATCH - 1))?;
        }
        gw.sq().ring();
        // Once per EVERY batches (not again when the batch is resent).
        let restart = (batch + 1) % every == 0 && restarted_at != Some(batch);
        if restart {
            // The peer process dies with the batch in flight (the device has not run it yet):
            // its QP is destroyed, and a new incarnation comes up, not yet connected.
            peer = new_peer(&mut dev, &pd)?;
            restarts += 1;
            restarted_at = Some(batch);
        }
        // The gateway's completion says what happened to the batch: success acknowledges
        // all 16 (the 15 unsignaled are covered); an error or flush names what was lost.
        let mut wc = [Completion::EMPTY; BATCH as usize];
        let mut ended = 0u64;
        let mut failed = false;
        while ended < BATCH {
            let n = poll_wait(&mut dev, &mut gcq, &mut wc, STALL)?;
            for c in &wc[..n] {
                ended += 1 + u64::from(c.covered);
                failed |= !c.is_ok();
            }
        }
        if failed {
            // Detected: the batch was not acknowledged. Everything of it counts as lost in
            // flight and is resent to the new peer after a reset and reconnect.
            lost += BATCH;
            connect(&mut dev, &mut gw, &mut peer.qp)?;
            // The reconnect handshake tells the new peer where the stream resumes.
            peer.next = acked;
            continue;
        }
        delivered += peer_takes(&mut dev, &mut peer)?;
        acked += BATCH;
        batch += 1;
    }
    println!(
        "{batches} batches of {BATCH} orders: {restarts} peer restarts, {lost} orders lost in \
         flight (detected from error completions, resent), {} orders acknowledged, {delivered} \
         delivered in sequence to the peers",
        acked
    );
    if acked != batches * BATCH || delivered != acked {
        return Err(Error::Protocol {
            context: "reconnect example",
            detail: format!("acknowledged {acked}, delivered {delivered}"),
        });
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Two processes over a device: the receiver (server) and the gateway (client).
// ---------------------------------------------------------------------------------------

/// Order slots in the receiver's ring (a multiple of `BATCH`): the gateway's window.
const RING: u64 = 64;
/// The gateway's credit receives kept posted (the receiver confirms once per batch, at most
/// `RING / BATCH` batches unconfirmed).
const CREDITS: u32 = (RING / BATCH) as u32 + 2;
/// A gateway with nothing in flight for this long writes a heartbeat (8 bytes into a slot of
/// the receiver's ring past the orders): a peer that vanished while the gateway waited for
/// credit is then found from a completion too, within the retry budget.
const HEARTBEAT: Duration = Duration::from_millis(200);
/// How long a drain waits for the outstanding requests to end after the first error.
const DRAIN: Duration = Duration::from_secs(5);
/// How long the gateway keeps trying to reach a restarted receiver.
const RECONNECT: Duration = Duration::from_secs(120);
/// wr_id of the heartbeat write (orders use their sequence number).
const HB_ID: u64 = u64::MAX >> 2;
/// Set in the wr_id of every receive: a flushed completion's opcode is not reliable (verbs
/// leaves it undefined), its wr_id is.
const RECV_ID: u64 = 1 << 62;

/// Whether `c` is a receive's completion (by its wr_id, which a flush keeps).
fn is_recv(c: &Completion) -> bool {
    c.wr_id & RECV_ID != 0
}

/// The transport's bound for a vanished peer: each request is sent `retry_cnt + 1` times,
/// one local ACK timeout (4.096 us x 2^`timeout`) apart, then ends in `RETRY_EXC_ERR`.
fn device_opts(gid: u8) -> ConnectOpts {
    ConnectOpts {
        gid_index: gid,
        timeout: 16,  // 268 ms
        retry_cnt: 2, // 3 tries: about 0.8 s
        ..ConnectOpts::default()
    }
}

/// The retry budget of `device_opts` in seconds.
fn retry_budget(o: &ConnectOpts) -> f64 {
    f64::from(o.retry_cnt + 1) * 4.096e-6 * f64::from(1u32 << o.timeout)
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

/// FNV-1a over the bytes of a stream of orders, continued from `h`.
fn fnv(mut h: u64, bytes: &[u8]) -> u64 {
    for &b in bytes {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    h
}
const FNV0: u64 = 0xcbf2_9ce4_8422_2325;

fn proto(detail: String) -> Error {
    Error::Protocol {
        context: "reconnect example",
        detail,
    }
}

fn read_u64(s: &mut std::net::TcpStream, what: &str) -> Result<u64> {
    use std::io::Read;
    let mut b = [0u8; 8];
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .and_then(|()| s.read_exact(&mut b))
        .map_err(|e| Error::io(format!("reconnect: reading {what}"), &e))?;
    Ok(u64::from_le_bytes(b))
}

fn write_u64(s: &mut std::net::TcpStream, v: u64, what: &str) -> Result<()> {
    use std::io::Write;
    s.write_all(&v.to_le_bytes())
        .map_err(|e| Error::io(format!("reconnect: sending {what}"), &e))
}

/// Whether the peer closed (or reset) the TCP connection of the exchange: a process that
/// died, or a gateway that gave its QP up. Non-blocking.
fn peer_closed(s: &std::net::TcpStream) -> bool {
    let mut b = [0u8; 1];
    if s.set_nonblocking(true).is_err() {
        return true;
    }
    let r = s.peek(&mut b);
    let _ = s.set_nonblocking(false);
    match r {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
    }
}

/// How the requests outstanding at a fault ended: the first error, the flushes, and what
/// never came back within `DRAIN` (must be 0: nothing silent).
struct Drain {
    /// The first error, `None` when the fault came from elsewhere (the QP moved to ERR here).
    first: Option<WcStatus>,
    what: &'static str,
    sends: u64,
    recvs: u64,
    flushed: u64,
    other: u64,
    missing: u64,
    secs: f64,
    /// `to_error` calls again after a second without completions.
    kicks: u32,
    note: String,
}

impl std::fmt::Display for Drain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "failed status {} ({}); drain: outstanding={} sends={} receives={} first_error={} \
             flushed={} other={} missing={} in {:.2} s (to_error again: {}){}",
            self.first.map_or("none".into(), |s| format!("{s:?}")),
            self.what,
            self.sends + self.recvs,
            self.sends,
            self.recvs,
            u8::from(self.first.is_some()),
            self.flushed,
            self.other,
            self.missing,
            self.secs,
            self.kicks,
            self.note
        )
    }
}

/// After a fault (`first` is the error completion already polled, `None` when the fault
/// came from elsewhere and `qp` is to be failed here; `rest` what that poll returned after
/// it): the QP goes to ERR (if the device has not put it there) and every request still
/// outstanding is polled to its end. `sends` / `recvs`: requests outstanding before `first`
/// was counted.
fn drain_fault<P: Provider>(
    p: &mut P,
    qp: &mut P::Qp,
    cq: &mut P::Cq,
    first: Option<&Completion>,
    rest: &[Completion],
    mut sends: u64,
    mut recvs: u64,
) -> Drain {
    let t = std::time::Instant::now();
    let (out_s, out_r) = (sends, recvs);
    let mut d = Drain {
        first: first.map(|c| c.status),
        what: first.map_or(
            "the peer closed the connection; QP moved to ERR here",
            |c| {
                if is_recv(c) {
                    "on a receive"
                } else {
                    "on a send"
                }
            },
        ),
        sends: out_s,
        recvs: out_r,
        flushed: 0,
        other: 0,
        missing: 0,
        secs: 0.0,
        kicks: 0,
        note: String::new(),
    };
    if let Some(c) = first {
        if is_recv(c) {
            recvs -= 1;
        } else {
            sends = sends.saturating_sub(1 + u64::from(c.covered));
            d.other += u64::from(c.covered);
        }
    }
    // Also when the device failed the QP already: on rxe 6.1 the transition flushes the
    // receives posted after the device failed it (before its error completion was polled),
    // which would otherwise never complete.
    if let Err(e) = p.to_error(qp) {
        d.note = format!(" (to_error: {e})");
    }
    let mut wc = [Completion::EMPTY; 32];
    let mut last = std::time::Instant::now();
    let mut batch = rest.len();
    wc[..batch].copy_from_slice(rest);
    while sends + recvs > 0 && last.elapsed() < DRAIN {
        let n = if batch > 0 {
            std::mem::take(&mut batch)
        } else {
            cq.poll(&mut wc)
        };
        if n == 0 {
            p.progress();
            // Nothing for a second with requests still out: move the QP to ERR once more
            // (counted; rxe runs its flush again).
            if last.elapsed() > Duration::from_secs(1) * (d.kicks + 1) && d.kicks < 3 {
                d.kicks += 1;
                let _ = p.to_error(qp);
            }
            continue;
        }
        last = std::time::Instant::now();
        for c in &wc[..n] {
            let k = if is_recv(c) {
                recvs = recvs.saturating_sub(1);
                1
            } else {
                sends = sends.saturating_sub(1 + u64::from(c.covered));
                1 + u64::from(c.covered)
            };
            if c.status == WcStatus::WrFlushErr {
                d.flushed += k;
            } else {
                d.other += k;
            }
        }
    }
    d.missing = sends + recvs;
    d.secs = t.elapsed().as_secs_f64();
    d
}

/// One connection's QP and CQ (a new pair per connection: works on every provider).
struct Link<P: Provider> {
    qp: P::Qp,
    cq: P::Cq,
}

fn new_link<P: Provider>(p: &mut P, pd: &P::Pd, send_wr: u32, recv_wr: u32) -> Result<Link<P>> {
    let mut cq = p.create_cq(send_wr + recv_wr)?;
    let mut c = QpConfig::new(QpType::Rc);
    (c.caps.max_send_wr, c.caps.max_recv_wr) = (send_wr, recv_wr);
    let qp = p.create_qp(pd, &mut cq, None, None, &c)?;
    Ok(Link { qp, cq })
}

/// What a post refusal means here: a QP the device failed (a fault to recover from), or a
/// bug (an error).
fn post_fault(e: &PostError) -> bool {
    matches!(e, PostError::BadState { .. } | PostError::CqError { .. })
}

/// The receiver: keeps the ring, checks every order byte for byte in sequence, keeps its
/// progress in `state` (so a restarted receiver resumes where the killed one stopped), and
/// confirms each batch to the gateway with a SEND WITH IMMEDIATE carrying its count.
fn receiver<P: Provider>(mut p: P, port: u16, gid: u8, state: Option<&str>) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let opts = device_opts(gid);
    let file = match state {
        Some(f) => Some(
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(f)
                .map_err(|e| Error::io(format!("reconnect: opening the state file {f}"), &e))?,
        ),
        None => None,
    };
    let (mut next, mut sum) = (0u64, FNV0);
    if let Some(f) = &file {
        let mut b = [0u8; 16];
        if f.read_at(&mut b, 0)
            .map_err(|e| Error::io("reconnect: reading the state file", &e))?
            == 16
        {
            next = u64::from_le_bytes(b[..8].try_into().unwrap_or_default());
            sum = u64::from_le_bytes(b[8..].try_into().unwrap_or_default());
            println!("receiver: resumed from the state file: {next} orders already received");
        }
    }
    let pd = p.alloc_pd()?;
    let ring = p.alloc_buf(&pd, (RING as usize + 1) * ORDER, Access::ALL, Pages::Normal)?;
    let l = std::net::TcpListener::bind(("0.0.0.0", port)).map_err(|e| Error::io("bind", &e))?;
    println!("receiver: listening on port {port}, next order {next}");
    let (mut conns, mut faults) = (0u64, 0u64);
    // The last connection's QP and CQ, kept until the next connection is up: rxe 6.1 oopses
    // when a frame a destroyed QP sent is still queued on a NIC whose link is down (freed
    // at link up), so a QP that failed with the link down is destroyed only after it is back.
    let mut prev: Option<Link<P>> = None;
    loop {
        let mut k = new_link(&mut p, &pd, CREDITS, RING as u32)?;
        let share = Some(ring.remote(0, (RING as usize + 1) * ORDER)?);
        let mut conn = match connect_qp_server(
            &mut p,
            &mut k.qp,
            &l,
            &opts,
            share,
            Duration::from_secs(3600),
        ) {
            Ok(c) => c,
            Err(e) => {
                println!("receiver: a connection attempt failed: {e}");
                continue;
            }
        };
        conns += 1;
        drop(prev.take());
        for i in 0..RING {
            k.qp.rq().post_recv(RecvWr::new(RECV_ID | i, &[]))?;
        }
        k.qp.rq().ring();
        let total = read_u64(&mut conn.stream, "the order count")?;
        write_u64(&mut conn.stream, next, "the resume point")?;
        println!(
            "receiver: connection {conns}: the gateway sends {total} orders, resuming at {next}"
        );
        let (mut sends, mut recvs) = (0u64, RING);
        let mut wc = [Completion::EMPTY; 32];
        let mut empty = 0u32;
        let fault = 'conn: loop {
            if next == total && sends == 0 {
                break None;
            }
            let n = k.cq.poll(&mut wc);
            let mut refused = None;
            if n == 0 {
                p.progress();
                empty += 1;
                if empty % 4096 == 0 && peer_closed(&conn.stream) {
                    break Some(drain_fault(
                        &mut p,
                        &mut k.qp,
                        &mut k.cq,
                        None,
                        &[],
                        sends,
                        recvs,
                    ));
                }
                continue;
            }
            for (i, c) in wc[..n].iter().enumerate() {
                if !c.is_ok() {
                    let (c, rest) = (wc[i], &wc[i + 1..n]);
                    let d = drain_fault(&mut p, &mut k.qp, &mut k.cq, Some(&c), rest, sends, recvs);
                    break 'conn Some(d);
                }
                if !is_recv(c) {
                    sends -= 1 + u64::from(c.covered);
                    continue;
                }
                recvs -= 1;
                if u64::from(c.imm) != next & 0xffff_ffff {
                    return Err(proto(format!("order {} arrived, {next} expected", c.imm)));
                }
                let slot = (next % RING) as usize;
                let got = ring.get(slot * ORDER, ORDER)?;
                if got != &order_bytes(next)[..] {
                    return Err(proto(format!(
                        "order {next} arrived with other bytes: {got:02x?}"
                    )));
                }
                sum = fnv(sum, got);
                next += 1;
                if next % 1000 == 0 {
                    println!("receiver: {next} received");
                }
                // A refusal (the QP failed: a completion later in this batch, or the peer's
                // close, says why) posts nothing more; the batch is taken to its end first.
                if refused.is_none() {
                    match k.qp.rq().post_recv(RecvWr::new(RECV_ID | next, &[])) {
                        Ok(()) => {
                            k.qp.rq().ring();
                            recvs += 1;
                            if let Some(e) = k.qp.rq().take_ring_error() {
                                // Not given to the device: the provider took them back.
                                recvs -= u64::from(e.count);
                                refused = Some(format!("ring: {e}"));
                            }
                        }
                        Err(r) if post_fault(&r.error) => refused = Some(r.error.to_string()),
                        Err(r) => return Err(r.error.into()),
                    }
                }
                if next % BATCH == 0 {
                    if let Some(f) = &file {
                        let mut b = [0u8; 16];
                        b[..8].copy_from_slice(&next.to_le_bytes());
                        b[8..].copy_from_slice(&sum.to_le_bytes());
                        f.write_all_at(&b, 0)
                            .map_err(|e| Error::io("reconnect: writing the state file", &e))?;
                    }
                    if refused.is_none() {
                        let credit = SendWr::send_imm(next, &[], next as u32).signaled();
                        match k.qp.sq().post(credit) {
                            Ok(()) => {
                                k.qp.sq().ring();
                                sends += 1;
                            }
                            Err(r) if post_fault(&r.error) => refused = Some(r.error.to_string()),
                            Err(r) => return Err(r.error.into()),
                        }
                    }
                }
            }
            if let Some(e) = refused {
                println!("receiver: a post was refused: {e}");
                break Some(drain_fault(
                    &mut p,
                    &mut k.qp,
                    &mut k.cq,
                    None,
                    &[],
                    sends,
                    recvs,
                ));
            }
        };
        match fault {
            None => {
                conn.sync(Duration::from_secs(30))?;
                println!(
                    "receiver: done: {next} orders received in sequence, every byte checked, over \
                     {conns} connections ({faults} faults); checksum {sum:#018x}"
                );
                return Ok(());
            }
            Some(d) => {
                faults += 1;
                println!(
                    "receiver: fault {faults}: {d}; next order {next}; waiting for the gateway"
                );
                if d.missing > 0 {
                    return Err(proto(format!("{} requests never ended", d.missing)));
                }
                drop(conn);
                prev = Some(k);
            }
        }
    }
}

/// The gateway: streams orders `0..total` into the receiver's ring (WRITE WITH IMMEDIATE,
/// `BATCH` a doorbell, the last signaled), at most `RING` unconfirmed; on a fault it drains,
/// counts, reconnects (a new QP) and resends from where the receiver says it resumes.
fn gateway<P: Provider>(mut p: P, host: &str, port: u16, gid: u8, total: u64) -> Result<()> {
    let opts = device_opts(gid);
    let pd = p.alloc_pd()?;
    // Order slots, then the heartbeat's 8 bytes.
    let mut orders = p.alloc_buf(
        &pd,
        RING as usize * ORDER + 8,
        Access::LOCAL_WRITE,
        Pages::Normal,
    )?;
    let expect = (0..total).fold(FNV0, |h, s| fnv(h, &order_bytes(s)));
    let (mut faults, mut lost, mut resent_ok) = (0u64, 0u64, 0u64);
    let mut connected_at = std::time::Instant::now();
    // Where the stream stood at the last fault (posted, confirmed), until the reconnect
    // says where the receiver resumes.
    let mut pending: Option<(u64, u64)> = None;
    // The failed connection's QP and CQ, kept until the next one is up (see the receiver).
    let mut prev: Option<Link<P>> = None;
    println!(
        "gateway: {total} orders to {host}:{port}; retry budget {:.2} s (timeout {}, retry_cnt \
         {}), heartbeat every {} ms",
        retry_budget(&opts),
        opts.timeout,
        opts.retry_cnt,
        HEARTBEAT.as_millis()
    );
    loop {
        // (Re)connect: the receiver may be restarting; try until RECONNECT passes.
        let mut attempt = 0u32;
        let (mut k, mut conn) = loop {
            attempt += 1;
            let mut k = new_link(&mut p, &pd, RING as u32 + 1, CREDITS)?;
            match connect_qp_client(
                &mut p,
                &mut k.qp,
                (host, port),
                &opts,
                None,
                Duration::from_secs(10),
            ) {
                Ok(c) => {
                    drop(prev.take());
                    break (k, c);
                }
                Err(e) if connected_at.elapsed() < RECONNECT => {
                    if attempt == 1 || attempt % 10 == 0 {
                        println!("gateway: connect attempt {attempt}: {e}; retrying");
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        };
        for i in 0..CREDITS {
            k.qp.rq()
                .post_recv(RecvWr::new(RECV_ID | u64::from(i), &[]))?;
        }
        k.qp.rq().ring();
        write_u64(&mut conn.stream, total, "the order count")?;
        let resume = read_u64(&mut conn.stream, "the resume point")?;
        let ring = conn
            .remote_mr()
            .ok_or_else(|| proto("the receiver shared no ring".into()))?;
        if faults > 0 {
            println!(
                "gateway: reconnected after {:.2} s (attempt {attempt}); the receiver resumes at \
                 order {resume}",
                connected_at.elapsed().as_secs_f64()
            );
        }
        if resume > total || resume % BATCH != 0 {
            return Err(proto(format!(
                "the receiver resumes at {resume} of {total}"
            )));
        }
        if let Some((po, cr)) = pending.take() {
            if resume < cr {
                return Err(proto(format!(
                    "the receiver resumes at {resume}, but had confirmed {cr}: it lost confirmed \
                     orders (run it with --state FILE)"
                )));
            }
            lost += po.saturating_sub(resume);
            resent_ok += resume - cr;
            println!(
                "gateway: of the {} orders in flight unconfirmed, {} had reached the receiver \
                 and {} were lost in flight: resent from {resume}",
                po - cr,
                resume - cr,
                po.saturating_sub(resume)
            );
        }
        let (mut posted, mut credited) = (resume, resume);
        let (mut sends, mut recvs) = (0u64, u64::from(CREDITS));
        let mut hb_out = false;
        let mut last = std::time::Instant::now();
        let mut wc = [Completion::EMPTY; 32];
        let mut empty = 0u32;
        // A fault: the first error completion (or a refused post) and where the stream stood.
        let fault: Option<Drain> = 'conn: loop {
            if credited == total {
                break None;
            }
            // Post while the window allows.
            while posted < total && posted + BATCH - credited <= RING {
                let mut sges = [[Sge::default()]; BATCH as usize];
                for (i, sge) in sges.iter_mut().enumerate() {
                    let seq = posted + i as u64;
                    let slot = (seq % RING) as usize;
                    orders
                        .get_mut(slot * ORDER, ORDER)?
                        .copy_from_slice(&order_bytes(seq));
                    *sge = [orders.sge(slot * ORDER, ORDER)?];
                }
                let mut batch = SendBatch::<_, { BATCH as usize }>::new();
                for (i, sge) in sges.iter().enumerate() {
                    let seq = posted + i as u64;
                    let at = ring.target((seq % RING) * ORDER as u64, ORDER as u64)?;
                    let wr = SendWr::write_imm_to(seq, sge, at, seq as u32);
                    let _ = batch.push(wr.signaled_if(i as u64 == BATCH - 1));
                }
                if let Err(e) = k.qp.sq().post_list(batch.as_slice()) {
                    if post_fault(&e.error) && e.index == 0 {
                        println!("gateway: a post was refused: {}", e.error);
                        break 'conn Some(drain_fault(
                            &mut p,
                            &mut k.qp,
                            &mut k.cq,
                            None,
                            &[],
                            sends,
                            recvs,
                        ));
                    }
                    return Err(e.into());
                }
                k.qp.sq().ring();
                sends += BATCH;
                posted += BATCH;
            }
            if sends == 0 && !hb_out && last.elapsed() >= HEARTBEAT {
                let at = ring.target(RING * ORDER as u64, 8)?;
                let sge = [orders.sge(RING as usize * ORDER, 8)?];
                match k.qp.sq().post(SendWr::write_to(HB_ID, &sge, at).signaled()) {
                    Ok(()) => {
                        k.qp.sq().ring();
                        sends += 1;
                        hb_out = true;
                    }
                    Err(r) if post_fault(&r.error) => {
                        println!("gateway: a post was refused: {}", r.error);
                        break 'conn Some(drain_fault(
                            &mut p,
                            &mut k.qp,
                            &mut k.cq,
                            None,
                            &[],
                            sends,
                            recvs,
                        ));
                    }
                    Err(r) => return Err(r.error.into()),
                }
            }
            let n = k.cq.poll(&mut wc);
            let mut refused = None;
            if n == 0 {
                p.progress();
                empty += 1;
                if empty % 4096 == 0 && last.elapsed() > 4 * DRAIN {
                    return Err(proto(format!(
                        "no completion for {} s with {sends} sends outstanding",
                        last.elapsed().as_secs()
                    )));
                }
                continue;
            }
            for (i, c) in wc[..n].iter().enumerate() {
                if !c.is_ok() {
                    let quiet = last.elapsed().as_secs_f64();
                    let (c, rest) = (wc[i], &wc[i + 1..n]);
                    let d = drain_fault(&mut p, &mut k.qp, &mut k.cq, Some(&c), rest, sends, recvs);
                    println!(
                        "gateway: fault {}: the first error came {quiet:.2} s after the last \
                         good completion (retry budget {:.2} s + heartbeat {} ms)",
                        faults + 1,
                        retry_budget(&opts),
                        HEARTBEAT.as_millis()
                    );
                    break 'conn Some(d);
                }
                last = std::time::Instant::now();
                if is_recv(c) {
                    recvs -= 1;
                    // The receiver's count, carried in 32 bits: the step from what we had.
                    let was = credited;
                    credited += u64::from(c.imm.wrapping_sub(credited as u32));
                    if credited / 1000 != was / 1000 {
                        println!("gateway: {} confirmed", credited / 1000 * 1000);
                    }
                    if credited > posted {
                        return Err(proto(format!("credit {credited} beyond {posted} posted")));
                    }
                    if refused.is_none() {
                        match k.qp.rq().post_recv(RecvWr::new(RECV_ID | credited, &[])) {
                            Ok(()) => {
                                k.qp.rq().ring();
                                recvs += 1;
                                if let Some(e) = k.qp.rq().take_ring_error() {
                                    recvs -= u64::from(e.count);
                                    refused = Some(format!("ring: {e}"));
                                }
                            }
                            Err(r) if post_fault(&r.error) => refused = Some(r.error.to_string()),
                            Err(r) => return Err(r.error.into()),
                        }
                    }
                } else {
                    sends -= 1 + u64::from(c.covered);
                    if c.wr_id == HB_ID {
                        hb_out = false;
                    }
                }
            }
            if let Some(e) = refused {
                println!("gateway: a post was refused: {e}");
                break Some(drain_fault(
                    &mut p,
                    &mut k.qp,
                    &mut k.cq,
                    None,
                    &[],
                    sends,
                    recvs,
                ));
            }
        };
        match fault {
            None => {
                conn.sync(Duration::from_secs(30))?;
                println!(
                    "gateway: done: {total} orders confirmed by the receiver; {faults} faults, {lost} \
                     orders lost in flight and resent ({resent_ok} more had reached the receiver \
                     unconfirmed: not resent); checksum {expect:#018x}"
                );
                return Ok(());
            }
            Some(d) => {
                faults += 1;
                println!(
                    "gateway: fault {faults}: {d}; orders posted {posted}, confirmed {credited}: {} \
                     in flight unconfirmed",
                    posted - credited
                );
                if d.missing > 0 {
                    return Err(proto(format!("{} requests never ended", d.missing)));
                }
                // The receiver says at the reconnect where it resumes; everything past that
                // is resent. Until then, all `posted - credited` count as lost in flight.
                drop(conn);
                prev = Some(k);
                connected_at = std::time::Instant::now();
                pending = Some((posted, credited));
            }
        }
    }
}

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
