//! Whole WQEs: the send-WQE encoder (host side) and parser (device side), receive and SRQ
//! WQEs.
//!
//! A send WQE is, in order: the ctrl segment; for UD the 48-byte address vector; for RDMA
//! and atomic opcodes the raddr segment; for atomics the atomic segment; then the data: either
//! data segments (one per SGE of non-zero length) or one inline segment (a 4-byte header
//! `len | 0x80000000`, the bytes, zero padding to a 16-byte boundary; none when the length is
//! zero). `ds` counts all of these in 16-byte units; the WQE takes `ceil(ds / 4)` WQEBBs and
//! runs on from the end of the ring to its start.

use super::consts::offset;
use super::consts::{
    MAX_DS, MLX5_AV_LEN, MLX5_INLINE_SEG, MLX5_SEND_WQE_BB, MLX5_WQE_DS_UNITS,
    MLX5_WQE_INLINE_SEG_LEN,
};
use super::seg::{
    inline_units, AtomicSeg, CtrlSeg, DataSeg, InlineSeg, Opcode, RaddrSeg, SrqNextSeg,
};
use super::DatagramSeg;

/// 16-byte units in a WQEBB.
const UNITS_PER_BB: usize = MLX5_SEND_WQE_BB / MLX5_WQE_DS_UNITS;

/// One data segment's worth of a scatter/gather list, in host order: `length` bytes at
/// `addr` in the memory region of `lkey` (`struct mlx5_wqe_data_seg` before byte-swapping).
/// The wire layer's own type; the data-plane API has its own `Sge` with the same fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Hash)]
pub struct Sge {
    /// Address.
    pub addr: u64,
    /// Length in bytes; zero-length entries get no data segment.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// The data of a send WQE: data segments or inline bytes. The list's entries are [`Sge`]s
/// or any type that converts into one (a provider's own scatter/gather type, borrowed as it
/// is).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a, S = Sge> {
    /// One data segment per entry of non-zero length.
    Sges(&'a [S]),
    /// One inline segment carrying these bytes.
    Inline(&'a [u8]),
}

impl<S: Copy + Into<Sge>> Payload<'_, S> {
    /// Total length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Sges(s) => s.iter().map(|&s| s.into().length as usize).sum(),
            Payload::Inline(b) => b.len(),
        }
    }
    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The largest send ring: `wqe_idx` is 16 bits, so `wqe_cnt` is at most 65536.
const MAX_RING: usize = 65536 * MLX5_SEND_WQE_BB;

/// Why a WQE could not be encoded or parsed. Small and `Copy`: the hot path returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WqeError {
    /// The ring is not a power-of-two number of WQEBBs between 1 and 65536.
    BadRing {
        /// The ring length in bytes.
        len: usize,
    },
    /// The opcode is not one this layer knows the segments of.
    UnknownOpcode(u8),
    /// The segments given (raddr, atomic, address vector, data) do not match the opcode, or
    /// (parsing) `ds` is not what the opcode implies.
    SegmentsMismatch {
        /// The opcode.
        opcode: Opcode,
    },
    /// Inline data with RDMA READ or an atomic.
    InlineNotAllowed {
        /// The opcode.
        opcode: Opcode,
    },
    /// An atomic needs exactly one SGE of 8 bytes for the old value.
    BadAtomicSge,
    /// `ds` exceeds [`MAX_DS`] (or, parsing, the ds byte has reserved bits set).
    TooLarge {
        /// The size in 16-byte units.
        ds: usize,
    },
    /// The WQE has more WQEBBs than the ring.
    DoesNotFitRing {
        /// WQEBBs the WQE needs.
        wqebbs: usize,
        /// WQEBBs in the ring.
        wqe_cnt: usize,
    },
    /// Parsing: the ctrl segment says `ds = 0`.
    ZeroDs,
    /// Parsing: `ds` is too small for the segments the opcode (and QP type) implies.
    DsTooSmall {
        /// The ctrl segment's ds.
        ds: u8,
        /// The units the opcode's fixed segments need.
        needed: usize,
    },
    /// Parsing: an inline segment's length runs past the end of the WQE.
    BadInlineLength {
        /// The inline length.
        len: u32,
        /// The units left in the WQE at that segment.
        units_left: usize,
    },
    /// Parsing: the ctrl segment's `wqe_idx` does not match the slot it was read from.
    IndexMismatch {
        /// `wqe_idx` in the ctrl segment.
        wqe_idx: u16,
        /// The slot (WQEBB index in the ring).
        slot: usize,
    },
    /// Receive WQEs: the slot is shorter than `max_sge` data segments.
    SlotTooSmall {
        /// The slot length in bytes.
        len: usize,
        /// The bytes `max_sge` segments need.
        needed: usize,
    },
    /// Receive WQEs: more SGEs of non-zero length than `max_sge`.
    TooManySges {
        /// SGEs of non-zero length.
        n: usize,
        /// The queue's max_sge.
        max: usize,
    },
}

