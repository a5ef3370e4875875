//! Soak tests on the software mlx5 device through the production mlx5 provider.
//!
//! - `ring_wrap_soak`: many WQEs through a small SQ ring (mixed sizes, inline and SGE
//!   payloads, WRITE and SEND, selective signaling); every byte that lands and every
//!   completion (wr_id, opcode, byte count, covered range) is checked against a ledger.
//! - `fault_soak_*`: the seeded fault injector (error CQEs, delayed completions, out-of-order
//!   completion across QPs sharing a CQ, CQEs landing mid-batch) under traffic on several QPs;
//!   an independent ledger checks that every posted request ends in exactly one completion,
//!   or is covered by a later one, or is flushed — nothing lost, nothing twice.
//!
//! `RDMA_DIRECT_SOAK_OPS=<n>` sets the number of requests (default: a few seconds in a debug
//! build).

use std::collections::VecDeque;

use rdma_direct::providers::sim::{FaultConfig, SimDevice, SimMr, SimPd};
use rdma_direct::providers::sim::{SimCq, SimQp};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpCaps, QpConfig,
    QpState, QpType, QueuePair, RecvQueue, RecvWr, SendOp, SendQueue, SendWr, Sge, WcOpcode,
    WcStatus,
};

fn ops_from_env(default: u64) -> u64 {
    std::env::var("RDMA_DIRECT_SOAK_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The test's own PRNG (xorshift64*), independent of the device's.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const SLOT: usize = 1024;

/// A registered buffer. Fields drop in declaration order: the MR is deregistered before
/// the memory is freed.
struct Buf {
    mr: SimMr,
    mem: Vec<u8>,
}

fn buf(dev: &mut SimDevice, pd: &SimPd, len: usize) -> Buf {
    let mut mem = vec![0u8; len];
    // SAFETY: the Vec's heap block never moves (it is never resized; moving the Vec moves
    // only its header) and is freed after the MR is deregistered (`Buf`'s field order).
    let mr = unsafe { dev.reg_mr(pd, mem.as_mut_ptr(), len, Access::ALL) }.unwrap();
    Buf { mr, mem }
}

/// One request of the ledger.
#[derive(Clone, Copy, Debug)]
struct Posted {
    wr_id: u64,
    signaled: bool,
    /// For the byte check: batch slot, length, is a SEND.
    slot: usize,
    len: usize,
    send: bool,
}

fn connect_pair(dev: &mut SimDevice, a: &mut SimQp, b: &mut SimQp, opts: &ConnectOpts) {
    let ea = dev.endpoint(a, opts).unwrap();
    let eb = dev.endpoint(b, opts).unwrap();
    dev.connect(a, &ea, &eb, opts).unwrap();
    dev.connect(b, &eb, &ea, opts).unwrap();
}

fn poll_all(dev: &mut SimDevice, cq: &mut SimCq, out: &mut Vec<Completion>) {
    let mut wc = [Completion::EMPTY; 7];
    dev.progress();
    loop {
        let n = cq.poll(&mut wc);
        out.extend_from_slice(&wc[..n]);
        if n == 0 {
            break;
        }
    }
}

#[test]
fn ring_wrap_soak() {
    let ops = ops_from_env(60_000);
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let caps = QpCaps {
        max_send_wr: 8,
        max_recv_wr: 8,
        max_send_sge: 4,
        max_recv_sge: 2,
        max_inline_data: 200,
    };
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps,
        sq_sig_all: false,
    };
    let mut cqa = dev.create_cq(32).unwrap();
    let mut cqb = dev.create_cq(32).unwrap();
    let mut a = dev.create_qp(&pd, &mut cqa, None, None, &cfg).unwrap();
    let mut b = dev.create_qp(&pd, &mut cqb, None, None, &cfg).unwrap();
    connect_pair(&mut dev, &mut a, &mut b, &ConnectOpts::default());
    let granted = a.caps();
    // One slot of max_send_wr stays free for the signaled WRITE that closes a batch ending
    // unsignaled (below): the SQ refuses a request beyond max_send_wr outstanding.
    let batch_max = (granted.max_send_wr.min(9) - 1) as usize;
    let mut src = buf(&mut dev, &pd, SLOT * batch_max);
    let mut dst = buf(&mut dev, &pd, SLOT * batch_max);
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut ledger: VecDeque<Posted> = VecDeque::new();
    let mut next_id = 1u64;
    let mut done = 0u64;
    let mut bytes_checked = 0u64;
    let mut completions = 0u64;
    let mut sges = [[Sge::default(); 4]; 8];
    while done < ops {
        // One batch: fill sources, zero destinations, post 1..=batch_max, ring once.
        let n = 1 + rng.below(batch_max as u64) as usize;
        let mut batch: Vec<(Posted, bool)> = Vec::with_capacity(n);
        for j in 0..n {
            let inline = rng.below(3) == 0;
            let send = rng.below(3) == 0;
            let len = if inline {
                1 + rng.below(granted.max_inline_data as u64) as usize
            } else {
                1 + rng.below(SLOT as u64) as usize
            };
            for x in &mut src.mem[j * SLOT..j * SLOT + len] {
                *x = rng.next() as u8;
            }
            dst.mem[j * SLOT..(j + 1) * SLOT].fill(0);
            // Selective signaling: ~1 in 4, and always the last of the batch half the time.
            let signaled = rng.below(4) == 0 || (j == n - 1 && rng.below(2) == 0);
            let p = Posted {
                wr_id: next_id,
                signaled,
                slot: j,
                len,
                send,
            };
            next_id += 1;
            batch.push((p, inline));
        }
        // Receives for the SENDs (2 SGEs each: the slot split in two).
        for (p, _) in &batch {
            if p.send {
                let half = (p.len / 2) as u32;
                let rs = [
                    dst.mr.sge(p.slot * SLOT, half.max(1)),
                    dst.mr.sge(
                        p.slot * SLOT + half.max(1) as usize,
                        SLOT as u32 - half.max(1),
                    ),
                ];
                b.rq()
                    .post_recv(RecvWr {
                        wr_id: p.wr_id,
                        sges: &rs,
                    })
                    .unwrap();
            }
        }
        b.rq().ring();
        let mut posted = 0;
        for (k, (p, inline)) in batch.iter().enumerate() {
            let off = p.slot * SLOT;
            let data = &src.mem[off..off + p.len];
            // Split the SGE payload into 1..=4 pieces.
            let pieces = 1 + rng.below(4.min(p.len as u64)) as usize;
            let mut cut = 0usize;
            for (i, s) in sges[k].iter_mut().enumerate().take(pieces) {
                let rest = p.len - cut;
                let l = if i == pieces - 1 {
                    rest
                } else {
                    1 + rng.below((rest - (pieces - 1 - i)) as u64) as usize
                };
                *s = src.mr.sge(off + cut, l as u32);
                cut += l;
            }
            let op = if p.send {
                SendOp::Send
            } else {
                SendOp::Write {
                    raddr: dst.mr.addr() + off as u64,
                    rkey: dst.mr.rkey(),
                }
            };
            let mut wr = SendWr::new(p.wr_id, op, &sges[k][..pieces]);
            if *inline {
                wr = wr.inline(data);
            }
            if p.signaled {
                wr = wr.signaled();
            }
            match a.sq().post(wr) {
                Ok(()) => {
                    ledger.push_back(*p);
                    posted += 1;
                }
                Err(r) => panic!("post {} refused: {}", p.wr_id, r.error),
            }
        }
        a.sq().ring();
        assert_eq!(posted, n);
        // Everything of this batch must be retired before the next one reuses the slots:
        // if the batch ended unsignaled, add a signaled NOP-like zero-length WRITE.
        if !batch.last().unwrap().0.signaled {
            let p = Posted {
                wr_id: next_id,
                signaled: true,
                slot: 0,
                len: 0,
                send: false,
            };
            next_id += 1;
            let wr = SendWr::new(
                p.wr_id,
                SendOp::Write {
                    raddr: dst.mr.addr(),
                    rkey: dst.mr.rkey(),
                },
                &[],
            )
            .signaled();
            a.sq().post(wr).unwrap();
            a.sq().ring();
            ledger.push_back(p);
        }
        let sends = batch.iter().filter(|(p, _)| p.send).count();
        let mut ca = Vec::new();
        let mut cb = Vec::new();
        for _ in 0..100 {
            poll_all(&mut dev, &mut cqa, &mut ca);
            poll_all(&mut dev, &mut cqb, &mut cb);
            if ledger.is_empty() && cb.len() == sends {
                break;
            }
            // Retire from the ledger as completions come.
            for c in ca.drain(..) {
                completions += 1;
                assert_eq!(c.status, WcStatus::Success, "{c:?}");
                let mut covered = 0;
                loop {
                    let p = ledger
                        .pop_front()
                        .expect("completion for nothing outstanding");
                    if p.wr_id == c.wr_id {
                        assert!(p.signaled, "completion for an unsignaled request {p:?}");
                        break;
                    }
                    assert!(!p.signaled, "signaled {p:?} skipped by {c:?}");
                    if covered == 0 {
                        assert_eq!(c.covered_from, p.wr_id);
                    }
                    covered += 1;
                }
                assert_eq!(c.covered, covered, "{c:?}");
                assert_eq!(
                    c.opcode,
                    if batch.iter().any(|(p, _)| p.wr_id == c.wr_id && p.send) {
                        WcOpcode::Send
                    } else {
                        WcOpcode::RdmaWrite
                    }
                );
            }
        }
        assert!(ledger.is_empty(), "outstanding after the batch: {ledger:?}");
        assert_eq!(cb.len(), sends, "receive completions");
        for c in &cb {
            let (p, _) = batch
                .iter()
                .find(|(p, _)| p.wr_id == c.wr_id)
                .expect("recv wr_id");
            assert_eq!(
                (c.status, c.opcode, c.byte_len),
                (WcStatus::Success, WcOpcode::Recv, p.len as u32)
            );
        }
        // Every byte of every slot.
        for (p, _) in &batch {
            let off = p.slot * SLOT;
            assert_eq!(
                &dst.mem[off..off + p.len],
                &src.mem[off..off + p.len],
                "wr {} bytes",
                p.wr_id
            );
            assert!(
                dst.mem[off + p.len..off + SLOT].iter().all(|&x| x == 0),
                "wr {} wrote past its end",
                p.wr_id
            );
            bytes_checked += SLOT as u64;
        }
        done += n as u64;
    }
    // The producer index is free running: its WQEBB count says how often the small ring
    // (and, on long runs, the 16-bit wqe_idx) wrapped.
    let wqebbs = a.sq().pi();
    let laps = wqebbs / (granted.max_send_wr * 2).next_power_of_two();
    assert!(laps > 1000 || ops < 60_000, "only {laps} ring laps");
    let wrapped = wqebbs >> 16;
    // Single-WQE posts went out as BlueFlame copies; the device compared each with the ring.
    let st = dev.stats();
    // The mix sends several percent of its requests alone, as copies (154 of 2,000 in a short
    // run); more than one in 60 of any run's length is asked.
    assert!(st.bf_copies > ops / 60, "BlueFlame path exercised: {st:?}");
    assert_eq!(
        st.bf_mismatches, 0,
        "a BlueFlame copy differed from its WQE: {st:?}"
    );
    println!(
        "ring_wrap_soak: {done} requests, {completions} send completions, {bytes_checked} bytes checked, {wqebbs} WQEBBs ({laps}+ ring laps, 16-bit wqe_idx wrapped {wrapped} times); sim stats {:?}",
        dev.stats()
    );
    drop((a, b));
}

/// Per-queue ledger entry of the fault soak.
#[derive(Clone, Copy, Debug)]
struct Req {
    wr_id: u64,
    signaled: bool,
}

struct Pair {
    a: SimQp,
    b: SimQp,
    sq: VecDeque<Req>,
    rq: VecDeque<u64>,
}

fn fault_soak(threaded: bool, seed: u64, ops: u64) {
    let mut dev = SimDevice::new();
    dev.set_faults(Some(FaultConfig {
        seed,
        error_ppm: 2_000,
        delay_ppm: 200_000,
        max_delay_passes: 6,
        reorder_ppm: 300_000,
        torn_write_spins: if threaded { 200 } else { 0 },
        packet_drop_ppm: 0,
        packet_corrupt_ppm: 0,
        packet_delay_ppm: 0,
        packet_duplicate_ppm: 0,
    }));
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let pd = dev.alloc_pd().unwrap();
    let caps = QpCaps {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 32,
    };
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps,
        sq_sig_all: false,
    };
    // One send CQ shared by every requester (completions of different QPs interleave), one
    // receive CQ shared by every responder. Sized for every WQE (flushes are per WQE).
    let mut scq = dev.create_cq(256).unwrap();
    let mut rcq = dev.create_cq(256).unwrap();
    let mut src = buf(&mut dev, &pd, 4096);
    let dst = buf(&mut dev, &pd, 4096);
    for (i, x) in src.mem.iter_mut().enumerate() {
        *x = i as u8;
    }
    let opts = ConnectOpts {
        rnr_retry: 7,
        retry_cnt: 3,
        ..ConnectOpts::default()
    };
    let mut pairs: Vec<Pair> = (0..3)
        .map(|_| {
            let mut a = dev.create_qp(&pd, &mut scq, None, None, &cfg).unwrap();
            let mut b = dev.create_qp(&pd, &mut rcq, None, None, &cfg).unwrap();
            connect_pair(&mut dev, &mut a, &mut b, &opts);
            Pair {
                a,
                b,
                sq: VecDeque::new(),
                rq: VecDeque::new(),
            }
        })
        .collect();
    let mut rng = Rng(seed ^ 0x9e37_79b9_7f4a_7c15);
    let mut next_id = 1u64;
    let (mut posted, mut own, mut covered, mut flushed, mut errors, mut resets) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut wc = [Completion::EMPTY; 5];
    let mut idle_rounds = 0u64;
    while posted < ops || pairs.iter().any(|p| !p.sq.is_empty()) {
        // Post a few requests on a random pair (if it is usable).
        let k = rng.below(pairs.len() as u64) as usize;
        // Keep receives up on every responder for the SENDs (to the end of the run: a SEND
        // waits for one forever with rnr_retry 7).
        for p in pairs.iter_mut() {
            let mut added = false;
            while p.b.rq().free_slots() > 0 && p.rq.len() < 12 {
                let id = next_id;
                next_id += 1;
                p.b.rq()
                    .post_recv(RecvWr {
                        wr_id: id,
                        sges: &[dst.mr.sge(0, 4096)],
                    })
                    .unwrap();
                p.rq.push_back(id);
                added = true;
            }
            if added {
                p.b.rq().ring();
            }
        }
        let p = &mut pairs[k];
        if posted < ops && p.a.state() == QpState::Rts {
            let n = 1 + rng.below(4);
            for _ in 0..n {
                // One slot of max_send_wr stays free for the signaled WRITE that retires a
                // queue of unsignaled requests (below).
                if p.sq.len() + 1 >= caps.max_send_wr as usize {
                    break;
                }
                let id = next_id;
                let signaled = rng.below(3) == 0;
                let len = 1 + rng.below(64) as u32;
                let sge = [src.mr.sge(rng.below(1024) as usize, len)];
                let op = if rng.below(2) == 0 {
                    SendOp::Send
                } else {
                    SendOp::Write {
                        raddr: dst.mr.addr() + 2048,
                        rkey: dst.mr.rkey(),
                    }
                };
                let mut wr = SendWr::new(id, op, &sge);
                if signaled {
                    wr = wr.signaled();
                }
                if p.a.sq().post(wr).is_ok() {
                    next_id += 1;
                    posted += 1;
                    p.sq.push_back(Req {
                        wr_id: id,
                        signaled,
                    });
                } else {
                    break;
                }
            }
            p.a.sq().ring();
        }
        // If every outstanding request of a QP is unsignaled, nothing would ever retire
        // them: close the run with a signaled zero-length WRITE.
        for p in pairs.iter_mut() {
            if p.a.state() == QpState::Rts && !p.sq.is_empty() && p.sq.iter().all(|r| !r.signaled) {
                let id = next_id;
                let wr = SendWr::new(
                    id,
                    SendOp::Write {
                        raddr: dst.mr.addr(),
                        rkey: dst.mr.rkey(),
                    },
                    &[],
                )
                .signaled();
                if p.a.sq().post(wr).is_ok() {
                    next_id += 1;
                    posted += 1;
                    p.sq.push_back(Req {
                        wr_id: id,
                        signaled: true,
                    });
                    p.a.sq().ring();
                }
            }
        }
        dev.progress();
        // Send completions: each retires itself and the `covered` requests before it.
        let mut got = 0;
        loop {
            let n = scq.poll(&mut wc);
            got += n;
            for c in &wc[..n] {
                let p = pairs
                    .iter_mut()
                    .find(|p| p.a.qpn() == c.qp_num)
                    .expect("qp_num of a requester");
                let mut skipped = 0;
                loop {
                    let r =
                        p.sq.pop_front()
                            .unwrap_or_else(|| panic!("completion {c:?} with nothing outstanding"));
                    if r.wr_id == c.wr_id {
                        break;
                    }
                    assert!(!r.signaled, "signaled {r:?} skipped by {c:?}");
                    skipped += 1;
                }
                assert_eq!(c.covered, skipped, "{c:?}");
                covered += u64::from(skipped);
                match c.status {
                    WcStatus::Success => own += 1,
                    WcStatus::WrFlushErr => flushed += 1,
                    WcStatus::RetryExcErr => errors += 1,
                    s => panic!("unexpected status {s} in {c:?}"),
                }
                if !c.is_ok() {
                    // The host learns of the error from the CQE.
                    if p.a.state() != QpState::Err {
                        dev.to_error(&mut p.a).unwrap();
                    }
                }
            }
            if n == 0 {
                break;
            }
        }
        loop {
            let n = rcq.poll(&mut wc);
            got += n;
            for c in &wc[..n] {
                let p = pairs
                    .iter_mut()
                    .find(|p| p.b.qpn() == c.qp_num)
                    .expect("qp_num of a responder");
                let id =
                    p.rq.pop_front()
                        .unwrap_or_else(|| panic!("receive completion {c:?} with nothing posted"));
                assert_eq!(id, c.wr_id, "receives complete in order");
                assert!(c.is_ok() || c.status == WcStatus::WrFlushErr, "{c:?}");
            }
            if n == 0 {
                break;
            }
        }
        // A failed requester whose queue is fully retired goes RESET -> RTS again.
        for p in pairs.iter_mut() {
            if p.a.state() == QpState::Err && p.sq.is_empty() {
                let ea = dev.endpoint(&p.a, &opts).unwrap();
                let eb = dev.endpoint(&p.b, &opts).unwrap();
                dev.connect(&mut p.a, &ea, &eb, &opts).unwrap();
                resets += 1;
            }
        }
        if got == 0 {
            idle_rounds += 1;
            if threaded {
                std::hint::spin_loop();
            }
            assert!(
                idle_rounds < 50_000_000,
                "no progress: {:?}",
                pairs.iter().map(|p| p.sq.len()).collect::<Vec<_>>()
            );
        } else {
            idle_rounds = 0;
        }
    }
    // Flush the responders' receives: every one must come back exactly once.
    for p in pairs.iter_mut() {
        dev.to_error(&mut p.b).unwrap();
    }
    // In device-thread mode the flush is the device thread's work, which a loaded machine
    // may not schedule for a while: the bound is a deadline (against a hang), not a count of
    // polls that a fast poller exhausts first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        dev.progress();
        if threaded {
            std::thread::yield_now();
        }
        let n = rcq.poll(&mut wc);
        for c in &wc[..n] {
            let p = pairs.iter_mut().find(|p| p.b.qpn() == c.qp_num).unwrap();
            assert_eq!(p.rq.pop_front(), Some(c.wr_id));
        }
        if pairs.iter().all(|p| p.rq.is_empty()) {
            break;
        }
    }
    assert!(
        pairs.iter().all(|p| p.rq.is_empty() && p.sq.is_empty()),
        "requests never retired"
    );
    assert_eq!(
        own + covered + flushed + errors,
        posted,
        "ledger: every request exactly once"
    );
    let fs = dev.fault_stats();
    assert!(
        fs.errors > 0 && fs.delayed > 0,
        "faults were injected: {fs:?}"
    );
    assert!(dev.take_events().is_empty(), "no CQ overrun");
    println!(
        "fault_soak(threaded={threaded}, seed={seed:#x}): {posted} posted = {own} own + {covered} covered + {flushed} flushed + {errors} errors; {resets} QP resets; faults {fs:?}"
    );
    dev.stop_device_thread();
    drop(pairs);
}

#[test]
fn fault_soak_deterministic() {
    fault_soak(false, 0xfa17_0001, ops_from_env(30_000));
}

#[test]
fn fault_soak_device_thread() {
    fault_soak(true, 0xfa17_0002, ops_from_env(30_000) / 3);
}
