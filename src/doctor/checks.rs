//! The verdicts: one check per layer of the troubleshooting order (the parent module's doc),
//! each a pure function of the inputs that returns [`Finding`]s, and [`check_port`] /
//! [`check_host`], which run the whole order.
//!
//! Contract: a check reads only its inputs (the facts passed in and files below a [`Sysfs`]
//! root) and never panics on odd input; a missing or unreadable input becomes a
//! [`Level::Skip`](super::Level::Skip) with the reason.

use crate::control::{LinkLayer, PortAttr, PortState};
use crate::endpoint::Mtu;
use crate::ffi;

use super::{DeviceCaps, Finding, HostFacts, PortFacts, Sysfs};

/// Bytes of RoCE v2 headers an IB MTU must leave room for inside the netdev MTU: IP (GRH) 40,
/// UDP 8, BTH 12, and the largest extended headers (XRC 4, atomic 28) and ICRC 4, as the
/// kernel counts them (`iboe_get_mtu`). rxe counts a few bytes less; the result is the same
/// except within 16 bytes of a boundary.
pub const ROCE_HEADER_BYTES: u32 = 96;

/// Below this locked-memory limit (for a process without `CAP_IPC_LOCK`) doctor warns.
pub const MEMLOCK_WARN_BYTES: u64 = 64 << 20;

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
    out.push(check_poll_barrier(host));
    out.push(check_numa(sys, &p.device, &host.allowed_cpus));
    out.extend(check_pcie(sys, &p.device, p.attr.rate_gbps()));
    out.extend(pitfalls());
    out
}

/// Checks that need no device: the locked-memory limit, the poll's barrier.
pub fn check_host(host: &HostFacts) -> Vec<Finding> {
    vec![check_memlock(host), check_poll_barrier(host)]
}

/// The polling handshake's barrier this process chose (providers/mlx5/handshake.rs): light
/// polls with `membarrier`, or a locked instruction in every poll that finds completions.
pub fn check_poll_barrier(h: &HostFacts) -> Finding {
    match h.poll_barrier {
        crate::providers::mlx5::PollBarrier::Membarrier => Finding::ok(
            "poll barrier",
            "membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) registered: an mlx5 poll that finds \
             completions takes no locked instruction; a QP's drop makes one system call",
        ),
        crate::providers::mlx5::PollBarrier::SeqCst => Finding::warn(
            "poll barrier",
            "no membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED), or RDMA_DIRECT_MEMBARRIER=0: every \
             mlx5 poll that finds completions takes a locked instruction (about 6 ns a poll)",
            "a kernel of 4.16 or later, membarrier allowed by the seccomp profile (containers: \
             add it to the allowed system calls), RDMA_DIRECT_MEMBARRIER unset",
        ),
    }
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
            "no peer MTU given (`peer_mtu`: the active_mtu of the peer's port)",
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

/// Step 7: Pitfalls the control path prevents by construction. Each is true of `crate::control`:
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
