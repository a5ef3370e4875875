//! Protection domains, memory regions, CQs, SRQs and QPs, with their attribute and init
//! structs (`ibv_qp_cap`, `ibv_qp_init_attr`, `ibv_ah_attr`, `ibv_qp_attr`, ...).

use super::device::{ibv_comp_channel, ibv_context, ibv_gid};
use libc::{c_int, c_uint, c_void};

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

/// The sizes and offsets the code relies on (LP64; see the parent module).
#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use static_assertions::const_assert_eq;
    use std::mem::{offset_of, size_of};

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

    /// The sizes that follow glibc's `pthread_mutex_t` (its size is asserted in `device`).
    #[cfg(target_arch = "x86_64")]
    mod arch {
        use super::*;

        const_assert_eq!(size_of::<ibv_cq>(), 128);
        const_assert_eq!(size_of::<ibv_srq>(), 128);
        const_assert_eq!(size_of::<ibv_qp>(), 160);
    }

    /// The sizes that follow glibc's `pthread_mutex_t` (its size is asserted in `device`).
    #[cfg(target_arch = "aarch64")]
    mod arch {
        use super::*;

        const_assert_eq!(size_of::<ibv_cq>(), 136);
        const_assert_eq!(size_of::<ibv_srq>(), 136);
        const_assert_eq!(size_of::<ibv_qp>(), 168);
    }
}
