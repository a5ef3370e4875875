//! The sim across processes: two processes' sim devices connected through the sim fabric
//! (shared memory under /dev/shm), the production mlx5 hot path on both ends. The test
//! binary runs itself again as the peer process (`RDMA_DIRECT_FABRIC_PEER` names the role
//! and the server's address); each test has its own fabric file, removed at the end.

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::fabric::packet::{Header, Op, HEADER_LEN};
use rdma_direct::providers::sim::fabric::{Member, Segment, CELL_LEN};
use rdma_direct::providers::sim::SimPd;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const PEER: &str = "RDMA_DIRECT_FABRIC_PEER";
const FABRIC: &str = "RDMA_DIRECT_SIM_FABRIC";
const STALL: Duration = Duration::from_secs(20);

/// A fabric name of this test run only.
fn fabric_name(test: &str) -> String {
    format!("rdma-direct-test-{}-{test}", std::process::id())
}

struct Removed(String);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&self.0));
    }
}

fn rc_qp(dev: &mut SimDevice) -> (SimPd, SimQp, SimCq, SimCq) {
    let pd = dev.alloc_pd().unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let mut scq = dev.create_cq(64).unwrap();
    let mut rcq = dev.create_cq(64).unwrap();
    let qp = dev
        .create_qp(&pd, &mut scq, Some(&mut rcq), None, &cfg)
        .unwrap();
    (pd, qp, scq, rcq)
}

fn one(dev: &mut SimDevice, cq: &mut SimCq) -> Completion {
    let mut wc = [Completion::EMPTY];
    let n = poll_wait(dev, cq, &mut wc, STALL).unwrap();
    assert_eq!(n, 1);
    wc[0]
}

fn spawn_peer(role: &str, addr: std::net::SocketAddr, fabric: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "peer_process", "--ignored", "--nocapture"])
        .env(PEER, format!("{role} {addr}"))
        .env(FABRIC, fabric)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn opts() -> ConnectOpts {
    ConnectOpts {
        // An ACK timeout of 4.096 µs × 2^14 ≈ 67 ms and five retries: a dead peer is found
        // out within half a second, whatever the default retry count means, and a peer
        // slowed by a loaded machine is not taken for a dead one.
        timeout: 14,
        retry_cnt: 5,
        ..ConnectOpts::default()
    }
}

/// The peer process: a client on its own sim device (device thread: it answers on its
/// own), sharing a 4 KiB window.
#[test]
#[ignore = "the peer process of the two-process fabric tests"]
fn peer_process() {
    let Ok(role) = std::env::var(PEER) else {
        println!("skipped: the peer process of the sim fabric tests");
        return;
    };
    let (role, addr) = role.split_once(' ').unwrap();
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, _scq, mut rcq) = rc_qp(&mut dev);
    let mut buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    buf.get_mut(2048, 8).unwrap().copy_from_slice(b"from-kid");
    let window = buf.remote(0, 4096).unwrap();
    let mut conn =
        connect_qp_client(&mut dev, &mut qp, addr, &opts(), Some(window), STALL).unwrap();
    println!("peer connected");
    // One receive for the WRITE WITH IMM (no data), one for the SEND; then the sender may go.
    qp.rq().post_recv(RecvWr::new(1, &[])).unwrap();
    let into = [buf.sge(1024, 64).unwrap()];
    qp.rq().post_recv(RecvWr::new(2, &into)).unwrap();
    qp.rq().ring();
    conn.sync(STALL).unwrap();
    if role == "idle" {
        // Serve until killed (a minute at most: a failed test leaves no process behind).
        std::thread::sleep(Duration::from_secs(60));
        return;
    }
    let c = one(&mut dev, &mut rcq);
    assert_eq!(
        (c.status, c.wr_id, c.imm, c.opcode),
        (WcStatus::Success, 1, 0xfeed, WcOpcode::RecvRdmaWithImm)
    );
    assert_eq!(buf.get(64, 8).unwrap(), b"over-wir");
    println!("peer: WRITE WITH IMM landed here");
    let c = one(&mut dev, &mut rcq);
    assert_eq!(
        (c.status, c.wr_id, c.byte_len, c.opcode),
        (WcStatus::Success, 2, 8, WcOpcode::Recv)
    );
    assert_eq!(buf.get(1024, 8).unwrap(), b"sendsend");
    println!("peer: SEND landed here");
    conn.sync(STALL).unwrap();
    println!("peer ok");
}