impl std::fmt::Display for WqeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            WqeError::BadRing { len } => write!(
                f,
                "send ring of {len} bytes: must be a power of two number of 64-byte WQEBBs, 1 to 65536"
            ),
            WqeError::UnknownOpcode(op) => write!(f, "unknown WQE opcode {op:#04x}"),
            WqeError::SegmentsMismatch { opcode } => {
                write!(f, "segments do not match opcode {}", opcode.name())
            }
            WqeError::InlineNotAllowed { opcode } => {
                write!(f, "inline data is not allowed with {}", opcode.name())
            }
            WqeError::BadAtomicSge => {
                write!(f, "an atomic needs exactly one 8-byte SGE for the old value")
            }
            WqeError::TooLarge { ds } => {
                write!(f, "WQE of {ds} 16-byte units exceeds the maximum {MAX_DS}")
            }
            WqeError::DoesNotFitRing { wqebbs, wqe_cnt } => {
                write!(f, "WQE of {wqebbs} WQEBBs does not fit a ring of {wqe_cnt}")
            }
            WqeError::ZeroDs => write!(f, "ctrl segment with ds = 0"),
            WqeError::DsTooSmall { ds, needed } => write!(
                f,
                "ds = {ds} is smaller than the {needed} units the opcode's segments need"
            ),
            WqeError::BadInlineLength { len, units_left } => write!(
                f,
                "inline segment of {len} bytes does not fit the {units_left} units left in the WQE"
            ),
            WqeError::IndexMismatch { wqe_idx, slot } => {
                write!(f, "ctrl wqe_idx {wqe_idx:#06x} read from slot {slot}")
            }
            WqeError::SlotTooSmall { len, needed } => {
                write!(f, "receive slot of {len} bytes, max_sge needs {needed}")
            }
            WqeError::TooManySges { n, max } => write!(f, "{n} SGEs, the queue takes {max}"),
        }
    }
}

impl std::error::Error for WqeError {}

/// The size of a send WQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WqeSize {
    /// 16-byte units, the ctrl segment included (the ctrl segment's ds).
    pub ds: u8,
    /// 64-byte WQEBBs: `ceil(ds / 4)`.
    pub wqebbs: u8,
}

/// The datagram segment of a UD send: the destination's address vector as its address
/// handle holds it, and the remote QP's qkey and number, which the WQE carries in the
/// vector's `key` and `dqp_dct` (`dqpn | MLX5_EXTENDED_UD_AV`) in place of the handle's.
#[derive(Debug, Clone, Copy)]
pub struct UdAv<'a> {
    /// The 48-byte `struct mlx5_wqe_av` of the address handle.
    pub av: &'a [u8; MLX5_AV_LEN],
    /// The remote QP's qkey.
    pub qkey: u32,
    /// The remote QP's number (24 bits).
    pub dqpn: u32,
}

