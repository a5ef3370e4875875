//! Work requests and what comes back: scatter/gather entries, `ibv_send_wr` (with its unions),
//! `ibv_recv_wr`, `ibv_wc`, address handles and asynchronous events.

use super::device::{ibv_context, ibv_mw, ibv_wq};
use super::queues::{ibv_cq, ibv_mr, ibv_pd, ibv_qp, ibv_srq};
use libc::{c_int, c_uint, c_void};

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

/// The sizes and offsets the code relies on (LP64; see the parent module).
#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use static_assertions::const_assert_eq;
    use std::mem::{offset_of, size_of};

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
}
