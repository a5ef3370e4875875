//! The completion queue: `ibv_poll_cq` into an on-stack batch, converted in place, retiring
//! what each completion covers in the rings of the QP it belongs to.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::{CqBudget, Route};
use super::sq::SEQ_MASK;
use super::{GEN_MASK, POLL_BATCH, RECV_GEN_SHIFT, RECV_TAG, SEND_GEN_SHIFT};
use crate::ffi::{self, ibv_wc};
use crate::types::{Completion, QpState, WcFlags, WcOpcode, WcStatus};
use crate::CompletionQueue;
use rdma_direct_core::control;

/// A completion queue of the verbs provider.
pub struct VerbsCq {
    pub(super) cq: control::Cq,
    pub(super) raw: *mut ffi::ibv_cq,
    pub(super) budget: Arc<CqBudget>,
    /// One entry per QP completing here (a handful; searched linearly, newest QP first on a
    /// reused QPN).
    pub(super) routes: Vec<Route>,
    /// The CQ error (see `VerbsDevice::check_async`) has been reported by `poll`.
    pub(super) error_reported: bool,
}

// SAFETY: `raw` is the `ibv_cq *` owned by `cq` (kept alive with it); verbs CQs may be
// polled from any thread, and `&mut self` on `poll` keeps one poller at a time.
unsafe impl Send for VerbsCq {}

impl VerbsCq {
    /// The control-path CQ.
    pub fn inner(&self) -> &control::Cq {
        &self.cq
    }

    /// Entries currently spoken for (outstanding sends and own-RQ receives).
    pub fn reserved(&self) -> u32 {
        self.budget.used.load(Ordering::Acquire)
    }

    /// The CQ in error, reported once as a completion flagged `WcFlags::CQ_ERROR`
    /// (`vendor_err` the CQ's kernel handle).
    #[cold]
    #[inline(never)]
    fn report_error(&mut self, out: &mut [Completion]) -> usize {
        if self.error_reported {
            return 0;
        }
        self.error_reported = true;
        out[0] = Completion {
            status: WcStatus::GeneralErr,
            flags: WcFlags::CQ_ERROR,
            vendor_err: self.budget.error().unwrap_or(0),
            ..Completion::EMPTY
        };
        1
    }

    /// A doorbell refused on a bare `ring` of a queue completing here, not reported by a call
    /// on the queue yet, reported as one completion flagged `WcFlags::REFUSED` (taken: the
    /// queue's next call does not report it again).
    #[cold]
    #[inline(never)]
    fn report_refusal(&mut self, out: &mut [Completion]) -> usize {
        for r in &self.routes {
            let sq =
                r.sq.as_ref()
                    .and_then(|q| q.refusal.take(Some(&self.budget)));
            let rq = match &r.rq {
                Some(q) if r.rq_charged && sq.is_none() => q.refusal.take(Some(&self.budget)),
                _ => None,
            };
            if let Some(e) = sq.or(rq) {
                out[0] = Completion {
                    wr_id: e.first_wr_id,
                    byte_len: e.count,
                    qp_num: r.qpn,
                    opcode: match e.verb {
                        crate::types::RingVerb::PostSend => WcOpcode::Send,
                        crate::types::RingVerb::PostRecv => WcOpcode::Recv,
                    },
                    status: WcStatus::GeneralErr,
                    vendor_err: e.errno as u32,
                    flags: WcFlags::REFUSED,
                    ..Completion::EMPTY
                };
                return 1;
            }
        }
        0
    }

    /// True once the device reported this CQ in error (read by
    /// `VerbsDevice::check_async`): nothing more completes on it.
    pub fn in_error(&self) -> bool {
        self.budget.error().is_some()
    }

