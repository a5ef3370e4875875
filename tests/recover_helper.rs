//! The recovery helper (`providers::recover`) on the sim, with an independent ledger: an order
//! stream of RDMA WRITEs with selective signaling (one signaled in four) and receives kept
//! posted on the same CQ (tagged ids), a fault injected mid-stream (the responder QP moved to
//! ERR, or dropped and replaced as a restarted peer would be), `Recovery::recover`, the
//! failed orders sent again. The ledger is the post order of every request: each completion
//! must end exactly the `1 + covered` oldest posted requests, its own wr_id the last of them,
//! so every request ends exactly once (completed or failed); after a recovery none is left;
//! at the end every order completed exactly once. Manual progress and the device thread.
//! The drain and the probe (`drain.rs`), `RcLink` (`rc_link.rs`) and the flush marker
//! (`marker.rs`) are in `tests/recover_helper/`.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::SimPd;

mod common;

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

#[path = "recover_helper/drain.rs"]
mod drain;
#[path = "recover_helper/marker.rs"]
mod marker;
#[path = "recover_helper/rc_link.rs"]
mod rc_link;

/// The `delivered` of an `RcLink` drain that polls no successful completion.
fn nothing_delivered(c: &Completion) {
    panic!("the drain delivered {c:?}; no successful completion was due");
}
