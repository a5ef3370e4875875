//! The sim as the device behind rdma-direct's stand-in for libibverbs and libmlx5
//! (`tests/standin/`, a C library built from rdma-core's own headers).
//!
//! Contract: the stand-in models the control path of libibverbs and libmlx5 (objects,
//! reference counts, thread domains, `mlx5dv_init_obj`); the queues of its objects live on
//! this process's sim. [`attach_if_standin`] (called by the CLI at start and by the device
//! tests) looks at the libibverbs `RDMA_DIRECT_LIBIBVERBS` names: if it exports
//! `rdma_direct_standin_attach` (no rdma-core library does), it hands the stand-in the
//! table of callbacks below ([`Backend`], mirrored from
//! `tests/standin/standin.h`; the stand-in refuses a table of another size). Each stand-in
//! device (`mlx5_0`, `mlx5_1`, `rxe_standin0`) is one [`SimDevice`] with its device thread
//! running, made on first use and kept for the life of the process, so WQEs the mlx5 hot
//! path writes into the stand-in's rings execute, CQEs appear, arms raise channel events and
//! CQE timestamps come from the sim clock.
//!
//! Each process has its own devices, with GIDs distinct per process (table: 0/1 link-local
//! `fe80::` with the sim GID's process and device number as interface id, 2/3 the sim GID),
//! so two processes' `mlx5_0` are two devices that reach each other: a QP whose path
//! (`ah_attr.grh.dgid`, read at INIT -> RTR) names another process's stand-in device by
//! any GID of its table is connected through the sim [`fabric`](super::fabric), the device
//! joining it then, as a sim device's QP is. A GID of this device loops back; another
//! device of the same process, or a GID that is no sim device's, is EINVAL (devices of one
//! process do not reach each other). UD across processes is not carried: the stand-in's
//! address handles never join the fabric.
//!
//! Callbacks return 0 or a positive errno and never unwind into C.

use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Mutex;

use libc::{c_int, c_void};

use super::{SimDevice, SimOwner, SimQpAttr};
use crate::clock::TimestampKind;
use crate::Error;
use crate::{Access, QpCaps, QpConfig, QpState, QpType};

/// `struct standin_cq_desc`.
#[repr(C)]
pub struct CqDesc {
    handle: u64,
    buf: *mut u8,
    dbrec: *mut u32,
    uar: *mut u8,
    cqn: u32,
    cqe_cnt: u32,
    cqe_size: u32,
    reserved: u32,
}

/// `struct standin_srq_desc`.
#[repr(C)]
pub struct SrqDesc {
    handle: u64,
    buf: *mut u8,
    dbrec: *mut u32,
    srqn: u32,
    wqe_cnt: u32,
    stride: u32,
    head: u32,
    tail: u32,
    reserved: u32,
}

/// `struct standin_qp_caps`.
#[repr(C)]
pub struct Caps {
    max_send_wr: u32,
    max_recv_wr: u32,
    max_send_sge: u32,
    max_recv_sge: u32,
    max_inline_data: u32,
}

/// `struct standin_qp_desc`.
#[repr(C)]
pub struct QpDesc {
    handle: u64,
    sq_buf: *mut u8,
    rq_buf: *mut u8,
    dbrec: *mut u32,
    bf_reg: *mut u8,
    qpn: u32,
    sq_wqe_cnt: u32,
    sq_stride: u32,
    rq_wqe_cnt: u32,
    rq_stride: u32,
    bf_size: u32,
    caps: Caps,
    reserved: u32,
}

/// `struct standin_qp_attr`.
#[repr(C)]
pub struct QpAttr {
    remote_qpn: u32,
    path_mtu: u32,
    access: u32,
    qkey: u32,
    rnr_retry: u8,
    retry_cnt: u8,
    min_rnr_timer: u8,
    timeout: u8,
    flags: u32,
    dgid: [u8; 16],
}

