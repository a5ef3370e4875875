//! Whole WQEs: the send-WQE encoder (host side) and parser (device side), receive and SRQ
//! WQEs.
//!
//! A send WQE is, in order: the ctrl segment; for UD the 48-byte address vector; for RDMA
//! and atomic opcodes the raddr segment; for atomics the atomic segment; then the data: either
//! data segments (one per SGE of non-zero length) or one inline segment (a 4-byte header
//! `len | 0x80000000`, the bytes, zero padding to a 16-byte boundary; none when the length is
//! zero). `ds` counts all of these in 16-byte units; the WQE takes `ceil(ds / 4)` WQEBBs and
//! runs on from the end of the ring to its start.

use super::seg::{
    inline_units, AtomicSeg, CtrlSeg, DataSeg, InlineSeg, Opcode, RaddrSeg, SrqNextSeg, AV_LEN,
    INLINE_SEG, SEG_LEN,
};
use super::DatagramSeg;

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

/// The data of a send WQE: data segments or inline bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// One data segment per entry of non-zero length.
    Sges(&'a [Sge]),
    /// One inline segment carrying these bytes.
    Inline(&'a [u8]),
}

impl Payload<'_> {
    /// Total length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Payload::Sges(s) => s.iter().map(|s| s.length as usize).sum(),
            Payload::Inline(b) => b.len(),
        }
    }
    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Length of a WQE basic block (`MLX5_SEND_WQE_BB`).
pub const WQEBB_LEN: usize = 64;
/// The largest `ds`: the ctrl segment's ds field is 6 bits (`MLX5_WQE_CTRL_DS_MASK`).
pub const MAX_DS: usize = 63;
/// The largest send ring: `wqe_idx` is 16 bits, so `wqe_cnt` is at most 65536.
const MAX_RING: usize = 65536 * WQEBB_LEN;

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

/// A send WQE to encode: borrowed, `Copy`, nothing allocated.
#[derive(Debug, Clone, Copy)]
pub struct SendWqe<'a> {
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
    /// The UD address vector, already filled (qkey, `dqp_dct = qpn | 0x80000000`, ...);
    /// `None` on connected QPs.
    pub av: Option<&'a [u8; AV_LEN]>,
    /// SGEs (zero-length ones are skipped) or inline bytes.
    pub data: Payload<'a>,
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
            av: None,
            data: Payload::Sges(&[]),
        }
    }
}

#[inline(always)]
fn check_ring(len: usize) -> Result<usize, WqeError> {
    if !(WQEBB_LEN..=MAX_RING).contains(&len) || !len.is_power_of_two() {
        return Err(WqeError::BadRing { len });
    }
    Ok(len / WQEBB_LEN)
}

/// The size `wqe` will take, after checking that its segments match its opcode. The SQ
/// calls this to check free space before writing anything.
#[inline]
pub fn wqe_size(wqe: &SendWqe<'_>) -> Result<WqeSize, WqeError> {
    let ds = wqe_units(wqe)?;
    if ds > MAX_DS {
        return Err(WqeError::TooLarge { ds });
    }
    Ok(WqeSize {
        ds: ds as u8,
        wqebbs: ds.div_ceil(4) as u8,
    })
}

