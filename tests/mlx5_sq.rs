//! mlx5 send queue on plain memory, the test playing the device: WQE bytes, doorbell record,
//! doorbell / BlueFlame register, validation, queue-full and CQ-full accounting.

use rdma_direct_rig as plain;

use plain::{Plain, PlainCq, PlainQp, Rng};
use rdma_direct::providers::mlx5::AddressVector;
use rdma_direct::providers::mlx5::{DoorbellMode, Mlx5Cq, Mlx5Qp};
use rdma_direct::providers::{
    Completion, CompletionQueue, PostError, QpCaps, QpState, QpType, QueuePair, RecvQueue, RecvWr,
    SendFlags, SendOp, SendQueue, SendWr, Sge, UdDest, WcStatus,
};

const QPN: u32 = 0x00ab_cdef;

fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 4,
        max_recv_sge: 2,
        max_inline_data: 200,
    }
}

struct Rig {
    qp: Mlx5Qp<Plain>,
    cq: Mlx5Cq<Plain>,
    dev: PlainQp,
    dcq: PlainCq,
}

fn rig_with(qp_type: QpType, sq_wqe_cnt: u32, cqe_cnt: u32, bf_size: u32) -> Rig {
    rig_caps(qp_type, sq_wqe_cnt, cqe_cnt, bf_size, caps())
}

fn rig_caps(qp_type: QpType, sq_wqe_cnt: u32, cqe_cnt: u32, bf_size: u32, caps: QpCaps) -> Rig {
    let dcq = PlainCq::new(7, cqe_cnt, 64);
    // SAFETY: the plain memory lives as long as the owners; only these objects use it.
    let mut cq = unsafe { Mlx5Cq::<Plain>::from_dv(dcq.dv, dcq.owner()) }.unwrap();
    let (qp, dev) = plain::send_qp(&mut cq, QPN, qp_type, sq_wqe_cnt, bf_size, caps);
    Rig { qp, cq, dev, dcq }
}

fn rig() -> Rig {
    rig_with(QpType::Rc, 16, 64, 256)
}

fn ctrl(idx: u16, opcode: u8, ds: u8, fm: u8, imm: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&((idx as u32) << 8 | opcode as u32).to_be_bytes());
    v.extend_from_slice(&(QPN << 8 | ds as u32).to_be_bytes());
    v.extend_from_slice(&[0, 0, 0, fm]);
    v.extend_from_slice(&imm.to_be_bytes());
    v
}

fn raddr(addr: u64, rkey: u32) -> Vec<u8> {
    let mut v = addr.to_be_bytes().to_vec();
    v.extend_from_slice(&rkey.to_be_bytes());
    v.extend_from_slice(&[0; 4]);
    v
}

fn data(len: u32, lkey: u32, addr: u64) -> Vec<u8> {
    let mut v = len.to_be_bytes().to_vec();
    v.extend_from_slice(&lkey.to_be_bytes());
    v.extend_from_slice(&addr.to_be_bytes());
    v
}

