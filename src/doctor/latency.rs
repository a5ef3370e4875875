//! The tuning checks for the core that will poll (`rdma-direct doctor --latency`): whether
//! the host leaves one CPU to a busy-polling loop. Each check reads files below a [`Sysfs`]
//! root (`/proc`, `/sys`, `/etc`) and returns a [`Finding`] with what it saw and, when the
//! CPU is not ready, the fix (the command or the kernel parameter).
//!
//! The checks, in the order to apply their fixes: isolated from the scheduler (`isolcpus`,
//! or a cgroup v2 cpuset partition `isolated`), the tick off (`nohz_full`), RCU callbacks
//! elsewhere (`rcu_nocbs`, implied by `nohz_full`), no IRQ affinity including it (the RDMA
//! device's above all: a FAIL), irqbalance not running or told to avoid it, timer migration
//! off, the NMI and soft-lockup watchdogs off for it, `vm.stat_interval` long, frequency
//! governor `performance`, no deep C-state in reach (exit latency above [`DEEP_CSTATE_US`],
//! unless `/dev/cpu_dma_latency` holds them off), its SMT sibling offline, or isolated and
//! idle (its busy time sampled from `/proc/stat` over [`SMT_WINDOW`]: busy is a FAIL), the
//! core on the RDMA device's NUMA node with the process's memory there, transparent huge
//! pages not `always` (and neither synchronous nor khugepaged defrag), no swap, the
//! locked-memory limit ([`check_memlock`]).
//!
//! Contract: pure functions of the tree and [`HostFacts`] (tests hand them fake trees); a
//! file that is not there makes its check a [`Level::Skip`] saying so;
//! nothing panics on odd input. [`parse_cmdline`] and [`cmdline_cpus`] are the pure parsers
//! of `/proc/cmdline`.

use std::time::Duration;

use super::inputs::Sysfs;
use super::{check_memlock, format_cpulist, parse_cpulist, Finding, HostFacts, Level};

mod memory;

pub use memory::{check_numa_latency, check_stat_interval, check_swap, check_thp};

/// How long [`check_latency`] samples the SMT sibling's busy time.
pub const SMT_WINDOW: Duration = Duration::from_millis(250);

/// A sibling busy more than this percentage of [`SMT_WINDOW`] is busy (a FAIL).
pub const SMT_BUSY_PCT: f64 = 5.0;

/// `vm.stat_interval` below this many seconds is a warn: the per-CPU vmstat work runs on
/// the polling CPU that often.
pub const STAT_INTERVAL_S: u64 = 10;

/// A C-state whose exit latency is above this many microseconds is deep: waking from it
/// costs a polling loop that much after every idle moment (C1 is 1-2 us, C6 about 100).
pub const DEEP_CSTATE_US: u64 = 10;

/// The `key` / `key=value` parameters of a kernel command line, up to a lone `--` (what
/// follows is init's).
pub fn parse_cmdline(cmdline: &str) -> Vec<(&str, Option<&str>)> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .map(|w| match w.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (w, None),
        })
        .collect()
}

/// The CPUs of parameter `key` (`isolcpus`, `nohz_full`, `rcu_nocbs`) of a command line:
/// its CPU list, with `isolcpus`' flags (`domain`, `managed_irq`, `nohz`) left out; the
/// last occurrence wins, as for the kernel. `None` if absent or unreadable.
pub fn cmdline_cpus(cmdline: &str, key: &str) -> Option<Vec<u32>> {
    let v = parse_cmdline(cmdline)
        .into_iter()
        .rev()
        .find(|(k, _)| *k == key)?
        .1?;
    let list: Vec<&str> = v
        .split(',')
        .filter(|p| !p.chars().any(|c| c.is_ascii_alphabetic()))
        .collect();
    if list.is_empty() {
        return None;
    }
    parse_cpulist(&list.join(","))
}

