//! The queue pair: an [`Mlx5Sq`] and an [`Mlx5Rq`] over one QP's memory, registered with
//! its CQ(s) so completions map back to wr_ids.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::cq::Mlx5Cq;
use super::dv::DvQp;
use super::owners::Owners;
use super::rq::{Mlx5Rq, Mlx5Srq};
use super::shared::{
    CqShared, QpShared, RqShared, SqFastLimit, SqShared, SrqShared, CQ_ERROR_SET, PURGE_ACTIVE,
};
use super::sq::Mlx5Sq;
use super::{DoorbellMode, Mlx5Device};
use crate::cq_room::{self, Need};
use crate::mmio;
use crate::wire::{
    offset, MAX_DS, MLX5_QPN_MASK, MLX5_RCV_DBR, MLX5_SEND_WQE_BB, MLX5_SND_DBR, MLX5_WQE_DS_UNITS,
};
use crate::{QpCaps, QpConfig, QpState, QpType, QueuePair};

/// An mlx5 queue pair (hardware or sim memory).
pub struct Mlx5Qp<D: Owners = Mlx5Device> {
    /// Keeps the QP memory alive. Declared first, so it is dropped first (after `drop` has
    /// told the CQs to forget this QP): on hardware the verbs QP is destroyed before the last
    /// references to its CQs and SRQ (held below) can go.
    /// `ManuallyDrop`: `drop` destroys it (the device stops writing CQEs for the QP) before
    /// it counts what the QP left in its CQs.
    owner: core::mem::ManuallyDrop<D::Qp>,
    /// Keep the send and receive CQs' memory alive (reset and drop scan it) and the SRQ's
    /// (the poller reads its entries back for this QP).
    _cq_owners: [Arc<D::Cq>; 2],
    _srq_owner: Option<Arc<D::Srq>>,
    qpn: u32,
    qp_type: QpType,
    state: QpState,
    caps: QpCaps,
    dbrec: *mut u32,
    sq: Mlx5Sq<D>,
    rq: Mlx5Rq,
    shared: Arc<QpShared>,
    srq: Option<Arc<SrqShared>>,
    /// What this QP committed on its send and receive CQ (see `providers/cq_room.rs`),
    /// given back at drop.
    cq_need: [Need; 2],
}

// SAFETY: `dbrec` points into the QP's doorbell record, kept alive by `owner`; the queues
// are `Send`, the shared state is atomics.
unsafe impl<D: Owners> Send for Mlx5Qp<D> {}

impl<D: Owners> std::fmt::Debug for Mlx5Qp<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Qp")
            .field("qpn", &self.qpn)
            .field("qp_type", &self.qp_type)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

fn bad(detail: String) -> crate::Error {
    crate::Error::InvalidArgument {
        context: "Mlx5Qp::from_dv",
        detail,
    }
}

