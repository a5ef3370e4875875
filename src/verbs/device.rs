//! Devices, contexts, device and port attributes, the GID table, async events.

use crate::error::{Error, Result};
use crate::ffi::{self, ibv_async_event, ibv_context, ibv_device_attr, ibv_gid, ibv_port_attr};
use crate::types::Mtu;
use std::ffi::CStr;
use std::fmt;
use std::sync::Arc;

/// Where the kernel lists RDMA devices.
pub const SYSFS_INFINIBAND: &str = "/sys/class/infiniband";

/// One entry of the device list (`ibv_get_device_list`), copied out: the list itself is freed
/// before this is returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Kernel device name, e.g. `rxe0`, `mlx5_0`.
    pub name: String,
    /// Node GUID in host order (print with [`format_guid`]).
    pub node_guid: u64,
    /// `enum ibv_node_type` (1 = CA).
    pub node_type: i32,
    /// `enum ibv_transport_type` (0 = InfiniBand, also RoCE; 1 = iWARP).
    pub transport_type: i32,
    /// uverbs device name, e.g. `uverbs0`.
    pub dev_name: String,
    /// sysfs path of the IB device.
    pub ibdev_path: String,
}

fn c_chars_to_string(chars: &[libc::c_char]) -> String {
    let bytes: Vec<u8> = chars
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// A GUID as `ibv_devinfo` prints it: `xxxx:xxxx:xxxx:xxxx`.
pub fn format_guid(guid: u64) -> String {
    format!(
        "{:04x}:{:04x}:{:04x}:{:04x}",
        (guid >> 48) & 0xffff,
        (guid >> 32) & 0xffff,
        (guid >> 16) & 0xffff,
        guid & 0xffff
    )
}

/// The device list as raw pointers; freed on drop.
struct DeviceList {
    list: *mut *mut ffi::ibv_device,
    len: usize,
    verbs: &'static ffi::Verbs,
}

impl DeviceList {
    fn get() -> Result<DeviceList> {
        let verbs = ffi::verbs()?;
        let mut n: libc::c_int = 0;
        // SAFETY: `n` is a valid out-pointer; the returned list is freed in Drop.
        let list = unsafe { (verbs.ibv_get_device_list)(&mut n) };
        if list.is_null() {
            let errno = last_errno();
            if errno == libc::ENOSYS {
                // libibverbs found no uverbs support in the kernel at all.
                return Err(Error::NotFound {
                    what: "RDMA devices".into(),
                    hint: no_device_reason().unwrap_or_else(|| {
                        "ibv_get_device_list: ENOSYS (the kernel has no uverbs support)".into()
                    }),
                });
            }
            return Err(Error::verb("ibv_get_device_list", errno, ""));
        }
        Ok(DeviceList {
            list,
            len: usize::try_from(n).unwrap_or(0),
            verbs,
        })
    }

    fn devices(&self) -> impl Iterator<Item = *mut ffi::ibv_device> + '_ {
        // SAFETY: `list` holds `len` valid device pointers (ibv_get_device_list's contract)
        // for as long as `self` lives.
        (0..self.len).map(move |i| unsafe { *self.list.add(i) })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: `list` came from ibv_get_device_list and is freed exactly once.
        unsafe { (self.verbs.ibv_free_device_list)(self.list) }
    }
}

impl Device {
    /// All RDMA devices libibverbs sees (possibly none).
    pub fn list() -> Result<Vec<Device>> {
        let list = DeviceList::get()?;
        let verbs = list.verbs;
        Ok(list
            .devices()
            .map(|d| {
                // SAFETY: `d` is a device of the live list; the name is a NUL-terminated
                // string inside the device struct.
                let name = unsafe { CStr::from_ptr((verbs.ibv_get_device_name)(d)) }
                    .to_string_lossy()
                    .into_owned();
                // SAFETY: as above.
                let guid = u64::from_be(unsafe { (verbs.ibv_get_device_guid)(d) });
                // SAFETY: as above; the struct is only read.
                let dev = unsafe { &*d };
                Device {
                    name,
                    node_guid: guid,
                    node_type: dev.node_type,
                    transport_type: dev.transport_type,
                    dev_name: c_chars_to_string(&dev.dev_name),
                    ibdev_path: c_chars_to_string(&dev.ibdev_path),
                }
            })
            .collect())
    }
}

