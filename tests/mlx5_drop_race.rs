//! A smoke test of the QP drop protocol under real concurrency: QPs dropped on one thread
//! while another thread polls the CQ they complete on, with the sim device thread writing
//! CQEs meanwhile. A drop waits for a running poll (`CqShared::polling` against
//! `QpShared::alive`, providers/mlx5/shared.rs) before the QP's memory is unmapped. What this
//! catches: a drop that deadlocks against the poller, a poller that panics or faults on CQEs
//! of dropped QPs, lost accounting. What it does not reliably catch: the protocol's own race
//! window is a few instructions wide; with the wait removed, 200 rounds still passed here. The
//! protocol's correctness rests on the pairing argued in `CqShared::polling` and
//! providers/mlx5/handshake.rs (whose unit test runs the store-buffer litmus test on it). The
//! test runs with the process's choice of barrier, and again in a child process with
//! `RDMA_DIRECT_MEMBARRIER=0` (the `SeqCst` stores).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rdma_direct::providers::mlx5::{poll_barrier, PollBarrier};
use rdma_direct::providers::sim::{SimDevice, SimQp};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpCaps, QpConfig,
    QpType, QueuePair, SendQueue, SendWr,
};

fn connect_pair(dev: &mut SimDevice, a: &mut SimQp, b: &mut SimQp) {
    let opts = ConnectOpts::default();
    let ea = dev.endpoint(a, &opts).unwrap();
    let eb = dev.endpoint(b, &opts).unwrap();
    dev.connect(a, &ea, &eb, &opts).unwrap();
    dev.connect(b, &eb, &ea, &opts).unwrap();
}

#[test]
fn dropping_qps_while_their_cq_is_polled_on_another_thread() {
    let want = match std::env::var("RDMA_DIRECT_MEMBARRIER").as_deref() {
        Ok("0") => Some(PollBarrier::SeqCst),
        _ => None,
    };
    if let Some(want) = want {
        assert_eq!(
            poll_barrier(),
            want,
            "RDMA_DIRECT_MEMBARRIER=0 chooses the SeqCst stores"
        );
    }
    println!("poll barrier: {:?}", poll_barrier());
    let rounds: u32 = std::env::var("RDMA_DIRECT_DROP_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let mut total_polled = 0u64;
    for round in 0..rounds {
        let mut dev = SimDevice::new();
        dev.start_device_thread().unwrap();
        let pd = dev.alloc_pd().unwrap();
        let mut cq = dev.create_cq(4096).unwrap();
        let mut rcq = dev.create_cq(4096).unwrap();
        let mut mem = vec![0u8; 4096];
        // SAFETY: `mem` is never resized and outlives the MR (dropped at the end of the round,
        // MR first).
        let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
        let cfg = QpConfig {
            qp_type: QpType::Rc,
            caps: QpCaps {
                max_send_wr: 64,
                max_recv_wr: 4,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 16,
            },
            sq_sig_all: false,
        };
        let mut pairs: Vec<(SimQp, SimQp)> = (0..8)
            .map(|_| {
                let mut a = dev.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
                let mut b = dev.create_qp(&pd, &mut rcq, None, None, &cfg).unwrap();
                connect_pair(&mut dev, &mut a, &mut b);
                (a, b)
            })
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let polled = Arc::new(AtomicU64::new(0));
        let poller = {
            let (stop, polled) = (stop.clone(), polled.clone());
            std::thread::spawn(move || {
                let mut wc = [Completion::EMPTY; 16];
                while !stop.load(Ordering::Relaxed) {
                    let n = cq.poll(&mut wc);
                    polled.fetch_add(n as u64, Ordering::Relaxed);
                }
                cq
            })
        };
        // Before each drop: a burst on every remaining QP, then wait until the poller is
        // returning completions, then drop one pair with its CQEs still arriving.
        let mut i = 0u32;
        while !pairs.is_empty() {
            for (a, _) in pairs.iter_mut() {
                for k in 0..24u64 {
                    let data = k.to_le_bytes();
                    let wr =
                        SendWr::write(k, &[], mr.addr() + (k % 64) * 8, mr.rkey()).inline(&data);
                    let wr = if k % 3 == 0 { wr.signaled() } else { wr };
                    if a.sq().post(wr).is_err() {
                        break; // full: the completions will come
                    }
                }
                a.sq().ring();
            }
            let seen = polled.load(Ordering::Relaxed);
            let t = std::time::Instant::now();
            while polled.load(Ordering::Relaxed) == seen
                && t.elapsed() < std::time::Duration::from_millis(20)
            {
                std::hint::spin_loop();
            }
            // A varying extra delay, so drops land at different points of a poll.
            for _ in 0..(round * 7 + i * 13) % 300 {
                std::hint::spin_loop();
            }
            let (a, b) = pairs.pop().unwrap();
            drop(a);
            drop(b);
            i += 1;
        }
        stop.store(true, Ordering::Relaxed);
        let cq = poller.join().expect("the poller survived every drop");
        total_polled += polled.load(Ordering::Relaxed);
        dev.stop_device_thread();
        drop(cq);
        drop(rcq);
        drop(mr);
        drop(mem);
    }
    println!("{rounds} rounds, {total_polled} completions polled while QPs were dropped");
    assert!(total_polled > 0, "the poller saw traffic");
}

/// The same test in a child process that chose the `SeqCst` stores (the choice is made once
/// per process, at its first CQ).
#[test]
fn dropping_qps_with_the_seqcst_handshake() {
    if std::env::var_os("RDMA_DIRECT_MEMBARRIER").is_some() {
        return; // the child: the test above runs there
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "dropping_qps_while_their_cq_is_polled_on_another_thread",
            "--nocapture",
        ])
        .env("RDMA_DIRECT_MEMBARRIER", "0")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "child failed: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("poll barrier: SeqCst"), "{text}");
    assert!(text.contains("1 passed"), "{text}");
}
