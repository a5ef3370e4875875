//! Device tests of the verbs provider's own accounting (run in the guest on rxe0):
//! queue full, bad state (including rxe's "refused but queued" trap), invalid requests
//! refused before anything is staged, CQ overrun prevention, flush on ERR with the
//! selective-signaling bookkeeping intact.

mod common;

use std::time::{Duration, Instant};

use rdma_direct::providers::verbs::{VerbsCq, VerbsDevice, VerbsQp};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, PostError, Provider, QpCaps,
    QpConfig, QpState, QpType, QueuePair, RecvQueue, RecvWr, SendFlags, SendOp, SendQueue, SendWr,
    WcOpcode, WcStatus,
};

struct Pair {
    // Drop order: QPs, CQs, MR, PD, memory, device.
    a: VerbsQp,
    b: VerbsQp,
    cqa: VerbsCq,
    cqb: VerbsCq,
    mr: rdma_direct::control::Mr,
    _pd: rdma_direct::control::Pd,
    buf: memmap2::MmapMut,
    p: VerbsDevice,
    opts: ConnectOpts,
}

const BUF: usize = 64 << 10;

fn open() -> (VerbsDevice, ConnectOpts) {
    let dev = common::device();
    let p = VerbsDevice::open(&dev).unwrap_or_else(|e| panic!("open {dev}: {e}"));
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
    (p, opts)
}

/// Two RC QPs on their own CQs; connected unless `connect` is false (then both in RESET).
fn pair(caps: QpCaps, cqe: u32, connect: bool, rnr_retry: u8) -> Pair {
    let (mut p, mut opts) = open();
    opts.rnr_retry = rnr_retry;
    let pd = p.alloc_pd().unwrap();
    let mut buf = memmap2::MmapMut::map_anon(BUF).unwrap();
    buf.fill(0);
    // SAFETY: `buf` lives in the Pair and is dropped after the MR.
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), BUF, Access::ALL) }.unwrap();
    let mut cqa = p.create_cq(cqe).unwrap();
    let mut cqb = p.create_cq(cqe).unwrap();
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps,
        sq_sig_all: false,
    };
    let mut a = p.create_qp(&pd, &mut cqa, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut cqb, None, None, &cfg).unwrap();
    if connect {
        let ea = p.endpoint(&a, &opts).unwrap();
        let eb = p.endpoint(&b, &opts).unwrap();
        p.connect(&mut a, &ea, &eb, &opts).unwrap();
        p.connect(&mut b, &eb, &ea, &opts).unwrap();
    }
    Pair {
        a,
        b,
        cqa,
        cqb,
        mr,
        _pd: pd,
        buf,
        p,
        opts,
    }
}

fn caps(sq: u32, rq: u32) -> QpCaps {
    QpCaps {
        max_send_wr: sq,
        max_recv_wr: rq,
        max_send_sge: 2,
        max_recv_sge: 2,
        max_inline_data: 32,
    }
}

/// Poll `cq` until `n` completions arrived (10 s at most).
fn wait(cq: &mut VerbsCq, n: usize) -> Vec<Completion> {
    let mut out = Vec::new();
    let mut wc = [Completion::EMPTY; 8];
    let end = Instant::now() + Duration::from_secs(10);
    while out.len() < n {
        let k = cq.poll(&mut wc);
        out.extend_from_slice(&wc[..k]);
        assert!(
            Instant::now() < end,
            "timed out: {} of {n} completions: {out:?}",
            out.len()
        );
    }
    out
}

