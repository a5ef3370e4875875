//! The message-loop glue the library owns (`providers::flow`), each helper's contract on the
//! software device: send windows kept from completions (covered ones included), receives
//! kept posted with one doorbell per poll, ring slots and credits for WRITE-into-the-peer's
//! ring, several CQs waited on with one stall deadline, and `connect_pair`.

mod common;

use common::SimSide;
use rdma_direct::prelude::*;
use rdma_direct::providers::sim::{SimCq, SimPd, SimQp};
use std::time::Duration;

const STALL: Duration = Duration::from_secs(5);

fn cfg(send: u32, recv: u32) -> QpConfig {
    common::qp_cfg(QpType::Rc, send, recv)
}

/// Two connected QPs of `depth` requests each way, each with its own CQ.
fn pair(dev: &mut SimDevice, pd: &SimPd, depth: u32) -> (SimSide, SimSide) {
    let opts = ConnectOpts::default();
    common::sim_pair(dev, pd, 4 * depth, &cfg(depth, depth), &opts)
}

#[test]
fn connect_pair_brings_both_qps_to_rts_each_the_others_peer() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, mut ca), (mut b, mut cb)) = pair(&mut dev, &pd, 8);
    assert_eq!((a.state(), b.state()), (QpState::Rts, QpState::Rts));
    fn send(dev: &mut SimDevice, from: &mut SimQp, to: &mut SimQp, cq: &mut SimCq) {
        to.rq().post_recv(RecvWr::new(5, &[])).unwrap();
        to.rq().ring();
        from.sq().post(SendWr::send(1, &[])).unwrap();
        from.sq().ring();
        let mut wc = [Completion::EMPTY];
        poll_wait(dev, cq, &mut wc, STALL).unwrap();
        wc[0].check().unwrap();
        assert_eq!((wc[0].qp_num, wc[0].wr_id), (to.qpn(), 5));
    }
    send(&mut dev, &mut a, &mut b, &mut cb);
    send(&mut dev, &mut b, &mut a, &mut ca);
}

#[test]
fn a_send_window_counts_covered_requests_and_gives_room() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, mut ca), _b) = pair(&mut dev, &pd, 16);
    let mut w = SendWindow::new(&a);
    assert_eq!((w.qpn(), w.depth(), w.room()), (a.qpn(), 16, 16));
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let at = buf.remote(0, 4096).unwrap().target(0, 8).unwrap();
    let mut batch = SendBatch::<_, 10>::new();
    for i in 0..10u64 {
        // Signaled every 4th and the last: completions cover 3, 3 and 1 earlier requests.
        let wr = SendWr::write_to(i, &[], at).inline(b"12345678");
        batch.push(wr.signaled_if(i % 4 == 3 || i == 9)).unwrap();
    }
    w.post_list(a.sq(), batch.as_slice()).unwrap();
    assert_eq!((w.in_flight(), w.room()), (10, 6));
    let mut seen = Vec::new();
    while w.in_flight() > 0 {
        let mut wc = [Completion::EMPTY; 8];
        let n = poll_wait(&mut dev, &mut ca, &mut wc, STALL).unwrap();
        for c in &wc[..n] {
            c.check().unwrap();
            assert!(w.retire(c));
            seen.push((c.wr_id, c.covered, w.in_flight()));
        }
    }
    assert_eq!(seen, [(3, 3, 6), (7, 3, 2), (9, 1, 0)]);
    assert_eq!(w.room(), 16);
    // Another QP's completion and a receive are not this window's.
    let other = Completion {
        qp_num: a.qpn() + 1,
        ..Completion::EMPTY
    };
    let recv = Completion {
        qp_num: a.qpn(),
        opcode: WcOpcode::Recv,
        ..Completion::EMPTY
    };
    assert!(!w.retire(&other) && !w.retire(&recv));
    // A list refused part way counts the requests that went.
    let many = [SendWr::write_to(0, &[], at).inline(b"x"); 20];
    let e = w.post_list(a.sq(), &many).unwrap_err();
    assert_eq!((e.index, w.in_flight(), w.room()), (16, 16, 0));
}

