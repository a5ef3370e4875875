//! Proof of the hot-path contract on the mlx5 provider: post, ring and poll make no
//! allocation and no system call.
//!
//! The queues run on plain memory (the rig `benches/rig/plain.rs`), the test playing
//! the device (it answers WQEs with CQEs through the same memory). Two detectors:
//!
//! - **Allocations**: a counting `#[global_allocator]` counts allocations made by a thread
//!   while that thread has switched counting on, into a per-thread counter (`const`
//!   thread-locals, so the bookkeeping never allocates). Other test threads are not counted.
//! - **System calls**: the loop runs in a thread that installs a seccomp filter (after
//!   `PR_SET_NO_NEW_PRIVS`; a filter binds the calling thread only) under which every system
//!   call but `rt_sigreturn`, `exit` and `exit_group` raises SIGSYS (`SECCOMP_RET_TRAP`)
//!   instead of running. The SIGSYS handler, installed before, counts into a static atomic and
//!   makes the trapped call return `-ENOSYS`, so the thread goes on and can finish (its exit
//!   path's `madvise` etc. just fail harmlessly, and `exit` is allowed). The count is read right
//!   after the loop. A deliberate `getpid` afterwards must raise the count by one: the
//!   detector is shown to work in the same run.

use rdma_direct_rig as plain;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use plain::{Cqe, Plain, PlainCq, PlainQp, PlainSrq};
use rdma_direct::providers::mlx5::{DoorbellMode, Mlx5Cq, Mlx5Dedicated, Mlx5Qp, Mlx5Srq};
use rdma_direct::providers::{
    Completion, CompletionQueue, QpCaps, QpConfig, QpState, QpType, QueuePair, RecvQueue, RecvWr,
    SendOp, SendQueue, SendWr, Sge,
};

struct Counting;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    /// Allocations this thread made while counting (per thread: tests run in parallel).
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn note_alloc() {
    // `try_with`: during thread teardown the flags may be gone; nothing to count then.
    if COUNTING.try_with(|c| c.get()).unwrap_or(false) {
        let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
    }
}

fn allocs() -> u64 {
    ALLOCS.with(|a| a.get())
}

fn reset_allocs() {
    ALLOCS.with(|a| a.set(0));
}

// SAFETY: forwards to the system allocator unchanged; the bookkeeping neither allocates nor
// touches the returned memory.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note_alloc();
        // SAFETY: same contract as ours.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note_alloc();
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const QPN: u32 = 0x42;

/// Everything the loop needs, built (allocating) before it.
struct Rig {
    qp: Mlx5Qp<Plain>,
    srq_qp: Mlx5Qp<Plain>,
    cq: Mlx5Cq<Plain>,
    srq: Mlx5Srq<Plain>,
    dev: PlainQp,
    dcq: PlainCq,
    _dsrq: PlainSrq,
    _dsrq_qp: PlainQp,
    /// A QP and the CQ it alone completes into, owned together, with its device sides.
    ded: Mlx5Dedicated<Plain>,
    dded: PlainQp,
    ddcq: PlainCq,
    buf: Vec<u8>,
}

fn rig() -> Rig {
    let caps = QpCaps {
        max_send_wr: 64,
        max_recv_wr: 64,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 64,
    };
    let dev = PlainQp::new(QPN, 64, 64, 32, 256);
    let dcq = PlainCq::new(1, 256, 64);
    let dsrq = PlainSrq::new(5, 64, 48);
    let dsrq_qp = PlainQp::new(QPN + 1, 16, 0, 0, 0);
    // SAFETY: plain memory kept alive by the owners; used by these objects only.
    let mut cq = unsafe { Mlx5Cq::<Plain>::from_dv(dcq.dv, dcq.owner()) }.unwrap();
    // SAFETY: as above.
    let mut srq = unsafe { Mlx5Srq::<Plain>::from_dv(dsrq.dv, 2, dsrq.owner()) }.unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    // SAFETY: as above.
    let mut qp =
        unsafe { Mlx5Qp::<Plain>::from_dv(dev.dv, &cfg, caps, &mut cq, None, None, dev.owner()) }
            .unwrap();
    // SAFETY: as above.
    let mut srq_qp = unsafe {
        Mlx5Qp::<Plain>::from_dv(
            dsrq_qp.dv,
            &cfg,
            caps,
            &mut cq,
            None,
            Some(&mut srq),
            dsrq_qp.owner(),
        )
    }
    .unwrap();
    let dded = PlainQp::new(QPN + 2, 64, 64, 32, 256);
    let ddcq = PlainCq::new(2, 256, 64);
    // SAFETY: as above.
    let mut dcq2 = unsafe { Mlx5Cq::<Plain>::from_dv(ddcq.dv, ddcq.owner()) }.unwrap();
    // SAFETY: as above.
    let mut ded_qp = unsafe {
        Mlx5Qp::<Plain>::from_dv(dded.dv, &cfg, caps, &mut dcq2, None, None, dded.owner())
    }
    .unwrap();
    for q in [&mut qp, &mut srq_qp, &mut ded_qp] {
        q.set_state(QpState::Init);
        q.set_state(QpState::Rtr);
        q.set_state(QpState::Rts);
    }
    Rig {
        qp,
        srq_qp,
        cq,
        srq,
        dev,
        dcq,
        _dsrq: dsrq,
        _dsrq_qp: dsrq_qp,
        ded: Mlx5Dedicated::new(ded_qp, dcq2).unwrap(),
        dded,
        ddcq,
        buf: vec![0u8; 4096],
    }
}

