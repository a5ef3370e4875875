//! The verbs fallback provider (rxe and any verbs device) over libibverbs' post/poll.
//!
//! [`VerbsDevice`] implements [`Provider`] on top of the control path in [`crate::verbs`];
//! the data path goes through the context's ops table ([`crate::ffi::ops`]): `post_send`,
//! `post_recv`, `post_srq_recv`, `poll_cq`. On rxe a post is a `write()` system call and the
//! kernel does the work, so this path is for tests and portability, not for speed.
//!
//! ## Hot path: no allocation per operation
//!
//! Every queue preallocates at creation what a post needs: an `ibv_send_wr` / `ibv_recv_wr`
//! array with one entry per queue slot, an `ibv_sge` array of `max_sge` entries per slot,
//! and for sends an inline staging area of `max_inline` bytes per slot (the caller's inline
//! borrow ends when `post` returns, so the bytes are copied there at post time; libibverbs
//! copies them again at `ibv_post_send`). [`SendQueue::post`] fills the next entries and
//! links them; [`SendQueue::ring`] hands the linked list to one `ibv_post_send` call (one
//! `write()` on rxe). [`CompletionQueue::poll`] calls `ibv_poll_cq` into an on-stack
//! `ibv_wc` array and converts. `tests/rxe_alloc.rs` proves it with a counting allocator.
//!
//! ## Our own accounting (rxe's is not enough; DESIGN.md §5b)
//!
//! - **State**: rxe returns EINVAL for a post to a QP in RESET, INIT or RTR *but keeps the
//!   request and runs it once the QP reaches RTS*. So sends are refused here unless the QP
//!   is in RTS, receives unless it is in INIT, RTR or RTS, before libibverbs sees them
//!   ([`PostError::BadState`]). The state is the one this provider last set, or ERR once a
//!   completion with an error status arrived for the QP (an error completion means the QP
//!   went to ERR). Between the device moving a QP to ERR and that completion being polled,
//!   sends are still accepted and rxe flushes them. **Known gap:** a *receive* posted in that
//!   window is never flushed by rxe 6.1 (it does not flush receives posted in ERR), so it
//!   never completes; poll the CQ (which records the ERR) before posting receives to a QP
//!   that may have failed.
//! - **Depth**: rxe grants a larger SQ than asked (64 → 127). The limits enforced are the
//!   *requested* `max_send_wr`, `max_recv_wr`, SGE counts and inline size (never more than
//!   granted), so code behaves the same on every provider; [`QueuePair::caps`] reports them.
//! - **CQ overrun** loses completions silently on rxe. Every CQ counts the entries that may
//!   still arrive on it: each outstanding send request (signaled or not: a failed or flushed
//!   request completes even when unsignaled) and each outstanding receive of a QP's own
//!   receive queue. A post that could overrun is refused ([`PostError::CqFull`]). Receives
//!   of an SRQ are not counted (the CQ they complete on is only known at arrival): size the
//!   receive CQ of every QP on an SRQ for the SRQ's depth.
//! - **Selective signaling**: libibverbs sees our own free-running sequence number as each
//!   send's `wr_id`; the user's wr_ids live in a ring per SQ. A send completion for sequence
//!   `s` retires every request of that SQ up to `s`: [`Completion::covered`] says how many
//!   unsignaled ones it covers, [`Completion::covered_from`] the oldest one's wr_id. A flush
//!   (rxe flushes every outstanding request, signaled or not, each with its own completion)
//!   retires exactly its own request, so every request is retired exactly once. A CQ may
//!   serve several QPs: the ring is found by `qp_num`.
//! - **Receives** get a tagged `wr_id` too (bit 63 set, the slot below it), since a flushed
//!   receive carries no reliable opcode; the user's wr_id comes back from the slot.
//! - **UD**: a send larger than the path MTU is refused ([`PostError::UdTooLarge`]): rxe
//!   reports success and sends nothing. Receives carry a 40-byte GRH first.
//! - **Async events**: a CQ overrun only shows up as `IBV_EVENT_CQ_ERR` on the async event
//!   fd. Reading it is a system call, so `poll` does not: call [`VerbsDevice::check_async`]
//!   on the control path (or whenever a quiet CQ looks suspicious).
//!
//! ## Immediate data
//!
//! [`SendOp::SendImm`]/[`SendOp::WriteImm`] take a host-order value; it is stored
//! big-endian into `ibv_send_wr.imm_data` (which verbs.h defines as network order), and
//! `ibv_wc.imm_data` is converted back, so [`Completion::imm`] equals what was sent.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ffi::{self, ibv_recv_wr, ibv_send_wr, ibv_sge, ibv_wc};
use crate::providers::{
    Access, AddressHandle, Completion, CompletionQueue, ConnectOpts, Payload, PostError, Provider,
    ProviderKind, QpCaps, QpConfig, QpEndpoint, QpState, QpType, QueuePair, RecvQueue, RecvWr,
    Rejected, SendFlags, SendOp, SendQueue, SendWr, WcFlags, WcOpcode, WcStatus,
};
use crate::verbs::{self, AsyncEvent, Context};

