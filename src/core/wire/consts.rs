//! Every mlx5 layout number in one place: opcodes, flag bits, syndromes, sizes, masks and the
//! byte offsets of the fields the hot paths load and store by pointer.
//!
//! Names are the `mlx5dv.h` (rdma-core 44) names where the header has one; each doc gives
//! the C name, or says where the number comes from when the header has none. The typed
//! views ([`super::CtrlSeg`], [`super::Cqe64`], ...) and enums ([`super::Opcode`],
//! [`super::CqeOpcode`], [`super::Syndrome`]) are built on these; the mlx5 provider, the
//! software device and the bench rigs use them directly, and define no copy of their own
//! (`tests/layout_single_source.rs` checks that).

// ---- send WQE opcodes (ctrl segment byte 3, `opmod_idx_opcode & 0xff`) ----

/// `MLX5_OPCODE_NOP`.
pub const MLX5_OPCODE_NOP: u8 = 0x00;
/// `MLX5_OPCODE_SEND_INVAL`.
pub const MLX5_OPCODE_SEND_INVAL: u8 = 0x01;
/// `MLX5_OPCODE_RDMA_WRITE`.
pub const MLX5_OPCODE_RDMA_WRITE: u8 = 0x08;
/// `MLX5_OPCODE_RDMA_WRITE_IMM`.
pub const MLX5_OPCODE_RDMA_WRITE_IMM: u8 = 0x09;
/// `MLX5_OPCODE_SEND`.
pub const MLX5_OPCODE_SEND: u8 = 0x0a;
/// `MLX5_OPCODE_SEND_IMM`.
pub const MLX5_OPCODE_SEND_IMM: u8 = 0x0b;
/// `MLX5_OPCODE_RDMA_READ`.
pub const MLX5_OPCODE_RDMA_READ: u8 = 0x10;
/// `MLX5_OPCODE_ATOMIC_CS` (compare and swap).
pub const MLX5_OPCODE_ATOMIC_CS: u8 = 0x11;
/// `MLX5_OPCODE_ATOMIC_FA` (fetch and add).
pub const MLX5_OPCODE_ATOMIC_FA: u8 = 0x12;

// ---- ctrl segment `fm_ce_se` (byte 11) ----

/// `MLX5_WQE_CTRL_CQ_UPDATE` (`2 << 2`): generate a CQE for this WQE.
pub const MLX5_WQE_CTRL_CQ_UPDATE: u8 = 0x08;
/// `MLX5_WQE_CTRL_SOLICITED` (`1 << 1`): solicited event at the responder.
pub const MLX5_WQE_CTRL_SOLICITED: u8 = 0x02;
/// `MLX5_WQE_CTRL_FENCE` (`4 << 5`): wait for earlier READs and atomics.
pub const MLX5_WQE_CTRL_FENCE: u8 = 0x80;
/// `MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE` (`1 << 5`).
pub const MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE: u8 = 0x20;

// ---- ctrl segment words ----

/// `MLX5_WQE_CTRL_DS_MASK` (kernel `linux/mlx5/qp.h`): `ds`, the low 6 bits of `qpn_ds`
/// (also the low 6 bits of ctrl byte 7).
pub const MLX5_WQE_CTRL_DS_MASK: u32 = 0x3f;
/// The largest `ds` a ctrl segment can say: all bits of [`MLX5_WQE_CTRL_DS_MASK`] (63
/// 16-byte units).
pub const MAX_DS: usize = MLX5_WQE_CTRL_DS_MASK as usize;
/// `MLX5_WQE_CTRL_QPN_SHIFT`: `qpn_ds = qpn << 8 | ds`.
pub const MLX5_WQE_CTRL_QPN_SHIFT: u32 = 8;
/// `MLX5_WQE_CTRL_WQE_INDEX_SHIFT`: `opmod_idx_opcode = opmod << 24 | wqe_idx << 8 | opcode`.
pub const MLX5_WQE_CTRL_WQE_INDEX_SHIFT: u32 = 8;
/// The 16-bit wrap of a send or receive index (`wqe_idx` in the ctrl segment, the counters
/// in the QP doorbell record, a CQE's `wqe_counter`): `MLX5_WQE_CTRL_WQE_INDEX_MASK >> 8`.
pub const MLX5_WQE_INDEX_MASK: u32 = 0xffff;
/// 24-bit QP / CQ / SRQ numbers (`qpn` in `qpn_ds`, `sop_drop_qpn`, `flags_rqpn`,
/// `srqn_uidx`): rdma-core masks with `0xffffff`.
pub const MLX5_QPN_MASK: u32 = 0x00ff_ffff;

