//! Several sim devices in one process: each is its own fabric port, so the QPNs and GIDs
//! they hand out are distinct, and an endpoint of one device cannot be connected to a QP of
//! another (the devices share no memory: such a connection used to loop back silently to
//! the local QP that happened to have the remote's QPN).

use rdma_direct::providers::sim::SimDevice;
use rdma_direct::providers::{ConnectOpts, Provider, QpConfig, QpEndpoint, QpType};

use rdma_direct::providers::sim::{SimCq, SimQp};

/// A QP (with its CQ) on `dev` and its endpoint.
fn endpoint_of(dev: &mut SimDevice, t: QpType) -> (SimQp, SimCq, QpEndpoint) {
    let pd = dev.alloc_pd().unwrap();
    // Room for the default QP's queues (128 sends + 128 receives).
    let mut cq = dev.create_cq(256).unwrap();
    let qp = dev
        .create_qp(&pd, &mut cq, None, None, &QpConfig::new(t))
        .unwrap();
    let e = dev.endpoint(&qp, &ConnectOpts::default()).unwrap();
    (qp, cq, e)
}

#[test]
fn two_devices_hand_out_distinct_qpns_and_gids() {
    let mut d1 = SimDevice::new();
    let mut d2 = SimDevice::new();
    let (_q1, _c1, e1) = endpoint_of(&mut d1, QpType::Rc);
    let (_q2, _c2, e2) = endpoint_of(&mut d2, QpType::Rc);
    assert_ne!(e1.qpn, e2.qpn, "first QPNs of two devices");
    assert_ne!(e1.gid, e2.gid, "GIDs of two devices");
    // Each GID is `fd73:696d::` with this process's id and the device's number.
    let pid = std::process::id().to_be_bytes();
    for e in [&e1, &e2] {
        assert_eq!(
            e.gid[..8],
            [0xfd, 0x73, 0x69, 0x6d, 0, 0, 0, 0],
            "{:?}",
            e.gid
        );
        assert_eq!(e.gid[8..12], pid, "the process id");
    }
    assert_eq!(e1.gid, d1.gid());
    assert_eq!(e2.gid, d2.gid());
}

#[test]
fn connecting_to_another_devices_endpoint_is_refused() {
    let mut d1 = SimDevice::new();
    let mut d2 = SimDevice::new();
    let (mut q1, _c1, e1) = endpoint_of(&mut d1, QpType::Rc);
    let (_q2, _c2, e2) = endpoint_of(&mut d2, QpType::Rc);
    let err = d1
        .connect(&mut q1, &e1, &e2, &ConnectOpts::default())
        .expect_err("an endpoint of another sim device");
    let msg = err.to_string();
    assert!(msg.contains("another sim device"), "{msg}");
    // A UD address handle to another device is refused the same way.
    let pd = d1.alloc_pd().unwrap();
    let err = d1
        .create_ah(&pd, &e2, &ConnectOpts::default())
        .expect_err("an address handle to another sim device");
    assert!(err.to_string().contains("another sim device"), "{err}");
    // The device's own endpoints still connect.
    let (mut q3, _c3, e3) = endpoint_of(&mut d1, QpType::Rc);
    d1.connect(&mut q1, &e1, &e3, &ConnectOpts::default())
        .unwrap();
    d1.connect(&mut q3, &e3, &e1, &ConnectOpts::default())
        .unwrap();
}