#[test]
fn inline_write_bytes_dbrec_and_doorbell() {
    let mut r = rig_with(QpType::Rc, 16, 64, 256);
    r.qp.set_doorbell_mode(DoorbellMode::Doorbell);
    let payload = 0x1122_3344_5566_7788u64.to_be_bytes();
    let wr = SendWr::write(42, &[], 0xdead_beef_0000_1000, 0x1234)
        .inline(&payload)
        .signaled();
    r.qp.sq().post(wr).unwrap();
    assert_eq!(r.qp.sq().staged(), 1);
    // Staged, not rung: the dbrec is untouched.
    assert_eq!(r.dev.dbrec(), [0, 0]);
    r.qp.sq().ring();
    assert_eq!(r.qp.sq().staged(), 0);
    let mut want = ctrl(0, 0x08, 3, 0x08, 0);
    want.extend(raddr(0xdead_beef_0000_1000, 0x1234));
    want.extend_from_slice(&(8u32 | 0x8000_0000).to_be_bytes());
    want.extend_from_slice(&payload);
    want.extend_from_slice(&[0; 4]); // padding zeroed
    want.extend_from_slice(&[0xa5; 16]); // rest of the WQEBB untouched
    assert_eq!(r.dev.wqebb(0), want);
    assert_eq!(r.dev.dbrec(), [0, 1]);
    // 8-byte doorbell: first 8 bytes of the ctrl segment, in half 0; next ring uses half 1.
    assert_eq!(&r.dev.bf(0)[..8], &want[..8]);
    assert_eq!(&r.dev.bf(0)[8..16], &[0; 8]);
    r.qp.sq().post(wr).unwrap();
    r.qp.sq().ring();
    assert_eq!(&r.dev.bf(1)[..8], &r.dev.wqebb(1)[..8]);
    assert_eq!(r.dev.dbrec(), [0, 2]);
}

#[test]
fn blueflame_copies_a_single_wqe_and_batches_use_the_doorbell() {
    let mut r = rig();
    let sges = [Sge {
        addr: 0x1000,
        length: 64,
        lkey: 9,
    }];
    // Auto: one WQE with ds = 2 > 1 goes by BlueFlame.
    r.qp.sq().post(SendWr::send(1, &sges)).unwrap();
    r.qp.sq().ring();
    let wqe = r.dev.wqebb(0);
    assert_eq!(r.dev.bf(0)[..64], wqe[..]);
    // Two WQEs: 8-byte doorbell of the last one, into half 1.
    r.qp.sq().post(SendWr::send(2, &sges)).unwrap();
    r.qp.sq().post(SendWr::send(3, &sges)).unwrap();
    r.qp.sq().ring();
    let last = r.dev.wqebb(2);
    let bf1 = r.dev.bf(1);
    assert_eq!(&bf1[..8], &last[..8]);
    assert_eq!(&bf1[8..64], &[0u8; 56][..], "only 8 bytes written");
    assert_eq!(r.dev.dbrec()[1], 3);
}

#[test]
fn blueflame_copy_wraps_the_source_at_the_ring_end() {
    let mut r = rig_with(QpType::Rc, 4, 64, 256);
    let sges = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    for i in 0..3 {
        r.qp.sq().post(SendWr::send(i, &sges).signaled()).unwrap();
    }
    r.qp.sq().ring();
    let n = r.dev.complete_sends(&mut r.dcq);
    assert_eq!(n, 3);
    let mut out = [rdma_direct::providers::Completion::EMPTY; 4];
    assert_eq!(r.cq.poll(&mut out), 3);
    // A 2-WQEBB WQE (inline 60 B: ds = 1 + 1 + 4 = 6) starting at the last WQEBB.
    let big = [0x5au8; 60];
    r.qp.sq()
        .post(SendWr::write(9, &[], 0x2000, 5).inline(&big))
        .unwrap();
    r.qp.sq().ring();
    let wqe = r.dev.wqe(3, 2); // WQEBB 3 then WQEBB 0
    assert_eq!(&wqe[..4], &((3u32 << 8) | 0x08).to_be_bytes());
    assert_eq!(wqe[7], 6);
    assert_eq!(&wqe[32..36], &(60u32 | 0x8000_0000).to_be_bytes());
    assert_eq!(&wqe[36..96], &big[..]);
    // The BlueFlame half got WQEBB 3 then WQEBB 0.
    assert_eq!(r.dev.bf(1)[..128], wqe[..]);
}

