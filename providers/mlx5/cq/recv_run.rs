//! The receive-only run of the fast path (see "The fast path" in `cq.rs`): a stream of
//! plain incoming SENDs (no immediate, no scatter) on the hot QP's RQ, each completing its
//! oldest outstanding receive. Kept apart from the two-sided loop of `hot.rs` so that its
//! state fits in registers whatever crate instantiates it: the run is bounded up front by
//! the receives published (no count kept per CQE), the CQE and the completion are addressed
//! by one index counting up to zero, and the QP is not kept live across the loop.

use super::cqe;
use super::hot::{recv_completion, PLAIN_MASK, QPN_MATCH_MASK, RESP_PLAIN};
use super::{late, Mlx5Cq};
use crate::barrier::from_device_load_barrier;
use crate::mlx5::owners::Owners;
use crate::Completion;
use std::sync::atomic::Ordering;

impl<D: Owners> Mlx5Cq<D> {
    /// [`Self::run_short`] with the receive side alone, from the CQE `cqe` at `ci` (owner
    /// bit `P`; `BIG`: 128-byte CQEs): takes the hot QP's RQ (an RQ, not an SRQ, completing
    /// into this CQ; no purge pending; the QP alive, else 0), then up to as many CQEs as
    /// receives are published and not completed (a CQE is taken only while a receive is
    /// known to be outstanding; a stray one is left to `process`, which drops it), stopping
    /// at the ring's end, at the end of `out`, or at a CQE that is not a plain SEND of the
    /// hot QP. Publishes the RQ tail reached and returns how many completions it wrote from
    /// the start of `out`. Kept: left to the general loop's `run_sides::<false, true>`,
    /// `recv16` +12.9 instructions (`benches/compare.sh`).
    #[inline(always)]
    pub(super) fn run_rq<const BIG: bool, const P: u8>(
        &self,
        ci: u32,
        cqe: *const u8,
        out: &mut [Completion],
    ) -> usize {
        // SAFETY: as in `run_mixed`: `hot_qp` is held by an entry of `entries`.
        let qp = unsafe { &*self.hot_qp };
        // `alive` as in `process` (`SeqCst`, see `CqShared::polling`); the receive side
        // completes into this CQ.
        if !qp.alive.load(Ordering::SeqCst) || self.hot_sides & super::HOT_RECV == 0 {
            return 0;
        }
        // An RQ (SRQ completions go to `process`), no purge pending.
        let rq = match &qp.rq {
            Some(rq) if qp.srq.is_none() && qp.purge_recv.load(Ordering::Relaxed) == 0 => rq,
            _ => return 0,
        };
        let tail0 = rq.tail.load(Ordering::Relaxed);
        // Receives published and not completed bound the run: no count per CQE.
        let ravail = rq.head.load(Ordering::Acquire).wrapping_sub(tail0);
        // Up to the ring's end: one owner parity for all of them.
        let cnt = self.dv.cqe_cnt;
        let m = out
            .len()
            .min((cnt - (ci & (cnt - 1))) as usize)
            .min(ravail as usize);
        if m == 0 {
            return 0;
        }
        let qpn = self.hot_qpn;
        let tag = qpn.to_be();
        let (rwrid, rmask) = (rq.wrid.as_ptr(), rq.mask);
        // `off` counts the bytes of `out` still to fill, negated: the completion is at
        // `out_end + off`, the CQE at `cqe_end + (off << scale)`. One induction variable for
        // both, which reaches 0 at the end.
        let out_end = out.as_mut_ptr().wrapping_add(m) as *mut u8;
        let cqe_end = cqe.wrapping_add((m * super::hot::COMPLETION) << super::hot::cqe_scale(BIG));
        let mut off = -((m * super::hot::COMPLETION) as isize);
        let mut tail = tail0;
        loop {
            let cqe = cqe_end.wrapping_offset(off << super::hot::cqe_scale(BIG));
            // SAFETY: byte 63 of a CQE of this CQ (`cqe` is one of the `m` from `ci`, before
            // the ring's end).
            if unsafe { cqe::op_own(cqe) } & PLAIN_MASK != RESP_PLAIN | P {
                break;
            }
            // Orders the owner-bit load above before the loads of the CQE body below.
            from_device_load_barrier();
            // SAFETY: a 4-aligned word of the CQE (bytes 56..59: sop, qpn).
            let w = u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) });
            if (w ^ tag) & QPN_MATCH_MASK != 0 {
                break;
            }
            // SAFETY: `rwrid` has `rmask + 1` entries; the index is masked.
            let wr_id = unsafe { &*rwrid.add((tail & rmask) as usize) }.load(Ordering::Relaxed);
            // SAFETY: `out_end + off` is a whole `Completion` of `out` (`off < 0`).
            let slot = unsafe { &mut *out_end.wrapping_offset(off).cast::<Completion>() };
            // SAFETY: a software-owned CQE of this CQ, read after the barrier above.
            *slot = unsafe { recv_completion(cqe, wr_id, qpn) };
            tail = tail.wrapping_add(1);
            off += super::hot::COMPLETION as isize;
            if off == 0 {
                break;
            }
        }
        let k = tail.wrapping_sub(tail0);
        if k != 0 {
            // The QP loaded again (not kept in a register across the loop).
            // SAFETY: as above; `hot_qp` is a plain field of `self`, its entry unchanged.
            let qp = unsafe { &*late(&self.hot_qp) };
            if let Some(rq) = &qp.rq {
                rq.tail.store(tail, Ordering::Release);
            }
        }
        k as usize
    }
}
