//! The queue pair: its send queue, its receive queue, the control-path QP, and the limits
//! this provider enforces.

use super::rq::VerbsRq;
use super::shared::CqCommits;
use super::sq::VerbsSq;
use crate::types::{QpCaps, QpState, QpType};
use crate::QueuePair;
use rdma_direct_core::verbs;

/// A queue pair of the verbs provider.
pub struct VerbsQp {
    // The queues hold raw pointers into `qp`: declared first, dropped first.
    pub(super) sq: VerbsSq,
    pub(super) rq: VerbsRq,
    pub(super) qp: verbs::Qp,
    pub(super) caps: QpCaps,
    /// What the QP committed on its CQs (given back at drop).
    pub(super) _cq_commits: CqCommits,
}

impl VerbsQp {
    /// The control-path QP (for queries; do not change its state behind this provider's
    /// back: the state checks rely on [`Provider::connect`](crate::Provider::connect) / [`Provider::to_error`](crate::Provider::to_error)).
    pub fn inner(&self) -> &verbs::Qp {
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