// ---- sizes ----

/// `MLX5_SEND_WQE_BB`: a WQE basic block, the unit of the send ring.
pub const MLX5_SEND_WQE_BB: usize = 64;
/// `MLX5_SEND_WQE_SHIFT`: log2 of [`MLX5_SEND_WQE_BB`].
pub const MLX5_SEND_WQE_SHIFT: u32 = 6;
/// `MLX5_WQE_DS_UNITS` (kernel `MLX5_SEND_WQE_DS`): the 16-byte unit `ds` counts in; also
/// the size of a ctrl, raddr, data, atomic or inline-header segment.
pub const MLX5_WQE_DS_UNITS: usize = 16;
/// `sizeof(struct mlx5_wqe_av)`: the datagram segment of a UD send, three units.
pub const MLX5_AV_LEN: usize = 48;
/// `sizeof(struct mlx5_wqe_inline_seg)`: the `byte_count` header in front of inline data
/// (the data follows it in the same 16-byte units).
pub const MLX5_WQE_INLINE_SEG_LEN: usize = 4;
/// `sizeof(struct mlx5_cqe64)`.
pub const MLX5_CQE64_LEN: usize = 64;
/// `sizeof(struct ibv_grh)`: the space a UD receive buffer gives the GRH.
pub const IBV_GRH_LEN: usize = 40;

// ---- data / inline / address-vector markers ----

/// `MLX5_INVALID_LKEY`: the lkey of the data segment that ends a receive WQE with fewer
/// than max SGEs (with `byte_count` 0).
pub const MLX5_INVALID_LKEY: u32 = 0x100;
/// `MLX5_INLINE_SEG`: the bit of an inline segment's `byte_count` that marks it inline.
pub const MLX5_INLINE_SEG: u32 = 0x8000_0000;
/// `MLX5_EXTENDED_UD_AV`: the bit of the address vector's `dqp_dct` for an extended AV.
pub const MLX5_EXTENDED_UD_AV: u32 = 0x8000_0000;

// ---- CQE opcodes (`op_own >> 4`, `mlx5dv_get_cqe_opcode`) ----

/// `MLX5_CQE_REQ`: a requester (send-side) completion.
pub const MLX5_CQE_REQ: u8 = 0;
/// `MLX5_CQE_RESP_WR_IMM`: an incoming RDMA WRITE WITH IMMEDIATE.
pub const MLX5_CQE_RESP_WR_IMM: u8 = 1;
/// `MLX5_CQE_RESP_SEND`: an incoming SEND.
pub const MLX5_CQE_RESP_SEND: u8 = 2;
/// `MLX5_CQE_RESP_SEND_IMM`: an incoming SEND WITH IMMEDIATE.
pub const MLX5_CQE_RESP_SEND_IMM: u8 = 3;
/// `MLX5_CQE_RESP_SEND_INV`: an incoming SEND WITH INVALIDATE.
pub const MLX5_CQE_RESP_SEND_INV: u8 = 4;
/// `MLX5_CQE_RESIZE_CQ`.
pub const MLX5_CQE_RESIZE_CQ: u8 = 5;
/// `MLX5_CQE_NO_PACKET`.
pub const MLX5_CQE_NO_PACKET: u8 = 6;
/// `MLX5_CQE_SIG_ERR`.
pub const MLX5_CQE_SIG_ERR: u8 = 12;
/// `MLX5_CQE_REQ_ERR`: a requester error CQE (`struct mlx5_err_cqe`).
pub const MLX5_CQE_REQ_ERR: u8 = 13;
/// `MLX5_CQE_RESP_ERR`: a responder error CQE.
pub const MLX5_CQE_RESP_ERR: u8 = 14;
/// `MLX5_CQE_INVALID`: not written by the device yet.
pub const MLX5_CQE_INVALID: u8 = 15;

// ---- CQE `op_own` (byte 63): `opcode << 4 | format << 2 | se << 1 | owner` ----

