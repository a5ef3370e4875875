//! A QP and the CQ it alone completes into, owned together: the layout of a trading engine
//! (one connection, one thread that posts an order and spins on its completion).
//!
//! [`Mlx5Dedicated`] is built from an [`Mlx5Qp`] and the [`Mlx5Cq`] its send side completes
//! into, when no other QP uses that CQ (checked; the receive side may complete here or on
//! another CQ). It is a [`QueuePair`] (post through `sq()` / `rq()` as on the QP) and a
//! [`CompletionQueue`] (poll it as the CQ). Because it owns both, no thread can drop or reset
//! the QP, or add another QP to the CQ, while it polls, and its requester CQEs take a way of
//! their own (`cq/dedicated.rs`): no polling handshake, no QP lookup, no liveness or purge
//! check, the producer position read from the send queue itself. Every check on what a CQE
//! claims stays (its owner bit, the QP it names, the oldest outstanding WQE, the producer
//! position of the last doorbell, the poster's wr_id); every other CQE, and every CQE while
//! the way is closed, goes through the CQ's general poll, with the same results.
//!
//! The way is closed whenever [`Mlx5Dedicated::qp_mut`] hands the QP out (the control path:
//! connect, reset, error), since a reset leaves stale CQEs behind, and opens again at a
//! general poll that finds the QP's purge marks passed (its stale CQEs discarded).
//! [`Mlx5Dedicated::into_parts`] gives the QP and the CQ back, consistent;
//! [`Mlx5Dedicated::cq_mut`] lends the CQ to what polls it the general way (a
//! [`super::CqWaiter`] sleeping on its completion events).
//!
//! On the sim (the same code as on a ConnectX NIC), an order SENT inline and its two
//! completions:
//!
//! ```
//! use rdma_direct_providers::flow::connect_pair;
//! use rdma_direct_providers::mlx5::Mlx5Dedicated;
//! use rdma_direct_providers::sim::SimDevice;
//! use rdma_direct_providers::*;
//!
//! fn main() -> rdma_direct_core::Result<()> {
//!     let mut dev = SimDevice::new();
//!     let pd = dev.alloc_pd()?;
//!     let inbox = dev.alloc_buf(&pd, 64, Access::LOCAL_WRITE, Pages::Normal)?;
//!     let cfg = QpConfig::new(QpType::Rc);
//!     let (mut ca, mut cb) = (dev.create_cq(256)?, dev.create_cq(256)?);
//!     let qa = dev.create_qp(&pd, &mut ca, None, None, &cfg)?;
//!     let qb = dev.create_qp(&pd, &mut cb, None, None, &cfg)?;
//!     // Each QP owns its CQ: refused (with both handed back) if another QP used it.
//!     let mut a = Mlx5Dedicated::new(qa, ca).map_err(|e| e.reason)?;
//!     let mut b = Mlx5Dedicated::new(qb, cb).map_err(|e| e.reason)?;
//!     connect_pair(&mut dev, a.qp_mut(), b.qp_mut(), &ConnectOpts::default())?;
//!
//!     b.rq().post_recv(RecvWr::new(7, &[inbox.sge(0, 64)?]))?;
//!     b.rq().ring();
//!     a.sq().post(SendWr::send(1, &[]).inline(b"BUY 100").signaled())?;
//!     a.sq().ring();
//!     let (mut sent, mut got) = (Completion::EMPTY, Completion::EMPTY);
//!     let (mut have_sent, mut have_got) = (false, false);
//!     while !(have_sent && have_got) {
//!         dev.progress(); // runs the software device; real devices need nothing
//!         have_sent |= a.poll_one(&mut sent);
//!         have_got |= b.poll_one(&mut got);
//!     }
//!     sent.check()?;
//!     got.check()?;
//!     assert_eq!((sent.wr_id, got.wr_id, got.byte_len), (1, 7, 7));
//!     assert_eq!(inbox.get(0, 7)?, b"BUY 100");
//!     Ok(())
//! }
//! ```

use std::sync::Arc;

use super::cq::{Took, CLOSED};
use super::owners::Owners;
use super::{Mlx5Cq, Mlx5Device, Mlx5Qp, Mlx5Rq, Mlx5Sq};
use crate::{Completion, CompletionQueue, QueuePair};

