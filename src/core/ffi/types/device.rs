//! Devices and contexts: `ibv_device`, `ibv_context` and its ops table, the device and port
//! attributes, the GID, and the opaque handles the crate only points at.

use super::consts::{IBV_SYSFS_NAME_MAX, IBV_SYSFS_PATH_MAX};
use super::queues::{ibv_cq, ibv_qp, ibv_srq};
use super::wr::{ibv_recv_wr, ibv_send_wr, ibv_wc};
use libc::{c_char, c_int, c_uint, c_void};

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

/// The sizes and offsets the code relies on (LP64; see the parent module).
#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use static_assertions::const_assert_eq;
    use std::mem::{offset_of, size_of};

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

    /// The sizes that follow glibc's `pthread_mutex_t`.
    #[cfg(target_arch = "x86_64")]
    mod arch {
        use super::*;

        const_assert_eq!(size_of::<libc::pthread_mutex_t>(), 40);
        const_assert_eq!(size_of::<libc::pthread_cond_t>(), 48);
        const_assert_eq!(size_of::<ibv_context>(), 328);
    }

    /// The sizes that follow glibc's `pthread_mutex_t`.
    #[cfg(target_arch = "aarch64")]
    mod arch {
        use super::*;

        const_assert_eq!(size_of::<libc::pthread_mutex_t>(), 48);
        const_assert_eq!(size_of::<libc::pthread_cond_t>(), 48);
        const_assert_eq!(size_of::<ibv_context>(), 336);
    }
}
