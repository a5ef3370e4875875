//! Hardware glue: [`Mlx5Device`] implements [`Provider`] over the control path
//! ([`rdma_direct_core::control`]) and hands the queue memory `mlx5dv_init_obj` describes to the hot-path
//! types of this provider.
//!
//! - Opening refuses a device libmlx5 does not drive, *before* any `mlx5dv_*` call sees the
//!   context (those cast it to libmlx5's own struct): `mlx5dv_is_supported` looks only at the
//!   device's driver ops. Message: `rxe0 is not an mlx5 device: use the verbs provider`.
//! - CQs: `ibv_create_cq`, then `mlx5dv_init_obj(CQ)`; the CQ becomes "DV owned" (libmlx5
//!   no longer cleans it), which [`super::Mlx5Cq`] handles (purge on QP reset / drop).
//! - SRQs: `mlx5dv_init_obj(SRQ)` gives the ring, stride and the free list `head..tail`; a
//!   fresh SRQ's list covers every entry, so `wqe_cnt = tail + 1`.
//! - QPs: one thread domain per QP (`ibv_alloc_td`), a parent domain over the PD with that TD
//!   (`ibv_alloc_parent_domain`), then `mlx5dv_create_qp` on the parent domain with
//!   `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`, then `mlx5dv_init_obj(QP)` for the rings,
//!   dbrec and BlueFlame register. The QP's owner destroys in the order libmlx5 requires (it
//!   counts references and refuses with EBUSY otherwise): QP, parent domain, TD, then the PD
//!   reference. [`Mlx5Device::bfreg_mode`] says which kind of bfreg a QP got.
//! - AHs: `mlx5dv_init_obj(AH)` gives the 48-byte address vector the SQ copies into UD WQEs.
//!
//! ## The two hardware traps
//!
//! - **BlueFlame register sharing: handled (dedicated bfreg).** Without a thread domain,
//!   libmlx5 may give several QPs of a context the same bfreg and serialise the doorbell /
//!   BlueFlame writes with a lock that is private to it, so a direct poster would be safe only
//!   as the sole poster. With a parent domain that carries a TD, libmlx5's `create_qp`
//!   (rdma-core 44, providers/mlx5/verbs.c) takes the TD's own bfreg and passes its index to
//!   the kernel (`MLX5_QP_FLAG_BFREG_INDEX`), so the QP rings a register nobody else rings;
//!   the TD is the caller's promise of single-threaded use, which is what one [`Mlx5Qp`]
//!   with `&mut` posting already is. A device that refuses a TD (no dedicated bfreg left, or
//!   an old libmlx5) makes `create_qp` fail with [`Error::Unsupported`] naming the cause,
//!   unless [`Mlx5Device::allow_shared_bfreg`]`(true)` was called: then the QP is created on
//!   the plain PD (shared bfreg, [`BfregMode::Shared`]) and **this process must be the only
//!   poster on the context**.
//! - **Scatter-to-CQE: disabled at QP creation.** In libmlx5's `create_qp`,
//!   `DISABLE_SCATTER_TO_CQE` marks scatter as configured, so the create command never gets
//!   `MLX5_QP_FLAG_SCATTER_CQE` (which libmlx5 otherwise adds unless `MLX5_SCATTER_TO_CQE=0`);
//!   libmlx5 does not check the QP type for this flag (only its conflict with `ALLOW_*`), so
//!   RC, UC and UD are treated alike, and without the flag the kernel enables no
//!   scatter-to-CQE on the QP. The CQ parser still copies scattered data if a CQE carries it
//!   (see [`super::cq`]), as a second line of defence.
//!
//! ## Not verified on hardware
//!
//! No mlx5 NIC is available to this project. Every function here executes in CI against a
//! stand-in for libibverbs + libmlx5 built from rdma-core 44's headers, with the sim as the
//! device behind it (`tests/standin/`, `tests/standin.rs`): open, thread and parent domains,
//! `mlx5dv_create_qp`, `mlx5dv_init_obj`, the destroy order libmlx5 enforces, a TD with
//! `bf.size` 0, timestamps, arming. That is our reading of rdma-core, not a ConnectX.
//! Unverified on hardware: that `ibv_alloc_td` succeeds on the target ConnectX (it needs a
//! free dynamic UAR), the `bf.size` `mlx5dv_init_obj` reports for a TD's bfreg, and the
//! self-loop in `tests/mlx5_device.rs`. `rdma-direct selftest -d mlx5_0` checks each on a
//! user's machine.

