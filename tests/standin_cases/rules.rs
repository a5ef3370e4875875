//! libmlx5's rules, each broken on purpose against the stand-in: destroy order, thread-domain
//! exhaustion, BlueFlame size, scatter-to-CQE, non-mlx5 devices, an old libmlx5, ENOMEM/EINVAL
//! naming the verb, transitions without their attributes, arm and wake.

use std::process::Command;

use rdma_direct::ffi;
use rdma_direct::providers::mlx5::device::BfregMode;
use rdma_direct::providers::mlx5::Mlx5Device;
use rdma_direct::providers::{
    Access, Completion, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType, QueuePair,
    SendQueue, SendWr,
};
use rdma_direct::Error;

use super::{ctx_objects, knob, poll_n, qp_bf, qp_scatter_to_cqe, thread_violations};

#[test]
fn destroy_order_is_enforced_with_ebusy() {
    standin_or_skip!();
    let ctx = rdma_direct::control::Context::open("mlx5_0").unwrap();
    let c = ctx.as_ptr();
    let v = ctx.verbs();
    let v0 = thread_violations();
    // SAFETY: raw verbs on a live context of the stand-in; every object is freed below.
    unsafe {
        let pd = (v.ibv_alloc_pd)(c);
        assert!(!pd.is_null());
        let td = ffi::alloc_td(c).unwrap();
        let parent = ffi::alloc_parent_domain(c, pd, td).unwrap();
        // The wrong order, on purpose: TD and PD before the parent domain over them.
        assert_eq!(ffi::dealloc_td(c, td), libc::EBUSY);
        assert_eq!((v.ibv_dealloc_pd)(pd), libc::EBUSY);
        assert_eq!(thread_violations(), v0 + 2);
        // The right one.
        assert_eq!((v.ibv_dealloc_pd)(parent), 0);
        assert_eq!(ffi::dealloc_td(c, td), 0);
        assert_eq!((v.ibv_dealloc_pd)(pd), 0);
    }
    assert_eq!(ctx_objects(c), 0);
    // And through the provider: a QP's owner drops in the order libmlx5 accepts.
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let pc = p.context().as_ptr();
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(256).unwrap();
    let qp = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    assert_eq!(ctx_objects(pc), 5, "PD, CQ, TD, parent domain, QP");
    drop(qp);
    drop(cq);
    drop(pd);
    assert_eq!(ctx_objects(pc), 0);
    assert_eq!(thread_violations(), v0 + 2);
}

#[test]
fn thread_domain_exhaustion_is_unsupported_unless_shared_bfregs_are_allowed() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    knob(p.context().as_ptr(), "td_uars", 1);
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(1024).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    assert_eq!(p.bfreg_mode(&mut a).unwrap(), BfregMode::Dedicated);
    let e = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let s = e.to_string();
    assert!(
        s.contains("no thread domain") && s.contains("allow_shared_bfreg"),
        "{s}"
    );
    assert!(s.contains("ENOMEM"), "{s}");
    p.allow_shared_bfreg(true);
    let mut b = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    assert_eq!(p.bfreg_mode(&mut b).unwrap(), BfregMode::Shared);
    assert_eq!(qp_scatter_to_cqe(b.qpn()), 0);
}

/// Post one inline WRITE of `len` bytes (one WQE with ds > 1: BlueFlame-eligible) on a
/// self-loop and return the bytes of the QP's BlueFlame register past the 8-byte doorbell.
fn bf_bytes_after_one_write(td_bf_size: i64) -> (u32, Vec<u8>) {
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    knob(p.context().as_ptr(), "td_bf_size", td_bf_size);
    let pd = p.alloc_pd().unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the MR.
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::ALL) }.unwrap();
    let mut cq = p.create_cq(256).unwrap();
    let mut qp = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let opts = ConnectOpts::default();
    let me = p.endpoint(&qp, &opts).unwrap();
    p.connect(&mut qp, &me, &me, &opts).unwrap();
    let (reg, size) = qp_bf(qp.qpn());
    assert_eq!(size as i64, td_bf_size);
    let payload = [0x5au8; 64];
    qp.sq()
        .post(
            SendWr::write(1, &[], mr.addr() + 64, mr.rkey())
                .inline(&payload)
                .signaled(),
        )
        .unwrap();
    qp.sq().ring();
    let got = poll_n(&mut cq, 1);
    assert!(got.len() == 1 && got[0].is_ok(), "{got:?}");
    // SAFETY: the sim gives each QP two 256-byte BlueFlame halves; the QP is alive.
    let bytes: Vec<u8> = (8..512)
        .map(|i| unsafe { reg.add(i).read_volatile() })
        .collect();
    assert_eq!(&buf[64..128], &payload[..]);
    drop(qp);
    (size, bytes)
}

