//! `Mlx5Device` on the stand-in beyond the basics: every fixture scenario, error forms,
//! without libmlx5, stale CQEs of a destroyed QP, per-process GIDs.

use std::process::Command;

use rdma_direct::clock::TimestampKind;
use rdma_direct::providers::mlx5::Mlx5Device;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType,
    QueuePair, RecvQueue, RecvWr, SendQueue, SendWr,
};
use rdma_direct::Error;

use super::{ctx_objects, poll_n, thread_violations};

#[test]
fn every_fixture_scenario_passes_through_mlx5_device() {
    standin_or_skip!();
    use rdma_direct::providers::ProviderKind;
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/scenarios");
    let all = rdma_direct::scenario::load_dir(&dir).expect("the scenarios parse");
    assert!(all.len() >= 19, "{} scenarios", all.len());
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let ctx = p.context().as_ptr();
    let v0 = thread_violations();
    let opts = rdma_direct::scenario::RunOpts::new(ProviderKind::Mlx5, "mlx5_0");
    let mut failures = Vec::new();
    for sc in &all {
        match rdma_direct::scenario::run_scenario(&mut p, sc, &opts) {
            Ok(r) => println!(
                "scenario {:<24} PASS on mlx5_0 (stand-in): {} completions",
                r.name, r.completions
            ),
            Err(f) => failures.push(f.to_string()),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n\n")
    );
    assert_eq!(ctx_objects(ctx), 0, "a scenario left objects behind");
    assert_eq!(
        thread_violations(),
        v0,
        "a libmlx5 rule was broken (see stderr)"
    );
}

#[test]
fn to_error_refresh_epoll_arm_and_debug_forms() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    assert!(format!("{p:?}").contains("mlx5_0"));
    let pd = p.alloc_pd().unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the MR.
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::ALL) }.unwrap();
    // A free-running CQ: its clock info is re-read from mlx5dv_get_clock_info.
    let mut cq = p.create_cq_ts(256, TimestampKind::FreeRunning).unwrap();
    let clock = cq.clock_mut().expect("a clock on a timestamped CQ");
    assert_eq!(clock.kind(), TimestampKind::FreeRunning);
    clock.refresh().unwrap();
    assert!(clock.to_ns(1) > 0);
    let mut qp = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let opts = ConnectOpts::default();
    let me = p.endpoint(&qp, &opts).unwrap();
    let ah = p.create_ah(&pd, &me, &opts).unwrap();
    assert!(format!("{ah:?}").contains("Mlx5Ah"));
    p.connect(&mut qp, &me, &me, &opts).unwrap();
    // A receive outstanding, then the QP moved to ERR by hand: it is flushed.
    let sge = [mr.sge(0, 64)];
    qp.rq().post_recv(RecvWr::new(5, &sge)).unwrap();
    qp.rq().ring();
    p.to_error(&mut qp).unwrap();
    let got = poll_n(&mut cq, 1);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0].wr_id, 5);
    assert_eq!(got[0].status, rdma_direct::providers::WcStatus::WrFlushErr);
    drop(qp);
    drop(ah);
    // The waiter as an epoll user drives it: arm, wait for the fd, take the event.
    let ch = rdma_direct::control::CompChannel::new(p.context()).unwrap();
    let (mut cq2, mut waiter) = p.create_cq_waiter(256, &ch).unwrap();
    let mut qp2 = p
        .create_qp(&pd, &mut cq2, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let me2 = p.endpoint(&qp2, &opts).unwrap();
    p.connect(&mut qp2, &me2, &me2, &opts).unwrap();
    assert!(!waiter.take_event().unwrap(), "an event before any arm");
    waiter.arm(&cq2, false);
    qp2.sq()
        .post(
            SendWr::write(1, &[], mr.addr() + 512, mr.rkey())
                .inline(b"epoll")
                .signaled(),
        )
        .unwrap();
    qp2.sq().ring();
    let mut pfd = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(waiter.channel()),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    assert_eq!(
        unsafe { libc::poll(&mut pfd, 1, 10_000) },
        1,
        "no event within 10 s"
    );
    assert!(waiter.take_event().unwrap());
    assert_eq!(poll_n(&mut cq2, 1).len(), 1);
    drop(qp2);
}

