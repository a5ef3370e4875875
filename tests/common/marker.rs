//! The drain's flush marker (`SendQueue::post_flush_marker`) on any provider (the sim in
//! tests/recover_helper.rs, rxe in tests/rxe_recovery.rs): three unsignaled WRITE WITH
//! IMMEDIATE run (the peer's receives say so), the QP is moved to ERR, and then
//!
//! - [`marker_ends_what_ran_before_it`]: an ordinary post is refused (`BadState`, ERR), the
//!   marker is accepted (refused in RTS before), and the device completes it flushed, last,
//!   covering the sends before it that have no completion of their own;
//! - [`drain_of_a_qp_already_in_err`]: `RcLink::drain_polled` of that QP ends all three
//!   (the bug this fixes: it waited for them until its stall), and the link reconnects.
//!
//! `exact`: the requester saw every acknowledgement before the move to ERR (the sim: a
//! responder's receive and the requester's end are one step), so the three ran from its side
//! too and none is flushed on its own. On rxe an acknowledgement may still be on its way
//! when the QP moves to ERR: that send is flushed with a completion of its own, the marker
//! covers the rest; every send ends once either way.

use std::time::{Duration, Instant};

use rdma_direct::prelude::*;
use rdma_direct::providers::recover::MARKER_WR_ID;
use rdma_direct::providers::RemoteMr;

const RECV_BASE: u64 = 1 << 63;
const LIVENESS: Duration = Duration::from_secs(60);

/// Polls `cq` (with progress) until `n` completions came; liveness-bounded.
fn poll_until<P: Provider>(p: &mut P, cq: &mut P::Cq, n: usize, what: &str) -> Vec<Completion> {
    let mut got = Vec::new();
    let mut wc = [Completion::EMPTY; 8];
    let t0 = Instant::now();
    while got.len() < n {
        assert!(t0.elapsed() < LIVENESS, "{what}: {got:#?} of {n}");
        p.progress();
        let k = cq.poll(&mut wc);
        got.extend_from_slice(&wc[..k]);
        std::thread::yield_now();
    }
    got
}

/// Three unsignaled WRITE WITH IMMEDIATE from `a` to `b` (ids 0..3), waited for at `b`'s CQ.
fn three_unsignaled_that_ran<P: Provider>(
    p: &mut P,
    a: &mut P::Qp,
    b_cq: &mut P::Cq,
    dst: RemoteMr,
) -> Vec<Completion> {
    for id in 0..3u64 {
        a.sq()
            .post(SendWr::write_imm(id, &[], dst.addr, dst.rkey, id as u32))
            .unwrap();
    }
    a.sq().try_ring().unwrap();
    let got = poll_until(p, b_cq, 3, "the peer's receives of the three WRITEs");
    for (i, c) in got.iter().enumerate() {
        assert_eq!((c.status, c.imm), (WcStatus::Success, i as u32), "{c:?}");
    }
    got
}

