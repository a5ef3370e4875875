//! mlx5 CQ, RQ and SRQ on plain memory, the test writing CQEs as the device would: owner-bit
//! wrap, selective signaling (`covered`), error syndromes, flushes, receive and SRQ wr_id
//! mapping, purging the CQEs of reset or dropped QPs, scatter-to-CQE, 128-byte CQEs.

use rdma_direct_rig as plain;

use plain::{poll_all, qp_on, test_cq as cq, TEST_SGE as SGE};
use plain::{Cqe, Plain, PlainCq, PlainQp, PlainSrq};
use rdma_direct::providers::mlx5::{Mlx5Cq, Mlx5Qp, Mlx5Srq};
use rdma_direct::providers::{
    Completion, CompletionQueue, PostError, QpCaps, QpConfig, QpState, QpType, QueuePair,
    RecvQueue, RecvWr, SendQueue, SendWr, Sge, WcFlags, WcOpcode, WcStatus,
};

fn caps() -> QpCaps {
    plain::test_caps()
}

#[test]
fn selective_signaling_reports_covered_requests() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x11, None);
    for i in 0..5u64 {
        let wr = SendWr::send(100 + i, &SGE);
        let wr = if i == 2 || i == 4 { wr.signaled() } else { wr };
        qp.sq().post(wr).unwrap();
    }
    qp.sq().ring();
    d.push(&Cqe::req(0x11, 2, 0x0a, 0));
    d.push(&Cqe::req(0x11, 4, 0x0a, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].wr_id, c[0].covered, c[0].covered_from), (102, 2, 100));
    assert_eq!((c[1].wr_id, c[1].covered, c[1].covered_from), (104, 1, 103));
    assert!(c
        .iter()
        .all(|c| c.is_ok() && c.opcode == WcOpcode::Send && c.qp_num == 0x11));
    // dbrec[0] = ci after the batch.
    assert_eq!(d.dbrec_ci(), 2);
    // Only the posting budget the SQ took from the CQ stays reserved.
    assert_eq!(cq.reserved(), qp.sq().cq_budget());
    assert_eq!(qp.sq().free_slots(), 16);
}

/// A covered send CQE amid receive CQEs in one poll: the two-sided run at the poll's start
/// stops at it and the general loop's fast path takes it; every completion exact, every CQ
/// entry and send slot given back.
#[test]
fn a_covered_send_amid_receives_in_one_poll() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x12, None);
    let recv = |qp: &mut Mlx5Qp<Plain>, id: u64| {
        qp.rq()
            .post_recv(RecvWr {
                wr_id: id,
                sges: &SGE,
            })
            .unwrap()
    };
    // A first round makes the QP the CQ's hot one.
    recv(&mut qp, 10);
    qp.rq().ring();
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x12, 0, 0x0a, 0));
    d.push(&Cqe::resp(2, 0x12, 0, 8, 0));
    assert_eq!(poll_all(&mut cq).len(), 2);
    for id in 11..14 {
        recv(&mut qp, id);
    }
    qp.rq().ring();
    for i in 0..4u64 {
        let wr = SendWr::send(100 + i, &SGE);
        qp.sq()
            .post(if i == 3 { wr.signaled() } else { wr })
            .unwrap();
    }
    qp.sq().ring();
    d.push(&Cqe::resp(2, 0x12, 1, 8, 0));
    d.push(&Cqe::req(0x12, 4, 0x0a, 0));
    d.push(&Cqe::resp(2, 0x12, 2, 16, 0));
    d.push(&Cqe::resp(2, 0x12, 3, 24, 0));
    let c = poll_all(&mut cq);
    let got: Vec<_> = c
        .iter()
        .map(|c| (c.wr_id, c.opcode, c.byte_len, c.covered, c.covered_from))
        .collect();
    assert_eq!(
        got,
        vec![
            (11, WcOpcode::Recv, 8, 0, 0),
            (103, WcOpcode::Send, 0, 3, 100),
            (12, WcOpcode::Recv, 16, 0, 0),
            (13, WcOpcode::Recv, 24, 0, 0),
        ]
    );
    assert!(c.iter().all(|c| c.is_ok() && c.qp_num == 0x12));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(d.dbrec_ci(), 6);
    // Only the posting budget the SQ took from the CQ stays reserved.
    assert_eq!(cq.reserved(), qp.sq().cq_budget());
    assert_eq!(qp.sq().free_slots(), 16);
}

