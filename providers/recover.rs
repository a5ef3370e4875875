//! Recovery of an RC link after a fault, owned by the library so an embedder does not write
//! the drain-and-tally glue again.
//!
//! A *link* here is one RC QP, the CQ its sends complete into (and the CQ of its receives,
//! when that is another one), the [`SendWindow`] counting its sends in flight and, when the
//! application keeps receives posted, the [`RecvReplenisher`] doing it.
//!
//! **Noticing a fault.** With the default [`ConnectOpts`](crate::ConnectOpts) a peer that
//! died or became unreachable ends the oldest outstanding request in `RETRY_EXC_ERR` within
//! `ConnectOpts::retry_budget` on every provider (mlx5, rxe, the sim); any completion that is
//! not a success ([`Completion::is_ok`]) means the QP is in ERR. A link with nothing in flight
//! notices nothing: [`probe`] it when it has been quiet for longer than the application can
//! afford, and the probe's completion (success, or the error) answers within the same bound.
//!
//! **[`Recovery::recover`], step by step** (it runs only on a fault; it allocates nothing:
//! its list of failed requests was reserved by [`Recovery::new`] for a whole send queue):
//!
//! 1. posts a *marker* (a signaled zero-length RDMA WRITE, wr_id [`MARKER_WR_ID`], which
//!    needs no remote address) while the QP is still in RTS, then moves the QP to ERR
//!    ([`Provider::to_error`]; a QP the device already failed is fine): every request still
//!    outstanding is flushed. Unsignaled sends that executed before the move get no
//!    completion and no flush of their own (verbs behave so); a send queue ends its requests
//!    in post order, and every flush has a completion, so when the marker's completion
//!    (flushed or not) arrives, every send before it not reported yet has executed: they
//!    count as completed, whatever the marker's `covered` says. The marker needs one free
//!    slot in the send queue: keep the window one below the QP's depth
//!    ([`Recovery::send_window`]). A QP already in ERR (the application moved it, or the
//!    device failed it with QP_FATAL) refuses ordinary posts; it gets the marker after the
//!    move instead, as a *flush marker* ([`SendQueue::post_flush_marker`]): a request
//!    posted in ERR is not executed but completes flushed after every request before it, so
//!    its completion ends the unsignaled sends that ran after the last signaled one (they
//!    have no completion of their own) as the marker posted in RTS does. Only a device that
//!    refuses the flush marker (its post error ends the attempt, the drain goes on without
//!    it) leaves such sends to the stall ([`Error::Stalled`]);
//! 2. polls until **every outstanding request has ended**, counted per request, not per
//!    completion: a send completion ends `1 + covered` requests ([`Completion::covered`]:
//!    the unsignaled ones before it it retires), a receive completion one. The sends
//!    outstanding are the window's [`SendWindow::in_flight`], the receives the replenisher's
//!    [`RecvReplenisher::posted`]. A receive is told from a send by the CQ it completes on
//!    (a separate receive CQ) or, on a CQ both share, by its opcode (a receive opcode on
//!    error completions too, every provider) or its wr_id ([`RecvReplenisher::owns`]: give
//!    it an id base above the send ids); of an error completion only `wr_id`, `qp_num`,
//!    `vendor_err`, `covered` and the queue `opcode` names are meaningful, so nothing else
//!    is read. Completions of other QPs on a shared CQ are handed on, not counted, and so is
//!    a refused doorbell's notice (`WcFlags::REFUSED`, verbs only: its requests were never
//!    posted, the application takes them back from its window as the error says);
//! 3. records, in the order they completed (RC completes a queue in post order), the wr_ids
//!    of the sends that did **not** complete successfully ([`Recovery::failed`]): the one
//!    that failed and those flushed after it. Unsignaled sends an error completion covers
//!    executed before the failed one (RC ends requests in order; the error names the oldest
//!    one the peer did not acknowledge) and count as completed;
//! 4. resets the window (nothing in flight) and the replenisher (every slot to post again);
//! 5. calls the application's `reconnect(p, qp)`: the endpoint exchange with the peer over
//!    its own path (TCP as [`crate::connect`], rdma_cm, or in one process
//!    [`crate::flow::connect_pair`]), then [`Provider::connect`], which takes a QP in ERR
//!    through RESET → INIT → RTR → RTS (a new PSN; the peer does the same with its own QP);
//! 6. posts every receive again ([`RecvReplenisher::fill`]).
//!
//! Every completion polled during the drain, successful or not, is handed to the caller's
//! `each` first, in poll order, so an acknowledgement that arrived just before the fault is
//! not lost. When the application's own poll saw the fault, it hands the completions of that
//! poll it has not booked (from the error on) to [`Recovery::drain_polled`], which books and
//! counts them as its own: the [`Report`] then accounts for every request outstanding when
//! the application noticed (`missing` 0), and prints as one line.
//!
//! The ring helpers ([`crate::flow::RingWriter`], [`crate::flow::RingReader`]) carry the
//! application's stream position, which only the two ends together can agree on: reset them
//! after `recover` with [`crate::flow::RingWriter::reset`] at the sequence the reader reports.
//!
//! **[`RcLink`]** bundles the common shape: one RC QP whose sends and receives complete on
//! one CQ of its own, its window (one slot below the QP's depth, for the marker), the
//! receives kept posted (tagged with an id base) and the recovery. [`RcLink::take`] books a
//! completion the application polled. After a fault the link goes on one of two ways, the
//! application's choice: **the same QP** ([`RcLink::recover`]: drain, then the QP from ERR
//! through RESET → INIT → RTR → RTS towards the peer's new endpoint, then the receives posted
//! again; the QPN, CQ and buffers stay) or **new QPs** ([`RcLink::drain_polled`]: drain only,
//! the old link kept until a new `RcLink` is connected, then dropped). Either way the
//! drain hands the application's `delivered` every successful completion it polls (an
//! acknowledgement that arrived after the application's last poll), once.
//!
//! **Asynchronous events** are the third source of faults: a QP the device failed on its
//! own, a CQ in error, a port down, a dead device. They come through the one event interface,
//! [`Provider::async_events`] (device-wide, and each event is handed out once: one reader for
//! all the program's links and anything else that watches events); [`LinkEvent::from`] (or
//! [`link_events`], which reads and converts) gives them as the link helper sees them, and
//! each link says whether one fails it ([`RcLink::failed_by`]); a link failed so recovers
//! with nothing polled.
//!
//! A drain that sees nothing for `stall` (a device that never flushes) is an
//! error naming what is still outstanding; the QP stays in ERR and the helpers unchanged.

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::flow::{RecvReplenisher, SendWindow};
use crate::{
    AsyncEvent, Completion, CompletionQueue, Provider, QpConfig, QpState, QpType, QueuePair,
    SendQueue, SendWr, WcFlags, WcStatus,
};

