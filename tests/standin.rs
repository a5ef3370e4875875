//! The mlx5 hardware glue (`providers/mlx5/device.rs`, `ts.rs`, `arm.rs`) against the
//! stand-in for libibverbs and libmlx5 (`tests/standin/`, C compiled from rdma-core's own
//! headers, with the sim as the device behind it): open, create, execute, destroy, and
//! libmlx5's rules, each broken on purpose.
//!
//! The stand-in is built on demand (`tests/standin/build`). Without a C compiler or
//! rdma-core's headers each test prints "skipped: ..." and returns, unless
//! `RDMA_DIRECT_REQUIRE_STANDIN=1` (set by `.ci/run`), where that fails. The stand-in's
//! device is the sim: this needs the `sim` feature (and the CLI tests the `cli` one).
#![cfg(feature = "cli")]

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rdma_direct::clock::TimestampKind;
use rdma_direct::ffi;
use rdma_direct::providers::mlx5::device::BfregMode;
use rdma_direct::providers::mlx5::Mlx5Device;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType,
    QueuePair, RecvQueue, RecvWr, SendQueue, SendWr,
};
use rdma_direct::Error;

mod common;

/// The directory holding the stand-in libraries, with the loader pointed at them; `None`
/// (after printing "skipped: ...") when they cannot be built here.
fn standin() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        // The build goes under cargo's target directory (CARGO_TARGET_DIR honoured), never
        // into the source tree: CARGO_TARGET_TMPDIR is its `tmp`.
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("CARGO_TARGET_TMPDIR has a parent")
            .to_path_buf();
        let mut build = Command::new(root.join("tests/standin/build"));
        // Cross-built for aarch64 (.ci/run's qemu-aarch64 stage): the same headers, the
        // cross compiler the stage links with.
        match std::env::var("CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER") {
            Ok(cc) if cfg!(target_arch = "aarch64") => {
                build
                    .arg(target.join("standin-aarch64"))
                    .env("CC", cc)
                    .env("STANDIN_CFLAGS", "-idirafter /usr/include");
            }
            _ => {
                build.arg(target.join("standin"));
            }
        }
        let out = build.output().expect("running tests/standin/build");
        let required = std::env::var("RDMA_DIRECT_REQUIRE_STANDIN").is_ok_and(|v| v == "1");
        if !out.status.success() {
            let why = String::from_utf8_lossy(&out.stderr);
            if out.status.code() == Some(2) && !required {
                eprintln!("skipped: the stand-in cannot be built here: {why}");
                return None;
            }
            panic!("tests/standin/build failed: {why}");
        }
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        // Before any test of this binary touches the loader (they all come through here).
        std::env::set_var("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"));
        std::env::set_var("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"));
        let attached = rdma_direct::providers::sim::standin::attach_if_standin()
            .expect("the stand-in loads as libibverbs and takes the sim");
        assert!(
            attached,
            "the stand-in did not export rdma_direct_standin_attach"
        );
        Some(dir)
    })
    .as_ref()
}

macro_rules! standin_or_skip {
    () => {
        match standin() {
            Some(d) => d,
            None => return,
        }
    };
}

/// A function the stand-in exports for tests.
fn sym<F: Copy>(name: &str) -> F {
    let dir = standin().expect("built");
    let path = CString::new(dir.join("libibverbs-standin.so").to_str().unwrap()).unwrap();
    let name = CString::new(name).unwrap();
    // SAFETY: the library is loaded already (the loader opened it); NOLOAD only takes a
    // reference. The symbol's C prototype is `F` (each caller names it).
    unsafe {
        let h = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
        assert!(!h.is_null(), "stand-in not loaded");
        let p = libc::dlsym(h, name.as_ptr());
        assert!(!p.is_null(), "stand-in lacks {name:?}");
        assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
        std::mem::transmute_copy(&p)
    }
}

#[allow(clippy::useless_conversion)] // c_ulong is u32 on some targets
fn thread_violations() -> u64 {
    let f: unsafe extern "C" fn() -> c_ulong = sym("rdma_direct_standin_thread_violations");
    // SAFETY: no arguments; reads a thread-local counter.
    u64::from(unsafe { f() })
}

#[allow(clippy::useless_conversion)] // c_long is i32 on some targets
fn ctx_objects(ctx: *mut ffi::ibv_context) -> i64 {
    let f: unsafe extern "C" fn(*mut ffi::ibv_context) -> c_long =
        sym("rdma_direct_standin_ctx_objects");
    // SAFETY: a live context of the stand-in.
    i64::from(unsafe { f(ctx) })
}

fn knob(ctx: *mut ffi::ibv_context, name: &str, value: i64) {
    let f: unsafe extern "C" fn(*mut ffi::ibv_context, *const c_char, c_long) -> c_int =
        sym("rdma_direct_standin_knob");
    let n = CString::new(name).unwrap();
    // SAFETY: a live context of the stand-in, a NUL-terminated knob name.
    assert_eq!(
        unsafe { f(ctx, n.as_ptr(), value as c_long) },
        0,
        "knob {name}"
    );
}

fn qp_scatter_to_cqe(qpn: u32) -> i32 {
    let f: unsafe extern "C" fn(u32) -> c_int = sym("rdma_direct_standin_qp_scatter_to_cqe");
    // SAFETY: plain integer in and out.
    unsafe { f(qpn) }
}

