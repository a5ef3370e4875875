//! The queue's limits and error state: `max_send_wr` caps outstanding requests, an error
//! completion refuses later posts until a reset, and the limits hold against a model over
//! random traffic.

use super::*;

/// A ring with more WQEBBs than `max_send_wr` (as libmlx5 sizes it for the largest WQE):
/// the cap is on outstanding requests, whatever their size, on every posting path.
#[test]
fn max_send_wr_caps_outstanding_requests_not_wqebbs() {
    let c = QpCaps {
        max_send_wr: 4,
        ..caps()
    };
    let mut r = rig_caps(QpType::Rc, 16, 64, 0, c);
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    let small = [7u8; 8];
    // Four one-WQEBB requests, through each path: `post` (fast), `post_write_inline`, and
    // `post_general`; the ring still has 12 free WQEBBs.
    r.qp.sq()
        .post(SendWr::write(1, &[], 0x2000, 5).inline(&small))
        .unwrap();
    r.qp.sq()
        .post_write_inline(2, 0x2000, 5, &small, true)
        .unwrap();
    r.qp.sq().post_general(&SendWr::send(3, &sge)).unwrap();
    r.qp.sq().post(SendWr::send(4, &sge)).unwrap();
    assert_eq!(r.qp.sq().pi(), 4);
    assert_eq!(r.qp.sq().free_slots(), 0);
    let before = r.dev.mem.read(0, 16 * 64);
    let e =
        r.qp.sq()
            .post(SendWr::write(5, &[], 0x2000, 5).inline(&small))
            .unwrap_err();
    assert_eq!(e.error, PostError::QueueFull { capacity: 4 });
    assert_eq!(e.wr.wr_id, 5);
    assert_eq!(
        r.qp.sq().post_write_inline(6, 0x2000, 5, &small, true),
        Err(PostError::QueueFull { capacity: 4 })
    );
    assert_eq!(
        r.qp.sq().post_general(&SendWr::send(7, &sge)),
        Err(PostError::QueueFull { capacity: 4 })
    );
    assert_eq!(r.qp.sq().pi(), 4, "a refused request takes no WQEBB");
    assert_eq!(r.dev.mem.read(0, 16 * 64), before, "nothing written");
    r.qp.sq().ring();
    // The device completes request 2 (WQEBB 1), covering request 1.
    r.dcq.push(&crate::plain::Cqe::req(QPN, 1, 0x08, 0));
    let mut out = [Completion::EMPTY; 2];
    assert_eq!(r.cq.poll(&mut out), 1);
    assert_eq!((out[0].wr_id, out[0].covered), (2, 1));
    assert_eq!(r.qp.sq().free_slots(), 2);
    r.qp.sq().post(SendWr::send(8, &sge)).unwrap();
    r.qp.sq().post(SendWr::send(9, &sge).signaled()).unwrap();
    assert_eq!(
        r.qp.sq().post(SendWr::send(10, &sge)).unwrap_err().error,
        PostError::QueueFull { capacity: 4 }
    );
    r.qp.sq().ring();
    // Retire everything (request 9 at WQEBB 5 covers 3, 4 and 8).
    r.dcq.push(&crate::plain::Cqe::req(QPN, 5, 0x0a, 0));
    assert_eq!(r.cq.poll(&mut out), 1);
    assert_eq!((out[0].wr_id, out[0].covered), (9, 3));
    // Two-WQEBB requests (60 bytes inline: ctrl + 4 + 60 bytes): four fit, the fifth does
    // not, with 8 of the 16 WQEBBs still free.
    let big = [9u8; 60];
    for id in 20..24 {
        r.qp.sq().post(SendWr::send(id, &[]).inline(&big)).unwrap();
    }
    assert_eq!(r.qp.sq().pi(), 6 + 8);
    assert_eq!(r.qp.sq().free_slots(), 0);
    assert_eq!(
        r.qp.sq()
            .post(SendWr::send(24, &[]).inline(&big))
            .unwrap_err()
            .error,
        PostError::QueueFull { capacity: 4 }
    );
    // Every request refused above got nothing; the CQ holds only what the SQ keeps.
    assert!(r.cq.reserved() >= 4);
}

