//! The sim's device clock through the production mlx5 path: CQs created to carry timestamps
//! get the time of completion in the CQE's timestamp field; converted with the device's
//! clock info it is the host's wall clock at the completion, across the counter's wrap, and
//! goes wrong exactly when the clock-info copy is staler than the bound `docs/timestamps.md`
//! states.
//!
//! The tests that check values run the device on a clock they move themselves
//! ([`SimTime::Manual`]): host time passes only when a test says so, so every stamp must
//! convert to a wall-clock time the test knows to the nanosecond, up to the conversion's own
//! rounding ([`ROUNDING_NS`]). Nothing here depends on how fast the host runs (an emulated or
//! loaded host stalls between two clock reads for milliseconds). One test runs on the host's
//! clocks and checks order only: stamps never go back and never precede the device.

use rdma_direct::clock::{TimestampKind, MLX5_CYCLES_MASK, NSEC_PER_SEC};
use rdma_direct::providers::sim::clock::{SimClockConfig, SimTime};
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::sim::{SimCq as Mlx5Cq, SimQp as Mlx5Qp};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType,
    QueuePair, SendQueue, SendWr,
};

/// How far a converted stamp may lie from the wall-clock time it was taken at: one counter
/// cycle of truncation (6.4 ns at 156.25 MHz) plus the rounding of `mult` (3.7 ns per second
/// of distance from the clock info's pair; the tests keep host time within a second of it).
const ROUNDING_NS: u64 = 12;

/// The manual clock's wall clock at creation (2023-11-14, in ns since the epoch).
const WALL0: u64 = 1_700_000_000_000_000_000;

fn manual(start_cycles: u64) -> SimClockConfig {
    SimClockConfig {
        start_cycles,
        time: SimTime::Manual { realtime_ns: WALL0 },
        ..SimClockConfig::default()
    }
}

fn host_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}

struct Rig {
    dev: SimDevice,
    qp: Mlx5Qp,
    cq: Mlx5Cq,
    peer: (Mlx5Qp, Mlx5Cq),
    mr: rdma_direct::providers::sim::SimMr,
    _mem: Vec<u8>,
}

fn rig(cfg: SimClockConfig, kind: TimestampKind) -> Rig {
    let mut dev = SimDevice::with_clock(cfg).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 64];
    // SAFETY: `mem` lives in the rig next to the MR, which is dropped first.
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let opts = ConnectOpts::default();
    let mut cq = dev.create_cq_ts(64, kind).unwrap();
    let mut pcq = dev.create_cq_ts(64, kind).unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    // The CQ (64) absorbs both queues.
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (32, 32);
    let mut qp = dev.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut peer = dev.create_qp(&pd, &mut pcq, None, None, &cfg).unwrap();
    let ea = dev.endpoint(&qp, &opts).unwrap();
    let eb = dev.endpoint(&peer, &opts).unwrap();
    dev.connect(&mut qp, &ea, &eb, &opts).unwrap();
    dev.connect(&mut peer, &eb, &ea, &opts).unwrap();
    Rig {
        dev,
        qp,
        cq,
        peer: (peer, pcq),
        mr,
        _mem: mem,
    }
}

/// One zero-length signaled WRITE; returns (host ns before, raw stamp, host ns after).
fn one(r: &mut Rig) -> (u64, u64, u64) {
    let before = host_ns();
    let sge = [r.mr.sge(0, 8)];
    let (raddr, rkey) = (r.mr.addr() + 32, r.mr.rkey());
    r.qp.sq()
        .post(SendWr::write(1, &sge, raddr, rkey).signaled())
        .unwrap();
    r.qp.sq().ring();
    let mut out = [Completion::EMPTY; 4];
    let mut n = 0;
    for _ in 0..1000 {
        r.dev.progress();
        n = r.cq.poll(&mut out);
        if n > 0 {
            break;
        }
    }
    let after = host_ns();
    assert_eq!(n, 1);
    assert!(out[0].is_ok(), "{:?}", out[0]);
    (
        before,
        r.cq.cqe_timestamp_at(r.cq.ci().wrapping_sub(1)),
        after,
    )
}

