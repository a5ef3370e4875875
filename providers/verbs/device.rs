//! The device: the [`Provider`] impl (PD, MR, CQ, SRQ and QP creation with their
//! preallocated staging, connect, address handles) and asynchronous events.

use std::sync::Arc;

use super::cq::VerbsCq;
use super::qp::VerbsQp;
use super::rq::{RecvTarget, VerbsRecv, VerbsSrq};
use super::shared::{commit_qp, CqBudget, CqCommits, SharedState, SqRing};
use super::sq::VerbsSq;
use crate::error::{Error, Result};
use crate::ffi::{ibv_send_wr, ibv_sge};
use crate::types::{Access, ConnectOpts, QpCaps, QpConfig, QpState, QpType};
use crate::{Provider, ProviderKind, QpEndpoint, QueuePair, RecvQueue, SendQueue};
use rdma_direct_core::control::{self, AsyncEvent, Context};
use std::sync::Weak;

/// The refusal of [`Provider::create_cq_ts`] on this provider: a plain `ibv_create_cq` CQ
/// carries no timestamps, and rxe refuses `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`
/// (EOPNOTSUPP).
pub fn no_completion_timestamps() -> crate::Error {
    crate::Error::Unsupported {
        what: "rxe/verbs: no completion timestamps (EOPNOTSUPP); create the CQ with create_cq \
               (no timestamps) instead"
            .into(),
    }
}

/// A verbs device opened for the data plane.
pub struct VerbsDevice {
    pub(super) ctx: Context,
    /// `IBV_EVENT_CQ_ERR` events seen by [`VerbsDevice::check_async`].
    pub(super) cq_errors: u32,
    /// What async events are applied to (control path only).
    pub(super) objects: Objects,
}

/// The CQs and QPs of a device by their `ibv_cq *` / `ibv_qp *` address (what an async
/// event names), held weakly: an event about an object already dropped is ignored.
#[derive(Default)]
pub(super) struct Objects {
    /// (address, kernel handle, budget).
    cqs: Vec<(usize, u32, Weak<CqBudget>)>,
    qps: Vec<(usize, Weak<SharedState>)>,
}

impl Objects {
    pub(super) fn add_cq(&mut self, ptr: usize, handle: u32, b: &Arc<CqBudget>) {
        self.cqs.retain(|c| c.2.strong_count() > 0);
        self.cqs.push((ptr, handle, Arc::downgrade(b)));
    }
    pub(super) fn add_qp(&mut self, ptr: usize, st: &Arc<SharedState>) {
        self.qps.retain(|q| q.1.strong_count() > 0);
        self.qps.push((ptr, Arc::downgrade(st)));
    }
    /// Apply one event: a CQ in error fails it and its QPs; a QP fatal, request or access
    /// error puts the QP in ERR (posts refused, `state()` ERR). Returns whether it applied to
    /// a live object of ours.
    pub(super) fn apply(&self, ev: &AsyncEvent) -> bool {
        use control::{AsyncElement, AsyncEventKind as K};
        match (ev.kind, ev.element) {
            (K::CqErr, AsyncElement::Cq(p)) => {
                self.cqs
                    .iter()
                    .filter(|c| c.0 == p)
                    .filter_map(|c| c.2.upgrade().map(|b| (c.1, b)))
                    .map(|(h, b)| b.fail(h))
                    .count()
                    > 0
            }
            (K::QpFatal | K::QpReqErr | K::QpAccessErr, AsyncElement::Qp { ptr, .. }) => {
                self.qps
                    .iter()
                    .filter(|q| q.0 == ptr)
                    .filter_map(|q| q.1.upgrade())
                    .map(|st| st.set(QpState::Err))
                    .count()
                    > 0
            }
            _ => false,
        }
    }
}

impl VerbsDevice {
    /// Open the verbs device `name` (`rxe0`, `mlx5_0`, ...).
    pub fn open(name: &str) -> Result<VerbsDevice> {
        let ctx = Context::open(name)?;
        Ok(VerbsDevice {
            ctx,
            cq_errors: 0,
            objects: Objects::default(),
        })
    }

    /// The control-path context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }

    /// Read pending asynchronous events without blocking (a system call each: control path
    /// only) and apply them: `IBV_EVENT_CQ_ERR` (a CQ overrun or a device fault: completions
    /// were lost) fails the CQ and every QP on it — their posts are refused with
    /// `PostError::CqError` naming the CQ, `state()` says ERR, a reconnect is refused, and
    /// the CQ's `poll` reports it once as a completion flagged `WcFlags::CQ_ERROR` after what
    /// it still holds; it is also counted in [`VerbsDevice::cq_errors`]. `QP_FATAL`,
    /// `QP_REQ_ERR` and `QP_ACCESS_ERR` put the QP in ERR (posts refused with `BadState`).
    /// Returns the events.
    pub fn check_async(&mut self) -> Result<Vec<AsyncEvent>> {
        let mut v = Vec::new();
        while let Some(ev) = self.next_async()? {
            v.push(ev);
        }
        Ok(v)
    }

    /// One pending event, read and applied as `check_async` says.
    fn next_async(&mut self) -> Result<Option<AsyncEvent>> {
        let Some(ev) = self.ctx.poll_async_event()? else {
            return Ok(None);
        };
        if ev.kind == control::AsyncEventKind::CqErr {
            self.cq_errors += 1;
        }
        self.objects.apply(&ev);
        Ok(Some(ev))
    }

    /// CQ overruns seen so far by [`VerbsDevice::check_async`].
    pub fn cq_errors(&self) -> u32 {
        self.cq_errors
    }
}

impl Provider for VerbsDevice {
    type Pd = control::Pd;
    type Mr = control::Mr;
    type Cq = VerbsCq;
    type Srq = VerbsSrq;
    type Qp = VerbsQp;
    type Ah = control::Ah;
    type Pair = crate::SideBySide<VerbsQp, VerbsCq>;

    fn kind(&self) -> ProviderKind {
        ProviderKind::Verbs
    }

    fn create_cq_ts(&mut self, _cqe: u32) -> crate::Result<VerbsCq> {
        Err(no_completion_timestamps())
    }

    fn device_name(&self) -> &str {
        self.ctx.name()
    }

    fn alloc_pd(&mut self) -> Result<control::Pd> {
        control::Pd::new(&self.ctx)
    }

