//! `#[repr(C)]` mirrors of the structs of rdma-core 44's `verbs.h` and `mlx5dv.h` that this
//! crate touches, and the enum values it uses.
//!
//! Names are the C names, so a reader of `verbs.h` finds their way. C enums are `c_uint`
//! (`u32`) fields plus constants: a Rust `enum` would be undefined behaviour the day a newer
//! library returns a value we do not know. Every size and every offset the code relies on is
//! asserted below with `const_assert_eq!` and checked again by `tests/abi.rs` against
//! `fixtures/abi/abi.txt`, which `fixtures/abi/abi.c` prints from the real headers.
//!
//! Only the layout matters here; nothing in this file dereferences anything.
#![allow(non_camel_case_types)]

use libc::{c_char, c_int, c_uint, c_void};
use static_assertions::const_assert_eq;
use std::mem::{offset_of, size_of};

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

// ---------------------------------------------------------------------------------------------
// Structs (verbs.h).
// ---------------------------------------------------------------------------------------------

/// `struct mlx5dv_clock_info` (mlx5dv.h, 40 bytes): what `mlx5dv_get_clock_info` fills.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct mlx5dv_clock_info {
    /// ns at `last_cycles`.
    pub nsec: u64,
    /// The device counter at the last update.
    pub last_cycles: u64,
    /// Fractional ns at that point (units of 2^-shift ns).
    pub frac: u64,
    /// Cycles to ns multiplier (scaled by 2^shift).
    pub mult: u32,
    /// The scale.
    pub shift: u32,
    /// The counter's bits.
    pub mask: u64,
}

static_assertions::const_assert_eq!(std::mem::size_of::<mlx5dv_clock_info>(), 40);
static_assertions::const_assert_eq!(std::mem::offset_of!(mlx5dv_clock_info, mult), 24);
static_assertions::const_assert_eq!(std::mem::offset_of!(mlx5dv_clock_info, mask), 32);

/// Opaque: we never look inside an `ibv_comp_channel`.
#[repr(C)]
pub struct ibv_comp_channel {
    _opaque: [u8; 0],
}

/// Opaque: memory windows are not used.
#[repr(C)]
pub struct ibv_mw {
    _opaque: [u8; 0],
}

/// Opaque: work queues are not used.
#[repr(C)]
pub struct ibv_wq {
    _opaque: [u8; 0],
}

/// `struct _ibv_device_ops` (two legacy function pointers, never called).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct _ibv_device_ops {
    /// Legacy.
    pub _dummy1: *mut c_void,
    /// Legacy.
    pub _dummy2: *mut c_void,
}

/// `struct ibv_device`: one entry of `ibv_get_device_list`.
#[repr(C)]
pub struct ibv_device {
    /// Legacy ops.
    pub _ops: _ibv_device_ops,
    /// `enum ibv_node_type`.
    pub node_type: c_int,
    /// `enum ibv_transport_type`.
    pub transport_type: c_int,
    /// Kernel device name, e.g. `rxe0` (NUL-terminated).
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    /// uverbs device name, e.g. `uverbs0`.
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    /// sysfs path of the uverbs device.
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    /// sysfs path of the IB device.
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// Post a send list through a context's ops table.
pub type post_send_fn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
/// Post a receive list through a context's ops table.
pub type post_recv_fn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
/// Post a receive list to an SRQ through a context's ops table.
pub type post_srq_recv_fn =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
/// Poll a CQ through a context's ops table.
pub type poll_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
/// Arm a CQ through a context's ops table.
pub type req_notify_cq_fn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;

/// `struct ibv_context_ops`: the provider's data-path entry points. `verbs.h`'s inline
/// `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`, `ibv_req_notify_cq` and
/// `ibv_post_srq_recv` call through these. The `_compat_*` slots are legacy and never called.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_context_ops {
    /// Legacy.
    pub _compat_query_device: *mut c_void,
    /// Legacy.
    pub _compat_query_port: *mut c_void,
    /// Legacy.
    pub _compat_alloc_pd: *mut c_void,
    /// Legacy.
    pub _compat_dealloc_pd: *mut c_void,
    /// Legacy.
    pub _compat_reg_mr: *mut c_void,
    /// Legacy.
    pub _compat_rereg_mr: *mut c_void,
    /// Legacy.
    pub _compat_dereg_mr: *mut c_void,
    /// `alloc_mw` (unused).
    pub alloc_mw: *mut c_void,
    /// `bind_mw` (unused).
    pub bind_mw: *mut c_void,
    /// `dealloc_mw` (unused).
    pub dealloc_mw: *mut c_void,
    /// Legacy.
    pub _compat_create_cq: *mut c_void,
    /// Poll up to `n` completions.
    pub poll_cq: Option<poll_cq_fn>,
    /// Arm the CQ for a completion event.
    pub req_notify_cq: Option<req_notify_cq_fn>,
    /// Legacy.
    pub _compat_cq_event: *mut c_void,
    /// Legacy.
    pub _compat_resize_cq: *mut c_void,
    /// Legacy.
    pub _compat_destroy_cq: *mut c_void,
    /// Legacy.
    pub _compat_create_srq: *mut c_void,
    /// Legacy.
    pub _compat_modify_srq: *mut c_void,
    /// Legacy.
    pub _compat_query_srq: *mut c_void,
    /// Legacy.
    pub _compat_destroy_srq: *mut c_void,
    /// Post receives to an SRQ.
    pub post_srq_recv: Option<post_srq_recv_fn>,
    /// Legacy.
    pub _compat_create_qp: *mut c_void,
    /// Legacy.
    pub _compat_query_qp: *mut c_void,
    /// Legacy.
    pub _compat_modify_qp: *mut c_void,
    /// Legacy.
    pub _compat_destroy_qp: *mut c_void,
    /// Post a send list.
    pub post_send: Option<post_send_fn>,
    /// Post a receive list.
    pub post_recv: Option<post_recv_fn>,
    /// Legacy.
    pub _compat_create_ah: *mut c_void,
    /// Legacy.
    pub _compat_destroy_ah: *mut c_void,
    /// Legacy.
    pub _compat_attach_mcast: *mut c_void,
    /// Legacy.
    pub _compat_detach_mcast: *mut c_void,
    /// Legacy.
    pub _compat_async_event: *mut c_void,
}