/// `ns` is the wall-clock time `want`, to the conversion's rounding.
fn assert_exact(ns: u64, want: u64, what: &str) {
    assert!(
        ns.abs_diff(want) <= ROUNDING_NS,
        "{what}: {ns} is {} ns from {want} (rounding allows {ROUNDING_NS})",
        ns as i128 - want as i128
    );
}

#[test]
fn free_running_stamps_convert_to_the_wall_clock_of_their_completion() {
    let mut r = rig(manual(0), TimestampKind::FreeRunning);
    let mut last = (0, 0);
    for i in 0..50u64 {
        // Uneven steps: a stamp must follow host time, not a count of messages.
        r.dev.clock().pass(1_000 + i * 12_345).unwrap();
        let want = r.dev.clock().wall_ns();
        let (_, raw, _) = one(&mut r);
        assert!(raw <= MLX5_CYCLES_MASK);
        let ns = r.cq.clock().unwrap().to_ns(raw);
        assert_eq!(r.cq.cqe_timestamp_ns_at(r.cq.ci() - 1), Some(ns));
        assert_exact(ns, want, &format!("message {i}"));
        assert!(raw > last.0 && ns > last.1, "message {i} did not move on");
        last = (raw, ns);
    }
}

#[test]
fn stamps_on_host_time_never_go_back_nor_precede_the_device() {
    let before = host_ns();
    let mut r = rig(SimClockConfig::default(), TimestampKind::FreeRunning);
    let after = host_ns();
    // The clock info's pair is the host's wall clock read while the device was made.
    let born = r.dev.clock().clock_info().nsec;
    assert!(
        before <= born && born <= after,
        "{born} outside [{before}, {after}]"
    );
    let mut last = (0, born);
    for i in 0..50 {
        let (_, raw, _) = one(&mut r);
        let ns = r.cq.clock().unwrap().to_ns(raw);
        assert!(raw >= last.0 && ns >= last.1, "message {i} went back");
        last = (raw, ns);
    }
    // Host time is not the test's to move.
    assert!(r.dev.clock().pass(1).is_err());
}

#[test]
fn conversion_holds_across_the_counter_wrap() {
    // One second of counter before the 41-bit wrap.
    let second = u64::from(SimClockConfig::default().khz) * 1000;
    let mut r = rig(
        manual(MLX5_CYCLES_MASK - second),
        TimestampKind::FreeRunning,
    );
    r.dev.clock().pass(700_000).unwrap();
    let want1 = r.dev.clock().wall_ns();
    let (_, raw1, _) = one(&mut r);
    let ns1 = r.cq.clock().unwrap().to_ns(raw1);
    assert_exact(ns1, want1, "before the wrap");
    // Two seconds of device time the host did not see: past the wrap.
    r.dev.clock().advance(2 * second);
    r.dev.clock().pass(300_000).unwrap();
    let want2 = r.dev.clock().wall_ns() + 2 * NSEC_PER_SEC;
    let (_, raw2, _) = one(&mut r);
    assert!(
        raw2 < raw1,
        "the counter wrapped: {raw2:#x} after {raw1:#x}"
    );
    let ns2 = r.cq.clock().unwrap().to_ns(raw2);
    assert!(ns2 > ns1);
    assert_exact(ns2, want2, "after the wrap");
}

