//! Devices and contexts: the device list, opening a device, device attributes, and the errno
//! helpers the other control-path modules share. Ports, GIDs and async events are queried on
//! a [`Context`] too; they live in `port.rs`, `gid.rs` and `events.rs`.

use crate::error::{Error, Result};
use crate::ffi::{self, ibv_context, ibv_device_attr};
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
    /// The transport as `ibv_devinfo` prints it: `InfiniBand` (also RoCE), `iWARP`, or
    /// `unknown`.
    pub fn transport_str(&self) -> &'static str {
        match self.transport_type {
            ffi::IBV_TRANSPORT_IB => "InfiniBand",
            ffi::IBV_TRANSPORT_IWARP => "iWARP",
            _ => "unknown",
        }
    }

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

/// Load libibverbs (and with `mlx5` libmlx5), every entry point resolved; the files loaded
/// (`RDMA_DIRECT_LIBIBVERBS` / `RDMA_DIRECT_LIBMLX5`, else the sonames).
pub fn loaded_libraries(mlx5: bool) -> Result<Vec<String>> {
    ffi::verbs()?;
    let mut v = vec![ffi::loader::libibverbs_path()];
    if mlx5 {
        ffi::mlx5()?;
        v.push(ffi::loader::libmlx5_path());
    }
    Ok(v)
}

/// Why there may be no RDMA device on this host, if something can tell: no
/// `/sys/class/infiniband`, no `ib_core` module (and, then, whether the running kernel's
/// modules directory could provide one), no `/dev/infiniband`. `None` when all of these exist
/// (then the device list really is empty, or permissions are the problem).
pub fn no_device_reason() -> Option<String> {
    let sys = std::path::Path::new(SYSFS_INFINIBAND);
    let core = std::path::Path::new("/sys/module/ib_core");
    if !sys.exists() {
        if !core.exists() {
            let release = kernel_release();
            let modules = release.as_deref().map_or(Modules::Unknown, |r| {
                Modules::of(&std::path::Path::new("/lib/modules").join(r))
            });
            return Some(no_rdma_support(release.as_deref(), modules));
        }
        return Some(
            "no /sys/class/infiniband: no RDMA driver is bound (e.g. `modprobe rdma_rxe; \
             rdma link add rxe0 type rxe netdev lo` for soft-RoCE)"
                .into(),
        );
    }
    let empty = std::fs::read_dir(sys)
        .map(|mut d| d.next().is_none())
        .unwrap_or(true);
    if empty {
        return Some(
            "/sys/class/infiniband is empty: no RDMA device is configured (for soft-RoCE: \
             `rdma link add rxe0 type rxe netdev <if>`)"
                .into(),
        );
    }
    if !std::path::Path::new("/dev/infiniband").exists() {
        return Some("no /dev/infiniband: ib_uverbs is not loaded (`modprobe ib_uverbs`)".into());
    }
    None
}

/// The running kernel's release (`uname -r`), if `uname` answers.
fn kernel_release() -> Option<String> {
    // SAFETY: `utsname` is plain bytes; all zero is a valid value for `uname` to fill.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable `utsname`.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let bytes: Vec<u8> = u
        .release
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// What the running kernel's modules directory (`/lib/modules/<release>`) says about RDMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Modules {
    /// No such directory: nothing can be loaded.
    NoDir,
    /// Its index (`modules.dep`, `modules.builtin`) names no `ib_core`: the kernel was built
    /// without RDMA support, so no driver can be loaded.
    NoIbCore,
    /// `ib_core` is there (a module or built in), or the directory has no index to tell.
    Unknown,
}

impl Modules {
    /// Read `dir` (a kernel's modules directory).
    fn of(dir: &std::path::Path) -> Modules {
        if !dir.is_dir() {
            return Modules::NoDir;
        }
        let mut indexed = false;
        for index in ["modules.dep", "modules.builtin"] {
            let Ok(text) = std::fs::read_to_string(dir.join(index)) else {
                continue;
            };
            indexed = true;
            // A line names the module's path, e.g. `kernel/drivers/infiniband/core/ib_core.ko:`
            // (possibly compressed: `ib_core.ko.xz`), or in modules.builtin `.../ib_core.ko`.
            if text.lines().any(|l| {
                let path = l.split(':').next().unwrap_or("");
                path.rsplit('/')
                    .next()
                    .unwrap_or("")
                    .starts_with("ib_core.ko")
            }) {
                return Modules::Unknown;
            }
        }
        if indexed {
            Modules::NoIbCore
        } else {
            Modules::Unknown
        }
    }
}