/// `ds` of `wqe` after checking its segments against its opcode, not yet against
/// [`MAX_DS`].
#[inline(always)]
fn wqe_units(wqe: &SendWqe<'_>) -> Result<usize, WqeError> {
    let op = wqe.opcode;
    if let Opcode::Unknown(v) = op {
        return Err(WqeError::UnknownOpcode(v));
    }
    let ud_ok = matches!(op, Opcode::Send | Opcode::SendImm);
    if op.has_raddr() != wqe.raddr.is_some()
        || op.is_atomic() != wqe.atomic.is_some()
        || (wqe.av.is_some() && !ud_ok)
    {
        return Err(WqeError::SegmentsMismatch { opcode: op });
    }
    let data_units = match wqe.data {
        Payload::Sges(sges) => {
            let n = sges.iter().filter(|s| s.length != 0).count();
            if op.is_atomic() && (n != 1 || sges.iter().any(|s| s.length != 0 && s.length != 8)) {
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
    let av_units = if wqe.av.is_some() {
        AV_LEN / SEG_LEN
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
    fn next(&mut self) -> &mut [u8; SEG_LEN] {
        let o = self.off;
        self.off = (o + SEG_LEN) & self.mask;
        // `o` is a multiple of 16 below the ring length (a multiple of 64), so the range is
        // inside the ring and 16 long: neither the index nor the conversion can fail.
        (&mut self.ring[o..o + SEG_LEN])
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
pub fn emit_send_wqe(ring: &mut [u8], wqe: &SendWqe<'_>) -> Result<WqeSize, WqeError> {
    let wqe_cnt = check_ring(ring.len())?;
    let ds = wqe_units(wqe)?;
    if ds <= WQEBB_LEN / SEG_LEN {
        // The common case, one WQEBB: a fixed-size slot, no wrap or bounds checks per unit.
        let off = (usize::from(wqe.wqe_idx) * WQEBB_LEN) & (ring.len() - 1);
        if let Some(Ok(slot)) = ring
            .get_mut(off..off + WQEBB_LEN)
            .map(<&mut [u8; WQEBB_LEN]>::try_from)
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
    let wqebbs = ds.div_ceil(4);
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

/// Encodes `wqe` into one WQEBB, `slot` (the ring slot of `wqe.wqe_idx`, which the caller
/// picked). The fast path for the small WQEs a latency-bound sender posts: it cannot wrap,
/// so the slot is a fixed-size array and the writes need no bounds or wrap checks. The WQE
/// must fit one WQEBB (`ds <= 4`: ctrl + raddr + inline of up to 28 bytes, ctrl + inline of
/// up to 44, SENDs with up to 3 SGEs, WRITE/READ with up to 2, atomics, UD without data);
/// anything larger is refused with `DoesNotFitRing` and nothing is written. The bytes are the
/// same as [`emit_send_wqe`]'s.
#[inline]
pub fn emit_send_wqe_bb(
    slot: &mut [u8; WQEBB_LEN],
    wqe: &SendWqe<'_>,
) -> Result<WqeSize, WqeError> {
    let ds = wqe_units(wqe)?;
    if ds > WQEBB_LEN / SEG_LEN {
        return Err(WqeError::DoesNotFitRing {
            wqebbs: ds.div_ceil(4),
            wqe_cnt: 1,
        });
    }
    let size = WqeSize {
        ds: ds as u8,
        wqebbs: 1,
    };
    write_wqe(&mut slot[..], wqe, size);
    Ok(size)
}

/// Writes `wqe` of `size` (checked against the ring) into `ring`, a power of two of at least
/// 64 bytes.
#[inline(always)]
fn write_wqe(ring: &mut [u8], wqe: &SendWqe<'_>, size: WqeSize) {
    let mask = ring.len() - 1;
    let mut u = Units {
        ring,
        mask,
        off: (usize::from(wqe.wqe_idx) * WQEBB_LEN) & mask,
    };

    // Built in a register-sized local and stored whole: bytes 8-10 (signature, DCI stream)
    // are the zeros it starts with.
    let mut ctrl = [0u8; SEG_LEN];
    let mut c = CtrlSeg::new_unchecked(&mut ctrl);
    c.set_opmod_idx_opcode(wqe.opmod, wqe.wqe_idx, wqe.opcode);
    c.set_qpn_ds(wqe.qpn, size.ds);
    c.set_fm_ce_se(wqe.fm_ce_se);
    c.set_imm(wqe.imm);
    *u.next() = ctrl;

    if let Some(av) = wqe.av {
        for chunk in av.chunks_exact(SEG_LEN) {
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
            for s in sges.iter().filter(|s| s.length != 0) {
                DataSeg::new_unchecked(u.next()).set(s.length, s.lkey, s.addr);
            }
        }
        Payload::Inline(bytes) if !bytes.is_empty() => {
            // Zero the unit, then the header and up to 12 bytes over it: the padding stays
            // zero.
            let unit = u.next();
            *unit = [0u8; SEG_LEN];
            InlineSeg::new_unchecked(&mut unit[..4]).set_len(bytes.len() as u32);
            if bytes.len() <= SEG_LEN - 4 {
                copy_small(&mut unit[4..], bytes);
            } else {
                let (head, mut rest) = bytes.split_at(SEG_LEN - 4);
                unit[4..].copy_from_slice(head);
                while rest.len() >= SEG_LEN {
                    let (chunk, tail) = rest.split_at(SEG_LEN);
                    u.next().copy_from_slice(chunk);
                    rest = tail;
                }
                if !rest.is_empty() {
                    let unit = u.next();
                    *unit = [0u8; SEG_LEN];
                    copy_small(unit, rest);
                }
            }
        }
        Payload::Inline(_) => {}
    }
}

/// One data segment of a parsed send WQE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DataItem<'a> {
    /// A data segment (pointer, length, key).
    Sge(Sge),
    /// An inline segment's bytes.
    Inline(InlineData<'a>),
}

/// The bytes of an inline segment, in at most two pieces: `second` is non-empty only when
/// the data runs past the ring end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineData<'a> {
    /// The bytes up to the ring end (or all of them).
    pub first: &'a [u8],
    /// The bytes from the ring start.
    pub second: &'a [u8],
}

impl InlineData<'_> {
    /// Total length.
    pub fn len(&self) -> usize {
        self.first.len() + self.second.len()
    }
    /// True when there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies the bytes into the front of `out`; returns how many (at most `out.len()`).
    pub fn copy_to(&self, out: &mut [u8]) -> usize {
        let a = self.first.len().min(out.len());
        out[..a].copy_from_slice(&self.first[..a]);
        let b = self.second.len().min(out.len() - a);
        out[a..a + b].copy_from_slice(&self.second[..b]);
        a + b
    }
    /// The bytes, in order.
    pub fn bytes(&self) -> impl Iterator<Item = u8> + '_ {
        self.first.iter().chain(self.second.iter()).copied()
    }
}

/// An allocation-free iterator over the data segments of a parsed send WQE (validated by
/// [`parse_send_wqe`], so it never fails).
#[derive(Debug, Clone)]
pub struct DataSegs<'a> {
    ring: &'a [u8],
    off: usize,
    units_left: usize,
}

impl<'a> Iterator for DataSegs<'a> {
    type Item = DataItem<'a>;

    fn next(&mut self) -> Option<DataItem<'a>> {
        if self.units_left == 0 {
            return None;
        }
        let ring = self.ring;
        let mask = ring.len() - 1;
        let unit = &ring[self.off..self.off + SEG_LEN];
        let d = DataSeg::new_unchecked(unit);
        let bc = d.byte_count();
        let (item, units) = if bc & INLINE_SEG != 0 {
            let len = (bc & !INLINE_SEG) as usize;
            let start = self.off + 4;
            let end = (start + len).min(ring.len());
            let first = &ring[start..end];
            let rest = (len - first.len()).min(ring.len());
            let item = DataItem::Inline(InlineData {
                first,
                second: &ring[..rest],
            });
            (item, inline_units(len))
        } else {
            let sge = Sge {
                addr: d.addr(),
                length: bc,
                lkey: d.lkey(),
            };
            (DataItem::Sge(sge), 1)
        };
        let units = units.min(self.units_left);
        self.units_left -= units;
        self.off = (self.off + units * SEG_LEN) & mask;
        Some(item)
    }
}

/// A send WQE read from a ring (the device side).
#[derive(Debug, Clone)]
pub struct ParsedWqe<'a> {
    /// Opcode (never `Unknown`: parsing refuses those).
    pub opcode: Opcode,
    /// Opcode modifier.
    pub opmod: u8,
    /// The ctrl segment's 16-bit WQE index.
    pub wqe_idx: u16,
    /// 24-bit QPN from the ctrl segment.
    pub qpn: u32,
    /// Size in 16-byte units.
    pub ds: u8,
    /// WQEBBs the WQE takes.
    pub wqebbs: u8,
    /// Signature byte.
    pub signature: u8,
    /// DCI stream channel id (bytes 9-10).
    pub dci_stream_channel_id: u16,
    /// Flags, see [`super::fm_ce_se`].
    pub fm_ce_se: u8,
    /// Immediate, host order.
    pub imm: u32,
    /// `(raddr, rkey)` of RDMA and atomic opcodes.
    pub raddr: Option<(u64, u32)>,
    /// `(swap_add, compare)` of atomics.
    pub atomic: Option<(u64, u64)>,
    /// The address vector of a UD WQE (copied: it may wrap).
    pub av: Option<[u8; AV_LEN]>,
    /// Number of data segments (an inline segment counts one).
    pub num_data: usize,
    /// Sum of the data segments' byte counts and inline lengths.
    pub data_len: u64,
    data: DataSegs<'a>,
}

impl<'a> ParsedWqe<'a> {
    /// The data segments in order.
    pub fn data_segs(&self) -> DataSegs<'a> {
        self.data.clone()
    }
    /// A view over the address vector, for UD WQEs.
    pub fn av_seg(&self) -> Option<DatagramSeg<[u8; AV_LEN]>> {
        self.av.map(DatagramSeg::new_unchecked)
    }
}

/// Reads 16-byte units from the ring, wrapping at its end.
struct ReadUnits<'r> {
    ring: &'r [u8],
    mask: usize,
    off: usize,
}

