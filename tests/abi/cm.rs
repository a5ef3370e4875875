//! The mirrors of `src/core/ffi/cm.rs` (`rdma_cma.h`): sizes, offsets and values.

use super::*;

/// Adds this file's entries to `m` (keys as in `fixtures/abi/abi.txt`).
pub(super) fn layout(m: &mut BTreeMap<String, i64>) {
    size!(m, rdma_event_channel);
    off!(m, "rdma_event_channel.fd", rdma_event_channel, fd);
    size!(m, rdma_ib_addr);
    off!(m, "rdma_ib_addr.sgid", rdma_ib_addr, sgid);
    off!(m, "rdma_ib_addr.dgid", rdma_ib_addr, dgid);
    off!(m, "rdma_ib_addr.pkey", rdma_ib_addr, pkey);
    size!(m, rdma_addr);
    off!(m, "rdma_addr.src_addr", rdma_addr, src_addr);
    off!(m, "rdma_addr.dst_addr", rdma_addr, dst_addr);
    off!(m, "rdma_addr.addr", rdma_addr, addr);
    size!(m, rdma_route);
    off!(m, "rdma_route.addr", rdma_route, addr);
    off!(m, "rdma_route.path_rec", rdma_route, path_rec);
    off!(m, "rdma_route.num_paths", rdma_route, num_paths);
    size!(m, rdma_cm_id);
    off!(m, "rdma_cm_id.verbs", rdma_cm_id, verbs);
    off!(m, "rdma_cm_id.channel", rdma_cm_id, channel);
    off!(m, "rdma_cm_id.context", rdma_cm_id, context);
    off!(m, "rdma_cm_id.qp", rdma_cm_id, qp);
    off!(m, "rdma_cm_id.route", rdma_cm_id, route);
    off!(m, "rdma_cm_id.ps", rdma_cm_id, ps);
    off!(m, "rdma_cm_id.port_num", rdma_cm_id, port_num);
    off!(m, "rdma_cm_id.event", rdma_cm_id, event);
    off!(m, "rdma_cm_id.send_cq_channel", rdma_cm_id, send_cq_channel);
    off!(m, "rdma_cm_id.pd", rdma_cm_id, pd);
    off!(m, "rdma_cm_id.qp_type", rdma_cm_id, qp_type);
    size!(m, rdma_conn_param);
    off!(
        m,
        "rdma_conn_param.private_data",
        rdma_conn_param,
        private_data
    );
    off!(
        m,
        "rdma_conn_param.private_data_len",
        rdma_conn_param,
        private_data_len
    );
    off!(
        m,
        "rdma_conn_param.responder_resources",
        rdma_conn_param,
        responder_resources
    );
    off!(
        m,
        "rdma_conn_param.initiator_depth",
        rdma_conn_param,
        initiator_depth
    );
    off!(
        m,
        "rdma_conn_param.flow_control",
        rdma_conn_param,
        flow_control
    );
    off!(
        m,
        "rdma_conn_param.retry_count",
        rdma_conn_param,
        retry_count
    );
    off!(
        m,
        "rdma_conn_param.rnr_retry_count",
        rdma_conn_param,
        rnr_retry_count
    );
    off!(m, "rdma_conn_param.srq", rdma_conn_param, srq);
    off!(m, "rdma_conn_param.qp_num", rdma_conn_param, qp_num);
    size!(m, rdma_ud_param);
    off!(
        m,
        "rdma_ud_param.private_data_len",
        rdma_ud_param,
        private_data_len
    );
    off!(m, "rdma_ud_param.ah_attr", rdma_ud_param, ah_attr);
    off!(m, "rdma_ud_param.qp_num", rdma_ud_param, qp_num);
    off!(m, "rdma_ud_param.qkey", rdma_ud_param, qkey);
    size!(m, rdma_cm_event);
    off!(m, "rdma_cm_event.id", rdma_cm_event, id);
    off!(m, "rdma_cm_event.listen_id", rdma_cm_event, listen_id);
    off!(m, "rdma_cm_event.event", rdma_cm_event, event);
    off!(m, "rdma_cm_event.status", rdma_cm_event, status);
    off!(m, "rdma_cm_event.param", rdma_cm_event, param);
    size!(m, rdma_cm_event_param);
    val!(m, RDMA_CM_EVENT_ADDR_RESOLVED);
    val!(m, RDMA_CM_EVENT_ADDR_ERROR);
    val!(m, RDMA_CM_EVENT_ROUTE_RESOLVED);
    val!(m, RDMA_CM_EVENT_ROUTE_ERROR);
    val!(m, RDMA_CM_EVENT_CONNECT_REQUEST);
    val!(m, RDMA_CM_EVENT_CONNECT_RESPONSE);
    val!(m, RDMA_CM_EVENT_CONNECT_ERROR);
    val!(m, RDMA_CM_EVENT_UNREACHABLE);
    val!(m, RDMA_CM_EVENT_REJECTED);
    val!(m, RDMA_CM_EVENT_ESTABLISHED);
    val!(m, RDMA_CM_EVENT_DISCONNECTED);
    val!(m, RDMA_CM_EVENT_DEVICE_REMOVAL);
    val!(m, RDMA_CM_EVENT_ADDR_CHANGE);
    val!(m, RDMA_CM_EVENT_TIMEWAIT_EXIT);
    val!(m, RDMA_PS_TCP);
    val!(m, RDMA_PS_UDP);
    val!(m, RDMA_MAX_RESP_RES);
    val!(m, RDMA_MAX_INIT_DEPTH);
}
