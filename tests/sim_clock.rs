//! The sim's device clock through the production mlx5 path: CQs created to carry timestamps
//! get the time of completion in the CQE's timestamp field; converted with the device's
//! clock info it agrees with the host's wall clock, across the counter's wrap, and goes wrong
//! exactly when the clock-info copy is staler than the bound `docs/timestamps.md` states.
//!
//! Stated bound: a converted timestamp lies within [`HOST_BOUND_NS`] (1 ms) of the host's
//! `CLOCK_REALTIME` read around the completion. The conversion itself is off by at most
//! the rounding of `mult` (3.7 ns per second of distance from the clock info's pair at
//! 156.25 MHz) plus one cycle; the rest of the allowance is for NTP slewing the host's wall
//! clock against its monotonic clock, which drives the sim's counter.

use rdma_direct::clock::{TimestampKind, MLX5_CYCLES_MASK, NSEC_PER_SEC};
use rdma_direct::providers::sim::clock::SimClockConfig;
use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::sim::{SimCq as Mlx5Cq, SimQp as Mlx5Qp};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType,
    QueuePair, SendQueue, SendWr,
};

const HOST_BOUND_NS: u64 = 1_000_000;

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

fn assert_near(ns: u64, before: u64, after: u64, what: &str) {
    assert!(
        ns + HOST_BOUND_NS >= before && ns <= after + HOST_BOUND_NS,
        "{what}: {ns} not within {HOST_BOUND_NS} ns of [{before}, {after}]"
    );
}

#[test]
fn free_running_stamps_convert_to_host_time_and_never_go_back() {
    let mut r = rig(SimClockConfig::default(), TimestampKind::FreeRunning);
    let mut last = (0, 0);
    for i in 0..50 {
        let (before, raw, after) = one(&mut r);
        assert!(raw <= MLX5_CYCLES_MASK);
        let ns = r.cq.clock().unwrap().to_ns(raw);
        assert_eq!(r.cq.cqe_timestamp_ns_at(r.cq.ci() - 1), Some(ns));
        assert_near(ns, before, after, &format!("message {i}"));
        assert!(raw >= last.0 && ns >= last.1, "message {i} went back");
        last = (raw, ns);
    }
}

#[test]
fn conversion_holds_across_the_counter_wrap() {
    // One second of counter before the 41-bit wrap.
    let khz = 156_250;
    let second = u64::from(khz) * 1000;
    let mut r = rig(
        SimClockConfig {
            khz,
            start_cycles: MLX5_CYCLES_MASK - second,
        },
        TimestampKind::FreeRunning,
    );
    let (b1, raw1, a1) = one(&mut r);
    let ns1 = r.cq.clock().unwrap().to_ns(raw1);
    assert_near(ns1, b1, a1, "before the wrap");
    // Two seconds of device time: past the wrap.
    r.dev.clock().advance(2 * second);
    let (b2, raw2, a2) = one(&mut r);
    assert!(
        raw2 < raw1,
        "the counter wrapped: {raw2:#x} after {raw1:#x}"
    );
    let ns2 = r.cq.clock().unwrap().to_ns(raw2);
    assert!(ns2 > ns1);
    let skew = 2 * NSEC_PER_SEC;
    assert_near(ns2, b2 + skew, a2 + skew, "after the wrap");
}

#[test]
fn a_stale_clock_info_copy_is_exact_within_the_bound_and_wrong_past_it() {
    let mut r = rig(SimClockConfig::default(), TimestampKind::FreeRunning);
    let copy = match r.cq.clock().unwrap().format() {
        rdma_direct::clock::TimestampFormat::FreeRunning(i) => i,
        f => panic!("{f:?}"),
    };
    // Within the bound: a kernel refresh period of device time the copy has not seen.
    let period = r.dev.clock().refresh_period_cycles();
    assert!(period < copy.max_delta_cycles());
    r.dev.clock().advance(period);
    let (b, raw, a) = one(&mut r);
    let skew = copy.cycles_to_ns(period);
    let ns = r.cq.clock().unwrap().to_ns(raw);
    assert_near(ns, b + skew, a + skew, "one refresh period stale");
    // The device refreshed its page when it stamped the CQE; our copy is still the old one.
    assert!(r.dev.clock().clock_info().last_cycles != copy.last_cycles);
    // Past the bound (at 156.25 MHz the 64-bit product wraps first): the stale copy puts
    // the completion far in its past, and nothing in the value tells.
    let far = copy.max_delta_cycles();
    r.dev.clock().advance(far);
    let (b, raw, a) = one(&mut r);
    let skew = skew + copy.cycles_to_ns(far);
    let stale = r.cq.clock().unwrap().to_ns(raw);
    assert!(
        stale + 1000 * NSEC_PER_SEC < b + skew,
        "stale copy: {stale} should land well before {}",
        b + skew
    );
    // Refreshed, it is right again.
    r.cq.clock_mut().unwrap().refresh().unwrap();
    let ns = r.cq.clock().unwrap().to_ns(raw);
    assert_near(ns, b + skew, a + skew, "refreshed");
}

#[test]
fn real_time_stamps_are_seconds_and_nanoseconds_of_host_time() {
    let mut r = rig(SimClockConfig::default(), TimestampKind::RealTime);
    for _ in 0..10 {
        let (before, raw, after) = one(&mut r);
        let t = rdma_direct::clock::RealTime::from_raw(raw);
        assert!(t.is_normalized());
        assert_eq!(r.cq.clock().unwrap().to_ns(raw), t.as_ns());
        assert_near(t.as_ns(), before, after, "real time");
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
    let mut r = rig(SimClockConfig::default(), TimestampKind::FreeRunning);
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
        let before = host_ns();
        for i in 4 * round..4 * round + 4 {
            let sge = [r.mr.sge(0, 8)];
            r.qp.sq().post(SendWr::send(i, &sge).signaled()).unwrap();
            r.qp.sq().ring();
            r.dev.progress();
        }
        let after = host_ns();
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
                assert_near(ns[i], before, after, "poll_ts");
                if i > 0 {
                    assert!(ns[i] >= ns[i - 1]);
                }
            }
            // A short ns slice limits the poll.
            assert_eq!(cq.poll_ts(&mut out, &mut []), 0);
        }
    }
}
