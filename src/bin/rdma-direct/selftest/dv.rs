//! The mlx5-only rungs, done by hand through libibverbs and libmlx5 so each step is seen on
//! its own: a thread domain and a parent domain, a QP from `mlx5dv_create_qp` on it, what
//! `mlx5dv_init_obj` says about that QP and a CQ, and the teardown in libmlx5's order.

use rdma_direct::ffi::{self, ibv_pd, ibv_qp, ibv_qp_init_attr_ex, ibv_td, mlx5dv_qp_init_attr};
use rdma_direct::verbs::{self, Context};

use super::Ladder;

/// The raw objects of the mlx5 rungs, freed by [`teardown`] (or, if the ladder stopped
/// first, on drop, in the same order, ignoring errors).
pub struct RawDv {
    ctx: Context,
    pd: verbs::Pd,
    cq: verbs::Cq,
    td: *mut ibv_td,
    parent: *mut ibv_pd,
    qp: *mut ibv_qp,
}

impl Drop for RawDv {
    fn drop(&mut self) {
        let _ = self.free();
    }
}

impl RawDv {
    /// Frees QP, parent domain, TD in that order; the first refusal, as "verb: errno".
    fn free(&mut self) -> Result<(), String> {
        let v = self.ctx.verbs();
        let mut first = None;
        if !self.qp.is_null() {
            // SAFETY: a QP made by mlx5dv_create_qp below, freed once (nulled).
            let rc = unsafe { (v.ibv_destroy_qp)(self.qp) };
            self.qp = std::ptr::null_mut();
            if rc != 0 {
                first.get_or_insert(format!("ibv_destroy_qp returned {rc}"));
            }
        }
        if !self.parent.is_null() {
            // SAFETY: the parent domain made below; its QP is gone; freed once.
            let rc = unsafe { (v.ibv_dealloc_pd)(self.parent) };
            if rc != 0 {
                first.get_or_insert(format!(
                    "ibv_dealloc_pd(parent domain) returned {rc} after its QP was destroyed"
                ));
            } else {
                self.parent = std::ptr::null_mut();
            }
        }
        if !self.td.is_null() && self.parent.is_null() {
            // SAFETY: the TD made below; no parent domain uses it any more; freed once.
            let rc = unsafe { ffi::dealloc_td(self.ctx.as_ptr(), self.td) };
            if rc != 0 {
                first.get_or_insert(format!(
                    "ibv_dealloc_td returned {rc} ({}) after its parent domain was freed: \
                     libmlx5 still counts a reference to it",
                    errno_name(rc)
                ));
            } else {
                self.td = std::ptr::null_mut();
            }
        }
        first.map_or(Ok(()), Err)
    }
}

fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EBUSY => "EBUSY",
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        _ => "errno",
    }
}

/// Rungs "thread and parent domain", "DV QP", "init_obj sanity". Returns the raw objects
/// and the `bf.size` libmlx5 reported for the QP's bfreg.
pub fn rungs(l: &mut Ladder, ctx: &Context) -> Option<(RawDv, u32)> {
    let mut raw = l.rung(
        "thread and parent domain",
        "ibv_alloc_td (libmlx5 gives it a dedicated bfreg on a dynamic UAR), then \
         ibv_alloc_parent_domain over a PD and that TD",
        || {
            let pd = verbs::Pd::new(ctx).map_err(|e| e.to_string())?;
            let cq = verbs::Cq::new(ctx, 64).map_err(|e| e.to_string())?;
            // SAFETY: a live context.
            let td = unsafe { ffi::alloc_td(ctx.as_ptr()) }.map_err(|e| {
                format!(
                    "{e} (without a thread domain the mlx5 provider refuses QPs unless \
                     Mlx5Device::allow_shared_bfreg(true))"
                )
            })?;
            let mut raw = RawDv {
                ctx: ctx.clone(),
                pd,
                cq,
                td,
                parent: std::ptr::null_mut(),
                qp: std::ptr::null_mut(),
            };
            // SAFETY: live context, PD and TD (held by `raw`).
            raw.parent = unsafe { ffi::alloc_parent_domain(ctx.as_ptr(), raw.pd.as_ptr(), td) }
                .map_err(|e| e.to_string())?;
            Ok((raw, "TD and parent domain allocated".to_string()))
        },
    )?;
    l.rung(
        "DV QP",
        "mlx5dv_create_qp: an RC QP on the parent domain with \
         MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE",
        || {
            let mut attr = ibv_qp_init_attr_ex::zeroed();
            attr.send_cq = raw.cq.as_ptr();
            attr.recv_cq = raw.cq.as_ptr();
            attr.cap = ffi::ibv_qp_cap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 64,
            };
            attr.qp_type = ffi::IBV_QPT_RC;
            attr.comp_mask = ffi::IBV_QP_INIT_ATTR_PD;
            attr.pd = raw.parent;
            let mut dv = mlx5dv_qp_init_attr {
                comp_mask: ffi::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
                create_flags: ffi::MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
                ..Default::default()
            };
            let m = ffi::mlx5().map_err(|e| e.to_string())?;
            // SAFETY: live context, CQ and parent domain; attrs fully initialised.
            let qp = unsafe { (m.mlx5dv_create_qp)(ctx.as_ptr(), &mut attr, &mut dv) };
            if qp.is_null() {
                let e = std::io::Error::last_os_error();
                return Err(format!("mlx5dv_create_qp failed: {e}"));
            }
            raw.qp = qp;
            Ok((
                (),
                format!(
                    "QPN {:#x}, granted send_wr {} recv_wr {} inline {}",
                    // SAFETY: a live QP.
                    unsafe { (*qp).qp_num },
                    attr.cap.max_send_wr,
                    attr.cap.max_recv_wr,
                    attr.cap.max_inline_data
                ),
            ))
        },
    )?;
    let bf_size = l.rung(
        "init_obj sanity",
        "mlx5dv_init_obj(QP, CQ): power-of-two rings, SQ stride 64, RQ stride a power of two \
         >= 16, doorbell records 4-byte aligned, a BlueFlame register, bf.size 0 or a power of \
         two >= 64, CQE size 64 or 128, a CQ UAR",
        || init_obj_sanity(&raw),
    )?;
    Some((raw, bf_size))
}