/// Nothing more arrives on `cq` within `ms` milliseconds.
fn quiet(cq: &mut VerbsCq, ms: u64) {
    let mut wc = [Completion::EMPTY; 8];
    let end = Instant::now() + Duration::from_millis(ms);
    while Instant::now() < end {
        let k = cq.poll(&mut wc);
        assert_eq!(k, 0, "unexpected completion: {:?}", &wc[..k]);
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn sq_full_hands_the_request_back_and_never_overwrites() {
    let mut t = pair(caps(4, 4), 16, true, 7);
    let sge = [t.mr.sge(0, 8)];
    let raddr = t.mr.addr() + 4096;
    let rkey = t.mr.rkey();
    let sq = t.a.sq();
    assert_eq!(
        sq.free_slots(),
        4,
        "SQ depth is the requested 4, not rxe's larger grant"
    );
    for i in 0..4 {
        let mut wr = SendWr::write(i, &sge, raddr, rkey);
        if i == 3 {
            wr = wr.signaled();
        }
        sq.post(wr).unwrap();
    }
    assert_eq!(sq.staged(), 4);
    let r = sq
        .post(SendWr::write(99, &sge, raddr, rkey).signaled())
        .unwrap_err();
    assert_eq!(r.error, PostError::QueueFull { capacity: 4 });
    assert_eq!(r.wr.wr_id, 99, "the refused request comes back");
    assert_eq!(sq.staged(), 4, "nothing staged by a refused post");
    sq.ring();
    let c = wait(&mut t.cqa, 1);
    assert_eq!(c[0].wr_id, 3);
    assert_eq!(c[0].status, WcStatus::Success);
    assert_eq!((c[0].covered, c[0].covered_from), (3, 0));
    assert_eq!(t.a.sq().free_slots(), 4, "the covered slots are reclaimed");
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn rq_full_and_too_many_sges() {
    let mut t = pair(caps(4, 2), 16, true, 7);
    let sge = [t.mr.sge(0, 64), t.mr.sge(64, 64), t.mr.sge(128, 64)];
    let rq = t.b.rq();
    let e = rq
        .post_recv(RecvWr {
            wr_id: 1,
            sges: &sge,
        })
        .unwrap_err();
    assert_eq!(e.error, PostError::TooManySges { n: 3, max: 2 });
    rq.post_recv(RecvWr {
        wr_id: 1,
        sges: &sge[..1],
    })
    .unwrap();
    rq.post_recv(RecvWr {
        wr_id: 2,
        sges: &[],
    })
    .unwrap();
    let e = rq
        .post_recv(RecvWr {
            wr_id: 3,
            sges: &[],
        })
        .unwrap_err();
    assert_eq!(e.error, PostError::QueueFull { capacity: 2 });
    assert_eq!(e.wr.wr_id, 3);
    rq.ring();
    assert_eq!(t.b.rq().free_slots(), 0);
    // Drain them with a flush: both come back, with their own wr_ids.
    let p = &mut t.p;
    p.to_error(&mut t.b).unwrap();
    let c = wait(&mut t.cqb, 2);
    assert_eq!(
        c.iter().map(|c| (c.wr_id, c.status)).collect::<Vec<_>>(),
        vec![(1, WcStatus::WrFlushErr), (2, WcStatus::WrFlushErr)]
    );
    assert_eq!(t.b.state(), QpState::Err);
}

/// rxe returns EINVAL for a post to a QP in RESET/INIT/RTR but keeps the request and runs it
/// once the QP reaches RTS. Ours refuses before libibverbs sees it: after the QPs are
/// connected, nothing of the refused request runs.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn bad_state_refusals_never_run_later() {
    let mut t = pair(caps(4, 4), 16, false, 7);
    t.buf[..64].fill(0x5a);
    let src = [t.mr.sge(0, 64)];
    let raddr = t.mr.addr() + 1024;
    let rkey = t.mr.rkey();
    assert_eq!(t.a.state(), QpState::Reset);
    let e =
        t.a.sq()
            .post(SendWr::write(7, &src, raddr, rkey).signaled())
            .unwrap_err();
    assert_eq!(
        e.error,
        PostError::BadState {
            state: QpState::Reset
        }
    );
    let e =
        t.b.rq()
            .post_recv(RecvWr {
                wr_id: 8,
                sges: &[],
            })
            .unwrap_err();
    assert_eq!(
        e.error,
        PostError::BadState {
            state: QpState::Reset
        }
    );
    t.a.sq().ring(); // nothing staged: nothing happens
    let ea = t.p.endpoint(&t.a, &t.opts).unwrap();
    let eb = t.p.endpoint(&t.b, &t.opts).unwrap();
    t.p.connect(&mut t.a, &ea, &eb, &t.opts).unwrap();
    t.p.connect(&mut t.b, &eb, &ea, &t.opts).unwrap();
    assert_eq!(t.a.state(), QpState::Rts);
    quiet(&mut t.cqa, 100);
    assert!(
        t.buf[1024..1088].iter().all(|&b| b == 0),
        "the refused WRITE ran after the QP reached RTS"
    );
    // And now it works.
    t.a.sq()
        .post(SendWr::write(9, &src, raddr, rkey).signaled())
        .unwrap();
    t.a.sq().ring();
    let c = wait(&mut t.cqa, 1);
    assert_eq!((c[0].wr_id, c[0].status), (9, WcStatus::Success));
    assert_eq!(c[0].opcode, WcOpcode::RdmaWrite);
    assert!(t.buf[1024..1088].iter().all(|&b| b == 0x5a));
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn invalid_requests_are_refused_with_their_limit_before_staging() {
    let mut t = pair(caps(8, 4), 32, true, 7);
    let raddr = t.mr.addr() + 4096;
    let rkey = t.mr.rkey();
    let s8 = [t.mr.sge(0, 8)];
    let s4 = [t.mr.sge(0, 4)];
    let s3 = [t.mr.sge(0, 1), t.mr.sge(1, 1), t.mr.sge(2, 1)];
    let big = [0u8; 33];
    let cases: Vec<(SendWr<'_, rdma_direct::control::Ah>, PostError)> = vec![
        (
            SendWr::send(1, &[]).inline(&big),
            PostError::InlineTooLarge { len: 33, max: 32 },
        ),
        (
            SendWr::send(2, &s3),
            PostError::TooManySges { n: 3, max: 2 },
        ),
        (
            SendWr::new(
                3,
                SendOp::CompareSwap {
                    raddr: raddr + 4,
                    rkey,
                    compare: 0,
                    swap: 1,
                },
                &s8,
            ),
            PostError::AtomicMisaligned { raddr: raddr + 4 },
        ),
        (
            SendWr::new(
                4,
                SendOp::FetchAdd {
                    raddr,
                    rkey,
                    add: 1,
                },
                &s4,
            ),
            PostError::AtomicLocalLen { len: 4 },
        ),
        (
            SendWr::read(5, &[], raddr, rkey).inline(b"x"),
            PostError::InlineNotAllowed,
        ),
        (SendWr::read(6, &[], raddr, rkey), PostError::ZeroLengthRead),
    ];
    for (wr, want) in cases {
        let id = wr.wr_id;
        let e =
            t.a.sq()
                .post(wr.with_flags(SendFlags::SIGNALED))
                .unwrap_err();
        assert_eq!(e.error, want, "wr {id}");
        assert_eq!(e.wr.wr_id, id);
        assert!(!e.error.to_string().is_empty());
        assert_eq!(t.a.sq().staged(), 0, "wr {id}: refused but staged");
        assert_eq!(t.a.sq().free_slots(), 8, "wr {id}: refused but took a slot");
    }
    assert_eq!(
        PostError::InlineTooLarge { len: 33, max: 32 }.to_string(),
        "inline payload of 33 B exceeds the QP's max_inline_data 32 B"
    );
    quiet(&mut t.cqa, 50);
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn cq_cannot_be_overrun() {
    // A CQ of 3 for an SQ of 8 used to be accepted, and posts were refused with CqFull once 3
    // requests were outstanding, signaled or not (a flushed unsignaled request completes
    // too): polling freed nothing while they were all unsignaled. Now create_qp refuses it.
    let (mut p, _) = open();
    let pd = p.alloc_pd().unwrap();
    let mut small = p.create_cq(3).unwrap();
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps: caps(8, 4),
        sq_sig_all: false,
    };
    let Err(e) = p.create_qp(&pd, &mut small, None, None, &cfg) else {
        panic!("an SQ of 8 and an RQ of 4 on a CQ of 3");
    };
    assert!(
        e.to_string().contains(
            "create_qp: EINVAL (Invalid argument) — the CQ has 3 entries but would have to \
             absorb 12: this QP's max_send_wr 8 + max_recv_wr 4 (12)"
        ),
        "{e}"
    );
    drop((small, pd, p));
    // A CQ that absorbs both queues: a run as long as the SQ never meets CqFull; the request
    // after it is QueueFull, and the signaled one at its end retires the run.
    let mut t = pair(caps(8, 4), 12, true, 7);
    let sge = [t.mr.sge(0, 8)];
    let raddr = t.mr.addr() + 4096;
    let rkey = t.mr.rkey();
    let sq = t.a.sq();
    for i in 1..8 {
        sq.post(SendWr::write(i, &sge, raddr, rkey)).unwrap();
    }
    sq.post(SendWr::write(8, &sge, raddr, rkey).signaled())
        .unwrap();
    let e = sq
        .post(SendWr::write(9, &sge, raddr, rkey).signaled())
        .unwrap_err();
    assert_eq!(e.error, PostError::QueueFull { capacity: 8 });
    sq.ring();
    let c = wait(&mut t.cqa, 1);
    assert_eq!((c[0].wr_id, c[0].covered, c[0].covered_from), (8, 7, 1));
    assert_eq!(t.cqa.reserved(), 0);
    t.a.sq()
        .post(SendWr::write(9, &sge, raddr, rkey).signaled())
        .unwrap();
    t.a.sq().ring();
    assert_eq!(wait(&mut t.cqa, 1)[0].wr_id, 9);
    let ev = t.p.check_async().unwrap();
    assert!(ev.is_empty(), "async events: {ev:?}");
    assert_eq!(t.p.cq_errors(), 0);
}

/// A SEND stuck in RNR retries (rnr_retry 7 = forever, no receive at the peer), two requests
/// behind it (one unsignaled): moving the QP to ERR flushes all three, each with its own
/// completion and wr_id, covering nothing, and the SQ is whole again.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn flush_on_err_retires_every_request_once() {
    let mut t = pair(caps(4, 4), 16, true, 7);
    let sge = [t.mr.sge(0, 64)];
    let raddr = t.mr.addr() + 4096;
    let rkey = t.mr.rkey();
    let sq = t.a.sq();
    sq.post(SendWr::send(10, &sge).signaled()).unwrap();
    sq.post(SendWr::write(11, &sge, raddr, rkey)).unwrap();
    sq.post(SendWr::send(12, &sge).signaled()).unwrap();
    sq.ring();
    std::thread::sleep(Duration::from_millis(20));
    quiet(&mut t.cqa, 20);
    t.p.to_error(&mut t.a).unwrap();
    let c = wait(&mut t.cqa, 3);
    let got: Vec<_> = c.iter().map(|c| (c.wr_id, c.status, c.covered)).collect();
    assert_eq!(
        got,
        vec![
            (10, WcStatus::WrFlushErr, 0),
            (11, WcStatus::WrFlushErr, 0),
            (12, WcStatus::WrFlushErr, 0)
        ]
    );
    assert_eq!(t.a.sq().free_slots(), 4);
    assert_eq!(t.cqa.reserved(), 0);
    quiet(&mut t.cqa, 50);
    let e = t.a.sq().post(SendWr::send(13, &sge)).unwrap_err();
    assert_eq!(
        e.error,
        PostError::BadState {
            state: QpState::Err
        }
    );
}

/// An error completion tells the provider the QP is in ERR: later posts are refused.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn error_completion_moves_the_tracked_state_to_err() {
    let mut t = pair(caps(4, 4), 16, true, 7);
    let sge = [t.mr.sge(0, 8)];
    let raddr = t.mr.addr();
    let bad_rkey = t.mr.rkey() ^ 0x8000_00ff;
    t.a.sq()
        .post(SendWr::write(1, &sge, raddr, bad_rkey).signaled())
        .unwrap();
    t.a.sq().ring();
    let c = wait(&mut t.cqa, 1);
    assert_eq!(c[0].status, WcStatus::RemAccessErr);
    assert_eq!(t.a.state(), QpState::Err);
    let e = t.a.sq().post(SendWr::send(2, &sge)).unwrap_err();
    assert_eq!(
        e.error,
        PostError::BadState {
            state: QpState::Err
        }
    );
    let _ = &mut t.cqb;
}

/// Requests posted but not rung when the QP is moved to ERR are flushed too.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn staged_requests_are_flushed_by_to_error() {
    let mut t = pair(caps(4, 4), 16, true, 7);
    let sge = [t.mr.sge(0, 64)];
    let raddr = t.mr.addr() + 4096;
    let rkey = t.mr.rkey();
    t.a.sq().post(SendWr::write(1, &sge, raddr, rkey)).unwrap();
    t.a.sq()
        .post(SendWr::write(2, &sge, raddr, rkey).signaled())
        .unwrap();
    t.a.rq()
        .post_recv(RecvWr {
            wr_id: 3,
            sges: &[],
        })
        .unwrap();
    assert_eq!(t.a.sq().staged(), 2);
    t.p.to_error(&mut t.a).unwrap();
    let mut c = wait(&mut t.cqa, 3);
    c.sort_by_key(|c| c.wr_id);
    let got: Vec<_> = c.iter().map(|c| (c.wr_id, c.status)).collect();
    assert_eq!(
        got,
        vec![
            (1, WcStatus::WrFlushErr),
            (2, WcStatus::WrFlushErr),
            (3, WcStatus::WrFlushErr)
        ]
    );
    assert_eq!(t.a.sq().free_slots(), 4);
    assert_eq!(t.a.rq().free_slots(), 4);
    assert_eq!(t.cqa.reserved(), 0);
    assert!(t.buf[4096..4160].iter().all(|&b| b == 0), "a WRITE ran");
}