/// `STANDIN_QP_ATTR_DGID`: [`QpAttr::dgid`] names a GID that is not one of this device's.
const QP_ATTR_DGID: u32 = 1;

/// `struct standin_clock`.
#[repr(C)]
pub struct Clock {
    nsec: u64,
    last_cycles: u64,
    frac: u64,
    mult: u32,
    shift: u32,
    mask: u64,
}

/// `struct standin_backend`: what the stand-in calls to create its objects on a device.
#[repr(C)]
#[allow(missing_docs)]
pub struct Backend {
    pub version: u32,
    pub size: u32,
    pub gid: unsafe extern "C" fn(u32, u32, *mut u8) -> c_int,
    pub alloc_pd: unsafe extern "C" fn(u32, *mut u32) -> c_int,
    pub reg_mr: unsafe extern "C" fn(u32, u32, u64, u64, u32, *mut u32) -> c_int,
    pub dereg_mr: unsafe extern "C" fn(u32, u32) -> c_int,
    pub create_cq: unsafe extern "C" fn(u32, u32, u32, *mut CqDesc) -> c_int,
    pub cq_channel: unsafe extern "C" fn(u32, u64, c_int) -> c_int,
    pub destroy_cq: unsafe extern "C" fn(u32, u64) -> c_int,
    pub create_srq: unsafe extern "C" fn(u32, u32, u32, u32, *mut SrqDesc) -> c_int,
    pub destroy_srq: unsafe extern "C" fn(u32, u64) -> c_int,
    pub create_qp:
        unsafe extern "C" fn(u32, u32, u32, *const Caps, u32, u32, i64, *mut QpDesc) -> c_int,
    pub modify_qp: unsafe extern "C" fn(u32, u32, u32, *const QpAttr) -> c_int,
    pub qp_state: unsafe extern "C" fn(u32, u32, *mut u32) -> c_int,
    pub destroy_qp: unsafe extern "C" fn(u32, u64) -> c_int,
    pub clock_info: unsafe extern "C" fn(u32, *mut Clock) -> c_int,
    pub clock_now: unsafe extern "C" fn(u32, *mut u64, *mut u64) -> c_int,
}

/// `int rdma_direct_standin_attach(const struct standin_backend *)`.
type AttachFn = unsafe extern "C" fn(backend: *const c_void) -> c_int;

/// `STANDIN_BACKEND_VERSION`.
pub const BACKEND_VERSION: u32 = 2;

/// Give the stand-in its device, once per process, when `RDMA_DIRECT_LIBIBVERBS` names a
/// library and that library is the stand-in. `Ok(false)` without the variable (nothing is
/// loaded then) or for any other libibverbs; an error when the library does not load or the
/// stand-in refuses this build's table (its `standin.h` and this file disagree: rebuild it
/// with `tests/standin/build`).
pub fn attach_if_standin() -> crate::Result<bool> {
    static DONE: std::sync::OnceLock<crate::Result<bool>> = std::sync::OnceLock::new();
    if std::env::var_os("RDMA_DIRECT_LIBIBVERBS").is_none_or(|v| v.is_empty()) {
        return Ok(false);
    }
    DONE.get_or_init(|| {
        let Some(p) = crate::ffi::loader::libibverbs_symbol("rdma_direct_standin_attach\0")? else {
            return Ok(false);
        };
        // SAFETY: only the stand-in exports this symbol (no rdma-core library does), and its
        // C prototype is `int rdma_direct_standin_attach(const struct standin_backend *)`,
        // which is `AttachFn`; a function pointer and a data pointer have the same size here.
        let f = unsafe { std::mem::transmute::<*mut c_void, AttachFn>(p) };
        // SAFETY: the stand-in's attach function; `BACKEND` is a static table of functions
        // with the C signatures of standin.h.
        let rc = unsafe { f((&BACKEND as *const Backend).cast()) };
        if rc != 0 {
            return Err(Error::verb(
                "rdma_direct_standin_attach",
                rc,
                "the stand-in refused this build's device backend: rebuild it \
                 (tests/standin/build)",
            ));
        }
        Ok(true)
    })
    .clone()
}

