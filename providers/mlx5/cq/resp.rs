//! The responder side of the CQ: receive completions (RQ in order, SRQ by WQE index). The
//! module doc of `cq.rs` states the contract.

use super::process::scatter_from_cqe;
use super::{cqe, Mlx5Cq, INLINE_SCATTER};
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::QpShared;
use crate::wire::{
    MLX5_CQE_FLAGS_GRH, MLX5_CQE_OPCODE_SHIFT, MLX5_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_WR_IMM,
    MLX5_QPN_MASK, MLX5_WQE_DS_UNITS,
};
use crate::{Completion, WcFlags, WcOpcode, WcStatus};
use std::sync::atomic::Ordering;

impl<D: Owners> Mlx5Cq<D> {
    /// A responder CQE of `qp`, past the purge and liveness checks of `process`: the RQ
    /// tail or the SRQ entry `wqe_counter` (a stray one is dropped and counted before any
    /// ring read), the receive fields, scatter into the receive's own SGEs, and only then
    /// the slot given back. False: dropped.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn complete_recv(
        &mut self,
        qp: &QpShared,
        cqe: *const u8,
        op_own: u8,
        wqe_counter: u16,
        err: bool,
        out: &mut Completion,
        released: &mut u32,
    ) -> bool {
        let opcode = op_own >> MLX5_CQE_OPCODE_SHIFT;
        // Responder side.
        out.opcode = WcOpcode::Recv;
        // Where the receive's data segments are (for scatter-to-CQE): pointer and count.
        let mut segs: (*const u8, usize) = (core::ptr::null(), 0);
        // Given back (RQ tail, SRQ slot) only after the scatter below has read the entry.
        let mut srq_slot = None;
        if let Some(srq) = &qp.srq {
            let i = wqe_counter as u32;
            // Out of range, or completed already and not yet reused: a stray CQE.
            if i >= srq.wqe_cnt
                || srq.freed[(i / 64) as usize].load(Ordering::Acquire) & (1 << (i % 64)) != 0
            {
                self.bogus += 1;
                return false;
            }
            out.wr_id = srq.wrid[i as usize].load(Ordering::Relaxed);
            if op_own & INLINE_SCATTER != 0 && !err {
                // SRQ entry: a 16-byte next segment, then data segments.
                let stride = srq.stride as usize;
                segs = (
                    srq.buf
                        .wrapping_add(i as usize * stride + MLX5_WQE_DS_UNITS),
                    (stride - MLX5_WQE_DS_UNITS) / MLX5_WQE_DS_UNITS,
                );
            }
            srq_slot = Some(i);
        } else if let Some(rq) = &qp.rq {
            let tail = rq.tail.load(Ordering::Relaxed);
            if tail == rq.head.load(Ordering::Acquire) {
                self.bogus += 1;
                return false;
            }
            out.wr_id = rq.wrid[(tail & rq.mask) as usize].load(Ordering::Relaxed);
            if op_own & INLINE_SCATTER != 0 && !err && !qp.rq_buf.is_null() {
                let stride = qp.rq_stride as usize;
                let p = qp.rq_buf.wrapping_add((tail & rq.mask) as usize * stride);
                segs = (p, stride / MLX5_WQE_DS_UNITS);
            }
            *released += 1;
        } else {
            self.bogus += 1;
            return false;
        }
        if !err {
            self.fill_recv(cqe, op_own, opcode, segs, out);
        }
        if let Some(i) = srq_slot {
            if let Some(srq) = &qp.srq {
                srq.free(i);
            }
        } else if let Some(rq) = &qp.rq {
            let tail = rq.tail.load(Ordering::Relaxed);
            rq.tail.store(tail.wrapping_add(1), Ordering::Release);
        }
        true
    }

    /// A successful responder CQE without scattered data (an incoming SEND, SEND WITH
    /// IMMEDIATE or RDMA WRITE WITH IMMEDIATE: `opcode`) taken on its own by
    /// [`Mlx5Cq::poll_one`]: when it names the hot QP, whose receives go to an RQ (not an
    /// SRQ), alive with no purge pending, and a receive is published and not completed, it
    /// completes the RQ's oldest receive (the fields `fill_recv` gives: byte count, source
    /// QP, GRH, the immediate in host order) and gives the RQ slot back; anything else is
    /// left (false, nothing changed) to [`Self::process`], which drops a stray CQE and counts
    /// it. Called with `shared.polling` set, after the load barrier.
    #[inline(always)]
    pub(super) fn process_recv(&self, cqe: *const u8, opcode: u8, out: *mut Completion) -> bool {
        // Bytes 57..59 (the qpn) against the hot QP's (`hot_rtag`: no hot QP, or one whose
        // receives do not complete here, matches nothing).
        // SAFETY: `cqe` is a 64-byte CQE of this CQ; sop_drop_qpn is 4-aligned.
        let w = u64::from(u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) }));
        if (w ^ self.hot_rtag) > 0xff {
            return false;
        }
        // SAFETY: `hot_qp` is the `QpShared` of an entry of `entries` (set with `hot_qpn` by
        // `lookup`, cleared by `register`, the only place entries go), which holds an `Arc`.
        let qp = unsafe { &*self.hot_qp };
        let rq = match &qp.rq {
            Some(rq) if qp.srq.is_none() => rq,
            _ => return false,
        };
        // `alive` as in `process` (`SeqCst`, see `CqShared::polling`).
        if qp.purge_recv.load(Ordering::Relaxed) != 0 || !qp.alive.load(Ordering::SeqCst) {
            return false;
        }
        let tail = rq.tail.load(Ordering::Relaxed);
        if tail == rq.head.load(Ordering::Acquire) {
            return false;
        }
        // SAFETY: 4-aligned words of the CQE (the caller's contract).
        let (byte_len, imm, frq) = unsafe {
            (
                cqe::byte_cnt(cqe),
                cqe::imm_inval_pkey(cqe),
                cqe::flags_rqpn(cqe),
            )
        };
        let grh = if (frq >> 24) as u8 & MLX5_CQE_FLAGS_GRH != 0 {
            WcFlags::GRH.0
        } else {
            0
        };
        let (opcode, imm, with_imm) = match opcode {
            MLX5_CQE_RESP_WR_IMM => (WcOpcode::RecvRdmaWithImm, imm, WcFlags::WITH_IMM.0),
            MLX5_CQE_RESP_SEND_IMM => (WcOpcode::Recv, imm, WcFlags::WITH_IMM.0),
            _ => (WcOpcode::Recv, 0, 0),
        };
        // SAFETY: `out` is a whole, writable `Completion` (the caller's); the index is masked.
        unsafe {
            out.write(Completion {
                wr_id: rq
                    .wrid
                    .get_unchecked((tail & rq.mask) as usize)
                    .load(Ordering::Relaxed),
                status: WcStatus::Success,
                opcode,
                byte_len,
                qp_num: self.hot_qpn,
                src_qp: frq & MLX5_QPN_MASK,
                imm,
                flags: WcFlags(grh | with_imm),
                ..Completion::EMPTY
            })
        };
        rq.tail.store(tail.wrapping_add(1), Ordering::Release);
        true
    }

    /// The responder fields of a successful receive completion, and its scattered data.
    #[inline(always)]
    fn fill_recv(
        &mut self,
        cqe: *const u8,
        op_own: u8,
        opcode: u8,
        segs: (*const u8, usize),
        out: &mut Completion,
    ) {
        // SAFETY: see above.
        out.byte_len = unsafe { cqe::byte_cnt(cqe) };
        // SAFETY: see above.
        let imm = unsafe { cqe::imm_inval_pkey(cqe) };
        // SAFETY: see above.
        let flags_rqpn = unsafe { cqe::flags_rqpn(cqe) };
        out.src_qp = flags_rqpn & MLX5_QPN_MASK;
        if (flags_rqpn >> 24) as u8 & MLX5_CQE_FLAGS_GRH != 0 {
            out.flags = WcFlags(out.flags.0 | WcFlags::GRH.0);
        }
        match opcode {
            MLX5_CQE_RESP_WR_IMM => {
                out.opcode = WcOpcode::RecvRdmaWithImm;
                out.imm = imm;
                out.flags = WcFlags(out.flags.0 | WcFlags::WITH_IMM.0);
            }
            MLX5_CQE_RESP_SEND_IMM => {
                out.imm = imm;
                out.flags = WcFlags(out.flags.0 | WcFlags::WITH_IMM.0);
            }
            _ => {}
        }
        if !segs.0.is_null() {
            if !self.scatter_fits(op_own) {
                self.refuse_scatter(out);
                return;
            }
            // SAFETY: the RQ / SRQ entry is ours (we wrote its data segments) and stays
            // untouched until the poster reuses it, which needs this completion and the slot
            // given back (after this call) first.
            unsafe { scatter_from_cqe(cqe, op_own, out.byte_len, segs.0, segs.1) };
        }
    }
}
