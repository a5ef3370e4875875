//! Send and receive WQE segments (`struct mlx5_wqe_*_seg` in `mlx5dv.h`).
//!
//! Each view's private `mod` of byte ranges is derived from [`super::offset`] (offset plus the
//! C field's size), the one table of offsets, which `tests/golden_mlx5.rs` checks field by
//! field against `mlx5dv.h` (`fixtures/mlx5/layout.txt`).

use super::consts::offset as off;
use super::consts::*;
use super::{at, be16, be32, be64, put16, put32, put64, Field, Truncated};

/// The `fm_ce_se` byte of the ctrl segment (byte 11: fence mode, completion, solicited) of a
/// request: the one map from a request's flags to the `MLX5_WQE_CTRL_*` bits.
///
/// A request's flags are given as a 3-bit set: [`FLAG_SIGNALED`](fm_ce_se::FLAG_SIGNALED)
/// → `MLX5_WQE_CTRL_CQ_UPDATE`, [`FLAG_FENCE`](fm_ce_se::FLAG_FENCE) →
/// `MLX5_WQE_CTRL_FENCE`, [`FLAG_SOLICITED`](fm_ce_se::FLAG_SOLICITED) →
/// `MLX5_WQE_CTRL_SOLICITED`. The data-plane `SendFlags` uses the same bits (the mlx5
/// provider asserts it at compile time), so its bits index [`BY_FLAGS`](fm_ce_se::BY_FLAGS)
/// directly.
pub mod fm_ce_se {
    use super::super::consts::{
        MLX5_WQE_CTRL_CQ_UPDATE, MLX5_WQE_CTRL_FENCE, MLX5_WQE_CTRL_SOLICITED,
    };
    /// The request is signaled: its WQE generates a CQE.
    pub const FLAG_SIGNALED: u8 = 1 << 0;
    /// The request waits for earlier READs and atomics.
    pub const FLAG_FENCE: u8 = 1 << 1;
    /// The responder raises a solicited event.
    pub const FLAG_SOLICITED: u8 = 1 << 2;
    /// All three flags.
    pub const FLAGS: u8 = FLAG_SIGNALED | FLAG_FENCE | FLAG_SOLICITED;

    /// `fm_ce_se` for every set of flags, indexed by the set.
    pub const BY_FLAGS: [u8; 8] = {
        let mut t = [0u8; 8];
        let mut i = 0;
        while i < t.len() {
            let f = i as u8;
            let mut v = 0;
            if f & FLAG_SIGNALED != 0 {
                v |= MLX5_WQE_CTRL_CQ_UPDATE;
            }
            if f & FLAG_FENCE != 0 {
                v |= MLX5_WQE_CTRL_FENCE;
            }
            if f & FLAG_SOLICITED != 0 {
                v |= MLX5_WQE_CTRL_SOLICITED;
            }
            t[i] = v;
            i += 1;
        }
        t
    };

    /// `fm_ce_se` for the set `flags` (bits outside [`FLAGS`] are ignored).
    #[inline(always)]
    pub const fn of(flags: u8) -> u8 {
        BY_FLAGS[(flags & FLAGS) as usize]
    }
}

/// A send WQE opcode (the low byte of the ctrl segment). Unknown values are kept.
// Each known variant's discriminant is its opcode byte, so `u8::from` is the tag itself
// (one compare for `Unknown`), not a table: the send queue's writer converts on every post.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Opcode {
    /// `MLX5_OPCODE_NOP` 0x00.
    Nop = MLX5_OPCODE_NOP,
    /// `MLX5_OPCODE_RDMA_WRITE` 0x08.
    RdmaWrite = MLX5_OPCODE_RDMA_WRITE,
    /// `MLX5_OPCODE_RDMA_WRITE_IMM` 0x09.
    RdmaWriteImm = MLX5_OPCODE_RDMA_WRITE_IMM,
    /// `MLX5_OPCODE_SEND` 0x0a.
    Send = MLX5_OPCODE_SEND,
    /// `MLX5_OPCODE_SEND_IMM` 0x0b.
    SendImm = MLX5_OPCODE_SEND_IMM,
    /// `MLX5_OPCODE_RDMA_READ` 0x10.
    RdmaRead = MLX5_OPCODE_RDMA_READ,
    /// `MLX5_OPCODE_ATOMIC_CS` 0x11.
    AtomicCs = MLX5_OPCODE_ATOMIC_CS,
    /// `MLX5_OPCODE_ATOMIC_FA` 0x12.
    AtomicFa = MLX5_OPCODE_ATOMIC_FA,
    /// Any other value.
    Unknown(u8) = 0xff,
}

