//! `#[repr(C)]` mirrors of the structs of rdma-core 44's `rdma/rdma_cma.h` (librdmacm) that
//! this crate touches, and the enum values it uses.
//!
//! As in [`super::types`], C enums are `u32`/`c_int` fields plus constants. The sizes and the
//! offsets the code relies on are asserted below and checked against `fixtures/abi/abi.txt`
//! (printed by `fixtures/abi/abi.c` from the installed header) by `tests/abi.rs`; the layout is
//! the same on x86_64 and aarch64 (no `pthread_mutex_t` inside).
//!
//! `struct rdma_cm_id` and `struct rdma_cm_event` are allocated and owned by librdmacm: the
//! crate only reads the fields named here, through the pointers librdmacm hands out.
#![allow(non_camel_case_types)]

use super::types::{ibv_ah_attr, ibv_context, ibv_gid, ibv_qp};
use libc::{c_int, c_void, sockaddr_storage};
use static_assertions::const_assert_eq;
use std::mem::{offset_of, size_of};

// `enum rdma_cm_event_type`.
/// Address resolved (`rdma_resolve_addr` done).
pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
/// Address resolution failed.
pub const RDMA_CM_EVENT_ADDR_ERROR: u32 = 1;
/// Route resolved (`rdma_resolve_route` done).
pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
/// Route resolution failed.
pub const RDMA_CM_EVENT_ROUTE_ERROR: u32 = 3;
/// A connection request on a listening id; `event.id` is the new id.
pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
/// The peer's reply, on an id without a QP: move the QP to RTR/RTS, then `rdma_establish`.
pub const RDMA_CM_EVENT_CONNECT_RESPONSE: u32 = 5;
/// The connection could not be made.
pub const RDMA_CM_EVENT_CONNECT_ERROR: u32 = 6;
/// The peer did not answer.
pub const RDMA_CM_EVENT_UNREACHABLE: u32 = 7;
/// The peer (or its CM: no listener) rejected the request; `status` is the reject reason.
pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
/// The connection is up.
pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
/// The connection is down (either side called `rdma_disconnect`).
pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;
/// The device went away.
pub const RDMA_CM_EVENT_DEVICE_REMOVAL: u32 = 11;
/// The id's address moved to another device.
pub const RDMA_CM_EVENT_ADDR_CHANGE: u32 = 14;
/// The connection left TIMEWAIT.
pub const RDMA_CM_EVENT_TIMEWAIT_EXIT: u32 = 15;

/// `enum rdma_port_space`: reliable connected (RC QPs), addressed like TCP.
pub const RDMA_PS_TCP: u32 = 0x0106;
/// `enum rdma_port_space`: unreliable datagram.
pub const RDMA_PS_UDP: u32 = 0x0111;

/// `RDMA_MAX_RESP_RES`: "as many as the device allows" in `responder_resources`.
pub const RDMA_MAX_RESP_RES: u8 = 0xFF;
/// `RDMA_MAX_INIT_DEPTH`: "as many as the device allows" in `initiator_depth`.
pub const RDMA_MAX_INIT_DEPTH: u8 = 0xFF;

/// `struct rdma_event_channel`: the file descriptor CM events are read from.
#[repr(C)]
#[derive(Debug)]
pub struct rdma_event_channel {
    /// Readable when an event is pending; may be made `O_NONBLOCK`.
    pub fd: c_int,
}

/// `struct rdma_ib_addr`.
#[repr(C)]
pub struct rdma_ib_addr {
    /// Source GID.
    pub sgid: ibv_gid,
    /// Destination GID.
    pub dgid: ibv_gid,
    /// P_Key, network order.
    pub pkey: u16,
}

/// `struct rdma_addr`: the two socket addresses (C unions of `sockaddr`, `sockaddr_in`,
/// `sockaddr_in6` and `sockaddr_storage`, mirrored as the storage) and the IB addresses.
#[repr(C)]
pub struct rdma_addr {
    /// Local address.
    pub src_addr: sockaddr_storage,
    /// Peer address.
    pub dst_addr: sockaddr_storage,
    /// `addr.ibaddr`.
    pub addr: rdma_ib_addr,
}

/// `struct rdma_route`.
#[repr(C)]
pub struct rdma_route {
    /// Addresses.
    pub addr: rdma_addr,
    /// `struct ibv_sa_path_rec *` (not read).
    pub path_rec: *mut c_void,
    /// Number of path records.
    pub num_paths: c_int,
}