#[test]
fn write_imm_send_and_read_cross_two_processes() {
    let name = fabric_name("data");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("data", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &opts(), None, STALL).unwrap();
    assert_ne!(conn.remote.gid, dev.gid(), "the peer is another device");
    let window = conn.remote_mr().expect("the peer shares its window");
    conn.sync(STALL).unwrap();

    // WRITE WITH IMM: the bytes land in the peer's buffer (it checks), not in ours.
    mine.get_mut(0, 8).unwrap().copy_from_slice(b"over-wir");
    let sge = [mine.sge(0, 8).unwrap()];
    let wr = SendWr::write_imm_to(1, &sge, window.target(64, 8).unwrap(), 0xfeed).signaled();
    qp.sq().post(wr).unwrap();
    qp.sq().ring();
    let c = one(&mut dev, &mut scq);
    assert_eq!((c.status, c.wr_id), (WcStatus::Success, 1));
    assert_eq!(
        mine.get(64, 8).unwrap(),
        &[0u8; 8],
        "the sender's own buffer"
    );

    // READ what the peer wrote into its window.
    let back = [mine.sge(256, 8).unwrap()];
    let wr = SendWr::read_from(2, &back, window.target(2048, 8).unwrap()).signaled();
    qp.sq().post(wr).unwrap();
    qp.sq().ring();
    let c = one(&mut dev, &mut scq);
    assert_eq!((c.status, c.wr_id), (WcStatus::Success, 2));
    assert_eq!(mine.get(256, 8).unwrap(), b"from-kid");

    // SEND into the peer's receive queue.
    mine.get_mut(512, 8).unwrap().copy_from_slice(b"sendsend");
    let sge = [mine.sge(512, 8).unwrap()];
    qp.sq().post(SendWr::send(3, &sge).signaled()).unwrap();
    qp.sq().ring();
    let c = one(&mut dev, &mut scq);
    assert_eq!((c.status, c.wr_id), (WcStatus::Success, 3));

    conn.sync(STALL).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("peer ok"),
        "the peer process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, _, st) = dev.fabric_stats().unwrap();
    // Three answers at least (a slow peer's duplicate answers come on top, dropped).
    assert!(st.sent >= 3 && st.received >= 3, "{st:?}");
}

