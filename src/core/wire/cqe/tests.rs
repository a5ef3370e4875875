use super::*;

#[test]
fn requester_cqe_emits_every_byte() {
    let r = CqeRepr {
        opcode: CqeOpcode::Req,
        owner: true,
        s_wqe_opcode: 0x08,
        qpn: 0xabcdef,
        wqe_counter: 0xfffe,
        byte_cnt: 0x1234,
        ..CqeRepr::default()
    };
    let mut buf = vec![0xa5u8; 64];
    r.emit(&mut Cqe64::new_unchecked(&mut buf)).unwrap();
    let mut want = [0u8; 64];
    want[44..48].copy_from_slice(&[0, 0, 0x12, 0x34]);
    want[56..60].copy_from_slice(&[0x08, 0xab, 0xcd, 0xef]);
    want[60..62].copy_from_slice(&[0xff, 0xfe]);
    want[63] = 0x01;
    assert_eq!(buf[..], want[..]);
    assert_eq!(CqeRepr::parse(&Cqe64::new_unchecked(&buf)).unwrap(), r);
}

#[test]
fn responder_cqe_round_trips() {
    let r = CqeRepr {
        opcode: CqeOpcode::RespSendImm,
        owner: false,
        se: true,
        format: 1,
        qpn: 0x12,
        wqe_counter: 7,
        byte_cnt: 4096,
        imm_inval_pkey: 0xdead_beef,
        srqn: 0x33,
        src_qp: 0x44_5566,
        flags: 0x20,
        slid: 0x7788,
        ml_path: 0x7f,
        timestamp: 0x0102_0304_0506_0708,
        ..CqeRepr::default()
    };
    let mut buf = vec![0xa5u8; 64];
    r.emit(&mut Cqe64::new_unchecked(&mut buf)).unwrap();
    assert_eq!(buf[63], 0x30 | 0x04 | 0x02);
    assert_eq!(&buf[36..40], &[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(&buf[24..28], &[0x20, 0x44, 0x55, 0x66]);
    assert_eq!(&buf[0..17], &[0u8; 17]);
    assert_eq!(CqeRepr::parse(&Cqe64::new_unchecked(&buf)).unwrap(), r);
}

#[test]
fn error_cqe_layout() {
    let r = CqeRepr {
        opcode: CqeOpcode::ReqErr,
        owner: true,
        s_wqe_opcode: 0x0a,
        qpn: 0x0102,
        wqe_counter: 0xffff,
        srqn: 0,
        syndrome: Syndrome::RemAccess,
        vendor_syndrome: 0x88,
        ..CqeRepr::default()
    };
    let mut buf = vec![0xa5u8; 64];
    r.emit(&mut Cqe64::new_unchecked(&mut buf)).unwrap();
    let mut want = [0u8; 64];
    want[54] = 0x88;
    want[55] = 0x13;
    want[56..60].copy_from_slice(&[0x0a, 0x00, 0x01, 0x02]);
    want[60..62].copy_from_slice(&[0xff, 0xff]);
    want[63] = 0xd1;
    assert_eq!(buf[..], want[..]);
    let e = ErrCqe::new_checked(&buf[..]).unwrap();
    assert_eq!(e.syndrome(), Syndrome::RemAccess);
    assert_eq!(CqeRepr::parse(&Cqe64::new_unchecked(&buf)).unwrap(), r);
}

#[test]
fn ownership_follows_ci_parity() {
    let cnt = 8;
    // A fresh CQ: INVALID everywhere, never software-owned.
    for ci in 0..32 {
        assert!(!cqe_sw_owned(MLX5_CQE_INVALID_OP_OWN, ci, cnt));
    }
    // First lap: owner 0; second lap: owner 1; third: 0 again.
    assert!(cqe_sw_owned(0x00, 3, cnt));
    assert!(!cqe_sw_owned(0x01, 3, cnt));
    assert!(cqe_sw_owned(0x01, 11, cnt));
    assert!(!cqe_sw_owned(0x00, 11, cnt));
    assert!(cqe_sw_owned(0x00, 19, cnt));
    assert!(cqe_owner_for(8, cnt) && !cqe_owner_for(16, cnt));
    // Past u32 wrap the parity keeps alternating.
    assert!(cqe_owner_for(u32::MAX, cnt));
    assert!(!cqe_owner_for(u32::MAX.wrapping_add(1), cnt));
}

#[test]
fn the_one_compare_and_the_plain_mask_agree_with_the_rule() {
    for cnt in [1u32, 8, 1 << 15] {
        for ci in [0, 1, cnt - 1, cnt, cnt + 1, 2 * cnt, u32::MAX] {
            for op_own in 0..=255u8 {
                let x = op_own ^ cqe_parity(ci, cnt);
                let rule = (op_own >> MLX5_CQE_OPCODE_SHIFT) != MLX5_CQE_INVALID
                    && (op_own & 1 != 0) == (ci & cnt != 0);
                assert_eq!(cqe_sw_owned_x(x), rule, "op_own {op_own:#x} ci {ci}");
                assert_eq!(cqe_sw_owned(op_own, ci, cnt), rule);
                let plain_req = rule
                    && op_own >> MLX5_CQE_OPCODE_SHIFT == MLX5_CQE_REQ
                    && op_own & (MLX5_INLINE_SCATTER_32 | MLX5_INLINE_SCATTER_64) == 0;
                assert_eq!(x & CQE_PLAIN_OWNED_MASK == 0, plain_req, "{op_own:#x}");
                let unscattered = (op_own & 1 != 0) == (ci & cnt != 0)
                    && op_own & (MLX5_INLINE_SCATTER_32 | MLX5_INLINE_SCATTER_64) == 0;
                assert_eq!(
                    x & CQE_UNSCATTERED_OWNED_MASK == 0,
                    unscattered,
                    "{op_own:#x}"
                );
            }
        }
    }
}

#[test]
fn cqe_offsets_for_both_sizes() {
    assert_eq!(cqe64_offset(0, 4, 64), 0);
    assert_eq!(cqe64_offset(5, 4, 64), 64);
    assert_eq!(cqe64_offset(0, 4, 128), 64);
    assert_eq!(cqe64_offset(7, 4, 128), 3 * 128 + 64);
    // Bad sizes do not panic.
    let _ = cqe64_offset(u32::MAX, 0, 0);
    let _ = cqe64_offset(u32::MAX, u32::MAX, usize::MAX);
}

#[test]
fn enums_keep_unknown_values() {
    for v in 0..16u8 {
        assert_eq!(u8::from(CqeOpcode::from(v)), v);
    }
    for v in 0..=255u8 {
        assert_eq!(u8::from(Syndrome::from(v)), v);
    }
    assert_eq!(CqeOpcode::from(7), CqeOpcode::Unknown(7));
    assert_eq!(Syndrome::from(0x99), Syndrome::Unknown(0x99));
}

#[test]
fn consumer_index_runs_several_laps_and_past_u32() {
    for cqe_size in [64usize, 128] {
        let cnt = 4u32;
        let mut cq = vec![0u8; cnt as usize * cqe_size];
        for i in 0..cnt {
            let o = cqe64_offset(i, cnt, cqe_size);
            cq[o + 63] = MLX5_CQE_INVALID_OP_OWN;
        }
        for start in [0u32, u32::MAX - 9] {
            for k in 0..6 * cnt {
                let p = start.wrapping_add(k);
                let o = cqe64_offset(p, cnt, cqe_size);
                // Before the device writes index p, the slot holds INVALID (first lap)
                // or the CQE of p - cnt, whose owner bit has the other parity.
                assert!(
                    !cqe_sw_owned(cq[o + 63], p, cnt),
                    "size {cqe_size} p {p:#x}"
                );
                let r = CqeRepr {
                    owner: cqe_owner_for(p, cnt),
                    wqe_counter: p as u16,
                    qpn: 5,
                    ..CqeRepr::default()
                };
                r.emit(&mut Cqe64::new_unchecked(&mut cq[o..o + 64]))
                    .unwrap();
                assert!(cqe_sw_owned(cq[o + 63], p, cnt), "size {cqe_size} p {p:#x}");
                let back = CqeRepr::parse(&Cqe64::new_unchecked(&cq[o..o + 64])).unwrap();
                assert_eq!(back.wqe_counter, p as u16);
                // The first half of a 128-byte slot is never touched by emit.
                if cqe_size == 128 {
                    assert!(cq[o - 64..o].iter().all(|&b| b == 0));
                }
            }
            // Reset between the two runs: a fresh CQ is all INVALID.
            for i in 0..cnt {
                let o = cqe64_offset(i, cnt, cqe_size);
                cq[o..o + 64].fill(0);
                cq[o + 63] = MLX5_CQE_INVALID_OP_OWN;
            }
        }
    }
}

/// `emit` (through `to_words`) writes what the field setters write, field for field, for
/// every field set to distinct bytes, on both layouts.
#[test]
fn emitted_words_match_the_field_setters() {
    let ok = CqeRepr {
        opcode: CqeOpcode::RespWrImm,
        owner: true,
        se: true,
        format: 3,
        s_wqe_opcode: 0x81,
        qpn: 0x82_8384,
        wqe_counter: 0x8586,
        signature: 0x87,
        byte_cnt: 0x8889_8a8b,
        imm_inval_pkey: 0x8c8d_8e8f,
        srqn: 0x9091_9293,
        src_qp: 0x94_9596,
        flags: 0x97,
        slid: 0x9899,
        ml_path: 0x9a,
        timestamp: 0x9b9c_9d9e_9fa0_a1a2,
        ..CqeRepr::default()
    };
    let err = CqeRepr {
        opcode: CqeOpcode::RespErr,
        syndrome: Syndrome::RemOp,
        vendor_syndrome: 0xa3,
        ..ok
    };
    for r in [ok, err] {
        let mut want = [0u8; 64];
        if r.opcode.is_error() {
            let mut e = ErrCqe::new_unchecked(&mut want[..]);
            e.set_srqn(r.srqn);
            e.set_vendor_err_synd(r.vendor_syndrome);
            e.set_syndrome(r.syndrome);
        } else {
            let mut c = Cqe64::new_unchecked(&mut want[..]);
            c.set_ml_path(r.ml_path);
            c.set_slid(r.slid);
            c.set_flags_rqpn(r.flags, r.src_qp);
            c.set_srqn_uidx(r.srqn);
            c.set_imm_inval_pkey(r.imm_inval_pkey);
            c.set_byte_cnt(r.byte_cnt);
            c.set_timestamp(r.timestamp);
        }
        let mut c = Cqe64::new_unchecked(&mut want[..]);
        c.set_sop_qpn(r.s_wqe_opcode, r.qpn);
        c.set_wqe_counter(r.wqe_counter);
        c.set_signature(r.signature);
        c.set_op_own(r.opcode, r.format, r.se, r.owner);
        let mut buf = [0x5au8; 64];
        r.emit(&mut Cqe64::new_unchecked(&mut buf[..])).unwrap();
        assert_eq!(buf, want, "{r:?}");
        let words: Vec<u8> = r.to_words().iter().flat_map(|w| w.to_le_bytes()).collect();
        assert_eq!(words[..], want[..]);
    }
}