/// The CPU `doctor --latency` checks when none is named: with a device, the first CPU of its
/// `local_cpulist` this process may run on (other than CPU 0 when it has a choice: CPU 0
/// takes the housekeeping); without one, the last CPU this process may run on.
pub fn default_cpu(sys: &Sysfs, dev: Option<&str>, allowed: &[u32]) -> Option<u32> {
    let local = dev
        .and_then(|d| sys.read(&format!("{}/device/local_cpulist", Sysfs::ib(d))))
        .and_then(|s| parse_cpulist(&s))
        .unwrap_or_default();
    let near: Vec<u32> = local
        .iter()
        .copied()
        .filter(|c| allowed.is_empty() || allowed.contains(c))
        .collect();
    let pick = |v: &[u32]| v.iter().copied().find(|&c| c != 0).or(v.first().copied());
    pick(&near).or_else(|| allowed.last().copied())
}

/// Every check for polling CPU `cpu`, in the order to apply their fixes. `dev`: the RDMA
/// device whose IRQs must stay off it.
pub fn check_latency(sys: &Sysfs, cpu: u32, dev: Option<&str>, host: &HostFacts) -> Vec<Finding> {
    let cmdline = sys.read("proc/cmdline").unwrap_or_default();
    // The sibling's busy time: two readings of /proc/stat a window apart, when it has one.
    let (before, after) = if smt_online(sys, cpu).is_some_and(|v| !v.is_empty()) {
        let b = sys.read("proc/stat");
        std::thread::sleep(SMT_WINDOW);
        (b, sys.read("proc/stat"))
    } else {
        (None, None)
    };
    vec![
        check_isolated(sys, &cmdline, cpu),
        check_nohz_full(sys, &cmdline, cpu),
        check_rcu_nocbs(&cmdline, cpu),
        check_irq_affinity(sys, cpu, dev),
        check_irqbalance(sys, &cmdline, cpu),
        check_timer_migration(sys),
        check_watchdogs(sys, cpu),
        check_stat_interval(sys),
        check_governor(sys, cpu),
        check_cstates(sys, cpu),
        check_smt_sampled(sys, &cmdline, cpu, before.as_deref(), after.as_deref()),
        check_numa_latency(sys, cpu, dev),
        check_thp(sys),
        check_swap(sys),
        check_memlock(host),
    ]
}

/// The one-line verdict of [`check_latency`]'s findings: ready, or the first thing to fix.
pub fn latency_verdict(cpu: u32, findings: &[Finding]) -> String {
    let first = findings
        .iter()
        .find(|f| f.level == Level::Fail)
        .or_else(|| findings.iter().find(|f| f.level == Level::Warn));
    match first {
        None => format!("CPU {cpu} is ready for a polling loop"),
        Some(f) => format!(
            "CPU {cpu} is not ready: first fix {}: {}",
            f.check,
            f.fix.as_deref().unwrap_or("")
        ),
    }
}

/// An engine's gate before it starts polling on `cpu`: every check of [`check_latency`],
/// and `Ok` with the findings when none is a FAIL (with `strict`, nor a warn); else
/// [`Error::Failed`](crate::Error::Failed) whose detail is the [`latency_verdict`] (the first
/// thing to fix and its fix). Prints nothing.
///
/// ```
/// use rdma_direct::doctor::{latency, HostFacts, Level, Sysfs};
///
/// // A fake host whose RDMA device sends its IRQ 40 to CPU 2.
/// let root = std::env::temp_dir().join(format!("rdma-direct-ready-{}", std::process::id()));
/// for (rel, text) in [
///     ("proc/irq/40/smp_affinity_list", "2\n"),
///     ("sys/class/infiniband/mlx5_0/device/msi_irqs/40", "msix\n"),
///     ("sys/devices/system/cpu/online", "0-3\n"),
/// ] {
///     std::fs::create_dir_all(root.join(rel).parent().unwrap()).unwrap();
///     std::fs::write(root.join(rel), text).unwrap();
/// }
/// let sys = Sysfs::new(&root);
/// let host = HostFacts::read(&sys);
///
/// // CPU 2 takes the NIC's interrupts: the engine refuses to start there.
/// let err = latency::require_ready(&sys, 2, Some("mlx5_0"), &host, false).unwrap_err();
/// assert!(err.to_string().contains("first fix irq affinity: for IRQ in 40; do echo 0-1,3"));
///
/// // CPU 3 has nothing that fails (warns only, the host untuned): allowed unless strict.
/// let findings = latency::require_ready(&sys, 3, Some("mlx5_0"), &host, false).unwrap();
/// assert!(findings.iter().all(|f| f.level != Level::Fail));
/// assert!(latency::require_ready(&sys, 3, Some("mlx5_0"), &host, true).is_err());
/// std::fs::remove_dir_all(&root).unwrap();
/// ```
pub fn require_ready(
    sys: &Sysfs,
    cpu: u32,
    dev: Option<&str>,
    host: &HostFacts,
    strict: bool,
) -> crate::Result<Vec<Finding>> {
    let findings = check_latency(sys, cpu, dev, host);
    let refused = findings
        .iter()
        .any(|f| f.level == Level::Fail || (strict && f.level == Level::Warn));
    if refused {
        return Err(crate::Error::Failed {
            context: "latency",
            detail: latency_verdict(cpu, &findings),
        });
    }
    Ok(findings)
}