/// An asynchronous event ([`Provider::async_events`]) as the link helper sees it
/// ([`LinkEvent::from`]): the third way a link learns of a fault, beside an error completion
/// and an unanswered [`probe`].
///
/// Per provider: **the sim** raises `QP_FATAL` when a QP fails on its own
/// (`SimDevice::fail_qp`, the QPs of a CQ that overran), `CQ_ERR` on the overrun (the QPs'
/// `QpFailed` follow), and what `SimDevice::raise_event` plants (port changes, a dead
/// device). **verbs and mlx5** read the context's asynchronous event fd (non-blocking reads,
/// system calls) and apply each event as `check_async` does (a failed CQ fails its QPs, a
/// failed QP says ERR) before returning it: read them from the control path or an idle
/// loop, or when the fd (`Context::async_fd`) is readable, never per poll. rxe raises
/// `COMM_EST` and `QP_FATAL`-class events; a link whose peer vanished raises nothing (only
/// its requests' `RETRY_EXC_ERR` tells). A provider without an event stream reports none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkEvent {
    /// A QP went to ERR on its own (`QP_FATAL`, `QP_REQ_ERR`, `QP_ACCESS_ERR`; `what` the
    /// event's name): every request still outstanding on it is flushed.
    QpFailed {
        /// The QP.
        qpn: u32,
        /// `QP_FATAL`, `QP_REQ_ERR` or `QP_ACCESS_ERR`.
        what: &'static str,
    },
    /// A CQ went into error (an overrun, a device fault): completions were lost; its QPs are
    /// in ERR (their `state()` says so) and the CQ must be destroyed with them.
    CqFailed,
    /// A port went down (`PORT_ERR`): links through it end in `RETRY_EXC_ERR` once their
    /// retries run out; this says so first.
    PortDown {
        /// The port.
        port: u8,
    },
    /// A port came up (`PORT_ACTIVE`): a time to reconnect.
    PortUp {
        /// The port.
        port: u8,
    },
    /// The first packet arrived on a QP in RTR (`COMM_EST`); not a fault.
    Established {
        /// The QP.
        qpn: u32,
    },
    /// The device is dead (`DEVICE_FATAL`): every link on it fails.
    DeviceFatal,
    /// Anything else (SRQ limit, GID change, last WQE reached, ...; its name): not a link
    /// fault.
    Other(&'static str),
}