fn qp_bf(qpn: u32) -> (*mut u8, u32) {
    let f: unsafe extern "C" fn(u32, *mut *mut c_void, *mut u32) -> c_int =
        sym("rdma_direct_standin_qp_bf");
    let (mut reg, mut size) = (std::ptr::null_mut(), 0u32);
    // SAFETY: writable out pointers.
    assert_eq!(unsafe { f(qpn, &mut reg, &mut size) }, 0, "QP {qpn:#x}");
    (reg.cast(), size)
}

fn poll_n<C: CompletionQueue>(cq: &mut C, n: usize) -> Vec<Completion> {
    let mut got = Vec::new();
    let t = std::time::Instant::now();
    let mut out = [Completion::EMPTY; 16];
    while got.len() < n && t.elapsed() < std::time::Duration::from_secs(10) {
        let k = cq.poll(&mut out);
        got.extend_from_slice(&out[..k]);
    }
    got
}

/// One self-connected RC QP on `p`: an inline WRITE (with `write` bytes), a SEND into its
/// own receive, a READ, a fetch-and-add; every byte checked. Returns the QPN.
fn self_loop(p: &mut Mlx5Device, cq_ts: Option<TimestampKind>) -> u32 {
    let pd = p.alloc_pd().unwrap();
    let mut buf = vec![0u8; 8192];
    // SAFETY: `buf` outlives the MR (dropped at the end of this function, after the MR).
    let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::ALL) }.unwrap();
    let mut cq = match cq_ts {
        None => p.create_cq(256).unwrap(),
        Some(k) => p.create_cq_ts(256, k).unwrap(),
    };
    let mut qp = p
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let opts = ConnectOpts {
        retry_cnt: 3,
        rnr_retry: 3,
        ..ConnectOpts::default()
    };
    let me = p.endpoint(&qp, &opts).unwrap();
    p.connect(&mut qp, &me, &me, &opts).unwrap();
    let base = mr.addr();
    // SAFETY: in bounds of `buf`; no WQE is outstanding on these bytes yet.
    unsafe {
        std::ptr::copy_nonoverlapping(b"readme!!".as_ptr(), buf.as_mut_ptr().add(3000), 8);
        std::ptr::write_unaligned(buf.as_mut_ptr().add(4000).cast::<u64>(), 40);
    }
    let rsge = [mr.sge(2048, 64)];
    qp.rq().post_recv(RecvWr::new(9, &rsge)).unwrap();
    qp.rq().ring();
    let data = *b"direct!!";
    qp.sq()
        .post(
            SendWr::write(1, &[], base + 100, mr.rkey())
                .inline(&data)
                .signaled(),
        )
        .unwrap();
    qp.sq()
        .post(SendWr::send(2, &[]).inline(&data).signaled())
        .unwrap();
    let read_to = [mr.sge(3500, 8)];
    qp.sq()
        .post(SendWr::read(3, &read_to, base + 3000, mr.rkey()).signaled())
        .unwrap();
    let old = [mr.sge(4100, 8)];
    qp.sq()
        .post(SendWr::faa(4, &old, base + 4000, mr.rkey(), 2).signaled())
        .unwrap();
    qp.sq().ring();
    let (got, ns) = if cq_ts.is_some() {
        let (mut got, mut ns) = (Vec::new(), Vec::new());
        let t = std::time::Instant::now();
        let (mut out, mut o_ns) = ([Completion::EMPTY; 8], [0u64; 8]);
        while got.len() < 5 && t.elapsed() < std::time::Duration::from_secs(10) {
            let k = cq.poll_ts(&mut out, &mut o_ns);
            got.extend_from_slice(&out[..k]);
            ns.extend_from_slice(&o_ns[..k]);
        }
        (got, ns)
    } else {
        (poll_n(&mut cq, 5), Vec::new())
    };
    assert_eq!(got.len(), 5, "{got:?}");
    assert!(got.iter().all(|c| c.is_ok()), "{got:?}");
    let mut ids: Vec<u64> = got.iter().map(|c| c.wr_id).collect();
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 9]);
    if let Some(kind) = cq_ts {
        // Stamped by the sim clock at completion, in ns; in completion order.
        assert!(ns.iter().all(|&t| t > 0), "{kind:?}: {ns:?}");
        assert!(ns.windows(2).all(|w| w[0] <= w[1]), "{kind:?}: {ns:?}");
        if kind == TimestampKind::RealTime {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64;
            assert!(now.abs_diff(ns[0]) < 60_000_000_000, "{} vs {now}", ns[0]);
        }
    }
    let qpn = qp.qpn();
    drop(qp);
    drop(cq);
    drop(mr);
    assert_eq!(&buf[100..108], &data);
    assert_eq!(&buf[2048..2056], &data);
    assert_eq!(&buf[3500..3508], b"readme!!");
    assert_eq!(u64::from_ne_bytes(buf[4000..4008].try_into().unwrap()), 42);
    assert_eq!(u64::from_ne_bytes(buf[4100..4108].try_into().unwrap()), 40);
    qpn
}

