//! The poster and the poller on different threads: the per-queue tracking is shared without
//! locks (single producer, single consumer). One thread posts (retrying on a full queue or
//! CQ), another plays the device and polls; every request must be accounted for exactly once,
//! in order, through `wr_id` and `covered`.

use rdma_direct_rig as plain;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use plain::{Plain, PlainCq, PlainQp};
use rdma_direct::providers::mlx5::{Mlx5Cq, Mlx5Qp};
use rdma_direct::providers::{
    Completion, CompletionQueue, PostError, QpCaps, QpConfig, QpState, QpType, QueuePair,
    SendQueue, SendWr, Sge,
};

#[test]
fn poster_and_poller_threads_account_for_every_request() {
    const N: u64 = 50_000;
    let caps = QpCaps {
        max_send_wr: 64,
        max_recv_wr: 1,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 64,
    };
    let mut dev = PlainQp::new(0x77, 64, 0, 0, 256);
    let mut dcq = PlainCq::new(1, 128, 64);
    // SAFETY: plain memory kept alive by the owners; the device side is `dev`/`dcq`.
    let mut cq = unsafe { Mlx5Cq::<Plain>::from_dv(dcq.dv, dcq.owner()) }.unwrap();
    // SAFETY: as above.
    let mut qp = unsafe {
        Mlx5Qp::<Plain>::from_dv(
            dev.dv,
            &QpConfig::new(QpType::Rc),
            caps,
            &mut cq,
            None,
            None,
            dev.owner(),
        )
    }
    .unwrap();
    qp.set_state(QpState::Init);
    qp.set_state(QpState::Rtr);
    qp.set_state(QpState::Rts);
    qp.set_signal_every(7);
    let done = Arc::new(AtomicBool::new(false));
    let done2 = done.clone();
    let poster = std::thread::spawn(move || {
        let buf = [0u8; 8];
        let sge = [Sge {
            addr: buf.as_ptr() as u64,
            length: 8,
            lkey: 1,
        }];
        let mut id = 0u64;
        let mut full = 0u64;
        while id < N {
            let mut wr = SendWr::send(id, &sge);
            if id % 13 == 0 || id == N - 1 {
                wr = wr.signaled();
            }
            if id % 3 == 0 {
                wr = SendWr::write(id, &[], 0x1000, 1).inline(&buf);
                if id % 13 == 0 || id == N - 1 {
                    wr = wr.signaled();
                }
            }
            match qp.sq().post(wr) {
                Ok(()) => id += 1,
                Err(r) => {
                    assert!(
                        matches!(
                            r.error,
                            PostError::QueueFull { .. } | PostError::CqFull { .. }
                        ),
                        "{:?}",
                        r.error
                    );
                    qp.sq().ring();
                    full += 1;
                    std::hint::spin_loop();
                }
            }
            if id % 5 == 0 {
                qp.sq().ring();
            }
        }
        qp.sq().ring();
        done2.store(true, Ordering::Release);
        (qp, full)
    });
    let mut out = [Completion::EMPTY; 16];
    let mut next = 0u64; // the oldest request not yet accounted for
    let mut signaled = 0u64;
    while next < N {
        dev.complete_sends(&mut dcq);
        let n = cq.poll(&mut out);
        for c in &out[..n] {
            assert!(c.is_ok());
            let first = if c.covered > 0 {
                c.covered_from
            } else {
                c.wr_id
            };
            assert_eq!(first, next, "completions retire requests in post order");
            assert_eq!(c.wr_id, next + u64::from(c.covered));
            next = c.wr_id + 1;
            signaled += 1;
        }
        if n == 0 && done.load(Ordering::Acquire) && next < N {
            // The poster has finished: everything must show up.
            std::hint::spin_loop();
        }
    }
    let (mut qp, full) = poster.join().unwrap();
    assert_eq!(next, N);
    assert!(signaled >= N / 13);
    assert_eq!(
        cq.reserved(),
        qp.sq().cq_budget(),
        "every CQ entry was given back but the SQ's posting budget"
    );
    // How often the poster found the queue (or CQ) full depends on scheduling; not asserted.
    eprintln!("poster retried {full} times on a full queue");
    drop(qp);
    assert_eq!(cq.reserved(), 0, "dropping the QP gave its budget back");
}

// Queues move between threads (one owner at a time); none is shared by reference, so no
// second poster or poller can appear behind `&`.
static_assertions::assert_impl_all!(Mlx5Qp: Send);
static_assertions::assert_impl_all!(Mlx5Cq: Send);
static_assertions::assert_impl_all!(rdma_direct::providers::mlx5::Mlx5Srq: Send);
static_assertions::assert_not_impl_any!(Mlx5Qp: Sync);
static_assertions::assert_not_impl_any!(Mlx5Cq: Sync);
static_assertions::assert_not_impl_any!(rdma_direct::providers::mlx5::Mlx5Sq: Sync);
