//! CQEs that are not (or no longer) the QP's to complete: purged on reset and on a dropped QP
//! (its QPN may return), a CQE of the previous hot QP, one naming a WQE not outstanding, one
//! of the side that completes on another CQ, and a QP that outlives its CQ and SRQ.

use super::*;

#[test]
fn reset_purges_stale_cqes_and_starts_from_zero() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, dq) = qp_on(&mut cq, 0x66, None);
    let (mut other, _do) = qp_on(&mut cq, 0x67, None);
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    other.sq().post(SendWr::send(2, &SGE).signaled()).unwrap();
    other.sq().ring();
    d.push(&Cqe::req(0x66, 0, 0x0a, 0));
    d.push(&Cqe::req(0x67, 0, 0x0a, 0));
    qp.set_state(QpState::Reset);
    assert_eq!(dq.dbrec(), [0, 0]);
    assert_eq!(
        cq.reserved(),
        1 + 1 + other.sq().cq_budget(),
        "the other QP's WR (and its budget) is outstanding, and the reset QP's CQE still \
         occupies its slot until it is polled"
    );
    qp.set_state(QpState::Init);
    qp.set_state(QpState::Rtr);
    qp.set_state(QpState::Rts);
    qp.sq().post(SendWr::send(3, &SGE).signaled()).unwrap();
    qp.sq().ring();
    // The new WQE starts at index 0 again.
    assert_eq!(&dq.wqebb(0)[..4], &0x0au32.to_be_bytes());
    d.push(&Cqe::req(0x66, 0, 0x0a, 0));
    let c = poll_all(&mut cq);
    let ids: Vec<(u32, u64)> = c.iter().map(|c| (c.qp_num, c.wr_id)).collect();
    assert_eq!(
        ids,
        vec![(0x67, 2), (0x66, 3)],
        "the stale CQE of 0x66 is gone"
    );
    assert_eq!(cq.reserved(), qp.sq().cq_budget() + other.sq().cq_budget());
}

#[test]
fn dropped_qp_cqes_are_purged_and_its_qpn_can_return() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x70, None);
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x70, 0, 0x0a, 0));
    drop(qp);
    assert_eq!(cq.reserved(), 1, "the unpolled CQE still occupies its slot");
    // Same QPN again (the device reused it) before the stale CQE was polled.
    let (mut again, _da) = qp_on(&mut cq, 0x70, None);
    again.sq().post(SendWr::send(5, &SGE).signaled()).unwrap();
    again.sq().ring();
    d.push(&Cqe::req(0x70, 0, 0x0a, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![5]);
    assert_eq!(
        cq.reserved(),
        again.sq().cq_budget(),
        "the stale slot is free again"
    );
    // A CQE naming no known QP is dropped and counted.
    d.push(&Cqe::req(0x71, 0, 0x0a, 0));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 1);
}

/// The fast path remembers the last CQE word (opcode and qpn) it took; after another QP
/// became the hot one, a CQE of the first QP with that same word must still go to the first
/// QP, even when its `wqe_counter` equals the hot QP's oldest outstanding WQE.
#[test]
fn a_cqe_of_the_previous_hot_qp_completes_its_own_request() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut a, _da) = qp_on(&mut cq, 0x73, None);
    let (mut b, _db) = qp_on(&mut cq, 0x74, None);
    let post = |qp: &mut Mlx5Qp<Plain>, ids: &[u64]| {
        for &id in ids {
            qp.sq().post(SendWr::send(id, &SGE).signaled()).unwrap();
        }
        qp.sq().ring();
    };
    let ids = |c: Vec<Completion>| c.iter().map(|c| (c.qp_num, c.wr_id)).collect::<Vec<_>>();
    post(&mut a, &[0xa0, 0xa1]);
    // The first poll maps qp a; the second takes its CQE on the fast path.
    d.push(&Cqe::req(0x73, 0, 0x0a, 0));
    assert_eq!(ids(poll_all(&mut cq)), [(0x73, 0xa0)]);
    d.push(&Cqe::req(0x73, 1, 0x0a, 0));
    assert_eq!(ids(poll_all(&mut cq)), [(0x73, 0xa1)]);
    // qp b becomes the hot one (two completions, its oldest outstanding WQE then at
    // position 2); a's next request is at position 2 too.
    post(&mut b, &[0xb0, 0xb1, 0xb2]);
    d.push(&Cqe::req(0x74, 0, 0x0a, 0));
    d.push(&Cqe::req(0x74, 1, 0x0a, 0));
    assert_eq!(ids(poll_all(&mut cq)), [(0x74, 0xb0), (0x74, 0xb1)]);
    post(&mut a, &[0xa2]);
    d.push(&Cqe::req(0x73, 2, 0x0a, 0));
    assert_eq!(ids(poll_all(&mut cq)), [(0x73, 0xa2)]);
    d.push(&Cqe::req(0x74, 2, 0x0a, 0));
    assert_eq!(ids(poll_all(&mut cq)), [(0x74, 0xb2)]);
    assert_eq!(cq.bogus_cqes(), 0);
}

