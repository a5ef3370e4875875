//! A hostile neighbour on the fabric: what a device's inbox gets that is not a well-formed
//! packet for it is dropped and counted, never a panic, never a write outside a window.

use super::*;
use rdma_direct::providers::sim::fabric::packet::{Header, Op, Seg, HEADER_LEN};
use rdma_direct::providers::sim::fabric::{Member, Segment, CELL_LEN};

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

/// While a hot ring brings a packet every pass, a device reads its tail table only every
/// `SWEEP_EVERY` passes; what only the table shows still comes within that many passes: the
/// first packet of a ring that never brought one, a ring whose indices were scribbled over.
/// On a quiet link the table is read on every pass again.
#[test]
fn a_ring_only_the_tail_table_shows_is_seen_within_a_sweep_while_another_is_busy() {
    use rdma_direct::providers::sim::fabric::SWEEP_EVERY;
    let name = fabric_name("sweep");
    let _rm = Removed(name.clone());
    let dev = SimDevice::new();
    dev.join_fabric(Some(&name)).unwrap();
    let (slot, _, _) = dev.fabric_stats().unwrap();
    let seg = Segment::open(Some(&name)).unwrap();
    let mut busy = Member::join(std::sync::Arc::clone(&seg), [0x11; 16]).unwrap();
    let mut other = Member::join(seg, [0x22; 16]).unwrap();
    // Version 0: not a packet; taken, then dropped and counted.
    let junk = [0u8; HEADER_LEN];
    let stats = || dev.fabric_stats().unwrap().2;
    // The busy ring's first packet: no ring is hot yet, so the first pass reads the table.
    assert!(busy.send(slot, &junk));
    assert_eq!(dev.process(), 1);
    assert_eq!(stats().dropped, 1);
    // Passes until `other`'s packet is taken while `busy` brings one every pass.
    let mut until_taken = |dropped_before: u64| {
        for pass in 1..=SWEEP_EVERY + 1 {
            assert!(busy.send(slot, &junk));
            dev.process();
            let d = stats().dropped - dropped_before;
            if d == pass as u64 + 1 {
                return pass;
            }
            assert_eq!(d, pass as u64, "one packet of the busy ring a pass");
        }
        panic!("not taken within {SWEEP_EVERY} passes: {:?}", stats());
    };
    // Its first packet: seen by the tail table, within a sweep.
    assert!(other.send(slot, &junk));
    let pass = until_taken(stats().dropped);
    println!("the other ring's first packet taken on pass {pass}");
    assert!(pass <= SWEEP_EVERY);
    // Now hot itself: its head cell is probed every pass.
    for _ in 0..3 {
        assert!(other.send(slot, &junk));
        assert_eq!(until_taken(stats().dropped), 1);
    }
    // Indices no ring can have, on the other ring: discarded within a sweep too.
    other.corrupt_ring_to(slot, 7, 7 + 1000);
    let mut seen = false;
    for _ in 0..SWEEP_EVERY {
        assert!(busy.send(slot, &junk));
        dev.process();
        if stats().corrupt_cells > 0 {
            seen = true;
            break;
        }
    }
    assert!(seen, "{:?}", stats());
    // Quiet: after more than SWEEP_EVERY passes without a packet the table is read every
    // pass, so a third ring's first packet is taken by the first pass after it.
    for _ in 0..=SWEEP_EVERY {
        assert_eq!(dev.process(), 0);
    }
    let mut third = Member::join(Segment::open(Some(&name)).unwrap(), [0x33; 16]).unwrap();
    for _ in 0..3 {
        let before = stats().dropped;
        assert!(third.send(slot, &junk));
        assert_eq!(dev.process(), 1);
        assert_eq!(stats().dropped, before + 1);
    }
}
