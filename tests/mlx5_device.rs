//! Device tests of the mlx5 hardware glue (`#[ignore]`d: they need RDMA_DIRECT_DEVICE).
//!
//! On rxe (the guest harness) opening the device with the mlx5 provider must fail with a
//! clear error naming the fallback. On a real mlx5 device (none was available to this
//! project) the same test runs a self-connected RC QP: an inline RDMA WRITE into its own MR
//! and a SEND into its own receive, through the direct hot path.

mod common;

use rdma_direct::ffi;
use rdma_direct::providers::mlx5::device::BfregMode;
use rdma_direct::providers::mlx5::Mlx5Device;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType,
    QueuePair, RecvQueue, RecvWr, SendQueue, SendWr,
};

#[test]
#[ignore]
fn mlx5_provider_refuses_non_mlx5_devices_or_runs_a_self_loop() {
    let dev = common::device();
    match Mlx5Device::open(&dev) {
        Err(e) => {
            let msg = e.to_string();
            assert!(
                msg.contains(&format!(
                    "{dev} is not an mlx5 device: use the verbs provider"
                )),
                "unexpected error: {msg}"
            );
            assert!(!dev.starts_with("mlx5"), "{dev} should open: {msg}");
        }
        Ok(mut p) => self_loop(&mut p),
    }
}

fn self_loop(p: &mut Mlx5Device) {
    let pd = p.alloc_pd().unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the MR (dropped at the end of this function, after the MR).
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::ALL) }.unwrap();
    // Room for the default QP's queues (128 sends + 128 receives).
    let mut cq = p.create_cq(256).unwrap();
    let mut qp = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    assert_eq!(p.bfreg_mode(&mut qp).unwrap(), BfregMode::Dedicated);
    let mut opts = ConnectOpts::default();
    if let Some(g) = common::gid_index() {
        opts.gid_index = g;
    }
    opts.retry_cnt = 3;
    opts.rnr_retry = 3;
    let me = p.endpoint(&qp, &opts).unwrap();
    let sge = [mr.sge(2048, 64)];
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 9,
            sges: &sge,
        })
        .ok();
    p.connect(&mut qp, &me, &me, &opts).unwrap();
    qp.rq()
        .post_recv(RecvWr {
            wr_id: 9,
            sges: &sge,
        })
        .unwrap();
    qp.rq().ring();
    let data = *b"direct!!";
    let wr = SendWr::write(1, &[], mr.addr() + 100, mr.rkey())
        .inline(&data)
        .signaled();
    qp.sq().post(wr).unwrap();
    qp.sq()
        .post(SendWr::send(2, &[]).inline(&data).signaled())
        .unwrap();
    qp.sq().ring();
    let mut got = Vec::new();
    let t = std::time::Instant::now();
    let mut out = [Completion::EMPTY; 8];
    while got.len() < 3 && t.elapsed() < std::time::Duration::from_secs(5) {
        let n = cq.poll(&mut out);
        got.extend_from_slice(&out[..n]);
    }
    assert_eq!(got.len(), 3, "{got:?}");
    assert!(got.iter().all(|c| c.is_ok()), "{got:?}");
    assert_eq!(&buf[100..108], &data);
    assert_eq!(&buf[2048..2056], &data);
}

#[test]
fn opening_a_missing_device_is_a_clear_error() {
    // Without a device (or without libibverbs) this must be an error naming what is
    // missing, never a panic and never a device.
    let e = Mlx5Device::open("no_such_dev0").unwrap_err();
    assert!(
        matches!(
            e,
            rdma_direct::Error::NotFound { .. } | rdma_direct::Error::LibraryMissing { .. }
        ),
        "unexpected error: {e}"
    );
    assert!(e.to_string().contains("not found"), "unhelpful error: {e}");
}

#[test]
#[ignore]
fn extended_verbs_ops_are_found_through_the_real_context() {
    // The op lookup (verbs_get_ctx / sz check) over a context libibverbs really allocated:
    // rxe has no thread domains (libibverbs puts a stub failing with EOPNOTSUPP in the slot),
    // so alloc_td must be a clear Unsupported error; libmlx5 has them, so there a TD is
    // allocated and freed.
    let dev = common::device();
    let ctx = rdma_direct::control::Context::open(&dev).unwrap();
    // SAFETY: `ctx` is an open context from libibverbs, embedded in its verbs_context.
    let vctx =
        unsafe { ffi::verbs_get_ctx(ctx.as_ptr()) }.expect("rdma-core 44 contexts are extended");
    // SAFETY: `vctx` is the live verbs_context around `ctx`.
    let sz = unsafe { (*vctx).sz };
    assert!(sz > std::mem::size_of::<ffi::ibv_context>(), "sz {sz}");
    assert!(sz <= std::mem::size_of::<ffi::verbs_context>(), "sz {sz}");
    // SAFETY: `ctx` is open.
    match unsafe { ffi::alloc_td(ctx.as_ptr()) } {
        Ok(td) => {
            assert!(ctx.is_mlx5(), "{dev} gave a thread domain");
            // SAFETY: `td` came from alloc_td on `ctx`; no parent domain uses it.
            assert_eq!(unsafe { ffi::dealloc_td(ctx.as_ptr(), td) }, 0);
        }
        Err(e) => {
            assert!(!ctx.is_mlx5(), "{dev}: {e}");
            assert!(
                matches!(e, rdma_direct::Error::Unsupported { .. }),
                "unexpected error: {e}"
            );
            assert!(e.to_string().contains("alloc_td"), "{e}");
        }
    }
}
