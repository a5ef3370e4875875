//! The verbs provider's post/poll path allocates nothing per operation: a counting global
//! allocator watches a loop of posts, rings and polls on rxe0 (device test, run in the guest).
//!
//! What it proves: no Rust allocation in `post`, `ring`, `post_recv`, `poll` of the verbs
//! provider (the WR/SGE/inline staging and the `ibv_wc` array are preallocated or on the
//! stack). Memory libibverbs or the kernel use internally is not Rust's and is not counted.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rdma_direct::providers::verbs::VerbsDevice;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpCaps, QpConfig,
    QpType, QueuePair, RecvQueue, RecvWr, SendOp, SendQueue, SendWr,
};

/// Counts allocations made by threads that switched counting on.
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn note() {
    // `try_with`: during thread teardown the key may be gone; then nothing is counted.
    let _ = COUNTING.try_with(|c| {
        if c.get() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
    });
}

// SAFETY: forwards to the system allocator unchanged; the bookkeeping allocates nothing.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded caller contract.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        note();
        // SAFETY: forwarded caller contract.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        note();
        // SAFETY: forwarded caller contract.
        unsafe { System.realloc(p, l, n) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded caller contract.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn count<R>(f: impl FnOnce() -> R) -> (R, u64) {
    let before = ALLOCS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    let r = f();
    COUNTING.with(|c| c.set(false));
    (r, ALLOCS.load(Ordering::Relaxed) - before)
}

#[test]
fn the_counter_counts() {
    let (v, n) = count(|| vec![1u8; 100]);
    assert_eq!(v.len(), 100);
    assert!(n >= 1, "a Vec allocation was not counted");
    let (_, n) = count(|| 1 + 1);
    assert_eq!(n, 0);
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn post_and_poll_allocate_nothing_per_operation() {
    let dev = common::device();
    let mut p = VerbsDevice::open(&dev).unwrap_or_else(|e| panic!("open {dev}: {e}"));
    let gid_index = common::gid_index().unwrap_or_else(|| {
        p.context()
            .default_gid_index(1)
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let opts = ConnectOpts {
        gid_index,
        retry_cnt: 6,
        ..ConnectOpts::default()
    };
    let pd = p.alloc_pd().unwrap();
    let mut buf = memmap2::MmapMut::map_anon(1 << 16).unwrap();
    // SAFETY: `buf` outlives the MR (dropped at the end, after it).
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), 1 << 16, Access::ALL) }.unwrap();
    let mut cqa = p.create_cq(64).unwrap();
    let mut cqb = p.create_cq(64).unwrap();
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps: QpCaps {
            max_send_wr: 32,
            max_recv_wr: 32,
            max_send_sge: 2,
            max_recv_sge: 2,
            max_inline_data: 64,
        },
        sq_sig_all: false,
    };
    let mut a = p.create_qp(&pd, &mut cqa, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut cqb, None, None, &cfg).unwrap();
    let ea = p.endpoint(&a, &opts).unwrap();
    let eb = p.endpoint(&b, &opts).unwrap();
    p.connect(&mut a, &ea, &eb, &opts).unwrap();
    p.connect(&mut b, &eb, &ea, &opts).unwrap();

    let send_sge = [mr.sge(0, 256), mr.sge(512, 256)];
    let recv_sge = [mr.sge(4096, 1024)];
    let cas_sge = [mr.sge(8192, 8)];
    let raddr = mr.addr() + 16384;
    let rkey = mr.rkey();
    let inline = [0x42u8; 48];
    let mut wc = [Completion::EMPTY; 16];

    // One round: 1 receive, SEND (2 SGEs) + 3 unsignaled WRITEs + inline WRITE + CAS
    // (signaled, covers 4), one ring each side; poll until the 2 completions at `a` and 1
    // at `b` are in. Returns the completions seen.
    let mut round = |i: u64| -> u32 {
        b.rq()
            .post_recv(RecvWr {
                wr_id: i,
                sges: &recv_sge,
            })
            .unwrap();
        b.rq().ring();
        let sq = a.sq();
        sq.post(SendWr::send(i, &send_sge).signaled()).unwrap();
        for k in 0..3 {
            sq.post(SendWr::write(i + 1 + k, &send_sge[..1], raddr, rkey))
                .unwrap();
        }
        sq.post(SendWr::write(i + 4, &[], raddr + 1024, rkey).inline(&inline))
            .unwrap();
        sq.post(
            SendWr::new(
                i + 5,
                SendOp::CompareSwap {
                    raddr: raddr + 2048,
                    rkey,
                    compare: 0,
                    swap: 0,
                },
                &cas_sge,
            )
            .signaled(),
        )
        .unwrap();
        sq.ring();
        let (mut na, mut nb) = (0, 0);
        let end = Instant::now() + Duration::from_secs(10);
        while na < 2 || nb < 1 {
            let k = cqa.poll(&mut wc);
            for c in &wc[..k] {
                assert!(c.is_ok(), "{c:?}");
            }
            if k == 2 || (k == 1 && na == 1) {
                assert_eq!(wc[k - 1].covered, 4, "{:?}", &wc[..k]);
            }
            na += k;
            let k = cqb.poll(&mut wc);
            nb += k;
            assert!(Instant::now() < end, "round {i} timed out");
        }
        (na + nb) as u32
    };

    // Warm up (first calls may touch lazily initialised state), then count.
    for i in 0..4 {
        round(1000 + i * 10);
    }
    let rounds = 200u64;
    let (seen, allocs) = count(|| {
        let mut seen = 0;
        for i in 0..rounds {
            seen += round(10_000 + i * 10);
        }
        seen
    });
    assert_eq!(seen as u64, rounds * 3, "completions");
    println!(
        "{rounds} rounds = {} posts, {} rings, {} completions polled on {}: {allocs} allocations",
        rounds * 7,
        rounds * 2,
        seen,
        p.device_name()
    );
    assert_eq!(allocs, 0, "the post/poll path allocated");
    drop((a, b, cqa, cqb, mr, pd));
    drop(buf);
}