/// The measured loop: every operation kind, both doorbell modes, receives, SRQ receives,
/// polling. Returns the completions seen (so nothing is optimised away).
fn hot_loop(r: &mut Rig, iters: u32) -> u64 {
    let mut out = [Completion::EMPTY; 16];
    let mut seen = 0u64;
    let base = r.buf.as_mut_ptr() as u64;
    let sge = [Sge {
        addr: base,
        length: 8,
        lkey: 1,
    }];
    let payload = [7u8; 8];
    let mut srq_idx = 0u16;
    for i in 0..iters {
        r.qp.set_doorbell_mode(if i % 2 == 0 {
            DoorbellMode::Auto
        } else {
            DoorbellMode::Doorbell
        });
        let id = u64::from(i) * 8;
        let sq = r.qp.sq();
        sq.post(SendWr::write(id, &[], 0x1000, 2).inline(&payload))
            .unwrap();
        sq.post(SendWr::send(id + 1, &sge)).unwrap();
        sq.post(SendWr::read(id + 2, &sge, 0x2000, 3)).unwrap();
        let fa = SendOp::FetchAdd {
            raddr: 0x3000,
            rkey: 4,
            add: 1,
        };
        sq.post(SendWr::new(id + 3, fa, &sge).signaled()).unwrap();
        sq.ring();
        // Single-WQE post: BlueFlame in Auto mode.
        sq.post(SendWr::send(id + 4, &sge).signaled()).unwrap();
        sq.ring();
        // Post and doorbell in one call: the one-message way with the doorbell, the
        // general way with BlueFlame.
        sq.post_and_ring(SendWr::write(id + 7, &[], 0x1000, 2).inline(&payload))
            .unwrap();
        // Selective signaling: one CQE covering two unsignaled requests (a SEND, no byte
        // length: the fast path's covered way, in `poll_one` and in a poll's run alike).
        sq.post(SendWr::send(id + 8, &sge)).unwrap();
        sq.post(SendWr::write(id + 10, &[], 0x1000, 2).inline(&payload))
            .unwrap();
        sq.post(SendWr::send(id + 12, &sge).signaled()).unwrap();
        sq.ring();
        r.qp.rq()
            .post_recv(RecvWr {
                wr_id: id + 5,
                sges: &sge,
            })
            .unwrap();
        r.qp.rq().ring();
        r.srq
            .post_recv(RecvWr {
                wr_id: id + 6,
                sges: &sge,
            })
            .unwrap();
        r.srq.ring();
        // The device: answer the signaled sends, the receive and the SRQ receive.
        r.dev.complete_sends(&mut r.dcq);
        r.dcq.push(&Cqe::resp(2, QPN, 0, 8, 0));
        r.dcq.push(&Cqe::resp(3, QPN + 1, srq_idx, 8, 9));
        srq_idx = (srq_idx + 1) % 64;
        // Every other round the completions come one at a time through `poll_one`.
        let mut one = Completion::EMPTY;
        while i % 2 == 1 && r.cq.poll_one(&mut one) {
            assert!(one.is_ok());
            seen += (one.wr_id & 1) + 1;
        }
        loop {
            let n = r.cq.poll(&mut out);
            if n == 0 {
                break;
            }
            for c in &out[..n] {
                seen += c.wr_id & 1;
                assert!(c.is_ok());
            }
            seen += n as u64;
        }
    }
    let _ = &r.srq_qp;
    seen + dedicated_round_trips(r, iters)
}