fn init_obj_sanity(raw: &RawDv) -> Result<(u32, String), String> {
    let q = raw_qp_dv(raw)?;
    let c = raw.cq.mlx5dv().map_err(|e| e.to_string())?;
    let mut bad = Vec::new();
    let pow2 = |n: u32| n.is_power_of_two();
    if q.sq.buf.is_null() || !pow2(q.sq.wqe_cnt) || q.sq.stride != 64 {
        bad.push(format!(
            "SQ buf {:p} wqe_cnt {} stride {}",
            q.sq.buf, q.sq.wqe_cnt, q.sq.stride
        ));
    }
    if q.rq.buf.is_null() || !pow2(q.rq.wqe_cnt) || !pow2(q.rq.stride) || q.rq.stride < 16 {
        bad.push(format!(
            "RQ buf {:p} wqe_cnt {} stride {}",
            q.rq.buf, q.rq.wqe_cnt, q.rq.stride
        ));
    }
    if q.dbrec.is_null() || q.dbrec as usize % 4 != 0 {
        bad.push(format!("QP dbrec {:p} (not 4-byte aligned)", q.dbrec));
    }
    if q.bf.reg.is_null() {
        bad.push("no BlueFlame register (bf.reg null)".into());
    }
    if q.bf.size != 0 && (!pow2(q.bf.size) || q.bf.size < 64) {
        bad.push(format!("bf.size {}", q.bf.size));
    }
    if c.buf.is_null() || !pow2(c.cqe_cnt) || (c.cqe_size != 64 && c.cqe_size != 128) {
        bad.push(format!(
            "CQ buf {:p} cqe_cnt {} cqe_size {}",
            c.buf, c.cqe_cnt, c.cqe_size
        ));
    }
    if c.dbrec.is_null() || c.dbrec as usize % 4 != 0 {
        bad.push(format!("CQ dbrec {:p} (not 4-byte aligned)", c.dbrec));
    }
    if c.cq_uar.is_null() {
        bad.push("CQ UAR null (no arming by hand)".into());
    }
    if !bad.is_empty() {
        return Err(bad.join("; "));
    }
    Ok((
        q.bf.size,
        format!(
            "SQ {}x{} B, RQ {}x{} B, bf.size {}{}, CQ {}x{} B",
            q.sq.wqe_cnt,
            q.sq.stride,
            q.rq.wqe_cnt,
            q.rq.stride,
            q.bf.size,
            if q.bf.size == 0 {
                " (doorbell only)"
            } else {
                ""
            },
            c.cqe_cnt,
            c.cqe_size
        ),
    ))
}

fn raw_qp_dv(raw: &RawDv) -> Result<ffi::mlx5dv_qp, String> {
    let m = ffi::mlx5().map_err(|e| e.to_string())?;
    let mut out = ffi::mlx5dv_qp::zeroed();
    let mut obj = ffi::mlx5dv_obj::zeroed();
    obj.qp.r#in = raw.qp;
    obj.qp.out = &mut out;
    // SAFETY: a live QP of an mlx5 context and a zeroed, writable out struct.
    let rc = unsafe { (m.mlx5dv_init_obj)(&mut obj, ffi::MLX5DV_OBJ_QP) };
    if rc != 0 {
        return Err(format!("mlx5dv_init_obj(QP) returned {rc}"));
    }
    Ok(out)
}

/// Rung "teardown": the raw objects freed in libmlx5's order, each verb returning 0.
pub fn teardown(l: &mut Ladder, mut raw: RawDv) {
    l.rung(
        "teardown",
        "ibv_destroy_qp, then ibv_dealloc_pd(parent domain), then ibv_dealloc_td, each 0",
        || raw.free().map(|()| ((), "freed in order".to_string())),
    );
}