/// The device's pending asynchronous events ([`Provider::async_events`], which hands each
/// out once) as [`LinkEvent`]s, oldest first; none from a provider without an event stream.
/// Control path: it allocates, and on verbs and mlx5 makes system calls.
pub fn link_events<P: Provider>(dev: &mut P) -> Result<Vec<LinkEvent>> {
    Ok(dev
        .async_events()?
        .unwrap_or_default()
        .iter()
        .map(LinkEvent::from)
        .collect())
}

impl From<&AsyncEvent> for LinkEvent {
    /// The event as the link helper sees it: the QP events by their `IBV_EVENT_*` name, a
    /// port by its number; what fails no link as [`LinkEvent::Other`].
    fn from(ev: &AsyncEvent) -> LinkEvent {
        use crate::{AsyncElement as E, AsyncEventKind as K};
        let qpn = match ev.element {
            E::Qp { qpn, .. } => qpn,
            _ => 0,
        };
        let port = match ev.element {
            E::Port(p) => p.clamp(0, 255) as u8,
            _ => 0,
        };
        match ev.kind {
            K::QpFatal => LinkEvent::QpFailed {
                qpn,
                what: "QP_FATAL",
            },
            K::QpReqErr => LinkEvent::QpFailed {
                qpn,
                what: "QP_REQ_ERR",
            },
            K::QpAccessErr => LinkEvent::QpFailed {
                qpn,
                what: "QP_ACCESS_ERR",
            },
            K::CqErr => LinkEvent::CqFailed,
            K::PortErr => LinkEvent::PortDown { port },
            K::PortActive => LinkEvent::PortUp { port },
            K::CommEst => LinkEvent::Established { qpn },
            K::DeviceFatal => LinkEvent::DeviceFatal,
            K::SqDrained => LinkEvent::Other("SQ_DRAINED"),
            K::SrqErr => LinkEvent::Other("SRQ_ERR"),
            K::SrqLimitReached => LinkEvent::Other("SRQ_LIMIT_REACHED"),
            K::QpLastWqeReached => LinkEvent::Other("QP_LAST_WQE_REACHED"),
            K::GidChange => LinkEvent::Other("GID_CHANGE"),
            K::Other(_) => LinkEvent::Other("unknown event"),
        }
    }
}

impl LinkEvent {
    /// True when the event fails the link of QP `qpn` (in state `state` now): its own
    /// `QpFailed`, a `CqFailed` that left it in ERR, a port down, a dead device. Then recover
    /// it as after an error completion, with nothing polled ([`RcLink::recover`] or
    /// [`RcLink::drain_polled`] with `&[]`).
    pub fn fails(&self, qpn: u32, state: QpState) -> bool {
        match *self {
            LinkEvent::QpFailed { qpn: q, .. } => q == qpn,
            LinkEvent::CqFailed => state == QpState::Err,
            LinkEvent::PortDown { .. } | LinkEvent::DeviceFatal => true,
            _ => false,
        }
    }
}

/// The wr_id of the recovery's marker (step 1 of the module doc); the application's own send
/// ids must not use it.
pub const MARKER_WR_ID: u64 = u64::MAX;

/// The wr_id of a liveness [`probe`]; the application's own send ids must not use it.
pub const PROBE_WR_ID: u64 = u64::MAX - 1;

