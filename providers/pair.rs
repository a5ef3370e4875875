//! A QP owned together with the CQ it alone completes into: [`Provider::Pair`], made by
//! [`Provider::own_pair`].
//!
//! The layout of a trading engine: one connection, one thread that posts and spins on its
//! completions. A pair is a [`QueuePair`] (post through `sq()` / `rq()`) and a
//! [`CompletionQueue`] (poll it), and hands its QP to the control path with
//! [`OwnedPair::qp_mut`] (`Provider::connect`, `connect_qp_*`, a reset). On mlx5 and the sim
//! it is [`crate::mlx5::Mlx5Dedicated`], whose poll takes a way of its own (no polling
//! handshake, QP lookup, liveness or purge check: nothing can happen to either while it
//! polls), and `own_pair` refuses a CQ another QP uses or a QP that sends elsewhere. On verbs
//! it is [`SideBySide`]: the QP and the CQ held together, polled as before; libibverbs' poll
//! has no cheaper way to take, and `own_pair` checks nothing.

use crate::{Completion, CompletionQueue, QueuePair};

#[cfg(doc)]
use crate::Provider;

/// A QP and the CQ it alone completes into, owned together (see the module doc).
pub trait OwnedPair: QueuePair + CompletionQueue {
    /// The provider's QP.
    type Qp: QueuePair;
    /// The provider's CQ.
    type Cq: CompletionQueue;
    /// The QP (read only).
    fn qp(&self) -> &Self::Qp;
    /// The QP for the control path (connect, reset, ...).
    fn qp_mut(&mut self) -> &mut Self::Qp;
    /// The CQ for what takes it mutably (an event waiter); a poll through it is the general
    /// one.
    fn cq_mut(&mut self) -> &mut Self::Cq;
    /// The QP and the CQ, apart again.
    fn into_parts(self) -> (Self::Qp, Self::Cq);
}

/// A QP and a CQ held together, each used as on its own: the [`OwnedPair`] of a provider
/// without a poll of its own for the layout (verbs).
#[derive(Debug)]
pub struct SideBySide<Q, C> {
    qp: Q,
    cq: C,
}

impl<Q, C> SideBySide<Q, C> {
    /// Hold `qp` and `cq` together.
    pub fn new(qp: Q, cq: C) -> Self {
        SideBySide { qp, cq }
    }
}

/// `QueuePair` for a type that holds its QP in a field, every method forwarded to it:
/// `forward_queue_pair!([generics] Type, field, SqType, RqType)`.
macro_rules! forward_queue_pair {
    ([$($gen:tt)*] $ty:ty, $qp:ident, $sq:ty, $rq:ty) => {
        impl<$($gen)*> $crate::QueuePair for $ty {
            type Sq = $sq;
            type Rq = $rq;
            fn qpn(&self) -> u32 {
                self.$qp.qpn()
            }
            fn qp_type(&self) -> $crate::QpType {
                self.$qp.qp_type()
            }
            fn state(&self) -> $crate::QpState {
                self.$qp.state()
            }
            fn caps(&self) -> $crate::QpCaps {
                self.$qp.caps()
            }
            #[inline]
            fn sq(&mut self) -> &mut $sq {
                self.$qp.sq()
            }
            #[inline]
            fn rq(&mut self) -> &mut $rq {
                self.$qp.rq()
            }
            #[inline]
            fn queues(&mut self) -> (&mut $sq, &mut $rq) {
                self.$qp.queues()
            }
        }
    };
}
pub(crate) use forward_queue_pair;

forward_queue_pair!([Q: QueuePair, C: CompletionQueue] SideBySide<Q, C>, qp, Q::Sq, Q::Rq);

impl<Q: QueuePair, C: CompletionQueue> CompletionQueue for SideBySide<Q, C> {
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        self.cq.poll(out)
    }
    fn poll_one(&mut self, out: &mut Completion) -> bool {
        self.cq.poll_one(out)
    }
    fn cqe(&self) -> u32 {
        self.cq.cqe()
    }
    fn poll_ts(&mut self, out: &mut [Completion], ns: &mut [u64]) -> usize {
        self.cq.poll_ts(out, ns)
    }
}

impl<Q: QueuePair, C: CompletionQueue> OwnedPair for SideBySide<Q, C> {
    type Qp = Q;
    type Cq = C;
    fn qp(&self) -> &Q {
        &self.qp
    }
    fn qp_mut(&mut self) -> &mut Q {
        &mut self.qp
    }
    fn cq_mut(&mut self) -> &mut C {
        &mut self.cq
    }
    fn into_parts(self) -> (Q, C) {
        (self.qp, self.cq)
    }
}