#[test]
fn owner_bit_wraps_over_many_passes() {
    let (mut cq, mut d) = cq(4, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x22, None);
    let mut next = 0u64;
    for round in 0..10 {
        for _ in 0..3 {
            qp.sq().post(SendWr::send(next, &SGE).signaled()).unwrap();
            next += 1;
        }
        qp.sq().ring();
        // Nothing written yet: nothing polled (INVALID or stale owner bit).
        assert!(poll_all(&mut cq).is_empty(), "round {round}");
        for k in 0..3u64 {
            let idx = (next - 3 + k) as u16;
            d.push(&Cqe::req(0x22, idx, 0x0a, 0));
        }
        let c = poll_all(&mut cq);
        let ids: Vec<u64> = c.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, vec![next - 3, next - 2, next - 1], "round {round}");
        assert_eq!(cq.ci(), (round + 1) * 3);
        assert_eq!(d.dbrec_ci(), (round + 1) * 3);
    }
}

#[test]
fn requester_opcodes_and_byte_len() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x23, None);
    qp.sq()
        .post(SendWr::write(1, &SGE, 0x10, 1).signaled())
        .unwrap();
    qp.sq()
        .post(SendWr::read(2, &SGE, 0x10, 1).signaled())
        .unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x23, 0, 0x08, 0));
    d.push(&Cqe::req(0x23, 1, 0x10, 8));
    let c = poll_all(&mut cq);
    assert_eq!(c[0].opcode, WcOpcode::RdmaWrite);
    assert_eq!((c[1].opcode, c[1].byte_len), (WcOpcode::RdmaRead, 8));
    // The QP is the hot one now: a run of every requester opcode on the fast path, each
    // opcode change and each byte length taken right.
    let wrs = [
        SendWr::send(3, &SGE),
        SendWr::read(4, &SGE, 0x10, 1),
        SendWr::write(5, &SGE, 0x10, 1),
        SendWr::faa(6, &SGE, 0x10, 1, 1),
        SendWr::write(7, &SGE, 0x10, 1),
        SendWr::read(8, &SGE, 0x10, 1),
        SendWr::send(9, &SGE),
    ];
    for wr in wrs {
        qp.sq().post(wr.signaled()).unwrap();
    }
    qp.sq().ring();
    for (pos, (op, len)) in [
        (0x0a, 0),
        (0x10, 5),
        (0x08, 0),
        (0x12, 0),
        (0x08, 0),
        (0x10, 7),
        (0x0a, 0),
    ]
    .into_iter()
    .enumerate()
    {
        d.push(&Cqe::req(0x23, 2 + pos as u16, op, len));
    }
    let c = poll_all(&mut cq);
    let got: Vec<_> = c.iter().map(|c| (c.wr_id, c.opcode, c.byte_len)).collect();
    assert_eq!(
        got,
        [
            (3, WcOpcode::Send, 0),
            (4, WcOpcode::RdmaRead, 5),
            (5, WcOpcode::RdmaWrite, 0),
            (6, WcOpcode::FetchAdd, 8),
            (7, WcOpcode::RdmaWrite, 0),
            (8, WcOpcode::RdmaRead, 7),
            (9, WcOpcode::Send, 0),
        ]
    );
    assert!(c
        .iter()
        .all(|c| c.is_ok() && c.qp_num == 0x23 && c.covered == 0));
}

#[test]
fn error_and_flush_cqes_map_syndromes_and_retire_exactly_their_wqe() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x33, None);
    for i in 0..4u64 {
        qp.sq().post(SendWr::send(i, &SGE)).unwrap(); // all unsignaled
    }
    qp.sq().ring();
    // WQE 1 fails with a remote access error; the rest are flushed one by one.
    d.push(&Cqe::err(13, 0x33, 1, 0x13, 0x88));
    d.push(&Cqe::err(13, 0x33, 2, 0x05, 0));
    d.push(&Cqe::err(13, 0x33, 3, 0x05, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.len(), 3);
    assert_eq!(c[0].status, WcStatus::RemAccessErr);
    assert_eq!(c[0].vendor_err, 0x13 | 0x88 << 8);
    assert_eq!((c[0].wr_id, c[0].covered, c[0].covered_from), (1, 1, 0));
    assert_eq!(
        (c[1].status, c[1].wr_id, c[1].covered),
        (WcStatus::WrFlushErr, 2, 0)
    );
    assert_eq!((c[2].status, c[2].wr_id), (WcStatus::WrFlushErr, 3));
    assert_eq!(cq.reserved(), 0);
    // Every syndrome of the table.
    use rdma_direct::providers::mlx5::syndrome_status as s;
    let table = [
        (0x01, WcStatus::LocLenErr),
        (0x02, WcStatus::LocQpOpErr),
        (0x04, WcStatus::LocProtErr),
        (0x05, WcStatus::WrFlushErr),
        (0x10, WcStatus::BadRespErr),
        (0x11, WcStatus::LocAccessErr),
        (0x12, WcStatus::RemInvReqErr),
        (0x13, WcStatus::RemAccessErr),
        (0x14, WcStatus::RemOpErr),
        (0x15, WcStatus::RetryExcErr),
        (0x16, WcStatus::RnrRetryExcErr),
        (0x22, WcStatus::RemAbortErr),
        (0x99, WcStatus::GeneralErr),
    ];
    for (syn, st) in table {
        assert_eq!(s(syn), st, "syndrome {syn:#x}");
    }
}

