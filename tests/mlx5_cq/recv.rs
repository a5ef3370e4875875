//! The receive side: receive CQEs in order (immediate, GRH, the terminator), a full receive
//! queue and the state checks, SRQ wr_id mapping and recycling, and separate send and
//! receive CQs.

use super::*;

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