fn covered(list: &Option<Vec<u32>>, cpu: u32) -> bool {
    list.as_ref().is_some_and(|l| l.contains(&cpu))
}

/// A list from the command line, else from its sysfs mirror (`isolated`, `nohz_full`).
fn kernel_list(sys: &Sysfs, cmdline: &str, key: &str, mirror: &str) -> Option<Vec<u32>> {
    cmdline_cpus(cmdline, key).or_else(|| {
        sys.read(&format!("sys/devices/system/cpu/{mirror}"))
            .and_then(|s| parse_cpulist(&s))
    })
}

/// The cgroup v2 cpuset partition of type `isolated` holding `cpu`: its directory below
/// `/sys/fs/cgroup` (`""` for the root's `cpuset.cpus.isolated`). Looked for three levels
/// deep.
pub fn cpuset_isolated(sys: &Sysfs, cpu: u32) -> Option<String> {
    let base = "sys/fs/cgroup";
    if sys
        .read(&format!("{base}/cpuset.cpus.isolated"))
        .and_then(|s| parse_cpulist(&s))
        .is_some_and(|l| l.contains(&cpu))
    {
        return Some(String::new());
    }
    let mut dirs = vec![String::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for d in &dirs {
            let Ok(rd) = std::fs::read_dir(sys.path(&format!("{base}{d}"))) else {
                continue;
            };
            for e in rd.filter_map(|e| e.ok()) {
                if !e.file_type().is_ok_and(|t| t.is_dir()) {
                    continue;
                }
                let Some(name) = e.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                let sub = format!("{d}/{name}");
                let part = sys.read(&format!("{base}{sub}/cpuset.cpus.partition"));
                // "isolated", not "isolated invalid (...)": an invalid partition isolates
                // nothing.
                if part.as_deref() == Some("isolated") {
                    let cpus = sys
                        .read(&format!("{base}{sub}/cpuset.cpus.effective"))
                        .or_else(|| sys.read(&format!("{base}{sub}/cpuset.cpus.exclusive")))
                        .and_then(|s| parse_cpulist(&s));
                    if cpus.is_some_and(|l| l.contains(&cpu)) {
                        return Some(sub);
                    }
                }
                next.push(sub);
            }
        }
        dirs = next;
    }
    None
}

/// Isolated from the scheduler: in `isolcpus` (sysfs `cpu/isolated`), or in a cgroup v2
/// cpuset partition `isolated` ([`cpuset_isolated`]).
pub fn check_isolated(sys: &Sysfs, cmdline: &str, cpu: u32) -> Finding {
    let l = kernel_list(sys, cmdline, "isolcpus", "isolated");
    if let (false, Some(g)) = (covered(&l, cpu), cpuset_isolated(sys, cpu)) {
        return Finding::ok(
            "isolcpus",
            format!(
                "CPU {cpu} isolated by the cgroup v2 cpuset partition /sys/fs/cgroup{g} (isolated)"
            ),
        );
    }
    if covered(&l, cpu) {
        return Finding::ok(
            "isolcpus",
            format!(
                "CPU {cpu} isolated (isolcpus {})",
                format_cpulist(l.as_deref().unwrap_or_default())
            ),
        );
    }
    Finding::warn(
        "isolcpus",
        format!(
            "CPU {cpu} is not isolated (isolcpus: {}): the scheduler may run other tasks on it",
            l.as_deref().map_or("none".into(), format_cpulist)
        ),
        format!(
            "kernel parameter isolcpus={cpu}, or without a reboot a cgroup v2 isolated \
             partition: mkdir /sys/fs/cgroup/rt; echo +cpuset > \
             /sys/fs/cgroup/cgroup.subtree_control; echo {cpu} > \
             /sys/fs/cgroup/rt/cpuset.cpus.exclusive; echo {cpu} > /sys/fs/cgroup/rt/cpuset.cpus; \
             echo isolated > /sys/fs/cgroup/rt/cpuset.cpus.partition (then move the engine into \
             it: echo $PID > /sys/fs/cgroup/rt/cgroup.procs)"
        ),
    )
}