/// A QP and the CQ it alone completes into (see the module doc).
pub struct Mlx5Dedicated<D: Owners = Mlx5Device> {
    /// The QP's number as CQE bytes 57..59 hold it (the little-endian u32 of bytes 56..59
    /// less the WQE opcode), or `CLOSED` while a purge may be pending.
    tag: u64,
    /// The requester completion's `byte_len` (0) and `qp_num` as one word.
    len_qpn: u64,
    /// `tag` when open.
    open_tag: u64,
    qp: Mlx5Qp<D>,
    cq: Mlx5Cq<D>,
}

/// Why [`Mlx5Dedicated::new`] refused, with the QP and the CQ handed back unchanged.
pub struct NotDedicated<D: Owners = Mlx5Device> {
    pub reason: crate::Error,
    pub qp: Mlx5Qp<D>,
    pub cq: Mlx5Cq<D>,
}

impl<D: Owners> std::fmt::Debug for NotDedicated<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotDedicated")
            .field("reason", &self.reason)
            .finish_non_exhaustive()
    }
}

impl<D: Owners> std::fmt::Display for NotDedicated<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.reason.fmt(f)
    }
}

impl<D: Owners> std::fmt::Debug for Mlx5Dedicated<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Dedicated")
            .field("qp", &self.qp)
            .field("cq", &self.cq)
            .field("open", &(self.tag != CLOSED))
            .finish()
    }
}

impl<D: Owners> Mlx5Dedicated<D> {
    /// Own `qp` and `cq` together. Refused (both handed back) unless `qp`'s send side
    /// completes into `cq` and no other QP, alive or dropped with CQEs still to discard, is
    /// registered with `cq`.
    pub fn new(qp: Mlx5Qp<D>, cq: Mlx5Cq<D>) -> Result<Self, Box<NotDedicated<D>>> {
        let refuse = |detail: String, qp, cq| {
            Err(Box::new(NotDedicated {
                reason: crate::Error::verb("Mlx5Dedicated::new", libc::EINVAL, detail),
                qp,
                cq,
            }))
        };
        if !Arc::ptr_eq(&qp.shared().send_cq, cq.shared()) {
            return refuse(
                format!(
                    "QP {:#x} sends into another CQ than CQ {:#x}: create the QP with this CQ \
                     as its send CQ",
                    qp.qpn(),
                    cq.cqn()
                ),
                qp,
                cq,
            );
        }
        if !cq.serves_only(qp.shared()) {
            return refuse(
                format!(
                    "CQ {:#x} serves other QPs besides QP {:#x} (or still holds CQEs of a \
                     dropped one): give the QP a CQ of its own",
                    cq.cqn(),
                    qp.qpn()
                ),
                qp,
                cq,
            );
        }
        let qpn = qp.qpn();
        let mut d = Mlx5Dedicated {
            tag: CLOSED,
            len_qpn: super::cq::len_qpn(0, qpn),
            open_tag: u64::from(qpn.to_be()),
            qp,
            cq,
        };
        d.reopen();
        Ok(d)
    }

    /// The QP and the CQ, apart again.
    pub fn into_parts(self) -> (Mlx5Qp<D>, Mlx5Cq<D>) {
        (self.qp, self.cq)
    }

    /// The QP (read only).
    pub fn qp(&self) -> &Mlx5Qp<D> {
        &self.qp
    }

    /// The QP for the control path (connect, reset, the doorbell mode, ...). Closes the
    /// dedicated way until a poll finds the QP's stale CQEs, if any, discarded.
    pub fn qp_mut(&mut self) -> &mut Mlx5Qp<D> {
        self.tag = CLOSED;
        &mut self.qp
    }

    /// The CQ (read only).
    pub fn cq(&self) -> &Mlx5Cq<D> {
        &self.cq
    }

    /// The CQ for what takes it mutably (a [`super::CqWaiter`]'s `wait`, which arms it and
    /// polls it the general way). A general poll keeps the pair's way as it is.
    pub fn cq_mut(&mut self) -> &mut Mlx5Cq<D> {
        &mut self.cq
    }

    /// True while the dedicated way is open (no purge pending).
    pub fn is_open(&self) -> bool {
        self.tag != CLOSED
    }

