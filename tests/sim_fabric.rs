//! The sim across processes: two processes' sim devices connected through the sim fabric
//! (shared memory under /dev/shm), the production mlx5 hot path on both ends. The test
//! binary runs itself again as the peer process (`RDMA_DIRECT_FABRIC_PEER` names the role
//! and the server's address); each test has its own fabric file, removed at the end.

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::fabric::packet::{Header, Op, Seg, HEADER_LEN};
use rdma_direct::providers::sim::fabric::{Member, Segment, CELL_LEN};
use rdma_direct::providers::sim::{FaultConfig, SimPd};
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
    match role {
        "big" => return peer_big(addr),
        "late" => return peer_late(addr),
        "srq" => return peer_srq(addr),
        "ud" => return peer_ud(addr),
        "mirror" => return peer_mirror(addr),
        "stream" => return peer_stream(addr),
        "slot" => return peer_slot(),
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

/// The slot and epoch a peer printed (`peer slot N epoch E`).
fn peer_slot_of(text: &str) -> (u8, u32) {
    let rest = text
        .split("peer slot ")
        .nth(1)
        .unwrap_or_else(|| panic!("no slot in the peer's output: {text}"));
    let mut w = rest.split_whitespace();
    let slot = w.next().unwrap().parse().unwrap();
    assert_eq!(w.next(), Some("epoch"), "{text}");
    (slot, w.next().unwrap().parse().unwrap())
}

/// A peer that joins the fabric, says which slot it got, and exits.
fn peer_slot() {
    let dev = SimDevice::new();
    dev.join_fabric(None).unwrap();
    let (slot, epoch, _) = dev.fabric_stats().unwrap();
    println!("peer slot {slot} epoch {epoch}");
    println!("peer ok");
}

/// The next process to join takes the slot a killed peer left (same slot, a new
/// generation); the survivor's own slot is untouched.
fn the_next_process_takes_the_slot_of(dead: (u8, u32), fabric: &str, survivor: &SimDevice) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let out = spawn_peer("slot", l.local_addr().unwrap(), fabric)
        .wait_with_output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("peer ok"), "{text}");
    let (slot, epoch) = peer_slot_of(&text);
    assert_eq!(slot, dead.0, "the dead peer's slot is taken again: {text}");
    assert!(epoch > dead.1, "a new generation: {text} after {dead:?}");
    let (mine, _, _) = survivor.fabric_stats().unwrap();
    assert_ne!(mine, slot);
}

/// The completions of a queue whose peer died mid-stream, in order: successes (what the
/// peer answered before it died), then one `RETRY_EXC_ERR`, then flushes; at least one
/// flush. Returns the number of successes.
fn died_mid_stream(what: &str, cs: &[Completion]) -> usize {
    let ok = cs
        .iter()
        .take_while(|c| c.status == WcStatus::Success)
        .count();
    let statuses: Vec<WcStatus> = cs.iter().map(|c| c.status).collect();
    assert_eq!(
        cs.get(ok).map(|c| c.status),
        Some(WcStatus::RetryExcErr),
        "{what}: {statuses:?}"
    );
    assert!(
        cs.len() > ok + 1
            && cs[ok + 1..]
                .iter()
                .all(|c| c.status == WcStatus::WrFlushErr),
        "{what}: {statuses:?}"
    );
    ok
}

