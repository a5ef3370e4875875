//! The single-CQE ways of the poll: [`Mlx5Cq::poll_one`] (one completion, no slice) and the
//! end of a poll that took one CQE. The module doc of `cq.rs` states the contract ("The fast
//! path").

use super::{cqe, cqe_ptr, late, Mlx5Cq};
use crate::barrier::{consumer_index_barrier, from_device_load_barrier};
use crate::mlx5::owners::Owners;
use crate::mlx5::shared::CqShared;
use crate::wire::{
    cqe_sw_owned_x, MLX5_CQE_OPCODE_SHIFT, MLX5_CQE_RESP_SEND_IMM, MLX5_CQE_RESP_WR_IMM,
    MLX5_CQ_CI_MASK,
};
use crate::{mmio, Completion};
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl<D: Owners> Mlx5Cq<D> {
    /// [`CompletionQueue::poll_one`](crate::CompletionQueue::poll_one): at most one completion into `out`, true when it holds
    /// one. A plain requester CQE first takes `process_req` (the single-CQE short
    /// way) straight from here: the CQE address, one test of its `op_own` for a plain
    /// requester CQE with the owner bit of `ci`'s parity, the polling handshake, the CQE's
    /// checks and four stores, then the end of the poll. An empty CQ costs the address, the
    /// owner byte and two tests. Every other case is `poll` with one slot.
    // Inlined into the caller's loop: a call would save and restore four registers.
    #[inline(always)]
    pub fn poll_one(&mut self, out: &mut Completion) -> bool {
        let ci = self.ci;
        let cqe = self.cur;
        debug_assert_eq!(cqe, cqe_ptr(&self.dv, ci));
        // SAFETY: byte 63 of a CQE of this CQ (from_dv's contract).
        let x = unsafe { cqe::op_own(cqe) } ^ self.cur_par;
        const PM: u8 = crate::wire::CQE_PLAIN_OWNED_MASK;
        if x & PM != 0 {
            if !cqe_sw_owned_x(x) {
                // Nothing in the ring: a CQ in error is reported here as in `poll`.
                if self.shared.error.load(Ordering::Relaxed) {
                    return self.report_error(core::slice::from_mut(out)) == 1;
                }
                return false;
            }
            // A successful receive without scattered data (opcode RESP_WR_IMM, RESP_SEND or
            // RESP_SEND_IMM; no scatter bits, owner bit matched).
            let op = x >> MLX5_CQE_OPCODE_SHIFT;
            if x & crate::wire::CQE_UNSCATTERED_OWNED_MASK == 0
                && (MLX5_CQE_RESP_WR_IMM..=MLX5_CQE_RESP_SEND_IMM).contains(&op)
            {
                return self.poll_one_recv(out, ci, cqe, op);
            }
            return self.poll_one_general(out);
        }
        // SAFETY: `self.shared` is an `Arc` this CQ holds and never replaces (kept by address
        // for the end of the poll, not reloaded from `self` after the barriers).
        let shared = unsafe { &*Arc::as_ptr(&self.shared) };
        // From here on QP memory is read (see `CqShared::polling`).
        crate::mlx5::handshake::enter_poll(&shared.polling, self.light);
        // Orders the owner-bit load above before the loads of the CQE body below.
        from_device_load_barrier();
        if self.process_req::<true>(cqe, out) {
            self.finish_one(shared, ci, cqe);
            return true;
        }
        shared.polling.store(false, Ordering::Release);
        self.poll_one_general(out)
    }

    /// [`Self::poll_one`] for a successful receive CQE without scattered data at `ci`
    /// (`cqe`, WQE-less responder `opcode`): [`Self::process_recv`], else the poll of one
    /// slot. Out of line: the requester case keeps its registers.
    #[inline(never)]
    fn poll_one_recv(&mut self, out: &mut Completion, ci: u32, cqe: *const u8, opcode: u8) -> bool {
        // SAFETY: as in `poll_one`.
        let shared = unsafe { &*Arc::as_ptr(&self.shared) };
        // From here on QP memory is read (see `CqShared::polling`).
        crate::mlx5::handshake::enter_poll(&shared.polling, self.light);
        if self.take_recv_one(Some(shared), ci, cqe, opcode, out) {
            shared.polling.store(false, Ordering::Release);
            return true;
        }
        shared.polling.store(false, Ordering::Release);
        self.poll_one_general(out)
    }

    /// A successful receive CQE without scattered data at `ci` (`cqe`, WQE-less responder
    /// `opcode`, its owner byte seen): the load barrier, [`Self::process_recv`], and on
    /// success the end of a poll of one CQE but the polling handshake's
    /// ([`Self::advance_one`]); false, nothing changed, when `process_recv` leaves it.
    /// [`Self::poll_one`]'s receive way (inside the handshake) and the dedicated pair's
    /// (`take_dedicated_recv`, without one). `shared`: the CQ's shared state when the
    /// caller holds it (else read from `self` after `process_recv`).
    #[inline(always)]
    pub(super) fn take_recv_one(
        &mut self,
        shared: Option<&CqShared>,
        ci: u32,
        cqe: *const u8,
        opcode: u8,
        out: &mut Completion,
    ) -> bool {
        // Orders the owner-bit load above before the loads of the CQE body below.
        from_device_load_barrier();
        if !self.process_recv(cqe, opcode, out) {
            return false;
        }
        // The caller's, or (none at hand) loaded only now.
        // SAFETY: `self.shared` is an `Arc` this CQ holds and never replaces.
        let shared = shared.unwrap_or_else(|| unsafe { &*Arc::as_ptr(&self.shared) });
        self.advance_one(shared, ci, cqe);
        true
    }

    /// [`Self::poll_one`]'s every other case: the poll of one slot. Out of line.
    #[inline(never)]
    fn poll_one_general(&mut self, out: &mut Completion) -> bool {
        self.poll_inner::<false>(core::slice::from_mut(out), &mut []) == 1
    }

    /// [`Self::finish`] for a poll that took the one CQE at `ci` (`cqe`, `self.cur`): the
    /// next CQE's address is one stride on, or the ring's first at the wrap (parity flips).
    #[inline(always)]
    pub(super) fn finish_one(&mut self, shared: &CqShared, ci: u32, cqe: *const u8) {
        self.advance_one(shared, ci, cqe);
        shared.polling.store(false, Ordering::Release);
    }

    /// [`Self::finish_one`] without the polling handshake's end: `ci` one on, the next CQE's
    /// address, the CQ doorbell record, the published `ci`, one CQ entry given back. `ci` and
    /// the address are stored last, so a caller that reads them next (`next_ready`) has them
    /// in registers; the parity is read where it flips (see [`late`]).
    #[inline(always)]
    pub(super) fn advance_one(&mut self, shared: &CqShared, ci: u32, cqe: *const u8) {
        let next = ci.wrapping_add(1);
        let cur = if next & self.slot_mask != 0 {
            cqe.wrapping_add(self.cqe_stride)
        } else {
            crate::mlx5::cold_path();
            self.cur_par = late(&self.cur_par) ^ 1;
            self.cqe0
        };
        // Orders the CQE loads before the dbrec store below, which lets the device reuse
        // the slot.
        consumer_index_barrier();
        // SAFETY: `dbrec` is the CQ's 4-byte aligned doorbell record (from_dv's contract).
        unsafe { mmio::write32(self.dv.dbrec, (next & MLX5_CQ_CI_MASK).to_be()) };
        // Its request's entry given back with `ci` (see `CqShared::unreleased`).
        shared.ci.store(next, Ordering::Release);
        self.ci = next;
        self.cur = cur;
    }
}
