//! Queue pairs: creation with the capacities the device granted, the state machine driven
//! through [`super::transition`], queries, and the address vector of a connected QP.
//!
//! A [`Qp`] holds its PD, CQs and SRQ (`Arc`s), so none of them can be destroyed while the
//! QP exists; it is destroyed before them.

use super::address::ah_attr_raw;
use super::device::{last_errno, last_errno_or};
use super::port::LinkLayer;
use super::resources::{Cq, Pd, Srq};
use super::transition::{
    check_24bit, check_range, mask_names, optional_mask, transition_mask, InitAttr, QpAttr,
    RtrAttr, RtsAttr, Transition,
};
use crate::endpoint::codec::QpEndpoint;
use crate::error::{errno_name, Error, Result};
use crate::ffi::{self, ibv_qp, ibv_qp_attr, ibv_qp_init_attr};
use crate::types::Mtu;
use crate::types::{Access, ConnectOpts, QpCaps, QpConfig, QpState, QpType};
use libc::c_int;
use std::fmt;

fn qp_type_to_ibv(t: QpType) -> u32 {
    match t {
        QpType::Rc => ffi::IBV_QPT_RC,
        QpType::Uc => ffi::IBV_QPT_UC,
        QpType::Ud => ffi::IBV_QPT_UD,
    }
}

/// A queue pair (RC, UC or UD).
pub struct Qp {
    raw: *mut ibv_qp,
    qp_type: QpType,
    caps: QpCaps,
    sq_sig_all: bool,
    state: QpState,
    // Dropped after `raw` is destroyed (Drop runs first), in this order.
    send_cq: Cq,
    recv_cq: Cq,
    srq: Option<Srq>,
    pd: Pd,
}

// SAFETY: verbs QPs may be used from any thread; freed only in Drop.
unsafe impl Send for Qp {}
// SAFETY: `&Qp` only reads immutable fields or calls thread-safe verbs.
unsafe impl Sync for Qp {}

impl fmt::Debug for Qp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &format_args!("{:#x}", self.qpn()))
            .field("type", &self.qp_type)
            .field("state", &self.state)
            .field("caps", &self.caps)
            .finish()
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_create_qp and is destroyed once, before the CQs, SRQ
        // and PD it uses (held by this struct) can be released.
        unsafe { (self.pd.context().verbs().ibv_destroy_qp)(self.raw) };
    }
}

impl Qp {
    /// `ibv_create_qp`. The QP starts in RESET; the capacities the device granted (often
    /// more than asked) are read back into [`Qp::caps`].
    pub fn new(
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        srq: Option<&Srq>,
        cfg: &QpConfig,
    ) -> Result<Qp> {
        let ctx = pd.context();
        if !std::sync::Arc::ptr_eq(&send_cq.context().inner, &ctx.inner)
            || !std::sync::Arc::ptr_eq(&recv_cq.context().inner, &ctx.inner)
        {
            return Err(Error::InvalidArgument {
                context: "ibv_create_qp",
                detail: "the CQs and the PD belong to different contexts".into(),
            });
        }
        let mut init = ibv_qp_init_attr::zeroed();
        init.send_cq = send_cq.as_ptr();
        init.recv_cq = recv_cq.as_ptr();
        init.srq = srq.map_or(std::ptr::null_mut(), Srq::as_ptr);
        init.cap = ffi::ibv_qp_cap {
            max_send_wr: cfg.caps.max_send_wr,
            max_recv_wr: if srq.is_some() {
                0
            } else {
                cfg.caps.max_recv_wr
            },
            max_send_sge: cfg.caps.max_send_sge,
            max_recv_sge: if srq.is_some() {
                0
            } else {
                cfg.caps.max_recv_sge
            },
            max_inline_data: cfg.caps.max_inline_data,
        };
        init.qp_type = qp_type_to_ibv(cfg.qp_type);
        init.sq_sig_all = c_int::from(cfg.sq_sig_all);
        let asked = init.cap;
        // SAFETY: live PD and CQs (held by the caller's references); `init` is a zeroed,
        // filled init attr.
        let raw = unsafe { (ctx.verbs().ibv_create_qp)(pd.as_ptr(), &mut init) };
        if raw.is_null() {
            let errno = last_errno();
            let hint = match ctx.query_device() {
                Ok(d) => format!(
                    "{} QP asked send_wr {} recv_wr {} send_sge {} recv_sge {} inline {}; \
                     device max_qp_wr {}, max_sge {} (rxe grants at most 512 inline bytes)",
                    cfg.qp_type,
                    asked.max_send_wr,
                    asked.max_recv_wr,
                    asked.max_send_sge,
                    asked.max_recv_sge,
                    asked.max_inline_data,
                    d.max_qp_wr,
                    d.max_sge
                ),
                Err(_) => String::new(),
            };
            return Err(Error::verb("ibv_create_qp", errno, hint));
        }
        let granted = init.cap;
        Ok(Qp {
            raw,
            qp_type: cfg.qp_type,
            caps: QpCaps {
                max_send_wr: granted.max_send_wr,
                max_recv_wr: granted.max_recv_wr,
                max_send_sge: granted.max_send_sge,
                max_recv_sge: granted.max_recv_sge,
                max_inline_data: granted.max_inline_data,
            },
            sq_sig_all: cfg.sq_sig_all,
            state: QpState::Reset,
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            srq: srq.cloned(),
            pd: pd.clone(),
        })
    }