#[test]
fn info_lists_the_mlx5_devices_and_the_non_mlx5_one() {
    let dir = standin_or_skip!();
    let out = Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .arg("info")
        .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
        .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
        .output()
        .unwrap();
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for want in [
        "hca_id:\tmlx5_0",
        "hca_id:\tmlx5_1",
        "hca_id:\trxe_standin0",
        "mlx5 (auto: mlx5_0 is an mlx5 device)",
        "verbs (auto: rxe_standin0 is not an mlx5 device)",
        "vendor_id:\t\t\t0x02c9",
        "PORT_DOWN",
    ] {
        assert!(s.contains(want), "missing {want:?} in:\n{s}");
    }
}

#[test]
fn open_create_execute_destroy_leaves_nothing_behind() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let ctx = p.context().as_ptr();
    let v0 = thread_violations();
    assert_eq!(ctx_objects(ctx), 0);
    self_loop(&mut p, None);
    // QP, parent domain, TD, CQ, MR, PD: all destroyed, in an order libmlx5 accepts.
    assert_eq!(ctx_objects(ctx), 0, "objects left on the context");
    assert_eq!(
        thread_violations(),
        v0,
        "a libmlx5 rule was broken (see stderr)"
    );
}

#[test]
fn srq_ud_and_ah_through_init_obj() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    let ctx = p.context().as_ptr();
    let v0 = thread_violations();
    {
        let pd = p.alloc_pd().unwrap();
        let mut buf = vec![0u8; 4096];
        // SAFETY: `buf` outlives the MR.
        let mr = unsafe { p.reg_mr(&pd, buf.as_mut_ptr(), buf.len(), Access::ALL) }.unwrap();
        let mut cq = p.create_cq(512).unwrap();
        let mut srq = p.create_srq(&pd, 64, 2).unwrap();
        let mut ud = p
            .create_qp(
                &pd,
                &mut cq,
                None,
                Some(&mut srq),
                &QpConfig::new(QpType::Ud),
            )
            .unwrap();
        let opts = ConnectOpts {
            qkey: 0x1111,
            ..ConnectOpts::default()
        };
        let me = p.endpoint(&ud, &opts).unwrap();
        p.connect(&mut ud, &me, &me, &opts).unwrap();
        let ah = p.create_ah(&pd, &me, &opts).unwrap();
        // libmlx5's address vector: the destination GID at bytes 32..48.
        assert_eq!(&ah.av().0[32..48], &me.gid);
        let rsge = [mr.sge(0, 256)];
        srq.post_recv(RecvWr::new(7, &rsge)).unwrap();
        srq.ring();
        let dest = rdma_direct::providers::UdDest {
            ah: &ah,
            remote_qpn: ud.qpn(),
            remote_qkey: 0x1111,
        };
        ud.sq()
            .post(SendWr::send(8, &[]).inline(b"datagram").to(dest).signaled())
            .unwrap();
        ud.sq().ring();
        let got = poll_n(&mut cq, 2);
        assert_eq!(got.len(), 2, "{got:?}");
        assert!(got.iter().all(|c| c.is_ok()), "{got:?}");
        // 40 bytes of GRH, then the payload.
        assert_eq!(&buf[40..48], b"datagram");
        drop(ud);
        drop(ah);
        drop(srq);
    }
    assert_eq!(ctx_objects(ctx), 0);
    assert_eq!(thread_violations(), v0);
}

#[test]
fn completion_timestamps_and_the_clock_info_page() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    self_loop(&mut p, Some(TimestampKind::FreeRunning));
    self_loop(&mut p, Some(TimestampKind::RealTime));
    // The clock info libmlx5 hands out (mlx5dv_get_clock_info), through ts.rs's feed.
    use rdma_direct::providers::mlx5::ts::ClockInfoFeed;
    let feed = rdma_direct::providers::mlx5::ts::DvClockFeed::new(
        p.context().clone(),
        ffi::mlx5().unwrap(),
    );
    let info = feed.clock_info().unwrap();
    info.check().unwrap();
    assert!(info.mult > 0, "{info:?}");
}

// ---------------------------------------------------------------- libmlx5's rules

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
        .args(["--exact", "old_libmlx5_child", "--nocapture"])
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

// ---------------------------------------------------------------- rdma-direct selftest

/// `rdma-direct selftest ARGS` with the stand-in (`dir`) as libibverbs/libmlx5 when given,
/// and `fault` planted in it: (exit status, stdout).
fn selftest(dir: Option<&PathBuf>, fault: Option<&str>, args: &[&str]) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdma-direct"));
    c.arg("selftest").args(args);
    if let Some(d) = dir {
        c.env("RDMA_DIRECT_LIBIBVERBS", d.join("libibverbs-standin.so"))
            .env("RDMA_DIRECT_LIBMLX5", d.join("libmlx5-standin.so"));
    }
    match fault {
        Some(f) => c.env("RDMA_DIRECT_STANDIN_FAULT", f),
        None => c.env_remove("RDMA_DIRECT_STANDIN_FAULT"),
    };
    let out = c.output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(!e.contains("panicked"), "{s}\n{e}");
    (out.status.code().unwrap_or(-1), s)
}

#[test]
fn selftest_on_the_sim_passes_every_rung_that_applies() {
    let (rc, s) = selftest(None, None, &[]);
    assert_eq!(rc, 0, "{s}");
    assert!(
        s.contains("selftest: no rung failed: 12 passed, 7 not applicable (of 19)"),
        "{s}"
    );
    assert!(s.contains("[18] ok   arm and wake"), "{s}");
}

