//! The general path of the CQ: one CQE of any kind (`process`), mapped to its QP through
//! the CQ's table, with purge marks, liveness, error syndromes and scatter-to-CQE; what the
//! fast paths leave. The module doc of `cq.rs` states the contract.

use super::table::{HOT_RECV, HOT_SEND};
use super::{cqe, syndrome_status, Mlx5Cq};
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::{before, QpShared, PURGE_ACTIVE};
use crate::wire::offset::data;
use crate::wire::{
    MLX5_CQE64_LEN, MLX5_CQE_OPCODE_SHIFT, MLX5_CQE_REQ, MLX5_CQE_REQ_ERR, MLX5_CQE_RESP_ERR,
    MLX5_INLINE_SCATTER_32, MLX5_INLINE_SCATTER_64, MLX5_INVALID_LKEY, MLX5_QPN_MASK,
    MLX5_WQE_DS_UNITS,
};
use crate::{mmio, Completion, WcStatus};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl<D: Owners> Mlx5Cq<D> {
    /// Parse the CQE at `ci` into `out`; false when it produced no completion (purged or
    /// bogus). `released` counts CQ entries given back. Every case; out of line.
    #[inline(never)]
    pub(super) fn process(
        &mut self,
        cqe: *const u8,
        op_own: u8,
        out: &mut Completion,
        released: &mut u32,
    ) -> bool {
        let opcode = op_own >> MLX5_CQE_OPCODE_SHIFT;
        // All `cqe::` reads below are of a 64-byte CQE of this CQ (`cqe_ptr`).
        // SAFETY: `cqe` is a 64-byte CQE of this CQ; sop_drop_qpn is 4-aligned.
        let sop_qpn = unsafe { cqe::sop_drop_qpn(cqe) };
        let qpn = sop_qpn & MLX5_QPN_MASK;
        // SAFETY: see above; wqe_counter is the high half of a 4-aligned word.
        let wqe_counter = u16::from_be(unsafe { cqe::wqe_counter_raw(cqe) });
        let Some(idx) = self.lookup(qpn) else {
            self.bogus += 1;
            return false;
        };
        let is_req = opcode == MLX5_CQE_REQ || opcode == MLX5_CQE_REQ_ERR;
        // A CQE of a side of the QP that does not complete into this CQ (only a lying device
        // writes one): its queue belongs to another poller; dropped and counted.
        let side = if is_req { HOT_SEND } else { HOT_RECV };
        if self.hot_sides & side == 0 {
            self.bogus += 1;
            return false;
        }
        // SAFETY: the entry's `Arc` keeps the `QpShared` alive; entries change only in
        // `register` (`&mut self`, never during a poll). Not borrowed from `self`, so the
        // poller's counters stay writable below.
        let qp: &QpShared = unsafe { &*Arc::as_ptr(&self.entries[idx].qp) };
        let mark = if is_req {
            &qp.purge_send
        } else {
            &qp.purge_recv
        };
        let m = mark.load(Ordering::Relaxed);
        if m & PURGE_ACTIVE != 0 {
            if before(self.ci, m as u32) {
                // A CQE the device wrote before the QP was reset or dropped. Its slot was
                // held for it (`QpShared::stale_send`/`stale_recv`): given back now.
                if !is_req {
                    if let Some(srq) = &qp.srq {
                        srq.free(wqe_counter as u32);
                    }
                }
                let held = if is_req {
                    &qp.stale_send
                } else {
                    &qp.stale_recv
                };
                if held
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |h| h.checked_sub(1))
                    .is_ok()
                {
                    *released += 1;
                }
                return false;
            }
            mark.store(0, Ordering::Relaxed);
        }
        // `SeqCst`: pairs with the dropper's store (see `CqShared::polling`); after this the
        // QP's memory stays valid until this poll ends.
        if !qp.alive.load(Ordering::SeqCst) {
            return false;
        }
        let err = opcode == MLX5_CQE_REQ_ERR || opcode == MLX5_CQE_RESP_ERR;
        *out = Completion::EMPTY;
        out.qp_num = qpn;
        if err {
            // The device moved the QP to ERR: its queues refuse posts from now on.
            if !qp.failed.swap(true, Ordering::SeqCst) {
                qp.fast_limit.close();
            }
            // SAFETY: see above; the word holds hw syndrome, type, vendor syndrome, syndrome.
            let w = unsafe { cqe::hw_err_synd(cqe) };
            let syndrome = w as u8;
            let vendor = (w >> 8) as u8;
            out.status = syndrome_status(syndrome);
            out.vendor_err = syndrome as u32 | (vendor as u32) << 8;
        }
        if is_req {
            return self.complete_send(
                qp,
                idx,
                cqe,
                op_own,
                sop_qpn,
                wqe_counter,
                err,
                out,
                released,
            );
        }
        self.complete_recv(qp, cqe, op_own, wqe_counter, err, out, released)
    }

    /// A 64-byte scatter (`MLX5_INLINE_SCATTER_64`: the data is in the 64 bytes before the
    /// CQE) exists only with 128-byte CQEs, where those bytes are the slot's first half; on a
    /// CQ of 64-byte CQEs they are the previous CQE, or memory before the ring.
    #[inline]
    pub(super) fn scatter_fits(&self, op_own: u8) -> bool {
        op_own & MLX5_INLINE_SCATTER_64 == 0 || self.dv.cqe_size == 128
    }

    /// A CQE claimed scattered data the poller cannot place where the request said (a
    /// device bug): nothing is written, the completion reports `GeneralErr` (the data did
    /// not arrive) and the CQE is counted in `bogus_cqes`.
    #[cold]
    pub(super) fn refuse_scatter(&mut self, out: &mut Completion) {
        self.bogus += 1;
        out.status = WcStatus::GeneralErr;
        out.byte_len = 0;
    }
}

