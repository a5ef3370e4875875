//! Host noise: how often, how long and why the CPUs a polling loop would run on are taken
//! away from it.
//!
//! [`measure`] runs one spinning thread per CPU of a list (by default every CPU this process
//! may run on), each pinned to its CPU and reading the tick source in a tight loop for a
//! duration; every gap between two reads above a threshold is an **interruption** (see
//! [`spin`]). Per CPU it returns the count, the percentiles and maximum of the
//! interruptions' durations and their log2 histogram ([`Spin`]), and the **attribution**: what
//! the kernel counted on that CPU over the same time (the deltas of `/proc/interrupts` per
//! IRQ, named, the RDMA device's own IRQs marked; of `/proc/softirqs`; of the hypervisor's
//! steal time in `/proc/stat`), the spinning thread's own context switches, and, when the
//! kernel's osnoise tracer is available and free, its per-source counts ([`osnoise`]).
//! [`CpuNoise::likely`] puts them into one sentence: what this CPU's interruptions most
//! likely were.
//!
//! Contract: the library prints nothing; `rdma-direct jitter` prints a [`Report`] as a table,
//! JSON or SVG. The text parsers ([`procfs`], [`osnoise::parse_events`]) are pure; the
//! files are read below a [`Sysfs`] root. A spinning thread allocates nothing and makes no
//! system call while it measures. The percentiles and the histogram are of the
//! interruptions only (not of every loop iteration); `count` equals the histogram's total.
//! CPUs this process may not run on are refused; one that still cannot be pinned (it went
//! offline meanwhile) is measured wherever its thread ran and says so.
//!
//! Lives behind the `doctor` feature, beside the tuning checks ([`crate::doctor::latency`]).

pub mod osnoise;
/// The kernel's counters this module reads; they live with the host checks, which read them too.
pub use crate::doctor::procfs;
#[cfg(feature = "report")]
pub mod report;
pub mod room;
pub mod spin;
pub mod watch;

use std::time::Duration;

use crate::doctor::{HostFacts, Sysfs};
use crate::error::{Error, Result};

pub use osnoise::NoiseSource;
pub use procfs::{Counters, CtxSwitches, PerCpuTable};
pub use spin::{Histogram, Spin};
pub use watch::{Watch, Watched};

/// What to measure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The CPUs, one spinning thread each; empty: every CPU this process may run on
    /// (`sched_getaffinity`).
    pub cpus: Vec<u32>,
    /// How long each thread measures (after [`spin::CALIBRATE`]).
    pub duration: Duration,
    /// A gap above this many ns is an interruption; `None`: calibrated from the loop's own
    /// smallest gap ([`spin::THRESHOLD_X_MIN`], [`spin::THRESHOLD_FLOOR_NS`]).
    pub threshold_ns: Option<u64>,
    /// The RDMA device whose IRQs are named as such (`mlx5_0`).
    pub device: Option<String>,
    /// Take the osnoise tracer for the run when it is free (it is put back afterwards).
    pub osnoise: bool,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            cpus: Vec::new(),
            duration: Duration::from_secs(5),
            threshold_ns: None,
            device: None,
            osnoise: true,
        }
    }
}

/// One named counter's increase on one CPU while the threads spun.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counted {
    /// `/proc/interrupts`' key (`LOC`, `98`) or the softirq's name (`TIMER`).
    pub key: String,
    /// The description (`Local timer interrupts`, `PCI-MSIX-0000:3b:00.0 0-edge mlx5_comp0`);
    /// empty for softirqs.
    pub desc: String,
    /// One of the RDMA device's IRQs.
    pub nic: bool,
    /// How many on this CPU.
    pub count: u64,
}

/// One CPU: its spinning thread's measurement and what the kernel counted there meanwhile.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuNoise {
    /// The measurement.
    pub spin: Spin,
    /// Hard interrupts on this CPU, most frequent first (zero counts left out).
    pub irqs: Vec<Counted>,
    /// Softirqs on this CPU, most frequent first (zero counts left out).
    pub softirqs: Vec<Counted>,
    /// Hypervisor steal time on this CPU, ns (`/proc/stat`, 10 ms resolution); `None`
    /// without the counter.
    pub steal_ns: Option<u64>,
    /// What the osnoise tracer saw on this CPU (empty when it did not run).
    pub osnoise: Vec<NoiseSource>,
}