use std::sync::Arc;

use super::cq::Mlx5Cq;
use super::dv::{AddressVector, DvCq, DvQp, DvSrq};
use super::owners::Owners;
use super::qp::Mlx5Qp;
use super::rq::Mlx5Srq;
use crate::wire::MLX5_WQE_DS_UNITS;

/// A data segment, in the `u32` units of the SRQ stride.
const U: u32 = MLX5_WQE_DS_UNITS as u32;
use crate::ffi::{
    self, ibv_pd, ibv_qp_init_attr_ex, ibv_td, mlx5dv_ah, mlx5dv_context, mlx5dv_cq, mlx5dv_obj,
    mlx5dv_qp, mlx5dv_qp_init_attr, mlx5dv_srq, MLX5DV_OBJ_AH,
};
use crate::{
    Access, ConnectOpts, Provider, ProviderKind, QpCaps, QpConfig, QpEndpoint, QpState, QpType,
    QueuePair,
};
use crate::{Error, Result};
use rdma_direct_core::control::{self, Context};

/// An mlx5 device opened for the direct hot path.
pub struct Mlx5Device {
    ctx: Context,
    mlx5: &'static ffi::Mlx5,
    psn_seed: u32,
    allow_shared_bfreg: bool,
    /// Where the async events that fail a queue go ([`Mlx5Device::check_async`]): the
    /// shared state of each CQ (by `ibv_cq` address) and QP (by number) made here.
    hosts: std::sync::Mutex<Hosts>,
}

/// See [`Mlx5Device::check_async`].
#[derive(Default)]
struct Hosts {
    cqs: Vec<(usize, std::sync::Weak<super::shared::CqShared>)>,
    qps: Vec<(u32, std::sync::Weak<super::shared::QpShared>)>,
}

/// How a QP reaches its BlueFlame register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BfregMode {
    /// A bfreg of the QP's own thread domain: no other QP rings it, no lock needed.
    Dedicated,
    /// A bfreg libmlx5 may share with other QPs of the context under a lock private to it:
    /// this poster must be the only one ringing the context's shared bfregs. Only with
    /// [`Mlx5Device::allow_shared_bfreg`].
    Shared,
}

/// `ibv_alloc_td`; `ibv_dealloc_td` on drop.
struct ThreadDomain {
    raw: *mut ibv_td,
    ctx: Context,
}

impl Drop for ThreadDomain {
    fn drop(&mut self) {
        // SAFETY: `raw` came from alloc_td on `ctx` (kept alive by this struct) and is freed
        // once, after the parent domain over it (dropped before this value, see `QpDomain`).
        // A refusal (EBUSY: a reference libmlx5 still counts) leaks the TD; it is not a
        // reason to panic in a destructor. The order is checked by tests/standin.rs, whose
        // stand-in refuses a wrong one and counts what is left on the context.
        let _ = unsafe { ffi::dealloc_td(self.ctx.as_ptr(), self.raw) };
    }
}

/// A parent domain (PD + thread domain): what a QP with a dedicated bfreg is created on.
/// Drop order: the parent domain, then the TD, then this value's reference to the PD.
struct QpDomain {
    raw: *mut ibv_pd,
    _td: ThreadDomain,
    pd: control::Pd,
}

impl Drop for QpDomain {
    fn drop(&mut self) {
        // SAFETY: `raw` came from alloc_parent_domain and is freed once, after the QP created
        // on it (the owner drops the QP first); libmlx5 frees parent domains in
        // ibv_dealloc_pd.
        // A refusal leaks the parent domain (see ThreadDomain's drop).
        let _ = unsafe { (self.pd.context().verbs().ibv_dealloc_pd)(self.raw) };
    }
}