#[test]
fn send_windows_tell_qps_on_one_cq_apart() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut cq = dev.create_cq(64).unwrap();
    let mut peer_cq = dev.create_cq(64).unwrap();
    let mut qps = Vec::new();
    let mut peers = Vec::new();
    for _ in 0..3 {
        let mut a = dev.create_qp(&pd, &mut cq, None, None, &cfg(8, 8)).unwrap();
        let mut b = dev
            .create_qp(&pd, &mut peer_cq, None, None, &cfg(8, 8))
            .unwrap();
        connect_pair(&mut dev, &mut a, &mut b, &ConnectOpts::default()).unwrap();
        qps.push(a);
        peers.push(b);
    }
    let mut ws = SendWindows::new();
    // Added in reverse QPN order: the lookup does not depend on it.
    for qp in qps.iter().rev() {
        ws.add(qp);
    }
    assert_eq!(ws.len(), 3);
    assert_eq!(ws.index_of(qps[0].qpn()), Some(2));
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let at = buf.remote(0, 64).unwrap().target(0, 8).unwrap();
    // QP k posts k + 1 requests, the last signaled.
    for (k, qp) in qps.iter_mut().enumerate() {
        let i = ws.index_of(qp.qpn()).unwrap();
        let wrs: Vec<_> = (0..=k as u64)
            .map(|j| {
                SendWr::write_to(j, &[], at)
                    .inline(b"y")
                    .signaled_if(j == k as u64)
            })
            .collect();
        ws.get_mut(i).unwrap().post_list(qp.sq(), &wrs).unwrap();
    }
    assert_eq!((ws.in_flight(), ws.min_room()), (6, 5));
    let mut done = Vec::new();
    let mut missing = [3usize];
    wait_each(&mut dev, &mut [&mut cq], &mut missing, STALL, |_, c| {
        c.check()?;
        done.push(ws.retire(c).unwrap());
        Ok(1)
    })
    .unwrap();
    done.sort();
    assert_eq!(done, [0, 1, 2]);
    assert_eq!((ws.in_flight(), ws.min_room()), (0, 8));
    assert_eq!(
        ws.retire(&Completion {
            qp_num: 1,
            ..Completion::EMPTY
        }),
        None
    );
}

/// A receive queue that counts its doorbells.
struct Counting<'q, R> {
    rq: &'q mut R,
    rings: u32,
}

impl<R: RecvQueue> RecvQueue for Counting<'_, R> {
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> std::result::Result<(), Rejected<RecvWr<'a>>> {
        self.rq.post_recv(wr)
    }
    fn ring(&mut self) {
        self.rings += 1;
        self.rq.ring()
    }
    fn free_slots(&self) -> u32 {
        self.rq.free_slots()
    }
}

#[test]
fn a_replenisher_keeps_receives_posted_with_one_doorbell_per_poll() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, mut ca), (mut b, mut cb)) = pair(&mut dev, &pd, 16);
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let at = buf.remote(0, 4096).unwrap().target(0, 8).unwrap();
    let mut rep = RecvReplenisher::new(4).for_qp(b.qpn());
    let mut rq = Counting {
        rq: b.rq(),
        rings: 0,
    };
    assert_eq!(
        (rep.fill(&mut rq).unwrap(), rep.posted(), rq.rings),
        (4, 4, 1)
    );
    assert_eq!(
        rep.fill(&mut rq).unwrap(),
        0,
        "nothing to post, no doorbell"
    );
    assert_eq!(rq.rings, 1);
    // 40 WRITE WITH IMMEDIATE through 4 receives: only re-posting lets them all land.
    let mut imms = Vec::new();
    let mut polls = 0;
    for round in 0..10u32 {
        for j in 0..4u32 {
            let wr = SendWr::write_imm_to(0, &[], at, round * 4 + j).inline(b"z");
            a.sq().post(wr.signaled_if(j == 3)).unwrap();
        }
        a.sq().ring();
        let mut left = 4;
        while left > 0 {
            let mut wc = [Completion::EMPTY; 8];
            let n = poll_wait(&mut dev, &mut cb, &mut wc, STALL).unwrap();
            polls += 1;
            for c in &wc[..n] {
                c.check().unwrap();
                assert!(rep.consumed(c));
                imms.push(c.imm);
            }
            left -= n;
            let mut rq = Counting {
                rq: b.rq(),
                rings: 0,
            };
            assert_eq!(rep.replenish(&mut rq).unwrap(), n as u32);
            assert_eq!(rq.rings, 1, "one doorbell per poll");
            assert_eq!(rep.posted(), 4);
        }
        let mut wc = [Completion::EMPTY];
        poll_wait(&mut dev, &mut ca, &mut wc, STALL).unwrap();
        wc[0].check().unwrap();
    }
    assert_eq!(imms, (0..40).collect::<Vec<_>>());
    assert!(polls >= 10);
    // Not its QP's, not a receive, or failed: not consumed.
    let recv = |qp_num, status| Completion {
        qp_num,
        status,
        opcode: WcOpcode::RecvRdmaWithImm,
        ..Completion::EMPTY
    };
    assert!(!rep.consumed(&recv(a.qpn(), WcStatus::Success)));
    assert!(!rep.consumed(&recv(b.qpn(), WcStatus::WrFlushErr)));
    assert!(!rep.consumed(&Completion {
        qp_num: b.qpn(),
        ..Completion::EMPTY
    }));
}

