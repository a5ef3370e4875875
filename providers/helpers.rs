//! Helpers an embedding program needs around the hot loop: the stall detector every wait
//! loop uses ([`Stall`]), a busy-poll with a stall deadline ([`poll_wait`]), a drain before
//! teardown ([`drain`]), thread pinning ([`pin_current_thread`]) and the CPUs near a device
//! ([`local_cpus`]).
//!
//! The poll helpers spin on [`CompletionQueue::poll`] (no system call on mlx5/sim); their
//! [`Stall`] reads the clock only every [`Stall::CHECK_EVERY`] empty polls and gives up with
//! an [`Error::Stalled`] when nothing arrives for the stall time, naming what is still owed,
//! so a missing receive or a dead peer shows up as an error, not a hang.

use super::{Completion, CompletionQueue, Provider, ProviderKind};
use crate::error::{Error, Result};
use std::time::{Duration, Instant};

/// Turns a wait loop that makes no progress into an [`Error::Stalled`]: the one stall
/// detector of the library's helpers, the flow waits, `perf` and the tool's pingpong runs.
///
/// The loop calls [`Stall::idle`] on each turn that found nothing and [`Stall::progressed`]
/// on each that found something. The clock is read only on every
/// [`CHECK_EVERY`](Stall::CHECK_EVERY)th idle turn, and the first read starts the timer: a
/// wait that ends sooner reads no clock at all (in a TCG guest a clock read may cost an
/// emulated HPET access, which would show in every latency sample). Allocates nothing until
/// it reports the stall.
#[derive(Clone, Copy, Debug)]
pub struct Stall {
    limit: Duration,
    idle: u32,
    since: Option<Instant>,
}

impl Stall {
    /// Idle turns between two clock reads.
    pub const CHECK_EVERY: u32 = 4096;

    /// A detector that reports a stall after `limit` without progress.
    pub const fn new(limit: Duration) -> Stall {
        Stall {
            limit,
            idle: 0,
            since: None,
        }
    }

    /// Something arrived: the timer starts again.
    #[inline]
    pub fn progressed(&mut self) {
        self.idle = 0;
        self.since = None;
    }

    /// One turn that found nothing. `Err(Error::Stalled)` (naming `context` and `owed()`)
    /// once `limit` has passed since the first clock read without progress; otherwise
    /// `Ok(true)` when this turn read the clock (a point for the caller's periodic work: a
    /// yield, a look at a stop flag) and `Ok(false)` when it did not.
    #[inline]
    pub fn idle(&mut self, context: &'static str, owed: impl FnOnce() -> String) -> Result<bool> {
        self.idle = self.idle.wrapping_add(1);
        if self.idle % Self::CHECK_EVERY != 0 {
            return Ok(false);
        }
        match self.since {
            None => self.since = Some(Instant::now()),
            Some(t) if t.elapsed() >= self.limit => {
                return Err(Error::Stalled {
                    context,
                    waited: self.limit,
                    owed: owed(),
                })
            }
            Some(_) => {}
        }
        Ok(true)
    }
}

fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// Busy-polls `cq` (a CQ of `p`'s, or a pair of `p`'s that owns its CQ) into `out` until at
/// least one completion arrives (returns how many), or nothing arrived for `stall` (an error).
pub fn poll_wait<P: Provider, C: CompletionQueue>(
    p: &mut P,
    cq: &mut C,
    out: &mut [Completion],
    stall: Duration,
) -> Result<usize> {
    let mut stalled = Stall::new(stall);
    loop {
        p.progress();
        let n = cq.poll(out);
        if n > 0 || out.is_empty() {
            return Ok(n);
        }
        stalled.idle("poll", || plural(1, "completion"))?;
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
        let n = poll_wait(p, cq, &mut wc[..left.min(32)], stall).map_err(|e| match e {
            Error::Stalled { waited, .. } => Error::Stalled {
                context: "drain",
                waited,
                owed: plural(left, "request"),
            },
            e => e,
        })?;
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stall_reads_the_clock_every_check_and_reports_what_was_owed() {
        let n = Stall::CHECK_EVERY as usize;
        // A zero limit: the first clock read starts the timer, the second reports.
        let mut s = Stall::new(Duration::ZERO);
        let turns = |s: &mut Stall| -> Vec<usize> {
            (1..=n)
                .filter(|_| s.idle("t", || unreachable!()).unwrap())
                .collect()
        };
        assert_eq!(
            turns(&mut s),
            [n],
            "one clock read per CHECK_EVERY idle turns"
        );
        for _ in 1..n {
            assert_eq!(s.idle("t", || unreachable!()), Ok(false));
        }
        assert_eq!(
            s.idle("wait", || "3 receives".into()),
            Err(Error::Stalled {
                context: "wait",
                waited: Duration::ZERO,
                owed: "3 receives".into()
            })
        );
        // Progress starts the timer again: the next check only starts it.
        s.progressed();
        assert_eq!(turns(&mut s), [n]);
        // A long limit never reports within a few checks.
        let mut s = Stall::new(Duration::from_secs(3600));
        for _ in 0..4 * n {
            s.idle("t", || unreachable!()).unwrap();
        }
    }
}
