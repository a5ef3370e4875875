//! The send queue: checks a request against the QP (type, destination, payload, state),
//! stages it in preallocated `ibv_send_wr` / `ibv_sge` / inline arrays, and posts every staged
//! request with one `ibv_post_send` at `ring`.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::{CqBudget, SharedState, SqRing};
use crate::ffi::{self, ibv_send_wr, ibv_sge};
use crate::types::{Payload, PostError, QpState, QpType, Rejected, SendFlags, SendOp, SendWr};
use crate::SendQueue;
use rdma_direct_core::control;

/// The send queue of a [`VerbsQp`](super::VerbsQp).
pub struct VerbsSq {
    pub(super) qp: *mut ffi::ibv_qp,
    pub(super) qp_type: QpType,
    pub(super) state: Arc<SharedState>,
    pub(super) sig_all: bool,
    /// Path MTU in bytes (UD size check), set at connect.
    pub(super) mtu: u32,
    pub(super) max_sge: u32,
    pub(super) max_inline: u32,
    pub(super) ring: Arc<SqRing>,
    pub(super) budget: Arc<CqBudget>,
    /// Next send sequence to hand out (free running).
    pub(super) next_seq: u64,
    /// This QP's generation, shifted into place in a send's `wr_id`.
    pub(super) gen_bits: u64,
    /// Preallocated staging: one WR per slot, `max_sge` SGEs per slot, `max_inline` bytes
    /// per slot. Entries `0..staged` form the linked list the next `ring` posts.
    pub(super) wrs: Box<[ibv_send_wr]>,
    pub(super) sges: Box<[ibv_sge]>,
    pub(super) inline: Box<[u8]>,
    pub(super) staged: u32,
    /// Signal at least every this many requests (0 = off); see [`SendQueue::set_signal_every`].
    pub(super) signal_every: u32,
    /// Requests posted since the last signaled one (counted only with `signal_every` set).
    pub(super) since_signal: u32,
}

pub use crate::types::RingError;

/// The send sequence's bits in a `wr_id` (below the generation).
pub(super) const SEQ_MASK: u64 = (1 << super::SEND_GEN_SHIFT) - 1;

// SAFETY: `qp` is the QP owned by the VerbsQp this queue belongs to; verbs objects may be used
// from any thread and `&mut self` keeps one producer.
unsafe impl Send for VerbsSq {}

impl VerbsSq {
    /// Requests outstanding (posted or staged, not yet retired by a completion).
    pub fn outstanding(&self) -> u32 {
        (self.next_seq - self.ring.retired.load(Ordering::Acquire)) as u32
    }

    /// Checks that do not depend on queue space. Order: op vs QP type, destination,
    /// payload rules, state (RTS; ERR or SQE for the flush `marker` alone).
    #[inline(always)]
    pub(super) fn validate(
        &self,
        wr: &SendWr<'_, control::Ah>,
        marker: bool,
    ) -> Result<(), PostError> {
        let op = &wr.op;
        match self.qp_type {
            QpType::Ud if !matches!(op, SendOp::Send | SendOp::SendImm { .. }) => {
                return Err(PostError::OpNotSupported {
                    op: op.name(),
                    qp_type: self.qp_type,
                })
            }
            QpType::Uc if op.is_read_like() => {
                return Err(PostError::OpNotSupported {
                    op: op.name(),
                    qp_type: self.qp_type,
                })
            }
            _ => {}
        }
        if (self.qp_type == QpType::Ud) != wr.ud.is_some() {
            return Err(PostError::UdDest);
        }
        let len = wr.payload.len();
        match wr.payload {
            Payload::Inline(b) => {
                if op.is_read_like() {
                    return Err(PostError::InlineNotAllowed);
                }
                if b.len() > self.max_inline as usize {
                    return Err(PostError::InlineTooLarge {
                        len: b.len().min(u32::MAX as usize) as u32,
                        max: self.max_inline,
                    });
                }
            }
            Payload::Sges(s) => {
                if s.len() > self.max_sge as usize {
                    return Err(PostError::TooManySges {
                        n: s.len().min(u32::MAX as usize) as u32,
                        max: self.max_sge,
                    });
                }
            }
        }
        match *op {
            SendOp::CompareSwap { raddr, .. } | SendOp::FetchAdd { raddr, .. } => {
                let one_sge = matches!(wr.payload, Payload::Sges(s) if s.len() == 1);
                if len != 8 || !one_sge {
                    return Err(PostError::AtomicLocalLen {
                        len: len.min(u32::MAX as usize) as u32,
                    });
                }
                if raddr % 8 != 0 {
                    return Err(PostError::AtomicMisaligned { raddr });
                }
            }
            SendOp::Read { .. } if len == 0 => return Err(PostError::ZeroLengthRead),
            _ => {}
        }
        if self.qp_type == QpType::Ud && len > self.mtu as usize {
            return Err(PostError::UdTooLarge {
                len: len.min(u32::MAX as usize) as u32,
                mtu: self.mtu,
            });
        }
        let state = self.state.get();
        let allowed = if marker {
            matches!(state, QpState::Err | QpState::Sqe) && self.state.cq_error().is_none()
        } else {
            state == QpState::Rts
        };
        if !allowed {
            return Err(self.state.refusal());
        }
        Ok(())
    }