/// The tick stops while one task runs: in `nohz_full`.
pub fn check_nohz_full(sys: &Sysfs, cmdline: &str, cpu: u32) -> Finding {
    let l = kernel_list(sys, cmdline, "nohz_full", "nohz_full");
    if covered(&l, cpu) {
        return Finding::ok("nohz_full", format!("CPU {cpu} in nohz_full"));
    }
    Finding::warn(
        "nohz_full",
        format!("CPU {cpu} not in nohz_full: the timer tick interrupts it 100-1000 times a second"),
        format!("kernel parameter nohz_full={cpu}"),
    )
}

/// RCU callbacks run elsewhere: in `rcu_nocbs`, or in `nohz_full` (which implies it).
pub fn check_rcu_nocbs(cmdline: &str, cpu: u32) -> Finding {
    if covered(&cmdline_cpus(cmdline, "rcu_nocbs"), cpu) {
        return Finding::ok("rcu_nocbs", format!("CPU {cpu} in rcu_nocbs"));
    }
    if covered(&cmdline_cpus(cmdline, "nohz_full"), cpu) {
        return Finding::ok(
            "rcu_nocbs",
            format!("CPU {cpu} in nohz_full, which offloads its RCU callbacks"),
        );
    }
    Finding::warn(
        "rcu_nocbs",
        format!("CPU {cpu} runs its own RCU callbacks (not in rcu_nocbs or nohz_full)"),
        format!("kernel parameter rcu_nocbs={cpu}"),
    )
}

/// The online CPUs other than `cpu`, as a list for `smp_affinity_list`.
fn others(sys: &Sysfs, cpu: u32) -> String {
    let online = sys
        .read("sys/devices/system/cpu/online")
        .and_then(|s| parse_cpulist(&s))
        .unwrap_or_default();
    let v: Vec<u32> = online.into_iter().filter(|&c| c != cpu).collect();
    if v.is_empty() {
        "<the other CPUs>".to_string()
    } else {
        format_cpulist(&v)
    }
}