#[test]
fn bf_size_zero_means_doorbell_only() {
    standin_or_skip!();
    // With BlueFlame (256), the WQE is copied into the register: bytes past the doorbell
    // change (the check below can fail).
    let (_, with_bf) = bf_bytes_after_one_write(256);
    assert!(
        with_bf.iter().any(|&b| b != 0),
        "no BlueFlame copy with bf.size 256"
    );
    // bf.size 0 on the TD's bfreg: the 8-byte doorbell only, never a copy.
    let (_, without) = bf_bytes_after_one_write(0);
    assert!(
        without.iter().all(|&b| b == 0),
        "a BlueFlame copy into a register of bf.size 0"
    );
}

#[test]
fn scatter_to_cqe_is_off_only_with_the_flag() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(256).unwrap();
    let qp = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    assert_eq!(qp_scatter_to_cqe(qp.qpn()), 0, "the mlx5 provider's QP");
    // A QP made without the flag (plain ibv_create_qp, as libmlx5's default) has it on.
    let ctx = p.context();
    let vpd = rdma_direct::control::Pd::new(ctx).unwrap();
    let vcq = rdma_direct::control::Cq::new(ctx, 16).unwrap();
    let vqp =
        rdma_direct::control::Qp::new(&vpd, &vcq, &vcq, None, &QpConfig::new(QpType::Rc)).unwrap();
    assert_eq!(qp_scatter_to_cqe(vqp.qpn()), 1, "libmlx5's default");
}

#[test]
fn non_mlx5_devices_are_refused_before_any_mlx5dv_call() {
    standin_or_skip!();
    let v0 = thread_violations();
    let e = Mlx5Device::open("rxe_standin0").unwrap_err();
    assert!(
        e.to_string()
            .contains("rxe_standin0 is not an mlx5 device: use the verbs provider"),
        "{e}"
    );
    assert_eq!(
        thread_violations(),
        v0,
        "an mlx5dv call reached the non-mlx5 context"
    );
    // Breaking the rule on purpose: mlx5dv_query_device on it is caught by the stand-in.
    let ctx = rdma_direct::control::Context::open("rxe_standin0").unwrap();
    assert!(!ctx.is_mlx5());
    let mut attrs = ffi::mlx5dv_context::zeroed();
    // SAFETY: a live context; the stand-in refuses instead of reading it as libmlx5's.
    let rc = unsafe { (ffi::mlx5().unwrap().mlx5dv_query_device)(ctx.as_ptr(), &mut attrs) };
    assert_eq!(rc, libc::EOPNOTSUPP);
    assert_eq!(thread_violations(), v0 + 1);
}

#[test]
fn an_old_libmlx5_without_mlx5dv_create_qp_is_a_clear_error() {
    let dir = standin_or_skip!();
    let old = dir.join("libmlx5-standin-old.so");
    let e = match ffi::Mlx5::load_from(old.to_str().unwrap()) {
        Err(e) => e,
        Ok(_) => panic!("the old libmlx5 resolved mlx5dv_create_qp"),
    };
    assert!(
        matches!(
            e,
            Error::SymbolMissing {
                symbol: "mlx5dv_create_qp",
                ..
            }
        ),
        "{e}"
    );
    // Mlx5Device::open in a process whose libmlx5 is the old one (this test binary again,
    // running only the child test below).
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "rules::old_libmlx5_child", "--nocapture"])
        .env("RDMA_DIRECT_STANDIN_CHILD", "old_libmlx5")
        .env("RDMA_DIRECT_LIBMLX5_FOR_CHILD", &old)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("1 passed"), "{text}");
}

