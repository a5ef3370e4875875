//! What doctor looks at (the probes): a [`Sysfs`] root, the verbs query results of a
//! device's ports ([`PortFacts`], [`DeviceCaps`]) and the process facts ([`HostFacts`]).
//!
//! Contract: only [`HostFacts::probe`], [`probe_device`] and [`probe_inline`] touch the
//! running system (the process facts and the device); the rest reads below a given root or
//! parses text. Nothing here judges: the verdicts are the checks'.

use std::path::PathBuf;

use crate::control::{Context, Cq, DeviceAttr, Pd, PortAttr, Qp};
use crate::error::Result;
use crate::providers::mlx5::PollBarrier;
use crate::providers::{QpCaps, QpConfig, QpType};

use super::parse_cpulist;

/// `CAP_IPC_LOCK`: bypasses `RLIMIT_MEMLOCK` for pinning, `ibv_reg_mr` included.
const CAP_IPC_LOCK_BIT: u32 = 14;

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

    pub(super) fn ib(dev: &str) -> String {
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
    /// How this process's mlx5 polls order their handshake with a QP's drop (chosen once
    /// per process: [`crate::providers::mlx5::poll_barrier`]).
    pub poll_barrier: PollBarrier,
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
            poll_barrier: crate::providers::mlx5::poll_barrier(),
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
