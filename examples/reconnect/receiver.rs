//! The receiver (server) of the two-process mode.

use super::*;

/// The receiver: keeps the ring, checks every order byte for byte in sequence, keeps its
/// progress in `state` (so a restarted receiver resumes where the killed one stopped), and
/// confirms each batch to the gateway with a SEND WITH IMMEDIATE carrying its count.
pub(super) fn receiver<P: Provider>(
    mut p: P,
    port: u16,
    gid: u8,
    state: Option<&str>,
) -> Result<()> {
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
