//! Where a measurement runs: the CPU a sweep's measuring thread is pinned to.
//!
//! Contract: [`choose`] picks, for a device, the first CPU both local to it (its NUMA node,
//! `/sys/class/infiniband/DEV/device/local_cpulist`) and allowed to this process
//! (`Cpus_allowed_list` of `/proc/self/status`); without a device, or when its list cannot
//! be read or shares no CPU with the allowed ones, the last allowed CPU (CPU 0 usually takes
//! more of the machine's interrupts). [`choose_n`] picks distinct CPUs for several
//! measuring threads: the first is [`choose`]'s, the others the remaining allowed CPUs, local
//! ones first, then from the last down. [`Pin`] says whether to pin at all. Reading the lists
//! is the only I/O; pinning itself is [`pin_current_thread`](crate::providers::helpers::pin_current_thread).

use crate::providers::helpers::parse_cpulist;

/// Whether and where the measuring thread is pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Pin {
    /// To [`choose`]'s CPU (the default: unpinned runs moved 1.25-1.63x between two runs
    /// on a busy 2-core machine, pinned ones within 5 %).
    #[default]
    Auto,
    /// To this CPU.
    Cpu(usize),
    /// Not pinned: the scheduler places the thread.
    Off,
}

/// Why the CPU was chosen (for the report).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chosen {
    pub cpu: usize,
    /// "local to DEV", "the last allowed CPU", "asked for".
    pub why: String,
}

/// The CPUs this process may run on; `None` where `/proc/self/status` has no list.
pub fn allowed() -> Option<Vec<usize>> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?;
    parse_cpulist(line).filter(|v| !v.is_empty())
}

/// The CPUs local to the RDMA device `dev`; `None` where sysfs does not say.
pub fn local_to(dev: &str) -> Option<Vec<usize>> {
    let path = format!("/sys/class/infiniband/{dev}/device/local_cpulist");
    let s = std::fs::read_to_string(path).ok()?;
    parse_cpulist(&s).filter(|v| !v.is_empty())
}

/// The choice among `allowed` given the device's `local` CPUs (see the module doc).
pub fn pick(allowed: &[usize], local: Option<&[usize]>, dev: Option<&str>) -> Option<Chosen> {
    if let (Some(l), Some(d)) = (local, dev) {
        if let Some(&c) = allowed.iter().find(|c| l.contains(c)) {
            return Some(Chosen {
                cpu: c,
                why: format!("local to {d}"),
            });
        }
    }
    allowed.last().map(|&c| Chosen {
        cpu: c,
        why: "the last allowed CPU".into(),
    })
}

/// The CPU for `pin` with device `dev` (`None`: not pinned, or nothing to choose from).
pub fn choose(pin: Pin, dev: Option<&str>) -> Option<Chosen> {
    match pin {
        Pin::Off => None,
        Pin::Cpu(c) => Some(Chosen {
            cpu: c,
            why: "asked for".into(),
        }),
        Pin::Auto => {
            let local = dev.and_then(local_to);
            pick(&allowed()?, local.as_deref(), dev)
        }
    }
}

/// `n` distinct CPUs among `allowed` (see the module doc), the first being `first`;
/// `None` when fewer than `n` are allowed.
pub fn pick_n(
    allowed: &[usize],
    local: Option<&[usize]>,
    first: Chosen,
    n: usize,
) -> Option<Vec<Chosen>> {
    let mut rest: Vec<usize> = allowed.iter().rev().copied().collect();
    if let Some(l) = local {
        // Stable: local CPUs (in reverse order too) before the others.
        rest.sort_by_key(|c| !l.contains(c));
    }
    let mut v = vec![first];
    for c in rest {
        if v.len() == n {
            break;
        }
        if v.iter().all(|x| x.cpu != c) {
            v.push(Chosen {
                cpu: c,
                why: "another allowed CPU for another thread".into(),
            });
        }
    }
    (v.len() == n).then_some(v)
}

/// CPUs for `n` measuring threads with `pin` and device `dev`: `n` entries, `None` each when
/// not pinned; an error when fewer than `n` CPUs are allowed.
pub fn choose_n(pin: Pin, dev: Option<&str>, n: usize) -> Result<Vec<Option<Chosen>>, String> {
    let Some(first) = choose(pin, dev) else {
        return Ok(vec![None; n]);
    };
    if n <= 1 {
        return Ok(vec![Some(first)]);
    }
    let allowed = allowed().unwrap_or_default();
    let local = dev.and_then(local_to);
    pick_n(&allowed, local.as_deref(), first, n)
        .map(|v| v.into_iter().map(Some).collect())
        .ok_or_else(|| {
            format!(
                "Params::threads {n}: this process may run on {} CPU(s) ({allowed:?}); \
                 pinned threads need one each (fewer threads, or Pin::Off)",
                allowed.len()
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_cpus_first_else_the_last_allowed() {
        let allowed = [0, 1, 2, 3];
        let got = pick(&allowed, Some(&[2, 3, 6][..]), Some("mlx5_0")).unwrap();
        assert_eq!((got.cpu, got.why.as_str()), (2, "local to mlx5_0"));
        // Local CPUs outside the allowed set: the last allowed one.
        let got = pick(&allowed, Some(&[6, 7][..]), Some("mlx5_0")).unwrap();
        assert_eq!((got.cpu, got.why.as_str()), (3, "the last allowed CPU"));
        assert_eq!(pick(&allowed, None, None).unwrap().cpu, 3);
        assert_eq!(pick(&[], None, None), None);
        assert_eq!(choose(Pin::Off, None), None);
        assert_eq!(choose(Pin::Cpu(5), None).unwrap().cpu, 5);
        // This process has an allowed list on Linux: Auto picks one of it.
        let a = super::allowed().expect("Cpus_allowed_list");
        assert!(a.contains(&choose(Pin::Auto, None).unwrap().cpu));
    }

    #[test]
    fn threads_get_distinct_cpus_local_first() {
        let first = |cpu| Chosen {
            cpu,
            why: "x".into(),
        };
        let cpus = |v: Vec<Chosen>| v.iter().map(|c| c.cpu).collect::<Vec<_>>();
        let allowed = [0, 1, 2, 3];
        assert_eq!(
            cpus(pick_n(&allowed, None, first(3), 3).unwrap()),
            [3, 2, 1]
        );
        // Local 1 and 2: after the first, the local ones, then the rest from the top.
        let got = pick_n(&allowed, Some(&[1, 2][..]), first(2), 4).unwrap();
        assert_eq!(cpus(got), [2, 1, 3, 0]);
        // A CPU asked for outside the list still comes first; never twice.
        assert_eq!(cpus(pick_n(&allowed, None, first(1), 2).unwrap()), [1, 3]);
        assert_eq!(pick_n(&allowed, None, first(3), 5), None);
        assert_eq!(choose_n(Pin::Off, None, 3).unwrap(), vec![None; 3]);
    }
}