/// The result of [`measure`].
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    /// Per CPU, in the order asked.
    pub cpus: Vec<CpuNoise>,
    /// The duration asked for.
    pub duration: Duration,
    /// With [`Config::device`]: its IRQ numbers, or why they could not be found.
    pub nic_irqs: Option<std::result::Result<Vec<u32>, String>>,
    /// `Ok(())` if the osnoise tracer ran, else why not ("not available: ...").
    pub osnoise: std::result::Result<(), String>,
}

/// The non-zero counts of table `t` on `cpu`, most frequent first; `nic`: the table is
/// `/proc/interrupts` and these IRQ numbers are the RDMA device's.
pub fn counted(t: &PerCpuTable, cpu: u32, nic: Option<&[u32]>) -> Vec<Counted> {
    if !t.cpus.contains(&cpu) {
        return Vec::new();
    }
    let mut v: Vec<Counted> = t
        .rows
        .iter()
        .map(|r| Counted {
            key: r.key.clone(),
            desc: r.desc.clone(),
            nic: nic.is_some_and(|n| r.key.parse::<u32>().is_ok_and(|k| n.contains(&k))),
            count: t.count(&r.key, cpu),
        })
        .filter(|c| c.count > 0)
        .collect();
    v.sort_by_key(|c| std::cmp::Reverse(c.count));
    v
}

impl CpuNoise {
    /// Builds a CPU's report from its measurement, the counters' increase (`delta`) and the
    /// osnoise sources of every CPU.
    pub fn attribute(
        spin: Spin,
        delta: &Counters,
        nic_irqs: &[u32],
        osnoise: &[NoiseSource],
    ) -> CpuNoise {
        let cpu = spin.cpu;
        CpuNoise {
            irqs: counted(&delta.interrupts, cpu, Some(nic_irqs)),
            softirqs: counted(&delta.softirqs, cpu, None),
            steal_ns: delta
                .steal
                .iter()
                .find(|&&(c, _)| c == cpu)
                .map(|&(_, ticks)| ticks * 10_000_000),
            osnoise: osnoise.iter().filter(|s| s.cpu == cpu).cloned().collect(),
            spin,
        }
    }

    /// What this CPU's interruptions most likely were, in one sentence: the causes the
    /// counters saw, the likeliest first (another task taking the CPU, whose gaps are a
    /// scheduler slice; the hypervisor's steal; the osnoise sources; the hard interrupts,
    /// the device's named; the softirqs), and how many of the interruptions they account
    /// for.
    pub fn likely(&self) -> String {
        let s = &self.spin;
        if s.count == 0 {
            return "quiet: no interruption above the threshold".to_string();
        }
        let mut causes: Vec<String> = Vec::new();
        let mut accounted = 0u64;
        if let Some(c) = s.ctx {
            if c.involuntary > 0 {
                causes.push(format!(
                    "another task took this CPU ({} involuntary context switches: a process \
                     shares the CPU)",
                    c.involuntary
                ));
                accounted += c.involuntary;
            }
            if c.voluntary > 0 {
                causes.push(format!(
                    "the thread blocked ({} voluntary context switches: a page fault or a \
                     lock)",
                    c.voluntary
                ));
                accounted += c.voluntary;
            }
        }
        if let Some(st) = self.steal_ns.filter(|&n| n > 0) {
            causes.push(format!(
                "the hypervisor ran something else ({} ms of steal time)",
                st / 1_000_000
            ));
        }
        let mut noise: Vec<&NoiseSource> = self.osnoise.iter().collect();
        noise.sort_by_key(|n| std::cmp::Reverse(n.total_ns));
        for n in noise.iter().take(3) {
            causes.push(format!(
                "osnoise {} {} ({} times, {} us)",
                n.kind,
                if n.name.is_empty() { "-" } else { &n.name },
                n.count,
                n.total_ns / 1000
            ));
        }
        for i in self.irqs.iter().take(3) {
            causes.push(format!(
                "{}IRQ {} {} ({})",
                if i.nic { "the NIC's " } else { "" },
                i.key,
                i.desc,
                i.count
            ));
        }
        accounted += self.irqs.iter().map(|i| i.count).sum::<u64>();
        for sirq in self.softirqs.iter().take(2) {
            causes.push(format!("softirq {} ({})", sirq.key, sirq.count));
        }
        if causes.is_empty() {
            return format!(
                "{} interruptions, none counted by the kernel on this CPU: a hypervisor's exits \
                 or firmware (SMIs) most likely",
                s.count
            );
        }
        let mut out = format!("most likely: {}", causes.join("; "));
        if accounted < s.count {
            out.push_str(&format!(
                "; {} of {} interruptions have no counted cause (hypervisor exits, SMIs, stalls \
                 of the CPU itself)",
                s.count - accounted,
                s.count
            ));
        }
        out
    }
}

