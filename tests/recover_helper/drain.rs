//! The drain and the probe: `drain` counting requests (a full send queue too), a probe finding
//! a dead peer, `drain` alone, a probe flushed in a drain, and `drain_polled` booking what the
//! application polled.

use super::{pair, LIVENESS, RECVS, RECV_BASE};
use rdma_direct::prelude::*;
use std::time::{Duration, Instant};

/// A sim device, its PD, and a 64-byte window of its memory open to remote writes (with the
/// buffer behind it, kept for as long as the window is used).
fn device_with_window() -> (
    SimDevice,
    rdma_direct::providers::sim::SimPd,
    RegisteredBuf<<SimDevice as Provider>::Mr>,
    RemoteMr,
) {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    (dev, pd, buf, dst)
}

/// Post WRITEs `ids` (one inline byte each into `dst`) on `a` and ring once.
fn writes(a: &mut SimQp, dst: &RemoteMr, ids: std::ops::Range<u64>) {
    for id in ids {
        a.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"x"))
            .unwrap();
    }
    a.sq().ring();
}

/// `drain` counts requests: three WRITEs, one signaled completion covering two, end with one
/// completion.
#[test]
fn drain_counts_requests_not_completions() {
    let (mut dev, pd, _buf, dst) = device_with_window();
    let ((mut a, mut ca), _peer) = pair(&mut dev, &pd);
    a.sq().set_signal_every(3);
    writes(&mut a, &dst, 0..3);
    let mut got = Vec::new();
    drain(&mut dev, &mut ca, 3, Duration::from_secs(10), |c| {
        got.push(*c)
    })
    .unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(
        (got[0].wr_id, got[0].covered, got[0].covered_from),
        (2, 2, 0)
    );
}

/// A send queue full to the last slot: the marker cannot be posted, so the drain rests on
/// counting `1 + covered` per completion alone (32 signaled completions end 128 requests).
#[test]
fn recover_with_a_full_send_queue_counts_requests_by_covered() {
    let (mut dev, pd, _buf, dst) = device_with_window();
    let ((mut a, mut ca), (mut b, _cb)) = pair(&mut dev, &pd);
    a.sq().set_signal_every(4);
    let mut window = SendWindow::new(&a);
    let depth = window.depth();
    writes(&mut a, &dst, 0..u64::from(depth));
    window.posted(depth);
    dev.process();
    let mut rec = Recovery::new(&window, Duration::from_secs(5));
    let mut seen = Vec::new();
    let report = rec
        .recover(
            &mut dev,
            &mut a,
            LinkQueues {
                send_cq: &mut ca,
                recv_cq: None,
                window: &mut window,
                recvs: None,
            },
            |c| seen.push(*c),
            |p, a| {
                let o = ConnectOpts::default();
                let (ea, eb) = (p.endpoint(a, &o)?, p.endpoint(&b, &o)?);
                p.connect(a, &ea, &eb, &o)?;
                p.connect(&mut b, &eb, &ea, &o)
            },
        )
        .unwrap();
    assert_eq!(seen.len(), depth as usize / 4, "no marker: {seen:?}");
    assert!(seen.iter().all(|c| c.is_ok() && c.covered == 3));
    assert_eq!(report.sends_completed, u64::from(depth));
    assert_eq!((report.sends_failed, rec.failed().len()), (0, 0));
    assert_eq!(window.in_flight(), 0);
}

/// An idle link notices its dead peer only by a probe: on a live link the probe completes;
/// after the peer's drop it ends in RETRY_EXC_ERR (the defaults), and the recovery does not
/// list it as an application request.
fn probe_finds_a_dead_peer(threaded: bool) {
    let mut dev = SimDevice::new();
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let pd = dev.alloc_pd().unwrap();
    let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd);
    let mut window = Recovery::send_window(&a);
    let mut wc = [Completion::EMPTY];
    let mut one = |dev: &mut SimDevice, ca: &mut SimCq| {
        let t = Instant::now();
        while ca.poll(&mut wc) == 0 {
            assert!(t.elapsed() < LIVENESS, "the probe never ended");
            dev.progress();
        }
        wc[0]
    };
    probe(&mut a, &mut window).unwrap();
    let c = one(&mut dev, &mut ca);
    assert_eq!(
        (c.wr_id, c.status),
        (
            rdma_direct::providers::recover::PROBE_WR_ID,
            WcStatus::Success
        )
    );
    assert!(window.retire(&c));
    drop((b, cb));
    probe(&mut a, &mut window).unwrap();
    let c = one(&mut dev, &mut ca);
    assert_eq!(
        (c.wr_id, c.status),
        (
            rdma_direct::providers::recover::PROBE_WR_ID,
            WcStatus::RetryExcErr
        )
    );
    window.retire(&c);
    let mut cb = dev.create_cq(256).unwrap();
    let mut b = dev
        .create_qp(&pd, &mut cb, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let mut rec = Recovery::new(&window, LIVENESS);
    rec.recover(
        &mut dev,
        &mut a,
        LinkQueues {
            send_cq: &mut ca,
            recv_cq: None,
            window: &mut window,
            recvs: None,
        },
        |_| {},
        |p, a| {
            let o = ConnectOpts::default();
            let (ea, eb) = (p.endpoint(a, &o)?, p.endpoint(&b, &o)?);
            p.connect(a, &ea, &eb, &o)?;
            p.connect(&mut b, &eb, &ea, &o)
        },
    )
    .unwrap();
    assert!(rec.failed().is_empty());
    probe(&mut a, &mut window).unwrap();
    let c = one(&mut dev, &mut ca);
    assert_eq!(c.status, WcStatus::Success, "the new peer answers");
}