/// Why there may be no RDMA device on this host, if something can tell: no
/// `/sys/class/infiniband`, no `ib_core` module, no `/dev/infiniband`. `None` when all of
/// these exist (then the device list really is empty, or permissions are the problem).
pub fn no_device_reason() -> Option<String> {
    let sys = std::path::Path::new(SYSFS_INFINIBAND);
    let core = std::path::Path::new("/sys/module/ib_core");
    if !sys.exists() {
        if !core.exists() {
            return Some(
                "the kernel has no RDMA support loaded (no /sys/class/infiniband, no \
                 /sys/module/ib_core): load ib_core and a driver (e.g. `modprobe rdma_rxe; \
                 rdma link add rxe0 type rxe netdev lo`), or run the device tests in the rxe \
                 guest: tests/guest/run"
                    .into(),
            );
        }
        return Some(
            "no /sys/class/infiniband: no RDMA driver is bound (e.g. `modprobe rdma_rxe; \
             rdma link add rxe0 type rxe netdev lo`), or use the rxe guest: tests/guest/run"
                .into(),
        );
    }
    let empty = std::fs::read_dir(sys)
        .map(|mut d| d.next().is_none())
        .unwrap_or(true);
    if empty {
        return Some(
            "/sys/class/infiniband is empty: no RDMA device is configured (for soft-RoCE: \
             `rdma link add rxe0 type rxe netdev <if>`; or use tests/guest/run)"
                .into(),
        );
    }
    if !std::path::Path::new("/dev/infiniband").exists() {
        return Some("no /dev/infiniband: ib_uverbs is not loaded (`modprobe ib_uverbs`)".into());
    }
    None
}

pub(crate) struct ContextInner {
    pub(crate) raw: *mut ibv_context,
    pub(crate) verbs: &'static ffi::Verbs,
    pub(crate) name: String,
    async_nonblocking: std::sync::atomic::AtomicBool,
}

// SAFETY: libibverbs contexts may be used from any thread; the pointer is only freed in Drop,
// when no other owner exists.
unsafe impl Send for ContextInner {}
// SAFETY: as above; every verb on a context is thread safe in libibverbs.
unsafe impl Sync for ContextInner {}

impl Drop for ContextInner {
    fn drop(&mut self) {
        // SAFETY: `raw` came from ibv_open_device; every object created on it holds an Arc of
        // this struct, so none is left when it drops.
        unsafe { (self.verbs.ibv_close_device)(self.raw) };
    }
}

/// An open device (`struct ibv_context`). Cheap to clone (an `Arc`); the device is closed when
/// the last clone and the last object created on it are gone.
#[derive(Clone)]
pub struct Context {
    pub(crate) inner: Arc<ContextInner>,
}

impl fmt::Debug for Context {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Opens the device called `name` (`rxe0`, `mlx5_0`).
    pub fn open(name: &str) -> Result<Context> {
        let list = DeviceList::get()?;
        let verbs = list.verbs;
        let mut names = Vec::new();
        for d in list.devices() {
            // SAFETY: `d` is a device of the live list.
            let n = unsafe { CStr::from_ptr((verbs.ibv_get_device_name)(d)) }
                .to_string_lossy()
                .into_owned();
            if n == name {
                // SAFETY: `d` is a device of the live list; libibverbs keeps the device alive
                // for as long as the context is open, after the list is freed.
                let raw = unsafe { (verbs.ibv_open_device)(d) };
                if raw.is_null() {
                    let errno = last_errno();
                    let hint = if errno == libc::EACCES || errno == libc::EPERM {
                        "no permission on /dev/infiniband/uverbs*: run as root or fix the \
                         device node's mode"
                            .to_string()
                    } else {
                        String::new()
                    };
                    return Err(Error::verb("ibv_open_device", errno, hint));
                }
                return Ok(Context {
                    inner: Arc::new(ContextInner {
                        raw,
                        verbs,
                        name: n,
                        async_nonblocking: false.into(),
                    }),
                });
            }
            names.push(n);
        }
        let hint = if names.is_empty() {
            no_device_reason().unwrap_or_else(|| "libibverbs lists no device".into())
        } else {
            format!("available: {}", names.join(", "))
        };
        Err(Error::NotFound {
            what: format!("RDMA device '{name}'"),
            hint,
        })
    }

    /// The device name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// `struct ibv_context *`, for the providers. Valid while `self` (or any clone) lives.
    pub fn as_ptr(&self) -> *mut ibv_context {
        self.inner.raw
    }

