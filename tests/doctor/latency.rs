//! doctor --latency: the polling core's tuning checks on fake trees.

use super::*;

use rdma_direct::doctor::latency::{
    self, check_cstates, check_governor, check_irq_affinity, check_irqbalance, check_isolated,
    check_nohz_full, check_rcu_nocbs, check_smt, check_swap, check_thp, check_timer_migration,
};

fn finding(level: Level, check: &'static str, saw: &str, fix: Option<&str>) -> Finding {
    Finding {
        level,
        check,
        saw: saw.into(),
        fix: fix.map(String::from),
    }
}

#[test]
fn latency_isolation_tick_and_rcu_from_the_command_line() {
    let t = Tree::new("lat-cmdline");
    let sys = t.sys();
    let tuned = "ro isolcpus=managed_irq,domain,2-3 nohz_full=2-3";
    assert_eq!(
        check_isolated(&sys, tuned, 3),
        finding(Level::Ok, "isolcpus", "CPU 3 isolated (isolcpus 2-3)", None)
    );
    assert_eq!(
        check_isolated(&sys, "ro quiet", 3),
        finding(
            Level::Warn,
            "isolcpus",
            "CPU 3 is not isolated (isolcpus: none): the scheduler may run other tasks on it",
            Some(
                "kernel parameter isolcpus=3, or without a reboot a cgroup v2 isolated \
                 partition: mkdir /sys/fs/cgroup/rt; echo +cpuset > \
                 /sys/fs/cgroup/cgroup.subtree_control; echo 3 > \
                 /sys/fs/cgroup/rt/cpuset.cpus.exclusive; echo 3 > /sys/fs/cgroup/rt/cpuset.cpus; \
                 echo isolated > /sys/fs/cgroup/rt/cpuset.cpus.partition (then move the engine \
                 into it: echo $PID > /sys/fs/cgroup/rt/cgroup.procs)"
            )
        )
    );
    // A cgroup v2 cpuset partition "isolated" isolates as isolcpus does; "root" or an
    // invalid partition does not.
    let cg = "sys/fs/cgroup/trading/engine";
    t.file(&format!("{cg}/cpuset.cpus.partition"), "root\n")
        .file(&format!("{cg}/cpuset.cpus.effective"), "2-3\n");
    assert_eq!(check_isolated(&sys, "ro", 3).level, Level::Warn);
    t.file(
        &format!("{cg}/cpuset.cpus.partition"),
        "isolated invalid (Cpu list in cpuset.cpus not exclusive)\n",
    );
    assert_eq!(check_isolated(&sys, "ro", 3).level, Level::Warn);
    t.file(&format!("{cg}/cpuset.cpus.partition"), "isolated\n");
    assert_eq!(
        check_isolated(&sys, "ro", 3),
        finding(
            Level::Ok,
            "isolcpus",
            "CPU 3 isolated by the cgroup v2 cpuset partition /sys/fs/cgroup/trading/engine \
             (isolated)",
            None
        )
    );
    assert_eq!(check_isolated(&sys, "ro", 1).level, Level::Warn);
    assert_eq!(
        latency::cpuset_isolated(&sys, 2).as_deref(),
        Some("/trading/engine")
    );
    // The root's summary of every isolated partition (Linux 6.7+).
    t.file("sys/fs/cgroup/cpuset.cpus.isolated", "1\n");
    assert_eq!(latency::cpuset_isolated(&sys, 1).as_deref(), Some(""));
    assert_eq!(check_isolated(&sys, "ro", 1).level, Level::Ok);
    std::fs::remove_dir_all(t.root.join("sys/fs/cgroup")).unwrap();
    // The sysfs mirror counts when the command line says nothing.
    t.file("sys/devices/system/cpu/isolated", "1,3\n");
    assert_eq!(check_isolated(&sys, "ro", 3).level, Level::Ok);
    assert_eq!(check_isolated(&sys, "ro", 2).level, Level::Warn);

    assert_eq!(
        check_nohz_full(&sys, tuned, 2),
        finding(Level::Ok, "nohz_full", "CPU 2 in nohz_full", None)
    );
    assert_eq!(
        check_nohz_full(&sys, tuned, 1),
        finding(
            Level::Warn,
            "nohz_full",
            "CPU 1 not in nohz_full: the timer tick interrupts it 100-1000 times a second",
            Some("kernel parameter nohz_full=1")
        )
    );
    assert_eq!(
        check_rcu_nocbs("rcu_nocbs=1-7", 1),
        finding(Level::Ok, "rcu_nocbs", "CPU 1 in rcu_nocbs", None)
    );
    assert_eq!(
        check_rcu_nocbs(tuned, 2),
        finding(
            Level::Ok,
            "rcu_nocbs",
            "CPU 2 in nohz_full, which offloads its RCU callbacks",
            None
        )
    );
    assert_eq!(
        check_rcu_nocbs(tuned, 0),
        finding(
            Level::Warn,
            "rcu_nocbs",
            "CPU 0 runs its own RCU callbacks (not in rcu_nocbs or nohz_full)",
            Some("kernel parameter rcu_nocbs=0")
        )
    );
}

