//! Recovery paths on the software mlx5 device (the production mlx5 provider): reconnects,
//! resets, drops, failed bring-ups, async CQ errors and two processes. Each test is one of
//! the reproductions of "Recovery that loses nothing"; each failed on the code before its fix.

use rdma_direct::providers::sim::{SimCq, SimDevice, SimPd, SimQp};
use rdma_direct::providers::{
    Access, Completion, CompletionQueue, ConnectOpts, PostError, Provider, QpConfig, QpState,
    QpType, QueuePair, SendQueue, SendWr, WcStatus,
};

const CQ: u32 = 8;

/// A peer on its own CQ and a QP under test with `max_send_wr` 8 on an 8-entry CQ.
struct Bed {
    dev: SimDevice,
    pd: SimPd,
    cq: SimCq,
    peer_cq: SimCq,
    /// The receive CQ of both QPs (the WRITEs consume no receive).
    rcq: SimCq,
    /// The QP under test (`None` between a drop and its successor).
    qp: Option<SimQp>,
    peer: SimQp,
    window: (u64, u32),
    _buf: rdma_direct::providers::RegisteredBuf<rdma_direct::providers::sim::SimMr>,
}

fn cfg() -> QpConfig {
    let mut cfg = QpConfig::new(QpType::Rc);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (CQ, 1);
    cfg.caps.max_inline_data = 64;
    cfg
}

fn bed(threaded: bool) -> Bed {
    let mut dev = SimDevice::new();
    if threaded {
        dev.start_device_thread().unwrap();
    }
    let pd = dev.alloc_pd().unwrap();
    let buf = dev
        .alloc_buf(
            &pd,
            4096,
            Access::ALL,
            rdma_direct::providers::Pages::Normal,
        )
        .unwrap();
    let window = (
        buf.remote(0, 4096).unwrap().addr,
        buf.remote(0, 4096).unwrap().rkey,
    );
    let mut cq = dev.create_cq(CQ).unwrap();
    assert_eq!(cq.cqe(), CQ);
    let mut peer_cq = dev.create_cq(CQ).unwrap();
    let mut rcq = dev.create_cq(CQ).unwrap();
    let qp = dev
        .create_qp(&pd, &mut cq, Some(&mut rcq), None, &cfg())
        .unwrap();
    let peer = dev
        .create_qp(&pd, &mut peer_cq, Some(&mut rcq), None, &cfg())
        .unwrap();
    let mut b = Bed {
        dev,
        pd,
        cq,
        peer_cq,
        rcq,
        qp: Some(qp),
        peer,
        window,
        _buf: buf,
    };
    b.connect();
    b
}

impl Bed {
    fn connect(&mut self) {
        let opts = ConnectOpts::default();
        let qp = self.qp.as_mut().unwrap();
        let ea = self.dev.endpoint(qp, &opts).unwrap();
        let eb = self.dev.endpoint(&self.peer, &opts).unwrap();
        self.dev.connect(qp, &ea, &eb, &opts).unwrap();
        self.dev.connect(&mut self.peer, &eb, &ea, &opts).unwrap();
    }

    fn write(&mut self, wr_id: u64) -> Result<(), PostError> {
        let data = wr_id.to_le_bytes();
        let wr = SendWr::write(wr_id, &[], self.window.0 + 8 * (wr_id % 64), self.window.1)
            .inline(&data)
            .signaled();
        let qp = self.qp.as_mut().unwrap();
        let r = qp.sq().post(wr).map_err(|r| r.error);
        qp.sq().ring();
        r
    }

    /// Let the device write `n` more CQEs (deterministic: run it; device thread: wait for
    /// its counter, within a step budget).
    fn device_writes(&mut self, n: u64, before: u64) {
        for _ in 0..10_000_000u64 {
            self.dev.progress();
            if self.dev.stats().cqes >= before + n {
                return;
            }
            std::thread::yield_now();
        }
        panic!(
            "the device wrote {} of {n} CQEs",
            self.dev.stats().cqes - before
        );
    }

