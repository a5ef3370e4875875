//! The sim mode: both ends in one process, the peer "restarting" every EVERY batches.

use super::*;

/// The peer: its QP, CQ, receives, and the ring the orders land in.
struct Peer {
    qp: SimQp,
    cq: SimCq,
    recvs: RecvReplenisher,
    ring: RegisteredBuf<<SimDevice as Provider>::Mr>,
    /// The next order number this incarnation expects.
    next: u64,
}

fn cfg() -> QpConfig {
    let mut c = QpConfig::new(QpType::Rc);
    // One send slot more than a batch: the recovery's marker.
    (c.caps.max_send_wr, c.caps.max_recv_wr) = (BATCH as u32 + 1, BATCH as u32);
    c
}

impl Peer {
    fn new(dev: &mut SimDevice, pd: &<SimDevice as Provider>::Pd) -> Result<Peer> {
        let ring = dev.alloc_buf(pd, BATCH as usize * ORDER, Access::ALL, Pages::Normal)?;
        let mut cq = dev.create_cq(2 * BATCH as u32 + 1)?;
        let qp = dev.create_qp(pd, &mut cq, None, None, &cfg())?;
        let recvs = RecvReplenisher::new(BATCH as u32);
        Ok(Peer {
            qp,
            cq,
            recvs,
            ring,
            next: 0,
        })
    }

    /// Takes what arrived: each order's immediate must be the next number.
    fn takes(&mut self, dev: &mut SimDevice) -> Result<u64> {
        let mut wc = [Completion::EMPTY; BATCH as usize];
        let mut got = 0;
        loop {
            dev.progress();
            let n = self.cq.poll(&mut wc);
            if n == 0 {
                return Ok(got);
            }
            for c in &wc[..n] {
                if !c.is_ok() || u64::from(c.imm) != self.next & 0xffff_ffff {
                    return Err(proto(format!(
                        "the peer got {:?} with order {}, {} expected",
                        c.status, c.imm, self.next
                    )));
                }
                self.recvs.consumed(c);
                (self.next, got) = (self.next + 1, got + 1);
            }
        }
    }
}

pub(super) fn on_sim(batches: u64, every: u64) -> Result<()> {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd()?;
    let mut orders = dev.alloc_buf(&pd, ORDER, Access::LOCAL_WRITE, Pages::Normal)?;
    let mut gcq = dev.create_cq(2 * BATCH as u32 + 1)?;
    let mut gw = dev.create_qp(&pd, &mut gcq, None, None, &cfg())?;
    let mut window = Recovery::send_window(&gw);
    let mut rec = Recovery::new(&window, DRAIN);
    let mut peer = Peer::new(&mut dev, &pd)?;
    // The defaults: a peer that vanished ends the oldest request in RETRY_EXC_ERR.
    let opts = ConnectOpts::default();
    connect_pair(&mut dev, &mut gw, &mut peer.qp, &opts)?;
    // `acked`: orders acknowledged (their batch's signaled completion succeeded); the gateway
    // resends from there after a fault.
    let (mut acked, mut restarts, mut lost, mut delivered) = (0u64, 0u64, 0u64, 0u64);
    let (mut batch, mut restarted_at) = (0u64, None);
    while batch < batches {
        peer.recvs.fill(peer.qp.rq())?;
        let dst = peer.ring.remote(0, BATCH as usize * ORDER)?;
        for i in 0..BATCH {
            let seq = acked + i;
            orders.get_mut(0, 8)?.copy_from_slice(&seq.to_le_bytes());
            let at = dst.target(i * ORDER as u64, ORDER as u64)?;
            let sge = [orders.sge(0, ORDER)?];
            let wr = SendWr::write_imm_to(seq, &sge, at, seq as u32);
            gw.sq().post(wr.signaled_if(i == BATCH - 1))?;
        }
        gw.sq().ring();
        window.posted(BATCH as u32);
        // Once per EVERY batches (not again when the batch is resent): the peer process dies
        // with the batch in flight (its QP destroyed before the device ran it), and a new
        // incarnation comes up, not yet connected.
        if (batch + 1) % every == 0 && restarted_at != Some(batch) {
            peer = Peer::new(&mut dev, &pd)?;
            (restarts, restarted_at) = (restarts + 1, Some(batch));
        }
        // One completion at a time: success acknowledges the batch (the 15 unsignaled are
        // covered); after an error the rest stays in the CQ for the recovery's drain.
        let mut wc = [Completion::EMPTY];
        let mut failed = None;
        while window.in_flight() > 0 && failed.is_none() {
            if poll_wait(&mut dev, &mut gcq, &mut wc, DRAIN)? == 1 {
                window.retire(&wc[0]);
                failed = (!wc[0].is_ok()).then_some(wc[0].wr_id);
            }
        }
        if let Some(first) = failed {
            // Detected: the library drains the rest (listing the failed orders), resets the
            // window and reconnects the gateway's QP (ERR, RESET, ..., RTS) to the new peer.
            let q = LinkQueues {
                send_cq: &mut gcq,
                recv_cq: None,
                window: &mut window,
                recvs: None,
            };
            let reconnect = |d: &mut SimDevice, qp: &mut SimQp| {
                connect_pair(d, qp, &mut peer.qp, &opts).map(drop)
            };
            let r = rec.recover(&mut dev, &mut gw, q, |_| {}, reconnect)?;
            lost += 1 + r.sends_failed;
            // The reconnect handshake tells the new peer where the stream resumes: the first
            // order that failed (those before it were acknowledged).
            (acked, peer.next) = (first, first);
            continue;
        }
        delivered += peer.takes(&mut dev)?;
        acked += BATCH;
        batch += 1;
    }
    println!(
        "{batches} batches of {BATCH} orders: {restarts} peer restarts, {lost} orders lost in \
         flight (detected from error completions, resent), {acked} orders acknowledged, \
         {delivered} delivered in sequence to the peers"
    );
    if acked != batches * BATCH || delivered != acked {
        return Err(proto(format!(
            "acknowledged {acked}, delivered {delivered}"
        )));
    }
    Ok(())
}
