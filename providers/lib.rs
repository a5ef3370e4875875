//! # rdma-direct-providers
//!
//! The data-plane API and its providers: the middle floor of rdma-direct. It builds on
//! `rdma-direct-core` (wire layouts, vocabulary, FFI, control path, endpoint exchange), whose
//! modules are imported at this crate's root so that `crate::wire`, `crate::types`, ... name
//! them here as in the rest of the workspace. `crate::verbs` is the verbs *provider*
//! (libibverbs post/poll); the control path it and the mlx5 provider build on is
//! `rdma_direct_core::control`. Embedders reach this crate as `rdma_direct::providers`.
//!
//! One hot loop, written once against these traits, runs on three providers:
//!
//! - [`mlx5`]: the Rust code writes mlx5 WQEs into the send queue, updates the doorbell record,
//!   rings the doorbell through the UAR (8-byte write or BlueFlame copy) and parses CQEs itself.
//! - [`verbs`]: any verbs device (soft-RoCE in particular) through libibverbs' own
//!   `ibv_post_send` / `ibv_post_recv` / `ibv_poll_cq`.
//! - [`sim`]: a software mlx5 device; the [`mlx5`] provider runs on it unchanged.
//!
//! Dispatch is static: code is generic over [`Provider`] and the queue traits. [`flow`] holds
//! the glue of a message loop built on those traits (send windows, receive replenishers, ring
//! slots and credits, waits over several CQs, `connect_pair`), and [`helpers`] the busy-poll
//! with a stall deadline, the drain before teardown and thread pinning. [`choice`] is the
//! rule that picks a provider for a device (mlx5 hardware, any other verbs device, or none:
//! the sim) and opens it. [`pair`] is a QP
//! owned together with the CQ it alone completes into ([`Provider::own_pair`]), the layout
//! whose poll the mlx5 provider shortens.
//!
//! ## Posting and doorbells
//!
//! [`SendQueue::post`] *stages* a work request: it is written (mlx5) or queued (verbs) but
//! the device does not see it until [`SendQueue::ring`] publishes everything staged with one
//! doorbell (mlx5: one doorbell record update and one UAR write; verbs: one `ibv_post_send`
//! call with a linked list, i.e. one `write()` on rxe). [`SendQueue::post_list`] is
//! post-each-then-ring.
//!
//! Every queue method takes `&mut self`: a queue has exactly one producer, and the borrow
//! checker enforces it. Two live posters on one queue do not compile:
//!
//! ```compile_fail
//! use rdma_direct_providers::{QueuePair, SendQueue, SendWr};
//! fn two_posters<Q: QueuePair>(qp: &mut Q) {
//!     let a = qp.sq();
//!     let b = qp.sq(); // second mutable borrow while `a` is alive
//!     let _ = a.post(SendWr::send(1, &[]));
//!     let _ = b.post(SendWr::send(2, &[]));
//! }
//! ```
//!
//! The same two posts one after the other compile (so the failure above is the borrow, not a
//! typo):
//!
//! ```
//! use rdma_direct_providers::{QueuePair, SendQueue, SendWr};
//! fn one_poster_at_a_time<Q: QueuePair>(qp: &mut Q) {
//!     let _ = qp.sq().post(SendWr::send(1, &[]));
//!     let _ = qp.sq().post(SendWr::send(2, &[]));
//! }
//! ```
//!
//! ## Accounting: nothing is lost
//!
//! A send queue holds at most [`QpCaps::max_send_wr`] outstanding work requests. A request
//! stays outstanding until a completion retires it: its own (signaled) completion, or a later
//! signaled completion on the same send queue that *covers* it ([`Completion::covered`]), or a
//! flush completion when the QP fails. One exception, as in verbs: an *unsignaled* request that
//! had already executed when the QP moved to ERR produces no completion and no flush. Posting to a full queue returns
//! [`PostError::QueueFull`] and hands the request back ([`Rejected`]); it never overwrites an
//! unfinished WQE. A request that is invalid (inline too large, too many SGEs, a misaligned
//! atomic, an op the QP type cannot do, a QP not in a state that may post) is rejected before
//! anything is written.
//!
//! The vocabulary the traits speak (work requests, completions, QP parameters, post errors)
//! is defined in [`crate::types`] and re-exported here.

