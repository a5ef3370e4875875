//! Completion queue entries (`struct mlx5_cqe64`, `struct mlx5_err_cqe` in `mlx5dv.h`).
//!
//! A CQ is a ring of `cqe_cnt` slots (a power of two) of 64 or 128 bytes; in a 128-byte slot
//! the 64-byte CQE is the second half ([`cqe64_offset`]). The device writes a CQE's owner bit
//! as the wrap parity of its producer index; software owns the CQE at consumer index `ci` when
//! the opcode is not INVALID and the owner bit equals `!!(ci & cqe_cnt)` ([`cqe_sw_owned`]).

use super::consts::offset::{cqe64 as off, err_cqe as err_off};
use super::consts::*;
use super::{at, be16, be32, be64, put16, put32, put64, Field, Truncated};

/// The 4 bits of a CQE opcode (what is left of `op_own` after the shift).
const OPCODE_MASK: u8 = u8::MAX >> MLX5_CQE_OPCODE_SHIFT;

/// The CQE opcode (the top nibble of `op_own`). Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CqeOpcode {
    /// `MLX5_CQE_REQ` 0: a requester (send-side) completion.
    Req,
    /// `MLX5_CQE_RESP_WR_IMM` 1: an incoming RDMA WRITE WITH IMMEDIATE.
    RespWrImm,
    /// `MLX5_CQE_RESP_SEND` 2: an incoming SEND.
    RespSend,
    /// `MLX5_CQE_RESP_SEND_IMM` 3: an incoming SEND WITH IMMEDIATE.
    RespSendImm,
    /// `MLX5_CQE_RESP_SEND_INV` 4: an incoming SEND WITH INVALIDATE.
    RespSendInv,
    /// `MLX5_CQE_RESIZE_CQ` 5.
    ResizeCq,
    /// `MLX5_CQE_NO_PACKET` 6.
    NoPacket,
    /// `MLX5_CQE_SIG_ERR` 12.
    SigErr,
    /// `MLX5_CQE_REQ_ERR` 13: a requester error CQE.
    ReqErr,
    /// `MLX5_CQE_RESP_ERR` 14: a responder error CQE.
    RespErr,
    /// `MLX5_CQE_INVALID` 15: not written by the device yet.
    Invalid,
    /// Any other value (0-15).
    Unknown(u8),
}

impl From<u8> for CqeOpcode {
    /// From the 4-bit opcode (`op_own >> 4`); higher bits are ignored.
    #[inline]
    fn from(v: u8) -> CqeOpcode {
        match v & OPCODE_MASK {
            MLX5_CQE_REQ => CqeOpcode::Req,
            MLX5_CQE_RESP_WR_IMM => CqeOpcode::RespWrImm,
            MLX5_CQE_RESP_SEND => CqeOpcode::RespSend,
            MLX5_CQE_RESP_SEND_IMM => CqeOpcode::RespSendImm,
            MLX5_CQE_RESP_SEND_INV => CqeOpcode::RespSendInv,
            MLX5_CQE_RESIZE_CQ => CqeOpcode::ResizeCq,
            MLX5_CQE_NO_PACKET => CqeOpcode::NoPacket,
            MLX5_CQE_SIG_ERR => CqeOpcode::SigErr,
            MLX5_CQE_REQ_ERR => CqeOpcode::ReqErr,
            MLX5_CQE_RESP_ERR => CqeOpcode::RespErr,
            MLX5_CQE_INVALID => CqeOpcode::Invalid,
            other => CqeOpcode::Unknown(other),
        }
    }
}

impl From<CqeOpcode> for u8 {
    #[inline]
    fn from(v: CqeOpcode) -> u8 {
        match v {
            CqeOpcode::Req => MLX5_CQE_REQ,
            CqeOpcode::RespWrImm => MLX5_CQE_RESP_WR_IMM,
            CqeOpcode::RespSend => MLX5_CQE_RESP_SEND,
            CqeOpcode::RespSendImm => MLX5_CQE_RESP_SEND_IMM,
            CqeOpcode::RespSendInv => MLX5_CQE_RESP_SEND_INV,
            CqeOpcode::ResizeCq => MLX5_CQE_RESIZE_CQ,
            CqeOpcode::NoPacket => MLX5_CQE_NO_PACKET,
            CqeOpcode::SigErr => MLX5_CQE_SIG_ERR,
            CqeOpcode::ReqErr => MLX5_CQE_REQ_ERR,
            CqeOpcode::RespErr => MLX5_CQE_RESP_ERR,
            CqeOpcode::Invalid => MLX5_CQE_INVALID,
            CqeOpcode::Unknown(other) => other & OPCODE_MASK,
        }
    }
}

