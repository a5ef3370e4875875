//! Device test (run in the guest on rxe0): a CQ overrun on rxe is announced only as an
//! asynchronous `IBV_EVENT_CQ_ERR`, which the context's non-blocking event stream delivers,
//! naming the CQ. The overrun is provoked on purpose with raw `ibv_post_send` calls past
//! the CQ's size (the verbs provider itself refuses such posts). Also: completion
//! timestamps are reported unsupported on rxe (its `create_cq_ex` accepts no timestamp
//! flag).

mod common;

use std::time::{Duration, Instant};

use rdma_direct::control::{AsyncElement, AsyncEventKind};
use rdma_direct::ffi::{self, ibv_send_wr, ibv_sge};
use rdma_direct::providers::verbs::VerbsDevice;
use rdma_direct::providers::{
    Access, ConnectOpts, MemoryRegion, Provider, QpCaps, QpConfig, QpType,
};

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (tests/guest/run)"]
fn rxe_cq_overrun_raises_cq_err_naming_the_cq() {
    let dev = common::device();
    let mut p = VerbsDevice::open(&dev).unwrap_or_else(|e| panic!("open {dev}: {e}"));
    let gid_index = common::gid_index().unwrap_or_else(|| {
        p.context()
            .default_gid_index(1)
            .unwrap_or_else(|e| panic!("{e}"))
    });
    let opts = ConnectOpts {
        gid_index,
        ..ConnectOpts::default()
    };
    // Drain what is pending from earlier tests.
    while p.context().poll_async_event().unwrap().is_some() {}
    let pd = p.alloc_pd().unwrap();
    let mut buf = memmap2::MmapMut::map_anon(4096).unwrap();
    // SAFETY: `buf` outlives the MR (dropped at the end of the test, after it).
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), 4096, Access::ALL) }.unwrap();
    // The overrunning QP is built with the control path alone: the provider's create_qp
    // refuses a send queue deeper than its CQ.
    let cqa = rdma_direct::control::Cq::new(p.context(), 1).unwrap();
    let mut cqb = p.create_cq(128).unwrap();
    let cqe = cqa.cqe();
    let cfg = QpConfig {
        qp_type: QpType::Rc,
        caps: QpCaps {
            max_send_wr: 64,
            max_recv_wr: 4,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
        },
        sq_sig_all: false,
    };
    let mut a = rdma_direct::control::Qp::new(&pd, &cqa, &cqa, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut cqb, None, None, &cfg).unwrap();
    let eb = p.endpoint(&b, &opts).unwrap();
    let ea = rdma_direct::providers::QpEndpoint { qpn: a.qpn(), ..eb };
    a.connect(&ea, &eb, &opts).unwrap();
    p.connect(&mut b, &eb, &ea, &opts).unwrap();
    // cqe + 2 signaled WRITEs, never polled: the CQ overruns.
    let n = cqe as usize + 2;
    let mut sges = vec![
        ibv_sge {
            addr: mr.addr(),
            length: 8,
            lkey: mr.lkey(),
        };
        n
    ];
    let mut wrs: Vec<ibv_send_wr> = (0..n).map(|_| ibv_send_wr::zeroed()).collect();
    for (i, w) in wrs.iter_mut().enumerate() {
        w.wr_id = i as u64;
        w.sg_list = &mut sges[i];
        w.num_sge = 1;
        w.opcode = ffi::IBV_WR_RDMA_WRITE;
        w.send_flags = ffi::IBV_SEND_SIGNALED;
        w.wr.rdma = ffi::ibv_send_wr_rdma {
            remote_addr: mr.addr() + 2048,
            rkey: mr.rkey(),
        };
    }
    for (i, w) in wrs.iter_mut().enumerate() {
        let mut bad = std::ptr::null_mut();
        // SAFETY: a live QP; one WR (next null) whose SGE points into the registered `buf`.
        let rc = unsafe { ffi::ops::post_send(a.as_ptr(), w, &mut bad) };
        assert_eq!(rc, 0, "ibv_post_send {i}");
    }
    let end = Instant::now() + Duration::from_secs(10);
    let cq_ptr = cqa.as_ptr() as usize;
    loop {
        if let Some(ev) = p.context().poll_async_event().unwrap() {
            if ev.kind == AsyncEventKind::CqErr {
                assert_eq!(ev.element, AsyncElement::Cq(cq_ptr), "{ev}");
                break;
            }
        }
        assert!(Instant::now() < end, "no IBV_EVENT_CQ_ERR within 10 s");
        std::thread::sleep(Duration::from_millis(5));
    }
    drop((a, b));
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (tests/guest/run)"]
fn rxe_reports_completion_timestamps_unsupported() {
    let dev = common::device();
    let ctx = rdma_direct::control::Context::open(&dev).unwrap_or_else(|e| panic!("{e}"));
    for real_time in [false, true] {
        match rdma_direct::control::Cq::new_timestamped(&ctx, 16, real_time) {
            Err(rdma_direct::Error::Unsupported { what }) => {
                assert!(what.contains("EOPNOTSUPP"), "{what}");
                assert!(what.contains("software"), "{what}");
            }
            other => panic!("real_time {real_time}: expected Unsupported, got {other:?}"),
        }
    }
    match ctx.query_rt_clock() {
        Err(rdma_direct::Error::Unsupported { what }) => assert!(what.contains("EOPNOTSUPP")),
        other => panic!("ibv_query_rt_values_ex: expected Unsupported, got {other:?}"),
    }
    // A plain CQ still works on the same context.
    rdma_direct::control::Cq::new(&ctx, 16).unwrap();
}
