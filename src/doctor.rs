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
//!    of [`crate::verbs`]: every `ibv_modify_qp` attribute starts zeroed; `connect` takes the
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
//! [`Section`]s. Printing them is the caller's business (`rdma-direct doctor` prints one line
//! per finding, or JSON).

use crate::endpoint::Mtu;
use crate::error::Result;
use crate::ffi;
use crate::providers::{QpCaps, QpConfig, QpType};
use crate::verbs::{Context, Cq, DeviceAttr, LinkLayer, Pd, PortAttr, PortState, Qp};
use std::path::PathBuf;

/// Bytes of RoCE v2 headers an IB MTU must leave room for inside the netdev MTU: IP (GRH) 40,
/// UDP 8, BTH 12, and the largest extended headers (XRC 4, atomic 28) and ICRC 4, as the
/// kernel counts them (`iboe_get_mtu`). rxe counts a few bytes less; the result is the same
/// except within 16 bytes of a boundary.
pub const ROCE_HEADER_BYTES: u32 = 96;

/// Below this locked-memory limit (for a process without `CAP_IPC_LOCK`) doctor warns.
pub const MEMLOCK_WARN_BYTES: u64 = 64 << 20;

/// `CAP_IPC_LOCK`: bypasses `RLIMIT_MEMLOCK` for pinning, `ibv_reg_mr` included.
const CAP_IPC_LOCK_BIT: u32 = 14;

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

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

/// A sysfs (and `/sys/devices/system/node`) tree below a root: `/` on a real host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    /// The tree below `root` (`root/sys/class/infiniband/...`).
    pub fn new(root: impl Into<PathBuf>) -> Sysfs {
        Sysfs { root: root.into() }
    }

    /// The running system's sysfs.
    pub fn system() -> Sysfs {
        Sysfs::new("/")
    }

    /// `root/<rel>`.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel.trim_start_matches('/'))
    }

    /// The trimmed contents of `root/<rel>`, or `None` if it cannot be read or is empty.
    pub fn read(&self, rel: &str) -> Option<String> {
        let s = std::fs::read_to_string(self.path(rel)).ok()?;
        let t = s.trim();
        (!t.is_empty()).then(|| t.to_string())
    }

    /// `root/<rel>` exists (following symlinks).
    pub fn exists(&self, rel: &str) -> bool {
        self.path(rel).exists()
    }

    fn ib(dev: &str) -> String {
        format!("sys/class/infiniband/{dev}")
    }
}

/// What the device can do, from `ibv_query_device` plus the inline probe.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceCaps {
    /// Work requests per queue.
    pub max_qp_wr: i32,
    /// SGEs per work request.
    pub max_sge: i32,
    /// Entries per CQ.
    pub max_cqe: i32,
    /// `enum ibv_atomic_cap`.
    pub atomic_cap: u32,
    /// The inline bytes a probe QP was granted, `None` if the probe did not run or failed.
    pub max_inline: Option<u32>,
}

impl DeviceCaps {
    /// The fields of `a`, with `max_inline` from a separate probe.
    pub fn from_attr(a: &DeviceAttr, max_inline: Option<u32>) -> DeviceCaps {
        DeviceCaps {
            max_qp_wr: a.max_qp_wr,
            max_sge: a.max_sge,
            max_cqe: a.max_cqe,
            atomic_cap: a.atomic_cap,
            max_inline,
        }
    }
}

/// One port of one device, as the verbs queries describe it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortFacts {
    /// Device name (`mlx5_0`, `rxe0`): the directory under `/sys/class/infiniband`.
    pub device: String,
    /// Port number (from 1).
    pub port: u8,
    /// `ibv_query_port`.
    pub attr: PortAttr,
    /// `ibv_query_device` and the inline probe.
    pub caps: DeviceCaps,
}

/// `RLIMIT_MEMLOCK`: the bytes a process without `CAP_IPC_LOCK` may pin, MRs included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemlockLimit {
    /// Soft limit in bytes (the one enforced); `None` = unlimited.
    pub soft: Option<u64>,
    /// Hard limit in bytes (how far `ulimit -l` may raise the soft one); `None` = unlimited.
    pub hard: Option<u64>,
}

