//! The sim mode: both ends in one process, the peer "restarting" every EVERY batches.

use super::*;

/// The peer: its QP, CQ and the ring the orders land in.
pub(super) struct Peer {
    pub(super) qp: <SimDevice as Provider>::Qp,
    pub(super) cq: <SimDevice as Provider>::Cq,
    pub(super) ring: RegisteredBuf<<SimDevice as Provider>::Mr>,
    /// The next order number this incarnation expects.
    pub(super) next: u64,
}

pub(super) fn cfg() -> QpConfig {
    let mut c = QpConfig::new(QpType::Rc);
    (c.caps.max_send_wr, c.caps.max_recv_wr) = (BATCH as u32, BATCH as u32);
    c
}

pub(super) fn new_peer(dev: &mut SimDevice, pd: &<SimDevice as Provider>::Pd) -> Result<Peer> {
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
pub(super) fn connect(
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
pub(super) fn post_receives(p: &mut Peer) -> Result<()> {
    for i in 0..BATCH {
        p.qp.rq().post_recv(RecvWr::new(i, &[]))?;
    }
    p.qp.rq().ring();
    Ok(())
}

/// The peer takes what arrived: each order's immediate must be the next number.
pub(super) fn peer_takes(dev: &mut SimDevice, p: &mut Peer) -> Result<u64> {
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

pub(super) fn on_sim(batches: u64, every: u64) -> Result<()> {
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
