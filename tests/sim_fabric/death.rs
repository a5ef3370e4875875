//! A peer that dies mid-stream: killing the responder or the requester ends every request of
//! the survivor's queue as on a link gone dead (successes, one `RETRY_EXC_ERR`, flushes,
//! nothing missing), and the next process to join takes the dead peer's slot (a new
//! generation).

use super::*;

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
pub(super) fn peer_slot() {
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
pub(super) fn peer_stream(addr: &str) {
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