/// `struct ibv_context`: an open device. (libibverbs allocates it inside a larger
/// `struct verbs_context`; we only read these fields.)
#[repr(C)]
pub struct ibv_context {
    /// The device this context was opened on.
    pub device: *mut ibv_device,
    /// Data-path entry points.
    pub ops: ibv_context_ops,
    /// uverbs command fd.
    pub cmd_fd: c_int,
    /// Async event fd (read by `ibv_get_async_event`).
    pub async_fd: c_int,
    /// Number of completion vectors.
    pub num_comp_vectors: c_int,
    /// libibverbs' lock.
    pub mutex: libc::pthread_mutex_t,
    /// Legacy.
    pub abi_compat: *mut c_void,
}

/// `struct ibv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_device_attr {
    /// Firmware version (NUL-terminated).
    pub fw_ver: [c_char; 64],
    /// Node GUID, network order.
    pub node_guid: u64,
    /// System image GUID, network order.
    pub sys_image_guid: u64,
    /// Largest MR.
    pub max_mr_size: u64,
    /// Supported page sizes.
    pub page_size_cap: u64,
    /// IEEE vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Max QPs.
    pub max_qp: c_int,
    /// Max WRs per queue.
    pub max_qp_wr: c_int,
    /// `IBV_DEVICE_*` capability bits.
    pub device_cap_flags: c_uint,
    /// Max SGEs per WR.
    pub max_sge: c_int,
    /// Max SGEs per RDMA READ.
    pub max_sge_rd: c_int,
    /// Max CQs.
    pub max_cq: c_int,
    /// Max CQEs per CQ.
    pub max_cqe: c_int,
    /// Max MRs.
    pub max_mr: c_int,
    /// Max PDs.
    pub max_pd: c_int,
    /// Max outstanding RDMA READ/atomic as target, per QP.
    pub max_qp_rd_atom: c_int,
    /// EE contexts (unused).
    pub max_ee_rd_atom: c_int,
    /// Max responder resources, whole device.
    pub max_res_rd_atom: c_int,
    /// Max outstanding RDMA READ/atomic as initiator, per QP.
    pub max_qp_init_rd_atom: c_int,
    /// EE contexts (unused).
    pub max_ee_init_rd_atom: c_int,
    /// `enum ibv_atomic_cap`.
    pub atomic_cap: u32,
    /// EE contexts (unused).
    pub max_ee: c_int,
    /// RD domains (unused).
    pub max_rdd: c_int,
    /// Max memory windows.
    pub max_mw: c_int,
    /// Raw IPv6 QPs.
    pub max_raw_ipv6_qp: c_int,
    /// Raw Ethertype QPs.
    pub max_raw_ethy_qp: c_int,
    /// Multicast groups.
    pub max_mcast_grp: c_int,
    /// QPs per multicast group.
    pub max_mcast_qp_attach: c_int,
    /// Total multicast attachments.
    pub max_total_mcast_qp_attach: c_int,
    /// Max address handles.
    pub max_ah: c_int,
    /// FMRs (legacy).
    pub max_fmr: c_int,
    /// FMR maps (legacy).
    pub max_map_per_fmr: c_int,
    /// Max SRQs.
    pub max_srq: c_int,
    /// Max WRs per SRQ.
    pub max_srq_wr: c_int,
    /// Max SGEs per SRQ WR.
    pub max_srq_sge: c_int,
    /// P_Key table size.
    pub max_pkeys: u16,
    /// Local CA ack delay.
    pub local_ca_ack_delay: u8,
    /// Number of physical ports.
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (the full rdma-core 44 struct; the exported `ibv_query_port` fills
/// everything up to and including `flags`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_port_attr {
    /// `enum ibv_port_state`.
    pub state: u32,
    /// `enum ibv_mtu`.
    pub max_mtu: u32,
    /// `enum ibv_mtu`.
    pub active_mtu: u32,
    /// GID table length.
    pub gid_tbl_len: c_int,
    /// `IBV_PORT_*_SUP` bits.
    pub port_cap_flags: u32,
    /// Largest message.
    pub max_msg_sz: u32,
    /// Counter.
    pub bad_pkey_cntr: u32,
    /// Counter.
    pub qkey_viol_cntr: u32,
    /// P_Key table length.
    pub pkey_tbl_len: u16,
    /// Base LID (0 on RoCE).
    pub lid: u16,
    /// Subnet manager LID.
    pub sm_lid: u16,
    /// LID mask control.
    pub lmc: u8,
    /// Max virtual lanes.
    pub max_vl_num: u8,
    /// SM service level.
    pub sm_sl: u8,
    /// Subnet timeout.
    pub subnet_timeout: u8,
    /// Init type reply.
    pub init_type_reply: u8,
    /// Active width code (1 = 1x, 2 = 4x, 4 = 8x, 8 = 12x, 16 = 2x).
    pub active_width: u8,
    /// Active speed code (1 = SDR 2.5, 2 = DDR 5, 4 = QDR 10, 8 = FDR10, 16 = FDR, 32 = EDR,
    /// 64 = HDR, 128 = NDR, per lane, Gb/s).
    pub active_speed: u8,
    /// Physical state (5 = LinkUp).
    pub phys_state: u8,
    /// `IBV_LINK_LAYER_*`.
    pub link_layer: u8,
    /// `IBV_QPF_*` flags.
    pub flags: u8,
    /// More capability bits.
    pub port_cap_flags2: u16,
}

