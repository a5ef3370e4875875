//! Receive and SRQ WQEs: a scatter list of data segments ended by an `MLX5_INVALID_LKEY`
//! terminator when shorter than the queue's maximum; an SRQ WQE starts with its next segment.

use super::*;

#[inline]
fn check_recv_slot(len: usize, n: usize, max_sge: usize) -> Result<(), WqeError> {
    let needed = max_sge.saturating_mul(MLX5_WQE_DS_UNITS);
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
    let mut units = slot.chunks_exact_mut(MLX5_WQE_DS_UNITS);
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
/// terminator (byte_count 0, lkey [`crate::wire::MLX5_INVALID_LKEY`], addr 0). Units after the terminator
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
        units: slot.chunks_exact(MLX5_WQE_DS_UNITS),
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
    let (next, rest) = slot.split_at_mut(MLX5_WQE_DS_UNITS);
    SrqNextSeg::new_unchecked(next).set(next_wqe_index, 0);
    Ok(emit_scatter(rest, sges, max_sge))
}

#[inline]
fn check_srq_slot(len: usize, n: usize, max_sge: usize) -> Result<(), WqeError> {
    let needed = max_sge.saturating_add(1).saturating_mul(MLX5_WQE_DS_UNITS);
    if len < needed {
        return Err(WqeError::SlotTooSmall { len, needed });
    }
    check_recv_slot(len - MLX5_WQE_DS_UNITS, n, max_sge)
}

/// Reads an SRQ WQE from `slot`: its `next_wqe_index` and its scatter list.
pub fn parse_srq_wqe(slot: &[u8], max_sge: usize) -> Result<(u16, RecvSges<'_>), WqeError> {
    check_srq_slot(slot.len(), 0, max_sge)?;
    let (next, rest) = slot.split_at(MLX5_WQE_DS_UNITS);
    let sges = parse_recv_wqe(rest, max_sge)?;
    Ok((SrqNextSeg::new_unchecked(next).next_wqe_index(), sges))
}
