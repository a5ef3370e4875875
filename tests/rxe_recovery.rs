//! Device test of a failed bring-up on the verbs provider (run in the guest on rxe0):
//! `connect_qp_server` / `connect_qp_client` whose sync fails (the peer closes, sends a wrong
//! sync byte, or stays silent) leave the QP in ERR, never connected, as on the sim
//! (`tests/recovery.rs`).

mod common;

use std::io::Write;
use std::net::TcpListener;
use std::time::Duration;

use rdma_direct::endpoint::{
    connect_qp_client, connect_qp_server, exchange_client, exchange_server,
};
use rdma_direct::providers::verbs::{VerbsCq, VerbsDevice, VerbsQp};
use rdma_direct::providers::{
    ConnectOpts, PostError, Provider, QpConfig, QpState, QpType, QueuePair, SendQueue, SendWr,
};

#[derive(Clone, Copy, Debug)]
enum Hostile {
    Closes,
    WrongSync,
    Silent,
}

struct Bed {
    // Drop order: QPs, CQs, device.
    qp: VerbsQp,
    _peer: VerbsQp,
    _cq: VerbsCq,
    _pcq: VerbsCq,
    p: VerbsDevice,
    opts: ConnectOpts,
    peer_ep: rdma_direct::endpoint::QpEndpoint,
}

fn bed() -> Bed {
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
    let pd = p.alloc_pd().unwrap();
    let mut cq = p.create_cq(256).unwrap();
    let mut pcq = p.create_cq(256).unwrap();
    let cfg = QpConfig::new(QpType::Rc);
    let qp = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let peer = p.create_qp(&pd, &mut pcq, None, None, &cfg).unwrap();
    let peer_ep = p.endpoint(&peer, &opts).unwrap();
    Bed {
        qp,
        _peer: peer,
        _cq: cq,
        _pcq: pcq,
        p,
        opts,
        peer_ep,
    }
}

fn behave(mut s: std::net::TcpStream, how: Hostile, done: std::sync::mpsc::Receiver<()>) {
    match how {
        Hostile::Closes => drop(s),
        Hostile::WrongSync => {
            s.write_all(b"X").unwrap();
            let _ = done.recv();
        }
        Hostile::Silent => {
            let _ = done.recv();
        }
    }
}

fn not_connected(b: &mut Bed, how: Hostile, e: &rdma_direct::Error) {
    let st = b.qp.state();
    assert!(
        matches!(st, QpState::Reset | QpState::Err),
        "{how:?}: the QP is left {st} after `{e}`"
    );
    let r = b.qp.sq().post(SendWr::send(1, &[]).signaled());
    assert_eq!(
        r.map_err(|r| r.error),
        Err(PostError::BadState { state: st }),
        "{how:?}"
    );
}

const ALL: [Hostile; 3] = [Hostile::Closes, Hostile::WrongSync, Hostile::Silent];

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn rxe_a_failed_sync_on_the_server_leaves_no_connected_qp() {
    for how in ALL {
        let mut b = bed();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let ep = b.peer_ep;
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let (_, s) = exchange_client(addr, &ep, Duration::from_secs(20)).unwrap();
            behave(s, how, rx);
        });
        let e = connect_qp_server(
            &mut b.p,
            &mut b.qp,
            &l,
            &b.opts,
            None,
            Duration::from_secs(2),
        )
        .unwrap_err();
        let _ = tx.send(());
        t.join().unwrap();
        not_connected(&mut b, how, &e);
    }
}

#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn rxe_a_failed_sync_on_the_client_leaves_no_connected_qp() {
    for how in ALL {
        let mut b = bed();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let ep = b.peer_ep;
        let (tx, rx) = std::sync::mpsc::channel();
        let t = std::thread::spawn(move || {
            let (_, s) = exchange_server(&l, &ep, Duration::from_secs(20)).unwrap();
            behave(s, how, rx);
        });
        let e = connect_qp_client(
            &mut b.p,
            &mut b.qp,
            addr,
            &b.opts,
            None,
            Duration::from_secs(2),
        )
        .unwrap_err();
        let _ = tx.send(());
        t.join().unwrap();
        not_connected(&mut b, how, &e);
    }
}