#[test]
fn a_replenisher_with_buffers_reposts_each_slot_into_its_own_bytes() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, _ca), (mut b, mut cb)) = pair(&mut dev, &pd, 8);
    let mut mine = dev
        .alloc_buf(&pd, 64, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let inbox = dev
        .alloc_buf(&pd, 3 * 32, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut rep = RecvReplenisher::with_buffers(3, inbox.sge(0, 16).unwrap(), 32);
    assert_eq!(
        rep.sge(2).map(|s| (s.addr, s.length)),
        Some((inbox.addr() + 64, 16))
    );
    rep.fill(b.rq()).unwrap();
    let mut slots = Vec::new();
    for m in 0..7u8 {
        mine.get_mut(0, 16).unwrap().fill(b'a' + m);
        let sge = [mine.sge(0, 16).unwrap()];
        a.sq().post(SendWr::send(m as u64, &sge)).unwrap();
        a.sq().ring();
        let mut wc = [Completion::EMPTY];
        poll_wait(&mut dev, &mut cb, &mut wc, STALL).unwrap();
        let c = wc[0];
        c.check().unwrap();
        let off = c.wr_id as usize * 32;
        assert_eq!(inbox.get(off, 16).unwrap(), [b'a' + m; 16]);
        slots.push(c.wr_id);
        rep.consumed(&c);
        rep.replenish(b.rq()).unwrap();
    }
    // Posted 0, 1, 2 in order; each re-post goes behind the others.
    assert_eq!(slots, [0, 1, 2, 0, 1, 2, 0]);
}

#[test]
fn a_ring_writer_never_overruns_the_reader() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, mut ca), (mut b, mut cb)) = pair(&mut dev, &pd, 16);
    const SLOT: u32 = 16;
    const SLOTS: u32 = 4;
    let mut src = dev
        .alloc_buf(&pd, 64, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    // The reader's ring; the writer's credit word (the reader WRITEs its count there: read
    // safely here only because the deterministic sim writes nothing between progress calls;
    // examples/fanout.rs acknowledges with SEND WITH IMMEDIATE instead).
    let ring = dev
        .alloc_buf(&pd, (SLOT * SLOTS) as usize, Access::ALL, Pages::Normal)
        .unwrap();
    let credit = dev.alloc_buf(&pd, 8, Access::ALL, Pages::Normal).unwrap();
    let credit_at = credit.remote(0, 8).unwrap().target(0, 8).unwrap();
    let mut w = RingWriter::new(
        ring.remote(0, ring.len()).unwrap().target(0, 64).unwrap(),
        SLOT,
    )
    .unwrap();
    let mut r = RingReader::new(SLOTS, SLOT, 2).unwrap();
    let mut rep = RecvReplenisher::new(SLOTS);
    rep.fill(b.rq()).unwrap();
    let mut read = Vec::new();
    let (mut blocked, mut max_ahead) = (0, 0);
    while read.len() < 30 {
        // Write while there is credit.
        while w.written() < 30 {
            let Some((seq, slot)) = w.claim() else {
                blocked += 1;
                break;
            };
            src.get_mut(0, 8)
                .unwrap()
                .copy_from_slice(&seq.to_le_bytes());
            let sge = [src.sge(0, 8).unwrap()];
            a.sq()
                .post(SendWr::write_imm_to(seq, &sge, slot, seq as u32).signaled())
                .unwrap();
            a.sq().ring();
            // The sim runs each message now, so the source bytes may change next round.
            dev.progress();
        }
        max_ahead = max_ahead.max(w.written() - w.acked());
        // Read what arrived, acknowledging every 2.
        let mut wc = [Completion::EMPTY; 8];
        dev.progress();
        let n = cb.poll(&mut wc);
        for c in &wc[..n] {
            c.check().unwrap();
            rep.consumed(c);
            assert_eq!(c.imm as u64, r.expected());
            let got = u64::from_le_bytes(ring.get(r.next_offset(), 8).unwrap().try_into().unwrap());
            read.push(got);
            if let Some(upto) = r.consume() {
                let bytes = upto.to_le_bytes();
                let wr = SendWr::write_to(100, &[], credit_at).inline(&bytes);
                b.sq().post(wr.signaled()).unwrap();
                b.sq().ring();
            }
        }
        rep.replenish(b.rq()).unwrap();
        dev.progress();
        // The writer takes the credit from its word; send completions are drained.
        let word = u64::from_le_bytes(credit.get(0, 8).unwrap().try_into().unwrap());
        w.ack(word);
        while ca.poll(&mut wc) > 0 {}
        while cb.poll(&mut wc) > 0 {}
    }
    assert_eq!(read, (0..30).collect::<Vec<_>>());
    // The writer used the whole ring and no more, and had to wait for credit.
    assert_eq!(max_ahead, SLOTS as u64);
    assert!(blocked > 0);
    assert_eq!((w.written(), w.acked()), (30, 30));
}

