//! The enum values and flags of `verbs.h` and `mlx5dv.h` this crate uses, as constants of the
//! C enums' integer types (see the parent module for why not Rust enums).

use libc::{c_int, c_uint};

/// `IBV_SYSFS_NAME_MAX`.
pub const IBV_SYSFS_NAME_MAX: usize = 64;
/// `IBV_SYSFS_PATH_MAX`.
pub const IBV_SYSFS_PATH_MAX: usize = 256;

// ---------------------------------------------------------------------------------------------
// Enum values (verbs.h).
// ---------------------------------------------------------------------------------------------

/// `enum ibv_node_type`: a channel adapter.
pub const IBV_NODE_CA: c_int = 1;
/// `enum ibv_node_type`: an iWARP RNIC.
pub const IBV_NODE_RNIC: c_int = 4;

/// `enum ibv_transport_type`: InfiniBand (also RoCE).
pub const IBV_TRANSPORT_IB: c_int = 0;
/// `enum ibv_transport_type`: iWARP.
pub const IBV_TRANSPORT_IWARP: c_int = 1;

/// `enum ibv_atomic_cap`.
pub const IBV_ATOMIC_NONE: u32 = 0;
/// `enum ibv_atomic_cap`: atomic within the HCA.
pub const IBV_ATOMIC_HCA: u32 = 1;
/// `enum ibv_atomic_cap`: globally atomic.
pub const IBV_ATOMIC_GLOB: u32 = 2;

/// `enum ibv_mtu`.
pub const IBV_MTU_256: u32 = 1;
/// `enum ibv_mtu`.
pub const IBV_MTU_512: u32 = 2;
/// `enum ibv_mtu`.
pub const IBV_MTU_1024: u32 = 3;
/// `enum ibv_mtu`.
pub const IBV_MTU_2048: u32 = 4;
/// `enum ibv_mtu`.
pub const IBV_MTU_4096: u32 = 5;

/// `enum ibv_port_state`.
pub const IBV_PORT_NOP: u32 = 0;
/// `enum ibv_port_state`.
pub const IBV_PORT_DOWN: u32 = 1;
/// `enum ibv_port_state`.
pub const IBV_PORT_INIT: u32 = 2;
/// `enum ibv_port_state`.
pub const IBV_PORT_ARMED: u32 = 3;
/// `enum ibv_port_state`.
pub const IBV_PORT_ACTIVE: u32 = 4;
/// `enum ibv_port_state`.
pub const IBV_PORT_ACTIVE_DEFER: u32 = 5;

/// Link layer (`ibv_port_attr.link_layer`): not reported (treat as InfiniBand).
pub const IBV_LINK_LAYER_UNSPECIFIED: u8 = 0;
/// Link layer: InfiniBand.
pub const IBV_LINK_LAYER_INFINIBAND: u8 = 1;
/// Link layer: Ethernet (RoCE, iWARP).
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;

/// `enum ibv_access_flags`.
pub const IBV_ACCESS_LOCAL_WRITE: u32 = 1;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_REMOTE_WRITE: u32 = 1 << 1;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_REMOTE_READ: u32 = 1 << 2;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_REMOTE_ATOMIC: u32 = 1 << 3;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_MW_BIND: u32 = 1 << 4;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_ZERO_BASED: u32 = 1 << 5;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_ON_DEMAND: u32 = 1 << 6;
/// `enum ibv_access_flags`.
pub const IBV_ACCESS_HUGETLB: u32 = 1 << 7;
/// `enum ibv_access_flags` (`IBV_ACCESS_OPTIONAL_FIRST`): needs `ibv_reg_mr_iova2`.
pub const IBV_ACCESS_RELAXED_ORDERING: u32 = 1 << 20;

/// `enum ibv_qp_type`.
pub const IBV_QPT_RC: u32 = 2;
/// `enum ibv_qp_type`.
pub const IBV_QPT_UC: u32 = 3;
/// `enum ibv_qp_type`.
pub const IBV_QPT_UD: u32 = 4;

/// `enum ibv_qp_state`.
pub const IBV_QPS_RESET: u32 = 0;
/// `enum ibv_qp_state`.
pub const IBV_QPS_INIT: u32 = 1;
/// `enum ibv_qp_state`.
pub const IBV_QPS_RTR: u32 = 2;
/// `enum ibv_qp_state`.
pub const IBV_QPS_RTS: u32 = 3;
/// `enum ibv_qp_state`.
pub const IBV_QPS_SQD: u32 = 4;
/// `enum ibv_qp_state`.
pub const IBV_QPS_SQE: u32 = 5;
/// `enum ibv_qp_state`.
pub const IBV_QPS_ERR: u32 = 6;
/// `enum ibv_qp_state`.
pub const IBV_QPS_UNKNOWN: u32 = 7;

/// `enum ibv_mig_state`.
pub const IBV_MIG_MIGRATED: u32 = 0;

/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_STATE: c_int = 1 << 0;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = 1 << 2;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PORT: c_int = 1 << 5;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_QKEY: c_int = 1 << 6;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_AV: c_int = 1 << 7;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_PATH_MIG_STATE: c_int = 1 << 18;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_CAP: c_int = 1 << 19;
/// `enum ibv_qp_attr_mask`.
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;

