//! The mlx5 poller against a lying or buggy device, on plain memory (the test writes the
//! CQEs): whatever a CQE claims, nothing is written outside the buffers the request itself
//! named, and no request completes twice. Each CQE the poller cannot honour is dropped or
//! reported as an error, and counted in `bogus_cqes`.

use rdma_direct_rig as plain;

use plain::{poll_all, qp_on, test_cq as cq, TEST_SGE as SGE};
use plain::{Cqe, Plain, PlainSrq};
use rdma_direct::providers::mlx5::{Mlx5Qp, Mlx5Srq};
use rdma_direct::providers::{
    Completion, CompletionQueue, QueuePair, RecvQueue, RecvWr, SendQueue, SendWr, Sge, WcStatus,
};

/// A CQE that claims a READ result scattered into it, for an inline SEND whose payload
/// looks like a data segment pointing at `canary`: the poller goes by the WQE's own opcode
/// (SEND: nothing to scatter) and writes nothing.
#[test]
fn a_read_claim_on_an_inline_send_writes_nothing() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x31, None);
    let mut canary = [0x5au8; 16];
    // Inline data starts at WQE byte 20; WQE bytes 48..64 (payload bytes 28..44) are where
    // the data segment of an atomic would be: byte_count 8, lkey 1, addr = the canary.
    let mut payload = [0u8; 44];
    payload[28..32].copy_from_slice(&8u32.to_be_bytes());
    payload[32..36].copy_from_slice(&1u32.to_be_bytes());
    payload[36..44].copy_from_slice(&(canary.as_mut_ptr() as u64).to_be_bytes());
    qp.sq()
        .post(SendWr::send(9, &[]).inline(&payload).signaled())
        .unwrap();
    qp.sq().ring();
    // Claims READ (WQE opcode 0x10) with 8 bytes of data in the CQE; also try the atomic.
    let mut c = Cqe::req(0x31, 0, 0x10, 8);
    c.0[..8].copy_from_slice(&[0xee; 8]);
    c.0[63] |= 0x4;
    d.push(&c);
    let out = poll_all(&mut cq);
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].wr_id, 9);
    assert_eq!(out[0].status, WcStatus::GeneralErr);
    assert_eq!(canary, [0x5a; 16]);
    assert_eq!(cq.bogus_cqes(), 1);
    // The request completed once: the same CQE again is a stray.
    d.push(&c);
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 2);
    assert_eq!(canary, [0x5a; 16]);
}

/// A 64-byte scatter (`op_own` 0x8, data in the 64 bytes before the CQE) on a CQ of 64-byte
/// CQEs, in slot 0: those bytes are before the CQ ring. Nothing is copied.
#[test]
fn a_64_byte_scatter_on_64_byte_cqes_copies_nothing() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x32, None);
    let mut buf = vec![0u8; 64];
    let sge = [Sge {
        addr: buf.as_mut_ptr() as u64,
        length: 64,
        lkey: 1,
    }];
    for wr_id in [1, 2] {
        qp.rq().post_recv(RecvWr { wr_id, sges: &sge }).unwrap();
    }
    qp.rq().ring();
    let mut c = Cqe::resp(2, 0x32, 0, 64, 0);
    c.0[63] |= 0x8;
    d.push(&c);
    let out = poll_all(&mut cq);
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].wr_id, out[0].status), (1, WcStatus::GeneralErr));
    assert_eq!(buf, vec![0u8; 64]);
    assert_eq!(cq.bogus_cqes(), 1);
    // The receive was retired all the same: the next CQE completes the next receive.
    d.push(&Cqe::resp(2, 0x32, 1, 4, 0));
    let out = poll_all(&mut cq);
    assert_eq!((out[0].wr_id, out[0].status), (2, WcStatus::Success));
}

/// Requester CQEs while nothing is outstanding (before any post, and the same CQE again
/// after its request completed, on the fast path and off it) are dropped and counted; the
/// next real completion still maps to its own request.
#[test]
fn stray_requester_cqes_are_dropped_and_nothing_completes_twice() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x33, None);
    d.push(&Cqe::req(0x33, 0, 0x0a, 0));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 1);
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x33, 0, 0x0a, 0));
    // The same again in the same poll (the fast path sees the QP now) and in the next one.
    d.push(&Cqe::req(0x33, 0, 0x0a, 0));
    let out = poll_all(&mut cq);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].wr_id, 1);
    assert_eq!(cq.bogus_cqes(), 2);
    d.push(&Cqe::req(0x33, 1, 0x0a, 0));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 3);
    qp.sq().post(SendWr::send(2, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x33, 1, 0x0a, 0));
    let out = poll_all(&mut cq);
    assert_eq!((out.len(), out[0].wr_id), (1, 2));
}

