//! The completion queue: `ibv_poll_cq` into an on-stack batch, converted in place, retiring
//! what each completion covers in the rings of the QP it belongs to.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::shared::{CqBudget, Route};
use super::{POLL_BATCH, RECV_TAG};
use crate::ffi::{self, ibv_wc};
use crate::types::{Completion, QpState, WcFlags, WcOpcode, WcStatus};
use crate::CompletionQueue;
use rdma_direct_core::verbs;

/// A completion queue of the verbs provider.
pub struct VerbsCq {
    pub(super) cq: verbs::Cq,
    pub(super) raw: *mut ffi::ibv_cq,
    pub(super) budget: Arc<CqBudget>,
    /// One entry per QP completing here (a handful; searched linearly, newest QP first on a
    /// reused QPN).
    pub(super) routes: Vec<Route>,
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

    pub(super) fn route_mut(&mut self, qpn: u32) -> &mut Route {
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
pub(super) fn convert(routes: &[Route], budget: &CqBudget, wc: &ibv_wc, out: &mut Completion) {
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