/// Runs only as the child of the test above.
#[test]
fn old_libmlx5_child() {
    if std::env::var("RDMA_DIRECT_STANDIN_CHILD").as_deref() != Ok("old_libmlx5") {
        return;
    }
    standin_or_skip!();
    // standin() pointed the loader at the good libmlx5; nothing has loaded it yet here.
    std::env::set_var(
        "RDMA_DIRECT_LIBMLX5",
        std::env::var("RDMA_DIRECT_LIBMLX5_FOR_CHILD").unwrap(),
    );
    let e = Mlx5Device::open("mlx5_0").unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("mlx5dv_create_qp missing") && s.contains("rdma-core"),
        "{s}"
    );
}

#[test]
fn enomem_and_einval_on_create_name_the_verb() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let ctx = p.context().as_ptr();
    knob(ctx, "fail_create", i64::from(libc::ENOMEM));
    let e = p.create_cq(16).unwrap_err().to_string();
    assert!(e.contains("ibv_create_cq") && e.contains("ENOMEM"), "{e}");
    knob(ctx, "fail_create", i64::from(libc::ENOMEM));
    let e = p.alloc_pd().unwrap_err().to_string();
    assert!(e.contains("ibv_alloc_pd") && e.contains("ENOMEM"), "{e}");
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(1 << 16).unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = 1 << 20;
    let e = p
        .create_qp(&pd, &mut cq, None, None, &cfg)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mlx5dv_create_qp") && e.contains("EINVAL"),
        "{e}"
    );
    knob(ctx, "fail_create", i64::from(libc::ENOMEM));
    let e = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("mlx5dv_create_qp") && e.contains("ENOMEM"),
        "{e}"
    );
    drop(cq);
    drop(pd);
    assert_eq!(ctx_objects(ctx), 0, "a failed create left an object behind");
}

#[test]
fn a_transition_without_its_required_attributes_is_einval() {
    standin_or_skip!();
    let ctx = rdma_direct::control::Context::open("mlx5_0").unwrap();
    let pd = rdma_direct::control::Pd::new(&ctx).unwrap();
    let cq = rdma_direct::control::Cq::new(&ctx, 16).unwrap();
    let qp =
        rdma_direct::control::Qp::new(&pd, &cq, &cq, None, &QpConfig::new(QpType::Rc)).unwrap();
    let v0 = thread_violations();
    let mut attr = ffi::ibv_qp_attr::zeroed();
    attr.qp_state = ffi::IBV_QPS_INIT;
    // RESET -> INIT needs PKEY_INDEX, PORT and ACCESS_FLAGS too.
    // SAFETY: a live QP, a valid attr.
    let rc = unsafe { (ctx.verbs().ibv_modify_qp)(qp.as_ptr(), &mut attr, ffi::IBV_QP_STATE) };
    assert_eq!(rc, libc::EINVAL);
    assert_eq!(thread_violations(), v0 + 1);
}

#[test]
fn arm_and_wake_through_the_completion_channel() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let ch = rdma_direct::control::CompChannel::new(p.context()).unwrap();
    let pd = p.alloc_pd().unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the MR (the thread below is joined before it is dropped).
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::ALL) }.unwrap();
    let (mut cq, mut waiter) = p.create_cq_waiter(256, &ch).unwrap();
    let mut qp = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let opts = ConnectOpts::default();
    let me = p.endpoint(&qp, &opts).unwrap();
    p.connect(&mut qp, &me, &me, &opts).unwrap();
    let (addr, rkey) = (mr.addr(), mr.rkey());
    for round in 0..3u64 {
        // The WRITE is posted only after the waiter has polled, armed and gone to sleep.
        let poster = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            qp.sq()
                .post(
                    SendWr::write(round, &[], addr + 8 * round, rkey)
                        .inline(b"wake up!")
                        .signaled(),
                )
                .unwrap();
            qp.sq().ring();
            qp
        });
        let mut out = [Completion::EMPTY; 4];
        let n = waiter.wait(&mut cq, &mut out).unwrap();
        qp = poster.join().unwrap();
        assert_eq!(n, 1);
        assert!(out[0].is_ok() && out[0].wr_id == round, "{:?}", out[0]);
    }
    // A wait slept on the channel and was woken by the event its arm raised (each of the
    // three should; a scheduler delay of 50 ms past the poster's sleep lets one poll first).
    assert!(waiter.sleeps() >= 1, "never woken by an event");
    drop(qp);
    drop(waiter);
    drop(cq);
    assert_eq!(&buf[16..24], b"wake up!");
}