    /// The loaded libibverbs table.
    pub fn verbs(&self) -> &'static ffi::Verbs {
        self.inner.verbs
    }

    /// The data-path ops of this context (see [`ffi::ops`]).
    pub fn data_path_ops(&self) -> ffi::DataPathOps {
        // SAFETY: the context is open for as long as `self` lives.
        unsafe { ffi::DataPathOps::of(self.inner.raw) }
    }

    /// `ibv_query_device`.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        let mut a = ibv_device_attr::zeroed();
        // SAFETY: live context; `a` is a writable ibv_device_attr.
        let rc = unsafe { (self.inner.verbs.ibv_query_device)(self.inner.raw, &mut a) };
        if rc != 0 {
            return Err(Error::verb("ibv_query_device", rc, ""));
        }
        Ok(DeviceAttr::from_raw(&a))
    }

    /// `ibv_query_port` for `port` (1-based).
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        let mut a = ibv_port_attr::zeroed();
        // SAFETY: live context; `a` is a zeroed, writable ibv_port_attr (the exported compat
        // entry point writes a prefix of it, as verbs.h's inline wrapper relies on too).
        let rc = unsafe { (self.inner.verbs.ibv_query_port)(self.inner.raw, port, &mut a) };
        if rc != 0 {
            let hint = match self.query_device() {
                Ok(d) => format!("{} has ports 1..={}", self.name(), d.phys_port_cnt),
                Err(_) => String::new(),
            };
            return Err(Error::verb("ibv_query_port", rc, hint));
        }
        Ok(PortAttr::from_raw(&a))
    }

    /// `ibv_query_gid` for one index.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        let idx = libc::c_int::try_from(index).map_err(|_| Error::InvalidArgument {
            context: "ibv_query_gid",
            detail: format!("GID index {index} out of range"),
        })?;
        let mut g = ibv_gid::zeroed();
        // SAFETY: live context; `g` is writable.
        let rc = unsafe { (self.inner.verbs.ibv_query_gid)(self.inner.raw, port, idx, &mut g) };
        if rc != 0 {
            return Err(Error::verb(
                "ibv_query_gid",
                last_errno_or(rc),
                format!("port {port}, GID index {index}"),
            ));
        }
        // SAFETY: every bit pattern of the union is a valid `[u8; 16]`.
        Ok(Gid(unsafe { g.raw }))
    }

    /// The non-empty entries of the port's GID table, with their types (from sysfs
    /// `gid_attrs/types/<i>`) and network devices (`gid_attrs/ndevs/<i>`).
    pub fn gid_table(&self, port: u8) -> Result<Vec<GidEntry>> {
        let pa = self.query_port(port)?;
        let len = u32::try_from(pa.gid_tbl_len).unwrap_or(0);
        Ok((0..len)
            .filter_map(|i| self.gid_entry_with(port, i, pa.link_layer))
            .collect())
    }

    /// One populated GID entry, or `None` when the entry is empty or unreadable.
    fn gid_entry_with(&self, port: u8, i: u32, link: LinkLayer) -> Option<GidEntry> {
        // Unpopulated RoCE entries may fail to read; they are empty.
        let gid = self.query_gid(port, i).ok().filter(|g| !g.is_zero())?;
        let base = format!(
            "{SYSFS_INFINIBAND}/{}/ports/{port}/gid_attrs",
            self.inner.name
        );
        let ty = std::fs::read_to_string(format!("{base}/types/{i}"))
            .ok()
            .map(|s| GidType::from_sysfs(s.trim(), link))
            .unwrap_or(if link == LinkLayer::Ethernet {
                GidType::Unknown
            } else {
                GidType::Ib
            });
        let netdev = std::fs::read_to_string(format!("{base}/ndevs/{i}"))
            .ok()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty());
        Some(GidEntry {
            index: i,
            gid,
            gid_type: ty,
            netdev,
        })
    }

    /// Checks that `index` names a populated GID of `port`, and returns it. The error says how
    /// big the table is and which indexes are valid.
    pub fn check_gid_index(&self, port: u8, index: u8) -> Result<GidEntry> {
        let pa = self.query_port(port)?;
        if i64::from(index) < i64::from(pa.gid_tbl_len) {
            if let Some(e) = self.gid_entry_with(port, u32::from(index), pa.link_layer) {
                return Ok(e);
            }
        }
        // Only on failure: the whole table, for the message.
        let table = self.gid_table(port)?;
        let valid: Vec<String> = table
            .iter()
            .map(|e| format!("{} ({}, {})", e.index, e.gid, e.gid_type))
            .collect();
        let why = if i64::from(index) >= i64::from(pa.gid_tbl_len) {
            format!("the table has {} entries", pa.gid_tbl_len)
        } else {
            "that entry is empty".to_string()
        };
        Err(Error::NotFound {
            what: format!("GID index {index} on {} port {port}", self.name()),
            hint: format!(
                "{why}; populated: {}",
                if valid.is_empty() {
                    "none".to_string()
                } else {
                    valid.join(", ")
                }
            ),
        })
    }

    /// A sensible default GID index: the first RoCE v2 entry with an IPv4-mapped address,
    /// else the first RoCE v2 entry, else the first populated entry.
    pub fn default_gid_index(&self, port: u8) -> Result<u8> {
        let table = self.gid_table(port)?;
        let pick = table
            .iter()
            .find(|e| e.gid_type == GidType::RoceV2 && e.gid.ipv4_mapped().is_some())
            .or_else(|| table.iter().find(|e| e.gid_type == GidType::RoceV2))
            .or_else(|| table.first());
        match pick {
            Some(e) => u8::try_from(e.index).map_err(|_| Error::InvalidArgument {
                context: "default_gid_index",
                detail: format!("GID index {} does not fit the wire format", e.index),
            }),
            None => Err(Error::NotFound {
                what: format!("a GID on {} port {port}", self.name()),
                hint: "the GID table is empty: on RoCE, is the network device up with an \
                       address?"
                    .into(),
            }),
        }
    }

    /// The next asynchronous event, if one is pending (never blocks). The event is
    /// acknowledged before this returns. CQ overruns show up as [`AsyncEventKind::CqErr`].
    pub fn poll_async_event(&self) -> Result<Option<AsyncEvent>> {
        use std::sync::atomic::Ordering;
        if !self.inner.async_nonblocking.load(Ordering::Acquire) {
            // SAFETY: live context: reading its async_fd field.
            let fd = unsafe { (*self.inner.raw).async_fd };
            // SAFETY: fcntl on an fd libibverbs owns; we only add O_NONBLOCK, which
            // ibv_get_async_event handles (returns -1 with EAGAIN).
            let rc = unsafe {
                let fl = libc::fcntl(fd, libc::F_GETFL);
                if fl < 0 {
                    fl
                } else {
                    libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK)
                }
            };
            if rc < 0 {
                return Err(Error::verb("fcntl(async_fd, O_NONBLOCK)", last_errno(), ""));
            }
            self.inner.async_nonblocking.store(true, Ordering::Release);
        }
        let mut ev = ibv_async_event::zeroed();
        // SAFETY: live context; `ev` is writable. The fd is non-blocking.
        let rc = unsafe { (self.inner.verbs.ibv_get_async_event)(self.inner.raw, &mut ev) };
        if rc != 0 {
            let errno = last_errno();
            if errno == libc::EAGAIN || errno == libc::EWOULDBLOCK {
                return Ok(None);
            }
            return Err(Error::verb("ibv_get_async_event", errno, ""));
        }
        let kind = AsyncEventKind::from_ibv(ev.event_type);
        // SAFETY: the union member read matches the event type (verbs.h documents which
        // element each event carries); reading a pointer member only copies its address.
        let element = unsafe {
            match kind.element_kind() {
                ElementKind::Cq => AsyncElement::Cq(ev.element.cq as usize),
                ElementKind::Qp => AsyncElement::Qp {
                    ptr: ev.element.qp as usize,
                    qpn: if ev.element.qp.is_null() {
                        0
                    } else {
                        (*ev.element.qp).qp_num
                    },
                },
                ElementKind::Srq => AsyncElement::Srq(ev.element.srq as usize),
                ElementKind::Port => AsyncElement::Port(ev.element.port_num),
                ElementKind::Device => AsyncElement::Device,
            }
        };
        // SAFETY: `ev` was filled by ibv_get_async_event and is acknowledged once.
        unsafe { (self.inner.verbs.ibv_ack_async_event)(&mut ev) };
        Ok(Some(AsyncEvent { kind, element }))
    }
}