/// Facts about this process and its limits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostFacts {
    /// `RLIMIT_MEMLOCK`, `None` if it could not be read.
    pub memlock: Option<MemlockLimit>,
    /// Bytes this process has pinned already (`VmPin`: registered MRs, queue buffers): the
    /// kernel counts every new registration on top of it against the soft limit.
    pub pinned_now: u64,
    /// Effective user id (`u32::MAX` if unknown).
    pub euid: u32,
    /// `CAP_IPC_LOCK` is in the effective set: the limit does not apply.
    pub cap_ipc_lock: bool,
    /// The CPUs this process may run on (its affinity mask), ascending; empty if unknown.
    pub allowed_cpus: Vec<u32>,
}

impl HostFacts {
    /// This process's facts, from `/proc/self/limits` (what `getrlimit` returns) and
    /// `/proc/self/status` (`Uid`, `CapEff`, `VmPin`, `Cpus_allowed_list`: the
    /// `sched_getaffinity` mask) below `sys`'s root.
    pub fn read(sys: &Sysfs) -> HostFacts {
        let status = sys.read("proc/self/status").unwrap_or_default();
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(str::trim)
        };
        let cap_ipc_lock = field("CapEff:")
            .and_then(|v| u64::from_str_radix(v, 16).ok())
            .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK_BIT) != 0);
        // Uid: real, effective, saved, fs.
        let euid = field("Uid:")
            .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
            .unwrap_or(u32::MAX);
        let pinned = field("VmPin:")
            .and_then(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .map_or(0, |kib| kib * 1024);
        HostFacts {
            memlock: sys
                .read("proc/self/limits")
                .and_then(|l| parse_memlock_limit(&l)),
            pinned_now: pinned,
            euid,
            cap_ipc_lock,
            allowed_cpus: field("Cpus_allowed_list:")
                .and_then(parse_cpulist)
                .unwrap_or_default(),
        }
    }

    /// The running process: [`HostFacts::read`] of `/`.
    pub fn probe() -> HostFacts {
        HostFacts::read(&Sysfs::system())
    }
}

/// `RLIMIT_MEMLOCK` from the text of `/proc/<pid>/limits` (the `Max locked memory` row:
/// soft, hard, in bytes or `unlimited`).
pub fn parse_memlock_limit(limits: &str) -> Option<MemlockLimit> {
    let row = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max locked memory"))?;
    let mut it = row.split_whitespace();
    let mut val = || -> Option<Option<u64>> {
        match it.next()? {
            "unlimited" => Some(None),
            v => v.parse().ok().map(Some),
        }
    };
    Some(MemlockLimit {
        soft: val()?,
        hard: val()?,
    })
}

/// Creates a PD, a CQ and RC QPs on `ctx` asking for 512, 256, ... inline
/// bytes until one is granted, and returns what was granted (`None` if even 0 failed).
pub fn probe_inline(ctx: &Context) -> Option<u32> {
    let pd = Pd::new(ctx).ok()?;
    let cq = Cq::new(ctx, 4).ok()?;
    [512u32, 256, 128, 64, 32, 0].into_iter().find_map(|ask| {
        let cfg = QpConfig {
            qp_type: QpType::Rc,
            caps: QpCaps {
                max_send_wr: 1,
                max_recv_wr: 1,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: ask,
            },
            sq_sig_all: false,
        };
        Qp::new(&pd, &cq, &cq, None, &cfg)
            .ok()
            .map(|qp| qp.caps().max_inline_data)
    })
}

