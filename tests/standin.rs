//! The mlx5 hardware glue (`providers/mlx5/device.rs`, `ts.rs`, `arm.rs`) against the
//! stand-in for libibverbs and libmlx5 (`tests/standin/`, C compiled from rdma-core's own
//! headers, with the sim as the device behind it): open, create, execute, destroy, and
//! libmlx5's rules, each broken on purpose.
//!
//! The stand-in is built on demand (`tests/standin/build`). Without a C compiler or
//! rdma-core's headers each test prints "skipped: ..." and returns, unless
//! `RDMA_DIRECT_REQUIRE_STANDIN=1` (set by `.ci/run`), where that fails. The stand-in's
//! device is the sim: this needs the `sim` feature (and the CLI tests the `cli` one).
//! This file holds the helpers and the basics (open, create, execute, destroy); the rest is
//! in `tests/standin_cases/` (`tests/standin/` holds the stand-in's C sources): libmlx5's
//! rules (`rules.rs`), the CLI (`commands.rs`), refused doorbells and the flush marker
//! (`refused.rs`), more of `Mlx5Device` (`device.rs`) and two processes (`two_processes.rs`).
#![cfg(feature = "cli")]

use std::ffi::{c_char, c_int, c_long, c_ulong, c_void, CString};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use rdma_direct::clock::TimestampKind;
use rdma_direct::ffi;
use rdma_direct::providers::mlx5::Mlx5Device;
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, MemoryRegion, Provider, QpConfig, QpType,
    QueuePair, RecvQueue, RecvWr, SendQueue, SendWr,
};

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
        match crate::standin() {
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
    let out = on_standin(dir, None).arg("info").output().unwrap();
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

// ---------------------------------------------------------------- the CLI with -d mlx5_0

fn cli(dir: &std::path::Path, args: &[&str]) -> String {
    cli_with(dir, None, args)
}

/// `rdma-direct` loading the stand-in in `dir` as libibverbs and libmlx5, with `fault`
/// planted in it (none: whatever the environment says is removed).
fn on_standin(dir: &std::path::Path, fault: Option<&str>) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdma-direct"));
    c.env("RDMA_DIRECT_LIBIBVERBS", dir.join("libibverbs-standin.so"))
        .env("RDMA_DIRECT_LIBMLX5", dir.join("libmlx5-standin.so"));
    match fault {
        Some(f) => c.env("RDMA_DIRECT_STANDIN_FAULT", f),
        None => c.env_remove("RDMA_DIRECT_STANDIN_FAULT"),
    };
    c
}

fn cli_with(dir: &std::path::Path, fault: Option<&str>, args: &[&str]) -> String {
    let out = on_standin(dir, fault).args(args).output().unwrap();
    let s = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?}: {s}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    s
}

#[path = "standin_cases/commands.rs"]
mod commands;
#[path = "standin_cases/device.rs"]
mod device;
#[path = "standin_cases/refused.rs"]
mod refused;
#[path = "standin_cases/rules.rs"]
mod rules;
#[path = "standin_cases/two_processes.rs"]
mod two_processes;