#[test]
fn a_cqe_naming_a_wqe_not_outstanding_is_dropped() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x72, None);
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x72, 5, 0x0a, 0));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 1);
    d.push(&Cqe::req(0x72, 0, 0x0a, 0));
    assert_eq!(poll_all(&mut cq)[0].wr_id, 1);
}

#[test]
fn a_qp_outliving_its_cq_and_srq_drops_cleanly() {
    // Dropping the CQ (and its device-side handle) first must not leave the QP's drop, which
    // scans the CQ memory for stale CQEs, reading freed memory: the CQ memory lives until the
    // last QP registered with it is gone.
    let (mut cq, d) = cq(16, 64);
    let ds = PlainSrq::new(9, 4, 48);
    // SAFETY: plain memory kept alive by the owner.
    let mut srq = unsafe { Mlx5Srq::<Plain>::from_dv(ds.dv, 1, ds.owner()) }.unwrap();
    let (mut qp, dq) = qp_on(&mut cq, 0xb0, Some(&mut srq));
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    let weak_cq = std::sync::Arc::downgrade(&d.mem);
    let weak_srq = std::sync::Arc::downgrade(&ds.mem);
    drop(d);
    drop(ds);
    drop(cq);
    drop(srq);
    assert!(
        weak_cq.upgrade().is_some(),
        "the QP keeps the CQ memory alive"
    );
    assert!(
        weak_srq.upgrade().is_some(),
        "the QP keeps the SRQ memory alive"
    );
    qp.set_state(QpState::Reset);
    drop(qp);
    drop(dq);
    assert!(weak_cq.upgrade().is_none(), "freed with the last user");
    assert!(weak_srq.upgrade().is_none(), "freed with the last user");
}

/// A QP whose sends complete into one CQ and receives into another: a CQE of the other side
/// written into either (only a lying device writes one) is dropped and counted, whatever way
/// the poll takes it (one slot, `poll_one`, a burst the runs take), and completes nothing;
/// the CQEs of the right sides complete as usual.
#[test]
fn a_cqe_of_the_side_that_completes_elsewhere_is_dropped() {
    use rdma_direct::wire::MLX5_CQE_RESP_SEND;
    let (mut scq, mut ds) = cq(32, 64);
    let (mut rcq, mut dr) = cq(32, 64);
    let (mut qp, _d) = plain::test_qp(&mut scq, Some(&mut rcq), 0x61, None);
    let mut spos = 0u16;
    let mut rpos = 0u16;
    for round in 0..3u64 {
        // Two sends and two receives outstanding; the device writes the right CQEs and, in
        // each CQ, CQEs of the other side naming the same positions.
        for k in 0..2u64 {
            qp.sq()
                .post(SendWr::send(100 * round + k, &SGE).signaled())
                .unwrap();
            qp.rq()
                .post_recv(RecvWr {
                    wr_id: 100 * round + 50 + k,
                    sges: &SGE,
                })
                .unwrap();
        }
        qp.sq().ring();
        qp.rq().ring();
        for k in 0..2u16 {
            ds.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x61, rpos + k, 8, 0));
            ds.push(&Cqe::req(0x61, spos + k, 0x0a, 0));
            dr.push(&Cqe::req(0x61, spos + k, 0x0a, 0));
            dr.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x61, rpos + k, 8, 0));
        }
        spos += 2;
        rpos += 2;
        let mut got_s = Vec::new();
        let mut got_r = Vec::new();
        match round {
            0 => {
                let mut one = Completion::EMPTY;
                while scq.poll_one(&mut one) {
                    got_s.push(one.wr_id);
                }
                while rcq.poll_one(&mut one) {
                    got_r.push(one.wr_id);
                }
            }
            1 => {
                let mut slot = [Completion::EMPTY];
                while scq.poll(&mut slot) == 1 {
                    got_s.push(slot[0].wr_id);
                }
                while rcq.poll(&mut slot) == 1 {
                    got_r.push(slot[0].wr_id);
                }
            }
            _ => {
                got_s.extend(poll_all(&mut scq).iter().map(|c| c.wr_id));
                got_r.extend(poll_all(&mut rcq).iter().map(|c| c.wr_id));
            }
        }
        let b = 100 * round;
        assert_eq!(got_s, [b, b + 1], "round {round}: sends");
        assert_eq!(got_r, [b + 50, b + 51], "round {round}: receives");
        assert_eq!(
            (scq.bogus_cqes(), rcq.bogus_cqes()),
            (2 * (round + 1), 2 * (round + 1)),
            "round {round}"
        );
    }
}
