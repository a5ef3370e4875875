//! Bookkeeping shared between a queue (the producer) and the CQs it completes on (the
//! consumers): the send and receive wr_id rings, the CQ budget, the QP state, and the route a
//! CQ uses to find a QP's rings by `qp_num`. All of it is atomics: a queue and its CQs may be
//! used from different threads.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::cq_room::{self, Need};
use crate::types::{QpState, RingError};

/// A doorbell libibverbs refused on a bare `ring` that nothing has reported yet. Kept by the
/// queue's `ring`; taken once, by whichever comes first: the queue's next `post` (the
/// request handed back with this error), `try_ring`, `take_ring_error`, or an empty poll of
/// the CQ the queue completes on (a completion flagged `WcFlags::REFUSED`). Written and taken
/// on the control of the error only: the post path reads `set` (one relaxed load).
#[derive(Default)]
pub(super) struct Refusal {
    set: AtomicBool,
    error: Mutex<Option<RingError>>,
}

impl Refusal {
    /// Keep `e` (a refusal not taken yet is replaced: the queue's next post would have taken
    /// it first); counted on `cq`, the CQ the queue completes on, for its poll to look.
    #[cold]
    pub(super) fn keep(&self, e: RingError, cq: Option<&CqBudget>) {
        let mut g = self.error.lock().unwrap_or_else(|p| p.into_inner());
        if g.replace(e).is_none() {
            if let Some(b) = cq {
                b.refusals.fetch_add(1, Ordering::AcqRel);
            }
        }
        self.set.store(true, Ordering::Release);
    }

    /// True when a refusal waits (cheap: the post path's test).
    #[inline(always)]
    pub(super) fn pending(&self) -> bool {
        self.set.load(Ordering::Relaxed)
    }

    /// The refusal kept, if any, taken (and uncounted on `cq`).
    #[cold]
    pub(super) fn take(&self, cq: Option<&CqBudget>) -> Option<RingError> {
        let mut g = self.error.lock().unwrap_or_else(|p| p.into_inner());
        let e = g.take();
        self.set.store(false, Ordering::Release);
        if e.is_some() {
            if let Some(b) = cq {
                b.refusals.fetch_sub(1, Ordering::AcqRel);
            }
        }
        e
    }
}

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
    /// The SQ's `next_seq` when its QP was dropped (set then; what is still outstanding of a
    /// dropped QP is `end - retired`).
    pub(super) end: AtomicU64,
    /// A refused `ibv_post_send` not reported yet.
    pub(super) refusal: Refusal,
}