    fn poll_all(&mut self) -> Vec<Completion> {
        let mut out = Vec::new();
        let mut wc = [Completion::EMPTY; 16];
        for _ in 0..64 {
            self.dev.progress();
            let k = self.cq.poll(&mut wc);
            out.extend_from_slice(&wc[..k]);
        }
        out
    }

    /// Eight signaled WRITEs completed by the device and left unpolled in the 8-entry CQ.
    fn fill_unpolled(&mut self) {
        let before = self.dev.stats().cqes;
        for i in 0..CQ as u64 {
            self.write(i).unwrap();
        }
        self.device_writes(CQ as u64, before);
    }

    /// After a reset/drop with unpolled CQEs: the ring is full of stale CQEs, so a post is
    /// refused for CQ room (never accepted into an overrun); one poll discards them (no
    /// completion of the old QP comes out) and the next post completes.
    fn recovers_without_overrun(&mut self, cqn: u32) {
        assert_eq!(
            self.write(100),
            Err(PostError::CqFull { cqe: CQ }),
            "the CQ still holds 8 stale CQEs"
        );
        let stale = self.poll_all();
        assert!(stale.is_empty(), "stale CQEs returned: {stale:?}");
        assert!(!self.dev.cq_in_error(cqn));
        let before = self.dev.stats().cqes;
        self.write(101).unwrap();
        self.device_writes(1, before);
        let got = self.poll_all();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].wr_id, got[0].status), (101, WcStatus::Success));
        assert!(!self.dev.cq_in_error(cqn), "the CQ overran");
        assert!(self.dev.take_events().is_empty());
        assert_eq!(self.qp.as_ref().unwrap().state(), QpState::Rts);
        // And the whole depth again.
        let before = self.dev.stats().cqes;
        for i in 0..CQ as u64 {
            self.write(200 + i).unwrap();
        }
        self.device_writes(CQ as u64, before);
        assert_eq!(self.poll_all().len(), CQ as usize);
        assert!(!self.dev.cq_in_error(cqn), "the CQ overran");
    }
}

fn reconnect_with_unpolled_cqes(threaded: bool, through_err: bool) {
    let mut b = bed(threaded);
    let cqn = b.cq.cqn();
    b.fill_unpolled();
    if through_err {
        b.dev.to_error(b.qp.as_mut().unwrap()).unwrap();
    }
    b.connect();
    b.recovers_without_overrun(cqn);
}

#[test]
fn reconnect_with_unpolled_cqes_does_not_overrun_the_cq() {
    reconnect_with_unpolled_cqes(false, false);
}

#[test]
fn to_error_then_reconnect_with_unpolled_cqes_does_not_overrun_the_cq() {
    reconnect_with_unpolled_cqes(false, true);
}

#[test]
fn reconnect_with_unpolled_cqes_on_the_device_thread_does_not_overrun_the_cq() {
    reconnect_with_unpolled_cqes(true, false);
    reconnect_with_unpolled_cqes(true, true);
}

#[test]
fn a_new_qp_on_the_cq_of_a_dropped_one_with_unpolled_cqes_does_not_overrun_it() {
    for threaded in [false, true] {
        let mut b = bed(threaded);
        let cqn = b.cq.cqn();
        b.fill_unpolled();
        b.qp = None;
        b.qp = Some(
            b.dev
                .create_qp(&b.pd, &mut b.cq, Some(&mut b.rcq), None, &cfg())
                .unwrap(),
        );
        b.connect();
        b.recovers_without_overrun(cqn);
        let _ = &b.peer_cq;
    }
}

// ---------------------------------------------------------------- failed bring-up

mod bring_up {
    use super::*;
    use rdma_direct::endpoint::{
        connect_qp_client, connect_qp_server, exchange_client, exchange_server, QpEndpoint,
    };
    use std::io::Write;
    use std::net::TcpListener;
    use std::time::Duration;