#[test]
fn receives_complete_in_order_with_imm_grh_and_terminator() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, dq) = qp_on(&mut cq, 0x44, None);
    let two = [
        Sge {
            addr: 0x5000,
            length: 100,
            lkey: 7,
        },
        Sge {
            addr: 0x6000,
            length: 50,
            lkey: 8,
        },
    ];
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 1,
            sges: &SGE,
        })
        .unwrap();
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 2,
            sges: &two,
        })
        .unwrap();
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 3,
            sges: &[],
        })
        .unwrap();
    assert_eq!(dq.dbrec(), [0, 0], "staged only");
    qp.rq().ring();
    assert_eq!(dq.dbrec(), [3, 0]);
    // Slot 0: one data segment, then the invalid-lkey terminator.
    let mut want = Vec::new();
    want.extend_from_slice(&8u32.to_be_bytes());
    want.extend_from_slice(&1u32.to_be_bytes());
    want.extend_from_slice(&0x1000u64.to_be_bytes());
    want.extend_from_slice(&0u32.to_be_bytes());
    want.extend_from_slice(&0x100u32.to_be_bytes());
    want.extend_from_slice(&0u64.to_be_bytes());
    assert_eq!(dq.rq_slot(0), want);
    // Slot 1: full, no terminator. Slot 2: terminator only.
    assert_eq!(&dq.rq_slot(1)[16..20], &50u32.to_be_bytes());
    assert_eq!(&dq.rq_slot(2)[4..8], &0x100u32.to_be_bytes());
    let three = [two[0], two[1], SGE[0]];
    let e = qp
        .rq()
        .post_recv(RecvWr {
            wr_id: 4,
            sges: &three,
        })
        .unwrap_err();
    assert_eq!(e.error, PostError::TooManySges { n: 3, max: 2 });
    d.push(&Cqe::resp(2, 0x44, 0, 8, 0).with_src(0x77, true));
    d.push(&Cqe::resp(3, 0x44, 1, 150, 0xa1b2_c3d4));
    d.push(&Cqe::resp(1, 0x44, 2, 4096, 0x0000_0042));
    let c = poll_all(&mut cq);
    assert_eq!(c.len(), 3);
    assert_eq!(
        (c[0].wr_id, c[0].opcode, c[0].byte_len, c[0].src_qp),
        (1, WcOpcode::Recv, 8, 0x77)
    );
    assert!(c[0].flags.contains(WcFlags::GRH));
    assert_eq!((c[1].wr_id, c[1].imm), (2, 0xa1b2_c3d4));
    assert!(c[1].flags.contains(WcFlags::WITH_IMM));
    assert_eq!(
        (c[2].wr_id, c[2].opcode, c[2].imm),
        (3, WcOpcode::RecvRdmaWithImm, 0x42)
    );
    assert_eq!(cq.reserved(), 0);
}

#[test]
fn receive_queue_full_and_state_checks() {
    let (mut cq, _d) = cq(64, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x45, None);
    for i in 0..8 {
        qp.rq()
            .post_recv(RecvWr {
                wr_id: i,
                sges: &SGE,
            })
            .unwrap();
    }
    let e = qp
        .rq()
        .post_recv(RecvWr {
            wr_id: 9,
            sges: &SGE,
        })
        .unwrap_err();
    assert_eq!(e.error, PostError::QueueFull { capacity: 8 });
    qp.set_state(QpState::Reset);
    let e = qp
        .rq()
        .post_recv(RecvWr {
            wr_id: 9,
            sges: &SGE,
        })
        .unwrap_err();
    assert_eq!(
        e.error,
        PostError::BadState {
            state: QpState::Reset
        }
    );
    assert_eq!(cq.reserved(), 0, "reset gave the entries back");
}