impl<'r> ReadUnits<'r> {
    fn next(&mut self) -> &'r [u8] {
        let o = self.off;
        self.off = (o + SEG_LEN) & self.mask;
        &self.ring[o..o + SEG_LEN]
    }
}

/// Parses the send WQE at WQEBB `wqebb_index` (masked by the ring size) of `ring` (the whole
/// SQ buffer), following the ring wrap. `qp_is_ud` says whether an address vector follows the
/// ctrl segment of a SEND (a NOP is a bare ctrl segment on every QP type). Checks: ds not 0,
/// within [`MAX_DS`] and the ring, large enough for the opcode's segments and, for atomics,
/// exactly one data segment; inline lengths within ds; a known opcode (UD: SEND, SEND_IMM or
/// NOP); the ctrl's `wqe_idx` matching the slot.
pub fn parse_send_wqe(
    ring: &[u8],
    wqebb_index: u32,
    qp_is_ud: bool,
) -> Result<ParsedWqe<'_>, WqeError> {
    let wqe_cnt = check_ring(ring.len())?;
    let mask = ring.len() - 1;
    let slot = (wqebb_index as usize) & (wqe_cnt - 1);
    let mut r = ReadUnits {
        ring,
        mask,
        off: slot * WQEBB_LEN,
    };
    let c = CtrlSeg::new_unchecked(r.next());
    let ds = c.ds();
    if ds == 0 {
        return Err(WqeError::ZeroDs);
    }
    if usize::from(ds) > MAX_DS {
        return Err(WqeError::TooLarge {
            ds: usize::from(ds),
        });
    }
    let wqebbs = usize::from(ds).div_ceil(4);
    if wqebbs > wqe_cnt {
        return Err(WqeError::DoesNotFitRing { wqebbs, wqe_cnt });
    }
    let wqe_idx = c.wqe_idx();
    if usize::from(wqe_idx) & (wqe_cnt - 1) != slot {
        return Err(WqeError::IndexMismatch { wqe_idx, slot });
    }
    let opcode = c.opcode();
    if let Opcode::Unknown(v) = opcode {
        return Err(WqeError::UnknownOpcode(v));
    }
    if qp_is_ud && !matches!(opcode, Opcode::Send | Opcode::SendImm | Opcode::Nop) {
        return Err(WqeError::SegmentsMismatch { opcode });
    }
    // A NOP is a bare ctrl segment on every QP type; UD sends carry the address vector.
    let has_av = qp_is_ud && opcode != Opcode::Nop;
    let needed = 1
        + if has_av { AV_LEN / SEG_LEN } else { 0 }
        + usize::from(opcode.has_raddr())
        + usize::from(opcode.is_atomic())
        + usize::from(opcode.is_atomic());
    if usize::from(ds) < needed {
        return Err(WqeError::DsTooSmall { ds, needed });
    }
    let mut p = ParsedWqe {
        opcode,
        opmod: c.opmod(),
        wqe_idx,
        qpn: c.qpn(),
        ds,
        wqebbs: wqebbs as u8,
        signature: c.signature(),
        dci_stream_channel_id: c.dci_stream_channel_id(),
        fm_ce_se: c.fm_ce_se(),
        imm: c.imm(),
        raddr: None,
        atomic: None,
        av: None,
        num_data: 0,
        data_len: 0,
        data: DataSegs {
            ring,
            off: 0,
            units_left: 0,
        },
    };
    if has_av {
        let mut av = [0u8; AV_LEN];
        for chunk in av.chunks_exact_mut(SEG_LEN) {
            chunk.copy_from_slice(r.next());
        }
        p.av = Some(av);
    }
    if opcode.has_raddr() {
        let s = RaddrSeg::new_unchecked(r.next());
        p.raddr = Some((s.raddr(), s.rkey()));
    }
    if opcode.is_atomic() {
        let s = AtomicSeg::new_unchecked(r.next());
        p.atomic = Some((s.swap_add(), s.compare()));
    }
    // Walk the data segments once to validate them; the iterator then cannot fail.
    let data_units = usize::from(ds) - needed + usize::from(opcode.is_atomic());
    p.data = DataSegs {
        ring,
        off: r.off,
        units_left: data_units,
    };
    let mut left = data_units;
    let mut off = r.off;
    while left > 0 {
        let bc = DataSeg::new_unchecked(&ring[off..off + SEG_LEN]).byte_count();
        let units = if bc & INLINE_SEG != 0 {
            if opcode.is_atomic() || opcode == Opcode::RdmaRead {
                return Err(WqeError::InlineNotAllowed { opcode });
            }
            let len = bc & !INLINE_SEG;
            let units = inline_units(len as usize);
            if units > left {
                return Err(WqeError::BadInlineLength {
                    len,
                    units_left: left,
                });
            }
            p.data_len += u64::from(len);
            units
        } else {
            p.data_len += u64::from(bc);
            1
        };
        p.num_data += 1;
        left -= units;
        off = (off + units * SEG_LEN) & mask;
    }
    if opcode.is_atomic() && p.num_data != 1 {
        return Err(WqeError::SegmentsMismatch { opcode });
    }
    Ok(p)
}