#[cfg(target_pointer_width = "64")]
mod layout {
    use super::*;
    use static_assertions::const_assert_eq;
    // The sizes standin.h asserts on the C side.
    const_assert_eq!(std::mem::size_of::<CqDesc>(), 48);
    const_assert_eq!(std::mem::size_of::<SrqDesc>(), 48);
    const_assert_eq!(std::mem::size_of::<QpDesc>(), 88);
    const_assert_eq!(std::mem::size_of::<QpAttr>(), 40);
    const_assert_eq!(std::mem::size_of::<Clock>(), 40);
    const_assert_eq!(std::mem::size_of::<Backend>(), 128);
}

static BACKEND: Backend = Backend {
    version: BACKEND_VERSION,
    size: std::mem::size_of::<Backend>() as u32,
    gid: cb_gid,
    alloc_pd: cb_alloc_pd,
    reg_mr: cb_reg_mr,
    dereg_mr: cb_dereg_mr,
    create_cq: cb_create_cq,
    cq_channel: cb_cq_channel,
    destroy_cq: cb_destroy,
    create_srq: cb_create_srq,
    destroy_srq: cb_destroy,
    create_qp: cb_create_qp,
    modify_qp: cb_modify_qp,
    qp_state: cb_qp_state,
    destroy_qp: cb_destroy,
    clock_info: cb_clock_info,
    clock_now: cb_clock_now,
};

/// The stand-in's devices, by index: made on first use, each with its device thread.
static DEVICES: Mutex<Vec<Option<SimDevice>>> = Mutex::new(Vec::new());

/// Devices the stand-in may name (it presents three).
const MAX_DEVICES: u32 = 16;

fn with_dev<R>(dev: u32, f: impl FnOnce(&SimDevice) -> crate::Result<R>) -> crate::Result<R> {
    if dev >= MAX_DEVICES {
        return Err(Error::InvalidArgument {
            context: "stand-in backend",
            detail: format!("device index {dev}"),
        });
    }
    let mut devs = DEVICES.lock().unwrap_or_else(|p| p.into_inner());
    if devs.len() <= dev as usize {
        devs.resize_with(dev as usize + 1, || None);
    }
    let slot = &mut devs[dev as usize];
    if slot.is_none() {
        let mut d = SimDevice::new();
        d.start_device_thread()?;
        *slot = Some(d);
    }
    f(slot.as_ref().expect("made above"))
}

fn errno_of(e: &Error) -> c_int {
    match e {
        Error::Verb { errno, .. } if *errno > 0 => *errno,
        Error::Unsupported { .. } => libc::EOPNOTSUPP,
        Error::NotFound { .. } => libc::ENOENT,
        Error::Io { .. } => libc::EIO,
        _ => libc::EINVAL,
    }
}

/// Runs a callback body: its error as an errno, a panic as EIO (never unwinds into C).
fn guard(f: impl FnOnce() -> crate::Result<()>) -> c_int {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => errno_of(&e),
        Err(_) => libc::EIO,
    }
}

fn handle(owner: SimOwner) -> u64 {
    Box::into_raw(Box::new(owner)) as u64
}

unsafe extern "C" fn cb_gid(dev: u32, index: u32, out: *mut u8) -> c_int {
    guard(|| {
        let g = with_dev(dev, |d| standin_gid(d.gid(), index))?;
        // SAFETY: the stand-in passes a writable 16-byte GID.
        unsafe { std::ptr::copy_nonoverlapping(g.as_ptr(), out, 16) };
        Ok(())
    })
}

