use super::*;

#[test]
fn ctrl_fields_land_where_the_header_puts_them() {
    let mut b = [0xa5u8; 16];
    let mut c = CtrlSeg::new_checked(&mut b[..]).unwrap();
    c.set_opmod_idx_opcode(0x01, 0xfffe, Opcode::RdmaWriteImm);
    c.set_qpn_ds(0x12_3456, 3);
    c.set_signature(0);
    c.set_dci_stream_channel_id(0);
    c.set_fm_ce_se(fm_ce_se::of(fm_ce_se::FLAG_SIGNALED | fm_ce_se::FLAG_FENCE));
    c.set_imm(0xdead_beef);
    assert_eq!(
        b,
        [0x01, 0xff, 0xfe, 0x09, 0x12, 0x34, 0x56, 0x03, 0, 0, 0, 0x88, 0xde, 0xad, 0xbe, 0xef]
    );
    let c = CtrlSeg::new_checked(&b[..]).unwrap();
    assert_eq!(c.opmod(), 1);
    assert_eq!(c.wqe_idx(), 0xfffe);
    assert_eq!(c.opcode(), Opcode::RdmaWriteImm);
    assert_eq!(c.qpn(), 0x12_3456);
    assert_eq!(c.ds(), 3);
    assert_eq!(c.fm_ce_se(), 0x88);
    assert_eq!(c.imm(), 0xdead_beef);
}

#[test]
fn short_buffers_are_refused() {
    assert_eq!(
        CtrlSeg::new_checked(&[0u8; 15][..]).unwrap_err(),
        Truncated {
            needed: 16,
            got: 15
        }
    );
    assert!(DatagramSeg::new_checked(&[0u8; 47][..]).is_err());
    assert!(DatagramSeg::new_checked(&[0u8; 48][..]).is_ok());
    assert!(InlineSeg::new_checked(&[0u8; 4][..]).is_ok());
}

#[test]
fn raddr_data_atomic_write_every_byte() {
    let mut b = [0xa5u8; 16];
    RaddrSeg::new_unchecked(&mut b).set(0x0102_0304_0506_0708, 0x1122_3344);
    assert_eq!(
        b,
        [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 0]
    );
    let mut b = [0xa5u8; 16];
    DataSeg::new_unchecked(&mut b).set(0x40, 0xabcd, 0x1000_2000_3000_4000);
    assert_eq!(
        b,
        [0, 0, 0, 0x40, 0, 0, 0xab, 0xcd, 0x10, 0, 0x20, 0, 0x30, 0, 0x40, 0]
    );
    let mut b = [0xa5u8; 16];
    DataSeg::new_unchecked(&mut b).set_terminator();
    assert!(DataSeg::new_unchecked(&b).is_terminator());
    assert_eq!(b, [0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let mut b = [0xa5u8; 16];
    AtomicSeg::new_unchecked(&mut b).set(7, 0x0100_0000_0000_0002);
    assert_eq!(b, [0, 0, 0, 0, 0, 0, 0, 7, 1, 0, 0, 0, 0, 0, 0, 2]);
    let a = AtomicSeg::new_unchecked(&b);
    assert_eq!((a.swap_add(), a.compare()), (7, 0x0100_0000_0000_0002));
}

#[test]
fn av_offsets() {
    let mut b = [0xa5u8; 48];
    let mut av = DatagramSeg::new_unchecked(&mut b);
    av.set_qkey(0x1111_2222);
    av.set_dqp_dct(0xab_cdef, true);
    av.set_stat_rate_sl(0x33);
    av.set_fl_mlid(0x44);
    av.set_rlid(0x5566);
    av.clear_reserved();
    av.set_rmac([1, 2, 3, 4, 5, 6]);
    av.set_tclass(0x77);
    av.set_hop_limit(0x88);
    av.set_grh_gid_fl(0x9900_aabb);
    av.set_rgid([0xc0; 16]);
    let mut want = [0u8; 48];
    want[0..4].copy_from_slice(&[0x11, 0x11, 0x22, 0x22]);
    want[8..12].copy_from_slice(&[0x80, 0xab, 0xcd, 0xef]);
    want[12] = 0x33;
    want[13] = 0x44;
    want[14..16].copy_from_slice(&[0x55, 0x66]);
    want[20..26].copy_from_slice(&[1, 2, 3, 4, 5, 6]);
    want[26] = 0x77;
    want[27] = 0x88;
    want[28..32].copy_from_slice(&[0x99, 0x00, 0xaa, 0xbb]);
    want[32..48].fill(0xc0);
    assert_eq!(b, want);
    let av = DatagramSeg::new_unchecked(&b);
    assert_eq!(av.qkey(), 0x1111_2222);
    assert_eq!(av.dqpn(), 0xab_cdef);
    assert!(av.extended());
    assert_eq!(av.rlid(), 0x5566);
    assert_eq!(av.rmac(), [1, 2, 3, 4, 5, 6]);
    assert_eq!(av.grh_gid_fl(), 0x9900_aabb);
}

#[test]
fn inline_header_and_units() {
    let mut b = [0xa5u8; 4];
    InlineSeg::new_unchecked(&mut b).set_len(13);
    assert_eq!(b, [0x80, 0, 0, 13]);
    let s = InlineSeg::new_unchecked(&b);
    assert!(s.is_inline());
    assert_eq!(s.len(), 13);
    assert_eq!(s.units(), 2);
    for (len, units) in [(0, 1), (1, 1), (12, 1), (13, 2), (28, 2), (29, 3), (44, 3)] {
        assert_eq!(inline_units(len), units, "len {len}");
    }
}

#[test]
fn srq_next_seg() {
    let mut b = [0xa5u8; 16];
    SrqNextSeg::new_unchecked(&mut b).set(0x1234, 0);
    assert_eq!(b, [0, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert_eq!(SrqNextSeg::new_unchecked(&b).next_wqe_index(), 0x1234);
}

#[test]
fn fm_ce_se_of_each_flag_set() {
    use fm_ce_se::{of, FLAG_FENCE as F, FLAG_SIGNALED as S, FLAG_SOLICITED as E};
    assert_eq!(of(0), 0);
    assert_eq!(of(S), 0x08);
    assert_eq!(of(F), 0x80);
    assert_eq!(of(E), 0x02);
    assert_eq!(of(S | F | E), 0x8a);
    assert_eq!(of(0xf8 | S), 0x08, "bits outside the set are ignored");
}

#[test]
fn opcodes_round_trip_and_keep_unknown() {
    for v in 0..=255u8 {
        assert_eq!(u8::from(Opcode::from(v)), v);
    }
    assert_eq!(Opcode::from(0x0a), Opcode::Send);
    assert_eq!(Opcode::from(0x0e), Opcode::Unknown(0x0e));
}