/// `union ibv_gid`: 16 bytes in network order, 8-byte aligned.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_gid {
    /// The bytes.
    pub raw: [u8; 16],
    /// Subnet prefix and interface id, network order.
    pub global: ibv_gid_global,
}

/// `ibv_gid.global`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_gid_global {
    /// Network order.
    pub subnet_prefix: u64,
    /// Network order.
    pub interface_id: u64,
}

/// `struct ibv_pd`.
#[repr(C)]
pub struct ibv_pd {
    /// Owning context.
    pub context: *mut ibv_context,
    /// Kernel handle.
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
pub struct ibv_mr {
    /// Owning context.
    pub context: *mut ibv_context,
    /// PD.
    pub pd: *mut ibv_pd,
    /// First byte registered.
    pub addr: *mut c_void,
    /// Length registered.
    pub length: usize,
    /// Kernel handle.
    pub handle: u32,
    /// Local key.
    pub lkey: u32,
    /// Remote key.
    pub rkey: u32,
}

/// `struct ibv_cq`.
#[repr(C)]
pub struct ibv_cq {
    /// Owning context.
    pub context: *mut ibv_context,
    /// Completion channel, may be null.
    pub channel: *mut ibv_comp_channel,
    /// User context.
    pub cq_context: *mut c_void,
    /// Kernel handle.
    pub handle: u32,
    /// Number of CQEs granted.
    pub cqe: c_int,
    /// libibverbs' lock.
    pub mutex: libc::pthread_mutex_t,
    /// libibverbs' condition.
    pub cond: libc::pthread_cond_t,
    /// Event counter.
    pub comp_events_completed: u32,
    /// Event counter.
    pub async_events_completed: u32,
}

/// `struct ibv_srq_attr`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_srq_attr {
    /// Max outstanding receives.
    pub max_wr: u32,
    /// Max SGEs per receive.
    pub max_sge: u32,
    /// Limit event threshold (0 = not armed).
    pub srq_limit: u32,
}

/// `struct ibv_srq_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_srq_init_attr {
    /// User context.
    pub srq_context: *mut c_void,
    /// Requested sizes.
    pub attr: ibv_srq_attr,
}

/// `struct ibv_srq`.
#[repr(C)]
pub struct ibv_srq {
    /// Owning context.
    pub context: *mut ibv_context,
    /// User context.
    pub srq_context: *mut c_void,
    /// PD.
    pub pd: *mut ibv_pd,
    /// Kernel handle.
    pub handle: u32,
    /// libibverbs' lock.
    pub mutex: libc::pthread_mutex_t,
    /// libibverbs' condition.
    pub cond: libc::pthread_cond_t,
    /// Event counter.
    pub events_completed: u32,
}