/// Bit 63 of a libibverbs `wr_id`: set on receives (the slot index is below it), clear on
/// sends (our free-running send sequence).
const RECV_TAG: u64 = 1 << 63;
/// How many `ibv_wc` one `ibv_poll_cq` call may return (an on-stack array).
const POLL_BATCH: usize = 32;

// ---------------------------------------------------------------------------------------------
// Shared bookkeeping between a queue (the producer) and the CQs it completes on (consumers).
// ---------------------------------------------------------------------------------------------

/// The user's wr_ids of one SQ, indexed by our send sequence modulo `cap`.
///
/// Indices: `retired` (written by the CQ poller only) is the sequence of the oldest request
/// not yet retired; the SQ's own `next_seq` (private to the SQ) is the next one to hand out.
/// `next_seq - retired <= cap` always holds, so a slot is never reused while its request is
/// outstanding. Both run free (u64, never wrap in practice) and are masked only at the slot.
struct SqRing {
    cap: u64,
    /// The user's wr_id per slot. Written by the SQ before the request is given to
    /// libibverbs, read by the poller after its completion (Release/Acquire).
    wr_ids: Box<[AtomicU64]>,
    /// Sequence of the oldest outstanding request.
    retired: AtomicU64,
}

impl SqRing {
    fn new(cap: u32) -> SqRing {
        SqRing {
            cap: u64::from(cap),
            wr_ids: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            retired: AtomicU64::new(0),
        }
    }
    #[inline]
    fn slot(&self, seq: u64) -> &AtomicU64 {
        &self.wr_ids[(seq % self.cap) as usize]
    }
}

/// The user's wr_ids of one receive queue or SRQ, one slot per outstanding receive.
///
/// A slot is taken by the producer (the queue) and freed by whichever CQ poller sees its
/// completion (SRQ receives may be polled out of order from different CQs), hence a busy
/// flag per slot rather than a FIFO.
struct RecvRing {
    wr_ids: Box<[AtomicU64]>,
    busy: Box<[AtomicBool]>,
    /// Receives outstanding (posted, not yet polled).
    outstanding: AtomicU32,
}

