//! Helpers an embedding program needs around the hot loop: a busy-poll with a stall
//! deadline ([`poll_wait`]), a drain before teardown ([`drain`]), thread pinning
//! ([`pin_current_thread`]) and the CPUs near a device ([`local_cpus`]).
//!
//! The poll helpers spin on [`CompletionQueue::poll`] (no system call on mlx5/sim) and read
//! the clock only every 1024 empty polls; they give up with an [`Error::Io`] of kind
//! `TimedOut` when nothing arrives for the stall time, naming how many completions are
//! still missing, so a missing receive or a dead peer shows up as an error, not a hang.

use super::{Completion, CompletionQueue, Provider, ProviderKind};
use crate::error::{Error, Result};
use std::time::{Duration, Instant};

fn stalled(missing: usize, stall: Duration) -> Error {
    Error::Io {
        context: "poll".into(),
        kind: std::io::ErrorKind::TimedOut,
        detail: format!(
            "no completion for {} s with {missing} still expected (a receive not posted? \
             the peer gone? the QP in ERR?)",
            stall.as_secs_f64()
        ),
    }
}

/// Busy-polls `cq` (a CQ of `p`'s, or a pair of `p`'s that owns its CQ) into `out` until at
/// least one completion arrives (returns how many), or nothing arrived for `stall` (an error).
pub fn poll_wait<P: Provider, C: CompletionQueue>(
    p: &mut P,
    cq: &mut C,
    out: &mut [Completion],
    stall: Duration,
) -> Result<usize> {
    let since = Instant::now();
    let mut spins = 0u32;
    loop {
        p.progress();
        let n = cq.poll(out);
        if n > 0 || out.is_empty() {
            return Ok(n);
        }
        spins = spins.wrapping_add(1);
        if spins % 1024 == 0 && since.elapsed() >= stall {
            return Err(stalled(1, stall));
        }
    }
}

/// Polls `cq` until `expected` **requests** ended, handing each completion to `each`; an
/// error when nothing arrives for `stall`. A completion ends `1 + covered` requests (its own
/// and the unsignaled ones before it it retires, [`Completion::covered`]; a receive and a
/// flush end their own), so `expected` is what was posted and not yet retired (a
/// [`crate::flow::SendWindow::in_flight`] plus the receives posted), whatever was signaled.
/// Use it before teardown, or after moving a QP to ERR ([`crate::recover`]), so no request
/// is left under the device.
pub fn drain<P: Provider, C: CompletionQueue>(
    p: &mut P,
    cq: &mut C,
    expected: usize,
    stall: Duration,
    mut each: impl FnMut(&Completion),
) -> Result<()> {
    let mut wc = [Completion::EMPTY; 32];
    let mut left = expected;
    while left > 0 {
        // At most `left` completions: each ends at least one request.
        let n =
            poll_wait(p, cq, &mut wc[..left.min(32)], stall).map_err(|_| stalled(left, stall))?;
        for c in &wc[..n] {
            each(c);
            left = left.saturating_sub(1 + c.covered as usize);
        }
    }
    Ok(())
}

/// Pins the calling thread to `cpu` (`sched_setaffinity`).
pub fn pin_current_thread(cpu: usize) -> Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(Error::InvalidArgument {
            context: "pin_current_thread",
            detail: format!("CPU {cpu} is beyond CPU_SETSIZE {}", libc::CPU_SETSIZE),
        });
    }
    // SAFETY: an all-zero cpu_set_t is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: `set` is a valid cpu_set_t of the size given; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        return Err(Error::verb(
            "sched_setaffinity",
            errno,
            format!("CPU {cpu} offline or outside this process's cpuset?"),
        ));
    }
    Ok(())
}

/// Parses a kernel CPU list (`0-3,8,10-11`).
pub fn parse_cpulist(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    Some(out)
}

/// The CPUs local to the device (its NUMA node), from
/// `/sys/class/infiniband/DEV/device/local_cpulist`. The sim is local to every online CPU.
pub fn local_cpus<P: Provider>(p: &P) -> Result<Vec<usize>> {
    let path = if p.kind() == ProviderKind::Sim {
        "/sys/devices/system/cpu/online".to_string()
    } else {
        format!(
            "/sys/class/infiniband/{}/device/local_cpulist",
            p.device_name()
        )
    };
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(path.clone(), &e))?;
    parse_cpulist(&text).ok_or_else(|| Error::Protocol {
        context: "local_cpus",
        detail: format!("{path}: unparsable CPU list {:?}", text.trim()),
    })
}
