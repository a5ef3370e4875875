//! Outlier attribution (`perf --attribute`) on the software device: a delay injected inside
//! chosen samples through [`Params::inject`] makes them outliers; a delay spent off the CPU
//! (the thread sleeps, as when the host takes the CPU away) is attributed to an interruption
//! of the polling CPU, a delay spent polling (a late answer) is not. The kernel's counters read
//! around the run ([`Watch`]) see the sleeps as the thread blocking.

use std::time::Duration;

use rdma_direct::doctor::Sysfs;
use rdma_direct::noise::Watch;
use rdma_direct::perf::{self, Inject, Outliers, Params, Test};
use rdma_direct::providers::sim::SimDevice;

const EVERY: u32 = 50;
const ITERS: u32 = 200;
/// Far above a sample on the sim (microseconds) and above a scheduler slice, so a loaded
/// machine's own outliers do not push the injected ones out of the listed slowest.
const DELAY: Duration = Duration::from_millis(20);

/// `test` on a deterministic sim (the one thread does the device's work), with the delay,
/// inside a [`Watch`]: the row's outliers and what the kernel counted.
fn run(test: Test, off_cpu: bool) -> (Outliers, rdma_direct::noise::Watched) {
    let mut o = Params::new(test);
    o.iters = ITERS;
    o.threads = Some(1);
    o.inject = Some(Inject {
        every: EVERY,
        delay: DELAY,
        off_cpu,
    });
    let mut dev = SimDevice::new();
    let sys = Sysfs::system();
    let w = Watch::start(&sys);
    let r = perf::run(&mut dev, &o).expect("the run");
    let watched = w.finish(&sys, &[]);
    assert_eq!(r.outliers.len(), 1);
    (r.outliers[0].clone(), watched)
}

/// The injected iterations (their samples run from their stamp to the next one).
fn injected() -> Vec<u32> {
    (0..ITERS - 1).filter(|i| i % EVERY == EVERY - 1).collect()
}

#[test]
fn a_delay_off_the_cpu_is_an_interruption() {
    for test in [Test::ReadLat, Test::WriteLat] {
        let (o, watched) = run(test, true);
        assert!(o.count >= 3, "{test:?}: {o:?}");
        for i in injected() {
            let hit = o
                .worst
                .iter()
                .find(|x| x.iteration == i)
                .unwrap_or_else(|| panic!("{test:?}: iteration {i} not an outlier: {o:?}"));
            assert!(hit.interrupted, "{test:?}: {hit:?}");
            assert!(hit.away_ns >= DELAY.as_nanos() as u64 / 2, "{hit:?}");
        }
        assert!(o.interrupted >= 3, "{o:?}");
        // Each sleep blocked the thread: the kernel counted it.
        let ctx = watched.ctx.expect("this thread's context switches");
        assert!(ctx.voluntary >= 3, "{watched:?}");
        assert!(
            watched.likely().contains("the thread blocked"),
            "{}",
            watched.likely()
        );
    }
}

#[test]
fn a_delay_spent_polling_is_a_late_answer() {
    let (o, watched) = run(Test::ReadLat, false);
    let ctx = watched.ctx.expect("this thread's context switches");
    let taken = ctx.involuntary;
    let mut flagged = 0;
    for i in injected() {
        let hit = o
            .worst
            .iter()
            .find(|x| x.iteration == i)
            .unwrap_or_else(|| panic!("iteration {i} not an outlier: {o:?}"));
        assert!(hit.sample_ns >= DELAY.as_nanos() as u64, "{hit:?}");
        if taken == 0 {
            // The thread never lost its CPU: polling all along, no long stretch.
            assert!(
                !hit.interrupted && hit.away_ns < DELAY.as_nanos() as u64 / 10,
                "{hit:?}"
            );
        }
        // Marked only when the thread was away for half the delay or more in one stretch.
        assert_eq!(
            hit.interrupted,
            hit.away_ns * 2 >= (hit.sample_ns - o.median_ns),
            "{hit:?}"
        );
        flagged += u64::from(hit.interrupted);
    }
    // Only a real loss of the CPU (another task preempting the thread, which the kernel
    // counts) may mark a polled delay as an interruption; on a quiet machine none is.
    assert!(
        flagged <= taken,
        "{flagged} flagged, {taken} context switches: {o:?}"
    );
    assert!(o.count - o.interrupted >= 3 - flagged.min(3), "{o:?}");
}
