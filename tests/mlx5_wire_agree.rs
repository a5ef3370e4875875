//! The mlx5 send queue writes WQEs straight into the ring (no intermediate encoder, for
//! speed). This test holds it to the `wire` encoder (itself checked against golden bytes
//! from rdma-core's headers): for a deterministic spread of requests, both write the same
//! bytes into identical rings, wrap-around included, and the receive/SRQ WQEs parse back.

use rdma_direct_rig as plain;

use plain::{Plain, PlainCq, PlainQp, PlainSrq, Rng};
use rdma_direct::providers::mlx5::{send_wqe, AddressVector};
use rdma_direct::providers::mlx5::{Mlx5Cq, Mlx5Qp, Mlx5Srq};
use rdma_direct::providers::{
    Completion, CompletionQueue, Payload, QpCaps, QpConfig, QpState, QpType, QueuePair, RecvQueue,
    RecvWr, SendFlags, SendOp, SendQueue, SendWr, Sge, UdDest,
};
use rdma_direct::wire::{self, Opcode, SendWqe};

const QPN: u32 = 0x0012_3456;
const WQE_CNT: u32 = 16;

/// A tiny deterministic generator (xorshift).
fn caps() -> QpCaps {
    QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 4,
        max_recv_sge: 3,
        max_inline_data: 180,
    }
}

fn rig(qp_type: QpType) -> (Mlx5Qp<Plain>, Mlx5Cq<Plain>, PlainQp, PlainCq) {
    let dev = PlainQp::new(QPN, WQE_CNT, 8, 64, 0);
    dev.mem.fill(0, WQE_CNT as usize * 64, 0xa5);
    let dcq = PlainCq::new(1, 64, 64);
    // SAFETY: plain memory kept alive by the owners; used by these objects only.
    let mut cq = unsafe { Mlx5Cq::<Plain>::from_dv(dcq.dv, dcq.owner()) }.unwrap();
    let cfg = QpConfig::new(qp_type);
    // SAFETY: as above.
    let mut qp =
        unsafe { Mlx5Qp::<Plain>::from_dv(dev.dv, &cfg, caps(), &mut cq, None, None, dev.owner()) }
            .unwrap();
    qp.set_state(QpState::Init);
    qp.set_state(QpState::Rtr);
    qp.set_state(QpState::Rts);
    qp.set_path_mtu(4096);
    (qp, cq, dev, dcq)
}

/// opcode, imm, (raddr, rkey), (swap_add, compare).
type WireParts = (Opcode, u32, Option<(u64, u32)>, Option<(u64, u64)>);

fn wire_op(op: &SendOp) -> WireParts {
    match *op {
        SendOp::Send => (Opcode::Send, 0, None, None),
        SendOp::SendImm { imm } => (Opcode::SendImm, imm, None, None),
        SendOp::Write { raddr, rkey } => (Opcode::RdmaWrite, 0, Some((raddr, rkey)), None),
        SendOp::WriteImm { raddr, rkey, imm } => {
            (Opcode::RdmaWriteImm, imm, Some((raddr, rkey)), None)
        }
        SendOp::Read { raddr, rkey } => (Opcode::RdmaRead, 0, Some((raddr, rkey)), None),
        SendOp::CompareSwap {
            raddr,
            rkey,
            compare,
            swap,
        } => (
            Opcode::AtomicCs,
            0,
            Some((raddr, rkey)),
            Some((swap, compare)),
        ),
        SendOp::FetchAdd { raddr, rkey, add } => {
            (Opcode::AtomicFa, 0, Some((raddr, rkey)), Some((add, 0)))
        }
    }
}