impl CqeOpcode {
    /// The rdma-core name without the `MLX5_CQE_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            CqeOpcode::Req => "REQ",
            CqeOpcode::RespWrImm => "RESP_WR_IMM",
            CqeOpcode::RespSend => "RESP_SEND",
            CqeOpcode::RespSendImm => "RESP_SEND_IMM",
            CqeOpcode::RespSendInv => "RESP_SEND_INV",
            CqeOpcode::ResizeCq => "RESIZE_CQ",
            CqeOpcode::NoPacket => "NO_PACKET",
            CqeOpcode::SigErr => "SIG_ERR",
            CqeOpcode::ReqErr => "REQ_ERR",
            CqeOpcode::RespErr => "RESP_ERR",
            CqeOpcode::Invalid => "INVALID",
            CqeOpcode::Unknown(_) => "UNKNOWN",
        }
    }
    /// True for the error CQEs (laid out as `struct mlx5_err_cqe`).
    #[inline]
    pub fn is_error(self) -> bool {
        matches!(self, CqeOpcode::ReqErr | CqeOpcode::RespErr)
    }
}

/// The syndrome of an error CQE. Unknown values are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Syndrome {
    /// 0x01 `LOCAL_LENGTH_ERR`.
    LocLen,
    /// 0x02 `LOCAL_QP_OP_ERR`.
    LocQpOp,
    /// 0x04 `LOCAL_PROT_ERR`.
    LocProt,
    /// 0x05 `WR_FLUSH_ERR`.
    WrFlush,
    /// 0x06 `MW_BIND_ERR`.
    MwBind,
    /// 0x10 `BAD_RESP_ERR`.
    BadResp,
    /// 0x11 `LOCAL_ACCESS_ERR`.
    LocAccess,
    /// 0x12 `REMOTE_INVAL_REQ_ERR`.
    RemInvReq,
    /// 0x13 `REMOTE_ACCESS_ERR`.
    RemAccess,
    /// 0x14 `REMOTE_OP_ERR`.
    RemOp,
    /// 0x15 `TRANSPORT_RETRY_EXC_ERR`.
    RetryExc,
    /// 0x16 `RNR_RETRY_EXC_ERR`.
    RnrRetryExc,
    /// 0x22 `REMOTE_ABORTED_ERR`.
    RemAbort,
    /// Any other value.
    Unknown(u8),
}

impl Syndrome {
    /// Every syndrome `mlx5dv.h` names, in header order.
    pub const ALL: [Syndrome; 13] = [
        Syndrome::LocLen,
        Syndrome::LocQpOp,
        Syndrome::LocProt,
        Syndrome::WrFlush,
        Syndrome::MwBind,
        Syndrome::BadResp,
        Syndrome::LocAccess,
        Syndrome::RemInvReq,
        Syndrome::RemAccess,
        Syndrome::RemOp,
        Syndrome::RetryExc,
        Syndrome::RnrRetryExc,
        Syndrome::RemAbort,
    ];

    /// The rdma-core name without the `MLX5_CQE_SYNDROME_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            Syndrome::LocLen => "LOCAL_LENGTH_ERR",
            Syndrome::LocQpOp => "LOCAL_QP_OP_ERR",
            Syndrome::LocProt => "LOCAL_PROT_ERR",
            Syndrome::WrFlush => "WR_FLUSH_ERR",
            Syndrome::MwBind => "MW_BIND_ERR",
            Syndrome::BadResp => "BAD_RESP_ERR",
            Syndrome::LocAccess => "LOCAL_ACCESS_ERR",
            Syndrome::RemInvReq => "REMOTE_INVAL_REQ_ERR",
            Syndrome::RemAccess => "REMOTE_ACCESS_ERR",
            Syndrome::RemOp => "REMOTE_OP_ERR",
            Syndrome::RetryExc => "TRANSPORT_RETRY_EXC_ERR",
            Syndrome::RnrRetryExc => "RNR_RETRY_EXC_ERR",
            Syndrome::RemAbort => "REMOTE_ABORTED_ERR",
            Syndrome::Unknown(_) => "UNKNOWN",
        }
    }
}

