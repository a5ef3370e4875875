//! The silent traps, each built as it used to happen, on the software device:
//!
//! - a send queue deeper than its CQ used to be accepted, and a run of unsignaled requests
//!   then wedged it with `CqFull` that polling could not free: now refused at creation,
//!   naming both numbers (and a CQ shared by several QPs must absorb their sum);
//! - the default `rnr_retry` used to be 7 (forever): a SEND with no receive posted waited
//!   without a word; now the default is finite and the request ends in `RNR_RETRY_EXC_ERR`;
//! - dropping the `SimDevice` before its QPs used to stop the engine and stall them; now the
//!   engine runs on until the last object is dropped.
//!
//! No test here measures time; the loops that wait for a completion have a generous deadline
//! only so that a regression fails instead of hanging.

mod common;

use std::time::{Duration, Instant};

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::{SimCq, SimPd, SimQp};

fn caps(send: u32, recv: u32) -> QpCaps {
    QpCaps {
        max_send_wr: send,
        max_recv_wr: recv,
        ..QpCaps::default()
    }
}

fn cfg(send: u32, recv: u32) -> QpConfig {
    QpConfig {
        caps: caps(send, recv),
        ..QpConfig::new(QpType::Rc)
    }
}

/// Two connected RC QPs, each on its own CQ of `cqe` entries, with the given queue depths.
fn pair(
    dev: &mut SimDevice,
    pd: &SimPd,
    cqe: u32,
    c: &QpConfig,
) -> ((SimQp, SimCq), (SimQp, SimCq)) {
    common::sim_pair(dev, pd, cqe, c, &ConnectOpts::default())
}

/// Poll `cq` until `n` completions arrived, running the device in between when there is one.
fn wait(dev: Option<&SimDevice>, cq: &mut SimCq, n: usize) -> Vec<Completion> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    let mut wc = [Completion::EMPTY; 16];
    while got.len() < n {
        if let Some(d) = dev {
            d.run_until_idle();
        }
        let k = cq.poll(&mut wc);
        got.extend_from_slice(&wc[..k]);
        assert!(
            Instant::now() < deadline,
            "stalled: {} of {n} completions",
            got.len()
        );
        if k == 0 {
            std::thread::yield_now();
        }
    }
    got
}

#[test]
fn an_sq_deeper_than_its_cq_is_refused_at_creation_with_both_numbers() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut cq = dev.create_cq(16).unwrap();
    let mut rcq = dev.create_cq(4).unwrap();
    // The old trap: 128 send WRs on a 16-entry CQ was accepted here.
    let e = dev
        .create_qp(&pd, &mut cq, Some(&mut rcq), None, &cfg(128, 1))
        .expect_err("an SQ of 128 on a CQ of 16");
    assert_eq!(e.errno(), Some(libc::EINVAL));
    assert_eq!(
        e.to_string(),
        "create_qp: EINVAL (Invalid argument) — the send CQ has 16 entries but would have to \
         absorb 128: this QP's max_send_wr 128 (128), and no other QP is on it. Every \
         request, signaled or not, may complete on the CQ, so a smaller CQ could fill with \
         unsignaled requests that polling cannot free. Create the CQ with at least 128 \
         entries (create_cq) or lower max_send_wr"
    );
    // The receive queue counts too when it completes on the same CQ.
    let e = dev
        .create_qp(&pd, &mut cq, None, None, &cfg(8, 9))
        .expect_err("8 + 9 on 16");
    assert!(
        e.to_string()
            .contains("the CQ has 16 entries but would have to absorb 17: this QP's max_send_wr 8 + max_recv_wr 9 (17)"),
        "{e}"
    );
    // With separate CQs each absorbs its own queue.
    let e = dev
        .create_qp(&pd, &mut cq, Some(&mut rcq), None, &cfg(16, 5))
        .expect_err("5 receives on a CQ of 4");
    assert!(
        e.to_string().contains(
            "the receive CQ has 4 entries but would have to absorb 5: this QP's max_recv_wr 5 (5)"
        ),
        "{e}"
    );
    // A refusal leaves nothing committed: exactly the CQ's depth fits.
    let q = dev
        .create_qp(&pd, &mut cq, Some(&mut rcq), None, &cfg(16, 4))
        .unwrap();
    assert_eq!(q.caps().max_send_wr, 16);
}

#[test]
fn a_shared_cq_must_absorb_the_sum_and_a_dropped_qp_gives_its_share_back() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    // 64: a power of two, so the depth the sim grants is the depth asked for.
    let mut cq = dev.create_cq(64).unwrap();
    let a = dev
        .create_qp(&pd, &mut cq, None, None, &cfg(16, 8))
        .unwrap();
    let b = dev
        .create_qp(&pd, &mut cq, None, None, &cfg(16, 8))
        .unwrap();
    let e = dev
        .create_qp(&pd, &mut cq, None, None, &cfg(16, 1))
        .expect_err("2 x (16 + 8) + 17 on 64");
    assert!(
        e.to_string().contains(
            "the CQ has 64 entries but would have to absorb 65: this QP's max_send_wr 16 \
             + max_recv_wr 1 (17), and 2 other QPs on it hold 48."
        ),
        "{e}"
    );
    drop(a);
    let _c = dev
        .create_qp(&pd, &mut cq, None, None, &cfg(16, 1))
        .unwrap();
    drop(b);
}