#[test]
fn send_skips_zero_length_sges_and_carries_imm_and_flags() {
    let mut r = rig();
    let sges = [
        Sge {
            addr: 0x1111,
            length: 10,
            lkey: 1,
        },
        Sge {
            addr: 0x2222,
            length: 0,
            lkey: 2,
        },
        Sge {
            addr: 0x3333,
            length: 30,
            lkey: 3,
        },
    ];
    let wr = SendWr::new(5, SendOp::SendImm { imm: 0x0102_0304 }, &sges)
        .with_flags(SendFlags::SOLICITED | SendFlags::FENCE);
    r.qp.sq().post(wr).unwrap();
    r.qp.sq().ring();
    let mut want = ctrl(0, 0x0b, 3, 0x80 | 0x02, 0x0102_0304);
    want.extend(data(10, 1, 0x1111));
    want.extend(data(30, 3, 0x3333));
    want.extend_from_slice(&[0xa5; 16]);
    assert_eq!(r.dev.wqebb(0), want);
}

#[test]
fn atomics_and_read_layouts() {
    let mut r = rig();
    let sge = [Sge {
        addr: 0x8000,
        length: 8,
        lkey: 0x77,
    }];
    let cas = SendOp::CompareSwap {
        raddr: 0x10_0000,
        rkey: 0x55,
        compare: 0x0102_0304_0506_0708,
        swap: 0x1112_1314_1516_1718,
    };
    r.qp.sq().post(SendWr::new(1, cas, &sge)).unwrap();
    let fa = SendOp::FetchAdd {
        raddr: 0x10_0008,
        rkey: 0x56,
        add: 3,
    };
    r.qp.sq().post(SendWr::new(2, fa, &sge)).unwrap();
    r.qp.sq().post(SendWr::read(3, &sge, 0x4000, 0x66)).unwrap();
    r.qp.sq().ring();
    let mut want = ctrl(0, 0x11, 4, 0, 0);
    want.extend(raddr(0x10_0000, 0x55));
    want.extend_from_slice(&0x1112_1314_1516_1718u64.to_be_bytes());
    want.extend_from_slice(&0x0102_0304_0506_0708u64.to_be_bytes());
    want.extend(data(8, 0x77, 0x8000));
    assert_eq!(r.dev.wqebb(0), want);
    let mut want = ctrl(1, 0x12, 4, 0, 0);
    want.extend(raddr(0x10_0008, 0x56));
    want.extend_from_slice(&3u64.to_be_bytes());
    want.extend_from_slice(&[0; 8]);
    want.extend(data(8, 0x77, 0x8000));
    assert_eq!(r.dev.wqebb(1), want);
    let mut want = ctrl(2, 0x10, 3, 0, 0);
    want.extend(raddr(0x4000, 0x66));
    want.extend(data(8, 0x77, 0x8000));
    want.extend_from_slice(&[0xa5; 16]);
    assert_eq!(r.dev.wqebb(2), want);
}

#[test]
fn ud_send_copies_the_address_vector() {
    let mut r = rig_with(QpType::Ud, 16, 64, 256);
    r.qp.set_path_mtu(1024);
    let mut av = [0u8; 48];
    for (i, b) in av.iter_mut().enumerate() {
        *b = i as u8 + 1;
    }
    let ah = AddressVector(av);
    let dest = UdDest {
        ah: &ah,
        remote_qpn: 0x12_3456,
        remote_qkey: 0x1111_1111,
    };
    let sge = [Sge {
        addr: 0x9000,
        length: 100,
        lkey: 4,
    }];
    r.qp.sq().post(SendWr::send(1, &sge).to(dest)).unwrap();
    r.qp.sq().ring();
    let w = r.dev.wqebb(0);
    assert_eq!(&w[..16], &ctrl(0, 0x0a, 5, 0, 0)[..]);
    assert_eq!(&w[16..20], &0x1111_1111u32.to_be_bytes());
    assert_eq!(&w[20..24], &av[4..8]);
    assert_eq!(&w[24..28], &(0x12_3456u32 | 0x8000_0000).to_be_bytes());
    assert_eq!(&w[28..64], &av[12..48]);
    assert_eq!(r.dev.wqebb(1)[..16], data(100, 4, 0x9000)[..]);
    // Over the MTU: refused.
    let big = [Sge {
        addr: 0x9000,
        length: 1025,
        lkey: 4,
    }];
    let e = r.qp.sq().post(SendWr::send(2, &big).to(dest)).unwrap_err();
    assert_eq!(
        e.error,
        PostError::UdTooLarge {
            len: 1025,
            mtu: 1024
        }
    );
    // No destination / a non-SEND op.
    let e = r.qp.sq().post(SendWr::send(3, &sge)).unwrap_err();
    assert_eq!(e.error, PostError::UdDest);
    let e =
        r.qp.sq()
            .post(SendWr::write(4, &sge, 0, 0).to(dest))
            .unwrap_err();
    assert!(matches!(
        e.error,
        PostError::OpNotSupported {
            op: "WRITE",
            qp_type: QpType::Ud
        }
    ));
}