#![deny(unsafe_op_in_unsafe_fn)]
// Without the `sim` feature the docs still name the sim (what that feature adds); those links
// cannot resolve in that build, and only there are they allowed.
#![cfg_attr(not(feature = "sim"), allow(rustdoc::broken_intra_doc_links))]
#![warn(clippy::undocumented_unsafe_blocks)]

use std::fmt;

use rdma_direct_core::{barrier, clock, endpoint, error, ffi, mmio, types, wire};
use rdma_direct_core::{Error, Result};

pub mod buffer;
pub mod choice;
pub mod connect;
pub(crate) mod cq_room;
pub mod flow;
pub mod helpers;
pub mod mlx5;
pub mod pair;
pub mod recover;
pub mod verbs;

#[cfg(feature = "sim")]
pub mod sim;

pub use self::buffer::{Pages, RegisteredBuf};
pub use self::pair::{OwnedPair, SideBySide};
pub use crate::endpoint::{QpEndpoint, RemoteMr};
pub use crate::types::{
    Access, Completion, ConnectOpts, Mtu, Payload, PostError, PostListError, QpCaps, QpConfig,
    QpState, QpType, RecvWr, Rejected, RemoteTarget, RingError, RingVerb, SendBatch, SendFlags,
    SendOp, SendWr, Sge, UdDest, WcFlags, WcOpcode, WcStatus,
};
pub use rdma_direct_core::control::{AsyncElement, AsyncEvent, AsyncEventKind};

/// A registered memory region.
pub trait MemoryRegion {
    /// Start address.
    fn addr(&self) -> u64;
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True for an empty region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Local key.
    fn lkey(&self) -> u32;
    /// Remote key.
    fn rkey(&self) -> u32;
    /// An SGE over `len` bytes at `offset` into the region, **unchecked**: a range outside
    /// the region fails only at the device (`LOC_PROT_ERR`). [`RegisteredBuf::sge`] checks.
    fn sge(&self, offset: usize, len: u32) -> Sge {
        Sge {
            addr: self.addr() + offset as u64,
            length: len,
            lkey: self.lkey(),
        }
    }
}

/// The control-path MR is the memory region of the providers that register through
/// libibverbs (mlx5 and verbs).
impl MemoryRegion for rdma_direct_core::control::Mr {
    fn addr(&self) -> u64 {
        self.as_mut_ptr() as u64
    }
    fn len(&self) -> usize {
        // SAFETY: `as_ptr` is the live MR; its fields are written once at registration.
        unsafe { (*self.as_ptr()).length }
    }
    fn lkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.as_ptr()).lkey }
    }
    fn rkey(&self) -> u32 {
        // SAFETY: as above.
        unsafe { (*self.as_ptr()).rkey }
    }
}