    /// The CQ polled empty after QPs on it were destroyed: none of their completions is left,
    /// so what their rings still hold never completes; its CQ entries are given back and the
    /// routes forgotten. Control-path cost, only after a drop.
    #[cold]
    #[inline(never)]
    pub(super) fn sweep_dropped(&mut self) {
        let budget = self.budget.clone();
        self.routes.retain(|r| {
            if r.sweepable {
                release_route(&budget, r);
            }
            !r.sweepable
        });
    }

    /// Before a poll: the routes of QPs already destroyed (their last completions, if any,
    /// are in the CQ now).
    #[cold]
    #[inline(never)]
    fn mark_destroyed(&mut self) {
        for r in &mut self.routes {
            r.sweepable = r
                .state
                .as_ref()
                .is_some_and(|s| s.destroyed.load(Ordering::Acquire));
        }
    }

    /// The route of a new QP (`qpn`, its generations). A route of the same QPN stays while
    /// its QP is dropped and not yet swept (its completions may still be in the CQ; the
    /// generations tell them apart); a live one is replaced.
    pub(super) fn route_mut(&mut self, qpn: u32, sq_gen: u32, rq_gen: u32) -> &mut Route {
        let fresh = Route {
            qpn,
            sq_gen,
            rq_gen,
            sq: None,
            rq: None,
            rq_charged: false,
            state: None,
            sweepable: false,
        };
        let live = |r: &Route| {
            r.qpn == qpn
                && !r
                    .state
                    .as_ref()
                    .is_some_and(|s| s.dropped.load(Ordering::Acquire))
        };
        if let Some(i) = self.routes.iter().position(live) {
            self.routes[i] = fresh;
            return &mut self.routes[i];
        }
        self.routes.push(fresh);
        let last = self.routes.len() - 1;
        &mut self.routes[last]
    }
}

/// Give back the CQ entries still reserved by a dropped QP's route (once: its rings are
/// emptied) and count the drop as swept.
fn release_route(budget: &CqBudget, r: &Route) {
    if !r
        .state
        .as_ref()
        .is_some_and(|s| s.dropped.load(Ordering::Acquire))
    {
        return;
    }
    if let Some(sq) = &r.sq {
        // A refusal of the destroyed QP nobody reported: no call on it can any more.
        let _ = sq.refusal.take(Some(budget));
        let end = sq.end.load(Ordering::Acquire);
        let old = sq.retired.swap(end, Ordering::AcqRel);
        budget.release(end.saturating_sub(old) as u32);
    }
    if let Some(rq) = &r.rq {
        if r.rq_charged {
            let _ = rq.refusal.take(Some(budget));
            for i in 0..rq.cap() as usize {
                if rq.take(i).is_some() {
                    budget.release(1);
                }
            }
        }
    }
    let _ = budget
        .dropped
        .fetch_update(Ordering::AcqRel, Ordering::Acquire, |d| d.checked_sub(1));
}