/// Sends a liveness probe on `qp`: a signaled zero-length RDMA WRITE (it needs no remote
/// address or rkey and writes nothing), wr_id [`PROBE_WR_ID`], counted in `window` (its
/// completion retires it there like any other). A live peer acknowledges it; a dead one
/// lets it end in `RETRY_EXC_ERR` within `ConnectOpts::retry_budget`, and that error starts
/// a recovery like any other (the probe is never listed in [`Recovery::failed`]). Send one
/// when the link has been idle (nothing in flight) longer than the application tolerates.
/// Allocates nothing; refused as a post is (the request handed back as its error).
pub fn probe<Q: QueuePair>(
    qp: &mut Q,
    window: &mut SendWindow,
) -> core::result::Result<(), crate::PostError> {
    qp.sq()
        .post_and_ring(SendWr::write(PROBE_WR_ID, &[], 0, 0).signaled())
        .map_err(|r| r.error)?;
    window.posted(1);
    Ok(())
}

/// What a link's recovery works on besides the QP: the CQ its sends complete into and,
/// when its receives complete elsewhere, that one; its flow helpers.
pub struct LinkQueues<'a, C> {
    /// The send CQ (and the receive CQ when `recv_cq` is `None`).
    pub send_cq: &'a mut C,
    /// A separate receive CQ, if any.
    pub recv_cq: Option<&'a mut C>,
    /// The QP's sends in flight.
    pub window: &'a mut SendWindow,
    /// The receives kept posted, if the application posts any.
    pub recvs: Option<&'a mut RecvReplenisher>,
}

/// What the drain of one recovery saw.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// The first send that failed and how (`None` when the fault was not a send's: the QP
    /// moved to ERR here with nothing failing on its own).
    pub first_error: Option<(u64, WcStatus)>,
    /// Sends ended successfully during the drain (covered ones included).
    pub sends_completed: u64,
    /// Sends that did not complete successfully (the length of [`Recovery::failed`]).
    pub sends_failed: u64,
    /// Receives that completed successfully during the drain.
    pub recvs_completed: u64,
    /// Receives flushed.
    pub recvs_flushed: u64,
    /// Liveness [`probe`]s that did not complete successfully (failed or flushed; never
    /// listed in [`Recovery::failed`]), so that `sends_completed + sends_failed +
    /// probes_failed` is every send the drain ended.
    pub probes_failed: u64,
    /// Sends outstanding when the drain began (in the window: those of the `polled`
    /// completions of [`Recovery::drain_polled`] included, the marker not).
    pub sends_outstanding: u64,
    /// Receives posted when the drain began (as `sends_outstanding`).
    pub recvs_outstanding: u64,
    /// How long the drain (and with `recover` the reconnect) took.
    pub elapsed: Duration,
}

impl Report {
    /// Requests the report accounts for: completed, failed or flushed, sends and receives.
    pub fn ended(&self) -> u64 {
        self.sends_completed
            + self.sends_failed
            + self.probes_failed
            + self.recvs_completed
            + self.recvs_flushed
    }

    /// Outstanding requests the report does not account for (0 after a drain that returned
    /// `Ok`, unless a completion ended more requests than were counted outstanding).
    pub fn missing(&self) -> u64 {
        (self.sends_outstanding + self.recvs_outstanding).saturating_sub(self.ended())
    }
}

/// One line, `outstanding=N sends=S receives=R first_error=E flushed=F other=O missing=M in
/// T s`: `first_error` 1 when a send failed, `flushed` the other requests that did not
/// complete successfully, `other` those that did; `E + F + O` is every request ended.
impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = u64::from(self.first_error.is_some());
        write!(
            f,
            "outstanding={} sends={} receives={} first_error={e} flushed={} other={} missing={} \
             in {:.2} s",
            self.sends_outstanding + self.recvs_outstanding,
            self.sends_outstanding,
            self.recvs_outstanding,
            (self.sends_failed + self.probes_failed + self.recvs_flushed).saturating_sub(e),
            self.sends_completed + self.recvs_completed,
            self.missing(),
            self.elapsed.as_secs_f64()
        )
    }
}

/// The recovery helper of one link: [`Recovery::recover`] (see the module doc).
#[derive(Clone, Debug)]
pub struct Recovery {
    failed: Vec<u64>,
    stall: Duration,
}

impl Recovery {
    /// A helper for a link whose send queue holds up to `window.depth()` requests; a drain
    /// that sees no completion for `stall` is an error (a few times the retry budget).
    pub fn new(window: &SendWindow, stall: Duration) -> Recovery {
        Recovery {
            failed: Vec::with_capacity(window.depth() as usize),
            stall,
        }
    }