/// kill -9 of the responder mid-stream: four WRITEs answered, twelve more rung, the peer
/// killed before this (deterministic) device sends them. (Rung all at once, the sixteen
/// may all be answered before the kill: the peer's device thread answers as fast as this
/// device's passes send.) The requester's queue ends as on a link that went dead: what the peer
/// answered succeeds, the next request fails with `RETRY_EXC_ERR` after `retry_cnt`
/// retries, the rest is flushed, nothing is missing; the next process to join the fabric
/// takes the dead peer's slot.
#[test]
fn killing_the_responder_mid_stream_ends_every_request_and_frees_its_slot() {
    let name = fabric_name("kill-responder");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut child = spawn_peer("idle", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &opts(), None, STALL).unwrap();
    let window = conn.remote_mr().unwrap();
    conn.sync(STALL).unwrap();
    mine.get_mut(0, 8).unwrap().copy_from_slice(b"inflight");
    let sge = [mine.sge(0, 8).unwrap()];
    let mut post = |ids: std::ops::RangeInclusive<u64>| {
        for id in ids {
            let t = window.target(8 * id, 8).unwrap();
            qp.sq()
                .post(SendWr::write_to(id, &sge, t).signaled())
                .unwrap();
        }
        qp.sq().ring();
    };
    post(1..=4);
    let mut cs: Vec<Completion> = (0..4).map(|_| one(&mut dev, &mut scq)).collect();
    assert!(cs.iter().all(|c| c.status == WcStatus::Success), "{cs:?}");
    post(5..=16);
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let dead = peer_slot_of(&String::from_utf8_lossy(&out.stdout));
    let killed = std::time::Instant::now();
    cs.extend((4..16).map(|_| one(&mut dev, &mut scq)));
    let ids: Vec<u64> = cs.iter().map(|c| c.wr_id).collect();
    assert_eq!(
        ids,
        (1..=16).collect::<Vec<u64>>(),
        "every request once, in order"
    );
    let ok = died_mid_stream("the requester's queue", &cs);
    // A figure, not a bound: the retry budget is (retry_cnt + 1) ACK timeouts of 67 ms.
    println!(
        "{ok} answered, RETRY_EXC_ERR and {} flushed {:?} after the kill",
        16 - ok - 1,
        killed.elapsed()
    );
    assert_eq!(qp.state(), QpState::Err);
    the_next_process_takes_the_slot_of(dead, &name, &dev);
}

/// The requester peer of `killing_the_requester_mid_stream...`: WRITE WITH IMMEDIATE into
/// the server's window, sixteen in flight, until killed (a minute at most).
fn peer_stream(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut buf = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_client(&mut dev, &mut qp, addr, &opts(), None, STALL).unwrap();
    let (slot, epoch, _) = dev.fabric_stats().unwrap();
    println!("peer slot {slot} epoch {epoch}");
    let window = conn.remote_mr().unwrap();
    conn.sync(STALL).unwrap();
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let mut n = 0u64;
    let mut outstanding = 0;
    let mut wc = [Completion::EMPTY; 16];
    while std::time::Instant::now() < until {
        while outstanding < 16 {
            n += 1;
            buf.get_mut(8 * (n as usize % 16), 8)
                .unwrap()
                .copy_from_slice(&n.to_be_bytes());
            let sge = [buf.sge(8 * (n as usize % 16), 8).unwrap()];
            let t = window.target(8 * (n % 16), 8).unwrap();
            qp.sq()
                .post(SendWr::write_imm_to(n, &sge, t, n as u32).signaled())
                .unwrap();
            outstanding += 1;
        }
        qp.sq().ring();
        let got = scq.poll(&mut wc);
        for c in &wc[..got] {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
        }
        outstanding -= got;
        if got == 0 {
            std::thread::yield_now();
        }
    }
}

