//! Connecting by address on a device (`rdma_direct::cm`), both ends in this process over an
//! address of one device: the windows travel in the private data and are written both ways
//! byte for byte, the peer's disconnect moves the QP to ERR and is reported, a connect without
//! a listener is rejected naming it, an address with no route fails naming it, and an address
//! on another device than the QP's is refused.
//!
//! `#[ignore]`d device test (tests/common/mod.rs), one test running the cases in turn. With
//! `RDMA_DIRECT_CM_ADDR` it uses that address and `RDMA_DIRECT_DEVICE`. Without it (the
//! guest's test run) it makes its own bed and removes it afterwards: the CM cannot route
//! 127.0.0.1 (nor another address on `lo`) over the guest's rxe0 on `lo` (rdma_resolve_route
//! fails with ENODEV), so it loads `rdma_ucm` and `veth`, puts 198.51.100.11/24 on a veth end and
//! an rxe device (`rxe_cmt`) on it, and both ends use that device and address. The bed is removed once the
//! process has exited (librdmacm holds every device open until then).

mod common;

use rdma_direct::cm;
use rdma_direct::prelude::*;
use std::io::ErrorKind;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

/// Runs `cmd`, saying what it did.
fn sh(cmd: &[&str]) -> bool {
    let st = std::process::Command::new(cmd[0]).args(&cmd[1..]).status();
    println!("{}: {st:?}", cmd.join(" "));
    st.is_ok_and(|s| s.success())
}

/// The device and address to use; what was made for them is removed on drop.
struct Bed {
    dev: String,
    addr: String,
    made: bool,
    /// rdma_ucm was loaded here (unloaded after exit: the rest of the guest run is faster
    /// without it).
    loaded_ucm: bool,
}

