//! The few mlx5 byte layouts the device side reads and writes, as the device sees them.
//!
//! Offsets are the ones of rdma-core 44 `mlx5dv.h` (`struct mlx5_wqe_ctrl_seg`,
//! `mlx5_wqe_raddr_seg`, `mlx5_wqe_atomic_seg`, `mlx5_wqe_data_seg`, `mlx5_wqe_av`,
//! `mlx5_wqe_srq_next_seg`, `mlx5_cqe64`, `mlx5_err_cqe`); all multi-byte fields are
//! big-endian. The host-side encoders and decoders live in [`crate::wire`]; this module is the
//! device's private reading of the same bytes (a device model must not share its parser with
//! the code under test, or a layout bug would cancel out on both sides), and the golden
//! fixtures of `fixtures/mlx5` check both against the C headers.

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

/// Inline segment marker in the first word (`MLX5_INLINE_SEG`).
pub(crate) const INLINE_SEG: u32 = 0x8000_0000;
/// The lkey that terminates a receive WQE with fewer than max SGEs (`MLX5_INVALID_LKEY`).
pub(crate) const INVALID_LKEY: u32 = 0x100;

/// Size of a WQE basic block.
pub(crate) const WQEBB: usize = 64;
/// Size of the UD address vector that follows the ctrl segment (`struct mlx5_wqe_av`).
pub(crate) const AV_LEN: usize = 48;
/// Bytes of GRH space at the start of a UD receive buffer.
pub(crate) const GRH_LEN: usize = 40;

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
    pub const LOC_ACCESS: u8 = 0x11;
    pub const REM_INV_REQ: u8 = 0x12;
    pub const REM_ACCESS: u8 = 0x13;
    pub const REM_OP: u8 = 0x14;
    pub const RETRY_EXC: u8 = 0x15;
    pub const RNR_RETRY_EXC: u8 = 0x16;
}

/// Byte offsets inside a 64-byte CQE.
pub(crate) mod cqe {
    /// `flags_rqpn`: bits 28-29 = GRH present, low 24 bits = source QPN.
    pub const FLAGS_RQPN: usize = 24;
    /// `srqn_uidx` (error CQE: `srqn`).
    pub const SRQN: usize = 32;
    /// `imm_inval_pkey`: the immediate exactly as it travelled (big-endian).
    pub const IMM: usize = 36;
    /// `byte_cnt`.
    pub const BYTE_CNT: usize = 44;
    /// `vendor_err_synd` (error CQE).
    pub const VENDOR_SYND: usize = 54;
    /// `syndrome` (error CQE).
    pub const SYNDROME: usize = 55;
    /// `sop_drop_qpn` / `s_wqe_opcode_qpn`: WQE opcode << 24 | QPN.
    pub const OPCODE_QPN: usize = 56;
    /// `wqe_counter`.
    pub const WQE_COUNTER: usize = 60;
    /// `op_own`: opcode << 4 | ... | owner.
    pub const OP_OWN: usize = 63;
}

/// Read a big-endian u32 at `off` of `b`.
#[inline]
pub(crate) fn be32(b: &[u8], off: usize) -> u32 {
    u32::from_be_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

/// Read a big-endian u64 at `off` of `b`.
#[inline]
pub(crate) fn be64(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_be_bytes(a)
}

/// Read a big-endian u16 at `off` of `b`.
#[inline]
pub(crate) fn be16(b: &[u8], off: usize) -> u16 {
    u16::from_be_bytes([b[off], b[off + 1]])
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
    /// The 64 bytes of the CQE, every byte written, `op_own` last byte included with the
    /// given owner bit. The engine stores bytes 0..63 first and `op_own` last.
    pub(crate) fn emit(&self, owner: bool) -> [u8; 64] {
        let mut b = [0u8; 64];
        let is_err = self.opcode == cqe_op::REQ_ERR || self.opcode == cqe_op::RESP_ERR;
        if !is_err {
            let rqpn = (self.src_qpn & 0xff_ffff) | if self.grh { 1 << 28 } else { 0 };
            b[cqe::FLAGS_RQPN..cqe::FLAGS_RQPN + 4].copy_from_slice(&rqpn.to_be_bytes());
            b[cqe::IMM..cqe::IMM + 4].copy_from_slice(&self.imm_be);
            b[cqe::BYTE_CNT..cqe::BYTE_CNT + 4].copy_from_slice(&self.byte_cnt.to_be_bytes());
        } else {
            b[cqe::VENDOR_SYND] = self.vendor_syndrome;
            b[cqe::SYNDROME] = self.syndrome;
        }
        b[cqe::SRQN..cqe::SRQN + 4].copy_from_slice(&(self.srqn & 0xff_ffff).to_be_bytes());
        let oq = (u32::from(self.wqe_opcode) << 24) | (self.qpn & 0xff_ffff);
        b[cqe::OPCODE_QPN..cqe::OPCODE_QPN + 4].copy_from_slice(&oq.to_be_bytes());
        b[cqe::WQE_COUNTER..cqe::WQE_COUNTER + 2].copy_from_slice(&self.wqe_counter.to_be_bytes());
        b[cqe::OP_OWN] = (self.opcode << 4) | if self.se { 0x02 } else { 0 } | u8::from(owner);
        b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