/// What an [`Mlx5Qp`] made here keeps alive: the verbs QP first (destroyed first), then its
/// domain (`None` in shared-bfreg mode).
pub struct QpOwner {
    qp: control::Qp,
    _domain: Option<QpDomain>,
}

// SAFETY: the raw TD and parent-domain pointers are only passed to libibverbs' dealloc calls
// in Drop (once); libibverbs objects may be freed from any thread.
unsafe impl Send for QpOwner {}
// SAFETY: `&QpOwner` exposes nothing of the raw pointers; `control::Qp` is Sync.
unsafe impl Sync for QpOwner {}

impl std::fmt::Debug for QpOwner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QpOwner")
            .field("qpn", &self.qp.qpn())
            .field("dedicated_bfreg", &self._domain.is_some())
            .finish()
    }
}

/// An address handle on hardware: the verbs AH and the address vector libmlx5 filled for it
/// (`mlx5dv_init_obj(AH)`), which UD sends copy into their WQEs.
pub struct Mlx5Ah {
    av: AddressVector,
    verbs: control::Ah,
}

impl std::fmt::Debug for Mlx5Ah {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Ah").field("ah", &self.verbs).finish()
    }
}

impl Mlx5Ah {
    /// The address vector.
    pub fn av(&self) -> &AddressVector {
        &self.av
    }
}

/// On hardware the queue memory belongs to the verbs objects `mlx5dv_init_obj` described.
impl Owners for Mlx5Device {
    type Cq = control::Cq;
    type Srq = control::Srq;
    type Qp = QpOwner;
    type Ah = Mlx5Ah;
    #[inline(always)]
    fn av(ah: &Mlx5Ah) -> &[u8; crate::wire::MLX5_AV_LEN] {
        &ah.av.0
    }
}

impl std::fmt::Debug for Mlx5Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mlx5Device")
            .field("name", &self.ctx.name())
            .finish_non_exhaustive()
    }
}

fn init_obj(mlx5: &ffi::Mlx5, obj: &mut mlx5dv_obj, kind: u64, what: &'static str) -> Result<()> {
    // SAFETY: `obj` is a zeroed mlx5dv_obj whose `in` / `out` pairs for `kind` point to live
    // verbs objects of this context and to writable out structs.
    let rc = unsafe { (mlx5.mlx5dv_init_obj)(obj, kind) };
    if rc != 0 {
        return Err(Error::verb(
            what,
            rc,
            "libmlx5 could not describe the object (is the device an mlx5 one?)",
        ));
    }
    Ok(())
}

