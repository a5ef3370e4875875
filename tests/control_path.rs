//! The control path on a real verbs device (`#[ignore]`d: run with `--ignored` and
//! `RDMA_DIRECT_DEVICE`, e.g. in the rxe guest: `tests/guest/run`), plus host tests of the
//! behaviour without libibverbs.
//!
//! Device tests: listing and opening the device, port and GID queries, PD/MR/CQ/SRQ/QP for
//! RC, UC and UD with granted caps, a full RC loopback bring-up with `query_qp` showing RTS
//! and a SEND through it, UC and UD bring-up, the endpoint exchange over loopback TCP, clear
//! errors for a wrong GID index, an invalid transition and an unzeroed attribute mask, the
//! memlock error for a non-root user, and CQ overrun seen as an async event.

mod common;

use rdma_direct::control::{
    AsyncElement, AsyncEventKind, Context, Cq, Device, GidType, LinkLayer, Mr, Pd, PortState, Qp,
    RtrAttr, Srq,
};
use rdma_direct::endpoint::{self, QpEndpoint, RemoteMr};
use rdma_direct::ffi;
use rdma_direct::providers::{Access, ConnectOpts, MemoryRegion, QpConfig, QpState, QpType};
use rdma_direct::{Error, Result};
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "RDMA_DIRECT_CONTROL_PATH_CHILD";

fn open() -> Context {
    let name = common::device();
    Context::open(&name).unwrap_or_else(|e| panic!("open {name}: {e}"))
}

fn gid_index(ctx: &Context) -> u8 {
    common::gid_index().unwrap_or_else(|| ctx.default_gid_index(1).expect("a GID on port 1"))
}

fn opts(ctx: &Context) -> ConnectOpts {
    ConnectOpts {
        gid_index: gid_index(ctx),
        // Below 7 so a broken path fails instead of retrying forever on rxe.
        retry_cnt: 3,
        rnr_retry: 3,
        ..ConnectOpts::default()
    }
}

struct Side {
    qp: Qp,
    cq: Cq,
}

fn side(ctx: &Context, pd: &Pd, ty: QpType, cqe: u32) -> Side {
    let cq = Cq::new(ctx, cqe).unwrap();
    let qp = Qp::new(pd, &cq, &cq, None, &QpConfig::new(ty)).unwrap();
    Side { qp, cq }
}

