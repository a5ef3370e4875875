//! The requester side of the CQ: send completions. The module doc of `cq.rs` states the
//! contract (mapping `wqe_counter`, covered requests, the fast path, scatter by the WQE's
//! own opcode, retire after the copy).

use super::process::scatter_from_cqe;
use super::{cqe, Mlx5Cq, INLINE_SCATTER};
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::QpShared;
use crate::wire::offset::ctrl;
use crate::wire::{
    MLX5_OPCODE_ATOMIC_CS, MLX5_OPCODE_ATOMIC_FA, MLX5_OPCODE_RDMA_READ, MLX5_OPCODE_RDMA_WRITE,
    MLX5_OPCODE_RDMA_WRITE_IMM, MLX5_SEND_WQE_BB, MLX5_SND_DBR, MLX5_WQE_CTRL_DS_MASK,
    MLX5_WQE_DS_UNITS, MLX5_WQE_INDEX_MASK,
};
use crate::{mmio, Completion, WcOpcode};
use std::sync::atomic::{AtomicU32, Ordering};

/// The completion opcode of a requester CQE, from the send WQE opcode (CQE byte 56).
pub(super) const fn req_opcode(wqe_op: u8) -> WcOpcode {
    match wqe_op {
        MLX5_OPCODE_RDMA_WRITE | MLX5_OPCODE_RDMA_WRITE_IMM => WcOpcode::RdmaWrite,
        MLX5_OPCODE_RDMA_READ => WcOpcode::RdmaRead,
        MLX5_OPCODE_ATOMIC_CS => WcOpcode::CompSwap,
        MLX5_OPCODE_ATOMIC_FA => WcOpcode::FetchAdd,
        _ => WcOpcode::Send,
    }
}