/// `MLX5_CQE_OWNER_MASK`: the owner bit (`mlx5dv_get_cqe_owner`).
pub const MLX5_CQE_OWNER_MASK: u8 = 0x01;
/// The solicited-event bit (`mlx5dv_get_cqe_se`: `(op_own >> 1) & 1`).
pub const MLX5_CQE_SE_MASK: u8 = 0x02;
/// `mlx5dv_get_cqe_format`: `(op_own >> 2) & 3`.
pub const MLX5_CQE_FORMAT_SHIFT: u32 = 2;
/// The two format bits after [`MLX5_CQE_FORMAT_SHIFT`] (`mlx5dv_get_cqe_format`'s `& 3`).
pub const MLX5_CQE_FORMAT_MASK: u8 = 3;
/// `mlx5dv_get_cqe_opcode`: `op_own >> 4`.
pub const MLX5_CQE_OPCODE_SHIFT: u32 = 4;
/// `MLX5_INLINE_SCATTER_32`: up to 32 received (or READ / atomic response) bytes are in
/// CQE bytes 0-31.
pub const MLX5_INLINE_SCATTER_32: u8 = 0x04;
/// `MLX5_INLINE_SCATTER_64`: up to 64 bytes are in the 64 bytes before the CQE (the first
/// half of a 128-byte slot).
pub const MLX5_INLINE_SCATTER_64: u8 = 0x08;
/// `op_own` of a fresh CQ slot: `MLX5_CQE_INVALID << 4`, owner 0 (rdma-core writes it at
/// CQ creation).
pub const MLX5_CQE_INVALID_OP_OWN: u8 = MLX5_CQE_INVALID << MLX5_CQE_OPCODE_SHIFT;
/// `op_own` bits that are zero in a successful requester CQE with no scattered data
/// (opcode `MLX5_CQE_REQ`, no inline scatter): `op_own & MLX5_CQE_REQ_PLAIN_MASK == 0`
/// selects the poller's short path.
pub const MLX5_CQE_REQ_PLAIN_MASK: u8 = 0xfc;

// ---- CQE `flags_rqpn` top byte ----

/// Bits 28-29 of `flags_rqpn` (the `l3_hdr`/GRH field, bits 4-5 of its top byte): non-zero
/// when a GRH is present (libmlx5: `(flags_rqpn >> 28) & 3`).
pub const MLX5_CQE_FLAGS_GRH: u8 = 0x30;
/// The value the device writes in those bits for a receive that carries a GRH.
pub const MLX5_CQE_FLAGS_GRH_PRESENT: u8 = 0x10;

// ---- CQE syndromes (`struct mlx5_err_cqe` byte 55) ----

/// `MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR`.
pub const MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR: u8 = 0x01;
/// `MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR`.
pub const MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR: u8 = 0x02;
/// `MLX5_CQE_SYNDROME_LOCAL_PROT_ERR`.
pub const MLX5_CQE_SYNDROME_LOCAL_PROT_ERR: u8 = 0x04;
/// `MLX5_CQE_SYNDROME_WR_FLUSH_ERR`.
pub const MLX5_CQE_SYNDROME_WR_FLUSH_ERR: u8 = 0x05;
/// `MLX5_CQE_SYNDROME_MW_BIND_ERR`.
pub const MLX5_CQE_SYNDROME_MW_BIND_ERR: u8 = 0x06;
/// `MLX5_CQE_SYNDROME_BAD_RESP_ERR`.
pub const MLX5_CQE_SYNDROME_BAD_RESP_ERR: u8 = 0x10;
/// `MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR`.
pub const MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR: u8 = 0x11;
/// `MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR`.
pub const MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR: u8 = 0x12;
/// `MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR`.
pub const MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR: u8 = 0x13;
/// `MLX5_CQE_SYNDROME_REMOTE_OP_ERR`.
pub const MLX5_CQE_SYNDROME_REMOTE_OP_ERR: u8 = 0x14;
/// `MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR`.
pub const MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR: u8 = 0x15;
/// `MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR`.
pub const MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR: u8 = 0x16;
/// `MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR`.
pub const MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR: u8 = 0x22;

// ---- doorbell records and the UAR ----

