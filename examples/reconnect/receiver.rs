//! The receiver (server) of the two-process mode.

use super::*;
use std::os::unix::fs::FileExt;

/// Keeps the ring, checks every order byte for byte in sequence, keeps its progress in
/// `a.state` (so a restarted receiver resumes where the killed one stopped), and confirms
/// the batches of each poll to the gateway with a SEND WITH IMMEDIATE carrying its count,
/// after posting their receives again.
pub(super) fn receiver<P: Provider>(p: &mut P, a: &Args) -> Result<()> {
    let io = |what| move |e| Error::io(format!("reconnect: {what} the state file"), &e);
    let mut open = std::fs::OpenOptions::new();
    let open = open.read(true).write(true).create(true).truncate(false);
    let file = match &a.state {
        Some(f) => Some(open.open(f).map_err(io("opening"))?),
        None => None,
    };
    // The state: orders received (the next one's number), the checksum over them.
    let (mut next, mut sum, mut b) = (0u64, FNV0, [0u8; 16]);
    if let Some(f) = &file {
        if f.read_at(&mut b, 0).map_err(io("reading"))? == 16 {
            let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
            (next, sum) = (word(0), word(8));
            println!("receiver: resumed from the state file: {next} orders already received");
        }
    }
    let pd = p.alloc_pd()?;
    let ring = p.alloc_buf(&pd, LEN, Access::ALL, Pages::Normal)?;
    let l = std::net::TcpListener::bind(("0.0.0.0", a.port)).map_err(|e| Error::io("bind", &e))?;
    println!("receiver: listening on port {}, next order {next}", a.port);
    let (mut conns, mut faults) = (0u64, 0u64);
    // The last connection's link, kept until the next connection is up: rxe 6.1 oopses
    // when a frame a destroyed QP sent is still queued on a NIC whose link is down (freed
    // at link up), so a QP that failed with the link down is destroyed only after it is back.
    let mut prev: Option<RcLink<P>> = None;
    loop {
        let mut k = RcLink::new(p, &pd, CREDITS, RING as u32, RECV_ID, DRAIN)?;
        let (share, to) = (Some(ring.remote(0, LEN)?), Duration::from_secs(3600));
        let mut conn = match connect_qp_server(p, &mut k.qp, &l, &a.opts, share, to) {
            Ok(c) => c,
            Err(e) => {
                println!("receiver: a connection attempt failed: {e}");
                continue;
            }
        };
        conns += 1;
        drop(prev.take());
        k.recvs.fill(k.qp.rq())?;
        let total = swap_u64(&mut conn.stream, next)?;
        println!("receiver: connection {conns}: {total} orders, resuming at {next}");
        let (mut wc, mut empty) = ([Completion::EMPTY; 32], 0u32);
        let fault = 'conn: loop {
            if next == total && k.window.in_flight() == 0 {
                break None;
            }
            let n = k.cq.poll(&mut wc);
            empty = if n == 0 { empty + 1 } else { 0 };
            if empty % 4096 == 4095 && peer_closed(&conn.stream) {
                break Some(fault(p, &mut k, &[])?);
            }
            p.progress();
            // The credit for the last batch this poll completed, sent once its receives are
            // posted again: each order it lets the gateway send needs one (else RNR NAKs,
            // and after `rnr_retry` of them RNR_RETRY_EXC_ERR on the gateway).
            let mut credit = None;
            for (i, c) in wc[..n].iter().enumerate() {
                if !c.is_ok() {
                    break 'conn Some(fault(p, &mut k, &wc[i..n])?);
                }
                if !k.take(c) {
                    continue;
                }
                if u64::from(c.imm) != next & 0xffff_ffff {
                    return Err(proto(format!("order {} arrived, {next} expected", c.imm)));
                }
                let got = ring.get((next % RING) as usize * ORDER, ORDER)?;
                if got != order_bytes(next) {
                    return Err(proto(format!("order {next} holds other bytes: {got:02x?}")));
                }
                (sum, next) = (fnv(sum, got), next + 1);
                if next % 1000 == 0 {
                    println!("receiver: {next} received");
                }
                if next % BATCH == 0 {
                    if let Some(f) = &file {
                        b[..8].copy_from_slice(&next.to_le_bytes());
                        b[8..].copy_from_slice(&sum.to_le_bytes());
                        f.write_all_at(&b, 0).map_err(io("writing"))?;
                    }
                    credit = Some(next);
                }
            }
            // A refusal (the QP failed: a completion later, or the peer's close, says why)
            // posts nothing more.
            let mut refused = k.recvs.replenish(k.qp.rq()).err().map(|e| e.to_string());
            if let (None, Some(c)) = (&refused, credit) {
                let wr = SendWr::send_imm(c, &[], c as u32).signaled();
                match k.qp.sq().post_and_ring(wr) {
                    Ok(()) => k.window.posted(1),
                    Err(r) => refused = Some(refusal(r.error)?),
                }
            }
            if let Some(e) = refused {
                println!("receiver: a post was refused: {e}");
                break Some(fault(p, &mut k, &[])?);
            }
        };
        let Some(d) = fault else {
            conn.sync(Duration::from_secs(30))?;
            println!(
                "receiver: done: {next} orders received in sequence, every byte checked, over \
                 {conns} connections ({faults} faults); checksum {sum:#018x}"
            );
            return Ok(());
        };
        faults += 1;
        println!("receiver: fault {faults}: {d}; next order {next}; waiting for the gateway");
        drop(conn);
        prev = Some(k);
    }
}

/// Whether the gateway closed (or reset) the TCP connection: a process that died, or a
/// gateway that gave its QP up. Non-blocking.
fn peer_closed(s: &TcpStream) -> bool {
    let mut b = [0u8; 1];
    let r = s.set_nonblocking(true).and_then(|()| s.peek(&mut b));
    let _ = s.set_nonblocking(false);
    !matches!(r, Ok(1..)) && !matches!(&r, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock)
}
