//! The setup the two-process sim fabric tests share (tests/sim_fabric.rs and its parts,
//! tests/sim_fabric_read_faults.rs): the test binary runs itself again as the peer process
//! (its `peer_process` test, ignored unless [`PEER`] names a role and the server's address),
//! on a fabric of the test's own ([`FABRIC`], a file under /dev/shm removed by [`Removed`]);
//! each side makes an RC QP ([`rc_qp`]), connects with [`opts`] and waits for completions one
//! at a time ([`one`]). A peer that ends well prints `peer ok`; [`peer_ok`] checks that.

use rdma_direct::prelude::*;
use rdma_direct::providers::sim::SimPd;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The variable naming the peer's role and the server's address (`ROLE ADDR`).
pub const PEER: &str = "RDMA_DIRECT_FABRIC_PEER";
/// The variable naming the fabric the sim devices join.
pub const FABRIC: &str = "RDMA_DIRECT_SIM_FABRIC";
/// Liveness only: a completion or a sync that takes longer is a hang.
pub const STALL: Duration = Duration::from_secs(30);

/// A fabric name of this test run only.
pub fn fabric_name(test: &str) -> String {
    format!("rdma-direct-test-{}-{test}", std::process::id())
}

/// The fabric file of that name, removed on drop.
pub struct Removed(pub String);
impl Drop for Removed {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(std::path::Path::new("/dev/shm").join(&self.0));
    }
}

/// A PD and an RC QP (16 sends, 16 receives) with its send and receive CQs of 64 entries.
pub fn rc_qp(dev: &mut SimDevice) -> (SimPd, SimQp, SimCq, SimCq) {
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

/// The next completion of `cq` (a hang past [`STALL`] fails the test).
pub fn one(dev: &mut SimDevice, cq: &mut SimCq) -> Completion {
    let mut wc = [Completion::EMPTY];
    let n = poll_wait(dev, cq, &mut wc, STALL).unwrap();
    assert_eq!(n, 1);
    wc[0]
}

/// This test binary as the peer process in `role`, to connect to `addr` on `fabric`, its
/// output captured; the caller may add to its environment before spawning it.
pub fn peer_command(role: &str, addr: std::net::SocketAddr, fabric: &str) -> Command {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "peer_process", "--ignored", "--nocapture"])
        .env(PEER, format!("{role} {addr}"))
        .env(FABRIC, fabric)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

/// [`peer_command`], spawned.
pub fn spawn_peer(role: &str, addr: std::net::SocketAddr, fabric: &str) -> Child {
    peer_command(role, addr, fabric).spawn().unwrap()
}

/// An ACK timeout of 4.096 µs × 2^14 ≈ 67 ms and five retries: a dead peer is found out
/// within half a second, whatever the default retry count means, and a peer slowed by a
/// loaded machine is not taken for a dead one.
pub fn opts() -> ConnectOpts {
    ConnectOpts {
        timeout: 14,
        retry_cnt: 5,
        ..ConnectOpts::default()
    }
}

/// Wait for the peer; it must have ended well and printed `peer ok`. Its output.
pub fn peer_ok(child: Child) -> String {
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && text.contains("peer ok"),
        "the peer process: {}\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    text
}
