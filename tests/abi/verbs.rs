//! The mirrors of `src/core/ffi/types` (`verbs.h` and `mlx5dv.h`): sizes, offsets and values.

use super::*;

/// Adds this file's entries to `m` (keys as in `fixtures/abi/abi.txt`).
pub(super) fn layout(m: &mut BTreeMap<String, i64>) {
    size!(m, ibv_device);
    off!(m, "ibv_device._ops", ibv_device, _ops);
    off!(m, "ibv_device.node_type", ibv_device, node_type);
    off!(m, "ibv_device.transport_type", ibv_device, transport_type);
    off!(m, "ibv_device.name", ibv_device, name);
    off!(m, "ibv_device.dev_name", ibv_device, dev_name);
    off!(m, "ibv_device.dev_path", ibv_device, dev_path);
    off!(m, "ibv_device.ibdev_path", ibv_device, ibdev_path);
    size!(m, ibv_context_ops);
    off!(m, "ibv_context_ops.alloc_mw", ibv_context_ops, alloc_mw);
    off!(m, "ibv_context_ops.poll_cq", ibv_context_ops, poll_cq);
    off!(
        m,
        "ibv_context_ops.req_notify_cq",
        ibv_context_ops,
        req_notify_cq
    );
    off!(
        m,
        "ibv_context_ops.post_srq_recv",
        ibv_context_ops,
        post_srq_recv
    );
    off!(m, "ibv_context_ops.post_send", ibv_context_ops, post_send);
    off!(m, "ibv_context_ops.post_recv", ibv_context_ops, post_recv);
    off!(
        m,
        "ibv_context_ops._compat_async_event",
        ibv_context_ops,
        _compat_async_event
    );
    size!(m, ibv_context);
    off!(m, "ibv_context.device", ibv_context, device);
    off!(m, "ibv_context.ops", ibv_context, ops);
    off!(m, "ibv_context.cmd_fd", ibv_context, cmd_fd);
    off!(m, "ibv_context.async_fd", ibv_context, async_fd);
    off!(
        m,
        "ibv_context.num_comp_vectors",
        ibv_context,
        num_comp_vectors
    );
    off!(m, "ibv_context.mutex", ibv_context, mutex);
    off!(m, "ibv_context.abi_compat", ibv_context, abi_compat);
    size!(m, ibv_device_attr);
    off!(m, "ibv_device_attr.fw_ver", ibv_device_attr, fw_ver);
    off!(m, "ibv_device_attr.node_guid", ibv_device_attr, node_guid);
    off!(
        m,
        "ibv_device_attr.sys_image_guid",
        ibv_device_attr,
        sys_image_guid
    );
    off!(
        m,
        "ibv_device_attr.max_mr_size",
        ibv_device_attr,
        max_mr_size
    );
    off!(
        m,
        "ibv_device_attr.page_size_cap",
        ibv_device_attr,
        page_size_cap
    );
    off!(m, "ibv_device_attr.vendor_id", ibv_device_attr, vendor_id);
    off!(
        m,
        "ibv_device_attr.vendor_part_id",
        ibv_device_attr,
        vendor_part_id
    );
    off!(m, "ibv_device_attr.hw_ver", ibv_device_attr, hw_ver);
    off!(m, "ibv_device_attr.max_qp", ibv_device_attr, max_qp);
    off!(m, "ibv_device_attr.max_qp_wr", ibv_device_attr, max_qp_wr);
    off!(
        m,
        "ibv_device_attr.device_cap_flags",
        ibv_device_attr,
        device_cap_flags
    );
    off!(m, "ibv_device_attr.max_sge", ibv_device_attr, max_sge);
    off!(m, "ibv_device_attr.max_sge_rd", ibv_device_attr, max_sge_rd);
    off!(m, "ibv_device_attr.max_cq", ibv_device_attr, max_cq);
    off!(m, "ibv_device_attr.max_cqe", ibv_device_attr, max_cqe);
    off!(m, "ibv_device_attr.max_mr", ibv_device_attr, max_mr);
    off!(m, "ibv_device_attr.max_pd", ibv_device_attr, max_pd);
    off!(
        m,
        "ibv_device_attr.max_qp_rd_atom",
        ibv_device_attr,
        max_qp_rd_atom
    );
    off!(
        m,
        "ibv_device_attr.max_res_rd_atom",
        ibv_device_attr,
        max_res_rd_atom
    );
    off!(
        m,
        "ibv_device_attr.max_qp_init_rd_atom",
        ibv_device_attr,
        max_qp_init_rd_atom
    );
    off!(m, "ibv_device_attr.atomic_cap", ibv_device_attr, atomic_cap);
    off!(m, "ibv_device_attr.max_mw", ibv_device_attr, max_mw);
    off!(m, "ibv_device_attr.max_ah", ibv_device_attr, max_ah);
    off!(m, "ibv_device_attr.max_srq", ibv_device_attr, max_srq);
    off!(m, "ibv_device_attr.max_srq_wr", ibv_device_attr, max_srq_wr);
    off!(
        m,
        "ibv_device_attr.max_srq_sge",
        ibv_device_attr,
        max_srq_sge
    );
    off!(m, "ibv_device_attr.max_pkeys", ibv_device_attr, max_pkeys);
    off!(
        m,
        "ibv_device_attr.local_ca_ack_delay",
        ibv_device_attr,
        local_ca_ack_delay
    );
    off!(
        m,
        "ibv_device_attr.phys_port_cnt",
        ibv_device_attr,
        phys_port_cnt
    );
    size!(m, ibv_port_attr);
    off!(m, "ibv_port_attr.state", ibv_port_attr, state);
    off!(m, "ibv_port_attr.max_mtu", ibv_port_attr, max_mtu);
    off!(m, "ibv_port_attr.active_mtu", ibv_port_attr, active_mtu);
    off!(m, "ibv_port_attr.gid_tbl_len", ibv_port_attr, gid_tbl_len);
    off!(
        m,
        "ibv_port_attr.port_cap_flags",
        ibv_port_attr,
        port_cap_flags
    );
    off!(m, "ibv_port_attr.max_msg_sz", ibv_port_attr, max_msg_sz);
    off!(m, "ibv_port_attr.pkey_tbl_len", ibv_port_attr, pkey_tbl_len);
    off!(m, "ibv_port_attr.lid", ibv_port_attr, lid);
    off!(m, "ibv_port_attr.sm_lid", ibv_port_attr, sm_lid);
    off!(m, "ibv_port_attr.lmc", ibv_port_attr, lmc);
    off!(m, "ibv_port_attr.max_vl_num", ibv_port_attr, max_vl_num);
    off!(m, "ibv_port_attr.sm_sl", ibv_port_attr, sm_sl);
    off!(m, "ibv_port_attr.active_width", ibv_port_attr, active_width);
    off!(m, "ibv_port_attr.active_speed", ibv_port_attr, active_speed);
    off!(m, "ibv_port_attr.phys_state", ibv_port_attr, phys_state);
    off!(m, "ibv_port_attr.link_layer", ibv_port_attr, link_layer);
    off!(m, "ibv_port_attr.flags", ibv_port_attr, flags);
    off!(
        m,
        "ibv_port_attr.port_cap_flags2",
        ibv_port_attr,
        port_cap_flags2
    );
    size!(m, ibv_gid);
    off!(
        m,
        "ibv_gid.global.interface_id",
        ibv_gid,
        global.interface_id
    );
    size!(m, ibv_pd);
    off!(m, "ibv_pd.context", ibv_pd, context);
    off!(m, "ibv_pd.handle", ibv_pd, handle);
    size!(m, ibv_mr);
    off!(m, "ibv_mr.context", ibv_mr, context);
    off!(m, "ibv_mr.pd", ibv_mr, pd);
    off!(m, "ibv_mr.addr", ibv_mr, addr);
    off!(m, "ibv_mr.length", ibv_mr, length);
    off!(m, "ibv_mr.handle", ibv_mr, handle);
    off!(m, "ibv_mr.lkey", ibv_mr, lkey);
    off!(m, "ibv_mr.rkey", ibv_mr, rkey);
    size!(m, ibv_cq);
    off!(m, "ibv_cq.context", ibv_cq, context);
    off!(m, "ibv_cq.channel", ibv_cq, channel);
    off!(m, "ibv_cq.cq_context", ibv_cq, cq_context);
    off!(m, "ibv_cq.handle", ibv_cq, handle);
    off!(m, "ibv_cq.cqe", ibv_cq, cqe);
    off!(m, "ibv_cq.mutex", ibv_cq, mutex);
    off!(m, "ibv_cq.cond", ibv_cq, cond);
    off!(
        m,
        "ibv_cq.comp_events_completed",
        ibv_cq,
        comp_events_completed
    );
    off!(
        m,
        "ibv_cq.async_events_completed",
        ibv_cq,
        async_events_completed
    );
    size!(m, ibv_srq_attr);
    off!(m, "ibv_srq_attr.max_wr", ibv_srq_attr, max_wr);
    off!(m, "ibv_srq_attr.max_sge", ibv_srq_attr, max_sge);
    off!(m, "ibv_srq_attr.srq_limit", ibv_srq_attr, srq_limit);
    size!(m, ibv_srq_init_attr);
    off!(
        m,
        "ibv_srq_init_attr.srq_context",
        ibv_srq_init_attr,
        srq_context
    );
    off!(m, "ibv_srq_init_attr.attr", ibv_srq_init_attr, attr);
    size!(m, ibv_srq);
    off!(m, "ibv_srq.context", ibv_srq, context);
    off!(m, "ibv_srq.srq_context", ibv_srq, srq_context);
    off!(m, "ibv_srq.pd", ibv_srq, pd);
    off!(m, "ibv_srq.handle", ibv_srq, handle);
    off!(m, "ibv_srq.mutex", ibv_srq, mutex);
    off!(m, "ibv_srq.cond", ibv_srq, cond);
    off!(m, "ibv_srq.events_completed", ibv_srq, events_completed);
    size!(m, ibv_qp);
    off!(m, "ibv_qp.context", ibv_qp, context);
    off!(m, "ibv_qp.qp_context", ibv_qp, qp_context);
    off!(m, "ibv_qp.pd", ibv_qp, pd);
    off!(m, "ibv_qp.send_cq", ibv_qp, send_cq);
    off!(m, "ibv_qp.recv_cq", ibv_qp, recv_cq);
    off!(m, "ibv_qp.srq", ibv_qp, srq);
    off!(m, "ibv_qp.handle", ibv_qp, handle);
    off!(m, "ibv_qp.qp_num", ibv_qp, qp_num);
    off!(m, "ibv_qp.state", ibv_qp, state);
    off!(m, "ibv_qp.qp_type", ibv_qp, qp_type);
    off!(m, "ibv_qp.mutex", ibv_qp, mutex);
    off!(m, "ibv_qp.cond", ibv_qp, cond);
    off!(m, "ibv_qp.events_completed", ibv_qp, events_completed);
    size!(m, ibv_qp_cap);
    off!(m, "ibv_qp_cap.max_send_wr", ibv_qp_cap, max_send_wr);
    off!(m, "ibv_qp_cap.max_recv_wr", ibv_qp_cap, max_recv_wr);
    off!(m, "ibv_qp_cap.max_send_sge", ibv_qp_cap, max_send_sge);
    off!(m, "ibv_qp_cap.max_recv_sge", ibv_qp_cap, max_recv_sge);
    off!(m, "ibv_qp_cap.max_inline_data", ibv_qp_cap, max_inline_data);
    size!(m, ibv_qp_init_attr);
    off!(
        m,
        "ibv_qp_init_attr.qp_context",
        ibv_qp_init_attr,
        qp_context
    );
    off!(m, "ibv_qp_init_attr.send_cq", ibv_qp_init_attr, send_cq);
    off!(m, "ibv_qp_init_attr.recv_cq", ibv_qp_init_attr, recv_cq);
    off!(m, "ibv_qp_init_attr.srq", ibv_qp_init_attr, srq);
    off!(m, "ibv_qp_init_attr.cap", ibv_qp_init_attr, cap);
    off!(m, "ibv_qp_init_attr.qp_type", ibv_qp_init_attr, qp_type);
    off!(
        m,
        "ibv_qp_init_attr.sq_sig_all",
        ibv_qp_init_attr,
        sq_sig_all
    );
    size!(m, ibv_global_route);
    off!(m, "ibv_global_route.dgid", ibv_global_route, dgid);
    off!(
        m,
        "ibv_global_route.flow_label",
        ibv_global_route,
        flow_label
    );
    off!(
        m,
        "ibv_global_route.sgid_index",
        ibv_global_route,
        sgid_index
    );
    off!(m, "ibv_global_route.hop_limit", ibv_global_route, hop_limit);
    off!(
        m,
        "ibv_global_route.traffic_class",
        ibv_global_route,
        traffic_class
    );
    size!(m, ibv_ah_attr);
    off!(m, "ibv_ah_attr.grh", ibv_ah_attr, grh);
    off!(m, "ibv_ah_attr.dlid", ibv_ah_attr, dlid);
    off!(m, "ibv_ah_attr.sl", ibv_ah_attr, sl);
    off!(m, "ibv_ah_attr.src_path_bits", ibv_ah_attr, src_path_bits);
    off!(m, "ibv_ah_attr.static_rate", ibv_ah_attr, static_rate);
    off!(m, "ibv_ah_attr.is_global", ibv_ah_attr, is_global);
    off!(m, "ibv_ah_attr.port_num", ibv_ah_attr, port_num);
    size!(m, ibv_qp_attr);
    off!(m, "ibv_qp_attr.qp_state", ibv_qp_attr, qp_state);
    off!(m, "ibv_qp_attr.cur_qp_state", ibv_qp_attr, cur_qp_state);
    off!(m, "ibv_qp_attr.path_mtu", ibv_qp_attr, path_mtu);
    off!(m, "ibv_qp_attr.path_mig_state", ibv_qp_attr, path_mig_state);
    off!(m, "ibv_qp_attr.qkey", ibv_qp_attr, qkey);
    off!(m, "ibv_qp_attr.rq_psn", ibv_qp_attr, rq_psn);
    off!(m, "ibv_qp_attr.sq_psn", ibv_qp_attr, sq_psn);
    off!(m, "ibv_qp_attr.dest_qp_num", ibv_qp_attr, dest_qp_num);
    off!(
        m,
        "ibv_qp_attr.qp_access_flags",
        ibv_qp_attr,
        qp_access_flags
    );
    off!(m, "ibv_qp_attr.cap", ibv_qp_attr, cap);
    off!(m, "ibv_qp_attr.ah_attr", ibv_qp_attr, ah_attr);
    off!(m, "ibv_qp_attr.alt_ah_attr", ibv_qp_attr, alt_ah_attr);
    off!(m, "ibv_qp_attr.pkey_index", ibv_qp_attr, pkey_index);
    off!(m, "ibv_qp_attr.alt_pkey_index", ibv_qp_attr, alt_pkey_index);
    off!(
        m,
        "ibv_qp_attr.en_sqd_async_notify",
        ibv_qp_attr,
        en_sqd_async_notify
    );
    off!(m, "ibv_qp_attr.sq_draining", ibv_qp_attr, sq_draining);
    off!(m, "ibv_qp_attr.max_rd_atomic", ibv_qp_attr, max_rd_atomic);
    off!(
        m,
        "ibv_qp_attr.max_dest_rd_atomic",
        ibv_qp_attr,
        max_dest_rd_atomic
    );
    off!(m, "ibv_qp_attr.min_rnr_timer", ibv_qp_attr, min_rnr_timer);
    off!(m, "ibv_qp_attr.port_num", ibv_qp_attr, port_num);
    off!(m, "ibv_qp_attr.timeout", ibv_qp_attr, timeout);
    off!(m, "ibv_qp_attr.retry_cnt", ibv_qp_attr, retry_cnt);
    off!(m, "ibv_qp_attr.rnr_retry", ibv_qp_attr, rnr_retry);
    off!(m, "ibv_qp_attr.alt_port_num", ibv_qp_attr, alt_port_num);
    off!(m, "ibv_qp_attr.alt_timeout", ibv_qp_attr, alt_timeout);
    off!(m, "ibv_qp_attr.rate_limit", ibv_qp_attr, rate_limit);
    size!(m, ibv_sge);
    off!(m, "ibv_sge.addr", ibv_sge, addr);
    off!(m, "ibv_sge.length", ibv_sge, length);
    off!(m, "ibv_sge.lkey", ibv_sge, lkey);
    size!(m, ibv_send_wr);
    off!(m, "ibv_send_wr.wr_id", ibv_send_wr, wr_id);
    off!(m, "ibv_send_wr.next", ibv_send_wr, next);
    off!(m, "ibv_send_wr.sg_list", ibv_send_wr, sg_list);
    off!(m, "ibv_send_wr.num_sge", ibv_send_wr, num_sge);
    off!(m, "ibv_send_wr.opcode", ibv_send_wr, opcode);
    off!(m, "ibv_send_wr.send_flags", ibv_send_wr, send_flags);
    off!(m, "ibv_send_wr.imm_data", ibv_send_wr, imm_data);
    off!(m, "ibv_send_wr.invalidate_rkey", ibv_send_wr, imm_data);
    off!(m, "ibv_send_wr.wr", ibv_send_wr, wr);
    off!(
        m,
        "ibv_send_wr.wr.rdma.remote_addr",
        ibv_send_wr,
        wr.rdma.remote_addr
    );
    off!(m, "ibv_send_wr.wr.rdma.rkey", ibv_send_wr, wr.rdma.rkey);
    off!(
        m,
        "ibv_send_wr.wr.atomic.remote_addr",
        ibv_send_wr,
        wr.atomic.remote_addr
    );
    off!(
        m,
        "ibv_send_wr.wr.atomic.compare_add",
        ibv_send_wr,
        wr.atomic.compare_add
    );
    off!(m, "ibv_send_wr.wr.atomic.swap", ibv_send_wr, wr.atomic.swap);
    off!(m, "ibv_send_wr.wr.atomic.rkey", ibv_send_wr, wr.atomic.rkey);
    off!(m, "ibv_send_wr.wr.ud.ah", ibv_send_wr, wr.ud.ah);
    off!(
        m,
        "ibv_send_wr.wr.ud.remote_qpn",
        ibv_send_wr,
        wr.ud.remote_qpn
    );
    off!(
        m,
        "ibv_send_wr.wr.ud.remote_qkey",
        ibv_send_wr,
        wr.ud.remote_qkey
    );
    off!(
        m,
        "ibv_send_wr.qp_type.xrc.remote_srqn",
        ibv_send_wr,
        qp_type.xrc.remote_srqn
    );
    off!(
        m,
        "ibv_send_wr.bind_mw.mw",
        ibv_send_wr,
        bind_tso.bind_mw.mw
    );
    off!(
        m,
        "ibv_send_wr.bind_mw.rkey",
        ibv_send_wr,
        bind_tso.bind_mw.rkey
    );
    off!(
        m,
        "ibv_send_wr.bind_mw.bind_info.mr",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.mr
    );
    off!(
        m,
        "ibv_send_wr.bind_mw.bind_info.addr",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.addr
    );
    off!(
        m,
        "ibv_send_wr.bind_mw.bind_info.length",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.length
    );
    off!(
        m,
        "ibv_send_wr.bind_mw.bind_info.mw_access_flags",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.mw_access_flags
    );
    off!(m, "ibv_send_wr.tso.hdr", ibv_send_wr, bind_tso.tso.hdr);
    off!(
        m,
        "ibv_send_wr.tso.hdr_sz",
        ibv_send_wr,
        bind_tso.tso.hdr_sz
    );
    off!(m, "ibv_send_wr.tso.mss", ibv_send_wr, bind_tso.tso.mss);
    size!(m, ibv_mw_bind_info);
    size!(m, ibv_recv_wr);
    off!(m, "ibv_recv_wr.wr_id", ibv_recv_wr, wr_id);
    off!(m, "ibv_recv_wr.next", ibv_recv_wr, next);
    off!(m, "ibv_recv_wr.sg_list", ibv_recv_wr, sg_list);
    off!(m, "ibv_recv_wr.num_sge", ibv_recv_wr, num_sge);
    size!(m, ibv_wc);
    off!(m, "ibv_wc.wr_id", ibv_wc, wr_id);
    off!(m, "ibv_wc.status", ibv_wc, status);
    off!(m, "ibv_wc.opcode", ibv_wc, opcode);
    off!(m, "ibv_wc.vendor_err", ibv_wc, vendor_err);
    off!(m, "ibv_wc.byte_len", ibv_wc, byte_len);
    off!(m, "ibv_wc.imm_data", ibv_wc, imm_data);
    off!(m, "ibv_wc.invalidated_rkey", ibv_wc, imm_data);
    off!(m, "ibv_wc.qp_num", ibv_wc, qp_num);
    off!(m, "ibv_wc.src_qp", ibv_wc, src_qp);
    off!(m, "ibv_wc.wc_flags", ibv_wc, wc_flags);
    off!(m, "ibv_wc.pkey_index", ibv_wc, pkey_index);
    off!(m, "ibv_wc.slid", ibv_wc, slid);
    off!(m, "ibv_wc.sl", ibv_wc, sl);
    off!(m, "ibv_wc.dlid_path_bits", ibv_wc, dlid_path_bits);
    size!(m, ibv_ah);
    off!(m, "ibv_ah.context", ibv_ah, context);
    off!(m, "ibv_ah.pd", ibv_ah, pd);
    off!(m, "ibv_ah.handle", ibv_ah, handle);
    size!(m, ibv_async_event);
    off!(m, "ibv_async_event.element", ibv_async_event, element);
    off!(m, "ibv_async_event.event_type", ibv_async_event, event_type);
    size!(m, mlx5dv_qp);
    off!(m, "mlx5dv_qp.dbrec", mlx5dv_qp, dbrec);
    off!(m, "mlx5dv_qp.sq.buf", mlx5dv_qp, sq.buf);
    off!(m, "mlx5dv_qp.sq.wqe_cnt", mlx5dv_qp, sq.wqe_cnt);
    off!(m, "mlx5dv_qp.sq.stride", mlx5dv_qp, sq.stride);
    off!(m, "mlx5dv_qp.rq.buf", mlx5dv_qp, rq.buf);
    off!(m, "mlx5dv_qp.rq.wqe_cnt", mlx5dv_qp, rq.wqe_cnt);
    off!(m, "mlx5dv_qp.rq.stride", mlx5dv_qp, rq.stride);
    off!(m, "mlx5dv_qp.bf.reg", mlx5dv_qp, bf.reg);
    off!(m, "mlx5dv_qp.bf.size", mlx5dv_qp, bf.size);
    off!(m, "mlx5dv_qp.comp_mask", mlx5dv_qp, comp_mask);
    off!(m, "mlx5dv_qp.uar_mmap_offset", mlx5dv_qp, uar_mmap_offset);
    off!(m, "mlx5dv_qp.tirn", mlx5dv_qp, tirn);
    off!(m, "mlx5dv_qp.tisn", mlx5dv_qp, tisn);
    off!(m, "mlx5dv_qp.rqn", mlx5dv_qp, rqn);
    off!(m, "mlx5dv_qp.sqn", mlx5dv_qp, sqn);
    off!(m, "mlx5dv_qp.tir_icm_addr", mlx5dv_qp, tir_icm_addr);
    size!(m, mlx5dv_cq);
    off!(m, "mlx5dv_cq.buf", mlx5dv_cq, buf);
    off!(m, "mlx5dv_cq.dbrec", mlx5dv_cq, dbrec);
    off!(m, "mlx5dv_cq.cqe_cnt", mlx5dv_cq, cqe_cnt);
    off!(m, "mlx5dv_cq.cqe_size", mlx5dv_cq, cqe_size);
    off!(m, "mlx5dv_cq.cq_uar", mlx5dv_cq, cq_uar);
    off!(m, "mlx5dv_cq.cqn", mlx5dv_cq, cqn);
    off!(m, "mlx5dv_cq.comp_mask", mlx5dv_cq, comp_mask);
    size!(m, mlx5dv_srq);
    off!(m, "mlx5dv_srq.buf", mlx5dv_srq, buf);
    off!(m, "mlx5dv_srq.dbrec", mlx5dv_srq, dbrec);
    off!(m, "mlx5dv_srq.stride", mlx5dv_srq, stride);
    off!(m, "mlx5dv_srq.head", mlx5dv_srq, head);
    off!(m, "mlx5dv_srq.tail", mlx5dv_srq, tail);
    off!(m, "mlx5dv_srq.comp_mask", mlx5dv_srq, comp_mask);
    off!(m, "mlx5dv_srq.srqn", mlx5dv_srq, srqn);
    size!(m, mlx5dv_ah);
    off!(m, "mlx5dv_ah.av", mlx5dv_ah, av);
    off!(m, "mlx5dv_ah.comp_mask", mlx5dv_ah, comp_mask);
    size!(m, mlx5dv_obj);
    off!(m, "mlx5dv_obj.qp.in", mlx5dv_obj, qp.r#in);
    off!(m, "mlx5dv_obj.qp.out", mlx5dv_obj, qp.out);
    off!(m, "mlx5dv_obj.cq.in", mlx5dv_obj, cq.r#in);
    off!(m, "mlx5dv_obj.cq.out", mlx5dv_obj, cq.out);
    off!(m, "mlx5dv_obj.srq.in", mlx5dv_obj, srq.r#in);
    off!(m, "mlx5dv_obj.srq.out", mlx5dv_obj, srq.out);
    off!(m, "mlx5dv_obj.rwq", mlx5dv_obj, rwq);
    off!(m, "mlx5dv_obj.dm", mlx5dv_obj, dm);
    off!(m, "mlx5dv_obj.ah", mlx5dv_obj, ah);
    off!(m, "mlx5dv_obj.pd", mlx5dv_obj, pd);
    size!(m, mlx5dv_context);
    off!(m, "mlx5dv_context.version", mlx5dv_context, version);
    off!(m, "mlx5dv_context.flags", mlx5dv_context, flags);
    off!(m, "mlx5dv_context.comp_mask", mlx5dv_context, comp_mask);
    val!(m, IBV_SYSFS_NAME_MAX);
    val!(m, IBV_SYSFS_PATH_MAX);
    val!(m, IBV_NODE_CA);
    val!(m, IBV_NODE_RNIC);
    val!(m, IBV_TRANSPORT_IB);
    val!(m, IBV_TRANSPORT_IWARP);
    val!(m, IBV_ATOMIC_NONE);
    val!(m, IBV_ATOMIC_HCA);
    val!(m, IBV_ATOMIC_GLOB);
    val!(m, IBV_MTU_256);
    val!(m, IBV_MTU_512);
    val!(m, IBV_MTU_1024);
    val!(m, IBV_MTU_2048);
    val!(m, IBV_MTU_4096);
    val!(m, IBV_PORT_NOP);
    val!(m, IBV_PORT_DOWN);
    val!(m, IBV_PORT_INIT);
    val!(m, IBV_PORT_ARMED);
    val!(m, IBV_PORT_ACTIVE);
    val!(m, IBV_PORT_ACTIVE_DEFER);
    val!(m, IBV_LINK_LAYER_UNSPECIFIED);
    val!(m, IBV_LINK_LAYER_INFINIBAND);
    val!(m, IBV_LINK_LAYER_ETHERNET);
    val!(m, IBV_ACCESS_LOCAL_WRITE);
    val!(m, IBV_ACCESS_REMOTE_WRITE);
    val!(m, IBV_ACCESS_REMOTE_READ);
    val!(m, IBV_ACCESS_REMOTE_ATOMIC);
    val!(m, IBV_ACCESS_MW_BIND);
    val!(m, IBV_ACCESS_ZERO_BASED);
    val!(m, IBV_ACCESS_ON_DEMAND);
    val!(m, IBV_ACCESS_HUGETLB);
    val!(m, IBV_ACCESS_RELAXED_ORDERING);
    val!(m, IBV_QPT_RC);
    val!(m, IBV_QPT_UC);
    val!(m, IBV_QPT_UD);
    val!(m, IBV_QPS_RESET);
    val!(m, IBV_QPS_INIT);
    val!(m, IBV_QPS_RTR);
    val!(m, IBV_QPS_RTS);
    val!(m, IBV_QPS_SQD);
    val!(m, IBV_QPS_SQE);
    val!(m, IBV_QPS_ERR);
    val!(m, IBV_QPS_UNKNOWN);
    val!(m, IBV_MIG_MIGRATED);
    val!(m, IBV_QP_STATE);
    val!(m, IBV_QP_CUR_STATE);
    val!(m, IBV_QP_EN_SQD_ASYNC_NOTIFY);
    val!(m, IBV_QP_ACCESS_FLAGS);
    val!(m, IBV_QP_PKEY_INDEX);
    val!(m, IBV_QP_PORT);
    val!(m, IBV_QP_QKEY);
    val!(m, IBV_QP_AV);
    val!(m, IBV_QP_PATH_MTU);
    val!(m, IBV_QP_TIMEOUT);
    val!(m, IBV_QP_RETRY_CNT);
    val!(m, IBV_QP_RNR_RETRY);
    val!(m, IBV_QP_RQ_PSN);
    val!(m, IBV_QP_MAX_QP_RD_ATOMIC);
    val!(m, IBV_QP_ALT_PATH);
    val!(m, IBV_QP_MIN_RNR_TIMER);
    val!(m, IBV_QP_SQ_PSN);
    val!(m, IBV_QP_MAX_DEST_RD_ATOMIC);
    val!(m, IBV_QP_PATH_MIG_STATE);
    val!(m, IBV_QP_CAP);
    val!(m, IBV_QP_DEST_QPN);
    val!(m, IBV_SRQ_MAX_WR);
    val!(m, IBV_SRQ_LIMIT);
    val!(m, IBV_WR_RDMA_WRITE);
    val!(m, IBV_WR_RDMA_WRITE_WITH_IMM);
    val!(m, IBV_WR_SEND);
    val!(m, IBV_WR_SEND_WITH_IMM);
    val!(m, IBV_WR_RDMA_READ);
    val!(m, IBV_WR_ATOMIC_CMP_AND_SWP);
    val!(m, IBV_WR_ATOMIC_FETCH_AND_ADD);
    val!(m, IBV_WR_LOCAL_INV);
    val!(m, IBV_WR_BIND_MW);
    val!(m, IBV_WR_SEND_WITH_INV);
    val!(m, IBV_SEND_FENCE);
    val!(m, IBV_SEND_SIGNALED);
    val!(m, IBV_SEND_SOLICITED);
    val!(m, IBV_SEND_INLINE);
    val!(m, IBV_WC_SUCCESS);
    val!(m, IBV_WC_LOC_LEN_ERR);
    val!(m, IBV_WC_LOC_QP_OP_ERR);
    val!(m, IBV_WC_LOC_PROT_ERR);
    val!(m, IBV_WC_WR_FLUSH_ERR);
    val!(m, IBV_WC_REM_ACCESS_ERR);
    val!(m, IBV_WC_REM_OP_ERR);
    val!(m, IBV_WC_RETRY_EXC_ERR);
    val!(m, IBV_WC_RNR_RETRY_EXC_ERR);
    val!(m, IBV_WC_GENERAL_ERR);
    val!(m, IBV_WC_SEND);
    val!(m, IBV_WC_RDMA_WRITE);
    val!(m, IBV_WC_RDMA_READ);
    val!(m, IBV_WC_COMP_SWAP);
    val!(m, IBV_WC_FETCH_ADD);
    val!(m, IBV_WC_RECV);
    val!(m, IBV_WC_RECV_RDMA_WITH_IMM);
    val!(m, IBV_WC_GRH);
    val!(m, IBV_WC_WITH_IMM);
    val!(m, IBV_WC_WITH_INV);
    val!(m, IBV_EVENT_CQ_ERR);
    val!(m, IBV_EVENT_QP_FATAL);
    val!(m, IBV_EVENT_QP_REQ_ERR);
    val!(m, IBV_EVENT_QP_ACCESS_ERR);
    val!(m, IBV_EVENT_COMM_EST);
    val!(m, IBV_EVENT_SQ_DRAINED);
    val!(m, IBV_EVENT_DEVICE_FATAL);
    val!(m, IBV_EVENT_PORT_ACTIVE);
    val!(m, IBV_EVENT_PORT_ERR);
    val!(m, IBV_EVENT_SRQ_ERR);
    val!(m, IBV_EVENT_SRQ_LIMIT_REACHED);
    val!(m, IBV_EVENT_QP_LAST_WQE_REACHED);
    val!(m, IBV_EVENT_GID_CHANGE);
    val!(m, MLX5DV_OBJ_QP);
    val!(m, MLX5DV_OBJ_CQ);
    val!(m, MLX5DV_OBJ_SRQ);
    val!(m, MLX5DV_OBJ_AH);
    val!(m, MLX5DV_SRQ_MASK_SRQN);
    val!(m, MLX5DV_CONTEXT_FLAGS_CQE_V1);
    val!(m, MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW);
    val!(m, MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP);
    val!(m, MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD);
}