/// No IRQ may land on the polling CPU: the RDMA device's (a FAIL), nor any other (a warn).
/// Where an IRQ goes is its `effective_affinity_list` (else `smp_affinity_list`) in
/// `/proc/irq/N/`.
pub fn check_irq_affinity(sys: &Sysfs, cpu: u32, dev: Option<&str>) -> Finding {
    let Ok(rd) = std::fs::read_dir(sys.path("proc/irq")) else {
        return Finding::skip("irq affinity", "/proc/irq cannot be read");
    };
    let mut irqs: Vec<u32> = rd
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    irqs.sort_unstable();
    let on_cpu: Vec<u32> = irqs
        .into_iter()
        .filter(|i| {
            let aff = sys
                .read(&format!("proc/irq/{i}/effective_affinity_list"))
                .or_else(|| sys.read(&format!("proc/irq/{i}/smp_affinity_list")));
            aff.and_then(|a| parse_cpulist(&a))
                .is_some_and(|l| l.contains(&cpu))
        })
        .collect();
    let nic = dev.map(|d| super::procfs::device_irqs(sys, d));
    let nic_on: Vec<u32> = match &nic {
        Some(Ok(n)) => on_cpu.iter().copied().filter(|i| n.contains(i)).collect(),
        _ => Vec::new(),
    };
    let fix = |l: &[u32]| {
        format!(
            "for IRQ in {}; do echo {} > /proc/irq/$IRQ/smp_affinity_list; done",
            l.iter().map(u32::to_string).collect::<Vec<_>>().join(" "),
            others(sys, cpu)
        )
    };
    let nic_note = match (&nic, dev) {
        (Some(Ok(n)), Some(d)) => format!("; {d}'s IRQs {}", format_cpulist(n)),
        (Some(Err(e)), _) => format!("; the device's IRQs not found: {e}"),
        _ => "; no device given: the RDMA device's IRQs not known".to_string(),
    };
    if !nic_on.is_empty() {
        return Finding::fail(
            "irq affinity",
            format!(
                "the RDMA device's IRQs {} may land on CPU {cpu}{nic_note}",
                format_cpulist(&nic_on)
            ),
            fix(&nic_on),
        );
    }
    if on_cpu.is_empty() {
        return Finding::ok(
            "irq affinity",
            format!("no IRQ may land on CPU {cpu}{nic_note}"),
        );
    }
    let shown: Vec<String> = on_cpu.iter().take(8).map(u32::to_string).collect();
    Finding::warn(
        "irq affinity",
        format!(
            "{} IRQs may land on CPU {cpu} ({}{}){nic_note}",
            on_cpu.len(),
            shown.join(" "),
            if on_cpu.len() > 8 { " ..." } else { "" }
        ),
        fix(&on_cpu),
    )
}

/// irqbalance not running, or told to avoid the CPU (its banned list, or an isolated CPU,
/// which it leaves alone).
pub fn check_irqbalance(sys: &Sysfs, cmdline: &str, cpu: u32) -> Finding {
    let running = std::fs::read_dir(sys.path("proc")).ok().is_some_and(|rd| {
        rd.filter_map(|e| e.ok())
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .any(|e| {
                std::fs::read_to_string(e.path().join("comm"))
                    .is_ok_and(|c| c.trim() == "irqbalance")
            })
    });
    if !running {
        return Finding::ok("irqbalance", "not running");
    }
    let banned = ["etc/default/irqbalance", "etc/sysconfig/irqbalance"]
        .iter()
        .filter_map(|f| sys.read(f))
        .flat_map(|t| {
            t.lines()
                .filter_map(|l| {
                    let v = l.trim().strip_prefix("IRQBALANCE_BANNED_CPULIST=")?;
                    parse_cpulist(v.trim_matches('"'))
                })
                .collect::<Vec<_>>()
        })
        .next();
    if covered(&banned, cpu) {
        return Finding::ok(
            "irqbalance",
            format!("running, CPU {cpu} in IRQBALANCE_BANNED_CPULIST"),
        );
    }
    if covered(&cmdline_cpus(cmdline, "isolcpus"), cpu)
        || covered(&cmdline_cpus(cmdline, "nohz_full"), cpu)
    {
        return Finding::ok(
            "irqbalance",
            format!("running; it leaves CPU {cpu} alone (isolcpus/nohz_full)"),
        );
    }
    Finding::warn(
        "irqbalance",
        format!("running, and free to move IRQs onto CPU {cpu}"),
        format!(
            "IRQBALANCE_BANNED_CPULIST={cpu} in /etc/default/irqbalance (or \
             /etc/sysconfig/irqbalance) and restart it, or systemctl stop irqbalance"
        ),
    )
}

/// `kernel.timer_migration` 0: timers stay on the CPU that armed them.
pub fn check_timer_migration(sys: &Sysfs) -> Finding {
    match sys.read("proc/sys/kernel/timer_migration").as_deref() {
        None => Finding::skip("timer migration", "/proc/sys/kernel/timer_migration absent"),
        Some("0") => Finding::ok("timer migration", "kernel.timer_migration = 0"),
        Some(v) => Finding::warn(
            "timer migration",
            format!("kernel.timer_migration = {v}: idle CPUs' timers move to busy ones"),
            "sysctl kernel.timer_migration=0",
        ),
    }
}

