//! mlx5 CQ, RQ and SRQ on plain memory, the test writing CQEs as the device would: owner-bit
//! wrap, selective signaling (`covered`), error syndromes, flushes, receive and SRQ wr_id
//! mapping, purging the CQEs of reset or dropped QPs, scatter-to-CQE, 128-byte CQEs.
//!
//! Here: the requester side (selective signaling, the owner bit, opcodes, error and flush
//! CQEs) and bad descriptors; the parts: `recv` (receives and the SRQ), `scatter` (data in
//! the CQE), `stray` (purges and CQEs that are not the QP's to complete), `poll_one` (the
//! poll forms agree).

use rdma_direct_rig as plain;

use plain::{poll_all, qp_on, test_cq as cq, TEST_SGE as SGE};
use plain::{Cqe, Plain, PlainCq, PlainQp, PlainSrq};
use rdma_direct::providers::mlx5::{Mlx5Cq, Mlx5Qp, Mlx5Srq};
use rdma_direct::providers::{
    Completion, CompletionQueue, PostError, QpCaps, QpConfig, QpState, QpType, QueuePair,
    RecvQueue, RecvWr, SendQueue, SendWr, Sge, WcFlags, WcOpcode, WcStatus,
};

#[path = "mlx5_cq/poll_one.rs"]
mod poll_one;
#[path = "mlx5_cq/recv.rs"]
mod recv;
#[path = "mlx5_cq/scatter.rs"]
mod scatter;
#[path = "mlx5_cq/stray.rs"]
mod stray;

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
