//! Receive queues: a QP's own receive queue or an SRQ, staged in preallocated
//! `ibv_recv_wr` / `ibv_sge` arrays and posted with one `ibv_post_recv` /
//! `ibv_post_srq_recv` at `ring`. Each receive's `wr_id` is tagged with its slot.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::{CqBudget, RecvRing, SharedState};
use super::sq::RingError;
use super::RECV_TAG;
use crate::ffi::{self, ibv_recv_wr, ibv_sge};
use crate::types::{PostError, QpState, QpType, RecvWr, Rejected};
use crate::RecvQueue;
use rdma_direct_core::control;

/// Where a receive queue posts.
#[derive(Clone, Copy)]
pub(super) enum RecvTarget {
    Qp(*mut ffi::ibv_qp),
    Srq(*mut ffi::ibv_srq),
    /// A QP created with an SRQ: its own receive queue does not exist.
    None,
}

/// A receive queue (of a QP) or an SRQ.
pub struct VerbsRecv {
    pub(super) target: RecvTarget,
    pub(super) qp_type: QpType,
    /// The QP state (receive queues of a QP only).
    pub(super) state: Arc<SharedState>,
    pub(super) max_sge: u32,
    pub(super) ring: Arc<RecvRing>,
    /// The receive CQ (own receive queue only).
    pub(super) budget: Option<Arc<CqBudget>>,
    /// Where the next slot search starts.
    pub(super) cursor: u32,
    pub(super) wrs: Box<[ibv_recv_wr]>,
    pub(super) sges: Box<[ibv_sge]>,
    pub(super) staged: u32,
    /// This queue's generation (see the module doc, "Generations").
    pub(super) gen: u32,
    /// `gen`, shifted into place in a receive's `wr_id`.
    pub(super) gen_bits: u64,
}

/// The receive queue of a [`VerbsQp`](super::VerbsQp).
pub type VerbsRq = VerbsRecv;

// SAFETY: the raw pointers are the QP/SRQ owned by the VerbsQp / kept alive by `VerbsSrq::srq`;
// verbs objects may be used from any thread and `&mut self` keeps one producer.
unsafe impl Send for VerbsRecv {}

impl VerbsRecv {
    pub(super) fn new(target: RecvTarget, qp_type: QpType, cap: u32, max_sge: u32) -> VerbsRecv {
        let gen = super::shared::next_gen();
        VerbsRecv {
            gen,
            gen_bits: u64::from(gen) << super::RECV_GEN_SHIFT,
            target,
            qp_type,
            state: Arc::new(SharedState::new()),
            max_sge,
            ring: Arc::new(RecvRing::new(cap)),
            budget: None,
            cursor: 0,
            wrs: (0..cap).map(|_| ibv_recv_wr::zeroed()).collect(),
            sges: vec![ibv_sge::default(); (cap * max_sge.max(1)) as usize].into_boxed_slice(),
            staged: 0,
        }
    }

    /// Receives outstanding.
    pub fn outstanding(&self) -> u32 {
        self.ring.outstanding.load(Ordering::Acquire)
    }

    /// Receives outstanding on this QP's own receive queue (0 for a QP on an SRQ, whose
    /// receives belong to the SRQ).
    pub(super) fn own_outstanding(&self) -> u32 {
        match self.target {
            RecvTarget::Qp(_) => self.outstanding(),
            _ => 0,
        }
    }
}

impl RecvQueue for VerbsRecv {
    #[inline]
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> Result<(), Rejected<RecvWr<'a>>> {
        let reject = |error| Err(Rejected { wr, error });
        if self.ring.refusal.pending() {
            if let Some(e) = self.take_ring_error() {
                // A bare `ring` was refused and nothing reported it: this call does, with
                // the receive handed back unposted.
                return reject(e.into());
            }
        }
        match self.target {
            RecvTarget::None => {
                return reject(PostError::OpNotSupported {
                    op: "POST_RECV (this QP receives through its SRQ)",
                    qp_type: self.qp_type,
                })
            }
            RecvTarget::Qp(_)
                if !matches!(
                    self.state.get(),
                    QpState::Init | QpState::Rtr | QpState::Rts
                ) =>
            {
                return reject(self.state.refusal())
            }
            _ => {}
        }
        if wr.sges.len() > self.max_sge as usize {
            return reject(PostError::TooManySges {
                n: wr.sges.len().min(u32::MAX as usize) as u32,
                max: self.max_sge,
            });
        }
        let cap = self.ring.cap();
        // `outstanding` counts staged receives too (incremented below).
        if self.ring.outstanding.load(Ordering::Acquire) >= cap {
            return reject(PostError::QueueFull { capacity: cap });
        }
        if let Some(b) = &self.budget {
            if !b.reserve(1) {
                return reject(PostError::CqFull { cqe: b.cqe });
            }
        }
        // A free slot exists (outstanding < cap); usually the one at the cursor.
        let mut slot = self.cursor;
        while self.ring.busy[slot as usize].load(Ordering::Acquire) {
            slot = (slot + 1) % cap;
        }
        self.cursor = (slot + 1) % cap;
        self.ring.wr_ids[slot as usize].store(wr.wr_id, Ordering::Release);
        self.ring.busy[slot as usize].store(true, Ordering::Release);
        self.ring.outstanding.fetch_add(1, Ordering::AcqRel);