/// A single requester CQE naming qpn 0xffffff while the CQ knows no QP yet (the one-slot short
/// way compares the CQE with the hot QP's number): dropped and counted, nothing completes.
#[test]
fn a_single_cqe_of_qpn_ffffff_without_a_hot_qp_is_dropped() {
    let (mut cq, mut d) = cq(16, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x34, None);
    qp.sq().post(SendWr::send(1, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0xff_ffff, 0, 0x0a, 0));
    let mut one = [Completion::EMPTY; 1];
    assert_eq!(cq.poll(&mut one), 0);
    assert_eq!(cq.bogus_cqes(), 1);
    // The QP's own CQE after it completes its request.
    d.push(&Cqe::req(0x34, 0, 0x0a, 0));
    assert_eq!(cq.poll(&mut one), 1);
    assert_eq!((one[0].wr_id, one[0].qp_num), (1, 0x34));
}

/// The same SRQ entry completed twice (before the poster took it back) completes once.
#[test]
fn an_srq_entry_completes_once() {
    let (mut cq, mut d) = cq(16, 64);
    let ds = PlainSrq::new(9, 4, 48);
    // SAFETY: plain memory kept alive by the owner.
    let mut srq = unsafe { Mlx5Srq::<Plain>::from_dv(ds.dv, 2, ds.owner()) }.unwrap();
    let (_qp, _dq) = qp_on(&mut cq, 0x34, Some(&mut srq));
    srq.post_recv(RecvWr {
        wr_id: 40,
        sges: &SGE,
    })
    .unwrap();
    srq.ring();
    d.push(&Cqe::resp(2, 0x34, 0, 8, 0));
    d.push(&Cqe::resp(2, 0x34, 0, 8, 0));
    let out = poll_all(&mut cq);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].wr_id, 40);
    assert_eq!(cq.bogus_cqes(), 1);
}

/// The fast path (runs of plain CQEs of the QP the last CQE named, its queues' positions in
/// registers): sends and receives interleaved in one poll, across the ring's wrap, each
/// complete once with their own wr_id, length, source QP and GRH flag; then a receive CQE
/// with no receive outstanding and a send CQE naming a WQE not posted are dropped and
/// counted, and nothing completes twice.
#[test]
fn short_way_runs_complete_each_request_once() {
    use rdma_direct::providers::{WcFlags, WcOpcode};
    use rdma_direct::wire::MLX5_CQE_RESP_SEND;
    let (mut cq, mut d) = cq(64, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x55, None);
    // A first send maps the QP (the general path); from then on it is the hot one.
    qp.sq().post(SendWr::send(100, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x55, 0, 0x0a, 0));
    assert_eq!(poll_all(&mut cq)[0].wr_id, 100);
    // One SEND with one SGE is one WQEBB: send k has wqe_counter k.
    let (mut send, mut recv) = (1u16, 0u16);
    for round in 0..12u64 {
        for i in 0..5 {
            let wr_id = 1000 + round * 5 + i;
            qp.rq().post_recv(RecvWr { wr_id, sges: &SGE }).unwrap();
        }
        qp.rq().ring();
        for i in 0..3 {
            let wr = SendWr::send(200 + round * 3 + i, &SGE).signaled();
            qp.sq().post(wr).unwrap();
        }
        qp.sq().ring();
        let grh = round % 2 == 0;
        for k in 0..7 {
            if k % 2 == 0 {
                let c = Cqe::resp(MLX5_CQE_RESP_SEND, 0x55, recv, 8 + k, 0);
                d.push(&c.with_src(0x77, grh));
                recv += 1;
            } else {
                d.push(&Cqe::req(0x55, send, 0x0a, 0));
                send += 1;
            }
        }
        let out = poll_all(&mut cq);
        assert_eq!(out.len(), 7, "round {round}");
        for (k, c) in out.iter().enumerate() {
            let k = k as u64;
            assert!(c.is_ok());
            assert_eq!((c.qp_num, c.covered, c.imm), (0x55, 0, 0));
            if k % 2 == 0 {
                assert_eq!(c.wr_id, 1000 + round * 5 + k / 2);
                assert_eq!(
                    (c.opcode, c.byte_len, c.src_qp),
                    (WcOpcode::Recv, 8 + k as u32, 0x77)
                );
                assert_eq!(c.flags.contains(WcFlags::GRH), grh);
            } else {
                assert_eq!(
                    (c.wr_id, c.opcode),
                    (200 + round * 3 + k / 2, WcOpcode::Send)
                );
                assert_eq!((c.byte_len, c.src_qp, c.flags), (0, 0, WcFlags(0)));
            }
        }
        // The fifth receive of the round stays outstanding; complete it alone.
        d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x55, recv, 1, 0));
        recv += 1;
        let out = poll_all(&mut cq);
        assert_eq!((out.len(), out[0].wr_id), (1, 1000 + round * 5 + 4));
    }
    assert_eq!(cq.bogus_cqes(), 0);
    // Nothing outstanding: a receive CQE and a send CQE, after a good send CQE in the same
    // poll (so both meet the fast path), are dropped and counted.
    qp.sq().post(SendWr::send(9, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x55, send, 0x0a, 0));
    d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x55, recv, 8, 0));
    d.push(&Cqe::req(0x55, send + 1, 0x0a, 0));
    d.push(&Cqe::req(0x55, send, 0x0a, 0));
    let out = poll_all(&mut cq);
    assert_eq!((out.len(), out[0].wr_id), (1, 9));
    assert_eq!(cq.bogus_cqes(), 3);
}