#[test]
fn a_probe_finds_a_dead_peer_manual_progress() {
    probe_finds_a_dead_peer(false);
}

#[test]
fn a_probe_finds_a_dead_peer_device_thread() {
    probe_finds_a_dead_peer(true);
}

/// `drain` alone: the link goes on with a new QP; the old one is left in ERR with nothing
/// outstanding, every request accounted (the flushed ones listed in post order).
#[test]
fn drain_alone_leaves_the_qp_in_err_with_everything_accounted() {
    let (mut dev, pd, _buf, dst) = device_with_window();
    let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd);
    drop((b, cb));
    a.sq().set_signal_every(4);
    let mut window = Recovery::send_window(&a);
    writes(&mut a, &dst, 0..10);
    window.posted(10);
    let mut rec = Recovery::new(&window, LIVENESS);
    let mut link = LinkQueues {
        send_cq: &mut ca,
        recv_cq: None,
        window: &mut window,
        recvs: None,
    };
    let report = rec.drain(&mut dev, &mut a, &mut link, |_| {}).unwrap();
    // Nothing ran before the move to ERR (manual progress): all ten flushed and listed.
    assert_eq!(rec.failed(), (0..10).collect::<Vec<_>>().as_slice());
    assert_eq!(report.first_error, Some((0, WcStatus::WrFlushErr)));
    assert_eq!((report.sends_failed, report.sends_completed), (10, 0));
    assert_eq!((window.in_flight(), a.state()), (0, QpState::Err));
}

/// A probe still outstanding when the application gives the link up (here with orders
/// posted after it) ends in the drain as a flush: counted in `probes_failed`, not listed in
/// `failed`, so the report's send counts add up to every send the drain ended.
#[test]
fn a_probe_flushed_in_a_drain_is_counted_but_not_listed() {
    let (mut dev, pd, _buf, dst) = device_with_window();
    let ((mut a, mut ca), _peer) = pair(&mut dev, &pd);
    let mut window = Recovery::send_window(&a);
    probe(&mut a, &mut window).unwrap();
    writes(&mut a, &dst, 0..3);
    window.posted(3);
    let mut rec = Recovery::new(&window, LIVENESS);
    let mut link = LinkQueues {
        send_cq: &mut ca,
        recv_cq: None,
        window: &mut window,
        recvs: None,
    };
    let r = rec.drain(&mut dev, &mut a, &mut link, |_| {}).unwrap();
    assert_eq!(
        r.first_error,
        Some((
            rdma_direct::providers::recover::PROBE_WR_ID,
            WcStatus::WrFlushErr
        ))
    );
    assert_eq!(
        (r.probes_failed, r.sends_failed, r.sends_completed),
        (1, 3, 0)
    );
    assert_eq!(rec.failed(), &[0, 1, 2]);
    assert_eq!(window.in_flight(), 0);
}

/// `drain_polled`: the application's poll saw the error (the peer gone) and more after it;
/// it hands those over unretired. The report counts them with the drain's own: ten sends
/// and four receives outstanding, the first send failed, the rest flushed, every one listed
/// in post order, none missing; the one-line form says so.
#[test]
fn drain_polled_books_what_the_application_polled() {
    let (mut dev, pd, _buf, dst) = device_with_window();
    let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd);
    let mut recvs = RecvReplenisher::new(RECVS).with_id_base(RECV_BASE);
    recvs.fill(a.rq()).unwrap();
    drop((b, cb));
    a.sq().set_signal_every(4);
    let mut window = Recovery::send_window(&a);
    writes(&mut a, &dst, 0..10);
    window.posted(10);
    // The application's poll: the error and the flush after it, left unretired.
    let mut wc = [Completion::EMPTY; 2];
    let t = Instant::now();
    let mut n = 0;
    while n < 2 {
        assert!(t.elapsed() < LIVENESS, "no error completion");
        dev.progress();
        n += ca.poll(&mut wc[n..]);
    }
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[1].status),
        (0, WcStatus::RetryExcErr, WcStatus::WrFlushErr)
    );
    let mut rec = Recovery::new(&window, LIVENESS);
    let mut link = LinkQueues {
        send_cq: &mut ca,
        recv_cq: None,
        window: &mut window,
        recvs: Some(&mut recvs),
    };
    let mut seen = 0;
    let r = rec
        .drain_polled(&mut dev, &mut a, &mut link, &wc, |_| seen += 1)
        .unwrap();
    assert_eq!(rec.failed(), (0..10).collect::<Vec<_>>().as_slice());
    assert_eq!(r.first_error, Some((0, WcStatus::RetryExcErr)));
    assert_eq!(
        (r.sends_outstanding, r.recvs_outstanding, r.sends_failed),
        (10, u64::from(RECVS), 10)
    );
    assert_eq!((r.recvs_flushed, r.ended(), r.missing()), (4, 14, 0));
    assert!(
        seen >= 12,
        "the drain's own completions go to `each`: {seen}"
    );
    let line = r.to_string();
    assert!(
        line.starts_with(
            "outstanding=14 sends=10 receives=4 first_error=1 flushed=13 other=0 missing=0 in "
        ),
        "{line}"
    );
    assert_eq!((window.in_flight(), recvs.posted()), (0, 0));
}