impl From<u8> for Syndrome {
    #[inline]
    fn from(v: u8) -> Syndrome {
        match v {
            MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR => Syndrome::LocLen,
            MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR => Syndrome::LocQpOp,
            MLX5_CQE_SYNDROME_LOCAL_PROT_ERR => Syndrome::LocProt,
            MLX5_CQE_SYNDROME_WR_FLUSH_ERR => Syndrome::WrFlush,
            MLX5_CQE_SYNDROME_MW_BIND_ERR => Syndrome::MwBind,
            MLX5_CQE_SYNDROME_BAD_RESP_ERR => Syndrome::BadResp,
            MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR => Syndrome::LocAccess,
            MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR => Syndrome::RemInvReq,
            MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR => Syndrome::RemAccess,
            MLX5_CQE_SYNDROME_REMOTE_OP_ERR => Syndrome::RemOp,
            MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR => Syndrome::RetryExc,
            MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR => Syndrome::RnrRetryExc,
            MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR => Syndrome::RemAbort,
            other => Syndrome::Unknown(other),
        }
    }
}

impl From<Syndrome> for u8 {
    #[inline]
    fn from(v: Syndrome) -> u8 {
        match v {
            Syndrome::LocLen => MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR,
            Syndrome::LocQpOp => MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR,
            Syndrome::LocProt => MLX5_CQE_SYNDROME_LOCAL_PROT_ERR,
            Syndrome::WrFlush => MLX5_CQE_SYNDROME_WR_FLUSH_ERR,
            Syndrome::MwBind => MLX5_CQE_SYNDROME_MW_BIND_ERR,
            Syndrome::BadResp => MLX5_CQE_SYNDROME_BAD_RESP_ERR,
            Syndrome::LocAccess => MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR,
            Syndrome::RemInvReq => MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR,
            Syndrome::RemAccess => MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR,
            Syndrome::RemOp => MLX5_CQE_SYNDROME_REMOTE_OP_ERR,
            Syndrome::RetryExc => MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
            Syndrome::RnrRetryExc => MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
            Syndrome::RemAbort => MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR,
            Syndrome::Unknown(other) => other,
        }
    }
}

mod field {
    use super::{err_off, off, Field};
    pub const WQE_ID: Field = off::WQE_ID..off::WQE_ID + 2;
    pub const ML_PATH: usize = off::ML_PATH;
    pub const SLID: Field = off::SLID..off::SLID + 2;
    pub const FLAGS_RQPN: Field = off::FLAGS_RQPN..off::FLAGS_RQPN + 4;
    pub const SRQN_UIDX: Field = off::SRQN_UIDX..off::SRQN_UIDX + 4;
    pub const IMM_INVAL_PKEY: Field = off::IMM_INVAL_PKEY..off::IMM_INVAL_PKEY + 4;
    pub const BYTE_CNT: Field = off::BYTE_CNT..off::BYTE_CNT + 4;
    pub const TIMESTAMP: Field = off::TIMESTAMP..off::TIMESTAMP + 8;
    pub const SOP_DROP_QPN: Field = off::SOP_DROP_QPN..off::SOP_DROP_QPN + 4;
    pub const WQE_COUNTER: Field = off::WQE_COUNTER..off::WQE_COUNTER + 2;
    pub const SIGNATURE: usize = off::SIGNATURE;
    pub const OP_OWN: usize = off::OP_OWN;
    // struct mlx5_err_cqe
    pub const ERR_SRQN: Field = err_off::SRQN..err_off::SRQN + 4;
    pub const VENDOR_ERR_SYND: usize = err_off::VENDOR_ERR_SYND;
    pub const SYNDROME: usize = err_off::SYNDROME;
}

/// A 64-byte CQE (`struct mlx5_cqe64`): 2 wqe_id, 17 ml_path, 22 slid, 24 flags_rqpn,
/// 32 srqn_uidx, 36 imm_inval_pkey, 44 byte_cnt, 48 timestamp, 56 sop_drop_qpn
/// (`s_wqe_opcode << 24 | qpn`), 60 wqe_counter, 62 signature, 63 op_own
/// (`opcode << 4 | format << 2 | se << 1 | owner`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe64<T: AsRef<[u8]>> {
    buffer: T,
}

/// An error CQE (`struct mlx5_err_cqe`): the same 64 bytes read as 32 srqn,
/// 54 vendor_err_synd, 55 syndrome, 56 `s_wqe_opcode << 24 | qpn`, 60 wqe_counter,
/// 62 signature, 63 op_own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrCqe<T: AsRef<[u8]>> {
    buffer: T,
}

/// The `op_own` byte: `opcode << 4 | format << 2 | se << 1 | owner`.
#[inline(always)]
fn op_own_of(opcode: CqeOpcode, format: u8, se: bool, owner: bool) -> u8 {
    let se = if se { MLX5_CQE_SE_MASK } else { 0 };
    let owner = if owner { MLX5_CQE_OWNER_MASK } else { 0 };
    (u8::from(opcode) << MLX5_CQE_OPCODE_SHIFT)
        | ((format & MLX5_CQE_FORMAT_MASK) << MLX5_CQE_FORMAT_SHIFT)
        | se
        | owner
}