/// `struct ibv_qp`.
#[repr(C)]
pub struct ibv_qp {
    /// Owning context.
    pub context: *mut ibv_context,
    /// User context.
    pub qp_context: *mut c_void,
    /// PD.
    pub pd: *mut ibv_pd,
    /// Send CQ.
    pub send_cq: *mut ibv_cq,
    /// Receive CQ.
    pub recv_cq: *mut ibv_cq,
    /// SRQ, may be null.
    pub srq: *mut ibv_srq,
    /// Kernel handle.
    pub handle: u32,
    /// QP number (24 bits).
    pub qp_num: u32,
    /// `enum ibv_qp_state` as last seen by libibverbs.
    pub state: u32,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    /// libibverbs' lock.
    pub mutex: libc::pthread_mutex_t,
    /// libibverbs' condition.
    pub cond: libc::pthread_cond_t,
    /// Event counter.
    pub events_completed: u32,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_qp_cap {
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// SGEs per send WR.
    pub max_send_sge: u32,
    /// SGEs per receive WR.
    pub max_recv_sge: u32,
    /// Inline bytes per send WR.
    pub max_inline_data: u32,
}

/// `struct ibv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_init_attr {
    /// User context.
    pub qp_context: *mut c_void,
    /// Send CQ.
    pub send_cq: *mut ibv_cq,
    /// Receive CQ.
    pub recv_cq: *mut ibv_cq,
    /// SRQ, may be null.
    pub srq: *mut ibv_srq,
    /// Requested caps; on return, the caps granted.
    pub cap: ibv_qp_cap,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
    /// Non-zero: every send WR generates a completion.
    pub sq_sig_all: c_int,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_global_route {
    /// Destination GID.
    pub dgid: ibv_gid,
    /// Flow label.
    pub flow_label: u32,
    /// Source GID index.
    pub sgid_index: u8,
    /// Hop limit.
    pub hop_limit: u8,
    /// Traffic class.
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_ah_attr {
    /// Global route (used when `is_global`).
    pub grh: ibv_global_route,
    /// Destination LID.
    pub dlid: u16,
    /// Service level.
    pub sl: u8,
    /// Source path bits.
    pub src_path_bits: u8,
    /// Static rate.
    pub static_rate: u8,
    /// Non-zero: a GRH is present (always on RoCE).
    pub is_global: u8,
    /// Local port.
    pub port_num: u8,
}

/// `struct ibv_qp_attr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_qp_attr {
    /// `enum ibv_qp_state`: target state.
    pub qp_state: u32,
    /// `enum ibv_qp_state`: current state.
    pub cur_qp_state: u32,
    /// `enum ibv_mtu`.
    pub path_mtu: u32,
    /// `enum ibv_mig_state`.
    pub path_mig_state: u32,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// Remote QPN.
    pub dest_qp_num: u32,
    /// `IBV_ACCESS_REMOTE_*` bits.
    pub qp_access_flags: c_uint,
    /// Caps.
    pub cap: ibv_qp_cap,
    /// Primary path.
    pub ah_attr: ibv_ah_attr,
    /// Alternate path.
    pub alt_ah_attr: ibv_ah_attr,
    /// P_Key index.
    pub pkey_index: u16,
    /// Alternate P_Key index.
    pub alt_pkey_index: u16,
    /// SQD notification.
    pub en_sqd_async_notify: u8,
    /// SQ draining (query only).
    pub sq_draining: u8,
    /// Outstanding RDMA READ/atomic as initiator.
    pub max_rd_atomic: u8,
    /// Outstanding RDMA READ/atomic as target.
    pub max_dest_rd_atomic: u8,
    /// Minimum RNR NAK timer code.
    pub min_rnr_timer: u8,
    /// Local port.
    pub port_num: u8,
    /// Local ACK timeout code (4.096 µs × 2^timeout).
    pub timeout: u8,
    /// Retry count (0-7).
    pub retry_cnt: u8,
    /// RNR retry count (0-7; 7 = forever).
    pub rnr_retry: u8,
    /// Alternate port.
    pub alt_port_num: u8,
    /// Alternate timeout.
    pub alt_timeout: u8,
    /// Rate limit (kbps).
    pub rate_limit: u32,
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct ibv_sge {
    /// Address.
    pub addr: u64,
    /// Length in bytes.
    pub length: u32,
    /// Local key.
    pub lkey: u32,
}

/// `ibv_send_wr.wr.rdma`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_send_wr_rdma {
    /// Remote address.
    pub remote_addr: u64,
    /// Remote key.
    pub rkey: u32,
}

/// `ibv_send_wr.wr.atomic`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_send_wr_atomic {
    /// Remote address (8-byte aligned).
    pub remote_addr: u64,
    /// Compare (CAS) or addend (FAA).
    pub compare_add: u64,
    /// Swap value (CAS).
    pub swap: u64,
    /// Remote key.
    pub rkey: u32,
}