#[test]
fn a_stale_clock_info_copy_is_exact_within_the_bound_and_wrong_past_it() {
    let mut r = rig(manual(0), TimestampKind::FreeRunning);
    let copy = match r.cq.clock().unwrap().format() {
        rdma_direct::clock::TimestampFormat::FreeRunning(i) => i,
        f => panic!("{f:?}"),
    };
    // Within the bound: a kernel refresh period of device time the copy has not seen.
    let period = r.dev.clock().refresh_period_cycles();
    assert!(period < copy.max_delta_cycles());
    r.dev.clock().advance(period);
    r.dev.clock().pass(5_000).unwrap();
    let skew = copy.cycles_to_ns(period);
    let want = r.dev.clock().wall_ns() + skew;
    let (_, raw, _) = one(&mut r);
    let ns = r.cq.clock().unwrap().to_ns(raw);
    assert_exact(ns, want, "one refresh period stale");
    // The device refreshed its page when it stamped the CQE; our copy is still the old one.
    assert!(r.dev.clock().clock_info().last_cycles != copy.last_cycles);
    // Past the bound (at 156.25 MHz the 64-bit product wraps first): the stale copy puts
    // the completion far in its past, and nothing in the value tells.
    let far = copy.max_delta_cycles();
    r.dev.clock().advance(far);
    r.dev.clock().pass(5_000).unwrap();
    let want = r.dev.clock().wall_ns() + skew + copy.cycles_to_ns(far);
    let (_, raw, _) = one(&mut r);
    let stale = r.cq.clock().unwrap().to_ns(raw);
    assert!(
        stale + 1000 * NSEC_PER_SEC < want,
        "stale copy: {stale} should land well before {want}"
    );
    // Refreshed, it is right again.
    r.cq.clock_mut().unwrap().refresh().unwrap();
    let ns = r.cq.clock().unwrap().to_ns(raw);
    assert_exact(ns, want, "refreshed");
}

#[test]
fn real_time_stamps_are_seconds_and_nanoseconds_of_the_wall_clock() {
    let mut r = rig(manual(0), TimestampKind::RealTime);
    for i in 0..10 {
        r.dev.clock().pass(999_999_937 * (i % 3)).unwrap();
        let want = r.dev.clock().wall_ns();
        let (_, raw, _) = one(&mut r);
        let t = rdma_direct::clock::RealTime::from_raw(raw);
        assert!(t.is_normalized());
        assert_eq!(raw, (want / NSEC_PER_SEC) << 32 | want % NSEC_PER_SEC);
        assert_eq!(r.cq.clock().unwrap().to_ns(raw), t.as_ns());
        assert_eq!(t.as_ns(), want, "message {i}");
    }
}

#[test]
fn cqs_without_timestamps_write_zero() {
    let mut dev = SimDevice::new();
    let cq = dev.create_cq(4).unwrap();
    assert!(cq.clock().is_none());
    assert_eq!(cq.cqe_timestamp_ns_at(0), None);
}

#[test]
fn poll_ts_gives_each_completion_its_own_time_on_both_paths() {
    use rdma_direct::providers::{RecvQueue, RecvWr};
    let mut r = rig(manual(0), TimestampKind::FreeRunning);
    // Receives on the peer, SENDs from us. The first round's polls map the QP (the general
    // path); in the second each CQ knows it, and the poll starts with the fast path.
    for round in 0..2u64 {
        for i in 4 * round..4 * round + 4 {
            let sge = [r.mr.sge(32, 8)];
            r.peer
                .0
                .rq()
                .post_recv(RecvWr {
                    wr_id: 100 + i,
                    sges: &sge,
                })
                .unwrap();
        }
        r.peer.0.rq().ring();
        // Each SEND completes (on both sides) at its own wall-clock time.
        let mut want = [0u64; 4];
        for i in 4 * round..4 * round + 4 {
            let sge = [r.mr.sge(0, 8)];
            r.dev.clock().pass(2_500 + 1_000 * i).unwrap();
            want[(i - 4 * round) as usize] = r.dev.clock().wall_ns();
            r.qp.sq().post(SendWr::send(i, &sge).signaled()).unwrap();
            r.qp.sq().ring();
            r.dev.progress();
        }
        for (cq, base) in [(&mut r.cq, 0u64), (&mut r.peer.1, 100)] {
            let mut out = [Completion::EMPTY; 8];
            let mut ns = [0u64; 8];
            let n = cq.poll_ts(&mut out, &mut ns);
            assert_eq!(n, 4);
            for i in 0..n {
                assert_eq!(out[i].wr_id, base + 4 * round + i as u64);
                assert!(out[i].is_ok());
                let pos = cq.ci() - (n - i) as u32;
                assert_eq!(Some(ns[i]), cq.cqe_timestamp_ns_at(pos));
                assert_exact(ns[i], want[i], "poll_ts");
            }
            // A short ns slice limits the poll.
            assert_eq!(cq.poll_ts(&mut out, &mut []), 0);
        }
    }
}