macro_rules! cqe_common {
    ($name:ident) => {
        impl<T: AsRef<[u8]>> $name<T> {
            /// Length of the layout in bytes.
            pub const LEN: usize = MLX5_CQE64_LEN;

            /// Wraps `buffer` without checking its length (accessors panic if it is short).
            #[inline]
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }
            /// Wraps `buffer` after checking that it holds 64 bytes.
            #[inline]
            pub fn new_checked(buffer: T) -> Result<Self, Truncated> {
                let v = Self::new_unchecked(buffer);
                v.check_len()?;
                Ok(v)
            }
            /// Checks the length; after `Ok`, no accessor panics.
            #[inline]
            pub fn check_len(&self) -> Result<(), Truncated> {
                let got = self.buffer.as_ref().len();
                if got < MLX5_CQE64_LEN {
                    Err(Truncated {
                        needed: MLX5_CQE64_LEN,
                        got,
                    })
                } else {
                    Ok(())
                }
            }
            /// The wrapped buffer.
            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }
            /// The last byte: opcode, format, solicited, owner.
            #[inline]
            pub fn op_own(&self) -> u8 {
                self.buffer.as_ref()[field::OP_OWN]
            }
            /// The CQE opcode (`op_own >> 4`, as `mlx5dv_get_cqe_opcode`).
            #[inline]
            pub fn opcode(&self) -> CqeOpcode {
                CqeOpcode::from(self.op_own() >> MLX5_CQE_OPCODE_SHIFT)
            }
            /// The owner bit (`op_own & 1`, as `mlx5dv_get_cqe_owner`).
            #[inline]
            pub fn owner(&self) -> bool {
                self.op_own() & MLX5_CQE_OWNER_MASK != 0
            }
            /// The solicited-event bit (`op_own >> 1 & 1`, as `mlx5dv_get_cqe_se`).
            #[inline]
            pub fn se(&self) -> bool {
                self.op_own() & MLX5_CQE_SE_MASK != 0
            }
            /// The format bits (`op_own >> 2 & 3`, as `mlx5dv_get_cqe_format`); on responder
            /// CQEs these are the inline-scatter flags.
            #[inline]
            pub fn format(&self) -> u8 {
                (self.op_own() >> MLX5_CQE_FORMAT_SHIFT) & MLX5_CQE_FORMAT_MASK
            }
            /// The top byte of `sop_drop_qpn`: the send WQE opcode on requester CQEs.
            #[inline]
            pub fn s_wqe_opcode(&self) -> u8 {
                self.buffer.as_ref()[field::SOP_DROP_QPN.start]
            }
            /// The 24-bit QPN.
            #[inline]
            pub fn qpn(&self) -> u32 {
                be32(self.buffer.as_ref(), field::SOP_DROP_QPN) & MLX5_QPN_MASK
            }
            /// On requester CQEs, the `wqe_idx` of the completed WQE; on responder CQEs of an
            /// SRQ, the SRQ WQE index.
            #[inline]
            pub fn wqe_counter(&self) -> u16 {
                be16(self.buffer.as_ref(), field::WQE_COUNTER)
            }
            /// Signature byte.
            #[inline]
            pub fn signature(&self) -> u8 {
                self.buffer.as_ref()[field::SIGNATURE]
            }
        }

        impl<T: AsRef<[u8]> + AsMut<[u8]>> $name<T> {
            /// Sets `op_own` from its parts.
            #[inline]
            pub fn set_op_own(&mut self, opcode: CqeOpcode, format: u8, se: bool, owner: bool) {
                self.buffer.as_mut()[field::OP_OWN] = op_own_of(opcode, format, se, owner);
            }
            /// Flips only the owner bit (as `mlx5dv_set_cqe_owner`).
            #[inline]
            pub fn set_owner(&mut self, owner: bool) {
                let b = &mut self.buffer.as_mut()[field::OP_OWN];
                let owner = if owner { MLX5_CQE_OWNER_MASK } else { 0 };
                *b = (*b & !MLX5_CQE_OWNER_MASK) | owner;
            }
            /// Sets `sop_drop_qpn`: the send WQE opcode and the 24-bit qpn.
            #[inline]
            pub fn set_sop_qpn(&mut self, s_wqe_opcode: u8, qpn: u32) {
                let b = self.buffer.as_mut();
                put32(b, field::SOP_DROP_QPN, qpn & MLX5_QPN_MASK);
                b[field::SOP_DROP_QPN.start] = s_wqe_opcode;
            }
            /// Sets the wqe_counter.
            #[inline]
            pub fn set_wqe_counter(&mut self, v: u16) {
                put16(self.buffer.as_mut(), field::WQE_COUNTER, v);
            }
            /// Sets the signature byte.
            #[inline]
            pub fn set_signature(&mut self, v: u8) {
                self.buffer.as_mut()[field::SIGNATURE] = v;
            }
        }
    };
}