    /// Open the way when the QP has no stale CQEs left to discard.
    fn reopen(&mut self) {
        if self.tag == CLOSED && self.cq.purge_passed() {
            self.tag = self.open_tag;
        }
    }

    /// At most one completion into `out`; true when it holds one. A successful requester CQE
    /// of this QP completing its oldest outstanding WQE takes the dedicated way; an empty CQ
    /// costs the owner byte, the error flag and two tests; everything else is the CQ's
    /// `poll_one`.
    #[inline(always)]
    pub fn poll_one(&mut self, out: &mut Completion) -> bool {
        match self
            .cq
            .take_dedicated::<false>(self.qp.sq_ref(), self.tag, &self.len_qpn, out)
        {
            Took::One => true,
            Took::Empty => false,
            Took::Other => self.poll_one_slow(out),
        }
    }

    /// [`Self::poll_one`]'s other cases: a plain receive of the QP's RQ without the
    /// handshake, a completion covering unsignaled requests the same way, else the CQ's
    /// `poll_one`.
    #[inline(never)]
    fn poll_one_slow(&mut self, out: &mut Completion) -> bool {
        if self.cq.take_dedicated_recv(out) == Took::One {
            return true;
        }
        self.poll_one_rest(out)
    }

    /// [`Self::poll_one_slow`] past the receive: a completion covering unsignaled requests
    /// the pair's way, else the CQ's `poll_one`. Out of line: the receive keeps its
    /// registers.
    #[inline(never)]
    fn poll_one_rest(&mut self, out: &mut Completion) -> bool {
        if self
            .cq
            .take_dedicated::<true>(self.qp.sq_ref(), self.tag, &self.len_qpn, out)
            == Took::One
        {
            return true;
        }
        let got = self.cq.poll_one(out);
        self.reopen();
        got
    }

    /// Up to `out.len()` completions: the first through the dedicated way when it can; when
    /// more CQEs follow, the CQ's general poll (built for bursts) takes them.
    #[inline(always)]
    pub fn poll(&mut self, out: &mut [Completion]) -> usize {
        let Some((first, rest)) = out.split_first_mut() else {
            return 0;
        };
        match self
            .cq
            .take_dedicated::<false>(self.qp.sq_ref(), self.tag, &self.len_qpn, first)
        {
            Took::One if rest.is_empty() || !self.cq.next_ready() => 1,
            Took::One => 1 + self.poll_slow(rest),
            Took::Empty => 0,
            Took::Other => self.poll_slow(out),
        }
    }

    /// The CQ's general poll, then the way reopened if it can be.
    #[inline(never)]
    fn poll_slow(&mut self, out: &mut [Completion]) -> usize {
        let n = self.cq.poll(out);
        self.reopen();
        n
    }
}

impl<D: Owners> CompletionQueue for Mlx5Dedicated<D> {
    #[inline(always)]
    fn poll(&mut self, out: &mut [Completion]) -> usize {
        Mlx5Dedicated::poll(self, out)
    }

    #[inline(always)]
    fn poll_one(&mut self, out: &mut Completion) -> bool {
        Mlx5Dedicated::poll_one(self, out)
    }

    fn cqe(&self) -> u32 {
        self.cq.cqe()
    }

    fn poll_ts(&mut self, out: &mut [Completion], ns: &mut [u64]) -> usize {
        let n = self.cq.poll_ts(out, ns);
        self.reopen();
        n
    }
}

crate::pair::forward_queue_pair!([D: Owners] Mlx5Dedicated<D>, qp, Mlx5Sq<D>, Mlx5Rq);

impl<D: Owners> crate::OwnedPair for Mlx5Dedicated<D> {
    type Qp = Mlx5Qp<D>;
    type Cq = Mlx5Cq<D>;
    fn qp(&self) -> &Mlx5Qp<D> {
        Mlx5Dedicated::qp(self)
    }
    fn qp_mut(&mut self) -> &mut Mlx5Qp<D> {
        Mlx5Dedicated::qp_mut(self)
    }
    fn cq_mut(&mut self) -> &mut Mlx5Cq<D> {
        Mlx5Dedicated::cq_mut(self)
    }
    fn into_parts(self) -> (Mlx5Qp<D>, Mlx5Cq<D>) {
        Mlx5Dedicated::into_parts(self)
    }
}
