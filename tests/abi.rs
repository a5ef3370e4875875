//! The hand-written FFI mirrors (`src/core/ffi/types.rs` and `types/`) against the C layout.
//!
//! `fixtures/abi/abi.txt` is printed by `fixtures/abi/abi.c` compiled against rdma-core 44's
//! headers (`fixtures/abi/regen.sh`), one value column per architecture (x86_64, aarch64).
//! Every line of the column of the architecture this test is compiled for must match the Rust
//! value, and every line must be known to this test: a struct, field or constant added to the
//! C program without a Rust counterpart here fails the test, as does a Rust entry the table
//! lacks.

use rdma_direct::ffi::*;
use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};

fn rust_layout() -> BTreeMap<String, i64> {
    let mut m = BTreeMap::new();
    macro_rules! size {
        ($t:ident) => {
            m.insert(format!("sizeof {}", stringify!($t)), size_of::<$t>() as i64);
        };
    }
    macro_rules! off {
        ($name:literal, $t:ident, $($f:tt)+) => {
            m.insert(format!("offsetof {}", $name), offset_of!($t, $($f)+) as i64);
        };
    }
    macro_rules! val {
        ($c:ident) => {
            m.insert(format!("value {}", stringify!($c)), $c as i64);
        };
    }
    size!(ibv_device);
    off!("ibv_device._ops", ibv_device, _ops);
    off!("ibv_device.node_type", ibv_device, node_type);
    off!("ibv_device.transport_type", ibv_device, transport_type);
    off!("ibv_device.name", ibv_device, name);
    off!("ibv_device.dev_name", ibv_device, dev_name);
    off!("ibv_device.dev_path", ibv_device, dev_path);
    off!("ibv_device.ibdev_path", ibv_device, ibdev_path);
    size!(ibv_context_ops);
    off!("ibv_context_ops.alloc_mw", ibv_context_ops, alloc_mw);
    off!("ibv_context_ops.poll_cq", ibv_context_ops, poll_cq);
    off!(
        "ibv_context_ops.req_notify_cq",
        ibv_context_ops,
        req_notify_cq
    );
    off!(
        "ibv_context_ops.post_srq_recv",
        ibv_context_ops,
        post_srq_recv
    );
    off!("ibv_context_ops.post_send", ibv_context_ops, post_send);
    off!("ibv_context_ops.post_recv", ibv_context_ops, post_recv);
    off!(
        "ibv_context_ops._compat_async_event",
        ibv_context_ops,
        _compat_async_event
    );
    size!(ibv_context);
    off!("ibv_context.device", ibv_context, device);
    off!("ibv_context.ops", ibv_context, ops);
    off!("ibv_context.cmd_fd", ibv_context, cmd_fd);
    off!("ibv_context.async_fd", ibv_context, async_fd);
    off!(
        "ibv_context.num_comp_vectors",
        ibv_context,
        num_comp_vectors
    );
    off!("ibv_context.mutex", ibv_context, mutex);
    off!("ibv_context.abi_compat", ibv_context, abi_compat);
    size!(ibv_device_attr);
    off!("ibv_device_attr.fw_ver", ibv_device_attr, fw_ver);
    off!("ibv_device_attr.node_guid", ibv_device_attr, node_guid);
    off!(
        "ibv_device_attr.sys_image_guid",
        ibv_device_attr,
        sys_image_guid
    );
    off!("ibv_device_attr.max_mr_size", ibv_device_attr, max_mr_size);
    off!(
        "ibv_device_attr.page_size_cap",
        ibv_device_attr,
        page_size_cap
    );
    off!("ibv_device_attr.vendor_id", ibv_device_attr, vendor_id);
    off!(
        "ibv_device_attr.vendor_part_id",
        ibv_device_attr,
        vendor_part_id
    );
    off!("ibv_device_attr.hw_ver", ibv_device_attr, hw_ver);
    off!("ibv_device_attr.max_qp", ibv_device_attr, max_qp);
    off!("ibv_device_attr.max_qp_wr", ibv_device_attr, max_qp_wr);
    off!(
        "ibv_device_attr.device_cap_flags",
        ibv_device_attr,
        device_cap_flags
    );
    off!("ibv_device_attr.max_sge", ibv_device_attr, max_sge);
    off!("ibv_device_attr.max_sge_rd", ibv_device_attr, max_sge_rd);
    off!("ibv_device_attr.max_cq", ibv_device_attr, max_cq);
    off!("ibv_device_attr.max_cqe", ibv_device_attr, max_cqe);
    off!("ibv_device_attr.max_mr", ibv_device_attr, max_mr);
    off!("ibv_device_attr.max_pd", ibv_device_attr, max_pd);
    off!(
        "ibv_device_attr.max_qp_rd_atom",
        ibv_device_attr,
        max_qp_rd_atom
    );
    off!(
        "ibv_device_attr.max_res_rd_atom",
        ibv_device_attr,
        max_res_rd_atom
    );
    off!(
        "ibv_device_attr.max_qp_init_rd_atom",
        ibv_device_attr,
        max_qp_init_rd_atom
    );
    off!("ibv_device_attr.atomic_cap", ibv_device_attr, atomic_cap);
    off!("ibv_device_attr.max_mw", ibv_device_attr, max_mw);
    off!("ibv_device_attr.max_ah", ibv_device_attr, max_ah);
    off!("ibv_device_attr.max_srq", ibv_device_attr, max_srq);
    off!("ibv_device_attr.max_srq_wr", ibv_device_attr, max_srq_wr);
    off!("ibv_device_attr.max_srq_sge", ibv_device_attr, max_srq_sge);
    off!("ibv_device_attr.max_pkeys", ibv_device_attr, max_pkeys);
    off!(
        "ibv_device_attr.local_ca_ack_delay",
        ibv_device_attr,
        local_ca_ack_delay
    );
    off!(
        "ibv_device_attr.phys_port_cnt",
        ibv_device_attr,
        phys_port_cnt
    );
    size!(ibv_port_attr);
    off!("ibv_port_attr.state", ibv_port_attr, state);
    off!("ibv_port_attr.max_mtu", ibv_port_attr, max_mtu);
    off!("ibv_port_attr.active_mtu", ibv_port_attr, active_mtu);
    off!("ibv_port_attr.gid_tbl_len", ibv_port_attr, gid_tbl_len);
    off!(
        "ibv_port_attr.port_cap_flags",
        ibv_port_attr,
        port_cap_flags
    );
    off!("ibv_port_attr.max_msg_sz", ibv_port_attr, max_msg_sz);
    off!("ibv_port_attr.pkey_tbl_len", ibv_port_attr, pkey_tbl_len);
    off!("ibv_port_attr.lid", ibv_port_attr, lid);
    off!("ibv_port_attr.sm_lid", ibv_port_attr, sm_lid);
    off!("ibv_port_attr.lmc", ibv_port_attr, lmc);
    off!("ibv_port_attr.max_vl_num", ibv_port_attr, max_vl_num);
    off!("ibv_port_attr.sm_sl", ibv_port_attr, sm_sl);
    off!("ibv_port_attr.active_width", ibv_port_attr, active_width);
    off!("ibv_port_attr.active_speed", ibv_port_attr, active_speed);
    off!("ibv_port_attr.phys_state", ibv_port_attr, phys_state);
    off!("ibv_port_attr.link_layer", ibv_port_attr, link_layer);
    off!("ibv_port_attr.flags", ibv_port_attr, flags);
    off!(
        "ibv_port_attr.port_cap_flags2",
        ibv_port_attr,
        port_cap_flags2
    );
    size!(ibv_gid);
    off!("ibv_gid.global.interface_id", ibv_gid, global.interface_id);
    size!(ibv_pd);
    off!("ibv_pd.context", ibv_pd, context);
    off!("ibv_pd.handle", ibv_pd, handle);
    size!(ibv_mr);
    off!("ibv_mr.context", ibv_mr, context);
    off!("ibv_mr.pd", ibv_mr, pd);
    off!("ibv_mr.addr", ibv_mr, addr);
    off!("ibv_mr.length", ibv_mr, length);
    off!("ibv_mr.handle", ibv_mr, handle);
    off!("ibv_mr.lkey", ibv_mr, lkey);
    off!("ibv_mr.rkey", ibv_mr, rkey);
    size!(ibv_cq);
    off!("ibv_cq.context", ibv_cq, context);
    off!("ibv_cq.channel", ibv_cq, channel);
    off!("ibv_cq.cq_context", ibv_cq, cq_context);
    off!("ibv_cq.handle", ibv_cq, handle);
    off!("ibv_cq.cqe", ibv_cq, cqe);
    off!("ibv_cq.mutex", ibv_cq, mutex);
    off!("ibv_cq.cond", ibv_cq, cond);
    off!(
        "ibv_cq.comp_events_completed",
        ibv_cq,
        comp_events_completed
    );
    off!(
        "ibv_cq.async_events_completed",
        ibv_cq,
        async_events_completed
    );
    size!(ibv_srq_attr);
    off!("ibv_srq_attr.max_wr", ibv_srq_attr, max_wr);
    off!("ibv_srq_attr.max_sge", ibv_srq_attr, max_sge);
    off!("ibv_srq_attr.srq_limit", ibv_srq_attr, srq_limit);
    size!(ibv_srq_init_attr);
    off!(
        "ibv_srq_init_attr.srq_context",
        ibv_srq_init_attr,
        srq_context
    );
    off!("ibv_srq_init_attr.attr", ibv_srq_init_attr, attr);
    size!(ibv_srq);
    off!("ibv_srq.context", ibv_srq, context);
    off!("ibv_srq.srq_context", ibv_srq, srq_context);
    off!("ibv_srq.pd", ibv_srq, pd);
    off!("ibv_srq.handle", ibv_srq, handle);
    off!("ibv_srq.mutex", ibv_srq, mutex);
    off!("ibv_srq.cond", ibv_srq, cond);
    off!("ibv_srq.events_completed", ibv_srq, events_completed);
    size!(ibv_qp);
    off!("ibv_qp.context", ibv_qp, context);
    off!("ibv_qp.qp_context", ibv_qp, qp_context);
    off!("ibv_qp.pd", ibv_qp, pd);
    off!("ibv_qp.send_cq", ibv_qp, send_cq);
    off!("ibv_qp.recv_cq", ibv_qp, recv_cq);
    off!("ibv_qp.srq", ibv_qp, srq);
    off!("ibv_qp.handle", ibv_qp, handle);
    off!("ibv_qp.qp_num", ibv_qp, qp_num);
    off!("ibv_qp.state", ibv_qp, state);
    off!("ibv_qp.qp_type", ibv_qp, qp_type);
    off!("ibv_qp.mutex", ibv_qp, mutex);
    off!("ibv_qp.cond", ibv_qp, cond);
    off!("ibv_qp.events_completed", ibv_qp, events_completed);
    size!(ibv_qp_cap);
    off!("ibv_qp_cap.max_send_wr", ibv_qp_cap, max_send_wr);
    off!("ibv_qp_cap.max_recv_wr", ibv_qp_cap, max_recv_wr);
    off!("ibv_qp_cap.max_send_sge", ibv_qp_cap, max_send_sge);
    off!("ibv_qp_cap.max_recv_sge", ibv_qp_cap, max_recv_sge);
    off!("ibv_qp_cap.max_inline_data", ibv_qp_cap, max_inline_data);
    size!(ibv_qp_init_attr);
    off!("ibv_qp_init_attr.qp_context", ibv_qp_init_attr, qp_context);
    off!("ibv_qp_init_attr.send_cq", ibv_qp_init_attr, send_cq);
    off!("ibv_qp_init_attr.recv_cq", ibv_qp_init_attr, recv_cq);
    off!("ibv_qp_init_attr.srq", ibv_qp_init_attr, srq);
    off!("ibv_qp_init_attr.cap", ibv_qp_init_attr, cap);
    off!("ibv_qp_init_attr.qp_type", ibv_qp_init_attr, qp_type);
    off!("ibv_qp_init_attr.sq_sig_all", ibv_qp_init_attr, sq_sig_all);
    size!(ibv_global_route);
    off!("ibv_global_route.dgid", ibv_global_route, dgid);
    off!("ibv_global_route.flow_label", ibv_global_route, flow_label);
    off!("ibv_global_route.sgid_index", ibv_global_route, sgid_index);
    off!("ibv_global_route.hop_limit", ibv_global_route, hop_limit);
    off!(
        "ibv_global_route.traffic_class",
        ibv_global_route,
        traffic_class
    );
    size!(ibv_ah_attr);
    off!("ibv_ah_attr.grh", ibv_ah_attr, grh);
    off!("ibv_ah_attr.dlid", ibv_ah_attr, dlid);
    off!("ibv_ah_attr.sl", ibv_ah_attr, sl);
    off!("ibv_ah_attr.src_path_bits", ibv_ah_attr, src_path_bits);
    off!("ibv_ah_attr.static_rate", ibv_ah_attr, static_rate);
    off!("ibv_ah_attr.is_global", ibv_ah_attr, is_global);
    off!("ibv_ah_attr.port_num", ibv_ah_attr, port_num);
    size!(ibv_qp_attr);
    off!("ibv_qp_attr.qp_state", ibv_qp_attr, qp_state);
    off!("ibv_qp_attr.cur_qp_state", ibv_qp_attr, cur_qp_state);
    off!("ibv_qp_attr.path_mtu", ibv_qp_attr, path_mtu);
    off!("ibv_qp_attr.path_mig_state", ibv_qp_attr, path_mig_state);
    off!("ibv_qp_attr.qkey", ibv_qp_attr, qkey);
    off!("ibv_qp_attr.rq_psn", ibv_qp_attr, rq_psn);
    off!("ibv_qp_attr.sq_psn", ibv_qp_attr, sq_psn);
    off!("ibv_qp_attr.dest_qp_num", ibv_qp_attr, dest_qp_num);
    off!("ibv_qp_attr.qp_access_flags", ibv_qp_attr, qp_access_flags);
    off!("ibv_qp_attr.cap", ibv_qp_attr, cap);
    off!("ibv_qp_attr.ah_attr", ibv_qp_attr, ah_attr);
    off!("ibv_qp_attr.alt_ah_attr", ibv_qp_attr, alt_ah_attr);
    off!("ibv_qp_attr.pkey_index", ibv_qp_attr, pkey_index);
    off!("ibv_qp_attr.alt_pkey_index", ibv_qp_attr, alt_pkey_index);
    off!(
        "ibv_qp_attr.en_sqd_async_notify",
        ibv_qp_attr,
        en_sqd_async_notify
    );
    off!("ibv_qp_attr.sq_draining", ibv_qp_attr, sq_draining);
    off!("ibv_qp_attr.max_rd_atomic", ibv_qp_attr, max_rd_atomic);
    off!(
        "ibv_qp_attr.max_dest_rd_atomic",
        ibv_qp_attr,
        max_dest_rd_atomic
    );
    off!("ibv_qp_attr.min_rnr_timer", ibv_qp_attr, min_rnr_timer);
    off!("ibv_qp_attr.port_num", ibv_qp_attr, port_num);
    off!("ibv_qp_attr.timeout", ibv_qp_attr, timeout);
    off!("ibv_qp_attr.retry_cnt", ibv_qp_attr, retry_cnt);
    off!("ibv_qp_attr.rnr_retry", ibv_qp_attr, rnr_retry);
    off!("ibv_qp_attr.alt_port_num", ibv_qp_attr, alt_port_num);
    off!("ibv_qp_attr.alt_timeout", ibv_qp_attr, alt_timeout);
    off!("ibv_qp_attr.rate_limit", ibv_qp_attr, rate_limit);
    size!(ibv_sge);
    off!("ibv_sge.addr", ibv_sge, addr);
    off!("ibv_sge.length", ibv_sge, length);
    off!("ibv_sge.lkey", ibv_sge, lkey);
    size!(ibv_send_wr);
    off!("ibv_send_wr.wr_id", ibv_send_wr, wr_id);
    off!("ibv_send_wr.next", ibv_send_wr, next);
    off!("ibv_send_wr.sg_list", ibv_send_wr, sg_list);
    off!("ibv_send_wr.num_sge", ibv_send_wr, num_sge);
    off!("ibv_send_wr.opcode", ibv_send_wr, opcode);
    off!("ibv_send_wr.send_flags", ibv_send_wr, send_flags);
    off!("ibv_send_wr.imm_data", ibv_send_wr, imm_data);
    off!("ibv_send_wr.invalidate_rkey", ibv_send_wr, imm_data);
    off!("ibv_send_wr.wr", ibv_send_wr, wr);
    off!(
        "ibv_send_wr.wr.rdma.remote_addr",
        ibv_send_wr,
        wr.rdma.remote_addr
    );
    off!("ibv_send_wr.wr.rdma.rkey", ibv_send_wr, wr.rdma.rkey);
    off!(
        "ibv_send_wr.wr.atomic.remote_addr",
        ibv_send_wr,
        wr.atomic.remote_addr
    );
    off!(
        "ibv_send_wr.wr.atomic.compare_add",
        ibv_send_wr,
        wr.atomic.compare_add
    );
    off!("ibv_send_wr.wr.atomic.swap", ibv_send_wr, wr.atomic.swap);
    off!("ibv_send_wr.wr.atomic.rkey", ibv_send_wr, wr.atomic.rkey);
    off!("ibv_send_wr.wr.ud.ah", ibv_send_wr, wr.ud.ah);
    off!(
        "ibv_send_wr.wr.ud.remote_qpn",
        ibv_send_wr,
        wr.ud.remote_qpn
    );
    off!(
        "ibv_send_wr.wr.ud.remote_qkey",
        ibv_send_wr,
        wr.ud.remote_qkey
    );
    off!(
        "ibv_send_wr.qp_type.xrc.remote_srqn",
        ibv_send_wr,
        qp_type.xrc.remote_srqn
    );
    off!("ibv_send_wr.bind_mw.mw", ibv_send_wr, bind_tso.bind_mw.mw);
    off!(
        "ibv_send_wr.bind_mw.rkey",
        ibv_send_wr,
        bind_tso.bind_mw.rkey
    );
    off!(
        "ibv_send_wr.bind_mw.bind_info.mr",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.mr
    );
    off!(
        "ibv_send_wr.bind_mw.bind_info.addr",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.addr
    );
    off!(
        "ibv_send_wr.bind_mw.bind_info.length",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.length
    );
    off!(
        "ibv_send_wr.bind_mw.bind_info.mw_access_flags",
        ibv_send_wr,
        bind_tso.bind_mw.bind_info.mw_access_flags
    );
    off!("ibv_send_wr.tso.hdr", ibv_send_wr, bind_tso.tso.hdr);
    off!("ibv_send_wr.tso.hdr_sz", ibv_send_wr, bind_tso.tso.hdr_sz);
    off!("ibv_send_wr.tso.mss", ibv_send_wr, bind_tso.tso.mss);
    size!(ibv_mw_bind_info);
    size!(ibv_recv_wr);
    off!("ibv_recv_wr.wr_id", ibv_recv_wr, wr_id);
    off!("ibv_recv_wr.next", ibv_recv_wr, next);
    off!("ibv_recv_wr.sg_list", ibv_recv_wr, sg_list);
    off!("ibv_recv_wr.num_sge", ibv_recv_wr, num_sge);
    size!(ibv_wc);
    off!("ibv_wc.wr_id", ibv_wc, wr_id);
    off!("ibv_wc.status", ibv_wc, status);
    off!("ibv_wc.opcode", ibv_wc, opcode);
    off!("ibv_wc.vendor_err", ibv_wc, vendor_err);
    off!("ibv_wc.byte_len", ibv_wc, byte_len);
    off!("ibv_wc.imm_data", ibv_wc, imm_data);
    off!("ibv_wc.invalidated_rkey", ibv_wc, imm_data);
    off!("ibv_wc.qp_num", ibv_wc, qp_num);
    off!("ibv_wc.src_qp", ibv_wc, src_qp);
    off!("ibv_wc.wc_flags", ibv_wc, wc_flags);
    off!("ibv_wc.pkey_index", ibv_wc, pkey_index);
    off!("ibv_wc.slid", ibv_wc, slid);
    off!("ibv_wc.sl", ibv_wc, sl);
    off!("ibv_wc.dlid_path_bits", ibv_wc, dlid_path_bits);
    size!(ibv_ah);
    off!("ibv_ah.context", ibv_ah, context);
    off!("ibv_ah.pd", ibv_ah, pd);
    off!("ibv_ah.handle", ibv_ah, handle);
    size!(ibv_async_event);
    off!("ibv_async_event.element", ibv_async_event, element);
    off!("ibv_async_event.event_type", ibv_async_event, event_type);
    size!(mlx5dv_qp);
    off!("mlx5dv_qp.dbrec", mlx5dv_qp, dbrec);
    off!("mlx5dv_qp.sq.buf", mlx5dv_qp, sq.buf);
    off!("mlx5dv_qp.sq.wqe_cnt", mlx5dv_qp, sq.wqe_cnt);
    off!("mlx5dv_qp.sq.stride", mlx5dv_qp, sq.stride);
    off!("mlx5dv_qp.rq.buf", mlx5dv_qp, rq.buf);
    off!("mlx5dv_qp.rq.wqe_cnt", mlx5dv_qp, rq.wqe_cnt);
    off!("mlx5dv_qp.rq.stride", mlx5dv_qp, rq.stride);
    off!("mlx5dv_qp.bf.reg", mlx5dv_qp, bf.reg);
    off!("mlx5dv_qp.bf.size", mlx5dv_qp, bf.size);
    off!("mlx5dv_qp.comp_mask", mlx5dv_qp, comp_mask);
    off!("mlx5dv_qp.uar_mmap_offset", mlx5dv_qp, uar_mmap_offset);
    off!("mlx5dv_qp.tirn", mlx5dv_qp, tirn);
    off!("mlx5dv_qp.tisn", mlx5dv_qp, tisn);
    off!("mlx5dv_qp.rqn", mlx5dv_qp, rqn);
    off!("mlx5dv_qp.sqn", mlx5dv_qp, sqn);
    off!("mlx5dv_qp.tir_icm_addr", mlx5dv_qp, tir_icm_addr);
    size!(mlx5dv_cq);
    off!("mlx5dv_cq.buf", mlx5dv_cq, buf);
    off!("mlx5dv_cq.dbrec", mlx5dv_cq, dbrec);
    off!("mlx5dv_cq.cqe_cnt", mlx5dv_cq, cqe_cnt);
    off!("mlx5dv_cq.cqe_size", mlx5dv_cq, cqe_size);
    off!("mlx5dv_cq.cq_uar", mlx5dv_cq, cq_uar);
    off!("mlx5dv_cq.cqn", mlx5dv_cq, cqn);
    off!("mlx5dv_cq.comp_mask", mlx5dv_cq, comp_mask);
    size!(mlx5dv_srq);
    off!("mlx5dv_srq.buf", mlx5dv_srq, buf);
    off!("mlx5dv_srq.dbrec", mlx5dv_srq, dbrec);
    off!("mlx5dv_srq.stride", mlx5dv_srq, stride);
    off!("mlx5dv_srq.head", mlx5dv_srq, head);
    off!("mlx5dv_srq.tail", mlx5dv_srq, tail);
    off!("mlx5dv_srq.comp_mask", mlx5dv_srq, comp_mask);
    off!("mlx5dv_srq.srqn", mlx5dv_srq, srqn);
    size!(mlx5dv_ah);
    off!("mlx5dv_ah.av", mlx5dv_ah, av);
    off!("mlx5dv_ah.comp_mask", mlx5dv_ah, comp_mask);
    size!(mlx5dv_obj);
    off!("mlx5dv_obj.qp.in", mlx5dv_obj, qp.r#in);
    off!("mlx5dv_obj.qp.out", mlx5dv_obj, qp.out);
    off!("mlx5dv_obj.cq.in", mlx5dv_obj, cq.r#in);
    off!("mlx5dv_obj.cq.out", mlx5dv_obj, cq.out);
    off!("mlx5dv_obj.srq.in", mlx5dv_obj, srq.r#in);
    off!("mlx5dv_obj.srq.out", mlx5dv_obj, srq.out);
    off!("mlx5dv_obj.rwq", mlx5dv_obj, rwq);
    off!("mlx5dv_obj.dm", mlx5dv_obj, dm);
    off!("mlx5dv_obj.ah", mlx5dv_obj, ah);
    off!("mlx5dv_obj.pd", mlx5dv_obj, pd);
    size!(mlx5dv_context);
    off!("mlx5dv_context.version", mlx5dv_context, version);
    off!("mlx5dv_context.flags", mlx5dv_context, flags);
    off!("mlx5dv_context.comp_mask", mlx5dv_context, comp_mask);
    val!(IBV_SYSFS_NAME_MAX);
    val!(IBV_SYSFS_PATH_MAX);
    val!(IBV_NODE_CA);
    val!(IBV_NODE_RNIC);
    val!(IBV_TRANSPORT_IB);
    val!(IBV_TRANSPORT_IWARP);
    val!(IBV_ATOMIC_NONE);
    val!(IBV_ATOMIC_HCA);
    val!(IBV_ATOMIC_GLOB);
    val!(IBV_MTU_256);
    val!(IBV_MTU_512);
    val!(IBV_MTU_1024);
    val!(IBV_MTU_2048);
    val!(IBV_MTU_4096);
    val!(IBV_PORT_NOP);
    val!(IBV_PORT_DOWN);
    val!(IBV_PORT_INIT);
    val!(IBV_PORT_ARMED);
    val!(IBV_PORT_ACTIVE);
    val!(IBV_PORT_ACTIVE_DEFER);
    val!(IBV_LINK_LAYER_UNSPECIFIED);
    val!(IBV_LINK_LAYER_INFINIBAND);
    val!(IBV_LINK_LAYER_ETHERNET);
    val!(IBV_ACCESS_LOCAL_WRITE);
    val!(IBV_ACCESS_REMOTE_WRITE);
    val!(IBV_ACCESS_REMOTE_READ);
    val!(IBV_ACCESS_REMOTE_ATOMIC);
    val!(IBV_ACCESS_MW_BIND);
    val!(IBV_ACCESS_ZERO_BASED);
    val!(IBV_ACCESS_ON_DEMAND);
    val!(IBV_ACCESS_HUGETLB);
    val!(IBV_ACCESS_RELAXED_ORDERING);
    val!(IBV_QPT_RC);
    val!(IBV_QPT_UC);
    val!(IBV_QPT_UD);
    val!(IBV_QPS_RESET);
    val!(IBV_QPS_INIT);
    val!(IBV_QPS_RTR);
    val!(IBV_QPS_RTS);
    val!(IBV_QPS_SQD);
    val!(IBV_QPS_SQE);
    val!(IBV_QPS_ERR);
    val!(IBV_QPS_UNKNOWN);
    val!(IBV_MIG_MIGRATED);
    val!(IBV_QP_STATE);
    val!(IBV_QP_CUR_STATE);
    val!(IBV_QP_EN_SQD_ASYNC_NOTIFY);
    val!(IBV_QP_ACCESS_FLAGS);
    val!(IBV_QP_PKEY_INDEX);
    val!(IBV_QP_PORT);
    val!(IBV_QP_QKEY);
    val!(IBV_QP_AV);
    val!(IBV_QP_PATH_MTU);
    val!(IBV_QP_TIMEOUT);
    val!(IBV_QP_RETRY_CNT);
    val!(IBV_QP_RNR_RETRY);
    val!(IBV_QP_RQ_PSN);
    val!(IBV_QP_MAX_QP_RD_ATOMIC);
    val!(IBV_QP_ALT_PATH);
    val!(IBV_QP_MIN_RNR_TIMER);
    val!(IBV_QP_SQ_PSN);
    val!(IBV_QP_MAX_DEST_RD_ATOMIC);
    val!(IBV_QP_PATH_MIG_STATE);
    val!(IBV_QP_CAP);
    val!(IBV_QP_DEST_QPN);
    val!(IBV_SRQ_MAX_WR);
    val!(IBV_SRQ_LIMIT);
    val!(IBV_WR_RDMA_WRITE);
    val!(IBV_WR_RDMA_WRITE_WITH_IMM);
    val!(IBV_WR_SEND);
    val!(IBV_WR_SEND_WITH_IMM);
    val!(IBV_WR_RDMA_READ);
    val!(IBV_WR_ATOMIC_CMP_AND_SWP);
    val!(IBV_WR_ATOMIC_FETCH_AND_ADD);
    val!(IBV_WR_LOCAL_INV);
    val!(IBV_WR_BIND_MW);
    val!(IBV_WR_SEND_WITH_INV);
    val!(IBV_SEND_FENCE);
    val!(IBV_SEND_SIGNALED);
    val!(IBV_SEND_SOLICITED);
    val!(IBV_SEND_INLINE);
    val!(IBV_WC_SUCCESS);
    val!(IBV_WC_LOC_LEN_ERR);
    val!(IBV_WC_LOC_QP_OP_ERR);
    val!(IBV_WC_LOC_PROT_ERR);
    val!(IBV_WC_WR_FLUSH_ERR);
    val!(IBV_WC_REM_ACCESS_ERR);
    val!(IBV_WC_REM_OP_ERR);
    val!(IBV_WC_RETRY_EXC_ERR);
    val!(IBV_WC_RNR_RETRY_EXC_ERR);
    val!(IBV_WC_GENERAL_ERR);
    val!(IBV_WC_SEND);
    val!(IBV_WC_RDMA_WRITE);
    val!(IBV_WC_RDMA_READ);
    val!(IBV_WC_COMP_SWAP);
    val!(IBV_WC_FETCH_ADD);
    val!(IBV_WC_RECV);
    val!(IBV_WC_RECV_RDMA_WITH_IMM);
    val!(IBV_WC_GRH);
    val!(IBV_WC_WITH_IMM);
    val!(IBV_WC_WITH_INV);
    val!(IBV_EVENT_CQ_ERR);
    val!(IBV_EVENT_QP_FATAL);
    val!(IBV_EVENT_QP_REQ_ERR);
    val!(IBV_EVENT_QP_ACCESS_ERR);
    val!(IBV_EVENT_COMM_EST);
    val!(IBV_EVENT_SQ_DRAINED);
    val!(IBV_EVENT_DEVICE_FATAL);
    val!(IBV_EVENT_PORT_ACTIVE);
    val!(IBV_EVENT_PORT_ERR);
    val!(IBV_EVENT_SRQ_ERR);
    val!(IBV_EVENT_SRQ_LIMIT_REACHED);
    val!(IBV_EVENT_QP_LAST_WQE_REACHED);
    val!(IBV_EVENT_GID_CHANGE);
    val!(MLX5DV_OBJ_QP);
    val!(MLX5DV_OBJ_CQ);
    val!(MLX5DV_OBJ_SRQ);
    val!(MLX5DV_OBJ_AH);
    val!(MLX5DV_SRQ_MASK_SRQN);
    val!(MLX5DV_CONTEXT_FLAGS_CQE_V1);
    val!(MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW);
    val!(MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP);
    val!(MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD);
    size!(ibv_td_init_attr);
    off!("ibv_td_init_attr.comp_mask", ibv_td_init_attr, comp_mask);
    size!(ibv_td);
    off!("ibv_td.context", ibv_td, context);
    size!(ibv_parent_domain_init_attr);
    off!(
        "ibv_parent_domain_init_attr.pd",
        ibv_parent_domain_init_attr,
        pd
    );
    off!(
        "ibv_parent_domain_init_attr.td",
        ibv_parent_domain_init_attr,
        td
    );
    off!(
        "ibv_parent_domain_init_attr.comp_mask",
        ibv_parent_domain_init_attr,
        comp_mask
    );
    off!(
        "ibv_parent_domain_init_attr.alloc",
        ibv_parent_domain_init_attr,
        alloc
    );
    off!(
        "ibv_parent_domain_init_attr.free",
        ibv_parent_domain_init_attr,
        free
    );
    off!(
        "ibv_parent_domain_init_attr.pd_context",
        ibv_parent_domain_init_attr,
        pd_context
    );
    size!(ibv_rx_hash_conf);
    off!(
        "ibv_rx_hash_conf.rx_hash_key",
        ibv_rx_hash_conf,
        rx_hash_key
    );
    off!(
        "ibv_rx_hash_conf.rx_hash_fields_mask",
        ibv_rx_hash_conf,
        rx_hash_fields_mask
    );
    size!(ibv_qp_init_attr_ex);
    off!(
        "ibv_qp_init_attr_ex.qp_context",
        ibv_qp_init_attr_ex,
        qp_context
    );
    off!("ibv_qp_init_attr_ex.send_cq", ibv_qp_init_attr_ex, send_cq);
    off!("ibv_qp_init_attr_ex.recv_cq", ibv_qp_init_attr_ex, recv_cq);
    off!("ibv_qp_init_attr_ex.srq", ibv_qp_init_attr_ex, srq);
    off!("ibv_qp_init_attr_ex.cap", ibv_qp_init_attr_ex, cap);
    off!("ibv_qp_init_attr_ex.qp_type", ibv_qp_init_attr_ex, qp_type);
    off!(
        "ibv_qp_init_attr_ex.sq_sig_all",
        ibv_qp_init_attr_ex,
        sq_sig_all
    );
    off!(
        "ibv_qp_init_attr_ex.comp_mask",
        ibv_qp_init_attr_ex,
        comp_mask
    );
    off!("ibv_qp_init_attr_ex.pd", ibv_qp_init_attr_ex, pd);
    off!("ibv_qp_init_attr_ex.xrcd", ibv_qp_init_attr_ex, xrcd);
    off!(
        "ibv_qp_init_attr_ex.create_flags",
        ibv_qp_init_attr_ex,
        create_flags
    );
    off!(
        "ibv_qp_init_attr_ex.max_tso_header",
        ibv_qp_init_attr_ex,
        max_tso_header
    );
    off!(
        "ibv_qp_init_attr_ex.rwq_ind_tbl",
        ibv_qp_init_attr_ex,
        rwq_ind_tbl
    );
    off!(
        "ibv_qp_init_attr_ex.rx_hash_conf",
        ibv_qp_init_attr_ex,
        rx_hash_conf
    );
    off!(
        "ibv_qp_init_attr_ex.source_qpn",
        ibv_qp_init_attr_ex,
        source_qpn
    );
    off!(
        "ibv_qp_init_attr_ex.send_ops_flags",
        ibv_qp_init_attr_ex,
        send_ops_flags
    );
    size!(mlx5dv_dc_init_attr);
    off!("mlx5dv_dc_init_attr.dc_type", mlx5dv_dc_init_attr, dc_type);
    off!(
        "mlx5dv_dc_init_attr.dct_access_key",
        mlx5dv_dc_init_attr,
        dct_access_key
    );
    size!(mlx5dv_qp_init_attr);
    off!(
        "mlx5dv_qp_init_attr.comp_mask",
        mlx5dv_qp_init_attr,
        comp_mask
    );
    off!(
        "mlx5dv_qp_init_attr.create_flags",
        mlx5dv_qp_init_attr,
        create_flags
    );
    off!(
        "mlx5dv_qp_init_attr.dc_init_attr",
        mlx5dv_qp_init_attr,
        dc_init_attr
    );
    off!(
        "mlx5dv_qp_init_attr.send_ops_flags",
        mlx5dv_qp_init_attr,
        send_ops_flags
    );
    size!(verbs_context);
    off!("verbs_context.query_port", verbs_context, query_port);
    off!(
        "verbs_context.modify_qp_rate_limit",
        verbs_context,
        modify_qp_rate_limit
    );
    off!(
        "verbs_context.alloc_parent_domain",
        verbs_context,
        alloc_parent_domain
    );
    off!("verbs_context.dealloc_td", verbs_context, dealloc_td);
    off!("verbs_context.alloc_td", verbs_context, alloc_td);
    off!("verbs_context.create_cq_ex", verbs_context, create_cq_ex);
    off!("verbs_context.priv", verbs_context, priv_);
    off!("verbs_context.create_qp_ex", verbs_context, create_qp_ex);
    off!("verbs_context.close_xrcd", verbs_context, close_xrcd);
    off!(
        "verbs_context._ABI_placeholder3",
        verbs_context,
        abi_placeholder3
    );
    off!("verbs_context.sz", verbs_context, sz);
    off!("verbs_context.context", verbs_context, context);
    m.insert(
        "value VERBS_ABI_IS_EXTENDED".into(),
        VERBS_ABI_IS_EXTENDED as i64,
    );
    val!(IBV_QP_INIT_ATTR_PD);
    val!(MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS);
    val!(MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE);
    size!(rdma_event_channel);
    off!("rdma_event_channel.fd", rdma_event_channel, fd);
    size!(rdma_ib_addr);
    off!("rdma_ib_addr.sgid", rdma_ib_addr, sgid);
    off!("rdma_ib_addr.dgid", rdma_ib_addr, dgid);
    off!("rdma_ib_addr.pkey", rdma_ib_addr, pkey);
    size!(rdma_addr);
    off!("rdma_addr.src_addr", rdma_addr, src_addr);
    off!("rdma_addr.dst_addr", rdma_addr, dst_addr);
    off!("rdma_addr.addr", rdma_addr, addr);
    size!(rdma_route);
    off!("rdma_route.addr", rdma_route, addr);
    off!("rdma_route.path_rec", rdma_route, path_rec);
    off!("rdma_route.num_paths", rdma_route, num_paths);
    size!(rdma_cm_id);
    off!("rdma_cm_id.verbs", rdma_cm_id, verbs);
    off!("rdma_cm_id.channel", rdma_cm_id, channel);
    off!("rdma_cm_id.context", rdma_cm_id, context);
    off!("rdma_cm_id.qp", rdma_cm_id, qp);
    off!("rdma_cm_id.route", rdma_cm_id, route);
    off!("rdma_cm_id.ps", rdma_cm_id, ps);
    off!("rdma_cm_id.port_num", rdma_cm_id, port_num);
    off!("rdma_cm_id.event", rdma_cm_id, event);
    off!("rdma_cm_id.send_cq_channel", rdma_cm_id, send_cq_channel);
    off!("rdma_cm_id.pd", rdma_cm_id, pd);
    off!("rdma_cm_id.qp_type", rdma_cm_id, qp_type);
    size!(rdma_conn_param);
    off!(
        "rdma_conn_param.private_data",
        rdma_conn_param,
        private_data
    );
    off!(
        "rdma_conn_param.private_data_len",
        rdma_conn_param,
        private_data_len
    );
    off!(
        "rdma_conn_param.responder_resources",
        rdma_conn_param,
        responder_resources
    );
    off!(
        "rdma_conn_param.initiator_depth",
        rdma_conn_param,
        initiator_depth
    );
    off!(
        "rdma_conn_param.flow_control",
        rdma_conn_param,
        flow_control
    );
    off!("rdma_conn_param.retry_count", rdma_conn_param, retry_count);
    off!(
        "rdma_conn_param.rnr_retry_count",
        rdma_conn_param,
        rnr_retry_count
    );
    off!("rdma_conn_param.srq", rdma_conn_param, srq);
    off!("rdma_conn_param.qp_num", rdma_conn_param, qp_num);
    size!(rdma_ud_param);
    off!(
        "rdma_ud_param.private_data_len",
        rdma_ud_param,
        private_data_len
    );
    off!("rdma_ud_param.ah_attr", rdma_ud_param, ah_attr);
    off!("rdma_ud_param.qp_num", rdma_ud_param, qp_num);
    off!("rdma_ud_param.qkey", rdma_ud_param, qkey);
    size!(rdma_cm_event);
    off!("rdma_cm_event.id", rdma_cm_event, id);
    off!("rdma_cm_event.listen_id", rdma_cm_event, listen_id);
    off!("rdma_cm_event.event", rdma_cm_event, event);
    off!("rdma_cm_event.status", rdma_cm_event, status);
    off!("rdma_cm_event.param", rdma_cm_event, param);
    size!(rdma_cm_event_param);
    val!(RDMA_CM_EVENT_ADDR_RESOLVED);
    val!(RDMA_CM_EVENT_ADDR_ERROR);
    val!(RDMA_CM_EVENT_ROUTE_RESOLVED);
    val!(RDMA_CM_EVENT_ROUTE_ERROR);
    val!(RDMA_CM_EVENT_CONNECT_REQUEST);
    val!(RDMA_CM_EVENT_CONNECT_RESPONSE);
    val!(RDMA_CM_EVENT_CONNECT_ERROR);
    val!(RDMA_CM_EVENT_UNREACHABLE);
    val!(RDMA_CM_EVENT_REJECTED);
    val!(RDMA_CM_EVENT_ESTABLISHED);
    val!(RDMA_CM_EVENT_DISCONNECTED);
    val!(RDMA_CM_EVENT_DEVICE_REMOVAL);
    val!(RDMA_CM_EVENT_ADDR_CHANGE);
    val!(RDMA_CM_EVENT_TIMEWAIT_EXIT);
    val!(RDMA_PS_TCP);
    val!(RDMA_PS_UDP);
    val!(RDMA_MAX_RESP_RES);
    val!(RDMA_MAX_INIT_DEPTH);
    m
}

/// `fixtures/abi/abi.txt`: the architectures its first line names, and per key
/// (`<kind> <name>`) one value per architecture.
type CTable = (Vec<String>, BTreeMap<String, Vec<i64>>);

fn c_table() -> Result<CTable, String> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/abi/abi.txt");
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap_or("").split_whitespace().collect();
    let arches: Vec<String> = match header.as_slice() {
        ["#", "<kind>", "<name>", arches @ ..] if !arches.is_empty() => {
            arches.iter().map(|a| a.to_string()).collect()
        }
        _ => {
            return Err(format!(
                "abi.txt line 1: expected '# <kind> <name> <arch>...': {header:?}"
            ))
        }
    };
    let mut m = BTreeMap::new();
    for (i, line) in lines.enumerate() {
        let n = i + 2;
        let parts: Vec<&str> = line.split_whitespace().collect();
        let [kind, name, values @ ..] = parts.as_slice() else {
            return Err(format!("abi.txt line {n}: empty"));
        };
        if values.len() != arches.len() {
            return Err(format!(
                "abi.txt line {n}: expected '<kind> <name>' and {} values ({}): {line:?}",
                arches.len(),
                arches.join(" ")
            ));
        }
        if !matches!(*kind, "sizeof" | "offsetof" | "value") {
            return Err(format!("abi.txt line {n}: unknown kind {kind:?}"));
        }
        let values = values
            .iter()
            .map(|v| {
                v.parse()
                    .map_err(|_| format!("abi.txt line {n}: bad number {v:?}"))
            })
            .collect::<Result<Vec<i64>, String>>()?;
        if m.insert(format!("{kind} {name}"), values).is_some() {
            return Err(format!("abi.txt line {n}: duplicate {kind} {name}"));
        }
    }
    Ok((arches, m))
}

/// The column of `abi.txt` for the architecture this test is compiled for.
fn c_layout() -> Result<BTreeMap<String, i64>, String> {
    let arch = std::env::consts::ARCH;
    let (arches, table) = c_table()?;
    let Some(col) = arches.iter().position(|a| a == arch) else {
        return Err(format!(
            "abi.txt has no {arch} column (it has {}): add {arch} to fixtures/abi/regen.sh",
            arches.join(", ")
        ));
    };
    Ok(table.into_iter().map(|(k, v)| (k, v[col])).collect())
}

#[test]
fn the_table_has_the_x86_64_and_aarch64_columns_and_they_differ_only_around_the_pthread_mutex() {
    // glibc's pthread_mutex_t is 40 bytes on x86_64 and 48 on aarch64 (pthread_cond_t is 48
    // on both): exactly the structs that embed one, and their fields after it, differ.
    let (arches, table) = c_table().unwrap();
    assert_eq!(arches, ["x86_64", "aarch64"]);
    let differ: Vec<String> = table
        .iter()
        .filter(|(_, v)| v[0] != v[1])
        .map(|(k, v)| format!("{k} {} {}", v[0], v[1]))
        .collect();
    assert_eq!(
        differ,
        [
            "offsetof ibv_context.abi_compat 320 328",
            "offsetof ibv_cq.async_events_completed 124 132",
            "offsetof ibv_cq.comp_events_completed 120 128",
            "offsetof ibv_cq.cond 72 80",
            "offsetof ibv_qp.cond 104 112",
            "offsetof ibv_qp.events_completed 152 160",
            "offsetof ibv_srq.cond 72 80",
            "offsetof ibv_srq.events_completed 120 128",
            "sizeof ibv_context 328 336",
            "sizeof ibv_cq 128 136",
            "sizeof ibv_qp 160 168",
            "sizeof ibv_srq 128 136",
            "sizeof verbs_context 648 656",
        ]
    );
}

#[test]
fn every_line_of_the_c_table_matches_the_rust_mirrors() {
    let c = c_layout().unwrap();
    let rust = rust_layout();
    assert!(c.len() > 300, "abi.txt has only {} lines", c.len());
    let mut errors = Vec::new();
    for (k, cv) in &c {
        match rust.get(k) {
            None => errors.push(format!("{k}: in abi.txt but unknown to tests/abi.rs")),
            Some(rv) if rv != cv => errors.push(format!("{k}: C says {cv}, Rust says {rv}")),
            Some(_) => {}
        }
    }
    for k in rust.keys() {
        if !c.contains_key(k) {
            errors.push(format!(
                "{k}: checked by tests/abi.rs but missing from abi.txt"
            ));
        }
    }
    assert!(errors.is_empty(), "ABI mismatches:\n{}", errors.join("\n"));
}

#[test]
fn the_mlx5dv_context_tail_covers_the_whole_struct() {
    // We mirror only the head of mlx5dv_context; the opaque tail must make the Rust struct
    // exactly as large as C's, or mlx5dv_query_device would write past it.
    let c = c_layout().unwrap();
    assert_eq!(
        c["sizeof mlx5dv_context"],
        size_of::<mlx5dv_context>() as i64
    );
    assert_eq!(MLX5DV_CONTEXT_SIZE, size_of::<mlx5dv_context>());
}

/// A `verbs_context` built in memory, with provenance over the whole struct, and a pointer to
/// its embedded `ibv_context` derived from it (as libibverbs' own allocation gives).
fn fake_ctx(v: &mut verbs_context) -> *mut ibv_context {
    let base: *mut verbs_context = v;
    // SAFETY: `base` points to a live, exclusively borrowed verbs_context.
    unsafe { std::ptr::addr_of_mut!((*base).context) }
}

unsafe extern "C" fn fake_alloc_td(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    std::ptr::null_mut()
}

#[test]
fn verbs_get_ctx_is_container_of_and_checks_abi_compat() {
    let mut v = verbs_context::zeroed();
    let base = std::ptr::addr_of_mut!(v) as usize;
    let ctx = fake_ctx(&mut v);
    // abi_compat 0: a legacy context, no extended ops.
    // SAFETY: `ctx` is embedded in `v` with provenance over all of `v`.
    assert!(unsafe { verbs_get_ctx(ctx) }.is_none());
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let got = unsafe { verbs_get_ctx(ctx) }.expect("extended context");
    assert_eq!(got as usize, base);
    assert_eq!(ctx as usize - base, 320);
}

#[test]
fn verbs_get_ctx_op_mirrors_the_sz_check() {
    let off = offset_of!(verbs_context, alloc_td);
    // sizeof verbs_context - offsetof alloc_td, from the C table's column for this
    // architecture: 648 - 128 = 520 on x86_64, 656 - 128 = 528 on aarch64.
    let c = c_layout().unwrap();
    let need = size_of::<verbs_context>() - off;
    assert_eq!(
        need as i64,
        c["sizeof verbs_context"] - c["offsetof verbs_context.alloc_td"]
    );
    assert!(op_in_range(need, off));
    assert!(!op_in_range(need - 1, off));
    assert!(!op_in_range(usize::MAX, size_of::<verbs_context>() + 8));

    let mut v = verbs_context::zeroed();
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    v.alloc_td = Some(fake_alloc_td);
    let base = std::ptr::addr_of_mut!(v) as usize;

    // sz one byte short of the op's slot: missing, even though the pointer is set.
    v.sz = need - 1;
    let ctx = fake_ctx(&mut v);
    // SAFETY: `ctx` is embedded in `v` with provenance over all of `v`.
    let e = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.unwrap_err();
    assert!(matches!(e, rdma_direct::Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("alloc_td"), "{e}");

    // In range and set: found.
    v.sz = need;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let got = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.expect("op present");
    assert_eq!(got as usize, base);

    // In range but null: missing.
    v.alloc_td = None;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let e = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.unwrap_err();
    assert!(e.to_string().contains("does not implement"), "{e}");

    // Not extended: missing.
    v.alloc_td = Some(fake_alloc_td);
    v.context.abi_compat = std::ptr::null_mut();
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let e = unsafe { verbs_get_ctx_op(ctx, off, "alloc_td") }.unwrap_err();
    assert!(e.to_string().contains("not an extended"), "{e}");

    // The real provider fills the whole struct: every op this crate uses is reachable.
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    v.sz = size_of::<verbs_context>();
    for o in [
        offset_of!(verbs_context, alloc_td),
        offset_of!(verbs_context, dealloc_td),
        offset_of!(verbs_context, alloc_parent_domain),
        offset_of!(verbs_context, create_qp_ex),
    ] {
        assert!(op_in_range(v.sz, o));
    }
}

unsafe extern "C" fn fake_alloc_td_eopnotsupp(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = libc::EOPNOTSUPP };
    std::ptr::null_mut()
}

unsafe extern "C" fn fake_alloc_td_enomem(
    _ctx: *mut ibv_context,
    _attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = libc::ENOMEM };
    std::ptr::null_mut()
}

static mut FAKE_TD: ibv_td = ibv_td {
    context: std::ptr::null_mut(),
};

unsafe extern "C" fn fake_alloc_td_ok(
    ctx: *mut ibv_context,
    attr: *mut ibv_td_init_attr,
) -> *mut ibv_td {
    // SAFETY: `attr` points to the caller's live attr; FAKE_TD is only touched by this test.
    unsafe {
        assert_eq!((*attr).comp_mask, 0);
        let td = std::ptr::addr_of_mut!(FAKE_TD);
        (*td).context = ctx;
        td
    }
}

unsafe extern "C" fn fake_dealloc_td(td: *mut ibv_td) -> libc::c_int {
    if td == std::ptr::addr_of_mut!(FAKE_TD) {
        0
    } else {
        libc::EINVAL
    }
}

#[test]
fn alloc_td_calls_the_op_and_maps_the_stub_errno_to_unsupported() {
    let mut v = verbs_context::zeroed();
    v.context.abi_compat = VERBS_ABI_IS_EXTENDED as *mut libc::c_void;
    v.sz = size_of::<verbs_context>();

    // libibverbs' stub for an op the provider lacks fails with EOPNOTSUPP: Unsupported.
    v.alloc_td = Some(fake_alloc_td_eopnotsupp);
    let ctx = fake_ctx(&mut v);
    // SAFETY: `ctx` is embedded in `v` with provenance over all of `v`; the op is ours.
    let e = unsafe { alloc_td(ctx) }.unwrap_err();
    assert!(matches!(e, rdma_direct::Error::Unsupported { .. }), "{e}");
    assert!(e.to_string().contains("ibv_alloc_td"), "{e}");

    // Any other errno is a verb error carrying it.
    v.alloc_td = Some(fake_alloc_td_enomem);
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let e = unsafe { alloc_td(ctx) }.unwrap_err();
    assert!(
        matches!(e, rdma_direct::Error::Verb { verb: "ibv_alloc_td", errno, .. } if errno == libc::ENOMEM),
        "{e}"
    );

    // Success: the op's TD comes back, and dealloc_td reaches the dealloc op.
    v.alloc_td = Some(fake_alloc_td_ok);
    v.dealloc_td = Some(fake_dealloc_td);
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    let td = unsafe { alloc_td(ctx) }.unwrap();
    // SAFETY: `td` is FAKE_TD, written by the op just now.
    assert_eq!(unsafe { (*td).context }, ctx);
    // SAFETY: as above; `td` came from alloc_td on `ctx`.
    assert_eq!(unsafe { dealloc_td(ctx, td) }, 0);

    // No dealloc op (short sz): EOPNOTSUPP, not a call through garbage.
    v.sz = size_of::<verbs_context>() - offset_of!(verbs_context, dealloc_td) - 8;
    let ctx = fake_ctx(&mut v);
    // SAFETY: as above.
    assert_eq!(unsafe { dealloc_td(ctx, td) }, libc::EOPNOTSUPP);
}