/// `MLX5_RCV_DBR`: index of the receive counter in a QP's doorbell record (`__be32[2]`).
pub const MLX5_RCV_DBR: usize = 0;
/// `MLX5_SND_DBR`: index of the send counter in a QP's doorbell record.
pub const MLX5_SND_DBR: usize = 1;
/// `MLX5_CQ_SET_CI` (libmlx5 `mlx5.h`): index of the consumer index in a CQ's doorbell
/// record.
pub const MLX5_CQ_SET_CI: usize = 0;
/// `MLX5_CQ_ARM_DB` (libmlx5 `mlx5.h`): index of the arm word in a CQ's doorbell record.
pub const MLX5_CQ_ARM_DB: usize = 1;
/// `MLX5_CQ_DOORBELL` (libmlx5 `mlx5.h`): offset of the 8-byte CQ doorbell (arm) in the
/// CQ's UAR page: `be64(sn << 28 | cmd | ci) << 32 | cqn`.
pub const MLX5_CQ_DOORBELL: usize = 0x20;
/// `MLX5_CQ_DB_REQ_NOT_SOL`: arm command, next solicited (or error) completion.
pub const MLX5_CQ_DB_REQ_NOT_SOL: u32 = 1 << 24;
/// `MLX5_CQ_DB_REQ_NOT`: arm command, next completion.
pub const MLX5_CQ_DB_REQ_NOT: u32 = 0;
/// Where the arm sequence number (`arm_sn & 3`) sits in the arm word.
pub const MLX5_CQ_ARM_SN_SHIFT: u32 = 28;
/// The arm sequence number's bits (`arm_sn & 3`).
pub const MLX5_CQ_ARM_SN_MASK: u32 = 3;
/// The 24-bit consumer index a CQ doorbell record holds (libmlx5 `cons_index & 0xffffff`).
pub const MLX5_CQ_CI_MASK: u32 = 0x00ff_ffff;
/// `MLX5_BF_OFFSET` (kernel `linux/mlx5/device.h`): offset of the first BlueFlame register in
/// a UAR page.
pub const MLX5_BF_OFFSET: usize = 0x800;
/// Size of one BlueFlame half (`bf_size` of `mlx5dv_qp` on ConnectX: a register is two
/// halves written in turn).
pub const MLX5_BF_SIZE: u32 = 256;

