//! The mlx5-only rungs, each one step of [`DvProbe`]: a thread domain and a parent domain, a
//! QP from `mlx5dv_create_qp` on it, what `mlx5dv_init_obj` says about that QP and a CQ, and
//! the teardown in libmlx5's order.

use crate::providers::mlx5::probe::DvProbe;
use crate::providers::mlx5::Mlx5Device;

use super::Ladder;

/// Rungs "thread and parent domain", "DV QP", "init_obj sanity". Returns the probe and the
/// `bf.size` libmlx5 reported for the QP's bfreg.
pub(super) fn rungs(l: &mut Ladder, dev: &Mlx5Device) -> Option<(DvProbe, u32)> {
    let mut probe = l.rung(
        "thread and parent domain",
        "ibv_alloc_td (libmlx5 gives it a dedicated bfreg on a dynamic UAR), then \
         ibv_alloc_parent_domain over a PD and that TD",
        || {
            DvProbe::domains(dev)
                .map(|p| (p, "TD and parent domain allocated".to_string()))
                .map_err(|e| {
                    format!(
                        "{e} (without a thread domain the mlx5 provider refuses QPs unless \
                         Mlx5Device::allow_shared_bfreg(true))"
                    )
                })
        },
    )?;
    l.rung(
        "DV QP",
        "mlx5dv_create_qp: an RC QP on the parent domain with \
         MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE",
        || {
            let (qpn, [s, r, i]) = probe.create_qp().map_err(|e| e.to_string())?;
            Ok((
                (),
                format!("QPN {qpn:#x}, granted send_wr {s} recv_wr {r} inline {i}"),
            ))
        },
    )?;
    let bf_size = l.rung(
        "init_obj sanity",
        "mlx5dv_init_obj(QP, CQ): power-of-two rings, SQ stride 64, RQ stride a power of two \
         >= 16, doorbell records 4-byte aligned, a BlueFlame register, bf.size 0 or a power of \
         two >= 64, CQE size 64 or 128, a CQ UAR",
        || {
            let d = probe.layout().map_err(|e| e.to_string())?;
            let bad = d.problems();
            if !bad.is_empty() {
                return Err(bad.join("; "));
            }
            Ok((
                d.bf_size,
                format!(
                    "SQ {}x{} B, RQ {}x{} B, bf.size {}{}, CQ {}x{} B",
                    d.sq_wqe_cnt,
                    d.sq_stride,
                    d.rq_wqe_cnt,
                    d.rq_stride,
                    d.bf_size,
                    if d.bf_size == 0 {
                        " (doorbell only)"
                    } else {
                        ""
                    },
                    d.cqe_cnt,
                    d.cqe_size
                ),
            ))
        },
    )?;
    Some((probe, bf_size))
}

/// Rung "teardown": the probe's objects freed in libmlx5's order, each verb returning 0.
pub(super) fn teardown(l: &mut Ladder, probe: DvProbe) {
    l.rung(
        "teardown",
        "ibv_destroy_qp, then ibv_dealloc_pd(parent domain), then ibv_dealloc_td, each 0",
        || {
            probe
                .teardown()
                .map(|()| ((), "freed in order".to_string()))
                .map_err(|e| e.to_string())
        },
    );
}