/// The frequency governor `performance` (and the turbo state, as evidence).
pub fn check_governor(sys: &Sysfs, cpu: u32) -> Finding {
    let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
    let Some(gov) = sys.read(&format!("{dir}/scaling_governor")) else {
        return Finding::skip(
            "governor",
            format!(
                "no cpufreq for CPU {cpu} (a virtual machine, or the frequency is not under \
                 the kernel's control)"
            ),
        );
    };
    let turbo = match (
        sys.read("sys/devices/system/cpu/intel_pstate/no_turbo"),
        sys.read("sys/devices/system/cpu/cpufreq/boost"),
    ) {
        (Some(n), _) => format!(", turbo {}", if n == "1" { "off" } else { "on" }),
        (None, Some(b)) => format!(", boost {}", if b == "1" { "on" } else { "off" }),
        _ => ", turbo state unknown".to_string(),
    };
    let saw = format!("CPU {cpu} governor {gov}{turbo}");
    if gov == "performance" {
        Finding::ok("governor", saw)
    } else {
        Finding::warn(
            "governor",
            saw,
            format!("cpupower -c {cpu} frequency-set -g performance"),
        )
    }
}

/// No deep C-state enabled: an enabled `cpuidle/stateK` with exit latency above
/// [`DEEP_CSTATE_US`] is a warn.
pub fn check_cstates(sys: &Sysfs, cpu: u32) -> Finding {
    let dir = format!("sys/devices/system/cpu/cpu{cpu}/cpuidle");
    let mut states = Vec::new();
    for k in 0..32 {
        let s = format!("{dir}/state{k}");
        let Some(name) = sys.read(&format!("{s}/name")) else {
            break;
        };
        let lat: u64 = sys
            .read(&format!("{s}/latency"))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        let disabled = sys.read(&format!("{s}/disable")).as_deref() == Some("1");
        states.push((name, lat, disabled));
    }
    if states.is_empty() {
        return Finding::skip("c-states", format!("no cpuidle states for CPU {cpu}"));
    }
    let driver = sys
        .read("sys/devices/system/cpu/cpuidle/current_driver")
        .unwrap_or_else(|| "unknown".into());
    let list: Vec<String> = states
        .iter()
        .map(|(n, l, d)| format!("{n} {l} us{}", if *d { " (disabled)" } else { "" }))
        .collect();
    let cmdline = sys.read("proc/cmdline").unwrap_or_default();
    let limits: Vec<String> = parse_cmdline(&cmdline)
        .into_iter()
        .filter(|(k, _)| {
            matches!(
                *k,
                "intel_idle.max_cstate" | "processor.max_cstate" | "idle"
            )
        })
        .map(|(k, v)| format!("{k}={}", v.unwrap_or("")))
        .collect();
    let qos = cpu_dma_latency_us(sys);
    let saw = format!(
        "idle driver {driver}; {}{}{}",
        list.join(", "),
        if limits.is_empty() {
            String::new()
        } else {
            format!("; {}", limits.join(" "))
        },
        match qos {
            Some(q) => format!("; /dev/cpu_dma_latency {q} us"),
            None => String::new(),
        }
    );
    // A latency target held on /dev/cpu_dma_latency keeps the idle governor out of every
    // state slower to leave.
    let reach = qos.map_or(u64::MAX, |q| u64::try_from(q).unwrap_or(0));
    let deep: Vec<&str> = states
        .iter()
        .filter(|(_, l, d)| !d && *l > DEEP_CSTATE_US && *l <= reach)
        .map(|(n, _, _)| n.as_str())
        .collect();
    if deep.is_empty() {
        Finding::ok("c-states", saw)
    } else {
        Finding::warn(
            "c-states",
            format!("{saw}: deep states enabled ({})", deep.join(", ")),
            format!(
                "cpupower -c {cpu} idle-set -D {DEEP_CSTATE_US} (or kernel parameters \
                 intel_idle.max_cstate=1 processor.max_cstate=1, or hold /dev/cpu_dma_latency \
                 open with 0)"
            ),
        )
    }
}