/// The wedge itself: an unsignaled run as long as the send queue. On the old rule the CQ of
/// 16 took 16 unsignaled WRITEs, then refused every post with `CqFull` while polling freed
/// nothing. Now the CQ must absorb the queue, the run never meets `CqFull`, the request
/// after it gets `QueueFull` (the verbs rule: signal one request per `max_send_wr`), and a
/// signaled request at the end retires the whole run.
#[test]
fn an_unsignaled_run_as_long_as_the_sq_never_wedges_on_the_cq() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let c = cfg(128, 1);
    let mut small = dev.create_cq(16).unwrap();
    assert!(dev.create_qp(&pd, &mut small, None, None, &c).is_err());
    let ((mut a, mut ca), _b) = pair(&mut dev, &pd, 129, &c);
    let mut buf = dev
        .alloc_buf(&pd, 8192, Access::ALL, Pages::Normal)
        .unwrap();
    let (sge, r) = (buf.sge(0, 8).unwrap(), buf.remote(4096, 8).unwrap());
    let sges = [sge];
    for i in 0..127u64 {
        a.sq()
            .post(SendWr::write(i, &sges, r.addr, r.rkey))
            .unwrap_or_else(|e| panic!("unsignaled WRITE {i}: {e}"));
    }
    a.sq()
        .post(SendWr::write(127, &sges, r.addr, r.rkey).signaled())
        .unwrap();
    let e = a
        .sq()
        .post(SendWr::write(128, &sges, r.addr, r.rkey).signaled())
        .unwrap_err();
    assert_eq!(e.error, PostError::QueueFull { capacity: 128 });
    assert!(
        e.error
            .to_string()
            .contains("signal at least one in every 128"),
        "{}",
        e.error
    );
    a.sq().ring();
    let got = wait(Some(&dev), &mut ca, 1);
    assert_eq!(
        (
            got[0].status,
            got[0].wr_id,
            got[0].covered,
            got[0].covered_from
        ),
        (WcStatus::Success, 127, 127, 0)
    );
    assert_eq!(ca.reserved(), 0);
    // The queue is free again.
    a.sq()
        .post(SendWr::write(200, &sges, r.addr, r.rkey).signaled())
        .unwrap();
    a.sq().ring();
    assert_eq!(wait(Some(&dev), &mut ca, 1)[0].wr_id, 200);
    buf.as_mut_slice()[0] = 1;
}

#[test]
fn a_send_with_no_receive_posted_ends_in_rnr_retry_exceeded_by_default() {
    let defaults = ConnectOpts::default();
    assert_eq!((defaults.rnr_retry, defaults.min_rnr_timer), (6, 12));
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, mut ca), (b, _cb)) = pair(&mut dev, &pd, 32, &cfg(8, 8));
    a.sq()
        .post(SendWr::send(1, &[]).inline(b"order").signaled())
        .unwrap();
    a.sq().ring();
    // Deterministic mode: each engine pass is one RNR timer; the default's six retries are
    // used up within the passes `run_until_idle` makes, where 7 would retry forever.
    let got = wait(Some(&dev), &mut ca, 1);
    assert_eq!((got[0].wr_id, got[0].status), (1, WcStatus::RnrRetryExcErr));
    assert!(got[0].status.hint().contains("no receive posted"));
    assert_eq!(a.state(), QpState::Err);
    // The responder saw nothing and is still usable.
    assert_eq!(b.state(), QpState::Rts);
}

#[test]
fn rnr_retry_7_still_waits_for_the_receive_when_asked_for() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let c = cfg(8, 8);
    let (mut ca, mut cb) = (dev.create_cq(32).unwrap(), dev.create_cq(32).unwrap());
    let mut a = dev.create_qp(&pd, &mut ca, None, None, &c).unwrap();
    let mut b = dev.create_qp(&pd, &mut cb, None, None, &c).unwrap();
    let opts = ConnectOpts {
        rnr_retry: 7,
        ..ConnectOpts::default()
    };
    let (ea, eb) = (
        dev.endpoint(&a, &opts).unwrap(),
        dev.endpoint(&b, &opts).unwrap(),
    );
    dev.connect(&mut a, &ea, &eb, &opts).unwrap();
    dev.connect(&mut b, &eb, &ea, &opts).unwrap();
    a.sq()
        .post(SendWr::send(1, &[]).inline(b"order").signaled())
        .unwrap();
    a.sq().ring();
    for _ in 0..1000 {
        dev.process();
    }
    let mut wc = [Completion::EMPTY; 4];
    assert_eq!(ca.poll(&mut wc), 0, "still retrying");
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let sges = [buf.sge(0, 64).unwrap()];
    b.rq().post_recv(RecvWr::new(9, &sges)).unwrap();
    b.rq().ring();
    assert_eq!(wait(Some(&dev), &mut ca, 1)[0].status, WcStatus::Success);
    assert_eq!(wait(Some(&dev), &mut cb, 1)[0].wr_id, 9);
}