/// kill -9 of the requester mid-stream: the peer streams WRITE WITH IMMEDIATE into this
/// process (each consuming a receive), and is killed once four have landed. This side's own
/// requests to the dead peer end in `RETRY_EXC_ERR` (the first) and flushes (the rest), and
/// its receives the peer did not consume are flushed; the next process takes the slot.
#[test]
fn killing_the_requester_mid_stream_ends_every_request_and_frees_its_slot() {
    let name = fabric_name("kill-requester");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut child = spawn_peer("stream", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, mut rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let window = mine.remote(0, 4096).unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &opts(), Some(window), STALL).unwrap();
    // The receives before the sync that lets the peer start.
    for id in 1..=16u64 {
        qp.rq().post_recv(RecvWr::new(100 + id, &[])).unwrap();
    }
    qp.rq().ring();
    conn.sync(STALL).unwrap();
    let mut rs: Vec<Completion> = (0..4).map(|_| one(&mut dev, &mut rcq)).collect();
    for (k, c) in rs.iter().enumerate() {
        assert_eq!(
            (c.status, c.wr_id, c.imm),
            (WcStatus::Success, 101 + k as u64, 1 + k as u32),
            "the stream lands in order: {c:?}"
        );
    }
    let got = u64::from_be_bytes(mine.get(8, 8).unwrap().try_into().unwrap());
    assert_eq!(got, 1, "the first WRITE's bytes");
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let dead = peer_slot_of(&String::from_utf8_lossy(&out.stdout));
    mine.get_mut(1024, 8).unwrap().copy_from_slice(b"to-a-gho");
    let sge = [mine.sge(1024, 8).unwrap()];
    for id in 1..=8u64 {
        qp.sq().post(SendWr::send(id, &sge).signaled()).unwrap();
    }
    qp.sq().ring();
    let cs: Vec<Completion> = (0..8).map(|_| one(&mut dev, &mut scq)).collect();
    let ids: Vec<u64> = cs.iter().map(|c| c.wr_id).collect();
    assert_eq!(
        ids,
        (1..=8).collect::<Vec<u64>>(),
        "every request once, in order"
    );
    assert_eq!(died_mid_stream("the survivor's requests", &cs), 0);
    // The receives: those the stream consumed before it died, then the rest flushed.
    rs.extend((4..16).map(|_| one(&mut dev, &mut rcq)));
    let ids: Vec<u64> = rs.iter().map(|c| c.wr_id).collect();
    assert_eq!(ids, (101..=116).collect::<Vec<u64>>(), "every receive once");
    let landed = rs
        .iter()
        .take_while(|c| c.status == WcStatus::Success)
        .count();
    // The kill lands mid-stream or, when the peer was quicker, after its last WRITE: every
    // receive not consumed is flushed (none, in the second case).
    assert!(
        rs[landed..]
            .iter()
            .all(|c| c.status == WcStatus::WrFlushErr),
        "{rs:?}"
    );
    assert_eq!(qp.state(), QpState::Err);
    the_next_process_takes_the_slot_of(dead, &name, &dev);
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
/// window it exposed for remote writes. 4,000 packets by default;
/// `RDMA_DIRECT_FABRIC_HOSTILE_PACKETS` sets more (CI's long run).
#[test]
fn garbage_in_an_inbox_is_dropped_and_counted() {
    let packets: u32 = std::env::var("RDMA_DIRECT_FABRIC_HOSTILE_PACKETS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
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
    for i in 0..packets {
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
                    Op::NakRnr,
                    Op::ReadResp,
                    Op::AtomicAck,
                ];
                let segs = [Seg::Only, Seg::First, Seg::Middle, Seg::Last];
                let mut h = Header::new(ops[rng.next() as usize % ops.len()]);
                h.seg = segs[rng.next() as usize % segs.len()];
                h.imm = [0, 256, 1024, 4096, rng.next() as u32][rng.next() as usize % 5];
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

/// Bytes of the large-message peer's buffer: WRITE target, receives, READ source.
const BIG: usize = 1 << 20;
const WRITE_LEN: usize = 200_000;
const SEND_LEN: usize = 100_000;
const IMM_LEN: usize = 20_000;
const READ_LEN: usize = 300_000;

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

/// The large-message peer: a 1 MiB window (WRITE target at 0, READ source at 512 KiB), a
/// receive of a SEND at 256 KiB and one for a WRITE WITH IMM.
fn peer_big(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, _scq, mut rcq) = rc_qp(&mut dev);
    let mut buf = dev.alloc_buf(&pd, BIG, Access::ALL, Pages::Normal).unwrap();
    buf.get_mut(BIG / 2, READ_LEN)
        .unwrap()
        .copy_from_slice(&pattern(5, READ_LEN));
    let window = buf.remote(0, BIG).unwrap();
    let mut conn =
        connect_qp_client(&mut dev, &mut qp, addr, &big_opts(), Some(window), STALL).unwrap();
    let into = [buf.sge(BIG / 4, SEND_LEN).unwrap()];
    qp.rq().post_recv(RecvWr::new(1, &into)).unwrap();
    qp.rq().post_recv(RecvWr::new(2, &[])).unwrap();
    qp.rq().ring();
    conn.sync(STALL).unwrap();
    let c = one(&mut dev, &mut rcq);
    assert_eq!(
        (c.status, c.wr_id, c.byte_len, c.opcode),
        (WcStatus::Success, 1, SEND_LEN as u32, WcOpcode::Recv)
    );
    assert!(buf.get(BIG / 4, SEND_LEN).unwrap() == pattern(2, SEND_LEN));
    let c = one(&mut dev, &mut rcq);
    assert_eq!(
        (c.status, c.wr_id, c.byte_len, c.imm, c.opcode),
        (
            WcStatus::Success,
            2,
            IMM_LEN as u32,
            0xbeef,
            WcOpcode::RecvRdmaWithImm
        )
    );
    conn.sync(STALL).unwrap();
    assert!(buf.get(0, WRITE_LEN).unwrap() == pattern(1, WRITE_LEN));
    assert!(buf.get(WRITE_LEN, IMM_LEN).unwrap() == pattern(3, IMM_LEN));
    for i in 0..8 {
        assert_eq!(
            buf.get(BIG / 4 + SEND_LEN + 8 * i, 8).unwrap(),
            [i as u8 + 1; 8]
        );
    }
    println!("peer ok");
}

#[test]
fn messages_of_many_packets_and_many_in_flight_cross_two_processes() {
    big_messages("big", None);
}

/// The same over a link that loses 3% of the packets this side sends (requests): go-back-N
/// and the ACK timeout bring every byte over.
#[test]
fn a_lossy_link_loses_no_byte() {
    let faults = FaultConfig {
        seed: 7,
        packet_drop_ppm: 30_000,
        ..FaultConfig::default()
    };
    let dev = big_messages("lossy", Some(faults));
    assert!(
        dev.fault_stats().packets_dropped > 0,
        "{:?}",
        dev.fault_stats()
    );
}

fn big_messages(test: &str, faults: Option<FaultConfig>) -> SimDevice {
    let name = fabric_name(test);
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("big", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.set_faults(faults);
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, BIG, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &big_opts(), None, STALL).unwrap();
    let window = conn.remote_mr().expect("the peer shares its window");
    conn.sync(STALL).unwrap();
    mine.get_mut(0, WRITE_LEN)
        .unwrap()
        .copy_from_slice(&pattern(1, WRITE_LEN));
    mine.get_mut(WRITE_LEN, SEND_LEN)
        .unwrap()
        .copy_from_slice(&pattern(2, SEND_LEN));
    mine.get_mut(WRITE_LEN + SEND_LEN, IMM_LEN)
        .unwrap()
        .copy_from_slice(&pattern(3, IMM_LEN));
    for i in 0..8 {
        mine.get_mut(BIG - 64 + 8 * i, 8)
            .unwrap()
            .copy_from_slice(&[i as u8 + 1; 8]);
    }
    // Twelve WQEs rung at once: a WRITE, a SEND and a WRITE WITH IMM of many packets, a
    // READ of many segments, eight 8-byte WRITEs behind it.
    let w = [mine.sge(0, WRITE_LEN).unwrap()];
    let s = [mine.sge(WRITE_LEN, SEND_LEN).unwrap()];
    let m = [mine.sge(WRITE_LEN + SEND_LEN, IMM_LEN).unwrap()];
    let r = [mine.sge(BIG / 2, READ_LEN).unwrap()];
    let sq = qp.sq();
    sq.post(SendWr::write_to(1, &w, window.target(0, WRITE_LEN as u64).unwrap()).signaled())
        .unwrap();
    sq.post(SendWr::send(2, &s).signaled()).unwrap();
    let t = window.target(WRITE_LEN as u64, IMM_LEN as u64).unwrap();
    sq.post(SendWr::write_imm_to(3, &m, t, 0xbeef).signaled())
        .unwrap();
    sq.post(
        SendWr::read_from(
            4,
            &r,
            window.target(BIG as u64 / 2, READ_LEN as u64).unwrap(),
        )
        .signaled(),
    )
    .unwrap();
    let smalls: Vec<[Sge; 1]> = (0..8)
        .map(|i| [mine.sge(BIG - 64 + 8 * i, 8).unwrap()])
        .collect();
    for (i, sge) in smalls.iter().enumerate() {
        let t = window
            .target((BIG / 4 + SEND_LEN + 8 * i) as u64, 8)
            .unwrap();
        sq.post(SendWr::write_to(5 + i as u64, sge, t).signaled())
            .unwrap();
    }
    sq.ring();
    for id in 1..=12 {
        let c = one(&mut dev, &mut scq);
        assert_eq!(
            (c.wr_id, c.status),
            (id, WcStatus::Success),
            "{c:?} {:?}",
            dev.fabric_stats()
        );
    }
    assert!(
        mine.get(BIG / 2, READ_LEN).unwrap() == pattern(5, READ_LEN),
        "the READ's segments in order"
    );
    conn.sync(STALL).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("peer ok"),
        "the peer process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    dev
}

/// The RNR peer: asks its requesters to wait 655 ms after an RNR NAK (`min_rnr_timer` 0),
/// and posts its receive 100 ms after the first SEND reached it.
fn peer_late(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, _scq, mut rcq) = rc_qp(&mut dev);
    let buf = dev
        .alloc_buf(&pd, 4096, Access::ALL, Pages::Normal)
        .unwrap();
    let o = ConnectOpts {
        min_rnr_timer: 0,
        ..opts()
    };
    let mut conn = connect_qp_client(&mut dev, &mut qp, addr, &o, None, STALL).unwrap();
    conn.sync(STALL).unwrap();
    while dev.fabric_stats().unwrap().2.received == 0 {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(100));
    let into = [buf.sge(0, 64).unwrap()];
    qp.rq().post_recv(RecvWr::new(7, &into)).unwrap();
    qp.rq().ring();
    let c = one(&mut dev, &mut rcq);
    assert_eq!((c.status, c.wr_id, c.byte_len), (WcStatus::Success, 7, 5));
    assert_eq!(buf.get(0, 5).unwrap(), b"later");
    conn.sync(STALL).unwrap();
    println!("peer ok");
}

#[test]
fn the_requester_waits_the_rnr_timer_its_nak_carries() {
    let name = fabric_name("late");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("late", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    // One RNR retry: at this side's own timer (0.64 ms) it would be spent long before the
    // receive comes; at the 655 ms the peer's NAK carries, the retry finds it.
    let o = ConnectOpts {
        rnr_retry: 1,
        ..opts()
    };
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &o, None, STALL).unwrap();
    conn.sync(STALL).unwrap();
    mine.get_mut(0, 5).unwrap().copy_from_slice(b"later");
    let sge = [mine.sge(0, 5).unwrap()];
    qp.sq().post(SendWr::send(1, &sge).signaled()).unwrap();
    qp.sq().ring();
    let c = one(&mut dev, &mut scq);
    assert_eq!((c.wr_id, c.status), (1, WcStatus::Success));
    conn.sync(STALL).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("peer ok"),
        "the peer process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Sizes of the SENDs into the SRQ peer: one packet, several, a receive's worth.
const SRQ_SENDS: [usize; 3] = [8, 5000, 8192];

/// The SRQ peer: its QP takes its receives from an SRQ (three of 8 KiB).
fn peer_srq(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let pd = dev.alloc_pd().unwrap();
    let mut srq = dev.create_srq(&pd, 8, 1).unwrap();
    let mut cfg = QpConfig::new(QpType::Rc);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let mut scq = dev.create_cq(64).unwrap();
    let mut rcq = dev.create_cq(64).unwrap();
    let mut qp = dev
        .create_qp(&pd, &mut scq, Some(&mut rcq), Some(&mut srq), &cfg)
        .unwrap();
    let buf = dev
        .alloc_buf(&pd, 3 * 8192, Access::ALL, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_client(&mut dev, &mut qp, addr, &big_opts(), None, STALL).unwrap();
    for i in 0..3 {
        let into = [buf.sge(i * 8192, 8192).unwrap()];
        srq.post_recv(RecvWr::new(100 + i as u64, &into)).unwrap();
    }
    srq.ring();
    conn.sync(STALL).unwrap();
    for (i, &len) in SRQ_SENDS.iter().enumerate() {
        let c = one(&mut dev, &mut rcq);
        assert_eq!(
            (c.status, c.wr_id, c.byte_len, c.opcode),
            (
                WcStatus::Success,
                100 + i as u64,
                len as u32,
                WcOpcode::Recv
            )
        );
        assert!(buf.get(i * 8192, len).unwrap() == pattern(10 + i as u8, len));
    }
    conn.sync(STALL).unwrap();
    println!("peer ok");
}

#[test]
fn sends_into_an_srq_of_another_process() {
    let name = fabric_name("srq");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("srq", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 3 * 8192, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &big_opts(), None, STALL).unwrap();
    conn.sync(STALL).unwrap();
    for (i, &len) in SRQ_SENDS.iter().enumerate() {
        mine.get_mut(i * 8192, len)
            .unwrap()
            .copy_from_slice(&pattern(10 + i as u8, len));
        let sge = [mine.sge(i * 8192, len).unwrap()];
        qp.sq()
            .post(SendWr::send(i as u64, &sge).signaled())
            .unwrap();
    }
    qp.sq().ring();
    for i in 0..3 {
        let c = one(&mut dev, &mut scq);
        assert_eq!((c.wr_id, c.status), (i, WcStatus::Success), "{c:?}");
    }
    conn.sync(STALL).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("peer ok"),
        "the peer process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

fn ud_qp(dev: &mut SimDevice) -> (SimPd, SimQp, SimCq) {
    let pd = dev.alloc_pd().unwrap();
    let mut cfg = QpConfig::new(QpType::Ud);
    (cfg.caps.max_send_wr, cfg.caps.max_recv_wr) = (16, 16);
    let mut cq = dev.create_cq(64).unwrap();
    let qp = dev.create_qp(&pd, &mut cq, None, None, &cfg).unwrap();
    (pd, qp, cq)
}

/// The UD peer: two receives; the datagram with the wrong Q_Key never reaches them.
fn peer_ud(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, mut cq) = ud_qp(&mut dev);
    let buf = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let conn = connect_qp_client(&mut dev, &mut qp, addr, &opts(), None, STALL).unwrap();
    let mut conn = conn;
    for i in 0..2 {
        let into = [buf.sge(i * 1024, 40 + 256).unwrap()];
        qp.rq()
            .post_recv(RecvWr::new(20 + i as u64, &into))
            .unwrap();
    }
    qp.rq().ring();
    conn.sync(STALL).unwrap();
    let c = one(&mut dev, &mut cq);
    assert_eq!(
        (c.status, c.wr_id, c.byte_len, c.src_qp),
        (WcStatus::Success, 20, 40 + 32, conn.remote.qpn)
    );
    assert!(c.flags.contains(WcFlags::GRH));
    // The GRH: the sender's GID as source, this device's as destination.
    let grh = buf.get(0, 40).unwrap();
    assert_eq!(&grh[..8], &[0x60, 0, 0, 0, 0, 56, 0x1b, 64]);
    assert_eq!(&grh[8..24], &conn.remote.gid);
    assert_eq!(&grh[24..40], &dev.gid());
    assert_eq!(buf.get(40, 32).unwrap(), &[0xd6; 32]);
    conn.sync(STALL).unwrap();
    // Only one datagram arrived (the one with the wrong Q_Key was dropped).
    let mut wc = [Completion::EMPTY; 2];
    assert_eq!(cq.poll(&mut wc), 0);
    println!("peer ok");
}

#[test]
fn a_datagram_crosses_to_another_process_and_a_wrong_qkey_does_not() {
    let name = fabric_name("ud");
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("ud", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut cq) = ud_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 4096, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &opts(), None, STALL).unwrap();
    let ah = dev.create_ah(&pd, &conn.remote, &opts()).unwrap();
    conn.sync(STALL).unwrap();
    mine.get_mut(0, 32).unwrap().fill(0xd6);
    let sge = [mine.sge(0, 32).unwrap()];
    for (id, qkey) in [(1, opts().qkey ^ 1), (2, opts().qkey)] {
        let dest = UdDest {
            ah: &ah,
            remote_qpn: conn.remote.qpn,
            remote_qkey: qkey,
        };
        qp.sq()
            .post(SendWr::send(id, &sge).to(dest).signaled())
            .unwrap();
        qp.sq().ring();
        let c = one(&mut dev, &mut cq);
        assert_eq!((c.wr_id, c.status), (id, WcStatus::Success));
    }
    conn.sync(STALL).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("peer ok"),
        "the peer process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Bytes of the random-traffic peer's window.
const MIRROR: usize = 256 * 1024;

/// The random-traffic peer: a window for WRITE, READ and atomics; it serves until the
/// client's last sync.
fn peer_mirror(addr: &str) {
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    let (pd, mut qp, _scq, _rcq) = rc_qp(&mut dev);
    let buf = dev
        .alloc_buf(&pd, MIRROR, Access::ALL, Pages::Normal)
        .unwrap();
    let window = buf.remote(0, MIRROR).unwrap();
    let mut conn =
        connect_qp_client(&mut dev, &mut qp, addr, &big_opts(), Some(window), STALL).unwrap();
    conn.sync(STALL).unwrap();
    conn.sync(Duration::from_secs(600)).unwrap();
    let bad = dev.fabric_stats().map_or(0, |(_, _, s)| s.bad_icrc);
    println!("peer ok, bad_icrc {bad}");
}

/// Random batches of WRITEs, READs and fetch-and-adds of random sizes (1 to 40,000 bytes,
/// so one packet to 40) against another process's window, up to 6 in flight: every READ
/// returns what the WRITEs before it left there, byte for byte, every FAA the running sum.
/// `RDMA_DIRECT_FABRIC_FUZZ_OPS` sets the number of operations (default 300).
#[test]
fn random_traffic_across_two_processes_reads_back_what_it_wrote() {
    random_traffic("mirror", None);
}

/// The same with 2% of the requester's packets lost.
#[test]
fn random_traffic_over_a_lossy_link_reads_back_what_it_wrote() {
    let faults = FaultConfig {
        seed: 11,
        packet_drop_ppm: 20_000,
        ..FaultConfig::default()
    };
    random_traffic("mirror-lossy", Some(faults));
}

/// The same with 2% of the requester's packets damaged (one bit flipped on the way): the
/// peer's ring drops each on its check word and counts it, none is executed (every READ
/// and FAA still reads back what was written).
#[test]
fn random_traffic_over_a_damaging_link_reads_back_what_it_wrote() {
    let faults = FaultConfig {
        seed: 12,
        packet_corrupt_ppm: 20_000,
        ..FaultConfig::default()
    };
    let (dev, bad_icrc) = random_traffic("mirror-damage", Some(faults));
    let corrupted = dev.fault_stats().packets_corrupted;
    assert!(corrupted > 0, "{:?}", dev.fault_stats());
    assert_eq!(
        bad_icrc, corrupted,
        "every damaged packet dropped by the peer's check"
    );
}

/// The same with 5% of the requester's packets held back for 1 to 6 engine passes (so
/// overtaken by later ones).
#[test]
fn random_traffic_over_a_delaying_link_reads_back_what_it_wrote() {
    let faults = FaultConfig {
        seed: 13,
        packet_delay_ppm: 50_000,
        max_delay_passes: 6,
        ..FaultConfig::default()
    };
    let (dev, _) = random_traffic("mirror-delay", Some(faults));
    assert!(
        dev.fault_stats().packets_delayed > 0,
        "{:?}",
        dev.fault_stats()
    );
}

/// The same with 5% of the requester's packets sent twice (a WRITE or FAA executed twice
/// would show in the READs and the running sum).
#[test]
fn random_traffic_over_a_duplicating_link_reads_back_what_it_wrote() {
    let faults = FaultConfig {
        seed: 14,
        packet_duplicate_ppm: 50_000,
        ..FaultConfig::default()
    };
    let (dev, _) = random_traffic("mirror-dup", Some(faults));
    assert!(
        dev.fault_stats().packets_duplicated > 0,
        "{:?}",
        dev.fault_stats()
    );
}

/// Runs the random traffic; returns the device and the peer's count of packets dropped on
/// their check word.
fn random_traffic(test: &str, faults: Option<FaultConfig>) -> (SimDevice, u64) {
    let ops: usize = std::env::var("RDMA_DIRECT_FABRIC_FUZZ_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let name = fabric_name(test);
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_peer("mirror", l.local_addr().unwrap(), &name);
    let mut dev = SimDevice::new();
    dev.set_faults(faults);
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    // Local: a WRITE source and a READ destination per position of a batch, the FAA results.
    const SLOT: usize = 40_000;
    let mut mine = dev
        .alloc_buf(&pd, 16 * SLOT, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &big_opts(), None, STALL).unwrap();
    let window = conn.remote_mr().unwrap();
    conn.sync(STALL).unwrap();
    // What the peer's window holds (it starts zeroed); the counter lives in its last 8 bytes.
    let mut shadow = vec![0u8; MIRROR];
    let counter_at = MIRROR - 8;
    let mut sum = 0u64;
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut done = 0;
    let mut id = 0u64;
    while done < ops {
        let batch = 1 + rng.next() as usize % 6;
        let mut reads = Vec::new();
        let mut faas = Vec::new();
        for k in 0..batch {
            id += 1;
            let len = match rng.next() % 4 {
                0 => 1 + rng.next() as usize % 64,
                1 => 1 + rng.next() as usize % 4096,
                _ => 1 + rng.next() as usize % (SLOT - 1),
            };
            let off = rng.next() as usize % (counter_at - len);
            let t = window.target(off as u64, len as u64).unwrap();
            match rng.next() % 3 {
                0 => {
                    // WRITE fresh bytes from this batch position's source area.
                    let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
                    mine.get_mut(k * SLOT, len).unwrap().copy_from_slice(&bytes);
                    shadow[off..off + len].copy_from_slice(&bytes);
                    let sge = [mine.sge(k * SLOT, len).unwrap()];
                    qp.sq()
                        .post(SendWr::write_to(id, &sge, t).signaled())
                        .unwrap();
                }
                1 => {
                    let at = (8 + k) * SLOT;
                    mine.get_mut(at, len).unwrap().fill(0xee);
                    let sge = [mine.sge(at, len).unwrap()];
                    qp.sq()
                        .post(SendWr::read_from(id, &sge, t).signaled())
                        .unwrap();
                    reads.push((at, off, len, shadow[off..off + len].to_vec()));
                }
                _ => {
                    let add = rng.next() % 1000;
                    let at = 15 * SLOT + 8 * faas.len();
                    let sge = [mine.sge(at, 8).unwrap()];
                    let t = window.target(counter_at as u64, 8).unwrap();
                    qp.sq()
                        .post(SendWr::faa_at(id, &sge, t, add).signaled())
                        .unwrap();
                    faas.push((at, sum));
                    sum += add;
                }
            }
        }
        qp.sq().ring();
        for want in id + 1 - batch as u64..=id {
            let c = one(&mut dev, &mut scq);
            assert_eq!((c.wr_id, c.status), (want, WcStatus::Success), "{c:?}");
        }
        for (at, off, len, want) in reads {
            assert!(
                mine.get(at, len).unwrap() == &want[..],
                "READ of {len} bytes at {off} after {done} operations"
            );
        }
        for (at, before) in faas {
            let got = u64::from_ne_bytes(mine.get(at, 8).unwrap().try_into().unwrap());
            assert_eq!(got, before, "FAA after {done} operations");
        }
        done += batch;
    }
    if faults.is_some_and(|f| f.packet_drop_ppm > 0) {
        assert!(
            dev.fault_stats().packets_dropped > 0,
            "{:?}",
            dev.fault_stats()
        );
    }
    conn.sync(STALL).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.contains("peer ok"),
        "the peer process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let bad_icrc = text
        .split("bad_icrc ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .expect("the peer reports its check-word drops");
    (dev, bad_icrc)
}
