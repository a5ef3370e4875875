//! The sim across processes: two processes' sim devices connected through the sim fabric
//! (shared memory under /dev/shm), the production mlx5 hot path on both ends. The test
//! binary runs itself again as the peer process (`RDMA_DIRECT_FABRIC_PEER` names the role
//! and the server's address); each test has its own fabric file, removed at the end.
//! The setup shared with tests/sim_fabric_read_faults.rs is in tests/common/fabric.rs.
//!
//! Here: the peer process (its roles dispatched to the parts), the first data across two
//! processes, a killed peer, and `rdma-direct pingpong` on the sim. The parts, by concern:
//! `death` (a peer killed mid-stream, its slot taken again), `hostile` (garbage in an inbox),
//! `big` (messages of many packets, a lossy link, the RNR timer), `queues` (an SRQ and UD
//! across processes), `random` (random traffic over clean and faulty links).

mod common;

use common::fabric::*;
use rdma_direct::prelude::*;
use rdma_direct::providers::sim::{FaultConfig, SimPd};
use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;
#[path = "sim_fabric/big.rs"]
mod big;
#[path = "sim_fabric/death.rs"]
mod death;
#[path = "sim_fabric/hostile.rs"]
mod hostile;
#[path = "sim_fabric/queues.rs"]
mod queues;
#[path = "sim_fabric/random.rs"]
mod random;

/// A byte pattern of its own per `seed` (a misplaced segment shows).
fn pattern(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| {
            (i as u32)
                .wrapping_mul(2_654_435_761)
                .rotate_left(seed as u32 % 31) as u8
                ^ seed
        })
        .collect()
}

/// Path MTU 1024: a 200,000-byte message is 196 packets.
fn big_opts() -> ConnectOpts {
    ConnectOpts {
        path_mtu: Some(Mtu::Mtu1024),
        ..opts()
    }
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
    match role {
        "big" => return big::peer_big(addr),
        "late" => return big::peer_late(addr),
        "srq" => return queues::peer_srq(addr),
        "ud" => return queues::peer_ud(addr),
        "mirror" => return random::peer_mirror(addr),
        "stream" => return death::peer_stream(addr),
        "slot" => return death::peer_slot(),
        _ => {}
    }
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
    let (slot, epoch, _) = dev.fabric_stats().unwrap();
    println!("peer connected, peer slot {slot} epoch {epoch}");
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
    peer_ok(child);
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

/// `rdma-direct pingpong -p PORT` (server) and `rdma-direct pingpong -p PORT 127.0.0.1`
/// (client) on the sim: two processes, both exit 0, the client names the sim first.
#[test]
fn pingpong_server_and_client_on_the_sim() {
    let name = fabric_name("pingpong");
    let _rm = Removed(name.clone());
    let exe = env!("CARGO_BIN_EXE_rdma-direct");
    // RC at the default size (4096), RC of many packets, UC of several.
    for extra in [&[][..], &["-s", "100000"], &["-c", "UC", "-s", "10000"]] {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
            .to_string();
        let run = |host: Option<&str>| {
            let mut args = vec!["pingpong", "-n", "50", "-p", port.as_str()];
            args.extend_from_slice(extra);
            args.extend(host);
            Command::new(exe)
                .args(&args)
                .env(FABRIC, &name)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let server = run(None);
        let client = run(Some("127.0.0.1"));
        for (who, c) in [("client", client), ("server", server)] {
            let out = c.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && text.contains("50 iters in"),
                "{extra:?} {who}: {}\n{text}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                text.lines().next().unwrap_or("").contains("sim"),
                "{who}: {text}"
            );
        }
    }
}
