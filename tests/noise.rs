//! `rdma_direct::noise`: the spinning measurement run briefly on the CPUs this process may
//! use (its counts consistent with its histogram and stored durations; no timing asserted),
//! and the attribution of a measurement to the kernel's counters, on fixed inputs.

use std::time::Duration;

use rdma_direct::doctor::{HostFacts, Sysfs};
use rdma_direct::noise::procfs::parse_per_cpu;
use rdma_direct::noise::{
    self, spin, Config, Counters, CpuNoise, CtxSwitches, Histogram, NoiseSource, Spin,
};

#[test]
fn spinning_threads_on_every_allowed_cpu_count_what_their_histogram_holds() {
    let sys = Sysfs::system();
    let allowed = HostFacts::probe().allowed_cpus;
    assert!(!allowed.is_empty(), "this process's CPU list is readable");
    let cfg = Config {
        duration: Duration::from_millis(50),
        osnoise: false,
        ..Config::default()
    };
    let r = noise::measure(&sys, &cfg).expect("the measurement runs");
    let cpus: Vec<u32> = r.cpus.iter().map(|c| c.spin.cpu).collect();
    assert_eq!(cpus, allowed, "one thread per allowed CPU, in order");
    assert_eq!(r.osnoise, Err("not available: not asked for".to_string()));
    assert_eq!(r.nic_irqs, None);
    for c in &r.cpus {
        let s = &c.spin;
        assert_eq!(s.pin_error, None, "CPU {} could be pinned", s.cpu);
        assert!(s.loops > 0);
        assert!(s.threshold_ns >= spin::THRESHOLD_FLOOR_NS);
        assert_eq!(s.count, s.hist.total(), "count = the histogram's total");
        assert_eq!(s.gaps_ns.len() as u64, s.count.min(spin::MAX_STORED as u64));
        assert!(s.gaps_ns.iter().all(|&g| g >= s.threshold_ns));
        assert_eq!(s.max_ns, s.gaps_ns.iter().copied().max().unwrap_or(0));
        if s.count <= spin::MAX_STORED as u64 {
            assert_eq!(s.lost_ns, s.gaps_ns.iter().sum::<u64>());
        }
        for g in &s.gaps_ns {
            assert!(s.hist.counts[Histogram::bucket(*g)] > 0);
        }
        assert!(s.percentile(99.0) <= s.percentile(99.9));
        assert!(s.percentile(99.9) <= s.max_ns);
        assert!(s.ctx.is_some(), "the thread's status was readable");
        assert!(!c.likely().is_empty());
    }
}

#[test]
fn a_fixed_threshold_is_used_as_given() {
    let cfg = Config {
        cpus: vec![HostFacts::probe().allowed_cpus[0]],
        duration: Duration::from_millis(20),
        threshold_ns: Some(1_000_000_000),
        osnoise: false,
        ..Config::default()
    };
    let r = noise::measure(&Sysfs::system(), &cfg).unwrap();
    assert_eq!(r.cpus.len(), 1);
    assert_eq!(r.cpus[0].spin.threshold_ns, 1_000_000_000);
    // No 1 s gap in a 20 ms run.
    assert_eq!(r.cpus[0].spin.count, 0);
    assert_eq!(
        r.cpus[0].likely(),
        "quiet: no interruption above the threshold"
    );
}

#[test]
fn bad_configurations_are_refused_with_the_reason() {
    let sys = Sysfs::system();
    let zero = Config {
        duration: Duration::ZERO,
        ..Config::default()
    };
    let e = noise::measure(&sys, &zero).unwrap_err().to_string();
    assert_eq!(
        e,
        "jitter: invalid argument: the duration is 0: give a positive duration"
    );
    let far = Config {
        cpus: vec![4095],
        ..Config::default()
    };
    let e = noise::measure(&sys, &far).unwrap_err().to_string();
    assert!(
        e.contains("CPU 4095 is not one this process may run on"),
        "{e}"
    );
    // A tree with no /proc/self/status: no CPU list to default to.
    let empty = Sysfs::new(std::env::temp_dir().join("rdma-direct-noise-no-such-root"));
    let e = noise::measure(&empty, &Config::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("no CPU to measure"), "{e}");
}