/// The latency target in force on `/dev/cpu_dma_latency`, microseconds (the device reads as
/// one native-endian `i32`; 2000000000 when nobody holds it). `None` when it cannot be read
/// (it is root's alone on most systems).
pub fn cpu_dma_latency_us(sys: &Sysfs) -> Option<i32> {
    let b = std::fs::read(sys.path("dev/cpu_dma_latency")).ok()?;
    Some(i32::from_ne_bytes(b.get(..4)?.try_into().ok()?))
}

/// `cpu`'s SMT siblings that are online (`None`: no topology in sysfs).
fn smt_online(sys: &Sysfs, cpu: u32) -> Option<Vec<u32>> {
    let sib = sys
        .read(&format!(
            "sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list"
        ))
        .and_then(|s| parse_cpulist(&s))?;
    Some(
        sib.into_iter()
            .filter(|&s| s != cpu)
            .filter(|s| {
                sys.read(&format!("sys/devices/system/cpu/cpu{s}/online"))
                    .as_deref()
                    != Some("0")
            })
            .collect(),
    )
}

/// The share of time `cpu` was busy between two readings of `/proc/stat`, in percent: of
/// the ticks of its `cpuN` row, those not idle or iowait. `None` without the row in both or
/// without a tick between them.
pub fn cpu_busy_pct(before: &str, after: &str, cpu: u32) -> Option<f64> {
    let row = |text: &str| -> Option<(u64, u64)> {
        let name = format!("cpu{cpu}");
        let l = text
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name.as_str()))?;
        let v: Vec<u64> = l
            .split_whitespace()
            .skip(1)
            .take(8)
            .filter_map(|w| w.parse().ok())
            .collect();
        if v.len() < 5 {
            return None;
        }
        let total: u64 = v.iter().sum();
        Some((total, total - v[3] - v[4]))
    };
    let (t0, b0) = row(before)?;
    let (t1, b1) = row(after)?;
    let dt = t1.checked_sub(t0).filter(|&d| d > 0)?;
    Some(b1.saturating_sub(b0) as f64 * 100.0 / dt as f64)
}

/// [`check_smt_sampled`] without a sample of the sibling's busy time.
pub fn check_smt(sys: &Sysfs, cmdline: &str, cpu: u32) -> Finding {
    check_smt_sampled(sys, cmdline, cpu, None, None)
}

/// The SMT sibling offline, or isolated as well and idle (a busy sibling shares the core's
/// execution units and caches with the polling loop): `stat_before` and `stat_after` are
/// two readings of `/proc/stat` [`SMT_WINDOW`] apart ([`check_latency`] takes them); a
/// sibling busy above [`SMT_BUSY_PCT`] is a FAIL.
pub fn check_smt_sampled(
    sys: &Sysfs,
    cmdline: &str,
    cpu: u32,
    stat_before: Option<&str>,
    stat_after: Option<&str>,
) -> Finding {
    let Some(online) = smt_online(sys, cpu) else {
        return Finding::skip("smt sibling", format!("CPU {cpu} has no topology in sysfs"));
    };
    if online.is_empty() {
        return Finding::ok(
            "smt sibling",
            format!("CPU {cpu} has no online SMT sibling"),
        );
    }
    let l = format_cpulist(&online);
    let offline = format!(
        "echo 0 > /sys/devices/system/cpu/cpu{}/online (or kernel parameter nosmt)",
        online[0]
    );
    let busy: Option<f64> = match (stat_before, stat_after) {
        (Some(a), Some(b)) => online
            .iter()
            .filter_map(|&s| cpu_busy_pct(a, b, s))
            .reduce(f64::max),
        _ => None,
    };
    let load = busy.map_or(String::new(), |b| {
        format!(", {b:.0}% busy over {} ms", SMT_WINDOW.as_millis())
    });
    if let Some(b) = busy.filter(|&b| b > SMT_BUSY_PCT) {
        return Finding::fail(
            "smt sibling",
            format!(
                "CPU {cpu}'s SMT sibling {l} is {b:.0}% busy over {} ms: it takes the core's \
                 execution units and caches from the polling loop",
                SMT_WINDOW.as_millis()
            ),
            format!(
                "{offline}; or move what runs there away (ps -eLo pid,psr,comm | awk \
                 '$2=={}')",
                online[0]
            ),
        );
    }
    let isolated = kernel_list(sys, cmdline, "isolcpus", "isolated");
    if online
        .iter()
        .all(|&s| covered(&isolated, s) || cpuset_isolated(sys, s).is_some())
    {
        return Finding::ok(
            "smt sibling",
            format!("CPU {cpu}'s SMT sibling {l} online and isolated{load}"),
        );
    }
    Finding::warn(
        "smt sibling",
        format!("CPU {cpu}'s SMT sibling {l} is online and not isolated: it shares the core{load}"),
        offline,
    )
}

