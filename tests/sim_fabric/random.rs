//! Random traffic (WRITEs, READs, fetch-and-adds) against another process's window, on a
//! clean link and on links that lose, damage, delay and duplicate packets: every READ
//! returns what the WRITEs before it left, byte for byte.

use super::*;

/// Bytes of the random-traffic peer's window.
const MIRROR: usize = 256 * 1024;

/// The random-traffic peer: a window for WRITE, READ and atomics; it serves until the
/// client's last sync.
pub(super) fn peer_mirror(addr: &str) {
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
    let text = peer_ok(child);
    let bad_icrc = text
        .split("bad_icrc ")
        .nth(1)
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .expect("the peer reports its check-word drops");
    (dev, bad_icrc)
}
