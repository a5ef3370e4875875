//! Completions that end what ran before them: `covered` on error and flush completions, the
//! flush marker ending unsignaled sends that ran (a QP in RTS or already in ERR), and an
//! acknowledgement arriving mid-drain delivered once.

use super::{common, nothing_delivered, LIVENESS, RECV_BASE};
use rdma_direct::prelude::*;
use std::time::Duration;

/// `Completion::covered` on error and flush completions, and `SendWindow::retire` counting
/// them (tests/common/retire.rs), on the sim.
#[test]
fn error_and_flush_completions_retire_what_covered_says() {
    let mut dev = SimDevice::new();
    common::retire::error_completions_retire_what_covered_says(&mut dev, &ConnectOpts::default());
}

/// Three unsignaled WRITEs that ran (a fourth would be signaled), then a drain: of a QP
/// still in RTS (`already_err` false: the marker covers them) or of one the application
/// moved to ERR first (the soak's "exchange's QP moved to ERR"; a QP the device failed with
/// `QP_FATAL` is the same case). Either way the three ran, so they count as completed and
/// the two receives are flushed.
fn drain_after_unsignaled_sends_ran(already_err: bool) {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let stall = Duration::from_secs(2);
    let mut a = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, stall).unwrap();
    let mut b = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, LIVENESS).unwrap();
    connect_pair(&mut dev, &mut a.qp, &mut b.qp, &ConnectOpts::default()).unwrap();
    a.qp.sq().set_signal_every(4);
    a.recvs.fill(a.qp.rq()).unwrap();
    b.recvs.fill(b.qp.rq()).unwrap();
    for id in 0..3 {
        a.qp.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey))
            .unwrap();
    }
    a.qp.sq().ring();
    a.window.posted(3);
    for _ in 0..4 {
        dev.progress();
    }
    assert_eq!(dev.stats().wqes, 3, "the three WRITEs ran");
    let mut wc = [Completion::EMPTY; 4];
    assert_eq!(a.cq.poll(&mut wc), 0, "unsignaled: no completion");
    if already_err {
        dev.to_error(&mut a.qp).unwrap();
    }
    let r = a.drain_polled(&mut dev, &[], nothing_delivered).unwrap();
    assert_eq!(
        (
            r.sends_outstanding,
            r.sends_completed,
            r.recvs_flushed,
            r.missing()
        ),
        (3, 3, 2, 0)
    );
}

#[test]
fn a_drain_of_a_qp_in_rts_ends_the_unsignaled_sends_that_ran_by_its_marker() {
    drain_after_unsignaled_sends_ran(false);
}

/// The QP already in ERR when the drain starts: the unsignaled sends that ran get no
/// completion of their own and no flush (they ran); the drain posts its marker to the QP in
/// ERR (`SendQueue::post_flush_marker`), whose flush covers them. Before the flush marker
/// this waited for them until the stall: `recover_soak`'s device-thread flake ("N sends and
/// 0 receives still outstanding", N at most 3 with one send signaled in four).
#[test]
fn a_drain_of_a_qp_already_in_err_ends_the_unsignaled_sends_that_ran() {
    drain_after_unsignaled_sends_ran(true);
}

/// The flush marker itself and a drain of a QP already in ERR (tests/common/marker.rs), with
/// manual progress and with the device thread.
#[test]
fn the_flush_marker_ends_what_ran_before_it_manual_progress() {
    let mut dev = SimDevice::new();
    common::marker::marker_ends_what_ran_before_it(&mut dev, &ConnectOpts::default(), true);
    common::marker::drain_of_a_qp_already_in_err(&mut dev, &ConnectOpts::default(), true);
}

#[test]
fn the_flush_marker_ends_what_ran_before_it_device_thread() {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    common::marker::marker_ends_what_ran_before_it(&mut dev, &ConnectOpts::default(), true);
    common::marker::drain_of_a_qp_already_in_err(&mut dev, &ConnectOpts::default(), true);
}