impl Mlx5Device {
    /// Open `name`; refuses devices libmlx5 does not drive.
    pub fn open(name: &str) -> Result<Mlx5Device> {
        let ctx = Context::open(name)?;
        let not_mlx5 = || Error::Unsupported {
            what: format!("{name} is not an mlx5 device: use the verbs provider"),
        };
        let mlx5 = match ffi::mlx5() {
            Ok(m) => m,
            // An installed libmlx5 without an entry point this provider calls (an rdma-core
            // older than 44): say so, whatever the device (found by the stand-in's old
            // libmlx5, tests/standin.rs; it read "not an mlx5 device" before).
            Err(e @ Error::SymbolMissing { .. }) => return Err(e),
            // Without libmlx5 only an mlx5 NIC needs to hear about the library.
            Err(e) if driven_by_mlx5_core(name) => return Err(e),
            Err(_) => return Err(not_mlx5()),
        };
        // Ask about the device (libmlx5 compares its driver ops, safe for any device) before
        // any mlx5dv call sees this context: those cast it to libmlx5's own struct.
        if !ctx.is_mlx5() {
            return Err(not_mlx5());
        }
        let mut attrs = mlx5dv_context::zeroed();
        // SAFETY: `ctx` is an open context; `attrs` is a zeroed mlx5dv_context of the size
        // rdma-core 44 expects, comp_mask 0 (only version and flags are filled).
        let rc = unsafe { (mlx5.mlx5dv_query_device)(ctx.as_ptr(), &mut attrs) };
        if rc != 0 {
            return Err(not_mlx5());
        }
        let psn_seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0x5eed);
        Ok(Mlx5Device {
            ctx,
            mlx5,
            psn_seed,
            allow_shared_bfreg: false,
            hosts: Default::default(),
        })
    }

    /// Opt in to QPs on a shared BlueFlame register when the device refuses a thread domain
    /// (default: refuse with the device's error). With it, **this process must be the only
    /// poster on the context**: libmlx5 guards shared bfregs with a lock it does not share.
    pub fn allow_shared_bfreg(&mut self, allow: bool) {
        self.allow_shared_bfreg = allow;
    }

    /// Whether `qp` rings a dedicated or a shared bfreg.
    pub fn bfreg_mode(&self, qp: &mut Mlx5Qp) -> Result<BfregMode> {
        Ok(match qp.owner_mut()._domain {
            Some(_) => BfregMode::Dedicated,
            None => BfregMode::Shared,
        })
    }

    /// A thread domain and a parent domain over `pd`; `Ok(None)` when the device refuses a
    /// thread domain and shared bfregs are allowed.
    fn qp_domain(&self, pd: &control::Pd) -> Result<Option<QpDomain>> {
        // SAFETY: `ctx` is an open context.
        let td = match unsafe { ffi::alloc_td(self.ctx.as_ptr()) } {
            Ok(raw) => ThreadDomain {
                raw,
                ctx: self.ctx.clone(),
            },
            Err(_) if self.allow_shared_bfreg => return Ok(None),
            Err(e) => {
                return Err(Error::Unsupported {
                    what: format!(
                        "{}: no thread domain, so no dedicated BlueFlame register ({e}); \
                         Mlx5Device::allow_shared_bfreg(true) accepts a shared one if this \
                         process is the only poster",
                        self.ctx.name()
                    ),
                })
            }
        };
        // SAFETY: live context, PD (held by the caller) and TD (held just above).
        let raw = unsafe { ffi::alloc_parent_domain(self.ctx.as_ptr(), pd.as_ptr(), td.raw) }?;
        Ok(Some(QpDomain {
            raw,
            _td: td,
            pd: pd.clone(),
        }))
    }

    /// The verbs context.
    pub fn context(&self) -> &Context {
        &self.ctx
    }
}

/// True when sysfs says the device's PCI function is driven by `mlx5_core`.
fn driven_by_mlx5_core(name: &str) -> bool {
    std::fs::read_link(format!("/sys/class/infiniband/{name}/device/driver"))
        .map(|p| p.ends_with("mlx5_core"))
        .unwrap_or(false)
}

impl Mlx5Device {
    /// A CQ whose CQEs carry the device's time in `kind`'s format (`ibv_create_cq_ex` with
    /// `IBV_WC_EX_WITH_COMPLETION_TIMESTAMP`, or `..._WALLCLOCK` alone for real time; use the
    /// same kind for both CQs of a QP), with its clock attached (free-running: the context's
    /// clock info through `mlx5dv_get_clock_info`). Run against the stand-in, not on a NIC.
    pub fn create_cq_ts(&mut self, cqe: u32, kind: crate::clock::TimestampKind) -> Result<Mlx5Cq> {
        use super::ts::{CqClock, DvClockFeed};
        let clock = match kind {
            crate::clock::TimestampKind::RealTime => CqClock::real_time(),
            crate::clock::TimestampKind::FreeRunning => CqClock::free_running(
                std::sync::Arc::new(DvClockFeed::new(self.ctx.clone(), self.mlx5)),
            )?,
        };
        let real_time = kind == crate::clock::TimestampKind::RealTime;
        let cq = control::Cq::new_timestamped(&self.ctx, cqe, real_time)?;
        let mut cq = self.wrap_cq(cq)?;
        cq.set_clock(clock);
        Ok(cq)
    }