    #[derive(Clone, Copy, Debug)]
    enum Hostile {
        /// Swaps endpoints, then closes the connection.
        Closes,
        /// Swaps endpoints, then sends a wrong sync byte.
        WrongSync,
        /// Swaps endpoints, then sends nothing (the other side's deadline runs out).
        Silent,
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

    /// The QP under test and the endpoint a hostile peer presents (a real QP of the same
    /// device, so the transitions succeed and only the sync can fail).
    fn qps() -> (SimDevice, SimQp, QpEndpoint, SimCq, SimQp, SimCq) {
        let mut dev = SimDevice::new();
        let pd = dev.alloc_pd().unwrap();
        let mut cq = dev.create_cq(256).unwrap();
        let mut pcq = dev.create_cq(256).unwrap();
        let qp = dev
            .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
            .unwrap();
        let peer = dev
            .create_qp(&pd, &mut pcq, None, None, &QpConfig::new(QpType::Rc))
            .unwrap();
        let ep = dev.endpoint(&peer, &ConnectOpts::default()).unwrap();
        (dev, qp, ep, cq, peer, pcq)
    }

    fn not_connected(qp: &mut SimQp, how: Hostile, e: &rdma_direct::Error) {
        assert!(
            matches!(qp.state(), QpState::Reset | QpState::Err),
            "{how:?}: the QP is left {} after `{e}`",
            qp.state()
        );
        let r = qp.sq().post(SendWr::send(1, &[]).signaled());
        assert!(
            matches!(r, Err(ref r) if r.error == PostError::BadState { state: qp.state() }),
            "{how:?}: a post to the failed QP: {r:?}"
        );
    }

    const ALL: [Hostile; 3] = [Hostile::Closes, Hostile::WrongSync, Hostile::Silent];

    #[test]
    fn a_failed_sync_on_the_server_leaves_no_connected_qp() {
        for how in ALL {
            let (mut dev, mut qp, ep, _cq, _peer, _pcq) = qps();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::spawn(move || {
                let (_, s) = exchange_client(addr, &ep, Duration::from_secs(10)).unwrap();
                behave(s, how, rx);
            });
            let opts = ConnectOpts::default();
            let e = connect_qp_server(
                &mut dev,
                &mut qp,
                &l,
                &opts,
                None,
                Duration::from_millis(500),
            )
            .unwrap_err();
            let _ = tx.send(());
            t.join().unwrap();
            not_connected(&mut qp, how, &e);
        }
    }

    #[test]
    fn a_failed_sync_on_the_client_leaves_no_connected_qp() {
        for how in ALL {
            let (mut dev, mut qp, ep, _cq, _peer, _pcq) = qps();
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let (tx, rx) = std::sync::mpsc::channel();
            let t = std::thread::spawn(move || {
                let (_, s) = exchange_server(&l, &ep, Duration::from_secs(10)).unwrap();
                behave(s, how, rx);
            });
            let opts = ConnectOpts::default();
            let e = connect_qp_client(
                &mut dev,
                &mut qp,
                addr,
                &opts,
                None,
                Duration::from_millis(500),
            )
            .unwrap_err();
            let _ = tx.send(());
            t.join().unwrap();
            not_connected(&mut qp, how, &e);
        }
    }
}

// ---------------------------------------------------------------- two processes

mod two_processes {
    use super::*;
    use rdma_direct::endpoint::{connect_qp_client, connect_qp_server};
    use std::net::TcpListener;
    use std::time::Duration;

    const CHILD: &str = "RDMA_DIRECT_SIM_PEER_OF";

    fn qp(dev: &mut SimDevice) -> (SimQp, SimCq) {
        let pd = dev.alloc_pd().unwrap();
        let mut cq = dev.create_cq(256).unwrap();
        let qp = dev
            .create_qp(&pd, &mut cq, None, None, &QpConfig::new(QpType::Rc))
            .unwrap();
        (qp, cq)
    }

