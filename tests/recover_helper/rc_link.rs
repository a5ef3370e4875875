//! `RcLink`: booking completions and draining, recovering on the same QP after a responder
//! restart, and an asynchronous `QP_FATAL` event failing its link.

use super::{nothing_delivered, LIVENESS, RECV_BASE};
use rdma_direct::prelude::*;

/// `RcLink`: the common shape built by the library (a window one below the QP's depth, the
/// receives tagged), `take` books the application's successful completions (sends and
/// receives told apart by wr_id), `drain_polled` ends the rest after the peer is gone.
#[test]
fn an_rc_link_books_its_completions_and_drains() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let mut a = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, LIVENESS).unwrap();
    let mut b = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, LIVENESS).unwrap();
    assert_eq!(a.window.depth(), a.qp.caps().max_send_wr - 1);
    connect_pair(&mut dev, &mut a.qp, &mut b.qp, &ConnectOpts::default()).unwrap();
    a.recvs.fill(a.qp.rq()).unwrap();
    b.recvs.fill(b.qp.rq()).unwrap();
    // One WRITE WITH IMMEDIATE from a to b: a's send and b's receive complete.
    let wr = SendWr::write_imm(7, &[], dst.addr, dst.rkey, 7).signaled();
    a.qp.sq().post_and_ring(wr).map_err(|r| r.error).unwrap();
    a.window.posted(1);
    let mut wc = [Completion::EMPTY; 4];
    assert_eq!(
        poll_wait(&mut dev, &mut a.cq, &mut wc, LIVENESS).unwrap(),
        1
    );
    assert!(!a.take(&wc[0]));
    assert_eq!(
        poll_wait(&mut dev, &mut b.cq, &mut wc, LIVENESS).unwrap(),
        1
    );
    assert!(b.take(&wc[0]));
    assert_eq!((a.window.in_flight(), b.recvs.posted()), (0, 1));
    // The peer gone with three sends in flight: every request of a ends in the drain.
    drop(b);
    for id in 0..3 {
        a.qp.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey).signaled())
            .unwrap();
    }
    a.qp.sq().ring();
    a.window.posted(3);
    let r = a.drain_polled(&mut dev, &[], nothing_delivered).unwrap();
    assert_eq!(
        (
            r.sends_outstanding,
            r.recvs_outstanding,
            r.ended(),
            r.missing()
        ),
        (3, 2, 5, 0)
    );
    assert_eq!(a.rec.failed(), &[0, 1, 2]);
    assert_eq!(a.qp.state(), QpState::Err);
}

/// `RcLink::recover`, the same-QP way: the responder restarts (its link dropped with four
/// WRITE WITH IMMEDIATE in flight towards it, a new one comes up), the requester's link
/// drains (every one of the four listed failed, in order), its QP goes from ERR through
/// RESET to RTS towards the new responder keeping its QPN, its receives are posted again,
/// and the four sent again arrive at the new responder in order.
fn same_qp_after_a_responder_restart(threaded: bool) {
    let mut dev = SimDevice::new();
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let mut a = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, LIVENESS).unwrap();
    let mut b = RcLink::new(&mut dev, &pd, 1, 8, RECV_BASE, LIVENESS).unwrap();
    let o = ConnectOpts::default();
    connect_pair(&mut dev, &mut a.qp, &mut b.qp, &o).unwrap();
    a.recvs.fill(a.qp.rq()).unwrap();
    b.recvs.fill(b.qp.rq()).unwrap();
    let send = |a: &mut RcLink<SimDevice>, ids: std::ops::Range<u64>| {
        for id in ids {
            let wr = SendWr::write_imm(id, &[], dst.addr, dst.rkey, id as u32).signaled();
            a.qp.sq().post(wr).unwrap();
            a.window.posted(1);
        }
        a.qp.sq().try_ring().unwrap();
    };
    let imms = |dev: &mut SimDevice, b: &mut RcLink<SimDevice>, n: usize| {
        let mut got = Vec::new();
        let mut wc = [Completion::EMPTY; 8];
        while got.len() < n {
            let k = poll_wait(dev, &mut b.cq, &mut wc, LIVENESS).unwrap();
            for c in &wc[..k] {
                assert!(c.is_ok() && b.take(c), "{c:?}");
                got.push(c.imm);
            }
        }
        got
    };
    send(&mut a, 0..4);
    assert_eq!(imms(&mut dev, &mut b, 4), [0, 1, 2, 3]);
    let mut wc = [Completion::EMPTY; 8];
    let mut done = 0;
    while done < 4 {
        let k = poll_wait(&mut dev, &mut a.cq, &mut wc, LIVENESS).unwrap();
        for c in &wc[..k] {
            assert!(c.is_ok() && !a.take(c), "{c:?}");
        }
        done += k;
    }
    // The responder restarts: its QP gone with four requests towards it in flight.
    drop(b);
    let mut b = RcLink::new(&mut dev, &pd, 1, 8, RECV_BASE, LIVENESS).unwrap();
    send(&mut a, 4..8);
    let k = poll_wait(&mut dev, &mut a.cq, &mut wc[..1], LIVENESS).unwrap();
    assert_eq!(
        (k, wc[0].wr_id, wc[0].status),
        (1, 4, WcStatus::RetryExcErr)
    );
    let qpn = a.qp.qpn();
    let r = a
        .recover(&mut dev, &wc[..1], nothing_delivered, |p, qp| {
            let (ea, eb) = (p.endpoint(qp, &o)?, p.endpoint(&b.qp, &o)?);
            p.connect(qp, &ea, &eb, &o)?;
            p.connect(&mut b.qp, &eb, &ea, &o)
        })
        .unwrap();
    assert_eq!(a.rec.failed(), &[4, 5, 6, 7]);
    assert_eq!(r.first_error, Some((4, WcStatus::RetryExcErr)));
    assert_eq!(
        (r.sends_outstanding, r.sends_failed, r.missing()),
        (4, 4, 0)
    );
    assert_eq!(
        (
            a.qp.qpn(),
            a.qp.state(),
            a.window.in_flight(),
            a.recvs.posted()
        ),
        (qpn, QpState::Rts, 0, 2),
        "the same QP, connected again, its receives posted again"
    );
    b.recvs.fill(b.qp.rq()).unwrap();
    send(&mut a, 4..8);
    assert_eq!(imms(&mut dev, &mut b, 4), [4, 5, 6, 7]);
    done = 0;
    while done < 4 {
        let k = poll_wait(&mut dev, &mut a.cq, &mut wc, LIVENESS).unwrap();
        for c in &wc[..k] {
            assert!(c.is_ok() && !a.take(c), "{c:?}");
        }
        done += k;
    }
    assert_eq!(a.window.in_flight(), 0);
}