impl<D: Owners> Mlx5Qp<D> {
    /// A QP in RESET over `dv`. Registers itself with the CQ(s) (and reserves the SRQ's size
    /// in the receive CQ, once per CQ and SRQ) so completions map back to wr_ids.
    /// `recv_cq: None` means the send CQ receives the receive completions too.
    ///
    /// This raw constructor (memory the caller brings) does not apply the CQ-room rule that
    /// [`Provider::create_qp`](crate::Provider::create_qp) applies on mlx5 and the
    /// sim (`providers/cq_room.rs`): queues deeper than their CQ are accepted here, and a
    /// post that could overrun the CQ is then refused with `PostError::CqFull`.
    ///
    /// # Safety
    /// `dv` memory (rings, dbrec, bfreg) stays valid and is used as this mlx5 QP (by this
    /// object and the device) until drop; `owner` keeps it alive. `granted` are the caps the
    /// device granted for these rings.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn from_dv(
        dv: DvQp,
        cfg: &QpConfig,
        granted: QpCaps,
        send_cq: &mut Mlx5Cq<D>,
        recv_cq: Option<&mut Mlx5Cq<D>>,
        srq: Option<&mut Mlx5Srq<D>>,
        owner: D::Qp,
    ) -> crate::Result<Mlx5Qp<D>> {
        // SAFETY: forwarded.
        unsafe { Self::from_dv_in(dv, cfg, granted, send_cq, recv_cq, srq, owner, false) }
    }

    /// [`Self::from_dv`] with the CQ-room rule: refused (`create_qp`, EINVAL) unless each CQ
    /// can absorb every queue completing on it. What `Provider::create_qp` uses.
    ///
    /// # Safety
    /// As [`Self::from_dv`].
    #[allow(clippy::too_many_arguments)]
    pub(crate) unsafe fn from_dv_checked(
        dv: DvQp,
        cfg: &QpConfig,
        granted: QpCaps,
        send_cq: &mut Mlx5Cq<D>,
        recv_cq: Option<&mut Mlx5Cq<D>>,
        srq: Option<&mut Mlx5Srq<D>>,
        owner: D::Qp,
    ) -> crate::Result<Mlx5Qp<D>> {
        // SAFETY: forwarded.
        unsafe { Self::from_dv_in(dv, cfg, granted, send_cq, recv_cq, srq, owner, true) }
    }

    /// # Safety
    /// As [`Self::from_dv`]. `room`: apply the CQ-room rule.
    #[allow(clippy::too_many_arguments)]
    unsafe fn from_dv_in(
        dv: DvQp,
        cfg: &QpConfig,
        granted: QpCaps,
        send_cq: &mut Mlx5Cq<D>,
        recv_cq: Option<&mut Mlx5Cq<D>>,
        srq: Option<&mut Mlx5Srq<D>>,
        owner: D::Qp,
        room: bool,
    ) -> crate::Result<Mlx5Qp<D>> {
        if dv.sq_buf.is_null() || dv.dbrec.is_null() {
            return Err(bad("null SQ buffer or doorbell record".into()));
        }
        if dv.sq_stride as usize != MLX5_SEND_WQE_BB {
            return Err(bad(format!("sq_stride {} (must be 64)", dv.sq_stride)));
        }
        if !dv.sq_wqe_cnt.is_power_of_two() || dv.sq_wqe_cnt > 0x8000 {
            return Err(bad(format!(
                "sq_wqe_cnt {} is not a power of two <= 32768",
                dv.sq_wqe_cnt
            )));
        }
        if dv.sq_buf as usize % 64 != 0 || dv.dbrec as usize % 4 != 0 {
            return Err(bad(
                "SQ not 64-byte aligned or dbrec not 4-byte aligned".into()
            ));
        }
        if !dv.bf_reg.is_null() && (dv.bf_reg as usize % 8 != 0 || dv.bf_size % 64 != 0) {
            return Err(bad(format!(
                "BlueFlame register not 8-byte aligned or bf_size {} not a multiple of 64",
                dv.bf_size
            )));
        }
        let has_srq = srq.is_some();
        if !has_srq {
            if dv.rq_wqe_cnt != 0 && (dv.rq_buf.is_null() || !dv.rq_wqe_cnt.is_power_of_two()) {
                return Err(bad(format!(
                    "rq_wqe_cnt {} is not a power of two (or rq_buf is null)",
                    dv.rq_wqe_cnt
                )));
            }
            if dv.rq_wqe_cnt != 0 && (dv.rq_stride < 16 || dv.rq_stride % 16 != 0) {
                return Err(bad(format!(
                    "rq_stride {} is not a multiple of 16",
                    dv.rq_stride
                )));
            }
            if dv.rq_wqe_cnt > 0x1_0000 {
                return Err(bad(format!("rq_wqe_cnt {} > 65536", dv.rq_wqe_cnt)));
            }
        }
        if granted.max_inline_data > (MAX_DS * MLX5_WQE_DS_UNITS - offset::inline::DATA) as u32 {
            return Err(bad(format!(
                "max_inline_data {} does not fit a WQE",
                granted.max_inline_data
            )));
        }
        let send_shared = send_cq.shared().clone();
        let recv_shared = match &recv_cq {
            Some(c) => c.shared().clone(),
            None => send_shared.clone(),
        };
        let cq_owners = [
            send_cq.owner.clone(),
            recv_cq
                .as_ref()
                .map_or(&send_cq.owner, |c| &c.owner)
                .clone(),
        ];
        let srq_owner = srq.as_ref().map(|s| s.owner.clone());
        let srq_shared = srq.map(|s| s.shared.clone());
        // The CQ-room rule (see `providers/cq_room.rs`): what the queues may hold, on the CQ
        // they complete on; the receive queue as far as the ring and `max_recv_wr` allow.
        let recv_wr = if has_srq {
            0
        } else {
            granted.max_recv_wr.min(dv.rq_wqe_cnt)
        };
        let cq_need = if room {
            cq_room::commit_qp(
                (&send_shared.commit, send_shared.dv.cqe_cnt),
                recv_cq
                    .as_ref()
                    .map(|_| (&recv_shared.commit, recv_shared.dv.cqe_cnt)),
                granted.max_send_wr,
                recv_wr,
            )?
        } else {
            [Need::default(); 2]
        };
        let recv_role = if recv_cq.is_some() {
            "receive CQ"
        } else {
            "CQ"
        };
        if let Some(s) = &srq_shared {
            if let Err(e) = reserve_srq(s, &recv_shared, room.then_some(recv_role)) {
                cq_room::release_qp(&send_shared.commit, &recv_shared.commit, cq_need);
                return Err(e);
            }
        }
        let shared = Arc::new(QpShared {
            qpn: dv.qpn & MLX5_QPN_MASK,
            sq: SqShared::new(dv.sq_wqe_cnt),
            rq: if has_srq || dv.rq_wqe_cnt == 0 {
                None
            } else {
                Some(RqShared::new(dv.rq_wqe_cnt))
            },
            srq: srq_shared.clone(),
            sq_buf: dv.sq_buf,
            sq_bytes: dv.sq_wqe_cnt as usize * MLX5_SEND_WQE_BB,
            dbrec: dv.dbrec,
            rq_buf: if has_srq {
                core::ptr::null_mut()
            } else {
                dv.rq_buf
            },
            rq_stride: dv.rq_stride,
            purge_send: AtomicU64::new(0),
            purge_recv: AtomicU64::new(0),
            cq_error: AtomicU32::new(0),
            stale_send: AtomicU32::new(0),
            stale_recv: AtomicU32::new(0),
            alive: AtomicBool::new(true),
            failed: AtomicBool::new(false),
            fast_limit: SqFastLimit::new(),
            send_cq: send_shared.clone(),
            recv_cq: recv_shared.clone(),
        });
        for cq in [&send_shared, &recv_shared] {
            let mut qps = cq.qps.lock().unwrap_or_else(|p| p.into_inner());
            qps.retain(|q| q.strong_count() > 0);
            qps.push(Arc::downgrade(&shared));
            if cq.error.load(Ordering::SeqCst) {
                shared
                    .cq_error
                    .store(CQ_ERROR_SET | cq.dv.cqn, Ordering::SeqCst);
                shared.fail();
            }
        }
        match recv_cq {
            Some(rc) => {
                send_cq.register(&shared, true, false);
                rc.register(&shared, false, true);
            }
            None => send_cq.register(&shared, true, true),
        }
        let sq = Mlx5Sq::new(
            &dv,
            cfg.qp_type,
            granted,
            cfg.sq_sig_all,
            shared.clone(),
            send_shared,
        );
        let rq = Mlx5Rq::new(
            &dv,
            cfg.qp_type,
            granted.max_recv_wr,
            granted.max_recv_sge,
            has_srq,
            shared.clone(),
            recv_shared,
        );
        Ok(Mlx5Qp {
            qpn: dv.qpn & MLX5_QPN_MASK,
            qp_type: cfg.qp_type,
            state: QpState::Reset,
            caps: granted,
            dbrec: dv.dbrec,
            sq,
            rq,
            shared,
            srq: srq_shared,
            owner: core::mem::ManuallyDrop::new(owner),
            _cq_owners: cq_owners,
            _srq_owner: srq_owner,
            cq_need,
        })
    }

    /// Called by the control path after a successful state change. RESET zeroes the
    /// producer/consumer indices and the dbrec (as the hardware expects) and makes the CQs
    /// drop the CQEs this QP left behind; ERR keeps them (the device flushes). Sends are
    /// refused unless RTS; receives unless INIT/RTR/RTS; both once the poller returned an
    /// error completion for the QP, until RESET.
    ///
    /// Must not run while another thread polls a CQ of this QP (a control-path quiesce, as
    /// libmlx5 takes its CQ lock for the same clean-up): it would only skew the accounting.
    pub fn set_state(&mut self, s: QpState) {
        if s == QpState::Reset && self.state != QpState::Reset {
            let _ = self.forget_outstanding();
            // A QP on a CQ in error stays failed: nothing can complete on that CQ again.
            if self.shared.cq_error.load(Ordering::SeqCst) == 0 {
                self.shared.failed.store(false, Ordering::SeqCst);
            }
            self.sq.reset();
            self.rq.reset();
            // SAFETY: `dbrec` is the QP's 2 x u32 doorbell record.
            unsafe {
                mmio::write32(self.dbrec.add(MLX5_RCV_DBR), 0);
                mmio::write32(self.dbrec.add(MLX5_SND_DBR), 0);
            }
        }
        self.state = s;
        self.sq.set_state(s);
        self.rq.state = s;
    }

    /// Mark the CQEs the device has written so far for this QP as stale and give back the
    /// CQ entries of every outstanding request, except one per stale CQE still in a ring:
    /// that slot stays taken until the poller discards the CQE (`QpShared::stale_send` /
    /// `stale_recv`), so a CQ whose ring still holds a reset or dropped QP's CQEs never
    /// grants their room twice. Called once the device works no more on the QP (after the
    /// RESET transition, or after the QP was destroyed). Returns the responder CQEs of this
    /// QP still in its receive CQ (an SRQ's receives: see [`unreserve_srq`]).
    fn forget_outstanding(&mut self) -> u32 {
        let sh = &self.shared;
        let (send_end, req, resp_here) = sh.send_cq.stale_of(sh.qpn);
        let (recv_end, resp) = if Arc::ptr_eq(&sh.send_cq, &sh.recv_cq) {
            (send_end, resp_here)
        } else {
            let (end, _, resp) = sh.recv_cq.stale_of(sh.qpn);
            (end, resp)
        };
        sh.purge_send
            .store(PURGE_ACTIVE | send_end as u64, Ordering::Release);
        sh.purge_recv
            .store(PURGE_ACTIVE | recv_end as u64, Ordering::Release);
        // Each CQE retires at least one outstanding request; CQEs already held for an
        // earlier reset keep their own entry.
        let keep = |held: &AtomicU32, cqes: u32, outstanding: u32| {
            let fresh = cqes
                .saturating_sub(held.load(Ordering::Acquire))
                .min(outstanding);
            held.fetch_add(fresh, Ordering::AcqRel);
            outstanding - fresh
        };
        let send = self.sq.outstanding();
        let give = keep(&sh.stale_send, req, send) + self.sq.take_cq_budget();
        sh.send_cq.give_back(give);
        if self.srq.is_none() {
            let recv = self.rq.outstanding();
            sh.recv_cq.give_back(keep(&sh.stale_recv, resp, recv));
        }
        resp
    }

    /// The state this QP shares with its CQs (a device model tells it of async errors).
    pub(crate) fn shared(&self) -> &Arc<QpShared> {
        &self.shared
    }

    /// The send queue, read only (the dedicated poll reads the poster's view of it).
    #[inline(always)]
    pub(crate) fn sq_ref(&self) -> &Mlx5Sq<D> {
        &self.sq
    }

    /// What keeps the QP memory alive (on hardware the verbs QP).
    pub(crate) fn owner_mut(&mut self) -> &mut D::Qp {
        &mut self.owner
    }

    /// The device moved this QP to ERR outside a CQE (`IBV_EVENT_QP_FATAL` and its kin, or
    /// the sim's fatal): posts are refused with `BadState` and `state()` says ERR until the
    /// QP goes back to RESET. Control path; the providers call it when they learn of the
    /// event.
    pub fn mark_fatal(&self) {
        self.shared.fail();
    }

    /// Path MTU in bytes (UD sends larger than it are refused).
    pub fn set_path_mtu(&mut self, bytes: u32) {
        self.sq.set_path_mtu(bytes);
    }

    /// Doorbell or BlueFlame (see [`DoorbellMode`]).
    pub fn set_doorbell_mode(&mut self, m: DoorbellMode) {
        self.sq.set_mode(m);
    }

    /// Selective signaling helper: force CQ_UPDATE at least every `n` WQEs (0 = off).
    pub fn set_signal_every(&mut self, n: u32) {
        self.sq.set_signal_every(n);
    }
}