/// Runs of send CQEs only (the send side alone, taken at the start of the poll), on both CQE
/// sizes: rounds of 12 on a ring of 32 CQEs stop at the ring's end and go on with the other
/// owner parity, and the 16-bit `wqe_counter` wraps (more than 65536 requests); every
/// request completes once, in order, with its own wr_id.
#[test]
fn send_runs_wrap_the_ring_and_the_counter() {
    for cqe_size in [64, 128] {
        let (mut cq, mut d) = cq(32, cqe_size);
        let (mut qp, _dq) = qp_on(&mut cq, 0x66, None);
        let mut pos = 0u32;
        let mut out = [Completion::EMPTY; 16];
        for round in 0..5500u64 {
            for i in 0..12 {
                let wr = SendWr::send(round * 12 + i, &SGE).signaled();
                qp.sq().post(wr).unwrap();
            }
            qp.sq().ring();
            for _ in 0..12 {
                d.push(&Cqe::req(0x66, pos as u16, 0x0a, 0));
                pos += 1;
            }
            let mut got = 0;
            while got < 12 {
                let n = cq.poll(&mut out[..16.min(12 - got + 4)]);
                assert!(n > 0, "round {round}: CQEs left unpolled");
                for (k, c) in out[..n].iter().enumerate() {
                    assert!(c.is_ok());
                    assert_eq!(
                        (c.wr_id, c.qp_num, c.covered),
                        (round * 12 + (got + k) as u64, 0x66, 0)
                    );
                }
                got += n;
            }
            assert_eq!(got, 12, "round {round}: no completion twice");
        }
        assert!(pos > 65536);
        assert_eq!(cq.bogus_cqes(), 0);
        assert_eq!(cq.poll(&mut out), 0);
    }
}