/// A send queue: one producer (`&mut self`).
pub trait SendQueue {
    /// The address handle a UD request names ([`UdDest::ah`]): the provider's own.
    type Ah;
    /// Selective signaling policy: from now on, every request posted without
    /// [`SendFlags::SIGNALED`] is signaled anyway when `n` requests (this one included) went
    /// by since the last signaled one, so one completion reports at most `n` requests (it
    /// retires the unsignaled ones before it). `0` (the default of a new QP) turns it off.
    fn set_signal_every(&mut self, n: u32);
    /// Stage one request. It is not visible to the device until [`SendQueue::ring`].
    fn post<'a>(&mut self, wr: SendWr<'a, Self::Ah>) -> Result<(), Rejected<SendWr<'a, Self::Ah>>>;
    /// Publish everything staged with one doorbell. Ringing with nothing staged does nothing.
    /// Only the verbs provider can refuse a doorbell (`ibv_post_send` returning an errno):
    /// [`SendQueue::try_ring`] (or `post_and_ring`, `post_list`) returns the refusal at the
    /// call. A bare `ring` cannot; its refusal stays in band all the same, reported once by
    /// the first of: the queue's next `post` (the request handed back, unposted, with the
    /// refusal as [`PostError::Device`]), `post_list` (index 0), `try_ring`,
    /// [`SendQueue::take_ring_error`], or an empty poll of the send CQ (a completion flagged
    /// [`WcFlags::REFUSED`](crate::WcFlags::REFUSED), [`Completion::refusal`] the error): a
    /// loop that rings and then waits for a completion sees it there instead of waiting for
    /// requests that never reached the device. mlx5 and the sim never refuse.
    fn ring(&mut self);
    /// [`SendQueue::ring`], and the device's refusal, if any, returned at once: the
    /// [`RingError`] names the verb, the errno, what to do, and which requests were taken back
    /// (the newest `count` staged, from `first_wr_id`: none of them reaches the device or
    /// completes). mlx5 and the sim never refuse (always `Ok`).
    #[inline(always)]
    fn try_ring(&mut self) -> Result<(), RingError> {
        self.ring();
        match self.take_ring_error() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
    /// [`SendQueue::post`] then [`SendQueue::try_ring`] in one call: the request and whatever
    /// was staged before it go out with one doorbell. A refused request is handed back as
    /// `post` hands it back, and what was staged before it is rung all the same. A doorbell
    /// the device refuses (verbs only) comes back here too, as [`PostError::Device`] with the
    /// request: then the `count` newest staged requests (this one among them when `post` had
    /// taken it) were taken back. On mlx5 a small inline WRITE or SEND posted with nothing
    /// staged and BlueFlame off (the one-message case) rings without the staged count's
    /// test, the doorbell value kept in a register.
    #[inline(always)]
    fn post_and_ring<'a>(
        &mut self,
        wr: SendWr<'a, Self::Ah>,
    ) -> Result<(), Rejected<SendWr<'a, Self::Ah>>> {
        let r = self.post(wr);
        match self.try_ring() {
            Ok(()) => r,
            Err(e) => Err(Rejected {
                wr,
                error: e.into(),
            }),
        }
    }
    /// Post each request, then ring once. On a refusal, the requests before it are staged and
    /// rung; the error names the refused index and hands back the unposted rest. A doorbell
    /// the device refuses (verbs only) is returned the same way, as [`PostError::Device`]:
    /// `index` is then the first request of the list taken back (`rest` the ones not posted;
    /// when the refusal also took back requests staged before the list, `index` is 0 and the
    /// error's `count` exceeds `rest.len()`).
    fn post_list<'s, 'a>(
        &mut self,
        wrs: &'s [SendWr<'a, Self::Ah>],
    ) -> Result<(), PostListError<'s, SendWr<'a, Self::Ah>>> {
        let mut stop = None;
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(r) = self.post(*wr) {
                stop = Some((i, r.error));
                break;
            }
        }
        list_outcome(wrs, stop, self.try_ring())
    }
    /// The error of the last bare [`SendQueue::ring`] the device refused, if no other call
    /// reported it yet (see `ring`; cleared by this call). Only the verbs provider can refuse
    /// a doorbell; mlx5 and the sim always return `None`. [`SendQueue::try_ring`] returns it
    /// at the call instead.
    fn take_ring_error(&mut self) -> Option<RingError> {
        None
    }
    /// How many more requests fit (the smallest possible WQE each, on mlx5).
    fn free_slots(&self) -> u32;
    /// Requests staged but not yet rung.
    fn staged(&self) -> u32;
    /// The drain's *flush marker* ([`recover`] step 1), for a QP already in ERR or SQE and
    /// only there: a signaled zero-length RDMA WRITE, `wr_id` its id, posted and rung with
    /// whatever was staged. The device does not execute it: a work request posted in ERR
    /// completes with `WR_FLUSH_ERR` (IBA), after every request posted before it, so its
    /// completion says that every earlier send has ended (unsignaled ones that ran included,
    /// which have no completion of their own). An ordinary post in ERR stays refused
    /// (`BadState`); this is the one request allowed there. Refused with `BadState` in any
    /// other state, `CqError` when the QP's CQ is in error (no completion can come),
    /// `QueueFull` / `CqFull` without room for one more request. mlx5 and the sim write the
    /// WQE and ring (hardware and the sim flush it); verbs hands it to `ibv_post_send` and
    /// returns the device's refusal as [`PostError::Device`] (rxe, kernel 6.1, accepts it in
    /// ERR and flushes it). Cold path: a fault's drain, never per message.
    fn post_flush_marker(&mut self, wr_id: u64) -> Result<(), PostError>;
}

