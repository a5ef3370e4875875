//! Validation of a send request against the QP (type, caps, op rules), starting from the
//! WQE that describes it ([`send_wqe`]: opcode, immediate, remote and atomic operands, UD
//! destination, data) and giving it back with its size in 16-byte units. Writes nothing; the
//! QP state is checked by the posting budget (`budget.rs`).

use super::write::inline_ds;
use super::Mlx5Sq;
use crate::mlx5::owners::Owners;
use crate::mlx5::send_wqe;
use crate::wire::offset::inline;
use crate::wire::{SendWqe, MAX_DS, MLX5_WQE_DS_UNITS};
use crate::{Payload, PostError, QpType, SendOp, SendWr, Sge};

/// A checked request: its WQE and the WQE's size in 16-byte units.
pub(super) type Checked<'a> = (SendWqe<'a, Sge>, u32);

impl<D: Owners> Mlx5Sq<D> {
    /// Validate `wr` and give back its WQE (at the producer position) and the WQE's size.
    /// Writes nothing. (The QP state is checked by the budget, [`Self::take`].)
    #[inline(always)]
    pub(super) fn check<'a>(&self, wr: &SendWr<'a, D::Ah>) -> Result<Checked<'a>, PostError> {
        let w = send_wqe(wr, self.pi as u16, self.qpn, wr.ud.map(|d| D::av(d.ah)));
        // The ctrl segment, the raddr and atomic segments (the rest below).
        let mut ds = 1 + u32::from(w.raddr.is_some()) + u32::from(w.atomic.is_some());
        if self.qp_type != QpType::Rc || wr.ud.is_some() {
            ds += self.check_transport(wr)?;
        }
        if wr.op.is_read_like() {
            ds += self.check_read_like(wr, w.raddr, w.atomic.is_some())?;
            return Ok((w, ds));
        }
        match wr.payload {
            Payload::Inline(data) => {
                if data.len() > self.caps.max_inline_data as usize {
                    return Err(PostError::InlineTooLarge {
                        len: data.len().min(u32::MAX as usize) as u32,
                        max: self.caps.max_inline_data,
                    });
                }
                ds += inline_ds(data.len());
            }
            Payload::Sges(sges) => {
                if sges.len() > self.caps.max_send_sge as usize {
                    return Err(PostError::TooManySges {
                        n: sges.len().min(u32::MAX as usize) as u32,
                        max: self.caps.max_send_sge,
                    });
                }
                ds += sges.iter().filter(|s| s.length != 0).count() as u32;
            }
        }
        if ds > MAX_DS as u32 {
            // The ctrl segment's ds field has 6 bits.
            return Err(PostError::InlineTooLarge {
                len: wr.payload.len().min(u32::MAX as usize) as u32,
                max: self
                    .caps
                    .max_inline_data
                    .min((MAX_DS * MLX5_WQE_DS_UNITS - inline::DATA) as u32),
            });
        }
        Ok((w, ds))
    }

    /// UC / UD rules, and a destination given to a connected QP. Returns the extra segments
    /// (UD: the 48-byte address vector).
    #[inline(never)]
    pub(super) fn check_transport(&self, wr: &SendWr<'_, D::Ah>) -> Result<u32, PostError> {
        match self.qp_type {
            QpType::Ud => {
                if !matches!(wr.op, SendOp::Send | SendOp::SendImm { .. }) {
                    return Err(PostError::OpNotSupported {
                        op: wr.op.name(),
                        qp_type: QpType::Ud,
                    });
                }
                if wr.ud.is_none() {
                    return Err(PostError::UdDest);
                }
                let len = wr.payload.len();
                if len > self.path_mtu as usize {
                    return Err(PostError::UdTooLarge {
                        len: len.min(u32::MAX as usize) as u32,
                        mtu: self.path_mtu,
                    });
                }
                Ok(3)
            }
            QpType::Uc | QpType::Rc => {
                if wr.ud.is_some() {
                    return Err(PostError::UdDest);
                }
                if self.qp_type == QpType::Uc && wr.op.is_read_like() {
                    return Err(PostError::OpNotSupported {
                        op: wr.op.name(),
                        qp_type: QpType::Uc,
                    });
                }
                Ok(0)
            }
        }
    }

    /// READ and atomics: local buffers only (no inline), READ not empty, atomics 8-byte
    /// aligned (`raddr`, the raddr segment's) with one 8-byte SGE. Returns the data
    /// segments' units.
    #[inline(never)]
    pub(super) fn check_read_like(
        &self,
        wr: &SendWr<'_, D::Ah>,
        raddr: Option<(u64, u32)>,
        atomic: bool,
    ) -> Result<u32, PostError> {
        let sges = match wr.payload {
            Payload::Inline(_) => return Err(PostError::InlineNotAllowed),
            Payload::Sges(s) => s,
        };
        if atomic {
            let raddr = raddr.map_or(0, |(raddr, _)| raddr);
            if raddr % 8 != 0 {
                return Err(PostError::AtomicMisaligned { raddr });
            }
            let len = wr.payload.len();
            if sges.len() != 1 || len != 8 {
                return Err(PostError::AtomicLocalLen {
                    len: len.min(u32::MAX as usize) as u32,
                });
            }
            return Ok(1);
        }
        if wr.payload.is_empty() {
            return Err(PostError::ZeroLengthRead);
        }
        if sges.len() > self.caps.max_send_sge as usize {
            return Err(PostError::TooManySges {
                n: sges.len().min(u32::MAX as usize) as u32,
                max: self.caps.max_send_sge,
            });
        }
        Ok(sges.iter().filter(|s| s.length != 0).count() as u32)
    }
}