fn run(qp_type: QpType, seed: u64, rounds: usize) {
    let (mut qp, mut cq, mut dev, mut dcq) = rig(qp_type);
    let mut shadow = dev.mem.read(0, WQE_CNT as usize * 64);
    let mut rng = Rng(seed);
    let mut av = [0u8; 48];
    for (i, b) in av.iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(7);
    }
    let ah = AddressVector(av);
    let inline_src: Vec<u8> = (0..200u32).map(|i| (i * 13 + 1) as u8).collect();
    let mut out = [Completion::EMPTY; 4];
    // UD: at most 4 SGEs of < 1000 bytes stay under the 4096-byte MTU.
    let max_len = if qp_type == QpType::Ud { 1000 } else { 5000 };
    for round in 0..rounds {
        let sges: Vec<Sge> = (0..rng.below(5))
            .map(|k| Sge {
                addr: rng.next_u64(),
                length: if rng.below(4) == 0 {
                    0
                } else {
                    rng.below(max_len) as u32 + 1
                },
                lkey: 0x100 + k as u32,
            })
            .collect();
        let raddr = rng.next_u64() & !7;
        let rkey = rng.next_u64() as u32;
        let op = if qp_type == QpType::Ud {
            match rng.below(2) {
                0 => SendOp::Send,
                _ => SendOp::SendImm {
                    imm: rng.next_u64() as u32,
                },
            }
        } else {
            match rng.below(7) {
                0 => SendOp::Send,
                1 => SendOp::SendImm {
                    imm: rng.next_u64() as u32,
                },
                2 => SendOp::Write { raddr, rkey },
                3 => SendOp::WriteImm {
                    raddr,
                    rkey,
                    imm: rng.next_u64() as u32,
                },
                4 => SendOp::Read { raddr, rkey },
                5 => SendOp::CompareSwap {
                    raddr,
                    rkey,
                    compare: rng.next_u64(),
                    swap: rng.next_u64(),
                },
                _ => SendOp::FetchAdd {
                    raddr,
                    rkey,
                    add: rng.next_u64(),
                },
            }
        };
        let atomic_sge = [Sge {
            addr: rng.next_u64(),
            length: 8,
            lkey: 9,
        }];
        let inline_len = rng.below(181) as usize;
        let payload = if op.is_atomic() {
            Payload::Sges(&atomic_sge)
        } else if !op.is_read_like() && rng.below(2) == 0 {
            Payload::Inline(&inline_src[..inline_len])
        } else if matches!(op, SendOp::Read { .. }) && sges.iter().all(|s| s.length == 0) {
            Payload::Sges(&atomic_sge)
        } else {
            Payload::Sges(&sges)
        };
        let mut flags = SendFlags::SIGNALED;
        if rng.below(3) == 0 {
            flags = flags | SendFlags::SOLICITED;
        }
        if rng.below(3) == 0 {
            flags = flags | SendFlags::FENCE;
        }
        let dest = UdDest {
            ah: &ah,
            remote_qpn: rng.below(1 << 24) as u32,
            remote_qkey: rng.next_u64() as u32,
        };
        let mut wr = SendWr {
            wr_id: round as u64,
            op,
            payload,
            flags,
            ud: None,
        };
        if qp_type == QpType::Ud {
            wr.ud = Some(dest);
        }
        let pi = qp.sq().pi();
        qp.sq()
            .post(wr)
            .unwrap_or_else(|e| panic!("round {round}: {:?}", e.error));
        qp.sq().ring();
        // The same WQE through the wire encoder, into the shadow ring.
        let (opcode, imm, ra, atomic) = wire_op(&op);
        let mut fm = wire::MLX5_WQE_CTRL_CQ_UPDATE;
        if flags.contains(SendFlags::SOLICITED) {
            fm |= wire::MLX5_WQE_CTRL_SOLICITED;
        }
        if flags.contains(SendFlags::FENCE) {
            fm |= wire::MLX5_WQE_CTRL_FENCE;
        }
        // The same scatter list as the wire layer's type.
        let wire_sges: Vec<wire::Sge> = match payload {
            Payload::Sges(s) => s.iter().map(|&s| s.into()).collect(),
            Payload::Inline(_) => Vec::new(),
        };
        let data = match payload {
            Payload::Sges(_) => wire::Payload::Sges(&wire_sges),
            Payload::Inline(b) => wire::Payload::Inline(b),
        };
        let w = SendWqe {
            opcode,
            opmod: 0,
            wqe_idx: pi as u16,
            qpn: QPN,
            fm_ce_se: fm,
            imm,
            raddr: ra,
            atomic,
            ud: (qp_type == QpType::Ud).then_some(wire::UdAv {
                av: &av,
                qkey: dest.remote_qkey,
                dqpn: dest.remote_qpn,
            }),
            data,
        };
        let size = wire::emit_send_wqe(&mut shadow, &w).unwrap();
        assert_eq!(
            dev.mem.read(0, WQE_CNT as usize * 64),
            shadow,
            "round {round}: {op:?} payload {payload:?} (wqebbs {})",
            size.wqebbs
        );
        // The WQE the send queue's validation starts from (`mlx5::send_wqe`, the provider's
        // SGEs borrowed as they are) encodes to the same bytes.
        let mut own = vec![0u8; WQE_CNT as usize * 64];
        let before = own.clone();
        let mine = send_wqe(&wr, pi as u16, QPN, wr.ud.map(|d| &d.ah.0));
        assert_eq!(
            wire::emit_send_wqe(&mut own, &mine),
            Ok(size),
            "round {round}"
        );
        let slot = (pi % WQE_CNT) as usize * 64;
        for u in 0..usize::from(size.ds) {
            let o = (slot + u * 16) % own.len();
            assert_eq!(own[o..o + 16], shadow[o..o + 16], "round {round}: unit {u}");
        }
        assert_ne!(own, before, "round {round}");
        // The device side parses it back.
        let ring = dev.mem.read(0, WQE_CNT as usize * 64);
        let parsed = wire::parse_send_wqe(&ring, pi, qp_type == QpType::Ud).unwrap();
        assert_eq!(
            (parsed.wqe_idx, parsed.qpn, parsed.ds),
            (pi as u16, QPN, size.ds)
        );
        // Complete it so the ring keeps turning.
        assert_eq!(dev.complete_sends(&mut dcq), 1);
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0].wr_id, round as u64);
    }
}