/// An error CQE means the device moved the QP to ERR: from the poll that returns it on,
/// every posting path refuses with BadState(ERR) and writes nothing; RESET clears it.
#[test]
fn an_error_completion_makes_later_posts_bad_state_until_reset() {
    use crate::plain::Cqe;
    let mut r = rig();
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    r.qp.sq().post(SendWr::send(1, &sge).signaled()).unwrap();
    r.qp.sq().post(SendWr::send(2, &sge).signaled()).unwrap();
    r.qp.sq().ring();
    // Accepted until the error is polled: the poster cannot know before.
    assert_eq!(r.qp.state(), QpState::Rts);
    r.dcq.push(&Cqe::err(13, QPN, 0, 0x13, 0x88)); // REM_ACCESS
    r.dcq.push(&Cqe::err(13, QPN, 1, 0x05, 0xf9)); // WR_FLUSH
    let mut out = [Completion::EMPTY; 4];
    assert_eq!(r.cq.poll(&mut out), 2);
    assert_eq!(
        (out[0].wr_id, out[0].status, out[1].wr_id, out[1].status),
        (1, WcStatus::RemAccessErr, 2, WcStatus::WrFlushErr)
    );
    assert_eq!(r.qp.state(), QpState::Err);
    let bad = PostError::BadState {
        state: QpState::Err,
    };
    let before = r.dev.mem.read(0, 16 * 64);
    let pi = r.qp.sq().pi();
    let e =
        r.qp.sq()
            .post(SendWr::write(3, &[], 0x2000, 5).inline(&[1; 8]))
            .unwrap_err();
    assert_eq!((e.error, e.wr.wr_id), (bad, 3));
    assert_eq!(
        r.qp.sq().post(SendWr::send(4, &sge)).unwrap_err().error,
        bad
    );
    assert_eq!(
        r.qp.sq().post_write_inline(5, 0x2000, 5, &[1; 8], true),
        Err(bad)
    );
    assert_eq!(r.qp.sq().post_general(&SendWr::send(6, &sge)), Err(bad));
    // An invalid request on a failed QP: the state error wins.
    assert_eq!(
        r.qp.sq()
            .post(SendWr::send(7, &[]).inline(&[0; 201]))
            .unwrap_err()
            .error,
        bad
    );
    let e =
        r.qp.rq()
            .post_recv(RecvWr {
                wr_id: 8,
                sges: &sge,
            })
            .unwrap_err();
    assert_eq!((e.error, e.wr.wr_id), (bad, 8));
    r.qp.sq().ring();
    assert_eq!(r.qp.sq().pi(), pi);
    assert_eq!(r.dev.mem.read(0, 16 * 64), before, "nothing written");
    // Reconfiguring the fast path (which sets its gates) does not reopen it on a failed QP.
    r.qp.set_signal_every(0);
    assert_eq!(
        r.qp.sq().post_write_inline(11, 0x2000, 5, &[1; 8], true),
        Err(bad)
    );
    assert_eq!(r.qp.sq().pi(), pi);
    // Back through RESET: usable again, indices from zero.
    r.qp.set_state(QpState::Reset);
    assert_eq!(r.qp.state(), QpState::Reset);
    r.qp.set_state(QpState::Init);
    r.qp.set_state(QpState::Rtr);
    r.qp.set_state(QpState::Rts);
    assert_eq!(r.qp.state(), QpState::Rts);
    r.qp.sq().post(SendWr::send(9, &sge).signaled()).unwrap();
    r.qp.rq()
        .post_recv(RecvWr {
            wr_id: 10,
            sges: &sge,
        })
        .unwrap();
    assert_eq!(r.qp.sq().pi(), 1);
}