#[test]
fn invalid_requests_are_refused_before_anything_is_written() {
    let mut r = rig_with(QpType::Uc, 16, 64, 256);
    let before = r.dev.mem.read(0, 16 * 64);
    let sge8 = [Sge {
        addr: 0x8000,
        length: 8,
        lkey: 1,
    }];
    let sge4 = [Sge {
        addr: 0x8000,
        length: 4,
        lkey: 1,
    }];
    let five = [sge8[0]; 5];
    let cases: Vec<(SendWr<'_, AddressVector>, PostError)> = vec![
        (
            SendWr::write(1, &[], 0, 0).inline(&[0; 201]),
            PostError::InlineTooLarge { len: 201, max: 200 },
        ),
        (
            SendWr::send(2, &five),
            PostError::TooManySges { n: 5, max: 4 },
        ),
        (
            SendWr::read(3, &sge8, 0, 0),
            PostError::OpNotSupported {
                op: "READ",
                qp_type: QpType::Uc,
            },
        ),
    ];
    for (wr, err) in cases {
        let e = r.qp.sq().post(wr).unwrap_err();
        assert_eq!(e.error, err);
        assert_eq!(e.wr.wr_id, wr.wr_id, "the request comes back");
    }
    let mut rc = rig();
    let rc_cases: Vec<(SendWr<'_, AddressVector>, PostError)> = vec![
        (
            SendWr::new(
                4,
                SendOp::FetchAdd {
                    raddr: 0x1004,
                    rkey: 1,
                    add: 1,
                },
                &sge8,
            ),
            PostError::AtomicMisaligned { raddr: 0x1004 },
        ),
        (
            SendWr::new(
                5,
                SendOp::CompareSwap {
                    raddr: 0x1000,
                    rkey: 1,
                    compare: 0,
                    swap: 1,
                },
                &sge4,
            ),
            PostError::AtomicLocalLen { len: 4 },
        ),
        (SendWr::read(6, &[], 0, 0), PostError::ZeroLengthRead),
        (
            SendWr::read(7, &[], 0, 0).inline(&[1]),
            PostError::InlineNotAllowed,
        ),
    ];
    for (wr, err) in rc_cases {
        assert_eq!(rc.qp.sq().post(wr).unwrap_err().error, err);
    }
    assert_eq!(r.dev.mem.read(0, 16 * 64), before);
    assert_eq!(r.qp.sq().staged(), 0);
    assert_eq!(rc.qp.sq().staged(), 0);
    // Bad state: INIT refuses sends.
    r.qp.set_state(QpState::Reset);
    r.qp.set_state(QpState::Init);
    let e = r.qp.sq().post(SendWr::send(8, &sge8)).unwrap_err();
    assert_eq!(
        e.error,
        PostError::BadState {
            state: QpState::Init
        }
    );
    assert_eq!(r.dev.mem.read(0, 16 * 64), before);
}