cqe_common!(Cqe64);
cqe_common!(ErrCqe);

impl<T: AsRef<[u8]>> Cqe64<T> {
    /// `wqe_id` (bytes 2-3; striding-RQ only).
    #[inline]
    pub fn wqe_id(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WQE_ID)
    }
    /// `ml_path` (byte 17).
    #[inline]
    pub fn ml_path(&self) -> u8 {
        self.buffer.as_ref()[field::ML_PATH]
    }
    /// Source LID (IB).
    #[inline]
    pub fn slid(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SLID)
    }
    /// The raw `flags_rqpn` word.
    #[inline]
    pub fn flags_rqpn(&self) -> u32 {
        be32(self.buffer.as_ref(), field::FLAGS_RQPN)
    }
    /// The top byte of `flags_rqpn` (GRH bits: [`MLX5_CQE_FLAGS_GRH`]).
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS_RQPN.start]
    }
    /// The source QPN of a UD receive (the low 24 bits of `flags_rqpn`).
    #[inline]
    pub fn src_qp(&self) -> u32 {
        self.flags_rqpn() & MLX5_QPN_MASK
    }
    /// The raw `srqn_uidx` word.
    #[inline]
    pub fn srqn_uidx(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SRQN_UIDX)
    }
    /// The SRQ number (low 24 bits of `srqn_uidx`).
    #[inline]
    pub fn srqn(&self) -> u32 {
        self.srqn_uidx() & MLX5_QPN_MASK
    }
    /// Immediate (host order of the big-endian field), invalidated rkey, or P_Key.
    #[inline]
    pub fn imm_inval_pkey(&self) -> u32 {
        be32(self.buffer.as_ref(), field::IMM_INVAL_PKEY)
    }
    /// Bytes transferred (received bytes on responder CQEs).
    #[inline]
    pub fn byte_cnt(&self) -> u32 {
        be32(self.buffer.as_ref(), field::BYTE_CNT)
    }
    /// Completion timestamp (raw device clock).
    #[inline]
    pub fn timestamp(&self) -> u64 {
        be64(self.buffer.as_ref(), field::TIMESTAMP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Cqe64<T> {
    /// Sets `wqe_id`.
    #[inline]
    pub fn set_wqe_id(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::WQE_ID, v);
    }
    /// Sets `ml_path`.
    #[inline]
    pub fn set_ml_path(&mut self, v: u8) {
        self.buffer.as_mut()[field::ML_PATH] = v;
    }
    /// Sets the source LID.
    #[inline]
    pub fn set_slid(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SLID, v);
    }
    /// Sets `flags_rqpn` from the flags byte and the 24-bit source QPN.
    #[inline]
    pub fn set_flags_rqpn(&mut self, flags: u8, src_qp: u32) {
        let b = self.buffer.as_mut();
        put32(b, field::FLAGS_RQPN, src_qp & MLX5_QPN_MASK);
        b[field::FLAGS_RQPN.start] = flags;
    }
    /// Sets `srqn_uidx`.
    #[inline]
    pub fn set_srqn_uidx(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::SRQN_UIDX, v);
    }
    /// Sets `imm_inval_pkey` (host order in).
    #[inline]
    pub fn set_imm_inval_pkey(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::IMM_INVAL_PKEY, v);
    }
    /// Sets `byte_cnt`.
    #[inline]
    pub fn set_byte_cnt(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::BYTE_CNT, v);
    }
    /// Sets the timestamp.
    #[inline]
    pub fn set_timestamp(&mut self, v: u64) {
        put64(self.buffer.as_mut(), field::TIMESTAMP, v);
    }
}

impl<T: AsRef<[u8]>> ErrCqe<T> {
    /// The SRQ number word (bytes 32-35).
    #[inline]
    pub fn srqn(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ERR_SRQN)
    }
    /// The vendor syndrome (byte 54).
    #[inline]
    pub fn vendor_err_synd(&self) -> u8 {
        self.buffer.as_ref()[field::VENDOR_ERR_SYND]
    }
    /// The syndrome (byte 55).
    #[inline]
    pub fn syndrome(&self) -> Syndrome {
        Syndrome::from(self.buffer.as_ref()[field::SYNDROME])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ErrCqe<T> {
    /// Sets the SRQ number word.
    #[inline]
    pub fn set_srqn(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::ERR_SRQN, v);
    }
    /// Sets the vendor syndrome.
    #[inline]
    pub fn set_vendor_err_synd(&mut self, v: u8) {
        self.buffer.as_mut()[field::VENDOR_ERR_SYND] = v;
    }
    /// Sets the syndrome.
    #[inline]
    pub fn set_syndrome(&mut self, v: Syndrome) {
        self.buffer.as_mut()[field::SYNDROME] = u8::from(v);
    }
}