    /// The send window of `qp` for a link this helper recovers: the QP's send depth less the
    /// one slot the marker needs.
    pub fn send_window<Q: QueuePair>(qp: &Q) -> SendWindow {
        SendWindow::with_depth(qp.qpn(), qp.caps().max_send_wr.saturating_sub(1))
    }

    /// The wr_ids of the sends of the last recovery that did not complete successfully, in
    /// completion order: the failed one first, then the flushed ones.
    pub fn failed(&self) -> &[u64] {
        &self.failed
    }

    /// Moves `qp` to ERR, drains every outstanding request, resets the link's window and
    /// receives, reconnects through `reconnect` and posts the receives again (see the module
    /// doc). `each` sees every completion polled meanwhile.
    pub fn recover<P, C, F>(
        &mut self,
        p: &mut P,
        qp: &mut P::Qp,
        mut link: LinkQueues<'_, C>,
        each: impl FnMut(&Completion),
        reconnect: F,
    ) -> Result<Report>
    where
        P: Provider,
        C: CompletionQueue,
        F: FnOnce(&mut P, &mut P::Qp) -> Result<()>,
    {
        let t0 = Instant::now();
        let mut r = self.drain(p, qp, &mut link, each)?;
        reconnect(p, qp)?;
        if let Some(x) = link.recvs {
            x.fill(qp.rq())?;
        }
        r.elapsed = t0.elapsed();
        Ok(r)
    }

    /// Steps 1 to 4 of the module doc alone: `qp` to ERR, every outstanding request drained
    /// and accounted, the window and receives reset; no reconnect. For a link that goes on
    /// with new QPs (destroy this one after), or one the application reconnects itself.
    pub fn drain<P, C>(
        &mut self,
        p: &mut P,
        qp: &mut P::Qp,
        link: &mut LinkQueues<'_, C>,
        each: impl FnMut(&Completion),
    ) -> Result<Report>
    where
        P: Provider,
        C: CompletionQueue,
    {
        self.drain_polled(p, qp, link, &[], each)
    }