    /// Takes ownership of a QP created outside this module (the mlx5 provider creates its
    /// QPs with `mlx5dv_create_qp` over a parent domain of `pd`); it is destroyed by this
    /// value's drop, before the PD, CQs and SRQ it holds.
    ///
    /// # Safety
    /// `raw` is a live QP in RESET, owned by nobody else, created on `pd`'s context (on `pd`
    /// or on a parent domain over it, which the caller keeps alive until this value is
    /// dropped) with `send_cq`, `recv_cq`, `srq`, `cfg.qp_type` and `cfg.sq_sig_all`;
    /// `granted` is what the device granted.
    pub unsafe fn from_raw(
        raw: *mut ibv_qp,
        pd: &Pd,
        send_cq: &Cq,
        recv_cq: &Cq,
        srq: Option<&Srq>,
        cfg: &QpConfig,
        granted: QpCaps,
    ) -> Qp {
        Qp {
            raw,
            qp_type: cfg.qp_type,
            caps: granted,
            sq_sig_all: cfg.sq_sig_all,
            state: QpState::Reset,
            send_cq: send_cq.clone(),
            recv_cq: recv_cq.clone(),
            srq: srq.cloned(),
            pd: pd.clone(),
        }
    }

    /// `struct ibv_qp *`, valid while `self` lives.
    pub fn as_ptr(&self) -> *mut ibv_qp {
        self.raw
    }

