//! A step-by-step probe of what `Mlx5Device::create_qp` (the `Provider` method) relies on, for
//! first contact with a device (`rdma-direct selftest`): a thread domain and a parent domain, a QP
//! from `mlx5dv_create_qp` on it, what `mlx5dv_init_obj` reports for that QP and a CQ, and the
//! teardown in libmlx5's order — each step on its own, so a failure names the step.
//!
//! Contract: [`DvProbe::domains`], then [`DvProbe::create_qp`], then [`DvProbe::layout`],
//! then [`DvProbe::teardown`]; dropping the probe frees what is left in the same order,
//! ignoring refusals. [`DvLayout::problems`] states what the hot path needs of the layout.

use super::device::Mlx5Device;
use crate::ffi::{self, ibv_pd, ibv_qp, ibv_qp_init_attr_ex, ibv_td, mlx5dv_qp_init_attr};
use crate::{Error, Result};
use rdma_direct_core::control::{self, Context};

/// The raw objects of the probe.
pub struct DvProbe {
    ctx: Context,
    mlx5: &'static ffi::Mlx5,
    _pd: control::Pd,
    cq: control::Cq,
    td: *mut ibv_td,
    parent: *mut ibv_pd,
    qp: *mut ibv_qp,
}

impl std::fmt::Debug for DvProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DvProbe")
            .field("ctx", &self.ctx)
            .finish_non_exhaustive()
    }
}

/// What `mlx5dv_init_obj` reported for the probe's QP and CQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DvLayout {
    /// SQ WQEBBs and stride.
    pub sq_wqe_cnt: u32,
    /// SQ stride (bytes).
    pub sq_stride: u32,
    /// RQ entries.
    pub rq_wqe_cnt: u32,
    /// RQ stride (bytes).
    pub rq_stride: u32,
    /// Address of the QP's doorbell record.
    pub qp_dbrec: usize,
    /// Address of the BlueFlame register.
    pub bf_reg: usize,
    /// `bf.size` (0: no BlueFlame).
    pub bf_size: u32,
    /// CQEs in the CQ.
    pub cqe_cnt: u32,
    /// CQE size.
    pub cqe_size: u32,
    /// Address of the CQ's doorbell record.
    pub cq_dbrec: usize,
    /// Address of the CQ's UAR page.
    pub cq_uar: usize,
}

impl DvLayout {
    /// What the mlx5 hot path cannot work with, one line each (empty: all good):
    /// power-of-two rings, SQ stride 64, RQ stride a power of two >= 16, doorbell records
    /// 4-byte aligned, a BlueFlame register, `bf.size` 0 or a power of two >= 64, CQE size 64
    /// or 128, a CQ UAR.
    pub fn problems(&self) -> Vec<String> {
        let mut bad = Vec::new();
        let pow2 = |n: u32| n.is_power_of_two();
        if !pow2(self.sq_wqe_cnt) || self.sq_stride != 64 {
            bad.push(format!(
                "SQ wqe_cnt {} stride {}",
                self.sq_wqe_cnt, self.sq_stride
            ));
        }
        if !pow2(self.rq_wqe_cnt) || !pow2(self.rq_stride) || self.rq_stride < 16 {
            bad.push(format!(
                "RQ wqe_cnt {} stride {}",
                self.rq_wqe_cnt, self.rq_stride
            ));
        }
        if self.qp_dbrec == 0 || self.qp_dbrec % 4 != 0 {
            bad.push(format!(
                "QP dbrec {:#x} (not 4-byte aligned)",
                self.qp_dbrec
            ));
        }
        if self.bf_reg == 0 {
            bad.push("no BlueFlame register (bf.reg null)".into());
        }
        if self.bf_size != 0 && (!pow2(self.bf_size) || self.bf_size < 64) {
            bad.push(format!("bf.size {}", self.bf_size));
        }
        if !pow2(self.cqe_cnt) || (self.cqe_size != 64 && self.cqe_size != 128) {
            bad.push(format!(
                "CQ cqe_cnt {} cqe_size {}",
                self.cqe_cnt, self.cqe_size
            ));
        }
        if self.cq_dbrec == 0 || self.cq_dbrec % 4 != 0 {
            bad.push(format!(
                "CQ dbrec {:#x} (not 4-byte aligned)",
                self.cq_dbrec
            ));
        }
        if self.cq_uar == 0 {
            bad.push("CQ UAR null (no arming by hand)".into());
        }
        bad
    }
}

impl DvProbe {
    /// A PD, a CQ, a thread domain (`ibv_alloc_td`: libmlx5 gives it a dedicated bfreg on a
    /// dynamic UAR) and a parent domain over both.
    pub fn domains(dev: &Mlx5Device) -> Result<DvProbe> {
        let ctx = dev.context().clone();
        let mlx5 = ffi::mlx5()?;
        let pd = control::Pd::new(&ctx)?;
        let cq = control::Cq::new(&ctx, 64)?;
        // SAFETY: a live context.
        let td = unsafe { ffi::alloc_td(ctx.as_ptr()) }?;
        let mut p = DvProbe {
            ctx,
            mlx5,
            _pd: pd,
            cq,
            td,
            parent: std::ptr::null_mut(),
            qp: std::ptr::null_mut(),
        };
        // SAFETY: live context, PD and TD (held by `p`).
        p.parent = unsafe { ffi::alloc_parent_domain(p.ctx.as_ptr(), p._pd.as_ptr(), td) }?;
        Ok(p)
    }

