//! The spinning thread: pinned to one CPU, it reads the tick source (`crate::tsc`) in a
//! tight loop, and every gap between two consecutive reads above the threshold is an
//! interruption (the CPU was doing something else: an interrupt, a softirq, another task, a
//! hypervisor's exit).
//!
//! Contract: [`spin_on`] first calibrates for [`CALIBRATE`] (the tick rate against
//! `Instant`, and the loop's own smallest gap), then spins for the duration asked; while
//! spinning it allocates nothing, takes no lock and makes no system call (the gaps are stored
//! into a buffer reserved beforehand, [`MAX_STORED`] at most; beyond that they still count in
//! the histogram and the maximum). The context-switch counters of the thread are read before
//! and after (`/proc/self/task/TID/status`).

use std::time::{Duration, Instant};

use super::procfs::{parse_ctxt_switches, CtxSwitches};
use crate::doctor::Sysfs;

/// How long the loop calibrates before it measures.
pub const CALIBRATE: Duration = Duration::from_millis(5);

/// The default threshold is this many times the loop's smallest gap...
pub const THRESHOLD_X_MIN: u64 = 10;

/// ...and at least this many nanoseconds: below it a gap is the loop's own variation (a cache
/// miss, a branch mispredicted), not the CPU going away.
pub const THRESHOLD_FLOOR_NS: u64 = 100;

/// The most interruptions whose exact durations are kept for the percentiles (the first
/// ones of the run; 512 KiB a CPU).
pub const MAX_STORED: usize = 1 << 16;

/// Buckets of a [`Histogram`]: bucket `k` holds gaps of `2^k` up to `2^(k+1) - 1` ns; the
/// last one everything from `2^47` ns (39 hours) up.
pub const BUCKETS: usize = 48;

/// Interruptions by duration, on a log2 scale.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram {
    /// `counts[k]`: interruptions of `2^k ..= 2^(k+1) - 1` ns.
    pub counts: [u64; BUCKETS],
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: [0; BUCKETS],
        }
    }
}

impl Histogram {
    /// The bucket of `ns` (0 ns goes with 1 ns into bucket 0).
    pub fn bucket(ns: u64) -> usize {
        (63 - ns.max(1).leading_zeros() as usize).min(BUCKETS - 1)
    }

    /// Counts one interruption of `ns`.
    #[inline]
    pub fn add(&mut self, ns: u64) {
        self.counts[Self::bucket(ns)] += 1;
    }

    /// All interruptions counted.
    pub fn total(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The non-empty buckets as `(lowest ns, count)`, ascending.
    pub fn nonempty(&self) -> Vec<(u64, u64)> {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(k, &n)| (1u64 << k, n))
            .collect()
    }
}

/// What one spinning thread saw.
#[derive(Clone, Debug, PartialEq)]
pub struct Spin {
    /// The CPU asked for.
    pub cpu: u32,
    /// `sched_setaffinity` to it failed: why (the thread spun wherever the scheduler put it).
    pub pin_error: Option<String>,
    /// Loop iterations while measuring.
    pub loops: u64,
    /// How long it measured, ns.
    pub spun_ns: u64,
    /// The loop's smallest gap while calibrating, ns.
    pub min_gap_ns: f64,
    /// The threshold used, ns: a gap above it is an interruption.
    pub threshold_ns: u64,
    /// Interruptions.
    pub count: u64,
    /// Their total duration, ns (the time this CPU was not the thread's).
    pub lost_ns: u64,
    /// The longest, ns.
    pub max_ns: u64,
    /// Their durations by log2 bucket.
    pub hist: Histogram,
    /// The exact durations, ns, in order, up to [`MAX_STORED`].
    pub gaps_ns: Vec<u64>,
    /// The thread's context switches while measuring; `None` if its status was unreadable.
    pub ctx: Option<CtxSwitches>,
}

impl Spin {
    /// The `p`-th percentile (0 < p <= 100) of the interruptions' durations, ns, nearest
    /// rank over the stored durations; 0 without interruptions.
    pub fn percentile(&self, p: f64) -> u64 {
        let mut v = self.gaps_ns.clone();
        v.sort_unstable();
        if v.is_empty() {
            return 0;
        }
        // The epsilon keeps 99.9 % of 1000 at rank 999 despite the float's last digit.
        let rank = ((p / 100.0) * v.len() as f64 - 1e-9).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }
}

/// Pins the calling thread to `cpu`; `Err` with the reason.
fn pin(cpu: u32) -> Result<(), String> {
    if cpu as usize >= libc::CPU_SETSIZE as usize {
        return Err(format!("CPU {cpu} is beyond CPU_SETSIZE"));
    }
    // SAFETY: cpu_set_t is plain bits, valid all-zero; CPU_SET writes the bit of `cpu`, which
    // is checked above to lie within the set.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        libc::CPU_SET(cpu as usize, &mut set);
        set
    };
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc == 0 {
        Ok(())
    } else {
        let e = std::io::Error::last_os_error();
        Err(format!(
            "sched_setaffinity(CPU {cpu}): {e} (is CPU {cpu} online and in this process's \
             cpuset? `taskset -pc $$` shows the allowed CPUs)"
        ))
    }
}

/// This thread's context switches, from `proc/self/task/TID/status` below `sys`'s root.
fn ctx_now(sys: &Sysfs, tid: i64) -> Option<CtxSwitches> {
    parse_ctxt_switches(&sys.read(&format!("proc/self/task/{tid}/status"))?)
}

