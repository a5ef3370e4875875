//! The mlx5 direct-verbs view of verbs objects (`mlx5dv_init_obj`), for the mlx5 provider.
//!
//! Only an mlx5 device has these: on any other device (rxe, ...) every call returns
//! [`Error::Unsupported`] without touching libmlx5's internals (`mlx5dv_init_obj` casts its
//! inputs to libmlx5's own structs, so it must never see another provider's objects).
//! The returned structs point into queue memory that lives as long as the verbs object.

use super::device::Context;
use super::qp::Qp;
use super::resources::{Cq, Srq};
use crate::error::{Error, Result};
use crate::ffi::{self, mlx5dv_cq, mlx5dv_obj, mlx5dv_qp, mlx5dv_srq};

impl Context {
    /// Whether libmlx5 drives this device (false when libmlx5 is not installed).
    pub fn is_mlx5(&self) -> bool {
        let Ok(m) = ffi::mlx5() else {
            return false;
        };
        // SAFETY: live context, so `device` is a live device; mlx5dv_is_supported only
        // compares the device's driver ops with libmlx5's.
        unsafe { (m.mlx5dv_is_supported)((*self.as_ptr()).device) }
    }

    fn mlx5_for(&self, what: &str) -> Result<&'static ffi::Mlx5> {
        let m = ffi::mlx5()?;
        if !self.is_mlx5() {
            return Err(Error::Unsupported {
                what: format!(
                    "mlx5dv_init_obj({what}) on {}: not an mlx5 device (the mlx5 provider needs \
                     ConnectX hardware; use the verbs provider or the sim)",
                    self.name()
                ),
            });
        }
        Ok(m)
    }
}

fn init_obj(m: &ffi::Mlx5, obj: &mut mlx5dv_obj, ty: u64, what: &'static str) -> Result<()> {
    // SAFETY: `obj` is zeroed except the one in/out pair of type `ty`, whose `in` is a live
    // object of an mlx5 device (checked by the caller) and `out` a writable struct.
    let rc = unsafe { (m.mlx5dv_init_obj)(obj, ty) };
    if rc != 0 {
        return Err(Error::verb(what, rc, ""));
    }
    Ok(())
}

impl Qp {
    /// `mlx5dv_init_obj(MLX5DV_OBJ_QP)`: the SQ/RQ rings, doorbell record and BlueFlame
    /// register of this QP.
    pub fn mlx5dv(&self) -> Result<mlx5dv_qp> {
        let m = self.pd().context().mlx5_for("QP")?;
        let mut out = mlx5dv_qp::zeroed();
        let mut obj = mlx5dv_obj::zeroed();
        obj.qp.r#in = self.as_ptr();
        obj.qp.out = &mut out;
        init_obj(m, &mut obj, ffi::MLX5DV_OBJ_QP, "mlx5dv_init_obj(QP)")?;
        Ok(out)
    }
}

impl Cq {
    /// `mlx5dv_init_obj(MLX5DV_OBJ_CQ)`: the CQE ring and doorbell record. The CQ becomes
    /// "DV owned": stale CQEs of a reset QP are the caller's to purge.
    pub fn mlx5dv(&self) -> Result<mlx5dv_cq> {
        let m = self.context().mlx5_for("CQ")?;
        let mut out = mlx5dv_cq::zeroed();
        let mut obj = mlx5dv_obj::zeroed();
        obj.cq.r#in = self.as_ptr();
        obj.cq.out = &mut out;
        init_obj(m, &mut obj, ffi::MLX5DV_OBJ_CQ, "mlx5dv_init_obj(CQ)")?;
        Ok(out)
    }
}

impl Srq {
    /// `mlx5dv_init_obj(MLX5DV_OBJ_SRQ)` with the SRQ number requested.
    pub fn mlx5dv(&self) -> Result<mlx5dv_srq> {
        let m = self.pd().context().mlx5_for("SRQ")?;
        let mut out = mlx5dv_srq::zeroed();
        out.comp_mask = ffi::MLX5DV_SRQ_MASK_SRQN;
        let mut obj = mlx5dv_obj::zeroed();
        obj.srq.r#in = self.as_ptr();
        obj.srq.out = &mut out;
        init_obj(m, &mut obj, ffi::MLX5DV_OBJ_SRQ, "mlx5dv_init_obj(SRQ)")?;
        Ok(out)
    }
}