#[test]
fn wait_each_names_the_cq_still_owed_when_it_stalls() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, mut ca), (_b, mut cb)) = pair(&mut dev, &pd, 8);
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let at = buf.remote(0, 64).unwrap().target(0, 8).unwrap();
    a.sq()
        .post(SendWr::write_to(1, &[], at).inline(b"w").signaled())
        .unwrap();
    a.sq().ring();
    // One send completion owed by CQ 0 and it comes; CQ 1 owes two receives that never do.
    let mut missing = [1, 2];
    let mut seen = Vec::new();
    let e = wait_each(
        &mut dev,
        &mut [&mut ca, &mut cb],
        &mut missing,
        Duration::from_millis(50),
        |i, c| {
            seen.push((i, c.wr_id));
            Ok(1)
        },
    )
    .unwrap_err();
    assert_eq!(seen, [(0, 1)]);
    assert_eq!(missing, [0, 2]);
    let msg = e.to_string();
    assert!(
        msg.starts_with(
            "wait_each: no completion for 0.05 s while owed 2 by CQ 1 of 2 (a receive not posted?"
        ),
        "{msg}"
    );
    // An error from `each` ends the wait and is returned as is.
    a.sq()
        .post(SendWr::write_to(2, &[], at).inline(b"w").signaled())
        .unwrap();
    a.sq().ring();
    let e = wait_each(&mut dev, &mut [&mut ca], &mut [1], STALL, |_, c| {
        Err(Error::Completion {
            status: WcStatus::GeneralErr,
            vendor_err: 0,
            opcode: c.opcode,
            qp_num: c.qp_num,
            wr_id: c.wr_id,
        })
    })
    .unwrap_err();
    assert!(matches!(e, Error::Completion { wr_id: 2, .. }), "{e}");
    assert!(wait_each(&mut dev, &mut [&mut ca], &mut [1, 1], STALL, |_, _| Ok(1)).is_err());
}

#[test]
fn poll_any_takes_turns_over_the_cqs() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, ca), (mut b, cb)) = pair(&mut dev, &pd, 8);
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let at = buf.remote(0, 64).unwrap().target(0, 8).unwrap();
    for qp in [&mut a, &mut b] {
        for i in 0..2 {
            qp.sq()
                .post(SendWr::write_to(i, &[], at).inline(b"p").signaled())
                .unwrap();
        }
        qp.sq().ring();
    }
    dev.progress();
    let mut cqs = [ca, cb];
    let mut turn = 0;
    let mut wc = [Completion::EMPTY; 1];
    let mut order = Vec::new();
    while let Some((i, n)) = poll_any::<SimCq, _>(&mut cqs, &mut wc, &mut turn) {
        assert_eq!(n, 1);
        order.push(i);
    }
    // Starts after CQ 0, then alternates while both have completions.
    assert_eq!(order, [1, 0, 1, 0]);
    assert_eq!(poll_any::<SimCq, _>(&mut cqs, &mut wc, &mut turn), None);
}