/// A send WQE: what the mlx5 provider's validation produces and its writer writes, and what
/// [`emit_send_wqe`] encodes. Borrowed, `Copy`, nothing allocated.
#[derive(Debug, Clone, Copy)]
pub struct SendWqe<'a, S = Sge> {
    /// Opcode.
    pub opcode: Opcode,
    /// Opcode modifier (ctrl byte 0); 0 for the opcodes here.
    pub opmod: u8,
    /// The low 16 bits of the producer index; the WQE goes to slot `wqe_idx & (wqe_cnt - 1)`.
    pub wqe_idx: u16,
    /// 24-bit QP number.
    pub qpn: u32,
    /// Flags, see [`super::fm_ce_se`].
    pub fm_ce_se: u8,
    /// Immediate, host order (written big-endian, so the responder's CQE `imm_inval_pkey`
    /// reads back the same value); written whatever the opcode, use 0 without one.
    pub imm: u32,
    /// `(raddr, rkey)` for RDMA and atomic opcodes, else `None`.
    pub raddr: Option<(u64, u32)>,
    /// `(swap_add, compare)` for atomics, else `None`.
    pub atomic: Option<(u64, u64)>,
    /// The UD destination; `None` on connected QPs.
    pub ud: Option<UdAv<'a>>,
    /// SGEs (zero-length ones are skipped) or inline bytes.
    pub data: Payload<'a, S>,
}

impl<'a> SendWqe<'a> {
    /// A WQE with `opcode` for `qpn` at `wqe_idx` with no segments but ctrl and no flags.
    pub fn new(opcode: Opcode, wqe_idx: u16, qpn: u32) -> Self {
        SendWqe {
            opcode,
            opmod: 0,
            wqe_idx,
            qpn,
            fm_ce_se: 0,
            imm: 0,
            raddr: None,
            atomic: None,
            ud: None,
            data: Payload::Sges(&[]),
        }
    }
}

#[inline(always)]
fn check_ring(len: usize) -> Result<usize, WqeError> {
    if !(MLX5_SEND_WQE_BB..=MAX_RING).contains(&len) || !len.is_power_of_two() {
        return Err(WqeError::BadRing { len });
    }
    Ok(len / MLX5_SEND_WQE_BB)
}

/// The size `wqe` will take, after checking that its segments match its opcode. The SQ
/// calls this to check free space before writing anything.
#[inline]
pub fn wqe_size<S: Copy + Into<Sge>>(wqe: &SendWqe<'_, S>) -> Result<WqeSize, WqeError> {
    let ds = wqe_units(wqe)?;
    if ds > MAX_DS {
        return Err(WqeError::TooLarge { ds });
    }
    Ok(WqeSize {
        ds: ds as u8,
        wqebbs: ds.div_ceil(UNITS_PER_BB) as u8,
    })
}

/// `ds` of `wqe` after checking its segments against its opcode, not yet against
/// [`MAX_DS`].
#[inline(always)]
fn wqe_units<S: Copy + Into<Sge>>(wqe: &SendWqe<'_, S>) -> Result<usize, WqeError> {
    let op = wqe.opcode;
    if let Opcode::Unknown(v) = op {
        return Err(WqeError::UnknownOpcode(v));
    }
    let ud_ok = matches!(op, Opcode::Send | Opcode::SendImm);
    if op.has_raddr() != wqe.raddr.is_some()
        || op.is_atomic() != wqe.atomic.is_some()
        || (wqe.ud.is_some() && !ud_ok)
    {
        return Err(WqeError::SegmentsMismatch { opcode: op });
    }
    let data_units = match wqe.data {
        Payload::Sges(sges) => {
            let len = |&s: &S| s.into().length;
            let n = sges.iter().filter(|s| len(s) != 0).count();
            if op.is_atomic() && (n != 1 || sges.iter().any(|s| len(s) != 0 && len(s) != 8)) {
                return Err(WqeError::BadAtomicSge);
            }
            n
        }
        Payload::Inline(bytes) => {
            if op.is_atomic() || op == Opcode::RdmaRead {
                return Err(WqeError::InlineNotAllowed { opcode: op });
            }
            // A slice is at most isize::MAX bytes: no overflow; the ds check below refuses
            // anything past MAX_DS before the length is narrowed.
            if bytes.is_empty() {
                0
            } else {
                inline_units(bytes.len())
            }
        }
    };
    if op == Opcode::Nop && data_units != 0 {
        return Err(WqeError::SegmentsMismatch { opcode: op });
    }
    let av_units = if wqe.ud.is_some() {
        MLX5_AV_LEN / MLX5_WQE_DS_UNITS
    } else {
        0
    };
    let ds = 1
        + av_units
        + usize::from(wqe.raddr.is_some())
        + usize::from(wqe.atomic.is_some())
        + data_units;
    Ok(ds)
}

