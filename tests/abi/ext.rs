//! The mirrors of `src/core/ffi/ext.rs` (thread domains, extended QP creation, DC): sizes,
//! offsets and values.

use super::*;

/// Adds this file's entries to `m` (keys as in `fixtures/abi/abi.txt`).
pub(super) fn layout(m: &mut BTreeMap<String, i64>) {
    size!(m, ibv_td_init_attr);
    off!(m, "ibv_td_init_attr.comp_mask", ibv_td_init_attr, comp_mask);
    size!(m, ibv_td);
    off!(m, "ibv_td.context", ibv_td, context);
    size!(m, ibv_parent_domain_init_attr);
    off!(
        m,
        "ibv_parent_domain_init_attr.pd",
        ibv_parent_domain_init_attr,
        pd
    );
    off!(
        m,
        "ibv_parent_domain_init_attr.td",
        ibv_parent_domain_init_attr,
        td
    );
    off!(
        m,
        "ibv_parent_domain_init_attr.comp_mask",
        ibv_parent_domain_init_attr,
        comp_mask
    );
    off!(
        m,
        "ibv_parent_domain_init_attr.alloc",
        ibv_parent_domain_init_attr,
        alloc
    );
    off!(
        m,
        "ibv_parent_domain_init_attr.free",
        ibv_parent_domain_init_attr,
        free
    );
    off!(
        m,
        "ibv_parent_domain_init_attr.pd_context",
        ibv_parent_domain_init_attr,
        pd_context
    );
    size!(m, ibv_rx_hash_conf);
    off!(
        m,
        "ibv_rx_hash_conf.rx_hash_key",
        ibv_rx_hash_conf,
        rx_hash_key
    );
    off!(
        m,
        "ibv_rx_hash_conf.rx_hash_fields_mask",
        ibv_rx_hash_conf,
        rx_hash_fields_mask
    );
    size!(m, ibv_qp_init_attr_ex);
    off!(
        m,
        "ibv_qp_init_attr_ex.qp_context",
        ibv_qp_init_attr_ex,
        qp_context
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.send_cq",
        ibv_qp_init_attr_ex,
        send_cq
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.recv_cq",
        ibv_qp_init_attr_ex,
        recv_cq
    );
    off!(m, "ibv_qp_init_attr_ex.srq", ibv_qp_init_attr_ex, srq);
    off!(m, "ibv_qp_init_attr_ex.cap", ibv_qp_init_attr_ex, cap);
    off!(
        m,
        "ibv_qp_init_attr_ex.qp_type",
        ibv_qp_init_attr_ex,
        qp_type
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.sq_sig_all",
        ibv_qp_init_attr_ex,
        sq_sig_all
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.comp_mask",
        ibv_qp_init_attr_ex,
        comp_mask
    );
    off!(m, "ibv_qp_init_attr_ex.pd", ibv_qp_init_attr_ex, pd);
    off!(m, "ibv_qp_init_attr_ex.xrcd", ibv_qp_init_attr_ex, xrcd);
    off!(
        m,
        "ibv_qp_init_attr_ex.create_flags",
        ibv_qp_init_attr_ex,
        create_flags
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.max_tso_header",
        ibv_qp_init_attr_ex,
        max_tso_header
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.rwq_ind_tbl",
        ibv_qp_init_attr_ex,
        rwq_ind_tbl
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.rx_hash_conf",
        ibv_qp_init_attr_ex,
        rx_hash_conf
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.source_qpn",
        ibv_qp_init_attr_ex,
        source_qpn
    );
    off!(
        m,
        "ibv_qp_init_attr_ex.send_ops_flags",
        ibv_qp_init_attr_ex,
        send_ops_flags
    );
    size!(m, mlx5dv_dc_init_attr);
    off!(
        m,
        "mlx5dv_dc_init_attr.dc_type",
        mlx5dv_dc_init_attr,
        dc_type
    );
    off!(
        m,
        "mlx5dv_dc_init_attr.dct_access_key",
        mlx5dv_dc_init_attr,
        dct_access_key
    );
    size!(m, mlx5dv_qp_init_attr);
    off!(
        m,
        "mlx5dv_qp_init_attr.comp_mask",
        mlx5dv_qp_init_attr,
        comp_mask
    );
    off!(
        m,
        "mlx5dv_qp_init_attr.create_flags",
        mlx5dv_qp_init_attr,
        create_flags
    );
    off!(
        m,
        "mlx5dv_qp_init_attr.dc_init_attr",
        mlx5dv_qp_init_attr,
        dc_init_attr
    );
    off!(
        m,
        "mlx5dv_qp_init_attr.send_ops_flags",
        mlx5dv_qp_init_attr,
        send_ops_flags
    );
    size!(m, verbs_context);
    off!(m, "verbs_context.query_port", verbs_context, query_port);
    off!(
        m,
        "verbs_context.modify_qp_rate_limit",
        verbs_context,
        modify_qp_rate_limit
    );
    off!(
        m,
        "verbs_context.alloc_parent_domain",
        verbs_context,
        alloc_parent_domain
    );
    off!(m, "verbs_context.dealloc_td", verbs_context, dealloc_td);
    off!(m, "verbs_context.alloc_td", verbs_context, alloc_td);
    off!(m, "verbs_context.create_cq_ex", verbs_context, create_cq_ex);
    off!(m, "verbs_context.priv", verbs_context, priv_);
    off!(m, "verbs_context.create_qp_ex", verbs_context, create_qp_ex);
    off!(m, "verbs_context.close_xrcd", verbs_context, close_xrcd);
    off!(
        m,
        "verbs_context._ABI_placeholder3",
        verbs_context,
        abi_placeholder3
    );
    off!(m, "verbs_context.sz", verbs_context, sz);
    off!(m, "verbs_context.context", verbs_context, context);
    m.insert(
        "value VERBS_ABI_IS_EXTENDED".into(),
        VERBS_ABI_IS_EXTENDED as i64,
    );
    val!(m, IBV_QP_INIT_ATTR_PD);
    val!(m, MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS);
    val!(m, MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE);
}