/// A CQE as a plain value, for the device side (the sim writes CQEs with it) and for tests.
///
/// `emit` writes all 64 bytes. Which fields it writes depends on the opcode: an error CQE
/// (`ReqErr`, `RespErr`) is laid out as `struct mlx5_err_cqe` and carries `srqn`,
/// `syndrome` and `vendor_syndrome`, with everything else but the common tail zero; any other
/// CQE carries the `struct mlx5_cqe64` fields and no syndrome. `parse` follows the same rule,
/// so `parse(emit(r)) == r` for every `r` whose fields of the other layout are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CqeRepr {
    /// CQE opcode.
    pub opcode: CqeOpcode,
    /// Owner bit: the wrap parity of the device's producer index ([`cqe_owner_for`]).
    pub owner: bool,
    /// Solicited event.
    pub se: bool,
    /// Format bits (2 bits; on responder CQEs the inline-scatter flags).
    pub format: u8,
    /// The send WQE opcode on requester CQEs (top byte of `sop_drop_qpn`).
    pub s_wqe_opcode: u8,
    /// 24-bit QPN.
    pub qpn: u32,
    /// The completed WQE's `wqe_idx` (requester) or SRQ WQE index (responder on an SRQ).
    pub wqe_counter: u16,
    /// Signature byte.
    pub signature: u8,
    /// Bytes transferred (non-error CQEs).
    pub byte_cnt: u32,
    /// Immediate, invalidated rkey or P_Key, host order (non-error CQEs).
    pub imm_inval_pkey: u32,
    /// `srqn_uidx` (non-error CQEs) or the error CQE's srqn word.
    pub srqn: u32,
    /// Source QPN of a UD receive, 24 bits (non-error CQEs).
    pub src_qp: u32,
    /// Top byte of `flags_rqpn` (GRH bits, [`MLX5_CQE_FLAGS_GRH`]) (non-error CQEs).
    pub flags: u8,
    /// Source LID (non-error CQEs).
    pub slid: u16,
    /// `ml_path` (non-error CQEs).
    pub ml_path: u8,
    /// Timestamp (non-error CQEs).
    pub timestamp: u64,
    /// Syndrome (error CQEs; `Unknown(0)` on the others).
    pub syndrome: Syndrome,
    /// Vendor syndrome (error CQEs).
    pub vendor_syndrome: u8,
}

impl Default for CqeRepr {
    fn default() -> Self {
        CqeRepr {
            opcode: CqeOpcode::Req,
            owner: false,
            se: false,
            format: 0,
            s_wqe_opcode: 0,
            qpn: 0,
            wqe_counter: 0,
            signature: 0,
            byte_cnt: 0,
            imm_inval_pkey: 0,
            srqn: 0,
            src_qp: 0,
            flags: 0,
            slid: 0,
            ml_path: 0,
            timestamp: 0,
            syndrome: Syndrome::Unknown(0),
            vendor_syndrome: 0,
        }
    }
}

impl CqeRepr {
    /// Reads a CQE (the caller has checked ownership first).
    pub fn parse<T: AsRef<[u8]>>(cqe: &Cqe64<T>) -> Result<CqeRepr, Truncated> {
        cqe.check_len()?;
        let opcode = cqe.opcode();
        let mut r = CqeRepr {
            opcode,
            owner: cqe.owner(),
            se: cqe.se(),
            format: cqe.format(),
            s_wqe_opcode: cqe.s_wqe_opcode(),
            qpn: cqe.qpn(),
            wqe_counter: cqe.wqe_counter(),
            signature: cqe.signature(),
            ..CqeRepr::default()
        };
        if opcode.is_error() {
            let e = ErrCqe::new_unchecked(cqe.buffer.as_ref());
            r.srqn = e.srqn();
            r.syndrome = e.syndrome();
            r.vendor_syndrome = e.vendor_err_synd();
        } else {
            r.byte_cnt = cqe.byte_cnt();
            r.imm_inval_pkey = cqe.imm_inval_pkey();
            r.srqn = cqe.srqn_uidx();
            r.src_qp = cqe.src_qp();
            r.flags = cqe.flags();
            r.slid = cqe.slid();
            r.ml_path = cqe.ml_path();
            r.timestamp = cqe.timestamp();
        }
        Ok(r)
    }