pub(crate) fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A verb that returns `rc != 0` may return `-1` and set errno, or return the errno.
pub(crate) fn last_errno_or(rc: i32) -> i32 {
    if rc > 0 {
        rc
    } else {
        match last_errno() {
            0 => libc::EINVAL,
            e => e,
        }
    }
}

/// `struct ibv_device_attr`, copied into Rust types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceAttr {
    /// Firmware version.
    pub fw_ver: String,
    /// Node GUID (host order).
    pub node_guid: u64,
    /// System image GUID (host order).
    pub sys_image_guid: u64,
    /// Largest MR.
    pub max_mr_size: u64,
    /// Supported page sizes.
    pub page_size_cap: u64,
    /// Vendor id.
    pub vendor_id: u32,
    /// Vendor part id.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// Max QPs.
    pub max_qp: i32,
    /// Max WRs per queue.
    pub max_qp_wr: i32,
    /// Capability bits.
    pub device_cap_flags: u32,
    /// Max SGEs per WR.
    pub max_sge: i32,
    /// Max SGEs per READ.
    pub max_sge_rd: i32,
    /// Max CQs.
    pub max_cq: i32,
    /// Max CQEs per CQ.
    pub max_cqe: i32,
    /// Max MRs.
    pub max_mr: i32,
    /// Max PDs.
    pub max_pd: i32,
    /// Outstanding READ/atomic as target per QP.
    pub max_qp_rd_atom: i32,
    /// Responder resources, device-wide.
    pub max_res_rd_atom: i32,
    /// Outstanding READ/atomic as initiator per QP.
    pub max_qp_init_rd_atom: i32,
    /// `enum ibv_atomic_cap`.
    pub atomic_cap: u32,
    /// Max memory windows.
    pub max_mw: i32,
    /// Max AHs.
    pub max_ah: i32,
    /// Max SRQs.
    pub max_srq: i32,
    /// Max WRs per SRQ.
    pub max_srq_wr: i32,
    /// Max SGEs per SRQ WR.
    pub max_srq_sge: i32,
    /// P_Key table size.
    pub max_pkeys: u16,
    /// Local CA ack delay.
    pub local_ca_ack_delay: u8,
    /// Physical ports.
    pub phys_port_cnt: u8,
}

