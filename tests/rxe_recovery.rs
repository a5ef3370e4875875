//! Device tests of recovery on the verbs provider (run in the guest on rxe0):
//! - `connect_qp_server` / `connect_qp_client` whose sync fails (the peer closes, sends a wrong
//!   sync byte, or stays silent) leave the QP in ERR, never connected, as on the sim
//!   (`tests/recovery.rs`);
//! - a QP that failed reconnects through RESET once its requests have ended (a reconnect with
//!   requests still outstanding is refused, naming them), and carries data again byte for
//!   byte;
//! - receives posted after the device failed a QP, before its error completion was polled
//!   (rxe 6.1 does not flush them), are flushed by `to_error`;
//! - a QP dropped with completions still in its CQ: they are not returned, and the entries
//!   they held come back once the CQ polls empty (a new QP on the CQ fills it whole).

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

mod reconnect {
    use rdma_direct::prelude::*;
    use std::time::Duration;

    /// One SEND of 64 bytes of `tag` from `a` to `b`, both completions checked and the bytes
    /// compared.
    #[allow(clippy::too_many_arguments)]
    fn round(
        p: &mut VerbsDevice,
        mem: &mut RegisteredBuf<<VerbsDevice as Provider>::Mr>,
        a: &mut <VerbsDevice as Provider>::Qp,
        b: &mut <VerbsDevice as Provider>::Qp,
        ca: &mut <VerbsDevice as Provider>::Cq,
        cb: &mut <VerbsDevice as Provider>::Cq,
        tag: u8,
    ) {
        mem.get_mut(0, 64).unwrap().fill(tag);
        mem.get_mut(64, 64).unwrap().fill(0);
        let into = [mem.sge(64, 64).unwrap()];
        b.rq().post_recv(RecvWr::new(7, &into)).unwrap();
        b.rq().ring();
        let from = [mem.sge(0, 64).unwrap()];
        a.sq().post(SendWr::send(1, &from).signaled()).unwrap();
        a.sq().ring();
        let mut wc = [Completion::EMPTY];
        for cq in [ca, cb] {
            poll_wait(p, cq, &mut wc, Duration::from_secs(10)).unwrap();
            wc[0].check().unwrap();
        }
        assert_eq!(mem.get(64, 64).unwrap(), &[tag; 64][..]);
    }