#[test]
fn an_rc_link_recovers_on_the_same_qp_after_a_responder_restart_manual_progress() {
    same_qp_after_a_responder_restart(false);
}

#[test]
fn an_rc_link_recovers_on_the_same_qp_after_a_responder_restart_device_thread() {
    same_qp_after_a_responder_restart(true);
}

/// An asynchronous event as a fault source: the device fails the requester's QP on its own
/// (`SimDevice::fail_qp`, `QP_FATAL`) with WRITEs in flight; `link_events` reads it, only the
/// link it names is failed by it, the recovery (nothing polled by the application) ends
/// every request, and the link goes on on the same QP. Port and device events fail every
/// link; `COMM_EST` and the others fail none.
#[test]
fn an_async_qp_fatal_event_fails_its_link_and_the_link_recovers() {
    use rdma_direct::providers::sim::AsyncEvent;
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let mut a = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, LIVENESS).unwrap();
    let mut b = RcLink::new(&mut dev, &pd, 1, 8, RECV_BASE, LIVENESS).unwrap();
    let o = ConnectOpts::default();
    connect_pair(&mut dev, &mut a.qp, &mut b.qp, &o).unwrap();
    a.recvs.fill(a.qp.rq()).unwrap();
    assert_eq!(link_events(&mut dev).unwrap(), []);
    for id in 0..3 {
        let wr = SendWr::write(id, &[], dst.addr, dst.rkey)
            .inline(b"x")
            .signaled();
        a.qp.sq().post(wr).unwrap();
        a.window.posted(1);
    }
    a.qp.sq().try_ring().unwrap();
    dev.fail_qp(a.qp.qpn());
    let ev = LinkEvent::QpFailed {
        qpn: a.qp.qpn(),
        what: "QP_FATAL",
    };
    assert_eq!(link_events(&mut dev).unwrap(), [ev], "one event");
    assert!(a.failed_by(&ev) && !b.failed_by(&ev));
    assert_eq!(link_events(&mut dev).unwrap(), [], "handed out once");
    let r = a
        .recover(&mut dev, &[], nothing_delivered, |p, qp| {
            connect_pair(p, qp, &mut b.qp, &o).map(drop)
        })
        .unwrap();
    assert_eq!((r.sends_outstanding, r.ended(), r.missing()), (3, 5, 0));
    assert_eq!(a.rec.failed(), &[0, 1, 2], "flushed before they ran");
    assert_eq!((a.qp.state(), a.recvs.posted()), (QpState::Rts, 2));
    let wr = SendWr::write(9, &[], dst.addr, dst.rkey)
        .inline(b"y")
        .signaled();
    a.qp.sq().post_and_ring(wr).map_err(|r| r.error).unwrap();
    let mut wc = [Completion::EMPTY; 1];
    assert_eq!(
        poll_wait(&mut dev, &mut a.cq, &mut wc, LIVENESS).unwrap(),
        1
    );
    assert_eq!((wc[0].wr_id, wc[0].status), (9, WcStatus::Success));
    // Device-wide events.
    for (e, fails) in [
        (AsyncEvent::PortErr { port: 1 }, true),
        (AsyncEvent::DeviceFatal, true),
        (AsyncEvent::PortActive { port: 1 }, false),
        (AsyncEvent::QpFatal { qpn: b.qp.qpn() }, false),
        (AsyncEvent::GidChange { port: 1 }, false),
    ] {
        dev.raise_event(e);
        let evs = link_events(&mut dev).unwrap();
        assert_eq!(evs.len(), 1, "{e:?}");
        assert_eq!(a.failed_by(&evs[0]), fails, "{e:?} as {:?}", evs[0]);
    }
    assert!(!LinkEvent::Established { qpn: a.qp.qpn() }.fails(a.qp.qpn(), QpState::Rts));
    assert!(
        LinkEvent::CqFailed.fails(1, QpState::Err) && !LinkEvent::CqFailed.fails(1, QpState::Rts)
    );
}