#[test]
fn srq_maps_wqe_index_and_recycles_entries() {
    let (mut cq, mut d) = cq(16, 64);
    let ds = PlainSrq::new(9, 4, 48);
    // SAFETY: plain memory kept alive by the owner.
    let mut srq = unsafe { Mlx5Srq::<Plain>::from_dv(ds.dv, 2, ds.owner()) }.unwrap();
    let (mut qp, _dq) = qp_on(&mut cq, 0x55, Some(&mut srq));
    // The CQ reserved the SRQ's 4 entries once.
    assert_eq!(cq.reserved(), 4);
    for i in 0..3 {
        srq.post_recv(RecvWr {
            wr_id: 10 + i,
            sges: &SGE,
        })
        .unwrap();
    }
    // 4 entries, one always kept as the list tail: 3 usable.
    let e = srq
        .post_recv(RecvWr {
            wr_id: 13,
            sges: &SGE,
        })
        .unwrap_err();
    assert!(matches!(e.error, PostError::QueueFull { .. }));
    srq.ring();
    assert_eq!(ds.dbrec(), 3);
    // Entry 1: next segment untouched by data, data segments after 16 bytes.
    let e1 = ds.entry(1);
    assert_eq!(&e1[2..4], &2u16.to_be_bytes());
    assert_eq!(&e1[16..20], &8u32.to_be_bytes());
    assert_eq!(&e1[36..40], &0x100u32.to_be_bytes());
    // Completions out of order: 1 then 0.
    d.push(&Cqe::resp(2, 0x55, 1, 8, 0));
    d.push(&Cqe::resp(2, 0x55, 0, 8, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![11, 10]);
    // Posting to the QP's own RQ is refused.
    let e = qp
        .rq()
        .post_recv(RecvWr {
            wr_id: 1,
            sges: &SGE,
        })
        .unwrap_err();
    assert!(matches!(e.error, PostError::OpNotSupported { .. }));
    // The freed entries come back behind the tail (in index order): the list was
    // 0->1->2->3 with 3 the spare tail; now 3->0->1, so the next receives fill 3 then 0.
    srq.post_recv(RecvWr {
        wr_id: 20,
        sges: &SGE,
    })
    .unwrap();
    srq.post_recv(RecvWr {
        wr_id: 21,
        sges: &SGE,
    })
    .unwrap();
    srq.ring();
    assert_eq!(&ds.entry(3)[2..4], &0u16.to_be_bytes(), "3 now links to 0");
    d.push(&Cqe::resp(2, 0x55, 3, 8, 0));
    d.push(&Cqe::resp(2, 0x55, 0, 8, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.iter().map(|c| c.wr_id).collect::<Vec<_>>(), vec![20, 21]);
    drop(qp);
    assert_eq!(
        cq.reserved(),
        0,
        "dropping the last QP gives the SRQ reservation back"
    );
}

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

/// A poll of 16 slots that finds one CQE (the next not written) takes the single-CQE way;
/// a single CQE that way cannot take (it covers unsignaled requests) still completes them all.
#[test]
fn a_single_cqe_in_a_poll_of_many_slots() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x75, None);
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x75, 0, 0x0a, 0));
    assert_eq!(poll_all(&mut cq)[0].wr_id, 1);
    // The QP is hot now; one CQE at a time.
    for id in 2..6u64 {
        qp.sq().post(SendWr::send(id, &SGE).signaled()).unwrap();
        qp.sq().ring();
        d.push(&Cqe::req(0x75, (id - 1) as u16, 0x0a, 0));
        let c = poll_all(&mut cq);
        assert_eq!(c.len(), 1);
        assert_eq!(
            (c[0].wr_id, c[0].qp_num, c[0].covered),
            (id, 0x75, 0),
            "{c:?}"
        );
    }
    // Two unsignaled requests, then a signaled one: its single CQE covers them.
    for wr in [
        SendWr::send(6, &SGE),
        SendWr::send(7, &SGE),
        SendWr::send(8, &SGE).signaled(),
    ] {
        qp.sq().post(wr).unwrap();
    }
    qp.sq().ring();
    d.push(&Cqe::req(0x75, 7, 0x0a, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.len(), 1);
    assert_eq!(
        (c[0].wr_id, c[0].covered, c[0].covered_from),
        (8, 2, 6),
        "{c:?}"
    );
    assert_eq!(cq.bogus_cqes(), 0);
    assert_eq!(qp.sq().free_slots(), 16);
}

