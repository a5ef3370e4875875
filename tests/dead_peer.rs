//! A dead peer is noticed with the default `ConnectOpts` on the sim (the production mlx5
//! code): the responder QP is dropped, and a signaled WRITE the requester posts afterwards
//! ends in `RETRY_EXC_ERR`, every later request flushed, the QP in ERR. Under manual progress
//! the count of tries is exact (`retry_cnt + 1` device passes, 7 included: seven retries as
//! on mlx5); on the device thread each try waits the ACK timeout, so the error arrives after
//! about `ConnectOpts::retry_budget` (not asserted: a liveness timeout only turns a hang
//! into a failure).

use std::time::{Duration, Instant};

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::{SimCq, SimPd, SimQp};

const LIVENESS: Duration = Duration::from_secs(30);

fn pair(dev: &mut SimDevice, pd: &SimPd, opts: &ConnectOpts) -> ((SimQp, SimCq), (SimQp, SimCq)) {
    let (mut ca, mut cb) = (dev.create_cq(256).unwrap(), dev.create_cq(256).unwrap());
    let c = QpConfig::new(QpType::Rc);
    let mut a = dev.create_qp(pd, &mut ca, None, None, &c).unwrap();
    let mut b = dev.create_qp(pd, &mut cb, None, None, &c).unwrap();
    let (ea, eb) = (
        dev.endpoint(&a, opts).unwrap(),
        dev.endpoint(&b, opts).unwrap(),
    );
    dev.connect(&mut a, &ea, &eb, opts).unwrap();
    dev.connect(&mut b, &eb, &ea, opts).unwrap();
    ((a, ca), (b, cb))
}

fn wait(dev: &mut SimDevice, cq: &mut SimCq, n: usize) -> Vec<Completion> {
    let deadline = Instant::now() + LIVENESS;
    let mut got = Vec::new();
    let mut wc = [Completion::EMPTY; 16];
    while got.len() < n {
        dev.progress();
        let k = cq.poll(&mut wc);
        got.extend_from_slice(&wc[..k]);
        assert!(
            Instant::now() < deadline,
            "no end after {LIVENESS:?}: {} of {n} completions ({got:?})",
            got.len()
        );
        if k == 0 {
            std::thread::yield_now();
        }
    }
    got
}

/// Drops the responder of a live pair and checks the requester's next requests end:
/// RETRY_EXC_ERR for the first (signaled), WR_FLUSH_ERR for the two after it (one of them
/// unsignaled: a flush completes every request).
fn dropped_responder_ends_in_retry_exc(threaded: bool, opts: ConnectOpts) {
    let mut dev = SimDevice::new();
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let pd = dev.alloc_pd().unwrap();
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let dst = buf.remote(0, 4096).unwrap();
    let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd, &opts);
    let write = |id: u64| SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"order");
    // The link works.
    a.sq().post_and_ring(write(1).signaled()).unwrap();
    let got = wait(&mut dev, &mut ca, 1);
    assert_eq!((got[0].wr_id, got[0].status), (1, WcStatus::Success));
    // The peer dies.
    drop(b);
    drop(cb);
    a.sq().post(write(2).signaled()).unwrap();
    a.sq().post(write(3)).unwrap();
    a.sq().post(write(4).signaled()).unwrap();
    a.sq().ring();
    let got = wait(&mut dev, &mut ca, 3);
    let ends: Vec<(u64, WcStatus)> = got.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        ends,
        [
            (2, WcStatus::RetryExcErr),
            (3, WcStatus::WrFlushErr),
            (4, WcStatus::WrFlushErr)
        ]
    );
    assert!(
        got[0].status.hint().contains("peer is gone"),
        "{}",
        got[0].status.hint()
    );
    assert_eq!(a.state(), QpState::Err);
}

#[test]
fn a_dropped_responder_ends_a_write_in_retry_exc_with_the_defaults_manual_progress() {
    dropped_responder_ends_in_retry_exc(false, ConnectOpts::default());
}

#[test]
fn a_dropped_responder_ends_a_write_in_retry_exc_with_the_defaults_device_thread() {
    dropped_responder_ends_in_retry_exc(true, ConnectOpts::default());
}