impl<D: Owners> Mlx5Cq<D> {
    /// A requester CQE (REQ, REQ_ERR) of `qp` (entry `idx`), past the purge and liveness
    /// checks of `process`: map `wqe_counter` to the WQE, check it against the retired and
    /// the published producer position, count the covered requests, scatter (by the WQE's
    /// own opcode), then retire. False: dropped (counted in `bogus`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn complete_send(
        &mut self,
        qp: &QpShared,
        idx: usize,
        cqe: *const u8,
        op_own: u8,
        sop_qpn: u32,
        wqe_counter: u16,
        err: bool,
        out: &mut Completion,
        released: &mut u32,
    ) -> bool {
        let sq = &qp.sq;
        let ci = sq.done.ci.load(Ordering::Relaxed);
        // The producer position the poster published: the 16-bit send counter of the
        // QP's dbrec, which is never more than `wqe_cnt` (<= 32768) ahead of `ci`.
        // SAFETY: `dbrec` is the QP's 4-aligned doorbell record, alive while the QP is
        // (checked `alive` above: its memory outlives the QpShared's registration).
        let db =
            unsafe { (*(qp.dbrec.add(MLX5_SND_DBR) as *const AtomicU32)).load(Ordering::Acquire) };
        let pi = ci.wrapping_add(u32::from_be(db).wrapping_sub(ci) & MLX5_WQE_INDEX_MASK);
        // The WQE named must be outstanding: between the retired position and the
        // published producer position.
        let dist = (wqe_counter as u32).wrapping_sub(ci) & MLX5_WQE_INDEX_MASK;
        if dist >= pi.wrapping_sub(ci) {
            self.bogus += 1;
            return false;
        }
        let start = ci.wrapping_add(dist);
        let start_lo = start & MLX5_WQE_INDEX_MASK;
        // The unsignaled requests this completion covers: the WQEs from the oldest
        // outstanding one (at `ci`) up to the one named, which must start a WQE.
        let covered = if start == ci {
            0
        } else {
            match qp.wqes_between(ci, start) {
                Some(n) => n,
                None => {
                    self.bogus += 1;
                    return false;
                }
            }
        };
        let end = start.wrapping_add(qp.nbb_at(start));
        if end.wrapping_sub(ci) > pi.wrapping_sub(ci) {
            self.bogus += 1;
            return false;
        }
        out.wr_id = sq.wrid_at(start);
        out.covered = covered;
        if covered > 0 {
            out.covered_from = sq.wrid_at(ci);
        }
        let wqe_op = (sop_qpn >> 24) as u8;
        out.opcode = req_opcode(wqe_op);
        if !err {
            out.byte_len = match wqe_op {
                MLX5_OPCODE_ATOMIC_CS | MLX5_OPCODE_ATOMIC_FA => 8,
                // SAFETY: see above.
                MLX5_OPCODE_RDMA_READ => unsafe { cqe::byte_cnt(cqe) },
                _ => 0,
            };
            if op_own & INLINE_SCATTER != 0 && !self.scatter_req(idx, cqe, op_own, start_lo) {
                self.refuse_scatter(out);
            }
        }
        // Retired only now: the scatter above read the WQE's data segments, which the
        // poster may overwrite as soon as the position is published.
        sq.done.retire(end, covered + 1);
        *released += covered + 1;
        true
    }

    /// A successful requester CQE with no scattered data (`op_own & MLX5_CQE_REQ_PLAIN_MASK ==
    /// 0`) taken on its own: a poll of one slot, [`Mlx5Cq::poll_one`], or a CQE with no
    /// software-owned CQE after it (nothing to amortise a run's setup over). Takes it when it
    /// names the hot QP with an opcode without a byte length (SEND, WRITE, with or without
    /// IMM), the QP is alive with no purge pending, and the CQE completes its oldest
    /// outstanding WQE, which lies wholly below the published producer position (nothing
    /// covered, nothing to walk); anything else is left (false, nothing changed) to
    /// [`Self::process`], which handles every case. The completion is [`put_req`](super::send_run::put_req)'s four
    /// stores; gives back one CQ entry. Called with `shared.polling` set, after the load
    /// barrier.
    #[inline(always)]
    pub(super) fn process_req<const COVERED: bool>(
        &self,
        cqe: *const u8,
        out: *mut Completion,
    ) -> bool {
        use super::hot::{len_qpn, REQ_OP_WITH_LEN};
        // Bytes 56..59 as they lie in memory: sop (the WQE opcode), qpn (big-endian). The qpn
        // bytes XOR the hot QP's to zero, leaving the opcode; with no hot QP nothing passes
        // (`hot_tag` has bit 32 set). One compare: the hot QP and an opcode below READ.
        // SAFETY: `cqe` is a 64-byte CQE of this CQ; sop_drop_qpn is 4-aligned.
        let w = u64::from(u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) })) ^ self.hot_tag;
        if w >= u64::from(REQ_OP_WITH_LEN) {
            return false;
        }
        // SAFETY: `hot_qp` is the `QpShared` of an entry of `entries` (set with `hot_qpn` by
        // `lookup`, cleared by `register`, the only place entries go), which holds an `Arc`;
        // `w` passed, so there is a hot QP.
        let qp = unsafe { &*self.hot_qp };
        // `alive` as in `process` (`SeqCst`, see `CqShared::polling`).
        if qp.purge_send.load(Ordering::Relaxed) != 0 || !qp.alive.load(Ordering::SeqCst) {
            return false;
        }
        let sq = &qp.sq;
        let ci = sq.done.ci.load(Ordering::Relaxed);
        // The WQE named must be the oldest outstanding one.
        // SAFETY: the 2-aligned wqe_counter field of the CQE.
        let wc = unsafe { cqe::wqe_counter_raw(cqe) };
        if u16::from_be(wc) != ci as u16 {
            // A later WQE: a completion covering unsignaled requests (`poll_one`; a poll's
            // general loop takes it on its fast path, `run_hot`).
            return COVERED && self.process_req_covered(qp, ci, u16::from_be(wc), w as usize, out);
        }
        // Published WQEBBs not yet retired (see `process`). The entry is our own memory,
        // never the ring (a stray CQE goes to `process`, which drops it).
        let posted = super::hot::avail_at(qp.dbrec, ci);
        // SAFETY: `out` is a whole, writable `Completion` (the caller's); `wqes` has
        // `mask + 1` entries.
        unsafe {
            super::send_run::take_oldest_one(
                sq.wqes.as_ptr(),
                sq.mask,
                &sq.done,
                ci,
                posted,
                || len_qpn(0, self.hot_qpn),
                w as usize,
                out,
            )
        }
    }

    /// [`Self::process_req`] for a CQE naming a WQE past the oldest outstanding one (at WQEBB
    /// position `ci` of `qp`, the hot QP, alive, no purge pending): `wqe_counter` `wc`, WQE
    /// opcode `w` (no byte length); [`take_covered_one`](super::send_run::take_covered_one)
    /// against the producer position published now.
    #[inline(always)]
    fn process_req_covered(
        &self,
        qp: &QpShared,
        ci: u32,
        wc: u16,
        w: usize,
        out: *mut Completion,
    ) -> bool {
        let sq = &qp.sq;
        let posted = super::hot::avail_at(qp.dbrec, ci);
        // SAFETY: `out` is the caller's whole, writable `Completion`; `wqes` has `mask + 1`
        // entries.
        unsafe {
            super::send_run::take_covered_one(
                || &*self.shared,
                sq.wqes.as_ptr(),
                sq.mask,
                &sq.done,
                ci,
                posted,
                || sq.big_end.load(Ordering::Relaxed),
                wc,
                || super::hot::len_qpn(0, self.hot_qpn),
                w,
                out,
            )
        }
    }

    /// Scatter-to-CQE for a requester CQE: the WQE's own opcode and data segments, read back
    /// from our SQ ring, decide where the data goes (never the CQE's claims): READ (up to
    /// the WQE's own byte counts, at most what the CQE carries) and atomics (8 bytes).
    /// False when the data cannot go anywhere the request named (another opcode, or a
    /// 64-byte scatter on a CQ of 64-byte CQEs).
    fn scatter_req(&self, idx: usize, cqe: *const u8, op_own: u8, start: u32) -> bool {
        if !self.scatter_fits(op_own) {
            return false;
        }
        let qp = &self.entries[idx].qp;
        let sq = &qp.sq;
        let base = ((start & sq.mask) as usize) * MLX5_SEND_WQE_BB;
        // SAFETY: the WQE is outstanding (not yet retired: the caller retires it after this
        // call), so its bytes in our SQ ring are still the ones we wrote; the opcode byte is
        // inside the ctrl segment.
        let op = unsafe { mmio::read8(qp.sq_buf.add(base + ctrl::OPCODE)) };
        // Data segments: READ = ctrl, raddr, data...; atomics = ctrl, raddr, atomic, data.
        let (first_data, len) = match op {
            MLX5_OPCODE_RDMA_READ => {
                // SAFETY: a 4-aligned word of the CQE.
                (2 * MLX5_WQE_DS_UNITS, unsafe { cqe::byte_cnt(cqe) })
            }
            MLX5_OPCODE_ATOMIC_CS | MLX5_OPCODE_ATOMIC_FA => (3 * MLX5_WQE_DS_UNITS, 8),
            _ => return false,
        };
        // SAFETY: as above; this byte of the ctrl segment holds ds (low 6 bits).
        let ds = (u32::from(unsafe { mmio::read8(qp.sq_buf.add(base + ctrl::DS)) })
            & MLX5_WQE_CTRL_DS_MASK) as usize;
        // Data segments of this WQE (at most 4 are needed: scatter-to-CQE carries at most 64
        // bytes and READ SGEs are not empty), copied out with the ring wrap.
        let n = ds.saturating_sub(first_data / MLX5_WQE_DS_UNITS).min(4);
        let mut segs = [[0u8; MLX5_WQE_DS_UNITS]; 4];
        for (k, seg) in segs.iter_mut().enumerate().take(n) {
            let off = (base + first_data + k * MLX5_WQE_DS_UNITS) % qp.sq_bytes;
            // SAFETY: `off` is a segment start inside the SQ ring.
            unsafe {
                core::ptr::copy_nonoverlapping(
                    qp.sq_buf.add(off),
                    seg.as_mut_ptr(),
                    MLX5_WQE_DS_UNITS,
                )
            };
        }
        // SAFETY: `segs` is a local copy of `n` data segments of our own WQE; the CQE size
        // was checked for a 64-byte scatter.
        unsafe { scatter_from_cqe(cqe, op_own, len, segs.as_ptr() as *const u8, n) };
        true
    }
}