/// Reserve the SRQ's size in `cq` once per (SRQ, CQ) pair, for good, in `reserved`; with
/// `room` (the CQ-room rule; it names the CQ in a refusal) also committed.
fn reserve_srq(srq: &Arc<SrqShared>, cq: &Arc<CqShared>, room: Option<&str>) -> crate::Result<()> {
    let mut refs = srq
        .cq_refs
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let id = Arc::as_ptr(cq) as usize;
    if let Some(r) = refs.iter_mut().find(|r| r.0 == id) {
        r.1 += 1;
        return Ok(());
    }
    let need = match room {
        Some(role) => {
            let need = Need {
                srq: srq.wqe_cnt,
                ..Need::default()
            };
            cq.commit.commit(cq_room::VERB, role, cq.dv.cqe_cnt, need)?;
            need
        }
        None => Need::default(),
    };
    if !cq.try_reserve(srq.wqe_cnt) {
        cq.commit.release(need);
        return Err(bad(format!(
            "the receive CQ ({} entries, {} spoken for) has no room for the SRQ's {} receives",
            cq.dv.cqe_cnt,
            cq.in_use(),
            srq.wqe_cnt
        )));
    }
    refs.push((id, 1, need));
    Ok(())
}

/// Drop one QP's claim on the SRQ's reservation in `cq`; the last one gives the SRQ's depth
/// back, except one entry per responder CQE of the QP still in the ring (`stale`, beyond
/// what `held` already keeps): those stay held in `held` until the poller discards them.
fn unreserve_srq(srq: &Arc<SrqShared>, cq: &Arc<CqShared>, stale: u32, held: &AtomicU32) {
    let mut refs = srq
        .cq_refs
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let id = Arc::as_ptr(cq) as usize;
    if let Some(i) = refs.iter().position(|r| r.0 == id) {
        refs[i].1 -= 1;
        if refs[i].1 == 0 {
            let (_, _, need) = refs.swap_remove(i);
            let fresh = stale
                .saturating_sub(held.load(Ordering::Acquire))
                .min(srq.wqe_cnt);
            held.fetch_add(fresh, Ordering::AcqRel);
            cq.give_back(srq.wqe_cnt - fresh);
            cq.commit.release(need);
        }
    }
}