impl DeviceAttr {
    fn from_raw(a: &ibv_device_attr) -> DeviceAttr {
        DeviceAttr {
            fw_ver: c_chars_to_string(&a.fw_ver),
            node_guid: u64::from_be(a.node_guid),
            sys_image_guid: u64::from_be(a.sys_image_guid),
            max_mr_size: a.max_mr_size,
            page_size_cap: a.page_size_cap,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            device_cap_flags: a.device_cap_flags,
            max_sge: a.max_sge,
            max_sge_rd: a.max_sge_rd,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_res_rd_atom: a.max_res_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            atomic_cap: a.atomic_cap,
            max_mw: a.max_mw,
            max_ah: a.max_ah,
            max_srq: a.max_srq,
            max_srq_wr: a.max_srq_wr,
            max_srq_sge: a.max_srq_sge,
            max_pkeys: a.max_pkeys,
            local_ca_ack_delay: a.local_ca_ack_delay,
            phys_port_cnt: a.phys_port_cnt,
        }
    }

    /// `atomic_cap` as `ibv_devinfo -v` prints it.
    pub fn atomic_cap_str(&self) -> &'static str {
        match self.atomic_cap {
            ffi::IBV_ATOMIC_NONE => "ATOMIC_NONE",
            ffi::IBV_ATOMIC_HCA => "ATOMIC_HCA",
            ffi::IBV_ATOMIC_GLOB => "ATOMIC_GLOB",
            _ => "ATOMIC_UNKNOWN",
        }
    }
}

/// `enum ibv_port_state`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortState {
    /// 0.
    Nop,
    /// 1: no link.
    Down,
    /// 2: link up, not configured by the SM.
    Init,
    /// 3.
    Armed,
    /// 4: usable.
    Active,
    /// 5.
    ActiveDefer,
    /// Anything else.
    Unknown(u32),
}

impl PortState {
    /// From the verbs value.
    pub fn from_ibv(v: u32) -> PortState {
        match v {
            ffi::IBV_PORT_NOP => PortState::Nop,
            ffi::IBV_PORT_DOWN => PortState::Down,
            ffi::IBV_PORT_INIT => PortState::Init,
            ffi::IBV_PORT_ARMED => PortState::Armed,
            ffi::IBV_PORT_ACTIVE => PortState::Active,
            ffi::IBV_PORT_ACTIVE_DEFER => PortState::ActiveDefer,
            x => PortState::Unknown(x),
        }
    }
    /// The verbs value.
    pub fn to_ibv(self) -> u32 {
        match self {
            PortState::Nop => ffi::IBV_PORT_NOP,
            PortState::Down => ffi::IBV_PORT_DOWN,
            PortState::Init => ffi::IBV_PORT_INIT,
            PortState::Armed => ffi::IBV_PORT_ARMED,
            PortState::Active => ffi::IBV_PORT_ACTIVE,
            PortState::ActiveDefer => ffi::IBV_PORT_ACTIVE_DEFER,
            PortState::Unknown(x) => x,
        }
    }
}

impl fmt::Display for PortState {
    /// As `ibv_port_state_str`: `PORT_ACTIVE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PortState::Nop => "PORT_NOP",
            PortState::Down => "PORT_DOWN",
            PortState::Init => "PORT_INIT",
            PortState::Armed => "PORT_ARMED",
            PortState::Active => "PORT_ACTIVE",
            PortState::ActiveDefer => "PORT_ACTIVE_DEFER",
            PortState::Unknown(_) => "invalid state",
        })
    }
}

