//! Data-plane requests as the wire layer's values. The one map from a request's operation
//! to its mlx5 opcode and segments ([`OpSegs::of`]) and from its flags to `fm_ce_se`
//! ([`fm_ce_se_of`], over [`wire::fm_ce_se`]) live here, the one place that sees both the
//! data-plane vocabulary and the wire layer (which imports nothing). [`send_wqe`] maps a
//! [`SendWr`] to the [`wire::SendWqe`] that describes the bytes [`super::Mlx5Sq`] writes for
//! it: the send queue's validation starts from it and its writer writes it.

use crate::wire::{self, fm_ce_se, Opcode, SendWqe, UdAv, MLX5_AV_LEN};
use crate::{Payload, SendFlags, SendOp, SendWr, Sge};

// `SendFlags` bits are the wire layer's request-flag bits, so they index its table as they are.
const _: () = assert!(
    SendFlags::SIGNALED.0 == fm_ce_se::FLAG_SIGNALED
        && SendFlags::FENCE.0 == fm_ce_se::FLAG_FENCE
        && SendFlags::SOLICITED.0 == fm_ce_se::FLAG_SOLICITED
);

/// What a request's operation puts into its WQE: the opcode, the immediate (host order, 0
/// without one), the raddr segment's `(raddr, rkey)` and the atomic segment's
/// `(swap_add, compare)`. `CompareSwap` puts `swap` in swap_add and `compare` in compare;
/// `FetchAdd` puts `add` in swap_add and 0 in compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpSegs {
    /// The WQE opcode.
    pub opcode: Opcode,
    /// The immediate, host order.
    pub imm: u32,
    /// `(raddr, rkey)` for RDMA and atomic opcodes.
    pub raddr: Option<(u64, u32)>,
    /// `(swap_add, compare)` for atomics.
    pub atomic: Option<(u64, u64)>,
}

impl OpSegs {
    /// The one map from [`SendOp`] to the mlx5 opcode (`MLX5_OPCODE_*`) and segments.
    #[inline(always)]
    pub fn of(op: SendOp) -> OpSegs {
        let (opcode, imm, raddr, atomic) = match op {
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
        };
        OpSegs {
            opcode,
            imm,
            raddr,
            atomic,
        }
    }
}

/// The `fm_ce_se` byte for a request's flags ([`wire::fm_ce_se::of`]): SIGNALED to
/// `MLX5_WQE_CTRL_CQ_UPDATE`, FENCE to `MLX5_WQE_CTRL_FENCE`, SOLICITED to
/// `MLX5_WQE_CTRL_SOLICITED` (a queue that signals on its own schedule ORs in CQ_UPDATE
/// afterwards).
#[inline(always)]
pub fn fm_ce_se_of(flags: SendFlags) -> u8 {
    fm_ce_se::of(flags.0)
}

/// The WQE of a send request: opcode, immediate and segments from its operation
/// ([`OpSegs::of`]), `fm_ce_se` from its flags ([`fm_ce_se_of`]; a queue that signals on
/// its own schedule ORs in CQ_UPDATE when it writes), the UD destination and the payload as
/// the request has them (nothing copied). `wqe_idx` and `qpn` come from the queue; `av` is
/// the address vector of the request's address handle on UD QPs (`None` otherwise). This is
/// what [`super::Mlx5Sq`]'s validation produces and its writer writes.
#[inline(always)]
pub fn send_wqe<'a, A>(
    wr: &SendWr<'a, A>,
    wqe_idx: u16,
    qpn: u32,
    av: Option<&'a [u8; MLX5_AV_LEN]>,
) -> SendWqe<'a, Sge> {
    let OpSegs {
        opcode,
        imm,
        raddr,
        atomic,
    } = OpSegs::of(wr.op);
    let ud = match (av, wr.ud) {
        (Some(av), Some(d)) => Some(UdAv {
            av,
            qkey: d.remote_qkey,
            dqpn: d.remote_qpn,
        }),
        _ => None,
    };
    let data = match wr.payload {
        Payload::Sges(s) => wire::Payload::Sges(s),
        Payload::Inline(b) => wire::Payload::Inline(b),
    };
    SendWqe {
        opcode,
        opmod: 0,
        wqe_idx,
        qpn,
        fm_ce_se: fm_ce_se_of(wr.flags),
        imm,
        raddr,
        atomic,
        ud,
        data,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        emit_send_wqe, MLX5_SEND_WQE_BB, MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_FENCE,
        MLX5_WQE_CTRL_SOLICITED,
    };

    #[test]
    fn send_requests_map_to_wqes() {
        let s = [Sge {
            addr: 0x100,
            length: 8,
            lkey: 1,
        }];
        let cases = [
            (SendOp::Send, Opcode::Send, 0, None, None),
            (SendOp::SendImm { imm: 7 }, Opcode::SendImm, 7, None, None),
            (
                SendOp::Write { raddr: 9, rkey: 3 },
                Opcode::RdmaWrite,
                0,
                Some((9, 3)),
                None,
            ),
            (
                SendOp::WriteImm {
                    raddr: 9,
                    rkey: 3,
                    imm: 0xabcd,
                },
                Opcode::RdmaWriteImm,
                0xabcd,
                Some((9, 3)),
                None,
            ),
            (
                SendOp::Read { raddr: 9, rkey: 3 },
                Opcode::RdmaRead,
                0,
                Some((9, 3)),
                None,
            ),
            (
                SendOp::CompareSwap {
                    raddr: 8,
                    rkey: 3,
                    compare: 1,
                    swap: 2,
                },
                Opcode::AtomicCs,
                0,
                Some((8, 3)),
                Some((2, 1)),
            ),
            (
                SendOp::FetchAdd {
                    raddr: 8,
                    rkey: 3,
                    add: 5,
                },
                Opcode::AtomicFa,
                0,
                Some((8, 3)),
                Some((5, 0)),
            ),
        ];
        for (op, opcode, imm, raddr, atomic) in cases {
            let wr =
                SendWr::<()>::new(1, op, &s).with_flags(SendFlags::FENCE | SendFlags::SOLICITED);
            let w = send_wqe(&wr, 0x1234, 0x56, None);
            assert_eq!(
                (w.opcode, w.imm, w.raddr, w.atomic),
                (opcode, imm, raddr, atomic)
            );
            assert_eq!((w.wqe_idx, w.qpn), (0x1234, 0x56));
            assert_eq!(w.fm_ce_se, MLX5_WQE_CTRL_FENCE | MLX5_WQE_CTRL_SOLICITED);
            assert_eq!(w.data, wire::Payload::Sges(&s));
            // Every mapped request is one the encoder accepts.
            let mut ring = vec![0u8; 4 * MLX5_SEND_WQE_BB];
            assert!(emit_send_wqe(&mut ring, &w).is_ok(), "{op:?}");
        }
        let wr = SendWr::<()>::send(1, &s).signaled();
        assert_eq!(send_wqe(&wr, 0, 0, None).fm_ce_se, MLX5_WQE_CTRL_CQ_UPDATE);
        let wr = SendWr::<()>::send(1, &[]).inline(b"abc");
        assert_eq!(
            send_wqe(&wr, 0, 0, None).data,
            wire::Payload::Inline(b"abc")
        );
    }
}