/// The fast path takes a send CQE only when the whole WQE it names is below the producer
/// position the poster published: a WQE written but not rung is not taken there; the general
/// path drops it (counted) and each request still completes once. WQE sizes come from what
/// the poster recorded, not from the ring (which the device reads): a ctrl segment whose ds
/// is rewritten afterwards (to claim eight WQEBBs, or none) changes nothing, and a CQE
/// naming a WQEBB inside a WQE of two is dropped.
#[test]
fn send_runs_stop_at_wqes_past_the_published_position() {
    let (mut cq, mut d) = cq(32, 64);
    let (mut qp, dq) = qp_on(&mut cq, 0x67, None);
    for i in 0..2 {
        qp.sq().post(SendWr::send(i, &SGE).signaled()).unwrap();
    }
    qp.sq().ring();
    // Written, not published.
    qp.sq().post(SendWr::send(2, &SGE).signaled()).unwrap();
    for c in 0..3 {
        d.push(&Cqe::req(0x67, c, 0x0a, 0));
    }
    let ids: Vec<u64> = poll_all(&mut cq).iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [0, 1]);
    assert_eq!(cq.bogus_cqes(), 1);
    qp.sq().ring();
    d.push(&Cqe::req(0x67, 2, 0x0a, 0));
    d.push(&Cqe::req(0x67, 3, 0x0a, 0));
    let ids: Vec<u64> = poll_all(&mut cq).iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [2]);
    assert_eq!(cq.bogus_cqes(), 2);
    // Position 3: one WQEBB, its ds rewritten in the ring to claim eight, then none.
    let ds_at = |pos: usize| pos * 64 + 7;
    for claim in [32u8, 0] {
        let pos = qp.sq().pi();
        qp.sq()
            .post(SendWr::send(10 + u64::from(claim), &SGE).signaled())
            .unwrap();
        qp.sq()
            .post(SendWr::send(11 + u64::from(claim), &SGE).signaled())
            .unwrap();
        qp.sq().ring();
        let ds = dq.mem.read(ds_at(pos as usize % 16), 1)[0];
        dq.mem.write(ds_at(pos as usize % 16), &[claim]);
        d.push(&Cqe::req(0x67, pos as u16, 0x0a, 0));
        d.push(&Cqe::req(0x67, pos as u16 + 1, 0x0a, 0));
        let ids: Vec<u64> = poll_all(&mut cq).iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, [10 + u64::from(claim), 11 + u64::from(claim)]);
        dq.mem.write(ds_at(pos as usize % 16), &[ds]);
    }
    assert_eq!(cq.bogus_cqes(), 2);
    // A WQE of two WQEBBs (a 60-byte inline SEND): a CQE naming its second WQEBB is dropped;
    // its own CQE retires both.
    let pos = qp.sq().pi();
    qp.sq()
        .post(SendWr::send(20, &[]).inline(&[7u8; 60]).signaled())
        .unwrap();
    assert_eq!(qp.sq().pi(), pos + 2);
    qp.sq().post(SendWr::send(21, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x67, pos as u16 + 1, 0x0a, 0));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 3);
    d.push(&Cqe::req(0x67, pos as u16, 0x0a, 0));
    d.push(&Cqe::req(0x67, pos as u16 + 2, 0x0a, 0));
    let ids: Vec<u64> = poll_all(&mut cq).iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [20, 21]);
    assert_eq!(qp.sq().free_slots(), 16);
    assert_eq!(cq.bogus_cqes(), 3);
}

/// Stray CQEs (nothing outstanding on their side) at the start of a poll of the hot QP, two
/// in a row so a run is tried: sends, receives, and a mixed stream after good completions.
/// All are dropped and counted; the good ones complete once.
#[test]
fn stray_cqes_starting_a_run_are_dropped() {
    use rdma_direct::wire::MLX5_CQE_RESP_SEND;
    let (mut cq, mut d) = cq(32, 64);
    let (mut qp, _dq) = qp_on(&mut cq, 0x68, None);
    // A first send maps the QP; from then on it is the hot one.
    qp.sq().post(SendWr::send(7, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x68, 0, 0x0a, 0));
    assert_eq!(poll_all(&mut cq)[0].wr_id, 7);
    d.push(&Cqe::req(0x68, 1, 0x0a, 0));
    d.push(&Cqe::req(0x68, 2, 0x0a, 0));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 2);
    d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x68, 0, 8, 0));
    d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x68, 1, 8, 0));
    assert!(poll_all(&mut cq).is_empty());
    assert_eq!(cq.bogus_cqes(), 4);
    qp.sq().post(SendWr::send(8, &SGE).signaled()).unwrap();
    qp.sq().ring();
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 9,
            sges: &SGE,
        })
        .unwrap();
    qp.rq().ring();
    d.push(&Cqe::req(0x68, 1, 0x0a, 0));
    d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x68, 0, 8, 0));
    d.push(&Cqe::req(0x68, 2, 0x0a, 0));
    d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x68, 1, 8, 0));
    let ids: Vec<u64> = poll_all(&mut cq).iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, [8, 9]);
    assert_eq!(cq.bogus_cqes(), 6);
    assert!(poll_all(&mut cq).is_empty());
}

