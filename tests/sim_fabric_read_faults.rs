//! READ responses damaged, lost, duplicated or delayed on their way back over the sim fabric:
//! the fault injector runs on the responder (the peer process), so what it hits are the
//! answers — READ responses and ACKs. The requester (this process) retries, and every READ
//! lands exactly once and right, byte for byte, with nothing written outside the bytes it
//! names; when every response is damaged or lost the READ ends in RETRY_EXC_ERR once the
//! retry budget runs out (the rest flushed) and its destination is untouched.
//!
//! The test binary runs itself again as the peer (`RDMA_DIRECT_FABRIC_PEER` names the role
//! and the server's address, `RDMA_DIRECT_FABRIC_PEER_FAULTS` its fault injector); each
//! test has its own fabric file, removed at the end (the setup shared with
//! tests/sim_fabric.rs is in tests/common/fabric.rs).

mod common;

use common::fabric::*;
use rdma_direct::prelude::*;
use rdma_direct::providers::sim::FaultConfig;
use std::net::TcpListener;
use std::process::Child;
use std::time::Duration;

const PEER_FAULTS: &str = "RDMA_DIRECT_FABRIC_PEER_FAULTS";
/// The peer's window: READ source and WRITE target.
const WINDOW: usize = 256 * 1024;
/// One destination (or WRITE source) slot of the requester.
const SLOT: usize = 40_000;
/// Requests in flight at most.
const BATCH: usize = 6;
/// The fill of a READ destination slot before the READ.
const FILL: u8 = 0xee;

/// The fabric name of READ-response fault test `test`.
fn fault_fabric(test: &str) -> String {
    fabric_name(&format!("rdfault-{test}"))
}

/// Path MTU 1024 (a 40,000-byte READ is 40 response packets); an ACK timeout of 67 ms and
/// five retries.
fn read_opts() -> ConnectOpts {
    ConnectOpts {
        path_mtu: Some(Mtu::Mtu1024),
        ..opts()
    }
}

/// What the peer's window holds at first: a pattern a misplaced segment shows in.
fn initial(len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u32).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// `seed drop corrupt duplicate delay` (ppm), as the peer reads it.
fn faults_text(f: &FaultConfig) -> String {
    format!(
        "{} {} {} {} {}",
        f.seed, f.packet_drop_ppm, f.packet_corrupt_ppm, f.packet_duplicate_ppm, f.packet_delay_ppm
    )
}

/// The peer process (role `reader`) with its fault injector.
fn spawn_reader(addr: std::net::SocketAddr, fabric: &str, faults: &FaultConfig) -> Child {
    peer_command("reader", addr, fabric)
        .env(PEER_FAULTS, faults_text(faults))
        .spawn()
        .unwrap()
}

/// The peer: the responder, on its own sim device (device thread: it answers on its own),
/// its fault injector on what it sends, sharing its window; it waits for the requester's
/// last sync and prints what its injector did.
#[test]
#[ignore = "the peer process of the READ-response fault tests"]
fn peer_process() {
    let Ok(role) = std::env::var(PEER) else {
        println!("skipped: the peer process of the READ-response fault tests");
        return;
    };
    let (_, addr) = role.split_once(' ').unwrap();
    let f: Vec<u64> = std::env::var(PEER_FAULTS)
        .unwrap()
        .split(' ')
        .map(|v| v.parse().unwrap())
        .collect();
    let ppm = |i: usize| u32::try_from(f[i]).unwrap();
    let faults = FaultConfig {
        seed: f[0],
        packet_drop_ppm: ppm(1),
        packet_corrupt_ppm: ppm(2),
        packet_duplicate_ppm: ppm(3),
        packet_delay_ppm: ppm(4),
        max_delay_passes: 6,
        ..FaultConfig::default()
    };
    let mut dev = SimDevice::new();
    dev.start_device_thread().unwrap();
    dev.join_fabric(None).unwrap();
    dev.set_faults(Some(faults));
    let (pd, mut qp, _scq, _rcq) = rc_qp(&mut dev);
    let mut buf = dev
        .alloc_buf(&pd, WINDOW, Access::ALL, Pages::Normal)
        .unwrap();
    buf.get_mut(0, WINDOW)
        .unwrap()
        .copy_from_slice(&initial(WINDOW));
    let window = buf.remote(0, WINDOW).unwrap();
    let mut conn =
        connect_qp_client(&mut dev, &mut qp, addr, &read_opts(), Some(window), STALL).unwrap();
    conn.sync(STALL).unwrap();
    conn.sync(Duration::from_secs(600)).unwrap();
    let s = dev.fault_stats();
    println!(
        "peer ok dropped {} corrupted {} duplicated {} delayed {}",
        s.packets_dropped, s.packets_corrupted, s.packets_duplicated, s.packets_delayed
    );
}