fn poll_one(cq: &Cq, timeout: Duration) -> ffi::ibv_wc {
    let deadline = Instant::now() + timeout;
    let mut wc = [ffi::ibv_wc::default(); 1];
    loop {
        if cq.poll(&mut wc).unwrap() == 1 {
            return wc[0];
        }
        assert!(
            Instant::now() < deadline,
            "no completion within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn post_recv(qp: &Qp, mr: &Mr, offset: usize, len: u32, wr_id: u64) {
    let mut sge = ffi::ibv_sge {
        addr: mr.addr() + offset as u64,
        length: len,
        lkey: mr.lkey(),
    };
    let mut wr = ffi::ibv_recv_wr::zeroed();
    wr.wr_id = wr_id;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    let mut bad = std::ptr::null_mut();
    // SAFETY: live QP; `wr` and `sge` outlive the call; the MR covers the range.
    let rc = unsafe { ffi::ops::post_recv(qp.as_ptr(), &mut wr, &mut bad) };
    assert_eq!(rc, 0, "post_recv");
}

fn post_send(qp: &Qp, mr: &Mr, offset: usize, len: u32, wr_id: u64) -> i32 {
    let mut sge = ffi::ibv_sge {
        addr: mr.addr() + offset as u64,
        length: len,
        lkey: mr.lkey(),
    };
    let mut wr = ffi::ibv_send_wr::zeroed();
    wr.wr_id = wr_id;
    wr.sg_list = &mut sge;
    wr.num_sge = 1;
    wr.opcode = ffi::IBV_WR_SEND;
    wr.send_flags = ffi::IBV_SEND_SIGNALED;
    let mut bad = std::ptr::null_mut();
    // SAFETY: live QP; `wr` and `sge` outlive the call; the MR covers the range.
    unsafe { ffi::ops::post_send(qp.as_ptr(), &mut wr, &mut bad) }
}

/// Brings two QPs of one context up towards each other.
fn connect_pair(ctx: &Context, a: &mut Qp, b: &mut Qp) -> (QpEndpoint, QpEndpoint) {
    let o = opts(ctx);
    let ea = endpoint::local_endpoint(a, &o, None).unwrap();
    let eb = endpoint::local_endpoint(b, &o, None).unwrap();
    endpoint::connect(a, &ea, &eb, &o).unwrap();
    endpoint::connect(b, &eb, &ea, &o).unwrap();
    (ea, eb)
}

// ---------------------------------------------------------------------------------------------
// Host tests (no device needed).
// ---------------------------------------------------------------------------------------------

#[test]
fn without_libibverbs_every_entry_point_is_a_clear_error() {
    if std::env::var(CHILD_ENV).as_deref() == Ok("missing-lib") {
        let hint = "libibverbs.so.1 not found: install rdma-core / libibverbs1";
        let e = Device::list().unwrap_err();
        assert!(matches!(e, Error::LibraryMissing { .. }), "{e}");
        assert!(e.to_string().starts_with(hint), "{e}");
        let e = Context::open("rxe0").unwrap_err();
        assert!(e.to_string().starts_with(hint), "{e}");
        let e = ffi::verbs().err().expect("load must fail");
        assert!(e.to_string().starts_with(hint), "{e}");
        return;
    }
    // The library is loaded once per process: check in a fresh one that cannot find it.
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "without_libibverbs_every_entry_point_is_a_clear_error",
            "--nocapture",
        ])
        .env(CHILD_ENV, "missing-lib")
        .env("RDMA_DIRECT_LIBIBVERBS", "/nonexistent/libibverbs.so.1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

#[test]
fn the_cli_says_why_when_libibverbs_is_missing() {
    // The software device is still listed (exit 0); one stderr line says why it is alone.
    for cmd in ["devices", "info"] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
            .arg(cmd)
            .env("RDMA_DIRECT_LIBIBVERBS", "/nonexistent/libibverbs.so.1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{cmd}: {err}");
        assert!(
            err.starts_with("rdma-direct: no RDMA device but the software device sim0: ")
                && err.contains("libibverbs.so.1 not found: install rdma-core / libibverbs1"),
            "{cmd}: {err}"
        );
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("sim0"),
            "{cmd}"
        );
    }
}