#[inline]
fn check_recv_slot(len: usize, n: usize, max_sge: usize) -> Result<(), WqeError> {
    let needed = max_sge.saturating_mul(SEG_LEN);
    if len < needed {
        return Err(WqeError::SlotTooSmall { len, needed });
    }
    if n > max_sge {
        return Err(WqeError::TooManySges { n, max: max_sge });
    }
    Ok(())
}

#[inline]
fn emit_scatter(slot: &mut [u8], sges: &[Sge], max_sge: usize) -> usize {
    let mut units = slot.chunks_exact_mut(SEG_LEN);
    let mut n = 0;
    for (s, unit) in sges.iter().filter(|s| s.length != 0).zip(&mut units) {
        DataSeg::new_unchecked(unit).set(s.length, s.lkey, s.addr);
        n += 1;
    }
    if n < max_sge {
        if let Some(unit) = units.next() {
            DataSeg::new_unchecked(unit).set_terminator();
        }
    }
    n
}

/// Writes a receive WQE into `slot` (one RQ stride, at least `max_sge * 16` bytes): one data
/// segment per SGE of non-zero length, then, when there are fewer than `max_sge`, the
/// terminator (byte_count 0, lkey [`super::INVALID_LKEY`], addr 0). Units after the terminator
/// are not written: the device stops there. Returns the number of data segments.
#[inline]
pub fn emit_recv_wqe(slot: &mut [u8], sges: &[Sge], max_sge: usize) -> Result<usize, WqeError> {
    let n = sges.iter().filter(|s| s.length != 0).count();
    check_recv_slot(slot.len(), n, max_sge)?;
    Ok(emit_scatter(slot, sges, max_sge))
}

