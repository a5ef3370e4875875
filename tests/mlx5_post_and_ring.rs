//! `SendQueue::post_and_ring` on the mlx5 send queue: the same as `post` then `ring`, byte
//! for byte. Two identical QPs on plain memory (the test playing the device) get the same
//! random requests; one takes some of them through `post_and_ring`, the twin through `post`
//! and `ring`. Ring bytes, both BlueFlame halves, dbrec, producer index, staged count, free
//! slots, posting budget, CQ reservation, refusals and completions must agree at every step,
//! in every doorbell mode, through full queues, an error completion and a reset.

use rdma_direct_rig as plain;

use plain::{Cqe, Plain, PlainCq, PlainQp, Rng};
use rdma_direct::providers::mlx5::{DoorbellMode, Mlx5Cq, Mlx5Qp};
use rdma_direct::providers::{
    Completion, CompletionQueue, PostError, QpCaps, QpState, QpType, QueuePair, SendFlags,
    SendQueue, SendWr, Sge,
};

const QPN: u32 = 0x0012_3456;

struct Rig {
    qp: Mlx5Qp<Plain>,
    cq: Mlx5Cq<Plain>,
    dev: PlainQp,
    dcq: PlainCq,
}

fn rig(qp_type: QpType, sq_wqe_cnt: u32, cqe_cnt: u32, bf_size: u32) -> Rig {
    let caps = QpCaps {
        max_send_wr: sq_wqe_cnt,
        max_recv_wr: 16,
        max_send_sge: 4,
        max_recv_sge: 2,
        max_inline_data: 200,
    };
    let dcq = PlainCq::new(7, cqe_cnt, 64);
    // SAFETY: the plain memory lives as long as the owners; only these objects use it.
    let mut cq = unsafe { Mlx5Cq::<Plain>::from_dv(dcq.dv, dcq.owner()) }.unwrap();
    let (qp, dev) = plain::send_qp(&mut cq, QPN, qp_type, sq_wqe_cnt, bf_size, caps);
    Rig { qp, cq, dev, dcq }
}

#[test]
fn post_and_ring_is_post_then_ring() {
    let payload: Vec<u8> = (0..40u8).map(|b| b.wrapping_mul(29) ^ 0xa3).collect();
    let sges = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 3,
    }];
    let modes = [
        DoorbellMode::Doorbell,
        DoorbellMode::Auto,
        DoorbellMode::BlueFlame,
    ];
    let mut one_call = 0;
    for (k, seed) in [3u64, 0x51, 0xbeef, 0x1234_5678].into_iter().enumerate() {
        let mut rng = Rng(seed);
        let qp_type = if k == 3 { QpType::Uc } else { QpType::Rc };
        // A 32-WQEBB ring that fills; the CQ's budget refills 4 entries at a time (an
        // eighth of it), so most one-WQEBB posts find budget left and take the fast path.
        let (wqe_cnt, cqe_cnt) = (32, 32);
        let mut a = rig(qp_type, wqe_cnt, cqe_cnt, 256);
        let mut b = rig(qp_type, wqe_cnt, cqe_cnt, 256);
        let (mut refused, mut failed) = (0, false);
        for step in 0..3000u64 {
            if step % 500 == 0 {
                let m = modes[(step / 500) as usize % 3];
                a.qp.set_doorbell_mode(m);
                b.qp.set_doorbell_mode(m);
            }
            let len = rng.below(16) as usize;
            let data = &payload[..len];
            let wr_id = (seed << 20) + step;
            let kind = rng.below(6);
            let wr = match kind {
                0 | 1 => SendWr::write(wr_id, &[], 0x10_0000 + step, 0x77).inline(data),
                2 => SendWr::send(wr_id, &[]).inline(data),
                3 => SendWr::write_imm(wr_id, &[], 0x20_0000, 0x77, step as u32).inline(data),
                4 => SendWr::send(wr_id, &sges),
                _ => SendWr::read(wr_id, &sges, 0x3000, 9),
            }
            .with_flags(SendFlags(rng.below(8) as u8));
            // Now and then only staged, so `post_and_ring` also meets staged WQEs.
            let (ra, rb) = if rng.below(3) == 0 {
                let ra = a.qp.sq().post(wr).map_err(|r| r.error);
                (ra, b.qp.sq().post(wr).map_err(|r| r.error))
            } else {
                // The one-call way: the 8-byte doorbell, nothing staged, an inline request
                // of at most 12 bytes and budget left (no refill).
                let one_way = modes[(step / 500) as usize % 3] == DoorbellMode::Doorbell
                    && a.qp.sq().staged() == 0
                    && kind <= 3
                    && len <= 12
                    && a.qp.sq().cq_budget() > 0;
                let ra = a.qp.sq().post_and_ring(wr).map_err(|r| r.error);
                one_call += (one_way && ra.is_ok()) as u32;
                let rb = b.qp.sq().post(wr).map_err(|r| r.error);
                b.qp.sq().ring();
                (ra, rb)
            };
            assert_eq!(ra, rb, "seed {seed} step {step}: outcome");
            refused += ra.is_err() as u32;
            if rng.below(5) == 0 {
                assert_eq!(
                    a.dev.complete_sends(&mut a.dcq),
                    b.dev.complete_sends(&mut b.dcq)
                );
                let (mut ca, mut cb) = ([Completion::EMPTY; 16], [Completion::EMPTY; 16]);
                let (na, nb) = (a.cq.poll(&mut ca), b.cq.poll(&mut cb));
                assert_eq!(ca[..na], cb[..nb], "seed {seed} step {step}: completions");
            }
            // Once per seed: an error completion fails both QPs (posts are refused with
            // BadState through either call), then a reset and reconnect.
            if step == 1700 && !failed {
                failed = true;
                for r in [&mut a, &mut b] {
                    r.qp.sq().ring();
                    r.dev.complete_sends(&mut r.dcq);
                    let mut out = [Completion::EMPTY; 16];
                    while r.cq.poll(&mut out) > 0 {}
                    let counter = r.qp.sq().pi().wrapping_sub(1) as u16;
                    r.dcq.push(&Cqe::err(13, QPN, counter, 0x05, 0x81));
                    while r.cq.poll(&mut out) > 0 {}
                }
                let w = SendWr::write(1, &[], 0x1000, 1).inline(&payload[..8]);
                let ea = a.qp.sq().post_and_ring(w).map_err(|r| r.error);
                let eb = b.qp.sq().post(w).map_err(|r| r.error);
                b.qp.sq().ring();
                assert_eq!(ea, eb);
                assert!(
                    matches!(ea, Err(PostError::BadState { .. })),
                    "seed {seed}: {ea:?}"
                );
                for r in [&mut a, &mut b] {
                    for s in [QpState::Reset, QpState::Init, QpState::Rtr, QpState::Rts] {
                        r.qp.set_state(s);
                    }
                }
            }
            let (oa, ob) = (
                plain::sq_seen(&a.dev, &mut a.qp, &a.cq, wqe_cnt),
                plain::sq_seen(&b.dev, &mut b.qp, &b.cq, wqe_cnt),
            );
            if let Some(i) = (0..oa.0.len()).find(|&i| oa.0[i] != ob.0[i]) {
                panic!(
                    "seed {seed} step {step}: ring/BlueFlame byte {i}: {:#04x} vs {:#04x}",
                    oa.0[i], ob.0[i]
                );
            }
            assert_eq!(
                (oa.1, oa.2, oa.3, oa.4, oa.5, oa.6),
                (ob.1, ob.2, ob.3, ob.4, ob.5, ob.6),
                "seed {seed} step {step}: dbrec, pi, staged, free slots, budget, reservations"
            );
        }
        assert!(refused > 0, "seed {seed}: the queue never filled");
    }
    assert!(one_call > 300, "the one-call way taken {one_call} times");
}