    /// [`SendQueue::post`], and the flush marker when `marker` (the state check differs).
    #[inline(always)]
    fn stage<'a>(
        &mut self,
        wr: SendWr<'a, control::Ah>,
        marker: bool,
    ) -> Result<(), Rejected<SendWr<'a, control::Ah>>> {
        if self.ring.refusal.pending() {
            if let Some(e) = self.take_ring_error() {
                // A bare `ring` was refused and nothing reported it: this call does, with
                // the request handed back unposted.
                return Err(Rejected {
                    wr,
                    error: e.into(),
                });
            }
        }
        if let Err(error) = self.validate(&wr, marker) {
            return Err(Rejected { wr, error });
        }
        let oldest = self.ring.retired.load(Ordering::Acquire);
        if self.next_seq - oldest >= self.ring.cap {
            return Err(Rejected {
                wr,
                error: PostError::QueueFull {
                    capacity: self.ring.cap as u32,
                },
            });
        }
        if !self.budget.reserve(1) {
            return Err(Rejected {
                wr,
                error: PostError::CqFull {
                    cqe: self.budget.cqe,
                },
            });
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.ring.slot(seq).store(wr.wr_id, Ordering::Release);

        let i = self.staged as usize;
        let max_sge = self.max_sge as usize;
        let sge_base = i * max_sge;
        let mut flags = 0;
        if wr.flags.contains(SendFlags::SIGNALED) || self.sig_all {
            flags |= ffi::IBV_SEND_SIGNALED;
        }
        if self.signal_every != 0 {
            self.since_signal += 1;
            if self.since_signal >= self.signal_every {
                flags |= ffi::IBV_SEND_SIGNALED;
            }
            if flags & ffi::IBV_SEND_SIGNALED != 0 {
                self.since_signal = 0;
            }
        }
        if wr.flags.contains(SendFlags::FENCE) {
            flags |= ffi::IBV_SEND_FENCE;
        }
        if wr.flags.contains(SendFlags::SOLICITED) {
            flags |= ffi::IBV_SEND_SOLICITED;
        }
        let num_sge = match wr.payload {
            Payload::Sges(s) => {
                for (d, s) in self.sges[sge_base..sge_base + s.len()].iter_mut().zip(s) {
                    *d = ibv_sge {
                        addr: s.addr,
                        length: s.length,
                        lkey: s.lkey,
                    };
                }
                s.len()
            }
            Payload::Inline(b) => {
                flags |= ffi::IBV_SEND_INLINE;
                let max_inline = self.max_inline as usize;
                let dst = &mut self.inline[i * max_inline..i * max_inline + b.len()];
                dst.copy_from_slice(b);
                if b.is_empty() {
                    0
                } else {
                    self.sges[sge_base] = ibv_sge {
                        addr: dst.as_ptr() as u64,
                        length: b.len() as u32,
                        lkey: 0,
                    };
                    1
                }
            }
        };
        let sg_list = if num_sge == 0 {
            std::ptr::null_mut()
        } else {
            // SAFETY: `sge_base < sges.len()` (i < cap, cap * max_sge entries).
            unsafe { self.sges.as_mut_ptr().add(sge_base) }
        };
        let e = &mut self.wrs[i];
        e.wr_id = self.gen_bits | (seq & SEQ_MASK);
        e.next = std::ptr::null_mut();
        e.sg_list = sg_list;
        e.num_sge = num_sge as libc::c_int;
        e.send_flags = flags;
        e.imm_data = 0;
        match wr.op {
            SendOp::Send => e.opcode = ffi::IBV_WR_SEND,
            SendOp::SendImm { imm } => {
                e.opcode = ffi::IBV_WR_SEND_WITH_IMM;
                e.imm_data = imm.to_be();
            }
            SendOp::Write { raddr, rkey } => {
                e.opcode = ffi::IBV_WR_RDMA_WRITE;
                e.wr.rdma = ffi::ibv_send_wr_rdma {
                    remote_addr: raddr,
                    rkey,
                };
            }
            SendOp::WriteImm { raddr, rkey, imm } => {
                e.opcode = ffi::IBV_WR_RDMA_WRITE_WITH_IMM;
                e.imm_data = imm.to_be();
                e.wr.rdma = ffi::ibv_send_wr_rdma {
                    remote_addr: raddr,
                    rkey,
                };
            }
            SendOp::Read { raddr, rkey } => {
                e.opcode = ffi::IBV_WR_RDMA_READ;
                e.wr.rdma = ffi::ibv_send_wr_rdma {
                    remote_addr: raddr,
                    rkey,
                };
            }
            SendOp::CompareSwap {
                raddr,
                rkey,
                compare,
                swap,
            } => {
                e.opcode = ffi::IBV_WR_ATOMIC_CMP_AND_SWP;
                e.wr.atomic = ffi::ibv_send_wr_atomic {
                    remote_addr: raddr,
                    compare_add: compare,
                    swap,
                    rkey,
                };
            }
            SendOp::FetchAdd { raddr, rkey, add } => {
                e.opcode = ffi::IBV_WR_ATOMIC_FETCH_AND_ADD;
                e.wr.atomic = ffi::ibv_send_wr_atomic {
                    remote_addr: raddr,
                    compare_add: add,
                    swap: 0,
                    rkey,
                };
            }
        }
        if let Some(d) = wr.ud {
            e.wr.ud = ffi::ibv_send_wr_ud {
                ah: d.ah.as_ptr(),
                remote_qpn: d.remote_qpn,
                remote_qkey: d.remote_qkey,
            };
        }
        if i > 0 {
            let cur: *mut ibv_send_wr = &mut self.wrs[i];
            self.wrs[i - 1].next = cur;
        }
        self.staged += 1;
        Ok(())
    }
}