/// `Completion` is 8-aligned: a caller's buffer at 8 mod 16 takes every path's stores (the
/// fast path's 16-byte stores are unaligned ones), nothing written beside it.
#[test]
fn completions_land_in_a_buffer_aligned_to_8_only() {
    let (mut cq, mut d) = cq(64, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x76, None);
    #[repr(C, align(16))]
    struct Buf([u64; 8 * 18 + 1]);
    let mut buf = Buf([0x5a5a_5a5a_5a5a_5a5a; 8 * 18 + 1]);
    let base = buf.0.as_mut_ptr();
    // SAFETY: 16 `Completion`s (64 bytes each, 8-aligned) inside `buf`, from its 9th word
    // (8 mod 16), with a guard of 8 words before and after; `buf` outlives `out`, and
    // `Completion` is plain data for which the `EMPTY` writes below make valid values.
    let out = unsafe {
        let p = base.add(9).cast::<Completion>();
        assert_eq!(p as usize % 16, 8);
        for i in 0..16 {
            p.add(i).write(Completion::EMPTY);
        }
        std::slice::from_raw_parts_mut(p, 16)
    };
    let mut id = 0u64;
    // First a poll that makes the QP hot, then runs of 16, 5 and 1 (the requester-only run, its
    // end at a drained queue, the single CQE).
    for batch in [1u16, 16, 5, 1] {
        for _ in 0..batch {
            qp.sq().post(SendWr::send(id + 1, &SGE).signaled()).unwrap();
            d.push(&Cqe::req(0x76, id as u16, 0x0a, 0));
            id += 1;
        }
        qp.sq().ring();
        let n = cq.poll(out);
        assert_eq!(n, usize::from(batch));
        for (k, c) in out[..n].iter().enumerate() {
            let want = id - u64::from(batch) + k as u64 + 1;
            assert_eq!(
                (c.wr_id, c.qp_num, c.opcode, c.status, c.covered, c.flags),
                (want, 0x76, WcOpcode::Send, WcStatus::Success, 0, WcFlags(0)),
                "{c:?}"
            );
        }
    }
    let words = &buf.0;
    assert!(words[..9].iter().all(|&w| w == 0x5a5a_5a5a_5a5a_5a5a));
    assert!(words[9 + 8 * 16..]
        .iter()
        .all(|&w| w == 0x5a5a_5a5a_5a5a_5a5a));
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
fn scatter_to_cqe_data_lands_in_the_receive_buffer() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x80, None);
    let mut buf = vec![0u8; 40];
    let sge = [Sge {
        addr: buf.as_mut_ptr() as u64,
        length: 40,
        lkey: 1,
    }];
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 7,
            sges: &sge,
        })
        .unwrap();
    qp.rq().ring();
    // 20 bytes in CQE bytes 0..32 (op_own bit 0x4).
    let mut c = Cqe::resp(2, 0x80, 0, 20, 0);
    for i in 0..20 {
        c.0[i] = 0xc0 + i as u8;
    }
    c.0[63] |= 0x4;
    d.push(&c);
    let out = poll_all(&mut cq);
    assert_eq!((out[0].wr_id, out[0].byte_len), (7, 20));
    let want: Vec<u8> = (0..20).map(|i| 0xc0 + i as u8).collect();
    assert_eq!(&buf[..20], &want[..]);
    assert_eq!(&buf[20..], &[0u8; 20]);
}

#[test]
fn cqe128_uses_the_second_half() {
    let (mut cq, mut d) = cq(8, 128);
    let (mut qp, _dq) = qp_on(&mut cq, 0x90, None);
    qp.sq().post(SendWr::send(4, &SGE).signaled()).unwrap();
    qp.sq().ring();
    // Garbage in the first half must not matter.
    d.mem.fill(0, 64, 0xee);
    d.push(&Cqe::req(0x90, 0, 0x0a, 0));
    let c = poll_all(&mut cq);
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].wr_id, 4);
}

#[test]
fn separate_send_and_receive_cqs() {
    let (mut scq, mut sd) = cq(16, 64);
    let (mut rcq, mut rd) = cq(16, 64);
    let dq = PlainQp::new(0x99, 16, 8, 32, 0);
    let cfg = QpConfig::new(QpType::Rc);
    // SAFETY: plain memory kept alive by the owner.
    let mut qp = unsafe {
        Mlx5Qp::<Plain>::from_dv(
            dq.dv,
            &cfg,
            caps(),
            &mut scq,
            Some(&mut rcq),
            None,
            dq.owner(),
        )
    }
    .unwrap();
    qp.set_state(QpState::Init);
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 50,
            sges: &SGE,
        })
        .unwrap();
    qp.rq().ring();
    assert_eq!((scq.reserved(), rcq.reserved()), (0, 1));
    qp.set_state(QpState::Rtr);
    qp.set_state(QpState::Rts);
    qp.sq().post(SendWr::send(60, &SGE).signaled()).unwrap();
    qp.sq().ring();
    let budget = qp.sq().cq_budget();
    assert_eq!((scq.reserved(), rcq.reserved()), (1 + budget, 1));
    rd.push(&Cqe::resp(2, 0x99, 0, 8, 0));
    sd.push(&Cqe::req(0x99, 0, 0x0a, 0));
    assert_eq!(poll_all(&mut rcq)[0].wr_id, 50);
    assert_eq!(poll_all(&mut scq)[0].wr_id, 60);
    assert_eq!((scq.reserved(), rcq.reserved()), (budget, 0));
}