/// Convert one `ibv_wc` and retire what it completes in the rings of `routes`, releasing
/// the CQ entries it accounted for in `budget`. Returns false for a completion of a QP
/// already dropped: retired and released like any other, but not to be returned.
#[inline]
pub(super) fn convert(
    routes: &[Route],
    budget: &CqBudget,
    wc: &ibv_wc,
    out: &mut Completion,
) -> bool {
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
    // By QPN and generation (newest first: an SRQ's receives carry the SRQ's generation).
    let recv = wc.wr_id & RECV_TAG != 0;
    let gen = if recv {
        (wc.wr_id >> RECV_GEN_SHIFT) & GEN_MASK
    } else {
        (wc.wr_id >> SEND_GEN_SHIFT) & GEN_MASK
    } as u32;
    let Some(route) = routes
        .iter()
        .rev()
        .find(|r| r.qpn == wc.qp_num && gen == if recv { r.rq_gen } else { r.sq_gen })
    else {
        return true; // not one of ours: passed through unchanged
    };
    if wc.status != ffi::IBV_WC_SUCCESS {
        if let Some(st) = &route.state {
            st.set(QpState::Err);
        }
    }
    if recv {
        // An error completion's opcode is not the device's to tell (rxe says SEND): the tag
        // says a receive, and so does the completion (see `Completion::opcode`).
        if wc.status != ffi::IBV_WC_SUCCESS {
            out.opcode = WcOpcode::Recv;
        }
        if let Some(rq) = &route.rq {
            let slot = wc.wr_id as u32 as usize;
            if let Some(w) = rq.take(slot) {
                out.wr_id = w;
                if route.rq_charged {
                    budget.release(1);
                }
            }
        }
    } else if let Some(sq) = &route.sq {
        let oldest = sq.retired.load(Ordering::Acquire);
        // The full sequence from its low bits: at or after the oldest outstanding one.
        let seq = oldest + (wc.wr_id.wrapping_sub(oldest) & SEQ_MASK);
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
    !route
        .state
        .as_ref()
        .is_some_and(|s| s.dropped.load(Ordering::Acquire))
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
        // Read before the poll: a QP dropped (destroyed) before it, whose completions an empty
        // poll has then all taken out.
        let dropped = self.budget.dropped.load(Ordering::Acquire) != 0;
        if dropped {
            self.mark_destroyed();
        }
        // SAFETY: `raw` is the live CQ owned by `self.cq`; `wcs` has room for `want` entries
        // (`MaybeUninit<ibv_wc>` has the layout of `ibv_wc`).
        let n =
            unsafe { ffi::ops::poll_cq(self.raw, want as libc::c_int, wcs.as_mut_ptr().cast()) };
        if n <= 0 {
            if dropped {
                self.sweep_dropped();
            }
            // Nothing in the CQ: where a refused doorbell no call reported shows, and the
            // one place a CQ in error is reported (once).
            if self.budget.refusals.load(Ordering::Relaxed) != 0 {
                return self.report_refusal(out);
            }
            if self.budget.error.load(Ordering::Relaxed) != 0 {
                return self.report_error(out);
            }
            return 0;
        }
        let n = (n as usize).min(want);
        let mut kept = 0;
        for wc in &wcs[..n] {
            // SAFETY: `ibv_poll_cq` returned `n`: it wrote entries 0..n.
            let wc = unsafe { wc.assume_init_ref() };
            if convert(&self.routes, &self.budget, wc, &mut out[kept]) {
                kept += 1;
            }
        }
        // The CQ was emptied: what the destroyed QPs still hold never completes (after
        // their last completions were taken above).
        if dropped && n < want {
            self.sweep_dropped();
        }
        kept
    }

    fn cqe(&self) -> u32 {
        self.budget.cqe
    }
}

#[cfg(test)]
mod tests {
    use super::super::shared::{RecvRing, SharedState, SqRing};
    use super::*;
    use crate::types::WcOpcode;

    fn budget(cqe: u32) -> CqBudget {
        CqBudget::new(cqe)
    }

