//! Why this host has no RDMA device, and what to do: the one reason every tool gives.
//!
//! Contract: [`no_device_reason`] reads the host (whether `ib_core` is loaded, the kernel's
//! configuration in `/proc/config.gz`, then what libibverbs and sysfs show through
//! [`control::no_device_reason`]) and returns the most specific reason, or `None` when it finds
//! none; [`why_no_device`] puts a listing error first. Nothing here prints.

use crate::control;
use crate::Error;

/// Why there is no RDMA device: a missing libibverbs (`err`, what listing the devices
/// returned) first, else [`no_device_reason`], else `err` itself, else `otherwise`.
pub fn why_no_device(err: Option<&Error>, otherwise: &str) -> String {
    match err {
        Some(e @ Error::LibraryMissing { .. }) => e.to_string(),
        Some(e) => no_device_reason().unwrap_or_else(|| e.to_string()),
        None => no_device_reason().unwrap_or_else(|| otherwise.to_string()),
    }
}

/// The most specific reason this host has no RDMA device, and what to do: a kernel built
/// without RDMA support first (no driver can be loaded then), else what libibverbs and
/// sysfs show ([`control::no_device_reason`]). The one reason every command gives.
pub fn no_device_reason() -> Option<String> {
    let no_ib_core = !std::path::Path::new("/sys/module/ib_core").exists();
    if no_ib_core && kernel_config_lacks_infiniband() {
        return Some(
            "this kernel is built without RDMA support (CONFIG_INFINIBAND is not set in \
             /proc/config.gz), so no device can appear and no driver can be loaded; use a \
             (virtual) machine whose kernel has it, where soft-RoCE (rdma_rxe) gives a device"
                .to_string(),
        );
    }
    control::no_device_reason()
}

/// True when /proc/config.gz says `# CONFIG_INFINIBAND is not set`.
fn kernel_config_lacks_infiniband() -> bool {
    let out = std::process::Command::new("gzip")
        .args(["-dc", "/proc/config.gz"])
        .stderr(std::process::Stdio::null())
        .output();
    match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .any(|l| l.trim() == "# CONFIG_INFINIBAND is not set"),
        _ => false,
    }
}