#[test]
fn selftest_on_the_standin_passes_every_rung() {
    let dir = standin_or_skip!();
    let (rc, s) = selftest(Some(dir), None, &["-d", "mlx5_0"]);
    assert_eq!(rc, 0, "{s}");
    assert!(
        s.contains("provider mlx5 (auto: mlx5_0 is an mlx5 device)"),
        "{s}"
    );
    assert!(s.contains("selftest: all 19 rungs passed\n"), "{s}");
    let (rc, j) = selftest(Some(dir), None, &["-d", "mlx5_0", "--json"]);
    assert_eq!(rc, 0, "{j}");
    assert!(
        j.starts_with("{\"device\":\"mlx5_0\"") && j.contains("\"stopped_at\":null"),
        "{j}"
    );
    assert_eq!(j.matches("\"result\":\"pass\"").count(), 19, "{j}");
}

#[test]
fn planted_faults_stop_the_selftest_at_their_rung() {
    let dir = standin_or_skip!();
    for (fault, rung, name, says) in [
        ("dbrec_misalign", 9, "init_obj sanity", "not 4-byte aligned"),
        (
            "no_td",
            7,
            "thread and parent domain",
            "ibv_alloc_td: ENOMEM",
        ),
        ("td_busy", 19, "teardown", "ibv_dealloc_td: EBUSY"),
        ("enomem", 5, "PD and MR", "ibv_alloc_pd: ENOMEM"),
    ] {
        let (rc, s) = selftest(Some(dir), Some(fault), &["-d", "mlx5_0"]);
        assert_eq!(rc, 1, "{fault}: {s}");
        assert!(
            s.contains(&format!("selftest: stopped at rung {rung} ({name})")),
            "{fault}: {s}"
        );
        assert!(s.contains(says), "{fault}: {s}");
        assert!(s.contains("send back:"), "{fault}: {s}");
        let (_, j) = selftest(Some(dir), Some(fault), &["-d", "mlx5_0", "--json"]);
        assert!(
            j.contains(&format!("\"stopped_at\":{rung}")),
            "{fault}: {j}"
        );
    }
    // bf.size 0 is not a fault: the BlueFlame rung does not apply, the rest pass.
    let (rc, s) = selftest(Some(dir), Some("bf_size0"), &["-d", "mlx5_0"]);
    assert_eq!(rc, 0, "{s}");
    assert!(
        s.contains("[12] n/a  WRITE, BlueFlame             bf.size 0"),
        "{s}"
    );
}

// ---------------------------------------------------------------- the CLI with -d mlx5_0

fn cli(dir: &std::path::Path, args: &[&str]) -> String {
    cli_with(dir, None, args)
}