/// The dedicated pair's loop: an inline WRITE WITH IMMEDIATE and a receive per round, their
/// CQEs polled one at a time (`poll_one`) or 16 slots at a time, alternately.
fn dedicated_round_trips(r: &mut Rig, iters: u32) -> u64 {
    let mut seen = 0u64;
    let sge = [Sge {
        addr: r.buf.as_mut_ptr() as u64,
        length: 8,
        lkey: 1,
    }];
    let payload = [9u8; 8];
    for i in 0..iters {
        let id = u64::from(i);
        r.ded
            .rq()
            .post_recv(RecvWr {
                wr_id: id,
                sges: &sge,
            })
            .unwrap();
        r.ded.rq().ring();
        let sq = r.ded.sq();
        if i / 2 % 2 == 1 {
            // An unsignaled request the next completion covers (the pair's covered way).
            sq.post(SendWr::write(u64::MAX, &[], 0x1000, 2).inline(&payload))
                .unwrap();
        }
        sq.post(
            SendWr::write_imm(id, &[], 0x1000, 2, 5)
                .inline(&payload)
                .signaled(),
        )
        .unwrap();
        sq.ring();
        r.dded.complete_sends(&mut r.ddcq);
        r.ddcq.push(&Cqe::resp(1, QPN + 2, 0, 8, 5));
        if i % 2 == 0 {
            let mut one = Completion::EMPTY;
            let cover = u32::from(i / 2 % 2 == 1);
            while r.ded.poll_one(&mut one) {
                assert!(one.is_ok() && one.wr_id == id);
                assert_eq!(one.covered, if one.opcode.is_recv() { 0 } else { cover });
                seen += 1;
            }
        } else {
            let mut out = [Completion::EMPTY; 16];
            let n = r.ded.poll(&mut out);
            assert!(out[..n].iter().all(|c| c.is_ok() && c.wr_id == id));
            let covered: u32 = out[..n].iter().map(|c| c.covered).sum();
            assert_eq!(covered, u32::from(i / 2 % 2 == 1));
            seen += n as u64;
        }
    }
    assert_eq!(
        seen,
        2 * u64::from(iters),
        "both CQEs of every round polled"
    );
    seen
}

#[test]
fn post_ring_poll_do_not_allocate() {
    let mut r = rig();
    hot_loop(&mut r, 10); // warm up
    reset_allocs();
    COUNTING.with(|c| c.set(true));
    let seen = hot_loop(&mut r, 2_000);
    COUNTING.with(|c| c.set(false));
    let during = allocs();
    assert!(seen > 2_000 * 4, "the loop completed work ({seen})");
    assert_eq!(during, 0, "allocations in the hot loop");
    // Positive control: the counter sees an allocation.
    COUNTING.with(|c| c.set(true));
    let b = std::hint::black_box(Box::new(5u64));
    COUNTING.with(|c| c.set(false));
    drop(b);
    assert_eq!(allocs(), 1);
}

static TRAPPED: AtomicU64 = AtomicU64::new(0);

extern "C" fn on_sigsys(_sig: libc::c_int, _info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    TRAPPED.fetch_add(1, Ordering::Relaxed);
    let uc = ctx as *mut libc::ucontext_t;
    // Make the trapped system call return -ENOSYS.
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the kernel passes a valid ucontext to an SA_SIGINFO handler; REG_RAX is the
    // return-value register of the interrupted system call.
    unsafe {
        (*uc).uc_mcontext.gregs[libc::REG_RAX as usize] = -(libc::ENOSYS as i64);
    }
    #[cfg(target_arch = "aarch64")]
    // SAFETY: as above; x0 holds the return value.
    unsafe {
        (*uc).uc_mcontext.regs[0] = (-(libc::ENOSYS as i64)) as u64;
    }
}

const AUDIT_ARCH: u32 = if cfg!(target_arch = "x86_64") {
    0xc000_003e
} else {
    0xc000_00b7
};

/// BPF_LD | BPF_W | BPF_ABS: load the 32-bit word at offset k of `struct seccomp_data`.
const LD_W_ABS: u16 = 0x20;
/// BPF_JMP | BPF_JEQ | BPF_K: skip `jt` instructions when equal to k, else `jf`.
const JEQ_K: u16 = 0x15;
/// BPF_RET | BPF_K: return k.
const RET_K: u16 = 0x06;

fn bpf(code: u16, jt: u8, jf: u8, k: u32) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