impl RecvRing {
    fn new(cap: u32) -> RecvRing {
        RecvRing {
            wr_ids: (0..cap).map(|_| AtomicU64::new(0)).collect(),
            busy: (0..cap).map(|_| AtomicBool::new(false)).collect(),
            outstanding: AtomicU32::new(0),
        }
    }
    fn cap(&self) -> u32 {
        self.wr_ids.len() as u32
    }
    /// Retire slot `i` and return the user's wr_id; `None` if it was not busy.
    #[inline]
    fn take(&self, i: usize) -> Option<u64> {
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
struct CqBudget {
    cqe: u32,
    used: AtomicU32,
}

impl CqBudget {
    /// Reserve `n` entries, or fail without changing anything.
    #[inline]
    fn reserve(&self, n: u32) -> bool {
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
    fn release(&self, n: u32) {
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
struct Route {
    qpn: u32,
    sq: Option<Arc<SqRing>>,
    rq: Option<Arc<RecvRing>>,
    /// The receives of `rq` were charged to this CQ's budget (own RQ, not an SRQ).
    rq_charged: bool,
    /// The QP's state, set to ERR when an error completion arrives.
    state: Option<Arc<SharedState>>,
}

/// A QP state shared by its queues (readers on every post) and the CQs it completes on
/// (which record ERR when an error completion arrives). Written by the control path too.
struct SharedState(AtomicU32);

impl SharedState {
    fn new() -> SharedState {
        SharedState(AtomicU32::new(QpState::Reset.to_ibv()))
    }
    #[inline]
    fn get(&self) -> QpState {
        QpState::from_ibv(self.0.load(Ordering::Acquire))
    }
    fn set(&self, s: QpState) {
        self.0.store(s.to_ibv(), Ordering::Release);
    }
}

// ---------------------------------------------------------------------------------------------
// CQ
// ---------------------------------------------------------------------------------------------

/// A completion queue of the verbs provider.
pub struct VerbsCq {
    cq: verbs::Cq,
    raw: *mut ffi::ibv_cq,
    budget: Arc<CqBudget>,
    /// One entry per QP completing here (a handful; searched linearly, newest QP first on a
    /// reused QPN).
    routes: Vec<Route>,
}

// SAFETY: `raw` is the `ibv_cq *` owned by `cq` (kept alive with it); verbs CQs may be
// polled from any thread, and `&mut self` on `poll` keeps one poller at a time.
unsafe impl Send for VerbsCq {}

impl VerbsCq {
    /// The control-path CQ.
    pub fn inner(&self) -> &verbs::Cq {
        &self.cq
    }

    /// Entries currently spoken for (outstanding sends and own-RQ receives).
    pub fn reserved(&self) -> u32 {
        self.budget.used.load(Ordering::Acquire)
    }

    fn route_mut(&mut self, qpn: u32) -> &mut Route {
        if let Some(i) = self.routes.iter().position(|r| r.qpn == qpn) {
            // A reused QPN: forget the old QP's rings.
            self.routes[i] = Route {
                qpn,
                sq: None,
                rq: None,
                rq_charged: false,
                state: None,
            };
            return &mut self.routes[i];
        }
        self.routes.push(Route {
            qpn,
            sq: None,
            rq: None,
            rq_charged: false,
            state: None,
        });
        let last = self.routes.len() - 1;
        &mut self.routes[last]
    }
}

/// Convert one `ibv_wc` and retire what it completes in the rings of `routes`, releasing
/// the CQ entries it accounted for in `budget`.
#[inline]
fn convert(routes: &[Route], budget: &CqBudget, wc: &ibv_wc, out: &mut Completion) {
    let mut flags = 0u8;
    if wc.wc_flags & ffi::IBV_WC_GRH != 0 {
        flags |= WcFlags::GRH.0;
    }
    if wc.wc_flags & ffi::IBV_WC_WITH_IMM != 0 {
        flags |= WcFlags::WITH_IMM.0;
    }
    *out = Completion {
        wr_id: wc.wr_id,
        status: WcStatus::from_ibv(wc.status),
        opcode: WcOpcode::from_ibv(wc.opcode),
        byte_len: wc.byte_len,
        imm: if flags & WcFlags::WITH_IMM.0 != 0 {
            u32::from_be(wc.imm_data)
        } else {
            0
        },
        qp_num: wc.qp_num,
        src_qp: wc.src_qp,
        flags: WcFlags(flags),
        covered: 0,
        covered_from: 0,
        vendor_err: wc.vendor_err,
    };
    let Some(route) = routes.iter().find(|r| r.qpn == wc.qp_num) else {
        return; // not one of ours: passed through unchanged
    };
    if wc.status != ffi::IBV_WC_SUCCESS {
        if let Some(st) = &route.state {
            st.set(QpState::Err);
        }
    }
    if wc.wr_id & RECV_TAG != 0 {
        if let Some(rq) = &route.rq {
            let slot = (wc.wr_id & !RECV_TAG) as usize;
            if let Some(w) = rq.take(slot) {
                out.wr_id = w;
                if route.rq_charged {
                    budget.release(1);
                }
            }
        }
    } else if let Some(sq) = &route.sq {
        let seq = wc.wr_id;
        let oldest = sq.retired.load(Ordering::Acquire);
        if seq >= oldest && seq - oldest < sq.cap {
            out.wr_id = sq.slot(seq).load(Ordering::Acquire);
            let covered = seq - oldest;
            if covered > 0 {
                out.covered = covered as u32;
                out.covered_from = sq.slot(oldest).load(Ordering::Acquire);
            }
            sq.retired.store(seq + 1, Ordering::Release);
            budget.release(covered as u32 + 1);
        }
    }
}

impl CompletionQueue for VerbsCq {
    /// `ibv_poll_cq` (through the ops table) for up to 32 completions per call, converted
    /// in place. A poll error (negative return) is reported as no completions.
    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        let want = out.len().min(POLL_BATCH);
        if want == 0 {
            return 0;
        }
        // Not zeroed: the provider writes the first `n` entries, and only those are read.
        let mut wcs = [std::mem::MaybeUninit::<ibv_wc>::uninit(); POLL_BATCH];
        // SAFETY: `raw` is the live CQ owned by `self.cq`; `wcs` has room for `want` entries
        // (`MaybeUninit<ibv_wc>` has the layout of `ibv_wc`).
        let n =
            unsafe { ffi::ops::poll_cq(self.raw, want as libc::c_int, wcs.as_mut_ptr().cast()) };
        if n <= 0 {
            return 0;
        }
        let n = (n as usize).min(want);
        for (wc, o) in wcs[..n].iter().zip(out.iter_mut()) {
            // SAFETY: `ibv_poll_cq` returned `n`: it wrote entries 0..n.
            let wc = unsafe { wc.assume_init_ref() };
            convert(&self.routes, &self.budget, wc, o);
        }
        n
    }

    fn cqe(&self) -> u32 {
        self.budget.cqe
    }
}

// ---------------------------------------------------------------------------------------------
// SQ
// ---------------------------------------------------------------------------------------------

/// The send queue of a [`VerbsQp`].
pub struct VerbsSq {
    qp: *mut ffi::ibv_qp,
    qp_type: QpType,
    state: Arc<SharedState>,
    sig_all: bool,
    /// Path MTU in bytes (UD size check), set at connect.
    mtu: u32,
    max_sge: u32,
    max_inline: u32,
    ring: Arc<SqRing>,
    budget: Arc<CqBudget>,
    /// Next send sequence to hand out (free running).
    next_seq: u64,
    /// Preallocated staging: one WR per slot, `max_sge` SGEs per slot, `max_inline` bytes
    /// per slot. Entries `0..staged` form the linked list the next `ring` posts.
    wrs: Box<[ibv_send_wr]>,
    sges: Box<[ibv_sge]>,
    inline: Box<[u8]>,
    staged: u32,
    /// The last `ring` that libibverbs refused.
    ring_error: Option<RingError>,
}

/// A `ring` that libibverbs refused (after all our checks passed: should not happen).
/// The refused requests and every one staged after them were taken back: they never reach
/// the device and produce no completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingError {
    /// The errno `ibv_post_send` returned.
    pub errno: i32,
    /// wr_id of the first request taken back.
    pub first_wr_id: u64,
    /// How many were taken back.
    pub count: u32,
}

impl VerbsSq {
    /// The error of the last refused `ring`, if any (cleared by this call).
    pub fn take_ring_error(&mut self) -> Option<RingError> {
        self.ring_error.take()
    }

    /// Requests outstanding (posted or staged, not yet retired by a completion).
    pub fn outstanding(&self) -> u32 {
        (self.next_seq - self.ring.retired.load(Ordering::Acquire)) as u32
    }

    /// Checks that do not depend on queue space. Order: op vs QP type, destination,
    /// payload rules, state.
    #[inline]
    fn validate(&self, wr: &SendWr<'_>) -> Result<(), PostError> {
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
        if state != QpState::Rts {
            return Err(PostError::BadState { state });
        }
        Ok(())
    }
}

impl SendQueue for VerbsSq {
    #[inline]
    fn post<'a>(&mut self, wr: SendWr<'a>) -> Result<(), Rejected<SendWr<'a>>> {
        if let Err(error) = self.validate(&wr) {
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
        e.wr_id = seq;
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
                ah: d.ah.raw.cast(),
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
            self.ring_error = Some(RingError {
                errno: rc,
                first_wr_id: self.ring.slot(first_seq).load(Ordering::Relaxed),
                count,
            });
            self.next_seq = first_seq;
            self.budget.release(count);
        }
        self.staged = 0;
    }

    fn free_slots(&self) -> u32 {
        (self.ring.cap - (self.next_seq - self.ring.retired.load(Ordering::Acquire))) as u32
    }

    fn staged(&self) -> u32 {
        self.staged
    }
}

// ---------------------------------------------------------------------------------------------
// RQ and SRQ
// ---------------------------------------------------------------------------------------------

/// Where a receive queue posts.
#[derive(Clone, Copy)]
enum RecvTarget {
    Qp(*mut ffi::ibv_qp),
    Srq(*mut ffi::ibv_srq),
    /// A QP created with an SRQ: its own receive queue does not exist.
    None,
}

/// A receive queue (of a QP) or an SRQ.
pub struct VerbsRecv {
    target: RecvTarget,
    qp_type: QpType,
    /// The QP state (receive queues of a QP only).
    state: Arc<SharedState>,
    max_sge: u32,
    ring: Arc<RecvRing>,
    /// The receive CQ (own receive queue only).
    budget: Option<Arc<CqBudget>>,
    /// Where the next slot search starts.
    cursor: u32,
    wrs: Box<[ibv_recv_wr]>,
    sges: Box<[ibv_sge]>,
    staged: u32,
    ring_error: Option<RingError>,
}

/// The receive queue of a [`VerbsQp`].
pub type VerbsRq = VerbsRecv;

// SAFETY: the raw pointers are the QP/SRQ owned by the VerbsQp / kept alive by `_srq` below;
// verbs objects may be used from any thread and `&mut self` keeps one producer.
unsafe impl Send for VerbsRecv {}
// SAFETY: as above.
unsafe impl Send for VerbsSq {}

impl VerbsRecv {
    fn new(target: RecvTarget, qp_type: QpType, cap: u32, max_sge: u32) -> VerbsRecv {
        VerbsRecv {
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
            ring_error: None,
        }
    }

