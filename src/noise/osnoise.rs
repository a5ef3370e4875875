//! The kernel's osnoise tracer (Linux 5.14+) as a witness: while the spinning threads run,
//! its tracepoints record every interrupt, softirq, NMI and thread that took a CPU, by name.
//!
//! Contract: [`Session::start`] takes the tracer only when it is free and can run without its
//! own workload (the `NO_OSNOISE_WORKLOAD` option, 6.3+: its workload threads would compete
//! with ours), and says why not otherwise (tracefs not mounted, no osnoise tracer, another
//! tracer in use, not permitted). [`Session::finish`] puts back the `nop` tracer and the
//! workload option, and returns the per-source counts read from the trace buffer.
//! [`parse_events`] is the pure part: trace text in, counts out.

use crate::doctor::Sysfs;

/// What took the CPU, per the osnoise tracepoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NoiseSource {
    /// The CPU it ran on.
    pub cpu: u32,
    /// `irq`, `softirq`, `nmi` or `thread` (the tracepoint's name without `_noise`).
    pub kind: String,
    /// Its name: the IRQ's (`local_timer`), the softirq's (`TIMER`), the thread's command
    /// (`kworker/1:1`); empty for NMIs.
    pub name: String,
    /// How many times.
    pub count: u64,
    /// Their total duration, ns.
    pub total_ns: u64,
}