impl Bed {
    fn new() -> Bed {
        let loaded_ucm = !std::path::Path::new("/dev/infiniband/rdma_cm").exists()
            && sh(&["modprobe", "rdma_ucm"]);
        if let Ok(a) = std::env::var("RDMA_DIRECT_CM_ADDR") {
            return Bed {
                dev: common::device(),
                addr: a,
                made: false,
                loaded_ucm,
            };
        }
        common::device(); // fails the test, saying why, without a device at all
        let ip = "/usr/bin/ip";
        let ok = sh(&["modprobe", "veth"])
            && sh(&[
                ip, "link", "add", "vth_t", "type", "veth", "peer", "name", "vth_u",
            ])
            && sh(&[ip, "link", "set", "vth_t", "up"])
            && sh(&[ip, "link", "set", "vth_u", "up"])
            && sh(&[ip, "addr", "add", "198.51.100.11/24", "dev", "vth_t"])
            && sh(&[
                "/usr/bin/rdma",
                "link",
                "add",
                "rxe_cmt",
                "type",
                "rxe",
                "netdev",
                "vth_t",
            ]);
        let bed = Bed {
            dev: "rxe_cmt".into(),
            addr: "198.51.100.11".into(),
            made: true,
            loaded_ucm,
        };
        assert!(
            ok,
            "could not make the veth + rxe bed (see the commands above)"
        );
        let want = "0000:0000:0000:0000:0000:ffff:c633:640b";
        let t0 = Instant::now();
        loop {
            let found = std::fs::read_dir("/sys/class/infiniband/rxe_cmt/ports/1/gids")
                .into_iter()
                .flatten()
                .flatten()
                .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|g| g.trim() == want));
            if found {
                return bed;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "rxe_cmt never got the GID of 198.51.100.11"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Bed {
    /// Removes the bed once this process has exited: librdmacm keeps a context of every
    /// device open for the life of the process, and deleting rxe_cmt waits for it, so a
    /// deletion from here would never return.
    fn drop(&mut self) {
        if self.made || self.loaded_ucm {
            let mut script = format!(
                "while kill -0 {} 2>/dev/null; do usleep 100000; done;",
                std::process::id()
            );
            if self.made {
                script += " /usr/bin/rdma link delete rxe_cmt; /usr/bin/ip link delete vth_t;";
            }
            if self.loaded_ucm {
                script += " rmmod rdma_ucm;";
            }
            let r = std::process::Command::new("sh")
                .args(["-c", &script])
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
            println!("bed removal after exit: {:?}", r.map(|c| c.id()));
        }
    }
}

fn port(k: u16) -> u16 {
    20000 + (std::process::id() % 5000) as u16 * 4 + k
}

struct Side {
    dev: VerbsDevice,
    buf: RegisteredBuf<<VerbsDevice as Provider>::Mr>,
    cq: <VerbsDevice as Provider>::Cq,
    qp: <VerbsDevice as Provider>::Qp,
}

fn side(dev: &str) -> Side {
    let mut dev = VerbsDevice::open(dev).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let mut cq = dev.create_cq(256).unwrap();
    let qp = dev
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    Side { dev, buf, cq, qp }
}

/// RDMA WRITE `what` into `to` at offset 0, signaled; waits for its completion.
fn write(s: &mut Side, to: RemoteMr, what: &[u8]) {
    s.buf.get_mut(0, what.len()).unwrap().copy_from_slice(what);
    let sge = [s.buf.sge(0, what.len()).unwrap()];
    let wr = SendWr::write(7, &sge, to.addr, to.rkey).signaled();
    s.qp.sq().post(wr).map_err(|r| r.error).unwrap();
    s.qp.sq().ring();
    let mut wc = [Completion::EMPTY; 4];
    let t0 = Instant::now();
    loop {
        if s.cq.poll(&mut wc) > 0 {
            assert!(wc[0].is_ok(), "write completion {:?}", wc[0]);
            return;
        }
        assert!(t0.elapsed() < T, "no completion for the RDMA WRITE");
    }
}

/// Waits until `s.buf` at 2048 holds `what`.
fn wait_for(s: &Side, what: &[u8]) {
    let t0 = Instant::now();
    while s.buf.get(2048, what.len()).unwrap() != what {
        assert!(t0.elapsed() < T, "the peer's bytes never arrived");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
#[ignore]
fn rdma_cm_on_a_device() {
    let bed = Bed::new();
    println!("device {}, address {}", bed.dev, bed.addr);
    rc_by_address_windows_both_ways_then_the_peers_disconnect_is_reported(&bed);
    a_connect_without_a_listener_is_rejected_naming_it(&bed);
    an_address_without_a_route_fails_naming_it_before_the_deadline(&bed);
    an_address_on_another_device_than_the_qps_is_refused(&bed);
}

fn rc_by_address_windows_both_ways_then_the_peers_disconnect_is_reported(bed: &Bed) {
    let p = port(0);
    let mut listener = cm::Listener::bind((bed.addr.as_str(), p)).unwrap();
    let dev = bed.dev.clone();
    let server = std::thread::spawn(move || {
        let mut s = side(&dev);
        let share = s.buf.remote(2048, 2048).unwrap();
        let opts = ConnectOpts::default();
        let conn = listener
            .accept(&mut s.dev, &mut s.qp, &opts, Some(share), T)
            .unwrap();
        assert_eq!(s.qp.state(), QpState::Rts);
        let theirs = conn.remote_mr().expect("the client shared a window");
        wait_for(&s, b"from the client");
        write(&mut s, theirs, b"from the server");
        // The client disconnects: check() reports it and the QP is in ERR.
        let mut conn = conn;
        let t0 = Instant::now();
        let e = loop {
            match conn.check(&mut s.dev, &mut s.qp) {
                Ok(()) => {
                    assert!(t0.elapsed() < T, "the client's disconnect was never seen");
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => break e,
            }
        };
        assert!(
            matches!(
                e,
                Error::Io {
                    kind: ErrorKind::ConnectionReset,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("DISCONNECTED"), "{e}");
        assert!(conn.is_disconnected());
        assert_eq!(s.qp.state(), QpState::Err);
        println!("server: {e}");
    });
    let mut c = side(&bed.dev);
    let share = c.buf.remote(2048, 2048).unwrap();
    let conn = cm::connect(
        &mut c.dev,
        &mut c.qp,
        (bed.addr.as_str(), p),
        &ConnectOpts::default(),
        Some(share),
        T,
    )
    .unwrap();
    assert_eq!(c.qp.state(), QpState::Rts);
    assert_eq!(conn.remote.qpn & 0xff_ffff, conn.remote.qpn);
    assert_eq!(conn.local.qpn, c.qp.qpn());
    let theirs = conn.remote_mr().expect("the server shared a window");
    assert_eq!(theirs.len, 2048);
    println!(
        "client: local {:?}\nclient: remote {:?}",
        conn.local, conn.remote
    );
    write(&mut c, theirs, b"from the client");
    wait_for(&c, b"from the server");
    conn.disconnect(&mut c.dev, &mut c.qp, T).unwrap();
    assert_eq!(c.qp.state(), QpState::Err);
    server.join().unwrap();
}

fn a_connect_without_a_listener_is_rejected_naming_it(bed: &Bed) {
    let mut c = side(&bed.dev);
    let t0 = Instant::now();
    let e = cm::connect(
        &mut c.dev,
        &mut c.qp,
        (bed.addr.as_str(), port(1)),
        &ConnectOpts::default(),
        None,
        T,
    )
    .unwrap_err();
    println!("{e} ({:.2} s)", t0.elapsed().as_secs_f64());
    assert!(
        matches!(
            e,
            Error::Io {
                kind: ErrorKind::ConnectionRefused,
                ..
            }
        ),
        "{e}"
    );
    let s = e.to_string();
    assert!(s.contains("REJECTED") && s.contains("no listener"), "{s}");
    assert!(t0.elapsed() < T);
}

fn an_address_without_a_route_fails_naming_it_before_the_deadline(bed: &Bed) {
    let mut c = side(&bed.dev);
    let t0 = Instant::now();
    let e = cm::connect(
        &mut c.dev,
        &mut c.qp,
        "10.255.255.1:7471",
        &ConnectOpts::default(),
        None,
        Duration::from_secs(5),
    )
    .unwrap_err();
    println!("{e} ({:.2} s)", t0.elapsed().as_secs_f64());
    let s = e.to_string();
    assert!(
        s.contains("rdma_cm connect to 10.255.255.1:7471") || s.contains("rdma_resolve_addr"),
        "{s}"
    );
    assert!(t0.elapsed() < Duration::from_secs(6));
}

fn an_address_on_another_device_than_the_qps_is_refused(bed: &Bed) {
    // The sim's QP cannot be connected through rxe0's address.
    let p = port(2);
    let _listener = cm::Listener::bind((bed.addr.as_str(), p)).unwrap();
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut cq = dev.create_cq(256).unwrap();
    let mut qp = dev
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
        .unwrap();
    let e = cm::connect(
        &mut dev,
        &mut qp,
        (bed.addr.as_str(), p),
        &ConnectOpts::default(),
        None,
        T,
    )
    .unwrap_err();
    println!("{e}");
    let s = e.to_string();
    assert!(
        s.contains("the QP is on sim0") && s.contains(&bed.dev),
        "{s}"
    );
}