/// `struct rdma_cm_id`.
#[repr(C)]
pub struct rdma_cm_id {
    /// The device the address resolved to (null before resolution / binding to a device).
    pub verbs: *mut ibv_context,
    /// The event channel.
    pub channel: *mut rdma_event_channel,
    /// The user context given to `rdma_create_id`.
    pub context: *mut c_void,
    /// The QP `rdma_create_qp` made (null here: the QP is the provider's own).
    pub qp: *mut ibv_qp,
    /// Addresses and path.
    pub route: rdma_route,
    /// `enum rdma_port_space`.
    pub ps: u32,
    /// The device port the address resolved to.
    pub port_num: u8,
    /// The current event (`struct rdma_cm_event *`, synchronous ids only).
    pub event: *mut rdma_cm_event,
    /// Only for `rdma_create_qp`'s QPs.
    pub send_cq_channel: *mut c_void,
    /// As above.
    pub send_cq: *mut c_void,
    /// As above.
    pub recv_cq_channel: *mut c_void,
    /// As above.
    pub recv_cq: *mut c_void,
    /// As above.
    pub srq: *mut c_void,
    /// As above.
    pub pd: *mut c_void,
    /// `enum ibv_qp_type`.
    pub qp_type: u32,
}

/// `struct rdma_conn_param`: what `rdma_connect` / `rdma_accept` send, and what a
/// connection event received.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct rdma_conn_param {
    /// Bytes carried in the CM message (REQ: at most 56, REP: at most 196 on an IP port
    /// space).
    pub private_data: *const c_void,
    /// Their length.
    pub private_data_len: u8,
    /// RDMA READ/atomic requests we accept at once (the peer's initiator depth).
    pub responder_resources: u8,
    /// RDMA READ/atomic requests we issue at once.
    pub initiator_depth: u8,
    /// End-to-end flow control (ignored by RoCE).
    pub flow_control: u8,
    /// Transport retries (ignored when accepting).
    pub retry_count: u8,
    /// RNR retries.
    pub rnr_retry_count: u8,
    /// Non-zero when the QP uses an SRQ (only read when the id has no QP).
    pub srq: u8,
    /// The QP's number (only read when the id has no QP: always, here).
    pub qp_num: u32,
}

/// `struct rdma_ud_param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct rdma_ud_param {
    /// Private data.
    pub private_data: *const c_void,
    /// Its length.
    pub private_data_len: u8,
    /// Path to the peer.
    pub ah_attr: ibv_ah_attr,
    /// The peer's QP number.
    pub qp_num: u32,
    /// The peer's Q_Key.
    pub qkey: u32,
}

/// `rdma_cm_event.param`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union rdma_cm_event_param {
    /// Connected port spaces.
    pub conn: rdma_conn_param,
    /// `RDMA_PS_UDP`.
    pub ud: rdma_ud_param,
}

/// `struct rdma_cm_event`.
#[repr(C)]
pub struct rdma_cm_event {
    /// The id the event is for (on `CONNECT_REQUEST`: the new id).
    pub id: *mut rdma_cm_id,
    /// On `CONNECT_REQUEST`: the listening id.
    pub listen_id: *mut rdma_cm_id,
    /// `enum rdma_cm_event_type`.
    pub event: u32,
    /// 0, a negative errno, or (on `REJECTED`) the transport's reject reason.
    pub status: c_int,
    /// Connection parameters (private data is valid until the event is acked).
    pub param: rdma_cm_event_param,
}

impl rdma_conn_param {
    /// All zero (no private data, no QP).
    pub fn zeroed() -> Self {
        // SAFETY: integers and a raw pointer: all-zero is a valid value of each.
        unsafe { std::mem::zeroed() }
    }
}

const_assert_eq!(size_of::<rdma_event_channel>(), 4);
const_assert_eq!(size_of::<rdma_ib_addr>(), 40);
const_assert_eq!(size_of::<rdma_addr>(), 296);
const_assert_eq!(size_of::<rdma_route>(), 312);
const_assert_eq!(size_of::<rdma_cm_id>(), 416);
const_assert_eq!(offset_of!(rdma_cm_id, verbs), 0);
const_assert_eq!(offset_of!(rdma_cm_id, channel), 8);
const_assert_eq!(offset_of!(rdma_cm_id, route), 32);
const_assert_eq!(offset_of!(rdma_cm_id, ps), 344);
const_assert_eq!(offset_of!(rdma_cm_id, port_num), 348);
const_assert_eq!(offset_of!(rdma_cm_id, qp_type), 408);
const_assert_eq!(size_of::<rdma_conn_param>(), 24);
const_assert_eq!(offset_of!(rdma_conn_param, private_data_len), 8);
const_assert_eq!(offset_of!(rdma_conn_param, qp_num), 16);
const_assert_eq!(size_of::<rdma_ud_param>(), 56);
const_assert_eq!(size_of::<rdma_cm_event>(), 80);
const_assert_eq!(offset_of!(rdma_cm_event, event), 16);
const_assert_eq!(offset_of!(rdma_cm_event, status), 20);
const_assert_eq!(offset_of!(rdma_cm_event, param), 24);
