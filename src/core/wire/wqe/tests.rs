//! Tests of the whole-WQE encoders and parsers.

use super::super::{fm_ce_se, DatagramSeg, MLX5_INVALID_LKEY};
use super::*;

const RING: usize = 4 * MLX5_SEND_WQE_BB;

fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
    Sge { addr, length, lkey }
}

#[test]
fn inline_write_of_8_bytes_writes_three_units() {
    let mut ring = vec![0xa5u8; RING];
    let data = [1, 2, 3, 4, 5, 6, 7, 8];
    let wqe = SendWqe {
        fm_ce_se: fm_ce_se::of(fm_ce_se::FLAG_SIGNALED),
        raddr: Some((0x1122_3344_5566_7788, 0xaabb_ccdd)),
        data: Payload::Inline(&data),
        ..SendWqe::new(Opcode::RdmaWrite, 1, 0x00_0abc)
    };
    let size = emit_send_wqe(&mut ring, &wqe).unwrap();
    assert_eq!(size, WqeSize { ds: 3, wqebbs: 1 });
    #[rustfmt::skip]
        let want: [u8; 48] = [
            0x00, 0x00, 0x01, 0x08, 0x00, 0x0a, 0xbc, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 0,
            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0xaa, 0xbb, 0xcc, 0xdd, 0, 0, 0, 0,
            0x80, 0, 0, 8, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0,
        ];
    assert_eq!(&ring[64..112], &want[..]);
    assert!(ring[..64].iter().chain(&ring[112..]).all(|&b| b == 0xa5));
    let p = parse_send_wqe(&ring, 1, false).unwrap();
    assert_eq!(
        (p.opcode, p.ds, p.wqebbs, p.qpn),
        (Opcode::RdmaWrite, 3, 1, 0xabc)
    );
    assert_eq!(p.raddr, Some((0x1122_3344_5566_7788, 0xaabb_ccdd)));
    let items: Vec<_> = p.data_segs().collect();
    assert_eq!(items.len(), 1);
    match items[0] {
        DataItem::Inline(d) => assert_eq!((d.first, d.second), (&data[..], &[][..])),
        other => panic!("{other:?}"),
    }
}