    /// [`Recovery::drain`] after the application's own poll saw the fault: `polled` are the
    /// completions of that poll it has not retired in the window (nor in the replenisher),
    /// from the error on. They are booked there and counted in the report (and in
    /// [`Recovery::failed`]) as the drain counts its own; `each` does not see them. A
    /// receive among them is told by its wr_id ([`RecvReplenisher::owns`]).
    pub fn drain_polled<P, C>(
        &mut self,
        p: &mut P,
        qp: &mut P::Qp,
        link: &mut LinkQueues<'_, C>,
        polled: &[Completion],
        mut each: impl FnMut(&Completion),
    ) -> Result<Report>
    where
        P: Provider,
        C: CompletionQueue,
    {
        let t0 = Instant::now();
        let LinkQueues {
            send_cq: send,
            recv_cq: recv,
            window,
            recvs,
        } = link;
        let qpn = qp.qpn();
        self.failed.clear();
        let mut r = Report {
            sends_outstanding: u64::from(window.in_flight()),
            recvs_outstanding: recvs.as_ref().map_or(0, |x| u64::from(x.posted())),
            ..Report::default()
        };
        // A refused doorbell's notice ends no request (its requests were never posted).
        let refused = |c: &Completion| c.flags.contains(WcFlags::REFUSED);
        for c in polled.iter().filter(|c| c.qp_num == qpn && !refused(c)) {
            let is_recv = match recvs.as_deref_mut() {
                Some(x) if x.owns(c.wr_id) => {
                    x.consumed(c);
                    true
                }
                _ => {
                    window.retire(c);
                    false
                }
            };
            self.count(&mut r, c, is_recv);
        }
        let mut marker = false;
        if qp.state() == QpState::Rts {
            let wr = SendWr::write(MARKER_WR_ID, &[], 0, 0).signaled();
            marker = qp.sq().post_and_ring(wr).is_ok();
        }
        p.to_error(qp)?;
        if !marker {
            // Already in ERR (or the post above refused): the flush marker, which the device
            // completes flushed after everything before it (step 1).
            marker = qp.sq().post_flush_marker(MARKER_WR_ID).is_ok();
        }
        let mut sends = u64::from(window.in_flight()) + u64::from(marker);
        let mut rcv = recvs.as_ref().map_or(0, |x| u64::from(x.posted()));
        let mut wc = [Completion::EMPTY; 32];
        let mut last = Instant::now();
        let mut kicked = last;
        while sends + rcv > 0 {
            p.progress();
            let mut seen = 0;
            for (cq, recv_cq) in [(Some(&mut **send), false), (recv.as_deref_mut(), true)] {
                let Some(cq) = cq else { continue };
                let n = cq.poll(&mut wc);
                seen += n;
                for c in &wc[..n] {
                    each(c);
                    if c.qp_num != qpn || refused(c) {
                        continue;
                    }
                    let is_recv = recv_cq
                        || c.opcode.is_recv()
                        || recvs.as_ref().is_some_and(|x| x.owns(c.wr_id));
                    if is_recv {
                        rcv = rcv.saturating_sub(1);
                    } else if c.wr_id == MARKER_WR_ID && marker {
                        // Not the application's; every send before it has ended (step 1).
                        r.sends_completed += sends.saturating_sub(1);
                        sends = 0;
                        continue;
                    } else {
                        sends = sends.saturating_sub(1 + u64::from(c.covered));
                    }
                    self.count(&mut r, c, is_recv);
                }
            }
            let now = Instant::now();
            if seen > 0 {
                last = now;
                continue;
            }
            if now.duration_since(last) >= self.stall {
                return Err(Error::Stalled {
                    context: "recover",
                    waited: self.stall,
                    owed: format!(
                        "{sends} sends and {rcv} receives of QP {qpn:#x} in ERR (a CQ polled \
                         elsewhere? a device that does not flush?)"
                    ),
                });
            }
            // rxe does not flush receives posted after the device failed the QP and before
            // its error completion was polled; moving the QP to ERR again does.
            if now.duration_since(kicked) >= Duration::from_secs(1) {
                kicked = now;
                p.to_error(qp)?;
            }
            std::thread::yield_now();
        }
        window.reset();
        if let Some(x) = recvs.as_deref_mut() {
            x.reset();
        }
        r.elapsed = t0.elapsed();
        Ok(r)
    }

    /// Counts how the requests `c` ends ended (steps 2 and 3 of the module doc).
    fn count(&mut self, r: &mut Report, c: &Completion, is_recv: bool) {
        let ended = 1 + u64::from(c.covered);
        if is_recv {
            if c.is_ok() {
                r.recvs_completed += 1;
            } else {
                r.recvs_flushed += 1;
            }
        } else if c.is_ok() {
            r.sends_completed += ended;
        } else {
            // The covered ones ran before the failed one (module doc, step 3); a probe is not
            // the application's, so it is not listed.
            r.sends_completed += ended - 1;
            r.first_error.get_or_insert((c.wr_id, c.status));
            if c.wr_id == PROBE_WR_ID {
                r.probes_failed += 1;
            } else {
                r.sends_failed += 1;
                if self.failed.len() < self.failed.capacity() {
                    self.failed.push(c.wr_id);
                }
            }
        }
    }
}

/// One RC link in the common shape (module doc): its QP and CQ, window, receives and
/// recovery, all public for the application's own posts and polls.
pub struct RcLink<P: Provider> {
    /// The RC QP.
    pub qp: P::Qp,
    /// The CQ its sends and receives complete on (no other QP's).
    pub cq: P::Cq,
    /// Its sends in flight ([`Recovery::send_window`]).
    pub window: SendWindow,
    /// Its receives kept posted, wr_ids from the id base given to [`RcLink::new`].
    pub recvs: RecvReplenisher,
    /// Its recovery.
    pub rec: Recovery,
}