/// The link layer of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkLayer {
    /// Not reported (older drivers; means InfiniBand).
    Unspecified,
    /// InfiniBand.
    InfiniBand,
    /// Ethernet (RoCE).
    Ethernet,
    /// Anything else.
    Unknown(u8),
}

impl LinkLayer {
    /// From `ibv_port_attr.link_layer`.
    pub fn from_ibv(v: u8) -> LinkLayer {
        match v {
            ffi::IBV_LINK_LAYER_UNSPECIFIED => LinkLayer::Unspecified,
            ffi::IBV_LINK_LAYER_INFINIBAND => LinkLayer::InfiniBand,
            ffi::IBV_LINK_LAYER_ETHERNET => LinkLayer::Ethernet,
            x => LinkLayer::Unknown(x),
        }
    }
}

impl fmt::Display for LinkLayer {
    /// As `ibv_devinfo`: `InfiniBand`, `Ethernet`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkLayer::Unspecified | LinkLayer::InfiniBand => f.write_str("InfiniBand"),
            LinkLayer::Ethernet => f.write_str("Ethernet"),
            LinkLayer::Unknown(x) => write!(f, "Unknown ({x})"),
        }
    }
}

/// `struct ibv_port_attr`, copied into Rust types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortAttr {
    /// Logical state.
    pub state: PortState,
    /// Largest MTU the port supports (raw `enum ibv_mtu`).
    pub max_mtu_raw: u32,
    /// Active MTU (raw `enum ibv_mtu`).
    pub active_mtu_raw: u32,
    /// GID table length.
    pub gid_tbl_len: i32,
    /// Capability bits.
    pub port_cap_flags: u32,
    /// Largest message.
    pub max_msg_sz: u32,
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
    /// Active width code.
    pub active_width: u8,
    /// Active speed code.
    pub active_speed: u8,
    /// Physical state code.
    pub phys_state: u8,
    /// Link layer.
    pub link_layer: LinkLayer,
}

impl PortAttr {
    fn from_raw(a: &ibv_port_attr) -> PortAttr {
        PortAttr {
            state: PortState::from_ibv(a.state),
            max_mtu_raw: a.max_mtu,
            active_mtu_raw: a.active_mtu,
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            max_vl_num: a.max_vl_num,
            sm_sl: a.sm_sl,
            subnet_timeout: a.subnet_timeout,
            active_width: a.active_width,
            active_speed: a.active_speed,
            phys_state: a.phys_state,
            link_layer: LinkLayer::from_ibv(a.link_layer),
        }
    }

    /// The active MTU, if it is one of the five IB values.
    pub fn active_mtu(&self) -> Option<Mtu> {
        Mtu::from_ibv(self.active_mtu_raw)
    }

    /// The largest MTU, if it is one of the five IB values.
    pub fn max_mtu(&self) -> Option<Mtu> {
        Mtu::from_ibv(self.max_mtu_raw)
    }

    /// Number of lanes of the active width code (1x, 4x, 8x, 12x, 2x).
    pub fn width_lanes(&self) -> Option<u32> {
        width_lanes(self.active_width)
    }

    /// Per-lane signalling rate of the active speed code, in Gb/s.
    pub fn lane_gbps(&self) -> Option<f64> {
        lane_gbps(self.active_speed)
    }

    /// The port's rate in Gb/s: lanes × per-lane rate.
    pub fn rate_gbps(&self) -> Option<f64> {
        Some(f64::from(self.width_lanes()?) * self.lane_gbps()?)
    }

    /// Physical state as `ibv_devinfo -v` prints it (`LINK_UP`).
    pub fn phys_state_str(&self) -> &'static str {
        match self.phys_state {
            1 => "SLEEP",
            2 => "POLLING",
            3 => "DISABLED",
            4 => "PORT_CONFIGURATION TRAINNING",
            5 => "LINK_UP",
            6 => "LINK_ERROR_RECOVERY",
            7 => "PHY TEST",
            _ => "invalid physical state",
        }
    }
}

/// Lanes of an `active_width` code.
pub fn width_lanes(code: u8) -> Option<u32> {
    match code {
        1 => Some(1),
        2 => Some(4),
        4 => Some(8),
        8 => Some(12),
        16 => Some(2),
        _ => None,
    }
}

/// Per-lane Gb/s of an `active_speed` code (as `ibv_devinfo` prints them).
pub fn lane_gbps(code: u8) -> Option<f64> {
    match code {
        1 => Some(2.5),
        2 => Some(5.0),
        4 | 8 => Some(10.0),
        16 => Some(14.0),
        32 => Some(25.0),
        64 => Some(50.0),
        128 => Some(100.0),
        _ => None,
    }
}