    /// A CQ of at least `cqe` entries whose completion events arrive on `channel`, and the
    /// waiter that arms it by hand through the CQ's UAR (`mlx5dv_cq.cq_uar`, see
    /// [`super::arm`]) and sleeps on the channel (`ibv_get_cq_event`, each event
    /// acknowledged as it is read).
    pub fn create_cq_waiter(
        &mut self,
        cqe: u32,
        channel: &control::CompChannel,
    ) -> Result<(Mlx5Cq, super::CqWaiter<control::CompChannel>)> {
        let cq = control::Cq::with_channel(&self.ctx, cqe, channel)?;
        let keep = cq.clone();
        let (mcq, uar) = self.wrap_cq_uar(cq)?;
        if uar.is_null() {
            return Err(Error::verb(
                "mlx5dv_init_obj(CQ)",
                libc::EINVAL,
                "libmlx5 reported no CQ UAR (cq_uar): the CQ cannot be armed by hand",
            ));
        }
        // SAFETY: the CQ's doorbell record and UAR page as mlx5dv_init_obj described them;
        // `keep` (a clone of the verbs CQ) keeps both mapped while the arm lives.
        let mut arm = unsafe { super::CqArm::new(mcq.cqn(), mcq.dbrec(), uar) };
        arm.keep_alive(std::sync::Arc::new(keep));
        Ok((mcq, super::CqWaiter::new(arm, channel.clone())))
    }

    /// The mlx5 view of a verbs CQ, polled by the hand-written poller from now on.
    fn wrap_cq(&self, cq: control::Cq) -> Result<Mlx5Cq> {
        self.wrap_cq_uar(cq).map(|(c, _)| c)
    }

    /// [`Mlx5Device::wrap_cq`], and the CQ's UAR page (where its arm doorbell goes).
    fn wrap_cq_uar(&self, cq: control::Cq) -> Result<(Mlx5Cq, *mut u8)> {
        let mut out = mlx5dv_cq::zeroed();
        let mut obj = mlx5dv_obj::zeroed();
        obj.cq.r#in = cq.as_ptr();
        obj.cq.out = &mut out;
        init_obj(
            self.mlx5,
            &mut obj,
            ffi::MLX5DV_OBJ_CQ,
            "mlx5dv_init_obj(CQ)",
        )?;
        let dv = DvCq {
            cqn: out.cqn,
            buf: out.buf.cast(),
            cqe_cnt: out.cqe_cnt,
            cqe_size: out.cqe_size,
            dbrec: out.dbrec,
        };
        let uar = out.cq_uar.cast::<u8>();
        let raw = cq.as_ptr() as usize;
        // SAFETY: the memory belongs to `cq`, which the Mlx5Cq keeps alive as its owner; from
        // now on only the Mlx5Cq polls it (libmlx5 treats it as DV owned).
        let cq = unsafe { Mlx5Cq::from_dv(dv, cq) }?;
        let mut h = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        h.cqs.retain(|(_, w)| w.strong_count() > 0);
        h.cqs.push((raw, Arc::downgrade(cq.shared())));
        Ok((cq, uar))
    }

    /// Read the pending asynchronous events without blocking (a system call each: control
    /// path only) and apply those that fail a queue made here: `CQ_ERR` marks the CQ in
    /// error ([`Mlx5Cq::mark_error`]: its QPs refuse posts naming it, its poll reports it),
    /// `QP_FATAL`, `QP_REQ_ERR` and `QP_ACCESS_ERR` mark the QP failed
    /// ([`Mlx5Qp::mark_fatal`]: posts refused, `state()` ERR). Returns every event read.
    /// Call it from the loop that watches [`Context::async_fd`].
    pub fn check_async(&mut self) -> Result<Vec<control::AsyncEvent>> {
        let mut v = Vec::new();
        while let Some(ev) = self.next_async()? {
            v.push(ev);
        }
        Ok(v)
    }