#[test]
fn bad_descriptors_are_clear_errors() {
    let mut d = PlainCq::new(1, 6, 64).dv;
    // SAFETY: rejected before any access.
    let e = unsafe { Mlx5Cq::<Plain>::from_dv(d, plain::Region::new(64)) }.unwrap_err();
    assert!(
        e.to_string().contains("cqe_cnt 6 is not a power of two"),
        "{e}"
    );
    d.cqe_cnt = 8;
    d.cqe_size = 32;
    // SAFETY: rejected before any access.
    let e = unsafe { Mlx5Cq::<Plain>::from_dv(d, plain::Region::new(64)) }.unwrap_err();
    assert!(e.to_string().contains("cqe_size 32"), "{e}");
    let (mut cq, _d) = cq(8, 64);
    let mut dq = PlainQp::new(1, 16, 8, 32, 0);
    dq.dv.sq_stride = 128;
    // SAFETY: rejected before any access.
    let e = unsafe {
        Mlx5Qp::<Plain>::from_dv(
            dq.dv,
            &QpConfig::new(QpType::Rc),
            caps(),
            &mut cq,
            None,
            None,
            dq.owner(),
        )
    }
    .unwrap_err();
    assert!(e.to_string().contains("sq_stride 128"), "{e}");
}

#[test]
fn scatter_to_cqe_of_read_and_atomic_results_and_the_64_byte_form() {
    // READ and atomic results scattered into the CQE (op_own 0x4) land in the local SGE the
    // WQE named.
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0xa0, None);
    let mut read_buf = vec![0u8; 24];
    let mut old = 0u64;
    let rs = [Sge {
        addr: read_buf.as_mut_ptr() as u64,
        length: 24,
        lkey: 1,
    }];
    let os = [Sge {
        addr: &mut old as *mut u64 as u64,
        length: 8,
        lkey: 1,
    }];
    qp.sq()
        .post(SendWr::read(1, &rs, 0x1000, 2).signaled())
        .unwrap();
    let fa = rdma_direct::providers::SendOp::FetchAdd {
        raddr: 0x2000,
        rkey: 2,
        add: 1,
    };
    qp.sq().post(SendWr::new(2, fa, &os).signaled()).unwrap();
    qp.sq().ring();
    let mut c = Cqe::req(0xa0, 0, 0x10, 24);
    for i in 0..24 {
        c.0[i] = 0x30 + i as u8;
    }
    c.0[63] |= 0x4;
    d.push(&c);
    let mut c = Cqe::req(0xa0, 1, 0x12, 8);
    c.0[..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_ne_bytes());
    c.0[63] |= 0x4;
    d.push(&c);
    let out = poll_all(&mut cq);
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].opcode, out[0].byte_len), (WcOpcode::RdmaRead, 24));
    assert_eq!((out[1].opcode, out[1].byte_len), (WcOpcode::FetchAdd, 8));
    let want: Vec<u8> = (0..24).map(|i| 0x30 + i as u8).collect();
    assert_eq!(read_buf, want);
    assert_eq!(old, 0x1122_3344_5566_7788);

    // 128-byte CQEs, op_own 0x8: up to 64 bytes in the first half of the slot, spread over
    // two receive SGEs.
    let (mut cq2, mut d) = self::cq(8, 128);
    let (mut qp, _dq) = qp_on(&mut cq2, 0xa1, None);
    let mut a = vec![0u8; 16];
    let mut b = vec![0u8; 48];
    let sges = [
        Sge {
            addr: a.as_mut_ptr() as u64,
            length: 16,
            lkey: 1,
        },
        Sge {
            addr: b.as_mut_ptr() as u64,
            length: 48,
            lkey: 1,
        },
    ];
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 5,
            sges: &sges,
        })
        .unwrap();
    qp.rq().ring();
    let data: Vec<u8> = (0..50).map(|i| 0x80 + i as u8).collect();
    d.mem.write(0, &data); // first half of slot 0
    let mut c = Cqe::resp(2, 0xa1, 0, 50, 0);
    c.0[63] |= 0x8;
    d.push(&c);
    let out = poll_all(&mut cq2);
    assert_eq!((out[0].wr_id, out[0].byte_len), (5, 50));
    assert_eq!(&a[..], &data[..16]);
    assert_eq!(&b[..34], &data[16..]);
    assert_eq!(&b[34..], &[0u8; 14]);
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

