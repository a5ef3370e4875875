//! The gateway (client) of the two-process mode.

use super::*;
use rdma_direct::providers::helpers::Stall;

/// Streams orders `0..a.total` into the receiver's ring (`BATCH` a doorbell, the last
/// signaled), at most `RING` unconfirmed; on a fault the link's `Recovery` drains it, and the
/// gateway reconnects (a new QP) and resends from where the receiver says it resumes.
pub(super) fn gateway<P: Provider>(p: &mut P, host: &str, a: &Args) -> Result<()> {
    let (opts, total) = (a.opts, a.total);
    let pd = p.alloc_pd()?;
    let mut orders = p.alloc_buf(&pd, LEN, Access::LOCAL_WRITE, Pages::Normal)?;
    let expect = (0..total).fold(FNV0, |h, s| fnv(h, &order_bytes(s)));
    let (mut faults, mut lost, mut resent_ok) = (0u64, 0u64, 0u64);
    // Where the stream stood at the last fault (posted, confirmed), and when it failed.
    let (mut pending, mut since) = (None, Instant::now());
    // The failed connection's link, kept until the next one is up (see the receiver).
    let mut prev: Option<RcLink<P>> = None;
    let budget = format!("retry budget {:.2} s", opts.retry_budget().as_secs_f64());
    let (t, r, hb) = (opts.timeout, opts.retry_cnt, HEARTBEAT.as_millis());
    println!("gateway: {total} orders to {host}:{}; {budget} (timeout {t}, retry_cnt {r}), heartbeat every {hb} ms", a.port);
    loop {
        // (Re)connect: the receiver may be restarting; try until RECONNECT passes.
        let mut attempt = 0u32;
        let (mut k, mut conn) = loop {
            attempt += 1;
            let mut k = RcLink::new(p, &pd, RING as u32 + 1, CREDITS, RECV_ID, DRAIN)?;
            let to = Duration::from_secs(10);
            match connect_qp_client(p, &mut k.qp, (host, a.port), &opts, None, to) {
                Ok(c) => break (k, c),
                Err(e) if since.elapsed() < RECONNECT => {
                    if attempt % 10 == 1 {
                        println!("gateway: connect attempt {attempt}: {e}; retrying");
                    }
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => return Err(e),
            }
        };
        drop(prev.take());
        k.recvs.fill(k.qp.rq())?;
        let resume = swap_u64(&mut conn.stream, total)?;
        let ring = conn
            .remote_mr()
            .ok_or_else(|| proto("the receiver shared no ring".into()))?;
        let (po, cr) = pending.unwrap_or((total, 0));
        if resume < cr || resume > po {
            return Err(proto(format!(
                "the receiver resumes at {resume}, not in {cr}..={po} (confirmed..=posted; run \
                 it with --state FILE)"
            )));
        }
        if pending.take().is_some() {
            let s = since.elapsed().as_secs_f64();
            println!("gateway: reconnected after {s:.2} s (attempt {attempt}); the receiver resumes at order {resume}");
            (lost, resent_ok) = (lost + po - resume, resent_ok + resume - cr);
            let (out, got, gone) = (po - cr, resume - cr, po - resume);
            println!("gateway: of the {out} orders in flight unconfirmed, {got} had reached the receiver and {gone} were lost in flight: resent from {resume}");
        }
        let (mut posted, mut credited, mut last) = (resume, resume, Instant::now());
        // Nothing completing for this long (not even a probe's) ends the run: the library's
        // stall error.
        let mut stalled = Stall::new(4 * DRAIN);
        let mut wc = [Completion::EMPTY; 32];
        let fault = 'conn: loop {
            if credited == total {
                break None;
            }
            let mut refused = k.recvs.replenish(k.qp.rq()).err().map(|e| e.to_string());
            // Whole batches while the window allows, one doorbell each (after a resume inside
            // a batch the rest of it first: the receiver confirms at batch boundaries).
            while posted < total && refused.is_none() {
                let end = (posted / BATCH + 1) * BATCH;
                if end - credited > RING || u64::from(k.window.room()) < end - posted {
                    break;
                }
                while posted < end {
                    // The order into its slot here, then the typed WRITE WITH IMMEDIATE to
                    // the same slot of the receiver's ring (immediate: its number).
                    let at = (posted % RING) * ORDER as u64;
                    let sge = [orders.sge(at as usize, ORDER)?];
                    orders
                        .get_mut(at as usize, ORDER)?
                        .copy_from_slice(&order_bytes(posted));
                    let to = ring.target(at, ORDER as u64)?;
                    let wr = SendWr::write_imm_to(posted, &sge, to, posted as u32);
                    if let Err(r) = k.qp.sq().post(wr.signaled_if(posted + 1 == end)) {
                        refused = Some(refusal(r.error)?);
                        break;
                    }
                    k.window.posted(1);
                    posted += 1;
                }
                k.qp.sq().ring();
            }
            // Idle: a probe finds a peer that vanished while we waited for credit.
            if refused.is_none() && k.window.in_flight() == 0 && last.elapsed() >= HEARTBEAT {
                if let Err(e) = probe(&mut k.qp, &mut k.window) {
                    refused = Some(refusal(e)?);
                }
            }
            if let Some(e) = refused {
                println!("gateway: a post was refused: {e}");
                break Some(fault(p, &mut k, &[])?);
            }
            let n = k.cq.poll(&mut wc);
            p.progress();
            if n == 0 {
                stalled.idle("gateway", || format!("{} unconfirmed", posted - credited))?;
            }
            for (i, c) in wc[..n].iter().enumerate() {
                if !c.is_ok() {
                    let s = last.elapsed().as_secs_f64();
                    println!("gateway: fault {}: the first error came {s:.2} s after the last good completion ({budget} + heartbeat {hb} ms)", faults + 1);
                    break 'conn Some(fault(p, &mut k, &wc[i..n])?);
                }
                last = Instant::now();
                stalled.progressed();
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
        let out = posted - credited;
        println!("gateway: fault {faults}: {d}; orders posted {posted}, confirmed {credited}: {out} in flight unconfirmed");
        // The receiver says at the reconnect where it resumes; everything past that is
        // resent. Until then, all `posted - credited` count as lost in flight.
        drop(conn);
        (prev, since, pending) = (Some(k), Instant::now(), Some((posted, credited)));
    }
}