#[test]
fn the_cli_says_so_plainly_when_there_is_no_device() {
    let has_devices = Device::list().map(|l| !l.is_empty()).unwrap_or(false);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rdma-direct"))
        .arg("devices")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // Every host lists the software device, after the RDMA devices if there are any.
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        stdout.contains("node GUID") && stdout.contains("sim0"),
        "{stdout}"
    );
    if has_devices {
        assert!(err.is_empty(), "{err}");
    } else {
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("rdma-direct: no RDMA device but the software device sim0: "),
            "{err}"
        );
        if rdma_direct::ffi::verbs().is_err() {
            assert!(err.contains("install rdma-core / libibverbs1"), "{err}");
        } else if !std::path::Path::new("/sys/class/infiniband").exists() {
            // The reason names the way to a device: soft-RoCE.
            assert!(err.contains("rdma_rxe"), "{err}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Device tests.
// ---------------------------------------------------------------------------------------------

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn lists_and_opens_the_device() {
    let name = common::device();
    let list = Device::list().unwrap();
    let d = list
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("{name} not in {list:?}"));
    assert_eq!(d.node_type, ffi::IBV_NODE_CA);
    let ctx = open();
    assert_eq!(ctx.name(), name);
    let attr = ctx.query_device().unwrap();
    assert!(attr.phys_port_cnt >= 1);
    assert!(attr.max_qp_wr > 0 && attr.max_cqe > 0 && attr.max_sge > 0);
    assert_eq!(
        attr.node_guid, d.node_guid,
        "query_device and the list agree"
    );
    match Context::open("no-such-device0") {
        Err(Error::NotFound { what, hint }) => {
            assert!(what.contains("no-such-device0"), "{what}");
            assert!(hint.contains(&name), "{hint}");
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn port_and_gid_queries() {
    let ctx = open();
    let p = ctx.query_port(1).unwrap();
    assert_eq!(p.state, PortState::Active);
    let active = p.active_mtu().expect("active MTU");
    assert!(active <= p.max_mtu().expect("max MTU"));
    assert!(
        p.rate_gbps().is_some(),
        "width {} speed {}",
        p.active_width,
        p.active_speed
    );
    assert!(p.gid_tbl_len > 0);
    let table = ctx.gid_table(1).unwrap();
    assert!(!table.is_empty());
    for g in &table {
        assert!(!g.gid.is_zero());
        assert!((g.index as i32) < p.gid_tbl_len);
        assert_eq!(ctx.query_gid(1, g.index).unwrap(), g.gid);
    }
    if ctx.name().starts_with("rxe") {
        assert_eq!(p.link_layer, LinkLayer::Ethernet);
        assert_eq!(p.lid, 0);
        assert!(table.iter().all(|g| g.gid_type != GidType::Ib));
    }
    if let Some(i) = common::gid_index() {
        let e = ctx.check_gid_index(1, i).unwrap();
        assert_eq!(e.gid_type, GidType::RoceV2, "{e:?}");
        assert_eq!(
            e.gid.ipv4_mapped(),
            Some(std::net::Ipv4Addr::LOCALHOST),
            "the guest's GID index is ::ffff:127.0.0.1"
        );
    }
    assert_eq!(ctx.default_gid_index(1).map(u32::from).ok(), {
        let v2 = table
            .iter()
            .find(|g| g.gid_type == GidType::RoceV2 && g.gid.ipv4_mapped().is_some());
        v2.or_else(|| table.iter().find(|g| g.gid_type == GidType::RoceV2))
            .or(table.first())
            .map(|g| g.index)
    });
    let ports = ctx.query_device().unwrap().phys_port_cnt;
    let e = ctx.query_port(ports + 1).unwrap_err();
    assert!(e.to_string().contains("has ports 1..="), "{e}");
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn pd_mr_cq_srq() {
    let ctx = open();
    let pd = Pd::new(&ctx).unwrap();
    let mr = Mr::alloc(&pd, 64 << 10, Access::LOCAL_WRITE).unwrap();
    assert_eq!(mr.len(), 64 << 10);
    assert!(mr.owns_memory());
    assert_eq!(mr.access(), Access::LOCAL_WRITE);
    mr.write_at(100, b"hello").unwrap();
    let mut b = [0u8; 5];
    mr.read_at(100, &mut b).unwrap();
    assert_eq!(&b, b"hello");
    assert!(mr.read_at((64 << 10) - 2, &mut b).is_err());
    // Remote rights must be asked for, and need local write.
    assert!(matches!(
        Mr::alloc(&pd, 4096, Access::REMOTE_WRITE),
        Err(Error::InvalidArgument { .. })
    ));
    let remote = Mr::alloc(&pd, 4096, Access::ALL).unwrap();
    assert_ne!(remote.rkey(), 0);
    // Caller-owned memory.
    let mut buf = vec![0u8; 8192];
    // SAFETY: `buf` outlives `ext` (dropped first, declared later).
    let ext =
        unsafe { Mr::register(&pd, buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE) }.unwrap();
    assert_eq!(ext.addr(), buf.as_ptr() as u64);
    assert!(!ext.owns_memory());
    drop(ext);

    let cq = Cq::new(&ctx, 16).unwrap();
    assert!(cq.cqe() >= 16, "granted {}", cq.cqe());
    assert!(Cq::new(&ctx, 0).is_err());
    let max = ctx.query_device().unwrap().max_cqe as u32;
    let e = Cq::new(&ctx, max.saturating_mul(2).max(max + 1)).unwrap_err();
    assert!(e.to_string().contains("max_cqe"), "{e}");

    let srq = Srq::new(&pd, 64, 1).unwrap();
    assert!(srq.max_wr() >= 64 && srq.max_sge() >= 1, "{srq:?}");
    srq.arm_limit(8).unwrap();
    // Everything is still alive through the handles; dropping the PD handle first is fine.
    drop(pd);
    drop(mr);
    drop(srq);
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn qps_for_rc_uc_ud_report_granted_caps() {
    let ctx = open();
    let pd = Pd::new(&ctx).unwrap();
    let cq = Cq::new(&ctx, 256).unwrap();
    for ty in [QpType::Rc, QpType::Uc, QpType::Ud] {
        let cfg = QpConfig::new(ty);
        let mut qp = Qp::new(&pd, &cq, &cq, None, &cfg).unwrap();
        let c = qp.caps();
        assert!(c.max_send_wr >= cfg.caps.max_send_wr, "{ty}: {c:?}");
        assert!(c.max_recv_wr >= cfg.caps.max_recv_wr, "{ty}: {c:?}");
        assert!(c.max_send_sge >= cfg.caps.max_send_sge, "{ty}: {c:?}");
        assert!(c.max_inline_data >= cfg.caps.max_inline_data, "{ty}: {c:?}");
        assert!(qp.qpn() > 0 && qp.qpn() <= 0xff_ffff);
        assert_eq!(qp.qp_type(), ty);
        assert_eq!(qp.query_state().unwrap(), QpState::Reset);
        assert!(qp.send_cq() == &cq && qp.recv_cq() == &cq);
    }
    // With an SRQ the QP has no receive queue of its own.
    let srq = Srq::new(&pd, 32, 1).unwrap();
    let qp = Qp::new(&pd, &cq, &cq, Some(&srq), &QpConfig::new(QpType::Rc)).unwrap();
    assert_eq!(qp.caps().max_recv_wr, 0);
    assert!(qp.srq().is_some());
    // The QP keeps its CQ, SRQ and PD alive: dropping our handles first is harmless.
    drop(cq);
    drop(srq);
    drop(pd);
    assert_eq!(qp.query().unwrap().state, QpState::Reset);
    // Asking for too much says what the device allows.
    let pd = Pd::new(&ctx).unwrap();
    let cq = Cq::new(&ctx, 16).unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    cfg.caps.max_send_wr = u32::MAX / 2;
    let e = Qp::new(&pd, &cq, &cq, None, &cfg).unwrap_err();
    assert!(e.to_string().contains("max_qp_wr"), "{e}");
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn rc_loopback_bring_up_reaches_rts_and_carries_a_send() {
    let ctx = open();
    let pd = Pd::new(&ctx).unwrap();
    let mut a = side(&ctx, &pd, QpType::Rc, 64);
    let mut b = side(&ctx, &pd, QpType::Rc, 64);
    let (ea, eb) = connect_pair(&ctx, &mut a.qp, &mut b.qp);
    for (s, me, peer) in [(&a, &ea, &eb), (&b, &eb, &ea)] {
        let q = s.qp.query().unwrap();
        assert_eq!(q.state, QpState::Rts);
        assert_eq!(q.dest_qpn, peer.qpn);
        assert_eq!(q.sq_psn, me.psn);
        assert_eq!(q.rq_psn, peer.psn);
        assert_eq!(q.path_mtu, Some(me.mtu.min(peer.mtu)));
        assert_eq!((q.timeout, q.retry_cnt, q.rnr_retry), (14, 3, 3));
        assert_eq!(s.qp.state(), QpState::Rts);
    }
    // The path works: one SEND from a to b.
    let mr = Mr::alloc(&pd, 8192, Access::LOCAL_WRITE).unwrap();
    mr.write_at(0, b"rdma-direct control path").unwrap();
    post_recv(&b.qp, &mr, 4096, 4096, 7);
    assert_eq!(post_send(&a.qp, &mr, 0, 24, 9), 0);
    let wc = poll_one(&a.cq, Duration::from_secs(10));
    assert_eq!(
        (wc.wr_id, wc.status, wc.opcode),
        (9, ffi::IBV_WC_SUCCESS, ffi::IBV_WC_SEND)
    );
    let wc = poll_one(&b.cq, Duration::from_secs(10));
    assert_eq!(
        (wc.wr_id, wc.status, wc.byte_len),
        (7, ffi::IBV_WC_SUCCESS, 24)
    );
    assert_eq!(wc.qp_num, b.qp.qpn());
    let mut got = [0u8; 24];
    mr.read_at(4096, &mut got).unwrap();
    assert_eq!(&got, b"rdma-direct control path");
    // → ERR, → RESET.
    a.qp.to_err().unwrap();
    assert_eq!(a.qp.query().unwrap().state, QpState::Err);
    a.qp.to_reset().unwrap();
    assert_eq!(a.qp.query().unwrap().state, QpState::Reset);
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn uc_and_ud_bring_up() {
    let ctx = open();
    let pd = Pd::new(&ctx).unwrap();
    let mut a = side(&ctx, &pd, QpType::Uc, 16);
    let mut b = side(&ctx, &pd, QpType::Uc, 16);
    connect_pair(&ctx, &mut a.qp, &mut b.qp);
    assert_eq!(a.qp.query().unwrap().state, QpState::Rts);
    assert_eq!(b.qp.query().unwrap().state, QpState::Rts);
    // UC cannot be granted READ or atomics: only write rights were passed.
    let acc = a.qp.query().unwrap().access;
    assert!(!acc.contains(Access::REMOTE_READ), "{acc:?}");

    let mut u = side(&ctx, &pd, QpType::Ud, 16);
    let o = opts(&ctx);
    let e = endpoint::local_endpoint(&u.qp, &o, None).unwrap();
    endpoint::connect(&mut u.qp, &e, &e, &o).unwrap();
    let q = u.qp.query().unwrap();
    assert_eq!(q.state, QpState::Rts);
    assert_eq!(q.qkey, o.qkey);
    assert_eq!(q.sq_psn, e.psn);
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn endpoint_exchange_over_loopback_tcp() {
    let ctx = open();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let o = opts(&ctx);
    let server_ctx = ctx.clone();
    let server = std::thread::spawn(move || -> Result<(QpEndpoint, QpEndpoint, QpState)> {
        let pd = Pd::new(&server_ctx)?;
        let mr = Mr::alloc(&pd, 4096, Access::ALL)?;
        let mut s = side(&server_ctx, &pd, QpType::Rc, 16);
        let window = RemoteMr {
            addr: mr.addr(),
            len: mr.len() as u64,
            rkey: mr.rkey(),
        };
        let (l, r) = endpoint::connect_server(
            &mut s.qp,
            &listener,
            &o,
            Some(window),
            Duration::from_secs(20),
        )?;
        Ok((l, r, s.qp.query()?.state))
    });
    let pd = Pd::new(&ctx).unwrap();
    let mut c = side(&ctx, &pd, QpType::Rc, 16);
    let (cl, cr) =
        endpoint::connect_client(&mut c.qp, addr, &o, None, Duration::from_secs(20)).unwrap();
    let (sl, sr, sstate) = server.join().unwrap().unwrap();
    assert_eq!(c.qp.query().unwrap().state, QpState::Rts);
    assert_eq!(sstate, QpState::Rts);
    assert_eq!(cr, sl, "client got the server's endpoint");
    assert_eq!(sr, cl, "server got the client's endpoint");
    let w = cr.mr.expect("the server's window");
    assert_eq!(w.len, 4096);
    assert_eq!(c.qp.query().unwrap().dest_qpn, sl.qpn);
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn wrong_gid_index_is_a_clear_error() {
    let ctx = open();
    let pd = Pd::new(&ctx).unwrap();
    let mut a = side(&ctx, &pd, QpType::Rc, 16);
    let b = side(&ctx, &pd, QpType::Rc, 16);
    let good = opts(&ctx);
    let ea = endpoint::local_endpoint(&a.qp, &good, None).unwrap();
    let eb = endpoint::local_endpoint(&b.qp, &good, None).unwrap();
    let p = ctx.query_port(1).unwrap();
    // Past the end of the table when it is small enough for a u8 index (rxe's has 1024
    // entries: then index 200 is an empty entry inside it).
    let (idx, want) = if p.gid_tbl_len < 200 {
        (p.gid_tbl_len as u8, format!("{} entries", p.gid_tbl_len))
    } else {
        (200u8, "entry is empty".to_string())
    };
    let mut bad = ea;
    bad.gid_index = idx;
    let e = endpoint::connect(&mut a.qp, &bad, &eb, &good).unwrap_err();
    let s = e.to_string();
    assert!(s.contains(&format!("GID index {idx} ")), "{s}");
    assert!(s.contains(&want), "{s}");
    assert!(s.contains("populated:"), "{s}");
    assert!(s.starts_with("ibv_modify_qp(RTR)"), "{s}");
    assert_eq!(
        a.qp.query_state().unwrap(),
        QpState::Init,
        "nothing past INIT was done"
    );
    println!("wrong GID index: {s}");
    // An empty entry inside the table.
    let table = ctx.gid_table(1).unwrap();
    if let Some(empty) = (0..p.gid_tbl_len as u32).find(|i| table.iter().all(|g| g.index != *i)) {
        let mut a2 = side(&ctx, &pd, QpType::Rc, 16);
        let mut bad = endpoint::local_endpoint(&a2.qp, &good, None).unwrap();
        bad.gid_index = empty as u8;
        let s = endpoint::connect(&mut a2.qp, &bad, &eb, &good)
            .unwrap_err()
            .to_string();
        assert!(s.contains("entry is empty"), "{s}");
    }
    // local_endpoint refuses it up front on RoCE.
    if p.link_layer == LinkLayer::Ethernet {
        let o = ConnectOpts {
            gid_index: idx,
            ..good
        };
        let s = endpoint::local_endpoint(&b.qp, &o, None)
            .unwrap_err()
            .to_string();
        assert!(s.contains(&format!("GID index {idx} ")), "{s}");
    }
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn invalid_transition_and_unzeroed_mask_are_clear_errors() {
    let ctx = open();
    let pd = Pd::new(&ctx).unwrap();
    let mut a = side(&ctx, &pd, QpType::Rc, 16);
    let gid = ctx.check_gid_index(1, gid_index(&ctx)).unwrap();
    // RESET → RTR skips INIT.
    let e =
        a.qp.to_rtr(&RtrAttr {
            port: 1,
            dest_qpn: 1,
            rq_psn: 0,
            path_mtu: rdma_direct::endpoint::Mtu::Mtu1024,
            dlid: 0,
            dgid: Some(gid.gid.0),
            sgid_index: gid.index as u8,
            sl: 0,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
        })
        .unwrap_err();
    let s = e.to_string();
    assert!(s.starts_with("ibv_modify_qp(RTR)"), "{s}");
    assert!(
        s.contains("is in RESET") && s.contains("needs INIT first"),
        "{s}"
    );
    println!("invalid transition: {s}");

    // The kernel's own check, through a raw attribute: an address vector left in the mask
    // of RESET → INIT (what unzeroed, reused attributes lead to).
    let mut attr = ffi::ibv_qp_attr::zeroed();
    attr.qp_state = ffi::IBV_QPS_INIT;
    attr.port_num = 1;
    attr.qp_access_flags = ffi::IBV_ACCESS_LOCAL_WRITE;
    let init_mask =
        ffi::IBV_QP_STATE | ffi::IBV_QP_PKEY_INDEX | ffi::IBV_QP_PORT | ffi::IBV_QP_ACCESS_FLAGS;
    let e =
        a.qp.modify_raw(&attr, init_mask | ffi::IBV_QP_AV)
            .unwrap_err();
    assert_eq!(e.errno(), Some(libc::EINVAL), "{e}");
    let s = e.to_string();
    assert!(s.starts_with("ibv_modify_qp(INIT): EINVAL"), "{s}");
    assert!(s.contains("AV not allowed in RESET → INIT on RC"), "{s}");
    println!("unzeroed mask: {s}");
    // A required attribute missing.
    let e =
        a.qp.modify_raw(&attr, init_mask & !ffi::IBV_QP_PORT)
            .unwrap_err();
    let s = e.to_string();
    assert!(s.contains("requires PORT"), "{s}");
    // The right mask works, and the QP is in INIT.
    a.qp.modify_raw(&attr, init_mask).unwrap();
    assert_eq!(a.qp.query_state().unwrap(), QpState::Init);
    // Values out of range are refused before the kernel sees them.
    let e =
        a.qp.to_rts(&rdma_direct::control::RtsAttr {
            sq_psn: 0x100_0000,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic: 1,
        })
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("sq_psn 0x1000000 does not fit 24 bits"),
        "{e}"
    );
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn memlock_limit_gives_enomem_with_hint() {
    if std::env::var(CHILD_ENV).as_deref() == Ok("memlock") {
        // The child: uid 65534 with RLIMIT_MEMLOCK = 64 KiB.
        let ctx = open();
        let pd = Pd::new(&ctx).unwrap();
        let e = Mr::alloc(&pd, 1 << 20, Access::LOCAL_WRITE).unwrap_err();
        assert_eq!(e.errno(), Some(libc::ENOMEM), "{e}");
        let s = e.to_string();
        assert!(s.starts_with("ibv_reg_mr: ENOMEM"), "{s}");
        assert!(s.contains("locked-memory limit is 64 KiB"), "{s}");
        assert!(s.contains("ulimit -l"), "{s}");
        println!("child saw: {s}");
        return;
    }
    use std::os::unix::process::CommandExt;
    let exe = std::env::current_exe().unwrap();
    let mut cmd = std::process::Command::new(&exe);
    cmd.args([
        "--ignored",
        "--exact",
        "memlock_limit_gives_enomem_with_hint",
        "--nocapture",
    ])
    .env(CHILD_ENV, "memlock")
    .env("RDMA_DIRECT_DEVICE", common::device())
    .current_dir("/");
    // SAFETY: the closure only calls setrlimit, which is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 64 << 10,
                rlim_max: 64 << 10,
            };
            if libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    // SAFETY: getuid has no preconditions.
    if unsafe { libc::getuid() } == 0 {
        cmd.uid(65534).gid(65534);
    }
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("spawning {} as uid 65534: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "child (uid 65534, memlock 64 KiB) failed — is {} executable by nobody and \
         /dev/infiniband/uverbs* world-accessible?\n{stdout}\n{}",
        exe.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("child saw: ibv_reg_mr: ENOMEM"), "{stdout}");
    for l in stdout.lines().filter(|l| l.starts_with("child saw:")) {
        println!("memlock (uid 65534, 64 KiB): {l}");
    }
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn cq_overrun_shows_up_as_an_async_event() {
    let ctx = open();
    assert_eq!(
        ctx.poll_async_event().unwrap(),
        None,
        "a fresh context has no event"
    );
    let pd = Pd::new(&ctx).unwrap();
    let small = Cq::new(&ctx, 1).unwrap();
    let big = Cq::new(&ctx, 256).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = Qp::new(&pd, &small, &small, None, &cfg).unwrap();
    let mut b = Qp::new(&pd, &big, &big, None, &cfg).unwrap();
    connect_pair(&ctx, &mut a, &mut b);
    let mr = Mr::alloc(&pd, 4096, Access::LOCAL_WRITE).unwrap();
    let n = small.cqe() as usize + 4;
    for i in 0..n {
        post_recv(&b, &mr, 2048, 64, i as u64);
    }
    for i in 0..n {
        assert_eq!(post_send(&a, &mr, 0, 8, i as u64), 0);
    }
    // Every send completes at b; a's CQ holds only `cqe` of the signaled completions.
    for _ in 0..n {
        assert_eq!(
            poll_one(&big, Duration::from_secs(10)).status,
            ffi::IBV_WC_SUCCESS
        );
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut seen = None;
    while Instant::now() < deadline && seen.is_none() {
        match ctx.poll_async_event().unwrap() {
            Some(ev) if ev.kind == AsyncEventKind::CqErr => seen = Some(ev),
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    let ev = seen.expect("IBV_EVENT_CQ_ERR after overrunning the send CQ");
    assert_eq!(ev.element, AsyncElement::Cq(small.as_ptr() as usize));
}

#[test]
#[ignore = "needs an RDMA device (RDMA_DIRECT_DEVICE); run in the rxe guest"]
fn mlx5dv_view_only_on_mlx5_devices() {
    let ctx = open();
    let pd = Pd::new(&ctx).unwrap();
    let cq = Cq::new(&ctx, 64).unwrap();
    let qp = Qp::new(&pd, &cq, &cq, None, &QpConfig::new(QpType::Rc)).unwrap();
    let srq = Srq::new(&pd, 16, 1).unwrap();
    if ctx.is_mlx5() {
        let q = qp.mlx5dv().unwrap();
        assert_eq!(q.sq.stride, 64);
        assert!(q.sq.wqe_cnt.is_power_of_two() && !q.dbrec.is_null());
        let c = cq.mlx5dv().unwrap();
        assert!(c.cqe_size == 64 || c.cqe_size == 128);
        assert!(c.cqe_cnt.is_power_of_two() && c.cqe_cnt >= 64);
        assert!(!srq.mlx5dv().unwrap().buf.is_null());
    } else {
        for r in [
            qp.mlx5dv().map(|_| ()),
            cq.mlx5dv().map(|_| ()),
            srq.mlx5dv().map(|_| ()),
        ] {
            match r {
                Err(Error::Unsupported { what }) => {
                    assert!(what.contains("not an mlx5 device"), "{what}")
                }
                Err(Error::LibraryMissing { .. }) => {}
                other => panic!("mlx5dv on {}: {other:?}", ctx.name()),
            }
        }
    }
}