/// A receive run of the hot QP with more receive CQEs than receives posted (64- and 128-byte
/// CQEs, across the ring's wrap): the posted ones complete in order, each field from its
/// CQE; the rest are dropped and counted; receives posted after complete as usual.
#[test]
fn a_receive_run_ends_at_the_last_posted_receive() {
    use rdma_direct::providers::WcOpcode;
    use rdma_direct::wire::MLX5_CQE_RESP_SEND;
    for cqe_size in [64, 128] {
        let (mut cq, mut d) = cq(8, cqe_size);
        let (mut qp, _dq) = qp_on(&mut cq, 0x6a, None);
        let post = |qp: &mut Mlx5Qp<Plain>, id: u64| {
            qp.rq()
                .post_recv(RecvWr {
                    wr_id: id,
                    sges: &SGE,
                })
                .unwrap();
            qp.rq().ring();
        };
        // A first receive maps the QP; from then on it is the hot one.
        post(&mut qp, 1);
        d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x6a, 0, 8, 0));
        assert_eq!(poll_all(&mut cq)[0].wr_id, 1);
        // Three receives, five CQEs (the ring's wrap after the seventh slot).
        for id in 2..5 {
            post(&mut qp, id);
        }
        for k in 0..5u32 {
            d.push(&Cqe::resp(
                MLX5_CQE_RESP_SEND,
                0x6a,
                1 + k as u16,
                10 + k,
                0,
            ));
        }
        let got = poll_all(&mut cq);
        let want: Vec<Completion> = (0..3u32)
            .map(|k| Completion {
                wr_id: 2 + u64::from(k),
                opcode: WcOpcode::Recv,
                byte_len: 10 + k,
                qp_num: 0x6a,
                ..Completion::EMPTY
            })
            .collect();
        assert_eq!(got, want, "{cqe_size}-byte CQEs");
        assert_eq!(cq.bogus_cqes(), 2, "{cqe_size}-byte CQEs");
        assert!(poll_all(&mut cq).is_empty());
        post(&mut qp, 5);
        post(&mut qp, 6);
        d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x6a, 4, 8, 0));
        d.push(&Cqe::resp(MLX5_CQE_RESP_SEND, 0x6a, 5, 8, 0));
        let ids: Vec<u64> = poll_all(&mut cq).iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, [5, 6], "{cqe_size}-byte CQEs");
        assert_eq!(cq.bogus_cqes(), 2);
    }
}

/// A run of requester CQEs of the hot QP with every length rule: WRITE and SEND report 0
/// bytes, READ the CQE's byte count, WRITE WITH IMM 0; a two-WQEBB WQE (a 64-byte inline
/// SEND) advances the position by two.
#[test]
fn send_runs_report_each_opcode_and_byte_len() {
    use rdma_direct::providers::WcOpcode;
    let (mut cq, mut d) = cq(32, 64);
    let (mut qp, dq) = qp_on(&mut cq, 0x69, None);
    qp.sq().post(SendWr::send(0, &SGE).signaled()).unwrap();
    qp.sq().ring();
    d.push(&Cqe::req(0x69, 0, 0x0a, 0));
    assert_eq!(poll_all(&mut cq)[0].wr_id, 0);
    let two = [SGE[0], SGE[0]];
    let payload = [7u8; 64];
    let wrs = [
        SendWr::write(1, &SGE, 0x10, 1),
        SendWr::read(2, &SGE, 0x10, 1),
        SendWr::send(3, &[]).inline(&payload),
        SendWr::read(4, &two, 0x10, 1),
        SendWr::write_imm(5, &SGE, 0x10, 1, 9),
        SendWr::read(6, &SGE, 0x10, 1),
    ];
    // Positions: one WQEBB each, but two for the inline SEND (ctrl, then 4 + 64 inline bytes).
    let positions = [1u16, 2, 3, 5, 6, 7];
    let mut cqes = Vec::new();
    for (wr, p) in wrs.into_iter().zip(positions) {
        qp.sq().post(wr.signaled()).unwrap();
        cqes.push((p, wr.wr_id));
    }
    qp.sq().ring();
    assert_eq!(dq.dbrec()[1], 8, "the inline SEND takes two WQEBBs");
    let ops = [0x08, 0x10, 0x0a, 0x10, 0x09, 0x10];
    for (k, &(p, id)) in cqes.iter().enumerate() {
        d.push(&Cqe::req(0x69, p, ops[k], 100 + id as u32));
    }
    let out = poll_all(&mut cq);
    // Whole completions: every other field as in `Completion::EMPTY`.
    let want: Vec<Completion> = [
        (1, WcOpcode::RdmaWrite, 0),
        (2, WcOpcode::RdmaRead, 102),
        (3, WcOpcode::Send, 0),
        (4, WcOpcode::RdmaRead, 104),
        (5, WcOpcode::RdmaWrite, 0),
        (6, WcOpcode::RdmaRead, 106),
    ]
    .into_iter()
    .map(|(wr_id, opcode, byte_len)| Completion {
        wr_id,
        opcode,
        byte_len,
        qp_num: 0x69,
        ..Completion::EMPTY
    })
    .collect();
    assert_eq!(out, want);
    assert_eq!(cq.bogus_cqes(), 0);
}