/// Queries every port of `ctx` (or only `only_port`) and probes inline capacity once.
pub fn probe_device(ctx: &Context, only_port: Option<u8>) -> Result<Vec<PortFacts>> {
    let a = ctx.query_device()?;
    let ports: Vec<u8> = match only_port {
        Some(p) if p >= 1 && p <= a.phys_port_cnt => vec![p],
        Some(p) => {
            return Err(crate::Error::NotFound {
                what: format!("port {p}"),
                hint: format!("{} has ports 1..={}", ctx.name(), a.phys_port_cnt),
            })
        }
        None => (1..=a.phys_port_cnt).collect(),
    };
    let caps = DeviceCaps::from_attr(&a, probe_inline(ctx));
    ports
        .into_iter()
        .map(|p| {
            Ok(PortFacts {
                device: ctx.name().to_string(),
                port: p,
                attr: ctx.query_port(p)?,
                caps,
            })
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// The checks
// ---------------------------------------------------------------------------------------------

/// Everything doctor says about one port, in the troubleshooting order.
pub fn check_port(
    sys: &Sysfs,
    p: &PortFacts,
    host: &HostFacts,
    peer_mtu: Option<Mtu>,
) -> Vec<Finding> {
    let mut out = check_link(sys, p);
    out.extend(check_mtu(sys, p, peer_mtu));
    out.extend(check_caps(&p.attr, &p.caps));
    out.push(check_memlock(host));
    out.push(check_numa(sys, &p.device, &host.allowed_cpus));
    out.extend(check_pcie(sys, &p.device, p.attr.rate_gbps()));
    out.extend(pitfalls());
    out
}

/// Checks that need no device: the locked-memory limit.
pub fn check_host(host: &HostFacts) -> Vec<Finding> {
    vec![check_memlock(host)]
}

fn is_ib(l: LinkLayer) -> bool {
    matches!(l, LinkLayer::InfiniBand | LinkLayer::Unspecified)
}

/// Step 1: Physical link: state, rate, subnet manager.
pub fn check_link(sys: &Sysfs, p: &PortFacts) -> Vec<Finding> {
    let a = &p.attr;
    let mut out = Vec::new();
    let saw = format!(
        "{}, phys {} ({})",
        a.state,
        a.phys_state_str(),
        a.phys_state
    );
    if a.state == PortState::Active && a.phys_state == 5 {
        out.push(Finding::ok("link", saw));
    } else {
        out.push(Finding::fail(
            "link",
            saw,
            "check cable/switch port before tuning software (`ibstat`; on RoCE `ip link` and \
             `ethtool <netdev>` error counters)",
        ));
    }

    let port_dir = format!("{}/ports/{}", Sysfs::ib(&p.device), p.port);
    let sysfs_rate = sys.read(&format!("{port_dir}/rate"));
    match (a.rate_gbps(), a.width_lanes()) {
        _ if a.state != PortState::Active => out.push(Finding::skip(
            "link rate",
            "the port is not active: its rate means nothing until the link is up",
        )),
        (Some(rate), Some(lanes)) => {
            let mut saw = format!(
                "{rate} Gb/s ({lanes}X x {} Gb/s)",
                a.lane_gbps().unwrap_or(0.0)
            );
            if let Some(r) = &sysfs_rate {
                saw.push_str(&format!("; sysfs rate \"{r}\""));
            }
            let sysfs_gbps = sysfs_rate
                .as_deref()
                .and_then(|r| r.split_whitespace().next()?.parse::<f64>().ok());
            if is_ib(a.link_layer) && lanes < 4 && a.state == PortState::Active {
                out.push(Finding::warn(
                    "link rate",
                    saw,
                    format!(
                        "an InfiniBand HCA port trains at 4X (2X on split cables): {lanes}X \
                         means a bad cable or switch port, {} of the bandwidth",
                        if lanes == 1 { "a quarter" } else { "part" }
                    ),
                ));
            } else if sysfs_gbps.is_some_and(|s| (s - rate).abs() > 0.5) {
                out.push(Finding::warn(
                    "link rate",
                    saw,
                    "sysfs and ibv_query_port disagree on the rate: the link is renegotiating; \
                     check it again, and the cable",
                ));
            } else {
                saw.push_str(
                    "; the supported maximum is not exposed by verbs or sysfs: compare with \
                     the switch port (or `ethtool` link modes on RoCE)",
                );
                out.push(Finding::ok("link rate", saw));
            }
        }
        _ => out.push(Finding::warn(
            "link rate",
            format!(
                "unknown width code {} / speed code {}{}",
                a.active_width,
                a.active_speed,
                sysfs_rate
                    .map(|r| format!("; sysfs rate \"{r}\""))
                    .unwrap_or_default()
            ),
            "the link did not report a valid rate: check cable and switch port",
        )),
    }

    if is_ib(a.link_layer) {
        if a.sm_lid == 0 || a.lid == 0 {
            out.push(Finding::fail(
                "subnet manager",
                format!("sm_lid {}, port lid {}", a.sm_lid, a.lid),
                "no subnet manager has configured this port: start opensm (on a host or \
                 the switch) and wait for PORT_ACTIVE",
            ));
        } else {
            out.push(Finding::ok(
                "subnet manager",
                format!("sm_lid {}, port lid {}", a.sm_lid, a.lid),
            ));
        }
    } else {
        out.push(Finding::skip(
            "subnet manager",
            format!(
                "{} link layer: RoCE has no subnet manager (addressing is by GID)",
                a.link_layer
            ),
        ));
    }
    out
}

/// The largest IB MTU whose packets fit a netdev MTU of `netdev_mtu` bytes.
pub fn roce_mtu_for_netdev(netdev_mtu: u32) -> Option<Mtu> {
    let room = netdev_mtu.checked_sub(ROCE_HEADER_BYTES)?;
    [4096u32, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| m <= room)
        .and_then(Mtu::from_bytes)
}

/// The netdev behind a port's GIDs (`ports/<p>/gid_attrs/ndevs/<i>`, first one set).
pub fn port_netdev(sys: &Sysfs, dev: &str, port: u8) -> Option<String> {
    let dir = sys.path(&format!("{}/ports/{port}/gid_attrs/ndevs", Sysfs::ib(dev)));
    let mut idx: Vec<u32> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    idx.sort_unstable();
    idx.into_iter().find_map(|i| {
        sys.read(&format!(
            "{}/ports/{port}/gid_attrs/ndevs/{i}",
            Sysfs::ib(dev)
        ))
    })
}

fn mtu_str(raw: u32) -> String {
    match Mtu::from_ibv(raw) {
        Some(m) => m.bytes().to_string(),
        None => format!("invalid ({raw})"),
    }
}

/// Step 2: MTU: active against max, the RoCE netdev MTU, the peer's.
pub fn check_mtu(sys: &Sysfs, p: &PortFacts, peer_mtu: Option<Mtu>) -> Vec<Finding> {
    let a = &p.attr;
    let mut out = Vec::new();
    let (active, max) = (a.active_mtu(), a.max_mtu());
    let saw = format!(
        "active_mtu {} of max_mtu {}",
        mtu_str(a.active_mtu_raw),
        mtu_str(a.max_mtu_raw)
    );
    match (active, max) {
        (Some(act), Some(mx)) if act < mx && act < Mtu::Mtu4096 => out.push(Finding::warn(
            "mtu",
            saw,
            if is_ib(a.link_layer) {
                "raise the subnet's MTU (opensm `mtu`/partitions.conf `mtu=5`) and the switch's \
                 to 4096: large messages need 4x the packets at 1024"
                    .to_string()
            } else {
                "the RoCE MTU follows the netdev MTU (see `netdev mtu`): raise it on both ends \
                 and on the switch"
                    .to_string()
            },
        )),
        (Some(_), Some(_)) => out.push(Finding::ok("mtu", saw)),
        _ => out.push(Finding::warn(
            "mtu",
            saw,
            "the port reports an MTU outside 256..4096: driver problem, check `ibv_devinfo`",
        )),
    }

    if !is_ib(a.link_layer) {
        out.push(check_netdev_mtu(sys, p));
    }

    match (peer_mtu, active) {
        (None, _) => out.push(Finding::skip(
            "peer mtu",
            "no --peer-mtu given (the peer's active_mtu from its `rdma-direct info`)",
        )),
        (Some(peer), Some(act)) if peer != act => out.push(Finding::warn(
            "peer mtu",
            format!("ours {}, peer {}", act.bytes(), peer.bytes()),
            format!(
                "MTU mismatch: the path MTU will be the smaller, {} (as our connect helpers \
                 choose); set both ends (and the switch) to the same MTU",
                act.min(peer).bytes()
            ),
        )),
        (Some(peer), Some(_)) => out.push(Finding::ok(
            "peer mtu",
            format!("ours and the peer's are both {}", peer.bytes()),
        )),
        (Some(peer), None) => out.push(Finding::warn(
            "peer mtu",
            format!("ours unknown, peer {}", peer.bytes()),
            "our active MTU is invalid: fix the port first",
        )),
    }
    out
}

fn check_netdev_mtu(sys: &Sysfs, p: &PortFacts) -> Finding {
    let Some(nd) = port_netdev(sys, &p.device, p.port) else {
        return Finding::skip(
            "netdev mtu",
            format!(
                "no netdev found under {}/ports/{}/gid_attrs/ndevs",
                Sysfs::ib(&p.device),
                p.port
            ),
        );
    };
    let Some(mtu) = sys
        .read(&format!("sys/class/net/{nd}/mtu"))
        .and_then(|s| s.parse::<u32>().ok())
    else {
        return Finding::skip("netdev mtu", format!("cannot read /sys/class/net/{nd}/mtu"));
    };
    let fits = roce_mtu_for_netdev(mtu);
    let mut saw = format!(
        "{nd} mtu {mtu}: fits IB MTU {} after {ROCE_HEADER_BYTES} B of RoCE headers",
        fits.map_or("none".to_string(), |m| m.bytes().to_string())
    );
    if let (Some(f), Some(act)) = (fits, p.attr.active_mtu()) {
        if f != act {
            saw.push_str(&format!(
                " (the driver reports active {}: it counts headers its own way)",
                act.bytes()
            ));
        }
    }
    let port_can_4096 = p.attr.max_mtu() == Some(Mtu::Mtu4096);
    match fits {
        Some(Mtu::Mtu4096) => Finding::ok("netdev mtu", saw),
        _ if port_can_4096 => Finding::warn(
            "netdev mtu",
            saw,
            format!(
                "`ip link set {nd} mtu 9000` (at least {}) on both hosts and the switch ports \
                 to get IB MTU 4096",
                4096 + ROCE_HEADER_BYTES
            ),
        ),
        Some(_) => Finding::ok("netdev mtu", saw),
        None => Finding::warn(
            "netdev mtu",
            saw,
            format!("{nd}'s MTU is too small for any RoCE packet: raise it"),
        ),
    }
}

/// Step 3: QP capacities and what they mean for sizing; message size and mode.
pub fn check_caps(a: &PortAttr, c: &DeviceCaps) -> Vec<Finding> {
    let mut out = Vec::new();
    // One CQ shared by a QP's sends and receives must hold both queues' outstanding
    // entries: the deepest such QP has max_cqe / 2 of each (and no more than max_qp_wr).
    let shared_depth = (c.max_cqe / 2).min(c.max_qp_wr);
    let saw = format!(
        "max_qp_wr {}, max_sge {}, max_cqe {}: a CQ must hold every signaled WR + receive \
         outstanding on the QPs it serves (a CQ overrun loses completions silently), so one \
         CQ shared by a QP's sends and receives allows a depth of at most {shared_depth} each; \
         deeper queues need separate CQs or selective signaling",
        c.max_qp_wr, c.max_sge, c.max_cqe
    );
    if c.max_qp_wr <= 0 || c.max_sge <= 0 || c.max_cqe <= 0 {
        out.push(Finding::fail(
            "qp caps",
            saw,
            "the device reports no queue capacity: driver problem, check `ibv_devinfo -v`",
        ));
    } else {
        out.push(Finding::ok("qp caps", saw));
    }

    match c.max_inline {
        Some(0) => out.push(Finding::warn(
            "inline",
            "no inline data granted",
            "every send is a DMA read of the buffer: small-message latency suffers",
        )),
        Some(n) => out.push(Finding::ok(
            "inline",
            format!(
                "{n} B granted to a probe QP: sends up to {n} B go in the WQE (no DMA read of \
                 the buffer, the lowest latency)"
            ),
        )),
        None => out.push(Finding::skip("inline", "the probe QP could not be created")),
    }

    let cap = match c.atomic_cap {
        ffi::IBV_ATOMIC_NONE => "ATOMIC_NONE",
        ffi::IBV_ATOMIC_HCA => "ATOMIC_HCA",
        ffi::IBV_ATOMIC_GLOB => "ATOMIC_GLOB",
        _ => "ATOMIC_UNKNOWN",
    };
    match c.atomic_cap {
        ffi::IBV_ATOMIC_HCA => out.push(Finding::ok(
            "atomics",
            format!("{cap}: CAS/FAA are atomic among RDMA atomics through this HCA, not against CPU stores"),
        )),
        ffi::IBV_ATOMIC_GLOB => out.push(Finding::ok(
            "atomics",
            format!("{cap}: CAS/FAA are atomic against CPU accesses too"),
        )),
        _ => out.push(Finding::warn(
            "atomics",
            cap,
            "this device does no RDMA atomics: CAS/FAA requests will fail; use SEND/WRITE \
             based protocols",
        )),
    }

    out.push(Finding::ok(
        "message size",
        format!(
            "max_msg_sz {}; measure small messages for latency, large for bandwidth \
             (RDMA WRITE moves bulk data best; posting lists and selective signaling cut \
             per-message cost)",
            human_bytes(u64::from(a.max_msg_sz))
        ),
    ));
    out
}

/// Step 4: The locked-memory limit every registration counts against.
pub fn check_memlock(h: &HostFacts) -> Finding {
    let Some(m) = h.memlock else {
        return Finding::skip("memlock", "cannot read RLIMIT_MEMLOCK (/proc/self/limits)");
    };
    let lim = |v: Option<u64>| v.map_or("unlimited".to_string(), human_bytes);
    let mut saw = format!(
        "RLIMIT_MEMLOCK soft {}, hard {}; uid {}{}",
        lim(m.soft),
        lim(m.hard),
        h.euid,
        if h.cap_ipc_lock { ", CAP_IPC_LOCK" } else { "" }
    );
    if h.cap_ipc_lock {
        saw.push_str(": the limit does not apply to this process");
        return Finding::ok("memlock", saw);
    }
    let Some(soft) = m.soft else {
        saw.push_str(": registrations are limited by RAM only");
        return Finding::ok("memlock", saw);
    };
    let page = 4096u64;
    let room = soft.saturating_sub(h.pinned_now) / page * page;
    saw.push_str(&format!(
        "; {} pinned already, the largest registration that would work is about {}",
        human_bytes(h.pinned_now),
        human_bytes(room)
    ));
    if soft < MEMLOCK_WARN_BYTES {
        let raise = match m.hard {
            Some(hard) if hard <= soft => String::new(),
            _ => " (the hard limit allows raising it: `ulimit -l <KiB>` up to it)".to_string(),
        };
        Finding::warn(
            "memlock",
            saw,
            format!(
                "ibv_reg_mr will fail with ENOMEM beyond {}: ulimit -l unlimited or \
                 /etc/security/limits.conf memlock (`* - memlock unlimited`), or \
                 LimitMEMLOCK=infinity for a systemd service{raise}",
                human_bytes(room)
            ),
        )
    } else {
        Finding::ok("memlock", saw)
    }
}

/// A CPU list as sysfs and `taskset -c` write it: `0-3,8,10-11`.
pub fn format_cpulist(cpus: &[u32]) -> String {
    let mut v = cpus.to_vec();
    v.sort_unstable();
    v.dedup();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let start = v[i];
        let mut end = start;
        while i + 1 < v.len() && v[i + 1] == end + 1 {
            i += 1;
            end = v[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// Parses a sysfs CPU list (`0-3,8,10-11`); `None` on malformed input.
pub fn parse_cpulist(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 65_536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// Step 5: The device's NUMA node against the CPUs this process may use.
pub fn check_numa(sys: &Sysfs, dev: &str, allowed: &[u32]) -> Finding {
    let devdir = format!("{}/device", Sysfs::ib(dev));
    if !sys.exists(&devdir) {
        return Finding::skip(
            "numa",
            format!("{dev} is a virtual device (no device/ link in sysfs): no NUMA locality"),
        );
    }
    let node = match sys
        .read(&format!("{devdir}/numa_node"))
        .and_then(|s| s.parse::<i32>().ok())
    {
        None => {
            return Finding::skip(
                "numa",
                format!("{dev} has no readable device/numa_node (not a PCI device)"),
            )
        }
        Some(n) if n < 0 => {
            return Finding::skip(
                "numa",
                format!(
                    "{dev} numa_node {n}: no NUMA locality reported (virtual device or a \
                     single-node host)"
                ),
            )
        }
        Some(n) => n,
    };
    let Some(node_cpus) = sys
        .read(&format!("sys/devices/system/node/node{node}/cpulist"))
        .and_then(|s| parse_cpulist(&s))
    else {
        return Finding::skip(
            "numa",
            format!("{dev} on node {node}, but node{node}/cpulist cannot be read"),
        );
    };
    let near = format_cpulist(&node_cpus);
    let saw = format!(
        "{dev} on NUMA node {node} (CPUs {near}); this process may run on {}",
        if allowed.is_empty() {
            "unknown CPUs".to_string()
        } else {
            format_cpulist(allowed)
        }
    );
    let far: Vec<u32> = allowed
        .iter()
        .copied()
        .filter(|c| !node_cpus.contains(c))
        .collect();
    if allowed.is_empty() || far.is_empty() {
        Finding::ok("numa", saw)
    } else {
        let all_far = far.len() == allowed.len();
        Finding::warn(
            "numa",
            saw,
            format!(
                "{} CPUs are on another node: every CQ poll and buffer access crosses the \
                 interconnect; pin the polling thread near the device: `taskset -c {near} \
                 <cmd>` (and `numactl --membind={node}` for the buffers)",
                if all_far {
                    "all allowed"
                } else {
                    "some allowed"
                }
            ),
        )
    }
}

/// Usable Gb/s per PCIe lane at `gts` GT/s, after line encoding (8b/10b up to 5 GT/s,
/// 128b/130b for 8 to 32 GT/s, FLIT 242/256 at 64 GT/s); `None` for an unknown rate.
pub fn pcie_lane_gbps(gts: f64) -> Option<f64> {
    let eff = if gts <= 0.0 {
        return None;
    } else if gts <= 5.0 {
        0.8
    } else if gts <= 32.0 {
        128.0 / 130.0
    } else {
        242.0 / 256.0
    };
    Some(gts * eff)
}

fn pcie_gen(gts: f64) -> &'static str {
    match gts {
        g if g <= 2.5 => "Gen1",
        g if g <= 5.0 => "Gen2",
        g if g <= 8.0 => "Gen3",
        g if g <= 16.0 => "Gen4",
        g if g <= 32.0 => "Gen5",
        _ => "Gen6",
    }
}

/// `8.0 GT/s PCIe` or `8 GT/s` → 8.0.
fn parse_gts(s: &str) -> Option<f64> {
    s.split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|&g: &f64| g > 0.0)
}

/// `16` or `x16` → 16.
fn parse_width(s: &str) -> Option<u32> {
    s.trim_start_matches(['x', 'X'])
        .parse()
        .ok()
        .filter(|&w| w > 0)
}

/// Step 6: PCIe link width and speed against the card's maximum and the port's rate.
pub fn check_pcie(sys: &Sysfs, dev: &str, port_gbps: Option<f64>) -> Vec<Finding> {
    let devdir = format!("{}/device", Sysfs::ib(dev));
    if !sys.exists(&devdir) {
        return vec![Finding::skip(
            "pcie",
            format!("{dev} is a virtual device (no device/ link in sysfs): no PCIe link"),
        )];
    }
    let rd = |f: &str| sys.read(&format!("{devdir}/{f}"));
    let cw = rd("current_link_width").and_then(|s| parse_width(&s));
    let mw = rd("max_link_width").and_then(|s| parse_width(&s));
    let cs = rd("current_link_speed").and_then(|s| parse_gts(&s));
    let ms = rd("max_link_speed").and_then(|s| parse_gts(&s));
    let (Some(cw), Some(mw), Some(cs), Some(ms)) = (cw, mw, cs, ms) else {
        return vec![Finding::skip(
            "pcie",
            format!(
                "{dev}'s parent reports no PCIe link (no readable current/max_link_width and \
                 _speed): not a PCIe device"
            ),
        )];
    };
    let mut out = Vec::new();
    let wsaw = format!("x{cw} of x{mw}");
    if cw < mw {
        out.push(Finding::fail(
            "pcie width",
            wsaw,
            format!(
                "card runs at x{cw} of x{mw}: {} the bandwidth — reseat it in a full-width \
                 slot (check the slot's electrical width, not its length)",
                match mw / cw {
                    2 => "half".to_string(),
                    4 => "a quarter of".to_string(),
                    _ => format!("{cw}/{mw} of"),
                }
            ),
        ));
    } else {
        out.push(Finding::ok("pcie width", wsaw));
    }
    let ssaw = format!(
        "{cs} GT/s ({}) of {ms} GT/s ({})",
        pcie_gen(cs),
        pcie_gen(ms)
    );
    if cs < ms {
        out.push(Finding::warn(
            "pcie speed",
            ssaw,
            "the link trained below the card's speed: the slot or riser is an older \
             generation, or the BIOS limits it; move the card or raise the slot's link speed",
        ));
    } else {
        out.push(Finding::ok("pcie speed", ssaw));
    }
    let Some(lane) = pcie_lane_gbps(cs) else {
        return out;
    };
    let usable = lane * f64::from(cw);
    let bsaw = format!("{} x{cw} ≈ {usable:.0} Gb/s usable", pcie_gen(cs));
    match port_gbps {
        Some(port) if usable < port => out.push(Finding::warn(
            "pcie bandwidth",
            format!("{bsaw} < {port} Gb/s port"),
            format!(
                "the slot cannot feed the port: expect at most ~{usable:.0} Gb/s; use a slot \
                 with {} lanes or a newer generation",
                (port / lane).ceil()
            ),
        )),
        Some(port) => out.push(Finding::ok(
            "pcie bandwidth",
            format!("{bsaw} ≥ {port} Gb/s port"),
        )),
        None => out.push(Finding::ok(
            "pcie bandwidth",
            format!("{bsaw} (port rate unknown)"),
        )),
    }
    out
}

/// Step 7: Pitfalls the control path prevents by construction. Each is true of `crate::verbs`:
/// every transition in `verbs/qp.rs` builds its `ibv_qp_attr` from `ibv_qp_attr::zeroed()`
/// with exactly the kernel's mask, and `Qp::connect` uses `local.mtu.min(remote.mtu)` unless
/// the caller sets `ConnectOpts::path_mtu`.
pub fn pitfalls() -> Vec<Finding> {
    vec![
        Finding::ok(
            "modify_qp attrs",
            "every typed QP transition here (to_init/to_rtr/to_rts/to_err/to_reset, connect) \
             starts from a zeroed ibv_qp_attr and passes exactly the mask the kernel requires: \
             no stale fields, the usual EINVAL at RTR (modify_raw is the caller's own attr)",
        ),
        Finding::ok(
            "path mtu",
            "connect takes the smaller of the two endpoints' MTUs (unless path_mtu is set): \
             mismatched endpoints connect at the smaller one (a switch with an even smaller \
             MTU still drops packets: check it too)",
        ),
    ]
}

fn human_bytes(b: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (n, u) in UNITS {
        if b >= n && b % n == 0 {
            return format!("{} {u}", b / n);
        }
    }
    for (n, u) in UNITS {
        if b >= n {
            return format!("{:.1} {u}", b as f64 / n as f64);
        }
    }
    format!("{b} B")
}

// ---------------------------------------------------------------------------------------------
// The report
// ---------------------------------------------------------------------------------------------

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
