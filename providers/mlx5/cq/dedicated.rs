//! The poll of a CQ that one QP alone completes into, for [`Mlx5Dedicated`], which owns
//! both.
//!
//! Owning both changes what a poll must guard against: no other thread can drop the QP, reset
//! it or register another QP with the CQ while the poll runs (each takes `&mut` of the pair),
//! so the polling handshake (`CqShared::polling`), the QP's liveness and its purge marks need
//! no check per CQE. [`Mlx5Dedicated`] closes the way (its `tag` names no QP) whenever it
//! hands out its QP for the control path, and opens it again only once no purge is pending.
//! What a CQE must still prove, the same as in [`Mlx5Cq::poll_one`]'s requester case:
//!
//! - it is software-owned, a successful requester CQE without scattered data (one test of
//!   `op_own`), read behind the load barrier;
//! - it names the QP, with a WQE opcode that carries no byte length (one compare of CQE
//!   bytes 56..59 with the tag);
//! - it completes the oldest outstanding WQE (`wqe_counter` equal to the retired position);
//! - that WQE, at the size the poster recorded, lies below the producer position of the last
//!   doorbell (read from the send queue itself: the poster is the caller);
//! - the wr_id is the poster's record, never the ring the device reads.
//!
//! Anything else is [`Took::Other`]: the caller takes the general poll, which handles every
//! case. A CQ in error with nothing in its ring is `Other` too (the general poll reports it).
//!
//! [`Mlx5Dedicated`]: crate::mlx5::Mlx5Dedicated

use super::{cqe, cqe_ptr, late, Mlx5Cq, NO_HOT_TAG};
use crate::barrier::from_device_load_barrier;
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::QpShared;
use crate::mlx5::sq::Mlx5Sq;
use crate::wire::{
    cqe_sw_owned_x, MLX5_CQE_OPCODE_SHIFT, MLX5_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_WR_IMM,
};
use crate::Completion;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What [`Mlx5Cq::take_dedicated`] found at `ci`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Took {
    /// One completion written, `ci` one on.
    One,
    /// Nothing in the ring (and the CQ not in error).
    Empty,
    /// A CQE this way does not take (or a CQ in error): nothing changed.
    Other,
}

impl<D: Owners> Mlx5Cq<D> {
    /// Take the CQE at `ci` if it is a plain requester CQE that completes the oldest
    /// outstanding WQE of `sq`, the one queue that completes into this CQ (the module doc
    /// says what is checked); with `COVER` also one that names a later WQE (a completion
    /// covering unsignaled requests): the checks and the count of [`Self::req_cqe_covered`]
    /// against the producer position of the last doorbell (a larger WQE outstanding: left
    /// to the general poll's `process`). `tag`: the QP's number as CQE bytes 57..59 hold it
    /// (`hot_tag`'s form), or [`NO_HOT_TAG`] to take nothing; `len_qpn`: the completion's
    /// `byte_len` and `qp_num` word for this QP (by reference: read at the end, see
    /// [`late`]). The pair's `poll_one` takes the instance without `COVER` inline and the
    /// one with it on its slow way, out of line (the common case keeps its registers).
    ///
    /// The caller owns the QP of `sq` and this CQ together and has checked that no other QP
    /// completes here and that the QP has no purge pending (else `tag` is [`NO_HOT_TAG`]).
    #[inline(always)]
    pub(crate) fn take_dedicated<const COVER: bool>(
        &mut self,
        sq: &Mlx5Sq<D>,
        tag: u64,
        len_qpn: &u64,
        out: &mut Completion,
    ) -> Took {
        use super::hot::REQ_OP_WITH_LEN;
        let cqe = self.cur;
        // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
        let x = unsafe { cqe::op_own(cqe) } ^ self.cur_par;
        if x & crate::wire::CQE_PLAIN_OWNED_MASK != 0 {
            if !cqe_sw_owned_x(x) && !self.shared.error.load(Ordering::Relaxed) {
                return Took::Empty;
            }
            return Took::Other;
        }
        // Orders the owner-bit load above before the loads of the CQE body below.
        from_device_load_barrier();
        // SAFETY: `cqe` is a 64-byte CQE of this CQ; sop_drop_qpn is 4-aligned.
        let w = u64::from(u32::from_le(unsafe { cqe::sop_drop_qpn_raw(cqe) })) ^ tag;
        if w >= u64::from(REQ_OP_WITH_LEN) {
            return Took::Other;
        }
        let (wqes, mask, rung, done) = sq.dedicated_view();
        let sci = done.ci.load(Ordering::Relaxed);
        // SAFETY: the 2-aligned wqe_counter field of the CQE.
        let wc = u16::from_be(unsafe { cqe::wqe_counter_raw(cqe) });
        if wc != sci as u16 {
            if !COVER {
                // A later WQE: the caller's slow way takes it (the instance with `COVER`).
                return Took::Other;
            }
            return self.take_dedicated_covered(sq, sci, wc, w as usize, len_qpn, out);
        }
        // SAFETY: `out` is a whole, writable `Completion`; `wqes` has `mask + 1` entries (the
        // queue's `SqShared::wqes`, which it keeps alive).
        if !unsafe {
            super::send_run::take_oldest_one(
                wqes,
                mask,
                done,
                sci,
                rung.wrapping_sub(sci),
                || late(len_qpn),
                w as usize,
                out,
            )
        } {
            return Took::Other;
        }
        // SAFETY: `self.shared` is an `Arc` this CQ holds and never replaces.
        let shared = unsafe { &*Arc::as_ptr(&self.shared) };
        let (ci, cqe) = (late(&self.ci), late(&self.cur));
        debug_assert_eq!(cqe, cqe_ptr(&self.dv, ci));
        self.advance_one(shared, ci, cqe);
        Took::One
    }