/// The send queue's limits against a model, over random traffic: requests of one to three
/// WQEBBs, random signaling, the device completing up to a random signaled request. At every
/// step a post is accepted exactly when the model says both limits allow it (free WQEBBs and
/// `max_send_wr` outstanding requests; the CQ is large enough never to bind), `free_slots`
/// equals the model's, and each completion retires exactly the requests the model expects.
#[test]
fn send_queue_limits_match_a_model_over_random_traffic() {
    use crate::plain::Cqe;
    const WQE_CNT: u32 = 32;
    const MAX_WR: u32 = 15;
    let c = QpCaps {
        max_send_wr: MAX_WR,
        ..caps()
    };
    let mut r = rig_caps(QpType::Rc, WQE_CNT, 1024, 256, c);
    let sges = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }; 4];
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    // Model: outstanding (wr_id, first WQEBB, WQEBBs, signaled), oldest first.
    let mut model: std::collections::VecDeque<(u64, u32, u32, bool)> = Default::default();
    let mut pi = 0u32;
    let mut ci = 0u32;
    // Refusals by the limit that bound: WQEBBs, or requests with WQEBBs to spare.
    let (mut accepted, mut by_bbs, mut by_wrs, mut retired) = (0u64, 0u64, 0u64, 0u64);
    let mut out = [Completion::EMPTY; 4];
    for step in 0..20_000u64 {
        if rng.below(4) != 0 {
            // Post one request of 1, 2 or 3 WQEBBs: an inline 8-byte WRITE (ctrl, raddr,
            // inline: 48 bytes), a WRITE with four SGEs (ctrl, raddr, 4 data: 96 bytes), an
            // inline 100-byte WRITE (ctrl, raddr, header + 100: 148 bytes). Signaled one in
            // four, and always when nothing outstanding is (else nothing could retire them).
            let signaled = rng.below(4) == 0 || (model.len() >= 6 && !model.iter().any(|m| m.3));
            let (mut wr, nbb) = match rng.below(3) {
                0 => (SendWr::write(step, &[], 0x2000, 5).inline(&[1; 8]), 1),
                1 => (SendWr::write(step, &sges, 0x2000, 5), 2),
                _ => (SendWr::write(step, &[], 0x2000, 5).inline(&[2; 100]), 3),
            };
            if signaled {
                wr = wr.signaled();
            }
            let bbs_fit = WQE_CNT - (pi - ci) >= nbb;
            let fits = bbs_fit && (model.len() as u32) < MAX_WR;
            match r.qp.sq().post(wr) {
                Ok(()) => {
                    assert!(fits, "step {step}: accepted beyond the limits");
                    model.push_back((step, pi, nbb, signaled));
                    pi += nbb;
                    accepted += 1;
                }
                Err(e) => {
                    assert!(!fits, "step {step}: refused within the limits: {}", e.error);
                    assert_eq!(e.error, PostError::QueueFull { capacity: MAX_WR });
                    if bbs_fit {
                        by_wrs += 1;
                    } else {
                        by_bbs += 1;
                    }
                }
            }
            assert_eq!(r.qp.sq().pi(), pi);
        } else {
            // The device completes up to a random signaled outstanding request.
            r.qp.sq().ring();
            let signaled: Vec<usize> = (0..model.len()).filter(|&i| model[i].3).collect();
            if signaled.is_empty() {
                continue;
            }
            let upto = signaled[rng.below(signaled.len() as u64) as usize];
            let (id, start, nbb, _) = model[upto];
            r.dcq.push(&Cqe::req(QPN, start as u16, 0x08, 0));
            assert_eq!(r.cq.poll(&mut out), 1, "step {step}");
            assert_eq!(
                (out[0].wr_id, out[0].covered),
                (id, upto as u32),
                "step {step}"
            );
            if upto > 0 {
                assert_eq!(out[0].covered_from, model[0].0);
            }
            model.drain(..=upto);
            ci = start + nbb;
            retired += upto as u64 + 1;
        }
        let model_free = (WQE_CNT - (pi - ci)).min(MAX_WR - model.len() as u32);
        assert_eq!(r.qp.sq().free_slots(), model_free, "step {step}");
    }
    println!("{accepted} accepted, {by_bbs} + {by_wrs} refused, {retired} retired");
    assert!(
        accepted > 5_000 && by_bbs > 100 && by_wrs > 100 && retired > 4_000,
        "{accepted} accepted, {by_bbs} + {by_wrs} refused, {retired} retired"
    );
}