#[test]
fn a_full_queue_hands_the_request_back_and_frees_on_completion() {
    let mut r = rig_with(QpType::Rc, 8, 64, 0);
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    for i in 0..8 {
        r.qp.sq().post(SendWr::send(i, &sge)).unwrap();
    }
    assert_eq!(r.qp.sq().free_slots(), 0);
    let e =
        r.qp.sq()
            .post(SendWr::send(99, &sge).signaled())
            .unwrap_err();
    assert_eq!(e.error, PostError::QueueFull { capacity: 16 });
    assert_eq!(e.wr.wr_id, 99);
    r.qp.sq().ring();
    // The device completes WQE 3 (signaled by the device test: write the CQE directly).
    r.dcq.push(&crate::plain::Cqe::req(QPN, 3, 0x0a, 0));
    let mut out = [rdma_direct::providers::Completion::EMPTY; 2];
    assert_eq!(r.cq.poll(&mut out), 1);
    assert_eq!(out[0].wr_id, 3);
    assert_eq!(out[0].covered, 3);
    assert_eq!(out[0].covered_from, 0);
    assert_eq!(r.qp.sq().free_slots(), 4);
    // Now it fits; it reuses WQEBB 0.
    r.qp.sq().post(SendWr::send(100, &sge)).unwrap();
    r.qp.sq().ring();
    assert_eq!(&r.dev.wqebb(0)[..4], &((8u32 << 8) | 0x0a).to_be_bytes());
}

#[test]
fn cq_overrun_is_refused_at_post_time() {
    // A 4-entry CQ: every send WR reserves one entry.
    let mut r = rig_with(QpType::Rc, 16, 4, 0);
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    for i in 0..4 {
        r.qp.sq().post(SendWr::send(i, &sge)).unwrap();
    }
    let e =
        r.qp.sq()
            .post(SendWr::send(4, &sge).signaled())
            .unwrap_err();
    assert_eq!(e.error, PostError::CqFull { cqe: 4 });
    assert_eq!(r.cq.reserved(), 4);
    r.qp.sq().ring();
    r.dcq.push(&crate::plain::Cqe::req(QPN, 3, 0x0a, 0));
    let mut out = [rdma_direct::providers::Completion::EMPTY; 2];
    assert_eq!(r.cq.poll(&mut out), 1);
    assert_eq!(r.cq.reserved(), 0);
    r.qp.sq().post(SendWr::send(4, &sge).signaled()).unwrap();
}

#[test]
fn signal_every_forces_cq_update() {
    let mut r = rig();
    r.qp.set_signal_every(3);
    let sge = [Sge {
        addr: 0x1000,
        length: 8,
        lkey: 1,
    }];
    for i in 0..6 {
        r.qp.sq().post(SendWr::send(i, &sge)).unwrap();
    }
    r.qp.sq().ring();
    let fm: Vec<u8> = (0..6).map(|i| r.dev.wqebb(i)[11]).collect();
    assert_eq!(fm, [0, 0, 8, 0, 0, 8]);
}