/// Copy `len` bytes the device scattered into the CQE into the buffers named by up to `n`
/// data segments at `segs` (stop at an inline-invalid-lkey terminator).
///
/// # Safety
/// `cqe` is a 64-byte CQE inside a CQ buffer whose previous 64 bytes are also CQ memory when
/// `op_own & MLX5_INLINE_SCATTER_64`; `segs` points to `n` readable 16-byte data segments; their addresses are
/// registered memory the caller handed to the device for writing.
pub(super) unsafe fn scatter_from_cqe(
    cqe: *const u8,
    op_own: u8,
    len: u32,
    segs: *const u8,
    n: usize,
) {
    let (src, cap) = if op_own & MLX5_INLINE_SCATTER_32 != 0 {
        (cqe, 32usize)
    } else {
        (cqe.wrapping_sub(MLX5_CQE64_LEN), 64usize)
    };
    let mut left = (len as usize).min(cap);
    let mut from = 0usize;
    for k in 0..n {
        if left == 0 {
            break;
        }
        // SAFETY: `k < n` data segments are readable.
        let seg = unsafe { segs.add(k * MLX5_WQE_DS_UNITS) };
        // SAFETY: as above; fields are big-endian byte_count, lkey, addr.
        let (bc, lkey, addr) = unsafe {
            (
                u32::from_be(core::ptr::read_unaligned(
                    seg.add(data::BYTE_COUNT) as *const u32
                )),
                u32::from_be(core::ptr::read_unaligned(seg.add(data::LKEY) as *const u32)),
                u64::from_be(core::ptr::read_unaligned(seg.add(data::ADDR) as *const u64)),
            )
        };
        if lkey == MLX5_INVALID_LKEY && bc == 0 {
            break;
        }
        let take = (bc as usize).min(left);
        for b in 0..take {
            // SAFETY: source bytes are inside the CQE region named above (volatile: device
            // memory); the destination is the caller's registered buffer.
            unsafe {
                let v = mmio::read8(src.add(from + b));
                core::ptr::write((addr as usize + b) as *mut u8, v);
            }
        }
        from += take;
        left -= take;
    }
}
