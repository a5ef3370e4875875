//! Validation of a send request against the QP (type, caps, op rules) and its decoding into a
//! [`Plan`]: what the WQE needs (opcode, immediate, remote and atomic operands, size in
//! 16-byte units). Writes nothing; the QP state is checked by the posting budget
//! (`budget.rs`).

use super::write::inline_ds;
use super::Mlx5Sq;
use crate::mlx5::owners::Owners;
use crate::mlx5::OpSegs;
use crate::wire::offset::inline;
use crate::wire::{MAX_DS, MLX5_OPCODE_RDMA_READ, MLX5_WQE_DS_UNITS};
use crate::{Payload, PostError, QpType, SendOp, SendWr};

/// A checked request decoded once: what the WQE needs.
#[derive(Clone, Copy)]
pub(super) struct Plan {
    pub(super) opcode: u8,
    pub(super) imm: u32,
    pub(super) has_remote: bool,
    pub(super) has_atomic: bool,
    pub(super) raddr: u64,
    pub(super) rkey: u32,
    pub(super) swap_add: u64,
    pub(super) compare: u64,
    /// Size in 16-byte units.
    pub(super) ds: u32,
}

impl Plan {
    #[inline(always)]
    pub(super) fn new(opcode: u8, imm: u32) -> Plan {
        Plan {
            opcode,
            imm,
            has_remote: false,
            has_atomic: false,
            raddr: 0,
            rkey: 0,
            swap_add: 0,
            compare: 0,
            ds: 1,
        }
    }
    #[inline(always)]
    pub(super) fn remote(mut self, raddr: u64, rkey: u32) -> Plan {
        self.has_remote = true;
        self.raddr = raddr;
        self.rkey = rkey;
        self.ds += 1;
        self
    }
    #[inline(always)]
    pub(super) fn atomic(mut self, swap_add: u64, compare: u64) -> Plan {
        self.has_atomic = true;
        self.swap_add = swap_add;
        self.compare = compare;
        self.ds += 1;
        self
    }
}

impl<D: Owners> Mlx5Sq<D> {
    /// Validate `wr` and decode it into what the WQE needs. Writes nothing. (The QP state is
    /// checked by the budget, [`Self::take`].)
    #[inline(always)]
    pub(super) fn check(&self, wr: &SendWr<'_, D::Ah>) -> Result<Plan, PostError> {
        // The op through the one SendOp -> opcode map: opcode, immediate, remote segment,
        // atomic operands.
        let o = OpSegs::of(wr.op);
        let mut p = Plan::new(u8::from(o.opcode), o.imm);
        if let Some((raddr, rkey)) = o.raddr {
            p = p.remote(raddr, rkey);
        }
        if let Some((swap_add, compare)) = o.atomic {
            p = p.atomic(swap_add, compare);
        }
        if self.qp_type != QpType::Rc || wr.ud.is_some() {
            p.ds += self.check_transport(wr)?;
        }
        if p.opcode >= MLX5_OPCODE_RDMA_READ {
            return self.check_read_like(wr, p);
        }
        match wr.payload {
            Payload::Inline(data) => {
                if data.len() > self.caps.max_inline_data as usize {
                    return Err(PostError::InlineTooLarge {
                        len: data.len().min(u32::MAX as usize) as u32,
                        max: self.caps.max_inline_data,
                    });
                }
                p.ds += inline_ds(data.len());
            }
            Payload::Sges(sges) => {
                if sges.len() > self.caps.max_send_sge as usize {
                    return Err(PostError::TooManySges {
                        n: sges.len().min(u32::MAX as usize) as u32,
                        max: self.caps.max_send_sge,
                    });
                }
                p.ds += sges.iter().filter(|s| s.length != 0).count() as u32;
            }
        }
        if p.ds > MAX_DS as u32 {
            // The ctrl segment's ds field has 6 bits.
            return Err(PostError::InlineTooLarge {
                len: wr.payload.len().min(u32::MAX as usize) as u32,
                max: self
                    .caps
                    .max_inline_data
                    .min((MAX_DS * MLX5_WQE_DS_UNITS - inline::DATA) as u32),
            });
        }
        Ok(p)
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
    /// aligned with one 8-byte SGE.
    #[inline(never)]
    pub(super) fn check_read_like(
        &self,
        wr: &SendWr<'_, D::Ah>,
        mut p: Plan,
    ) -> Result<Plan, PostError> {
        let sges = match wr.payload {
            Payload::Inline(_) => return Err(PostError::InlineNotAllowed),
            Payload::Sges(s) => s,
        };
        if p.has_atomic {
            if p.raddr % 8 != 0 {
                return Err(PostError::AtomicMisaligned { raddr: p.raddr });
            }
            let len = wr.payload.len();
            if sges.len() != 1 || len != 8 {
                return Err(PostError::AtomicLocalLen {
                    len: len.min(u32::MAX as usize) as u32,
                });
            }
            p.ds += 1;
            return Ok(p);
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
        p.ds += sges.iter().filter(|s| s.length != 0).count() as u32;
        Ok(p)
    }
}
