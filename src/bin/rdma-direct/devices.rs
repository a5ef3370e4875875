//! `rdma-direct devices`: the RDMA devices libibverbs sees, like `ibv_devices`.

use rdma_direct::verbs::{self, Device};
use rdma_direct::Error;

const USAGE: &str = "usage: rdma-direct devices\n\nLists RDMA devices and their node GUIDs \
                     (like ibv_devices).\n";

pub fn run(args: &[String]) -> i32 {
    if let Some(a) = args.first() {
        if a == "-h" || a == "--help" {
            print!("{USAGE}");
            return 0;
        }
        eprintln!("rdma-direct devices: unexpected argument '{a}'\n\n{USAGE}");
        return 2;
    }
    let list = match Device::list() {
        Ok(l) => l,
        Err(e) => {
            report_no_devices(Some(&e));
            return 1;
        }
    };
    if list.is_empty() {
        report_no_devices(None);
        return 1;
    }
    println!("    {:<16}\t   node GUID", "device");
    println!("    {:<16}\t----------------", "------");
    for d in &list {
        println!("    {:<16}\t{:016x}", d.name, d.node_guid);
    }
    0
}

/// Says plainly that there is no device, and why where it can tell, on stderr.
pub fn report_no_devices(err: Option<&Error>) {
    match err {
        Some(e @ Error::LibraryMissing { .. }) => {
            eprintln!("rdma-direct: no RDMA devices: {e}");
        }
        Some(e) => {
            eprintln!("rdma-direct: no RDMA devices found");
            match kernel_reason() {
                Some(why) => eprintln!("  why: {why}"),
                None => eprintln!("  why: {e}"),
            }
        }
        None => {
            eprintln!("rdma-direct: no RDMA devices found");
            if let Some(why) = kernel_reason() {
                eprintln!("  why: {why}");
            }
        }
    }
    eprintln!(
        "  without an RDMA NIC, run the device tests in the soft-RoCE guest: tests/guest/run"
    );
}

/// The most specific reason this host has no RDMA device.
fn kernel_reason() -> Option<String> {
    let no_ib_core = !std::path::Path::new("/sys/module/ib_core").exists();
    if no_ib_core && kernel_config_lacks_infiniband() {
        return Some(
            "this kernel is built without RDMA support (CONFIG_INFINIBAND is not set in \
             /proc/config.gz), so no device can appear"
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