#[test]
fn retry_cnt_7_is_seven_retries_on_the_sim_as_on_mlx5() {
    let opts = ConnectOpts {
        retry_cnt: 7,
        ..ConnectOpts::default()
    };
    dropped_responder_ends_in_retry_exc(false, opts);
    // Short timer so the device thread's eight tries take 8 × 4.2 ms.
    let opts = ConnectOpts {
        timeout: 10,
        ..opts
    };
    dropped_responder_ends_in_retry_exc(true, opts);
}

/// Under manual progress one device pass is one try: the request is sent `retry_cnt + 1`
/// times, and the error completion is written on the pass after the last retry.
#[test]
fn the_error_arrives_after_exactly_retry_cnt_plus_one_tries() {
    for retry_cnt in [0u8, 1, 6, 7] {
        let opts = ConnectOpts {
            retry_cnt,
            ..ConnectOpts::default()
        };
        let mut dev = SimDevice::new();
        let pd = dev.alloc_pd().unwrap();
        let buf = dev
            .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
            .unwrap();
        let dst = buf.remote(0, 4096).unwrap();
        let ((mut a, mut ca), (b, cb)) = pair(&mut dev, &pd, &opts);
        drop((b, cb));
        a.sq()
            .post_and_ring(
                SendWr::write(9, &[], dst.addr, dst.rkey)
                    .inline(b"x")
                    .signaled(),
            )
            .unwrap();
        let mut wc = [Completion::EMPTY; 4];
        for pass in 1..=u32::from(retry_cnt) + 1 {
            dev.process();
            let n = ca.poll(&mut wc);
            if pass <= u32::from(retry_cnt) {
                assert_eq!(
                    n, 0,
                    "retry_cnt {retry_cnt}: ended on try {pass}: {:?}",
                    wc[0]
                );
            } else {
                assert_eq!(n, 1, "retry_cnt {retry_cnt}: no end after {pass} tries");
                assert_eq!((wc[0].wr_id, wc[0].status), (9, WcStatus::RetryExcErr));
            }
        }
        // ConnectOpts::retry_budget states the same count of tries.
        let per_try = Duration::from_nanos(4096 << opts.timeout);
        assert_eq!(opts.retry_budget(), per_try * (u32::from(retry_cnt) + 1));
    }
}

/// The defaults against a live peer: no false failure over a long stream on the device
/// thread (the ACK timeout never fires while the peer answers). `cargo test` runs 20,000
/// requests; `RDMA_DIRECT_LIVE_REQUESTS=1000000 cargo test --release --test dead_peer` the
/// long run.
#[test]
fn a_live_peer_never_fails_with_the_defaults() {
    let total: u64 = std::env::var("RDMA_DIRECT_LIVE_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let dst = buf.remote(0, 4096).unwrap();
    let ((mut a, mut ca), (_b, _cb)) = pair(&mut dev, &pd, &ConnectOpts::default());
    a.sq().set_signal_every(32);
    let mut window = SendWindow::new(&a);
    let (mut posted, mut done) = (0u64, 0u64);
    let mut wc = [Completion::EMPTY; 32];
    let mut last = Instant::now();
    while done < total {
        while window.room() > 0 && posted < total {
            let mut wr = SendWr::write(posted, &[], dst.addr, dst.rkey).inline(b"order");
            if posted + 1 == total {
                wr = wr.signaled();
            }
            a.sq().post(wr).unwrap();
            window.posted(1);
            posted += 1;
        }
        a.sq().ring();
        let n = ca.poll(&mut wc);
        for c in &wc[..n] {
            assert!(
                c.is_ok(),
                "request {} failed against a live peer: {c:?}",
                c.wr_id
            );
            window.retire(c);
            done += 1 + u64::from(c.covered);
        }
        if n > 0 {
            last = Instant::now();
        } else {
            assert!(last.elapsed() < LIVENESS, "stalled at {done} of {total}");
            std::thread::yield_now();
        }
    }
    assert_eq!((done, window.in_flight()), (total, 0));
}
