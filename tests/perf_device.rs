//! The perf measurement engine (`rdma_direct::perf::run`) end to end; how the CLI parses
//! perftest's flags and prints the rows is tested in `src/bin/rdma-direct/perf/`.
//!
//! - On a real verbs device (`#[ignore]`d; `RDMA_DIRECT_DEVICE=rxe0`, the guest bed sets
//!   it): a short `write_lat` and `write_bw` (with and without a post list), rows checked
//!   for sanity.
//! - On the software mlx5 device in deterministic mode (no device thread: the loops call
//!   `progress`, which runs the engine until idle), every test and transport the options
//!   allow, on the host. A run only ends when every byte-marker, receive and completion it
//!   waits for has arrived, so finishing is itself the data-path check; the rows are then
//!   checked for sanity. No timing is asserted.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use rdma_direct::perf::stats::BwUnit;
use rdma_direct::perf::{self, Params, Row, Test};
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::verbs::VerbsDevice;
use rdma_direct::providers::{Provider, ProviderKind, QpType};

/// Counts the allocations of the threads that switched counting on.
struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note_alloc() {
    // `try_with`: thread-local storage may already be gone while a thread exits.
    let on = COUNTING.try_with(Cell::get).unwrap_or(false);
    if on {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

// SAFETY: forwards every call to the system allocator unchanged; the bookkeeping touches
// only two thread-local `Cell`s, which allocate nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note_alloc();
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread during `f`.
fn allocations(f: impl FnOnce()) -> u64 {
    ALLOCS.with(|a| a.set(0));
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCS.with(Cell::get)
}

/// The parameters of `args`, perftest's flags as the tests below spell them: a test name,
/// then `-s -n -a -I -l -Q -c --report_gbits --threads` (with `-l` and no `-Q`, cq_mod =
/// post list, perftest's rule).
fn opts(args: &str) -> Params {
    let mut w = args.split_whitespace();
    let test = w.next().and_then(Test::from_name).expect("a test name");
    let mut o = Params::new(test);
    let mut cq_mod = None;
    while let Some(f) = w.next() {
        let mut v = || -> u32 { w.next().and_then(|v| v.parse().ok()).expect(f) };
        match f {
            "-s" => o.sizes = vec![v()],
            "-n" => o.iters = v(),
            "-I" => o.inline = v(),
            "-l" => o.post_list = v(),
            "-Q" => cq_mod = Some(v()),
            "--threads" => o.threads = Some(v() as u8),
            "--report_gbits" => o.unit = BwUnit::Gbps,
            "--hw-ts" => o.hw_ts = true,
            "-a" => {
                o.sizes = Params::all_sizes();
                o.clip_to_mtu = true;
            }
            "-c" => {
                o.qp_type = match w.next() {
                    Some("UC") => QpType::Uc,
                    Some("UD") => QpType::Ud,
                    _ => QpType::Rc,
                }
            }
            _ => panic!("{args}: flag {f} is not used by these tests"),
        }
    }
    o.cq_mod = cq_mod.unwrap_or(if o.post_list > 1 {
        o.post_list
    } else {
        o.cq_mod
    });
    o.check().unwrap_or_else(|e| panic!("{args}: {e}"));
    o
}

fn run_on<P: Provider>(p: &mut P, o: &Params) -> perf::Report
where
    P::Qp: Send,
    P::Cq: Send,
{
    perf::run(p, o).unwrap_or_else(|e| panic!("{} failed: {e}", o.test.name()))
}

/// The sanity rules of a row: iterations as asked, non-zero, ordered.
fn check_rows(o: &Params, r: &perf::Report) {
    let rows = &r.rows;
    assert_eq!(r.info.sizes, o.sizes, "{:?}", r.info);
    assert_eq!(rows.len(), o.sizes.len(), "{rows:?}");
    for (row, &size) in rows.iter().zip(&o.sizes) {
        match row {
            Row::Lat(r) => {
                assert_eq!(r.bytes, u64::from(size));
                assert_eq!(r.iters, u64::from(o.iters));
                assert!(r.t_min > 0.0, "{r:?}");
                assert!(r.t_min <= r.t_typical && r.t_typical <= r.t_max, "{r:?}");
                assert!(r.t_min <= r.t_avg && r.t_avg <= r.t_max, "{r:?}");
                assert!(r.p99 <= r.p99_9 && r.p99_9 <= r.t_max, "{r:?}");
                assert!(r.t_stdev >= 0.0 && r.t_stdev.is_finite(), "{r:?}");
            }
            Row::Bw(r) => {
                assert_eq!(r.bytes, u64::from(size));
                assert_eq!(r.iters, u64::from(o.iters));
                assert!(r.bw_avg > 0.0 && r.msg_rate_mpps > 0.0, "{r:?}");
                // The whole run is one of the windows the peak is taken over.
                assert!(r.bw_peak >= r.bw_avg * (1.0 - 1e-9), "{r:?}");
            }
        }
    }
}

fn device_opts(args: &str) -> Params {
    let mut o = opts(args);
    o.gid_index = common::gid_index().unwrap_or(0);
    o
}

#[test]
#[ignore = "needs an RDMA device: RDMA_DIRECT_DEVICE=<dev>"]
fn device_write_lat() {
    let o = device_opts("write_lat -s 2 -n 200");
    let mut p = VerbsDevice::open(&common::device()).expect("open device");
    let r = run_on(&mut p, &o);
    check_rows(&o, &r);
    assert_eq!(r.info.provider, ProviderKind::Verbs);
}

#[test]
#[ignore = "needs an RDMA device: RDMA_DIRECT_DEVICE=<dev>"]
fn device_write_bw() {
    for args in ["write_bw -s 64 -n 500", "write_bw -s 64 -n 500 -l 32"] {
        let o = device_opts(args);
        let mut p = VerbsDevice::open(&common::device()).expect("open device");
        let r = run_on(&mut p, &o);
        check_rows(&o, &r);
    }
}

#[test]
#[ignore = "needs an RDMA device: RDMA_DIRECT_DEVICE=<dev>"]
fn device_read_send_atomic() {
    for args in [
        "send_lat -s 64 -n 100",
        "send_lat -s 64 -n 100 --threads 1",
        "write_lat -s 64 -n 100 --threads 1",
        "read_lat -s 64 -n 100",
        "atomic_lat -n 100",
        "send_bw -s 64 -n 500",
        "read_bw -s 4096 -n 200",
    ] {
        let o = device_opts(args);
        let mut p = VerbsDevice::open(&common::device()).expect("open device");
        let r = run_on(&mut p, &o);
        check_rows(&o, &r);
    }
}

fn sim(args: &str) -> perf::Info {
    let o = opts(args);
    let mut p = SimDevice::new();
    let r = run_on(&mut p, &o);
    check_rows(&o, &r);
    r.info
}

#[test]
fn sim_latency_tests() {
    let i = sim("write_lat -s 2 -n 50");
    assert_eq!((i.provider, i.device.as_str()), (ProviderKind::Sim, "sim0"));
    assert!(!i.two_threads, "{i:?}");
    sim("write_lat -s 4096 -n 20 -I 0");
    sim("send_lat -s 64 -n 150");
    sim("send_lat -s 1024 -n 20 -I 0");
    sim("read_lat -s 64 -n 20");
    sim("atomic_lat -n 20");
}

#[test]
fn sim_bandwidth_tests() {
    sim("write_bw -s 64 -n 300");
    // Iterations not a multiple of the post list: the last list is shorter.
    sim("write_bw -s 64 -n 200 -l 32");
    sim("write_bw -s 64 -n 256 -l 32 -Q 8 --report_gbits");
    sim("send_bw -s 64 -n 1200");
    sim("read_bw -s 4096 -n 100");
    sim("write_bw -s 64 -n 100 -I 64");
}

#[test]
fn sim_uc_and_ud() {
    sim("write_lat -s 2 -n 20 -c UC");
    sim("write_bw -s 64 -n 100 -c UC");
    sim("send_lat -s 64 -n 20 -c UD");
    sim("send_bw -s 64 -n 200 -c UD");
}

#[test]
fn sim_all_sizes() {
    let o = opts("write_bw -a -n 4");
    assert_eq!(o.sizes.len(), 23);
    assert_eq!((o.sizes[0], o.sizes[22]), (2, 8 << 20));
    let mut p = SimDevice::new();
    let r = run_on(&mut p, &o);
    check_rows(&o, &r);
}

/// SEND tests over growing sizes: the receives re-posted while one size runs are consumed
/// by the next, larger one (512 receives kept posted, 300 consumed a size, so the third size
/// takes receives posted during the first two). Each must hold the largest message: a
/// receive sized for the message it was posted beside ended the next size in LOC_LEN_ERR
/// (`perf send_lat -a`, `send_bw -a`).
#[test]
fn sim_send_tests_reuse_receives_across_growing_sizes() {
    for args in [
        "send_lat -n 300",
        "send_lat -n 300 -I 0",
        "send_bw -n 300",
        "send_lat -n 300 -c UD",
        "send_bw -n 300 -c UD",
        "send_bw -n 300 -c UC",
    ] {
        let mut o = opts(args);
        o.sizes = vec![2, 4, 8, 16, 1024, 4000];
        let mut p = SimDevice::new();
        let r = perf::run(&mut p, &o).unwrap_or_else(|e| panic!("{args}: {e}"));
        check_rows(&o, &r);
    }
}

#[test]
fn sim_two_threads_with_the_device_thread() {
    // Client and server on their own threads need a device that runs by itself.
    for args in [
        "write_lat -s 2 -n 200 --threads 2",
        "write_lat -s 4096 -n 50 -I 0 --threads 2",
        "send_lat -s 64 -n 200 --threads 2",
        "send_lat -s 64 -n 50 -c UD --threads 2",
    ] {
        let o = opts(args);
        let mut p = SimDevice::new();
        p.start_device_thread().expect("device thread");
        let r = run_on(&mut p, &o);
        check_rows(&o, &r);
        assert!(r.info.two_threads, "{:?}", r.info);
    }
}

#[test]
fn sim_ud_all_sizes_stop_at_the_mtu() {
    let o = opts("send_bw -a -c UD -n 8");
    let mut p = SimDevice::new();
    let r = run_on(&mut p, &o);
    let sizes: Vec<u64> = r
        .rows
        .iter()
        .map(|r| match r {
            Row::Bw(b) => b.bytes,
            Row::Lat(_) => panic!("a latency row from send_bw"),
        })
        .collect();
    let mtu = u64::from(rdma_direct::providers::sim::SIM_PORT_MTU.bytes());
    let want: Vec<u64> = (1..=23).map(|k| 1u64 << k).filter(|&s| s <= mtu).collect();
    assert_eq!(sizes, want, "{:?}", r.info);
    let info: Vec<u64> = r.info.sizes.iter().map(|&s| u64::from(s)).collect();
    assert_eq!(info, want);
}

#[test]
fn ud_larger_than_the_mtu_is_refused() {
    let o = opts("send_lat -s 8192 -n 10 -c UD");
    let mut p = SimDevice::new();
    let e = perf::run(&mut p, &o).unwrap_err().to_string();
    assert!(e.contains("MTU"), "{e}");
}

#[test]
fn sim_hw_ts_gives_a_device_time_table() {
    let o = opts("write_lat -s 2 -n 200 --hw-ts");
    let mut p = SimDevice::new();
    let r = run_on(&mut p, &o);
    check_rows(&o, &r);
    assert_eq!(r.nic.len(), 1, "{:?}", r.nic);
    let (sw, nic) = match r.rows[0] {
        Row::Lat(l) => (l, r.nic[0].row),
        Row::Bw(_) => panic!("a bandwidth row from write_lat"),
    };
    assert_eq!((nic.bytes, nic.iters), (2, 200));
    assert!(
        nic.t_min <= nic.t_typical && nic.t_typical <= nic.t_max && nic.t_min > 0.0,
        "{nic:?}"
    );
    // Both figures halve the same round trip, one in host ticks, one between the device's
    // completion stamps: they agree well within a factor of 10 (no absolute time asserted).
    assert!(
        nic.t_typical < 10.0 * sw.t_typical && sw.t_typical < 10.0 * nic.t_typical,
        "software {sw:?}, device {nic:?}"
    );
    // The breakdown: a post completes after it was posted, and before the next round trip
    // could (a whole round trip is twice the halved figure), with slack for the scale.
    let post = r.nic[0].post_to_cqe_ns as f64 / 1000.0;
    assert!(
        post > 0.0 && post < 10.0 * 2.0 * nic.t_max,
        "{post} usec, {nic:?}"
    );
}

#[test]
fn hw_ts_only_for_one_signaled_request_per_iteration() {
    let mut o = Params::new(Test::SendLat);
    o.hw_ts = true;
    let e = o.check().unwrap_err().to_string();
    assert!(e.contains("Params::hw_ts") && e.contains("send_lat"), "{e}");
    // verbs refuses before any QP is made (no device needed to see the reason).
    let e = rdma_direct::providers::verbs::no_completion_timestamps().to_string();
    assert!(
        e.contains("rxe/verbs: no completion timestamps (EOPNOTSUPP)"),
        "{e}"
    );
}

#[test]
fn measured_loops_allocate_nothing_per_iteration() {
    // A whole run (setup, loop, statistics) on the deterministic sim, which runs in this
    // thread: if anything in the loop allocated, 100 times the iterations would show more
    // allocations.
    for test in [
        "write_lat -s 64",
        "send_lat -s 64",
        "read_lat -s 64",
        "atomic_lat",
        "write_bw -s 64",
        "write_bw -s 64 -l 8",
        "send_bw -s 64",
        "read_bw -s 64",
        "write_lat -s 64 --hw-ts",
        "read_lat -s 64 --hw-ts",
    ] {
        let count = |n: u32| {
            let o = opts(&format!("{test} -n {n}"));
            let mut p = SimDevice::new();
            allocations(|| {
                perf::run(&mut p, &o).expect("run");
            })
        };
        // The fewest of three runs: a run that waited for the device may take one or two
        // allocations off the loop (a wider number formatted in a message), which no
        // per-iteration allocation could hide: that would add about 2000 in every run.
        let least = |n: u32| (0..3).map(|_| count(n)).min().unwrap_or(0);
        let (few, many) = (least(20), least(2000));
        assert_eq!(
            few, many,
            "{test}: {few} allocations at -n 20, {many} at -n 2000"
        );
        assert!(few > 0, "the counter counts nothing");
    }
}