pub fn marker_ends_what_ran_before_it<P: Provider>(p: &mut P, opts: &ConnectOpts, exact: bool) {
    let pd = p.alloc_pd().unwrap();
    let buf = p.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let (mut cq, mut pcq) = (p.create_cq(256).unwrap(), p.create_cq(256).unwrap());
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut pcq, None, None, &cfg).unwrap();
    connect_pair(p, &mut a, &mut b, opts).unwrap();
    let mut recvs = RecvReplenisher::new(3).with_id_base(RECV_BASE);
    recvs.fill(b.rq()).unwrap();
    // In RTS the marker is not the drain's to post: refused, nothing staged.
    assert_eq!(
        a.sq().post_flush_marker(MARKER_WR_ID),
        Err(PostError::BadState {
            state: QpState::Rts
        })
    );
    assert_eq!(a.sq().staged(), 0);
    three_unsignaled_that_ran(p, &mut a, &mut pcq, dst);
    p.to_error(&mut a).unwrap();
    // Ordinary sends stay refused in ERR, the request handed back.
    let r = a
        .sq()
        .post(SendWr::write(7, &[], dst.addr, dst.rkey).signaled());
    assert_eq!(
        r.map_err(|r| (r.wr.wr_id, r.error)),
        Err((
            7,
            PostError::BadState {
                state: QpState::Err
            }
        ))
    );
    a.sq().post_flush_marker(MARKER_WR_ID).unwrap();
    // Every completion of `a` until the marker's, which comes last.
    let mut seen = Vec::new();
    while seen
        .last()
        .is_none_or(|c: &Completion| c.wr_id != MARKER_WR_ID)
    {
        seen.extend(poll_until(p, &mut cq, 1, "the marker's flush"));
    }
    let m = seen.last().unwrap();
    assert_eq!(
        (m.status, m.qp_num, m.opcode.is_recv()),
        (WcStatus::WrFlushErr, a.qpn(), false),
        "{seen:#?}"
    );
    // The flushes before it are sends of ours, each ending itself; the marker covers the rest,
    // the oldest first.
    let own: Vec<u64> = seen[..seen.len() - 1].iter().map(|c| c.wr_id).collect();
    for c in &seen[..seen.len() - 1] {
        assert_eq!(
            (c.status, c.covered),
            (WcStatus::WrFlushErr, 0),
            "{seen:#?}"
        );
    }
    assert_eq!(own.len() as u32 + m.covered, 3, "{seen:#?}");
    if m.covered > 0 {
        assert_eq!(m.covered_from, u64::from(3 - m.covered), "{seen:#?}");
    }
    if exact {
        assert_eq!(
            (own.len(), m.covered, m.covered_from),
            (0, 3, 0),
            "{seen:#?}"
        );
    }
    drop((a, b));
}

pub fn drain_of_a_qp_already_in_err<P: Provider>(p: &mut P, opts: &ConnectOpts, exact: bool) {
    let pd = p.alloc_pd().unwrap();
    let buf = p.alloc_buf(&pd, 64, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 64).unwrap();
    let stall = Duration::from_secs(10);
    let mut a = RcLink::new(p, &pd, 8, 2, RECV_BASE, stall).unwrap();
    let mut b = RcLink::new(p, &pd, 8, 3, RECV_BASE, LIVENESS).unwrap();
    connect_pair(p, &mut a.qp, &mut b.qp, opts).unwrap();
    a.recvs.fill(a.qp.rq()).unwrap();
    b.recvs.fill(b.qp.rq()).unwrap();
    a.window.posted(3);
    for c in three_unsignaled_that_ran(p, &mut a.qp, &mut b.cq, dst) {
        assert!(b.take(&c), "{c:?}");
    }
    p.to_error(&mut a.qp).unwrap();
    let r = a
        .drain_polled(p, &[], |c| panic!("delivered {c:?}"))
        .unwrap();
    assert_eq!(
        (
            r.sends_outstanding,
            r.sends_completed + r.sends_failed,
            r.recvs_flushed,
            r.missing()
        ),
        (3, 3, 2, 0),
        "{r:?}"
    );
    if exact {
        assert_eq!((r.sends_completed, r.first_error), (3, None), "{r:?}");
    }
    assert_eq!(a.window.in_flight(), 0);
    // The link goes on: both QPs through RESET again, a signaled WRITE completes (what the
    // marker took from the queue and the CQ was given back).
    b.drain_polled(p, &[], |c| panic!("delivered {c:?}"))
        .unwrap();
    connect_pair(p, &mut a.qp, &mut b.qp, opts).unwrap();
    a.recvs.fill(a.qp.rq()).unwrap();
    a.qp.sq()
        .post_and_ring(SendWr::write(5, &[], dst.addr, dst.rkey).signaled())
        .unwrap();
    let c = poll_until(p, &mut a.cq, 1, "a WRITE after the reconnect");
    assert_eq!((c[0].wr_id, c[0].status), (5, WcStatus::Success), "{c:?}");
}