    unsafe fn reg_mr(
        &mut self,
        pd: &control::Pd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<control::Mr> {
        // SAFETY: forwarded: the caller keeps the memory mapped until the MR is dropped.
        unsafe { control::Mr::register(pd, addr, len, access) }
    }

    fn create_cq(&mut self, cqe: u32) -> Result<VerbsCq> {
        let cq = control::Cq::new(&self.ctx, cqe)?;
        let raw = cq.as_ptr();
        // Our budget is what was asked: the device may grant more, never less.
        let budget = Arc::new(CqBudget::new(cqe));
        // SAFETY: `raw` is the live CQ `cq` owns; `handle` is plain data set at creation.
        let handle = unsafe { (*raw).handle };
        self.objects.add_cq(raw as usize, handle, &budget);
        Ok(VerbsCq {
            cq,
            raw,
            budget,
            routes: Vec::new(),
            error_reported: false,
        })
    }

    fn create_srq(&mut self, pd: &control::Pd, max_wr: u32, max_sge: u32) -> Result<VerbsSrq> {
        let srq = control::Srq::new(pd, max_wr, max_sge)?;
        let q = VerbsRecv::new(
            RecvTarget::Srq(srq.as_ptr()),
            QpType::Rc,
            max_wr.min(srq.max_wr()),
            max_sge.min(srq.max_sge()),
        );
        Ok(VerbsSrq {
            q,
            srq,
            commits: Default::default(),
        })
    }

    fn create_qp(
        &mut self,
        pd: &control::Pd,
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
        // The CQ-room rule (`providers/cq_room.rs`), checked before the device sees the QP,
        // on the limits this provider will enforce (the requested ones).
        let recv_wr = if srq.is_some() {
            0
        } else {
            cfg.caps.max_recv_wr
        };
        let cq_need = commit_qp(
            &send_cq.budget,
            recv_cq.as_ref().map(|c| &*c.budget),
            cfg.caps.max_send_wr,
            recv_wr,
        )?;
        let mut cq_commits = CqCommits {
            send: send_cq.budget.clone(),
            recv: recv_cq
                .as_ref()
                .map_or(&send_cq.budget, |c| &c.budget)
                .clone(),
            need: cq_need,
            srq: None,
        };
        if let Some(s) = &srq {
            let role = if recv_cq.is_some() {
                "receive CQ"
            } else {
                "CQ"
            };
            cq_commits.commit_srq(&s.commits, s.q.ring.cap(), role)?;
        }
        let qp = {
            let rcq = recv_cq.as_ref().map_or(&send_cq.cq, |c| &c.cq);
            control::Qp::new(pd, &send_cq.cq, rcq, srq.as_ref().map(|s| &s.srq), cfg)?
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
        let sq_gen = super::shared::next_gen();
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
            gen_bits: u64::from(sq_gen) << super::SEND_GEN_SHIFT,
            wrs: (0..cap).map(|_| ibv_send_wr::zeroed()).collect(),
            sges: vec![ibv_sge::default(); (cap * sge) as usize].into_boxed_slice(),
            inline: vec![0u8; (cap * caps.max_inline_data) as usize].into_boxed_slice(),
            staged: 0,
            signal_every: 0,
            since_signal: 0,
        };
        let (mut rq, rq_ring, charged, rq_gen) = match srq {
            Some(s) => (
                VerbsRecv::new(RecvTarget::None, cfg.qp_type, 0, 0),
                s.q.ring.clone(),
                false,
                s.q.gen,
            ),
            None => {
                let r = VerbsRecv::new(
                    RecvTarget::Qp(raw),
                    cfg.qp_type,
                    caps.max_recv_wr,
                    caps.max_recv_sge,
                );
                let (ring, gen) = (r.ring.clone(), r.gen);
                (r, ring, true, gen)
            }
        };
        rq.state = state.clone();
        self.objects.add_qp(raw as usize, &state);
        send_cq.budget.add_qp(&state);
        if let Some(r) = &recv_cq {
            r.budget.add_qp(&state);
        }
        let cqs = [
            Some(send_cq.budget.clone()),
            recv_cq.as_ref().map(|r| r.budget.clone()),
        ];
        let qpn = qp.qpn();
        match recv_cq {
            Some(rcq) => {
                if charged {
                    rq.budget = Some(rcq.budget.clone());
                }
                let r = rcq.route_mut(qpn, sq_gen, rq_gen);
                r.rq = Some(rq_ring);
                r.rq_charged = charged;
                r.state = Some(state.clone());
                let r = send_cq.route_mut(qpn, sq_gen, rq_gen);
                r.sq = Some(ring);
                r.state = Some(state);
            }
            None => {
                if charged {
                    rq.budget = Some(send_cq.budget.clone());
                }
                let r = send_cq.route_mut(qpn, sq_gen, rq_gen);
                r.sq = Some(ring);
                r.rq = Some(rq_ring);
                r.rq_charged = charged;
                r.state = Some(state);
            }
        }
        Ok(VerbsQp {
            sq,
            rq,
            qp: std::mem::ManuallyDrop::new(qp),
            caps,
            _cq_commits: cq_commits,
            cqs,
        })
    }

    fn own_pair(
        &mut self,
        qp: VerbsQp,
        cq: VerbsCq,
    ) -> Result<crate::SideBySide<VerbsQp, VerbsCq>> {
        Ok(crate::SideBySide::new(qp, cq))
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
        if let Some(h) = qp.sq.state.cq_error() {
            return Err(Error::InvalidArgument {
                context: "connect",
                detail: format!(
                    "QP {:#x}: its CQ (handle {h}) went into error (IBV_EVENT_CQ_ERR: \
                     completions were lost); a reset does not revive it: destroy the QP and \
                     the CQ and create new ones",
                    qp.qpn()
                ),
            });
        }
        // A reconnect goes through RESET. rxe does not take a QP's completions out of its CQ
        // at a reset, so a reset with requests outstanding could leave their CQEs to be
        // polled as the new connection's: refused until each has ended (in ERR every
        // outstanding request is flushed, so a drain gets there).
        let now = qp.qp.query_state().unwrap_or(QpState::Err);
        if now != QpState::Reset {
            let (sends, recvs) = (qp.sq.outstanding(), qp.rq.own_outstanding());
            if sends + recvs > 0 {
                return Err(Error::InvalidArgument {
                    context: "connect",
                    detail: format!(
                        "QP {:#x} is in {now} with {sends} sends and {recvs} receives \
                         outstanding; a reconnect resets it, and their completions may still \
                         reach the CQ: move it to ERR (to_error), poll until each has completed \
                         or flushed, then connect (or drop it and create a new QP)",
                        qp.qpn()
                    ),
                });
            }
            qp.qp.to_reset()?;
            qp.set_state(QpState::Reset);
        }
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
    /// staged sends just after it (rxe flushes those without running them). On a QP the
    /// device already failed it is a transition all the same (ERR to ERR), which runs rxe's
    /// flush again: receives posted after the device failed the QP, before its error
    /// completion was polled (which rxe 6.1 leaves unflushed), are flushed then.
    fn to_error(&mut self, qp: &mut VerbsQp) -> Result<()> {
        qp.rq.ring();
        qp.qp.to_err()?;
        qp.set_state(QpState::Err);
        qp.sq.ring();
        Ok(())
    }

    fn create_ah(
        &mut self,
        pd: &control::Pd,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> Result<control::Ah> {
        control::Ah::new(pd, remote, opts.port, opts.gid_index, opts.sl)
    }

    fn async_events(&mut self) -> Result<Option<Vec<control::AsyncEvent>>> {
        self.check_async().map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PostError;
    use control::{AsyncElement, AsyncEventKind};

    /// What `check_async` does with the events, without a device: a CQ error fails the CQ
    /// and every QP on it for good; a QP fatal fails that QP; an event about something else
    /// (or something dropped) changes nothing.
    #[test]
    fn async_events_fail_what_they_name() {
        let mut o = Objects::default();
        let (cq, other_cq) = (Arc::new(CqBudget::new(8)), Arc::new(CqBudget::new(8)));
        o.add_cq(0x1000, 7, &cq);
        o.add_cq(0x2000, 9, &other_cq);
        let (a, b, c) = (
            Arc::new(SharedState::new()),
            Arc::new(SharedState::new()),
            Arc::new(SharedState::new()),
        );
        for (ptr, st) in [(0xa0, &a), (0xb0, &b), (0xc0, &c)] {
            st.set(QpState::Rts);
            o.add_qp(ptr, st);
        }
        cq.add_qp(&a);
        cq.add_qp(&b);
        other_cq.add_qp(&c);
        let ev = |kind, element| AsyncEvent { kind, element };

        assert!(!o.apply(&ev(AsyncEventKind::CqErr, AsyncElement::Cq(0x3000))));
        assert!(o.apply(&ev(AsyncEventKind::CqErr, AsyncElement::Cq(0x1000))));
        assert_eq!(cq.error(), Some(7));
        assert_eq!(other_cq.error(), None);
        for st in [&a, &b] {
            assert_eq!(st.get(), QpState::Err);
            assert!(matches!(st.refusal(), PostError::CqError { cqn: 7 }));
            // A reset (the control path setting the state) does not revive it.
            st.set(QpState::Rts);
            assert_eq!(st.get(), QpState::Err);
        }
        assert_eq!(c.get(), QpState::Rts);
        // A QP created on a CQ already in error is failed at once.
        let d = Arc::new(SharedState::new());
        cq.add_qp(&d);
        assert!(matches!(d.refusal(), PostError::CqError { cqn: 7 }));

        let qp_ev = |ptr| ev(AsyncEventKind::QpFatal, AsyncElement::Qp { ptr, qpn: 0x11 });
        assert!(o.apply(&qp_ev(0xc0)));
        assert_eq!(c.get(), QpState::Err);
        assert!(matches!(
            c.refusal(),
            PostError::BadState {
                state: QpState::Err
            }
        ));
        // Not a CQ error: the next connect may bring it back.
        c.set(QpState::Rts);
        assert_eq!(c.get(), QpState::Rts);
        // Dropped objects are not reached.
        drop(c);
        assert!(!o.apply(&qp_ev(0xc0)));
        assert!(!o.apply(&ev(AsyncEventKind::PortErr, AsyncElement::Port(1))));
    }
}
