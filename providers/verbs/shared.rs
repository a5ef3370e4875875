//! Bookkeeping shared between a queue (the producer) and the CQs it completes on (the
//! consumers): the send and receive wr_id rings, the CQ budget, the QP state, and the route a
//! CQ uses to find a QP's rings by `qp_num`. All of it is atomics: a queue and its CQs may be
//! used from different threads.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::types::QpState;

/// The user's wr_ids of one SQ, indexed by our send sequence modulo `cap`.
///
/// Indices: `retired` (written by the CQ poller only) is the sequence of the oldest request
/// not yet retired; the SQ's own `next_seq` (private to the SQ) is the next one to hand out.
/// `next_seq - retired <= cap` always holds, so a slot is never reused while its request is
/// outstanding. Both run free (u64, never wrap in practice) and are masked only at the slot.
pub(super) struct SqRing {
    pub(super) cap: u64,
    /// The user's wr_id per slot. Written by the SQ before the request is given to
    /// libibverbs, read by the poller after its completion (Release/Acquire).
    pub(super) wr_ids: Box<[AtomicU64]>,
    /// Sequence of the oldest outstanding request.
    pub(super) retired: AtomicU64,
}

impl SqRing {
    pub(super) fn new(cap: u32) -> SqRing {
        SqRing {
            cap: u64::from(cap),
            wr_ids: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            retired: AtomicU64::new(0),
        }
    }
    #[inline]
    pub(super) fn slot(&self, seq: u64) -> &AtomicU64 {
        &self.wr_ids[(seq % self.cap) as usize]
    }
}

/// The user's wr_ids of one receive queue or SRQ, one slot per outstanding receive.
///
/// A slot is taken by the producer (the queue) and freed by whichever CQ poller sees its
/// completion (SRQ receives may be polled out of order from different CQs), hence a busy
/// flag per slot rather than a FIFO.
pub(super) struct RecvRing {
    pub(super) wr_ids: Box<[AtomicU64]>,
    pub(super) busy: Box<[AtomicBool]>,
    /// Receives outstanding (posted, not yet polled).
    pub(super) outstanding: AtomicU32,
}

impl RecvRing {
    pub(super) fn new(cap: u32) -> RecvRing {
        RecvRing {
            wr_ids: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            busy: (0..cap).map(|_| AtomicBool::new(false)).collect(),
            outstanding: AtomicU32::new(0),
        }
    }
    pub(super) fn cap(&self) -> u32 {
        self.wr_ids.len() as u32
    }
    /// Retire slot `i` and return the user's wr_id; `None` if it was not busy.
    #[inline]
    pub(super) fn take(&self, i: usize) -> Option<u64> {
        let busy = self.busy.get(i)?;
        let w = self.wr_ids[i].load(Ordering::Acquire);
        if busy.swap(false, Ordering::AcqRel) {
            self.outstanding.fetch_sub(1, Ordering::AcqRel);
            Some(w)
        } else {
            None
        }
    }
}

/// Entries a CQ may still have to deliver.
pub(super) struct CqBudget {
    pub(super) cqe: u32,
    pub(super) used: AtomicU32,
}

impl CqBudget {
    /// Reserve `n` entries, or fail without changing anything.
    #[inline]
    pub(super) fn reserve(&self, n: u32) -> bool {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let Some(next) = cur.checked_add(n).filter(|&v| v <= self.cqe) else {
                return false;
            };
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(v) => cur = v,
            }
        }
    }
    #[inline]
    pub(super) fn release(&self, n: u32) {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let next = cur.saturating_sub(n);
            match self
                .used
                .compare_exchange_weak(cur, next, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(v) => cur = v,
            }
        }
    }
}

/// How a CQ finds the rings of a QP that completes on it.
pub(super) struct Route {
    pub(super) qpn: u32,
    pub(super) sq: Option<Arc<SqRing>>,
    pub(super) rq: Option<Arc<RecvRing>>,
    /// The receives of `rq` were charged to this CQ's budget (own RQ, not an SRQ).
    pub(super) rq_charged: bool,
    /// The QP's state, set to ERR when an error completion arrives.
    pub(super) state: Option<Arc<SharedState>>,
}

/// A QP state shared by its queues (readers on every post) and the CQs it completes on
/// (which record ERR when an error completion arrives). Written by the control path too.
pub(super) struct SharedState(AtomicU32);

impl SharedState {
    pub(super) fn new() -> SharedState {
        SharedState(AtomicU32::new(QpState::Reset.to_ibv()))
    }
    #[inline]
    pub(super) fn get(&self) -> QpState {
        QpState::from_ibv(self.0.load(Ordering::Acquire))
    }
    pub(super) fn set(&self, s: QpState) {
        self.0.store(s.to_ibv(), Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cq_budget_refuses_beyond_cqe_and_recovers() {
        let b = CqBudget {
            cqe: 3,
            used: AtomicU32::new(0),
        };
        assert!(b.reserve(2));
        assert!(b.reserve(1));
        assert!(!b.reserve(1));
        assert_eq!(b.used.load(Ordering::Relaxed), 3);
        b.release(2);
        assert!(b.reserve(2));
        assert!(!b.reserve(1));
        b.release(10);
        assert_eq!(b.used.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn recv_ring_slots_are_retired_once() {
        let r = RecvRing::new(2);
        r.wr_ids[1].store(77, Ordering::Relaxed);
        r.busy[1].store(true, Ordering::Relaxed);
        r.outstanding.store(1, Ordering::Relaxed);
        assert_eq!(r.take(1), Some(77));
        assert_eq!(r.take(1), None);
        assert_eq!(r.take(5), None);
        assert_eq!(r.outstanding.load(Ordering::Relaxed), 0);
    }
}