/// `ibv_send_wr.wr.ud`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_ud {
    /// Address handle.
    pub ah: *mut ibv_ah,
    /// Destination QPN.
    pub remote_qpn: u32,
    /// Destination Q_Key.
    pub remote_qkey: u32,
}

/// `ibv_send_wr.wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    /// RDMA WRITE/READ.
    pub rdma: ibv_send_wr_rdma,
    /// Atomics.
    pub atomic: ibv_send_wr_atomic,
    /// UD.
    pub ud: ibv_send_wr_ud,
}

/// `ibv_send_wr.qp_type.xrc`.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct ibv_send_wr_xrc {
    /// Remote SRQ number.
    pub remote_srqn: u32,
}

/// `ibv_send_wr.qp_type`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_qp_type {
    /// XRC.
    pub xrc: ibv_send_wr_xrc,
}

/// `struct ibv_mw_bind_info`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_mw_bind_info {
    /// MR the window is bound to.
    pub mr: *mut ibv_mr,
    /// Start.
    pub addr: u64,
    /// Length.
    pub length: u64,
    /// Access bits.
    pub mw_access_flags: c_uint,
}

/// `ibv_send_wr.bind_mw`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_bind_mw {
    /// Window.
    pub mw: *mut ibv_mw,
    /// New rkey.
    pub rkey: u32,
    /// Binding.
    pub bind_info: ibv_mw_bind_info,
}

/// `ibv_send_wr.tso`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr_tso {
    /// Header.
    pub hdr: *mut c_void,
    /// Header size.
    pub hdr_sz: u16,
    /// Maximum segment size.
    pub mss: u16,
}

/// The anonymous bind_mw / tso union of `ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_bind_tso {
    /// Memory-window bind.
    pub bind_mw: ibv_send_wr_bind_mw,
    /// TSO.
    pub tso: ibv_send_wr_tso,
}

/// `struct ibv_send_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_send_wr {
    /// Caller's id, returned in the completion.
    pub wr_id: u64,
    /// Next WR in the list, or null.
    pub next: *mut ibv_send_wr,
    /// Scatter/gather list.
    pub sg_list: *mut ibv_sge,
    /// Entries in `sg_list`.
    pub num_sge: c_int,
    /// `enum ibv_wr_opcode`.
    pub opcode: u32,
    /// `IBV_SEND_*` bits.
    pub send_flags: c_uint,
    /// The anonymous union: immediate data in network order (`*_WITH_IMM`), or the rkey to
    /// invalidate (`*_INV`).
    pub imm_data: u32,
    /// Per-opcode remote info.
    pub wr: ibv_send_wr_wr,
    /// XRC.
    pub qp_type: ibv_send_wr_qp_type,
    /// bind_mw / tso.
    pub bind_tso: ibv_send_wr_bind_tso,
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_recv_wr {
    /// Caller's id.
    pub wr_id: u64,
    /// Next WR, or null.
    pub next: *mut ibv_recv_wr,
    /// Scatter list.
    pub sg_list: *mut ibv_sge,
    /// Entries in `sg_list`.
    pub num_sge: c_int,
}

/// `struct ibv_wc`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct ibv_wc {
    /// The WR's id.
    pub wr_id: u64,
    /// `enum ibv_wc_status`.
    pub status: u32,
    /// `enum ibv_wc_opcode` (valid only on success).
    pub opcode: u32,
    /// Vendor syndrome.
    pub vendor_err: u32,
    /// Bytes received (receives), or transferred.
    pub byte_len: u32,
    /// The anonymous union: immediate data in network order (`IBV_WC_WITH_IMM`) or the
    /// invalidated rkey (`IBV_WC_WITH_INV`).
    pub imm_data: u32,
    /// Local QPN.
    pub qp_num: u32,
    /// Source QPN (UD).
    pub src_qp: u32,
    /// `IBV_WC_*` flags.
    pub wc_flags: c_uint,
    /// P_Key index (GSI).
    pub pkey_index: u16,
    /// Source LID.
    pub slid: u16,
    /// Service level.
    pub sl: u8,
    /// Destination LID path bits.
    pub dlid_path_bits: u8,
}

/// `struct ibv_ah`.
#[repr(C)]
pub struct ibv_ah {
    /// Owning context.
    pub context: *mut ibv_context,
    /// PD.
    pub pd: *mut ibv_pd,
    /// Kernel handle.
    pub handle: u32,
}

/// `ibv_async_event.element`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_async_event_element {
    /// CQ events.
    pub cq: *mut ibv_cq,
    /// QP events.
    pub qp: *mut ibv_qp,
    /// SRQ events.
    pub srq: *mut ibv_srq,
    /// WQ events.
    pub wq: *mut ibv_wq,
    /// Port events.
    pub port_num: c_int,
}