fn cli_with(dir: &std::path::Path, fault: Option<&str>, args: &[&str]) -> String {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdma-direct"));
    c.args(args)
        .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
        .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
        .env_remove("RDMA_DIRECT_STANDIN_FAULT");
    if let Some(f) = fault {
        c.env("RDMA_DIRECT_STANDIN_FAULT", f);
    }
    let out = c.output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

#[test]
fn pingpong_loopback_on_mlx5_0_picks_mlx5_and_a_refused_doorbell_is_named() {
    let dir = standin_or_skip!();
    let s = cli(dir, &["pingpong", "-d", "mlx5_0", "--loopback", "-n", "50"]);
    assert!(
        s.contains("provider: mlx5_0: direct mlx5 WQE writing"),
        "{s}"
    );
    assert!(s.contains("50 iters in "), "{s}");
    assert!(
        s.contains("provider choice: mlx5 (auto: mlx5_0 is an mlx5 device)"),
        "{s}"
    );
    // The non-mlx5 device's data path refuses every post (EOPNOTSUPP): the run ends at
    // once naming the refused doorbell, not after a stall.
    let out = Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args(["pingpong", "-d", "rxe_standin0", "--loopback", "-n", "5"])
        .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
        .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
        .env_remove("RDMA_DIRECT_STANDIN_FAULT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("post receive: ibv_post_recv: EOPNOTSUPP"),
        "{err}"
    );
}

/// The drain's flush marker and a drain of a QP already in ERR (tests/common/marker.rs) on
/// the mlx5 provider through the stand-in (the sim behind it, its device thread running).
#[test]
fn the_flush_marker_on_mlx5_through_the_standin() {
    standin_or_skip!();
    let mut p = Mlx5Device::open("mlx5_0").unwrap();
    common::marker::marker_ends_what_ran_before_it(&mut p, &ConnectOpts::default(), true);
    common::marker::drain_of_a_qp_already_in_err(&mut p, &ConnectOpts::default(), true);
}

/// The flush marker on the verbs provider: refused in RTS by the provider; in ERR handed to
/// `ibv_post_send`, whose refusal (the stand-in's non-mlx5 device: EOPNOTSUPP) is the
/// marker's error, nothing left staged.
#[test]
fn the_flush_marker_on_verbs_returns_the_device_refusal() {
    use rdma_direct::providers::verbs::VerbsDevice;
    use rdma_direct::providers::{PostError, QpState, RingVerb};
    let _dir = standin_or_skip!();
    let mut p = VerbsDevice::open("rxe_standin0").unwrap();
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(512).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    rdma_direct::providers::flow::connect_pair(&mut p, &mut a, &mut b, &ConnectOpts::default())
        .unwrap();
    assert_eq!(
        a.sq().post_flush_marker(1),
        Err(PostError::BadState {
            state: QpState::Rts
        })
    );
    p.to_error(&mut a).unwrap();
    assert_eq!(
        a.sq().post_flush_marker(1),
        Err(PostError::Device {
            verb: RingVerb::PostSend,
            errno: libc::EOPNOTSUPP,
            count: 1
        })
    );
    assert_eq!((a.sq().staged(), a.sq().take_ring_error()), (0, None));
}

/// The stand-in's non-mlx5 device refuses every `ibv_post_send` / `ibv_post_recv`
/// (EOPNOTSUPP): the call that rings returns the refusal with the verb, the errno and which
/// requests were taken back; nothing waits in `take_ring_error` afterwards.
#[test]
fn a_refused_doorbell_on_verbs_is_returned_by_the_call_that_rings() {
    use rdma_direct::providers::verbs::VerbsDevice;
    use rdma_direct::providers::{PostError, RingError, RingVerb};
    let _dir = standin_or_skip!();
    let mut p = VerbsDevice::open("rxe_standin0").unwrap();
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(512).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    rdma_direct::providers::flow::connect_pair(&mut p, &mut a, &mut b, &ConnectOpts::default())
        .unwrap();
    let refused = |first_wr_id, count| RingError {
        verb: RingVerb::PostSend,
        errno: libc::EOPNOTSUPP,
        first_wr_id,
        count,
    };
    let free = a.sq().free_slots();
    // post_and_ring hands the request back with the device's refusal.
    let w = SendWr::send(7, &[]).inline(b"x").signaled();
    let r = a.sq().post_and_ring(w).unwrap_err();
    assert_eq!(r.wr.wr_id, 7);
    assert_eq!(r.error, refused(7, 1).into());
    assert!(
        r.to_string()
            .contains("ibv_post_send: EOPNOTSUPP: 1 request refused"),
        "{r}"
    );
    // try_ring after posts: every staged request came back, and the queue has its room.
    a.sq().post(SendWr::send(8, &[]).inline(b"x")).unwrap();
    a.sq().post(SendWr::send(9, &[]).inline(b"x")).unwrap();
    assert_eq!(a.sq().try_ring(), Err(refused(8, 2)));
    assert_eq!(a.sq().take_ring_error(), None);
    assert_eq!(a.sq().free_slots(), free);
    // post_list: the whole list back, from index 0.
    let wrs: Vec<_> = (10..13)
        .map(|i| SendWr::send(i, &[]).inline(b"x"))
        .collect();
    let e = a.sq().post_list(&wrs).unwrap_err();
    assert_eq!((e.index, e.rest.len()), (0, 3));
    assert_eq!(e.error, refused(10, 3).into());
    // Receives: the same through ibv_post_recv.
    let recvs = [RecvWr::new(20, &[])];
    let e = a.rq().post_recv_list(&recvs).unwrap_err();
    assert!(
        matches!(
            e.error,
            PostError::Device {
                verb: RingVerb::PostRecv,
                errno: libc::EOPNOTSUPP,
                count: 1
            }
        ),
        "{e}"
    );
    assert_eq!(a.rq().take_ring_error(), None);
    // The replenisher keeps the receives the doorbell took back, to post again.
    let mut r = rdma_direct::providers::flow::RecvReplenisher::new(3);
    let e = r.fill(a.rq()).unwrap_err();
    assert!(e.to_string().contains("ibv_post_recv: EOPNOTSUPP"), "{e}");
    assert_eq!(r.posted(), 0, "none of the three is posted, none is lost");
}

/// A bare `ring` the device refuses (the stand-in's EOPNOTSUPP) is not parked out of band: the
/// next call on that queue returns it (`post`, `post_list`, `try_ring`, `post_recv`), or, when
/// the application polls first, its CQ's empty poll returns it as a completion flagged
/// `REFUSED` naming the verb, the errno and the requests taken back; whichever comes first
/// reports it, once.
#[test]
fn a_refused_bare_ring_surfaces_at_the_next_call_on_the_queue_or_its_cq() {
    use rdma_direct::providers::verbs::VerbsDevice;
    use rdma_direct::providers::{PostError, RingError, RingVerb, WcFlags, WcOpcode, WcStatus};
    let _dir = standin_or_skip!();
    let mut p = VerbsDevice::open("rxe_standin0").unwrap();
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(512).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    rdma_direct::providers::flow::connect_pair(&mut p, &mut a, &mut b, &ConnectOpts::default())
        .unwrap();
    let refused = |verb, first_wr_id, count| RingError {
        verb,
        errno: libc::EOPNOTSUPP,
        first_wr_id,
        count,
    };
    let send = |id| SendWr::send(id, &[]).inline(b"x");
    let free = a.sq().free_slots();
    let mut wc = [Completion::EMPTY; 4];
    // The next post: handed back, unposted, with the refusal of the ring before it.
    a.sq().post(send(30)).unwrap();
    a.sq().ring();
    let r = a.sq().post(send(31)).unwrap_err();
    assert_eq!(
        (r.wr.wr_id, r.error),
        (31, refused(RingVerb::PostSend, 30, 1).into())
    );
    assert!(r.to_string().contains("ibv_post_send: EOPNOTSUPP"), "{r}");
    assert_eq!(a.sq().take_ring_error(), None, "reported once");
    assert_eq!(cq.poll(&mut wc), 0, "reported once: not by the CQ too");
    assert_eq!(a.sq().free_slots(), free, "the queue has its room");
    // try_ring with nothing staged.
    a.sq().post(send(40)).unwrap();
    a.sq().ring();
    assert_eq!(a.sq().try_ring(), Err(refused(RingVerb::PostSend, 40, 1)));
    // post_list: the refusal before the list, the list handed back whole.
    a.sq().post(send(50)).unwrap();
    a.sq().post(send(51)).unwrap();
    a.sq().ring();
    let wrs = [send(60)];
    let e = a.sq().post_list(&wrs).unwrap_err();
    assert_eq!((e.index, e.rest.len()), (0, 1));
    assert_eq!(e.error, refused(RingVerb::PostSend, 50, 2).into());
    // The application polls before it posts again: its CQ says so.
    a.sq().post(send(70)).unwrap();
    a.sq().ring();
    assert_eq!(cq.poll(&mut wc), 1);
    let c = wc[0];
    assert_eq!(
        (
            c.wr_id,
            c.byte_len,
            c.qp_num,
            c.status,
            c.opcode,
            c.vendor_err
        ),
        (
            70,
            1,
            a.qpn(),
            WcStatus::GeneralErr,
            WcOpcode::Send,
            libc::EOPNOTSUPP as u32
        )
    );
    assert!(c.flags.contains(WcFlags::REFUSED) && c.covered == 0);
    assert_eq!(c.refusal(), Some(refused(RingVerb::PostSend, 70, 1)));
    assert_eq!(cq.poll(&mut wc), 0, "reported once");
    assert_eq!(a.sq().take_ring_error(), None, "reported once");
    assert_eq!(Completion::EMPTY.refusal(), None);
    // Receives: the same through ibv_post_recv, by the CQ and by the next post_recv.
    a.rq().post_recv(RecvWr::new(90, &[])).unwrap();
    a.rq().ring();
    assert_eq!(cq.poll(&mut wc), 1);
    assert_eq!(wc[0].refusal(), Some(refused(RingVerb::PostRecv, 90, 1)));
    assert_eq!(wc[0].opcode, WcOpcode::Recv);
    a.rq().post_recv(RecvWr::new(95, &[])).unwrap();
    a.rq().ring();
    let r = a.rq().post_recv(RecvWr::new(96, &[])).unwrap_err();
    assert_eq!(r.wr.wr_id, 96);
    assert!(
        matches!(
            r.error,
            PostError::Device {
                verb: RingVerb::PostRecv,
                errno: libc::EOPNOTSUPP,
                count: 1
            }
        ),
        "{r}"
    );
    assert_eq!(cq.poll(&mut wc), 0);
}

/// `perf` on the verbs provider names the refused verb and errno at once (not after a stall).
#[test]
fn perf_on_a_device_that_refuses_posts_names_the_verb_and_errno() {
    let dir = standin_or_skip!();
    let out = Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args([
            "perf",
            "write_lat",
            "-d",
            "mlx5_0",
            "--loopback",
            "--provider",
            "verbs",
        ])
        .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
        .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
        .env_remove("RDMA_DIRECT_STANDIN_FAULT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("post WRITE: ibv_post_send: EOPNOTSUPP"),
        "{err}"
    );
    assert!(!err.contains("no completion for"), "{err}");
}

/// `bench batching --provider verbs` names the refused doorbell (libibverbs' post) and errno
/// at once, not "no completion for 10 s".
#[test]
fn batching_on_a_device_that_refuses_posts_names_the_verb_and_errno() {
    let dir = standin_or_skip!();
    let out = Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args([
            "bench",
            "batching",
            "-d",
            "mlx5_0",
            "--provider",
            "verbs",
            "-l",
            "1",
            "-Q",
            "1",
            "-r",
            "2",
            "-w",
            "0",
            "-n",
            "8",
        ])
        .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
        .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
        .env_remove("RDMA_DIRECT_STANDIN_FAULT")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("ring after WRITE #0: ibv_post_send: EOPNOTSUPP"),
        "{err}"
    );
    assert!(!err.contains("no completion for"), "{err}");
}