/// The scatter list of a receive or SRQ WQE: the data segments up to the terminator or
/// `max_sge`, whichever comes first.
#[derive(Debug, Clone)]
pub struct RecvSges<'a> {
    units: std::slice::ChunksExact<'a, u8>,
    left: usize,
}

impl Iterator for RecvSges<'_> {
    type Item = Sge;

    fn next(&mut self) -> Option<Sge> {
        if self.left == 0 {
            return None;
        }
        let d = DataSeg::new_unchecked(self.units.next()?);
        if d.is_terminator() {
            self.left = 0;
            return None;
        }
        self.left -= 1;
        Some(Sge {
            addr: d.addr(),
            length: d.byte_count(),
            lkey: d.lkey(),
        })
    }
}

/// Reads a receive WQE from `slot` (the device side).
pub fn parse_recv_wqe(slot: &[u8], max_sge: usize) -> Result<RecvSges<'_>, WqeError> {
    check_recv_slot(slot.len(), 0, max_sge)?;
    Ok(RecvSges {
        units: slot.chunks_exact(SEG_LEN),
        left: max_sge,
    })
}

/// Writes an SRQ WQE into `slot` (one SRQ stride, at least `16 + max_sge * 16` bytes): the
/// next segment (`next_wqe_index`, signature 0, reserved zero), then the scatter list as
/// [`emit_recv_wqe`]. Returns the number of data segments.
pub fn emit_srq_wqe(
    slot: &mut [u8],
    next_wqe_index: u16,
    sges: &[Sge],
    max_sge: usize,
) -> Result<usize, WqeError> {
    let n = sges.iter().filter(|s| s.length != 0).count();
    check_srq_slot(slot.len(), n, max_sge)?;
    let (next, rest) = slot.split_at_mut(SEG_LEN);
    SrqNextSeg::new_unchecked(next).set(next_wqe_index, 0);
    Ok(emit_scatter(rest, sges, max_sge))
}