/// A GID: 16 bytes in network order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    /// All zero (an empty table entry, or "no GID").
    pub fn is_zero(&self) -> bool {
        self.0.iter().all(|&b| b == 0)
    }
    /// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`).
    pub fn ipv4_mapped(&self) -> Option<std::net::Ipv4Addr> {
        std::net::Ipv6Addr::from(self.0).to_ipv4_mapped()
    }
}

impl From<[u8; 16]> for Gid {
    fn from(b: [u8; 16]) -> Gid {
        Gid(b)
    }
}

impl fmt::Display for Gid {
    /// As `ibv_devinfo -v`: eight groups of four hex digits, `fe80:0000:...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, pair) in self.0.chunks(2).enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{:02x}{:02x}", pair[0], pair[1])?;
        }
        Ok(())
    }
}

/// The type of a GID table entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GidType {
    /// InfiniBand.
    Ib,
    /// RoCE v1 (Ethernet, no IP header).
    RoceV1,
    /// RoCE v2 (UDP/IP).
    RoceV2,
    /// sysfs did not say.
    Unknown,
}

impl GidType {
    /// From the text of sysfs `gid_attrs/types/<i>` ("IB/RoCE v1" or "RoCE v2") and the port's
    /// link layer ("IB/RoCE v1" is IB on an InfiniBand port, RoCE v1 on Ethernet).
    pub fn from_sysfs(s: &str, link: LinkLayer) -> GidType {
        match s.trim() {
            "RoCE v2" => GidType::RoceV2,
            "IB/RoCE v1" | "RoCE v1" | "IB" => {
                if link == LinkLayer::Ethernet {
                    GidType::RoceV1
                } else {
                    GidType::Ib
                }
            }
            _ => GidType::Unknown,
        }
    }
}

impl fmt::Display for GidType {
    /// As `ibv_devinfo -v` prints it after the GID.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            GidType::Ib => "IB",
            GidType::RoceV1 => "RoCE v1",
            GidType::RoceV2 => "RoCE v2",
            GidType::Unknown => "unknown",
        })
    }
}

/// One populated GID table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GidEntry {
    /// Index in the table.
    pub index: u32,
    /// The GID.
    pub gid: Gid,
    /// Its type.
    pub gid_type: GidType,
    /// The network device it belongs to (RoCE).
    pub netdev: Option<String>,
}

/// `enum ibv_event_type`, the ones this crate distinguishes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncEventKind {
    /// A CQ overran (completions were lost).
    CqErr,
    /// A QP hit a fatal error.
    QpFatal,
    /// Invalid request on a QP.
    QpReqErr,
    /// Access error on a QP.
    QpAccessErr,
    /// Communication established.
    CommEst,
    /// SQ drained.
    SqDrained,
    /// The device is dead.
    DeviceFatal,
    /// A port became active.
    PortActive,
    /// A port went down.
    PortErr,
    /// SRQ error.
    SrqErr,
    /// SRQ limit reached.
    SrqLimitReached,
    /// Last WQE reached (SRQ QP in error).
    QpLastWqeReached,
    /// GID table changed.
    GidChange,
    /// Anything else (the raw value).
    Other(u32),
}

enum ElementKind {
    Cq,
    Qp,
    Srq,
    Port,
    Device,
}

impl AsyncEventKind {
    /// From the verbs value.
    pub fn from_ibv(v: u32) -> AsyncEventKind {
        match v {
            ffi::IBV_EVENT_CQ_ERR => AsyncEventKind::CqErr,
            ffi::IBV_EVENT_QP_FATAL => AsyncEventKind::QpFatal,
            ffi::IBV_EVENT_QP_REQ_ERR => AsyncEventKind::QpReqErr,
            ffi::IBV_EVENT_QP_ACCESS_ERR => AsyncEventKind::QpAccessErr,
            ffi::IBV_EVENT_COMM_EST => AsyncEventKind::CommEst,
            ffi::IBV_EVENT_SQ_DRAINED => AsyncEventKind::SqDrained,
            ffi::IBV_EVENT_DEVICE_FATAL => AsyncEventKind::DeviceFatal,
            ffi::IBV_EVENT_PORT_ACTIVE => AsyncEventKind::PortActive,
            ffi::IBV_EVENT_PORT_ERR => AsyncEventKind::PortErr,
            ffi::IBV_EVENT_SRQ_ERR => AsyncEventKind::SrqErr,
            ffi::IBV_EVENT_SRQ_LIMIT_REACHED => AsyncEventKind::SrqLimitReached,
            ffi::IBV_EVENT_QP_LAST_WQE_REACHED => AsyncEventKind::QpLastWqeReached,
            ffi::IBV_EVENT_GID_CHANGE => AsyncEventKind::GidChange,
            x => AsyncEventKind::Other(x),
        }
    }