/// Writes 16-byte units into the ring, wrapping at its end.
struct Units<'r> {
    ring: &'r mut [u8],
    mask: usize,
    off: usize,
}

impl Units<'_> {
    #[inline(always)]
    fn next(&mut self) -> &mut [u8; MLX5_WQE_DS_UNITS] {
        let o = self.off;
        self.off = (o + MLX5_WQE_DS_UNITS) & self.mask;
        // `o` is a multiple of 16 below the ring length (a multiple of 64), so the range is
        // inside the ring and 16 long: neither the index nor the conversion can fail.
        (&mut self.ring[o..o + MLX5_WQE_DS_UNITS])
            .try_into()
            .expect("16-byte unit")
    }
}

/// Copies `src` (at most 16 bytes, at most `dst.len()`) to the front of `dst` with two
/// overlapping fixed-size moves instead of a `memcpy` call: the inline path of the encoder
/// copies a few bytes per post.
#[inline(always)]
fn copy_small(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    if n >= 8 {
        let (head, tail) = (&src[..8], &src[n - 8..]);
        dst[..8].copy_from_slice(head);
        dst[n - 8..n].copy_from_slice(tail);
    } else if n >= 4 {
        let (head, tail) = (&src[..4], &src[n - 4..]);
        dst[..4].copy_from_slice(head);
        dst[n - 4..n].copy_from_slice(tail);
    } else if n > 0 {
        dst[0] = src[0];
        dst[n / 2] = src[n / 2];
        dst[n - 1] = src[n - 1];
    }
}

/// Encodes `wqe` into the send ring `ring` (the whole SQ buffer, `wqe_cnt * 64` bytes) at slot
/// `wqe.wqe_idx & (wqe_cnt - 1)`, continuing at the ring start past its end. Writes every
/// byte of the `ds` units it uses (ctrl bytes 8-11 and inline padding as zero) and nothing
/// else. Returns the size; on error nothing is written.
#[inline]
pub fn emit_send_wqe<S: Copy + Into<Sge>>(
    ring: &mut [u8],
    wqe: &SendWqe<'_, S>,
) -> Result<WqeSize, WqeError> {
    let wqe_cnt = check_ring(ring.len())?;
    let ds = wqe_units(wqe)?;
    if ds <= MLX5_SEND_WQE_BB / MLX5_WQE_DS_UNITS {
        // The common case, one WQEBB: a fixed-size slot, no wrap or bounds checks per unit.
        let off = (usize::from(wqe.wqe_idx) * MLX5_SEND_WQE_BB) & (ring.len() - 1);
        if let Some(Ok(slot)) = ring
            .get_mut(off..off + MLX5_SEND_WQE_BB)
            .map(<&mut [u8; MLX5_SEND_WQE_BB]>::try_from)
        {
            let size = WqeSize {
                ds: ds as u8,
                wqebbs: 1,
            };
            write_wqe(slot, wqe, size);
            return Ok(size);
        }
    }
    if ds > MAX_DS {
        return Err(WqeError::TooLarge { ds });
    }
    let wqebbs = ds.div_ceil(UNITS_PER_BB);
    if wqebbs > wqe_cnt {
        return Err(WqeError::DoesNotFitRing { wqebbs, wqe_cnt });
    }
    let size = WqeSize {
        ds: ds as u8,
        wqebbs: wqebbs as u8,
    };
    write_wqe(ring, wqe, size);
    Ok(size)
}