    /// [`Self::take_dedicated`] with `COVER` past its checks of the CQE, for a `wqe_counter`
    /// `wc` past the oldest outstanding WQE (at `sci`), WQE opcode `w` (no byte length):
    /// [`take_covered_one`](super::send_run::take_covered_one) against the position of the
    /// last doorbell (the poster is this thread).
    #[inline(always)]
    fn take_dedicated_covered(
        &mut self,
        sq: &Mlx5Sq<D>,
        sci: u32,
        wc: u16,
        w: usize,
        len_qpn: &u64,
        out: &mut Completion,
    ) -> Took {
        let (wqes, mask, rung, done) = sq.dedicated_view();
        // SAFETY: `out` is a whole, writable `Completion`; `wqes` has `mask + 1` entries (the
        // queue's `SqShared::wqes`, which it keeps alive).
        let took = unsafe {
            super::send_run::take_covered_one(
                || &*self.shared,
                wqes,
                mask,
                done,
                sci,
                rung.wrapping_sub(sci),
                || sq.big_end(),
                wc,
                || late(len_qpn),
                w,
                out,
            )
        };
        if !took {
            return Took::Other;
        }
        // SAFETY: `self.shared` is an `Arc` this CQ holds and never replaces.
        let shared = unsafe { &*Arc::as_ptr(&self.shared) };
        let (ci, cqe) = (late(&self.ci), late(&self.cur));
        self.advance_one(shared, ci, cqe);
        Took::One
    }

    /// [`Self::take_dedicated`] for a successful receive CQE without scattered data (SEND,
    /// SEND or RDMA WRITE WITH IMMEDIATE) of the hot QP's RQ: [`Self::process_recv`] without
    /// the polling handshake (same caller contract).
    #[inline(always)]
    pub(crate) fn take_dedicated_recv(&mut self, out: &mut Completion) -> Took {
        let ci = self.ci;
        let cqe = self.cur;
        // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
        let x = unsafe { cqe::op_own(cqe) } ^ self.cur_par;
        let op = x >> MLX5_CQE_OPCODE_SHIFT;
        if x & crate::wire::CQE_UNSCATTERED_OWNED_MASK != 0
            || !(MLX5_CQE_RESP_WR_IMM..=MLX5_CQE_RESP_SEND_IMM).contains(&op)
        {
            return Took::Other;
        }
        if self.take_recv_one(None, ci, cqe, op, out) {
            Took::One
        } else {
            Took::Other
        }
    }

    /// True when the CQE at `ci` is software-owned (a poll would find it).
    #[inline(always)]
    pub(crate) fn next_ready(&self) -> bool {
        // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
        cqe_sw_owned_x(unsafe { cqe::op_own(self.cur) } ^ self.cur_par)
    }

    /// The QPs registered with this CQ: one, `qp`, with its send side here (and no other,
    /// dropped or alive)?
    pub(crate) fn serves_only(&self, qp: &Arc<QpShared>) -> bool {
        matches!(&self.entries[..], [e] if Arc::ptr_eq(&e.qp, qp) && e.send)
    }

    /// The purge marks of the one QP have been passed (see `process`): the dedicated way may
    /// take its CQEs.
    pub(crate) fn purge_passed(&self) -> bool {
        self.entries.first().is_some_and(|e| self.purge_done(e))
    }
}

/// The tag of no QP (the dedicated way takes nothing).
pub(crate) const CLOSED: u64 = NO_HOT_TAG;