    /// Writes all 64 bytes of the CQE ([`CqeRepr::to_words`]); `op_own` is written last (in
    /// program order; the caller that publishes to another thread adds its own release
    /// ordering).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, cqe: &mut Cqe64<T>) -> Result<(), Truncated> {
        cqe.check_len()?;
        let mut bytes = [0u8; MLX5_CQE64_LEN];
        for (chunk, w) in bytes.chunks_exact_mut(8).zip(self.to_words()) {
            chunk.copy_from_slice(&w.to_le_bytes());
        }
        let b = &mut cqe.buffer.as_mut()[..MLX5_CQE64_LEN];
        b[..off::OP_OWN].copy_from_slice(&bytes[..off::OP_OWN]);
        b[off::OP_OWN] = bytes[off::OP_OWN];
        Ok(())
    }

    /// The 64 bytes of the CQE as [`CqeWords`] (what [`CqeRepr::emit`] writes): built in
    /// registers, without a buffer, for a device that stores a CQE a word at a time.
    #[inline(always)]
    pub fn to_words(&self) -> CqeWords {
        let mut w = [0u64; MLX5_CQE64_LEN / 8];
        if self.opcode.is_error() {
            word_put(&mut w, field::ERR_SRQN, self.srqn.to_be_bytes());
            word_put(
                &mut w,
                at(field::VENDOR_ERR_SYND, 1),
                [self.vendor_syndrome],
            );
            word_put(&mut w, at(field::SYNDROME, 1), [u8::from(self.syndrome)]);
        } else {
            word_put(&mut w, at(field::ML_PATH, 1), [self.ml_path]);
            word_put(&mut w, field::SLID, self.slid.to_be_bytes());
            let flags_rqpn = u32::from(self.flags) << 24 | (self.src_qp & MLX5_QPN_MASK);
            word_put(&mut w, field::FLAGS_RQPN, flags_rqpn.to_be_bytes());
            word_put(&mut w, field::SRQN_UIDX, self.srqn.to_be_bytes());
            word_put(
                &mut w,
                field::IMM_INVAL_PKEY,
                self.imm_inval_pkey.to_be_bytes(),
            );
            word_put(&mut w, field::BYTE_CNT, self.byte_cnt.to_be_bytes());
            word_put(&mut w, field::TIMESTAMP, self.timestamp.to_be_bytes());
        }
        let sop_qpn = u32::from(self.s_wqe_opcode) << 24 | (self.qpn & MLX5_QPN_MASK);
        word_put(&mut w, field::SOP_DROP_QPN, sop_qpn.to_be_bytes());
        word_put(&mut w, field::WQE_COUNTER, self.wqe_counter.to_be_bytes());
        word_put(&mut w, at(field::SIGNATURE, 1), [self.signature]);
        let op_own = op_own_of(self.opcode, self.format, self.se, self.owner);
        word_put(&mut w, at(field::OP_OWN, 1), [op_own]);
        w
    }
}

/// A 64-byte CQE as eight words: word `i` holds bytes `8i..8i + 8`, byte `8i + k` in bits
/// `8k..8k + 8` (little-endian order, whatever the host's): stored with `to_le_bytes` (or
/// as the native word `w.to_le()`) it is the CQE's bytes.
pub type CqeWords = [u64; MLX5_CQE64_LEN / 8];

/// Put a field's bytes (in memory order) into the CQE words `w` at `f`. Every CQE field lies
/// inside one word (checked below for the fields [`CqeRepr::to_words`] writes).
#[inline(always)]
fn word_put<const N: usize>(w: &mut CqeWords, f: Field, bytes: [u8; N]) {
    let mut v = [0u8; 8];
    v[..N].copy_from_slice(&bytes);
    w[f.start / 8] |= u64::from_le_bytes(v) << (f.start % 8 * 8);
}

// No field `to_words` writes crosses a word.
const _: () = {
    const fn within_a_word(f: Field) -> bool {
        f.start / 8 == (f.end - 1) / 8
    }
    assert!(
        within_a_word(field::ERR_SRQN)
            && within_a_word(field::SLID)
            && within_a_word(field::FLAGS_RQPN)
            && within_a_word(field::SRQN_UIDX)
            && within_a_word(field::IMM_INVAL_PKEY)
            && within_a_word(field::BYTE_CNT)
            && within_a_word(field::TIMESTAMP)
            && within_a_word(field::SOP_DROP_QPN)
            && within_a_word(field::WQE_COUNTER)
            && field::VENDOR_ERR_SYND < MLX5_CQE64_LEN
            && field::SYNDROME < MLX5_CQE64_LEN
            && field::ML_PATH < MLX5_CQE64_LEN
            && field::SIGNATURE < MLX5_CQE64_LEN
            && field::OP_OWN == MLX5_CQE64_LEN - 1
    );
};

