//! The device's side of the mlx5 byte layouts: constants, and the CQE emitter.
//!
//! The layouts themselves are [`crate::wire`]'s (checked byte for byte against rdma-core 44
//! `mlx5dv.h` by the golden fixtures): WQEs are read with `wire::parse_send_wqe` /
//! `parse_recv_wqe` / `parse_srq_wqe`, CQEs written with `wire::CqeRepr::emit`. This module
//! only names the numbers the engine switches on, as plain `u8` so they can be `match`ed
//! (a unit test checks each against the wire enums).

use crate::wire::{Cqe64, CqeOpcode, CqeRepr, Syndrome};

/// WQE opcodes (`MLX5_OPCODE_*`).
pub(crate) mod op {
    pub const NOP: u8 = 0x00;
    pub const RDMA_WRITE: u8 = 0x08;
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    pub const SEND: u8 = 0x0a;
    pub const SEND_IMM: u8 = 0x0b;
    pub const RDMA_READ: u8 = 0x10;
    pub const ATOMIC_CS: u8 = 0x11;
    pub const ATOMIC_FA: u8 = 0x12;
}

/// `fm_ce_se` bits of the ctrl segment (byte 11).
pub(crate) const CTRL_CQ_UPDATE: u8 = 0x08;
/// `fm_ce_se`: solicited event.
pub(crate) const CTRL_SOLICITED: u8 = 0x02;

/// Size of a WQE basic block.
pub(crate) const WQEBB: usize = 64;
/// Bytes of GRH space at the start of a UD receive buffer.
pub(crate) const GRH_LEN: usize = 40;
/// `flags_rqpn` top byte of a receive that carries a GRH (bits 28-29 = 1: GRH present).
pub(crate) const FLAGS_GRH_PRESENT: u8 = 0x10;

/// CQE opcodes (`op_own >> 4`).
pub(crate) mod cqe_op {
    pub const REQ: u8 = 0;
    pub const RESP_WR_IMM: u8 = 1;
    pub const RESP_SEND: u8 = 2;
    pub const RESP_SEND_IMM: u8 = 3;
    pub const REQ_ERR: u8 = 13;
    pub const RESP_ERR: u8 = 14;
    pub const INVALID: u8 = 15;
}

/// CQE syndromes (`MLX5_CQE_SYNDROME_*`, byte 55 of an error CQE).
pub(crate) mod syndrome {
    pub const LOC_LEN: u8 = 0x01;
    pub const LOC_QP_OP: u8 = 0x02;
    pub const LOC_PROT: u8 = 0x04;
    pub const WR_FLUSH: u8 = 0x05;
    pub const REM_INV_REQ: u8 = 0x12;
    pub const REM_ACCESS: u8 = 0x13;
    pub const REM_OP: u8 = 0x14;
    pub const RETRY_EXC: u8 = 0x15;
    pub const RNR_RETRY_EXC: u8 = 0x16;
}

/// Read a big-endian u32 at `off` of `b`.
#[inline]
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// What goes into one CQE, before the owner bit is known.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CqeFields {
    /// CQE opcode (`cqe_op`).
    pub opcode: u8,
    /// Local QPN.
    pub qpn: u32,
    /// Requester CQEs: the WQE opcode (top byte of `sop_drop_qpn`).
    pub wqe_opcode: u8,
    /// WQE counter (send: the WQE's index; receive: the RQ index or SRQ WQE index).
    pub wqe_counter: u16,
    /// Byte count.
    pub byte_cnt: u32,
    /// Immediate, as it travelled (big-endian bytes).
    pub imm_be: [u8; 4],
    /// Source QPN (responder).
    pub src_qpn: u32,
    /// A GRH is in the receive buffer (UD).
    pub grh: bool,
    /// SRQ number (responder with SRQ).
    pub srqn: u32,
    /// Solicited event (op_own bit 1).
    pub se: bool,
    /// Error CQEs: syndrome and vendor syndrome.
    pub syndrome: u8,
    /// Vendor syndrome.
    pub vendor_syndrome: u8,
}