#[test]
fn latency_irq_affinity_fails_on_the_nics_irqs() {
    let t = Tree::new("lat-irq");
    let sys = t.sys();
    assert_eq!(
        check_irq_affinity(&sys, 1, None),
        finding(
            Level::Skip,
            "irq affinity",
            "/proc/irq cannot be read",
            None
        )
    );
    t.file("sys/devices/system/cpu/online", "0-3\n")
        .file("proc/irq/24/smp_affinity_list", "0-3\n")
        .file("proc/irq/24/effective_affinity_list", "0\n")
        .file("proc/irq/36/smp_affinity_list", "0-3\n")
        .file("proc/irq/98/smp_affinity_list", "1\n")
        .file("proc/irq/99/smp_affinity_list", "2\n")
        .file("sys/class/infiniband/mlx5_0/device/msi_irqs/98", "msix")
        .file("sys/class/infiniband/mlx5_0/device/msi_irqs/99", "msix");
    assert_eq!(
        check_irq_affinity(&sys, 1, Some("mlx5_0")),
        finding(
            Level::Fail,
            "irq affinity",
            "the RDMA device's IRQs 98 may land on CPU 1; mlx5_0's IRQs 98-99",
            Some("for IRQ in 98; do echo 0,2-3 > /proc/irq/$IRQ/smp_affinity_list; done")
        )
    );
    // Not the NIC's: a warn (24 goes to CPU 0 only, by its effective affinity).
    assert_eq!(
        check_irq_affinity(&sys, 3, Some("mlx5_0")),
        finding(
            Level::Warn,
            "irq affinity",
            "1 IRQs may land on CPU 3 (36); mlx5_0's IRQs 98-99",
            Some("for IRQ in 36; do echo 0-2 > /proc/irq/$IRQ/smp_affinity_list; done")
        )
    );
    t.file("proc/irq/36/smp_affinity_list", "0\n");
    assert_eq!(
        check_irq_affinity(&sys, 3, None),
        finding(
            Level::Ok,
            "irq affinity",
            "no IRQ may land on CPU 3; no device given: the RDMA device's IRQs not known",
            None
        )
    );
}

#[test]
fn latency_irqbalance_and_timer_migration() {
    let t = Tree::new("lat-irqbalance");
    let sys = t.sys();
    t.file("proc/1/comm", "systemd\n");
    assert_eq!(
        check_irqbalance(&sys, "", 2),
        finding(Level::Ok, "irqbalance", "not running", None)
    );
    t.file("proc/812/comm", "irqbalance\n");
    assert_eq!(
        check_irqbalance(&sys, "", 2),
        finding(
            Level::Warn,
            "irqbalance",
            "running, and free to move IRQs onto CPU 2",
            Some(
                "IRQBALANCE_BANNED_CPULIST=2 in /etc/default/irqbalance (or \
                 /etc/sysconfig/irqbalance) and restart it, or systemctl stop irqbalance"
            )
        )
    );
    assert_eq!(
        check_irqbalance(&sys, "nohz_full=2", 2).saw,
        "running; it leaves CPU 2 alone (isolcpus/nohz_full)"
    );
    t.file(
        "etc/sysconfig/irqbalance",
        "# comment\nIRQBALANCE_BANNED_CPULIST=\"2-3\"\n",
    );
    assert_eq!(
        check_irqbalance(&sys, "", 2),
        finding(
            Level::Ok,
            "irqbalance",
            "running, CPU 2 in IRQBALANCE_BANNED_CPULIST",
            None
        )
    );

    assert_eq!(check_timer_migration(&sys).level, Level::Skip);
    t.file("proc/sys/kernel/timer_migration", "1\n");
    assert_eq!(
        check_timer_migration(&sys),
        finding(
            Level::Warn,
            "timer migration",
            "kernel.timer_migration = 1: idle CPUs' timers move to busy ones",
            Some("sysctl kernel.timer_migration=0")
        )
    );
    t.file("proc/sys/kernel/timer_migration", "0\n");
    assert_eq!(check_timer_migration(&sys).level, Level::Ok);
}