/// One scripted stream of CQEs, polled by `poll_one` on one CQ and by `poll` with a one-slot
/// slice on a twin: every completion equal field for field, the consumer index, the dbrec
/// and the dropped count too. Plain requester CQEs of each opcode (the single-CQE short
/// way), a READ and an atomic, a covered request, receives, an error and its flush, a CQE
/// of a WQE written but not published (dropped), empty polls, over a 4-entry ring (the owner
/// parity flips every fourth CQE), with 64- and 128-byte CQEs.
#[test]
fn poll_one_gives_what_a_one_slot_poll_gives() {
    for size in [64, 128] {
        let (mut cq1, mut d1) = cq(4, size);
        let (mut cq2, mut d2) = cq(4, size);
        let (mut qp1, _q1) = qp_on(&mut cq1, 0x81, None);
        let (mut qp2, _q2) = qp_on(&mut cq2, 0x81, None);
        let mut seen = Vec::new();
        // (post, ring, CQE) steps; each step then polls until empty.
        type Step = (
            Vec<SendWr<'static, rdma_direct::providers::mlx5::AddressVector>>,
            bool,
            Vec<Cqe>,
        );
        let mut steps: Vec<Step> = Vec::new();
        let mut pos = 0u16;
        for round in 0..6u64 {
            let op = [0x0a, 0x08, 0x09, 0x0a, 0x10, 0x12][round as usize];
            let wr = match op {
                0x08 => SendWr::write(round, &SGE, 0x10, 1),
                0x09 => SendWr::write_imm(round, &SGE, 0x10, 1, 7),
                0x10 => SendWr::read(round, &SGE, 0x10, 1),
                0x12 => SendWr::faa(round, &SGE, 0x10, 1, 1),
                _ => SendWr::send(round, &SGE),
            };
            steps.push((vec![wr.signaled()], true, vec![Cqe::req(0x81, pos, op, 5)]));
            pos += 1;
        }
        // Two unsignaled, one signaled: one CQE covers them.
        steps.push((
            vec![
                SendWr::send(20, &SGE),
                SendWr::send(21, &SGE),
                SendWr::send(22, &SGE).signaled(),
            ],
            true,
            vec![Cqe::req(0x81, pos + 2, 0x0a, 0)],
        ));
        pos += 3;
        // Written, not published: its CQE is dropped; after the ring a CQE takes it.
        steps.push((
            vec![SendWr::send(30, &SGE).signaled()],
            false,
            vec![Cqe::req(0x81, pos, 0x0a, 0)],
        ));
        steps.push((vec![], true, vec![Cqe::req(0x81, pos, 0x0a, 0)]));
        pos += 1;
        // Plain requester CQEs again, across the ring's wrap.
        for id in 40..47u64 {
            steps.push((
                vec![SendWr::send(id, &SGE).signaled()],
                true,
                vec![Cqe::req(0x81, pos, 0x0a, 0)],
            ));
            pos += 1;
        }
        // An error, then the flush of the next request.
        steps.push((
            vec![
                SendWr::send(50, &SGE).signaled(),
                SendWr::send(51, &SGE).signaled(),
            ],
            true,
            vec![
                Cqe::err(0x0d, 0x81, pos, 0x04, 0),
                Cqe::err(0x0d, 0x81, pos + 1, 0x05, 0),
            ],
        ));
        for (wrs, ring, cqes) in steps {
            for (qp, d) in [(&mut qp1, &mut d1), (&mut qp2, &mut d2)] {
                for wr in &wrs {
                    qp.sq().post(*wr).unwrap();
                }
                if ring {
                    qp.sq().ring();
                }
                for c in &cqes {
                    d.push(c);
                }
            }
            loop {
                let mut one = Completion::EMPTY;
                let mut slot = [Completion::EMPTY];
                let got1 = cq1.poll_one(&mut one);
                let got2 = cq2.poll(&mut slot) == 1;
                assert_eq!(got1, got2, "size {size}");
                if !got1 {
                    break;
                }
                assert_eq!(format!("{one:?}"), format!("{:?}", slot[0]), "size {size}");
                seen.push((one.wr_id, one.status));
            }
            assert_eq!(
                (cq1.ci(), d1.dbrec_ci(), cq1.bogus_cqes()),
                (cq2.ci(), d2.dbrec_ci(), cq2.bogus_cqes())
            );
        }
        let ids: Vec<u64> = seen.iter().map(|s| s.0).collect();
        assert_eq!(
            ids,
            [0, 1, 2, 3, 4, 5, 22, 30, 40, 41, 42, 43, 44, 45, 46, 50, 51],
            "size {size}"
        );
        assert_eq!(seen[15].1, WcStatus::LocProtErr);
        assert_eq!(seen[16].1, WcStatus::WrFlushErr);
        assert_eq!(cq1.bogus_cqes(), 1);
        // Error polled: posts refused.
        assert!(qp1.sq().post(SendWr::send(60, &SGE)).is_err());
    }
}