impl From<u8> for Opcode {
    #[inline]
    fn from(v: u8) -> Opcode {
        match v {
            MLX5_OPCODE_NOP => Opcode::Nop,
            MLX5_OPCODE_RDMA_WRITE => Opcode::RdmaWrite,
            MLX5_OPCODE_RDMA_WRITE_IMM => Opcode::RdmaWriteImm,
            MLX5_OPCODE_SEND => Opcode::Send,
            MLX5_OPCODE_SEND_IMM => Opcode::SendImm,
            MLX5_OPCODE_RDMA_READ => Opcode::RdmaRead,
            MLX5_OPCODE_ATOMIC_CS => Opcode::AtomicCs,
            MLX5_OPCODE_ATOMIC_FA => Opcode::AtomicFa,
            other => Opcode::Unknown(other),
        }
    }
}

impl From<Opcode> for u8 {
    #[inline]
    fn from(v: Opcode) -> u8 {
        match v {
            Opcode::Nop => MLX5_OPCODE_NOP,
            Opcode::RdmaWrite => MLX5_OPCODE_RDMA_WRITE,
            Opcode::RdmaWriteImm => MLX5_OPCODE_RDMA_WRITE_IMM,
            Opcode::Send => MLX5_OPCODE_SEND,
            Opcode::SendImm => MLX5_OPCODE_SEND_IMM,
            Opcode::RdmaRead => MLX5_OPCODE_RDMA_READ,
            Opcode::AtomicCs => MLX5_OPCODE_ATOMIC_CS,
            Opcode::AtomicFa => MLX5_OPCODE_ATOMIC_FA,
            Opcode::Unknown(other) => other,
        }
    }
}

impl Opcode {
    /// The rdma-core name without the `MLX5_OPCODE_` prefix.
    pub fn name(self) -> &'static str {
        match self {
            Opcode::Nop => "NOP",
            Opcode::RdmaWrite => "RDMA_WRITE",
            Opcode::RdmaWriteImm => "RDMA_WRITE_IMM",
            Opcode::Send => "SEND",
            Opcode::SendImm => "SEND_IMM",
            Opcode::RdmaRead => "RDMA_READ",
            Opcode::AtomicCs => "ATOMIC_CS",
            Opcode::AtomicFa => "ATOMIC_FA",
            Opcode::Unknown(_) => "UNKNOWN",
        }
    }
    /// True for the opcodes followed by a raddr segment (RDMA and atomics).
    #[inline]
    pub fn has_raddr(self) -> bool {
        matches!(
            self,
            Opcode::RdmaWrite
                | Opcode::RdmaWriteImm
                | Opcode::RdmaRead
                | Opcode::AtomicCs
                | Opcode::AtomicFa
        )
    }
    /// True for the atomics (raddr, then an atomic segment).
    #[inline]
    pub fn is_atomic(self) -> bool {
        matches!(self, Opcode::AtomicCs | Opcode::AtomicFa)
    }
    /// True for the opcodes that carry an immediate in the ctrl segment.
    #[inline]
    pub fn has_imm(self) -> bool {
        matches!(self, Opcode::RdmaWriteImm | Opcode::SendImm)
    }
}

