//! The device side of send WQEs: [`parse_send_wqe`] reads a WQE back from the ring as the
//! device fetches it (ring wrap included) into a [`ParsedWqe`].

use super::*;

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
        let unit = &ring[self.off..self.off + MLX5_WQE_DS_UNITS];
        let d = DataSeg::new_unchecked(unit);
        let bc = d.byte_count();
        let (item, units) = if bc & MLX5_INLINE_SEG != 0 {
            let len = (bc & !MLX5_INLINE_SEG) as usize;
            let start = self.off + offset::inline::DATA;
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
        self.off = (self.off + units * MLX5_WQE_DS_UNITS) & mask;
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
    /// Flags, see [`crate::wire::fm_ce_se`].
    pub fm_ce_se: u8,
    /// Immediate, host order.
    pub imm: u32,
    /// `(raddr, rkey)` of RDMA and atomic opcodes.
    pub raddr: Option<(u64, u32)>,
    /// `(swap_add, compare)` of atomics.
    pub atomic: Option<(u64, u64)>,
    /// The address vector of a UD WQE (copied: it may wrap).
    pub av: Option<[u8; MLX5_AV_LEN]>,
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
    pub fn av_seg(&self) -> Option<DatagramSeg<[u8; MLX5_AV_LEN]>> {
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
        self.off = (o + MLX5_WQE_DS_UNITS) & self.mask;
        &self.ring[o..o + MLX5_WQE_DS_UNITS]
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
        off: slot * MLX5_SEND_WQE_BB,
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
    let wqebbs = usize::from(ds).div_ceil(UNITS_PER_BB);
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
    let needed =
        1 + if has_av {
            MLX5_AV_LEN / MLX5_WQE_DS_UNITS
        } else {
            0
        } + usize::from(opcode.has_raddr())
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
        let mut av = [0u8; MLX5_AV_LEN];
        for chunk in av.chunks_exact_mut(MLX5_WQE_DS_UNITS) {
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
        let bc = DataSeg::new_unchecked(&ring[off..off + MLX5_WQE_DS_UNITS]).byte_count();
        let units = if bc & MLX5_INLINE_SEG != 0 {
            if opcode.is_atomic() || opcode == Opcode::RdmaRead {
                return Err(WqeError::InlineNotAllowed { opcode });
            }
            let len = bc & !MLX5_INLINE_SEG;
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
        off = (off + units * MLX5_WQE_DS_UNITS) & mask;
    }
    if opcode.is_atomic() && p.num_data != 1 {
        return Err(WqeError::SegmentsMismatch { opcode });
    }
    Ok(p)
}