/// Byte offset of the 64-byte CQE of slot `index & (cqe_cnt - 1)` in a CQ buffer of
/// `cqe_size`-byte slots (64 or 128; in a 128-byte slot the CQE is the second half).
/// `cqe_cnt` must be a power of two and `cqe_size` 64 or 128 (the CQ code checks both once,
/// when it takes the CQ); other values give a meaningless offset, never a panic.
#[inline]
pub fn cqe64_offset(index: u32, cqe_cnt: u32, cqe_size: usize) -> usize {
    ((index & cqe_cnt.wrapping_sub(1)) as usize)
        .wrapping_mul(cqe_size)
        .wrapping_add(cqe_size.saturating_sub(MLX5_CQE64_LEN))
}

/// The owner bit the device writes into the CQE at producer index `index`: the wrap parity
/// `!!(index & cqe_cnt)`.
#[inline]
pub fn cqe_owner_for(index: u32, cqe_cnt: u32) -> bool {
    index & cqe_cnt != 0
}

/// True when the CQE with last byte `op_own` at consumer index `ci` belongs to software: its
/// opcode is not INVALID and its owner bit equals the wrap parity of `ci`. Read the body only
/// after this returns true, behind the from-device load barrier. Written as two tests, not as
/// [`cqe_sw_owned_x`] of `op_own ^ cqe_parity(..)`: with the parity computed from `ci` here,
/// the compiler gives the two tests fewer instructions (a poller that keeps the parity uses
/// [`cqe_sw_owned_x`]).
#[inline]
pub fn cqe_sw_owned(op_own: u8, ci: u32, cqe_cnt: u32) -> bool {
    op_own >> MLX5_CQE_OPCODE_SHIFT != MLX5_CQE_INVALID
        && op_own & MLX5_CQE_OWNER_MASK == cqe_parity(ci, cqe_cnt)
}

/// The owner bit software expects at consumer index `ci`, as its `op_own` bit: 0 or
/// `MLX5_CQE_OWNER_MASK`. XORed into `op_own` it leaves `x` whose owner bit is 0 exactly when
/// the owner matches; [`cqe_sw_owned_x`] and [`CQE_PLAIN_OWNED_MASK`] test that `x`. A poller
/// keeps it for a whole lap of the ring (it flips where `ci` wraps).
#[inline(always)]
pub const fn cqe_parity(ci: u32, cqe_cnt: u32) -> u8 {
    if ci & cqe_cnt != 0 {
        MLX5_CQE_OWNER_MASK
    } else {
        0
    }
}

/// [`cqe_sw_owned`] from `x = op_own ^ cqe_parity(ci, cqe_cnt)`, in one compare: `x` rotated
/// right by one has the owner mismatch in bit 7 and the opcode in bits 3..6, so it is below
/// `MLX5_CQE_INVALID << 3` exactly when the owner matches and the opcode is not INVALID.
#[inline(always)]
pub const fn cqe_sw_owned_x(x: u8) -> bool {
    x.rotate_right(1) < (MLX5_CQE_INVALID << (MLX5_CQE_OPCODE_SHIFT - 1))
}
// The rotation above needs the owner bit at bit 0 and INVALID the largest opcode.
const _: () = assert!(MLX5_CQE_OWNER_MASK == 1 && MLX5_CQE_INVALID == 0x0f);

/// The `op_own` bits a plain CQE is recognised on, in `x = op_own ^ cqe_parity(..)`: the
/// opcode, the scatter (format) bits and the owner bit (not the solicited bit).
/// `x & CQE_PLAIN_OWNED_MASK == 0`: a software-owned successful requester CQE with no
/// scattered data; `(x ^ (MLX5_CQE_RESP_SEND << MLX5_CQE_OPCODE_SHIFT)) & CQE_PLAIN_OWNED_MASK
/// == 0`: the same for an incoming SEND.
pub const CQE_PLAIN_OWNED_MASK: u8 = MLX5_CQE_REQ_PLAIN_MASK | MLX5_CQE_OWNER_MASK;

/// [`CQE_PLAIN_OWNED_MASK`] without the opcode: `x & CQE_UNSCATTERED_OWNED_MASK == 0` says the
/// owner matches and no data is scattered into the CQE, whatever the opcode (a receive
/// poller then checks the opcode itself).
pub const CQE_UNSCATTERED_OWNED_MASK: u8 = CQE_PLAIN_OWNED_MASK & !(0x0f << MLX5_CQE_OPCODE_SHIFT);

#[cfg(test)]
mod tests;