/// The reason for a kernel with no RDMA support loaded (no `/sys/class/infiniband`, no
/// `ib_core`), given what its modules directory says (`release`: `uname -r`, if known).
/// Where nothing can be loaded the text does not send the reader to `modprobe`.
fn no_rdma_support(release: Option<&str>, modules: Modules) -> String {
    const ELSEWHERE: &str = "no driver can be loaded on this kernel; use a (virtual) machine \
                             whose kernel has RDMA support (CONFIG_INFINIBAND; soft-RoCE, \
                             rdma_rxe, gives a device without hardware)";
    match (release, modules) {
        (Some(r), Modules::NoDir) => format!(
            "the kernel has no RDMA support loaded (no /sys/class/infiniband, no \
             /sys/module/ib_core) and no modules to load it from (no /lib/modules/{r}): \
             {ELSEWHERE}"
        ),
        (Some(r), Modules::NoIbCore) => format!(
            "the kernel has no RDMA support loaded (no /sys/class/infiniband, no \
             /sys/module/ib_core) and none among its modules (/lib/modules/{r} has no \
             ib_core, built in or as a module): {ELSEWHERE}"
        ),
        _ => "the kernel has no RDMA support loaded (no /sys/class/infiniband, no \
              /sys/module/ib_core): load ib_core and a driver (e.g. `modprobe rdma_rxe; \
              rdma link add rxe0 type rxe netdev lo` for soft-RoCE), or use a (virtual) \
              machine with RDMA support"
            .into(),
    }
}

pub(crate) struct ContextInner {
    pub(crate) raw: *mut ibv_context,
    pub(crate) verbs: &'static ffi::Verbs,
    pub(crate) name: String,
    pub(super) async_nonblocking: std::sync::atomic::AtomicBool,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_names_match_ibv_devinfo() {
        let mut d = Device {
            name: "rxe0".into(),
            node_guid: 0,
            node_type: 1,
            transport_type: ffi::IBV_TRANSPORT_IB,
            dev_name: "uverbs0".into(),
            ibdev_path: String::new(),
        };
        assert_eq!(d.transport_str(), "InfiniBand");
        d.transport_type = ffi::IBV_TRANSPORT_IWARP;
        assert_eq!(d.transport_str(), "iWARP");
        d.transport_type = 7;
        assert_eq!(d.transport_str(), "unknown");
    }

    #[test]
    fn a_kernel_without_modules_is_not_sent_to_modprobe() {
        let none = no_rdma_support(Some("6.18.44-vm"), Modules::NoDir);
        assert!(none.contains("no /lib/modules/6.18.44-vm"), "{none}");
        assert!(none.contains("no driver can be loaded"), "{none}");
        assert!(!none.contains("modprobe"), "{none}");
        let built_without = no_rdma_support(Some("6.18.44-vm"), Modules::NoIbCore);
        assert!(
            built_without.contains("/lib/modules/6.18.44-vm has no ib_core"),
            "{built_without}"
        );
        assert!(
            built_without.contains("no driver can be loaded"),
            "{built_without}"
        );
        assert!(!built_without.contains("modprobe"), "{built_without}");
        for (release, modules) in [
            (Some("6.1.0-27-amd64"), Modules::Unknown),
            (None, Modules::Unknown),
            (None, Modules::NoDir),
        ] {
            let load = no_rdma_support(release, modules);
            assert!(load.contains("`modprobe rdma_rxe;"), "{load}");
            assert!(!load.contains("/lib/modules"), "{load}");
        }
        // The running kernel's release is what `uname -r` prints.
        let r = kernel_release().expect("uname answers");
        assert!(!r.is_empty() && !r.contains('\0'), "{r:?}");
    }

    #[test]
    fn a_modules_directory_says_whether_ib_core_can_be_loaded() {
        let dir = std::env::temp_dir().join(format!("rdma-direct-modules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(Modules::of(&dir), Modules::NoDir);
        std::fs::create_dir_all(&dir).unwrap();
        // No index: nothing to tell from.
        assert_eq!(Modules::of(&dir), Modules::Unknown);
        let dep = dir.join("modules.dep");
        let builtin = dir.join("modules.builtin");
        std::fs::write(&dep, "kernel/fs/ext4/ext4.ko: kernel/fs/mbcache.ko\n").unwrap();
        assert_eq!(Modules::of(&dir), Modules::NoIbCore);
        // A module whose name only starts like it is not it.
        std::fs::write(&builtin, "kernel/drivers/net/ib_core_x.ko\n").unwrap();
        assert_eq!(Modules::of(&dir), Modules::NoIbCore);
        for (file, line) in [
            (&dep, "kernel/drivers/infiniband/core/ib_core.ko.xz:\n"),
            (
                &dep,
                "kernel/drivers/infiniband/core/ib_core.ko: kernel/net/ipv6/ipv6.ko\n",
            ),
            (&builtin, "kernel/drivers/infiniband/core/ib_core.ko\n"),
        ] {
            std::fs::write(&dep, "kernel/fs/ext4/ext4.ko:\n").unwrap();
            std::fs::write(&builtin, "").unwrap();
            std::fs::write(file, line).unwrap();
            assert_eq!(Modules::of(&dir), Modules::Unknown, "{line}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn guid_prints_in_four_groups() {
        assert_eq!(format_guid(0x5054_00ff_fe12_3456), "5054:00ff:fe12:3456");
    }
}