unsafe extern "C" fn cb_alloc_pd(dev: u32, pdn: *mut u32) -> c_int {
    guard(|| {
        let n = with_dev(dev, |d| Ok(d.alloc_pd_raw()))?;
        // SAFETY: a writable u32 of the stand-in.
        unsafe { *pdn = n };
        Ok(())
    })
}

unsafe extern "C" fn cb_reg_mr(
    dev: u32,
    pdn: u32,
    addr: u64,
    len: u64,
    access: u32,
    key: *mut u32,
) -> c_int {
    guard(|| {
        let k = with_dev(dev, |d| {
            let pd = super::SimPd::from_raw(pdn);
            // SAFETY: the stand-in's caller registered this memory with ibv_reg_mr and keeps
            // it mapped until ibv_dereg_mr, which deregisters it here first (`cb_dereg_mr`).
            let mr = unsafe {
                d.reg_sim_mr(
                    &pd,
                    addr as *mut u8,
                    len as usize,
                    Access(access & Access::ALL.0),
                )
            }?;
            let k = crate::MemoryRegion::lkey(&mr);
            // The key lives until cb_dereg_mr (the SimMr would deregister on drop).
            std::mem::forget(mr);
            Ok(k)
        })?;
        // SAFETY: a writable u32 of the stand-in.
        unsafe { *key = k };
        Ok(())
    })
}

unsafe extern "C" fn cb_dereg_mr(dev: u32, key: u32) -> c_int {
    guard(|| with_dev(dev, |d| d.dereg_key(key)))
}

unsafe extern "C" fn cb_create_cq(dev: u32, cqe: u32, ts: u32, out: *mut CqDesc) -> c_int {
    guard(|| {
        let ts = match ts {
            0 => None,
            1 => Some(TimestampKind::FreeRunning),
            _ => Some(TimestampKind::RealTime),
        };
        let desc = with_dev(dev, |d| {
            let (dv, owner) = d.create_cq_dv_ts(cqe, ts)?;
            let uar = d.cq_uar(dv.cqn).expect("just created");
            Ok(CqDesc {
                handle: handle(owner),
                buf: dv.buf,
                dbrec: dv.dbrec,
                uar,
                cqn: dv.cqn,
                cqe_cnt: dv.cqe_cnt,
                cqe_size: dv.cqe_size,
                reserved: 0,
            })
        })?;
        // SAFETY: a writable descriptor of the stand-in.
        unsafe { out.write(desc) };
        Ok(())
    })
}

unsafe extern "C" fn cb_cq_channel(dev: u32, h: u64, fd: c_int) -> c_int {
    // SAFETY: the stand-in gives us this fd (a dup of its channel's write end) to own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    guard(|| {
        // SAFETY: `h` is a live handle from cb_create_cq (the stand-in destroys it later).
        let cqn = match unsafe { &*(h as *const SimOwner) }.obj {
            super::Obj::Cq(n) => n,
            _ => return Err(Error::verb("stand-in cq_channel", libc::EINVAL, "not a CQ")),
        };
        with_dev(dev, |d| d.set_cq_channel_fd(cqn, fd))
    })
}

unsafe extern "C" fn cb_destroy(_dev: u32, h: u64) -> c_int {
    guard(|| {
        // SAFETY: `h` came from `handle` and the stand-in destroys each object once.
        drop(unsafe { Box::from_raw(h as *mut SimOwner) });
        Ok(())
    })
}

