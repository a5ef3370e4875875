//! Whether a run's busy threads have CPUs to themselves: the warning a tool gives (before
//! its results) when they do not.
//!
//! A run spins: its poller(s), and on the software device (and the stand-in, the sim behind a
//! libibverbs) the device thread, which polls doorbells as hardware would. When these
//! outnumber the CPUs free to them, the kernel time-slices them and a latency reads the
//! scheduler's quantum (on the sim, 1 us became 300 us on a loaded 2-core host).
//!
//! Contract ([`warning`], a pure function of [`Room`]): the CPUs free to the run are those of
//! its affinity (and cgroup quota: `available_parallelism`) less the share of other work on
//! them. Other work is the smaller of the 1-minute load average and the threads runnable now
//! (`procs_running` less this one), scaled by the share of the online CPUs the run may use:
//! a past run of this tool still in the average, or a brief spike now, does not count alone.
//! The warning names the counts and the fixes (idle CPUs, `taskset`, fewer threads).
//! [`busy`] counts and names a run's spinning threads, [`device_thread`] says whether a
//! provider spins one in this process. Nothing here prints: the caller words the line.

/// What the host offers a run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Room {
    /// CPUs this process may run on (affinity mask, cgroup quota).
    pub allowed: usize,
    /// CPUs online on the host.
    pub online: usize,
    /// The 1-minute load average (`/proc/loadavg`), if readable.
    pub load1: Option<f64>,
    /// Threads runnable now on the host (`procs_running` of `/proc/stat`), this one included.
    pub running: Option<u32>,
}

impl Room {
    /// The running host's.
    pub fn probe() -> Room {
        let allowed = std::thread::available_parallelism().map_or(1, usize::from);
        let online = std::fs::read_to_string("/sys/devices/system/cpu/online")
            .ok()
            .and_then(|s| crate::doctor::parse_cpulist(s.trim()))
            .map_or(allowed, |c| c.len())
            .max(allowed);
        let load1 = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok());
        let running = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("procs_running"))
                .and_then(|v| v.trim().parse().ok())
        });
        Room {
            allowed,
            online,
            load1,
            running,
        }
    }

    /// Other work on this run's CPUs, in CPUs (see the module doc).
    pub fn taken(&self) -> f64 {
        let now = self.running.map(|r| f64::from(r.saturating_sub(1)));
        let others = match (self.load1, now) {
            (Some(l), Some(n)) => l.min(n),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => 0.0,
        };
        let share = self.allowed as f64 / self.online.max(1) as f64;
        (others * share).min(self.allowed as f64)
    }

    /// CPUs free to the run, to the nearest whole one.
    pub fn free(&self) -> usize {
        (self.allowed as f64 - self.taken()).max(0.0).round() as usize
    }
}

/// The warning for `busy` spinning threads (`what` names them) in `room`, `None` when they
/// fit.
pub fn warning(busy: usize, what: &str, room: &Room) -> Option<String> {
    let free = room.free();
    if busy <= free {
        return None;
    }
    let load = match (room.load1, room.running) {
        (Some(l), Some(r)) => format!("load average {l:.2}, {r} threads runnable now"),
        (Some(l), None) => format!("load average {l:.2}"),
        (None, Some(r)) => format!("{r} threads runnable now"),
        (None, None) => "load unknown".into(),
    };
    Some(format!(
        "warning: {busy} busy thread{} ({what}) for {free} free CPU{} ({} in this process's \
         affinity mask, about {:.1} taken by other work: {load}): the threads will share \
         CPUs and the figures show the scheduler, not the data path; run on idle CPUs \
         (taskset -c LIST), or with fewer busy threads",
        if busy == 1 { "" } else { "s" },
        if free == 1 { "" } else { "s" },
        room.allowed,
        room.taken()
    ))
}

/// Whether a provider of `kind` has a device thread spinning in this process: the software
/// device, and the stand-in's devices (the sim behind a libibverbs).
pub fn device_thread(kind: crate::providers::ProviderKind) -> bool {
    #[cfg(feature = "sim")]
    let standin = matches!(
        crate::providers::sim::standin::attach_if_standin(),
        Ok(true)
    );
    #[cfg(not(feature = "sim"))]
    let standin = false;
    kind == crate::providers::ProviderKind::Sim || standin
}

/// The busy threads of a run of `pollers` polling threads, and a device thread when
/// `device_thread`: (count, names).
pub fn busy(pollers: usize, device_thread: bool) -> (usize, &'static str) {
    match (pollers, device_thread) {
        (1, true) => (2, "the poller and the software device's thread"),
        (_, true) => (
            pollers + 1,
            "client and server pollers and the software device's thread",
        ),
        (1, false) => (1, "the poller"),
        (_, false) => (pollers, "client and server pollers"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn room(allowed: usize, online: usize, load1: f64, running: u32) -> Room {
        Room {
            allowed,
            online,
            load1: Some(load1),
            running: Some(running),
        }
    }

    #[test]
    fn an_idle_host_has_room() {
        // 2 CPUs, nothing else running (the probing thread itself is runnable).
        assert_eq!(room(2, 2, 0.02, 1).free(), 2);
        assert_eq!(warning(2, "x", &room(2, 2, 0.02, 1)), None);
        // A past run still in the average, nothing runnable now: room.
        assert_eq!(warning(2, "x", &room(2, 2, 1.9, 1)), None);
        // A spike now that the average does not show: room.
        assert_eq!(warning(2, "x", &room(2, 2, 0.1, 6)), None);
    }

    #[test]
    fn busy_threads_beyond_the_free_cpus_are_warned_of() {
        // One CPU in the mask (taskset -c 0), the sim: poller and device thread.
        let w = warning(2, "the poller and the device thread", &room(1, 2, 0.0, 1)).unwrap();
        assert!(
            w.starts_with("warning: 2 busy threads (the poller and the device thread) for 1 free CPU (1 in this process's affinity mask, about 0.0 taken"),
            "{w}"
        );
        assert!(w.contains("taskset -c LIST"), "{w}");
        // A loaded 2-core host: load 6.47 and 10 runnable besides this thread.
        let r = room(2, 2, 6.47, 11);
        assert_eq!(r.free(), 0);
        let w = warning(1, "the poller", &r).unwrap();
        assert!(
            w.contains("1 busy thread (the poller) for 0 free CPUs"),
            "{w}"
        );
        assert!(
            w.contains("load average 6.47, 11 threads runnable now"),
            "{w}"
        );
        // Load on a large host is shared out over its CPUs: 2 of 64 allowed, load 24 → 0.75.
        let r = room(2, 64, 24.0, 40);
        assert_eq!(r.free(), 1);
        assert!(warning(2, "x", &r).is_some());
        assert!(warning(1, "x", &r).is_none());
    }
}