    /// The coverage arithmetic of `convert`, without a device.
    #[test]
    fn send_completion_covers_the_unsignaled_before_it() {
        let budget = budget(8);
        let ring = Arc::new(SqRing::new(4));
        let routes = [Route {
            qpn: 0x11,
            sq_gen: 0,
            rq_gen: 0,
            sq: Some(ring.clone()),
            rq: None,
            rq_charged: false,
            state: None,
            sweepable: false,
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
        assert!(convert(&routes, &budget, &wc, &mut c));
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
            sq_gen: 0,
            rq_gen: 0,
            sq: None,
            rq: Some(rq.clone()),
            rq_charged: true,
            state: Some(Arc::new(SharedState::new())),
            sweepable: false,
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
        // A receive's, said so (rxe's opcode 0 is SEND): see `Completion::opcode`.
        assert_eq!(c.opcode, WcOpcode::Recv);
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

    /// A dropped QP's completions still in the CQ are retired and give their entries back
    /// but are not returned; what never completes is given back when the route is swept
    /// (the CQ polled empty after the destroy), once.
    #[test]
    fn a_dropped_qp_is_discarded_and_its_entries_given_back() {
        let budget = budget(16);
        let (sq, rq) = (Arc::new(SqRing::new(8)), Arc::new(RecvRing::new(4)));
        let st = Arc::new(SharedState::new());
        let mut route = Route {
            qpn: 9,
            sq_gen: 0,
            rq_gen: 0,
            sq: Some(sq.clone()),
            rq: Some(rq.clone()),
            rq_charged: true,
            state: Some(st.clone()),
            sweepable: false,
        };
        // 5 sends and 3 receives outstanding.
        assert!(budget.reserve(8));
        for i in 0..3 {
            rq.busy[i].store(true, Ordering::Relaxed);
        }
        rq.outstanding.store(3, Ordering::Relaxed);
        // The QP is dropped with next_seq 5.
        sq.end.store(5, Ordering::Relaxed);
        st.dropped.store(true, Ordering::Relaxed);
        st.destroyed.store(true, Ordering::Relaxed);
        budget.dropped.store(1, Ordering::Relaxed);
        let mut c = Completion::EMPTY;
        // A flushed send (seq 1, covering 0) and a flushed receive: not returned.
        let send = ibv_wc {
            wr_id: 1,
            status: 5,
            qp_num: 9,
            ..Default::default()
        };
        assert!(!convert(
            std::slice::from_ref(&route),
            &budget,
            &send,
            &mut c
        ));
        let recv = ibv_wc {
            wr_id: RECV_TAG | 1,
            status: 5,
            qp_num: 9,
            ..Default::default()
        };
        assert!(!convert(
            std::slice::from_ref(&route),
            &budget,
            &recv,
            &mut c
        ));
        assert_eq!(budget.used.load(Ordering::Relaxed), 5);
        // Swept: 3 sends and 2 receives never complete; their entries come back, once.
        route.sweepable = true;
        release_route(&budget, &route);
        assert_eq!(budget.used.load(Ordering::Relaxed), 0);
        assert_eq!(budget.dropped.load(Ordering::Relaxed), 0);
        assert_eq!(sq.retired.load(Ordering::Relaxed), 5);
        assert_eq!(rq.outstanding.load(Ordering::Relaxed), 0);
        assert!(budget.reserve(16));
        release_route(&budget, &route);
        assert_eq!(budget.used.load(Ordering::Relaxed), 16);
        // A new QP with the same QPN (rxe reuses them at once), another generation: its
        // completions are its own, the old QP's are still discarded.
        let (sq2, st2) = (Arc::new(SqRing::new(8)), Arc::new(SharedState::new()));
        sq2.slot(0).store(0xabc, Ordering::Relaxed);
        let routes = [
            Route {
                sweepable: false,
                ..route
            },
            Route {
                qpn: 9,
                sq_gen: 5,
                rq_gen: 6,
                sq: Some(sq2.clone()),
                rq: None,
                rq_charged: false,
                state: Some(st2),
                sweepable: false,
            },
        ];
        let new = ibv_wc {
            wr_id: 5 << SEND_GEN_SHIFT,
            qp_num: 9,
            ..Default::default()
        };
        budget.release(16);
        assert!(budget.reserve(1));
        assert!(convert(&routes, &budget, &new, &mut c));
        assert_eq!((c.wr_id, sq2.retired.load(Ordering::Relaxed)), (0xabc, 1));
        assert!(!convert(&routes, &budget, &send, &mut c));
        assert_eq!(budget.used.load(Ordering::Relaxed), 0);
        let route = &routes[0];
        // Another QP's completion on the same CQ is returned as before.
        let other = ibv_wc {
            wr_id: 3,
            qp_num: 10,
            ..Default::default()
        };
        assert!(convert(
            std::slice::from_ref(route),
            &budget,
            &other,
            &mut c
        ));
        assert_eq!(c.wr_id, 3);
    }
}