/// With nothing staged and the 8-byte doorbell, one call writes the WQE, the dbrec and the
/// doorbell (the WQE's first 8 bytes, halves alternating); a refused request rings what was
/// staged before it and leaves the ring as it was.
#[test]
fn one_call_rings_and_a_refusal_rings_what_was_staged() {
    let mut r = rig(QpType::Rc, 16, 64, 256);
    r.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let data = 0x1122_3344_5566_7788u64.to_be_bytes();
    r.qp.sq()
        .post_and_ring(SendWr::write(9, &[], 0xdead_0000, 0x42).inline(&data))
        .unwrap();
    assert_eq!(r.qp.sq().staged(), 0);
    assert_eq!(r.dev.dbrec(), [0, 1]);
    assert_eq!(&r.dev.bf(0)[..8], &r.dev.wqebb(0)[..8]);
    // WQE index 0, opcode RDMA_WRITE (0x08); qpn and ds 3 (ctrl, raddr, inline).
    assert_eq!(
        &r.dev.wqebb(0)[..8],
        &[0, 0, 0, 0x08, 0x12, 0x34, 0x56, 0x03]
    );
    r.qp.sq()
        .post_and_ring(SendWr::write(10, &[], 0xdead_0000, 0x42).inline(&data))
        .unwrap();
    assert_eq!(r.dev.dbrec(), [0, 2]);
    assert_eq!(&r.dev.bf(1)[..8], &r.dev.wqebb(1)[..8]);
    // One staged, then a request too large for the inline cap: refused, handed back, and
    // the staged one rung.
    r.qp.sq()
        .post(SendWr::write(11, &[], 0xdead_0000, 0x42).inline(&data))
        .unwrap();
    let before = r.dev.mem.read(0, 16 * 64);
    let big = [0u8; 201];
    let e =
        r.qp.sq()
            .post_and_ring(SendWr::write(12, &[], 0, 1).inline(&big))
            .unwrap_err();
    assert_eq!(e.error, PostError::InlineTooLarge { len: 201, max: 200 });
    assert_eq!(e.wr.wr_id, 12);
    assert_eq!(r.dev.mem.read(0, 16 * 64), before);
    assert_eq!(r.dev.dbrec(), [0, 3]);
    assert_eq!(r.qp.sq().staged(), 0);
    assert_eq!(&r.dev.bf(0)[..8], &r.dev.wqebb(2)[..8]);
    // A full queue: the one-call way refuses like `post`, nothing written.
    let mut n = 3;
    let full = loop {
        match r
            .qp
            .sq()
            .post_and_ring(SendWr::write(n, &[], 0, 1).inline(&data))
        {
            Ok(()) => n += 1,
            Err(e) => break e.error,
        }
    };
    assert!(matches!(full, PostError::QueueFull { .. }), "{full:?}");
    assert_eq!(r.dev.dbrec(), [0, n as u32]);
    assert_eq!(n, 16, "the 16-entry queue took 16");
}