    /// One pending event, read and applied as `check_async` says.
    fn next_async(&mut self) -> Result<Option<control::AsyncEvent>> {
        use control::{AsyncElement, AsyncEventKind as K};
        let Some(ev) = self.ctx.poll_async_event()? else {
            return Ok(None);
        };
        let h = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        match (ev.kind, ev.element) {
            (K::CqErr, AsyncElement::Cq(ptr)) => {
                let hit = h.cqs.iter().find(|(p, _)| *p == ptr);
                if let Some(cq) = hit.and_then(|(_, w)| w.upgrade()) {
                    cq.fail();
                }
            }
            (K::QpFatal | K::QpReqErr | K::QpAccessErr, AsyncElement::Qp { qpn, .. }) => {
                let hit = h.qps.iter().find(|(n, _)| *n == qpn);
                if let Some(qp) = hit.and_then(|(_, w)| w.upgrade()) {
                    qp.fail();
                }
            }
            _ => {}
        }
        Ok(Some(ev))
    }
}

impl Provider for Mlx5Device {
    type Pd = control::Pd;
    type Mr = control::Mr;
    type Cq = Mlx5Cq;
    type Srq = Mlx5Srq;
    type Qp = Mlx5Qp;
    type Ah = Mlx5Ah;
    type Pair = super::Mlx5Dedicated;