#[test]
fn latency_governor_and_cstates() {
    let t = Tree::new("lat-power");
    let sys = t.sys();
    assert_eq!(
        check_governor(&sys, 1),
        finding(
            Level::Skip,
            "governor",
            "no cpufreq for CPU 1 (a virtual machine, or the frequency is not under the \
             kernel's control)",
            None
        )
    );
    t.file(
        "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "powersave\n",
    )
    .file("sys/devices/system/cpu/intel_pstate/no_turbo", "0\n");
    assert_eq!(
        check_governor(&sys, 1),
        finding(
            Level::Warn,
            "governor",
            "CPU 1 governor powersave, turbo on",
            Some("cpupower -c 1 frequency-set -g performance")
        )
    );
    t.file(
        "sys/devices/system/cpu/cpu1/cpufreq/scaling_governor",
        "performance\n",
    );
    assert_eq!(
        check_governor(&sys, 1),
        finding(
            Level::Ok,
            "governor",
            "CPU 1 governor performance, turbo on",
            None
        )
    );

    assert_eq!(check_cstates(&sys, 1).level, Level::Skip);
    let st = "sys/devices/system/cpu/cpu1/cpuidle";
    t.file(
        "sys/devices/system/cpu/cpuidle/current_driver",
        "intel_idle\n",
    )
    .file(&format!("{st}/state0/name"), "POLL\n")
    .file(&format!("{st}/state0/latency"), "0\n")
    .file(&format!("{st}/state0/disable"), "0\n")
    .file(&format!("{st}/state1/name"), "C1\n")
    .file(&format!("{st}/state1/latency"), "2\n")
    .file(&format!("{st}/state1/disable"), "0\n")
    .file(&format!("{st}/state2/name"), "C6\n")
    .file(&format!("{st}/state2/latency"), "133\n")
    .file(&format!("{st}/state2/disable"), "0\n");
    assert_eq!(
        check_cstates(&sys, 1),
        finding(
            Level::Warn,
            "c-states",
            "idle driver intel_idle; POLL 0 us, C1 2 us, C6 133 us: deep states enabled (C6)",
            Some(
                "cpupower -c 1 idle-set -D 10 (or kernel parameters intel_idle.max_cstate=1 \
                 processor.max_cstate=1, or hold /dev/cpu_dma_latency open with 0)"
            )
        )
    );
    // A latency target held on /dev/cpu_dma_latency keeps C6 out of reach; the limits on
    // the command line are evidence.
    t.file("proc/cmdline", "ro intel_idle.max_cstate=1 quiet");
    t.file("dev/cpu_dma_latency", "");
    std::fs::write(t.root.join("dev/cpu_dma_latency"), 0i32.to_ne_bytes()).unwrap();
    assert_eq!(latency::cpu_dma_latency_us(&sys), Some(0));
    assert_eq!(
        check_cstates(&sys, 1),
        finding(
            Level::Ok,
            "c-states",
            "idle driver intel_idle; POLL 0 us, C1 2 us, C6 133 us; intel_idle.max_cstate=1; \
             /dev/cpu_dma_latency 0 us",
            None
        )
    );
    // Nobody holding it: the default target reaches every state.
    std::fs::write(
        t.root.join("dev/cpu_dma_latency"),
        2_000_000_000i32.to_ne_bytes(),
    )
    .unwrap();
    assert_eq!(check_cstates(&sys, 1).level, Level::Warn);
    std::fs::remove_file(t.root.join("dev/cpu_dma_latency")).unwrap();
    std::fs::remove_file(t.root.join("proc/cmdline")).unwrap();
    t.file(&format!("{st}/state2/disable"), "1\n");
    assert_eq!(
        check_cstates(&sys, 1),
        finding(
            Level::Ok,
            "c-states",
            "idle driver intel_idle; POLL 0 us, C1 2 us, C6 133 us (disabled)",
            None
        )
    );
}

