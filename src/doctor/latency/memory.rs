//! The memory side of the latency checks: `vm.stat_interval`, the polling core and the
//! process's memory on the RDMA device's NUMA node, transparent huge pages and swap. Each
//! check is a pure function of the [`Sysfs`] tree: a file that is not there makes it a
//! `Level::Skip` saying so, nothing panics on odd input. The
//! parent module re-exports the public checks and runs them in [`super::check_latency`].

use super::super::inputs::Sysfs;
use super::super::{format_cpulist, parse_cpulist, Finding};
use super::STAT_INTERVAL_S;

/// `vm.stat_interval` at least [`STAT_INTERVAL_S`] seconds: the per-CPU vmstat update runs
/// that often on every CPU that allocated memory.
pub fn check_stat_interval(sys: &Sysfs) -> Finding {
    let Some(v) = sys.read("proc/sys/vm/stat_interval") else {
        return Finding::skip("vmstat interval", "/proc/sys/vm/stat_interval absent");
    };
    match v.parse::<u64>() {
        Ok(n) if n >= STAT_INTERVAL_S => {
            Finding::ok("vmstat interval", format!("vm.stat_interval = {n} s"))
        }
        _ => Finding::warn(
            "vmstat interval",
            format!("vm.stat_interval = {v}: the vmstat work interrupts the CPU that often"),
            format!("sysctl vm.stat_interval={STAT_INTERVAL_S}"),
        ),
    }
}

/// The polling core on the RDMA device's NUMA node, and the process's memory allowed only
/// there (`Mems_allowed_list`: the buffers are allocated on the node of the thread that
/// touches them first, or anywhere the policy allows). Without a device: skipped.
pub fn check_numa_latency(sys: &Sysfs, cpu: u32, dev: Option<&str>) -> Finding {
    let Some(dev) = dev else {
        return Finding::skip(
            "numa",
            "no device given: the RDMA device's NUMA node is not known",
        );
    };
    let node = sys
        .read(&format!("{}/device/numa_node", Sysfs::ib(dev)))
        .and_then(|s| s.parse::<i32>().ok());
    let Some(node) = node.filter(|&n| n >= 0) else {
        return Finding::skip(
            "numa",
            format!("{dev} reports no NUMA node (virtual device or a single-node host)"),
        );
    };
    let Some(near) = sys
        .read(&format!("sys/devices/system/node/node{node}/cpulist"))
        .and_then(|s| parse_cpulist(&s))
    else {
        return Finding::skip("numa", format!("node{node}/cpulist cannot be read"));
    };
    if !near.contains(&cpu) {
        return Finding::fail(
            "numa",
            format!(
                "CPU {cpu} is not on {dev}'s NUMA node {node} (CPUs {}): every DMA and \
                 doorbell crosses the interconnect",
                format_cpulist(&near)
            ),
            format!("poll on a CPU of node {node}, e.g. CPU {}", near[0]),
        );
    }
    let mems = sys
        .read("proc/self/status")
        .and_then(|t| {
            t.lines().find_map(|l| {
                l.strip_prefix("Mems_allowed_list:")
                    .map(|v| v.trim().to_string())
            })
        })
        .and_then(|v| parse_cpulist(&v));
    match mems {
        Some(m) if m.iter().any(|&n| n != node as u32) => Finding::warn(
            "numa",
            format!(
                "CPU {cpu} on {dev}'s node {node}; memory may come from nodes {}",
                format_cpulist(&m)
            ),
            format!("numactl --cpunodebind={node} --membind={node} <engine>"),
        ),
        _ => Finding::ok(
            "numa",
            format!("CPU {cpu} and the process's memory on {dev}'s NUMA node {node}"),
        ),
    }
}

/// The bracketed choice of a sysfs selector (`always [madvise] never`).
pub(super) fn chosen(s: &str) -> Option<&str> {
    s.split_once('[')?.1.split_once(']').map(|(c, _)| c)
}

/// Transparent huge pages not `always`, and no synchronous defrag (`always`).
pub fn check_thp(sys: &Sysfs) -> Finding {
    let dir = "sys/kernel/mm/transparent_hugepage";
    let Some(en) = sys.read(&format!("{dir}/enabled")) else {
        return Finding::skip("thp", "no transparent huge pages in this kernel");
    };
    let en = chosen(&en).unwrap_or("unknown").to_string();
    let defrag = sys
        .read(&format!("{dir}/defrag"))
        .and_then(|d| chosen(&d).map(str::to_string))
        .unwrap_or_else(|| "unknown".into());
    let khuge = sys.read(&format!("{dir}/khugepaged/defrag"));
    let saw = format!(
        "enabled {en}, defrag {defrag}{}",
        khuge
            .as_deref()
            .map_or(String::new(), |k| format!(", khugepaged defrag {k}"))
    );
    if en == "always" {
        Finding::warn(
            "thp",
            format!("{saw}: khugepaged and page faults may stall on compaction"),
            "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or kernel parameter \
             transparent_hugepage=madvise)",
        )
    } else if defrag == "always" {
        Finding::warn(
            "thp",
            format!("{saw}: a huge-page fault may stall on compaction"),
            "echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag",
        )
    } else if en != "never" && khuge.as_deref() == Some("1") {
        Finding::warn(
            "thp",
            format!("{saw}: khugepaged compacts memory to collapse huge pages"),
            "echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/defrag",
        )
    } else {
        Finding::ok("thp", saw)
    }
}

/// No swap device active (`/proc/swaps` has only its header).
pub fn check_swap(sys: &Sysfs) -> Finding {
    let Some(t) = sys.read("proc/swaps") else {
        return Finding::skip("swap", "/proc/swaps cannot be read");
    };
    let devs: Vec<&str> = t
        .lines()
        .skip(1)
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    if devs.is_empty() {
        Finding::ok("swap", "no swap")
    } else {
        Finding::warn(
            "swap",
            format!(
                "swap on {}: an idle page of the engine may be swapped out and fault back in \
                 on the hot path",
                devs.join(", ")
            ),
            "swapoff -a, or mlockall(MCL_CURRENT | MCL_FUTURE) in the engine",
        )
    }
}