/// `struct ibv_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ibv_async_event {
    /// What the event is about.
    pub element: ibv_async_event_element,
    /// `enum ibv_event_type`.
    pub event_type: u32,
}

// ---------------------------------------------------------------------------------------------
// mlx5dv.h.
// ---------------------------------------------------------------------------------------------

/// `mlx5dv_qp.sq` / `.rq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_qp_wq {
    /// Ring.
    pub buf: *mut c_void,
    /// Entries.
    pub wqe_cnt: u32,
    /// Bytes per entry.
    pub stride: u32,
}

/// `mlx5dv_qp.bf`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_qp_bf {
    /// BlueFlame register.
    pub reg: *mut c_void,
    /// Half size in bytes (0 = no BlueFlame).
    pub size: u32,
}

/// `struct mlx5dv_qp`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_qp {
    /// Doorbell record (big-endian counters).
    pub dbrec: *mut u32,
    /// Send queue.
    pub sq: mlx5dv_qp_wq,
    /// Receive queue.
    pub rq: mlx5dv_qp_wq,
    /// BlueFlame.
    pub bf: mlx5dv_qp_bf,
    /// Which optional fields to fill (in) / were filled (out).
    pub comp_mask: u64,
    /// UAR mmap offset (optional).
    pub uar_mmap_offset: libc::off_t,
    /// TIR number (raw packet).
    pub tirn: u32,
    /// TIS number (raw packet).
    pub tisn: u32,
    /// RQ number (raw packet).
    pub rqn: u32,
    /// SQ number (raw packet).
    pub sqn: u32,
    /// TIR ICM address.
    pub tir_icm_addr: u64,
}

/// `struct mlx5dv_cq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_cq {
    /// CQE ring.
    pub buf: *mut c_void,
    /// Doorbell record.
    pub dbrec: *mut u32,
    /// Entries.
    pub cqe_cnt: u32,
    /// 64 or 128.
    pub cqe_size: u32,
    /// UAR for arming.
    pub cq_uar: *mut c_void,
    /// CQ number.
    pub cqn: u32,
    /// Optional fields.
    pub comp_mask: u64,
}

/// `struct mlx5dv_srq`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_srq {
    /// WQE ring.
    pub buf: *mut c_void,
    /// Doorbell record.
    pub dbrec: *mut u32,
    /// Bytes per entry.
    pub stride: u32,
    /// First free entry.
    pub head: u32,
    /// Last free entry.
    pub tail: u32,
    /// Optional fields (in: `MLX5DV_SRQ_MASK_SRQN` to get `srqn`).
    pub comp_mask: u64,
    /// SRQ number (when asked for).
    pub srqn: u32,
}

/// `mlx5dv_srq.comp_mask` bit: fill `srqn`.
pub const MLX5DV_SRQ_MASK_SRQN: u64 = 1 << 0;

/// `struct mlx5dv_ah`: what `mlx5dv_init_obj(MLX5DV_OBJ_AH)` says of an address handle.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_ah {
    /// The 48-byte address vector (`struct mlx5_wqe_av`) libmlx5 filled for the AH; UD sends
    /// copy it into their WQEs. Valid while the AH lives.
    pub av: *mut u8,
    /// Which optional fields are valid (none are read).
    pub comp_mask: u64,
}

/// One `{ in, out }` pair of `struct mlx5dv_obj`.
#[repr(C)]
pub struct mlx5dv_obj_pair<I, O> {
    /// The verbs object.
    pub r#in: *mut I,
    /// Where to write its mlx5 view.
    pub out: *mut O,
}

impl<I, O> Clone for mlx5dv_obj_pair<I, O> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<I, O> Copy for mlx5dv_obj_pair<I, O> {}

/// `struct mlx5dv_obj`. It grew between releases (rwq, dm, ah, pd): always start from
/// [`mlx5dv_obj::zeroed`] so the members we do not set are null.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_obj {
    /// QP.
    pub qp: mlx5dv_obj_pair<ibv_qp, mlx5dv_qp>,
    /// CQ.
    pub cq: mlx5dv_obj_pair<ibv_cq, mlx5dv_cq>,
    /// SRQ.
    pub srq: mlx5dv_obj_pair<ibv_srq, mlx5dv_srq>,
    /// RWQ (unused).
    pub rwq: mlx5dv_obj_pair<c_void, c_void>,
    /// DM (unused).
    pub dm: mlx5dv_obj_pair<c_void, c_void>,
    /// AH.
    pub ah: mlx5dv_obj_pair<ibv_ah, mlx5dv_ah>,
    /// PD (unused).
    pub pd: mlx5dv_obj_pair<c_void, c_void>,
}

/// Size of `struct mlx5dv_context` in rdma-core 44 (see `fixtures/abi/abi.txt`).
pub const MLX5DV_CONTEXT_SIZE: usize = 152;