        let i = self.staged as usize;
        let base = i * self.max_sge as usize;
        for (d, s) in self.sges[base..base + wr.sges.len()]
            .iter_mut()
            .zip(wr.sges)
        {
            *d = ibv_sge {
                addr: s.addr,
                length: s.length,
                lkey: s.lkey,
            };
        }
        let sg_list = if wr.sges.is_empty() {
            std::ptr::null_mut()
        } else {
            // SAFETY: `base < sges.len()` (i < cap, cap * max_sge entries).
            unsafe { self.sges.as_mut_ptr().add(base) }
        };
        let e = &mut self.wrs[i];
        e.wr_id = RECV_TAG | self.gen_bits | u64::from(slot);
        e.next = std::ptr::null_mut();
        e.sg_list = sg_list;
        e.num_sge = wr.sges.len() as libc::c_int;
        if i > 0 {
            let cur: *mut ibv_recv_wr = &mut self.wrs[i];
            self.wrs[i - 1].next = cur;
        }
        self.staged += 1;
        Ok(())
    }

    /// One `ibv_post_recv` / `ibv_post_srq_recv` with every staged receive linked.
    #[inline]
    fn ring(&mut self) {
        if self.staged == 0 {
            return;
        }
        let mut bad: *mut ibv_recv_wr = std::ptr::null_mut();
        let head = self.wrs.as_mut_ptr();
        let rc = match self.target {
            // SAFETY: live QP/SRQ (owned by the VerbsQp / this SRQ's owner); entries
            // 0..staged form a NULL-terminated list into our own arrays or registered memory.
            RecvTarget::Qp(qp) => unsafe { ffi::ops::post_recv(qp, head, &mut bad) },
            // SAFETY: as above.
            RecvTarget::Srq(srq) => unsafe { ffi::ops::post_srq_recv(srq, head, &mut bad) },
            RecvTarget::None => libc::EINVAL,
        };
        if rc != 0 {
            let first = if bad.is_null() {
                0
            } else {
                // SAFETY: `bad` points into the list we passed, inside `self.wrs`.
                (unsafe { bad.offset_from(head) }).clamp(0, self.staged as isize) as usize
            };
            let mut first_wr_id = 0;
            for k in first..self.staged as usize {
                let slot = self.wrs[k].wr_id as u32 as usize;
                if let Some(w) = self.ring.take(slot) {
                    if k == first {
                        first_wr_id = w;
                    }
                    if let Some(b) = &self.budget {
                        b.release(1);
                    }
                }
            }
            let e = RingError {
                verb: crate::types::RingVerb::PostRecv,
                errno: rc,
                first_wr_id,
                count: self.staged - first as u32,
            };
            self.ring.refusal.keep(e, self.budget.as_deref());
        }
        self.staged = 0;
    }

    fn take_ring_error(&mut self) -> Option<RingError> {
        if !self.ring.refusal.pending() {
            return None;
        }
        self.ring.refusal.take(self.budget.as_deref())
    }

    fn free_slots(&self) -> u32 {
        match self.target {
            RecvTarget::None => 0,
            _ => self.ring.cap() - self.ring.outstanding.load(Ordering::Acquire),
        }
    }
}

/// The SRQ type of [`VerbsDevice`](super::VerbsDevice): the receive queue plus the control-path SRQ.
pub struct VerbsSrq {
    pub(super) q: VerbsRecv,
    pub(super) srq: control::Srq,
    /// The CQs its depth is committed on (see `providers/cq_room.rs`).
    pub(super) commits: std::sync::Arc<super::shared::SrqCommits>,
}

impl VerbsSrq {
    /// The control-path SRQ (e.g. to arm its limit event).
    pub fn inner(&self) -> &control::Srq {
        &self.srq
    }
    /// Receives outstanding.
    pub fn outstanding(&self) -> u32 {
        self.q.outstanding()
    }
}

impl RecvQueue for VerbsSrq {
    #[inline]
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> Result<(), Rejected<RecvWr<'a>>> {
        self.q.post_recv(wr)
    }
    #[inline]
    fn ring(&mut self) {
        self.q.ring()
    }
    fn free_slots(&self) -> u32 {
        self.q.free_slots()
    }
    fn take_ring_error(&mut self) -> Option<RingError> {
        self.q.take_ring_error()
    }
}