/// `bench batching --provider mlx5,verbs`: the verbs baseline in the same sweep. The
/// stand-in's libibverbs refuses to post (EOPNOTSUPP), so one line says the baseline was not
/// measured and why, and the mlx5 points stand (in the table and the JSON, whose `skipped`
/// holds the line).
#[test]
fn batching_verbs_baseline_refused_is_one_line_and_the_mlx5_points_stand() {
    let dir = standin_or_skip!();
    let js = Path::new(env!("CARGO_TARGET_TMPDIR")).join("batching-baseline.json");
    let _ = std::fs::remove_file(&js);
    let s = cli(
        dir,
        &[
            "bench",
            "batching",
            "--provider",
            "mlx5,verbs",
            "-d",
            "mlx5_0",
            "-l",
            "1,8",
            "-m",
            "db8",
            "-Q",
            "1",
            "-r",
            "2",
            "-w",
            "0",
            "-n",
            "16",
            "--json",
            js.to_str().unwrap(),
        ],
    );
    let notes: Vec<&str> = s
        .lines()
        .filter(|l| l.contains("verbs baseline on mlx5_0 not measured"))
        .collect();
    assert_eq!(notes.len(), 1, "{s}");
    assert!(notes[0].contains("EOPNOTSUPP"), "{s}");
    assert!(s.contains("ns/WQE") && s.contains("doorbell: db8"), "{s}");
    assert!(!s.contains("ibv_post_send |"), "{s}");
    let j = std::fs::read_to_string(&js).unwrap();
    assert!(
        j.contains("\"skipped\":[\"verbs baseline on mlx5_0 not measured"),
        "{j}"
    );
    assert_eq!(j.matches("\"mode\":\"db8\",\"signal\"").count(), 1, "{j}");
    assert!(!j.contains("\"mode\":\"ibv_post_send\""), "{j}");
}