/// Receives through `poll_one` (its receive way: SEND, SEND WITH IMMEDIATE, WRITE WITH
/// IMMEDIATE, GRH and source QP) against `poll` with one slot (the general path for the
/// immediate forms), field for field; a receive CQE with no receive published, a receive CQE
/// of another QP and one with scattered data go the general way (dropped and counted, mapped,
/// copied) on both.
#[test]
fn poll_one_receives_match_a_one_slot_poll() {
    use rdma_direct::wire::{MLX5_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_WR_IMM};
    let (mut cq1, mut d1) = cq(4, 64);
    let (mut cq2, mut d2) = cq(4, 64);
    let (mut qp1, _q1) = qp_on(&mut cq1, 0x91, None);
    let (mut qp2, _q2) = qp_on(&mut cq2, 0x91, None);
    let (mut other1, _o1) = qp_on(&mut cq1, 0x92, None);
    let (mut other2, _o2) = qp_on(&mut cq2, 0x92, None);
    let mut seen = Vec::new();
    for round in 0..12u32 {
        let (cqe, post) = match round % 6 {
            0 => (Cqe::resp(2, 0x91, 0, 10 + round, 0), true),
            1 => (
                Cqe::resp(MLX5_CQE_RESP_SEND_IMM, 0x91, 0, 20, 0xabcd_0000 | round),
                true,
            ),
            2 => (
                Cqe::resp(MLX5_CQE_RESP_WR_IMM, 0x91, 0, 30, 0x1234_0000 | round)
                    .with_src(0x77, true),
                true,
            ),
            // No receive published: dropped.
            3 => (Cqe::resp(MLX5_CQE_RESP_WR_IMM, 0x91, 0, 8, 1), false),
            // Another QP's receive (not the hot one).
            4 => (Cqe::resp(MLX5_CQE_RESP_WR_IMM, 0x92, 0, 8, 2), true),
            _ => (Cqe::resp(2, 0x91, 0, 4, 0).with_src(0x55, false), true),
        };
        let target = if round % 6 == 4 { 0x92 } else { 0x91 };
        for (qp, other, d) in [
            (&mut qp1, &mut other1, &mut d1),
            (&mut qp2, &mut other2, &mut d2),
        ] {
            if post {
                let q = if target == 0x92 {
                    &mut *other
                } else {
                    &mut *qp
                };
                q.rq()
                    .post_recv(RecvWr {
                        wr_id: 500 + u64::from(round),
                        sges: &SGE,
                    })
                    .unwrap();
                q.rq().ring();
            }
            d.push(&cqe);
        }
        let mut one = Completion::EMPTY;
        let mut slot = [Completion::EMPTY];
        let got1 = cq1.poll_one(&mut one);
        let got2 = cq2.poll(&mut slot) == 1;
        assert_eq!(got1, got2, "round {round}");
        if got1 {
            assert_eq!(
                format!("{one:?}"),
                format!("{:?}", slot[0]),
                "round {round}"
            );
            seen.push((
                one.wr_id,
                one.opcode,
                one.imm,
                one.flags,
                one.src_qp,
                one.byte_len,
            ));
        }
        assert_eq!(
            (cq1.ci(), d1.dbrec_ci(), cq1.bogus_cqes()),
            (cq2.ci(), d2.dbrec_ci(), cq2.bogus_cqes()),
            "round {round}"
        );
    }
    assert_eq!(cq1.bogus_cqes(), 2);
    assert_eq!(seen.len(), 10);
    assert_eq!(
        seen[2],
        (
            502,
            WcOpcode::RecvRdmaWithImm,
            0x1234_0002,
            WcFlags(3),
            0x77,
            30
        )
    );
    assert_eq!(
        seen[1],
        (501, WcOpcode::Recv, 0xabcd_0001, WcFlags(2), 0, 20)
    );
    assert_eq!(seen[0], (500, WcOpcode::Recv, 0, WcFlags(0), 0, 10));
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
