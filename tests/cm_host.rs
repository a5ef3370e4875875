//! Connecting by address (`rdma_direct::cm`) on a host without an RDMA device: every path
//! that can fail before the CM talks to a device ends in a clear error, never a panic or a
//! hang. (The connections themselves run in the guest: tests/guest/.)

use rdma_direct::cm;
use rdma_direct::prelude::*;
use std::time::{Duration, Instant};

fn sim_qp(t: QpType) -> (SimDevice, <SimDevice as Provider>::Qp) {
    let mut dev = SimDevice::new();
    let pd = dev.alloc_pd().unwrap();
    let mut cq = dev.create_cq(256).unwrap();
    let qp = dev
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(t))
        .unwrap();
    (dev, qp)
}

#[test]
fn a_ud_qp_is_refused_naming_rc() {
    let (mut dev, mut qp) = sim_qp(QpType::Ud);
    let e = cm::connect(
        &mut dev,
        &mut qp,
        "127.0.0.1:7471",
        &ConnectOpts::default(),
        None,
        Duration::from_secs(1),
    )
    .unwrap_err();
    assert!(matches!(e, Error::Unsupported { .. }), "{e}");
    let s = e.to_string();
    assert!(s.contains("RC QPs") && s.contains("127.0.0.1:7471"), "{s}");
}

#[test]
fn an_unresolvable_address_is_named() {
    let (mut dev, mut qp) = sim_qp(QpType::Rc);
    let e = cm::connect(
        &mut dev,
        &mut qp,
        "no-such-host.invalid:7471",
        &ConnectOpts::default(),
        None,
        Duration::from_secs(1),
    )
    .unwrap_err();
    let s = e.to_string();
    assert!(
        s.contains("rdma_cm connect") && s.contains("resolving the address"),
        "{s}"
    );
    let e = cm::Listener::bind("no-such-host.invalid:7471").unwrap_err();
    assert!(e.to_string().contains("rdma_cm listen"), "{e}");
}

#[test]
fn without_an_rdma_device_the_cm_error_names_the_call_and_returns_at_once() {
    // No /dev/infiniband/rdma_cm on the host: librdmacm (if installed) cannot open a
    // channel; without librdmacm the load fails naming the package.
    let (mut dev, mut qp) = sim_qp(QpType::Rc);
    let t0 = Instant::now();
    let r = cm::connect(
        &mut dev,
        &mut qp,
        "127.0.0.1:7471",
        &ConnectOpts::default(),
        None,
        Duration::from_secs(5),
    );
    let e = match r {
        Err(e) => e,
        Ok(_) if std::path::Path::new("/dev/infiniband/rdma_cm").exists() => {
            println!("skipped: this host has an RDMA CM device");
            return;
        }
        Ok(c) => panic!("connected without a device: {c:?}"),
    };
    assert!(
        t0.elapsed() < Duration::from_secs(5),
        "waited for the deadline"
    );
    let s = e.to_string();
    assert!(
        s.contains("rdma_create_event_channel") || s.contains("librdmacm1") || s.contains("sim0"),
        "{s}"
    );
    let e = cm::Listener::bind("127.0.0.1:7471")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("rdma_create_event_channel")
            || e.contains("rdma_bind_addr")
            || e.contains("librdmacm1"),
        "{e}"
    );
}