/// The calling thread's id.
fn gettid() -> i64 {
    // SAFETY: gettid takes no arguments, cannot fail and touches no memory.
    unsafe { libc::syscall(libc::SYS_gettid) }
}

/// What [`spin_on`] waits for after calibrating: [`WAIT`] until [`GO`] (all threads begin
/// together) or [`ABORT`] (a sibling thread could not be started).
pub const WAIT: u8 = 0;
/// See [`WAIT`].
pub const GO: u8 = 1;
/// See [`WAIT`].
pub const ABORT: u8 = 2;

/// Pins the calling thread to `cpu`, calibrates, waits for `start` to leave [`WAIT`], spins
/// for `duration` on [`GO`] and returns what it saw (`None` on [`ABORT`]). `threshold_ns`: `None` for the
/// calibrated one ([`THRESHOLD_X_MIN`] x the smallest gap, at least
/// [`THRESHOLD_FLOOR_NS`]).
pub fn spin_on(
    sys: &Sysfs,
    cpu: u32,
    duration: Duration,
    threshold_ns: Option<u64>,
    start: &std::sync::atomic::AtomicU8,
) -> Option<Spin> {
    let pin_error = pin(cpu).err();
    let tid = gettid();

    // Calibration: the tick rate and the smallest gap, checking the time every 1024 reads.
    let rate = crate::tsc::Rate::start();
    let t0 = Instant::now();
    let mut min_gap = u64::MAX;
    let mut prev = crate::tsc::now();
    let mut i = 0u32;
    loop {
        let t = crate::tsc::now();
        min_gap = min_gap.min(t.wrapping_sub(prev));
        prev = t;
        i = i.wrapping_add(1);
        if i % 1024 == 0 && t0.elapsed() >= CALIBRATE {
            break;
        }
    }
    let ns_per_tick = rate.ns_per_tick();
    // A clock so coarse that two reads were equal has a smallest gap of 0 ticks.
    let min_gap_ns = min_gap as f64 * ns_per_tick;
    let threshold_ns = threshold_ns
        .unwrap_or_else(|| ((min_gap_ns * THRESHOLD_X_MIN as f64) as u64).max(THRESHOLD_FLOOR_NS));
    let to_ticks = |ns: u64| {
        if ns_per_tick > 0.0 {
            (ns as f64 / ns_per_tick) as u64
        } else {
            ns
        }
    };
    let threshold = to_ticks(threshold_ns);
    let span = to_ticks(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));

    let mut gaps_ns = Vec::with_capacity(MAX_STORED);
    let mut hist = Histogram::default();
    let (mut count, mut lost, mut max, mut loops) = (0u64, 0u64, 0u64, 0u64);
    let go = loop {
        match start.load(std::sync::atomic::Ordering::Acquire) {
            WAIT => std::hint::spin_loop(),
            s => break s == GO,
        }
    };
    if !go {
        return None;
    }
    let ctx0 = ctx_now(sys, tid);
    let begin = crate::tsc::now();
    let end = begin.saturating_add(span);
    let mut prev = begin;
    loop {
        let t = crate::tsc::now();
        let d = t.wrapping_sub(prev);
        if d > threshold {
            let ns = (d as f64 * ns_per_tick) as u64;
            hist.add(ns);
            count += 1;
            lost += ns;
            max = max.max(ns);
            if gaps_ns.len() < MAX_STORED {
                gaps_ns.push(ns);
            }
        }
        prev = t;
        loops += 1;
        if t >= end {
            break;
        }
    }
    let spun_ns = (prev.wrapping_sub(begin) as f64 * ns_per_tick) as u64;
    let ctx = match (ctx0, ctx_now(sys, tid)) {
        (Some(a), Some(b)) => Some(a.delta(&b)),
        _ => None,
    };
    Some(Spin {
        cpu,
        pin_error,
        loops,
        spun_ns,
        min_gap_ns,
        threshold_ns,
        count,
        lost_ns: lost,
        max_ns: max,
        hist,
        gaps_ns,
        ctx,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_powers_of_two() {
        assert_eq!(Histogram::bucket(0), 0);
        assert_eq!(Histogram::bucket(1), 0);
        assert_eq!(Histogram::bucket(2), 1);
        assert_eq!(Histogram::bucket(3), 1);
        assert_eq!(Histogram::bucket(1023), 9);
        assert_eq!(Histogram::bucket(1024), 10);
        assert_eq!(Histogram::bucket(u64::MAX), BUCKETS - 1);
        let mut h = Histogram::default();
        for ns in [100, 127, 128, 5000] {
            h.add(ns);
        }
        assert_eq!(h.total(), 4);
        assert_eq!(h.nonempty(), vec![(64, 2), (128, 1), (4096, 1)]);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let mut s = Spin {
            cpu: 0,
            pin_error: None,
            loops: 0,
            spun_ns: 0,
            min_gap_ns: 0.0,
            threshold_ns: 100,
            count: 0,
            lost_ns: 0,
            max_ns: 0,
            hist: Histogram::default(),
            gaps_ns: vec![],
            ctx: None,
        };
        assert_eq!(s.percentile(99.0), 0);
        s.gaps_ns = (1..=1000).rev().collect();
        assert_eq!(s.percentile(99.0), 990);
        assert_eq!(s.percentile(99.9), 999);
        assert_eq!(s.percentile(100.0), 1000);
        assert_eq!(s.percentile(50.0), 500);
    }
}
