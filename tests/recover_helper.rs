//! The recovery helper (`providers::recover`) on the sim, with an independent ledger: an order
//! stream of RDMA WRITEs with selective signaling (one signaled in four) and receives kept
//! posted on the same CQ (tagged ids), a fault injected mid-stream (the responder QP moved to
//! ERR, or dropped and replaced as a restarted peer would be), `Recovery::recover`, the
//! failed orders sent again. The ledger is the post order of every request: each completion
//! must end exactly the `1 + covered` oldest posted requests, its own wr_id the last of them,
//! so every request ends exactly once (completed or failed); after a recovery none is left;
//! at the end every order completed exactly once. Manual progress and the device thread.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::SimPd;

const ORDERS: u64 = 2_000;
const RECVS: u32 = 4;
const RECV_BASE: u64 = 1 << 63;
const LIVENESS: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    /// The responder QP is moved to ERR (and comes back through a reconnect).
    ResponderErr,
    /// The responder QP and its CQ are dropped; a new one takes their place.
    PeerRestart,
    /// The application gives the link up mid-stream (a deadline of its own passed) and
    /// recovers at once, its CQ unpolled: the drain then sees successful completions that
    /// cover unsignaled requests as well as flushes.
    Abandon,
}

struct Ledger {
    /// Send wr_ids in post order, not yet ended.
    posted: VecDeque<u64>,
    /// How many times each order completed successfully.
    completed: Vec<u32>,
    /// Orders to send (again): failed ones go back here.
    todo: VecDeque<u64>,
    /// Every failed send, in the order the ledger saw them.
    failed: Vec<u64>,
    recv_ends: u64,
}

impl Ledger {
    /// Ends the requests `c` reports; false for a failed send (the QP is in ERR).
    fn end(&mut self, c: &Completion) -> bool {
        if c.wr_id == rdma_direct::providers::recover::MARKER_WR_ID {
            // The helper's own request, posted after every one of ours: what has no
            // completion of its own by now executed without one.
            for id in self.posted.drain(..) {
                self.completed[id as usize] += 1;
            }
            return true;
        }
        if c.wr_id >= RECV_BASE {
            self.recv_ends += 1;
            return true;
        }
        let k = 1 + c.covered as usize;
        assert!(
            self.posted.len() >= k,
            "{c:?} ends {k} requests, {} outstanding",
            self.posted.len()
        );
        let ended: Vec<u64> = self.posted.drain(..k).collect();
        assert_eq!(
            *ended.last().unwrap(),
            c.wr_id,
            "{c:?} is not the next: {ended:?}"
        );
        if c.covered > 0 {
            assert_eq!(ended[0], c.covered_from, "{c:?}");
        }
        // The covered ones ran before this one (RC ends requests in order).
        for &id in &ended[..k - 1] {
            self.completed[id as usize] += 1;
        }
        if c.is_ok() {
            self.completed[c.wr_id as usize] += 1;
            true
        } else {
            self.failed.push(c.wr_id);
            self.todo.push_back(c.wr_id);
            false
        }
    }
}

fn pair(dev: &mut SimDevice, pd: &SimPd) -> ((SimQp, SimCq), (SimQp, SimCq)) {
    let mut ca = dev.create_cq(256).unwrap();
    let mut cb = dev.create_cq(256).unwrap();
    let c = QpConfig::new(QpType::Rc);
    let mut a = dev.create_qp(pd, &mut ca, None, None, &c).unwrap();
    let mut b = dev.create_qp(pd, &mut cb, None, None, &c).unwrap();
    connect_pair(dev, &mut a, &mut b, &ConnectOpts::default()).unwrap();
    ((a, ca), (b, cb))
}