/// What the peer's injector did: (dropped, corrupted, duplicated, delayed).
fn peer_counts(child: Child) -> [u64; 4] {
    let text = peer_ok(child);
    let line = text.lines().find(|l| l.starts_with("peer ok")).unwrap();
    let n: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    [n[0], n[1], n[2], n[3]]
}

/// Random batches (up to [`BATCH`] in flight) of READs (two in three) and WRITEs of 1 to
/// 40,000 bytes against the peer's window. Each READ's destination slot is filled with
/// [`FILL`] first and checked after its completion: the bytes it names hold what the window
/// held (the WRITEs before it included), every other byte of the slot is still [`FILL`].
/// The WRITEs change the window between batches, so a stale or duplicated response landing
/// late shows. Returns the peer's injector counts and this side's check-word drops.
fn reads_through(test: &str, faults: FaultConfig, ops: usize) -> ([u64; 4], u64) {
    let name = fault_fabric(test);
    let _rm = Removed(name.clone());
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let child = spawn_reader(l.local_addr().unwrap(), &name, &faults);
    let mut dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
    let mut mine = dev
        .alloc_buf(&pd, 2 * BATCH * SLOT, Access::LOCAL_WRITE, Pages::Normal)
        .unwrap();
    let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &read_opts(), None, STALL).unwrap();
    let window = conn.remote_mr().unwrap();
    conn.sync(STALL).unwrap();
    let mut shadow = initial(WINDOW);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let (mut done, mut id, mut reads_done) = (0, 0u64, 0);
    while done < ops {
        let batch = 1 + next() as usize % BATCH;
        let mut reads = Vec::new();
        for k in 0..batch {
            id += 1;
            let len = match next() % 3 {
                0 => 1 + next() as usize % 64,
                1 => 1 + next() as usize % 4096,
                _ => 1 + next() as usize % SLOT,
            };
            let off = next() as usize % (WINDOW - len);
            let t = window.target(off as u64, len as u64).unwrap();
            if next() % 3 == 0 {
                let bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                mine.get_mut(k * SLOT, len).unwrap().copy_from_slice(&bytes);
                shadow[off..off + len].copy_from_slice(&bytes);
                let sge = [mine.sge(k * SLOT, len).unwrap()];
                qp.sq()
                    .post(SendWr::write_to(id, &sge, t).signaled())
                    .unwrap();
            } else {
                // Land somewhere inside the slot, not at its start: bytes on both sides
                // of the destination are checked.
                let at = (BATCH + k) * SLOT + next() as usize % (SLOT - len + 1);
                mine.get_mut((BATCH + k) * SLOT, SLOT).unwrap().fill(FILL);
                let sge = [mine.sge(at, len).unwrap()];
                qp.sq()
                    .post(SendWr::read_from(id, &sge, t).signaled())
                    .unwrap();
                reads.push((k, at, off, len, shadow[off..off + len].to_vec()));
            }
        }
        qp.sq().ring();
        for want in id + 1 - batch as u64..=id {
            let c = one(&mut dev, &mut scq);
            assert_eq!((c.wr_id, c.status), (want, WcStatus::Success), "{c:?}");
        }
        for (k, at, off, len, want) in reads {
            assert!(
                mine.get(at, len).unwrap() == &want[..],
                "{test}: READ of {len} bytes at {off} after {done} operations"
            );
            let slot = (BATCH + k) * SLOT;
            let before = mine.get(slot, at - slot).unwrap();
            let after = mine.get(at + len, slot + SLOT - at - len).unwrap();
            assert!(
                before.iter().chain(after).all(|&b| b == FILL),
                "{test}: bytes beside a READ's destination were written ({len} bytes at \
                 {off}, after {done} operations)"
            );
            reads_done += 1;
        }
        done += batch;
    }
    assert!(reads_done > 0);
    conn.sync(STALL).unwrap();
    let bad_icrc = dev.fabric_stats().map_or(0, |(_, _, s)| s.bad_icrc);
    (peer_counts(child), bad_icrc)
}