/// `struct mlx5dv_context`: the leading fields we read, then the rest as opaque bytes.
/// `mlx5dv_query_device` fills only what `comp_mask` asks for; with 0 it fills `version`,
/// `flags` and `comp_mask`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mlx5dv_context {
    /// Version.
    pub version: u8,
    /// `MLX5DV_CONTEXT_FLAGS_*`.
    pub flags: u64,
    /// In: which optional parts to fill; out: which were filled.
    pub comp_mask: u64,
    /// Everything after `comp_mask`, not interpreted.
    pub rest: [u8; MLX5DV_CONTEXT_SIZE - 24],
}

/// `mlx5dv_context.flags`: compressed CQEs are supported.
pub const MLX5DV_CONTEXT_FLAGS_CQE_V1: u64 = 1 << 0;
/// `mlx5dv_context.flags`: enhanced multi-packet WQEs.
pub const MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW: u64 = 1 << 3;
/// `mlx5dv_context.flags`: CQE 128 B compression.
pub const MLX5DV_CONTEXT_FLAGS_CQE_128B_COMP: u64 = 1 << 4;
/// `mlx5dv_context.flags`: CQE 128 B padding.
pub const MLX5DV_CONTEXT_FLAGS_CQE_128B_PAD: u64 = 1 << 5;

macro_rules! zeroed_ctor {
    ($($t:ty),* $(,)?) => {$(
        impl $t {
            /// All fields zero / null, as the C API expects before filling.
            pub fn zeroed() -> Self {
                // SAFETY: this type is plain C data (integers, raw pointers, `Option` of
                // function pointers, unions of those): the all-zero bit pattern is valid
                // (null pointers, `None`, zero).
                unsafe { std::mem::zeroed() }
            }
        }
    )*};
}

zeroed_ctor!(
    ibv_device_attr,
    ibv_port_attr,
    ibv_gid,
    ibv_srq_init_attr,
    ibv_qp_init_attr,
    ibv_global_route,
    ibv_ah_attr,
    ibv_qp_attr,
    ibv_send_wr,
    ibv_recv_wr,
    ibv_async_event,
    mlx5dv_qp,
    mlx5dv_cq,
    mlx5dv_srq,
    mlx5dv_ah,
    mlx5dv_obj,
    mlx5dv_context,
);

// ---------------------------------------------------------------------------------------------
// Layout assertions (x86_64 / aarch64 Linux, LP64). The same numbers are in
// fixtures/abi/abi.txt, one column per architecture, generated from the C headers; tests/abi.rs
// compares the column of the architecture being compiled. The structs that embed a glibc
// pthread_mutex_t (40 bytes on x86_64, 48 on aarch64; pthread_cond_t is 48 on both) differ in
// size between the two and are asserted per architecture in `layout::arch`.
// ---------------------------------------------------------------------------------------------