impl<P: Provider> RcLink<P> {
    /// A new RC QP on a new CQ in `pd`: room for `sends` requests in flight (plus the
    /// marker's slot) and `recvs` receives without SGEs (WRITE WITH IMMEDIATE, SEND WITH
    /// IMMEDIATE of no payload; at least one), with wr_ids from `recv_id_base` (above every
    /// send id); a drain stalls after `stall` without a completion. The receives are posted
    /// once the QP is connected: `link.recvs.fill(link.qp.rq())`.
    pub fn new(
        p: &mut P,
        pd: &P::Pd,
        sends: u32,
        recvs: u32,
        recv_id_base: u64,
        stall: Duration,
    ) -> Result<Self> {
        let mut c = QpConfig::new(QpType::Rc);
        (c.caps.max_send_wr, c.caps.max_recv_wr) = (sends.saturating_add(1), recvs.max(1));
        let mut cq = p.create_cq(c.caps.max_send_wr.saturating_add(c.caps.max_recv_wr))?;
        let qp = p.create_qp(pd, &mut cq, None, None, &c)?;
        let window = Recovery::send_window(&qp);
        Ok(RcLink {
            rec: Recovery::new(&window, stall),
            recvs: RecvReplenisher::new(recvs.max(1)).with_id_base(recv_id_base),
            qp,
            cq,
            window,
        })
    }

    /// True when `ev` (from [`link_events`] or [`LinkEvent::from`]) fails this link
    /// ([`LinkEvent::fails`]).
    pub fn failed_by(&self, ev: &LinkEvent) -> bool {
        ev.fails(self.qp.qpn(), self.qp.state())
    }

    /// Books a successful completion the application polled: a receive's slot to post again
    /// (told by its wr_id), or the sends it retires. True for a receive. A failed one goes
    /// to [`RcLink::drain_polled`] instead.
    pub fn take(&mut self, c: &Completion) -> bool {
        let recv = self.recvs.owns(c.wr_id);
        if recv {
            self.recvs.consumed(c);
        } else {
            self.window.retire(c);
        }
        recv
    }

    /// [`Recovery::drain_polled`] on this link: `polled` the completions of the poll that saw
    /// the fault, from the error on (empty when the fault came from elsewhere). The QP is
    /// left in ERR with nothing outstanding, the window and receives reset.
    ///
    /// `delivered` sees every **successful** completion the drain polls, in poll order, once:
    /// an acknowledgement (a receive, a WRITE WITH IMMEDIATE) or a send's completion that
    /// arrived after the application's last poll is the application's as if it had polled
    /// it (the drain has booked it already: do not [`RcLink::take`] it). The drain's marker
    /// is not handed on, nor are the `polled` ones (the application has them) or failed and
    /// flushed ones (the [`Report`] and [`Recovery::failed`] account for those).
    pub fn drain_polled(
        &mut self,
        p: &mut P,
        polled: &[Completion],
        mut delivered: impl FnMut(&Completion),
    ) -> Result<Report> {
        let mut q = LinkQueues {
            send_cq: &mut self.cq,
            recv_cq: None,
            window: &mut self.window,
            recvs: Some(&mut self.recvs),
        };
        let qpn = self.qp.qpn();
        self.rec.drain_polled(p, &mut self.qp, &mut q, polled, |c| {
            if c.is_ok() && c.qp_num == qpn && c.wr_id != MARKER_WR_ID {
                delivered(c);
            }
        })
    }

    /// A fault on this link recovered on the **same QP**: [`RcLink::drain_polled`] (its
    /// `delivered` as there), then
    /// `reconnect(p, qp)` (the endpoint exchange with the peer, then [`Provider::connect`],
    /// which takes the QP from ERR through RESET → INIT → RTR → RTS towards the peer's new
    /// endpoint: a restarted peer's new QP, or the old one reconnected), then the receives
    /// posted again. The link keeps its QPN, CQ and helpers; the report's `elapsed` covers
    /// the drain and the reconnect. A failed reconnect leaves the QP in whatever state it
    /// reached (ERR or RESET on the way) with nothing outstanding: call `recover` again with
    /// `polled` empty, or go on with a new link ([`RcLink::drain_polled`] and a new
    /// `RcLink`, the other way the module doc names).
    pub fn recover<F>(
        &mut self,
        p: &mut P,
        polled: &[Completion],
        delivered: impl FnMut(&Completion),
        reconnect: F,
    ) -> Result<Report>
    where
        F: FnOnce(&mut P, &mut P::Qp) -> Result<()>,
    {
        let t0 = Instant::now();
        let mut r = self.drain_polled(p, polled, delivered)?;
        reconnect(p, &mut self.qp)?;
        self.recvs.fill(self.qp.rq())?;
        r.elapsed = t0.elapsed();
        Ok(r)
    }
}