/// A receive queue or SRQ: one producer (`&mut self`).
pub trait RecvQueue {
    /// Stage one receive. It is not visible to the device until [`RecvQueue::ring`].
    fn post_recv<'a>(&mut self, wr: RecvWr<'a>) -> Result<(), Rejected<RecvWr<'a>>>;
    /// Publish everything staged. A refusal (verbs: `ibv_post_recv`, `ibv_post_srq_recv`)
    /// is reported as [`SendQueue::ring`] says: by the next `post_recv`, `post_recv_list`,
    /// `try_ring`, `take_ring_error`, or (an RQ of its own, not an SRQ) an empty poll of the
    /// receive CQ as a completion flagged `REFUSED` with opcode `Recv`.
    fn ring(&mut self);
    /// As [`SendQueue::try_ring`] (`ibv_post_recv` on the verbs provider).
    #[inline(always)]
    fn try_ring(&mut self) -> Result<(), RingError> {
        self.ring();
        match self.take_ring_error() {
            None => Ok(()),
            Some(e) => Err(e),
        }
    }
    /// Post each, then ring once; on a refusal (of a post or of the doorbell) as
    /// [`SendQueue::post_list`].
    fn post_recv_list<'s, 'a>(
        &mut self,
        wrs: &'s [RecvWr<'a>],
    ) -> Result<(), PostListError<'s, RecvWr<'a>>> {
        let mut stop = None;
        for (i, wr) in wrs.iter().enumerate() {
            if let Err(r) = self.post_recv(*wr) {
                stop = Some((i, r.error));
                break;
            }
        }
        list_outcome(wrs, stop, self.try_ring())
    }
    /// As [`SendQueue::take_ring_error`].
    fn take_ring_error(&mut self) -> Option<RingError> {
        None
    }
    /// How many more receives fit.
    fn free_slots(&self) -> u32;
}

/// What a post list ends with: `stop` is the first request `post` refused (the ones before it
/// staged), `rung` what the doorbell that followed said. A refused doorbell took back the
/// `count` newest staged requests; it wins over a post's refusal (it lost more).
fn list_outcome<W>(
    wrs: &[W],
    stop: Option<(usize, PostError)>,
    rung: Result<(), RingError>,
) -> Result<(), PostListError<'_, W>> {
    let staged = stop.map_or(wrs.len(), |(i, _)| i);
    let (index, error) = match (rung, stop) {
        (Err(e), _) => (staged.saturating_sub(e.count as usize), e.into()),
        (Ok(()), Some((i, error))) => (i, error),
        (Ok(()), None) => return Ok(()),
    };
    Err(PostListError {
        index,
        error,
        rest: &wrs[index..],
    })
}

/// A completion queue: one consumer (`&mut self`).
pub trait CompletionQueue {
    /// Poll up to `out.len()` completions into `out`; returns how many were written.
    /// Never allocates; on mlx5/sim makes no system call.
    fn poll(&mut self, out: &mut [Completion]) -> usize;
    /// Poll at most one completion into `out`; true when it holds one. The same as `poll`
    /// with a one-slot slice; the mlx5 provider (hardware and sim) takes a single requester
    /// CQE of the QP it last saw on a path of its own (the busy poller waiting for one
    /// order's completion).
    #[inline]
    fn poll_one(&mut self, out: &mut Completion) -> bool {
        self.poll(core::slice::from_mut(out)) == 1
    }
    /// CQ size (entries).
    fn cqe(&self) -> u32;
    /// Poll as [`CompletionQueue::poll`] and give each completion's device time in ns
    /// (`ns[i]` for `out[i]`; at most `min(out.len(), ns.len())`). Meaningful on a CQ made by
    /// [`Provider::create_cq_ts`]; the default (a CQ without timestamps) gives 0.
    fn poll_ts(&mut self, out: &mut [Completion], ns: &mut [u64]) -> usize {
        let m = out.len().min(ns.len());
        let n = self.poll(&mut out[..m]);
        ns[..n].fill(0);
        n
    }
}

/// A queue pair: a send queue and a receive queue (or none, with an SRQ).
pub trait QueuePair {
    /// The send queue type.
    type Sq: SendQueue;
    /// The receive queue type.
    type Rq: RecvQueue;
    /// QP number.
    fn qpn(&self) -> u32;
    /// RC, UC or UD.
    fn qp_type(&self) -> QpType;
    /// The state as last set or observed.
    fn state(&self) -> QpState;
    /// Capacities the device granted.
    fn caps(&self) -> QpCaps;
    /// The send queue.
    fn sq(&mut self) -> &mut Self::Sq;
    /// The receive queue (posting to it on a QP created with an SRQ is refused).
    fn rq(&mut self) -> &mut Self::Rq;
    /// Both at once (post from one, receive into the other).
    fn queues(&mut self) -> (&mut Self::Sq, &mut Self::Rq);
}

