//! The verbs fallback provider (rxe and any verbs device) over libibverbs' post/poll.
//!
//! Files: `device.rs` (the [`Provider`] impl: PD, MR, CQ, SRQ and QP creation, connect,
//! async events), `cq.rs` (polling and completion conversion), `sq.rs` and `rq.rs` (posting),
//! `qp.rs` (the queue pair), `shared.rs` (the bookkeeping a queue shares with the CQs it
//! completes on).
//!
//! [`VerbsDevice`] implements [`Provider`] on top of the control path in [`rdma_direct_core::control`];
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
//! ## Our own accounting (rxe's is not enough)
//!
//! - **State**: rxe returns EINVAL for a post to a QP in RESET, INIT or RTR *but keeps the
//!   request and runs it once the QP reaches RTS*. So sends are refused here unless the QP
//!   is in RTS, receives unless it is in INIT, RTR or RTS, before libibverbs sees them
//!   ([`PostError::BadState`]). The state is the one this provider last set, or ERR once a
//!   completion with an error status arrived for the QP (an error completion means the QP
//!   went to ERR). Between the device moving a QP to ERR and that completion being polled,
//!   sends are still accepted and rxe flushes them. A *receive* posted in that window is not
//!   flushed by rxe 6.1 on its own (it does not flush receives posted in ERR); `to_error`
//!   (ERR to ERR) runs rxe's flush again and they come back flushed, so a recovery that
//!   moves the QP to ERR before draining it sees every receive end.
//! - **Depth**: rxe grants a larger SQ than asked (64 → 127). The limits enforced are the
//!   *requested* `max_send_wr`, `max_recv_wr`, SGE counts and inline size (never more than
//!   granted), so code behaves the same on every provider; [`QueuePair::caps`] reports them.
//! - **CQ overrun** loses completions silently on rxe. Every CQ counts the entries that may
//!   still arrive on it: each outstanding send request (signaled or not: a failed or flushed
//!   request completes even when unsignaled) and each outstanding receive of a QP's own
//!   receive queue. A post that could overrun is refused ([`PostError::CqFull`]); since
//!   `create_qp` refuses a QP unless each of its CQs (the depth asked for) can absorb the
//!   `max_send_wr` / `max_recv_wr` of every QP on it (`providers/cq_room.rs`), that refusal
//!   never comes for QPs made there. Receives of an SRQ are not reserved at post time (the
//!   CQ they complete on is only known at arrival); `create_qp` commits the SRQ's depth on
//!   the receive CQ of each QP attached to it, once per CQ, so that CQ absorbs them too.
//! - **Selective signaling**: libibverbs sees our own free-running sequence number as each
//!   send's `wr_id`; the user's wr_ids live in a ring per SQ. A send completion for sequence
//!   `s` retires every request of that SQ up to `s`: [`Completion::covered`] says how many
//!   unsignaled ones it covers, [`Completion::covered_from`] the oldest one's wr_id. A flush
//!   (rxe flushes every outstanding request, signaled or not, each with its own completion)
//!   retires exactly its own request, so every request is retired exactly once. A CQ may
//!   serve several QPs: the ring is found by `qp_num`.
//! - **Receives** get a tagged `wr_id` too (bit 63 set, the slot below it), since a flushed
//!   receive carries no reliable opcode; the user's wr_id comes back from the slot.
//! - **Generations**: every QP and SRQ gets a generation number (process-wide, 23 bits) that
//!   is carried in each of its `wr_id`s, and a CQ finds a completion's rings by QPN *and*
//!   generation: rxe hands a destroyed QP's number to the next QP at once, and completions
//!   of the destroyed one still in the CQ must not be taken for the new one's. (Receives
//!   through an SRQ carry the SRQ's generation; a QPN reused on the same SRQ and CQ goes to
//!   the newest QP.)
//! - **UD**: a send larger than the path MTU is refused ([`PostError::UdTooLarge`]): rxe
//!   reports success and sends nothing. Receives carry a 40-byte GRH first.
//! - **Async events**: a CQ overrun (or a device fault) only shows up as `IBV_EVENT_CQ_ERR`
//!   on the async event fd. Reading it is a system call, so `poll` does not: call
//!   [`VerbsDevice::check_async`] on the control path (or whenever a quiet CQ looks
//!   suspicious). It applies what it reads: a CQ in error fails every QP on it (posts refused
//!   with [`PostError::CqError`] naming the CQ's kernel handle, `state()` ERR, a reconnect
//!   refused) and the CQ's `poll` returns one completion flagged `WcFlags::CQ_ERROR` once it
//!   is empty; `QP_FATAL`, `QP_REQ_ERR` and `QP_ACCESS_ERR` put their QP in ERR (posts
//!   refused with `BadState` until a reconnect). The device finds the objects by the address
//!   the event names, held weakly (a registry filled at creation, control path only).
//! - **Refused doorbells**: `ibv_post_send` / `ibv_post_recv` may refuse (EINVAL, ENOMEM,
//!   EOPNOTSUPP); the requests from the refused one on are taken back. `try_ring`,
//!   `post_and_ring` and the lists return it at the call; after a bare `ring` it is kept
//!   (`shared::Refusal`) and reported once by the first of the queue's next post, list,
//!   `try_ring`, `take_ring_error`, or an empty poll of its CQ (a completion flagged
//!   `WcFlags::REFUSED`; not for SRQ receives, whose CQ is not one).
//! - **Reconnect**: `connect` on a QP past RESET resets it first. rxe does not take a QP's
//!   completions out of its CQ at a reset, so the reconnect is refused (EINVAL-like
//!   `InvalidArgument` naming the sends and receives outstanding) until every request has
//!   ended: `to_error`, poll the flushes, then connect. With nothing outstanding nothing of
//!   the old connection is left in the CQ (each completion retires at least one request).
//! - **Drop**: dropping a QP destroys it first (rxe writes nothing of it afterwards), then
//!   marks it: its completions still in a CQ are retired and not returned by `poll` (as on
//!   mlx5 and the sim), and the CQ entries its outstanding requests held stay reserved until
//!   that CQ's first poll that finds it empty and began after the destroy (then nothing of the
//!   QP can be left in it): a post meanwhile may be refused with `CqFull`, one poll frees the
//!   room.
//!
//! ## Immediate data
//!
//! [`SendOp::SendImm`]/[`SendOp::WriteImm`] take a host-order value; it is stored
//! big-endian into `ibv_send_wr.imm_data` (which verbs.h defines as network order), and
//! `ibv_wc.imm_data` is converted back, so [`Completion::imm`] equals what was sent.
//!
//! [`Provider`]: crate::Provider
//! [`SendQueue::post`]: crate::SendQueue::post
//! [`SendQueue::ring`]: crate::SendQueue::ring
//! [`CompletionQueue::poll`]: crate::CompletionQueue::poll
//! [`QueuePair::caps`]: crate::QueuePair::caps
//! [`PostError::BadState`]: crate::types::PostError::BadState
//! [`PostError::CqFull`]: crate::types::PostError::CqFull
//! [`PostError::CqError`]: crate::types::PostError::CqError
//! [`PostError::UdTooLarge`]: crate::types::PostError::UdTooLarge
//! [`Completion::covered`]: crate::types::Completion::covered
//! [`Completion::covered_from`]: crate::types::Completion::covered_from
//! [`Completion::imm`]: crate::types::Completion::imm
//! [`SendOp::SendImm`]: crate::types::SendOp::SendImm
//! [`SendOp::WriteImm`]: crate::types::SendOp::WriteImm

mod cq;
mod device;
mod qp;
mod rq;
mod shared;
mod sq;

pub use cq::VerbsCq;
pub use device::{no_completion_timestamps, VerbsDevice};
pub use qp::VerbsQp;
pub use rq::{VerbsRecv, VerbsRq, VerbsSrq};
pub use sq::{RingError, VerbsSq};

/// Bit 63 of a libibverbs `wr_id`: set on receives (the queue's generation at bit 32, the
/// slot index below it), clear on sends (the QP's generation at bit 40, the low 40 bits of
/// our free-running send sequence below it).
const RECV_TAG: u64 = 1 << 63;
/// Where a send's generation starts in its `wr_id`; below it, the sequence's low bits.
const SEND_GEN_SHIFT: u32 = 40;
/// Where a receive's generation starts in its `wr_id`; below it, the slot.
const RECV_GEN_SHIFT: u32 = 32;
/// The generation's bits (23: fits above a send's 40 sequence bits, below bit 63).
const GEN_MASK: u64 = (1 << 23) - 1;
/// How many `ibv_wc` one `ibv_poll_cq` call may return (an on-stack array).
const POLL_BATCH: usize = 32;