#[test]
fn without_libmlx5_a_device_without_mlx5_core_is_not_mlx5() {
    standin_or_skip!();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "device::no_libmlx5_child", "--nocapture"])
        .env("RDMA_DIRECT_STANDIN_CHILD", "no_libmlx5")
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
fn no_libmlx5_child() {
    if std::env::var("RDMA_DIRECT_STANDIN_CHILD").as_deref() != Ok("no_libmlx5") {
        return;
    }
    standin_or_skip!();
    std::env::set_var("RDMA_DIRECT_LIBMLX5", "/nonexistent/libmlx5.so.1");
    // No libmlx5 and no mlx5_core in sysfs (the stand-in has no sysfs): the verbs provider's
    // device, said so.
    let e = Mlx5Device::open("mlx5_0").unwrap_err().to_string();
    assert!(
        e.contains("mlx5_0 is not an mlx5 device: use the verbs provider"),
        "{e}"
    );
}

#[test]
fn stale_cqes_of_a_destroyed_qp_never_surface_on_a_dv_owned_cq() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let pd = p.alloc_pd().unwrap();
    let mut buf = vec![0u8; 4096];
    // SAFETY: `buf` outlives the MR.
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::ALL) }.unwrap();
    let mut cq = p.create_cq(512).unwrap();
    let opts = ConnectOpts::default();
    let mut a = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let me = p.endpoint(&a, &opts).unwrap();
    p.connect(&mut a, &me, &me, &opts).unwrap();
    for i in 0..4u64 {
        a.sq()
            .post(
                SendWr::write(100 + i, &[], mr.addr(), mr.rkey())
                    .inline(b"stale")
                    .signaled(),
            )
            .unwrap();
    }
    a.sq().ring();
    // Let the device write A's CQEs, unpolled, then destroy A: libmlx5 leaves a DV-owned CQ
    // alone, so the CQEs stay in the ring.
    std::thread::sleep(std::time::Duration::from_millis(100));
    drop(a);
    let mut b = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let me = p.endpoint(&b, &opts).unwrap();
    p.connect(&mut b, &me, &me, &opts).unwrap();
    b.sq()
        .post(
            SendWr::write(7, &[], mr.addr() + 64, mr.rkey())
                .inline(b"fresh")
                .signaled(),
        )
        .unwrap();
    b.sq().ring();
    let got = poll_n(&mut cq, 1);
    std::thread::sleep(std::time::Duration::from_millis(50));
    let mut out = [Completion::EMPTY; 8];
    let more = cq.poll(&mut out);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(
        got[0].wr_id, 7,
        "a stale CQE of the destroyed QP surfaced: {got:?}"
    );
    assert_eq!(more, 0, "{:?}", &out[..more]);
}

/// The GID table of a stand-in device: 2 and 3 the sim GID (`fd73:696d::`, this process's
/// id, the device number), 0 and 1 link-local with the sim GID's last eight bytes as
/// interface id, so two processes' `mlx5_0` differ; a path to another device of this
/// process (`mlx5_1`) is EINVAL at INIT -> RTR: devices of one process do not reach each
/// other.
#[test]
fn gids_are_per_process_and_devices_of_one_process_do_not_reach_each_other() {
    let _dir = standin_or_skip!();
    let mut a = Mlx5Device::open("mlx5_0").unwrap();
    let mut b = Mlx5Device::open("mlx5_1").unwrap();
    let g = |p: &Mlx5Device, i: u32| p.context().query_gid(1, i).unwrap().0;
    let sim = g(&a, 2);
    assert_eq!(&sim[..8], &[0xfd, 0x73, 0x69, 0x6d, 0, 0, 0, 0]);
    assert_eq!(&sim[8..12], &std::process::id().to_be_bytes());
    assert_eq!(g(&a, 3), sim);
    let mut ll = [0u8; 16];
    ll[..2].copy_from_slice(&[0xfe, 0x80]);
    ll[8..].copy_from_slice(&sim[8..]);
    assert_eq!(g(&a, 0), ll);
    assert_eq!(g(&a, 1), ll);
    assert_ne!(g(&b, 2), sim);
    assert_ne!(g(&b, 0), ll);

    let opts = ConnectOpts::default();
    let pa = a.alloc_pd().unwrap();
    let mut ca = a.create_cq(256).unwrap();
    let pb = b.alloc_pd().unwrap();
    let mut cb = b.create_cq(256).unwrap();
    let qb = b
        .create_qp(&pb, &mut cb, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    for index in [0u8, 2] {
        let mut qa = a
            .create_qp(&pa, &mut ca, None, None, &QpConfig::new(QpType::Rc))
            .unwrap();
        let me = a.endpoint(&qa, &opts).unwrap();
        let o = ConnectOpts {
            gid_index: index,
            ..ConnectOpts::default()
        };
        let them = b.endpoint(&qb, &o).unwrap();
        match a.connect(&mut qa, &me, &them, &o) {
            Err(Error::Verb { errno, .. }) => assert_eq!(errno, libc::EINVAL),
            other => panic!("GID index {index}: {other:?}"),
        }
    }
    drop((qb, ca, cb, pa, pb));
}