    #[test]
    #[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
    fn rxe_a_failed_qp_reconnects_once_its_requests_ended() {
        let dev = super::common::device();
        let mut p = VerbsDevice::open(&dev).unwrap_or_else(|e| panic!("open {dev}: {e}"));
        let gid_index =
            super::common::gid_index().unwrap_or_else(|| p.context().default_gid_index(1).unwrap());
        let opts = ConnectOpts {
            gid_index,
            ..ConnectOpts::default()
        };
        let pd = p.alloc_pd().unwrap();
        let mut mem = p.alloc_buf(&pd, 4096, Access::ALL, Pages::Normal).unwrap();
        let mut cfg = QpConfig::new(QpType::Rc);
        (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (4, 4);
        let (mut ca, mut cb) = (p.create_cq(8).unwrap(), p.create_cq(8).unwrap());
        let mut a = p.create_qp(&pd, &mut ca, None, None, &cfg).unwrap();
        let mut b = p.create_qp(&pd, &mut cb, None, None, &cfg).unwrap();
        connect_pair(&mut p, &mut a, &mut b, &opts).unwrap();
        round(&mut p, &mut mem, &mut a, &mut b, &mut ca, &mut cb, 0x11);

        // b fails with two receives outstanding: a reconnect is refused until they ended.
        for i in 0..2 {
            b.rq().post_recv(RecvWr::new(100 + i, &[])).unwrap();
        }
        b.rq().ring();
        p.to_error(&mut b).unwrap();
        let (ea, eb) = (
            p.endpoint(&a, &opts).unwrap(),
            p.endpoint(&b, &opts).unwrap(),
        );
        let e = p.connect(&mut b, &eb, &ea, &opts).unwrap_err().to_string();
        assert!(
            e.starts_with("connect: ")
                && e.contains("in ERR with 0 sends and 2 receives outstanding"),
            "{e}"
        );
        assert_eq!(b.state(), QpState::Err);
        let mut flushed = Vec::new();
        drain(&mut p, &mut cb, 2, Duration::from_secs(10), |c| {
            flushed.push((c.wr_id, c.status))
        })
        .unwrap();
        flushed.sort_unstable_by_key(|f| f.0);
        assert_eq!(
            flushed,
            [(100, WcStatus::WrFlushErr), (101, WcStatus::WrFlushErr)]
        );

        // Both reconnect through RESET (a from RTS with nothing outstanding, b from ERR)
        // and carry data again; nothing of the old connection comes out of the CQs.
        let (ea, eb) = (
            p.endpoint(&a, &opts).unwrap(),
            p.endpoint(&b, &opts).unwrap(),
        );
        p.connect(&mut a, &ea, &eb, &opts).unwrap();
        p.connect(&mut b, &eb, &ea, &opts).unwrap();
        assert_eq!((a.state(), b.state()), (QpState::Rts, QpState::Rts));
        for tag in [0x22, 0x33, 0x44] {
            round(&mut p, &mut mem, &mut a, &mut b, &mut ca, &mut cb, tag);
        }
        let mut wc = [Completion::EMPTY; 4];
        assert_eq!((ca.poll(&mut wc), cb.poll(&mut wc)), (0, 0));
    }

    #[test]
    #[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
    fn rxe_a_dropped_qp_leaves_nothing_in_its_cq() {
        let dev = super::common::device();
        let mut p = VerbsDevice::open(&dev).unwrap_or_else(|e| panic!("open {dev}: {e}"));
        let gid_index =
            super::common::gid_index().unwrap_or_else(|| p.context().default_gid_index(1).unwrap());
        let opts = ConnectOpts {
            gid_index,
            ..ConnectOpts::default()
        };
        let pd = p.alloc_pd().unwrap();
        let mut mem = p.alloc_buf(&pd, 4096, Access::ALL, Pages::Normal).unwrap();
        let mut cfg = QpConfig::new(QpType::Rc);
        (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (4, 4);
        let (mut ca, mut cb) = (p.create_cq(8).unwrap(), p.create_cq(8).unwrap());
        let mut a = p.create_qp(&pd, &mut ca, None, None, &cfg).unwrap();
        let mut b = p.create_qp(&pd, &mut cb, None, None, &cfg).unwrap();
        connect_pair(&mut p, &mut a, &mut b, &opts).unwrap();
        // b fails with 4 receives outstanding; their flushes reach cb; b is dropped unpolled.
        for i in 0..4 {
            b.rq().post_recv(RecvWr::new(200 + i, &[])).unwrap();
        }
        b.rq().ring();
        p.to_error(&mut b).unwrap();
        std::thread::sleep(Duration::from_millis(200));
        drop(b);
        assert_eq!(
            cb.reserved(),
            4,
            "the dropped QP's entries stay reserved until a poll"
        );
        // A new QP on the same CQ: its 4 receives fit beside the 4 reserved.
        let mut b2 = p.create_qp(&pd, &mut cb, None, None, &cfg).unwrap();
        let (ea, e2) = (
            p.endpoint(&a, &opts).unwrap(),
            p.endpoint(&b2, &opts).unwrap(),
        );
        p.connect(&mut b2, &e2, &ea, &opts).unwrap();
        p.to_error(&mut a).unwrap();
        let mut wc = [Completion::EMPTY; 8];
        // Nothing of the dropped QP comes out; the empty poll gives its entries back.
        assert_eq!(cb.poll(&mut wc), 0, "{:?}", &wc[..1]);
        assert_eq!(cb.reserved(), 0);
        assert_eq!(ca.poll(&mut wc), 0);
        p.connect(&mut a, &ea, &e2, &opts).unwrap();
        for tag in [0x55, 0x66, 0x77, 0x88, 0x99] {
            round(&mut p, &mut mem, &mut a, &mut b2, &mut ca, &mut cb, tag);
        }
        assert_eq!((ca.poll(&mut wc), cb.poll(&mut wc)), (0, 0));
    }

    #[test]
    #[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
    fn rxe_receives_posted_after_the_device_failed_the_qp_are_flushed_by_to_error() {
        let dev = super::common::device();
        let mut p = VerbsDevice::open(&dev).unwrap_or_else(|e| panic!("open {dev}: {e}"));
        let gid_index =
            super::common::gid_index().unwrap_or_else(|| p.context().default_gid_index(1).unwrap());
        let opts = ConnectOpts {
            gid_index,
            ..ConnectOpts::default()
        };
        let pd = p.alloc_pd().unwrap();
        let mem = p.alloc_buf(&pd, 4096, Access::ALL, Pages::Normal).unwrap();
        let mut cfg = QpConfig::new(QpType::Rc);
        (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (4, 4);
        let (mut ca, mut cb) = (p.create_cq(8).unwrap(), p.create_cq(8).unwrap());
        let mut a = p.create_qp(&pd, &mut ca, None, None, &cfg).unwrap();
        let mut b = p.create_qp(&pd, &mut cb, None, None, &cfg).unwrap();
        connect_pair(&mut p, &mut a, &mut b, &opts).unwrap();
        // A WRITE with a wrong rkey: the responder refuses it, the device fails a.
        let win = mem.remote(0, 64).unwrap();
        let from = [mem.sge(64, 64).unwrap()];
        a.sq()
            .post(SendWr::write(1, &from, win.addr, win.rkey ^ 0x5a5a).signaled())
            .unwrap();
        a.sq().ring();
        std::thread::sleep(Duration::from_millis(500));
        // Not polled yet: the provider still takes receives, which rxe 6.1 never flushes.
        for i in 0..2 {
            a.rq().post_recv(RecvWr::new(100 + i, &[])).unwrap();
        }
        a.rq().ring();
        let mut wc = [Completion::EMPTY; 4];
        let n = poll_wait(&mut p, &mut ca, &mut wc, Duration::from_secs(10)).unwrap();
        assert_eq!(
            (wc[0].wr_id, wc[0].status),
            (1, WcStatus::RemAccessErr),
            "{:?}",
            &wc[..n]
        );
        assert_eq!(n, 1, "{:?}", &wc[..n]);
        assert_eq!(a.state(), QpState::Err);
        // rxe 6.1 leaves them: nothing more comes on its own.
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(500) {
            let n = ca.poll(&mut wc);
            assert_eq!(n, 0, "rxe flushed on its own: {:?}", &wc[..n]);
        }
        let mut late = Vec::new();
        // ERR to ERR runs rxe's flush again: both receives come back.
        p.to_error(&mut a).unwrap();
        drain(
            &mut p,
            &mut ca,
            2 - late.len(),
            Duration::from_secs(10),
            |c| late.push((c.wr_id, c.status)),
        )
        .unwrap();
        late.sort_unstable_by_key(|f| f.0);
        assert_eq!(
            late,
            [(100, WcStatus::WrFlushErr), (101, WcStatus::WrFlushErr)]
        );
    }
}

/// A dropped peer QP, with the default `ConnectOpts` (retry_cnt 6: rxe retries forever at
/// 7): a signaled WRITE ends in RETRY_EXC_ERR, the one after it is flushed, and the recovery
/// helper drains, lists the flushed one and reconnects to a new peer that takes the WRITE.
/// The error must come within ten times `retry_budget` (0.47 s with the defaults): a
/// liveness limit that tells a finite retry count from rxe's endless one, not a speed test
/// (the time measured is printed beside the bound).
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn rxe_a_dropped_peer_ends_in_retry_exc_with_the_defaults_and_recovers() {
    use rdma_direct::prelude::{
        Access, Completion, CompletionQueue, LinkQueues, Pages, Recovery, WcStatus,
    };
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
    assert_eq!(opts.retry_cnt, 6);
    let pd = p.alloc_pd().unwrap();
    let buf = p.alloc_buf(&pd, 4096, Access::ALL, Pages::Normal).unwrap();
    let dst = buf.remote(0, 4096).unwrap();
    let (mut cq, mut pcq) = (p.create_cq(256).unwrap(), p.create_cq(256).unwrap());
    let cfg = QpConfig::new(QpType::Rc);
    let mut a = p.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    let mut b = p.create_qp(&pd, &mut pcq, None, None, &cfg).unwrap();
    rdma_direct::providers::flow::connect_pair(&mut p, &mut a, &mut b, &opts).unwrap();
    let mut window = Recovery::send_window(&a);
    let mut rec = Recovery::new(&window, Duration::from_secs(30));
    drop(b);
    let write = |id: u64| SendWr::write(id, &[], dst.addr, dst.rkey).inline(b"order");
    a.sq().post_and_ring(write(1).signaled()).unwrap();
    a.sq().post_and_ring(write(2).signaled()).unwrap();
    window.posted(2);
    let mut wc = [Completion::EMPTY];
    let t = std::time::Instant::now();
    let limit = 10 * opts.retry_budget();
    while cq.poll(&mut wc) == 0 {
        assert!(
            t.elapsed() < limit,
            "no completion after {limit:?}: the dead peer went unnoticed (retrying forever?)"
        );
        std::thread::yield_now();
    }
    println!(
        "dead peer noticed in {:.3} s (bound: retry_budget {:.3} s)",
        t.elapsed().as_secs_f64(),
        opts.retry_budget().as_secs_f64()
    );
    window.retire(&wc[0]);
    assert_eq!((wc[0].wr_id, wc[0].status), (1, WcStatus::RetryExcErr));
    let mut b2 = p.create_qp(&pd, &mut pcq, None, None, &cfg).unwrap();
    let report = rec
        .recover(
            &mut p,
            &mut a,
            LinkQueues {
                send_cq: &mut cq,
                recv_cq: None,
                window: &mut window,
                recvs: None,
            },
            |_| {},
            |p, a| {
                let (ea, eb) = (p.endpoint(a, &opts)?, p.endpoint(&b2, &opts)?);
                p.connect(a, &ea, &eb, &opts)?;
                p.connect(&mut b2, &eb, &ea, &opts)
            },
        )
        .unwrap();
    assert_eq!(rec.failed(), [2]);
    assert_eq!(report.sends_failed, 1);
    a.sq().post_and_ring(write(2).signaled()).unwrap();
    let t = std::time::Instant::now();
    while cq.poll(&mut wc) == 0 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the resent WRITE never completed"
        );
        std::thread::yield_now();
    }
    assert_eq!((wc[0].wr_id, wc[0].status), (2, WcStatus::Success));
    assert_eq!(&buf.as_slice()[..5], b"order");
}

/// `Completion::covered` on error and flush completions, and `SendWindow::retire` counting
/// them (tests/common/retire.rs), on rxe: a flushed receive carries rxe's opcode SEND, which
/// the provider reports as a receive.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn rxe_error_and_flush_completions_retire_what_covered_says() {
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
    common::retire::error_completions_retire_what_covered_says(&mut p, &opts);
}

/// The drain's flush marker on rxe (tests/common/marker.rs): posted to a QP in ERR, rxe
/// (kernel 6.1) accepts it and flushes it after everything before it; a drain of a QP
/// already in ERR ends the unsignaled sends that ran, and the link reconnects. Not `exact`:
/// an acknowledgement still on its way at the move to ERR leaves that send to a flush of
/// its own.
#[test]
#[ignore = "device test: needs RDMA_DIRECT_DEVICE (rxe0 in the guest)"]
fn rxe_the_flush_marker_ends_what_ran_before_it() {
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
    common::marker::marker_ends_what_ran_before_it(&mut p, &opts, false);
    common::marker::drain_of_a_qp_already_in_err(&mut p, &opts, false);
}