/// `enum ibv_srq_attr_mask`.
pub const IBV_SRQ_MAX_WR: c_int = 1 << 0;
/// `enum ibv_srq_attr_mask`.
pub const IBV_SRQ_LIMIT: c_int = 1 << 1;

/// `enum ibv_wr_opcode`.
pub const IBV_WR_RDMA_WRITE: u32 = 0;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_RDMA_WRITE_WITH_IMM: u32 = 1;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_SEND: u32 = 2;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_SEND_WITH_IMM: u32 = 3;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_RDMA_READ: u32 = 4;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_ATOMIC_CMP_AND_SWP: u32 = 5;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: u32 = 6;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_LOCAL_INV: u32 = 7;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_BIND_MW: u32 = 8;
/// `enum ibv_wr_opcode`.
pub const IBV_WR_SEND_WITH_INV: u32 = 9;

/// `enum ibv_send_flags`.
pub const IBV_SEND_FENCE: c_uint = 1 << 0;
/// `enum ibv_send_flags`.
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
/// `enum ibv_send_flags`.
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
/// `enum ibv_send_flags`.
pub const IBV_SEND_INLINE: c_uint = 1 << 3;

/// `enum ibv_wc_status`.
pub const IBV_WC_SUCCESS: u32 = 0;
/// `enum ibv_wc_status`.
pub const IBV_WC_LOC_LEN_ERR: u32 = 1;
/// `enum ibv_wc_status`.
pub const IBV_WC_LOC_QP_OP_ERR: u32 = 2;
/// `enum ibv_wc_status`.
pub const IBV_WC_LOC_PROT_ERR: u32 = 4;
/// `enum ibv_wc_status`.
pub const IBV_WC_WR_FLUSH_ERR: u32 = 5;
/// `enum ibv_wc_status`.
pub const IBV_WC_REM_ACCESS_ERR: u32 = 10;
/// `enum ibv_wc_status`.
pub const IBV_WC_REM_OP_ERR: u32 = 11;
/// `enum ibv_wc_status`.
pub const IBV_WC_RETRY_EXC_ERR: u32 = 12;
/// `enum ibv_wc_status`.
pub const IBV_WC_RNR_RETRY_EXC_ERR: u32 = 13;
/// `enum ibv_wc_status`.
pub const IBV_WC_GENERAL_ERR: u32 = 21;

/// `enum ibv_wc_opcode`.
pub const IBV_WC_SEND: u32 = 0;
/// `enum ibv_wc_opcode`.
pub const IBV_WC_RDMA_WRITE: u32 = 1;
/// `enum ibv_wc_opcode`.
pub const IBV_WC_RDMA_READ: u32 = 2;
/// `enum ibv_wc_opcode`.
pub const IBV_WC_COMP_SWAP: u32 = 3;
/// `enum ibv_wc_opcode`.
pub const IBV_WC_FETCH_ADD: u32 = 4;
/// `enum ibv_wc_opcode`: every receive opcode has this bit set.
pub const IBV_WC_RECV: u32 = 1 << 7;
/// `enum ibv_wc_opcode`.
pub const IBV_WC_RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;

/// `enum ibv_wc_flags`.
pub const IBV_WC_GRH: c_uint = 1 << 0;
/// `enum ibv_wc_flags`.
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;
/// `enum ibv_wc_flags`.
pub const IBV_WC_WITH_INV: c_uint = 1 << 3;

/// `enum ibv_event_type`.
pub const IBV_EVENT_CQ_ERR: u32 = 0;
/// `enum ibv_event_type`.
pub const IBV_EVENT_QP_FATAL: u32 = 1;
/// `enum ibv_event_type`.
pub const IBV_EVENT_QP_REQ_ERR: u32 = 2;
/// `enum ibv_event_type`.
pub const IBV_EVENT_QP_ACCESS_ERR: u32 = 3;
/// `enum ibv_event_type`.
pub const IBV_EVENT_COMM_EST: u32 = 4;
/// `enum ibv_event_type`.
pub const IBV_EVENT_SQ_DRAINED: u32 = 5;
/// `enum ibv_event_type`.
pub const IBV_EVENT_DEVICE_FATAL: u32 = 8;
/// `enum ibv_event_type`.
pub const IBV_EVENT_PORT_ACTIVE: u32 = 9;
/// `enum ibv_event_type`.
pub const IBV_EVENT_PORT_ERR: u32 = 10;
/// `enum ibv_event_type`.
pub const IBV_EVENT_SRQ_ERR: u32 = 14;
/// `enum ibv_event_type`.
pub const IBV_EVENT_SRQ_LIMIT_REACHED: u32 = 15;
/// `enum ibv_event_type`.
pub const IBV_EVENT_QP_LAST_WQE_REACHED: u32 = 16;
/// `enum ibv_event_type`.
pub const IBV_EVENT_GID_CHANGE: u32 = 18;

/// `enum mlx5dv_obj_type`.
pub const MLX5DV_OBJ_QP: u64 = 1 << 0;
/// `enum mlx5dv_obj_type`.
pub const MLX5DV_OBJ_CQ: u64 = 1 << 1;
/// `enum mlx5dv_obj_type`.
pub const MLX5DV_OBJ_SRQ: u64 = 1 << 2;
/// `enum mlx5dv_obj_type`.
pub const MLX5DV_OBJ_AH: u64 = 1 << 5;