fn spin_with(cpu: u32, gaps: &[u64], ctx: CtxSwitches) -> Spin {
    let mut hist = Histogram::default();
    gaps.iter().for_each(|&g| hist.add(g));
    Spin {
        cpu,
        pin_error: None,
        loops: 1000,
        spun_ns: 50_000_000,
        min_gap_ns: 20.0,
        threshold_ns: 200,
        count: gaps.len() as u64,
        lost_ns: gaps.iter().sum(),
        max_ns: gaps.iter().copied().max().unwrap_or(0),
        hist,
        gaps_ns: gaps.to_vec(),
        ctx: Some(ctx),
    }
}

const IRQ_BEFORE: &str = "           CPU0       CPU1\n \
 98:        120          7  PCI-MSIX-0000:3b:00.0   0-edge      mlx5_comp0@pci:0000:3b:00.0\n \
 36:          0       7546 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
LOC:      39012      40122   Local timer interrupts\n";
const IRQ_AFTER: &str = "           CPU0       CPU1\n \
 98:        120         12  PCI-MSIX-0000:3b:00.0   0-edge      mlx5_comp0@pci:0000:3b:00.0\n \
 36:          0       7548 PCI-MSIX-0000:00:02.0   1-edge      virtio1-req.0\n\
LOC:      39062      40172   Local timer interrupts\n";
const SOFT_BEFORE: &str = "                CPU0       CPU1\n   TIMER:  10  20\n     RCU:  5  5\n";
const SOFT_AFTER: &str = "                CPU0       CPU1\n   TIMER:  60  70\n     RCU:  5  8\n";

fn delta() -> Counters {
    let before = Counters {
        interrupts: parse_per_cpu(IRQ_BEFORE),
        softirqs: parse_per_cpu(SOFT_BEFORE),
        steal: vec![(0, 3), (1, 3)],
    };
    let after = Counters {
        interrupts: parse_per_cpu(IRQ_AFTER),
        softirqs: parse_per_cpu(SOFT_AFTER),
        steal: vec![(0, 3), (1, 5)],
    };
    before.delta(&after)
}

#[test]
fn attribution_names_the_nic_the_tick_and_preemption() {
    let d = delta();
    let gaps: Vec<u64> = (0..60).map(|i| 1000 + i).collect();
    let busy = CpuNoise::attribute(
        spin_with(
            1,
            &gaps,
            CtxSwitches {
                voluntary: 0,
                involuntary: 4,
            },
        ),
        &d,
        &[98],
        &[],
    );
    let keys: Vec<(&str, bool, u64)> = busy
        .irqs
        .iter()
        .map(|c| (c.key.as_str(), c.nic, c.count))
        .collect();
    assert_eq!(
        keys,
        [("LOC", false, 50), ("98", true, 5), ("36", false, 2)]
    );
    assert_eq!(busy.softirqs.len(), 2);
    assert_eq!(busy.steal_ns, Some(20_000_000));
    assert_eq!(
        busy.likely(),
        "most likely: another task took this CPU (4 involuntary context switches: a process \
         shares the CPU); the hypervisor ran something else (20 ms of steal time); IRQ LOC \
         Local timer interrupts (50); the NIC's IRQ 98 PCI-MSIX-0000:3b:00.0 0-edge \
         mlx5_comp0@pci:0000:3b:00.0 (5); IRQ 36 PCI-MSIX-0000:00:02.0 1-edge virtio1-req.0 \
         (2); softirq TIMER (50); softirq RCU (3)"
    );

    // CPU 0: 50 ticks, 80 interruptions: 30 without a counted cause; osnoise's sources.
    let gaps: Vec<u64> = (0..80).map(|i| 500 + i).collect();
    let src = [
        NoiseSource {
            cpu: 0,
            kind: "irq".into(),
            name: "local_timer".into(),
            count: 50,
            total_ns: 90_000,
        },
        NoiseSource {
            cpu: 1,
            kind: "thread".into(),
            name: "kworker/1:1".into(),
            count: 1,
            total_ns: 40_000,
        },
    ];
    let quiet = CpuNoise::attribute(spin_with(0, &gaps, CtxSwitches::default()), &d, &[98], &src);
    assert_eq!(quiet.osnoise.len(), 1);
    assert_eq!(
        quiet.likely(),
        "most likely: osnoise irq local_timer (50 times, 90 us); IRQ LOC Local timer \
         interrupts (50); softirq TIMER (50); 30 of 80 interruptions have no counted cause \
         (hypervisor exits, SMIs, stalls of the CPU itself)"
    );

    // No counter moved at all.
    let none = CpuNoise::attribute(
        spin_with(2, &[700, 900], CtxSwitches::default()),
        &d,
        &[],
        &[],
    );
    assert_eq!(
        none.likely(),
        "2 interruptions, none counted by the kernel on this CPU: a hypervisor's exits or \
         firmware (SMIs) most likely"
    );
}