    fn kind(&self) -> ProviderKind {
        ProviderKind::Mlx5
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

    fn create_cq(&mut self, cqe: u32) -> Result<Mlx5Cq> {
        let cq = control::Cq::new(&self.ctx, cqe)?;
        self.wrap_cq(cq)
    }

    fn create_cq_ts(&mut self, cqe: u32) -> Result<Mlx5Cq> {
        Mlx5Device::create_cq_ts(self, cqe, crate::clock::TimestampKind::RealTime)
    }

    fn create_srq(&mut self, pd: &control::Pd, max_wr: u32, max_sge: u32) -> Result<Mlx5Srq> {
        let srq = control::Srq::new(pd, max_wr, max_sge)?;
        let mut out = mlx5dv_srq::zeroed();
        out.comp_mask = ffi::MLX5DV_SRQ_MASK_SRQN;
        let mut obj = mlx5dv_obj::zeroed();
        obj.srq.r#in = srq.as_ptr();
        obj.srq.out = &mut out;
        init_obj(
            self.mlx5,
            &mut obj,
            ffi::MLX5DV_OBJ_SRQ,
            "mlx5dv_init_obj(SRQ)",
        )?;
        let dv = DvSrq {
            srqn: out.srqn,
            buf: out.buf.cast(),
            wqe_cnt: out.tail + 1,
            stride: out.stride,
            head: out.head,
            tail: out.tail,
            dbrec: out.dbrec,
        };
        let sge = max_sge
            .min(srq.max_sge())
            .min((out.stride.saturating_sub(U)) / U);
        // SAFETY: the memory belongs to `srq`, kept alive as the Mlx5Srq's owner; only this
        // Mlx5Srq posts to it.
        unsafe { Mlx5Srq::from_dv(dv, sge, srq) }
    }

    fn create_qp(
        &mut self,
        pd: &control::Pd,
        send_cq: &mut Mlx5Cq,
        recv_cq: Option<&mut Mlx5Cq>,
        srq: Option<&mut Mlx5Srq>,
        cfg: &QpConfig,
    ) -> Result<Mlx5Qp> {
        let scq = send_cq.owner();
        let rcq = recv_cq.as_ref().map_or(scq, |c| c.owner());
        let vsrq = srq.as_ref().map(|s| s.owner());
        let here = self.ctx.as_ptr();
        if pd.context().as_ptr() != here
            || scq.context().as_ptr() != here
            || rcq.context().as_ptr() != here
        {
            return Err(Error::InvalidArgument {
                context: "Mlx5Device::create_qp",
                detail: "the PD and CQs must come from this device's context".into(),
            });
        }
        let domain = self.qp_domain(pd)?;
        let mut attr = ibv_qp_init_attr_ex::zeroed();
        attr.send_cq = scq.as_ptr();
        attr.recv_cq = rcq.as_ptr();
        attr.srq = vsrq.map_or(std::ptr::null_mut(), control::Srq::as_ptr);
        attr.cap = ffi::ibv_qp_cap {
            max_send_wr: cfg.caps.max_send_wr,
            max_recv_wr: if vsrq.is_some() {
                0
            } else {
                cfg.caps.max_recv_wr
            },
            max_send_sge: cfg.caps.max_send_sge,
            max_recv_sge: if vsrq.is_some() {
                0
            } else {
                cfg.caps.max_recv_sge
            },
            max_inline_data: cfg.caps.max_inline_data,
        };
        attr.qp_type = match cfg.qp_type {
            QpType::Rc => ffi::IBV_QPT_RC,
            QpType::Uc => ffi::IBV_QPT_UC,
            QpType::Ud => ffi::IBV_QPT_UD,
        };
        attr.sq_sig_all = libc::c_int::from(cfg.sq_sig_all);
        attr.comp_mask = ffi::IBV_QP_INIT_ATTR_PD;
        attr.pd = domain.as_ref().map_or(pd.as_ptr(), |d| d.raw);
        let mut dv_attr = mlx5dv_qp_init_attr {
            comp_mask: ffi::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
            create_flags: ffi::MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
            ..Default::default()
        };
        // SAFETY: live context, CQs, SRQ and (parent) PD, all held by this frame; both attrs
        // are fully initialised and comp_mask names exactly the fields filled.
        let raw =
            unsafe { (self.mlx5.mlx5dv_create_qp)(self.ctx.as_ptr(), &mut attr, &mut dv_attr) };
        if raw.is_null() {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            return Err(Error::verb(
                "mlx5dv_create_qp",
                errno,
                format!(
                    "{} QP, send_wr {} recv_wr {} send_sge {} recv_sge {} inline {}, \
                     scatter-to-CQE disabled, {} bfreg",
                    cfg.qp_type,
                    attr.cap.max_send_wr,
                    attr.cap.max_recv_wr,
                    attr.cap.max_send_sge,
                    attr.cap.max_recv_sge,
                    attr.cap.max_inline_data,
                    if domain.is_some() {
                        "dedicated"
                    } else {
                        "shared"
                    }
                ),
            ));
        }
        let granted = QpCaps {
            max_send_wr: attr.cap.max_send_wr,
            max_recv_wr: attr.cap.max_recv_wr,
            max_send_sge: attr.cap.max_send_sge,
            max_recv_sge: attr.cap.max_recv_sge,
            max_inline_data: attr.cap.max_inline_data,
        };
        // SAFETY: `raw` is a fresh QP in RESET made just above with these CQs, SRQ, type and
        // signalling, on `pd` or on `domain` over it; `domain` is kept in the same owner and
        // dropped after the QP.
        let vqp = unsafe { control::Qp::from_raw(raw, pd, scq, rcq, vsrq, cfg, granted) };
        let qp = QpOwner {
            qp: vqp,
            _domain: domain,
        };
        let mut out = mlx5dv_qp::zeroed();
        let mut obj = mlx5dv_obj::zeroed();
        obj.qp.r#in = qp.qp.as_ptr();
        obj.qp.out = &mut out;
        init_obj(
            self.mlx5,
            &mut obj,
            ffi::MLX5DV_OBJ_QP,
            "mlx5dv_init_obj(QP)",
        )?;
        let caps = cfg.caps.within(qp.qp.caps());
        let dv = DvQp {
            qpn: qp.qp.qpn(),
            sq_buf: out.sq.buf.cast(),
            sq_wqe_cnt: out.sq.wqe_cnt,
            sq_stride: out.sq.stride,
            rq_buf: out.rq.buf.cast(),
            rq_wqe_cnt: out.rq.wqe_cnt,
            rq_stride: out.rq.stride,
            dbrec: out.dbrec,
            bf_reg: out.bf.reg.cast(),
            bf_size: out.bf.size,
        };
        // SAFETY: the rings, dbrec and bfreg belong to `qp`, kept alive as the Mlx5Qp's owner
        // (dropped after the Mlx5Qp has told its CQs to forget it); only this Mlx5Qp posts.
        let qp = unsafe { Mlx5Qp::from_dv_checked(dv, cfg, caps, send_cq, recv_cq, srq, qp) }?;
        let mut h = self.hosts.lock().unwrap_or_else(|p| p.into_inner());
        h.qps.retain(|(_, w)| w.strong_count() > 0);
        h.qps.push((qp.qpn(), Arc::downgrade(qp.shared())));
        Ok(qp)
    }

    fn own_pair(&mut self, qp: Mlx5Qp, cq: Mlx5Cq) -> Result<super::Mlx5Dedicated> {
        super::Mlx5Dedicated::new(qp, cq).map_err(|e| e.reason)
    }

    fn endpoint(&self, qp: &Mlx5Qp, opts: &ConnectOpts) -> Result<QpEndpoint> {
        let port = self.ctx.query_port(opts.port)?;
        let gid = self.ctx.query_gid(opts.port, u32::from(opts.gid_index))?;
        let mtu = port.active_mtu().ok_or_else(|| Error::NotFound {
            what: format!("active MTU of {} port {}", self.ctx.name(), opts.port),
            hint: "is the port active?".into(),
        })?;
        let psn = (self.psn_seed ^ qp.qpn().wrapping_mul(0x9e37_79b1)) & 0xff_ffff;
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
        qp: &mut Mlx5Qp,
        local: &QpEndpoint,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> Result<()> {
        // A QP that ran before (in ERR after a fault, or RTS) goes through RESET first, as on
        // the sim: its queues start again from index 0.
        if qp.state() != QpState::Reset {
            qp.owner_mut().qp.to_reset()?;
            qp.set_state(QpState::Reset);
        }
        let vqp = &mut qp.owner_mut().qp;
        let r = vqp.connect(local, remote, opts);
        let s = vqp.query_state().unwrap_or(QpState::Err);
        let path_mtu = opts.path_mtu.unwrap_or(local.mtu.min(remote.mtu));
        qp.set_state(s);
        qp.set_path_mtu(path_mtu.bytes());
        r
    }

    fn to_error(&mut self, qp: &mut Mlx5Qp) -> Result<()> {
        qp.owner_mut().qp.to_err()?;
        qp.set_state(QpState::Err);
        Ok(())
    }

    fn create_ah(
        &mut self,
        pd: &control::Pd,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> Result<Mlx5Ah> {
        let ah = control::Ah::new(pd, remote, opts.port, opts.gid_index, opts.sl)?;
        let mut out = mlx5dv_ah::zeroed();
        let mut obj = mlx5dv_obj::zeroed();
        obj.ah.r#in = ah.as_ptr();
        obj.ah.out = &mut out;
        init_obj(self.mlx5, &mut obj, MLX5DV_OBJ_AH, "mlx5dv_init_obj(AH)")?;
        if out.av.is_null() {
            return Err(Error::verb(
                "mlx5dv_init_obj(AH)",
                libc::EINVAL,
                "libmlx5 returned no address vector",
            ));
        }
        let mut av = [0u8; 48];
        // SAFETY: libmlx5 points `av` at the AH's 48-byte `struct mlx5_wqe_av`, alive as long
        // as `ah`, which we hold here.
        unsafe { std::ptr::copy_nonoverlapping(out.av, av.as_mut_ptr(), 48) };
        Ok(Mlx5Ah {
            av: AddressVector(av),
            verbs: ah,
        })
    }

    fn async_events(&mut self) -> Result<Option<Vec<control::AsyncEvent>>> {
        self.check_async().map(Some)
    }
}

/// A libibverbs completion channel as the mlx5 [`super::CqWaiter`]'s channel: an event
/// names the CQ by its `struct ibv_cq *` (the waiter only counts it); events are
/// acknowledged as they are read ([`control::CompChannel::get_event`]), so `ack` has nothing
/// left to do.
impl super::EventChannel for control::CompChannel {
    fn get_event(&self, block: bool) -> Result<Option<u32>> {
        Ok(control::CompChannel::get_event(self, block)?.map(|cq| cq as u32))
    }

    fn ack(&self, _n: u32) {}
}