/// Which provider a [`Provider`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// Direct mlx5 WQE writing on hardware.
    Mlx5,
    /// libibverbs post/poll (rxe or any verbs device).
    Verbs,
    /// The mlx5 hot path on the software mlx5 device.
    Sim,
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProviderKind::Mlx5 => "mlx5",
            ProviderKind::Verbs => "verbs",
            ProviderKind::Sim => "sim",
        })
    }
}

/// A device opened for the data plane, and its control path: everything a program needs to
/// set up queues, generic over the three providers ([`mlx5::Mlx5Device`] on a ConnectX,
/// [`verbs::VerbsDevice`] on any verbs device such as rxe, and the software device).
///
/// The order of a program: [`Provider::alloc_pd`], registered memory
/// ([`Provider::alloc_buf`], no `unsafe`), CQs ([`Provider::create_cq`]; each must absorb the
/// queues of the QPs on it), QPs ([`Provider::create_qp`], in RESET), then the bring-up:
/// [`Provider::endpoint`] describes a QP to its peer, [`Provider::connect`] takes it to RTS
/// towards the peer's endpoint ([`flow::connect_pair`] for two QPs of one device,
/// [`crate::connect::connect_qp_server`] / [`crate::connect::connect_qp_client`] between
/// processes). From then on the data plane is the queues' own (`qp.sq()`, `qp.rq()`,
/// `cq.poll`), with [`Provider::progress`] called between post and poll so the same loop also
/// runs on the deterministic software device.
///
/// An RC QP is point to point: it talks to exactly one peer QP. One process serving N peers
/// has N QPs (they may share one CQ; completions name their QP in
/// [`Completion::qp_num`]). UD reaches any QP through address handles, for datagrams up to
/// the path MTU.
pub trait Provider {
    /// Protection domain.
    type Pd;
    /// Memory region.
    type Mr: MemoryRegion;
    /// Completion queue.
    type Cq: CompletionQueue;
    /// Shared receive queue.
    type Srq: RecvQueue;
    /// Queue pair; its send queue takes this provider's address handles.
    type Qp: QueuePair<Sq: SendQueue<Ah = Self::Ah>>;
    /// Address handle (UD), created by [`Provider::create_ah`] and named in [`UdDest`]; any
    /// thread may send with it.
    type Ah: Send + Sync;
    /// A QP owned together with the CQ it alone completes into ([`pair`]): on mlx5 and the sim
    /// its poll takes a way of its own.
    type Pair: OwnedPair<Qp = Self::Qp, Cq = Self::Cq>
        + QueuePair<Sq = <Self::Qp as QueuePair>::Sq, Rq = <Self::Qp as QueuePair>::Rq>;

