//! The gateway (client) of the two-process mode.

use super::*;

/// The gateway: streams orders `0..total` into the receiver's ring (WRITE WITH IMMEDIATE,
/// `BATCH` a doorbell, the last signaled), at most `RING` unconfirmed; on a fault it drains,
/// counts, reconnects (a new QP) and resends from where the receiver says it resumes.
pub(super) fn gateway<P: Provider>(
    mut p: P,
    host: &str,
    port: u16,
    gid: u8,
    total: u64,
) -> Result<()> {
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
        // The receiver counts orders, not batches: after a fault it may hold part of a batch
        // (the first short batch below realigns the stream).
        if resume > total {
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
            // Post while the window allows: whole batches, and after a resume inside a batch
            // the rest of that batch first (the receiver confirms at batch boundaries).
            while posted < total && posted + (BATCH - posted % BATCH) - credited <= RING {
                let len = (BATCH - posted % BATCH) as usize;
                let mut sges = [[Sge::default()]; BATCH as usize];
                for (i, sge) in sges.iter_mut().enumerate().take(len) {
                    let seq = posted + i as u64;
                    let slot = (seq % RING) as usize;
                    orders
                        .get_mut(slot * ORDER, ORDER)?
                        .copy_from_slice(&order_bytes(seq));
                    *sge = [orders.sge(slot * ORDER, ORDER)?];
                }
                let mut batch = SendBatch::<_, { BATCH as usize }>::new();
                for (i, sge) in sges.iter().enumerate().take(len) {
                    let seq = posted + i as u64;
                    let at = ring.target((seq % RING) * ORDER as u64, ORDER as u64)?;
                    let wr = SendWr::write_imm_to(seq, sge, at, seq as u32);
                    let _ = batch.push(wr.signaled_if(i == len - 1));
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
                sends += len as u64;
                posted += len as u64;
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