    /// Connected to the other process's device (through the sim fabric), never to itself.
    fn connected(dev: &SimDevice, c: &rdma_direct::endpoint::Connection, qp: &SimQp) {
        assert_ne!(c.remote.gid, dev.gid(), "a loop back into this device");
        assert_ne!(c.remote.gid, c.local.gid);
        assert_eq!(qp.state(), QpState::Rts);
        assert!(dev.fabric_stats().is_some(), "on the fabric");
    }

    /// The other process of the test below (run by it, with the server's address in
    /// `RDMA_DIRECT_SIM_PEER_OF`): a client on its own first sim device.
    #[test]
    #[ignore = "the peer process of two_sims_in_two_processes_connect_to_each_other"]
    fn peer_process() {
        let Ok(addr) = std::env::var(CHILD) else {
            // `cargo test -- --ignored` (the device tests) runs it too: nothing to be a peer of.
            println!(
                "skipped: the peer process of two_sims_in_two_processes_connect_to_each_other"
            );
            return;
        };
        let mut dev = SimDevice::new();
        let (mut qp, _cq) = qp(&mut dev);
        let c = connect_qp_client(
            &mut dev,
            &mut qp,
            addr.as_str(),
            &ConnectOpts::default(),
            None,
            Duration::from_secs(20),
        )
        .unwrap();
        connected(&dev, &c, &qp);
        println!("client connected");
    }

    /// Each process's first sim device: two processes exchanging endpoints connect to each
    /// other through the sim fabric (they once accepted, with the same GID and QPN, and
    /// looped back to themselves; then they were refused; `tests/sim_fabric.rs` moves data).
    #[test]
    fn two_sims_in_two_processes_connect_to_each_other() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "two_processes::peer_process",
                "--ignored",
                "--nocapture",
            ])
            .env(CHILD, addr.to_string())
            .output_async();
        let mut dev = SimDevice::new();
        let (mut qp, _cq) = qp(&mut dev);
        let c = connect_qp_server(
            &mut dev,
            &mut qp,
            &l,
            &ConnectOpts::default(),
            None,
            Duration::from_secs(20),
        )
        .unwrap();
        connected(&dev, &c, &qp);
        let out = child.join().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("client connected"),
            "the peer process: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

    trait OutputAsync {
        fn output_async(&mut self) -> std::thread::JoinHandle<std::process::Output>;
    }
    impl OutputAsync for std::process::Command {
        fn output_async(&mut self) -> std::thread::JoinHandle<std::process::Output> {
            let child = self
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            std::thread::spawn(move || child.wait_with_output().unwrap())
        }
    }
}

// ---------------------------------------------------------------- async errors

mod async_errors {
    use super::*;
    use rdma_direct::providers::sim::AsyncEvent;
    use rdma_direct::providers::{RecvQueue, RecvWr, WcFlags};