#[test]
fn latency_smt_sibling_busy_time_from_proc_stat() {
    let t = Tree::new("lat-smt-busy");
    let sys = t.sys();
    t.file(
        "sys/devices/system/cpu/cpu2/topology/thread_siblings_list",
        "2,6\n",
    );
    // user nice system idle iowait irq softirq steal: cpu6 busy 40 of 100 ticks, idle 1 of
    // 100 in the second pair.
    let a = "cpu  0 0 0 0 0 0 0 0\ncpu2 10 0 10 100 0 0 0 0\ncpu6 100 0 50 1000 10 0 0 0\n";
    let busy = "cpu  0 0 0 0 0 0 0 0\ncpu2 10 0 10 200 0 0 0 0\ncpu6 130 0 60 1050 20 0 0 0\n";
    let idle = "cpu  0 0 0 0 0 0 0 0\ncpu2 10 0 10 200 0 0 0 0\ncpu6 100 0 51 1099 10 0 0 0\n";
    assert_eq!(latency::cpu_busy_pct(a, busy, 6), Some(40.0));
    assert_eq!(latency::cpu_busy_pct(a, idle, 6), Some(1.0));
    assert_eq!(latency::cpu_busy_pct(a, a, 6), None);
    assert_eq!(latency::cpu_busy_pct(a, busy, 7), None);
    assert_eq!(
        latency::check_smt_sampled(&sys, "isolcpus=2,6", 2, Some(a), Some(busy)),
        finding(
            Level::Fail,
            "smt sibling",
            "CPU 2's SMT sibling 6 is 40% busy over 250 ms: it takes the core's execution \
             units and caches from the polling loop",
            Some(
                "echo 0 > /sys/devices/system/cpu/cpu6/online (or kernel parameter nosmt); or \
                 move what runs there away (ps -eLo pid,psr,comm | awk '$2==6')"
            )
        )
    );
    assert_eq!(
        latency::check_smt_sampled(&sys, "isolcpus=2,6", 2, Some(a), Some(idle)),
        finding(
            Level::Ok,
            "smt sibling",
            "CPU 2's SMT sibling 6 online and isolated, 1% busy over 250 ms",
            None
        )
    );
    let w = latency::check_smt_sampled(&sys, "", 2, Some(a), Some(idle));
    assert_eq!(w.level, Level::Warn);
    assert_eq!(
        w.saw,
        "CPU 2's SMT sibling 6 is online and not isolated: it shares the core, 1% busy over 250 ms"
    );
}

#[test]
fn latency_watchdogs_stat_interval_and_numa() {
    let t = Tree::new("lat-wd");
    let sys = t.sys();
    assert_eq!(latency::check_watchdogs(&sys, 3).level, Level::Skip);
    t.file("proc/sys/kernel/nmi_watchdog", "1\n")
        .file("sys/devices/system/cpu/online", "0-7\n")
        .file("proc/sys/kernel/watchdog", "1\n")
        .file("proc/sys/kernel/watchdog_cpumask", "0-7\n");
    assert_eq!(
        latency::check_watchdogs(&sys, 3),
        finding(
            Level::Warn,
            "watchdogs",
            "kernel.nmi_watchdog 1, soft lockup watchdog 1, watchdog_cpumask 0-7: they \
             interrupt CPU 3 periodically",
            Some(
                "sysctl kernel.nmi_watchdog=0 (or kernel parameter nmi_watchdog=0); sysctl \
                 kernel.watchdog_cpumask=0-2,4-7 (or kernel parameter nowatchdog)"
            )
        )
    );
    t.file("proc/sys/kernel/nmi_watchdog", "0\n")
        .file("proc/sys/kernel/watchdog_cpumask", "0-2,4-7\n");
    assert_eq!(
        latency::check_watchdogs(&sys, 3),
        finding(
            Level::Ok,
            "watchdogs",
            "kernel.nmi_watchdog 0, soft lockup watchdog 1, watchdog_cpumask 0-2,4-7: none \
             runs on CPU 3",
            None
        )
    );
    assert_eq!(latency::check_watchdogs(&sys, 4).level, Level::Warn);

    assert_eq!(latency::check_stat_interval(&sys).level, Level::Skip);
    t.file("proc/sys/vm/stat_interval", "1\n");
    assert_eq!(
        latency::check_stat_interval(&sys),
        finding(
            Level::Warn,
            "vmstat interval",
            "vm.stat_interval = 1: the vmstat work interrupts the CPU that often",
            Some("sysctl vm.stat_interval=10")
        )
    );
    t.file("proc/sys/vm/stat_interval", "120\n");
    assert_eq!(
        latency::check_stat_interval(&sys),
        finding(
            Level::Ok,
            "vmstat interval",
            "vm.stat_interval = 120 s",
            None
        )
    );

    assert_eq!(
        latency::check_numa_latency(&sys, 3, None).level,
        Level::Skip
    );
    t.file("sys/class/infiniband/mlx5_0/device/numa_node", "-1\n");
    assert_eq!(
        latency::check_numa_latency(&sys, 3, Some("mlx5_0")).level,
        Level::Skip
    );
    t.file("sys/class/infiniband/mlx5_0/device/numa_node", "1\n")
        .file("sys/devices/system/node/node1/cpulist", "8-15\n")
        .file("proc/self/status", "Name:\tx\nMems_allowed_list:\t0-1\n");
    assert_eq!(
        latency::check_numa_latency(&sys, 3, Some("mlx5_0")),
        finding(
            Level::Fail,
            "numa",
            "CPU 3 is not on mlx5_0's NUMA node 1 (CPUs 8-15): every DMA and doorbell crosses \
             the interconnect",
            Some("poll on a CPU of node 1, e.g. CPU 8")
        )
    );
    assert_eq!(
        latency::check_numa_latency(&sys, 9, Some("mlx5_0")),
        finding(
            Level::Warn,
            "numa",
            "CPU 9 on mlx5_0's node 1; memory may come from nodes 0-1",
            Some("numactl --cpunodebind=1 --membind=1 <engine>")
        )
    );
    t.file("proc/self/status", "Name:\tx\nMems_allowed_list:\t1\n");
    assert_eq!(
        latency::check_numa_latency(&sys, 9, Some("mlx5_0")),
        finding(
            Level::Ok,
            "numa",
            "CPU 9 and the process's memory on mlx5_0's NUMA node 1",
            None
        )
    );
}