/// The drain's flush marker (`SendQueue::post_flush_marker`): refused in RTS; in ERR, where
/// every ordinary post is refused, a signaled zero-length RDMA WRITE written at `pi` (ctrl
/// and raddr segments, byte for byte), the dbrec and the BlueFlame half, with one CQ entry
/// and no budget; the device's flush CQE for it covers the unsignaled WQEs before it; back
/// through RESET the queue and the CQ's reservation start clean.
#[test]
fn the_flush_marker_is_the_one_post_a_qp_in_err_takes() {
    use crate::plain::Cqe;
    let mut r = rig();
    for id in 0..3 {
        r.qp.sq()
            .post(SendWr::write(id, &[], 0x2000, 5).inline(&[1; 8]))
            .unwrap();
    }
    r.qp.sq().ring();
    assert_eq!(r.dev.dbrec(), [0, 3]);
    let before = r.dev.mem.read(0, 16 * 64);
    assert_eq!(
        r.qp.sq().post_flush_marker(99),
        Err(PostError::BadState {
            state: QpState::Rts
        })
    );
    r.qp.set_state(QpState::Err);
    let bad = PostError::BadState {
        state: QpState::Err,
    };
    let e = r.qp.sq().post(SendWr::write(4, &[], 0, 0).signaled());
    assert_eq!(e.unwrap_err().error, bad);
    assert_eq!(r.dev.mem.read(0, 16 * 64), before, "nothing written");
    let (reserved, held) = (r.cq.reserved(), r.qp.sq().cq_budget());
    assert!(held > 0);
    r.qp.sq().post_flush_marker(99).unwrap();
    // ctrl: wqe_idx 3, RDMA_WRITE, ds 2 (ctrl, raddr), CQ_UPDATE; raddr 0, rkey 0.
    let mut want = ctrl(3, 0x08, 2, 0x08, 0);
    want.extend(raddr(0, 0));
    want.extend_from_slice(&[0xa5; 32]);
    assert_eq!(r.dev.wqebb(3), want);
    assert_eq!(r.dev.dbrec(), [0, 4]);
    assert_eq!(r.qp.sq().staged(), 0);
    // The single WQE went as a BlueFlame copy to the half after the first doorbell's.
    assert_eq!(&r.dev.bf(1)[..32], &want[..32]);
    // Its CQ entry came from those the queue held: nothing more is reserved; the fast path
    // stays closed.
    assert_eq!(
        (r.cq.reserved(), r.qp.sq().cq_budget()),
        (reserved, held - 1)
    );
    assert_eq!(
        r.qp.sq().post_write_inline(6, 0x2000, 5, &[1; 8], true),
        Err(bad)
    );
    // The device flushes it: one CQE, covering the three unsignaled WRITEs.
    r.dcq.push(&Cqe::err(13, QPN, 3, 0x05, 0xf9));
    let mut out = [Completion::EMPTY; 4];
    assert_eq!(r.cq.poll(&mut out), 1);
    assert_eq!(
        (
            out[0].wr_id,
            out[0].status,
            out[0].covered,
            out[0].covered_from
        ),
        (99, WcStatus::WrFlushErr, 3, 0)
    );
    assert_eq!(r.qp.sq().free_slots(), 16);
    // Back through RESET to RTS: a signaled post completes as on a new queue.
    for s in [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts] {
        r.qp.set_state(s);
    }
    assert_eq!(r.cq.reserved(), 0);
    r.qp.sq()
        .post_and_ring(SendWr::write(5, &[], 0x2000, 5).signaled())
        .unwrap();
    assert_eq!(&r.dev.wqebb(0)[..16], &ctrl(0, 0x08, 2, 0x08, 0)[..]);
}