#[test]
fn perf_loopback_sweeps_pick_mlx5_by_themselves() {
    let dir = standin_or_skip!();
    for t in ["write_lat", "send_lat", "read_lat", "write_bw", "send_bw"] {
        let s = cli(
            dir,
            &["perf", t, "-d", "mlx5_0", "--loopback", "-a", "-n", "5"],
        );
        assert!(
            s.contains("Provider choice : mlx5 (auto: mlx5_0 is an mlx5 device)"),
            "{t}: {s}"
        );
        // The sweep's first and last sizes (2 B .. 8 MiB) both ran.
        assert!(s.contains("\n 2 ") && s.contains("\n 8388608 "), "{t}: {s}");
    }
    let s = cli(
        dir,
        &[
            "perf",
            "write_lat",
            "-d",
            "mlx5_0",
            "--loopback",
            "--hw-ts",
            "-n",
            "50",
        ],
    );
    assert!(s.contains("NIC time (device clock)"), "{s}");
    let s = cli(
        dir,
        &[
            "bench",
            "batching",
            "--provider",
            "mlx5",
            "-d",
            "mlx5_0",
            "-l",
            "1,8",
            "-r",
            "2",
        ],
    );
    assert!(s.contains("ns/WQE"), "{s}");
}

#[test]
fn events_reads_the_devices_asynchronous_event() {
    let dir = standin_or_skip!();
    let s = cli_with(
        dir,
        Some("port_event"),
        &["events", "-d", "mlx5_0", "--count", "1"],
    );
    assert!(s.contains("mlx5_0: PortActive port 1"), "{s}");
}

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
        .args(["--exact", "no_libmlx5_child", "--nocapture"])
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

/// A server and a client of `args` (`-p PORT` added to both, `127.0.0.1` to the client) on
/// the stand-in, on the fabric `fabric`: their outputs, client first. A side still running
/// after the liveness bound is killed (its status then says so).
fn two_processes(
    dir: &Path,
    fabric: &str,
    args: &[&str],
) -> (std::process::Output, std::process::Output) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let spawn = |extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
            .args(args)
            .args(["-p", &port])
            .args(extra)
            .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
            .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
            .env("RDMA_DIRECT_SIM_FABRIC", fabric)
            .env_remove("RDMA_DIRECT_STANDIN_FAULT")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let server = spawn(&[]);
    let client = spawn(&["127.0.0.1"]);
    // A liveness bound only: a side still running after it is a hang, killed and failed.
    let t0 = std::time::Instant::now();
    let finish = |mut c: std::process::Child| {
        while c.try_wait().unwrap().is_none() && t0.elapsed().as_secs() < 180 {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = c.kill();
        c.wait_with_output().unwrap()
    };
    let c = finish(client);
    (c, finish(server))
}