unsafe extern "C" fn cb_create_srq(
    dev: u32,
    pdn: u32,
    max_wr: u32,
    max_sge: u32,
    out: *mut SrqDesc,
) -> c_int {
    guard(|| {
        let desc = with_dev(dev, |d| {
            let (dv, owner) = d.create_srq_dv(pdn, max_wr, max_sge)?;
            Ok(SrqDesc {
                handle: handle(owner),
                buf: dv.buf,
                dbrec: dv.dbrec,
                srqn: dv.srqn,
                wqe_cnt: dv.wqe_cnt,
                stride: dv.stride,
                head: dv.head,
                tail: dv.tail,
                reserved: 0,
            })
        })?;
        // SAFETY: a writable descriptor of the stand-in.
        unsafe { out.write(desc) };
        Ok(())
    })
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn cb_create_qp(
    dev: u32,
    pdn: u32,
    qp_type: u32,
    req: *const Caps,
    send_cqn: u32,
    recv_cqn: u32,
    srqn: i64,
    out: *mut QpDesc,
) -> c_int {
    guard(|| {
        let qp_type = match qp_type {
            ffi_qpt::RC => QpType::Rc,
            ffi_qpt::UC => QpType::Uc,
            ffi_qpt::UD => QpType::Ud,
            t => {
                return Err(Error::verb(
                    "stand-in create_qp",
                    libc::EOPNOTSUPP,
                    format!("{t}"),
                ))
            }
        };
        // SAFETY: the stand-in passes a readable caps struct.
        let req = unsafe { &*req };
        let mut cfg = QpConfig::new(qp_type);
        cfg.caps = QpCaps {
            max_send_wr: req.max_send_wr,
            max_recv_wr: req.max_recv_wr,
            max_send_sge: req.max_send_sge,
            max_recv_sge: req.max_recv_sge,
            max_inline_data: req.max_inline_data,
        };
        let srqn = u32::try_from(srqn).ok();
        let desc = with_dev(dev, |d| {
            let (dv, caps, owner) = d.create_qp_dv(pdn, &cfg, send_cqn, recv_cqn, srqn)?;
            Ok(QpDesc {
                handle: handle(owner),
                sq_buf: dv.sq_buf,
                rq_buf: dv.rq_buf,
                dbrec: dv.dbrec,
                bf_reg: dv.bf_reg,
                qpn: dv.qpn,
                sq_wqe_cnt: dv.sq_wqe_cnt,
                sq_stride: dv.sq_stride,
                rq_wqe_cnt: dv.rq_wqe_cnt,
                rq_stride: dv.rq_stride,
                bf_size: dv.bf_size,
                caps: Caps {
                    max_send_wr: caps.max_send_wr,
                    max_recv_wr: caps.max_recv_wr,
                    max_send_sge: caps.max_send_sge,
                    max_recv_sge: caps.max_recv_sge,
                    max_inline_data: caps.max_inline_data,
                },
                reserved: 0,
            })
        })?;
        // SAFETY: a writable descriptor of the stand-in.
        unsafe { out.write(desc) };
        Ok(())
    })
}

/// `enum ibv_qp_type` values.
mod ffi_qpt {
    pub const RC: u32 = 2;
    pub const UC: u32 = 3;
    pub const UD: u32 = 4;
}

unsafe extern "C" fn cb_modify_qp(dev: u32, qpn: u32, state: u32, attr: *const QpAttr) -> c_int {
    guard(|| {
        // SAFETY: null or a readable attr of the stand-in.
        let raw = unsafe { attr.as_ref() };
        let to = QpState::from_ibv(state);
        let attr = raw.map(|a| SimQpAttr {
            remote_qpn: a.remote_qpn,
            path_mtu: a.path_mtu,
            rnr_retry: a.rnr_retry,
            retry_cnt: a.retry_cnt,
            min_rnr_timer: a.min_rnr_timer,
            timeout: a.timeout,
            access: Access(a.access),
            qkey: a.qkey,
        });
        with_dev(dev, |d| {
            // The path is taken where the IBA sets it, INIT -> RTR: this device (`None`) or
            // another process's, through the fabric (joined first: refused, nothing moved).
            let path = match raw {
                Some(a) if to == QpState::Rtr => Some(peer_of(d, a)?),
                _ => None,
            };
            if let Some(Some(_)) = path {
                d.join_fabric(None)?;
            }
            d.modify_qp(qpn, to, attr)?;
            if let Some(peer) = path {
                d.shared.lock().set_remote(qpn, peer);
            }
            Ok(())
        })
    })
}

/// `fe80::/64`, the IPv6 link-local prefix (the interface id, bytes 8..16, zero).
const LINK_LOCAL: [u8; 16] = std::net::Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0).octets();