    /// The error of the last refused `ring`, if any (cleared by this call).
    pub fn take_ring_error(&mut self) -> Option<RingError> {
        self.ring_error.take()
    }

    /// Receives outstanding.
    pub fn outstanding(&self) -> u32 {
        self.ring.outstanding.load(Ordering::Acquire)
    }
}

impl RecvQueue for VerbsRecv {
    #[inline]
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> Result<(), Rejected<RecvWr<'a>>> {
        let reject = |error| Err(Rejected { wr, error });
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
                return reject(PostError::BadState {
                    state: self.state.get(),
                })
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
        e.wr_id = RECV_TAG | u64::from(slot);
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
                let slot = (self.wrs[k].wr_id & !RECV_TAG) as usize;
                if let Some(w) = self.ring.take(slot) {
                    if k == first {
                        first_wr_id = w;
                    }
                    if let Some(b) = &self.budget {
                        b.release(1);
                    }
                }
            }
            self.ring_error = Some(RingError {
                errno: rc,
                first_wr_id,
                count: self.staged - first as u32,
            });
        }
        self.staged = 0;
    }

    fn free_slots(&self) -> u32 {
        match self.target {
            RecvTarget::None => 0,
            _ => self.ring.cap() - self.ring.outstanding.load(Ordering::Acquire),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// QP
// ---------------------------------------------------------------------------------------------

/// A queue pair of the verbs provider.
pub struct VerbsQp {
    // The queues hold raw pointers into `qp`: declared first, dropped first.
    sq: VerbsSq,
    rq: VerbsRq,
    qp: verbs::Qp,
    caps: QpCaps,
}

impl VerbsQp {
    /// The control-path QP (for queries; do not change its state behind this provider's
    /// back: the state checks rely on [`Provider::connect`] / [`Provider::to_error`]).
    pub fn inner(&self) -> &verbs::Qp {
        &self.qp
    }

    fn set_state(&mut self, s: QpState) {
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

// ---------------------------------------------------------------------------------------------
// The device
// ---------------------------------------------------------------------------------------------

/// A verbs device opened for the data plane.
pub struct VerbsDevice {
    ctx: Context,
    /// `IBV_EVENT_CQ_ERR` events seen by [`VerbsDevice::check_async`].
    cq_errors: u32,
}

/// The SRQ type of [`VerbsDevice`]: the receive queue plus the control-path SRQ.
pub struct VerbsSrq {
    q: VerbsRecv,
    srq: verbs::Srq,
}

impl VerbsSrq {
    /// The control-path SRQ (e.g. to arm its limit event).
    pub fn inner(&self) -> &verbs::Srq {
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
}

impl VerbsDevice {
    /// Open the verbs device `name` (`rxe0`, `mlx5_0`, ...).
    pub fn open(name: &str) -> Result<VerbsDevice> {
        let ctx = Context::open(name)?;
        Ok(VerbsDevice { ctx, cq_errors: 0 })
    }

    /// The control-path context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Read pending asynchronous events without blocking (a system call each: control path
    /// only). Returns them; `IBV_EVENT_CQ_ERR` (a CQ overrun: completions were lost) is also
    /// counted in [`VerbsDevice::cq_errors`].
    pub fn check_async(&mut self) -> Result<Vec<AsyncEvent>> {
        let mut v = Vec::new();
        while let Some(ev) = self.ctx.poll_async_event()? {
            if ev.kind == verbs::AsyncEventKind::CqErr {
                self.cq_errors += 1;
            }
            v.push(ev);
        }
        Ok(v)
    }

    /// CQ overruns seen so far by [`VerbsDevice::check_async`].
    pub fn cq_errors(&self) -> u32 {
        self.cq_errors
    }
}

impl Provider for VerbsDevice {
    type Pd = verbs::Pd;
    type Mr = verbs::Mr;
    type Cq = VerbsCq;
    type Srq = VerbsSrq;
    type Qp = VerbsQp;

    fn kind(&self) -> ProviderKind {
        ProviderKind::Verbs
    }

    fn device_name(&self) -> &str {
        self.ctx.name()
    }

    fn alloc_pd(&mut self) -> Result<verbs::Pd> {
        verbs::Pd::new(&self.ctx)
    }

    unsafe fn reg_mr(
        &mut self,
        pd: &verbs::Pd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<verbs::Mr> {
        // SAFETY: forwarded: the caller keeps the memory mapped until the MR is dropped.
        unsafe { verbs::Mr::register(pd, addr, len, access) }
    }

    fn create_cq(&mut self, cqe: u32) -> Result<VerbsCq> {
        let cq = verbs::Cq::new(&self.ctx, cqe)?;
        let raw = cq.as_ptr();
        Ok(VerbsCq {
            cq,
            raw,
            // Our budget is what was asked: the device may grant more, never less.
            budget: Arc::new(CqBudget {
                cqe,
                used: AtomicU32::new(0),
            }),
            routes: Vec::new(),
        })
    }

    fn create_srq(&mut self, pd: &verbs::Pd, max_wr: u32, max_sge: u32) -> Result<VerbsSrq> {
        let srq = verbs::Srq::new(pd, max_wr, max_sge)?;
        let q = VerbsRecv::new(
            RecvTarget::Srq(srq.as_ptr()),
            QpType::Rc,
            max_wr.min(srq.max_wr()),
            max_sge.min(srq.max_sge()),
        );
        Ok(VerbsSrq { q, srq })
    }

    fn create_qp(
        &mut self,
        pd: &verbs::Pd,
        send_cq: &mut VerbsCq,
        recv_cq: Option<&mut VerbsCq>,
        srq: Option<&mut VerbsSrq>,
        cfg: &QpConfig,
    ) -> Result<VerbsQp> {
        if cfg.caps.max_send_wr == 0 {
            return Err(Error::InvalidArgument {
                context: "create_qp",
                detail: "max_send_wr must be at least 1".into(),
            });
        }
        let qp = {
            let rcq = recv_cq.as_ref().map_or(&send_cq.cq, |c| &c.cq);
            verbs::Qp::new(pd, &send_cq.cq, rcq, srq.as_ref().map(|s| &s.srq), cfg)?
        };
        let granted = qp.caps();
        let want = cfg.caps;
        let caps = QpCaps {
            max_send_wr: want.max_send_wr.min(granted.max_send_wr),
            max_recv_wr: if srq.is_some() {
                0
            } else {
                want.max_recv_wr.min(granted.max_recv_wr)
            },
            max_send_sge: want.max_send_sge.min(granted.max_send_sge),
            max_recv_sge: if srq.is_some() {
                0
            } else {
                want.max_recv_sge.min(granted.max_recv_sge)
            },
            max_inline_data: want.max_inline_data.min(granted.max_inline_data),
        };
        let raw = qp.as_ptr();
        let cap = caps.max_send_wr;
        let sge = caps.max_send_sge.max(1);
        let ring = Arc::new(SqRing::new(cap));
        let state = Arc::new(SharedState::new());
        let sq = VerbsSq {
            qp: raw,
            qp_type: cfg.qp_type,
            state: state.clone(),
            sig_all: cfg.sq_sig_all,
            mtu: 0,
            max_sge: caps.max_send_sge,
            max_inline: caps.max_inline_data,
            ring: ring.clone(),
            budget: send_cq.budget.clone(),
            next_seq: 0,
            wrs: (0..cap).map(|_| ibv_send_wr::zeroed()).collect(),
            sges: vec![ibv_sge::default(); (cap * sge) as usize].into_boxed_slice(),
            inline: vec![0u8; (cap * caps.max_inline_data) as usize].into_boxed_slice(),
            staged: 0,
            ring_error: None,
        };
        let (mut rq, rq_ring, charged) = match srq {
            Some(s) => (
                VerbsRecv::new(RecvTarget::None, cfg.qp_type, 0, 0),
                s.q.ring.clone(),
                false,
            ),
            None => {
                let r = VerbsRecv::new(
                    RecvTarget::Qp(raw),
                    cfg.qp_type,
                    caps.max_recv_wr,
                    caps.max_recv_sge,
                );
                let ring = r.ring.clone();
                (r, ring, true)
            }
        };
        rq.state = state.clone();
        let qpn = qp.qpn();
        match recv_cq {
            Some(rcq) => {
                if charged {
                    rq.budget = Some(rcq.budget.clone());
                }
                let r = rcq.route_mut(qpn);
                r.rq = Some(rq_ring);
                r.rq_charged = charged;
                r.state = Some(state.clone());
                let r = send_cq.route_mut(qpn);
                r.sq = Some(ring);
                r.state = Some(state);
            }
            None => {
                if charged {
                    rq.budget = Some(send_cq.budget.clone());
                }
                let r = send_cq.route_mut(qpn);
                r.sq = Some(ring);
                r.rq = Some(rq_ring);
                r.rq_charged = charged;
                r.state = Some(state);
            }
        }
        Ok(VerbsQp { sq, rq, qp, caps })
    }

    fn endpoint(&self, qp: &VerbsQp, opts: &ConnectOpts) -> Result<QpEndpoint> {
        let port = self.ctx.query_port(opts.port)?;
        let gid = self.ctx.query_gid(opts.port, u32::from(opts.gid_index))?;
        let mtu = port.active_mtu().ok_or_else(|| Error::NotFound {
            what: format!("active MTU of {} port {}", self.ctx.name(), opts.port),
            hint: "is the port active?".into(),
        })?;
        let psn = crate::endpoint::random_psn();
        Ok(QpEndpoint {
            lid: port.lid,
            gid: gid.0,
            gid_index: opts.gid_index,
            qpn: qp.qpn(),
            psn,
            mtu,
            mr: None,
        })
    }

    fn connect(
        &mut self,
        qp: &mut VerbsQp,
        local: &QpEndpoint,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> Result<()> {
        let r = qp.qp.connect(local, remote, opts);
        // Whatever happened, the state is the one libibverbs knows now.
        let s = qp.qp.query_state().unwrap_or(QpState::Err);
        qp.set_state(s);
        let path_mtu = opts.path_mtu.unwrap_or(local.mtu.min(remote.mtu));
        qp.sq.mtu = path_mtu.bytes();
        r
    }

    /// Move `qp` to ERR. Requests still staged (posted, not rung) are flushed like
    /// everything else outstanding, so every request posted comes back: staged receives are
    /// rung just before the transition (rxe 6.1 does not flush receives posted in ERR),
    /// staged sends just after it (rxe flushes those without running them).
    fn to_error(&mut self, qp: &mut VerbsQp) -> Result<()> {
        qp.rq.ring();
        qp.qp.to_err()?;
        qp.set_state(QpState::Err);
        qp.sq.ring();
        Ok(())
    }

    fn create_ah(
        &mut self,
        pd: &verbs::Pd,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> Result<AddressHandle> {
        let ah = verbs::Ah::new(pd, remote, opts.port, opts.gid_index, opts.sl)?;
        Ok(AddressHandle {
            av: [0; 48],
            raw: ah.as_ptr().cast(),
            _owner: Some(Box::new(ah)),
        })
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

    fn budget(cqe: u32) -> CqBudget {
        CqBudget {
            cqe,
            used: AtomicU32::new(0),
        }
    }

    /// The coverage arithmetic of `convert`, without a device.
    #[test]
    fn send_completion_covers_the_unsignaled_before_it() {
        let budget = budget(8);
        let ring = Arc::new(SqRing::new(4));
        let routes = [Route {
            qpn: 0x11,
            sq: Some(ring.clone()),
            rq: None,
            rq_charged: false,
            state: None,
        }];
        for (seq, w) in [(0u64, 100u64), (1, 101), (2, 102)] {
            ring.slot(seq).store(w, Ordering::Relaxed);
        }
        assert!(budget.reserve(3));
        let wc = ibv_wc {
            wr_id: 2,
            qp_num: 0x11,
            ..Default::default()
        };
        let mut c = Completion::EMPTY;
        convert(&routes, &budget, &wc, &mut c);
        assert_eq!(c.wr_id, 102);
        assert_eq!(c.covered, 2);
        assert_eq!(c.covered_from, 100);
        assert_eq!(ring.retired.load(Ordering::Relaxed), 3);
        assert_eq!(budget.used.load(Ordering::Relaxed), 0);
        // A stale sequence is passed through untouched, and retires nothing.
        let wc = ibv_wc {
            wr_id: 1,
            qp_num: 0x11,
            ..Default::default()
        };
        convert(&routes, &budget, &wc, &mut c);
        assert_eq!((c.wr_id, c.covered), (1, 0));
        assert_eq!(ring.retired.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn recv_completion_maps_the_slot_back() {
        let budget = budget(4);
        let rq = Arc::new(RecvRing::new(4));
        rq.wr_ids[2].store(0xfeed, Ordering::Relaxed);
        rq.busy[2].store(true, Ordering::Relaxed);
        rq.outstanding.store(1, Ordering::Relaxed);
        assert!(budget.reserve(1));
        let routes = [Route {
            qpn: 7,
            sq: None,
            rq: Some(rq.clone()),
            rq_charged: true,
            state: Some(Arc::new(SharedState::new())),
        }];
        // A flushed receive: status 5, opcode 0 (rxe leaves it), tagged wr_id.
        let wc = ibv_wc {
            wr_id: RECV_TAG | 2,
            status: 5,
            qp_num: 7,
            ..Default::default()
        };
        let mut c = Completion::EMPTY;
        convert(&routes, &budget, &wc, &mut c);
        assert_eq!(c.wr_id, 0xfeed);
        assert_eq!(c.status, WcStatus::WrFlushErr);
        assert_eq!(rq.outstanding.load(Ordering::Relaxed), 0);
        assert_eq!(budget.used.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn imm_travels_big_endian() {
        let wc = ibv_wc {
            wr_id: 5,
            qp_num: 1,
            wc_flags: ffi::IBV_WC_WITH_IMM | ffi::IBV_WC_GRH,
            imm_data: 0xa1b2_c3d4u32.to_be(),
            opcode: ffi::IBV_WC_RECV,
            ..Default::default()
        };
        let mut c = Completion::EMPTY;
        convert(&[], &budget(1), &wc, &mut c);
        assert_eq!(c.imm, 0xa1b2_c3d4);
        assert!(c.flags.contains(WcFlags::GRH) && c.flags.contains(WcFlags::WITH_IMM));
        assert_eq!(c.opcode, WcOpcode::Recv);
        assert_eq!(c.wr_id, 5);
    }
}