/// Install the filter on the calling thread; returns false when the kernel refuses.
fn install_filter(prog: &mut [libc::sock_filter]) -> bool {
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_mut_ptr(),
    };
    // SAFETY: plain prctl calls with valid arguments; the program outlives the call (the
    // kernel copies it).
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return false;
        }
        libc::prctl(
            libc::PR_SET_SECCOMP,
            libc::SECCOMP_MODE_FILTER as libc::c_ulong,
            &fprog as *const libc::sock_fprog,
        ) == 0
    }
}

#[test]
fn post_ring_poll_make_no_system_call() {
    let mut r = rig();
    hot_loop(&mut r, 10); // warm up (first touches, lazy binding)
                          // SAFETY: installing a process-wide SIGSYS handler that only touches an atomic and the
                          // ucontext it is given.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigsys as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        assert_eq!(libc::sigaction(libc::SIGSYS, &sa, std::ptr::null_mut()), 0);
    }
    let h = std::thread::spawn(move || {
        // nr is at offset 0 of struct seccomp_data, arch at 4.
        let mut prog = [
            bpf(LD_W_ABS, 0, 0, 4),
            bpf(JEQ_K, 1, 0, AUDIT_ARCH),
            bpf(RET_K, 0, 0, libc::SECCOMP_RET_TRAP),
            bpf(LD_W_ABS, 0, 0, 0),
            bpf(JEQ_K, 3, 0, libc::SYS_rt_sigreturn as u32),
            bpf(JEQ_K, 2, 0, libc::SYS_exit as u32),
            bpf(JEQ_K, 1, 0, libc::SYS_exit_group as u32),
            bpf(RET_K, 0, 0, libc::SECCOMP_RET_TRAP),
            bpf(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        ];
        if !install_filter(&mut prog) {
            return None;
        }
        let start = TRAPPED.load(Ordering::Relaxed);
        let seen = hot_loop(&mut r, 2_000);
        let during = TRAPPED.load(Ordering::Relaxed) - start;
        // Positive control: a real system call is caught.
        // SAFETY: getpid has no preconditions (here it is trapped and returns -ENOSYS).
        let ret = unsafe { libc::syscall(libc::SYS_getpid) };
        let after = TRAPPED.load(Ordering::Relaxed) - start;
        // Leak the rig: dropping it would free memory (possibly munmap, trapped harmlessly,
        // but keep the exit path short).
        std::mem::forget(r);
        Some((seen, during, after, ret))
    });
    let (seen, during, after, ret) = h
        .join()
        .expect("filtered thread finished")
        .expect("seccomp filter installed (needs Linux with seccomp)");
    assert!(seen > 2_000 * 4, "the loop completed work ({seen})");
    assert_eq!(during, 0, "system calls in the hot loop");
    assert_eq!(after, 1, "the detector caught the deliberate getpid");
    assert_eq!(ret, -1, "the trapped getpid returned -ENOSYS");
}

/// The same contract with the software mlx5 device on the other side: the provider's calls
/// (post, ring, post_recv, poll) are counted; the device's own work (`progress`) is not.
#[test]
fn on_the_sim_post_ring_poll_do_not_allocate() {
    use rdma_direct::providers::sim::SimDevice;
    use rdma_direct::providers::{Access, ConnectOpts, MemoryRegion, Provider};

    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut mem = vec![0u8; 8192];
    // SAFETY: `mem` outlives the MR (both dropped at the end of the test, MR first).
    let mr = unsafe { dev.reg_mr(&pd, mem.as_mut_ptr(), mem.len(), Access::ALL) }.unwrap();
    let opts = ConnectOpts::default();
    let mut cqa = dev.create_cq(256).unwrap();
    let mut cqb = dev.create_cq(256).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = dev.create_qp(&pd, &mut cqa, None, None, &cfg).unwrap();
    let mut b = dev.create_qp(&pd, &mut cqb, None, None, &cfg).unwrap();
    let ea = dev.endpoint(&a, &opts).unwrap();
    let eb = dev.endpoint(&b, &opts).unwrap();
    dev.connect(&mut a, &ea, &eb, &opts).unwrap();
    dev.connect(&mut b, &eb, &ea, &opts).unwrap();
    let src = [mr.sge(0, 64)];
    let dst = [mr.sge(4096, 64)];
    let mut out = [Completion::EMPTY; 16];
    let counted = |on: bool| COUNTING.with(|c| c.set(on));
    let mut seen = 0u64;
    reset_allocs();
    for i in 0..2_000u64 {
        counted(true);
        b.rq()
            .post_recv(RecvWr {
                wr_id: i,
                sges: &dst,
            })
            .unwrap();
        b.rq().ring();
        a.sq().post(SendWr::send(i, &src).signaled()).unwrap();
        a.sq()
            .post(SendWr::write(i, &src, mr.addr() + 2048, mr.rkey()).signaled())
            .unwrap();
        a.sq().ring();
        counted(false);
        dev.progress();
        counted(true);
        let mut got = 0;
        while got < 3 {
            let n = cqa.poll(&mut out) + cqb.poll(&mut out);
            if n == 0 {
                break;
            }
            got += n;
        }
        counted(false);
        if got < 3 {
            dev.progress();
            counted(true);
            got += cqa.poll(&mut out) + cqb.poll(&mut out);
            counted(false);
        }
        seen += got as u64;
    }
    counted(false);
    assert_eq!(seen, 3 * 2_000, "every request completed");
    assert_eq!(allocs(), 0, "allocations in the hot loop");
    drop(mr);
}