macro_rules! view {
    ($(#[$doc:meta])* $name:ident, $len:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct $name<T: AsRef<[u8]>> {
            buffer: T,
        }

        impl<T: AsRef<[u8]>> $name<T> {
            /// Length of the layout in bytes.
            pub const LEN: usize = $len;

            /// Wraps `buffer` without checking its length (accessors panic if it is short).
            #[inline]
            pub const fn new_unchecked(buffer: T) -> Self {
                $name { buffer }
            }

            /// Wraps `buffer` after checking that it holds the whole layout.
            #[inline]
            pub fn new_checked(buffer: T) -> Result<Self, Truncated> {
                let v = Self::new_unchecked(buffer);
                v.check_len()?;
                Ok(v)
            }

            /// Checks that the buffer holds the whole layout; after `Ok`, no accessor panics.
            #[inline]
            pub fn check_len(&self) -> Result<(), Truncated> {
                let got = self.buffer.as_ref().len();
                if got < Self::LEN {
                    Err(Truncated { needed: Self::LEN, got })
                } else {
                    Ok(())
                }
            }

            /// The wrapped buffer.
            #[inline]
            pub fn into_inner(self) -> T {
                self.buffer
            }
        }
    };
}

mod ctrl {
    use super::{at, off::ctrl as o, Field};
    pub const OPMOD: usize = o::OPMOD_IDX_OPCODE;
    pub const WQE_IDX: Field = at(o::WQE_IDX, 2);
    pub const OPCODE: usize = o::OPCODE;
    pub const QPN_DS: Field = at(o::QPN_DS, 4);
    pub const DS: usize = o::DS;
    pub const SIGNATURE: usize = o::SIGNATURE;
    pub const DCI_STREAM: Field = at(o::DCI_STREAM_CHANNEL_ID, 2);
    pub const FM_CE_SE: usize = o::FM_CE_SE;
    pub const IMM: Field = at(o::IMM, 4);
}

view!(
    /// The ctrl segment that starts every send WQE (`struct mlx5_wqe_ctrl_seg`):
    /// 0 `opmod<<24 | wqe_idx<<8 | opcode`, 4 `qpn<<8 | ds`, 8 signature,
    /// 9 dci_stream_channel_id, 11 fm_ce_se, 12 imm.
    CtrlSeg,
    MLX5_WQE_DS_UNITS
);

