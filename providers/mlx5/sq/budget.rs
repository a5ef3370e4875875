//! The posting budget (see "Posting budget" in the `sq` module doc): `limit - pi` WQEBBs a
//! post may take without looking at shared state, refilled from the consumer index, the
//! outstanding-request count and the CQ's reservation; the fast-path limit that follows it.

use std::sync::atomic::Ordering;

use super::{Mlx5Sq, FAST_INLINE_MAX};
use crate::mlx5::owners::Owners;
use crate::{PostError, QpState, QpType};

impl<D: Owners> Mlx5Sq<D> {
    /// Whether the QP allows the fast path (QP type, inline cap, `signal_every`), then the
    /// limit.
    pub(super) fn update_fast_limits(&mut self) {
        self.fast_ok = self.signal_every == 0
            && self.qp_type != QpType::Ud
            && self.caps.max_inline_data >= FAST_INLINE_MAX;
        self.publish_limit();
    }

    /// The fast-path limit after `limit` or `fast_ok` changed (see
    /// [`SqFastLimit`](super::SqFastLimit)): `limit` when the fast path is allowed and `pi..limit`
    /// does not wrap, else closed.
    #[inline(never)]
    pub(super) fn publish_limit(&mut self) {
        let end = if self.fast_ok && self.limit >= self.pi {
            self.limit
        } else {
            0
        };
        let g = &self.shared.fast_limit;
        g.fast_end.store(end, Ordering::SeqCst);
        // The poller may have failed the QP meanwhile (see `SqFastLimit`).
        if self.shared.failed.load(Ordering::SeqCst) {
            g.close();
        }
    }

    /// Hand back the CQ entries of the posting budget (the caller releases them in the CQ).
    pub(crate) fn take_cq_budget(&mut self) -> u32 {
        let held = self.limit.wrapping_sub(self.pi) + self.cq_extra;
        self.limit = self.pi;
        self.cq_extra = 0;
        self.publish_limit();
        held
    }

    /// CQ entries this queue holds as its posting budget: reserved in the CQ, not yet used by
    /// a post (see the module doc). [`super::super::Mlx5Cq::reserved`] counts them.
    pub fn cq_budget(&self) -> u32 {
        self.limit.wrapping_sub(self.pi) + self.cq_extra
    }

    /// Take `nbb` WQEBBs and one CQ entry from the posting budget. Fails (taking nothing)
    /// when the QP is not in RTS, the SQ is full or the CQ could overrun.
    #[inline(always)]
    pub(super) fn take(&mut self, nbb: u32) -> Result<(), PostError> {
        if self.limit.wrapping_sub(self.pi) >= nbb {
            // `nbb` WQEBBs of the budget go, with their CQ entries; the WQE uses one of
            // those, the other `nbb - 1` stay held.
            self.cq_extra += nbb - 1;
            return Ok(());
        }
        self.refill(nbb)
    }

    /// The slow path of [`Self::take`]: refresh the consumer index, take more CQ entries.
    #[cold]
    #[inline(never)]
    pub(super) fn refill(&mut self, nbb: u32) -> Result<(), PostError> {
        let state = self.state();
        if state != QpState::Rts {
            return Err(PostError::BadState { state });
        }
        let ci = self.shared.sq.done.ci.load(Ordering::Acquire);
        let room = self.wqe_cnt - self.pi.wrapping_sub(ci);
        let wrs = self
            .posted()
            .wrapping_sub(self.shared.sq.done.retired.load(Ordering::Acquire));
        if nbb > room || wrs >= self.caps.max_send_wr {
            return Err(PostError::QueueFull {
                capacity: self.caps.max_send_wr,
            });
        }
        let mut held = self.limit.wrapping_sub(self.pi) + self.cq_extra;
        if held == 0 {
            // Never more than the requests still allowed: an SQ then holds at most
            // `max_send_wr` entries, which QP creation made sure its CQ can absorb.
            held = self
                .cq
                .grab(room.min(self.cq_batch).min(self.caps.max_send_wr - wrs));
            if held == 0 {
                return Err(PostError::CqFull {
                    cqe: self.cq.dv.cqe_cnt,
                });
            }
        }
        // This WQE's entry; the rest is budget, as far as the SQ has room for it and the
        // requests it can carry (at least one WQEBB each) stay within max_send_wr.
        held -= 1;
        let budget = held.min(room - nbb).min(self.caps.max_send_wr - wrs - 1);
        self.limit = self.pi.wrapping_add(nbb).wrapping_add(budget);
        self.cq_extra = held - budget;
        self.publish_limit();
        Ok(())
    }

    /// Requests posted (free-running; see `bb_extra`).
    #[inline(always)]
    pub(super) fn posted(&self) -> u32 {
        self.pi.wrapping_sub(self.bb_extra)
    }

    /// The fast path may take an inline payload of `len` bytes now: the limit allows it for
    /// `pi` (budget, QP type and state, inline cap; see [`SqFastLimit`](super::SqFastLimit)) and the
    /// payload fits one inline segment.
    #[inline(always)]
    pub(super) fn fast_open(&self, len: usize) -> bool {
        // SAFETY: `fast_limit` points into `shared`, which this queue holds.
        let end = unsafe { (*self.fast_limit).fast_end.load(Ordering::Relaxed) };
        self.pi < end && len <= FAST_INLINE_MAX as usize
    }

    /// The limit refused for a fast-path request of `len` bytes: when only the budget ran
    /// out, refill it for this request (one WQEBB) and say so; the caller then writes it on
    /// the fast path. Otherwise (or when the refill is refused) false: the general path
    /// takes the request and finds the same refusal, if any.
    #[cold]
    #[inline(never)]
    pub(super) fn fast_refill(&mut self, len: usize) -> bool {
        self.fast_ok
            && len <= FAST_INLINE_MAX as usize
            && self.pi == self.limit
            && self.refill(1).is_ok()
    }

    /// WRs posted and not yet retired.
    pub(crate) fn outstanding(&self) -> u32 {
        let retired = self.shared.sq.done.retired.load(Ordering::Acquire);
        self.posted().wrapping_sub(retired)
    }
}
