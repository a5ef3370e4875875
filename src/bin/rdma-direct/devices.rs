//! `rdma-direct devices`: the RDMA devices libibverbs sees, like `ibv_devices`, then the
//! software mlx5 device (`sim0`), which is always there. Without an RDMA device a note on
//! stderr says why ([`no_device_reason`], the one reason every command gives).

use rdma_direct::verbs::{self, Device};
use rdma_direct::Error;

use super::provider::SIM_DEVICE;

const USAGE: &str = "usage: rdma-direct devices\n\nLists RDMA devices and their node GUIDs \
                     (like ibv_devices), then the software mlx5 device sim0.\n";

pub fn run(args: &[String]) -> i32 {
    if let Some(a) = args.first() {
        if a == "-h" || a == "--help" {
            print!("{USAGE}");
            return 0;
        }
        let what = if a.starts_with('-') {
            "unknown option"
        } else {
            "unexpected argument"
        };
        return crate::usage_error("devices", &format!("{what} '{a}'"));
    }
    let list = match Device::list() {
        Ok(l) => {
            if l.is_empty() {
                note_no_devices(None);
            }
            l
        }
        Err(e) => {
            note_no_devices(Some(&e));
            Vec::new()
        }
    };
    println!("    {:<16}\t   node GUID", "device");
    println!("    {:<16}\t----------------", "------");
    for d in &list {
        println!("    {:<16}\t{:016x}", d.name, d.node_guid);
    }
    println!("    {SIM_DEVICE:<16}\t(software mlx5 device in this process, not hardware)");
    0
}

/// Says plainly, on one line of stderr, that there is no RDMA device but the software one,
/// and why where it can tell (`err`: what listing the devices returned).
pub fn note_no_devices(err: Option<&Error>) {
    let why = match err {
        Some(e @ Error::LibraryMissing { .. }) => e.to_string(),
        Some(e) => no_device_reason().unwrap_or_else(|| e.to_string()),
        None => no_device_reason().unwrap_or_else(|| "libibverbs lists no device".into()),
    };
    eprintln!("rdma-direct: no RDMA device but the software device {SIM_DEVICE}: {why}");
}

/// The most specific reason this host has no RDMA device, and what to do: a kernel built
/// without RDMA support first (no driver can be loaded then), else what libibverbs and
/// sysfs show ([`verbs::no_device_reason`]). The one reason every command gives.
pub fn no_device_reason() -> Option<String> {
    let no_ib_core = !std::path::Path::new("/sys/module/ib_core").exists();
    if no_ib_core && kernel_config_lacks_infiniband() {
        return Some(
            "this kernel is built without RDMA support (CONFIG_INFINIBAND is not set in \
             /proc/config.gz), so no device can appear and no driver can be loaded; run the \
             device tests in the soft-RoCE guest (tests/guest/run)"
                .to_string(),
        );
    }
    verbs::no_device_reason()
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