    /// Which provider this is.
    fn kind(&self) -> ProviderKind;
    /// Device name (`rxe0`, `mlx5_0`, `sim0`).
    fn device_name(&self) -> &str;
    /// Allocate a protection domain.
    fn alloc_pd(&mut self) -> crate::Result<Self::Pd>;
    /// Register `len` bytes at `addr`.
    ///
    /// # Safety
    /// The memory must stay valid (and not be unmapped) until the MR is dropped; the device
    /// may read and write it as `access` allows.
    unsafe fn reg_mr(
        &mut self,
        pd: &Self::Pd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> crate::Result<Self::Mr>;
    /// Map `len` bytes of fresh, zeroed, page-aligned memory (on huge pages if `pages` asks
    /// and the system has them) and register it with `access`: the safe way to get
    /// registered memory. See [`buffer`] for when the device may write into it.
    fn alloc_buf(
        &mut self,
        pd: &Self::Pd,
        len: usize,
        access: Access,
        pages: Pages,
    ) -> crate::Result<RegisteredBuf<Self::Mr>> {
        let (mut map, huge, note) = buffer::map(len, pages)?;
        let ptr = map.as_mut_ptr();
        // SAFETY: `map` is a fresh private mapping of at least `len` bytes; the buffer built
        // below owns both and drops the region before the mapping, so the memory stays valid
        // for the region's whole life.
        let mr = unsafe { self.reg_mr(pd, ptr, len, access)? };
        Ok(RegisteredBuf::new(mr, map, len, huge, note))
    }
    /// Create a CQ with at least `cqe` entries.
    fn create_cq(&mut self, cqe: u32) -> crate::Result<Self::Cq>;
    /// Create a CQ whose completions carry the device's time of completion in real-time
    /// format (nanoseconds, read with [`CompletionQueue::poll_ts`]). The default refuses:
    /// libibverbs' plain CQ has no timestamps, and rxe cannot make one (EOPNOTSUPP).
    fn create_cq_ts(&mut self, cqe: u32) -> crate::Result<Self::Cq> {
        let _ = cqe;
        Err(crate::Error::Unsupported {
            what: format!(
                "{}: no completion timestamps (EOPNOTSUPP); create the CQ with create_cq \
                 (no timestamps) instead",
                self.kind()
            ),
        })
    }
    /// Create an SRQ.
    fn create_srq(&mut self, pd: &Self::Pd, max_wr: u32, max_sge: u32) -> crate::Result<Self::Srq>;
    /// Create a QP in RESET. `recv_cq: None` means "the same CQ as `send_cq`".
    fn create_qp(
        &mut self,
        pd: &Self::Pd,
        send_cq: &mut Self::Cq,
        recv_cq: Option<&mut Self::Cq>,
        srq: Option<&mut Self::Srq>,
        cfg: &QpConfig,
    ) -> crate::Result<Self::Qp>;
    /// Own `qp` and `cq` together ([`pair`]). mlx5 and the sim refuse (EINVAL, naming the
    /// fix) a CQ another QP uses or a QP that sends into another CQ; verbs checks nothing.
    fn own_pair(&mut self, qp: Self::Qp, cq: Self::Cq) -> crate::Result<Self::Pair>;
    /// What a peer needs to connect to `qp` (PSN chosen by the provider).
    fn endpoint(&self, qp: &Self::Qp, opts: &ConnectOpts) -> crate::Result<QpEndpoint>;
    /// RESET → INIT → RTR → RTS towards `remote` (UD: `remote` is ignored beyond its MTU).
    fn connect(
        &mut self,
        qp: &mut Self::Qp,
        local: &QpEndpoint,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> crate::Result<()>;
    /// Move `qp` to ERR: everything outstanding is flushed.
    fn to_error(&mut self, qp: &mut Self::Qp) -> crate::Result<()>;
    /// An address handle towards `remote` (UD).
    fn create_ah(
        &mut self,
        pd: &Self::Pd,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> crate::Result<Self::Ah>;
    /// Give the device a chance to run: the sim in deterministic mode runs until idle (every
    /// request posted so far executes); the sim with its device thread and real devices do
    /// nothing. See "Choosing a mode" in the sim's module doc.
    fn progress(&mut self) {}
    /// The asynchronous events the device reported since the last call, oldest first, read
    /// without blocking and acknowledged (verbs and mlx5: [`verbs::VerbsDevice::check_async`]
    /// and its mlx5 twin, which also apply them to the queues made here; the sim: its queued
    /// events, a CQ, SRQ or port named by its number). `Ok(None)`: this provider has no event
    /// stream (the default).
    ///
    /// The one way to read a device's events: each is handed out once (the providers' own
    /// readers, `check_async` and the sim's `take_events` / `poll_async_event`, take from the
    /// same stream), so a program reads them in one place and passes them on (to its links as
    /// [`recover::LinkEvent`]s, [`recover::link_events`]; the scenario runner reads them here
    /// too). See [`recover::LinkEvent`] for what each provider raises.
    fn async_events(&mut self) -> crate::Result<Option<Vec<AsyncEvent>>> {
        Ok(None)
    }
    /// Inject `fault` as the device would raise it, for tests (scenarios' `fault` lines).
    /// Only the software device can; the default refuses (EOPNOTSUPP) naming the fix.
    fn inject_fault(&mut self, qp: Option<&Self::Qp>, fault: Fault) -> crate::Result<()> {
        let _ = qp;
        Err(crate::Error::Unsupported {
            what: format!(
                "{}: cannot inject {fault:?} (EOPNOTSUPP): only the software device (sim0) \
                 injects faults; tag the line [sim]",
                self.kind()
            ),
        })
    }
}

/// A fault [`Provider::inject_fault`] raises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The QP given moves to ERR with `QP_FATAL`, as a local fatal error would: its
    /// outstanding requests are flushed.
    QpFatal,
    /// The port goes down (`PORT_ERR`).
    PortDown(u8),
    /// The port comes back (`PORT_ACTIVE`).
    PortUp(u8),
}