#[test]
fn rc_wqes_match_the_wire_encoder() {
    run(QpType::Rc, 0x9e37_79b9_7f4a_7c15, 400);
}

#[test]
fn ud_wqes_match_the_wire_encoder() {
    run(QpType::Ud, 0x1234_5678_9abc_def1, 200);
}

#[test]
fn receive_and_srq_wqes_parse_back() {
    let (mut qp, _cq, dev, _dcq) = rig(QpType::Rc);
    let sges = [
        Sge {
            addr: 0x1000,
            length: 10,
            lkey: 1,
        },
        Sge {
            addr: 0x2000,
            length: 0,
            lkey: 2,
        },
        Sge {
            addr: 0x3000,
            length: 30,
            lkey: 3,
        },
    ];
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 1,
            sges: &sges,
        })
        .unwrap();
    qp.rq().ring();
    let slot = dev.rq_slot(0);
    let got: Vec<Sge> = wire::parse_recv_wqe(&slot, 4)
        .unwrap()
        .map(Sge::from)
        .collect();
    assert_eq!(got, vec![sges[0], sges[2]]);

    let ds = PlainSrq::new(2, 8, 64);
    // SAFETY: plain memory kept alive by the owner.
    let mut srq = unsafe { Mlx5Srq::<Plain>::from_dv(ds.dv, 3, ds.owner()) }.unwrap();
    srq.post_recv(RecvWr {
        wr_id: 2,
        sges: &sges,
    })
    .unwrap();
    srq.ring();
    let entry = ds.entry(0);
    let (next, list) = wire::parse_srq_wqe(&entry, 3).unwrap();
    assert_eq!(next, 1);
    assert_eq!(
        list.map(Sge::from).collect::<Vec<_>>(),
        vec![sges[0], sges[2]]
    );
}
