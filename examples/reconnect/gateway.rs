//! The gateway (client) of the two-process mode.

use super::*;

/// Streams orders `0..a.total` into the receiver's ring (`BATCH` a doorbell, the last
/// signaled), at most `RING` unconfirmed; on a fault the link's `Recovery` drains it, and the
/// gateway reconnects (a new QP) and resends from where the receiver says it resumes.
pub(super) fn gateway<P: Provider>(mut p: P, host: &str, a: &Args) -> Result<()> {
    let (opts, total) = (device_opts(a.gid), a.total);
    let pd = p.alloc_pd()?;
    let mut orders = p.alloc_buf(
        &pd,
        RING as usize * ORDER,
        Access::LOCAL_WRITE,
        Pages::Normal,
    )?;
    let expect = (0..total).fold(FNV0, |h, s| fnv(h, &order_bytes(s)));
    let (mut faults, mut lost, mut resent_ok) = (0u64, 0u64, 0u64);
    let mut since = Instant::now();
    // Where the stream stood at the last fault (posted, confirmed), until the reconnect
    // says where the receiver resumes.
    let mut pending: Option<(u64, u64)> = None;
    // The failed connection's link, kept until the next one is up (see the receiver).
    let mut prev: Option<Link<P>> = None;
    println!(
        "gateway: {total} orders to {host}:{}; retry budget {:.2} s (timeout {}, retry_cnt \
         {}), heartbeat every {} ms",
        a.port,
        opts.retry_budget().as_secs_f64(),
        opts.timeout,
        opts.retry_cnt,
        HEARTBEAT.as_millis()
    );
    loop {
        // (Re)connect: the receiver may be restarting; try until RECONNECT passes.
        let mut attempt = 0u32;
        let (mut k, mut conn) = loop {
            attempt += 1;
            let mut k = Link::new(&mut p, &pd, RING as u32 + 1, CREDITS)?;
            let to = Duration::from_secs(10);
            match connect_qp_client(&mut p, &mut k.qp, (host, a.port), &opts, None, to) {
                Ok(c) => break (k, c),
                Err(e) if since.elapsed() < RECONNECT => {
                    if attempt == 1 || attempt % 10 == 0 {
                        println!("gateway: connect attempt {attempt}: {e}; retrying");
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        };
        drop(prev.take());
        k.recvs.fill(k.qp.rq())?;
        write_u64(&mut conn.stream, total, "the order count")?;
        let resume = read_u64(&mut conn.stream, "the resume point")?;
        let ring = conn
            .remote_mr()
            .ok_or_else(|| proto("the receiver shared no ring".into()))?;
        if faults > 0 {
            println!(
                "gateway: reconnected after {:.2} s (attempt {attempt}); the receiver resumes at \
                 order {resume}",
                since.elapsed().as_secs_f64()
            );
        }
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
        let mut last = Instant::now();
        let mut wc = [Completion::EMPTY; 32];
        let fault: Option<Tally> = 'conn: loop {
            if credited == total {
                break None;
            }
            // Whole batches while the window allows; after a resume inside a batch the rest
            // of that batch first (the receiver confirms at batch boundaries).
            while posted < total {
                let len = BATCH - posted % BATCH;
                if posted + len - credited > RING || u64::from(k.window.room()) < len {
                    break;
                }
                let mut sges = [[Sge::default()]; BATCH as usize];
                let mut batch = SendBatch::<_, { BATCH as usize }>::new();
                for (i, sge) in sges.iter_mut().enumerate().take(len as usize) {
                    let slot = ((posted + i as u64) % RING) as usize * ORDER;
                    orders
                        .get_mut(slot, ORDER)?
                        .copy_from_slice(&order_bytes(posted + i as u64));
                    *sge = [orders.sge(slot, ORDER)?];
                }
                for (i, sge) in sges.iter().enumerate().take(len as usize) {
                    let seq = posted + i as u64;
                    let at = ring.target((seq % RING) * ORDER as u64, ORDER as u64)?;
                    let wr = SendWr::write_imm_to(seq, sge, at, seq as u32);
                    let _ = batch.push(wr.signaled_if(i as u64 == len - 1));
                }
                if let Err(e) = k.window.post_list(k.qp.sq(), batch.as_slice()) {
                    if post_fault(&e.error) && e.index == 0 {
                        println!("gateway: a post was refused: {}", e.error);
                        break 'conn Some(k.fault(&mut p, None, &[])?);
                    }
                    return Err(e.into());
                }
                k.qp.sq().ring();
                posted += len;
            }
            // Idle: a probe finds a peer that vanished while we waited for credit.
            if k.window.in_flight() == 0 && last.elapsed() >= HEARTBEAT {
                if let Err(e) = probe(&mut k.qp, &mut k.window) {
                    if !post_fault(&e) {
                        return Err(e.into());
                    }
                    println!("gateway: a post was refused: {e}");
                    break Some(k.fault(&mut p, None, &[])?);
                }
            }
            let n = k.cq.poll(&mut wc);
            if n == 0 {
                p.progress();
                if last.elapsed() > 4 * DRAIN {
                    return Err(proto(format!(
                        "no completion for {} s with {} sends outstanding",
                        last.elapsed().as_secs(),
                        k.window.in_flight()
                    )));
                }
                continue;
            }
            for (i, c) in wc[..n].iter().enumerate() {
                if !c.is_ok() {
                    println!(
                        "gateway: fault {}: the first error came {:.2} s after the last good \
                         completion (retry budget {:.2} s + heartbeat {} ms)",
                        faults + 1,
                        last.elapsed().as_secs_f64(),
                        opts.retry_budget().as_secs_f64(),
                        HEARTBEAT.as_millis()
                    );
                    break 'conn Some(k.fault(&mut p, Some(c), &wc[i + 1..n])?);
                }
                last = Instant::now();
                if k.take(c) {
                    // The receiver's count, carried in 32 bits: the step from what we had.
                    let was = credited;
                    credited += u64::from(c.imm.wrapping_sub(credited as u32));
                    if credited / 1000 != was / 1000 {
                        println!("gateway: {} confirmed", credited / 1000 * 1000);
                    }
                    if credited > posted {
                        return Err(proto(format!("credit {credited} beyond {posted} posted")));
                    }
                }
            }
            if let Err(e) = k.recvs.replenish(k.qp.rq()) {
                println!("gateway: a post was refused: {e}");
                break Some(k.fault(&mut p, None, &[])?);
            }
        };
        let Some(d) = fault else {
            conn.sync(Duration::from_secs(30))?;
            println!(
                "gateway: done: {total} orders confirmed by the receiver; {faults} faults, {lost} \
                 orders lost in flight and resent ({resent_ok} more had reached the receiver \
                 unconfirmed: not resent); checksum {expect:#018x}"
            );
            return Ok(());
        };
        faults += 1;
        println!(
            "gateway: fault {faults}: {d}; orders posted {posted}, confirmed {credited}: {} in \
             flight unconfirmed",
            posted - credited
        );
        if d.missing() > 0 {
            return Err(proto(format!("{} requests never ended", d.missing())));
        }
        // The receiver says at the reconnect where it resumes; everything past that is
        // resent. Until then, all `posted - credited` count as lost in flight.
        drop(conn);
        (prev, since, pending) = (Some(k), Instant::now(), Some((posted, credited)));
    }
}