#[test]
fn device_irqs_from_msi_irqs_or_why_not() {
    let root = std::env::temp_dir().join(format!("rdma-direct-noise-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let dir = root.join("sys/class/infiniband/mlx5_0/device/msi_irqs");
    std::fs::create_dir_all(&dir).unwrap();
    for irq in ["98", "100", "99"] {
        std::fs::write(dir.join(irq), "msix").unwrap();
    }
    std::fs::create_dir_all(root.join("sys/class/infiniband/rxe0")).unwrap();
    let sys = Sysfs::new(&root);
    assert_eq!(
        noise::procfs::device_irqs(&sys, "mlx5_0"),
        Ok(vec![98, 99, 100])
    );
    let e = noise::procfs::device_irqs(&sys, "rxe0").unwrap_err();
    assert!(
        e.contains("rxe0 has no MSI IRQs: a virtual device such as rxe"),
        "{e}"
    );
    let e = noise::procfs::device_irqs(&sys, "nope").unwrap_err();
    assert!(e.contains("no RDMA device 'nope'"), "{e}");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn osnoise_session_says_why_not_or_takes_and_puts_back_the_tracer() {
    use rdma_direct::noise::osnoise::Session;
    let root = std::env::temp_dir().join(format!("rdma-direct-osnoise-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let t = root.join("sys/kernel/tracing");
    let put = |rel: &str, v: &str| {
        let p = t.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, v).unwrap();
    };
    let get = |rel: &str| std::fs::read_to_string(t.join(rel)).unwrap();
    let sys = Sysfs::new(&root);
    let why = |sys: &Sysfs| Session::start(sys, &[0, 1]).unwrap_err();
    assert!(
        why(&sys).starts_with("tracefs is not mounted"),
        "{}",
        why(&sys)
    );
    put("available_tracers", "blk function nop\n");
    assert_eq!(
        why(&sys),
        "the kernel has no osnoise tracer (/sys/kernel/tracing/available_tracers: blk function \
         nop; it needs Linux 5.14+ with CONFIG_OSNOISE_TRACER)"
    );
    put("available_tracers", "timerlat osnoise function nop\n");
    put("current_tracer", "function\n");
    assert_eq!(
        why(&sys),
        "the tracer 'function' is in use (/sys/kernel/tracing/current_tracer): not taking it over"
    );
    put("current_tracer", "nop\n");
    put("osnoise/options", "DEFAULTS PANIC_ON_STOP\n");
    assert!(why(&sys).contains("cannot run without its own workload"));
    put(
        "osnoise/options",
        "DEFAULTS OSNOISE_WORKLOAD PANIC_ON_STOP\n",
    );
    put("trace", "old contents\n");
    std::fs::create_dir_all(t.join("events/osnoise")).unwrap();

    let s = Session::start(&sys, &[0, 1]).expect("the tracer is free");
    assert_eq!(get("current_tracer"), "osnoise");
    assert_eq!(get("osnoise/options"), "NO_OSNOISE_WORKLOAD");
    assert_eq!(get("osnoise/cpus"), "0-1");
    assert_eq!(get("events/osnoise/enable"), "1");
    assert_eq!(get("trace"), "", "the buffer is cleared before the run");
    // What the kernel would have recorded meanwhile.
    put(
        "trace",
        "  x-1 [001] d.h.. 1.0: irq_noise: local_timer:236 start 1.0 duration 2000 ns\n",
    );
    let got = s.finish();
    assert_eq!(
        got,
        vec![NoiseSource {
            cpu: 1,
            kind: "irq".into(),
            name: "local_timer".into(),
            count: 1,
            total_ns: 2000,
        }]
    );
    assert_eq!(get("current_tracer"), "nop");
    assert_eq!(get("events/osnoise/enable"), "0");
    assert_eq!(get("osnoise/options"), "OSNOISE_WORKLOAD");
    let _ = std::fs::remove_dir_all(&root);
}