/// The stand-in's GID table of a device whose sim GID is `sim` (see the module doc): 0 and 1
/// link-local, `fe80::` with the sim GID's last eight bytes (process and device number) as
/// interface id; 2 and 3 the sim GID itself.
fn standin_gid(sim: [u8; 16], index: u32) -> crate::Result<[u8; 16]> {
    match index {
        0 | 1 => {
            let mut g = LINK_LOCAL;
            g[8..].copy_from_slice(&sim[8..]);
            Ok(g)
        }
        2 | 3 => Ok(sim),
        _ => Err(Error::verb(
            "ibv_query_gid (stand-in)",
            libc::EINVAL,
            format!("GID index {index}: the stand-in's table has 0..3"),
        )),
    }
}

/// The sim GID behind any GID of [`standin_gid`]'s table (a link-local one is turned back
/// into the sim GID it was made from; any other is returned as it is).
fn sim_gid_of(g: [u8; 16]) -> [u8; 16] {
    if g[..8] != LINK_LOCAL[..8] {
        return g;
    }
    let mut s = [0u8; 16];
    s[..4].copy_from_slice(&super::SIM_GID_PREFIX);
    s[8..].copy_from_slice(&g[8..]);
    s
}

/// The peer a QP's path names: `None` for this device (the stand-in found the GID in the
/// device's own table), the sim GID of another process's device, or EINVAL for anything
/// else (another device of this process, or no sim device at all).
fn peer_of(d: &SimDevice, a: &QpAttr) -> crate::Result<Option<[u8; 16]>> {
    if a.flags & QP_ATTR_DGID == 0 {
        return Ok(None);
    }
    let gid = sim_gid_of(a.dgid);
    match super::gid_process(&gid) {
        Some(pid) if pid != std::process::id() => Ok(Some(gid)),
        _ => Err(Error::verb(
            "ibv_modify_qp (stand-in)",
            libc::EINVAL,
            format!(
                "the path's GID {} is neither this device's ({}) nor a stand-in device of \
                 another process: devices of one process do not reach each other",
                std::net::Ipv6Addr::from(a.dgid),
                std::net::Ipv6Addr::from(d.gid())
            ),
        )),
    }
}

unsafe extern "C" fn cb_qp_state(dev: u32, qpn: u32, out: *mut u32) -> c_int {
    guard(|| {
        let s = with_dev(dev, |d| {
            d.qp_state(qpn).ok_or_else(|| Error::NotFound {
                what: format!("QP {qpn:#x}"),
                hint: String::new(),
            })
        })?;
        // SAFETY: a writable u32 of the stand-in.
        unsafe { *out = s.to_ibv() };
        Ok(())
    })
}

unsafe extern "C" fn cb_clock_info(dev: u32, out: *mut Clock) -> c_int {
    guard(|| {
        let c = with_dev(dev, |d| Ok(d.clock().clock_info()))?;
        // SAFETY: a writable struct of the stand-in.
        unsafe {
            out.write(Clock {
                nsec: c.nsec,
                last_cycles: c.last_cycles,
                frac: c.frac,
                mult: c.mult,
                shift: c.shift,
                mask: c.mask,
            })
        };
        Ok(())
    })
}

unsafe extern "C" fn cb_clock_now(dev: u32, cycles: *mut u64, real_time: *mut u64) -> c_int {
    guard(|| {
        let (c, r) = with_dev(dev, |d| Ok((d.clock().cycles(), d.clock().real_time_raw())))?;
        // SAFETY: writable u64s of the stand-in.
        unsafe {
            *cycles = c;
            *real_time = r;
        }
        Ok(())
    })
}
