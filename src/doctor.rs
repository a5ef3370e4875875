//! Diagnostics: the troubleshooting order as checks that return findings.
//!
//! When latency or bandwidth is not what it should be, look from the bottom up, and fix each
//! layer before tuning the next:
//!
//! 1. **physical link**: port state and physical state, the rate it trained at, a subnet
//!    manager on InfiniBand;
//! 2. **MTU**: the active MTU against the port's maximum, on RoCE the netdev MTU it derives
//!    from, and the peer's MTU (the path MTU is the smaller of the two);
//! 3. **QP capacities**: work requests, SGEs, CQEs, inline bytes, atomics, and what they mean
//!    for sizing; the largest message;
//! 4. **locked memory**: `RLIMIT_MEMLOCK`, which every `ibv_reg_mr` counts against;
//! 5. **CPU affinity / NUMA**: the device's node against the CPUs this process may run on;
//! 6. **PCIe**: the link width and speed the card trained at, against its maximum and
//!    against the port's rate (a x16 card in a x8 slot gets half the bandwidth);
//! 7. **pitfalls this crate prevents by construction** (reported only because they are true
//!    of [`crate::control`]: every `ibv_modify_qp` attribute starts zeroed; `connect` takes the
//!    smaller MTU of the two endpoints).
//!
//! ## Testability
//!
//! The checks are pure functions of plain inputs: a [`Sysfs`] root (`/` on a real host, a
//! temporary tree in tests), the verbs query results ([`PortAttr`], [`DeviceCaps`]), and the
//! process facts ([`HostFacts`], read from `proc/self/{limits,status}` below the same root:
//! the `getrlimit` and `sched_getaffinity` values, without unsafe code). Only
//! [`HostFacts::probe`] and [`probe_device`] touch the running system. Every check returns
//! [`Finding`]s (data: a [`Level`], the check's name, what it saw, the fix); none panics on
//! odd input (a missing or unreadable sysfs file becomes a [`Level::Skip`] with the reason).
//! [`check_port`] and [`check_host`] run the whole order; the findings are grouped into
//! [`Section`]s. Printing them is the caller's business; [`report`] (feature `report`) words
//! them as text, one line per finding, or as JSON.
//!
//! ## Layout
//!
//! [`latency`] holds the tuning checks for the CPU that will poll (`doctor --latency`).
//! [`no_device`] says why a host has no RDMA device (the reason every tool gives).
//!
//! This file holds the findings ([`Level`], [`Finding`]) and their grouping ([`Section`]);
//! the inputs and their probes are in `inputs`, the checks in `checks`, both re-exported
//! here.
//!
//! [`PortAttr`]: crate::control::PortAttr

mod checks;
mod inputs;
pub mod latency;
pub mod no_device;
pub mod procfs;
#[cfg(feature = "report")]
pub mod report;

pub use checks::{
    check_caps, check_host, check_link, check_memlock, check_mtu, check_numa, check_pcie,
    check_poll_barrier, check_port, format_cpulist, parse_cpulist, pcie_lane_gbps, pitfalls,
    port_netdev, roce_mtu_for_netdev, MEMLOCK_WARN_BYTES, ROCE_HEADER_BYTES,
};
pub use inputs::{
    parse_memlock_limit, probe_device, probe_inline, DeviceCaps, HostFacts, MemlockLimit,
    PortFacts, Sysfs,
};

/// The outcome of one check.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Looked, and it is fine.
    Ok,
    /// Not looked at: the check does not apply or its input is missing (e.g. PCIe width of a
    /// virtual device, which has no device/ link in sysfs).
    Skip,
    /// Works, but slower or smaller than it could be.
    Warn,
    /// Broken: fix it before tuning anything above it.
    Fail,
}

/// The result of one check: what it saw and, when something is wrong, what to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The outcome.
    pub level: Level,
    /// The check's name: `link`, `mtu`, `pcie width`, ...
    pub check: &'static str,
    /// What it saw (for [`Level::Skip`]: why it did not look).
    pub saw: String,
    /// What to do (for [`Level::Warn`] and [`Level::Fail`]), else `None`.
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: &'static str, saw: impl Into<String>) -> Finding {
        Finding {
            level: Level::Ok,
            check,
            saw: saw.into(),
            fix: None,
        }
    }
    fn skip(check: &'static str, why: impl Into<String>) -> Finding {
        Finding {
            level: Level::Skip,
            check,
            saw: why.into(),
            fix: None,
        }
    }
    fn warn(check: &'static str, saw: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            level: Level::Warn,
            check,
            saw: saw.into(),
            fix: Some(fix.into()),
        }
    }
    fn fail(check: &'static str, saw: impl Into<String>, fix: impl Into<String>) -> Finding {
        Finding {
            level: Level::Fail,
            check,
            saw: saw.into(),
            fix: Some(fix.into()),
        }
    }
}

/// The findings for one scope: `host`, or a device port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// `host`, or `rxe0 port 1 (Ethernet)`.
    pub title: String,
    /// Device name, if a device section.
    pub device: Option<String>,
    /// Port number, if a device section.
    pub port: Option<u8>,
    /// The checks, in order.
    pub findings: Vec<Finding>,
}

impl Section {
    /// The device section for `p`.
    pub fn for_port(p: &PortFacts, findings: Vec<Finding>) -> Section {
        Section {
            title: format!("{} port {} ({})", p.device, p.port, p.attr.link_layer),
            device: Some(p.device.clone()),
            port: Some(p.port),
            findings,
        }
    }
}

/// How many findings of `level` the sections hold.
pub fn count(sections: &[Section], level: Level) -> usize {
    sections
        .iter()
        .flat_map(|s| &s.findings)
        .filter(|f| f.level == level)
        .count()
}