/// Runs the spinning threads (see the module doc) and attributes what they saw. Errors: no
/// CPU to run on, a CPU this process may not run on, a zero duration, a thread that could
/// not be started.
pub fn measure(sys: &Sysfs, cfg: &Config) -> Result<Report> {
    let allowed = HostFacts::read(sys).allowed_cpus;
    let cpus = if cfg.cpus.is_empty() {
        allowed.clone()
    } else {
        cfg.cpus.clone()
    };
    if let Some(c) = cpus
        .iter()
        .find(|c| !allowed.is_empty() && !allowed.contains(c))
    {
        return Err(Error::InvalidArgument {
            context: "jitter",
            detail: format!(
                "CPU {c} is not one this process may run on (allowed: {}; offline, or outside \
                 its cpuset or taskset)",
                crate::doctor::format_cpulist(&allowed)
            ),
        });
    }
    if cpus.is_empty() {
        return Err(Error::InvalidArgument {
            context: "jitter",
            detail: "no CPU to measure: this process's CPU list (/proc/self/status \
                     Cpus_allowed_list) is unreadable; name them in Config::cpus"
                .to_string(),
        });
    }
    if cfg.duration.is_zero() {
        return Err(Error::InvalidArgument {
            context: "jitter",
            detail: "the duration is 0: give a positive duration".to_string(),
        });
    }
    let nic_irqs = cfg.device.as_deref().map(|d| procfs::device_irqs(sys, d));
    let nic: Vec<u32> = match &nic_irqs {
        Some(Ok(v)) => v.clone(),
        _ => Vec::new(),
    };

    let session = if cfg.osnoise {
        osnoise::Session::start(sys, &cpus).map_err(|why| format!("not available: {why}"))
    } else {
        Err("not available: not asked for".to_string())
    };
    let before = Counters::read(sys);
    let start = std::sync::atomic::AtomicU8::new(spin::WAIT);
    let spins: Vec<std::io::Result<Option<Spin>>> = std::thread::scope(|sc| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let start = &start;
                std::thread::Builder::new()
                    .name(format!("jitter-cpu{cpu}"))
                    .spawn_scoped(sc, move || {
                        spin::spin_on(sys, cpu, cfg.duration, cfg.threshold_ns, start)
                    })
            })
            .collect();
        let all = handles.iter().all(|h| h.is_ok());
        start.store(
            if all { spin::GO } else { spin::ABORT },
            std::sync::atomic::Ordering::Release,
        );
        handles
            .into_iter()
            .map(|h| {
                h.and_then(|h| {
                    h.join()
                        .map_err(|_| std::io::Error::other("a spinning thread panicked"))
                })
            })
            .collect()
    });
    let after = Counters::read(sys);
    let (sources, osnoise_status) = match session {
        Ok(s) => (s.finish(), Ok(())),
        Err(why) => (Vec::new(), Err(why)),
    };
    let delta = before.delta(&after);
    let mut out = Vec::with_capacity(spins.len());
    for s in spins {
        let s = s
            .map_err(|e| e.to_string())
            .and_then(|s| s.ok_or_else(|| "another spinning thread did not start".to_string()))
            .map_err(|detail| Error::Failed {
                context: "jitter",
                detail: format!("starting the spinning threads: {detail}"),
            })?;
        out.push(CpuNoise::attribute(s, &delta, &nic, &sources));
    }
    Ok(Report {
        cpus: out,
        duration: cfg.duration,
        nic_irqs,
        osnoise: osnoise_status,
    })
}