impl SqRing {
    pub(super) fn new(cap: u32) -> SqRing {
        SqRing {
            cap: u64::from(cap),
            wr_ids: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            retired: AtomicU64::new(0),
            end: AtomicU64::new(0),
            refusal: Refusal::default(),
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
    /// A refused `ibv_post_recv` not reported yet.
    pub(super) refusal: Refusal,
}

impl RecvRing {
    pub(super) fn new(cap: u32) -> RecvRing {
        RecvRing {
            wr_ids: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            busy: (0..cap).map(|_| AtomicBool::new(false)).collect(),
            outstanding: AtomicU32::new(0),
            refusal: Refusal::default(),
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
    /// What the queues created on the CQ may hold (QP creation checks it against `cqe`; see
    /// `providers/cq_room.rs`).
    pub(super) commit: crate::cq_room::CqCommit,
    /// `ERROR_SET | handle` once the device reported the CQ in error (`IBV_EVENT_CQ_ERR`,
    /// read by `VerbsDevice::check_async`); 0 before.
    pub(super) error: AtomicU64,
    /// The states of the QPs created on this CQ (send or receive side), failed with it.
    /// Control path only.
    pub(super) qps: Mutex<Vec<Weak<SharedState>>>,
    /// QPs on this CQ dropped (destroyed) whose CQ entries are still reserved: the CQ's next
    /// poll that finds it empty gives back what their completions did not (see
    /// `VerbsCq::sweep_dropped`).
    pub(super) dropped: AtomicU32,
    /// Refusals kept by the queues completing here, not reported yet (see [`Refusal`]): an
    /// empty poll reports them.
    pub(super) refusals: AtomicU32,
}

/// The next generation handed to a QP or SRQ (see the module doc, "Generations").
static NEXT_GEN: AtomicU32 = AtomicU32::new(1);

/// A fresh generation (never 0; wraps after 2^23 - 1).
pub(super) fn next_gen() -> u32 {
    loop {
        let g = NEXT_GEN.fetch_add(1, Ordering::Relaxed) & super::GEN_MASK as u32;
        if g != 0 {
            return g;
        }
    }
}

/// Set in `CqBudget::error` / `SharedState::cq_err` above the CQ's kernel handle.
pub(super) const ERROR_SET: u64 = 1 << 32;

impl CqBudget {
    /// The budget of a CQ of `cqe` entries (what was asked: the device may grant more).
    pub(super) fn new(cqe: u32) -> CqBudget {
        CqBudget {
            cqe,
            used: AtomicU32::new(0),
            commit: Default::default(),
            error: AtomicU64::new(0),
            qps: Mutex::new(Vec::new()),
            dropped: AtomicU32::new(0),
            refusals: AtomicU32::new(0),
        }
    }

    /// The CQ's kernel handle if the device reported it in error.
    #[inline]
    pub(super) fn error(&self) -> Option<u32> {
        let e = self.error.load(Ordering::Acquire);
        (e & ERROR_SET != 0).then_some(e as u32)
    }

    /// Record a QP created on this CQ (failed with it). Control path.
    pub(super) fn add_qp(&self, st: &Arc<SharedState>) {
        let mut v = self.qps.lock().unwrap_or_else(|p| p.into_inner());
        v.retain(|w| w.strong_count() > 0);
        v.push(Arc::downgrade(st));
        if let Some(h) = self.error() {
            st.fail_cq(h);
        }
    }

    /// The device reported this CQ (kernel handle `handle`) in error: it and every QP on it
    /// fail (their posts are refused naming the CQ, their state is ERR, a reset does not
    /// revive them). Control path.
    pub(super) fn fail(&self, handle: u32) {
        self.error
            .store(ERROR_SET | u64::from(handle), Ordering::Release);
        let v = self.qps.lock().unwrap_or_else(|p| p.into_inner());
        for st in v.iter().filter_map(Weak::upgrade) {
            st.fail_cq(handle);
        }
    }

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

/// Commit a new QP's queues on its CQ budgets (the CQ-room rule, `providers/cq_room.rs`):
/// `send_wr` on `send`, `recv_wr` on `recv` (`None`: the send CQ takes both).
pub(super) fn commit_qp(
    send: &CqBudget,
    recv: Option<&CqBudget>,
    send_wr: u32,
    recv_wr: u32,
) -> crate::Result<[Need; 2]> {
    cq_room::commit_qp(
        (&send.commit, send.cqe),
        recv.map(|r| (&r.commit, r.cqe)),
        send_wr,
        recv_wr,
    )
}

/// The CQs an SRQ's depth is committed on: (CQ budget identity, QPs attached through it).
/// Control path only.
#[derive(Default)]
pub(super) struct SrqCommits(std::sync::Mutex<Vec<(usize, u32)>>);

/// What a QP committed on its CQs, given back when the QP is dropped.
pub(super) struct CqCommits {
    pub(super) send: Arc<CqBudget>,
    pub(super) recv: Arc<CqBudget>,
    pub(super) need: [Need; 2],
    /// The SRQ whose depth this QP holds committed on `recv` (with the others attached
    /// through the same CQ), and that depth.
    pub(super) srq: Option<(Arc<SrqCommits>, u32)>,
}

impl CqCommits {
    /// Commit an SRQ of `depth` on the receive CQ, once per (SRQ, CQ) pair; `role` names the
    /// CQ in a refusal.
    pub(super) fn commit_srq(
        &mut self,
        srq: &Arc<SrqCommits>,
        depth: u32,
        role: &str,
    ) -> crate::Result<()> {
        let mut refs = srq.0.lock().unwrap_or_else(|p| p.into_inner());
        let id = Arc::as_ptr(&self.recv) as usize;
        match refs.iter_mut().find(|r| r.0 == id) {
            Some(r) => r.1 += 1,
            None => {
                let need = Need {
                    srq: depth,
                    ..Need::default()
                };
                self.recv
                    .commit
                    .commit(cq_room::VERB, role, self.recv.cqe, need)?;
                refs.push((id, 1));
            }
        }
        self.srq = Some((srq.clone(), depth));
        Ok(())
    }
}

impl Drop for CqCommits {
    fn drop(&mut self) {
        cq_room::release_qp(&self.send.commit, &self.recv.commit, self.need);
        if let Some((srq, depth)) = &self.srq {
            let mut refs = srq.0.lock().unwrap_or_else(|p| p.into_inner());
            let id = Arc::as_ptr(&self.recv) as usize;
            if let Some(i) = refs.iter().position(|r| r.0 == id) {
                refs[i].1 -= 1;
                if refs[i].1 == 0 {
                    refs.swap_remove(i);
                    self.recv.commit.release(Need {
                        srq: *depth,
                        ..Need::default()
                    });
                }
            }
        }
    }
}

/// How a CQ finds the rings of a QP that completes on it.
pub(super) struct Route {
    pub(super) qpn: u32,
    /// The QP's generation (its sends' `wr_id`s carry it).
    pub(super) sq_gen: u32,
    /// The generation its receives carry: the QP's, or its SRQ's.
    pub(super) rq_gen: u32,
    pub(super) sq: Option<Arc<SqRing>>,
    pub(super) rq: Option<Arc<RecvRing>>,
    /// The receives of `rq` were charged to this CQ's budget (own RQ, not an SRQ).
    pub(super) rq_charged: bool,
    /// The QP's state, set to ERR when an error completion arrives.
    pub(super) state: Option<Arc<SharedState>>,
    /// The QP was seen destroyed before the poll in progress began (set by `poll` itself).
    pub(super) sweepable: bool,
}

/// A QP state shared by its queues (readers on every post) and the CQs it completes on
/// (which record ERR when an error completion arrives). Written by the control path too
/// (the transitions, and the async events `VerbsDevice::check_async` reads).
pub(super) struct SharedState {
    state: AtomicU32,
    /// `ERROR_SET | handle` of a CQ of this QP that the device reported in error; 0 before.
    cq_err: AtomicU64,
    /// The QP was destroyed: completions of it still in a CQ are discarded, and a CQ that
    /// polls empty gives back the entries still reserved for it.
    pub(super) dropped: AtomicBool,
    /// Set once the QP is destroyed (after `dropped`): the device writes nothing more of it.
    pub(super) destroyed: AtomicBool,
}

impl SharedState {
    pub(super) fn new() -> SharedState {
        SharedState {
            state: AtomicU32::new(QpState::Reset.to_ibv()),
            cq_err: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
            destroyed: AtomicBool::new(false),
        }
    }
    #[inline]
    pub(super) fn get(&self) -> QpState {
        QpState::from_ibv(self.state.load(Ordering::Acquire))
    }
    /// Set the state; a QP whose CQ is in error stays in ERR.
    pub(super) fn set(&self, s: QpState) {
        let s = if self.cq_error().is_some() {
            QpState::Err
        } else {
            s
        };
        self.state.store(s.to_ibv(), Ordering::Release);
    }
    /// The kernel handle of this QP's CQ in error, if one is.
    #[inline]
    pub(super) fn cq_error(&self) -> Option<u32> {
        let e = self.cq_err.load(Ordering::Acquire);
        (e & ERROR_SET != 0).then_some(e as u32)
    }
    /// A CQ of this QP went into error: the QP is failed for good.
    pub(super) fn fail_cq(&self, handle: u32) {
        self.cq_err
            .store(ERROR_SET | u64::from(handle), Ordering::Release);
        self.set(QpState::Err);
    }
    /// Why a post to a QP not in a postable state is refused: its CQ's error first.
    #[inline]
    pub(super) fn refusal(&self) -> crate::types::PostError {
        match self.cq_error() {
            Some(cqn) => crate::types::PostError::CqError { cqn },
            None => crate::types::PostError::BadState { state: self.get() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cq_budget_refuses_beyond_cqe_and_recovers() {
        let b = CqBudget::new(3);
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

    /// The verbs provider refuses, without a device, what the mlx5 provider and the sim
    /// refuse: a send queue deeper than its CQ, and a shared CQ smaller than the sum.
    #[test]
    fn create_qp_rule_matches_the_other_providers() {
        let cq = Arc::new(CqBudget::new(16));
        let e = commit_qp(&cq, None, 128, 0).unwrap_err();
        assert_eq!(e.errno(), Some(libc::EINVAL));
        assert!(
            e.to_string().starts_with(
                "create_qp: EINVAL (Invalid argument) — the CQ has 16 entries but would have \
                 to absorb 128: this QP's max_send_wr 128 (128), and no other QP is on it."
            ),
            "{e}"
        );
        let a = CqCommits {
            send: cq.clone(),
            recv: cq.clone(),
            need: commit_qp(&cq, None, 8, 4).unwrap(),
            srq: None,
        };
        let e = commit_qp(&cq, None, 4, 1).unwrap_err();
        assert!(
            e.to_string()
                .contains("absorb 17: this QP's max_send_wr 4 + max_recv_wr 1 (5), and 1 other QP on it holds 12."),
            "{e}"
        );
        // A dropped QP gives its share back.
        drop(a);
        let rcq = Arc::new(CqBudget::new(4));
        let b = CqCommits {
            send: cq.clone(),
            recv: rcq.clone(),
            need: commit_qp(&cq, Some(&rcq), 16, 4).unwrap(),
            srq: None,
        };
        assert!(commit_qp(&cq, Some(&rcq), 0, 1).is_err());
        drop(b);
        commit_qp(&cq, Some(&rcq), 16, 4).unwrap();
    }

    /// An SRQ's depth is committed once per CQ its QPs complete on, and given back with the
    /// last of them.
    #[test]
    fn an_srq_counts_once_per_cq() {
        let cq = Arc::new(CqBudget::new(24));
        let srq = Arc::new(SrqCommits::default());
        let qp = |send: u32| -> crate::Result<CqCommits> {
            let mut c = CqCommits {
                send: cq.clone(),
                recv: cq.clone(),
                need: commit_qp(&cq, None, send, 0)?,
                srq: None,
            };
            c.commit_srq(&srq, 8, "CQ")?;
            Ok(c)
        };
        let a = qp(8).unwrap();
        let b = qp(8).unwrap();
        let Err(e) = qp(1) else {
            panic!("8 + 8 + SRQ 8 + 1 on 24")
        };
        assert!(e.to_string().contains("absorb 25"), "{e}");
        drop(a);
        let c = qp(8).unwrap();
        drop((b, c));
        // Everything given back: the whole depth is free again.
        commit_qp(&cq, None, 24, 0).unwrap();
    }
}