#[test]
fn latency_smt_thp_and_swap() {
    let t = Tree::new("lat-mem");
    let sys = t.sys();
    assert_eq!(check_smt(&sys, "", 2).level, Level::Skip);
    t.file(
        "sys/devices/system/cpu/cpu2/topology/thread_siblings_list",
        "2,6\n",
    )
    .file(
        "sys/devices/system/cpu/cpu3/topology/thread_siblings_list",
        "3\n",
    );
    assert_eq!(
        check_smt(&sys, "", 2),
        finding(
            Level::Warn,
            "smt sibling",
            "CPU 2's SMT sibling 6 is online and not isolated: it shares the core",
            Some("echo 0 > /sys/devices/system/cpu/cpu6/online (or kernel parameter nosmt)")
        )
    );
    assert_eq!(
        check_smt(&sys, "isolcpus=2,6", 2).saw,
        "CPU 2's SMT sibling 6 online and isolated"
    );
    assert_eq!(check_smt(&sys, "isolcpus=2,6", 2).level, Level::Ok);
    t.file("sys/devices/system/cpu/cpu6/online", "0\n");
    assert_eq!(
        check_smt(&sys, "", 2),
        finding(
            Level::Ok,
            "smt sibling",
            "CPU 2 has no online SMT sibling",
            None
        )
    );
    assert_eq!(check_smt(&sys, "", 3).level, Level::Ok);

    let thp = "sys/kernel/mm/transparent_hugepage";
    assert_eq!(check_thp(&sys).level, Level::Skip);
    t.file(&format!("{thp}/enabled"), "[always] madvise never\n")
        .file(
            &format!("{thp}/defrag"),
            "always defer defer+madvise [madvise] never\n",
        );
    assert_eq!(
        check_thp(&sys),
        finding(
            Level::Warn,
            "thp",
            "enabled always, defrag madvise: khugepaged and page faults may stall on compaction",
            Some(
                "echo madvise > /sys/kernel/mm/transparent_hugepage/enabled (or kernel \
                 parameter transparent_hugepage=madvise)"
            )
        )
    );
    t.file(&format!("{thp}/enabled"), "always [madvise] never\n")
        .file(
            &format!("{thp}/defrag"),
            "[always] defer defer+madvise madvise never\n",
        );
    assert_eq!(
        check_thp(&sys).fix.as_deref(),
        Some("echo defer+madvise > /sys/kernel/mm/transparent_hugepage/defrag")
    );
    t.file(
        &format!("{thp}/defrag"),
        "always defer [defer+madvise] madvise never\n",
    );
    assert_eq!(
        check_thp(&sys),
        finding(
            Level::Ok,
            "thp",
            "enabled madvise, defrag defer+madvise",
            None
        )
    );
    t.file(&format!("{thp}/khugepaged/defrag"), "1\n");
    assert_eq!(
        check_thp(&sys),
        finding(
            Level::Warn,
            "thp",
            "enabled madvise, defrag defer+madvise, khugepaged defrag 1: khugepaged compacts \
             memory to collapse huge pages",
            Some("echo 0 > /sys/kernel/mm/transparent_hugepage/khugepaged/defrag")
        )
    );
    t.file(&format!("{thp}/khugepaged/defrag"), "0\n");
    assert_eq!(check_thp(&sys).level, Level::Ok);

    assert_eq!(check_swap(&sys).level, Level::Skip);
    let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
    t.file("proc/swaps", header);
    assert_eq!(
        check_swap(&sys),
        finding(Level::Ok, "swap", "no swap", None)
    );
    t.file(
        "proc/swaps",
        &format!("{header}/dev/sda2  partition\t8388604\t\t0\t\t-2\n"),
    );
    assert_eq!(
        check_swap(&sys),
        finding(
            Level::Warn,
            "swap",
            "swap on /dev/sda2: an idle page of the engine may be swapped out and fault back \
             in on the hot path",
            Some("swapoff -a, or mlockall(MCL_CURRENT | MCL_FUTURE) in the engine")
        )
    );
}