/// Byte offsets of fields in the mlx5 structures, for code that loads and stores by pointer.
/// Multi-byte fields are big-endian; the typed views use the same offsets.
pub mod offset {
    /// `struct mlx5_wqe_ctrl_seg`.
    pub mod ctrl {
        /// `opmod_idx_opcode` (`__be32`): opmod 0, wqe_idx 1-2, opcode 3.
        pub const OPMOD_IDX_OPCODE: usize = 0;
        /// `wqe_idx` (`__be16`, bytes 1-2 of `opmod_idx_opcode`).
        pub const WQE_IDX: usize = 1;
        /// The opcode byte (low byte of `opmod_idx_opcode`).
        pub const OPCODE: usize = 3;
        /// `qpn_ds` (`__be32`).
        pub const QPN_DS: usize = 4;
        /// The byte holding `ds` (low byte of `qpn_ds`).
        pub const DS: usize = 7;
        /// `signature`.
        pub const SIGNATURE: usize = 8;
        /// `dci_stream_channel_id` (`__be16`).
        pub const DCI_STREAM_CHANNEL_ID: usize = 9;
        /// `fm_ce_se`.
        pub const FM_CE_SE: usize = 11;
        /// `imm` (`__be32`).
        pub const IMM: usize = 12;
    }
    /// `struct mlx5_wqe_raddr_seg`.
    pub mod raddr {
        /// `raddr` (`__be64`).
        pub const RADDR: usize = 0;
        /// `rkey` (`__be32`).
        pub const RKEY: usize = 8;
        /// `reserved` (`__be32`, written as zero).
        pub const RESERVED: usize = 12;
    }
    /// `struct mlx5_wqe_data_seg`.
    pub mod data {
        /// `byte_count` (`__be32`).
        pub const BYTE_COUNT: usize = 0;
        /// `lkey` (`__be32`).
        pub const LKEY: usize = 4;
        /// `addr` (`__be64`).
        pub const ADDR: usize = 8;
    }
    /// `struct mlx5_wqe_atomic_seg`.
    pub mod atomic {
        /// `swap_add` (`__be64`): the swap value (CS) or the addend (FA).
        pub const SWAP_ADD: usize = 0;
        /// `compare` (`__be64`).
        pub const COMPARE: usize = 8;
    }
    /// `struct mlx5_wqe_inl_data_seg`: the header of an inline segment.
    pub mod inline {
        /// `byte_count` (`__be32`): the data length | `MLX5_INLINE_SEG`.
        pub const BYTE_COUNT: usize = 0;
        /// The inline data, right after the header (`sizeof(struct mlx5_wqe_inl_data_seg)`).
        pub const DATA: usize = super::super::MLX5_WQE_INLINE_SEG_LEN;
    }
    /// `struct mlx5_wqe_av` (the datagram segment).
    pub mod av {
        /// `key` (`__be64`: `key.dc_key`; for UD, `key.qkey.qkey` is its first 4 bytes).
        pub const KEY: usize = 0;
        /// `key.qkey.qkey` (`__be32`).
        pub const QKEY: usize = 0;
        /// `dqp_dct` (`__be32`): destination QPN | `MLX5_EXTENDED_UD_AV`.
        pub const DQP_DCT: usize = 8;
        /// `stat_rate_sl`.
        pub const STAT_RATE_SL: usize = 12;
        /// `fl_mlid`.
        pub const FL_MLID: usize = 13;
        /// `rlid` (`__be16`).
        pub const RLID: usize = 14;
        /// `reserved0` (4 bytes, written as zero).
        pub const RESERVED0: usize = 16;
        /// `rmac` (6 bytes).
        pub const RMAC: usize = 20;
        /// `tclass`.
        pub const TCLASS: usize = 26;
        /// `hop_limit`.
        pub const HOP_LIMIT: usize = 27;
        /// `grh_gid_fl` (`__be32`).
        pub const GRH_GID_FL: usize = 28;
        /// `rgid` (16 bytes).
        pub const RGID: usize = 32;
    }
    /// `struct mlx5_wqe_srq_next_seg`.
    pub mod srq_next {
        /// `rsvd0` (2 bytes, written as zero).
        pub const RSVD0: usize = 0;
        /// `next_wqe_index` (`__be16`).
        pub const NEXT_WQE_INDEX: usize = 2;
        /// `signature`.
        pub const SIGNATURE: usize = 4;
        /// `rsvd1` (11 bytes, written as zero, to the end of the unit).
        pub const RSVD1: usize = 5;
    }
    /// `struct mlx5_cqe64`.
    pub mod cqe64 {
        /// `wqe_id` (`__be16`).
        pub const WQE_ID: usize = 2;
        /// `ml_path`.
        pub const ML_PATH: usize = 17;
        /// `slid` (`__be16`).
        pub const SLID: usize = 22;
        /// `flags_rqpn` (`__be32`): flags in the top byte, source QPN below.
        pub const FLAGS_RQPN: usize = 24;
        /// `srqn_uidx` (`__be32`).
        pub const SRQN_UIDX: usize = 32;
        /// `imm_inval_pkey` (`__be32`).
        pub const IMM_INVAL_PKEY: usize = 36;
        /// `byte_cnt` (`__be32`).
        pub const BYTE_CNT: usize = 44;
        /// `timestamp` (`__be64`).
        pub const TIMESTAMP: usize = 48;
        /// `sop_drop_qpn` (`__be32`): the WQE opcode in the top byte, the QPN below.
        pub const SOP_DROP_QPN: usize = 56;
        /// `wqe_counter` (`__be16`).
        pub const WQE_COUNTER: usize = 60;
        /// `signature`.
        pub const SIGNATURE: usize = 62;
        /// `op_own`.
        pub const OP_OWN: usize = 63;
    }
    /// `struct mlx5_err_cqe` (same 64 bytes, error CQEs).
    pub mod err_cqe {
        /// `srqn` (`__be32`).
        pub const SRQN: usize = 32;
        /// `hw_err_synd`; the `__be32` word here holds hw_err_synd, hw_synd_type,
        /// vendor_err_synd, syndrome.
        pub const HW_ERR_SYND: usize = 52;
        /// `vendor_err_synd`.
        pub const VENDOR_ERR_SYND: usize = 54;
        /// `syndrome`.
        pub const SYNDROME: usize = 55;
        /// `s_wqe_opcode_qpn` (`__be32`).
        pub const S_WQE_OPCODE_QPN: usize = 56;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_values() {
        assert_eq!(MLX5_CQE_INVALID_OP_OWN, 0xf0);
        assert_eq!(1usize << MLX5_SEND_WQE_SHIFT, MLX5_SEND_WQE_BB);
        assert_eq!(MLX5_AV_LEN, 3 * MLX5_WQE_DS_UNITS);
        assert_eq!(
            MLX5_CQE_REQ_PLAIN_MASK,
            !(MLX5_CQE_OWNER_MASK | MLX5_CQE_SE_MASK)
        );
    }
}