#[test]
fn the_write_inline_fast_path_writes_the_same_bytes_as_post() {
    let mut a = rig();
    let mut b = rig();
    for (i, len) in [0usize, 1, 4, 8, 12, 13, 60, 61, 100, 200]
        .into_iter()
        .enumerate()
    {
        let data: Vec<u8> = (0..len as u8).map(|x| x ^ 0x3c).collect();
        let signaled = i % 2 == 0;
        let mut wr = SendWr::write(i as u64, &[], 0x1234_5678_9abc_def0, 0x77).inline(&data);
        if signaled {
            wr = wr.signaled();
        }
        a.qp.sq().post(wr).unwrap();
        a.qp.sq().ring();
        b.qp.sq()
            .post_write_inline(i as u64, 0x1234_5678_9abc_def0, 0x77, &data, signaled)
            .unwrap();
        b.qp.sq().ring();
        assert_eq!(
            a.dev.mem.read(0, 16 * 64),
            b.dev.mem.read(0, 16 * 64),
            "len {len}"
        );
        assert_eq!(a.dev.dbrec(), b.dev.dbrec());
        // Complete both so the rings keep turning.
        a.dev.complete_sends(&mut a.dcq);
        b.dev.complete_sends(&mut b.dcq);
        let mut out = [rdma_direct::providers::Completion::EMPTY; 4];
        let (na, nb) = (a.cq.poll(&mut out), b.cq.poll(&mut out));
        assert_eq!(na, nb);
        if signaled {
            assert_eq!(out[0].wr_id, i as u64);
        }
    }
    // The same refusals.
    assert_eq!(
        b.qp.sq().post_write_inline(1, 0, 0, &[0; 201], true),
        Err(PostError::InlineTooLarge { len: 201, max: 200 })
    );
    b.qp.set_state(QpState::Err);
    assert_eq!(
        b.qp.sq().post_write_inline(1, 0, 0, &[0; 8], true),
        Err(PostError::BadState {
            state: QpState::Err
        })
    );
    let mut u = rig_with(QpType::Ud, 16, 64, 256);
    assert!(matches!(
        u.qp.sq().post_write_inline(1, 0, 0, &[0; 8], true),
        Err(PostError::OpNotSupported { .. })
    ));
}

#[test]
fn a_small_inline_cap_keeps_small_inline_posts_working_and_refuses_larger_ones() {
    // Below 12 bytes of inline cap the one-WQEBB fast path is off for the QP: small inline
    // WRITEs and SENDs go the general way, with the same bytes, and the cap still refuses.
    for cap in [0u32, 4, 8, 11] {
        let small = QpCaps {
            max_inline_data: cap,
            ..caps()
        };
        let mut a = rig_caps(QpType::Rc, 16, 64, 256, small);
        let mut b = rig_caps(QpType::Rc, 16, 64, 256, small);
        let data: Vec<u8> = (0..cap as u8).map(|x| x ^ 0x5a).collect();
        for i in 0..20u64 {
            let w = SendWr::write(i, &[], 0x1000 + i, 9).inline(&data);
            let s = SendWr::send(i, &[]).inline(&data).signaled();
            a.qp.sq().post(w).unwrap();
            b.qp.sq().post_general(&w).unwrap();
            a.qp.sq()
                .post_write_inline(i, 0x1000 + i, 9, &data, false)
                .unwrap();
            b.qp.sq().post_general(&w).unwrap();
            a.qp.sq().post(s).unwrap();
            b.qp.sq().post_general(&s).unwrap();
            a.qp.sq().ring();
            b.qp.sq().ring();
            assert_eq!(observe(&mut a), observe(&mut b), "cap {cap}, round {i}");
            a.dev.complete_sends(&mut a.dcq);
            b.dev.complete_sends(&mut b.dcq);
            let mut out = [Completion::EMPTY; 4];
            assert_eq!(a.cq.poll(&mut out), 1);
            assert_eq!(b.cq.poll(&mut out), 1);
        }
        let big = vec![0u8; cap as usize + 1];
        let want = PostError::InlineTooLarge {
            len: cap + 1,
            max: cap,
        };
        let err =
            a.qp.sq()
                .post(SendWr::send(1, &[]).inline(&big))
                .unwrap_err();
        assert_eq!(err.error, want);
        assert_eq!(a.qp.sq().post_write_inline(1, 0, 0, &big, false), Err(want));
    }
}

/// xorshift, deterministic.
/// Everything a poster and a poller can observe of a rig, for comparing two of them.
fn observe(r: &mut Rig) -> plain::SqSeen {
    plain::sq_seen(&r.dev, &mut r.qp, &r.cq, 32)
}