    /// QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: live QP; `qp_num` is written once at creation.
        unsafe { (*self.raw).qp_num }
    }

    /// RC, UC or UD.
    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Capacities the device granted.
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// Whether every send generates a completion.
    pub fn sq_sig_all(&self) -> bool {
        self.sq_sig_all
    }

    /// The state after the last successful transition made through this value (use
    /// [`Qp::query`] for the device's view: a QP can fall into ERR by itself).
    pub fn state(&self) -> QpState {
        self.state
    }

    /// The PD.
    pub fn pd(&self) -> &Pd {
        &self.pd
    }

    /// The send CQ.
    pub fn send_cq(&self) -> &Cq {
        &self.send_cq
    }

    /// The receive CQ.
    pub fn recv_cq(&self) -> &Cq {
        &self.recv_cq
    }

    /// The SRQ, if the QP was created with one.
    pub fn srq(&self) -> Option<&Srq> {
        self.srq.as_ref()
    }

    /// `ibv_query_qp`: state, PSNs, path and caps as the device sees them.
    pub fn query(&self) -> Result<QpAttr> {
        let mut a = ibv_qp_attr::zeroed();
        let mut init = ibv_qp_init_attr::zeroed();
        let mask = ffi::IBV_QP_STATE
            | ffi::IBV_QP_PATH_MTU
            | ffi::IBV_QP_DEST_QPN
            | ffi::IBV_QP_RQ_PSN
            | ffi::IBV_QP_SQ_PSN
            | ffi::IBV_QP_QKEY
            | ffi::IBV_QP_ACCESS_FLAGS
            | ffi::IBV_QP_PORT
            | ffi::IBV_QP_TIMEOUT
            | ffi::IBV_QP_RETRY_CNT
            | ffi::IBV_QP_RNR_RETRY
            | ffi::IBV_QP_MIN_RNR_TIMER
            | ffi::IBV_QP_MAX_QP_RD_ATOMIC
            | ffi::IBV_QP_MAX_DEST_RD_ATOMIC
            | ffi::IBV_QP_CAP;
        // SAFETY: live QP; `a` and `init` are writable.
        let rc =
            unsafe { (self.pd.context().verbs().ibv_query_qp)(self.raw, &mut a, mask, &mut init) };
        if rc != 0 {
            return Err(Error::verb("ibv_query_qp", last_errno_or(rc), ""));
        }
        Ok(QpAttr {
            state: QpState::from_ibv(a.qp_state),
            path_mtu: Mtu::from_ibv(a.path_mtu),
            dest_qpn: a.dest_qp_num,
            rq_psn: a.rq_psn,
            sq_psn: a.sq_psn,
            qkey: a.qkey,
            access: Access(a.qp_access_flags),
            port: a.port_num,
            timeout: a.timeout,
            retry_cnt: a.retry_cnt,
            rnr_retry: a.rnr_retry,
            min_rnr_timer: a.min_rnr_timer,
            max_rd_atomic: a.max_rd_atomic,
            max_dest_rd_atomic: a.max_dest_rd_atomic,
            caps: QpCaps {
                max_send_wr: a.cap.max_send_wr,
                max_recv_wr: a.cap.max_recv_wr,
                max_send_sge: a.cap.max_send_sge,
                max_recv_sge: a.cap.max_recv_sge,
                max_inline_data: a.cap.max_inline_data,
            },
        })
    }

    /// The device's view of the state (`ibv_query_qp`); also refreshes [`Qp::state`].
    pub fn query_state(&mut self) -> Result<QpState> {
        let s = self.query()?.state;
        self.state = s;
        Ok(s)
    }

    fn check_source(&mut self, t: Transition) -> Result<()> {
        let Some(want) = t.source() else {
            return Ok(());
        };
        let now = self.query_state()?;
        if now != want {
            return Err(Error::InvalidArgument {
                context: t.verb(),
                detail: format!(
                    "QP {:#x} is in {now}; {} needs {want} first (order: RESET → INIT → RTR \
                     → RTS)",
                    self.qpn(),
                    t.target()
                ),
            });
        }
        Ok(())
    }

    /// RESET → INIT.
    pub fn to_init(&mut self, a: &InitAttr) -> Result<()> {
        let t = Transition::ResetToInit;
        self.check_port(t, a.port)?;
        self.check_source(t)?;
        let mut attr = ibv_qp_attr::zeroed();
        attr.qp_state = ffi::IBV_QPS_INIT;
        attr.pkey_index = a.pkey_index;
        attr.port_num = a.port;
        match self.qp_type {
            QpType::Rc => attr.qp_access_flags = a.access.0,
            // UC has no READ or atomics: grant at most local and remote write.
            QpType::Uc => {
                attr.qp_access_flags =
                    a.access.0 & (ffi::IBV_ACCESS_LOCAL_WRITE | ffi::IBV_ACCESS_REMOTE_WRITE)
            }
            QpType::Ud => attr.qkey = a.qkey,
        }
        let qp_type = self.qp_type;
        self.modify(t, &attr, || {
            format!(
                "check port {} and pkey_index {}{}",
                a.port,
                a.pkey_index,
                if qp_type == QpType::Ud {
                    String::new()
                } else {
                    format!(", access flags {:#x}", a.access.0)
                }
            )
        })
    }

    /// INIT → RTR.
    pub fn to_rtr(&mut self, a: &RtrAttr) -> Result<()> {
        let t = Transition::InitToRtr;
        let ctx = self.pd.context().clone();
        if self.qp_type != QpType::Ud {
            check_24bit(t, "dest_qp_num", a.dest_qpn)?;
            check_24bit(t, "rq_psn", a.rq_psn)?;
            check_range(t, "min_rnr_timer", a.min_rnr_timer, 31)?;
            self.check_port(t, a.port)?;
            let pa = ctx.query_port(a.port)?;
            if let Some(max) = pa.max_mtu() {
                if a.path_mtu > max {
                    return Err(Error::InvalidArgument {
                        context: t.verb(),
                        detail: format!(
                            "path_mtu {} > {} port {} max MTU {}",
                            a.path_mtu.bytes(),
                            ctx.name(),
                            a.port,
                            max.bytes()
                        ),
                    });
                }
            }
            let dgid = a.dgid.filter(|g| g.iter().any(|&b| b != 0));
            match dgid {
                Some(_) => {
                    ctx.check_gid_index(a.port, a.sgid_index)
                        .map_err(|e| match e {
                            Error::NotFound { what, hint } => Error::InvalidArgument {
                                context: t.verb(),
                                detail: format!("sgid_index: {what} not found: {hint}"),
                            },
                            other => other,
                        })?;
                }
                None if pa.link_layer == LinkLayer::Ethernet => {
                    return Err(Error::InvalidArgument {
                        context: t.verb(),
                        detail: format!(
                            "{} port {} is Ethernet (RoCE): the remote GID is required (it is \
                             zero or missing)",
                            ctx.name(),
                            a.port
                        ),
                    });
                }
                None => {}
            }
        }
        self.check_source(t)?;
        let mut attr = ibv_qp_attr::zeroed();
        attr.qp_state = ffi::IBV_QPS_RTR;
        if self.qp_type != QpType::Ud {
            attr.path_mtu = a.path_mtu as u32;
            attr.dest_qp_num = a.dest_qpn;
            attr.rq_psn = a.rq_psn;
            attr.ah_attr = ah_attr_raw(a.dlid, a.dgid, a.port, a.sgid_index, a.sl);
            if self.qp_type == QpType::Rc {
                attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
                attr.min_rnr_timer = a.min_rnr_timer;
            }
        }
        let qp_type = self.qp_type;
        self.modify(t, &attr, || {
            let active = ctx
                .query_port(a.port)
                .ok()
                .and_then(|p| p.active_mtu())
                .map_or("?".to_string(), |m| m.bytes().to_string());
            let mut h = format!(
                "check dest_qp_num {:#x} (the peer's QPN), path_mtu {} (local active {active}), \
                 rq_psn {:#x}",
                a.dest_qpn,
                a.path_mtu.bytes(),
                a.rq_psn
            );
            match a.dgid {
                Some(g) => h.push_str(&format!(
                    ", remote GID {} via local GID index {}",
                    super::gid::Gid(g),
                    a.sgid_index
                )),
                None => h.push_str(&format!(", remote LID {:#x}", a.dlid)),
            }
            if qp_type == QpType::Rc {
                h.push_str(&format!(
                    ", max_dest_rd_atomic {} (device max_qp_rd_atom {})",
                    a.max_dest_rd_atomic,
                    ctx.query_device()
                        .map_or("?".into(), |d| d.max_qp_rd_atom.to_string())
                ));
            }
            h
        })
    }

    /// RTR → RTS.
    pub fn to_rts(&mut self, a: &RtsAttr) -> Result<()> {
        let t = Transition::RtrToRts;
        check_24bit(t, "sq_psn", a.sq_psn)?;
        if self.qp_type == QpType::Rc {
            check_range(t, "timeout", a.timeout, 31)?;
            check_range(t, "retry_cnt", a.retry_cnt, 7)?;
            check_range(t, "rnr_retry", a.rnr_retry, 7)?;
        }
        self.check_source(t)?;
        let mut attr = ibv_qp_attr::zeroed();
        attr.qp_state = ffi::IBV_QPS_RTS;
        attr.sq_psn = a.sq_psn;
        if self.qp_type == QpType::Rc {
            attr.timeout = a.timeout;
            attr.retry_cnt = a.retry_cnt;
            attr.rnr_retry = a.rnr_retry;
            attr.max_rd_atomic = a.max_rd_atomic;
        }
        let ctx = self.pd.context().clone();
        self.modify(t, &attr, || {
            format!(
                "check sq_psn {:#x}, timeout {}, retry_cnt {}, rnr_retry {}, max_rd_atomic {} \
                 (device max_qp_init_rd_atom {})",
                a.sq_psn,
                a.timeout,
                a.retry_cnt,
                a.rnr_retry,
                a.max_rd_atomic,
                ctx.query_device()
                    .map_or("?".into(), |d| d.max_qp_init_rd_atom.to_string())
            )
        })
    }

    /// Any → ERR: outstanding work requests are flushed with `WR_FLUSH_ERR`.
    pub fn to_err(&mut self) -> Result<()> {
        let mut attr = ibv_qp_attr::zeroed();
        attr.qp_state = ffi::IBV_QPS_ERR;
        self.modify(Transition::ToErr, &attr, String::new)
    }

    /// Any → RESET: the queues are emptied (nothing is flushed to the CQ).
    pub fn to_reset(&mut self) -> Result<()> {
        let mut attr = ibv_qp_attr::zeroed();
        attr.qp_state = ffi::IBV_QPS_RESET;
        self.modify(Transition::ToReset, &attr, String::new)
    }

    /// The whole bring-up RESET → INIT → RTR → RTS towards `remote` (RC, UC; UD needs no
    /// remote and ignores it). Path MTU: `opts.path_mtu`, else the smaller of the two
    /// endpoints' MTUs. `local` supplies our PSN and GID index.
    pub fn connect(
        &mut self,
        local: &QpEndpoint,
        remote: &QpEndpoint,
        opts: &ConnectOpts,
    ) -> Result<()> {
        let path_mtu = opts.path_mtu.unwrap_or(local.mtu.min(remote.mtu));
        self.to_init(&InitAttr {
            port: opts.port,
            pkey_index: 0,
            access: opts.access,
            qkey: opts.qkey,
        })?;
        let dgid = if remote.gid.iter().any(|&b| b != 0) {
            Some(remote.gid)
        } else {
            None
        };
        self.to_rtr(&RtrAttr {
            port: opts.port,
            dest_qpn: remote.qpn,
            rq_psn: remote.psn,
            path_mtu,
            dlid: remote.lid,
            dgid,
            sgid_index: local.gid_index,
            sl: opts.sl,
            max_dest_rd_atomic: opts.max_dest_rd_atomic,
            min_rnr_timer: opts.min_rnr_timer,
        })?;
        self.to_rts(&RtsAttr {
            sq_psn: local.psn,
            timeout: opts.timeout,
            retry_cnt: opts.retry_cnt,
            rnr_retry: opts.rnr_retry,
            max_rd_atomic: opts.max_rd_atomic,
        })
    }

    /// `ibv_modify_qp` with a caller-built attribute and mask, for what the typed transitions
    /// do not cover. On failure the error names the target state and compares `mask` with
    /// what the kernel requires and allows for this transition.
    pub fn modify_raw(&mut self, attr: &ibv_qp_attr, mask: c_int) -> Result<()> {
        let target = QpState::from_ibv(attr.qp_state);
        let from = self.query_state().ok();
        let t = match (from, target) {
            (_, QpState::Err) => Some(Transition::ToErr),
            (_, QpState::Reset) => Some(Transition::ToReset),
            (Some(QpState::Reset), QpState::Init) => Some(Transition::ResetToInit),
            (Some(QpState::Init), QpState::Rtr) => Some(Transition::InitToRtr),
            (Some(QpState::Rtr), QpState::Rts) => Some(Transition::RtrToRts),
            _ => None,
        };
        let verb = match target {
            QpState::Init => "ibv_modify_qp(INIT)",
            QpState::Rtr => "ibv_modify_qp(RTR)",
            QpState::Rts => "ibv_modify_qp(RTS)",
            QpState::Err => "ibv_modify_qp(ERR)",
            QpState::Reset => "ibv_modify_qp(RESET)",
            _ => "ibv_modify_qp",
        };
        let mut a = *attr;
        // SAFETY: live QP; `a` is a valid attr (plain data); the kernel validates the values.
        let rc = unsafe { (self.pd.context().verbs().ibv_modify_qp)(self.raw, &mut a, mask) };
        if rc == 0 {
            if mask & ffi::IBV_QP_STATE != 0 {
                self.state = target;
            }
            return Ok(());
        }
        let errno = last_errno_or(rc);
        let from_s = from.map_or("?".to_string(), |s| s.to_string());
        let hint = match t {
            None => format!(
                "{from_s} → {target} is not a transition of the QP state machine (RESET → \
                 INIT → RTR → RTS, any → ERR or RESET)"
            ),
            Some(t) => {
                let req = transition_mask(t, self.qp_type);
                let opt = optional_mask(t, self.qp_type);
                let missing = req & !mask;
                let extra = mask & !(req | opt);
                let mut parts = Vec::new();
                if mask & ffi::IBV_QP_STATE == 0 {
                    parts.push("the mask lacks STATE".to_string());
                }
                if missing & !ffi::IBV_QP_STATE != 0 {
                    parts.push(format!(
                        "{} {t} on {} requires {}",
                        "the mask lacks what",
                        self.qp_type,
                        mask_names(missing)
                    ));
                }
                if extra != 0 {
                    parts.push(format!(
                        "{} not allowed in {t} on {} (unzeroed attributes?)",
                        mask_names(extra),
                        self.qp_type
                    ));
                }
                if parts.is_empty() {
                    parts.push(format!(
                        "the mask is right for {t} on {}: check the values",
                        self.qp_type
                    ));
                }
                parts.join("; ")
            }
        };
        Err(Error::verb(verb, errno, hint))
    }

    fn modify(
        &mut self,
        t: Transition,
        attr: &ibv_qp_attr,
        hint: impl FnOnce() -> String,
    ) -> Result<()> {
        let mask = transition_mask(t, self.qp_type);
        let mut a = *attr;
        // SAFETY: live QP; `a` is a zeroed attr with exactly the fields of `mask` filled.
        let rc = unsafe { (self.pd.context().verbs().ibv_modify_qp)(self.raw, &mut a, mask) };
        if rc != 0 {
            let errno = last_errno_or(rc);
            let mut h = hint();
            if errno == libc::ETIMEDOUT || errno == libc::ENETUNREACH || errno == libc::EHOSTUNREACH
            {
                h = format!(
                    "{}: the remote GID is not reachable from the local GID's network device; {h}",
                    errno_name(errno)
                );
            }
            return Err(Error::verb(t.verb(), errno, h));
        }
        self.state = t.target();
        Ok(())
    }

    fn check_port(&self, t: Transition, port: u8) -> Result<()> {
        let ports = self.pd.context().query_device()?.phys_port_cnt;
        if port == 0 || port > ports {
            return Err(Error::InvalidArgument {
                context: t.verb(),
                detail: format!(
                    "port {port}: {} has ports 1..={ports}",
                    self.pd.context().name()
                ),
            });
        }
        Ok(())
    }
}