/// Two processes on the stand-in's `mlx5_0`, server and client as perftest's: each process's
/// `mlx5_0` is its own device (its own GIDs), and the two reach each other over the sim
/// fabric, so `pingpong` (`--chk`: every message's bytes checked on receipt) and every
/// `perf` test run to the end on both sides (before, the two ends could not connect and the
/// CLI refused the run).
#[test]
fn two_processes_on_mlx5_0_reach_each_other_over_the_sim_fabric() {
    let dir = standin_or_skip!();
    let fabric = format!("rdma-direct-test-{}-standin2p", std::process::id());
    struct Removed(String);
    impl Drop for Removed {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(Path::new("/dev/shm").join(&self.0));
        }
    }
    let _rm = Removed(fabric.clone());
    let (c, s) = two_processes(
        dir,
        &fabric,
        &["pingpong", "-d", "mlx5_0", "-n", "20", "--chk"],
    );
    let mut gids = Vec::new();
    for (who, out) in [("client", &c), ("server", &s)] {
        let text = String::from_utf8_lossy(&out.stdout);
        let why = format!(
            "pingpong {who}: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "{why}");
        assert_eq!(
            text.lines().next(),
            Some("provider: mlx5_0: direct mlx5 WQE writing"),
            "{why}"
        );
        assert!(text.contains("20 iters in "), "{why}");
        let gid = |which: &str| {
            let l = text.lines().find(|l| l.contains(which)).expect(which);
            l.rsplit("GID ").next().unwrap().to_string()
        };
        let (local, remote) = (gid("local address:"), gid("remote address:"));
        assert_ne!(local, remote, "{why}");
        gids.push((local, remote));
    }
    // Each side's peer is the other process's device.
    assert_eq!(gids[0].0, gids[1].1);
    assert_eq!(gids[0].1, gids[1].0);
    // The sim GID itself (index 2) reaches the peer as its link-local one (index 0) does.
    let (c, s) = two_processes(
        dir,
        &fabric,
        &["pingpong", "-d", "mlx5_0", "-n", "5", "-g", "2", "--chk"],
    );
    for (who, out) in [("client", &c), ("server", &s)] {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && text.contains("5 iters in ")
                && text.contains("GID fd73:696d::"),
            "pingpong -g 2 {who}: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    for test in [
        "write_lat",
        "send_lat",
        "read_lat",
        "atomic_lat",
        "write_bw",
        "send_bw",
        "read_bw",
    ] {
        let (c, s) = two_processes(dir, &fabric, &["perf", test, "-d", "mlx5_0", "-n", "20"]);
        for (who, out) in [("client", &c), ("server", &s)] {
            let text = String::from_utf8_lossy(&out.stdout);
            let why = format!(
                "{test} {who}: {}\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{why}");
            assert!(
                text.contains(" Provider        : mlx5_0: direct mlx5 WQE writing\n"),
                "{why}"
            );
            assert!(
                text.contains(&format!(" Test            : {test}\n")),
                "{why}"
            );
            assert!(text.contains("#bytes"), "{why}");
        }
        let text = String::from_utf8_lossy(&c.stdout);
        let first = text.lines().next().unwrap_or("");
        assert!(
            first.contains("mlx5_0") && first.contains("stand-in") && first.contains("sim fabric"),
            "{test}: {text}"
        );
        // The client measures: its table has the row of 20 iterations.
        assert!(
            text.lines().any(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                f.len() >= 5 && f[0].parse::<u32>().is_ok() && f[1] == "20"
            }),
            "{test}: {text}"
        );
    }
    // Loopback on one device still runs.
    let s = cli(dir, &["pingpong", "-d", "mlx5_0", "--loopback", "-n", "20"]);
    assert!(s.contains("20 iters in"), "{s}");
}

/// `events -d DEV` watches until Ctrl-C, but a stdout it cannot write ends the watch at once
/// with the one failure line and status 1 (it waited for events no one could read).
#[test]
fn events_on_a_full_stdout_ends_the_watch() {
    let dir = standin_or_skip!();
    let out = Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .args(["events", "-d", "mlx5_0"])
        .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
        .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
        .env_remove("RDMA_DIRECT_STANDIN_FAULT")
        .stdout(
            std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/full")
                .unwrap(),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.trim_end()
            .ends_with("cannot write to stdout: No space left on device (os error 28) (the results printed are lost)"),
        "{err}"
    );
}

/// A scenario's `event` line on mlx5_0 reads the device's own asynchronous events (the
/// stand-in's planted `PORT_ACTIVE`, through `Provider::async_events`), an event the file
/// does not list fails the run, and a `fault` line is refused naming the fix (only the sim
/// injects faults).
#[test]
fn scenario_events_on_mlx5_0_are_the_devices_and_faults_are_refused() {
    let dir = standin_or_skip!();
    let tmp = std::env::temp_dir().join(format!("rdma-direct-standin-scn-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    let head = "version 2\ndesc events on mlx5_0\nqp a rc\nqp b rc\nconnect a b\n";
    let run = |name: &str, body: &str, fault: Option<&str>| {
        let f = tmp.join(format!("{name}.scn"));
        std::fs::write(&f, format!("{head}{body}")).unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_rdma-direct"));
        c.args(["scenario", f.to_str().unwrap(), "-d", "mlx5_0"])
            .env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
            .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"))
            .env_remove("RDMA_DIRECT_STANDIN_FAULT");
        if let Some(v) = fault {
            c.env("RDMA_DIRECT_STANDIN_FAULT", v);
        }
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (st, s) = run(
        "port",
        "event PORT_ACTIVE port=1 within=10s\n",
        Some("port_event"),
    );
    assert_eq!(st, Some(0), "{s}");
    assert!(s.contains("PASS port"), "{s}");
    // Without the planted event the wait ends at its bound, naming the line.
    let (st, s) = run("none", "event PORT_ACTIVE port=1 within=50ms\n", None);
    assert_eq!(st, Some(1), "{s}");
    assert!(s.contains("none.scn:6 (event)"), "{s}");
    // The device's event is not the one listed: unexpected at the end.
    let (st, s) = run(
        "other",
        "event PORT_ERR port=1 within=50ms\n",
        Some("port_event"),
    );
    assert_eq!(st, Some(1), "{s}");
    assert!(s.contains("arrived (not taken): PORT_ACTIVE port 1"), "{s}");
    let (st, s) = run("fault", "fault qp a\nevent QP_FATAL a\n", None);
    assert_eq!(st, Some(1), "{s}");
    assert!(s.contains("fault.scn:6 (fault)"), "{s}");
    assert!(
        s.contains("only the software device (sim0) injects faults; tag the line [sim]"),
        "{s}"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