impl CqeFields {
    /// The 64 bytes of the CQE (every byte written, through [`CqeRepr::emit`]) with the
    /// given owner bit. The engine stores bytes 0..63 first and `op_own` last.
    pub(crate) fn emit(&self, owner: bool) -> [u8; 64] {
        let mut b = [0u8; 64];
        let r = CqeRepr {
            opcode: CqeOpcode::from(self.opcode),
            owner,
            se: self.se,
            s_wqe_opcode: self.wqe_opcode,
            qpn: self.qpn & 0xff_ffff,
            wqe_counter: self.wqe_counter,
            byte_cnt: self.byte_cnt,
            imm_inval_pkey: u32::from_be_bytes(self.imm_be),
            srqn: self.srqn & 0xff_ffff,
            src_qp: self.src_qpn & 0xff_ffff,
            flags: if self.grh { FLAGS_GRH_PRESENT } else { 0 },
            syndrome: Syndrome::from(self.syndrome),
            vendor_syndrome: self.vendor_syndrome,
            ..CqeRepr::default()
        };
        r.emit(&mut Cqe64::new_unchecked(&mut b[..]))
            .expect("a 64-byte buffer holds a CQE");
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Opcode;

    #[test]
    fn constants_match_the_wire_enums() {
        for v in [
            op::NOP,
            op::RDMA_WRITE,
            op::RDMA_WRITE_IMM,
            op::SEND,
            op::SEND_IMM,
            op::RDMA_READ,
            op::ATOMIC_CS,
            op::ATOMIC_FA,
        ] {
            assert!(!matches!(Opcode::from(v), Opcode::Unknown(_)), "{v:#x}");
        }
        assert_eq!(u8::from(Syndrome::LocLen), syndrome::LOC_LEN);
        assert_eq!(u8::from(Syndrome::LocQpOp), syndrome::LOC_QP_OP);
        assert_eq!(u8::from(Syndrome::LocProt), syndrome::LOC_PROT);
        assert_eq!(u8::from(Syndrome::WrFlush), syndrome::WR_FLUSH);
        assert_eq!(u8::from(Syndrome::RemInvReq), syndrome::REM_INV_REQ);
        assert_eq!(u8::from(Syndrome::RemAccess), syndrome::REM_ACCESS);
        assert_eq!(u8::from(Syndrome::RemOp), syndrome::REM_OP);
        assert_eq!(u8::from(Syndrome::RetryExc), syndrome::RETRY_EXC);
        assert_eq!(u8::from(Syndrome::RnrRetryExc), syndrome::RNR_RETRY_EXC);
        assert_eq!(u8::from(CqeOpcode::from(cqe_op::INVALID)), cqe_op::INVALID);
        assert_eq!(crate::wire::CQE_INVALID_OP_OWN, cqe_op::INVALID << 4);
        assert_eq!(
            crate::wire::CQE_FLAGS_GRH & FLAGS_GRH_PRESENT,
            FLAGS_GRH_PRESENT
        );
    }

    #[test]
    fn requester_cqe_bytes() {
        let f = CqeFields {
            opcode: cqe_op::REQ,
            qpn: 0x12_3456,
            wqe_opcode: op::RDMA_READ,
            wqe_counter: 0xbeef,
            byte_cnt: 0x0102_0304,
            ..Default::default()
        };
        let b = f.emit(true);
        assert_eq!(&b[44..48], &[1, 2, 3, 4]);
        assert_eq!(&b[56..60], &[0x10, 0x12, 0x34, 0x56]);
        assert_eq!(&b[60..62], &[0xbe, 0xef]);
        assert_eq!(b[63], 0x01);
        assert!(b[..44].iter().all(|&x| x == 0));
    }

    #[test]
    fn error_cqe_bytes() {
        let f = CqeFields {
            opcode: cqe_op::RESP_ERR,
            qpn: 7,
            syndrome: syndrome::LOC_LEN,
            vendor_syndrome: 0x68,
            wqe_counter: 3,
            byte_cnt: 99, // not written on error CQEs
            ..Default::default()
        };
        let b = f.emit(false);
        assert_eq!(b[54], 0x68);
        assert_eq!(b[55], 0x01);
        assert_eq!(&b[44..48], &[0, 0, 0, 0]);
        assert_eq!(b[63], 0xe0);
    }

    #[test]
    fn responder_cqe_grh_and_imm() {
        let f = CqeFields {
            opcode: cqe_op::RESP_SEND_IMM,
            qpn: 9,
            src_qpn: 0xabcdef,
            grh: true,
            imm_be: [0xde, 0xad, 0xbe, 0xef],
            byte_cnt: 104,
            ..Default::default()
        };
        let b = f.emit(true);
        assert_eq!(&b[24..28], &[0x10, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[36..40], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(b[63], 0x31);
    }
}