#[test]
fn latency_walk_default_cpu_and_verdict() {
    let t = Tree::new("lat-walk");
    let sys = t.sys();
    t.file("proc/cmdline", "ro isolcpus=3 nohz_full=3 -- isolcpus=1")
        .file("proc/irq/5/smp_affinity_list", "0\n")
        .file("proc/sys/kernel/timer_migration", "0\n")
        .file("proc/sys/kernel/nmi_watchdog", "0\n")
        .file("proc/sys/kernel/watchdog", "0\n")
        .file("proc/sys/vm/stat_interval", "10\n")
        .file("proc/swaps", "Filename Type Size Used Priority\n")
        .file(
            "sys/devices/system/cpu/cpu3/cpufreq/scaling_governor",
            "performance\n",
        )
        .file("sys/devices/system/cpu/cpufreq/boost", "0\n")
        .file(
            "sys/devices/system/cpu/cpu3/topology/thread_siblings_list",
            "3\n",
        )
        .file(
            "sys/kernel/mm/transparent_hugepage/enabled",
            "always [madvise] never\n",
        )
        .file("sys/class/infiniband/mlx5_0/device/local_cpulist", "0-3\n")
        .file("sys/class/infiniband/mlx5_0/device/msi_irqs/5", "msix");
    let f = latency::check_latency(&sys, 3, Some("mlx5_0"), &host());
    let names: Vec<&str> = f.iter().map(|f| f.check).collect();
    assert_eq!(
        names,
        [
            "isolcpus",
            "nohz_full",
            "rcu_nocbs",
            "irq affinity",
            "irqbalance",
            "timer migration",
            "watchdogs",
            "vmstat interval",
            "governor",
            "c-states",
            "smt sibling",
            "numa",
            "thp",
            "swap",
            "memlock"
        ]
    );
    let levels: Vec<Level> = f.iter().map(|f| f.level).collect();
    use Level::*;
    assert_eq!(
        levels,
        [Ok, Ok, Ok, Ok, Ok, Ok, Ok, Ok, Ok, Skip, Ok, Skip, Ok, Ok, Ok],
        "{f:#?}"
    );
    assert_eq!(
        latency::latency_verdict(3, &f),
        "CPU 3 is ready for a polling loop"
    );
    // CPU 0: the NIC's IRQ 5 goes there (the FAIL comes first in the verdict, after warns).
    let f0 = latency::check_latency(&sys, 0, Some("mlx5_0"), &host());
    assert_eq!(f0[0].level, Warn);
    assert_eq!(
        latency::latency_verdict(0, &f0),
        "CPU 0 is not ready: first fix irq affinity: for IRQ in 5; do echo <the other CPUs> > \
         /proc/irq/$IRQ/smp_affinity_list; done"
    );

    // The device's local CPUs, not 0 when there is a choice; else the last allowed CPU.
    assert_eq!(
        latency::default_cpu(&sys, Some("mlx5_0"), &[0, 1, 2]),
        Some(1)
    );
    assert_eq!(latency::default_cpu(&sys, Some("mlx5_0"), &[0]), Some(0));
    assert_eq!(latency::default_cpu(&sys, None, &[0, 1, 2]), Some(2));
    assert_eq!(latency::default_cpu(&sys, Some("nope"), &[4, 5]), Some(5));
    assert_eq!(latency::default_cpu(&sys, None, &[]), None);
}