#[inline]
fn check_srq_slot(len: usize, n: usize, max_sge: usize) -> Result<(), WqeError> {
    let needed = max_sge.saturating_add(1).saturating_mul(SEG_LEN);
    if len < needed {
        return Err(WqeError::SlotTooSmall { len, needed });
    }
    check_recv_slot(len - SEG_LEN, n, max_sge)
}

/// Reads an SRQ WQE from `slot`: its `next_wqe_index` and its scatter list.
pub fn parse_srq_wqe(slot: &[u8], max_sge: usize) -> Result<(u16, RecvSges<'_>), WqeError> {
    check_srq_slot(slot.len(), 0, max_sge)?;
    let (next, rest) = slot.split_at(SEG_LEN);
    let sges = parse_recv_wqe(rest, max_sge)?;
    Ok((SrqNextSeg::new_unchecked(next).next_wqe_index(), sges))
}

#[cfg(test)]
mod tests {
    use super::super::{fm_ce_se, DatagramSeg, INVALID_LKEY};
    use super::*;

    const RING: usize = 4 * WQEBB_LEN;

    fn sge(addr: u64, length: u32, lkey: u32) -> Sge {
        Sge { addr, length, lkey }
    }

    #[test]
    fn inline_write_of_8_bytes_writes_three_units() {
        let mut ring = vec![0xa5u8; RING];
        let data = [1, 2, 3, 4, 5, 6, 7, 8];
        let wqe = SendWqe {
            fm_ce_se: fm_ce_se::CQ_UPDATE,
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
        let mut av = [0u8; AV_LEN];
        let mut v = DatagramSeg::new_unchecked(&mut av);
        v.set_qkey(0x1111_1111);
        v.set_dqp_dct(0x42, true);
        v.set_rgid([9; 16]);
        let mut ring = vec![0xa5u8; RING];
        let s = [sge(0x100, 64, 3)];
        let wqe = SendWqe {
            av: Some(&av),
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
        let mut small = vec![0xa5u8; 2 * WQEBB_LEN];
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
        let mut slot = vec![0xa5u8; 4 * SEG_LEN];
        let s = [sge(0x10, 100, 1), sge(0x20, 0, 2), sge(0x30, 300, 3)];
        assert_eq!(emit_recv_wqe(&mut slot, &s, 4), Ok(2));
        assert_eq!(DataSeg::new_unchecked(&slot[16..32]).addr(), 0x30);
        let t = DataSeg::new_unchecked(&slot[32..48]);
        assert!(t.is_terminator());
        assert_eq!(t.lkey(), INVALID_LKEY);
        assert_eq!(
            &slot[32..48],
            &[0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0]
        );
        assert!(slot[48..].iter().all(|&b| b == 0xa5));
        let back: Vec<Sge> = parse_recv_wqe(&slot, 4).unwrap().collect();
        assert_eq!(back, vec![s[0], s[2]]);
        // Exactly max SGEs: no terminator.
        let mut slot = vec![0xa5u8; 2 * SEG_LEN];
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
        let mut slot = vec![0xa5u8; 3 * SEG_LEN];
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
        let mut ring = vec![0xa5u8; 8 * WQEBB_LEN];
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
            let slot = (pi & 7) as usize * WQEBB_LEN;
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
        let mut av = [0u8; AV_LEN];
        for (i, b) in av.iter_mut().enumerate() {
            *b = i as u8 ^ 0x5a;
        }
        for _ in 0..2000 {
            let wqe_cnt = 1usize << rng.below(5);
            let ring_len = wqe_cnt * WQEBB_LEN;
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
                av: ud.then_some(&av),
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
            let start = (usize::from(wqe.wqe_idx) & (wqe_cnt - 1)) * WQEBB_LEN;
            let mut written = vec![false; ring_len];
            for u in 0..usize::from(size.ds) {
                let o = (start + u * SEG_LEN) % ring_len;
                written[o..o + SEG_LEN].fill(true);
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
            let mut ring: Vec<u8> = (0..wqe_cnt * WQEBB_LEN).map(|_| rng.next() as u8).collect();
            let slot = rng.below(wqe_cnt as u64) as usize;
            let c = &mut ring[slot * WQEBB_LEN..slot * WQEBB_LEN + SEG_LEN];
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

    #[test]
    fn one_wqebb_fast_path_writes_the_same_bytes() {
        let mut rng = Rng(77);
        let payload: Vec<u8> = (0..64).map(|i| i as u8 ^ 0x3c).collect();
        let old = [sge(0x10, 8, 2)];
        let sges = [sge(1, 2, 3), sge(4, 5, 6), sge(7, 8, 9)];
        for _ in 0..500 {
            let idx = rng.next() as u16;
            let len = rng.below(50) as usize;
            let op = [Opcode::RdmaWrite, Opcode::Send, Opcode::AtomicFa][rng.below(3) as usize];
            let wqe = SendWqe {
                raddr: op.has_raddr().then_some((rng.next(), 5)),
                atomic: op.is_atomic().then_some((rng.next(), 0)),
                fm_ce_se: fm_ce_se::CQ_UPDATE,
                imm: rng.next() as u32,
                data: if op.is_atomic() {
                    Payload::Sges(&old)
                } else if len % 2 == 0 {
                    Payload::Inline(&payload[..len])
                } else {
                    Payload::Sges(&sges[..len % 4])
                },
                ..SendWqe::new(op, idx, 0x1234)
            };
            let mut ring = vec![0xa5u8; 4 * WQEBB_LEN];
            let mut slot = [0xa5u8; WQEBB_LEN];
            match (
                emit_send_wqe(&mut ring, &wqe),
                emit_send_wqe_bb(&mut slot, &wqe),
            ) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(a, b);
                    let o = (usize::from(idx) & 3) * WQEBB_LEN;
                    assert_eq!(&ring[o..o + WQEBB_LEN], &slot[..]);
                }
                (Ok(a), Err(e)) => {
                    assert!(a.wqebbs > 1, "{e}");
                    assert_eq!(
                        e,
                        WqeError::DoesNotFitRing {
                            wqebbs: usize::from(a.wqebbs),
                            wqe_cnt: 1
                        }
                    );
                    assert!(slot.iter().all(|&b| b == 0xa5));
                }
                (a, b) => panic!("{a:?} {b:?}"),
            }
        }
    }
}