#[test]
fn wqe_past_the_ring_end_continues_at_the_start() {
    let mut ring = vec![0xa5u8; RING];
    let sges: Vec<Sge> = (0..5)
        .map(|i| sge(0x1000 * i + 1, 100 + i as u32, 7))
        .collect();
    // 0xffff & 3 = slot 3, the last one; ds = 1 + 5 = 6 units = 2 WQEBBs.
    let wqe = SendWqe {
        data: Payload::Sges(&sges),
        ..SendWqe::new(Opcode::Send, 0xffff, 5)
    };
    let size = emit_send_wqe(&mut ring, &wqe).unwrap();
    assert_eq!(size, WqeSize { ds: 6, wqebbs: 2 });
    // ctrl + 3 SGEs fill slot 3, the last 2 SGEs are units 0 and 1 of slot 0.
    assert_eq!(&ring[192..196], &[0x00, 0xff, 0xff, 0x0a]);
    let d3 = DataSeg::new_unchecked(&ring[240..256]);
    assert_eq!((d3.byte_count(), d3.addr()), (102, 0x2001));
    let d4 = DataSeg::new_unchecked(&ring[0..16]);
    assert_eq!((d4.byte_count(), d4.addr()), (103, 0x3001));
    let d5 = DataSeg::new_unchecked(&ring[16..32]);
    assert_eq!((d5.byte_count(), d5.lkey(), d5.addr()), (104, 7, 0x4001));
    assert!(ring[32..192].iter().all(|&b| b == 0xa5));
    let p = parse_send_wqe(&ring, 0xffff, false).unwrap();
    let back: Vec<Sge> = p
        .data_segs()
        .map(|d| match d {
            DataItem::Sge(s) => s,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(back, sges);
    assert_eq!(p.num_data, 5);
    assert_eq!(p.data_len, 100 + 101 + 102 + 103 + 104);
}

#[test]
fn inline_data_that_wraps_reads_back_in_two_pieces() {
    let mut ring = vec![0xa5u8; RING];
    let data: Vec<u8> = (0..44).collect();
    let wqe = SendWqe {
        raddr: Some((1, 2)),
        data: Payload::Inline(&data),
        ..SendWqe::new(Opcode::RdmaWrite, 7, 1)
    };
    // ctrl, raddr, inline 48 bytes = 3 units: 5 units, 2 WQEBBs, from slot 3.
    assert_eq!(
        emit_send_wqe(&mut ring, &wqe).unwrap(),
        WqeSize { ds: 5, wqebbs: 2 }
    );
    assert_eq!(&ring[224..228], &[0x80, 0, 0, 44]);
    assert_eq!(&ring[228..256], &data[..28]);
    assert_eq!(&ring[0..16], &data[28..44]);
    assert!(ring[16..192].iter().all(|&b| b == 0xa5));
    let p = parse_send_wqe(&ring, 3, false).unwrap();
    let Some(DataItem::Inline(d)) = p.data_segs().next() else {
        panic!("no inline");
    };
    assert_eq!(d.first, &data[..28]);
    assert_eq!(d.second, &data[28..]);
    let mut out = [0u8; 64];
    assert_eq!(d.copy_to(&mut out), 44);
    assert_eq!(&out[..44], &data[..]);
}

#[test]
fn inline_padding_is_zeroed_and_empty_inline_has_no_segment() {
    let mut ring = vec![0xa5u8; RING];
    let wqe = SendWqe {
        data: Payload::Inline(&[0xee; 13]),
        ..SendWqe::new(Opcode::Send, 0, 1)
    };
    assert_eq!(emit_send_wqe(&mut ring, &wqe).unwrap().ds, 3);
    assert_eq!(&ring[16..20], &[0x80, 0, 0, 13]);
    assert!(ring[20..33].iter().all(|&b| b == 0xee));
    assert!(ring[33..48].iter().all(|&b| b == 0));
    assert!(ring[48..].iter().all(|&b| b == 0xa5));
    let wqe = SendWqe {
        raddr: Some((1, 2)),
        data: Payload::Inline(&[]),
        ..SendWqe::new(Opcode::RdmaWrite, 1, 1)
    };
    assert_eq!(emit_send_wqe(&mut ring, &wqe).unwrap().ds, 2);
    assert!(ring[96..128].iter().all(|&b| b == 0xa5));
    assert_eq!(parse_send_wqe(&ring, 1, false).unwrap().num_data, 0);
}

#[test]
fn atomics_take_four_units() {
    let mut ring = vec![0xa5u8; RING];
    let old = [sge(0x8000, 8, 0x44)];
    let wqe = SendWqe {
        raddr: Some((0x10, 0x20)),
        atomic: Some((5, 6)),
        data: Payload::Sges(&old),
        ..SendWqe::new(Opcode::AtomicCs, 2, 9)
    };
    assert_eq!(
        emit_send_wqe(&mut ring, &wqe).unwrap(),
        WqeSize { ds: 4, wqebbs: 1 }
    );
    assert_eq!(
        &ring[128 + 32..128 + 48],
        &[0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 6]
    );
    let p = parse_send_wqe(&ring, 2, false).unwrap();
    assert_eq!(p.atomic, Some((5, 6)));
    assert_eq!(p.data_segs().next(), Some(DataItem::Sge(old[0])));
    // Wrong SGEs and inline are refused.
    let bad = SendWqe {
        data: Payload::Sges(&[sge(1, 4, 1)]),
        ..wqe
    };
    assert_eq!(emit_send_wqe(&mut ring, &bad), Err(WqeError::BadAtomicSge));
    let bad = SendWqe {
        data: Payload::Inline(&[0; 8]),
        ..wqe
    };
    assert!(matches!(
        emit_send_wqe(&mut ring, &bad),
        Err(WqeError::InlineNotAllowed { .. })
    ));
}

#[test]
fn ud_send_carries_the_address_vector() {
    let mut av = [0u8; MLX5_AV_LEN];
    let mut v = DatagramSeg::new_unchecked(&mut av);
    v.set_qkey(0x1111_1111);
    v.set_dqp_dct(0x42, true);
    v.set_rgid([9; 16]);
    let mut ring = vec![0xa5u8; RING];
    let s = [sge(0x100, 64, 3)];
    // The handle's vector says another destination: the WQE carries the request's.
    let mut handle = av;
    DatagramSeg::new_unchecked(&mut handle).set_dqp_dct(0x99, true);
    handle[..4].copy_from_slice(&[7; 4]);
    let wqe = SendWqe {
        ud: Some(UdAv {
            av: &handle,
            qkey: 0x1111_1111,
            dqpn: 0x42,
        }),
        data: Payload::Sges(&s),
        ..SendWqe::new(Opcode::Send, 0, 0x77)
    };
    assert_eq!(
        emit_send_wqe(&mut ring, &wqe).unwrap(),
        WqeSize { ds: 5, wqebbs: 2 }
    );
    assert_eq!(&ring[16..64], &av[..]);
    let p = parse_send_wqe(&ring, 0, true).unwrap();
    let seg = p.av_seg().unwrap();
    assert_eq!(
        (seg.qkey(), seg.dqpn(), seg.extended()),
        (0x1111_1111, 0x42, true)
    );
    assert_eq!(p.data_segs().next(), Some(DataItem::Sge(s[0])));
    // A NOP on a UD QP is a bare ctrl segment.
    let nop = SendWqe::new(Opcode::Nop, 2, 0x77);
    assert_eq!(emit_send_wqe(&mut ring, &nop).unwrap().ds, 1);
    let p = parse_send_wqe(&ring, 2, true).unwrap();
    assert_eq!((p.opcode, p.ds, p.av), (Opcode::Nop, 1, None));
    // A WRITE with an AV is refused.
    let bad = SendWqe {
        opcode: Opcode::RdmaWrite,
        raddr: Some((0, 0)),
        ..wqe
    };
    assert!(emit_send_wqe(&mut ring, &bad).is_err());
}

#[test]
fn zero_length_sges_are_skipped() {
    let mut ring = vec![0xa5u8; RING];
    let s = [sge(1, 0, 1), sge(2, 10, 2), sge(3, 0, 3)];
    let wqe = SendWqe {
        data: Payload::Sges(&s),
        ..SendWqe::new(Opcode::Send, 0, 1)
    };
    assert_eq!(emit_send_wqe(&mut ring, &wqe).unwrap().ds, 2);
    assert_eq!(DataSeg::new_unchecked(&ring[16..32]).addr(), 2);
}

#[test]
fn encoder_errors_write_nothing() {
    let mut ring = vec![0xa5u8; RING];
    let w = SendWqe::new(Opcode::RdmaWrite, 0, 1);
    assert_eq!(
        emit_send_wqe(&mut ring, &w),
        Err(WqeError::SegmentsMismatch {
            opcode: Opcode::RdmaWrite
        })
    );
    let w = SendWqe::new(Opcode::Unknown(0x33), 0, 1);
    assert_eq!(
        emit_send_wqe(&mut ring, &w),
        Err(WqeError::UnknownOpcode(0x33))
    );
    let big = [0u8; 1024];
    let w = SendWqe {
        data: Payload::Inline(&big),
        ..SendWqe::new(Opcode::Send, 0, 1)
    };
    assert!(matches!(
        emit_send_wqe(&mut ring, &w),
        Err(WqeError::TooLarge { .. })
    ));
    // 220 inline bytes = 14 units + ctrl + raddr: 16 units, 4 WQEBBs: fits 4, not 2.
    let inl = [1u8; 220];
    let w = SendWqe {
        raddr: Some((0, 0)),
        data: Payload::Inline(&inl),
        ..SendWqe::new(Opcode::RdmaWrite, 0, 1)
    };
    assert_eq!(wqe_size(&w), Ok(WqeSize { ds: 16, wqebbs: 4 }));
    let mut small = vec![0xa5u8; 2 * MLX5_SEND_WQE_BB];
    assert_eq!(
        emit_send_wqe(&mut small, &w),
        Err(WqeError::DoesNotFitRing {
            wqebbs: 4,
            wqe_cnt: 2
        })
    );
    assert!(ring.iter().chain(&small).all(|&b| b == 0xa5));
    for len in [0, 32, 100, 192] {
        let mut r = vec![0u8; len];
        assert_eq!(
            emit_send_wqe(&mut r, &SendWqe::new(Opcode::Nop, 0, 0)),
            Err(WqeError::BadRing { len })
        );
        assert!(parse_send_wqe(&r, 0, false).is_err());
    }
}

fn ctrl(ring: &mut [u8], slot: usize, op: u8, idx: u16, ds: u8) {
    let mut c = CtrlSeg::new_unchecked(&mut ring[slot * 64..slot * 64 + 16]);
    c.set_opmod_idx_opcode(0, idx, Opcode::from(op));
    c.set_qpn_ds(1, ds);
}

#[test]
fn parser_errors() {
    let mut ring = vec![0u8; RING];
    ctrl(&mut ring, 0, 0x0a, 0, 0);
    assert_eq!(
        parse_send_wqe(&ring, 0, false).unwrap_err(),
        WqeError::ZeroDs
    );
    ctrl(&mut ring, 0, 0x0a, 0, 64);
    assert_eq!(
        parse_send_wqe(&ring, 0, false).unwrap_err(),
        WqeError::TooLarge { ds: 64 }
    );
    ctrl(&mut ring, 0, 0x0a, 0, 17);
    assert!(matches!(
        parse_send_wqe(&ring, 0, false),
        Err(WqeError::DoesNotFitRing { .. })
    ));
    ctrl(&mut ring, 0, 0x33, 0, 1);
    assert_eq!(
        parse_send_wqe(&ring, 0, false).unwrap_err(),
        WqeError::UnknownOpcode(0x33)
    );
    ctrl(&mut ring, 0, 0x0a, 1, 1);
    assert_eq!(
        parse_send_wqe(&ring, 4, false).unwrap_err(),
        WqeError::IndexMismatch {
            wqe_idx: 1,
            slot: 0
        }
    );
    ctrl(&mut ring, 0, 0x08, 0, 1);
    assert_eq!(
        parse_send_wqe(&ring, 0, false).unwrap_err(),
        WqeError::DsTooSmall { ds: 1, needed: 2 }
    );
    ctrl(&mut ring, 0, 0x12, 0, 3);
    assert!(parse_send_wqe(&ring, 0, false).is_err());
    ctrl(&mut ring, 0, 0x12, 0, 5);
    assert_eq!(
        parse_send_wqe(&ring, 0, false).unwrap_err(),
        WqeError::SegmentsMismatch {
            opcode: Opcode::AtomicFa
        }
    );
    ctrl(&mut ring, 0, 0x08, 0, 2);
    assert_eq!(
        parse_send_wqe(&ring, 0, true).unwrap_err(),
        WqeError::SegmentsMismatch {
            opcode: Opcode::RdmaWrite
        }
    );
    // Inline of 13 bytes needs 2 units; ds gives it 1.
    ctrl(&mut ring, 0, 0x0a, 0, 2);
    InlineSeg::new_unchecked(&mut ring[16..20]).set_len(13);
    assert_eq!(
        parse_send_wqe(&ring, 0, false).unwrap_err(),
        WqeError::BadInlineLength {
            len: 13,
            units_left: 1
        }
    );
    ctrl(&mut ring, 0, 0x10, 0, 3);
    InlineSeg::new_unchecked(&mut ring[32..36]).set_len(4);
    assert!(matches!(
        parse_send_wqe(&ring, 0, false),
        Err(WqeError::InlineNotAllowed { .. })
    ));
}

#[test]
fn recv_wqe_ends_with_the_terminator() {
    let mut slot = vec![0xa5u8; 4 * MLX5_WQE_DS_UNITS];
    let s = [sge(0x10, 100, 1), sge(0x20, 0, 2), sge(0x30, 300, 3)];
    assert_eq!(emit_recv_wqe(&mut slot, &s, 4), Ok(2));
    assert_eq!(DataSeg::new_unchecked(&slot[16..32]).addr(), 0x30);
    let t = DataSeg::new_unchecked(&slot[32..48]);
    assert!(t.is_terminator());
    assert_eq!(t.lkey(), MLX5_INVALID_LKEY);
    assert_eq!(
        &slot[32..48],
        &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert!(slot[48..].iter().all(|&b| b == 0xa5));
    let back: Vec<Sge> = parse_recv_wqe(&slot, 4).unwrap().collect();
    assert_eq!(back, vec![s[0], s[2]]);
    // Exactly max SGEs: no terminator.
    let mut slot = vec![0xa5u8; 2 * MLX5_WQE_DS_UNITS];
    assert_eq!(emit_recv_wqe(&mut slot, &[s[0], s[2]], 2), Ok(2));
    assert_eq!(parse_recv_wqe(&slot, 2).unwrap().count(), 2);
    assert_eq!(
        emit_recv_wqe(&mut slot, &s, 1),
        Err(WqeError::TooManySges { n: 2, max: 1 })
    );
    assert_eq!(
        emit_recv_wqe(&mut slot, &s, 3),
        Err(WqeError::SlotTooSmall {
            len: 32,
            needed: 48
        })
    );
    // Zero SGEs: just the terminator.
    assert_eq!(emit_recv_wqe(&mut slot, &[], 2), Ok(0));
    assert_eq!(parse_recv_wqe(&slot, 2).unwrap().count(), 0);
}

#[test]
fn srq_wqe_has_the_next_segment_first() {
    let mut slot = vec![0xa5u8; 3 * MLX5_WQE_DS_UNITS];
    assert_eq!(emit_srq_wqe(&mut slot, 0x0102, &[sge(5, 6, 7)], 2), Ok(1));
    assert_eq!(
        &slot[..16],
        &[0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert!(DataSeg::new_unchecked(&slot[32..48]).is_terminator());
    let (next, sges) = parse_srq_wqe(&slot, 2).unwrap();
    assert_eq!(next, 0x0102);
    assert_eq!(sges.collect::<Vec<_>>(), vec![sge(5, 6, 7)]);
    assert_eq!(
        emit_srq_wqe(&mut slot, 0, &[], 3),
        Err(WqeError::SlotTooSmall {
            len: 48,
            needed: 64
        })
    );
    assert_eq!(
        emit_srq_wqe(&mut slot[..8], 0, &[], 0),
        Err(WqeError::SlotTooSmall { len: 8, needed: 16 })
    );
    assert!(parse_srq_wqe(&slot[..8], 0).is_err());
}

/// xorshift64: a deterministic generator for the randomised tests below.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn wqe_index_runs_past_0xffff() {
    // A free-running u32 producer index crosses the 16-bit wqe_idx wrap; slots and the
    // ctrl's wqe_idx follow it, WQEs of 1 and 2 WQEBBs alternate.
    let mut ring = vec![0xa5u8; 8 * MLX5_SEND_WQE_BB];
    let sges: Vec<Sge> = (0..5).map(|i| sge(i, 1, 1)).collect();
    let mut pi: u32 = 0xfff0;
    while pi < 0x1_0010 {
        let n = if pi % 3 == 0 { 5 } else { 1 };
        let wqe = SendWqe {
            data: Payload::Sges(&sges[..n]),
            ..SendWqe::new(Opcode::Send, pi as u16, 9)
        };
        let size = emit_send_wqe(&mut ring, &wqe).unwrap();
        let p = parse_send_wqe(&ring, pi, false).unwrap();
        assert_eq!(p.wqe_idx, pi as u16);
        assert_eq!(p.num_data, n);
        let slot = (pi & 7) as usize * MLX5_SEND_WQE_BB;
        assert_eq!(
            CtrlSeg::new_unchecked(&ring[slot..slot + 16]).wqe_idx(),
            pi as u16
        );
        pi += u32::from(size.wqebbs);
    }
}

#[test]
fn random_wqes_round_trip_and_touch_only_their_units() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let ops = [
        Opcode::Nop,
        Opcode::RdmaWrite,
        Opcode::RdmaWriteImm,
        Opcode::Send,
        Opcode::SendImm,
        Opcode::RdmaRead,
        Opcode::AtomicCs,
        Opcode::AtomicFa,
    ];
    let payload: Vec<u8> = (0..1024).map(|i| (i * 7 + 3) as u8).collect();
    let mut av = [0u8; MLX5_AV_LEN];
    for (i, b) in av.iter_mut().enumerate() {
        *b = i as u8 ^ 0x5a;
    }
    for _ in 0..2000 {
        let wqe_cnt = 1usize << rng.below(5);
        let ring_len = wqe_cnt * MLX5_SEND_WQE_BB;
        let op = ops[rng.below(ops.len() as u64) as usize];
        let ud = matches!(op, Opcode::Send | Opcode::SendImm) && rng.below(4) == 0;
        let sges: Vec<Sge> = (0..rng.below(8))
            .map(|i| sge(rng.next(), rng.below(3) as u32 * 100, i as u32))
            .collect();
        let atomic_sge = [sge(rng.next(), 8, 1)];
        let inline_ok = !matches!(op, Opcode::RdmaRead | Opcode::AtomicCs | Opcode::AtomicFa);
        let data = if op == Opcode::Nop {
            Payload::Sges(&[])
        } else if op.is_atomic() {
            Payload::Sges(&atomic_sge)
        } else if inline_ok && rng.below(2) == 0 {
            Payload::Inline(&payload[..rng.below(250) as usize])
        } else {
            Payload::Sges(&sges)
        };
        let wqe = SendWqe {
            opcode: op,
            opmod: 0,
            wqe_idx: rng.next() as u16,
            qpn: rng.next() as u32 & 0xff_ffff,
            fm_ce_se: rng.next() as u8,
            imm: rng.next() as u32,
            raddr: op.has_raddr().then(|| (rng.next(), rng.next() as u32)),
            atomic: op.is_atomic().then(|| (rng.next(), rng.next())),
            ud: ud.then_some(UdAv {
                av: &av,
                qkey: rng.next() as u32,
                dqpn: rng.next() as u32 & 0xff_ffff,
            }),
            data,
        };
        let mut ring = vec![0xa5u8; ring_len];
        let size = match emit_send_wqe(&mut ring, &wqe) {
            Ok(size) => size,
            Err(WqeError::DoesNotFitRing { .. }) => {
                assert!(ring.iter().all(|&b| b == 0xa5));
                continue;
            }
            Err(e) => panic!("{e}: {wqe:?}"),
        };
        assert_eq!(wqe_size(&wqe), Ok(size));
        // Exactly the ds units starting at the slot were written, wrapping.
        let start = (usize::from(wqe.wqe_idx) & (wqe_cnt - 1)) * MLX5_SEND_WQE_BB;
        let mut written = vec![false; ring_len];
        for u in 0..usize::from(size.ds) {
            let o = (start + u * MLX5_WQE_DS_UNITS) % ring_len;
            written[o..o + MLX5_WQE_DS_UNITS].fill(true);
        }
        for (i, &b) in ring.iter().enumerate() {
            if !written[i] {
                assert_eq!(b, 0xa5, "byte {i} outside the WQE: {wqe:?}");
            }
        }
        let p = parse_send_wqe(&ring, u32::from(wqe.wqe_idx), ud).unwrap();
        assert_eq!(
            (p.opcode, p.wqe_idx, p.qpn, p.fm_ce_se, p.imm),
            (op, wqe.wqe_idx, wqe.qpn, wqe.fm_ce_se, wqe.imm)
        );
        assert_eq!((p.ds, p.wqebbs), (size.ds, size.wqebbs));
        assert_eq!((p.raddr, p.atomic), (wqe.raddr, wqe.atomic));
        assert_eq!(p.av.is_some(), ud);
        if let (Some(seg), Some(u)) = (p.av_seg(), wqe.ud) {
            assert_eq!(
                (seg.qkey(), seg.dqpn(), seg.extended()),
                (u.qkey, u.dqpn, true)
            );
        }
        match data {
            Payload::Inline(b) => {
                let got: Vec<u8> = p
                    .data_segs()
                    .flat_map(|d| match d {
                        DataItem::Inline(i) => i.bytes().collect::<Vec<u8>>(),
                        DataItem::Sge(s) => panic!("{s:?}"),
                    })
                    .collect();
                assert_eq!(got, b);
            }
            Payload::Sges(s) => {
                let want: Vec<DataItem> = s
                    .iter()
                    .filter(|s| s.length != 0)
                    .map(|s| DataItem::Sge(*s))
                    .collect();
                assert_eq!(p.data_segs().collect::<Vec<_>>(), want);
            }
        }
    }
}

#[test]
fn garbage_rings_never_panic_the_parsers() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut parsed = 0;
    for round in 0..3000 {
        let wqe_cnt = 1usize << rng.below(4);
        let mut ring: Vec<u8> = (0..wqe_cnt * MLX5_SEND_WQE_BB)
            .map(|_| rng.next() as u8)
            .collect();
        let slot = rng.below(wqe_cnt as u64) as usize;
        let c = &mut ring[slot * MLX5_SEND_WQE_BB..slot * MLX5_SEND_WQE_BB + MLX5_WQE_DS_UNITS];
        // Make about half of the ctrl segments plausible so the data walk is reached.
        if round % 2 == 0 {
            c[1..3].copy_from_slice(&(slot as u16).to_be_bytes());
            c[3] = [0x00, 0x08, 0x09, 0x0a, 0x0b, 0x10, 0x11, 0x12][round % 8];
            c[7] = rng.below(4 * wqe_cnt as u64 + 1) as u8;
        }
        if let Ok(p) = parse_send_wqe(&ring, slot as u32, round % 3 == 0) {
            parsed += 1;
            let mut total = 0u64;
            for d in p.data_segs() {
                total += match d {
                    DataItem::Sge(s) => u64::from(s.length),
                    DataItem::Inline(i) => i.len() as u64,
                };
            }
            assert_eq!(total, p.data_len);
        }
        let max_sge = rng.below(6) as usize;
        let _ = parse_recv_wqe(&ring, max_sge).map(|it| it.count());
        let _ = parse_srq_wqe(&ring[..rng.below(ring.len() as u64) as usize], max_sge)
            .map(|(_, it)| it.count());
    }
    // The walk over data segments was exercised, not only the early refusals.
    assert!(parsed > 100, "only {parsed} rings parsed");
}