/// The message-loop glue (`providers::flow`) on the sim, per message: a send window and a
/// ring writer on one side, a receive replenisher and a ring reader on the other, the CQs
/// polled with `poll_any` and waited on with `wait_each`. Counted as above: the helpers'
/// calls and the provider's post / ring / poll; the device's own work (`progress`, which
/// `wait_each` also calls) is switched off around it where the loop calls it directly.
#[test]
fn on_the_sim_the_flow_helpers_do_not_allocate() {
    use rdma_direct::prelude::*;

    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let src = dev
        .alloc_buf(&pd, 64, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let ring = dev
        .alloc_buf(&pd, 8 * 64, Access::ALL, Pages::Normal)
        .unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let mut cqs = [dev.create_cq(64).unwrap(), dev.create_cq(64).unwrap()];
    let [ca, cb] = &mut cqs;
    let mut a = dev.create_qp(&pd, ca, None, None, &cfg).unwrap();
    let mut b = dev.create_qp(&pd, cb, None, None, &cfg).unwrap();
    connect_pair(&mut dev, &mut a, &mut b, &ConnectOpts::default()).unwrap();
    let target = ring
        .remote(0, ring.len())
        .unwrap()
        .target(0, 8 * 64)
        .unwrap();
    let mut writer = RingWriter::new(target, 64).unwrap();
    let mut reader = RingReader::new(8, 64, 4).unwrap();
    let mut window = SendWindow::new(&a);
    let mut rep = RecvReplenisher::new(8).for_qp(b.qpn());
    rep.fill(b.rq()).unwrap();
    let sge = [src.sge(0, 64).unwrap()];
    let mut wc = [Completion::EMPTY; 16];
    let mut turn = 0;
    let counted = |on: bool| COUNTING.with(|c| c.set(on));
    let mut read = 0u64;
    reset_allocs();
    for i in 0..2_000u64 {
        counted(true);
        // Write one message if the ring and the window have room.
        if window.room() > 0 {
            if let Some((seq, slot)) = writer.claim() {
                let wr =
                    SendWr::write_imm_to(seq, &sge, slot, seq as u32).signaled_if(seq % 4 == 3);
                window.post_list(a.sq(), &[wr]).unwrap();
            }
        }
        counted(false);
        dev.progress();
        counted(true);
        while let Some((cq, n)) = poll_any::<SimCq, _>(&mut cqs, &mut wc, &mut turn) {
            for c in &wc[..n] {
                c.check().unwrap();
                if cq == 0 {
                    window.retire(c);
                } else {
                    assert!(rep.consumed(c));
                    read += 1;
                    if let Some(upto) = reader.consume() {
                        writer.ack(upto);
                    }
                }
            }
        }
        rep.replenish(b.rq()).unwrap();
        // Every so often, wait for the window to empty (progress runs inside, counted too).
        if i % 64 == 63 && window.in_flight() > 0 {
            let owed = window.in_flight() as usize;
            let mut missing = [owed, 0];
            wait_each(
                &mut dev,
                &mut cqs,
                &mut missing,
                std::time::Duration::from_secs(5),
                |_, c| {
                    c.check()?;
                    window.retire(c);
                    Ok(1 + c.covered as usize)
                },
            )
            .unwrap();
        }
        counted(false);
    }
    counted(false);
    assert!(read > 1_000, "messages went through: {read}");
    assert_eq!(allocs(), 0, "allocations in the flow helpers' loop");
}