/// Drop the device first, in deterministic mode and with the device thread: the QPs go on
/// working (the engine runs until the last object is dropped), never a stall.
#[test]
fn dropping_the_device_first_leaves_its_qps_working() {
    for threaded in [false, true] {
        let mut dev = SimDevice::new();
        if threaded {
            dev.start_device_thread().unwrap();
        }
        let pd = dev.alloc_pd().unwrap();
        let ((mut a, mut ca), (mut b, mut cb)) = pair(&mut dev, &pd, 32, &cfg(8, 8));
        let mut src = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
        let dst = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
        src.as_mut_slice()[..5].copy_from_slice(b"fills");
        let rsges = [dst.sge(0, 64).unwrap()];
        b.rq().post_recv(RecvWr::new(7, &rsges)).unwrap();
        b.rq().ring();
        // Posted before the drop, rung after it.
        let sges = [src.sge(0, 5).unwrap()];
        a.sq().post(SendWr::send(1, &sges).signaled()).unwrap();
        drop(dev);
        a.sq().ring();
        let got = wait(None, &mut ca, 1);
        assert_eq!((got[0].wr_id, got[0].status), (1, WcStatus::Success));
        let got = wait(None, &mut cb, 1);
        assert_eq!((got[0].wr_id, got[0].byte_len), (7, 5));
        assert_eq!(&dst.as_slice()[..5], b"fills");
        // Posted after the drop.
        b.rq().post_recv(RecvWr::new(8, &rsges)).unwrap();
        b.rq().ring();
        a.sq().post(SendWr::send(2, &sges).signaled()).unwrap();
        a.sq().ring();
        assert_eq!(wait(None, &mut ca, 1)[0].wr_id, 2);
        assert_eq!(wait(None, &mut cb, 1)[0].wr_id, 8);
        // Everything dropped: the engine's thread ends by itself.
        drop((a, b, ca, cb, src, dst, pd));
    }
}

/// A send queue never holds more CQ entries than its `max_send_wr`, even when its ring is
/// larger (the sim rounds rings up to powers of two and whole WQEBBs), so an idle QP cannot
/// sit on entries another QP of the same exactly-sized CQ needs.
#[test]
fn an_idle_qp_holds_no_more_of_a_shared_cq_than_its_queue_depth() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    // 64 entries = (5 + 1) + (57 + 1): exactly what the two QPs may hold.
    let mut cq = dev.create_cq(64).unwrap();
    let mut peer_cq = dev.create_cq(256).unwrap();
    let mut a = dev.create_qp(&pd, &mut cq, None, None, &cfg(5, 1)).unwrap();
    let mut b = dev
        .create_qp(&pd, &mut cq, None, None, &cfg(57, 1))
        .unwrap();
    let mut pa = dev
        .create_qp(&pd, &mut peer_cq, None, None, &cfg(8, 8))
        .unwrap();
    let mut pb = dev
        .create_qp(&pd, &mut peer_cq, None, None, &cfg(8, 8))
        .unwrap();
    let opts = ConnectOpts::default();
    for (x, y) in [(&mut a, &mut pa), (&mut b, &mut pb)] {
        let (ex, ey) = (
            dev.endpoint(x, &opts).unwrap(),
            dev.endpoint(y, &opts).unwrap(),
        );
        dev.connect(x, &ex, &ey, &opts).unwrap();
        dev.connect(y, &ey, &ex, &opts).unwrap();
    }
    let buf = dev
        .alloc_buf(&pd, 8192, Access::ALL, Pages::Normal)
        .unwrap();
    let (sges, r) = ([buf.sge(0, 8).unwrap()], buf.remote(4096, 8).unwrap());
    // A posts once and goes idle, holding its posting budget.
    a.sq()
        .post(SendWr::write(1, &sges, r.addr, r.rkey))
        .unwrap();
    // B's whole queue still fits.
    for i in 0..56u64 {
        b.sq()
            .post(SendWr::write(i, &sges, r.addr, r.rkey))
            .unwrap_or_else(|e| panic!("B's WRITE {i}: {e}"));
    }
    b.sq()
        .post(SendWr::write(56, &sges, r.addr, r.rkey).signaled())
        .unwrap();
    b.sq().ring();
    let got = wait(Some(&dev), &mut cq, 1);
    assert_eq!((got[0].wr_id, got[0].covered), (56, 56));
    // A's one request and its budget: within its depth of 5.
    assert!(a.sq().cq_budget() < 5, "budget {}", a.sq().cq_budget());
}