#[test]
fn a_killed_peer_ends_the_request_in_retry_exc_err() {
    let name = fabric_name("kill");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut child = spawn_peer("idle", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let conn = connect_qp_server(&mut dev, &mut qp, &l, &opts(), None, STALL).unwrap();
    let mut conn = conn;
    let window = conn.remote_mr().unwrap();
    conn.sync(STALL).unwrap();
    mine.get_mut(0, 8).unwrap().copy_from_slice(b"liveline");
    let sge = [mine.sge(0, 8).unwrap()];
    // The link works...
    qp.sq()
        .post(SendWr::write_to(1, &sge, window.target(0, 8).unwrap()).signaled())
        .unwrap();
    qp.sq().ring();
    assert_eq!(one(&mut dev, &mut scq).status, WcStatus::Success);
    // ...until the peer is killed (SIGKILL): no answer, retries, RETRY_EXC_ERR.
    child.kill().unwrap();
    child.wait().unwrap();
    qp.sq()
        .post(SendWr::write_to(2, &sge, window.target(8, 8).unwrap()).signaled())
        .unwrap();
    qp.sq().ring();
    let c = one(&mut dev, &mut scq);
    assert_eq!((c.wr_id, c.status), (2, WcStatus::RetryExcErr));
    assert_eq!(qp.state(), QpState::Err);
}

/// A small xorshift generator (seeded: a failure reproduces).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// A hostile neighbour on the fabric: random bytes, corrupt ring indices and forged
/// packets (some naming the device's real QP, rkey and window) into a device's inbox. The
/// device drops and counts what is not for it, never panics, and never writes outside a
/// window it exposed for remote writes.
#[test]
fn garbage_in_an_inbox_is_dropped_and_counted() {
    let name = fabric_name("fuzz");
    let _rm = Removed(name.clone());
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, _scq, _rcq) = rc_qp(&mut dev);
    let open = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let mut closed = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    closed.get_mut(0, 4096).unwrap().fill(0x5a);
    // The QP believes its peer is a sim device of our parent process (alive), whose GID
    // the neighbour then takes: it can forge packets that pass the addressing checks.
    let mut peer_gid = dev.gid();
    peer_gid[8..12].copy_from_slice(&std::os::unix::process::parent_id().to_be_bytes());
    let peer_qpn = 0x12_3456;
    let local = dev.endpoint(&qp, &ConnectOpts::default()).unwrap();
    let remote = QpEndpoint {
        gid: peer_gid,
        qpn: peer_qpn,
        ..local
    };
    dev.connect(&mut qp, &local, &remote, &ConnectOpts::default())
        .unwrap();
    let (slot, epoch, _) = dev.fabric_stats().unwrap();
    let seg = Segment::open(Some(&name)).unwrap();
    let mut bad = Member::join(seg, peer_gid).unwrap();

    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut pkt = [0u8; CELL_LEN];
    let mut back = [0u8; CELL_LEN];
    let mut sent = 0u64;
    for i in 0..4000u32 {
        let n = match i % 4 {
            // Random bytes.
            0 => {
                for b in pkt.iter_mut().take(128) {
                    *b = rng.next() as u8;
                }
                (rng.next() as usize % 128).max(1)
            }
            // A forged request with random fields but the right addressing.
            _ => {
                let ops = [
                    Op::Send,
                    Op::SendImm,
                    Op::Write,
                    Op::WriteImm,
                    Op::Read,
                    Op::Cas,
                    Op::Faa,
                    Op::Ack,
                    Op::NakErr,
                ];
                let mut h = Header::new(ops[rng.next() as usize % ops.len()]);
                h.src_slot = bad.slot();
                h.dst_slot = slot;
                h.src_epoch = bad.epoch();
                h.dst_epoch = if i % 16 == 1 { epoch ^ 1 } else { epoch };
                h.src_qpn = if i % 8 == 2 { peer_qpn ^ 1 } else { peer_qpn };
                h.dst_qpn = qp.qpn();
                h.psn = (rng.next() % 4) as u32;
                // The open window's key, the closed region's (no remote rights) or any,
                // at addresses in and around the region or anywhere.
                let (key, base) = match i % 3 {
                    0 => (open.lkey(), open.addr()),
                    1 => (closed.lkey(), closed.addr()),
                    _ => (rng.next() as u32, rng.next()),
                };
                h.rkey = key;
                h.raddr = base.wrapping_add(rng.next() % 8192).wrapping_sub(2048);
                h.len = (rng.next() % 128) as u32;
                h.write(&mut pkt);
                for b in pkt[HEADER_LEN..HEADER_LEN + 128].iter_mut() {
                    *b = rng.next() as u8;
                }
                HEADER_LEN + h.payload_len()
            }
        };
        if bad.send(slot, &pkt[..n]) {
            sent += 1;
        } else {
            dev.run_until_idle();
            // The answers to the forged requests: taken, so the device's ring never fills.
            while bad.recv(slot, &mut back).is_some() {}
        }
        if i % 50 == 49 {
            // A NAKed request put the responder QP in ERR: bring it back (fresh PSNs), so
            // the forged requests keep reaching execution.
            dev.run_until_idle();
            while bad.recv(slot, &mut back).is_some() {}
            dev.connect(&mut qp, &local, &remote, &ConnectOpts::default())
                .unwrap();
        }
        if i % 500 == 499 {
            // A scribbled ring: indices no ring can have.
            bad.corrupt_ring_to(slot, 7, 7 + 1000);
            dev.run_until_idle();
        }
    }
    dev.run_until_idle();
    let (_, _, st) = dev.fabric_stats().unwrap();
    assert!(sent > 1000, "{sent}");
    assert!(st.dropped > 0 && st.corrupt_cells > 0, "{st:?}");
    println!("fuzz: {sent} packets into the inbox; {st:?}");
    assert!(st.received <= sent && st.dropped <= sent, "{st:?}");
    assert!(
        st.sent > 0,
        "some forged requests were executed and answered: {st:?}"
    );
    assert!(
        closed.get(0, 4096).unwrap().iter().all(|&b| b == 0x5a),
        "a region without remote rights was written"
    );
    // The device still works for its own QPs.
    assert!(dev.qp_state(qp.qpn()).is_some());
}

/// `rdma-direct pingpong -p PORT` (server) and `rdma-direct pingpong -p PORT 127.0.0.1`
/// (client) on the sim: two processes, both exit 0, the client names the sim first.
#[test]
fn pingpong_server_and_client_on_the_sim() {
    let name = fabric_name("pingpong");
    let _rm = Removed(name.clone());
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
        .to_string();
    let exe = env!("CARGO_BIN_EXE_rdma-direct");
    let run = |extra: &[&str]| {
        let mut args = vec!["pingpong", "-n", "50", "-p", port.as_str()];
        args.extend_from_slice(extra);
        Command::new(exe)
            .args(&args)
            .env(FABRIC, &name)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let server = run(&[]);
    let client = run(&["127.0.0.1"]);
    for (who, c) in [("client", client), ("server", server)] {
        let out = c.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && text.contains("50 iters in"),
            "{who}: {}\n{text}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.lines().next().unwrap_or("").contains("sim"),
            "{who}: {text}"
        );
    }
}