/// Drops a trailing `:number` (an IRQ vector, a softirq number, a thread id).
fn strip_number(s: &str) -> &str {
    match s.rsplit_once(':') {
        Some((name, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => s,
    }
}

/// The osnoise events of a trace buffer's text (`irq_noise`, `softirq_noise`, `nmi_noise`,
/// `thread_noise` lines), summed by CPU, kind and name, in order of first appearance. Other
/// lines (comments, other events) are skipped.
pub fn parse_events(trace: &str) -> Vec<NoiseSource> {
    let mut out: Vec<NoiseSource> = Vec::new();
    for line in trace.lines() {
        if line.trim_start().starts_with('#') {
            continue;
        }
        let Some(cpu) = line
            .split_once('[')
            .and_then(|(_, r)| r.split_once(']'))
            .and_then(|(n, _)| n.trim().parse::<u32>().ok())
        else {
            continue;
        };
        let Some((kind, rest)) = ["irq", "softirq", "nmi", "thread"]
            .iter()
            .find_map(|k| Some((*k, line.split_once(&format!(" {k}_noise:"))?.1)))
        else {
            continue;
        };
        let (who, tail) = match rest.split_once("start ") {
            Some((w, t)) => (w.trim(), t),
            None => continue,
        };
        let ns = tail
            .split_once("duration ")
            .and_then(|(_, d)| d.split_whitespace().next()?.parse::<u64>().ok())
            .unwrap_or(0);
        let name = strip_number(who).to_string();
        match out
            .iter_mut()
            .find(|s| s.cpu == cpu && s.kind == kind && s.name == name)
        {
            Some(s) => {
                s.count += 1;
                s.total_ns += ns;
            }
            None => out.push(NoiseSource {
                cpu,
                kind: kind.to_string(),
                name,
                count: 1,
                total_ns: ns,
            }),
        }
    }
    out
}

/// The tracefs directory below `sys`'s root, if mounted.
fn tracefs(sys: &Sysfs) -> Option<&'static str> {
    ["sys/kernel/tracing", "sys/kernel/debug/tracing"]
        .into_iter()
        .find(|d| sys.exists(&format!("{d}/available_tracers")))
}

/// A running osnoise trace (see the module doc).
#[derive(Debug)]
pub struct Session {
    sys: Sysfs,
    dir: &'static str,
}

impl Session {
    /// Takes the osnoise tracer for `cpus`, without its workload; `Err` says why it is not
    /// available (the text after "not available: ").
    pub fn start(sys: &Sysfs, cpus: &[u32]) -> Result<Session, String> {
        let dir = tracefs(sys).ok_or(
            "tracefs is not mounted (mount -t tracefs nodev /sys/kernel/tracing) or the kernel \
             has no tracing",
        )?;
        let tracers = sys
            .read(&format!("{dir}/available_tracers"))
            .unwrap_or_default();
        if !tracers.split_whitespace().any(|t| t == "osnoise") {
            return Err(format!(
                "the kernel has no osnoise tracer (/{dir}/available_tracers: {tracers}; it \
                 needs Linux 5.14+ with CONFIG_OSNOISE_TRACER)"
            ));
        }
        let current = sys
            .read(&format!("{dir}/current_tracer"))
            .unwrap_or_default();
        if current != "nop" {
            return Err(format!(
                "the tracer '{current}' is in use (/{dir}/current_tracer): not taking it over"
            ));
        }
        let options = sys
            .read(&format!("{dir}/osnoise/options"))
            .unwrap_or_default();
        if !options.contains("OSNOISE_WORKLOAD") {
            return Err(format!(
                "this kernel's osnoise cannot run without its own workload (no \
                 OSNOISE_WORKLOAD in /{dir}/osnoise/options; Linux 6.3+), which would \
                 compete with the spinning threads"
            ));
        }
        let s = Session {
            sys: sys.clone(),
            dir,
        };
        let list = crate::doctor::format_cpulist(cpus);
        s.write("osnoise/options", "NO_OSNOISE_WORKLOAD")
            .and_then(|_| s.write("osnoise/cpus", &list))
            .and_then(|_| s.write("trace", ""))
            .and_then(|_| s.write("events/osnoise/enable", "1"))
            .and_then(|_| s.write("current_tracer", "osnoise"))
            .map_err(|e| {
                s.restore();
                format!("not permitted: {e} (root, or CAP_SYS_ADMIN with tracefs access)")
            })?;
        Ok(s)
    }

    fn write(&self, rel: &str, v: &str) -> Result<(), String> {
        let p = self.sys.path(&format!("{}/{rel}", self.dir));
        std::fs::write(&p, v).map_err(|e| format!("writing {}: {e}", p.display()))
    }

    /// Puts back what [`Session::start`] changed (errors ignored: best effort).
    fn restore(&self) {
        let _ = self.write("current_tracer", "nop");
        let _ = self.write("events/osnoise/enable", "0");
        let _ = self.write("osnoise/options", "OSNOISE_WORKLOAD");
    }

    /// Stops the tracer, restores the settings and returns what it saw.
    pub fn finish(self) -> Vec<NoiseSource> {
        let _ = self.write("current_tracer", "nop");
        let text = self
            .sys
            .read(&format!("{}/trace", self.dir))
            .unwrap_or_default();
        self.restore();
        let _ = self.write("trace", "");
        parse_events(&text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "# tracer: osnoise\n\
#\n\
#                                _-----=> irqs-off\n\
#           TASK-PID     CPU#  ||||   TIMESTAMP  FUNCTION\n\
#              | |         |   ||||      |         |\n\
     rdma-direct-4242    [001] d.h..   812.345678: irq_noise: local_timer:236 start 812.345670 duration 2345 ns\n\
     rdma-direct-4242    [001] d.h..   812.346678: irq_noise: local_timer:236 start 812.346670 duration 1655 ns\n\
     rdma-direct-4242    [001] ..s..   812.346680: softirq_noise:    TIMER:1 start 812.346675 duration 800 ns\n\
     rdma-direct-4243    [000] d.h..   812.400000: irq_noise: mlx5_comp0@pci:0000:3b:00.0:98 start 812.399990 duration 900 ns\n\
     kworker/0:1-15      [000] .....   812.500000: thread_noise: kworker/0:1:15 start 812.499000 duration 41000 ns\n\
     rdma-direct-4243    [000] d.h..   812.600000: nmi_noise: start 812.599999 duration 300 ns\n\
     rdma-direct-4243    [000] d....   812.700000: sched_switch: prev_comm=x\n";

    #[test]
    fn events_by_cpu_kind_and_name() {
        let got = parse_events(TRACE);
        let want = |cpu, kind: &str, name: &str, count, total_ns| NoiseSource {
            cpu,
            kind: kind.into(),
            name: name.into(),
            count,
            total_ns,
        };
        assert_eq!(
            got,
            vec![
                want(1, "irq", "local_timer", 2, 4000),
                want(1, "softirq", "TIMER", 1, 800),
                want(0, "irq", "mlx5_comp0@pci:0000:3b:00.0", 1, 900),
                want(0, "thread", "kworker/0:1", 1, 41000),
                want(0, "nmi", "", 1, 300),
            ]
        );
        assert_eq!(parse_events(""), vec![]);
    }
}