/// An acknowledgement that arrived after the application's last poll (the peer's SEND WITH
/// IMMEDIATE ran, its receive completion waits in the CQ unpolled) when the link fails: the
/// drain hands it to `delivered` once, as the successful receive it is, and it never comes
/// again (the CQ after the reconnect holds only the next acknowledgement).
fn an_ack_arriving_mid_drain_is_delivered_once(threaded: bool) {
    let mut dev = SimDevice::new();
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let o = ConnectOpts::default();
    let mut a = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, LIVENESS).unwrap();
    let mut b = RcLink::new(&mut dev, &pd, 8, 2, RECV_BASE, LIVENESS).unwrap();
    connect_pair(&mut dev, &mut a.qp, &mut b.qp, &o).unwrap();
    a.recvs.fill(a.qp.rq()).unwrap();
    b.recvs.fill(b.qp.rq()).unwrap();
    // a's order (unsignaled, it ran) and b's acknowledgement of it, signaled: once b's send
    // completed, a's receive completion is in a's CQ (the sim writes both in one step).
    a.qp.sq()
        .post_and_ring(SendWr::write(42, &[], dst.addr, dst.rkey))
        .map_err(|r| r.error)
        .unwrap();
    a.window.posted(1);
    let ack = |b: &mut RcLink<SimDevice>, dev: &mut SimDevice, id: u64| {
        let wr = SendWr::send_imm(id, &[], id as u32).signaled();
        b.qp.sq().post_and_ring(wr).map_err(|r| r.error).unwrap();
        b.window.posted(1);
        let mut wc = [Completion::EMPTY; 1];
        assert_eq!(poll_wait(dev, &mut b.cq, &mut wc, LIVENESS).unwrap(), 1);
        assert!(wc[0].is_ok() && !b.take(&wc[0]), "{:?}", wc[0]);
    };
    ack(&mut b, &mut dev, 42);
    // The application gives the link up before polling again: the ack is in its CQ.
    let mut got = Vec::new();
    b.drain_polled(&mut dev, &[], nothing_delivered).unwrap();
    let r = a
        .recover(
            &mut dev,
            &[],
            |c| got.push(*c),
            |p, qp| connect_pair(p, qp, &mut b.qp, &o).map(drop),
        )
        .unwrap();
    assert_eq!(got.len(), 1, "{got:#?}");
    let c = got[0];
    assert!(
        c.is_ok() && c.opcode.is_recv() && a.recvs.owns(c.wr_id) && c.imm == 42,
        "{c:?}"
    );
    assert_eq!(c.qp_num, a.qp.qpn());
    // The order ran (the marker covers it), the ack completed, the other receive flushed.
    assert_eq!(
        (
            r.sends_outstanding,
            r.sends_completed,
            r.recvs_completed,
            r.recvs_flushed,
            r.missing()
        ),
        (1, 1, 1, 1, 0),
        "{r}"
    );
    // After the reconnect: the next acknowledgement, and that one only.
    b.recvs.fill(b.qp.rq()).unwrap();
    ack(&mut b, &mut dev, 43);
    let mut wc = [Completion::EMPTY; 4];
    assert_eq!(
        poll_wait(&mut dev, &mut a.cq, &mut wc, LIVENESS).unwrap(),
        1
    );
    assert!(
        wc[0].is_ok() && wc[0].imm == 43 && a.take(&wc[0]),
        "{:?}",
        wc[0]
    );
    for _ in 0..8 {
        dev.progress();
        assert_eq!(a.cq.poll(&mut wc), 0, "{:?}", wc[0]);
    }
}

#[test]
fn an_ack_arriving_mid_drain_is_delivered_once_manual_progress() {
    an_ack_arriving_mid_drain_is_delivered_once(false);
}

#[test]
fn an_ack_arriving_mid_drain_is_delivered_once_device_thread() {
    an_ack_arriving_mid_drain_is_delivered_once(true);
}
