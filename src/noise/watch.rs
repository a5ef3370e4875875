//! What the kernel counted on the calling thread's CPU around a piece of work: the
//! embedder's and `perf --attribute`'s view of [`measure`](super::measure)'s attribution,
//! for a loop that is not a spinning thread of its own (a latency test, a trading loop).
//!
//! [`Watch::start`] notes the CPU the calling thread runs on (`sched_getcpu`), its context
//! switches and the per-CPU counters (`/proc/interrupts`, `/proc/softirqs`); [`Watch::finish`],
//! called on the same thread after the work, reads them again and keeps the increase on that
//! CPU ([`Watched`]). Contract: both read files (below a [`Sysfs`] root) and must stay out of
//! any measured loop; nothing here prints; a counter that cannot be read is left out, never
//! an error. A thread that is not pinned may have moved: [`Watched::moved_to`] says so and the
//! counts are those of the CPU it started on.

use super::procfs::{parse_ctxt_switches, Counters, CtxSwitches};
use super::{counted, Counted};
use crate::doctor::Sysfs;

/// Counters noted before the work ([`Watch::start`]).
#[derive(Clone, Debug)]
pub struct Watch {
    cpu: Option<u32>,
    tid: i64,
    ctx: Option<CtxSwitches>,
    before: Counters,
}

/// What the kernel counted on the thread's CPU while it worked ([`Watch::finish`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watched {
    /// The CPU the thread started on (`None`: `sched_getcpu` failed).
    pub cpu: Option<u32>,
    /// The CPU it ended on, when not the same (the thread is not pinned).
    pub moved_to: Option<u32>,
    /// The thread's context switches meanwhile; `None` if its status was unreadable.
    pub ctx: Option<CtxSwitches>,
    /// Hard interrupts on the CPU, most frequent first (zero counts left out).
    pub irqs: Vec<Counted>,
    /// Softirqs on the CPU, most frequent first.
    pub softirqs: Vec<Counted>,
}

fn current_cpu() -> Option<u32> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

fn gettid() -> i64 {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

fn ctx_of(sys: &Sysfs, tid: i64) -> Option<CtxSwitches> {
    parse_ctxt_switches(&sys.read(&format!("proc/self/task/{tid}/status"))?)
}

impl Watch {
    /// Notes the calling thread's CPU, its context switches and the counters.
    pub fn start(sys: &Sysfs) -> Watch {
        let tid = gettid();
        Watch {
            cpu: current_cpu(),
            tid,
            ctx: ctx_of(sys, tid),
            before: Counters::read(sys),
        }
    }

    /// Reads them again (on the thread that called [`Watch::start`]) and keeps the increase
    /// on the CPU it started on. `nic_irqs`: the RDMA device's IRQ numbers, marked as such
    /// ([`procfs::device_irqs`](super::procfs::device_irqs)).
    pub fn finish(self, sys: &Sysfs, nic_irqs: &[u32]) -> Watched {
        let after = Counters::read(sys);
        let ctx = match (self.ctx, ctx_of(sys, self.tid)) {
            (Some(a), Some(b)) => Some(a.delta(&b)),
            _ => None,
        };
        let end = current_cpu();
        let d = self.before.delta(&after);
        let (irqs, softirqs) = match self.cpu {
            Some(c) => (
                counted(&d.interrupts, c, Some(nic_irqs)),
                counted(&d.softirqs, c, None),
            ),
            None => (Vec::new(), Vec::new()),
        };
        Watched {
            cpu: self.cpu,
            moved_to: end.filter(|&e| Some(e) != self.cpu),
            ctx,
            irqs,
            softirqs,
        }
    }
}

impl Watched {
    /// One sentence: what took the CPU meanwhile, the likeliest first (another task, the
    /// thread blocking, the top hard interrupts with the device's named, the top softirqs).
    pub fn likely(&self) -> String {
        let Some(cpu) = self.cpu else {
            return "the CPU the thread ran on is unknown (sched_getcpu failed)".to_string();
        };
        let mut causes = Vec::new();
        if let Some(c) = self.ctx {
            if c.involuntary > 0 {
                causes.push(format!(
                    "another task took the CPU {} times (involuntary context switches)",
                    c.involuntary
                ));
            }
            if c.voluntary > 0 {
                causes.push(format!(
                    "the thread blocked {} times (voluntary context switches: a sleep, a \
                     page fault, a lock)",
                    c.voluntary
                ));
            }
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
        for s in self.softirqs.iter().take(2) {
            causes.push(format!("softirq {} ({})", s.key, s.count));
        }
        let moved = match self.moved_to {
            Some(m) => {
                format!(" (the thread moved to CPU {m}: it is not pinned; pin it with taskset -c)")
            }
            None => String::new(),
        };
        if causes.is_empty() {
            return format!("CPU {cpu}{moved}: nothing counted by the kernel");
        }
        format!("CPU {cpu}{moved}: {}", causes.join("; "))
    }
}