#[test]
fn fast_path_and_general_path_agree_on_bytes_accounting_and_completions() {
    // Two identical QPs get the same random requests: one through `post` (small inline WRITEs,
    // WRITEs WITH IMMEDIATE and SENDs take the one-WQEBB fast path), one through `post_general` (never). Ring bytes,
    // dbrec, doorbell/BlueFlame registers, indices, CQ reservations, refusals and completions
    // must be identical at every step, wrap-around, full queue and full CQ included.
    let payload: Vec<u8> = (0..64u8).map(|b| b.wrapping_mul(37) ^ 0x5c).collect();
    let sges = [
        Sge {
            addr: 0x1000,
            length: 8,
            lkey: 3,
        },
        Sge {
            addr: 0x2000,
            length: 0,
            lkey: 4,
        },
    ];
    for seed in [1u64, 7, 0x5eed, 0xdead_beef] {
        let mut rng = Rng(seed);
        let mut a = rig_with(QpType::Rc, 32, 16, 256);
        let mut b = rig_with(QpType::Rc, 32, 16, 256);
        if seed == 7 {
            for r in [&mut a, &mut b] {
                r.qp.set_doorbell_mode(DoorbellMode::Doorbell);
            }
        }
        let (mut fast_taken, mut refused) = (0, 0);
        for step in 0..600u64 {
            let len = rng.below(20) as usize;
            let data = &payload[..len];
            let flags = SendFlags(rng.below(8) as u8);
            let wr_id = 1000 + step;
            let wr = match rng.below(7) {
                0 | 1 => SendWr::write(wr_id, &[], 0x10_0000 + step * 8, 0x77).inline(data),
                6 => SendWr::write_imm(wr_id, &[], 0x10_0000, 0x77, 0x0102_0304 ^ step as u32)
                    .inline(data),
                2 => SendWr::send(wr_id, &[]).inline(data),
                3 => SendWr::new(wr_id, SendOp::SendImm { imm: step as u32 }, &[]).inline(data),
                4 => SendWr::send(wr_id, &sges),
                _ => SendWr::read(wr_id, &sges[..1], 0x3000, 9),
            }
            .with_flags(flags);
            let before = a.qp.sq().pi();
            let ra = a.qp.sq().post(wr).map_err(|r| r.error);
            let rb = b.qp.sq().post_general(&wr);
            assert_eq!(ra, rb, "seed {seed} step {step}: outcome");
            if ra.is_err() {
                refused += 1;
            } else if len <= 12 && a.qp.sq().pi() == before + 1 {
                fast_taken += 1;
            }
            if rng.below(4) == 0 {
                a.qp.sq().ring();
                b.qp.sq().ring();
            }
            if rng.below(6) == 0 {
                // The device completes what was rung; both CQs are polled.
                let na = a.dev.complete_sends(&mut a.dcq);
                let nb = b.dev.complete_sends(&mut b.dcq);
                assert_eq!(na, nb);
                let mut ca = [Completion::EMPTY; 16];
                let mut cb = [Completion::EMPTY; 16];
                let ka = a.cq.poll(&mut ca);
                let kb = b.cq.poll(&mut cb);
                assert_eq!(ca[..ka], cb[..kb], "seed {seed} step {step}: completions");
            }
            let (oa, ob) = (observe(&mut a), observe(&mut b));
            if let Some(i) = (0..oa.0.len()).find(|&i| oa.0[i] != ob.0[i]) {
                panic!(
                    "seed {seed} step {step}: ring/BlueFlame byte {i} differs: {:#04x} vs {:#04x}",
                    oa.0[i], ob.0[i]
                );
            }
            assert_eq!(
                (oa.1, oa.2, oa.3, oa.4, oa.5, oa.6),
                (ob.1, ob.2, ob.3, ob.4, ob.5, ob.6),
                "seed {seed} step {step}: dbrec, pi, staged, free slots, budget, reservations"
            );
        }
        assert!(
            fast_taken > 100,
            "seed {seed}: fast path taken {fast_taken} times"
        );
        assert!(refused > 0, "seed {seed}: the queue or the CQ never filled");
    }
}

#[path = "mlx5_sq/limits.rs"]
mod limits;