    /// An async CQ error: every QP on the CQ refuses posts naming the CQ, says ERR (a reset
    /// does not revive it), and the CQ's poll reports the error once, after the CQEs it
    /// still holds.
    #[test]
    fn a_cq_in_error_refuses_posts_naming_it_and_poll_reports_it() {
        for threaded in [false, true] {
            let mut b = bed(threaded);
            let cqn = b.cq.cqn();
            // One completion in the ring before the fault.
            let before = b.dev.stats().cqes;
            b.write(1).unwrap();
            b.device_writes(1, before);
            b.dev.fail_cq(cqn);
            let ev = b.dev.take_events();
            assert!(ev.contains(&AsyncEvent::CqOverrun { cqn }), "{ev:?}");
            let qp = b.qp.as_mut().unwrap();
            assert_eq!(qp.state(), QpState::Err, "state() after the async fatal");
            let r = qp.sq().post(SendWr::send(2, &[]).signaled());
            assert_eq!(r.map_err(|r| r.error), Err(PostError::CqError { cqn }));
            let r = qp.rq().post_recv(RecvWr::new(3, &[]));
            assert_eq!(r.map_err(|r| r.error), Err(PostError::CqError { cqn }));
            let msg = PostError::CqError { cqn }.to_string();
            assert!(
                msg.contains("in error") && msg.contains(&format!("{cqn:#x}")),
                "{msg}"
            );
            // The CQE already there comes first, then the error, once.
            let got = b.poll_all();
            assert_eq!(got.len(), 2, "{got:?}");
            assert_eq!((got[0].wr_id, got[0].status), (1, WcStatus::Success));
            assert!(got[1].flags.contains(WcFlags::CQ_ERROR), "{got:?}");
            assert_eq!(
                (got[1].status, got[1].vendor_err),
                (WcStatus::GeneralErr, cqn)
            );
            assert!(b.cq.in_error());
            // A reconnect does not revive a QP whose CQ is in error.
            let Bed { dev, qp, peer, .. } = &mut b;
            let opts = ConnectOpts::default();
            let qp = qp.as_mut().unwrap();
            let (ea, eb) = (
                dev.endpoint(qp, &opts).unwrap(),
                dev.endpoint(peer, &opts).unwrap(),
            );
            dev.connect(qp, &ea, &eb, &opts).unwrap();
            assert_eq!(qp.state(), QpState::Err);
            let r = qp.sq().post(SendWr::send(4, &[]).signaled());
            assert_eq!(r.map_err(|r| r.error), Err(PostError::CqError { cqn }));
            // The peer's CQ is not in error: the peer is untouched.
            assert_eq!(b.peer.state(), QpState::Rts);
        }
    }

    /// `poll_one` reports a CQ in error the same way, once.
    #[test]
    fn poll_one_reports_a_cq_in_error_once() {
        let mut b = bed(false);
        let cqn = b.cq.cqn();
        b.dev.fail_cq(cqn);
        let mut c = Completion::EMPTY;
        assert!(b.cq.poll_one(&mut c));
        assert!(c.flags.contains(WcFlags::CQ_ERROR), "{c:?}");
        assert_eq!((c.status, c.vendor_err), (WcStatus::GeneralErr, cqn));
        assert!(!b.cq.poll_one(&mut c));
    }

    /// An async QP fatal: `state()` says ERR at once, posts are refused, and the device
    /// flushes what was outstanding; a reconnect revives the QP.
    #[test]
    fn an_async_qp_fatal_shows_in_state_and_flushes() {
        let mut b = bed(false);
        let qpn = b.qp.as_ref().unwrap().qpn();
        // Four requests rung, then the fault before the device runs them.
        for i in 0..4 {
            let qp = b.qp.as_mut().unwrap();
            let data = [i as u8; 8];
            let wr = SendWr::write(i, &[], b.window.0, b.window.1).inline(&data);
            qp.sq().post(wr.signaled_if(i == 3)).unwrap();
        }
        b.qp.as_mut().unwrap().sq().ring();
        b.dev.fail_qp(qpn);
        assert_eq!(b.dev.take_events(), vec![AsyncEvent::QpFatal { qpn }]);
        let qp = b.qp.as_mut().unwrap();
        assert_eq!(qp.state(), QpState::Err, "state() after QP_FATAL");
        let r = qp.sq().post(SendWr::send(9, &[]).signaled());
        assert_eq!(
            r.map_err(|r| r.error),
            Err(PostError::BadState {
                state: QpState::Err
            })
        );
        let got = b.poll_all();
        assert_eq!(got.len(), 4, "each outstanding request flushed: {got:?}");
        assert!(
            got.iter().all(|c| c.status == WcStatus::WrFlushErr),
            "{got:?}"
        );
        b.connect();
        assert_eq!(b.qp.as_ref().unwrap().state(), QpState::Rts);
        let before = b.dev.stats().cqes;
        b.write(10).unwrap();
        b.device_writes(1, before);
        assert_eq!(b.poll_all().len(), 1);
    }
}