/// Writes `wqe` of `size` (checked against the ring) into `ring`, a power of two of at least
/// 64 bytes.
#[inline(always)]
fn write_wqe<S: Copy + Into<Sge>>(ring: &mut [u8], wqe: &SendWqe<'_, S>, size: WqeSize) {
    let mask = ring.len() - 1;
    let mut u = Units {
        ring,
        mask,
        off: (usize::from(wqe.wqe_idx) * MLX5_SEND_WQE_BB) & mask,
    };

    // Built in a register-sized local and stored whole: bytes 8-10 (signature, DCI stream)
    // are the zeros it starts with.
    let mut ctrl = [0u8; MLX5_WQE_DS_UNITS];
    let mut c = CtrlSeg::new_unchecked(&mut ctrl);
    c.set_opmod_idx_opcode(wqe.opmod, wqe.wqe_idx, wqe.opcode);
    c.set_qpn_ds(wqe.qpn, size.ds);
    c.set_fm_ce_se(wqe.fm_ce_se);
    c.set_imm(wqe.imm);
    *u.next() = ctrl;

    if let Some(ud) = wqe.ud {
        // The handle's vector with the qkey (the first 4 bytes of `key`; the other 4 as the
        // handle has them) and `dqp_dct` of this destination.
        let mut av = *ud.av;
        av[offset::av::QKEY..offset::av::QKEY + 4].copy_from_slice(&ud.qkey.to_be_bytes());
        DatagramSeg::new_unchecked(&mut av[..]).set_dqp_dct(ud.dqpn, true);
        for chunk in av.chunks_exact(MLX5_WQE_DS_UNITS) {
            u.next().copy_from_slice(chunk);
        }
    }
    if let Some((raddr, rkey)) = wqe.raddr {
        RaddrSeg::new_unchecked(u.next()).set(raddr, rkey);
    }
    if let Some((swap_add, compare)) = wqe.atomic {
        AtomicSeg::new_unchecked(u.next()).set(swap_add, compare);
    }
    match wqe.data {
        Payload::Sges(sges) => {
            for s in sges
                .iter()
                .map(|&s| -> Sge { s.into() })
                .filter(|s| s.length != 0)
            {
                DataSeg::new_unchecked(u.next()).set(s.length, s.lkey, s.addr);
            }
        }
        Payload::Inline(bytes) if !bytes.is_empty() => {
            // Zero the unit, then the header and up to 12 bytes over it: the padding stays
            // zero.
            let unit = u.next();
            *unit = [0u8; MLX5_WQE_DS_UNITS];
            const DATA: usize = offset::inline::DATA;
            InlineSeg::new_unchecked(&mut unit[..MLX5_WQE_INLINE_SEG_LEN])
                .set_len(bytes.len() as u32);
            if bytes.len() <= MLX5_WQE_DS_UNITS - DATA {
                copy_small(&mut unit[DATA..], bytes);
            } else {
                let (head, mut rest) = bytes.split_at(MLX5_WQE_DS_UNITS - DATA);
                unit[DATA..].copy_from_slice(head);
                while rest.len() >= MLX5_WQE_DS_UNITS {
                    let (chunk, tail) = rest.split_at(MLX5_WQE_DS_UNITS);
                    u.next().copy_from_slice(chunk);
                    rest = tail;
                }
                if !rest.is_empty() {
                    let unit = u.next();
                    *unit = [0u8; MLX5_WQE_DS_UNITS];
                    copy_small(unit, rest);
                }
            }
        }
        Payload::Inline(_) => {}
    }
}

mod parse;
mod recv;
#[cfg(test)]
mod tests;

pub use parse::*;
pub use recv::*;