    fn element_kind(self) -> ElementKind {
        match self {
            AsyncEventKind::CqErr => ElementKind::Cq,
            AsyncEventKind::QpFatal
            | AsyncEventKind::QpReqErr
            | AsyncEventKind::QpAccessErr
            | AsyncEventKind::CommEst
            | AsyncEventKind::SqDrained
            | AsyncEventKind::QpLastWqeReached => ElementKind::Qp,
            AsyncEventKind::SrqErr | AsyncEventKind::SrqLimitReached => ElementKind::Srq,
            AsyncEventKind::PortActive | AsyncEventKind::PortErr | AsyncEventKind::GidChange => {
                ElementKind::Port
            }
            // Path migration, LID/PKey/SM changes and client reregister carry a QP or a
            // port; we do not look at them.
            AsyncEventKind::Other(v) if (6..=7).contains(&v) => ElementKind::Qp,
            AsyncEventKind::Other(v) if (11..=13).contains(&v) || v == 17 => ElementKind::Port,
            AsyncEventKind::DeviceFatal | AsyncEventKind::Other(_) => ElementKind::Device,
        }
    }
}

/// What an async event is about. Pointers are given as addresses, to compare with
/// `as_ptr()` of the crate's objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncElement {
    /// A CQ (`struct ibv_cq *` address).
    Cq(usize),
    /// A QP (`struct ibv_qp *` address and its QPN).
    Qp {
        /// Address.
        ptr: usize,
        /// QP number.
        qpn: u32,
    },
    /// An SRQ (`struct ibv_srq *` address).
    Srq(usize),
    /// A port number.
    Port(i32),
    /// The whole device.
    Device,
}

/// One asynchronous event (already acknowledged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncEvent {
    /// Which event.
    pub kind: AsyncEventKind,
    /// What it is about.
    pub element: AsyncElement,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gid_prints_like_ibv_devinfo() {
        let mut b = [0u8; 16];
        b[10] = 0xff;
        b[11] = 0xff;
        b[12..].copy_from_slice(&[127, 0, 0, 1]);
        let g = Gid(b);
        assert_eq!(g.to_string(), "0000:0000:0000:0000:0000:ffff:7f00:0001");
        assert_eq!(g.ipv4_mapped(), Some(std::net::Ipv4Addr::new(127, 0, 0, 1)));
        assert!(!g.is_zero());
        assert!(Gid::default().is_zero());
    }

    #[test]
    fn guid_prints_in_four_groups() {
        assert_eq!(format_guid(0x5054_00ff_fe12_3456), "5054:00ff:fe12:3456");
    }

    #[test]
    fn gid_types_follow_sysfs_and_link_layer() {
        assert_eq!(
            GidType::from_sysfs("RoCE v2\n", LinkLayer::Ethernet),
            GidType::RoceV2
        );
        assert_eq!(
            GidType::from_sysfs("IB/RoCE v1", LinkLayer::Ethernet),
            GidType::RoceV1
        );
        assert_eq!(
            GidType::from_sysfs("IB/RoCE v1", LinkLayer::InfiniBand),
            GidType::Ib
        );
        assert_eq!(
            GidType::from_sysfs("what", LinkLayer::Ethernet),
            GidType::Unknown
        );
    }

    #[test]
    fn rate_is_lanes_times_lane_speed() {
        let mut a = ibv_port_attr::zeroed();
        a.active_width = 2; // 4x
        a.active_speed = 32; // EDR 25 Gb/s per lane
        assert_eq!(PortAttr::from_raw(&a).rate_gbps(), Some(100.0));
        a.active_width = 1;
        a.active_speed = 1;
        assert_eq!(PortAttr::from_raw(&a).rate_gbps(), Some(2.5));
        a.active_width = 3; // not a width code
        assert_eq!(PortAttr::from_raw(&a).rate_gbps(), None);
    }

    #[test]
    fn port_state_names_match_ibv_port_state_str() {
        assert_eq!(PortState::from_ibv(4).to_string(), "PORT_ACTIVE");
        assert_eq!(PortState::from_ibv(1).to_string(), "PORT_DOWN");
        assert_eq!(PortState::from_ibv(9), PortState::Unknown(9));
        assert_eq!(PortState::Active.to_ibv(), 4);
    }
}