/// The NMI watchdog (a perf counter firing NMIs on every CPU) and the soft-lockup watchdog
/// (a timer and a kthread per CPU) off, or the latter kept off the CPU
/// (`kernel.watchdog_cpumask`).
pub fn check_watchdogs(sys: &Sysfs, cpu: u32) -> Finding {
    let nmi = sys.read("proc/sys/kernel/nmi_watchdog");
    let soft = sys
        .read("proc/sys/kernel/soft_watchdog")
        .or_else(|| sys.read("proc/sys/kernel/watchdog"));
    if nmi.is_none() && soft.is_none() {
        return Finding::skip("watchdogs", "no kernel.nmi_watchdog or kernel.watchdog");
    }
    let mask = sys
        .read("proc/sys/kernel/watchdog_cpumask")
        .and_then(|m| parse_cpulist(&m));
    let on_cpu = match &mask {
        Some(m) => m.contains(&cpu),
        None => true,
    };
    let nmi_on = nmi.as_deref().is_some_and(|v| v != "0") && on_cpu;
    let soft_on = soft.as_deref().is_some_and(|v| v != "0") && on_cpu;
    let saw = format!(
        "kernel.nmi_watchdog {}, soft lockup watchdog {}{}",
        nmi.as_deref().unwrap_or("absent"),
        soft.as_deref().unwrap_or("absent"),
        match &mask {
            Some(m) => format!(", watchdog_cpumask {}", format_cpulist(m)),
            None => String::new(),
        }
    );
    let mut fix = Vec::new();
    if nmi_on {
        fix.push("sysctl kernel.nmi_watchdog=0 (or kernel parameter nmi_watchdog=0)".to_string());
    }
    if soft_on {
        fix.push(format!(
            "sysctl kernel.watchdog_cpumask={} (or kernel parameter nowatchdog)",
            others(sys, cpu)
        ));
    }
    if fix.is_empty() {
        Finding::ok("watchdogs", format!("{saw}: none runs on CPU {cpu}"))
    } else {
        Finding::warn(
            "watchdogs",
            format!("{saw}: they interrupt CPU {cpu} periodically"),
            fix.join("; "),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::memory::chosen;
    use super::*;

    const CMDLINE: &str = "BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro quiet isolcpus=1 \
        isolcpus=managed_irq,domain,2-3,6 nohz_full=2-3 rcu_nocbs=2-5 -- isolcpus=7 single";

    #[test]
    fn cmdline_parameters() {
        assert_eq!(
            parse_cmdline(CMDLINE)[..4],
            [
                ("BOOT_IMAGE", Some("/vmlinuz")),
                ("root", Some("/dev/sda1")),
                ("ro", None),
                ("quiet", None)
            ]
        );
        assert_eq!(parse_cmdline(CMDLINE).len(), 8);
        // The last one before `--` wins, its flags left out.
        assert_eq!(cmdline_cpus(CMDLINE, "isolcpus"), Some(vec![2, 3, 6]));
        assert_eq!(cmdline_cpus(CMDLINE, "nohz_full"), Some(vec![2, 3]));
        assert_eq!(cmdline_cpus(CMDLINE, "rcu_nocbs"), Some(vec![2, 3, 4, 5]));
        assert_eq!(cmdline_cpus(CMDLINE, "irqaffinity"), None);
        assert_eq!(cmdline_cpus("nohz_full", "nohz_full"), None);
        assert_eq!(cmdline_cpus("nohz_full=x-y", "nohz_full"), None);
        assert_eq!(
            chosen("always defer defer+madvise [madvise] never"),
            Some("madvise")
        );
        assert_eq!(chosen("always madvise never"), None);
    }
}