fn ops() -> usize {
    std::env::var("RDMA_DIRECT_FABRIC_FUZZ_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200)
}

/// 3% of the responder's packets (READ responses, ACKs) lost.
#[test]
fn lost_read_responses_are_read_again() {
    let faults = FaultConfig {
        seed: 21,
        packet_drop_ppm: 30_000,
        ..FaultConfig::default()
    };
    let ([dropped, ..], _) = reads_through("lost", faults, ops());
    assert!(dropped > 0, "the peer lost nothing");
}

/// 3% of the responder's packets damaged (one bit flipped): this side's ring drops each on
/// its check word and counts it; none lands.
#[test]
fn damaged_read_responses_are_dropped_and_read_again() {
    let faults = FaultConfig {
        seed: 22,
        packet_corrupt_ppm: 30_000,
        ..FaultConfig::default()
    };
    let ([_, corrupted, ..], bad_icrc) = reads_through("damaged", faults, ops());
    assert!(corrupted > 0, "the peer damaged nothing");
    assert!(
        bad_icrc > 0 && bad_icrc <= corrupted,
        "{bad_icrc} dropped on the check word, {corrupted} damaged"
    );
}

/// 5% of the responder's packets sent twice: a duplicated response lands once.
#[test]
fn duplicated_read_responses_land_once() {
    let faults = FaultConfig {
        seed: 23,
        packet_duplicate_ppm: 50_000,
        ..FaultConfig::default()
    };
    let ([_, _, duplicated, _], _) = reads_through("dup", faults, ops());
    assert!(duplicated > 0, "the peer duplicated nothing");
}

/// 5% of the responder's packets held back for 1 to 6 of its engine passes (overtaken by
/// later ones).
#[test]
fn delayed_read_responses_land_in_order() {
    let faults = FaultConfig {
        seed: 24,
        packet_delay_ppm: 50_000,
        ..FaultConfig::default()
    };
    let ([.., delayed], _) = reads_through("delay", faults, ops());
    assert!(delayed > 0, "the peer delayed nothing");
}

/// Every response lost, or every response damaged: the READ ends in RETRY_EXC_ERR once the
/// retry budget is spent, the READs behind it are flushed, and no byte of any destination
/// was written.
#[test]
fn a_read_whose_every_response_is_lost_or_damaged_ends_in_retry_exc_err() {
    for (test, faults) in [
        (
            "all-lost",
            FaultConfig {
                seed: 25,
                packet_drop_ppm: 1_000_000,
                ..FaultConfig::default()
            },
        ),
        (
            "all-damaged",
            FaultConfig {
                seed: 26,
                packet_corrupt_ppm: 1_000_000,
                ..FaultConfig::default()
            },
        ),
    ] {
        let name = fault_fabric(test);
        let _rm = Removed(name.clone());
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let child = spawn_reader(l.local_addr().unwrap(), &name, &faults);
        let mut dev = SimDevice::new();
        dev.join_fabric(Some(&name)).unwrap();
        let (pd, mut qp, mut scq, _rcq) = rc_qp(&mut dev);
        let mut mine = dev
            .alloc_buf(&pd, 3 * SLOT, Access::LOCAL_WRITE, Pages::Normal)
            .unwrap();
        mine.get_mut(0, 3 * SLOT).unwrap().fill(FILL);
        let mut conn = connect_qp_server(&mut dev, &mut qp, &l, &read_opts(), None, STALL).unwrap();
        let window = conn.remote_mr().unwrap();
        conn.sync(STALL).unwrap();
        for (i, len) in [(0u64, 1usize), (1, 5000), (2, SLOT)] {
            let t = window.target(100, len as u64).unwrap();
            let sge = [mine.sge(i as usize * SLOT, len).unwrap()];
            qp.sq()
                .post(SendWr::read_from(i + 1, &sge, t).signaled())
                .unwrap();
        }
        qp.sq().ring();
        let c = one(&mut dev, &mut scq);
        assert_eq!(
            (c.wr_id, c.status),
            (1, WcStatus::RetryExcErr),
            "{test}: {c:?}"
        );
        for want in 2..=3 {
            let c = one(&mut dev, &mut scq);
            assert_eq!(
                (c.wr_id, c.status),
                (want, WcStatus::WrFlushErr),
                "{test}: {c:?}"
            );
        }
        assert!(
            mine.get(0, 3 * SLOT).unwrap().iter().all(|&b| b == FILL),
            "{test}: a destination was written"
        );
        conn.sync(STALL).unwrap();
        let [dropped, corrupted, ..] = peer_counts(child);
        let bad_icrc = dev.fabric_stats().map_or(0, |(_, _, s)| s.bad_icrc);
        if faults.packet_drop_ppm > 0 {
            assert!(dropped > 0, "{test}");
        } else {
            assert!(
                corrupted > 0 && bad_icrc > 0,
                "{test}: {corrupted} {bad_icrc}"
            );
        }
    }
}