impl SendQueue for VerbsSq {
    type Ah = control::Ah;
    fn set_signal_every(&mut self, n: u32) {
        self.signal_every = n;
        self.since_signal = 0;
    }
    #[inline]
    fn post<'a>(
        &mut self,
        wr: SendWr<'a, control::Ah>,
    ) -> Result<(), Rejected<SendWr<'a, control::Ah>>> {
        self.stage(wr, false)
    }

    /// Staged after the requests before it and rung with them: `ibv_post_send` decides (rxe
    /// accepts a request in ERR and flushes it; a device that refuses says so here).
    #[cold]
    fn post_flush_marker(&mut self, wr_id: u64) -> Result<(), PostError> {
        let wr = SendWr::write(wr_id, &[], 0, 0).signaled();
        self.stage(wr, true).map_err(|r| r.error)?;
        self.try_ring().map_err(PostError::from)
    }

    /// One `ibv_post_send` with every staged request linked.
    #[inline]
    fn ring(&mut self) {
        if self.staged == 0 {
            return;
        }
        let mut bad: *mut ibv_send_wr = std::ptr::null_mut();
        // SAFETY: `qp` is the live QP owned by the VerbsQp this SQ belongs to; entries
        // 0..staged are a NULL-terminated list whose SGEs point into `self.sges` (and inline
        // data into `self.inline`) or into memory the caller registered; none of it moves
        // or is freed during the call.
        let rc = unsafe { ffi::ops::post_send(self.qp, self.wrs.as_mut_ptr(), &mut bad) };
        if rc != 0 {
            // Take back the refused request and everything after it: they are the newest
            // sequences, so the ring simply forgets them.
            let base = self.wrs.as_ptr();
            let first = if bad.is_null() {
                0
            } else {
                // SAFETY: libibverbs sets `bad` to an entry of the list we passed, inside
                // `self.wrs`.
                (unsafe { bad.offset_from(base) }).clamp(0, self.staged as isize) as u32
            };
            let count = self.staged - first;
            let first_seq = self.next_seq - u64::from(count);
            let e = RingError {
                verb: crate::types::RingVerb::PostSend,
                errno: rc,
                first_wr_id: self.ring.slot(first_seq).load(Ordering::Relaxed),
                count,
            };
            self.ring.refusal.keep(e, Some(&self.budget));
            self.next_seq = first_seq;
            self.budget.release(count);
        }
        self.staged = 0;
    }

    fn take_ring_error(&mut self) -> Option<RingError> {
        if !self.ring.refusal.pending() {
            return None;
        }
        self.ring.refusal.take(Some(&self.budget))
    }

    fn free_slots(&self) -> u32 {
        (self.ring.cap - (self.next_seq - self.ring.retired.load(Ordering::Acquire))) as u32
    }

    fn staged(&self) -> u32 {
        self.staged
    }
}