    /// An RC QP from `mlx5dv_create_qp` on the parent domain, scatter-to-CQE disabled:
    /// returns its QPN and the caps granted (send_wr, recv_wr, inline).
    pub fn create_qp(&mut self) -> Result<(u32, [u32; 3])> {
        let mut attr = ibv_qp_init_attr_ex::zeroed();
        attr.send_cq = self.cq.as_ptr();
        attr.recv_cq = self.cq.as_ptr();
        attr.cap = ffi::ibv_qp_cap {
            max_send_wr: 16,
            max_recv_wr: 16,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 64,
        };
        attr.qp_type = ffi::IBV_QPT_RC;
        attr.comp_mask = ffi::IBV_QP_INIT_ATTR_PD;
        attr.pd = self.parent;
        let mut dv = mlx5dv_qp_init_attr {
            comp_mask: ffi::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS,
            create_flags: ffi::MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
            ..Default::default()
        };
        // SAFETY: live context, CQ and parent domain (held by self); attrs fully initialised.
        let qp = unsafe { (self.mlx5.mlx5dv_create_qp)(self.ctx.as_ptr(), &mut attr, &mut dv) };
        if qp.is_null() {
            let errno = std::io::Error::last_os_error()
                .raw_os_error()
                .unwrap_or(libc::EIO);
            return Err(Error::verb(
                "mlx5dv_create_qp",
                errno,
                "RC, 16/16 WRs, inline 64, on a parent domain with a thread domain, \
                 scatter-to-CQE disabled",
            ));
        }
        self.qp = qp;
        let cap = attr.cap;
        // SAFETY: a live QP.
        let qpn = unsafe { (*qp).qp_num };
        Ok((qpn, [cap.max_send_wr, cap.max_recv_wr, cap.max_inline_data]))
    }

    /// `mlx5dv_init_obj` on the QP (after [`DvProbe::create_qp`]) and the CQ.
    pub fn layout(&self) -> Result<DvLayout> {
        if self.qp.is_null() {
            return Err(Error::InvalidArgument {
                context: "DvProbe::layout",
                detail: "no QP yet (call create_qp first)".into(),
            });
        }
        let mut q = ffi::mlx5dv_qp::zeroed();
        let mut obj = ffi::mlx5dv_obj::zeroed();
        obj.qp.r#in = self.qp;
        obj.qp.out = &mut q;
        // SAFETY: a live QP of an mlx5 context and a zeroed, writable out struct.
        let rc = unsafe { (self.mlx5.mlx5dv_init_obj)(&mut obj, ffi::MLX5DV_OBJ_QP) };
        if rc != 0 {
            return Err(Error::verb("mlx5dv_init_obj(QP)", rc, ""));
        }
        let c = self.cq.mlx5dv()?;
        Ok(DvLayout {
            sq_wqe_cnt: q.sq.wqe_cnt,
            sq_stride: q.sq.stride,
            rq_wqe_cnt: q.rq.wqe_cnt,
            rq_stride: q.rq.stride,
            qp_dbrec: q.dbrec as usize,
            bf_reg: q.bf.reg as usize,
            bf_size: q.bf.size,
            cqe_cnt: c.cqe_cnt,
            cqe_size: c.cqe_size,
            cq_dbrec: c.dbrec as usize,
            cq_uar: c.cq_uar as usize,
        })
    }

    /// Free the QP, the parent domain, then the TD, each of which must return 0; the first
    /// refusal is the error (what is left is freed on drop).
    pub fn teardown(mut self) -> Result<()> {
        self.free()
    }

    fn free(&mut self) -> Result<()> {
        let v = self.ctx.verbs();
        let mut first = None;
        if !self.qp.is_null() {
            // SAFETY: the QP made by create_qp, freed once (nulled).
            let rc = unsafe { (v.ibv_destroy_qp)(self.qp) };
            self.qp = std::ptr::null_mut();
            if rc != 0 {
                first.get_or_insert(Error::verb("ibv_destroy_qp", rc, ""));
            }
        }
        if !self.parent.is_null() {
            // SAFETY: the parent domain made by domains(); its QP is gone; freed once.
            let rc = unsafe { (v.ibv_dealloc_pd)(self.parent) };
            if rc != 0 {
                first.get_or_insert(Error::verb(
                    "ibv_dealloc_pd(parent domain)",
                    rc,
                    "refused after its QP was destroyed",
                ));
            } else {
                self.parent = std::ptr::null_mut();
            }
        }
        if !self.td.is_null() && self.parent.is_null() {
            // SAFETY: the TD made by domains(); no parent domain uses it; freed once.
            let rc = unsafe { ffi::dealloc_td(self.ctx.as_ptr(), self.td) };
            if rc != 0 {
                first.get_or_insert(Error::verb(
                    "ibv_dealloc_td",
                    rc,
                    "refused after its parent domain was freed: libmlx5 still counts a \
                     reference to it",
                ));
            } else {
                self.td = std::ptr::null_mut();
            }
        }
        first.map_or(Ok(()), Err)
    }
}

impl Drop for DvProbe {
    fn drop(&mut self) {
        let _ = self.free();
    }
}