impl<T: AsRef<[u8]>> CtrlSeg<T> {
    /// Opcode modifier (byte 0).
    #[inline]
    pub fn opmod(&self) -> u8 {
        self.buffer.as_ref()[ctrl::OPMOD]
    }
    /// The 16-bit WQE index (the low 16 bits of the producer index).
    #[inline]
    pub fn wqe_idx(&self) -> u16 {
        be16(self.buffer.as_ref(), ctrl::WQE_IDX)
    }
    /// The opcode (byte 3).
    #[inline]
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.buffer.as_ref()[ctrl::OPCODE])
    }
    /// The 24-bit QP number.
    #[inline]
    pub fn qpn(&self) -> u32 {
        be32(self.buffer.as_ref(), ctrl::QPN_DS) >> MLX5_WQE_CTRL_QPN_SHIFT
    }
    /// The WQE size in 16-byte units (the whole byte 7; the device uses its low 6 bits).
    #[inline]
    pub fn ds(&self) -> u8 {
        self.buffer.as_ref()[ctrl::DS]
    }
    /// Signature byte (8).
    #[inline]
    pub fn signature(&self) -> u8 {
        self.buffer.as_ref()[ctrl::SIGNATURE]
    }
    /// DCI stream channel id (bytes 9-10; zero for RC/UC/UD).
    #[inline]
    pub fn dci_stream_channel_id(&self) -> u16 {
        be16(self.buffer.as_ref(), ctrl::DCI_STREAM)
    }
    /// Fence mode, completion and solicited flags (byte 11, see [`fm_ce_se`]).
    #[inline]
    pub fn fm_ce_se(&self) -> u8 {
        self.buffer.as_ref()[ctrl::FM_CE_SE]
    }
    /// The immediate, host order (written big-endian).
    #[inline]
    pub fn imm(&self) -> u32 {
        be32(self.buffer.as_ref(), ctrl::IMM)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> CtrlSeg<T> {
    /// Sets bytes 0-3: opmod, wqe_idx, opcode.
    #[inline]
    pub fn set_opmod_idx_opcode(&mut self, opmod: u8, wqe_idx: u16, opcode: Opcode) {
        let b = self.buffer.as_mut();
        b[ctrl::OPMOD] = opmod;
        put16(b, ctrl::WQE_IDX, wqe_idx);
        b[ctrl::OPCODE] = u8::from(opcode);
    }
    /// Sets bytes 4-7: the 24-bit qpn (higher bits dropped) and ds.
    #[inline]
    pub fn set_qpn_ds(&mut self, qpn: u32, ds: u8) {
        put32(
            self.buffer.as_mut(),
            ctrl::QPN_DS,
            (qpn << MLX5_WQE_CTRL_QPN_SHIFT) | u32::from(ds),
        );
    }
    /// Sets the signature byte.
    #[inline]
    pub fn set_signature(&mut self, v: u8) {
        self.buffer.as_mut()[ctrl::SIGNATURE] = v;
    }
    /// Sets the DCI stream channel id.
    #[inline]
    pub fn set_dci_stream_channel_id(&mut self, v: u16) {
        put16(self.buffer.as_mut(), ctrl::DCI_STREAM, v);
    }
    /// Sets the fm_ce_se byte.
    #[inline]
    pub fn set_fm_ce_se(&mut self, v: u8) {
        self.buffer.as_mut()[ctrl::FM_CE_SE] = v;
    }
    /// Sets the immediate (host order in, big-endian on the wire).
    #[inline]
    pub fn set_imm(&mut self, v: u32) {
        put32(self.buffer.as_mut(), ctrl::IMM, v);
    }
}

mod raddr {
    use super::{at, off::raddr as o, Field};
    pub const RADDR: Field = at(o::RADDR, 8);
    pub const RKEY: Field = at(o::RKEY, 4);
    pub const RESERVED: Field = at(o::RESERVED, 4);
}

view!(
    /// The remote-address segment of RDMA and atomic WQEs (`struct mlx5_wqe_raddr_seg`):
    /// 0 raddr, 8 rkey, 12 reserved (zero).
    RaddrSeg,
    MLX5_WQE_DS_UNITS
);

impl<T: AsRef<[u8]>> RaddrSeg<T> {
    /// Remote virtual address.
    #[inline]
    pub fn raddr(&self) -> u64 {
        be64(self.buffer.as_ref(), raddr::RADDR)
    }
    /// Remote key.
    #[inline]
    pub fn rkey(&self) -> u32 {
        be32(self.buffer.as_ref(), raddr::RKEY)
    }
    /// The reserved word (zero when well formed).
    #[inline]
    pub fn reserved(&self) -> u32 {
        be32(self.buffer.as_ref(), raddr::RESERVED)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RaddrSeg<T> {
    /// Writes the whole segment: raddr, rkey, and the reserved word as zero.
    #[inline]
    pub fn set(&mut self, raddr: u64, rkey: u32) {
        let b = self.buffer.as_mut();
        put64(b, raddr::RADDR, raddr);
        put32(b, raddr::RKEY, rkey);
        put32(b, raddr::RESERVED, 0);
    }
}

mod data {
    use super::{at, off::data as o, Field};
    pub const BYTE_COUNT: Field = at(o::BYTE_COUNT, 4);
    pub const LKEY: Field = at(o::LKEY, 4);
    pub const ADDR: Field = at(o::ADDR, 8);
}

view!(
    /// A data (scatter/gather) segment (`struct mlx5_wqe_data_seg`): 0 byte_count, 4 lkey,
    /// 8 addr.
    DataSeg,
    MLX5_WQE_DS_UNITS
);

impl<T: AsRef<[u8]>> DataSeg<T> {
    /// Byte count (the whole 32-bit word; bit 31 set means this is an inline segment).
    #[inline]
    pub fn byte_count(&self) -> u32 {
        be32(self.buffer.as_ref(), data::BYTE_COUNT)
    }
    /// Local key.
    #[inline]
    pub fn lkey(&self) -> u32 {
        be32(self.buffer.as_ref(), data::LKEY)
    }
    /// Local virtual address.
    #[inline]
    pub fn addr(&self) -> u64 {
        be64(self.buffer.as_ref(), data::ADDR)
    }
    /// True for the receive-WQE terminator (byte_count 0, lkey [`MLX5_INVALID_LKEY`]).
    #[inline]
    pub fn is_terminator(&self) -> bool {
        self.byte_count() == 0 && self.lkey() == MLX5_INVALID_LKEY
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DataSeg<T> {
    /// Writes the whole segment (as `mlx5dv_set_data_seg`).
    #[inline]
    pub fn set(&mut self, byte_count: u32, lkey: u32, addr: u64) {
        let b = self.buffer.as_mut();
        put32(b, data::BYTE_COUNT, byte_count);
        put32(b, data::LKEY, lkey);
        put64(b, data::ADDR, addr);
    }
    /// Writes the receive-WQE terminator: byte_count 0, lkey [`MLX5_INVALID_LKEY`], addr 0.
    #[inline]
    pub fn set_terminator(&mut self) {
        self.set(0, MLX5_INVALID_LKEY, 0);
    }
}

mod inline {
    use super::{at, off::inline as o, Field};
    pub const BYTE_COUNT: Field = at(o::BYTE_COUNT, 4);
}

view!(
    /// The 4-byte header of an inline data segment (`struct mlx5_wqe_inl_data_seg`):
    /// `byte_count = len | MLX5_INLINE_SEG`; the data follows it (at
    /// [`super::offset::inline::DATA`]), and the segment is padded to a
    /// multiple of 16 bytes (the header counts).
    InlineSeg,
    MLX5_WQE_INLINE_SEG_LEN
);

impl<T: AsRef<[u8]>> InlineSeg<T> {
    /// The raw header word.
    #[inline]
    pub fn byte_count(&self) -> u32 {
        be32(self.buffer.as_ref(), inline::BYTE_COUNT)
    }
    /// True when the inline bit is set.
    #[inline]
    pub fn is_inline(&self) -> bool {
        self.byte_count() & MLX5_INLINE_SEG != 0
    }
    /// The inline data length (the header without its inline bit).
    #[inline]
    pub fn len(&self) -> u32 {
        self.byte_count() & !MLX5_INLINE_SEG
    }
    /// True when the inline length is zero.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Units (16 bytes) the whole segment takes: `align(len + header, 16) / 16`.
    #[inline]
    pub fn units(&self) -> usize {
        inline_units(self.len() as usize)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> InlineSeg<T> {
    /// Writes the header for `len` bytes of inline data (bit 31 set).
    #[inline]
    pub fn set_len(&mut self, len: u32) {
        put32(
            self.buffer.as_mut(),
            inline::BYTE_COUNT,
            len | MLX5_INLINE_SEG,
        );
    }
}

/// Units (16 bytes) an inline segment of `len` data bytes takes, header included.
#[inline(always)]
#[allow(clippy::manual_div_ceil)] // div_ceil takes three more instructions on the post path
pub(crate) const fn inline_units(len: usize) -> usize {
    (len + off::inline::DATA + MLX5_WQE_DS_UNITS - 1) / MLX5_WQE_DS_UNITS
}

mod atomic {
    use super::{at, off::atomic as o, Field};
    pub const SWAP_ADD: Field = at(o::SWAP_ADD, 8);
    pub const COMPARE: Field = at(o::COMPARE, 8);
}

view!(
    /// The atomic segment (`struct mlx5_wqe_atomic_seg`): 0 swap_add, 8 compare.
    /// Compare-and-swap puts the swap value in swap_add; fetch-add puts the addend there and
    /// zero in compare.
    AtomicSeg,
    MLX5_WQE_DS_UNITS
);

impl<T: AsRef<[u8]>> AtomicSeg<T> {
    /// Swap value (CS) or addend (FA).
    #[inline]
    pub fn swap_add(&self) -> u64 {
        be64(self.buffer.as_ref(), atomic::SWAP_ADD)
    }
    /// Compare value (CS).
    #[inline]
    pub fn compare(&self) -> u64 {
        be64(self.buffer.as_ref(), atomic::COMPARE)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AtomicSeg<T> {
    /// Writes the whole segment.
    #[inline]
    pub fn set(&mut self, swap_add: u64, compare: u64) {
        let b = self.buffer.as_mut();
        put64(b, atomic::SWAP_ADD, swap_add);
        put64(b, atomic::COMPARE, compare);
    }
}

mod av {
    use super::{at, off::av as o, Field};
    pub const KEY: Field = at(o::KEY, 8);
    pub const QKEY: Field = at(o::QKEY, 4);
    pub const DQP_DCT: Field = at(o::DQP_DCT, 4);
    pub const STAT_RATE_SL: usize = o::STAT_RATE_SL;
    pub const FL_MLID: usize = o::FL_MLID;
    pub const RLID: Field = at(o::RLID, 2);
    pub const RESERVED0: Field = at(o::RESERVED0, 4);
    pub const RMAC: Field = at(o::RMAC, 6);
    pub const TCLASS: usize = o::TCLASS;
    pub const HOP_LIMIT: usize = o::HOP_LIMIT;
    pub const GRH_GID_FL: Field = at(o::GRH_GID_FL, 4);
    pub const RGID: Field = at(o::RGID, 16);
}

view!(
    /// The datagram segment of UD WQEs: the 48-byte address vector (`struct mlx5_wqe_av`):
    /// 0 key (qkey at 0, reserved at 4; or the 64-bit DC key), 8 dqp_dct, 12 stat_rate_sl,
    /// 13 fl_mlid, 14 rlid, 16 reserved, 20 rmac, 26 tclass, 27 hop_limit, 28 grh_gid_fl,
    /// 32 rgid.
    DatagramSeg,
    MLX5_AV_LEN
);

impl<T: AsRef<[u8]>> DatagramSeg<T> {
    /// The 64-bit key word (`dc_key`; for UD the qkey is its high half).
    #[inline]
    pub fn key(&self) -> u64 {
        be64(self.buffer.as_ref(), av::KEY)
    }
    /// Q_Key (bytes 0-3).
    #[inline]
    pub fn qkey(&self) -> u32 {
        be32(self.buffer.as_ref(), av::QKEY)
    }
    /// The raw `dqp_dct` word (bit 31: extended AV; low 24 bits: the destination QPN).
    #[inline]
    pub fn dqp_dct(&self) -> u32 {
        be32(self.buffer.as_ref(), av::DQP_DCT)
    }
    /// Destination QPN (the low 24 bits of `dqp_dct`).
    #[inline]
    pub fn dqpn(&self) -> u32 {
        self.dqp_dct() & MLX5_QPN_MASK
    }
    /// True when bit 31 of `dqp_dct` marks an extended AV.
    #[inline]
    pub fn extended(&self) -> bool {
        self.dqp_dct() & MLX5_EXTENDED_UD_AV != 0
    }
    /// Static rate and service level.
    #[inline]
    pub fn stat_rate_sl(&self) -> u8 {
        self.buffer.as_ref()[av::STAT_RATE_SL]
    }
    /// Force-loopback and the LID path bits.
    #[inline]
    pub fn fl_mlid(&self) -> u8 {
        self.buffer.as_ref()[av::FL_MLID]
    }
    /// Remote LID (or the RoCE UDP source port).
    #[inline]
    pub fn rlid(&self) -> u16 {
        be16(self.buffer.as_ref(), av::RLID)
    }
    /// Remote MAC (RoCE).
    #[inline]
    pub fn rmac(&self) -> [u8; 6] {
        let mut m = [0u8; 6];
        m.copy_from_slice(&self.buffer.as_ref()[av::RMAC]);
        m
    }
    /// Traffic class.
    #[inline]
    pub fn tclass(&self) -> u8 {
        self.buffer.as_ref()[av::TCLASS]
    }
    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[av::HOP_LIMIT]
    }
    /// GRH present bit, SGID index and flow label.
    #[inline]
    pub fn grh_gid_fl(&self) -> u32 {
        be32(self.buffer.as_ref(), av::GRH_GID_FL)
    }
    /// Remote GID.
    #[inline]
    pub fn rgid(&self) -> [u8; 16] {
        let mut g = [0u8; 16];
        g.copy_from_slice(&self.buffer.as_ref()[av::RGID]);
        g
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> DatagramSeg<T> {
    /// Sets the 64-bit key word (as `mlx5dv_set_dgram_seg`: for UD pass `qkey << 32`).
    #[inline]
    pub fn set_key(&mut self, key: u64) {
        put64(self.buffer.as_mut(), av::KEY, key);
    }
    /// Sets the qkey and zeroes the reserved word after it.
    #[inline]
    pub fn set_qkey(&mut self, qkey: u32) {
        self.set_key(u64::from(qkey) << 32);
    }
    /// Sets `dqp_dct` to `qpn` (24 bits) with the extended-AV bit when `extended`.
    #[inline]
    pub fn set_dqp_dct(&mut self, qpn: u32, extended: bool) {
        let ext = if extended { MLX5_EXTENDED_UD_AV } else { 0 };
        put32(
            self.buffer.as_mut(),
            av::DQP_DCT,
            (qpn & MLX5_QPN_MASK) | ext,
        );
    }
    /// Sets the static rate / service level byte.
    #[inline]
    pub fn set_stat_rate_sl(&mut self, v: u8) {
        self.buffer.as_mut()[av::STAT_RATE_SL] = v;
    }
    /// Sets the fl_mlid byte.
    #[inline]
    pub fn set_fl_mlid(&mut self, v: u8) {
        self.buffer.as_mut()[av::FL_MLID] = v;
    }
    /// Sets the remote LID.
    #[inline]
    pub fn set_rlid(&mut self, v: u16) {
        put16(self.buffer.as_mut(), av::RLID, v);
    }
    /// Zeroes the 4 reserved bytes at 16.
    #[inline]
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[av::RESERVED0].fill(0);
    }
    /// Sets the remote MAC.
    #[inline]
    pub fn set_rmac(&mut self, v: [u8; 6]) {
        self.buffer.as_mut()[av::RMAC].copy_from_slice(&v);
    }
    /// Sets the traffic class.
    #[inline]
    pub fn set_tclass(&mut self, v: u8) {
        self.buffer.as_mut()[av::TCLASS] = v;
    }
    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[av::HOP_LIMIT] = v;
    }
    /// Sets the GRH / SGID index / flow label word.
    #[inline]
    pub fn set_grh_gid_fl(&mut self, v: u32) {
        put32(self.buffer.as_mut(), av::GRH_GID_FL, v);
    }
    /// Sets the remote GID.
    #[inline]
    pub fn set_rgid(&mut self, v: [u8; 16]) {
        self.buffer.as_mut()[av::RGID].copy_from_slice(&v);
    }
}

mod srq_next {
    use super::{at, off::srq_next as o, Field, MLX5_WQE_DS_UNITS};
    pub const RSVD0: Field = at(o::RSVD0, 2);
    pub const NEXT_WQE_INDEX: Field = at(o::NEXT_WQE_INDEX, 2);
    pub const SIGNATURE: usize = o::SIGNATURE;
    pub const RSVD1: Field = o::RSVD1..MLX5_WQE_DS_UNITS;
}

view!(
    /// The first unit of an SRQ WQE (`struct mlx5_wqe_srq_next_seg`): 0 reserved,
    /// 2 next_wqe_index, 4 signature, 5 reserved. Data segments follow it.
    SrqNextSeg,
    MLX5_WQE_DS_UNITS
);

impl<T: AsRef<[u8]>> SrqNextSeg<T> {
    /// Index of the next WQE in the SRQ's free list.
    #[inline]
    pub fn next_wqe_index(&self) -> u16 {
        be16(self.buffer.as_ref(), srq_next::NEXT_WQE_INDEX)
    }
    /// Signature byte.
    #[inline]
    pub fn signature(&self) -> u8 {
        self.buffer.as_ref()[srq_next::SIGNATURE]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SrqNextSeg<T> {
    /// Writes the whole unit: next_wqe_index, signature, reserved bytes zero.
    #[inline]
    pub fn set(&mut self, next_wqe_index: u16, signature: u8) {
        let b = self.buffer.as_mut();
        b[srq_next::RSVD0].fill(0);
        put16(b, srq_next::NEXT_WQE_INDEX, next_wqe_index);
        b[srq_next::SIGNATURE] = signature;
        b[srq_next::RSVD1].fill(0);
    }
}

#[cfg(test)]
mod tests;
