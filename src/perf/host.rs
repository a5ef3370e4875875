//! The host a measurement ran on, as a report should record it.
//!
//! Contract: [`Host::read`] reads Linux's own files (`/proc/cpuinfo`, `/proc/sys/kernel/
//! osrelease`, the cpufreq governor of CPU 0 in sysfs, `/proc/loadavg`) and never fails: a
//! file that is missing or unreadable (no cpufreq in a VM, another OS) leaves its field
//! `None`. [`load_average`] reads the 1-minute load alone, for "load before and after".
//! [`BUILD_COMMIT`] is the source tree this program was built from (`git describe --always
//! --dirty` at build time, by the package's build script; `None` when built without git).
//! Nothing here measures or prints.

/// What a report says about the machine.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Host {
    /// `model name` of the first CPU in `/proc/cpuinfo`.
    pub cpu_model: Option<String>,
    /// Online CPUs (`available_parallelism`).
    pub cpus: Option<usize>,
    /// cpufreq scaling governor of CPU 0.
    pub governor: Option<String>,
    /// Kernel release.
    pub kernel: Option<String>,
    /// 1-minute load average when read.
    pub load: Option<f64>,
    /// The source tree of this build ([`BUILD_COMMIT`]).
    pub commit: Option<String>,
}

/// `git describe --always --dirty` of the source tree at build time, if git could say.
pub const BUILD_COMMIT: Option<&str> = option_env!("RDMA_DIRECT_COMMIT");

fn read_trimmed(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let t = s.trim();
    (!t.is_empty()).then(|| t.to_string())
}

/// The first `model name` value of a `/proc/cpuinfo` text.
pub fn cpu_model_of(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "model name").then(|| v.trim().to_string())
    })
}

/// The 1-minute load of a `/proc/loadavg` text.
pub fn load_of(loadavg: &str) -> Option<f64> {
    loadavg.split_whitespace().next()?.parse().ok()
}

/// The 1-minute load average now.
pub fn load_average() -> Option<f64> {
    load_of(&std::fs::read_to_string("/proc/loadavg").ok()?)
}

impl Host {
    /// Read what this host says about itself.
    pub fn read() -> Host {
        Host {
            cpu_model: std::fs::read_to_string("/proc/cpuinfo")
                .ok()
                .and_then(|s| cpu_model_of(&s)),
            cpus: std::thread::available_parallelism().ok().map(|n| n.get()),
            governor: read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            kernel: read_trimmed("/proc/sys/kernel/osrelease"),
            load: load_average(),
            commit: BUILD_COMMIT.map(str::to_string),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo_and_loadavg() {
        let info = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) \
                    Gold 6230 CPU @ 2.10GHz\nflags\t\t: fpu\n\nprocessor\t: 1\nmodel name\t: other\n";
        assert_eq!(
            cpu_model_of(info).as_deref(),
            Some("Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz")
        );
        assert_eq!(cpu_model_of("processor : 0\n"), None);
        assert_eq!(load_of("1.25 0.80 0.50 2/345 6789\n"), Some(1.25));
        assert_eq!(load_of(""), None);
    }
}
