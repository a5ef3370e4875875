//! The sim mode: both ends in one process, the peer "restarting" every EVERY batches.

use super::*;

pub(super) fn on_sim(batches: u64, every: u64) -> Result<()> {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd()?;
    let mut orders = dev.alloc_buf(&pd, ORDER, Access::LOCAL_WRITE, Pages::Normal)?;
    // The peer's ring (every incarnation's: this process owns the memory).
    let ring = dev.alloc_buf(&pd, BATCH as usize * ORDER, Access::ALL, Pages::Normal)?;
    let dst = ring.remote(0, BATCH as usize * ORDER)?;
    let mut gw = RcLink::new(&mut dev, &pd, BATCH as u32, 0, RECV_ID, DRAIN)?;
    let mut peer = RcLink::new(&mut dev, &pd, 0, BATCH as u32, RECV_ID, DRAIN)?;
    // The defaults: a peer that vanished ends the oldest request in RETRY_EXC_ERR.
    let opts = ConnectOpts::default();
    connect_pair(&mut dev, &mut gw.qp, &mut peer.qp, &opts)?;
    // `acked`: orders acknowledged (their batch's signaled completion succeeded); `next`:
    // the order the peer expects.
    let (mut acked, mut next, mut restarts, mut lost, mut delivered) = (0, 0, 0, 0, 0u64);
    let (mut batch, mut restarted_at) = (0u64, None);
    let mut wc = [Completion::EMPTY; BATCH as usize];
    while batch < batches {
        peer.recvs.fill(peer.qp.rq())?;
        for i in 0..BATCH {
            let seq = acked + i;
            orders.get_mut(0, 8)?.copy_from_slice(&seq.to_le_bytes());
            let sge = [orders.sge(0, ORDER)?];
            let at = dst.target(i * ORDER as u64, ORDER as u64)?;
            let wr = SendWr::write_imm_to(seq, &sge, at, seq as u32);
            gw.qp.sq().post(wr.signaled_if(i == BATCH - 1))?;
        }
        gw.qp.sq().ring();
        gw.window.posted(BATCH as u32);
        // Once per EVERY batches (not again when the batch is resent): the peer process dies
        // with the batch in flight (its QP destroyed before the device ran it), and a new
        // incarnation comes up, not yet connected.
        if (batch + 1) % every == 0 && restarted_at != Some(batch) {
            peer = RcLink::new(&mut dev, &pd, 0, BATCH as u32, RECV_ID, DRAIN)?;
            (restarts, restarted_at) = (restarts + 1, Some(batch));
        }
        // One completion at a time: success acknowledges the batch (the 15 unsignaled are
        // covered); an error goes to the library's drain with the rest still in the CQ. An
        // error names the first order that failed; the ones it covers ran (see
        // `Completion::covered`), so the stream resumes at its wr_id.
        while gw.window.in_flight() > 0 {
            if poll_wait(&mut dev, &mut gw.cq, &mut wc[..1], DRAIN)? == 1 && !wc[0].is_ok() {
                break;
            }
            gw.take(&wc[0]);
        }
        if !wc[0].is_ok() {
            // The library's recovery on the same QP: the drain ends (and counts) every
            // request outstanding, the reconnect takes the QP from ERR through RESET to RTS,
            // the new peer's from RESET. The peer learns where the stream resumes: the first
            // order that failed. (The gateway receives nothing, so the drain delivers nothing.)
            let mut again =
                |p: &mut SimDevice, qp: &mut _| connect_pair(p, qp, &mut peer.qp, &opts);
            let r = gw.recover(&mut dev, &wc[..1], |_| {}, |p, qp| again(p, qp).map(drop))?;
            lost += r.sends_failed;
            (acked, next, wc[0]) = (wc[0].wr_id, wc[0].wr_id, Completion::EMPTY);
            continue;
        }
        // The peer takes what arrived: each order's immediate must be the next number.
        dev.progress();
        let n = peer.cq.poll(&mut wc);
        for c in &wc[..n] {
            if !c.is_ok() || u64::from(c.imm) != next & 0xffff_ffff {
                return Err(proto(format!("the peer got {c:?}, {next} expected")));
            }
            peer.take(c);
            (next, delivered) = (next + 1, delivered + 1);
        }
        (acked, batch) = (acked + BATCH, batch + 1);
    }
    println!(
        "{batches} batches of {BATCH} orders: {restarts} peer restarts, {lost} orders lost in \
         flight (detected from error completions, resent), {acked} orders acknowledged, \
         {delivered} delivered in sequence to the peers"
    );
    if acked != batches * BATCH || delivered != acked {
        return Err(proto(format!("acked {acked}, delivered {delivered}")));
    }
    Ok(())
}