fn stream(threaded: bool, fault: Fault, faults: u32) {
    let mut dev = SimDevice::new();
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let pd = dev.alloc_pd().unwrap();
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let dst = buf.remote(0, 4096).unwrap();
    let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd);
    let mut peer = Some((b, cb));
    a.sq().set_signal_every(4);
    let mut window = Recovery::send_window(&a);
    let mut recvs = RecvReplenisher::new(RECVS).with_id_base(RECV_BASE);
    recvs.fill(a.rq()).unwrap();
    let mut rec = Recovery::new(&window, LIVENESS);
    let mut l = Ledger {
        posted: VecDeque::new(),
        completed: vec![0; ORDERS as usize],
        todo: (0..ORDERS).collect(),
        failed: Vec::new(),
        recv_ends: 0,
    };
    let fault_at: Vec<u64> = (1..=u64::from(faults))
        .map(|i| i * ORDERS / (u64::from(faults) + 1))
        .collect();
    let mut sent = 0u64;
    // The receive completions counted when the current connection began.
    let mut recv_ends_at_fault = 0;
    let mut recoveries = 0;
    let mut wc = [Completion::EMPTY; 32];
    let deadline = Instant::now() + LIVENESS;
    while l.completed.contains(&0) {
        assert!(
            Instant::now() < deadline,
            "stalled: {} outstanding",
            l.posted.len()
        );
        // Post what the window allows.
        while window.room() > 0 {
            let Some(id) = l.todo.pop_front() else { break };
            let bytes = id.to_le_bytes();
            let mut wr = SendWr::write(id, &[], dst.addr, dst.rkey).inline(&bytes);
            if l.todo.is_empty() {
                // The stream's tail: nothing after it would retire it.
                wr = wr.signaled();
            }
            a.sq().post(wr).unwrap();
            window.posted(1);
            l.posted.push_back(id);
            sent += 1;
            if fault_at.get(recoveries) == Some(&sent) {
                break;
            }
        }
        a.sq().try_ring().unwrap();
        // The fault, once the stream is in flight.
        let mut fail = false;
        if fault_at.get(recoveries) == Some(&sent) {
            let (b, _) = peer.as_mut().unwrap();
            match fault {
                Fault::ResponderErr => dev.to_error(b).unwrap(),
                Fault::PeerRestart => peer = None,
                Fault::Abandon => {
                    // Some of the stream executes (and completes) before the give-up.
                    if !threaded {
                        dev.process();
                    }
                    fail = true;
                }
            }
            sent += 1; // once per fault
        }
        if !fail {
            dev.progress();
            let n = ca.poll(&mut wc);
            for c in &wc[..n] {
                window.retire(c);
                recvs.consumed(c);
                fail |= !l.end(c);
            }
        }
        if !fail {
            continue;
        }
        // Recover: the responder first (a new one after a restart), then this side.
        let (mut b, cb) = match peer.take() {
            Some(x) => x,
            None => {
                let mut cb = dev.create_cq(256).unwrap();
                let b = dev
                    .create_qp(&pd, &mut cb, None, None, &QpConfig::new(QpType::Rc))
                    .unwrap();
                (b, cb)
            }
        };
        if b.state() != QpState::Reset {
            dev.to_error(&mut b).unwrap();
        }
        let mut seen = Vec::new();
        let failed_before = l.failed.len();
        let recv_ends_before = recv_ends_at_fault;
        let report = rec
            .recover(
                &mut dev,
                &mut a,
                LinkQueues {
                    send_cq: &mut ca,
                    recv_cq: None,
                    window: &mut window,
                    recvs: Some(&mut recvs),
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
        for c in &seen {
            l.end(c);
        }
        assert!(l.posted.is_empty(), "left unended: {:?}", l.posted);
        // Every receive ended, here or in the loop's last poll.
        assert_eq!(l.recv_ends - recv_ends_before, u64::from(RECVS));
        assert!(report.recvs_flushed <= u64::from(RECVS));
        assert_eq!(report.sends_failed as usize, rec.failed().len());
        // The helper lists the failures among the completions it polled (those this loop
        // polled before calling it are its own), in order.
        assert_eq!(
            rec.failed(),
            &l.failed[failed_before..],
            "the failed list is what the ledger saw fail during the drain, in order"
        );
        assert!(l.failed.len() > failed_before || report.first_error.is_none());
        assert_eq!(
            (window.in_flight(), recvs.posted(), a.state()),
            (0, RECVS, QpState::Rts)
        );
        peer = Some((b, cb));
        recoveries += 1;
        recv_ends_at_fault = l.recv_ends;
    }
    assert_eq!(recoveries, faults as usize, "every fault was noticed");
    assert!(
        l.completed.iter().all(|&n| n == 1),
        "an order completed twice"
    );
    if fault != Fault::Abandon {
        assert!(!l.failed.is_empty(), "a fault failed no request");
    }
    // Every receive ended once per recovery (flushed); none is outstanding in the ledger.
    assert_eq!(l.recv_ends, u64::from(RECVS) * u64::from(faults));
}

#[test]
fn recover_after_the_responder_fails_mid_stream_manual_progress() {
    stream(false, Fault::ResponderErr, 3);
}

#[test]
fn recover_after_the_responder_fails_mid_stream_device_thread() {
    stream(true, Fault::ResponderErr, 2);
}

#[test]
fn recover_when_the_application_gives_up_mid_stream_manual_progress() {
    stream(false, Fault::Abandon, 3);
}

#[test]
fn recover_when_the_application_gives_up_mid_stream_device_thread() {
    stream(true, Fault::Abandon, 3);
}

#[test]
fn recover_after_a_peer_restart_manual_progress() {
    stream(false, Fault::PeerRestart, 3);
}

#[test]
fn recover_after_a_peer_restart_device_thread() {
    stream(true, Fault::PeerRestart, 1);
}

/// `drain` counts requests: three WRITEs, one signaled completion covering two, end with one
/// completion.
#[test]
fn drain_counts_requests_not_completions() {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let ((mut a, mut ca), _peer) = pair(&mut dev, &pd);
    a.sq().set_signal_every(3);
    for id in 0..3 {
        a.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"x"))
            .unwrap();
    }
    a.sq().ring();
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
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let ((mut a, mut ca), (mut b, _cb)) = pair(&mut dev, &pd);
    a.sq().set_signal_every(4);
    let mut window = SendWindow::new(&a);
    let depth = window.depth();
    for id in 0..u64::from(depth) {
        a.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"x"))
            .unwrap();
    }
    window.posted(depth);
    a.sq().ring();
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
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd);
    drop((b, cb));
    a.sq().set_signal_every(4);
    let mut window = Recovery::send_window(&a);
    for id in 0..10 {
        a.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"x"))
            .unwrap();
    }
    window.posted(10);
    a.sq().ring();
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
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let ((mut a, mut ca), _peer) = pair(&mut dev, &pd);
    let mut window = Recovery::send_window(&a);
    probe(&mut a, &mut window).unwrap();
    for id in 0..3 {
        a.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"x"))
            .unwrap();
    }
    window.posted(3);
    a.sq().ring();
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
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd);
    let mut recvs = RecvReplenisher::new(RECVS).with_id_base(RECV_BASE);
    recvs.fill(a.rq()).unwrap();
    drop((b, cb));
    a.sq().set_signal_every(4);
    let mut window = Recovery::send_window(&a);
    for id in 0..10 {
        a.sq()
            .post(SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"x"))
            .unwrap();
    }
    window.posted(10);
    a.sq().ring();
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

mod common;

/// The `delivered` of an `RcLink` drain that polls no successful completion.
fn nothing_delivered(c: &Completion) {
    panic!("the drain delivered {c:?}; no successful completion was due");
}

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