impl<D: Owners> Drop for Mlx5Qp<D> {
    fn drop(&mut self) {
        // Dead first, then wait for a poll of either CQ that may have seen it alive: the QP
        // memory (`owner`) is freed below (see `CqShared::polling`). From here on the poller
        // drops this QP's CQEs without reading its memory.
        self.shared.alive.store(false, Ordering::SeqCst);
        super::handshake::wait_for_polls([
            &self.shared.send_cq.polling,
            &self.shared.recv_cq.polling,
        ]);
        // SAFETY: `owner` is dropped exactly once, here, and not used after (`owner_mut`
        // needs `&mut self`). Destroying the QP stops the device writing CQEs for it, so
        // what `forget_outstanding` counts in the rings is final.
        unsafe { core::mem::ManuallyDrop::drop(&mut self.owner) };
        let resp = self.forget_outstanding();
        if let Some(srq) = &self.srq {
            unreserve_srq(srq, &self.shared.recv_cq, resp, &self.shared.stale_recv);
        }
        cq_room::release_qp(
            &self.shared.send_cq.commit,
            &self.shared.recv_cq.commit,
            self.cq_need,
        );
    }
}

impl<D: Owners> QueuePair for Mlx5Qp<D> {
    type Sq = Mlx5Sq<D>;
    type Rq = Mlx5Rq;
    fn qpn(&self) -> u32 {
        self.qpn
    }
    fn qp_type(&self) -> QpType {
        self.qp_type
    }
    fn state(&self) -> QpState {
        // ERR once the poller returned an error completion for this QP (`QpShared::failed`).
        self.sq.state()
    }
    fn caps(&self) -> QpCaps {
        self.caps
    }
    #[inline]
    fn sq(&mut self) -> &mut Mlx5Sq<D> {
        &mut self.sq
    }
    #[inline]
    fn rq(&mut self) -> &mut Mlx5Rq {
        &mut self.rq
    }
    #[inline]
    fn queues(&mut self) -> (&mut Mlx5Sq<D>, &mut Mlx5Rq) {
        (&mut self.sq, &mut self.rq)
    }
}
