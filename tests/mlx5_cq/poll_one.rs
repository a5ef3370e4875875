//! The poll forms agree: one CQE in a poll of many slots, completions into a buffer aligned
//! to 8 only, and `poll_one` against a one-slot `poll` of a twin CQ (requester and receive
//! completions, the hostile cases included).

use super::*;

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
