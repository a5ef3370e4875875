//! The queue pair: its send queue, its receive queue, the control-path QP, and the limits
//! this provider enforces.

use std::mem::ManuallyDrop;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::rq::VerbsRq;
use super::shared::{CqBudget, CqCommits};
use super::sq::VerbsSq;
use crate::types::{QpCaps, QpState, QpType};
use crate::QueuePair;
use rdma_direct_core::control;

/// A queue pair of the verbs provider.
pub struct VerbsQp {
    // The queues hold raw pointers into `qp`: declared first, dropped first.
    pub(super) sq: VerbsSq,
    pub(super) rq: VerbsRq,
    /// Destroyed first in `drop` (see there).
    pub(super) qp: ManuallyDrop<control::Qp>,
    pub(super) caps: QpCaps,
    /// What the QP committed on its CQs (given back at drop).
    pub(super) _cq_commits: CqCommits,
    /// The CQs this QP completes on (one or two), told at drop.
    pub(super) cqs: [Option<Arc<CqBudget>>; 2],
}

/// Dropping a QP destroys it (`ibv_destroy_qp`: rxe produces no completion for it after
/// that) and discards what it still had: the completions of it already in a CQ are not
/// returned by `poll` (as on mlx5 and the sim), and the CQ entries its outstanding requests
/// hold stay reserved until its CQ next polls empty (then none of its completions can be
/// left in the CQ), so a CQ never overruns across a drop.
impl Drop for VerbsQp {
    fn drop(&mut self) {
        self.sq.ring.end.store(self.sq.next_seq, Ordering::Release);
        self.sq.state.dropped.store(true, Ordering::Release);
        // SAFETY: `self.qp` is dropped exactly once, here, and not used after: the queues'
        // raw pointers into it are not dereferenced by their own drops.
        unsafe { ManuallyDrop::drop(&mut self.qp) };
        // Destroyed: from now on an empty poll of each CQ means nothing of this QP is left.
        self.sq.state.destroyed.store(true, Ordering::Release);
        for b in self.cqs.iter().flatten() {
            b.dropped.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl VerbsQp {
    /// The control-path QP (for queries; do not change its state behind this provider's
    /// back: the state checks rely on [`Provider::connect`](crate::Provider::connect) / [`Provider::to_error`](crate::Provider::to_error)).
    pub fn inner(&self) -> &control::Qp {
        &self.qp
    }

    pub(super) fn set_state(&mut self, s: QpState) {
        self.sq.state.set(s);
    }
}

impl QueuePair for VerbsQp {
    type Sq = VerbsSq;
    type Rq = VerbsRq;

    fn qpn(&self) -> u32 {
        self.qp.qpn()
    }
    fn qp_type(&self) -> QpType {
        self.qp.qp_type()
    }
    fn state(&self) -> QpState {
        self.sq.state.get()
    }
    /// The limits this provider enforces: the requested values, never more than granted.
    fn caps(&self) -> QpCaps {
        self.caps
    }
    #[inline]
    fn sq(&mut self) -> &mut VerbsSq {
        &mut self.sq
    }
    #[inline]
    fn rq(&mut self) -> &mut VerbsRq {
        &mut self.rq
    }
    #[inline]
    fn queues(&mut self) -> (&mut VerbsSq, &mut VerbsRq) {
        (&mut self.sq, &mut self.rq)
    }
}