#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;

    const_assert_eq!(size_of::<ibv_device>(), 664);
    const_assert_eq!(offset_of!(ibv_device, node_type), 16);
    const_assert_eq!(offset_of!(ibv_device, name), 24);
    const_assert_eq!(offset_of!(ibv_device, ibdev_path), 408);

    const_assert_eq!(size_of::<ibv_context_ops>(), 256);
    const_assert_eq!(offset_of!(ibv_context_ops, poll_cq), 88);
    const_assert_eq!(offset_of!(ibv_context_ops, req_notify_cq), 96);
    const_assert_eq!(offset_of!(ibv_context_ops, post_srq_recv), 160);
    const_assert_eq!(offset_of!(ibv_context_ops, post_send), 200);
    const_assert_eq!(offset_of!(ibv_context_ops, post_recv), 208);
    const_assert_eq!(offset_of!(ibv_context, ops), 8);
    const_assert_eq!(offset_of!(ibv_context, cmd_fd), 264);
    const_assert_eq!(offset_of!(ibv_context, async_fd), 268);

    const_assert_eq!(size_of::<ibv_device_attr>(), 232);
    const_assert_eq!(offset_of!(ibv_device_attr, node_guid), 64);
    const_assert_eq!(offset_of!(ibv_device_attr, max_qp_wr), 112);
    const_assert_eq!(offset_of!(ibv_device_attr, atomic_cap), 164);
    const_assert_eq!(offset_of!(ibv_device_attr, max_srq_sge), 220);
    const_assert_eq!(offset_of!(ibv_device_attr, phys_port_cnt), 227);

    const_assert_eq!(size_of::<ibv_port_attr>(), 52);
    const_assert_eq!(offset_of!(ibv_port_attr, lid), 34);
    const_assert_eq!(offset_of!(ibv_port_attr, active_width), 43);
    const_assert_eq!(offset_of!(ibv_port_attr, link_layer), 46);
    const_assert_eq!(offset_of!(ibv_port_attr, port_cap_flags2), 48);

    const_assert_eq!(size_of::<ibv_gid>(), 16);
    const_assert_eq!(size_of::<ibv_pd>(), 16);
    const_assert_eq!(size_of::<ibv_mr>(), 48);
    const_assert_eq!(offset_of!(ibv_mr, lkey), 36);
    const_assert_eq!(offset_of!(ibv_mr, rkey), 40);
    const_assert_eq!(offset_of!(ibv_cq, cqe), 28);
    const_assert_eq!(size_of::<ibv_srq_init_attr>(), 24);
    const_assert_eq!(offset_of!(ibv_qp, qp_num), 52);
    const_assert_eq!(offset_of!(ibv_qp, state), 56);
    const_assert_eq!(size_of::<ibv_qp_cap>(), 20);
    const_assert_eq!(size_of::<ibv_qp_init_attr>(), 64);
    const_assert_eq!(offset_of!(ibv_qp_init_attr, cap), 32);
    const_assert_eq!(offset_of!(ibv_qp_init_attr, qp_type), 52);
    const_assert_eq!(size_of::<ibv_global_route>(), 24);
    const_assert_eq!(size_of::<ibv_ah_attr>(), 32);
    const_assert_eq!(offset_of!(ibv_ah_attr, dlid), 24);
    const_assert_eq!(offset_of!(ibv_ah_attr, is_global), 29);
    const_assert_eq!(size_of::<ibv_qp_attr>(), 144);
    const_assert_eq!(offset_of!(ibv_qp_attr, ah_attr), 56);
    const_assert_eq!(offset_of!(ibv_qp_attr, pkey_index), 120);
    const_assert_eq!(offset_of!(ibv_qp_attr, max_rd_atomic), 126);
    const_assert_eq!(offset_of!(ibv_qp_attr, rnr_retry), 132);
    const_assert_eq!(offset_of!(ibv_qp_attr, rate_limit), 136);

    const_assert_eq!(size_of::<ibv_sge>(), 16);
    const_assert_eq!(size_of::<ibv_send_wr>(), 128);
    const_assert_eq!(offset_of!(ibv_send_wr, imm_data), 36);
    const_assert_eq!(offset_of!(ibv_send_wr, wr), 40);
    const_assert_eq!(offset_of!(ibv_send_wr, qp_type), 72);
    const_assert_eq!(offset_of!(ibv_send_wr, bind_tso), 80);
    const_assert_eq!(size_of::<ibv_recv_wr>(), 32);
    const_assert_eq!(size_of::<ibv_wc>(), 48);
    const_assert_eq!(offset_of!(ibv_wc, byte_len), 20);
    const_assert_eq!(offset_of!(ibv_wc, qp_num), 28);
    const_assert_eq!(offset_of!(ibv_wc, wc_flags), 36);
    const_assert_eq!(size_of::<ibv_async_event>(), 16);

    const_assert_eq!(size_of::<mlx5dv_qp>(), 96);
    const_assert_eq!(offset_of!(mlx5dv_qp, bf), 40);
    const_assert_eq!(size_of::<mlx5dv_cq>(), 48);
    const_assert_eq!(offset_of!(mlx5dv_cq, cqn), 32);
    const_assert_eq!(size_of::<mlx5dv_srq>(), 48);
    const_assert_eq!(offset_of!(mlx5dv_srq, srqn), 40);
    const_assert_eq!(size_of::<mlx5dv_ah>(), 16);
    const_assert_eq!(offset_of!(mlx5dv_ah, comp_mask), 8);
    const_assert_eq!(size_of::<mlx5dv_obj>(), 112);
    const_assert_eq!(size_of::<mlx5dv_context>(), MLX5DV_CONTEXT_SIZE);

    /// The sizes that follow glibc's `pthread_mutex_t`.
    #[cfg(target_arch = "x86_64")]
    mod arch {
        use super::*;

        const_assert_eq!(size_of::<libc::pthread_mutex_t>(), 40);
        const_assert_eq!(size_of::<libc::pthread_cond_t>(), 48);
        const_assert_eq!(size_of::<ibv_context>(), 328);
        const_assert_eq!(size_of::<ibv_cq>(), 128);
        const_assert_eq!(size_of::<ibv_srq>(), 128);
        const_assert_eq!(size_of::<ibv_qp>(), 160);
    }

    /// The sizes that follow glibc's `pthread_mutex_t`.
    #[cfg(target_arch = "aarch64")]
    mod arch {
        use super::*;

        const_assert_eq!(size_of::<libc::pthread_mutex_t>(), 48);
        const_assert_eq!(size_of::<libc::pthread_cond_t>(), 48);
        const_assert_eq!(size_of::<ibv_context>(), 336);
        const_assert_eq!(size_of::<ibv_cq>(), 136);
        const_assert_eq!(size_of::<ibv_srq>(), 136);
        const_assert_eq!(size_of::<ibv_qp>(), 168);
    }
}
